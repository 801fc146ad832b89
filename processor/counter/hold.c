/* What happens on Hold: the counter is the arbiter. If available covers qty the
 * units move from available to reserved and the hold is remembered as HELD;
 * otherwise the answer is INSUFFICIENT with what is available. Either way the
 * answer is stored with the hold, so a retried Hold re-emits the very same result
 * and never reserves twice. A fresh answer also carries the pair's sellable
 * stock (available plus the allotments' balance): the gateway routes on it
 * while its view is older (processor/gateway/stock_hint.c).
 *
 * A Hold that covers a whole reservation may ask the counter to answer the
 * Reserve itself (answer_reserve): when it holds, the shopper's HELD reply and
 * the ledger's HELD event go out in this very transaction, so the answer takes
 * two hops (gateway, counter) instead of three. The gateway records that answer
 * when the result reaches it, and keeps requests for the reservation waiting
 * until then (processor/gateway/park.c). A refusal is the gateway's to answer:
 * it routes again. */
#include <stdio.h>
#include <string.h>

#include "counter.h"
#include "metrics_flow.h"
#include "topics.h"

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

/* The Reserve's HELD answer and its ledger event, built from the hold alone:
 * it is the reservation's only one, so its allocation is the whole answer. */
static int answer_reserve(stage_ctx_t *ctx, const hf_hold_t *h)
{
    hf_allocation_t held;
    memset(&held, 0, sizeof held);
    snprintf(held.warehouse_id, sizeof held.warehouse_id, "%s", h->warehouse_id);
    snprintf(held.sku, sizeof held.sku, "%s", h->sku);
    held.qty = h->qty;
    hf_record_t rec;
    hf_reply_t *r = &hf_record_reset(&rec, HF_REC_REPLY)->u.reply;
    snprintf(r->reservation_id, sizeof r->reservation_id, "%s", h->reservation_id);
    snprintf(r->idempotency_key, sizeof r->idempotency_key, "%s", h->idempotency_key);
    r->outcome = HF_REPLY_HELD;
    r->allocations_count = 1;
    r->allocations[0] = held;
    r->expires_at_ms = h->expires_at_ms;
    r->replied_at_ms = stage_now_ms(ctx);
    size_t id_len = strlen(h->reservation_id);
    const char *topic = h->reply_to[0] ? h->reply_to : topic_name(HF_T_REPLIES);
    int err = stage_emit_to(ctx, topic, h->reservation_id, id_len, &rec);
    if (err)
        return err;
    /* The latency counts from the Reserve's timestamp on holdfast.requests,
     * which the gateway passed on (requested_at_ms), so its wait there counts;
     * for a Hold from a gateway that did not, from when it sent this Hold. */
    int64_t since_ms = h->requested_at_ms > 0 ? h->requested_at_ms : h->issued_at_ms;
    metrics_reply(stage_metrics(ctx), HF_REC_RESERVE, HF_REPLY_HELD,
                  since_ms > 0 ? r->replied_at_ms - since_ms : -1);
    hf_ledger_event_t *e = &hf_record_reset(&rec, HF_REC_LEDGER_EVENT)->u.ledger_event;
    snprintf(e->reservation_id, sizeof e->reservation_id, "%s", h->reservation_id);
    e->kind = HF_LEDGER_HELD;
    e->allocations_count = 1;
    e->allocations[0] = held;
    e->lines_count = 1;
    snprintf(e->lines[0].sku, sizeof e->lines[0].sku, "%s", h->sku);
    e->lines[0].qty = h->qty;
    e->expires_at_ms = h->expires_at_ms;
    e->at_ms = stage_now_ms(ctx);
    snprintf(e->api_key_id, sizeof e->api_key_id, "%s", h->api_key_id);
    return stage_emit(ctx, HF_T_LEDGER, h->reservation_id, id_len, &rec);
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
    if (!err && h->answer_reserve && hs.hold_outcome == HF_OUTCOME_OK)
        err = answer_reserve(ctx, h);
    if (err)
        return err;
    return counter_emit_hold_result(ctx, h, hs.hold_outcome, &c);
}
