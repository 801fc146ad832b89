/* The HTTP front's way into the pipeline: many HTTP requests in flight share
 * one Kafka producer (requests to holdfast.requests, keyed by reservation_id)
 * and one reader of the process's own reply topic (a background thread). Each
 * call waits for the Reply that carries its reservation_id and idempotency key;
 * replies are matched by those, never by order. A call that finds the same key
 * already waiting for the same request (same type and gateway request hash)
 * joins it (a webhook retried while its first delivery is in flight gets the
 * same answer without a second send); a different request with that key is
 * refused at once (HTTP_BRIDGE_CONFLICT), as the gateway would. Bounded: at most
 * inflight_max distinct keys wait at once; one more is refused at once
 * (HTTP_BRIDGE_FULL, the front answers 503). */
#ifndef HF_HTTP_BRIDGE_H
#define HF_HTTP_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "kafka.h"
#include "records.h"

typedef struct http_bridge http_bridge_t;

typedef struct {
    const kafka_conf_t *kconf;
    const char *reply_topic; /* created (1 partition) if missing */
    int inflight_max;        /* distinct requests waiting at once */
    int reply_retention_ms;  /* the reply topic's retention.ms when created */
} http_bridge_opts_t;

/* Creates the reply topic if missing, starts the reader at the topic's end
 * (what it holds answers a previous process) and waits until it is there. */
int http_bridge_new(const http_bridge_opts_t *o, http_bridge_t **out, char *errstr,
                    size_t errstr_size) HF_MUST_CHECK;
void http_bridge_destroy(http_bridge_t *b); /* accepts NULL */

typedef enum {
    HTTP_BRIDGE_ANSWERED, /* *out is the Reply */
    HTTP_BRIDGE_TIMEOUT,  /* no reply within timeout_ms: a retry with the same key is safe */
    HTTP_BRIDGE_FULL,     /* inflight_max requests already wait: nothing was sent */
    HTTP_BRIDGE_FAILED,   /* the request could not be produced (errstr) */
    HTTP_BRIDGE_CONFLICT, /* a different request with the same key waits: nothing was sent */
} http_bridge_result_t;

/* Sends req (a Reserve, Commit, Release or Extend: its reply_to and sent_at_ms
 * are set here) with a traceparent header when traceparent is non-NULL, and
 * waits up to timeout_ms for its Reply. Thread-safe. */
http_bridge_result_t http_bridge_call(http_bridge_t *b, hf_record_t *req, const char *traceparent,
                                      int timeout_ms, hf_reply_t *out, char *errstr,
                                      size_t errstr_size);

/* Requests waiting now; replies that matched no waiter (answers that came
 * after their caller gave up, or to another process's requests). */
int http_bridge_inflight(http_bridge_t *b);
uint64_t http_bridge_unmatched(http_bridge_t *b);
/* True once the producer failed for good (librdkafka's fatal idempotence
 * errors): nothing more can be sent; the process should exit and be restarted. */
bool http_bridge_broken(http_bridge_t *b);

#endif
