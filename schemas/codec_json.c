/* JSON on both sides of the codec, with jansson: a decoded record rendered as one
 * line for hfctl tail ({"type":"Hold",...}, enums as symbols, bytes as Avro's JSON
 * encoding of bytes), and Avro field defaults read from a schema text into a
 * struct, which is how an older writer's missing fields get their values. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "codec_internal.h"

/* ---- struct -> JSON */

static json_t *record_to_json(const codec_rec_desc_t *rd, const uint8_t *src);

/* Avro's JSON encoding of bytes: one code point U+0000..U+00FF per byte. */
static json_t *bytes_to_json(const uint8_t *p, uint32_t n)
{
    char *utf8 = malloc((size_t)n * 2 + 1);
    size_t len = 0;
    if (!utf8)
        return NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (p[i] < 0x80) {
            utf8[len++] = (char)p[i];
        } else {
            utf8[len++] = (char)(0xc0 | (p[i] >> 6));
            utf8[len++] = (char)(0x80 | (p[i] & 0x3f));
        }
    }
    json_t *j = json_stringn(utf8, len);
    free(utf8);
    return j;
}

static json_t *array_to_json(const codec_field_t *f, const uint8_t *src)
{
    int32_t count;
    memcpy(&count, src + f->len_offset, sizeof count);
    json_t *arr = json_array();
    for (int32_t k = 0; arr && k >= 0 && (size_t)k < f->size && k < count; k++) {
        json_t *item = record_to_json(f->rec, src + f->offset + (size_t)k * f->elem_size);
        if (!item || json_array_append_new(arr, item)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *field_to_json(const codec_field_t *f, const uint8_t *src)
{
    const uint8_t *p = src + f->offset;
    int32_t i32;
    int64_t i64;
    double d;
    int e;
    uint32_t n;

    switch (f->kind) {
    case CODEC_KIND_STRING:
        return json_stringn((const char *)p, strnlen((const char *)p, f->size));
    case CODEC_KIND_INT:
        memcpy(&i32, p, sizeof i32);
        return json_integer(i32);
    case CODEC_KIND_LONG:
        memcpy(&i64, p, sizeof i64);
        return json_integer(i64);
    case CODEC_KIND_DOUBLE: /* JSON has no NaN or infinity */
        memcpy(&d, p, sizeof d);
        return isfinite(d) ? json_real(d) : json_null();
    case CODEC_KIND_BOOLEAN:
        return json_boolean(*(const bool *)p);
    case CODEC_KIND_ENUM:
        memcpy(&e, p, sizeof e);
        return (e >= 0 && (size_t)e < f->symbols_count) ? json_string(f->symbols[e]) : NULL;
    case CODEC_KIND_BYTES:
        memcpy(&n, src + f->len_offset, sizeof n);
        return bytes_to_json(p, n > f->size ? (uint32_t)f->size : n);
    case CODEC_KIND_RECORD:
        return record_to_json(f->rec, p);
    case CODEC_KIND_ARRAY:
        return array_to_json(f, src);
    }
    return NULL;
}

static bool add_fields(json_t *obj, const codec_rec_desc_t *rd, const uint8_t *src)
{
    for (size_t i = 0; i < rd->fields_count; i++) {
        json_t *v = field_to_json(&rd->fields[i], src);
        if (!v || json_object_set_new(obj, rd->fields[i].name, v))
            return false;
    }
    return true;
}

static json_t *record_to_json(const codec_rec_desc_t *rd, const uint8_t *src)
{
    json_t *obj = json_object();
    if (obj && !add_fields(obj, rd, src)) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

int codec_json_render(const hf_record_t *rec, char **json_out, char *errstr, size_t errstr_size)
{
    const codec_rec_desc_t *rd = codec_rec_descs[rec->type];
    json_t *obj = json_object();
    int err = HF_ERR_NOMEM;

    *json_out = NULL;
    if (!obj || json_object_set_new(obj, "type", json_string(rd->name)))
        goto fail;
    if (!add_fields(obj, rd, (const uint8_t *)&rec->u))
        goto fail;
    *json_out = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!*json_out)
        goto fail;
    json_decref(obj);
    return HF_OK;
fail:
    codec_errf(errstr, errstr_size, "%s: could not render JSON", rd->name);
    json_decref(obj);
    return err;
}

/* ---- Avro JSON default -> struct field */

static int default_apply(const codec_field_t *f, const json_t *def, uint8_t *dst);

/* Bytes defaults are strings of code points U+0000..U+00FF. */
static int default_bytes(const codec_field_t *f, const json_t *def, uint8_t *dst)
{
    const unsigned char *s = (const unsigned char *)json_string_value(def);
    size_t len = json_string_length(def);
    uint32_t n = 0;
    for (size_t i = 0; i < len; i++, n++) {
        unsigned cp = s[i];
        if (cp >= 0x80) {
            if (cp != 0xc2 && cp != 0xc3)
                return HF_ERR_CONFIG;
            cp = ((cp & 0x1f) << 6) | (s[++i] & 0x3f);
        }
        if (n >= f->size)
            return HF_ERR_CONFIG;
        dst[f->offset + n] = (uint8_t)cp;
    }
    memcpy(dst + f->len_offset, &n, sizeof n);
    return HF_OK;
}

static int default_record(const codec_rec_desc_t *rd, const json_t *def, uint8_t *dst)
{
    if (!json_is_object(def))
        return HF_ERR_CONFIG;
    for (size_t i = 0; i < rd->fields_count; i++) {
        const json_t *v = json_object_get(def, rd->fields[i].name);
        int err = v ? default_apply(&rd->fields[i], v, dst) : HF_ERR_CONFIG;
        if (err)
            return err;
    }
    return HF_OK;
}

static int default_array(const codec_field_t *f, const json_t *def, uint8_t *dst)
{
    if (!json_is_array(def) || json_array_size(def) > f->size)
        return HF_ERR_CONFIG;
    int32_t count = (int32_t)json_array_size(def);
    for (int32_t k = 0; k < count; k++) {
        int err = default_record(f->rec, json_array_get(def, (size_t)k),
                                 dst + f->offset + (size_t)k * f->elem_size);
        if (err)
            return err;
    }
    memcpy(dst + f->len_offset, &count, sizeof count);
    return HF_OK;
}

static int default_enum(const codec_field_t *f, const json_t *def, uint8_t *dst)
{
    const char *sym = json_string_value(def);
    for (size_t i = 0; sym && i < f->symbols_count; i++) {
        if (strcmp(sym, f->symbols[i]) == 0) {
            int e = (int)i;
            memcpy(dst + f->offset, &e, sizeof e);
            return HF_OK;
        }
    }
    return HF_ERR_CONFIG;
}

static int default_apply(const codec_field_t *f, const json_t *def, uint8_t *dst)
{
    uint8_t *p = dst + f->offset;
    json_int_t i = json_integer_value(def);
    int32_t i32 = (int32_t)i;
    int64_t i64 = i;
    double d;

    switch (f->kind) {
    case CODEC_KIND_STRING:
        if (!json_is_string(def) || json_string_length(def) >= f->size ||
            strlen(json_string_value(def)) != json_string_length(def))
            return HF_ERR_CONFIG;
        memcpy(p, json_string_value(def), json_string_length(def) + 1);
        return HF_OK;
    case CODEC_KIND_INT:
        if (!json_is_integer(def) || i < INT32_MIN || i > INT32_MAX)
            return HF_ERR_CONFIG;
        memcpy(p, &i32, sizeof i32);
        return HF_OK;
    case CODEC_KIND_LONG:
        if (!json_is_integer(def))
            return HF_ERR_CONFIG;
        memcpy(p, &i64, sizeof i64);
        return HF_OK;
    case CODEC_KIND_DOUBLE:
        if (!json_is_number(def))
            return HF_ERR_CONFIG;
        d = json_number_value(def);
        memcpy(p, &d, sizeof d);
        return HF_OK;
    case CODEC_KIND_BOOLEAN:
        if (!json_is_boolean(def))
            return HF_ERR_CONFIG;
        *(bool *)p = json_is_true(def);
        return HF_OK;
    case CODEC_KIND_ENUM:
        return default_enum(f, def, dst);
    case CODEC_KIND_BYTES:
        return json_is_string(def) ? default_bytes(f, def, dst) : HF_ERR_CONFIG;
    case CODEC_KIND_RECORD:
        return default_record(f->rec, def, p);
    case CODEC_KIND_ARRAY:
        return default_array(f, def, dst);
    }
    return HF_ERR_CONFIG;
}

/* The definition of record `name` (short or full) anywhere inside a schema. */
static const json_t *find_record(const json_t *schema, const char *name, int depth)
{
    if (depth > CODEC_DEPTH_MAX * 4)
        return NULL;
    if (json_is_array(schema)) {
        size_t i;
        const json_t *branch, *found;
        json_array_foreach(schema, i,
                           branch) if ((found = find_record(branch, name, depth + 1))) return found;
        return NULL;
    }
    if (!json_is_object(schema))
        return NULL;
    const char *type = json_string_value(json_object_get(schema, "type"));
    const char *rec_name = json_string_value(json_object_get(schema, "name"));
    if (type && rec_name && strcmp(type, "record") == 0) {
        const char *dot = strrchr(rec_name, '.');
        if (strcmp(dot ? dot + 1 : rec_name, name) == 0)
            return schema;
        size_t i;
        const json_t *field, *found;
        json_array_foreach(json_object_get(schema, "fields"), i,
                           field) if ((found = find_record(json_object_get(field, "type"), name,
                                                           depth + 1))) return found;
        return NULL;
    }
    const json_t *inner = json_object_get(schema, "items");
    if (!inner)
        inner = json_object_get(schema, "values");
    if (!inner && !json_is_string(json_object_get(schema, "type")))
        inner = json_object_get(schema, "type");
    return inner ? find_record(inner, name, depth + 1) : NULL;
}

static const json_t *find_default(const json_t *root, const char *record_name,
                                  const char *field_name)
{
    const json_t *rec = find_record(root, record_name, 0);
    size_t i;
    const json_t *field;
    json_array_foreach(json_object_get(rec, "fields"), i, field)
    {
        const char *name = json_string_value(json_object_get(field, "name"));
        if (name && strcmp(name, field_name) == 0)
            return json_object_get(field, "default");
    }
    return NULL;
}

int codec_default_from_schema(const char *schema_json, const char *record_name,
                              const codec_field_t *f, void *dst, char *errstr, size_t errstr_size)
{
    json_error_t jerr;
    json_t *root = json_loads(schema_json, JSON_DECODE_ANY, &jerr);
    int err = HF_ERR_NOTFOUND;

    if (!root) {
        codec_errf(errstr, errstr_size, "schema %s is not JSON: %s", record_name, jerr.text);
        err = HF_ERR_CONFIG;
        goto done;
    }
    const json_t *def = find_default(root, record_name, f->name);
    if (!def)
        goto done; /* HF_ERR_NOTFOUND */
    if ((err = default_apply(f, def, dst)))
        codec_errf(errstr, errstr_size, "schema %s.%s: default does not fit the field", record_name,
                   f->name);
done:
    json_decref(root);
    return err;
}
