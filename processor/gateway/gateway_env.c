/* The gateway's process-wide environment: its configuration knobs, the
 * warehouse table and the routing view (a background thread reading
 * holdfast.availability). Every gateway task of the process shares one, created
 * on first use from the task's configuration; unit tests inject their own. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "gateway.h"
#include "hf_clock.h"
#include "log.h"
#include "metrics.h"
#include "topics.h"
#include "view.h"

/* How long the first gateway task waits for the view to catch up. */
#define GW_VIEW_READY_WAIT_MS   15000
/* Reply topics: how many answers are remembered, how long "does not exist" is
 * believed (a topic created meanwhile is found after that), and how long one
 * metadata request may block the task that asks. */
#define GW_TOPICS_CACHED        64
#define GW_TOPIC_MISSING_TTL_MS 10000
#define GW_TOPIC_LOOKUP_MS      2000

static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER;
static gateway_env_t env_built;
static const gateway_env_t *env_current;
static view_t *env_view;

/* Which reply topics exist, from broker metadata. An existing topic is
 * remembered (deleting a reply topic under a running gateway is an operator
 * error the README names); a missing one for GW_TOPIC_MISSING_TTL_MS. */
typedef struct {
    hf_topic_t name;
    bool exists;
    int64_t checked_at_ms;
} topic_seen_t;

static struct {
    pthread_mutex_t mu;
    kafka_reader_t *reader;
    topic_seen_t seen[GW_TOPICS_CACHED];
    size_t count, next_evict;
} topics = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The cached answer for topic, if any is still good; under topics.mu. */
static const topic_seen_t *seen_lookup(const char *topic, int64_t now)
{
    for (size_t i = 0; i < topics.count; i++) {
        const topic_seen_t *t = &topics.seen[i];
        if (strcmp(t->name, topic) == 0)
            return t->exists || now - t->checked_at_ms < GW_TOPIC_MISSING_TTL_MS ? t : NULL;
    }
    return NULL;
}

static void seen_store(const char *topic, bool exists, int64_t now)
{
    topic_seen_t *slot = NULL;
    for (size_t i = 0; i < topics.count && !slot; i++)
        if (strcmp(topics.seen[i].name, topic) == 0)
            slot = &topics.seen[i];
    if (!slot && topics.count < GW_TOPICS_CACHED)
        slot = &topics.seen[topics.count++];
    if (!slot) {
        slot = &topics.seen[topics.next_evict];
        topics.next_evict = (topics.next_evict + 1) % GW_TOPICS_CACHED;
    }
    snprintf(slot->name, sizeof slot->name, "%s", topic);
    slot->exists = exists;
    slot->checked_at_ms = now;
}

static bool topic_exists(void *opaque, const char *topic)
{
    (void)opaque;
    int64_t now = hf_mono_ms();
    pthread_mutex_lock(&topics.mu);
    const topic_seen_t *cached = seen_lookup(topic, now);
    bool known = cached != NULL, exists = cached && cached->exists;
    pthread_mutex_unlock(&topics.mu);
    if (known)
        return exists;
    /* The lookup runs unlocked: other tasks' cache hits do not wait for it. */
    int32_t partitions = 0;
    char errstr[256] = "";
    int err = kafka_partition_count(topics.reader, topic, GW_TOPIC_LOOKUP_MS, &partitions, errstr,
                                    sizeof errstr);
    if (err && err != HF_ERR_NOTFOUND) {
        /* The broker did not answer: that says nothing about the topic. Let the
         * request through uncached; if its reply then fails the transaction,
         * the retry asks again. */
        log_warn("gateway", "reply topic %s not checked: %s", topic, errstr);
        return true;
    }
    pthread_mutex_lock(&topics.mu);
    seen_store(topic, err == HF_OK, now);
    pthread_mutex_unlock(&topics.mu);
    return err == HF_OK;
}

static int view_availability(void *opaque, const char *sku, hf_availability_t *out)
{
    return view_get(opaque, sku, out);
}

static int64_t view_staleness(void *opaque)
{
    return view_staleness_ms(opaque);
}

static double gauge_view_staleness_ms(void *opaque)
{
    return (double)view_staleness_ms(opaque);
}

static double gauge_view_skus(void *opaque)
{
    return (double)view_size(opaque);
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
    e->reservation_retention_ms = cfg->reservation_retention_ms;
    if (e->reservation_retention_ms < e->idempotency_retention_ms) {
        /* A retried webhook must find its reservation for as long as it may
         * find its idempotency record, or it would be told NOT_FOUND. */
        snprintf(errstr, errstr_size,
                 "reservation_retention_ms (%d) must be at least idempotency_retention_ms (%d)",
                 cfg->reservation_retention_ms, cfg->idempotency_retention_ms);
        return HF_ERR_CONFIG;
    }
    e->result_timeout_ms = cfg->result_timeout_ms;
    if (cfg->reply_topic_prefix[0])
        snprintf(e->reply_topic_prefix, sizeof e->reply_topic_prefix, "%s%s", topics_prefix(),
                 cfg->reply_topic_prefix);
    e->view_stale_max_ms = cfg->view_stale_max_ms;
    e->reserve_deadline_ms = cfg->reserve_deadline_ms;
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
    /* Each piece is made once: a failed start is retried by the next record,
     * and must not leave a second view, reader or gauge behind. */
    if (!topics.reader) {
        kafka_conf_t meta_conf = {cfg->bootstrap, "holdfast-gateway-topics", NULL};
        int err = kafka_reader_new(&meta_conf, &topics.reader, errstr, errstr_size);
        if (err)
            return err;
    }
    if (!env_view) {
        kafka_conf_t kconf = {cfg->bootstrap, "holdfast-gateway-view", NULL};
        int err = view_new(&kconf, topic_name(HF_T_AVAILABILITY), &env_view, errstr, errstr_size);
        if (err)
            return err;
        if (view_wait_ready(env_view, GW_VIEW_READY_WAIT_MS) != HF_OK)
            log_warn("gateway",
                     "routing view not caught up after %d ms; routing degrades until it is",
                     GW_VIEW_READY_WAIT_MS);
        metrics_gauge("holdfast_gateway_view_staleness_ms",
                      "Milliseconds since the routing view was last current (-1: never)",
                      gauge_view_staleness_ms, env_view);
        metrics_gauge("holdfast_gateway_view_skus", "SKUs in the routing view", gauge_view_skus,
                      env_view);
    }
    e->availability = view_availability;
    e->staleness_ms = view_staleness;
    e->opaque = env_view;
    e->topic_exists = topic_exists;
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
