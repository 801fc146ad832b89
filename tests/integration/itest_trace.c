/* W3C trace context end to end against the real broker through the real
 * `holdfast` binary running counter and gateway: a request's `traceparent`
 * header reaches every record its handling produces, hop by hop (the Hold
 * command, the counter's result, the reply, the ledger event), each hop with
 * the request's trace-id and a span id of its own; a Commit sent by hfctl with
 * another trace gets that trace on its own outputs; and a malformed header is
 * answered as if it were absent, its outputs carrying no trace at all; an
 * expiry (a timer, acting for no request) carries none either; a misrouted
 * request's forwarded copy and its reply carry its trace. With
 * HOLDFAST_LOG_LEVEL=debug each traced input is one log line naming the
 * trace-id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec.h"
#include "harness.h"
#include "lib/client.h"
#include "task.h"
#include "trace.h"

#define WAIT_MS 60000
#define CALL_MS 15000

#define TID1 "4bf92f3577b34da6a3ce929d0e0e4736"
#define PID1 "00f067aa0ba902b7"
#define TID2 "0af7651916cd43dd8448eb211c80319c"
#define PID2 "b7ad6b7169203331"

typedef struct {
    harness_t h;
    hf_client_t *c;
    pid_t pid;
} world_t;

static world_t world;

static int setup(void **state)
{
    harness_init(&world.h, "trace");
    char wpath[512], cwd[256], cfg[1024];
    snprintf(wpath, sizeof wpath, "%s/warehouses.json", world.h.workdir);
    FILE *f = fopen(wpath, "w");
    assert_non_null(f);
    fputs("{\"warehouses\": [{\"id\":\"W1\",\"lat\":40.71,\"lon\":-74.01,\"cost_per_unit\":1.0}]}",
          f);
    fclose(f);
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(cfg, sizeof cfg, "{\"warehouses_file\": \"%s/%s\", \"result_timeout_ms\": 5000}", cwd,
             wpath);
    setenv("HOLDFAST_LOG_LEVEL", "debug", 1); /* the child inherits it: the trace log lines */
    world.pid = harness_start_with(&world.h, "g1", "counter,gateway", cfg);
    unsetenv("HOLDFAST_LOG_LEVEL");
    char errstr[256];
    assert_int_equal(client_new(world.h.bootstrap, NULL, &world.c, errstr, sizeof errstr), HF_OK);

    /* 100 units of SKU-T at W1: at the counter (waited for) and in the view. */
    char key[128];
    hf_record_t feed = harness_feed("W1", "SKU-T", HF_FEED_RECEIVE, 100, 1);
    harness_send(&world.h, HF_T_STOCK_FEED, harness_pair(key, "W1", "SKU-T"), &feed);
    hf_record_t av;
    hf_availability_t *a = &hf_record_reset(&av, HF_REC_AVAILABILITY)->u.availability;
    snprintf(a->sku, sizeof a->sku, "SKU-T");
    snprintf(a->warehouses[0].warehouse_id, sizeof a->warehouses[0].warehouse_id, "W1");
    a->warehouses[0].available = 100;
    a->warehouses_count = 1;
    a->total = 100;
    a->in_stock = true;
    a->updated_at_ms = harness_now_ms();
    harness_send(&world.h, HF_T_AVAILABILITY, "SKU-T", &av);
    harness_flush(&world.h);
    hf_counter_state_t cs = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&world.h, "W1", "SKU-T", &cs) && cs.on_hand == 100) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(cs.on_hand, 100);
    return 0;
}

static int teardown(void **state)
{
    client_destroy(world.c);
    assert_int_equal(harness_stop(world.pid), 0);
    harness_cleanup(&world.h);
    return 0;
}

static hf_record_t reserve_ttl(const char *rid, const char *ikey, int64_t ttl_ms)
{
    hf_record_t r;
    hf_reserve_t *q = &hf_record_reset(&r, HF_REC_RESERVE)->u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "%s", ikey);
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "SKU-T");
    q->lines[0].qty = 1;
    q->ship_to = (hf_geo_t){40.73, -73.99};
    q->ttl_ms = ttl_ms;
    q->sent_at_ms = harness_now_ms();
    return r;
}

static hf_record_t reserve(const char *rid, const char *ikey)
{
    return reserve_ttl(rid, ikey, 0);
}

/* ---- finding one output record and its traceparent header */

/* What to look for: a record of type for reservation rid; for a reply its
 * idempotency key, for a ledger event its kind, for a result its command. */
typedef struct {
    hf_rec_type_t type;
    const char *rid;
    const char *ikey;
    int sub;
    bool found;
    int32_t partition; /* where it was found */
    int outcome;       /* a reply's */
    bool traced;       /* had a traceparent header */
    bool tp_valid;     /* ... that parses */
    trace_ctx_t tc;    /* its value */
    char tp[96];
} find_t;

static bool matches(const find_t *f, const hf_record_t *rec)
{
    if (rec->type != f->type)
        return false;
    switch (rec->type) {
    case HF_REC_HOLD:
        return strcmp(rec->u.hold.reservation_id, f->rid) == 0;
    case HF_REC_COMMIT_HOLD:
        return strcmp(rec->u.commit_hold.reservation_id, f->rid) == 0;
    case HF_REC_RELEASE_HOLD:
        return strcmp(rec->u.release_hold.reservation_id, f->rid) == 0;
    case HF_REC_COUNTER_RESULT:
        return strcmp(rec->u.counter_result.reservation_id, f->rid) == 0 &&
               (int)rec->u.counter_result.command == f->sub;
    case HF_REC_DEAD_LETTER:
        return f->rid[0] && strlen(f->rid) == rec->u.dead_letter.key_len &&
               memcmp(rec->u.dead_letter.key, f->rid, rec->u.dead_letter.key_len) == 0;
    case HF_REC_REPLY:
        return strcmp(rec->u.reply.reservation_id, f->rid) == 0 &&
               strcmp(rec->u.reply.idempotency_key, f->ikey) == 0;
    case HF_REC_LEDGER_EVENT:
        return strcmp(rec->u.ledger_event.reservation_id, f->rid) == 0 &&
               (int)rec->u.ledger_event.kind == f->sub;
    case HF_REC_RESERVE: /* sub 1: only a copy a task forwarded */
        return strcmp(rec->u.reserve.reservation_id, f->rid) == 0;
    default:
        return false;
    }
}

static void find_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    find_t *f = opaque;
    if (f->found || !matches(f, rec))
        return;
    char fwd[64];
    if (rec->type == HF_REC_RESERVE && f->sub == 1 &&
        !kafka_msg_header(msg, TASK_FORWARD_HEADER, fwd, sizeof fwd))
        return;
    f->found = true;
    f->partition = msg->partition;
    if (rec->type == HF_REC_REPLY)
        f->outcome = (int)rec->u.reply.outcome;
    const void *val = NULL;
    size_t len = 0;
    f->traced = kafka_msg_header_ref(msg, TRACE_HEADER_NAME, &val, &len);
    if (f->traced) {
        snprintf(f->tp, sizeof f->tp, "%.*s", (int)len, (const char *)val);
        f->tp_valid = trace_parse(val, len, &f->tc);
    }
}

/* Waits for the record f describes on topic (it fails the test if none comes). */
static find_t find(hf_topic_id_t topic, hf_rec_type_t type, const char *rid, const char *ikey,
                   int sub)
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    for (;;) {
        find_t f = {.type = type, .rid = rid, .ikey = ikey, .sub = sub};
        harness_read(&world.h, topic, find_fn, &f);
        if (f.found)
            return f;
        if (harness_now_ms() > deadline)
            fail_msg("no %s for %s on %s", hf_rec_type_name(type), rid, topic_name(topic));
        harness_sleep_ms(200);
    }
}

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

/* f carries a valid traceparent of trace trace_id whose parent-id is not
 * not_parent (the span of the hop before: each hop has a span of its own). */
static void assert_traced_flags(const find_t *f, const char *what, const char *trace_id,
                                const char *not_parent, uint8_t flags)
{
    char tid[33], pid[17];
    if (!f->traced)
        fail_msg("%s has no traceparent header", what);
    if (!f->tp_valid)
        fail_msg("%s has an invalid traceparent '%s'", what, f->tp);
    hex(f->tc.trace_id, sizeof f->tc.trace_id, tid);
    hex(f->tc.parent_id, sizeof f->tc.parent_id, pid);
    if (strcmp(tid, trace_id) != 0)
        fail_msg("%s: trace-id %s, want %s", what, tid, trace_id);
    if (strcmp(pid, not_parent) == 0)
        fail_msg("%s: parent-id %s is the previous hop's, not a span of its own", what, pid);
    if (f->tc.flags != flags)
        fail_msg("%s: flags %02x, want %02x (kept from the request)", what, f->tc.flags, flags);
}

static void assert_traced(const find_t *f, const char *what, const char *trace_id,
                          const char *not_parent)
{
    assert_traced_flags(f, what, trace_id, not_parent, 0x01);
}

static void parent_hex(const find_t *f, char out[17])
{
    hex(f->tc.parent_id, sizeof f->tc.parent_id, out);
}

/* How many lines of the processor's log name trace_id. */
static int log_lines_with(const char *trace_id)
{
    char path[512], line[4096], needle[64];
    snprintf(path, sizeof path, "%s/g1.log", world.h.workdir);
    snprintf(needle, sizeof needle, "trace_id=%s", trace_id);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL && strstr(line, "\"level\":\"debug\"") != NULL;
    fclose(f);
    return n;
}

/* ---- tests */

static void test_a_reserves_trace_reaches_every_hop_with_a_span_per_hop(void **state)
{
    hf_record_t r = reserve("rt1", "k1");
    hf_reply_t rep;
    char errstr[256] = "";
    const char *tp1 = "00-" TID1 "-" PID1 "-01";
    int err = client_call_traced(world.c, &r, tp1, CALL_MS, 3, &rep, errstr, sizeof errstr);
    if (err)
        fail_msg("client_call_traced: %s", errstr);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);

    /* request -> gateway -> Hold -> counter -> result, and (one hold covers
     * it: the counter answers) the reply and the ledger event */
    find_t hold = find(HF_T_COUNTER_COMMANDS, HF_REC_HOLD, "rt1", NULL, 0);
    find_t result = find(HF_T_COUNTER_RESULTS, HF_REC_COUNTER_RESULT, "rt1", NULL, HF_CMD_HOLD);
    find_t reply = find(HF_T_REPLIES, HF_REC_REPLY, "rt1", "k1", 0);
    find_t held = find(HF_T_LEDGER, HF_REC_LEDGER_EVENT, "rt1", NULL, HF_LEDGER_HELD);
    char gw1[17], ctr[17], ans[17];
    assert_traced(&hold, "Hold command", TID1, PID1);
    parent_hex(&hold, gw1);
    assert_traced(&result, "counter result", TID1, gw1);
    parent_hex(&result, ctr);
    assert_traced(&reply, "reply", TID1, gw1);
    assert_traced(&held, "ledger HELD", TID1, gw1);
    parent_hex(&reply, ans);
    assert_string_equal(ans, ctr); /* the counter's hop answered: its span */
    assert_string_not_equal(ans, PID1);
    /* Reply and ledger event come from the same hop: the same span. */
    assert_memory_equal(reply.tc.parent_id, held.tc.parent_id, sizeof reply.tc.parent_id);

    /* A Commit sent by hfctl under another trace: its outputs carry that one. */
    char out[2048];
    int rc = harness_run_tool(&world.h, "hfctl",
                              "commit --reservation rt1 --key c1 --payment pay-1 "
                              "--traceparent 00-" TID2 "-" PID2 "-01",
                              out, sizeof out);
    if (rc == -2)
        fail_msg("no hfctl beside HOLDFAST_BIN: build it (make build/hfctl)");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\"COMMITTED\""));
    find_t creply = find(HF_T_REPLIES, HF_REC_REPLY, "rt1", "c1", 0);
    find_t committed = find(HF_T_LEDGER, HF_REC_LEDGER_EVENT, "rt1", NULL, HF_LEDGER_COMMITTED);
    assert_traced(&creply, "COMMITTED reply", TID2, PID2);
    assert_traced(&committed, "ledger COMMITTED", TID2, PID2);
    find_t chold = find(HF_T_COUNTER_COMMANDS, HF_REC_COMMIT_HOLD, "rt1", NULL, 0);
    assert_traced(&chold, "CommitHold command", TID2, PID2);

    /* The debug log has a line per traced input: the request and the result at
     * the gateway, the Hold at the counter (at least). */
    assert_true(log_lines_with(TID1) >= 3);
    assert_true(log_lines_with(TID2) >= 1);
}

static void test_a_malformed_traceparent_is_answered_and_not_propagated(void **state)
{
    static const char *const bad[] = {
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", /* uppercase */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01", /* zero trace-id */
        "00-" TID1 "-0000000000000000-01",                         /* zero parent-id */
        "ff-" TID1 "-" PID1 "-01",                                 /* version ff */
        "00-" TID1 "-" PID1 "-01-extra",                           /* version 00 is 55 long */
        "not a traceparent",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char rid[32], ikey[32], errstr[256] = "";
        snprintf(rid, sizeof rid, "rbad%zu", i);
        snprintf(ikey, sizeof ikey, "kbad%zu", i);
        hf_record_t r = reserve(rid, ikey);
        hf_reply_t rep;
        int err = client_call_traced(world.c, &r, bad[i], CALL_MS, 3, &rep, errstr, sizeof errstr);
        if (err)
            fail_msg("'%s': client_call_traced: %s", bad[i], errstr);
        assert_int_equal(rep.outcome, HF_REPLY_HELD); /* answered as without a header */
        find_t f[] = {
            find(HF_T_COUNTER_COMMANDS, HF_REC_HOLD, rid, NULL, 0),
            find(HF_T_COUNTER_RESULTS, HF_REC_COUNTER_RESULT, rid, NULL, HF_CMD_HOLD),
            find(HF_T_REPLIES, HF_REC_REPLY, rid, ikey, 0),
            find(HF_T_LEDGER, HF_REC_LEDGER_EVENT, rid, NULL, HF_LEDGER_HELD),
        };
        for (size_t j = 0; j < sizeof f / sizeof f[0]; j++)
            if (f[j].traced)
                fail_msg("'%s': the %s carries traceparent '%s'", bad[i],
                         hf_rec_type_name(f[j].type), f[j].tp);
    }
    /* Nothing went to the dead-letter topic for them. */
    assert_int_equal(harness_read(&world.h, HF_T_DEAD_LETTERS, NULL, NULL), 0);
}

static void test_an_expiry_acts_for_no_request_and_carries_no_trace(void **state)
{
    /* The hold is traced; its expiry, minutes or here a second later, is the
     * gateway's timer acting on stored state: its outputs carry no trace. */
    hf_record_t r = reserve_ttl("rexp", "kexp", 1000);
    hf_reply_t rep;
    char errstr[256] = "";
    int err = client_call_traced(world.c, &r, "00-" TID1 "-" PID1 "-01", CALL_MS, 3, &rep, errstr,
                                 sizeof errstr);
    if (err)
        fail_msg("client_call_traced: %s", errstr);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    find_t held = find(HF_T_LEDGER, HF_REC_LEDGER_EVENT, "rexp", NULL, HF_LEDGER_HELD);
    assert_traced(&held, "ledger HELD", TID1, PID1);
    find_t expired = find(HF_T_LEDGER, HF_REC_LEDGER_EVENT, "rexp", NULL, HF_LEDGER_EXPIRED);
    if (expired.traced)
        fail_msg("the EXPIRED ledger event carries traceparent '%s'", expired.tp);
    find_t release = find(HF_T_COUNTER_COMMANDS, HF_REC_RELEASE_HOLD, "rexp", NULL, 0);
    if (release.traced)
        fail_msg("the expiry's ReleaseHold carries traceparent '%s'", release.tp);
}

static void test_a_misrouted_request_is_forwarded_and_answered_under_its_trace(void **state)
{
    /* Produced to another partition than its key's (as a producer on
     * librdkafka's default partitioner would): that partition's task forwards
     * it to its key's partition as a span of the request's trace, and it is
     * served there like any other: HELD, no dead letter. */
    hf_record_t r = reserve("rmis", "kmis");
    uint8_t buf[HF_RECORD_LEN_MAX];
    size_t len = 0;
    char errstr[512];
    assert_int_equal(codec_encode(&r, buf, sizeof buf, &len, errstr, sizeof errstr), HF_OK);
    int32_t count = harness_partitions(&world.h, HF_T_REQUESTS);
    assert_true(count > 1);
    int32_t right = kafka_partition_for_key("rmis", 4, count);
    kafka_header_t tp = {TRACE_HEADER_NAME, "00-" TID2 "-" PID1 "-00"};
    assert_int_equal(kafka_produce(world.h.kp, topic_name(HF_T_REQUESTS), (right + 1) % count,
                                   "rmis", 4, buf, len, &tp, 1, NULL, errstr, sizeof errstr),
                     HF_OK);
    harness_flush(&world.h);
    find_t copy = find(HF_T_REQUESTS, HF_REC_RESERVE, "rmis", NULL, 1);
    assert_int_equal(copy.partition, right);
    assert_traced_flags(&copy, "forwarded Reserve", TID2, PID1, 0x00);
    find_t rep = find(HF_T_REPLIES, HF_REC_REPLY, "rmis", "kmis", 0);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    assert_traced_flags(&rep, "HELD reply", TID2, PID1, 0x00);
    assert_int_equal(harness_read(&world.h, HF_T_DEAD_LETTERS, NULL, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_reserves_trace_reaches_every_hop_with_a_span_per_hop),
        cmocka_unit_test(test_a_malformed_traceparent_is_answered_and_not_propagated),
        cmocka_unit_test(test_an_expiry_acts_for_no_request_and_carries_no_trace),
        cmocka_unit_test(test_a_misrouted_request_is_forwarded_and_answered_under_its_trace),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
