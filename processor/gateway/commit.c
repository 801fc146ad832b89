/* What happens on Commit (the payment webhook): a guarded transition HELD ->
 * COMMITTED. The commit is decided here, by the reservation's single writer, so
 * a commit racing the expiry sweeper has exactly one winner: a commit at or
 * after expires_at_ms finds the reservation expired (and expires it if the
 * sweeper has not yet) and is a late payment (late_payment.c: refunded, or
 * re-reserved and committed, per late_payment_policy). A commit of a
 * reservation a stock shortfall released answers CONFLICT and flags the
 * payment for refund. A
 * retried webhook gets the first answer (by idempotency key, and by payment_id,
 * which also keeps a payment from being flagged twice). */
#include <stdio.h>
#include <string.h>

#include "gateway.h"

static int reply_stored(stage_ctx_t *ctx, const hf_commit_t *c, int64_t hash,
                        const hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                        const char *msg)
{
    return gw_answer(ctx, rs, c->idempotency_key, hash, c->reply_to, outcome, msg);
}

static int commit_held(stage_ctx_t *ctx, const hf_commit_t *c, int64_t hash,
                       hf_reservation_state_t *rs)
{
    int err = gw_commit_holds(ctx, rs);
    if (err)
        return err;
    rs->status = GW_RES_COMMITTED;
    snprintf(rs->payment_id, sizeof rs->payment_id, "%s", c->payment_id);
    err = gw_store(ctx, rs);
    if (!err)
        err = gw_emit_ledger(ctx, rs, HF_LEDGER_COMMITTED, "");
    return err ? err : reply_stored(ctx, c, hash, rs, HF_REPLY_COMMITTED, "");
}

int gateway_on_commit(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_commit_t *c = &rec->u.commit;
    bool answered = false;
    int err = gw_check_request(ctx, c->reservation_id, c->idempotency_key, c->reply_to, &answered);
    if (err || answered)
        return err;
    const char *bad = gw_check_id(c->idempotency_key,
                                  "idempotency_key must be non-empty, printable, without '|'");
    if (!bad)
        bad = gw_check_id(c->payment_id, "payment_id must be non-empty, printable, without '|'");
    if (bad)
        return gw_reply_simple(ctx, c->reservation_id, c->idempotency_key, c->reply_to,
                               HF_REPLY_REJECTED_INVALID, bad);
    int64_t hash = gw_request_hash(rec);
    bool handled = false;
    err = gw_idem_check(ctx, c->reservation_id, c->idempotency_key, hash, c->reply_to, &handled);
    if (err || handled)
        return err;
    hf_reservation_state_t rs;
    err = gw_load(ctx, c->reservation_id, &rs);
    if (err == HF_ERR_NOTFOUND)
        return gw_reply_simple(ctx, c->reservation_id, c->idempotency_key, c->reply_to,
                               HF_REPLY_NOT_FOUND, "no such reservation");
    if (err)
        return err;

    switch (rs.status) {
    case GW_RES_HELD:
        if (stage_now_ms(ctx) < rs.expires_at_ms)
            return commit_held(ctx, c, hash, &rs);
        err = gw_expire(ctx, &rs); /* the sweeper has not got to it yet */
        return err ? err : gw_late_payment(ctx, c, hash, &rs);
    case GW_RES_EXPIRED:
        return gw_late_payment(ctx, c, hash, &rs);
    case GW_RES_COMMITTED:
        if (strcmp(rs.payment_id, c->payment_id) == 0)
            return reply_stored(ctx, c, hash, &rs, HF_REPLY_COMMITTED,
                                "already committed by this payment");
        return reply_stored(ctx, c, hash, &rs, HF_REPLY_CONFLICT,
                            "already committed by another payment");
    case GW_RES_RELEASED:
        /* The stock was revoked under the shopper (a count found less than was
         * held): the payment cannot buy anything, so it is refunded. */
        if (strcmp(rs.reason, GW_REASON_SHORTFALL) == 0)
            return gw_refund_payment(
                ctx, c, hash, &rs, HF_REPLY_CONFLICT,
                "reservation was released: stock_shortfall; payment flagged for refund");
        break;
    case GW_RES_PENDING:
        /* Not stored: the same webhook retried once HELD must be able to commit. */
        return gw_reply_simple(ctx, c->reservation_id, c->idempotency_key, c->reply_to,
                               HF_REPLY_CONFLICT, "reservation is not held yet");
    default:
        break;
    }
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg, "reservation is %s", gw_res_status_name(rs.status));
    return reply_stored(ctx, c, hash, &rs, HF_REPLY_CONFLICT, msg);
}
