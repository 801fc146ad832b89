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

/* rd_kafka_metadata(rk, all_topics, rkt, md_out) within timeout_ms, asked in slices with
 * poll_rk's callbacks served in between (a handle with the same configuration whose main
 * queue nothing else reads; rk itself unless it is a consumer), so that a login the
 * broker refuses ends the wait at once. RD_KAFKA_RESP_ERR__AUTHENTICATION comes with
 * "what: ..." in errstr (the refusal and what to check); any other answer is
 * rd_kafka_metadata's, errstr untouched. */
rd_kafka_resp_err_t kafka_metadata_or_refusal(rd_kafka_t *rk, rd_kafka_t *poll_rk, int all_topics,
                                              rd_kafka_topic_t *rkt,
                                              const struct rd_kafka_metadata **md_out,
                                              int timeout_ms, const char *what, char *errstr,
                                              size_t errstr_size);

#endif
