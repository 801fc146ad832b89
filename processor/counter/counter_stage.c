/* The counter stage's definition — its handler table — and what its handlers
 * share: loading and storing counters and holds with their invariants checked,
 * emitting results, and the batch end that publishes one StockLevel per pair that
 * changed in the transaction. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "counter.h"
#include "hf_assert.h"
#include "metrics_flow.h"
#include "topics.h"

static const hf_topic_id_t counter_inputs[] = {HF_T_COUNTER_COMMANDS, HF_T_STOCK_FEED};

/* What happens on each record type, and which topic may carry it: one
 * handler, one file. Commands come from the gateway; the stock feed carries
 * only stock (a ReleaseHold there would free another shopper's unit). A
 * StockFeed may also come on the commands topic, ordered with the holds of
 * its pair (replays, tests). */
static const stage_handler_t counter_handlers[] = {
    {HF_T_COUNTER_COMMANDS, HF_REC_HOLD, counter_on_hold},
    {HF_T_COUNTER_COMMANDS, HF_REC_COMMIT_HOLD, counter_on_commit_hold},
    {HF_T_COUNTER_COMMANDS, HF_REC_RELEASE_HOLD, counter_on_release_hold},
    {HF_T_COUNTER_COMMANDS, HF_REC_STOCK_FEED, counter_on_stock_feed},
    {HF_T_COUNTER_COMMANDS, HF_REC_ALLOTMENT_REQUEST, counter_on_allotment_request},
    {HF_T_COUNTER_COMMANDS, HF_REC_ALLOTMENT_SALE, counter_on_allotment_sale},
    {HF_T_STOCK_FEED, HF_REC_STOCK_FEED, counter_on_stock_feed},
};

int counter_check_routing(stage_ctx_t *ctx, const char *warehouse_id, const char *sku)
{
    const char *bad = counter_check_ids(warehouse_id, sku);
    if (bad)
        return stage_reject(ctx, "%s", bad);
    char want[COUNTER_KEY_MAX];
    size_t want_len = pair_key(want, warehouse_id, sku);
    size_t key_len = 0;
    const void *key = stage_record_key(ctx, &key_len);
    /* The single-writer guarantee rests on every command for a pair landing in
     * the pair's partition: a mis-keyed record would be applied by another task. */
    if (key_len != want_len || memcmp(key, want, want_len) != 0)
        return stage_reject(
            ctx, "record key must be \"%s\" (warehouse_id|sku) to reach its counter", want);
    return HF_OK;
}

int counter_load(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                 hf_counter_state_t *out)
{
    char key[COUNTER_KEY_MAX];
    size_t len = counter_key(key, warehouse_id, sku);
    int err = stage_get_as(ctx, key, len, HF_REC_COUNTER_STATE, out);
    if (err == HF_ERR_NOTFOUND) {
        memset(out, 0, sizeof *out);
        return HF_OK;
    }
    if (err)
        return err;
    counter_assert(out);
    return HF_OK;
}

int counter_store(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                  hf_counter_state_t *c)
{
    c->version++;
    counter_assert(c);
    char key[COUNTER_KEY_MAX];
    size_t len = counter_key(key, warehouse_id, sku);
    return stage_put_as(ctx, key, len, HF_REC_COUNTER_STATE, c);
}

int counter_load_hold(stage_ctx_t *ctx, const char *key, size_t key_len, hf_hold_state_t *out)
{
    return stage_get_as(ctx, key, key_len, HF_REC_HOLD_STATE, out);
}

int counter_store_hold(stage_ctx_t *ctx, const char *key, size_t key_len, const hf_hold_state_t *h)
{
    return stage_put_as(ctx, key, key_len, HF_REC_HOLD_STATE, h);
}

static int emit_result(stage_ctx_t *ctx, const char *reservation_id, int32_t attempt,
                       const char *warehouse_id, const char *sku, hf_cmd_t command,
                       hf_outcome_t outcome, int64_t qty, int64_t available, int64_t escrow_balance)
{
    hf_record_t rec;
    hf_counter_result_t *r = &hf_record_reset(&rec, HF_REC_COUNTER_RESULT)->u.counter_result;
    snprintf(r->reservation_id, sizeof r->reservation_id, "%s", reservation_id);
    snprintf(r->warehouse_id, sizeof r->warehouse_id, "%s", warehouse_id);
    snprintf(r->sku, sizeof r->sku, "%s", sku);
    r->attempt = attempt;
    r->command = command;
    r->outcome = outcome;
    r->qty = qty;
    r->available = available;
    r->applied_at_ms = stage_now_ms(ctx);
    r->escrow_balance = escrow_balance;
    return stage_emit(ctx, HF_T_COUNTER_RESULTS, reservation_id, strlen(reservation_id), &rec);
}

int counter_emit_result(stage_ctx_t *ctx, const char *reservation_id, int32_t attempt,
                        const char *warehouse_id, const char *sku, hf_cmd_t command,
                        hf_outcome_t outcome, int64_t qty, int64_t available)
{
    return emit_result(ctx, reservation_id, attempt, warehouse_id, sku, command, outcome, qty,
                       available, -1);
}

int counter_emit_hold_result(stage_ctx_t *ctx, const hf_hold_t *h, hf_outcome_t outcome,
                             const hf_counter_state_t *c)
{
    int64_t balance = c->escrow_balance > 0 ? c->escrow_balance : 0;
    return emit_result(ctx, h->reservation_id, h->attempt, h->warehouse_id, h->sku, HF_CMD_HOLD,
                       outcome, h->qty, counter_available_reported(c), balance);
}

/* Batch end: a written key "C<w>|<sku>|" means that counter changed. */
static int emit_stock_level(stage_ctx_t *ctx, int32_t partition, const char *key, size_t key_len)
{
    if (key_len < 4 || key[0] != 'C')
        return HF_OK;
    hf_record_t out;
    hf_counter_state_t c;
    int err = stage_get_as(ctx, key, key_len, HF_REC_COUNTER_STATE, &c);
    if (err)
        return err;
    counter_assert(&c);

    hf_stock_level_t *sl = &hf_record_reset(&out, HF_REC_STOCK_LEVEL)->u.stock_level;
    const char *bar = memchr(key + 1, '|', key_len - 1);
    hf_assert(bar && key[key_len - 1] == '|');
    size_t wlen = (size_t)(bar - (key + 1)), slen = key_len - 1 - wlen - 2;
    hf_assert(wlen < sizeof sl->warehouse_id && slen < sizeof sl->sku);
    memcpy(sl->warehouse_id, key + 1, wlen);
    memcpy(sl->sku, bar + 1, slen);
    sl->on_hand = c.on_hand;
    sl->reserved = c.reserved;
    sl->safety_stock = c.safety_stock;
    sl->available = counter_available_reported(&c);
    sl->shortfall = c.revoking;
    sl->version = c.version;
    sl->updated_at_ms = stage_now_ms(ctx);
    sl->committed_total = c.committed_total;
    sl->feed_seq = c.feed_seq;
    sl->feed_epoch = c.feed_epoch;
    sl->allotted = c.allotted;
    sl->escrow_balance = c.escrow_balance;
    return stage_emit(ctx, HF_T_STOCK_LEVELS, sl->sku, slen, &out);
}

static int counter_batch_end(stage_ctx_t *ctx)
{
    return stage_foreach_written(ctx, emit_stock_level);
}

static bool hold_is_open(hf_hold_status_t s);

/* Restore: the open-hold index (O keys) is derived from the hold records and
 * never changelogged; a restored hold record opens or closes its entry. */
static int counter_reindex(stage_ctx_t *ctx, const char *key, size_t key_len,
                           const hf_record_t *rec)
{
    if (key_len < 2 || key[0] != 'H')
        return HF_OK;
    /* "H<w>|<sku>|<ref>" */
    const char *bar1 = memchr(key + 1, '|', key_len - 1);
    const char *bar2 = bar1 ? memchr(bar1 + 1, '|', key_len - (size_t)(bar1 + 1 - key)) : NULL;
    if (!bar2 || bar2 + 1 >= key + key_len)
        return HF_OK; /* not a key this program wrote */
    char w[HF_WAREHOUSE_LEN_MAX + 1], sku[HF_SKU_LEN_MAX + 1];
    size_t wlen = (size_t)(bar1 - (key + 1)), slen = (size_t)(bar2 - (bar1 + 1));
    if (wlen >= sizeof w || slen >= sizeof sku)
        return HF_OK;
    memcpy(w, key + 1, wlen);
    w[wlen] = '\0';
    memcpy(sku, bar1 + 1, slen);
    sku[slen] = '\0';
    const char *ref = bar2 + 1;
    size_t ref_len = key_len - (size_t)(ref - key);

    char okey[COUNTER_KEY_MAX];
    hf_hold_state_t old;
    int err = counter_load_hold(ctx, key, key_len, &old);
    if (err && err != HF_ERR_NOTFOUND)
        return err;
    if (err == HF_OK && hold_is_open(old.status)) {
        err = stage_del_local(ctx, okey, open_hold_key(okey, w, sku, old.seq));
        if (err)
            return err;
    }
    if (rec && rec->type == HF_REC_HOLD_STATE && hold_is_open(rec->u.hold_state.status))
        return stage_put_local(ctx, okey, open_hold_key(okey, w, sku, rec->u.hold_state.seq), ref,
                               ref_len);
    return HF_OK;
}

/* Time between two counter transactions: the configured floor, and a period
 * that grows with the input rate (pacing.h). */
static void counter_pacing(const hf_config_t *cfg, pacing_conf_t *out)
{
    out->floor_ms = cfg->counter_commit_interval_ms;
    out->gap_pct = cfg->txn_gap_pct;
    out->period_max_ms = cfg->counter_txn_period_max_ms;
    out->full_records_s = cfg->counter_txn_period_full_records_s;
}

static const stage_def_t counter_def = {
    .name = "counter",
    .metrics_series = METRICS_FLOW_REPLIES, /* its answers to two-hop reserves */
    .init = counter_env_new,
    .destroy = counter_env_destroy,
    .input_topics = counter_inputs,
    .input_topics_count = sizeof counter_inputs / sizeof counter_inputs[0],
    .changelog_topic = HF_T_COUNTER_CHANGELOG,
    .handlers = counter_handlers,
    .handlers_count = sizeof counter_handlers / sizeof counter_handlers[0],
    .batch_end = counter_batch_end,
    .tick = counter_tick,
    .tick_interval_ms = 1000,
    .reindex = counter_reindex,
    .pacing = counter_pacing,
    .reindex_tags = "H", /* hold records */
    .local_tags = "O",   /* the open-hold index */
};

const stage_def_t *counter_stage(void)
{
    return &counter_def;
}

static bool hold_is_open(hf_hold_status_t s)
{
    return s == HF_HOLD_HELD || s == HF_HOLD_REVOKING;
}

int counter_settle_hold(stage_ctx_t *ctx, const counter_hold_id_t *id, counter_settle_rule_fn rule)
{
    if (!id->reservation_id[0] || id->attempt < 0)
        return stage_reject(ctx, "%s needs a reservation_id and an attempt >= 0",
                            hf_cmd_name(id->command));
    int err = counter_check_routing(ctx, id->warehouse_id, id->sku);
    if (err)
        return err;
    char hkey[COUNTER_KEY_MAX];
    size_t hkey_len = hold_key(hkey, id->warehouse_id, id->sku, id->attempt, id->reservation_id);
    hf_hold_state_t hs;
    err = counter_load_hold(ctx, hkey, hkey_len, &hs);
    if (err && err != HF_ERR_NOTFOUND)
        return err;
    bool found = err == HF_OK;
    if (!found)
        memset(&hs, 0, sizeof hs);
    hf_counter_state_t c;
    err = counter_load(ctx, id->warehouse_id, id->sku, &c);
    if (err)
        return err;

    bool was_open = found && hold_is_open(hs.status), changed = false;
    hf_outcome_t outcome = rule(found, &hs, &c, &changed);
    if (changed) {
        hf_assert(found && was_open);
        hs.updated_at_ms = stage_now_ms(ctx);
        err = counter_store(ctx, id->warehouse_id, id->sku, &c);
        if (!err)
            err = counter_store_hold(ctx, hkey, hkey_len, &hs);
        if (!err && !hold_is_open(hs.status)) {
            char okey[COUNTER_KEY_MAX];
            size_t okey_len = open_hold_key(okey, id->warehouse_id, id->sku, hs.seq);
            err = stage_del_local(ctx, okey, okey_len);
        }
        if (err)
            return err;
    }
    return counter_emit_result(ctx, id->reservation_id, id->attempt, id->warehouse_id, id->sku,
                               id->command, outcome, hs.qty, counter_available_reported(&c));
}
