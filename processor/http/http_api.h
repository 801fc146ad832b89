/* `holdfast http`: the checkout HTTP API, the payment webhook and the read API
 * in front of the pipeline (docs/HTTP.md, docs/openapi.json). A request becomes
 * a record on holdfast.requests; its answer is the Reply the gateway sends to
 * this process's own reply topic, turned into an HTTP status and the JSON the
 * CLI prints. Reads come from local views: availability from the routing view
 * (the compacted availability topic), reservations from a store the process
 * keeps of holdfast.ledger. */
#ifndef HF_HTTP_API_H
#define HF_HTTP_API_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "hf_err.h"
#include "kafka.h"

typedef struct http_api http_api_t;

/* Checks the HTTP settings of cfg (HF_ERR_CONFIG naming the key), without
 * Kafka: `holdfast http` exits 2 on a bad one before connecting. A keys file
 * that cannot be read is HF_ERR_IO, no memory HF_ERR_NOMEM (exit 1), both
 * naming the setting too. */
int http_api_check_config(const hf_config_t *cfg, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Starts the views, the bridge and the server; *bound_port the port served. */
int http_api_start(const hf_config_t *cfg, const kafka_conf_t *kconf, http_api_t **out,
                   int *bound_port, char *errstr, size_t errstr_size) HF_MUST_CHECK;
void http_api_stop(http_api_t *api); /* accepts NULL */
/* Re-reads what SIGHUP reloads (`holdfast http` calls it from its main loop,
 * never from the signal handler); a file that fails to load keeps the old one
 * and is logged. */
void http_api_reload(http_api_t *api);
/* True once the front can no longer send (its producer failed for good): the
 * process exits 1 so that its supervisor restarts it. */
bool http_api_broken(http_api_t *api);

/* Writes "METHOD PATH" per route, one per line (PATH as in the OpenAPI doc:
 * "/v1/reservations/{id}"), for the test that checks docs/openapi.json. */
void http_api_print_routes(FILE *out);

#endif
