/* What happens on Release (the shopper abandoned): a guarded transition to
 * RELEASED from HELD, or from PENDING (the holds asked for are released as they
 * stand — each ReleaseHold follows its Hold on the counter's partition). A
 * release of a released reservation answers RELEASED again; of a committed or
 * expired one, CONFLICT or EXPIRED: terminal states never move. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"

static int reply_stored(stage_ctx_t *ctx, const hf_release_t *r, int64_t hash,
                        const hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                        const char *msg)
{
    hf_reply_t reply;
    gw_reply_init(rs, r->idempotency_key, outcome, msg, stage_now_ms(ctx), &reply);
    int err = gw_idem_store(ctx, r->reservation_id, r->idempotency_key, hash, &reply);
    return err ? err : gw_emit_reply(ctx, r->reply_to, &reply);
}

int gateway_on_release(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_release_t *r = &rec->u.release;
    bool answered = false;
    int err = gw_check_request(ctx, r->reservation_id, r->idempotency_key, r->reply_to, &answered);
    if (err || answered)
        return err;
    const char *bad = gw_check_id(r->idempotency_key,
                                  "idempotency_key must be non-empty, printable, without '|'");
    if (bad)
        return gw_reply_simple(ctx, r->reservation_id, r->idempotency_key, r->reply_to,
                               HF_REPLY_REJECTED_INVALID, bad);
    int64_t hash = gw_request_hash(rec);
    bool handled = false;
    err = gw_idem_check(ctx, r->reservation_id, r->idempotency_key, hash, r->reply_to, &handled);
    if (err || handled)
        return err;
    hf_reservation_state_t rs;
    err = gw_load(ctx, r->reservation_id, &rs);
    if (err == HF_ERR_NOTFOUND)
        return gw_reply_simple(ctx, r->reservation_id, r->idempotency_key, r->reply_to,
                               HF_REPLY_NOT_FOUND, "no such reservation");
    if (err)
        return err;
    const char *reason = r->reason[0] ? r->reason : "abandoned";
    switch (rs.status) {
    case GW_RES_PENDING:
        err = gw_finish(ctx, &rs, GW_RES_RELEASED, HF_LEDGER_RELEASED, reason);
        if (!err)
            err = gw_answer_reserve(ctx, &rs, HF_REPLY_RELEASED, "released before it was held");
        return err ? err : reply_stored(ctx, r, hash, &rs, HF_REPLY_RELEASED, "");
    case GW_RES_HELD:
        if (stage_now_ms(ctx) >= rs.expires_at_ms) {
            err = gw_expire(ctx, &rs);
            return err ? err : reply_stored(ctx, r, hash, &rs, HF_REPLY_EXPIRED, "already expired");
        }
        err = gw_finish(ctx, &rs, GW_RES_RELEASED, HF_LEDGER_RELEASED, reason);
        return err ? err : reply_stored(ctx, r, hash, &rs, HF_REPLY_RELEASED, "");
    case GW_RES_RELEASED:
        return reply_stored(ctx, r, hash, &rs, HF_REPLY_RELEASED, "already released");
    case GW_RES_EXPIRED:
        return reply_stored(ctx, r, hash, &rs, HF_REPLY_EXPIRED, "already expired");
    default:
        break;
    }
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg, "reservation is %s", gw_res_status_name(rs.status));
    return reply_stored(ctx, r, hash, &rs, HF_REPLY_CONFLICT, msg);
}
