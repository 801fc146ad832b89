/* What happens on ReleaseHold (abandoned, expired, rolled back or revoked): the
 * hold's units go back to available. Releasing again answers OK again; releasing a
 * committed hold is a CONFLICT (the sale stands); releasing a refused hold is OK
 * with nothing to give back. */
#include "counter.h"

static hf_outcome_t release_rule(bool found, hf_hold_state_t *hs, hf_counter_state_t *c,
                                 bool *changed)
{
    if (!found)
        return HF_OUTCOME_NOT_FOUND;
    switch (hs->status) {
    case HF_HOLD_REVOKING:
        c->revoking -= hs->qty;
        /* fall through */
    case HF_HOLD_HELD:
        c->reserved -= hs->qty;
        hs->status = HF_HOLD_RELEASED;
        *changed = true;
        return HF_OUTCOME_OK;
    case HF_HOLD_RELEASED:
    case HF_HOLD_REFUSED:
        return HF_OUTCOME_OK;
    case HF_HOLD_COMMITTED:
    case HF_HOLD__COUNT:
        break;
    }
    return HF_OUTCOME_CONFLICT;
}

int counter_on_release_hold(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_release_hold_t *rh = &rec->u.release_hold;
    counter_hold_id_t id = {rh->reservation_id, rh->attempt, rh->warehouse_id, rh->sku,
                            HF_CMD_RELEASE};
    return counter_settle_hold(ctx, &id, release_rule);
}
