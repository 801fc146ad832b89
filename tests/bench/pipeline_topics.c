/* pipeline-topics: the Kafka side of `make bench-pipeline` (tests/bench/pipeline.py),
 * the few admin calls a script cannot make without a JVM per call: end offsets of
 * every topic under a prefix (records per reservation are end offsets after a run
 * minus those before it), creating the broker-ceiling topic, and deleting a run's
 * topics afterwards.
 *   pipeline-topics offsets PREFIX           one JSON line {"topic": [high, ...], ...}
 *   pipeline-topics create TOPIC PARTITIONS  creates it if missing
 *   pipeline-topics delete PREFIX            deletes every topic whose name starts so
 * Env: HOLDFAST_BOOTSTRAP (default 127.0.0.1:9092). Exit 0 ok, 1 Kafka error, 2 usage. */
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_err.h"
#include "kafka.h"

#define PT_TIMEOUT_MS 10000

/* A plain (non-transactional, never producing) handle for metadata queries. */
static rd_kafka_t *handle_new(const char *bootstrap, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, errstr_size) !=
            RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "client.id", "pipeline-topics", errstr, errstr_size) !=
            RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errstr_size);
    if (!rk)
        rd_kafka_conf_destroy(conf);
    return rk;
}

/* The high watermark of each partition of each topic under prefix (a transaction
 * marker takes an offset too: it is broker work like a record). */
static int offsets(const char *bootstrap, const char *prefix, char *errstr, size_t errstr_size)
{
    rd_kafka_t *rk = handle_new(bootstrap, errstr, errstr_size);
    if (!rk)
        return HF_ERR_KAFKA;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t kerr = rd_kafka_metadata(rk, 1, NULL, &md, PT_TIMEOUT_MS);
    int err = HF_OK;
    json_t *out = json_object();
    if (kerr) {
        snprintf(errstr, errstr_size, "metadata: %s", rd_kafka_err2str(kerr));
        err = HF_ERR_KAFKA;
    }
    for (int t = 0; !err && t < md->topic_cnt; t++) {
        const struct rd_kafka_metadata_topic *mt = &md->topics[t];
        if (strncmp(mt->topic, prefix, strlen(prefix)) != 0)
            continue;
        json_t *highs = json_array();
        json_object_set_new(out, mt->topic, highs);
        for (int p = 0; !err && p < mt->partition_cnt; p++) {
            int64_t low = 0, high = 0;
            kerr = rd_kafka_query_watermark_offsets(rk, mt->topic, p, &low, &high, PT_TIMEOUT_MS);
            if (kerr) {
                snprintf(errstr, errstr_size, "watermarks of %s [%d]: %s", mt->topic, p,
                         rd_kafka_err2str(kerr));
                err = HF_ERR_KAFKA;
            }
            json_array_append_new(highs, json_integer((json_int_t)high));
        }
    }
    if (!err) {
        char *text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
        printf("%s\n", text);
        free(text);
    }
    json_decref(out);
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
    return err;
}

static int create(const char *bootstrap, const char *topic, const char *partitions, char *errstr,
                  size_t errstr_size)
{
    int n = atoi(partitions);
    if (n < 1) {
        snprintf(errstr, errstr_size, "partitions '%s': a positive number, e.g. 8", partitions);
        return HF_ERR_INVAL;
    }
    kafka_conf_t kc = {bootstrap, "pipeline-topics", NULL};
    kafka_topic_spec_t spec = {topic, n, 1, NULL};
    int32_t existing = 0;
    return kafka_topics_ensure(&kc, &spec, 1, &existing, errstr, errstr_size);
}

static int delete (const char *bootstrap, const char *prefix, char *errstr, size_t errstr_size)
{
    if (strlen(prefix) < 4) {
        snprintf(errstr, errstr_size, "prefix '%s' is too short to be one run's own", prefix);
        return HF_ERR_INVAL;
    }
    kafka_conf_t kc = {bootstrap, "pipeline-topics", NULL};
    size_t deleted = 0;
    int err = kafka_topics_delete_prefix(&kc, prefix, &deleted, errstr, errstr_size);
    if (!err)
        printf("{\"deleted\":%zu}\n", deleted);
    return err;
}

int main(int argc, char **argv)
{
    const char *bs = getenv("HOLDFAST_BOOTSTRAP");
    const char *bootstrap = bs && *bs ? bs : "127.0.0.1:9092";
    char errstr[512] = "";
    int err = kafka_client_config_from_env(errstr, sizeof errstr);
    if (err) {
        fprintf(stderr, "pipeline-topics: %s\n", errstr);
        return 1;
    }
    if (argc == 3 && strcmp(argv[1], "offsets") == 0)
        err = offsets(bootstrap, argv[2], errstr, sizeof errstr);
    else if (argc == 4 && strcmp(argv[1], "create") == 0)
        err = create(bootstrap, argv[2], argv[3], errstr, sizeof errstr);
    else if (argc == 3 && strcmp(argv[1], "delete") == 0)
        err = delete (bootstrap, argv[2], errstr, sizeof errstr);
    else {
        fprintf(stderr, "usage: pipeline-topics offsets PREFIX | create TOPIC PARTITIONS | "
                        "delete PREFIX\nenv: HOLDFAST_BOOTSTRAP\n");
        return 2;
    }
    if (err)
        fprintf(stderr, "pipeline-topics %s: %s: %s\n", argv[1], hf_err_name(err), errstr);
    return err == HF_OK ? 0 : err == HF_ERR_INVAL ? 2 : 1;
}
