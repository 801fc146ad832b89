/* Signal watermarks per SKU: the global policy from the config, with per-SKU
 * overrides from a JSON file ({"SKU-1": {"low": 5, "high": 10, "dwell_ms": 500}})
 * loaded once per process and searched by binary search. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator.h"
#include "log.h"

#define POLICY_OVERRIDES_MAX 100000

typedef struct {
    char sku[HF_SKU_LEN_MAX + 1];
    signal_policy_t p;
} override_t;

static pthread_once_t overrides_once = PTHREAD_ONCE_INIT;
static const hf_config_t *overrides_cfg;
static override_t *overrides;
static size_t overrides_count;
static int overrides_err;

static int cmp_override(const void *a, const void *b)
{
    return strcmp(((const override_t *)a)->sku, ((const override_t *)b)->sku);
}

static int parse_override(const char *sku, json_t *o, const hf_config_t *cfg, override_t *out)
{
    json_t *low = json_object_get(o, "low"), *high = json_object_get(o, "high"),
           *dwell = json_object_get(o, "dwell_ms");
    if (strlen(sku) > HF_SKU_LEN_MAX || !json_is_object(o))
        return HF_ERR_CONFIG;
    snprintf(out->sku, sizeof out->sku, "%s", sku);
    out->p.low = low ? json_integer_value(low) : cfg->signal_low_watermark;
    out->p.high = high ? json_integer_value(high) : cfg->signal_high_watermark;
    out->p.dwell_ms = dwell ? json_integer_value(dwell) : cfg->signal_dwell_ms;
    return out->p.low >= 0 && out->p.high > out->p.low && out->p.dwell_ms >= 0 ? HF_OK
                                                                               : HF_ERR_CONFIG;
}

static void load_overrides(void)
{
    const hf_config_t *cfg = overrides_cfg;
    if (!cfg->signal_overrides_file[0])
        return;
    json_error_t jerr;
    json_t *root = json_load_file(cfg->signal_overrides_file, 0, &jerr);
    size_t n = json_is_object(root) ? json_object_size(root) : 0;
    if (!root || !json_is_object(root) || n > POLICY_OVERRIDES_MAX) {
        log_error("aggregator", "signal overrides %s: %s", cfg->signal_overrides_file,
                  root ? "must be an object of at most 100000 SKUs" : jerr.text);
        overrides_err = HF_ERR_CONFIG;
        json_decref(root);
        return;
    }
    overrides = calloc(n ? n : 1, sizeof *overrides);
    const char *sku;
    json_t *o;
    json_object_foreach(root, sku, o)
    {
        if (parse_override(sku, o, cfg, &overrides[overrides_count]) != HF_OK) {
            log_error("aggregator", "signal override of %s needs 0 <= low < high, dwell_ms >= 0",
                      sku);
            overrides_err = HF_ERR_CONFIG;
            break;
        }
        overrides_count++;
    }
    qsort(overrides, overrides_count, sizeof *overrides, cmp_override);
    json_decref(root);
    log_info("aggregator", "%zu per-SKU signal overrides loaded", overrides_count);
}

int policy_for(const hf_config_t *cfg, const char *sku, signal_policy_t *out)
{
    overrides_cfg = cfg;
    pthread_once(&overrides_once, load_overrides);
    if (overrides_err)
        return overrides_err;
    override_t key = {.p = {0, 0, 0}};
    snprintf(key.sku, sizeof key.sku, "%s", sku);
    const override_t *o =
        overrides_count ? bsearch(&key, overrides, overrides_count, sizeof *overrides, cmp_override)
                        : NULL;
    if (o) {
        *out = o->p;
        return HF_OK;
    }
    *out = (signal_policy_t){cfg->signal_low_watermark, cfg->signal_high_watermark,
                             cfg->signal_dwell_ms};
    return HF_OK;
}
