/* What happens on CounterResult: the counter's answer to one of this gateway's
 * commands. Hold answers feed the saga of a PENDING reservation (OK or REFUSED;
 * once all are in, saga.c decides). A SHORTFALL (a stock count revoked a hold)
 * releases the whole HELD reservation with reason stock_shortfall, or, while
 * PENDING, releases that hold so the saga re-routes its quantity. Duplicates and
 * answers for holds already released are ignored: the result stream and the
 * request stream are not ordered with each other, and results may repeat. */
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
    if (h->status != GW_HOLD_SENT || rs->status != GW_RES_PENDING)
        return HF_OK; /* a duplicate, or the reservation already released it */
    h->status = r->outcome == HF_OUTCOME_OK ? GW_HOLD_OK : GW_HOLD_REFUSED;
    h->available_seen = r->available;
    if (!gw_all_answered(rs))
        return gw_store(ctx, rs);
    return gw_saga_settle(ctx, rs);
}

static int on_shortfall(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i)
{
    hf_hold_ref_t *h = &rs->allocations[i];
    if (h->status != GW_HOLD_OK)
        return HF_OK; /* already released: the counter learns from that release */
    log_warn("gateway", "%s: hold at %s|%s revoked by a stock shortfall (reservation %s)",
             rs->reservation_id, h->warehouse_id, h->sku, gw_res_status_name(rs->status));
    if (rs->status == GW_RES_HELD)
        return gw_finish(ctx, rs, GW_RES_RELEASED, HF_LEDGER_RELEASED, "stock_shortfall");
    if (rs->status != GW_RES_PENDING)
        return HF_OK; /* committed: the sale stands; the counter answers the commit REVOKED */
    int err = gw_release_one(ctx, rs, i, "stock_shortfall");
    if (err)
        return err;
    return gw_all_answered(rs) ? gw_saga_settle(ctx, rs) : gw_store(ctx, rs);
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
        return on_hold_result(ctx, &rs, i, r);
    case HF_CMD_SHORTFALL:
        return on_shortfall(ctx, &rs, i);
    case HF_CMD_COMMIT:
        if (r->outcome != HF_OUTCOME_OK)
            log_error("gateway", "%s: commit of hold %s|%s answered %s", rs.reservation_id,
                      r->warehouse_id, r->sku, hf_outcome_name(r->outcome));
        return HF_OK;
    case HF_CMD_RELEASE:
    case HF_CMD__COUNT:
        break;
    }
    return HF_OK;
}
