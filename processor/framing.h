/* How holdfast frames the records of the topics other systems consume —
 * holdfast.availability, holdfast.signals, holdfast.ledger — and how every holdfast
 * reader resolves Confluent schema ids (docs/SCHEMA_REGISTRY.md). With
 * output_framing "single-object" (the default) nothing changes; with "confluent"
 * the process registers the schema of each of those topics it writes under the
 * subject "<topic>-value" at start and frames their records 0x00 + id. Whatever
 * the framing, a process with a schema_registry_url installs the codec's id
 * resolver, so its readers accept both. Set up once before the threads start;
 * framing_encode is then safe from any thread. */
#ifndef HF_FRAMING_H
#define HF_FRAMING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "hf_err.h"
#include "records.h"

/* Starts the registry client when cfg->schema_registry_url is set and installs
 * the codec's resolver; with output_framing "confluent" and registers, registers
 * the schemas of the framed topics that the stages in cfg->stages write. HF_ERR_IO
 * when the registry cannot be reached (errstr says what to do). Topic names must
 * be final (topics_set_prefix). */
int framing_start(const hf_config_t *cfg, bool registers, char *errstr,
                  size_t errstr_size) HF_MUST_CHECK;
/* For the tools (hfctl, hfbench): framing_start of a reader, the URL from
 * HOLDFAST_SCHEMA_REGISTRY_URL; nothing when it is unset. */
int framing_start_from_env(char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Removes the resolver and the client; after every decoding thread stopped. */
void framing_stop(void);

/* codec_encode for a record to topic: Confluent-framed when the topic's schema
 * was registered by framing_start, single-object otherwise. */
int framing_encode(const char *topic, const hf_record_t *rec, uint8_t *buf, size_t buf_size,
                   size_t *len_out, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* codec_decode for a follower that must not skip a record (the routing view, the
 * HTTP front's ledger store): while the registry cannot be reached (HF_ERR_IO) it
 * logs, waits and asks again (100 ms doubling up to HF_REGISTRY_RETRY_WAIT_MAX_MS)
 * until the registry answers or *stop is set; any other outcome is codec_decode's.
 * A skipped record would never be read again; a follower that waits goes stale,
 * which its readers see (routing degrades, /readyz says so). */
int framing_decode_waiting(const uint8_t *bytes, size_t len, hf_record_t *rec,
                           const atomic_bool *stop, char *errstr, size_t errstr_size);

/* The id topic's records are framed with; false when they are not framed. */
bool framing_schema_id(const char *topic, uint32_t *id_out);

#endif
