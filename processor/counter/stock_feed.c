/* What happens on StockFeed (a warehouse reports physical stock): RECEIVE and
 * ADJUST move on_hand by a delta, COUNT sets it to a cycle count, COUNT_AS_OF
 * sets it to a cycle count less the units sold since the count was taken (its
 * as_of_committed, the pair's committed_total the warehouse system saw), and
 * SAFETY_STOCK sets the buffer that new holds may not touch. A plain COUNT that
 * was taken before a sale and arrives after it gives the sold unit back; only
 * COUNT_AS_OF is safe while the pair sells.
 *
 * Each pair applies a (feed_epoch, feed_seq) once, in increasing order (a
 * repeat or an older one is ignored), so the feed can be replayed. A feed_seq
 * more than HF_FEED_SEQ_JUMP_MAX ahead of the last applied one is dead-lettered
 * rather than applied, since it would freeze the pair; a warehouse system that
 * restarts its numbering does so visibly, with feed_epoch one higher.
 *
 * When on_hand falls below what is promised (a count or adjustment reveals less
 * stock than reserved or allotted), available is reported as 0, the pair's
 * allotments are recalled first (escrow: their holders give back what is not
 * held, allotment.c), then the newest holds are marked REVOKING until the rest
 * fit on hand; each gets a SHORTFALL result so the gateway releases its
 * reservation. Revoked units stay reserved until that
 * release arrives, so available cannot turn positive by mistake meanwhile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "hf_assert.h"
#include "log.h"

static int validate(stage_ctx_t *ctx, const hf_stock_feed_t *f)
{
    if (f->feed_seq <= 0)
        return stage_reject(ctx, "StockFeed feed_seq %lld must be positive",
                            (long long)f->feed_seq);
    if ((unsigned)f->kind >= HF_FEED__COUNT)
        return stage_reject(ctx, "StockFeed kind %d is unknown", (int)f->kind);
    if (f->feed_epoch < 0)
        return stage_reject(ctx, "StockFeed feed_epoch %lld must be >= 0",
                            (long long)f->feed_epoch);
    if (f->kind == HF_FEED_COUNT_AS_OF ? f->as_of_committed < 0 : f->as_of_committed != 0)
        return stage_reject(ctx,
                            "StockFeed %s as_of_committed %lld: only a COUNT_AS_OF carries one "
                            "(>= 0, the committed_total of the pair when it was counted)",
                            hf_feed_kind_name(f->kind), (long long)f->as_of_committed);
    long long lo = f->kind == HF_FEED_ADJUST ? -HF_QTY_MAX : f->kind == HF_FEED_RECEIVE ? 1 : 0;
    if (f->qty < lo || f->qty > HF_PAIR_UNITS_MAX)
        return stage_reject(ctx, "StockFeed %s qty %lld must be in [%lld, %lld]",
                            hf_feed_kind_name(f->kind), (long long)f->qty, lo,
                            (long long)HF_PAIR_UNITS_MAX);
    return counter_check_routing(ctx, f->warehouse_id, f->sku);
}

/* The new on_hand, or a rejection if the feed would make it negative. */
static int next_on_hand(stage_ctx_t *ctx, const hf_stock_feed_t *f, const hf_counter_state_t *c,
                        int64_t *on_hand)
{
    switch (f->kind) {
    case HF_FEED_COUNT:
        *on_hand = f->qty;
        return HF_OK;
    case HF_FEED_COUNT_AS_OF:
        if (f->as_of_committed > c->committed_total)
            return stage_reject(ctx,
                                "StockFeed COUNT_AS_OF as_of_committed %lld is ahead of the "
                                "pair's committed_total %lld: echo the committed_total of a "
                                "StockLevel (or hfctl stock get) read before counting",
                                (long long)f->as_of_committed, (long long)c->committed_total);
        *on_hand = counter_on_hand_as_of(c, f->qty, f->as_of_committed);
        if (*on_hand == 0 && f->qty < c->committed_total - f->as_of_committed)
            log_warn("counter",
                     "%s|%s: count of %lld as of committed %lld, but %lld sold since: on_hand 0",
                     f->warehouse_id, f->sku, (long long)f->qty, (long long)f->as_of_committed,
                     (long long)(c->committed_total - f->as_of_committed));
        return HF_OK;
    case HF_FEED_SAFETY_STOCK:
        *on_hand = c->on_hand;
        return HF_OK;
    case HF_FEED_RECEIVE:
    case HF_FEED_ADJUST:
    case HF_FEED__COUNT:
        break;
    }
    if (__builtin_add_overflow(c->on_hand, f->qty, on_hand))
        return stage_reject(ctx, "StockFeed qty %lld overflows on_hand %lld", (long long)f->qty,
                            (long long)c->on_hand);
    if (*on_hand < 0)
        return stage_reject(ctx,
                            "StockFeed ADJUST %lld would make on_hand negative (on_hand %lld); "
                            "send a COUNT with the physical quantity instead",
                            (long long)f->qty, (long long)c->on_hand);
    return HF_OK;
}

typedef struct {
    char ref[COUNTER_KEY_MAX];
    size_t len;
} hold_ref_buf_t;

/* Collects the newest HELD holds whose quantities cover the shortfall. Reads
 * only: a RocksDB batch iterator must not see writes while it is open. */
static int pick_newest(stage_ctx_t *ctx, const hf_stock_feed_t *f, int64_t shortfall,
                       hold_ref_buf_t **refs_out, size_t *count_out)
{
    char prefix[COUNTER_KEY_MAX];
    size_t prefix_len = open_hold_prefix(prefix, f->warehouse_id, f->sku);
    state_iter_t *it = stage_iter(ctx, prefix, prefix_len, true);
    hold_ref_buf_t *refs = NULL;
    size_t n = 0, cap = 0;
    int err = it ? HF_OK : HF_ERR_NOMEM;
    const void *k, *v;
    size_t klen, vlen;
    /* Bounded by the number of open holds on this pair. */
    while (err == HF_OK && shortfall > 0 && state_iter_next(it, &k, &klen, &v, &vlen)) {
        char hkey[COUNTER_KEY_MAX];
        size_t hkey_len = hold_key_of_ref(hkey, f->warehouse_id, f->sku, v, vlen);
        hf_hold_state_t hs;
        err = counter_load_hold(ctx, hkey, hkey_len, &hs);
        hf_assert(err != HF_ERR_NOTFOUND); /* the index only names existing holds */
        if (err || hs.status != HF_HOLD_HELD)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            hold_ref_buf_t *r = realloc(refs, cap * sizeof *r);
            if (!r) {
                err = HF_ERR_NOMEM;
                break;
            }
            refs = r;
        }
        hf_assert(vlen < COUNTER_KEY_MAX);
        memcpy(refs[n].ref, v, vlen);
        refs[n++].len = vlen;
        shortfall -= hs.qty;
    }
    state_iter_destroy(it);
    *refs_out = refs;
    *count_out = n;
    return err;
}

/* Marks one hold REVOKING and tells its reservation's gateway. */
static int revoke(stage_ctx_t *ctx, const hf_stock_feed_t *f, const hold_ref_buf_t *r,
                  hf_counter_state_t *c)
{
    char hkey[COUNTER_KEY_MAX];
    size_t hkey_len = hold_key_of_ref(hkey, f->warehouse_id, f->sku, r->ref, r->len);
    hf_hold_state_t hs;
    int err = counter_load_hold(ctx, hkey, hkey_len, &hs);
    if (err)
        return err;
    hs.status = HF_HOLD_REVOKING;
    hs.updated_at_ms = stage_now_ms(ctx);
    c->revoking += hs.qty;
    err = counter_store_hold(ctx, hkey, hkey_len, &hs);
    if (err)
        return err;
    /* ref = "<attempt %08x>|<reservation_id>" */
    char rid[HF_ID_LEN_MAX + 1], hex[9];
    hf_assert(r->len > 9 && r->len - 9 <= HF_ID_LEN_MAX && r->ref[8] == '|');
    memcpy(hex, r->ref, 8);
    hex[8] = '\0';
    memcpy(rid, r->ref + 9, r->len - 9);
    rid[r->len - 9] = '\0';
    return counter_emit_result(ctx, rid, (int32_t)strtol(hex, NULL, 16), f->warehouse_id, f->sku,
                               HF_CMD_SHORTFALL, HF_OUTCOME_REVOKED, hs.qty, 0);
}

static int revoke_newest(stage_ctx_t *ctx, const hf_stock_feed_t *f, hf_counter_state_t *c)
{
    hold_ref_buf_t *refs = NULL;
    size_t n = 0;
    int err = pick_newest(ctx, f, counter_shortfall(c), &refs, &n);
    for (size_t i = 0; err == HF_OK && i < n; i++)
        err = revoke(ctx, f, &refs[i], c);
    free(refs);
    return err;
}

/* Whether the feed comes after the pair's last applied one ((feed_epoch,
 * feed_seq) order); a rejection when it jumps too far ahead to be believed. */
static int feed_is_new(stage_ctx_t *ctx, const hf_stock_feed_t *f, const hf_counter_state_t *c,
                       bool *is_new)
{
    *is_new = f->feed_epoch > c->feed_epoch ||
              (f->feed_epoch == c->feed_epoch && f->feed_seq > c->feed_seq);
    if (!*is_new) {
        log_info("counter",
                 "stock feed %s|%s epoch %lld seq %lld ignored: at or before the last applied "
                 "(epoch %lld seq %lld); a warehouse system that restarted its numbering must "
                 "send feed_epoch %lld",
                 f->warehouse_id, f->sku, (long long)f->feed_epoch, (long long)f->feed_seq,
                 (long long)c->feed_epoch, (long long)c->feed_seq, (long long)c->feed_epoch + 1);
        return HF_OK;
    }
    if (f->feed_epoch > c->feed_epoch + 1)
        return stage_reject(ctx,
                            "StockFeed feed_epoch %lld skips ahead of the pair's epoch %lld: "
                            "restart the numbering with feed_epoch %lld and feed_seq from 1",
                            (long long)f->feed_epoch, (long long)c->feed_epoch,
                            (long long)c->feed_epoch + 1);
    int64_t base = f->feed_epoch == c->feed_epoch ? c->feed_seq : 0;
    if (f->feed_seq - base > HF_FEED_SEQ_JUMP_MAX)
        return stage_reject(ctx,
                            "StockFeed feed_seq %lld is %lld past the pair's last applied %lld "
                            "(epoch %lld), more than %lld: applied, it would make every later "
                            "report look old. Send the next feed_seq, or restart the numbering "
                            "with feed_epoch %lld and feed_seq from 1",
                            (long long)f->feed_seq, (long long)(f->feed_seq - base),
                            (long long)base, (long long)f->feed_epoch,
                            (long long)HF_FEED_SEQ_JUMP_MAX, (long long)c->feed_epoch + 1);
    return HF_OK;
}

int counter_on_stock_feed(stage_ctx_t *ctx, const hf_record_t *rec)
{
    const hf_stock_feed_t *f = &rec->u.stock_feed;
    int err = validate(ctx, f);
    if (err)
        return err;
    hf_counter_state_t c;
    err = counter_load(ctx, f->warehouse_id, f->sku, &c);
    if (err)
        return err;
    bool is_new = false;
    err = feed_is_new(ctx, f, &c, &is_new);
    if (err || !is_new)
        return err;
    int64_t on_hand = 0;
    err = next_on_hand(ctx, f, &c, &on_hand);
    if (err)
        return err;
    if (f->feed_epoch != c.feed_epoch)
        log_warn("counter",
                 "%s|%s: stock feed numbering restarted: epoch %lld seq %lld after "
                 "epoch %lld seq %lld",
                 f->warehouse_id, f->sku, (long long)f->feed_epoch, (long long)f->feed_seq,
                 (long long)c.feed_epoch, (long long)c.feed_seq);
    c.on_hand = on_hand;
    c.feed_seq = f->feed_seq;
    c.feed_epoch = f->feed_epoch;
    if (f->kind == HF_FEED_SAFETY_STOCK)
        c.safety_stock = f->qty;
    if (counter_shortfall(&c) > 0) {
        log_warn("counter",
                 "%s|%s: on_hand %lld below promised %lld: recalling allotments, then revoking "
                 "newest holds",
                 f->warehouse_id, f->sku, (long long)c.on_hand, (long long)counter_promised(&c));
        /* Allotments first: their unheld balance goes back without a shopper
         * losing a hold. */
        int64_t recalled = 0;
        err = counter_recall(ctx, f->warehouse_id, f->sku, &c, counter_shortfall(&c), &recalled);
        if (!err && counter_shortfall(&c) > 0)
            err = revoke_newest(ctx, f, &c);
        if (err)
            return err;
    }
    return counter_store(ctx, f->warehouse_id, f->sku, &c);
}
