/* The one generic mapping between holdfast's record structs and avro-c values,
 * driven by the descriptor tables of codec_desc.c. Every bound the structs have
 * (string lengths, array counts, enum ranges, bytes capacity) is checked here in
 * both directions, and a failure names the record path ("Reserve.lines[3].sku"). */
#include <string.h>

#include "codec_avro.h"

/* Prepends "name." or "name[item]." to errstr, as an error climbs out of a nested
 * record. Error paths only. */
static void err_prefix(char *errstr, size_t errstr_size, const char *name, long item)
{
    char tail[512];
    if (!errstr || errstr_size == 0)
        return;
    snprintf(tail, sizeof tail, "%s", errstr);
    if (item < 0)
        snprintf(errstr, errstr_size, "%s.%s", name, tail);
    else
        snprintf(errstr, errstr_size, "%s[%ld].%s", name, item, tail);
}

static int avro_failed(int code, const codec_field_t *f, const char *op, char *errstr,
                       size_t errstr_size)
{
    codec_errf(errstr, errstr_size, "%s: avro-c could not %s the value", f->name, op);
    return code;
}

bool codec_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned char c = *p++;
        size_t more;
        uint32_t cp;
        if (c == 0)
            return false;
        if (c < 0x80)
            continue;
        if (c >= 0xc2 && c <= 0xdf) {
            more = 1, cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            more = 2, cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            more = 3, cp = c & 0x07;
        } else {
            return false;
        }
        if ((size_t)(end - p) < more)
            return false;
        for (size_t i = 0; i < more; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        p += more;
        /* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
        if ((more == 2 && cp < 0x800) || (more == 3 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            return false;
    }
    return true;
}

/* ---- struct -> value */

static int put_string(const codec_field_t *f, const char *s, avro_value_t *v, char *errstr,
                      size_t errstr_size)
{
    size_t n = strnlen(s, f->size);
    if (n == f->size) {
        codec_errf(errstr, errstr_size, "%s: string longer than its %zu-byte bound", f->name,
                   f->size - 1);
        return HF_ERR_ENCODE;
    }
    if (!codec_utf8_valid(s, n)) {
        codec_errf(errstr, errstr_size, "%s: string is not valid UTF-8", f->name);
        return HF_ERR_ENCODE;
    }
    if (avro_value_set_string_len(v, s, n + 1))
        return avro_failed(HF_ERR_ENCODE, f, "set", errstr, errstr_size);
    return HF_OK;
}

static int put_array(const codec_field_t *f, const uint8_t *src, avro_value_t *v, char *errstr,
                     size_t errstr_size)
{
    int32_t count;
    memcpy(&count, src + f->len_offset, sizeof count);
    if (count < 0 || (size_t)count > f->size) {
        codec_errf(errstr, errstr_size, "%s: count %d outside 0..%zu", f->name, (int)count,
                   f->size);
        return HF_ERR_ENCODE;
    }
    for (int32_t k = 0; k < count; k++) {
        avro_value_t item;
        if (avro_value_append(v, &item, NULL))
            return avro_failed(HF_ERR_ENCODE, f, "append", errstr, errstr_size);
        int err = codec_value_from_struct(f->rec, src + f->offset + (size_t)k * f->elem_size, &item,
                                          errstr, errstr_size);
        if (err) {
            err_prefix(errstr, errstr_size, f->name, k);
            return err;
        }
    }
    return HF_OK;
}

static int put_enum(const codec_field_t *f, const uint8_t *p, avro_value_t *v, char *errstr,
                    size_t errstr_size)
{
    int e;
    memcpy(&e, p, sizeof e);
    if (e < 0 || (size_t)e >= f->symbols_count) {
        codec_errf(errstr, errstr_size, "%s: enum value %d outside 0..%zu", f->name, e,
                   f->symbols_count - 1);
        return HF_ERR_ENCODE;
    }
    if (avro_value_set_enum(v, e))
        return avro_failed(HF_ERR_ENCODE, f, "set", errstr, errstr_size);
    return HF_OK;
}

static int put_bytes(const codec_field_t *f, const uint8_t *src, avro_value_t *v, char *errstr,
                     size_t errstr_size)
{
    uint32_t n;
    memcpy(&n, src + f->len_offset, sizeof n);
    if (n > f->size) {
        codec_errf(errstr, errstr_size, "%s: %u bytes exceed the %zu-byte capacity", f->name,
                   (unsigned)n, f->size);
        return HF_ERR_ENCODE;
    }
    if (avro_value_set_bytes(v, (void *)(src + f->offset), n))
        return avro_failed(HF_ERR_ENCODE, f, "set", errstr, errstr_size);
    return HF_OK;
}

static int put_field(const codec_field_t *f, const uint8_t *src, avro_value_t *v, char *errstr,
                     size_t errstr_size)
{
    const uint8_t *p = src + f->offset;
    int32_t i32;
    int64_t i64;
    double d;
    bool b;
    int rc = 0;

    switch (f->kind) {
    case CODEC_KIND_STRING:
        return put_string(f, (const char *)p, v, errstr, errstr_size);
    case CODEC_KIND_INT:
        memcpy(&i32, p, sizeof i32);
        rc = avro_value_set_int(v, i32);
        break;
    case CODEC_KIND_LONG:
        memcpy(&i64, p, sizeof i64);
        rc = avro_value_set_long(v, i64);
        break;
    case CODEC_KIND_DOUBLE:
        memcpy(&d, p, sizeof d);
        rc = avro_value_set_double(v, d);
        break;
    case CODEC_KIND_BOOLEAN:
        memcpy(&b, p, sizeof b);
        rc = avro_value_set_boolean(v, b);
        break;
    case CODEC_KIND_ENUM:
        return put_enum(f, p, v, errstr, errstr_size);
    case CODEC_KIND_BYTES:
        return put_bytes(f, src, v, errstr, errstr_size);
    case CODEC_KIND_RECORD:
        if ((rc = codec_value_from_struct(f->rec, p, v, errstr, errstr_size)))
            err_prefix(errstr, errstr_size, f->name, -1);
        return rc;
    case CODEC_KIND_ARRAY:
        return put_array(f, src, v, errstr, errstr_size);
    }
    return rc ? avro_failed(HF_ERR_ENCODE, f, "set", errstr, errstr_size) : HF_OK;
}

int codec_value_from_struct(const codec_rec_desc_t *rd, const void *src, avro_value_t *val,
                            char *errstr, size_t errstr_size)
{
    for (size_t i = 0; i < rd->fields_count; i++) {
        const codec_field_t *f = &rd->fields[i];
        avro_value_t field;
        if (avro_value_get_by_index(val, i, &field, NULL))
            return avro_failed(HF_ERR_ENCODE, f, "find", errstr, errstr_size);
        int err = put_field(f, src, &field, errstr, errstr_size);
        if (err)
            return err;
    }
    return HF_OK;
}

/* ---- value -> struct */

static int get_string(const codec_field_t *f, avro_value_t *v, char *dst, char *errstr,
                      size_t errstr_size)
{
    const char *s = NULL;
    size_t size = 0;
    if (avro_value_get_string(v, &s, &size))
        return avro_failed(HF_ERR_DECODE, f, "get", errstr, errstr_size);
    size_t n = size ? size - 1 : 0; /* avro-c counts the NUL */
    if (n > f->size - 1) {
        codec_errf(errstr, errstr_size, "%s: string of %zu bytes exceeds its %zu-byte bound",
                   f->name, n, f->size - 1);
        return HF_ERR_DECODE;
    }
    if (!codec_utf8_valid(s, n)) {
        codec_errf(errstr, errstr_size, "%s: string is not valid UTF-8 or holds a NUL", f->name);
        return HF_ERR_DECODE;
    }
    memcpy(dst, s, n);
    dst[n] = '\0';
    return HF_OK;
}

static int get_array(const codec_field_t *f, const codec_plan_t *child, avro_value_t *v,
                     uint8_t *dst, char *errstr, size_t errstr_size)
{
    size_t count = 0;
    if (avro_value_get_size(v, &count))
        return avro_failed(HF_ERR_DECODE, f, "count", errstr, errstr_size);
    if (count > f->size) {
        codec_errf(errstr, errstr_size, "%s: %zu items exceed the bound of %zu", f->name, count,
                   f->size);
        return HF_ERR_DECODE;
    }
    for (size_t k = 0; k < count; k++) {
        avro_value_t item;
        if (avro_value_get_by_index(v, k, &item, NULL))
            return avro_failed(HF_ERR_DECODE, f, "index", errstr, errstr_size);
        int err = codec_value_to_struct(child, &item, dst + f->offset + k * f->elem_size, errstr,
                                        errstr_size);
        if (err) {
            err_prefix(errstr, errstr_size, f->name, (long)k);
            return err;
        }
    }
    int32_t count32 = (int32_t)count;
    memcpy(dst + f->len_offset, &count32, sizeof count32);
    return HF_OK;
}

/* An enum, or the int an older writer stored where the enum is now (the plan
 * admits that only for older writers): either way the symbol index. */
static int get_enum(const codec_field_t *f, avro_value_t *v, uint8_t *p, char *errstr,
                    size_t errstr_size)
{
    int e;
    bool was_int = avro_value_get_type(v) == AVRO_INT32;
    int32_t i32 = 0;
    if (was_int ? avro_value_get_int(v, &i32) : avro_value_get_enum(v, &e))
        return avro_failed(HF_ERR_DECODE, f, "get", errstr, errstr_size);
    if (was_int)
        e = i32;
    if (e < 0 || (size_t)e >= f->symbols_count) {
        codec_errf(errstr, errstr_size, "%s: %s %d outside 0..%zu", f->name,
                   was_int ? "int of an older schema, read as an enum index," : "enum index", e,
                   f->symbols_count - 1);
        return HF_ERR_DECODE;
    }
    memcpy(p, &e, sizeof e);
    return HF_OK;
}

static int get_bytes(const codec_field_t *f, avro_value_t *v, uint8_t *dst, char *errstr,
                     size_t errstr_size)
{
    const void *buf = NULL;
    size_t n = 0;
    if (avro_value_get_bytes(v, &buf, &n))
        return avro_failed(HF_ERR_DECODE, f, "get", errstr, errstr_size);
    if (n > f->size) {
        codec_errf(errstr, errstr_size, "%s: %zu bytes exceed the %zu-byte capacity", f->name, n,
                   f->size);
        return HF_ERR_DECODE;
    }
    if (n)
        memcpy(dst + f->offset, buf, n);
    uint32_t n32 = (uint32_t)n;
    memcpy(dst + f->len_offset, &n32, sizeof n32);
    return HF_OK;
}

static int get_scalar(const codec_field_t *f, avro_value_t *v, uint8_t *p)
{
    int32_t i32;
    int64_t i64;
    double d;
    int b;
    int rc = -1;

    switch (f->kind) {
    case CODEC_KIND_INT:
        if (!(rc = avro_value_get_int(v, &i32)))
            memcpy(p, &i32, sizeof i32);
        break;
    case CODEC_KIND_LONG:
        if (!(rc = avro_value_get_long(v, &i64)))
            memcpy(p, &i64, sizeof i64);
        break;
    case CODEC_KIND_DOUBLE:
        if (!(rc = avro_value_get_double(v, &d)))
            memcpy(p, &d, sizeof d);
        break;
    case CODEC_KIND_BOOLEAN:
        if (!(rc = avro_value_get_boolean(v, &b)))
            *(bool *)p = b != 0;
        break;
    default:
        break;
    }
    return rc;
}

static int get_field(const codec_field_t *f, const codec_plan_t *child, avro_value_t *v,
                     uint8_t *dst, char *errstr, size_t errstr_size)
{
    uint8_t *p = dst + f->offset;
    int err;
    switch (f->kind) {
    case CODEC_KIND_STRING:
        return get_string(f, v, (char *)p, errstr, errstr_size);
    case CODEC_KIND_ENUM:
        return get_enum(f, v, p, errstr, errstr_size);
    case CODEC_KIND_BYTES:
        return get_bytes(f, v, dst, errstr, errstr_size);
    case CODEC_KIND_RECORD:
        if ((err = codec_value_to_struct(child, v, p, errstr, errstr_size)))
            err_prefix(errstr, errstr_size, f->name, -1);
        return err;
    case CODEC_KIND_ARRAY:
        return get_array(f, child, v, dst, errstr, errstr_size);
    default:
        if (get_scalar(f, v, p))
            return avro_failed(HF_ERR_DECODE, f, "get", errstr, errstr_size);
        return HF_OK;
    }
}

int codec_value_to_struct(const codec_plan_t *plan, avro_value_t *val, void *dst, char *errstr,
                          size_t errstr_size)
{
    const codec_rec_desc_t *rd = plan->rd;
    memcpy(dst, plan->tmpl, rd->struct_size);
    for (size_t i = 0; i < rd->fields_count; i++) {
        const codec_field_t *f = &rd->fields[i];
        avro_value_t field;
        if (plan->index[i] < 0)
            continue; /* absent from the writer: the template holds its default */
        if (avro_value_get_by_index(val, (size_t)plan->index[i], &field, NULL))
            return avro_failed(HF_ERR_DECODE, f, "find", errstr, errstr_size);
        int err = get_field(f, plan->children[i], &field, dst, errstr, errstr_size);
        if (err)
            return err;
    }
    return HF_OK;
}
