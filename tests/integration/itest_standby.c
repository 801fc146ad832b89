/* Standby tasks on the real broker through the real `holdfast` binary: a
 * process follows the changelog partitions it does not own (standby_replicas
 * 1), so when their owner is killed -9 its takeover restores only the tail
 * after the offset its standby stored — and the state it then holds, derived
 * indexes included, is byte for byte the state a full restore from the
 * changelog builds. Without a standby the takeover reads the whole changelog
 * partition (ITEST_STANDBY_REPLICAS=0 runs the same test that way, and it
 * fails). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "kafka.h"
#include "state.h"

#define WAIT_MS    90000
#define PAIRS      600 /* counter pairs, spread over the changelog's partitions */
#define TAIL_PAIRS 40  /* written right before the kill: the tail at most */

static char page[256 * 1024];

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* GET /metrics into page; false while nothing listens. */
static bool get_metrics(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return false;
    }
    const char *req = "GET /metrics HTTP/1.1\r\nHost: holdfast\r\nConnection: close\r\n\r\n";
    bool ok = send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req);
    size_t len = 0;
    ssize_t r;
    while (ok && len < sizeof page - 1 && (r = recv(fd, page + len, sizeof page - 1 - len, 0)) > 0)
        len += (size_t)r;
    page[len] = '\0';
    close(fd);
    return ok && len > 0;
}

/* The standby lag the metrics of the process on port show for partition p of
 * the counter; -1 when not shown (not followed, or no answer). */
static long standby_lag(int port, int32_t p)
{
    if (!get_metrics(port))
        return -1;
    char needle[128];
    snprintf(needle, sizeof needle,
             "holdfast_standby_lag_records{stage=\"counter\",partition=\"%d\"} ", p);
    const char *at = strstr(page, needle);
    return at ? strtol(at + strlen(needle), NULL, 10) : -1;
}

/* The records of the last "counter: partition p restored" line of instance's
 * log after line skip (counting lines), or -1. */
static long restored_records(harness_t *h, const char *instance, int32_t p, long skip)
{
    char path[512], needle[96];
    snprintf(path, sizeof path, "%s/%s.log", h->workdir, instance);
    snprintf(needle, sizeof needle, "counter: partition %d restored: ", p);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    static char line[8192];
    long n = -1, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, needle);
        if (lineno++ >= skip && at)
            n = strtol(at + strlen(needle), NULL, 10);
    }
    fclose(f);
    return n;
}

static long log_lines(harness_t *h, const char *instance)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.log", h->workdir, instance);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* The partition instance restored first (it owns it), or -1. */
static int32_t owned_partition(harness_t *h, const char *instance, int32_t parts)
{
    for (int32_t p = 0; p < parts; p++)
        if (restored_records(h, instance, p, 0) >= 0)
            return p;
    return -1;
}

/* Pair i on partition p of the counter's topics: its sku. */
static void pair_on(int i, int32_t p, int32_t parts, char *sku, size_t sku_size, char *key)
{
    for (int n = 0;; n++) {
        snprintf(sku, sku_size, "SKU-%d-%d", i, n);
        harness_pair(key, "W1", sku);
        if (kafka_partition_for_key(key, strlen(key), parts) == p)
            return;
    }
}

/* A feed and a hold on each of count pairs from first, spread over both
 * partitions (when p < 0) or on partition p; waits for every hold's result. */
static void load(harness_t *h, int first, int count, int32_t p, int32_t parts, size_t *results)
{
    for (int i = first; i < first + count; i++) {
        char sku[48], key[128], rid[48];
        if (p < 0) {
            snprintf(sku, sizeof sku, "SKU-%d", i);
            harness_pair(key, "W1", sku);
        } else {
            pair_on(i, p, parts, sku, sizeof sku, key);
        }
        hf_record_t f = harness_feed("W1", sku, HF_FEED_RECEIVE, 10, 1);
        harness_send(h, HF_T_COUNTER_COMMANDS, key, &f);
        snprintf(rid, sizeof rid, "r%d", i);
        hf_record_t hold = harness_hold(rid, 0, "W1", sku, 2);
        harness_send(h, HF_T_COUNTER_COMMANDS, key, &hold);
    }
    harness_flush(h);
    *results += (size_t)count;
    assert_int_equal(harness_wait_count(h, HF_T_COUNTER_RESULTS, *results, WAIT_MS), *results);
}

/* Every stored key of partition p in db (the offsets record excluded) equals,
 * in order, the same in other; returns how many, and counts keys tagged tag. */
static size_t same_state(state_t *db, state_t *other, int32_t p, char tag, size_t *tagged)
{
    state_iter_t *a = state_iter_new(db, NULL, p, "", 0, false);
    state_iter_t *b = state_iter_new(other, NULL, p, "", 0, false);
    const void *ka, *va, *kb, *vb;
    size_t kal, val, kbl, vbl, n = 0;
    *tagged = 0;
    for (;;) {
        bool more_a, more_b;
        do
            more_a = state_iter_next(a, &ka, &kal, &va, &val);
        while (more_a && kal > 0 && ((const char *)ka)[0] == 0);
        do
            more_b = state_iter_next(b, &kb, &kbl, &vb, &vbl);
        while (more_b && kbl > 0 && ((const char *)kb)[0] == 0);
        if (!more_a || !more_b) {
            if (more_a != more_b)
                fail_msg("partition %d: after %zu equal keys, one state has '%.*s' the other "
                         "does not",
                         p, n, (int)(more_a ? kal : kbl), (const char *)(more_a ? ka : kb));
            break;
        }
        if (kal != kbl || memcmp(ka, kb, kal) != 0 || val != vbl || memcmp(va, vb, val) != 0)
            fail_msg("partition %d: key %zu differs: '%.*s' (%zu bytes) vs '%.*s' (%zu bytes)", p,
                     n, (int)kal, (const char *)ka, val, (int)kbl, (const char *)kb, vbl);
        n++;
        *tagged += kal > 0 && ((const char *)ka)[0] == tag;
    }
    state_iter_destroy(a);
    state_iter_destroy(b);
    return n;
}

static void
test_a_takeover_with_a_standby_restores_the_tail_into_the_state_of_a_full_restore(void **state)
{
    harness_t h;
    harness_init(&h, "standby");
    int32_t parts = harness_partitions(&h, HF_T_COUNTER_COMMANDS);
    assert_true(parts >= 2);
    long replicas = harness_env_int("ITEST_STANDBY_REPLICAS", 1);
    int port = free_port();
    char cfg_a[128], cfg_b[128];
    snprintf(cfg_a, sizeof cfg_a, "{\"standby_replicas\": %ld}", replicas);
    snprintf(cfg_b, sizeof cfg_b, "{\"standby_replicas\": %ld, \"metrics_port\": %d}", replicas,
             port);
    size_t results = 0;

    pid_t a = harness_start_with(&h, "a", "counter", cfg_a);
    load(&h, 0, PAIRS, -1, parts, &results); /* a alone: every partition */
    pid_t b = harness_start_with(&h, "b", "counter", cfg_b);
    int64_t deadline = harness_now_ms() + WAIT_MS;
    int32_t pb = -1;
    while ((pb = owned_partition(&h, "b", parts)) < 0 && harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_true(pb >= 0);
    int32_t pa = pb == 0 ? 1 : 0;                /* a keeps it (two members, range assignor) */
    load(&h, PAIRS, PAIRS, -1, parts, &results); /* both own one */

    if (replicas > 0) { /* b's standby has a's partition up to its end */
        long lag = -1;
        deadline = harness_now_ms() + WAIT_MS;
        while ((lag = standby_lag(port, pa)) != 0 && harness_now_ms() < deadline)
            harness_sleep_ms(200);
        print_message("b's standby lag on partition %d: %ld\n", pa, lag);
        assert_int_equal(lag, 0);
    }
    load(&h, 2 * PAIRS, TAIL_PAIRS, pa, parts, &results); /* the tail */
    long mark = log_lines(&h, "b");
    harness_kill9(a);
    long tail = -1;
    deadline = harness_now_ms() + WAIT_MS;
    while ((tail = restored_records(&h, "b", pa, mark)) < 0 && harness_now_ms() < deadline)
        harness_sleep_ms(100);
    assert_true(tail >= 0);
    /* b answers for a's partition now. */
    load(&h, 3 * PAIRS, 5, pa, parts, &results);
    assert_int_equal(harness_stop(b), 0);

    /* c restores every partition from the whole changelog. */
    pid_t c = harness_start_with(&h, "c", "counter", "{\"standby_replicas\": 0}");
    long full = -1;
    deadline = harness_now_ms() + WAIT_MS;
    while ((full = restored_records(&h, "c", pa, 0)) < 0 && harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_true(full >= 0);
    harness_sleep_ms(500);
    assert_int_equal(harness_stop(c), 0);
    print_message("takeover of partition %d restored %ld changelog records; a full restore %ld\n",
                  pa, tail, full);
    /* The tail: what the last load wrote after b's standby had caught up at
     * most (two records per pair: counter and hold), far below the whole. */
    assert_true(full > 4 * PAIRS / parts);
    if (tail > 2 * TAIL_PAIRS + 10)
        fail_msg("the takeover restored %ld records: not the tail (<= %d) but the whole changelog "
                 "(%ld)",
                 tail, 2 * TAIL_PAIRS + 10, full);

    char path_b[600], path_c[600], errstr[256];
    snprintf(path_b, sizeof path_b, "%s/state-b/counter-b", h.workdir);
    snprintf(path_c, sizeof path_c, "%s/state-c/counter-c", h.workdir);
    state_t *sb = NULL, *sc = NULL;
    assert_int_equal(state_open(path_b, NULL, &sb, errstr, sizeof errstr), HF_OK);
    assert_int_equal(state_open(path_c, NULL, &sc, errstr, sizeof errstr), HF_OK);
    size_t open_index = 0;
    size_t keys = same_state(sb, sc, pa, 'O', &open_index);
    print_message("partition %d: %zu keys equal, %zu of them the open-hold index\n", pa, keys,
                  open_index);
    assert_true(keys > (size_t)(2 * PAIRS / parts));
    assert_true(open_index > (size_t)(PAIRS / parts)); /* derived: reindex built it */
    state_close(sb);
    state_close(sc);
    harness_cleanup(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_a_takeover_with_a_standby_restores_the_tail_into_the_state_of_a_full_restore),
    };
    return cmocka_run_group_tests_name("standby tasks on a real broker", tests, NULL, NULL);
}
