/* Unit tests of the gateway stage's handlers (processor/gateway/), driven the
 * way the task loop drives them: per record set the Kafka key (the
 * reservation_id), call the handler from gateway_stage()->handlers, write the
 * buffer (one transaction per record), and call the tick per partition. Like
 * test_counter_handlers.c it runs on the shared fake stage of fake/fake_stage.h
 * (a real state store and the real codec); the routing view and settings are
 * a gateway_env_t the test fills and hands to the fake stage (fx->env, what
 * gateway_env answers), and a small model of the counters answers
 * the Holds the gateway emits, so a test decides which answers arrive, in which
 * order, or not at all. (nm: task.o is not linked.) */
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
#include "hf_limits.h"
#include "log.h"
#include "stage.h"
#include "state.h"
#include "topics.h"

#define T0                1700000000000LL
#define TTL_DEFAULT_MS    (15 * 60 * 1000LL)
#define RESULT_TIMEOUT_MS 5000
#define RETENTION_MS      (24 * 3600 * 1000LL)
#define RES_RETENTION_MS  (7 * RETENTION_MS)
#define PENDING_EXTEND_MS (10 * 60 * 1000LL)
#define PENDING_MAX_MS    (30 * 60 * 1000LL)

/* ======================================================================
 * The counters' model: answers Holds, applies commits and releases.
 * ====================================================================== */

enum { MH_HELD, MH_REFUSED, MH_COMMITTED, MH_RELEASED, MH_REVOKING };

typedef struct {
    hf_wh_t w;
    hf_sku_t sku;
    int64_t available, reserved, committed;
} m_pair_t;

typedef struct {
    hf_id_t rid;
    int32_t attempt;
    hf_wh_t w;
    hf_sku_t sku;
    int64_t qty;
    int status;
    hf_outcome_t outcome;
    int64_t available_at;
} m_hold_t;

#define M_PAIRS_MAX   256
#define M_HOLDS_MAX   512
#define M_RESULTS_MAX 512

/* ======================================================================
 * What this file keeps beside the fake stage (fx->user): the gateway's
 * environment and the counters' model.
 * ====================================================================== */

struct fake_stage_user {
    /* environment */
    gateway_env_t env;
    gw_sweep_t sweep;
    hf_availability_t view[40];
    size_t view_count;
    int64_t view_staleness_ms;
    /* counters */
    m_pair_t pairs[M_PAIRS_MAX];
    size_t pairs_count;
    m_hold_t holds[M_HOLDS_MAX];
    size_t holds_count;
    size_t cmd_cursor;                          /* emits below it were seen by the counters */
    hf_counter_result_t results[M_RESULTS_MAX]; /* answers not yet delivered */
    size_t results_count;
};

/* ======================================================================
 * Environment: six warehouses, a view the test fills, a controllable clock.
 * ====================================================================== */

#define wh_table fake_warehouses /* fake/fake_stage.h */
#define WH_COUNT FAKE_WAREHOUSES_COUNT

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
    return ((stage_ctx_t *)opaque)->user->view_staleness_ms;
}

/* The view says sku has avail[i] at W(i+1) (n entries). */
static void view_set(stage_ctx_t *fx, const char *sku, const int64_t *avail, size_t n)
{
    hf_availability_t *a = NULL;
    for (size_t i = 0; i < fx->user->view_count; i++)
        if (strcmp(fx->user->view[i].sku, sku) == 0)
            a = &fx->user->view[i];
    if (!a) {
        assert_true(fx->user->view_count < sizeof fx->user->view / sizeof fx->user->view[0]);
        a = &fx->user->view[fx->user->view_count++];
    }
    memset(a, 0, sizeof *a);
    snprintf(a->sku, sizeof a->sku, "%s", sku);
    for (size_t i = 0; i < n; i++) {
        hf_wh_available_t *w = &a->warehouses[a->warehouses_count++];
        snprintf(w->warehouse_id, sizeof w->warehouse_id, "%s", wh_table[i].id);
        w->available = avail[i];
        a->total += avail[i];
    }
    a->in_stock = a->total > 0;
}

/* ======================================================================
 * Fixture and driving helpers.
 * ====================================================================== */

static int setup(void **state)
{
    stage_ctx_t *fx = fake_stage_new("gateway", T0);
    fx->user = calloc(1, sizeof *fx->user);
    assert_non_null(fx->user);
    gateway_env_t *e = &fx->user->env;
    fake_stage_routes(&e->routes);
    e->ttl_default_ms = TTL_DEFAULT_MS;
    snprintf(e->reply_topic_prefix, sizeof e->reply_topic_prefix, "holdfast.replies.");
    char errstr[128];
    assert_int_equal(gateway_parse_campaigns("flash=120000", e, errstr, sizeof errstr), HF_OK);
    e->hold_max_factor_pct = 200;
    e->idempotency_retention_ms = RETENTION_MS;
    e->reservation_retention_ms = RES_RETENTION_MS;
    e->late_policy = GW_LATE_REFUND;
    assert_int_equal(gateway_parse_payment_policy("", e, errstr, sizeof errstr), HF_OK);
    e->payment_pending_extend_ms = PENDING_EXTEND_MS;
    e->payment_pending_max_ms = PENDING_MAX_MS;
    e->result_timeout_ms = RESULT_TIMEOUT_MS;
    e->view_stale_max_ms = 10000;
    e->availability = fake_availability;
    e->staleness_ms = fake_staleness;
    e->opaque = fx;
    fx->user->sweep.run_id = 1; /* one process run; a test of a restart gives another */
    e->sweep = &fx->user->sweep;
    fx->env = e;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    stage_ctx_t *fx = *state;
    free(fx->user);
    fake_stage_destroy(fx);
    return 0;
}

/* Applies rec under Kafka key `key` in a transaction of its own; a rejection
 * must leave no write and no output behind (fake_stage_apply checks). */
static int fx_apply_key(stage_ctx_t *fx, const char *key, const hf_record_t *rec)
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

static const char *rec_rid(const hf_record_t *rec)
{
    switch (rec->type) {
    case HF_REC_RESERVE:
        return rec->u.reserve.reservation_id;
    case HF_REC_COMMIT:
        return rec->u.commit.reservation_id;
    case HF_REC_RELEASE:
        return rec->u.release.reservation_id;
    case HF_REC_EXTEND:
        return rec->u.extend.reservation_id;
    case HF_REC_PAYMENT_EVENT:
        return rec->u.payment_event.reservation_id;
    case HF_REC_COUNTER_RESULT:
        return rec->u.counter_result.reservation_id;
    default:
        fail_msg("not a gateway input: %d", (int)rec->type);
    }
    return NULL;
}

static int fx_apply(stage_ctx_t *fx, const hf_record_t *rec)
{
    return fx_apply_key(fx, rec_rid(rec), rec);
}

/* The sweeper at fx->now_ms, every partition, one transaction. */
static void fx_tick(stage_ctx_t *fx)
{
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        fx->partition = p;
        assert_int_equal(gateway_stage()->tick(fx), HF_OK);
    }
    fake_stage_commit(fx);
}

/* ---- record builders */

static hf_record_t reserve_lines(const char *rid, const char *ikey, const char *const *skus,
                                 const int64_t *qtys, int n, int64_t ttl_ms)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "%s", ikey);
    q->lines_count = n;
    for (int i = 0; i < n && i < HF_LINES_MAX; i++) {
        snprintf(q->lines[i].sku, sizeof q->lines[i].sku, "%s", skus[i]);
        q->lines[i].qty = qtys[i];
    }
    q->ship_to = (hf_geo_t){40.73, -73.99}; /* Manhattan: W1 is nearest, then W5/W2 */
    q->ttl_ms = ttl_ms;
    q->sent_at_ms = T0;
    return r;
}

static hf_record_t reserve_rec(const char *rid, const char *ikey, const char *sku, int64_t qty,
                               int64_t ttl_ms)
{
    return reserve_lines(rid, ikey, &sku, &qty, 1, ttl_ms);
}

static hf_record_t commit_rec(const char *rid, const char *ikey, const char *payment)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_COMMIT;
    snprintf(r.u.commit.reservation_id, sizeof r.u.commit.reservation_id, "%s", rid);
    snprintf(r.u.commit.idempotency_key, sizeof r.u.commit.idempotency_key, "%s", ikey);
    snprintf(r.u.commit.payment_id, sizeof r.u.commit.payment_id, "%s", payment);
    return r;
}

static hf_record_t release_rec(const char *rid, const char *ikey)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RELEASE;
    snprintf(r.u.release.reservation_id, sizeof r.u.release.reservation_id, "%s", rid);
    snprintf(r.u.release.idempotency_key, sizeof r.u.release.idempotency_key, "%s", ikey);
    return r;
}

static hf_record_t extend_rec(const char *rid, const char *ikey, int64_t by_ms)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_EXTEND;
    snprintf(r.u.extend.reservation_id, sizeof r.u.extend.reservation_id, "%s", rid);
    snprintf(r.u.extend.idempotency_key, sizeof r.u.extend.idempotency_key, "%s", ikey);
    r.u.extend.extend_by_ms = by_ms;
    return r;
}

static hf_record_t payment_rec(const char *rid, const char *event_id, hf_payment_event_kind_t kind,
                               const char *reason)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_PAYMENT_EVENT;
    hf_payment_event_t *p = &r.u.payment_event;
    snprintf(p->reservation_id, sizeof p->reservation_id, "%s", rid);
    snprintf(p->idempotency_key, sizeof p->idempotency_key, "%s", event_id);
    p->event = kind;
    snprintf(p->payment_id, sizeof p->payment_id, "pay-%s", rid);
    snprintf(p->reason, sizeof p->reason, "%s", reason);
    return r;
}

/* ---- outputs */

static size_t count_of(const stage_ctx_t *fx, size_t from, int topic_id, hf_rec_type_t type)
{
    size_t n = 0;
    for (size_t i = from; i < fx->emits_count; i++)
        n += fx->emits[i].topic_id == topic_id && fx->emits[i].rec.type == type;
    return n;
}

static size_t replies_since(const stage_ctx_t *fx, size_t from)
{
    return count_of(fx, from, -1, HF_REC_REPLY);
}

/* The only reply emitted since `from` (fails unless exactly one). */
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
        return (hf_reply_t){0}; /* cmocka's fail_msg is not declared noreturn */
    }
    return *r;
}

static size_t ledger_count(const stage_ctx_t *fx, size_t from, const char *rid,
                           hf_ledger_kind_t kind)
{
    size_t n = 0;
    for (size_t i = from; i < fx->emits_count; i++) {
        const fake_stage_emit_t *e = &fx->emits[i];
        if (e->topic_id == HF_T_LEDGER && e->rec.u.ledger_event.kind == kind &&
            strcmp(e->rec.u.ledger_event.reservation_id, rid) == 0)
            n++;
    }
    return n;
}

static hf_ledger_event_t last_ledger(const stage_ctx_t *fx, const char *rid, hf_ledger_kind_t kind)
{
    for (size_t i = fx->emits_count; i-- > 0;) {
        const fake_stage_emit_t *e = &fx->emits[i];
        if (e->topic_id == HF_T_LEDGER && e->rec.u.ledger_event.kind == kind &&
            strcmp(e->rec.u.ledger_event.reservation_id, rid) == 0)
            return e->rec.u.ledger_event;
    }
    fail_msg("no %s ledger event for %s", hf_ledger_kind_name(kind), rid);
    hf_ledger_event_t none = {0};
    return none;
}

/* Every ledger event of rid since `from`, all kinds. */
static size_t ledger_total(const stage_ctx_t *fx, size_t from, const char *rid)
{
    size_t n = 0;
    for (int k = 0; k < HF_LEDGER__COUNT; k++)
        n += ledger_count(fx, from, rid, (hf_ledger_kind_t)k);
    return n;
}

static size_t commands_since(const stage_ctx_t *fx, size_t from, hf_rec_type_t type)
{
    return count_of(fx, from, HF_T_COUNTER_COMMANDS, type);
}

/* The n-th Hold emitted since from. */
static hf_hold_t nth_hold(const stage_ctx_t *fx, size_t from, size_t n)
{
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].topic_id == HF_T_COUNTER_COMMANDS &&
            fx->emits[i].rec.type == HF_REC_HOLD && n-- == 0)
            return fx->emits[i].rec.u.hold;
    fail_msg("fewer Holds than asked since %zu", from);
    hf_hold_t none = {0};
    return none;
}

/* ---- the counters' model */

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

/* The counters have avail[i] of sku at W(i+1); the view says the same. */
static void stock(stage_ctx_t *fx, const char *sku, const int64_t *avail, size_t n)
{
    for (size_t i = 0; i < n; i++)
        m_pair(fx, wh_table[i].id, sku)->available = avail[i];
    view_set(fx, sku, avail, n);
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

static void m_result(stage_ctx_t *fx, const char *rid, int32_t attempt, const char *w,
                     const char *sku, hf_cmd_t cmd, hf_outcome_t outcome, int64_t qty,
                     int64_t available)
{
    assert_true(fx->user->results_count < M_RESULTS_MAX);
    hf_counter_result_t *r = &fx->user->results[fx->user->results_count++];
    memset(r, 0, sizeof *r);
    snprintf(r->reservation_id, sizeof r->reservation_id, "%s", rid);
    r->attempt = attempt;
    snprintf(r->warehouse_id, sizeof r->warehouse_id, "%s", w);
    snprintf(r->sku, sizeof r->sku, "%s", sku);
    r->command = cmd;
    r->outcome = outcome;
    r->qty = qty;
    r->available = available;
    r->applied_at_ms = fx->now_ms;
}

static void m_on_hold(stage_ctx_t *fx, const hf_hold_t *c)
{
    m_hold_t *h = m_hold(fx, c->reservation_id, c->attempt, c->warehouse_id, c->sku);
    if (!h) { /* a repeat re-answers the original; a new hold is decided now */
        assert_true(fx->user->holds_count < M_HOLDS_MAX);
        h = &fx->user->holds[fx->user->holds_count++];
        memset(h, 0, sizeof *h);
        snprintf(h->rid, sizeof h->rid, "%s", c->reservation_id);
        h->attempt = c->attempt;
        snprintf(h->w, sizeof h->w, "%s", c->warehouse_id);
        snprintf(h->sku, sizeof h->sku, "%s", c->sku);
        h->qty = c->qty;
        m_pair_t *p = m_pair(fx, c->warehouse_id, c->sku);
        if (c->qty <= p->available) {
            p->available -= c->qty;
            p->reserved += c->qty;
            h->status = MH_HELD;
            h->outcome = HF_OUTCOME_OK;
        } else {
            h->status = MH_REFUSED;
            h->outcome = HF_OUTCOME_INSUFFICIENT;
        }
        h->available_at = p->available;
    }
    m_result(fx, h->rid, h->attempt, h->w, h->sku, HF_CMD_HOLD, h->outcome, h->qty,
             h->available_at);
}

static void m_on_commit(stage_ctx_t *fx, const hf_commit_hold_t *c)
{
    m_hold_t *h = m_hold(fx, c->reservation_id, c->attempt, c->warehouse_id, c->sku);
    hf_outcome_t o = HF_OUTCOME_NOT_FOUND;
    if (h && h->status == MH_HELD) {
        m_pair_t *p = m_pair(fx, h->w, h->sku);
        p->reserved -= h->qty;
        p->committed += h->qty;
        h->status = MH_COMMITTED;
        o = HF_OUTCOME_OK;
    } else if (h && h->status == MH_COMMITTED) {
        o = HF_OUTCOME_OK;
    } else if (h && h->status == MH_REVOKING) {
        o = HF_OUTCOME_REVOKED;
    } else if (h) {
        o = HF_OUTCOME_CONFLICT;
    }
    m_result(fx, c->reservation_id, c->attempt, c->warehouse_id, c->sku, HF_CMD_COMMIT, o,
             h ? h->qty : 0, 0);
}

static void m_on_release(stage_ctx_t *fx, const hf_release_hold_t *c)
{
    m_hold_t *h = m_hold(fx, c->reservation_id, c->attempt, c->warehouse_id, c->sku);
    hf_outcome_t o = HF_OUTCOME_NOT_FOUND;
    if (h && (h->status == MH_HELD || h->status == MH_REVOKING)) {
        m_pair_t *p = m_pair(fx, h->w, h->sku);
        p->reserved -= h->qty;
        if (h->status == MH_HELD) /* revoked units are gone from on_hand */
            p->available += h->qty;
        h->status = MH_RELEASED;
        o = HF_OUTCOME_OK;
    } else if (h) {
        o = h->status == MH_COMMITTED ? HF_OUTCOME_CONFLICT : HF_OUTCOME_OK;
    }
    m_result(fx, c->reservation_id, c->attempt, c->warehouse_id, c->sku, HF_CMD_RELEASE, o,
             h ? h->qty : 0, 0);
}

/* The counters apply every command emitted since they last looked; their
 * answers wait in fx->user->results until delivered. Each emitted command must be
 * keyed by its pair. */
static void counters_apply(stage_ctx_t *fx)
{
    for (; fx->user->cmd_cursor < fx->emits_count; fx->user->cmd_cursor++) {
        const fake_stage_emit_t *e = &fx->emits[fx->user->cmd_cursor];
        if (e->topic_id != HF_T_COUNTER_COMMANDS)
            continue;
        const hf_record_t *r = &e->rec;
        char key[HF_STATE_KEY_LEN_MAX];
        int n = 0;
        switch (r->type) {
        case HF_REC_HOLD:
            n = snprintf(key, sizeof key, "%s|%s", r->u.hold.warehouse_id, r->u.hold.sku);
            m_on_hold(fx, &r->u.hold);
            break;
        case HF_REC_COMMIT_HOLD:
            n = snprintf(key, sizeof key, "%s|%s", r->u.commit_hold.warehouse_id,
                         r->u.commit_hold.sku);
            m_on_commit(fx, &r->u.commit_hold);
            break;
        case HF_REC_RELEASE_HOLD:
            n = snprintf(key, sizeof key, "%s|%s", r->u.release_hold.warehouse_id,
                         r->u.release_hold.sku);
            m_on_release(fx, &r->u.release_hold);
            break;
        default:
            fail_msg("unexpected %s on the commands topic", hf_rec_type_name(r->type));
        }
        assert_int_equal(e->key_len, (size_t)n);
        assert_memory_equal(e->key, key, (size_t)n);
    }
}

/* Delivers the queued answers to the gateway (each its own transaction). */
static void deliver_results(stage_ctx_t *fx)
{
    size_t n = fx->user->results_count;
    hf_counter_result_t *batch = malloc(n * sizeof *batch + 1);
    assert_non_null(batch);
    memcpy(batch, fx->user->results, n * sizeof *batch);
    fx->user->results_count = 0;
    for (size_t i = 0; i < n; i++) {
        hf_record_t rec = {.type = HF_REC_COUNTER_RESULT, .u.counter_result = batch[i]};
        assert_int_equal(fx_apply(fx, &rec), HF_OK);
    }
    free(batch);
}

/* Counters and gateway talk until nothing more is said. */
static void settle(stage_ctx_t *fx)
{
    for (int round = 0; round < 100; round++) {
        counters_apply(fx);
        if (fx->user->results_count == 0)
            return;
        deliver_results(fx);
    }
    fail_msg("the saga did not settle in 100 rounds");
}

/* Drops the queued answers (lost on their way). */
static void drop_results(stage_ctx_t *fx)
{
    fx->user->results_count = 0;
}

/* Sum of reserved units of sku over every warehouse. */
static int64_t reserved_total(stage_ctx_t *fx, const char *sku)
{
    int64_t sum = 0;
    for (size_t i = 0; i < fx->user->pairs_count; i++)
        if (strcmp(fx->user->pairs[i].sku, sku) == 0)
            sum += fx->user->pairs[i].reserved;
    return sum;
}

/* The stock feed revokes rid's hold at w|sku: the counter marks it REVOKING and
 * queues a SHORTFALL result. */
static void revoke_hold(stage_ctx_t *fx, const char *rid, const char *w, const char *sku)
{
    m_hold_t *h = NULL;
    for (size_t i = 0; i < fx->user->holds_count; i++)
        if (strcmp(fx->user->holds[i].rid, rid) == 0 && strcmp(fx->user->holds[i].w, w) == 0 &&
            strcmp(fx->user->holds[i].sku, sku) == 0 && fx->user->holds[i].status == MH_HELD)
            h = &fx->user->holds[i];
    if (!h) {
        fail_msg("no held hold %s at %s|%s to revoke", rid, w, sku);
        return; /* cmocka's fail_msg is not declared noreturn */
    }
    h->status = MH_REVOKING;
    m_result(fx, rid, h->attempt, w, sku, HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, h->qty, 0);
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

static bool idem_exists(stage_ctx_t *fx, const char *rid, const char *ikey)
{
    fx->partition = fake_stage_partition_of(rid);
    char key[GW_KEY_MAX];
    size_t len = gw_idem_key(key, rid, ikey);
    hf_record_t rec;
    return stage_get(fx, key, len, &rec) == HF_OK;
}

/* Whether anything remembers (rid, ikey): a reservation made by that key (a
 * Reserve's answer lives in it) or an idempotency record. */
static bool reserve_remembered(stage_ctx_t *fx, const char *rid, const char *ikey)
{
    fx->partition = fake_stage_partition_of(rid);
    hf_reservation_state_t rs;
    bool in_rs = gw_load(fx, rid, &rs) == HF_OK && strcmp(rs.idempotency_key, ikey) == 0;
    return in_rs || idem_exists(fx, rid, ikey);
}

/* The changelog keys of the transactions committed since changelog index
 * `from`, each must be "R<rid>"; returns how many there were. */
static size_t changelog_only_r(const stage_ctx_t *fx, size_t from, const char *rid)
{
    char want[GW_KEY_MAX];
    size_t want_len = gw_res_key(want, rid);
    for (size_t i = from; i < fx->changelog_count; i++) {
        const fake_stage_changelog_t *c = &fx->changelog[i];
        if (c->key_len != want_len || memcmp(c->key, want, want_len) != 0)
            fail_msg("changelog key %.*s written beside %s", (int)c->key_len, c->key, want);
    }
    return fx->changelog_count - from;
}

/* Reserves qty of sku and runs the saga to its end; returns the reply. */
static hf_reply_t reserve_held(stage_ctx_t *fx, const char *rid, const char *sku, int64_t qty,
                               int64_t ttl_ms)
{
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec(rid, "k", sku, qty, ttl_ms);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    return rep;
}

static hf_reply_t call(stage_ctx_t *fx, const hf_record_t *rec)
{
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, rec), HF_OK);
    return one_reply(fx, from);
}

static const int64_t plenty[6] = {100, 100, 100, 100, 100, 100};

/* ======================================================================
 * Validation
 * ====================================================================== */

static void expect_invalid(stage_ctx_t *fx, const hf_record_t *rec, const char *needle)
{
    size_t from = fx->emits_count;
    hf_reply_t rep = call(fx, rec);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INVALID);
    if (!strstr(rep.message, needle))
        fail_msg("message \"%s\" does not say \"%s\"", rep.message, needle);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
    assert_int_equal(ledger_total(fx, from, rep.reservation_id), 0);
}

static void
test_reserve_with_qty_zero_or_above_max_is_rejected_invalid_naming_line_and_bounds(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_record_t z = reserve_rec("v1", "k", "SKU-A", 0, 0);
    expect_invalid(fx, &z, "line 0 (SKU-A): qty 0 must be in [1, 1000000]");
    hf_record_t neg = reserve_rec("v1", "k", "SKU-A", -3, 0);
    expect_invalid(fx, &neg, "qty -3");
    hf_record_t big = reserve_rec("v1", "k", "SKU-A", HF_QTY_MAX + 1, 0);
    expect_invalid(fx, &big, "qty 1000001 must be in [1, 1000000]");
    /* The rejected id stays free: nothing was recorded. */
    hf_reply_t ok = reserve_held(fx, "v1", "SKU-A", 1, 0);
    assert_string_equal(ok.reservation_id, "v1");
}

static void
test_reserve_with_no_lines_too_many_lines_or_a_repeated_sku_is_rejected_invalid(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_record_t none = reserve_rec("v2", "k", "SKU-A", 1, 0);
    none.u.reserve.lines_count = 0;
    expect_invalid(fx, &none, "a reserve needs 1..32 lines, got 0");
    hf_record_t many = reserve_rec("v2", "k", "SKU-A", 1, 0);
    many.u.reserve.lines_count = HF_LINES_MAX + 1;
    expect_invalid(fx, &many, "a reserve needs 1..32 lines, got 33");
    const char *skus[] = {"SKU-A", "SKU-A"};
    const int64_t qtys[] = {1, 2};
    hf_record_t dup = reserve_lines("v2", "k", skus, qtys, 2, 0);
    expect_invalid(fx, &dup, "sku SKU-A appears in two lines");
    hf_record_t bad = reserve_rec("v2", "k", "SKU|A", 1, 0);
    expect_invalid(fx, &bad, "line 0: sku must be non-empty, printable, without '|'");
}

static void test_reserve_of_an_unknown_sku_is_rejected_invalid_and_records_nothing(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    const char *skus[] = {"SKU-A", "SKU-NOPE"};
    const int64_t qtys[] = {1, 1};
    hf_record_t r = reserve_lines("v3", "k", skus, qtys, 2, 0);
    expect_invalid(fx, &r, "unknown sku SKU-NOPE");
    hf_reservation_state_t rs;
    fx->partition = fake_stage_partition_of("v3");
    assert_int_equal(gw_load(fx, "v3", &rs), HF_ERR_NOTFOUND);
    assert_false(reserve_remembered(fx, "v3", "k"));
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

static void
test_reserve_ttl_outside_bounds_is_rejected_and_the_bounds_themselves_are_accepted(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    const int64_t bad[] = {HF_TTL_MIN_MS - 1, -1, HF_TTL_MAX_MS + 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hf_record_t r = reserve_rec("v4", "k", "SKU-A", 1, bad[i]);
        expect_invalid(fx, &r, "must be 0 (default) or in [1000, 86400000]");
    }
    fx->now_ms = T0;
    hf_reply_t lo = reserve_held(fx, "v4", "SKU-A", 1, HF_TTL_MIN_MS);
    assert_int_equal(lo.expires_at_ms, T0 + HF_TTL_MIN_MS);
    hf_reply_t hi = reserve_held(fx, "v5", "SKU-A", 1, HF_TTL_MAX_MS);
    assert_int_equal(hi.expires_at_ms, T0 + HF_TTL_MAX_MS);
}

static void test_empty_ids_are_rejected_with_a_reply_or_a_dead_letter_reason(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    /* No usable reservation_id: nothing to key a reply by, so the task
     * dead-letters the record with the reason. */
    hf_record_t nokey = reserve_rec("", "k", "SKU-A", 1, 0);
    assert_int_equal(fx_apply_key(fx, "x", &nokey), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "reservation_id must be non-empty"));
    hf_record_t piped = reserve_rec("a|b", "k", "SKU-A", 1, 0);
    assert_int_equal(fx_apply(fx, &piped), HF_ERR_INVAL);
    hf_record_t miskeyed = reserve_rec("v6", "k", "SKU-A", 1, 0);
    assert_int_equal(fx_apply_key(fx, "v7", &miskeyed), HF_ERR_INVAL);
    assert_non_null(strstr(fx->reject_reason, "record key must be the reservation_id \"v6\""));

    hf_record_t noikey = reserve_rec("v6", "", "SKU-A", 1, 0);
    expect_invalid(fx, &noikey, "idempotency_key must be non-empty");
    reserve_held(fx, "v6", "SKU-A", 1, 0);
    hf_record_t nopay = commit_rec("v6", "c", "");
    expect_invalid(fx, &nopay, "payment_id must be non-empty");
    hf_record_t c_noikey = commit_rec("v6", "", "pay");
    expect_invalid(fx, &c_noikey, "idempotency_key must be non-empty");
    hf_record_t x_noikey = release_rec("v6", "");
    expect_invalid(fx, &x_noikey, "idempotency_key must be non-empty");
    hf_record_t e_noikey = extend_rec("v6", "", 1000);
    expect_invalid(fx, &e_noikey, "idempotency_key must be non-empty");
    hf_record_t e_zero = extend_rec("v6", "e", 0);
    expect_invalid(fx, &e_zero, "extend_by_ms must be positive");
    assert_int_equal(load_rs(fx, "v6").status, HF_RES_HELD);
}

static bool only_my_replies_exist(void *opaque, const char *topic)
{
    (void)opaque;
    return strcmp(topic, "holdfast.replies.mine") == 0;
}

static void test_a_reply_to_topic_that_does_not_exist_is_rejected_on_the_default_one(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->user->env.topic_exists = only_my_replies_exist;
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("rt1", "k", "SKU-A", 1, 0);
    snprintf(r.u.reserve.reply_to, sizeof r.u.reserve.reply_to, "holdfast.replies.none");
    hf_reply_t rep = call(fx, &r);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INVALID);
    assert_non_null(strstr(rep.message, "reply_to topic \"holdfast.replies.none\" does not exist"));
    assert_string_equal(fx->emits[fx->emits_count - 1].topic, topic_name(HF_T_REPLIES));
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
    assert_int_equal(ledger_total(fx, from, "rt1"), 0);
    assert_false(reserve_remembered(fx, "rt1", "k")); /* not remembered: fix the topic and retry */

    snprintf(r.u.reserve.reply_to, sizeof r.u.reserve.reply_to, "bad topic!");
    rep = call(fx, &r);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INVALID);
    assert_non_null(strstr(rep.message, "not a legal Kafka topic name"));

    /* The same request to a topic that exists is served there. */
    snprintf(r.u.reserve.reply_to, sizeof r.u.reserve.reply_to, "holdfast.replies.mine");
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    assert_int_equal(load_rs(fx, "rt1").status, HF_RES_HELD);
    size_t last = fx->emits_count;
    while (last-- > 0 && fx->emits[last].rec.type != HF_REC_REPLY)
        ;
    assert_string_equal(fx->emits[last].topic, "holdfast.replies.mine");

    /* A commit naming a missing topic changes nothing; the reservation stays HELD. */
    hf_record_t c = commit_rec("rt1", "c", "pay");
    snprintf(c.u.commit.reply_to, sizeof c.u.commit.reply_to, "holdfast.replies.gone");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_REJECTED_INVALID);
    assert_int_equal(load_rs(fx, "rt1").status, HF_RES_HELD);
    fx->user->env.topic_exists = NULL;
}

/* A reply must never land in the ledger, a changelog or the signals (a reply
 * in the gateway changelog would come back as state on restore), nor in any
 * topic outside the reply prefix. */
static void
test_reply_to_an_internal_or_unlisted_topic_is_refused_before_anything_happens(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    const char *refused[] = {"holdfast.ledger",     "holdfast.gateway-changelog",
                             "holdfast.signals",    "holdfast.counter-commands",
                             "other-service-topic", "holdfast.replies."};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        size_t from = fx->emits_count;
        hf_record_t r = reserve_rec("rl1", "k", "SKU-A", 1, 0);
        snprintf(r.u.reserve.reply_to, sizeof r.u.reserve.reply_to, "%s", refused[i]);
        hf_reply_t rep = call(fx, &r);
        assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INVALID);
        assert_non_null(strstr(rep.message, refused[i]));
        assert_non_null(strstr(rep.message, "holdfast.replies."));
        assert_string_equal(fx->emits[fx->emits_count - 1].topic, topic_name(HF_T_REPLIES));
        assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
        assert_false(reserve_remembered(fx, "rl1", "k"));
    }
    /* With no reply prefix configured, only the replies topic is allowed. */
    char saved[sizeof fx->user->env.reply_topic_prefix];
    memcpy(saved, fx->user->env.reply_topic_prefix, sizeof saved);
    fx->user->env.reply_topic_prefix[0] = '\0';
    hf_record_t r = reserve_rec("rl2", "k", "SKU-A", 1, 0);
    snprintf(r.u.reserve.reply_to, sizeof r.u.reserve.reply_to, "holdfast.replies.mine");
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_REJECTED_INVALID);
    snprintf(r.u.reserve.reply_to, sizeof r.u.reserve.reply_to, "holdfast.replies");
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    memcpy(fx->user->env.reply_topic_prefix, saved, sizeof saved);
}

static void test_reserve_needing_more_than_allocations_max_holds_is_rejected_invalid(void **state)
{
    stage_ctx_t *fx = *state;
    /* 32 lines, each only coverable by three warehouses: 96 holds > 64. */
    const char *skus[HF_LINES_MAX];
    int64_t qtys[HF_LINES_MAX];
    static char names[HF_LINES_MAX][16];
    const int64_t thirds[6] = {4, 4, 4, 0, 0, 0};
    for (int i = 0; i < HF_LINES_MAX; i++) {
        snprintf(names[i], sizeof names[i], "SKU-%02d", i);
        skus[i] = names[i];
        qtys[i] = 12;
        stock(fx, names[i], thirds, 6);
    }
    hf_record_t r = reserve_lines("v8", "k", skus, qtys, HF_LINES_MAX, 0);
    expect_invalid(fx, &r, "the reservation needs more than 64 holds");
    assert_int_equal(reserved_total(fx, "SKU-00"), 0);
}

/* ======================================================================
 * Idempotency
 * ====================================================================== */

static void
test_retried_reserve_with_the_same_body_gets_the_stored_reply_and_no_second_hold(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_reply_t first = reserve_held(fx, "i1", "SKU-A", 2, 0);
    fx->now_ms += 3000;
    size_t from = fx->emits_count;
    hf_record_t again = reserve_rec("i1", "k", "SKU-A", 2, 0);
    again.u.reserve.sent_at_ms = T0 + 3000; /* not part of the body */
    snprintf(again.u.reserve.reply_to, sizeof again.u.reserve.reply_to, "holdfast.replies.mine");
    hf_reply_t second = call(fx, &again);
    assert_memory_equal(&first, &second, sizeof first);
    assert_string_equal(fx->emits[fx->emits_count - 1].topic, "holdfast.replies.mine");
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
    assert_int_equal(ledger_total(fx, from, "i1"), 0);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 2);
}

static void test_retried_reserve_while_pending_emits_nothing_and_the_answer_comes_once(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_record_t r = reserve_rec("i2", "k", "SKU-A", 1, 0);
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    assert_int_equal(replies_since(fx, from), 0);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 1);
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
}

static void
test_same_idempotency_key_with_another_body_is_conflict_and_changes_nothing(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "i3", "SKU-A", 2, 0);
    hf_reservation_state_t before = load_rs(fx, "i3");
    size_t from = fx->emits_count;
    hf_record_t other = reserve_rec("i3", "k", "SKU-A", 3, 0);
    hf_reply_t rep = call(fx, &other);
    assert_int_equal(rep.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(rep.message, "different request body"));
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
    hf_reservation_state_t after = load_rs(fx, "i3");
    assert_memory_equal(&before, &after, sizeof before);

    /* A commit key reused for another payment is a conflict too. */
    hf_record_t c1 = commit_rec("i3", "c", "pay-1");
    assert_int_equal(call(fx, &c1).outcome, HF_REPLY_COMMITTED);
    hf_record_t c2 = commit_rec("i3", "c", "pay-2");
    assert_int_equal(call(fx, &c2).outcome, HF_REPLY_CONFLICT);
    assert_string_equal(load_rs(fx, "i3").payment_id, "pay-1");
}

static void test_reserve_reusing_a_reservation_id_under_another_key_is_conflict(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "i4", "SKU-A", 1, 0);
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("i4", "other-key", "SKU-A", 1, 0);
    hf_reply_t rep = call(fx, &r);
    assert_int_equal(rep.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(rep.message, "reservation_id is already used"));
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
}

/* A Reserve retried after its reservation moved on (extended, committed, the
 * idempotency retention past, even restored from the changelog) still gets its
 * first answer exactly: HELD with the allocations and the expires_at_ms it had
 * then, not what the reservation is now. */
static void test_retried_reserve_after_commit_gets_the_original_held_reply(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    hf_reply_t first = reserve_held(fx, "ir1", "SKU-A", 2, 60000);
    assert_int_equal(first.allocations_count, 1);
    hf_record_t r = reserve_rec("ir1", "k", "SKU-A", 2, 60000);
    fx->now_ms = T0 + 1000;
    hf_record_t x = extend_rec("ir1", "x", 30000);
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_HELD);
    assert_int_equal(load_rs(fx, "ir1").expires_at_ms, first.expires_at_ms + 30000);
    hf_reply_t again = call(fx, &r);
    assert_memory_equal(&again, &first, sizeof first);
    hf_record_t c = commit_rec("ir1", "c", "pay");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    size_t from = fx->emits_count;
    again = call(fx, &r);
    assert_memory_equal(&again, &first, sizeof first); /* HELD, not COMMITTED */
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
    assert_int_equal(ledger_total(fx, from, "ir1"), 0);
    fx->now_ms = T0 + RETENTION_MS + 1;
    fx_tick(fx);
    fake_stage_restore(fx, gateway_stage());
    again = call(fx, &r);
    assert_memory_equal(&again, &first, sizeof first);

    /* An expired one too. */
    hf_reply_t held = reserve_held(fx, "ir2", "SKU-A", 1, 5000);
    fx->now_ms = held.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "ir2").status, HF_RES_EXPIRED);
    hf_record_t r2 = reserve_rec("ir2", "k", "SKU-A", 1, 5000);
    again = call(fx, &r2);
    assert_memory_equal(&again, &held, sizeof held);
}

/* While PENDING a retry gets nothing; the one answer comes when the results
 * are in, and every retry after it gets that answer again, even after a
 * restore; a rejection is kept the same way. */
static void test_retried_pending_reserve_is_answered_once_then_from_the_reservation(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_record_t r = reserve_rec("ip1", "k", "SKU-A", 1, 0);
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    fake_stage_restore(fx, gateway_stage()); /* still pending after a restore */
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    assert_int_equal(replies_since(fx, from), 0);
    assert_false(load_rs(fx, "ip1").reserve_replied);
    settle(fx);
    hf_reply_t first = one_reply(fx, from);
    assert_int_equal(first.outcome, HF_REPLY_HELD);
    assert_string_equal(first.reservation_id, "ip1");
    assert_string_equal(first.idempotency_key, "k");
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 1);
    hf_reply_t again = call(fx, &r);
    assert_memory_equal(&again, &first, sizeof first);

    /* Rejected for stock: the REJECTED_INSUFFICIENT answer is kept too. */
    const int64_t none[6] = {0, 0, 0, 0, 0, 0};
    stock(fx, "SKU-Z", none, 6);
    hf_record_t z = reserve_rec("ip2", "k", "SKU-Z", 1, 0);
    hf_reply_t no = call(fx, &z);
    assert_int_equal(no.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_int_equal(load_rs(fx, "ip2").status, HF_RES_REJECTED);
    again = call(fx, &z);
    assert_memory_equal(&again, &no, sizeof no);
}

/* Another body under the same key is CONFLICT, pending or answered, and
 * changes nothing; the first body's answer still comes, once. */
static void
test_reserve_with_another_body_under_its_key_is_conflict_pending_or_answered(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_record_t r = reserve_rec("ic1", "k", "SKU-A", 1, 0);
    hf_record_t other = reserve_rec("ic1", "k", "SKU-A", 5, 0);
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    hf_reply_t c = call(fx, &other);
    assert_int_equal(c.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(c.message, "different request body"));
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 1);
    from = fx->emits_count;
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    assert_int_equal(call(fx, &other).outcome, HF_REPLY_CONFLICT);
    assert_int_equal(load_rs(fx, "ic1").lines[0].qty, 1);
    /* A Reserve under the key of the reservation's Commit: that key's body. */
    hf_record_t cm = commit_rec("ic1", "c", "pay");
    assert_int_equal(call(fx, &cm).outcome, HF_REPLY_COMMITTED);
    hf_record_t under_c = reserve_rec("ic1", "c", "SKU-A", 1, 0);
    c = call(fx, &under_c);
    assert_int_equal(c.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(c.message, "different request body"));
}

/* The Reserve's transaction and the one that answers it each write one
 * gateway changelog record: the reservation (no idempotency record beside). */
static void test_reserve_and_its_results_each_write_one_changelog_record(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    stock(fx, "SKU-B", plenty, 6);
    const char *skus[] = {"SKU-A", "SKU-B"};
    const int64_t qtys[] = {1, 2};
    hf_record_t r = reserve_lines("ic2", "k", skus, qtys, 2, 0);
    size_t cl = fx->changelog_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    assert_int_equal(changelog_only_r(fx, cl, "ic2"), 1);
    counters_apply(fx);
    assert_int_equal(fx->user->results_count, 2);
    cl = fx->changelog_count;
    size_t from = fx->emits_count;
    deliver_results(fx); /* two transactions: one result each, the second answers */
    assert_int_equal(changelog_only_r(fx, cl, "ic2"), 2);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    /* A retry writes nothing. */
    cl = fx->changelog_count;
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_HELD);
    assert_int_equal(fx->changelog_count, cl);
}

/* State written before the Reserve's answer moved into the reservation: R
 * without it, and an IdempotencyRecord holding the answer (or the pending
 * marker). A retry after the upgrade is answered from that record; a pending
 * one is answered once from R when its results come; one whose record is
 * already forgotten gets CONFLICT saying so. */
static void old_format(stage_ctx_t *fx, const char *rid, const hf_reply_t *reply)
{
    hf_reservation_state_t rs = load_rs(fx, rid);
    hf_record_t ir = {.type = HF_REC_IDEMPOTENCY_RECORD};
    ir.u.idempotency_record.request_hash = rs.request_hash;
    ir.u.idempotency_record.complete = reply != NULL;
    if (reply)
        ir.u.idempotency_record.reply = *reply;
    ir.u.idempotency_record.stored_at_ms = rs.created_at_ms;
    rs.reserve_replied = false;
    memset(&rs.reserve_reply, 0, sizeof rs.reserve_reply);
    hf_record_t rec = {.type = HF_REC_RESERVATION_STATE, .u.reservation_state = rs};
    char key[GW_KEY_MAX];
    assert_int_equal(stage_put(fx, key, gw_res_key(key, rid), &rec), HF_OK);
    assert_int_equal(stage_put(fx, key, gw_idem_key(key, rid, rs.idempotency_key), &ir), HF_OK);
    char ref[GW_KEY_MAX];
    snprintf(ref, sizeof ref, "%s|%s", rid, rs.idempotency_key);
    assert_int_equal(gw_timer_add(fx, rs.created_at_ms + RETENTION_MS, GW_TIMER_IDEMPOTENCY, ref),
                     HF_OK);
    fake_stage_commit(fx);
}

static void test_reserve_answers_in_old_idempotency_records_are_still_honoured(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    hf_reply_t held = reserve_held(fx, "io1", "SKU-A", 1, 0);
    hf_record_t c = commit_rec("io1", "c", "pay");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    old_format(fx, "io1", &held);
    hf_record_t r = reserve_rec("io1", "k", "SKU-A", 1, 0);
    hf_reply_t again = call(fx, &r);
    assert_memory_equal(&again, &held, sizeof held);
    hf_record_t other = reserve_rec("io1", "k", "SKU-A", 2, 0);
    assert_int_equal(call(fx, &other).outcome, HF_REPLY_CONFLICT);
    fake_stage_restore(fx, gateway_stage()); /* the old record's timer is rebuilt */
    fx->now_ms = T0 + RETENTION_MS + 1;
    fx_tick(fx);
    assert_false(idem_exists(fx, "io1", "k"));
    hf_reply_t gone = call(fx, &r);
    assert_int_equal(gone.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(gone.message, "no longer kept; the reservation is COMMITTED"));

    /* Pending under the old version: the marker keeps a retry silent, the
     * answer comes once (into R), and later retries get it from R. */
    hf_record_t p = reserve_rec("io2", "k", "SKU-A", 1, 0);
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &p), HF_OK);
    old_format(fx, "io2", NULL);
    assert_int_equal(fx_apply(fx, &p), HF_OK);
    assert_int_equal(replies_since(fx, from), 0);
    settle(fx);
    hf_reply_t first = one_reply(fx, from);
    assert_int_equal(first.outcome, HF_REPLY_HELD);
    again = call(fx, &p);
    assert_memory_equal(&again, &first, sizeof first);
}

static void test_commit_is_idempotent_by_key_and_by_payment_id(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "i5", "SKU-A", 2, 0);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("i5", "c1", "pay-1");
    hf_reply_t a = call(fx, &c);
    assert_int_equal(a.outcome, HF_REPLY_COMMITTED);
    assert_int_equal(a.allocations_count, 1);
    hf_reply_t b = call(fx, &c); /* the webhook retried */
    assert_memory_equal(&a, &b, sizeof a);
    hf_record_t c2 = commit_rec("i5", "c2", "pay-1"); /* same payment, another key */
    hf_reply_t d = call(fx, &c2);
    assert_int_equal(d.outcome, HF_REPLY_COMMITTED);
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 1);
    assert_int_equal(ledger_count(fx, from, "i5", HF_LEDGER_COMMITTED), 1);
    hf_record_t c3 = commit_rec("i5", "c3", "pay-2"); /* another payment */
    hf_reply_t e = call(fx, &c3);
    assert_int_equal(e.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(e.message, "another payment"));
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 1);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(m_pair(fx, "W1", "SKU-A")->committed, 2);
}

/* ======================================================================
 * The saga
 * ====================================================================== */

static void test_all_holds_ok_make_it_held_with_expires_at_now_plus_ttl_computed_once(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    stock(fx, "SKU-B", plenty, 6);
    const char *skus[] = {"SKU-A", "SKU-B"};
    const int64_t qtys[] = {2, 3};
    hf_record_t r = reserve_lines("s1", "k", skus, qtys, 2, 60000);
    size_t from = fx->emits_count;
    fx->now_ms = T0;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 2);
    assert_int_equal(load_rs(fx, "s1").status, HF_RES_PENDING);
    assert_int_equal(load_rs(fx, "s1").expires_at_ms, T0 + 60000);
    fx->now_ms = T0 + 700; /* the results take their time: expires_at does not move */
    settle(fx);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    assert_int_equal(rep.expires_at_ms, T0 + 60000);
    assert_int_equal(rep.allocations_count, 2);
    assert_string_equal(rep.allocations[0].warehouse_id, "W1");
    hf_ledger_event_t held = last_ledger(fx, "s1", HF_LEDGER_HELD);
    assert_int_equal(held.expires_at_ms, T0 + 60000);
    assert_int_equal(held.allocations_count, 2);
    assert_int_equal(ledger_total(fx, from, "s1"), 1);
    assert_int_equal(load_rs(fx, "s1").status, HF_RES_HELD);
    assert_int_equal(reserved_total(fx, "SKU-A") + reserved_total(fx, "SKU-B"), 5);
    /* A retry much later gets the same expiry. */
    fx->now_ms = T0 + 30000;
    assert_int_equal(call(fx, &r).expires_at_ms, T0 + 60000);
}

static void test_ttl_is_the_requests_then_the_campaigns_then_the_default(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    assert_int_equal(reserve_held(fx, "s2", "SKU-A", 1, 0).expires_at_ms, T0 + TTL_DEFAULT_MS);
    hf_record_t c = reserve_rec("s3", "k", "SKU-A", 1, 0);
    snprintf(c.u.reserve.campaign, sizeof c.u.reserve.campaign, "flash");
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    settle(fx);
    assert_int_equal(one_reply(fx, from).expires_at_ms, T0 + 120000);
    hf_record_t own = reserve_rec("s4", "k", "SKU-A", 1, 5000);
    snprintf(own.u.reserve.campaign, sizeof own.u.reserve.campaign, "flash");
    from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &own), HF_OK);
    settle(fx);
    assert_int_equal(one_reply(fx, from).expires_at_ms, T0 + 5000);
}

static void
test_insufficient_result_reroutes_to_another_warehouse_with_a_bumped_attempt(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    m_pair(fx, "W1", "SKU-A")->available = 0; /* the view still says 100 */
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("s5", "k", "SKU-A", 5, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    hf_hold_t h0 = nth_hold(fx, from, 0), h1 = nth_hold(fx, from, 1);
    assert_string_equal(h0.warehouse_id, "W1");
    assert_int_equal(h0.attempt, 0);
    assert_string_not_equal(h1.warehouse_id, "W1");
    assert_int_equal(h1.attempt, 1);
    assert_int_equal(h1.qty, 5);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 2);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    assert_int_equal(rep.allocations_count, 1);
    assert_string_equal(rep.allocations[0].warehouse_id, h1.warehouse_id);
    assert_int_equal(load_rs(fx, "s5").reroutes, 1);
    assert_int_equal(reserved_total(fx, "SKU-A"), 5);
}

static void test_partial_insufficient_reroutes_only_the_missing_quantity(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t split[6] = {3, 3, 3, 0, 0, 0};
    stock(fx, "SKU-A", split, 6);
    m_pair(fx, "W2", "SKU-A")->available = 1; /* the view still says 3 */
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("s6", "k", "SKU-A", 5, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    /* W1 3 + W2 2; W2 refuses (1 left); the missing 2 go to W3, W1 is kept. */
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 3);
    hf_hold_t h0 = nth_hold(fx, from, 0), h1 = nth_hold(fx, from, 1), h2 = nth_hold(fx, from, 2);
    assert_string_equal(h0.warehouse_id, "W1");
    assert_int_equal(h0.qty, 3);
    assert_string_equal(h1.warehouse_id, "W2");
    assert_int_equal(h1.qty, 2);
    assert_string_equal(h2.warehouse_id, "W3");
    assert_int_equal(h2.qty, 2);
    assert_int_equal(h2.attempt, 1);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    assert_int_equal(rep.allocations_count, 2);
    assert_int_equal(rep.allocations[0].qty + rep.allocations[1].qty, 5);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 0);
    assert_int_equal(reserved_total(fx, "SKU-A"), 5);
}

static void
test_reroutes_are_bounded_then_every_hold_is_released_and_the_reserve_rejected(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    stock(fx, "SKU-B", plenty, 6);
    for (size_t i = 0; i < WH_COUNT; i++) /* the view says 100 everywhere; the counters 0 */
        m_pair(fx, wh_table[i].id, "SKU-B")->available = 0;
    const char *skus[] = {"SKU-A", "SKU-B"};
    const int64_t qtys[] = {2, 1};
    hf_record_t r = reserve_lines("s7", "k", skus, qtys, 2, 0);
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    /* SKU-A once, SKU-B in the first round and in each of HF_REROUTES_MAX re-routes. */
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 1 + 1 + HF_REROUTES_MAX);
    for (size_t i = 1; i < 1 + 1 + HF_REROUTES_MAX; i++)
        assert_string_equal(nth_hold(fx, from, i).sku, "SKU-B");
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_int_equal(rep.allocations_count, 0);
    /* Never a partial reservation: SKU-A's OK hold got its ReleaseHold. */
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(reserved_total(fx, "SKU-B"), 0);
    assert_int_equal(ledger_count(fx, from, "s7", HF_LEDGER_REJECTED), 1);
    assert_int_equal(ledger_total(fx, from, "s7"), 1);
    hf_reservation_state_t rs = load_rs(fx, "s7");
    assert_int_equal(rs.status, HF_RES_REJECTED);
    assert_int_equal(rs.reroutes, HF_REROUTES_MAX);
    /* A retry gets the stored rejection. */
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_REJECTED_INSUFFICIENT);
}

static void
test_rejection_when_the_network_cannot_cover_releases_the_ok_holds_of_other_lines(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    const int64_t two[6] = {2, 0, 0, 0, 0, 0};
    stock(fx, "SKU-B", two, 6);
    m_pair(fx, "W1", "SKU-B")->available = 1; /* the view is behind */
    const char *skus[] = {"SKU-A", "SKU-B"};
    const int64_t qtys[] = {4, 2};
    hf_record_t r = reserve_lines("s8", "k", skus, qtys, 2, 0);
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(reserved_total(fx, "SKU-B"), 0);
}

static void
test_reserve_the_view_cannot_cover_is_rejected_insufficient_without_any_hold(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t few[6] = {1, 1, 1, 0, 0, 0};
    stock(fx, "SKU-A", few, 6);
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("s9", "k", "SKU-A", 4, 0);
    hf_reply_t rep = call(fx, &r);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_non_null(strstr(rep.message, "4 asked, 3 available"));
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
    assert_int_equal(ledger_count(fx, from, "s9", HF_LEDGER_REJECTED), 1);
    assert_int_equal(load_rs(fx, "s9").status, HF_RES_REJECTED);
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_REJECTED_INSUFFICIENT); /* stored */
}

static void test_stale_view_degrades_to_the_nearest_warehouse(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t far_only[6] = {0, 0, 100, 0, 0, 0};
    stock(fx, "SKU-A", far_only, 6);
    m_pair(fx, "W1", "SKU-A")->available = 10; /* the stale view does not know */
    fx->user->view_staleness_ms = 60000;
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("s10", "k", "SKU-A", 2, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, "W1");
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    /* Never caught up at all: the same. */
    fx->user->view_staleness_ms = -1;
    from = fx->emits_count;
    hf_record_t r2 = reserve_rec("s11", "k", "SKU-UNSEEN", 1, 0);
    assert_int_equal(fx_apply(fx, &r2), HF_OK);
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, "W1");
}

/* ======================================================================
 * Guarded transitions
 * ====================================================================== */

static void test_commit_of_held_sends_commit_holds_and_one_committed_ledger_event(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "g1", "SKU-A", 3, 0);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("g1", "c", "pay-1");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 1);
    hf_ledger_event_t e = last_ledger(fx, "g1", HF_LEDGER_COMMITTED);
    assert_string_equal(e.payment_id, "pay-1");
    assert_int_equal(e.allocations_count, 1);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(m_pair(fx, "W1", "SKU-A")->committed, 3);
    assert_int_equal(load_rs(fx, "g1").status, HF_RES_COMMITTED);
}

/* Drives rid's reservation through every request kind and checks none moves
 * it, emits a counter command or a ledger event. */
static void expect_frozen(stage_ctx_t *fx, const char *rid, int32_t status)
{
    size_t from = fx->emits_count;
    hf_record_t reqs[] = {commit_rec(rid, "fz-c", "pay-frozen"), release_rec(rid, "fz-x"),
                          extend_rec(rid, "fz-e", 60000)};
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        hf_reply_t rep = call(fx, &reqs[i]);
        assert_true(rep.outcome != HF_REPLY_HELD && rep.outcome != HF_REPLY_COMMITTED);
        if (status != HF_RES_RELEASED)
            assert_true(rep.outcome != HF_REPLY_RELEASED);
    }
    fx->now_ms += 2 * TTL_DEFAULT_MS;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, rid).status, status);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD) +
                         commands_since(fx, from, HF_REC_COMMIT_HOLD) +
                         commands_since(fx, from, HF_REC_RELEASE_HOLD),
                     0);
    size_t events = ledger_total(fx, from, rid),
           late = ledger_count(fx, from, rid, HF_LEDGER_LATE_PAYMENT);
    assert_int_equal(events, late); /* only a refund flag, never a transition */
}

static void test_terminal_states_never_move(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "t-com", "SKU-A", 1, 0);
    hf_record_t c = commit_rec("t-com", "c", "pay-1");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    expect_frozen(fx, "t-com", HF_RES_COMMITTED);

    reserve_held(fx, "t-rel", "SKU-A", 1, 0);
    hf_record_t x = release_rec("t-rel", "x");
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_RELEASED);
    expect_frozen(fx, "t-rel", HF_RES_RELEASED);

    reserve_held(fx, "t-exp", "SKU-A", 1, 1000);
    fx->now_ms += 1000;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "t-exp").status, HF_RES_EXPIRED);
    expect_frozen(fx, "t-exp", HF_RES_EXPIRED);

    const int64_t none[6] = {0};
    stock(fx, "SKU-Z", none, 6);
    hf_record_t z = reserve_rec("t-rej", "k", "SKU-Z", 1, 0);
    assert_int_equal(call(fx, &z).outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    expect_frozen(fx, "t-rej", HF_RES_REJECTED);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

/* A Commit of a PENDING reservation is BUSY (the webhook's provider gets a 503
 * and delivers it again), an Extend CONFLICT; neither is kept, so the same
 * request once HELD applies. */
static void
test_commit_or_extend_of_a_pending_reservation_is_busy_or_conflict_not_kept(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_record_t r = reserve_rec("g2", "k", "SKU-A", 1, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    hf_record_t c = commit_rec("g2", "c", "pay-1");
    hf_record_t e = extend_rec("g2", "e", 60000);
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_BUSY);
    assert_int_equal(call(fx, &e).outcome, HF_REPLY_CONFLICT);
    settle(fx);
    /* The same webhook and extension retried once HELD now succeed. */
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    hf_record_t r2 = reserve_rec("g3", "k", "SKU-A", 1, 0);
    assert_int_equal(fx_apply(fx, &r2), HF_OK);
    hf_record_t e2 = extend_rec("g3", "e", 60000);
    assert_int_equal(call(fx, &e2).outcome, HF_REPLY_CONFLICT);
    settle(fx);
    assert_int_equal(call(fx, &e2).outcome, HF_REPLY_HELD);
}

static void test_commit_after_expiry_expires_and_flags_a_late_payment(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_reply_t held = reserve_held(fx, "g4", "SKU-A", 2, 10000);
    fx->now_ms = held.expires_at_ms; /* the sweeper has not run yet */
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("g4", "c", "pay-late");
    hf_reply_t rep = call(fx, &c);
    assert_int_equal(rep.outcome, HF_REPLY_EXPIRED);
    assert_non_null(strstr(rep.message, "refund"));
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 0);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    assert_int_equal(ledger_count(fx, from, "g4", HF_LEDGER_EXPIRED), 1);
    hf_ledger_event_t late = last_ledger(fx, "g4", HF_LEDGER_LATE_PAYMENT);
    assert_string_equal(late.payment_id, "pay-late");
    assert_string_equal(late.reason, "refund");
    assert_int_equal(load_rs(fx, "g4").status, HF_RES_EXPIRED);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

static void test_late_payment_is_flagged_for_refund_once_per_payment_id(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "g5", "SKU-A", 1, 1000);
    fx->now_ms += 1000;
    fx_tick(fx);
    size_t from = fx->emits_count;
    hf_record_t c1 = commit_rec("g5", "c1", "pay-1");
    hf_record_t c2 = commit_rec("g5", "c2", "pay-1"); /* the provider retried under a new key */
    assert_int_equal(call(fx, &c1).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(call(fx, &c1).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(call(fx, &c2).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(ledger_count(fx, from, "g5", HF_LEDGER_LATE_PAYMENT), 1);
    hf_record_t c3 = commit_rec("g5", "c3", "pay-2"); /* a second payment: its own refund */
    assert_int_equal(call(fx, &c3).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(ledger_count(fx, from, "g5", HF_LEDGER_LATE_PAYMENT), 2);
    /* The first payment's webhook again, after the second: still flagged once. */
    hf_record_t c4 = commit_rec("g5", "c4", "pay-1");
    assert_int_equal(call(fx, &c4).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(ledger_count(fx, from, "g5", HF_LEDGER_LATE_PAYMENT), 2);
    /* A payment id that extends a flagged one is another payment. */
    hf_record_t c5 = commit_rec("g5", "c5", "pay-10");
    assert_int_equal(call(fx, &c5).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(ledger_count(fx, from, "g5", HF_LEDGER_LATE_PAYMENT), 3);
}

/* ---- late payments under late_payment_policy = rereserve (late_payment.c) */

static int64_t committed_total(stage_ctx_t *fx, const char *sku)
{
    int64_t sum = 0;
    for (size_t i = 0; i < fx->user->pairs_count; i++)
        if (strcmp(fx->user->pairs[i].sku, sku) == 0)
            sum += fx->user->pairs[i].committed;
    return sum;
}

static int64_t units_of(const hf_allocation_t *a, int32_t n)
{
    int64_t sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += a[i].qty;
    return sum;
}

/* Reserves qty of sku at ttl_ms, lets the sweeper expire it; late policy on. */
static void held_then_expired(stage_ctx_t *fx, const char *rid, const char *sku, int64_t qty)
{
    fx->user->env.late_policy = GW_LATE_RERESERVE;
    reserve_held(fx, rid, sku, qty, 1000);
    fx->now_ms += 1000;
    fx_tick(fx);
    settle(fx);
    assert_int_equal(load_rs(fx, rid).status, HF_RES_EXPIRED);
}

static void test_rereserve_holds_the_expired_stock_again_and_commits_it(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->env.late_policy = GW_LATE_RERESERVE;
    stock(fx, "SKU-A", plenty, 6);
    hf_reply_t held = reserve_held(fx, "L1", "SKU-A", 2, 1000);
    fx->now_ms = held.expires_at_ms; /* the sweeper has not run: the commit expires it */
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("L1", "c", "pay-late");
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    assert_int_equal(replies_since(fx, from), 0); /* answered once the holds are back */
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    hf_hold_t again = nth_hold(fx, from, 0);
    assert_string_equal(again.warehouse_id, held.allocations[0].warehouse_id);
    assert_int_equal(again.qty, 2);
    assert_true(again.attempt > 0); /* a new hold, not the expired one */
    assert_int_equal(ledger_count(fx, from, "L1", HF_LEDGER_EXPIRED), 1);
    /* A retry under the same key waits; under another key it is told to retry. */
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    assert_int_equal(replies_since(fx, from), 0);
    hf_record_t c2 = commit_rec("L1", "c2", "pay-late");
    assert_int_equal(call(fx, &c2).outcome, HF_REPLY_CONFLICT);

    size_t mid = fx->emits_count;
    settle(fx);
    hf_reply_t rep = one_reply(fx, mid);
    assert_int_equal(rep.outcome, HF_REPLY_COMMITTED);
    assert_string_equal(rep.idempotency_key, "c");
    assert_non_null(strstr(rep.message, "re-reserved"));
    assert_int_equal(units_of(rep.allocations, rep.allocations_count), 2);
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 1);
    assert_int_equal(committed_total(fx, "SKU-A"), 2);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    hf_ledger_event_t late = last_ledger(fx, "L1", HF_LEDGER_LATE_PAYMENT);
    assert_string_equal(late.reason, GW_LATE_REBOOKED);
    assert_string_equal(late.payment_id, "pay-late");
    assert_int_equal(units_of(late.allocations, late.allocations_count), 2);
    assert_int_equal(ledger_count(fx, from, "L1", HF_LEDGER_LATE_PAYMENT), 1);
    assert_int_equal(ledger_count(fx, from, "L1", HF_LEDGER_COMMITTED), 0);
    hf_reservation_state_t rs = load_rs(fx, "L1");
    assert_int_equal(rs.status, HF_RES_EXPIRED); /* terminal states never move */
    assert_int_equal(rs.rebook, HF_REBOOK_COMMITTED);

    /* Retries under any key get the sale; another payment is a conflict, and
     * is flagged for refund (once, however often it is retried). */
    hf_reply_t again_rep = call(fx, &c);
    assert_int_equal(again_rep.outcome, HF_REPLY_COMMITTED);
    assert_int_equal(again_rep.allocations_count, rep.allocations_count);
    hf_record_t c3 = commit_rec("L1", "c3", "pay-late");
    assert_int_equal(call(fx, &c3).outcome, HF_REPLY_COMMITTED);
    hf_record_t other = commit_rec("L1", "c4", "pay-other");
    assert_int_equal(call(fx, &other).outcome, HF_REPLY_CONFLICT);
    hf_record_t other2 = commit_rec("L1", "c5", "pay-other");
    assert_int_equal(call(fx, &other2).outcome, HF_REPLY_CONFLICT);
    hf_ledger_event_t refund = last_ledger(fx, "L1", HF_LEDGER_LATE_PAYMENT);
    assert_string_equal(refund.reason, GW_LATE_REFUNDED);
    assert_string_equal(refund.payment_id, "pay-other");
    size_t releases = commands_since(fx, from, HF_REC_RELEASE_HOLD);
    hf_record_t x = release_rec("L1", "x"); /* the sold units stay sold */
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_EXPIRED);
    settle(fx);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), releases);
    assert_int_equal(ledger_count(fx, from, "L1", HF_LEDGER_LATE_PAYMENT), 2); /* sale, refund */
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 1);
    assert_int_equal(committed_total(fx, "SKU-A"), 2);
}

static void test_rereserve_reroutes_when_the_old_warehouse_sold_out_meanwhile(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t avail[6] = {2, 100, 100, 100, 100, 100};
    stock(fx, "SKU-A", avail, 6);
    held_then_expired(fx, "L2", "SKU-A", 2);
    assert_string_equal(load_rs(fx, "L2").allocations[0].warehouse_id, "W1");
    reserve_held(fx, "L3", "SKU-A", 2, 0); /* another shopper takes W1's two */
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("L2", "c", "pay-2");
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    settle(fx);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_COMMITTED);
    assert_int_equal(units_of(rep.allocations, rep.allocations_count), 2);
    assert_string_not_equal(rep.allocations[0].warehouse_id, "W1");
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 2); /* W1 refused, then another */
    assert_int_equal(committed_total(fx, "SKU-A"), 2);
    assert_int_equal(reserved_total(fx, "SKU-A"), 2); /* L3's, untouched */
    assert_string_equal(last_ledger(fx, "L2", HF_LEDGER_LATE_PAYMENT).reason, GW_LATE_REBOOKED);
}

static void test_rereserve_refunds_when_the_network_has_no_stock_left(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t two_at_w1[6] = {2, 0, 0, 0, 0, 0};
    stock(fx, "SKU-A", two_at_w1, 6);
    held_then_expired(fx, "L4", "SKU-A", 2);
    reserve_held(fx, "L5", "SKU-A", 2, 0);
    const int64_t none[6] = {0, 0, 0, 0, 0, 0};
    view_set(fx, "SKU-A", none, 6);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("L4", "c", "pay-4");
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    settle(fx);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_EXPIRED);
    assert_non_null(strstr(rep.message, "flagged for refund"));
    assert_int_equal(rep.allocations_count, 0);
    hf_ledger_event_t late = last_ledger(fx, "L4", HF_LEDGER_LATE_PAYMENT);
    assert_string_equal(late.reason, GW_LATE_REFUNDED);
    assert_int_equal(late.allocations_count, 0);
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 0);
    assert_int_equal(committed_total(fx, "SKU-A"), 0);
    assert_int_equal(reserved_total(fx, "SKU-A"), 2); /* L5's only */
    assert_int_equal(load_rs(fx, "L4").rebook, HF_REBOOK_REFUNDED);
    /* The provider retrying under a new key: the same answer, no second flag. */
    hf_record_t c2 = commit_rec("L4", "c2", "pay-4");
    assert_int_equal(call(fx, &c2).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(ledger_count(fx, from, "L4", HF_LEDGER_LATE_PAYMENT), 1);
}

static void test_rereserve_refunds_at_once_when_the_view_knows_nothing_is_left(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t one_each[6] = {1, 1, 0, 0, 0, 0};
    stock(fx, "SKU-A", one_each, 6);
    const char *skus[] = {"SKU-A"};
    const int64_t qtys[] = {2};
    fx->user->env.late_policy = GW_LATE_RERESERVE;
    hf_record_t r = reserve_lines("L6", "k", skus, qtys, 1, 1000);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    assert_int_equal(load_rs(fx, "L6").status, HF_RES_HELD);
    /* Split over W1 and W2; after expiry W2's unit is sold and the view knows. */
    fx->now_ms += 1000;
    fx_tick(fx);
    settle(fx);
    const int64_t w1_only[6] = {1, 0, 0, 0, 0, 0};
    stock(fx, "SKU-A", w1_only, 6);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("L6", "c", "pay-6");
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_EXPIRED);
    /* The same two warehouses were asked; W2 refused, nothing could replace
     * it, and W1's unit was given back. */
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 2);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_string_equal(last_ledger(fx, "L6", HF_LEDGER_LATE_PAYMENT).reason, GW_LATE_REFUNDED);
}

static void test_rereserve_whose_results_never_come_refunds_after_retries_max(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    held_then_expired(fx, "L7", "SKU-A", 1);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("L7", "c", "pay-7");
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    for (int i = 0; i < 200 && load_rs(fx, "L7").rebook == HF_REBOOK_PENDING; i++) {
        fx->now_ms += 1000;
        counters_apply(fx);
        drop_results(fx);
        fx_tick(fx);
    }
    assert_int_equal(load_rs(fx, "L7").rebook, HF_REBOOK_REFUNDED);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_EXPIRED);
    assert_non_null(strstr(rep.message, "did not answer"));
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 1 + HF_RESULT_RETRIES_MAX);
    counters_apply(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0); /* the unanswered hold was released */
    assert_int_equal(committed_total(fx, "SKU-A"), 0);
}

static void test_rereserved_hold_revoked_before_its_commit_refunds_the_payment(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    held_then_expired(fx, "L8", "SKU-A", 1);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("L8", "c", "pay-8");
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    counters_apply(fx);
    /* A stock count revokes the new hold before its result arrives. */
    revoke_hold(fx, "L8", load_rs(fx, "L8").allocations[0].warehouse_id, "SKU-A");
    deliver_results(fx);
    settle(fx);
    /* The OK result came first, so the sale was answered and its CommitHold
     * sent; then the shortfall reverses it, as for any commit (counter_result.c):
     * the revoked hold is released and the payment flagged for refund. */
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_COMMITTED);
    assert_int_equal(load_rs(fx, "L8").rebook, HF_REBOOK_REFUNDED);
    assert_int_equal(ledger_count(fx, from, "L8", HF_LEDGER_LATE_PAYMENT), 2);
    hf_ledger_event_t refund = last_ledger(fx, "L8", HF_LEDGER_LATE_PAYMENT);
    assert_string_equal(refund.reason, GW_LATE_REFUNDED);
    assert_int_equal(refund.allocations_count, 1); /* the units given back */
    assert_int_equal(refund.allocations[0].qty, 1);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(committed_total(fx, "SKU-A"), 0);
}

static void test_rereserve_revoked_while_pending_refunds_and_releases_everything(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    stock(fx, "SKU-B", plenty, 6);
    fx->user->env.late_policy = GW_LATE_RERESERVE;
    const char *skus[] = {"SKU-A", "SKU-B"};
    const int64_t qtys[] = {1, 1};
    hf_record_t r = reserve_lines("L9", "k", skus, qtys, 2, 1000);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    fx->now_ms += 1000;
    fx_tick(fx);
    settle(fx);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("L9", "c", "pay-9");
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    counters_apply(fx);
    /* SKU-A's hold is answered OK and then revoked; SKU-B's answer is late. */
    assert_int_equal(fx->user->results_count, 2);
    hf_counter_result_t b_result = fx->user->results[1];
    fx->user->results_count = 1;
    revoke_hold(fx, "L9", load_rs(fx, "L9").allocations[0].warehouse_id, "SKU-A");
    deliver_results(fx);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_EXPIRED);
    assert_non_null(strstr(rep.message, "revoked"));
    fx->user->results[fx->user->results_count++] = b_result;
    settle(fx);
    assert_int_equal(replies_since(fx, from), 1);
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 0);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(reserved_total(fx, "SKU-B"), 0);
    assert_int_equal(ledger_count(fx, from, "L9", HF_LEDGER_LATE_PAYMENT), 1);
}

static void
test_release_of_pending_releases_what_was_asked_and_answers_the_reserve_once(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("g6", "k", "SKU-A", 2, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    hf_record_t x = release_rec("g6", "x");
    assert_int_equal(fx_apply(fx, &x), HF_OK);
    assert_int_equal(replies_since(fx, from), 2); /* the reserve's and the release's */
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    settle(fx); /* the Hold reaches the counter before its ReleaseHold */
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(replies_since(fx, from), 2); /* the late OK result answers nothing */
    assert_int_equal(ledger_count(fx, from, "g6", HF_LEDGER_RELEASED), 1);
    assert_int_equal(ledger_count(fx, from, "g6", HF_LEDGER_HELD), 0);
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_RELEASED);
}

static void test_release_of_held_gives_the_holds_back_with_a_released_ledger_event(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "g7", "SKU-A", 2, 0);
    size_t from = fx->emits_count;
    hf_record_t x = release_rec("g7", "x");
    snprintf(x.u.release.reason, sizeof x.u.release.reason, "cart emptied");
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_RELEASED);
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_RELEASED);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    hf_ledger_event_t e = last_ledger(fx, "g7", HF_LEDGER_RELEASED);
    assert_string_equal(e.reason, "cart emptied");
    assert_int_equal(e.allocations_count, 1);
    assert_int_equal(ledger_total(fx, from, "g7"), 1);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

/* ======================================================================
 * Load shedding
 * ====================================================================== */

static void test_a_reserve_past_its_deadline_is_busy_and_leaves_nothing_behind(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->env.reserve_deadline_ms = 500;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0 + 2000; /* the request was sent 2 s ago */
    hf_record_t r = reserve_rec("sh1", "k", "SKU-A", 1, 0);
    size_t from = fx->emits_count;
    hf_reply_t rep = call(fx, &r);
    assert_int_equal(rep.outcome, HF_REPLY_BUSY);
    assert_non_null(strstr(rep.message, "retry with the same idempotency key"));
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 0);
    assert_int_equal(ledger_total(fx, from, "sh1"), 0);
    hf_reservation_state_t none;
    fx->partition = fake_stage_partition_of("sh1");
    assert_int_equal(gw_load(fx, "sh1", &none), HF_ERR_NOTFOUND);
    assert_false(idem_exists(fx, "sh1", "k"));
    /* The broker's append time, when there is one, wins over the client's clock:
     * a client 10 s behind is served when the broker says the request is fresh... */
    fx->record_timestamp_ms = fx->now_ms - 20;
    r.u.reserve.sent_at_ms = fx->now_ms - 10000;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    assert_int_equal(load_rs(fx, "sh1").status, HF_RES_HELD);
    /* ...and a retry of a reservation already applied is answered, never shed. */
    fx->record_timestamp_ms = fx->now_ms - 5000;
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_HELD);
    /* A new one that waited 5 s in the broker is shed, whatever its client says. */
    hf_record_t r2 = reserve_rec("sh1b", "k", "SKU-A", 1, 0);
    r2.u.reserve.sent_at_ms = fx->now_ms;
    assert_int_equal(call(fx, &r2).outcome, HF_REPLY_BUSY);
    fx->record_timestamp_ms = 0;
}

/* ======================================================================
 * The request prologue (gw_request.c): one order of checks for every kind
 * ====================================================================== */

/* Key, then reply_to, then the body, then the reservation: each failure is
 * answered by the first check that finds it, and none writes anything. */
static void test_the_prologue_checks_key_then_reply_to_then_body_then_the_reservation(void **state)
{
    stage_ctx_t *fx = *state;
    size_t from = fx->emits_count, cl = fx->changelog_count;
    hf_record_t c = commit_rec("pr1", "k1", ""); /* no payment_id, no such reservation */
    snprintf(c.u.commit.reply_to, sizeof c.u.commit.reply_to, "bad topic!");
    assert_int_equal(fx_apply_key(fx, "pr2", &c), HF_ERR_INVAL); /* mis-keyed: dead letter */
    assert_non_null(strstr(fx->reject_reason, "record key must be the reservation_id"));
    assert_int_equal(fx->emits_count, from);

    hf_reply_t rep = call(fx, &c);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INVALID);
    assert_non_null(strstr(rep.message, "not a legal Kafka topic name"));
    assert_string_equal(fx->emits[fx->emits_count - 1].topic, topic_name(HF_T_REPLIES));

    c.u.commit.reply_to[0] = '\0';
    rep = call(fx, &c);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INVALID);
    assert_non_null(strstr(rep.message, "payment_id must be non-empty"));

    snprintf(c.u.commit.payment_id, sizeof c.u.commit.payment_id, "pay-1");
    rep = call(fx, &c);
    assert_int_equal(rep.outcome, HF_REPLY_NOT_FOUND);
    assert_string_equal(rep.message, "no such reservation");
    assert_int_equal(fx->changelog_count, cl); /* nothing remembered: a retry is decided afresh */
    assert_false(idem_exists(fx, "pr1", "k1"));
}

/* A retried Commit is answered from its idempotency record before the
 * reservation is read: with the reservation gone the retry still gets the
 * first answer, byte for byte, and writes nothing; a new key gets NOT_FOUND. */
static void test_a_retried_commit_is_answered_from_its_record_without_loading(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "pr3", "SKU-A", 2, 0);
    hf_record_t c = commit_rec("pr3", "c1", "pay-1");
    hf_reply_t first = call(fx, &c);
    assert_int_equal(first.outcome, HF_REPLY_COMMITTED);

    fx->partition = fake_stage_partition_of("pr3");
    char key[GW_KEY_MAX];
    assert_int_equal(stage_del(fx, key, gw_res_key(key, "pr3")), HF_OK);
    fake_stage_commit(fx);
    size_t from = fx->emits_count, cl = fx->changelog_count;
    fx->now_ms += 1000; /* a later replied_at_ms would show a new answer */
    hf_reply_t again = call(fx, &c);
    assert_memory_equal(&first, &again, sizeof first);
    assert_int_equal(fx->emits_count, from + 1); /* the reply, nothing else */
    assert_int_equal(fx->changelog_count, cl);

    hf_record_t other = commit_rec("pr3", "c2", "pay-1");
    assert_int_equal(call(fx, &other).outcome, HF_REPLY_NOT_FOUND);
}

/* Another body under a used key is CONFLICT for Commit, Release and Extend
 * alike, and changes nothing: no command, no ledger event, no state. */
static void test_another_body_under_a_used_key_is_conflict_for_every_request_kind(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "pr4", "SKU-A", 1, 0);
    reserve_held(fx, "pr5", "SKU-A", 1, 0);
    hf_record_t x = extend_rec("pr4", "e1", 1000);
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_HELD);
    hf_record_t r = release_rec("pr4", "r1");
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_RELEASED);
    hf_record_t c = commit_rec("pr5", "c1", "pay-1");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    hf_reservation_state_t before4 = load_rs(fx, "pr4"), before5 = load_rs(fx, "pr5");

    size_t from = fx->emits_count, cl = fx->changelog_count;
    x.u.extend.extend_by_ms = 2000;
    snprintf(r.u.release.reason, sizeof r.u.release.reason, "changed mind");
    snprintf(c.u.commit.payment_id, sizeof c.u.commit.payment_id, "pay-2");
    const hf_record_t *again[] = {&x, &r, &c};
    for (size_t i = 0; i < sizeof again / sizeof again[0]; i++) {
        hf_reply_t rep = call(fx, again[i]);
        assert_int_equal(rep.outcome, HF_REPLY_CONFLICT);
        assert_non_null(strstr(rep.message, "different request body"));
    }
    assert_int_equal(fx->emits_count, from + 3); /* three replies, nothing else */
    assert_int_equal(fx->changelog_count, cl);
    hf_reservation_state_t after4 = load_rs(fx, "pr4"), after5 = load_rs(fx, "pr5");
    assert_memory_equal(&before4, &after4, sizeof before4);
    assert_memory_equal(&before5, &after5, sizeof before5);
}

/* ======================================================================
 * The sweeper
 * ====================================================================== */

static void
test_sweeper_expires_due_reservations_with_release_holds_and_an_expired_event(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    hf_reply_t a = reserve_held(fx, "w1", "SKU-A", 2, 5000);
    hf_reply_t b = reserve_held(fx, "w2", "SKU-A", 3, 20000);
    size_t from = fx->emits_count;
    fx->now_ms = a.expires_at_ms - 1;
    fx_tick(fx);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 0);
    fx->now_ms = a.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    assert_int_equal(load_rs(fx, "w1").status, HF_RES_EXPIRED);
    assert_int_equal(load_rs(fx, "w2").status, HF_RES_HELD);
    hf_ledger_event_t e = last_ledger(fx, "w1", HF_LEDGER_EXPIRED);
    assert_string_equal(e.reason, "expired");
    assert_int_equal(e.allocations_count, 1);
    assert_int_equal(e.allocations[0].qty, 2);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 3);
    fx->now_ms = b.expires_at_ms + 10;
    fx_tick(fx);
    fx_tick(fx); /* fired timers are gone: nothing twice */
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(ledger_count(fx, from, "w1", HF_LEDGER_EXPIRED), 1);
    assert_int_equal(ledger_count(fx, from, "w2", HF_LEDGER_EXPIRED), 1);
}

/* The tick reads due timers a batch at a time (sweeper.c, 64 per batch): a
 * partition with more due than one batch still fires every one, once, in the
 * same tick. */
static void test_one_tick_fires_more_due_timers_than_one_batch_holds(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t lots[6] = {1000, 1000, 1000, 1000, 1000, 1000};
    stock(fx, "SKU-A", lots, 6);
    enum { N = 300 };
    int per_partition[FAKE_STAGE_PARTITIONS] = {0};
    hf_reply_t last = {0};
    for (int i = 0; i < N; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "b%d", i);
        last = reserve_held(fx, rid, "SKU-A", 1, 5000);
        per_partition[fake_stage_partition_of(rid)]++;
    }
    int most = 0;
    for (int p = 0; p < FAKE_STAGE_PARTITIONS; p++)
        most = per_partition[p] > most ? per_partition[p] : most;
    assert_true(most > 64); /* more than one batch in some partition */
    size_t from = fx->emits_count;
    fx->now_ms = last.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), N);
    for (int i = 0; i < N; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "b%d", i);
        assert_int_equal(ledger_count(fx, from, rid, HF_LEDGER_EXPIRED), 1);
    }
    fx_tick(fx); /* fired timers are gone: nothing twice */
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), N);
}

/* Two reservation ids whose records land in the same partition. */
static void same_partition_ids(const char *stem, char *a, char *b, size_t size)
{
    snprintf(a, size, "%s0", stem);
    for (int i = 1; i < 1000; i++) {
        snprintf(b, size, "%s%d", stem, i);
        if (fake_stage_partition_of(a) == fake_stage_partition_of(b))
            return;
    }
    fail_msg("no two ids of stem %s share a partition", stem);
}

/* The sweeper resumes where its last tick stopped (gw_state.c, key C): a timer
 * armed later but due before that point — the clock went back, or a restore
 * re-armed an old one — still fires. */
static void test_sweeper_fires_a_timer_armed_before_where_it_stopped(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    char first[16], second[16];
    same_partition_ids("cur", first, second, sizeof first);
    fx->now_ms = T0 + 60000;
    hf_reply_t a = reserve_held(fx, first, "SKU-A", 1, 1000);
    size_t from = fx->emits_count;
    fx->now_ms = a.expires_at_ms;
    fx_tick(fx); /* fires first's expiry: the cursor is past it */
    assert_int_equal(ledger_count(fx, from, first, HF_LEDGER_EXPIRED), 1);
    fx->now_ms = T0; /* the clock went back a minute */
    hf_reply_t b = reserve_held(fx, second, "SKU-A", 1, 1000);
    assert_true(b.expires_at_ms < a.expires_at_ms); /* its timer sorts before the cursor */
    fx->now_ms = b.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(ledger_count(fx, from, second, HF_LEDGER_EXPIRED), 1);
    assert_int_equal(load_rs(fx, second).status, HF_RES_EXPIRED);
}

/* A restart: the new process run has another run id and keeps no due time
 * of the old one, so a timer armed due before the old run's cursor (a restore
 * re-arming it, the clock behind) deletes nothing — and still fires, because
 * the new run ignores a cursor it did not write. */
static void test_sweeper_ignores_the_cursor_of_an_earlier_run(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    char first[16], second[16];
    same_partition_ids("run", first, second, sizeof first);
    fx->now_ms = T0 + 60000;
    hf_reply_t a = reserve_held(fx, first, "SKU-A", 1, 1000);
    size_t from = fx->emits_count;
    fx->now_ms = a.expires_at_ms;
    fx_tick(fx); /* the cursor is past first's expiry */
    assert_int_equal(ledger_count(fx, from, first, HF_LEDGER_EXPIRED), 1);
    fx->user->sweep.run_id = 2; /* the process restarted on the same store */
    atomic_store(&fx->user->sweep.fired_max_ms, 0);
    fx->now_ms = T0;
    hf_reply_t b = reserve_held(fx, second, "SKU-A", 1, 1000);
    assert_true(b.expires_at_ms < a.expires_at_ms);
    fx->now_ms = b.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(ledger_count(fx, from, second, HF_LEDGER_EXPIRED), 1);
}

/* A tick whose transaction aborts fires again: the cursor it moved is rolled
 * back with the timers it deleted. */
static void test_sweeper_fires_again_after_an_aborted_tick(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_reply_t a = reserve_held(fx, "ab1", "SKU-A", 1, 1000);
    hf_reply_t b = reserve_held(fx, "ab2", "SKU-A", 1, 5000);
    fx->now_ms = a.expires_at_ms;
    fx_tick(fx); /* ab1 expires: the cursor moves past its timer */
    size_t from = fx->emits_count;
    fx->now_ms = b.expires_at_ms;
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        fx->partition = p;
        assert_int_equal(gateway_stage()->tick(fx), HF_OK);
    }
    assert_int_equal(ledger_count(fx, from, "ab2", HF_LEDGER_EXPIRED), 1);
    state_buf_clear(fx->buf); /* the transaction aborted, as task.c abort_batch does */
    fx->written_count = 0;
    fx->emits_count = from;
    assert_int_equal(load_rs(fx, "ab2").status, HF_RES_HELD);
    fx_tick(fx);
    assert_int_equal(ledger_count(fx, from, "ab2", HF_LEDGER_EXPIRED), 1);
    assert_int_equal(load_rs(fx, "ab2").status, HF_RES_EXPIRED);
    fx_tick(fx); /* and once only */
    assert_int_equal(ledger_count(fx, from, "ab2", HF_LEDGER_EXPIRED), 1);
}

/* How many timers of `kind` the index holds for reservation rid. */
static int timers_of(stage_ctx_t *fx, const char *rid, char kind)
{
    fx->partition = fake_stage_partition_of(rid);
    state_iter_t *it = stage_iter(fx, "T", 1, false);
    assert_non_null(it);
    const void *k, *v;
    size_t klen, vlen;
    int n = 0;
    while (state_iter_next(it, &k, &klen, &v, &vlen)) {
        int64_t due = 0;
        char got = 0, ref[GW_KEY_MAX];
        assert_true(gw_timer_parse(k, klen, &due, &got, ref, sizeof ref));
        n += got == kind && strcmp(ref, rid) == 0;
    }
    state_iter_destroy(it);
    return n;
}

/* The due time of partition p's sweeper cursor (key C: an 8-byte run id, then
 * a timer key), -1 when it has none. */
static int64_t cursor_due(stage_ctx_t *fx, int32_t p)
{
    fx->partition = p;
    state_iter_t *it = stage_iter(fx, GW_SWEEP_CURSOR_KEY, 1, false);
    assert_non_null(it);
    const void *k, *v;
    size_t klen, vlen;
    int64_t due = -1;
    while (state_iter_next(it, &k, &klen, &v, &vlen)) {
        if (klen != 1)
            continue;
        char kind, ref[GW_KEY_MAX];
        assert_true(vlen > 8);
        assert_true(gw_timer_parse((const char *)v + 8, vlen - 8, &due, &kind, ref, sizeof ref));
        break;
    }
    state_iter_destroy(it);
    return due;
}

/* A tick with nothing due still moves the cursor up to its time: a Hold's
 * result timer is deleted when the answer comes, before it is due, and a
 * cursor that moved only past fired timers left every tick walking those
 * tombstones again (with many open holds and no expiries, most of the
 * gateway's CPU). A timer armed after it still fires, and an idle partition
 * rewrites the cursor at most once a second. */
static void test_sweeper_cursor_moves_past_timers_deleted_before_due(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_reply_t a = reserve_held(fx, "mv1", "SKU-A", 1, 600000);
    int32_t p = fake_stage_partition_of("mv1");
    assert_int_equal(timers_of(fx, "mv1", GW_TIMER_PENDING), 0); /* deleted on HELD */
    int64_t t1 = fx->now_ms + 10000;                             /* past its result deadline */
    fx->now_ms = t1;
    fx_tick(fx);
    assert_int_equal(cursor_due(fx, p), t1);
    assert_int_equal(load_rs(fx, "mv1").status, HF_RES_HELD); /* nothing fired */
    fx->now_ms = t1 + 500;                                    /* within a second: not rewritten */
    fx_tick(fx);
    assert_int_equal(cursor_due(fx, p), t1);
    fx->now_ms = t1 + 1500;
    fx_tick(fx);
    assert_int_equal(cursor_due(fx, p), t1 + 1500);
    /* The hold armed before the cursor moved still expires in time. */
    size_t from = fx->emits_count;
    fx->now_ms = a.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(ledger_count(fx, from, "mv1", HF_LEDGER_EXPIRED), 1);
    assert_int_equal(cursor_due(fx, p), a.expires_at_ms);
    /* And one armed after it, due later. */
    hf_reply_t b = reserve_held(fx, "mv2", "SKU-A", 1, 1000);
    fx->now_ms = b.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(ledger_count(fx, from, "mv2", HF_LEDGER_EXPIRED), 1);
}

/* A transition deletes the timers it makes stale (nothing is left for the
 * sweeper to read, decode and drop): HELD ends the wait for results, a commit
 * or a release ends the hold, an extension moves the expiry. */
static void test_transitions_delete_the_timers_they_make_stale(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_record_t r = reserve_rec("st1", "k", "SKU-A", 1, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    assert_int_equal(timers_of(fx, "st1", GW_TIMER_PENDING), 1);
    settle(fx);
    assert_int_equal(load_rs(fx, "st1").status, HF_RES_HELD);
    assert_int_equal(timers_of(fx, "st1", GW_TIMER_PENDING), 0);
    assert_int_equal(timers_of(fx, "st1", GW_TIMER_EXPIRY), 1);
    hf_record_t x = extend_rec("st1", "x", 60000);
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_HELD);
    assert_int_equal(timers_of(fx, "st1", GW_TIMER_EXPIRY), 1); /* the new one only */
    hf_record_t c = commit_rec("st1", "c", "pay");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    assert_int_equal(timers_of(fx, "st1", GW_TIMER_EXPIRY), 0);
    assert_int_equal(timers_of(fx, "st1", GW_TIMER_FORGET), 1);

    reserve_held(fx, "st2", "SKU-A", 1, 0);
    hf_record_t rl = release_rec("st2", "r");
    assert_int_equal(call(fx, &rl).outcome, HF_REPLY_RELEASED);
    assert_int_equal(timers_of(fx, "st2", GW_TIMER_EXPIRY), 0);
    assert_int_equal(timers_of(fx, "st2", GW_TIMER_PENDING), 0);
    assert_int_equal(timers_of(fx, "st2", GW_TIMER_FORGET), 1);

    hf_record_t p = reserve_rec("st3", "k", "SKU-A", 1, 0); /* released while PENDING */
    assert_int_equal(fx_apply(fx, &p), HF_OK);
    hf_record_t pr = release_rec("st3", "r");
    assert_int_equal(fx_apply(fx, &pr), HF_OK);
    assert_int_equal(load_rs(fx, "st3").status, HF_RES_RELEASED);
    assert_int_equal(timers_of(fx, "st3", GW_TIMER_PENDING), 0);
    settle(fx); /* the late Hold answers change nothing */
    assert_int_equal(load_rs(fx, "st3").status, HF_RES_RELEASED);
}

static void test_sweeper_resends_overdue_holds_with_the_same_attempt(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("w3", "k", "SKU-A", 2, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    counters_apply(fx);
    drop_results(fx); /* the answer is lost */
    fx->now_ms = T0 + RESULT_TIMEOUT_MS - 1;
    fx_tick(fx);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 1);
    fx->now_ms = T0 + RESULT_TIMEOUT_MS;
    fx_tick(fx);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 2);
    hf_hold_t h0 = nth_hold(fx, from, 0), h1 = nth_hold(fx, from, 1);
    assert_int_equal(h1.attempt, h0.attempt);
    assert_string_equal(h1.warehouse_id, h0.warehouse_id);
    assert_int_equal(h1.qty, h0.qty);
    settle(fx); /* the counter answers the repeat with its first answer */
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    assert_int_equal(reserved_total(fx, "SKU-A"), 2);
    assert_int_equal(ledger_count(fx, from, "w3", HF_LEDGER_HELD), 1);
}

static void test_sweeper_rolls_back_after_result_retries_max(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    stock(fx, "SKU-B", plenty, 6);
    fx->now_ms = T0;
    const char *skus[] = {"SKU-A", "SKU-B"};
    const int64_t qtys[] = {2, 1};
    hf_record_t r = reserve_lines("w4", "k", skus, qtys, 2, 0);
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    counters_apply(fx);
    /* SKU-A's answer arrives, SKU-B's never does. */
    assert_int_equal(fx->user->results_count, 2);
    fx->user->results_count = 1;
    deliver_results(fx);
    int resends = 0;
    for (int i = 0; i < 200 && load_rs(fx, "w4").status == HF_RES_PENDING; i++) {
        fx->now_ms += 1000;
        size_t before = commands_since(fx, from, HF_REC_HOLD);
        fx_tick(fx);
        resends += (int)(commands_since(fx, from, HF_REC_HOLD) - before);
        counters_apply(fx);
        drop_results(fx);
    }
    assert_int_equal(resends, HF_RESULT_RETRIES_MAX);
    assert_int_equal(load_rs(fx, "w4").status, HF_RES_REJECTED);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_non_null(strstr(rep.message, "did not answer"));
    assert_int_equal(ledger_count(fx, from, "w4", HF_LEDGER_REJECTED), 1);
    assert_int_equal(ledger_total(fx, from, "w4"), 1);
    /* Both holds released: the OK one and the unanswered one. */
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 2);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(reserved_total(fx, "SKU-B"), 0);
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_REJECTED_INSUFFICIENT);
}

/* Keys under "P<rid>|": the refund markers of rid. */
static size_t refund_markers(stage_ctx_t *fx, const char *rid)
{
    char prefix[GW_KEY_MAX];
    int n = snprintf(prefix, sizeof prefix, "P%s|", rid);
    fx->partition = fake_stage_partition_of(rid);
    state_iter_t *it = stage_iter(fx, prefix, (size_t)n, false);
    const void *k, *v;
    size_t klen, vlen, count = 0;
    while (state_iter_next(it, &k, &klen, &v, &vlen))
        count++;
    state_iter_destroy(it);
    return count;
}

static void test_sweeper_forgets_ended_reservations_after_retention_and_only_those(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "fg1", "SKU-A", 1, 0);
    hf_record_t c = commit_rec("fg1", "c", "pay");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    reserve_held(fx, "fg2", "SKU-A", 1, TTL_DEFAULT_MS); /* stays HELD for 15 min */
    fx->now_ms += RES_RETENTION_MS - 1;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "fg1").status, HF_RES_COMMITTED); /* not yet */
    fx->now_ms += 1;
    fx_tick(fx);
    hf_reservation_state_t gone;
    fx->partition = fake_stage_partition_of("fg1");
    assert_int_equal(gw_load(fx, "fg1", &gone), HF_ERR_NOTFOUND);
    assert_false(idem_exists(fx, "fg1", "c"));
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_NOT_FOUND);
    /* fg2 expired long ago (the sweeper expired it in this tick), so it is
     * ended only now: it is kept for another retention. A late payment for it
     * leaves a refund marker, which goes with the reservation. */
    assert_int_equal(load_rs(fx, "fg2").status, HF_RES_EXPIRED);
    hf_record_t late = commit_rec("fg2", "c", "pay-late");
    assert_int_equal(call(fx, &late).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(refund_markers(fx, "fg2"), 1);
    fx->now_ms += RES_RETENTION_MS;
    fx_tick(fx);
    fx->partition = fake_stage_partition_of("fg2");
    assert_int_equal(gw_load(fx, "fg2", &gone), HF_ERR_NOTFOUND);
    assert_int_equal(refund_markers(fx, "fg2"), 0);
}

/* The timer index is never changelogged: a restore rebuilds it from the
 * reservation and idempotency records. Each timer it derives was armed by the
 * handlers too, and after it the sweeper expires, re-asks and forgets as before. */
#define GW_TIMERS_SEEN_MAX 64
static size_t timer_keys(stage_ctx_t *fx, char keys[][GW_KEY_MAX])
{
    size_t n = 0;
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        fx->partition = p;
        state_iter_t *it = stage_iter(fx, "T", 1, false);
        assert_non_null(it);
        const void *k, *v;
        size_t klen, vlen;
        while (state_iter_next(it, &k, &klen, &v, &vlen)) {
            assert_true(n < GW_TIMERS_SEEN_MAX && klen + 4 < GW_KEY_MAX);
            keys[n][0] = (char)('0' + p);
            memcpy(keys[n] + 1, k, klen);
            keys[n][klen + 1] = '\0'; /* timer keys hold no NUL after the due time */
            memcpy(keys[n] + GW_KEY_MAX - 4, &klen, sizeof(uint16_t));
            n++;
        }
        state_iter_destroy(it);
    }
    return n;
}

static void test_restore_rebuilds_the_timer_index_from_the_records(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    hf_reply_t a = reserve_held(fx, "rt1", "SKU-A", 2, 5000);
    hf_reply_t b = reserve_held(fx, "rt2", "SKU-A", 3, 20000);
    reserve_held(fx, "rt3", "SKU-A", 1, 0);
    hf_record_t c = commit_rec("rt3", "c", "pay");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    hf_record_t r = reserve_rec("rt4", "k", "SKU-A", 1, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    counters_apply(fx);
    drop_results(fx); /* rt4 waits for an answer that was lost */
    /* A late payment leaves a refund marker (raw bytes in the changelog), and an
     * older version logged its timers: neither may stop the restore, and the old
     * timer does not come back. */
    hf_reply_t late = reserve_held(fx, "rt5", "SKU-A", 1, 1000);
    fx->now_ms = late.expires_at_ms;
    fx_tick(fx);
    hf_record_t lc = commit_rec("rt5", "c", "pay-late");
    assert_int_equal(call(fx, &lc).outcome, HF_REPLY_EXPIRED);
    assert_int_equal(refund_markers(fx, "rt5"), 1);
    fx->now_ms = T0;
    char old_timer[GW_KEY_MAX];
    size_t old_len = gw_timer_key(old_timer, T0 + 1, GW_TIMER_EXPIRY, "rt-gone");
    fake_stage_changelog_raw(fx, fake_stage_partition_of("rt-gone"), old_timer, old_len, "t", 1);

    static char before[GW_TIMERS_SEEN_MAX][GW_KEY_MAX], after[GW_TIMERS_SEEN_MAX][GW_KEY_MAX];
    size_t nb = timer_keys(fx, before);
    fake_stage_restore(fx, gateway_stage());
    size_t na = timer_keys(fx, after);
    assert_true(na > 0);
    for (size_t i = 0; i < na; i++) { /* restore invents no timer */
        bool found = false;
        for (size_t j = 0; j < nb && !found; j++)
            found = memcmp(after[i], before[j], GW_KEY_MAX) == 0;
        if (!found) {
            int64_t due = 0;
            char kind = 0, ref[GW_KEY_MAX];
            uint16_t klen = 0;
            memcpy(&klen, after[i] + GW_KEY_MAX - 4, sizeof klen);
            assert_true(gw_timer_parse(after[i] + 1, klen, &due, &kind, ref, sizeof ref));
            fail_msg("restore armed a timer the handlers never did: %c %s at T0%+lld", kind, ref,
                     (long long)(due - T0));
        }
    }

    size_t from = fx->emits_count;
    fx->now_ms = T0 + RESULT_TIMEOUT_MS;
    fx_tick(fx);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 1); /* rt4 asked again */
    fx->now_ms = a.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "rt1").status, HF_RES_EXPIRED);
    assert_int_equal(load_rs(fx, "rt2").status, HF_RES_HELD);
    fx->now_ms = b.expires_at_ms;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "rt2").status, HF_RES_EXPIRED);
    fx->now_ms = T0 + RETENTION_MS + 1;
    fx_tick(fx);
    assert_false(idem_exists(fx, "rt3", "c"));
    fx->now_ms = T0 + RES_RETENTION_MS + 1;
    fx_tick(fx);
    hf_reservation_state_t gone;
    fx->partition = fake_stage_partition_of("rt3");
    assert_int_equal(gw_load(fx, "rt3", &gone), HF_ERR_NOTFOUND);
    fx->now_ms = late.expires_at_ms + RES_RETENTION_MS + 1; /* rt5 ended at its expiry */
    fx_tick(fx);
    assert_int_equal(refund_markers(fx, "rt5"), 0); /* forgotten with its reservation */
}

static void test_sweeper_forgets_idempotency_records_after_retention(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    reserve_held(fx, "w5", "SKU-A", 1, 0);
    hf_record_t c = commit_rec("w5", "c", "pay");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    fx->now_ms = T0 + RETENTION_MS - 1;
    fx_tick(fx);
    assert_false(idem_exists(fx, "w5", "k")); /* a Reserve's answer is in its reservation */
    assert_true(load_rs(fx, "w5").reserve_replied);
    assert_true(idem_exists(fx, "w5", "c"));
    fx->now_ms = T0 + RETENTION_MS + 1;
    fx_tick(fx);
    assert_false(idem_exists(fx, "w5", "c"));
    /* A restore replays the record and then its tombstone: the replaced value's
     * retention timer goes with it, none is left behind to fire again. */
    fake_stage_restore(fx, gateway_stage());
    static char timers[GW_TIMERS_SEEN_MAX][GW_KEY_MAX];
    size_t n = timer_keys(fx, timers);
    for (size_t i = 0; i < n; i++) {
        int64_t due = 0;
        char kind = 0, ref[GW_KEY_MAX];
        uint16_t klen = 0;
        memcpy(&klen, timers[i] + GW_KEY_MAX - 4, sizeof klen);
        assert_true(gw_timer_parse(timers[i] + 1, klen, &due, &kind, ref, sizeof ref));
        if (kind == GW_TIMER_IDEMPOTENCY && strcmp(ref, "w5|c") == 0)
            fail_msg("restore left the retention timer of forgotten idempotency record w5|c");
    }
    assert_int_equal(load_rs(fx, "w5").status, HF_RES_COMMITTED); /* the reservation stays */
    /* ... and with it the Reserve's answer, as long as the reservation. */
    hf_record_t r = reserve_rec("w5", "k", "SKU-A", 1, 0);
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_HELD);
    /* A retry after retention still cannot commit twice. */
    size_t from = fx->emits_count;
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 0);
}

/* ======================================================================
 * Stock shortfall
 * ====================================================================== */

static void
test_shortfall_of_a_held_reservation_releases_all_its_holds_as_stock_shortfall(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    stock(fx, "SKU-B", plenty, 6);
    const char *skus[] = {"SKU-A", "SKU-B"};
    const int64_t qtys[] = {2, 3};
    hf_record_t r = reserve_lines("f1", "k", skus, qtys, 2, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    assert_int_equal(load_rs(fx, "f1").status, HF_RES_HELD);
    size_t from = fx->emits_count;
    revoke_hold(fx, "f1", "W1", "SKU-A");
    deliver_results(fx);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 2);
    hf_reservation_state_t rs = load_rs(fx, "f1");
    assert_int_equal(rs.status, HF_RES_RELEASED);
    assert_string_equal(rs.reason, "stock_shortfall");
    hf_ledger_event_t e = last_ledger(fx, "f1", HF_LEDGER_RELEASED);
    assert_string_equal(e.reason, "stock_shortfall");
    assert_int_equal(e.allocations_count, 2);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A") + reserved_total(fx, "SKU-B"), 0);
    /* A repeated SHORTFALL changes nothing. */
    from = fx->emits_count;
    m_result(fx, "f1", 0, "W1", "SKU-A", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 2, 0);
    deliver_results(fx);
    assert_int_equal(fx->emits_count, from);
}

static void
test_shortfall_while_pending_releases_the_whole_reservation_as_stock_shortfall(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    stock(fx, "SKU-B", plenty, 6);
    const char *skus[] = {"SKU-A", "SKU-B"};
    const int64_t qtys[] = {2, 3};
    hf_record_t r = reserve_lines("f2", "k", skus, qtys, 2, 0);
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    counters_apply(fx);
    /* SKU-A's OK arrives, then its hold is revoked, before SKU-B's answer. */
    hf_counter_result_t b_answer = fx->user->results[1];
    fx->user->results_count = 1;
    deliver_results(fx);
    revoke_hold(fx, "f2", "W1", "SKU-A");
    deliver_results(fx);
    hf_reservation_state_t rs = load_rs(fx, "f2");
    assert_int_equal(rs.status, HF_RES_RELEASED);
    assert_string_equal(rs.reason, "stock_shortfall");
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_RELEASED);
    assert_non_null(strstr(rep.message, "stock_shortfall"));
    assert_int_equal(ledger_count(fx, from, "f2", HF_LEDGER_RELEASED), 1);
    assert_string_equal(last_ledger(fx, "f2", HF_LEDGER_RELEASED).reason, "stock_shortfall");
    assert_int_equal(ledger_count(fx, from, "f2", HF_LEDGER_HELD), 0);
    /* SKU-B's late OK: its hold was released too; nothing else happens. */
    fx->user->results[fx->user->results_count++] = b_answer;
    deliver_results(fx);
    settle(fx);
    assert_int_equal(replies_since(fx, from), 1);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 2); /* no re-route */
    assert_int_equal(reserved_total(fx, "SKU-A") + reserved_total(fx, "SKU-B"), 0);
    assert_int_equal(call(fx, &r).outcome, HF_REPLY_RELEASED); /* the stored answer */
}

static void
test_commit_racing_a_shortfall_ends_released_and_flags_the_payment_for_refund(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "f3", "SKU-A", 2, 0);
    /* The count revokes the hold; the gateway commits before it hears of it. */
    revoke_hold(fx, "f3", "W1", "SKU-A");
    hf_counter_result_t shortfall = fx->user->results[0];
    drop_results(fx);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("f3", "c", "pay-1");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    counters_apply(fx); /* the counter answers the CommitHold REVOKED */
    assert_int_equal(fx->user->results[0].outcome, HF_OUTCOME_REVOKED);
    fx->user->results[fx->user->results_count++] = shortfall;
    settle(fx);
    hf_reservation_state_t rs = load_rs(fx, "f3");
    assert_int_equal(rs.status, HF_RES_RELEASED);
    assert_string_equal(rs.reason, "stock_shortfall");
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(m_pair(fx, "W1", "SKU-A")->committed, 0);
    assert_string_equal(last_ledger(fx, "f3", HF_LEDGER_RELEASED).reason, "stock_shortfall");
    hf_ledger_event_t refund = last_ledger(fx, "f3", HF_LEDGER_LATE_PAYMENT);
    assert_string_equal(refund.reason, "refund");
    assert_string_equal(refund.payment_id, "pay-1");
    assert_int_equal(ledger_count(fx, from, "f3", HF_LEDGER_LATE_PAYMENT), 1);
    assert_int_equal(ledger_count(fx, from, "f3", HF_LEDGER_RELEASED), 1);
    /* The same webhook under another key: no second refund, no commit. */
    hf_record_t c2 = commit_rec("f3", "c2", "pay-1");
    assert_int_equal(call(fx, &c2).outcome, HF_REPLY_CONFLICT);
    assert_int_equal(ledger_count(fx, from, "f3", HF_LEDGER_LATE_PAYMENT), 1);
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 1);
}

static void test_commit_revoked_by_the_counter_alone_also_ends_released_with_a_refund(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "f4", "SKU-A", 2, 0);
    revoke_hold(fx, "f4", "W1", "SKU-A");
    drop_results(fx); /* only the REVOKED answer to the commit arrives first */
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("f4", "c", "pay-1");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    settle(fx);
    assert_int_equal(load_rs(fx, "f4").status, HF_RES_RELEASED);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
    assert_int_equal(ledger_count(fx, from, "f4", HF_LEDGER_LATE_PAYMENT), 1);
    /* The SHORTFALL arriving after changes nothing. */
    size_t after = fx->emits_count;
    m_result(fx, "f4", 0, "W1", "SKU-A", HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, 2, 0);
    deliver_results(fx);
    assert_int_equal(fx->emits_count, after);
}

static void
test_commit_after_a_shortfall_release_is_conflict_and_flags_the_payment_for_refund(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "f5", "SKU-A", 2, 0);
    revoke_hold(fx, "f5", "W1", "SKU-A");
    settle(fx);
    assert_int_equal(load_rs(fx, "f5").status, HF_RES_RELEASED);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("f5", "c", "pay-1");
    hf_reply_t rep = call(fx, &c);
    assert_int_equal(rep.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(rep.message, "stock_shortfall"));
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 0);
    hf_ledger_event_t refund = last_ledger(fx, "f5", HF_LEDGER_LATE_PAYMENT);
    assert_string_equal(refund.payment_id, "pay-1");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_CONFLICT);
    assert_int_equal(ledger_count(fx, from, "f5", HF_LEDGER_LATE_PAYMENT), 1);
    /* A release by the shopper is not a refund case. */
    reserve_held(fx, "f6", "SKU-A", 1, 0);
    hf_record_t x = release_rec("f6", "x");
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_RELEASED);
    from = fx->emits_count;
    hf_record_t c6 = commit_rec("f6", "c", "pay-6");
    assert_int_equal(call(fx, &c6).outcome, HF_REPLY_CONFLICT);
    assert_int_equal(ledger_total(fx, from, "f6"), 0);
    /* The refund marker goes with its reservation when the retention ends. */
    assert_int_equal(refund_markers(fx, "f5"), 1);
    fx->now_ms += RES_RETENTION_MS + 1;
    fx_tick(fx);
    hf_reservation_state_t gone;
    fx->partition = fake_stage_partition_of("f5");
    assert_int_equal(gw_load(fx, "f5", &gone), HF_ERR_NOTFOUND);
    assert_int_equal(refund_markers(fx, "f5"), 0);
}

/* ======================================================================
 * Extension
 * ====================================================================== */

static void test_extension_is_capped_at_the_max_total_hold_time(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    hf_reply_t held = reserve_held(fx, "e1", "SKU-A", 1, 10000);
    assert_int_equal(held.expires_at_ms, T0 + 10000);
    hf_record_t x1 = extend_rec("e1", "x1", 4000);
    hf_reply_t a = call(fx, &x1);
    assert_int_equal(a.outcome, HF_REPLY_HELD);
    assert_int_equal(a.expires_at_ms, T0 + 14000);
    hf_record_t x2 = extend_rec("e1", "x2", 60000);
    hf_reply_t b = call(fx, &x2);
    assert_int_equal(b.outcome, HF_REPLY_HELD);
    assert_int_equal(b.expires_at_ms, T0 + 20000); /* 200% of the TTL from creation */
    assert_non_null(strstr(b.message, "maximum hold time"));
    hf_record_t x3 = extend_rec("e1", "x3", 1000);
    assert_int_equal(call(fx, &x3).expires_at_ms, T0 + 20000);
    /* The old expiry timers fire harmlessly; the new one expires it. */
    size_t from = fx->emits_count;
    fx->now_ms = T0 + 14000;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "e1").status, HF_RES_HELD);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 0);
    fx->now_ms = T0 + 20000;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "e1").status, HF_RES_EXPIRED);
    hf_record_t x4 = extend_rec("e1", "x4", 1000);
    assert_int_equal(call(fx, &x4).outcome, HF_REPLY_EXPIRED);
}

/* ======================================================================
 * Two hops: the counter answers a reservation its one hold covers (park.c)
 * ====================================================================== */

/* A single-line reserve routed whole to one warehouse, with counter answers
 * on; returns where its emits started. */
static size_t reserve_answered_by_counter(stage_ctx_t *fx, const char *rid, int64_t qty)
{
    fx->user->env.counter_answers = true;
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec(rid, "k", "SKU-A", qty, 60000);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    return from;
}

/* The API key a Reserve came with (Reserve.api_key_id, set by the HTTP front)
 * stays with the reservation: it names each of its ledger events, the gateway's
 * HELD and COMMITTED alike, and travels on a Hold that asks its counter to
 * answer (the counter's HELD event copies it from there). */
static void test_the_reserves_api_key_id_names_each_ledger_event_and_rides_the_hold(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    hf_record_t r = reserve_rec("ak1", "k", "SKU-A", 2, 60000);
    snprintf(r.u.reserve.api_key_id, sizeof r.u.reserve.api_key_id, "checkout-web");
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    assert_string_equal(load_rs(fx, "ak1").api_key_id, "checkout-web");
    assert_string_equal(last_ledger(fx, "ak1", HF_LEDGER_HELD).api_key_id, "checkout-web");
    hf_record_t c = commit_rec("ak1", "c1", "pay-1");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    assert_string_equal(last_ledger(fx, "ak1", HF_LEDGER_COMMITTED).api_key_id, "checkout-web");
    /* A Reserve without a key: an empty one, not a neighbour's. */
    reserve_held(fx, "ak0", "SKU-A", 1, 60000);
    assert_string_equal(last_ledger(fx, "ak0", HF_LEDGER_HELD).api_key_id, "");

    fx->user->env.counter_answers = true;
    size_t from = fx->emits_count;
    r = reserve_rec("ak2", "k", "SKU-A", 1, 60000);
    snprintf(r.u.reserve.api_key_id, sizeof r.u.reserve.api_key_id, "storefront");
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    hf_hold_t h = nth_hold(fx, from, 0);
    assert_true(h.answer_reserve);
    assert_string_equal(h.api_key_id, "storefront");
}

/* The Reserve's timestamp on holdfast.requests stays with the reservation
 * (requested_at_ms: where the latency of an answer in a later transaction
 * starts) and rides the Hold that asks its counter to answer; a Reserve with no
 * timestamp keeps 0, unknown, never the gateway's clock. */
static void
test_the_reserves_request_timestamp_stays_with_the_reservation_and_rides_the_hold(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    int64_t appended_ms = fx->now_ms - 400;
    fx->record_timestamp_ms = appended_ms;
    size_t from = reserve_answered_by_counter(fx, "rq1", 1);
    hf_hold_t h = nth_hold(fx, from, 0);
    assert_true(h.answer_reserve);
    assert_int_equal(h.requested_at_ms, appended_ms);
    hf_reservation_state_t rs = load_rs(fx, "rq1");
    assert_int_equal(rs.requested_at_ms, appended_ms);
    assert_int_equal(rs.created_at_ms, fx->now_ms);
    fx->record_timestamp_ms = 0;
    from = reserve_answered_by_counter(fx, "rq0", 1);
    assert_int_equal(nth_hold(fx, from, 0).requested_at_ms, 0);
    assert_int_equal(load_rs(fx, "rq0").requested_at_ms, 0);
}

static void
test_a_one_hold_reserve_asks_its_counter_to_answer_and_the_gateway_stays_silent(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    size_t from = reserve_answered_by_counter(fx, "c1", 2);
    assert_int_equal(replies_since(fx, from), 0);
    hf_hold_t h = nth_hold(fx, from, 0);
    assert_true(h.answer_reserve);
    assert_string_equal(h.idempotency_key, "k");
    assert_string_equal(h.reply_to, "");
    assert_int_equal(h.expires_at_ms, T0 + 60000);
    assert_true(load_rs(fx, "c1").counter_answers);
    /* The result makes it HELD with the answer recorded, nothing said twice:
     * the counter emitted the reply and the ledger's HELD event. */
    size_t mid = fx->emits_count;
    fx->now_ms += 7; /* the counter holds, and answers, then */
    counters_apply(fx);
    fx->now_ms += 13; /* the gateway takes the result later */
    settle(fx);
    hf_reservation_state_t rs = load_rs(fx, "c1");
    assert_int_equal(rs.status, HF_RES_HELD);
    assert_true(rs.reserve_replied);
    assert_int_equal(rs.reserve_reply.outcome, HF_REPLY_HELD);
    assert_int_equal(rs.reserve_reply.allocations_count, 1);
    assert_int_equal(rs.reserve_reply.allocations[0].qty, 2);
    assert_int_equal(rs.reserve_reply.expires_at_ms, T0 + 60000);
    assert_int_equal(replies_since(fx, mid), 0);
    assert_int_equal(ledger_total(fx, from, "c1"), 0);
    /* A retry of the Reserve now gets that answer from the gateway. */
    hf_record_t again = reserve_rec("c1", "k", "SKU-A", 2, 60000);
    hf_reply_t rep = call(fx, &again);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    assert_string_equal(rep.allocations[0].warehouse_id, h.warehouse_id);
    assert_int_equal(rep.replied_at_ms, T0 + 7); /* as the counter's reply said */
}

static void test_a_commit_that_overtakes_the_counters_answer_waits_and_commits_with_it(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    size_t from = reserve_answered_by_counter(fx, "c2", 1);
    counters_apply(fx); /* the counter held it and told the shopper; its result is on its way */
    hf_record_t c = commit_rec("c2", "pay", "pay-2");
    size_t before = fx->emits_count;
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    assert_int_equal(replies_since(fx, before), 0); /* parked: not CONFLICT, not NOT_FOUND */
    assert_int_equal(load_rs(fx, "c2").status, HF_RES_PENDING);
    before = fx->emits_count;
    deliver_results(fx); /* the result, and the parked commit in its transaction */
    hf_reply_t rep = one_reply(fx, before);
    assert_int_equal(rep.outcome, HF_REPLY_COMMITTED);
    assert_string_equal(rep.idempotency_key, "pay");
    assert_int_equal(commands_since(fx, before, HF_REC_COMMIT_HOLD), 1);
    assert_int_equal(ledger_count(fx, from, "c2", HF_LEDGER_COMMITTED), 1);
    assert_int_equal(ledger_count(fx, from, "c2", HF_LEDGER_HELD), 0); /* the counter's */
    settle(fx);
    assert_int_equal(load_rs(fx, "c2").status, HF_RES_COMMITTED);
    assert_int_equal(committed_total(fx, "SKU-A"), 1);
    /* The same webhook again: the stored answer, once. */
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
}

static void test_requests_parked_before_the_counters_answer_are_applied_in_order(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_answered_by_counter(fx, "c3", 1);
    counters_apply(fx);
    hf_record_t retry = reserve_rec("c3", "k", "SKU-A", 1, 60000);
    hf_record_t x = extend_rec("c3", "x", 30000);
    hf_record_t rel = release_rec("c3", "rel");
    size_t before = fx->emits_count;
    assert_int_equal(fx_apply(fx, &retry), HF_OK);
    assert_int_equal(fx_apply(fx, &x), HF_OK);
    assert_int_equal(fx_apply(fx, &rel), HF_OK);
    assert_int_equal(replies_since(fx, before), 0);
    deliver_results(fx);
    /* In the order they came: the retry's HELD, the extension, the release. */
    hf_reply_t got[3];
    memset(got, 0, sizeof got);
    size_t n = 0;
    for (size_t i = before; i < fx->emits_count && n < 3; i++)
        if (fx->emits[i].topic_id == -1 && fx->emits[i].rec.type == HF_REC_REPLY)
            got[n++] = fx->emits[i].rec.u.reply;
    assert_int_equal(n, 3);
    assert_int_equal(got[0].outcome, HF_REPLY_HELD);
    assert_string_equal(got[0].idempotency_key, "k");
    assert_int_equal(got[1].outcome, HF_REPLY_HELD);
    assert_int_equal(got[1].expires_at_ms, T0 + 90000);
    assert_int_equal(got[2].outcome, HF_REPLY_RELEASED);
    assert_int_equal(replies_since(fx, before), 3);
    settle(fx);
    assert_int_equal(load_rs(fx, "c3").status, HF_RES_RELEASED);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

static void test_past_the_parking_slots_a_commit_is_told_busy_and_its_retry_commits(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_answered_by_counter(fx, "c4", 1);
    for (int i = 0; i < GW_PARKED_MAX; i++) {
        char key[16];
        snprintf(key, sizeof key, "x%d", i);
        hf_record_t x = extend_rec("c4", key, 1000);
        size_t before = fx->emits_count;
        assert_int_equal(fx_apply(fx, &x), HF_OK);
        assert_int_equal(replies_since(fx, before), 0);
    }
    hf_record_t c = commit_rec("c4", "pay", "pay-4");
    hf_reply_t rep = call(fx, &c);
    assert_int_equal(rep.outcome, HF_REPLY_BUSY); /* never an answer that could contradict */
    assert_non_null(strstr(rep.message, "on its way from its counter"));
    hf_record_t rel = release_rec("c4", "rel");
    assert_int_equal(call(fx, &rel).outcome, HF_REPLY_BUSY); /* not RELEASED behind its back */
    assert_int_equal(load_rs(fx, "c4").status, HF_RES_PENDING);
    settle(fx);
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED); /* the client's retry */
}

static void
test_a_refused_hold_the_counter_would_have_answered_is_rerouted_and_answered_here(void **state)
{
    stage_ctx_t *fx = *state;
    static const int64_t view_says[6] = {5, 100, 100, 100, 100, 100};
    stock(fx, "SKU-A", view_says, 6);
    m_pair(fx, wh_table[0].id, "SKU-A")->available = 0; /* the view is behind: W1 is empty */
    size_t from = reserve_answered_by_counter(fx, "c5", 3);
    assert_string_equal(nth_hold(fx, from, 0).warehouse_id, wh_table[0].id);
    hf_record_t early = commit_rec("c5", "pay", "pay-5");
    counters_apply(fx);
    assert_int_equal(fx_apply(fx, &early), HF_OK); /* parked until the refusal arrives */
    settle(fx);
    hf_reply_t rep = {0};
    size_t n = 0;
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].topic_id == -1 && fx->emits[i].rec.type == HF_REC_REPLY &&
            strcmp(fx->emits[i].rec.u.reply.idempotency_key, "k") == 0) {
            rep = fx->emits[i].rec.u.reply;
            n++;
        }
    assert_int_equal(n, 1); /* the gateway answered, once, after re-routing */
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    assert_string_not_equal(rep.allocations[0].warehouse_id, wh_table[0].id);
    assert_int_equal(ledger_count(fx, from, "c5", HF_LEDGER_HELD), 1);
    assert_false(nth_hold(fx, from, 1).answer_reserve); /* the re-route's hold */
    /* The commit that came early was told the reservation was not held yet. */
    assert_int_equal(call(fx, &early).outcome, HF_REPLY_COMMITTED);
}

static void test_a_multi_line_reserve_is_answered_by_the_gateway(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    stock(fx, "SKU-B", plenty, 6);
    fx->user->env.counter_answers = true;
    const char *skus[2] = {"SKU-A", "SKU-B"};
    const int64_t qtys[2] = {1, 1};
    size_t from = fx->emits_count;
    hf_record_t r = reserve_lines("c6", "k", skus, qtys, 2, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    assert_false(nth_hold(fx, from, 0).answer_reserve);
    assert_false(nth_hold(fx, from, 1).answer_reserve);
    assert_false(load_rs(fx, "c6").counter_answers);
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    assert_int_equal(ledger_count(fx, from, "c6", HF_LEDGER_HELD), 1);
}

static void test_a_reservation_its_counter_may_have_answered_is_never_rolled_back(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    size_t from = reserve_answered_by_counter(fx, "c7", 1);
    for (int i = 0; i < 60; i++) { /* far past the rollback of an ordinary reserve */
        fx->now_ms += 5000;
        counters_apply(fx);
        drop_results(fx);
        fx_tick(fx);
    }
    assert_int_equal(load_rs(fx, "c7").status, HF_RES_PENDING);
    assert_int_equal(replies_since(fx, from), 0);
    assert_true(commands_since(fx, from, HF_REC_HOLD) > 1 + HF_RESULT_RETRIES_MAX);
    assert_true(nth_hold(fx, from, 3).answer_reserve); /* a resend asks the same */
    fx->now_ms += 60000; /* the counter is back: the next repeat's result arrives */
    fx_tick(fx);
    settle(fx);
    assert_int_equal(load_rs(fx, "c7").status, HF_RES_HELD);
    assert_int_equal(reserved_total(fx, "SKU-A"), 1);
}

/* ======================================================================
 * Where a reservation may be held: only_warehouses, stores (route.c)
 * ====================================================================== */

/* Every Hold emitted since from goes to warehouse wh. */
static void holds_only_at(const stage_ctx_t *fx, size_t from, const char *wh)
{
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].topic_id == HF_T_COUNTER_COMMANDS &&
            fx->emits[i].rec.type == HF_REC_HOLD &&
            strcmp(fx->emits[i].rec.u.hold.warehouse_id, wh) != 0)
            fail_msg("a Hold went to %s, not %s", fx->emits[i].rec.u.hold.warehouse_id, wh);
}

/* W6 (Seattle) is a store: a shopper in Seattle is never served from its shelf
 * unless the reservation names it (pick-up); a pick-up holds there alone, and
 * when the store runs out it is refused, never routed elsewhere (not even by
 * the saga's re-route after the counter's refusal). */
static void test_a_pick_up_holds_at_its_store_alone_and_a_store_serves_nobody_else(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->env.routes.warehouses[5].store = true;
    const int64_t five[6] = {5, 5, 5, 5, 5, 5};
    stock(fx, "SKU-A", five, 6);
    size_t from = fx->emits_count;
    hf_record_t near = reserve_rec("s1", "k", "SKU-A", 1, 0);
    near.u.reserve.ship_to = (hf_geo_t){47.61, -122.33}; /* at the store's door */
    assert_int_equal(fx_apply(fx, &near), HF_OK);
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_HELD);
    assert_int_equal(commands_since(fx, from, HF_REC_HOLD), 1);
    assert_string_not_equal(nth_hold(fx, from, 0).warehouse_id, "W6");

    from = fx->emits_count;
    hf_record_t pick = reserve_rec("s2", "k", "SKU-A", 2, 0);
    pick.u.reserve.only_warehouses_count = 1;
    snprintf(pick.u.reserve.only_warehouses[0].warehouse_id,
             sizeof pick.u.reserve.only_warehouses[0].warehouse_id, "W6");
    assert_int_equal(fx_apply(fx, &pick), HF_OK);
    settle(fx);
    hf_reply_t held = one_reply(fx, from);
    assert_int_equal(held.outcome, HF_REPLY_HELD);
    assert_int_equal(held.allocations_count, 1);
    assert_string_equal(held.allocations[0].warehouse_id, "W6");
    holds_only_at(fx, from, "W6");
    assert_int_equal(load_rs(fx, "s2").only_warehouses_count, 1);

    /* The view still says 5 at W6; the counter has 3: its refusal is not
     * routed around, though W1..W5 have plenty. */
    from = fx->emits_count;
    hf_record_t more = reserve_rec("s3", "k", "SKU-A", 4, 0);
    more.u.reserve.only_warehouses[0] = pick.u.reserve.only_warehouses[0];
    more.u.reserve.only_warehouses_count = 1;
    assert_int_equal(fx_apply(fx, &more), HF_OK);
    settle(fx);
    hf_reply_t refused = one_reply(fx, from);
    assert_int_equal(refused.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    holds_only_at(fx, from, "W6");
    assert_int_equal(load_rs(fx, "s3").status, HF_RES_REJECTED);
    assert_int_equal(reserved_total(fx, "SKU-A"), 3); /* s1's 1 and s2's 2 */

    hf_record_t unknown = reserve_rec("s4", "k", "SKU-A", 1, 0);
    unknown.u.reserve.only_warehouses_count = 1;
    snprintf(unknown.u.reserve.only_warehouses[0].warehouse_id,
             sizeof unknown.u.reserve.only_warehouses[0].warehouse_id, "W9");
    expect_invalid(fx, &unknown, "only_warehouses: \"W9\" is not in the warehouses file");
    hf_record_t twice = reserve_rec("s5", "k", "SKU-A", 1, 0);
    twice.u.reserve.only_warehouses_count = 2;
    snprintf(twice.u.reserve.only_warehouses[0].warehouse_id,
             sizeof twice.u.reserve.only_warehouses[0].warehouse_id, "W2");
    twice.u.reserve.only_warehouses[1] = twice.u.reserve.only_warehouses[0];
    expect_invalid(fx, &twice, "only_warehouses: W2 is named twice");
    fx->user->env.routes.warehouses[5].store = false;
}

/* A SKU with a ship-from list (ship_from_file) ships from those warehouses
 * alone: a Manhattan shopper's hazardous item comes from Los Angeles (W3), and
 * when W3 runs out the shopper is refused, though W1 next door has plenty. */
static void test_a_ship_from_list_bounds_where_a_sku_is_held(void **state)
{
    stage_ctx_t *fx = *state;
    const char *path = "/tmp/hf_gw_ship_from.txt";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("SKU-H W3\n", f);
    fclose(f);
    char errstr[256];
    assert_int_equal(ship_from_load(path, &fx->user->env.routes, &fx->user->env.ship_from, errstr,
                                    sizeof errstr),
                     HF_OK);
    remove(path);
    const int64_t avail[6] = {50, 50, 2, 50, 50, 50};
    stock(fx, "SKU-H", avail, 6);
    size_t from = fx->emits_count;
    hf_record_t r = reserve_rec("h1", "k", "SKU-H", 2, 0);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    hf_reply_t held = one_reply(fx, from);
    assert_int_equal(held.outcome, HF_REPLY_HELD);
    assert_string_equal(held.allocations[0].warehouse_id, "W3");
    holds_only_at(fx, from, "W3");
    from = fx->emits_count;
    hf_record_t r2 = reserve_rec("h2", "k", "SKU-H", 1, 0);
    assert_int_equal(fx_apply(fx, &r2), HF_OK); /* the view still says 2 at W3 */
    settle(fx);
    hf_reply_t refused = one_reply(fx, from);
    assert_int_equal(refused.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    holds_only_at(fx, from, "W3");
    /* Routing knew it before any Hold: no hint of stock elsewhere is used. */
    hf_record_t r3 = reserve_rec("h3", "k", "SKU-H", 5, 0);
    hf_reply_t no = call(fx, &r3);
    assert_int_equal(no.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_non_null(strstr(no.message, "not available at the warehouses it ships from"));
    gateway_env_release(&fx->user->env);
}

/* A late payment's re-reservation re-asks the warehouses its expired holds
 * were at only while the rules still allow them: after a ship-from list (or a
 * store) was configured, it routes afresh within the rules. */
static void test_a_late_payment_rereserves_within_todays_rules(void **state)
{
    stage_ctx_t *fx = *state;
    fx->user->env.late_policy = GW_LATE_RERESERVE;
    stock(fx, "SKU-H", plenty, 6);
    held_then_expired(fx, "lr1", "SKU-H", 2);
    assert_string_equal(load_rs(fx, "lr1").allocations[0].warehouse_id, "W1");
    const char *path = "/tmp/hf_gw_ship_from_late.txt";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("SKU-H W3\n", f);
    fclose(f);
    char errstr[256];
    assert_int_equal(ship_from_load(path, &fx->user->env.routes, &fx->user->env.ship_from, errstr,
                                    sizeof errstr),
                     HF_OK);
    remove(path);
    size_t from = fx->emits_count;
    hf_record_t c = commit_rec("lr1", "c", "pay-late");
    assert_int_equal(fx_apply(fx, &c), HF_OK);
    settle(fx);
    holds_only_at(fx, from, "W3");
    assert_true(commands_since(fx, from, HF_REC_HOLD) > 0);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_COMMITTED);
    assert_string_equal(rep.allocations[0].warehouse_id, "W3");
    gateway_env_release(&fx->user->env);
}

/* ======================================================================
 * Partial holds (allow_partial; saga.c)
 * ====================================================================== */

/* What the network has of each line is held, and only that: the reply is HELD
 * with it and says what was not; the reservation, its ledger event and the
 * counters agree on the held quantities; a line nothing is left of is dropped. */
static void test_a_partial_reserve_holds_what_the_network_has(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t three[6] = {2, 1, 0, 0, 0, 0}; /* SKU-P: 3 units in all */
    const int64_t none[6] = {0};
    stock(fx, "SKU-P", three, 6);
    stock(fx, "SKU-Q", plenty, 6);
    stock(fx, "SKU-Z", none, 6);
    const char *skus[] = {"SKU-P", "SKU-Q", "SKU-Z"};
    const int64_t qtys[] = {5, 2, 4};
    hf_record_t r = reserve_lines("pp1", "k", skus, qtys, 3, 0);
    r.u.reserve.allow_partial = true;
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    int64_t p = 0, q = 0;
    for (int32_t i = 0; i < rep.allocations_count; i++) {
        p += strcmp(rep.allocations[i].sku, "SKU-P") == 0 ? rep.allocations[i].qty : 0;
        q += strcmp(rep.allocations[i].sku, "SKU-Q") == 0 ? rep.allocations[i].qty : 0;
        assert_string_not_equal(rep.allocations[i].sku, "SKU-Z");
    }
    assert_int_equal(p, 3);
    assert_int_equal(q, 2);
    assert_non_null(strstr(rep.message, "partially held: SKU-P 3 of 5; SKU-Z 0 of 4;"));
    hf_reservation_state_t rs = load_rs(fx, "pp1");
    assert_int_equal(rs.lines_count, 2);
    assert_int_equal(rs.lines[0].qty, 3);
    assert_int_equal(rs.lines[1].qty, 2);
    hf_ledger_event_t e = last_ledger(fx, "pp1", HF_LEDGER_HELD);
    assert_int_equal(e.lines_count, 2);
    assert_string_equal(e.reason, rep.message);
    assert_int_equal(reserved_total(fx, "SKU-P"), 3);
    assert_int_equal(reserved_total(fx, "SKU-Q"), 2);
    /* Committed, it sells what was held. */
    hf_record_t c = commit_rec("pp1", "c", "pay-pp1");
    assert_int_equal(call(fx, &c).outcome, HF_REPLY_COMMITTED);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-P"), 0);
}

/* The view overstates: the counter refuses, the re-route finds less than is
 * missing, and the partial reserve keeps what the counters gave. Nothing of
 * any line: REJECTED_INSUFFICIENT, as a whole reserve would be. */
static void test_a_partial_reserve_keeps_what_the_counters_give(void **state)
{
    stage_ctx_t *fx = *state;
    const int64_t counters[6] = {2, 1, 0, 0, 0, 0};
    stock(fx, "SKU-P", counters, 6);
    const int64_t view[6] = {6, 1, 0, 0, 0, 0}; /* W1 is thought to have 6 */
    view_set(fx, "SKU-P", view, 6);
    hf_record_t r = reserve_rec("pp2", "k", "SKU-P", 5, 0);
    r.u.reserve.allow_partial = true;
    size_t from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    settle(fx);
    hf_reply_t rep = one_reply(fx, from);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    int64_t held = 0;
    for (int32_t i = 0; i < rep.allocations_count; i++)
        held += rep.allocations[i].qty;
    assert_int_equal(held, 3);
    assert_int_equal(reserved_total(fx, "SKU-P"), 3);
    assert_int_equal(load_rs(fx, "pp2").lines[0].qty, 3);
    assert_non_null(strstr(rep.message, "SKU-P 3 of 5"));

    const int64_t none[6] = {0};
    stock(fx, "SKU-Z", none, 6);
    hf_record_t z = reserve_rec("pp3", "k", "SKU-Z", 2, 0);
    z.u.reserve.allow_partial = true;
    assert_int_equal(call(fx, &z).outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    /* A whole reserve of the same is refused whole, and hashes otherwise. */
    hf_record_t whole = reserve_rec("pp4", "k", "SKU-P", 5, 0);
    from = fx->emits_count;
    assert_int_equal(fx_apply(fx, &whole), HF_OK);
    settle(fx);
    assert_int_equal(one_reply(fx, from).outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_int_equal(reserved_total(fx, "SKU-P"), 3);
    hf_record_t r_whole = r;
    r_whole.u.reserve.allow_partial = false;
    assert_true(gw_request_hash(&r) != gw_request_hash(&r_whole));
}

/* ======================================================================
 * Payment events (payment_event.c): the provider's news drives the hold
 * ====================================================================== */

/* A pending payment (3-D Secure, a bank transfer) keeps the hold past its TTL
 * and past the hold deadline an Extend may reach, up to the pending cap from
 * the reservation's creation; the expiry timer follows. */
static void test_a_pending_payment_extends_the_hold_and_stops_at_its_cap(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    reserve_held(fx, "p1", "SKU-A", 2, 60000); /* hold deadline T0 + 120 s */
    hf_record_t proc = payment_rec("p1", "evt-1", HF_PAY_PROCESSING, "");
    hf_reply_t a = call(fx, &proc);
    assert_int_equal(a.outcome, HF_REPLY_HELD);
    assert_int_equal(a.expires_at_ms, T0 + PENDING_EXTEND_MS);
    assert_int_equal(load_rs(fx, "p1").expires_at_ms, T0 + PENDING_EXTEND_MS);
    /* The TTL and the Extend deadline pass: still held. */
    size_t from = fx->emits_count;
    fx->now_ms = T0 + 5 * 60 * 1000;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "p1").status, HF_RES_HELD);
    hf_record_t act = payment_rec("p1", "evt-2", HF_PAY_REQUIRES_ACTION, "");
    fx->now_ms = T0 + 9 * 60 * 1000;
    assert_int_equal(call(fx, &act).expires_at_ms, T0 + 19 * 60 * 1000);
    fx->now_ms = T0 + 18 * 60 * 1000;
    hf_record_t act2 = payment_rec("p1", "evt-3", HF_PAY_PROCESSING, "");
    assert_int_equal(call(fx, &act2).expires_at_ms, T0 + 28 * 60 * 1000);
    fx->now_ms = T0 + 27 * 60 * 1000; /* wants T0 + 37 min: past the 30 min cap */
    hf_record_t act3 = payment_rec("p1", "evt-4", HF_PAY_REQUIRES_ACTION, "");
    hf_reply_t b = call(fx, &act3);
    assert_int_equal(b.outcome, HF_REPLY_HELD);
    assert_int_equal(b.expires_at_ms, T0 + PENDING_MAX_MS);
    assert_non_null(strstr(b.message, "payment_pending_max_ms"));
    /* The provider redelivers the first event: its first answer, no change. */
    assert_int_equal(call(fx, &proc).expires_at_ms, T0 + PENDING_EXTEND_MS);
    assert_int_equal(load_rs(fx, "p1").expires_at_ms, T0 + PENDING_MAX_MS);
    fx->now_ms = T0 + PENDING_MAX_MS - 1;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "p1").status, HF_RES_HELD);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 0);
    fx->now_ms = T0 + PENDING_MAX_MS;
    fx_tick(fx);
    assert_int_equal(load_rs(fx, "p1").status, HF_RES_EXPIRED);
    assert_int_equal(ledger_count(fx, from, "p1", HF_LEDGER_EXPIRED), 1);
    hf_record_t again = payment_rec("p1", "evt-5", HF_PAY_PROCESSING, "");
    assert_int_equal(call(fx, &again).outcome, HF_REPLY_EXPIRED);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

/* A canceled payment frees the units in the transaction that applies it; the
 * ledger's RELEASED event says why, with the provider's reason. */
static void test_a_canceled_payment_releases_at_once_and_the_ledger_says_why(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "p2", "SKU-A", 3, 0);
    size_t from = fx->emits_count;
    hf_record_t cxl = payment_rec("p2", "evt-c", HF_PAY_CANCELED, "abandoned_at_3ds");
    assert_int_equal(call(fx, &cxl).outcome, HF_REPLY_RELEASED);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    hf_ledger_event_t e = last_ledger(fx, "p2", HF_LEDGER_RELEASED);
    assert_string_equal(e.reason, "payment_canceled: abandoned_at_3ds");
    assert_int_equal(e.allocations_count, 1);
    assert_int_equal(e.allocations[0].qty, 3);
    assert_int_equal(call(fx, &cxl).outcome, HF_REPLY_RELEASED); /* redelivered */
    assert_int_equal(ledger_total(fx, from, "p2"), 1);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

/* payment.failed is not final for most providers: by default the hold stays
 * as it was and another card may still pay; with failed=release it goes at
 * once. */
static void test_a_failed_payment_keeps_the_hold_unless_the_policy_releases(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    hf_reply_t held = reserve_held(fx, "p3", "SKU-A", 1, 60000);
    size_t from = fx->emits_count;
    hf_record_t fail = payment_rec("p3", "evt-f", HF_PAY_FAILED, "card_declined");
    hf_reply_t a = call(fx, &fail);
    assert_int_equal(a.outcome, HF_REPLY_HELD);
    assert_int_equal(a.expires_at_ms, held.expires_at_ms);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 0);
    assert_int_equal(ledger_total(fx, from, "p3"), 0);
    hf_record_t paid = payment_rec("p3", "evt-s", HF_PAY_SUCCEEDED, "");
    assert_int_equal(call(fx, &paid).outcome, HF_REPLY_COMMITTED);
    assert_string_equal(last_ledger(fx, "p3", HF_LEDGER_COMMITTED).payment_id, "pay-p3");

    char errstr[256];
    assert_int_equal(
        gateway_parse_payment_policy("failed=release", &fx->user->env, errstr, sizeof errstr),
        HF_OK);
    reserve_held(fx, "p4", "SKU-A", 1, 60000);
    from = fx->emits_count;
    hf_record_t fail4 = payment_rec("p4", "evt-f", HF_PAY_FAILED, "");
    assert_int_equal(call(fx, &fail4).outcome, HF_REPLY_RELEASED);
    assert_string_equal(last_ledger(fx, "p4", HF_LEDGER_RELEASED).reason, "payment_failed");
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 1);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

/* Events that come out of order never move a terminal state: after the sale a
 * failure, a cancellation or a pending event is answered COMMITTED and sends
 * nothing; after a cancellation a late success is not a sale. */
static void test_payment_events_out_of_order_never_undo_a_terminal_state(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "p5", "SKU-A", 1, 0);
    hf_record_t paid = payment_rec("p5", "evt-1", HF_PAY_SUCCEEDED, "");
    assert_int_equal(call(fx, &paid).outcome, HF_REPLY_COMMITTED);
    size_t from = fx->emits_count;
    const hf_payment_event_kind_t late[] = {HF_PAY_FAILED, HF_PAY_CANCELED, HF_PAY_PROCESSING,
                                            HF_PAY_REQUIRES_ACTION};
    for (size_t i = 0; i < sizeof late / sizeof late[0]; i++) {
        char id[16];
        snprintf(id, sizeof id, "evt-l%zu", i);
        hf_record_t ev = payment_rec("p5", id, late[i], "");
        hf_reply_t rep = call(fx, &ev);
        assert_int_equal(rep.outcome, HF_REPLY_COMMITTED);
        assert_non_null(strstr(rep.message, "does not change it"));
    }
    assert_int_equal(load_rs(fx, "p5").status, HF_RES_COMMITTED);
    assert_int_equal(commands_since(fx, from, HF_REC_RELEASE_HOLD), 0);
    assert_int_equal(ledger_total(fx, from, "p5"), 0);

    reserve_held(fx, "p6", "SKU-A", 1, 0);
    hf_record_t cxl = payment_rec("p6", "evt-1", HF_PAY_CANCELED, "");
    assert_int_equal(call(fx, &cxl).outcome, HF_REPLY_RELEASED);
    from = fx->emits_count;
    /* The shopper paid after all: no sale, the payment flagged for refund (a
     * LATE_PAYMENT event, once), whichever road it came by. */
    hf_record_t paid6 = payment_rec("p6", "evt-2", HF_PAY_SUCCEEDED, "");
    hf_reply_t paid_late = call(fx, &paid6);
    assert_int_equal(paid_late.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(paid_late.message, "payment flagged for refund"));
    hf_record_t again6 = commit_rec("p6", "evt-2", "pay-p6"); /* the webhook's Commit */
    assert_int_equal(call(fx, &again6).outcome, HF_REPLY_CONFLICT);
    assert_string_equal(call(fx, &again6).message, paid_late.message); /* the first answer */
    hf_record_t proc6 = payment_rec("p6", "evt-3", HF_PAY_PROCESSING, "");
    assert_int_equal(call(fx, &proc6).outcome, HF_REPLY_RELEASED);
    assert_int_equal(load_rs(fx, "p6").status, HF_RES_RELEASED);
    assert_int_equal(commands_since(fx, from, HF_REC_COMMIT_HOLD), 0);
    assert_int_equal(ledger_count(fx, from, "p6", HF_LEDGER_LATE_PAYMENT), 1);
    assert_string_equal(last_ledger(fx, "p6", HF_LEDGER_LATE_PAYMENT).reason, "refund");
    assert_int_equal(ledger_total(fx, from, "p6"), 1);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

/* Before the holds are in: a cancellation releases what was asked for (and
 * answers the Reserve); a pending event is BUSY and not kept, so the
 * provider's retry once HELD extends. */
static void test_a_payment_event_for_a_pending_reservation(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    fx->now_ms = T0;
    hf_record_t r = reserve_rec("p7", "k", "SKU-A", 1, 60000);
    assert_int_equal(fx_apply(fx, &r), HF_OK);
    hf_record_t proc = payment_rec("p7", "evt-1", HF_PAY_PROCESSING, "");
    assert_int_equal(call(fx, &proc).outcome, HF_REPLY_BUSY);
    settle(fx);
    assert_int_equal(call(fx, &proc).expires_at_ms, T0 + PENDING_EXTEND_MS);

    hf_record_t r8 = reserve_rec("p8", "k", "SKU-A", 1, 60000);
    assert_int_equal(fx_apply(fx, &r8), HF_OK);
    size_t from = fx->emits_count;
    hf_record_t cxl = payment_rec("p8", "evt-1", HF_PAY_CANCELED, "");
    assert_int_equal(fx_apply(fx, &cxl), HF_OK);
    assert_int_equal(replies_since(fx, from), 2); /* the event's and the Reserve's */
    settle(fx);
    assert_int_equal(load_rs(fx, "p8").status, HF_RES_RELEASED);
    assert_string_equal(last_ledger(fx, "p8", HF_LEDGER_RELEASED).reason, "payment_canceled");
    hf_record_t x = release_rec("p7", "x");
    assert_int_equal(call(fx, &x).outcome, HF_REPLY_RELEASED);
    settle(fx);
    assert_int_equal(reserved_total(fx, "SKU-A"), 0);
}

static void test_a_payment_event_without_a_known_event_or_payment_is_invalid(void **state)
{
    stage_ctx_t *fx = *state;
    stock(fx, "SKU-A", plenty, 6);
    reserve_held(fx, "p9", "SKU-A", 1, 0);
    hf_record_t unknown = payment_rec("p9", "evt-1", HF_PAY_UNKNOWN, "");
    expect_invalid(fx, &unknown, "event must be one of PROCESSING");
    hf_record_t no_pay = payment_rec("p9", "evt-2", HF_PAY_CANCELED, "");
    no_pay.u.payment_event.payment_id[0] = '\0';
    expect_invalid(fx, &no_pay, "payment_id must be non-empty");
    hf_record_t long_reason = payment_rec("p9", "evt-3", HF_PAY_CANCELED, "");
    memset(long_reason.u.payment_event.reason, 'x', HF_PAYMENT_REASON_LEN_MAX + 1);
    expect_invalid(fx, &long_reason, "reason must be at most 200 bytes");
    assert_int_equal(load_rs(fx, "p9").status, HF_RES_HELD);
    /* The policy refuses what it cannot mean. */
    char errstr[256];
    gateway_env_t env;
    memset(&env, 0, sizeof env);
    assert_int_equal(gateway_parse_payment_policy("succeeded=release", &env, errstr, sizeof errstr),
                     HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "'succeeded=release'"));
    assert_int_equal(gateway_parse_payment_policy("failed=extend", &env, errstr, sizeof errstr),
                     HF_ERR_CONFIG); /* only a pending payment extends */
    assert_non_null(strstr(errstr, "'failed=extend'"));
    assert_int_equal(
        gateway_parse_payment_policy("failed=keep,canceled=explode", &env, errstr, sizeof errstr),
        HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "'canceled=explode'"));
    assert_int_equal(gateway_parse_payment_policy(",canceled=keep,,", &env, errstr, sizeof errstr),
                     HF_OK); /* empty items are nothing */
    assert_int_equal(env.payment_action[HF_PAY_CANCELED], GW_PAY_KEEP);
    assert_int_equal(gateway_parse_payment_policy("refunded=keep", &env, errstr, sizeof errstr),
                     HF_ERR_CONFIG);
    assert_int_equal(gateway_parse_payment_policy("payment.failed=release,processing=keep", &env,
                                                  errstr, sizeof errstr),
                     HF_OK);
    assert_int_equal(env.payment_action[HF_PAY_FAILED], GW_PAY_RELEASE);
    assert_int_equal(env.payment_action[HF_PAY_PROCESSING], GW_PAY_KEEP);
    assert_int_equal(env.payment_action[HF_PAY_REQUIRES_ACTION], GW_PAY_EXTEND);
    assert_int_equal(env.payment_action[HF_PAY_CANCELED], GW_PAY_RELEASE);
    assert_int_equal(env.payment_action[HF_PAY_SUCCEEDED], GW_PAY_COMMIT);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    log_set_level(HF_LOG_ERROR); /* shortfalls and rollbacks log warnings by design */
    const struct CMUnitTest tests[] = {
        T(test_reserve_with_qty_zero_or_above_max_is_rejected_invalid_naming_line_and_bounds),
        T(test_reserve_with_no_lines_too_many_lines_or_a_repeated_sku_is_rejected_invalid),
        T(test_reserve_of_an_unknown_sku_is_rejected_invalid_and_records_nothing),
        T(test_reserve_ttl_outside_bounds_is_rejected_and_the_bounds_themselves_are_accepted),
        T(test_empty_ids_are_rejected_with_a_reply_or_a_dead_letter_reason),
        T(test_a_reply_to_topic_that_does_not_exist_is_rejected_on_the_default_one),
        T(test_reply_to_an_internal_or_unlisted_topic_is_refused_before_anything_happens),
        T(test_reserve_needing_more_than_allocations_max_holds_is_rejected_invalid),
        T(test_retried_reserve_with_the_same_body_gets_the_stored_reply_and_no_second_hold),
        T(test_retried_reserve_while_pending_emits_nothing_and_the_answer_comes_once),
        T(test_same_idempotency_key_with_another_body_is_conflict_and_changes_nothing),
        T(test_reserve_reusing_a_reservation_id_under_another_key_is_conflict),
        T(test_retried_reserve_after_commit_gets_the_original_held_reply),
        T(test_retried_pending_reserve_is_answered_once_then_from_the_reservation),
        T(test_reserve_with_another_body_under_its_key_is_conflict_pending_or_answered),
        T(test_reserve_and_its_results_each_write_one_changelog_record),
        T(test_reserve_answers_in_old_idempotency_records_are_still_honoured),
        T(test_commit_is_idempotent_by_key_and_by_payment_id),
        T(test_all_holds_ok_make_it_held_with_expires_at_now_plus_ttl_computed_once),
        T(test_ttl_is_the_requests_then_the_campaigns_then_the_default),
        T(test_insufficient_result_reroutes_to_another_warehouse_with_a_bumped_attempt),
        T(test_partial_insufficient_reroutes_only_the_missing_quantity),
        T(test_reroutes_are_bounded_then_every_hold_is_released_and_the_reserve_rejected),
        T(test_rejection_when_the_network_cannot_cover_releases_the_ok_holds_of_other_lines),
        T(test_reserve_the_view_cannot_cover_is_rejected_insufficient_without_any_hold),
        T(test_stale_view_degrades_to_the_nearest_warehouse),
        T(test_commit_of_held_sends_commit_holds_and_one_committed_ledger_event),
        T(test_terminal_states_never_move),
        T(test_commit_or_extend_of_a_pending_reservation_is_busy_or_conflict_not_kept),
        T(test_commit_after_expiry_expires_and_flags_a_late_payment),
        T(test_late_payment_is_flagged_for_refund_once_per_payment_id),
        T(test_rereserve_holds_the_expired_stock_again_and_commits_it),
        T(test_rereserve_reroutes_when_the_old_warehouse_sold_out_meanwhile),
        T(test_rereserve_refunds_when_the_network_has_no_stock_left),
        T(test_rereserve_refunds_at_once_when_the_view_knows_nothing_is_left),
        T(test_rereserve_whose_results_never_come_refunds_after_retries_max),
        T(test_rereserved_hold_revoked_before_its_commit_refunds_the_payment),
        T(test_rereserve_revoked_while_pending_refunds_and_releases_everything),
        T(test_release_of_pending_releases_what_was_asked_and_answers_the_reserve_once),
        T(test_release_of_held_gives_the_holds_back_with_a_released_ledger_event),
        T(test_the_prologue_checks_key_then_reply_to_then_body_then_the_reservation),
        T(test_a_one_hold_reserve_asks_its_counter_to_answer_and_the_gateway_stays_silent),
        T(test_the_reserves_api_key_id_names_each_ledger_event_and_rides_the_hold),
        T(test_the_reserves_request_timestamp_stays_with_the_reservation_and_rides_the_hold),
        T(test_a_commit_that_overtakes_the_counters_answer_waits_and_commits_with_it),
        T(test_requests_parked_before_the_counters_answer_are_applied_in_order),
        T(test_past_the_parking_slots_a_commit_is_told_busy_and_its_retry_commits),
        T(test_a_refused_hold_the_counter_would_have_answered_is_rerouted_and_answered_here),
        T(test_a_multi_line_reserve_is_answered_by_the_gateway),
        T(test_a_reservation_its_counter_may_have_answered_is_never_rolled_back),
        T(test_a_retried_commit_is_answered_from_its_record_without_loading),
        T(test_another_body_under_a_used_key_is_conflict_for_every_request_kind),
        T(test_sweeper_expires_due_reservations_with_release_holds_and_an_expired_event),
        T(test_one_tick_fires_more_due_timers_than_one_batch_holds),
        T(test_sweeper_resends_overdue_holds_with_the_same_attempt),
        T(test_sweeper_rolls_back_after_result_retries_max),
        T(test_sweeper_forgets_idempotency_records_after_retention),
        T(test_restore_rebuilds_the_timer_index_from_the_records),
        T(test_sweeper_fires_a_timer_armed_before_where_it_stopped),
        T(test_sweeper_fires_again_after_an_aborted_tick),
        T(test_sweeper_ignores_the_cursor_of_an_earlier_run),
        T(test_sweeper_cursor_moves_past_timers_deleted_before_due),
        T(test_transitions_delete_the_timers_they_make_stale),
        T(test_a_reserve_past_its_deadline_is_busy_and_leaves_nothing_behind),
        T(test_sweeper_forgets_ended_reservations_after_retention_and_only_those),
        T(test_shortfall_of_a_held_reservation_releases_all_its_holds_as_stock_shortfall),
        T(test_shortfall_while_pending_releases_the_whole_reservation_as_stock_shortfall),
        T(test_commit_racing_a_shortfall_ends_released_and_flags_the_payment_for_refund),
        T(test_commit_revoked_by_the_counter_alone_also_ends_released_with_a_refund),
        T(test_commit_after_a_shortfall_release_is_conflict_and_flags_the_payment_for_refund),
        T(test_extension_is_capped_at_the_max_total_hold_time),
        T(test_a_pending_payment_extends_the_hold_and_stops_at_its_cap),
        T(test_a_canceled_payment_releases_at_once_and_the_ledger_says_why),
        T(test_a_failed_payment_keeps_the_hold_unless_the_policy_releases),
        T(test_payment_events_out_of_order_never_undo_a_terminal_state),
        T(test_a_payment_event_for_a_pending_reservation),
        T(test_a_payment_event_without_a_known_event_or_payment_is_invalid),
        T(test_a_pick_up_holds_at_its_store_alone_and_a_store_serves_nobody_else),
        T(test_a_ship_from_list_bounds_where_a_sku_is_held),
        T(test_a_partial_reserve_holds_what_the_network_has),
        T(test_a_partial_reserve_keeps_what_the_counters_give),
        T(test_a_late_payment_rereserves_within_todays_rules),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    codec_shutdown();
    return failed;
}
