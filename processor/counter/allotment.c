/* Escrow at the counter (docs/ESCROW.md): a pair's allotments, one per gateway
 * partition that holds one, loaded and stored with the pair's sums kept in step
 * (CounterState.allotted, recalling, escrow_balance), the grants that answer a
 * holder, and the recall a stock shortfall starts. The handlers that change an
 * allotment are allotment_request.c and allotment_sale.c. */
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "counter.h"
#include "hf_assert.h"
#include "log.h"

size_t allotment_prefix(char *out, const char *warehouse_id, const char *sku)
{
    int n = snprintf(out, COUNTER_KEY_MAX, "L%s|%s|", warehouse_id, sku);
    hf_assert(n > 0 && n < COUNTER_KEY_MAX);
    return (size_t)n;
}

size_t allotment_key(char *out, const char *warehouse_id, const char *sku, int32_t holder)
{
    hf_assert(holder >= 0);
    size_t n = allotment_prefix(out, warehouse_id, sku);
    int m = snprintf(out + n, COUNTER_KEY_MAX - n, "%08x", (unsigned)holder);
    hf_assert(m == 8);
    return n + 8;
}

int counter_load_allotment(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                           int32_t holder, hf_allotment_state_t *out)
{
    char key[COUNTER_KEY_MAX];
    size_t len = allotment_key(key, warehouse_id, sku, holder);
    int err = stage_get_as(ctx, key, len, HF_REC_ALLOTMENT_STATE, out);
    if (err == HF_ERR_NOTFOUND) {
        memset(out, 0, sizeof *out);
        out->holder_partition = holder;
        return HF_OK;
    }
    if (err)
        return err;
    hf_assert(out->holder_partition == holder && out->allotted >= 0 && out->recalling >= 0 &&
              out->recalling <= out->allotted && out->reported_balance >= 0 &&
              out->reported_balance <= out->allotted);
    return HF_OK;
}

int counter_store_allotment(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                            hf_allotment_state_t *a, int64_t old_reported, hf_counter_state_t *c)
{
    /* What the holder reported cannot exceed what it holds. */
    if (a->reported_balance > a->allotted)
        a->reported_balance = a->allotted;
    hf_assert(a->allotted >= 0 && a->recalling >= 0 && a->recalling <= a->allotted &&
              a->reported_balance >= 0);
    c->escrow_balance += a->reported_balance - old_reported;
    a->updated_at_ms = stage_now_ms(ctx);
    char key[COUNTER_KEY_MAX];
    size_t len = allotment_key(key, warehouse_id, sku, a->holder_partition);
    return stage_put_as(ctx, key, len, HF_REC_ALLOTMENT_STATE, a);
}

int counter_emit_grant(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                       const hf_allotment_state_t *a, int64_t seq, int64_t granted_qty,
                       int64_t recall_qty, bool shortfall, const hf_counter_state_t *c)
{
    hf_assert(a->holder_key[0]);
    hf_record_t rec;
    hf_allotment_grant_t *g = &hf_record_reset(&rec, HF_REC_ALLOTMENT_GRANT)->u.allotment_grant;
    snprintf(g->warehouse_id, sizeof g->warehouse_id, "%s", warehouse_id);
    snprintf(g->sku, sizeof g->sku, "%s", sku);
    g->holder_partition = a->holder_partition;
    g->seq = seq;
    g->granted_qty = granted_qty;
    g->recall_qty = recall_qty;
    g->shortfall = shortfall;
    g->allotted = a->allotted;
    g->available = counter_available_reported(c);
    g->applied_at_ms = stage_now_ms(ctx);
    /* The holder_key lands in the holder's partition of the co-partitioned
     * results topic, where its gateway task reads. */
    return stage_emit(ctx, HF_T_COUNTER_RESULTS, a->holder_key, strlen(a->holder_key), &rec);
}

/* Reads the pair's allotments (no writes while the iterator is open). */
static int read_allotments(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                           hf_allotment_state_t *out, size_t *count)
{
    char prefix[COUNTER_KEY_MAX];
    size_t prefix_len = allotment_prefix(prefix, warehouse_id, sku);
    state_iter_t *it = stage_iter(ctx, prefix, prefix_len, false);
    if (!it)
        return HF_ERR_NOMEM;
    const void *k, *v;
    size_t klen, vlen;
    int err = HF_OK;
    *count = 0;
    /* One per holder partition: bounded by HF_PARTITIONS_MAX. */
    while (err == HF_OK && *count < HF_PARTITIONS_MAX &&
           state_iter_next(it, &k, &klen, &v, &vlen)) {
        hf_record_t rec; /* the iterator's value is the stored record */
        char why[128];
        err = codec_decode(v, vlen, &rec, why, sizeof why);
        if (err == HF_OK && rec.type == HF_REC_ALLOTMENT_STATE)
            out[(*count)++] = rec.u.allotment_state;
    }
    state_iter_destroy(it);
    return err;
}

int counter_recall(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                   hf_counter_state_t *c, int64_t qty, int64_t *recalled)
{
    *recalled = 0;
    if (qty <= 0 || c->allotted - c->recalling <= 0)
        return HF_OK;
    static _Thread_local hf_allotment_state_t all[HF_PARTITIONS_MAX];
    size_t n = 0;
    int err = read_allotments(ctx, warehouse_id, sku, all, &n);
    for (size_t i = 0; err == HF_OK && i < n && *recalled < qty; i++) {
        hf_allotment_state_t *a = &all[i];
        int64_t x = a->allotted - a->recalling;
        if (x > qty - *recalled)
            x = qty - *recalled;
        if (x <= 0)
            continue;
        a->recalling += x;
        c->recalling += x;
        *recalled += x;
        log_warn("counter", "%s|%s: recalling %lld of gateway partition %d's allotment of %lld",
                 warehouse_id, sku, (long long)x, a->holder_partition, (long long)a->allotted);
        err = counter_store_allotment(ctx, warehouse_id, sku, a, a->reported_balance, c);
        if (!err)
            err = counter_emit_grant(ctx, warehouse_id, sku, a, 0, 0, x, true, c);
    }
    return err;
}

int counter_rebalance(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                      hf_counter_state_t *c, int32_t except_holder)
{
    if (c->escrow_balance <= 0)
        return HF_OK;
    static _Thread_local hf_allotment_state_t all[HF_PARTITIONS_MAX];
    size_t n = 0;
    int err = read_allotments(ctx, warehouse_id, sku, all, &n);
    int64_t now = stage_now_ms(ctx);
    for (size_t i = 0; err == HF_OK && i < n; i++) {
        hf_allotment_state_t *a = &all[i];
        if (a->holder_partition == except_holder || a->reported_balance <= 0 ||
            now - a->rebalance_asked_at_ms < HF_ESCROW_REBALANCE_INTERVAL_MS)
            continue;
        a->rebalance_asked_at_ms = now;
        err = counter_store_allotment(ctx, warehouse_id, sku, a, a->reported_balance, c);
        if (!err)
            err =
                counter_emit_grant(ctx, warehouse_id, sku, a, 0, 0, a->reported_balance, false, c);
    }
    return err;
}
