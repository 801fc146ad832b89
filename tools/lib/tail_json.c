/* The line `hfctl tail` prints for one record (tail_json.h). It exists because the
 * records an operator most needs to read are the broken ones: a dead letter keeps
 * whatever bytes a producer sent, and printf of those bytes cut them at a NUL and
 * left quotes and control characters unescaped. Everything here goes through
 * jansson, which escapes; raw bytes that are not UTF-8 go out as base64. */
#include "tail_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hf_assert.h"
#include "hf_limits.h"

/* ---- UTF-8 */

/* The length of the UTF-8 sequence that starts p[0..n) when it is whole and valid
 * (Unicode's table of well-formed sequences: no overlong forms, no surrogates,
 * nothing above U+10FFFF), else 0; *cut is set when the bytes are valid as far as
 * n goes but n ends inside the sequence. */
static size_t utf8_seq_len(const uint8_t *p, size_t n, bool *cut)
{
    uint8_t c = p[0], lo = 0x80, hi = 0xbf;
    size_t len = 0;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* overlong */
        hi = c == 0xed ? 0x9f : 0xbf; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80; /* overlong */
        hi = c == 0xf4 ? 0x8f : 0xbf; /* above U+10FFFF */
    } else {
        return 0;
    }
    for (size_t k = 1; k < len; k++, lo = 0x80, hi = 0xbf) {
        if (k >= n) {
            *cut = true;
            return 0;
        }
        if (p[k] < lo || p[k] > hi)
            return 0;
    }
    return len;
}

/* The longest prefix of p[0..n) made of whole valid sequences; *cut says the
 * bytes after it are a valid sequence that n ends inside. */
static size_t utf8_prefix_len(const uint8_t *p, size_t n, bool *cut)
{
    size_t i = 0;
    *cut = false;
    while (i < n) {
        size_t len = utf8_seq_len(p + i, n - i, cut);
        if (len == 0)
            break;
        i += len;
    }
    return i;
}

/* ---- base64 */

/* RFC 4648 base64 (standard alphabet, padded) of p[0..n) as a JSON string. */
static json_t *base64_json(const uint8_t *p, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    hf_assert(n <= SIZE_MAX / 2);
    size_t out_len = (n + 2) / 3 * 4, o = 0;
    char *out = malloc(out_len + 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
    }
    hf_assert(o == out_len);
    json_t *j = json_stringn(out, out_len);
    free(out);
    return j;
}

/* ---- raw bytes */

bool tail_json_set_bytes(json_t *obj, const char *text_name, const char *base_name,
                         const uint8_t *p, size_t len, size_t bytes_max)
{
    static const uint8_t none[1];
    char b64_name[64], truncated_name[64];
    int n1 = snprintf(b64_name, sizeof b64_name, "%s_b64", base_name);
    int n2 = snprintf(truncated_name, sizeof truncated_name, "%s_truncated_bytes", base_name);
    hf_assert(n1 > 0 && (size_t)n1 < sizeof b64_name && n2 > 0 &&
              (size_t)n2 < sizeof truncated_name);
    if (!p) {
        hf_assert(len == 0);
        p = none;
    }
    size_t kept = len < bytes_max ? len : bytes_max;
    bool cut = false;
    size_t text_len = utf8_prefix_len(p, kept, &cut);
    /* Text when the kept bytes are UTF-8, or would be but for where the bound cut
     * them (then the last, partial character goes with the truncated bytes). */
    json_t *s = NULL;
    const char *name = text_name;
    if (text_len == kept || (cut && kept < len)) {
        s = json_stringn((const char *)p, text_len);
        if (s)
            kept = text_len;
    }
    if (!s) {
        s = base64_json(p, kept);
        name = b64_name;
    }
    if (!s || json_object_set_new(obj, name, s))
        return false;
    return kept == len ||
           json_object_set_new(obj, truncated_name, json_integer((json_int_t)(len - kept))) == 0;
}

/* ---- the record's value */

/* A DeadLetter's key and value are the bytes of the record it keeps. codec_to_json
 * renders bytes in Avro's JSON encoding (one code point per byte: lossless, but
 * UTF-8 text shows as mojibake and binary needs a decoder); they are set here as
 * every other raw bytes hfctl tail prints. v is consumed; NULL when out of memory. */
static json_t *dead_letter_json(json_t *v, const tail_record_t *rec)
{
    hf_dead_letter_t *d = calloc(1, sizeof *d); /* ~17 KiB */
    char why[256] = "";
    json_t *out = NULL;
    const char *name = NULL;
    json_t *member = NULL;
    if (!d)
        goto done;
    if (codec_decode_as(rec->value, rec->value_len, HF_REC_DEAD_LETTER, d, why, sizeof why) !=
        HF_OK) {
        out = json_incref(v); /* decoded once already; left as codec_to_json put it */
        goto done;
    }
    out = json_object();
    json_object_foreach(v, name, member)
    {
        bool ok = false;
        if (strcmp(name, "key") == 0)
            ok = tail_json_set_bytes(out, name, name, d->key, d->key_len, sizeof d->key);
        else if (strcmp(name, "value") == 0)
            ok = tail_json_set_bytes(out, name, name, d->value, d->value_len, sizeof d->value);
        else
            ok = json_object_set(out, name, member) == 0;
        if (!ok) {
            json_decref(out);
            out = NULL;
            break;
        }
    }
done:
    free(d);
    json_decref(v);
    return out;
}

/* The record's value decoded, or NULL with why set (*nomem when that is all). */
static json_t *decoded_json(const tail_record_t *rec, char *why, size_t why_size, bool *nomem)
{
    char *text = NULL;
    json_error_t jerr;
    int err = codec_to_json(rec->value, rec->value_len, &text, why, why_size);
    *nomem = err == HF_ERR_NOMEM;
    if (err)
        return NULL;
    /* codec_to_json's own output; \u0000 is valid JSON, which jansson reads only
     * when asked. */
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &jerr);
    free(text);
    if (!v) {
        snprintf(why, why_size, "the decoded record's JSON does not parse back: %s", jerr.text);
        return NULL;
    }
    const char *type = json_string_value(json_object_get(v, "type"));
    if (type && strcmp(type, "DeadLetter") == 0 && !(v = dead_letter_json(v, rec)))
        *nomem = true;
    return v;
}

static bool value_set(json_t *obj, const tail_record_t *rec)
{
    if (!rec->value)
        return json_object_set_new(obj, "value", json_null()) == 0;
    char why[512] = "";
    bool nomem = false;
    json_t *v = decoded_json(rec, why, sizeof why, &nomem);
    if (v)
        return json_object_set_new(obj, "value", v) == 0;
    if (nomem)
        return false;
    return tail_json_set_bytes(obj, "undecodable", "undecodable", (const uint8_t *)why, strlen(why),
                               sizeof why) &&
           json_object_set_new(obj, "bytes", json_integer((json_int_t)rec->value_len)) == 0 &&
           tail_json_set_bytes(obj, "value_text", "value", rec->value, rec->value_len,
                               HF_TAIL_RAW_BYTES_MAX);
}

/* ---- the line */

int tail_json_line(const tail_record_t *rec, char **line_out, char *errstr, size_t errstr_size)
{
    json_t *obj = json_object();
    *line_out = NULL;
    if (!obj || json_object_set_new(obj, "partition", json_integer(rec->partition)) ||
        json_object_set_new(obj, "offset", json_integer(rec->offset)))
        goto fail;
    if (!rec->key) {
        if (json_object_set_new(obj, "key", json_null()))
            goto fail;
    } else if (!tail_json_set_bytes(obj, "key", "key", rec->key, rec->key_len,
                                    HF_TAIL_RAW_BYTES_MAX)) {
        goto fail;
    }
    /* the W3C trace a record carries (docs/ARCHITECTURE.md, "Tracing") */
    if (rec->traceparent &&
        !tail_json_set_bytes(obj, "traceparent", "traceparent", rec->traceparent,
                             rec->traceparent_len, HF_TAIL_RAW_BYTES_MAX))
        goto fail;
    if (!value_set(obj, rec))
        goto fail;
    *line_out = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!*line_out)
        goto fail;
    json_decref(obj);
    return HF_OK;
fail:
    snprintf(errstr, errstr_size,
             "out of memory rendering the record at partition %d offset %lld as JSON",
             (int)rec->partition, (long long)rec->offset);
    json_decref(obj);
    return HF_ERR_NOMEM;
}
