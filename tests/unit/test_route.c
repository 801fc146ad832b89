/* Routing rules (processor/route/): one warehouse covering a line beats any
 * split; score ranks by distance, cost and fill; splits use the fewest
 * warehouses; exclusions are honoured; no view degrades to the nearest. Also
 * the warehouse file loader and the sample config/warehouses.json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "route/route.h"

static route_config_t cfg;

static void add_wh(const char *id, double lat, double lon, double cost)
{
    route_warehouse_t *w = &cfg.warehouses[cfg.warehouses_count++];
    snprintf(w->id, sizeof w->id, "%s", id);
    w->lat = lat;
    w->lon = lon;
    w->cost_per_unit = cost;
}

static int setup(void **state)
{
    memset(&cfg, 0, sizeof cfg);
    cfg.weight_distance = 0.45;
    cfg.weight_cost = 0.25;
    cfg.weight_fill = 0.30;
    add_wh("NYC", 40.71, -74.01, 1.0);
    add_wh("CHI", 41.88, -87.63, 1.0);
    add_wh("LAX", 34.05, -118.24, 1.0);
    add_wh("BOS", 42.36, -71.06, 3.0);
    return 0;
}

static hf_availability_t avail(const char *sku, const int64_t qty[4])
{
    hf_availability_t a;
    memset(&a, 0, sizeof a);
    snprintf(a.sku, sizeof a.sku, "%s", sku);
    for (size_t i = 0; i < 4; i++) {
        snprintf(a.warehouses[i].warehouse_id, sizeof a.warehouses[i].warehouse_id, "%s",
                 cfg.warehouses[i].id);
        a.warehouses[i].available = qty[i];
        a.total += qty[i];
    }
    a.warehouses_count = 4;
    return a;
}

static const hf_geo_t manhattan = {40.73, -73.99};

static void test_nearest_single_warehouse_covering_the_line_wins(void **state)
{
    hf_availability_t a = avail("S", (int64_t[]){10, 10, 10, 10});
    route_line_t l = {"S", 5, manhattan, &a, NULL, 0, NULL, 0, 0};
    route_plan_t p;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    assert_int_equal(p.count, 1);
    assert_string_equal(p.items[0].warehouse_id, "NYC");
    assert_int_equal(p.items[0].qty, 5);
}

static void test_a_far_single_warehouse_beats_a_near_split(void **state)
{
    hf_availability_t a = avail("S", (int64_t[]){3, 0, 10, 3});
    route_line_t l = {"S", 5, manhattan, &a, NULL, 0, NULL, 0, 0};
    route_plan_t p;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    assert_int_equal(p.count, 1);
    assert_string_equal(p.items[0].warehouse_id, "LAX");
}

static void test_cost_breaks_a_near_tie(void **state)
{
    /* BOS is about as near as NYC to Providence but costs three times more. */
    hf_availability_t a = avail("S", (int64_t[]){10, 0, 0, 10});
    route_line_t l = {"S", 2, {41.82, -71.41}, &a, NULL, 0, NULL, 0, 0};
    route_plan_t p;
    cfg.weight_distance = 0.10; /* weights are configurable */
    cfg.weight_cost = 0.90;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    setup(NULL);
    assert_string_equal(p.items[0].warehouse_id, "NYC");
}

static void test_split_uses_the_fewest_warehouses(void **state)
{
    /* 9 units: NYC 3 + BOS 3 + CHI 3 would be nearest, LAX 8 + NYC 3 is fewer. */
    hf_availability_t a = avail("S", (int64_t[]){3, 3, 8, 3});
    route_line_t l = {"S", 9, manhattan, &a, NULL, 0, NULL, 0, 0};
    route_plan_t p;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    assert_int_equal(p.count, 2);
    int64_t sum = p.items[0].qty + p.items[1].qty;
    assert_int_equal(sum, 9);
    bool lax =
        strcmp(p.items[0].warehouse_id, "LAX") == 0 || strcmp(p.items[1].warehouse_id, "LAX") == 0;
    assert_true(lax);
}

static void test_network_short_is_insufficient(void **state)
{
    hf_availability_t a = avail("S", (int64_t[]){1, 1, 1, 1});
    route_line_t l = {"S", 5, manhattan, &a, NULL, 0, NULL, 0, 0};
    route_plan_t p;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_INSUFFICIENT);
    assert_int_equal(p.count, 0);
}

static void test_excluded_warehouses_are_not_used(void **state)
{
    hf_availability_t a = avail("S", (int64_t[]){10, 10, 0, 0});
    const char *ex[] = {"NYC"};
    route_line_t l = {"S", 5, manhattan, &a, ex, 1, NULL, 0, 0};
    route_plan_t p;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    assert_string_equal(p.items[0].warehouse_id, "CHI");
}

static void test_no_view_degrades_to_the_nearest_warehouse(void **state)
{
    route_line_t l = {"S", 500, {34.0, -118.0}, NULL, NULL, 0, NULL, 0, 0};
    route_plan_t p;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_DEGRADED);
    assert_int_equal(p.count, 1);
    assert_string_equal(p.items[0].warehouse_id, "LAX");
    assert_int_equal(p.items[0].qty, 500);
}

static void test_unknown_warehouses_in_the_view_are_skipped(void **state)
{
    hf_availability_t a = avail("S", (int64_t[]){0, 0, 0, 0});
    snprintf(a.warehouses[0].warehouse_id, sizeof a.warehouses[0].warehouse_id, "GHOST");
    a.warehouses[0].available = 100;
    route_line_t l = {"S", 1, manhattan, &a, NULL, 0, NULL, 0, 0};
    route_plan_t p;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_INSUFFICIENT);
}

/* A store (kind "store") holds only for a line that names it; only_warehouses
 * keeps a line within its list, degraded routing included. */
static void test_stores_and_only_warehouses_bound_the_candidates(void **state)
{
    cfg.warehouses[0].store = true; /* NYC is a store: the nearest, with plenty */
    hf_availability_t a = avail("S", (int64_t[]){10, 10, 10, 10});
    route_line_t l = {"S", 5, manhattan, &a, NULL, 0, NULL, 0, 0};
    route_plan_t p;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    assert_string_not_equal(p.items[0].warehouse_id, "NYC");
    const hf_wh_ref_t pick_up[] = {{"NYC"}};
    l.only = pick_up, l.only_count = 1;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    assert_int_equal(p.count, 1);
    assert_string_equal(p.items[0].warehouse_id, "NYC");
    l.qty = 11; /* the store alone cannot cover it: never split elsewhere */
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_INSUFFICIENT);
    const hf_wh_ref_t far[] = {{"LAX"}, {"CHI"}};
    l.only = far, l.only_count = 2, l.qty = 15;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    assert_int_equal(p.count, 2);
    for (size_t i = 0; i < p.count; i++)
        assert_true(strcmp(p.items[i].warehouse_id, "LAX") == 0 ||
                    strcmp(p.items[i].warehouse_id, "CHI") == 0);
    l.avail = NULL; /* no usable view: the nearest of the list, not of the network */
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_DEGRADED);
    assert_string_equal(p.items[0].warehouse_id, "CHI");
    l.only = NULL, l.only_count = 0;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_DEGRADED);
    assert_string_equal(p.items[0].warehouse_id, "BOS"); /* the nearest that is not a store */
    assert_true(
        route_may_use(&cfg, &(route_line_t){.only = pick_up, .only_count = 1}, &cfg.warehouses[0]));
    assert_false(route_may_use(&cfg, &(route_line_t){.only = NULL}, &cfg.warehouses[0]));
    /* A ship-from list (CHI, LAX: bits 1, 2) bounds the warehouses, not the store
     * a pick-up names. */
    l.avail = &a, l.qty = 5;
    l.ship_from = (1u << 1) | (1u << 2);
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_OK);
    assert_string_equal(p.items[0].warehouse_id, "CHI");
    l.avail = NULL;
    assert_int_equal(route_line(&cfg, &l, &p), ROUTE_DEGRADED);
    assert_string_equal(p.items[0].warehouse_id, "CHI");
    l.only = pick_up, l.only_count = 1;
    assert_true(route_may_use(&cfg, &l, &cfg.warehouses[0]));
    const hf_wh_ref_t boston[] = {{"BOS"}};
    l.only = boston; /* named, but not on the SKU's list */
    assert_false(route_may_use(&cfg, &l, &cfg.warehouses[3]));
}

static void test_distance_is_great_circle_km(void **state)
{
    double km = route_distance_km(40.71, -74.01, 34.05, -118.24);
    assert_true(km > 3900 && km < 4000); /* NYC - LA ~3,940 km */
}

static void test_sample_warehouses_file_loads(void **state)
{
    route_config_t c;
    memset(&c, 0, sizeof c);
    char errstr[256] = "";
    assert_int_equal(route_config_load("config/warehouses.json", &c, errstr, sizeof errstr), HF_OK);
    assert_int_equal(c.warehouses_count, 50);
    assert_non_null(route_warehouse(&c, "EU-BER"));
}

static void test_bad_warehouses_file_is_refused_with_a_reason(void **state)
{
    const char *path = "/tmp/hf_route_bad.json";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"warehouses\": [{\"id\": \"A|B\", \"lat\": 1, \"lon\": 2, \"cost_per_unit\": 1}]}", f);
    fclose(f);
    route_config_t c;
    memset(&c, 0, sizeof c);
    char errstr[256] = "";
    assert_int_equal(route_config_load(path, &c, errstr, sizeof errstr), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "no '|'"));
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"warehouses\": [{\"id\": \"S1\", \"lat\": 1, \"lon\": 2, \"cost_per_unit\": 1, "
          "\"kind\": \"shop\"}]}",
          f);
    fclose(f);
    assert_int_equal(route_config_load(path, &c, errstr, sizeof errstr), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "warehouse S1: kind must be \"warehouse\" or \"store\""));
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"warehouses\": [{\"id\": \"S1\", \"lat\": 1, \"lon\": 2, \"cost_per_unit\": 1, "
          "\"kind\": \"store\"}, {\"id\": \"D1\", \"lat\": 1, \"lon\": 2, \"cost_per_unit\": 1, "
          "\"kind\": \"warehouse\"}]}",
          f);
    fclose(f);
    memset(&c, 0, sizeof c);
    assert_int_equal(route_config_load(path, &c, errstr, sizeof errstr), HF_OK);
    assert_true(route_warehouse(&c, "S1")->store);
    assert_false(route_warehouse(&c, "D1")->store);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_nearest_single_warehouse_covering_the_line_wins, setup),
        cmocka_unit_test_setup(test_a_far_single_warehouse_beats_a_near_split, setup),
        cmocka_unit_test_setup(test_cost_breaks_a_near_tie, setup),
        cmocka_unit_test_setup(test_split_uses_the_fewest_warehouses, setup),
        cmocka_unit_test_setup(test_network_short_is_insufficient, setup),
        cmocka_unit_test_setup(test_excluded_warehouses_are_not_used, setup),
        cmocka_unit_test_setup(test_no_view_degrades_to_the_nearest_warehouse, setup),
        cmocka_unit_test_setup(test_unknown_warehouses_in_the_view_are_skipped, setup),
        cmocka_unit_test_setup(test_stores_and_only_warehouses_bound_the_candidates, setup),
        cmocka_unit_test(test_distance_is_great_circle_km),
        cmocka_unit_test(test_sample_warehouses_file_loads),
        cmocka_unit_test(test_bad_warehouses_file_is_refused_with_a_reason),
    };
    return cmocka_run_group_tests_name("routing rules", tests, NULL, NULL);
}
