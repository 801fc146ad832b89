/* The gateway's state, read and written: a reservation loaded from and stored
 * to its R key, a timer armed in the (local, unlogged) timer index, and the
 * sweeper's cursor into that index. The only file that knows a reservation is
 * kept as a ReservationState record; an ended reservation arms its forget
 * timer here, on every store. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"

/* The sweeper's cursor (key C, local): the timer key it swept up to — the last
 * one it fired, or "due at the tick's time, after every kind" once every due
 * timer fired (sweeper.c sweep_to_now) — so a tick seeks past the tombstones
 * of every timer fired or deleted before instead of skipping them one by one
 * from the start of the index (those tombstones stay in the memtable and the
 * young SST files until compaction, and a scan from "T" walked all of them on
 * every tick, per partition). It is written in the batch that
 * deletes the fired timers, so an aborted batch rolls both back together.
 *
 * Why no live timer can hide before it: timers fire in key order, every timer
 * up to the cursor was fired or deleted, and a timer armed later with a due time
 * at or before any cursor this process wrote (sweep->fired_max_ms, the largest
 * due time of them) deletes the cursor of its partition in its own batch
 * (gw_timer_add) — a restore re-arming old timers, or a clock that went back.
 * Every other timer is due after the cursor's, so its key sorts after it. A
 * cursor of another process run (a restart: fired_max_ms starts at 0 again)
 * carries another run id (env->sweep, gateway_env_new) and is ignored. An env
 * without sweep keeps no cursor. */

enum { GW_CURSOR_RUN_LEN = 8 };

int gw_sweep_resume(stage_ctx_t *ctx, char *key_out, size_t *len_out, bool *found)
{
    *found = false;
    gw_sweep_t *sweep = gateway_env(ctx)->sweep;
    if (!sweep)
        return HF_OK;
    state_iter_t *it = stage_iter(ctx, GW_SWEEP_CURSOR_KEY, 1, false);
    if (!it)
        return HF_ERR_NOMEM;
    const void *k, *v;
    size_t klen, vlen;
    while (state_iter_next(it, &k, &klen, &v, &vlen)) {
        if (klen != 1) /* only the key C itself */
            continue;
        uint64_t id = 0;
        const unsigned char *b = v;
        for (int i = 0; vlen > GW_CURSOR_RUN_LEN && i < GW_CURSOR_RUN_LEN; i++)
            id = (id << 8) | b[i];
        size_t tlen = vlen > GW_CURSOR_RUN_LEN ? vlen - GW_CURSOR_RUN_LEN : 0;
        if (id == sweep->run_id && tlen > 0 && tlen < GW_KEY_MAX) {
            memcpy(key_out, b + GW_CURSOR_RUN_LEN, tlen);
            *len_out = tlen;
            *found = true;
        }
        break;
    }
    state_iter_destroy(it);
    return HF_OK;
}

int gw_sweep_mark(stage_ctx_t *ctx, const char *key, size_t len)
{
    int64_t due_ms = 0;
    char kind, ref[GW_KEY_MAX];
    hf_assert(gw_timer_parse(key, len, &due_ms, &kind, ref, sizeof ref));
    gw_sweep_t *sweep = gateway_env(ctx)->sweep;
    if (!sweep)
        return HF_OK;
    /* Raised before the cursor exists: an arm racing it on another thread
     * (another partition) only deletes a cursor needlessly. */
    int_fast64_t seen = atomic_load(&sweep->fired_max_ms);
    while (seen < due_ms && !atomic_compare_exchange_weak(&sweep->fired_max_ms, &seen, due_ms))
        ;
    unsigned char val[GW_CURSOR_RUN_LEN + GW_KEY_MAX];
    hf_assert(len < GW_KEY_MAX);
    uint64_t id = sweep->run_id;
    for (int i = GW_CURSOR_RUN_LEN - 1; i >= 0; i--, id >>= 8)
        val[i] = (unsigned char)id;
    memcpy(val + GW_CURSOR_RUN_LEN, key, len);
    return stage_put_local(ctx, GW_SWEEP_CURSOR_KEY, 1, val, GW_CURSOR_RUN_LEN + len);
}

int gw_load(stage_ctx_t *ctx, const char *reservation_id, hf_reservation_state_t *out)
{
    char key[GW_KEY_MAX];
    size_t len = gw_res_key(key, reservation_id);
    return stage_get_as(ctx, key, len, HF_REC_RESERVATION_STATE, out);
}

int gw_store(stage_ctx_t *ctx, hf_reservation_state_t *rs)
{
    rs->updated_at_ms = stage_now_ms(ctx);
    char key[GW_KEY_MAX];
    size_t len = gw_res_key(key, rs->reservation_id);
    int err = stage_put_as(ctx, key, len, HF_REC_RESERVATION_STATE, rs);
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
    gw_sweep_t *sweep = gateway_env(ctx)->sweep;
    if (sweep && due_ms <= atomic_load(&sweep->fired_max_ms)) {
        /* It may sort before the sweeper's cursor: scan from the start. */
        int err = stage_del_local(ctx, GW_SWEEP_CURSOR_KEY, 1);
        if (err)
            return err;
    }
    /* Derived from the reservation and idempotency records (gateway_reindex), so
     * local only; not empty: an empty value reads as a tombstone. */
    return stage_put_local(ctx, key, len, "t", 1);
}

int gw_timer_del(stage_ctx_t *ctx, int64_t due_ms, char kind, const char *ref)
{
    char key[GW_KEY_MAX];
    size_t len = gw_timer_key(key, due_ms, kind, ref);
    return stage_del_local(ctx, key, len);
}
