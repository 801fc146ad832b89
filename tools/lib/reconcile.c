/* The reconciler's driver: reads every holdfast topic of the deployment from the
 * beginning (read_committed, partition by partition, in the checker's feeding
 * order), feeds the checker, and judges whether the snapshot it read is
 * consistent: after a pass it looks again at the end of every partition the
 * cross-topic checks use; if any moved, a transaction committed during the
 * pass, the topics were read at different moments, and a pass with
 * cross-topic violations is repeated (bounded) before they are believed.
 *
 * With K shards (reconcile.h) an attempt is K passes. The first reads every
 * topic and pins where each partition ended; the others read only the topics
 * that hold pair-keyed records, each partition up to its pin, so every pass
 * sees the same snapshot. Counter changelog records of another shard's pairs
 * are skipped by their key, before they are decoded. With a spill directory
 * the first pass also copies each later shard's records (and the ledger) to
 * local files (reconcile_spill.c), and the later passes read those instead. */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "codec.h"
#include "hf_assert.h"
#include "hf_clock.h"
#include "kafka.h"
#include "reconcile_int.h"
#include "topics.h"

/* Reply topics named by requests' reply_to, beyond holdfast.replies. */
#define RC_REPLY_TOPICS_MAX      64
/* Partitions whose end a pass remembers for the quiet check (and pins). */
#define RC_ENDS_MAX              4096
/* A record callback's "stop here" (a pinned end, a peek): not an error. */
#define RC_STOP                  1
/* --memory-mb: bytes a pair costs at most in the tables (its entry, key, slots,
 * one feed stream, and the slack of entries grown by half: 345 MiB measured for
 * 1,000,005 pairs in one shard, 225 MiB for 500,329 in another), a hold or
 * sale, a reservation (with its reply keys), and what the process needs
 * besides (librdkafka's buffers, the histograms). */
#define RC_PAIR_BYTES_EST        500
#define RC_HOLD_BYTES_EST        200
#define RC_RESERVATION_BYTES_EST 260
#define RC_BASE_BYTES_EST        (96u << 20)

typedef struct drv drv_t;
typedef int (*drv_fn)(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *msg,
                      const hf_record_t *rec);

typedef struct {
    char topic[HF_TOPIC_LEN_MAX + 1];
    int32_t partition;
    int64_t next;
} drv_end_t;

struct drv {
    const reconcile_opts_t *o;
    reconcile_limits_t limits; /* o's, raised to the data with --memory-mb (plan) */
    kafka_reader_t *rd;
    reconcile_t *rc;
    hf_record_t *rec;
    drv_fn fn;
    bool decode;
    bool tombstones; /* fn sees records without a value (rec NULL) */
    int32_t parts;   /* the partition count of the topic being read */
    uint64_t records;
    json_t *counts; /* records per topic */
    drv_end_t *ends;
    size_t ends_count;
    /* Shards: the pass (= shard) being read, and where each partition of the
     * every-pass topics ended in the first one. */
    uint32_t shards, pass;
    drv_end_t *pins;
    size_t pins_count;
    int64_t stop_at;    /* this partition's pin in a later pass; -1: none */
    int64_t part_first; /* the partition's first offset read; -1: none yet */
    uint64_t part_base;
    int step;                    /* index in steps[] being read; -1: another topic */
    rc_spill_t *spill;           /* the later passes' local copy, or NULL */
    uint64_t records_all;        /* every pass of every attempt */
    uint64_t records_first_pass; /* the snapshot: the last attempt's first pass */
    rc_progress_t progress;
    char reply_topics[RC_REPLY_TOPICS_MAX][HF_TOPIC_LEN_MAX + 1];
    size_t reply_topics_count;
    char *errstr;
    size_t errstr_size;
};

void reconcile_opts_default(reconcile_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->bootstrap = "127.0.0.1:9092";
    o->settle_attempts_max = 5;
    o->settle_wait_ms = 1000;
    o->timeout_ms = 10000;
    reconcile_limits_default(&o->limits);
}

static int spill_record(drv_t *d, const kafka_msg_t *m, const hf_record_t *r);

static int on_msg(void *opaque, const kafka_msg_t *msg)
{
    drv_t *d = opaque;
    if (d->stop_at >= 0 && msg->offset >= d->stop_at)
        return RC_STOP; /* past the first pass's snapshot */
    d->records++;
    d->records_all++;
    d->records_first_pass += d->pass == 0;
    d->progress.records++;
    if (d->part_first < 0)
        d->part_first = msg->offset;
    d->progress.offsets_done = d->part_base + (uint64_t)(msg->offset + 1 - d->part_first);
    rc_progress_tick(&d->progress);
    if (!d->fn || (!msg->value && !d->tombstones))
        return HF_OK; /* counted only, or a changelog tombstone */
    rc_pos_t pos = {msg->topic, msg->partition, msg->offset};
    char errstr[256];
    const hf_record_t *rec = NULL;
    if (d->decode && msg->value &&
        codec_decode(msg->value, msg->value_len, d->rec, errstr, sizeof errstr) == HF_OK)
        rec = d->rec;
    int err = d->spill && d->pass == 0 && d->step >= 0 ? spill_record(d, msg, rec) : HF_OK;
    return err ? err : d->fn(d, &pos, msg, rec);
}

static int remember_end(drv_t *d, drv_end_t *list, size_t *count, const char *topic, int32_t p,
                        int64_t next)
{
    if (*count == RC_ENDS_MAX) {
        snprintf(d->errstr, d->errstr_size,
                 "more than %d partitions to check: the deployment has more partitions than "
                 "hfctl reconcile follows",
                 RC_ENDS_MAX);
        return HF_ERR_LIMIT;
    }
    drv_end_t *e = &list[(*count)++];
    snprintf(e->topic, sizeof e->topic, "%s", topic);
    e->partition = p;
    e->next = next;
    return HF_OK;
}

/* A later pass reads a partition up to where the first one ended. */
static const drv_end_t *pin_of(const drv_t *d, const char *topic, int32_t p)
{
    for (size_t i = 0; i < d->pins_count; i++)
        if (d->pins[i].partition == p && strcmp(d->pins[i].topic, topic) == 0)
            return &d->pins[i];
    return NULL;
}

static int read_partition(drv_t *d, const char *topic, int32_t p, int64_t *next)
{
    const drv_end_t *pin = d->pass > 0 ? pin_of(d, topic, p) : NULL;
    if (d->pass > 0 && (!pin || pin->next <= 0)) {
        *next = pin ? pin->next : 0;
        return HF_OK; /* nothing there in the first pass */
    }
    d->stop_at = pin ? pin->next : -1;
    d->part_first = -1;
    int err = kafka_reader_read_to_end(d->rd, topic, p, KAFKA_OFFSET_BEGINNING, d->o->timeout_ms,
                                       on_msg, d, next, d->errstr, d->errstr_size);
    if (err == RC_STOP) {
        err = HF_OK;
        *next = d->stop_at;
    }
    if (d->part_first >= 0 && *next > d->part_first)
        d->part_base += (uint64_t)(*next - d->part_first);
    d->progress.offsets_done = d->part_base;
    d->stop_at = -1;
    return err;
}

/* Reads every partition of topic; remembers where each ended when quiet_check,
 * and (first pass) pins it when pin. A step without decode decodes what it
 * needs itself and sees tombstones. */
static int read_topic_ex(drv_t *d, int step, const char *topic, drv_fn fn, bool decode,
                         bool quiet_check, bool pin)
{
    int32_t parts = 0;
    int err =
        kafka_partition_count(d->rd, topic, d->o->timeout_ms, &parts, d->errstr, d->errstr_size);
    d->fn = fn;
    d->parts = parts;
    d->decode = decode;
    d->tombstones = fn && !decode;
    d->records = 0;
    d->step = step;
    d->progress.topic = topic;
    rc_progress_now(&d->progress);
    for (int32_t p = 0; !err && p < parts; p++) {
        int64_t next = 0;
        err = read_partition(d, topic, p, &next);
        if (!err && quiet_check && d->pass == 0)
            err = remember_end(d, d->ends, &d->ends_count, topic, p, next);
        if (!err && pin && d->pass == 0)
            err = remember_end(d, d->pins, &d->pins_count, topic, p, next);
    }
    if (!err && d->pass == 0)
        json_object_set_new(d->counts, topic, json_integer((json_int_t)d->records));
    return err;
}

static int read_topic(drv_t *d, const char *topic, drv_fn fn, bool decode, bool quiet_check)
{
    return read_topic_ex(d, -1, topic, fn, decode, quiet_check, false);
}

/* A record that is not what its topic holds, reported once: in the first pass
 * (every pass reads it), or, keyed_pass, in the one pass its key was read. */
static int foreign_report(drv_t *d, const rc_pos_t *pos, hf_rec_type_t want, bool keyed_pass)
{
    if (!keyed_pass && d->pass > 0)
        return HF_OK;
    char what[96];
    snprintf(what, sizeof what, "not a %s record", hf_rec_type_name(want));
    reconcile_foreign(d->rc, pos, what);
    return HF_OK;
}

static int foreign(drv_t *d, const rc_pos_t *pos, hf_rec_type_t want)
{
    return foreign_report(d, pos, want, false);
}

/* Decodes a changelog value into d->rec; NULL when it is not a record. */
static const hf_record_t *decode_value(drv_t *d, const kafka_msg_t *m)
{
    char errstr[256];
    if (!m->value || codec_decode(m->value, m->value_len, d->rec, errstr, sizeof errstr) != HF_OK)
        return NULL;
    return d->rec;
}

/* True when the pair a changelog key names is in the shard being read. */
static bool key_in_shard(const drv_t *d, const char *wh, const char *sku)
{
    return d->shards <= 1 || reconcile_pair_shard(wh, sku, d->shards) == d->pass;
}

static int on_dead_letter(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    if (!r || r->type != HF_REC_DEAD_LETTER)
        return foreign(d, pos, HF_REC_DEAD_LETTER);
    return reconcile_dead_letter(d->rc, &r->u.dead_letter);
}

/* What a changelog key names. */
typedef enum {
    KEY_OTHER = 0, /* not read: holds, indexes */
    KEY_BAD,       /* one of ours, malformed: a foreign record */
    KEY_STATE,     /* counter changelog "C<w>|<sku>|": a CounterState */
    KEY_ALLOT,     /* counter changelog "L<w>|<sku>|<holder %08x>": an AllotmentState */
    KEY_ESCROW,    /* gateway changelog "A<w>|<sku>": an EscrowState */
} key_kind_t;

static key_kind_t key_pair(const char *w, size_t wlen, const char *s, size_t slen, hf_wh_t wh,
                           hf_sku_t sku, key_kind_t kind)
{
    if (wlen > HF_WAREHOUSE_LEN_MAX || slen > HF_SKU_LEN_MAX)
        return KEY_BAD;
    snprintf(wh, sizeof(hf_wh_t), "%.*s", (int)wlen, w);
    snprintf(sku, sizeof(hf_sku_t), "%.*s", (int)slen, s);
    return kind;
}

static key_kind_t counter_key(const kafka_msg_t *m, hf_wh_t wh, hf_sku_t sku)
{
    const char *k = m->key;
    const size_t hex = 8;
    if (m->key_len > 0 && k[0] == 'L') {
        const char *bar = m->key_len > hex + 4 ? memchr(k + 1, '|', m->key_len - 1) : NULL;
        if (!bar || k[m->key_len - hex - 1] != '|' || bar >= k + m->key_len - hex - 1)
            return KEY_OTHER;
        size_t wlen = (size_t)(bar - (k + 1));
        return key_pair(k + 1, wlen, bar + 1, m->key_len - hex - 1 - wlen - 2, wh, sku, KEY_ALLOT);
    }
    if (m->key_len < 4 || k[0] != 'C' || k[m->key_len - 1] != '|')
        return KEY_OTHER;
    const char *bar = memchr(k + 1, '|', m->key_len - 1); /* the last byte at worst */
    size_t wlen = (size_t)(bar - (k + 1));
    return key_pair(k + 1, wlen, bar + 1, m->key_len - wlen - 3, wh, sku, KEY_STATE);
}

static key_kind_t gateway_key(const kafka_msg_t *m, hf_wh_t wh, hf_sku_t sku)
{
    const char *k = m->key;
    if (m->key_len < 4 || k[0] != 'A')
        return KEY_OTHER;
    const char *bar = memchr(k + 1, '|', m->key_len - 1);
    if (!bar)
        return KEY_BAD;
    size_t wlen = (size_t)(bar - (k + 1));
    return key_pair(k + 1, wlen, bar + 1, m->key_len - wlen - 2, wh, sku, KEY_ESCROW);
}

/* Counter changelog: "C<w>|<sku>|" keys hold CounterState, "L..." keys
 * AllotmentState; the rest (holds, indexes) and tombstones are not read. The
 * key names the pair: a record of another shard is skipped undecoded. */
static int on_changelog(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m,
                        const hf_record_t *unused)
{
    hf_wh_t wh;
    hf_sku_t sku;
    key_kind_t kind = m->value ? counter_key(m, wh, sku) : KEY_OTHER;
    bool allot = m->key_len > 0 && ((const char *)m->key)[0] == 'L';
    hf_rec_type_t want = allot ? HF_REC_ALLOTMENT_STATE : HF_REC_COUNTER_STATE;
    if (kind == KEY_BAD)
        return foreign(d, pos, want);
    if (kind == KEY_OTHER || !key_in_shard(d, wh, sku))
        return HF_OK; /* not read, or another shard's pass decodes it */
    const hf_record_t *r = decode_value(d, m);
    if (!r || r->type != want)
        return foreign_report(d, pos, want, true);
    if (allot)
        return reconcile_allotment_state(d->rc, pos, wh, sku, &r->u.allotment_state);
    return reconcile_counter_state(d->rc, pos, wh, sku, &r->u.counter_state);
}

/* Gateway changelog "A<w>|<sku>": partition p's allotment of a pair as the
 * gateway counts it (decoded here: the rest of the changelog is not read).
 * The first pass decodes every one (whether any EscrowState exists is
 * counted over all shards); a later one only its shard's. */
static int on_gateway_changelog(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m,
                                const hf_record_t *unused)
{
    hf_wh_t wh;
    hf_sku_t sku;
    key_kind_t kind = gateway_key(m, wh, sku);
    if (kind == KEY_BAD)
        return foreign(d, pos, HF_REC_ESCROW_STATE);
    if (kind == KEY_OTHER || (d->pass > 0 && !key_in_shard(d, wh, sku)))
        return HF_OK;
    const hf_record_t *r = decode_value(d, m);
    if (m->value && (!r || r->type != HF_REC_ESCROW_STATE))
        return foreign(d, pos, HF_REC_ESCROW_STATE);
    return reconcile_escrow_state(d->rc, pos, wh, sku, r ? &r->u.escrow_state : NULL);
}

static int on_level(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    if (!r || r->type != HF_REC_STOCK_LEVEL)
        return foreign(d, pos, HF_REC_STOCK_LEVEL);
    return reconcile_stock_level(d->rc, pos, &r->u.stock_level);
}

static int on_ledger(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    if (!r || r->type != HF_REC_LEDGER_EVENT)
        return foreign(d, pos, HF_REC_LEDGER_EVENT);
    return reconcile_ledger(d->rc, pos, &r->u.ledger_event);
}

static int on_result(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    if (r && r->type == HF_REC_ALLOTMENT_GRANT)
        return reconcile_allotment_grant(d->rc, pos, &r->u.allotment_grant);
    if (!r || r->type != HF_REC_COUNTER_RESULT)
        return foreign(d, pos, HF_REC_COUNTER_RESULT);
    return reconcile_counter_result(d->rc, pos, &r->u.counter_result);
}

/* A counter input off its key's partition (murmur2) is never applied where it
 * arrived: the counter forwards a copy to its key's partition (docs/ARCHITECTURE.md,
 * "Admission"), which this pass reads there; counting both would apply it twice. */
static bool off_its_partition(const drv_t *d, const kafka_msg_t *m)
{
    return d->parts > 0 && kafka_partition_for_key(m->key, m->key_len, d->parts) != m->partition;
}

/* Undecodable inputs are the counter's to dead-letter, not violations. */
static int on_commands(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    return r && !off_its_partition(d, m) ? reconcile_counter_input(d->rc, RC_IN_COMMANDS, pos, r)
                                         : HF_OK;
}

static int on_feed(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    return r && !off_its_partition(d, m) ? reconcile_counter_input(d->rc, RC_IN_STOCK_FEED, pos, r)
                                         : HF_OK;
}

/* Requests name the reply topics to read besides holdfast.replies. */
static int on_request(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    const char *to = !r                                ? ""
                     : r->type == HF_REC_RESERVE       ? r->u.reserve.reply_to
                     : r->type == HF_REC_COMMIT        ? r->u.commit.reply_to
                     : r->type == HF_REC_RELEASE       ? r->u.release.reply_to
                     : r->type == HF_REC_EXTEND        ? r->u.extend.reply_to
                     : r->type == HF_REC_PAYMENT_EVENT ? r->u.payment_event.reply_to
                                                       : "";
    if (!to[0] || strcmp(to, topic_name(HF_T_REPLIES)) == 0)
        return HF_OK;
    for (size_t i = 0; i < d->reply_topics_count; i++)
        if (strcmp(d->reply_topics[i], to) == 0)
            return HF_OK;
    if (d->reply_topics_count == RC_REPLY_TOPICS_MAX) {
        snprintf(d->errstr, d->errstr_size, "requests name more than %d reply topics",
                 RC_REPLY_TOPICS_MAX);
        return HF_ERR_LIMIT;
    }
    snprintf(d->reply_topics[d->reply_topics_count++], HF_TOPIC_LEN_MAX + 1, "%s", to);
    return HF_OK;
}

static int on_reply(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    if (!r || r->type != HF_REC_REPLY)
        return foreign(d, pos, HF_REC_REPLY);
    return reconcile_reply(d->rc, pos, &r->u.reply);
}

/* A reply_to topic that was never created holds no replies to check. */
static int read_reply_topic(drv_t *d, const char *topic)
{
    int32_t parts = 0;
    if (kafka_partition_count(d->rd, topic, d->o->timeout_ms, &parts, d->errstr, d->errstr_size) !=
        HF_OK) {
        d->errstr[0] = '\0';
        return HF_OK;
    }
    return read_topic(d, topic, on_reply, true, true);
}

/* every_pass: the topic holds pair-keyed records (or, the ledger, what pairs
 * hold and sold): each shard's pass reads it up to the first pass's end. */
static const struct {
    drv_fn fn;
    hf_topic_id_t topic;
    bool decode;
    bool quiet_check;
    bool every_pass;
} steps[] = {
    {on_dead_letter, HF_T_DEAD_LETTERS, true, true, false},
    {on_changelog, HF_T_COUNTER_CHANGELOG, false, true, true},          /* decoded by its key */
    {on_gateway_changelog, HF_T_GATEWAY_CHANGELOG, false, false, true}, /* judged when quiescent */
    {on_level, HF_T_STOCK_LEVELS, true, true, true},
    {on_ledger, HF_T_LEDGER, true, true, true},
    {on_result, HF_T_COUNTER_RESULTS, true, true, true},
    {on_feed, HF_T_STOCK_FEED, true, true, true},
    {on_commands, HF_T_COUNTER_COMMANDS, true, true, true},
    {on_request, HF_T_REQUESTS, true, false, false},
    {on_reply, HF_T_REPLIES, true, true, false},
};

/* Counted, not checked. */
static const hf_topic_id_t counted_only[] = {HF_T_AVAILABILITY, HF_T_SIGNALS,
                                             HF_T_AGGREGATOR_CHANGELOG};

/* One shard's pass: the first reads everything, a later one the every-pass
 * topics only. */
#define STEPS_COUNT (sizeof steps / sizeof steps[0])

/* ---- the spill: what a later pass needs, copied in the first */

/* The pair a record of an every-pass topic belongs to; false for a record no
 * pair's pass reads (not decodable, not of a type the checker takes). */
static bool record_pair(hf_topic_id_t t, const kafka_msg_t *m, const hf_record_t *r, hf_wh_t wh,
                        hf_sku_t sku)
{
    if (t == HF_T_COUNTER_CHANGELOG) {
        key_kind_t kind = m->value ? counter_key(m, wh, sku) : KEY_OTHER;
        return kind == KEY_STATE || kind == KEY_ALLOT;
    }
    if (t == HF_T_GATEWAY_CHANGELOG)
        return gateway_key(m, wh, sku) == KEY_ESCROW;
    const char *w = NULL, *s = NULL;
    switch (r ? r->type : HF_REC__COUNT) {
#define PAIR_OF(TYPE, field)                                                                       \
    case TYPE:                                                                                     \
        w = r->u.field.warehouse_id;                                                               \
        s = r->u.field.sku;                                                                        \
        break;
        PAIR_OF(HF_REC_STOCK_LEVEL, stock_level)
        PAIR_OF(HF_REC_COUNTER_RESULT, counter_result)
        PAIR_OF(HF_REC_ALLOTMENT_GRANT, allotment_grant)
        PAIR_OF(HF_REC_STOCK_FEED, stock_feed)
        PAIR_OF(HF_REC_COMMIT_HOLD, commit_hold)
        PAIR_OF(HF_REC_ALLOTMENT_REQUEST, allotment_request)
        PAIR_OF(HF_REC_ALLOTMENT_SALE, allotment_sale)
#undef PAIR_OF
    default:
        return false;
    }
    snprintf(wh, sizeof(hf_wh_t), "%s", w);
    snprintf(sku, sizeof(hf_sku_t), "%s", s);
    return true;
}

/* First pass: a record of a later shard's pair goes to that shard's file, the
 * ledger to file 0; shard 0's records are this pass's own. */
static int spill_record(drv_t *d, const kafka_msg_t *m, const hf_record_t *r)
{
    if (!steps[d->step].every_pass)
        return HF_OK;
    hf_topic_id_t t = steps[d->step].topic;
    if ((t == HF_T_STOCK_FEED || t == HF_T_COUNTER_COMMANDS) && off_its_partition(d, m))
        return HF_OK; /* its forwarded copy is spilled instead */
    uint32_t file = 0;
    if (t != HF_T_LEDGER) {
        hf_wh_t wh;
        hf_sku_t sku;
        if (!record_pair(t, m, r, wh, sku))
            return HF_OK;
        file = reconcile_pair_shard(wh, sku, d->shards);
        if (file == 0)
            return HF_OK;
    }
    return rc_spill_put(d->spill, file, (uint8_t)d->step, m, d->errstr, d->errstr_size);
}

/* A later pass's step from a spill file, as read_topic_ex would from Kafka. */
static int replay_step(drv_t *d, size_t i, uint32_t file)
{
    const char *topic = topic_name(steps[i].topic);
    d->fn = steps[i].fn;
    d->parts = 0; /* spill_record kept no input off its key's partition */
    d->decode = steps[i].decode;
    d->tombstones = d->fn && !d->decode;
    d->records = 0;
    d->step = (int)i;
    d->stop_at = -1;
    d->progress.topic = topic;
    rc_progress_now(&d->progress);
    int err = file == 0 ? rc_spill_rewind(d->spill, 0, d->errstr, d->errstr_size) : HF_OK;
    for (bool got = true; !err && got;) {
        kafka_msg_t m;
        err = rc_spill_next(d->spill, file, (uint8_t)i, &m, &got, d->errstr, d->errstr_size);
        if (err || !got)
            break;
        m.topic = topic;
        d->part_first = m.offset;
        err = on_msg(d, &m);
        d->part_base++;
    }
    return err;
}

static int spill_pass(drv_t *d)
{
    int err = rc_spill_rewind(d->spill, d->pass, d->errstr, d->errstr_size);
    for (size_t i = 0; !err && i < STEPS_COUNT; i++)
        if (steps[i].every_pass)
            err = replay_step(d, i, steps[i].topic == HF_T_LEDGER ? 0 : d->pass);
    if (!err)
        rc_spill_done(d->spill, d->pass);
    return err;
}

static int pass(drv_t *d)
{
    int err = HF_OK;
    d->progress.pass = d->pass;
    if (d->pass > 0 && d->spill)
        return spill_pass(d);
    for (size_t i = 0; !err && i < STEPS_COUNT; i++)
        if (d->pass == 0 || steps[i].every_pass)
            err = read_topic_ex(d, (int)i, topic_name(steps[i].topic), steps[i].fn, steps[i].decode,
                                steps[i].quiet_check, steps[i].every_pass);
    for (size_t i = 0; !err && d->pass == 0 && i < d->reply_topics_count; i++)
        err = read_reply_topic(d, d->reply_topics[i]);
    for (size_t i = 0; !err && d->pass == 0 && i < sizeof counted_only / sizeof counted_only[0];
         i++)
        err = read_topic(d, topic_name(counted_only[i]), NULL, false, false);
    return err;
}

/* ---- sizes before reading: a partition's first offset and its end */

typedef struct {
    drv_t *d;
    const char *topic;
    int32_t partition;
    int64_t first, high;
} peek_t;

static int peek_first(void *opaque, const kafka_msg_t *msg)
{
    peek_t *p = opaque;
    p->first = msg->offset;
    p->high = kafka_reader_high_watermark(p->d->rd, p->topic, p->partition);
    return RC_STOP;
}

/* Offsets topic holds (the sum over its partitions of end - first): one fetch
 * per partition. Records are fewer (transaction markers take offsets). */
static int topic_offsets(drv_t *d, const char *topic, uint64_t *offsets_out)
{
    int32_t parts = 0;
    *offsets_out = 0;
    if (kafka_partition_count(d->rd, topic, d->o->timeout_ms, &parts, d->errstr, d->errstr_size) !=
        HF_OK) {
        d->errstr[0] = '\0';
        return HF_OK; /* a reply_to topic never created; a missing one fails the read */
    }
    for (int32_t p = 0; p < parts; p++) {
        peek_t pk = {d, topic, p, 0, 0};
        int64_t next = 0;
        int err =
            kafka_reader_read_to_end(d->rd, topic, p, KAFKA_OFFSET_BEGINNING, d->o->timeout_ms,
                                     peek_first, &pk, &next, d->errstr, d->errstr_size);
        if (err != HF_OK && err != RC_STOP)
            return err;
        if (err == RC_STOP && pk.high > pk.first)
            *offsets_out += (uint64_t)(pk.high - pk.first);
    }
    return HF_OK;
}

/* What the topics hold, for the progress total and the shard estimate. */
typedef struct {
    uint64_t first_pass, every_pass; /* offsets read by the first pass, by each later one */
    uint64_t changelog, levels, results, ledger, replies;
} drv_sizes_t;

static int measure(drv_t *d, drv_sizes_t *z)
{
    memset(z, 0, sizeof *z);
    int err = HF_OK;
    for (size_t i = 0; !err && i < sizeof steps / sizeof steps[0]; i++) {
        uint64_t n = 0;
        err = topic_offsets(d, topic_name(steps[i].topic), &n);
        z->first_pass += n;
        z->every_pass += steps[i].every_pass ? n : 0;
        hf_topic_id_t t = steps[i].topic;
        z->changelog += t == HF_T_COUNTER_CHANGELOG ? n : 0;
        z->levels += t == HF_T_STOCK_LEVELS ? n : 0;
        z->results += t == HF_T_COUNTER_RESULTS ? n : 0;
        z->ledger += t == HF_T_LEDGER ? n : 0;
        z->replies += t == HF_T_REPLIES ? n : 0;
    }
    for (size_t i = 0; !err && i < sizeof counted_only / sizeof counted_only[0]; i++) {
        uint64_t n = 0;
        err = topic_offsets(d, topic_name(counted_only[i]), &n);
        z->first_pass += n;
    }
    return err;
}

/* Shards that keep the tables within memory_mb: every pair has a CounterState
 * and a StockLevel, so the smaller of those topics bounds the pairs. */
static int shards_for_memory(drv_t *d, const drv_sizes_t *z, uint32_t *shards)
{
    uint64_t pairs = z->changelog < z->levels ? z->changelog : z->levels;
    uint64_t budget = (uint64_t)d->o->memory_mb << 20;
    uint64_t shared = RC_BASE_BYTES_EST + z->ledger * RC_RESERVATION_BYTES_EST +
                      z->replies * (RC_RESERVATION_BYTES_EST / 2);
    uint64_t split = pairs * RC_PAIR_BYTES_EST + z->results * RC_HOLD_BYTES_EST;
    if (budget <= shared) {
        snprintf(d->errstr, d->errstr_size,
                 "--memory-mb %zu is below what the replay needs besides its pairs (about %" PRIu64
                 " MiB: buffers, reservations, reply keys): raise it",
                 d->o->memory_mb, (shared >> 20) + 1);
        return HF_ERR_LIMIT;
    }
    uint64_t k = (split + (budget - shared) - 1) / (budget - shared);
    if (k > RC_SHARDS_MAX) {
        snprintf(d->errstr, d->errstr_size,
                 "--memory-mb %zu would need %" PRIu64 " shards (at most %d): raise it",
                 d->o->memory_mb, k, RC_SHARDS_MAX);
        return HF_ERR_LIMIT;
    }
    *shards = k < 1 ? 1 : (uint32_t)k;
    return HF_OK;
}

static size_t at_least(size_t cap, uint64_t need)
{
    return need > cap ? (size_t)need : cap;
}

/* With --memory-mb the replay is sized by the data, not by the caps' defaults:
 * each table's cap is raised to what the topics can hold of it (a reservation
 * has a ledger event, a reply key a reply, a hold a result; a pair-keyed table
 * holds one shard's share, twice the even share for a skewed hash). The budget
 * (shards_for_memory) already counts these bytes: a cap is a bound, not an
 * allocation. */
static void limits_for_data(drv_t *d, const drv_sizes_t *z)
{
    reconcile_limits_t *l = &d->limits;
    uint64_t k = d->shards, pairs = z->changelog < z->levels ? z->changelog : z->levels;
    l->reservations_max = at_least(l->reservations_max, z->ledger);
    l->reply_keys_max = at_least(l->reply_keys_max, z->replies);
    l->pairs_max = at_least(l->pairs_max, pairs < 2 * pairs / k ? pairs : 2 * pairs / k);
    l->holds_max =
        at_least(l->holds_max, z->results < 2 * z->results / k ? z->results : 2 * z->results / k);
    uint64_t sold = z->results + z->ledger;
    l->sales_max = at_least(l->sales_max, sold < 2 * sold / k ? sold : 2 * sold / k);
}

/* Shards of this run, and the progress total. */
static int plan(drv_t *d)
{
    d->shards = d->o->shards > 0 ? d->o->shards : 1;
    if (!d->progress.out && !(d->o->shards == 0 && d->o->memory_mb > 0))
        return HF_OK;
    drv_sizes_t z;
    int err = measure(d, &z);
    if (!err && d->o->shards == 0 && d->o->memory_mb > 0)
        err = shards_for_memory(d, &z, &d->shards);
    if (!err && d->o->shards == 0 && d->o->memory_mb > 0)
        limits_for_data(d, &z);
    d->progress.passes = d->shards;
    /* A later pass reads every pair-keyed topic again, or from the spill only
     * its shard's share of them and the whole ledger. */
    uint64_t later = d->o->spill_dir && d->shards > 1
                         ? (z.every_pass - z.ledger) / d->shards + z.ledger
                         : z.every_pass;
    d->progress.offsets_total = z.first_pass + (uint64_t)(d->shards - 1) * later;
    return err;
}

static int count_only(void *opaque, const kafka_msg_t *msg)
{
    (*(uint64_t *)opaque)++;
    return HF_OK;
}

/* True when no partition the pass remembered has grown since it was read. */
static int snapshot_quiet(drv_t *d, bool *quiet)
{
    *quiet = true;
    for (size_t i = 0; i < d->ends_count && *quiet; i++) {
        uint64_t more = 0;
        int64_t next = 0;
        const drv_end_t *e = &d->ends[i];
        int err = kafka_reader_read_to_end(d->rd, e->topic, e->partition, e->next, d->o->timeout_ms,
                                           count_only, &more, &next, d->errstr, d->errstr_size);
        if (err)
            return err;
        *quiet = more == 0 && next == e->next;
    }
    return HF_OK;
}

static void print_error(FILE *out, int err, const char *errstr)
{
    json_t *o =
        json_pack("{s:s,s:s,s:s}", "verdict", "ERROR", "error", hf_err_name(err), "detail", errstr);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    fprintf(out, "%s\n", s ? s : "{\"verdict\":\"ERROR\"}");
    fflush(out);
    free(s);
    json_decref(o);
}

/* Every shard's pass of one attempt, the checker told when each ends. */
static int passes(drv_t *d)
{
    int err = HF_OK;
    for (d->pass = 0; !err && d->pass < d->shards; d->pass++) {
        err = pass(d);
        if (!err && d->pass + 1 < d->shards)
            err = reconcile_next_shard(d->rc, d->o->quiescent);
    }
    if (err == HF_ERR_NOMEM && !d->errstr[0])
        snprintf(d->errstr, d->errstr_size,
                 "out of memory: run with --shards (each shard's pass keeps 1/K of the pairs) or "
                 "--memory-mb");
    return err;
}

/* Which table reached its cap, as the option that sets it. */
static const char *full_table(const reconcile_t *rc)
{
    static _Thread_local char buf[160];
    const struct {
        const rc_map_t *m;
        const char *name, *option;
    } tables[] = {{&rc->pairs, "pairs", "--pairs-max"},
                  {&rc->holds, "holds", "--holds-max"},
                  {&rc->res, "reservations", "--reservations-max"},
                  {&rc->replies, "reply keys", "--reply-keys-max"},
                  {&rc->sales, "sales", "--sales-max"},
                  {&rc->allots, "allotments", "--allotments-max"},
                  {&rc->gw_live, "allotments", "--allotments-max"},
                  {&rc->dead, "dead letters", "cap"}};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (tables[i].m->count >= tables[i].m->max) {
            snprintf(buf, sizeof buf, "the %s table reached its cap (%s %zu)", tables[i].name,
                     tables[i].option, tables[i].m->max);
            return buf;
        }
    return "a table reached its cap (--pairs-max, --holds-max, --reservations-max, "
           "--reply-keys-max, --sales-max or --allotments-max)";
}

/* One attempt: a fresh checker fed from the beginning of every topic. */
static int attempt(drv_t *d, bool *quiet)
{
    reconcile_destroy(d->rc);
    d->rc = NULL;
    d->ends_count = 0;
    d->pins_count = 0;
    d->reply_topics_count = 0;
    d->part_base = 0;
    d->records_first_pass = 0;
    d->progress.offsets_done = 0;
    json_decref(d->counts);
    d->counts = json_object();
    int err = reconcile_new(&d->limits, &d->rc);
    if (!err)
        err = reconcile_set_shards(d->rc, d->shards);
    if (err) {
        snprintf(d->errstr, d->errstr_size, "out of memory");
        return err;
    }
    rc_spill_close(d->spill);
    d->spill = NULL;
    if (d->o->spill_dir && d->shards > 1)
        err = rc_spill_open(d->o->spill_dir, d->shards, &d->spill, d->errstr, d->errstr_size);
    if (err)
        return err;
    /* Escrow: a reservation's gateway partition is its key's in the requests topic. */
    int32_t gateway_partitions = 0;
    err = kafka_partition_count(d->rd, topic_name(HF_T_REQUESTS), d->o->timeout_ms,
                                &gateway_partitions, d->errstr, d->errstr_size);
    if (!err)
        reconcile_set_gateway_partitions(d->rc, gateway_partitions);
    if (!err)
        err = passes(d);
    if (err == HF_ERR_LIMIT && !d->errstr[0])
        snprintf(d->errstr, d->errstr_size,
                 "%s; raise it, or give --memory-mb M to size every table by the topics (the "
                 "pair-keyed ones bound one shard: more --shards lower what each needs)",
                 full_table(d->rc));
    if (!err)
        err = snapshot_quiet(d, quiet);
    if (!err)
        reconcile_finish(d->rc, d->o->quiescent);
    return err;
}

static int run_attempts(drv_t *d, bool *quiet, int *attempts)
{
    int err = HF_OK;
    for (*attempts = 1;; (*attempts)++) {
        d->errstr[0] = '\0';
        d->progress.attempt = *attempts;
        err = attempt(d, quiet);
        if (err || *quiet || *attempts >= d->o->settle_attempts_max)
            return err;
        size_t cross = reconcile_violations_in_scope(d->rc, RC_SCOPE_SNAPSHOT) +
                       reconcile_violations_in_scope(d->rc, RC_SCOPE_QUIESCENT);
        if (cross == 0)
            return HF_OK;
        struct timespec ts = {d->o->settle_wait_ms / 1000,
                              (d->o->settle_wait_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static size_t peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (size_t)ru.ru_maxrss : 0;
}

/* The closing line on the progress stream: throughput and memory. */
static void print_summary(const drv_t *d, const rc_run_t *run)
{
    if (!d->progress.out)
        return;
    rc_tables_t t;
    reconcile_tables_peak(d->rc, &t);
    char recs[32], rate[32], pairs[32];
    rc_fmt_count(recs, sizeof recs, run->records);
    rc_fmt_count(rate, sizeof rate,
                 run->seconds > 0 ? (uint64_t)((double)run->records / run->seconds) : 0);
    rc_fmt_count(pairs, sizeof pairs, t.pairs);
    fprintf(d->progress.out,
            "hfctl reconcile: %s records read in %.1f s (%s records/s; %.2f s per million "
            "records of the snapshot), %u shard%s; tables at most %.0f MiB (%s pairs in a "
            "shard), peak RSS %zu MiB\n",
            recs, run->seconds, rate,
            run->snapshot_records ? run->seconds * 1e6 / (double)run->snapshot_records : 0.0,
            run->shards, run->shards == 1 ? "" : "s", (double)t.bytes / 1048576.0, pairs,
            run->peak_rss_kib / 1024);
}

int reconcile_run(const reconcile_opts_t *o, FILE *out, rc_verdict_t *verdict, char *errstr,
                  size_t errstr_size)
{
    int64_t started = hf_mono_ms();
    drv_t d = {.o = o,
               .limits = o->limits,
               .errstr = errstr,
               .errstr_size = errstr_size,
               .stop_at = -1,
               .step = -1};
    kafka_conf_t kc = {o->bootstrap, "hfctl-reconcile", NULL};
    rc_progress_init(&d.progress, o->progress);
    d.rec = malloc(sizeof *d.rec);
    d.ends = malloc(sizeof *d.ends * RC_ENDS_MAX);
    d.pins = malloc(sizeof *d.pins * RC_ENDS_MAX);
    bool quiet = false;
    int attempts = 0;
    errstr[0] = '\0';
    int err = d.rec && d.ends && d.pins ? HF_OK : HF_ERR_NOMEM;
    if (!err)
        err = kafka_reader_new(&kc, &d.rd, errstr, errstr_size);
    if (!err)
        err = plan(&d);
    if (!err)
        err = run_attempts(&d, &quiet, &attempts);
    rc_progress_end(&d.progress);
    if (!err) {
        char *records = json_dumps(d.counts, JSON_COMPACT);
        rc_run_t run = {.records = d.records_all,
                        .snapshot_records = d.records_first_pass,
                        .seconds = (double)(hf_mono_ms() - started) / 1000.0,
                        .shards = d.shards,
                        .passes = (uint32_t)attempts * d.shards,
                        .peak_rss_kib = peak_rss_kib(),
                        .spill_bytes_max = rc_spill_bytes_max(d.spill)};
        *verdict = reconcile_verdict(d.rc, quiet);
        err = reconcile_print_run(d.rc, quiet, attempts, o->quiescent, records, &run, out);
        print_summary(&d, &run);
        free(records);
    }
    if (err)
        print_error(out, err, errstr);
    kafka_reader_destroy(d.rd);
    reconcile_destroy(d.rc);
    rc_spill_close(d.spill);
    json_decref(d.counts);
    free(d.pins);
    free(d.ends);
    free(d.rec);
    return err;
}
