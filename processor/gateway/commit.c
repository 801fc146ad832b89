/* What happens on Commit (the payment webhook): a guarded transition HELD ->
 * COMMITTED. The commit is decided here, by the reservation's single writer, so
 * a commit racing the expiry sweeper has exactly one winner: a commit at or
 * after expires_at_ms finds the reservation expired (and expires it if the
 * sweeper has not yet) and is a late payment (late_payment.c: refunded, or
 * re-reserved and committed, per late_payment_policy). A commit of a
 * reservation a stock shortfall released answers CONFLICT and flags the
 * payment for refund, and so does a commit of units in an allotment a stock
 * shortfall recalls (escrow.c: the counter would refuse their sale). A
 * retried webhook gets the first answer (by idempotency key, and by payment_id,
 * which also keeps a payment from being flagged twice). */
#include <stdio.h>
#include <string.h>

#include "gateway.h"

static int commit_held(stage_ctx_t *ctx, const hf_commit_t *c, gw_request_t *req)
{
    hf_reservation_state_t *rs = &req->rs;
    int err = gw_commit_holds(ctx, rs);
    if (!err) /* sold: its expiry timer is stale */
        err = gw_timer_del(ctx, rs->expires_at_ms, GW_TIMER_EXPIRY, rs->reservation_id);
    if (err)
        return err;
    rs->status = HF_RES_COMMITTED;
    snprintf(rs->payment_id, sizeof rs->payment_id, "%s", c->payment_id);
    return gw_end(ctx, rs,
                  &(gw_end_t){.store = true,
                              .asker = &req->asker,
                              .outcome = HF_REPLY_COMMITTED,
                              .message = "",
                              .ledger = true,
                              .ledger_kind = HF_LEDGER_COMMITTED,
                              .ledger_reason = ""});
}

int gw_commit_request(stage_ctx_t *ctx, gw_request_t *req, const hf_commit_t *c)
{
    hf_reservation_state_t *rs = &req->rs;
    const gw_asker_t *a = &req->asker;
    switch (rs->status) {
    case HF_RES_HELD: {
        /* A stock shortfall recalls the allotment its units sit in: the
         * counter would refuse the sale. */
        bool revoked = false;
        int err = gw_escrow_revoke_owed(ctx, rs, &revoked);
        if (err || revoked)
            return err ? err
                       : gw_refund_payment(ctx, rs, c->payment_id, a, HF_REPLY_CONFLICT,
                                           "reservation was released: stock_shortfall; payment "
                                           "flagged for refund");
        if (stage_now_ms(ctx) < rs->expires_at_ms)
            return commit_held(ctx, c, req);
        err = gw_expire(ctx, rs); /* the sweeper has not got to it yet */
        return err ? err : gw_late_payment(ctx, c, a, rs);
    }
    case HF_RES_EXPIRED:
        return gw_late_payment(ctx, c, a, rs);
    case HF_RES_COMMITTED:
        if (strcmp(rs->payment_id, c->payment_id) == 0)
            return gw_answer(ctx, rs, a, HF_REPLY_COMMITTED, "already committed by this payment");
        return gw_answer(ctx, rs, a, HF_REPLY_CONFLICT, "already committed by another payment");
    case HF_RES_RELEASED:
        /* The stock was revoked under the shopper (a count found less than was
         * held), or a payment event released it (payment_policy) and the
         * shopper paid after all: the payment cannot buy anything, so it is
         * refunded. */
        if (gw_res_released_for_payment(rs)) {
            char msg[HF_TEXT_LEN_MAX + 1];
            snprintf(msg, sizeof msg,
                     "reservation was released: %.160s; payment flagged for refund", rs->reason);
            return gw_refund_payment(ctx, rs, c->payment_id, a, HF_REPLY_CONFLICT, msg);
        }
        break;
    case HF_RES_PENDING:
        /* Not applied, not stored: BUSY, so that a payment provider's webhook
         * (answered 503) delivers it again and the retry once HELD commits; a
         * CONFLICT would be final to the provider, and the sale lost. */
        return gw_reply_simple(ctx, a, HF_REPLY_BUSY,
                               "reservation is not held yet: retry with the same idempotency key");
    default:
        break;
    }
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg, "reservation is %s", hf_res_status_name(rs->status));
    return gw_answer(ctx, rs, a, HF_REPLY_CONFLICT, msg);
}

int gateway_on_commit(stage_ctx_t *ctx, const hf_record_t *rec)
{
    gw_request_t req;
    int err = gw_request_begin(ctx, rec, &req);
    if (err || req.result != GW_REQ_FOUND)
        return err;
    return gw_commit_request(ctx, &req, &rec->u.commit);
}
