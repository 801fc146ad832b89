/* The exactly-once task loop; see task.h for the protocol. This file owns the
 * batch: the records gathered, the outputs and changelog keys a batch produced,
 * the transaction around them, and the restore of a partition's state on
 * assignment. Handlers reach it only through stage.h. */
#include "task.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admit.h"
#include "codec.h"
#include "framing.h"
#include "hf_assert.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "kafka.h"
#include "log.h"
#include "metrics.h"
#include "metrics_flow.h"
#include "pacing.h"
#include "state_load.h"
#include "topics.h"
#include "trace.h"

/* A batch stops taking records once it has this many outputs; the rest of the
 * gathered records go into the next transaction. */
#define TASK_OUTPUTS_SOFT_MAX      20000
/* Hard bounds of one transaction's memory. */
#define TASK_ARENA_BYTES_MAX       (256u << 20)
#define TASK_WRITTEN_KEYS_MAX      (1u << 20)
#define TASK_INPUT_TOPICS_MAX      4
/* Restore writes its buffer every this many changelog records. */
#define TASK_RESTORE_CHUNK_RECORDS 5000
/* How often the state of owned partitions is marked current even when idle. */
#define TASK_STATE_AGE_REFRESH_MS  (3600 * 1000)
/* A standby applies at most this many changelog records per write (and holds
 * the owners' lock that long: a claim waits for it), and waits this long for
 * the first when there is nothing. */
#define TASK_STANDBY_BATCH_MAX     1000
#define TASK_STANDBY_POLL_MS       100
/* Members of a stage's group a task remembers (processes x threads_per_stage);
 * a departed member beyond it is not fenced: its open transaction then ends
 * at the broker's transaction timeout. */
#define TASK_GROUP_MEMBERS_MAX     64
/* How often a task reports its consumer lag (holdfast_consumer_lag_records):
 * from librdkafka's cached watermarks, so no request, but not per loop. */
#define TASK_LAG_REPORT_MS         1000

struct task_owners {
    pthread_mutex_t mu;
    bool owned[HF_PARTITIONS_MAX];
    /* How often partition p was claimed: a standby that loaded p's offsets at
     * another epoch reloads them (a task wrote p meanwhile). */
    uint32_t epoch[HF_PARTITIONS_MAX];
    atomic_uint generation; /* bumped by every claim and release */
    /* Set by a task's first assignment (even of nothing): the standby starts
     * only then, so that it follows what the group left to others instead of
     * racing the tasks' own first restores. */
    atomic_bool assigned;
};

typedef struct {
    uint8_t *data;
    size_t used, cap;
} arena_t;

typedef struct {
    uint32_t topic_off, key_off, key_len, val_off, val_len;
    int32_t partition;               /* -1 = by key */
    uint32_t reason_off, source_off; /* dead letters only; 0 = none */
    uint32_t trace_off;              /* its traceparent header; 0 = none */
    uint32_t forward_off;            /* a forwarded input's FORWARD_HEADER; 0 = none */
} out_t;

/* A state key written in this transaction, with its latest value (kept so the
 * changelog needs no read-back). */
typedef struct {
    int32_t partition;
    uint32_t key_off, key_len;
    uint32_t val_off, val_len;
    bool deleted;
} written_t;

struct stage_ctx {
    task_t *t;
    int32_t partition;
    int64_t now_ms;
    const kafka_msg_t *msg;
    char reject_reason[HF_TEXT_LEN_MAX + 1];
    /* While an input with a valid traceparent is handled: the value its outputs
     * carry (the input's trace, this hop's new span), and where it sits in the
     * arena once the first output took it (0: not yet). */
    bool traced;
    uint32_t trace_off;
    char traceparent[TRACE_PARENT_LEN + 1];
};

struct task {
    task_opts_t o;
    const stage_def_t *def;
    state_t *st;
    state_buf_t *buf;
    kafka_consumer_t *kc;
    kafka_producer_t *kp;
    kafka_reader_t *rd;
    kafka_conf_t kconf;
    char client_id[160];
    char txn_id[160];
    char group_id[128];
    const char *inputs[TASK_INPUT_TOPICS_MAX]; /* resolved topic names */
    admit_t admit;                             /* what input records may be applied */

    bool owned[HF_PARTITIONS_MAX];
    bool revoked;                          /* set by on_revoke, consumed by gather */
    bool revoked_p[HF_PARTITIONS_MAX];     /* which partitions, since gather last looked */
    int64_t input_next[HF_PARTITIONS_MAX]; /* primary input topic, for state */
    int metrics;                           /* this stage's slot in metrics.h */
    int64_t cl_next[HF_PARTITIONS_MAX];    /* changelog offset state reflects */
    int64_t cl_last[HF_PARTITIONS_MAX];    /* highest changelog offset delivered */
    /* The partition a restore's derive pass is reindexing, -1 none: each of
     * its keys is given to the stage as if it had no previous value, so a
     * stage's reads of that partition during the pass stop at the buffer
     * (restore_derive). */
    int32_t fresh_partition;

    kafka_msg_t *msgs;
    size_t msgs_count;
    int64_t batch_next[TASK_INPUT_TOPICS_MAX][HF_PARTITIONS_MAX];
    bool batch_touched[HF_PARTITIONS_MAX];

    arena_t arena;
    out_t *outs;
    size_t outs_count, outs_cap;
    written_t *written;
    size_t written_count, written_cap;
    uint32_t *slots; /* open addressing over written: index + 1, 0 = empty */
    size_t slots_cap;

    hf_record_t rec;     /* the input being handled */
    hf_record_t scratch; /* for dead letters */
    uint8_t valbuf[HF_RECORD_LEN_MAX];
    uint8_t dlbuf[HF_RECORD_LEN_MAX + 1024]; /* an encoded DeadLetter */
    stage_ctx_t ctx;
    int64_t next_tick_ms;
    pacing_t pacing; /* the wait between transactions, from the input rate */
    /* When the last committed transaction began and when its commit ended, on
     * the monotonic clock: a wall clock stepping back must not hold a batch. */
    int64_t last_begin_ms;
    int64_t last_commit_ms;
    int64_t age_refreshed_ms; /* last time every owned partition was marked current */
    /* The next input offset this task knows per input topic and partition
     * (committed at assignment, then by its transactions): the consumer lag's
     * position until the consumer has one. */
    int64_t lag_next[TASK_INPUT_TOPICS_MAX][HF_PARTITIONS_MAX];
    int64_t lag_reported_ms; /* hf_mono_ms of the last report */
    /* Epoch ms at which each partition's assignment began, until its first
     * record is applied (then 0): the takeover time in the log. */
    int64_t assigned_at_ms[HF_PARTITIONS_MAX];
    int64_t created_mono_ms; /* when the task was made (hf_mono_ms) */
    /* A standby's view: which partitions it follows, at which claim epoch it
     * loaded their stored offsets (cl_next and input_next above hold them), and
     * since when their state is known current. */
    bool sb_following[HF_PARTITIONS_MAX];
    uint32_t sb_epoch[HF_PARTITIONS_MAX];
    int64_t sb_current_at_ms[HF_PARTITIONS_MAX];
    /* Its catch-up since it started following: when, from which offset, the
     * records applied, and whether it reached the end yet (logged once). */
    int64_t sb_since_ms[HF_PARTITIONS_MAX];
    int64_t sb_from[HF_PARTITIONS_MAX];
    uint64_t sb_applied[HF_PARTITIONS_MAX];
    bool sb_caught_up[HF_PARTITIONS_MAX];
    bool sb_synced;
    unsigned sb_generation;
    /* The group.instance.ids (= transactional ids) of the group's members at
     * the last assignment: one missing at the next has left (died, stalled
     * past its session) and is fenced. */
    char members[TASK_GROUP_MEMBERS_MAX][KAFKA_INSTANCE_ID_LEN_MAX];
    size_t members_count;
    task_stats_t stats;
    char errstr[512];
};

/* ---- which partitions this process owns */

task_owners_t *task_owners_new(void)
{
    task_owners_t *o = calloc(1, sizeof *o);
    if (o)
        pthread_mutex_init(&o->mu, NULL);
    return o;
}

void task_owners_destroy(task_owners_t *o)
{
    if (!o)
        return;
    pthread_mutex_destroy(&o->mu);
    free(o);
}

/* Once this returns, the standby writes p no more (it writes under the lock and
 * checks first), so the restore that follows reads what it stored last. */
static void owners_claim(task_owners_t *o, int32_t p)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->mu);
    hf_assert(!o->owned[p]); /* the group gives a partition to one task */
    o->owned[p] = true;
    o->epoch[p]++;
    atomic_fetch_add(&o->generation, 1);
    pthread_mutex_unlock(&o->mu);
}

static void owners_release(task_owners_t *o, int32_t p)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->mu);
    o->owned[p] = false;
    atomic_fetch_add(&o->generation, 1);
    pthread_mutex_unlock(&o->mu);
}

/* ---- arena and written-key set */

static int arena_add(arena_t *a, const void *p, size_t len, uint32_t *off_out)
{
    if (a->used + len + 1 > a->cap) {
        size_t cap = a->cap ? a->cap : 1 << 16;
        while (cap < a->used + len + 1)
            cap *= 2;
        if (cap > TASK_ARENA_BYTES_MAX)
            return HF_ERR_LIMIT;
        uint8_t *d = realloc(a->data, cap);
        if (!d)
            return HF_ERR_NOMEM;
        a->data = d;
        a->cap = cap;
    }
    if (a->used == 0)
        a->data[a->used++] = 0; /* offset 0 means "none" */
    *off_out = (uint32_t)a->used;
    memcpy(a->data + a->used, p, len);
    a->used += len;
    return HF_OK;
}

static uint64_t key_hash(int32_t partition, const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uint32_t)partition;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)key[i]) * 1099511628211ULL;
    return h;
}

static int written_grow(task_t *t)
{
    size_t cap = t->slots_cap ? t->slots_cap * 2 : 1 << 12;
    uint32_t *slots = calloc(cap, sizeof *slots);
    written_t *w = realloc(t->written, cap / 2 * sizeof *w);
    if (!slots || !w) {
        free(slots);
        if (w)
            t->written = w;
        return HF_ERR_NOMEM;
    }
    t->written = w;
    t->written_cap = cap / 2;
    for (size_t i = 0; i < t->written_count; i++) {
        const written_t *e = &t->written[i];
        size_t s =
            key_hash(e->partition, (char *)t->arena.data + e->key_off, e->key_len) & (cap - 1);
        while (slots[s])
            s = (s + 1) & (cap - 1);
        slots[s] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->slots_cap = cap;
    return HF_OK;
}

/* Remembers that key was written in this transaction and its latest value (NULL =
 * deleted): the final value goes to the changelog once, however often it was
 * written. */
static int written_add(task_t *t, int32_t partition, const char *key, size_t len, const void *val,
                       size_t val_len)
{
    if (t->written_count + 1 > t->written_cap) {
        if (t->written_count >= TASK_WRITTEN_KEYS_MAX)
            return HF_ERR_LIMIT;
        int err = written_grow(t);
        if (err)
            return err;
    }
    size_t s = key_hash(partition, key, len) & (t->slots_cap - 1);
    written_t *e = NULL;
    for (; t->slots[s]; s = (s + 1) & (t->slots_cap - 1)) {
        written_t *w = &t->written[t->slots[s] - 1];
        if (w->partition == partition && w->key_len == len &&
            memcmp(t->arena.data + w->key_off, key, len) == 0) {
            e = w;
            break;
        }
    }
    if (!e) {
        e = &t->written[t->written_count];
        int err = arena_add(&t->arena, key, len, &e->key_off);
        if (err)
            return err;
        e->partition = partition;
        e->key_len = (uint32_t)len;
        t->slots[s] = (uint32_t)++t->written_count;
    }
    e->deleted = val == NULL;
    e->val_len = (uint32_t)val_len;
    return val ? arena_add(&t->arena, val, val_len, &e->val_off) : HF_OK;
}

static void batch_reset(task_t *t)
{
    t->arena.used = 0;
    t->outs_count = 0;
    t->written_count = 0;
    if (t->slots)
        memset(t->slots, 0, t->slots_cap * sizeof *t->slots);
    for (size_t i = 0; i < TASK_INPUT_TOPICS_MAX; i++)
        for (size_t p = 0; p < HF_PARTITIONS_MAX; p++)
            t->batch_next[i][p] = -1;
    memset(t->batch_touched, 0, sizeof t->batch_touched);
}

/* ---- stage.h: what handlers call */

int64_t stage_now_ms(const stage_ctx_t *ctx)
{
    return ctx->now_ms;
}
void *stage_env(const stage_ctx_t *ctx)
{
    return ctx->t->o.env;
}
int32_t stage_partition(const stage_ctx_t *ctx)
{
    return ctx->partition;
}
void stage_set_partition(stage_ctx_t *ctx, int32_t partition)
{
    ctx->partition = partition;
}

int64_t stage_record_timestamp_ms(const stage_ctx_t *ctx)
{
    return ctx->msg ? ctx->msg->timestamp_ms : -1;
}

int64_t stage_input_timestamp_ms(const stage_ctx_t *ctx, hf_rec_type_t type)
{
    return ctx->msg && ctx->t->rec.type == type ? ctx->msg->timestamp_ms : -1;
}

int stage_metrics(const stage_ctx_t *ctx)
{
    return ctx->t->metrics;
}

const void *stage_record_key(const stage_ctx_t *ctx, size_t *key_len)
{
    *key_len = ctx->msg ? ctx->msg->key_len : 0;
    return ctx->msg ? ctx->msg->key : NULL;
}

/* Reads key's value and decodes it: into a record (type < 0) or into the
 * struct of one record type. */
static int get_decoded(stage_ctx_t *ctx, const char *key, size_t key_len, int type, void *dst)
{
    task_t *t = ctx->t;
    size_t len = 0;
    int err = ctx->partition == t->fresh_partition
                  ? state_get_buffered(t->buf, ctx->partition, key, key_len, t->valbuf,
                                       sizeof t->valbuf, &len)
                  : state_get(t->st, t->buf, ctx->partition, key, key_len, t->valbuf,
                              sizeof t->valbuf, &len);
    if (err)
        return err;
    err = type < 0 ? codec_decode(t->valbuf, len, dst, t->errstr, sizeof t->errstr)
                   : codec_decode_as(t->valbuf, len, (hf_rec_type_t)type, dst, t->errstr,
                                     sizeof t->errstr);
    if (err) {
        log_error("task", "state value of key '%.*s' does not decode: %s", (int)key_len, key,
                  t->errstr);
        return HF_ERR_CORRUPT;
    }
    return HF_OK;
}

int stage_get(stage_ctx_t *ctx, const char *key, size_t key_len, hf_record_t *rec)
{
    return get_decoded(ctx, key, key_len, -1, rec);
}

int stage_get_as(stage_ctx_t *ctx, const char *key, size_t key_len, hf_rec_type_t type, void *dst)
{
    return get_decoded(ctx, key, key_len, (int)type, dst);
}

int stage_put_raw(stage_ctx_t *ctx, const char *key, size_t key_len, const void *val,
                  size_t val_len)
{
    int err = state_put(ctx->t->buf, ctx->partition, key, key_len, val, val_len);
    if (!err)
        err = written_add(ctx->t, ctx->partition, key, key_len, val ? val : "", val_len);
    return err;
}

int stage_put(stage_ctx_t *ctx, const char *key, size_t key_len, const hf_record_t *rec)
{
    return stage_put_as(ctx, key, key_len, rec->type, &rec->u);
}

int stage_put_as(stage_ctx_t *ctx, const char *key, size_t key_len, hf_rec_type_t type,
                 const void *src)
{
    task_t *t = ctx->t;
    size_t len = 0;
    int err =
        codec_encode_as(type, src, t->valbuf, sizeof t->valbuf, &len, t->errstr, sizeof t->errstr);
    if (err) {
        log_error("task", "state value for '%.*s' does not encode: %s", (int)key_len, key,
                  t->errstr);
        return err;
    }
    return stage_put_raw(ctx, key, key_len, t->valbuf, len);
}

int stage_put_local(stage_ctx_t *ctx, const char *key, size_t key_len, const void *val,
                    size_t val_len)
{
    hf_assert(val_len > 0); /* an empty value would read as a tombstone */
    return state_put(ctx->t->buf, ctx->partition, key, key_len, val, val_len);
}

int stage_del_local(stage_ctx_t *ctx, const char *key, size_t key_len)
{
    return state_del(ctx->t->buf, ctx->partition, key, key_len);
}

int stage_del(stage_ctx_t *ctx, const char *key, size_t key_len)
{
    int err = state_del(ctx->t->buf, ctx->partition, key, key_len);
    if (!err)
        err = written_add(ctx->t, ctx->partition, key, key_len, NULL, 0);
    return err;
}

state_iter_t *stage_iter(stage_ctx_t *ctx, const char *prefix, size_t prefix_len, bool reverse)
{
    return state_iter_new(ctx->t->st, ctx->t->buf, ctx->partition, prefix, prefix_len, reverse);
}

static int out_add(task_t *t, const char *topic, int32_t partition, const void *key, size_t key_len,
                   const void *val, size_t val_len, out_t **out)
{
    if (t->outs_count == t->outs_cap) {
        size_t cap = t->outs_cap ? t->outs_cap * 2 : 1024;
        out_t *o = realloc(t->outs, cap * sizeof *o);
        if (!o)
            return HF_ERR_NOMEM;
        t->outs = o;
        t->outs_cap = cap;
    }
    out_t *o = &t->outs[t->outs_count];
    memset(o, 0, sizeof *o);
    o->partition = partition;
    int err = arena_add(&t->arena, topic, strlen(topic) + 1, &o->topic_off);
    if (!err)
        err = arena_add(&t->arena, key, key_len, &o->key_off);
    if (!err)
        err = arena_add(&t->arena, val, val_len, &o->val_off);
    if (err)
        return err;
    o->key_len = (uint32_t)key_len;
    o->val_len = (uint32_t)val_len;
    if (t->ctx.traced) { /* one copy per traced input, however many outputs it has */
        if (!t->ctx.trace_off)
            err = arena_add(&t->arena, t->ctx.traceparent, TRACE_PARENT_LEN + 1, &t->ctx.trace_off);
        if (err)
            return err;
        o->trace_off = t->ctx.trace_off;
    }
    t->outs_count++;
    if (out)
        *out = o;
    return HF_OK;
}

int stage_emit(stage_ctx_t *ctx, hf_topic_id_t topic, const char *key, size_t key_len,
               const hf_record_t *rec)
{
    return stage_emit_to(ctx, topic_name(topic), key, key_len, rec);
}

int stage_emit_to(stage_ctx_t *ctx, const char *topic, const char *key, size_t key_len,
                  const hf_record_t *rec)
{
    task_t *t = ctx->t;
    size_t len = 0;
    int err =
        framing_encode(topic, rec, t->valbuf, sizeof t->valbuf, &len, t->errstr, sizeof t->errstr);
    if (err) {
        log_error("task", "output %s for %s does not encode: %s", hf_rec_type_name(rec->type),
                  topic, t->errstr);
        return err;
    }
    return out_add(t, topic, -1, key, key_len, t->valbuf, len, NULL);
}

int stage_reject(stage_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->reject_reason, sizeof ctx->reject_reason, fmt, ap);
    va_end(ap);
    return HF_ERR_INVAL;
}

int stage_foreach_written(stage_ctx_t *ctx, stage_key_fn fn)
{
    task_t *t = ctx->t;
    /* fn may write more keys; iterate over those present at the start. */
    size_t n = t->written_count;
    for (size_t i = 0; i < n; i++) {
        const written_t *e = &t->written[i];
        ctx->partition = e->partition;
        int err = fn(ctx, e->partition, (const char *)t->arena.data + e->key_off, e->key_len);
        if (err)
            return err;
    }
    return HF_OK;
}

/* ---- dead letters */

static int dead_letter(task_t *t, const kafka_msg_t *msg, const char *reason)
{
    hf_record_t *r = &t->scratch;
    memset(r, 0, sizeof *r);
    r->type = HF_REC_DEAD_LETTER;
    hf_dead_letter_t *d = &r->u.dead_letter;
    snprintf(d->source_topic, sizeof d->source_topic, "%s", msg->topic);
    d->source_partition = msg->partition;
    d->source_offset = msg->offset;
    snprintf(d->stage, sizeof d->stage, "%s", t->def->name);
    snprintf(d->reason, sizeof d->reason, "%s", reason);
    d->key_len = (uint32_t)(msg->key_len < sizeof d->key ? msg->key_len : sizeof d->key);
    if (d->key_len)
        memcpy(d->key, msg->key, d->key_len);
    size_t vlen = msg->value ? msg->value_len : 0;
    d->value_truncated = vlen > sizeof d->value;
    d->value_len = (uint32_t)(d->value_truncated ? sizeof d->value : vlen);
    if (d->value_len)
        memcpy(d->value, msg->value, d->value_len);
    d->failed_at_ms = t->ctx.now_ms;

    size_t len = 0;
    int err = codec_encode(r, t->dlbuf, sizeof t->dlbuf, &len, t->errstr, sizeof t->errstr);
    if (err)
        return err;
    out_t *o = NULL;
    err = out_add(t, topic_name(HF_T_DEAD_LETTERS), -1, msg->key, msg->key_len, t->dlbuf, len, &o);
    if (err)
        return err;
    char source[HF_TOPIC_LEN_MAX + 48];
    snprintf(source, sizeof source, "%s/%d/%lld", msg->topic, msg->partition,
             (long long)msg->offset);
    err = arena_add(&t->arena, reason, strlen(reason) + 1, &o->reason_off);
    if (!err)
        err = arena_add(&t->arena, source, strlen(source) + 1, &o->source_off);
    t->stats.dead_letters++;
    metrics_add(t->metrics, HF_M_DEAD_LETTERS, 1);
    log_warn("task", "%s: dead-lettered %s: %s", t->def->name, source, reason);
    return err;
}

/* ---- forwarding (a record on a partition its key does not hash to) */

/* The header a forwarded record carries: "<hops> <topic>/<partition>/<offset>"
 * of the record it copies, hops counting this forward. */
#define TASK_FORWARD_HEADER   "hf.forwarded"
/* How often one record may be forwarded. Once is the rule; a second forward
 * covers a topic that grew between the forwarder's and the receiver's view of
 * its partition count. Past it the record is a dead letter (admit.h). */
#define TASK_FORWARD_HOPS_MAX 2

/* How often msg was forwarded already: 0 without the header; a header that
 * does not start with a count is taken as spent, so it is never forwarded again. */
static int forward_hops(const kafka_msg_t *msg)
{
    const void *val = NULL;
    size_t len = 0;
    if (!kafka_msg_header_ref(msg, TASK_FORWARD_HEADER, &val, &len))
        return 0;
    const char *v = val;
    int hops = 0;
    size_t i = 0;
    for (; i < len && i < 3 && v[i] >= '0' && v[i] <= '9'; i++)
        hops = hops * 10 + (v[i] - '0');
    return i == 0 ? TASK_FORWARD_HOPS_MAX : hops;
}

/* Copies msg, key, value and trace, to the partition its key hashes to, in
 * this transaction: the owner of that partition admits and applies it as if
 * the producer had used murmur2. Exactly once, like every output: the copy
 * commits with this input's offset. */
static int forward(task_t *t, const kafka_msg_t *msg, int32_t partition, int hops)
{
    out_t *o = NULL;
    int err = out_add(t, msg->topic, partition, msg->key, msg->key_len, msg->value,
                      msg->value ? msg->value_len : 0, &o);
    if (err)
        return err;
    char header[HF_TOPIC_LEN_MAX + 64];
    snprintf(header, sizeof header, "%d %s/%d/%lld", hops + 1, msg->topic, msg->partition,
             (long long)msg->offset);
    err = arena_add(&t->arena, header, strlen(header) + 1, &o->forward_off);
    if (err)
        return err;
    t->stats.forwarded++;
    metrics_add(t->metrics, HF_M_FORWARDED, 1);
    log_debug("task", "%s: forwarded %s/%d/%lld to partition %d (its key's, murmur2)", t->def->name,
              msg->topic, msg->partition, (long long)msg->offset, partition);
    return HF_OK;
}

/* ---- tracing (trace.h) */

/* Reads the input's traceparent header, if it has one: a valid one makes this
 * hop a child span of it, and every output emitted while the record is handled
 * (replies, commands, results, ledger events, dead letters; not changelog
 * records) carries the child's value. An invalid one is ignored: it neither
 * propagates nor fails the record. A record without headers costs a call and a
 * branch (librdkafka parses headers only of a record that has some). decoded:
 * t->rec holds the record (admitted), for the log line. */
static void trace_begin(task_t *t, const kafka_msg_t *msg, bool decoded)
{
    stage_ctx_t *ctx = &t->ctx;
    const void *val = NULL;
    size_t len = 0;
    trace_ctx_t in, span;
    ctx->traced = false;
    ctx->trace_off = 0;
    if (!kafka_msg_header_ref(msg, TRACE_HEADER_NAME, &val, &len))
        return;
    const char *type = decoded ? hf_rec_type_name(t->rec.type) : "(refused)";
    if (!trace_parse(val, len, &in)) {
        log_debug("task", "%s: %s/%d/%lld %s: invalid traceparent ignored", t->def->name,
                  msg->topic, msg->partition, (long long)msg->offset, type);
        return;
    }
    trace_child(&in, &span);
    trace_format(&span, ctx->traceparent);
    ctx->traced = true;
    /* The value is "00-<trace-id>-<span-id>-<flags>"; the input's parent-id is
     * the previous hop's span-id, so a grep for the trace-id shows the chain. */
    log_debug("task", "%s: %s/%d/%lld %s trace_id=%.32s parent_id=%.16s span_id=%.16s",
              t->def->name, msg->topic, msg->partition, (long long)msg->offset, type,
              ctx->traceparent + 3, (const char *)val + 36, ctx->traceparent + 36);
}

/* Outputs of timers and batch ends act for no input record: they carry none. */
static void trace_end(stage_ctx_t *ctx)
{
    ctx->traced = false;
    ctx->trace_off = 0;
}

/* ---- applying records */

static int topic_index(const task_t *t, const char *topic)
{
    for (size_t i = 0; i < t->def->input_topics_count; i++)
        if (strcmp(t->inputs[i], topic) == 0)
            return (int)i;
    return -1;
}

/* Applies one input record. Records that admission refuses (admit.h: size,
 * partition, decoding, type on its topic) and records a handler rejects become
 * dead letters; only failures that must abort the transaction are returned. */
static int apply_record(task_t *t, const kafka_msg_t *msg)
{
    stage_ctx_t *ctx = &t->ctx;
    ctx->msg = msg;
    ctx->partition = msg->partition;
    ctx->reject_reason[0] = '\0';
    int ti = topic_index(t, msg->topic);
    hf_assert(ti >= 0 && msg->partition >= 0 && msg->partition < HF_PARTITIONS_MAX);
    t->batch_next[ti][msg->partition] = msg->offset + 1;
    t->batch_touched[msg->partition] = true;
    if (t->assigned_at_ms[msg->partition] > 0) {
        int64_t now = hf_wall_ms();
        log_info("task",
                 "%s: partition %d first record applied after assignment: at_ms=%lld offset %lld, "
                 "%lld ms after the assignment began",
                 t->def->name, msg->partition, (long long)now, (long long)msg->offset,
                 (long long)(now - t->assigned_at_ms[msg->partition]));
        t->assigned_at_ms[msg->partition] = 0;
    }
    t->stats.records++;
    metrics_add(t->metrics, HF_M_RECORDS, 1);

    const stage_handler_t *h = NULL;
    char why[HF_TEXT_LEN_MAX + 1];
    admit_verdict_t v =
        admit_record(&t->admit, (size_t)ti, msg->partition, msg->key, msg->key_len, msg->value,
                     msg->value ? msg->value_len : 0, &t->rec, &h, why, sizeof why);
    trace_begin(t, msg, v == ADMIT_OK);
    size_t writes_before = state_buf_count(t->buf);
    int hops = v == ADMIT_MISROUTED ? forward_hops(msg) : 0;
    if (v == ADMIT_MISROUTED && hops < TASK_FORWARD_HOPS_MAX)
        return forward(t, msg, admit_partition_for(&t->admit, (size_t)ti, msg->key, msg->key_len),
                       hops);
    if (v != ADMIT_OK) {
        int err = dead_letter(t, msg, why);
        if (!err && v == ADMIT_MISROUTED && t->def->on_misrouted)
            err = t->def->on_misrouted(ctx, &t->rec, why);
        hf_assert(state_buf_count(t->buf) == writes_before); /* answers only */
        return err;
    }
    int err = h->handle(ctx, &t->rec);
    if (err == HF_ERR_INVAL) {
        hf_assert(state_buf_count(t->buf) == writes_before); /* validate before writing */
        return dead_letter(t, msg, ctx->reject_reason[0] ? ctx->reject_reason : "invalid");
    }
    return err;
}

/* Runs the stage's timers in this transaction. A failed tick aborts the whole
 * transaction (its timers may already be deleted in the buffer) and is retried. */
static int run_ticks(task_t *t)
{
    if (!t->def->tick || t->ctx.now_ms < t->next_tick_ms)
        return HF_OK;
    t->ctx.msg = NULL;
    for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++) {
        if (!t->owned[p])
            continue;
        t->ctx.partition = p;
        int err = t->def->tick(&t->ctx);
        if (err) {
            snprintf(t->errstr, sizeof t->errstr, "%s tick of partition %d: %s", t->def->name, p,
                     hf_err_name(err));
            return err;
        }
    }
    t->next_tick_ms = t->ctx.now_ms + t->def->tick_interval_ms;
    return HF_OK;
}

/* ---- the transaction */

static int produce_outputs(task_t *t)
{
    for (size_t i = 0; i < t->outs_count; i++) {
        const out_t *o = &t->outs[i];
        const uint8_t *a = t->arena.data;
        kafka_header_t hdrs[5];
        size_t nh = 0;
        if (o->reason_off) {
            hdrs[nh++] = (kafka_header_t){"hf.error", (const char *)a + o->reason_off};
            hdrs[nh++] = (kafka_header_t){"hf.source", (const char *)a + o->source_off};
            hdrs[nh++] = (kafka_header_t){"hf.stage", t->def->name};
        }
        if (o->forward_off)
            hdrs[nh++] = (kafka_header_t){TASK_FORWARD_HEADER, (const char *)a + o->forward_off};
        if (o->trace_off)
            hdrs[nh++] = (kafka_header_t){TRACE_HEADER_NAME, (const char *)a + o->trace_off};
        int err = kafka_produce(t->kp, (const char *)a + o->topic_off, o->partition, a + o->key_off,
                                o->key_len, a + o->val_off, o->val_len, hdrs, nh, NULL, t->errstr,
                                sizeof t->errstr);
        if (err)
            return err;
    }
    return HF_OK;
}

/* One changelog record per key written: its value as it stands at the end of the
 * batch, or a tombstone. */
static int produce_changelog(task_t *t)
{
    for (size_t i = 0; i < t->written_count; i++) {
        const written_t *e = &t->written[i];
        const uint8_t *a = t->arena.data;
        int err = kafka_produce(t->kp, topic_name(t->def->changelog_topic), e->partition,
                                a + e->key_off, e->key_len, e->deleted ? NULL : a + e->val_off,
                                e->deleted ? 0 : e->val_len, NULL, 0, &t->cl_last[e->partition],
                                t->errstr, sizeof t->errstr);
        if (err)
            return err;
        t->batch_touched[e->partition] = true;
    }
    return HF_OK;
}

static int send_offsets(task_t *t)
{
    kafka_tp_t tps[TASK_INPUT_TOPICS_MAX * 8];
    int64_t next[TASK_INPUT_TOPICS_MAX * 8];
    size_t n = 0;
    for (size_t ti = 0; ti < t->def->input_topics_count; ti++)
        for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++) {
            if (t->batch_next[ti][p] < 0)
                continue;
            if (n == sizeof tps / sizeof tps[0]) {
                int err =
                    kafka_txn_send_offsets(t->kp, t->kc, tps, next, n, t->errstr, sizeof t->errstr);
                if (err)
                    return err;
                n = 0;
            }
            tps[n] = (kafka_tp_t){t->inputs[ti], p};
            next[n++] = t->batch_next[ti][p];
        }
    return n ? kafka_txn_send_offsets(t->kp, t->kc, tps, next, n, t->errstr, sizeof t->errstr)
             : HF_OK;
}

/* After the commit: the buffer and the offsets it reflects go to RocksDB in one
 * write. A crash before this write is repaired by the changelog restore. */
static int write_state(task_t *t)
{
    for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++) {
        if (!t->batch_touched[p])
            continue;
        if (t->batch_next[0][p] >= 0)
            t->input_next[p] = t->batch_next[0][p];
        for (size_t ti = 0; ti < t->def->input_topics_count; ti++)
            if (t->batch_next[ti][p] >= 0)
                t->lag_next[ti][p] = t->batch_next[ti][p];
        if (t->cl_last[p] + 1 > t->cl_next[p])
            t->cl_next[p] = t->cl_last[p] + 1;
        int err = state_buf_set_offsets(t->buf, p, t->input_next[p], t->cl_next[p], t->ctx.now_ms);
        if (err)
            return err;
    }
    return state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
}

/* The offsets go first. The broker answers CONCURRENT_TRANSACTIONS to a
 * transaction's first request while it still writes the previous one's commit
 * markers; librdkafka retries AddOffsetsToTxn after retry.backoff.ms (2 ms) but
 * AddPartitionsToTxn, which the first produce schedules, after a fixed 20 ms.
 * Sent first, the offsets take the wait in 2 ms steps and the partitions are
 * registered once the coordinator is free: at 1,000 reservations/s this took
 * the 2-3 % of transactions that paid 20 ms out of every stage's tail
 * (docs/PERFORMANCE.md). Atomicity does not depend on the order. */
static int commit_batch(task_t *t)
{
    int64_t t0 = hf_mono_ms();
    int err = kafka_txn_begin(t->kp, t->errstr, sizeof t->errstr);
    if (!err)
        err = send_offsets(t);
    int64_t t1 = hf_mono_ms();
    if (!err)
        err = produce_outputs(t);
    if (!err)
        err = produce_changelog(t);
    int64_t t2 = hf_mono_ms();
    if (!err) {
        err = kafka_txn_commit(t->kp, t->errstr, sizeof t->errstr);
        if (err && err != HF_ERR_ABORTABLE && err != HF_ERR_FATAL) {
            /* Neither committed nor aborted for sure: it may still complete.
             * Aborting and retrying would apply the batch twice if it did;
             * a restart restores whichever it was from the changelog. */
            log_error("task", "%s: transaction outcome unknown (%s): %s; exiting for a restart",
                      t->def->name, hf_err_name(err), t->errstr);
            return HF_ERR_FATAL;
        }
    }
    if (err)
        return err;
    log_debug(
        "task",
        "%s txn: %zu outputs %zu changelog; offsets %lld ms, produce %lld ms, commit %lld ms; "
        "period %d ms at %.0f records/s",
        t->def->name, t->outs_count, t->written_count, (long long)(t1 - t0), (long long)(t2 - t1),
        (long long)(hf_mono_ms() - t2), pacing_period_ms(&t->pacing),
        pacing_rate_records_s(&t->pacing));
    t->stats.transactions++;
    t->last_begin_ms = t0;
    t->last_commit_ms = hf_mono_ms();
    metrics_add(t->metrics, HF_M_TXNS, 1);
    metrics_observe_commit_ms(t->metrics, t->last_commit_ms - t0);
    err = write_state(t);
    if (err) {
        /* Kafka has the batch but RocksDB does not: the only safe way on is to
         * restart and restore from the changelog. */
        log_error("task", "state write after commit failed: %s", t->errstr);
        return HF_ERR_FATAL;
    }
    return HF_OK;
}

static void release_msgs(task_t *t, size_t count)
{
    for (size_t i = 0; i < count; i++)
        kafka_msg_release(&t->msgs[i]);
    memmove(t->msgs, t->msgs + count, (t->msgs_count - count) * sizeof *t->msgs);
    t->msgs_count -= count;
}

/* Undoes a failed transaction: nothing it wrote may survive locally, and the
 * consumer goes back to the last committed offsets. */
static int abort_batch(task_t *t, int cause)
{
    log_warn("task", "%s: aborting transaction (%s): %s", t->def->name, hf_err_name(cause),
             t->errstr);
    t->stats.aborts++;
    metrics_add(t->metrics, HF_M_ABORTS, 1);
    int err = kafka_txn_abort(t->kp, t->errstr, sizeof t->errstr);
    if (err == HF_ERR_FATAL)
        return err;
    state_buf_clear(t->buf);
    release_msgs(t, t->msgs_count);
    return kafka_consumer_rewind(t->kc, t->errstr, sizeof t->errstr) == HF_OK ? HF_OK
                                                                              : HF_ERR_ABORTABLE;
}

/* ---- restore on assignment */

typedef struct {
    task_t *t;
    int32_t partition;
    uint64_t records;
    int64_t current_at_ms; /* of the state being brought up to date */
    state_load_t *load;    /* a full restore's bulk load; NULL: record by record */
    size_t sealed_records; /* in its sealed run */
    /* The partition's derive mark is set (state.h): its records are applied
     * without the stage's reindex, and one pass rebuilds what it derives at the
     * end (restore_derive). */
    bool derive_after;
} restore_t;

/* Lets the stage rebuild what it derives from a restored record (its local
 * indexes) before the record is applied. */
static int reindex_record(task_t *t, int32_t partition, const kafka_msg_t *msg)
{
    stage_ctx_t *ctx = &t->ctx;
    ctx->msg = NULL;
    ctx->partition = partition;
    ctx->now_ms = hf_wall_ms();
    const hf_record_t *rec = NULL;
    if (msg->value &&
        codec_decode(msg->value, msg->value_len, &t->rec, t->errstr, sizeof t->errstr) != HF_OK) {
        /* Restored as it is (a handler reading it will say so); nothing derives
         * from it, and one foreign record must not block the partition. */
        log_error("task", "%s: changelog partition %d offset %lld does not decode: %s",
                  t->def->name, partition, (long long)msg->offset, t->errstr);
        return HF_OK;
    }
    if (msg->value)
        rec = &t->rec;
    return t->def->reindex(ctx, msg->key, msg->key_len, rec);
}

/* Whether a changelog record is one a restore applies: a key this program
 * wrote, and not derived state an older version logged (reindex rebuilds it). */
static bool changelog_record_ours(const task_t *t, int32_t p, const kafka_msg_t *msg)
{
    if (msg->key_len == 0 || ((const uint8_t *)msg->key)[0] == 0) {
        /* Not a key this program wrote; skipping it loses nothing of ours. */
        log_error("task", "%s: changelog partition %d offset %lld has an invalid key; skipped",
                  t->def->name, p, (long long)msg->offset);
        return false;
    }
    char tag = ((const char *)msg->key)[0];
    return !(t->def->local_tags && strchr(t->def->local_tags, tag));
}

/* Whether the stage derives state from records whose key starts with tag. */
static bool reindexes(const task_t *t, char tag)
{
    return t->def->reindex && t->def->reindex_tags && strchr(t->def->reindex_tags, tag);
}

/* Applies one changelog record of partition p to t->buf the way a restore
 * does — the stage's reindex first (unless reindex is false: a derive pass
 * follows), then the value — for a restore and a standby alike, so derived
 * indexes come out the same. *applied: false for a record skipped (not a key
 * of ours, or derived state reindex rebuilds). */
static int changelog_apply(task_t *t, int32_t p, const kafka_msg_t *msg, bool reindex,
                           bool *applied)
{
    *applied = false;
    if (!changelog_record_ours(t, p, msg))
        return HF_OK;
    int err =
        reindex && reindexes(t, ((const char *)msg->key)[0]) ? reindex_record(t, p, msg) : HF_OK;
    if (!err)
        err = msg->value ? state_put(t->buf, p, msg->key, msg->key_len, msg->value, msg->value_len)
                         : state_del(t->buf, p, msg->key, msg->key_len);
    *applied = err == HF_OK;
    return err;
}

/* A sign of life for the stall watchdog (task.h alive_ms). */
static void task_alive(const task_t *t)
{
    if (t->o.alive_ms)
        atomic_store(t->o.alive_ms, hf_mono_ms());
}

/* The same while a task restores its partitions, and for /healthz and the loop
 * age too (metrics.h): a restore of a large changelog completes no loop for
 * minutes, yet it is progress, not a stuck task. */
static void restore_alive(const task_t *t)
{
    int64_t now_ms = hf_mono_ms();
    if (t->o.alive_ms)
        atomic_store(t->o.alive_ms, now_ms);
    metrics_task_alive(t->metrics, now_ms);
}

/* Finishes the sealed run of a bulk load, if there is one: waits for its
 * file, then ingests the run and the offsets it brings the partition to, in
 * one table file. What the stage derives from the values is left to the pass
 * at the end of the restore (restore_derive). */
static int restore_finish_sealed(restore_t *r)
{
    task_t *t = r->t;
    if (!state_load_has_sealed(r->load))
        return HF_OK;
    int64_t t0 = hf_mono_ms();
    int err = state_load_wait(r->load, t->errstr, sizeof t->errstr);
    int64_t t1 = hf_mono_ms();
    if (!err)
        err = state_load_ingest(r->load, t->errstr, sizeof t->errstr);
    log_debug("task",
              "%s: partition %d: a run of %zu records loaded: waited %lld ms for its sort and "
              "file, ingest %lld ms",
              t->def->name, r->partition, r->sealed_records, (long long)(t1 - t0),
              (long long)(hf_mono_ms() - t1));
    return err;
}

/* Ends the filling run at changelog offset cl_next: the run before it is
 * finished first (at most one is sealed), then this one is sorted and written
 * in the background while the next fills. */
static int restore_run_end(restore_t *r, int64_t cl_next)
{
    int err = restore_finish_sealed(r);
    r->sealed_records = state_load_run_records(r->load);
    if (!err)
        err = state_load_seal(r->load, r->t->input_next[r->partition], cl_next, r->current_at_ms);
    return err;
}

/* A full restore: records go to the bulk load's run, ended when full. */
static int restore_record_bulk(restore_t *r, const kafka_msg_t *msg)
{
    if (!changelog_record_ours(r->t, r->partition, msg))
        return HF_OK;
    int err = state_load_run_full(r->load) ? restore_run_end(r, msg->offset) : HF_OK;
    if (!err)
        err = state_load_put(r->load, msg->key, msg->key_len, msg->value, msg->value_len);
    if (!err)
        r->records++;
    return err;
}

static int restore_record(void *opaque, const kafka_msg_t *msg)
{
    restore_t *r = opaque;
    task_t *t = r->t;
    restore_alive(t);
    if (r->load)
        return restore_record_bulk(r, msg);
    bool applied = false;
    int err = changelog_apply(t, r->partition, msg, !r->derive_after, &applied);
    if (err || !applied)
        return err;
    if (++r->records % TASK_RESTORE_CHUNK_RECORDS == 0) {
        err = state_buf_set_offsets(t->buf, r->partition, t->input_next[r->partition],
                                    msg->offset + 1, r->current_at_ms);
        if (!err)
            err = state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
    }
    return err;
}

/* Whether local state of partition p may be brought up to date from its
 * changelog offset, or must be rebuilt from the beginning: compaction drops a
 * tombstone delete.retention.ms after it was written, so state last current
 * longer ago than that may miss a deletion another process made meanwhile
 * (state_max_age_ms is kept below the changelogs' delete.retention.ms). */
static bool state_too_old(const task_t *t, int32_t p, int64_t cl_next, int64_t current_at_ms)
{
    if (cl_next < 0)
        return false; /* nothing to keep anyway */
    int64_t age_ms = hf_wall_ms() - current_at_ms;
    if (current_at_ms >= 0 && age_ms <= t->o.cfg->state_max_age_ms)
        return false;
    log_warn("task",
             "%s: partition %d state was last current %s%lld ms ago (state_max_age_ms %d): "
             "rebuilding it from the whole changelog",
             t->def->name, p, current_at_ms < 0 ? "an unknown time, say " : "",
             (long long)(current_at_ms < 0 ? -1 : age_ms), t->o.cfg->state_max_age_ms);
    return true;
}

/* Whether the group's committed offset group_next of partition p of the
 * primary input is at least what local state already applied. Behind it, the
 * group's offsets were lost (expired, a changed app_id, reset by hand) and
 * consuming from them would apply holds and commits a second time. */
static int check_group_offset(const task_t *t, int32_t p, int64_t group_next, int64_t input_next)
{
    if (input_next <= 0 || group_next >= input_next)
        return HF_OK;
    char group_has[64];
    if (group_next < 0)
        snprintf(group_has, sizeof group_has, "no committed offset");
    else
        snprintf(group_has, sizeof group_has, "committed offset %lld", (long long)group_next);
    log_error("task",
              "%s: partition %d of %s: local state already applied the input up to offset %lld, "
              "but consumer group %s has %s; consuming from there would apply records twice. "
              "Stop every holdfast process of app_id %s, then reset the group to the stored "
              "offset: kafka-consumer-groups.sh --bootstrap-server %s --group %s --topic %s:%d "
              "--reset-offsets --to-offset %lld --execute (a restart names the next partition "
              "behind, if any), "
              "or, if this state belongs to another deployment, delete %s/%s",
              t->def->name, p, t->inputs[0], (long long)input_next, t->group_id, group_has,
              t->o.cfg->app_id, t->o.cfg->bootstrap, t->group_id, t->inputs[0], p,
              (long long)input_next, t->o.cfg->state_dir, t->def->name);
    return HF_ERR_CONFIG;
}

/* Calls each(t, p, record) for every key of partition p in the DB (not the
 * buffer) that starts with tag, writing the buffer every
 * TASK_RESTORE_CHUNK_RECORDS keys; *count grows by the keys seen. */
typedef int (*tagged_fn)(task_t *t, int32_t p, const kafka_msg_t *rec);
static int for_each_tagged(task_t *t, int32_t p, char tag, tagged_fn each, uint64_t *count)
{
    state_iter_t *it = state_iter_new(t->st, NULL, p, &tag, 1, false);
    hf_assert(it != NULL);
    const void *key = NULL, *val = NULL;
    size_t key_len = 0, val_len = 0;
    int err = HF_OK;
    while (!err && state_iter_next(it, &key, &key_len, &val, &val_len)) {
        kafka_msg_t rec = {.partition = p,
                           .offset = -1,
                           .key = key,
                           .key_len = key_len,
                           .value = val,
                           .value_len = val_len};
        err = each(t, p, &rec);
        if (!err && ++*count % TASK_RESTORE_CHUNK_RECORDS == 0)
            err = state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
    }
    state_iter_destroy(it);
    return err;
}

static int delete_derived(task_t *t, int32_t p, const kafka_msg_t *rec)
{
    return state_del(t->buf, p, rec->key, rec->key_len);
}

static int derive_one(task_t *t, int32_t p, const kafka_msg_t *rec)
{
    restore_alive(t);
    return reindex_record(t, p, rec);
}

/* The end of a restore that deferred the stage's reindex: one pass over the
 * partition's keys of each tag the stage derives from, each value given to the
 * reindex as if the key had none before (a stage's reindex reads no key but
 * the one it is given, stage.h, and the partition holds no derived state yet),
 * written every TASK_RESTORE_CHUNK_RECORDS keys. The caller's write, with the
 * partition's offsets, clears the mark. One scan in key order instead of a
 * read of each restored key's previous value (a random read once the restored
 * values outgrow the caches). */
static int restore_derive(restore_t *r)
{
    task_t *t = r->t;
    int64_t t0 = hf_mono_ms();
    uint64_t keys = 0;
    /* The scan reads the DB alone: the records still buffered go first. */
    int err = state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
    /* Derived keys already there are not the pass's: a pass killed after some
     * of its writes, or a standby that followed the marked partition with its
     * reindex, left them, and a record applied since without the reindex may
     * have made them stale. */
    uint64_t stale = 0;
    for (const char *tag = t->def->local_tags; !err && tag && *tag; tag++)
        err = for_each_tagged(t, r->partition, *tag, delete_derived, &stale);
    if (stale > 0)
        log_info("task",
                 "%s: partition %d: %llu derived keys of an unfinished restore deleted before "
                 "they are derived again",
                 t->def->name, r->partition, (unsigned long long)stale);
    t->fresh_partition = r->partition;
    for (const char *tag = t->def->reindex_tags; !err && tag && *tag; tag++)
        err = for_each_tagged(t, r->partition, *tag, derive_one, &keys);
    t->fresh_partition = -1;
    if (!err)
        err = state_buf_set_derive_pending(t->buf, r->partition, false);
    log_debug("task", "%s: partition %d: derived state rebuilt from %llu keys in %lld ms",
              t->def->name, r->partition, (unsigned long long)keys, (long long)(hf_mono_ms() - t0));
    return err;
}

static int restore_partition(task_t *t, int32_t p, int64_t group_next)
{
    int64_t input_next = -1, cl_next = -1, current_at_ms = -1;
    int err = state_get_offsets(t->st, p, &input_next, &cl_next, &current_at_ms);
    if (!err)
        err = check_group_offset(t, p, group_next, input_next);
    if (err)
        return err;
    int64_t started_ms = hf_wall_ms();
    bool full = cl_next < 0 || state_too_old(t, p, cl_next, current_at_ms);
    if (full) {
        /* No record of what this state reflects, or too old to trust: start
         * from nothing. The input offset is the group's, not ours: keep it. */
        err = state_drop_partition(t->st, p, t->errstr, sizeof t->errstr);
        if (err)
            return err;
        cl_next = -1;
    }
    t->input_next[p] = input_next;
    /* Saved with each restored chunk: an incremental restore is only as current
     * as the state it started from; a full one as the moment it started (every
     * tombstone since is still in the changelog), so a crash mid-rebuild can
     * resume it instead of starting over. */
    restore_t r = {t, p, 0, full ? started_ms : current_at_ms, NULL, 0, false};
    /* From nothing, the stage's derived state waits for one pass at the end,
     * marked before any value lands (a restart resumes and still derives). */
    if (full && t->def->reindex) {
        err = state_buf_set_derive_pending(t->buf, p, true);
        if (!err)
            err = state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
    } else if (t->def->reindex) {
        err = state_get_derive_pending(t->st, p, &r.derive_after);
        if (err)
            snprintf(t->errstr, sizeof t->errstr, "reading the derive mark: %s", hf_err_name(err));
    }
    r.derive_after = r.derive_after || (full && t->def->reindex);
    /* From nothing, the whole changelog: a bulk load (state_load.h). */
    if (full && !err)
        err = state_load_new(t->st, p, (size_t)t->o.cfg->restore_run_mib << 20, &r.load, t->errstr,
                             sizeof t->errstr);
    int64_t next = -1;
    if (!err)
        err = kafka_reader_read_to_end(t->rd, topic_name(t->def->changelog_topic), p,
                                       cl_next < 0 ? KAFKA_OFFSET_BEGINNING : cl_next, 30000,
                                       restore_record, &r, &next, t->errstr, sizeof t->errstr);
    if (!err && r.load && state_load_run_records(r.load) > 0)
        err = restore_run_end(&r, next);
    if (!err && r.load)
        err = restore_finish_sealed(&r);
    if (!err && r.derive_after)
        err = restore_derive(&r);
    uint64_t files = r.load ? state_load_files(r.load) : 0;
    state_load_destroy(r.load);
    if (!err)
        err = state_buf_set_offsets(t->buf, p, input_next, next, hf_wall_ms());
    if (!err)
        err = state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
    if (err) {
        log_error("task", "%s: restore of partition %d failed: %s", t->def->name, p, t->errstr);
        state_buf_clear(t->buf);
        return err;
    }
    t->cl_next[p] = next;
    t->cl_last[p] = next - 1;
    int64_t took_ms = hf_wall_ms() - started_ms;
    t->stats.restored_records += r.records;
    t->stats.restore_ms += (uint64_t)took_ms;
    metrics_add(t->metrics, HF_M_RESTORED, r.records);
    metrics_add(t->metrics, HF_M_RESTORE_MS, (uint64_t)took_ms);
    log_info("task",
             "%s: partition %d restored: %llu changelog records from offset %lld in %lld ms "
             "(%llu table files loaded)",
             t->def->name, p, (unsigned long long)r.records, (long long)cl_next, (long long)took_ms,
             (unsigned long long)files);
    return HF_OK;
}

/* Admission checks each record's partition against its key's: learn the
 * input topics' partition counts (a topic may have grown since the last
 * assignment). */
static int learn_partition_counts(task_t *t)
{
    admit_init(&t->admit, t->def);
    for (size_t i = 0; i < t->def->input_topics_count; i++) {
        int32_t count = 0;
        int err =
            kafka_partition_count(t->rd, t->inputs[i], 10000, &count, t->errstr, sizeof t->errstr);
        if (err) {
            log_error("task", "%s: %s", t->def->name, t->errstr);
            return err;
        }
        admit_set_partitions(&t->admit, i, count);
    }
    return HF_OK;
}

/* The committed offset of partition p of the primary input in tps. */
static int64_t primary_committed(const task_t *t, const kafka_tp_t *tps, const int64_t *committed,
                                 size_t count, int32_t p)
{
    for (size_t i = 0; i < count; i++)
        if (tps[i].partition == p && strcmp(tps[i].topic, t->inputs[0]) == 0)
            return committed[i];
    return KAFKA_OFFSET_NONE;
}

/* Before the committed offsets of a new assignment are fetched: the members
 * that were in the group at the last assignment and are gone now left it
 * without a word — killed, or stalled past their session. A transaction such
 * a member left open holds back the stable offsets (and every read_committed
 * read of what it wrote) until the broker's transaction timeout aborts it; a
 * producer initialised with the member's transactional id (its
 * group.instance.id) aborts it now, and fences the member should it come back
 * as a zombie (it exits on its next commit; a supervisor restarts it). Only
 * the current member whose id sorts first fences: two survivors initialising
 * the same id at once make the second wait for the first's abort (measured:
 * 570-870 ms instead of ~13 ms). Best effort: on an error the wait for the
 * transaction timeout remains. */
static void fence_departed(void *opaque)
{
    task_t *t = opaque;
    static _Thread_local char now[TASK_GROUP_MEMBERS_MAX][KAFKA_INSTANCE_ID_LEN_MAX];
    size_t count = 0;
    int err = kafka_consumer_group_instance_ids(t->kc, now, TASK_GROUP_MEMBERS_MAX, &count, 5000,
                                                t->errstr, sizeof t->errstr);
    if (err) {
        log_warn("task", "%s: cannot tell which members left the group: %s", t->def->name,
                 t->errstr);
        return;
    }
    if (count > TASK_GROUP_MEMBERS_MAX)
        count = TASK_GROUP_MEMBERS_MAX;
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s-%s-", t->o.cfg->app_id, t->def->name);
    /* Classic: every member sees every rebalance, so the first fences alone.
     * Incremental (KIP-848): only members whose assignment changes are called,
     * with partitions (kafka.c skips this for empty ones): each fences. */
    bool first = true;
    for (size_t j = 0; j < count && first && !kafka_consumer_incremental(t->kc); j++)
        first = strcmp(t->txn_id, now[j]) <= 0;
    for (size_t i = 0; i < t->members_count && first; i++) {
        const char *id = t->members[i];
        bool present = strcmp(id, t->txn_id) == 0;
        for (size_t j = 0; j < count && !present; j++)
            present = strcmp(id, now[j]) == 0;
        if (present || strncmp(id, prefix, strlen(prefix)) != 0)
            continue;
        int64_t t0 = hf_mono_ms();
        kafka_conf_t fconf = t->kconf;
        char client_id[KAFKA_INSTANCE_ID_LEN_MAX + 16];
        snprintf(client_id, sizeof client_id, "%s-fencer", t->txn_id);
        fconf.client_id = client_id;
        err = kafka_txn_fence(&fconf, id, t->o.cfg->transaction_timeout_ms, 10000, t->errstr,
                              sizeof t->errstr);
        if (err)
            log_warn("task", "%s: fencing %s, which left the group, failed: %s", t->def->name, id,
                     t->errstr);
        else
            log_info("task",
                     "%s: fenced %s, which left the group (its open transaction is "
                     "aborted) in %lld ms",
                     t->def->name, id, (long long)(hf_mono_ms() - t0));
    }
    memcpy(t->members, now, count * sizeof now[0]);
    t->members_count = count;
}

/* The committed offsets in tps are stable (kafka.h): every transaction of a
 * previous owner has ended, so the changelog read below holds all it wrote. */
static int on_assign(void *opaque, const kafka_tp_t *tps, const int64_t *committed, size_t count)
{
    task_t *t = opaque;
    metrics_task_restoring(t->metrics, true); /* for /readyz */
    int err = learn_partition_counts(t);
    if (err)
        return err;
    for (size_t i = 0; i < count; i++) {
        int32_t p = tps[i].partition;
        if (p < 0 || p >= HF_PARTITIONS_MAX) {
            log_error("task", "partition %d is beyond HF_PARTITIONS_MAX %d", p, HF_PARTITIONS_MAX);
            return HF_ERR_LIMIT;
        }
        int ti = topic_index(t, tps[i].topic);
        if (ti >= 0)
            t->lag_next[ti][p] = committed[i];
        if (t->owned[p])
            continue; /* co-partitioned topics share partition p */
        int64_t assigned_at_ms = hf_wall_ms();
        owners_claim(t->o.owners, p); /* before the restore: the standby stops writing p */
        t->owned[p] = true;
        err = restore_partition(t, p, primary_committed(t, tps, committed, count, p));
        if (err)
            return err;
        t->assigned_at_ms[p] = assigned_at_ms;
        metrics_add_partitions(t->metrics, 1);
    }
    if (t->o.owners) /* after every partition of this assignment was claimed */
        atomic_store(&t->o.owners->assigned, true);
    metrics_task_restoring(t->metrics, false);
    return HF_OK;
}

/* The partitions in tps are taken away: all of the assignment (classic,
 * eager) or some (the consumer protocol, incremental). State stays on disk:
 * when a partition comes back, restore resumes from the changelog offset it
 * reflects instead of replaying everything. */
static void on_revoke(void *opaque, const kafka_tp_t *tps, size_t count)
{
    task_t *t = opaque;
    int64_t released = 0;
    char list[256] = ""; /* which: the fault suites follow ownership by it */
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t p = tps[i].partition;
        if (p < 0 || p >= HF_PARTITIONS_MAX)
            continue;
        t->revoked = true;
        t->revoked_p[p] = true;
        if (!t->owned[p])
            continue; /* co-partitioned topics share partition p */
        /* Its state is written: gather polls between batches. */
        owners_release(t->o.owners, p);
        metrics_partition_gone(t->metrics, p);
        t->owned[p] = false;
        t->assigned_at_ms[p] = 0;
        released++;
        int n = at < sizeof list ? snprintf(list + at, sizeof list - at, " %d", p) : 0;
        at += n > 0 ? (size_t)n : 0;
    }
    metrics_add_partitions(t->metrics, -released);
    log_info("task", "%s: %zu partitions revoked (released:%s)", t->def->name, count,
             at < sizeof list ? list : " ...");
}

/* After a revoke: the records gathered from a revoked partition go (it may
 * belong to another task now, and its position was reset, so a later
 * assignment fetches them again from the committed offsets); those of
 * partitions kept (an incremental revoke) stay, since nothing fetches them
 * again. The records from index keep on came after the callbacks. */
static void drop_revoked(task_t *t, size_t keep)
{
    size_t n = 0;
    for (size_t i = 0; i < t->msgs_count; i++) {
        int32_t p = t->msgs[i].partition;
        bool gone = i < keep && p >= 0 && p < HF_PARTITIONS_MAX && t->revoked_p[p];
        if (gone)
            kafka_msg_release(&t->msgs[i]);
        else
            t->msgs[n++] = t->msgs[i];
    }
    t->msgs_count = n;
    t->revoked = false;
    memset(t->revoked_p, 0, sizeof t->revoked_p);
}

/* ---- the loop */

/* Under the consumer protocol a member given nothing is never called back (no
 * change to report), so the standby, which waits for a first assignment, is
 * let go once a session has passed without one. */
static void standby_start_unassigned(task_t *t)
{
    task_owners_t *o = t->o.owners;
    if (!o || !kafka_consumer_incremental(t->kc) || atomic_load(&o->assigned) ||
        hf_mono_ms() - t->created_mono_ms < t->o.cfg->consumer_session_timeout_ms)
        return;
    atomic_store(&o->assigned, true);
    log_info("task", "%s: no partitions assigned %d ms after joining: the standby starts",
             t->def->name, t->o.cfg->consumer_session_timeout_ms);
}

/* Appends what the consumer has to t->msgs: waits for the first record (bounded by
 * idle_poll_ms), then takes whatever else is already there without waiting — or,
 * while the stage's pacing asks for a wait (pacing.h: a configured floor after
 * the last commit, a period since the last transaction began under load), goes
 * on gathering until then. */
static int gather(task_t *t)
{
    const hf_config_t *cfg = t->o.cfg;
    size_t max = (size_t)cfg->batch_records_max;
    int64_t started = hf_mono_ms();
    int64_t ready_at_ms = pacing_ready_at_ms(&t->pacing, t->last_begin_ms, t->last_commit_ms);
    while (t->msgs_count < max) {
        int timeout = t->msgs_count == 0 ? cfg->idle_poll_ms : 0;
        if (t->msgs_count == 0 && t->def->tick) {
            int64_t until_tick = t->next_tick_ms - hf_wall_ms();
            timeout = until_tick < 0 ? 0 : until_tick < timeout ? (int)until_tick : timeout;
        }
        int64_t until_ready = ready_at_ms - hf_mono_ms();
        if (t->msgs_count > 0 && until_ready > 0)
            timeout = (int)(until_ready < pacing_wait_max_ms(&t->pacing)
                                ? until_ready
                                : pacing_wait_max_ms(&t->pacing));
        int rc = kafka_consumer_poll(t->kc, timeout, &t->msgs[t->msgs_count], t->errstr,
                                     sizeof t->errstr);
        standby_start_unassigned(t);
        if (t->revoked) {
            /* A record this poll returned came after the callbacks and belongs
             * to the new assignment. */
            size_t before = t->msgs_count;
            if (rc == 1)
                t->msgs_count++;
            drop_revoked(t, before);
            started = hf_mono_ms();
            continue;
        }
        if (rc < 0) {
            log_warn("task", "%s: poll: %s", t->def->name, t->errstr);
            return rc == HF_ERR_FATAL || rc == HF_ERR_CONFIG ? rc : HF_OK;
        }
        if (rc == 0 && !(t->msgs_count > 0 && hf_mono_ms() < ready_at_ms))
            break;
        if (rc == 0)
            continue;
        t->msgs_count++;
        int64_t now_ms = hf_mono_ms();
        if (now_ms - started >= cfg->batch_time_max_ms && now_ms >= ready_at_ms)
            break;
    }
    return HF_OK;
}

/* Reports how far the consumer is behind on every input partition this task
 * owns (metrics_flow.h); a partition whose lag is not known yet is left out. */
static void report_lag(task_t *t, int64_t mono_ms)
{
    kafka_tp_t tps[TASK_INPUT_TOPICS_MAX * HF_PARTITIONS_MAX];
    int64_t next[TASK_INPUT_TOPICS_MAX * HF_PARTITIONS_MAX];
    int64_t lags[TASK_INPUT_TOPICS_MAX * HF_PARTITIONS_MAX];
    size_t n = 0;
    t->lag_reported_ms = mono_ms;
    for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++)
        for (size_t ti = 0; t->owned[p] && ti < t->def->input_topics_count; ti++) {
            tps[n] = (kafka_tp_t){t->inputs[ti], p};
            next[n++] = t->lag_next[ti][p];
        }
    kafka_consumer_lags(t->kc, tps, next, n, lags);
    for (size_t i = 0; i < n; i++)
        metrics_consumer_lag(t->metrics, (size_t)topic_index(t, tps[i].topic), tps[i].partition,
                             lags[i]);
}

/* Applies gathered records (stopping early when the batch is full), runs timers
 * and the stage's batch end. Returns how many records it applied. */
static int apply_batch(task_t *t, size_t *applied)
{
    t->ctx.now_ms = hf_wall_ms();
    size_t i = 0;
    for (; i < t->msgs_count && t->outs_count < TASK_OUTPUTS_SOFT_MAX; i++) {
        int err = apply_record(t, &t->msgs[i]);
        trace_end(&t->ctx);
        if (err) {
            *applied = i;
            return err;
        }
    }
    *applied = i;
    int err = run_ticks(t);
    if (err)
        return err;
    t->ctx.msg = NULL;
    if (t->def->batch_end && (i > 0 || t->written_count > 0))
        return t->def->batch_end(&t->ctx);
    return HF_OK;
}

/* Marks every owned partition's state current now (this task is its only
 * writer), at most every TASK_STATE_AGE_REFRESH_MS, so a partition that saw no
 * traffic is not taken for stale after a restart. Runs between batches, when
 * the buffer is empty. */
static int refresh_state_age(task_t *t)
{
    int64_t now = hf_wall_ms();
    if (now - t->age_refreshed_ms < TASK_STATE_AGE_REFRESH_MS || state_buf_count(t->buf) != 0)
        return HF_OK;
    t->age_refreshed_ms = now;
    for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++) {
        if (!t->owned[p] || t->cl_next[p] < 0)
            continue;
        int err = state_buf_set_offsets(t->buf, p, t->input_next[p], t->cl_next[p], now);
        if (err)
            return err;
    }
    return state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
}

static int task_step(task_t *t)
{
    int err = refresh_state_age(t);
    if (err) {
        log_error("task", "%s: state age refresh failed: %s", t->def->name, t->errstr);
        return HF_ERR_FATAL;
    }
    err = gather(t);
    if (err)
        return err;
    batch_reset(t);
    size_t applied = 0;
    err = apply_batch(t, &applied);
    int64_t mono_ms = hf_mono_ms();
    pacing_observe(&t->pacing, mono_ms, (int64_t)applied);
    if (applied > 0)
        metrics_records_applied(t->metrics, mono_ms);
    if (mono_ms - t->lag_reported_ms >= TASK_LAG_REPORT_MS)
        report_lag(t, mono_ms);
    if (err == HF_OK && applied == 0 && t->outs_count == 0 && t->written_count == 0) {
        /* Idle, but a tick may have left local writes (derived state: timers it
         * fired, the gateway's sweep cursor). They need no transaction; write them
         * now, so no buffer outlives this step into a revoke and reassignment. */
        if (state_buf_count(t->buf) == 0)
            return HF_OK;
        err = state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
        if (err)
            log_error("task", "%s: writing local state failed: %s", t->def->name, t->errstr);
        return err ? HF_ERR_FATAL : HF_OK;
    }
    if (err == HF_OK)
        err = commit_batch(t);
    if (err == HF_OK) {
        release_msgs(t, applied);
        return HF_OK;
    }
    if (err == HF_ERR_FATAL)
        return err;
    return abort_batch(t, err);
}

/* ---- the standby */

/* Brings the set of partitions the standby follows in line with the owners:
 * every partition of the changelog no task here owns. A partition it starts
 * to follow (or one a task owned since the standby loaded it) resumes from the
 * offsets stored with its state — rebuilt from the beginning when there are
 * none or they are too old, as a restore would. */
static int standby_sync(task_t *t)
{
    task_owners_t *o = t->o.owners;
    if (t->sb_synced && atomic_load(&o->generation) == t->sb_generation)
        return HF_OK;
    const char *topic = topic_name(t->def->changelog_topic);
    int32_t count = 0;
    int err = kafka_partition_count(t->rd, topic, 10000, &count, t->errstr, sizeof t->errstr);
    if (err)
        return err;
    if (count > HF_PARTITIONS_MAX)
        count = HF_PARTITIONS_MAX; /* on_assign refuses the others */
    bool want[HF_PARTITIONS_MAX];
    uint32_t epoch[HF_PARTITIONS_MAX];
    pthread_mutex_lock(&o->mu);
    t->sb_generation = atomic_load(&o->generation);
    for (int32_t p = 0; p < count; p++) {
        want[p] = !o->owned[p];
        epoch[p] = o->epoch[p];
    }
    pthread_mutex_unlock(&o->mu);
    int32_t parts[HF_PARTITIONS_MAX];
    int64_t offsets[HF_PARTITIONS_MAX];
    size_t n = 0;
    for (int32_t p = 0; p < count; p++) {
        if (!want[p]) {
            t->sb_following[p] = false;
            metrics_standby_lag(t->metrics, p, -1);
            continue;
        }
        if (!t->sb_following[p] || t->sb_epoch[p] != epoch[p]) {
            int64_t input_next = -1, cl_next = -1, current_at_ms = -1;
            err = state_get_offsets(t->st, p, &input_next, &cl_next, &current_at_ms);
            if (err)
                return err;
            if (cl_next < 0 || state_too_old(t, p, cl_next, current_at_ms)) {
                /* The same rule as restore_partition: a full read from now on,
                 * current as of its start. A task claiming p meanwhile waits
                 * for the lock, and restores after this drop. */
                pthread_mutex_lock(&o->mu);
                if (!o->owned[p])
                    err = state_drop_partition(t->st, p, t->errstr, sizeof t->errstr);
                pthread_mutex_unlock(&o->mu);
                if (err)
                    return err;
                cl_next = -1;
                current_at_ms = hf_wall_ms();
            }
            t->input_next[p] = input_next;
            t->cl_next[p] = cl_next;
            t->sb_current_at_ms[p] = current_at_ms;
            t->sb_epoch[p] = epoch[p];
            t->sb_following[p] = true;
            t->sb_since_ms[p] = hf_mono_ms();
            t->sb_from[p] = cl_next;
            t->sb_applied[p] = 0;
            t->sb_caught_up[p] = false;
            log_info("task", "%s: standby follows partition %d from changelog offset %lld",
                     t->def->name, p, (long long)cl_next);
        }
        parts[n] = p;
        offsets[n++] = t->cl_next[p] < 0 ? KAFKA_OFFSET_BEGINNING : t->cl_next[p];
    }
    for (int32_t p = count; p < HF_PARTITIONS_MAX; p++)
        t->sb_following[p] = false;
    err = kafka_reader_assign(t->rd, topic, parts, offsets, n, t->errstr, sizeof t->errstr);
    if (!err)
        t->sb_synced = true;
    return err;
}

/* Gathers what the reader has: records into t->msgs, the end-of-partition
 * positions it reached into eof[] (-1: none). */
static int standby_gather(task_t *t, int64_t *eof)
{
    for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++)
        eof[p] = -1;
    int timeout = TASK_STANDBY_POLL_MS;
    while (t->msgs_count < TASK_STANDBY_BATCH_MAX) {
        kafka_msg_t *m = &t->msgs[t->msgs_count];
        int rc = kafka_reader_poll(t->rd, timeout, m, t->errstr, sizeof t->errstr);
        if (rc == 0)
            break;
        if (rc < 0) {
            /* The broker away for a while: the standby only falls behind. */
            log_warn("task", "%s: standby: %s", t->def->name, t->errstr);
            break;
        }
        timeout = 0;
        if (rc == 2) {
            if (m->partition >= 0 && m->partition < HF_PARTITIONS_MAX)
                eof[m->partition] = m->offset;
            continue;
        }
        t->msgs_count++;
    }
    return HF_OK;
}

/* Applies the gathered records of partitions still followed and not owned,
 * then writes them with the offsets reached, under the owners' lock: a task
 * claiming one of them waits until the write is done. */
static int standby_apply(task_t *t, const int64_t *eof, uint64_t *applied_out)
{
    task_owners_t *o = t->o.owners;
    bool touched[HF_PARTITIONS_MAX] = {false};
    uint64_t applied = 0;
    int err = HF_OK;
    int64_t now = hf_wall_ms();
    pthread_mutex_lock(&o->mu);
    for (size_t i = 0; i < t->msgs_count && !err; i++) {
        const kafka_msg_t *m = &t->msgs[i];
        int32_t p = m->partition;
        if (p < 0 || p >= HF_PARTITIONS_MAX || !t->sb_following[p] || o->owned[p] ||
            o->epoch[p] != t->sb_epoch[p] || m->offset < t->cl_next[p])
            continue; /* owned here now, or already in the state */
        bool ok = false;
        err = changelog_apply(t, p, m, true, &ok);
        applied += ok;
        t->sb_applied[p] += ok;
        t->cl_next[p] = m->offset + 1;
        touched[p] = true;
    }
    for (int32_t p = 0; p < HF_PARTITIONS_MAX && !err; p++) {
        if (!t->sb_following[p] || o->owned[p] || o->epoch[p] != t->sb_epoch[p])
            continue;
        if (eof[p] >= 0) { /* caught up: current now */
            if (eof[p] > t->cl_next[p])
                t->cl_next[p] = eof[p]; /* markers and aborted records read past */
            t->sb_current_at_ms[p] = now;
            touched[p] = true;
            if (!t->sb_caught_up[p]) { /* how long a standby takes to be warm */
                t->sb_caught_up[p] = true;
                log_info("task",
                         "%s: standby caught up with partition %d: %llu changelog records "
                         "from offset %lld in %lld ms",
                         t->def->name, p, (unsigned long long)t->sb_applied[p],
                         (long long)t->sb_from[p], (long long)(hf_mono_ms() - t->sb_since_ms[p]));
            }
        }
        if (touched[p])
            err = state_buf_set_offsets(t->buf, p, t->input_next[p], t->cl_next[p],
                                        t->sb_current_at_ms[p]);
    }
    if (!err && state_buf_count(t->buf) > 0) /* an idle poll writes nothing */
        err = state_buf_write(t->st, t->buf, t->errstr, sizeof t->errstr);
    else if (err)
        state_buf_clear(t->buf);
    pthread_mutex_unlock(&o->mu);
    *applied_out = applied;
    return err;
}

static int standby_step(task_t *t)
{
    if (!atomic_load(&t->o.owners->assigned)) {
        hf_sleep_ms(TASK_STANDBY_POLL_MS);
        return HF_OK;
    }
    int err = standby_sync(t);
    if (err) {
        log_warn("task", "%s: standby cannot follow the changelog yet: %s", t->def->name,
                 t->errstr);
        hf_sleep_ms(1000);
        return HF_OK;
    }
    int64_t eof[HF_PARTITIONS_MAX];
    err = standby_gather(t, eof);
    uint64_t applied = 0;
    if (!err)
        err = standby_apply(t, eof, &applied);
    release_msgs(t, t->msgs_count);
    if (err) {
        log_error("task", "%s: standby state write failed: %s", t->def->name, t->errstr);
        return HF_ERR_FATAL;
    }
    t->stats.standby_records += applied;
    metrics_add(t->metrics, HF_M_STANDBY_APPLIED, applied);
    const char *topic = topic_name(t->def->changelog_topic);
    for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++) {
        if (!t->sb_following[p])
            continue;
        int64_t high = kafka_reader_high_watermark(t->rd, topic, p);
        int64_t pos = t->cl_next[p] < 0 ? 0 : t->cl_next[p];
        metrics_standby_lag(t->metrics, p, high < pos ? 0 : high - pos);
    }
    return HF_OK;
}

static int standby_run(task_t *t, char *errstr, size_t errstr_size)
{
    char name[16];
    snprintf(name, sizeof name, "hf-%s-sb", t->def->name);
    pthread_setname_np(pthread_self(), name);
    while (!atomic_load(t->o.stop)) {
        int err = standby_step(t);
        task_alive(t);
        if (err) {
            snprintf(errstr, errstr_size, "%s standby: %s: %s", t->def->name, hf_err_str(err),
                     t->errstr);
            return err;
        }
    }
    return HF_OK;
}

int task_run(task_t *t, char *errstr, size_t errstr_size)
{
    if (t->o.standby)
        return standby_run(t, errstr, errstr_size);
    /* "hf-gateway-0": top -H and /proc/<pid>/task/<tid>/comm tell the stages apart
     * (the kernel keeps 15 characters). */
    char name[16];
    snprintf(name, sizeof name, "hf-%s-%d", t->def->name, t->o.thread_index);
    pthread_setname_np(pthread_self(), name);
    int aborts_in_row = 0;
    while (!atomic_load(t->o.stop)) {
        uint64_t aborts = t->stats.aborts;
        int err = task_step(t);
        task_alive(t);
        aborts_in_row = t->stats.aborts > aborts ? aborts_in_row + 1 : 0;
        metrics_task_heartbeat(t->metrics, aborts_in_row); /* for /healthz */
        if (err == HF_OK && aborts_in_row < HF_TXN_RETRIES_MAX)
            continue;
        snprintf(errstr, errstr_size, "%s task: %s: %s", t->def->name,
                 err ? hf_err_str(err) : "too many aborted transactions in a row", t->errstr);
        return err ? err : HF_ERR_FATAL;
    }
    return HF_OK;
}

int task_new(const task_opts_t *opts, task_t **t_out, char *errstr, size_t errstr_size)
{
    task_t *t = calloc(1, sizeof *t);
    if (!t)
        return HF_ERR_NOMEM;
    int err = HF_ERR_NOMEM;
    t->o = *opts;
    t->def = opts->def;
    t->metrics = metrics_stage(t->def->name);
    pacing_conf_t pacing = {0};
    if (t->def->pacing)
        t->def->pacing(opts->cfg, &pacing);
    pacing_init(&t->pacing, &pacing);
    t->st = opts->st;
    t->ctx.t = t;
    t->fresh_partition = -1;
    t->created_mono_ms = hf_mono_ms();
    hf_assert(t->def->input_topics_count <= TASK_INPUT_TOPICS_MAX);
    hf_assert(!t->def->init || opts->env); /* built before any task starts (main.c) */
    for (int p = 0; p < HF_PARTITIONS_MAX; p++) {
        t->cl_next[p] = t->cl_last[p] = t->input_next[p] = -1;
        for (size_t ti = 0; ti < TASK_INPUT_TOPICS_MAX; ti++)
            t->lag_next[ti][p] = -1;
    }
    const hf_config_t *cfg = opts->cfg;
    if (opts->standby) {
        hf_assert(opts->owners);
        snprintf(t->client_id, sizeof t->client_id, "%s-%s-%s-standby", cfg->app_id, t->def->name,
                 cfg->instance_id);
        t->kconf = (kafka_conf_t){cfg->bootstrap, t->client_id, NULL};
        t->buf = state_buf_new(t->st);
        t->msgs = calloc(TASK_STANDBY_BATCH_MAX, sizeof *t->msgs);
        if (!t->buf || !t->msgs)
            goto fail;
        err = kafka_reader_new(&t->kconf, &t->rd, errstr, errstr_size);
        if (err)
            goto fail;
        *t_out = t;
        return HF_OK;
    }
    snprintf(t->group_id, sizeof t->group_id, "%s-%s", cfg->app_id, t->def->name);
    snprintf(t->txn_id, sizeof t->txn_id, "%s-%s-%s-%d", cfg->app_id, t->def->name,
             cfg->instance_id, opts->thread_index);
    snprintf(t->client_id, sizeof t->client_id, "%s", t->txn_id);
    /* kafka_config_file and kafka_overrides reach this and every other client
     * through the process's client configuration (main.c, kafka.h). */
    t->kconf = (kafka_conf_t){cfg->bootstrap, t->client_id, NULL};
    t->buf = state_buf_new(t->st);
    t->msgs = calloc((size_t)cfg->batch_records_max, sizeof *t->msgs);
    if (!t->buf || !t->msgs || written_grow(t) != HF_OK)
        goto fail;

    /* Producer first: init_transactions fences a predecessor with the same
     * transactional.id and settles its open transaction, so the restore that
     * follows reads a stable changelog. */
    err = kafka_producer_new(&t->kconf, t->txn_id, cfg->transaction_timeout_ms, &t->kp, errstr,
                             errstr_size);
    if (!err)
        err = kafka_txn_init(t->kp, 60000, errstr, errstr_size);
    if (!err)
        err = kafka_reader_new(&t->kconf, &t->rd, errstr, errstr_size);
    if (err)
        goto fail;
    for (size_t i = 0; i < t->def->input_topics_count; i++) {
        t->inputs[i] = topic_name(t->def->input_topics[i]);
        metrics_input_topic(t->metrics, i, t->inputs[i]);
    }
    metrics_flow_declare(t->metrics, t->def->metrics_series);
    /* Committed offsets wait for a stalled previous owner's transaction,
     * which the broker aborts after its transaction timeout at the latest. */
    kafka_rebalance_t rb = {.before_assign = fence_departed,
                            .on_assign = on_assign,
                            .on_revoke = on_revoke,
                            .opaque = t,
                            .committed_timeout_ms = 2 * cfg->transaction_timeout_ms + 10000};
    /* The session decides how soon the others take over after this process
     * dies (config.h): the consumer's settings under the classic protocol, the
     * group's under KIP-848's. */
    kafka_group_t group = {.group_id = t->group_id,
                           .instance_id = t->txn_id,
                           .consumer_protocol = strcmp(cfg->group_protocol, "consumer") == 0,
                           .session_timeout_ms = cfg->consumer_session_timeout_ms,
                           .heartbeat_interval_ms = cfg->consumer_heartbeat_interval_ms};
    err = kafka_consumer_new(&t->kconf, &group, t->inputs, t->def->input_topics_count, &rb, &t->kc,
                             errstr, errstr_size);
    if (err)
        goto fail;
    *t_out = t;
    return HF_OK;
fail:
    task_destroy(t);
    return err;
}

void task_stats(const task_t *t, task_stats_t *out)
{
    *out = t->stats;
}

void task_destroy(task_t *t)
{
    if (!t)
        return;
    if (t->msgs)
        release_msgs(t, t->msgs_count);
    kafka_consumer_destroy(t->kc);
    /* A consumer closed after a fatal error (fenced by a member with its
     * group.instance.id) revokes nothing, yet its partitions are not this task's
     * any more: whoever gets them next (this task started again, another thread,
     * the standby) claims them. The buffer that was not written goes with it. */
    for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++) {
        if (!t->owned[p])
            continue;
        owners_release(t->o.owners, p);
        t->owned[p] = false;
        metrics_add_partitions(t->metrics, -1);
        metrics_partition_gone(t->metrics, p);
    }
    kafka_reader_destroy(t->rd);
    kafka_producer_destroy(t->kp);
    state_buf_destroy(t->buf);
    free(t->msgs);
    free(t->arena.data);
    free(t->outs);
    free(t->written);
    free(t->slots);
    free(t);
}
