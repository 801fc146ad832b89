/* What happens on a PaymentEvent: the payment provider's news drives the hold,
 * per payment_policy (gateway_env.c parses it; docs/CONFIGURATION.md):
 *   SUCCEEDED        commits, exactly as a Commit (commit.c: a late one is a
 *                    late payment, a retry gets the first answer);
 *   PROCESSING,      (pending; extend by default) keep the hold until
 *   REQUIRES_ACTION  now + payment_pending_extend_ms, never past the pending cap:
 *                    created_at + payment_pending_max_ms, or the hold deadline
 *                    an Extend may reach if that is later;
 *   FAILED           (keep by default: most providers let the shopper try
 *                    another card) or release at once;
 *   CANCELED         (release by default) the units go back in this
 *                    transaction, "payment_canceled[: provider reason]" in the
 *                    ledger's RELEASED event.
 * The event id is the idempotency key: a redelivered event gets the first
 * answer. Events that come out of order never move a terminal state: a failure
 * after the success is answered COMMITTED and changes nothing; any event for a
 * released or expired reservation is answered as it stands (a late success is
 * a late payment, as for a Commit). A reservation still PENDING is released
 * by a releasing event (as a Release would) and answered BUSY, not kept, for
 * the others: the webhook answers the provider 503, and its redelivery once it
 * is HELD applies. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"

/* "payment_failed" or "payment_canceled", then the provider's reason if any. */
static void release_reason(const hf_payment_event_t *p, char *out, size_t out_size)
{
    const char *what = p->event == HF_PAY_FAILED ? "payment_failed" : "payment_canceled";
    if (p->reason[0]) /* at most HF_PAYMENT_REASON_LEN_MAX (check_body) */
        snprintf(out, out_size, "%s: %.200s", what, p->reason);
    else
        snprintf(out, out_size, "%s", what);
}

/* A pending payment keeps rs held a while longer, up to the pending cap —
 * unless a stock shortfall recalls the allotment its units sit in (escrow.c):
 * then it ends now, as a Commit would end it, and the payment that may follow
 * is refunded (commit.c). */
static int hold_while_pending(stage_ctx_t *ctx, gw_request_t *req)
{
    const gateway_env_t *env = gateway_env(ctx);
    hf_reservation_state_t *rs = &req->rs;
    bool revoked = false;
    int err = gw_escrow_revoke_owed(ctx, rs, &revoked);
    if (err || revoked)
        return err ? err
                   : gw_answer(ctx, rs, &req->asker, HF_REPLY_RELEASED,
                               "reservation was released: stock_shortfall");
    int64_t cap = rs->created_at_ms + env->payment_pending_max_ms;
    if (cap < rs->hold_deadline_ms)
        cap = rs->hold_deadline_ms;
    int64_t want = stage_now_ms(ctx) + env->payment_pending_extend_ms;
    int64_t next = want < cap ? want : cap;
    if (next > rs->expires_at_ms && (err = gw_extend_to(ctx, rs, next)) != HF_OK)
        return err;
    return gw_answer(ctx, rs, &req->asker, HF_REPLY_HELD,
                     next < want ? "held while the payment is pending, up to its cap "
                                   "(payment_pending_max_ms)"
                                 : "held while the payment is pending");
}

/* An ended reservation is answered as it stands: no event undoes an end. */
static int answer_ended(stage_ctx_t *ctx, gw_request_t *req, const hf_payment_event_t *p)
{
    hf_reservation_state_t *rs = &req->rs;
    hf_reply_outcome_t outcome = rs->status == HF_RES_COMMITTED  ? HF_REPLY_COMMITTED
                                 : rs->status == HF_RES_RELEASED ? HF_REPLY_RELEASED
                                 : rs->status == HF_RES_EXPIRED  ? HF_REPLY_EXPIRED
                                                                 : HF_REPLY_CONFLICT;
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg, "reservation is %s; a %s payment event does not change it",
             hf_res_status_name(rs->status), hf_payment_event_kind_name(p->event));
    return gw_answer(ctx, rs, &req->asker, outcome, msg);
}

int gateway_on_payment_event(stage_ctx_t *ctx, const hf_record_t *rec)
{
    gw_request_t req;
    int err = gw_request_begin(ctx, rec, &req);
    if (err || req.result != GW_REQ_FOUND)
        return err;
    const hf_payment_event_t *p = &rec->u.payment_event;
    hf_assert(p->event > HF_PAY_UNKNOWN && p->event < HF_PAY__COUNT); /* gw_request_begin */
    gw_pay_action_t action =
        p->event == HF_PAY_SUCCEEDED ? GW_PAY_COMMIT : gateway_env(ctx)->payment_action[p->event];
    if (action == GW_PAY_COMMIT) {
        hf_commit_t c;
        memset(&c, 0, sizeof c);
        snprintf(c.reservation_id, sizeof c.reservation_id, "%s", p->reservation_id);
        snprintf(c.idempotency_key, sizeof c.idempotency_key, "%s", p->idempotency_key);
        snprintf(c.payment_id, sizeof c.payment_id, "%s", p->payment_id);
        snprintf(c.reply_to, sizeof c.reply_to, "%s", p->reply_to);
        c.sent_at_ms = p->sent_at_ms;
        return gw_commit_request(ctx, &req, &c);
    }
    hf_reservation_state_t *rs = &req.rs;
    if (rs->status == HF_RES_HELD && stage_now_ms(ctx) >= rs->expires_at_ms) {
        err = gw_expire(ctx, rs); /* the sweeper has not got to it yet */
        if (err)
            return err;
    }
    if (rs->status != HF_RES_HELD && rs->status != HF_RES_PENDING)
        return answer_ended(ctx, &req, p);
    if (action == GW_PAY_RELEASE) {
        char reason[HF_TEXT_LEN_MAX + 1];
        release_reason(p, reason, sizeof reason);
        return gw_release_open(ctx, &req, reason);
    }
    if (rs->status == HF_RES_PENDING) /* not kept: BUSY, so the provider delivers it again */
        return gw_reply_simple(ctx, &req.asker, HF_REPLY_BUSY,
                               "reservation is not held yet: retry with the same idempotency key");
    if (action == GW_PAY_EXTEND && gateway_env(ctx)->payment_pending_extend_ms > 0)
        return hold_while_pending(ctx, &req);
    return gw_answer(ctx, rs, &req.asker, HF_REPLY_HELD,
                     "noted; the hold runs to its expiry (payment_policy)");
}
