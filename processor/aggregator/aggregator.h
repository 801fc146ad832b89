/* The aggregator stage: the one place that sees a SKU's whole network. Input
 * holdfast.stock-levels (key sku); it keeps per SKU the per-warehouse available
 * vector, the network total and the debounced in-stock state (SkuState), and
 * publishes one Availability per changed SKU per transaction (the routing view,
 * compacted) and SOLD_OUT / BACK_IN_STOCK signals with hysteresis.
 *
 * Files: aggregator_stage.c (handler table, batch end, the dwell-timer tick),
 * stock_level.c (what happens on StockLevel), signals.c (the hysteresis rule,
 * pure), aggregator_keys.c (state keys), policy.c (the stage's environment: watermarks
 * per SKU, loaded at start). */
#ifndef HF_AGGREGATOR_H
#define HF_AGGREGATOR_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "records.h"
#include "stage.h"

const stage_def_t *aggregator_stage(void);

/* ---- environment and signal policy (policy.c) */
typedef struct {
    int64_t low;  /* SOLD_OUT when total <= low for dwell_ms */
    int64_t high; /* BACK_IN_STOCK when total >= high (> low) */
    int64_t dwell_ms;
} signal_policy_t;

/* The aggregator's environment: the global signal policy and the per-SKU
 * overrides of signal_overrides_file. */
typedef struct aggregator_env aggregator_env_t;

/* The stage's init (stage_def_t.init): reads and checks signal_overrides_file
 * (HF_ERR_CONFIG naming the key when it cannot be read or an entry is
 * malformed). *env_out is an aggregator_env_t the caller frees with
 * aggregator_env_destroy. */
int aggregator_env_new(const hf_config_t *cfg, void **env_out, char *errstr,
                       size_t errstr_size) HF_MUST_CHECK;
/* Accepts NULL. */
void aggregator_env_destroy(void *env);
/* The policy of sku: its override, else the global one. */
signal_policy_t policy_for(const aggregator_env_t *env, const char *sku);

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
