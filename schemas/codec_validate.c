/* A bounded walk of an Avro binary body against its writer schema, run before
 * avro-c reads it. avro-c 1.11's binary reader trusts lengths: a string or bytes
 * length is passed to malloc unchecked (a huge varint allocates gigabytes, a
 * negative one writes before its buffer), and array block counts are negated
 * without an overflow check. This walk proves every length fits in the bytes left,
 * every count is sane, every enum/union index is in range and the body ends
 * exactly where the schema does, so avro-c only ever sees well-formed input. */
#include <avro.h>
#include <inttypes.h>
#include <string.h>

#include "codec_internal.h"
#include "codec_avro.h"

typedef struct {
    const uint8_t *body;
    size_t len;
    size_t pos;
    const char *record; /* for messages */
    char *errstr;
    size_t errstr_size;
} cursor_t;

static int bad(cursor_t *c, const char *what)
{
    codec_errf(c->errstr, c->errstr_size, "%s: malformed body at byte %zu of %zu: %s", c->record,
               c->pos, c->len, what);
    return HF_ERR_DECODE;
}

static int read_varint(cursor_t *c, int64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (c->pos >= c->len)
            return bad(c, "truncated varint");
        uint8_t b = c->body[c->pos++];
        if (shift == 63 && (b & 0x7e))
            return bad(c, "varint overflows 64 bits");
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return HF_OK;
        }
    }
    return bad(c, "varint longer than 10 bytes");
}

static int skip_bytes(cursor_t *c, size_t n)
{
    if (n > c->len - c->pos)
        return bad(c, "value runs past the end");
    c->pos += n;
    return HF_OK;
}

/* A string or bytes: a length in [0, bytes left], then the bytes. */
static int skip_blob(cursor_t *c)
{
    int64_t n;
    int err = read_varint(c, &n);
    if (err)
        return err;
    if (n < 0)
        return bad(c, "negative length");
    if ((uint64_t)n > c->len - c->pos)
        return bad(c, "length runs past the end");
    c->pos += (size_t)n;
    return HF_OK;
}

static int skip_index(cursor_t *c, int64_t count, const char *what)
{
    int64_t i;
    int err = read_varint(c, &i);
    if (err)
        return err;
    if (i < 0 || i >= count)
        return bad(c, what);
    return HF_OK;
}

static int skip_value(cursor_t *c, avro_schema_t s, int depth);

/* Blocks of items: count, [byte size if count < 0], items; a 0 count ends. */
static int skip_blocks(cursor_t *c, avro_schema_t items, bool is_map, int depth)
{
    int64_t total = 0;
    for (;;) {
        int64_t count, size;
        int err = read_varint(c, &count);
        if (err)
            return err;
        if (count == 0)
            return HF_OK;
        if (count == INT64_MIN)
            return bad(c, "block count out of range");
        if (count < 0) {
            count = -count;
            if ((err = read_varint(c, &size)))
                return err;
            if (size < 0 || (uint64_t)size > c->len - c->pos)
                return bad(c, "block size runs past the end");
        }
        if (count > CODEC_ITEMS_MAX - total)
            return bad(c, "too many items");
        total += count;
        for (int64_t i = 0; i < count; i++) {
            if (is_map && (err = skip_blob(c)))
                return err;
            if ((err = skip_value(c, items, depth + 1)))
                return err;
        }
    }
}

static int skip_record(cursor_t *c, avro_schema_t s, int depth)
{
    size_t n = avro_schema_record_size(s);
    for (size_t i = 0; i < n; i++) {
        int err = skip_value(c, avro_schema_record_field_get_by_index(s, (int)i), depth + 1);
        if (err)
            return err;
    }
    return HF_OK;
}

static int skip_union(cursor_t *c, avro_schema_t s, int depth)
{
    int64_t i;
    int err = read_varint(c, &i);
    if (err)
        return err;
    if (i < 0 || (uint64_t)i >= avro_schema_union_size(s))
        return bad(c, "union branch out of range");
    return skip_value(c, avro_schema_union_branch(s, (int)i), depth + 1);
}

static int skip_scalar(cursor_t *c, avro_schema_t s)
{
    int64_t v;
    int err;
    switch (avro_typeof(s)) {
    case AVRO_NULL:
        return HF_OK;
    case AVRO_BOOLEAN:
        if (c->pos >= c->len)
            return bad(c, "truncated boolean");
        if (c->body[c->pos] > 1)
            return bad(c, "boolean is neither 0 nor 1");
        c->pos++;
        return HF_OK;
    case AVRO_INT32:
        if ((err = read_varint(c, &v)))
            return err;
        return (v < INT32_MIN || v > INT32_MAX) ? bad(c, "int out of range") : HF_OK;
    case AVRO_INT64:
        return read_varint(c, &v);
    case AVRO_FLOAT:
        return skip_bytes(c, 4);
    case AVRO_DOUBLE:
        return skip_bytes(c, 8);
    case AVRO_STRING:
    case AVRO_BYTES:
        return skip_blob(c);
    case AVRO_FIXED:
        return skip_bytes(c, (size_t)avro_schema_fixed_size(s));
    case AVRO_ENUM:
        return skip_index(c, avro_schema_enum_number_of_symbols(s), "enum index out of range");
    default:
        return bad(c, "unsupported schema type");
    }
}

static int skip_value(cursor_t *c, avro_schema_t s, int depth)
{
    if (depth > CODEC_DEPTH_MAX)
        return bad(c, "nested too deeply");
    switch (avro_typeof(s)) {
    case AVRO_RECORD:
        return skip_record(c, s, depth);
    case AVRO_ARRAY:
        return skip_blocks(c, avro_schema_array_items(s), false, depth);
    case AVRO_MAP:
        return skip_blocks(c, avro_schema_map_values(s), true, depth);
    case AVRO_UNION:
        return skip_union(c, s, depth);
    case AVRO_LINK:
        return skip_value(c, avro_schema_link_target(s), depth + 1);
    default:
        return skip_scalar(c, s);
    }
}

int codec_validate_body(avro_schema_t writer, const char *record, const uint8_t *body, size_t len,
                        char *errstr, size_t errstr_size)
{
    cursor_t c = {
        .body = body, .len = len, .record = record, .errstr = errstr, .errstr_size = errstr_size};
    int err = skip_value(&c, writer, 0);
    if (err)
        return err;
    if (c.pos != c.len)
        return bad(&c, "trailing bytes after the record");
    return HF_OK;
}
