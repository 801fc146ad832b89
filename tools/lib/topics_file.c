/* Reads topics/topics.json (jansson) and applies it through kafka.h's admin call. */
#include "topics_file.h"

#include <jansson.h>
#include <string.h>

#include "hf_limits.h"
#include "kafka.h"
#include "topics.h"

#define TOPICS_MAX        64
#define TOPIC_CONFIGS_MAX 16

typedef struct {
    char name[128];
    const char *group;
    int32_t partitions;
    /* The declared configs, min.insync.replicas when not among them, NULL. */
    const char *configs[TOPIC_CONFIGS_MAX + 2];
    char config_buf[TOPIC_CONFIGS_MAX + 1][160];
} topic_decl_t;

/* The factor: the override when > 0, else the file's; then min ISR from it. */
static int resolve_replication(const json_t *root, int factor_override, topics_replication_t *out,
                               char *errstr, size_t errstr_size)
{
    json_int_t factor = factor_override;
    if (factor_override <= 0) {
        const json_t *jf = json_object_get(root, "replication_factor");
        if (!json_is_integer(jf)) {
            snprintf(errstr, errstr_size,
                     "the topics file needs \"replication_factor\" (an integer), or pass "
                     "--replication-factor");
            return HF_ERR_CONFIG;
        }
        factor = json_integer_value(jf);
    }
    if (factor < 1 || factor > HF_REPLICATION_FACTOR_MAX) {
        snprintf(errstr, errstr_size,
                 "replication factor %lld is out of range: it must be in [1, %d] and at most "
                 "the number of brokers",
                 (long long)factor, HF_REPLICATION_FACTOR_MAX);
        return HF_ERR_CONFIG;
    }
    out->factor = (int16_t)factor;
    out->min_insync = factor >= 3 ? 2 : 1;
    return HF_OK;
}

int topics_replication_resolve(const char *json_text, int factor_override,
                               topics_replication_t *out, char *errstr, size_t errstr_size)
{
    json_error_t jerr;
    json_t *root = json_loads(json_text, 0, &jerr);
    if (!root) {
        snprintf(errstr, errstr_size, "topics file:%d: %s", jerr.line, jerr.text);
        return HF_ERR_CONFIG;
    }
    int err = resolve_replication(root, factor_override, out, errstr, errstr_size);
    json_decref(root);
    return err;
}

static int parse_topic(json_t *jt, const topics_replication_t *repl, topic_decl_t *d, char *errstr,
                       size_t errstr_size)
{
    const char *name = json_string_value(json_object_get(jt, "name"));
    json_t *parts = json_object_get(jt, "partitions");
    if (!name || !json_is_integer(parts) || json_integer_value(parts) < 1 ||
        json_integer_value(parts) > 1024) {
        snprintf(errstr, errstr_size, "each topic needs a name and partitions in [1, 1024]");
        return HF_ERR_CONFIG;
    }
    if (topic_id_of_base(name) < 0)
        fprintf(stderr, "hfctl: note: topic %s is not used by this build\n", name);
    snprintf(d->name, sizeof d->name, "%s%s", topics_prefix(), name);
    d->partitions = (int32_t)json_integer_value(parts);
    d->group = json_string_value(json_object_get(jt, "co_partition"));
    size_t n = 0;
    int own_min_isr = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(jt, "config"), k, v)
    {
        if (n == TOPIC_CONFIGS_MAX || !json_is_string(v)) {
            snprintf(errstr, errstr_size, "topic %s: at most %d string configs", name,
                     TOPIC_CONFIGS_MAX);
            return HF_ERR_CONFIG;
        }
        own_min_isr |= strcmp(k, "min.insync.replicas") == 0;
        snprintf(d->config_buf[n], sizeof d->config_buf[n], "%s=%s", k, json_string_value(v));
        d->configs[n] = d->config_buf[n];
        n++;
    }
    /* A topic that declares its own min ISR keeps it. */
    if (!own_min_isr) {
        snprintf(d->config_buf[n], sizeof d->config_buf[n], "min.insync.replicas=%d",
                 repl->min_insync);
        d->configs[n] = d->config_buf[n];
        n++;
    }
    d->configs[n] = NULL;
    return HF_OK;
}

/* Every topic of a co-partition group must have the same count. */
static int check_groups(const topic_decl_t *d, const int32_t *counts, size_t n, char *errstr,
                        size_t errstr_size)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (d[i].group && d[j].group && strcmp(d[i].group, d[j].group) == 0 &&
                counts[i] != counts[j]) {
                snprintf(errstr, errstr_size,
                         "co-partition group '%s': %s has %d partitions but %s has %d; "
                         "they must be equal",
                         d[i].group, d[i].name, counts[i], d[j].name, counts[j]);
                return HF_ERR_CONFIG;
            }
    return HF_OK;
}

static int apply_decls(const char *bootstrap, const topics_replication_t *repl, topic_decl_t *d,
                       size_t n, FILE *out, char *errstr, size_t errstr_size)
{
    int32_t declared[TOPICS_MAX], existing[TOPICS_MAX], actual[TOPICS_MAX];
    kafka_topic_spec_t specs[TOPICS_MAX];
    for (size_t i = 0; i < n; i++) {
        declared[i] = d[i].partitions;
        specs[i] = (kafka_topic_spec_t){d[i].name, d[i].partitions, repl->factor, d[i].configs};
    }
    int err = check_groups(d, declared, n, errstr, errstr_size);
    if (err)
        return err;
    kafka_conf_t kc = {bootstrap, "hfctl", NULL};
    err = kafka_topics_ensure(&kc, specs, n, existing, errstr, errstr_size);
    if (err)
        return err;
    for (size_t i = 0; i < n; i++) {
        actual[i] = existing[i] ? existing[i] : d[i].partitions;
        if (existing[i])
            fprintf(out, "{\"topic\":\"%s\",\"partitions\":%d,\"action\":\"exists\"}\n", d[i].name,
                    actual[i]);
        else
            fprintf(out,
                    "{\"topic\":\"%s\",\"partitions\":%d,\"action\":\"created\","
                    "\"replication_factor\":%d}\n",
                    d[i].name, actual[i], repl->factor);
    }
    return check_groups(d, actual, n, errstr, errstr_size);
}

int topics_apply(const char *bootstrap, const char *path, int factor_override, FILE *out,
                 char *errstr, size_t errstr_size)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        snprintf(errstr, errstr_size, "%s:%d: %s", path, jerr.line, jerr.text);
        return HF_ERR_CONFIG;
    }
    static topic_decl_t decls[TOPICS_MAX];
    json_t *topics = json_object_get(root, "topics");
    size_t n = json_array_size(topics);
    topics_replication_t repl;
    int err = resolve_replication(root, factor_override, &repl, errstr, errstr_size);
    if (err == HF_OK && (n == 0 || n > TOPICS_MAX)) {
        snprintf(errstr, errstr_size, "%s: 'topics' must list 1..%d topics", path, TOPICS_MAX);
        err = HF_ERR_CONFIG;
    }
    for (size_t i = 0; err == HF_OK && i < n; i++)
        err = parse_topic(json_array_get(topics, i), &repl, &decls[i], errstr, errstr_size);
    for (int id = 0; err == HF_OK && id < HF_T__COUNT; id++) {
        int found = 0;
        for (size_t i = 0; i < n; i++)
            found |= strcmp(decls[i].name + strlen(topics_prefix()), topic_base_name(id)) == 0;
        if (!found) {
            snprintf(errstr, errstr_size, "%s does not declare topic %s, which holdfast uses", path,
                     topic_base_name(id));
            err = HF_ERR_CONFIG;
        }
    }
    if (err == HF_OK)
        err = apply_decls(bootstrap, &repl, decls, n, out, errstr, errstr_size);
    json_decref(root);
    return err;
}
