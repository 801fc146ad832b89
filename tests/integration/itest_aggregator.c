/* The aggregator on a real broker, fed by the real counter: one SOLD_OUT after
 * the dwell when holds drain three warehouses, one BACK_IN_STOCK when stock
 * returns, no signal storm from flapping stock, a dwell that fires with no
 * further input, signals neither lost nor duplicated across a kill -9, and a
 * routing view that agrees with the counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "view.h"

#define WAIT_MS  60000
#define DWELL_MS 2000

typedef struct {
    const char *sku;
    size_t sold_out, back_in_stock, total;
    hf_signal_t last;
    hf_signal_t all[64];
} signals_t;

static void collect_signal(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    signals_t *s = opaque;
    assert_int_equal(rec->type, HF_REC_SIGNAL);
    if (strcmp(rec->u.signal.sku, s->sku) != 0)
        return;
    if (s->total < 64)
        s->all[s->total] = rec->u.signal;
    s->total++;
    s->sold_out += rec->u.signal.kind == HF_SIGNAL_SOLD_OUT;
    s->back_in_stock += rec->u.signal.kind == HF_SIGNAL_BACK_IN_STOCK;
    s->last = rec->u.signal;
}

static signals_t read_signals(harness_t *h, const char *sku)
{
    signals_t s;
    memset(&s, 0, sizeof s);
    s.sku = sku;
    harness_read(h, HF_T_SIGNALS, collect_signal, &s);
    return s;
}

/* Waits until sku has at least n signals; returns what is there. */
static signals_t wait_signals(harness_t *h, const char *sku, size_t n, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;
    signals_t s;
    do {
        s = read_signals(h, sku);
        if (s.total >= n)
            break;
        harness_sleep_ms(200);
    } while (harness_now_ms() < deadline);
    return s;
}

static void feed(harness_t *h, const char *wh, const char *sku, hf_feed_kind_t kind, int64_t qty,
                 int64_t seq)
{
    char key[128];
    hf_record_t r = harness_feed(wh, sku, kind, qty, seq);
    /* Commands topic: ordered with the holds of the same pair. */
    harness_send(h, HF_T_COUNTER_COMMANDS, harness_pair(key, wh, sku), &r);
}

static void hold(harness_t *h, const char *rid, const char *wh, const char *sku, int64_t qty)
{
    char key[128];
    hf_record_t r = harness_hold(rid, 0, wh, sku, qty);
    harness_send(h, HF_T_COUNTER_COMMANDS, harness_pair(key, wh, sku), &r);
}

static void release(harness_t *h, const char *rid, const char *wh, const char *sku)
{
    char key[128];
    hf_record_t r = harness_release_hold(rid, 0, wh, sku);
    harness_send(h, HF_T_COUNTER_COMMANDS, harness_pair(key, wh, sku), &r);
}

static void test_drained_network_signals_sold_out_once_then_back_in_stock_once(void **state)
{
    harness_t h;
    harness_init(&h, "signals");
    pid_t pid = harness_start(&h, "a", "counter,aggregator");
    const char *whs[] = {"W1", "W2", "W3"};
    for (int w = 0; w < 3; w++)
        feed(&h, whs[w], "SKU-S", HF_FEED_RECEIVE, 2, 1);
    harness_flush(&h);
    harness_sleep_ms(500);
    for (int w = 0; w < 3; w++)
        for (int i = 0; i < 2; i++) {
            char rid[32];
            snprintf(rid, sizeof rid, "s-%d-%d", w, i);
            hold(&h, rid, whs[w], "SKU-S", 1);
        }
    harness_flush(&h);
    int64_t drained_ms = harness_now_ms();

    signals_t s = wait_signals(&h, "SKU-S", 1, WAIT_MS);
    assert_int_equal(s.sold_out, 1);
    assert_int_equal(s.back_in_stock, 0);
    /* Not before the dwell, and within a second of its end (no further input). */
    int64_t lag_ms = s.last.emitted_at_ms - (s.last.changed_at_ms + DWELL_MS);
    print_message("SOLD_OUT %lld ms after the dwell ended (drained at +%lld ms)\n",
                  (long long)lag_ms, (long long)(s.last.changed_at_ms - drained_ms));
    assert_true(lag_ms >= 0 && lag_ms < 1000);
    assert_int_equal(s.last.total, 0);

    harness_sleep_ms(DWELL_MS + 500); /* nothing more may come */
    assert_int_equal(read_signals(&h, "SKU-S").total, 1);

    feed(&h, "W2", "SKU-S", HF_FEED_RECEIVE, 5, 2);
    harness_flush(&h);
    s = wait_signals(&h, "SKU-S", 2, WAIT_MS);
    assert_int_equal(s.sold_out, 1);
    assert_int_equal(s.back_in_stock, 1);
    assert_int_equal(s.last.kind, HF_SIGNAL_BACK_IN_STOCK);
    assert_int_equal(s.last.total, 5);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

static void test_flapping_stock_produces_no_signal_storm(void **state)
{
    harness_t h;
    harness_init(&h, "flap");
    pid_t pid = harness_start(&h, "a", "counter,aggregator");
    feed(&h, "W1", "SKU-F", HF_FEED_RECEIVE, 1, 1);
    harness_flush(&h);
    harness_sleep_ms(500);
    /* available 0 <-> 1 every 50 ms for 5 s, ending at 0 */
    int64_t start = harness_now_ms();
    int cycles = 0;
    while (harness_now_ms() - start < 5000) {
        char rid[32];
        snprintf(rid, sizeof rid, "f-%d", cycles++);
        hold(&h, rid, "W1", "SKU-F", 1);
        harness_flush(&h);
        harness_sleep_ms(50);
        release(&h, rid, "W1", "SKU-F");
        harness_flush(&h);
        harness_sleep_ms(50);
    }
    hold(&h, "f-final", "W1", "SKU-F", 1);
    harness_flush(&h);
    int64_t end = harness_now_ms();

    (void)wait_signals(&h, "SKU-F", 1, WAIT_MS);
    harness_sleep_ms(DWELL_MS);
    signals_t s = read_signals(&h, "SKU-F");
    print_message("%d flaps in %lld ms -> %zu signals\n", cycles, (long long)(end - start),
                  s.total);
    /* At most one transition per dwell window, and the last one is the truth. */
    assert_true(s.total >= 1);
    assert_true(s.total <= (size_t)((end - start) / DWELL_MS + 1));
    assert_int_equal(s.last.kind, HF_SIGNAL_SOLD_OUT);
    for (size_t i = 1; i < s.total && i < 64; i++)
        assert_true(s.all[i].emitted_at_ms - s.all[i - 1].emitted_at_ms >= DWELL_MS - 100 ||
                    s.all[i].kind == HF_SIGNAL_BACK_IN_STOCK);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

static void test_killed_aggregator_neither_loses_nor_duplicates_signals(void **state)
{
    harness_t h;
    harness_init(&h, "aggkill");
    pid_t counter = harness_start(&h, "c", "counter");
    pid_t agg = harness_start(&h, "g", "aggregator");
    const char *skus[] = {"K-1", "K-2", "K-3", "K-4"};
    for (int i = 0; i < 4; i++)
        feed(&h, "W1", skus[i], HF_FEED_RECEIVE, 3, 1);
    harness_flush(&h);
    harness_sleep_ms(500);
    /* Drain each SKU, killing the aggregator while dwell timers are armed. */
    for (int i = 0; i < 4; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "k-%d", i);
        hold(&h, rid, "W1", skus[i], 3);
        harness_flush(&h);
        harness_sleep_ms(300 + 400 * i);
        harness_kill9(agg);
        agg = harness_start(&h, "g", "aggregator");
    }
    for (int i = 0; i < 4; i++) {
        signals_t s = wait_signals(&h, skus[i], 1, WAIT_MS);
        assert_int_equal(s.sold_out, 1);
    }
    harness_sleep_ms(DWELL_MS + 1000);
    for (int i = 0; i < 4; i++) {
        signals_t s = read_signals(&h, skus[i]);
        assert_int_equal(s.total, 1);
        assert_int_equal(s.sold_out, 1);
    }
    assert_int_equal(harness_stop(agg), 0);
    assert_int_equal(harness_stop(counter), 0);
    harness_cleanup(&h);
}

static int64_t counter_available(harness_t *h, const char *wh, const char *sku)
{
    hf_counter_state_t c;
    if (!harness_counter(h, wh, sku, &c))
        return 0;
    int64_t a = c.on_hand - c.reserved - c.safety_stock;
    return a > 0 ? a : 0;
}

static void test_routing_view_agrees_with_counters(void **state)
{
    harness_t h;
    harness_init(&h, "view");
    pid_t pid = harness_start(&h, "a", "counter,aggregator");
    char errstr[256];
    view_t *v = NULL;
    assert_int_equal(view_new(&h.kconf, topic_name(HF_T_AVAILABILITY), &v, errstr, sizeof errstr),
                     HF_OK);
    const char *whs[] = {"W1", "W2", "W3"};
    char sku[8][16];
    unsigned seed = 42;
    for (int s = 0; s < 5; s++) {
        snprintf(sku[s], sizeof sku[s], "V-%d", s);
        for (int w = 0; w < 3; w++)
            feed(&h, whs[w], sku[s], HF_FEED_RECEIVE, 20, 1);
    }
    for (int i = 0; i < 600; i++) {
        char rid[32];
        int s = (int)(rand_r(&seed) % 5), w = (int)(rand_r(&seed) % 3);
        snprintf(rid, sizeof rid, "v-%d", i);
        hold(&h, rid, whs[w], sku[s], 1 + rand_r(&seed) % 3);
        if (rand_r(&seed) % 3 == 0)
            release(&h, rid, whs[w], sku[s]);
    }
    harness_flush(&h);
    assert_int_equal(view_wait_ready(v, WAIT_MS), HF_OK);

    int64_t deadline = harness_now_ms() + WAIT_MS;
    int mismatches = 0;
    do {
        harness_sleep_ms(500);
        mismatches = 0;
        for (int s = 0; s < 5; s++) {
            hf_availability_t a;
            if (view_get(v, sku[s], &a) != HF_OK) {
                mismatches++;
                continue;
            }
            int64_t total = 0;
            for (int w = 0; w < 3; w++) {
                int64_t want = counter_available(&h, whs[w], sku[s]);
                int64_t got = -1;
                for (int i = 0; i < a.warehouses_count; i++)
                    if (strcmp(a.warehouses[i].warehouse_id, whs[w]) == 0)
                        got = a.warehouses[i].available;
                mismatches += got != want;
                total += want;
            }
            mismatches += a.total != total;
        }
    } while (mismatches && harness_now_ms() < deadline);
    assert_int_equal(mismatches, 0);
    assert_true(view_staleness_ms(v) >= 0 && view_staleness_ms(v) < 2000);
    view_destroy(v);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drained_network_signals_sold_out_once_then_back_in_stock_once),
        cmocka_unit_test(test_flapping_stock_produces_no_signal_storm),
        cmocka_unit_test(test_killed_aggregator_neither_loses_nor_duplicates_signals),
        cmocka_unit_test(test_routing_view_agrees_with_counters),
    };
    return cmocka_run_group_tests_name("aggregator stage on a real broker", tests, NULL, NULL);
}
