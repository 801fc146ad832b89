/* The output framing table (framing.h): which framed topic this process writes,
 * with which record type and schema id. Three rows at most, filled by
 * framing_start before any task thread runs and only read afterwards. */
#include "framing.h"

#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "log.h"
#include "registry.h"
#include "topics.h"

/* The topics another system may consume, the record each carries and the stage
 * that writes it. */
typedef struct {
    hf_topic_id_t topic;
    hf_rec_type_t type;
    const char *stage;
} framed_topic_t;

static const framed_topic_t framed_topics[] = {
    {HF_T_AVAILABILITY, HF_REC_AVAILABILITY, "aggregator"},
    {HF_T_SIGNALS, HF_REC_SIGNAL, "aggregator"},
    {HF_T_LEDGER, HF_REC_LEDGER_EVENT, "gateway"},
    /* A counter answers a reservation its one hold covers: the ledger's HELD event. */
    {HF_T_LEDGER, HF_REC_LEDGER_EVENT, "counter"},
};
#define FRAMED_TOPICS_COUNT (sizeof framed_topics / sizeof framed_topics[0])

typedef struct {
    const char *topic; /* topic_name(): stable for the process */
    hf_rec_type_t type;
    uint32_t schema_id;
} framing_out_t;

static registry_t *g_registry;
static framing_out_t g_outs[FRAMED_TOPICS_COUNT];

static size_t g_outs_count;

static bool registered(hf_topic_id_t topic)
{
    for (size_t i = 0; i < g_outs_count; i++)
        if (strcmp(g_outs[i].topic, topic_name(topic)) == 0)
            return true;
    return false;
}

static bool stage_listed(const char *stages, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = stages; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

static int register_one(const framed_topic_t *f, char *errstr, size_t errstr_size)
{
    char subject[HF_TOPIC_LEN_MAX + 8];
    const char *topic = topic_name(f->topic);
    snprintf(subject, sizeof subject, "%s-value", topic);
    uint32_t id = 0;
    int err = registry_register(g_registry, subject, codec_canonical_form(f->type), &id, errstr,
                                errstr_size);
    if (err)
        return err;
    g_outs[g_outs_count++] = (framing_out_t){topic, f->type, id};
    log_info("framing", "%s: %s records framed with schema id %u (subject %s)", topic,
             hf_rec_type_name(f->type), (unsigned)id, subject);
    return HF_OK;
}

int framing_start(const hf_config_t *cfg, bool registers, char *errstr, size_t errstr_size)
{
    g_outs_count = 0;
    if (!cfg->schema_registry_url[0])
        return HF_OK;
    int err = registry_new(cfg->schema_registry_url, cfg->schema_registry_timeout_ms, &g_registry,
                           errstr, errstr_size);
    if (err)
        return err;
    codec_set_id_resolver(registry_resolve, g_registry);
    if (!registers || strcmp(cfg->output_framing, "confluent") != 0)
        return HF_OK;
    char why[512];
    for (size_t i = 0; i < FRAMED_TOPICS_COUNT; i++) {
        if (!stage_listed(cfg->stages, framed_topics[i].stage) ||
            registered(framed_topics[i].topic))
            continue;
        if ((err = register_one(&framed_topics[i], why, sizeof why))) {
            snprintf(errstr, errstr_size,
                     "output_framing 'confluent': cannot register the schema of %s: %s. Start the "
                     "registry or correct schema_registry_url, then start holdfast again",
                     topic_name(framed_topics[i].topic), why);
            framing_stop();
            return err;
        }
    }
    return HF_OK;
}

int framing_start_from_env(char *errstr, size_t errstr_size)
{
    static hf_config_t cfg; /* large; the tools call this once */
    config_defaults(&cfg);
    config_apply_env(&cfg);
    int err = config_check(&cfg, errstr, errstr_size);
    return err ? err : framing_start(&cfg, false, errstr, errstr_size);
}

void framing_stop(void)
{
    codec_set_id_resolver(NULL, NULL);
    registry_destroy(g_registry);
    g_registry = NULL;
    g_outs_count = 0;
}

int framing_decode_waiting(const uint8_t *bytes, size_t len, hf_record_t *rec,
                           const atomic_bool *stop, char *errstr, size_t errstr_size)
{
    int err = codec_decode(bytes, len, rec, errstr, errstr_size);
    for (int64_t wait_ms = 100; err == HF_ERR_IO && !atomic_load(stop);) {
        log_warn("framing", "%s; asking again in %lld ms (the record is not skipped)", errstr,
                 (long long)wait_ms);
        hf_sleep_ms(wait_ms);
        wait_ms = wait_ms * 2 > HF_REGISTRY_RETRY_WAIT_MAX_MS ? HF_REGISTRY_RETRY_WAIT_MAX_MS
                                                              : wait_ms * 2;
        err = codec_decode(bytes, len, rec, errstr, errstr_size);
    }
    return err;
}

static const framing_out_t *find_out(const char *topic, hf_rec_type_t type)
{
    for (size_t i = 0; i < g_outs_count; i++)
        if (g_outs[i].type == type && strcmp(g_outs[i].topic, topic) == 0)
            return &g_outs[i];
    return NULL;
}

int framing_encode(const char *topic, const hf_record_t *rec, uint8_t *buf, size_t buf_size,
                   size_t *len_out, char *errstr, size_t errstr_size)
{
    const framing_out_t *o = g_outs_count ? find_out(topic, rec->type) : NULL;
    if (o)
        return codec_encode_confluent(rec, o->schema_id, buf, buf_size, len_out, errstr,
                                      errstr_size);
    return codec_encode(rec, buf, buf_size, len_out, errstr, errstr_size);
}

bool framing_schema_id(const char *topic, uint32_t *id_out)
{
    for (size_t i = 0; i < g_outs_count; i++)
        if (strcmp(g_outs[i].topic, topic) == 0) {
            *id_out = g_outs[i].schema_id;
            return true;
        }
    return false;
}
