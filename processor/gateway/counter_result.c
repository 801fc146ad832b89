/* What happens on CounterResult: the counter's answer to one of this gateway's
 * commands. Hold answers feed the saga of a PENDING reservation (OK or REFUSED;
 * once all are in, saga.c says where it stands and this file ends it: HELD or
 * REJECTED, or for a re-reservation committed or refunded). A SHORTFALL (a
 * stock count revoked a hold) ends the whole reservation RELEASED with reason
 * stock_shortfall, whether it was HELD or still PENDING (then its Reserve is
 * answered RELEASED): the design
 * gives revoked reservations back rather than re-routing them. A COMMITTED
 * reservation whose hold was revoked before its CommitHold reached the counter
 * (the counter answers that commit REVOKED and keeps the units reserved until
 * released) cannot stand either: the revoked hold is released, the reservation
 * ends RELEASED (stock_shortfall) and the payment is flagged for refund; either
 * the SHORTFALL or the REVOKED answer, whichever comes first, does it. Holds of
 * that reservation the counters already committed stay committed (the counter
 * cannot undo a commit). The holds of an EXPIRED reservation's re-reservation
 * (late_payment.c) take the same paths. Duplicates and answers for holds already released are
 * ignored: the result stream and the request stream are not ordered with each
 * other, and results may repeat. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "log.h"

static int32_t find_hold(const hf_reservation_state_t *rs, const hf_counter_result_t *r)
{
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        if (h->attempt == r->attempt && strcmp(h->warehouse_id, r->warehouse_id) == 0 &&
            strcmp(h->sku, r->sku) == 0)
            return i;
    }
    return -1;
}

static int on_hold_result(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i,
                          const hf_counter_result_t *r)
{
    hf_hold_ref_t *h = &rs->allocations[i];
    if (h->status != HF_HOLD_REF_HOLD_SENT || !gw_saga_open(rs))
        return HF_OK; /* a duplicate, or the reservation already released it */
    h->status = r->outcome == HF_OUTCOME_OK ? HF_HOLD_REF_HELD : HF_HOLD_REF_REFUSED;
    if (h->status == HF_HOLD_REF_REFUSED) /* a conflict: the sku is contended */
        gw_escrow_note(ctx, h->sku);
    h->available_seen = r->available;
    const gateway_env_t *env = gateway_env(ctx);
    /* A fresh answer says what the pair could sell when the counter applied
     * it (stock_hint.h): its age counts from then, so a gateway that reads its
     * results late does not take old figures for new ones. Figures out of any
     * real range are not believed. */
    if (env->hint && r->escrow_balance >= 0 && r->escrow_balance <= HF_PAIR_UNITS_MAX &&
        r->available >= 0 && r->available <= HF_PAIR_UNITS_MAX) {
        int64_t now = stage_now_ms(ctx);
        int64_t at = r->applied_at_ms > 0 && r->applied_at_ms < now ? r->applied_at_ms : now;
        gw_hint_note(env->hint, r->warehouse_id, r->sku, r->available + r->escrow_balance, at);
    }
    if (!gw_all_answered(rs))
        return gw_store(ctx, rs);
    /* Every hold answered: the saga says where it stands, and whose saga it is
     * decides what that means. */
    gw_saga_end_t end = GW_SAGA_ASKED;
    char why[HF_TEXT_LEN_MAX + 1];
    int err = gw_saga_settle(ctx, rs, &end, why, sizeof why);
    if (err || end == GW_SAGA_ASKED)
        return err; /* re-routed: the new round's results are awaited */
    bool held = end == GW_SAGA_HELD;
    if (gw_is_rebook(rs))
        return held ? gw_rebook_held(ctx, rs) : gw_rebook_refund(ctx, rs, why);
    /* The counter stamped its answer with the time it applied the hold. */
    int64_t answered_at_ms = r->applied_at_ms > 0 ? r->applied_at_ms : stage_now_ms(ctx);
    return held ? gw_saga_hold(ctx, rs, answered_at_ms) : gw_saga_reject(ctx, rs, why);
}

/* The sale of a COMMITTED reservation is undone by a revoked hold (see the top
 * of the file). A second revoked hold of the same reservation is only released. */
static int revoke_committed(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i)
{
    int err = gw_release_one(ctx, rs, i, GW_REASON_SHORTFALL);
    if (err || rs->status != HF_RES_COMMITTED)
        return err ? err : gw_store(ctx, rs);
    log_warn("gateway", "%s: committed by payment %s but a hold was revoked; released, refund",
             rs->reservation_id, rs->payment_id);
    rs->status = HF_RES_RELEASED;
    snprintf(rs->reason, sizeof rs->reason, "%s", GW_REASON_SHORTFALL);
    /* The refund is flagged after the RELEASED event: the ledger tells the sale
     * was undone before it tells the payment is to be refunded. */
    err = gw_end(ctx, rs,
                 &(gw_end_t){.store = true,
                             .ledger = true,
                             .ledger_kind = HF_LEDGER_RELEASED,
                             .ledger_reason = GW_REASON_SHORTFALL});
    return err ? err : gw_flag_refund(ctx, rs, rs->payment_id, NULL);
}

static int on_shortfall(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i)
{
    hf_hold_ref_t *h = &rs->allocations[i];
    if (h->status != HF_HOLD_REF_HELD)
        return HF_OK; /* already released: the counter learns from that release */
    log_warn("gateway", "%s: hold at %s|%s revoked by a stock shortfall (reservation %s)",
             rs->reservation_id, h->warehouse_id, h->sku, hf_res_status_name(rs->status));
    if (gw_is_rebook(rs))
        return gw_rebook_revoked(ctx, rs, i);
    switch (rs->status) {
    case HF_RES_HELD:
        return gw_finish(ctx, rs, HF_RES_RELEASED, HF_LEDGER_RELEASED, GW_REASON_SHORTFALL);
    case HF_RES_PENDING: {
        int err = gw_end_holds(ctx, rs, HF_RES_RELEASED, GW_REASON_SHORTFALL);
        return err ? err
                   : gw_end(ctx, rs,
                            &(gw_end_t){.store = true,
                                        .reserve = true,
                                        .reserve_outcome = HF_REPLY_RELEASED,
                                        .reserve_message = "stock_shortfall: a stock count "
                                                           "revoked a hold before the "
                                                           "reservation was held",
                                        .ledger = true,
                                        .ledger_kind = HF_LEDGER_RELEASED,
                                        .ledger_reason = GW_REASON_SHORTFALL});
    }
    case HF_RES_COMMITTED:
    case HF_RES_RELEASED: /* an earlier revoked hold already undid the commit */
        return revoke_committed(ctx, rs, i);
    default:
        return HF_OK; /* rejected: every hold was released */
    }
}

static int on_commit_result(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i,
                            const hf_counter_result_t *r)
{
    if (r->outcome == HF_OUTCOME_OK)
        return HF_OK;
    bool revoked = r->outcome == HF_OUTCOME_REVOKED; /* a shortfall raced the commit */
    hf_log(revoked ? HF_LOG_WARN : HF_LOG_ERROR, "gateway", "%s: commit of hold %s|%s answered %s",
           rs->reservation_id, r->warehouse_id, r->sku, hf_outcome_name(r->outcome));
    if (!revoked || rs->allocations[i].status != HF_HOLD_REF_HELD)
        return HF_OK;                /* handled when its SHORTFALL came */
    if (rs->allocations[i].escrow) { /* an AllotmentSale refused: a recall raced it */
        int err = gw_escrow_unsell(ctx, &rs->allocations[i]);
        if (err)
            return err;
    }
    if (gw_is_rebook(rs))
        return gw_rebook_revoked(ctx, rs, i);
    return revoke_committed(ctx, rs, i);
}

int gateway_on_counter_result(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_counter_result_t *r = &rec->u.counter_result;
    int err = gw_check_key(ctx, r->reservation_id);
    if (err)
        return err;
    hf_reservation_state_t rs;
    err = gw_load(ctx, r->reservation_id, &rs);
    if (err == HF_ERR_NOTFOUND) {
        log_warn("gateway", "result for unknown reservation %s ignored", r->reservation_id);
        return HF_OK;
    }
    if (err)
        return err;
    int32_t i = find_hold(&rs, r);
    if (i < 0)
        return HF_OK; /* a refused hold dropped by re-routing */
    switch (r->command) {
    case HF_CMD_HOLD:
        if (rs.result_deadline_ms != 0 && rs.result_retries == 0) {
            /* The round's Holds went out result_timeout_ms before its deadline. */
            const gateway_env_t *env = gateway_env(ctx);
            if (env->reserve_deadline_ms > 0)
                gw_shed_observe_result(ctx, stage_now_ms(ctx) -
                                                (rs.result_deadline_ms - env->result_timeout_ms));
        }
        return on_hold_result(ctx, &rs, i, r);
    case HF_CMD_SHORTFALL:
        return on_shortfall(ctx, &rs, i);
    case HF_CMD_COMMIT:
        return on_commit_result(ctx, &rs, i, r);
    case HF_CMD_RELEASE:
    case HF_CMD__COUNT:
        break;
    }
    return HF_OK;
}
