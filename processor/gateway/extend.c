/* What happens on Extend: a HELD reservation gets a later expires_at_ms, never
 * beyond its hold deadline (max total hold time, fixed when it was created). The
 * old expiry timer is deleted with the change. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"

int gw_extend_to(stage_ctx_t *ctx, hf_reservation_state_t *rs, int64_t expires_at_ms)
{
    hf_assert(rs->status == HF_RES_HELD && expires_at_ms > rs->expires_at_ms);
    int err = gw_timer_del(ctx, rs->expires_at_ms, GW_TIMER_EXPIRY, rs->reservation_id);
    rs->expires_at_ms = expires_at_ms;
    if (!err)
        err = gw_store(ctx, rs);
    return err ? err : gw_timer_add(ctx, rs->expires_at_ms, GW_TIMER_EXPIRY, rs->reservation_id);
}

int gateway_on_extend(stage_ctx_t *ctx, const hf_record_t *rec)
{
    gw_request_t req;
    int err = gw_request_begin(ctx, rec, &req);
    if (err || req.result != GW_REQ_FOUND)
        return err;
    const hf_extend_t *x = &rec->u.extend;
    hf_reservation_state_t *rs = &req.rs;
    if (rs->status == HF_RES_PENDING) /* not stored: the same retry once HELD must extend */
        return gw_reply_simple(ctx, &req.asker, HF_REPLY_CONFLICT, "reservation is not held yet");
    hf_reply_outcome_t outcome = HF_REPLY_HELD;
    const char *msg = "";
    if (rs->status == HF_RES_HELD && stage_now_ms(ctx) >= rs->expires_at_ms) {
        err = gw_expire(ctx, rs);
        if (err)
            return err;
    }
    if (rs->status == HF_RES_HELD) {
        int64_t want = rs->expires_at_ms + x->extend_by_ms;
        int64_t next = want < rs->hold_deadline_ms ? want : rs->hold_deadline_ms;
        if (next < want)
            msg = next > rs->expires_at_ms
                      ? "extended up to the maximum hold time"
                      : "not extended: already held past the maximum hold time (a pending payment)";
        if (next > rs->expires_at_ms && (err = gw_extend_to(ctx, rs, next)) != HF_OK)
            return err;
    } else {
        outcome = rs->status == HF_RES_EXPIRED ? HF_REPLY_EXPIRED : HF_REPLY_CONFLICT;
        msg = rs->status == HF_RES_EXPIRED ? "already expired" : "reservation is not held";
    }
    return gw_answer(ctx, rs, &req.asker, outcome, msg);
}
