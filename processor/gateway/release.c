/* What happens on Release (the shopper abandoned): a guarded transition to
 * RELEASED from HELD, or from PENDING (the holds asked for are released as they
 * stand — each ReleaseHold follows its Hold on the counter's partition). A
 * release of a released reservation answers RELEASED again; of a committed or
 * expired one, CONFLICT or EXPIRED: terminal states never move. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"

int gw_release_open(stage_ctx_t *ctx, gw_request_t *req, const char *reason)
{
    hf_reservation_state_t *rs = &req->rs;
    bool pending = rs->status == HF_RES_PENDING;
    int err = gw_end_holds(ctx, rs, HF_RES_RELEASED, reason);
    return err ? err
               : gw_end(ctx, rs,
                        &(gw_end_t){.store = true,
                                    .reserve = pending,
                                    .reserve_outcome = HF_REPLY_RELEASED,
                                    .reserve_message = "released before it was held",
                                    .asker = &req->asker,
                                    .outcome = HF_REPLY_RELEASED,
                                    .message = "",
                                    .ledger = true,
                                    .ledger_kind = HF_LEDGER_RELEASED,
                                    .ledger_reason = reason});
}

int gateway_on_release(stage_ctx_t *ctx, const hf_record_t *rec)
{
    gw_request_t req;
    int err = gw_request_begin(ctx, rec, &req);
    if (err || req.result != GW_REQ_FOUND)
        return err;
    const hf_release_t *r = &rec->u.release;
    hf_reservation_state_t *rs = &req.rs;
    const gw_asker_t *a = &req.asker;
    const char *reason = r->reason[0] ? r->reason : "abandoned";
    switch (rs->status) {
    case HF_RES_PENDING:
        return gw_release_open(ctx, &req, reason);
    case HF_RES_HELD:
        if (stage_now_ms(ctx) >= rs->expires_at_ms) {
            err = gw_expire(ctx, rs);
            return err ? err : gw_answer(ctx, rs, a, HF_REPLY_EXPIRED, "already expired");
        }
        return gw_release_open(ctx, &req, reason);
    case HF_RES_RELEASED:
        return gw_answer(ctx, rs, a, HF_REPLY_RELEASED, "already released");
    case HF_RES_EXPIRED:
        return gw_answer(ctx, rs, a, HF_REPLY_EXPIRED, "already expired");
    default:
        break;
    }
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg, "reservation is %s", hf_res_status_name(rs->status));
    return gw_answer(ctx, rs, a, HF_REPLY_CONFLICT, msg);
}
