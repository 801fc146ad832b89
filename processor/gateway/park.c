/* Requests that wait for a counter's answer. A reservation one hold covers is
 * answered by that hold's counter (hold.c there, Hold.answer_reserve), so the
 * shopper may hear HELD before this gateway learns it: until the hold's result
 * arrives, a Commit, Release, Extend or retried Reserve for the reservation
 * cannot be answered as for an ordinary PENDING one (that would contradict what
 * the shopper was told, or tell nothing to a retry). Such a request is parked
 * in the reservation's slots (gw_park_key), in arrival order,
 * and applied by gateway_stage.c in the transaction that takes the result.
 * Slots are few and bounded; a request finding them full is answered BUSY
 * (gw_request.c: nothing applied or stored, the client retries). */
#include "gateway.h"
#include "hf_assert.h"

bool gw_counter_awaited(const hf_reservation_state_t *rs)
{
    if (!rs->counter_answers || rs->status != HF_RES_PENDING)
        return false;
    for (int32_t i = 0; i < rs->allocations_count; i++)
        if (rs->allocations[i].attempt == 0 && rs->allocations[i].status == HF_HOLD_REF_HOLD_SENT)
            return true;
    return false;
}

bool gw_counter_told(const hf_reservation_state_t *rs)
{
    if (!rs->counter_answers)
        return false;
    for (int32_t i = 0; i < rs->allocations_count; i++)
        if (rs->allocations[i].attempt == 0 && rs->allocations[i].status == HF_HOLD_REF_HELD)
            return true;
    return false;
}

int gw_park(stage_ctx_t *ctx, const hf_record_t *rec, const char *reservation_id, bool *parked)
{
    *parked = false;
    for (int slot = 0; slot < GW_PARKED_MAX; slot++) {
        char key[GW_KEY_MAX];
        size_t len = gw_park_key(key, reservation_id, slot);
        hf_record_t taken;
        int err = stage_get(ctx, key, len, &taken);
        if (err == HF_OK)
            continue;
        if (err != HF_ERR_NOTFOUND)
            return err;
        err = stage_put(ctx, key, len, rec);
        *parked = err == HF_OK;
        return err;
    }
    return HF_OK;
}

int gw_unpark(stage_ctx_t *ctx, const char *reservation_id, int slot, hf_record_t *out, bool *found)
{
    hf_assert(slot >= 0 && slot < GW_PARKED_MAX);
    *found = false;
    char key[GW_KEY_MAX];
    size_t len = gw_park_key(key, reservation_id, slot);
    int err = stage_get(ctx, key, len, out);
    if (err == HF_ERR_NOTFOUND)
        return HF_OK;
    if (!err)
        err = stage_del(ctx, key, len);
    *found = err == HF_OK;
    return err;
}
