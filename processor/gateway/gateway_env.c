/* The gateway's process-wide environment: its settings parsed and checked, the
 * warehouse table, the routing view (a background thread reading
 * holdfast.availability) and the reply-topic cache. The stage's init
 * (gateway_env_new) builds it in main before any gateway task starts, so a bad
 * setting fails `holdfast run` at start naming its key; every gateway task of
 * the process then shares it through its context (gateway_env). Unit tests
 * fill a gateway_env_t themselves and hand it to the fake stage. */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "config.h"
#include "gateway.h"
#include "hf_assert.h"
#include "hf_clock.h"
#include "log.h"
#include "metrics.h"
#include "topics.h"
#include "view.h"

/* How long the start waits for the view to catch up before the tasks run. */
#define GW_VIEW_READY_WAIT_MS   15000
/* Reply topics: how many answers are remembered, how long "does not exist" is
 * believed (a topic created meanwhile is found after that), and how long one
 * metadata request may block the task that asks. */
#define GW_TOPICS_CACHED        64
#define GW_TOPIC_MISSING_TTL_MS 10000
#define GW_TOPIC_LOOKUP_MS      2000

/* Which reply topics exist, from broker metadata. An existing topic is
 * remembered (deleting a reply topic under a running gateway is an operator
 * error the README names); a missing one for GW_TOPIC_MISSING_TTL_MS. */
typedef struct {
    hf_topic_t name;
    bool exists;
    int64_t checked_at_ms;
} topic_seen_t;

typedef struct {
    pthread_mutex_t mu; /* every gateway task of the process asks */
    kafka_reader_t *reader;
    topic_seen_t seen[GW_TOPICS_CACHED];
    size_t count, next_evict;
} reply_topics_t;

/* What gateway_env_new builds: the environment handlers read, and the threads
 * and handles behind it, which it owns. */
typedef struct {
    gateway_env_t env; /* first: gateway_env_new hands out &world->env */
    gw_sweep_t sweep;
    gw_escrow_stats_t escrow_stats;
    gw_escrow_primed_t escrow_primed;
    view_t *view;
    reply_topics_t topics;
    bool topics_mu_ready;
} gw_world_t;

/* The cached answer for topic, if any is still good; under rt->mu. */
static const topic_seen_t *seen_lookup(const reply_topics_t *rt, const char *topic, int64_t now)
{
    for (size_t i = 0; i < rt->count; i++) {
        const topic_seen_t *t = &rt->seen[i];
        if (strcmp(t->name, topic) == 0)
            return t->exists || now - t->checked_at_ms < GW_TOPIC_MISSING_TTL_MS ? t : NULL;
    }
    return NULL;
}

static void seen_store(reply_topics_t *rt, const char *topic, bool exists, int64_t now)
{
    topic_seen_t *slot = NULL;
    for (size_t i = 0; i < rt->count && !slot; i++)
        if (strcmp(rt->seen[i].name, topic) == 0)
            slot = &rt->seen[i];
    if (!slot && rt->count < GW_TOPICS_CACHED)
        slot = &rt->seen[rt->count++];
    if (!slot) {
        slot = &rt->seen[rt->next_evict];
        rt->next_evict = (rt->next_evict + 1) % GW_TOPICS_CACHED;
    }
    snprintf(slot->name, sizeof slot->name, "%s", topic);
    slot->exists = exists;
    slot->checked_at_ms = now;
}

static bool topic_exists(void *topics_opaque, const char *topic)
{
    reply_topics_t *rt = topics_opaque;
    int64_t now = hf_mono_ms();
    pthread_mutex_lock(&rt->mu);
    const topic_seen_t *cached = seen_lookup(rt, topic, now);
    bool known = cached != NULL, exists = cached && cached->exists;
    pthread_mutex_unlock(&rt->mu);
    if (known)
        return exists;
    /* The lookup runs unlocked: other tasks' cache hits do not wait for it. */
    int32_t partitions = 0;
    char errstr[256] = "";
    int err = kafka_partition_count(rt->reader, topic, GW_TOPIC_LOOKUP_MS, &partitions, errstr,
                                    sizeof errstr);
    if (err && err != HF_ERR_NOTFOUND) {
        /* The broker did not answer: that says nothing about the topic. Let the
         * request through uncached; if its reply then fails the transaction,
         * the retry asks again. */
        log_warn("gateway", "reply topic %s not checked: %s", topic, errstr);
        return true;
    }
    pthread_mutex_lock(&rt->mu);
    seen_store(rt, topic, err == HF_OK, now);
    pthread_mutex_unlock(&rt->mu);
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

/* /readyz: routing needs a view current within view_stale_max_ms (the bound
 * beyond which the saga degrades to the nearest warehouse). */
static bool ready_view(void *opaque, char *why, size_t why_size)
{
    const gw_world_t *w = opaque;
    int64_t stale_ms = view_staleness_ms(w->view);
    if (stale_ms < 0)
        snprintf(why, why_size, "gateway routing view not caught up with %s yet",
                 topic_name(HF_T_AVAILABILITY));
    else if (stale_ms > w->env.view_stale_max_ms)
        snprintf(why, why_size, "gateway routing view stale for %lld ms (view_stale_max_ms %lld)",
                 (long long)stale_ms, (long long)w->env.view_stale_max_ms);
    return stale_ms >= 0 && stale_ms <= w->env.view_stale_max_ms;
}

static double gauge_view_skus(void *opaque)
{
    return (double)view_size(opaque);
}

static double gauge_view_bytes(void *opaque)
{
    return (double)view_bytes(opaque);
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
            snprintf(errstr, errstr_size,
                     "campaign_ttls: '%.*s' is not name=ms (expected name=ms[,name=ms], at most "
                     "%d campaigns)",
                     (int)len, p, HF_CAMPAIGNS_MAX);
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

int gateway_parse_escrow_skus(const char *spec, gateway_env_t *env, char *errstr,
                              size_t errstr_size)
{
    env->escrow.skus_count = 0;
    const char *p = spec;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char sku[HF_SKU_LEN_MAX + 1];
        snprintf(sku, sizeof sku, "%.*s", (int)(len < sizeof sku ? len : sizeof sku - 1), p);
        if (len == 0 || len > HF_SKU_LEN_MAX || gw_check_id(sku, "sku") ||
            env->escrow.skus_count == HF_ESCROW_SKUS_MAX) {
            snprintf(errstr, errstr_size,
                     "escrow_skus: '%.*s' is not a sku (expected sku[,sku], each 1..%d printable "
                     "characters without '|', at most %d)",
                     (int)len, p, HF_SKU_LEN_MAX, HF_ESCROW_SKUS_MAX);
            return HF_ERR_CONFIG;
        }
        snprintf(env->escrow.skus[env->escrow.skus_count++], sizeof env->escrow.skus[0], "%s", sku);
        p = comma ? comma + 1 : NULL;
    }
    return HF_OK;
}

static int parse_late_policy(const char *name, gw_late_policy_t *out, char *errstr,
                             size_t errstr_size)
{
    if (strcmp(name, "refund") == 0) {
        *out = GW_LATE_REFUND;
    } else if (strcmp(name, "rereserve") == 0) {
        *out = GW_LATE_RERESERVE;
    } else {
        snprintf(errstr, errstr_size, "late_payment_policy: '%s' is not one of refund, rereserve",
                 name);
        return HF_ERR_CONFIG;
    }
    return HF_OK;
}

/* One "kind=action" of payment_policy into env; false when it is not one. A
 * pending payment may be extended, kept or released on; a failed or canceled
 * one kept or released on; a succeeded one is committed, nothing else. */
static bool payment_rule(const char *rule, size_t len, gateway_env_t *env)
{
    static const char *const actions[GW_PAY__COUNT] = {"keep", "extend", "release", "commit"};
    const char *eq = memchr(rule, '=', len);
    if (!eq)
        return false;
    char kind_name[32];
    size_t kind_len = (size_t)(eq - rule);
    if (kind_len >= sizeof kind_name)
        return false;
    memcpy(kind_name, rule, kind_len);
    kind_name[kind_len] = '\0';
    hf_payment_event_kind_t kind = hf_payment_event_kind_parse(kind_name);
    if (kind == HF_PAY_UNKNOWN) { /* "processing" as well as "payment.processing" */
        char dotted[sizeof kind_name + 8];
        snprintf(dotted, sizeof dotted, "payment.%s", kind_name);
        kind = hf_payment_event_kind_parse(dotted);
    }
    const char *action = eq + 1;
    size_t action_len = len - kind_len - 1;
    for (int a = 0; kind != HF_PAY_UNKNOWN && a < GW_PAY__COUNT; a++) {
        if (strlen(actions[a]) != action_len || memcmp(actions[a], action, action_len) != 0)
            continue;
        /* A success always commits, and nothing else may; only a pending
         * payment extends. */
        bool pending = kind == HF_PAY_PROCESSING || kind == HF_PAY_REQUIRES_ACTION;
        if ((kind == HF_PAY_SUCCEEDED) != (a == GW_PAY_COMMIT) || (a == GW_PAY_EXTEND && !pending))
            return false;
        env->payment_action[kind] = (gw_pay_action_t)a;
        return true;
    }
    return false;
}

int gateway_parse_payment_policy(const char *spec, gateway_env_t *env, char *errstr,
                                 size_t errstr_size)
{
    static const char *const defaults = HF_PAYMENT_POLICY_DEFAULT;
    env->payment_action[HF_PAY_SUCCEEDED] = GW_PAY_COMMIT;
    for (int pass = 0; pass < 2; pass++) { /* the defaults, then the setting over them */
        const char *p = pass == 0 ? defaults : spec;
        while (p && *p) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            if (len > 0 && !payment_rule(p, len, env)) { /* empty items are skipped */
                snprintf(errstr, errstr_size,
                         "payment_policy: '%.*s' is not event=action (processing, "
                         "requires_action: keep, extend or release; failed, canceled: keep or "
                         "release; succeeded: commit), e.g. \"%s\"",
                         (int)len, p, defaults);
                return HF_ERR_CONFIG;
            }
            p = comma ? comma + 1 : NULL;
        }
    }
    return HF_OK;
}

int gateway_env_configure(const hf_config_t *cfg, gateway_env_t *env, char *errstr,
                          size_t errstr_size)
{
    memset(env, 0, sizeof *env);
    char why[512];
    int err = route_config_load(cfg->warehouses_file, &env->routes, why, sizeof why);
    if (err) {
        /* Unreadable or malformed alike: the setting names no usable file. */
        snprintf(errstr, errstr_size, "warehouses_file: %s", why);
        return HF_ERR_CONFIG;
    }
    env->routes.weight_distance = cfg->route_weight_distance_pct / 100.0;
    env->routes.weight_cost = cfg->route_weight_cost_pct / 100.0;
    env->routes.weight_fill = cfg->route_weight_fill_pct / 100.0;
    env->ttl_default_ms = cfg->ttl_default_ms;
    env->hold_max_factor_pct = cfg->hold_max_factor_pct;
    env->idempotency_retention_ms = cfg->idempotency_retention_ms;
    env->reservation_retention_ms = cfg->reservation_retention_ms;
    env->result_timeout_ms = cfg->result_timeout_ms;
    env->counter_answers = cfg->reserve_answer_from_counter != 0;
    if (cfg->reply_topic_prefix[0])
        snprintf(env->reply_topic_prefix, sizeof env->reply_topic_prefix, "%s%s", topics_prefix(),
                 cfg->reply_topic_prefix);
    env->view_stale_max_ms = cfg->view_stale_max_ms;
    env->reserve_deadline_ms = cfg->reserve_deadline_ms;
    env->reserve_shed_target_ms = cfg->reserve_shed_target_ms;
    env->reserve_shed_interval_ms = cfg->reserve_shed_interval_ms;
    env->escrow.refill_min_units = cfg->escrow_refill_min_units;
    env->escrow.refill_max_units = cfg->escrow_refill_max_units;
    env->escrow.refill_horizon_ms = cfg->escrow_refill_horizon_ms;
    env->escrow.idle_return_ms = cfg->escrow_idle_return_ms;
    env->escrow.scarce_units = cfg->escrow_scarce_units;
    env->escrow.prime_units = cfg->escrow_prime_units;
    env->payment_pending_extend_ms = cfg->payment_pending_extend_ms;
    env->payment_pending_max_ms = cfg->payment_pending_max_ms;
    err = parse_late_policy(cfg->late_payment_policy, &env->late_policy, errstr, errstr_size);
    if (!err)
        err = gateway_parse_payment_policy(cfg->payment_policy, env, errstr, errstr_size);
    if (!err)
        err = gateway_parse_campaigns(cfg->campaign_ttls, env, errstr, errstr_size);
    if (!err)
        err = gateway_parse_escrow_skus(cfg->escrow_skus, env, errstr, errstr_size);
    if (!err && cfg->ship_from_file[0]) { /* last: nothing after it fails and leaks it */
        err =
            ship_from_load(cfg->ship_from_file, &env->routes, &env->ship_from, errstr, errstr_size);
        if (!err)
            log_info("gateway", "ship_from_file %s: %zu SKUs with a ship-from list",
                     cfg->ship_from_file, ship_from_count(env->ship_from));
        else if (err != HF_ERR_NOMEM)
            err = HF_ERR_CONFIG;
    }
    /* The rules between settings (reservation_retention_ms at least
     * idempotency_retention_ms, ...) are config_check's, which main applies. */
    return err;
}

static double gauge_escrow_auto(void *heat)
{
    return (double)gw_heat_hot_count(heat, hf_wall_ms());
}

static double read_escrow_stat(void *counter)
{
    return (double)atomic_load((atomic_uint_fast64_t *)counter);
}

/* The reply-topic reader and the routing view, caught up (or given up on after
 * GW_VIEW_READY_WAIT_MS: routing degrades until it is). */
static int world_start(const hf_config_t *cfg, gw_world_t *w, char *errstr, size_t errstr_size)
{
    kafka_conf_t meta_conf = {cfg->bootstrap, "holdfast-gateway-topics", NULL};
    int err = kafka_reader_new(&meta_conf, &w->topics.reader, errstr, errstr_size);
    if (err)
        return err;
    kafka_conf_t view_conf = {cfg->bootstrap, "holdfast-gateway-view", NULL};
    err = view_new(&view_conf, topic_name(HF_T_AVAILABILITY), &w->view, errstr, errstr_size);
    if (err)
        return err;
    if (view_wait_ready(w->view, GW_VIEW_READY_WAIT_MS) != HF_OK)
        log_warn("gateway", "routing view not caught up after %d ms; routing degrades until it is",
                 GW_VIEW_READY_WAIT_MS);
    metrics_gauge("holdfast_gateway_view_staleness_ms",
                  "Milliseconds since the routing view was last current (-1: never)",
                  gauge_view_staleness_ms, w->view);
    metrics_gauge("holdfast_gateway_view_skus", "SKUs in the routing view", gauge_view_skus,
                  w->view);
    metrics_gauge("holdfast_gateway_view_bytes",
                  "Bytes of memory the routing view's table holds (slots, entries, names, "
                  "warehouse vectors)",
                  gauge_view_bytes, w->view);
    metrics_ready_check(ready_view, w);
    w->env.escrow.stats = &w->escrow_stats;
    w->env.escrow.primed = &w->escrow_primed;
    if (w->env.escrow.skus_count > 0) {
        /* Pinned SKUs are primed before their first shopper: a grant must find
         * its way back here before any reservation of this partition exists. */
        char why[256];
        int32_t partitions = 0;
        if (kafka_partition_count(w->topics.reader, topic_name(HF_T_REQUESTS), 10000, &partitions,
                                  why, sizeof why) == HF_OK)
            w->env.escrow.partitions = partitions;
        else
            log_warn("gateway", "escrow: allotments of pinned SKUs are not primed (%s)", why);
    }
    static const struct {
        const char *name, *help;
        size_t offset;
    } escrow_metrics[] = {
        {"holdfast_escrow_holds_taken_total", "Holds taken from an allotment (answered in one hop)",
         offsetof(gw_escrow_stats_t, taken)},
        {"holdfast_escrow_holds_missed_total",
         "Holds of an escrow SKU its allotment could not cover (asked of the counter)",
         offsetof(gw_escrow_stats_t, missed)},
        {"holdfast_escrow_refills_asked_total", "Allotment refills asked for",
         offsetof(gw_escrow_stats_t, asked)},
        {"holdfast_escrow_units_granted_total", "Units granted to this process's allotments",
         offsetof(gw_escrow_stats_t, granted)},
        {"holdfast_escrow_units_returned_total", "Units this process's allotments gave back",
         offsetof(gw_escrow_stats_t, returned)},
    };
    if (w->env.escrow.heat)
        metrics_gauge(
            "holdfast_escrow_auto_skus",
            "SKU x gateway partition in escrow for their contention (escrow_auto_reserves_s)",
            gauge_escrow_auto, w->env.escrow.heat);
    for (size_t i = 0; i < sizeof escrow_metrics / sizeof escrow_metrics[0]; i++)
        metrics_counter_read(escrow_metrics[i].name, escrow_metrics[i].help, read_escrow_stat,
                             (char *)&w->escrow_stats + escrow_metrics[i].offset);
    w->env.availability = view_availability;
    w->env.staleness_ms = view_staleness;
    w->env.opaque = w->view;
    w->env.topic_exists = topic_exists;
    w->env.topics_opaque = &w->topics;
    return HF_OK;
}

/* A run id no other run of this state directory shares: 64 random bits (a
 * cursor of another run, left in the store by a restart, is ignored). */
static int sweep_init(gw_sweep_t *sw, char *errstr, size_t errstr_size)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) {
        snprintf(errstr, errstr_size, "gateway: getrandom for the sweeper's run id: %s",
                 strerror(errno));
        return HF_ERR_IO;
    }
    sw->run_id = id | 1; /* never 0 */
    atomic_init(&sw->fired_max_ms, 0);
    return HF_OK;
}

int gateway_env_new(const hf_config_t *cfg, void **env_out, char *errstr, size_t errstr_size)
{
    *env_out = NULL;
    gw_world_t *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(errstr, errstr_size, "gateway: out of memory");
        return HF_ERR_NOMEM;
    }
    /* Settings first: a bad one fails the start before any Kafka client exists. */
    int err = gateway_env_configure(cfg, &w->env, errstr, errstr_size);
    if (!err)
        err = sweep_init(&w->sweep, errstr, errstr_size);
    if (!err && cfg->route_hint_ttl_ms > 0) {
        w->env.hint = gw_hint_new(cfg->route_hint_ttl_ms);
        if (!w->env.hint) {
            snprintf(errstr, errstr_size, "gateway: out of memory");
            err = HF_ERR_NOMEM;
        }
    }
    if (!err && cfg->escrow_auto_reserves_s > 0) {
        gw_heat_conf_t hc = {cfg->escrow_auto_reserves_s, cfg->escrow_auto_cool_ms};
        w->env.escrow.heat = gw_heat_new(&hc);
        if (!w->env.escrow.heat) {
            snprintf(errstr, errstr_size, "gateway: out of memory");
            err = HF_ERR_NOMEM;
        }
    }
    if (!err) {
        w->env.sweep = &w->sweep;
        pthread_mutex_init(&w->topics.mu, NULL);
        w->topics_mu_ready = true;
        err = world_start(cfg, w, errstr, errstr_size);
    }
    if (err) {
        gateway_env_destroy(&w->env);
        return err;
    }
    *env_out = &w->env;
    return HF_OK;
}

void gateway_env_release(gateway_env_t *env)
{
    ship_from_free(env->ship_from);
    env->ship_from = NULL;
}

void gateway_env_destroy(void *env)
{
    if (!env)
        return;
    gw_world_t *w = env; /* env is the world's first member */
    gateway_env_release(&w->env);
    view_destroy(w->view);
    gw_heat_destroy(w->env.escrow.heat);
    gw_hint_destroy(w->env.hint);
    kafka_reader_destroy(w->topics.reader);
    if (w->topics_mu_ready)
        pthread_mutex_destroy(&w->topics.mu);
    free(w);
}

const gateway_env_t *gateway_env(stage_ctx_t *ctx)
{
    const gateway_env_t *env = stage_env(ctx);
    hf_assert(env); /* the stage's init built it before any task started */
    return env;
}
