/* Escrow at the gateway (docs/ESCROW.md): this partition's allotments of hot
 * pairs. A Reserve whose hold fits the balance is HELD here, in the transaction
 * that answers it — one hop instead of three; a release or expiry puts the
 * units back into the balance; a commit tells the counter of the sale. The
 * balance is refilled from the counter before it runs out (sized by the rate
 * the partition takes units at), returned when idle or when the SKU gets
 * scarce (the counter then serves its last units exactly), and given back when
 * a stock shortfall recalls it. Both sides count the same allotted once the
 * records between them are applied; every change happens in the gateway's
 * transaction, so a crash rolls the allotment back with the holds it served.
 *
 * Bottom layer: called by saga.c, gw_emit.c, counter_result.c,
 * allotment_grant.c and the sweeper; calls only gw_state.c-level functions. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "gateway.h"
#include "hf_assert.h"
#include "kafka.h"
#include "log.h"

static void count(stage_ctx_t *ctx, size_t offset, uint64_t n)
{
    gw_escrow_stats_t *st = gateway_env(ctx)->escrow.stats;
    if (st && n > 0)
        atomic_fetch_add((atomic_uint_fast64_t *)(void *)((char *)st + offset), n);
}
#define COUNT(ctx, field, n) count((ctx), offsetof(gw_escrow_stats_t, field), (uint64_t)(n))

static bool pinned(const gateway_env_t *env, const char *sku)
{
    for (size_t i = 0; i < env->escrow.skus_count; i++)
        if (strcmp(env->escrow.skus[i], sku) == 0)
            return true;
    return false;
}

/* Whether the view says sku is down to its last units (or does not know). */
static bool scarce(const gateway_env_t *env, const char *sku)
{
    hf_availability_t av;
    int64_t stale_ms = env->staleness_ms ? env->staleness_ms(env->opaque) : -1;
    if (stale_ms < 0 || stale_ms > env->view_stale_max_ms ||
        env->availability(env->opaque, sku, &av) != HF_OK)
        return true; /* no current view: let the counters arbitrate */
    return av.total <= env->escrow.scarce_units;
}

bool gw_escrow_mode(stage_ctx_t *ctx, const char *sku)
{
    const gateway_env_t *env = gateway_env(ctx);
    return (env->escrow.skus_count > 0 && pinned(env, sku)) ||
           (env->escrow.heat &&
            gw_heat_hot(env->escrow.heat, stage_partition(ctx), sku, stage_now_ms(ctx)));
}

void gw_escrow_note(stage_ctx_t *ctx, const char *sku)
{
    const gateway_env_t *env = gateway_env(ctx);
    if (env->escrow.heat)
        (void)gw_heat_note(env->escrow.heat, stage_partition(ctx), sku, stage_now_ms(ctx), 1);
}

static void check(const hf_escrow_state_t *e)
{
    hf_assert(e->allotted >= 0 && e->balance >= 0 && e->balance <= e->allotted);
    hf_assert(e->asking_qty >= 0 && e->owed_qty >= 0 && e->seq >= 0);
}

/* *found false: a zero allotment of the pair. */
static int load(stage_ctx_t *ctx, const char *warehouse_id, const char *sku, hf_escrow_state_t *out,
                bool *found)
{
    char key[GW_KEY_MAX];
    size_t len = gw_escrow_key(key, warehouse_id, sku);
    int err = stage_get_as(ctx, key, len, HF_REC_ESCROW_STATE, out);
    *found = err == HF_OK;
    if (err == HF_ERR_NOTFOUND) {
        memset(out, 0, sizeof *out);
        snprintf(out->warehouse_id, sizeof out->warehouse_id, "%s", warehouse_id);
        snprintf(out->sku, sizeof out->sku, "%s", sku);
        return HF_OK;
    }
    if (err)
        return err;
    check(out);
    return HF_OK;
}

int gw_escrow_local_view(stage_ctx_t *ctx, const char *sku, const hf_availability_t *net,
                         hf_availability_t *out, bool *any)
{
    *any = false;
    memset(out, 0, sizeof *out);
    snprintf(out->sku, sizeof out->sku, "%s", sku);
    for (int32_t w = 0; w < net->warehouses_count; w++) {
        hf_escrow_state_t e;
        bool found = false;
        int err = load(ctx, net->warehouses[w].warehouse_id, sku, &e, &found);
        if (err)
            return err;
        int64_t usable = e.owed_qty == 0 ? e.balance : 0;
        hf_wh_available_t *o = &out->warehouses[out->warehouses_count++];
        snprintf(o->warehouse_id, sizeof o->warehouse_id, "%s", net->warehouses[w].warehouse_id);
        o->available = usable;
        out->total += usable;
        *any = *any || usable > 0;
    }
    out->in_stock = *any;
    out->updated_at_ms = net->updated_at_ms;
    return HF_OK;
}

/* The allotment an escrow hold was taken from: it exists while the hold does. */
static int load_of(stage_ctx_t *ctx, const hf_hold_ref_t *h, hf_escrow_state_t *out)
{
    hf_assert(h->escrow);
    bool found = false;
    int err = load(ctx, h->warehouse_id, h->sku, out, &found);
    hf_assert(err || found);
    return err;
}

static int store(stage_ctx_t *ctx, hf_escrow_state_t *e)
{
    check(e);
    e->updated_at_ms = stage_now_ms(ctx);
    char key[GW_KEY_MAX];
    size_t len = gw_escrow_key(key, e->warehouse_id, e->sku);
    return stage_put_as(ctx, key, len, HF_REC_ESCROW_STATE, e);
}

static int emit_command(stage_ctx_t *ctx, const hf_escrow_state_t *e, const hf_record_t *rec)
{
    char key[GW_KEY_MAX];
    int n = snprintf(key, sizeof key, "%s|%s", e->warehouse_id, e->sku);
    hf_assert(n > 0 && n < (int)sizeof key);
    return stage_emit(ctx, HF_T_COUNTER_COMMANDS, key, (size_t)n, rec);
}

/* Gives return_qty of the balance back and asks for want_qty (either may be
 * 0; both 0 is a balance report). */
static int request(stage_ctx_t *ctx, hf_escrow_state_t *e, int64_t want_qty, int64_t return_qty)
{
    hf_assert(return_qty >= 0 && return_qty <= e->balance && want_qty >= 0);
    hf_assert(e->holder_key[0]);
    int64_t now = stage_now_ms(ctx);
    e->balance -= return_qty;
    e->allotted -= return_qty;
    e->seq++;
    COUNT(ctx, returned, return_qty);
    COUNT(ctx, asked, want_qty > 0);
    if (want_qty > 0) {
        e->asking_seq = e->seq;
        e->asking_qty = want_qty;
        e->asked_at_ms = now;
    }
    e->reported_balance = e->balance;
    e->reported_at_ms = now;
    hf_record_t rec;
    hf_allotment_request_t *r =
        &hf_record_reset(&rec, HF_REC_ALLOTMENT_REQUEST)->u.allotment_request;
    snprintf(r->warehouse_id, sizeof r->warehouse_id, "%s", e->warehouse_id);
    snprintf(r->sku, sizeof r->sku, "%s", e->sku);
    r->holder_partition = stage_partition(ctx);
    snprintf(r->holder_key, sizeof r->holder_key, "%s", e->holder_key);
    r->seq = e->seq;
    r->want_qty = want_qty;
    r->return_qty = return_qty;
    r->balance = e->balance;
    r->sent_at_ms = now;
    return emit_command(ctx, e, &rec);
}

static int request_and_store(stage_ctx_t *ctx, hf_escrow_state_t *e, int64_t want_qty,
                             int64_t return_qty)
{
    int err = request(ctx, e, want_qty, return_qty);
    return err ? err : store(ctx, e);
}

/* A holder key for an allotment no reservation has touched yet (a pinned pair
 * primed before the sale): a key the requests topic's murmur2 places in this
 * partition, so the counter's grant comes back here. false when the partition
 * count is unknown. */
static bool ensure_holder_key(stage_ctx_t *ctx, hf_escrow_state_t *e)
{
    if (e->holder_key[0])
        return true;
    const gateway_env_t *env = gateway_env(ctx);
    int32_t p = stage_partition(ctx);
    if (env->escrow.partitions <= 0 || p >= env->escrow.partitions)
        return false;
    char key[sizeof e->holder_key];
    /* About `partitions` tries on average; bounded all the same. */
    for (int n = 0; n < (1 << 20); n++) {
        int len = snprintf(key, sizeof key, "escrow-holder-%d-%d", p, n);
        if (kafka_partition_for_key(key, (size_t)len, env->escrow.partitions) == p) {
            snprintf(e->holder_key, sizeof e->holder_key, "%s", key);
            return true;
        }
    }
    return false;
}

/* Units taken per second x 1000, decayed over one second: a steady take of
 * u units/s settles at u x 1000. */
static void observe_take(hf_escrow_state_t *e, int64_t qty, int64_t now)
{
    double dt_ms =
        e->last_take_ms > 0 && now > e->last_take_ms ? (double)(now - e->last_take_ms) : 0.0;
    double rate = (double)e->rate_milli_units_s * exp(-dt_ms / 1000.0) + (double)qty * 1000.0;
    e->rate_milli_units_s = (int64_t)rate;
    e->last_take_ms = now;
}

static int64_t refill_units(const gateway_env_t *env, const hf_escrow_state_t *e)
{
    double want =
        (double)e->rate_milli_units_s / 1000.0 * (double)env->escrow.refill_horizon_ms / 1000.0;
    int64_t units = (int64_t)ceil(want);
    if (units < env->escrow.refill_min_units)
        units = env->escrow.refill_min_units;
    return units > env->escrow.refill_max_units ? env->escrow.refill_max_units : units;
}

static bool may_ask(const hf_escrow_state_t *e, int64_t now)
{
    return e->owed_qty == 0 &&
           (e->asking_qty == 0 || now - e->asked_at_ms >= HF_ESCROW_ASK_TIMEOUT_MS);
}

int gw_escrow_take(stage_ctx_t *ctx, const hf_reservation_state_t *rs, hf_hold_ref_t *h,
                   bool *taken)
{
    hf_assert(h->status == HF_HOLD_REF_HOLD_SENT && !h->escrow);
    const gateway_env_t *env = gateway_env(ctx);
    *taken = false;
    hf_escrow_state_t e;
    bool found = false;
    int err = load(ctx, h->warehouse_id, h->sku, &e, &found);
    if (err)
        return err;
    int64_t now = stage_now_ms(ctx);
    if (!e.holder_key[0]) /* a reservation of this partition: grants come back here */
        snprintf(e.holder_key, sizeof e.holder_key, "%s", rs->reservation_id);
    if (e.balance >= h->qty && e.owed_qty == 0) {
        e.balance -= h->qty;
        h->status = HF_HOLD_REF_HELD;
        h->escrow = true;
        h->available_seen = e.balance;
        *taken = true;
    }
    COUNT(ctx, taken, *taken);
    COUNT(ctx, missed, !*taken);
    observe_take(&e, h->qty, now);
    int64_t refill = refill_units(env, &e);
    if (refill < h->qty)
        refill = h->qty;
    /* A scarce SKU drains what it holds and asks for no more: the counters
     * serve its last units. */
    if (e.balance < (refill + 1) / 2 && may_ask(&e, now) && !scarce(env, h->sku))
        return request_and_store(ctx, &e, refill, 0);
    /* Drained: said at once (not at the next tick), so the counter's answers
     * stop counting units this partition no longer has (stock_hint.h) — unless
     * a refill is out: the counter counts its grant in the balance, and a 0
     * now would hide those units from the others until the next tick. */
    if (*taken && e.balance == 0 && e.reported_balance > 0 && e.asking_qty == 0)
        return request_and_store(ctx, &e, 0, 0);
    return store(ctx, &e);
}

int gw_escrow_give_back(stage_ctx_t *ctx, const hf_hold_ref_t *h)
{
    hf_escrow_state_t e;
    int err = load_of(ctx, h, &e);
    if (err)
        return err;
    hf_assert(e.balance + h->qty <= e.allotted);
    e.balance += h->qty;
    if (e.owed_qty == 0)
        return store(ctx, &e);
    /* A recall is owed: the units go to the counter. */
    int64_t x = e.owed_qty < e.balance ? e.owed_qty : e.balance;
    e.owed_qty -= x;
    return request_and_store(ctx, &e, 0, x);
}

int gw_escrow_sell(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const hf_hold_ref_t *h)
{
    hf_assert(h->status == HF_HOLD_REF_HELD);
    hf_escrow_state_t e;
    int err = load_of(ctx, h, &e);
    if (err)
        return err;
    hf_assert(h->qty <= e.allotted - e.balance);
    e.allotted -= h->qty;
    e.reported_balance = e.balance;
    e.reported_at_ms = stage_now_ms(ctx);
    hf_record_t rec;
    hf_allotment_sale_t *s = &hf_record_reset(&rec, HF_REC_ALLOTMENT_SALE)->u.allotment_sale;
    snprintf(s->warehouse_id, sizeof s->warehouse_id, "%s", h->warehouse_id);
    snprintf(s->sku, sizeof s->sku, "%s", h->sku);
    s->holder_partition = stage_partition(ctx);
    snprintf(s->reservation_id, sizeof s->reservation_id, "%s", rs->reservation_id);
    s->attempt = h->attempt;
    s->qty = h->qty;
    s->balance = e.balance;
    s->sold_at_ms = e.reported_at_ms;
    err = emit_command(ctx, &e, &rec);
    return err ? err : store(ctx, &e);
}

int gw_escrow_owes(stage_ctx_t *ctx, const hf_reservation_state_t *rs, bool *owes)
{
    *owes = false;
    for (int32_t i = 0; i < rs->allocations_count && !*owes; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        if (!h->escrow || h->status != HF_HOLD_REF_HELD)
            continue;
        hf_escrow_state_t e;
        bool found = false;
        int err = load(ctx, h->warehouse_id, h->sku, &e, &found);
        if (err)
            return err;
        *owes = e.owed_qty > 0;
    }
    return HF_OK;
}

int gw_escrow_revoke_owed(stage_ctx_t *ctx, hf_reservation_state_t *rs, bool *revoked)
{
    *revoked = false;
    bool owes = false;
    int err = gw_escrow_owes(ctx, rs, &owes);
    if (err || !owes)
        return err;
    *revoked = true;
    return gw_finish(ctx, rs, HF_RES_RELEASED, HF_LEDGER_RELEASED, GW_REASON_SHORTFALL);
}

int gw_escrow_unsell(stage_ctx_t *ctx, const hf_hold_ref_t *h)
{
    hf_escrow_state_t e;
    int err = load_of(ctx, h, &e);
    if (err)
        return err;
    /* The counter kept them allotted, under a recall: they go back to it as
     * the hold is released. */
    e.allotted += h->qty;
    e.owed_qty += h->qty;
    return store(ctx, &e);
}

int gw_escrow_apply_grant(stage_ctx_t *ctx, const hf_allotment_grant_t *g)
{
    hf_escrow_state_t e;
    bool found = false;
    int err = load(ctx, g->warehouse_id, g->sku, &e, &found);
    if (err)
        return err;
    if (!found)
        log_warn("gateway", "allotment grant for %s|%s, which this partition never asked for",
                 g->warehouse_id, g->sku);
    e.allotted += g->granted_qty;
    e.balance += g->granted_qty;
    COUNT(ctx, granted, g->granted_qty);
    if (g->seq != 0 && g->seq >= e.asking_seq) /* the refill in flight is answered */
        e.asking_qty = 0;
    if (g->recall_qty == 0)
        return store(ctx, &e);
    int64_t x = g->recall_qty < e.balance ? g->recall_qty : e.balance;
    if (g->shortfall) {
        /* Owed: what the held units can still pay. The counter may have
         * counted units this partition already returned or sold (records in
         * flight): those settle its recall on their own when they arrive (a
         * return) or come back through gw_escrow_unsell (a refused sale). */
        int64_t held = e.allotted - e.balance;
        int64_t owed = e.owed_qty + g->recall_qty - x;
        e.owed_qty = owed < held ? owed : held;
        log_warn("gateway",
                 "%s|%s: a stock shortfall recalls %lld units of the allotment: %lld returned "
                 "now, %lld as their holds end",
                 g->warehouse_id, g->sku, (long long)g->recall_qty, (long long)x,
                 (long long)e.owed_qty);
    }
    if (x == 0)
        return store(ctx, &e);
    if (!e.holder_key[0])
        return store(ctx, &e); /* nothing was ever asked: nothing to give */
    return request_and_store(ctx, &e, 0, x);
}

/* What the tick does with one allotment: returns a balance that sat idle, that
 * a scarce or no-longer-escrow SKU should not keep, or that a recall is owed;
 * reports a changed balance (the sellable stock the view shows). */
static int tick_one(stage_ctx_t *ctx, const gateway_env_t *env, hf_escrow_state_t *e, int64_t now)
{
    int64_t give = 0;
    if (e->owed_qty > 0) {
        give = e->owed_qty < e->balance ? e->owed_qty : e->balance;
        e->owed_qty -= give;
    } else if (e->balance > 0) {
        int64_t idle_ms = now - e->last_take_ms;
        bool idle = idle_ms >= env->escrow.idle_return_ms && !pinned(env, e->sku);
        /* Scarce: a balance this partition is not using goes back at once, so
         * no unit sits here while a shopper elsewhere is refused. */
        bool drained = idle_ms >= HF_ESCROW_DRAIN_IDLE_MS && scarce(env, e->sku);
        if (idle || drained || !gw_escrow_mode(ctx, e->sku))
            give = e->balance; /* a pinned SKU keeps its allotments warm for its sale */
    }
    /* Reported when it matters to the view: drained to 0, moved by a refill's
     * worth, or changed at all for a second. */
    int64_t moved = e->balance - e->reported_balance;
    bool report = moved != 0 && (e->balance == 0 || moved >= env->escrow.refill_min_units ||
                                 -moved >= env->escrow.refill_min_units ||
                                 now - e->reported_at_ms >= HF_ESCROW_REPORT_MAX_MS);
    if ((give == 0 && !report) || !e->holder_key[0])
        return HF_OK;
    return request_and_store(ctx, e, 0, give);
}

/* A pinned SKU's allotments asked for before its first shopper ("trigger the
 * split ahead of the sale"): at every warehouse the view shows with more than
 * escrow_scarce_units free, this partition asks once for its share of the free
 * units (free / partitions: the shoppers of a sale spread over the partitions),
 * at least escrow_prime_units, at most escrow_refill_max_units (the counter
 * grants at most escrow_grant_share_pct of what is free); later refills follow
 * the shoppers. At most *budget pairs are looked at. */
static int prime(stage_ctx_t *ctx, const gateway_env_t *env, size_t pin, int64_t now,
                 size_t *budget)
{
    const char *sku = env->escrow.skus[pin];
    atomic_bool *done =
        env->escrow.primed ? &env->escrow.primed->done[stage_partition(ctx)][pin] : NULL;
    hf_availability_t av;
    if ((done && atomic_load(done)) || env->escrow.prime_units <= 0 || !gw_escrow_mode(ctx, sku) ||
        scarce(env, sku) || env->availability(env->opaque, sku, &av) != HF_OK ||
        (size_t)av.warehouses_count > *budget)
        return HF_OK; /* not yet: a later tick looks again */
    *budget -= (size_t)av.warehouses_count;
    /* Only where a shopper who names no warehouse may be served: not a store's
     * shelf, not outside the SKU's ship-from list. */
    hf_line_t any = {.qty = 1};
    snprintf(any.sku, sizeof any.sku, "%s", sku);
    route_line_t where = gw_route_line(env, NULL, 0, &(hf_geo_t){0, 0}, &any, 1, NULL, NULL, 0);
    for (int32_t w = 0; w < av.warehouses_count; w++) {
        const hf_wh_available_t *wa = &av.warehouses[w];
        int64_t free_units = wa->available - wa->escrow;
        const route_warehouse_t *rw = route_warehouse(&env->routes, wa->warehouse_id);
        if (free_units <= env->escrow.scarce_units || !rw ||
            !route_may_use(&env->routes, &where, rw))
            continue;
        int64_t want = env->escrow.partitions > 0 ? free_units / env->escrow.partitions : 0;
        if (want < env->escrow.prime_units)
            want = env->escrow.prime_units;
        if (want > env->escrow.refill_max_units)
            want = env->escrow.refill_max_units;
        hf_escrow_state_t e;
        bool found = false;
        int err = load(ctx, wa->warehouse_id, sku, &e, &found);
        if (err)
            return err;
        if (found || !ensure_holder_key(ctx, &e)) /* once: then refills follow demand */
            continue;
        err = request_and_store(ctx, &e, want, 0);
        if (err)
            return err;
    }
    /* Looked at every warehouse: done for this run (an aborted transaction
     * may lose a prime request; the shoppers' refills then fill it). */
    if (done)
        atomic_store(done, true);
    return HF_OK;
}

int gw_escrow_tick(stage_ctx_t *ctx)
{
    /* Also with escrow off: allotments of an earlier run are given back. */
    const gateway_env_t *env = gateway_env(ctx);
    static _Thread_local hf_escrow_state_t all[HF_ESCROW_TICK_ALLOTMENTS_MAX];
    size_t n = 0;
    char prefix[1] = {GW_ESCROW_TAG};
    state_iter_t *it = stage_iter(ctx, prefix, 1, false);
    if (!it)
        return HF_ERR_NOMEM;
    const void *k, *v;
    size_t klen, vlen;
    int err = HF_OK;
    /* Read first, write after: a batch iterator must not see its own writes. */
    while (err == HF_OK && n < HF_ESCROW_TICK_ALLOTMENTS_MAX &&
           state_iter_next(it, &k, &klen, &v, &vlen)) {
        hf_record_t rec; /* the iterator's value is the stored record */
        char why[128];
        err = codec_decode(v, vlen, &rec, why, sizeof why);
        if (err == HF_OK && rec.type == HF_REC_ESCROW_STATE)
            all[n++] = rec.u.escrow_state;
    }
    state_iter_destroy(it);
    int64_t now = stage_now_ms(ctx);
    for (size_t i = 0; err == HF_OK && i < n; i++)
        err = tick_one(ctx, env, &all[i], now);
    size_t budget = HF_ESCROW_TICK_ALLOTMENTS_MAX;
    for (size_t i = 0; err == HF_OK && i < env->escrow.skus_count && budget > 0; i++)
        err = prime(ctx, env, i, now, &budget);
    return err;
}
