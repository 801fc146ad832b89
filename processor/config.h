/* Runtime configuration of `holdfast run`. Every field has a default that works
 * against a local broker; a JSON file (--config) overrides any of them, and
 * HOLDFAST_BOOTSTRAP overrides the bootstrap address. */
#ifndef HF_CONFIG_H
#define HF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"

#define HF_CONFIG_STR_MAX 256

/* What payment events do to their hold unless payment_policy says otherwise. */
#define HF_PAYMENT_POLICY_DEFAULT                                                                  \
    "processing=extend,requires_action=extend,failed=keep,canceled=release"

typedef struct hf_config {
    char bootstrap[HF_CONFIG_STR_MAX]; /* "127.0.0.1:9092" */
    char app_id[64];                   /* prefix of group and transactional ids */
    char topic_prefix[49];             /* prepended to every topic name */
    char instance_id[64];              /* stable per process: fences its predecessor */
    char state_dir[HF_CONFIG_STR_MAX]; /* one RocksDB per stage below it */
    char stages[HF_CONFIG_STR_MAX];    /* "counter" or "counter,gateway,..." */
    int threads_per_stage;             /* worker threads (tasks) per stage */
    int batch_records_max;             /* records per transaction */
    int batch_time_max_ms;             /* max time gathering one batch */
    int idle_poll_ms;                  /* first poll's wait when idle */
    int transaction_timeout_ms;        /* broker aborts a stuck transaction after it */
    /* Local state last current longer ago is rebuilt from the whole changelog on
     * assignment; keep it below the changelogs' delete.retention.ms (7 d). */
    int state_max_age_ms;
    /* A full restore loads the changelog in sorted runs of at most this many
     * MiB each (state/state_load.h): the memory a restore takes, and the size
     * of the table files it hands to RocksDB. */
    int restore_run_mib;
    /* RocksDB memory: one block cache shared by every stage's DB of the
     * process (data, index and filter blocks), and the size of one memtable of
     * a DB (at most 4 a DB). Bounded whatever the catalog's size. */
    int state_block_cache_mib;
    int state_memtable_mib;
    /* The group consumer's session: a process that stops heartbeating for
     * consumer_session_timeout_ms loses its partitions to the others (the
     * takeover after a kill -9 starts then); it heartbeats every
     * consumer_heartbeat_interval_ms (at most a third of the session). */
    int consumer_session_timeout_ms;
    int consumer_heartbeat_interval_ms;
    /* The group protocol: "classic" (the consumers' own session settings and
     * range assignor) or "consumer" (KIP-848: the broker assigns with its range
     * assignor, and holdfast sets the two settings above as the group's
     * consumer.session.timeout.ms / consumer.heartbeat.interval.ms). */
    char group_protocol[16];
    /* 1: the process keeps a warm copy of every partition of its stages that
     * it does not own, by following their changelogs (a standby), so a
     * takeover restores only the tail; 0: none (a takeover restores from
     * where this process's own copy stopped, or from the beginning). */
    int standby_replicas;
    int metrics_port;      /* HTTP GET /metrics and /healthz on this port; 0: off */
    char metrics_bind[64]; /* IPv4 address it listens on: "127.0.0.1" (this host only) */
    /* /healthz is 503 when a task completed no loop for health_loop_stall_ms, or
     * aborted health_aborts_max transactions in a row. */
    int health_loop_stall_ms;
    int health_aborts_max;
    /* librdkafka properties for every Kafka client of the process (security,
     * tuning): a properties file, then "name=value,name=value" over it. */
    char kafka_config_file[HF_CONFIG_STR_MAX];
    char kafka_overrides[HF_CONFIG_STR_MAX];
    /* Sold-out signals (aggregator): SOLD_OUT once the network total has stayed at
     * or below the low watermark for dwell_ms; BACK_IN_STOCK once it reaches high. */
    int signal_low_watermark;
    int signal_high_watermark;
    int signal_dwell_ms;
    int aggregator_commit_interval_ms; /* least time between aggregator transactions */
    int counter_commit_interval_ms;    /* ... counter transactions (0: none) */
    int gateway_commit_interval_ms;    /* ... gateway transactions (0: none) */
    /* Under load a stage starts a transaction at most every *_txn_period_max_ms
     * (pacing.h), reached at *_txn_period_full_records_s input records/s. */
    /* A counter or gateway transaction waits at least this percent of how long
     * the last one took before it starts (0: only the intervals above). */
    int txn_gap_pct;
    int counter_txn_period_max_ms;
    int counter_txn_period_full_records_s;
    int gateway_txn_period_max_ms;
    int gateway_txn_period_full_records_s;
    char signal_overrides_file[HF_CONFIG_STR_MAX]; /* JSON {sku: {low, high, dwell_ms}} */
    /* Gateway (reservations, idempotency, routing). */
    char warehouses_file[HF_CONFIG_STR_MAX]; /* JSON warehouses: id, lat, lon, cost */
    char ship_from_file[HF_CONFIG_STR_MAX];  /* per-SKU ship-from lists; "" = none */
    int ttl_default_ms;                    /* hold TTL when neither request nor campaign set one */
    char campaign_ttls[HF_CONFIG_STR_MAX]; /* "flash=300000,vip=1800000" */
    int hold_max_factor_pct;               /* max total hold time = factor% x TTL (extensions) */
    int idempotency_retention_ms;          /* how long a key's outcome is kept */
    int reservation_retention_ms;          /* how long an ended reservation is kept */
    int hold_retention_ms;                 /* counter: how long a settled hold is kept */
    char late_payment_policy[16];          /* "refund" (flag) or "rereserve" */
    /* What each payment event does to its hold (gateway/payment_event.c);
     * HF_PAYMENT_POLICY_DEFAULT applies under it. */
    char payment_policy[HF_CONFIG_STR_MAX];
    int payment_pending_extend_ms; /* a pending event holds until now + this ... */
    int payment_pending_max_ms;    /* ... never past created + this (or the hold deadline) */
    char reply_topic_prefix[64];   /* reply_to may name topics under it */
    int result_timeout_ms;         /* unanswered holds are asked again after it */
    int route_hint_ttl_ms;         /* route on a counter's answer this long (0: off) */
    /* 1: a reservation one hold covers is answered by that hold's counter (two
     * hops: gateway, counter); 0: always by the gateway (three). */
    int reserve_answer_from_counter;
    int view_stale_max_ms; /* beyond it routing degrades to the nearest warehouse */
    /* Load shedding (processor/gateway/shed.c): a Reserve that waited longer
     * than reserve_deadline_ms is answered BUSY (0: nothing is ever shed), and
     * so are new reserves while a partition's least wait over
     * reserve_shed_interval_ms stays above reserve_shed_target_ms (CoDel; 0:
     * the deadline only). */
    int reserve_deadline_ms;
    int reserve_shed_target_ms;
    int reserve_shed_interval_ms;
    /* Escrow (docs/ESCROW.md): hot SKUs served from allotments in one hop. */
    char escrow_skus[HF_CONFIG_STR_MAX]; /* "sku,sku": always escrow (a campaign's pin) */
    int escrow_auto_reserves_s; /* per partition, a sku's reserves + refusals/s that switch it on; 0 off */
    int escrow_auto_cool_ms;       /* ... and how long under half of that switches it off */
    int escrow_prime_units;        /* asked for each pinned pair before its first shopper */
    int escrow_refill_min_units;   /* smallest refill asked for */
    int escrow_refill_max_units;   /* largest refill asked for */
    int escrow_refill_horizon_ms;  /* a refill covers this long at the partition's rate */
    int escrow_idle_return_ms;     /* an allotment untouched this long is returned */
    int escrow_scarce_units;       /* at or under this many sellable units a sku goes direct */
    int escrow_grant_share_pct;    /* counter: a grant takes at most this share of free stock */
    int route_weight_distance_pct; /* routing score weights, percent */
    int route_weight_cost_pct;
    int route_weight_fill_pct;
    /* HTTP front (`holdfast http`, docs/HTTP.md). */
    char http_bind[64];          /* IPv4 address it listens on: "127.0.0.1" */
    int http_port;               /* 0: any free port (logged) */
    int http_connections_max;    /* concurrent connections, one thread each */
    int http_inflight_max;       /* requests waiting for the pipeline at once; more get 503 */
    int http_reply_timeout_ms;   /* a request unanswered this long gets 503 + Retry-After */
    int http_body_max_bytes;     /* larger bodies get 413 */
    int http_retry_after_s;      /* the Retry-After of a 503 */
    int http_reply_retention_ms; /* retention.ms of the process's reply topic when created */
    /* The front's two other listeners (docs/HTTP.md, "Listeners"): the payment
     * webhook and the operators' /metrics, /healthz, /readyz. Port -1 (the
     * default): served on the checkout listener (http_bind:http_port). */
    char http_webhook_bind[64];
    int http_webhook_port;
    char http_ops_bind[64];
    int http_ops_port;
    /* TLS of the checkout listener (and of what it also serves): PEM chain and
     * unencrypted key; empty: plain HTTP. Re-read on SIGHUP. */
    char http_tls_cert_file[HF_CONFIG_STR_MAX];
    char http_tls_key_file[HF_CONFIG_STR_MAX];
    /* Mutual TLS on the checkout listener: clients must present a certificate
     * signed by a CA of this PEM file; empty: none asked. */
    char http_tls_client_ca_file[HF_CONFIG_STR_MAX];
    /* TLS of a separate webhook listener; empty: the checkout listener's
     * certificate and key (never its client CA: providers present none). */
    char http_webhook_tls_cert_file[HF_CONFIG_STR_MAX];
    char http_webhook_tls_key_file[HF_CONFIG_STR_MAX];
    /* Payment webhooks: HMAC-SHA256 secrets, "current" or "current,previous"
     * (rotation); env HOLDFAST_WEBHOOK_SECRETS overrides; empty: webhooks refused. */
    char webhook_secrets[HF_CONFIG_STR_MAX];
    int webhook_tolerance_s; /* a signature's timestamp may be this far from now */
    /* API keys of the checkout routes (processor/http/api_keys.h): the keys file
     * (empty: the routes are open, and the front warns at start), and the rate a
     * key gets when its line names none (tokens per second, bucket size). */
    char http_api_keys_file[HF_CONFIG_STR_MAX];
    int http_api_key_rate_per_s;
    int http_api_key_burst;
    /* Confluent Schema Registry (docs/SCHEMA_REGISTRY.md): its base URL (empty:
     * none; env HOLDFAST_SCHEMA_REGISTRY_URL overrides), the framing of the
     * availability, signals and ledger topics, and the timeout of one request. */
    char schema_registry_url[HF_CONFIG_STR_MAX];
    char output_framing[16]; /* "single-object" (default) or "confluent" */
    int schema_registry_timeout_ms;
} hf_config_t;

void config_defaults(hf_config_t *cfg);
/* Applies a JSON object file over cfg; unknown keys are an error (a typo must not
 * silently run defaults). */
int config_load_file(hf_config_t *cfg, const char *path, char *errstr,
                     size_t errstr_size) HF_MUST_CHECK;
/* Environment overrides (HOLDFAST_BOOTSTRAP, HOLDFAST_STATE_DIR, HOLDFAST_INSTANCE,
 * HOLDFAST_TOPIC_PREFIX, HOLDFAST_APP_ID, HOLDFAST_KAFKA_CONFIG,
 * HOLDFAST_KAFKA_OVERRIDES, HOLDFAST_WEBHOOK_SECRETS, HOLDFAST_SCHEMA_REGISTRY_URL). */
void config_apply_env(hf_config_t *cfg);
/* Rules between settings (config_load_file applies them, and `holdfast run`
 * again at start whatever set them); HF_ERR_CONFIG naming the keys otherwise.
 * A stage's own settings (a policy name, a file to load) are checked by the
 * stage's init (stage.h), also at start. */
int config_check(const hf_config_t *cfg, char *errstr, size_t errstr_size) HF_MUST_CHECK;

#endif
