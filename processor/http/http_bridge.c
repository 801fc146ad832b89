/* http_bridge.h: a pool of waiting slots (chained hash on reservation_id +
 * idempotency key, one condition variable each, so a reply wakes only its
 * callers), one producer, one reply-reader thread. */
#include "http_bridge.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "gateway/gateway.h"
#include "hf_assert.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "lib/client.h"
#include "log.h"
#include "topics.h"

/* How long http_bridge_new may take to position its reader at the topic's end. */
#define BRIDGE_DRAIN_MS_MAX 30000
#define BRIDGE_POLL_MS      100
#define BRIDGE_METADATA_MS  10000 /* the reply topic's metadata */

typedef struct {
    hf_id_t rid, ikey;
    hf_rec_type_t type; /* the request waited for, and its gateway request hash: */
    int64_t hash;       /* a different request with the same key may not join */
    int next;           /* chain in the bucket, or in the free list; -1 ends */
    int bucket;         /* its bucket while linked, else -1 */
    int waiters;
    bool done, failed;
    hf_reply_t reply;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
} slot_t;

struct http_bridge {
    kafka_producer_t *kp;
    kafka_reader_t *rd;
    char reply_topic[HF_TOPIC_LEN_MAX + 1];
    pthread_t reader;
    atomic_bool stop;
    atomic_bool drained;
    atomic_bool broken; /* the producer failed for good (a fatal idempotence error) */
    bool reader_started;
    pthread_mutex_t mu;
    slot_t *slots;
    int *buckets;
    int buckets_count, slots_count, free_head, inflight;
    _Atomic uint64_t unmatched;
};

static uint32_t key_hash(const char *rid, const char *ikey)
{
    uint32_t h = 2166136261u; /* FNV-1a over rid, a separator, ikey */
    for (const char *p = rid; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ 0xffu) * 16777619u;
    for (const char *p = ikey; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h;
}

/* The slot waiting for (rid, ikey), or -1. Called with mu held. */
static int slot_find(const http_bridge_t *b, const char *rid, const char *ikey, int *bucket_out)
{
    int bucket = (int)(key_hash(rid, ikey) % (uint32_t)b->buckets_count);
    *bucket_out = bucket;
    for (int i = b->buckets[bucket]; i >= 0; i = b->slots[i].next)
        if (strcmp(b->slots[i].rid, rid) == 0 && strcmp(b->slots[i].ikey, ikey) == 0)
            return i;
    return -1;
}

/* Takes a slot out of its bucket (no new caller finds it); called with mu held. */
static void slot_unlink(http_bridge_t *b, int idx)
{
    slot_t *s = &b->slots[idx];
    if (s->bucket < 0)
        return;
    int *link = &b->buckets[s->bucket];
    while (*link != idx) {
        hf_assert(*link >= 0);
        link = &b->slots[*link].next;
    }
    *link = s->next;
    s->bucket = -1;
}

/* The last waiter leaves: the slot goes back to the free list; mu held. */
static void slot_release(http_bridge_t *b, int idx)
{
    slot_unlink(b, idx);
    b->slots[idx].next = b->free_head;
    b->free_head = idx;
    b->inflight--;
}

static void on_reply(http_bridge_t *b, const kafka_msg_t *m)
{
    static _Thread_local hf_record_t rec; /* large; this thread only */
    char derr[256];
    if (!m->value || codec_decode(m->value, m->value_len, &rec, derr, sizeof derr) != HF_OK ||
        rec.type != HF_REC_REPLY) {
        atomic_fetch_add(&b->unmatched, 1);
        return;
    }
    const hf_reply_t *r = &rec.u.reply;
    pthread_mutex_lock(&b->mu);
    int bucket;
    int idx = slot_find(b, r->reservation_id, r->idempotency_key, &bucket);
    if (idx >= 0 && !b->slots[idx].done) {
        b->slots[idx].reply = *r;
        b->slots[idx].done = true;
        pthread_cond_broadcast(&b->slots[idx].cv);
    } else {
        atomic_fetch_add(&b->unmatched, 1);
    }
    pthread_mutex_unlock(&b->mu);
}

static void *reader_main(void *arg)
{
    http_bridge_t *b = arg;
    int32_t partitions = 0, at_end = 0;
    char errstr[256];
    if (kafka_partition_count(b->rd, b->reply_topic, BRIDGE_METADATA_MS, &partitions, errstr,
                              sizeof errstr))
        partitions = 1;
    bool seen_end[HF_PARTITIONS_MAX] = {false};
    while (!atomic_load(&b->stop)) {
        kafka_producer_poll(b->kp); /* delivery reports: librdkafka frees the sent records */
        kafka_msg_t m;
        int rc = kafka_reader_poll(b->rd, BRIDGE_POLL_MS, &m, errstr, sizeof errstr);
        if (rc < 0) {
            log_warn("http", "reply topic %s: %s (still reading)", b->reply_topic, errstr);
            hf_sleep_ms(BRIDGE_POLL_MS);
            continue;
        }
        if (rc == 2 && m.partition >= 0 && m.partition < HF_PARTITIONS_MAX &&
            !seen_end[m.partition]) {
            seen_end[m.partition] = true;
            if (++at_end >= partitions)
                atomic_store(&b->drained, true);
        }
        if (rc != 1)
            continue;
        on_reply(b, &m);
        kafka_msg_release(&m);
    }
    return NULL;
}

int http_bridge_new(const http_bridge_opts_t *o, http_bridge_t **out, char *errstr,
                    size_t errstr_size)
{
    hf_assert(o->inflight_max > 0);
    http_bridge_t *b = calloc(1, sizeof *b);
    if (!b)
        return HF_ERR_NOMEM;
    pthread_mutex_init(&b->mu, NULL);
    snprintf(b->reply_topic, sizeof b->reply_topic, "%s", o->reply_topic);
    b->slots_count = o->inflight_max;
    b->buckets_count = 2 * o->inflight_max;
    b->slots = calloc((size_t)b->slots_count, sizeof *b->slots);
    b->buckets = malloc((size_t)b->buckets_count * sizeof *b->buckets);
    if (!b->slots || !b->buckets) {
        http_bridge_destroy(b);
        return HF_ERR_NOMEM;
    }
    for (int i = 0; i < b->buckets_count; i++)
        b->buckets[i] = -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* a clock step must not stretch a wait */
    for (int i = 0; i < b->slots_count; i++) {
        pthread_cond_init(&b->slots[i].cv, &ca);
        b->slots[i].next = i + 1 < b->slots_count ? i + 1 : -1;
        b->slots[i].bucket = -1;
    }
    pthread_condattr_destroy(&ca);
    b->free_head = 0;

    char retention[48];
    snprintf(retention, sizeof retention, "retention.ms=%d", o->reply_retention_ms);
    const char *const configs[] = {"cleanup.policy=delete", retention, NULL};
    kafka_topic_spec_t spec = {b->reply_topic, 1, -1, configs};
    int32_t existing = 0;
    int err = kafka_topics_ensure(o->kconf, &spec, 1, &existing, errstr, errstr_size);
    if (!err)
        err = kafka_producer_new(o->kconf, NULL, 0, &b->kp, errstr, errstr_size);
    if (!err)
        err = kafka_reader_new(o->kconf, &b->rd, errstr, errstr_size);
    /* From the end: what the topic holds answers a previous process's requests. */
    static const int64_t at_end[HF_PARTITIONS_MAX] = {[0 ... HF_PARTITIONS_MAX - 1] =
                                                          KAFKA_OFFSET_END};
    int32_t partitions = 0;
    if (!err)
        err = kafka_reader_follow_from(b->rd, b->reply_topic, at_end, HF_PARTITIONS_MAX,
                                       BRIDGE_METADATA_MS, &partitions, errstr, errstr_size);
    if (!err && partitions > HF_PARTITIONS_MAX) {
        snprintf(errstr, errstr_size, "reply topic %s has %d partitions, at most %d are read",
                 b->reply_topic, partitions, HF_PARTITIONS_MAX);
        err = HF_ERR_LIMIT;
    }
    if (!err && pthread_create(&b->reader, NULL, reader_main, b) != 0) {
        snprintf(errstr, errstr_size,
                 "cannot start the reply reader thread (out of threads? check ulimit -u)");
        err = HF_ERR_IO;
    }
    if (!err) {
        b->reader_started = true;
        int64_t deadline = hf_mono_ms() + BRIDGE_DRAIN_MS_MAX;
        while (!atomic_load(&b->drained) && hf_mono_ms() < deadline)
            hf_sleep_ms(20);
        if (!atomic_load(&b->drained)) {
            snprintf(errstr, errstr_size,
                     "reply topic %s: its end not reached in %d ms; check that the broker at "
                     "bootstrap answers and that this client may read the topic",
                     b->reply_topic, BRIDGE_DRAIN_MS_MAX);
            err = HF_ERR_TIMEOUT;
        }
    }
    if (err) {
        http_bridge_destroy(b);
        return err;
    }
    *out = b;
    return HF_OK;
}

void http_bridge_destroy(http_bridge_t *b)
{
    if (!b)
        return;
    atomic_store(&b->stop, true);
    if (b->reader_started)
        pthread_join(b->reader, NULL);
    kafka_reader_destroy(b->rd);
    kafka_producer_destroy(b->kp);
    if (b->slots)
        for (int i = 0; i < b->slots_count; i++)
            pthread_cond_destroy(&b->slots[i].cv);
    free(b->slots);
    free(b->buckets);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* The reply_to and sent_at_ms of a request record. */
static void stamp(hf_record_t *req, const char *reply_topic)
{
    int64_t now_ms = hf_wall_ms();
    switch (req->type) {
    case HF_REC_RESERVE:
        snprintf(req->u.reserve.reply_to, sizeof req->u.reserve.reply_to, "%s", reply_topic);
        req->u.reserve.sent_at_ms = now_ms;
        break;
    case HF_REC_COMMIT:
        snprintf(req->u.commit.reply_to, sizeof req->u.commit.reply_to, "%s", reply_topic);
        req->u.commit.sent_at_ms = now_ms;
        break;
    case HF_REC_RELEASE:
        snprintf(req->u.release.reply_to, sizeof req->u.release.reply_to, "%s", reply_topic);
        req->u.release.sent_at_ms = now_ms;
        break;
    case HF_REC_PAYMENT_EVENT:
        snprintf(req->u.payment_event.reply_to, sizeof req->u.payment_event.reply_to, "%s",
                 reply_topic);
        req->u.payment_event.sent_at_ms = now_ms;
        break;
    default:
        hf_assert(req->type == HF_REC_EXTEND);
        snprintf(req->u.extend.reply_to, sizeof req->u.extend.reply_to, "%s", reply_topic);
        req->u.extend.sent_at_ms = now_ms;
        break;
    }
}

static int produce_request(http_bridge_t *b, hf_record_t *req, const char *rid,
                           const char *traceparent, char *errstr, size_t errstr_size)
{
    uint8_t buf[HF_INPUT_VALUE_BYTES_MAX];
    size_t len = 0;
    stamp(req, b->reply_topic);
    int err = codec_encode(req, buf, sizeof buf, &len, errstr, errstr_size);
    if (err)
        return err;
    kafka_header_t tp = {"traceparent", traceparent};
    return kafka_produce(b->kp, topic_name(HF_T_REQUESTS), -1, rid, strlen(rid), buf, len,
                         traceparent ? &tp : NULL, traceparent ? 1 : 0, NULL, errstr, errstr_size);
}

static int send_request(http_bridge_t *b, hf_record_t *req, const char *rid,
                        const char *traceparent, char *errstr, size_t errstr_size)
{
    int err = produce_request(b, req, rid, traceparent, errstr, errstr_size);
    if (err == HF_ERR_FATAL && !atomic_exchange(&b->broken, true))
        log_error("http",
                  "the request producer failed for good (%s); the front stops so that "
                  "its supervisor restarts it",
                  errstr);
    return err;
}

http_bridge_result_t http_bridge_call(http_bridge_t *b, hf_record_t *req, const char *traceparent,
                                      int timeout_ms, hf_reply_t *out, char *errstr,
                                      size_t errstr_size)
{
    const char *ikey = NULL;
    const char *rid = client_request_id(req, &ikey); /* a request type: asserted below */
    hf_assert(rid);
    int64_t hash = gw_request_hash(req);
    pthread_mutex_lock(&b->mu);
    int bucket;
    int idx = slot_find(b, rid, ikey, &bucket);
    bool joined = idx >= 0;
    if (joined && (b->slots[idx].type != req->type || b->slots[idx].hash != hash)) {
        pthread_mutex_unlock(&b->mu);
        snprintf(errstr, errstr_size,
                 "another request with reservation %s and this idempotency key is in flight; "
                 "a key names one request",
                 rid);
        return HTTP_BRIDGE_CONFLICT;
    }
    if (!joined) {
        if (b->free_head < 0) {
            pthread_mutex_unlock(&b->mu);
            snprintf(errstr, errstr_size, "%d requests are already waiting for the pipeline",
                     b->slots_count);
            return HTTP_BRIDGE_FULL;
        }
        idx = b->free_head;
        slot_t *s = &b->slots[idx];
        b->free_head = s->next;
        snprintf(s->rid, sizeof s->rid, "%s", rid);
        snprintf(s->ikey, sizeof s->ikey, "%s", ikey);
        s->type = req->type;
        s->hash = hash;
        s->done = s->failed = false;
        s->waiters = 0;
        s->bucket = bucket;
        s->next = b->buckets[bucket];
        b->buckets[bucket] = idx;
        b->inflight++;
    }
    slot_t *s = &b->slots[idx];
    s->waiters++;
    pthread_mutex_unlock(&b->mu);

    if (!joined && send_request(b, req, rid, traceparent, errstr, errstr_size) != HF_OK) {
        pthread_mutex_lock(&b->mu); /* the joiners learn it now, and new callers send again */
        s->failed = true;
        slot_unlink(b, idx);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&b->mu);
    }

    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    int64_t ns = until.tv_nsec + (int64_t)(timeout_ms % 1000) * 1000000;
    until.tv_sec += timeout_ms / 1000 + ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    http_bridge_result_t result = HTTP_BRIDGE_ANSWERED;
    pthread_mutex_lock(&b->mu);
    while (!s->done && !s->failed)
        if (pthread_cond_timedwait(&s->cv, &b->mu, &until) != 0 && !s->done && !s->failed) {
            result = HTTP_BRIDGE_TIMEOUT;
            break;
        }
    if (s->done)
        *out = s->reply;
    else if (s->failed)
        result = HTTP_BRIDGE_FAILED;
    if (s->failed && joined)
        snprintf(errstr, errstr_size, "the request could not be sent to the pipeline");
    if (--s->waiters == 0)
        slot_release(b, idx);
    pthread_mutex_unlock(&b->mu); /* s may be reused from here on */
    if (result == HTTP_BRIDGE_TIMEOUT)
        snprintf(errstr, errstr_size, "no reply for %s within %d ms", rid, timeout_ms);
    return result;
}

int http_bridge_inflight(http_bridge_t *b)
{
    pthread_mutex_lock(&b->mu);
    int n = b->inflight;
    pthread_mutex_unlock(&b->mu);
    return n;
}

uint64_t http_bridge_unmatched(http_bridge_t *b)
{
    return atomic_load(&b->unmatched);
}

bool http_bridge_broken(http_bridge_t *b)
{
    return atomic_load(&b->broken);
}
