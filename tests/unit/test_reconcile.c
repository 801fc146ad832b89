/* The reconciler's checks over synthetic histories (no Kafka): a valid history
 * of every flow passes with every check enforced, and each check fires on a
 * violation planted in it — negative or backwards StockLevels, units lost or
 * invented at a counter, a hold applied twice, two terminal ledger events,
 * allocations that do not add up, an idempotency key with two outcomes, a late
 * expiry, a ledger that disagrees with the counters, and units sold that no
 * counter sold or no stock feed brought in (with the legal reversals). Also: the feed rules
 * (feed_seq dedup, the counter's horizon, dead letters, COUNT bounds, feeds on
 * both topics), the verdict's scopes, the table's cap and the JSON verdict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "lib/reconcile.h"
#include "lib/reconcile_int.h"

#define T_LEVELS    "holdfast.stock-levels"
#define T_RESULTS   "holdfast.counter-results"
#define T_LEDGER    "holdfast.ledger"
#define T_REPLIES   "holdfast.replies"
#define T_CHANGELOG "holdfast.counter-changelog"
#define T_FEED      "holdfast.stock-feed"
#define T_COMMANDS  "holdfast.counter-commands"

static int64_t offset_next;

/* ---- every history judged again in 1 to 4 shards
 *
 * Every record a test feeds goes through rec_* (reconcile_feed), which keeps
 * it in a history; done() feeds that history again to fresh checkers of 1 to
 * RC_TEST_SHARDS_MAX shards (reconcile_history_replay) and asserts that each
 * gives the test's own checker's verdicts, violations of every kind and counts:
 * every violation planted below is caught, and only it, whatever the shard
 * count. */
#define RC_TEST_SHARDS_MAX 4

static reconcile_history_t *history;
static reconcile_limits_t history_limits;
static int32_t history_gateway_partitions;

static void history_start(const reconcile_limits_t *lim, int32_t gateway_partitions)
{
    if (!history)
        assert_int_equal(reconcile_history_new(100000, &history), HF_OK);
    reconcile_history_clear(history);
    history_limits = *lim;
    history_gateway_partitions = gateway_partitions;
}

static int history_teardown(void **state)
{
    reconcile_history_destroy(history);
    history = NULL;
    return 0;
}

static int record(reconcile_t *rc, const rc_feed_t *f)
{
    assert_int_equal(reconcile_history_add(history, f), HF_OK);
    return reconcile_feed(rc, f);
}

static hf_record_t *rec_of(hf_rec_type_t type)
{
    static hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = type;
    return &r;
}

static int rec_dead_letter(reconcile_t *rc, const hf_dead_letter_t *d)
{
    hf_record_t *r = rec_of(HF_REC_DEAD_LETTER);
    r->u.dead_letter = *d;
    return record(rc, &(rc_feed_t){.kind = RC_FEED_DEAD_LETTER, .rec = r});
}

static int rec_counter_state(reconcile_t *rc, const rc_pos_t *pos, const char *wh, const char *sku,
                             const hf_counter_state_t *c)
{
    hf_record_t *r = rec_of(HF_REC_COUNTER_STATE);
    r->u.counter_state = *c;
    return record(rc, &(rc_feed_t){RC_FEED_COUNTER_STATE, *pos, 0, wh, sku, r});
}

static int rec_stock_level(reconcile_t *rc, const rc_pos_t *pos, const hf_stock_level_t *sl)
{
    hf_record_t *r = rec_of(HF_REC_STOCK_LEVEL);
    r->u.stock_level = *sl;
    return record(rc, &(rc_feed_t){RC_FEED_STOCK_LEVEL, *pos, 0, NULL, NULL, r});
}

static int rec_ledger(reconcile_t *rc, const rc_pos_t *pos, const hf_ledger_event_t *e)
{
    hf_record_t *r = rec_of(HF_REC_LEDGER_EVENT);
    r->u.ledger_event = *e;
    return record(rc, &(rc_feed_t){RC_FEED_LEDGER, *pos, 0, NULL, NULL, r});
}

static int rec_counter_result(reconcile_t *rc, const rc_pos_t *pos, const hf_counter_result_t *cr)
{
    hf_record_t *r = rec_of(HF_REC_COUNTER_RESULT);
    r->u.counter_result = *cr;
    return record(rc, &(rc_feed_t){RC_FEED_COUNTER_RESULT, *pos, 0, NULL, NULL, r});
}

static int rec_counter_input(reconcile_t *rc, rc_input_t in, const rc_pos_t *pos,
                             const hf_record_t *rec)
{
    return record(rc, &(rc_feed_t){RC_FEED_COUNTER_INPUT, *pos, in, NULL, NULL, rec});
}

static int rec_reply(reconcile_t *rc, const rc_pos_t *pos, const hf_reply_t *rp)
{
    hf_record_t *r = rec_of(HF_REC_REPLY);
    r->u.reply = *rp;
    return record(rc, &(rc_feed_t){RC_FEED_REPLY, *pos, 0, NULL, NULL, r});
}

static int rec_escrow_state(reconcile_t *rc, const rc_pos_t *pos, const char *wh, const char *sku,
                            const hf_escrow_state_t *es)
{
    hf_record_t *r = rec_of(HF_REC_ESCROW_STATE);
    r->u.escrow_state = *es;
    return record(rc, &(rc_feed_t){RC_FEED_ESCROW_STATE, *pos, 0, wh, sku, r});
}

static void print_violations(const reconcile_t *rc);

/* The test's history in 1..RC_TEST_SHARDS_MAX shards, quiescent as the test
 * finished it (both ways when it did not): as the test's own checker. */
static void done(reconcile_t *rc)
{
    char why[512] = "";
    if (reconcile_history_check(history, &history_limits, history_gateway_partitions, rc,
                                RC_TEST_SHARDS_MAX, why, sizeof why) != HF_OK) {
        print_violations(rc);
        fail_msg("%s", why);
    }
    reconcile_destroy(rc);
    reconcile_history_clear(history);
}
/* committed_total of the next CounterState counter_state() writes. */
static int64_t committed_total_next;
static const char *ledger_api_key = ""; /* the api_key_id ledger_ex writes */

static rc_pos_t at(const char *topic)
{
    return (rc_pos_t){topic, 0, offset_next++};
}

static reconcile_t *fresh(void)
{
    reconcile_limits_t lim;
    reconcile_limits_default(&lim);
    lim.violations_shown_max = 64;
    reconcile_t *rc = NULL;
    assert_int_equal(reconcile_new(&lim, &rc), HF_OK);
    history_start(&lim, 0);
    offset_next = 0;
    committed_total_next = 0;
    ledger_api_key = "";
    return rc;
}

static void counter_state(reconcile_t *rc, const char *wh, int64_t on_hand, int64_t reserved,
                          int64_t version, int64_t feed_seq)
{
    hf_counter_state_t c = {.on_hand = on_hand,
                            .reserved = reserved,
                            .version = version,
                            .feed_seq = feed_seq,
                            .committed_total = committed_total_next};
    rc_pos_t pos = at(T_CHANGELOG);
    assert_int_equal(rec_counter_state(rc, &pos, wh, "S", &c), HF_OK);
}

static void level(reconcile_t *rc, const char *wh, int64_t on_hand, int64_t reserved,
                  int64_t available, int64_t version);

/* The counter's last state and its matching last StockLevel. */
static void counter_final(reconcile_t *rc, int64_t on_hand, int64_t reserved, int64_t version,
                          int64_t feed_seq)
{
    counter_state(rc, "W1", on_hand, reserved, version, feed_seq);
    level(rc, "W1", on_hand, reserved, on_hand > reserved ? on_hand - reserved : 0, version);
}

static void level(reconcile_t *rc, const char *wh, int64_t on_hand, int64_t reserved,
                  int64_t available, int64_t version)
{
    hf_stock_level_t sl = {
        .on_hand = on_hand, .reserved = reserved, .available = available, .version = version};
    snprintf(sl.warehouse_id, sizeof sl.warehouse_id, "%s", wh);
    snprintf(sl.sku, sizeof sl.sku, "S");
    rc_pos_t pos = at(T_LEVELS);
    assert_int_equal(rec_stock_level(rc, &pos, &sl), HF_OK);
}

static void result(reconcile_t *rc, const char *rid, hf_cmd_t cmd, hf_outcome_t outcome,
                   int64_t qty)
{
    hf_counter_result_t r = {.attempt = 0, .command = cmd, .outcome = outcome, .qty = qty};
    snprintf(r.reservation_id, sizeof r.reservation_id, "%s", rid);
    snprintf(r.warehouse_id, sizeof r.warehouse_id, "W1");
    snprintf(r.sku, sizeof r.sku, "S");
    rc_pos_t pos = at(T_RESULTS);
    assert_int_equal(rec_counter_result(rc, &pos, &r), HF_OK);
}

static void feed_at(reconcile_t *rc, rc_input_t in, const rc_pos_t *pos, hf_feed_kind_t kind,
                    int64_t qty, int64_t seq)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_STOCK_FEED;
    snprintf(rec.u.stock_feed.warehouse_id, sizeof rec.u.stock_feed.warehouse_id, "W1");
    snprintf(rec.u.stock_feed.sku, sizeof rec.u.stock_feed.sku, "S");
    rec.u.stock_feed.kind = kind;
    rec.u.stock_feed.qty = qty;
    rec.u.stock_feed.feed_seq = seq;
    assert_int_equal(rec_counter_input(rc, in, pos, &rec), HF_OK);
}

static void feed(reconcile_t *rc, rc_input_t in, hf_feed_kind_t kind, int64_t qty, int64_t seq)
{
    rc_pos_t pos = at(in == RC_IN_STOCK_FEED ? T_FEED : T_COMMANDS);
    feed_at(rc, in, &pos, kind, qty, seq);
}

static void commit_cmd(reconcile_t *rc, rc_input_t in, const char *rid)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_COMMIT_HOLD;
    snprintf(rec.u.commit_hold.reservation_id, sizeof rec.u.commit_hold.reservation_id, "%s", rid);
    snprintf(rec.u.commit_hold.warehouse_id, sizeof rec.u.commit_hold.warehouse_id, "W1");
    snprintf(rec.u.commit_hold.sku, sizeof rec.u.commit_hold.sku, "S");
    rc_pos_t pos = at(in == RC_IN_STOCK_FEED ? T_FEED : T_COMMANDS);
    assert_int_equal(rec_counter_input(rc, in, &pos, &rec), HF_OK);
}

/* One line of sku S for line_qty; allocations W1..Wn of alloc_qty each. */
static void ledger_ex(reconcile_t *rc, const char *rid, hf_ledger_kind_t kind, int64_t line_qty,
                      int32_t allocs, int64_t alloc_qty, int64_t expires_at_ms, int64_t at_ms)
{
    hf_ledger_event_t e;
    memset(&e, 0, sizeof e);
    snprintf(e.reservation_id, sizeof e.reservation_id, "%s", rid);
    e.kind = kind;
    e.lines_count = 1;
    snprintf(e.lines[0].sku, sizeof e.lines[0].sku, "S");
    e.lines[0].qty = line_qty;
    for (int32_t i = 0; i < allocs; i++) {
        snprintf(e.allocations[i].warehouse_id, sizeof e.allocations[i].warehouse_id, "W%d", i + 1);
        snprintf(e.allocations[i].sku, sizeof e.allocations[i].sku, "S");
        e.allocations[i].qty = alloc_qty;
    }
    e.allocations_count = allocs;
    e.expires_at_ms = expires_at_ms;
    e.at_ms = at_ms;
    snprintf(e.api_key_id, sizeof e.api_key_id, "%s", ledger_api_key);
    rc_pos_t pos = at(T_LEDGER);
    assert_int_equal(rec_ledger(rc, &pos, &e), HF_OK);
}

static void ledger(reconcile_t *rc, const char *rid, hf_ledger_kind_t kind, int64_t qty)
{
    bool with_allocs = kind == HF_LEDGER_HELD || kind == HF_LEDGER_COMMITTED ||
                       kind == HF_LEDGER_RELEASED || kind == HF_LEDGER_EXPIRED;
    ledger_ex(rc, rid, kind, qty, with_allocs ? 1 : 0, qty, 1000000, 1000000);
}

static void reply(reconcile_t *rc, const char *rid, const char *key, hf_reply_outcome_t outcome,
                  int64_t alloc_qty)
{
    hf_reply_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.reservation_id, sizeof r.reservation_id, "%s", rid);
    snprintf(r.idempotency_key, sizeof r.idempotency_key, "%s", key);
    r.outcome = outcome;
    if (alloc_qty > 0) {
        r.allocations_count = 1;
        snprintf(r.allocations[0].warehouse_id, sizeof r.allocations[0].warehouse_id, "W1");
        snprintf(r.allocations[0].sku, sizeof r.allocations[0].sku, "S");
        r.allocations[0].qty = alloc_qty;
    }
    rc_pos_t pos = at(T_REPLIES);
    assert_int_equal(rec_reply(rc, &pos, &r), HF_OK);
}

static void print_violations(const reconcile_t *rc)
{
    const rc_violation_t *v = NULL;
    size_t n = reconcile_violations_shown(rc, &v);
    for (size_t i = 0; i < n; i++)
        print_message("  %s %s: %s\n", rc_kind_name(v[i].kind), v[i].key, v[i].detail);
}

/* Only the named kind fired, count times. */
static void assert_only(const reconcile_t *rc, rc_kind_t kind, size_t count)
{
    if (reconcile_violations_of(rc, kind) != count || reconcile_violations_total(rc) != count)
        print_violations(rc);
    assert_int_equal(reconcile_violations_of(rc, kind), count);
    assert_int_equal(reconcile_violations_total(rc), count);
}

/* ---- a valid history of every flow, in the feeding order */

/* Stock 10 at W1|S; r1 holds 3 and commits, r2 holds 2 and releases, r3 is
 * refused, r4 holds 1 and expires (then pays late), r5 holds 4 and stays held;
 * the Hold of r1 is answered twice. Counter: on_hand 7, reserved 4, version
 * 4 holds + 3 settles + 1 feed = 8. */
static reconcile_t *valid_history(void)
{
    reconcile_t *rc = fresh();
    counter_state(rc, "W1", 7, 4, 8, 1);
    level(rc, "W1", 10, 0, 10, 1);
    level(rc, "W1", 7, 4, 3, 8);
    ledger(rc, "r1", HF_LEDGER_HELD, 3);
    ledger(rc, "r1", HF_LEDGER_COMMITTED, 3);
    ledger(rc, "r2", HF_LEDGER_HELD, 2);
    ledger(rc, "r2", HF_LEDGER_RELEASED, 2);
    ledger(rc, "r3", HF_LEDGER_REJECTED, 5);
    ledger(rc, "r4", HF_LEDGER_HELD, 1);
    ledger_ex(rc, "r4", HF_LEDGER_EXPIRED, 1, 1, 1, 500000, 503000);
    ledger(rc, "r4", HF_LEDGER_LATE_PAYMENT, 1);
    ledger(rc, "r5", HF_LEDGER_HELD, 4);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3); /* a retried Hold */
    result(rc, "r2", HF_CMD_HOLD, HF_OUTCOME_OK, 2);
    result(rc, "r3", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 5);
    result(rc, "r3", HF_CMD_RELEASE, HF_OUTCOME_OK, 5); /* rollback of a refused hold */
    result(rc, "r4", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    result(rc, "r5", HF_CMD_HOLD, HF_OUTCOME_OK, 4);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3); /* a retried commit: no change */
    result(rc, "r2", HF_CMD_RELEASE, HF_OUTCOME_OK, 2);
    result(rc, "r2", HF_CMD_COMMIT, HF_OUTCOME_CONFLICT, 2);
    result(rc, "r4", HF_CMD_RELEASE, HF_OUTCOME_OK, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 10, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 10, 1); /* a replayed feed: skipped */
    commit_cmd(rc, RC_IN_COMMANDS, "r1");
    commit_cmd(rc, RC_IN_COMMANDS, "r1");
    reply(rc, "r1", "k1", HF_REPLY_HELD, 3);
    reply(rc, "r1", "k1", HF_REPLY_HELD, 3);
    reply(rc, "r1", "k1", HF_REPLY_CONFLICT, 0); /* same key, another body */
    reply(rc, "r1", "c1", HF_REPLY_COMMITTED, 3);
    reply(rc, "r2", "x2", HF_REPLY_RELEASED, 0);
    reply(rc, "r4", "c4", HF_REPLY_EXPIRED, 0);
    return rc;
}

static void test_valid_history_passes_every_check_even_quiescent(void **state)
{
    reconcile_t *rc = valid_history();
    reconcile_finish(rc, true);
    if (reconcile_violations_total(rc))
        print_violations(rc);
    assert_int_equal(reconcile_violations_total(rc), 0);
    assert_int_equal(reconcile_verdict(rc, true), RC_PASS);
    rc_counts_t n;
    reconcile_counts(rc, &n);
    assert_int_equal(n.reservations, 5);
    assert_int_equal(n.held, 1);
    assert_int_equal(n.committed, 1);
    assert_int_equal(n.released, 1);
    assert_int_equal(n.expired, 1);
    assert_int_equal(n.rejected, 1);
    assert_int_equal(n.holds, 5);
    assert_int_equal(n.holds_open, 1);
    assert_int_equal(n.ledger_held_units, 4);
    assert_int_equal(n.counter_reserved_units, 4);
    assert_int_equal(n.feeds_applied, 1);
    assert_int_equal(n.pairs_on_hand_exact, 1);
    assert_int_equal(n.gateway_expiry_lag_ms_max, 3000);
    done(rc);
}

/* ---- late payments re-reserved (late_payment_policy rereserve) */

/* A LATE_PAYMENT of rid with reason, one line of S for line_qty, one
 * allocation at W1 of alloc_qty (none when 0). */
static void late_payment(reconcile_t *rc, const char *rid, const char *reason, int64_t line_qty,
                         int64_t alloc_qty)
{
    hf_ledger_event_t e;
    memset(&e, 0, sizeof e);
    snprintf(e.reservation_id, sizeof e.reservation_id, "%s", rid);
    e.kind = HF_LEDGER_LATE_PAYMENT;
    e.lines_count = 1;
    snprintf(e.lines[0].sku, sizeof e.lines[0].sku, "S");
    e.lines[0].qty = line_qty;
    if (alloc_qty > 0) {
        e.allocations_count = 1;
        snprintf(e.allocations[0].warehouse_id, sizeof e.allocations[0].warehouse_id, "W1");
        snprintf(e.allocations[0].sku, sizeof e.allocations[0].sku, "S");
        e.allocations[0].qty = alloc_qty;
    }
    snprintf(e.reason, sizeof e.reason, "%s", reason);
    e.at_ms = 1000000;
    rc_pos_t pos = at(T_LEDGER);
    assert_int_equal(rec_ledger(rc, &pos, &e), HF_OK);
}

static void test_a_late_payment_may_buy_its_expired_lines_once(void **state)
{
    reconcile_t *rc = fresh();
    /* Held at W1+W2, expired, re-reserved all at W1 and committed. */
    ledger_ex(rc, "late", HF_LEDGER_HELD, 2, 2, 1, 500000, 400000);
    ledger_ex(rc, "late", HF_LEDGER_EXPIRED, 2, 2, 1, 500000, 500100);
    late_payment(rc, "late", "rereserved", 2, 2);
    reply(rc, "late", "pay", HF_REPLY_COMMITTED, 2);   /* the re-reserved allocations */
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 2, 1); /* the stock it bought */
    reconcile_finish(rc, false);
    if (reconcile_violations_total(rc))
        print_violations(rc);
    assert_int_equal(reconcile_violations_total(rc), 0);
    rc_counts_t n;
    reconcile_counts(rc, &n);
    assert_int_equal(n.late_payments, 1);
    assert_int_equal(n.late_rereserved, 1);
    assert_int_equal(n.expired, 1);
    done(rc);

    /* A COMMITTED reply naming neither the HELD nor the re-reserved units. */
    rc = fresh();
    ledger_ex(rc, "late", HF_LEDGER_HELD, 2, 2, 1, 500000, 400000);
    ledger_ex(rc, "late", HF_LEDGER_EXPIRED, 2, 2, 1, 500000, 500100);
    late_payment(rc, "late", "rereserved", 2, 2);
    reply(rc, "late", "pay", HF_REPLY_COMMITTED, 1);
    assert_only(rc, RC_K_REPLY_VS_LEDGER, 1);
    done(rc);

    /* Twice; units that do not add up to the lines; of a reservation that
     * did not expire. */
    rc = fresh();
    ledger_ex(rc, "a", HF_LEDGER_HELD, 2, 1, 2, 500000, 400000);
    ledger_ex(rc, "a", HF_LEDGER_EXPIRED, 2, 1, 2, 500000, 500100);
    late_payment(rc, "a", "rereserved", 2, 2);
    late_payment(rc, "a", "rereserved", 2, 2);
    assert_only(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, 1);
    done(rc);
    rc = fresh();
    ledger_ex(rc, "b", HF_LEDGER_HELD, 2, 1, 2, 500000, 400000);
    ledger_ex(rc, "b", HF_LEDGER_EXPIRED, 2, 1, 2, 500000, 500100);
    late_payment(rc, "b", "rereserved", 2, 1);
    assert_only(rc, RC_K_LEDGER_ALLOCATIONS, 1);
    done(rc);
    rc = fresh();
    ledger(rc, "c", HF_LEDGER_HELD, 2);
    ledger(rc, "c", HF_LEDGER_RELEASED, 2);
    late_payment(rc, "c", "refund", 2, 0); /* fine: a refund of a released one */
    late_payment(rc, "c", "rereserved", 2, 2);
    assert_only(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, 1);
    done(rc);
}

/* ---- check 1 */

static void test_negative_stock_level_is_reported(void **state)
{
    reconcile_t *rc = fresh();
    level(rc, "W1", 5, 0, -1, 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_STOCK_LEVEL_NEGATIVE), 1);
    level(rc, "W1", 5, 2, 3, 2); /* fine */
    level(rc, "W1", 5, 2, 1, 3); /* available is not on_hand - reserved */
    assert_int_equal(reconcile_violations_of(rc, RC_K_STOCK_LEVEL_INCONSISTENT), 2);
    assert_int_equal(reconcile_verdict(rc, false), RC_FAIL);
    done(rc);
}

static void test_stock_level_versions_must_rise_per_pair(void **state)
{
    reconcile_t *rc = fresh();
    level(rc, "W1", 5, 0, 5, 3);
    level(rc, "W2", 5, 0, 5, 1); /* another pair: its own sequence */
    level(rc, "W1", 5, 0, 5, 4);
    assert_int_equal(reconcile_violations_total(rc), 0);
    level(rc, "W1", 5, 0, 5, 4);
    level(rc, "W1", 5, 0, 5, 2);
    assert_only(rc, RC_K_STOCK_LEVEL_VERSION, 2);
    done(rc);
}

static void test_counter_state_breaking_its_invariants_is_reported(void **state)
{
    reconcile_t *rc = fresh();
    counter_state(rc, "W1", 2, 3, 1, 0); /* more promised than on hand, nothing revoking */
    assert_int_equal(reconcile_violations_of(rc, RC_K_COUNTER_STATE_INVALID), 1);
    done(rc);
}

/* ---- check 2 */

static void test_units_lost_or_invented_at_a_counter_break_conservation(void **state)
{
    /* The changelog says reserved 5, the holds say 4. */
    reconcile_t *rc = valid_history();
    counter_state(rc, "W1", 7, 5, 8, 1);
    level(rc, "W1", 7, 5, 2, 9);
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_of(rc, RC_K_RESERVED_MISMATCH), 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_STOCK_LEVEL_VS_STATE), 1);
    assert_int_equal(reconcile_verdict(rc, true), RC_FAIL);
    assert_int_equal(reconcile_verdict(rc, false), RC_INCONCLUSIVE);
    done(rc);

    /* on_hand 8: one committed unit came back from nowhere; one more version. */
    rc = valid_history();
    counter_state(rc, "W1", 8, 4, 9, 1);
    level(rc, "W1", 8, 4, 4, 9);
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_of(rc, RC_K_ON_HAND_MISMATCH), 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_VERSION_MISMATCH), 1);
    assert_int_equal(reconcile_violations_total(rc), 2);
    done(rc);
}

static void test_feeds_apply_once_in_order_up_to_the_counter_horizon(void **state)
{
    reconcile_t *rc = fresh();
    counter_final(rc, 12, 0, 3, 3); /* the counter got as far as feed_seq 3 */
    rc_pos_t dead = {T_FEED, 0, 900};
    hf_dead_letter_t d;
    memset(&d, 0, sizeof d);
    snprintf(d.source_topic, sizeof d.source_topic, "%s", T_FEED);
    d.source_offset = 900;
    assert_int_equal(rec_dead_letter(rc, &d), HF_OK);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 10, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 10, 1);           /* duplicate */
    feed_at(rc, RC_IN_STOCK_FEED, &dead, HF_FEED_ADJUST, -50, 2); /* dead-lettered */
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_ADJUST, -3, 2);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 5, 3);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 7, 4); /* not processed yet */
    reconcile_finish(rc, false);
    if (reconcile_violations_total(rc))
        print_violations(rc);
    assert_int_equal(reconcile_violations_total(rc), 0);
    rc_counts_t n;
    reconcile_counts(rc, &n);
    assert_int_equal(n.feeds_applied, 3);
    done(rc);
}

static void test_a_count_bounds_on_hand_when_commits_are_on_the_other_topic(void **state)
{
    /* RECEIVE 10 and COUNT 8 on the stock-feed topic; a 3-unit commit on the
     * commands topic may have come before the count or after: on_hand 5..8. */
    int64_t on_hands[] = {5, 8, 4, 9};
    for (int i = 0; i < 4; i++) {
        reconcile_t *rc = fresh();
        counter_final(rc, on_hands[i], 0, 4, 2);
        result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
        result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3);
        feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 10, 1);
        feed(rc, RC_IN_STOCK_FEED, HF_FEED_COUNT, 8, 2);
        commit_cmd(rc, RC_IN_COMMANDS, "r1");
        reconcile_finish(rc, false);
        assert_int_equal(reconcile_violations_of(rc, RC_K_ON_HAND_MISMATCH), i < 2 ? 0 : 1);
        rc_counts_t n;
        reconcile_counts(rc, &n);
        assert_int_equal(n.pairs_on_hand_bounded, 1);
        done(rc);
    }
}

static void test_a_count_among_commands_orders_commits_exactly(void **state)
{
    /* Feeds on the commands topic: the commit before the COUNT is overwritten by
     * it, the one after is not. on_hand = 8 - 2 = 6. */
    int64_t on_hands[] = {6, 5};
    for (int i = 0; i < 2; i++) {
        reconcile_t *rc = fresh();
        counter_final(rc, on_hands[i], 0, 6, 2);
        result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
        result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3);
        result(rc, "r2", HF_CMD_HOLD, HF_OUTCOME_OK, 2);
        result(rc, "r2", HF_CMD_COMMIT, HF_OUTCOME_OK, 2);
        feed(rc, RC_IN_COMMANDS, HF_FEED_RECEIVE, 10, 1);
        commit_cmd(rc, RC_IN_COMMANDS, "r1");
        feed(rc, RC_IN_COMMANDS, HF_FEED_COUNT, 8, 2);
        commit_cmd(rc, RC_IN_COMMANDS, "r2");
        reconcile_finish(rc, false);
        assert_int_equal(reconcile_violations_of(rc, RC_K_ON_HAND_MISMATCH), (size_t)i);
        rc_counts_t n;
        reconcile_counts(rc, &n);
        assert_int_equal(n.pairs_on_hand_exact, 1);
        done(rc);
    }
}

static void test_feeds_on_both_topics_leave_on_hand_unjudged(void **state)
{
    reconcile_t *rc = fresh();
    counter_final(rc, 999, 0, 2, 2);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 10, 1);
    feed(rc, RC_IN_COMMANDS, HF_FEED_RECEIVE, 10, 2);
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_total(rc), 0);
    rc_counts_t n;
    reconcile_counts(rc, &n);
    assert_int_equal(n.pairs_feed_order_ambiguous, 1);
    done(rc);
}

static void test_revoked_holds_stay_reserved_until_released(void **state)
{
    reconcile_t *rc = fresh();
    hf_counter_state_t c = {
        .on_hand = 2, .reserved = 5, .revoking = 3, .version = 4, .feed_seq = 2};
    rc_pos_t pos = at(T_CHANGELOG);
    assert_int_equal(rec_counter_state(rc, &pos, "W1", "S", &c), HF_OK);
    hf_stock_level_t sl = {.warehouse_id = "W1",
                           .sku = "S",
                           .on_hand = 2,
                           .reserved = 5,
                           .shortfall = 3,
                           .version = 4};
    pos = at(T_LEVELS);
    assert_int_equal(rec_stock_level(rc, &pos, &sl), HF_OK);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 2);
    result(rc, "r2", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    result(rc, "r2", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 3);
    result(rc, "r2", HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 3);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 10, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_COUNT, 2, 2);
    reconcile_finish(rc, false);
    if (reconcile_violations_total(rc))
        print_violations(rc);
    assert_int_equal(reconcile_violations_total(rc), 0);
    done(rc);
}

/* ---- check 3 */

static void test_a_hold_applied_twice_is_reported(void **state)
{
    reconcile_t *rc = fresh();
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 3);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 4);
    assert_only(rc, RC_K_HOLD_OUTCOME_CHANGED, 2);
    done(rc);

    rc = fresh();
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_RELEASE, HF_OUTCOME_OK, 3);
    assert_only(rc, RC_K_HOLD_SETTLED_TWICE, 1);
    done(rc);

    rc = fresh();
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 3);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3);
    result(rc, "r2", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    result(rc, "r2", HF_CMD_RELEASE, HF_OUTCOME_NOT_FOUND, 1);
    assert_only(rc, RC_K_COUNTER_RESULT_ILLEGAL, 2);
    done(rc);
}

/* ---- check 4 */

static void test_two_terminal_ledger_events_are_reported(void **state)
{
    reconcile_t *rc = fresh();
    ledger(rc, "r1", HF_LEDGER_HELD, 2);
    ledger(rc, "r1", HF_LEDGER_COMMITTED, 2);
    ledger(rc, "r1", HF_LEDGER_RELEASED, 2);
    assert_only(rc, RC_K_LEDGER_TERMINAL_TWICE, 1);
    ledger(rc, "r1", HF_LEDGER_HELD, 2);
    assert_int_equal(reconcile_violations_of(rc, RC_K_LEDGER_AFTER_TERMINAL), 1);
    done(rc);
}

static void test_illegal_ledger_transitions_are_reported(void **state)
{
    reconcile_t *rc = fresh();
    ledger(rc, "a", HF_LEDGER_COMMITTED, 2); /* never held */
    ledger(rc, "b", HF_LEDGER_HELD, 2);
    ledger(rc, "b", HF_LEDGER_REJECTED, 2);     /* rejected after held */
    ledger(rc, "c", HF_LEDGER_LATE_PAYMENT, 2); /* nothing expired */
    ledger(rc, "d", HF_LEDGER_HELD, 2);
    ledger(rc, "d", HF_LEDGER_HELD, 2);
    ledger(rc, "e", HF_LEDGER_RELEASED, 2); /* released while pending: legal */
    assert_only(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, 4);
    done(rc);
}

static void test_allocations_must_sum_to_the_requested_lines(void **state)
{
    reconcile_t *rc = fresh();
    ledger_ex(rc, "ok", HF_LEDGER_HELD, 6, 2, 3, 0, 0); /* 3 + 3 = 6 */
    ledger_ex(rc, "short", HF_LEDGER_HELD, 6, 1, 5, 0, 0);
    ledger_ex(rc, "over", HF_LEDGER_HELD, 6, 3, 3, 0, 0);
    ledger_ex(rc, "ok", HF_LEDGER_COMMITTED, 6, 1, 5, 0, 0);
    assert_only(rc, RC_K_LEDGER_ALLOCATIONS, 3);
    done(rc);
}

/* Every event of a reservation names the key that reserved it: a later event
 * naming another key, or none, is a FAIL; another reservation may have another
 * key, and a reservation made without one stays without. */
static void test_a_ledger_event_naming_another_key_than_the_reservation_is_reported(void **state)
{
    reconcile_t *rc = fresh();
    ledger_api_key = "buyer";
    ledger(rc, "kept", HF_LEDGER_HELD, 2);
    ledger(rc, "kept", HF_LEDGER_COMMITTED, 2);
    ledger(rc, "swapped", HF_LEDGER_HELD, 2);
    ledger(rc, "lost", HF_LEDGER_HELD, 2);
    ledger_api_key = "ops"; /* the key that released it, not the one that reserved */
    ledger(rc, "swapped", HF_LEDGER_RELEASED, 2);
    ledger(rc, "by-ops", HF_LEDGER_HELD, 2);
    ledger(rc, "by-ops", HF_LEDGER_RELEASED, 2);
    ledger_api_key = "";
    ledger(rc, "lost", HF_LEDGER_COMMITTED, 2);
    ledger(rc, "keyless", HF_LEDGER_HELD, 2);
    ledger(rc, "keyless", HF_LEDGER_RELEASED, 2);
    assert_only(rc, RC_K_LEDGER_API_KEY, 2);
    assert_int_equal(reconcile_verdict(rc, false), RC_FAIL);
    const rc_violation_t *v = NULL;
    assert_int_equal(reconcile_violations_shown(rc, &v), 2);
    assert_string_equal(v[0].key, "swapped");
    assert_non_null(strstr(v[0].detail, "RELEASED names api_key_id 'ops'"));
    assert_string_equal(v[1].key, "lost");
    assert_non_null(strstr(v[1].detail, "COMMITTED names api_key_id ''"));
    assert_string_equal(rc_kind_name(RC_K_LEDGER_API_KEY), "ledger_api_key_changed");
    done(rc);
}

/* ---- check 5 */

static void test_an_idempotency_key_with_two_outcomes_is_reported(void **state)
{
    reconcile_t *rc = fresh();
    reply(rc, "r1", "k1", HF_REPLY_HELD, 3);
    reply(rc, "r1", "k1", HF_REPLY_CONFLICT, 0); /* another body: not applied */
    reply(rc, "r1", "k1", HF_REPLY_NOT_FOUND, 0);
    reply(rc, "r2", "k1", HF_REPLY_REJECTED_INSUFFICIENT, 0); /* another reservation */
    assert_int_equal(reconcile_violations_total(rc), 0);
    reply(rc, "r1", "k1", HF_REPLY_RELEASED, 0);
    assert_only(rc, RC_K_IDEMPOTENCY_OUTCOME, 1);
    reply(rc, "r1", "k1", HF_REPLY_HELD, 4);
    assert_int_equal(reconcile_violations_of(rc, RC_K_IDEMPOTENCY_ALLOCATIONS), 1);
    done(rc);
}

static void test_a_reply_naming_other_allocations_than_the_ledger_is_reported(void **state)
{
    reconcile_t *rc = fresh();
    ledger(rc, "r1", HF_LEDGER_HELD, 3);
    reply(rc, "r1", "k1", HF_REPLY_HELD, 3);
    reply(rc, "r1", "c1", HF_REPLY_COMMITTED, 3);
    assert_int_equal(reconcile_violations_total(rc), 0);
    reply(rc, "r1", "c2", HF_REPLY_COMMITTED, 2);
    assert_only(rc, RC_K_REPLY_VS_LEDGER, 1);
    done(rc);
}

/* ---- check 6 */

static void test_expiry_must_come_within_the_bound_after_expires_at(void **state)
{
    reconcile_t *rc = fresh();
    const char *rids[] = {"on-time", "late", "early", "edge"};
    int64_t at_ms[] = {101000, 106001, 99990, 105000};
    for (int i = 0; i < 4; i++) {
        ledger(rc, rids[i], HF_LEDGER_HELD, 1);
        ledger_ex(rc, rids[i], HF_LEDGER_EXPIRED, 1, 1, 1, 100000, at_ms[i]);
    }
    assert_int_equal(reconcile_violations_of(rc, RC_K_EXPIRY_LATE), 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_EXPIRY_EARLY), 1);
    assert_int_equal(reconcile_violations_total(rc), 2);
    rc_counts_t n;
    reconcile_counts(rc, &n);
    assert_int_equal(n.expiries, 4);
    assert_int_equal(n.gateway_expiry_lag_ms_max, 6001);
    done(rc);
}

/* ---- check 7 */

static reconcile_t *ledger_ahead_of_counters(void)
{
    reconcile_t *rc = fresh();
    counter_final(rc, 10, 3, 2, 1);
    ledger(rc, "r1", HF_LEDGER_HELD, 3);
    ledger(rc, "r2", HF_LEDGER_HELD, 2); /* its hold is not at the counter (yet) */
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 10, 1);
    return rc;
}

static void test_ledger_vs_counters_is_reported_and_enforced_only_when_quiescent(void **state)
{
    reconcile_t *rc = ledger_ahead_of_counters();
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_total(rc), 0);
    rc_counts_t n;
    reconcile_counts(rc, &n);
    assert_int_equal(n.ledger_held_units, 5);
    assert_int_equal(n.counter_reserved_units, 3);
    assert_int_equal(n.reservations_out_of_step, 1);
    done(rc);

    rc = ledger_ahead_of_counters();
    reconcile_finish(rc, true);
    assert_int_equal(reconcile_violations_of(rc, RC_K_LEDGER_VS_COUNTERS), 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_RESERVATION_HOLDS), 1);
    assert_int_equal(reconcile_verdict(rc, true), RC_FAIL);
    assert_int_equal(reconcile_verdict(rc, false), RC_INCONCLUSIVE);
    done(rc);
}

/* ---- check 8: sales against stock */

static void result_ex(reconcile_t *rc, const char *rid, int32_t attempt, const char *wh,
                      hf_cmd_t cmd, hf_outcome_t outcome, int64_t qty)
{
    hf_counter_result_t r = {.attempt = attempt, .command = cmd, .outcome = outcome, .qty = qty};
    snprintf(r.reservation_id, sizeof r.reservation_id, "%s", rid);
    snprintf(r.warehouse_id, sizeof r.warehouse_id, "%s", wh);
    snprintf(r.sku, sizeof r.sku, "S");
    rc_pos_t pos = at(T_RESULTS);
    assert_int_equal(rec_counter_result(rc, &pos, &r), HF_OK);
}

/* A ledger event of rid with reason and one allocation at wh (none when qty 0). */
static void ledger_reason(reconcile_t *rc, const char *rid, hf_ledger_kind_t kind,
                          const char *reason, int64_t line_qty, const char *wh, int64_t qty)
{
    hf_ledger_event_t e;
    memset(&e, 0, sizeof e);
    snprintf(e.reservation_id, sizeof e.reservation_id, "%s", rid);
    e.kind = kind;
    e.lines_count = 1;
    snprintf(e.lines[0].sku, sizeof e.lines[0].sku, "S");
    e.lines[0].qty = line_qty;
    if (qty > 0) {
        e.allocations_count = 1;
        snprintf(e.allocations[0].warehouse_id, sizeof e.allocations[0].warehouse_id, "%s", wh);
        snprintf(e.allocations[0].sku, sizeof e.allocations[0].sku, "S");
        e.allocations[0].qty = qty;
    }
    snprintf(e.reason, sizeof e.reason, "%s", reason);
    e.expires_at_ms = 1000000;
    e.at_ms = 1000000;
    rc_pos_t pos = at(T_LEDGER);
    assert_int_equal(rec_ledger(rc, &pos, &e), HF_OK);
}

static size_t sales_violations(const reconcile_t *rc)
{
    return reconcile_violations_of(rc, RC_K_SALE_COMMIT_REFUSED) +
           reconcile_violations_of(rc, RC_K_SALE_COMMIT_REVOKED) +
           reconcile_violations_of(rc, RC_K_SALE_UNBACKED) +
           reconcile_violations_of(rc, RC_K_SALE_UNRECORDED) +
           reconcile_violations_of(rc, RC_K_SOLD_BEYOND_STOCK);
}

/* One unit in stock. r1 buys it. r2's Hold was refused, yet the gateway took a
 * forged OK for its answer, held and committed it: the counter answers its
 * CommitHold CONFLICT. Two units sold of one; every other check passes. */
static reconcile_t *sold_twice(void)
{
    reconcile_t *rc = fresh();
    committed_total_next = 1;
    counter_final(rc, 0, 0, 3, 1); /* 1 hold + 1 commit + 1 feed */
    ledger(rc, "r1", HF_LEDGER_HELD, 1);
    ledger(rc, "r1", HF_LEDGER_COMMITTED, 1);
    ledger(rc, "r2", HF_LEDGER_HELD, 1);
    ledger(rc, "r2", HF_LEDGER_COMMITTED, 1);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    result(rc, "r2", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 1);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 1);
    result(rc, "r2", HF_CMD_COMMIT, HF_OUTCOME_CONFLICT, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 1, 1);
    commit_cmd(rc, RC_IN_COMMANDS, "r1");
    commit_cmd(rc, RC_IN_COMMANDS, "r2");
    return rc;
}

static void test_a_sale_the_counter_refused_fails_the_verdict_on_any_snapshot(void **state)
{
    reconcile_t *rc = sold_twice();
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_of(rc, RC_K_SALE_COMMIT_REFUSED), 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_SOLD_BEYOND_STOCK), 1);
    assert_int_equal(reconcile_violations_total(rc), 2);
    assert_int_equal(reconcile_verdict(rc, false), RC_FAIL); /* the counter's answer is final */
    rc_counts_t n;
    reconcile_counts(rc, &n);
    assert_int_equal(n.ledger_sold_units, 2);
    assert_int_equal(n.counter_committed_units, 1);
    assert_int_equal(n.stock_fed_units_max, 1);
    done(rc);

    /* Quiescent, the unbacked units are named too. */
    rc = sold_twice();
    reconcile_finish(rc, true);
    assert_int_equal(reconcile_violations_of(rc, RC_K_SALE_UNBACKED), 1);
    assert_int_equal(reconcile_violations_total(rc), 3);
    done(rc);

    /* A commit of a hold the counter never saw: NOT_FOUND is a refusal too. */
    rc = fresh();
    ledger(rc, "r1", HF_LEDGER_HELD, 1);
    ledger(rc, "r1", HF_LEDGER_COMMITTED, 1);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_NOT_FOUND, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 1, 1);
    reconcile_finish(rc, false);
    assert_only(rc, RC_K_SALE_COMMIT_REFUSED, 1);
    done(rc);
}

static void test_a_sale_whose_commit_is_unanswered_fails_only_when_quiescent(void **state)
{
    for (int quiescent = 0; quiescent < 2; quiescent++) {
        reconcile_t *rc = fresh();
        counter_final(rc, 1, 1, 2, 1);
        ledger(rc, "r1", HF_LEDGER_HELD, 1);
        ledger(rc, "r1", HF_LEDGER_COMMITTED, 1);
        result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 1); /* its CommitHold not answered yet */
        feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 1, 1);
        reconcile_finish(rc, quiescent);
        assert_int_equal(reconcile_violations_of(rc, RC_K_SALE_UNBACKED), (size_t)quiescent);
        assert_int_equal(sales_violations(rc), (size_t)quiescent);
        done(rc);
    }
}

static void test_a_commit_revoked_without_the_sale_being_reversed_fails_when_quiescent(void **state)
{
    for (int reversed = 0; reversed < 2; reversed++) {
        reconcile_t *rc = fresh();
        ledger(rc, "r1", HF_LEDGER_HELD, 1);
        ledger(rc, "r1", HF_LEDGER_COMMITTED, 1);
        if (reversed) /* the shortfall reversal: legal */
            ledger_reason(rc, "r1", HF_LEDGER_RELEASED, "stock_shortfall", 1, "W1", 1);
        result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
        result(rc, "r1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 1);
        result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 1);
        feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 1, 1);
        reconcile_finish(rc, true);
        assert_int_equal(reconcile_violations_of(rc, RC_K_SALE_COMMIT_REVOKED), reversed ? 0 : 1);
        assert_int_equal(reconcile_violations_of(rc, RC_K_SALE_UNBACKED), reversed ? 0 : 1);
        assert_int_equal(sales_violations(rc), reversed ? 0 : 2);
        done(rc);
    }
}

static void test_a_reversed_sale_keeps_what_the_counters_committed(void **state)
{
    /* r1 held at W1 and W2 and committed; W2's hold was revoked by a count
     * before its CommitHold: W1 stays sold, W2 is given back. */
    reconcile_t *rc = fresh();
    ledger_ex(rc, "r1", HF_LEDGER_HELD, 2, 2, 1, 0, 0);
    ledger_ex(rc, "r1", HF_LEDGER_COMMITTED, 2, 2, 1, 0, 0);
    ledger_reason(rc, "r1", HF_LEDGER_RELEASED, "stock_shortfall", 2, "W2", 1);
    result_ex(rc, "r1", 0, "W1", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    result_ex(rc, "r1", 0, "W2", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    result_ex(rc, "r1", 0, "W2", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 1);
    result_ex(rc, "r1", 0, "W1", HF_CMD_COMMIT, HF_OUTCOME_OK, 1);
    result_ex(rc, "r1", 0, "W2", HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 1);
    result_ex(rc, "r1", 0, "W2", HF_CMD_RELEASE, HF_OUTCOME_OK, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 1, 1); /* W1 only: W2's unit was not sold */
    reconcile_finish(rc, true);
    assert_int_equal(sales_violations(rc), 0);
    rc_counts_t n;
    reconcile_counts(rc, &n);
    assert_int_equal(n.ledger_sold_units, 1);
    done(rc);

    /* A re-reserved late payment whose hold a count revoked, refunded naming
     * the units: nothing sold, nothing owed. */
    rc = fresh();
    ledger_ex(rc, "late", HF_LEDGER_HELD, 2, 1, 2, 500000, 400000);
    ledger_ex(rc, "late", HF_LEDGER_EXPIRED, 2, 1, 2, 500000, 500100);
    late_payment(rc, "late", "rereserved", 2, 2);
    late_payment(rc, "late", "refund", 2, 2);
    result_ex(rc, "late", 1, "W1", HF_CMD_HOLD, HF_OUTCOME_OK, 2);
    result_ex(rc, "late", 1, "W1", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 2);
    result_ex(rc, "late", 1, "W1", HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 2);
    reconcile_finish(rc, true);
    assert_int_equal(sales_violations(rc), 0);
    done(rc);

    /* The same without the refund: the late payment bought units no counter sold. */
    rc = fresh();
    ledger_ex(rc, "late", HF_LEDGER_HELD, 2, 1, 2, 500000, 400000);
    ledger_ex(rc, "late", HF_LEDGER_EXPIRED, 2, 1, 2, 500000, 500100);
    late_payment(rc, "late", "rereserved", 2, 2);
    late_payment(rc, "late", "refund", 2, 0); /* another payment's refund: names no units */
    result_ex(rc, "late", 1, "W1", HF_CMD_HOLD, HF_OUTCOME_OK, 2);
    result_ex(rc, "late", 1, "W1", HF_CMD_COMMIT, HF_OUTCOME_CONFLICT, 2);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 2, 1);
    reconcile_finish(rc, true);
    assert_int_equal(reconcile_violations_of(rc, RC_K_SALE_COMMIT_REFUSED), 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_SALE_UNBACKED), 1);
    done(rc);
}

static void test_a_counter_commit_the_ledger_never_sold_is_reported(void **state)
{
    /* A CommitHold that no payment asked for (produced straight to the
     * commands topic): the counter sold a unit of a reservation still HELD. */
    reconcile_t *rc = fresh();
    committed_total_next = 1;
    counter_final(rc, 0, 0, 3, 1);
    ledger(rc, "r1", HF_LEDGER_HELD, 1);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 1, 1);
    commit_cmd(rc, RC_IN_COMMANDS, "r1");
    reconcile_finish(rc, false);
    assert_only(rc, RC_K_SALE_UNRECORDED, 1);
    assert_int_equal(reconcile_verdict(rc, true), RC_FAIL);
    assert_int_equal(reconcile_verdict(rc, false), RC_INCONCLUSIVE); /* the ledger read first */
    done(rc);
}

static void test_units_sold_beyond_the_stock_fed_are_reported(void **state)
{
    /* The counter sold 3 of 2 received (its on_hand says so too). */
    reconcile_t *rc = fresh();
    committed_total_next = 3;
    counter_final(rc, 0, 0, 3, 1);
    ledger(rc, "r1", HF_LEDGER_HELD, 3);
    ledger(rc, "r1", HF_LEDGER_COMMITTED, 3);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 2, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 5, 1); /* a replay adds nothing */
    commit_cmd(rc, RC_IN_COMMANDS, "r1");
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_of(rc, RC_K_SOLD_BEYOND_STOCK), 1);
    assert_int_equal(sales_violations(rc), 1);
    done(rc);

    /* Counts and a positive adjustment bring stock in; a negative one does not. */
    rc = fresh();
    ledger(rc, "r1", HF_LEDGER_HELD, 6);
    ledger(rc, "r1", HF_LEDGER_COMMITTED, 6);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 2, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_ADJUST, -2, 2);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_COUNT, 3, 3);
    feed(rc, RC_IN_COMMANDS, HF_FEED_ADJUST, 1, 4);
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_of(rc, RC_K_SOLD_BEYOND_STOCK), 0); /* 2 + 3 + 1 */
    done(rc);
}

static void feed_as_of(reconcile_t *rc, rc_input_t in, int64_t qty, int64_t seq, int64_t as_of)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_STOCK_FEED;
    snprintf(rec.u.stock_feed.warehouse_id, sizeof rec.u.stock_feed.warehouse_id, "W1");
    snprintf(rec.u.stock_feed.sku, sizeof rec.u.stock_feed.sku, "S");
    rec.u.stock_feed.kind = HF_FEED_COUNT_AS_OF;
    rec.u.stock_feed.qty = qty;
    rec.u.stock_feed.feed_seq = seq;
    rec.u.stock_feed.as_of_committed = as_of;
    rc_pos_t pos = at(in == RC_IN_STOCK_FEED ? T_FEED : T_COMMANDS);
    assert_int_equal(rec_counter_input(rc, in, &pos, &rec), HF_OK);
}

static void test_an_as_of_count_makes_on_hand_exact_whatever_the_commit_order(void **state)
{
    /* 5 received; 2 sold, the count (3 as of committed 2) taken; 1 sold; the
     * count applied. Commits on the other topic: on_hand is 3 - 1 = 2, exactly;
     * 3 would be the unit sold after the count given back. */
    int64_t on_hands[] = {2, 3};
    for (int i = 0; i < 2; i++) {
        reconcile_t *rc = fresh();
        committed_total_next = 3;
        counter_final(rc, on_hands[i], 0, 6, 2);
        result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 2);
        result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 2);
        result(rc, "r2", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
        result(rc, "r2", HF_CMD_COMMIT, HF_OUTCOME_OK, 1);
        feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 5, 1);
        feed_as_of(rc, RC_IN_STOCK_FEED, 3, 2, 2);
        commit_cmd(rc, RC_IN_COMMANDS, "r1");
        commit_cmd(rc, RC_IN_COMMANDS, "r2");
        reconcile_finish(rc, false);
        assert_int_equal(reconcile_violations_of(rc, RC_K_ON_HAND_MISMATCH), (size_t)i);
        rc_counts_t n;
        reconcile_counts(rc, &n);
        assert_int_equal(n.pairs_on_hand_exact, 1);
        done(rc);
    }
}

/* ---- shards: a chain of six stores, pairs W1|S..W6|S spread over the shards */

/* What a planted breach changes in the chain's history. */
typedef struct {
    bool invented_unit; /* pair conservation: W5's counter has 11 of the 10 fed */
    bool settled_twice; /* holds: m1's committed hold at W3 is released too */
    bool foreign_sale;  /* escrow: gateway partition 1 sells 2 units at W6, never allotted */
    bool hold_lost;     /* reservations: m2's hold at W4 never reached its counter */
} chain_plant_t;

#define CHAIN_PAIRS 6

static void chain_feed(reconcile_t *rc, const char *wh, int64_t qty, int64_t seq)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_STOCK_FEED;
    snprintf(rec.u.stock_feed.warehouse_id, sizeof rec.u.stock_feed.warehouse_id, "%s", wh);
    snprintf(rec.u.stock_feed.sku, sizeof rec.u.stock_feed.sku, "S");
    rec.u.stock_feed.kind = HF_FEED_RECEIVE;
    rec.u.stock_feed.qty = qty;
    rec.u.stock_feed.feed_seq = seq;
    rc_pos_t pos = at(T_FEED);
    assert_int_equal(rec_counter_input(rc, RC_IN_STOCK_FEED, &pos, &rec), HF_OK);
}

static void chain_commit_cmd(reconcile_t *rc, const char *wh, const char *rid)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_COMMIT_HOLD;
    hf_commit_hold_t *c = &rec.u.commit_hold;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", rid);
    snprintf(c->warehouse_id, sizeof c->warehouse_id, "%s", wh);
    snprintf(c->sku, sizeof c->sku, "S");
    rc_pos_t pos = at(T_COMMANDS);
    assert_int_equal(rec_counter_input(rc, RC_IN_COMMANDS, &pos, &rec), HF_OK);
}

static void chain_allotment_sale(reconcile_t *rc, const char *wh, int32_t holder, const char *rid,
                                 int64_t qty)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_ALLOTMENT_SALE;
    hf_allotment_sale_t *a = &rec.u.allotment_sale;
    snprintf(a->warehouse_id, sizeof a->warehouse_id, "%s", wh);
    snprintf(a->sku, sizeof a->sku, "S");
    snprintf(a->reservation_id, sizeof a->reservation_id, "%s", rid);
    a->holder_partition = holder;
    a->qty = qty;
    rc_pos_t pos = at(T_COMMANDS);
    assert_int_equal(rec_counter_input(rc, RC_IN_COMMANDS, &pos, &rec), HF_OK);
}

/* Gateway partition 0's EscrowState of an empty allotment at W1. */
static void chain_escrow_state(reconcile_t *rc)
{
    hf_escrow_state_t es = {.allotted = 0, .balance = 0};
    snprintf(es.warehouse_id, sizeof es.warehouse_id, "W1");
    snprintf(es.sku, sizeof es.sku, "S");
    rc_pos_t pos = {"holdfast.gateway-changelog", 0, offset_next++};
    assert_int_equal(rec_escrow_state(rc, &pos, "W1", "S", &es), HF_OK);
}

typedef struct {
    const char *wh;
    int64_t on_hand, reserved, version, committed;
} chain_end_t;

/* Each store receives 10 units of S. m1 buys 1 at W1, W2 and W3 (one sale over
 * three pairs); m2 holds 1 at W1..W4 and stays HELD; m3 holds 1 at W1 and W2
 * and is released. Gateway partition 0 has an empty allotment at W1 (so the
 * gateway's EscrowStates are judged). Counters at the end: W1, W2 on_hand 9
 * reserved 1 version 6 (3 holds, 2 settles, 1 feed); W3 9/1/4; W4 10/1/2;
 * W5, W6 10/0/1. */
static reconcile_t *chain_history(const chain_plant_t *p)
{
    reconcile_t *rc = fresh();
    history_start(&rc->lim, 2);
    reconcile_set_gateway_partitions(rc, 2);
    int64_t w6_sold = p->foreign_sale ? 2 : 0;
    const chain_end_t end[CHAIN_PAIRS] = {{"W1", 9, 1, 6, 1},
                                          {"W2", 9, 1, 6, 1},
                                          {"W3", 9, 1, 4, 1},
                                          {"W4", 10, p->hold_lost ? 0 : 1, p->hold_lost ? 1 : 2, 0},
                                          {"W5", p->invented_unit ? 11 : 10, 0, 1, 0},
                                          {"W6", 10 - w6_sold, 0, w6_sold ? 2 : 1, w6_sold}};
    for (int i = 0; i < CHAIN_PAIRS; i++) {
        committed_total_next = end[i].committed;
        counter_state(rc, end[i].wh, end[i].on_hand, end[i].reserved, end[i].version, 1);
    }
    chain_escrow_state(rc);
    for (int i = 0; i < CHAIN_PAIRS; i++)
        level(rc, end[i].wh, end[i].on_hand, end[i].reserved, end[i].on_hand - end[i].reserved,
              end[i].version);
    ledger_ex(rc, "m1", HF_LEDGER_HELD, 3, 3, 1, 0, 0);
    ledger_ex(rc, "m1", HF_LEDGER_COMMITTED, 3, 3, 1, 0, 0);
    ledger_ex(rc, "m2", HF_LEDGER_HELD, 4, 4, 1, 0, 0);
    ledger_ex(rc, "m3", HF_LEDGER_HELD, 2, 2, 1, 0, 0);
    ledger_ex(rc, "m3", HF_LEDGER_RELEASED, 2, 2, 1, 0, 0);
    const char *at_w[] = {"W1", "W2", "W3", "W4"};
    for (int i = 0; i < 3; i++)
        result_ex(rc, "m1", 0, at_w[i], HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    for (int i = 0; i < (p->hold_lost ? 3 : 4); i++)
        result_ex(rc, "m2", 0, at_w[i], HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    for (int i = 0; i < 2; i++) {
        result_ex(rc, "m3", 0, at_w[i], HF_CMD_HOLD, HF_OUTCOME_OK, 1);
        result_ex(rc, "m3", 0, at_w[i], HF_CMD_RELEASE, HF_OUTCOME_OK, 1);
    }
    for (int i = 0; i < 3; i++)
        result_ex(rc, "m1", 0, at_w[i], HF_CMD_COMMIT, HF_OUTCOME_OK, 1);
    if (p->settled_twice)
        result_ex(rc, "m1", 0, "W3", HF_CMD_RELEASE, HF_OUTCOME_OK, 1);
    for (int i = 0; i < CHAIN_PAIRS; i++)
        chain_feed(rc, end[i].wh, 10, 1);
    for (int i = 0; i < 3; i++)
        chain_commit_cmd(rc, at_w[i], "m1");
    if (p->foreign_sale)
        chain_allotment_sale(rc, "W6", 1, "fx", 2);
    return rc;
}

/* Exactly these kinds fired, each as often as named (-1 ends the list). */
typedef struct {
    int kind;
    size_t count;
} kind_count_t;

static void assert_kinds(const reconcile_t *rc, const kind_count_t *want)
{
    size_t total = 0;
    bool ok = true;
    for (; want->kind >= 0; want++) {
        total += want->count;
        ok = ok && reconcile_violations_of(rc, (rc_kind_t)want->kind) == want->count;
    }
    ok = ok && reconcile_violations_total(rc) == total;
    if (!ok)
        print_violations(rc);
    assert_true(ok);
}

/* The chain's pairs fall in two shards at least for every K, and so do m1's
 * sale and m2's holds; each shard's pass keeps fewer pairs than one would. */
static void test_the_chain_is_split_over_the_shards(void **state)
{
    const char *wh[CHAIN_PAIRS] = {"W1", "W2", "W3", "W4", "W5", "W6"};
    reconcile_t *rc = chain_history(&(chain_plant_t){0});
    reconcile_finish(rc, true);
    for (uint32_t k = 2; k <= RC_TEST_SHARDS_MAX; k++) {
        uint32_t first = reconcile_pair_shard("W1", "S", k);
        bool m1_split = false, m2_split = false;
        for (int i = 1; i < CHAIN_PAIRS; i++) {
            bool other = reconcile_pair_shard(wh[i], "S", k) != first;
            m1_split |= other && i < 3;
            m2_split |= other && i < 4;
        }
        if (!m1_split || !m2_split)
            fail_msg("%u shards put m1's or m2's pairs in one shard: rename the stores", k);
        reconcile_t *many = NULL;
        assert_int_equal(reconcile_history_replay(history, &history_limits, 2, k, true, &many),
                         HF_OK);
        rc_tables_t peak;
        reconcile_tables_peak(many, &peak);
        assert_true(peak.pairs < CHAIN_PAIRS);
        rc_counts_t n;
        reconcile_counts(many, &n);
        assert_int_equal(n.pairs, CHAIN_PAIRS);
        reconcile_destroy(many);
    }
    assert_kinds(rc, (kind_count_t[]){{-1, 0}});
    done(rc);
}

/* One breach of each family, planted in the chain: caught, and only it, in
 * 1 to 4 shards (done() replays each history in 1..4 shards). */
static void test_a_breach_of_each_family_is_caught_in_any_shard_count(void **state)
{
    const struct {
        chain_plant_t plant;
        kind_count_t moving[5], quiescent[6];
    } cases[] = {
        {{0}, {{-1, 0}}, {{-1, 0}}},
        {{.invented_unit = true},
         {{RC_K_ON_HAND_MISMATCH, 1}, {-1, 0}},
         {{RC_K_ON_HAND_MISMATCH, 1}, {-1, 0}}},
        {{.settled_twice = true},
         {{RC_K_HOLD_SETTLED_TWICE, 1}, {-1, 0}},
         {{RC_K_HOLD_SETTLED_TWICE, 1}, {-1, 0}}},
        {{.foreign_sale = true},
         {{RC_K_ALLOTMENT_OVERSOLD, 1},
          {RC_K_ALLOTMENT_VS_COUNTER, 1},
          {RC_K_SALE_UNRECORDED, 1},
          {-1, 0}},
         {{RC_K_ALLOTMENT_OVERSOLD, 1},
          {RC_K_ALLOTMENT_VS_COUNTER, 1},
          {RC_K_SALE_UNRECORDED, 1},
          {RC_K_ESCROW_STATE_VS_ALLOTMENT, 1}, /* judged: W1's EscrowState is another shard's */
          {-1, 0}}},
        {{.hold_lost = true},
         {{-1, 0}},
         {{RC_K_RESERVATION_HOLDS, 1}, {RC_K_LEDGER_VS_COUNTERS, 1}, {-1, 0}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int q = 0; q < 2; q++) {
            reconcile_t *rc = chain_history(&cases[i].plant);
            reconcile_finish(rc, q == 1);
            assert_kinds(rc, q ? cases[i].quiescent : cases[i].moving);
            done(rc);
        }
}

/* ---- plumbing */

static void test_tables_grow_with_the_data_and_stop_at_their_cap(void **state)
{
    rc_map_t m;
    assert_int_equal(rc_map_init(&m, sizeof(int64_t), 1000), HF_OK);
    char key[32];
    for (int i = 0; i < 1000; i++) {
        uint32_t idx;
        bool added = false;
        int n = snprintf(key, sizeof key, "key-%d", i);
        assert_int_equal(rc_map_upsert(&m, key, (size_t)n, &idx, &added), HF_OK);
        assert_true(added);
        *(int64_t *)rc_map_val(&m, idx) = i;
    }
    for (int i = 0; i < 1000; i++) {
        uint32_t idx;
        int n = snprintf(key, sizeof key, "key-%d", i);
        assert_true(rc_map_find(&m, key, (size_t)n, &idx));
        assert_int_equal(*(int64_t *)rc_map_val(&m, idx), i);
    }
    uint32_t idx;
    assert_int_equal(rc_map_upsert(&m, "one-more", 8, &idx, NULL), HF_ERR_LIMIT);
    assert_int_equal(rc_map_upsert(&m, "key-7", 5, &idx, NULL), HF_OK); /* existing: fine */
    assert_false(rc_map_find(&m, "key-1000", 8, &idx));
    assert_true(rc_map_bytes(&m) >= 1000 * (sizeof(int64_t) + 8 * 2)); /* values and keys */
    rc_map_free(&m);

    /* The pairs' side arrays: zeroed values, stable indexes, a cap. */
    rc_vec_t v;
    rc_vec_init(&v, sizeof(int64_t), 300);
    for (uint32_t i = 0; i < 300; i++) {
        uint32_t at = 0;
        assert_int_equal(rc_vec_push(&v, &at), HF_OK);
        assert_int_equal(at, i);
        assert_int_equal(*(int64_t *)rc_vec_at(&v, at), 0);
        *(int64_t *)rc_vec_at(&v, at) = i;
    }
    assert_int_equal(rc_vec_push(&v, &idx), HF_ERR_LIMIT);
    assert_int_equal(*(int64_t *)rc_vec_at(&v, 299), 299);
    assert_true(rc_vec_bytes(&v) >= 300 * sizeof(int64_t));
    rc_vec_free(&v);
}

/* The sharded replay's local copy gives back what was put, step by step, in
 * order: values, tombstones, positions; a shared file as often as asked. */
static void test_the_spill_gives_back_each_shards_records_in_order(void **state)
{
    rc_spill_t *sp = NULL;
    char errstr[256];
    assert_int_equal(rc_spill_open("/tmp", 3, &sp, errstr, sizeof errstr), HF_OK);
    const char *keys[] = {"Cw|a|", "Cw|b|", "A w|c", "r1"};
    const uint8_t steps[] = {1, 1, 2, 4}, files[] = {1, 2, 1, 0};
    for (int i = 0; i < 4; i++) {
        kafka_msg_t m = {.topic = "t", .partition = i, .offset = 100 + i, .key = keys[i]};
        m.key_len = strlen(keys[i]);
        m.value = i == 2 ? NULL : "value";
        m.value_len = i == 2 ? 0 : 5;
        assert_int_equal(rc_spill_put(sp, files[i], steps[i], &m, errstr, sizeof errstr), HF_OK);
    }
    kafka_msg_t m;
    bool got = false;
    assert_int_equal(rc_spill_rewind(sp, 1, errstr, sizeof errstr), HF_OK);
    assert_int_equal(rc_spill_next(sp, 1, 1, &m, &got, errstr, sizeof errstr), HF_OK);
    assert_true(got);
    assert_int_equal(m.offset, 100);
    assert_memory_equal(m.key, "Cw|a|", 5);
    assert_memory_equal(m.value, "value", 5);
    assert_int_equal(rc_spill_next(sp, 1, 1, &m, &got, errstr, sizeof errstr), HF_OK);
    assert_false(got); /* the next one is of step 2 */
    assert_int_equal(rc_spill_next(sp, 1, 2, &m, &got, errstr, sizeof errstr), HF_OK);
    assert_true(got);
    assert_null(m.value); /* a tombstone */
    assert_int_equal(m.partition, 2);
    assert_int_equal(rc_spill_next(sp, 1, 2, &m, &got, errstr, sizeof errstr), HF_OK);
    assert_false(got);
    rc_spill_done(sp, 1);
    for (int twice = 0; twice < 2; twice++) {
        assert_int_equal(rc_spill_rewind(sp, 0, errstr, sizeof errstr), HF_OK);
        assert_int_equal(rc_spill_next(sp, 0, 4, &m, &got, errstr, sizeof errstr), HF_OK);
        assert_true(got);
        assert_memory_equal(m.key, "r1", 2);
    }
    assert_true(rc_spill_bytes_max(sp) > 0);
    rc_spill_close(sp);
    assert_int_equal(rc_spill_open("/nonexistent-dir", 2, &sp, errstr, sizeof errstr), HF_ERR_IO);
    assert_non_null(strstr(errstr, "--spill-dir"));
}

static void test_verdict_is_one_json_object_naming_each_violation(void **state)
{
    reconcile_t *rc = fresh();
    level(rc, "W1", 5, 0, -1, 1);
    ledger(rc, "r1", HF_LEDGER_HELD, 1);
    ledger(rc, "r1", HF_LEDGER_RELEASED, 1);
    ledger(rc, "r1", HF_LEDGER_EXPIRED, 1);
    reconcile_finish(rc, false);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(reconcile_print(rc, true, 1, false, "{\"holdfast.ledger\": 3}", 0.5, f),
                     HF_OK);
    fclose(f);
    json_error_t jerr;
    json_t *o = json_loads(buf, 0, &jerr);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "verdict")), "FAIL");
    /* available -1 is both negative and not on_hand - reserved; then the ledger;
     * at the end, the level has no counter state behind it. */
    assert_int_equal(json_integer_value(json_object_get(o, "violations_total")), 4);
    json_t *v = json_object_get(o, "violations");
    assert_int_equal(json_array_size(v), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(v, 0), "kind")),
                        "stock_level_negative");
    assert_string_equal(json_string_value(json_object_get(json_array_get(v, 0), "key")), "W1|S");
    assert_string_equal(json_string_value(json_object_get(json_array_get(v, 2), "kind")),
                        "ledger_terminal_twice");
    assert_string_equal(json_string_value(json_object_get(json_array_get(v, 2), "key")), "r1");
    json_t *counts = json_object_get(o, "counts");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(counts, "records"), "holdfast.ledger")),
        3);
    assert_null(json_object_get(o, "run")); /* no replay behind it */
    json_decref(o);
    free(buf);

    /* A driver's verdict says how the replay went, after everything else. */
    rc_run_t run = {.records = 8000000,
                    .snapshot_records = 2000000,
                    .seconds = 10.0,
                    .shards = 4,
                    .passes = 4,
                    .peak_rss_kib = 300 << 10};
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(reconcile_print_run(rc, true, 1, false, NULL, &run, f), HF_OK);
    fclose(f);
    assert_true(strncmp(buf, "{\"verdict\":\"FAIL\"", 17) == 0);
    o = json_loads(buf, 0, &jerr);
    assert_non_null(o);
    json_t *r = json_object_get(o, "run");
    assert_int_equal(json_integer_value(json_object_get(r, "records")), 8000000);
    assert_true(json_real_value(json_object_get(r, "records_per_s")) == 800000.0);
    assert_true(json_real_value(json_object_get(r, "seconds_per_million_records")) == 5.0);
    assert_int_equal(json_integer_value(json_object_get(r, "shards")), 4);
    assert_int_equal(json_integer_value(json_object_get(r, "peak_rss_mib")), 300);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(r, "tables_peak"), "reservations")), 1);
    json_decref(o);
    free(buf);
    done(rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_history_passes_every_check_even_quiescent),
        cmocka_unit_test(test_a_late_payment_may_buy_its_expired_lines_once),
        cmocka_unit_test(test_negative_stock_level_is_reported),
        cmocka_unit_test(test_stock_level_versions_must_rise_per_pair),
        cmocka_unit_test(test_counter_state_breaking_its_invariants_is_reported),
        cmocka_unit_test(test_units_lost_or_invented_at_a_counter_break_conservation),
        cmocka_unit_test(test_feeds_apply_once_in_order_up_to_the_counter_horizon),
        cmocka_unit_test(test_a_count_bounds_on_hand_when_commits_are_on_the_other_topic),
        cmocka_unit_test(test_a_count_among_commands_orders_commits_exactly),
        cmocka_unit_test(test_feeds_on_both_topics_leave_on_hand_unjudged),
        cmocka_unit_test(test_revoked_holds_stay_reserved_until_released),
        cmocka_unit_test(test_a_hold_applied_twice_is_reported),
        cmocka_unit_test(test_two_terminal_ledger_events_are_reported),
        cmocka_unit_test(test_illegal_ledger_transitions_are_reported),
        cmocka_unit_test(test_a_ledger_event_naming_another_key_than_the_reservation_is_reported),
        cmocka_unit_test(test_allocations_must_sum_to_the_requested_lines),
        cmocka_unit_test(test_an_idempotency_key_with_two_outcomes_is_reported),
        cmocka_unit_test(test_a_reply_naming_other_allocations_than_the_ledger_is_reported),
        cmocka_unit_test(test_expiry_must_come_within_the_bound_after_expires_at),
        cmocka_unit_test(test_ledger_vs_counters_is_reported_and_enforced_only_when_quiescent),
        cmocka_unit_test(test_a_sale_the_counter_refused_fails_the_verdict_on_any_snapshot),
        cmocka_unit_test(test_a_sale_whose_commit_is_unanswered_fails_only_when_quiescent),
        cmocka_unit_test(
            test_a_commit_revoked_without_the_sale_being_reversed_fails_when_quiescent),
        cmocka_unit_test(test_a_reversed_sale_keeps_what_the_counters_committed),
        cmocka_unit_test(test_a_counter_commit_the_ledger_never_sold_is_reported),
        cmocka_unit_test(test_units_sold_beyond_the_stock_fed_are_reported),
        cmocka_unit_test(test_an_as_of_count_makes_on_hand_exact_whatever_the_commit_order),
        cmocka_unit_test(test_the_chain_is_split_over_the_shards),
        cmocka_unit_test(test_a_breach_of_each_family_is_caught_in_any_shard_count),
        cmocka_unit_test(test_tables_grow_with_the_data_and_stop_at_their_cap),
        cmocka_unit_test(test_the_spill_gives_back_each_shards_records_in_order),
        cmocka_unit_test(test_verdict_is_one_json_object_naming_each_violation),
    };
    return cmocka_run_group_tests_name("reconcile checks", tests, NULL, history_teardown);
}
