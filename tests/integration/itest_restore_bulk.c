/* The bulk path of a full restore (state/state_load.h, processor/task.c
 * restore_partition): a counter whose state folder is gone reads its changelog
 * in sorted runs of restore_run_mib (here 1 MiB, so several table files a
 * partition), ingests every run with the partition's offsets, then rebuilds the
 * open-hold index in one pass over the hold records (the derive mark, state.h).
 * Proved through the real
 * `holdfast` binary on the real broker:
 *
 *  - restored from nothing in several runs, every pair's counter is what it was
 *    (each pair takes one more feed and its new changelog value must be the old
 *    one plus that feed), and holds answer as before: open ones release and
 *    commit, settled ones repeat their outcome or conflict, and a stock count
 *    below what is promised revokes exactly the open holds, newest first (only
 *    a right open-hold index finds them);
 *  - killed -9 between two runs, the next start resumes from the changelog
 *    offset the last ingested run brought (an incremental restore of exactly
 *    the records after it), and the state is again right: the mark the killed
 *    restore left makes the resumed one derive the open-hold index too;
 *  - a restore that finds the mark with a stale index entry beside it (what a
 *    pass killed after some writes, or a standby following the partition, can
 *    leave) deletes the entry and derives the index again from nothing.
 *
 * Each time the restored DB itself is looked at too, after a clean stop: it
 * must hold the changelog's last value of every key and exactly one open-hold
 * index entry per open hold (none for a settled one). Full restores log
 * "restored: N changelog records from offset X ... (F table files loaded)";
 * with HOLDFAST_LOG_LEVEL=debug (inherited by the started process) each
 * ingested run logs "a run of N records loaded", which times the kill.
 *
 * ITEST_RB_PAIRS scales the data set (default 30000 pairs, a multiple of 12). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec.h"
#include "harness.h"
#include "state.h"

#define WAIT_MS   120000
#define PARTS_MAX 16
#define RB_CONFIG "{\"restore_run_mib\": 1}"
#define RB_STOCK  20 /* received by every pair first */
#define RB_QTY_A  2  /* the older hold of a pair with holds */
#define RB_QTY_B  3  /* the newer one */

/* What a pair went through before the restore. Pairs i % 3 == 0 carry two
 * holds, "a" then "b", and fall in four kinds by (i / 3) % 4. */
typedef enum {
    K_BOTH_SETTLED, /* a committed, b released */
    K_B_OPEN,       /* a committed, b open */
    K_A_RELEASED,   /* a released, b open */
    K_BOTH_OPEN,    /* a and b open */
    K_PROBE,        /* i % 3 == 1: no holds; after the restore, holds that must fit exactly */
    K_PLAIN,        /* i % 3 == 2: stock only */
} kind_t;

/* Reservation ids: "<a|b|p|q>-<pair>". */
enum { RID_A, RID_B, RID_P, RID_Q, RIDS };
static const char rid_letter[] = "abpq"; /* by RID_* */

static int n_pairs;

static kind_t kind_of(int i)
{
    if (i % 3 == 1)
        return K_PROBE;
    if (i % 3 == 2)
        return K_PLAIN;
    return (kind_t)((i / 3) % 4);
}

static void pair_ids(int i, char *wh, char *sku)
{
    snprintf(wh, sizeof(hf_wh_t), "WB%d", i % 4);
    snprintf(sku, sizeof(hf_sku_t), "restore-bulk-sku-%06d", i);
}

static void rid_of(int i, int r, char *rid)
{
    snprintf(rid, sizeof(hf_id_t), "%c-%d", rid_letter[r], i);
}

/* The pair index of a "restore-bulk-sku-NNNNNN" sku, -1 if not one of ours. */
static int pair_of_sku(const char *sku, size_t len)
{
    static const char prefix[] = "restore-bulk-sku-";
    size_t pl = sizeof prefix - 1;
    if (len <= pl || memcmp(sku, prefix, pl) != 0)
        return -1;
    int v = 0;
    for (size_t k = pl; k < len; k++) {
        if (sku[k] < '0' || sku[k] > '9')
            return -1;
        v = v * 10 + (sku[k] - '0');
    }
    return v < n_pairs ? v : -1;
}

/* ---- the changelog as read back */

typedef struct {
    int64_t *offsets; /* of every record, in order */
    size_t count, cap;
    size_t bytes; /* keys and values */
} part_log_t;

/* One changelog record, kept to compare a restored DB with. */
typedef struct {
    int32_t part;
    uint32_t order;   /* in the read */
    uint32_t key_len; /* key bytes first, then the value's */
    uint32_t val_len;
    bool tombstone;
    bool open_hold; /* a hold record HELD or REVOKING: its open-hold index entry */
    int64_t seq;
    uint8_t *bytes;
} cl_rec_t;

typedef struct {
    hf_counter_state_t *state; /* last counter value of each pair */
    bool *found;
    part_log_t parts[PARTS_MAX];
    bool keep;      /* keep every record (recs) */
    cl_rec_t *recs; /* after read_changelog: the last record of each key, by (part, key) */
    size_t recs_count, recs_cap;
} changelog_t;

static void changelog_free(changelog_t *c)
{
    free(c->state);
    free(c->found);
    for (int p = 0; p < PARTS_MAX; p++)
        free(c->parts[p].offsets);
    for (size_t k = 0; k < c->recs_count; k++)
        free(c->recs[k].bytes);
    free(c->recs);
    memset(c, 0, sizeof *c);
}

static void keep_record(changelog_t *c, const kafka_msg_t *msg, const hf_record_t *rec)
{
    if (c->recs_count == c->recs_cap) {
        c->recs_cap = c->recs_cap ? c->recs_cap * 2 : 4096;
        c->recs = realloc(c->recs, c->recs_cap * sizeof *c->recs);
        assert_non_null(c->recs);
    }
    cl_rec_t *r = &c->recs[c->recs_count];
    memset(r, 0, sizeof *r);
    r->part = msg->partition;
    r->order = (uint32_t)c->recs_count++;
    r->key_len = (uint32_t)msg->key_len;
    r->tombstone = msg->value == NULL;
    r->val_len = r->tombstone ? 0 : (uint32_t)msg->value_len;
    r->bytes = malloc(r->key_len + r->val_len + 1);
    assert_non_null(r->bytes);
    memcpy(r->bytes, msg->key, r->key_len);
    if (r->val_len)
        memcpy(r->bytes + r->key_len, msg->value, r->val_len);
    if (!r->tombstone && msg->key_len > 0 && ((const char *)msg->key)[0] == 'H') {
        assert_int_equal(rec->type, HF_REC_HOLD_STATE);
        r->open_hold = rec->u.hold_state.status == HF_HOLD_HELD ||
                       rec->u.hold_state.status == HF_HOLD_REVOKING;
        r->seq = rec->u.hold_state.seq;
    }
}

static void collect_changelog(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    changelog_t *c = opaque;
    assert_true(msg->partition >= 0 && msg->partition < PARTS_MAX);
    part_log_t *pl = &c->parts[msg->partition];
    if (pl->count == pl->cap) {
        pl->cap = pl->cap ? pl->cap * 2 : 4096;
        pl->offsets = realloc(pl->offsets, pl->cap * sizeof *pl->offsets);
        assert_non_null(pl->offsets);
    }
    pl->offsets[pl->count++] = msg->offset;
    pl->bytes += msg->key_len + msg->value_len;
    if (c->keep)
        keep_record(c, msg, rec);
    const char *key = msg->key;
    if (msg->key_len < 2 || !msg->value)
        return;
    if (key[0] == 'C') { /* "C<wh>|<sku>|" */
        assert_int_equal(rec->type, HF_REC_COUNTER_STATE);
        const char *bar = memchr(key + 1, '|', msg->key_len - 1);
        assert_non_null(bar);
        size_t sku_len = msg->key_len - (size_t)(bar + 1 - key) - 1;
        int i = pair_of_sku(bar + 1, sku_len);
        assert_true(i >= 0);
        c->state[i] = rec->u.counter_state;
        c->found[i] = true;
    }
}

/* Bytewise, a prefix first: RocksDB's order of the stored keys. */
static int bytes_cmp(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len)
{
    size_t n = a_len < b_len ? a_len : b_len;
    int c = n ? memcmp(a, b, n) : 0;
    return c ? c : (a_len > b_len) - (a_len < b_len);
}

static int rec_cmp(const void *x, const void *y)
{
    const cl_rec_t *a = x, *b = y;
    if (a->part != b->part)
        return a->part < b->part ? -1 : 1;
    int c = bytes_cmp(a->bytes, a->key_len, b->bytes, b->key_len);
    if (c)
        return c;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* recs: sorted by (partition, key), the last record of each key only. */
static void keep_last_records(changelog_t *c)
{
    qsort(c->recs, c->recs_count, sizeof *c->recs, rec_cmp);
    size_t kept = 0;
    for (size_t k = 0; k < c->recs_count; k++) {
        bool last = k + 1 == c->recs_count || c->recs[k + 1].part != c->recs[k].part ||
                    bytes_cmp(c->recs[k + 1].bytes, c->recs[k + 1].key_len, c->recs[k].bytes,
                              c->recs[k].key_len) != 0;
        if (last)
            c->recs[kept++] = c->recs[k];
        else
            free(c->recs[k].bytes);
    }
    c->recs_count = kept;
}

static void read_changelog(harness_t *h, changelog_t *c, bool keep)
{
    changelog_free(c);
    c->keep = keep;
    c->state = calloc((size_t)n_pairs, sizeof *c->state);
    c->found = calloc((size_t)n_pairs, sizeof *c->found);
    assert_non_null(c->state);
    assert_non_null(c->found);
    harness_read(h, HF_T_COUNTER_CHANGELOG, collect_changelog, c);
    if (keep)
        keep_last_records(c);
}

/* Records of partition p at or after offset from. */
static size_t records_from(const part_log_t *pl, int64_t from)
{
    size_t n = 0;
    for (size_t k = 0; k < pl->count; k++)
        n += pl->offsets[k] >= from;
    return n;
}

/* ---- results */

typedef struct {
    int64_t since_ms; /* results applied before are not counted */
    uint8_t *seen;    /* [pair][rid][cmd]: 0 none, outcome + 1, 0xFF more than one */
    size_t counted, foreign;
    size_t by_cmd[HF_CMD__COUNT][HF_OUTCOME__COUNT];
} results_t;

static uint8_t *seen_at(results_t *r, int i, int rid, int cmd)
{
    return &r->seen[((size_t)i * RIDS + (size_t)rid) * HF_CMD__COUNT + (size_t)cmd];
}

static void collect_result(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    results_t *r = opaque;
    assert_int_equal(rec->type, HF_REC_COUNTER_RESULT);
    const hf_counter_result_t *cr = &rec->u.counter_result;
    if (cr->applied_at_ms < r->since_ms)
        return;
    r->counted++;
    r->by_cmd[cr->command][cr->outcome]++;
    int i = pair_of_sku(cr->sku, strlen(cr->sku));
    const char *l = strchr(rid_letter, cr->reservation_id[0]);
    if (i < 0 || !l || cr->reservation_id[0] == '\0' || cr->reservation_id[1] != '-' ||
        atoi(cr->reservation_id + 2) != i) {
        r->foreign++;
        return;
    }
    uint8_t *s = seen_at(r, i, (int)(l - rid_letter), cr->command);
    *s = *s ? 0xFF : (uint8_t)(cr->outcome + 1);
}

static void read_results(harness_t *h, int64_t since_ms, results_t *r)
{
    free(r->seen);
    memset(r, 0, sizeof *r);
    r->since_ms = since_ms;
    r->seen = calloc((size_t)n_pairs * RIDS * HF_CMD__COUNT, 1);
    assert_non_null(r->seen);
    harness_read(h, HF_T_COUNTER_RESULTS, collect_result, r);
}

/* Checks that pair i got exactly the outcomes in want (rid, cmd, outcome
 * triples, -1 ends) and nothing else; prints the first mismatch. */
static bool outcomes_are(results_t *r, int i, const int *want)
{
    uint8_t expect[RIDS][HF_CMD__COUNT];
    memset(expect, 0, sizeof expect);
    for (; want[0] >= 0; want += 3)
        expect[want[0]][want[1]] = (uint8_t)(want[2] + 1);
    for (int rid = 0; rid < RIDS; rid++)
        for (int cmd = 0; cmd < HF_CMD__COUNT; cmd++)
            if (*seen_at(r, i, rid, cmd) != expect[rid][cmd]) {
                print_message("pair %d (kind %d), rid %c, command %d: outcome+1 %d, expected %d "
                              "(0 none, 255 more than one)\n",
                              i, kind_of(i), rid_letter[rid], cmd, *seen_at(r, i, rid, cmd),
                              expect[rid][cmd]);
                return false;
            }
    return true;
}

/* ---- the log */

typedef struct {
    bool seen;
    unsigned long long records, files;
    long long from, ms;
} restored_t;

/* A partition's bulk runs as the debug log tells them ("a run of N records
 * loaded", logged right after the run's ingest). */
typedef struct {
    int count;
    size_t records;
} runs_t;

/* The instance's log from byte start on: each partition's last "restored"
 * line into out, and its runs. Only whole lines count (a line may be half
 * written while it is read). Returns the log's size. */
static long scan_log(const harness_t *h, const char *instance, long start,
                     restored_t out[PARTS_MAX], runs_t runs[PARTS_MAX])
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.log", h->workdir, instance);
    memset(out, 0, sizeof(restored_t) * PARTS_MAX);
    memset(runs, 0, sizeof(runs_t) * PARTS_MAX);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (fseek(f, start, SEEK_SET) != 0) {
        fclose(f);
        return 0;
    }
    static char line[16384];
    long pos = start;
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n')
            break;
        pos += (long)n;
        const char *m = strstr(line, "counter: partition ");
        if (!m)
            continue;
        int p = -1;
        restored_t r = {true, 0, 0, 0, 0};
        if (sscanf(m,
                   "counter: partition %d restored: %llu changelog records from offset %lld in "
                   "%lld ms (%llu table files loaded)",
                   &p, &r.records, &r.from, &r.ms, &r.files) == 5 &&
            p >= 0 && p < PARTS_MAX)
            out[p] = r;
        else if (sscanf(m, "counter: partition %d:", &p) == 1 && p >= 0 && p < PARTS_MAX &&
                 strstr(m, ": a run of ")) {
            runs[p].count++;
            runs[p].records += strtoull(strstr(m, ": a run of ") + 11, NULL, 10);
        }
    }
    fclose(f);
    return pos;
}

static long log_size(const harness_t *h, const char *instance)
{
    char path[600];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s.log", h->workdir, instance);
    return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

/* Waits until every partition logged "restored" after byte start (fails
 * when the process pid exits first). */
static void wait_restored(const harness_t *h, pid_t pid, long start, int parts,
                          restored_t out[PARTS_MAX])
{
    runs_t runs[PARTS_MAX];
    int64_t deadline = harness_now_ms() + WAIT_MS;
    for (;;) {
        scan_log(h, "a", start, out, runs);
        int done = 0;
        for (int p = 0; p < parts; p++)
            done += out[p].seen;
        if (done == parts)
            return;
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            fail_msg("holdfast exited (status 0x%x) before its restore ended (see %s/a.log)",
                     status, h->workdir);
        if (harness_now_ms() > deadline)
            fail_msg("only %d of %d partitions logged \"restored\" within %d ms (see %s/a.log)",
                     done, parts, WAIT_MS, h->workdir);
        harness_sleep_ms(50);
    }
}

static int rm_rf(const char *path)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

static void drop_state(const harness_t *h)
{
    char state_dir[600];
    snprintf(state_dir, sizeof state_dir, "%s/state-a", h->workdir);
    assert_int_equal(rm_rf(state_dir), 0);
    struct stat sb;
    assert_int_not_equal(stat(state_dir, &sb), 0);
}

/* ---- waiting */

/* The last line of the instance's log (for a failure message). */
static void log_last_line(const harness_t *h, char *out, size_t out_size)
{
    char path[600], line[2048];
    snprintf(path, sizeof path, "%s/a.log", h->workdir);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        if (strchr(line, '\n'))
            snprintf(out, out_size, "%s", line);
    fclose(f);
}

/* Polls topic until it has n records; fails at once when the process pid
 * exited meanwhile (an assertion in the counter, say) rather than after
 * WAIT_MS. */
static void wait_records(harness_t *h, pid_t pid, hf_topic_id_t topic, size_t n)
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    for (;;) {
        size_t count = harness_read(h, topic, NULL, NULL);
        if (count == n)
            return;
        if (count > n)
            fail_msg("%s has %zu records, expected %zu", topic_name(topic), count, n);
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            char last[2048];
            log_last_line(h, last, sizeof last);
            fail_msg("holdfast exited (status 0x%x) with %zu of %zu records in %s; its last log "
                     "line: %s",
                     status, count, n, topic_name(topic), last);
        }
        if (harness_now_ms() > deadline)
            fail_msg("%s has %zu records after %d ms, expected %zu", topic_name(topic), count,
                     WAIT_MS, n);
        harness_sleep_ms(250);
    }
}

/* ---- the data set */

typedef struct {
    harness_t h;
    int parts;
    changelog_t before;    /* the changelog when the first process stopped */
    size_t results_before; /* counter results by then */
    size_t levels_before;  /* stock levels by then (holds and settlements emit them too) */
    int64_t before_end_ms; /* every result before the restore was applied before this */
} dataset_t;

/* The counter a pair should have before the restore. */
static void model_before(int i, int64_t *on_hand, int64_t *reserved, int64_t *committed)
{
    *on_hand = RB_STOCK;
    *reserved = 0;
    *committed = 0;
    switch (kind_of(i)) {
    case K_BOTH_SETTLED:
        *on_hand -= RB_QTY_A;
        *committed = RB_QTY_A;
        break;
    case K_B_OPEN:
        *on_hand -= RB_QTY_A;
        *committed = RB_QTY_A;
        *reserved = RB_QTY_B;
        break;
    case K_A_RELEASED:
        *reserved = RB_QTY_B;
        break;
    case K_BOTH_OPEN:
        *reserved = RB_QTY_A + RB_QTY_B;
        break;
    case K_PROBE:
    case K_PLAIN:
        break;
    }
}

/* Sends rec keyed by pair i: holds, settlements and the stock counts that must
 * follow them to the commands topic (a StockFeed there is ordered with the
 * pair's holds), the other feeds to the stock feed. */
static void send_to(harness_t *h, hf_topic_id_t topic, int i, const hf_record_t *rec)
{
    char wh[sizeof(hf_wh_t)], sku[sizeof(hf_sku_t)], key[128];
    pair_ids(i, wh, sku);
    harness_send(h, topic, harness_pair(key, wh, sku), rec);
}

static void send_cmd(harness_t *h, int i, const hf_record_t *rec)
{
    send_to(h, HF_T_COUNTER_COMMANDS, i, rec);
}

/* Feeds every pair, places holds, settles some of them, and stops the
 * counter: its changelog then holds counters, open and settled holds, some
 * keys several times. */
static void populate(dataset_t *d, const char *name)
{
    n_pairs = (int)harness_env_int("ITEST_RB_PAIRS", 30000);
    assert_true(n_pairs >= 12 && n_pairs % 12 == 0 && n_pairs <= 999999);
    harness_init(&d->h, name);
    harness_t *h = &d->h;
    d->parts = harness_partitions(h, HF_T_COUNTER_CHANGELOG);
    assert_true(d->parts >= 1 && d->parts <= PARTS_MAX);
    int64_t t0 = harness_now_ms();
    pid_t pid = harness_start_with(h, "a", "counter", RB_CONFIG);
    char wh[sizeof(hf_wh_t)], sku[sizeof(hf_sku_t)], rid[sizeof(hf_id_t)];
    hf_record_t r;
    for (int i = 0; i < n_pairs; i++) {
        pair_ids(i, wh, sku);
        r = harness_feed(wh, sku, HF_FEED_RECEIVE, RB_STOCK, 1);
        send_to(h, HF_T_STOCK_FEED, i, &r);
    }
    harness_flush(h);
    /* The two input topics are not ordered with each other: stock first. */
    wait_records(h, pid, HF_T_STOCK_LEVELS, (size_t)n_pairs);

    size_t holds = 0, settles = 0;
    for (int i = 0; i < n_pairs; i += 3) {
        pair_ids(i, wh, sku);
        rid_of(i, RID_A, rid);
        r = harness_hold(rid, 0, wh, sku, RB_QTY_A);
        send_cmd(h, i, &r);
        rid_of(i, RID_B, rid);
        r = harness_hold(rid, 0, wh, sku, RB_QTY_B);
        send_cmd(h, i, &r);
        holds += 2;
    }
    harness_flush(h);
    wait_records(h, pid, HF_T_COUNTER_RESULTS, holds);
    /* Settled in a later transaction than the holds: their records appear
     * twice in the changelog, open then settled. */
    for (int i = 0; i < n_pairs; i += 3) {
        pair_ids(i, wh, sku);
        kind_t k = kind_of(i);
        if (k == K_BOTH_SETTLED || k == K_B_OPEN) {
            rid_of(i, RID_A, rid);
            r = harness_commit_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            settles++;
        }
        if (k == K_A_RELEASED) {
            rid_of(i, RID_A, rid);
            r = harness_release_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            settles++;
        }
        if (k == K_BOTH_SETTLED) {
            rid_of(i, RID_B, rid);
            r = harness_release_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            settles++;
        }
    }
    harness_flush(h);
    wait_records(h, pid, HF_T_COUNTER_RESULTS, holds + settles);
    d->results_before = holds + settles;
    results_t res = {0};
    read_results(h, 0, &res);
    assert_int_equal(res.counted, holds + settles);
    assert_int_equal(res.by_cmd[HF_CMD_HOLD][HF_OUTCOME_OK], holds);
    assert_int_equal(res.by_cmd[HF_CMD_COMMIT][HF_OUTCOME_OK] +
                         res.by_cmd[HF_CMD_RELEASE][HF_OUTCOME_OK],
                     settles);
    free(res.seen);
    /* In the transactions of the results: all there. */
    d->levels_before = harness_read(h, HF_T_STOCK_LEVELS, NULL, NULL);
    assert_true(d->levels_before >= (size_t)n_pairs + holds / 2);
    assert_int_equal(harness_stop(pid), 0);
    harness_sleep_ms(2); /* results applied from now on are the restored counter's */
    d->before_end_ms = harness_now_ms();

    read_changelog(h, &d->before, true);
    size_t records = 0, bytes = 0;
    for (int p = 0; p < d->parts; p++) {
        records += d->before.parts[p].count;
        bytes += d->before.parts[p].bytes;
        print_message("changelog partition %d: %zu records, %zu bytes\n", p,
                      d->before.parts[p].count, d->before.parts[p].bytes);
    }
    print_message(
        "%d pairs, %zu holds, %zu settled: %zu changelog records, %zu bytes, in %lld ms\n", n_pairs,
        holds, settles, records, bytes, (long long)(harness_now_ms() - t0));
    for (int i = 0; i < n_pairs; i++) {
        int64_t on_hand, reserved, committed;
        model_before(i, &on_hand, &reserved, &committed);
        const hf_counter_state_t *c = &d->before.state[i];
        if (!d->before.found[i] || c->on_hand != on_hand || c->reserved != reserved ||
            c->committed_total != committed || c->feed_seq != 1 || c->revoking != 0)
            fail_msg("before the restore, pair %d (kind %d): found %d on_hand %lld reserved %lld "
                     "committed %lld feed_seq %lld revoking %lld; expected %lld %lld %lld 1 0",
                     i, kind_of(i), d->before.found[i], (long long)c->on_hand,
                     (long long)c->reserved, (long long)c->committed_total, (long long)c->feed_seq,
                     (long long)c->revoking, (long long)on_hand, (long long)reserved,
                     (long long)committed);
    }
}

static void dataset_free(dataset_t *d)
{
    changelog_free(&d->before);
    harness_cleanup(&d->h);
}

/* Checks a restore's "restored" line of partition p: the number of records it
 * replayed is the number of changelog records at or after its start. */
static void check_restored_count(const dataset_t *d, int p, const restored_t *r)
{
    size_t want = records_from(&d->before.parts[p], r->from < 0 ? 0 : r->from);
    print_message("partition %d restored: %llu records from offset %lld in %lld ms, %llu table "
                  "files\n",
                  p, r->records, r->from, r->ms, r->files);
    if (r->records != want)
        fail_msg("partition %d: the restore from offset %lld applied %llu records; the "
                 "changelog has %zu from there",
                 p, r->from, r->records, want);
}

/* The restored counter, through what it answers: one more feed for every pair
 * (its new value must be the old plus that feed), then per kind commands whose
 * outcomes only the right counters and hold records give, and stock counts
 * whose revocations only a right open-hold index gives. Stops the process. */
static void verify_restored(dataset_t *d, pid_t pid)
{
    harness_t *h = &d->h;
    char wh[sizeof(hf_wh_t)], sku[sizeof(hf_sku_t)], rid[sizeof(hf_id_t)];
    hf_record_t r;
    for (int i = 0; i < n_pairs; i++) {
        pair_ids(i, wh, sku);
        r = harness_feed(wh, sku, HF_FEED_RECEIVE, 1, 2);
        send_to(h, HF_T_STOCK_FEED, i, &r);
    }
    harness_flush(h);
    size_t levels = d->levels_before + (size_t)n_pairs; /* one a pair */
    wait_records(h, pid, HF_T_STOCK_LEVELS, levels);
    changelog_t now = {0};
    read_changelog(h, &now, false);
    size_t wrong = 0;
    for (int i = 0; i < n_pairs; i++) {
        hf_counter_state_t want = d->before.state[i];
        want.on_hand += 1;
        want.feed_seq = 2;
        want.version += 1;
        if (!now.found[i] || memcmp(&now.state[i], &want, sizeof want) != 0) {
            if (wrong++ < 5)
                print_message("pair %d (kind %d) after one more feed: on_hand %lld reserved %lld "
                              "committed %lld version %lld feed_seq %lld; expected %lld %lld "
                              "%lld %lld 2\n",
                              i, kind_of(i), (long long)now.state[i].on_hand,
                              (long long)now.state[i].reserved,
                              (long long)now.state[i].committed_total,
                              (long long)now.state[i].version, (long long)now.state[i].feed_seq,
                              (long long)want.on_hand, (long long)want.reserved,
                              (long long)want.committed_total, (long long)want.version);
        }
    }
    if (wrong)
        fail_msg("%zu of %d counters differ from before the restore", wrong, n_pairs);

    /* Commands per kind, in order on the pair's partition of the commands
     * topic (the counts too, so they come after the holds and commits). */
    size_t expected = 0;
    for (int i = 0; i < n_pairs; i++) {
        pair_ids(i, wh, sku);
        switch (kind_of(i)) {
        case K_BOTH_SETTLED: /* a committed: no release; b released: again OK, no commit */
            rid_of(i, RID_A, rid);
            r = harness_release_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            rid_of(i, RID_B, rid);
            r = harness_release_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            r = harness_commit_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            expected += 3;
            break;
        case K_B_OPEN: /* a committed: no release; b open: released, its units freed */
            rid_of(i, RID_A, rid);
            r = harness_release_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            rid_of(i, RID_B, rid);
            r = harness_release_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            expected += 2;
            break;
        case K_A_RELEASED: /* a released: no commit; a count of 0 revokes b, the only open */
            rid_of(i, RID_A, rid);
            r = harness_commit_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            r = harness_feed(wh, sku, HF_FEED_COUNT, 0, 3);
            send_cmd(h, i, &r);
            rid_of(i, RID_B, rid);
            r = harness_commit_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            expected += 3;
            break;
        case K_BOTH_OPEN: /* a repeated: OK again; a count 2 short revokes b (newest) only */
            rid_of(i, RID_A, rid);
            r = harness_hold(rid, 0, wh, sku, RB_QTY_A);
            send_cmd(h, i, &r);
            r = harness_feed(wh, sku, HF_FEED_COUNT, RB_QTY_A + RB_QTY_B - 2, 3);
            send_cmd(h, i, &r);
            r = harness_commit_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            rid_of(i, RID_B, rid);
            r = harness_commit_hold(rid, 0, wh, sku);
            send_cmd(h, i, &r);
            expected += 4;
            break;
        case K_PROBE: /* exactly what is available fits, one more unit does not */
            rid_of(i, RID_P, rid);
            r = harness_hold(rid, 0, wh, sku, RB_STOCK + 1);
            send_cmd(h, i, &r);
            rid_of(i, RID_Q, rid);
            r = harness_hold(rid, 0, wh, sku, 1);
            send_cmd(h, i, &r);
            expected += 2;
            break;
        case K_PLAIN:
            break;
        }
    }
    harness_flush(h);
    size_t total = d->results_before + expected;
    wait_records(h, pid, HF_T_COUNTER_RESULTS, total);
    harness_sleep_ms(500); /* nothing more may arrive */
    assert_int_equal(harness_stop(pid), 0);
    results_t res = {0};
    read_results(h, d->before_end_ms, &res);
    assert_int_equal(res.counted, expected);
    assert_int_equal(res.foreign, 0);
    enum {
        OK = HF_OUTCOME_OK,
        CONFLICT = HF_OUTCOME_CONFLICT,
        REVOKED = HF_OUTCOME_REVOKED,
        INSUFF = HF_OUTCOME_INSUFFICIENT
    };
    static const int want_settled[] = {RID_A, HF_CMD_RELEASE, CONFLICT, RID_B, HF_CMD_RELEASE, OK,
                                       RID_B, HF_CMD_COMMIT,  CONFLICT, -1};
    static const int want_b_open[] = {RID_A, HF_CMD_RELEASE, CONFLICT, RID_B, HF_CMD_RELEASE, OK,
                                      -1};
    static const int want_a_released[] = {
        RID_A,   HF_CMD_COMMIT, CONFLICT,      RID_B,   HF_CMD_SHORTFALL,
        REVOKED, RID_B,         HF_CMD_COMMIT, REVOKED, -1};
    static const int want_both_open[] = {RID_A, HF_CMD_HOLD,   OK, RID_B, HF_CMD_SHORTFALL, REVOKED,
                                         RID_A, HF_CMD_COMMIT, OK, RID_B, HF_CMD_COMMIT,    REVOKED,
                                         -1};
    static const int want_probe[] = {RID_P, HF_CMD_HOLD, OK, RID_Q, HF_CMD_HOLD, INSUFF, -1};
    static const int want_plain[] = {-1};
    static const int *const want[] = {want_settled,   want_b_open, want_a_released,
                                      want_both_open, want_probe,  want_plain};
    wrong = 0;
    for (int i = 0; i < n_pairs; i++)
        if (!outcomes_are(&res, i, want[kind_of(i)]) && ++wrong >= 5)
            break;
    free(res.seen);
    if (wrong)
        fail_msg("pairs answered otherwise than before the restore (first ones above)");

    /* And the counters the model gives. */
    read_changelog(h, &now, false);
    for (int i = 0; i < n_pairs; i++) {
        int64_t on_hand, reserved, committed, revoking = 0, feed_seq = 2;
        model_before(i, &on_hand, &reserved, &committed);
        on_hand += 1;
        switch (kind_of(i)) {
        case K_B_OPEN:
            reserved = 0;
            break;
        case K_A_RELEASED:
            on_hand = 0;
            revoking = RB_QTY_B;
            feed_seq = 3;
            break;
        case K_BOTH_OPEN:
            on_hand = RB_QTY_A + RB_QTY_B - 2 - RB_QTY_A;
            reserved = RB_QTY_B;
            revoking = RB_QTY_B;
            committed = RB_QTY_A;
            feed_seq = 3;
            break;
        case K_PROBE:
            reserved = RB_STOCK + 1;
            break;
        case K_BOTH_SETTLED:
        case K_PLAIN:
            break;
        }
        const hf_counter_state_t *c = &now.state[i];
        if (!now.found[i] || c->on_hand != on_hand || c->reserved != reserved ||
            c->committed_total != committed || c->revoking != revoking || c->feed_seq != feed_seq)
            fail_msg("in the end, pair %d (kind %d): on_hand %lld reserved %lld committed %lld "
                     "revoking %lld feed_seq %lld; expected %lld %lld %lld %lld %lld",
                     i, kind_of(i), (long long)c->on_hand, (long long)c->reserved,
                     (long long)c->committed_total, (long long)c->revoking, (long long)c->feed_seq,
                     (long long)on_hand, (long long)reserved, (long long)committed,
                     (long long)revoking, (long long)feed_seq);
    }
    changelog_free(&now);
}

/* ---- the restored DB itself */

typedef struct {
    int32_t part;
    const uint8_t *key; /* NULL: okey (the entry moves in the sort) */
    const uint8_t *val;
    size_t key_len, val_len;
    uint8_t okey[HF_STATE_KEY_LEN_MAX]; /* an open-hold index entry's key */
} want_kv_t;

static const uint8_t *want_key(const want_kv_t *w)
{
    return w->key ? w->key : w->okey;
}

static int want_cmp(const void *x, const void *y)
{
    const want_kv_t *a = x, *b = y;
    if (a->part != b->part)
        return a->part < b->part ? -1 : 1;
    return bytes_cmp(want_key(a), a->key_len, want_key(b), b->key_len);
}

/* Opens the stopped counter's DB and compares every key of every partition
 * with the changelog: each counter and hold record is the changelog's last
 * value of its key, and the open-hold index ("O<wh>|<sku>|<seq>" -> the hold's
 * "<attempt>|<rid>") has exactly one entry per open hold, none for a settled
 * one. And the stored changelog offset is past the changelog's last record. */
static void check_state_db(const dataset_t *d, const char *when)
{
    const changelog_t *c = &d->before;
    size_t n = 0, open = 0;
    want_kv_t *want = calloc(2 * c->recs_count + 1, sizeof *want);
    assert_non_null(want);
    for (size_t k = 0; k < c->recs_count; k++) {
        const cl_rec_t *r = &c->recs[k];
        if (r->tombstone)
            continue;
        want[n++] =
            (want_kv_t){r->part, r->bytes, r->bytes + r->key_len, r->key_len, r->val_len, {0}};
        if (!r->open_hold)
            continue;
        /* "H<wh>|<sku>|<ref>" -> "O<wh>|<sku>|" + big-endian seq, value ref */
        const uint8_t *bar1 = memchr(r->bytes + 1, '|', r->key_len - 1);
        assert_non_null(bar1);
        const uint8_t *bar2 = memchr(bar1 + 1, '|', r->key_len - (size_t)(bar1 + 1 - r->bytes));
        assert_non_null(bar2);
        size_t head = (size_t)(bar2 + 1 - r->bytes);
        want_kv_t *o = &want[n++];
        o->part = r->part;
        memcpy(o->okey, r->bytes, head);
        o->okey[0] = 'O';
        for (int b = 0; b < 8; b++)
            o->okey[head + (size_t)b] = (uint8_t)((uint64_t)r->seq >> (56 - 8 * b));
        o->key = NULL;
        o->key_len = head + 8;
        o->val = bar2 + 1;
        o->val_len = r->key_len - head;
        open++;
    }
    qsort(want, n, sizeof *want, want_cmp);

    char path[600], errstr[512];
    snprintf(path, sizeof path, "%s/state-a/counter-a", d->h.workdir);
    struct stat sb;
    if (stat(path, &sb) != 0)
        fail_msg("%s: no DB at %s", when, path);
    state_t *st = NULL;
    if (state_open(path, NULL, &st, errstr, sizeof errstr) != HF_OK)
        fail_msg("%s: cannot open %s: %s", when, path, errstr);
    size_t at = 0, got = 0, got_open = 0, bad = 0;
    for (int32_t p = 0; p < d->parts; p++) {
        int64_t input_next = -1, cl_next = -1, current_at_ms = -1;
        assert_int_equal(state_get_offsets(st, p, &input_next, &cl_next, &current_at_ms), HF_OK);
        const part_log_t *pl = &c->parts[p];
        int64_t last = pl->count ? pl->offsets[pl->count - 1] : -1;
        if (cl_next <= last)
            fail_msg("%s: partition %d stored changelog offset %lld, its last record is at %lld",
                     when, p, (long long)cl_next, (long long)last);
        state_iter_t *it = state_iter_new(st, NULL, p, NULL, 0, false);
        assert_non_null(it);
        const void *k, *v;
        size_t klen, vlen;
        while (state_iter_next(it, &k, &klen, &v, &vlen)) {
            got++;
            got_open += klen > 0 && ((const char *)k)[0] == 'O';
            const want_kv_t *w = at < n && want[at].part == p ? &want[at] : NULL;
            int cmp = w ? bytes_cmp(k, klen, want_key(w), w->key_len) : -1;
            if (cmp == 0 && (vlen != w->val_len || memcmp(v, w->val, vlen) != 0)) {
                if (bad++ < 5)
                    print_message("%s: partition %d key %.*s: value differs from the changelog's\n",
                                  when, p, (int)klen, (const char *)k);
            } else if (cmp < 0) {
                if (bad++ < 5)
                    print_message("%s: partition %d has key %.*s (%zu bytes), not in the "
                                  "changelog or not an open hold's\n",
                                  when, p, (int)(klen > 40 ? 40 : klen), (const char *)k, klen);
                continue; /* the same want against the next key */
            }
            while (cmp > 0) { /* wanted keys the DB skipped */
                if (bad++ < 5)
                    print_message("%s: partition %d lacks key %.*s (%zu bytes)\n", when, p,
                                  (int)(w->key_len > 40 ? 40 : w->key_len),
                                  (const char *)want_key(w), w->key_len);
                at++;
                w = at < n && want[at].part == p ? &want[at] : NULL;
                cmp = w ? bytes_cmp(k, klen, want_key(w), w->key_len) : -1;
                if (cmp < 0 && bad++ < 5)
                    print_message("%s: partition %d has key %.*s, not wanted\n", when, p,
                                  (int)(klen > 40 ? 40 : klen), (const char *)k);
            }
            if (cmp == 0)
                at++;
        }
        state_iter_destroy(it);
        for (; at < n && want[at].part == p; at++)
            if (bad++ < 5)
                print_message("%s: partition %d lacks key %.*s (%zu bytes)\n", when, p,
                              (int)(want[at].key_len > 40 ? 40 : want[at].key_len),
                              (const char *)want_key(&want[at]), want[at].key_len);
    }
    state_close(st);
    free(want);
    print_message("%s: the DB holds %zu keys (%zu of the open-hold index); the changelog "
                  "gives %zu (%zu open holds)\n",
                  when, got, got_open, n, open);
    if (bad)
        fail_msg("%s: %zu differences between the restored DB and the changelog", when, bad);
    assert_int_equal(got, n);
    assert_int_equal(got_open, open);
}

/* ---- 1. restored from nothing, in several runs */

static void test_full_restore_loads_runs_and_rebuilds_the_open_hold_index(void **state)
{
    (void)state;
    static dataset_t d;
    memset(&d, 0, sizeof d);
    populate(&d, "rbulk-runs");
    drop_state(&d.h);
    long start = log_size(&d.h, "a");
    int64_t t0 = harness_now_ms();
    pid_t pid = harness_start_with(&d.h, "a", "counter", RB_CONFIG);
    restored_t rs[PARTS_MAX];
    wait_restored(&d.h, pid, start, d.parts, rs);
    print_message("restarted and restored in %lld ms\n", (long long)(harness_now_ms() - t0));
    for (int p = 0; p < d.parts; p++) {
        check_restored_count(&d, p, &rs[p]);
        assert_int_equal(rs[p].from, -1); /* from nothing: the whole changelog */
        /* 1 MiB runs: several table files a partition (the data set is sized
         * for at least 3; ITEST_RB_PAIRS too small fails here). */
        if (rs[p].files < 3)
            fail_msg("partition %d: %llu table files for %zu bytes of changelog with 1 MiB "
                     "runs; expected at least 3",
                     p, rs[p].files, d.before.parts[p].bytes);
    }
    /* What the runs left in the DB, looked at directly. */
    assert_int_equal(harness_stop(pid), 0);
    check_state_db(&d, "after the bulk restore");
    start = log_size(&d.h, "a");
    pid = harness_start_with(&d.h, "a", "counter", RB_CONFIG);
    wait_restored(&d.h, pid, start, d.parts, rs);
    for (int p = 0; p < d.parts; p++) { /* up to date: nothing to replay */
        assert_true(rs[p].from > 0);
        assert_int_equal(rs[p].records, 0);
        assert_int_equal(rs[p].files, 0);
    }
    verify_restored(&d, pid);
    dataset_free(&d);
}

/* ---- 2. killed between two runs */

static void test_a_restore_killed_between_runs_resumes_after_the_last_one(void **state)
{
    (void)state;
    static dataset_t d;
    memset(&d, 0, sizeof d);
    populate(&d, "rbulk-kill");
    int killed_in = -1; /* the partition the kill interrupted */
    restored_t rs[PARTS_MAX];
    runs_t runs[PARTS_MAX];
    for (int attempt = 0; attempt < 3 && killed_in < 0; attempt++) {
        drop_state(&d.h);
        long start = log_size(&d.h, "a");
        setenv("HOLDFAST_LOG_LEVEL", "debug", 1); /* the child inherits it */
        pid_t pid = harness_start_with(&d.h, "a", "counter", RB_CONFIG);
        unsetenv("HOLDFAST_LOG_LEVEL");
        /* Kill at the first run loaded: other runs of that partition follow. */
        int64_t deadline = harness_now_ms() + WAIT_MS;
        int total_runs = 0;
        while (total_runs == 0 && harness_now_ms() < deadline) {
            scan_log(&d.h, "a", start, rs, runs);
            for (int p = 0; p < d.parts; p++)
                total_runs += runs[p].count;
            if (total_runs == 0)
                harness_sleep_ms(1);
        }
        harness_kill9(pid);
        if (total_runs == 0)
            fail_msg("no \"a run of\" debug line within %d ms (see %s/a.log)", WAIT_MS,
                     d.h.workdir);
        scan_log(&d.h, "a", start, rs, runs);
        for (int p = 0; p < d.parts && killed_in < 0; p++)
            if (runs[p].count > 0 && !rs[p].seen)
                killed_in = p;
        print_message("attempt %d: killed with %d, %d run(s) of partitions 0, 1 loaded; "
                      "interrupted partition %d\n",
                      attempt, runs[0].count, d.parts > 1 ? runs[1].count : 0, killed_in);
    }
    if (killed_in < 0)
        fail_msg("three kills all landed after a partition's restore had ended");
    const runs_t killed_runs = runs[killed_in];
    const part_log_t *kpl = &d.before.parts[killed_in];
    /* Logged right after their ingests: the records they loaded are the
     * first of the partition, and fewer than all (it was interrupted). */
    assert_true(killed_runs.records > 0 && killed_runs.records < kpl->count);

    long start = log_size(&d.h, "a");
    pid_t pid = harness_start_with(&d.h, "a", "counter", RB_CONFIG);
    wait_restored(&d.h, pid, start, d.parts, rs);
    for (int p = 0; p < d.parts; p++)
        check_restored_count(&d, p, &rs[p]);
    const restored_t *k = &rs[killed_in];
    /* Resumed after the last ingested run, not from the beginning... */
    if (k->from <= 0)
        fail_msg("partition %d: restored from offset %lld after the kill; expected a resume "
                 "from the offset of its last ingested run (> 0)",
                 killed_in, k->from);
    /* ...exactly at the first record that run did not hold (the offset came
     * in its table file), the rest replayed record by record. */
    int64_t first_not_loaded = kpl->offsets[killed_runs.records];
    print_message("partition %d: %d run(s) of %zu records ingested before the kill; resumed from "
                  "offset %lld, the first record after them is at %lld\n",
                  killed_in, killed_runs.count, killed_runs.records, k->from,
                  (long long)first_not_loaded);
    if (k->from != first_not_loaded)
        fail_msg("partition %d: resumed from offset %lld, but the first record after the %zu "
                 "of its ingested runs is at offset %lld",
                 killed_in, k->from, killed_runs.records, (long long)first_not_loaded);
    assert_int_equal(k->records, kpl->count - killed_runs.records);
    assert_int_equal(k->files, 0);
    assert_int_equal(harness_stop(pid), 0);
    check_state_db(&d, "after the resumed restore");
    start = log_size(&d.h, "a");
    pid = harness_start_with(&d.h, "a", "counter", RB_CONFIG);
    wait_restored(&d.h, pid, start, d.parts, rs);
    for (int p = 0; p < d.parts; p++)
        assert_int_equal(rs[p].records, 0);
    verify_restored(&d, pid);
    dataset_free(&d);
}

/* ---- 3. a derive mark left with stale index entries */

/* Leaves the stopped counter's DB the way a restore killed in its derive pass,
 * or a standby that followed the marked partition with its reindex, can: the
 * derive mark set, and an open-hold index entry no open hold has. */
static void plant_stale_index_entry(const dataset_t *d, int32_t p)
{
    char path[600], errstr[512];
    snprintf(path, sizeof path, "%s/state-a/counter-a", d->h.workdir);
    state_t *st = NULL;
    if (state_open(path, NULL, &st, errstr, sizeof errstr) != HF_OK)
        fail_msg("cannot open %s: %s", path, errstr);
    state_buf_t *buf = state_buf_new(st);
    static const char stale[] = "OWB0|restore-bulk-stale|\0\0\0\0\0\0\0\1";
    assert_int_equal(state_put(buf, p, stale, sizeof stale - 1, "0|stale", 7), HF_OK);
    assert_int_equal(state_buf_set_derive_pending(buf, p, true), HF_OK);
    if (state_buf_write(st, buf, errstr, sizeof errstr) != HF_OK)
        fail_msg("cannot write %s: %s", path, errstr);
    state_buf_destroy(buf);
    state_close(st);
}

static void test_a_marked_partition_derives_its_index_again_from_nothing(void **state)
{
    (void)state;
    static dataset_t d;
    memset(&d, 0, sizeof d);
    populate(&d, "rbulk-mark");
    plant_stale_index_entry(&d, 0);
    long start = log_size(&d.h, "a");
    pid_t pid = harness_start_with(&d.h, "a", "counter", RB_CONFIG);
    restored_t rs[PARTS_MAX];
    wait_restored(&d.h, pid, start, d.parts, rs);
    assert_true(rs[0].from > 0); /* an incremental restore: its offsets were current */
    assert_int_equal(harness_stop(pid), 0);
    /* The stale entry went, every open hold's is back, and the mark is cleared. */
    check_state_db(&d, "after a restore that found the derive mark");
    char path[600], errstr[512];
    snprintf(path, sizeof path, "%s/state-a/counter-a", d.h.workdir);
    state_t *st = NULL;
    if (state_open(path, NULL, &st, errstr, sizeof errstr) != HF_OK)
        fail_msg("cannot open %s: %s", path, errstr);
    bool pending = true;
    assert_int_equal(state_get_derive_pending(st, 0, &pending), HF_OK);
    assert_false(pending);
    state_close(st);
    dataset_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_restore_loads_runs_and_rebuilds_the_open_hold_index),
        cmocka_unit_test(test_a_restore_killed_between_runs_resumes_after_the_last_one),
        cmocka_unit_test(test_a_marked_partition_derives_its_index_again_from_nothing),
    };
    return cmocka_run_group_tests_name("bulk restore on a real broker", tests, NULL, NULL);
}
