/* `hfbench seed` against the real broker and the real `holdfast` (counter and
 * aggregator stages): every SKU is placed at --per-sku *distinct* warehouses, and
 * when seed returns the routing view already shows every pair's stock (it waited
 * for the pipeline, not for one record per SKU). Runs build/hfbench beside
 * HOLDFAST_BIN; a missing hfbench fails the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define SEED_SKUS      10
#define SEED_PER_SKU   50
#define SEED_STOCK     7
#define SEED_DOOR      5 /* DOORBUSTER units: one at each of 5 warehouses */
#define SEED_OUT_BYTES 65536

static harness_t h;

/* The last Availability of each seeded SKU: pairs holding exactly the seeded stock. */
typedef struct {
    int64_t want, door_want;       /* the available each pair must show */
    int with_stock[SEED_SKUS + 1]; /* the doorbuster last */
    int listed[SEED_SKUS + 1];
} view_t;

static void last_view(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    view_t *v = opaque;
    if (!rec || rec->type != HF_REC_AVAILABILITY)
        return;
    const hf_availability_t *a = &rec->u.availability;
    int row = -1;
    if (strcmp(a->sku, "DOORBUSTER") == 0)
        row = SEED_SKUS;
    else if (strncmp(a->sku, "SKU-", 4) == 0 && atoi(a->sku + 4) < SEED_SKUS)
        row = atoi(a->sku + 4);
    if (row < 0)
        return;
    v->with_stock[row] = v->listed[row] = 0; /* a later record replaces the earlier */
    for (int32_t i = 0; i < a->warehouses_count; i++) {
        v->listed[row]++;
        v->with_stock[row] +=
            a->warehouses[i].available == (row == SEED_SKUS ? v->door_want : v->want);
    }
}

/* Runs hfbench (beside HOLDFAST_BIN) with this test's prefix; its stdout in out. */
static int run_hfbench(const char *args, char *out, size_t out_size)
{
    int rc = harness_run_tool(&h, "hfbench", args, out, out_size);
    if (rc == -2)
        fail_msg("no hfbench beside %s: build it (make build/hfbench)", h.holdfast_bin);
    return rc;
}

static void test_seed_places_each_sku_at_distinct_warehouses_and_waits_for_the_view(void **state)
{
    harness_init(&h, "seed");
    pid_t pid = harness_start(&h, "s1", "counter,aggregator");
    static char out[SEED_OUT_BYTES];
    char args[256];
    snprintf(args, sizeof args,
             "seed --skus %d --per-sku %d --stock %d --doorbuster-stock %d --seed 3 "
             "--timeout-ms 90000",
             SEED_SKUS, SEED_PER_SKU, SEED_STOCK, SEED_DOOR);
    int rc = run_hfbench(args, out, sizeof out);
    print_message("%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "at 50 distinct warehouses each (500 pairs"));
    assert_non_null(strstr(out, "all 505 pairs show their stock"));

    /* Read at once: seed returned only after the view showed every pair. */
    view_t v = {.want = SEED_STOCK, .door_want = 1};
    harness_read(&h, HF_T_AVAILABILITY, last_view, &v);
    int pairs = 0;
    for (int s = 0; s < SEED_SKUS; s++) {
        assert_int_equal(v.with_stock[s], SEED_PER_SKU);
        assert_int_equal(v.listed[s], SEED_PER_SKU); /* no other warehouse, no duplicate */
        pairs += v.with_stock[s];
    }
    assert_int_equal(pairs, SEED_SKUS * SEED_PER_SKU);
    assert_int_equal(v.with_stock[SEED_SKUS], SEED_DOOR);

    /* A re-seed adds stock on top, and is waited for as well. */
    rc = run_hfbench(args, out, sizeof out);
    assert_int_equal(rc, 0);
    view_t again = {.want = 2 * SEED_STOCK, .door_want = 2};
    harness_read(&h, HF_T_AVAILABILITY, last_view, &again);
    for (int s = 0; s < SEED_SKUS; s++)
        assert_int_equal(again.with_stock[s], SEED_PER_SKU);
    assert_int_equal(again.with_stock[SEED_SKUS], SEED_DOOR);

    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

static void test_seed_refuses_more_warehouses_than_the_network_has(void **state)
{
    harness_init(&h, "seedbad");
    static char out[SEED_OUT_BYTES];
    /* config/warehouses.json has 50: 51 distinct ones cannot be chosen. */
    assert_int_equal(run_hfbench("seed --skus 2 --per-sku 51 2>/dev/null", out, sizeof out), 2);
    harness_cleanup(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_places_each_sku_at_distinct_warehouses_and_waits_for_the_view),
        cmocka_unit_test(test_seed_refuses_more_warehouses_than_the_network_has),
    };
    return cmocka_run_group_tests_name("hfbench seed on a real broker", tests, NULL, NULL);
}
