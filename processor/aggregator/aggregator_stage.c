/* The aggregator's definition — handler table, batch end and tick — and the
 * settle step shared by the StockLevel handler and the dwell-timer tick. */
#include <stdio.h>
#include <string.h>

#include "aggregator.h"
#include "config.h"
#include "hf_assert.h"
#include "log.h"
#include "metrics_flow.h"

/* Timers handled per partition per tick; the rest wait for the next tick. */
#define AGG_TIMERS_PER_TICK_MAX 1000
#define AGG_TICK_INTERVAL_MS    200

static const hf_topic_id_t aggregator_inputs[] = {HF_T_STOCK_LEVELS};

static const stage_handler_t aggregator_handlers[] = {
    {HF_T_STOCK_LEVELS, HF_REC_STOCK_LEVEL, aggregator_on_stock_level},
};

int aggregator_load(stage_ctx_t *ctx, const char *sku, hf_sku_state_t *out, bool *found)
{
    char key[AGG_KEY_MAX];
    int err = stage_get_as(ctx, key, sku_state_key(key, sku), HF_REC_SKU_STATE, out);
    *found = err == HF_OK;
    if (err == HF_ERR_NOTFOUND) {
        memset(out, 0, sizeof *out);
        snprintf(out->sku, sizeof out->sku, "%s", sku);
        return HF_OK;
    }
    return err;
}

static int emit_signal(stage_ctx_t *ctx, const hf_sku_state_t *s, int kind)
{
    hf_record_t rec;
    hf_signal_t *sig = &hf_record_reset(&rec, HF_REC_SIGNAL)->u.signal;
    snprintf(sig->sku, sizeof sig->sku, "%s", s->sku);
    sig->kind = (hf_signal_kind_t)kind;
    sig->total = s->total;
    sig->changed_at_ms = s->changed_at_ms;
    sig->emitted_at_ms = stage_now_ms(ctx);
    log_info("aggregator", "%s: %s (total %lld)", s->sku, hf_signal_kind_name(sig->kind),
             (long long)s->total);
    int err = stage_emit(ctx, HF_T_SIGNALS, s->sku, strlen(s->sku), &rec);
    if (!err)
        metrics_signal(stage_metrics(ctx), sig->kind);
    return err;
}

int aggregator_settle(stage_ctx_t *ctx, hf_sku_state_t *s)
{
    signal_policy_t p = policy_for(stage_env(ctx), s->sku);
    int64_t due = 0;
    int kind = signals_evaluate(s, &p, stage_now_ms(ctx), &due);
    char key[AGG_KEY_MAX];
    int err = stage_put_as(ctx, key, sku_state_key(key, s->sku), HF_REC_SKU_STATE, s);
    if (!err && due > 0)
        err = stage_put_raw(ctx, key, timer_key(key, due, s->sku), "t",
                            1); /* not empty: an empty value would read as a tombstone */
    if (!err && kind != SIGNAL_NONE)
        err = emit_signal(ctx, s, kind);
    return err;
}

/* Batch end: one Availability per SKU whose state was written. */
static int emit_availability(stage_ctx_t *ctx, int32_t partition, const char *key, size_t key_len)
{
    if (key_len < 2 || key[0] != 'S')
        return HF_OK;
    hf_record_t rec, out;
    int err = stage_get(ctx, key, key_len, &rec);
    if (err)
        return err;
    hf_assert(rec.type == HF_REC_SKU_STATE);
    const hf_sku_state_t *s = &rec.u.sku_state;
    hf_availability_t *a = &hf_record_reset(&out, HF_REC_AVAILABILITY)->u.availability;
    snprintf(a->sku, sizeof a->sku, "%s", s->sku);
    a->warehouses_count = s->warehouses_count;
    memcpy(a->warehouses, s->warehouses, sizeof a->warehouses);
    a->total = s->total;
    a->in_stock = s->in_stock;
    a->updated_at_ms = s->updated_at_ms;
    return stage_emit(ctx, HF_T_AVAILABILITY, a->sku, strlen(a->sku), &out);
}

static int aggregator_batch_end(stage_ctx_t *ctx)
{
    return stage_foreach_written(ctx, emit_availability);
}

typedef struct {
    char key[AGG_KEY_MAX];
    size_t len;
} due_key_t;

/* Tick: re-evaluates every SKU whose dwell timer is due, so SOLD_OUT fires on
 * time even when no further StockLevel arrives. */
static int aggregator_tick(stage_ctx_t *ctx)
{
    /* Per thread, not on the stack: 1000 keys of ~150 bytes. */
    static _Thread_local due_key_t due[AGG_TIMERS_PER_TICK_MAX];
    size_t n = 0;
    int64_t now = stage_now_ms(ctx);
    state_iter_t *it = stage_iter(ctx, "T", 1, false);
    if (!it)
        return HF_ERR_NOMEM;
    const void *k, *v;
    size_t klen, vlen;
    int64_t oldest_due_ms = 0;
    while (n < AGG_TIMERS_PER_TICK_MAX && state_iter_next(it, &k, &klen, &v, &vlen)) {
        int64_t due_ms = 0;
        char sku[HF_SKU_LEN_MAX + 1];
        if (!timer_key_parse(k, klen, &due_ms, sku) || due_ms > now)
            break;
        if (n == 0)
            oldest_due_ms = due_ms;
        memcpy(due[n].key, k, klen);
        due[n++].len = klen;
    }
    state_iter_destroy(it);
    /* Due and not yet emitted: the signals this tick is about to settle (they
     * go out when its transaction commits). A tick that keeps finding the same
     * timer (its transactions abort) shows a growing age. */
    metrics_signal_pending(stage_metrics(ctx), stage_partition(ctx), oldest_due_ms);
    int err = HF_OK;
    hf_sku_state_t s;
    for (size_t i = 0; i < n && err == HF_OK; i++) {
        int64_t due_ms = 0;
        char sku[HF_SKU_LEN_MAX + 1];
        bool found = false;
        hf_assert(timer_key_parse(due[i].key, due[i].len, &due_ms, sku));
        err = stage_del(ctx, due[i].key, due[i].len);
        if (!err)
            err = aggregator_load(ctx, sku, &s, &found);
        if (!err && found)
            err = aggregator_settle(ctx, &s);
    }
    return err;
}

/* The availability view and signals tolerate a tenth of a second; fewer
 * aggregator transactions leave the broker to the reserve path (measured:
 * 40 -> 5 transactions/s, reserve p50 at 20/s 37 -> 20 ms; docs/PERFORMANCE.md). */
static void aggregator_pacing(const hf_config_t *cfg, pacing_conf_t *out)
{
    out->floor_ms = cfg->aggregator_commit_interval_ms;
    out->period_max_ms = 0;
    out->full_records_s = 0;
}

static const stage_def_t aggregator_def = {
    .name = "aggregator",
    .metrics_series = METRICS_FLOW_SIGNALS,
    .init = aggregator_env_new,
    .destroy = aggregator_env_destroy,
    .input_topics = aggregator_inputs,
    .input_topics_count = 1,
    .changelog_topic = HF_T_AGGREGATOR_CHANGELOG,
    .handlers = aggregator_handlers,
    .handlers_count = sizeof aggregator_handlers / sizeof aggregator_handlers[0],
    .batch_end = aggregator_batch_end,
    .tick = aggregator_tick,
    .tick_interval_ms = AGG_TICK_INTERVAL_MS,
    .pacing = aggregator_pacing,
};

const stage_def_t *aggregator_stage(void)
{
    return &aggregator_def;
}
