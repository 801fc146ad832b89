/* The gateway's process-wide environment: its configuration knobs, the
 * warehouse table and the routing view (a background thread reading
 * holdfast.availability). Every gateway task of the process shares one, created
 * on first use from the task's configuration; unit tests inject their own. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gateway.h"
#include "log.h"
#include "topics.h"
#include "view.h"

/* How long the first gateway task waits for the view to catch up. */
#define GW_VIEW_READY_WAIT_MS 15000

static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER;
static gateway_env_t env_built;
static const gateway_env_t *env_current;
static view_t *env_view;

static int view_availability(void *opaque, const char *sku, hf_availability_t *out)
{
    return view_get(opaque, sku, out);
}

static int64_t view_staleness(void *opaque)
{
    return view_staleness_ms(opaque);
}

int gateway_parse_campaigns(const char *spec, gateway_env_t *env, char *errstr, size_t errstr_size)
{
    env->campaigns_count = 0;
    const char *p = spec;
    while (p && *p) {
        const char *comma = strchr(p, ','), *eq = strchr(p, '=');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!eq || eq >= p + len || eq == p || (size_t)(eq - p) > HF_ID_LEN_MAX ||
            env->campaigns_count == HF_CAMPAIGNS_MAX) {
            snprintf(errstr, errstr_size, "campaign_ttls: expected name=ms[,name=ms] (at most %d)",
                     HF_CAMPAIGNS_MAX);
            return HF_ERR_CONFIG;
        }
        char *end = NULL;
        long long ms = strtoll(eq + 1, &end, 10);
        if (end != p + len || ms < HF_TTL_MIN_MS || ms > HF_TTL_MAX_MS) {
            snprintf(errstr, errstr_size, "campaign_ttls: ttl of '%.*s' must be in [%lld, %lld] ms",
                     (int)(eq - p), p, (long long)HF_TTL_MIN_MS, (long long)HF_TTL_MAX_MS);
            return HF_ERR_CONFIG;
        }
        snprintf(env->campaigns[env->campaigns_count].name, sizeof env->campaigns[0].name, "%.*s",
                 (int)(eq - p), p);
        env->campaigns[env->campaigns_count++].ttl_ms = ms;
        p = comma ? comma + 1 : NULL;
    }
    return HF_OK;
}

static int env_build(const hf_config_t *cfg, gateway_env_t *e, char *errstr, size_t errstr_size)
{
    memset(e, 0, sizeof *e);
    int err = route_config_load(cfg->warehouses_file, &e->routes, errstr, errstr_size);
    if (err)
        return err;
    e->routes.weight_distance = cfg->route_weight_distance_pct / 100.0;
    e->routes.weight_cost = cfg->route_weight_cost_pct / 100.0;
    e->routes.weight_fill = cfg->route_weight_fill_pct / 100.0;
    e->ttl_default_ms = cfg->ttl_default_ms;
    e->hold_max_factor_pct = cfg->hold_max_factor_pct;
    e->idempotency_retention_ms = cfg->idempotency_retention_ms;
    e->result_timeout_ms = cfg->result_timeout_ms;
    e->view_stale_max_ms = cfg->view_stale_max_ms;
    if (strcmp(cfg->late_payment_policy, "refund") == 0) {
        e->late_policy = GW_LATE_REFUND;
    } else if (strcmp(cfg->late_payment_policy, "rereserve") == 0) {
        e->late_policy = GW_LATE_RERESERVE;
    } else {
        snprintf(errstr, errstr_size, "late_payment_policy must be \"refund\" or \"rereserve\"");
        return HF_ERR_CONFIG;
    }
    return gateway_parse_campaigns(cfg->campaign_ttls, e, errstr, errstr_size);
}

static int env_start_view(const hf_config_t *cfg, gateway_env_t *e, char *errstr,
                          size_t errstr_size)
{
    kafka_conf_t kconf = {cfg->bootstrap, "holdfast-gateway-view", NULL};
    int err = view_new(&kconf, topic_name(HF_T_AVAILABILITY), &env_view, errstr, errstr_size);
    if (err)
        return err;
    if (view_wait_ready(env_view, GW_VIEW_READY_WAIT_MS) != HF_OK)
        log_warn("gateway", "routing view not caught up after %d ms; routing degrades until it is",
                 GW_VIEW_READY_WAIT_MS);
    e->availability = view_availability;
    e->staleness_ms = view_staleness;
    e->opaque = env_view;
    return HF_OK;
}

const gateway_env_t *gateway_env(stage_ctx_t *ctx)
{
    pthread_mutex_lock(&env_mu);
    if (!env_current) {
        char errstr[512] = "";
        const hf_config_t *cfg = stage_config(ctx);
        int err = env_build(cfg, &env_built, errstr, sizeof errstr);
        if (!err)
            err = env_start_view(cfg, &env_built, errstr, sizeof errstr);
        if (err)
            log_error("gateway", "cannot start: %s", errstr);
        else
            env_current = &env_built;
    }
    const gateway_env_t *e = env_current;
    pthread_mutex_unlock(&env_mu);
    return e;
}

void gateway_env_set(const gateway_env_t *env)
{
    pthread_mutex_lock(&env_mu);
    env_current = env;
    pthread_mutex_unlock(&env_mu);
}
