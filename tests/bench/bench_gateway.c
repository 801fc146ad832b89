/* make bench-gateway: reserve / commit / release latency through the whole
 * pipeline (`holdfast run --stages counter,aggregator,gateway`, one task thread
 * per stage) at steady open-loop rates. Each reserve (1 unit of a random SKU,
 * shopper at a random US location) is sent at its intended time; latency is
 * measured from that intended time to the reply, so a stall shows up instead of
 * slowing the sender. A HELD reply is followed at once by a commit or a release
 * (alternating). Env: BENCH_RATES (reserves/s, default "50,200,400"),
 * BENCH_SECONDS per rate (default 15), BENCH_SKUS (default 200), BENCH_TRACED
 * (1: every request carries a W3C traceparent, its own trace per reservation,
 * so the cost of carrying it through every hop shows beside a run without).
 * Each rate also prints the CPU time the holdfast process used. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "lib/client.h"
#include "trace.h"

#define REQS_MAX        200000
#define WAREHOUSES_USED 5

typedef struct {
    int64_t reserve_sent, reserve_ms, settle_sent, settle_ms;
    int outcome;
} req_t;

static req_t reqs[REQS_MAX];
static char warehouses[WAREHOUSES_USED][HF_WAREHOUSE_LEN_MAX + 1];

static void load_warehouse_ids(void)
{
    json_error_t jerr;
    json_t *root = json_load_file("config/warehouses.json", 0, &jerr);
    assert_non_null(root);
    json_t *arr = json_object_get(root, "warehouses");
    for (int i = 0; i < WAREHOUSES_USED; i++)
        snprintf(warehouses[i], sizeof warehouses[i], "%s",
                 json_string_value(json_object_get(json_array_get(arr, (size_t)i), "id")));
    json_decref(root);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void pct(const char *what, int64_t *v, size_t n)
{
    if (!n) {
        printf("    %-8s no samples\n", what);
        return;
    }
    qsort(v, n, sizeof *v, cmp64);
    printf("    %-8s p50 %4lld ms  p99 %4lld ms  p999 %4lld ms  max %5lld ms  (n=%zu)\n", what,
           (long long)v[n / 2], (long long)v[n * 99 / 100], (long long)v[n * 999 / 1000],
           (long long)v[n - 1], n);
}

static hf_record_t make_reserve(int i, int skus, unsigned *seed)
{
    static hf_record_t r;
    hf_reserve_t *q = &hf_record_reset(&r, HF_REC_RESERVE)->u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "b%d", i);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "k%d", i);
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "G-%d", (int)(rand_r(seed) % (unsigned)skus));
    q->lines[0].qty = 1;
    q->ship_to = (hf_geo_t){30 + rand_r(seed) % 15, -120 + (double)(rand_r(seed) % 45)};
    q->sent_at_ms = harness_now_ms();
    return r;
}

static hf_record_t make_settle(int i)
{
    static hf_record_t r;
    if (i % 2) {
        hf_commit_t *c = &hf_record_reset(&r, HF_REC_COMMIT)->u.commit;
        snprintf(c->reservation_id, sizeof c->reservation_id, "b%d", i);
        snprintf(c->idempotency_key, sizeof c->idempotency_key, "c%d", i);
        snprintf(c->payment_id, sizeof c->payment_id, "pay%d", i);
    } else {
        hf_release_t *x = &hf_record_reset(&r, HF_REC_RELEASE)->u.release;
        snprintf(x->reservation_id, sizeof x->reservation_id, "b%d", i);
        snprintf(x->idempotency_key, sizeof x->idempotency_key, "x%d", i);
        snprintf(x->reason, sizeof x->reason, "abandoned");
    }
    return r;
}

static bool traced;

/* A traceparent of its own per reservation i when BENCH_TRACED, else none. */
static const char *traceparent_of(int i, char out[TRACE_PARENT_LEN + 1])
{
    if (!traced)
        return NULL;
    trace_ctx_t tc = {.flags = 0x01};
    memcpy(tc.trace_id, "bench-gw-trace--", sizeof tc.trace_id);
    memcpy(tc.trace_id + 8, &i, sizeof i);
    trace_span_id_new(tc.parent_id);
    trace_format(&tc, out);
    return out;
}

/* CPU seconds (user + system) process pid has used, from /proc. */
static double cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Handles one reply: records latency, sends the settle for a HELD reserve. */
static void on_reply(hf_client_t *c, const hf_reply_t *rep, int first, int last)
{
    char errstr[256];
    int i = atoi(rep->reservation_id + 1);
    if (rep->reservation_id[0] != 'b' || i < first || i >= last)
        return;
    int64_t now = harness_now_ms();
    req_t *q = &reqs[i];
    if (rep->idempotency_key[0] == 'k' && !q->reserve_ms) {
        q->reserve_ms = now - q->reserve_sent;
        q->outcome = rep->outcome;
        if (rep->outcome == HF_REPLY_HELD) {
            hf_record_t s = make_settle(i);
            q->settle_sent = now;
            char tp[TRACE_PARENT_LEN + 1];
            assert_int_equal(
                client_send_async_traced(c, &s, traceparent_of(i, tp), errstr, sizeof errstr),
                HF_OK);
        }
    } else if (rep->idempotency_key[0] != 'k' && !q->settle_ms) {
        q->settle_ms = now - q->settle_sent;
    }
}

static void run_rate(hf_client_t *c, pid_t pid, int rate, int seconds, int skus, int *next_id)
{
    double cpu_before = cpu_s(pid);
    char errstr[256];
    unsigned seed = (unsigned)rate;
    int first = *next_id, n = rate * seconds;
    if (first + n > REQS_MAX)
        n = REQS_MAX - first;
    int last = first + n;
    int64_t start = harness_now_ms() + 100;
    int sent = 0;
    hf_reply_t rep;
    while (sent < n) {
        int64_t due = start + (int64_t)sent * 1000 / rate;
        while (sent < n && harness_now_ms() >= due) {
            hf_record_t r = make_reserve(first + sent, skus, &seed);
            reqs[first + sent].reserve_sent = due;
            char tp[TRACE_PARENT_LEN + 1];
            assert_int_equal(client_send_async_traced(c, &r, traceparent_of(first + sent, tp),
                                                      errstr, sizeof errstr),
                             HF_OK);
            sent++;
            due = start + (int64_t)sent * 1000 / rate;
        }
        assert_int_equal(client_flush(c, 10000, errstr, sizeof errstr), HF_OK);
        int64_t wait = due - harness_now_ms();
        while (wait > 0 && client_poll(c, (int)wait, &rep, errstr, sizeof errstr) == 1) {
            on_reply(c, &rep, first, last);
            wait = due - harness_now_ms();
        }
    }
    int64_t drain_until = harness_now_ms() + 10000;
    while (harness_now_ms() < drain_until) {
        int rc = client_poll(c, 200, &rep, errstr, sizeof errstr);
        if (rc == 1)
            on_reply(c, &rep, first, last);
        assert_int_equal(client_flush(c, 10000, errstr, sizeof errstr), HF_OK);
        int pending = 0;
        for (int i = first; i < last; i++)
            pending +=
                !reqs[i].reserve_ms || (reqs[i].outcome == HF_REPLY_HELD && !reqs[i].settle_ms);
        if (!pending)
            break;
    }
    static int64_t res[REQS_MAX], com[REQS_MAX], rel[REQS_MAX];
    size_t nr = 0, nc = 0, nl = 0, held = 0, rejected = 0, missing = 0;
    for (int i = first; i < last; i++) {
        const req_t *q = &reqs[i];
        if (!q->reserve_ms) {
            missing++;
            continue;
        }
        res[nr++] = q->reserve_ms;
        held += q->outcome == HF_REPLY_HELD;
        rejected += q->outcome != HF_REPLY_HELD;
        if (q->settle_ms)
            (i % 2 ? com : rel)[i % 2 ? nc++ : nl++] = q->settle_ms;
    }
    printf("  %d reserves/s for %d s%s: %zu held, %zu rejected, %zu without reply; holdfast CPU "
           "%.2f s\n",
           rate, seconds, traced ? " (traced)" : "", held, rejected, missing,
           cpu_s(pid) - cpu_before);
    pct("reserve", res, nr);
    pct("commit", com, nc);
    pct("release", rel, nl);
    fflush(stdout);
    *next_id = last;
}

static void bench_gateway_latency(void **state)
{
    const char *rates = harness_env_str("BENCH_RATES", "50,200,400");
    int seconds = (int)harness_env_int("BENCH_SECONDS", 15);
    int skus = (int)harness_env_int("BENCH_SKUS", 200);
    traced = harness_env_int("BENCH_TRACED", 0) == 1;
    load_warehouse_ids();
    harness_t h;
    harness_init(&h, "bench-gw");
    char cfg[600], cwd[256], key[128], sku[32];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(cfg, sizeof cfg, "{\"warehouses_file\": \"%s/config/warehouses.json\"}", cwd);
    const char *stages = harness_env_str("BENCH_STAGES", "counter,aggregator,gateway");
    pid_t pid = harness_start_with(&h, "a", stages, cfg);
    for (int s = 0; s < skus; s++)
        for (int w = 0; w < WAREHOUSES_USED; w++) {
            snprintf(sku, sizeof sku, "G-%d", s);
            hf_record_t f = harness_feed(warehouses[w], sku, HF_FEED_RECEIVE, 100000, 1);
            harness_send(&h, HF_T_STOCK_FEED, harness_pair(key, warehouses[w], sku), &f);
        }
    harness_flush(&h);
    if (strstr(stages, "aggregator"))
        assert_true(harness_wait_count(&h, HF_T_AVAILABILITY, (size_t)skus, 120000) >=
                    (size_t)skus);
    harness_sleep_ms(2000);
    char errstr[256];
    hf_client_t *c = NULL;
    assert_int_equal(client_new(h.bootstrap, NULL, &c, errstr, sizeof errstr), HF_OK);
    printf("bench-gateway: %d SKUs x %d warehouses; holdfast counter+aggregator+gateway, one task\n"
           "thread each, broker and this driver on the same 2 cores; latency from intended send\n",
           skus, WAREHOUSES_USED);
    /* Warm-up: the first requests pay for connections and the view. */
    int next_id = 0;
    run_rate(c, pid, 20, 2, skus, &next_id);
    char list[128];
    snprintf(list, sizeof list, "%s", rates);
    char *save = NULL;
    for (char *r = strtok_r(list, ",", &save); r; r = strtok_r(NULL, ",", &save))
        run_rate(c, pid, atoi(r), seconds, skus, &next_id);
    client_destroy(c);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(bench_gateway_latency)};
    return cmocka_run_group_tests_name("bench-gateway", tests, NULL, NULL);
}
