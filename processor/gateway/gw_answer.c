/* The one way a gateway request or transition ends (gw_end): the reservation
 * stored, a payment flagged, the answer kept for retries (in the reservation for
 * its Reserve, in an IdempotencyRecord for the others), the reply emitted, the
 * ledger told — always in that order. Also the replies that keep nothing, and
 * the transition that releases a reservation's holds (gw_finish, gw_expire). */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"
#include "metrics_flow.h"

/* When the request `to` stands for reached holdfast.requests: the timestamp of
 * the record at hand when it is that request (its broker append time), else
 * the time the asker carries (a Reserve answered after its holds' results: its
 * timestamp kept in the reservation, or when the gateway applied it for one
 * stored before that was kept), else -1 (a parked request, a late payment's
 * re-reservation). */
static int64_t requested_at_ms(stage_ctx_t *ctx, const gw_asker_t *to)
{
    int64_t ts = stage_input_timestamp_ms(ctx, to->kind);
    size_t key_len = 0;
    const void *key = stage_record_key(ctx, &key_len);
    if (ts > 0 && key && key_len == strlen(to->reservation_id) &&
        memcmp(key, to->reservation_id, key_len) == 0)
        return ts;
    return to->requested_at_ms > 0 ? to->requested_at_ms : -1;
}

int gw_emit_reply(stage_ctx_t *ctx, const gw_asker_t *to, const hf_reply_t *reply)
{
    hf_record_t rec;
    rec.type = HF_REC_REPLY;
    rec.u.reply = *reply;
    int err = stage_emit_to(ctx, gw_reply_topic(to->reply_to), reply->reservation_id,
                            strlen(reply->reservation_id), &rec);
    if (err)
        return err;
    int64_t since_ms = requested_at_ms(ctx, to);
    metrics_reply(stage_metrics(ctx), to->kind, reply->outcome,
                  since_ms > 0 ? reply->replied_at_ms - since_ms : -1);
    return HF_OK;
}

int gw_reply_simple(stage_ctx_t *ctx, const gw_asker_t *to, hf_reply_outcome_t outcome,
                    const char *message)
{
    hf_reply_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.reservation_id, sizeof r.reservation_id, "%s", to->reservation_id);
    snprintf(r.idempotency_key, sizeof r.idempotency_key, "%s", to->idempotency_key);
    r.outcome = outcome;
    snprintf(r.message, sizeof r.message, "%s", message);
    r.replied_at_ms = stage_now_ms(ctx);
    return gw_emit_reply(ctx, to, &r);
}

/* A reply about rs (its HELD holds as allocations when it is held or sold). */
static void reply_init(const hf_reservation_state_t *rs, const char *idempotency_key,
                       hf_reply_outcome_t outcome, const char *message, int64_t now_ms,
                       hf_reply_t *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->reservation_id, sizeof out->reservation_id, "%s", rs->reservation_id);
    snprintf(out->idempotency_key, sizeof out->idempotency_key, "%s", idempotency_key);
    out->outcome = outcome;
    snprintf(out->message, sizeof out->message, "%s", message ? message : "");
    out->replied_at_ms = now_ms;
    bool with_allocs = outcome == HF_REPLY_HELD || outcome == HF_REPLY_COMMITTED;
    for (int32_t i = 0; with_allocs && i < rs->allocations_count; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        if (h->status != HF_HOLD_REF_HELD)
            continue;
        hf_allocation_t *a = &out->allocations[out->allocations_count++];
        snprintf(a->warehouse_id, sizeof a->warehouse_id, "%s", h->warehouse_id);
        snprintf(a->sku, sizeof a->sku, "%s", h->sku);
        a->qty = h->qty;
    }
    if (outcome == HF_REPLY_HELD)
        out->expires_at_ms = rs->expires_at_ms;
}

/* Records in rs the answer to its Reserve (a Reserve is answered once) and
 * fills *reply to emit. Its idempotency is the reservation itself, so the
 * Reserve's transaction and the one that answers it each write only R. */
static void reserve_answer(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                           const char *message, hf_reply_t *reply)
{
    hf_assert(!rs->reserve_replied);
    reply_init(rs, rs->idempotency_key, outcome, message, stage_now_ms(ctx), reply);
    rs->reserve_replied = true;
    rs->reserve_reply = *reply;
    /* The reservation's own ids: not stored twice (the prologue puts them back
     * when it answers a retry). */
    rs->reserve_reply.reservation_id[0] = '\0';
    rs->reserve_reply.idempotency_key[0] = '\0';
}

int gw_idem_store(stage_ctx_t *ctx, const gw_asker_t *asker, const hf_reply_t *reply)
{
    char key[GW_KEY_MAX];
    size_t len = gw_idem_key(key, asker->reservation_id, asker->idempotency_key);
    hf_idempotency_record_t ir_buf, *ir = &ir_buf;
    bool first = true;
    int err = stage_get_as(ctx, key, len, HF_REC_IDEMPOTENCY_RECORD, ir);
    if (err == HF_OK) {
        first = false;
    } else if (err != HF_ERR_NOTFOUND) {
        return err;
    } else {
        memset(ir, 0, sizeof *ir);
        ir->stored_at_ms = stage_now_ms(ctx);
    }
    ir->request_hash = asker->hash;
    ir->complete = reply != NULL;
    if (reply)
        ir->reply = *reply;
    err = stage_put_as(ctx, key, len, HF_REC_IDEMPOTENCY_RECORD, ir);
    if (err || !first)
        return err;
    const gateway_env_t *env = gateway_env(ctx);
    char ref[GW_KEY_MAX];
    snprintf(ref, sizeof ref, "%s|%s", asker->reservation_id, asker->idempotency_key);
    return gw_timer_add(ctx, ir->stored_at_ms + env->idempotency_retention_ms, GW_TIMER_IDEMPOTENCY,
                        ref);
}

int gw_end(stage_ctx_t *ctx, hf_reservation_state_t *rs, const gw_end_t *end)
{
    hf_assert(!end->reserve || end->store); /* the Reserve's answer lives in rs */
    hf_reply_t reserve_reply, reply;
    if (end->reserve)
        reserve_answer(ctx, rs, end->reserve_outcome, end->reserve_message, &reserve_reply);
    if (end->reserve && end->reserve_told_at_ms > 0) /* a retry gets what was sent */
        rs->reserve_reply.replied_at_ms = end->reserve_told_at_ms;
    int err = end->store ? gw_store(ctx, rs) : HF_OK;
    if (!err && end->refund_payment_id)
        err = gw_flag_refund(ctx, rs, end->refund_payment_id, NULL);
    if (!err && end->asker) {
        reply_init(rs, end->asker->idempotency_key, end->outcome, end->message, stage_now_ms(ctx),
                   &reply);
        err = gw_idem_store(ctx, end->asker, &reply);
    }
    if (!err && end->reserve && end->reserve_told_at_ms <= 0) {
        /* Answered in a later transaction, the Reserve's latency counts from its
         * timestamp on holdfast.requests, kept in rs; from when the gateway
         * applied it for a reservation stored before that was kept. */
        int64_t since_ms = rs->requested_at_ms > 0 ? rs->requested_at_ms : rs->created_at_ms;
        gw_asker_t reserver = {rs->reservation_id, rs->idempotency_key, rs->reply_to,
                               rs->request_hash,   HF_REC_RESERVE,      since_ms};
        err = gw_emit_reply(ctx, &reserver, &reserve_reply);
    }
    if (!err && end->asker)
        err = gw_emit_reply(ctx, end->asker, &reply);
    if (!err && end->ledger)
        err = gw_emit_ledger(ctx, rs, end->ledger_kind, end->ledger_reason);
    return err;
}

int gw_answer(stage_ctx_t *ctx, hf_reservation_state_t *rs, const gw_asker_t *asker,
              hf_reply_outcome_t outcome, const char *message)
{
    return gw_end(ctx, rs, &(gw_end_t){.asker = asker, .outcome = outcome, .message = message});
}

int gw_end_holds(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_res_status_t status,
                 const char *reason)
{
    hf_assert(!gw_res_terminal(rs->status));
    int err = gw_release_holds(ctx, rs, reason);
    /* Its timers go stale with it: the lost-result one, and the expiry of a
     * HELD one (when the expiry timer fired, it has deleted itself already and
     * this delete is the same tombstone again; an expiry found lazily by a
     * later request leaves it behind otherwise). */
    if (!err && rs->result_deadline_ms != 0)
        err = gw_timer_del(ctx, rs->result_deadline_ms, GW_TIMER_PENDING, rs->reservation_id);
    if (!err && rs->status == HF_RES_HELD)
        err = gw_timer_del(ctx, rs->expires_at_ms, GW_TIMER_EXPIRY, rs->reservation_id);
    if (err)
        return err;
    rs->status = status;
    rs->result_deadline_ms = 0;
    snprintf(rs->reason, sizeof rs->reason, "%s", reason);
    return HF_OK;
}

int gw_finish(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_res_status_t status,
              hf_ledger_kind_t kind, const char *reason)
{
    int err = gw_end_holds(ctx, rs, status, reason);
    return err ? err
               : gw_end(ctx, rs,
                        &(gw_end_t){.store = true,
                                    .ledger = true,
                                    .ledger_kind = kind,
                                    .ledger_reason = reason});
}

int gw_expire(stage_ctx_t *ctx, hf_reservation_state_t *rs)
{
    hf_assert(rs->status == HF_RES_HELD && rs->expires_at_ms <= stage_now_ms(ctx));
    int64_t expires_at_ms = rs->expires_at_ms;
    int err = gw_finish(ctx, rs, HF_RES_EXPIRED, HF_LEDGER_EXPIRED, "expired");
    if (!err) /* holdfast_expiry_lag_ms: how late the TTL was acted on */
        metrics_expiry(stage_metrics(ctx), stage_now_ms(ctx) - expires_at_ms);
    return err;
}
