/* A full restore of the gateway's state (no local state: the changelog bulk
 * loaded in sorted runs, state/state_load.h, processor/task.c restore_partition)
 * builds the very state an incremental restore from changelog offset 0 builds
 * record by record — the timer index ('T' keys) included, which neither
 * restore reads from the changelog: gateway_reindex (processor/gateway/
 * sweeper.c) derives it from the reservation ('R') and idempotency ('I')
 * records, in the bulk path once per key and run from the key's last record
 * of the run and the value it replaces in the DB, in the record-by-record path
 * for every record in order.
 *
 * Through the real `holdfast` binary (counter, aggregator and gateway in one
 * process "a", restore_run_mib 1) on the real broker:
 *  1. a mixed workload of multi-line reservations with long ids, so each
 *     reservation leaves several R records of about a KiB (PENDING, a store per
 *     hold result, HELD, then COMMITTED / RELEASED / EXPIRED) and I records:
 *     held (the default 15 min TTL: no timer falls due during the test),
 *     committed (and the webhook retried, and again under another key),
 *     released (then a commit that conflicts), a Reserve retried with its
 *     idempotency key and extended, extended then committed, and a 1 s TTL
 *     that expires during the load (then a late payment, refunded). Several
 *     MiB a changelog partition, so a 1 MiB run is not enough for one;
 *  2. stopped, the gateway's DB folder removed, started again: every gateway
 *     partition restores in full ("from offset -1") in two table files or
 *     more; stopped: the snapshot BULK;
 *  3. a fresh DB there that stores changelog offset 0 for every partition
 *     (input offset -1: the group's), started again: every partition restores
 *     incrementally, record by record, from offset 0; stopped: RECORDWISE;
 *  4. BULK and RECORDWISE hold the same keys with the same values in the same
 *     order, partition by partition (the state module's reserved keys, first
 *     caller byte 0x00 — offsets — aside), timers included, and there are
 *     timers: one per reservation and one per idempotency record.
 * Nothing may change the gateway's state between a restore and the stop that
 * follows it: nothing is due (held reservations expire in 15 min, idempotency
 * records in 24 h, ended reservations are forgotten in 7 days), every saga is
 * settled and every request answered before the first stop; the changelog is
 * checked unchanged after each restart to prove it.
 *
 * With the default retentions the gateway deletes no key in this test, so the
 * changelog has no tombstones (the test prints how many it saw). With
 * retentions of seconds it has, and then the two restores do not come out the
 * same: gateway_reindex arms an idempotency record's timer but does not take
 * it back for the record's tombstone, so record by record every forgotten
 * idempotency key leaves its timer, already due, and a bulk load leaves it only
 * where the record and its tombstone fell into different runs. The first
 * sweeper tick fires those timers (each deletes its key again: one more
 * tombstone in the changelog) and writes its cursor (key C, local, carrying
 * the process run's id); after that the states agree but for C. Not what this
 * test exercises: nothing fires here, so neither timer nor cursor may differ.
 *
 * ITEST_GR_RESERVATIONS scales the workload (default 1800, a multiple of 6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec.h"
#include "harness.h"
#include "lib/client.h"
#include "state.h"

#define WAIT_MS      60000
#define CALL_MS      15000
#define PARTS_MAX    16
#define NSKU         8
#define LINES        4    /* per reservation */
#define TTL_SHORT_MS 1000 /* the expiring reservations' TTL (the smallest allowed) */
#define SKU_STOCK    100000
#define INSTANCE     "a"

/* What a reservation goes through, by i % F__COUNT. */
typedef enum {
    F_HELD,          /* held, default TTL */
    F_COMMIT,        /* committed, the webhook retried, and again under another key */
    F_RELEASE,       /* released, then a commit: CONFLICT */
    F_RETRY,         /* the Reserve retried with its key, then extended: held */
    F_EXPIRE,        /* a 1 s TTL: expires during the load, then a late payment */
    F_EXTEND_COMMIT, /* extended, then committed */
    F__COUNT
} fate_t;

static int n_res;

static const char pad[] = "padding-so-the-records-weigh-a-kilobyte";

static void sku_name(int k, char *out)
{
    snprintf(out, sizeof(hf_sku_t), "gr-sku-%02d-%s", k, pad);
}

static void rid_of(int i, char *out)
{
    snprintf(out, sizeof(hf_id_t), "gr-%05d-reservation-%s", i, pad);
}

/* The reservation index of a reservation id, -1 when not one of ours. */
static int index_of(const char *rid)
{
    int i = -1;
    if (sscanf(rid, "gr-%5d-reservation-", &i) != 1 || i < 0 || i >= n_res)
        return -1;
    return i;
}

static void ikey_of(const char *what, int i, char *out)
{
    snprintf(out, sizeof(hf_id_t), "%s-%05d-%s", what, i, pad);
}

static fate_t fate_of(int i)
{
    return (fate_t)(i % F__COUNT);
}

/* ---- requests, sent in bursts, answered by the replies topic */

typedef enum { RQ_RESERVE, RQ_COMMIT, RQ_RELEASE, RQ_EXTEND } rq_kind_t;

typedef struct {
    int i;
    rq_kind_t kind;
    hf_id_t ikey;
    hf_id_t payment;
    hf_reply_outcome_t want;
    bool answered;
    hf_reply_t rep;
} rq_t;

typedef struct {
    rq_t *v;
    size_t n, cap;
} burst_t;

static rq_t *burst_add(burst_t *b, int i, rq_kind_t kind, const char *ikey, hf_reply_outcome_t want)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 1024;
        b->v = realloc(b->v, b->cap * sizeof *b->v);
        assert_non_null(b->v);
    }
    rq_t *r = &b->v[b->n++];
    memset(r, 0, sizeof *r);
    r->i = i;
    r->kind = kind;
    snprintf(r->ikey, sizeof r->ikey, "%s", ikey);
    r->want = want;
    return r;
}

static hf_record_t reserve_of(int i)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    rid_of(i, q->reservation_id);
    ikey_of("reserve", i, q->idempotency_key);
    q->lines_count = LINES;
    for (int k = 0; k < LINES; k++) {
        sku_name((i + k) % NSKU, q->lines[k].sku);
        q->lines[k].qty = 1 + (i + k) % 3;
    }
    q->ship_to = (hf_geo_t){40.73, -73.99}; /* Manhattan: W1 is nearest */
    q->ttl_ms = fate_of(i) == F_EXPIRE ? TTL_SHORT_MS : 0;
    q->sent_at_ms = harness_now_ms();
    return r;
}

static hf_record_t request_of(const rq_t *r)
{
    char rid[sizeof(hf_id_t)];
    rid_of(r->i, rid);
    hf_record_t rec;
    switch (r->kind) {
    case RQ_RESERVE:
        rec = reserve_of(r->i);
        snprintf(rec.u.reserve.idempotency_key, sizeof rec.u.reserve.idempotency_key, "%s",
                 r->ikey);
        return rec;
    case RQ_COMMIT:
        return harness_commit_req(rid, r->ikey, r->payment);
    case RQ_RELEASE:
        return harness_release_req(rid, r->ikey);
    case RQ_EXTEND:
        memset(&rec, 0, sizeof rec);
        rec.type = HF_REC_EXTEND;
        snprintf(rec.u.extend.reservation_id, sizeof rec.u.extend.reservation_id, "%s", rid);
        snprintf(rec.u.extend.idempotency_key, sizeof rec.u.extend.idempotency_key, "%s", r->ikey);
        rec.u.extend.extend_by_ms = 60000;
        rec.u.extend.sent_at_ms = harness_now_ms();
        return rec;
    }
    fail_msg("request kind %d", r->kind);
    return rec;
}

/* Sends every request of b (in order: a reservation's requests stay in order
 * on its partition), waits for every answer and checks its outcome. */
static void run_burst(hf_client_t *c, burst_t *b, const char *what)
{
    char errstr[256] = "";
    int64_t t0 = harness_now_ms();
    for (size_t k = 0; k < b->n; k++) {
        hf_record_t rec = request_of(&b->v[k]);
        if (client_send_async(c, &rec, errstr, sizeof errstr) != HF_OK)
            fail_msg("client_send_async: %s", errstr);
    }
    if (client_flush(c, 30000, errstr, sizeof errstr) != HF_OK)
        fail_msg("client_flush: %s", errstr);
    size_t answered = 0, foreign = 0;
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (answered < b->n && harness_now_ms() < deadline) {
        hf_reply_t rep;
        int got = client_poll(c, 1000, &rep, errstr, sizeof errstr);
        if (got < 0)
            fail_msg("client_poll: %s", errstr);
        if (got != 1)
            continue;
        int i = index_of(rep.reservation_id);
        rq_t *r = NULL;
        for (size_t k = 0; i >= 0 && k < b->n && !r; k++)
            if (!b->v[k].answered && b->v[k].i == i &&
                strcmp(b->v[k].ikey, rep.idempotency_key) == 0)
                r = &b->v[k];
        if (!r) {
            foreign++;
            continue;
        }
        r->answered = true;
        r->rep = rep;
        answered++;
    }
    print_message("%s: %zu requests answered in %lld ms (%zu other replies)\n", what, answered,
                  (long long)(harness_now_ms() - t0), foreign);
    for (size_t k = 0; k < b->n; k++) {
        const rq_t *r = &b->v[k];
        if (!r->answered)
            fail_msg("%s: reservation %d (fate %d) request %d key %s: no reply within %d ms", what,
                     r->i, fate_of(r->i), r->kind, r->ikey, WAIT_MS);
        if (r->rep.outcome != r->want)
            fail_msg("%s: reservation %d (fate %d) request %d key %s: %s (%s), expected %s", what,
                     r->i, fate_of(r->i), r->kind, r->ikey, hf_reply_outcome_name(r->rep.outcome),
                     r->rep.message, hf_reply_outcome_name(r->want));
    }
}

static void burst_free(burst_t *b)
{
    free(b->v);
    memset(b, 0, sizeof *b);
}

/* ---- the gateway changelog as read back */

typedef struct {
    size_t records[PARTS_MAX], bytes[PARTS_MAX], tombstones;
    size_t total;
    hf_res_status_t *last_status; /* per reservation, of its last R record */
    bool *seen;
} changelog_t;

static void collect_changelog(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    changelog_t *c = opaque;
    assert_true(msg->partition >= 0 && msg->partition < PARTS_MAX);
    c->records[msg->partition]++;
    c->bytes[msg->partition] += msg->key_len + msg->value_len;
    c->total++;
    if (!msg->value) {
        c->tombstones++;
        return;
    }
    if (msg->key_len > 1 && ((const char *)msg->key)[0] == 'R' &&
        rec->type == HF_REC_RESERVATION_STATE) {
        int i = index_of(rec->u.reservation_state.reservation_id);
        if (i >= 0) {
            c->last_status[i] = rec->u.reservation_state.status;
            c->seen[i] = true;
        }
    }
}

static void read_changelog(harness_t *h, changelog_t *c)
{
    free(c->last_status);
    free(c->seen);
    memset(c, 0, sizeof *c);
    c->last_status = calloc((size_t)n_res, sizeof *c->last_status);
    c->seen = calloc((size_t)n_res, sizeof *c->seen);
    assert_non_null(c->last_status);
    assert_non_null(c->seen);
    harness_read(h, HF_T_GATEWAY_CHANGELOG, collect_changelog, c);
}

static void changelog_free(changelog_t *c)
{
    free(c->last_status);
    free(c->seen);
    memset(c, 0, sizeof *c);
}

/* ---- the log */

typedef struct {
    bool seen;
    unsigned long long records, files;
    long long from, ms;
} restored_t;

/* Each gateway partition's last "restored" line of the instance's log after
 * byte start (whole lines only: the last may be half written). */
static void scan_log(const harness_t *h, long start, restored_t out[PARTS_MAX])
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.log", h->workdir, INSTANCE);
    memset(out, 0, sizeof(restored_t) * PARTS_MAX);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, start, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    static char line[16384];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n')
            break;
        const char *m = strstr(line, "gateway: partition ");
        int p = -1;
        restored_t r = {true, 0, 0, 0, 0};
        if (m &&
            sscanf(m,
                   "gateway: partition %d restored: %llu changelog records from offset %lld in "
                   "%lld ms (%llu table files loaded)",
                   &p, &r.records, &r.from, &r.ms, &r.files) == 5 &&
            p >= 0 && p < PARTS_MAX)
            out[p] = r;
    }
    fclose(f);
}

static long log_size(const harness_t *h)
{
    char path[600];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s.log", h->workdir, INSTANCE);
    return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

static void wait_restored(const harness_t *h, long start, int parts, restored_t out[PARTS_MAX])
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    for (;;) {
        scan_log(h, start, out);
        int done = 0;
        for (int p = 0; p < parts; p++)
            done += out[p].seen;
        if (done == parts)
            return;
        if (harness_now_ms() > deadline)
            fail_msg("only %d of %d gateway partitions logged \"restored\" within %d ms (see "
                     "%s/%s.log)",
                     done, parts, WAIT_MS, h->workdir, INSTANCE);
        harness_sleep_ms(50);
    }
}

/* ---- the state DBs */

static void gateway_db_path(const harness_t *h, char *out, size_t size)
{
    /* main.c plan_workers: "<state_dir>/<stage>-<instance>"; the harness's
     * state_dir is <workdir>/state-<instance>. */
    snprintf(out, size, "%s/state-%s/gateway-%s", h->workdir, INSTANCE, INSTANCE);
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void rm_rf(const char *path)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
    assert_false(exists(path));
}

/* A key and its value, readably: a timer's due time, kind and reference; a
 * reservation's status and times; an idempotency record's. */
static void describe(const void *k, size_t kl, const void *v, size_t vl, char *out, size_t size)
{
    const unsigned char *key = k;
    size_t n = 0;
    if (kl >= 11 && key[0] == 'T') {
        uint64_t due = 0;
        for (int b = 0; b < 8; b++)
            due = (due << 8) | key[1 + b];
        snprintf(out, size, "timer due %lld kind %c ref '%.*s' (value %zu bytes)", (long long)due,
                 key[9], (int)(kl - 10), (const char *)key + 10, vl);
        return;
    }
    n += (size_t)snprintf(out + n, size - n, "'");
    for (size_t b = 0; b < kl && n + 8 < size; b++)
        n += (size_t)snprintf(out + n, size - n, key[b] >= 0x20 && key[b] < 0x7f ? "%c" : "\\x%02x",
                              key[b]);
    n += (size_t)snprintf(out + n, size - n, "' ");
    static hf_record_t rec;
    char why[128];
    if (n >= size)
        return;
    if (codec_decode(v, vl, &rec, why, sizeof why) != HF_OK) {
        snprintf(out + n, size - n, "(%zu bytes, not a record: %s)", vl, why);
        return;
    }
    if (rec.type == HF_REC_RESERVATION_STATE) {
        const hf_reservation_state_t *rs = &rec.u.reservation_state;
        snprintf(out + n, size - n,
                 "ReservationState %s expires %lld updated %lld result_deadline %lld "
                 "allocations %d (%zu bytes)",
                 hf_res_status_name(rs->status), (long long)rs->expires_at_ms,
                 (long long)rs->updated_at_ms, (long long)rs->result_deadline_ms,
                 rs->allocations_count, vl);
    } else if (rec.type == HF_REC_IDEMPOTENCY_RECORD) {
        const hf_idempotency_record_t *ir = &rec.u.idempotency_record;
        snprintf(out + n, size - n,
                 "IdempotencyRecord stored %lld complete %d outcome %s (%zu bytes)",
                 (long long)ir->stored_at_ms, ir->complete,
                 hf_reply_outcome_name(ir->reply.outcome), vl);
    } else {
        snprintf(out + n, size - n, "record type %d (%zu bytes)", rec.type, vl);
    }
}

typedef struct {
    size_t keys, by_tag[256], diffs;
} compare_t;

/* Skips the state module's reserved keys (first caller byte 0x00: offsets). */
/* The next key of the comparison: the reserved space (offsets) and the
 * sweeper's cursor (key C: which process run swept up to when, never derived
 * from the changelog; its ticks write it within a second of the restore) are
 * not part of the state a restore rebuilds. */
static bool next_key(state_iter_t *it, const void **k, size_t *kl, const void **v, size_t *vl)
{
    bool more;
    do
        more = state_iter_next(it, k, kl, v, vl);
    while (more && *kl > 0 &&
           (((const unsigned char *)*k)[0] == 0 ||
            (*kl == 1 && ((const char *)*k)[0] == 'C'))); /* GW_SWEEP_CURSOR_KEY */
    return more;
}

static int key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* Walks partition p of both DBs in key order, reporting every difference (the
 * first ones in full); counts the keys of BULK by tag. */
static void compare_partition(state_t *bulk, state_t *rw, int32_t p, compare_t *out)
{
    memset(out, 0, sizeof *out);
    state_iter_t *a = state_iter_new(bulk, NULL, p, "", 0, false);
    state_iter_t *b = state_iter_new(rw, NULL, p, "", 0, false);
    assert_non_null(a);
    assert_non_null(b);
    const void *ka = NULL, *va = NULL, *kb = NULL, *vb = NULL;
    size_t kal = 0, val = 0, kbl = 0, vbl = 0;
    bool more_a = next_key(a, &ka, &kal, &va, &val), more_b = next_key(b, &kb, &kbl, &vb, &vbl);
    static char da[2048], db[2048];
    while (more_a || more_b) {
        int c = !more_a ? 1 : !more_b ? -1 : key_cmp(ka, kal, kb, kbl);
        if (c == 0 && val == vbl && memcmp(va, vb, val) == 0) {
            out->keys++;
            out->by_tag[((const unsigned char *)ka)[0]]++;
        } else {
            if (out->diffs++ < 20) {
                if (c < 0) {
                    describe(ka, kal, va, val, da, sizeof da);
                    print_message("partition %d: only in BULK: %s\n", p, da);
                } else if (c > 0) {
                    describe(kb, kbl, vb, vbl, db, sizeof db);
                    print_message("partition %d: only in RECORDWISE: %s\n", p, db);
                } else {
                    describe(ka, kal, va, val, da, sizeof da);
                    describe(kb, kbl, vb, vbl, db, sizeof db);
                    print_message(
                        "partition %d: value differs:\n  BULK       %s\n  RECORDWISE %s\n", p, da,
                        db);
                }
            }
            if (c <= 0)
                out->by_tag[((const unsigned char *)ka)[0]]++;
        }
        if (c <= 0)
            more_a = next_key(a, &ka, &kal, &va, &val);
        if (c >= 0)
            more_b = next_key(b, &kb, &kbl, &vb, &vbl);
    }
    state_iter_destroy(a);
    state_iter_destroy(b);
}

/* ---- the test */

static void
test_a_bulk_full_restore_of_the_gateway_builds_the_state_of_a_record_by_record_restore(void **st)
{
    n_res = (int)harness_env_int("ITEST_GR_RESERVATIONS", 1800);
    assert_true(n_res >= F__COUNT && n_res % F__COUNT == 0 && n_res <= 99999);
    harness_t h;
    harness_init(&h, "gw-restore");
    int32_t parts = harness_partitions(&h, HF_T_GATEWAY_CHANGELOG);
    assert_true(parts >= 1 && parts <= PARTS_MAX);

    char wpath[512], cwd[256], cfg[1536], errstr[256];
    snprintf(wpath, sizeof wpath, "%s/warehouses.json", h.workdir);
    FILE *f = fopen(wpath, "w");
    assert_non_null(f);
    fputs("{\"warehouses\": [{\"id\":\"W1\",\"lat\":40.71,\"lon\":-74.01,\"cost_per_unit\":1.0},"
          "{\"id\":\"W2\",\"lat\":41.88,\"lon\":-87.63,\"cost_per_unit\":1.0},"
          "{\"id\":\"W3\",\"lat\":34.05,\"lon\":-118.24,\"cost_per_unit\":1.0}]}",
          f);
    fclose(f);
    assert_non_null(getcwd(cwd, sizeof cwd));
    /* reserve_deadline_ms 0: no reserve of a burst is shed (BUSY). One process
     * owns every partition, so there is nothing for a standby to follow; off to
     * keep the runs to the restores under test. escrow_auto_reserves_s 0: the
     * burst's SKUs stay direct, so no allotment is returned by a tick after a
     * restore (a write the comparison below would see). */
    snprintf(cfg, sizeof cfg,
             "{\"warehouses_file\": \"%s/%s\", \"result_timeout_ms\": 5000, "
             "\"reserve_deadline_ms\": 0, \"standby_replicas\": 0, \"restore_run_mib\": 1, "
             "\"escrow_auto_reserves_s\": 0}",
             cwd, wpath);
    int64_t t_start = harness_now_ms();
    pid_t pid = harness_start_with(&h, INSTANCE, "counter,aggregator,gateway", cfg);
    hf_client_t *c = NULL;
    assert_int_equal(client_new(h.bootstrap, NULL, &c, errstr, sizeof errstr), HF_OK);

    /* ---- 1. stock, then the workload */
    char key[128], sku[sizeof(hf_sku_t)];
    for (int k = 0; k < NSKU; k++) {
        sku_name(k, sku);
        hf_record_t fd = harness_feed("W1", sku, HF_FEED_RECEIVE, SKU_STOCK, 1);
        harness_send(&h, HF_T_STOCK_FEED, harness_pair(key, "W1", sku), &fd);
    }
    harness_flush(&h);
    /* The aggregator publishes the availability the gateway routes by: a
     * reserve of every sku answered REJECTED_INVALID (an sku the view does not
     * know yet) is not remembered, and is sent again until it is held. */
    hf_record_t probe;
    memset(&probe, 0, sizeof probe);
    probe.type = HF_REC_RESERVE;
    snprintf(probe.u.reserve.reservation_id, sizeof probe.u.reserve.reservation_id, "gr-probe");
    snprintf(probe.u.reserve.idempotency_key, sizeof probe.u.reserve.idempotency_key, "probe");
    probe.u.reserve.lines_count = NSKU;
    for (int k = 0; k < NSKU; k++) {
        sku_name(k, probe.u.reserve.lines[k].sku);
        probe.u.reserve.lines[k].qty = 1;
    }
    probe.u.reserve.ship_to = (hf_geo_t){40.73, -73.99};
    hf_reply_t rep;
    int64_t deadline = harness_now_ms() + WAIT_MS;
    for (;;) {
        probe.u.reserve.sent_at_ms = harness_now_ms();
        if (client_call(c, &probe, CALL_MS, 3, &rep, errstr, sizeof errstr) != HF_OK)
            fail_msg("client_call: %s", errstr);
        if (rep.outcome != HF_REPLY_REJECTED_INVALID || harness_now_ms() > deadline)
            break;
        harness_sleep_ms(300);
    }
    assert_int_equal(rep.outcome, HF_REPLY_HELD);

    burst_t b = {0};
    for (int i = 0; i < n_res; i++) {
        char ik[sizeof(hf_id_t)];
        ikey_of("reserve", i, ik);
        burst_add(&b, i, RQ_RESERVE, ik, HF_REPLY_HELD);
    }
    run_burst(c, &b, "reserves");
    int64_t *held_until = calloc((size_t)n_res, sizeof *held_until);
    assert_non_null(held_until);
    int64_t expire_last = 0;
    for (size_t k = 0; k < b.n; k++) {
        held_until[b.v[k].i] = b.v[k].rep.expires_at_ms;
        assert_int_equal(b.v[k].rep.allocations_count, LINES);
        if (fate_of(b.v[k].i) == F_EXPIRE && b.v[k].rep.expires_at_ms > expire_last)
            expire_last = b.v[k].rep.expires_at_ms;
        else if (fate_of(b.v[k].i) != F_EXPIRE) /* the default TTL: 15 min */
            assert_true(b.v[k].rep.expires_at_ms > harness_now_ms() + 14 * 60 * 1000);
    }
    burst_free(&b);

    for (int i = 0; i < n_res; i++) {
        char ik[sizeof(hf_id_t)];
        rq_t *r;
        switch (fate_of(i)) {
        case F_COMMIT:
            ikey_of("commit", i, ik);
            r = burst_add(&b, i, RQ_COMMIT, ik, HF_REPLY_COMMITTED);
            ikey_of("payment", i, r->payment);
            break;
        case F_RELEASE:
            ikey_of("release", i, ik);
            burst_add(&b, i, RQ_RELEASE, ik, HF_REPLY_RELEASED);
            break;
        case F_RETRY:
            ikey_of("reserve", i, ik); /* the same Reserve again */
            burst_add(&b, i, RQ_RESERVE, ik, HF_REPLY_HELD);
            ikey_of("extend", i, ik);
            burst_add(&b, i, RQ_EXTEND, ik, HF_REPLY_HELD);
            break;
        case F_EXTEND_COMMIT:
            ikey_of("extend", i, ik);
            burst_add(&b, i, RQ_EXTEND, ik, HF_REPLY_HELD);
            break;
        default:
            break;
        }
    }
    run_burst(c, &b, "commits, releases, retries, extensions");
    for (size_t k = 0; k < b.n; k++) {
        const rq_t *r = &b.v[k];
        if (r->kind == RQ_RESERVE) /* a retry gets the first answer */
            assert_int_equal(r->rep.expires_at_ms, held_until[r->i]);
        if (r->kind == RQ_EXTEND)
            assert_int_equal(r->rep.expires_at_ms, held_until[r->i] + 60000);
    }
    burst_free(&b);

    /* The short-TTL reservations are past their expiry before their payment. */
    while (harness_now_ms() <= expire_last + 100)
        harness_sleep_ms(50);
    for (int i = 0; i < n_res; i++) {
        char ik[sizeof(hf_id_t)];
        rq_t *r;
        switch (fate_of(i)) {
        case F_COMMIT: /* the webhook retried; the same payment under another key */
            ikey_of("commit", i, ik);
            r = burst_add(&b, i, RQ_COMMIT, ik, HF_REPLY_COMMITTED);
            ikey_of("payment", i, r->payment);
            ikey_of("commit-again", i, ik);
            r = burst_add(&b, i, RQ_COMMIT, ik, HF_REPLY_COMMITTED);
            ikey_of("payment", i, r->payment);
            break;
        case F_RELEASE:
            ikey_of("commit", i, ik);
            r = burst_add(&b, i, RQ_COMMIT, ik, HF_REPLY_CONFLICT);
            ikey_of("payment", i, r->payment);
            break;
        case F_EXPIRE: /* late: EXPIRED (the sweeper's, or the commit's own), refunded */
            ikey_of("commit", i, ik);
            r = burst_add(&b, i, RQ_COMMIT, ik, HF_REPLY_EXPIRED);
            ikey_of("payment", i, r->payment);
            break;
        case F_EXTEND_COMMIT:
            ikey_of("commit", i, ik);
            r = burst_add(&b, i, RQ_COMMIT, ik, HF_REPLY_COMMITTED);
            ikey_of("payment", i, r->payment);
            break;
        default:
            break;
        }
    }
    run_burst(c, &b, "commits after");
    burst_free(&b);
    free(held_until);
    int64_t load_ms = harness_now_ms() - t_start;
    assert_int_equal(harness_stop(pid), 0);

    /* Every request answered: the changelog holds every reservation's end. */
    changelog_t cl = {0};
    read_changelog(&h, &cl);
    size_t by_status[HF_RES__COUNT] = {0};
    for (int i = 0; i < n_res; i++) {
        assert_true(cl.seen[i]);
        by_status[cl.last_status[i]]++;
    }
    size_t sixth = (size_t)n_res / F__COUNT;
    assert_int_equal(by_status[HF_RES_HELD], 2 * sixth);
    assert_int_equal(by_status[HF_RES_COMMITTED], 2 * sixth);
    assert_int_equal(by_status[HF_RES_RELEASED], sixth);
    assert_int_equal(by_status[HF_RES_EXPIRED], sixth);
    print_message("load: %d reservations in %lld ms; gateway changelog: %zu records, %zu "
                  "tombstones\n",
                  n_res, (long long)load_ms, cl.total, cl.tombstones);
    for (int p = 0; p < parts; p++)
        print_message("  partition %d: %zu records, %zu bytes\n", p, cl.records[p], cl.bytes[p]);
    size_t cl_total = cl.total;
    size_t cl_records[PARTS_MAX];
    memcpy(cl_records, cl.records, sizeof cl_records);

    /* ---- 2. a full restore: BULK */
    char db_path[600], bulk_path[600], rw_path[600];
    gateway_db_path(&h, db_path, sizeof db_path);
    snprintf(bulk_path, sizeof bulk_path, "%s/gateway-bulk", h.workdir);
    snprintf(rw_path, sizeof rw_path, "%s/gateway-recordwise", h.workdir);
    assert_true(exists(db_path));
    rm_rf(db_path);
    restored_t rs[PARTS_MAX];
    long mark = log_size(&h);
    pid = harness_start_with(&h, INSTANCE, "counter,aggregator,gateway", cfg);
    wait_restored(&h, mark, parts, rs);
    /* Room for the sweeper's ticks (every 250 ms) and the first polls after the
     * restore: anything they changed would show in the comparison below. */
    harness_sleep_ms(1000);
    assert_int_equal(harness_stop(pid), 0);
    unsigned long long files_max = 0;
    for (int p = 0; p < parts; p++) {
        print_message("full restore, partition %d: %llu records from offset %lld in %lld ms, %llu "
                      "table files\n",
                      p, rs[p].records, rs[p].from, rs[p].ms, rs[p].files);
        assert_int_equal(rs[p].from, -1);
        assert_int_equal(rs[p].records, cl_records[p]);
        assert_true(rs[p].files >= 1);
        if (rs[p].files > files_max)
            files_max = rs[p].files;
    }
    /* Several runs: the derived index of a run is rebuilt on top of the values
     * the runs before it ingested. */
    assert_true(files_max >= 2);
    assert_int_equal(rename(db_path, bulk_path), 0);

    /* ---- 3. an incremental restore from changelog offset 0: RECORDWISE */
    state_t *db = NULL;
    assert_int_equal(state_open(db_path, NULL, &db, errstr, sizeof errstr), HF_OK);
    state_buf_t *buf = state_buf_new(db);
    assert_non_null(buf);
    for (int p = 0; p < parts; p++)
        assert_int_equal(state_buf_set_offsets(buf, p, -1, 0, harness_now_ms()), HF_OK);
    assert_int_equal(state_buf_write(db, buf, errstr, sizeof errstr), HF_OK);
    state_buf_destroy(buf);
    state_close(db);
    mark = log_size(&h);
    pid = harness_start_with(&h, INSTANCE, "counter,aggregator,gateway", cfg);
    wait_restored(&h, mark, parts, rs);
    harness_sleep_ms(1000); /* as above */
    assert_int_equal(harness_stop(pid), 0);
    for (int p = 0; p < parts; p++) {
        print_message("incremental restore, partition %d: %llu records from offset %lld in %lld "
                      "ms, %llu table files\n",
                      p, rs[p].records, rs[p].from, rs[p].ms, rs[p].files);
        assert_int_equal(rs[p].from, 0);
        assert_int_equal(rs[p].records, cl_records[p]);
        assert_int_equal(rs[p].files, 0);
    }
    assert_int_equal(rename(db_path, rw_path), 0);

    /* Neither restart wrote to the gateway's changelog: nothing was processed
     * that could have changed the state after its restore. */
    read_changelog(&h, &cl);
    assert_int_equal(cl.total, cl_total);
    changelog_free(&cl);

    /* ---- 4. the two states */
    state_t *bulk = NULL, *rw = NULL;
    assert_int_equal(state_open(bulk_path, NULL, &bulk, errstr, sizeof errstr), HF_OK);
    assert_int_equal(state_open(rw_path, NULL, &rw, errstr, sizeof errstr), HF_OK);
    size_t diffs = 0, timers = 0;
    for (int32_t p = 0; p < parts; p++) {
        compare_t cmp;
        compare_partition(bulk, rw, p, &cmp);
        print_message("partition %d: %zu keys equal, %zu differ; R %zu, I %zu, P %zu, T %zu\n", p,
                      cmp.keys, cmp.diffs, cmp.by_tag['R'], cmp.by_tag['I'], cmp.by_tag['P'],
                      cmp.by_tag['T']);
        diffs += cmp.diffs;
        timers += cmp.by_tag['T'];
        assert_true(cmp.by_tag['R'] > 0);
        /* Derived, and right: every reservation here is due exactly one timer
         * (expiry while HELD, forget once ended; no saga is open), every
         * idempotency record one (its retention). */
        assert_int_equal(cmp.by_tag['T'], cmp.by_tag['R'] + cmp.by_tag['I']);
    }
    state_close(bulk);
    state_close(rw);
    assert_int_equal(diffs, 0);
    assert_true(timers > 0);
    client_destroy(c);
    harness_cleanup(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_a_bulk_full_restore_of_the_gateway_builds_the_state_of_a_record_by_record_restore),
    };
    return cmocka_run_group_tests_name("gateway restore: bulk equals record by record", tests, NULL,
                                       NULL);
}
