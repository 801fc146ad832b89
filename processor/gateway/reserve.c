/* What happens on Reserve: the idempotency key answers retries (the reply stored
 * in the reservation, or CONFLICT for another body); a request that cannot be served is told
 * REJECTED_INVALID; otherwise every line is routed, the reservation is recorded
 * PENDING with its absolute expires_at_ms (computed once, here) and the Holds go
 * to the counters. The answer follows when their results are in (saga.c). */
#include <stdio.h>
#include <string.h>

#include "gateway.h"

static void init_state(stage_ctx_t *ctx, const gateway_env_t *env, const hf_reserve_t *r,
                       int64_t hash, hf_reservation_state_t *rs)
{
    memset(rs, 0, sizeof *rs);
    snprintf(rs->reservation_id, sizeof rs->reservation_id, "%s", r->reservation_id);
    snprintf(rs->idempotency_key, sizeof rs->idempotency_key, "%s", r->idempotency_key);
    rs->status = GW_RES_PENDING;
    rs->lines_count = r->lines_count;
    memcpy(rs->lines, r->lines, sizeof r->lines[0] * (size_t)r->lines_count);
    rs->ship_to = r->ship_to;
    rs->request_hash = hash;
    snprintf(rs->reply_to, sizeof rs->reply_to, "%s", r->reply_to);
    snprintf(rs->campaign, sizeof rs->campaign, "%s", r->campaign);
    int64_t now = stage_now_ms(ctx), ttl_ms = gw_ttl_ms(env, r);
    rs->created_at_ms = now;
    rs->expires_at_ms = now + ttl_ms;
    rs->hold_deadline_ms = now + ttl_ms * env->hold_max_factor_pct / 100;
}

/* A reserve the network cannot serve still gets a reservation record (REJECTED),
 * a stored reply and its one terminal ledger event. */
static int reject_at_start(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                           const char *msg)
{
    rs->status = GW_RES_REJECTED;
    snprintf(rs->reason, sizeof rs->reason, "%s", msg);
    rs->allocations_count = 0;
    hf_reply_t reply;
    gw_reserve_answer(ctx, rs, outcome, msg, &reply);
    int err = gw_store(ctx, rs);
    if (!err)
        err = gw_emit_reply(ctx, rs->reply_to, &reply);
    if (!err)
        err = gw_emit_ledger(ctx, rs, HF_LEDGER_REJECTED, msg);
    return err;
}

int gateway_on_reserve(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_reserve_t *r = &rec->u.reserve;
    bool answered = false;
    int err = gw_check_request(ctx, r->reservation_id, r->idempotency_key, r->reply_to, &answered);
    if (err || answered)
        return err;
    const gateway_env_t *env = gateway_env(ctx);
    if (!env)
        return HF_ERR_CONFIG;
    char msg[HF_TEXT_LEN_MAX + 1];
    const char *bad = gw_check_id(r->idempotency_key,
                                  "idempotency_key must be non-empty, printable, without '|'");
    if (!bad)
        bad = gw_check_reserve(r, msg, sizeof msg);
    if (bad)
        return gw_reply_simple(ctx, r->reservation_id, r->idempotency_key, r->reply_to,
                               HF_REPLY_REJECTED_INVALID, bad);
    int64_t hash = gw_request_hash(rec);
    bool handled = false;
    err = gw_reserve_idem_check(ctx, r, hash, &handled);
    if (err || handled)
        return err;
    /* Only a reservation not known yet is shed: a retry of one already applied
     * gets its answer (or, while pending, none) as always, never BUSY. */
    const char *busy = gw_shed_reserve(ctx, env, r, msg, sizeof msg);
    if (busy)
        return gw_reply_simple(ctx, r->reservation_id, r->idempotency_key, r->reply_to,
                               HF_REPLY_BUSY, busy);

    hf_reservation_state_t rs;
    init_state(ctx, env, r, hash, &rs);
    bool rejected = false;
    hf_reply_outcome_t outcome = HF_REPLY_REJECTED_INVALID;
    err = gw_saga_start(ctx, &rs, &rejected, &outcome, msg, sizeof msg);
    if (err)
        return err;
    if (rejected && outcome == HF_REPLY_REJECTED_INVALID) /* e.g. unknown sku: nothing recorded */
        return gw_reply_simple(ctx, r->reservation_id, r->idempotency_key, r->reply_to, outcome,
                               msg);
    if (rejected)
        return reject_at_start(ctx, &rs, outcome, msg);
    /* PENDING and not yet answered (reserve_replied false): a retry now gets
     * no second answer (gw_reserve_idem_check). */
    return gw_store(ctx, &rs);
}
