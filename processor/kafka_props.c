/* Operator-supplied librdkafka properties (kafka_props.h): parsing the properties
 * file and the kafka_overrides list, and refusing what holdfast must control. The
 * reserved table is the one list of settings the exactly-once protocol, the
 * partitioning contract and the restore path depend on. */
#include "kafka_props.h"

#include <ctype.h>
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hf_limits.h"

struct kafka_props {
    size_t count;
    char names[HF_KAFKA_PROPS_MAX][HF_KAFKA_PROP_NAME_LEN_MAX + 1];
    char values[HF_KAFKA_PROPS_MAX][HF_KAFKA_PROP_VALUE_LEN_MAX + 1];
    rd_kafka_conf_t *probe; /* librdkafka checks each name and value on it */
};

typedef struct {
    const char *name;
    const char *reason;
} reserved_t;

#define WHY_BOOTSTRAP  "set the bootstrap servers with bootstrap / HOLDFAST_BOOTSTRAP"
#define WHY_TXN        "holdfast ties it to transaction_timeout_ms (set that instead)"
#define WHY_EOS        "exactly-once needs holdfast's value (acks=all, idempotence on)"
#define WHY_OFFSETS    "offsets are committed inside each transaction, never automatically"
#define WHY_PARTITIONS "every client must put a key on the partition murmur2_random picks"

static const reserved_t reserved[] = {
    {"bootstrap.servers", WHY_BOOTSTRAP},
    {"metadata.broker.list", WHY_BOOTSTRAP},
    {"client.id", "holdfast names each client after its stage, instance and thread"},
    {"transactional.id", "holdfast derives it from app_id, stage, instance and thread: it is "
                         "what fences a stale owner"},
    {"transaction.timeout.ms", WHY_TXN},
    {"message.timeout.ms", WHY_TXN},
    {"delivery.timeout.ms", WHY_TXN},
    {"enable.idempotence", WHY_EOS},
    {"acks", WHY_EOS},
    {"request.required.acks", WHY_EOS},
    {"partitioner", WHY_PARTITIONS},
    {"isolation.level", "read_committed keeps aborted transactions out of state"},
    {"enable.auto.commit", WHY_OFFSETS},
    {"auto.commit.enable", WHY_OFFSETS},
    {"enable.auto.offset.store", WHY_OFFSETS},
    {"auto.offset.reset", "a task with no committed offset must read its input from the start"},
    {"group.id", "holdfast derives it from app_id and the stage"},
    {"group.instance.id", "holdfast derives it from instance_id (static membership)"},
    {"partition.assignment.strategy", "range keeps partition p of every input on one task"},
    {"group.remote.assignor", "range keeps partition p of every input on one task"},
    {"group.protocol", "holdfast's group_protocol setting chooses it"},
    {"enable.partition.eof", "restores stop at the end-of-partition event"},
};

const char *kafka_props_reserved_reason(const char *name)
{
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcasecmp(reserved[i].name, name) == 0)
            return reserved[i].reason;
    return NULL;
}

kafka_props_t *kafka_props_new(void)
{
    kafka_props_t *props = calloc(1, sizeof *props);
    if (!props)
        return NULL;
    props->probe = rd_kafka_conf_new();
    return props;
}

void kafka_props_destroy(kafka_props_t *props)
{
    if (!props)
        return;
    rd_kafka_conf_destroy(props->probe);
    free(props);
}

int kafka_props_set(kafka_props_t *props, const char *name, const char *value, const char *origin,
                    char *errstr, size_t errstr_size)
{
    const char *why = kafka_props_reserved_reason(name);
    if (why) {
        snprintf(errstr, errstr_size,
                 "%s: kafka property '%s' is set by holdfast and may not be "
                 "configured: %s",
                 origin, name, why);
        return HF_ERR_CONFIG;
    }
    if (!*name || strlen(name) > HF_KAFKA_PROP_NAME_LEN_MAX ||
        strlen(value) > HF_KAFKA_PROP_VALUE_LEN_MAX) {
        snprintf(errstr, errstr_size,
                 "%s: kafka property '%.40s' needs a name of 1..%d and a "
                 "value of at most %d characters",
                 origin, name, HF_KAFKA_PROP_NAME_LEN_MAX, HF_KAFKA_PROP_VALUE_LEN_MAX);
        return HF_ERR_CONFIG;
    }
    char why_rd[256];
    if (rd_kafka_conf_set(props->probe, name, value, why_rd, sizeof why_rd) != RD_KAFKA_CONF_OK) {
        /* librdkafka's message quotes the value, which may be a password: name only. */
        snprintf(errstr, errstr_size, "%s: kafka property '%s' refused by librdkafka %s (%s)",
                 origin, name, rd_kafka_version_str(),
                 strstr(why_rd, "No such configuration property") ? "no such property"
                                                                  : "invalid value");
        return HF_ERR_CONFIG;
    }
    size_t i = 0;
    while (i < props->count && strcasecmp(props->names[i], name) != 0)
        i++;
    if (i == props->count) {
        if (props->count == HF_KAFKA_PROPS_MAX) {
            snprintf(errstr, errstr_size, "%s: more than %d kafka properties", origin,
                     HF_KAFKA_PROPS_MAX);
            return HF_ERR_LIMIT;
        }
        props->count++;
    }
    snprintf(props->names[i], sizeof props->names[i], "%s", name);
    snprintf(props->values[i], sizeof props->values[i], "%s", value);
    return HF_OK;
}

/* Drops leading and trailing white space in place; returns the start. */
static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* One "name=value" (modified in place). */
static int set_pair(kafka_props_t *props, char *pair, const char *origin, char *errstr,
                    size_t errstr_size)
{
    char *eq = strchr(pair, '=');
    if (!eq) {
        snprintf(errstr, errstr_size, "%s: expected name=value", origin);
        return HF_ERR_CONFIG;
    }
    *eq = '\0';
    return kafka_props_set(props, trim(pair), trim(eq + 1), origin, errstr, errstr_size);
}

int kafka_props_load_file(kafka_props_t *props, const char *path, char *errstr, size_t errstr_size)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(errstr, errstr_size, "kafka config %s: %s", path, strerror(errno));
        return HF_ERR_CONFIG;
    }
    char line[HF_KAFKA_PROPS_LINE_LEN_MAX + 2], origin[256];
    int err = HF_OK, lineno = 0;
    while (err == HF_OK && fgets(line, sizeof line, f)) {
        snprintf(origin, sizeof origin, "kafka config %.200s:%d", path, ++lineno);
        size_t n = strlen(line);
        if (lineno > HF_KAFKA_PROPS_LINES_MAX ||
            (n == sizeof line - 1 && line[n - 1] != '\n' && !feof(f))) {
            snprintf(errstr, errstr_size, "%s: longer than %d characters or %d lines", origin,
                     HF_KAFKA_PROPS_LINE_LEN_MAX, HF_KAFKA_PROPS_LINES_MAX);
            err = HF_ERR_LIMIT;
            break;
        }
        char *s = trim(line);
        if (*s && *s != '#' && *s != '!')
            err = set_pair(props, s, origin, errstr, errstr_size);
    }
    if (err == HF_OK && ferror(f)) {
        snprintf(errstr, errstr_size, "kafka config %s: read error", path);
        err = HF_ERR_IO;
    }
    fclose(f);
    return err;
}

int kafka_props_load_list(kafka_props_t *props, const char *list, const char *origin, char *errstr,
                          size_t errstr_size)
{
    size_t n = strlen(list);
    char *copy = malloc(n + 1);
    if (!copy)
        return HF_ERR_NOMEM;
    memcpy(copy, list, n + 1);
    int err = HF_OK;
    char *save = NULL;
    for (char *kv = strtok_r(copy, ",", &save); kv && err == HF_OK; kv = strtok_r(NULL, ",", &save))
        if (*trim(kv))
            err = set_pair(props, kv, origin, errstr, errstr_size);
    free(copy);
    return err;
}

size_t kafka_props_count(const kafka_props_t *props)
{
    return props->count;
}

void kafka_props_at(const kafka_props_t *props, size_t i, const char **name, const char **value)
{
    *name = props->names[i];
    *value = props->values[i];
}
