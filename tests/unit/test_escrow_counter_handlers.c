/* Unit tests of escrow at the counter (processor/counter/allotment*.c and the
 * recall in stock_feed.c), over the shared fake stage of fake/fake_stage.h: a
 * real state store, the real codec, every output captured. DESIGN.md section 5
 * "Escrow": an allotment's units are out of the pair's free stock; a grant
 * takes at most escrow_grant_share_pct of it; a sale leaves on_hand and the
 * allotment; a shortfall recalls allotments before it revokes direct holds, and
 * a sale of an allotment under recall is answered REVOKED. After every step the
 * stored pair is checked against the conservation rules (fx_check). */
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

#define W        "W1"
#define SKU      "HOT-1"
#define SHARE    50
#define HOLDER_A 1
#define HOLDER_B 2
#define KEY_A    "res-a-holder"
#define KEY_B    "res-b-holder"

static int64_t feed_seq_next; /* the pair's last StockFeed feed_seq (reset per test) */

static int setup(void **state)
{
    feed_seq_next = 0;
    stage_ctx_t *fx = fake_stage_new("escrow_counter", 1700000000000LL);
    hf_config_t cfg;
    config_defaults(&cfg);
    cfg.escrow_grant_share_pct = SHARE;
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

/* ---- driving: one record, one transaction (batch_end, then commit) */

static int fx_apply(stage_ctx_t *fx, const hf_record_t *rec)
{
    char key[COUNTER_KEY_MAX];
    pair_key(key, W, SKU);
    fx->now_ms++;
    int err = fake_stage_apply(fx, counter_stage(), key, rec);
    if (err == HF_OK) {
        assert_int_equal(counter_stage()->batch_end(fx), HF_OK);
        fake_stage_commit(fx);
    } else {
        state_buf_clear(fx->buf);
    }
    return err;
}

static hf_record_t request_rec(int32_t holder, const char *holder_key, int64_t seq, int64_t want,
                               int64_t ret, int64_t balance)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_ALLOTMENT_REQUEST;
    hf_allotment_request_t *q = &r.u.allotment_request;
    snprintf(q->warehouse_id, sizeof q->warehouse_id, "%s", W);
    snprintf(q->sku, sizeof q->sku, "%s", SKU);
    q->holder_partition = holder;
    snprintf(q->holder_key, sizeof q->holder_key, "%s", holder_key);
    q->seq = seq;
    q->want_qty = want;
    q->return_qty = ret;
    q->balance = balance;
    q->sent_at_ms = 1;
    return r;
}

static hf_record_t sale_rec(int32_t holder, const char *rid, int64_t qty, int64_t balance)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_ALLOTMENT_SALE;
    hf_allotment_sale_t *s = &r.u.allotment_sale;
    snprintf(s->warehouse_id, sizeof s->warehouse_id, "%s", W);
    snprintf(s->sku, sizeof s->sku, "%s", SKU);
    s->holder_partition = holder;
    snprintf(s->reservation_id, sizeof s->reservation_id, "%s", rid);
    s->attempt = 0;
    s->qty = qty;
    s->balance = balance;
    s->sold_at_ms = 1;
    return r;
}

static void feed(stage_ctx_t *fx, hf_feed_kind_t kind, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_STOCK_FEED;
    snprintf(r.u.stock_feed.warehouse_id, sizeof r.u.stock_feed.warehouse_id, "%s", W);
    snprintf(r.u.stock_feed.sku, sizeof r.u.stock_feed.sku, "%s", SKU);
    r.u.stock_feed.kind = kind;
    r.u.stock_feed.qty = qty;
    r.u.stock_feed.feed_seq = ++feed_seq_next;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
}

static hf_counter_result_t hold(stage_ctx_t *fx, const char *rid, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_HOLD;
    snprintf(r.u.hold.reservation_id, sizeof r.u.hold.reservation_id, "%s", rid);
    snprintf(r.u.hold.warehouse_id, sizeof r.u.hold.warehouse_id, "%s", W);
    snprintf(r.u.hold.sku, sizeof r.u.hold.sku, "%s", SKU);
    r.u.hold.qty = qty;
    r.u.hold.issued_at_ms = 1;
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].rec.type == HF_REC_COUNTER_RESULT)
            return fx->emits[i].rec.u.counter_result;
    fail_msg("no CounterResult for the Hold of %s", rid);
    return (hf_counter_result_t){0};
}

/* ---- reading */

static hf_counter_state_t counter(stage_ctx_t *fx)
{
    char pk[COUNTER_KEY_MAX], key[COUNTER_KEY_MAX];
    pair_key(pk, W, SKU);
    fx->partition = fake_stage_partition_of(pk);
    size_t len = counter_key(key, W, SKU);
    hf_record_t rec;
    assert_int_equal(stage_get(fx, key, len, &rec), HF_OK);
    assert_int_equal(rec.type, HF_REC_COUNTER_STATE);
    return rec.u.counter_state;
}

static hf_allotment_state_t allotment(stage_ctx_t *fx, int32_t holder)
{
    (void)counter(fx); /* selects the partition */
    hf_allotment_state_t a;
    assert_int_equal(counter_load_allotment(fx, W, SKU, holder, &a), HF_OK);
    return a;
}

/* The conservation rules of the pair as stored: the counter's own invariants
 * (counter_assert aborts on a breach), allotted = sum of the allotments,
 * recalling and escrow_balance the sums of theirs, promised within on_hand. */
static void fx_check(stage_ctx_t *fx)
{
    hf_counter_state_t c = counter(fx);
    counter_assert(&c);
    int64_t allotted = 0, recalling = 0, reported = 0;
    for (int32_t h = 0; h < 8; h++) {
        hf_allotment_state_t a = allotment(fx, h);
        assert_true(a.allotted >= 0 && a.recalling >= 0 && a.recalling <= a.allotted);
        assert_true(a.reported_balance >= 0 && a.reported_balance <= a.allotted);
        allotted += a.allotted;
        recalling += a.recalling;
        reported += a.reported_balance;
    }
    assert_int_equal(c.allotted, allotted);
    assert_int_equal(c.recalling, recalling);
    assert_int_equal(c.escrow_balance, reported);
    assert_true(c.reserved - c.revoking + c.allotted - c.recalling <= c.on_hand);
}

static size_t count_type(const stage_ctx_t *fx, size_t from, hf_rec_type_t type)
{
    size_t n = 0;
    for (size_t i = from; i < fx->emits_count; i++)
        n += fx->emits[i].rec.type == type;
    return n;
}

/* The only AllotmentGrant since from keyed by holder_key (others may go to
 * other holders: a rebalance); checks it is on the results topic. */
static hf_allotment_grant_t one_grant(const stage_ctx_t *fx, size_t from, const char *holder_key)
{
    const fake_stage_emit_t *found = NULL;
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].rec.type == HF_REC_ALLOTMENT_GRANT &&
            fx->emits[i].key_len == strlen(holder_key) &&
            memcmp(fx->emits[i].key, holder_key, fx->emits[i].key_len) == 0) {
            if (found)
                fail_msg("more than one AllotmentGrant since %zu", from);
            found = &fx->emits[i];
        }
    if (!found) {
        fail_msg("no AllotmentGrant since %zu", from);
        return (hf_allotment_grant_t){0};
    }
    assert_int_equal(found->topic_id, HF_T_COUNTER_RESULTS);
    assert_int_equal(found->key_len, strlen(holder_key));
    assert_memory_equal(found->key, holder_key, found->key_len);
    return found->rec.u.allotment_grant;
}

static hf_stock_level_t last_stock_level(const stage_ctx_t *fx)
{
    for (size_t i = fx->emits_count; i-- > 0;)
        if (fx->emits[i].rec.type == HF_REC_STOCK_LEVEL) {
            assert_int_equal(fx->emits[i].topic_id, HF_T_STOCK_LEVELS);
            return fx->emits[i].rec.u.stock_level;
        }
    fail_msg("no StockLevel emitted");
    return (hf_stock_level_t){0};
}

/* Asks for want as holder (balance reported 0); returns the grant. */
static hf_allotment_grant_t ask(stage_ctx_t *fx, int32_t holder, const char *key, int64_t seq,
                                int64_t want)
{
    size_t from = fx->emits_count;
    hf_record_t r = request_rec(holder, key, seq, want, 0, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    fx_check(fx);
    return one_grant(fx, from, key);
}

/* ====================================================================== */

static void test_grant_capped_at_share_of_free_stock(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 100);
    hf_allotment_grant_t g = ask(fx, HOLDER_A, KEY_A, 1, 80);
    assert_int_equal(g.granted_qty, 50); /* 50% of 100 free */
    assert_int_equal(g.seq, 1);
    assert_int_equal(g.recall_qty, 0);
    assert_int_equal(g.holder_partition, HOLDER_A);
    assert_int_equal(g.allotted, 50);
    assert_int_equal(g.available, 50);
    hf_counter_state_t c = counter(fx);
    assert_int_equal(c.allotted, 50);
    assert_int_equal(counter_available(&c), 50); /* free stock dropped by the grant */
    assert_int_equal(c.on_hand, 100);

    /* Every further grant, whoever asks, stays within the share of what is
     * free at the time. */
    int64_t seq = 2;
    for (int round = 0; round < 12; round++) {
        int32_t holder = round % 2 ? HOLDER_A : HOLDER_B;
        hf_counter_state_t before = counter(fx);
        int64_t free_units = counter_available(&before);
        int64_t cap = (free_units * SHARE + 99) / 100;
        g = ask(fx, holder, holder == HOLDER_A ? KEY_A : KEY_B, seq++, 1000);
        assert_true(g.granted_qty <= cap);
        assert_int_equal(g.granted_qty, free_units > 0 ? cap : 0);
        hf_counter_state_t after = counter(fx);
        assert_int_equal(counter_available(&after), free_units - g.granted_qty);
    }
    /* The last unit went too (rounded up), and nothing beyond it. */
    c = counter(fx);
    assert_int_equal(counter_available(&c), 0);
    assert_int_equal(c.allotted, 100);
    g = ask(fx, HOLDER_B, KEY_B, seq++, 5);
    assert_int_equal(g.granted_qty, 0);
}

/* The AllotmentGrants since from keyed by holder_key, counted; *last gets the
 * last of them. */
static size_t grants_to(const stage_ctx_t *fx, size_t from, const char *holder_key,
                        hf_allotment_grant_t *last)
{
    size_t n = 0;
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].rec.type == HF_REC_ALLOTMENT_GRANT &&
            fx->emits[i].key_len == strlen(holder_key) &&
            memcmp(fx->emits[i].key, holder_key, fx->emits[i].key_len) == 0) {
            *last = fx->emits[i].rec.u.allotment_grant;
            n++;
        }
    return n;
}

/* A holder that starves (no free stock left) while another sits on unheld
 * units: the other is asked to give back its balance (nothing owed, not a shortfall), at
 * most every HF_ESCROW_REBALANCE_INTERVAL_MS. */
static void test_uncovered_ask_rebalances_from_other_holders(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 100);
    assert_int_equal(ask(fx, HOLDER_A, KEY_A, 1, 80).granted_qty, 50); /* A reports 50 */
    size_t from = fx->emits_count;
    hf_allotment_grant_t g = ask(fx, HOLDER_B, KEY_B, 1, 80);
    assert_int_equal(g.granted_qty, 25); /* half of the 50 still free */
    hf_allotment_grant_t back;
    assert_int_equal(grants_to(fx, from, KEY_A, &back), 0); /* not starving: A keeps its own */
    assert_int_equal(hold(fx, "res-direct-1", 25).outcome, HF_OUTCOME_OK); /* free stock gone */
    fx->now_ms += HF_ESCROW_REBALANCE_INTERVAL_MS;
    from = fx->emits_count;
    g = ask(fx, HOLDER_B, KEY_B, 2, 80);
    assert_int_equal(g.granted_qty, 0);
    assert_int_equal(grants_to(fx, from, KEY_A, &back), 1);
    assert_int_equal(back.seq, 0);
    assert_int_equal(back.recall_qty, 50);
    assert_false(back.shortfall);
    hf_counter_state_t c = counter(fx);
    assert_int_equal(c.recalling, 0); /* units on the shelf: nothing is being taken back */

    /* Asked again at once: A is not asked twice within the interval. */
    from = fx->emits_count;
    (void)ask(fx, HOLDER_B, KEY_B, 3, 80);
    assert_int_equal(grants_to(fx, from, KEY_A, &back), 0);
    fx->now_ms += HF_ESCROW_REBALANCE_INTERVAL_MS;
    from = fx->emits_count;
    (void)ask(fx, HOLDER_B, KEY_B, 4, 80);
    assert_int_equal(grants_to(fx, from, KEY_A, &back), 1);
}

/* A Hold refused while holders report unheld balances asks them back; with
 * none reported, nobody is asked. */
static void test_refused_hold_asks_holders_back(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 4);
    assert_int_equal(ask(fx, HOLDER_A, KEY_A, 1, 10).granted_qty, 2);
    assert_int_equal(ask(fx, HOLDER_B, KEY_B, 1, 10).granted_qty, 1);
    assert_int_equal(ask(fx, HOLDER_B, KEY_B, 2, 10).granted_qty, 1); /* the last one */
    fx->now_ms += HF_ESCROW_REBALANCE_INTERVAL_MS;
    size_t from = fx->emits_count;
    assert_int_equal(hold(fx, "res-refused-1", 1).outcome, HF_OUTCOME_INSUFFICIENT);
    hf_allotment_grant_t back;
    assert_int_equal(grants_to(fx, from, KEY_A, &back), 1);
    assert_int_equal(back.recall_qty, 2);
    assert_false(back.shortfall);
    assert_int_equal(grants_to(fx, from, KEY_B, &back), 1);
    assert_int_equal(back.recall_qty, 1); /* its last report: balance 0 + the 1 granted */

    /* Both give everything back (reporting balance 0): a refusal then asks nobody. */
    hf_record_t r = request_rec(HOLDER_A, KEY_A, 2, 0, 2, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    r = request_rec(HOLDER_B, KEY_B, 3, 0, 2, 0); /* B holds 2 (1 + 1) */
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    fx_check(fx);
    assert_int_equal(counter(fx).escrow_balance, 0);
    fx->now_ms += HF_ESCROW_REBALANCE_INTERVAL_MS;
    assert_int_equal(hold(fx, "res-ok-1", 4).outcome, HF_OUTCOME_OK);
    from = fx->emits_count;
    assert_int_equal(hold(fx, "res-refused-2", 1).outcome, HF_OUTCOME_INSUFFICIENT);
    assert_int_equal(count_type(fx, from, HF_REC_ALLOTMENT_GRANT), 0);
}

static void test_hold_sees_only_free_stock(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 10);
    assert_int_equal(ask(fx, HOLDER_A, KEY_A, 1, 5).granted_qty, 5);
    hf_counter_result_t r = hold(fx, "res-direct-1", 6);
    assert_int_equal(r.outcome, HF_OUTCOME_INSUFFICIENT);
    assert_int_equal(r.available, 5);
    r = hold(fx, "res-direct-2", 5);
    assert_int_equal(r.outcome, HF_OUTCOME_OK);
    assert_int_equal(r.available, 0);
    fx_check(fx);
    hf_counter_state_t c = counter(fx);
    assert_int_equal(c.reserved, 5);
    assert_int_equal(c.allotted, 5);
}

static void test_return_puts_units_back(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 100);
    assert_int_equal(ask(fx, HOLDER_A, KEY_A, 1, 40).granted_qty, 40);
    size_t from = fx->emits_count;
    hf_record_t r = request_rec(HOLDER_A, KEY_A, 2, 0, 15, 25);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    fx_check(fx);
    hf_allotment_grant_t g = one_grant(fx, from, KEY_A);
    assert_int_equal(g.granted_qty, 0);
    assert_int_equal(g.allotted, 25);
    hf_counter_state_t c = counter(fx);
    assert_int_equal(c.allotted, 25);
    assert_int_equal(counter_available(&c), 75);
    assert_int_equal(c.escrow_balance, 25);
    hf_allotment_state_t a = allotment(fx, HOLDER_A);
    assert_int_equal(a.returned_total, 15);
    assert_int_equal(a.granted_total, 40);

    /* A report (want 0, return 0) moves only the sellable balance: no grant. */
    from = fx->emits_count;
    r = request_rec(HOLDER_A, KEY_A, 3, 0, 0, 20);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    fx_check(fx);
    assert_int_equal(count_type(fx, from, HF_REC_ALLOTMENT_GRANT), 0);
    assert_int_equal(counter(fx).escrow_balance, 20);
    assert_int_equal(counter(fx).allotted, 25);
}

static void test_sale_leaves_on_hand_and_allotment(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 100);
    assert_int_equal(ask(fx, HOLDER_A, KEY_A, 1, 50).granted_qty, 50);
    size_t from = fx->emits_count;
    hf_record_t s = sale_rec(HOLDER_A, "res-sold", 5, 40);
    assert_int_equal(fx_apply(fx, &s), HF_OK);
    fx_check(fx);
    assert_int_equal(count_type(fx, from, HF_REC_COUNTER_RESULT), 0);
    assert_int_equal(count_type(fx, from, HF_REC_ALLOTMENT_GRANT), 0);
    hf_counter_state_t c = counter(fx);
    assert_int_equal(c.on_hand, 95);
    assert_int_equal(c.allotted, 45);
    assert_int_equal(c.committed_total, 5);
    assert_int_equal(c.escrow_balance, 40);
    assert_int_equal(counter_available(&c), 50); /* free stock untouched by a sale */
    hf_allotment_state_t a = allotment(fx, HOLDER_A);
    assert_int_equal(a.allotted, 45);
    assert_int_equal(a.sold_total, 5);
    /* The pair's StockLevel carries the escrow numbers. */
    hf_stock_level_t sl = last_stock_level(fx);
    assert_int_equal(sl.on_hand, 95);
    assert_int_equal(sl.allotted, 45);
    assert_int_equal(sl.escrow_balance, 40);
    assert_int_equal(sl.available, 50);
    assert_int_equal(sl.committed_total, 5);
}

static void test_sale_or_return_beyond_allotment_rejected(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 100);
    assert_int_equal(ask(fx, HOLDER_A, KEY_A, 1, 10).granted_qty, 10);
    hf_counter_state_t before = counter(fx);

    hf_record_t s = sale_rec(HOLDER_A, "res-too-many", 11, 0);
    assert_int_equal(fx_apply(fx, &s), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "allotment"));
    assert_non_null(strstr(fx->reject_reason, "11"));

    /* A holder with no allotment at all sells nothing either. */
    s = sale_rec(HOLDER_B, "res-no-allotment", 1, 0);
    assert_int_equal(fx_apply(fx, &s), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "allotment"));

    hf_record_t r = request_rec(HOLDER_A, KEY_A, 2, 0, 11, 0);
    assert_int_equal(fx_apply(fx, &r), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "returns 11"));

    /* Malformed: no holder_key, negative want, seq 0. */
    r = request_rec(HOLDER_A, "", 3, 1, 0, 0);
    assert_int_equal(fx_apply(fx, &r), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "holder_key"));
    r = request_rec(HOLDER_A, KEY_A, 3, -1, 0, 0);
    assert_int_equal(fx_apply(fx, &r), HF_ERR_INVAL);
    r = request_rec(HOLDER_A, KEY_A, 0, 1, 0, 0);
    assert_int_equal(fx_apply(fx, &r), HF_ERR_INVAL);
    s = sale_rec(HOLDER_A, "res-zero", 0, 0);
    assert_int_equal(fx_apply(fx, &s), HF_ERR_INVAL);

    hf_counter_state_t after = counter(fx);
    assert_int_equal(after.on_hand, before.on_hand);
    assert_int_equal(after.allotted, before.allotted);
    assert_int_equal(after.committed_total, before.committed_total);
    fx_check(fx);
}

/* A count below what is promised recalls allotments before any direct hold is
 * revoked; a sale of the allotment under recall is answered REVOKED without
 * touching on_hand; the holder's return settles the recall. */
static void test_shortfall_recalls_allotments_first(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 100);
    assert_int_equal(ask(fx, HOLDER_A, KEY_A, 1, 50).granted_qty, 50);
    assert_int_equal(hold(fx, "res-direct", 30).outcome, HF_OUTCOME_OK);
    fx_check(fx);

    /* promised 80, on_hand 60: 20 short, all of it recalled from A. */
    size_t from = fx->emits_count;
    feed(fx, HF_FEED_COUNT, 60);
    fx_check(fx);
    hf_allotment_grant_t g = one_grant(fx, from, KEY_A);
    assert_int_equal(g.seq, 0);
    assert_int_equal(g.granted_qty, 0);
    assert_int_equal(g.recall_qty, 20);
    assert_int_equal(count_type(fx, from, HF_REC_COUNTER_RESULT), 0); /* no hold revoked */
    hf_counter_state_t c = counter(fx);
    assert_int_equal(c.recalling, 20);
    assert_int_equal(c.revoking, 0);
    assert_int_equal(allotment(fx, HOLDER_A).recalling, 20);

    /* A sale of A's allotment while it is recalled: REVOKED, nothing moves. */
    from = fx->emits_count;
    hf_record_t s = sale_rec(HOLDER_A, "res-sold-late", 4, 26);
    assert_int_equal(fx_apply(fx, &s), HF_OK);
    fx_check(fx);
    assert_int_equal(count_type(fx, from, HF_REC_COUNTER_RESULT), 1);
    const hf_counter_result_t *r = NULL;
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].rec.type == HF_REC_COUNTER_RESULT) {
            r = &fx->emits[i].rec.u.counter_result;
            assert_int_equal(fx->emits[i].key_len, strlen("res-sold-late"));
            assert_memory_equal(fx->emits[i].key, "res-sold-late", fx->emits[i].key_len);
        }
    assert_non_null(r);
    assert_int_equal(r->command, HF_CMD_COMMIT);
    assert_int_equal(r->outcome, HF_OUTCOME_REVOKED);
    assert_int_equal(r->qty, 4);
    hf_counter_state_t c2 = counter(fx);
    assert_int_equal(c2.on_hand, c.on_hand);
    assert_int_equal(c2.allotted, c.allotted);
    assert_int_equal(c2.committed_total, c.committed_total);

    /* A request for more while recalled is granted nothing; its return of 20
     * settles the recall. */
    from = fx->emits_count;
    hf_record_t q = request_rec(HOLDER_A, KEY_A, 2, 10, 20, 10);
    assert_int_equal(fx_apply(fx, &q), HF_OK);
    fx_check(fx);
    g = one_grant(fx, from, KEY_A);
    assert_int_equal(g.granted_qty, 0);
    c = counter(fx);
    assert_int_equal(c.recalling, 0);
    assert_int_equal(c.allotted, 30);
    assert_int_equal(c.reserved, 30);
    assert_int_equal(c.on_hand, 60);
}

static void test_shortfall_beyond_allotments_revokes_holds(void **state)
{
    stage_ctx_t *fx = *state;
    feed(fx, HF_FEED_RECEIVE, 100);
    assert_int_equal(ask(fx, HOLDER_A, KEY_A, 1, 20).granted_qty, 20);
    assert_int_equal(ask(fx, HOLDER_B, KEY_B, 1, 20).granted_qty, 20);
    assert_int_equal(hold(fx, "res-direct", 30).outcome, HF_OUTCOME_OK);
    /* promised 70, on_hand 10: both allotments recalled in full (40), then the
     * direct hold revoked for the other 20. */
    size_t from = fx->emits_count;
    feed(fx, HF_FEED_COUNT, 10);
    fx_check(fx);
    assert_int_equal(count_type(fx, from, HF_REC_ALLOTMENT_GRANT), 2);
    size_t first_grant = 0, shortfall_at = 0;
    int64_t recalled = 0;
    for (size_t i = from; i < fx->emits_count; i++) {
        const hf_record_t *e = &fx->emits[i].rec;
        if (e->type == HF_REC_ALLOTMENT_GRANT) {
            recalled += e->u.allotment_grant.recall_qty;
            if (!first_grant)
                first_grant = i;
        }
        if (e->type == HF_REC_COUNTER_RESULT) {
            assert_int_equal(e->u.counter_result.command, HF_CMD_SHORTFALL);
            assert_string_equal(e->u.counter_result.reservation_id, "res-direct");
            shortfall_at = i;
        }
    }
    assert_int_equal(recalled, 40);
    assert_true(shortfall_at > first_grant); /* allotments asked back first */
    hf_counter_state_t c = counter(fx);
    assert_int_equal(c.recalling, 40);
    assert_int_equal(c.revoking, 30);
    hf_stock_level_t sl = last_stock_level(fx);
    assert_int_equal(sl.available, 0);
    assert_int_equal(sl.allotted, 40);
}

int main(void)
{
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    log_set_level(HF_LOG_ERROR); /* recalls and shortfalls log warnings by design */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_grant_capped_at_share_of_free_stock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hold_sees_only_free_stock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uncovered_ask_rebalances_from_other_holders, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refused_hold_asks_holders_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_return_puts_units_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sale_leaves_on_hand_and_allotment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sale_or_return_beyond_allotment_rejected, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shortfall_recalls_allotments_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shortfall_beyond_allotments_revokes_holds, setup,
                                        teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    codec_shutdown();
    return failed;
}
