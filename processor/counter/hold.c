/* What happens on Hold: the counter is the arbiter. If available covers qty the
 * units move from available to reserved and the hold is remembered as HELD;
 * otherwise the answer is INSUFFICIENT with what is available. Either way the
 * answer is stored with the hold, so a retried Hold re-emits the very same result
 * and never reserves twice. A fresh answer also carries the pair's sellable
 * stock (available plus the allotments' balance): the gateway routes on it
 * while its view is older (processor/gateway/stock_hint.c). */
#include <string.h>

#include "counter.h"

static int validate(stage_ctx_t *ctx, const hf_hold_t *h)
{
    if (h->qty <= 0 || h->qty > HF_QTY_MAX)
        return stage_reject(ctx, "Hold qty %lld must be in [1, %lld]", (long long)h->qty,
                            (long long)HF_QTY_MAX);
    if (!h->reservation_id[0])
        return stage_reject(ctx, "Hold needs a reservation_id");
    if (h->attempt < 0)
        return stage_reject(ctx, "Hold attempt %d must be >= 0", h->attempt);
    return counter_check_routing(ctx, h->warehouse_id, h->sku);
}

int counter_on_hold(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_hold_t *h = &rec->u.hold;
    int err = validate(ctx, h);
    if (err)
        return err;

    char ref[COUNTER_KEY_MAX], hkey[COUNTER_KEY_MAX];
    size_t ref_len = hold_ref(ref, h->attempt, h->reservation_id);
    size_t hkey_len = hold_key_of_ref(hkey, h->warehouse_id, h->sku, ref, ref_len);
    hf_hold_state_t hs;
    err = counter_load_hold(ctx, hkey, hkey_len, &hs);
    if (err == HF_OK) /* a retry: answer as the first time */
        return counter_emit_result(ctx, h->reservation_id, h->attempt, h->warehouse_id, h->sku,
                                   HF_CMD_HOLD, hs.hold_outcome, hs.qty, hs.available_at_result);
    if (err != HF_ERR_NOTFOUND)
        return err;

    hf_counter_state_t c;
    err = counter_load(ctx, h->warehouse_id, h->sku, &c);
    if (err)
        return err;
    memset(&hs, 0, sizeof hs);
    hs.qty = h->qty;
    hs.created_at_ms = hs.updated_at_ms = stage_now_ms(ctx);
    if (counter_available(&c) >= h->qty) {
        c.reserved += h->qty; /* qty <= available <= on_hand: no overflow */
        err = counter_store(ctx, h->warehouse_id, h->sku, &c);
        if (err)
            return err;
        hs.status = HF_HOLD_HELD;
        hs.hold_outcome = HF_OUTCOME_OK;
        hs.seq = c.version;
        char okey[COUNTER_KEY_MAX];
        size_t okey_len = open_hold_key(okey, h->warehouse_id, h->sku, hs.seq);
        /* The open-hold index points back at the hold by its reference. */
        err = stage_put_local(ctx, okey, okey_len, ref, ref_len);
        if (err)
            return err;
    } else {
        hs.status = HF_HOLD_REFUSED;
        hs.hold_outcome = HF_OUTCOME_INSUFFICIENT;
        /* Escrow: units idle in allotments go back to free stock, for the next. */
        err = counter_rebalance(ctx, h->warehouse_id, h->sku, &c, -1);
        if (err)
            return err;
    }
    hs.available_at_result = counter_available_reported(&c);
    err = counter_store_hold(ctx, hkey, hkey_len, &hs);
    if (err)
        return err;
    return counter_emit_hold_result(ctx, h, hs.hold_outcome, &c);
}
