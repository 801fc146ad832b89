/* What happens on AllotmentSale (escrow, docs/ESCROW.md): a Commit the gateway
 * answered sold units its partition held in its allotment; they leave the
 * allotment and on_hand. While a stock shortfall recalls that allotment its
 * units may not be physically there, so the sale is answered REVOKED (a
 * CounterResult for the reservation's hold, command COMMIT), exactly as a
 * CommitHold of a revoked hold: the gateway undoes the commit and releases the
 * units, which settle the recall. */
#include "counter.h"

static int validate(stage_ctx_t *ctx, const hf_allotment_sale_t *s)
{
    if (s->qty <= 0 || s->qty > HF_QTY_MAX)
        return stage_reject(ctx, "AllotmentSale qty %lld must be in [1, %lld]", (long long)s->qty,
                            (long long)HF_QTY_MAX);
    if (!s->reservation_id[0] || s->attempt < 0 || s->balance < 0)
        return stage_reject(ctx,
                            "AllotmentSale needs a reservation_id, attempt >= 0, balance >= 0");
    if (s->holder_partition < 0 || s->holder_partition >= HF_PARTITIONS_MAX)
        return stage_reject(ctx, "AllotmentSale holder_partition %d must be in [0, %d)",
                            s->holder_partition, HF_PARTITIONS_MAX);
    return counter_check_routing(ctx, s->warehouse_id, s->sku);
}

int counter_on_allotment_sale(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_allotment_sale_t *s = &rec->u.allotment_sale;
    int err = validate(ctx, s);
    if (err)
        return err;
    hf_counter_state_t c;
    hf_allotment_state_t a;
    err = counter_load(ctx, s->warehouse_id, s->sku, &c);
    if (!err)
        err = counter_load_allotment(ctx, s->warehouse_id, s->sku, s->holder_partition, &a);
    if (err)
        return err;
    if (a.recalling > 0)
        return counter_emit_result(ctx, s->reservation_id, s->attempt, s->warehouse_id, s->sku,
                                   HF_CMD_COMMIT, HF_OUTCOME_REVOKED, s->qty, 0);
    if (s->qty > a.allotted)
        return stage_reject(ctx,
                            "AllotmentSale of %lld units but gateway partition %d's allotment of "
                            "%s|%s is %lld",
                            (long long)s->qty, s->holder_partition, s->warehouse_id, s->sku,
                            (long long)a.allotted);
    int64_t old_reported = a.reported_balance;
    counter_sell_allotted(&c, s->qty);
    a.allotted -= s->qty;
    a.sold_total += s->qty;
    a.reported_balance = s->balance;
    err = counter_store_allotment(ctx, s->warehouse_id, s->sku, &a, old_reported, &c);
    return err ? err : counter_store(ctx, s->warehouse_id, s->sku, &c);
}
