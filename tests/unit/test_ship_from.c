/* Per-SKU ship-from lists (processor/route/ship_from.c): the file's lines become
 * warehouse masks in the order of the warehouses file; a SKU not listed has
 * none (anywhere); every mistake is refused at load naming its line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route/ship_from.h"

#define PATH "/tmp/hf_test_ship_from.txt"

static route_config_t cfg;

static int setup(void **state)
{
    (void)state;
    memset(&cfg, 0, sizeof cfg);
    const char *ids[] = {"DC-1", "DC-2", "DC-3", "STORE-9"};
    for (size_t i = 0; i < 4; i++) {
        route_warehouse_t *w = &cfg.warehouses[cfg.warehouses_count++];
        snprintf(w->id, sizeof w->id, "%s", ids[i]);
        w->store = i == 3;
    }
    return 0;
}

static void write_file(const char *text)
{
    FILE *f = fopen(PATH, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_refused(const char *text, const char *needle)
{
    write_file(text);
    ship_from_t *sf = (ship_from_t *)1;
    char errstr[512] = "";
    assert_int_not_equal(ship_from_load(PATH, &cfg, &sf, errstr, sizeof errstr), HF_OK);
    assert_null(sf);
    if (!strstr(errstr, needle))
        fail_msg("error \"%s\" does not say \"%s\"", errstr, needle);
}

static void test_lines_become_masks_and_unlisted_skus_ship_from_anywhere(void **state)
{
    (void)state;
    write_file("# hazardous goods from the licensed DCs only\n"
               "\n"
               "SKU-1 DC-1,DC-3\n"
               "  SKU-2\tDC-2 , DC-1  \n"
               "SKU-3 DC-3"); /* no newline at the end */
    ship_from_t *sf = NULL;
    char errstr[256] = "";
    assert_int_equal(ship_from_load(PATH, &cfg, &sf, errstr, sizeof errstr), HF_OK);
    assert_int_equal(ship_from_count(sf), 3);
    assert_int_equal(ship_from_mask(sf, "SKU-1"), (1u << 0) | (1u << 2));
    assert_int_equal(ship_from_mask(sf, "SKU-2"), (1u << 0) | (1u << 1));
    assert_int_equal(ship_from_mask(sf, "SKU-3"), 1u << 2);
    assert_int_equal(ship_from_mask(sf, "SKU-4"), 0);
    assert_int_equal(ship_from_mask(sf, "SKU-"), 0);
    assert_int_equal(ship_from_mask(NULL, "SKU-1"), 0);
    ship_from_free(sf);
    remove(PATH);
}

static void test_many_skus_are_all_found(void **state)
{
    (void)state;
    FILE *f = fopen(PATH, "w");
    assert_non_null(f);
    for (int i = 0; i < 50000; i++)
        fprintf(f, "SKU-%06d %s\n", i, i % 3 == 0 ? "DC-1" : i % 3 == 1 ? "DC-2" : "DC-2,DC-3");
    fclose(f);
    ship_from_t *sf = NULL;
    char errstr[256] = "";
    assert_int_equal(ship_from_load(PATH, &cfg, &sf, errstr, sizeof errstr), HF_OK);
    assert_int_equal(ship_from_count(sf), 50000);
    for (int i = 0; i < 50000; i++) {
        char sku[32];
        snprintf(sku, sizeof sku, "SKU-%06d", i);
        uint64_t want = i % 3 == 0 ? 1u : i % 3 == 1 ? 2u : 6u;
        assert_int_equal(ship_from_mask(sf, sku), want);
    }
    assert_int_equal(ship_from_mask(sf, "SKU-050000"), 0);
    ship_from_free(sf);
    remove(PATH);
}

static void test_mistakes_are_refused_naming_the_line(void **state)
{
    (void)state;
    expect_refused("SKU-1 DC-1\nSKU-2 DC-7\n",
                   ":2: sku SKU-2: warehouse \"DC-7\" is not in the warehouses file");
    expect_refused("SKU-1 STORE-9\n", ":1: sku SKU-1: STORE-9 is a store");
    expect_refused("SKU-1\n", ":1: sku SKU-1: no warehouse listed");
    expect_refused("SKU-1 ,\n", ":1: sku SKU-1: an empty warehouse id");
    expect_refused("SKU-1 DC-1,\r\n", ":1: sku SKU-1: an empty warehouse id");
    expect_refused("SKU-1 DC-1,,DC-2\n", ":1: sku SKU-1: an empty warehouse id");
    expect_refused("\xEF\xBB\xBFSKU-1 DC-1\n", ":1: starts with a UTF-8 byte order mark");
    expect_refused("SKU\x01 DC-1\n", "without '|' or control characters");
    expect_refused("SKU|1 DC-1\n", ":1: sku \"SKU|1\" must be");
    write_file("SKU-1 DC-1\r\nSKU-2 DC-2\r\n"); /* CRLF */
    ship_from_t *crlf = NULL;
    char why[256] = "";
    assert_int_equal(ship_from_load(PATH, &cfg, &crlf, why, sizeof why), HF_OK);
    assert_int_equal(ship_from_mask(crlf, "SKU-2"), 1u << 1);
    ship_from_free(crlf);
    expect_refused("SKU-1 DC-1\n#\nSKU-1 DC-2\n", "line 3: sku SKU-1 is listed on line 1 already");
    char *longline = malloc(HF_SHIP_FROM_LINE_MAX + 64);
    assert_non_null(longline);
    memset(longline, 'x', HF_SHIP_FROM_LINE_MAX + 10);
    strcpy(longline + HF_SHIP_FROM_LINE_MAX + 10, "\n");
    expect_refused(longline, ":1: longer than 4096 bytes");
    free(longline);
    ship_from_t *sf = (ship_from_t *)1;
    char errstr[256] = "";
    assert_int_equal(ship_from_load("/nonexistent/ship_from.txt", &cfg, &sf, errstr, sizeof errstr),
                     HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "/nonexistent/ship_from.txt: No such file"));
    remove(PATH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lines_become_masks_and_unlisted_skus_ship_from_anywhere, setup),
        cmocka_unit_test_setup(test_many_skus_are_all_found, setup),
        cmocka_unit_test_setup(test_mistakes_are_refused_naming_the_line, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
