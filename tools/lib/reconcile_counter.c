/* The counter side of the reconciler: invariants 1 (every StockLevel and
 * CounterState within bounds, versions rising per pair), 2 (conservation per
 * pair) and 4b (no hold applied twice).
 *
 * What is derivable, soundly:
 * - A hold's CounterResults are in one partition (key reservation_id) in the
 *   order the counter made them, so each hold's life (HELD -> COMMITTED |
 *   RELEASED, via REVOKING) is replayed exactly, and with it the pair's
 *   reserved, revoking and number of state changes — in any reading order,
 *   since sums commute.
 * - Stock feeds: the counter applies a feed iff it is not dead-lettered and its
 *   feed_seq is above the pair's stored one. Within one input topic the order is
 *   known, so the applied set is exact when a pair's feeds come through one
 *   topic; the counter's last CounterState.feed_seq marks how far it got. When a
 *   pair has feeds on both input topics, which were skipped depends on an
 *   interleaving Kafka does not record: on_hand and version are not judged.
 * - on_hand: deltas commute with commits, so without a COUNT it is exact. A
 *   COUNT resets on_hand; commits on the same topic are ordered with it, those
 *   on the other topic are not: on_hand is then checked within bounds. A
 *   COUNT_AS_OF subtracts every commit after its as-of point wherever it was
 *   applied, so it is exact again (bounded only when it left nothing).
 * Every pair-keyed record is tabled only in its pair's shard's pass
 * (rc_in_shard); dead letters, which any pair's input may name, in the first. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "reconcile_int.h"
#include "topics.h"

static size_t dead_key(char *out, const char *topic, int32_t partition, int64_t offset)
{
    int n = snprintf(out, RC_KEY_LEN_MAX, "%d/%" PRId64 "/%s", (int)partition, offset, topic);
    return n < 0 ? 0 : (size_t)n < RC_KEY_LEN_MAX ? (size_t)n : RC_KEY_LEN_MAX - 1;
}

int reconcile_dead_letter(reconcile_t *rc, const hf_dead_letter_t *d)
{
    char key[RC_KEY_LEN_MAX];
    uint32_t idx;
    if (!rc_first_pass(rc))
        return HF_OK; /* the table is kept from the first pass */
    rc->n.dead_letters++;
    return rc_map_upsert(&rc->dead, key,
                         dead_key(key, d->source_topic, d->source_partition, d->source_offset),
                         &idx, NULL);
}

static bool is_dead(const reconcile_t *rc, const rc_pos_t *pos)
{
    char key[RC_KEY_LEN_MAX];
    uint32_t idx;
    return rc_map_find(&rc->dead, key, dead_key(key, pos->topic, pos->partition, pos->offset),
                       &idx);
}

static rc_pair_t *pair_at(reconcile_t *rc, uint32_t idx)
{
    return rc_map_val(&rc->pairs, idx);
}

static void pair_name(const reconcile_t *rc, uint32_t idx, char *out, size_t out_size)
{
    size_t len;
    const char *k = rc_map_key(&rc->pairs, idx, &len);
    snprintf(out, out_size, "%.*s", (int)len, k);
}

int reconcile_counter_state(reconcile_t *rc, const rc_pos_t *pos, const char *warehouse_id,
                            const char *sku, const hf_counter_state_t *c)
{
    uint32_t idx;
    if (!rc_in_shard(rc, warehouse_id, sku))
        return HF_OK;
    int err = rc_pair_get(rc, warehouse_id, sku, &idx);
    if (err)
        return err;
    rc->n.counter_states++;
    rc_pair_t *p = pair_at(rc, idx);
    p->has_state = true;
    p->state = *c;
    if (c->on_hand < 0 || c->reserved < 0 || c->safety_stock < 0 || c->revoking < 0 ||
        c->revoking > c->reserved || c->reserved - c->revoking > c->on_hand) {
        char key[RC_KEY_LEN_MAX];
        rc_pair_key(key, warehouse_id, sku);
        rc_violation(rc, RC_K_COUNTER_STATE_INVALID, key, pos,
                     "on_hand %" PRId64 " reserved %" PRId64 " revoking %" PRId64
                     " safety_stock %" PRId64,
                     c->on_hand, c->reserved, c->revoking, c->safety_stock);
        return HF_OK;
    }
    char why[HF_TEXT_LEN_MAX + 1];
    if (rc_escrow_state_invalid(c, why, sizeof why)) {
        char key[RC_KEY_LEN_MAX];
        rc_pair_key(key, warehouse_id, sku);
        rc_violation(rc, RC_K_COUNTER_STATE_INVALID, key, pos, "%s", why);
    }
    return HF_OK;
}

static void check_level(reconcile_t *rc, const rc_pos_t *pos, const char *key,
                        const hf_stock_level_t *sl)
{
    if (sl->available < 0 || sl->reserved < 0 || sl->on_hand < 0 || sl->safety_stock < 0 ||
        sl->shortfall < 0 || sl->allotted < 0 || sl->escrow_balance < 0)
        rc_violation(rc, RC_K_STOCK_LEVEL_NEGATIVE, key, pos,
                     "available %" PRId64 " reserved %" PRId64 " on_hand %" PRId64
                     " safety_stock %" PRId64 " shortfall %" PRId64 " allotted %" PRId64
                     " escrow_balance %" PRId64,
                     sl->available, sl->reserved, sl->on_hand, sl->safety_stock, sl->shortfall,
                     sl->allotted, sl->escrow_balance);
    /* Free stock: what is neither held by the counter nor allotted (escrow). */
    int64_t free_units = sl->on_hand - sl->reserved - sl->allotted - sl->safety_stock;
    int64_t avail = free_units > 0 ? free_units : 0;
    if (sl->available != avail || sl->shortfall > sl->reserved ||
        sl->reserved - sl->shortfall > sl->on_hand || sl->escrow_balance > sl->allotted)
        rc_violation(rc, RC_K_STOCK_LEVEL_INCONSISTENT, key, pos,
                     "available %" PRId64
                     " but on_hand - reserved - allotted - safety_stock = %" PRId64
                     "; reserved %" PRId64 " shortfall %" PRId64 " on_hand %" PRId64
                     " allotted %" PRId64 " escrow_balance %" PRId64,
                     sl->available, free_units, sl->reserved, sl->shortfall, sl->on_hand,
                     sl->allotted, sl->escrow_balance);
}

int reconcile_stock_level(reconcile_t *rc, const rc_pos_t *pos, const hf_stock_level_t *sl)
{
    uint32_t idx;
    if (!rc_in_shard(rc, sl->warehouse_id, sl->sku))
        return HF_OK;
    int err = rc_pair_get(rc, sl->warehouse_id, sl->sku, &idx);
    if (err)
        return err;
    rc->n.stock_levels++;
    char key[RC_KEY_LEN_MAX];
    rc_pair_key(key, sl->warehouse_id, sl->sku);
    check_level(rc, pos, key, sl);
    rc_pair_t *p = pair_at(rc, idx);
    /* One pair's levels share the sku's partition, written by the pair's single
     * writer: their order is the counter's. */
    if (p->has_level && sl->version <= p->level_version)
        rc_violation(rc, RC_K_STOCK_LEVEL_VERSION, key, pos,
                     "version %" PRId64 " after version %" PRId64 " (partition %d offset %" PRId64
                     ")",
                     sl->version, p->level_version, p->level_partition, p->level_offset);
    p->has_level = true;
    p->level_version = sl->version;
    p->level_digest = rc_level_digest(sl->version, sl->on_hand, sl->reserved, sl->safety_stock,
                                      sl->shortfall, sl->allotted, sl->escrow_balance);
    p->level_partition = pos->partition;
    p->level_offset = pos->offset;
    return HF_OK;
}

/* ---- counter results: each hold's life */

static void illegal(reconcile_t *rc, const rc_pos_t *pos, const char *hkey,
                    const hf_counter_result_t *r, const char *why)
{
    rc_violation(rc, RC_K_COUNTER_RESULT_ILLEGAL, hkey, pos, "%s %s: %s", hf_cmd_name(r->command),
                 hf_outcome_name(r->outcome), why);
}

static void on_hold_answer(reconcile_t *rc, const rc_pos_t *pos, const char *hkey, rc_hold_t *h,
                           rc_pair_t *p, const hf_counter_result_t *r)
{
    if (h->hold_outcome >= 0) { /* a repeat must carry the first answer */
        if ((int)r->outcome != h->hold_outcome || r->qty != h->qty)
            rc_violation(rc, RC_K_HOLD_OUTCOME_CHANGED, hkey, pos,
                         "Hold answered %s qty %" PRId64 ", first answered %s qty %" PRId64,
                         hf_outcome_name(r->outcome), r->qty,
                         hf_outcome_name((hf_outcome_t)h->hold_outcome), h->qty);
        return;
    }
    h->hold_outcome = (int8_t)r->outcome;
    h->qty = r->qty;
    if (r->outcome == HF_OUTCOME_OK) {
        h->status = RC_HOLD_HELD;
        p->reserved_model += r->qty;
        p->ok_holds++;
        rc->n.holds_ok++;
    } else if (r->outcome == HF_OUTCOME_INSUFFICIENT) {
        h->status = RC_HOLD_REFUSED;
        rc->n.holds_refused++;
    } else {
        illegal(rc, pos, hkey, r, "a Hold is answered OK or INSUFFICIENT");
    }
}

static void settle(reconcile_t *rc, rc_hold_t *h, rc_pair_t *p, rc_hold_status_t to)
{
    p->reserved_model -= h->qty;
    if (h->status == RC_HOLD_REVOKING)
        p->revoking_model -= h->qty;
    p->changes++;
    if (to == RC_HOLD_COMMITTED) {
        p->commit_qty += h->qty;
        rc->n.holds_committed++;
    } else {
        rc->n.holds_released++;
    }
    h->status = (int8_t)to;
}

static void on_commit_answer(reconcile_t *rc, const rc_pos_t *pos, const char *hkey, rc_hold_t *h,
                             rc_pair_t *p, const hf_counter_result_t *r)
{
    h->commit_results++;
    if (r->outcome != HF_OUTCOME_OK && !h->commit_refused) /* judged against the ledger */
        h->commit_refused = (int8_t)(1 + (int)r->outcome);
    rc_hold_status_t s = (rc_hold_status_t)h->status;
    switch (r->outcome) {
    case HF_OUTCOME_OK:
        if (s == RC_HOLD_HELD) {
            h->change_ordinal = h->commit_results;
            settle(rc, h, p, RC_HOLD_COMMITTED);
        } else if (s == RC_HOLD_RELEASED) {
            rc_violation(rc, RC_K_HOLD_SETTLED_TWICE, hkey, pos, "committed after it was released");
        } else if (s != RC_HOLD_COMMITTED) {
            illegal(rc, pos, hkey, r, "the hold was never held, or is being revoked");
        }
        return;
    case HF_OUTCOME_NOT_FOUND:
        if (s != RC_HOLD_NONE)
            illegal(rc, pos, hkey, r, "the counter answered this hold before");
        return;
    case HF_OUTCOME_CONFLICT:
        if (s != RC_HOLD_RELEASED && s != RC_HOLD_REFUSED)
            illegal(rc, pos, hkey, r, "only a released or refused hold conflicts");
        return;
    case HF_OUTCOME_REVOKED:
        /* Escrow: an AllotmentSale of an allotment being recalled is answered
         * so, for a hold the counter never held (matched with the sale later). */
        if (s == RC_HOLD_NONE)
            h->escrow_revokes++;
        else if (s != RC_HOLD_REVOKING)
            illegal(rc, pos, hkey, r, "the hold was not being revoked");
        return;
    default:
        illegal(rc, pos, hkey, r, "not an answer to a commit");
    }
}

static void on_release_answer(reconcile_t *rc, const rc_pos_t *pos, const char *hkey, rc_hold_t *h,
                              rc_pair_t *p, const hf_counter_result_t *r)
{
    rc_hold_status_t s = (rc_hold_status_t)h->status;
    switch (r->outcome) {
    case HF_OUTCOME_OK:
        if (s == RC_HOLD_HELD || s == RC_HOLD_REVOKING)
            settle(rc, h, p, RC_HOLD_RELEASED);
        else if (s == RC_HOLD_COMMITTED)
            rc_violation(rc, RC_K_HOLD_SETTLED_TWICE, hkey, pos, "released after it was committed");
        else if (s == RC_HOLD_NONE)
            illegal(rc, pos, hkey, r, "the hold was never answered");
        return;
    case HF_OUTCOME_NOT_FOUND:
        if (s != RC_HOLD_NONE)
            illegal(rc, pos, hkey, r, "the counter answered this hold before");
        return;
    case HF_OUTCOME_CONFLICT:
        if (s != RC_HOLD_COMMITTED)
            illegal(rc, pos, hkey, r, "only a committed hold conflicts with a release");
        return;
    default:
        illegal(rc, pos, hkey, r, "not an answer to a release");
    }
}

static void on_shortfall(reconcile_t *rc, const rc_pos_t *pos, const char *hkey, rc_hold_t *h,
                         rc_pair_t *p, const hf_counter_result_t *r)
{
    if (r->outcome != HF_OUTCOME_REVOKED || h->status != RC_HOLD_HELD) {
        illegal(rc, pos, hkey, r, "only a HELD hold is revoked, once");
        return;
    }
    h->status = RC_HOLD_REVOKING;
    p->revoking_model += h->qty;
    rc->n.holds_revoked++;
}

/* The counter's release of an expired reservation's hold: lag after expiry. */
static void expiry_release_lag(reconcile_t *rc, const hf_counter_result_t *r)
{
    uint32_t idx;
    if (!rc_map_find(&rc->res, r->reservation_id, strlen(r->reservation_id), &idx))
        return;
    const rc_res_t *res = rc_map_val(&rc->res, idx);
    if (res->terminal == HF_LEDGER_EXPIRED)
        rc_lag_add(&rc->counter_lag, r->applied_at_ms - res->expires_at_ms);
}

int reconcile_counter_result(reconcile_t *rc, const rc_pos_t *pos, const hf_counter_result_t *r)
{
    uint32_t pidx, hidx;
    bool added = false;
    if (!rc_in_shard(rc, r->warehouse_id, r->sku))
        return HF_OK;
    char hkey[RC_KEY_LEN_MAX];
    size_t hlen = rc_hold_key(hkey, r->reservation_id, r->attempt, r->warehouse_id, r->sku);
    int err = rc_pair_get(rc, r->warehouse_id, r->sku, &pidx);
    if (!err)
        err = rc_map_upsert(&rc->holds, hkey, hlen, &hidx, &added);
    if (err)
        return err;
    rc_hold_t *h = rc_map_val(&rc->holds, hidx);
    rc_pair_t *p = pair_at(rc, pidx);
    if (added) {
        h->pair = pidx;
        h->hold_outcome = -1;
    }
    int8_t before = h->status;
    switch (r->command) {
    case HF_CMD_HOLD:
        on_hold_answer(rc, pos, hkey, h, p, r);
        break;
    case HF_CMD_COMMIT:
        on_commit_answer(rc, pos, hkey, h, p, r);
        break;
    case HF_CMD_RELEASE:
        on_release_answer(rc, pos, hkey, h, p, r);
        break;
    case HF_CMD_SHORTFALL:
        on_shortfall(rc, pos, hkey, h, p, r);
        break;
    default:
        illegal(rc, pos, hkey, r, "unknown command");
    }
    if (r->command == HF_CMD_RELEASE && h->status == RC_HOLD_RELEASED && before != h->status)
        expiry_release_lag(rc, r);
    if (r->command == HF_CMD_COMMIT && h->status == RC_HOLD_COMMITTED && before != h->status)
        return rc_sales_counter(rc, r, h->qty); /* a held hold sold */
    return HF_OK;
}

/* ---- counter inputs: feeds and the commits among them, per topic */

static bool feed_after(const hf_stock_feed_t *f, int64_t epoch, int64_t seq)
{
    return f->feed_epoch > epoch || (f->feed_epoch == epoch && f->feed_seq > seq);
}

/* The most a feed can add to on_hand: a count may raise it to its qty at most
 * (an as-of count less than that), a delta by its positive part. */
static void add_supply(rc_stream_t *st, const hf_stock_feed_t *f)
{
    if (!feed_after(f, st->supply_epoch, st->supply_seq))
        return;
    st->supply_epoch = f->feed_epoch;
    st->supply_seq = f->feed_seq;
    if (f->kind != HF_FEED_SAFETY_STOCK && f->qty > 0)
        st->supply += f->qty;
}

static void apply_feed(rc_stream_t *st, const hf_stock_feed_t *f, int64_t horizon_epoch,
                       int64_t horizon_seq)
{
    st->feeds++;
    add_supply(st, f);
    /* The counter reads a topic partition in order: once a feed it would have
     * applied lies beyond its last applied (feed_epoch, feed_seq), it has not
     * got there. */
    if (st->stopped || !feed_after(f, st->max_epoch, st->max_seq))
        return;
    if (feed_after(f, horizon_epoch, horizon_seq)) {
        st->stopped = true;
        return;
    }
    switch (f->kind) {
    case HF_FEED_COUNT:
    case HF_FEED_COUNT_AS_OF:
        st->on_hand = f->qty;
        st->count_qty = f->qty;
        st->as_of = f->as_of_committed;
        st->count_as_of = f->kind == HF_FEED_COUNT_AS_OF;
        st->commits_since_count = 0;
        st->has_count = true;
        break;
    case HF_FEED_SAFETY_STOCK:
        st->safety_stock = f->qty;
        st->has_safety = true;
        break;
    case HF_FEED_RECEIVE:
    case HF_FEED_ADJUST:
    default:
        st->on_hand += f->qty;
        break;
    }
    st->max_epoch = f->feed_epoch;
    st->max_seq = f->feed_seq;
    st->applied++;
}

static int on_feed(reconcile_t *rc, rc_input_t input, const hf_stock_feed_t *f)
{
    uint32_t idx;
    rc_stream_t *st = NULL;
    if (!rc_in_shard(rc, f->warehouse_id, f->sku))
        return HF_OK;
    int err = rc_pair_get(rc, f->warehouse_id, f->sku, &idx);
    if (!err)
        err = rc_stream_get(rc, idx, input, &st);
    if (err)
        return err;
    const rc_pair_t *p = pair_at(rc, idx);
    int32_t applied = st->applied;
    apply_feed(st, f, p->has_state ? p->state.feed_epoch : 0, p->has_state ? p->state.feed_seq : 0);
    rc->n.feeds++;
    rc->n.feeds_applied += (size_t)(st->applied - applied);
    return HF_OK;
}

/* The k-th CommitHold of a hold produced its k-th commit answer (each command
 * not dead-lettered gets exactly one): the one that changed the pair sits here
 * among this topic's feeds. */
static int on_commit_command(reconcile_t *rc, rc_input_t input, const hf_commit_hold_t *c)
{
    char hkey[RC_KEY_LEN_MAX];
    uint32_t idx;
    rc_stream_t *st = NULL;
    if (!rc_in_shard(rc, c->warehouse_id, c->sku))
        return HF_OK;
    size_t len = rc_hold_key(hkey, c->reservation_id, c->attempt, c->warehouse_id, c->sku);
    if (!rc_map_find(&rc->holds, hkey, len, &idx))
        return HF_OK;
    rc_hold_t *h = rc_map_val(&rc->holds, idx);
    if (++h->commit_cmds != h->change_ordinal)
        return HF_OK;
    int64_t qty = h->qty;
    int err = rc_stream_get(rc, h->pair, input, &st);
    if (err)
        return err;
    st->on_hand -= qty;
    st->matched_commit_qty += qty;
    st->commits_since_count += qty;
    return HF_OK;
}

int reconcile_counter_input(reconcile_t *rc, rc_input_t input, const rc_pos_t *pos,
                            const hf_record_t *rec)
{
    if (is_dead(rc, pos))
        return HF_OK;
    if (rec->type == HF_REC_STOCK_FEED)
        return on_feed(rc, input, &rec->u.stock_feed);
    if (rec->type == HF_REC_COMMIT_HOLD)
        return on_commit_command(rc, input, &rec->u.commit_hold);
    if (rec->type == HF_REC_ALLOTMENT_REQUEST && input == RC_IN_COMMANDS)
        return rc_escrow_request(rc, &rec->u.allotment_request);
    if (rec->type == HF_REC_ALLOTMENT_SALE && input == RC_IN_COMMANDS)
        return rc_escrow_sale(rc, &rec->u.allotment_sale);
    return HF_OK;
}

/* ---- end state per pair */

static void finish_on_hand(reconcile_t *rc, const char *key, const rc_pair_t *p)
{
    const hf_counter_state_t *c = &p->state;
    rc_input_t t =
        rc_stream_peek(rc, p, RC_IN_STOCK_FEED)->feeds > 0 ? RC_IN_STOCK_FEED : RC_IN_COMMANDS;
    const rc_stream_t *st = rc_stream_peek(rc, p, t);
    int64_t unordered = p->commit_qty - st->matched_commit_qty;
    int64_t hi = st->on_hand, lo = st->on_hand - unordered;
    if (!st->has_count)
        hi = lo; /* no reset: commits subtract in any order */
    if (st->has_count && st->count_as_of) {
        /* An as-of count takes off every unit sold since its as-of point,
         * before or after it was applied: the order does not matter, only
         * the counter's committed_total, unless the count left nothing. */
        int64_t since = c->committed_total - st->as_of;
        lo = st->on_hand + st->commits_since_count - since;
        hi = lo + (since > st->count_qty ? since - st->count_qty : 0);
    }
    if (lo == hi)
        rc->n.pairs_on_hand_exact++;
    else
        rc->n.pairs_on_hand_bounded++;
    if (c->on_hand < lo || c->on_hand > hi || unordered < 0) {
        char want[64];
        if (lo == hi)
            snprintf(want, sizeof want, "%" PRId64, lo);
        else
            snprintf(want, sizeof want, "[%" PRId64 ", %" PRId64 "]", lo, hi);
        rc_violation(rc, RC_K_ON_HAND_MISMATCH, key, NULL,
                     "on_hand %" PRId64 ", feeds and commits give %s (%d feeds applied from %s, "
                     "%" PRId64 " units committed)",
                     c->on_hand, want, st->applied,
                     t == RC_IN_STOCK_FEED ? "stock-feed" : "counter-commands", p->commit_qty);
    }
    int64_t safety = st->has_safety ? st->safety_stock : 0;
    if (c->safety_stock != safety)
        rc_violation(rc, RC_K_SAFETY_STOCK_MISMATCH, key, NULL,
                     "safety_stock %" PRId64 ", the last applied SAFETY_STOCK feed says %" PRId64,
                     c->safety_stock, safety);
    if (c->version != p->ok_holds + p->changes + st->applied)
        rc_violation(rc, RC_K_VERSION_MISMATCH, key, NULL,
                     "version %" PRId64 " but %" PRId64 " holds + %" PRId64
                     " commits/releases + %d feeds changed it",
                     c->version, p->ok_holds, p->changes, st->applied);
}

/* The last StockLevel against the last CounterState: the fields they share,
 * compared through their digest (the level's own values are in the record at
 * the position named). */
static void finish_level_vs_state(reconcile_t *rc, const char *key, const rc_pair_t *p)
{
    const hf_counter_state_t *c = &p->state;
    if (!p->has_level && !p->has_state)
        return;
    uint64_t state_digest = rc_level_digest(c->version, c->on_hand, c->reserved, c->safety_stock,
                                            c->revoking, c->allotted, c->escrow_balance);
    if (p->has_level != p->has_state || p->level_digest != state_digest)
        rc_violation(rc, RC_K_STOCK_LEVEL_VS_STATE, key, NULL,
                     "last StockLevel v%" PRId64 " (partition %d offset %" PRId64
                     ") is not the changelog's v%" PRId64 " on_hand %" PRId64 " reserved %" PRId64
                     " safety_stock %" PRId64 " revoking %" PRId64 " allotted %" PRId64
                     " escrow_balance %" PRId64 "%s",
                     p->level_version, p->level_partition, p->level_offset, c->version, c->on_hand,
                     c->reserved, c->safety_stock, c->revoking, c->allotted, c->escrow_balance,
                     p->has_level ? (p->has_state ? "" : " (no CounterState)")
                                  : " (no StockLevel)");
}

static void finish_pair(reconcile_t *rc, uint32_t idx)
{
    const rc_pair_t *p = pair_at(rc, idx);
    char key[RC_KEY_LEN_MAX];
    pair_name(rc, idx, key, sizeof key);
    const hf_counter_state_t *c = &p->state; /* zero when the counter never wrote it */
    rc->n.counter_reserved_units += c->reserved;
    finish_level_vs_state(rc, key, p);
    if (p->reserved_model != c->reserved)
        rc_violation(rc, RC_K_RESERVED_MISMATCH, key, NULL,
                     "reserved %" PRId64 " but open holds sum to %" PRId64, c->reserved,
                     p->reserved_model);
    if (p->revoking_model != c->revoking)
        rc_violation(rc, RC_K_REVOKING_MISMATCH, key, NULL,
                     "revoking %" PRId64 " but holds being revoked sum to %" PRId64, c->revoking,
                     p->revoking_model);
    int32_t cmd_feeds = rc_stream_peek(rc, p, RC_IN_COMMANDS)->feeds;
    int32_t feed_feeds = rc_stream_peek(rc, p, RC_IN_STOCK_FEED)->feeds;
    if (cmd_feeds > 0 && feed_feeds > 0) {
        /* Which feeds were skipped depends on the interleaving of the topics. */
        rc->n.pairs_feed_order_ambiguous++;
        int64_t base = p->ok_holds + p->changes;
        if (c->version < base || c->version > base + cmd_feeds + feed_feeds)
            rc_violation(rc, RC_K_VERSION_MISMATCH, key, NULL,
                         "version %" PRId64 " outside [%" PRId64 ", %" PRId64 "]", c->version, base,
                         base + cmd_feeds + feed_feeds);
        return;
    }
    finish_on_hand(rc, key, p);
}

void rc_finish_pairs(reconcile_t *rc)
{
    for (uint32_t i = 0; i < rc->pairs.count; i++)
        finish_pair(rc, i);
    for (uint32_t i = 0; i < rc->holds.count; i++) {
        const rc_hold_t *h = rc_map_val(&rc->holds, i);
        rc->n.holds_open += h->status == RC_HOLD_HELD || h->status == RC_HOLD_REVOKING;
    }
}
