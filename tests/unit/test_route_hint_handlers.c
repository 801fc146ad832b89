/* Unit tests of stock hints (processor/gateway/stock_hint.c): the gateway
 * routes on the counters' last answers while they are fresher than its view,
 * so a shopper the network cannot serve is refused in one hop. Three levels:
 *   - the module itself (gw_hint_new/note/add/apply), no stage at all;
 *   - the gateway's handlers on the fake stage of fake/fake_stage.h, with a
 *     routing view the test fills, a controllable clock, and a small model of
 *     the counters whose answers carry the escrow_balance the test chooses
 *     (0: a fresh answer, -1: not reported, as a retry's);
 *   - the counter's Hold handler: what escrow_balance its answers carry.
 * Built like every test_*_handlers.c (linked with the fake stage). */
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
#include "gateway/gateway.h"
#include "hf_limits.h"
#include "log.h"
#include "stage.h"
#include "state.h"
#include "topics.h"

#define T0             1700000000000LL
#define HINT_TTL_MS    500
#define TTL_DEFAULT_MS (15 * 60 * 1000LL)

/* ======================================================================
 * Module level: gw_hint_* on availability records built by hand.
 * ====================================================================== */

/* sku's availability at W1..Wn: avail[i] sellable, escrow[i] of it in
 * allotments (escrow NULL: none). */
static hf_availability_t av_of(const char *sku, const int64_t *avail, const int64_t *escrow,
                               size_t n)
{
    hf_availability_t a;
    memset(&a, 0, sizeof a);
    snprintf(a.sku, sizeof a.sku, "%s", sku);
    for (size_t i = 0; i < n; i++) {
        hf_wh_available_t *w = &a.warehouses[a.warehouses_count++];
        snprintf(w->warehouse_id, sizeof w->warehouse_id, "%s", fake_warehouses[i].id);
        w->available = avail[i];
        w->escrow = escrow ? escrow[i] : 0;
        a.total += avail[i];
    }
    a.in_stock = a.total > 0;
    return a;
}

/* Applies h to a fresh copy of *view at now_ms; returns the copy. */
static hf_availability_t applied(gw_hint_t *h, const hf_availability_t *view, int64_t now_ms,
                                 int expect_rewritten)
{
    hf_availability_t a = *view;
    assert_int_equal(gw_hint_apply(h, &a, now_ms), expect_rewritten);
    return a;
}

static const int64_t view3[3] = {10, 20, 30};

/* A note rewrites that warehouse's available and the total, leaves the other
 * warehouses, other SKUs and in_stock (the signalled state) alone, and holds
 * for the whole TTL. */
static void test_module_note_rewrites_that_warehouse_and_the_total_only(void **state)
{
    (void)state;
    gw_hint_t *h = gw_hint_new(HINT_TTL_MS);
    assert_non_null(h);
    hf_availability_t view = av_of("S", view3, NULL, 3);
    /* No hint yet: the view is untouched. */
    hf_availability_t a = applied(h, &view, T0, 0);
    assert_memory_equal(&a, &view, sizeof a);

    gw_hint_note(h, "W2", "S", 3, T0);
    a = applied(h, &view, T0, 1);
    assert_int_equal(a.warehouses[0].available, 10);
    assert_int_equal(a.warehouses[1].available, 3);
    assert_int_equal(a.warehouses[2].available, 30);
    assert_int_equal(a.total, 43);
    assert_true(a.in_stock);
    a = applied(h, &view, T0 + HINT_TTL_MS - 1, 1); /* still fresh at the TTL's last ms */
    assert_int_equal(a.warehouses[1].available, 3);

    /* The same warehouse under another SKU has no hint. */
    hf_availability_t other = av_of("S2", view3, NULL, 3);
    a = applied(h, &other, T0, 0);
    assert_int_equal(a.warehouses[1].available, 20);
    assert_int_equal(a.total, 60);

    /* Every warehouse called empty: the total is 0. */
    gw_hint_note(h, "W1", "S", 0, T0);
    gw_hint_note(h, "W2", "S", 0, T0);
    gw_hint_note(h, "W3", "S", 0, T0);
    a = applied(h, &view, T0 + 1, 3);
    assert_int_equal(a.total, 0);
    gw_hint_destroy(h);
    gw_hint_destroy(NULL); /* accepted */
}

/* A stale hint leaves routing to the view until a Hold is sent there: that
 * Hold is the probe, and while it is out (a TTL) the hint stands in again —
 * but never once it is two TTLs old. */
static void test_module_stale_hint_lets_one_caller_probe_per_ttl(void **state)
{
    (void)state;
    gw_hint_t *h = gw_hint_new(HINT_TTL_MS);
    assert_non_null(h);
    hf_availability_t view = av_of("S", view3, NULL, 3);
    gw_hint_note(h, "W1", "S", 0, T0);
    int64_t t = T0 + HINT_TTL_MS;
    hf_availability_t a = applied(h, &view, t, 0); /* stale: the view as it is */
    assert_int_equal(a.warehouses[0].available, 10);
    assert_int_equal(a.total, 60);
    (void)applied(h, &view, t, 0);    /* still the view: no Hold went there yet */
    gw_hint_take(h, "W1", "S", 1, t); /* the probe */
    a = applied(h, &view, t, 1);      /* the next caller, same ms: the hint */
    assert_int_equal(a.warehouses[0].available, 0);
    assert_int_equal(a.total, 50);
    (void)applied(h, &view, t + HINT_TTL_MS - 1, 1);
    /* The probe's answer never came and the hint is two TTLs old: the view. */
    a = applied(h, &view, t + HINT_TTL_MS, 0);
    assert_int_equal(a.warehouses[0].available, 10);

    /* A probe sent late in the hint's second TTL does not stretch it. */
    gw_hint_note(h, "W2", "S", 0, T0);
    gw_hint_take(h, "W2", "S", 1, T0 + HINT_TTL_MS + HINT_TTL_MS / 2);
    (void)applied(h, &view, T0 + 2 * HINT_TTL_MS - 1, 2); /* W1 too, as above */
    a = applied(h, &view, T0 + 2 * HINT_TTL_MS, 0);
    assert_int_equal(a.warehouses[1].available, 20);
    gw_hint_destroy(h);
}

/* A note after a probe (its answer) ends the probe: its figure is used at once
 * and for a full TTL from the note, even past the end of the probe's window. */
static void test_module_a_new_note_ends_the_probe(void **state)
{
    (void)state;
    gw_hint_t *h = gw_hint_new(HINT_TTL_MS);
    assert_non_null(h);
    hf_availability_t view = av_of("S", view3, NULL, 3);
    gw_hint_note(h, "W1", "S", 0, T0);
    int64_t probe = T0 + HINT_TTL_MS;
    (void)applied(h, &view, probe, 0);
    gw_hint_note(h, "W1", "S", 4, probe + 1);
    hf_availability_t a = applied(h, &view, probe + 2, 1);
    assert_int_equal(a.warehouses[0].available, 4);
    assert_int_equal(a.total, 54);
    /* probe + TTL would have been the next probe; the note is fresh until +1. */
    a = applied(h, &view, probe + HINT_TTL_MS, 1);
    assert_int_equal(a.warehouses[0].available, 4);
    a = applied(h, &view, probe + 1 + HINT_TTL_MS, 0); /* the new note's own probe */
    assert_int_equal(a.warehouses[0].available, 10);
    gw_hint_destroy(h);
}

/* Released units are added to the pair's hint; a pair without a hint gets
 * none (the view keeps answering for it). */
static void test_module_add_raises_a_hint_and_creates_none(void **state)
{
    (void)state;
    gw_hint_t *h = gw_hint_new(HINT_TTL_MS);
    assert_non_null(h);
    hf_availability_t view = av_of("S", view3, NULL, 3);
    gw_hint_note(h, "W1", "S", 0, T0);
    gw_hint_add(h, "W1", "S", 3);
    gw_hint_add(h, "W2", "S", 5); /* no hint: nothing */
    hf_availability_t a = applied(h, &view, T0 + 1, 1);
    assert_int_equal(a.warehouses[0].available, 3);
    assert_int_equal(a.warehouses[1].available, 20);
    assert_int_equal(a.total, 53);
    gw_hint_add(h, "W1", "S", 2);
    a = applied(h, &view, T0 + 2, 1);
    assert_int_equal(a.warehouses[0].available, 5);
    /* The addition does not refresh the hint: it ages from its note. */
    a = applied(h, &view, T0 + HINT_TTL_MS, 0);
    assert_int_equal(a.warehouses[0].available, 10);
    gw_hint_destroy(h);
}

/* A warehouse's escrow (units in allotments, part of its available) never
 * exceeds the rewritten available; a smaller escrow is left as it is. */
static void test_module_escrow_is_clamped_to_the_rewritten_available(void **state)
{
    (void)state;
    gw_hint_t *h = gw_hint_new(HINT_TTL_MS);
    assert_non_null(h);
    const int64_t escrow[3] = {8, 2, 30};
    hf_availability_t view = av_of("S", view3, escrow, 3);
    gw_hint_note(h, "W1", "S", 3, T0);
    gw_hint_note(h, "W2", "S", 5, T0);
    hf_availability_t a = applied(h, &view, T0, 2);
    assert_int_equal(a.warehouses[0].available, 3);
    assert_int_equal(a.warehouses[0].escrow, 3);
    assert_int_equal(a.warehouses[1].available, 5);
    assert_int_equal(a.warehouses[1].escrow, 2);
    assert_int_equal(a.warehouses[2].escrow, 30); /* no hint */
    assert_int_equal(a.total, 38);
    gw_hint_destroy(h);
}

/* The table stays bounded: noting many times HF_STOCK_HINT_SLOTS_MAX distinct
 * pairs neither crashes nor grows it, the newest pairs are still found with
 * their figures, a pair noted again is updated in place, and a hot pair noted
 * every so often keeps its hint while thousands of others come and go (a
 * full run gives up its stalest slot, not just any). */
static void test_module_table_is_bounded_and_keeps_the_newest_pairs(void **state)
{
    (void)state;
    gw_hint_t *h = gw_hint_new(HINT_TTL_MS);
    assert_non_null(h);
    const int n = 4 * HF_STOCK_HINT_SLOTS_MAX;
    const int64_t one[1] = {100};
    hf_availability_t hot = av_of("HOT", one, NULL, 1);
    char sku[32];
    for (int i = 0; i < n; i++) {
        snprintf(sku, sizeof sku, "SKU-%06d", i);
        gw_hint_note(h, "W1", sku, i % 7, T0 + i);
        if (i % 64 == 0) {
            gw_hint_note(h, "W1", "HOT", 1, T0 + i);
            continue;
        }
        hf_availability_t a = hot;
        if (gw_hint_apply(h, &a, T0 + i) != 1 || a.warehouses[0].available != 1)
            fail_msg("the hot pair lost its hint after %d other notes", i);
    }
    int64_t now = T0 + n;
    /* The newest HF_STOCK_HINT_PROBE_MAX pairs cannot have been evicted: an
     * eviction takes the stalest slot of a full probe run. */
    for (int i = n - HF_STOCK_HINT_PROBE_MAX; i < n; i++) {
        snprintf(sku, sizeof sku, "SKU-%06d", i);
        hf_availability_t view = av_of(sku, one, NULL, 1);
        hf_availability_t a = applied(h, &view, now, 1);
        assert_int_equal(a.warehouses[0].available, i % 7);
    }
    snprintf(sku, sizeof sku, "SKU-%06d", n - 1);
    gw_hint_note(h, "W1", sku, 42, now);
    hf_availability_t view = av_of(sku, one, NULL, 1);
    assert_int_equal(applied(h, &view, now, 1).warehouses[0].available, 42);
    gw_hint_destroy(h);
}

/* ======================================================================
 * Gateway level: the handlers on the fake stage, hints on.
 * ====================================================================== */

typedef struct {
    hf_wh_t w;
    hf_sku_t sku;
    int64_t available;
} m_pair_t;

typedef struct {
    hf_id_t rid;
    int32_t attempt;
    hf_wh_t w;
    hf_sku_t sku;
    int64_t qty;
    bool held;
} m_hold_t;

#define M_PAIRS_MAX   64
#define M_HOLDS_MAX   256
#define M_RESULTS_MAX 256
#define VIEW_MAX      8

struct fake_stage_user {
    gateway_env_t env;
    gw_sweep_t sweep;
    hf_availability_t view[VIEW_MAX];
    size_t view_count;
    /* The counters' model: free units per pair, the holds it answered, and
     * the answers not yet delivered. */
    m_pair_t pairs[M_PAIRS_MAX];
    size_t pairs_count;
    m_hold_t holds[M_HOLDS_MAX];
    size_t holds_count;
    size_t cmd_cursor; /* emits below it were seen by the counters */
    hf_counter_result_t results[M_RESULTS_MAX];
    size_t results_count;
    int64_t answer_age_ms; /* the counters' answers were applied this long ago */
    /* escrow_balance of the counters' Hold answers: >= 0 a fresh answer (the
     * allotments' balance, added to available), -1 not reported. */
    int64_t report_escrow;
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
    return 0; /* the view is current (as far as it knows) */
}

/* The view says sku has avail[i] at W(i+1): what it last heard, whatever the
 * counters hold now. */
static void view_set(stage_ctx_t *fx, const char *sku, const int64_t *avail, size_t n)
{
    hf_availability_t *a = NULL;
    for (size_t i = 0; i < fx->user->view_count; i++)
        if (strcmp(fx->user->view[i].sku, sku) == 0)
            a = &fx->user->view[i];
    if (!a) {
        assert_true(fx->user->view_count < VIEW_MAX);
        a = &fx->user->view[fx->user->view_count++];
    }
    *a = av_of(sku, avail, NULL, n);
}

static m_pair_t *m_pair(stage_ctx_t *fx, const char *w, const char *sku)
{
    for (size_t i = 0; i < fx->user->pairs_count; i++)
        if (strcmp(fx->user->pairs[i].w, w) == 0 && strcmp(fx->user->pairs[i].sku, sku) == 0)
            return &fx->user->pairs[i];
    assert_true(fx->user->pairs_count < M_PAIRS_MAX);
    m_pair_t *p = &fx->user->pairs[fx->user->pairs_count++];
    memset(p, 0, sizeof *p);
    snprintf(p->w, sizeof p->w, "%s", w);
    snprintf(p->sku, sizeof p->sku, "%s", sku);
    return p;
}

/* The counters hold avail[i] of sku at W(i+1). */
static void counters_have(stage_ctx_t *fx, const char *sku, const int64_t *avail, size_t n)
{
    for (size_t i = 0; i < n; i++)
        m_pair(fx, fake_warehouses[i].id, sku)->available = avail[i];
}

static int setup_gateway(void **state)
{
    stage_ctx_t *fx = fake_stage_new("route_hint", T0);
    fx->user = calloc(1, sizeof *fx->user);
    assert_non_null(fx->user);
    gateway_env_t *e = &fx->user->env;
    fake_stage_routes(&e->routes);
    e->ttl_default_ms = TTL_DEFAULT_MS;
    snprintf(e->reply_topic_prefix, sizeof e->reply_topic_prefix, "holdfast.replies.");
    e->hold_max_factor_pct = 200;
    e->idempotency_retention_ms = 24 * 3600 * 1000LL;
    e->reservation_retention_ms = 7 * 24 * 3600 * 1000LL;
    e->late_policy = GW_LATE_REFUND;
    e->result_timeout_ms = 5000;
    e->view_stale_max_ms = 10000;
    e->availability = fake_availability;
    e->staleness_ms = fake_staleness;
    e->opaque = fx;
    e->hint = gw_hint_new(HINT_TTL_MS); /* as gateway_env_new with route_hint_ttl_ms */
    assert_non_null(e->hint);
    fx->user->sweep.run_id = 1;
    e->sweep = &fx->user->sweep;
    fx->user->report_escrow = 0;
    fx->env = e;
    *state = fx;
    return 0;
}

static int teardown_gateway(void **state)
{
    stage_ctx_t *fx = *state;
    gw_hint_destroy(fx->user->env.hint);
    free(fx->user);
    fake_stage_destroy(fx);
    return 0;
}

/* One record, one transaction, keyed by its reservation_id. */
static void gw_apply(stage_ctx_t *fx, const char *rid, const hf_record_t *rec)
{
    assert_int_equal(fake_stage_apply(fx, gateway_stage(), rid, rec), HF_OK);
    fake_stage_commit(fx);
}

static hf_record_t reserve_rec(const char *rid, const char *sku, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "k");
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "%s", sku);
    q->lines[0].qty = qty;
    q->ship_to = (hf_geo_t){40.73, -73.99}; /* Manhattan: W1 is the nearest */
    q->sent_at_ms = T0;
    return r;
}

static hf_record_t release_rec(const char *rid)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RELEASE;
    snprintf(r.u.release.reservation_id, sizeof r.u.release.reservation_id, "%s", rid);
    snprintf(r.u.release.idempotency_key, sizeof r.u.release.idempotency_key, "x");
    return r;
}

static size_t count_of(const stage_ctx_t *fx, size_t from, int topic_id, hf_rec_type_t type)
{
    size_t n = 0;
    for (size_t i = from; i < fx->emits_count; i++)
        n += fx->emits[i].topic_id == topic_id && fx->emits[i].rec.type == type;
    return n;
}

static size_t holds_since(const stage_ctx_t *fx, size_t from)
{
    return count_of(fx, from, HF_T_COUNTER_COMMANDS, HF_REC_HOLD);
}

static size_t replies_since(const stage_ctx_t *fx, size_t from)
{
    return count_of(fx, from, -1, HF_REC_REPLY);
}

/* The n-th Hold emitted since from. */
static hf_hold_t nth_hold(const stage_ctx_t *fx, size_t from, size_t n)
{
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].topic_id == HF_T_COUNTER_COMMANDS &&
            fx->emits[i].rec.type == HF_REC_HOLD && n-- == 0)
            return fx->emits[i].rec.u.hold;
    fail_msg("fewer Holds than asked since %zu", from);
    return (hf_hold_t){0};
}

/* The only reply emitted since from. */
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

static void m_result(stage_ctx_t *fx, const m_hold_t *h, hf_cmd_t cmd, hf_outcome_t outcome,
                     int64_t available, int64_t escrow_balance)
{
    assert_true(fx->user->results_count < M_RESULTS_MAX);
    hf_counter_result_t *r = &fx->user->results[fx->user->results_count++];
    memset(r, 0, sizeof *r);
    snprintf(r->reservation_id, sizeof r->reservation_id, "%s", h->rid);
    r->attempt = h->attempt;
    snprintf(r->warehouse_id, sizeof r->warehouse_id, "%s", h->w);
    snprintf(r->sku, sizeof r->sku, "%s", h->sku);
    r->command = cmd;
    r->outcome = outcome;
    r->qty = h->qty;
    r->available = available;
    r->applied_at_ms = fx->now_ms - fx->user->answer_age_ms;
    r->escrow_balance = escrow_balance;
}

static m_hold_t *m_hold(stage_ctx_t *fx, const char *rid, int32_t attempt, const char *w,
                        const char *sku)
{
    for (size_t i = 0; i < fx->user->holds_count; i++) {
        m_hold_t *h = &fx->user->holds[i];
        if (h->attempt == attempt && strcmp(h->rid, rid) == 0 && strcmp(h->w, w) == 0 &&
            strcmp(h->sku, sku) == 0)
            return h;
    }
    return NULL;
}

/* A Hold: held if the pair's free units cover it, else INSUFFICIENT; the
 * answer carries the pair's available after it and fx->user->report_escrow. */
static void m_on_hold(stage_ctx_t *fx, const hf_hold_t *c)
{
    assert_null(m_hold(fx, c->reservation_id, c->attempt, c->warehouse_id, c->sku));
    assert_true(fx->user->holds_count < M_HOLDS_MAX);
    m_hold_t *h = &fx->user->holds[fx->user->holds_count++];
    memset(h, 0, sizeof *h);
    snprintf(h->rid, sizeof h->rid, "%s", c->reservation_id);
    h->attempt = c->attempt;
    snprintf(h->w, sizeof h->w, "%s", c->warehouse_id);
    snprintf(h->sku, sizeof h->sku, "%s", c->sku);
    h->qty = c->qty;
    m_pair_t *p = m_pair(fx, c->warehouse_id, c->sku);
    h->held = c->qty <= p->available;
    if (h->held)
        p->available -= c->qty;
    m_result(fx, h, HF_CMD_HOLD, h->held ? HF_OUTCOME_OK : HF_OUTCOME_INSUFFICIENT, p->available,
             fx->user->report_escrow);
}

static void m_on_release(stage_ctx_t *fx, const hf_release_hold_t *c)
{
    m_hold_t *h = m_hold(fx, c->reservation_id, c->attempt, c->warehouse_id, c->sku);
    assert_non_null(h);
    if (h->held)
        m_pair(fx, h->w, h->sku)->available += h->qty;
    h->held = false;
    m_result(fx, h, HF_CMD_RELEASE, HF_OUTCOME_OK, m_pair(fx, h->w, h->sku)->available, -1);
}

/* The counters apply every command emitted since they last looked. */
static void counters_apply(stage_ctx_t *fx)
{
    for (; fx->user->cmd_cursor < fx->emits_count; fx->user->cmd_cursor++) {
        const fake_stage_emit_t *e = &fx->emits[fx->user->cmd_cursor];
        if (e->topic_id != HF_T_COUNTER_COMMANDS)
            continue;
        if (e->rec.type == HF_REC_HOLD)
            m_on_hold(fx, &e->rec.u.hold);
        else if (e->rec.type == HF_REC_RELEASE_HOLD)
            m_on_release(fx, &e->rec.u.release_hold);
        else
            fail_msg("unexpected %s on the commands topic", hf_rec_type_name(e->rec.type));
    }
}

/* Counters and gateway talk until nothing more is said. */
static void settle(stage_ctx_t *fx)
{
    for (int round = 0; round < 100; round++) {
        counters_apply(fx);
        size_t n = fx->user->results_count;
        if (n == 0)
            return;
        hf_counter_result_t batch[M_RESULTS_MAX];
        memcpy(batch, fx->user->results, n * sizeof batch[0]);
        fx->user->results_count = 0;
        for (size_t i = 0; i < n; i++) {
            hf_record_t rec = {.type = HF_REC_COUNTER_RESULT, .u.counter_result = batch[i]};
            gw_apply(fx, batch[i].reservation_id, &rec);
        }
    }
    fail_msg("the saga did not settle in 100 rounds");
}

/* Applies a Reserve of qty sku; returns how many Holds it emitted in that very
 * step (before any answer). */
static size_t reserve(stage_ctx_t *fx, const char *rid, const char *sku, int64_t qty)
{
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec(rid, sku, qty);
    gw_apply(fx, rid, &r);
    return holds_since(fx, from);
}

/* A Reserve answered REJECTED_INSUFFICIENT in its own step, no Hold emitted. */
static void expect_refused_in_one_step(stage_ctx_t *fx, const char *rid, const char *sku,
                                       int64_t qty)
{
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, rid, sku, qty), 0);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    if (!strstr(rep.message, "0 available in the network"))
        fail_msg("message \"%s\" does not say nothing is available", rep.message);
}

static const int64_t five_each[FAKE_WAREHOUSES_COUNT] = {5, 5, 5, 5, 5, 5};
static const int64_t none_each[FAKE_WAREHOUSES_COUNT] = {0};

/* The view says FLASH has 5 at every warehouse, the counters have none: a
 * Reserve of all 30 is split over the six warehouses, every Hold is refused
 * (available 0, escrow_balance fx->user->report_escrow), and the Reserve is
 * rejected. */
static void sell_out_everywhere(stage_ctx_t *fx)
{
    view_set(fx, "FLASH", five_each, FAKE_WAREHOUSES_COUNT);
    counters_have(fx, "FLASH", none_each, FAKE_WAREHOUSES_COUNT);
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, "first", "FLASH", 30), FAKE_WAREHOUSES_COUNT);
    for (size_t w = 0; w < FAKE_WAREHOUSES_COUNT; w++) { /* one Hold of 5 per warehouse */
        size_t asked = 0;
        for (size_t i = 0; i < FAKE_WAREHOUSES_COUNT; i++) {
            hf_hold_t h = nth_hold(fx, from, i);
            asked += strcmp(h.warehouse_id, fake_warehouses[w].id) == 0 && h.qty == 5;
        }
        assert_int_equal(asked, 1);
    }
    settle(fx);
    assert_int_equal(holds_since(fx, from), FAKE_WAREHOUSES_COUNT); /* no re-route round */
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_REJECTED_INSUFFICIENT);
}

/* Once the counters answered "nothing left" at every warehouse of a SKU, a new
 * Reserve for it is refused in the same step without a Hold, although the
 * (stale) view still shows stock; another SKU at those warehouses is not
 * affected. */
static void test_gateway_sku_called_empty_everywhere_is_refused_in_one_step(void **state)
{
    stage_ctx_t *fx = *state;
    sell_out_everywhere(fx);
    expect_refused_in_one_step(fx, "next", "FLASH", 1);
    expect_refused_in_one_step(fx, "next2", "FLASH", 1);
    /* Hints are per pair: OTHER at the same warehouses routes on the view. */
    view_set(fx, "OTHER", five_each, FAKE_WAREHOUSES_COUNT);
    counters_have(fx, "OTHER", five_each, FAKE_WAREHOUSES_COUNT);
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, "other", "OTHER", 1), 1);
    assert_int_equal(replies_since(fx, from), 0);
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
}

/* Control: answers that do not report the balance (escrow_balance -1, e.g. a
 * retried Hold answered from its record) leave routing on the view. */
static void test_gateway_answers_without_escrow_balance_leave_routing_on_the_view(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->report_escrow = -1;
    sell_out_everywhere(fx);
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, "next", "FLASH", 1), 1);
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, "W1");
    assert_int_equal(replies_since(fx, from), 0); /* awaiting the counter */
}

/* A pair its counter called empty is skipped by the next Reserve, which goes
 * straight to a warehouse that has stock (one Hold, held in one hop); the
 * other pairs keep routing on the view. Without the balance (-1) the next
 * Reserve asks the empty warehouse again first. */
static void one_empty_warehouse(stage_ctx_t *fx, int64_t report_escrow, bool expect_skip)
{
    fx->user->report_escrow = report_escrow;
    view_set(fx, "SKU-A", five_each, FAKE_WAREHOUSES_COUNT);
    const int64_t counters[FAKE_WAREHOUSES_COUNT] = {0, 5, 5, 5, 5, 5};
    counters_have(fx, "SKU-A", counters, FAKE_WAREHOUSES_COUNT);
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, "a1", "SKU-A", 1), 1);
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, "W1");
    settle(fx); /* refused at W1, re-routed, held elsewhere */
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    assert_int_equal(holds_since(fx, from), 2);

    from = fx->emits_count;
    assert_int_equal(reserve(fx, "a2", "SKU-A", 1), 1);
    hf_hold_t h = nth_hold(fx, from, 0);
    if (expect_skip)
        assert_string_not_equal(h.warehouse_id, "W1");
    else
        assert_string_equal(h.warehouse_id, "W1");
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    assert_int_equal(holds_since(fx, from), expect_skip ? 1 : 2);
}

static void test_gateway_a_pair_called_empty_is_not_asked_again(void **state)
{
    one_empty_warehouse(*state, 0, true);
}

/* W1's last unit is held; its counter's answer ("0 left") was applied age_ms
 * before it arrived. Returns where the next Reserve's Hold goes. */
static hf_hold_t after_last_unit_held(stage_ctx_t *fx, int64_t age_ms)
{
    fx->user->answer_age_ms = age_ms;
    view_set(fx, "SKU-A", five_each, FAKE_WAREHOUSES_COUNT);
    const int64_t counters[FAKE_WAREHOUSES_COUNT] = {1, 5, 5, 5, 5, 5};
    counters_have(fx, "SKU-A", counters, FAKE_WAREHOUSES_COUNT);
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, "l1", "SKU-A", 1), 1);
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, "W1");
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    from = fx->emits_count;
    assert_int_equal(reserve(fx, "l2", "SKU-A", 1), 1);
    return nth_hold(fx, from, 0);
}

/* A gateway that reads its results late: an answer applied a TTL before it
 * arrives is no fresher than that, so the pair is asked again (the probe);
 * read at once, the same answer keeps the Reserve away from W1. */
static void test_gateway_an_answer_read_a_ttl_late_is_not_routed_on(void **state)
{
    assert_string_equal(after_last_unit_held(*state, HINT_TTL_MS).warehouse_id, "W1");
}

static void test_gateway_an_answer_read_at_once_is_routed_on(void **state)
{
    assert_string_not_equal(after_last_unit_held(*state, 0).warehouse_id, "W1");
}

static void test_gateway_without_escrow_balance_the_empty_pair_is_asked_again(void **state)
{
    one_empty_warehouse(*state, -1, false);
}

/* After the TTL each warehouse is probed once: a Reserve routed on the view
 * sends one Hold to a warehouse with no probe out, until every warehouse has
 * one; then Reserves are refused without a Hold, before and after the probes'
 * answers. Probes whose answers are lost leave the hints good until they are
 * two TTLs old; then the view decides and the next Reserve probes again. */
static void test_gateway_after_the_ttl_one_reserve_probes_the_others_are_refused(void **state)
{
    stage_ctx_t *fx = *state;
    sell_out_everywhere(fx);
    fx->now_ms += HINT_TTL_MS;
    bool probed[FAKE_WAREHOUSES_COUNT] = {false};
    for (int i = 0; i < FAKE_WAREHOUSES_COUNT; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "probe%d", i);
        size_t from = fx->emits_count;
        assert_int_equal(reserve(fx, rid, "FLASH", 1), 1);
        assert_int_equal(replies_since(fx, from), 0);
        const char *w = nth_hold(fx, from, 0).warehouse_id;
        int n = w[1] - '1'; /* "W1".."W6" */
        assert_true(n >= 0 && n < FAKE_WAREHOUSES_COUNT && !probed[n]);
        probed[n] = true;
    }
    expect_refused_in_one_step(fx, "p2", "FLASH", 1); /* every probe is out */
    size_t before_answer = fx->emits_count;
    settle(fx); /* empty again everywhere: the re-routes send no Hold */
    assert_int_equal(holds_since(fx, before_answer), 0);
    expect_refused_in_one_step(fx, "p3", "FLASH", 1);

    /* A TTL later: probes whose answers are lost (never delivered). */
    fx->now_ms += HINT_TTL_MS;
    for (int i = 0; i < FAKE_WAREHOUSES_COUNT; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "lost%d", i);
        assert_int_equal(reserve(fx, rid, "FLASH", 1), 1);
    }
    fx->user->results_count = 0; /* lost */
    expect_refused_in_one_step(fx, "p4", "FLASH", 1);
    fx->now_ms += HINT_TTL_MS - 1;
    expect_refused_in_one_step(fx, "p5", "FLASH", 1);
    fx->now_ms += 1; /* two TTLs since the answers: the view again, one more probe */
    assert_int_equal(reserve(fx, "again", "FLASH", 1), 1);
}

/* A pair restocked after it was called empty sells again: refused while the
 * hint is fresh (the documented cost), then the probe is held and its answer
 * makes the pair routable for the next shoppers at once. */
static void test_gateway_a_restocked_pair_sells_again_after_the_probe(void **state)
{
    stage_ctx_t *fx = *state;
    sell_out_everywhere(fx);
    const int64_t restock[1] = {10};
    counters_have(fx, "FLASH", restock, 1); /* W1 received 10 */
    fx->now_ms += HINT_TTL_MS - 1;
    expect_refused_in_one_step(fx, "early", "FLASH", 1);
    fx->now_ms += 1;
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, "probe", "FLASH", 1), 1);
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    from = fx->emits_count; /* W1's hint now says 9 */
    assert_int_equal(reserve(fx, "after", "FLASH", 2), 1);
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, "W1");
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
}

/* The shopper releases a HELD reservation: its units are the pair's again at
 * once, so a Reserve refused a moment before is now routed (a Hold) and held,
 * without waiting for the TTL or the view. */
static void test_gateway_a_released_held_hold_makes_the_pair_routable_at_once(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t one[1] = {1};
    view_set(fx, "LAST", one, 1);
    counters_have(fx, "LAST", one, 1);
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, "h1", "LAST", 1), 1);
    settle(fx); /* held; the counter says W1 has 0 left */
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    expect_refused_in_one_step(fx, "h2", "LAST", 1); /* the view still says 1 */

    from = fx->emits_count;
    hf_record_t x = release_rec("h1");
    gw_apply(fx, "h1", &x);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_RELEASED);
    assert_int_equal(count_of(fx, from, HF_T_COUNTER_COMMANDS, HF_REC_RELEASE_HOLD), 1);

    from = fx->emits_count; /* same ms: the hint, not its age, lets it through */
    assert_int_equal(reserve(fx, "h3", "LAST", 1), 1);
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, "W1");
    settle(fx); /* the counter saw the release before this Hold */
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    expect_refused_in_one_step(fx, "h4", "LAST", 1); /* and it is gone again */
}

/* One unit back draws one Hold, not one per shopper routed before the
 * counter answers: a sent Hold counts its units as gone in the hint. */
static void test_gateway_one_unit_back_draws_one_hold(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t one[1] = {1};
    view_set(fx, "LAST", one, 1);
    counters_have(fx, "LAST", one, 1);
    size_t from = fx->emits_count;
    assert_int_equal(reserve(fx, "t1", "LAST", 1), 1);
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    hf_record_t x = release_rec("t1");
    gw_apply(fx, "t1", &x); /* the hint says 1 again */

    from = fx->emits_count;
    assert_int_equal(reserve(fx, "t2", "LAST", 1), 1); /* its Hold takes the unit */
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, "W1");
    expect_refused_in_one_step(fx, "t3", "LAST", 1); /* before t2's answer */
    expect_refused_in_one_step(fx, "t4", "LAST", 1);
}

/* The module: a take lowers a hint, never below 0, and makes none. */
static void test_module_take_lowers_a_hint_and_creates_none(void **state)
{
    (void)state;
    gw_hint_t *h = gw_hint_new(HINT_TTL_MS);
    assert_non_null(h);
    hf_availability_t view = av_of("S", view3, NULL, 3);
    gw_hint_note(h, "W1", "S", 4, T0);
    gw_hint_take(h, "W1", "S", 3, T0 + 1);
    gw_hint_take(h, "W2", "S", 5, T0 + 1); /* no hint: nothing */
    hf_availability_t a = applied(h, &view, T0 + 1, 1);
    assert_int_equal(a.warehouses[0].available, 1);
    assert_int_equal(a.warehouses[1].available, 20);
    gw_hint_take(h, "W1", "S", 7, T0 + 1);
    a = applied(h, &view, T0 + 2, 1);
    assert_int_equal(a.warehouses[0].available, 0);
    gw_hint_destroy(h);
}

/* ======================================================================
 * Counter level: the escrow_balance a Hold's answer carries.
 * ====================================================================== */

#define CW   "W1"
#define CSKU "HOT-1"

static int64_t feed_seq;

static int setup_counter(void **state)
{
    feed_seq = 0;
    stage_ctx_t *fx = fake_stage_new("route_hint_counter", T0);
    hf_config_t cfg;
    config_defaults(&cfg);
    char errstr[256];
    if (counter_stage()->init(&cfg, &fx->env, errstr, sizeof errstr) != HF_OK)
        fail_msg("counter init: %s", errstr);
    *state = fx;
    return 0;
}

static int teardown_counter(void **state)
{
    stage_ctx_t *fx = *state;
    counter_stage()->destroy(fx->env);
    fake_stage_destroy(fx);
    return 0;
}

/* One record under the pair's key, a ms after the last, then batch_end and the
 * commit, as the task does. */
static void c_apply(stage_ctx_t *fx, const hf_record_t *rec)
{
    char key[COUNTER_KEY_MAX];
    pair_key(key, CW, CSKU);
    fx->now_ms++;
    assert_int_equal(fake_stage_apply(fx, counter_stage(), key, rec), HF_OK);
    assert_int_equal(counter_stage()->batch_end(fx), HF_OK);
    fake_stage_commit(fx);
}

static void c_receive(stage_ctx_t *fx, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_STOCK_FEED;
    snprintf(r.u.stock_feed.warehouse_id, sizeof r.u.stock_feed.warehouse_id, "%s", CW);
    snprintf(r.u.stock_feed.sku, sizeof r.u.stock_feed.sku, "%s", CSKU);
    r.u.stock_feed.kind = HF_FEED_RECEIVE;
    r.u.stock_feed.qty = qty;
    r.u.stock_feed.feed_seq = ++feed_seq;
    c_apply(fx, &r);
}

/* An AllotmentRequest of gateway partition 1: want units, its balance
 * reported as balance. */
static void c_allotment_request(stage_ctx_t *fx, int64_t seq, int64_t want, int64_t balance)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_ALLOTMENT_REQUEST;
    hf_allotment_request_t *q = &r.u.allotment_request;
    snprintf(q->warehouse_id, sizeof q->warehouse_id, "%s", CW);
    snprintf(q->sku, sizeof q->sku, "%s", CSKU);
    q->holder_partition = 1;
    snprintf(q->holder_key, sizeof q->holder_key, "holder-1");
    q->seq = seq;
    q->want_qty = want;
    q->balance = balance;
    q->sent_at_ms = 1;
    c_apply(fx, &r);
}

/* The only CounterResult of applying rec. */
static hf_counter_result_t c_result(stage_ctx_t *fx, const hf_record_t *rec)
{
    size_t from = fx->emits_count;
    c_apply(fx, rec);
    const hf_counter_result_t *found = NULL;
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].rec.type == HF_REC_COUNTER_RESULT) {
            assert_null(found);
            assert_int_equal(fx->emits[i].topic_id, HF_T_COUNTER_RESULTS);
            found = &fx->emits[i].rec.u.counter_result;
        }
    if (!found) {
        fail_msg("no CounterResult");
        return (hf_counter_result_t){0}; /* cmocka's fail_msg is not declared noreturn */
    }
    return *found;
}

static hf_counter_result_t c_hold(stage_ctx_t *fx, const char *rid, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_HOLD;
    snprintf(r.u.hold.reservation_id, sizeof r.u.hold.reservation_id, "%s", rid);
    snprintf(r.u.hold.warehouse_id, sizeof r.u.hold.warehouse_id, "%s", CW);
    snprintf(r.u.hold.sku, sizeof r.u.hold.sku, "%s", CSKU);
    r.u.hold.qty = qty;
    r.u.hold.issued_at_ms = 1;
    return c_result(fx, &r);
}

static hf_counter_result_t c_release(stage_ctx_t *fx, const char *rid)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RELEASE_HOLD;
    snprintf(r.u.release_hold.reservation_id, sizeof r.u.release_hold.reservation_id, "%s", rid);
    snprintf(r.u.release_hold.warehouse_id, sizeof r.u.release_hold.warehouse_id, "%s", CW);
    snprintf(r.u.release_hold.sku, sizeof r.u.release_hold.sku, "%s", CSKU);
    snprintf(r.u.release_hold.reason, sizeof r.u.release_hold.reason, "abandoned");
    return c_result(fx, &r);
}

static hf_counter_state_t c_state(stage_ctx_t *fx)
{
    char pk[COUNTER_KEY_MAX], key[COUNTER_KEY_MAX];
    pair_key(pk, CW, CSKU);
    fx->partition = fake_stage_partition_of(pk);
    size_t len = counter_key(key, CW, CSKU);
    hf_record_t rec;
    assert_int_equal(stage_get(fx, key, len, &rec), HF_OK);
    assert_int_equal(rec.type, HF_REC_COUNTER_STATE);
    return rec.u.counter_state;
}

/* Without escrow a fresh Hold's answer, held or refused, reports a balance of
 * 0 (so available is the pair's sellable stock); the same Hold retried is
 * answered from its record with the same outcome and -1 (not reported), and so
 * is every non-Hold answer. */
static void test_counter_fresh_hold_reports_balance_and_a_retry_does_not(void **state)
{
    stage_ctx_t *fx = *state;
    c_receive(fx, 10);
    hf_counter_result_t r = c_hold(fx, "r1", 3);
    assert_int_equal(r.command, HF_CMD_HOLD);
    assert_int_equal(r.outcome, HF_OUTCOME_OK);
    assert_int_equal(r.available, 7);
    assert_int_equal(r.escrow_balance, 0);
    assert_int_equal(c_state(fx).escrow_balance, 0);
    hf_counter_result_t again = c_hold(fx, "r1", 3);
    assert_int_equal(again.outcome, HF_OUTCOME_OK);
    assert_int_equal(again.available, 7);
    assert_int_equal(again.escrow_balance, -1);

    r = c_hold(fx, "r2", 8); /* more than the 7 left */
    assert_int_equal(r.outcome, HF_OUTCOME_INSUFFICIENT);
    assert_int_equal(r.available, 7);
    assert_int_equal(r.escrow_balance, 0);
    again = c_hold(fx, "r2", 8);
    assert_int_equal(again.outcome, HF_OUTCOME_INSUFFICIENT);
    assert_int_equal(again.escrow_balance, -1);

    r = c_release(fx, "r1");
    assert_int_equal(r.command, HF_CMD_RELEASE);
    assert_int_equal(r.escrow_balance, -1);
}

/* With an allotment whose holder reported a balance, a fresh Hold's answer
 * carries the counter state's escrow_balance beside the free units (held or
 * refused); a retry carries -1. */
static void test_counter_fresh_hold_reports_the_allotments_balance(void **state)
{
    stage_ctx_t *fx = *state;
    c_receive(fx, 100);
    c_allotment_request(fx, 1, 40, 0); /* granted 40 (under the 50% share) */
    c_allotment_request(fx, 2, 0, 30); /* the holder reports 30 unheld */
    hf_counter_state_t c = c_state(fx);
    assert_int_equal(c.allotted, 40);
    assert_int_equal(c.escrow_balance, 30);

    hf_counter_result_t r = c_hold(fx, "e1", 5);
    assert_int_equal(r.outcome, HF_OUTCOME_OK);
    assert_int_equal(r.available, 55); /* 100 - 40 allotted - 5 */
    assert_int_equal(r.escrow_balance, c_state(fx).escrow_balance);
    assert_int_equal(r.escrow_balance, 30);

    r = c_hold(fx, "e2", 1000);
    assert_int_equal(r.outcome, HF_OUTCOME_INSUFFICIENT);
    assert_int_equal(r.available, 55);
    assert_int_equal(r.escrow_balance, 30);
    assert_int_equal(c_hold(fx, "e1", 5).escrow_balance, -1);
    assert_int_equal(c_hold(fx, "e2", 1000).escrow_balance, -1);
}

int main(void)
{
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    log_set_level(HF_LOG_ERROR);
#define G(fn) cmocka_unit_test_setup_teardown(fn, setup_gateway, teardown_gateway)
#define C(fn) cmocka_unit_test_setup_teardown(fn, setup_counter, teardown_counter)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_note_rewrites_that_warehouse_and_the_total_only),
        cmocka_unit_test(test_module_stale_hint_lets_one_caller_probe_per_ttl),
        cmocka_unit_test(test_module_a_new_note_ends_the_probe),
        cmocka_unit_test(test_module_add_raises_a_hint_and_creates_none),
        cmocka_unit_test(test_module_escrow_is_clamped_to_the_rewritten_available),
        cmocka_unit_test(test_module_table_is_bounded_and_keeps_the_newest_pairs),
        G(test_gateway_sku_called_empty_everywhere_is_refused_in_one_step),
        G(test_gateway_answers_without_escrow_balance_leave_routing_on_the_view),
        G(test_gateway_a_pair_called_empty_is_not_asked_again),
        G(test_gateway_without_escrow_balance_the_empty_pair_is_asked_again),
        G(test_gateway_after_the_ttl_one_reserve_probes_the_others_are_refused),
        G(test_gateway_a_restocked_pair_sells_again_after_the_probe),
        G(test_gateway_a_released_held_hold_makes_the_pair_routable_at_once),
        G(test_gateway_one_unit_back_draws_one_hold),
        G(test_gateway_an_answer_read_a_ttl_late_is_not_routed_on),
        G(test_gateway_an_answer_read_at_once_is_routed_on),
        cmocka_unit_test(test_module_take_lowers_a_hint_and_creates_none),
        C(test_counter_fresh_hold_reports_balance_and_a_retry_does_not),
        C(test_counter_fresh_hold_reports_the_allotments_balance),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    codec_shutdown();
    return failed;
}
