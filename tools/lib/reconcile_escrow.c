/* The reconciler's check 9, escrow (DESIGN.md section 5, section 10 invariant
 * 7): a pair's counter leases allotments to gateway partitions, which hold,
 * release and expire reservations against them without a counter hold, and
 * report each sale (AllotmentSale) in the transaction that answers it.
 *
 * What is derivable, soundly:
 * - Per allotment (pair, holder partition): granted (the counter's
 *   AllotmentGrants) - returned (AllotmentRequest.return_qty) - sold (the
 *   AllotmentSales the counter accepted) is what the counter allots; never
 *   negative (a sale beyond the grants), equal to its AllotmentState and, summed
 *   over holders, to CounterState.allotted. Sums commute, so the reading order
 *   of the grants (keyed by holder, spread over counter-results) does not
 *   matter; but a sale read on counter-commands may use a grant committed after
 *   counter-results was read: SNAPSHOT.
 * - A grant answers a request committed before it, and counter-results is read
 *   before counter-commands: its units never exceed what was asked, on any
 *   snapshot. Likewise an AllotmentSale answered REVOKED (a CounterResult COMMIT
 *   REVOKED for a hold the counter never held) names a sale on counter-commands.
 * - An AllotmentSale is accepted unless dead-lettered or answered REVOKED; the
 *   k-th sale of a hold is the revoked one while k <= its REVOKED answers (the
 *   gateway sends one per hold; a recall precedes the accepted sales).
 * - Units a HELD reservation holds at an escrow pair without an open counter
 *   hold sit in an allotment: at quiescence they fit in it (its holder is the
 *   partition of the reservation's key, when the partition count is known).
 * - Free stock: allotted + open direct holds - being taken back <= on_hand.
 * - The gateway's EscrowState (its changelog partition is the holder): at
 *   quiescence allotted is the counter's and allotted - balance is what its
 *   HELD reservations hold (DESIGN.md invariant 7, per allotment).
 * Every allotment is its pair's, so it lives in its pair's shard; whether the
 * gateway wrote any EscrowState at all is counted over every shard in the
 * first pass. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hf_assert.h"
#include "kafka.h"
#include "reconcile_int.h"

#define KIND_BIT(k) ((uint16_t)(1u << (k)))

void reconcile_set_gateway_partitions(reconcile_t *rc, int32_t partitions)
{
    rc->gateway_partitions = partitions > 0 ? partitions : 0;
}

static size_t allot_key(char *out, const char *warehouse_id, const char *sku, int32_t holder)
{
    int n = snprintf(out, RC_KEY_LEN_MAX, "%s|%s|%d", warehouse_id, sku, (int)holder);
    return n < 0 ? 0 : (size_t)n < RC_KEY_LEN_MAX ? (size_t)n : RC_KEY_LEN_MAX - 1;
}

static int allot_get(reconcile_t *rc, const char *warehouse_id, const char *sku, int32_t holder,
                     rc_allot_t **out)
{
    char key[RC_KEY_LEN_MAX];
    uint32_t pidx, idx;
    rc_escrow_pair_t *book = NULL;
    int err = rc_pair_get(rc, warehouse_id, sku, &pidx);
    if (!err)
        err =
            rc_map_upsert(&rc->allots, key, allot_key(key, warehouse_id, sku, holder), &idx, NULL);
    if (!err)
        err = rc_escrow_pair_get(rc, pidx, &book); /* the pair has an allotment */
    if (err)
        return err;
    *out = rc_map_val(&rc->allots, idx);
    (*out)->pair = pidx;
    (*out)->holder = holder;
    return HF_OK;
}

const char *rc_escrow_state_invalid(const hf_counter_state_t *c, char *buf, size_t size)
{
    int64_t promised = c->reserved - c->revoking + c->allotted - c->recalling;
    if (c->allotted < 0 || c->recalling < 0 || c->recalling > c->allotted ||
        c->escrow_balance < 0 || c->escrow_balance > c->allotted) {
        snprintf(buf, size,
                 "allotted %" PRId64 " recalling %" PRId64 " escrow_balance %" PRId64
                 ": want 0 <= recalling, escrow_balance <= allotted",
                 c->allotted, c->recalling, c->escrow_balance);
        return buf;
    }
    if (promised > c->on_hand) {
        snprintf(buf, size,
                 "promised %" PRId64 " (reserved %" PRId64 " - revoking %" PRId64
                 " + allotted %" PRId64 " - recalling %" PRId64 ") above on_hand %" PRId64,
                 promised, c->reserved, c->revoking, c->allotted, c->recalling, c->on_hand);
        return buf;
    }
    return NULL;
}

int reconcile_allotment_state(reconcile_t *rc, const rc_pos_t *pos, const char *warehouse_id,
                              const char *sku, const hf_allotment_state_t *a)
{
    rc_allot_t *al = NULL;
    if (!rc_in_shard(rc, warehouse_id, sku))
        return HF_OK;
    int err = allot_get(rc, warehouse_id, sku, a->holder_partition, &al);
    if (err)
        return err;
    al->has_state = true;
    al->state_allotted = a->allotted;
    al->state_granted = a->granted_total;
    al->state_returned = a->returned_total;
    al->state_sold = a->sold_total;
    al->state_recalling = a->recalling;
    al->state_reported = a->reported_balance;
    if (a->allotted < 0 || a->recalling < 0 || a->recalling > a->allotted ||
        a->reported_balance < 0 || a->reported_balance > a->allotted ||
        a->granted_total - a->returned_total - a->sold_total != a->allotted) {
        char key[RC_KEY_LEN_MAX];
        allot_key(key, warehouse_id, sku, a->holder_partition);
        rc_violation(
            rc, RC_K_COUNTER_STATE_INVALID, key, pos,
            "AllotmentState allotted %" PRId64 " recalling %" PRId64 " reported_balance %" PRId64
            "; granted %" PRId64 " - returned %" PRId64 " - sold %" PRId64 " = %" PRId64,
            a->allotted, a->recalling, a->reported_balance, a->granted_total, a->returned_total,
            a->sold_total, a->granted_total - a->returned_total - a->sold_total);
    }
    return HF_OK;
}

/* First pass: whether the last record of each allotment key (any shard's) is
 * an EscrowState or a tombstone. */
static int gw_live_note(reconcile_t *rc, const char *warehouse_id, const char *sku, int32_t holder,
                        bool live)
{
    char key[RC_KEY_LEN_MAX];
    size_t len = allot_key(key, warehouse_id, sku, holder);
    uint32_t idx;
    if (!live && !rc_map_find(&rc->gw_live, key, len, &idx))
        return HF_OK;
    int err = live ? rc_map_upsert(&rc->gw_live, key, len, &idx, NULL) : HF_OK;
    if (err)
        return err;
    uint8_t *was = rc_map_val(&rc->gw_live, idx);
    rc->gw_live_count += (size_t)live - (size_t)*was;
    *was = live;
    return HF_OK;
}

int reconcile_escrow_state(reconcile_t *rc, const rc_pos_t *pos, const char *warehouse_id,
                           const char *sku, const hf_escrow_state_t *es)
{
    rc_allot_t *al = NULL;
    int err =
        rc_first_pass(rc) ? gw_live_note(rc, warehouse_id, sku, pos->partition, es != NULL) : HF_OK;
    if (err || !rc_in_shard(rc, warehouse_id, sku))
        return err;
    err = allot_get(rc, warehouse_id, sku, pos->partition, &al);
    if (err)
        return err;
    al->has_gw = es != NULL;
    if (!es)
        return HF_OK;
    al->gw_allotted = es->allotted;
    al->gw_balance = es->balance;
    if (es->allotted < 0 || es->balance < 0 || es->balance > es->allotted || es->owed_qty < 0 ||
        es->asking_qty < 0) {
        char key[RC_KEY_LEN_MAX];
        allot_key(key, warehouse_id, sku, pos->partition);
        rc_violation(rc, RC_K_ESCROW_STATE_INVALID, key, pos,
                     "EscrowState allotted %" PRId64 " balance %" PRId64 " owed_qty %" PRId64
                     " asking_qty %" PRId64 ": want 0 <= balance <= allotted",
                     es->allotted, es->balance, es->owed_qty, es->asking_qty);
    }
    return HF_OK;
}

int reconcile_allotment_grant(reconcile_t *rc, const rc_pos_t *pos, const hf_allotment_grant_t *g)
{
    rc_allot_t *al = NULL;
    if (!rc_in_shard(rc, g->warehouse_id, g->sku))
        return HF_OK;
    int err = allot_get(rc, g->warehouse_id, g->sku, g->holder_partition, &al);
    if (err)
        return err;
    bool recall = g->seq == 0;
    if (g->granted_qty < 0 || g->recall_qty < 0 || g->allotted < 0 || g->available < 0 ||
        g->seq < 0 || g->holder_partition < 0 || g->granted_qty > g->allotted ||
        (recall && (g->recall_qty == 0 || g->granted_qty != 0)) || (!recall && g->recall_qty)) {
        char key[RC_KEY_LEN_MAX];
        allot_key(key, g->warehouse_id, g->sku, g->holder_partition);
        rc_violation(rc, RC_K_ALLOTMENT_GRANT_INVALID, key, pos,
                     "seq %" PRId64 " granted_qty %" PRId64 " recall_qty %" PRId64
                     " allotted %" PRId64 " available %" PRId64,
                     g->seq, g->granted_qty, g->recall_qty, g->allotted, g->available);
        return HF_OK;
    }
    if (recall) {
        rc->n.escrow_recalls++;
        rc->n.escrow_recalled_units += g->recall_qty;
        return HF_OK;
    }
    al->granted += g->granted_qty;
    rc->n.escrow_grants++;
    rc->n.escrow_granted_units += g->granted_qty;
    return HF_OK;
}

int rc_escrow_request(reconcile_t *rc, const hf_allotment_request_t *r)
{
    rc_allot_t *al = NULL;
    if (!rc_in_shard(rc, r->warehouse_id, r->sku))
        return HF_OK;
    int err = allot_get(rc, r->warehouse_id, r->sku, r->holder_partition, &al);
    if (err)
        return err;
    al->returned += r->return_qty;
    al->wanted += r->want_qty;
    /* The counter stores the pair for every request it applies. */
    ((rc_pair_t *)rc_map_val(&rc->pairs, al->pair))->changes++;
    rc->n.escrow_requests++;
    if (r->return_qty > 0) {
        rc->n.escrow_returns++;
        rc->n.escrow_returned_units += r->return_qty;
    }
    return HF_OK;
}

/* True when this sale of the hold is one the counter answered REVOKED. */
static bool sale_revoked(reconcile_t *rc, const hf_allotment_sale_t *s)
{
    char hkey[RC_KEY_LEN_MAX];
    uint32_t idx;
    size_t len = rc_hold_key(hkey, s->reservation_id, s->attempt, s->warehouse_id, s->sku);
    if (!rc_map_find(&rc->holds, hkey, len, &idx))
        return false;
    rc_hold_t *h = rc_map_val(&rc->holds, idx);
    return ++h->escrow_sales <= h->escrow_revokes;
}

int rc_escrow_sale(reconcile_t *rc, const hf_allotment_sale_t *s)
{
    rc_allot_t *al = NULL;
    rc_sale_t *sale = NULL;
    rc_stream_t *st = NULL;
    if (!rc_in_shard(rc, s->warehouse_id, s->sku))
        return HF_OK;
    int err = allot_get(rc, s->warehouse_id, s->sku, s->holder_partition, &al);
    if (err)
        return err;
    if (sale_revoked(rc, s)) {
        rc->n.escrow_sales_revoked++;
        return HF_OK;
    }
    uint32_t pidx = al->pair;
    err = rc_sale_get(rc, s->reservation_id, s->warehouse_id, s->sku, &sale);
    if (!err)
        err = rc_stream_get(rc, pidx, RC_IN_COMMANDS, &st);
    if (err)
        return err;
    rc_pair_t *p = rc_map_val(&rc->pairs, pidx);
    al->sold += s->qty; /* the allotments' table did not move: no entry was added */
    sale->counter_units += s->qty;
    sale->escrow_sold += s->qty;
    /* Like a committed hold: off on_hand, at its place among this topic's feeds. */
    p->commit_qty += s->qty;
    p->changes++;
    st->on_hand -= s->qty;
    st->matched_commit_qty += s->qty;
    st->commits_since_count += s->qty;
    rc->n.escrow_sales++;
    rc->n.escrow_sold_units += s->qty;
    return HF_OK;
}

/* ---- end state */

static void copy_key(const rc_map_t *m, uint32_t idx, char *out)
{
    size_t len;
    const char *k = rc_map_key(m, idx, &len);
    snprintf(out, RC_KEY_LEN_MAX, "%.*s", (int)len, k);
}

/* One HELD reservation's units at an escrow pair, none of them at the counter. */
static void held_in_allotment(reconcile_t *rc, uint32_t sale_idx, rc_res_t *res)
{
    rc_sale_t *s = rc_map_val(&rc->sales, sale_idx);
    size_t len;
    const char *key = rc_map_key(&rc->sales, sale_idx, &len);
    rc_escrow_pair_t *book = rc_escrow_pair_peek(rc, rc_map_val(&rc->pairs, s->pair));
    hf_assert(book); /* only escrow pairs get here */
    res->escrow_units += s->held_units;
    book->held += s->held_units;
    rc->n.escrow_held_units += s->held_units;
    if (rc->gateway_partitions <= 0)
        return;
    size_t rid_len = rc_key_rid_len(key, len, 2);
    int32_t holder = kafka_partition_for_key(key, rid_len, rc->gateway_partitions);
    size_t plen;
    const char *pk = rc_map_key(&rc->pairs, s->pair, &plen);
    char akey[RC_KEY_LEN_MAX];
    int n = snprintf(akey, sizeof akey, "%.*s|%d", (int)plen, pk, (int)holder);
    uint32_t idx;
    if (n > 0 && (size_t)n < sizeof akey && rc_map_find(&rc->allots, akey, (size_t)n, &idx)) {
        ((rc_allot_t *)rc_map_val(&rc->allots, idx))->held += s->held_units;
        return;
    }
    if (!rc->quiescent)
        return;
    char k[RC_KEY_LEN_MAX];
    copy_key(&rc->sales, sale_idx, k);
    rc_violation(rc, RC_K_ESCROW_HELD_BEYOND_ALLOTMENT, k, NULL,
                 "HELD %" PRId64 " units with no counter hold, and gateway partition %d (its "
                 "key's) never had an allotment of the pair",
                 s->held_units, (int)holder);
}

void rc_finish_escrow_held(reconcile_t *rc)
{
    for (uint32_t i = 0; i < rc->sales.count; i++) {
        rc_sale_t *s = rc_map_val(&rc->sales, i);
        if (s->held_units <= 0 || s->open_units != 0 ||
            !((const rc_pair_t *)rc_map_val(&rc->pairs, s->pair))->escrow)
            continue;
        size_t len;
        const char *key = rc_map_key(&rc->sales, i, &len);
        rc_res_t *res = (rc_res_t *)rc_res_of_key(rc, key, len, 2);
        if (res && (res->kinds_seen & KIND_BIT(HF_LEDGER_HELD)) && res->terminal < 0)
            held_in_allotment(rc, i, res);
    }
}

/* Quiescent, the gateway's count of its allotment is the counter's, and what
 * is not in its balance is held by its HELD reservations (invariant 7). Judged
 * where the gateway changelog has EscrowStates at all. */
static void escrow_state_vs_allotment(reconcile_t *rc, const rc_allot_t *a, int64_t model,
                                      const char *k)
{
    if (!rc->quiescent || rc->gateway_partitions <= 0 || rc->gw_live_count == 0)
        return;
    if (!a->has_gw) {
        if (model != 0)
            rc_violation(rc, RC_K_ESCROW_STATE_VS_ALLOTMENT, k, NULL,
                         "the counter allots %" PRId64
                         " units to this gateway partition, which has no EscrowState of them",
                         model);
        return;
    }
    if (a->gw_allotted != model || a->gw_allotted - a->gw_balance != a->held)
        rc_violation(rc, RC_K_ESCROW_STATE_VS_ALLOTMENT, k, NULL,
                     "EscrowState allotted %" PRId64 " balance %" PRId64
                     "; the counter allots %" PRId64 " and HELD reservations hold %" PRId64
                     " in it",
                     a->gw_allotted, a->gw_balance, model, a->held);
}

static void finish_allotment(reconcile_t *rc, uint32_t idx)
{
    const rc_allot_t *a = rc_map_val(&rc->allots, idx);
    int64_t model = a->granted - a->returned - a->sold;
    rc_escrow_pair_t *book = rc_escrow_pair_peek(rc, rc_map_val(&rc->pairs, a->pair));
    hf_assert(book); /* allot_get gave the pair one */
    book->allotted += model;
    if (a->has_state) {
        book->has_allotment_state = true;
        book->states_allotted += a->state_allotted;
        book->states_recalling += a->state_recalling;
        book->states_reported += a->state_reported;
    }
    char k[RC_KEY_LEN_MAX];
    copy_key(&rc->allots, idx, k);
    if (model < 0)
        rc_violation(rc, RC_K_ALLOTMENT_OVERSOLD, k, NULL,
                     "granted %" PRId64 ", returned %" PRId64 " and sold %" PRId64 ": %" PRId64
                     " units sold or returned that were never allotted",
                     a->granted, a->returned, a->sold, -model);
    if (a->granted > a->wanted)
        rc_violation(rc, RC_K_ALLOTMENT_GRANT_INVALID, k, NULL,
                     "granted %" PRId64 " units, its requests asked for %" PRId64, a->granted,
                     a->wanted);
    if (a->has_state && (a->state_allotted != model || a->state_granted != a->granted ||
                         a->state_returned != a->returned || a->state_sold != a->sold))
        rc_violation(rc, RC_K_ALLOTMENT_VS_COUNTER, k, NULL,
                     "AllotmentState allotted %" PRId64 " (granted %" PRId64 " returned %" PRId64
                     " sold %" PRId64 "); grants, returns and sales give %" PRId64 " (%" PRId64
                     ", %" PRId64 ", %" PRId64 ")",
                     a->state_allotted, a->state_granted, a->state_returned, a->state_sold, model,
                     a->granted, a->returned, a->sold);
    escrow_state_vs_allotment(rc, a, model, k);
    if (rc->quiescent && a->held > (model > 0 ? model : 0))
        rc_violation(rc, RC_K_ESCROW_HELD_BEYOND_ALLOTMENT, k, NULL,
                     "HELD reservations of this gateway partition hold %" PRId64
                     " units in an allotment of %" PRId64,
                     a->held, model);
}

static void finish_escrow_pair(reconcile_t *rc, uint32_t idx)
{
    const rc_pair_t *p = rc_map_val(&rc->pairs, idx);
    static const rc_escrow_pair_t no_book;
    const rc_escrow_pair_t *book = p->escrow ? rc_escrow_pair_peek(rc, p) : &no_book;
    int64_t allotted = book->allotted;
    const hf_counter_state_t *c = &p->state;
    if (!p->escrow && c->allotted == 0)
        return;
    rc->n.escrow_pairs++;
    rc->n.escrow_allotted_units += c->allotted;
    char k[RC_KEY_LEN_MAX];
    copy_key(&rc->pairs, idx, k);
    if (allotted != c->allotted)
        rc_violation(rc, RC_K_ALLOTMENT_VS_COUNTER, k, NULL,
                     "CounterState allotted %" PRId64 ", the allotments' grants - returns - "
                     "sales sum to %" PRId64,
                     c->allotted, allotted);
    /* The counter's pair and its allotments change in one transaction and share
     * a changelog partition: their last values agree on any snapshot. */
    if (book->has_allotment_state &&
        (book->states_allotted != c->allotted || book->states_recalling != c->recalling ||
         book->states_reported != c->escrow_balance))
        rc_violation(rc, RC_K_ALLOTMENT_VS_COUNTER, k, NULL,
                     "CounterState allotted %" PRId64 " recalling %" PRId64
                     " escrow_balance %" PRId64 ", its AllotmentStates sum to %" PRId64 ", %" PRId64
                     ", %" PRId64,
                     c->allotted, c->recalling, c->escrow_balance, book->states_allotted,
                     book->states_recalling, book->states_reported);
    int64_t direct = p->reserved_model - p->revoking_model;
    if (allotted + direct - c->recalling > c->on_hand)
        rc_violation(rc, RC_K_ALLOTMENTS_BEYOND_STOCK, k, NULL,
                     "allotted %" PRId64 " + held by counter holds %" PRId64
                     " - being recalled %" PRId64 " exceeds on_hand %" PRId64
                     ": units promised twice",
                     allotted, direct, c->recalling, c->on_hand);
    if (rc->quiescent && rc->gateway_partitions <= 0 && book->held > allotted)
        rc_violation(rc, RC_K_ESCROW_HELD_BEYOND_ALLOTMENT, k, NULL,
                     "HELD reservations hold %" PRId64
                     " units here with no counter hold, the allotments are %" PRId64,
                     book->held, allotted);
}

/* A REVOKED answer to a commit of a hold the counter never held must answer
 * an AllotmentSale. */
static void revokes_without_sale(reconcile_t *rc)
{
    for (uint32_t i = 0; i < rc->holds.count; i++) {
        const rc_hold_t *h = rc_map_val(&rc->holds, i);
        if (h->escrow_revokes <= h->escrow_sales)
            continue;
        char k[RC_KEY_LEN_MAX];
        copy_key(&rc->holds, i, k);
        rc_violation(rc, RC_K_COUNTER_RESULT_ILLEGAL, k, NULL,
                     "COMMIT REVOKED %d times for a hold the counter never held, with %d "
                     "AllotmentSales of it",
                     (int)h->escrow_revokes, (int)h->escrow_sales);
    }
}

void rc_finish_escrow(reconcile_t *rc)
{
    rc->n.allotments += rc->allots.count;
    for (uint32_t i = 0; i < rc->allots.count; i++)
        rc->n.escrow_states += ((const rc_allot_t *)rc_map_val(&rc->allots, i))->has_gw;
    for (uint32_t i = 0; i < rc->allots.count; i++)
        finish_allotment(rc, i);
    for (uint32_t i = 0; i < rc->pairs.count; i++)
        finish_escrow_pair(rc, i);
    revokes_without_sale(rc);
}
