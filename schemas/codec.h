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

/* codec_encode of the struct of one record type (src points at a
 * hf_reservation_state_t for HF_REC_RESERVATION_STATE, ...): no hf_record_t,
 * whose union is as large as the largest record, has to be filled first. */
int codec_encode_as(hf_rec_type_t type, const void *src, uint8_t *buf, size_t buf_size,
                    size_t *len_out, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Confluent Schema Registry framing (docs/SCHEMA_REGISTRY.md), the optional
 * encoding of the topics other systems consume: 0x00, the 4-byte big-endian id
 * the registry gave the writer schema, then the same Avro binary body. The codec
 * knows no registry: a process that reads such records installs a resolver that
 * turns an id into the CRC-64-AVRO fingerprint of the schema registered under it
 * (processor/registry.h), and the fingerprint then selects the schema exactly as
 * in a single-object header. */
#define CODEC_CONFLUENT_MAGIC      0x00
#define CODEC_CONFLUENT_HEADER_LEN 5

/* Encodes rec like codec_encode, framed with schema_id instead of the single-object
 * header (5 bytes shorter). The caller got schema_id by registering
 * codec_canonical_form(rec->type). buf must have room for the single-object form,
 * which is built first and then moved (HF_ERR_LIMIT otherwise). */
int codec_encode_confluent(const hf_record_t *rec, uint32_t schema_id, uint8_t *buf,
                           size_t buf_size, size_t *len_out, char *errstr,
                           size_t errstr_size) HF_MUST_CHECK;

/* id -> fingerprint of the schema registered under it. HF_OK, or an error with
 * errstr saying why (HF_ERR_UNKNOWN_SCHEMA: the registry has no such id; HF_ERR_IO:
 * the registry did not answer). Called from any decoding thread. */
typedef int (*codec_id_resolver_fn)(void *opaque, uint32_t schema_id, uint64_t *fingerprint_out,
                                    char *errstr, size_t errstr_size);
/* Installs (fn non-NULL) or removes (NULL) the process's resolver. Set it before
 * the threads that decode start, and remove it only after they stopped. Without
 * one, a Confluent-framed record fails to decode with HF_ERR_UNKNOWN_SCHEMA naming
 * its id. */
void codec_set_id_resolver(codec_id_resolver_fn fn, void *opaque);

/* Decodes single-object bytes (or Confluent-framed ones, see above) into *rec. HF_ERR_DECODE for bad magic, truncated or
 * malformed body, strings or arrays beyond their bounds (hf_limits.h);
 * HF_ERR_UNKNOWN_SCHEMA for a fingerprint this build does not know. errstr says
 * which field and why, fit for a dead-letter reason. Never reads past len. */
int codec_decode(const uint8_t *bytes, size_t len, hf_record_t *rec, char *errstr,
                 size_t errstr_size) HF_MUST_CHECK;

/* codec_decode of a record that must be of type into its struct dst (a
 * hf_reservation_state_t for HF_REC_RESERVATION_STATE, ...); a record of any
 * other type fails with HF_ERR_DECODE and leaves dst alone. */
int codec_decode_as(const uint8_t *bytes, size_t len, hf_rec_type_t type, void *dst, char *errstr,
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
