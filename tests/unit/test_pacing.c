/* The wait between transactions (processor/pacing.c): a floor after each commit,
 * a period between transaction starts that grows linearly from half the full
 * rate to the full rate, whichever ends later; a rate measured over windows and
 * smoothed, and an idle stage falling back at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pacing.h"

/* Feeds rate_records_s for duration_ms from *now_ms, in batches every 10 ms. */
static void feed(pacing_t *p, int64_t *now_ms, int rate_records_s, int duration_ms)
{
    for (int elapsed = 0; elapsed < duration_ms; elapsed += 10) {
        *now_ms += 10;
        pacing_observe(p, *now_ms, rate_records_s / 100);
    }
}

static const pacing_conf_t conf = {.floor_ms = 2, .period_max_ms = 40, .full_records_s = 6000};

static void test_no_period_until_half_the_full_rate(void **state)
{
    (void)state;
    pacing_t p;
    pacing_init(&p, &conf);
    assert_int_equal(pacing_period_ms(&p), 0);
    int64_t now = 1000;
    pacing_observe(&p, now, 0);
    feed(&p, &now, 2000, 5000);
    assert_int_equal(pacing_period_ms(&p), 0);
    feed(&p, &now, 3000, 5000); /* exactly half: still none */
    assert_int_equal(pacing_period_ms(&p), 0);
    assert_true(pacing_rate_records_s(&p) > 2900 && pacing_rate_records_s(&p) < 3100);
}

static void test_period_grows_linearly_then_stays_at_max(void **state)
{
    (void)state;
    pacing_t p;
    pacing_init(&p, &conf);
    int64_t now = 1000;
    pacing_observe(&p, now, 0);
    feed(&p, &now, 4500, 5000); /* halfway from 3,000 to 6,000: half the period */
    assert_int_equal(pacing_period_ms(&p), 20);
    feed(&p, &now, 6000, 5000);
    assert_int_equal(pacing_period_ms(&p), 40);
    feed(&p, &now, 60000, 5000); /* far above the full rate: capped */
    assert_int_equal(pacing_period_ms(&p), 40);
}

static void test_ready_at_is_the_later_of_floor_and_period(void **state)
{
    (void)state;
    pacing_t p;
    pacing_init(&p, &conf);
    /* Low load: only the floor after the commit's end counts. */
    assert_int_equal(pacing_ready_at_ms(&p, 1000, 1030), 1032);
    int64_t now = 1000;
    pacing_observe(&p, now, 0);
    feed(&p, &now, 6000, 5000);
    assert_int_equal(pacing_period_ms(&p), 40);
    /* A transaction that began at 1000 and ended at 1010: wait for the period. */
    assert_int_equal(pacing_ready_at_ms(&p, 1000, 1010), 1040);
    /* One whose apply and commit took longer than the period: the floor only. */
    assert_int_equal(pacing_ready_at_ms(&p, 1000, 1045), 1047);
}

static void test_rate_is_smoothed_over_windows(void **state)
{
    (void)state;
    pacing_t p;
    pacing_init(&p, &conf);
    int64_t now = 1000;
    pacing_observe(&p, now, 0);
    feed(&p, &now, 1000, 5000);
    /* One window of a burst moves the rate half way, not all the way. */
    feed(&p, &now, 11000, PACING_WINDOW_MS);
    double r = pacing_rate_records_s(&p);
    assert_true(r > 5500 && r < 6500);
    /* Nothing changes inside a window. */
    int period = pacing_period_ms(&p);
    pacing_observe(&p, now + 1, 100000);
    assert_int_equal(pacing_period_ms(&p), period);
}

static void test_idle_stage_drops_the_period(void **state)
{
    (void)state;
    pacing_t p;
    pacing_init(&p, &conf);
    int64_t now = 1000;
    pacing_observe(&p, now, 0);
    feed(&p, &now, 20000, 5000);
    assert_int_equal(pacing_period_ms(&p), 40);
    /* The next observation comes after a long idle poll with one record. */
    now += 5 * PACING_WINDOW_MS;
    pacing_observe(&p, now, 1);
    assert_int_equal(pacing_period_ms(&p), 0);
}

static void test_off_and_clock_step_back(void **state)
{
    (void)state;
    pacing_t p;
    const pacing_conf_t off = {.floor_ms = 100, .period_max_ms = 0, .full_records_s = 0};
    pacing_init(&p, &off);
    int64_t now = 1000;
    pacing_observe(&p, now, 0);
    feed(&p, &now, 50000, 5000);
    assert_int_equal(pacing_period_ms(&p), 0); /* no load term: the floor only */
    assert_int_equal(pacing_ready_at_ms(&p, 1000, 1010), 1110);

    pacing_init(&p, &conf);
    now = 100000;
    pacing_observe(&p, now, 0);
    feed(&p, &now, 20000, 2000);
    int period = pacing_period_ms(&p);
    pacing_observe(&p, now - 60000, 10); /* the wall clock stepped back: new window */
    assert_int_equal(pacing_period_ms(&p), period);
    now -= 60000;
    feed(&p, &now, 20000, 2000);
    assert_int_equal(pacing_period_ms(&p), 40);
}

static void test_the_gap_follows_the_last_transactions_duration(void **state)
{
    (void)state;
    pacing_t p;
    const pacing_conf_t gap = {.floor_ms = 3, .gap_pct = 100};
    pacing_init(&p, &gap);
    /* A 9 ms transaction (begin 1000, commit ended 1009): the next waits 9 ms. */
    assert_int_equal(pacing_ready_at_ms(&p, 1000, 1009), 1018);
    /* A 2 ms one: the floor is the larger. */
    assert_int_equal(pacing_ready_at_ms(&p, 1000, 1002), 1005);
    /* A stalled one asks for no more than the bound. */
    assert_int_equal(pacing_ready_at_ms(&p, 1000, 3000), 3000 + PACING_GAP_MAX_MS);
    assert_int_equal(pacing_wait_max_ms(&p), PACING_GAP_MAX_MS);
    /* Before the first transaction there is nothing to follow. */
    assert_int_equal(pacing_ready_at_ms(&p, 0, 0), 3);
    const pacing_conf_t half = {.floor_ms = 0, .gap_pct = 50};
    pacing_init(&p, &half);
    assert_int_equal(pacing_ready_at_ms(&p, 1000, 1010), 1015);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_period_until_half_the_full_rate),
        cmocka_unit_test(test_period_grows_linearly_then_stays_at_max),
        cmocka_unit_test(test_ready_at_is_the_later_of_floor_and_period),
        cmocka_unit_test(test_rate_is_smoothed_over_windows),
        cmocka_unit_test(test_idle_stage_drops_the_period),
        cmocka_unit_test(test_off_and_clock_step_back),
        cmocka_unit_test(test_the_gap_follows_the_last_transactions_duration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
