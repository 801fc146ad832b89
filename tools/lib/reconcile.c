/* The reconciler's driver: reads every holdfast topic of the deployment from the
 * beginning (read_committed, partition by partition, in the checker's feeding
 * order), feeds the checker, and judges whether the snapshot it read is
 * consistent: after a pass it looks again at the end of every partition the
 * cross-topic checks use; if any moved, a transaction committed during the
 * pass, the topics were read at different moments, and a pass with
 * cross-topic violations is repeated (bounded) before they are believed. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec.h"
#include "hf_clock.h"
#include "kafka.h"
#include "reconcile_int.h"
#include "topics.h"

/* Reply topics named by requests' reply_to, beyond holdfast.replies. */
#define RC_REPLY_TOPICS_MAX 64
/* Partitions whose end a pass remembers for the quiet check. */
#define RC_ENDS_MAX         4096

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
    kafka_reader_t *rd;
    reconcile_t *rc;
    hf_record_t *rec;
    drv_fn fn;
    bool decode;
    bool tombstones; /* fn sees records without a value (rec NULL) */
    uint64_t records;
    json_t *counts; /* records per topic */
    drv_end_t *ends;
    size_t ends_count;
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

static int on_msg(void *opaque, const kafka_msg_t *msg)
{
    drv_t *d = opaque;
    d->records++;
    if (!d->fn || (!msg->value && !d->tombstones))
        return HF_OK; /* counted only, or a changelog tombstone */
    rc_pos_t pos = {msg->topic, msg->partition, msg->offset};
    char errstr[256];
    const hf_record_t *rec = NULL;
    if (d->decode && msg->value &&
        codec_decode(msg->value, msg->value_len, d->rec, errstr, sizeof errstr) == HF_OK)
        rec = d->rec;
    return d->fn(d, &pos, msg, rec);
}

/* Reads every partition of topic; remembers where each ended when quiet_check.
 * A step without decode decodes what it needs itself and sees tombstones. */
static int read_topic(drv_t *d, const char *topic, drv_fn fn, bool decode, bool quiet_check)
{
    int32_t parts = 0;
    int err =
        kafka_partition_count(d->rd, topic, d->o->timeout_ms, &parts, d->errstr, d->errstr_size);
    d->fn = fn;
    d->decode = decode;
    d->tombstones = fn && !decode;
    d->records = 0;
    for (int32_t p = 0; !err && p < parts; p++) {
        int64_t next = 0;
        err = kafka_reader_read_to_end(d->rd, topic, p, KAFKA_OFFSET_BEGINNING, d->o->timeout_ms,
                                       on_msg, d, &next, d->errstr, d->errstr_size);
        if (err || !quiet_check)
            continue;
        if (d->ends_count == RC_ENDS_MAX) {
            snprintf(d->errstr, d->errstr_size, "more than %d partitions to check", RC_ENDS_MAX);
            return HF_ERR_LIMIT;
        }
        drv_end_t *e = &d->ends[d->ends_count++];
        snprintf(e->topic, sizeof e->topic, "%s", topic);
        e->partition = p;
        e->next = next;
    }
    if (!err)
        json_object_set_new(d->counts, topic, json_integer((json_int_t)d->records));
    return err;
}

static int foreign(drv_t *d, const rc_pos_t *pos, hf_rec_type_t want)
{
    char what[96];
    snprintf(what, sizeof what, "not a %s record", hf_rec_type_name(want));
    reconcile_foreign(d->rc, pos, what);
    return HF_OK;
}

static int on_dead_letter(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    if (!r || r->type != HF_REC_DEAD_LETTER)
        return foreign(d, pos, HF_REC_DEAD_LETTER);
    return reconcile_dead_letter(d->rc, &r->u.dead_letter);
}

/* Counter changelog "L<w>|<sku>|<holder %08x>": one holder's allotment. */
static int on_allotment_state(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m,
                              const hf_record_t *r)
{
    const char *k = m->key;
    const size_t hex = 8;
    const char *bar = m->key_len > hex + 4 ? memchr(k + 1, '|', m->key_len - 1) : NULL;
    if (!bar || k[m->key_len - hex - 1] != '|' || bar >= k + m->key_len - hex - 1)
        return HF_OK;
    size_t wlen = (size_t)(bar - (k + 1)), slen = m->key_len - hex - 1 - wlen - 2;
    if (!r || r->type != HF_REC_ALLOTMENT_STATE || wlen > HF_WAREHOUSE_LEN_MAX ||
        slen > HF_SKU_LEN_MAX)
        return foreign(d, pos, HF_REC_ALLOTMENT_STATE);
    hf_wh_t wh;
    hf_sku_t sku;
    snprintf(wh, sizeof wh, "%.*s", (int)wlen, k + 1);
    snprintf(sku, sizeof sku, "%.*s", (int)slen, bar + 1);
    return reconcile_allotment_state(d->rc, pos, wh, sku, &r->u.allotment_state);
}

/* Counter changelog: "C<w>|<sku>|" keys hold CounterState, "L..." keys
 * AllotmentState; the rest (holds, indexes) is not read. */
static int on_changelog(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    const char *k = m->key;
    if (m->key_len > 0 && k[0] == 'L')
        return on_allotment_state(d, pos, m, r);
    if (m->key_len < 4 || k[0] != 'C' || k[m->key_len - 1] != '|')
        return HF_OK;
    const char *bar = memchr(k + 1, '|', m->key_len - 1);
    size_t wlen = (size_t)(bar - (k + 1)), slen = m->key_len - wlen - 3;
    if (!r || r->type != HF_REC_COUNTER_STATE || wlen > HF_WAREHOUSE_LEN_MAX ||
        slen > HF_SKU_LEN_MAX)
        return foreign(d, pos, HF_REC_COUNTER_STATE);
    hf_wh_t wh;
    hf_sku_t sku;
    snprintf(wh, sizeof wh, "%.*s", (int)wlen, k + 1);
    snprintf(sku, sizeof sku, "%.*s", (int)slen, bar + 1);
    return reconcile_counter_state(d->rc, pos, wh, sku, &r->u.counter_state);
}

/* Gateway changelog "A<w>|<sku>": partition p's allotment of a pair as the
 * gateway counts it (decoded here: the rest of the changelog is not read). */
static int on_gateway_changelog(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m,
                                const hf_record_t *unused)
{
    const char *k = m->key;
    if (m->key_len < 4 || k[0] != 'A')
        return HF_OK;
    const char *bar = memchr(k + 1, '|', m->key_len - 1);
    size_t wlen = bar ? (size_t)(bar - (k + 1)) : 0, slen = bar ? m->key_len - wlen - 2 : 0;
    const hf_record_t *r = NULL;
    char errstr[256];
    if (m->value && codec_decode(m->value, m->value_len, d->rec, errstr, sizeof errstr) == HF_OK)
        r = d->rec;
    if (!bar || wlen > HF_WAREHOUSE_LEN_MAX || slen > HF_SKU_LEN_MAX ||
        (m->value && (!r || r->type != HF_REC_ESCROW_STATE)))
        return foreign(d, pos, HF_REC_ESCROW_STATE);
    hf_wh_t wh;
    hf_sku_t sku;
    snprintf(wh, sizeof wh, "%.*s", (int)wlen, k + 1);
    snprintf(sku, sizeof sku, "%.*s", (int)slen, bar + 1);
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

/* Undecodable inputs are the counter's to dead-letter, not violations. */
static int on_commands(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    return r ? reconcile_counter_input(d->rc, RC_IN_COMMANDS, pos, r) : HF_OK;
}

static int on_feed(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    return r ? reconcile_counter_input(d->rc, RC_IN_STOCK_FEED, pos, r) : HF_OK;
}

/* Requests name the reply topics to read besides holdfast.replies. */
static int on_request(drv_t *d, const rc_pos_t *pos, const kafka_msg_t *m, const hf_record_t *r)
{
    const char *to = !r                          ? ""
                     : r->type == HF_REC_RESERVE ? r->u.reserve.reply_to
                     : r->type == HF_REC_COMMIT  ? r->u.commit.reply_to
                     : r->type == HF_REC_RELEASE ? r->u.release.reply_to
                     : r->type == HF_REC_EXTEND  ? r->u.extend.reply_to
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

static const struct {
    drv_fn fn;
    hf_topic_id_t topic;
    bool decode;
    bool quiet_check;
} steps[] = {
    {on_dead_letter, HF_T_DEAD_LETTERS, true, true},
    {on_changelog, HF_T_COUNTER_CHANGELOG, true, true},
    {on_gateway_changelog, HF_T_GATEWAY_CHANGELOG, false, false}, /* judged when quiescent */
    {on_level, HF_T_STOCK_LEVELS, true, true},
    {on_ledger, HF_T_LEDGER, true, true},
    {on_result, HF_T_COUNTER_RESULTS, true, true},
    {on_feed, HF_T_STOCK_FEED, true, true},
    {on_commands, HF_T_COUNTER_COMMANDS, true, true},
    {on_request, HF_T_REQUESTS, true, false},
    {on_reply, HF_T_REPLIES, true, true},
};

/* Counted, not checked. */
static const hf_topic_id_t counted_only[] = {HF_T_AVAILABILITY, HF_T_SIGNALS,
                                             HF_T_AGGREGATOR_CHANGELOG};

static int pass(drv_t *d)
{
    int err = HF_OK;
    for (size_t i = 0; !err && i < sizeof steps / sizeof steps[0]; i++)
        err = read_topic(d, topic_name(steps[i].topic), steps[i].fn, steps[i].decode,
                         steps[i].quiet_check);
    for (size_t i = 0; !err && i < d->reply_topics_count; i++)
        err = read_reply_topic(d, d->reply_topics[i]);
    for (size_t i = 0; !err && i < sizeof counted_only / sizeof counted_only[0]; i++)
        err = read_topic(d, topic_name(counted_only[i]), NULL, false, false);
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

/* One pass: a fresh checker fed from the beginning of every topic. */
static int attempt(drv_t *d, bool *quiet)
{
    reconcile_destroy(d->rc);
    d->rc = NULL;
    d->ends_count = 0;
    d->reply_topics_count = 0;
    json_decref(d->counts);
    d->counts = json_object();
    int err = reconcile_new(&d->o->limits, &d->rc);
    if (err) {
        snprintf(d->errstr, d->errstr_size, "out of memory");
        return err;
    }
    /* Escrow: a reservation's gateway partition is its key's in the requests topic. */
    int32_t gateway_partitions = 0;
    err = kafka_partition_count(d->rd, topic_name(HF_T_REQUESTS), d->o->timeout_ms,
                                &gateway_partitions, d->errstr, d->errstr_size);
    if (!err)
        reconcile_set_gateway_partitions(d->rc, gateway_partitions);
    if (!err)
        err = pass(d);
    if (err == HF_ERR_LIMIT && !d->errstr[0])
        snprintf(d->errstr, d->errstr_size,
                 "a table reached its cap; raise --pairs-max, --holds-max, "
                 "--reservations-max, --reply-keys-max, --sales-max or --allotments-max");
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

int reconcile_run(const reconcile_opts_t *o, FILE *out, rc_verdict_t *verdict, char *errstr,
                  size_t errstr_size)
{
    int64_t started = hf_mono_ms();
    drv_t d = {.o = o, .errstr = errstr, .errstr_size = errstr_size};
    kafka_conf_t kc = {o->bootstrap, "hfctl-reconcile", NULL};
    d.rec = malloc(sizeof *d.rec);
    d.ends = malloc(sizeof *d.ends * RC_ENDS_MAX);
    bool quiet = false;
    int attempts = 0;
    int err = d.rec && d.ends ? HF_OK : HF_ERR_NOMEM;
    if (!err)
        err = kafka_reader_new(&kc, &d.rd, errstr, errstr_size);
    if (!err)
        err = run_attempts(&d, &quiet, &attempts);
    if (!err) {
        char *records = json_dumps(d.counts, JSON_COMPACT);
        *verdict = reconcile_verdict(d.rc, quiet);
        err = reconcile_print(d.rc, quiet, attempts, o->quiescent, records,
                              (double)(hf_mono_ms() - started) / 1000.0, out);
        free(records);
    }
    if (err)
        print_error(out, err, errstr);
    kafka_reader_destroy(d.rd);
    reconcile_destroy(d.rc);
    json_decref(d.counts);
    free(d.ends);
    free(d.rec);
    return err;
}
