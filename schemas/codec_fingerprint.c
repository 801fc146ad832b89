/* Avro Parsing Canonical Form and the CRC-64-AVRO (Rabin) fingerprint, written from
 * the Avro specification because avro-c 1.11 has neither. The fingerprint of a
 * schema's canonical form is what single-object encoding puts on the wire, so it
 * must agree byte for byte with every other Avro implementation; the unit tests
 * pin it to values the Python implementation computes. Uses jansson only. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "codec_internal.h"

uint64_t codec_crc64_avro(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t fp = CODEC_CRC64_EMPTY;
    for (size_t i = 0; i < len; i++) {
        fp ^= p[i];
        for (int bit = 0; bit < 8; bit++)
            fp = (fp >> 1) ^ (CODEC_CRC64_EMPTY & (0 - (fp & 1)));
    }
    return fp;
}

/* ---- a growable output string */

typedef struct {
    char *buf;
    size_t len;
    size_t cap;
    bool failed; /* out of memory: later appends are no-ops */
} pcf_out_t;

static void out_append(pcf_out_t *out, const char *s, size_t n)
{
    if (out->failed)
        return;
    if (out->len + n + 1 > out->cap) {
        size_t cap = out->cap ? out->cap : 256;
        while (cap < out->len + n + 1)
            cap *= 2;
        char *buf = realloc(out->buf, cap);
        if (!buf) {
            out->failed = true;
            return;
        }
        out->buf = buf;
        out->cap = cap;
    }
    memcpy(out->buf + out->len, s, n);
    out->len += n;
    out->buf[out->len] = '\0';
}

static void out_puts(pcf_out_t *out, const char *s)
{
    out_append(out, s, strlen(s));
}

/* A JSON string literal. [STRINGS]: characters are written as UTF-8, escaping only
 * what JSON requires. */
static void out_json_string(pcf_out_t *out, const char *s)
{
    out_append(out, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            out_append(out, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            out_append(out, esc, 6);
        } else {
            out_append(out, (const char *)p, 1);
        }
    }
    out_append(out, "\"", 1);
}

/* ---- names */

static bool is_primitive(const char *t)
{
    static const char *const primitives[] = {"null",  "boolean", "int",   "long",
                                             "float", "double",  "bytes", "string"};
    for (size_t i = 0; i < sizeof primitives / sizeof primitives[0]; i++)
        if (strcmp(t, primitives[i]) == 0)
            return true;
    return false;
}

/* [FULLNAMES]: a name with a dot is already full; otherwise the namespace applies. */
static void full_name(const char *name, const char *ns, char *out, size_t out_size)
{
    if (strchr(name, '.') || !ns || !*ns)
        snprintf(out, out_size, "%s", name);
    else
        snprintf(out, out_size, "%s.%s", ns, name);
}

typedef struct {
    pcf_out_t out;
    char *errstr;
    size_t errstr_size;
    int depth;
} pcf_t;

static int pcf_emit(pcf_t *pc, const json_t *schema, const char *ns) HF_MUST_CHECK;

static int pcf_fail(pcf_t *pc, const char *what)
{
    codec_errf(pc->errstr, pc->errstr_size, "schema: %s", what);
    return HF_ERR_CONFIG;
}

static int pcf_emit_fields(pcf_t *pc, const json_t *fields, const char *ns)
{
    size_t i;
    const json_t *field;
    if (!json_is_array(fields))
        return pcf_fail(pc, "record \"fields\" is not an array");
    out_puts(&pc->out, ",\"fields\":[");
    json_array_foreach(fields, i, field)
    {
        const char *name = json_string_value(json_object_get(field, "name"));
        if (!name)
            return pcf_fail(pc, "record field without a \"name\"");
        out_puts(&pc->out, i ? ",{\"name\":" : "{\"name\":");
        out_json_string(&pc->out, name);
        out_puts(&pc->out, ",\"type\":");
        int err = pcf_emit(pc, json_object_get(field, "type"), ns);
        if (err)
            return err;
        out_puts(&pc->out, "}");
    }
    out_puts(&pc->out, "]");
    return HF_OK;
}

static int pcf_emit_symbols(pcf_t *pc, const json_t *symbols)
{
    size_t i;
    const json_t *sym;
    if (!json_is_array(symbols))
        return pcf_fail(pc, "enum \"symbols\" is not an array");
    out_puts(&pc->out, ",\"symbols\":[");
    json_array_foreach(symbols, i, sym)
    {
        if (!json_is_string(sym))
            return pcf_fail(pc, "enum symbol is not a string");
        if (i)
            out_puts(&pc->out, ",");
        out_json_string(&pc->out, json_string_value(sym));
    }
    out_puts(&pc->out, "]");
    return HF_OK;
}

/* [INTEGERS]: fixed's size without quotes or leading zeros. */
static int pcf_emit_size(pcf_t *pc, const json_t *size)
{
    long long n = -1;
    if (json_is_integer(size))
        n = json_integer_value(size);
    else if (json_is_string(size))
        n = strtoll(json_string_value(size), NULL, 10);
    if (n < 0)
        return pcf_fail(pc, "fixed \"size\" is not a non-negative integer");
    char num[32];
    snprintf(num, sizeof num, ",\"size\":%lld", n);
    out_puts(&pc->out, num);
    return HF_OK;
}

/* record, error, enum, fixed: [ORDER] name, type, then fields/symbols/size. */
static int pcf_emit_named(pcf_t *pc, const json_t *schema, const char *type, const char *ns)
{
    const char *name = json_string_value(json_object_get(schema, "name"));
    const json_t *ns_json = json_object_get(schema, "namespace");
    char full[512];
    if (!name)
        return pcf_fail(pc, "named type without a \"name\"");
    if (json_is_string(ns_json))
        ns = json_string_value(ns_json);
    full_name(name, ns, full, sizeof full);
    out_puts(&pc->out, "{\"name\":");
    out_json_string(&pc->out, full);
    out_puts(&pc->out, ",\"type\":");
    out_json_string(&pc->out, type);

    /* Types nested in this one inherit the namespace of its full name. */
    char inner_ns[512];
    const char *dot = strrchr(full, '.');
    snprintf(inner_ns, sizeof inner_ns, "%.*s", dot ? (int)(dot - full) : 0, full);

    int err;
    if (strcmp(type, "enum") == 0)
        err = pcf_emit_symbols(pc, json_object_get(schema, "symbols"));
    else if (strcmp(type, "fixed") == 0)
        err = pcf_emit_size(pc, json_object_get(schema, "size"));
    else
        err = pcf_emit_fields(pc, json_object_get(schema, "fields"), inner_ns);
    out_puts(&pc->out, "}");
    return err;
}

static int pcf_emit_object(pcf_t *pc, const json_t *schema, const char *ns)
{
    const json_t *type_json = json_object_get(schema, "type");
    if (!json_is_string(type_json)) /* {"type": {...}} or {"type": [...]} */
        return pcf_emit(pc, type_json, ns);
    const char *type = json_string_value(type_json);
    if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0 || strcmp(type, "enum") == 0 ||
        strcmp(type, "fixed") == 0)
        return pcf_emit_named(pc, schema, type, ns);
    if (strcmp(type, "array") == 0) {
        out_puts(&pc->out, "{\"type\":\"array\",\"items\":");
        int err = pcf_emit(pc, json_object_get(schema, "items"), ns);
        out_puts(&pc->out, "}");
        return err;
    }
    if (strcmp(type, "map") == 0) {
        out_puts(&pc->out, "{\"type\":\"map\",\"values\":");
        int err = pcf_emit(pc, json_object_get(schema, "values"), ns);
        out_puts(&pc->out, "}");
        return err;
    }
    return pcf_emit(pc, type_json, ns); /* [PRIMITIVES] or a named reference */
}

static int pcf_emit(pcf_t *pc, const json_t *schema, const char *ns)
{
    int err = HF_OK;
    if (++pc->depth > CODEC_DEPTH_MAX * 4) {
        err = pcf_fail(pc, "nested too deeply");
    } else if (json_is_string(schema)) {
        const char *t = json_string_value(schema);
        char full[512];
        full_name(t, is_primitive(t) ? NULL : ns, full, sizeof full);
        out_json_string(&pc->out, full);
    } else if (json_is_array(schema)) { /* a union */
        size_t i;
        const json_t *branch;
        out_puts(&pc->out, "[");
        json_array_foreach(schema, i, branch)
        {
            if (i)
                out_puts(&pc->out, ",");
            if ((err = pcf_emit(pc, branch, ns)))
                break;
        }
        out_puts(&pc->out, "]");
    } else if (json_is_object(schema)) {
        err = pcf_emit_object(pc, schema, ns);
    } else {
        err = pcf_fail(pc, "a type is neither a name, an object nor a union");
    }
    pc->depth--;
    return err;
}

int codec_parsing_canonical_form(const char *schema_json, char **out, char *errstr,
                                 size_t errstr_size)
{
    pcf_t pc = {.errstr = errstr, .errstr_size = errstr_size};
    json_error_t jerr;
    json_t *root = NULL;
    int err = HF_ERR_INVAL;

    *out = NULL;
    if (!schema_json)
        goto fail;
    root = json_loads(schema_json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        codec_errf(errstr, errstr_size, "schema is not JSON: %s (line %d)", jerr.text, jerr.line);
        err = HF_ERR_CONFIG;
        goto fail;
    }
    if ((err = pcf_emit(&pc, root, "")))
        goto fail;
    if (pc.out.failed || !pc.out.buf) {
        err = HF_ERR_NOMEM;
        goto fail;
    }
    json_decref(root);
    *out = pc.out.buf;
    return HF_OK;
fail:
    json_decref(root);
    free(pc.out.buf);
    return err;
}

void codec_errf(char *errstr, size_t errstr_size, const char *fmt, ...)
{
    va_list ap;
    if (!errstr || errstr_size == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(errstr, errstr_size, fmt, ap);
    va_end(ap);
}
