/* The gateway side of the reconciler: invariants 3 (one terminal ledger event
 * per reservation, the legal graph, allocations summing to the lines, one
 * api_key_id on every event of a reservation: the key that reserved it),
 * 4a (no idempotency key with two outcomes), 5 (expiry within the lag bound)
 * and 7 (what the ledger holds is what the counters reserve).
 *
 * A reservation's ledger events share its partition (key reservation_id) and
 * its single writer, so their order is the order of its transitions. Replies
 * to one (reservation_id, idempotency_key) share a partition of one reply
 * topic. Only the outcomes the gateway stores with the key (settled ones) must
 * repeat: CONFLICT, NOT_FOUND, REJECTED_INVALID and BUSY are answers to a request
 * that was not applied (another body, too early, invalid, shed) and may differ
 * between retries by design.
 *
 * Shards: the ledger's own rules and the replies are judged in the first
 * shard's pass, which builds the reservation table; every pass takes from the
 * ledger what its own pairs hold and sold (the sale event is found again by
 * its position), and adds at its end what its counters hold for each
 * reservation. The reservations are judged after the last shard. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "reconcile_int.h"

#define KIND_BIT(k) ((uint16_t)(1u << (k)))

static bool terminal_kind(hf_ledger_kind_t k)
{
    return k == HF_LEDGER_COMMITTED || k == HF_LEDGER_RELEASED || k == HF_LEDGER_EXPIRED ||
           k == HF_LEDGER_REJECTED;
}

/* NULL when the allocations cover every line exactly, else why not (in buf). */
static const char *allocations_vs_lines(const hf_ledger_event_t *e, char *buf, size_t size)
{
    if (e->lines_count < 1 || e->lines_count > HF_LINES_MAX || e->allocations_count < 0 ||
        e->allocations_count > HF_ALLOCATIONS_MAX) {
        snprintf(buf, size, "%d lines, %d allocations", e->lines_count, e->allocations_count);
        return buf;
    }
    for (int32_t i = 0; i < e->lines_count; i++) {
        int64_t sum = 0;
        for (int32_t a = 0; a < e->allocations_count; a++)
            if (strcmp(e->allocations[a].sku, e->lines[i].sku) == 0)
                sum += e->allocations[a].qty;
        if (sum != e->lines[i].qty) {
            snprintf(buf, size, "sku %s: %" PRId64 " allocated, %" PRId64 " requested",
                     e->lines[i].sku, sum, e->lines[i].qty);
            return buf;
        }
    }
    for (int32_t a = 0; a < e->allocations_count; a++) {
        bool known = false;
        for (int32_t i = 0; i < e->lines_count && !known; i++)
            known = strcmp(e->allocations[a].sku, e->lines[i].sku) == 0;
        if (!known || e->allocations[a].qty <= 0) {
            snprintf(buf, size, "allocation %s|%s qty %" PRId64 " matches no line",
                     e->allocations[a].warehouse_id, e->allocations[a].sku, e->allocations[a].qty);
            return buf;
        }
    }
    return NULL;
}

static void check_expiry(reconcile_t *rc, const rc_pos_t *pos, const hf_ledger_event_t *e,
                         rc_res_t *r)
{
    int64_t lag = e->at_ms - e->expires_at_ms;
    r->expires_at_ms = e->expires_at_ms;
    rc_lag_add(&rc->gw_lag, lag);
    if (lag > rc->lim.expiry_lag_max_ms)
        rc_violation(rc, RC_K_EXPIRY_LATE, e->reservation_id, pos,
                     "expired %" PRId64 " ms after expires_at_ms %" PRId64 " (bound %" PRId64 ")",
                     lag, e->expires_at_ms, rc->lim.expiry_lag_max_ms);
    else if (lag < 0)
        rc_violation(rc, RC_K_EXPIRY_EARLY, e->reservation_id, pos,
                     "expired %" PRId64 " ms before expires_at_ms %" PRId64, -lag,
                     e->expires_at_ms);
}

static void on_terminal(reconcile_t *rc, const rc_pos_t *pos, const hf_ledger_event_t *e,
                        rc_res_t *r)
{
    const char *kind = hf_ledger_kind_name(e->kind);
    bool held = r->kinds_seen & KIND_BIT(HF_LEDGER_HELD);
    /* The one exception, a documented business rule: a sale reversed because a
     * stock count revoked one of its holds (COMMITTED, then RELEASED with reason
     * stock_shortfall, and the payment flagged for refund). Only once. */
    bool reversal = r->terminal == HF_LEDGER_COMMITTED && e->kind == HF_LEDGER_RELEASED &&
                    strcmp(e->reason, "stock_shortfall") == 0;
    if (r->terminal >= 0 && !reversal) {
        rc_violation(rc, RC_K_LEDGER_TERMINAL_TWICE, e->reservation_id, pos, "%s after %s", kind,
                     hf_ledger_kind_name((hf_ledger_kind_t)r->terminal));
        return;
    }
    r->terminal = (int8_t)e->kind;
    r->sold |= e->kind == HF_LEDGER_COMMITTED;
    r->reversed |= reversal;
    if ((e->kind == HF_LEDGER_COMMITTED || e->kind == HF_LEDGER_EXPIRED) && !held)
        rc_violation(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, e->reservation_id, pos,
                     "%s of a reservation that was never HELD", kind);
    if (e->kind == HF_LEDGER_REJECTED && held)
        rc_violation(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, e->reservation_id, pos,
                     "REJECTED after HELD");
    if (e->kind == HF_LEDGER_EXPIRED)
        check_expiry(rc, pos, e, r);
}

/* A late payment that bought its expired reservation's lines after all
 * (late_payment_policy rereserve): a sale recorded without moving the
 * terminal EXPIRED, at most once per reservation. */
static bool rebooking(const hf_ledger_event_t *e)
{
    return e->kind == HF_LEDGER_LATE_PAYMENT && strcmp(e->reason, "rereserved") == 0;
}

static void on_rebook(reconcile_t *rc, const rc_pos_t *pos, const hf_ledger_event_t *e, rc_res_t *r)
{
    rc->n.late_rereserved++;
    if (r->terminal != HF_LEDGER_EXPIRED)
        rc_violation(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, e->reservation_id, pos,
                     "re-reserved for a late payment but not EXPIRED");
    else if (r->rebooked)
        rc_violation(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, e->reservation_id, pos,
                     "re-reserved twice");
    else
        r->sold = true; /* the first re-reservation of an expired one: a sale */
    r->rebooked = true;
    r->rebook_digest = rc_allocations_digest(e->allocations, e->allocations_count);
}

static void on_event(reconcile_t *rc, const rc_pos_t *pos, const hf_ledger_event_t *e, rc_res_t *r)
{
    if (terminal_kind(e->kind)) {
        on_terminal(rc, pos, e, r);
    } else if (e->kind == HF_LEDGER_HELD) {
        if (r->terminal >= 0)
            rc_violation(rc, RC_K_LEDGER_AFTER_TERMINAL, e->reservation_id, pos, "HELD after %s",
                         hf_ledger_kind_name((hf_ledger_kind_t)r->terminal));
        else if (r->kinds_seen & KIND_BIT(HF_LEDGER_HELD))
            rc_violation(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, e->reservation_id, pos, "HELD twice");
        r->held_units = 0;
        for (int32_t a = 0; a < e->allocations_count && a < HF_ALLOCATIONS_MAX; a++)
            r->held_units += e->allocations[a].qty;
        r->held_digest = rc_allocations_digest(e->allocations, e->allocations_count);
    } else { /* LATE_PAYMENT: a payment for an expired (or revoked) reservation */
        rc->n.late_payments++;
        if (r->terminal != HF_LEDGER_EXPIRED && r->terminal != HF_LEDGER_RELEASED)
            rc_violation(rc, RC_K_LEDGER_ILLEGAL_TRANSITION, e->reservation_id, pos,
                         "LATE_PAYMENT of a reservation that is neither EXPIRED nor RELEASED");
        if (rebooking(e))
            on_rebook(rc, pos, e, r);
        /* A refund naming units after the re-reserved sale: a stock count
         * revoked one of its holds before the commit, those units were not sold. */
        else if (r->rebooked && strcmp(e->reason, "refund") == 0 && e->allocations_count > 0)
            r->reversed = true;
    }
    char why[HF_TEXT_LEN_MAX + 1];
    if ((e->kind == HF_LEDGER_HELD || e->kind == HF_LEDGER_COMMITTED || rebooking(e)) &&
        allocations_vs_lines(e, why, sizeof why))
        rc_violation(rc, RC_K_LEDGER_ALLOCATIONS, e->reservation_id, pos, "%s: %s",
                     hf_ledger_kind_name(e->kind), why);
    r->kinds_seen |= KIND_BIT(e->kind);
}

/* Every event of a reservation names the key that reserved it (the gateway
 * keeps it with the reservation; the counter's HELD copies the Hold's): another
 * key on a later event is a writer that lost or swapped it. "" (no key, or
 * written before the field) must stay "" too. */
static void check_api_key(reconcile_t *rc, const rc_pos_t *pos, const hf_ledger_event_t *e,
                          rc_res_t *r, bool first)
{
    uint32_t h = rc_str_hash32(e->api_key_id);
    if (first)
        r->api_key_hash = h;
    else if (h != r->api_key_hash)
        rc_violation(rc, RC_K_LEDGER_API_KEY, e->reservation_id, pos,
                     "%s names api_key_id '%s', not the key of the reservation's first event",
                     hf_ledger_kind_name(e->kind), e->api_key_id);
}

/* What the HELD event holds at each pair: at the counter (a Hold) or, escrow,
 * in an allotment of the reservation's gateway partition (judged at the end). */
static int held_per_pair(reconcile_t *rc, const hf_ledger_event_t *e)
{
    for (int32_t a = 0; a < e->allocations_count && a < HF_ALLOCATIONS_MAX; a++) {
        rc_sale_t *s = NULL;
        if (!rc_in_shard(rc, e->allocations[a].warehouse_id, e->allocations[a].sku))
            continue;
        int err = rc_sale_get(rc, e->reservation_id, e->allocations[a].warehouse_id,
                              e->allocations[a].sku, &s);
        if (err)
            return err;
        s->held_units += e->allocations[a].qty;
    }
    return HF_OK;
}

/* A later shard's pass: the reservation's rules were judged in the first; only
 * what this shard's pairs hold (HELD) and sold (the sale event) is taken. */
static int ledger_again(reconcile_t *rc, const rc_pos_t *pos, const hf_ledger_event_t *e)
{
    if ((unsigned)e->kind >= HF_LEDGER__COUNT)
        return HF_OK;
    int err = e->kind == HF_LEDGER_HELD ? held_per_pair(rc, e) : HF_OK;
    uint32_t idx;
    if (err || !rc_map_find(&rc->res, e->reservation_id, strlen(e->reservation_id), &idx))
        return err;
    const rc_res_t *r = rc_map_val(&rc->res, idx);
    bool sale_event = r->sale_offset == pos->offset && r->sale_partition == pos->partition;
    return sale_event ? rc_sales_ledger(rc, e) : HF_OK;
}

int reconcile_ledger(reconcile_t *rc, const rc_pos_t *pos, const hf_ledger_event_t *e)
{
    if (!rc_first_pass(rc))
        return ledger_again(rc, pos, e);
    if ((unsigned)e->kind >= HF_LEDGER__COUNT) {
        reconcile_foreign(rc, pos, "LedgerEvent with an unknown kind");
        return HF_OK;
    }
    uint32_t idx;
    bool added = false;
    int err = rc_map_upsert(&rc->res, e->reservation_id, strlen(e->reservation_id), &idx, &added);
    if (err)
        return err;
    rc_res_t *r = rc_map_val(&rc->res, idx);
    if (added) {
        r->terminal = -1;
        r->sale_offset = -1;
    }
    bool was_sold = r->sold;
    check_api_key(rc, pos, e, r, added);
    on_event(rc, pos, e, r);
    if (!was_sold && r->sold) {
        r->sale_partition = pos->partition;
        r->sale_offset = pos->offset;
    }
    if (e->kind == HF_LEDGER_HELD) {
        err = held_per_pair(rc, e);
        if (err)
            return err;
    }
    /* The units of the one sale a reservation makes (COMMITTED or re-reserved). */
    return !was_sold && r->sold ? rc_sales_ledger(rc, e) : HF_OK;
}

/* ---- replies */

static bool settled(hf_reply_outcome_t o)
{
    return o == HF_REPLY_HELD || o == HF_REPLY_COMMITTED || o == HF_REPLY_RELEASED ||
           o == HF_REPLY_EXPIRED || o == HF_REPLY_REJECTED_INSUFFICIENT;
}

static void reply_vs_ledger(reconcile_t *rc, const rc_pos_t *pos, const hf_reply_t *r,
                            uint64_t digest)
{
    uint32_t idx;
    if ((r->outcome != HF_REPLY_HELD && r->outcome != HF_REPLY_COMMITTED) ||
        !rc_map_find(&rc->res, r->reservation_id, strlen(r->reservation_id), &idx))
        return;
    const rc_res_t *res = rc_map_val(&rc->res, idx);
    if (r->outcome == HF_REPLY_COMMITTED && res->rebooked && res->rebook_digest == digest)
        return; /* the late payment's sale */
    if ((res->kinds_seen & KIND_BIT(HF_LEDGER_HELD)) && res->held_digest != digest)
        rc_violation(rc, RC_K_REPLY_VS_LEDGER, r->reservation_id, pos,
                     "%s reply (key %s) names other allocations than the ledger's HELD event",
                     hf_reply_outcome_name(r->outcome), r->idempotency_key);
}

int reconcile_reply(reconcile_t *rc, const rc_pos_t *pos, const hf_reply_t *r)
{
    if (!rc_first_pass(rc))
        return HF_OK; /* judged in the first shard's pass */
    rc->n.replies++;
    if ((unsigned)r->outcome >= HF_REPLY__COUNT) {
        reconcile_foreign(rc, pos, "Reply with an unknown outcome");
        return HF_OK;
    }
    if (!settled(r->outcome))
        return HF_OK;
    char key[RC_KEY_LEN_MAX];
    int n = snprintf(key, sizeof key, "%s|%s", r->reservation_id, r->idempotency_key);
    uint32_t idx;
    bool added = false;
    int err = rc_map_upsert(&rc->replies, key, (size_t)n, &idx, &added);
    if (err)
        return err;
    rc_reply_key_t *k = rc_map_val(&rc->replies, idx);
    uint64_t digest = rc_allocations_digest(r->allocations, r->allocations_count);
    reply_vs_ledger(rc, pos, r, digest);
    if (added) {
        k->outcome = (int8_t)r->outcome;
        k->digest = digest;
        k->partition = pos->partition;
        k->offset = pos->offset;
    } else if (k->outcome != (int8_t)r->outcome) {
        rc_violation(rc, RC_K_IDEMPOTENCY_OUTCOME, key, pos,
                     "%s, first answered %s at partition %d offset %" PRId64,
                     hf_reply_outcome_name(r->outcome),
                     hf_reply_outcome_name((hf_reply_outcome_t)k->outcome), k->partition,
                     k->offset);
    } else if (k->digest != digest) {
        rc_violation(rc, RC_K_IDEMPOTENCY_ALLOCATIONS, key, pos,
                     "%s with other allocations than at partition %d offset %" PRId64,
                     hf_reply_outcome_name(r->outcome), k->partition, k->offset);
    }
    return HF_OK;
}

/* ---- end state: the ledger against the counters */

void rc_finish_open_units(reconcile_t *rc)
{
    for (uint32_t i = 0; i < rc->holds.count; i++) {
        const rc_hold_t *h = rc_map_val(&rc->holds, i);
        if (h->status != RC_HOLD_HELD && h->status != RC_HOLD_REVOKING)
            continue;
        size_t len, rid_len;
        const char *key = rc_map_key(&rc->holds, i, &len);
        rid_len = rc_key_rid_len(key, len, 3);
        uint32_t idx;
        if (rid_len && rc_map_find(&rc->res, key, rid_len, &idx))
            ((rc_res_t *)rc_map_val(&rc->res, idx))->open_units += h->qty;
        else
            rc->n.open_units_without_reservation += h->qty;
        /* ... and per pair: "rid|w|sku" from "rid|attempt|w|sku" */
        size_t plen;
        const char *pk = rc_map_key(&rc->pairs, h->pair, &plen);
        char skey[RC_KEY_LEN_MAX];
        int n = snprintf(skey, sizeof skey, "%.*s|%.*s", (int)rid_len, key, (int)plen, pk);
        if (rid_len && n > 0 && (size_t)n < sizeof skey &&
            rc_map_find(&rc->sales, skey, (size_t)n, &idx))
            ((rc_sale_t *)rc_map_val(&rc->sales, idx))->open_units += h->qty;
    }
}

static void count_terminal(reconcile_t *rc, const rc_res_t *r)
{
    switch (r->terminal) {
    case HF_LEDGER_COMMITTED:
        rc->n.committed++;
        break;
    case HF_LEDGER_RELEASED:
        rc->n.released++;
        break;
    case HF_LEDGER_EXPIRED:
        rc->n.expired++;
        break;
    case HF_LEDGER_REJECTED:
        rc->n.rejected++;
        break;
    default:
        break;
    }
}

void rc_finish_reservations(reconcile_t *rc)
{
    for (uint32_t i = 0; i < rc->res.count; i++) {
        const rc_res_t *r = rc_map_val(&rc->res, i);
        bool held = (r->kinds_seen & KIND_BIT(HF_LEDGER_HELD)) && r->terminal < 0;
        count_terminal(rc, r);
        if (held) {
            rc->n.held++;
            rc->n.ledger_held_units += r->held_units;
        }
        if (r->open_units + r->escrow_units == (held ? r->held_units : 0))
            continue;
        rc->n.reservations_out_of_step++;
        size_t len;
        const char *rid = rc_map_key(&rc->res, i, &len);
        char key[RC_KEY_LEN_MAX];
        snprintf(key, sizeof key, "%.*s", (int)len, rid);
        if (rc->quiescent)
            rc_violation(rc, RC_K_RESERVATION_HOLDS, key, NULL,
                         "ledger says %s with %" PRId64 " units, counters hold %" PRId64
                         " and allotments %" PRId64,
                         held               ? "HELD"
                         : r->terminal >= 0 ? hf_ledger_kind_name((hf_ledger_kind_t)r->terminal)
                                            : "not held",
                         held ? r->held_units : 0, r->open_units, r->escrow_units);
    }
    int64_t direct = rc->n.ledger_held_units - rc->n.escrow_held_units;
    if (rc->quiescent && direct != rc->n.counter_reserved_units)
        rc_violation(rc, RC_K_LEDGER_VS_COUNTERS, NULL, NULL,
                     "reservations HELD in the ledger hold %" PRId64 " units (%" PRId64
                     " of them in allotments), the counters reserve %" PRId64 " (%" PRId64
                     " of them by holds of no reservation)",
                     rc->n.ledger_held_units, rc->n.escrow_held_units, rc->n.counter_reserved_units,
                     rc->n.open_units_without_reservation);
}
