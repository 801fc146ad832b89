/* One Kafka record as the line `hfctl tail` prints: a JSON object that parses for
 * every record a topic can hold, keys, values and headers of any bytes included
 * (NULs, control characters, quotes, invalid UTF-8). Lengths come from the record,
 * never from strlen. Bytes that are valid UTF-8 print as a string under their
 * usual name; other bytes print base64 under `<name>_b64`, so nothing is mangled
 * silently; raw bytes beyond HF_TAIL_RAW_BYTES_MAX are cut and counted in
 * `<name>_truncated_bytes`. The shape is described in README.md ("hfctl tail"). */
#ifndef HF_TAIL_JSON_H
#define HF_TAIL_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"

/* What a record carries, as read (kafka_msg_t's fields); nothing is owned. */
typedef struct {
    int32_t partition;
    int64_t offset;
    const uint8_t *key; /* NULL: the record has no key ("key":null) */
    size_t key_len;
    const uint8_t *value; /* NULL: a tombstone ("value":null) */
    size_t value_len;
    const uint8_t *traceparent; /* NULL: no traceparent header (the member is left out) */
    size_t traceparent_len;
} tail_record_t;

/* Renders rec as one line of JSON, without the newline:
 *   {"partition":P,"offset":O,"key":...,["traceparent":...,]"value":{decoded record}}
 * A value the codec decodes prints as codec_to_json renders it, except that a
 * DeadLetter's key and value bytes print as below instead of Avro's JSON encoding
 * of bytes. A value it cannot decode prints as
 *   "undecodable":"<why>","bytes":<value_len>, then its bytes as "value_text"
 *   (valid UTF-8) or "value_b64", cut at HF_TAIL_RAW_BYTES_MAX.
 * The caller owns *line_out and frees it with free(). HF_ERR_NOMEM is the only
 * failure: a record that does not decode is printed, not refused. */
int tail_json_line(const tail_record_t *rec, char **line_out, char *errstr,
                   size_t errstr_size) HF_MUST_CHECK;

/* Sets the bytes p[0..len) on obj: as the string member text_name when they are
 * valid UTF-8 (RFC 3629; U+0000 and control characters allowed, JSON escapes
 * them), else as `<base_name>_b64` (RFC 4648 base64, padded). At most bytes_max
 * bytes are kept (text is cut at a character boundary); when fewer than len are,
 * `<base_name>_truncated_bytes` says how many were left out. p may be NULL when
 * len is 0. False only when out of memory. */
bool tail_json_set_bytes(json_t *obj, const char *text_name, const char *base_name,
                         const uint8_t *p, size_t len, size_t bytes_max) HF_MUST_CHECK;

#endif
