/* Admission at the trust boundary, end to end on the real broker through the
 * real `holdfast` binary: a record type on a topic that must not carry it (a
 * CounterResult forged onto holdfast.requests, a ReleaseHold on
 * holdfast.stock-feed), a reply_to naming an internal topic, and a value above
 * the size cap. Each case once sold or released a unit it must not; each must
 * now end as a dead letter (and, for a request, a clear rejection) with nothing
 * applied. A request on another partition than murmur2 of its key (a client with
 * librdkafka's default partitioner retrying) is forwarded to its key's and
 * served there once. And `hfctl tail` prints every
 * such dead letter, whatever bytes it keeps, as one JSON object a line. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "lib/client.h"
#include "codec.h"
#include "harness.h"
#include "task.h"

#define WAIT_MS        60000
/* How long a forged record is given to show an effect it must not have. */
#define EFFECT_WAIT_MS 8000

typedef struct {
    harness_t h;
    hf_client_t *c;
    pid_t pid;
    char cfg[1024];
} ad_t;

static void start(ad_t *a, const char *name, const char *stages)
{
    memset(a, 0, sizeof *a);
    harness_init(&a->h, name);
    char wpath[512], cwd[256];
    snprintf(wpath, sizeof wpath, "%s/warehouses.json", a->h.workdir);
    FILE *f = fopen(wpath, "w");
    assert_non_null(f);
    fputs("{\"warehouses\": [{\"id\":\"W1\",\"lat\":40.71,\"lon\":-74.01,\"cost_per_unit\":1.0}]}",
          f);
    fclose(f);
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(a->cfg, sizeof a->cfg, "{\"warehouses_file\": \"%s/%s\", \"result_timeout_ms\": 5000}",
             cwd, wpath);
    a->pid = harness_start_with(&a->h, "a1", stages, a->cfg);
    char errstr[256];
    assert_int_equal(client_new(a->h.bootstrap, NULL, &a->c, errstr, sizeof errstr), HF_OK);
}

static void stop(ad_t *a)
{
    client_destroy(a->c);
    assert_int_equal(harness_stop(a->pid), 0);
    harness_cleanup(&a->h);
}

/* qty units of sku at W1 in the routing view, and at the counter unless
 * view_only (then no counter runs to take the feed). */
static void stock(ad_t *a, const char *sku, int64_t qty, bool view_only)
{
    char key[128];
    if (!view_only) {
        hf_record_t f = harness_feed("W1", sku, HF_FEED_RECEIVE, qty, 1);
        harness_send(&a->h, HF_T_STOCK_FEED, harness_pair(key, "W1", sku), &f);
    }
    hf_record_t av = {.type = HF_REC_AVAILABILITY};
    snprintf(av.u.availability.sku, sizeof av.u.availability.sku, "%s", sku);
    hf_wh_available_t *w = &av.u.availability.warehouses[av.u.availability.warehouses_count++];
    snprintf(w->warehouse_id, sizeof w->warehouse_id, "W1");
    w->available = qty;
    av.u.availability.total = qty;
    av.u.availability.in_stock = true;
    av.u.availability.updated_at_ms = harness_now_ms();
    harness_send(&a->h, HF_T_AVAILABILITY, sku, &av);
    harness_flush(&a->h);
    if (view_only)
        return;
    hf_counter_state_t c = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&a->h, "W1", sku, &c) && c.on_hand == qty) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(c.on_hand, qty);
}

/* ---- reading topics back */

typedef struct {
    size_t count;
    char reasons[4096];
    bool truncated;
} dead_t;

static void dead_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    dead_t *d = opaque;
    if (rec->type != HF_REC_DEAD_LETTER)
        return;
    d->count++;
    d->truncated |= rec->u.dead_letter.value_truncated;
    size_t used = strlen(d->reasons);
    snprintf(d->reasons + used, sizeof d->reasons - used, "[%s] ", rec->u.dead_letter.reason);
}

/* Dead letters, once there are at least n (or the wait ends). */
static dead_t wait_dead(ad_t *a, size_t n, int wait_ms)
{
    dead_t d;
    int64_t deadline = harness_now_ms() + wait_ms;
    do {
        memset(&d, 0, sizeof d);
        harness_read(&a->h, HF_T_DEAD_LETTERS, dead_fn, &d);
        if (d.count >= n)
            break;
        harness_sleep_ms(250);
    } while (harness_now_ms() < deadline);
    print_message("dead letters: %s\n", d.reasons);
    return d;
}

/* `hfctl tail` of topic into lines (up to lines_max), every line checked to parse
 * as JSON by Python's json module (an independent reader) and by jansson; returns
 * how many lines there were. The caller json_decref()s them. */
static size_t tail_lines(ad_t *a, hf_topic_id_t topic, json_t **lines, size_t lines_max)
{
    char path[400], args[2048], out[1024];
    snprintf(path, sizeof path, "%s/tail-%s.jsonl", a->h.workdir, topic_name(topic));
    snprintf(args, sizeof args,
             "tail %s >%s 2>%s.err && python3 -c 'import json,sys; "
             "[json.loads(l) for l in sys.stdin]' <%s 2>&1",
             topic_name(topic), path, path, path);
    int rc = harness_run_tool(&a->h, "hfctl", args, out, sizeof out);
    if (rc == -2)
        fail_msg("no hfctl beside %s: build it (make build/hfctl)", a->h.holdfast_bin);
    if (rc != 0)
        fail_msg("hfctl tail %s | python3 json.loads: exit %d: %s (lines in %s)", topic_name(topic),
                 rc, out, path);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = 0, cap = 0;
    char *line = NULL;
    ssize_t len = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        assert_true(n < lines_max);
        assert_int_equal(line[len - 1], '\n');
        assert_int_equal(strlen(line), (size_t)len); /* no raw NUL on a line */
        json_error_t jerr;
        lines[n] = json_loads(line, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(lines[n]))
            fail_msg("%s line %zu is not a JSON object (%s): %.300s", path, n + 1, jerr.text, line);
        n++;
    }
    free(line);
    fclose(f);
    return n;
}

/* obj's member name: the string want[0..want_len), when text, else its base64. */
static void assert_member(const json_t *obj, const char *name, const void *want, size_t want_len,
                          bool text)
{
    char *b64 = malloc(4 * ((want_len + 2) / 3) + 1);
    assert_non_null(b64);
    size_t len = want_len;
    if (!text)
        len = (size_t)EVP_EncodeBlock((unsigned char *)b64, want, (int)want_len);
    const json_t *s = json_object_get(obj, name);
    if (!json_is_string(s))
        fail_msg("no string member '%s'", name);
    assert_int_equal(json_string_length(s), len);
    assert_memory_equal(json_string_value(s), text ? want : b64, len);
    free(b64);
}

typedef struct {
    const char *rid;
    size_t by_outcome[HF_REPLY__COUNT];
    char messages[2048];
    size_t replies_seen; /* Reply records in a topic that must have none */
} replies_t;

static void replies_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    replies_t *r = opaque;
    if (rec->type != HF_REC_REPLY)
        return;
    r->replies_seen++;
    if (r->rid && strcmp(rec->u.reply.reservation_id, r->rid) != 0)
        return;
    r->by_outcome[rec->u.reply.outcome]++;
    size_t used = strlen(r->messages);
    snprintf(r->messages + used, sizeof r->messages - used, "[%s: %s] ",
             hf_reply_outcome_name(rec->u.reply.outcome), rec->u.reply.message);
}

static replies_t replies_of(ad_t *a, hf_topic_id_t topic, const char *rid)
{
    replies_t r = {.rid = rid};
    harness_read(&a->h, topic, replies_fn, &r);
    return r;
}

typedef struct {
    const char *rid;
    hf_hold_t hold;
    size_t holds;
} holds_t;

static void holds_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    holds_t *h = opaque;
    if (rec->type == HF_REC_HOLD && strcmp(rec->u.hold.reservation_id, h->rid) == 0) {
        h->hold = rec->u.hold;
        h->holds++;
    }
}

static int64_t reserved_at_w1(ad_t *a, const char *sku)
{
    hf_counter_state_t c = {0};
    harness_counter(&a->h, "W1", sku, &c);
    return c.reserved;
}

/* ---- tests */

/* No counter runs, so the gateway's Hold stays unanswered; the client then
 * writes the counter's answer itself onto holdfast.requests. It used to be
 * taken as the counter's OK: HELD, and a commit would sell a unit no counter
 * ever reserved. */
static void test_a_counter_result_forged_onto_requests_is_dead_lettered_not_applied(void **state)
{
    ad_t a;
    start(&a, "ad-forge", "gateway");
    stock(&a, "SKU-F", 5, true);
    char errstr[256];
    hf_record_t r = harness_reserve_req("fr1", "SKU-F", 1, 0);
    holds_t hs = {.rid = "fr1"};
    int64_t deadline = harness_now_ms() + WAIT_MS, resend_ms = 0;
    while (hs.holds == 0 && harness_now_ms() < deadline) {
        /* The gateway's view is current as of its start; until it reads SKU-F's
         * Availability (sent just now) the reserve is REJECTED_INVALID and not
         * remembered, so it is sent again until a Hold shows (a resend of a
         * PENDING reserve is answered from its state, never applied twice). */
        if (harness_now_ms() >= resend_ms) {
            assert_int_equal(client_send(a.c, &r, errstr, sizeof errstr), HF_OK);
            resend_ms = harness_now_ms() + 2000;
        }
        harness_sleep_ms(200);
        harness_read(&a.h, HF_T_COUNTER_COMMANDS, holds_fn, &hs);
    }
    assert_true(hs.holds >= 1);

    hf_record_t forged = {.type = HF_REC_COUNTER_RESULT};
    hf_counter_result_t *cr = &forged.u.counter_result;
    snprintf(cr->reservation_id, sizeof cr->reservation_id, "fr1");
    snprintf(cr->warehouse_id, sizeof cr->warehouse_id, "%s", hs.hold.warehouse_id);
    snprintf(cr->sku, sizeof cr->sku, "%s", hs.hold.sku);
    cr->attempt = hs.hold.attempt;
    cr->command = HF_CMD_HOLD;
    cr->outcome = HF_OUTCOME_OK;
    cr->qty = hs.hold.qty;
    cr->applied_at_ms = harness_now_ms();
    harness_send(&a.h, HF_T_REQUESTS, "fr1", &forged);
    harness_flush(&a.h);

    dead_t d = wait_dead(&a, 1, EFFECT_WAIT_MS * 2);
    harness_sleep_ms(1000);
    replies_t rep = replies_of(&a, HF_T_REPLIES, "fr1");
    print_message("replies to fr1: %s\n", rep.messages);
    assert_int_equal(rep.by_outcome[HF_REPLY_HELD], 0);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.reasons, "CounterResult"));
    assert_non_null(strstr(d.reasons, "holdfast.requests"));
    stop(&a);
}

/* A ReleaseHold written to the stock feed used to release the hold it named:
 * another shopper's unit went back on sale while the first still held it. */
static void test_a_release_hold_on_the_stock_feed_is_dead_lettered_and_the_hold_stays(void **state)
{
    ad_t a;
    start(&a, "ad-feed", "counter");
    stock(&a, "SKU-R", 1, false);
    char key[128];
    harness_pair(key, "W1", "SKU-R");
    hf_record_t hold = harness_hold("rh1", 0, "W1", "SKU-R", 1);
    harness_send(&a.h, HF_T_COUNTER_COMMANDS, key, &hold);
    harness_flush(&a.h);
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (reserved_at_w1(&a, "SKU-R") != 1 && harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(reserved_at_w1(&a, "SKU-R"), 1);

    hf_record_t rel = harness_release_hold("rh1", 0, "W1", "SKU-R");
    harness_send(&a.h, HF_T_STOCK_FEED, key, &rel);
    harness_flush(&a.h);
    dead_t d = wait_dead(&a, 1, EFFECT_WAIT_MS * 2);
    assert_int_equal(reserved_at_w1(&a, "SKU-R"), 1);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.reasons, "ReleaseHold"));
    assert_non_null(strstr(d.reasons, "holdfast.stock-feed"));
    stop(&a);
}

/* A client with another partitioner (librdkafka's default is CRC32) retries a
 * Reserve, and the retry lands on a partition that murmur2 would not pick.
 * That partition's task used to apply it as a second reservation (whose Hold
 * the counter deduplicated and never answered, and whose rollback released the
 * first reservation's hold), and later to answer it REJECTED_INVALID: one key,
 * two answers. Now the task forwards it to the key's partition, where it is a
 * retry like any other: the same HELD again, no dead letter, the unit reserved
 * once. A Commit that only a wrong partition carries is forwarded and applied. */
static void test_a_request_on_the_wrong_partition_is_forwarded_to_its_keys(void **state)
{
    ad_t a;
    start(&a, "ad-part", "counter,gateway");
    stock(&a, "SKU-P", 5, false);
    hf_record_t r = harness_reserve_req("wp1", "SKU-P", 1, 0);
    hf_reply_t rep;
    char errstr[256];
    assert_int_equal(client_call(a.c, &r, 15000, 3, &rep, errstr, sizeof errstr), HF_OK);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);

    int32_t parts = harness_partitions(&a.h, HF_T_REQUESTS);
    assert_true(parts >= 2); /* a wrong partition needs two */
    int32_t right = kafka_partition_for_key("wp1", 3, parts);
    harness_send_to_partition(&a.h, HF_T_REQUESTS, (right + 1) % parts, "wp1", &r);
    hf_record_t c;
    hf_commit_t *cm = &hf_record_reset(&c, HF_REC_COMMIT)->u.commit;
    snprintf(cm->reservation_id, sizeof cm->reservation_id, "wp1");
    snprintf(cm->idempotency_key, sizeof cm->idempotency_key, "wp1-commit");
    snprintf(cm->payment_id, sizeof cm->payment_id, "pay-wp1");
    harness_send_to_partition(&a.h, HF_T_REQUESTS, (right + 1) % parts, "wp1", &c);
    harness_flush(&a.h);
    replies_t rs = {0};
    int64_t deadline = harness_now_ms() + EFFECT_WAIT_MS * 2;
    while (rs.by_outcome[HF_REPLY_COMMITTED] == 0 && harness_now_ms() < deadline) {
        harness_sleep_ms(250);
        rs = replies_of(&a, HF_T_REPLIES, "wp1");
    }
    print_message("replies to wp1: %s\n", rs.messages);
    assert_int_equal(rs.by_outcome[HF_REPLY_HELD], 2); /* the first answer, and again */
    assert_int_equal(rs.by_outcome[HF_REPLY_REJECTED_INVALID], 0);
    assert_int_equal(rs.by_outcome[HF_REPLY_COMMITTED], 1);
    assert_int_equal(harness_read(&a.h, HF_T_DEAD_LETTERS, NULL, NULL), 0);
    holds_t hs = {.rid = "wp1"};
    harness_read(&a.h, HF_T_COUNTER_COMMANDS, holds_fn, &hs);
    assert_int_equal(hs.holds, 1);
    assert_int_equal(reserved_at_w1(&a, "SKU-P"), 0); /* committed: sold, no longer reserved */
    stop(&a);
}

/* Requests on the requests topic that a task forwarded (their TASK_FORWARD_HEADER). */
static void forwarded_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    (void)rec;
    char v[64];
    if (kafka_msg_header(msg, TASK_FORWARD_HEADER, v, sizeof v))
        (*(size_t *)opaque)++;
}

/* A checkout service on librdkafka's default partitioner (consistent_random,
 * CRC32 of the key): about half its requests land off their key's partition.
 * Every request is answered once, HELD as if it had used murmur2; a warehouse
 * feed off its partition is applied once; and the topics reconcile (the
 * reconciler counts the forwarded copy, not the original as well). */
static void test_a_producer_on_librdkafkas_default_partitioner_is_served_once(void **state)
{
    enum { N = 24 };
    ad_t a;
    start(&a, "ad-crc", "counter,gateway");
    stock(&a, "SKU-C", 100, false);
    hf_client_t *crc = NULL;
    char errstr[256];
    assert_int_equal(client_new_partitioned(a.h.bootstrap, NULL, "consistent_random", &crc, errstr,
                                            sizeof errstr),
                     HF_OK);
    int32_t parts = harness_partitions(&a.h, HF_T_REQUESTS);
    assert_true(parts >= 2);
    for (int i = 0; i < N; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "crc%d", i);
        hf_record_t r = harness_reserve_req(rid, "SKU-C", 1, 0);
        hf_reply_t rep;
        memset(&rep, 0, sizeof rep);
        int err = client_call(crc, &r, 15000, 3, &rep, errstr, sizeof errstr);
        if (err || rep.outcome != HF_REPLY_HELD)
            fail_msg("%s: %s %s %s", rid, hf_err_name(err), errstr, rep.message);
    }
    size_t forwarded = 0;
    harness_read(&a.h, HF_T_REQUESTS, forwarded_fn, &forwarded);
    print_message("%zu of %d reserves were forwarded to their key's partition\n", forwarded, N);
    assert_true(forwarded >= 1); /* CRC32 and murmur2 disagree on some of 24 keys */
    for (int i = 0; i < N; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "crc%d", i);
        replies_t rs = replies_of(&a, HF_T_REPLIES, rid);
        size_t answers = 0;
        for (int o = 0; o < HF_REPLY__COUNT; o++)
            answers += rs.by_outcome[o];
        if (rs.by_outcome[HF_REPLY_HELD] != 1 || answers != 1)
            fail_msg("%s answered %zu times: %s", rid, answers, rs.messages);
    }
    /* A warehouse feed on the wrong partition too: applied once, where its key is. */
    char key[128];
    harness_pair(key, "W1", "SKU-C");
    int32_t fparts = harness_partitions(&a.h, HF_T_STOCK_FEED);
    hf_record_t feed = harness_feed("W1", "SKU-C", HF_FEED_RECEIVE, 10, 2);
    harness_send_to_partition(&a.h, HF_T_STOCK_FEED,
                              (kafka_partition_for_key(key, strlen(key), fparts) + 1) % fparts, key,
                              &feed);
    harness_flush(&a.h);
    hf_counter_state_t c = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&a.h, "W1", "SKU-C", &c) && c.on_hand == 110) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(c.on_hand, 110);
    assert_int_equal(harness_read(&a.h, HF_T_DEAD_LETTERS, NULL, NULL), 0);
    assert_int_equal(reserved_at_w1(&a, "SKU-C"), N);
    char out[8192];
    int rc = harness_run_tool(&a.h, "hfctl", "reconcile --quiescent 1 2>&1", out, sizeof out);
    print_message("reconcile: %s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "PASS"));
    client_destroy(crc);
    stop(&a);
}

/* A record that was forwarded as often as a task forwards one (a topic whose
 * partition count two tasks see differently could send it round) and is still
 * off its key's partition: a dead letter, and the client told which
 * partitioner to use, instead of a third forward. */
static void test_a_record_forwarded_too_often_is_dead_lettered_and_answered(void **state)
{
    ad_t a;
    start(&a, "ad-fwd", "counter,gateway");
    stock(&a, "SKU-F", 5, false);
    hf_record_t r = harness_reserve_req("fw1", "SKU-F", 1, 0);
    uint8_t buf[HF_RECORD_LEN_MAX];
    size_t len = 0;
    char errstr[512];
    assert_int_equal(codec_encode(&r, buf, sizeof buf, &len, errstr, sizeof errstr), HF_OK);
    int32_t parts = harness_partitions(&a.h, HF_T_REQUESTS);
    assert_true(parts >= 2);
    int32_t wrong = (kafka_partition_for_key("fw1", 3, parts) + 1) % parts;
    kafka_header_t spent = {TASK_FORWARD_HEADER, "2 elsewhere/0/0"};
    assert_int_equal(kafka_produce(a.h.kp, topic_name(HF_T_REQUESTS), wrong, "fw1", 3, buf, len,
                                   &spent, 1, NULL, errstr, sizeof errstr),
                     HF_OK);
    harness_flush(&a.h);
    dead_t d = wait_dead(&a, 1, WAIT_MS);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.reasons, "murmur2"));
    replies_t rs = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (rs.by_outcome[HF_REPLY_REJECTED_INVALID] == 0 && harness_now_ms() < deadline) {
        harness_sleep_ms(250);
        rs = replies_of(&a, HF_T_REPLIES, "fw1");
    }
    assert_int_equal(rs.by_outcome[HF_REPLY_REJECTED_INVALID], 1);
    assert_non_null(strstr(rs.messages, "murmur2_random"));
    size_t forwarded = 0;
    harness_read(&a.h, HF_T_REQUESTS, forwarded_fn, &forwarded);
    assert_int_equal(forwarded, 1); /* only the one this test sent */
    assert_int_equal(reserved_at_w1(&a, "SKU-F"), 0);
    stop(&a);
}

/* Another producer initialises the gateway task's and the counter task's
 * transactional ids (what a second process with the same instance id, or an
 * operator's fence, does): their next commits fail fenced — a fatal error, which
 * used to stop the process with exit 4 for its supervisor. Now each task is
 * closed dirty and started again inside the process, rejoins the group, restores,
 * and serves: the process stays up, every reserve is answered once, nothing is
 * reserved twice. */
static void test_a_fenced_task_recovers_inside_the_process(void **state)
{
    ad_t a;
    start(&a, "ad-fence", "counter,gateway");
    stock(&a, "SKU-Z", 10, false);
    char errstr[256];
    hf_reply_t rep;
    hf_record_t r1 = harness_reserve_req("fz1", "SKU-Z", 1, 0);
    assert_int_equal(client_call(a.c, &r1, 15000, 3, &rep, errstr, sizeof errstr), HF_OK);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    const char *stages[] = {"gateway", "counter"};
    for (size_t i = 0; i < 2; i++) {
        char txn_id[160];
        snprintf(txn_id, sizeof txn_id, "%sapp-%s-a1-0", a.h.prefix, stages[i]);
        assert_int_equal(kafka_txn_fence(&a.h.kconf, txn_id, 10000, 10000, errstr, sizeof errstr),
                         HF_OK);
    }
    /* And a consumer that joins the gateway's group with the gateway task's
     * group.instance.id: the task's consumer is fenced (a fatal consumer error),
     * and a consumer closed that way revokes nothing — its partitions must
     * still be free for the task started again. */
    char group[160], inst[160];
    snprintf(group, sizeof group, "%sapp-gateway", a.h.prefix);
    snprintf(inst, sizeof inst, "%sapp-gateway-a1-0", a.h.prefix);
    const char *topics[] = {topic_name(HF_T_REQUESTS)};
    kafka_rebalance_t rb = {.committed_timeout_ms = 15000};
    kafka_consumer_t *zombie = NULL;
    kafka_group_t g = {.group_id = group, .instance_id = inst};
    assert_int_equal(
        kafka_consumer_new(&a.h.kconf, &g, topics, 1, &rb, &zombie, errstr, sizeof errstr), HF_OK);
    for (int i = 0; i < 40; i++) {
        kafka_msg_t m;
        if (kafka_consumer_poll(zombie, 100, &m, errstr, sizeof errstr) == 1)
            kafka_msg_release(&m);
    }
    kafka_consumer_destroy(zombie);
    for (int i = 2; i <= 4; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "fz%d", i);
        hf_record_t r = harness_reserve_req(rid, "SKU-Z", 1, 0);
        memset(&rep, 0, sizeof rep);
        int err = client_call(a.c, &r, 30000, 5, &rep, errstr, sizeof errstr);
        if (err || rep.outcome != HF_REPLY_HELD)
            fail_msg("%s after the fence: %s %s %s", rid, hf_err_name(err), errstr, rep.message);
    }
    assert_int_equal(kill(a.pid, 0), 0); /* still running */
    for (int i = 1; i <= 4; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "fz%d", i);
        replies_t rs = replies_of(&a, HF_T_REPLIES, rid);
        assert_int_equal(rs.by_outcome[HF_REPLY_HELD], 1);
    }
    assert_int_equal(reserved_at_w1(&a, "SKU-Z"), 4);
    char log_path[600], line[1024];
    snprintf(log_path, sizeof log_path, "%s/a1.log", a.h.workdir);
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    int recoveries = 0;
    while (fgets(line, sizeof line, f))
        recoveries += strstr(line, "closed dirty, starting it again") != NULL;
    fclose(f);
    print_message("%d in-process recoveries logged\n", recoveries);
    assert_true(recoveries >= 2); /* the gateway's (once or twice) and the counter's */
    stop(&a);                     /* exit 0: it never stopped for the fence */
}

/* reply_to naming an internal topic used to put a Reply into the ledger, the
 * signals or the gateway changelog (restored as state later). Now it is
 * refused on the default replies topic; a topic under the reply prefix works. */
static void
test_reply_to_an_internal_topic_is_refused_and_a_reply_prefix_topic_is_served(void **state)
{
    ad_t a;
    start(&a, "ad-reply", "counter,gateway");
    stock(&a, "SKU-T", 5, false);
    const hf_topic_id_t internal[] = {HF_T_LEDGER, HF_T_GATEWAY_CHANGELOG, HF_T_SIGNALS};
    char errstr[256];
    for (size_t i = 0; i < sizeof internal / sizeof internal[0]; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "rt%zu", i);
        hf_record_t r = harness_reserve_req(rid, "SKU-T", 1, 0);
        snprintf(r.u.reserve.reply_to, sizeof r.u.reserve.reply_to, "%s", topic_name(internal[i]));
        hf_reply_t rep;
        memset(&rep, 0, sizeof rep);
        int err = client_call(a.c, &r, 8000, 1, &rep, errstr, sizeof errstr);
        print_message("reply_to %s: %s %s\n", topic_name(internal[i]), hf_err_name(err),
                      rep.message);
        assert_int_equal(err, HF_OK);
        assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INVALID);
        assert_non_null(strstr(rep.message, "reply_to"));
    }
    assert_int_equal(replies_of(&a, HF_T_LEDGER, NULL).replies_seen, 0);
    assert_int_equal(replies_of(&a, HF_T_GATEWAY_CHANGELOG, NULL).replies_seen, 0);
    assert_int_equal(replies_of(&a, HF_T_SIGNALS, NULL).replies_seen, 0);
    assert_int_equal(reserved_at_w1(&a, "SKU-T"), 0);

    /* A service's own reply topic under the prefix is served there. */
    char svc[HF_TOPIC_LEN_MAX];
    snprintf(svc, sizeof svc, "%sholdfast.replies.checkout", a.h.prefix);
    kafka_topic_spec_t spec = {svc, 8, 1, NULL};
    int32_t existing = 0;
    assert_int_equal(kafka_topics_ensure(&a.h.kconf, &spec, 1, &existing, errstr, sizeof errstr),
                     HF_OK);
    hf_client_t *sc = NULL;
    assert_int_equal(client_new(a.h.bootstrap, svc, &sc, errstr, sizeof errstr), HF_OK);
    hf_record_t ok = harness_reserve_req("rt-ok", "SKU-T", 1, 0);
    snprintf(ok.u.reserve.reply_to, sizeof ok.u.reserve.reply_to, "%s", svc);
    hf_reply_t rep;
    assert_int_equal(client_call(sc, &ok, 15000, 3, &rep, errstr, sizeof errstr), HF_OK);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    client_destroy(sc);
    stop(&a);
}

/* A 900 KB request used to get neither a reply nor a dead letter. */
static void test_a_record_above_the_size_cap_is_dead_lettered_with_its_value_truncated(void **state)
{
    ad_t a;
    start(&a, "ad-size", "counter,gateway");
    /* A Reserve whose reservation_id is the whole 900 KB: Avro single-object
     * header, the writer fingerprint, then a string that long. */
    static uint8_t big[900 * 1024];
    size_t n = 0;
    uint64_t fp = codec_fingerprint(HF_REC_RESERVE);
    big[n++] = 0xC3;
    big[n++] = 0x01;
    for (int i = 0; i < 8; i++)
        big[n++] = (uint8_t)(fp >> (8 * i));
    uint64_t zz = (uint64_t)(sizeof big - n - 3) << 1;
    while (zz >= 0x80) {
        big[n++] = (uint8_t)(zz | 0x80);
        zz >>= 7;
    }
    big[n++] = (uint8_t)zz;
    memset(big + n, 'r', sizeof big - n);
    harness_send_raw(&a.h, HF_T_REQUESTS, "big1", big, sizeof big);
    harness_flush(&a.h);
    dead_t d = wait_dead(&a, 1, WAIT_MS / 2);
    assert_int_equal(d.count, 1);
    assert_true(d.truncated);
    assert_non_null(strstr(d.reasons, "921600 bytes"));

    /* hfctl tail prints it as one JSON object: the kept 16 KiB (binary: base64)
     * whole, from its length. */
    json_t *lines[4] = {NULL};
    assert_int_equal(tail_lines(&a, HF_T_DEAD_LETTERS, lines, 4), 1);
    const json_t *v = json_object_get(lines[0], "value");
    assert_member(lines[0], "key", "big1", 4, true);
    assert_member(v, "value_b64", big, HF_INPUT_VALUE_BYTES_MAX, false);
    assert_true(json_is_true(json_object_get(v, "value_truncated")));
    json_decref(lines[0]);
    stop(&a);
}

/* A dead letter keeps whatever bytes a producer sent; `hfctl tail` used to print
 * them with printf: cut at the first NUL, quotes and control characters raw, so
 * `hfctl tail holdfast.dead-letters | jq .` failed on exactly these records. */
static void test_dead_letters_of_any_bytes_tail_as_one_json_object_a_line(void **state)
{
    ad_t a;
    start(&a, "ad-tail", "gateway");
    char errstr[512];
    /* Binary: an Avro header with a fingerprint no schema has, NULs, a quote. */
    static const uint8_t bin_key[] = {'k', 0x00, '"', '\\', 0xff};
    static const uint8_t bin_val[] = {0xc3, 0x01, 0x00, 0x11, 0x22, 0x00, 0x33, 0x44, 0x55,
                                      0x66, 0x00, '"',  '\\', '\n', 0x01, 0xff, 'r'};
    /* Text with a NUL in it: valid UTF-8, printed as a string, whole. */
    static const char txt_key[] = "t\"1\\";
    static const char txt_val[] = "plain\0text \"quoted\" \\ \x01\x1f tab\t end";
    const kafka_header_t tp = {"traceparent", "00-\"not\\a trace\x01"};
    assert_int_equal(kafka_produce(a.h.kp, topic_name(HF_T_REQUESTS), -1, bin_key, sizeof bin_key,
                                   bin_val, sizeof bin_val, &tp, 1, NULL, errstr, sizeof errstr),
                     HF_OK);
    assert_int_equal(kafka_produce(a.h.kp, topic_name(HF_T_REQUESTS), -1, txt_key,
                                   sizeof txt_key - 1, txt_val, sizeof txt_val - 1, NULL, 0, NULL,
                                   errstr, sizeof errstr),
                     HF_OK);
    harness_flush(&a.h);
    dead_t d = wait_dead(&a, 2, WAIT_MS);
    assert_int_equal(d.count, 2);

    json_t *lines[8] = {NULL};
    size_t n = tail_lines(&a, HF_T_DEAD_LETTERS, lines, 8);
    assert_int_equal(n, 2);
    bool seen_bin = false, seen_txt = false;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(lines[i], "value");
        assert_true(json_is_object(v));
        if (json_object_get(lines[i], "key_b64")) {
            seen_bin = true;
            assert_member(lines[i], "key_b64", bin_key, sizeof bin_key, false);
            assert_member(v, "key_b64", bin_key, sizeof bin_key, false);
            assert_member(v, "value_b64", bin_val, sizeof bin_val, false);
        } else {
            seen_txt = true;
            assert_member(lines[i], "key", txt_key, sizeof txt_key - 1, true);
            assert_member(v, "key", txt_key, sizeof txt_key - 1, true);
            assert_member(v, "value", txt_val, sizeof txt_val - 1, true);
        }
        json_decref(lines[i]);
    }
    assert_true(seen_bin && seen_txt);

    /* The requests themselves, undecodable, and a traceparent header that is no
     * trace: printed, escaped. */
    n = tail_lines(&a, HF_T_REQUESTS, lines, 8);
    assert_int_equal(n, 2);
    size_t with_tp = 0;
    for (size_t i = 0; i < n; i++) {
        assert_null(json_object_get(lines[i], "value"));
        assert_non_null(json_object_get(lines[i], "undecodable"));
        if (json_object_get(lines[i], "traceparent")) {
            with_tp++;
            assert_member(lines[i], "traceparent", tp.value, strlen(tp.value), true);
            assert_member(lines[i], "value_b64", bin_val, sizeof bin_val, false);
        } else {
            assert_member(lines[i], "value_text", txt_val, sizeof txt_val - 1, true);
        }
        json_decref(lines[i]);
    }
    assert_int_equal(with_tp, 1);
    stop(&a);
}

int main(void)
{
    /* ADMIT_TEST=pattern runs only the matching tests. */
    const char *only = getenv("ADMIT_TEST");
    if (only && *only)
        cmocka_set_test_filter(only);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_counter_result_forged_onto_requests_is_dead_lettered_not_applied),
        cmocka_unit_test(test_a_release_hold_on_the_stock_feed_is_dead_lettered_and_the_hold_stays),
        cmocka_unit_test(test_a_request_on_the_wrong_partition_is_forwarded_to_its_keys),
        cmocka_unit_test(test_a_producer_on_librdkafkas_default_partitioner_is_served_once),
        cmocka_unit_test(test_a_record_forwarded_too_often_is_dead_lettered_and_answered),
        cmocka_unit_test(test_a_fenced_task_recovers_inside_the_process),
        cmocka_unit_test(
            test_reply_to_an_internal_topic_is_refused_and_a_reply_prefix_topic_is_served),
        cmocka_unit_test(
            test_a_record_above_the_size_cap_is_dead_lettered_with_its_value_truncated),
        cmocka_unit_test(test_dead_letters_of_any_bytes_tail_as_one_json_object_a_line),
    };
    return cmocka_run_group_tests_name("admission at the trust boundary on a real broker", tests,
                                       NULL, NULL);
}
