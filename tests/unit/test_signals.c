/* The sold-out hysteresis and the aggregator's timer keys: SOLD_OUT only after a
 * full dwell at or below the low watermark, BACK_IN_STOCK only at the high one,
 * flapping never signals, the timer says when to look again, and timer keys sort
 * by due time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "aggregator/aggregator.h"

static const signal_policy_t policy = {0, 1, 2000};

static hf_sku_state_t state_with(int64_t total, bool in_stock)
{
    hf_sku_state_t s;
    memset(&s, 0, sizeof s);
    snprintf(s.sku, sizeof s.sku, "SKU");
    s.total = total;
    s.in_stock = in_stock;
    return s;
}

static void test_sold_out_waits_for_the_whole_dwell(void **state)
{
    hf_sku_state_t s = state_with(0, true);
    int64_t due = 0;
    assert_int_equal(signals_evaluate(&s, &policy, 10000, &due), SIGNAL_NONE);
    assert_int_equal(s.low_since_ms, 10000);
    assert_int_equal(due, 12000);
    assert_int_equal(signals_evaluate(&s, &policy, 11999, &due), SIGNAL_NONE);
    assert_true(s.in_stock);
    assert_int_equal(signals_evaluate(&s, &policy, 12000, &due), HF_SIGNAL_SOLD_OUT);
    assert_false(s.in_stock);
    assert_int_equal(s.changed_at_ms, 10000); /* when it ran out, not when it was told */
    assert_int_equal(due, 0);
    /* Told once: staying empty says nothing more. */
    assert_int_equal(signals_evaluate(&s, &policy, 20000, &due), SIGNAL_NONE);
}

static void test_recovery_within_the_dwell_cancels_sold_out(void **state)
{
    hf_sku_state_t s = state_with(0, true);
    int64_t due = 0;
    assert_int_equal(signals_evaluate(&s, &policy, 1000, &due), SIGNAL_NONE);
    s.total = 1;
    assert_int_equal(signals_evaluate(&s, &policy, 1500, &due), SIGNAL_NONE);
    assert_int_equal(s.low_since_ms, 0);
    /* The old timer fires later: nothing, the total is above the watermark. */
    assert_int_equal(signals_evaluate(&s, &policy, 3000, &due), SIGNAL_NONE);
    assert_true(s.in_stock);
    /* Empty again: the dwell starts over. */
    s.total = 0;
    assert_int_equal(signals_evaluate(&s, &policy, 3100, &due), SIGNAL_NONE);
    assert_int_equal(due, 5100);
}

static void test_back_in_stock_needs_the_high_watermark(void **state)
{
    const signal_policy_t wide = {2, 10, 500};
    hf_sku_state_t s = state_with(0, false);
    int64_t due = 0;
    s.total = 5; /* above low, below high */
    assert_int_equal(signals_evaluate(&s, &wide, 100, &due), SIGNAL_NONE);
    assert_false(s.in_stock);
    s.total = 10;
    assert_int_equal(signals_evaluate(&s, &wide, 200, &due), HF_SIGNAL_BACK_IN_STOCK);
    assert_true(s.in_stock);
    assert_int_equal(s.changed_at_ms, 200);
    /* Between the watermarks in stock: no dwell is armed. */
    s.total = 5;
    assert_int_equal(signals_evaluate(&s, &wide, 300, &due), SIGNAL_NONE);
    assert_int_equal(due, 0);
}

static void test_flapping_faster_than_the_dwell_never_signals(void **state)
{
    hf_sku_state_t s = state_with(1, true);
    int64_t due = 0;
    for (int64_t t = 0; t < 10000; t += 50) {
        s.total = (t / 50) % 2 ? 1 : 0;
        assert_int_equal(signals_evaluate(&s, &policy, t, &due), SIGNAL_NONE);
    }
    assert_true(s.in_stock);
}

static void test_timer_keys_sort_by_due_time_and_parse_back(void **state)
{
    char a[AGG_KEY_MAX], b[AGG_KEY_MAX], sku[HF_SKU_LEN_MAX + 1];
    size_t la = timer_key(a, 255, "Z"), lb = timer_key(b, 256, "A");
    assert_true(memcmp(a, b, la < lb ? la : lb) < 0);
    int64_t due = 0;
    assert_true(timer_key_parse(b, lb, &due, sku));
    assert_int_equal(due, 256);
    assert_string_equal(sku, "A");
    assert_false(timer_key_parse("SKU", 3, &due, sku));
    size_t ls = sku_state_key(a, "SKU-1");
    assert_memory_equal(a, "SSKU-1", ls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sold_out_waits_for_the_whole_dwell),
        cmocka_unit_test(test_recovery_within_the_dwell_cancels_sold_out),
        cmocka_unit_test(test_back_in_stock_needs_the_high_watermark),
        cmocka_unit_test(test_flapping_faster_than_the_dwell_never_signals),
        cmocka_unit_test(test_timer_keys_sort_by_due_time_and_parse_back),
    };
    return cmocka_run_group_tests_name("sold-out hysteresis", tests, NULL, NULL);
}
