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
/* committed_total of the next CounterState counter_state() writes. */
static int64_t committed_total_next;

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
    offset_next = 0;
    committed_total_next = 0;
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
    assert_int_equal(reconcile_counter_state(rc, &pos, wh, "S", &c), HF_OK);
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
    assert_int_equal(reconcile_stock_level(rc, &pos, &sl), HF_OK);
}

static void result(reconcile_t *rc, const char *rid, hf_cmd_t cmd, hf_outcome_t outcome,
                   int64_t qty)
{
    hf_counter_result_t r = {.attempt = 0, .command = cmd, .outcome = outcome, .qty = qty};
    snprintf(r.reservation_id, sizeof r.reservation_id, "%s", rid);
    snprintf(r.warehouse_id, sizeof r.warehouse_id, "W1");
    snprintf(r.sku, sizeof r.sku, "S");
    rc_pos_t pos = at(T_RESULTS);
    assert_int_equal(reconcile_counter_result(rc, &pos, &r), HF_OK);
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
    assert_int_equal(reconcile_counter_input(rc, in, pos, &rec), HF_OK);
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
    assert_int_equal(reconcile_counter_input(rc, in, &pos, &rec), HF_OK);
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
    rc_pos_t pos = at(T_LEDGER);
    assert_int_equal(reconcile_ledger(rc, &pos, &e), HF_OK);
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
    assert_int_equal(reconcile_reply(rc, &pos, &r), HF_OK);
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
    reconcile_destroy(rc);
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
    assert_int_equal(reconcile_ledger(rc, &pos, &e), HF_OK);
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
    reconcile_destroy(rc);

    /* A COMMITTED reply naming neither the HELD nor the re-reserved units. */
    rc = fresh();
    ledger_ex(rc, "late", HF_LEDGER_HELD, 2, 2, 1, 500000, 400000);
    ledger_ex(rc, "late", HF_LEDGER_EXPIRED, 2, 2, 1, 500000, 500100);
    late_payment(rc, "late", "rereserved", 2, 2);
    reply(rc, "late", "pay", HF_REPLY_COMMITTED, 1);
    assert_only(rc, RC_K_REPLY_VS_LEDGER, 1);
    reconcile_destroy(rc);

    /* Twice; units that do not add up to the lines; of a reservation that
     * did not expire. */
    rc = fresh();
    ledger_ex(rc, "a", HF_LEDGER_HELD, 2, 1, 2, 500000, 400000);
    ledger_ex(rc, "a", HF_LEDGER_EXPIRED, 2, 1, 2, 500000, 500100);
    late_payment(rc, "a", "rereserved", 2, 2);
    late_payment(rc, "a", "rereserved", 2, 2);
    assert_only(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, 1);
    reconcile_destroy(rc);
    rc = fresh();
    ledger_ex(rc, "b", HF_LEDGER_HELD, 2, 1, 2, 500000, 400000);
    ledger_ex(rc, "b", HF_LEDGER_EXPIRED, 2, 1, 2, 500000, 500100);
    late_payment(rc, "b", "rereserved", 2, 1);
    assert_only(rc, RC_K_LEDGER_ALLOCATIONS, 1);
    reconcile_destroy(rc);
    rc = fresh();
    ledger(rc, "c", HF_LEDGER_HELD, 2);
    ledger(rc, "c", HF_LEDGER_RELEASED, 2);
    late_payment(rc, "c", "refund", 2, 0); /* fine: a refund of a released one */
    late_payment(rc, "c", "rereserved", 2, 2);
    assert_only(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, 1);
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);
}

static void test_counter_state_breaking_its_invariants_is_reported(void **state)
{
    reconcile_t *rc = fresh();
    counter_state(rc, "W1", 2, 3, 1, 0); /* more promised than on hand, nothing revoking */
    assert_int_equal(reconcile_violations_of(rc, RC_K_COUNTER_STATE_INVALID), 1);
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);

    /* on_hand 8: one committed unit came back from nowhere; one more version. */
    rc = valid_history();
    counter_state(rc, "W1", 8, 4, 9, 1);
    level(rc, "W1", 8, 4, 4, 9);
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_of(rc, RC_K_ON_HAND_MISMATCH), 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_VERSION_MISMATCH), 1);
    assert_int_equal(reconcile_violations_total(rc), 2);
    reconcile_destroy(rc);
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
    assert_int_equal(reconcile_dead_letter(rc, &d), HF_OK);
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
    reconcile_destroy(rc);
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
        reconcile_destroy(rc);
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
        reconcile_destroy(rc);
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
    reconcile_destroy(rc);
}

static void test_revoked_holds_stay_reserved_until_released(void **state)
{
    reconcile_t *rc = fresh();
    hf_counter_state_t c = {
        .on_hand = 2, .reserved = 5, .revoking = 3, .version = 4, .feed_seq = 2};
    rc_pos_t pos = at(T_CHANGELOG);
    assert_int_equal(reconcile_counter_state(rc, &pos, "W1", "S", &c), HF_OK);
    hf_stock_level_t sl = {.warehouse_id = "W1",
                           .sku = "S",
                           .on_hand = 2,
                           .reserved = 5,
                           .shortfall = 3,
                           .version = 4};
    pos = at(T_LEVELS);
    assert_int_equal(reconcile_stock_level(rc, &pos, &sl), HF_OK);
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
    reconcile_destroy(rc);
}

/* ---- check 3 */

static void test_a_hold_applied_twice_is_reported(void **state)
{
    reconcile_t *rc = fresh();
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 3);
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 4);
    assert_only(rc, RC_K_HOLD_OUTCOME_CHANGED, 2);
    reconcile_destroy(rc);

    rc = fresh();
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3);
    result(rc, "r1", HF_CMD_RELEASE, HF_OUTCOME_OK, 3);
    assert_only(rc, RC_K_HOLD_SETTLED_TWICE, 1);
    reconcile_destroy(rc);

    rc = fresh();
    result(rc, "r1", HF_CMD_HOLD, HF_OUTCOME_INSUFFICIENT, 3);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_OK, 3);
    result(rc, "r2", HF_CMD_HOLD, HF_OUTCOME_OK, 1);
    result(rc, "r2", HF_CMD_RELEASE, HF_OUTCOME_NOT_FOUND, 1);
    assert_only(rc, RC_K_COUNTER_RESULT_ILLEGAL, 2);
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);
}

static void test_allocations_must_sum_to_the_requested_lines(void **state)
{
    reconcile_t *rc = fresh();
    ledger_ex(rc, "ok", HF_LEDGER_HELD, 6, 2, 3, 0, 0); /* 3 + 3 = 6 */
    ledger_ex(rc, "short", HF_LEDGER_HELD, 6, 1, 5, 0, 0);
    ledger_ex(rc, "over", HF_LEDGER_HELD, 6, 3, 3, 0, 0);
    ledger_ex(rc, "ok", HF_LEDGER_COMMITTED, 6, 1, 5, 0, 0);
    assert_only(rc, RC_K_LEDGER_ALLOCATIONS, 3);
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);

    rc = ledger_ahead_of_counters();
    reconcile_finish(rc, true);
    assert_int_equal(reconcile_violations_of(rc, RC_K_LEDGER_VS_COUNTERS), 1);
    assert_int_equal(reconcile_violations_of(rc, RC_K_RESERVATION_HOLDS), 1);
    assert_int_equal(reconcile_verdict(rc, true), RC_FAIL);
    assert_int_equal(reconcile_verdict(rc, false), RC_INCONCLUSIVE);
    reconcile_destroy(rc);
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
    assert_int_equal(reconcile_counter_result(rc, &pos, &r), HF_OK);
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
    assert_int_equal(reconcile_ledger(rc, &pos, &e), HF_OK);
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
    reconcile_destroy(rc);

    /* Quiescent, the unbacked units are named too. */
    rc = sold_twice();
    reconcile_finish(rc, true);
    assert_int_equal(reconcile_violations_of(rc, RC_K_SALE_UNBACKED), 1);
    assert_int_equal(reconcile_violations_total(rc), 3);
    reconcile_destroy(rc);

    /* A commit of a hold the counter never saw: NOT_FOUND is a refusal too. */
    rc = fresh();
    ledger(rc, "r1", HF_LEDGER_HELD, 1);
    ledger(rc, "r1", HF_LEDGER_COMMITTED, 1);
    result(rc, "r1", HF_CMD_COMMIT, HF_OUTCOME_NOT_FOUND, 1);
    feed(rc, RC_IN_STOCK_FEED, HF_FEED_RECEIVE, 1, 1);
    reconcile_finish(rc, false);
    assert_only(rc, RC_K_SALE_COMMIT_REFUSED, 1);
    reconcile_destroy(rc);
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
        reconcile_destroy(rc);
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
        reconcile_destroy(rc);
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
    reconcile_destroy(rc);

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
    reconcile_destroy(rc);

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
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);
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
    reconcile_destroy(rc);

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
    reconcile_destroy(rc);
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
    assert_int_equal(reconcile_counter_input(rc, in, &pos, &rec), HF_OK);
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
        reconcile_destroy(rc);
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
    rc_map_free(&m);
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
    json_decref(o);
    free(buf);
    reconcile_destroy(rc);
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
        cmocka_unit_test(test_tables_grow_with_the_data_and_stop_at_their_cap),
        cmocka_unit_test(test_verdict_is_one_json_object_naming_each_violation),
    };
    return cmocka_run_group_tests_name("reconcile checks", tests, NULL, NULL);
}
