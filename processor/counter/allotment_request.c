/* What happens on AllotmentRequest (escrow, docs/ESCROW.md): a gateway partition
 * gives units of its allotment back (return_qty), asks for more (want_qty), or
 * only reports its unheld balance. Returned units go back to free stock (and
 * settle a recall first); a grant takes at most escrow_grant_share_pct of the
 * free stock, nothing while the allotment is being recalled. Every request that
 * returns or asks is answered by an AllotmentGrant (granted_qty may be 0: the
 * holder then serves direct); a report only moves the sellable balance the
 * pair's StockLevel carries. */
#include <stdio.h>

#include "counter.h"

static int validate(stage_ctx_t *ctx, const hf_allotment_request_t *r)
{
    if (r->want_qty < 0 || r->want_qty > HF_QTY_MAX || r->return_qty < 0 ||
        r->return_qty > HF_PAIR_UNITS_MAX)
        return stage_reject(ctx,
                            "AllotmentRequest want_qty %lld must be in [0, %lld] and return_qty "
                            "%lld >= 0",
                            (long long)r->want_qty, (long long)HF_QTY_MAX,
                            (long long)r->return_qty);
    if (r->balance < 0 || r->seq <= 0)
        return stage_reject(ctx, "AllotmentRequest balance %lld must be >= 0 and seq %lld > 0",
                            (long long)r->balance, (long long)r->seq);
    if (r->holder_partition < 0 || r->holder_partition >= HF_PARTITIONS_MAX || !r->holder_key[0])
        return stage_reject(ctx,
                            "AllotmentRequest needs holder_partition in [0, %d) and a holder_key",
                            HF_PARTITIONS_MAX);
    return counter_check_routing(ctx, r->warehouse_id, r->sku);
}

int counter_on_allotment_request(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_allotment_request_t *r = &rec->u.allotment_request;
    int err = validate(ctx, r);
    if (err)
        return err;
    hf_counter_state_t c;
    hf_allotment_state_t a;
    err = counter_load(ctx, r->warehouse_id, r->sku, &c);
    if (!err)
        err = counter_load_allotment(ctx, r->warehouse_id, r->sku, r->holder_partition, &a);
    if (err)
        return err;
    if (r->return_qty > a.allotted)
        return stage_reject(ctx,
                            "AllotmentRequest returns %lld units but gateway partition %d's "
                            "allotment of %s|%s is %lld",
                            (long long)r->return_qty, r->holder_partition, r->warehouse_id, r->sku,
                            (long long)a.allotted);
    int64_t old_reported = a.reported_balance;
    a.allotted -= r->return_qty;
    c.allotted -= r->return_qty;
    a.returned_total += r->return_qty;
    int64_t settled = r->return_qty < a.recalling ? r->return_qty : a.recalling;
    a.recalling -= settled;
    c.recalling -= settled;

    int64_t granted = 0;
    if (r->want_qty > 0 && a.recalling == 0)
        granted = counter_grant_qty(&c, r->want_qty, counter_grant_share_pct(ctx));
    a.allotted += granted;
    c.allotted += granted;
    a.granted_total += granted;
    a.reported_balance = r->balance + granted;
    if (r->seq > a.answered_seq)
        a.answered_seq = r->seq;
    snprintf(a.holder_key, sizeof a.holder_key, "%s", r->holder_key);
    err = counter_store_allotment(ctx, r->warehouse_id, r->sku, &a, old_reported, &c);
    if (!err)
        err = counter_store(ctx, r->warehouse_id, r->sku, &c);
    if (err || (r->want_qty == 0 && r->return_qty == 0))
        return err;
    err = counter_emit_grant(ctx, r->warehouse_id, r->sku, &a, r->seq, granted, 0, false, &c);
    /* Starving (no free stock left) while others sit on unheld units: ask
     * them to give back. */
    if (!err && r->want_qty > 0 && granted == 0 && a.recalling == 0)
        err = counter_rebalance(ctx, r->warehouse_id, r->sku, &c, r->holder_partition);
    return err;
}
