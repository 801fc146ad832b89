/* `hfctl reconcile` against the real broker and the real `holdfast` running
 * counter, aggregator and gateway. The group setup drives a small mixed
 * workload through the client library — reserves (one split over two skus, one
 * retried), a commit and its duplicated webhook, a release, a short-TTL expiry
 * whose payment comes late and re-reserves (late_payment_policy rereserve), a
 * rejection — and waits until the counters have applied everything. Then:
 * reconcile passes with the right counts, every check enforced; and after
 * forged records are produced straight into the output topics (a StockLevel
 * with available -1, a second terminal ledger event, a Reply with another
 * outcome for an answered idempotency key, a hold released after it was
 * committed) it fails naming each. Both through the library and through
 * build/hfctl's exit code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "harness.h"
#include "lib/client.h"
#include "lib/reconcile.h"

#define WAIT_MS 45000
#define CALL_MS 10000

typedef struct {
    harness_t h;
    hf_client_t *c;
    pid_t pid;
    hf_wh_t r1_wh; /* where r1's 3 units were held */
} world_t;

static world_t world;

static hf_record_t reserve(const char *rid, const char *key, const char *lines, int64_t ttl_ms)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "%s", key);
    /* lines: "SKU:qty[,SKU:qty]" */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", lines);
    char *save = NULL;
    for (char *l = strtok_r(buf, ",", &save); l; l = strtok_r(NULL, ",", &save)) {
        hf_line_t *line = &q->lines[q->lines_count++];
        char *colon = strchr(l, ':');
        *colon = '\0';
        snprintf(line->sku, sizeof line->sku, "%s", l);
        line->qty = atoll(colon + 1);
    }
    q->ship_to = (hf_geo_t){40.73, -73.99};
    q->ttl_ms = ttl_ms;
    q->sent_at_ms = harness_now_ms();
    return r;
}

/* Sends req until it is answered with something else than REJECTED_INVALID or
 * BUSY: right after start the gateway's view may not know the skus yet, and a
 * loaded box (the sanitizer build) may shed a reserve; neither answer is
 * remembered, so the same request can simply be sent again. */
static hf_reply_t call(const hf_record_t *req)
{
    hf_reply_t rep;
    char errstr[256] = "";
    int64_t deadline = harness_now_ms() + WAIT_MS;
    for (;;) {
        if (client_call(world.c, req, CALL_MS, 3, &rep, errstr, sizeof errstr) != HF_OK)
            fail_msg("client_call: %s", errstr);
        bool again = rep.outcome == HF_REPLY_REJECTED_INVALID || rep.outcome == HF_REPLY_BUSY;
        if (!again || harness_now_ms() > deadline)
            return rep;
        harness_sleep_ms(300);
    }
}

static void feed(const char *wh, const char *sku, int64_t qty, int64_t seq)
{
    char key[128];
    hf_record_t f = harness_feed(wh, sku, HF_FEED_RECEIVE, qty, seq);
    harness_send(&world.h, HF_T_STOCK_FEED, harness_pair(key, wh, sku), &f);
}

static int64_t counter_sum(bool on_hand)
{
    static const char *const pairs[][2] = {{"W1", "SKU-A"}, {"W2", "SKU-A"}, {"W1", "SKU-B"}};
    int64_t sum = 0;
    for (size_t i = 0; i < 3; i++) {
        hf_counter_state_t c = {0};
        harness_counter(&world.h, pairs[i][0], pairs[i][1], &c);
        sum += on_hand ? c.on_hand : c.reserved;
    }
    return sum;
}

static void wait_counters(int64_t on_hand, int64_t reserved)
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while ((counter_sum(true) != on_hand || counter_sum(false) != reserved) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(counter_sum(true), on_hand);
    assert_int_equal(counter_sum(false), reserved);
}

static void workload(void)
{
    feed("W1", "SKU-A", 100, 1);
    feed("W2", "SKU-A", 50, 2);
    feed("W1", "SKU-B", 5, 3);
    harness_flush(&world.h);
    wait_counters(155, 0);

    hf_record_t r1 = reserve("r1", "k-r1", "SKU-A:3", 0);
    hf_reply_t a = call(&r1);
    assert_int_equal(a.outcome, HF_REPLY_HELD);
    snprintf(world.r1_wh, sizeof world.r1_wh, "%s", a.allocations[0].warehouse_id);
    hf_record_t c1 = harness_commit_req("r1", "c-r1", "pay-1");
    assert_int_equal(call(&c1).outcome, HF_REPLY_COMMITTED);
    assert_int_equal(call(&c1).outcome, HF_REPLY_COMMITTED); /* the webhook, again */

    hf_record_t r2 = reserve("r2", "k-r2", "SKU-A:2", 0);
    assert_int_equal(call(&r2).outcome, HF_REPLY_HELD);
    hf_record_t x2 = harness_release_req("r2", "x-r2");
    assert_int_equal(call(&x2).outcome, HF_REPLY_RELEASED);

    hf_record_t r3 = reserve("r3", "k-r3", "SKU-B:2", 1000); /* expires in 1 s */
    hf_reply_t e = call(&r3);
    assert_int_equal(e.outcome, HF_REPLY_HELD);

    hf_record_t r4 = reserve("r4", "k-r4", "SKU-B:10", 0);
    assert_int_equal(call(&r4).outcome, HF_REPLY_REJECTED_INSUFFICIENT);

    hf_record_t r5 = reserve("r5", "k-r5", "SKU-A:4,SKU-B:1", 0);
    assert_int_equal(call(&r5).outcome, HF_REPLY_HELD);

    hf_record_t r6 = reserve("r6", "k-r6", "SKU-A:1", 0);
    hf_reply_t f1 = call(&r6), f2 = call(&r6); /* a retried reserve: the same answer */
    assert_int_equal(f1.outcome, HF_REPLY_HELD);
    assert_int_equal(f2.replied_at_ms, f1.replied_at_ms);

    /* Everything applied: 3 units sold; r5 (5) and r6 (1) held; r3 expired. */
    int64_t until = e.expires_at_ms + 500;
    while (harness_now_ms() < until)
        harness_sleep_ms(100);
    wait_counters(152, 6);

    /* r3's payment comes after its expiry; the policy re-reserves its 2 units
     * and sells them: 150 on hand. */
    hf_record_t c3 = harness_commit_req("r3", "c-r3", "pay-3");
    hf_reply_t late = call(&c3);
    assert_int_equal(late.outcome, HF_REPLY_COMMITTED);
    assert_int_equal(late.allocations_count, 1);
    assert_int_equal(late.allocations[0].qty, 2);
    wait_counters(150, 6);
}

static int setup(void **state)
{
    harness_init(&world.h, "reconcile");
    char wpath[512], cwd[256], cfg[1024], errstr[256];
    snprintf(wpath, sizeof wpath, "%s/warehouses.json", world.h.workdir);
    FILE *f = fopen(wpath, "w");
    if (!f || !getcwd(cwd, sizeof cwd))
        return -1;
    fputs("{\"warehouses\": [{\"id\":\"W1\",\"lat\":40.71,\"lon\":-74.01,\"cost_per_unit\":1.0},"
          "{\"id\":\"W2\",\"lat\":41.88,\"lon\":-87.63,\"cost_per_unit\":1.0},"
          "{\"id\":\"W3\",\"lat\":34.05,\"lon\":-118.24,\"cost_per_unit\":1.0}]}",
          f);
    fclose(f);
    snprintf(cfg, sizeof cfg,
             "{\"warehouses_file\": \"%s/%s\", \"result_timeout_ms\": 5000, "
             "\"late_payment_policy\": \"rereserve\"}",
             cwd, wpath);
    world.pid = harness_start_with(&world.h, "r1", "counter,aggregator,gateway", cfg);
    if (client_new(world.h.bootstrap, NULL, &world.c, errstr, sizeof errstr) != HF_OK)
        return -1;
    workload();
    return 0;
}

static int teardown(void **state)
{
    client_destroy(world.c);
    if (world.pid > 0)
        harness_stop(world.pid);
    harness_cleanup(&world.h);
    return 0;
}

/* ---- running the reconciler */

static json_t *run_library(bool quiescent, rc_verdict_t *verdict)
{
    reconcile_opts_t o;
    reconcile_opts_default(&o);
    o.bootstrap = world.h.bootstrap;
    o.quiescent = quiescent;
    o.limits.violations_shown_max = 50;
    char *buf = NULL, errstr[512] = "";
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    int64_t t0 = harness_now_ms();
    int err = reconcile_run(&o, out, verdict, errstr, sizeof errstr);
    fclose(out);
    print_message("reconcile (%lld ms): %s", (long long)(harness_now_ms() - t0), buf);
    if (err)
        fail_msg("reconcile_run: %s", errstr);
    json_t *v = json_loads(buf, 0, NULL);
    free(buf);
    assert_non_null(v);
    return v;
}

/* Runs `hfctl reconcile ARGS` (beside HOLDFAST_BIN) with this test's prefix;
 * returns its exit status, or -1 when there is no hfctl to run. */
static int run_cli(const char *args, char *out, size_t out_size)
{
    char cmd_args[512];
    snprintf(cmd_args, sizeof cmd_args, "reconcile %s 2>/dev/null", args);
    int rc = harness_run_tool(&world.h, "hfctl", cmd_args, out, out_size);
    return rc == -2 ? -1 : rc;
}

static json_int_t count(json_t *v, const char *name)
{
    return json_integer_value(json_object_get(json_object_get(v, "counts"), name));
}

static json_int_t kind_count(json_t *v, const char *kind)
{
    return json_integer_value(json_object_get(json_object_get(v, "violations_by_kind"), kind));
}

/* The first violation of kind, as shown. */
static json_t *shown(json_t *v, const char *kind)
{
    json_t *list = json_object_get(v, "violations");
    for (size_t i = 0; i < json_array_size(list); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(list, i), "kind")), kind) == 0)
            return json_array_get(list, i);
    return NULL;
}

/* ---- tests */

static void test_a_real_mixed_workload_reconciles_with_every_check_enforced(void **state)
{
    rc_verdict_t verdict = RC_FAIL;
    json_t *v = run_library(true, &verdict);
    assert_string_equal(json_string_value(json_object_get(v, "verdict")), "PASS");
    assert_int_equal(verdict, RC_PASS);
    assert_int_equal(json_integer_value(json_object_get(v, "violations_total")), 0);
    assert_int_equal(count(v, "reservations"), 6);
    assert_int_equal(count(v, "held"), 2);
    assert_int_equal(count(v, "committed"), 1);
    assert_int_equal(count(v, "released"), 1);
    assert_int_equal(count(v, "expired"), 1);
    assert_int_equal(count(v, "rejected"), 1);
    assert_int_equal(count(v, "ledger_held_units"), 6);
    assert_int_equal(count(v, "counter_reserved_units"), 6);
    assert_int_equal(count(v, "holds_committed"), 2); /* r1's and r3's re-reserved one */
    assert_int_equal(count(v, "late_payments"), 1);
    assert_int_equal(count(v, "late_rereserved"), 1);
    assert_int_equal(count(v, "feeds_applied"), 3);
    assert_int_equal(count(v, "expiries"), 1);
    assert_true(count(v, "gateway_expiry_lag_ms_max") <= 5000);
    json_decref(v);

    char out[65536];
    int rc = run_cli("--quiescent 1", out, sizeof out);
    if (rc >= 0) {
        assert_int_equal(rc, 0);
        assert_true(strncmp(out, "{\"verdict\":\"PASS\"", 17) == 0);
        /* The same topics in three shards, later passes from the spill files. */
        rc = run_cli("--quiescent 1 --shards 3 --spill-dir /tmp", out, sizeof out);
        assert_int_equal(rc, 0);
        assert_true(strncmp(out, "{\"verdict\":\"PASS\"", 17) == 0);
    } else {
        print_message("no hfctl beside %s: CLI not checked\n", world.h.holdfast_bin);
    }
}

static void forge(void)
{
    hf_record_t rec;
    /* A StockLevel with available -1 (a later version, as if the counter wrote it). */
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_STOCK_LEVEL;
    hf_stock_level_t *sl = &rec.u.stock_level;
    snprintf(sl->warehouse_id, sizeof sl->warehouse_id, "W1");
    snprintf(sl->sku, sizeof sl->sku, "SKU-A");
    sl->on_hand = 5;
    sl->reserved = 6;
    sl->available = -1;
    sl->version = 1000000;
    harness_send(&world.h, HF_T_STOCK_LEVELS, "SKU-A", &rec);

    /* r1 was COMMITTED: a second terminal event. */
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_LEDGER_EVENT;
    snprintf(rec.u.ledger_event.reservation_id, sizeof rec.u.ledger_event.reservation_id, "r1");
    rec.u.ledger_event.kind = HF_LEDGER_RELEASED;
    rec.u.ledger_event.at_ms = harness_now_ms();
    harness_send(&world.h, HF_T_LEDGER, "r1", &rec);

    /* r1's reserve key was answered HELD: now RELEASED. */
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_REPLY;
    snprintf(rec.u.reply.reservation_id, sizeof rec.u.reply.reservation_id, "r1");
    snprintf(rec.u.reply.idempotency_key, sizeof rec.u.reply.idempotency_key, "k-r1");
    rec.u.reply.outcome = HF_REPLY_RELEASED;
    harness_send(&world.h, HF_T_REPLIES, "r1", &rec);

    /* r1's hold was committed: now also released. */
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_COUNTER_RESULT;
    hf_counter_result_t *r = &rec.u.counter_result;
    snprintf(r->reservation_id, sizeof r->reservation_id, "r1");
    snprintf(r->warehouse_id, sizeof r->warehouse_id, "%s", world.r1_wh);
    snprintf(r->sku, sizeof r->sku, "SKU-A");
    r->command = HF_CMD_RELEASE;
    r->outcome = HF_OUTCOME_OK;
    r->qty = 3;
    harness_send(&world.h, HF_T_COUNTER_RESULTS, "r1", &rec);
    harness_flush(&world.h);
}

static void test_forged_records_fail_the_verdict_naming_each(void **state)
{
    /* Stop the processor first: what is forged stays as forged. */
    assert_int_equal(harness_stop(world.pid), 0);
    world.pid = 0;
    forge();
    rc_verdict_t verdict = RC_PASS;
    json_t *v = run_library(false, &verdict);
    assert_string_equal(json_string_value(json_object_get(v, "verdict")), "FAIL");
    assert_int_equal(verdict, RC_FAIL);
    assert_int_equal(kind_count(v, "stock_level_negative"), 1);
    assert_int_equal(kind_count(v, "ledger_terminal_twice"), 1);
    assert_int_equal(kind_count(v, "idempotency_outcome_changed"), 1);
    assert_int_equal(kind_count(v, "hold_settled_twice"), 1);
    assert_string_equal(json_string_value(json_object_get(shown(v, "stock_level_negative"), "key")),
                        "W1|SKU-A");
    assert_string_equal(
        json_string_value(json_object_get(shown(v, "ledger_terminal_twice"), "key")), "r1");
    assert_string_equal(
        json_string_value(json_object_get(shown(v, "idempotency_outcome_changed"), "key")),
        "r1|k-r1");
    json_t *twice = shown(v, "hold_settled_twice");
    assert_non_null(twice);
    assert_true(json_integer_value(json_object_get(twice, "offset")) >= 0);
    json_decref(v);

    char out[65536];
    int rc = run_cli("--violations 5", out, sizeof out);
    if (rc >= 0) {
        assert_int_equal(rc, 1);
        assert_true(strncmp(out, "{\"verdict\":\"FAIL\"", 17) == 0);
        /* Three shards find the same four forgeries, each once. */
        rc = run_cli("--violations 5 --shards 3 --spill-dir /tmp", out, sizeof out);
        assert_int_equal(rc, 1);
        json_error_t jerr;
        json_t *sharded = json_loads(out, JSON_DISABLE_EOF_CHECK, &jerr);
        assert_non_null(sharded);
        assert_string_equal(json_string_value(json_object_get(sharded, "verdict")), "FAIL");
        const char *kinds[] = {"stock_level_negative", "ledger_terminal_twice",
                               "idempotency_outcome_changed", "hold_settled_twice"};
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            assert_int_equal(kind_count(sharded, kinds[i]), 1);
        json_decref(sharded);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_real_mixed_workload_reconciles_with_every_check_enforced),
        cmocka_unit_test(test_forged_records_fail_the_verdict_naming_each),
    };
    return cmocka_run_group_tests_name("hfctl reconcile on a real broker", tests, setup, teardown);
}
