/* Unit tests of the counter stage's handlers (processor/counter/), driven the
 * way the task loop drives them: per record set the Kafka key, call the handler
 * from counter_stage()->handlers, and call batch_end once per transaction. The
 * stage is the shared fake of fake/fake_stage.h (a real state store in a
 * temporary directory and the real codec), so no broker is involved and every
 * output is captured as the record the handler gave. It ends with a randomized
 * run against an independent model of the counter rules (DESIGN.md sections 3,
 * 8 and 10). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "config.h"
#include "counter/counter.h"
#include "fake/fake_stage.h"
#include "hf_limits.h"
#include "log.h"
#include "stage.h"
#include "state.h"
#include "topics.h"

/* ======================================================================
 * Fixture and driving helpers (what the task loop does around a handler;
 * the stage itself is the fake in fake/fake_stage.c).
 * ====================================================================== */

/* Each test gets a fresh store and a fresh environment (the sweep's passes
 * belong to one store), built by the stage's own init from the defaults. */
static int setup(void **state)
{
    stage_ctx_t *fx = fake_stage_new("counter", 1700000000000LL);
    hf_config_t cfg;
    config_defaults(&cfg);
    char errstr[256];
    if (counter_stage()->init(&cfg, &fx->env, errstr, sizeof errstr) != HF_OK)
        fail_msg("counter init: %s", errstr);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    stage_ctx_t *fx = *state;
    counter_stage()->destroy(fx->env);
    fake_stage_destroy(fx);
    return 0;
}

static void rec_pair(const hf_record_t *rec, const char **w, const char **s)
{
    switch (rec->type) {
    case HF_REC_HOLD:
        *w = rec->u.hold.warehouse_id, *s = rec->u.hold.sku;
        return;
    case HF_REC_COMMIT_HOLD:
        *w = rec->u.commit_hold.warehouse_id, *s = rec->u.commit_hold.sku;
        return;
    case HF_REC_RELEASE_HOLD:
        *w = rec->u.release_hold.warehouse_id, *s = rec->u.release_hold.sku;
        return;
    case HF_REC_STOCK_FEED:
        *w = rec->u.stock_feed.warehouse_id, *s = rec->u.stock_feed.sku;
        return;
    default:
        fail_msg("not a counter input: %d", (int)rec->type);
    }
}

/* Applies one record under Kafka key `key` a millisecond after the last, as
 * task.c apply_record does; a rejection must leave no write, no written key and
 * no output behind (fake_stage_apply checks). */
static int fx_apply_key(stage_ctx_t *fx, const char *key, const hf_record_t *rec)
{
    fx->now_ms++;
    return fake_stage_apply(fx, counter_stage(), key, rec);
}

/* Applies rec under its own "warehouse|sku" key. */
static int fx_apply(stage_ctx_t *fx, const hf_record_t *rec)
{
    const char *w = NULL, *s = NULL;
    rec_pair(rec, &w, &s);
    char key[COUNTER_KEY_MAX];
    pair_key(key, w, s);
    return fx_apply_key(fx, key, rec);
}

/* Ends the transaction: batch_end, then the buffer goes to the DB. Returns the
 * index of the first output batch_end emitted. */
static size_t fx_end_batch(stage_ctx_t *fx)
{
    size_t first = fx->emits_count;
    assert_int_equal(counter_stage()->batch_end(fx), HF_OK);
    fake_stage_commit(fx);
    return first;
}

static void fx_clear_emits(stage_ctx_t *fx)
{
    fx->emits_count = 0;
}

/* ---- record builders */

static hf_record_t hold_rec(const char *rid, int32_t attempt, const char *w, const char *s,
                            int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_HOLD;
    snprintf(r.u.hold.reservation_id, sizeof r.u.hold.reservation_id, "%s", rid);
    snprintf(r.u.hold.warehouse_id, sizeof r.u.hold.warehouse_id, "%s", w);
    snprintf(r.u.hold.sku, sizeof r.u.hold.sku, "%s", s);
    r.u.hold.attempt = attempt;
    r.u.hold.qty = qty;
    r.u.hold.issued_at_ms = 1;
    return r;
}

static hf_record_t commit_rec(const char *rid, int32_t attempt, const char *w, const char *s)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_COMMIT_HOLD;
    snprintf(r.u.commit_hold.reservation_id, sizeof r.u.commit_hold.reservation_id, "%s", rid);
    snprintf(r.u.commit_hold.warehouse_id, sizeof r.u.commit_hold.warehouse_id, "%s", w);
    snprintf(r.u.commit_hold.sku, sizeof r.u.commit_hold.sku, "%s", s);
    r.u.commit_hold.attempt = attempt;
    return r;
}

static hf_record_t release_rec(const char *rid, int32_t attempt, const char *w, const char *s)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RELEASE_HOLD;
    snprintf(r.u.release_hold.reservation_id, sizeof r.u.release_hold.reservation_id, "%s", rid);
    snprintf(r.u.release_hold.warehouse_id, sizeof r.u.release_hold.warehouse_id, "%s", w);
    snprintf(r.u.release_hold.sku, sizeof r.u.release_hold.sku, "%s", s);
    snprintf(r.u.release_hold.reason, sizeof r.u.release_hold.reason, "abandoned");
    r.u.release_hold.attempt = attempt;
    return r;
}

static hf_record_t feed_rec(const char *w, const char *s, hf_feed_kind_t kind, int64_t qty,
                            int64_t seq)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_STOCK_FEED;
    snprintf(r.u.stock_feed.warehouse_id, sizeof r.u.stock_feed.warehouse_id, "%s", w);
    snprintf(r.u.stock_feed.sku, sizeof r.u.stock_feed.sku, "%s", s);
    r.u.stock_feed.kind = kind;
    r.u.stock_feed.qty = qty;
    r.u.stock_feed.feed_seq = seq;
    return r;
}

/* ---- reading results and state */

static const hf_counter_result_t *result_at(const stage_ctx_t *fx, size_t i)
{
    assert_true(i < fx->emits_count);
    const fake_stage_emit_t *e = &fx->emits[i];
    assert_int_equal(e->topic_id, HF_T_COUNTER_RESULTS);
    assert_int_equal(e->rec.type, HF_REC_COUNTER_RESULT);
    const hf_counter_result_t *r = &e->rec.u.counter_result;
    /* Results go back to the reservation's gateway partition. */
    assert_int_equal(e->key_len, strlen(r->reservation_id));
    assert_memory_equal(e->key, r->reservation_id, e->key_len);
    return r;
}

/* Applies rec, expects it accepted with exactly one CounterResult, returns it.
 */
static hf_counter_result_t fx_one_result(stage_ctx_t *fx, const hf_record_t *rec)
{
    size_t before = fx->emits_count;
    assert_int_equal(fx_apply(fx, rec), HF_OK);
    assert_int_equal(fx->emits_count, before + 1);
    return *result_at(fx, before);
}

static hf_counter_result_t do_hold(stage_ctx_t *fx, const char *rid, int32_t attempt, const char *w,
                                   const char *s, int64_t qty)
{
    hf_record_t r = hold_rec(rid, attempt, w, s, qty);
    return fx_one_result(fx, &r);
}

static hf_counter_result_t do_commit(stage_ctx_t *fx, const char *rid, int32_t attempt,
                                     const char *w, const char *s)
{
    hf_record_t r = commit_rec(rid, attempt, w, s);
    return fx_one_result(fx, &r);
}

static hf_counter_result_t do_release(stage_ctx_t *fx, const char *rid, int32_t attempt,
                                      const char *w, const char *s)
{
    hf_record_t r = release_rec(rid, attempt, w, s);
    return fx_one_result(fx, &r);
}

static int do_feed(stage_ctx_t *fx, const char *w, const char *s, hf_feed_kind_t kind, int64_t qty,
                   int64_t seq)
{
    hf_record_t r = feed_rec(w, s, kind, qty, seq);
    return fx_apply(fx, &r);
}

static void expect_result(const hf_counter_result_t *r, const char *rid, int32_t attempt,
                          const char *w, const char *s, hf_cmd_t cmd, hf_outcome_t outcome,
                          int64_t qty, int64_t available)
{
    assert_string_equal(r->reservation_id, rid);
    assert_int_equal(r->attempt, attempt);
    assert_string_equal(r->warehouse_id, w);
    assert_string_equal(r->sku, s);
    if (r->command != cmd || r->outcome != outcome)
        fail_msg("%s/%d: expected %s %s, got %s %s", rid, attempt, hf_cmd_name(cmd),
                 hf_outcome_name(outcome), hf_cmd_name(r->command), hf_outcome_name(r->outcome));
    assert_int_equal(r->qty, qty);
    assert_int_equal(r->available, available);
}

/* The pair's counter as stored (through the buffer); zeros if it never existed.
 */
static hf_counter_state_t fx_counter(stage_ctx_t *fx, const char *w, const char *s)
{
    char pk[COUNTER_KEY_MAX], key[COUNTER_KEY_MAX];
    pair_key(pk, w, s);
    fx->partition = fake_stage_partition_of(pk);
    size_t len = counter_key(key, w, s);
    hf_record_t rec;
    hf_counter_state_t c;
    memset(&c, 0, sizeof c);
    int err = stage_get(fx, key, len, &rec);
    if (err == HF_ERR_NOTFOUND)
        return c;
    assert_int_equal(err, HF_OK);
    assert_int_equal(rec.type, HF_REC_COUNTER_STATE);
    return rec.u.counter_state;
}

static void expect_counter(stage_ctx_t *fx, const char *w, const char *s, int64_t on_hand,
                           int64_t reserved, int64_t safety_stock, int64_t revoking)
{
    hf_counter_state_t c = fx_counter(fx, w, s);
    assert_int_equal(c.on_hand, on_hand);
    assert_int_equal(c.reserved, reserved);
    assert_int_equal(c.safety_stock, safety_stock);
    assert_int_equal(c.revoking, revoking);
}

static hf_hold_status_t fx_hold_status(stage_ctx_t *fx, const char *rid, int32_t attempt,
                                       const char *w, const char *s)
{
    char pk[COUNTER_KEY_MAX], key[COUNTER_KEY_MAX];
    pair_key(pk, w, s);
    fx->partition = fake_stage_partition_of(pk);
    size_t len = hold_key(key, w, s, attempt, rid);
    hf_record_t rec;
    assert_int_equal(stage_get(fx, key, len, &rec), HF_OK);
    assert_int_equal(rec.type, HF_REC_HOLD_STATE);
    return rec.u.hold_state.status;
}

/* DESIGN.md section 10 for one pair, from the stored state alone: the counter's
 * invariants; reserved = sum of open (HELD + REVOKING) holds, revoking = sum of
 * REVOKING holds; the open-hold index names exactly the open holds. */
static void fx_check_pair(stage_ctx_t *fx, const char *w, const char *s)
{
    hf_counter_state_t c = fx_counter(fx, w, s); /* also selects the partition */
    assert_true(c.on_hand >= 0);
    assert_true(c.reserved >= 0);
    assert_true(c.safety_stock >= 0);
    assert_true(c.revoking >= 0 && c.revoking <= c.reserved);
    assert_true(c.reserved - c.revoking <= c.on_hand);

    /* No cmocka assertion while an iterator is open: a failure would leave it
     * open and the state module aborts on destroying a buffer under it. */
    char prefix[COUNTER_KEY_MAX];
    int n = snprintf(prefix, sizeof prefix, "H%s|%s|", w, s);
    state_iter_t *it = stage_iter(fx, prefix, (size_t)n, false);
    assert_non_null(it);
    const void *k, *v;
    size_t klen, vlen;
    int64_t open_sum = 0, revoking_sum = 0;
    size_t open_count = 0, bad_holds = 0;
    while (state_iter_next(it, &k, &klen, &v, &vlen)) {
        hf_record_t rec;
        if (codec_decode(v, vlen, &rec, fx->errstr, sizeof fx->errstr) != HF_OK ||
            rec.type != HF_REC_HOLD_STATE || rec.u.hold_state.qty <= 0) {
            bad_holds++;
            continue;
        }
        const hf_hold_state_t *hs = &rec.u.hold_state;
        if (hs->status == HF_HOLD_HELD || hs->status == HF_HOLD_REVOKING) {
            open_sum += hs->qty;
            open_count++;
        }
        if (hs->status == HF_HOLD_REVOKING)
            revoking_sum += hs->qty;
    }
    state_iter_destroy(it);
    assert_int_equal(bad_holds, 0);
    assert_int_equal(c.reserved, open_sum);
    assert_int_equal(c.revoking, revoking_sum);

    /* Every open-hold index entry names an open hold, and only those. */
    n = snprintf(prefix, sizeof prefix, "O%s|%s|", w, s);
    it = stage_iter(fx, prefix, (size_t)n, false);
    assert_non_null(it);
    size_t index_count = 0, bad_entries = 0;
    while (state_iter_next(it, &k, &klen, &v, &vlen)) {
        /* Reading while the iterator is open, as pick_newest in stock_feed.c does.
         */
        index_count++;
        char hkey[COUNTER_KEY_MAX];
        hf_record_t rec;
        if (vlen >= COUNTER_KEY_MAX / 2 ||
            stage_get(fx, hkey, hold_key_of_ref(hkey, w, s, v, vlen), &rec) != HF_OK ||
            (rec.u.hold_state.status != HF_HOLD_HELD &&
             rec.u.hold_state.status != HF_HOLD_REVOKING))
            bad_entries++;
    }
    state_iter_destroy(it);
    assert_int_equal(bad_entries, 0);
    assert_int_equal(index_count, open_count);
}

/* The StockLevels batch_end emitted from index first on: how many name (w, s),
 * and the last of them. */
static size_t stock_levels_for(const stage_ctx_t *fx, size_t first, const char *w, const char *s,
                               hf_stock_level_t *out)
{
    size_t n = 0;
    for (size_t i = first; i < fx->emits_count; i++) {
        const fake_stage_emit_t *e = &fx->emits[i];
        assert_int_equal(e->topic_id, HF_T_STOCK_LEVELS);
        assert_int_equal(e->rec.type, HF_REC_STOCK_LEVEL);
        const hf_stock_level_t *sl = &e->rec.u.stock_level;
        /* Keyed by sku: the aggregator sees a SKU's whole network. */
        assert_int_equal(e->key_len, strlen(sl->sku));
        assert_memory_equal(e->key, sl->sku, e->key_len);
        if (strcmp(sl->warehouse_id, w) == 0 && strcmp(sl->sku, s) == 0) {
            n++;
            if (out)
                *out = *sl;
        }
    }
    return n;
}

static void stock(stage_ctx_t *fx, const char *w, const char *s, int64_t on_hand, int64_t seq)
{
    assert_int_equal(do_feed(fx, w, s, HF_FEED_COUNT, on_hand, seq), HF_OK);
}

/* ======================================================================
 * Hold
 * ====================================================================== */

static void test_hold_within_available_is_ok_with_available_after_and_grows_reserved(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    hf_counter_result_t r = do_hold(fx, "r1", 0, "W1", "S1", 3);
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 3, 7);
    expect_counter(fx, "W1", "S1", 10, 3, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r1", 0, "W1", "S1"), HF_HOLD_HELD);

    r = do_hold(fx, "r2", 0, "W1", "S1", 4);
    expect_result(&r, "r2", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 4, 3);
    expect_counter(fx, "W1", "S1", 10, 7, 0, 0);
    fx_check_pair(fx, "W1", "S1");
}

static void
test_hold_over_available_is_insufficient_with_current_available_and_reserves_nothing(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 5, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 2);
    fx_end_batch(fx);
    size_t writes_before = state_buf_count(fx->buf);

    hf_counter_result_t r = do_hold(fx, "r2", 0, "W1", "S1", 4);
    expect_result(&r, "r2", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 4, 3);
    expect_counter(fx, "W1", "S1", 5, 2, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r2", 0, "W1", "S1"), HF_HOLD_REFUSED);
    /* Only the refused hold's record is written, never the counter. */
    assert_int_equal(state_buf_count(fx->buf), writes_before + 1);
    fx_check_pair(fx, "W1", "S1");
}

static void test_hold_on_a_pair_never_stocked_is_insufficient_with_zero(void **state)
{
    stage_ctx_t *fx = *state;
    hf_counter_result_t r = do_hold(fx, "r1", 0, "W9", "S9", 1);
    expect_result(&r, "r1", 0, "W9", "S9", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 1, 0);
    expect_counter(fx, "W9", "S9", 0, 0, 0, 0);
}

static void test_hold_of_exactly_available_succeeds_and_one_more_unit_fails(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 6, 1);
    hf_counter_result_t r = do_hold(fx, "r1", 0, "W1", "S1", 6);
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 6, 0);
    r = do_hold(fx, "r2", 0, "W1", "S1", 1);
    expect_result(&r, "r2", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 1, 0);
    expect_counter(fx, "W1", "S1", 6, 6, 0, 0);

    /* The same boundary on a fresh pair: available + 1 fails, available passes.
     */
    stock(fx, "W1", "S2", 6, 1);
    r = do_hold(fx, "r3", 0, "W1", "S2", 7);
    expect_result(&r, "r3", 0, "W1", "S2", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 7, 6);
    r = do_hold(fx, "r4", 0, "W1", "S2", 6);
    expect_result(&r, "r4", 0, "W1", "S2", HF_CMD_HOLD, HF_OUTCOME_OK, 6, 0);
    fx_check_pair(fx, "W1", "S1");
    fx_check_pair(fx, "W1", "S2");
}

static void test_repeated_ok_hold_reemits_original_answer_without_reserving_again(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    hf_counter_result_t first = do_hold(fx, "r1", 0, "W1", "S1", 4);
    expect_result(&first, "r1", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 4, 6);
    fx_end_batch(fx);

    /* Stock changes in between; the retry still answers as the first time. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, 2), HF_OK);
    (void)do_hold(fx, "r2", 0, "W1", "S1", 1);
    fx_end_batch(fx);
    hf_counter_state_t before = fx_counter(fx, "W1", "S1");
    size_t writes_before = state_buf_count(fx->buf);

    /* Even with a different qty in the retried body: the original stands. */
    for (int64_t qty = 4; qty <= 5; qty++) {
        hf_counter_result_t again = do_hold(fx, "r1", 0, "W1", "S1", qty);
        expect_result(&again, "r1", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 4, 6);
    }
    assert_int_equal(state_buf_count(fx->buf), writes_before);
    hf_counter_state_t after = fx_counter(fx, "W1", "S1");
    assert_memory_equal(&before, &after, sizeof before);
    expect_counter(fx, "W1", "S1", 15, 5, 0, 0);
    fx_check_pair(fx, "W1", "S1");
}

static void test_repeated_insufficient_hold_reemits_insufficient_even_after_restock(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 2, 1);
    hf_counter_result_t first = do_hold(fx, "r1", 3, "W1", "S1", 5);
    expect_result(&first, "r1", 3, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 5, 2);
    fx_end_batch(fx);

    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 100, 2), HF_OK);
    fx_end_batch(fx);
    size_t writes_before = state_buf_count(fx->buf);
    hf_counter_result_t again = do_hold(fx, "r1", 3, "W1", "S1", 5);
    expect_result(&again, "r1", 3, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 5, 2);
    assert_int_equal(state_buf_count(fx->buf), writes_before);
    expect_counter(fx, "W1", "S1", 102, 0, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r1", 3, "W1", "S1"), HF_HOLD_REFUSED);
}

static void test_new_attempt_of_a_reservation_is_a_new_hold(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 3, 1);
    hf_counter_result_t r = do_hold(fx, "r1", 0, "W1", "S1", 5);
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 5, 3);
    r = do_hold(fx, "r1", 1, "W1", "S1", 2);
    expect_result(&r, "r1", 1, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 2, 1);
    r = do_hold(fx, "r1", 2, "W1", "S1", 1);
    expect_result(&r, "r1", 2, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 1, 0);
    expect_counter(fx, "W1", "S1", 3, 3, 0, 0);
    /* Each attempt settles on its own. */
    r = do_release(fx, "r1", 1, "W1", "S1");
    expect_result(&r, "r1", 1, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_OK, 2, 2);
    assert_int_equal(fx_hold_status(fx, "r1", 2, "W1", "S1"), HF_HOLD_HELD);
    fx_check_pair(fx, "W1", "S1");
}

static void test_invalid_hold_is_rejected_without_writing(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    fx_end_batch(fx);
    const struct {
        const char *rid;
        int32_t attempt;
        int64_t qty;
    } bad[] = {{"r1", 0, 0}, {"r1", 0, -1}, {"r1", 0, HF_QTY_MAX + 1}, {"", 0, 1}, {"r1", -1, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hf_record_t r = hold_rec(bad[i].rid, bad[i].attempt, "W1", "S1", bad[i].qty);
        assert_int_equal(fx_apply(fx, &r), HF_ERR_INVAL);
    }
    expect_counter(fx, "W1", "S1", 10, 0, 0, 0);
    /* The upper bound itself is accepted (and here insufficient). */
    hf_counter_result_t res = do_hold(fx, "r1", 0, "W1", "S1", HF_QTY_MAX);
    assert_int_equal(res.outcome, HF_OUTCOME_INSUFFICIENT);
}

/* ======================================================================
 * Commit and release
 * ====================================================================== */

static void test_commit_of_held_hold_takes_its_units_from_on_hand_and_reserved(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 4);
    (void)do_hold(fx, "r2", 0, "W1", "S1", 1);
    hf_counter_result_t r = do_commit(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_OK, 4, 5);
    expect_counter(fx, "W1", "S1", 6, 1, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r1", 0, "W1", "S1"), HF_HOLD_COMMITTED);
    fx_check_pair(fx, "W1", "S1");
}

static void test_repeated_commit_answers_ok_without_changing_the_counter(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 4);
    (void)do_commit(fx, "r1", 0, "W1", "S1");
    fx_end_batch(fx);
    hf_counter_state_t before = fx_counter(fx, "W1", "S1");
    size_t writes_before = state_buf_count(fx->buf);
    hf_counter_result_t r = do_commit(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_OK, 4, 6);
    assert_int_equal(state_buf_count(fx->buf), writes_before);
    hf_counter_state_t after = fx_counter(fx, "W1", "S1");
    assert_memory_equal(&before, &after, sizeof before);
}

static void test_commit_of_released_hold_is_conflict(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 4);
    (void)do_release(fx, "r1", 0, "W1", "S1");
    hf_counter_result_t r = do_commit(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_CONFLICT, 4, 10);
    expect_counter(fx, "W1", "S1", 10, 0, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r1", 0, "W1", "S1"), HF_HOLD_RELEASED);
}

static void test_commit_of_unknown_hold_is_not_found(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 4);
    size_t writes_before = state_buf_count(fx->buf);
    /* Unknown reservation, unknown attempt of a known one, and another pair. */
    hf_counter_result_t r = do_commit(fx, "nobody", 0, "W1", "S1");
    expect_result(&r, "nobody", 0, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_NOT_FOUND, 0, 6);
    r = do_commit(fx, "r1", 1, "W1", "S1");
    expect_result(&r, "r1", 1, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_NOT_FOUND, 0, 6);
    r = do_commit(fx, "r1", 0, "W1", "S2");
    expect_result(&r, "r1", 0, "W1", "S2", HF_CMD_COMMIT, HF_OUTCOME_NOT_FOUND, 0, 0);
    assert_int_equal(state_buf_count(fx->buf), writes_before);
    expect_counter(fx, "W1", "S1", 10, 4, 0, 0);
}

static void test_commit_of_refused_hold_is_conflict(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 2, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 3);
    hf_counter_result_t r = do_commit(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_CONFLICT, 3, 2);
    expect_counter(fx, "W1", "S1", 2, 0, 0, 0);
}

static void test_release_of_held_hold_returns_its_units_to_available(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 4);
    (void)do_hold(fx, "r2", 0, "W1", "S1", 3);
    fx_end_batch(fx); /* the hold now comes from the DB, its release from the buffer */
    hf_counter_result_t r = do_release(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_OK, 4, 7);
    expect_counter(fx, "W1", "S1", 10, 3, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r1", 0, "W1", "S1"), HF_HOLD_RELEASED);
    fx_check_pair(fx, "W1", "S1");
}

static void test_repeated_release_answers_ok_without_changing_the_counter(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 4);
    (void)do_release(fx, "r1", 0, "W1", "S1");
    fx_end_batch(fx);
    hf_counter_state_t before = fx_counter(fx, "W1", "S1");
    size_t writes_before = state_buf_count(fx->buf);
    hf_counter_result_t r = do_release(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_OK, 4, 10);
    assert_int_equal(state_buf_count(fx->buf), writes_before);
    hf_counter_state_t after = fx_counter(fx, "W1", "S1");
    assert_memory_equal(&before, &after, sizeof before);
}

static void test_release_of_committed_hold_is_conflict_and_the_sale_stands(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 4);
    (void)do_commit(fx, "r1", 0, "W1", "S1");
    hf_counter_result_t r = do_release(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_CONFLICT, 4, 6);
    expect_counter(fx, "W1", "S1", 6, 0, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r1", 0, "W1", "S1"), HF_HOLD_COMMITTED);
}

static void test_release_of_refused_hold_is_ok_with_nothing_given_back(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 2, 1);
    (void)do_hold(fx, "r0", 0, "W1", "S1", 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 3);
    fx_end_batch(fx);
    size_t writes_before = state_buf_count(fx->buf);
    hf_counter_result_t r = do_release(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_OK, 3, 1);
    assert_int_equal(state_buf_count(fx->buf), writes_before);
    expect_counter(fx, "W1", "S1", 2, 1, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r1", 0, "W1", "S1"), HF_HOLD_REFUSED);
}

static void test_release_of_unknown_hold_is_not_found(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 2, 1);
    hf_counter_result_t r = do_release(fx, "ghost", 0, "W1", "S1");
    expect_result(&r, "ghost", 0, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_NOT_FOUND, 0, 2);
}

static void test_invalid_commit_and_release_are_rejected_without_writing(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 4);
    hf_record_t recs[] = {commit_rec("", 0, "W1", "S1"), commit_rec("r1", -1, "W1", "S1"),
                          release_rec("", 0, "W1", "S1"), release_rec("r1", -1, "W1", "S1")};
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
        assert_int_equal(fx_apply(fx, &recs[i]), HF_ERR_INVAL);
    expect_counter(fx, "W1", "S1", 10, 4, 0, 0);
}

/* ======================================================================
 * Stock feed
 * ====================================================================== */

static void test_feed_receive_adds_to_on_hand(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 7, 1), HF_OK);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, 2), HF_OK);
    expect_counter(fx, "W1", "S1", 12, 0, 0, 0);
    assert_int_equal(fx_counter(fx, "W1", "S1").feed_seq, 2);
    /* A feed answers nobody: no CounterResult. */
    assert_int_equal(fx->emits_count, 0);
}

static void test_feed_adjust_adds_a_signed_delta(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 10, 1), HF_OK);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_ADJUST, -3, 2), HF_OK);
    expect_counter(fx, "W1", "S1", 7, 0, 0, 0);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_ADJUST, 4, 3), HF_OK);
    expect_counter(fx, "W1", "S1", 11, 0, 0, 0);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_ADJUST, -11, 4), HF_OK);
    expect_counter(fx, "W1", "S1", 0, 0, 0, 0);
}

static void test_feed_count_sets_on_hand(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 10, 1), HF_OK);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 3);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_COUNT, 25, 2), HF_OK);
    expect_counter(fx, "W1", "S1", 25, 3, 0, 0);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_COUNT, 3, 3), HF_OK);
    expect_counter(fx, "W1", "S1", 3, 3, 0, 0); /* exactly covers: no shortfall */
    assert_int_equal(fx->emits_count, 1);       /* just the hold's result */
    fx_check_pair(fx, "W1", "S1");
}

static void test_feed_safety_stock_gates_new_holds(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 2);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_SAFETY_STOCK, 3, 2), HF_OK);
    expect_counter(fx, "W1", "S1", 10, 2, 3, 0);
    /* available = 10 - 2 - 3 = 5 */
    hf_counter_result_t r = do_hold(fx, "r2", 0, "W1", "S1", 6);
    expect_result(&r, "r2", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 6, 5);
    r = do_hold(fx, "r3", 0, "W1", "S1", 5);
    expect_result(&r, "r3", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 5, 0);
    r = do_hold(fx, "r4", 0, "W1", "S1", 1);
    expect_result(&r, "r4", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 1, 0);
    /* Existing holds still settle; safety stock never revokes. */
    r = do_commit(fx, "r1", 0, "W1", "S1");
    expect_result(&r, "r1", 0, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_OK, 2, 0);
    expect_counter(fx, "W1", "S1", 8, 5, 3, 0);
    /* Lowering it frees units again. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_SAFETY_STOCK, 0, 3), HF_OK);
    r = do_hold(fx, "r5", 0, "W1", "S1", 3);
    expect_result(&r, "r5", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_OK, 3, 0);
    fx_check_pair(fx, "W1", "S1");
}

static void test_feed_with_duplicate_or_older_seq_is_ignored(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 10, 5), HF_OK);
    fx_end_batch(fx);
    fx_clear_emits(fx);
    hf_counter_state_t before = fx_counter(fx, "W1", "S1");
    size_t writes_before = state_buf_count(fx->buf);
    const hf_feed_kind_t kinds[] = {HF_FEED_RECEIVE, HF_FEED_ADJUST, HF_FEED_COUNT,
                                    HF_FEED_SAFETY_STOCK};
    for (size_t k = 0; k < 4; k++)
        for (int64_t seq = 1; seq <= 5; seq++)
            assert_int_equal(
                do_feed(fx, "W1", "S1", kinds[k], kinds[k] == HF_FEED_ADJUST ? -10 : 1, seq),
                HF_OK);
    assert_int_equal(state_buf_count(fx->buf), writes_before);
    assert_int_equal(fx->written_count, 0);
    hf_counter_state_t after = fx_counter(fx, "W1", "S1");
    assert_memory_equal(&before, &after, sizeof before);
    /* Sequences are per pair: another pair starts from nothing. */
    assert_int_equal(do_feed(fx, "W1", "S2", HF_FEED_RECEIVE, 3, 1), HF_OK);
    expect_counter(fx, "W1", "S2", 3, 0, 0, 0);
    assert_int_equal(fx->emits_count, 0);
}

static void test_feed_adjust_that_would_make_on_hand_negative_is_rejected(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, 1), HF_OK);
    fx_end_batch(fx);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_ADJUST, -6, 2), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "negative"));
    assert_int_equal(state_buf_count(fx->buf), 0);
    hf_counter_state_t c = fx_counter(fx, "W1", "S1");
    assert_int_equal(c.on_hand, 5);
    assert_int_equal(c.feed_seq, 1); /* the rejected seq was not consumed */
    /* The same seq, corrected, applies. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_ADJUST, -5, 2), HF_OK);
    expect_counter(fx, "W1", "S1", 0, 0, 0, 0);
}

static void test_feed_with_invalid_qty_seq_or_kind_is_rejected(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, 1), HF_OK);
    fx_end_batch(fx);
    const struct {
        int kind;
        int64_t qty, seq;
        const char *why;
    } bad[] = {
        {HF_FEED_RECEIVE, 1, 0, "seq"},
        {HF_FEED_RECEIVE, 1, -1, "seq"},
        {HF_FEED__COUNT, 1, 2, "kind"},
        {-1, 1, 2, "kind"},
        {77, 1, 2, "kind"},
        {HF_FEED_RECEIVE, 0, 2, "qty"},
        {HF_FEED_RECEIVE, -1, 2, "qty"},
        {HF_FEED_RECEIVE, HF_QTY_MAX * 1000 + 1, 2, "qty"},
        {HF_FEED_ADJUST, -HF_QTY_MAX - 1, 2, "qty"},
        {HF_FEED_ADJUST, HF_QTY_MAX * 1000 + 1, 2, "qty"},
        {HF_FEED_COUNT, -1, 2, "qty"},
        {HF_FEED_COUNT, HF_QTY_MAX * 1000 + 1, 2, "qty"},
        {HF_FEED_SAFETY_STOCK, -1, 2, "qty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int err = do_feed(fx, "W1", "S1", (hf_feed_kind_t)bad[i].kind, bad[i].qty, bad[i].seq);
        if (err != HF_ERR_INVAL)
            fail_msg("case %zu (kind %d qty %lld seq %lld) was not rejected", i, bad[i].kind,
                     (long long)bad[i].qty, (long long)bad[i].seq);
        assert_non_null(strstr(fx->reject_reason, bad[i].why));
    }
    expect_counter(fx, "W1", "S1", 5, 0, 0, 0);
    assert_int_equal(fx_counter(fx, "W1", "S1").feed_seq, 1);
    /* Bounds themselves are accepted. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_COUNT, 0, 2), HF_OK);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, HF_QTY_MAX * 1000, 3), HF_OK);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_ADJUST, -HF_QTY_MAX, 4), HF_OK);
    expect_counter(fx, "W1", "S1", HF_QTY_MAX * 1000 - HF_QTY_MAX, 0, 0, 0);
}

/* ---- cycle counts with an as-of point, and the feed_seq bounds */

static int do_feed_ex(stage_ctx_t *fx, const char *w, const char *s, hf_feed_kind_t kind,
                      int64_t qty, int64_t seq, int64_t as_of_committed, int64_t epoch)
{
    hf_record_t r = feed_rec(w, s, kind, qty, seq);
    r.u.stock_feed.as_of_committed = as_of_committed;
    r.u.stock_feed.feed_epoch = epoch;
    return fx_apply(fx, &r);
}

/* Sells qty at (w, s) under reservation rid: a hold, then its commit. */
static void sell(stage_ctx_t *fx, const char *rid, const char *w, const char *s, int64_t qty)
{
    hf_counter_result_t r = do_hold(fx, rid, 0, w, s, qty);
    assert_int_equal(r.outcome, HF_OUTCOME_OK);
    r = do_commit(fx, rid, 0, w, s);
    assert_int_equal(r.outcome, HF_OUTCOME_OK);
}

static void
test_count_taken_before_a_sale_and_applied_after_it_does_not_give_the_unit_back(void **state)
{
    stage_ctx_t *fx = *state;
    /* Two pairs with the same history: 5 received, 2 sold, the warehouse reads
     * committed_total 2 and counts 3 on the shelf, then 1 more is sold before
     * the count arrives. */
    const char *skus[] = {"AS-OF", "PLAIN"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(do_feed(fx, "W1", skus[i], HF_FEED_RECEIVE, 5, 1), HF_OK);
        sell(fx, "r1", "W1", skus[i], 2);
        assert_int_equal(fx_counter(fx, "W1", skus[i]).committed_total, 2); /* what it read */
        sell(fx, "r2", "W1", skus[i], 1);
    }
    expect_counter(fx, "W1", "AS-OF", 2, 0, 0, 0);
    assert_int_equal(do_feed_ex(fx, "W1", "AS-OF", HF_FEED_COUNT_AS_OF, 3, 2, 2, 0), HF_OK);
    /* 3 counted, 1 sold since the count: 2, not 3. */
    expect_counter(fx, "W1", "AS-OF", 2, 0, 0, 0);
    /* A plain COUNT keeps its old meaning: it gives the unit sold after the
     * count back (the reason COUNT_AS_OF exists). */
    assert_int_equal(do_feed(fx, "W1", "PLAIN", HF_FEED_COUNT, 3, 2), HF_OK);
    expect_counter(fx, "W1", "PLAIN", 3, 0, 0, 0);

    /* The StockLevel tells the warehouse system the as-of clock and the feed
     * position it needs for the next count. */
    size_t first = fx_end_batch(fx);
    hf_stock_level_t sl;
    assert_int_equal(stock_levels_for(fx, first, "W1", "AS-OF", &sl), 1);
    assert_int_equal(sl.committed_total, 3);
    assert_int_equal(sl.on_hand, 2);
    assert_int_equal(sl.feed_seq, 2);
    assert_int_equal(sl.feed_epoch, 0);

    /* A count as of now is taken as is; committed_total never moves back. */
    assert_int_equal(do_feed_ex(fx, "W1", "AS-OF", HF_FEED_COUNT_AS_OF, 4, 3, 3, 0), HF_OK);
    expect_counter(fx, "W1", "AS-OF", 4, 0, 0, 0);
    /* A count that saw fewer units than were sold since leaves nothing. */
    assert_int_equal(do_feed_ex(fx, "W1", "AS-OF", HF_FEED_COUNT_AS_OF, 1, 4, 0, 0), HF_OK);
    expect_counter(fx, "W1", "AS-OF", 0, 0, 0, 0);
    hf_counter_state_t c = fx_counter(fx, "W1", "AS-OF");
    assert_int_equal(c.committed_total, 3);
    assert_int_equal(c.feed_seq, 4);
    fx_check_pair(fx, "W1", "AS-OF");
}

static void test_count_as_of_revokes_holds_the_sold_units_no_longer_cover(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 4, 1), HF_OK);
    sell(fx, "r1", "W1", "S1", 1); /* the count is taken as of committed_total 1 */
    (void)do_hold(fx, "r2", 0, "W1", "S1", 2);
    (void)do_commit(fx, "r2", 0, "W1", "S1"); /* sold after the count */
    (void)do_hold(fx, "r3", 0, "W1", "S1", 1);
    fx_clear_emits(fx);
    /* 3 on the shelf at the count, 2 of them sold since: 1 left, r3 holds 1. */
    assert_int_equal(do_feed_ex(fx, "W1", "S1", HF_FEED_COUNT_AS_OF, 3, 2, 1, 0), HF_OK);
    expect_counter(fx, "W1", "S1", 1, 1, 0, 0);
    assert_int_equal(fx->emits_count, 0);
    /* 2 on the shelf at the count: nothing left for r3's hold. */
    assert_int_equal(do_feed_ex(fx, "W1", "S1", HF_FEED_COUNT_AS_OF, 2, 3, 1, 0), HF_OK);
    expect_counter(fx, "W1", "S1", 0, 1, 0, 1);
    assert_int_equal(fx->emits_count, 1);
    expect_result(result_at(fx, 0), "r3", 0, "W1", "S1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 1,
                  0);
    fx_check_pair(fx, "W1", "S1");
}

static void test_bad_as_of_points_are_rejected_naming_what_to_send(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, 1), HF_OK);
    sell(fx, "r1", "W1", "S1", 2);
    fx_end_batch(fx);
    const struct {
        hf_feed_kind_t kind;
        int64_t as_of;
        const char *why;
    } bad[] = {
        {HF_FEED_COUNT_AS_OF, 3, "ahead of the pair's committed_total 2"},
        {HF_FEED_COUNT_AS_OF, -1, "only a COUNT_AS_OF carries one (>= 0"},
        {HF_FEED_COUNT, 1, "only a COUNT_AS_OF carries one"},
        {HF_FEED_RECEIVE, 1, "only a COUNT_AS_OF carries one"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int err = do_feed_ex(fx, "W1", "S1", bad[i].kind, 1, 2, bad[i].as_of, 0);
        if (err != HF_ERR_INVAL)
            fail_msg("case %zu was not rejected", i);
        if (!strstr(fx->reject_reason, bad[i].why))
            fail_msg("case %zu: reason '%s' lacks '%s'", i, fx->reject_reason, bad[i].why);
    }
    hf_counter_state_t c = fx_counter(fx, "W1", "S1");
    assert_int_equal(c.on_hand, 3);
    assert_int_equal(c.feed_seq, 1); /* no rejected seq was consumed */
}

static void
test_feed_seq_jump_beyond_the_bound_is_rejected_and_an_epoch_restarts_numbering(void **state)
{
    stage_ctx_t *fx = *state;
    /* The first feed of a pair counts from 0 too: wall-clock milliseconds as a
     * sequence would freeze the pair for anything counting 1, 2, 3. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, HF_FEED_SEQ_JUMP_MAX + 1),
                     HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "restart the numbering with feed_epoch 1"));
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, 1), HF_OK);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 1, 2 + HF_FEED_SEQ_JUMP_MAX),
                     HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "past the pair's last applied 1"));
    assert_int_equal(fx_counter(fx, "W1", "S1").feed_seq, 1);
    /* A gap up to the bound is fine (a warehouse system may number several
     * pairs from one sequence). */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 1, 1 + HF_FEED_SEQ_JUMP_MAX), HF_OK);
    expect_counter(fx, "W1", "S1", 6, 0, 0, 0);

    /* A restarted numbering in the same epoch looks like a replay: ignored. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 1, 1), HF_OK);
    expect_counter(fx, "W1", "S1", 6, 0, 0, 0);
    /* The deliberate reset: the next epoch, counting from 1. */
    assert_int_equal(do_feed_ex(fx, "W1", "S1", HF_FEED_RECEIVE, 1, 1, 0, 1), HF_OK);
    expect_counter(fx, "W1", "S1", 7, 0, 0, 0);
    hf_counter_state_t c = fx_counter(fx, "W1", "S1");
    assert_int_equal(c.feed_epoch, 1);
    assert_int_equal(c.feed_seq, 1);
    /* Replays of the old epoch, however high their seq, change nothing. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 1, 1 + HF_FEED_SEQ_JUMP_MAX), HF_OK);
    assert_int_equal(do_feed_ex(fx, "W1", "S1", HF_FEED_RECEIVE, 1, 1, 0, 1), HF_OK);
    expect_counter(fx, "W1", "S1", 7, 0, 0, 0);
    /* An epoch is one more, never a leap; a new epoch counts from 0. */
    assert_int_equal(do_feed_ex(fx, "W1", "S1", HF_FEED_RECEIVE, 1, 1, 0, 3), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "skips ahead"));
    assert_int_equal(do_feed_ex(fx, "W1", "S1", HF_FEED_RECEIVE, 1, HF_FEED_SEQ_JUMP_MAX + 1, 0, 2),
                     HF_ERR_INVAL);
    assert_int_equal(do_feed_ex(fx, "W1", "S1", HF_FEED_RECEIVE, 1, 2, 0, -1), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "feed_epoch -1"));
    c = fx_counter(fx, "W1", "S1");
    assert_int_equal(c.feed_epoch, 1);
    assert_int_equal(c.feed_seq, 1);
    assert_int_equal(c.on_hand, 7);
}

/* ======================================================================
 * Shortfall
 * ====================================================================== */

/* Holds A(2), B(3), C(4) on on_hand 10, then a count of 4. Returns the index of
 * the first output of the count. */
static size_t shortfall_scenario(stage_ctx_t *fx)
{
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "A", 0, "W1", "S1", 2);
    (void)do_hold(fx, "B", 0, "W1", "S1", 3);
    fx_end_batch(fx); /* A and B come from the DB, C from the buffer */
    (void)do_hold(fx, "C", 0, "W1", "S1", 4);
    fx_clear_emits(fx);
    size_t first = fx->emits_count;
    stock(fx, "W1", "S1", 4, 2);
    return first;
}

/* The open-hold index is never changelogged: a restore rebuilds it from the hold
 * records, and a count after it still revokes the newest open holds. */
static void test_restore_rebuilds_the_open_hold_index_from_the_hold_records(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 20, 1);
    (void)do_hold(fx, "A", 0, "W1", "S1", 2);
    (void)do_hold(fx, "B", 0, "W1", "S1", 3);
    (void)do_hold(fx, "C", 0, "W1", "S1", 4);
    (void)do_hold(fx, "D", 0, "W1", "S1", 5);
    fx_end_batch(fx);
    (void)do_commit(fx, "A", 0, "W1", "S1");
    (void)do_release(fx, "C", 0, "W1", "S1");
    fx_end_batch(fx);
    /* An older version logged the index: its entry for a hold since forgotten
     * must not come back. */
    char okey[COUNTER_KEY_MAX];
    size_t okey_len = open_hold_key(okey, "W1", "S1", 999);
    fake_stage_changelog_raw(fx, fake_stage_partition_of("W1|S1"), okey, okey_len, "00000000|Z",
                             10);
    fake_stage_restore(fx, counter_stage());
    fx_check_pair(fx, "W1", "S1"); /* the index names B and D, nothing else */
    expect_counter(fx, "W1", "S1", 18, 8, 0, 0);
    fx_clear_emits(fx);
    size_t first = fx->emits_count;
    stock(fx, "W1", "S1", 4, 2); /* shortfall 8 - 4: D (newest open) covers it */
    assert_int_equal(fx->emits_count - first, 1);
    expect_result(result_at(fx, first), "D", 0, "W1", "S1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 5,
                  0);
    fx_check_pair(fx, "W1", "S1");
}

static void test_count_below_reserved_revokes_the_newest_holds_first(void **state)
{
    stage_ctx_t *fx = *state;
    size_t first = shortfall_scenario(fx);
    /* shortfall = 9 - 4 = 5: C (4) is not enough, C and B (7) are. */
    assert_int_equal(fx->emits_count - first, 2);
    const hf_counter_result_t *r = result_at(fx, first);
    expect_result(r, "C", 0, "W1", "S1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 4, 0);
    r = result_at(fx, first + 1);
    expect_result(r, "B", 0, "W1", "S1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 3, 0);

    hf_counter_state_t c = fx_counter(fx, "W1", "S1");
    assert_int_equal(c.on_hand, 4);
    assert_int_equal(c.reserved, 9); /* revoked units stay reserved until released */
    assert_int_equal(c.revoking, 7);
    assert_int_equal(fx_hold_status(fx, "A", 0, "W1", "S1"), HF_HOLD_HELD);
    assert_int_equal(fx_hold_status(fx, "B", 0, "W1", "S1"), HF_HOLD_REVOKING);
    assert_int_equal(fx_hold_status(fx, "C", 0, "W1", "S1"), HF_HOLD_REVOKING);
    fx_check_pair(fx, "W1", "S1");

    size_t sl_first = fx_end_batch(fx);
    hf_stock_level_t sl;
    assert_int_equal(stock_levels_for(fx, sl_first, "W1", "S1", &sl), 1);
    assert_int_equal(sl.on_hand, 4);
    assert_int_equal(sl.reserved, 9);
    assert_int_equal(sl.available, 0);
    assert_int_equal(sl.shortfall, 7);
}

static void test_commit_of_a_revoked_hold_is_revoked_and_changes_nothing(void **state)
{
    stage_ctx_t *fx = *state;
    (void)shortfall_scenario(fx);
    fx_end_batch(fx);
    size_t writes_before = state_buf_count(fx->buf);
    hf_counter_result_t r = do_commit(fx, "C", 0, "W1", "S1");
    expect_result(&r, "C", 0, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 4, 0);
    assert_int_equal(state_buf_count(fx->buf), writes_before);
    expect_counter(fx, "W1", "S1", 4, 9, 0, 7);
    /* The surviving hold still sells. */
    r = do_commit(fx, "A", 0, "W1", "S1");
    expect_result(&r, "A", 0, "W1", "S1", HF_CMD_COMMIT, HF_OUTCOME_OK, 2, 0);
    expect_counter(fx, "W1", "S1", 2, 7, 0, 7);
    fx_check_pair(fx, "W1", "S1");
}

static void test_releasing_revoked_holds_brings_revoking_and_reserved_down(void **state)
{
    stage_ctx_t *fx = *state;
    (void)shortfall_scenario(fx);
    fx_end_batch(fx);
    hf_counter_result_t r = do_release(fx, "C", 0, "W1", "S1");
    expect_result(&r, "C", 0, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_OK, 4, 0);
    expect_counter(fx, "W1", "S1", 4, 5, 0, 3);
    fx_check_pair(fx, "W1", "S1");
    r = do_release(fx, "B", 0, "W1", "S1");
    expect_result(&r, "B", 0, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_OK, 3, 2);
    expect_counter(fx, "W1", "S1", 4, 2, 0, 0);
    fx_check_pair(fx, "W1", "S1");
    /* Released twice: OK, nothing moves. */
    r = do_release(fx, "B", 0, "W1", "S1");
    expect_result(&r, "B", 0, "W1", "S1", HF_CMD_RELEASE, HF_OUTCOME_OK, 3, 2);
    expect_counter(fx, "W1", "S1", 4, 2, 0, 0);

    size_t sl_first = fx_end_batch(fx);
    hf_stock_level_t sl;
    assert_int_equal(stock_levels_for(fx, sl_first, "W1", "S1", &sl), 1);
    assert_int_equal(sl.available, 2);
    assert_int_equal(sl.shortfall, 0);
}

static void test_hold_during_shortfall_is_insufficient(void **state)
{
    stage_ctx_t *fx = *state;
    (void)shortfall_scenario(fx);
    hf_counter_result_t r = do_hold(fx, "D", 0, "W1", "S1", 1);
    expect_result(&r, "D", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 1, 0);
    expect_counter(fx, "W1", "S1", 4, 9, 0, 7);
    /* Receiving stock that only covers the revoked units still leaves nothing. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, 3), HF_OK);
    r = do_hold(fx, "E", 0, "W1", "S1", 1);
    expect_result(&r, "E", 0, "W1", "S1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 1, 0);
    fx_check_pair(fx, "W1", "S1");
}

static void test_deeper_count_revokes_only_holds_not_already_revoking(void **state)
{
    stage_ctx_t *fx = *state;
    (void)shortfall_scenario(fx);
    fx_end_batch(fx);
    fx_clear_emits(fx);
    stock(fx, "W1", "S1", 1, 3); /* promised 2 (A) on 1: revoke A only */
    assert_int_equal(fx->emits_count, 1);
    expect_result(result_at(fx, 0), "A", 0, "W1", "S1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 2, 0);
    expect_counter(fx, "W1", "S1", 1, 9, 0, 9);
    fx_check_pair(fx, "W1", "S1");
    /* Nothing is left to revoke: a count of 0 revokes nobody. */
    fx_clear_emits(fx);
    stock(fx, "W1", "S1", 0, 4);
    assert_int_equal(fx->emits_count, 0);
    fx_check_pair(fx, "W1", "S1");
}

static void test_adjust_below_reserved_revokes_and_committed_holds_are_never_revoked(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "A", 0, "W1", "S1", 3);
    (void)do_hold(fx, "B", 0, "W1", "S1", 3);
    (void)do_hold(fx, "C", 0, "W1", "S1", 3);
    (void)do_commit(fx, "C", 0, "W1", "S1");  /* on_hand 7, reserved 6 */
    (void)do_release(fx, "B", 0, "W1", "S1"); /* reserved 3 */
    fx_clear_emits(fx);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_ADJUST, -5, 2), HF_OK); /* on_hand 2 */
    assert_int_equal(fx->emits_count, 1);
    expect_result(result_at(fx, 0), "A", 0, "W1", "S1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 3, 0);
    expect_counter(fx, "W1", "S1", 2, 3, 0, 3);
    fx_check_pair(fx, "W1", "S1");
}

static void test_shortfall_on_one_pair_leaves_pairs_with_a_longer_sku_alone(void **state)
{
    stage_ctx_t *fx = *state;
    /* "OW1|S1|" must not prefix-match "OW1|S10|"'s holds. */
    stock(fx, "W1", "S1", 5, 1);
    stock(fx, "W1", "S10", 5, 1);
    (void)do_hold(fx, "A", 0, "W1", "S1", 5);
    (void)do_hold(fx, "X", 0, "W1", "S10", 5); /* newer */
    fx_clear_emits(fx);
    stock(fx, "W1", "S1", 0, 2);
    assert_int_equal(fx->emits_count, 1);
    expect_result(result_at(fx, 0), "A", 0, "W1", "S1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 5, 0);
    assert_int_equal(fx_hold_status(fx, "X", 0, "W1", "S10"), HF_HOLD_HELD);
    expect_counter(fx, "W1", "S10", 5, 5, 0, 0);
    fx_check_pair(fx, "W1", "S1");
    fx_check_pair(fx, "W1", "S10");
}

static void test_count_to_zero_revokes_every_open_hold_even_beyond_the_revoke_limit(void **state)
{
    stage_ctx_t *fx = *state;
    const int holds = 70; /* more than any fixed per-record output bound would allow */
    stock(fx, "W1", "S1", holds, 1);
    char rid[16];
    for (int i = 0; i < holds; i++) {
        snprintf(rid, sizeof rid, "r%03d", i);
        hf_counter_result_t r = do_hold(fx, rid, 0, "W1", "S1", 1);
        assert_int_equal(r.outcome, HF_OUTCOME_OK);
        if (i == holds / 2)
            fx_end_batch(fx);
    }
    fx_clear_emits(fx);
    stock(fx, "W1", "S1", 0, 2);
    /* Every hold must go, or reserved - revoking <= on_hand would break. */
    assert_int_equal(fx->emits_count, (size_t)holds);
    for (int i = 0; i < holds; i++) {
        snprintf(rid, sizeof rid, "r%03d", holds - 1 - i); /* newest first */
        expect_result(result_at(fx, (size_t)i), rid, 0, "W1", "S1", HF_CMD_SHORTFALL,
                      HF_OUTCOME_REVOKED, 1, 0);
    }
    expect_counter(fx, "W1", "S1", 0, holds, 0, holds);
}

static void test_ids_at_their_length_bounds_survive_every_key_and_output(void **state)
{
    stage_ctx_t *fx = *state;
    char w[HF_WAREHOUSE_LEN_MAX + 1], s[HF_SKU_LEN_MAX + 1], rid[HF_ID_LEN_MAX + 1];
    memset(w, 'w', HF_WAREHOUSE_LEN_MAX);
    w[HF_WAREHOUSE_LEN_MAX] = '\0';
    memset(s, 's', HF_SKU_LEN_MAX);
    s[HF_SKU_LEN_MAX] = '\0';
    /* A reservation id may contain '|': only warehouse and sku are separators. */
    memset(rid, 'r', HF_ID_LEN_MAX);
    rid[HF_ID_LEN_MAX] = '\0';
    rid[3] = '|';
    const int32_t attempt = INT32_MAX;

    stock(fx, w, s, 10, 1);
    hf_counter_result_t r = do_hold(fx, rid, attempt, w, s, 10);
    expect_result(&r, rid, attempt, w, s, HF_CMD_HOLD, HF_OUTCOME_OK, 10, 0);
    fx_end_batch(fx);
    fx_clear_emits(fx);
    stock(fx, w, s, 3, 2);
    assert_int_equal(fx->emits_count, 1);
    expect_result(result_at(fx, 0), rid, attempt, w, s, HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 10,
                  0);
    size_t first = fx_end_batch(fx);
    hf_stock_level_t sl;
    assert_int_equal(stock_levels_for(fx, first, w, s, &sl), 1);
    assert_int_equal(sl.on_hand, 3);
    assert_int_equal(sl.shortfall, 10);
    r = do_release(fx, rid, attempt, w, s);
    expect_result(&r, rid, attempt, w, s, HF_CMD_RELEASE, HF_OUTCOME_OK, 10, 3);
    fx_check_pair(fx, w, s);
}

/* ======================================================================
 * Routing guard
 * ====================================================================== */

static void test_record_keyed_other_than_its_pair_is_rejected_naming_the_expected_key(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    (void)do_hold(fx, "r1", 0, "W1", "S1", 1);
    fx_end_batch(fx);
    hf_record_t recs[] = {hold_rec("r2", 0, "W1", "S1", 1), commit_rec("r1", 0, "W1", "S1"),
                          release_rec("r1", 0, "W1", "S1"),
                          feed_rec("W1", "S1", HF_FEED_RECEIVE, 1, 2)};
    const char *keys[] = {"W1|S2", "W2|S1", "W1|S", "W1|S1|", "W1|S1 ", "S1|W1", "", "W1S1"};
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            int err = fx_apply_key(fx, keys[k], &recs[i]);
            if (err != HF_ERR_INVAL)
                fail_msg("%s keyed \"%s\" was accepted", hf_rec_type_name(recs[i].type), keys[k]);
            assert_non_null(strstr(fx->reject_reason, "\"W1|S1\""));
        }
    expect_counter(fx, "W1", "S1", 10, 1, 0, 0);
    assert_int_equal(fx_hold_status(fx, "r1", 0, "W1", "S1"), HF_HOLD_HELD);
}

static void test_ids_containing_the_separator_are_rejected_even_when_the_key_matches(void **state)
{
    stage_ctx_t *fx = *state;
    /* Keyed exactly "warehouse|sku" of the body, yet ambiguous: "W|1" + "S" and
     * "W" + "1|S" give the same key. */
    const char *ws[][2] = {{"W|1", "S"}, {"W", "1|S"}, {"", "S"}, {"W", ""}, {"W\t", "S"}};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        const char *w = ws[i][0], *s = ws[i][1];
        char key[COUNTER_KEY_MAX];
        snprintf(key, sizeof key, "%s|%s", w, s);
        hf_record_t recs[] = {feed_rec(w, s, HF_FEED_RECEIVE, 5, 1), hold_rec("r1", 0, w, s, 1),
                              commit_rec("r1", 0, w, s), release_rec("r1", 0, w, s)};
        for (size_t k = 0; k < sizeof recs / sizeof recs[0]; k++) {
            int err = fx_apply_key(fx, key, &recs[k]);
            if (err != HF_ERR_INVAL)
                fail_msg("%s for \"%s\"/\"%s\" was accepted", hf_rec_type_name(recs[k].type), w, s);
        }
    }
    assert_int_equal(state_buf_count(fx->buf), 0);
}

/* ======================================================================
 * Batch end
 * ====================================================================== */

/* ---- the tick: settled holds are forgotten after their retention */

#define HOLD_RETENTION_MS ((int64_t)HF_HOLD_RETENTION_DEFAULT_MS) /* no config in the fake */

static bool fx_hold_exists(stage_ctx_t *fx, const char *rid, int32_t attempt, const char *w,
                           const char *s)
{
    char pk[COUNTER_KEY_MAX], key[COUNTER_KEY_MAX];
    pair_key(pk, w, s);
    fx->partition = fake_stage_partition_of(pk);
    size_t len = hold_key(key, w, s, attempt, rid);
    hf_record_t rec;
    return stage_get(fx, key, len, &rec) == HF_OK;
}

static void test_sweep_slice_paces_a_pass_to_a_quarter_of_the_retention(void **state)
{
    const int64_t hour_ms = 3600 * 1000;
    assert_int_equal(counter_sweep_slice(-1, hour_ms, 1000), HF_HOLD_SWEEP_FIRST_PASS);
    assert_int_equal(counter_sweep_slice(1000, hour_ms, 1000), HF_HOLD_SWEEP_SCAN_MIN);
    /* 3.6 M holds, 1 h: 4 passes an hour means 4,000 a second. */
    size_t s = counter_sweep_slice(3600000, hour_ms, 1000);
    assert_true(s >= 4000 && s <= 4001);
    assert_int_equal(counter_sweep_slice(1000000000, hour_ms, 1000), HF_HOLD_SWEEP_SCAN_MAX);
    /* A shorter retention sweeps faster. */
    assert_true(counter_sweep_slice(3600000, hour_ms / 2, 1000) > s);
}

/* Runs the counter's tick on every partition, one transaction. */
static void fx_tick(stage_ctx_t *fx)
{
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        fx->partition = p;
        assert_int_equal(counter_stage()->tick(fx), HF_OK);
    }
    fx_end_batch(fx);
}

static void test_tick_forgets_settled_holds_after_retention_and_never_open_ones(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    do_hold(fx, "committed", 0, "W1", "S1", 1);
    do_commit(fx, "committed", 0, "W1", "S1");
    do_hold(fx, "released", 0, "W1", "S1", 1);
    do_release(fx, "released", 0, "W1", "S1");
    do_hold(fx, "refused", 0, "W1", "S1", 100);
    do_hold(fx, "held", 0, "W1", "S1", 2);
    do_hold(fx, "revoking", 0, "W1", "S1", 3);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_COUNT, 4, 2), HF_OK); /* revokes the newest */
    fx_end_batch(fx);
    assert_int_equal(fx_hold_status(fx, "revoking", 0, "W1", "S1"), HF_HOLD_REVOKING);
    hf_counter_state_t before = fx_counter(fx, "W1", "S1");

    fx->now_ms += HOLD_RETENTION_MS - 100; /* not yet */
    fx_tick(fx);
    assert_true(fx_hold_exists(fx, "committed", 0, "W1", "S1"));
    fx->now_ms += 100;
    fx_tick(fx);
    assert_false(fx_hold_exists(fx, "committed", 0, "W1", "S1"));
    assert_false(fx_hold_exists(fx, "released", 0, "W1", "S1"));
    assert_false(fx_hold_exists(fx, "refused", 0, "W1", "S1"));
    assert_true(fx_hold_exists(fx, "held", 0, "W1", "S1"));
    assert_true(fx_hold_exists(fx, "revoking", 0, "W1", "S1"));
    /* The counters are untouched and still agree with the open holds. */
    hf_counter_state_t after = fx_counter(fx, "W1", "S1");
    assert_memory_equal(&before, &after, sizeof before);
    fx_check_pair(fx, "W1", "S1");
    /* Open holds settle as usual afterwards. */
    hf_counter_result_t r = do_release(fx, "revoking", 0, "W1", "S1");
    assert_int_equal(r.outcome, HF_OUTCOME_OK);
    fx_end_batch(fx);
    fx_check_pair(fx, "W1", "S1");
}

static void test_tick_sweeps_a_bounded_slice_and_resumes_where_it_stopped(void **state)
{
    stage_ctx_t *fx = *state;
    const int n = 3 * HF_HOLD_SWEEP_FIRST_PASS + 17;
    stock(fx, "W1", "S1", n, 1);
    char rid[32];
    for (int i = 0; i < n; i++) {
        snprintf(rid, sizeof rid, "r%05d", i);
        do_hold(fx, rid, 0, "W1", "S1", 1);
        do_release(fx, rid, 0, "W1", "S1");
    }
    fx_end_batch(fx);
    fx->now_ms += HOLD_RETENTION_MS;
    size_t deleted_per_tick[8] = {0};
    int gone = 0;
    for (int t = 0; t < 8 && gone < n; t++) {
        fx_tick(fx);
        int now_gone = 0;
        for (int i = 0; i < n; i++) {
            snprintf(rid, sizeof rid, "r%05d", i);
            now_gone += !fx_hold_exists(fx, rid, 0, "W1", "S1");
        }
        deleted_per_tick[t] = (size_t)(now_gone - gone);
        gone = now_gone;
    }
    assert_int_equal(gone, n);
    for (int t = 0; t < 3; t++) /* each tick of a first pass examines its slice, moves on */
        assert_int_equal(deleted_per_tick[t], HF_HOLD_SWEEP_FIRST_PASS);
    assert_int_equal(deleted_per_tick[3], 17);
    expect_counter(fx, "W1", "S1", n, 0, 0, 0);
}

static void test_batch_end_emits_one_stock_level_per_changed_pair_with_its_last_value(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    stock(fx, "W2", "S1", 10, 1);
    stock(fx, "W1", "S2", 1, 1);
    stock(fx, "W1", "S3", 1, 1);
    (void)do_hold(fx, "x", 0, "W1", "S3", 1);
    fx_end_batch(fx);
    fx_clear_emits(fx);

    /* One transaction: W1|S1 changes five times, W2|S1 once; W1|S2 sees only an
     * INSUFFICIENT hold and a duplicate feed; W1|S3 only repeats. */
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_RECEIVE, 5, 2), HF_OK);
    (void)do_hold(fx, "a", 0, "W1", "S1", 3);
    (void)do_hold(fx, "b", 0, "W1", "S1", 2);
    (void)do_commit(fx, "a", 0, "W1", "S1");
    (void)do_release(fx, "b", 0, "W1", "S1");
    (void)do_hold(fx, "c", 0, "W2", "S1", 4);
    (void)do_hold(fx, "d", 0, "W1", "S2", 2);
    assert_int_equal(do_feed(fx, "W1", "S2", HF_FEED_RECEIVE, 9, 1), HF_OK);
    (void)do_hold(fx, "x", 0, "W1", "S3", 1);
    (void)do_commit(fx, "nobody", 0, "W1", "S3");
    hf_record_t bad = hold_rec("e", 0, "W1", "S3", 0);
    assert_int_equal(fx_apply(fx, &bad), HF_ERR_INVAL);

    hf_counter_state_t c1 = fx_counter(fx, "W1", "S1"), c2 = fx_counter(fx, "W2", "S1");
    size_t first = fx_end_batch(fx);
    assert_int_equal(fx->emits_count - first, 2);
    hf_stock_level_t sl;
    assert_int_equal(stock_levels_for(fx, first, "W1", "S1", &sl), 1);
    assert_string_equal(sl.warehouse_id, "W1");
    assert_int_equal(sl.on_hand, 12);
    assert_int_equal(sl.reserved, 0);
    assert_int_equal(sl.available, 12);
    assert_int_equal(sl.shortfall, 0);
    assert_int_equal(sl.version, c1.version);
    assert_int_equal(stock_levels_for(fx, first, "W2", "S1", &sl), 1);
    assert_int_equal(sl.on_hand, 10);
    assert_int_equal(sl.reserved, 4);
    assert_int_equal(sl.available, 6);
    assert_int_equal(sl.version, c2.version);
    assert_int_equal(stock_levels_for(fx, first, "W1", "S2", NULL), 0);
    assert_int_equal(stock_levels_for(fx, first, "W1", "S3", NULL), 0);

    /* A transaction that changed nothing publishes nothing. */
    fx_clear_emits(fx);
    (void)do_hold(fx, "a", 0, "W1", "S1", 3);
    first = fx_end_batch(fx);
    assert_int_equal(fx->emits_count, first);
}

static void test_stock_level_reports_safety_stock_and_clamps_available_at_zero(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 5, 1);
    (void)do_hold(fx, "a", 0, "W1", "S1", 3);
    assert_int_equal(do_feed(fx, "W1", "S1", HF_FEED_SAFETY_STOCK, 4, 2), HF_OK);
    size_t first = fx_end_batch(fx);
    hf_stock_level_t sl;
    assert_int_equal(stock_levels_for(fx, first, "W1", "S1", &sl), 1);
    assert_int_equal(sl.on_hand, 5);
    assert_int_equal(sl.reserved, 3);
    assert_int_equal(sl.safety_stock, 4);
    assert_int_equal(sl.available, 0);
    assert_int_equal(sl.shortfall, 0);
}

/* ======================================================================
 * Randomized run against an independent model (DESIGN.md section 3)
 * ====================================================================== */

enum { M_PAIRS = 3, M_RIDS = 1000, M_ATTEMPTS = 3 };
enum { M_NONE = 0, M_HELD, M_COMMITTED, M_RELEASED, M_REVOKING, M_REFUSED };

typedef struct {
    int64_t on_hand, reserved, safety, revoking, version, feed_seq;
    bool changed; /* in the current transaction */
} m_pair_t;

typedef struct {
    int status; /* M_NONE = never seen */
    int64_t qty, seq, avail;
    hf_outcome_t outcome;
} m_hold_t;

typedef struct {
    m_pair_t pairs[M_PAIRS];
    m_hold_t holds[M_PAIRS][M_RIDS][M_ATTEMPTS];
} model_t;

typedef struct {
    hf_cmd_t cmd;
    hf_outcome_t outcome;
    int rid, attempt;
    int64_t qty, avail;
} m_result_t;

static const char *const m_wh[M_PAIRS] = {"W1", "W1", "W2"};
static const char *const m_sku[M_PAIRS] = {"S1", "S2", "S1"};

static uint64_t rng_state, rng_seed;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int64_t rng_in(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1));
}

static int64_t m_avail(const m_pair_t *p)
{
    return p->on_hand - p->reserved - p->safety;
}
static int64_t m_avail_reported(const m_pair_t *p)
{
    return m_avail(p) > 0 ? m_avail(p) : 0;
}

static m_result_t m_hold(model_t *m, int pi, int rid, int att, int64_t qty)
{
    m_pair_t *p = &m->pairs[pi];
    m_hold_t *h = &m->holds[pi][rid][att];
    if (h->status == M_NONE) {
        h->qty = qty;
        if (m_avail(p) >= qty) {
            p->reserved += qty;
            p->version++;
            p->changed = true;
            h->status = M_HELD;
            h->seq = p->version;
            h->outcome = HF_OUTCOME_OK;
        } else {
            h->status = M_REFUSED;
            h->outcome = HF_OUTCOME_INSUFFICIENT;
        }
        h->avail = m_avail_reported(p);
    }
    return (m_result_t){HF_CMD_HOLD, h->outcome, rid, att, h->qty, h->avail};
}

static m_result_t m_settle(model_t *m, int pi, int rid, int att, bool commit)
{
    m_pair_t *p = &m->pairs[pi];
    m_hold_t *h = &m->holds[pi][rid][att];
    hf_outcome_t o = HF_OUTCOME_CONFLICT;
    int64_t qty = h->status == M_NONE ? 0 : h->qty;
    switch (h->status) {
    case M_NONE:
        o = HF_OUTCOME_NOT_FOUND;
        break;
    case M_HELD:
        p->reserved -= h->qty;
        if (commit)
            p->on_hand -= h->qty;
        h->status = commit ? M_COMMITTED : M_RELEASED;
        p->version++;
        p->changed = true;
        o = HF_OUTCOME_OK;
        break;
    case M_REVOKING:
        if (commit) {
            o = HF_OUTCOME_REVOKED;
        } else {
            p->reserved -= h->qty;
            p->revoking -= h->qty;
            h->status = M_RELEASED;
            p->version++;
            p->changed = true;
            o = HF_OUTCOME_OK;
        }
        break;
    case M_COMMITTED:
        o = commit ? HF_OUTCOME_OK : HF_OUTCOME_CONFLICT;
        break;
    case M_RELEASED:
        o = commit ? HF_OUTCOME_CONFLICT : HF_OUTCOME_OK;
        break;
    case M_REFUSED:
        o = commit ? HF_OUTCOME_CONFLICT : HF_OUTCOME_OK;
        break;
    }
    return (m_result_t){
        commit ? HF_CMD_COMMIT : HF_CMD_RELEASE, o, rid, att, qty, m_avail_reported(p)};
}

/* Applies a feed; returns -1 if it must be rejected, else the number of
 * SHORTFALL results written to out (newest hold first). */
static int m_feed(model_t *m, int pi, hf_feed_kind_t kind, int64_t qty, int64_t seq,
                  m_result_t *out, int out_max)
{
    m_pair_t *p = &m->pairs[pi];
    if (seq <= p->feed_seq)
        return 0;
    int64_t on_hand = p->on_hand;
    switch (kind) {
    case HF_FEED_RECEIVE:
    case HF_FEED_ADJUST:
        on_hand += qty;
        break;
    case HF_FEED_COUNT:
        on_hand = qty;
        break;
    default:
        break;
    }
    if (on_hand < 0)
        return -1;
    p->on_hand = on_hand;
    if (kind == HF_FEED_SAFETY_STOCK)
        p->safety = qty;
    p->feed_seq = seq;
    int n = 0;
    int64_t shortfall = p->reserved - p->revoking - p->on_hand;
    while (shortfall > 0) {
        /* The newest HELD hold of this pair. */
        m_hold_t *newest = NULL;
        int nr = 0, na = 0;
        for (int r = 0; r < M_RIDS; r++)
            for (int a = 0; a < M_ATTEMPTS; a++) {
                m_hold_t *h = &m->holds[pi][r][a];
                if (h->status == M_HELD && (!newest || h->seq > newest->seq))
                    newest = h, nr = r, na = a;
            }
        assert_non_null(newest);
        newest->status = M_REVOKING;
        p->revoking += newest->qty;
        shortfall -= newest->qty;
        assert_true(n < out_max);
        out[n++] = (m_result_t){HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, nr, na, newest->qty, 0};
    }
    p->version++;
    p->changed = true;
    return n;
}

static void m_expect(const stage_ctx_t *fx, size_t i, int pi, const m_result_t *want, int step)
{
    char rid[16];
    snprintf(rid, sizeof rid, "r%04d", want->rid);
    const hf_counter_result_t *r = result_at(fx, i);
    if (strcmp(r->reservation_id, rid) != 0 || r->attempt != want->attempt ||
        r->command != want->cmd || r->outcome != want->outcome || r->qty != want->qty ||
        r->available != want->avail || strcmp(r->warehouse_id, m_wh[pi]) != 0 ||
        strcmp(r->sku, m_sku[pi]) != 0)
        fail_msg("step %d (seed %llu): model says %s/%d %s %s qty %lld avail %lld "
                 "on %s|%s; "
                 "handler said %s/%d %s %s qty %lld avail %lld on %s|%s",
                 step, (unsigned long long)rng_seed, rid, want->attempt, hf_cmd_name(want->cmd),
                 hf_outcome_name(want->outcome), (long long)want->qty, (long long)want->avail,
                 m_wh[pi], m_sku[pi], r->reservation_id, r->attempt, hf_cmd_name(r->command),
                 hf_outcome_name(r->outcome), (long long)r->qty, (long long)r->available,
                 r->warehouse_id, r->sku);
}

static void m_compare_counter(stage_ctx_t *fx, const model_t *m, int pi, int step)
{
    const m_pair_t *p = &m->pairs[pi];
    hf_counter_state_t c = fx_counter(fx, m_wh[pi], m_sku[pi]);
    if (c.on_hand != p->on_hand || c.reserved != p->reserved || c.safety_stock != p->safety ||
        c.revoking != p->revoking || c.version != p->version || c.feed_seq != p->feed_seq)
        fail_msg("step %d %s|%s: model on_hand %lld reserved %lld safety %lld revoking "
                 "%lld "
                 "version %lld feed_seq %lld; state %lld %lld %lld %lld %lld %lld",
                 step, m_wh[pi], m_sku[pi], (long long)p->on_hand, (long long)p->reserved,
                 (long long)p->safety, (long long)p->revoking, (long long)p->version,
                 (long long)p->feed_seq, (long long)c.on_hand, (long long)c.reserved,
                 (long long)c.safety_stock, (long long)c.revoking, (long long)c.version,
                 (long long)c.feed_seq);
}

static void m_end_batch(stage_ctx_t *fx, model_t *m)
{
    size_t first = fx_end_batch(fx);
    size_t changed = 0;
    for (int pi = 0; pi < M_PAIRS; pi++) {
        m_pair_t *p = &m->pairs[pi];
        hf_stock_level_t sl = {0};
        size_t n = stock_levels_for(fx, first, m_wh[pi], m_sku[pi], &sl);
        assert_int_equal(n, p->changed ? 1 : 0);
        if (p->changed) {
            changed++;
            assert_int_equal(sl.on_hand, p->on_hand);
            assert_int_equal(sl.reserved, p->reserved);
            assert_int_equal(sl.safety_stock, p->safety);
            assert_int_equal(sl.available, m_avail_reported(p));
            assert_int_equal(sl.shortfall, p->revoking);
            assert_int_equal(sl.version, p->version);
        }
        p->changed = false;
    }
    assert_int_equal(fx->emits_count - first, changed);
    fx_clear_emits(fx);
}

/* One randomized run: the model, what was sent, and what was reached. */
typedef struct {
    model_t m;
    int64_t next_seq[M_PAIRS];
    int sent[4096][3]; /* (pair, rid, attempt) of every hold sent so far */
    size_t sent_count;
    int rejected, revoked_by_feed, outcomes[HF_OUTCOME__COUNT];
} run_t;

/* Mostly holds the counter has seen (retries and settlements), sometimes a new
 * attempt of one (the gateway re-routes), else any id (new, or NOT_FOUND). */
static void run_pick(run_t *run, int *pi, int *rid, int *att)
{
    *pi = (int)rng_in(0, M_PAIRS - 1);
    *rid = (int)rng_in(0, M_RIDS - 1);
    *att = (int)rng_in(0, M_ATTEMPTS - 1);
    if (run->sent_count == 0 || rng_in(0, 9) >= 7)
        return;
    const int *h = run->sent[rng() % run->sent_count];
    *pi = h[0], *rid = h[1], *att = h[2];
    if (rng_in(0, 9) == 0 && *att + 1 < M_ATTEMPTS)
        (*att)++;
}

static void run_invalid(stage_ctx_t *fx, run_t *run, int pi, const char *rid, int att)
{
    const char *w = m_wh[pi], *s = m_sku[pi];
    int kind = (int)rng_in(0, 2);
    hf_record_t r = kind == 0   ? hold_rec(rid, att, w, s, 0)
                    : kind == 1 ? commit_rec(rid, -1, w, s)
                                : feed_rec(w, s, HF_FEED_RECEIVE, 1, run->next_seq[pi]);
    int err = kind == 2 ? fx_apply_key(fx, "W9|S9", &r) : fx_apply(fx, &r);
    assert_int_equal(err, HF_ERR_INVAL);
    run->rejected++;
}

static void run_hold(stage_ctx_t *fx, run_t *run, int pi, int rid, int att, int step)
{
    char rid_s[16];
    snprintf(rid_s, sizeof rid_s, "r%04d", rid);
    const m_hold_t *h = &run->m.holds[pi][rid][att];
    int64_t qty = rng_in(1, 6);
    if (h->status != M_NONE && rng_in(0, 1))
        qty = h->qty; /* a faithful retry; otherwise one with another qty */
    if (h->status == M_NONE && run->sent_count < 4096) {
        int *e = run->sent[run->sent_count++];
        e[0] = pi, e[1] = rid, e[2] = att;
    }
    size_t first = fx->emits_count;
    m_result_t want = m_hold(&run->m, pi, rid, att, qty);
    (void)do_hold(fx, rid_s, att, m_wh[pi], m_sku[pi], qty);
    m_expect(fx, first, pi, &want, step);
    run->outcomes[want.outcome]++;
}

static void run_settle(stage_ctx_t *fx, run_t *run, int pi, int rid, int att, bool commit, int step)
{
    char rid_s[16];
    snprintf(rid_s, sizeof rid_s, "r%04d", rid);
    size_t first = fx->emits_count;
    m_result_t want = m_settle(&run->m, pi, rid, att, commit);
    if (commit)
        (void)do_commit(fx, rid_s, att, m_wh[pi], m_sku[pi]);
    else
        (void)do_release(fx, rid_s, att, m_wh[pi], m_sku[pi]);
    m_expect(fx, first, pi, &want, step);
    run->outcomes[want.outcome]++;
}

static void run_feed(stage_ctx_t *fx, run_t *run, int pi, int step)
{
    hf_feed_kind_t kind;
    int64_t qty;
    int k = (int)rng_in(0, 9);
    if (k < 4)
        kind = HF_FEED_RECEIVE, qty = rng_in(1, 12);
    else if (k < 6)
        kind = HF_FEED_ADJUST, qty = rng_in(-10, 6);
    else if (k < 9)
        kind = HF_FEED_COUNT, qty = rng_in(0, 14);
    else
        kind = HF_FEED_SAFETY_STOCK, qty = rng_in(0, 4);
    int64_t seq = run->next_seq[pi];
    if (seq > 1 && rng_in(0, 9) == 0)
        seq = rng_in(1, seq - 1); /* a replayed or stale feed */

    static m_result_t want[M_RIDS * M_ATTEMPTS];
    size_t first = fx->emits_count;
    int n = m_feed(&run->m, pi, kind, qty, seq, want, M_RIDS * M_ATTEMPTS);
    hf_record_t r = feed_rec(m_wh[pi], m_sku[pi], kind, qty, seq);
    int err = fx_apply(fx, &r);
    if (n < 0) {
        assert_int_equal(err, HF_ERR_INVAL);
        assert_non_null(strstr(fx->reject_reason, "negative"));
        run->rejected++;
        return;
    }
    if (err != HF_OK)
        fail_msg("step %d: feed %s %lld seq %lld rejected: %s", step, hf_feed_kind_name(kind),
                 (long long)qty, (long long)seq, fx->reject_reason);
    if (seq == run->next_seq[pi])
        run->next_seq[pi]++;
    assert_int_equal(fx->emits_count - first, (size_t)n);
    for (int i = 0; i < n; i++)
        m_expect(fx, first + (size_t)i, pi, &want[i], step);
    run->revoked_by_feed += n;
}

static void test_random_commands_match_an_independent_model(void **state)
{
    stage_ctx_t *fx = *state;
    static run_t run;
    memset(&run, 0, sizeof run);
    const char *env = getenv("HF_TEST_SEED");
    rng_seed = env ? strtoull(env, NULL, 10) : 20240611ULL;
    rng_state = rng_seed ? rng_seed : 1;
    for (int p = 0; p < M_PAIRS; p++)
        run.next_seq[p] = 1;

    size_t batch_left = 0;
    for (int step = 0; step < 5000; step++) {
        if (batch_left == 0)
            batch_left = (size_t)rng_in(1, 25); /* records per transaction */
        int pi, rid, att;
        run_pick(&run, &pi, &rid, &att);
        char rid_s[16];
        snprintf(rid_s, sizeof rid_s, "r%04d", rid);
        int dice = (int)rng_in(0, 99);
        if (dice < 3)
            run_invalid(fx, &run, pi, rid_s, att);
        else if (dice < 40)
            run_hold(fx, &run, pi, rid, att, step);
        else if (dice < 55)
            run_settle(fx, &run, pi, rid, att, true, step);
        else if (dice < 72)
            run_settle(fx, &run, pi, rid, att, false, step);
        else
            run_feed(fx, &run, pi, step);
        m_compare_counter(fx, &run.m, pi, step);
        if (step % 500 == 499)
            for (int p = 0; p < M_PAIRS; p++)
                fx_check_pair(fx, m_wh[p], m_sku[p]);
        if (--batch_left == 0)
            m_end_batch(fx, &run.m);
    }
    m_end_batch(fx, &run.m);
    for (int p = 0; p < M_PAIRS; p++) {
        m_compare_counter(fx, &run.m, p, 5000);
        fx_check_pair(fx, m_wh[p], m_sku[p]);
    }
    const int *o = run.outcomes;
    print_message("seed %llu: %d rejected, %d revoked by feeds, OK %d, INSUFFICIENT %d, "
                  "CONFLICT %d, NOT_FOUND %d, REVOKED %d\n",
                  (unsigned long long)rng_seed, run.rejected, run.revoked_by_feed, o[HF_OUTCOME_OK],
                  o[HF_OUTCOME_INSUFFICIENT], o[HF_OUTCOME_CONFLICT], o[HF_OUTCOME_NOT_FOUND],
                  o[HF_OUTCOME_REVOKED]);
    /* The run must have reached every interesting branch, or it proves little. */
    assert_true(run.rejected > 0);
    assert_true(run.revoked_by_feed > 0);
    const hf_outcome_t reached[] = {HF_OUTCOME_OK, HF_OUTCOME_INSUFFICIENT, HF_OUTCOME_CONFLICT,
                                    HF_OUTCOME_NOT_FOUND, HF_OUTCOME_REVOKED};
    for (size_t i = 0; i < sizeof reached / sizeof reached[0]; i++)
        if (o[reached[i]] == 0)
            fail_msg("seed %llu never produced %s", (unsigned long long)rng_seed,
                     hf_outcome_name(reached[i]));
}

/* ---- two hops: a hold that answers its Reserve (Hold.answer_reserve) */

static hf_record_t answering_hold(const char *rid, const char *reply_to, int64_t qty)
{
    hf_record_t r = hold_rec(rid, 0, "W1", "S1", qty);
    r.u.hold.answer_reserve = true;
    snprintf(r.u.hold.idempotency_key, sizeof r.u.hold.idempotency_key, "cart-%s", rid);
    snprintf(r.u.hold.reply_to, sizeof r.u.hold.reply_to, "%s", reply_to);
    r.u.hold.expires_at_ms = 1700000900000LL;
    snprintf(r.u.hold.api_key_id, sizeof r.u.hold.api_key_id, "key-%s", rid);
    return r;
}

static void
test_a_hold_that_answers_its_reserve_emits_held_and_the_ledger_event_with_it(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 10, 1);
    size_t before = fx->emits_count;
    hf_record_t h = answering_hold("a1", "holdfast.replies.shop-7", 3);
    assert_int_equal(fx_apply(fx, &h), HF_OK);
    assert_int_equal(fx->emits_count, before + 3); /* reply, ledger event, result */
    hf_reply_t reply = {0};
    hf_ledger_event_t held = {0};
    hf_counter_result_t result = {0};
    int seen = 0; /* one bit per kind of output */
    for (size_t i = before; i < fx->emits_count; i++) {
        const fake_stage_emit_t *e = &fx->emits[i];
        if (e->rec.type == HF_REC_REPLY) {
            assert_string_equal(e->topic, "holdfast.replies.shop-7");
            reply = e->rec.u.reply;
            seen |= 1;
        } else if (e->rec.type == HF_REC_LEDGER_EVENT) {
            assert_int_equal(e->topic_id, HF_T_LEDGER);
            held = e->rec.u.ledger_event;
            seen |= 2;
        } else {
            result = e->rec.u.counter_result;
            seen |= 4;
        }
        assert_int_equal(e->key_len, 2);
        assert_memory_equal(e->key, "a1", 2); /* all keyed by the reservation */
    }
    assert_int_equal(seen, 7);
    assert_int_equal(reply.outcome, HF_REPLY_HELD);
    assert_string_equal(reply.idempotency_key, "cart-a1");
    assert_int_equal(reply.allocations_count, 1);
    assert_string_equal(reply.allocations[0].warehouse_id, "W1");
    assert_int_equal(reply.allocations[0].qty, 3);
    assert_int_equal(reply.expires_at_ms, 1700000900000LL);
    assert_int_equal(held.kind, HF_LEDGER_HELD);
    assert_int_equal(held.lines_count, 1);
    assert_int_equal(held.lines[0].qty, 3);
    assert_int_equal(held.expires_at_ms, 1700000900000LL);
    assert_string_equal(held.api_key_id, "key-a1"); /* who reserved, from the Hold */
    assert_int_equal(result.outcome, HF_OUTCOME_OK);
    expect_counter(fx, "W1", "S1", 10, 3, 0, 0);
}

static void test_a_refused_or_repeated_answering_hold_emits_only_its_result(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "W1", "S1", 2, 1);
    hf_record_t h = answering_hold("a2", "", 1);
    size_t before = fx->emits_count;
    assert_int_equal(fx_apply(fx, &h), HF_OK);
    assert_int_equal(fx->emits_count, before + 3);
    assert_string_equal(fx->emits[before].topic, "holdfast.replies"); /* the default topic */
    fx_end_batch(fx);
    /* The gateway asks again (a lost result): the first answer stands, once. */
    hf_counter_result_t again = fx_one_result(fx, &h);
    assert_int_equal(again.outcome, HF_OUTCOME_OK);
    /* One that does not fit is the gateway's to answer: it routes again. */
    hf_record_t big = answering_hold("a3", "", 5);
    hf_counter_result_t refused = fx_one_result(fx, &big);
    assert_int_equal(refused.outcome, HF_OUTCOME_INSUFFICIENT);
    expect_counter(fx, "W1", "S1", 2, 1, 0, 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    log_set_level(HF_LOG_ERROR); /* shortfalls log warnings by design */
    const struct CMUnitTest tests[] = {
        T(test_hold_within_available_is_ok_with_available_after_and_grows_reserved),
        T(test_hold_over_available_is_insufficient_with_current_available_and_reserves_nothing),
        T(test_hold_on_a_pair_never_stocked_is_insufficient_with_zero),
        T(test_hold_of_exactly_available_succeeds_and_one_more_unit_fails),
        T(test_repeated_ok_hold_reemits_original_answer_without_reserving_again),
        T(test_a_hold_that_answers_its_reserve_emits_held_and_the_ledger_event_with_it),
        T(test_a_refused_or_repeated_answering_hold_emits_only_its_result),
        T(test_repeated_insufficient_hold_reemits_insufficient_even_after_restock),
        T(test_new_attempt_of_a_reservation_is_a_new_hold),
        T(test_invalid_hold_is_rejected_without_writing),
        T(test_commit_of_held_hold_takes_its_units_from_on_hand_and_reserved),
        T(test_repeated_commit_answers_ok_without_changing_the_counter),
        T(test_commit_of_released_hold_is_conflict),
        T(test_commit_of_unknown_hold_is_not_found),
        T(test_commit_of_refused_hold_is_conflict),
        T(test_release_of_held_hold_returns_its_units_to_available),
        T(test_repeated_release_answers_ok_without_changing_the_counter),
        T(test_release_of_committed_hold_is_conflict_and_the_sale_stands),
        T(test_release_of_refused_hold_is_ok_with_nothing_given_back),
        T(test_release_of_unknown_hold_is_not_found),
        T(test_invalid_commit_and_release_are_rejected_without_writing),
        T(test_feed_receive_adds_to_on_hand),
        T(test_feed_adjust_adds_a_signed_delta),
        T(test_feed_count_sets_on_hand),
        T(test_feed_safety_stock_gates_new_holds),
        T(test_feed_with_duplicate_or_older_seq_is_ignored),
        T(test_feed_adjust_that_would_make_on_hand_negative_is_rejected),
        T(test_feed_with_invalid_qty_seq_or_kind_is_rejected),
        T(test_count_taken_before_a_sale_and_applied_after_it_does_not_give_the_unit_back),
        T(test_count_as_of_revokes_holds_the_sold_units_no_longer_cover),
        T(test_bad_as_of_points_are_rejected_naming_what_to_send),
        T(test_feed_seq_jump_beyond_the_bound_is_rejected_and_an_epoch_restarts_numbering),
        T(test_count_below_reserved_revokes_the_newest_holds_first),
        T(test_restore_rebuilds_the_open_hold_index_from_the_hold_records),
        T(test_commit_of_a_revoked_hold_is_revoked_and_changes_nothing),
        T(test_releasing_revoked_holds_brings_revoking_and_reserved_down),
        T(test_hold_during_shortfall_is_insufficient),
        T(test_deeper_count_revokes_only_holds_not_already_revoking),
        T(test_adjust_below_reserved_revokes_and_committed_holds_are_never_revoked),
        T(test_shortfall_on_one_pair_leaves_pairs_with_a_longer_sku_alone),
        T(test_count_to_zero_revokes_every_open_hold_even_beyond_the_revoke_limit),
        T(test_ids_at_their_length_bounds_survive_every_key_and_output),
        T(test_record_keyed_other_than_its_pair_is_rejected_naming_the_expected_key),
        T(test_ids_containing_the_separator_are_rejected_even_when_the_key_matches),
        T(test_tick_forgets_settled_holds_after_retention_and_never_open_ones),
        T(test_tick_sweeps_a_bounded_slice_and_resumes_where_it_stopped),
        T(test_sweep_slice_paces_a_pass_to_a_quarter_of_the_retention),
        T(test_batch_end_emits_one_stock_level_per_changed_pair_with_its_last_value),
        T(test_stock_level_reports_safety_stock_and_clamps_available_at_zero),
        T(test_random_commands_match_an_independent_model),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    codec_shutdown();
    return failed;
}
