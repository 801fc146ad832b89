/* Topic administration through librdkafka's admin API: create what is missing,
 * report what exists, so `hfctl topics apply` can verify partition counts. Part of
 * the kafka.h module. */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka_int.h"

/* Learns partition counts of existing topics (0 = missing). */
static int topics_describe(rd_kafka_t *rk, const kafka_topic_spec_t *specs, size_t count,
                           int32_t *existing, char *errstr, size_t errstr_size)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t kerr =
        kafka_metadata_or_refusal(rk, rk, 1, NULL, &md, 10000, "metadata", errstr, errstr_size);
    if (kerr == RD_KAFKA_RESP_ERR__AUTHENTICATION)
        return HF_ERR_CONFIG;
    if (kerr) {
        snprintf(errstr, errstr_size, "metadata: %s (is the broker up? make kafka-up)",
                 rd_kafka_err2str(kerr));
        return HF_ERR_KAFKA;
    }
    for (size_t i = 0; i < count; i++) {
        existing[i] = 0;
        for (int t = 0; t < md->topic_cnt; t++)
            if (strcmp(md->topics[t].topic, specs[i].name) == 0 && !md->topics[t].err)
                existing[i] = md->topics[t].partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    return HF_OK;
}

static int topics_create(rd_kafka_t *rk, const kafka_topic_spec_t *specs, size_t count,
                         const int32_t *existing, char *errstr, size_t errstr_size)
{
    /* An array of handles: sizeof *nts is one pointer, as meant. */
    rd_kafka_NewTopic_t **nts =
        calloc(count ? count : 1, sizeof *nts); // NOLINT(bugprone-sizeof-expression)
    size_t n = 0;
    int err = HF_OK;
    char e[256];
    for (size_t i = 0; i < count; i++) {
        if (existing[i])
            continue;
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(specs[i].name, specs[i].partitions,
                                                        specs[i].replication_factor, e, sizeof e);
        if (!nt) {
            snprintf(errstr, errstr_size, "topic %s: %s", specs[i].name, e);
            err = HF_ERR_CONFIG;
            goto done;
        }
        for (size_t c = 0; specs[i].configs && specs[i].configs[c]; c++) {
            char name[128];
            const char *eq = strchr(specs[i].configs[c], '=');
            size_t nlen = eq ? (size_t)(eq - specs[i].configs[c]) : 0;
            if (!eq || nlen >= sizeof name) {
                snprintf(errstr, errstr_size, "topic %s: config '%s' is not name=value",
                         specs[i].name, specs[i].configs[c]);
                rd_kafka_NewTopic_destroy(nt);
                err = HF_ERR_CONFIG;
                goto done;
            }
            memcpy(name, specs[i].configs[c], nlen);
            name[nlen] = '\0';
            rd_kafka_NewTopic_set_config(nt, name, eq + 1);
        }
        nts[n++] = nt;
    }
    if (n == 0)
        goto done;

    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, nts, n, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
    if (!res) {
        snprintf(errstr, errstr_size, "create topics: %s",
                 ev ? rd_kafka_event_error_string(ev) : "timed out");
        err = HF_ERR_KAFKA;
    } else {
        size_t rn = 0;
        const rd_kafka_topic_result_t **trs = rd_kafka_CreateTopics_result_topics(res, &rn);
        for (size_t i = 0; i < rn && err == HF_OK; i++) {
            rd_kafka_resp_err_t terr = rd_kafka_topic_result_error(trs[i]);
            if (terr && terr != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                snprintf(errstr, errstr_size, "create %s: %s", rd_kafka_topic_result_name(trs[i]),
                         rd_kafka_topic_result_error_string(trs[i]));
                err = HF_ERR_KAFKA;
            }
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
done:
    for (size_t i = 0; i < n; i++)
        rd_kafka_NewTopic_destroy(nts[i]);
    free(nts);
    return err;
}

/* Waits until every partition of the named topics has a leader, so the first
 * reader or writer of a fresh topic does not meet NOT_LEADER errors. */
static int topics_wait_ready(rd_kafka_t *rk, const kafka_topic_spec_t *specs, size_t count,
                             char *errstr, size_t errstr_size)
{
    for (int attempt = 0; attempt < 300; attempt++) {
        const struct rd_kafka_metadata *md = NULL;
        if (rd_kafka_metadata(rk, 1, NULL, &md, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        size_t ready = 0;
        for (size_t i = 0; i < count; i++)
            for (int t = 0; t < md->topic_cnt; t++) {
                const struct rd_kafka_metadata_topic *mt = &md->topics[t];
                if (strcmp(mt->topic, specs[i].name) != 0 || mt->err || mt->partition_cnt == 0)
                    continue;
                int led = 0;
                for (int p = 0; p < mt->partition_cnt; p++)
                    led += mt->partitions[p].leader >= 0 && !mt->partitions[p].err;
                ready += led == mt->partition_cnt;
            }
        rd_kafka_metadata_destroy(md);
        if (ready == count)
            return HF_OK;
        rd_kafka_poll(rk, 100);
    }
    snprintf(errstr, errstr_size, "topics created but their partitions have no leader after 30 s");
    return HF_ERR_TIMEOUT;
}

/* A plain client for admin requests, with the process's client configuration
 * like every other handle; NULL with errstr set on failure. */
static rd_kafka_t *admin_client(const kafka_conf_t *conf, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *c = kafka_conf_build(conf, NULL, errstr, errstr_size);
    if (!c)
        return NULL;
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, errstr, errstr_size);
    if (!rk)
        rd_kafka_conf_destroy(c);
    return rk;
}

int kafka_topics_ensure(const kafka_conf_t *conf, const kafka_topic_spec_t *specs, size_t count,
                        int32_t *existing_partitions, char *errstr, size_t errstr_size)
{
    rd_kafka_t *rk = admin_client(conf, errstr, errstr_size);
    if (!rk)
        return HF_ERR_KAFKA;
    int err = topics_describe(rk, specs, count, existing_partitions, errstr, errstr_size);
    if (err == HF_OK)
        err = topics_create(rk, specs, count, existing_partitions, errstr, errstr_size);
    if (err == HF_OK)
        err = topics_wait_ready(rk, specs, count, errstr, errstr_size);
    rd_kafka_destroy(rk);
    return err;
}

int kafka_topics_delete_prefix(const kafka_conf_t *conf, const char *prefix, size_t *deleted,
                               char *errstr, size_t errstr_size)
{
    *deleted = 0;
    if (!prefix || !*prefix) {
        snprintf(errstr, errstr_size, "refusing to delete topics without a prefix");
        return HF_ERR_INVAL;
    }
    rd_kafka_t *rk = admin_client(conf, errstr, errstr_size);
    if (!rk)
        return HF_ERR_KAFKA;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t kerr = rd_kafka_metadata(rk, 1, NULL, &md, 10000);
    if (kerr) {
        snprintf(errstr, errstr_size, "metadata: %s", rd_kafka_err2str(kerr));
        rd_kafka_destroy(rk);
        return HF_ERR_KAFKA;
    }
    size_t plen = strlen(prefix), n = 0;
    /* An array of handles: sizeof *dts is one pointer, as meant. */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    rd_kafka_DeleteTopic_t **dts = calloc((size_t)md->topic_cnt + 1, sizeof *dts);
    for (int t = 0; dts && t < md->topic_cnt; t++)
        if (strncmp(md->topics[t].topic, prefix, plen) == 0)
            dts[n++] = rd_kafka_DeleteTopic_new(md->topics[t].topic);
    rd_kafka_metadata_destroy(md);
    int err = dts ? HF_OK : HF_ERR_NOMEM;
    if (err == HF_OK && n > 0) {
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_DeleteTopics(rk, dts, n, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
        const rd_kafka_DeleteTopics_result_t *res =
            ev ? rd_kafka_event_DeleteTopics_result(ev) : NULL;
        if (!res) {
            snprintf(errstr, errstr_size, "delete topics: %s",
                     ev ? rd_kafka_event_error_string(ev) : "timed out");
            err = HF_ERR_KAFKA;
        } else {
            size_t rn = 0;
            const rd_kafka_topic_result_t **trs = rd_kafka_DeleteTopics_result_topics(res, &rn);
            for (size_t i = 0; i < rn; i++)
                *deleted += rd_kafka_topic_result_error(trs[i]) == RD_KAFKA_RESP_ERR_NO_ERROR;
        }
        if (ev)
            rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
    }
    for (size_t i = 0; i < n; i++)
        rd_kafka_DeleteTopic_destroy(dts[i]);
    free(dts);
    rd_kafka_destroy(rk);
    return err;
}
