/* The aggregator stage: the one place that sees a SKU's whole network. Input
 * holdfast.stock-levels (key sku); it keeps per SKU the per-warehouse available
 * vector, the network total and the debounced in-stock state (SkuState), and
 * publishes one Availability per changed SKU per transaction (the routing view,
 * compacted) and SOLD_OUT / BACK_IN_STOCK signals with hysteresis.
 *
 * Files: aggregator_stage.c (handler table, batch end, the dwell-timer tick),
 * stock_level.c (what happens on StockLevel), signals.c (the hysteresis rule,
 * pure), aggregator_keys.c (state keys), policy.c (watermarks per SKU). */
#ifndef HF_AGGREGATOR_H
#define HF_AGGREGATOR_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "records.h"
#include "stage.h"

const stage_def_t *aggregator_stage(void);

/* ---- signal policy (policy.c) */
typedef struct {
    int64_t low;  /* SOLD_OUT when total <= low for dwell_ms */
    int64_t high; /* BACK_IN_STOCK when total >= high (> low) */
    int64_t dwell_ms;
} signal_policy_t;

/* The policy of sku: a per-SKU override from cfg->signal_overrides_file, else the
 * global one. Loads the overrides file once per process; HF_ERR_CONFIG if it is
 * malformed. */
int policy_for(const hf_config_t *cfg, const char *sku, signal_policy_t *out) HF_MUST_CHECK;

/* ---- hysteresis (signals.c) */

/* No signal. */
#define SIGNAL_NONE (-1)
/* Re-evaluates the debounced state of s at now_ms after its total changed (or a
 * timer fired). Returns the signal kind to emit or SIGNAL_NONE; sets *timer_due_ms
 * to when the state must be evaluated again without new input (0 = never). */
int signals_evaluate(hf_sku_state_t *s, const signal_policy_t *p, int64_t now_ms,
                     int64_t *timer_due_ms);

/* ---- keys (aggregator_keys.c)
 *   S<sku>                -> SkuState
 *   T<due_ms be64><sku>   -> "" (dwell timer index, sorted by due time) */
#define AGG_KEY_MAX (HF_SKU_LEN_MAX + 16)
size_t sku_state_key(char *out, const char *sku);
size_t timer_key(char *out, int64_t due_ms, const char *sku);
/* Parses a timer key; false if it is not one. */
bool timer_key_parse(const char *key, size_t len, int64_t *due_ms, char *sku_out);

/* ---- shared by the handler and the tick (aggregator_stage.c) */
/* Evaluates, stores the state, arms its timer and emits a signal if due. */
int aggregator_settle(stage_ctx_t *ctx, hf_sku_state_t *s) HF_MUST_CHECK;
int aggregator_load(stage_ctx_t *ctx, const char *sku, hf_sku_state_t *out,
                    bool *found) HF_MUST_CHECK;

/* ---- handlers */
int aggregator_on_stock_level(stage_ctx_t *ctx, const hf_record_t *rec);

#endif
