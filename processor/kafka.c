/* librdkafka behind holdfast's small Kafka API (kafka.h). Everything that knows
 * about rd_kafka_* lives here: configuration defaults that the exactly-once
 * protocol depends on, the one place every handle's configuration is built
 * (kafka_conf_build, which adds the operator's client configuration), error
 * classification, rebalance plumbing, and the delivery-report bookkeeping that
 * tells a task which changelog offsets it wrote. */
#include "kafka.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_assert.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "kafka_int.h"
#include "kafka_props.h"
#include "log.h"

struct kafka_consumer {
    rd_kafka_t *rk;
    kafka_rebalance_t rebalance;
    char group_id[256];
    bool incremental; /* the consumer protocol: assignments come as deltas */
};

struct kafka_producer {
    rd_kafka_t *rk;
    bool transactional;
    uint64_t failed_count; /* delivery failures; written by the DR callback */
};

struct kafka_reader {
    rd_kafka_t *rk;
    /* read_uncommitted, only asked for watermarks: its high watermark is the
     * log's end, where the reader's own (read_committed) answer would be the
     * last stable offset (kafka_reader_read_to_end). */
    rd_kafka_t *hw_rk;
    rd_kafka_queue_t *queue; /* rk's consumer queue, read in batches by read_to_end */
    bool group_error_logged; /* see reader_group_error */
};

/* ---- configuration */

static void kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    hf_log_level_t lv = level <= 3   ? HF_LOG_ERROR
                        : level <= 4 ? HF_LOG_WARN
                        : level <= 6 ? HF_LOG_INFO
                                     : HF_LOG_DEBUG;
    if (log_enabled(lv))
        hf_log(lv, "librdkafka", "%s: %s: %s", rd_kafka_name(rk), fac, buf);
}

/* ---- a broker that refuses this process's login
 *
 * librdkafka retries a refused login like a lost connection: it logs and tries again,
 * and every call waits out its timeout. A wrong SCRAM password made `holdfast run` say
 * "init_transactions: Timed out ..." a minute later, and hfctl "Broker transport
 * failure". The error callback notes a refusal (every client of the process has the
 * same configuration, so one refusal speaks for all); the calls a start waits on
 * (init_transactions, topic metadata, watermarks) wait in slices, serve the callbacks
 * in between, and stop at a refusal noted since they began, saying what to check.
 * Java clients do the same: an AuthenticationException is not retried. */

/* How often a waiting call looks for a refusal. */
#define KAFKA_REFUSAL_CHECK_MS 500

static pthread_mutex_t refusal_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t refusal_at_ms = -1; /* hf_mono_ms() of the last refusal; under refusal_lock */
static char refusal_what[768];     /* what was refused and what to check; under refusal_lock */
/* Named in a refusal's message; written by kafka_client_config_load, before any client. */
static char client_config_origin[300] = "the client configuration (kafka_config_file, "
                                        "HOLDFAST_KAFKA_CONFIG)";

typedef struct {
    const char *what;  /* what the broker refused */
    const char *check; /* what the operator checks */
} refusal_t;

/* What a refusal means and what to check, or NULL when err is not a refusal. A TLS
 * alert from the broker during the handshake (librdkafka reports it as a transport
 * error) is how a listener with ssl.client.auth=required refuses a missing or
 * untrusted client certificate. */
static const refusal_t *refusal_kind(int err, const char *reason)
{
    static const refusal_t sasl = {
        "the broker refused this client's SASL login",
        "check sasl.mechanisms, and sasl.username and sasl.password (sasl.oauthbearer.* for "
        "OAUTHBEARER), against the principal's credentials on the broker"};
    static const refusal_t client_cert = {
        "the broker refused this client's TLS handshake",
        "check that ssl.certificate.location and ssl.key.location name a certificate, and its "
        "key, signed by a CA the broker trusts: a mutual-TLS listener refuses any other"};
    static const refusal_t tls = {
        "TLS with the broker failed",
        "check that ssl.ca.location names the CA that signed the broker's certificate, and the "
        "client certificate if the listener asks for one"};
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION ||
        err == RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED)
        return &sasl;
    if (err == RD_KAFKA_RESP_ERR__TRANSPORT && strstr(reason, "SSL alert number"))
        return &client_cert;
    if (err == RD_KAFKA_RESP_ERR__SSL)
        return &tls;
    return NULL;
}

static void kafka_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)opaque;
    /* Transient broker errors are retried by librdkafka; fatal ones surface on the
     * next transactional call, where the task acts on them. */
    log_warn("kafka", "%s: %s: %s", rd_kafka_name(rk), rd_kafka_err2name(err), reason);
    const refusal_t *kind = refusal_kind(err, reason);
    if (!kind)
        return;
    pthread_mutex_lock(&refusal_lock);
    bool first = refusal_at_ms < 0;
    refusal_at_ms = hf_mono_ms();
    /* What to check first: a caller's errstr (512 bytes) may cut the tail. librdkafka's
     * "(after N ms in state ...)" says nothing an operator acts on. */
    const char *after = strstr(reason, " (after ");
    int reason_len = after ? (int)(after - reason) : (int)strlen(reason);
    snprintf(refusal_what, sizeof refusal_what,
             "%s: in %s, %s (docs/SECURITY.md). librdkafka: %.*s", kind->what, client_config_origin,
             kind->check, reason_len > 300 ? 300 : reason_len, reason);
    if (first) /* once a process: librdkafka repeats it at every reconnect */
        log_error("kafka", "%s", refusal_what);
    pthread_mutex_unlock(&refusal_lock);
}

/* True when a broker refused one of this process's clients at or after since_ms
 * (hf_mono_ms()); then "what: <the refusal and what to check>" goes into errstr
 * unless errstr is NULL. */
static bool refused_since(int64_t since_ms, const char *what, char *errstr, size_t errstr_size)
{
    pthread_mutex_lock(&refusal_lock);
    bool refused = refusal_at_ms >= since_ms;
    if (refused && errstr)
        snprintf(errstr, errstr_size, "%s: %s", what, refusal_what);
    pthread_mutex_unlock(&refusal_lock);
    return refused;
}

/* The next slice of a wait that ends at deadline_ms: at most KAFKA_REFUSAL_CHECK_MS,
 * at least 1 ms. */
static int refusal_slice_ms(int64_t deadline_ms)
{
    int64_t left_ms = deadline_ms - hf_mono_ms();
    return left_ms > KAFKA_REFUSAL_CHECK_MS ? KAFKA_REFUSAL_CHECK_MS
           : left_ms < 1                    ? 1
                                            : (int)left_ms;
}

rd_kafka_resp_err_t kafka_metadata_or_refusal(rd_kafka_t *rk, rd_kafka_t *poll_rk, int all_topics,
                                              rd_kafka_topic_t *rkt,
                                              const struct rd_kafka_metadata **md_out,
                                              int timeout_ms, const char *what, char *errstr,
                                              size_t errstr_size)
{
    int64_t started_ms = hf_mono_ms(), deadline_ms = started_ms + timeout_ms;
    for (;;) {
        rd_kafka_resp_err_t kerr =
            rd_kafka_metadata(rk, all_topics, rkt, md_out, refusal_slice_ms(deadline_ms));
        if (kerr == RD_KAFKA_RESP_ERR__AUTHENTICATION) { /* errstr is set on this answer */
            if (!refused_since(started_ms, what, errstr, errstr_size))
                snprintf(errstr, errstr_size, "%s: %s", what, rd_kafka_err2str(kerr));
            return kerr;
        }
        if ((kerr != RD_KAFKA_RESP_ERR__TIMED_OUT && kerr != RD_KAFKA_RESP_ERR__TRANSPORT) ||
            hf_mono_ms() >= deadline_ms)
            return kerr;
        rd_kafka_poll(poll_rk, 10); /* serves the error callback; also the pause */
        if (refused_since(started_ms, what, errstr, errstr_size))
            return RD_KAFKA_RESP_ERR__AUTHENTICATION;
    }
}

static int conf_set(rd_kafka_conf_t *c, const char *name, const char *value, char *errstr,
                    size_t errstr_size)
{
    if (rd_kafka_conf_set(c, name, value, errstr, errstr_size) != RD_KAFKA_CONF_OK)
        return HF_ERR_CONFIG;
    return HF_OK;
}

/* Applies "name=value" pairs. */
static int conf_set_all(rd_kafka_conf_t *c, const char *const *pairs, char *errstr,
                        size_t errstr_size)
{
    for (size_t i = 0; pairs && pairs[i]; i++) {
        char name[128];
        const char *eq = strchr(pairs[i], '=');
        if (!eq || (size_t)(eq - pairs[i]) >= sizeof name) {
            snprintf(errstr, errstr_size, "kafka property '%s' is not name=value", pairs[i]);
            return HF_ERR_CONFIG;
        }
        memcpy(name, pairs[i], (size_t)(eq - pairs[i]));
        name[eq - pairs[i]] = '\0';
        if (conf_set(c, name, eq + 1, errstr, errstr_size) != HF_OK)
            return HF_ERR_CONFIG;
    }
    return HF_OK;
}

/* The process's client configuration (kafka_client_config_load); written once at
 * start, before any thread, then only read. */
static kafka_props_t *client_props;

int kafka_client_config_load(const char *path, const char *overrides, char *errstr,
                             size_t errstr_size)
{
    hf_assert(!client_props); /* one configuration per process */
    kafka_props_t *props = kafka_props_new();
    if (!props)
        return HF_ERR_NOMEM;
    int err = HF_OK;
    if (path && *path)
        err = kafka_props_load_file(props, path, errstr, errstr_size);
    if (err == HF_OK && overrides && *overrides)
        err = kafka_props_load_list(props, overrides, "kafka_overrides", errstr, errstr_size);
    if (err != HF_OK) {
        kafka_props_destroy(props);
        return err;
    }
    char names[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < kafka_props_count(props) && used < sizeof names; i++) {
        const char *name, *value;
        kafka_props_at(props, i, &name, &value);
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? " " : "", name);
    }
    if (kafka_props_count(props))
        log_info("kafka", "client configuration%s%s: %zu properties (%s)", path && *path ? " " : "",
                 path && *path ? path : "", kafka_props_count(props), names);
    if (path && *path) /* named in a refusal's message (kafka_error_cb) */
        snprintf(client_config_origin, sizeof client_config_origin,
                 "the client configuration %.250s", path);
    client_props = props;
    return HF_OK;
}

int kafka_client_config_from_env(char *errstr, size_t errstr_size)
{
    return kafka_client_config_load(getenv("HOLDFAST_KAFKA_CONFIG"),
                                    getenv("HOLDFAST_KAFKA_OVERRIDES"), errstr, errstr_size);
}

/* Applies the process's client configuration. Names and values were checked when
 * loaded; a failure here would be a property valid for one client kind only. */
static int conf_set_client_props(rd_kafka_conf_t *c, char *errstr, size_t errstr_size)
{
    for (size_t i = 0; i < kafka_props_count(client_props); i++) {
        const char *name, *value;
        kafka_props_at(client_props, i, &name, &value);
        if (conf_set(c, name, value, errstr, errstr_size) != HF_OK)
            return HF_ERR_CONFIG;
    }
    return HF_OK;
}

rd_kafka_conf_t *kafka_conf_build(const kafka_conf_t *conf, const char *const *defaults,
                                  char *errstr, size_t errstr_size)
{
    /* A client built before the configuration was loaded would connect without
     * the operator's security settings: a bug in the binary's start-up
     * (kafka_client_config_load() must run before the first client). */
    hf_assert(client_props != NULL);
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    const char *const common[] = {
        "socket.nagle.disable=true",
        "log.connection.close=false",
        NULL,
    };
    if (conf_set(c, "bootstrap.servers", conf->bootstrap, errstr, errstr_size) != HF_OK ||
        conf_set(c, "client.id", conf->client_id ? conf->client_id : "holdfast", errstr,
                 errstr_size) != HF_OK ||
        conf_set_all(c, common, errstr, errstr_size) != HF_OK ||
        conf_set_all(c, defaults, errstr, errstr_size) != HF_OK ||
        conf_set_client_props(c, errstr, errstr_size) != HF_OK ||
        conf_set_all(c, conf->overrides, errstr, errstr_size) != HF_OK) {
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    /* HOLDFAST_KAFKA_DEBUG=cgrp,fetch,eos turns on librdkafka's debug contexts. */
    const char *debug = getenv("HOLDFAST_KAFKA_DEBUG");
    if (debug && *debug && conf_set(c, "debug", debug, errstr, errstr_size) != HF_OK) {
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    rd_kafka_conf_set_log_cb(c, kafka_log_cb);
    rd_kafka_conf_set_error_cb(c, kafka_error_cb);
    return c;
}

/* Maps a librdkafka transactional error object to hf_err_t and frees it. */
static int txn_error(rd_kafka_error_t *error, const char *what, char *errstr, size_t errstr_size)
{
    if (!error)
        return HF_OK;
    int err = HF_ERR_KAFKA;
    if (rd_kafka_error_is_fatal(error))
        err = HF_ERR_FATAL;
    else if (rd_kafka_error_txn_requires_abort(error))
        err = HF_ERR_ABORTABLE;
    else if (rd_kafka_error_is_retriable(error))
        err = HF_ERR_TIMEOUT;
    snprintf(errstr, errstr_size, "%s: %s (%s)", what, rd_kafka_error_string(error),
             rd_kafka_error_name(error));
    rd_kafka_error_destroy(error);
    return err;
}

/* ---- messages */

static void msg_fill(kafka_msg_t *msg, rd_kafka_message_t *m)
{
    rd_kafka_timestamp_type_t tstype;
    msg->topic = rd_kafka_topic_name(m->rkt);
    msg->partition = m->partition;
    msg->offset = m->offset;
    msg->key = m->key;
    msg->key_len = m->key_len;
    msg->value = m->payload;
    msg->value_len = m->len;
    msg->timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
    msg->handle = m;
}

void kafka_msg_release(kafka_msg_t *msg)
{
    if (msg && msg->handle) {
        rd_kafka_message_destroy(msg->handle);
        msg->handle = NULL;
    }
}

bool kafka_msg_header_ref(const kafka_msg_t *msg, const char *name, const void **val, size_t *len)
{
    rd_kafka_headers_t *hdrs = NULL;
    *val = NULL;
    *len = 0;
    return msg->handle &&
           rd_kafka_message_headers(msg->handle, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR &&
           rd_kafka_header_get_last(hdrs, name, val, len) == RD_KAFKA_RESP_ERR_NO_ERROR && *val;
}

bool kafka_msg_header(const kafka_msg_t *msg, const char *name, char *out, size_t out_size)
{
    const void *val = NULL;
    size_t len = 0;
    if (!kafka_msg_header_ref(msg, name, &val, &len))
        return false;
    if (len >= out_size)
        len = out_size - 1;
    memcpy(out, val, len);
    out[len] = '\0';
    return true;
}

/* ---- consumer */

static rd_kafka_topic_partition_list_t *tps_to_list(const kafka_tp_t *tps, size_t count)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)count);
    for (size_t i = 0; i < count; i++)
        rd_kafka_topic_partition_list_add(l, tps[i].topic, tps[i].partition);
    return l;
}

/* The group's committed offsets of parts, into parts. Under read_committed
 * librdkafka asks for stable offsets: while a transaction that sent offsets for
 * a partition is still open (a previous owner stalled, not dead), the broker
 * answers UNSTABLE_OFFSET_COMMIT; that is asked again until it has ended. */
static int fetch_committed(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts, int timeout_ms)
{
    log_info("kafka", "%s: assigned %d partitions: fetching their committed offsets (stable)",
             rd_kafka_name(rk), parts->cnt);
    int64_t deadline = hf_mono_ms() + timeout_ms;
    for (int attempt = 0;; attempt++) {
        int64_t left = deadline - hf_mono_ms();
        rd_kafka_resp_err_t kerr = rd_kafka_committed(rk, parts, left > 0 ? (int)left : 1);
        for (int i = 0; !kerr && i < parts->cnt; i++)
            kerr = parts->elems[i].err;
        if (!kerr)
            return HF_OK;
        if (hf_mono_ms() >= deadline) {
            log_error("kafka", "committed offsets not fetched within %d ms: %s", timeout_ms,
                      rd_kafka_err2str(kerr));
            return HF_ERR_TIMEOUT;
        }
        if (attempt == 0)
            log_warn("kafka",
                     "committed offsets not yet stable (%s); waiting for a previous "
                     "owner's open transaction to end",
                     rd_kafka_err2str(kerr));
        for (int i = 0; i < parts->cnt; i++) {
            parts->elems[i].err = RD_KAFKA_RESP_ERR_NO_ERROR;
            parts->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
        }
        /* Not rd_kafka_poll: this runs inside the rebalance callback of a
         * consumer whose events are served by consumer_poll. */
        hf_sleep_ms(200);
    }
}

/* The assignment changes: the whole of it (classic, eager), or the partitions
 * added or taken (consumer protocol, incremental). A failure leaves the
 * consumer's assignment unknown: fatal, as a failed restore is. */
static void assignment_change(kafka_consumer_t *kc, rd_kafka_topic_partition_list_t *parts,
                              bool add)
{
    if (!kc->incremental) {
        rd_kafka_resp_err_t kerr = rd_kafka_assign(kc->rk, add ? parts : NULL);
        if (kerr && add) {
            log_error("kafka", "assign: %s; exiting", rd_kafka_err2str(kerr));
            exit(3);
        }
        return;
    }
    rd_kafka_error_t *e = add ? rd_kafka_incremental_assign(kc->rk, parts)
                              : rd_kafka_incremental_unassign(kc->rk, parts);
    if (e) {
        log_error("kafka", "incremental %s: %s; exiting", add ? "assign" : "unassign",
                  rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        exit(3);
    }
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    kafka_consumer_t *kc = opaque;
    size_t n = (size_t)parts->cnt;
    kafka_tp_t *tps = calloc(n ? n : 1, sizeof *tps);
    int64_t *committed = calloc(n ? n : 1, sizeof *committed);
    hf_assert(tps && committed);
    /* An empty incremental assignment (one follows each revoke) adds nothing
     * to fence for; an empty eager one is still this member's view of the
     * whole group, and under classic the first member fences alone. */
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && (n > 0 || !kc->incremental) &&
        kc->rebalance.before_assign)
        kc->rebalance.before_assign(kc->rebalance.opaque);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && n > 0 &&
        fetch_committed(rk, parts, kc->rebalance.committed_timeout_ms) != HF_OK) {
        /* Restoring without them could miss a batch a previous owner still
         * commits; a restart tries again. */
        log_error("kafka", "cannot learn the committed offsets of the assignment; exiting");
        exit(3);
    }
    for (size_t i = 0; i < n; i++) {
        tps[i].topic = parts->elems[i].topic;
        tps[i].partition = parts->elems[i].partition;
        committed[i] = parts->elems[i].offset >= 0 ? parts->elems[i].offset : KAFKA_OFFSET_NONE;
    }
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        int rc = kc->rebalance.on_assign
                     ? kc->rebalance.on_assign(kc->rebalance.opaque, tps, committed, n)
                     : HF_OK;
        if (rc != HF_OK) {
            /* A stage that cannot restore its state must not consume: stop the
             * process so a supervisor restarts it rather than serve stale state. */
            log_error("kafka", "restore on assignment failed (%s); exiting", hf_err_name(rc));
            exit(3);
        }
        /* Consume from the offsets the restore was made against (a partition
         * without one starts where auto.offset.reset says). */
        assignment_change(kc, parts, true);
    } else {
        if (kc->rebalance.on_revoke)
            kc->rebalance.on_revoke(kc->rebalance.opaque, tps, n);
        assignment_change(kc, parts, false);
    }
    free(tps);
    free(committed);
}

/* Sets the group's own session settings (the consumer protocol's: the client
 * may not), before the consumer joins. */
static int group_session_set(rd_kafka_t *rk, const kafka_group_t *g, char *errstr,
                             size_t errstr_size)
{
    char session[16], heartbeat[16], why[256];
    snprintf(session, sizeof session, "%d", g->session_timeout_ms);
    snprintf(heartbeat, sizeof heartbeat, "%d", g->heartbeat_interval_ms);
    rd_kafka_ConfigResource_t *res =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_GROUP, g->group_id);
    hf_assert(res);
    rd_kafka_error_t *e = NULL;
    if (g->session_timeout_ms > 0)
        e = rd_kafka_ConfigResource_add_incremental_config(
            res, "consumer.session.timeout.ms", RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET, session);
    if (!e && g->heartbeat_interval_ms > 0)
        e = rd_kafka_ConfigResource_add_incremental_config(
            res, "consumer.heartbeat.interval.ms", RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET, heartbeat);
    hf_assert(e == NULL); /* names and values are well formed */
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opts =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS);
    rd_kafka_AdminOptions_set_request_timeout(opts, 10000, why, sizeof why);
    rd_kafka_IncrementalAlterConfigs(rk, &res, 1, opts, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 11000);
    const rd_kafka_IncrementalAlterConfigs_result_t *r =
        ev ? rd_kafka_event_IncrementalAlterConfigs_result(ev) : NULL;
    size_t n = 0;
    const rd_kafka_ConfigResource_t **out =
        r ? rd_kafka_IncrementalAlterConfigs_result_resources(r, &n) : NULL;
    const char *failed = !ev                        ? "no answer within 11 s"
                         : rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
                         : n != 1                   ? "no result"
                         : rd_kafka_ConfigResource_error(out[0])
                             ? rd_kafka_ConfigResource_error_string(out[0])
                             : NULL;
    if (failed)
        snprintf(errstr, errstr_size,
                 "group %s (group_protocol consumer): setting the group's "
                 "consumer.session.timeout.ms=%s / consumer.heartbeat.interval.ms=%s failed: %s. "
                 "Below the brokers' group.consumer.min.session.timeout.ms or "
                 "group.consumer.min.heartbeat.interval.ms (45000 and 5000 by default; holdfast's "
                 "broker scripts use 1000 and 100): lower those or raise "
                 "consumer_session_timeout_ms / consumer_heartbeat_interval_ms; not authorized: "
                 "grant ALTER_CONFIGS on the group; a broker before Kafka 4.0: use "
                 "group_protocol classic",
                 g->group_id, session, heartbeat, failed);
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(res);
    return failed ? HF_ERR_CONFIG : HF_OK;
}

int kafka_consumer_new(const kafka_conf_t *conf, const kafka_group_t *group,
                       const char *const *topics, size_t topics_count,
                       const kafka_rebalance_t *rebalance, kafka_consumer_t **kc_out, char *errstr,
                       size_t errstr_size)
{
    /* read_committed + manual offsets committed inside transactions is the EOS
     * contract; range keeps co-partitioned topics' partition p on one task. */
    /* fetch.wait.max.ms: a fetch returns as soon as data is there
     * (fetch.min.bytes=1); the wait only bounds idle polling, which on 2 shared
     * cores costs the broker CPU that every transaction then waits for.
     * Measured with make bench-gateway: 100 ms beat 10 ms (reserve p50 56 vs
     * 191 ms at 20/s) and 500 ms. */
    // clang-format off
    const char *const defaults[] = {
        "isolation.level=read_committed",
        "enable.auto.commit=false",
        "enable.auto.offset.store=false",
        "auto.offset.reset=earliest",
        "fetch.wait.max.ms=100",
        "fetch.error.backoff.ms=50",
        NULL,
    };
    /* The consumer protocol refuses the session settings and the client-side
     * assignor: the group has them (group_session_set), and the broker's range
     * assignor keeps partition p of co-partitioned inputs together too. */
    const char *const classic[] = {
        "partition.assignment.strategy=range",
        "session.timeout.ms=10000",
        "heartbeat.interval.ms=1000",
        NULL,
    };
    const char *const consumer[] = {
        "group.protocol=consumer",
        "group.remote.assignor=range",
        NULL,
    };
    // clang-format on
    int err = HF_ERR_CONFIG;
    kafka_consumer_t *kc = calloc(1, sizeof *kc);
    rd_kafka_conf_t *c = kafka_conf_build(conf, defaults, errstr, errstr_size);
    rd_kafka_topic_partition_list_t *subs = NULL;
    if (!kc || !c)
        goto fail;
    char value[32];
    if (conf_set_all(c, group->consumer_protocol ? consumer : classic, errstr, errstr_size) !=
        HF_OK)
        goto fail;
    if (!group->consumer_protocol && group->session_timeout_ms > 0) {
        snprintf(value, sizeof value, "%d", group->session_timeout_ms);
        if (conf_set(c, "session.timeout.ms", value, errstr, errstr_size) != HF_OK)
            goto fail;
    }
    if (!group->consumer_protocol && group->heartbeat_interval_ms > 0) {
        snprintf(value, sizeof value, "%d", group->heartbeat_interval_ms);
        if (conf_set(c, "heartbeat.interval.ms", value, errstr, errstr_size) != HF_OK)
            goto fail;
    }
    if (conf_set(c, "group.id", group->group_id, errstr, errstr_size) != HF_OK)
        goto fail;
    snprintf(kc->group_id, sizeof kc->group_id, "%s", group->group_id);
    kc->incremental = group->consumer_protocol;
    if (group->instance_id &&
        conf_set(c, "group.instance.id", group->instance_id, errstr, errstr_size) != HF_OK)
        goto fail;
    if (rebalance)
        kc->rebalance = *rebalance;
    rd_kafka_conf_set_rebalance_cb(c, rebalance_cb);
    rd_kafka_conf_set_opaque(c, kc);
    kc->rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, errstr, errstr_size);
    if (!kc->rk) {
        err = HF_ERR_KAFKA;
        goto fail;
    }
    c = NULL; /* owned by rk now */
    if (group->consumer_protocol &&
        (group->session_timeout_ms > 0 || group->heartbeat_interval_ms > 0) &&
        (err = group_session_set(kc->rk, group, errstr, errstr_size)) != HF_OK)
        goto fail;
    rd_kafka_poll_set_consumer(kc->rk);
    subs = rd_kafka_topic_partition_list_new((int)topics_count);
    for (size_t i = 0; i < topics_count; i++)
        rd_kafka_topic_partition_list_add(subs, topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t kerr = rd_kafka_subscribe(kc->rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (kerr) {
        snprintf(errstr, errstr_size, "subscribe: %s", rd_kafka_err2str(kerr));
        err = HF_ERR_KAFKA;
        goto fail;
    }
    *kc_out = kc;
    return HF_OK;
fail:
    if (c)
        rd_kafka_conf_destroy(c);
    if (kc && kc->rk)
        rd_kafka_destroy(kc->rk);
    free(kc);
    return err;
}

bool kafka_consumer_incremental(const kafka_consumer_t *kc)
{
    return kc->incremental;
}

int kafka_consumer_poll(kafka_consumer_t *kc, int timeout_ms, kafka_msg_t *msg, char *errstr,
                        size_t errstr_size)
{
    rd_kafka_message_t *m = rd_kafka_consumer_poll(kc->rk, timeout_ms);
    if (!m) {
        /* A fenced static member (another consumer took its group.instance.id,
         * e.g. after a broker restart) gets no further messages and no error
         * event: only the fatal-error state says so. The task must stop. */
        char reason[256];
        if (rd_kafka_fatal_error(kc->rk, reason, sizeof reason)) {
            snprintf(errstr, errstr_size, "consumer fatal error: %s", reason);
            return HF_ERR_FATAL;
        }
        return 0;
    }
    if (m->err) {
        int err = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF ? 0 : HF_ERR_KAFKA;
        if (err) {
            snprintf(errstr, errstr_size, "consume: %s", rd_kafka_message_errstr(m));
            if (m->err == RD_KAFKA_RESP_ERR__FATAL)
                err = HF_ERR_FATAL;
            if (m->err == RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT) {
                /* Retried, it would never join: a setting, said once. */
                snprintf(errstr, errstr_size,
                         "the broker refuses consumer_session_timeout_ms (%s): set the "
                         "brokers' group.min.session.timeout.ms at or below it (holdfast's "
                         "broker scripts use 1000), or raise consumer_session_timeout_ms",
                         rd_kafka_message_errstr(m));
                err = HF_ERR_CONFIG;
            }
        }
        rd_kafka_message_destroy(m);
        return err;
    }
    msg_fill(msg, m);
    return 1;
}

int kafka_consumer_rewind(kafka_consumer_t *kc, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t kerr = rd_kafka_assignment(kc->rk, &parts);
    int err = HF_ERR_KAFKA;
    if (kerr)
        goto fail;
    kerr = rd_kafka_committed(kc->rk, parts, 10000);
    if (kerr)
        goto fail;
    for (int i = 0; i < parts->cnt; i++)
        if (parts->elems[i].offset < 0)
            parts->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_error_t *error = rd_kafka_seek_partitions(kc->rk, parts, 10000);
    if (error) {
        snprintf(errstr, errstr_size, "seek: %s", rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
        rd_kafka_topic_partition_list_destroy(parts);
        return HF_ERR_KAFKA;
    }
    rd_kafka_topic_partition_list_destroy(parts);
    return HF_OK;
fail:
    snprintf(errstr, errstr_size, "rewind: %s", rd_kafka_err2str(kerr));
    if (parts)
        rd_kafka_topic_partition_list_destroy(parts);
    return err;
}

void kafka_consumer_lags(kafka_consumer_t *kc, const kafka_tp_t *tps, const int64_t *next_known,
                         size_t count, int64_t *lags)
{
    for (size_t i = 0; i < count; i++)
        lags[i] = -1;
    if (count == 0)
        return;
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new((int)count);
    hf_assert(parts);
    for (size_t i = 0; i < count; i++)
        rd_kafka_topic_partition_list_add(parts, tps[i].topic, tps[i].partition);
    /* The position the application has reached (no request); a partition
     * nothing was read from since its assignment has none yet. */
    rd_kafka_resp_err_t kerr = rd_kafka_position(kc->rk, parts);
    for (size_t i = 0; i < count; i++) {
        int64_t low = -1, high = -1;
        /* Cached from the last fetch response: no request. Under
         * read_committed it is the last stable offset, what can be read. */
        if (rd_kafka_get_watermark_offsets(kc->rk, tps[i].topic, tps[i].partition, &low, &high) !=
                RD_KAFKA_RESP_ERR_NO_ERROR ||
            high < 0)
            continue;
        int64_t pos = kerr == RD_KAFKA_RESP_ERR_NO_ERROR && parts->elems[i].err == 0
                          ? parts->elems[i].offset
                          : -1;
        if (next_known && next_known[i] > pos)
            pos = next_known[i];
        if (pos < 0) /* nothing read, nothing committed: it starts at the log's start */
            pos = low >= 0 ? low : high == 0 ? 0 : -1;
        if (pos < 0)
            continue;
        lags[i] = high > pos ? high - pos : 0;
    }
    rd_kafka_topic_partition_list_destroy(parts);
}

int kafka_consumer_group_instance_ids(kafka_consumer_t *kc, char (*ids)[KAFKA_INSTANCE_ID_LEN_MAX],
                                      size_t max, size_t *count, int timeout_ms, char *errstr,
                                      size_t errstr_size)
{
    *count = 0;
    char why[256];
    rd_kafka_queue_t *q = rd_kafka_queue_new(kc->rk);
    rd_kafka_AdminOptions_t *opts =
        rd_kafka_AdminOptions_new(kc->rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, why, sizeof why);
    const char *groups[1] = {kc->group_id};
    rd_kafka_DescribeConsumerGroups(kc->rk, groups, 1, opts, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    int err = HF_OK;
    const rd_kafka_DescribeConsumerGroups_result_t *res =
        ev ? rd_kafka_event_DescribeConsumerGroups_result(ev) : NULL;
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t **gs =
        res ? rd_kafka_DescribeConsumerGroups_result_groups(res, &n) : NULL;
    const rd_kafka_error_t *gerr = n == 1 ? rd_kafka_ConsumerGroupDescription_error(gs[0]) : NULL;
    if (!ev || rd_kafka_event_error(ev) || n != 1 || gerr) {
        snprintf(errstr, errstr_size, "describe group %s: %s", kc->group_id,
                 !ev                        ? "no answer in time"
                 : rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
                 : gerr                     ? rd_kafka_error_string(gerr)
                                            : "no description");
        err = HF_ERR_KAFKA;
    } else {
        size_t members = rd_kafka_ConsumerGroupDescription_member_count(gs[0]);
        for (size_t i = 0; i < members; i++) {
            const char *id = rd_kafka_MemberDescription_group_instance_id(
                rd_kafka_ConsumerGroupDescription_member(gs[0], i));
            if (!id || !*id)
                continue;
            if (*count < max)
                snprintf(ids[*count], KAFKA_INSTANCE_ID_LEN_MAX, "%s", id);
            (*count)++;
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    return err;
}

void kafka_consumer_destroy(kafka_consumer_t *kc)
{
    if (!kc)
        return;
    rd_kafka_consumer_close(kc->rk);
    rd_kafka_destroy(kc->rk);
    free(kc);
}

/* ---- producer */

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    kafka_producer_t *kp = opaque;
    if (m->err) {
        kp->failed_count++;
        log_warn("kafka", "delivery to %s [%d] failed: %s", rd_kafka_topic_name(m->rkt),
                 m->partition, rd_kafka_err2str(m->err));
        return;
    }
    int64_t *offset_out = m->_private;
    if (offset_out && m->offset > *offset_out)
        *offset_out = m->offset;
}

int kafka_producer_new(const kafka_conf_t *conf, const char *transactional_id,
                       int transaction_timeout_ms, kafka_producer_t **kp_out, char *errstr,
                       size_t errstr_size)
{
    /* murmur2_random puts a key where Java clients put it.
     * linger.ms: a transactional producer's records leave at commit anyway
     * (commit_transaction flushes, and a flush ignores linger.ms), so a long
     * linger sends each partition's share of a transaction as one batch in one
     * request instead of a request per millisecond of the produce loop: at
     * 2,000 reservations/s the broker's CPU fell from 0.64 to 0.54 cores at 20 ms
     * with no change in reserve latency (docs/PERFORMANCE.md). A plain producer
     * (checkout clients, tools) keeps 1 ms: nobody flushes for it.
     * retry.backoff.ms: back-to-back transactions meet CONCURRENT_TRANSACTIONS
     * while the broker still writes the previous markers (about one gateway
     * transaction in five, measured with debug=eos); the default 100 ms backoff
     * made send_offsets' p99 ~300 ms, 20 ms still cost 20 ms a time, 2 ms took
     * the 20/s reserve p50/p99 from 37/100 to 24/82 ms (docs/PERFORMANCE.md). */
    // clang-format off
    const char *const defaults[] = {
        "partitioner=murmur2_random",
        transactional_id ? "linger.ms=20" : "linger.ms=1",
        "acks=all",
        "enable.idempotence=true",
        "retry.backoff.ms=2",
        "queue.buffering.max.messages=200000",
        NULL,
    };
    // clang-format on
    int err = HF_ERR_CONFIG;
    kafka_producer_t *kp = calloc(1, sizeof *kp);
    rd_kafka_conf_t *c = kafka_conf_build(conf, defaults, errstr, errstr_size);
    if (!kp || !c)
        goto fail;
    if (transactional_id) {
        char timeout[32];
        snprintf(timeout, sizeof timeout, "%d", transaction_timeout_ms);
        /* A record may not outlive the transaction it belongs to. */
        if (conf_set(c, "transactional.id", transactional_id, errstr, errstr_size) != HF_OK ||
            conf_set(c, "transaction.timeout.ms", timeout, errstr, errstr_size) != HF_OK ||
            conf_set(c, "message.timeout.ms", timeout, errstr, errstr_size) != HF_OK)
            goto fail;
        kp->transactional = true;
    }
    rd_kafka_conf_set_dr_msg_cb(c, dr_msg_cb);
    rd_kafka_conf_set_opaque(c, kp);
    kp->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, errstr, errstr_size);
    if (!kp->rk) {
        err = HF_ERR_KAFKA;
        goto fail;
    }
    *kp_out = kp;
    return HF_OK;
fail:
    if (c)
        rd_kafka_conf_destroy(c);
    free(kp);
    return err;
}

void kafka_producer_destroy(kafka_producer_t *kp)
{
    if (!kp)
        return;
    if (!kp->transactional)
        rd_kafka_flush(kp->rk, 10000);
    rd_kafka_destroy(kp->rk);
    free(kp);
}

void kafka_producer_poll(kafka_producer_t *kp)
{
    rd_kafka_poll(kp->rk, 0);
}

uint64_t kafka_producer_failed_count(const kafka_producer_t *kp)
{
    return kp->failed_count;
}

int kafka_txn_fence(const kafka_conf_t *conf, const char *transactional_id,
                    int transaction_timeout_ms, int timeout_ms, char *errstr, size_t errstr_size)
{
    kafka_producer_t *kp = NULL;
    int err = kafka_producer_new(conf, transactional_id, transaction_timeout_ms, &kp, errstr,
                                 errstr_size);
    if (!err)
        err = kafka_txn_init(kp, timeout_ms, errstr, errstr_size);
    kafka_producer_destroy(kp);
    return err;
}

int kafka_txn_init(kafka_producer_t *kp, int timeout_ms, char *errstr, size_t errstr_size)
{
    /* In slices: a call that timed out, or failed with a retriable error (the
     * coordinator still loading), may be made again and resumes where the last one
     * stopped (rdkafka.h); between slices the error callback learns of a refused
     * login (see refused_since). */
    int64_t started_ms = hf_mono_ms(), deadline_ms = started_ms + timeout_ms;
    for (;;) {
        rd_kafka_error_t *error = rd_kafka_init_transactions(kp->rk, refusal_slice_ms(deadline_ms));
        if (!error || !rd_kafka_error_is_retriable(error) || hf_mono_ms() >= deadline_ms)
            return txn_error(error, "init_transactions", errstr, errstr_size);
        bool timed_out = rd_kafka_error_code(error) == RD_KAFKA_RESP_ERR__TIMED_OUT;
        rd_kafka_error_destroy(error);
        /* Serves the error callback (nothing is produced yet); after an error that
         * was not a timeout, also the pause before asking again. */
        rd_kafka_poll(kp->rk, timed_out ? 0 : 100);
        if (refused_since(started_ms, "init_transactions", errstr, errstr_size))
            return HF_ERR_CONFIG;
    }
}

int kafka_txn_begin(kafka_producer_t *kp, char *errstr, size_t errstr_size)
{
    return txn_error(rd_kafka_begin_transaction(kp->rk), "begin_transaction", errstr, errstr_size);
}

int kafka_txn_send_offsets(kafka_producer_t *kp, kafka_consumer_t *kc, const kafka_tp_t *tps,
                           const int64_t *next_offsets, size_t count, char *errstr,
                           size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *l = tps_to_list(tps, count);
    for (size_t i = 0; i < count; i++)
        l->elems[i].offset = next_offsets[i];
    rd_kafka_consumer_group_metadata_t *cgmd = rd_kafka_consumer_group_metadata(kc->rk);
    /* -1: librdkafka caps this call at the transaction timeout (a coordinator
     * that stays silent gets a timeout then: test_kafka_txn_mock.c). The one
     * stall seen here (3-broker leader kill, a thread in rd_kafka_txn_op_req0
     * for 120 s) was librdkafka's wait for the operation's result, which no
     * timeout passed in bounds: the stall watchdog is what ends that. */
    rd_kafka_error_t *error = rd_kafka_send_offsets_to_transaction(kp->rk, l, cgmd, -1);
    int err = txn_error(error, "send_offsets_to_transaction", errstr, errstr_size);
    rd_kafka_consumer_group_metadata_destroy(cgmd);
    rd_kafka_topic_partition_list_destroy(l);
    return err;
}

/* Fault injection for the stalled-owner test (tests/integration/itest_offsets.c):
 * with HOLDFAST_FAULT_STALL_COMMIT=<file>, the first commit after <file> appears
 * deletes it and stops the process (SIGSTOP) with its transaction open, offsets
 * sent; once continued (SIGCONT) it commits and exits with
 * KAFKA_FAULT_STALL_EXIT, as a paused owner that wakes up would, without
 * competing for its partitions again. */
#define KAFKA_FAULT_STALL_EXIT 86
static bool fault_stall_before_commit(void)
{
    const char *path = getenv("HOLDFAST_FAULT_STALL_COMMIT");
    if (!path || !*path || unlink(path) != 0)
        return false;
    log_warn("kafka", "fault injection: stopping before commit_transaction");
    raise(SIGSTOP);
    return true;
}

/* Fault injection for the unknown-outcome test (itest_offsets.c): with
 * HOLDFAST_FAULT_COMMIT_UNKNOWN=<file>, the first commit after <file> appears
 * deletes it, commits for real, and reports a timeout, as a commit whose
 * answer was lost would (the outcome is then unknown to the caller). */
static bool fault_hide_commit_outcome(void)
{
    const char *path = getenv("HOLDFAST_FAULT_COMMIT_UNKNOWN");
    return path && *path && unlink(path) == 0;
}

/* Fault injection for the stall-watchdog test (itest_offsets.c): with
 * HOLDFAST_FAULT_HANG_COMMIT=<file>, the first commit after <file> appears
 * deletes it and never returns, as a call stuck on a broker would; the rest
 * of the process goes on. */
static void fault_hang_commit(void)
{
    const char *path = getenv("HOLDFAST_FAULT_HANG_COMMIT");
    if (!path || !*path || unlink(path) != 0)
        return;
    log_warn("kafka", "fault injection: commit_transaction hangs");
    for (;;)
        hf_sleep_ms(1000);
}

int kafka_txn_commit(kafka_producer_t *kp, char *errstr, size_t errstr_size)
{
    fault_hang_commit();
    if (fault_hide_commit_outcome()) {
        int err = txn_error(rd_kafka_commit_transaction(kp->rk, -1), "commit_transaction", errstr,
                            errstr_size);
        log_warn("kafka", "fault injection: commit returned %s; reporting a timeout instead",
                 hf_err_name(err));
        snprintf(errstr, errstr_size, "commit_transaction: outcome hidden by fault injection");
        return HF_ERR_TIMEOUT;
    }
    if (fault_stall_before_commit()) {
        rd_kafka_error_t *error = rd_kafka_commit_transaction(kp->rk, -1);
        log_warn("kafka", "fault injection: commit after the stall: %s; exiting",
                 error ? rd_kafka_error_string(error) : "committed");
        _exit(KAFKA_FAULT_STALL_EXIT);
    }
    /* A retriable failure (timeout) leaves the commit's outcome unknown: calling
     * commit again is the documented way to learn it. */
    for (int attempt = 0;; attempt++) {
        int err = txn_error(rd_kafka_commit_transaction(kp->rk, -1), "commit_transaction", errstr,
                            errstr_size);
        if (err != HF_ERR_TIMEOUT || attempt >= HF_TXN_RETRIES_MAX)
            return err;
    }
}

int kafka_txn_abort(kafka_producer_t *kp, char *errstr, size_t errstr_size)
{
    for (int attempt = 0;; attempt++) {
        int err = txn_error(rd_kafka_abort_transaction(kp->rk, -1), "abort_transaction", errstr,
                            errstr_size);
        if (err != HF_ERR_TIMEOUT || attempt >= HF_TXN_RETRIES_MAX)
            return err;
    }
}

int kafka_produce(kafka_producer_t *kp, const char *topic, int32_t partition, const void *key,
                  size_t key_len, const void *value, size_t value_len,
                  const kafka_header_t *headers, size_t headers_count, int64_t *offset_out,
                  char *errstr, size_t errstr_size)
{
    for (int attempt = 0;; attempt++) {
        rd_kafka_headers_t *hdrs = NULL;
        if (headers_count) {
            hdrs = rd_kafka_headers_new(headers_count);
            for (size_t i = 0; i < headers_count; i++)
                rd_kafka_header_add(hdrs, headers[i].name, -1, headers[i].value, -1);
        }
        int32_t part = partition < 0 ? RD_KAFKA_PARTITION_UA : partition;
        rd_kafka_resp_err_t kerr;
        if (hdrs)
            kerr = rd_kafka_producev(
                kp->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, key_len),
                RD_KAFKA_V_VALUE((void *)value, value_len), RD_KAFKA_V_HEADERS(hdrs),
                RD_KAFKA_V_OPAQUE(offset_out), RD_KAFKA_V_END);
        else
            kerr = rd_kafka_producev(kp->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                                     RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                     RD_KAFKA_V_KEY(key, key_len),
                                     RD_KAFKA_V_VALUE((void *)value, value_len),
                                     RD_KAFKA_V_OPAQUE(offset_out), RD_KAFKA_V_END);
        if (!kerr)
            return HF_OK;
        if (hdrs)
            rd_kafka_headers_destroy(hdrs);
        if (kerr == RD_KAFKA_RESP_ERR__QUEUE_FULL && attempt < 1000) {
            rd_kafka_poll(kp->rk, 10); /* serve delivery reports to make room */
            continue;
        }
        snprintf(errstr, errstr_size, "produce to %s: %s", topic, rd_kafka_err2str(kerr));
        if (kerr == RD_KAFKA_RESP_ERR__FATAL)
            return HF_ERR_FATAL;
        return kp->transactional ? HF_ERR_ABORTABLE : HF_ERR_KAFKA;
    }
}

int kafka_producer_flush(kafka_producer_t *kp, int timeout_ms, char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t kerr = rd_kafka_flush(kp->rk, timeout_ms);
    if (kerr) {
        snprintf(errstr, errstr_size, "flush: %s", rd_kafka_err2str(kerr));
        return HF_ERR_TIMEOUT;
    }
    return HF_OK;
}

/* ---- partition reader */

#define READER_BATCH_MSGS 512

int kafka_reader_new(const kafka_conf_t *conf, kafka_reader_t **rd_out, char *errstr,
                     size_t errstr_size)
{
    /* A group id is required by librdkafka's consumer but never used: the reader
     * only assigns partitions and never commits. */
    const char *const defaults[] = {
        "group.id=holdfast-reader-unused",
        "isolation.level=read_committed",
        "enable.auto.commit=false",
        "enable.partition.eof=true",
        "fetch.wait.max.ms=10",
        NULL,
    };
    const char *const hw_defaults[] = {
        "group.id=holdfast-reader-unused",
        "isolation.level=read_uncommitted",
        "enable.auto.commit=false",
        NULL,
    };
    kafka_reader_t *rd = calloc(1, sizeof *rd);
    rd_kafka_conf_t *c = kafka_conf_build(conf, defaults, errstr, errstr_size);
    rd_kafka_conf_t *hc = c ? kafka_conf_build(conf, hw_defaults, errstr, errstr_size) : NULL;
    if (!rd || !c || !hc)
        goto fail;
    rd->rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, errstr, errstr_size);
    if (!rd->rk)
        goto fail;
    c = NULL; /* owned by rd->rk */
    rd->hw_rk = rd_kafka_new(RD_KAFKA_CONSUMER, hc, errstr, errstr_size);
    if (!rd->hw_rk)
        goto fail;
    rd_kafka_poll_set_consumer(rd->rk);
    rd->queue = rd_kafka_queue_get_consumer(rd->rk);
    *rd_out = rd;
    return HF_OK;
fail:
    if (c)
        rd_kafka_conf_destroy(c);
    if (hc && !(rd && rd->hw_rk))
        rd_kafka_conf_destroy(hc);
    if (rd && rd->rk)
        rd_kafka_destroy(rd->rk);
    free(rd);
    return HF_ERR_KAFKA;
}

void kafka_reader_destroy(kafka_reader_t *rd)
{
    if (!rd)
        return;
    rd_kafka_assign(rd->rk, NULL);
    if (rd->queue)
        rd_kafka_queue_destroy(rd->queue);
    rd_kafka_destroy(rd->rk);
    rd_kafka_destroy(rd->hw_rk);
    free(rd);
}

/* True for an error of the consumer group the reader never uses: librdkafka wants
 * a group.id on every consumer and looks for its coordinator, and a principal
 * with no ACL on that group (a checkout service) is refused. Reading assigned
 * partitions does not need the group, so such an error is dropped (logged once
 * per reader) instead of failing the read. */
static bool reader_group_error(kafka_reader_t *rd, const rd_kafka_message_t *m)
{
    if (m->err != RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED)
        return false;
    if (!rd->group_error_logged)
        log_info("kafka", "%s: %s (ignored: this reader uses no consumer group)",
                 rd_kafka_name(rd->rk), rd_kafka_message_errstr(m));
    rd->group_error_logged = true;
    return true;
}

/* One message of a read: returns 1 at the end of the partition (or on an
 * error, in *rc), 0 to go on. The caller destroys m. */
static int reader_one(kafka_reader_t *rd, rd_kafka_message_t *m, int64_t stop_offset,
                      kafka_record_fn fn, void *opaque, int64_t *next, int *rc, char *errstr,
                      size_t errstr_size)
{
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        /* Under read_committed the end is the last stable offset: short of
         * stop_offset while a transaction is still open there. Its records were
         * written before the caller asked (below the high watermark it read), so
         * keep reading until the transaction's marker lands. */
        *next = m->offset;
        return *next >= stop_offset;
    }
    if (reader_group_error(rd, m))
        return 0;
    if (m->err) {
        snprintf(errstr, errstr_size, "read: %s", rd_kafka_message_errstr(m));
        *rc = HF_ERR_KAFKA;
        return 1;
    }
    kafka_msg_t msg;
    msg_fill(&msg, m);
    *next = m->offset + 1;
    *rc = fn(opaque, &msg);
    return *rc != HF_OK || *next >= stop_offset;
}

/* Up to READER_BATCH_MSGS messages of a read: one call to librdkafka's queue
 * for many messages instead of one each (a restore reads millions). Returns 1
 * once the read is over; messages after its end are dropped with the
 * assignment. */
static int reader_step(kafka_reader_t *rd, int64_t stop_offset, kafka_record_fn fn, void *opaque,
                       int64_t *next, int *rc, char *errstr, size_t errstr_size)
{
    rd_kafka_message_t *ms[READER_BATCH_MSGS];
    ssize_t n = rd_kafka_consume_batch_queue(rd->queue, 200, ms, READER_BATCH_MSGS);
    int done = 0;
    for (ssize_t i = 0; i < n; i++) {
        if (!done)
            done = reader_one(rd, ms[i], stop_offset, fn, opaque, next, rc, errstr, errstr_size);
        rd_kafka_message_destroy(ms[i]);
    }
    return done;
}

/* One ListOffsets answer for topic/partition within timeout_ms: the log start
 * (which = RD_KAFKA_OFFSET_BEGINNING) or its end (RD_KAFKA_OFFSET_END). rd_kafka_offsets_for_times, not rd_kafka_query_watermark_offsets:
 * in librdkafka 2.0.2 the latter has no deadline of its own, and a request to a
 * broker that is down is never sent, so never counts as a retry — the call
 * waited for a dead leader to come back, however long (the 3-broker cluster's
 * leader scenario hung a restore there; librdkafka #2588). offsets_for_times
 * gives up at its timeout. */
static rd_kafka_resp_err_t list_offset(rd_kafka_t *rk, const char *topic, int32_t partition,
                                       int64_t which, int timeout_ms, int64_t *offset_out)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(l, topic, partition);
    tp->offset = which;
    rd_kafka_resp_err_t kerr = rd_kafka_offsets_for_times(rk, l, timeout_ms);
    if (!kerr)
        kerr = tp->err;
    if (!kerr)
        *offset_out = tp->offset;
    rd_kafka_topic_partition_list_destroy(l);
    return kerr;
}

/* Errors a later attempt can outgrow: a topic just created has no leader for a
 * moment; a leader that died stays the leader in the metadata cache until the
 * cluster elects another and the cache is asked again. */
static bool watermark_error_transient(rd_kafka_resp_err_t kerr)
{
    return kerr == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
           kerr == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
           kerr == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
           kerr == RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH || kerr == RD_KAFKA_RESP_ERR__TIMED_OUT ||
           kerr == RD_KAFKA_RESP_ERR__TRANSPORT || kerr == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
           /* librdkafka 2.12 fails a request in flight to a broker that left the
            * cluster's metadata with __DESTROY_BROKER; the next leader answers. By
            * its number: older headers (2.0.2's, HOLDFAST_RDKAFKA=system) lack it. */
           kerr == (rd_kafka_resp_err_t)-137;
}

/* The log start and end of topic/partition within timeout_ms (as seen by rk's
 * isolation level), asking again — after fresh metadata — while the error is one
 * a new leader cures. */
static rd_kafka_resp_err_t query_watermarks(rd_kafka_t *rk, const char *topic, int32_t partition,
                                            int timeout_ms, int64_t *low, int64_t *high)
{
    int64_t started_ms = hf_mono_ms(), deadline_ms = started_ms + timeout_ms;
    for (;;) {
        int64_t left_ms = deadline_ms - hf_mono_ms();
        int attempt_ms = left_ms < HF_WATERMARK_ATTEMPT_MS ? (int)left_ms : HF_WATERMARK_ATTEMPT_MS;
        if (attempt_ms < 1)
            attempt_ms = 1;
        rd_kafka_resp_err_t kerr =
            list_offset(rk, topic, partition, RD_KAFKA_OFFSET_BEGINNING, attempt_ms, low);
        if (!kerr)
            kerr = list_offset(rk, topic, partition, RD_KAFKA_OFFSET_END, attempt_ms, high);
        if (!kerr || !watermark_error_transient(kerr) || hf_mono_ms() >= deadline_ms)
            return kerr;
        /* Fresh metadata: the cache may still name a leader that died. */
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md = NULL;
        if (rkt && rd_kafka_metadata(rk, 0, rkt, &md, attempt_ms) == RD_KAFKA_RESP_ERR_NO_ERROR)
            rd_kafka_metadata_destroy(md);
        if (rkt)
            rd_kafka_topic_destroy(rkt);
        rd_kafka_poll(rk, 100);
        if (refused_since(started_ms, NULL, NULL, 0)) /* no attempt can outgrow it */
            return kerr;
    }
}

int kafka_reader_read_to_end(kafka_reader_t *rd, const char *topic, int32_t partition,
                             int64_t start_offset, int timeout_ms, kafka_record_fn fn, void *opaque,
                             int64_t *next_offset_out, char *errstr, size_t errstr_size)
{
    int64_t low = 0, high = 0, started_ms = hf_mono_ms();
    rd_kafka_resp_err_t kerr =
        query_watermarks(rd->hw_rk, topic, partition, timeout_ms, &low, &high);
    if (kerr) {
        char what[300];
        snprintf(what, sizeof what, "watermarks of %.250s [%d]", topic, partition);
        if (refused_since(started_ms, what, errstr, errstr_size))
            return HF_ERR_CONFIG;
        snprintf(errstr, errstr_size, "%s: %s", what, rd_kafka_err2str(kerr));
        return HF_ERR_KAFKA;
    }
    int64_t from = start_offset < 0 || start_offset < low ? low : start_offset;
    *next_offset_out = from;
    if (from >= high)
        return HF_OK;

    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition)->offset = from;
    kerr = rd_kafka_assign(rd->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (kerr) {
        snprintf(errstr, errstr_size, "assign %s [%d]: %s", topic, partition,
                 rd_kafka_err2str(kerr));
        return HF_ERR_KAFKA;
    }
    /* Read up to the high watermark of the call, not just to the first end of
     * partition: under read_committed that end is the last stable offset, which
     * stops short of a transaction whose commit was acknowledged but whose
     * marker is not written yet. The coordinator writes the markers after it
     * answered EndTxn, to each partition on its own, so a new owner can already
     * see the offsets a transaction committed (KIP-447's stable fetch) while the
     * changelog records of that very transaction are still invisible: a restore
     * that stopped there would lose them (seen on the 3-broker cluster: an
     * aggregator restored 2 records of ~150 and its availability view never
     * showed a third of the seeded pairs). Records of aborted transactions and
     * control markers are skipped but still advance the position. */
    int rc = HF_OK;
    int64_t next = from;
    int idle_polls_max = timeout_ms / 200 + 1, idle_polls = 0;
    while (!reader_step(rd, high, fn, opaque, &next, &rc, errstr, errstr_size)) {
        if (next == *next_offset_out && ++idle_polls > idle_polls_max) {
            snprintf(errstr, errstr_size, "read %s [%d]: no progress for %d ms at offset %lld",
                     topic, partition, timeout_ms, (long long)next);
            rc = HF_ERR_TIMEOUT;
            break;
        }
        if (next != *next_offset_out)
            idle_polls = 0;
        *next_offset_out = next;
    }
    *next_offset_out = next;
    rd_kafka_assign(rd->rk, NULL);
    return rc;
}

int kafka_reader_follow(kafka_reader_t *rd, const char *topic, int timeout_ms,
                        int32_t *partitions_out, char *errstr, size_t errstr_size)
{
    return kafka_reader_follow_from(rd, topic, NULL, 0, timeout_ms, partitions_out, errstr,
                                    errstr_size);
}

int kafka_reader_follow_from(kafka_reader_t *rd, const char *topic, const int64_t *start_offsets,
                             int32_t start_offsets_count, int timeout_ms, int32_t *partitions_out,
                             char *errstr, size_t errstr_size)
{
    int err = kafka_partition_count(rd, topic, timeout_ms, partitions_out, errstr, errstr_size);
    if (err)
        return err;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(*partitions_out);
    for (int32_t p = 0; p < *partitions_out; p++) {
        bool given = start_offsets && p < start_offsets_count;
        bool known = given && (start_offsets[p] >= 0 || start_offsets[p] == KAFKA_OFFSET_END);
        rd_kafka_topic_partition_list_add(l, topic, p)->offset =
            !known                                 ? RD_KAFKA_OFFSET_BEGINNING
            : start_offsets[p] == KAFKA_OFFSET_END ? RD_KAFKA_OFFSET_END
                                                   : start_offsets[p];
    }
    rd_kafka_resp_err_t kerr = rd_kafka_assign(rd->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (kerr) {
        snprintf(errstr, errstr_size, "assign %s: %s", topic, rd_kafka_err2str(kerr));
        return HF_ERR_KAFKA;
    }
    return HF_OK;
}

int kafka_reader_assign(kafka_reader_t *rd, const char *topic, const int32_t *partitions,
                        const int64_t *offsets, size_t count, char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t kerr;
    if (count == 0) {
        kerr = rd_kafka_assign(rd->rk, NULL);
    } else {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)count);
        for (size_t i = 0; i < count; i++)
            rd_kafka_topic_partition_list_add(l, topic, partitions[i])->offset =
                offsets[i] >= 0 ? offsets[i] : RD_KAFKA_OFFSET_BEGINNING;
        kerr = rd_kafka_assign(rd->rk, l);
        rd_kafka_topic_partition_list_destroy(l);
    }
    if (kerr) {
        snprintf(errstr, errstr_size, "assign %zu partitions of %s: %s", count, topic,
                 rd_kafka_err2str(kerr));
        return HF_ERR_KAFKA;
    }
    return HF_OK;
}

int64_t kafka_reader_high_watermark(kafka_reader_t *rd, const char *topic, int32_t partition)
{
    int64_t low = -1, high = -1;
    if (rd_kafka_get_watermark_offsets(rd->rk, topic, partition, &low, &high) !=
        RD_KAFKA_RESP_ERR_NO_ERROR)
        return -1;
    return high;
}

int kafka_reader_poll(kafka_reader_t *rd, int timeout_ms, kafka_msg_t *msg, char *errstr,
                      size_t errstr_size)
{
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rd->rk, timeout_ms);
    if (!m)
        return 0;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        msg->partition = m->partition;
        msg->offset = m->offset;
        msg->handle = NULL;
        rd_kafka_message_destroy(m);
        return 2;
    }
    if (reader_group_error(rd, m)) {
        rd_kafka_message_destroy(m);
        return 0;
    }
    if (m->err) {
        snprintf(errstr, errstr_size, "follow: %s", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        return HF_ERR_KAFKA;
    }
    msg_fill(msg, m);
    return 1;
}

bool kafka_reader_broker_alive(kafka_reader_t *rd, const char *topic, int32_t partition,
                               int timeout_ms)
{
    int64_t high = 0;
    return list_offset(rd->rk, topic, partition, RD_KAFKA_OFFSET_END, timeout_ms, &high) ==
           RD_KAFKA_RESP_ERR_NO_ERROR;
}

int kafka_partition_count(kafka_reader_t *rd, const char *topic, int timeout_ms, int32_t *count_out,
                          char *errstr, size_t errstr_size)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rd->rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    char what[300];
    snprintf(what, sizeof what, "metadata of %.250s", topic);
    /* rd->rk's errors wait in its consumer queue; hw_rk has the same configuration, is
     * refused the same way, and nothing else reads its main queue. */
    rd_kafka_resp_err_t kerr = kafka_metadata_or_refusal(rd->rk, rd->hw_rk, 0, rkt, &md, timeout_ms,
                                                         what, errstr, errstr_size);
    int err = HF_OK;
    if (kerr == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
        err = HF_ERR_CONFIG;
    } else if (kerr) {
        snprintf(errstr, errstr_size, "%s: %s", what, rd_kafka_err2str(kerr));
        err = HF_ERR_KAFKA;
    } else if (md->topic_cnt == 1 &&
               md->topics[0].err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
        snprintf(errstr, errstr_size,
                 "topic %s: %s (this principal has no ACL for it: docs/SECURITY.md)", topic,
                 rd_kafka_err2str(md->topics[0].err));
        err = HF_ERR_KAFKA;
    } else if (md->topic_cnt != 1 || md->topics[0].err) {
        snprintf(errstr, errstr_size, "topic %s: %s (run 'hfctl topics apply')", topic,
                 md->topic_cnt ? rd_kafka_err2str(md->topics[0].err) : "no metadata");
        err = HF_ERR_NOTFOUND;
    } else {
        *count_out = md->topics[0].partition_cnt;
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return err;
}

const char *kafka_version_str(void)
{
    return rd_kafka_version_str();
}

int32_t kafka_partition_for_key(const void *key, size_t key_len, int32_t partition_count)
{
    /* The partitioner ignores its topic argument. */
    return rd_kafka_msg_partitioner_murmur2_random(NULL, key, key_len, partition_count, NULL, NULL);
}
