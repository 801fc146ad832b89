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

static int answer(stage_ctx_t *ctx, const hf_commit_t *c, int64_t hash,
                  const hf_reservation_state_t *rs, hf_reply_outcome_t outcome, const char *msg)
{
    return gw_answer(ctx, rs, c->idempotency_key, hash, c->reply_to, outcome, msg);
}

/* Answers the Commit the re-reservation was started for. */
static int answer_rebook(stage_ctx_t *ctx, const hf_reservation_state_t *rs,
                         hf_reply_outcome_t outcome, const char *msg)
{
    return gw_answer(ctx, rs, rs->rebook_idempotency_key, rs->rebook_request_hash,
                     rs->rebook_reply_to, outcome, msg);
}

/* Whether payment_id of this reservation was flagged for refund already. */
static int refund_flagged(stage_ctx_t *ctx, const char *reservation_id, const char *payment_id,
                          bool *flagged)
{
    char key[GW_KEY_MAX];
    size_t len = gw_payment_key(key, reservation_id, payment_id);
    state_iter_t *it = stage_iter(ctx, key, len, false);
    if (!it)
        return HF_ERR_NOMEM;
    const void *k, *v;
    size_t klen, vlen;
    /* The prefix also matches longer payment ids: only the exact key counts. */
    *flagged = false;
    while (!*flagged && state_iter_next(it, &k, &klen, &v, &vlen))
        *flagged = klen == len && memcmp(k, key, len) == 0;
    state_iter_destroy(it);
    return HF_OK;
}

int gw_flag_refund(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const char *payment_id,
                   const hf_hold_ref_t *returned)
{
    bool flagged = false;
    int err = refund_flagged(ctx, rs->reservation_id, payment_id, &flagged);
    if (err || flagged)
        return err;
    char key[GW_KEY_MAX];
    size_t len = gw_payment_key(key, rs->reservation_id, payment_id);
    err = stage_put_raw(ctx, key, len, "t", 1);
    if (err)
        return err;
    /* The event names the payment, and the units it no longer buys, if any. */
    static _Thread_local hf_reservation_state_t flag;
    flag = *rs;
    snprintf(flag.payment_id, sizeof flag.payment_id, "%s", payment_id);
    flag.allocations_count = 0;
    if (returned) {
        flag.allocations[flag.allocations_count] = *returned;
        flag.allocations[flag.allocations_count++].status = GW_HOLD_OK;
    }
    return gw_emit_ledger(ctx, &flag, HF_LEDGER_LATE_PAYMENT, GW_LATE_REFUNDED);
}

int gw_refund_payment(stage_ctx_t *ctx, const hf_commit_t *c, int64_t hash,
                      hf_reservation_state_t *rs, hf_reply_outcome_t outcome, const char *why)
{
    int err = gw_flag_refund(ctx, rs, c->payment_id, NULL);
    return err ? err : answer(ctx, c, hash, rs, outcome, why);
}

/* First the same warehouses and quantities the reservation held: the stock its
 * expiry gave back is most likely still there (if expiry happened in this very
 * transaction the routing view cannot know yet), and the counters decide. A
 * refused hold is re-routed by the saga like any other. */
static int rebook_route(stage_ctx_t *ctx, hf_reservation_state_t *rs, bool *rejected, char *msg,
                        size_t msg_size)
{
    int err = HF_OK;
    *rejected = false;
    if (gw_saga_restart(ctx, rs, &err))
        return err;
    rs->allocations_count = 0;
    hf_reply_outcome_t outcome;
    err = gw_saga_start(ctx, rs, rejected, &outcome, msg, msg_size);
    if (!err && *rejected)
        rs->allocations_count = 0; /* routed but never sent */
    return err;
}

static int rebook_start(stage_ctx_t *ctx, const hf_commit_t *c, int64_t hash,
                        hf_reservation_state_t *rs)
{
    /* Expiry released every hold. */
    for (int32_t i = 0; i < rs->allocations_count; i++)
        hf_assert(rs->allocations[i].status == GW_HOLD_RELEASED ||
                  rs->allocations[i].status == GW_HOLD_REFUSED);
    rs->reroutes = 0;
    rs->rebook = GW_REBOOK_PENDING;
    snprintf(rs->rebook_idempotency_key, sizeof rs->rebook_idempotency_key, "%s",
             c->idempotency_key);
    rs->rebook_request_hash = hash;
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
    return err ? err : gw_idem_store(ctx, rs->reservation_id, c->idempotency_key, hash, NULL);
}

int gw_late_payment(stage_ctx_t *ctx, const hf_commit_t *c, int64_t hash,
                    hf_reservation_state_t *rs)
{
    hf_assert(rs->status == GW_RES_EXPIRED);
    const gateway_env_t *env = gateway_env(ctx);
    if (!env)
        return HF_ERR_CONFIG;
    bool same_payment = strcmp(rs->payment_id, c->payment_id) == 0;
    switch (rs->rebook) {
    case GW_REBOOK_NONE: {
        bool flagged = false;
        int err = refund_flagged(ctx, rs->reservation_id, c->payment_id, &flagged);
        if (err)
            return err;
        if (env->late_policy == GW_LATE_RERESERVE && !flagged)
            return rebook_start(ctx, c, hash, rs);
        return gw_refund_payment(ctx, c, hash, rs, HF_REPLY_EXPIRED,
                                 "late payment: the reservation expired; payment flagged "
                                 "for refund");
    }
    case GW_REBOOK_PENDING:
        if (same_payment) /* not stored: a retry once it is decided must get the decision */
            return gw_reply_simple(ctx, c->reservation_id, c->idempotency_key, c->reply_to,
                                   HF_REPLY_CONFLICT,
                                   "late payment: re-reserving for this payment, retry for the "
                                   "outcome");
        /* One re-reservation per reservation: this payment can buy nothing. */
        return gw_refund_payment(ctx, c, hash, rs, HF_REPLY_CONFLICT,
                                 "late payment: the reservation is being re-reserved for another "
                                 "payment; this one is flagged for refund");
    case GW_REBOOK_COMMITTED:
        if (same_payment)
            return answer(ctx, c, hash, rs, HF_REPLY_COMMITTED,
                          "already committed by this payment (re-reserved after expiry)");
        return gw_refund_payment(ctx, c, hash, rs, HF_REPLY_CONFLICT,
                                 "already committed by another payment (re-reserved after "
                                 "expiry); this one is flagged for refund");
    default:
        return gw_refund_payment(ctx, c, hash, rs, HF_REPLY_EXPIRED,
                                 "late payment: the reservation expired and its stock could "
                                 "not be re-reserved; payment flagged for refund");
    }
}

int gw_rebook_held(stage_ctx_t *ctx, hf_reservation_state_t *rs)
{
    hf_assert(rs->rebook == GW_REBOOK_PENDING && gw_all_answered(rs));
    int err = gw_commit_holds(ctx, rs);
    if (err)
        return err;
    rs->rebook = GW_REBOOK_COMMITTED;
    rs->result_deadline_ms = 0;
    log_info("gateway", "%s: re-reserved and committed for late payment %s", rs->reservation_id,
             rs->payment_id);
    err = gw_store(ctx, rs);
    if (!err)
        err = gw_emit_ledger(ctx, rs, HF_LEDGER_LATE_PAYMENT, GW_LATE_REBOOKED);
    return err ? err
               : answer_rebook(ctx, rs, HF_REPLY_COMMITTED,
                               "the reservation had expired; its lines were re-reserved and "
                               "committed for this payment");
}

int gw_rebook_refund(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *why)
{
    hf_assert(rs->rebook == GW_REBOOK_PENDING);
    int err = gw_release_holds(ctx, rs, "rollback");
    if (err)
        return err;
    rs->rebook = GW_REBOOK_REFUNDED;
    rs->result_deadline_ms = 0;
    log_info("gateway", "%s: late payment %s refunded: %s", rs->reservation_id, rs->payment_id,
             why);
    err = gw_store(ctx, rs);
    if (!err)
        err = gw_flag_refund(ctx, rs, rs->payment_id, NULL);
    if (err)
        return err;
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg,
             "late payment: the reservation expired and re-reserving failed (%s); "
             "payment flagged for refund",
             why);
    return answer_rebook(ctx, rs, HF_REPLY_EXPIRED, msg);
}

int gw_rebook_revoked(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i)
{
    hf_assert(rs->status == GW_RES_EXPIRED && rs->allocations[i].status == GW_HOLD_OK);
    switch (rs->rebook) {
    case GW_REBOOK_PENDING:
        return gw_rebook_refund(ctx, rs, "a stock count revoked a hold");
    case GW_REBOOK_COMMITTED: {
        /* The commit raced a stock count, as in counter_result.c: the revoked
         * hold is released, the units the counters already sold stay sold,
         * and the payment is refunded. */
        hf_hold_ref_t revoked = rs->allocations[i];
        int err = gw_release_one(ctx, rs, i, GW_REASON_SHORTFALL);
        if (err)
            return err;
        log_warn("gateway", "%s: re-reserved for payment %s but a hold was revoked; refund",
                 rs->reservation_id, rs->payment_id);
        rs->rebook = GW_REBOOK_REFUNDED;
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
