/* The one module that calls librdkafka. It turns librdkafka's handles into four
 * small objects — a group consumer, a transactional (or plain) producer, a
 * partition reader for changelogs and replays, and topic administration — and
 * classifies every Kafka failure into hf_err_t: HF_ERR_ABORTABLE (abort the
 * transaction, rewind, retry), HF_ERR_FATAL (fenced or broken: the process must
 * exit) or HF_ERR_KAFKA (anything else, detail in errstr). */
#ifndef HF_KAFKA_H
#define HF_KAFKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"

#define KAFKA_OFFSET_BEGINNING (-2)
#define KAFKA_OFFSET_END       (-1)
#define KAFKA_OFFSET_NONE      (-1001) /* no committed offset */

typedef struct kafka_consumer kafka_consumer_t;
typedef struct kafka_producer kafka_producer_t;
typedef struct kafka_reader kafka_reader_t;

/* A consumed record. Pointers stay valid until kafka_msg_release. */
typedef struct {
    const char *topic;
    int32_t partition;
    int64_t offset;
    const void *key;
    size_t key_len;
    const void *value; /* NULL for a tombstone */
    size_t value_len;
    int64_t timestamp_ms;
    void *handle; /* librdkafka's message; owned */
} kafka_msg_t;

void kafka_msg_release(kafka_msg_t *msg);

/* Reads the value of header name of a message into out (NUL-terminated). */
bool kafka_msg_header(const kafka_msg_t *msg, const char *name, char *out, size_t out_size);
/* The value of header name of a message without a copy: *val (not
 * NUL-terminated, *len bytes) stays valid until kafka_msg_release. False when
 * the message has no such header. A message without headers costs one branch;
 * librdkafka parses a message's headers once, at the first call. */
bool kafka_msg_header_ref(const kafka_msg_t *msg, const char *name, const void **val, size_t *len);

typedef struct {
    const char *name;
    const char *value;
} kafka_header_t;

/* One topic-partition in an assignment. */
typedef struct {
    const char *topic;
    int32_t partition;
} kafka_tp_t;

/* Called from inside kafka_consumer_poll when the group assigns or revokes
 * partitions (eager protocol: a revoke always takes everything). on_assign runs
 * after the committed offsets are fetched (stable: a previous owner's open
 * transaction has committed or aborted by then, so a restore that follows sees
 * every committed batch) and before the consumer starts fetching from them, so
 * a stage restores its state there. A non-OK return from on_assign, or
 * committed offsets not fetched within committed_timeout_ms (keep it above the
 * transaction timeout: the broker aborts a stalled transaction after that),
 * is fatal for the process. */
typedef struct {
    /* Called first when partitions are assigned, before their committed
     * offsets are fetched (may be NULL): a task fences the transactional ids
     * of members that left the group, so that a dead member's open
     * transaction is aborted now instead of after the transaction timeout —
     * until then the fetch of stable offsets waits for it. */
    void (*before_assign)(void *opaque);
    /* committed[i]: the group's committed offset (next to read) of tps[i],
     * fetched as stable (KIP-447: after every pending transaction that sent
     * offsets for it has ended), or KAFKA_OFFSET_NONE. */
    int (*on_assign)(void *opaque, const kafka_tp_t *tps, const int64_t *committed,
                     size_t tps_count);
    void (*on_revoke)(void *opaque, const kafka_tp_t *tps, size_t tps_count);
    void *opaque;
    int committed_timeout_ms;
} kafka_rebalance_t;

/* What one client needs besides the process's client configuration below.
 * overrides: holdfast's own per-client "name=value" strings, applied last. */
typedef struct {
    const char *bootstrap;        /* e.g. 127.0.0.1:9092 */
    const char *client_id;        /* appears in broker logs */
    const char *const *overrides; /* NULL-terminated, may be NULL */
} kafka_conf_t;

/* ---- the process's client configuration
 *
 * One set of librdkafka properties (security.protocol, sasl.*, ssl.*, tuning)
 * that every handle this module creates gets — task consumers and producers,
 * restore readers, the gateway's view, the tools' clients and the admin calls —
 * after holdfast's defaults and before the settings holdfast controls. Loaded
 * from the properties file at path (NULL or "": none), then the list overrides
 * ("name=value,name=value", NULL or "": none; a name in both takes the list's
 * value). A property holdfast controls (transactional.id, isolation.level,
 * partitioner, ...: kafka_props_reserved_reason) or one librdkafka does not
 * accept fails the load with its name. Call once at start, before any client is
 * made and before threads start; creating a client without it aborts. Logs the
 * names it applies, never the values. */
int kafka_client_config_load(const char *path, const char *overrides, char *errstr,
                             size_t errstr_size) HF_MUST_CHECK;
/* The same from the environment: HOLDFAST_KAFKA_CONFIG (a properties file) and
 * HOLDFAST_KAFKA_OVERRIDES (a list). For hfctl, hfbench and test drivers. */
int kafka_client_config_from_env(char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* ---- group consumer: read_committed, manual offsets, range assignment */

/* The group a consumer joins and how. */
typedef struct {
    const char *group_id;
    /* May be NULL; enables static membership, so a restarted instance takes
     * its partitions back without waiting for a session timeout (classic; under
     * the consumer protocol a member that comes back before its old session
     * ended is refused with UNRELEASED_INSTANCE_ID, a fatal error). */
    const char *instance_id;
    /* false: the classic protocol, the eager range assignor run by a member,
     * and the session settings below set on the client. true: KIP-848's
     * consumer protocol: the broker's range assignor, incremental assignment,
     * and the settings below set on the group itself before joining
     * (IncrementalAlterConfigs of consumer.session.timeout.ms and
     * consumer.heartbeat.interval.ms: the brokers' group.consumer.min.* bounds
     * must allow them). */
    bool consumer_protocol;
    int session_timeout_ms;    /* 0: the default (10000 classic, the broker's otherwise) */
    int heartbeat_interval_ms; /* 0: likewise (1000 classic) */
} kafka_group_t;

int kafka_consumer_new(const kafka_conf_t *conf, const kafka_group_t *group,
                       const char *const *topics, size_t topics_count,
                       const kafka_rebalance_t *rebalance, kafka_consumer_t **kc_out, char *errstr,
                       size_t errstr_size) HF_MUST_CHECK;
/* Whether assignments come as deltas (the consumer protocol): a member is then
 * called back only when its own assignment changes, never for an empty one. */
bool kafka_consumer_incremental(const kafka_consumer_t *kc);
/* Returns 1 with *msg set, 0 on timeout, or an error. */
int kafka_consumer_poll(kafka_consumer_t *kc, int timeout_ms, kafka_msg_t *msg, char *errstr,
                        size_t errstr_size) HF_MUST_CHECK;
/* Seeks every assigned partition back to the group's committed offset (after an
 * aborted transaction). */
int kafka_consumer_rewind(kafka_consumer_t *kc, char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* How many records of each assigned tps[i] the consumer has not read yet, into
 * lags[i]: the partition's high watermark as librdkafka last learned it from a
 * fetch (the last stable offset under read_committed) minus the consumer's
 * position, or next_known[i] (the task's own next offset, may be NULL) when
 * that is further, or the log's start when there is neither (a partition
 * nothing was read from and no offset committed for). -1 when not known
 * (no fetch answered yet). No request
 * is sent: call it from the consumer's thread, as often as once a second. */
void kafka_consumer_lags(kafka_consumer_t *kc, const kafka_tp_t *tps, const int64_t *next_known,
                         size_t count, int64_t *lags);
/* Leaves the group and destroys. Accepts NULL. */
void kafka_consumer_destroy(kafka_consumer_t *kc);

#define KAFKA_INSTANCE_ID_LEN_MAX 160 /* a group.instance.id (holdfast's: the txn id) */

/* The group.instance.id of every current member of the consumer's group
 * (members without one are left out), at most max of them into ids; *count is
 * how many there are in all. Works inside a rebalance callback. */
int kafka_consumer_group_instance_ids(kafka_consumer_t *kc, char (*ids)[KAFKA_INSTANCE_ID_LEN_MAX],
                                      size_t max, size_t *count, int timeout_ms, char *errstr,
                                      size_t errstr_size) HF_MUST_CHECK;

/* ---- producer (transactional when transactional_id != NULL) */

int kafka_producer_new(const kafka_conf_t *conf, const char *transactional_id,
                       int transaction_timeout_ms, kafka_producer_t **kp_out, char *errstr,
                       size_t errstr_size) HF_MUST_CHECK;
void kafka_producer_destroy(kafka_producer_t *kp); /* flushes; accepts NULL */

/* Fences every producer with transactional_id, by initialising one with it
 * and destroying it again: the transaction such a producer left open is
 * aborted by the time this returns, and a zombie holding the id gets fenced
 * errors from then on. */
int kafka_txn_fence(const kafka_conf_t *conf, const char *transactional_id,
                    int transaction_timeout_ms, int timeout_ms, char *errstr,
                    size_t errstr_size) HF_MUST_CHECK;

/* Fences older producers with the same transactional.id. */
int kafka_txn_init(kafka_producer_t *kp, int timeout_ms, char *errstr,
                   size_t errstr_size) HF_MUST_CHECK;
int kafka_txn_begin(kafka_producer_t *kp, char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* offsets: next offset to read per topic-partition (last processed + 1). */
int kafka_txn_send_offsets(kafka_producer_t *kp, kafka_consumer_t *kc, const kafka_tp_t *tps,
                           const int64_t *next_offsets, size_t count, char *errstr,
                           size_t errstr_size) HF_MUST_CHECK;
/* HF_OK: committed. HF_ERR_ABORTABLE: not committed, abort. HF_ERR_FATAL: fenced.
 * Anything else (retries exhausted): the outcome is unknown; the caller must
 * not go on as if either (a task exits, and its restart restores). */
int kafka_txn_commit(kafka_producer_t *kp, char *errstr, size_t errstr_size) HF_MUST_CHECK;
int kafka_txn_abort(kafka_producer_t *kp, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Queues one record; partition < 0 = by key with murmur2_random. When
 * offset_out != NULL the delivered offset is stored there once delivered (before
 * kafka_txn_commit / kafka_producer_flush return). Blocks while the local queue
 * is full. headers may be NULL. Copies key and value. */
int kafka_produce(kafka_producer_t *kp, const char *topic, int32_t partition, const void *key,
                  size_t key_len, const void *value, size_t value_len,
                  const kafka_header_t *headers, size_t headers_count, int64_t *offset_out,
                  char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Waits for every queued record (non-transactional producers). */
int kafka_producer_flush(kafka_producer_t *kp, int timeout_ms, char *errstr,
                         size_t errstr_size) HF_MUST_CHECK;
/* Serves delivery reports without waiting: a non-transactional producer that
 * never flushes (a long-running client) calls it regularly, or librdkafka keeps
 * every delivered message until its report is served. */
void kafka_producer_poll(kafka_producer_t *kp);
/* Delivery failures seen since creation. */
uint64_t kafka_producer_failed_count(const kafka_producer_t *kp);

/* ---- partition reader: assign-based, no group, read_committed */

int kafka_reader_new(const kafka_conf_t *conf, kafka_reader_t **rd_out, char *errstr,
                     size_t errstr_size) HF_MUST_CHECK;
void kafka_reader_destroy(kafka_reader_t *rd); /* accepts NULL */

typedef int (*kafka_record_fn)(void *opaque, const kafka_msg_t *msg);

/* Reads topic/partition from start_offset (or KAFKA_OFFSET_BEGINNING) up to the
 * high watermark as of the call, calling fn per committed record (read_committed:
 * a transaction still open there is waited for, its records delivered if it
 * commits, skipped if it aborts); a non-OK fn return stops and is returned;
 * HF_ERR_TIMEOUT after timeout_ms without progress (a transaction that stays
 * open that long). *next_offset_out = the offset after the last record or
 * control marker read. */
int kafka_reader_read_to_end(kafka_reader_t *rd, const char *topic, int32_t partition,
                             int64_t start_offset, int timeout_ms, kafka_record_fn fn, void *opaque,
                             int64_t *next_offset_out, char *errstr,
                             size_t errstr_size) HF_MUST_CHECK;

/* Follows every partition of topic from its beginning (read_committed). */
int kafka_reader_follow(kafka_reader_t *rd, const char *topic, int timeout_ms,
                        int32_t *partitions_out, char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* The same, from start_offsets[p] for each partition p < start_offsets_count
 * whose offset is >= 0 or KAFKA_OFFSET_END (the beginning for the others): a
 * follower that stores how far it read resumes there, one that only wants what
 * comes after now starts at the end. */
int kafka_reader_follow_from(kafka_reader_t *rd, const char *topic, const int64_t *start_offsets,
                             int32_t start_offsets_count, int timeout_ms, int32_t *partitions_out,
                             char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Follows exactly partitions[i] of topic from offsets[i] (>= 0, or
 * KAFKA_OFFSET_BEGINNING), replacing what the reader followed before; count 0
 * follows nothing. A standby follows the changelog partitions its process does
 * not own, and re-assigns whenever that set changes. */
int kafka_reader_assign(kafka_reader_t *rd, const char *topic, const int32_t *partitions,
                        const int64_t *offsets, size_t count, char *errstr,
                        size_t errstr_size) HF_MUST_CHECK;
/* The high watermark of topic/partition as the reader last learned it from a
 * fetch (no request; -1 when not known yet): a follower's lag is it minus its
 * position. */
int64_t kafka_reader_high_watermark(kafka_reader_t *rd, const char *topic, int32_t partition);
/* While following: 1 with *msg set (release it), 2 when a partition's end was
 * reached (msg->partition says which and msg->offset the position there, the
 * last stable offset under read_committed; nothing to release), 0 when nothing
 * came in timeout_ms, or an error. */
int kafka_reader_poll(kafka_reader_t *rd, int timeout_ms, kafka_msg_t *msg, char *errstr,
                      size_t errstr_size) HF_MUST_CHECK;
/* True when the broker answers a watermark query for topic/partition: the reader
 * is connected and its end-of-partition events can be trusted. */
bool kafka_reader_broker_alive(kafka_reader_t *rd, const char *topic, int32_t partition,
                               int timeout_ms);

/* Partition count of a topic, or an error if it does not exist. */
int kafka_partition_count(kafka_reader_t *rd, const char *topic, int timeout_ms, int32_t *count_out,
                          char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* The partition Java clients and librdkafka's murmur2_random pick for a key. */
int32_t kafka_partition_for_key(const void *key, size_t key_len, int32_t partition_count);

/* The version of the librdkafka this process runs with ("2.0.2"); static text. */
const char *kafka_version_str(void);

/* ---- topic administration */

typedef struct {
    const char *name;
    int32_t partitions;
    int16_t replication_factor;
    const char *const *configs; /* NULL-terminated "key=value", may be NULL */
} kafka_topic_spec_t;

/* Deletes every topic whose name starts with prefix (non-empty); *deleted is
 * how many the broker accepted. For tests and benchmarks that own a prefix. */
int kafka_topics_delete_prefix(const kafka_conf_t *conf, const char *prefix, size_t *deleted,
                               char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Creates each topic that is missing. Existing topics are left as they are and
 * their partition count is written to existing_partitions[i] (0 when created). */
int kafka_topics_ensure(const kafka_conf_t *conf, const kafka_topic_spec_t *specs, size_t count,
                        int32_t *existing_partitions, char *errstr,
                        size_t errstr_size) HF_MUST_CHECK;

#endif
