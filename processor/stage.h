/* What a stage is: a name, its input topics (co-partitioned), its changelog, and a
 * table from record type to handler. The task loop (task.h) owns Kafka,
 * transactions and state buffering; a handler only sees a stage_ctx_t through
 * which it reads and writes its partition's state and emits output records — all
 * of which take effect exactly once, when the task commits the transaction.
 * What a handler needs beyond its partition (settings, loaded files, the
 * gateway's routing view) is the stage's environment, built by its init in
 * main before any task starts and reached with stage_env.
 *
 * Handler contract: validate first, then write. A handler that returns
 * HF_ERR_INVAL (with a reason via stage_reject) must not have written state; the
 * task sends the input record to the dead-letter topic with that reason. Any other
 * error aborts the whole transaction and is retried. */
#ifndef HF_STAGE_H
#define HF_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "pacing.h"
#include "records.h"
#include "state.h"
#include "topics.h"

typedef struct stage_ctx stage_ctx_t;

struct hf_config;

typedef int (*stage_handler_fn)(stage_ctx_t *ctx, const hf_record_t *rec);

/* One row of a stage's table: a record type an input topic may carry, and what
 * handles it. A type on a topic without a row is a dead letter (admit.h): a
 * client may write requests, never the answers only another stage gives. */
typedef struct {
    hf_topic_id_t topic;
    hf_rec_type_t type;
    stage_handler_fn handle;
} stage_handler_t;

/* A stage's process-wide environment (its settings parsed and checked, files
 * loaded, background readers started): built once by the stage's init before
 * any task thread starts, shared read-only by all its tasks (a part that
 * changes, such as the counter's sweep cursors, guards itself), and freed by
 * destroy after the last task stopped and after the metrics server stopped
 * (an env may register gauges that read it, and metrics cannot unregister
 * them). A handler reaches it with stage_env. */
typedef int (*stage_init_fn)(const struct hf_config *cfg, void **env_out, char *errstr,
                             size_t errstr_size);
typedef void (*stage_destroy_fn)(void *env);

typedef struct {
    const char *name; /* "counter"; also the consumer group suffix */
    /* Builds the environment from cfg: every setting the stage reads is checked
     * here, and a bad one is HF_ERR_CONFIG with errstr naming its key, so that
     * `holdfast run` fails at start instead of on the first record. NULL: the
     * stage needs none (stage_env answers NULL). On failure *env_out is NULL
     * and nothing is left behind. */
    stage_init_fn init;
    /* Frees what init built; accepts NULL. NULL when init is. */
    stage_destroy_fn destroy;
    const hf_topic_id_t *input_topics; /* co-partitioned; the first is primary */
    size_t input_topics_count;
    hf_topic_id_t changelog_topic;
    const stage_handler_t *handlers;
    size_t handlers_count;
    /* Called once per transaction after the last record; emits coalesced outputs. */
    int (*batch_end)(stage_ctx_t *ctx);
    /* Called about every tick_interval_ms per owned partition (timers); may be NULL. */
    int (*tick)(stage_ctx_t *ctx);
    int tick_interval_ms;
    /* How long the task waits between two transactions that carry records,
     * from the configuration (pacing.h: a floor, and a gap that grows with the
     * input rate); NULL: no wait. Fewer, larger transactions cost the broker
     * and librdkafka less per record. */
    void (*pacing)(const struct hf_config *cfg, pacing_conf_t *out);
    /* Rebuilds derived state on restore; NULL: the stage has none. Called for
     * every changelog record a standby or an incremental restore applies to
     * ctx's partition, before it is applied (so stage_get still sees the value
     * it replaces); rec is the decoded value, NULL for a tombstone. A full
     * restore instead calls it once per key after loading them all, with the
     * key's final value and no previous one (stage_get of that key misses). It
     * reads no key but the one it is given, and writes only with
     * stage_put_local / stage_del_local. */
    int (*reindex)(stage_ctx_t *ctx, const char *key, size_t key_len, const hf_record_t *rec);
    /* First key bytes of the records reindex derives from (only those are
     * decoded for it, e.g. "H"), and of the derived keys themselves (e.g. "O"):
     * a changelog written before an index became local may still hold such keys,
     * and restore skips them, since reindex rebuilds what they said. */
    const char *reindex_tags;
    const char *local_tags;
    /* Called after a decoded record that arrived on another partition than its
     * key hashes to was dead-lettered (why says so); may emit (the gateway
     * answers a request REJECTED_INVALID) but must not write state. NULL: none. */
    int (*on_misrouted)(stage_ctx_t *ctx, const hf_record_t *rec, const char *why);
    /* The flow series the stage has from its start (metrics_flow.h:
     * METRICS_FLOW_REPLIES, ...), so that they show zeros before their first
     * observation; 0: only those every stage has. */
    unsigned metrics_series;
} stage_def_t;

/* ---- what a handler may do */

int64_t stage_now_ms(const stage_ctx_t *ctx);
/* The environment the stage's init built (stage_def_t.init); never changes while
 * the task runs. NULL for a stage without init. Handlers read their settings
 * here, never from the configuration: what they need was parsed and checked at
 * start. */
void *stage_env(const stage_ctx_t *ctx);
int32_t stage_partition(const stage_ctx_t *ctx);
/* The Kafka timestamp of the record being handled, epoch ms: its broker append
 * time on a topic with message.timestamp.type=LogAppendTime (holdfast.requests),
 * else its producer's; <= 0 when unknown (timers, batch end). */
int64_t stage_record_timestamp_ms(const stage_ctx_t *ctx);
/* The same, only when the input record being handled is of type (as
 * decoded): -1 for another type, and in timers and batch ends. A reply tells
 * by it whether the request it answers is the record at hand. */
int64_t stage_input_timestamp_ms(const stage_ctx_t *ctx, hf_rec_type_t type);
/* The stage's slot in metrics.h, for the series a handler counts itself
 * (metrics_flow.h); -1 when it has none (they are then not kept). */
int stage_metrics(const stage_ctx_t *ctx);
/* The Kafka key of the record being handled (not NUL-terminated). */
const void *stage_record_key(const stage_ctx_t *ctx, size_t *key_len);

/* Reads and decodes a state value. HF_ERR_NOTFOUND when absent. */
int stage_get(stage_ctx_t *ctx, const char *key, size_t key_len, hf_record_t *rec) HF_MUST_CHECK;
/* Encodes and buffers a state value; it reaches the changelog at commit. */
int stage_put(stage_ctx_t *ctx, const char *key, size_t key_len,
              const hf_record_t *rec) HF_MUST_CHECK;
/* The same for a value that must be of one record type, straight from or into
 * that type's struct (dst/src: a hf_reservation_state_t for
 * HF_REC_RESERVATION_STATE, ...), without a hf_record_t to copy through (its
 * union is as large as the largest record, ~20 KiB). A stored value of another
 * type is HF_ERR_CORRUPT. */
int stage_get_as(stage_ctx_t *ctx, const char *key, size_t key_len, hf_rec_type_t type,
                 void *dst) HF_MUST_CHECK;
int stage_put_as(stage_ctx_t *ctx, const char *key, size_t key_len, hf_rec_type_t type,
                 const void *src) HF_MUST_CHECK;
int stage_del(stage_ctx_t *ctx, const char *key, size_t key_len) HF_MUST_CHECK;
/* Raw bytes variants for index entries. */
int stage_put_raw(stage_ctx_t *ctx, const char *key, size_t key_len, const void *val,
                  size_t val_len) HF_MUST_CHECK;
/* Derived state (indexes): written and read like other state, applied with the
 * transaction's batch, but never sent to the changelog — the stage's reindex
 * hook rebuilds it from the records it derives from when a partition is
 * restored. Saves the broker one changelog record per index change. */
int stage_put_local(stage_ctx_t *ctx, const char *key, size_t key_len, const void *val,
                    size_t val_len) HF_MUST_CHECK;
int stage_del_local(stage_ctx_t *ctx, const char *key, size_t key_len) HF_MUST_CHECK;
/* Iterates this partition's keys under prefix, seeing buffered writes. */
state_iter_t *stage_iter(stage_ctx_t *ctx, const char *prefix, size_t prefix_len, bool reverse);

/* Queues an output record for topic, keyed by key (partitioned by murmur2). */
int stage_emit(stage_ctx_t *ctx, hf_topic_id_t topic, const char *key, size_t key_len,
               const hf_record_t *rec) HF_MUST_CHECK;
/* The same to a topic named at run time (a request's reply_to). */
int stage_emit_to(stage_ctx_t *ctx, const char *topic, const char *key, size_t key_len,
                  const hf_record_t *rec) HF_MUST_CHECK;

/* Sets the dead-letter reason and returns HF_ERR_INVAL, for `return
 * stage_reject(ctx, "qty %lld is not positive", qty);`. */
int stage_reject(stage_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Calls fn for every state key written in this transaction so far (in the
 * current partition or all partitions), e.g. to emit one coalesced record per
 * changed counter. */
typedef int (*stage_key_fn)(stage_ctx_t *ctx, int32_t partition, const char *key, size_t key_len);
int stage_foreach_written(stage_ctx_t *ctx, stage_key_fn fn) HF_MUST_CHECK;
/* Switches the partition that stage_get/put/iter act on (used by batch_end). */
void stage_set_partition(stage_ctx_t *ctx, int32_t partition);

#endif
