/* Defaults, JSON file and environment for hf_config_t (jansson). */
#include "config.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_datafile.h"
#include "hf_limits.h"

void config_defaults(hf_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->bootstrap, sizeof cfg->bootstrap, "127.0.0.1:9092");
    snprintf(cfg->app_id, sizeof cfg->app_id, "holdfast");
    snprintf(cfg->instance_id, sizeof cfg->instance_id, "0");
    snprintf(cfg->state_dir, sizeof cfg->state_dir, "./.state");
    snprintf(cfg->stages, sizeof cfg->stages, "counter");
    cfg->threads_per_stage = 1;
    cfg->batch_records_max = 2000;
    cfg->batch_time_max_ms = 20;
    cfg->idle_poll_ms = 100;
    cfg->transaction_timeout_ms = 10000;
    cfg->state_max_age_ms = 6 * 24 * 3600 * 1000;
    cfg->restore_run_mib = (int)(HF_STATE_LOAD_RUN_BYTES >> 20);
    cfg->state_block_cache_mib = 64;
    cfg->state_memtable_mib = 32;
    cfg->consumer_session_timeout_ms = 3000;
    cfg->consumer_heartbeat_interval_ms = 500;
    snprintf(cfg->group_protocol, sizeof cfg->group_protocol, "classic");
    cfg->standby_replicas = 1;
    cfg->metrics_port = 0;
    snprintf(cfg->metrics_bind, sizeof cfg->metrics_bind, "127.0.0.1");
    cfg->health_loop_stall_ms = 30000;
    cfg->health_aborts_max = 3;
    cfg->signal_low_watermark = 0;
    cfg->signal_high_watermark = 1;
    cfg->signal_dwell_ms = 2000;
    cfg->aggregator_commit_interval_ms = 100;
    cfg->counter_commit_interval_ms = 3;
    cfg->gateway_commit_interval_ms = 3;
    cfg->txn_gap_pct = 0;
    cfg->counter_txn_period_max_ms = 25;
    cfg->counter_txn_period_full_records_s = 6000;
    cfg->gateway_txn_period_max_ms = 25;
    cfg->gateway_txn_period_full_records_s = 12000;
    /* ./config/warehouses.json in a checkout, else the installed one (hf_datafile.h);
     * the file or HOLDFAST_ settings applied after the defaults name another. */
    hf_datafile_find("config/warehouses.json", "warehouses.json", cfg->warehouses_file,
                     sizeof cfg->warehouses_file);
    cfg->ttl_default_ms = 15 * 60 * 1000;
    cfg->hold_max_factor_pct = 200;
    cfg->idempotency_retention_ms = 24 * 3600 * 1000;
    cfg->reservation_retention_ms = 7 * 24 * 3600 * 1000;
    cfg->hold_retention_ms = HF_HOLD_RETENTION_DEFAULT_MS;
    snprintf(cfg->late_payment_policy, sizeof cfg->late_payment_policy, "refund");
    snprintf(cfg->payment_policy, sizeof cfg->payment_policy, "%s", HF_PAYMENT_POLICY_DEFAULT);
    cfg->payment_pending_extend_ms = 15 * 60 * 1000;
    cfg->payment_pending_max_ms = 2 * 3600 * 1000;
    snprintf(cfg->reply_topic_prefix, sizeof cfg->reply_topic_prefix, "holdfast.replies.");
    cfg->result_timeout_ms = 3000;
    /* A SKU taking 50 reserves a second at one gateway partition goes to
     * escrow: a flash burst switches within its first 20 ms, while the long
     * tail (bench-pipeline: 1,000/s over 10,000 SKUs, 0.1/s a SKU) never does.
     * bench-flash, 20,000 shoppers for 5,000 units: burst p99 200 ms against
     * direct's 313 ms, every unit sold (docs/PERFORMANCE.md). */
    cfg->escrow_auto_reserves_s = 50;
    cfg->escrow_auto_cool_ms = 10000;
    cfg->escrow_prime_units = 200;
    cfg->escrow_refill_min_units = 10;
    cfg->escrow_refill_max_units = 2000;
    cfg->escrow_refill_horizon_ms = 1000;
    cfg->escrow_idle_return_ms = 5000;
    cfg->escrow_scarce_units = 20;
    cfg->escrow_grant_share_pct = 50;
    cfg->view_stale_max_ms = 30000;
    cfg->route_hint_ttl_ms = 500;
    cfg->reserve_answer_from_counter = 1;
    /* Shedding (shed.c). A transaction commits in ~14 ms on a slow VM and a
     * batch gathers for up to 20-25 ms; a pipeline that keeps up still reads
     * the freshest Reserve of each batch a few ms after its append, so the
     * least wait over any stretch sits far under 50 ms, while a standing
     * queue of 50 ms in front of one stage spends the whole of the brief's
     * 50 ms reserve p99 by itself. The interval spans at least two slow batch
     * cycles (gather + commit, with its tail) and a loaded counter round trip,
     * so one slow commit never looks like a standing queue; and an overload
     * that lengthens the queue by a second per second is shed from about
     * target + interval = 250 ms of wait, under the 300 ms deadline that
     * answered every request within 1 s at twice the sustained rate
     * (docs/PERFORMANCE.md; the new rule not measured there yet). With the
     * standing queue left to that rule, the deadline is the client's useful
     * time only: half the HTTP front's 2 s reply timeout, leaving the two
     * counter hops room before the front answers 503. A burst whose oldest
     * reserves waited 300-1,000 ms is then served if the queue behind them
     * drains, where the 300 ms deadline shed them. */
    cfg->reserve_deadline_ms = 1000;
    /* Measured, 2026-12-07 (docs/PERFORMANCE.md): at 50 / 200 ms a flash sale
     * in a cold broker's first minute (its JIT still compiling, every commit
     * slow) was shed as a standing queue, 26,259 BUSY answers to 22,050
     * shoppers who retried, burst p99 2.6 s; at 150 / 500 ms, 5,433 and 1.5 s,
     * while twice the highest sustained rate (12,000/s for 20 s) was still
     * answered within 1 s (p99 716 ms) and expiries within 480 ms. */
    cfg->reserve_shed_target_ms = 150;
    cfg->reserve_shed_interval_ms = 500;
    cfg->route_weight_distance_pct = 45;
    cfg->route_weight_cost_pct = 25;
    cfg->route_weight_fill_pct = 30;
    snprintf(cfg->http_bind, sizeof cfg->http_bind, "127.0.0.1");
    cfg->http_port = 8080;
    cfg->http_connections_max = 256;
    cfg->http_inflight_max = 192; /* below http_connections_max: the rest get 503 */
    cfg->http_reply_timeout_ms = 2000;
    cfg->http_body_max_bytes = 64 * 1024;
    cfg->http_retry_after_s = 1;
    cfg->http_reply_retention_ms = 3600 * 1000;
    snprintf(cfg->http_webhook_bind, sizeof cfg->http_webhook_bind, "127.0.0.1");
    cfg->http_webhook_port = -1; /* on the checkout listener */
    snprintf(cfg->http_ops_bind, sizeof cfg->http_ops_bind, "127.0.0.1");
    cfg->http_ops_port = -1; /* on the checkout listener */
    cfg->http_api_key_rate_per_s = 50;
    cfg->http_api_key_burst = 100;
    cfg->webhook_tolerance_s = 300;
    snprintf(cfg->output_framing, sizeof cfg->output_framing, "single-object");
    cfg->schema_registry_timeout_ms = 5000;
}

static void copy_env(char *dst, size_t dst_size, const char *name)
{
    const char *v = getenv(name);
    if (v && *v)
        snprintf(dst, dst_size, "%s", v);
}

void config_apply_env(hf_config_t *cfg)
{
    copy_env(cfg->bootstrap, sizeof cfg->bootstrap, "HOLDFAST_BOOTSTRAP");
    copy_env(cfg->state_dir, sizeof cfg->state_dir, "HOLDFAST_STATE_DIR");
    copy_env(cfg->instance_id, sizeof cfg->instance_id, "HOLDFAST_INSTANCE");
    copy_env(cfg->topic_prefix, sizeof cfg->topic_prefix, "HOLDFAST_TOPIC_PREFIX");
    copy_env(cfg->app_id, sizeof cfg->app_id, "HOLDFAST_APP_ID");
    copy_env(cfg->kafka_config_file, sizeof cfg->kafka_config_file, "HOLDFAST_KAFKA_CONFIG");
    copy_env(cfg->kafka_overrides, sizeof cfg->kafka_overrides, "HOLDFAST_KAFKA_OVERRIDES");
    copy_env(cfg->webhook_secrets, sizeof cfg->webhook_secrets, "HOLDFAST_WEBHOOK_SECRETS");
    copy_env(cfg->schema_registry_url, sizeof cfg->schema_registry_url,
             "HOLDFAST_SCHEMA_REGISTRY_URL");
}

typedef struct {
    const char *name;
    size_t offset;
    size_t size; /* 0 for int fields */
    int min, max;
} config_field_t;

#define STR_FIELD(f)                                                                               \
    {                                                                                              \
#f, offsetof(hf_config_t, f), sizeof(((hf_config_t *)0)->f), 0, 0                          \
    }
#define INT_FIELD(f, lo, hi)                                                                       \
    {                                                                                              \
#f, offsetof(hf_config_t, f), 0, lo, hi                                                    \
    }
static const config_field_t config_fields[] = {
    STR_FIELD(bootstrap),
    STR_FIELD(app_id),
    STR_FIELD(topic_prefix),
    STR_FIELD(kafka_config_file),
    STR_FIELD(kafka_overrides),
    STR_FIELD(instance_id),
    STR_FIELD(state_dir),
    STR_FIELD(stages),
    INT_FIELD(threads_per_stage, 1, 16),
    INT_FIELD(batch_records_max, 1, HF_BATCH_RECORDS_MAX),
    INT_FIELD(batch_time_max_ms, 1, 10000),
    INT_FIELD(idle_poll_ms, 1, 10000),
    INT_FIELD(transaction_timeout_ms, 1000, 900000),
    INT_FIELD(state_max_age_ms, 1000, 604800000),
    INT_FIELD(restore_run_mib, 1, 1024),
    INT_FIELD(state_block_cache_mib, 8, 65536),
    INT_FIELD(state_memtable_mib, 1, 1024),
    INT_FIELD(consumer_session_timeout_ms, 1000, 300000),
    INT_FIELD(consumer_heartbeat_interval_ms, 100, 100000),
    STR_FIELD(group_protocol),
    INT_FIELD(standby_replicas, 0, 1),
    INT_FIELD(metrics_port, 0, 65535),
    STR_FIELD(metrics_bind),
    INT_FIELD(health_loop_stall_ms, 1000, 3600000),
    INT_FIELD(health_aborts_max, 1, HF_TXN_RETRIES_MAX),
    INT_FIELD(signal_low_watermark, 0, 1000000),
    INT_FIELD(signal_high_watermark, 1, 1000000),
    INT_FIELD(signal_dwell_ms, 0, 3600000),
    INT_FIELD(aggregator_commit_interval_ms, 0, 5000),
    INT_FIELD(counter_commit_interval_ms, 0, 1000),
    INT_FIELD(gateway_commit_interval_ms, 0, 1000),
    INT_FIELD(txn_gap_pct, 0, 1000),
    INT_FIELD(counter_txn_period_max_ms, 0, 1000),
    INT_FIELD(counter_txn_period_full_records_s, 2, 10000000),
    INT_FIELD(gateway_txn_period_max_ms, 0, 1000),
    INT_FIELD(gateway_txn_period_full_records_s, 2, 10000000),
    STR_FIELD(signal_overrides_file),
    STR_FIELD(warehouses_file),
    STR_FIELD(ship_from_file),
    INT_FIELD(ttl_default_ms, 1000, 86400000),
    STR_FIELD(campaign_ttls),
    INT_FIELD(hold_max_factor_pct, 100, 1000),
    INT_FIELD(idempotency_retention_ms, 1000, 604800000),
    INT_FIELD(reservation_retention_ms, 1000, 1814400000),
    INT_FIELD(hold_retention_ms, 1000, 1814400000),
    STR_FIELD(late_payment_policy),
    STR_FIELD(payment_policy),
    INT_FIELD(payment_pending_extend_ms, 1000, 86400000),
    INT_FIELD(payment_pending_max_ms, 1000, HF_PAYMENT_PENDING_MAX_MS),
    STR_FIELD(reply_topic_prefix),
    INT_FIELD(result_timeout_ms, 100, 60000),
    INT_FIELD(view_stale_max_ms, 100, 3600000),
    INT_FIELD(route_hint_ttl_ms, 0, 60000),
    INT_FIELD(reserve_answer_from_counter, 0, 1),
    INT_FIELD(reserve_deadline_ms, 0, 60000),
    INT_FIELD(reserve_shed_target_ms, 0, 60000),
    INT_FIELD(reserve_shed_interval_ms, 20, 60000),
    STR_FIELD(escrow_skus),
    INT_FIELD(escrow_auto_reserves_s, 0, 1000000),
    INT_FIELD(escrow_auto_cool_ms, 0, 3600000),
    INT_FIELD(escrow_prime_units, 0, 1000000),
    INT_FIELD(escrow_refill_min_units, 1, 1000000),
    INT_FIELD(escrow_refill_max_units, 1, 1000000),
    INT_FIELD(escrow_refill_horizon_ms, 10, 60000),
    INT_FIELD(escrow_idle_return_ms, 100, 3600000),
    INT_FIELD(escrow_scarce_units, 0, 1000000),
    INT_FIELD(escrow_grant_share_pct, 1, 100),
    INT_FIELD(route_weight_distance_pct, 0, 100),
    INT_FIELD(route_weight_cost_pct, 0, 100),
    INT_FIELD(route_weight_fill_pct, 0, 100),
    STR_FIELD(http_bind),
    INT_FIELD(http_port, 0, 65535),
    INT_FIELD(http_connections_max, 1, 4096),
    INT_FIELD(http_inflight_max, 1, 65536),
    INT_FIELD(http_reply_timeout_ms, 100, 60000),
    INT_FIELD(http_body_max_bytes, 1024, 1048576),
    INT_FIELD(http_retry_after_s, 1, 3600),
    INT_FIELD(http_reply_retention_ms, 60000, 604800000),
    STR_FIELD(http_webhook_bind),
    INT_FIELD(http_webhook_port, -1, 65535),
    STR_FIELD(http_ops_bind),
    INT_FIELD(http_ops_port, -1, 65535),
    STR_FIELD(http_tls_cert_file),
    STR_FIELD(http_tls_key_file),
    STR_FIELD(http_tls_client_ca_file),
    STR_FIELD(http_webhook_tls_cert_file),
    STR_FIELD(http_webhook_tls_key_file),
    STR_FIELD(webhook_secrets),
    INT_FIELD(webhook_tolerance_s, 1, 86400),
    STR_FIELD(http_api_keys_file),
    INT_FIELD(http_api_key_rate_per_s, 1, HF_API_KEY_RATE_PER_S_MAX),
    INT_FIELD(http_api_key_burst, 1, HF_API_KEY_BURST_MAX),
    STR_FIELD(schema_registry_url),
    STR_FIELD(output_framing),
    INT_FIELD(schema_registry_timeout_ms, 100, 60000),
};

static int config_set(hf_config_t *cfg, const char *key, json_t *v, char *errstr,
                      size_t errstr_size)
{
    for (size_t i = 0; i < sizeof config_fields / sizeof config_fields[0]; i++) {
        const config_field_t *f = &config_fields[i];
        if (strcmp(f->name, key) != 0)
            continue;
        char *dst = (char *)cfg + f->offset;
        if (f->size) {
            if (!json_is_string(v) || json_string_length(v) >= f->size) {
                snprintf(errstr, errstr_size, "config '%s' must be a string shorter than %zu", key,
                         f->size);
                return HF_ERR_CONFIG;
            }
            snprintf(dst, f->size, "%s", json_string_value(v));
            return HF_OK;
        }
        if (!json_is_integer(v) || json_integer_value(v) < f->min ||
            json_integer_value(v) > f->max) {
            snprintf(errstr, errstr_size, "config '%s' must be an integer in [%d, %d]", key, f->min,
                     f->max);
            return HF_ERR_CONFIG;
        }
        *(int *)(void *)dst = (int)json_integer_value(v);
        return HF_OK;
    }
    snprintf(errstr, errstr_size, "unknown config key '%s'", key);
    return HF_ERR_CONFIG;
}

static int check_registry(const hf_config_t *cfg, char *errstr, size_t errstr_size)
{
    bool confluent = strcmp(cfg->output_framing, "confluent") == 0;
    if (!confluent && strcmp(cfg->output_framing, "single-object") != 0) {
        snprintf(errstr, errstr_size,
                 "output_framing '%s' must be 'single-object' (Avro single-object encoding, the "
                 "default) or 'confluent' (Confluent Schema Registry wire format)",
                 cfg->output_framing);
        return HF_ERR_CONFIG;
    }
    const char *url = cfg->schema_registry_url;
    if (url[0] && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        snprintf(errstr, errstr_size,
                 "schema_registry_url '%s' must start with http:// or https:// "
                 "(e.g. http://127.0.0.1:8081)",
                 url);
        return HF_ERR_CONFIG;
    }
    if (confluent && !url[0]) {
        snprintf(errstr, errstr_size,
                 "output_framing 'confluent' needs schema_registry_url (the registry that "
                 "hands out the schema ids)");
        return HF_ERR_CONFIG;
    }
    return HF_OK;
}

int config_check(const hf_config_t *cfg, char *errstr, size_t errstr_size)
{
    if (cfg->escrow_refill_min_units > cfg->escrow_refill_max_units) {
        snprintf(errstr, errstr_size,
                 "escrow_refill_min_units %d must not exceed escrow_refill_max_units %d",
                 cfg->escrow_refill_min_units, cfg->escrow_refill_max_units);
        return HF_ERR_CONFIG;
    }
    /* A settled hold must outlive every re-send of its Hold by the gateway
     * (result_timeout_ms, growing, HF_RESULT_RETRIES_MAX times), or a late
     * re-send would find no record and reserve a second time. */
    int64_t resend_window_ms = (int64_t)cfg->result_timeout_ms * HF_RESULT_WAIT_FACTOR;
    if (cfg->hold_retention_ms < 2 * resend_window_ms) {
        snprintf(errstr, errstr_size,
                 "hold_retention_ms %d must be at least twice the gateway's re-send window, "
                 "%d x result_timeout_ms %d = %lld ms",
                 cfg->hold_retention_ms, HF_RESULT_WAIT_FACTOR, cfg->result_timeout_ms,
                 (long long)resend_window_ms);
        return HF_ERR_CONFIG;
    }
    if (cfg->reservation_retention_ms < cfg->idempotency_retention_ms) {
        /* A retried webhook must find its reservation for as long as it may
         * find its idempotency record, or it would be told NOT_FOUND. */
        snprintf(errstr, errstr_size,
                 "reservation_retention_ms %d must be at least idempotency_retention_ms %d",
                 cfg->reservation_retention_ms, cfg->idempotency_retention_ms);
        return HF_ERR_CONFIG;
    }
    if (cfg->consumer_heartbeat_interval_ms * 3 > cfg->consumer_session_timeout_ms) {
        /* Two lost heartbeats in a row must not end the session. */
        snprintf(errstr, errstr_size,
                 "consumer_heartbeat_interval_ms %d must be at most a third of "
                 "consumer_session_timeout_ms %d (e.g. 500 with 3000)",
                 cfg->consumer_heartbeat_interval_ms, cfg->consumer_session_timeout_ms);
        return HF_ERR_CONFIG;
    }
    if (strcmp(cfg->group_protocol, "classic") != 0 &&
        strcmp(cfg->group_protocol, "consumer") != 0) {
        snprintf(errstr, errstr_size,
                 "group_protocol: '%s' is not one of classic, consumer (KIP-848)",
                 cfg->group_protocol);
        return HF_ERR_CONFIG;
    }
    struct in_addr bind_addr;
    if (inet_pton(AF_INET, cfg->metrics_bind, &bind_addr) != 1) {
        snprintf(errstr, errstr_size,
                 "metrics_bind '%s' must be an IPv4 address (127.0.0.1: this host only; "
                 "0.0.0.0: every interface)",
                 cfg->metrics_bind);
        return HF_ERR_CONFIG;
    }
    if (cfg->reserve_deadline_ms > 0 && cfg->reserve_shed_target_ms >= cfg->reserve_deadline_ms) {
        /* Every reserve over the target would be past the deadline already. */
        snprintf(errstr, errstr_size,
                 "reserve_shed_target_ms %d must be below reserve_deadline_ms %d (0: shed on "
                 "the deadline only)",
                 cfg->reserve_shed_target_ms, cfg->reserve_deadline_ms);
        return HF_ERR_CONFIG;
    }
    if (cfg->signal_high_watermark <= cfg->signal_low_watermark) {
        snprintf(errstr, errstr_size,
                 "signal_high_watermark %d must be above signal_low_watermark %d",
                 cfg->signal_high_watermark, cfg->signal_low_watermark);
        return HF_ERR_CONFIG;
    }
    return check_registry(cfg, errstr, errstr_size);
}

int config_load_file(hf_config_t *cfg, const char *path, char *errstr, size_t errstr_size)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        snprintf(errstr, errstr_size, "config %s:%d: %s", path, jerr.line, jerr.text);
        return HF_ERR_CONFIG;
    }
    int err = HF_OK;
    if (!json_is_object(root)) {
        snprintf(errstr, errstr_size, "config %s: top level must be an object", path);
        err = HF_ERR_CONFIG;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (err == HF_OK)
            err = config_set(cfg, key, v, errstr, errstr_size);
    }
    json_decref(root);
    return err ? err : config_check(cfg, errstr, errstr_size);
}
