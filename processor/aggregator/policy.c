/* The aggregator's environment: the signal watermarks per SKU — the global
 * policy from the config, with per-SKU overrides from a JSON file
 * ({"SKU-1": {"low": 5, "high": 10, "dwell_ms": 500}}) loaded and checked by
 * the stage's init before any task starts, then searched by binary search. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator.h"
#include "hf_assert.h"
#include "log.h"

/* Overrides a file may hold: the table is one sorted array in memory. */
#define POLICY_OVERRIDES_MAX 100000

typedef struct {
    char sku[HF_SKU_LEN_MAX + 1];
    signal_policy_t p;
} override_t;

struct aggregator_env {
    signal_policy_t global;
    override_t *overrides; /* sorted by sku */
    size_t overrides_count;
};

static int cmp_override(const void *a, const void *b)
{
    return strcmp(((const override_t *)a)->sku, ((const override_t *)b)->sku);
}

static int parse_override(const char *sku, json_t *o, const signal_policy_t *global,
                          override_t *out)
{
    if (strlen(sku) > HF_SKU_LEN_MAX || !json_is_object(o))
        return HF_ERR_CONFIG;
    json_t *low = json_object_get(o, "low"), *high = json_object_get(o, "high"),
           *dwell = json_object_get(o, "dwell_ms");
    if ((low && !json_is_integer(low)) || (high && !json_is_integer(high)) ||
        (dwell && !json_is_integer(dwell)))
        return HF_ERR_CONFIG;
    snprintf(out->sku, sizeof out->sku, "%s", sku);
    out->p.low = low ? json_integer_value(low) : global->low;
    out->p.high = high ? json_integer_value(high) : global->high;
    out->p.dwell_ms = dwell ? json_integer_value(dwell) : global->dwell_ms;
    return out->p.low >= 0 && out->p.high > out->p.low && out->p.dwell_ms >= 0 ? HF_OK
                                                                               : HF_ERR_CONFIG;
}

/* Fills env->overrides from the object root (at most POLICY_OVERRIDES_MAX). */
static int load_overrides(const char *path, json_t *root, aggregator_env_t *env, char *errstr,
                          size_t errstr_size)
{
    size_t n = json_object_size(root);
    env->overrides = calloc(n ? n : 1, sizeof *env->overrides);
    if (!env->overrides) {
        snprintf(errstr, errstr_size, "signal_overrides_file %s: out of memory", path);
        return HF_ERR_NOMEM;
    }
    const char *sku;
    json_t *o;
    json_object_foreach(root, sku, o)
    {
        if (parse_override(sku, o, &env->global, &env->overrides[env->overrides_count]) != HF_OK) {
            snprintf(errstr, errstr_size,
                     "signal_overrides_file %s: SKU '%s' needs integers 0 <= low < high, "
                     "dwell_ms >= 0 (and a SKU of at most %d bytes)",
                     path, sku, HF_SKU_LEN_MAX);
            return HF_ERR_CONFIG;
        }
        env->overrides_count++;
    }
    qsort(env->overrides, env->overrides_count, sizeof *env->overrides, cmp_override);
    return HF_OK;
}

static int read_overrides(const char *path, aggregator_env_t *env, char *errstr, size_t errstr_size)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        if (jerr.line > 0)
            snprintf(errstr, errstr_size, "signal_overrides_file %s:%d: %s", path, jerr.line,
                     jerr.text);
        else /* not read at all: the text names the file */
            snprintf(errstr, errstr_size, "signal_overrides_file: %s", jerr.text);
        return HF_ERR_CONFIG;
    }
    int err = HF_ERR_CONFIG;
    if (!json_is_object(root) || json_object_size(root) > POLICY_OVERRIDES_MAX)
        snprintf(errstr, errstr_size,
                 "signal_overrides_file %s: must be an object {\"SKU\": {\"low\", \"high\", "
                 "\"dwell_ms\"}} of at most %d SKUs",
                 path, POLICY_OVERRIDES_MAX);
    else
        err = load_overrides(path, root, env, errstr, errstr_size);
    json_decref(root);
    return err;
}

int aggregator_env_new(const hf_config_t *cfg, void **env_out, char *errstr, size_t errstr_size)
{
    *env_out = NULL;
    aggregator_env_t *env = calloc(1, sizeof *env);
    if (!env) {
        snprintf(errstr, errstr_size, "aggregator: out of memory");
        return HF_ERR_NOMEM;
    }
    env->global = (signal_policy_t){cfg->signal_low_watermark, cfg->signal_high_watermark,
                                    cfg->signal_dwell_ms};
    /* high above low: config_check's rule between settings, which main applies. */
    if (cfg->signal_overrides_file[0]) {
        int err = read_overrides(cfg->signal_overrides_file, env, errstr, errstr_size);
        if (err) {
            aggregator_env_destroy(env);
            return err;
        }
        log_info("aggregator", "%zu per-SKU signal overrides loaded from %s", env->overrides_count,
                 cfg->signal_overrides_file);
    }
    *env_out = env;
    return HF_OK;
}

void aggregator_env_destroy(void *env)
{
    if (!env)
        return;
    aggregator_env_t *e = env;
    free(e->overrides);
    free(e);
}

signal_policy_t policy_for(const aggregator_env_t *env, const char *sku)
{
    hf_assert(env); /* the stage's init built it before any task started */
    override_t key = {.p = {0, 0, 0}};
    snprintf(key.sku, sizeof key.sku, "%s", sku);
    const override_t *o = env->overrides_count ? bsearch(&key, env->overrides, env->overrides_count,
                                                         sizeof *env->overrides, cmp_override)
                                               : NULL;
    return o ? o->p : env->global;
}
