/* Avro single-object encoding of holdfast records: C3 01, the 8-byte little-endian
 * CRC-64-AVRO fingerprint of the writer schema's Parsing Canonical Form, then the
 * Avro binary body. This module is the only code that includes <avro.h>. It knows
 * every schema in schemas/ (the .avsc files, compiled in), so a reader identifies a record's
 * type by its fingerprint and resolves an older writer schema to the current one.
 * Thread safety: codec_init once; afterwards every function may be called from any
 * thread (per-call avro values are created per thread). */
#ifndef HF_CODEC_H
#define HF_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "records.h"

/* Parses the compiled-in schemas and computes their fingerprints. Idempotent. */
int codec_init(char *errstr, size_t errstr_size) HF_MUST_CHECK;
void codec_shutdown(void);

/* Encodes rec into buf (capacity buf_size). On success *len_out is the number of
 * bytes written. Fails with HF_ERR_LIMIT if buf is too small, HF_ERR_ENCODE if a
 * field breaks the schema (e.g. a count above its bound). */
int codec_encode(const hf_record_t *rec, uint8_t *buf, size_t buf_size, size_t *len_out,
                 char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Decodes single-object bytes into *rec. HF_ERR_DECODE for bad magic, truncated or
 * malformed body, strings or arrays beyond their bounds (hf_limits.h);
 * HF_ERR_UNKNOWN_SCHEMA for a fingerprint this build does not know. errstr says
 * which field and why, fit for a dead-letter reason. Never reads past len. */
int codec_decode(const uint8_t *bytes, size_t len, hf_record_t *rec, char *errstr,
                 size_t errstr_size) HF_MUST_CHECK;

/* Decodes to one line of JSON (for hfctl tail): {"type":"Hold", ...fields}. The
 * caller owns *json_out and frees it with free(). */
int codec_to_json(const uint8_t *bytes, size_t len, char **json_out, char *errstr,
                  size_t errstr_size) HF_MUST_CHECK;

/* The fingerprint (CRC-64-AVRO of the Parsing Canonical Form) of a record type's
 * current schema, and the canonical form itself (owned by the codec). */
uint64_t codec_fingerprint(hf_rec_type_t type);
const char *codec_canonical_form(hf_rec_type_t type);

/* Schema-level helpers, usable without codec_init; exposed for tests. */
uint64_t codec_crc64_avro(const void *data, size_t len);
/* Writes the Parsing Canonical Form of a JSON schema text into out (malloc'd,
 * caller frees). */
int codec_parsing_canonical_form(const char *schema_json, char **out, char *errstr,
                                 size_t errstr_size) HF_MUST_CHECK;

#endif
