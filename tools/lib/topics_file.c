/* Reads topics/topics.json (jansson) and applies it through kafka.h's admin call. */
#include "topics_file.h"

#include <jansson.h>
#include <string.h>

#include "kafka.h"
#include "topics.h"

#define TOPICS_MAX        64
#define TOPIC_CONFIGS_MAX 16

typedef struct {
    char name[128];
    const char *group;
    int32_t partitions;
    const char *configs[TOPIC_CONFIGS_MAX + 1];
    char config_buf[TOPIC_CONFIGS_MAX][160];
} topic_decl_t;

static int parse_topic(json_t *jt, topic_decl_t *d, char *errstr, size_t errstr_size)
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
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(jt, "config"), k, v)
    {
        if (n == TOPIC_CONFIGS_MAX || !json_is_string(v)) {
            snprintf(errstr, errstr_size, "topic %s: at most %d string configs", name,
                     TOPIC_CONFIGS_MAX);
            return HF_ERR_CONFIG;
        }
        snprintf(d->config_buf[n], sizeof d->config_buf[n], "%s=%s", k, json_string_value(v));
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

static int apply_decls(const char *bootstrap, topic_decl_t *d, size_t n, FILE *out, char *errstr,
                       size_t errstr_size)
{
    int32_t declared[TOPICS_MAX], existing[TOPICS_MAX], actual[TOPICS_MAX];
    kafka_topic_spec_t specs[TOPICS_MAX];
    for (size_t i = 0; i < n; i++) {
        declared[i] = d[i].partitions;
        specs[i] = (kafka_topic_spec_t){d[i].name, d[i].partitions, -1, d[i].configs};
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
        fprintf(out, "{\"topic\":\"%s\",\"partitions\":%d,\"action\":\"%s\"}\n", d[i].name,
                actual[i], existing[i] ? "exists" : "created");
    }
    return check_groups(d, actual, n, errstr, errstr_size);
}

int topics_apply(const char *bootstrap, const char *path, FILE *out, char *errstr,
                 size_t errstr_size)
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
    int err = HF_OK;
    if (n == 0 || n > TOPICS_MAX) {
        snprintf(errstr, errstr_size, "%s: 'topics' must list 1..%d topics", path, TOPICS_MAX);
        err = HF_ERR_CONFIG;
    }
    for (size_t i = 0; err == HF_OK && i < n; i++)
        err = parse_topic(json_array_get(topics, i), &decls[i], errstr, errstr_size);
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
        err = apply_decls(bootstrap, decls, n, out, errstr, errstr_size);
    json_decref(root);
    return err;
}
