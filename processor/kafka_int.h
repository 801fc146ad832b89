/* Shared between the files of the kafka.h module (kafka.c, kafka_admin.c); no
 * other file includes it. */
#ifndef HF_KAFKA_INT_H
#define HF_KAFKA_INT_H

#include <librdkafka/rdkafka.h>

#include "kafka.h"

/* A librdkafka configuration for one client: bootstrap and client id from conf,
 * holdfast's common settings, defaults (NULL-terminated "name=value", may be
 * NULL), the process's client configuration (kafka_client_config_load), then
 * conf->overrides. NULL with errstr set on failure; the caller owns the result
 * (rd_kafka_new takes it over). Aborts when no client configuration was loaded. */
rd_kafka_conf_t *kafka_conf_build(const kafka_conf_t *conf, const char *const *defaults,
                                  char *errstr, size_t errstr_size);

#endif
