/* The per-SKU contention window that switches a SKU to escrow on its own
 * (processor/gateway/escrow_heat.c): on at enter_per_s events in a second, on
 * while at least half of that, off after cool_ms below it; per partition; a
 * full table gives a cold slot away, never a hot one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "gateway/escrow_heat.h"
#include "hf_limits.h"

static const gw_heat_conf_t conf = {.enter_per_s = 100, .cool_ms = 3000};

/* n events of sku at partition, spread evenly over [*now_ms, *now_ms + ms). */
static bool feed(gw_heat_t *h, int32_t partition, const char *sku, int64_t *now_ms, int n, int ms)
{
    bool hot = false;
    for (int i = 0; i < n; i++)
        hot = gw_heat_note(h, partition, sku, *now_ms + (int64_t)i * ms / n, 1);
    *now_ms += ms;
    return hot;
}

static void test_on_at_the_rate_within_a_second(void **state)
{
    (void)state;
    gw_heat_t *h = gw_heat_new(&conf);
    int64_t now = 1000000;
    assert_false(feed(h, 0, "A", &now, 99, 1000)); /* 99/s: not yet */
    assert_false(gw_heat_hot(h, 0, "A", now));
    assert_true(feed(h, 0, "A", &now, 100, 500)); /* 100 within half a second */
    assert_true(gw_heat_hot(h, 0, "A", now));
    assert_int_equal(gw_heat_hot_count(h, now), 1);
    assert_false(gw_heat_hot(h, 0, "B", now)); /* never seen */
    gw_heat_destroy(h);
}

static void test_stays_while_half_warm_then_cools_off(void **state)
{
    (void)state;
    gw_heat_t *h = gw_heat_new(&conf);
    int64_t now = 2000000;
    assert_true(feed(h, 1, "A", &now, 150, 1000));
    for (int s = 0; s < 10; s++) /* 50/s, half of enter: stays on */
        assert_true(feed(h, 1, "A", &now, 50, 1000));
    /* 20/s: still on until cool_ms after it was last warm, then off. */
    assert_true(feed(h, 1, "A", &now, 20, 1000)); /* the last full second was warm */
    assert_true(feed(h, 1, "A", &now, 20, 1000));
    bool hot = true;
    for (int s = 0; s < 3 && hot; s++)
        hot = feed(h, 1, "A", &now, 20, 1000);
    assert_false(hot);
    assert_false(gw_heat_hot(h, 1, "A", now));
    /* Nothing at all: stays off; heating again turns it on. */
    now += 60000;
    assert_false(gw_heat_hot(h, 1, "A", now));
    assert_true(feed(h, 1, "A", &now, 100, 900));
    gw_heat_destroy(h);
}

static void test_partitions_are_apart(void **state)
{
    (void)state;
    gw_heat_t *h = gw_heat_new(&conf);
    int64_t now = 3000000;
    int64_t t = now;
    assert_true(feed(h, 0, "A", &t, 120, 1000));
    t = now;
    assert_false(feed(h, 1, "A", &t, 60, 1000));
    assert_true(gw_heat_hot(h, 0, "A", t));
    assert_false(gw_heat_hot(h, 1, "A", t));
    gw_heat_destroy(h);
}

/* More SKUs than slots: the hot one keeps its slot, cold ones give theirs. */
static void test_full_table_keeps_the_hot(void **state)
{
    (void)state;
    gw_heat_t *h = gw_heat_new(&conf);
    int64_t now = 4000000;
    assert_true(feed(h, 0, "HOT", &now, 200, 1000));
    char sku[32];
    for (int i = 0; i < 4 * HF_ESCROW_HEAT_SLOTS_MAX; i++) {
        snprintf(sku, sizeof sku, "cold-%d", i);
        (void)gw_heat_note(h, 0, sku, now, 1);
    }
    assert_true(gw_heat_hot(h, 0, "HOT", now));
    assert_int_equal(gw_heat_hot_count(h, now), 1);
    gw_heat_destroy(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_on_at_the_rate_within_a_second),
        cmocka_unit_test(test_stays_while_half_warm_then_cools_off),
        cmocka_unit_test(test_partitions_are_apart),
        cmocka_unit_test(test_full_table_keeps_the_hot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
