/* What happens on Reserve: the prologue (gw_request.c) answers retries from the
 * reply kept in the reservation (CONFLICT for another body) and tells a request
 * that cannot be served REJECTED_INVALID; a new one may be shed (BUSY), unless
 * routing already knows the network cannot serve it (then it is refused in
 * this hop, as any other sold-out reserve); otherwise every line is routed,
 * the reservation is recorded PENDING with its absolute expires_at_ms
 * (computed once, here) and the Holds go to the counters. The answer follows
 * when their results are in (counter_result.c, saga.c), or at once when this
 * partition's allotments held every line (escrow.c). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"

static void init_state(stage_ctx_t *ctx, const gateway_env_t *env, const hf_reserve_t *r,
                       int64_t hash, hf_reservation_state_t *rs)
{
    memset(rs, 0, sizeof *rs);
    snprintf(rs->reservation_id, sizeof rs->reservation_id, "%s", r->reservation_id);
    snprintf(rs->idempotency_key, sizeof rs->idempotency_key, "%s", r->idempotency_key);
    rs->status = HF_RES_PENDING;
    rs->lines_count = r->lines_count;
    memcpy(rs->lines, r->lines, sizeof r->lines[0] * (size_t)r->lines_count);
    rs->ship_to = r->ship_to;
    rs->request_hash = hash;
    snprintf(rs->reply_to, sizeof rs->reply_to, "%s", r->reply_to);
    snprintf(rs->campaign, sizeof rs->campaign, "%s", r->campaign);
    snprintf(rs->api_key_id, sizeof rs->api_key_id, "%s", r->api_key_id);
    rs->allow_partial = r->allow_partial;
    rs->only_warehouses_count = r->only_warehouses_count;
    memcpy(rs->only_warehouses, r->only_warehouses,
           sizeof r->only_warehouses[0] * (size_t)r->only_warehouses_count);
    int64_t now = stage_now_ms(ctx), ttl_ms = gw_ttl_ms(env, r);
    rs->created_at_ms = now;
    /* Where the latency of an answer in a later transaction starts (the
     * counter's two-hop answer, the gateway's after the holds' results): the
     * Reserve's append time on holdfast.requests, so its wait there counts. */
    int64_t requested_at_ms = stage_input_timestamp_ms(ctx, HF_REC_RESERVE);
    rs->requested_at_ms = requested_at_ms > 0 ? requested_at_ms : 0;
    rs->expires_at_ms = now + ttl_ms;
    rs->hold_deadline_ms = now + ttl_ms * env->hold_max_factor_pct / 100;
}

/* Whether routing refuses some line of r without a Hold: what gw_saga_start's
 * first round decides, on the same knowledge — the routing view with the
 * counters' last answers over it (stock_hint.h), this partition's own
 * allotments first. A view too stale to route on (routing degrades to the
 * nearest warehouse) or an unknown sku refuses nothing here. */
static bool sold_out(stage_ctx_t *ctx, const gateway_env_t *env, const hf_reserve_t *r)
{
    int64_t stale_ms = env->staleness_ms(env->opaque);
    if (r->allow_partial || stale_ms < 0 || stale_ms > env->view_stale_max_ms)
        return false; /* a partial reserve takes what is left: shed like any other */
    for (int32_t i = 0; i < r->lines_count; i++) {
        const hf_line_t *l = &r->lines[i];
        hf_availability_t net, mine;
        if (env->availability(env->opaque, l->sku, &net) != HF_OK)
            continue;
        if (env->hint)
            (void)gw_hint_apply(env->hint, &net, stage_now_ms(ctx));
        route_plan_t plan;
        route_line_t line = gw_route_line(env, r->only_warehouses, r->only_warehouses_count,
                                          &r->ship_to, l, l->qty, &net, NULL, 0);
        route_line_t own = line;
        own.avail = &mine;
        bool any = false;
        if (gw_escrow_mode(ctx, l->sku) &&
            gw_escrow_local_view(ctx, l->sku, &net, &mine, &any) == HF_OK && any &&
            mine.total >= l->qty &&
            route_strategy_for(l->sku)(&env->routes, &own, &plan) == ROUTE_OK)
            continue;
        if (route_strategy_for(l->sku)(&env->routes, &line, &plan) == ROUTE_INSUFFICIENT)
            return true;
    }
    return false;
}

/* Every hold of the first round was taken from this partition's allotments
 * (escrow.c): the saga is settled in the transaction that answers. */
static int hold_now(stage_ctx_t *ctx, hf_reservation_state_t *rs)
{
    gw_saga_end_t end = GW_SAGA_ASKED;
    char why[HF_TEXT_LEN_MAX + 1];
    int err = gw_saga_settle(ctx, rs, &end, why, sizeof why);
    hf_assert(err || end == GW_SAGA_HELD); /* every line held in full */
    return err ? err : gw_saga_hold(ctx, rs, stage_now_ms(ctx));
}

int gateway_on_reserve(stage_ctx_t *ctx, const hf_record_t *rec)
{
    gw_request_t req;
    int err = gw_request_begin(ctx, rec, &req);
    if (err || req.result != GW_REQ_NEW)
        return err; /* a Reserve of a known reservation_id is answered by the prologue */
    const hf_reserve_t *r = &rec->u.reserve;
    const gateway_env_t *env = gateway_env(ctx);
    /* Only a reservation not known yet is shed: a retry of one already applied
     * gets its answer (or, while pending, none) as always, never BUSY. */
    for (int32_t i = 0; i < r->lines_count; i++) /* contention: what may turn escrow on */
        gw_escrow_note(ctx, r->lines[i].sku);
    /* A shopper the network cannot serve is refused, never told to retry:
     * shedding decides first (it sees every new reserve's wait), but a reserve
     * it would shed that routing refuses goes on to the saga, which refuses it
     * in this hop without a Hold, as it does every sold-out reserve (so only
     * a reserve about to be shed is routed twice). */
    char msg[HF_TEXT_LEN_MAX + 1];
    const char *busy = gw_shed_reserve(ctx, env, r, msg, sizeof msg);
    if (busy && !sold_out(ctx, env, r))
        return gw_reply_simple(ctx, &req.asker, HF_REPLY_BUSY, busy);

    hf_reservation_state_t *rs = &req.rs;
    init_state(ctx, env, r, req.asker.hash, rs);
    gw_saga_end_t end = GW_SAGA_INVALID;
    err = gw_saga_start(ctx, rs, &end, msg, sizeof msg);
    if (err)
        return err;
    switch (end) {
    case GW_SAGA_ASKED:
        if (gw_all_answered(rs)) /* every hold taken from an allotment: one hop */
            return hold_now(ctx, rs);
        /* PENDING and not yet answered (reserve_replied false): a retry now
         * gets no second answer (the prologue). */
        return gw_store(ctx, rs);
    case GW_SAGA_INSUFFICIENT:
        /* The network cannot serve it: still a reservation record (REJECTED),
         * a stored answer and its one terminal ledger event. */
        rs->allocations_count = 0; /* routed, never sent */
        return gw_saga_reject(ctx, rs, msg);
    default: /* e.g. unknown sku: nothing recorded */
        return gw_reply_simple(ctx, &req.asker, HF_REPLY_REJECTED_INVALID, msg);
    }
}
