/* Integration-test harness: each test gets its own topic prefix and app id on the
 * real local broker, creates its topics from topics/topics.json, runs the real
 * `holdfast` binary as a child process (so it can be kill -9'd), produces records
 * and reads topics back with read_committed. */
#ifndef HF_HARNESS_H
#define HF_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kafka.h"
#include "records.h"
#include "topics.h"

typedef struct {
    char name[64];   /* test name, part of the prefix */
    char prefix[48]; /* "it<pid>-<name>." */
    char bootstrap[128];
    char workdir[256]; /* state dirs and logs */
    char holdfast_bin[256];
    kafka_conf_t kconf;
    kafka_producer_t *kp; /* plain idempotent producer */
} harness_t;

/* Sets up topics and a producer; fails the test (cmocka) on error. */
void harness_init(harness_t *h, const char *name);
void harness_cleanup(harness_t *h);

/* Starts `holdfast run` with this harness's prefix; extra_args may be NULL.
 * Logs go to <workdir>/<instance>.log. */
pid_t harness_start(harness_t *h, const char *instance, const char *stages);
/* The same with a JSON config object (written to <workdir>/<instance>.json and
 * passed as --config), e.g. "{\"signal_dwell_ms\": 1000}". */
pid_t harness_start_with(harness_t *h, const char *instance, const char *stages,
                         const char *config_json);
/* SIGTERM and wait; returns the exit status. */
int harness_stop(pid_t pid);
void harness_kill9(pid_t pid);

/* Encodes and queues rec to topic with key; call harness_flush after a burst. */
void harness_send(harness_t *h, hf_topic_id_t topic, const char *key, const hf_record_t *rec);
void harness_send_raw(harness_t *h, hf_topic_id_t topic, const char *key, const void *val,
                      size_t len);
void harness_flush(harness_t *h);
/* The same to an explicit partition, as a producer with another partitioner
 * than murmur2 would (the processor must refuse what it was not keyed to). */
/* The partition count of topic (fails the test when it cannot be read). */
int32_t harness_partitions(harness_t *h, hf_topic_id_t topic);
void harness_send_to_partition(harness_t *h, hf_topic_id_t topic, int32_t partition,
                               const char *key, const hf_record_t *rec);

/* Calls fn(opaque, msg) for every committed record of topic (all partitions, from
 * the beginning). Returns the number of records. */
typedef void (*harness_record_fn)(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec);
size_t harness_read(harness_t *h, hf_topic_id_t topic, harness_record_fn fn, void *opaque);
/* Polls harness_read until at least n records are there or timeout_ms passes;
 * returns the last count. */
size_t harness_wait_count(harness_t *h, hf_topic_id_t topic, size_t n, int timeout_ms);

/* The committed counter of a pair from the changelog (zeros if never written). */
bool harness_counter(harness_t *h, const char *wh, const char *sku, hf_counter_state_t *out);

/* Runs the tool (hfctl, hfbench) beside HOLDFAST_BIN with this harness's topic
 * prefix and bootstrap: `<tool> <args>` through the shell, its stdout in out.
 * Returns the exit status, -1 when it died by a signal, and -2 when there is no
 * such tool to run (the caller says what to build). */
int harness_run_tool(const harness_t *h, const char *tool, const char *args, char *out,
                     size_t out_size);

int64_t harness_now_ms(void);
/* An integer or string from the environment, def when unset or empty. */
long harness_env_int(const char *name, long def);
const char *harness_env_str(const char *name, const char *def);
void harness_sleep_ms(int ms);

/* Record builders. */
hf_record_t harness_hold(const char *rid, int32_t attempt, const char *wh, const char *sku,
                         int64_t qty);
hf_record_t harness_commit_hold(const char *rid, int32_t attempt, const char *wh, const char *sku);
hf_record_t harness_release_hold(const char *rid, int32_t attempt, const char *wh, const char *sku);
hf_record_t harness_feed(const char *wh, const char *sku, hf_feed_kind_t kind, int64_t qty,
                         int64_t seq);
/* Checkout requests (holdfast.requests). A reserve of qty units of one SKU
 * shipped to New York, its idempotency key "k-<rid>", ttl_ms 0 for the default. */
hf_record_t harness_reserve_req(const char *rid, const char *sku, int64_t qty, int64_t ttl_ms);
hf_record_t harness_commit_req(const char *rid, const char *idempotency_key, const char *payment);
hf_record_t harness_release_req(const char *rid, const char *idempotency_key);
/* "wh|sku" into out (size >= 128). */
const char *harness_pair(char *out, const char *wh, const char *sku);

#endif
