/* http_status.h: ledger follower into a small RocksDB store (state.h). One
 * store partition per ledger partition; a write batch per poll round carries
 * the records and the offset the partition has been read to. */
#include "http_status.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "framing.h"
#include "hf_assert.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "log.h"
#include "state.h"

#define STATUS_POLL_MS               100
#define STATUS_BATCH_MAX             500 /* ledger records per store write */
#define STATUS_WAIT_STEP_MS          10
/* The retention sweep: rows read per partition per pass (bounded work on the
 * reader thread), and how often a pass runs (a quarter of the retention, within
 * these bounds). */
#define STATUS_SWEEP_SCAN_MAX        4096
#define STATUS_SWEEP_INTERVAL_MIN_MS 100
#define STATUS_SWEEP_INTERVAL_MAX_MS 10000

struct http_status {
    state_t *st;
    state_buf_t *buf;
    kafka_reader_t *rd;
    char topic[HF_TOPIC_LEN_MAX + 1];
    int32_t partitions;
    int64_t next_offset[HF_PARTITIONS_MAX];
    bool dirty[HF_PARTITIONS_MAX];
    pthread_t thread;
    bool started;
    atomic_bool stop;
    atomic_llong current_at_ms;
    int64_t retention_ms;              /* an ended reservation's row is deleted this long after */
    int64_t next_sweep_ms;             /* monotonic */
    char (*doomed)[HF_ID_LEN_MAX + 1]; /* STATUS_SWEEP_SCAN_MAX ids a pass deletes */
    struct {                           /* where each partition's sweep goes on from */
        char key[HF_ID_LEN_MAX + 1];
        size_t len;
    } cursor[HF_PARTITIONS_MAX];
};

static bool ended(hf_ledger_kind_t k)
{
    return k == HF_LEDGER_COMMITTED || k == HF_LEDGER_RELEASED || k == HF_LEDGER_EXPIRED ||
           k == HF_LEDGER_REJECTED || k == HF_LEDGER_LATE_PAYMENT;
}

/* One bounded pass of the retention sweep over every partition: rows of
 * reservations that ended more than retention_ms ago go, as the gateway forgets
 * them after the same reservation_retention_ms. Deletes go through the buffer,
 * written with the next flush. */
static void sweep(http_status_t *s)
{
    static _Thread_local hf_record_t rec;
    char(*doomed)[HF_ID_LEN_MAX + 1] = s->doomed;
    int64_t cutoff_ms = hf_wall_ms() - s->retention_ms;
    for (int32_t p = 0; p < s->partitions; p++) {
        state_iter_t *it = state_iter_new(s->st, NULL, p, "", 0, false);
        if (!it)
            return;
        if (s->cursor[p].len)
            state_iter_start_after(it, p, s->cursor[p].key, s->cursor[p].len);
        size_t scanned = 0, n = 0;
        const void *k, *v;
        size_t klen, vlen;
        char derr[256];
        while (scanned < STATUS_SWEEP_SCAN_MAX && state_iter_next(it, &k, &klen, &v, &vlen)) {
            scanned++;
            if (klen > HF_ID_LEN_MAX)
                continue; /* not a row of ours (offsets are kept apart by state.c) */
            memcpy(s->cursor[p].key, k, klen);
            s->cursor[p].len = klen;
            if (codec_decode(v, vlen, &rec, derr, sizeof derr) == HF_OK &&
                rec.type == HF_REC_LEDGER_EVENT && ended(rec.u.ledger_event.kind) &&
                rec.u.ledger_event.at_ms < cutoff_ms) {
                memcpy(doomed[n], k, klen);
                doomed[n++][klen] = '\0';
            }
        }
        state_iter_destroy(it);
        if (scanned < STATUS_SWEEP_SCAN_MAX)
            s->cursor[p].len = 0; /* at the end: the next pass starts over */
        for (size_t i = 0; i < n; i++)
            if (state_del(s->buf, p, doomed[i], strlen(doomed[i])) != HF_OK)
                break;
    }
}

/* Merges event e into what the store holds for its reservation: the newest
 * event wins, but a settling event without allocations keeps the ones held. */
static int apply_event(http_status_t *s, int32_t partition, const hf_ledger_event_t *e)
{
    static _Thread_local hf_record_t prev, next; /* large; this thread only */
    static _Thread_local uint8_t val[HF_RECORD_LEN_MAX];
    size_t len = 0, key_len = strlen(e->reservation_id);
    next.type = HF_REC_LEDGER_EVENT;
    next.u.ledger_event = *e;
    int err =
        state_get(s->st, s->buf, partition, e->reservation_id, key_len, val, sizeof val, &len);
    char derr[256];
    if (err == HF_OK && codec_decode(val, len, &prev, derr, sizeof derr) == HF_OK &&
        prev.type == HF_REC_LEDGER_EVENT && e->allocations_count == 0) {
        hf_ledger_event_t *n = &next.u.ledger_event;
        n->allocations_count = prev.u.ledger_event.allocations_count;
        memcpy(n->allocations, prev.u.ledger_event.allocations,
               sizeof n->allocations[0] * (size_t)n->allocations_count);
        if (n->lines_count == 0) {
            n->lines_count = prev.u.ledger_event.lines_count;
            memcpy(n->lines, prev.u.ledger_event.lines,
                   sizeof n->lines[0] * (size_t)n->lines_count);
        }
    }
    err = codec_encode(&next, val, sizeof val, &len, derr, sizeof derr);
    if (err)
        return err;
    return state_put(s->buf, partition, e->reservation_id, key_len, val, len);
}

static void flush(http_status_t *s)
{
    char errstr[256];
    for (int32_t p = 0; p < s->partitions; p++)
        if (s->dirty[p] &&
            state_buf_set_offsets(s->buf, p, s->next_offset[p], -1, hf_wall_ms()) == HF_OK)
            s->dirty[p] = false;
    if (state_buf_count(s->buf) && state_buf_write(s->st, s->buf, errstr, sizeof errstr))
        log_error("http", "status store write: %s", errstr);
}

static void *status_main(void *arg)
{
    http_status_t *s = arg;
    static _Thread_local hf_record_t rec;
    bool seen_end[HF_PARTITIONS_MAX] = {false};
    int32_t at_end = 0;
    int batched = 0;
    char errstr[256];
    while (!atomic_load(&s->stop)) {
        kafka_msg_t m;
        int rc = kafka_reader_poll(s->rd, batched ? 0 : STATUS_POLL_MS, &m, errstr, sizeof errstr);
        if (rc < 0) {
            log_warn("http", "ledger %s: %s (still reading)", s->topic, errstr);
            hf_sleep_ms(STATUS_POLL_MS);
            continue;
        }
        if (rc == 1 && (m.partition < 0 || m.partition >= s->partitions)) {
            kafka_msg_release(&m); /* a partition added after the start: not read (docs) */
            continue;
        }
        if (rc == 1) {
            char derr[256];
            if (m.value &&
                framing_decode_waiting(m.value, m.value_len, &rec, &s->stop, derr, sizeof derr) ==
                    HF_OK &&
                rec.type == HF_REC_LEDGER_EVENT && rec.u.ledger_event.reservation_id[0]) {
                if (apply_event(s, m.partition, &rec.u.ledger_event) != HF_OK)
                    log_warn("http", "ledger %s[%d]@%lld: not stored", s->topic, m.partition,
                             (long long)m.offset);
            }
            s->next_offset[m.partition] = m.offset + 1;
            s->dirty[m.partition] = true;
            kafka_msg_release(&m);
            if (++batched < STATUS_BATCH_MAX)
                continue;
        }
        if (rc == 2 && m.partition >= 0 && m.partition < s->partitions && !seen_end[m.partition]) {
            seen_end[m.partition] = true;
            at_end++;
        }
        if (hf_mono_ms() >= s->next_sweep_ms) {
            sweep(s);
            int64_t every_ms = s->retention_ms / 4;
            every_ms = every_ms < STATUS_SWEEP_INTERVAL_MIN_MS   ? STATUS_SWEEP_INTERVAL_MIN_MS
                       : every_ms > STATUS_SWEEP_INTERVAL_MAX_MS ? STATUS_SWEEP_INTERVAL_MAX_MS
                                                                 : every_ms;
            s->next_sweep_ms = hf_mono_ms() + every_ms;
        }
        flush(s); /* before current_at: a reader told "current" finds what was read */
        batched = 0;
        if (at_end >= s->partitions && (rc == 2 || rc == 0))
            atomic_store(&s->current_at_ms, hf_wall_ms());
    }
    flush(s);
    return NULL;
}

int http_status_new(const kafka_conf_t *kconf, const char *topic, const char *dir,
                    int64_t retention_ms, http_status_t **out, char *errstr, size_t errstr_size)
{
    hf_assert(retention_ms > 0);
    http_status_t *s = calloc(1, sizeof *s);
    if (!s)
        return HF_ERR_NOMEM;
    s->retention_ms = retention_ms;
    s->doomed = malloc(STATUS_SWEEP_SCAN_MAX * sizeof *s->doomed);
    if (!s->doomed) {
        free(s);
        return HF_ERR_NOMEM;
    }
    snprintf(s->topic, sizeof s->topic, "%s", topic);
    atomic_init(&s->current_at_ms, -1);
    int err = state_open(dir, NULL, &s->st, errstr, errstr_size);
    if (!err && !(s->buf = state_buf_new(s->st)))
        err = HF_ERR_NOMEM;
    if (!err)
        err = kafka_reader_new(kconf, &s->rd, errstr, errstr_size);
    for (int32_t p = 0; !err && p < HF_PARTITIONS_MAX; p++) {
        int64_t next = -1, unused = -1;
        err = state_get_offsets(s->st, p, &next, &unused, NULL);
        /* -1: never stored, so the whole partition (-1 would mean its end). */
        s->next_offset[p] = next >= 0 ? next : KAFKA_OFFSET_BEGINNING;
    }
    if (!err)
        err = kafka_reader_follow_from(s->rd, topic, s->next_offset, HF_PARTITIONS_MAX, 10000,
                                       &s->partitions, errstr, errstr_size);
    if (!err && s->partitions > HF_PARTITIONS_MAX) {
        snprintf(errstr, errstr_size, "%s has %d partitions, at most %d are read", topic,
                 s->partitions, HF_PARTITIONS_MAX);
        err = HF_ERR_LIMIT;
    }
    if (!err && pthread_create(&s->thread, NULL, status_main, s) != 0) {
        snprintf(errstr, errstr_size, "cannot start the ledger reader thread");
        err = HF_ERR_IO;
    }
    if (err) {
        http_status_destroy(s);
        return err;
    }
    s->started = true;
    *out = s;
    return HF_OK;
}

void http_status_destroy(http_status_t *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, true);
    if (s->started)
        pthread_join(s->thread, NULL);
    kafka_reader_destroy(s->rd);
    state_buf_destroy(s->buf);
    state_close(s->st);
    free(s->doomed);
    free(s);
}

int http_status_get(http_status_t *s, const char *rid, int wait_ms, hf_ledger_event_t *out)
{
    static _Thread_local uint8_t val[HF_RECORD_LEN_MAX];
    static _Thread_local hf_record_t rec;
    size_t key_len = strlen(rid);
    int32_t partition = kafka_partition_for_key(rid, key_len, s->partitions);
    int64_t deadline = hf_mono_ms() + wait_ms;
    for (;;) {
        size_t len = 0;
        int err = state_get(s->st, NULL, partition, rid, key_len, val, sizeof val, &len);
        if (err == HF_OK) {
            char derr[256];
            err = codec_decode(val, len, &rec, derr, sizeof derr);
            if (err == HF_OK && rec.type != HF_REC_LEDGER_EVENT)
                err = HF_ERR_CORRUPT;
            if (err == HF_OK)
                *out = rec.u.ledger_event;
            return err;
        }
        if (err != HF_ERR_NOTFOUND || hf_mono_ms() >= deadline)
            return err;
        hf_sleep_ms(STATUS_WAIT_STEP_MS);
    }
}

int64_t http_status_staleness_ms(const http_status_t *s)
{
    int64_t at = atomic_load(&s->current_at_ms);
    return at < 0 ? -1 : hf_wall_ms() - at;
}
