/* An in-process stand-in for a Confluent Schema Registry, for tests: the two
 * calls holdfast makes (POST /subjects/{subject}/versions, GET /schemas/ids/{id})
 * answered as Confluent's REST API documents them (ids global and starting at 1,
 * the same schema text getting the same id under any subject, 404 with
 * error_code 40403 for an unknown id, 422 with 42201 for a body without a schema),
 * served by processor/http/httpd.h on 127.0.0.1. Not a registry: no
 * compatibility checks, no normalisation beyond exact text. */
#ifndef HF_FAKE_REGISTRY_H
#define HF_FAKE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

typedef struct fake_registry fake_registry_t;

/* Starts on a free port (fails the test otherwise); *url_out holds
 * "http://127.0.0.1:PORT" (size >= 64). */
fake_registry_t *fake_registry_start(char *url_out, size_t url_size);
void fake_registry_stop(fake_registry_t *f);

/* Puts schema_json under id, as another producer would have registered it. */
void fake_registry_put(fake_registry_t *f, uint32_t id, const char *schema_json);
/* The id registered under subject, -1 when none. */
long fake_registry_subject_id(fake_registry_t *f, const char *subject);
/* From now on every request is answered status (with a Confluent error body);
 * 0 answers normally again. */
void fake_registry_fail_with(fake_registry_t *f, int status);
/* Requests served so far. */
size_t fake_registry_requests(fake_registry_t *f);

#endif
