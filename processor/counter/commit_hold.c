/* What happens on CommitHold (the payment went through): a HELD hold becomes a
 * sale — its units leave both reserved and on_hand. Committing again answers OK
 * again without touching the counter; committing a released hold is a CONFLICT,
 * and a hold being revoked by a stock shortfall cannot be sold (REVOKED). */
#include "counter.h"

static hf_outcome_t commit_rule(bool found, hf_hold_state_t *hs, hf_counter_state_t *c,
                                bool *changed)
{
    if (!found)
        return HF_OUTCOME_NOT_FOUND;
    switch (hs->status) {
    case HF_HOLD_HELD:
        counter_commit_units(c, hs->qty);
        hs->status = HF_HOLD_COMMITTED;
        *changed = true;
        return HF_OUTCOME_OK;
    case HF_HOLD_COMMITTED:
        return HF_OUTCOME_OK;
    case HF_HOLD_REVOKING:
        return HF_OUTCOME_REVOKED;
    case HF_HOLD_RELEASED:
    case HF_HOLD_REFUSED:
    case HF_HOLD__COUNT:
        break;
    }
    return HF_OUTCOME_CONFLICT;
}

int counter_on_commit_hold(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_commit_hold_t *ch = &rec->u.commit_hold;
    counter_hold_id_t id = {ch->reservation_id, ch->attempt, ch->warehouse_id, ch->sku,
                            HF_CMD_COMMIT};
    return counter_settle_hold(ctx, &id, commit_rule);
}
