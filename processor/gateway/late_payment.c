/* What happens to a payment that comes too late: the Commit webhook of a
 * reservation that expired (or that a stock count revoked) before it arrived.
 * For an expired reservation, late_payment_policy decides:
 *   refund     answer EXPIRED and flag the payment for refund: a LATE_PAYMENT
 *              ledger event with reason "refund".
 *   rereserve  try to sell the same lines after all: route them afresh
 *              (saga.c; new attempt numbers, so the counters see new holds)
 *              and, once every line is held, commit those holds at once;
 *              answer COMMITTED with the new allocations and record
 *              LATE_PAYMENT "rereserved" carrying the units sold. When the
 *              network no longer has the stock, or the counters do not answer,
 *              every hold is released and the payment refunded as above.
 * The reservation stays EXPIRED either way (terminal states never move); the
 * re-reservation lives in its rebook fields. There is one re-reservation per
 * reservation: any other payment for it is refunded. A reservation a stock
 * count revoked is always refunded. A payment is flagged at most once per
 * reservation — a marker P<reservation_id>|<payment_id> remembers it as long as
 * the reservation is kept — so webhook retries, under any idempotency key and
 * in any order with other payments, flag nothing twice. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"
#include "log.h"

/* The Commit the re-reservation was started for: answered when it ends. */
static gw_asker_t rebook_asker(const hf_reservation_state_t *rs)
{
    return (gw_asker_t){rs->reservation_id,  rs->rebook_idempotency_key,
                        rs->rebook_reply_to, rs->rebook_request_hash,
                        HF_REC_COMMIT,       0};
}

int gw_refund_payment(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *payment_id,
                      const gw_asker_t *asker, hf_reply_outcome_t outcome, const char *why)
{
    return gw_end(
        ctx, rs,
        &(gw_end_t){
            .refund_payment_id = payment_id, .asker = asker, .outcome = outcome, .message = why});
}

/* First the same warehouses and quantities the reservation held: the stock its
 * expiry gave back is most likely still there (if expiry happened in this very
 * transaction the routing view cannot know yet), and the counters decide. A
 * refused hold is re-routed by the saga like any other. */
static int rebook_route(stage_ctx_t *ctx, hf_reservation_state_t *rs, bool *rejected, char *msg,
                        size_t msg_size)
{
    *rejected = false;
    bool restarted = false;
    int err = gw_saga_restart(ctx, rs, &restarted);
    if (err || restarted)
        return err;
    rs->allocations_count = 0;
    gw_saga_end_t end = GW_SAGA_ASKED;
    err = gw_saga_start(ctx, rs, &end, msg, msg_size);
    *rejected = !err && end != GW_SAGA_ASKED;
    if (*rejected)
        rs->allocations_count = 0; /* routed but never sent */
    return err;
}

static int rebook_start(stage_ctx_t *ctx, const hf_commit_t *c, const gw_asker_t *asker,
                        hf_reservation_state_t *rs)
{
    /* Expiry released every hold. */
    for (int32_t i = 0; i < rs->allocations_count; i++)
        hf_assert(rs->allocations[i].status == HF_HOLD_REF_RELEASE_SENT ||
                  rs->allocations[i].status == HF_HOLD_REF_REFUSED);
    rs->reroutes = 0;
    rs->rebook = HF_REBOOK_PENDING;
    snprintf(rs->rebook_idempotency_key, sizeof rs->rebook_idempotency_key, "%s",
             c->idempotency_key);
    rs->rebook_request_hash = asker->hash;
    snprintf(rs->rebook_reply_to, sizeof rs->rebook_reply_to, "%s", c->reply_to);
    snprintf(rs->payment_id, sizeof rs->payment_id, "%s", c->payment_id);
    log_info("gateway", "%s: payment %s came after expiry; re-reserving", rs->reservation_id,
             c->payment_id);

    bool rejected = false;
    char msg[HF_TEXT_LEN_MAX + 1];
    int err = rebook_route(ctx, rs, &rejected, msg, sizeof msg);
    if (err)
        return err;
    if (rejected)
        return gw_rebook_refund(ctx, rs, msg);
    err = gw_store(ctx, rs);
    /* A pending marker: a retry under this key waits for the one answer. */
    return err ? err : gw_idem_store(ctx, asker, NULL);
}

int gw_late_payment(stage_ctx_t *ctx, const hf_commit_t *c, const gw_asker_t *asker,
                    hf_reservation_state_t *rs)
{
    hf_assert(rs->status == HF_RES_EXPIRED);
    const gateway_env_t *env = gateway_env(ctx);
    bool same_payment = strcmp(rs->payment_id, c->payment_id) == 0;
    switch (rs->rebook) {
    case HF_REBOOK_NONE: {
        bool flagged = false;
        int err = gw_refund_flagged(ctx, rs->reservation_id, c->payment_id, &flagged);
        if (err)
            return err;
        if (env->late_policy == GW_LATE_RERESERVE && !flagged)
            return rebook_start(ctx, c, asker, rs);
        return gw_refund_payment(ctx, rs, c->payment_id, asker, HF_REPLY_EXPIRED,
                                 "late payment: the reservation expired; payment flagged "
                                 "for refund");
    }
    case HF_REBOOK_PENDING:
        if (same_payment) /* not stored: a retry once it is decided must get the decision */
            return gw_reply_simple(ctx, asker, HF_REPLY_CONFLICT,
                                   "late payment: re-reserving for this payment, retry for the "
                                   "outcome");
        /* One re-reservation per reservation: this payment can buy nothing. */
        return gw_refund_payment(ctx, rs, c->payment_id, asker, HF_REPLY_CONFLICT,
                                 "late payment: the reservation is being re-reserved for another "
                                 "payment; this one is flagged for refund");
    case HF_REBOOK_COMMITTED:
        if (same_payment)
            return gw_answer(ctx, rs, asker, HF_REPLY_COMMITTED,
                             "already committed by this payment (re-reserved after expiry)");
        return gw_refund_payment(ctx, rs, c->payment_id, asker, HF_REPLY_CONFLICT,
                                 "already committed by another payment (re-reserved after "
                                 "expiry); this one is flagged for refund");
    default:
        return gw_refund_payment(ctx, rs, c->payment_id, asker, HF_REPLY_EXPIRED,
                                 "late payment: the reservation expired and its stock could "
                                 "not be re-reserved; payment flagged for refund");
    }
}

int gw_rebook_held(stage_ctx_t *ctx, hf_reservation_state_t *rs)
{
    hf_assert(rs->rebook == HF_REBOOK_PENDING && gw_all_answered(rs));
    int err = gw_commit_holds(ctx, rs);
    if (err)
        return err;
    rs->rebook = HF_REBOOK_COMMITTED;
    rs->result_deadline_ms = 0;
    log_info("gateway", "%s: re-reserved and committed for late payment %s", rs->reservation_id,
             rs->payment_id);
    gw_asker_t asker = rebook_asker(rs);
    return gw_end(ctx, rs,
                  &(gw_end_t){.store = true,
                              .asker = &asker,
                              .outcome = HF_REPLY_COMMITTED,
                              .message = "the reservation had expired; its lines were "
                                         "re-reserved and committed for this payment",
                              .ledger = true,
                              .ledger_kind = HF_LEDGER_LATE_PAYMENT,
                              .ledger_reason = GW_LATE_REBOOKED});
}

int gw_rebook_refund(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *why)
{
    hf_assert(rs->rebook == HF_REBOOK_PENDING);
    int err = gw_release_holds(ctx, rs, "rollback");
    if (err)
        return err;
    rs->rebook = HF_REBOOK_REFUNDED;
    rs->result_deadline_ms = 0;
    log_info("gateway", "%s: late payment %s refunded: %s", rs->reservation_id, rs->payment_id,
             why);
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg,
             "late payment: the reservation expired and re-reserving failed (%s); "
             "payment flagged for refund",
             why);
    gw_asker_t asker = rebook_asker(rs);
    return gw_end(ctx, rs,
                  &(gw_end_t){.store = true,
                              .refund_payment_id = rs->payment_id,
                              .asker = &asker,
                              .outcome = HF_REPLY_EXPIRED,
                              .message = msg});
}

int gw_rebook_revoked(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i)
{
    hf_assert(gw_is_rebook(rs) && rs->allocations[i].status == HF_HOLD_REF_HELD);
    switch (rs->rebook) {
    case HF_REBOOK_PENDING:
        return gw_rebook_refund(ctx, rs, "a stock count revoked a hold");
    case HF_REBOOK_COMMITTED: {
        /* The commit raced a stock count, as in counter_result.c: the revoked
         * hold is released, the units the counters already sold stay sold,
         * and the payment is refunded. */
        hf_hold_ref_t revoked = rs->allocations[i];
        int err = gw_release_one(ctx, rs, i, GW_REASON_SHORTFALL);
        if (err)
            return err;
        log_warn("gateway", "%s: re-reserved for payment %s but a hold was revoked; refund",
                 rs->reservation_id, rs->payment_id);
        rs->rebook = HF_REBOOK_REFUNDED;
        err = gw_store(ctx, rs);
        /* The refund event names the units given back: the sale the
         * "rereserved" event recorded did not stand for them. */
        return err ? err : gw_flag_refund(ctx, rs, rs->payment_id, &revoked);
    }
    default: {
        int err = gw_release_one(ctx, rs, i, GW_REASON_SHORTFALL);
        return err ? err : gw_store(ctx, rs);
    }
    }
}
