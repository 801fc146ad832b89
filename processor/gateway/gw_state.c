/* The gateway's state, read and written: a reservation loaded from and stored
 * to its R key, and a timer armed in the (local, unlogged) timer index. The
 * only file that knows a reservation is kept as a ReservationState record; an
 * ended reservation arms its forget timer here, on every store. */
#include "gateway.h"
#include "hf_assert.h"

int gw_load(stage_ctx_t *ctx, const char *reservation_id, hf_reservation_state_t *out)
{
    char key[GW_KEY_MAX];
    size_t len = gw_res_key(key, reservation_id);
    hf_record_t rec;
    int err = stage_get(ctx, key, len, &rec);
    if (err)
        return err;
    hf_assert(rec.type == HF_REC_RESERVATION_STATE);
    *out = rec.u.reservation_state;
    return HF_OK;
}

int gw_store(stage_ctx_t *ctx, hf_reservation_state_t *rs)
{
    rs->updated_at_ms = stage_now_ms(ctx);
    char key[GW_KEY_MAX];
    size_t len = gw_res_key(key, rs->reservation_id);
    hf_record_t rec;
    rec.type = HF_REC_RESERVATION_STATE;
    rec.u.reservation_state = *rs;
    int err = stage_put(ctx, key, len, &rec);
    if (err || !gw_res_terminal(rs->status))
        return err;
    /* An ended reservation is forgotten once it has been left alone for the
     * retention (sweeper.c); a later change arms a later timer. */
    const gateway_env_t *env = gateway_env(ctx);
    return gw_timer_add(ctx, rs->updated_at_ms + env->reservation_retention_ms, GW_TIMER_FORGET,
                        rs->reservation_id);
}

int gw_timer_add(stage_ctx_t *ctx, int64_t due_ms, char kind, const char *ref)
{
    char key[GW_KEY_MAX];
    size_t len = gw_timer_key(key, due_ms, kind, ref);
    /* Derived from the reservation and idempotency records (gateway_reindex), so
     * local only; not empty: an empty value reads as a tombstone. */
    return stage_put_local(ctx, key, len, "t", 1);
}
