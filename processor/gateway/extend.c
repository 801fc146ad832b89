/* What happens on Extend: a HELD reservation gets a later expires_at_ms, never
 * beyond its hold deadline (max total hold time, fixed when it was created). The
 * old expiry timer stays in the index and is ignored when it fires. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"

int gateway_on_extend(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_extend_t *x = &rec->u.extend;
    bool answered = false;
    int err = gw_check_request(ctx, x->reservation_id, x->idempotency_key, x->reply_to, &answered);
    if (err || answered)
        return err;
    const char *bad = gw_check_id(x->idempotency_key,
                                  "idempotency_key must be non-empty, printable, without '|'");
    if (!bad && (x->extend_by_ms <= 0 || x->extend_by_ms > HF_TTL_MAX_MS))
        bad = "extend_by_ms must be positive and at most a day";
    if (bad)
        return gw_reply_simple(ctx, x->reservation_id, x->idempotency_key, x->reply_to,
                               HF_REPLY_REJECTED_INVALID, bad);
    int64_t hash = gw_request_hash(rec);
    bool handled = false;
    err = gw_idem_check(ctx, x->reservation_id, x->idempotency_key, hash, x->reply_to, &handled);
    if (err || handled)
        return err;
    hf_reservation_state_t rs;
    err = gw_load(ctx, x->reservation_id, &rs);
    if (err == HF_ERR_NOTFOUND)
        return gw_reply_simple(ctx, x->reservation_id, x->idempotency_key, x->reply_to,
                               HF_REPLY_NOT_FOUND, "no such reservation");
    if (err)
        return err;
    if (rs.status == GW_RES_PENDING) /* not stored: the same retry once HELD must extend */
        return gw_reply_simple(ctx, x->reservation_id, x->idempotency_key, x->reply_to,
                               HF_REPLY_CONFLICT, "reservation is not held yet");
    hf_reply_outcome_t outcome = HF_REPLY_HELD;
    const char *msg = "";
    if (rs.status == GW_RES_HELD && stage_now_ms(ctx) >= rs.expires_at_ms) {
        err = gw_expire(ctx, &rs);
        if (err)
            return err;
    }
    if (rs.status == GW_RES_HELD) {
        int64_t want = rs.expires_at_ms + x->extend_by_ms;
        int64_t next = want < rs.hold_deadline_ms ? want : rs.hold_deadline_ms;
        if (next < want)
            msg = "extended up to the maximum hold time";
        if (next > rs.expires_at_ms) {
            rs.expires_at_ms = next;
            err = gw_store(ctx, &rs);
            if (!err)
                err = gw_timer_add(ctx, rs.expires_at_ms, GW_TIMER_EXPIRY, rs.reservation_id);
            if (err)
                return err;
        }
    } else {
        outcome = rs.status == GW_RES_EXPIRED ? HF_REPLY_EXPIRED : HF_REPLY_CONFLICT;
        msg = rs.status == GW_RES_EXPIRED ? "already expired" : "reservation is not held";
    }
    hf_reply_t reply;
    gw_reply_init(&rs, x->idempotency_key, outcome, msg, stage_now_ms(ctx), &reply);
    err = gw_idem_store(ctx, x->reservation_id, x->idempotency_key, hash, &reply);
    return err ? err : gw_emit_reply(ctx, x->reply_to, &reply);
}
