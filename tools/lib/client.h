/* A small holdfast client: sends checkout requests (Reserve, Commit, Release,
 * Extend) to holdfast.requests keyed by reservation_id and reads the answers from
 * the replies topic (read_committed). client_call sends one request and waits
 * for its reply, re-sending the very same request (same idempotency key, so the
 * gateway answers a retry with its first answer) when an attempt times out.
 * Lower level, client_send + client_poll let one thread keep many requests in
 * flight. Used by hfctl, the integration tests and the load generator.
 * Not thread-safe: one client per thread. */
#ifndef HF_CLIENT_H
#define HF_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "records.h"

typedef struct hf_client hf_client_t;

/* Connects to bootstrap and follows the replies topic (topic_name(HF_T_REPLIES)
 * unless replies_topic is given), skipping what it already holds, so only
 * replies produced after this call are seen. */
int client_new(const char *bootstrap, const char *replies_topic, hf_client_t **out, char *errstr,
               size_t errstr_size) HF_MUST_CHECK;
/* The same with librdkafka's partitioner property for the requests (NULL:
 * murmur2_random, the one to use). Another one puts a request on a partition
 * its key does not hash to, as a checkout service on librdkafka's default
 * (consistent_random) would: holdfast forwards it (docs/SECURITY.md). */
int client_new_partitioned(const char *bootstrap, const char *replies_topic,
                           const char *partitioner, hf_client_t **out, char *errstr,
                           size_t errstr_size) HF_MUST_CHECK;
void client_destroy(hf_client_t *c); /* accepts NULL */

/* Queues req (its type decides the reservation_id used as key) and flushes. */
int client_send(hf_client_t *c, const hf_record_t *req, char *errstr,
                size_t errstr_size) HF_MUST_CHECK;
/* Queues without flushing; client_flush sends a burst. */
int client_send_async(hf_client_t *c, const hf_record_t *req, char *errstr,
                      size_t errstr_size) HF_MUST_CHECK;
/* The same with a W3C traceparent header (common/trace.h) on the request
 * record; NULL or "": none. The value goes out as given, so a test can see how
 * holdfast treats a malformed one (it answers, and propagates only a valid
 * one); hfctl checks the value first. */
int client_send_async_traced(hf_client_t *c, const hf_record_t *req, const char *traceparent,
                             char *errstr, size_t errstr_size) HF_MUST_CHECK;
int client_flush(hf_client_t *c, int timeout_ms, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Waits up to timeout_ms for one reply. 1 = *out set, 0 = none came, < 0 error.
 * Records that are not replies are skipped. */
int client_poll(hf_client_t *c, int timeout_ms, hf_reply_t *out, char *errstr,
                size_t errstr_size) HF_MUST_CHECK;

/* Sends req and waits for the reply with its reservation_id and idempotency key;
 * up to attempts_max sends, attempt_timeout_ms each. HF_ERR_TIMEOUT if none came.
 * Replies to other requests that arrive meanwhile are dropped. A BUSY answer (the
 * gateway sheds load) is followed by the same request again after a growing pause
 * while attempts remain; the last BUSY is returned as the reply. */
int client_call(hf_client_t *c, const hf_record_t *req, int attempt_timeout_ms, int attempts_max,
                hf_reply_t *out, char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* client_call with traceparent on every attempt (one span of the caller: a
 * re-send is the same request). NULL or "": none, as client_call. */
int client_call_traced(hf_client_t *c, const hf_record_t *req, const char *traceparent,
                       int attempt_timeout_ms, int attempts_max, hf_reply_t *out, char *errstr,
                       size_t errstr_size) HF_MUST_CHECK;

/* The reservation_id and idempotency key of a request record (NULL if not one). */
const char *client_request_id(const hf_record_t *req, const char **idempotency_key);

/* One line of JSON for a reply; the caller frees it. */
char *client_reply_json(const hf_reply_t *r);

#endif
