/* The reservation saga: route every line into holds, gather the counters'
 * results, and once all are in say that every line is held, re-route the
 * missing quantity (bounded rounds, each a new attempt number so the counters
 * see new holds), or say it cannot be done. It returns where it stands
 * (gw_saga_end_t), never what that means: its caller ends a reservation's saga
 * (gw_saga_hold, or gw_saga_reject releasing every hold, both here) or a late
 * payment's re-reservation (late_payment.c), so this file calls no flow above
 * it. A partial reservation is never left behind: every path out of PENDING
 * either holds every line in full or releases every hold it asked for — but
 * for a Reserve that allows it (allow_partial): a line the network cannot cover
 * is cut to what it can have (route_coverable), first on the view, then on
 * what the counters say; rs->lines become the quantities held, rs->reason
 * says what was asked, and only a reservation nothing is left of is refused. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"
#include "log.h"

/* The view's availability for sku, or NULL when the view is unusable (stale or
 * not caught up): routing then degrades. Pairs whose counter answered within
 * route_hint_ttl_ms carry that answer instead (stock_hint.h), except for a
 * late payment's re-reservation: a paid order is refunded only on what the
 * counters say to its own Holds. *unknown is set when a current view has never
 * heard of the sku. */
static const hf_availability_t *view_for(stage_ctx_t *ctx, const gateway_env_t *env,
                                         const hf_reservation_state_t *rs, const char *sku,
                                         hf_availability_t *buf, bool *unknown)
{
    *unknown = false;
    int64_t stale_ms = env->staleness_ms(env->opaque);
    if (stale_ms < 0 || stale_ms > env->view_stale_max_ms)
        return NULL;
    int err = env->availability(env->opaque, sku, buf);
    if (err == HF_ERR_NOTFOUND)
        *unknown = true;
    if (err)
        return NULL;
    if (env->hint && !gw_is_rebook(rs))
        (void)gw_hint_apply(env->hint, buf, stage_now_ms(ctx));
    return buf;
}

/* Whether rs holds what it can rather than nothing: an allow_partial
 * reservation's own saga (a late payment's re-reservation is of what the
 * payment bought: all of it or a refund). */
static bool takes_partial(const hf_reservation_state_t *rs)
{
    return rs->allow_partial && !gw_is_rebook(rs);
}

/* Cuts line i to qty (what it can have), saying so in rs->reason, which the
 * HELD answer and ledger event carry: "partially held: SKU-1 3 of 5; ...". An
 * entry that does not fit whole is left out (never a cut inside a name). */
static void cut_line(hf_reservation_state_t *rs, int32_t i, int64_t qty)
{
    hf_line_t *l = &rs->lines[i];
    hf_assert(qty >= 0 && qty < l->qty);
    static const char head[] = "partially held:";
    size_t len = strlen(rs->reason);
    if (len == 0) {
        memcpy(rs->reason, head, sizeof head);
        len = sizeof head - 1;
    }
    char entry[HF_SKU_LEN_MAX + 64];
    int n = snprintf(entry, sizeof entry, " %s %lld of %lld;", l->sku, (long long)qty,
                     (long long)l->qty);
    if (n > 0 && len + (size_t)n < sizeof rs->reason)
        memcpy(rs->reason + len, entry, (size_t)n + 1);
    l->qty = qty;
}

/* Drops the lines cut to nothing; false when none is left. */
static bool drop_empty_lines(hf_reservation_state_t *rs)
{
    int32_t n = 0;
    for (int32_t i = 0; i < rs->lines_count; i++)
        if (rs->lines[i].qty > 0)
            rs->lines[n++] = rs->lines[i];
    rs->lines_count = n;
    return n > 0;
}

static int add_plan(hf_reservation_state_t *rs, const route_plan_t *plan)
{
    if (rs->allocations_count + (int32_t)plan->count > HF_ALLOCATIONS_MAX)
        return HF_ERR_LIMIT;
    for (size_t i = 0; i < plan->count; i++) {
        hf_hold_ref_t *h = &rs->allocations[rs->allocations_count++];
        memset(h, 0, sizeof *h);
        snprintf(h->warehouse_id, sizeof h->warehouse_id, "%s", plan->items[i].warehouse_id);
        snprintf(h->sku, sizeof h->sku, "%s", plan->items[i].sku);
        h->qty = plan->items[i].qty;
        h->attempt = rs->next_attempt;
        h->status = HF_HOLD_REF_HOLD_SENT;
    }
    return HF_OK;
}

/* Emits the Holds of the newest round and arms the lost-result timer. With
 * escrow, holds of the first round of a reservation's own saga are taken from
 * this partition's allotments where they fit (escrow.c): HELD at once, no Hold,
 * and no timer when every one of them was. */
static int send_round(stage_ctx_t *ctx, hf_reservation_state_t *rs, const gateway_env_t *env,
                      bool escrow)
{
    bool sent = false;
    /* A reservation's own first round of one Hold that covers its one line:
     * that hold's counter answers the Reserve (two hops, park.c). */
    bool answerable = env->counter_answers && escrow && rs->next_attempt == 0 &&
                      rs->lines_count == 1 && rs->allocations_count == 1 && !rs->allow_partial;
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        hf_hold_ref_t *h = &rs->allocations[i];
        if (h->status != HF_HOLD_REF_HOLD_SENT || h->attempt != rs->next_attempt)
            continue;
        bool taken = false;
        int err =
            escrow && gw_escrow_mode(ctx, h->sku) ? gw_escrow_take(ctx, rs, h, &taken) : HF_OK;
        if (!err && !taken) {
            rs->counter_answers = rs->counter_answers || answerable;
            err = gw_emit_hold(ctx, rs, h);
            sent = true;
            if (env->hint) /* a resend (sweeper.c) takes nothing again */
                gw_hint_take(env->hint, h->warehouse_id, h->sku, h->qty, stage_now_ms(ctx));
        }
        if (err)
            return err;
    }
    rs->next_attempt++;
    rs->result_retries = 0;
    if (!sent) {
        rs->result_deadline_ms = 0;
        return HF_OK;
    }
    rs->result_deadline_ms = stage_now_ms(ctx) + env->result_timeout_ms;
    return gw_timer_add(ctx, rs->result_deadline_ms, GW_TIMER_PENDING, rs->reservation_id);
}

int gw_saga_start(stage_ctx_t *ctx, hf_reservation_state_t *rs, gw_saga_end_t *end, char *why,
                  size_t why_size)
{
    const gateway_env_t *env = gateway_env(ctx);
    *end = GW_SAGA_ASKED;
    for (int32_t i = 0; i < rs->lines_count; i++) {
        const hf_line_t *l = &rs->lines[i];
        hf_availability_t av;
        bool unknown = false;
        route_line_t line =
            gw_route_line(env, rs->only_warehouses, rs->only_warehouses_count, &rs->ship_to, l,
                          l->qty, view_for(ctx, env, rs, l->sku, &av, &unknown), NULL, 0);
        if (unknown) {
            *end = GW_SAGA_INVALID;
            snprintf(why, why_size, "unknown sku %s", l->sku);
            return HF_OK;
        }
        route_plan_t plan;
        /* Escrow: where this partition's own balances cover the line, it is
         * routed there (held in one hop); else on the network view. */
        hf_availability_t local;
        bool mine = false;
        if (line.avail && !gw_is_rebook(rs) && gw_escrow_mode(ctx, l->sku)) {
            int err = gw_escrow_local_view(ctx, l->sku, line.avail, &local, &mine);
            if (err)
                return err;
        }
        route_result_t rr = ROUTE_INSUFFICIENT;
        if (mine && local.total >= l->qty) {
            route_line_t own = line;
            own.avail = &local;
            rr = route_strategy_for(l->sku)(&env->routes, &own, &plan) == ROUTE_OK
                     ? ROUTE_OK
                     : ROUTE_INSUFFICIENT;
        }
        if (rr != ROUTE_OK)
            rr = route_strategy_for(l->sku)(&env->routes, &line, &plan);
        if (rr == ROUTE_INSUFFICIENT && takes_partial(rs)) {
            int64_t can = route_coverable(&env->routes, &line);
            cut_line(rs, i, can);
            if (can == 0)
                continue; /* dropped below */
            line.qty = can;
            rr = route_strategy_for(l->sku)(&env->routes, &line, &plan);
            hf_assert(rr != ROUTE_INSUFFICIENT);
        }
        if (rr == ROUTE_INSUFFICIENT) {
            *end = GW_SAGA_INSUFFICIENT;
            if (rs->only_warehouses_count > 0 || line.ship_from) /* the total says nothing */
                snprintf(why, why_size, "sku %s: %lld asked, not available at %s", l->sku,
                         (long long)l->qty,
                         rs->only_warehouses_count > 0 ? "only_warehouses"
                                                       : "the warehouses it ships from");
            else
                snprintf(why, why_size, "sku %s: %lld asked, %lld available in the network", l->sku,
                         (long long)l->qty, line.avail ? (long long)line.avail->total : 0LL);
            return HF_OK;
        }
        if (add_plan(rs, &plan) != HF_OK) {
            *end = GW_SAGA_INVALID;
            snprintf(why, why_size, "the reservation needs more than %d holds", HF_ALLOCATIONS_MAX);
            return HF_OK;
        }
    }
    if (takes_partial(rs) && !drop_empty_lines(rs)) {
        *end = GW_SAGA_INSUFFICIENT;
        snprintf(why, why_size, "none of the lines is available in the network (allow_partial)");
        return HF_OK;
    }
    return send_round(ctx, rs, env, !gw_is_rebook(rs));
}

int gw_saga_restart(stage_ctx_t *ctx, hf_reservation_state_t *rs, bool *restarted)
{
    *restarted = false;
    const gateway_env_t *env = gateway_env(ctx);
    hf_hold_ref_t again[HF_ALLOCATIONS_MAX];
    int32_t n = 0;
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        if (h->status != HF_HOLD_REF_RELEASE_SENT || h->available_seen < 0)
            continue; /* refused, or released before it was confirmed held */
        /* A warehouse the rules no longer allow (a ship-from list or a store
         * configured since the hold): route afresh instead (gw_saga_start). */
        hf_line_t l = {.qty = h->qty};
        snprintf(l.sku, sizeof l.sku, "%s", h->sku);
        route_line_t line = gw_route_line(env, rs->only_warehouses, rs->only_warehouses_count,
                                          &rs->ship_to, &l, h->qty, NULL, NULL, 0);
        const route_warehouse_t *w = route_warehouse(&env->routes, h->warehouse_id);
        if (!w || !route_may_use(&env->routes, &line, w))
            return HF_OK;
        again[n] = *h;
        again[n].status = HF_HOLD_REF_HOLD_SENT;
        again[n].attempt = rs->next_attempt;
        again[n].escrow = false; /* asked of its counter this time */
        again[n++].available_seen = 0;
    }
    for (int32_t l = 0; l < rs->lines_count; l++) { /* do they cover every line exactly? */
        int64_t qty = 0;
        for (int32_t i = 0; i < n; i++)
            if (strcmp(again[i].sku, rs->lines[l].sku) == 0)
                qty += again[i].qty;
        if (qty != rs->lines[l].qty)
            return HF_OK;
    }
    memcpy(rs->allocations, again, sizeof again[0] * (size_t)n);
    rs->allocations_count = n;
    *restarted = true;
    return send_round(ctx, rs, env, false);
}

/* Drops refused holds (nothing reserved, nothing to release) to make room. */
static void compact(hf_reservation_state_t *rs)
{
    int32_t n = 0;
    for (int32_t i = 0; i < rs->allocations_count; i++)
        if (rs->allocations[i].status != HF_HOLD_REF_REFUSED)
            rs->allocations[n++] = rs->allocations[i];
    rs->allocations_count = n;
}

/* Routes the missing quantity of one line with what this reservation learnt:
 * warehouses already holding the line are not asked again, refused ones are
 * routed with the availability their counter reported. With partial, what of
 * it can be covered when not all can; *routed_qty is the quantity routed. */
static route_result_t reroute_line(stage_ctx_t *ctx, const gateway_env_t *env,
                                   const hf_reservation_state_t *rs, const hf_line_t *l,
                                   int64_t missing, bool partial, int64_t *routed_qty,
                                   route_plan_t *plan)
{
    *routed_qty = 0;
    hf_availability_t av;
    bool unknown = false;
    const hf_availability_t *view = view_for(ctx, env, rs, l->sku, &av, &unknown);
    const char *exclude[HF_ALLOCATIONS_MAX];
    size_t excluded = 0;
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        if (strcmp(h->sku, l->sku) != 0)
            continue;
        if (h->status == HF_HOLD_REF_HELD || (!view && h->status == HF_HOLD_REF_REFUSED)) {
            exclude[excluded++] = h->warehouse_id;
            continue;
        }
        for (int32_t w = 0; view && h->status == HF_HOLD_REF_REFUSED && w < av.warehouses_count;
             w++)
            if (strcmp(av.warehouses[w].warehouse_id, h->warehouse_id) == 0)
                av.warehouses[w].available = h->available_seen;
    }
    route_line_t line = gw_route_line(env, rs->only_warehouses, rs->only_warehouses_count,
                                      &rs->ship_to, l, missing, view, exclude, excluded);
    route_result_t rr = route_strategy_for(l->sku)(&env->routes, &line, plan);
    if (rr == ROUTE_INSUFFICIENT && partial && (line.qty = route_coverable(&env->routes, &line)))
        rr = route_strategy_for(l->sku)(&env->routes, &line, plan);
    if (rr != ROUTE_INSUFFICIENT)
        *routed_qty = line.qty;
    return rr;
}

int gw_saga_reject(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *why)
{
    int err = gw_release_holds(ctx, rs, "rollback");
    if (!err && rs->result_deadline_ms != 0) /* no result is awaited any more */
        err = gw_timer_del(ctx, rs->result_deadline_ms, GW_TIMER_PENDING, rs->reservation_id);
    if (err)
        return err;
    rs->status = HF_RES_REJECTED;
    snprintf(rs->reason, sizeof rs->reason, "%s", why);
    rs->result_deadline_ms = 0;
    return gw_end(ctx, rs,
                  &(gw_end_t){.store = true,
                              .reserve = true,
                              .reserve_outcome = HF_REPLY_REJECTED_INSUFFICIENT,
                              .reserve_message = why,
                              .ledger = true,
                              .ledger_kind = HF_LEDGER_REJECTED,
                              .ledger_reason = why});
}

int gw_saga_hold(stage_ctx_t *ctx, hf_reservation_state_t *rs, int64_t answered_at_ms)
{
    /* Every result is in: the lost-result timer of this round is stale. */
    int err = rs->result_deadline_ms == 0
                  ? HF_OK
                  : gw_timer_del(ctx, rs->result_deadline_ms, GW_TIMER_PENDING, rs->reservation_id);
    if (err)
        return err;
    rs->status = HF_RES_HELD;
    rs->result_deadline_ms = 0;
    /* Told by its counter (park.c) at answered_at_ms, when it applied the hold:
     * the reply and the ledger's HELD event went out with the hold; the answer
     * is only recorded here, for retries. */
    bool told = gw_counter_told(rs);
    hf_assert(!told || answered_at_ms > 0);
    /* A partial hold says what was asked and not held: "partially held: ..." */
    const char *note = rs->allow_partial ? rs->reason : "";
    err = gw_end(ctx, rs,
                 &(gw_end_t){.store = true,
                             .reserve = true,
                             .reserve_outcome = HF_REPLY_HELD,
                             .reserve_message = note,
                             .reserve_told_at_ms = told ? answered_at_ms : 0,
                             .ledger = !told,
                             .ledger_kind = HF_LEDGER_HELD,
                             .ledger_reason = note});
    return err ? err : gw_timer_add(ctx, rs->expires_at_ms, GW_TIMER_EXPIRY, rs->reservation_id);
}

int gw_saga_settle(stage_ctx_t *ctx, hf_reservation_state_t *rs, gw_saga_end_t *end, char *why,
                   size_t why_size)
{
    hf_assert(gw_saga_open(rs) && gw_all_answered(rs));
    const gateway_env_t *env = gateway_env(ctx);
    *end = GW_SAGA_INSUFFICIENT;
    route_plan_t plans[HF_LINES_MAX];
    bool missing_any = false;
    /* plans[i] is line i's before a partial reservation drops its empty lines */
    int32_t lines = rs->lines_count;
    for (int32_t i = 0; i < lines; i++) {
        plans[i].count = 0;
        int64_t missing = rs->lines[i].qty - gw_held_qty(rs, rs->lines[i].sku);
        hf_assert(missing >= 0);
        if (missing == 0)
            continue;
        int64_t routed = 0;
        bool ok = rs->reroutes < HF_REROUTES_MAX &&
                  reroute_line(ctx, env, rs, &rs->lines[i], missing, takes_partial(rs), &routed,
                               &plans[i]) != ROUTE_INSUFFICIENT;
        if (!ok)
            plans[i].count = 0;
        if (ok && routed == missing) {
            missing_any = true;
            continue;
        }
        if (!takes_partial(rs)) {
            snprintf(why, why_size, "insufficient stock in the network");
            return HF_OK;
        }
        /* What it holds, and what of the rest can still be asked for. */
        cut_line(rs, i, rs->lines[i].qty - missing + routed);
        missing_any = missing_any || routed > 0;
    }
    if (takes_partial(rs) && !drop_empty_lines(rs)) {
        snprintf(why, why_size, "none of the lines could be held (allow_partial)");
        return HF_OK;
    }
    if (!missing_any) {
        *end = GW_SAGA_HELD;
        return HF_OK;
    }
    size_t needed = 0;
    for (int32_t i = 0; i < lines; i++)
        needed += plans[i].count;
    if (rs->allocations_count + (int32_t)needed > HF_ALLOCATIONS_MAX)
        compact(rs);
    for (int32_t i = 0; i < lines; i++)
        if (add_plan(rs, &plans[i]) != HF_OK) {
            snprintf(why, why_size, "too many holds after re-routing");
            return HF_OK;
        }
    rs->reroutes++;
    log_debug("gateway", "%s: re-routing round %d", rs->reservation_id, rs->reroutes);
    *end = GW_SAGA_ASKED;
    int err = send_round(ctx, rs, env, false);
    return err ? err : gw_store(ctx, rs);
}
