/* Unit tests of escrow at the gateway (processor/gateway/escrow.c and the
 * paths that call it: saga.c send_round, reserve.c hold_now, gw_emit.c,
 * counter_result.c, allotment_grant.c, the sweeper's gw_escrow_tick), over the
 * shared fake stage of fake/fake_stage.h. The routing view and the escrow
 * settings are a gateway_env_t the test fills (fx->env); the counter is played
 * by the test: it answers Holds and sends AllotmentGrants by hand, so each test
 * decides what the counter says. DESIGN.md section 5 "Escrow": a pinned SKU's
 * first-round holds are taken from this partition's allotment and answered in
 * one hop; release and expiry put units back; a commit sends an AllotmentSale;
 * idle and scarce balances go back; a recall is given back now or as the holds
 * end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fake/fake_stage.h"
#include "gateway/gateway.h"
#include "kafka.h"
#include "hf_limits.h"
#include "log.h"
#include "stage.h"
#include "state.h"
#include "topics.h"

#define T0         1700000000000LL
#define TTL_MS     (15 * 60 * 1000LL)
#define HOT        "HOT-1"
#define COLD       "COLD-1"
#define REFILL_MIN 10
#define REFILL_MAX 200
#define IDLE_MS    5000
#define SCARCE     20
#define RESULT_MS  5000
#define RETENTION  (24 * 3600 * 1000LL)
#define PAIR_KEY   "W1|" HOT

struct fake_stage_user {
    gateway_env_t env;
    gw_sweep_t sweep;
    hf_availability_t view[4];
    size_t view_count;
};

static int fake_availability(void *opaque, const char *sku, hf_availability_t *out)
{
    stage_ctx_t *fx = opaque;
    for (size_t i = 0; i < fx->user->view_count; i++)
        if (strcmp(fx->user->view[i].sku, sku) == 0) {
            *out = fx->user->view[i];
            return HF_OK;
        }
    return HF_ERR_NOTFOUND;
}

static int64_t fake_staleness(void *opaque)
{
    (void)opaque;
    return 0; /* always current */
}

/* The view: sku has `units` at W1 (the warehouse nearest the shoppers) only. */
static void view_set(stage_ctx_t *fx, const char *sku, int64_t units)
{
    hf_availability_t *a = NULL;
    for (size_t i = 0; i < fx->user->view_count; i++)
        if (strcmp(fx->user->view[i].sku, sku) == 0)
            a = &fx->user->view[i];
    if (!a) {
        assert_true(fx->user->view_count < 4);
        a = &fx->user->view[fx->user->view_count++];
    }
    memset(a, 0, sizeof *a);
    snprintf(a->sku, sizeof a->sku, "%s", sku);
    a->warehouses_count = 1;
    snprintf(a->warehouses[0].warehouse_id, sizeof a->warehouses[0].warehouse_id, "%s",
             fake_warehouses[0].id);
    a->warehouses[0].available = units;
    a->total = units;
    a->in_stock = units > 0;
}

static int setup(void **state)
{
    stage_ctx_t *fx = fake_stage_new("escrow_gw", T0);
    fx->user = calloc(1, sizeof *fx->user);
    assert_non_null(fx->user);
    gateway_env_t *e = &fx->user->env;
    fake_stage_routes(&e->routes);
    e->ttl_default_ms = TTL_MS;
    snprintf(e->reply_topic_prefix, sizeof e->reply_topic_prefix, "holdfast.replies.");
    e->hold_max_factor_pct = 200;
    e->idempotency_retention_ms = RETENTION;
    e->reservation_retention_ms = 7 * RETENTION;
    e->late_policy = GW_LATE_REFUND;
    e->result_timeout_ms = RESULT_MS;
    e->view_stale_max_ms = 10000;
    e->availability = fake_availability;
    e->staleness_ms = fake_staleness;
    e->opaque = fx;
    fx->user->sweep.run_id = 1;
    e->sweep = &fx->user->sweep;
    snprintf(e->escrow.skus[0], sizeof e->escrow.skus[0], "%s", HOT);
    e->escrow.skus_count = 1;
    e->escrow.refill_min_units = REFILL_MIN;
    e->escrow.refill_max_units = REFILL_MAX;
    e->escrow.refill_horizon_ms = 1000;
    e->escrow.idle_return_ms = IDLE_MS;
    e->escrow.scarce_units = SCARCE;
    fx->env = e;
    view_set(fx, HOT, 1000);
    view_set(fx, COLD, 1000);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    stage_ctx_t *fx = *state;
    gw_heat_destroy(fx->user->env.escrow.heat);
    free(fx->user);
    fake_stage_destroy(fx);
    return 0;
}

/* ---- driving */

/* rec under Kafka key `key`, one transaction; a rejection leaves nothing. */
static int apply_key(stage_ctx_t *fx, const char *key, const hf_record_t *rec)
{
    int err = fake_stage_apply(fx, gateway_stage(), key, rec);
    if (err == HF_ERR_INVAL) {
        assert_int_equal(state_buf_count(fx->buf), 0);
        state_buf_clear(fx->buf);
        return err;
    }
    fake_stage_commit(fx);
    return err;
}

static void tick(stage_ctx_t *fx)
{
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        fx->partition = p;
        assert_int_equal(gateway_stage()->tick(fx), HF_OK);
    }
    fake_stage_commit(fx);
}

/* The n-th reservation id ("esc-<i>") that lands in partition p. */
static void rid_in(char *out, size_t size, int32_t p, int n)
{
    for (int i = 0; i < 10000; i++) {
        snprintf(out, size, "esc-%d", i);
        if (fake_stage_partition_of(out) == p && n-- == 0)
            return;
    }
    fail_msg("no reservation id in partition %d", p);
}

static void reserve(stage_ctx_t *fx, const char *rid, const char *sku, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "ik-%s", rid);
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "%s", sku);
    q->lines[0].qty = qty;
    q->ship_to = (hf_geo_t){40.73, -73.99}; /* Manhattan: W1 nearest */
    q->ttl_ms = TTL_MS;
    q->sent_at_ms = fx->now_ms;
    assert_int_equal(apply_key(fx, rid, &r), HF_OK);
}

static void commit(stage_ctx_t *fx, const char *rid)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_COMMIT;
    snprintf(r.u.commit.reservation_id, sizeof r.u.commit.reservation_id, "%s", rid);
    snprintf(r.u.commit.idempotency_key, sizeof r.u.commit.idempotency_key, "ikc-%s", rid);
    snprintf(r.u.commit.payment_id, sizeof r.u.commit.payment_id, "pay-%s", rid);
    assert_int_equal(apply_key(fx, rid, &r), HF_OK);
}

static void release(stage_ctx_t *fx, const char *rid)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RELEASE;
    snprintf(r.u.release.reservation_id, sizeof r.u.release.reservation_id, "%s", rid);
    snprintf(r.u.release.idempotency_key, sizeof r.u.release.idempotency_key, "ikr-%s", rid);
    assert_int_equal(apply_key(fx, rid, &r), HF_OK);
}

static void counter_result(stage_ctx_t *fx, const char *rid, int32_t attempt, hf_cmd_t cmd,
                           hf_outcome_t outcome, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_COUNTER_RESULT;
    hf_counter_result_t *c = &r.u.counter_result;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", rid);
    c->attempt = attempt;
    snprintf(c->warehouse_id, sizeof c->warehouse_id, "W1");
    snprintf(c->sku, sizeof c->sku, "%s", HOT);
    c->command = cmd;
    c->outcome = outcome;
    c->qty = qty;
    c->available = 100;
    c->applied_at_ms = fx->now_ms;
    assert_int_equal(apply_key(fx, rid, &r), HF_OK);
}

static hf_record_t grant_rec(int32_t holder, int64_t seq, int64_t granted, int64_t recall)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_ALLOTMENT_GRANT;
    hf_allotment_grant_t *g = &r.u.allotment_grant;
    snprintf(g->warehouse_id, sizeof g->warehouse_id, "W1");
    snprintf(g->sku, sizeof g->sku, "%s", HOT);
    g->holder_partition = holder;
    g->seq = seq;
    g->granted_qty = granted;
    g->recall_qty = recall;
    g->shortfall = recall > 0; /* the tests' recalls are a shortfall's */
    g->allotted = granted;
    g->available = 100;
    g->applied_at_ms = T0;
    return r;
}

/* ---- reading outputs and state */

static size_t count_of(const stage_ctx_t *fx, size_t from, int topic_id, hf_rec_type_t type)
{
    size_t n = 0;
    for (size_t i = from; i < fx->emits_count; i++)
        n += fx->emits[i].topic_id == topic_id && fx->emits[i].rec.type == type;
    return n;
}

static size_t commands(const stage_ctx_t *fx, size_t from, hf_rec_type_t type)
{
    return count_of(fx, from, HF_T_COUNTER_COMMANDS, type);
}

/* The only record of type on the commands topic since from, keyed by the pair. */
static const hf_record_t *one_command(const stage_ctx_t *fx, size_t from, hf_rec_type_t type)
{
    const fake_stage_emit_t *found = NULL;
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].topic_id == HF_T_COUNTER_COMMANDS && fx->emits[i].rec.type == type) {
            if (found)
                fail_msg("more than one %s since %zu", hf_rec_type_name(type), from);
            found = &fx->emits[i];
        }
    if (!found) {
        fail_msg("no %s since %zu", hf_rec_type_name(type), from);
        return NULL;
    }
    assert_int_equal(found->key_len, strlen(PAIR_KEY));
    assert_memory_equal(found->key, PAIR_KEY, found->key_len);
    return &found->rec;
}

/* The only AllotmentRequest since from, of any pair. */
static hf_allotment_request_t one_request(const stage_ctx_t *fx, size_t from)
{
    const hf_allotment_request_t *q = NULL;
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].rec.type == HF_REC_ALLOTMENT_REQUEST) {
            if (q)
                fail_msg("more than one AllotmentRequest since %zu", from);
            q = &fx->emits[i].rec.u.allotment_request;
        }
    if (!q) {
        fail_msg("no AllotmentRequest since %zu", from);
        return (hf_allotment_request_t){0};
    }
    return *q;
}

static hf_reply_t one_reply(const stage_ctx_t *fx, size_t from)
{
    const hf_reply_t *r = NULL;
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].topic_id == -1 && fx->emits[i].rec.type == HF_REC_REPLY) {
            if (r)
                fail_msg("more than one reply since %zu", from);
            r = &fx->emits[i].rec.u.reply;
        }
    if (!r) {
        fail_msg("no reply since %zu", from);
        return (hf_reply_t){0};
    }
    return *r;
}

static size_t ledger_count(const stage_ctx_t *fx, size_t from, const char *rid,
                           hf_ledger_kind_t kind)
{
    size_t n = 0;
    for (size_t i = from; i < fx->emits_count; i++)
        n += fx->emits[i].topic_id == HF_T_LEDGER && fx->emits[i].rec.u.ledger_event.kind == kind &&
             strcmp(fx->emits[i].rec.u.ledger_event.reservation_id, rid) == 0;
    return n;
}

static hf_reservation_state_t load_rs(stage_ctx_t *fx, const char *rid)
{
    fx->partition = fake_stage_partition_of(rid);
    hf_reservation_state_t rs;
    int err = gw_load(fx, rid, &rs);
    if (err)
        fail_msg("reservation %s: %s", rid, hf_err_name(err));
    return rs;
}

/* Partition p's EscrowState of W1|HOT; found false when it has none. */
static hf_escrow_state_t escrow(stage_ctx_t *fx, int32_t p, bool *found)
{
    fx->partition = p;
    char key[GW_KEY_MAX];
    size_t len = gw_escrow_key(key, "W1", HOT);
    hf_record_t rec;
    hf_escrow_state_t e;
    memset(&e, 0, sizeof e);
    int err = stage_get(fx, key, len, &rec);
    *found = err == HF_OK;
    if (err == HF_ERR_NOTFOUND)
        return e;
    assert_int_equal(err, HF_OK);
    assert_int_equal(rec.type, HF_REC_ESCROW_STATE);
    e = rec.u.escrow_state;
    assert_true(e.balance >= 0 && e.balance <= e.allotted);
    return e;
}

static hf_escrow_state_t escrow_of(stage_ctx_t *fx, int32_t p)
{
    bool found = false;
    hf_escrow_state_t e = escrow(fx, p, &found);
    assert_true(found);
    return e;
}

/* Whether any partition wrote an escrow key. */
static bool any_escrow_key(stage_ctx_t *fx)
{
    for (size_t i = 0; i < fx->changelog_count; i++)
        if (fx->changelog[i].key_len > 0 && fx->changelog[i].key[0] == GW_ESCROW_TAG)
            return true;
    return false;
}

/* ---- the common start: partition p of the gateway holds an allotment of
 * `granted` units of W1|HOT. The first reservation (rids[0]) went direct and
 * asked for the refill; it is HELD by its counter hold. */
typedef struct {
    int32_t p;
    char first[32];
    int64_t seq;
} allotment_t;

static allotment_t with_allotment(stage_ctx_t *fx, int64_t granted)
{
    allotment_t a = {.p = 1};
    rid_in(a.first, sizeof a.first, a.p, 0);
    reserve(fx, a.first, HOT, 2);
    counter_result(fx, a.first, 0, HF_CMD_HOLD, HF_OUTCOME_OK, 2);
    a.seq = escrow_of(fx, a.p).seq;
    hf_record_t g = grant_rec(a.p, a.seq, granted, 0);
    assert_int_equal(apply_key(fx, a.first, &g), HF_OK);
    return a;
}

/* ====================================================================== */

static void test_first_reserve_goes_direct_and_asks_for_allotment(void **state)
{
    stage_ctx_t *fx = *state;
    char rid[32];
    rid_in(rid, sizeof rid, 1, 0);
    size_t from = fx->emits_count;
    reserve(fx, rid, HOT, 2);
    /* No allotment yet: the hold goes to the counter... */
    const hf_record_t *h = one_command(fx, from, HF_REC_HOLD);
    assert_int_equal(h->u.hold.qty, 2);
    assert_int_equal(count_of(fx, from, -1, HF_REC_REPLY), 0); /* answered by the counter */
    /* ... and a refill is asked for, to come back to this partition. */
    const hf_allotment_request_t *q =
        &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_true(q->want_qty >= REFILL_MIN);
    assert_int_equal(q->return_qty, 0);
    assert_int_equal(q->holder_partition, 1);
    assert_string_equal(q->holder_key, rid);
    assert_int_equal(fake_stage_partition_of(q->holder_key), 1);
    assert_true(q->seq > 0);
    assert_string_equal(q->warehouse_id, "W1");
    assert_string_equal(q->sku, HOT);
    hf_escrow_state_t e = escrow_of(fx, 1);
    assert_int_equal(e.balance, 0);
    assert_int_equal(e.allotted, 0);
    assert_int_equal(e.asking_qty, q->want_qty);
    assert_false(load_rs(fx, rid).allocations[0].escrow);

    /* A second reserve while the ask is outstanding does not ask again. */
    char rid2[32];
    rid_in(rid2, sizeof rid2, 1, 1);
    from = fx->emits_count;
    reserve(fx, rid2, HOT, 1);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 1);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
}

static void test_grant_fills_balance_and_next_reserve_held_in_one_hop(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 10);
    assert_int_equal(e.allotted, 10);
    assert_int_equal(e.asking_qty, 0); /* answered */

    char rid[32];
    rid_in(rid, sizeof rid, a.p, 1);
    size_t from = fx->emits_count;
    reserve(fx, rid, HOT, 3);
    hf_reply_t r = one_reply(fx, from);
    assert_int_equal(r.outcome, HF_REPLY_HELD);
    assert_string_equal(r.reservation_id, rid);
    assert_int_equal(ledger_count(fx, from, rid, HF_LEDGER_HELD), 1);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 0);
    hf_reservation_state_t rs = load_rs(fx, rid);
    assert_int_equal(rs.status, HF_RES_HELD);
    assert_int_equal(rs.allocations_count, 1);
    assert_true(rs.allocations[0].escrow);
    assert_int_equal(rs.allocations[0].status, HF_HOLD_REF_HELD);
    assert_int_equal(rs.result_deadline_ms, 0);
    e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 7);
    assert_int_equal(e.allotted, 10);
}

static void test_commit_of_escrow_hold_sends_allotment_sale(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    char rid[32];
    rid_in(rid, sizeof rid, a.p, 1);
    reserve(fx, rid, HOT, 3);
    int32_t attempt = load_rs(fx, rid).allocations[0].attempt;
    size_t from = fx->emits_count;
    commit(fx, rid);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_COMMITTED);
    assert_int_equal(commands(fx, from, HF_REC_COMMIT_HOLD), 0);
    const hf_allotment_sale_t *s = &one_command(fx, from, HF_REC_ALLOTMENT_SALE)->u.allotment_sale;
    assert_int_equal(s->qty, 3);
    assert_int_equal(s->attempt, attempt);
    assert_string_equal(s->reservation_id, rid);
    assert_int_equal(s->holder_partition, a.p);
    assert_int_equal(s->balance, 7);
    assert_int_equal(ledger_count(fx, from, rid, HF_LEDGER_COMMITTED), 1);
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.allotted, 7);
    assert_int_equal(e.balance, 7);
    assert_int_equal(load_rs(fx, rid).status, HF_RES_COMMITTED);
}

static void test_release_and_expiry_put_units_back(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->env.escrow.idle_return_ms = 2 * TTL_MS; /* no idle return in this test */
    allotment_t a = with_allotment(fx, 10);
    char r1[32], r2[32];
    rid_in(r1, sizeof r1, a.p, 1);
    rid_in(r2, sizeof r2, a.p, 2);
    reserve(fx, r1, HOT, 3);
    reserve(fx, r2, HOT, 4);
    assert_int_equal(escrow_of(fx, a.p).balance, 3);

    size_t from = fx->emits_count;
    release(fx, r1);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_RELEASED);
    assert_int_equal(commands(fx, from, HF_REC_RELEASE_HOLD), 0);
    assert_int_equal(escrow_of(fx, a.p).balance, 6);
    assert_int_equal(escrow_of(fx, a.p).allotted, 10);
    assert_int_equal(load_rs(fx, r1).status, HF_RES_RELEASED);

    /* r2 expires: the sweeper gives its 4 units back, no counter command
     * (the first reservation's direct hold is released to its counter). */
    fx->now_ms = load_rs(fx, r2).expires_at_ms + 1;
    from = fx->emits_count;
    tick(fx);
    assert_int_equal(load_rs(fx, r2).status, HF_RES_EXPIRED);
    assert_int_equal(ledger_count(fx, from, r2, HF_LEDGER_EXPIRED), 1);
    assert_int_equal(commands(fx, from, HF_REC_RELEASE_HOLD), 1); /* a.first's, not r2's */
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].rec.type == HF_REC_RELEASE_HOLD)
            assert_string_equal(fx->emits[i].rec.u.release_hold.reservation_id, a.first);
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 10);
    assert_int_equal(e.allotted, 10);
}

/* Scarce (the view at escrow_scarce_units): the partition drains what it
 * holds — a reserve its balance covers is still held in one hop, exactly —
 * but asks for no refill, and a balance it leaves unused for
 * HF_ESCROW_DRAIN_IDLE_MS goes back so the counters serve the last units. */
static void test_scarce_sku_drains_and_tick_returns_unused_balance(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    view_set(fx, HOT, SCARCE); /* at the threshold: scarce */
    char rid[32];
    rid_in(rid, sizeof rid, a.p, 1);
    size_t from = fx->emits_count;
    reserve(fx, rid, HOT, 8); /* leaves 2, well under half a refill: no ask all the same */
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 0);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
    assert_true(load_rs(fx, rid).allocations[0].escrow);
    assert_int_equal(escrow_of(fx, a.p).balance, 2);

    fx->now_ms += 250; /* in use: kept */
    from = fx->emits_count;
    tick(fx);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
    assert_int_equal(escrow_of(fx, a.p).balance, 2);

    fx->now_ms += HF_ESCROW_DRAIN_IDLE_MS;
    from = fx->emits_count;
    tick(fx);
    hf_allotment_request_t q = one_request(fx, from);
    assert_int_equal(q.return_qty, 2);
    assert_int_equal(q.want_qty, 0);
    assert_int_equal(q.balance, 0);
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 0);
    assert_int_equal(e.allotted, 8); /* the held units stay until their reservation ends */

    /* Nothing left: the next reserve asks its counter, and no refill. */
    rid_in(rid, sizeof rid, a.p, 2);
    from = fx->emits_count;
    reserve(fx, rid, HOT, 1);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 1);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
}

/* A line this partition can hold itself goes where its balance is, even when
 * another warehouse scores better on the network view: one hop instead of a
 * counter round trip. */
static void test_line_routed_to_the_partitions_own_balance(void **state)
{
    stage_ctx_t *fx = *state;
    hf_availability_t *v = &fx->user->view[0]; /* HOT: W1 (nearest) and W2 */
    assert_string_equal(v->sku, HOT);
    snprintf(v->warehouses[1].warehouse_id, sizeof v->warehouses[1].warehouse_id, "%s",
             fake_warehouses[1].id);
    v->warehouses[1].available = 1000;
    v->warehouses_count = 2;
    v->total = 2000;
    char rid[32];
    rid_in(rid, sizeof rid, 1, 0);
    hf_record_t g = grant_rec(1, 0, 50, 0);
    snprintf(g.u.allotment_grant.warehouse_id, sizeof g.u.allotment_grant.warehouse_id, "%s",
             fake_warehouses[1].id);
    assert_int_equal(apply_key(fx, rid, &g), HF_OK);

    size_t from = fx->emits_count;
    reserve(fx, rid, HOT, 3);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 0);
    hf_reservation_state_t rs = load_rs(fx, rid);
    assert_int_equal(rs.status, HF_RES_HELD);
    assert_true(rs.allocations[0].escrow);
    assert_string_equal(rs.allocations[0].warehouse_id, fake_warehouses[1].id);

    /* More than the balance: routed on the network view as before (W1, direct). */
    rid_in(rid, sizeof rid, 1, 1);
    from = fx->emits_count;
    reserve(fx, rid, HOT, 60);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 1);
    assert_string_equal(load_rs(fx, rid).allocations[0].warehouse_id, fake_warehouses[0].id);
}

/* HOT in escrow at partition p for its contention rather than pinned: a
 * pinned SKU keeps its allotments warm for its sale, only these go back idle. */
static void hot_by_contention(stage_ctx_t *fx, int32_t p)
{
    gw_heat_conf_t hc = {.enter_per_s = 1, .cool_ms = 24 * 3600 * 1000LL};
    fx->user->env.escrow.heat = gw_heat_new(&hc);
    assert_true(gw_heat_note(fx->user->env.escrow.heat, p, HOT, fx->now_ms, 1));
    fx->user->env.escrow.skus_count = 0;
}

static void test_idle_allotment_returned_by_tick(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    hot_by_contention(fx, a.p);
    fx->now_ms += 250;
    tick(fx); /* reports the granted balance */
    size_t from = fx->emits_count;
    fx->now_ms += 250;
    tick(fx);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0); /* not idle yet */

    fx->now_ms = escrow_of(fx, a.p).last_take_ms + IDLE_MS;
    from = fx->emits_count;
    tick(fx);
    const hf_allotment_request_t *q =
        &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_int_equal(q->return_qty, 10);
    assert_int_equal(q->want_qty, 0);
    assert_int_equal(escrow_of(fx, a.p).allotted, 0);
    from = fx->emits_count;
    fx->now_ms += 250;
    tick(fx);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0); /* nothing left */
}

/* A pinned SKU keeps its allotment however long no shopper comes: it is
 * there for the sale. */
static void test_pinned_allotment_kept_warm(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    fx->now_ms += 250;
    tick(fx); /* reports the granted balance */
    fx->now_ms += 100 * IDLE_MS;
    size_t from = fx->emits_count;
    tick(fx);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
    assert_int_equal(escrow_of(fx, a.p).allotted, 10);
}

/* A pinned SKU's allotments are asked for before its first shopper, at every
 * warehouse the view shows stock at, once; the grant's key lands in the
 * asking partition (the requests topic's murmur2), with no reservation yet. */
/* Each partition asks for its share of the free units (480 / 4 partitions). */
static void test_pinned_sku_primed_before_first_shopper(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->env.escrow.partitions = FAKE_STAGE_PARTITIONS;
    fx->user->env.escrow.prime_units = 50;
    view_set(fx, HOT, 480);
    size_t from = fx->emits_count;
    tick(fx);
    size_t asks = 0;
    for (size_t i = from; i < fx->emits_count; i++) {
        const fake_stage_emit_t *m = &fx->emits[i];
        if (m->rec.type != HF_REC_ALLOTMENT_REQUEST)
            continue;
        const hf_allotment_request_t *q = &m->rec.u.allotment_request;
        asks++;
        assert_string_equal(q->sku, HOT); /* COLD is not pinned */
        assert_int_equal(q->want_qty, 480 / FAKE_STAGE_PARTITIONS);
        assert_int_equal(
            kafka_partition_for_key(q->holder_key, strlen(q->holder_key), FAKE_STAGE_PARTITIONS),
            q->holder_partition);
    }
    assert_int_equal(asks, FAKE_STAGE_PARTITIONS); /* one warehouse in the view, each partition */
    from = fx->emits_count;
    fx->now_ms += 2 * HF_ESCROW_ASK_TIMEOUT_MS;
    tick(fx); /* once: later refills follow the shoppers */
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
}

/* The share is floored at escrow_prime_units and capped at a refill's most. */
static int64_t primed_want(stage_ctx_t *fx, int64_t free_units)
{
    fx->user->env.escrow.partitions = FAKE_STAGE_PARTITIONS;
    fx->user->env.escrow.prime_units = 50;
    view_set(fx, HOT, free_units);
    size_t from = fx->emits_count;
    fx->partition = 0;
    assert_int_equal(gateway_stage()->tick(fx), HF_OK);
    fake_stage_commit(fx);
    return one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request.want_qty;
}

static void test_prime_share_floored_and_capped(void **state)
{
    assert_int_equal(primed_want(*state, 100), 50); /* share 25 */
    stage_ctx_t *big = NULL;
    assert_int_equal(setup((void **)&big), 0);
    assert_int_equal(primed_want(big, 100000), REFILL_MAX); /* share 25,000 */
    assert_int_equal(teardown((void **)&big), 0);
}

/* A Commit of units in an allotment a stock shortfall recalls and that still
 * owes them: revoked at the gateway (the counter would refuse the sale), the
 * payment flagged for refund, the units given back. */
static void test_commit_while_recall_owed_is_revoked(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    char rid[32];
    rid_in(rid, sizeof rid, a.p, 1);
    reserve(fx, rid, HOT, 3); /* balance 7, 3 held */
    hf_record_t g = grant_rec(a.p, 0, 0, 10);
    assert_int_equal(apply_key(fx, a.first, &g), HF_OK); /* 7 back now, 3 owed */
    assert_int_equal(escrow_of(fx, a.p).owed_qty, 3);
    size_t from = fx->emits_count;
    commit(fx, rid);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_SALE), 0);
    hf_allotment_request_t q = one_request(fx, from);
    assert_int_equal(q.return_qty, 3);
    hf_reply_t r = one_reply(fx, from);
    assert_int_equal(r.outcome, HF_REPLY_CONFLICT);
    hf_reservation_state_t rs = load_rs(fx, rid);
    assert_int_equal(rs.status, HF_RES_RELEASED);
    assert_string_equal(rs.reason, "stock_shortfall");
    assert_int_equal(ledger_count(fx, from, rid, HF_LEDGER_LATE_PAYMENT), 1); /* refund */
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.owed_qty, 0);
    assert_int_equal(e.allotted, 0);
}

/* A pending payment does not prolong a hold whose allotment a shortfall
 * recalls: the reservation ends RELEASED stock_shortfall and the units go
 * back, as a Commit would have; the success that follows is refunded. */
static void test_pending_payment_while_recall_owed_releases(void **state)
{
    stage_ctx_t *fx = *state;
    gateway_env_t *env = &fx->user->env;
    char errstr[256];
    assert_int_equal(gateway_parse_payment_policy("", env, errstr, sizeof errstr), HF_OK);
    env->payment_pending_extend_ms = 600000;
    env->payment_pending_max_ms = 3600000;
    allotment_t a = with_allotment(fx, 10);
    char rid[32];
    rid_in(rid, sizeof rid, a.p, 1);
    reserve(fx, rid, HOT, 3);
    hf_record_t g = grant_rec(a.p, 0, 0, 10);
    assert_int_equal(apply_key(fx, a.first, &g), HF_OK); /* 3 owed */
    size_t from = fx->emits_count;
    hf_record_t pend = {.type = HF_REC_PAYMENT_EVENT};
    hf_payment_event_t *p = &pend.u.payment_event;
    snprintf(p->reservation_id, sizeof p->reservation_id, "%s", rid);
    snprintf(p->idempotency_key, sizeof p->idempotency_key, "evt-1");
    p->event = HF_PAY_PROCESSING;
    snprintf(p->payment_id, sizeof p->payment_id, "pay-1");
    assert_int_equal(apply_key(fx, rid, &pend), HF_OK);
    hf_reply_t r = one_reply(fx, from);
    assert_int_equal(r.outcome, HF_REPLY_RELEASED);
    assert_string_equal(load_rs(fx, rid).reason, "stock_shortfall");
    assert_int_equal(one_request(fx, from).return_qty, 3);
    assert_int_equal(escrow_of(fx, a.p).owed_qty, 0);
    from = fx->emits_count;
    snprintf(p->idempotency_key, sizeof p->idempotency_key, "evt-2");
    p->event = HF_PAY_SUCCEEDED;
    assert_int_equal(apply_key(fx, rid, &pend), HF_OK);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_CONFLICT);
    assert_int_equal(ledger_count(fx, from, rid, HF_LEDGER_LATE_PAYMENT), 1); /* refund */
}

static void test_changed_balance_reported_by_tick(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    fx->now_ms += 250;
    size_t from = fx->emits_count;
    tick(fx);
    const hf_allotment_request_t *q =
        &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_int_equal(q->want_qty, 0);
    assert_int_equal(q->return_qty, 0);
    assert_int_equal(q->balance, 10);

    /* Less than a minimum refill's worth: said within HF_ESCROW_REPORT_MAX_MS,
     * not at the next tick. */
    char rid[32];
    rid_in(rid, sizeof rid, a.p, 1);
    reserve(fx, rid, HOT, 3);
    fx->now_ms += 250;
    from = fx->emits_count;
    tick(fx);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
    fx->now_ms += HF_ESCROW_REPORT_MAX_MS;
    from = fx->emits_count;
    tick(fx);
    q = &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_int_equal(q->want_qty, 0);
    assert_int_equal(q->return_qty, 0);
    assert_int_equal(q->balance, 7);
    assert_int_equal(escrow_of(fx, a.p).reported_balance, 7);

    /* Drained to 0: said at the next tick. */
    rid_in(rid, sizeof rid, a.p, 2);
    reserve(fx, rid, HOT, 7);
    fx->now_ms += 250;
    from = fx->emits_count;
    tick(fx);
    bool drained = false;
    for (size_t i = from; i < fx->emits_count; i++)
        drained = drained || (fx->emits[i].rec.type == HF_REC_ALLOTMENT_REQUEST &&
                              fx->emits[i].rec.u.allotment_request.balance == 0);
    assert_true(drained || escrow_of(fx, a.p).reported_balance == 0);

    /* Unchanged: nothing said. */
    fx->now_ms += 250;
    from = fx->emits_count;
    tick(fx);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
}

static void test_recall_returns_balance_now_and_rest_on_release(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->env.escrow.idle_return_ms = 2 * TTL_MS;
    allotment_t a = with_allotment(fx, 10);
    char r1[32];
    rid_in(r1, sizeof r1, a.p, 1);
    reserve(fx, r1, HOT, 3); /* balance 7, 3 held */

    size_t from = fx->emits_count;
    hf_record_t g = grant_rec(a.p, 0, 0, 9);
    assert_int_equal(apply_key(fx, a.first, &g), HF_OK);
    const hf_allotment_request_t *q =
        &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_int_equal(q->return_qty, 7); /* all it has now */
    assert_int_equal(q->want_qty, 0);
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 0);
    assert_int_equal(e.allotted, 3);
    assert_int_equal(e.owed_qty, 2);

    /* Owing: a new reserve is not served from the allotment. */
    char r2[32];
    rid_in(r2, sizeof r2, a.p, 2);
    from = fx->emits_count;
    reserve(fx, r2, HOT, 1);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 1);
    assert_false(load_rs(fx, r2).allocations[0].escrow);

    /* r1's 3 units come back: 2 go to the counter, 1 stays. */
    from = fx->emits_count;
    release(fx, r1);
    q = &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_int_equal(q->return_qty, 2);
    assert_int_equal(q->want_qty, 0);
    e = escrow_of(fx, a.p);
    assert_int_equal(e.owed_qty, 0);
    assert_int_equal(e.balance, 1);
    assert_int_equal(e.allotted, 1);
}

/* Another holder starves (not a shortfall): the unheld balance goes back,
 * nothing is owed, and the partition keeps serving from later refills. */
static void test_rebalance_recall_returns_balance_owes_nothing(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    char r1[32];
    rid_in(r1, sizeof r1, a.p, 1);
    reserve(fx, r1, HOT, 3); /* balance 7, 3 held */
    size_t from = fx->emits_count;
    hf_record_t g = grant_rec(a.p, 0, 0, 7);
    g.u.allotment_grant.shortfall = false;
    assert_int_equal(apply_key(fx, a.first, &g), HF_OK);
    const hf_allotment_request_t *q =
        &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_int_equal(q->return_qty, 7);
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 0);
    assert_int_equal(e.allotted, 3);
    assert_int_equal(e.owed_qty, 0);
    /* Released, the 3 stay here: nothing was owed. */
    from = fx->emits_count;
    release(fx, r1);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
    e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 3);
    assert_int_equal(e.allotted, 3);
}

static void test_revoked_sale_is_undone(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    char rid[32];
    rid_in(rid, sizeof rid, a.p, 1);
    reserve(fx, rid, HOT, 3);
    commit(fx, rid);
    int32_t attempt = load_rs(fx, rid).allocations[0].attempt;
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.allotted, 7);

    size_t from = fx->emits_count;
    counter_result(fx, rid, attempt, HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 3);
    hf_reservation_state_t rs = load_rs(fx, rid);
    assert_int_equal(rs.status, HF_RES_RELEASED);
    assert_string_equal(rs.reason, "stock_shortfall");
    assert_int_equal(ledger_count(fx, from, rid, HF_LEDGER_RELEASED), 1);
    assert_int_equal(ledger_count(fx, from, rid, HF_LEDGER_LATE_PAYMENT), 1); /* refund */
    assert_int_equal(commands(fx, from, HF_REC_RELEASE_HOLD), 0);
    /* The counter kept them allotted, under its recall: they go back to it. */
    const hf_allotment_request_t *q =
        &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_int_equal(q->return_qty, 3);
    e = escrow_of(fx, a.p);
    assert_int_equal(e.allotted, 7);
    assert_int_equal(e.balance, 7);
    assert_int_equal(e.owed_qty, 0);

    /* A repeat of the answer changes nothing. */
    from = fx->emits_count;
    counter_result(fx, rid, attempt, HF_CMD_COMMIT, HF_OUTCOME_REVOKED, 3);
    e = escrow_of(fx, a.p);
    assert_int_equal(e.allotted, 7);
    assert_int_equal(e.balance, 7);
    assert_int_equal(ledger_count(fx, from, rid, HF_LEDGER_RELEASED), 0);
}

static void test_grant_for_other_partition_rejected(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    hf_record_t g = grant_rec(a.p + 1, a.seq, 5, 0);
    assert_int_equal(apply_key(fx, a.first, &g), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "holder_key"));
    g = grant_rec(a.p, a.seq, -1, 0);
    assert_int_equal(apply_key(fx, a.first, &g), HF_ERR_INVAL);
    g = grant_rec(a.p, a.seq, 1, 0);
    snprintf(g.u.allotment_grant.sku, sizeof g.u.allotment_grant.sku, "BAD|SKU");
    assert_int_equal(apply_key(fx, a.first, &g), HF_ERR_INVAL);
    assert_int_equal(escrow_of(fx, a.p).allotted, 10);
    assert_int_equal(escrow_of(fx, a.p).balance, 10);
}

static void test_non_pinned_sku_never_touches_escrow(void **state)
{
    stage_ctx_t *fx = *state;
    char rid[32];
    rid_in(rid, sizeof rid, 1, 0);
    size_t from = fx->emits_count;
    reserve(fx, rid, COLD, 2);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 1);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
    fx->now_ms += IDLE_MS * 2;
    tick(fx);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
    assert_false(any_escrow_key(fx));
    assert_false(load_rs(fx, rid).allocations[0].escrow);
}

/* Not pinned, but contended (escrow_auto_reserves_s): once a second brings
 * enough reserves of the SKU to this partition, its next reserve asks for an
 * allotment, and after the grant is held in one hop; cooled down, the balance
 * goes back and reserves go direct again. */
static void test_contended_sku_switches_to_escrow_and_back(void **state)
{
    stage_ctx_t *fx = *state;
    gw_heat_conf_t hc = {.enter_per_s = 5, .cool_ms = 2000};
    fx->user->env.escrow.heat = gw_heat_new(&hc);
    char rid[32];
    size_t from = fx->emits_count;
    for (int i = 0; i < 4; i++) { /* 4 in a second: still direct, nothing asked */
        rid_in(rid, sizeof rid, 1, 100 + i);
        reserve(fx, rid, COLD, 1);
        assert_false(load_rs(fx, rid).allocations[0].escrow);
    }
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 0);
    rid_in(rid, sizeof rid, 1, 104); /* the 5th: contended now */
    reserve(fx, rid, COLD, 1);
    hf_allotment_request_t q = one_request(fx, from);
    assert_string_equal(q.sku, COLD);
    assert_true(q.want_qty >= REFILL_MIN);

    hf_record_t g = grant_rec(1, q.seq, 20, 0);
    snprintf(g.u.allotment_grant.sku, sizeof g.u.allotment_grant.sku, "%s", COLD);
    assert_int_equal(apply_key(fx, rid, &g), HF_OK);
    rid_in(rid, sizeof rid, 1, 105);
    from = fx->emits_count;
    reserve(fx, rid, COLD, 2);
    assert_true(load_rs(fx, rid).allocations[0].escrow);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 0);

    /* Quiet for longer than cool_ms: direct again, the balance given back. */
    fx->now_ms += 5000;
    from = fx->emits_count;
    tick(fx);
    q = one_request(fx, from);
    assert_int_equal(q.return_qty, 18);
    rid_in(rid, sizeof rid, 1, 106);
    reserve(fx, rid, COLD, 1);
    assert_false(load_rs(fx, rid).allocations[0].escrow);
}

/* A report the tick sends while a refill is asked for moves seq on; the grant
 * that answers the ask (its seq) must still end the ask, or the partition
 * cannot ask again for HF_ESCROW_ASK_TIMEOUT_MS and serves direct meanwhile. */
static void test_grant_answers_ask_after_a_report(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->env.escrow.idle_return_ms = 2 * TTL_MS;
    allotment_t a = with_allotment(fx, 10);
    fx->now_ms += 250;
    tick(fx); /* reports the granted 10 */
    char r1[32], r2[32], r3[32];
    rid_in(r1, sizeof r1, a.p, 1);
    rid_in(r2, sizeof r2, a.p, 2);
    rid_in(r3, sizeof r3, a.p, 3);
    size_t from = fx->emits_count;
    reserve(fx, r1, HOT, 6); /* balance 4: under the low watermark, asks */
    const hf_allotment_request_t *q =
        &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    int64_t ask_seq = q->seq;
    assert_true(q->want_qty > 0);
    reserve(fx, r2, HOT, 1); /* balance 3 */
    fx->now_ms += HF_ESCROW_REPORT_MAX_MS;
    tick(fx); /* reports balance 3 before the grant is back */
    assert_true(escrow_of(fx, a.p).seq > ask_seq);

    hf_record_t g = grant_rec(a.p, ask_seq, 10, 0);
    assert_int_equal(apply_key(fx, a.first, &g), HF_OK);
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 13);
    assert_int_equal(e.asking_qty, 0); /* the ask was answered */

    /* Running low again, well within HF_ESCROW_ASK_TIMEOUT_MS: it asks. */
    fx->now_ms += 100;
    from = fx->emits_count;
    reserve(fx, r3, HOT, 10);
    assert_true(load_rs(fx, r3).allocations[0].escrow);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 1);
}

/* A recall the counter decided before this partition's idle return reached it
 * names units the partition no longer has: only the units it still holds can
 * be owed, or the debt outlives the allotment and blocks every later take and
 * refill of the pair for good. */
static void test_recall_racing_a_return_does_not_wedge_escrow(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    hot_by_contention(fx, a.p);
    char r1[32], r2[32];
    rid_in(r1, sizeof r1, a.p, 1);
    rid_in(r2, sizeof r2, a.p, 2);
    reserve(fx, r1, HOT, 3); /* balance 7, 3 held */
    fx->now_ms = escrow_of(fx, a.p).last_take_ms + IDLE_MS;
    size_t from = fx->emits_count;
    tick(fx); /* idle: the 7 go back */
    assert_int_equal(
        one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request.return_qty, 7);
    assert_int_equal(escrow_of(fx, a.p).allotted, 3);

    /* The counter saw 10 allotted when the shortfall came: recalls 10. */
    hf_record_t g = grant_rec(a.p, 0, 0, 10);
    assert_int_equal(apply_key(fx, a.first, &g), HF_OK);
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_true(e.owed_qty <= e.allotted - e.balance);

    release(fx, r1); /* the 3 held units go to the counter */
    e = escrow_of(fx, a.p);
    assert_int_equal(e.allotted, 0);
    assert_int_equal(e.owed_qty, 0);

    /* The pair's escrow works again: the next reserve asks for a refill (long
     * after any ask could have timed out). */
    fx->now_ms += 10 * HF_ESCROW_ASK_TIMEOUT_MS;
    tick(fx);
    from = fx->emits_count;
    reserve(fx, r2, HOT, 1);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 1);
}

/* The allotment is state like any other: a restore from the changelog keeps
 * it, and the next reserve is still served from it. */
static void test_allotment_survives_restore(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    char r1[32], r2[32];
    rid_in(r1, sizeof r1, a.p, 1);
    rid_in(r2, sizeof r2, a.p, 2);
    reserve(fx, r1, HOT, 3);
    fake_stage_restore(fx, gateway_stage());
    hf_escrow_state_t e = escrow_of(fx, a.p);
    assert_int_equal(e.balance, 7);
    assert_int_equal(e.allotted, 10);
    size_t from = fx->emits_count;
    reserve(fx, r2, HOT, 2);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    assert_int_equal(commands(fx, from, HF_REC_HOLD), 0);
    assert_int_equal(escrow_of(fx, a.p).balance, 5);
}

/* A SKU no longer pinned (escrow_skus changed at a restart) keeps no
 * allotment: the tick gives its balance back. */
static void test_unpinned_sku_balance_returned(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    gateway_env_t *env = &fx->user->env;
    snprintf(env->escrow.skus[0], sizeof env->escrow.skus[0], "OTHER-1");
    fx->now_ms += 250;
    size_t from = fx->emits_count;
    tick(fx);
    const hf_allotment_request_t *q =
        &one_command(fx, from, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    assert_int_equal(q->return_qty, 10);
    assert_int_equal(escrow_of(fx, a.p).allotted, 0);
}

/* The same when escrow is switched off altogether (escrow_skus empty): the
 * allotments granted before must still go back, or their units stay out of
 * the counter's free stock for good while the view counts them as sellable. */
static void test_escrow_switched_off_returns_allotments(void **state)
{
    stage_ctx_t *fx = *state;
    allotment_t a = with_allotment(fx, 10);
    fx->user->env.escrow.skus_count = 0;
    fx->now_ms += 250;
    size_t from = fx->emits_count;
    tick(fx);
    assert_int_equal(commands(fx, from, HF_REC_ALLOTMENT_REQUEST), 1);
    assert_int_equal(escrow_of(fx, a.p).allotted, 0);
}

int main(void)
{
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    log_set_level(HF_LOG_ERROR); /* recalls and revokes log warnings by design */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unpinned_sku_balance_returned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escrow_switched_off_returns_allotments, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_first_reserve_goes_direct_and_asks_for_allotment,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_grant_fills_balance_and_next_reserve_held_in_one_hop,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_of_escrow_hold_sends_allotment_sale, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_release_and_expiry_put_units_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scarce_sku_drains_and_tick_returns_unused_balance,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_allotment_returned_by_tick, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pinned_allotment_kept_warm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_line_routed_to_the_partitions_own_balance, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pinned_sku_primed_before_first_shopper, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_prime_share_floored_and_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_while_recall_owed_is_revoked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_payment_while_recall_owed_releases, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_changed_balance_reported_by_tick, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recall_returns_balance_now_and_rest_on_release, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_revoked_sale_is_undone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebalance_recall_returns_balance_owes_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_grant_for_other_partition_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_pinned_sku_never_touches_escrow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contended_sku_switches_to_escrow_and_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_allotment_survives_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grant_answers_ask_after_a_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recall_racing_a_return_does_not_wedge_escrow, setup,
                                        teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    codec_shutdown();
    return failed;
}
