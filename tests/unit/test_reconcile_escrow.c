/* The reconciler's escrow checks (check 9, DESIGN.md section 10 invariant 7)
 * over synthetic histories: a history where a gateway partition is granted an
 * allotment, holds, sells, releases and returns units of it next to a direct
 * hold passes with every check enforced, as does a sale of a recalled
 * allotment answered REVOKED and undone; each planted breach fails for its own
 * reason — a sale beyond the allotment, units held in escrow without an
 * allotment, a grant that promises units twice (oversell), a COMMITTED escrow
 * allocation without an AllotmentSale, a REVOKED answer to no sale, a grant
 * beyond what was asked, a gateway EscrowState that is not allotted = balance +
 * held — and the verdict counts the escrow traffic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kafka.h"
#include "lib/reconcile.h"
#include "lib/reconcile_int.h"

#define T_LEVELS    "holdfast.stock-levels"
#define T_RESULTS   "holdfast.counter-results"
#define T_LEDGER    "holdfast.ledger"
#define T_CHANGELOG "holdfast.counter-changelog"
#define T_FEED      "holdfast.stock-feed"
#define T_COMMANDS  "holdfast.counter-commands"

/* Gateway partitions of the synthetic deployment. */
#define GW_PARTITIONS 2

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

static int rec_allotment_state(reconcile_t *rc, const rc_pos_t *pos, const char *wh,
                               const char *sku, const hf_allotment_state_t *a)
{
    hf_record_t *r = rec_of(HF_REC_ALLOTMENT_STATE);
    r->u.allotment_state = *a;
    return record(rc, &(rc_feed_t){RC_FEED_ALLOTMENT_STATE, *pos, 0, wh, sku, r});
}

static int rec_escrow_state(reconcile_t *rc, const rc_pos_t *pos, const char *wh, const char *sku,
                            const hf_escrow_state_t *es)
{
    hf_record_t *r = es ? rec_of(HF_REC_ESCROW_STATE) : NULL;
    if (r)
        r->u.escrow_state = *es;
    return record(rc, &(rc_feed_t){RC_FEED_ESCROW_STATE, *pos, 0, wh, sku, r});
}

static int rec_allotment_grant(reconcile_t *rc, const rc_pos_t *pos, const hf_allotment_grant_t *g)
{
    hf_record_t *r = rec_of(HF_REC_ALLOTMENT_GRANT);
    r->u.allotment_grant = *g;
    return record(rc, &(rc_feed_t){RC_FEED_ALLOTMENT_GRANT, *pos, 0, NULL, NULL, r});
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

static rc_pos_t at(const char *topic)
{
    return (rc_pos_t){topic, 0, offset_next++};
}

static reconcile_t *fresh(int32_t gateway_partitions)
{
    reconcile_limits_t lim;
    reconcile_limits_default(&lim);
    lim.violations_shown_max = 64;
    reconcile_t *rc = NULL;
    assert_int_equal(reconcile_new(&lim, &rc), HF_OK);
    reconcile_set_gateway_partitions(rc, gateway_partitions);
    history_start(&lim, gateway_partitions);
    offset_next = 0;
    return rc;
}

/* A reservation id "<prefix>-<n>" whose key lands in gateway partition p. */
static const char *rid_in(int32_t p, const char *prefix, char *out, size_t size)
{
    for (int n = 0;; n++) {
        snprintf(out, size, "%s-%d", prefix, n);
        if (kafka_partition_for_key(out, strlen(out), GW_PARTITIONS) == p)
            return out;
    }
}

/* ---- record builders (pair W|S) */

static void ledger(reconcile_t *rc, const char *rid, hf_ledger_kind_t kind, const char *reason,
                   const char *wh, int64_t qty)
{
    hf_ledger_event_t e;
    memset(&e, 0, sizeof e);
    snprintf(e.reservation_id, sizeof e.reservation_id, "%s", rid);
    e.kind = kind;
    e.lines_count = 1;
    snprintf(e.lines[0].sku, sizeof e.lines[0].sku, "S");
    e.lines[0].qty = qty;
    if (kind != HF_LEDGER_LATE_PAYMENT && kind != HF_LEDGER_REJECTED) {
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

static void result(reconcile_t *rc, const char *rid, hf_cmd_t cmd, hf_outcome_t outcome,
                   int64_t qty)
{
    hf_counter_result_t r = {.attempt = 0, .command = cmd, .outcome = outcome, .qty = qty};
    snprintf(r.reservation_id, sizeof r.reservation_id, "%s", rid);
    snprintf(r.warehouse_id, sizeof r.warehouse_id, "W");
    snprintf(r.sku, sizeof r.sku, "S");
    rc_pos_t pos = at(T_RESULTS);
    assert_int_equal(rec_counter_result(rc, &pos, &r), HF_OK);
}

static void grant(reconcile_t *rc, int32_t holder, int64_t seq, int64_t granted, int64_t recall,
                  int64_t allotted, int64_t available)
{
    available = available > 0 ? available : 0; /* the counter reports free stock so */
    hf_allotment_grant_t g = {.holder_partition = holder,
                              .seq = seq,
                              .granted_qty = granted,
                              .recall_qty = recall,
                              .allotted = allotted,
                              .available = available};
    snprintf(g.warehouse_id, sizeof g.warehouse_id, "W");
    snprintf(g.sku, sizeof g.sku, "S");
    rc_pos_t pos = at(T_RESULTS);
    assert_int_equal(rec_allotment_grant(rc, &pos, &g), HF_OK);
}

static void input(reconcile_t *rc, rc_input_t in, const hf_record_t *rec)
{
    rc_pos_t pos = at(in == RC_IN_STOCK_FEED ? T_FEED : T_COMMANDS);
    assert_int_equal(rec_counter_input(rc, in, &pos, rec), HF_OK);
}

static void feed(reconcile_t *rc, hf_feed_kind_t kind, int64_t qty, int64_t seq)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_STOCK_FEED;
    hf_stock_feed_t *f = &rec.u.stock_feed;
    snprintf(f->warehouse_id, sizeof f->warehouse_id, "W");
    snprintf(f->sku, sizeof f->sku, "S");
    f->kind = kind;
    f->qty = qty;
    f->feed_seq = seq;
    input(rc, RC_IN_STOCK_FEED, &rec);
}

static void request(reconcile_t *rc, int32_t holder, int64_t seq, int64_t want, int64_t ret,
                    int64_t balance)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_ALLOTMENT_REQUEST;
    hf_allotment_request_t *r = &rec.u.allotment_request;
    snprintf(r->warehouse_id, sizeof r->warehouse_id, "W");
    snprintf(r->sku, sizeof r->sku, "S");
    snprintf(r->holder_key, sizeof r->holder_key, "holder-%d", holder);
    r->holder_partition = holder;
    r->seq = seq;
    r->want_qty = want;
    r->return_qty = ret;
    r->balance = balance;
    input(rc, RC_IN_COMMANDS, &rec);
}

static void sale(reconcile_t *rc, int32_t holder, const char *rid, int64_t qty, int64_t balance)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_ALLOTMENT_SALE;
    hf_allotment_sale_t *s = &rec.u.allotment_sale;
    snprintf(s->warehouse_id, sizeof s->warehouse_id, "W");
    snprintf(s->sku, sizeof s->sku, "S");
    snprintf(s->reservation_id, sizeof s->reservation_id, "%s", rid);
    s->holder_partition = holder;
    s->attempt = 0;
    s->qty = qty;
    s->balance = balance;
    input(rc, RC_IN_COMMANDS, &rec);
}

/* Gateway partition holder's EscrowState of W|S (its changelog partition). */
static void escrow_state(reconcile_t *rc, int32_t holder, int64_t allotted, int64_t balance)
{
    hf_escrow_state_t es = {.allotted = allotted, .balance = balance};
    snprintf(es.warehouse_id, sizeof es.warehouse_id, "W");
    snprintf(es.sku, sizeof es.sku, "S");
    rc_pos_t pos = {"holdfast.gateway-changelog", holder, offset_next++};
    assert_int_equal(rec_escrow_state(rc, &pos, "W", "S", &es), HF_OK);
}

/* The counter's final CounterState, AllotmentState of holder 0 and StockLevel. */
typedef struct {
    int64_t on_hand, reserved, allotted, recalling, escrow_balance, version, committed, feed_seq;
    int64_t granted, returned, sold; /* holder 0's AllotmentState */
    int64_t balance_off; /* added to the CounterState's (and StockLevel's) escrow_balance */
} counter_end_t;

static void counter_end(reconcile_t *rc, const counter_end_t *e)
{
    hf_counter_state_t c = {.on_hand = e->on_hand,
                            .reserved = e->reserved,
                            .version = e->version,
                            .feed_seq = e->feed_seq,
                            .committed_total = e->committed,
                            .allotted = e->allotted,
                            .recalling = e->recalling,
                            .escrow_balance = e->escrow_balance + e->balance_off};
    rc_pos_t pos = at(T_CHANGELOG);
    assert_int_equal(rec_counter_state(rc, &pos, "W", "S", &c), HF_OK);
    hf_allotment_state_t a = {.holder_partition = 0,
                              .allotted = e->granted - e->returned - e->sold,
                              .recalling = e->recalling,
                              .reported_balance = e->escrow_balance,
                              .granted_total = e->granted,
                              .returned_total = e->returned,
                              .sold_total = e->sold};
    snprintf(a.holder_key, sizeof a.holder_key, "holder-0");
    pos = at(T_CHANGELOG);
    assert_int_equal(rec_allotment_state(rc, &pos, "W", "S", &a), HF_OK);
    int64_t free_units = e->on_hand - e->reserved - e->allotted;
    hf_stock_level_t sl = {.on_hand = e->on_hand,
                           .reserved = e->reserved,
                           .available = free_units > 0 ? free_units : 0,
                           .version = e->version,
                           .committed_total = e->committed,
                           .allotted = e->allotted,
                           .escrow_balance = e->escrow_balance + e->balance_off};
    snprintf(sl.warehouse_id, sizeof sl.warehouse_id, "W");
    snprintf(sl.sku, sizeof sl.sku, "S");
    pos = at(T_LEVELS);
    assert_int_equal(rec_stock_level(rc, &pos, &sl), HF_OK);
}

/* What a planted breach changes in the escrow history. */
typedef struct {
    int64_t grant_qty;         /* units granted to holder 0 by its first request (5) */
    bool a_unsold;             /* a's COMMITTED is never reported by an AllotmentSale */
    bool foreign_sale;         /* holder 1, never granted anything, sells 2 units of f */
    int64_t foreign_held;      /* g (a reservation of holder 1) holds this many in escrow */
    const char *foreign_wh;    /* ... at this warehouse (W, or W2 with no allotment at all) */
    bool revoke_without_sale;  /* a COMMIT REVOKED for a hold of nobody */
    bool hide_oversell;        /* the counter's state shows the clean history's allotted */
    int64_t gw_allotted_off;   /* holder 0's EscrowState counts this many more allotted */
    int64_t gw_balance_off;    /* ... and this many more in its balance */
    int64_t state_balance_off; /* the CounterState's escrow_balance is off by this */
} plant_t;

/* Stock 10 at W|S. Holder 0 asks for 5 and gets them; a (2) is held and
 * committed from the allotment, b (1) held and released, c (1) stays held; d
 * holds 3 directly at the counter. Holder 0 returns 1 of its balance. End:
 * allotted 5 - 2 sold - 1 returned = 2 (c's 1 + a balance of 1), on_hand 8,
 * reserved 3, version 1 feed + 1 hold + 2 requests + 1 sale = 5. */
static reconcile_t *escrow_history(const plant_t *p, int32_t gateway_partitions)
{
    reconcile_t *rc = fresh(gateway_partitions);
    char a[32], b[32], c[32], d[32], f[32], g[32];
    rid_in(0, "a", a, sizeof a);
    rid_in(0, "b", b, sizeof b);
    rid_in(0, "c", c, sizeof c);
    rid_in(1, "d", d, sizeof d);
    rid_in(1, "f", f, sizeof f);
    rid_in(1, "g", g, sizeof g);
    int64_t granted = p->grant_qty ? p->grant_qty : 5;
    int64_t sold0 = p->a_unsold ? 0 : 2, sold = sold0 + (p->foreign_sale ? 2 : 0);
    int64_t allotted = p->hide_oversell ? 2 : granted - 1 - sold;
    counter_end(rc, &(counter_end_t){.on_hand = 10 - sold,
                                     .reserved = 3,
                                     .allotted = allotted,
                                     .escrow_balance = p->hide_oversell  ? 1
                                                       : p->foreign_sale ? 0
                                                                         : granted - 4,
                                     .balance_off = p->state_balance_off,
                                     .version = 4 + (sold0 ? 1 : 0) + (p->foreign_sale ? 1 : 0),
                                     .committed = sold,
                                     .feed_seq = 1,
                                     .granted = p->hide_oversell ? 5 : granted,
                                     .returned = 1,
                                     .sold = sold0});
    /* The gateway's own count: allotted as the counter's, c's 1 unit not in the balance. */
    int64_t allotted0 = granted - 1 - sold0;
    escrow_state(rc, 0, allotted0 + p->gw_allotted_off, allotted0 - 1 + p->gw_balance_off);
    ledger(rc, a, HF_LEDGER_HELD, "", "W", 2);
    ledger(rc, a, HF_LEDGER_COMMITTED, "", "W", 2);
    ledger(rc, b, HF_LEDGER_HELD, "", "W", 1);
    ledger(rc, b, HF_LEDGER_RELEASED, "", "W", 1);
    ledger(rc, c, HF_LEDGER_HELD, "", "W", 1);
    ledger(rc, d, HF_LEDGER_HELD, "", "W", 3);
    if (p->foreign_sale) {
        ledger(rc, f, HF_LEDGER_HELD, "", "W", 2);
        ledger(rc, f, HF_LEDGER_COMMITTED, "", "W", 2);
    }
    if (p->foreign_held)
        ledger(rc, g, HF_LEDGER_HELD, "", p->foreign_wh ? p->foreign_wh : "W", p->foreign_held);
    result(rc, d, HF_CMD_HOLD, HF_OUTCOME_OK, 3);
    if (p->revoke_without_sale)
        result(rc, "nobody", HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 1);
    grant(rc, 0, 1, granted, 0, granted, 10 - 3 - granted);
    grant(rc, 0, 2, 0, 0, granted - 1 - sold0, 10 - 3 - granted + 1);
    feed(rc, HF_FEED_RECEIVE, 10, 1);
    request(rc, 0, 1, granted, 0, 0);
    if (!p->a_unsold)
        sale(rc, 0, a, 2, granted - 3);
    if (p->foreign_sale)
        sale(rc, 1, f, 2, 0);
    request(rc, 0, 2, 0, 1, granted - 4);
    return rc;
}

static void print_violations(const reconcile_t *rc)
{
    const rc_violation_t *v = NULL;
    size_t n = reconcile_violations_shown(rc, &v);
    for (size_t i = 0; i < n; i++)
        print_message("  %s %s: %s\n", rc_kind_name(v[i].kind), v[i].key, v[i].detail);
}

/* Exactly these kinds fired, each as often as named (a 0-terminated list of
 * kind, count pairs). */
static void assert_kinds(const reconcile_t *rc, ...)
{
    va_list ap;
    va_start(ap, rc);
    size_t total = 0;
    bool ok = true;
    for (int k = va_arg(ap, int); k >= 0; k = va_arg(ap, int)) {
        size_t want = (size_t)va_arg(ap, int);
        total += want;
        ok = ok && reconcile_violations_of(rc, (rc_kind_t)k) == want;
    }
    va_end(ap);
    ok = ok && reconcile_violations_total(rc) == total;
    if (!ok)
        print_violations(rc);
    assert_true(ok);
}

static void test_a_clean_escrow_history_passes_every_check_even_quiescent(void **state)
{
    for (int32_t parts = 0; parts <= GW_PARTITIONS; parts += GW_PARTITIONS) {
        reconcile_t *rc = escrow_history(&(plant_t){0}, parts);
        reconcile_finish(rc, true);
        assert_kinds(rc, -1);
        assert_int_equal(reconcile_verdict(rc, true), RC_PASS);
        rc_counts_t n;
        reconcile_counts(rc, &n);
        assert_int_equal(n.escrow_pairs, 1);
        assert_int_equal(n.allotments, 1);
        assert_int_equal(n.escrow_states, 1);
        assert_int_equal(n.escrow_grants, 2);
        assert_int_equal(n.escrow_granted_units, 5);
        assert_int_equal(n.escrow_returns, 1);
        assert_int_equal(n.escrow_returned_units, 1);
        assert_int_equal(n.escrow_sales, 1);
        assert_int_equal(n.escrow_sold_units, 2);
        assert_int_equal(n.escrow_allotted_units, 2);
        assert_int_equal(n.escrow_held_units, 1); /* c */
        assert_int_equal(n.ledger_held_units, 4); /* c in escrow, d at the counter */
        assert_int_equal(n.counter_reserved_units, 3);
        assert_int_equal(n.ledger_sold_units, 2);
        assert_int_equal(n.counter_committed_units, 2);
        assert_int_equal(n.pairs_on_hand_exact, 1);
        done(rc);
    }
}

/* Stock 10; holder 0 gets 4; e (2) is held and committed from them. A count
 * finds 3: the counter recalls 1 of the allotment and answers e's sale
 * REVOKED; the gateway undoes the sale (RELEASED stock_shortfall, a refund) and
 * gives 1 back. End: on_hand 3, allotted 3, nothing sold, version 4. */
static void test_a_recalled_allotment_may_revoke_a_sale_that_is_undone(void **state)
{
    for (int undone = 0; undone < 2; undone++) {
        reconcile_t *rc = fresh(GW_PARTITIONS);
        char e[32];
        rid_in(0, "e", e, sizeof e);
        counter_end(rc, &(counter_end_t){.on_hand = 3,
                                         .allotted = 3,
                                         .escrow_balance = 3,
                                         .version = 4,
                                         .feed_seq = 2,
                                         .granted = 4,
                                         .returned = 1});
        ledger(rc, e, HF_LEDGER_HELD, "", "W", 2);
        ledger(rc, e, HF_LEDGER_COMMITTED, "", "W", 2);
        if (undone) {
            ledger(rc, e, HF_LEDGER_RELEASED, "stock_shortfall", "W", 2);
            ledger(rc, e, HF_LEDGER_LATE_PAYMENT, "refund", "W", 2);
        }
        grant(rc, 0, 1, 4, 0, 4, 6);
        grant(rc, 0, 0, 0, 1, 4, 0); /* the recall */
        result(rc, e, HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 2);
        grant(rc, 0, 2, 0, 0, 3, 0);
        feed(rc, HF_FEED_RECEIVE, 10, 1);
        feed(rc, HF_FEED_COUNT, 3, 2);
        request(rc, 0, 1, 4, 0, 0);
        sale(rc, 0, e, 2, 2);
        request(rc, 0, 2, 0, 1, 3);
        reconcile_finish(rc, true);
        if (undone)
            assert_kinds(rc, -1);
        else /* a sale the counter revoked and the gateway kept */
            assert_kinds(rc, RC_K_SALE_COMMIT_REVOKED, 1, RC_K_SALE_UNBACKED, 1, -1);
        rc_counts_t n;
        reconcile_counts(rc, &n);
        assert_int_equal(n.escrow_recalls, 1);
        assert_int_equal(n.escrow_recalled_units, 1);
        assert_int_equal(n.escrow_sales, 0);
        assert_int_equal(n.escrow_sales_revoked, 1);
        done(rc);
    }
}

static void test_a_sale_beyond_the_allotment_fails(void **state)
{
    /* Holder 1 never got a unit, yet the counter took its sale of 2 (and its
     * pair's allotted no longer adds up to its allotments' either). */
    reconcile_t *rc = escrow_history(&(plant_t){.foreign_sale = true}, GW_PARTITIONS);
    reconcile_finish(rc, false);
    assert_kinds(rc, RC_K_ALLOTMENT_OVERSOLD, 1, RC_K_ALLOTMENT_VS_COUNTER, 1, -1);
    assert_int_equal(reconcile_verdict(rc, true), RC_FAIL);
    assert_int_equal(reconcile_verdict(rc, false), RC_INCONCLUSIVE); /* its grant may be unread */
    done(rc);
}

static void test_units_held_in_escrow_without_an_allotment_fail_when_quiescent(void **state)
{
    /* g's partition (1) has no allotment of W|S: judged per allotment. */
    reconcile_t *rc = escrow_history(&(plant_t){.foreign_held = 1}, GW_PARTITIONS);
    reconcile_finish(rc, true);
    assert_kinds(rc, RC_K_ESCROW_HELD_BEYOND_ALLOTMENT, 1, -1);
    assert_int_equal(reconcile_verdict(rc, true), RC_FAIL);
    done(rc);

    /* Not quiescent: its grant may still be on its way. */
    rc = escrow_history(&(plant_t){.foreign_held = 1}, GW_PARTITIONS);
    reconcile_finish(rc, false);
    assert_kinds(rc, -1);
    done(rc);

    /* Partitions unknown: per pair, c's 1 and g's 2 do not fit in 2 allotted. */
    rc = escrow_history(&(plant_t){.foreign_held = 2}, 0);
    reconcile_finish(rc, true);
    assert_kinds(rc, RC_K_ESCROW_HELD_BEYOND_ALLOTMENT, 1, -1);
    done(rc);

    /* At a pair that never had an allotment the units are nowhere at all. */
    rc = escrow_history(&(plant_t){.foreign_held = 1, .foreign_wh = "W2"}, GW_PARTITIONS);
    reconcile_finish(rc, true);
    assert_kinds(rc, RC_K_RESERVATION_HOLDS, 1, RC_K_LEDGER_VS_COUNTERS, 1, -1);
    done(rc);
}

static void test_a_grant_promising_units_twice_fails(void **state)
{
    /* 9 granted of 10 on hand while d holds 3: after the sale and the return
     * 6 allotted + 3 held > 8 on hand. The counter's state shows it... */
    reconcile_t *rc = escrow_history(&(plant_t){.grant_qty = 9}, GW_PARTITIONS);
    reconcile_finish(rc, false);
    assert_kinds(rc, RC_K_ALLOTMENTS_BEYOND_STOCK, 1, RC_K_COUNTER_STATE_INVALID, 1, -1);
    done(rc);

    /* ... or hides it (allotted 2 as in the clean history). */
    rc = escrow_history(&(plant_t){.grant_qty = 9, .hide_oversell = true}, GW_PARTITIONS);
    reconcile_finish(rc, false);
    assert_kinds(rc, RC_K_ALLOTMENTS_BEYOND_STOCK, 1, RC_K_ALLOTMENT_VS_COUNTER, 2, -1);
    done(rc);
}

static void test_a_pair_must_add_up_to_its_allotments_on_any_snapshot(void **state)
{
    /* The CounterState says 1 unit less is sellable in escrow than its
     * AllotmentStates report (they change in one transaction). */
    reconcile_t *rc = escrow_history(&(plant_t){.state_balance_off = -1}, GW_PARTITIONS);
    reconcile_finish(rc, false);
    assert_kinds(rc, RC_K_ALLOTMENT_VS_COUNTER, 1, -1);
    done(rc);
}

static void test_a_committed_escrow_allocation_without_a_sale_fails_when_quiescent(void **state)
{
    for (int quiescent = 0; quiescent < 2; quiescent++) {
        reconcile_t *rc = escrow_history(&(plant_t){.a_unsold = true}, GW_PARTITIONS);
        reconcile_finish(rc, quiescent);
        if (quiescent)
            assert_kinds(rc, RC_K_SALE_UNBACKED, 1, -1);
        else
            assert_kinds(rc, -1);
        done(rc);
    }
}

static void test_the_gateways_escrow_state_must_match_the_allotment_when_quiescent(void **state)
{
    /* Its balance claims c's unit too: allotted != balance + held. */
    reconcile_t *rc = escrow_history(&(plant_t){.gw_balance_off = 1}, GW_PARTITIONS);
    reconcile_finish(rc, true);
    assert_kinds(rc, RC_K_ESCROW_STATE_VS_ALLOTMENT, 1, -1);
    done(rc);

    /* It counts a unit the counter does not allot. */
    rc = escrow_history(&(plant_t){.gw_allotted_off = 1, .gw_balance_off = 1}, GW_PARTITIONS);
    reconcile_finish(rc, true);
    assert_kinds(rc, RC_K_ESCROW_STATE_VS_ALLOTMENT, 1, -1);
    done(rc);

    /* Not quiescent: messages between them may be in flight. */
    rc = escrow_history(&(plant_t){.gw_balance_off = 1}, GW_PARTITIONS);
    reconcile_finish(rc, false);
    assert_kinds(rc, -1);
    done(rc);

    /* A balance above the allotment is wrong on any snapshot. */
    rc = escrow_history(&(plant_t){.gw_balance_off = 2}, GW_PARTITIONS);
    reconcile_finish(rc, false);
    assert_kinds(rc, RC_K_ESCROW_STATE_INVALID, 1, -1);
    done(rc);

    /* A tombstone: the gateway forgot an allotment the counter still has. */
    rc = escrow_history(&(plant_t){0}, GW_PARTITIONS);
    escrow_state(rc, 1, 0, 0); /* another partition's, so EscrowStates exist */
    rc_pos_t pos = {"holdfast.gateway-changelog", 0, offset_next++};
    assert_int_equal(rec_escrow_state(rc, &pos, "W", "S", NULL), HF_OK);
    reconcile_finish(rc, true);
    assert_kinds(rc, RC_K_ESCROW_STATE_VS_ALLOTMENT, 1, -1);
    done(rc);
}

static void test_a_revoked_answer_to_no_sale_is_illegal(void **state)
{
    reconcile_t *rc = escrow_history(&(plant_t){.revoke_without_sale = true}, GW_PARTITIONS);
    reconcile_finish(rc, false);
    assert_kinds(rc, RC_K_COUNTER_RESULT_ILLEGAL, 1, -1);
    assert_int_equal(reconcile_verdict(rc, false), RC_FAIL);
    done(rc);
}

static void test_a_grant_beyond_the_request_or_malformed_is_reported(void **state)
{
    reconcile_t *rc = fresh(GW_PARTITIONS);
    grant(rc, 0, 1, 3, 0, 3, 0);
    request(rc, 0, 1, 2, 0, 0);   /* asked for 2 */
    grant(rc, 0, 0, 0, 0, 3, 0);  /* a recall of nothing */
    grant(rc, 0, 3, -1, 0, 3, 0); /* negative */
    reconcile_finish(rc, false);
    assert_int_equal(reconcile_violations_of(rc, RC_K_ALLOTMENT_GRANT_INVALID), 3);
    done(rc);

    /* The counter's own AllotmentState must add up. */
    rc = fresh(GW_PARTITIONS);
    hf_allotment_state_t a = {.holder_partition = 0, .allotted = 4, .granted_total = 5};
    rc_pos_t pos = at(T_CHANGELOG);
    assert_int_equal(rec_allotment_state(rc, &pos, "W", "S", &a), HF_OK);
    assert_int_equal(reconcile_violations_of(rc, RC_K_COUNTER_STATE_INVALID), 1);
    done(rc);
}

static void test_the_verdict_counts_the_escrow_traffic(void **state)
{
    reconcile_t *rc = escrow_history(&(plant_t){0}, GW_PARTITIONS);
    reconcile_finish(rc, true);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(reconcile_print(rc, true, 1, true, NULL, 0.1, f), HF_OK);
    fclose(f);
    json_t *o = json_loads(buf, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "verdict")), "PASS");
    json_t *counts = json_object_get(o, "counts");
    assert_int_equal(json_integer_value(json_object_get(counts, "escrow_grants")), 2);
    assert_int_equal(json_integer_value(json_object_get(counts, "escrow_returns")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "escrow_sales")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "escrow_recalls")), 0);
    assert_int_equal(json_integer_value(json_object_get(counts, "escrow_held_units")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "escrow_allotted_units")), 2);
    json_decref(o);
    free(buf);
    done(rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_clean_escrow_history_passes_every_check_even_quiescent),
        cmocka_unit_test(test_a_recalled_allotment_may_revoke_a_sale_that_is_undone),
        cmocka_unit_test(test_a_sale_beyond_the_allotment_fails),
        cmocka_unit_test(test_units_held_in_escrow_without_an_allotment_fail_when_quiescent),
        cmocka_unit_test(test_a_grant_promising_units_twice_fails),
        cmocka_unit_test(test_a_pair_must_add_up_to_its_allotments_on_any_snapshot),
        cmocka_unit_test(test_a_committed_escrow_allocation_without_a_sale_fails_when_quiescent),
        cmocka_unit_test(test_the_gateways_escrow_state_must_match_the_allotment_when_quiescent),
        cmocka_unit_test(test_a_revoked_answer_to_no_sale_is_illegal),
        cmocka_unit_test(test_a_grant_beyond_the_request_or_malformed_is_reported),
        cmocka_unit_test(test_the_verdict_counts_the_escrow_traffic),
    };
    return cmocka_run_group_tests(tests, NULL, history_teardown);
}
