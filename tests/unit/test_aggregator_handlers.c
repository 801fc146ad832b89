/* Unit tests of the aggregator's StockLevel handler (processor/aggregator/
 * stock_level.c) over the shared fake stage of fake/fake_stage.h, for escrow
 * (DESIGN.md section 5): a warehouse's sellable units in the routing view are
 * its counter's free stock plus the unheld balances of its allotments, so
 * units leased to gateway partitions still show as sellable; the network total
 * sums them, and a malformed StockLevel is rejected with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator/aggregator.h"
#include "codec.h"
#include "config.h"
#include "fake/fake_stage.h"
#include "hf_limits.h"
#include "log.h"
#include "stage.h"
#include "state.h"
#include "topics.h"

#define SKU "HOT-1"

static int setup(void **state)
{
    stage_ctx_t *fx = fake_stage_new("aggregator", 1700000000000LL);
    hf_config_t cfg;
    config_defaults(&cfg);
    char errstr[256];
    if (aggregator_stage()->init(&cfg, &fx->env, errstr, sizeof errstr) != HF_OK)
        fail_msg("aggregator init: %s", errstr);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    stage_ctx_t *fx = *state;
    aggregator_stage()->destroy(fx->env);
    fake_stage_destroy(fx);
    return 0;
}

static hf_record_t level(const char *w, int64_t available, int64_t allotted, int64_t balance)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_STOCK_LEVEL;
    hf_stock_level_t *sl = &r.u.stock_level;
    snprintf(sl->warehouse_id, sizeof sl->warehouse_id, "%s", w);
    snprintf(sl->sku, sizeof sl->sku, "%s", SKU);
    sl->available = available;
    sl->allotted = allotted;
    sl->escrow_balance = balance;
    sl->on_hand = available + allotted + 5;
    sl->reserved = 5;
    sl->version = 1;
    return r;
}

/* One StockLevel in its own transaction; returns the handler's result. */
static int apply(stage_ctx_t *fx, const hf_record_t *rec)
{
    fx->now_ms++;
    int err = fake_stage_apply(fx, aggregator_stage(), SKU, rec);
    if (err == HF_OK) {
        assert_int_equal(aggregator_stage()->batch_end(fx), HF_OK);
        fake_stage_commit(fx);
    } else {
        state_buf_clear(fx->buf);
    }
    return err;
}

static hf_availability_t last_availability(const stage_ctx_t *fx)
{
    for (size_t i = fx->emits_count; i-- > 0;)
        if (fx->emits[i].rec.type == HF_REC_AVAILABILITY) {
            assert_int_equal(fx->emits[i].topic_id, HF_T_AVAILABILITY);
            return fx->emits[i].rec.u.availability;
        }
    fail_msg("no Availability emitted");
    return (hf_availability_t){0};
}

static int64_t at(const hf_availability_t *a, const char *w)
{
    for (int32_t i = 0; i < a->warehouses_count; i++)
        if (strcmp(a->warehouses[i].warehouse_id, w) == 0)
            return a->warehouses[i].available;
    fail_msg("%s not in the availability of %s", w, a->sku);
    return -1;
}

/* The part of a warehouse's sellable units in allotments (shows the mode). */
static int64_t escrow_at(const hf_availability_t *a, const char *w)
{
    for (int32_t i = 0; i < a->warehouses_count; i++)
        if (strcmp(a->warehouses[i].warehouse_id, w) == 0)
            return a->warehouses[i].escrow;
    fail_msg("%s not in the availability of %s", w, a->sku);
    return -1;
}

static void test_sellable_is_free_stock_plus_escrow_balance(void **state)
{
    stage_ctx_t *fx = *state;
    hf_record_t r = level("W1", 30, 20, 12);
    assert_int_equal(apply(fx, &r), HF_OK);
    r = level("W2", 5, 0, 0);
    assert_int_equal(apply(fx, &r), HF_OK);
    hf_availability_t a = last_availability(fx);
    assert_int_equal(at(&a, "W1"), 42); /* 30 free + 12 unheld in allotments */
    assert_int_equal(escrow_at(&a, "W1"), 12);
    assert_int_equal(at(&a, "W2"), 5);
    assert_int_equal(escrow_at(&a, "W2"), 0);
    assert_int_equal(a.total, 47);
    assert_true(a.in_stock);

    /* The allotments' units held or sold: only free stock is left sellable. */
    r = level("W1", 30, 8, 0);
    assert_int_equal(apply(fx, &r), HF_OK);
    a = last_availability(fx);
    assert_int_equal(at(&a, "W1"), 30);
    assert_int_equal(a.total, 35);

    /* Free stock all leased out: the balances alone keep the SKU sellable. */
    r = level("W1", 0, 40, 25);
    assert_int_equal(apply(fx, &r), HF_OK);
    r = level("W2", 0, 0, 0);
    assert_int_equal(apply(fx, &r), HF_OK);
    a = last_availability(fx);
    assert_int_equal(at(&a, "W1"), 25);
    assert_int_equal(a.total, 25);
    assert_true(a.in_stock);
}

static void test_negative_escrow_balance_rejected(void **state)
{
    stage_ctx_t *fx = *state;
    hf_record_t r = level("W1", 30, 0, 0);
    assert_int_equal(apply(fx, &r), HF_OK);
    r = level("W1", 30, 10, -1);
    assert_int_equal(apply(fx, &r), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "escrow_balance"));
    r = level("W1", 30, 10, HF_QTY_MAX * 1000 + 1);
    assert_int_equal(apply(fx, &r), HF_ERR_INVAL);
    /* The view still says what the last good level said. */
    r = level("W2", 1, 0, 0);
    assert_int_equal(apply(fx, &r), HF_OK);
    hf_availability_t a = last_availability(fx);
    assert_int_equal(at(&a, "W1"), 30);
    assert_int_equal(a.total, 31);
}

int main(void)
{
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    log_set_level(HF_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sellable_is_free_stock_plus_escrow_balance, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_negative_escrow_balance_rejected, setup, teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    codec_shutdown();
    return failed;
}
