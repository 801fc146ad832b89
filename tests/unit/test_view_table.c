/* Unit tests of processor/view_table.c, the routing view's packed table: every
 * SKU reads back as its last Availability (warehouses in order, available
 * clamped to int32, escrow 0) through growth of every array, vectors that grow
 * and shrink, the warehouse-id limit, and the bytes it reports per SKU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view_table.h"

static void make_availability(hf_availability_t *a, int sku, int count, unsigned *seed)
{
    memset(a, 0, sizeof *a);
    snprintf(a->sku, sizeof a->sku, "SKU-%07d", sku);
    a->warehouses_count = count;
    int64_t total = 0;
    int first = (int)(rand_r(seed) % 60);
    for (int i = 0; i < count; i++) {
        snprintf(a->warehouses[i].warehouse_id, sizeof a->warehouses[i].warehouse_id, "WH-%02d",
                 (first + i * 7) % 60);
        a->warehouses[i].available = (int64_t)(rand_r(seed) % 5000);
        a->warehouses[i].escrow = 3; /* not kept */
        total += a->warehouses[i].available;
    }
    a->total = total;
    a->in_stock = total > 0;
    a->updated_at_ms = 1700000000000LL + sku;
}

static void assert_same(const hf_availability_t *want, const hf_availability_t *got)
{
    assert_string_equal(want->sku, got->sku);
    assert_int_equal(want->warehouses_count, got->warehouses_count);
    for (int i = 0; i < want->warehouses_count; i++) {
        assert_string_equal(want->warehouses[i].warehouse_id, got->warehouses[i].warehouse_id);
        int64_t v = want->warehouses[i].available;
        int64_t clamped = v > INT32_MAX ? INT32_MAX : v < 0 ? 0 : v;
        assert_int_equal(clamped, got->warehouses[i].available);
        assert_int_equal(0, got->warehouses[i].escrow);
    }
    assert_int_equal(want->total, got->total);
    assert_int_equal(want->in_stock, got->in_stock);
    assert_int_equal(want->updated_at_ms, got->updated_at_ms);
}

/* 30,000 SKUs, each applied three times with a warehouse count that grows,
 * shrinks and grows again: every read gives the last one. */
static void test_last_availability_wins(void **state)
{
    (void)state;
    enum { SKUS = 30000 };
    view_table_t *t = view_table_new();
    assert_non_null(t);
    hf_availability_t *last = calloc(SKUS, sizeof *last);
    assert_non_null(last);
    unsigned seed = 7;
    const int counts[3][2] = {{3, 10}, {1, 4}, {20, 50}};
    for (int round = 0; round < 3; round++)
        for (int s = 0; s < SKUS; s++) {
            int lo = counts[round][0], hi = counts[round][1];
            make_availability(&last[s], s, lo + (int)(rand_r(&seed) % (unsigned)(hi - lo + 1)),
                              &seed);
            assert_int_equal(HF_OK, view_table_apply(t, &last[s]));
        }
    assert_int_equal(SKUS, view_table_size(t));
    hf_availability_t got;
    for (int s = 0; s < SKUS; s++) {
        assert_int_equal(HF_OK, view_table_get(t, last[s].sku, &got));
        assert_same(&last[s], &got);
    }
    assert_int_equal(HF_ERR_NOTFOUND, view_table_get(t, "SKU-nope", &got));
    assert_int_equal(HF_ERR_NOTFOUND, view_table_get(t, "", &got));
    free(last);
    view_table_destroy(t);
}

/* Available beyond int32 and below 0 is clamped; a SKU with no warehouses. */
static void test_clamps_and_empty(void **state)
{
    (void)state;
    view_table_t *t = view_table_new();
    hf_availability_t a = {0}, got;
    snprintf(a.sku, sizeof a.sku, "big");
    a.warehouses_count = 2;
    snprintf(a.warehouses[0].warehouse_id, sizeof a.warehouses[0].warehouse_id, "W1");
    a.warehouses[0].available = 5000000000LL;
    snprintf(a.warehouses[1].warehouse_id, sizeof a.warehouses[1].warehouse_id, "W2");
    a.warehouses[1].available = -4;
    a.total = 5000000000LL;
    assert_int_equal(HF_OK, view_table_apply(t, &a));
    assert_int_equal(HF_OK, view_table_get(t, "big", &got));
    assert_same(&a, &got);
    assert_int_equal(INT32_MAX, got.warehouses[0].available);
    assert_int_equal(0, got.warehouses[1].available);
    a.warehouses_count = 0;
    a.total = 0;
    assert_int_equal(HF_OK, view_table_apply(t, &a));
    assert_int_equal(HF_OK, view_table_get(t, "big", &got));
    assert_int_equal(0, got.warehouses_count);
    view_table_destroy(t);
}

/* 256 distinct warehouse ids fit (one byte each); the 257th is refused and
 * leaves the SKU's previous value readable. */
static void test_warehouse_limit(void **state)
{
    (void)state;
    view_table_t *t = view_table_new();
    hf_availability_t a = {0}, got;
    for (int k = 0; k < 4; k++) {
        snprintf(a.sku, sizeof a.sku, "S%d", k);
        a.warehouses_count = 64;
        for (int i = 0; i < 64; i++)
            snprintf(a.warehouses[i].warehouse_id, sizeof a.warehouses[i].warehouse_id, "W%d",
                     k * 64 + i);
        assert_int_equal(HF_OK, view_table_apply(t, &a));
    }
    hf_availability_t before;
    assert_int_equal(HF_OK, view_table_get(t, "S0", &before));
    snprintf(a.sku, sizeof a.sku, "S0");
    a.warehouses_count = 1;
    snprintf(a.warehouses[0].warehouse_id, sizeof a.warehouses[0].warehouse_id, "W-one-too-many");
    assert_int_equal(HF_ERR_LIMIT, view_table_apply(t, &a));
    assert_int_equal(HF_OK, view_table_get(t, "S0", &got));
    assert_same(&before, &got);
    view_table_destroy(t);
}

/* The packing the header promises: at 5 warehouses a SKU well under 150
 * bytes, at 50 under 400 (slots at most half full, arrays doubled). */
static void test_bytes_per_sku(void **state)
{
    (void)state;
    const int shapes[2][2] = {{5, 150}, {50, 400}};
    for (int k = 0; k < 2; k++) {
        view_table_t *t = view_table_new();
        hf_availability_t a;
        unsigned seed = 3;
        enum { SKUS = 100000 };
        for (int s = 0; s < SKUS; s++) {
            make_availability(&a, s, shapes[k][0], &seed);
            assert_int_equal(HF_OK, view_table_apply(t, &a));
        }
        size_t per_sku = view_table_bytes(t) / SKUS;
        print_message("view_table: %d warehouses a SKU: %zu bytes a SKU\n", shapes[k][0], per_sku);
        assert_true(per_sku < (size_t)shapes[k][1]);
        view_table_destroy(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_availability_wins),
        cmocka_unit_test(test_clamps_and_empty),
        cmocka_unit_test(test_warehouse_limit),
        cmocka_unit_test(test_bytes_per_sku),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
