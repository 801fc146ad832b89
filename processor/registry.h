/* A client of a Confluent-compatible schema registry over HTTP (libcurl), for the
 * Confluent framing of docs/SCHEMA_REGISTRY.md. Two calls of the registry's REST
 * API: POST /subjects/{subject}/versions {"schema": "..."} -> {"id": N} registers a
 * schema (or finds it registered) and GET /schemas/ids/{id} -> {"schema": "..."}
 * says what an id stands for. Answers are remembered (id -> fingerprint of the
 * schema's Parsing Canonical Form), at most HF_REGISTRY_IDS_MAX ids, so a
 * record's id is asked once per process. Thread safety: registry_new and
 * registry_destroy on one thread; everything else from any thread. */
#ifndef HF_REGISTRY_H
#define HF_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"

typedef struct registry registry_t;

/* A client of the registry at base_url ("http://host:8081", a path prefix and
 * user:password@ allowed); each request gives up after timeout_ms. Sends nothing
 * yet. */
int registry_new(const char *base_url, int timeout_ms, registry_t **out, char *errstr,
                 size_t errstr_size) HF_MUST_CHECK;
void registry_destroy(registry_t *r); /* accepts NULL */

/* Registers schema_json under subject (idempotent in the registry: the same
 * schema gets the same id) and remembers the id. HF_ERR_IO when the registry
 * cannot be reached or answers with an error (errstr has its status and message),
 * HF_ERR_DECODE when its answer is not what the API promises. */
int registry_register(registry_t *r, const char *subject, const char *schema_json, uint32_t *id_out,
                      char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* The fingerprint of the schema registered under id: remembered, else asked.
 * HF_ERR_UNKNOWN_SCHEMA when the registry has no such id (404), HF_ERR_IO when it
 * cannot be reached. The signature of codec_id_resolver_fn (codec.h), opaque
 * being the registry_t. */
int registry_resolve(void *r, uint32_t id, uint64_t *fingerprint_out, char *errstr,
                     size_t errstr_size);

/* Requests actually sent (for tests: a remembered id sends none). */
uint64_t registry_requests(registry_t *r);

#endif
