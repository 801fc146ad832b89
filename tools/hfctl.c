/* hfctl: the operator's and tester's command line for holdfast. A table maps each
 * command (one or two words) to its options (hf_cli.h) and its handler; every
 * command prints JSON lines on stdout and says what to do on stderr when
 * something is wrong. `hfctl --help` lists the commands, `hfctl COMMAND --help`
 * a command's options. Environment: HOLDFAST_BOOTSTRAP, HOLDFAST_TOPIC_PREFIX,
 * HOLDFAST_KAFKA_CONFIG, HOLDFAST_KAFKA_OVERRIDES (docs/SECURITY.md),
 * HOLDFAST_SCHEMA_REGISTRY_URL (reads Confluent-framed records: docs/SCHEMA_REGISTRY.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "codec.h"
#include "counter/counter.h"
#include "framing.h"
#include "gateway/gateway.h"
#include "hf_cli.h"
#include "hf_clock.h"
#include "hf_datafile.h"
#include "hf_limits.h"
#include "hf_version.h"
#include "kafka.h"
#include "lib/burst.h"
#include "lib/client.h"
#include "lib/reconcile.h"
#include "lib/tail_json.h"
#include "lib/topics_file.h"
#include "topics.h"
#include "trace.h"

typedef struct {
    const char *bootstrap;
    hf_cli_args_t a;
    char errstr[512];
    bool refused; /* a checkout command was answered, but not as asked (exit 3) */
} cli_t;

static const char *opt(const cli_t *c, const char *name)
{
    return hf_cli_get(&c->a, name);
}

/* A required string option, or NULL after printing what is missing. */
static const char *need(cli_t *c, const char *name)
{
    const char *v = opt(c, name);
    if (!v)
        fprintf(stderr, "hfctl: missing --%s\n", name);
    return v;
}

static int opt_int64(cli_t *c, const char *name, int64_t def, int64_t *out)
{
    const char *v = opt(c, name);
    if (!v) {
        *out = def;
        return HF_OK;
    }
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || !end || *end) {
        fprintf(stderr, "hfctl: --%s '%s' is not an integer\n", name, v);
        return HF_ERR_INVAL;
    }
    *out = x;
    return HF_OK;
}

static int copy_id(char *dst, size_t dst_size, const char *v, const char *name)
{
    if (!v)
        return HF_ERR_INVAL;
    if (strlen(v) >= dst_size) {
        fprintf(stderr, "hfctl: --%s is longer than %zu characters\n", name, dst_size - 1);
        return HF_ERR_INVAL;
    }
    snprintf(dst, dst_size, "%s", v);
    return HF_OK;
}

/* --reservation and --key of a request into its fields. */
static int request_ids(cli_t *c, char *rid, size_t rid_size, char *key, size_t key_size)
{
    return copy_id(rid, rid_size, need(c, "reservation"), "reservation") ||
                   copy_id(key, key_size, need(c, "key"), "key")
               ? HF_ERR_INVAL
               : HF_OK;
}

/* ---- producing one record */

static int produce_one(cli_t *c, hf_topic_id_t topic, const char *key, const hf_record_t *rec)
{
    uint8_t buf[HF_RECORD_LEN_MAX];
    size_t len = 0;
    kafka_producer_t *kp = NULL;
    kafka_conf_t kc = {c->bootstrap, "hfctl", NULL};
    int64_t offset = -1;
    int err = codec_encode(rec, buf, sizeof buf, &len, c->errstr, sizeof c->errstr);
    if (!err)
        err = kafka_producer_new(&kc, NULL, 0, &kp, c->errstr, sizeof c->errstr);
    if (!err)
        err = kafka_produce(kp, topic_name(topic), -1, key, strlen(key), buf, len, NULL, 0, &offset,
                            c->errstr, sizeof c->errstr);
    if (!err)
        err = kafka_producer_flush(kp, 30000, c->errstr, sizeof c->errstr);
    if (!err && (kafka_producer_failed_count(kp) || offset < 0)) {
        snprintf(
            c->errstr, sizeof c->errstr,
            "delivery to %s failed (the warning above says why: broker down, or no ACL lets this "
            "principal write it)",
            topic_name(topic));
        err = HF_ERR_KAFKA;
    }
    kafka_producer_destroy(kp);
    if (!err)
        printf("{\"topic\":\"%s\",\"key\":\"%s\",\"offset\":%lld}\n", topic_name(topic), key,
               (long long)offset);
    return err;
}

/* Fills the fields every counter command has. */
static int command_ids(cli_t *c, char *rid, int32_t *attempt, char *wh, char *sku)
{
    int64_t a = 0;
    if (copy_id(rid, sizeof(hf_id_t), need(c, "reservation"), "reservation") ||
        copy_id(wh, sizeof(hf_wh_t), need(c, "warehouse"), "warehouse") ||
        copy_id(sku, sizeof(hf_sku_t), need(c, "sku"), "sku") || opt_int64(c, "attempt", 0, &a))
        return HF_ERR_INVAL;
    *attempt = (int32_t)a;
    return HF_OK;
}

static int send_hold(cli_t *c)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    char key[COUNTER_KEY_MAX];
    hf_hold_t *h = &rec.u.hold;
    rec.type = HF_REC_HOLD;
    if (command_ids(c, h->reservation_id, &h->attempt, h->warehouse_id, h->sku) ||
        opt_int64(c, "qty", 1, &h->qty))
        return HF_ERR_INVAL;
    h->issued_at_ms = hf_wall_ms();
    pair_key(key, h->warehouse_id, h->sku);
    return produce_one(c, HF_T_COUNTER_COMMANDS, key, &rec);
}

static int send_commit_hold(cli_t *c)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    char key[COUNTER_KEY_MAX];
    hf_commit_hold_t *h = &rec.u.commit_hold;
    rec.type = HF_REC_COMMIT_HOLD;
    if (command_ids(c, h->reservation_id, &h->attempt, h->warehouse_id, h->sku))
        return HF_ERR_INVAL;
    h->issued_at_ms = hf_wall_ms();
    pair_key(key, h->warehouse_id, h->sku);
    return produce_one(c, HF_T_COUNTER_COMMANDS, key, &rec);
}

static int send_release_hold(cli_t *c)
{
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    char key[COUNTER_KEY_MAX];
    hf_release_hold_t *h = &rec.u.release_hold;
    rec.type = HF_REC_RELEASE_HOLD;
    if (command_ids(c, h->reservation_id, &h->attempt, h->warehouse_id, h->sku))
        return HF_ERR_INVAL;
    snprintf(h->reason, sizeof h->reason, "%s", opt(c, "reason") ? opt(c, "reason") : "manual");
    h->issued_at_ms = hf_wall_ms();
    pair_key(key, h->warehouse_id, h->sku);
    return produce_one(c, HF_T_COUNTER_COMMANDS, key, &rec);
}

static int parse_feed_kind(const char *v, hf_feed_kind_t *out)
{
    for (int k = 0; v && k < HF_FEED__COUNT; k++)
        if (strcasecmp(v, hf_feed_kind_name((hf_feed_kind_t)k)) == 0) {
            *out = (hf_feed_kind_t)k;
            return HF_OK;
        }
    fprintf(stderr, "hfctl: --kind must be RECEIVE, ADJUST, COUNT, COUNT_AS_OF or SAFETY_STOCK\n");
    return HF_ERR_INVAL;
}

/* A COUNT with --as-of-committed is sent as COUNT_AS_OF: the counter takes the
 * units sold since that committed_total off the count, so a count taken before
 * a sale cannot give the sold unit back. */
static int feed_as_of(cli_t *c, hf_stock_feed_t *f)
{
    if (!opt(c, "as-of-committed")) {
        if (f->kind != HF_FEED_COUNT_AS_OF)
            return HF_OK;
        fprintf(stderr, "hfctl: --kind COUNT_AS_OF needs --as-of-committed N\n");
        return HF_ERR_INVAL;
    }
    if (f->kind != HF_FEED_COUNT && f->kind != HF_FEED_COUNT_AS_OF) {
        fprintf(stderr, "hfctl: --as-of-committed applies to --kind COUNT only\n");
        return HF_ERR_INVAL;
    }
    if (opt_int64(c, "as-of-committed", 0, &f->as_of_committed))
        return HF_ERR_INVAL;
    if (f->as_of_committed < 0) {
        fprintf(stderr, "hfctl: --as-of-committed must be >= 0 (the committed_total of "
                        "hfctl stock get when the count was taken)\n");
        return HF_ERR_INVAL;
    }
    f->kind = HF_FEED_COUNT_AS_OF;
    return HF_OK;
}

static int stock_feed(cli_t *c)
{
    hf_record_t rec = {.type = HF_REC_STOCK_FEED};
    hf_stock_feed_t *f = &rec.u.stock_feed;
    if (copy_id(f->warehouse_id, sizeof f->warehouse_id, need(c, "warehouse"), "warehouse") ||
        copy_id(f->sku, sizeof f->sku, need(c, "sku"), "sku") ||
        parse_feed_kind(need(c, "kind"), &f->kind) || !need(c, "qty") || !need(c, "seq") ||
        opt_int64(c, "qty", 0, &f->qty) || opt_int64(c, "seq", 0, &f->feed_seq) ||
        opt_int64(c, "epoch", 0, &f->feed_epoch) || feed_as_of(c, f))
        return HF_ERR_INVAL;
    f->issued_at_ms = hf_wall_ms();
    char key[COUNTER_KEY_MAX];
    pair_key(key, f->warehouse_id, f->sku);
    return produce_one(c, HF_T_STOCK_FEED, key, &rec);
}

/* ---- reading */

typedef struct {
    const char *want_key;
    size_t want_key_len;
    uint8_t value[HF_RECORD_LEN_MAX];
    size_t value_len;
    int found;
} find_last_t;

static int find_last(void *opaque, const kafka_msg_t *msg)
{
    find_last_t *f = opaque;
    if (msg->key_len != f->want_key_len || memcmp(msg->key, f->want_key, f->want_key_len) != 0)
        return HF_OK;
    f->found = msg->value != NULL && msg->value_len <= sizeof f->value;
    if (f->found) {
        memcpy(f->value, msg->value, msg->value_len);
        f->value_len = msg->value_len;
    }
    return HF_OK;
}

/* Reads the partition of topic that part_key hashes to and keeps the last value
 * stored under want_key (compacted topics and changelogs: the current value). */
static int read_last(cli_t *c, hf_topic_id_t topic_id, const char *part_key, find_last_t *f)
{
    kafka_conf_t kc = {c->bootstrap, "hfctl", NULL};
    kafka_reader_t *rd = NULL;
    int32_t parts = 0;
    int64_t next = 0;
    const char *topic = topic_name(topic_id);
    int err = kafka_reader_new(&kc, &rd, c->errstr, sizeof c->errstr);
    if (!err)
        err = kafka_partition_count(rd, topic, 10000, &parts, c->errstr, sizeof c->errstr);
    if (!err)
        err = kafka_reader_read_to_end(
            rd, topic, kafka_partition_for_key(part_key, strlen(part_key), parts),
            KAFKA_OFFSET_BEGINNING, 10000, find_last, f, &next, c->errstr, sizeof c->errstr);
    kafka_reader_destroy(rd);
    return err;
}

/* The committed counter of a pair, read from the counter changelog (the same
 * bytes the processor restores from). */
static int stock_get(cli_t *c)
{
    const char *wh = need(c, "warehouse"), *sku = need(c, "sku");
    if (!wh || !sku)
        return HF_ERR_INVAL;
    char pkey[COUNTER_KEY_MAX], ckey[COUNTER_KEY_MAX];
    pair_key(pkey, wh, sku);
    static find_last_t f;
    f.want_key = ckey;
    f.want_key_len = counter_key(ckey, wh, sku);
    int err = read_last(c, HF_T_COUNTER_CHANGELOG, pkey, &f);
    f.want_key = NULL;
    if (err)
        return err;
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    if (f.found && codec_decode(f.value, f.value_len, &rec, c->errstr, sizeof c->errstr) != HF_OK)
        return HF_ERR_DECODE;
    const hf_counter_state_t *s = &rec.u.counter_state;
    printf("{\"warehouse_id\":\"%s\",\"sku\":\"%s\",\"known\":%s,\"on_hand\":%lld,"
           "\"reserved\":%lld,\"safety_stock\":%lld,\"available\":%lld,\"revoking\":%lld,"
           "\"version\":%lld,\"feed_seq\":%lld,\"feed_epoch\":%lld,\"committed_total\":%lld}\n",
           wh, sku, f.found ? "true" : "false", (long long)s->on_hand, (long long)s->reserved,
           (long long)s->safety_stock, (long long)counter_available_reported(s),
           (long long)s->revoking, (long long)s->version, (long long)s->feed_seq,
           (long long)s->feed_epoch, (long long)s->committed_total);
    return HF_OK;
}

/* The routing view of one SKU: its last record on the compacted availability
 * topic (what gateways and search indexing see). */
static int cmd_availability(cli_t *c)
{
    const char *sku = need(c, "sku");
    if (!sku || strlen(sku) > HF_SKU_LEN_MAX)
        return HF_ERR_INVAL;
    static find_last_t f;
    f.want_key = sku;
    f.want_key_len = strlen(sku);
    int err = read_last(c, HF_T_AVAILABILITY, sku, &f);
    f.want_key = NULL;
    if (err)
        return err;
    if (!f.found) {
        printf("{\"sku\":\"%s\",\"known\":false}\n", sku);
        return HF_OK;
    }
    char *json = NULL;
    err = codec_to_json(f.value, f.value_len, &json, c->errstr, sizeof c->errstr);
    if (!err)
        printf("%s\n", json);
    free(json);
    return err;
}

typedef struct {
    int64_t printed, max;
    char errstr[256];
} tail_t;

static int tail_record(void *opaque, const kafka_msg_t *msg)
{
    tail_t *t = opaque;
    if (t->max >= 0 && t->printed >= t->max)
        return HF_ERR_LIMIT;
    tail_record_t rec = {.partition = msg->partition,
                         .offset = msg->offset,
                         .key = msg->key,
                         .key_len = msg->key_len,
                         .value = msg->value,
                         .value_len = msg->value_len};
    const void *tp = NULL;
    if (kafka_msg_header_ref(msg, "traceparent", &tp, &rec.traceparent_len))
        rec.traceparent = tp;
    char *line = NULL;
    int err = tail_json_line(&rec, &line, t->errstr, sizeof t->errstr);
    if (!err) {
        fputs(line, stdout);
        fputc('\n', stdout);
        t->printed++;
    }
    free(line);
    return err;
}

/* Prints every committed record of a topic, partition by partition. */
static int cmd_tail(cli_t *c)
{
    if (c->a.positional_count < 1) {
        fprintf(stderr, "hfctl: tail which topic? e.g. hfctl tail holdfast.stock-levels\n");
        return HF_ERR_INVAL;
    }
    const char *topic = c->a.positional[0];
    tail_t t = {0, -1, ""};
    if (opt_int64(c, "max", -1, &t.max))
        return HF_ERR_INVAL;
    kafka_conf_t kc = {c->bootstrap, "hfctl", NULL};
    kafka_reader_t *rd = NULL;
    int32_t parts = 0;
    int err = kafka_reader_new(&kc, &rd, c->errstr, sizeof c->errstr);
    if (!err)
        err = kafka_partition_count(rd, topic, 10000, &parts, c->errstr, sizeof c->errstr);
    for (int32_t p = 0; !err && p < parts; p++) {
        int64_t next = 0;
        err = kafka_reader_read_to_end(rd, topic, p, KAFKA_OFFSET_BEGINNING, 10000, tail_record, &t,
                                       &next, c->errstr, sizeof c->errstr);
    }
    kafka_reader_destroy(rd);
    if (err && err != HF_ERR_LIMIT && t.errstr[0])
        snprintf(c->errstr, sizeof c->errstr, "%s", t.errstr);
    return err == HF_ERR_LIMIT ? HF_OK : err;
}

static int topics_apply_cmd(cli_t *c)
{
    char found[HF_DATAFILE_PATH_MAX];
    const char *file =
        opt(c, "file") ? opt(c, "file")
                       : hf_datafile_find("topics/topics.json", "topics.json", found, sizeof found);
    int64_t factor = 0;
    if (opt_int64(c, "replication-factor", 0, &factor))
        return HF_ERR_INVAL;
    if (opt(c, "replication-factor") && (factor < 1 || factor > HF_REPLICATION_FACTOR_MAX)) {
        fprintf(stderr, "hfctl topics apply: --replication-factor must be in [1, %d]\n",
                HF_REPLICATION_FACTOR_MAX);
        return HF_ERR_INVAL;
    }
    return topics_apply(c->bootstrap, file, (int)factor, stdout, c->errstr, sizeof c->errstr);
}

static int cmd_burst(cli_t *c)
{
    int64_t holds = 0, producers = 0, timeout_ms = 0;
    burst_opts_t o = {c->bootstrap, need(c, "sku"), need(c, "warehouses"), 0, 0, 0};
    if (!o.sku || !o.warehouses || opt_int64(c, "holds", 1000, &holds) ||
        opt_int64(c, "producers", 8, &producers) || opt_int64(c, "timeout-ms", 120000, &timeout_ms))
        return HF_ERR_INVAL;
    o.holds = (size_t)holds;
    o.producers = (int)producers;
    o.timeout_ms = (int)timeout_ms;
    return burst_run(&o, c->errstr, sizeof c->errstr);
}

/* ---- checkout requests through the client library (tools/lib/client.h) */

/* Sends req, waits for its reply (re-sending with the same idempotency key on
 * timeout) and prints the reply as JSON. An answer other than `success` (the
 * outcome the command asks for) makes hfctl exit 3, so scripts can tell a
 * rejection from a transport error (1). */
static int call_and_print(cli_t *c, const hf_record_t *req, hf_reply_outcome_t success)
{
    int64_t timeout_ms = 0, attempts = 0;
    if (opt_int64(c, "timeout-ms", 10000, &timeout_ms) || opt_int64(c, "attempts", 3, &attempts))
        return HF_ERR_INVAL;
    /* Checked here, not by holdfast: holdfast ignores a malformed value
     * silently, and the operator who typed it would follow a trace that is not
     * there. */
    const char *tp = opt(c, "traceparent");
    trace_ctx_t tc;
    if (tp && !trace_parse(tp, strlen(tp), &tc)) {
        fprintf(stderr,
                "hfctl: --traceparent '%s' is not a W3C traceparent: give "
                "00-<32 lowercase hex trace-id>-<16 lowercase hex parent-id>-<2 hex flags>, "
                "neither id all zeros\n",
                tp);
        return HF_ERR_INVAL;
    }
    hf_client_t *cl = NULL;
    int err = client_new(c->bootstrap, opt(c, "reply-to"), &cl, c->errstr, sizeof c->errstr);
    hf_reply_t rep;
    if (!err)
        err = client_call_traced(cl, req, tp, (int)timeout_ms, (int)attempts, &rep, c->errstr,
                                 sizeof c->errstr);
    client_destroy(cl);
    if (err)
        return err;
    char *json = client_reply_json(&rep);
    printf("%s\n", json ? json : "{}");
    free(json);
    /* HF_REPLY__COUNT: a payment event, whose answer follows the policy: any
     * of HELD, COMMITTED, RELEASED is what was asked for. */
    c->refused =
        success == HF_REPLY__COUNT ? rep.outcome > HF_REPLY_RELEASED : rep.outcome != success;
    return HF_OK;
}

/* "SKU:qty,SKU:qty" or --sku S --qty N. */
static int reserve_lines(cli_t *c, hf_reserve_t *r)
{
    const char *lines = opt(c, "lines");
    if (!lines) {
        int64_t qty = 0;
        if (copy_id(r->lines[0].sku, sizeof r->lines[0].sku, need(c, "sku"), "sku") ||
            opt_int64(c, "qty", 1, &qty))
            return HF_ERR_INVAL;
        r->lines[0].qty = qty;
        r->lines_count = 1;
        return HF_OK;
    }
    for (const char *p = lines; p && *p && r->lines_count < HF_LINES_MAX;) {
        const char *colon = strchr(p, ':'), *comma = strchr(p, ',');
        if (!colon || (comma && comma < colon) || (size_t)(colon - p) >= sizeof r->lines[0].sku) {
            fprintf(stderr, "hfctl: --lines must be SKU:qty[,SKU:qty]\n");
            return HF_ERR_INVAL;
        }
        hf_line_t *l = &r->lines[r->lines_count++];
        snprintf(l->sku, sizeof l->sku, "%.*s", (int)(colon - p), p);
        l->qty = strtoll(colon + 1, NULL, 10);
        p = comma ? comma + 1 : NULL;
    }
    return HF_OK;
}

/* --only W1,W2 into r->only_warehouses. */
static int reserve_only(cli_t *c, hf_reserve_t *r)
{
    const char *only = opt(c, "only");
    for (const char *p = only; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char id[HF_WAREHOUSE_LEN_MAX + 2];
        snprintf(id, sizeof id, "%.*s", (int)(len < sizeof id - 1 ? len : sizeof id - 1), p);
        if (r->only_warehouses_count == HF_ONLY_WAREHOUSES_MAX) {
            fprintf(stderr, "hfctl: --only names more than %d warehouses\n",
                    HF_ONLY_WAREHOUSES_MAX);
            return HF_ERR_INVAL;
        }
        hf_wh_ref_t *w = &r->only_warehouses[r->only_warehouses_count++];
        if (copy_id(w->warehouse_id, sizeof w->warehouse_id, id, "only"))
            return HF_ERR_INVAL;
        p = comma ? comma + 1 : NULL;
    }
    return HF_OK;
}

static int cmd_reserve(cli_t *c)
{
    static hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_RESERVE;
    hf_reserve_t *r = &rec.u.reserve;
    const char *lat = opt(c, "lat"), *lon = opt(c, "lon");
    if (request_ids(c, r->reservation_id, sizeof r->reservation_id, r->idempotency_key,
                    sizeof r->idempotency_key) ||
        reserve_lines(c, r) || opt_int64(c, "ttl-ms", 0, &r->ttl_ms) || reserve_only(c, r))
        return HF_ERR_INVAL;
    r->allow_partial = opt(c, "allow-partial") != NULL;
    r->ship_to.lat = lat ? strtod(lat, NULL) : 40.71;
    r->ship_to.lon = lon ? strtod(lon, NULL) : -74.01;
    if (opt(c, "campaign"))
        snprintf(r->campaign, sizeof r->campaign, "%s", opt(c, "campaign"));
    if (opt(c, "reply-to"))
        snprintf(r->reply_to, sizeof r->reply_to, "%s", opt(c, "reply-to"));
    r->sent_at_ms = hf_wall_ms();
    return call_and_print(c, &rec, HF_REPLY_HELD);
}

static int cmd_commit(cli_t *c)
{
    hf_record_t rec = {.type = HF_REC_COMMIT};
    hf_commit_t *r = &rec.u.commit;
    if (request_ids(c, r->reservation_id, sizeof r->reservation_id, r->idempotency_key,
                    sizeof r->idempotency_key) ||
        copy_id(r->payment_id, sizeof r->payment_id, need(c, "payment"), "payment"))
        return HF_ERR_INVAL;
    if (opt(c, "reply-to"))
        snprintf(r->reply_to, sizeof r->reply_to, "%s", opt(c, "reply-to"));
    r->sent_at_ms = hf_wall_ms();
    return call_and_print(c, &rec, HF_REPLY_COMMITTED);
}

static int cmd_release(cli_t *c)
{
    hf_record_t rec = {.type = HF_REC_RELEASE};
    hf_release_t *r = &rec.u.release;
    if (request_ids(c, r->reservation_id, sizeof r->reservation_id, r->idempotency_key,
                    sizeof r->idempotency_key))
        return HF_ERR_INVAL;
    snprintf(r->reason, sizeof r->reason, "%s", opt(c, "reason") ? opt(c, "reason") : "abandoned");
    if (opt(c, "reply-to"))
        snprintf(r->reply_to, sizeof r->reply_to, "%s", opt(c, "reply-to"));
    r->sent_at_ms = hf_wall_ms();
    return call_and_print(c, &rec, HF_REPLY_RELEASED);
}

static int cmd_extend(cli_t *c)
{
    hf_record_t rec = {.type = HF_REC_EXTEND};
    hf_extend_t *r = &rec.u.extend;
    if (request_ids(c, r->reservation_id, sizeof r->reservation_id, r->idempotency_key,
                    sizeof r->idempotency_key) ||
        !need(c, "by-ms") || opt_int64(c, "by-ms", 0, &r->extend_by_ms))
        return HF_ERR_INVAL;
    if (opt(c, "reply-to"))
        snprintf(r->reply_to, sizeof r->reply_to, "%s", opt(c, "reply-to"));
    r->sent_at_ms = hf_wall_ms();
    return call_and_print(c, &rec, HF_REPLY_HELD);
}

static int cmd_payment(cli_t *c)
{
    hf_record_t rec = {.type = HF_REC_PAYMENT_EVENT};
    hf_payment_event_t *r = &rec.u.payment_event;
    if (request_ids(c, r->reservation_id, sizeof r->reservation_id, r->idempotency_key,
                    sizeof r->idempotency_key) ||
        copy_id(r->payment_id, sizeof r->payment_id, need(c, "payment"), "payment"))
        return HF_ERR_INVAL;
    const char *event = need(c, "event");
    if (!event)
        return HF_ERR_INVAL;
    r->event = hf_payment_event_kind_parse(event);
    if (r->event == HF_PAY_UNKNOWN) { /* "failed" as well as "payment.failed" or "FAILED" */
        char dotted[64];
        snprintf(dotted, sizeof dotted, "payment.%.40s", event);
        r->event = hf_payment_event_kind_parse(dotted);
    }
    if (r->event == HF_PAY_UNKNOWN) {
        fprintf(stderr,
                "hfctl: --event '%s' is not one of processing, requires_action, "
                "succeeded, failed, canceled\n",
                event);
        return HF_ERR_INVAL;
    }
    const char *reason = opt(c, "reason");
    if (reason && strlen(reason) > HF_PAYMENT_REASON_LEN_MAX) {
        fprintf(stderr, "hfctl: --reason is longer than %d bytes\n", HF_PAYMENT_REASON_LEN_MAX);
        return HF_ERR_INVAL;
    }
    snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
    if (opt(c, "reply-to"))
        snprintf(r->reply_to, sizeof r->reply_to, "%s", opt(c, "reply-to"));
    r->sent_at_ms = hf_wall_ms();
    return call_and_print(c, &rec, HF_REPLY__COUNT);
}

/* A reservation's committed state, read from the gateway changelog partition
 * that owns it (the bytes the gateway restores from). */
static int cmd_status(cli_t *c)
{
    const char *rid = need(c, "reservation");
    if (!rid || strlen(rid) > HF_ID_LEN_MAX)
        return HF_ERR_INVAL;
    static find_last_t f;
    char key[GW_KEY_MAX];
    f.want_key = key;
    f.want_key_len = gw_res_key(key, rid);
    int err = read_last(c, HF_T_GATEWAY_CHANGELOG, rid, &f);
    f.want_key = NULL;
    if (err)
        return err;
    if (!f.found) {
        printf("{\"reservation_id\":\"%s\",\"known\":false}\n", rid);
        return HF_OK;
    }
    hf_record_t rec;
    err = codec_decode(f.value, f.value_len, &rec, c->errstr, sizeof c->errstr);
    if (err)
        return err;
    const hf_reservation_state_t *rs = &rec.u.reservation_state;
    printf("{\"reservation_id\":\"%s\",\"known\":true,\"status\":\"%s\",\"expires_at_ms\":%lld,"
           "\"payment_id\":\"%s\",\"reason\":\"%s\",\"allocations\":[",
           rs->reservation_id, hf_res_status_name(rs->status), (long long)rs->expires_at_ms,
           rs->payment_id, rs->reason);
    for (int32_t i = 0, n = 0; i < rs->allocations_count; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        if (h->status != HF_HOLD_REF_HELD)
            continue;
        printf("%s{\"warehouse_id\":\"%s\",\"sku\":\"%s\",\"qty\":%lld}", n++ ? "," : "",
               h->warehouse_id, h->sku, (long long)h->qty);
    }
    printf("],\"late_payment\":\"%s\"}\n", hf_rebook_name(rs->rebook));
    return HF_OK;
}

/* --shards, --memory-mb, --spill-dir and --progress of `hfctl reconcile`. */
static int reconcile_scale_opts(cli_t *c, reconcile_opts_t *o)
{
    int64_t shards = 0, memory_mb = 0;
    const char *progress = opt(c, "progress");
    if (opt_int64(c, "shards", 0, &shards) || opt_int64(c, "memory-mb", 0, &memory_mb))
        return HF_ERR_INVAL;
    if ((opt(c, "shards") && shards < 1) || shards > RC_SHARDS_MAX) {
        fprintf(stderr, "hfctl: --shards must be 1 to %d\n", RC_SHARDS_MAX);
        return HF_ERR_INVAL;
    }
    if (memory_mb < 0 || (shards > 0 && memory_mb > 0)) {
        fprintf(stderr,
                "hfctl: give --shards or --memory-mb (a positive number of MiB), not both\n");
        return HF_ERR_INVAL;
    }
    o->shards = (uint32_t)shards;
    o->memory_mb = (size_t)memory_mb;
    o->spill_dir = opt(c, "spill-dir");
    bool quiet = progress && (strcmp(progress, "0") == 0 || strcasecmp(progress, "false") == 0);
    o->progress = quiet ? NULL : stderr;
    return HF_OK;
}

/* Replays every topic and checks the invariants (tools/lib/reconcile.h). One
 * JSON verdict on stdout; progress and a closing throughput line on stderr;
 * exit 0 PASS, 1 FAIL, 2 when it cannot read or decide. */
static int cmd_reconcile(cli_t *c)
{
    reconcile_opts_t o;
    reconcile_opts_default(&o);
    o.bootstrap = c->bootstrap;
    reconcile_limits_t *l = &o.limits;
    int64_t v[10];
    const char *q = opt(c, "quiescent");
    if (reconcile_scale_opts(c, &o))
        return HF_ERR_INVAL;
    if (opt_int64(c, "violations", (int64_t)l->violations_shown_max, &v[0]) ||
        opt_int64(c, "settle-attempts", o.settle_attempts_max, &v[1]) ||
        opt_int64(c, "expiry-lag-max-ms", l->expiry_lag_max_ms, &v[2]) ||
        opt_int64(c, "pairs-max", (int64_t)l->pairs_max, &v[3]) ||
        opt_int64(c, "holds-max", (int64_t)l->holds_max, &v[4]) ||
        opt_int64(c, "reservations-max", (int64_t)l->reservations_max, &v[5]) ||
        opt_int64(c, "reply-keys-max", (int64_t)l->reply_keys_max, &v[6]) ||
        opt_int64(c, "timeout-ms", o.timeout_ms, &v[7]) ||
        opt_int64(c, "sales-max", (int64_t)l->sales_max, &v[8]) ||
        opt_int64(c, "allotments-max", (int64_t)l->allotments_max, &v[9]))
        return HF_ERR_INVAL;
    for (int i = 3; i < 10; i++)
        if (v[i] <= 0) {
            fprintf(stderr, "hfctl: table caps and --timeout-ms must be positive\n");
            return HF_ERR_INVAL;
        }
    o.quiescent = q && strcmp(q, "0") != 0 && strcasecmp(q, "false") != 0;
    l->violations_shown_max = (size_t)(v[0] > 0 ? v[0] : 0);
    o.settle_attempts_max = v[1] > 0 ? (int)v[1] : 1;
    l->expiry_lag_max_ms = v[2];
    l->pairs_max = (size_t)v[3];
    l->holds_max = (size_t)v[4];
    l->reservations_max = (size_t)v[5];
    l->reply_keys_max = (size_t)v[6];
    o.timeout_ms = (int)v[7];
    l->sales_max = (size_t)v[8];
    l->allotments_max = (size_t)v[9];
    rc_verdict_t verdict = RC_INCONCLUSIVE;
    int err = reconcile_run(&o, stdout, &verdict, c->errstr, sizeof c->errstr);
    if (err || verdict == RC_INCONCLUSIVE) {
        fprintf(stderr, "hfctl reconcile: %s\n",
                err ? c->errstr : "topics kept moving: cross-topic checks inconclusive");
        c->errstr[0] = '\0';
        return HF_ERR_INVAL; /* exit 2: no verdict */
    }
    return verdict == RC_PASS ? HF_OK : HF_ERR_CORRUPT; /* exit 1 */
}

/* ---- the command table */

#define OPT_END                                                                                    \
    {                                                                                              \
        NULL, NULL, false, NULL                                                                    \
    }
#define OPT_COUNTER_IDS                                                                            \
    {"reservation", "R", true, "reservation id"},                                                  \
        {"attempt", "N", false, "attempt of the reservation (default 0)"},                         \
        {"warehouse", "W", true, "warehouse id"},                                                  \
    {                                                                                              \
        "sku", "S", true, "SKU"                                                                    \
    }
#define OPT_CALL                                                                                   \
    {"reply-to", "TOPIC", false, "replies topic (default holdfast.replies)"},                      \
        {"timeout-ms", "N", false, "wait for a reply this long per attempt (default 10000)"},      \
        {"attempts", "N", false, "send with the same key at most N times (default 3)"},            \
    {                                                                                              \
        "traceparent", "TP", false, "W3C trace context of the request (00-TRACEID-PARENTID-FLAGS)" \
    }

static const hf_cli_opt_t topics_apply_opts[] = {
    {"file", "FILE", false,
     "topics file (default topics/topics.json, else /etc/holdfast/topics.json)"},
    {"replication-factor", "N", false,
     "replicas of each new topic (default: the file's); min.insync.replicas 2 from 3"},
    OPT_END};
static const hf_cli_opt_t send_hold_opts[] = {
    OPT_COUNTER_IDS, {"qty", "N", false, "units to hold (default 1)"}, OPT_END};
static const hf_cli_opt_t send_commit_hold_opts[] = {OPT_COUNTER_IDS, OPT_END};
static const hf_cli_opt_t send_release_hold_opts[] = {
    OPT_COUNTER_IDS, {"reason", "TEXT", false, "why (default manual)"}, OPT_END};
static const hf_cli_opt_t stock_feed_opts[] = {
    {"warehouse", "W", true, "warehouse id"},
    {"sku", "S", true, "SKU"},
    {"kind", "K", true, "RECEIVE, ADJUST, COUNT, COUNT_AS_OF or SAFETY_STOCK"},
    {"qty", "N", true, "units (a delta for RECEIVE/ADJUST, the level for COUNT/SAFETY_STOCK)"},
    {"seq", "N", true, "feed sequence number of the pair (a feed at or below the last is stale)"},
    {"as-of-committed", "N", false,
     "COUNT taken when `stock get` said committed_total N: sales since are not undone"},
    {"epoch", "N", false, "feed numbering epoch: one higher restarts feed_seq at 1"},
    OPT_END};
static const hf_cli_opt_t stock_get_opts[] = {
    {"warehouse", "W", true, "warehouse id"}, {"sku", "S", true, "SKU"}, OPT_END};
static const hf_cli_opt_t availability_opts[] = {{"sku", "S", true, "SKU"}, OPT_END};
static const hf_cli_opt_t tail_opts[] = {
    {"max", "N", false, "print at most N records (default: all)"}, OPT_END};
static const hf_cli_opt_t burst_opts[] = {
    {"sku", "S", true, "SKU"},
    {"warehouses", "W1,W2", true, "warehouses to spread the holds over"},
    {"holds", "N", false, "single-unit holds to send (default 1000)"},
    {"producers", "N", false, "concurrent producers (default 8)"},
    {"timeout-ms", "N", false, "wait for every result this long (default 120000)"},
    OPT_END};
static const hf_cli_opt_t reserve_opts[] = {
    {"reservation", "R", true, "reservation id"},
    {"key", "K", true, "idempotency key"},
    {"sku", "S", false, "SKU of a one-line reservation (or --lines)"},
    {"qty", "N", false, "units of --sku (default 1)"},
    {"lines", "S:N,S:N", false, "several lines"},
    {"lat", "X", false, "ship-to latitude (default 40.71)"},
    {"lon", "Y", false, "ship-to longitude (default -74.01)"},
    {"ttl-ms", "N", false, "hold time to live (default: the campaign's or the configured)"},
    {"campaign", "C", false, "campaign (its TTL applies)"},
    {"only", "W,W", false, "hold only at these warehouses (pick-up: the store alone)"},
    {"allow-partial", NULL, false, "hold what the network has of each line rather than nothing"},
    OPT_CALL,
    OPT_END};
static const hf_cli_opt_t commit_opts[] = {{"reservation", "R", true, "reservation id"},
                                           {"key", "K", true, "idempotency key"},
                                           {"payment", "P", true, "payment id"},
                                           OPT_CALL,
                                           OPT_END};
static const hf_cli_opt_t release_opts[] = {{"reservation", "R", true, "reservation id"},
                                            {"key", "K", true, "idempotency key"},
                                            {"reason", "TEXT", false, "why (default abandoned)"},
                                            OPT_CALL,
                                            OPT_END};
static const hf_cli_opt_t extend_opts[] = {{"reservation", "R", true, "reservation id"},
                                           {"key", "K", true, "idempotency key"},
                                           {"by-ms", "N", true, "add N ms to the hold's expiry"},
                                           OPT_CALL,
                                           OPT_END};
static const hf_cli_opt_t payment_opts[] = {
    {"reservation", "R", true, "reservation id"},
    {"key", "K", true, "the provider's event id (idempotency key)"},
    {"event", "E", true, "processing, requires_action, succeeded, failed or canceled"},
    {"payment", "P", true, "payment id"},
    {"reason", "TEXT", false, "the provider's decline or cancellation reason"},
    OPT_CALL,
    OPT_END};
static const hf_cli_opt_t status_opts[] = {{"reservation", "R", true, "reservation id"}, OPT_END};
static const hf_cli_opt_t reconcile_opts[] = {
    {"quiescent", "0|1", false, "1: the system is idle, so nothing may be in flight"},
    {"violations", "N", false, "violations shown in the verdict"},
    {"settle-attempts", "N", false, "re-reads while topics keep moving"},
    {"expiry-lag-max-ms", "N", false, "how late an expiry may be"},
    {"pairs-max", "N", false, "table cap: warehouse/SKU pairs"},
    {"holds-max", "N", false, "table cap: holds"},
    {"reservations-max", "N", false, "table cap: reservations"},
    {"reply-keys-max", "N", false, "table cap: idempotency keys"},
    {"sales-max", "N", false, "table cap: (reservation, pair) held or sold"},
    {"allotments-max", "N", false, "table cap: escrow allotments (pair, gateway partition)"},
    {"timeout-ms", "N", false, "give up reading after N ms"},
    {"shards", "K", false,
     "K passes, each keeping the pairs of one shard: memory / K (pair-keyed caps are per shard)"},
    {"memory-mb", "M", false, "choose --shards from the topics' sizes to stay within M MiB"},
    {"spill-dir", "DIR", false,
     "with shards: the first pass copies what later ones need to DIR, which they read instead "
     "of Kafka"},
    {"progress", "0|1", false, "progress on stderr (default 1)"},
    OPT_END};

typedef struct {
    hf_cli_cmd_t cli;
    int (*run)(cli_t *c);
} command_t;

static const command_t commands[] = {
    {{"topics apply", NULL, 0, "Creates the topics of the topics file (existing ones are kept).",
      topics_apply_opts},
     topics_apply_cmd},
    {{"send hold", NULL, 0, "Produces a Hold to the counter commands topic.", send_hold_opts},
     send_hold},
    {{"send commit-hold", NULL, 0, "Produces a CommitHold to the counter commands topic.",
      send_commit_hold_opts},
     send_commit_hold},
    {{"send release-hold", NULL, 0, "Produces a ReleaseHold to the counter commands topic.",
      send_release_hold_opts},
     send_release_hold},
    {{"stock feed", NULL, 0, "Produces a StockFeed record (what a WMS sends).", stock_feed_opts},
     stock_feed},
    {{"stock get", NULL, 0, "Prints a pair's committed counter (from the counter changelog).",
      stock_get_opts},
     stock_get},
    {{"availability", NULL, 0, "Prints a SKU's routing view (its last Availability record).",
      availability_opts},
     cmd_availability},
    {{"tail", "TOPIC", 1,
      "Prints every committed record of TOPIC, one JSON object a line (README.md).", tail_opts},
     cmd_tail},
    {{"burst", NULL, 0, "A burst of concurrent single-unit holds on one SKU.", burst_opts},
     cmd_burst},
    {{"reserve", NULL, 0, "Reserves through the gateway and prints the reply (exit 3 unless HELD).",
      reserve_opts},
     cmd_reserve},
    {{"commit", NULL, 0, "Commits a reservation (payment); exit 3 unless COMMITTED.", commit_opts},
     cmd_commit},
    {{"release", NULL, 0, "Releases a reservation; exit 3 unless RELEASED.", release_opts},
     cmd_release},
    {{"extend", NULL, 0, "Extends a held reservation's expiry; exit 3 unless HELD.", extend_opts},
     cmd_extend},
    {{"payment", NULL, 0,
      "Sends a payment event (payment_policy decides): exit 3 unless HELD, COMMITTED or RELEASED.",
      payment_opts},
     cmd_payment},
    {{"status", NULL, 0, "Prints a reservation's committed state (from the gateway changelog).",
      status_opts},
     cmd_status},
    {{"reconcile", NULL, 0,
      "Replays every topic and checks the invariants: exit 0 PASS, 1 FAIL, 2 no verdict.",
      reconcile_opts},
     cmd_reconcile},
};
#define COMMANDS_COUNT (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: hfctl COMMAND [options]      hfctl COMMAND --help lists its options\n"
                 "       hfctl --help | --version\ncommands:\n");
    for (size_t i = 0; i < COMMANDS_COUNT; i++)
        fprintf(out, "  %-18s %s\n", commands[i].cli.name, commands[i].cli.summary);
    fprintf(out,
            "env: HOLDFAST_BOOTSTRAP (default 127.0.0.1:9092), HOLDFAST_TOPIC_PREFIX,\n"
            "     HOLDFAST_KAFKA_CONFIG (librdkafka properties file: SASL/TLS, docs/SECURITY.md),\n"
            "     HOLDFAST_KAFKA_OVERRIDES (name=value,name=value)\n"
            "     HOLDFAST_SCHEMA_REGISTRY_URL (resolves Confluent-framed records)\n"
            "     HOLDFAST_SYSCONFDIR (default /etc/holdfast: topics.json when no ./topics/)\n"
            "exit: 0 ok; 1 error; 2 usage; 3 reserve/commit/release/extend answered otherwise "
            "than asked\n"
            "      (the reply is printed); reconcile: 0 PASS, 1 FAIL, 2 no verdict\n");
}

/* The command argv names: one word, or a group word and its subcommand. Sets
 * *words to how many argv entries the name took. NULL when nothing matches. */
static const command_t *find_command(int argc, char **argv, int *words)
{
    for (size_t i = 0; i < COMMANDS_COUNT; i++) {
        const char *name = commands[i].cli.name, *space = strchr(name, ' ');
        if (!space && strcmp(name, argv[1]) == 0) {
            *words = 1;
            return &commands[i];
        }
        size_t group_len = space ? (size_t)(space - name) : 0;
        if (space && argc > 2 && strlen(argv[1]) == group_len &&
            strncmp(name, argv[1], group_len) == 0 && strcmp(space + 1, argv[2]) == 0) {
            *words = 2;
            return &commands[i];
        }
    }
    return NULL;
}

/* "hfctl stock" alone or with an unknown subcommand: list the group's. */
static int group_usage(const char *group, bool asked)
{
    FILE *out = asked ? stdout : stderr;
    size_t shown = 0, group_len = strlen(group);
    for (size_t i = 0; i < COMMANDS_COUNT; i++) {
        const char *name = commands[i].cli.name;
        if (strncmp(name, group, group_len) == 0 && name[group_len] == ' ') {
            if (!shown++)
                fprintf(out, "usage: hfctl %s SUBCOMMAND [options]\nsubcommands:\n", group);
            fprintf(out, "  %-18s %s\n", name, commands[i].cli.summary);
        }
    }
    if (!shown)
        return -1;
    return asked ? 0 : 2;
}

static int run_command(cli_t *c, const command_t *cmd, const char *shown_name)
{
    if (kafka_client_config_from_env(c->errstr, sizeof c->errstr) != HF_OK ||
        codec_init(c->errstr, sizeof c->errstr) != HF_OK ||
        /* Confluent-framed records decode too (tail, availability, reconcile). */
        framing_start_from_env(c->errstr, sizeof c->errstr) != HF_OK) {
        fprintf(stderr, "hfctl: %s\n", c->errstr);
        return 1;
    }
    int err = cmd->run(c);
    framing_stop();
    if (err && c->errstr[0])
        fprintf(stderr, "hfctl %s: %s: %s\n", shown_name, hf_err_name(err), c->errstr);
    if (err == HF_OK)
        return c->refused ? 3 : 0;
    return err == HF_ERR_INVAL ? 2 : 1;
}

int main(int argc, char **argv)
{
    static cli_t c;
    const char *bs = getenv("HOLDFAST_BOOTSTRAP");
    const char *prefix = getenv("HOLDFAST_TOPIC_PREFIX");
    c.bootstrap = bs && *bs ? bs : "127.0.0.1:9092";
    topics_set_prefix(prefix ? prefix : "");
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        hf_version_print(stdout, "hfctl");
        return 0;
    }
    int words = 0;
    const command_t *cmd = find_command(argc, argv, &words);
    if (!cmd) {
        bool asked = argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0);
        int rc = group_usage(argv[1], asked);
        if (rc >= 0) {
            if (!asked && argc > 2)
                fprintf(stderr, "hfctl %s: unknown subcommand '%s'\n", argv[1], argv[2]);
            return rc;
        }
        fprintf(stderr, "hfctl: unknown command '%s' (hfctl --help lists them)\n", argv[1]);
        return 2;
    }
    switch (hf_cli_parse("hfctl", &cmd->cli, argc - words, argv + words, &c.a)) {
    case HF_CLI_RUN:
        return run_command(&c, cmd, cmd->cli.name);
    case HF_CLI_HELP:
        return 0;
    case HF_CLI_VERSION:
        hf_version_print(stdout, "hfctl");
        return 0;
    case HF_CLI_MISUSE:
        break;
    }
    return 2;
}
