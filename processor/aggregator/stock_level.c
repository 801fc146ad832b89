/* What happens on StockLevel (a counter changed): the warehouse's sellable
 * units — its free stock plus the unheld balances of its allotments (escrow,
 * docs/ESCROW.md), which shoppers can still reserve — replace its previous
 * value in the SKU's vector, the network total is summed
 * again, and the sold-out hysteresis is re-evaluated. The Availability record for
 * the SKU goes out once per transaction, at batch end. */
#include <stdio.h>
#include <string.h>

#include "aggregator.h"

static int set_warehouse(stage_ctx_t *ctx, hf_sku_state_t *s, const hf_stock_level_t *sl)
{
    int32_t i = 0;
    while (i < s->warehouses_count && strcmp(s->warehouses[i].warehouse_id, sl->warehouse_id) != 0)
        i++;
    if (i == s->warehouses_count) {
        if (s->warehouses_count == HF_WAREHOUSES_MAX)
            return stage_reject(ctx, "SKU %s is stocked at more than %d warehouses", sl->sku,
                                HF_WAREHOUSES_MAX);
        snprintf(s->warehouses[i].warehouse_id, sizeof s->warehouses[i].warehouse_id, "%s",
                 sl->warehouse_id);
        s->warehouses_count++;
    }
    s->warehouses[i].available = sl->available + sl->escrow_balance;
    s->warehouses[i].escrow = sl->escrow_balance;
    int64_t total = 0;
    for (int32_t w = 0; w < s->warehouses_count; w++)
        total += s->warehouses[w].available; /* each <= on_hand <= 2^40: no overflow */
    s->total = total;
    return HF_OK;
}

int aggregator_on_stock_level(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_stock_level_t *sl = &rec->u.stock_level;
    size_t key_len = 0;
    const char *key = stage_record_key(ctx, &key_len);
    if (!sl->sku[0] || !sl->warehouse_id[0])
        return stage_reject(ctx, "StockLevel needs a sku and a warehouse_id");
    if (key_len != strlen(sl->sku) || memcmp(key, sl->sku, key_len) != 0)
        return stage_reject(ctx, "StockLevel key must be its sku \"%s\"", sl->sku);
    if (sl->available < 0 || sl->escrow_balance < 0 || sl->escrow_balance > HF_PAIR_UNITS_MAX)
        return stage_reject(ctx, "StockLevel available %lld and escrow_balance %lld must be >= 0",
                            (long long)sl->available, (long long)sl->escrow_balance);
    hf_sku_state_t s;
    bool found = false;
    int err = aggregator_load(ctx, sl->sku, &s, &found);
    if (err)
        return err;
    err = set_warehouse(ctx, &s, sl);
    if (err)
        return err;
    /* A SKU the aggregator has not seen is presumed in stock, as a catalog lists
     * it: if its first total is already at the low watermark (its stock and the
     * holds that drained it arrived in one transaction), SOLD_OUT follows after
     * the dwell like for any other SKU. */
    if (!found)
        s.in_stock = true;
    s.updated_at_ms = stage_now_ms(ctx);
    return aggregator_settle(ctx, &s);
}
