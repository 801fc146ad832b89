/* make bench-aggregator: how long a counter change takes to reach the routing
 * view and the catalog. BENCH_SKUS SKUs (default 3000) each get 1 unit at one
 * warehouse; holds then drain them one by one at BENCH_RATE per second (default
 * 300) through `holdfast run --stages counter,aggregator`. Three followers record
 * when each SKU's drained StockLevel, its Availability (total 0) and its SOLD_OUT
 * become visible to a read_committed consumer. Printed: p50/p99 of
 *   StockLevel visible -> Availability visible (the aggregator hop),
 *   hold sent -> Availability visible (counter + aggregator),
 *   dwell end -> SOLD_OUT visible (signal delay beyond the configured dwell). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "harness.h"

#define SKUS_MAX 100000

typedef struct {
    int64_t sent_ms, level_ms, avail_ms, signal_ms, dwell_end_ms;
} sku_times_t;

static sku_times_t times[SKUS_MAX];
static atomic_bool followers_stop;

typedef struct {
    harness_t *h;
    hf_topic_id_t topic;
} follower_t;

static int sku_index(const char *sku)
{
    return strncmp(sku, "A-", 2) == 0 ? atoi(sku + 2) : -1;
}

static void record(hf_topic_id_t topic, const hf_record_t *rec, int64_t now)
{
    if (topic == HF_T_STOCK_LEVELS && rec->type == HF_REC_STOCK_LEVEL) {
        int i = sku_index(rec->u.stock_level.sku);
        if (i >= 0 && i < SKUS_MAX && rec->u.stock_level.available == 0 && !times[i].level_ms)
            times[i].level_ms = now;
    } else if (topic == HF_T_AVAILABILITY && rec->type == HF_REC_AVAILABILITY) {
        int i = sku_index(rec->u.availability.sku);
        if (i >= 0 && i < SKUS_MAX && rec->u.availability.total == 0 && !times[i].avail_ms)
            times[i].avail_ms = now;
    } else if (topic == HF_T_SIGNALS && rec->type == HF_REC_SIGNAL) {
        int i = sku_index(rec->u.signal.sku);
        if (i >= 0 && i < SKUS_MAX && rec->u.signal.kind == HF_SIGNAL_SOLD_OUT) {
            times[i].signal_ms = now;
            times[i].dwell_end_ms = rec->u.signal.changed_at_ms + 2000;
        }
    }
}

static void *follow(void *arg)
{
    follower_t *f = arg;
    char errstr[256];
    kafka_reader_t *rd = NULL;
    int32_t parts = 0;
    static _Thread_local hf_record_t rec;
    if (kafka_reader_new(&f->h->kconf, &rd, errstr, sizeof errstr) != HF_OK ||
        kafka_reader_follow(rd, topic_name(f->topic), 10000, &parts, errstr, sizeof errstr))
        return (void *)1;
    while (!atomic_load(&followers_stop)) {
        kafka_msg_t msg = {0};
        int rc = kafka_reader_poll(rd, 50, &msg, errstr, sizeof errstr);
        if (rc != 1)
            continue;
        int64_t now = harness_now_ms();
        if (msg.value && codec_decode(msg.value, msg.value_len, &rec, errstr, sizeof errstr) == 0)
            record(f->topic, &rec, now);
        kafka_msg_release(&msg);
    }
    kafka_reader_destroy(rd);
    return NULL;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, int64_t *v, size_t n)
{
    if (n == 0) {
        printf("  %-44s no samples\n", what);
        return;
    }
    qsort(v, n, sizeof *v, cmp64);
    printf("  %-44s p50 %4lld ms  p99 %4lld ms  max %4lld ms  (n=%zu)\n", what, (long long)v[n / 2],
           (long long)v[(n * 99) / 100], (long long)v[n - 1], n);
}

static void bench_aggregator_latency(void **state)
{
    int skus = (int)harness_env_int("BENCH_SKUS", 3000);
    int rate = (int)harness_env_int("BENCH_RATE", 300);
    if (skus < 1 || skus > SKUS_MAX || rate < 1)
        fail_msg("BENCH_SKUS must be 1..%d and BENCH_RATE positive", SKUS_MAX);
    harness_t h;
    harness_init(&h, "bench-agg");
    pid_t pid = harness_start(&h, "a", "counter,aggregator");
    char sku[32], key[128], rid[32];
    for (int i = 0; i < skus; i++) {
        snprintf(sku, sizeof sku, "A-%05d", i);
        hf_record_t r = harness_feed("W1", sku, HF_FEED_RECEIVE, 1, 1);
        harness_send(&h, HF_T_COUNTER_COMMANDS, harness_pair(key, "W1", sku), &r);
    }
    harness_flush(&h);
    size_t seen = harness_wait_count(&h, HF_T_AVAILABILITY, (size_t)skus, 120000);
    assert_true(seen >= (size_t)skus);

    pthread_t th[3];
    follower_t fs[3] = {{&h, HF_T_STOCK_LEVELS}, {&h, HF_T_AVAILABILITY}, {&h, HF_T_SIGNALS}};
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, follow, &fs[i]);
    harness_sleep_ms(3000); /* followers read the history first */

    printf("bench-aggregator: %d SKUs drained at %d holds/s by one producer; holdfast runs\n"
           "counter+aggregator (1 task thread each) with the broker on the same 2 cores\n",
           skus, rate);
    int64_t start = harness_now_ms();
    for (int i = 0; i < skus; i++) {
        int64_t due = start + (int64_t)i * 1000 / rate; /* open loop */
        while (harness_now_ms() < due)
            harness_sleep_ms(1);
        snprintf(sku, sizeof sku, "A-%05d", i);
        snprintf(rid, sizeof rid, "a-%d", i);
        hf_record_t r = harness_hold(rid, 0, "W1", sku, 1);
        times[i].sent_ms = harness_now_ms();
        harness_send(&h, HF_T_COUNTER_COMMANDS, harness_pair(key, "W1", sku), &r);
        if (i % 50 == 49)
            harness_flush(&h);
    }
    harness_flush(&h);
    int64_t deadline = harness_now_ms() + 60000;
    int done = 0;
    while (harness_now_ms() < deadline && done < skus) {
        harness_sleep_ms(500);
        done = 0;
        for (int i = 0; i < skus; i++)
            done += times[i].signal_ms > 0;
    }
    atomic_store(&followers_stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(harness_stop(pid), 0);

    int64_t *hop = calloc((size_t)skus, sizeof *hop), *e2e = calloc((size_t)skus, sizeof *e2e),
            *sig = calloc((size_t)skus, sizeof *sig);
    size_t nh = 0, ne = 0, ns = 0;
    for (int i = 0; i < skus; i++) {
        if (times[i].level_ms && times[i].avail_ms)
            hop[nh++] = times[i].avail_ms - times[i].level_ms;
        if (times[i].avail_ms)
            e2e[ne++] = times[i].avail_ms - times[i].sent_ms;
        if (times[i].signal_ms)
            sig[ns++] = times[i].signal_ms - times[i].dwell_end_ms;
    }
    /* Where the tail sits in time: hops over 500 ms by second of the run. */
    int slow_by_second[600] = {0}, last_second = 0;
    for (int i = 0; i < skus; i++) {
        if (!(times[i].level_ms && times[i].avail_ms) ||
            times[i].avail_ms - times[i].level_ms <= 500)
            continue;
        int s = (int)((times[i].sent_ms - start) / 1000);
        if (s >= 0 && s < 600) {
            slow_by_second[s]++;
            last_second = s > last_second ? s : last_second;
        }
    }
    printf("  hops over 500 ms by second of the run:");
    for (int s = 0; s <= last_second; s++)
        if (slow_by_second[s])
            printf(" t=%d:%d", s, slow_by_second[s]);
    printf("\n");
    report("StockLevel visible -> Availability visible", hop, nh);
    report("hold sent -> Availability visible", e2e, ne);
    report("dwell end (2000 ms) -> SOLD_OUT visible", sig, ns);
    free(hop);
    free(e2e);
    free(sig);
    assert_int_equal(ns, (size_t)skus);
    harness_cleanup(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(bench_aggregator_latency)};
    return cmocka_run_group_tests_name("bench-aggregator", tests, NULL, NULL);
}
