/* The reconciler's check 8, sales against stock: every unit the ledger sold
 * was committed by its counter for a hold that was OK, no counter sold a unit
 * the ledger never sold, and no pair sold more than its stock feeds can have
 * brought in. Without it a history where the gateway answered COMMITTED for
 * units the counter refused (a forged or misrouted answer) passes every other
 * check: each topic stays consistent with itself.
 *
 * What is legal: a sale reversed because a stock count revoked one of its
 * holds (COMMITTED then RELEASED/stock_shortfall, or a re-reserved late payment
 * then refunded naming the units given back) — the counter answers that
 * CommitHold REVOKED and commits only the other holds. A commit answered
 * anything else but OK for a sold reservation is a violation on any snapshot
 * (the counter's answer is final); a sale whose commits are not all answered
 * yet, or whose reversal is still on its way, is judged only when quiescent. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "reconcile_int.h"

size_t rc_sale_key(char *out, const char *reservation_id, const char *warehouse_id, const char *sku)
{
    int n = snprintf(out, RC_KEY_LEN_MAX, "%s|%s|%s", reservation_id, warehouse_id, sku);
    return n < 0 ? 0 : (size_t)n < RC_KEY_LEN_MAX ? (size_t)n : RC_KEY_LEN_MAX - 1;
}

int rc_sale_get(reconcile_t *rc, const char *reservation_id, const char *warehouse_id,
                const char *sku, rc_sale_t **out)
{
    char key[RC_KEY_LEN_MAX];
    uint32_t pidx, idx;
    bool added = false;
    int err = rc_pair_get(rc, warehouse_id, sku, &pidx);
    if (!err)
        err = rc_map_upsert(&rc->sales, key, rc_sale_key(key, reservation_id, warehouse_id, sku),
                            &idx, &added);
    if (err)
        return err;
    *out = rc_map_val(&rc->sales, idx);
    (*out)->pair = pidx;
    return HF_OK;
}

int rc_sales_ledger(reconcile_t *rc, const hf_ledger_event_t *e)
{
    for (int32_t a = 0; a < e->allocations_count && a < HF_ALLOCATIONS_MAX; a++) {
        rc_sale_t *s = NULL;
        if (!rc_in_shard(rc, e->allocations[a].warehouse_id, e->allocations[a].sku))
            continue; /* another shard's pass takes it */
        int err = rc_sale_get(rc, e->reservation_id, e->allocations[a].warehouse_id,
                              e->allocations[a].sku, &s);
        if (err)
            return err;
        s->ledger_units += e->allocations[a].qty;
    }
    return HF_OK;
}

int rc_sales_counter(reconcile_t *rc, const hf_counter_result_t *r, int64_t qty)
{
    rc_sale_t *s = NULL;
    int err = rc_sale_get(rc, r->reservation_id, r->warehouse_id, r->sku, &s);
    if (err)
        return err;
    s->counter_units += qty;
    return HF_OK;
}

/* The reservation of a key whose last `fields` fields follow its id. */
const rc_res_t *rc_res_of_key(const reconcile_t *rc, const char *key, size_t len, int fields)
{
    size_t rid_len = rc_key_rid_len(key, len, fields);
    uint32_t idx;
    if (!rid_len || !rc_map_find(&rc->res, key, rid_len, &idx))
        return NULL;
    return rc_map_val(&rc->res, idx);
}

/* A CommitHold answered other than OK for a hold of a sold reservation. */
static void refused_commits(reconcile_t *rc)
{
    for (uint32_t i = 0; i < rc->holds.count; i++) {
        const rc_hold_t *h = rc_map_val(&rc->holds, i);
        if (!h->commit_refused)
            continue;
        size_t len;
        const char *key = rc_map_key(&rc->holds, i, &len);
        const rc_res_t *res = rc_res_of_key(rc, key, len, 3);
        if (!res || !res->sold)
            continue;
        hf_outcome_t o = (hf_outcome_t)(h->commit_refused - 1);
        char k[RC_KEY_LEN_MAX];
        snprintf(k, sizeof k, "%.*s", (int)len, key);
        if (o != HF_OUTCOME_REVOKED)
            rc_violation(rc, RC_K_SALE_COMMIT_REFUSED, k, NULL,
                         "the ledger sold this reservation but the counter answered its "
                         "CommitHold %s: %" PRId64 " units sold that no counter sold",
                         hf_outcome_name(o), h->qty);
        else if (!res->reversed && rc->quiescent)
            rc_violation(rc, RC_K_SALE_COMMIT_REVOKED, k, NULL,
                         "the counter answered the CommitHold REVOKED but the sale was never "
                         "reversed (no RELEASED stock_shortfall, no refund naming the units)");
    }
}

/* Each reservation's sale per pair; the ledger's net sales summed per pair. */
static void sales_vs_commits(reconcile_t *rc)
{
    for (uint32_t i = 0; i < rc->sales.count; i++) {
        const rc_sale_t *s = rc_map_val(&rc->sales, i);
        size_t len;
        const char *key = rc_map_key(&rc->sales, i, &len);
        const rc_res_t *res = rc_res_of_key(rc, key, len, 2);
        bool reversed = res && res->reversed;
        char k[RC_KEY_LEN_MAX];
        snprintf(k, sizeof k, "%.*s", (int)len, key);
        if (s->counter_units > s->ledger_units)
            rc_violation(rc, RC_K_SALE_UNRECORDED, k, NULL,
                         "the counter committed %" PRId64 " units of this reservation, the "
                         "ledger sold %" PRId64,
                         s->counter_units, s->ledger_units);
        else if (s->ledger_units > s->counter_units && !reversed && rc->quiescent)
            rc_violation(rc, RC_K_SALE_UNBACKED, k, NULL,
                         "the ledger sold %" PRId64 " units, the counter committed %" PRId64
                         " for this reservation's held holds and accepted AllotmentSales",
                         s->ledger_units, s->counter_units);
        int64_t net =
            reversed && s->counter_units < s->ledger_units ? s->counter_units : s->ledger_units;
        rc_pair_t *p = rc_map_val(&rc->pairs, s->pair);
        p->ledger_sold += net;
        rc->n.ledger_sold_units += net;
    }
}

static void sold_vs_stock(reconcile_t *rc)
{
    for (uint32_t i = 0; i < rc->pairs.count; i++) {
        const rc_pair_t *p = rc_map_val(&rc->pairs, i);
        int64_t supply = rc_stream_peek(rc, p, RC_IN_COMMANDS)->supply +
                         rc_stream_peek(rc, p, RC_IN_STOCK_FEED)->supply;
        int64_t sold = p->ledger_sold > p->commit_qty ? p->ledger_sold : p->commit_qty;
        rc->n.counter_committed_units += p->commit_qty;
        rc->n.stock_fed_units_max += supply;
        if (sold <= supply)
            continue;
        size_t len;
        const char *key = rc_map_key(&rc->pairs, i, &len);
        char k[RC_KEY_LEN_MAX];
        snprintf(k, sizeof k, "%.*s", (int)len, key);
        rc_violation(rc, RC_K_SOLD_BEYOND_STOCK, k, NULL,
                     "%" PRId64 " units sold (ledger %" PRId64 ", counter %" PRId64
                     "), the stock feeds brought in at most %" PRId64,
                     sold, p->ledger_sold, p->commit_qty, supply);
    }
}

void rc_finish_sales(reconcile_t *rc)
{
    refused_commits(rc);
    sales_vs_commits(rc);
    sold_vs_stock(rc);
}
