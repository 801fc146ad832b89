/* The holdfast client library (see client.h): a plain idempotent producer for
 * requests and a partition follower on the replies topic. Replies are matched
 * by reservation_id and idempotency key, never by arrival order. */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "codec.h"
#include "hf_assert.h"
#include "hf_clock.h"
#include "kafka.h"
#include "topics.h"
#include "trace.h"

/* First pause before re-sending a request answered BUSY; doubles per attempt. */
#define CLIENT_BUSY_BACKOFF_MS 50

/* Partitions of the replies topic the client can follow. */
#define CLIENT_PARTITIONS_MAX 256
/* How long client_new may take to skip the replies already in the topic. */
#define CLIENT_DRAIN_MS_MAX   30000

struct hf_client {
    kafka_conf_t kconf;
    char bootstrap[256];
    char replies[HF_TOPIC_LEN_MAX + 1];
    kafka_producer_t *kp;
    kafka_reader_t *rd;
    int32_t partitions;
    char partitioner[64];     /* "partitioner=NAME" for the producer; "" = holdfast's */
    const char *overrides[2]; /* the producer's: partitioner, NULL */
    uint8_t buf[HF_RECORD_LEN_MAX];
};

const char *client_request_id(const hf_record_t *req, const char **idempotency_key)
{
    switch (req->type) {
    case HF_REC_RESERVE:
        *idempotency_key = req->u.reserve.idempotency_key;
        return req->u.reserve.reservation_id;
    case HF_REC_COMMIT:
        *idempotency_key = req->u.commit.idempotency_key;
        return req->u.commit.reservation_id;
    case HF_REC_RELEASE:
        *idempotency_key = req->u.release.idempotency_key;
        return req->u.release.reservation_id;
    case HF_REC_EXTEND:
        *idempotency_key = req->u.extend.idempotency_key;
        return req->u.extend.reservation_id;
    case HF_REC_PAYMENT_EVENT:
        *idempotency_key = req->u.payment_event.idempotency_key;
        return req->u.payment_event.reservation_id;
    default:
        return NULL;
    }
}

/* Reads until every partition reported its end once (what was there before). */
static int drain(hf_client_t *c, char *errstr, size_t errstr_size)
{
    bool at_end[CLIENT_PARTITIONS_MAX] = {false};
    int32_t ends = 0;
    int64_t deadline = hf_mono_ms() + CLIENT_DRAIN_MS_MAX;
    while (ends < c->partitions) {
        if (hf_mono_ms() > deadline) {
            snprintf(errstr, errstr_size, "replies topic %s: not at its end after %d ms",
                     c->replies, CLIENT_DRAIN_MS_MAX);
            return HF_ERR_TIMEOUT;
        }
        kafka_msg_t m;
        int rc = kafka_reader_poll(c->rd, 200, &m, errstr, errstr_size);
        if (rc < 0)
            return rc;
        if (rc == 1)
            kafka_msg_release(&m);
        if (rc == 2 && m.partition >= 0 && m.partition < c->partitions && !at_end[m.partition]) {
            at_end[m.partition] = true;
            ends++;
        }
    }
    return HF_OK;
}

int client_new(const char *bootstrap, const char *replies_topic, hf_client_t **out, char *errstr,
               size_t errstr_size)
{
    return client_new_partitioned(bootstrap, replies_topic, NULL, out, errstr, errstr_size);
}

int client_new_partitioned(const char *bootstrap, const char *replies_topic,
                           const char *partitioner, hf_client_t **out, char *errstr,
                           size_t errstr_size)
{
    hf_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return HF_ERR_NOMEM;
    snprintf(c->bootstrap, sizeof c->bootstrap, "%s", bootstrap);
    snprintf(c->replies, sizeof c->replies, "%s",
             replies_topic && replies_topic[0] ? replies_topic : topic_name(HF_T_REPLIES));
    c->kconf = (kafka_conf_t){c->bootstrap, "holdfast-client", NULL};
    kafka_conf_t pconf = c->kconf;
    if (partitioner && partitioner[0]) {
        snprintf(c->partitioner, sizeof c->partitioner, "partitioner=%s", partitioner);
        c->overrides[0] = c->partitioner;
        pconf.overrides = c->overrides;
    }
    int err = codec_init(errstr, errstr_size);
    if (!err)
        err = kafka_producer_new(&pconf, NULL, 0, &c->kp, errstr, errstr_size);
    if (!err)
        err = kafka_reader_new(&c->kconf, &c->rd, errstr, errstr_size);
    if (!err)
        err = kafka_reader_follow(c->rd, c->replies, 10000, &c->partitions, errstr, errstr_size);
    if (!err && c->partitions > CLIENT_PARTITIONS_MAX)
        err = HF_ERR_LIMIT;
    if (!err)
        err = drain(c, errstr, errstr_size);
    if (err) {
        client_destroy(c);
        return err;
    }
    *out = c;
    return HF_OK;
}

void client_destroy(hf_client_t *c)
{
    if (!c)
        return;
    kafka_reader_destroy(c->rd);
    kafka_producer_destroy(c->kp);
    free(c);
}

int client_send_async_traced(hf_client_t *c, const hf_record_t *req, const char *traceparent,
                             char *errstr, size_t errstr_size)
{
    const char *ikey = NULL;
    const char *rid = client_request_id(req, &ikey);
    if (!rid) {
        snprintf(errstr, errstr_size, "a %s is not a request", hf_rec_type_name(req->type));
        return HF_ERR_INVAL;
    }
    size_t len = 0;
    int err = codec_encode(req, c->buf, sizeof c->buf, &len, errstr, errstr_size);
    if (err)
        return err;
    kafka_header_t tp = {TRACE_HEADER_NAME, traceparent};
    bool traced = traceparent && traceparent[0];
    return kafka_produce(c->kp, topic_name(HF_T_REQUESTS), -1, rid, strlen(rid), c->buf, len,
                         traced ? &tp : NULL, traced ? 1 : 0, NULL, errstr, errstr_size);
}

int client_send_async(hf_client_t *c, const hf_record_t *req, char *errstr, size_t errstr_size)
{
    return client_send_async_traced(c, req, NULL, errstr, errstr_size);
}

int client_flush(hf_client_t *c, int timeout_ms, char *errstr, size_t errstr_size)
{
    return kafka_producer_flush(c->kp, timeout_ms, errstr, errstr_size);
}

static int client_send_traced(hf_client_t *c, const hf_record_t *req, const char *traceparent,
                              char *errstr, size_t errstr_size)
{
    int err = client_send_async_traced(c, req, traceparent, errstr, errstr_size);
    return err ? err : client_flush(c, 10000, errstr, errstr_size);
}

int client_send(hf_client_t *c, const hf_record_t *req, char *errstr, size_t errstr_size)
{
    return client_send_traced(c, req, NULL, errstr, errstr_size);
}

int client_poll(hf_client_t *c, int timeout_ms, hf_reply_t *out, char *errstr, size_t errstr_size)
{
    int64_t deadline = hf_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - hf_mono_ms();
        kafka_msg_t m;
        int rc = kafka_reader_poll(c->rd, left > 0 ? (int)left : 0, &m, errstr, errstr_size);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            hf_record_t rec;
            char derr[256];
            bool ok = m.value &&
                      codec_decode(m.value, m.value_len, &rec, derr, sizeof derr) == HF_OK &&
                      rec.type == HF_REC_REPLY;
            kafka_msg_release(&m);
            if (ok) {
                *out = rec.u.reply;
                return 1;
            }
        }
        if (rc == 0 || hf_mono_ms() >= deadline)
            return 0;
    }
}

/* The request's sent_at_ms, stamped at each send so that the gateway can tell
 * how long it waited (load shedding). */
static int64_t *client_sent_at(hf_record_t *req)
{
    switch (req->type) {
    case HF_REC_RESERVE:
        return &req->u.reserve.sent_at_ms;
    case HF_REC_COMMIT:
        return &req->u.commit.sent_at_ms;
    case HF_REC_RELEASE:
        return &req->u.release.sent_at_ms;
    case HF_REC_PAYMENT_EVENT:
        return &req->u.payment_event.sent_at_ms;
    default:
        hf_assert(req->type == HF_REC_EXTEND);
        return &req->u.extend.sent_at_ms;
    }
}

int client_call(hf_client_t *c, const hf_record_t *req, int attempt_timeout_ms, int attempts_max,
                hf_reply_t *out, char *errstr, size_t errstr_size)
{
    return client_call_traced(c, req, NULL, attempt_timeout_ms, attempts_max, out, errstr,
                              errstr_size);
}

int client_call_traced(hf_client_t *c, const hf_record_t *req, const char *traceparent,
                       int attempt_timeout_ms, int attempts_max, hf_reply_t *out, char *errstr,
                       size_t errstr_size)
{
    const char *ikey = NULL;
    const char *rid = client_request_id(req, &ikey);
    if (!rid) {
        snprintf(errstr, errstr_size, "not a request");
        return HF_ERR_INVAL;
    }
    static _Thread_local hf_record_t sent; /* large: holds an hf_record_t */
    sent = *req;
    int64_t *sent_at_ms = client_sent_at(&sent);
    bool busy = false;
    for (int attempt = 0; attempt < attempts_max; attempt++) {
        if (busy) /* the gateway sheds load: back off before the same request again */
            hf_sleep_ms(CLIENT_BUSY_BACKOFF_MS << (attempt - 1 < 5 ? attempt - 1 : 5));
        busy = false;
        *sent_at_ms = hf_wall_ms(); /* not part of the request's hash */
        int err = client_send_traced(c, &sent, traceparent, errstr, errstr_size);
        if (err)
            return err;
        int64_t deadline = hf_mono_ms() + attempt_timeout_ms;
        for (int64_t left = attempt_timeout_ms; left > 0 && !busy; left = deadline - hf_mono_ms()) {
            int rc = client_poll(c, (int)left, out, errstr, errstr_size);
            if (rc < 0)
                return rc;
            if (rc == 1 && strcmp(out->reservation_id, rid) == 0 &&
                strcmp(out->idempotency_key, ikey) == 0) {
                if (out->outcome != HF_REPLY_BUSY)
                    return HF_OK;
                busy = true;
            }
        }
    }
    if (busy)
        return HF_OK; /* the last answer was BUSY: the caller sees it */
    snprintf(errstr, errstr_size, "no reply for %s after %d attempts of %d ms", rid, attempts_max,
             attempt_timeout_ms);
    return HF_ERR_TIMEOUT;
}

char *client_reply_json(const hf_reply_t *r)
{
    json_t *allocs = json_array();
    for (int32_t i = 0; i < r->allocations_count; i++)
        json_array_append_new(allocs, json_pack("{s:s,s:s,s:I}", "warehouse_id",
                                                r->allocations[i].warehouse_id, "sku",
                                                r->allocations[i].sku, "qty",
                                                (json_int_t)r->allocations[i].qty));
    json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:I,s:s,s:I}", "reservation_id", r->reservation_id,
                          "idempotency_key", r->idempotency_key, "outcome",
                          hf_reply_outcome_name(r->outcome), "allocations", allocs, "expires_at_ms",
                          (json_int_t)r->expires_at_ms, "message", r->message, "replied_at_ms",
                          (json_int_t)r->replied_at_ms);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}
