/* What happens on AllotmentGrant (escrow, docs/ESCROW.md): a pair's counter
 * answered this partition's AllotmentRequest (granted units join the balance at
 * once) or recalls units after a stock shortfall (the balance gives back what
 * it can now, the rest as its holds end). Only counters write it, on the
 * results topic; it must name this partition as its holder. */
#include "gateway.h"

int gateway_on_allotment_grant(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_allotment_grant_t *g = &rec->u.allotment_grant;
    if (g->holder_partition != stage_partition(ctx))
        return stage_reject(ctx,
                            "AllotmentGrant for gateway partition %d reached partition %d: its "
                            "key must be the holder_key the request gave",
                            g->holder_partition, stage_partition(ctx));
    if (g->granted_qty < 0 || g->recall_qty < 0 || g->seq < 0)
        return stage_reject(ctx, "AllotmentGrant granted_qty, recall_qty and seq must be >= 0");
    const char *bad = gw_check_id(g->warehouse_id, "warehouse_id");
    if (!bad)
        bad = gw_check_id(g->sku, "sku");
    if (bad)
        return stage_reject(ctx, "AllotmentGrant: %s", bad);
    return gw_escrow_apply_grant(ctx, g);
}
