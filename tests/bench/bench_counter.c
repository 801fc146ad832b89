/* make bench-counter: exactly-once throughput of the counter stage next to a
 * stateless exactly-once relay, on the same pre-produced commands, in one run.
 * Each round produces N commands to fresh topics, starts `holdfast run` for one
 * stage and measures from the first output record to the last (so process start,
 * group join and restore are excluded) plus the process's CPU time. Rounds
 * alternate counter and relay; medians and the ratio are printed.
 * Env: BENCH_COMMANDS (default 200000), BENCH_ROUNDS (3), BENCH_PAIRS (64). */
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

typedef struct {
    int64_t first_ms, last_ms;
    size_t count;
} span_t;

static void span_result(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    span_t *s = opaque;
    int64_t ts = msg->timestamp_ms;
    if (s->count++ == 0 || ts < s->first_ms)
        s->first_ms = ts;
    if (ts > s->last_ms)
        s->last_ms = ts;
}

static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long utime = 0, stime = 0;
    /* fields after ")": state(3) ... utime(14) stime(15) */
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static void produce_commands(harness_t *h, size_t n, int pairs)
{
    char wh[16], sku[32], key[128], rid[32];
    for (int p = 0; p < pairs; p++) {
        snprintf(wh, sizeof wh, "W%d", p % 8);
        snprintf(sku, sizeof sku, "SKU-%d", p / 8);
        hf_record_t r = harness_feed(wh, sku, HF_FEED_RECEIVE, 1000000, 1);
        harness_send(h, HF_T_COUNTER_COMMANDS, harness_pair(key, wh, sku), &r);
    }
    for (size_t i = pairs; i < n; i++) {
        int p = (int)(i % (size_t)pairs);
        snprintf(wh, sizeof wh, "W%d", p % 8);
        snprintf(sku, sizeof sku, "SKU-%d", p / 8);
        snprintf(rid, sizeof rid, "b%zu", i);
        hf_record_t r = harness_hold(rid, 0, wh, sku, 1);
        harness_send(h, HF_T_COUNTER_COMMANDS, harness_pair(key, wh, sku), &r);
    }
    harness_flush(h);
}

typedef struct {
    double rate, cpu_ms_per_k;
} round_t;

static round_t run_round(const char *stage, size_t n, int pairs, int round)
{
    harness_t h;
    char name[48];
    snprintf(name, sizeof name, "bench-%s-%d", stage, round);
    harness_init(&h, name);
    produce_commands(&h, n, pairs);
    bool relay = strcmp(stage, "relay") == 0;
    hf_topic_id_t out = relay ? HF_T_BENCH_RELAY : HF_T_COUNTER_RESULTS;
    size_t want = relay ? n : n - (size_t)pairs;
    pid_t pid = harness_start(&h, "a", stage);
    size_t got = harness_wait_count(&h, out, want, 600000);
    double cpu = cpu_seconds(pid);
    assert_int_equal(harness_stop(pid), 0);
    assert_int_equal(got, want);
    span_t s = {0, 0, 0};
    harness_read(&h, out, span_result, &s);
    harness_cleanup(&h);
    double secs = (double)(s.last_ms - s.first_ms) / 1000.0;
    round_t r = {secs > 0 ? (double)s.count / secs : 0, cpu * 1e6 / (double)n};
    printf("  round %d %-7s %zu records in %.2f s = %.0f records/s; process CPU %.3f ms per 1000 "
           "commands (incl. start-up)\n",
           round, stage, s.count, secs, r.rate, r.cpu_ms_per_k);
    fflush(stdout);
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void bench_counter_vs_relay(void **state)
{
    size_t n = (size_t)harness_env_int("BENCH_COMMANDS", 200000);
    int rounds = (int)harness_env_int("BENCH_ROUNDS", 3);
    int pairs = (int)harness_env_int("BENCH_PAIRS", 64);
    if (rounds < 1 || rounds > 15)
        rounds = 3;
    double counter[15], relay[15], ccpu[15], rcpu[15];
    printf("bench-counter: %zu commands (%d pairs over 8 partitions, 1 task thread), %d rounds,\n"
           "broker on the same 2 cores, batch_records_max 500; exactly-once in both stages\n",
           n, pairs, rounds);
    for (int r = 0; r < rounds; r++) {
        round_t c = run_round("counter", n, pairs, r);
        round_t x = run_round("relay", n, pairs, r);
        counter[r] = c.rate, ccpu[r] = c.cpu_ms_per_k;
        relay[r] = x.rate, rcpu[r] = x.cpu_ms_per_k;
    }
    double mc = median(counter, rounds), mr = median(relay, rounds);
    printf("median: counter %.0f commands/s, relay %.0f records/s, counter/relay = %.2f\n", mc, mr,
           mr > 0 ? mc / mr : 0);
    printf("median CPU per 1000 commands: counter %.1f ms, relay %.1f ms\n", median(ccpu, rounds),
           median(rcpu, rounds));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(bench_counter_vs_relay)};
    return cmocka_run_group_tests_name("bench-counter", tests, NULL, NULL);
}
