/* A set of librdkafka properties an operator supplies for every Kafka client of a
 * process — security (security.protocol, sasl.*, ssl.*) and tuning — read from a
 * properties file or a "name=value,name=value" list. Part of the kafka.h module:
 * kafka_client_config_load installs one set, and kafka.c applies it to every
 * handle it builds. Each property is checked when added: librdkafka must know the
 * name and accept the value, and a property holdfast itself controls
 * (transactional.id, isolation.level, partitioner, ...) is refused by name. */
#ifndef HF_KAFKA_PROPS_H
#define HF_KAFKA_PROPS_H

#include <stddef.h>

#include "hf_err.h"

typedef struct kafka_props kafka_props_t;

/* NULL when out of memory. */
kafka_props_t *kafka_props_new(void);
void kafka_props_destroy(kafka_props_t *props); /* accepts NULL */

/* Why holdfast keeps name to itself (a sentence), or NULL when an operator may
 * set it. Names compare without regard to case. */
const char *kafka_props_reserved_reason(const char *name);

/* Adds (or replaces) one property. origin names where it came from
 * ("client.properties:3") for the error message. */
int kafka_props_set(kafka_props_t *props, const char *name, const char *value, const char *origin,
                    char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* A Java-style properties file: one name=value per line (the first '=' splits;
 * space around name and value is dropped), lines starting with '#' or '!' and
 * blank lines skipped. No escapes or continuation lines. */
int kafka_props_load_file(kafka_props_t *props, const char *path, char *errstr,
                          size_t errstr_size) HF_MUST_CHECK;

/* "name=value,name=value" (kafka_overrides); origin as for kafka_props_set. */
int kafka_props_load_list(kafka_props_t *props, const char *list, const char *origin, char *errstr,
                          size_t errstr_size) HF_MUST_CHECK;

size_t kafka_props_count(const kafka_props_t *props);
/* The i-th property (i < count), in the order first added. The props own both. */
void kafka_props_at(const kafka_props_t *props, size_t i, const char **name, const char **value);

#endif
