/* The counter's pure rules and key layout: available and its reported form,
 * shortfall arithmetic, id validation, and key encodings that must sort (the
 * open-hold index is scanned newest first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "counter/counter.h"

static void test_available_subtracts_reserved_and_safety_stock(void **state)
{
    hf_counter_state_t c = {.on_hand = 10, .reserved = 3, .safety_stock = 2};
    assert_int_equal(counter_available(&c), 5);
    assert_int_equal(counter_available_reported(&c), 5);
}

static void test_reported_available_is_never_negative(void **state)
{
    /* Safety stock raised above what is left: no new holds, reported 0. */
    hf_counter_state_t c = {.on_hand = 4, .reserved = 3, .safety_stock = 5};
    assert_true(counter_available(&c) < 0);
    assert_int_equal(counter_available_reported(&c), 0);
}

static void test_shortfall_counts_only_unrevoked_promises(void **state)
{
    hf_counter_state_t c = {.on_hand = 5, .reserved = 9};
    assert_int_equal(counter_shortfall(&c), 4);
    c.revoking = 3;
    assert_int_equal(counter_shortfall(&c), 1);
    c.revoking = 4;
    assert_int_equal(counter_shortfall(&c), 0);
    c.revoking = 9;
    assert_int_equal(counter_shortfall(&c), 0);
}

static void test_ids_with_separator_or_empty_are_rejected(void **state)
{
    assert_null(counter_check_ids("W1", "SKU-1"));
    assert_non_null(counter_check_ids("", "SKU-1"));
    assert_non_null(counter_check_ids("W1", ""));
    assert_non_null(counter_check_ids("W|1", "SKU-1"));
    assert_non_null(counter_check_ids("W1", "SKU|1"));
    assert_non_null(counter_check_ids("W1", "SKU\n1"));
}

static void test_keys_of_one_pair_share_their_tagged_prefix(void **state)
{
    char a[COUNTER_KEY_MAX], b[COUNTER_KEY_MAX];
    size_t la = counter_key(a, "W1", "S1");
    assert_int_equal(la, strlen("CW1|S1|"));
    assert_memory_equal(a, "CW1|S1|", la);
    size_t lb = hold_key(b, "W1", "S1", 2, "res-9");
    assert_int_equal(lb, strlen("HW1|S1|00000002|res-9"));
    assert_memory_equal(b, "HW1|S1|00000002|res-9", lb);
    size_t lp = pair_key(a, "W1", "S1");
    assert_memory_equal(a, "W1|S1", lp);
}

static void test_hold_key_is_prefix_plus_reference(void **state)
{
    char ref[COUNTER_KEY_MAX], k1[COUNTER_KEY_MAX], k2[COUNTER_KEY_MAX];
    size_t rl = hold_ref(ref, 7, "abc");
    assert_memory_equal(ref, "00000007|abc", rl);
    size_t l1 = hold_key_of_ref(k1, "W", "S", ref, rl);
    size_t l2 = hold_key(k2, "W", "S", 7, "abc");
    assert_int_equal(l1, l2);
    assert_memory_equal(k1, k2, l1);
}

static void test_open_hold_keys_sort_by_sequence(void **state)
{
    /* memcmp order must equal numeric order, including across byte boundaries. */
    const int64_t seqs[] = {0, 1, 255, 256, 65535, 65536, 1LL << 40, INT64_MAX};
    char prev[COUNTER_KEY_MAX], cur[COUNTER_KEY_MAX];
    char prefix[COUNTER_KEY_MAX];
    size_t plen = open_hold_prefix(prefix, "W", "S");
    size_t prev_len = open_hold_key(prev, "W", "S", seqs[0]);
    assert_int_equal(prev_len, plen + 8);
    assert_memory_equal(prev, prefix, plen);
    for (size_t i = 1; i < sizeof seqs / sizeof seqs[0]; i++) {
        size_t len = open_hold_key(cur, "W", "S", seqs[i]);
        assert_int_equal(len, prev_len);
        assert_true(memcmp(prev, cur, len) < 0);
        memcpy(prev, cur, len);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_available_subtracts_reserved_and_safety_stock),
        cmocka_unit_test(test_reported_available_is_never_negative),
        cmocka_unit_test(test_shortfall_counts_only_unrevoked_promises),
        cmocka_unit_test(test_ids_with_separator_or_empty_are_rejected),
        cmocka_unit_test(test_keys_of_one_pair_share_their_tagged_prefix),
        cmocka_unit_test(test_hold_key_is_prefix_plus_reference),
        cmocka_unit_test(test_open_hold_keys_sort_by_sequence),
    };
    return cmocka_run_group_tests_name("counter rules and keys", tests, NULL, NULL);
}
