/* The line `hfctl tail` prints (tools/lib/tail_json.h): one JSON object for every
 * record, whatever bytes its key, value and traceparent hold. NULs, quotes,
 * backslashes and control characters print escaped and whole (lengths from the
 * record, never strlen); bytes that are not UTF-8 print as base64 under `<name>_b64`
 * (checked against OpenSSL's encoder); raw bytes past HF_TAIL_RAW_BYTES_MAX are
 * counted, not printed; a dead letter's kept bytes print whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hf_limits.h"
#include "lib/tail_json.h"

static int setup(void **state)
{
    (void)state;
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return -1;
    }
    return 0;
}

/* tail_json_line of rec, checked to be one line of one JSON object, parsed. */
static json_t *line_of(const tail_record_t *rec)
{
    char *line = NULL, errstr[256] = "";
    assert_int_equal(tail_json_line(rec, &line, errstr, sizeof errstr), HF_OK);
    assert_non_null(line);
    assert_null(strchr(line, '\n'));
    json_error_t jerr;
    /* jansson's reader is strict (no raw control characters, UTF-8 only); \u0000
     * is valid JSON that it reads only when asked. */
    json_t *v = json_loads(line, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
    if (!v)
        fail_msg("not JSON (%s at %d): %.300s", jerr.text, jerr.position, line);
    assert_true(json_is_object(v));
    free(line);
    return v;
}

/* obj's string member name holds exactly want[0..want_len). */
static void assert_text(const json_t *obj, const char *name, const void *want, size_t want_len)
{
    const json_t *s = json_object_get(obj, name);
    if (!json_is_string(s))
        fail_msg("no string member '%s'", name);
    assert_int_equal(json_string_length(s), want_len);
    assert_memory_equal(json_string_value(s), want, want_len);
}

/* obj's member name is the base64 of p[0..n), as OpenSSL encodes it. */
static void assert_b64(const json_t *obj, const char *name, const void *p, size_t n)
{
    char *want = malloc(4 * ((n + 2) / 3) + 1);
    assert_non_null(want);
    int len = EVP_EncodeBlock((unsigned char *)want, p, (int)n);
    assert_true(len >= 0);
    assert_text(obj, name, want, (size_t)len);
    free(want);
}

static void assert_absent(const json_t *obj, const char *name)
{
    if (json_object_get(obj, name))
        fail_msg("member '%s' should not be there", name);
}

static json_int_t int_member(const json_t *obj, const char *name)
{
    const json_t *n = json_object_get(obj, name);
    if (!json_is_integer(n))
        fail_msg("no integer member '%s'", name);
    return json_integer_value(n);
}

/* tail_json_set_bytes on a fresh object. */
static json_t *bytes_obj(const void *p, size_t len, size_t bytes_max)
{
    json_t *obj = json_object();
    assert_non_null(obj);
    assert_true(tail_json_set_bytes(obj, "key", "key", p, len, bytes_max));
    return obj;
}

static void test_nul_quotes_backslashes_and_control_characters_print_whole_and_escaped(void **state)
{
    (void)state;
    static const uint8_t key[] = "a\0b\"c\\d\n\r\t\x01\x1f\x7f\xc3\xa9 end";
    const size_t key_len = sizeof key - 1;
    tail_record_t rec = {.partition = 3, .offset = 42, .key = key, .key_len = key_len};
    json_t *v = line_of(&rec);
    assert_text(v, "key", key, key_len);
    assert_absent(v, "key_b64");
    assert_absent(v, "key_truncated_bytes");
    assert_int_equal(int_member(v, "partition"), 3);
    assert_int_equal(int_member(v, "offset"), 42);
    assert_true(json_is_null(json_object_get(v, "value"))); /* a tombstone */
    json_decref(v);

    /* The escapes themselves: what an operator sees in the terminal. */
    char *line = NULL, errstr[256] = "";
    assert_int_equal(tail_json_line(&rec, &line, errstr, sizeof errstr), HF_OK);
    assert_non_null(strstr(line, "\"key\":\"a\\u0000b\\\"c\\\\d\\n\\r\\t\\u0001\\u001"));
    free(line);
}

static void test_bytes_that_are_not_utf8_print_as_base64_under_their_own_name(void **state)
{
    (void)state;
    static const uint8_t key[] = {0xff, 0xfe, 0x00, 'k', '"'};
    tail_record_t rec = {.key = key, .key_len = sizeof key};
    json_t *v = line_of(&rec);
    assert_absent(v, "key");
    assert_b64(v, "key_b64", key, sizeof key);
    json_decref(v);

    /* No key at all is not an empty key. */
    rec = (tail_record_t){.key = NULL};
    v = line_of(&rec);
    assert_true(json_is_null(json_object_get(v, "key")));
    json_decref(v);
    static const uint8_t empty[1] = {0};
    rec = (tail_record_t){.key = empty, .key_len = 0};
    v = line_of(&rec);
    assert_text(v, "key", "", 0);
    json_decref(v);
}

static void test_utf8_is_judged_by_the_standard_not_by_the_lead_byte(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        bool text;
    } cases[] = {
        {"\xc3\xa9", true},          /* e acute */
        {"\xef\xbf\xbf", true},      /* U+FFFF */
        {"\xf0\x9f\x98\x80", true},  /* an emoji, 4 bytes */
        {"\xf4\x8f\xbf\xbf", true},  /* U+10FFFF, the last code point */
        {"\xc0\x80", false},         /* overlong NUL */
        {"\xc1\xbf", false},         /* overlong */
        {"\xe0\x80\xaf", false},     /* overlong '/' */
        {"\xf0\x80\x80\xaf", false}, /* overlong, 4 bytes */
        {"\xed\xa0\x80", false},     /* a UTF-16 surrogate */
        {"\xf4\x90\x80\x80", false}, /* above U+10FFFF */
        {"\xf5\x80\x80\x80", false}, /* no such lead byte */
        {"\x80", false},             /* a lone continuation byte */
        {"ab\xc3", false},           /* ends inside a character (not cut by us) */
        {"\xc3(", false},            /* a lead byte without its continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].bytes);
        json_t *obj = bytes_obj(cases[i].bytes, n, 1000);
        print_message("case %zu: %s\n", i, cases[i].text ? "text" : "base64");
        if (cases[i].text) {
            assert_text(obj, "key", cases[i].bytes, n);
            assert_absent(obj, "key_b64");
        } else {
            assert_absent(obj, "key");
            assert_b64(obj, "key_b64", cases[i].bytes, n);
        }
        json_decref(obj);
    }
}

static void test_base64_pads_every_length_as_rfc4648_says(void **state)
{
    (void)state;
    uint8_t bytes[8] = {0xff, 0x00, 0xfb, 0xef, 0xbe, 0x10, 0x83, 0x7f};
    for (size_t n = 1; n <= sizeof bytes; n++) {
        json_t *obj = bytes_obj(bytes, n, 1000);
        assert_b64(obj, "key_b64", bytes, n);
        json_decref(obj);
    }
}

static void test_a_bound_cuts_text_at_a_character_and_counts_the_rest(void **state)
{
    (void)state;
    json_t *obj = bytes_obj("abc", 3, 2);
    assert_text(obj, "key", "ab", 2);
    assert_int_equal(int_member(obj, "key_truncated_bytes"), 1);
    json_decref(obj);
    /* The bound falls inside e acute: the partial character goes with the rest. */
    obj = bytes_obj("a\xc3\xa9z", 4, 2);
    assert_text(obj, "key", "a", 1);
    assert_int_equal(int_member(obj, "key_truncated_bytes"), 3);
    json_decref(obj);
    obj = bytes_obj("\xff\xff\xff\xff", 4, 3);
    assert_b64(obj, "key_b64", "\xff\xff\xff", 3);
    assert_int_equal(int_member(obj, "key_truncated_bytes"), 1);
    json_decref(obj);
    obj = bytes_obj("abc", 3, 3);
    assert_absent(obj, "key_truncated_bytes");
    json_decref(obj);
}

static void test_a_value_the_codec_cannot_read_prints_why_its_size_and_its_bytes(void **state)
{
    (void)state;
    /* A single-object header with a fingerprint no schema has, then NUL, quote. */
    static const uint8_t garbage[] = {0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0x00, '"', '\\', 0xff};
    tail_record_t rec = {.key = (const uint8_t *)"k", .key_len = 1};
    rec.value = garbage;
    rec.value_len = sizeof garbage;
    json_t *v = line_of(&rec);
    assert_absent(v, "value"); /* "value" is only ever a decoded record or null */
    assert_true(json_string_length(json_object_get(v, "undecodable")) > 0);
    assert_int_equal(int_member(v, "bytes"), sizeof garbage);
    assert_b64(v, "value_b64", garbage, sizeof garbage);
    assert_absent(v, "value_truncated_bytes");
    json_decref(v);

    /* JSON written to a holdfast topic by mistake reads as what it is. */
    static const char text[] = "{\"sku\": \"SKU-1\", \"qty\": 2}\n";
    rec.value = (const uint8_t *)text;
    rec.value_len = sizeof text - 1;
    v = line_of(&rec);
    assert_text(v, "value_text", text, sizeof text - 1);
    assert_absent(v, "value_b64");
    json_decref(v);

    /* 900 KB of garbage makes one bounded line that says what it left out. */
    size_t big_len = 900 * 1024;
    uint8_t *big = malloc(big_len);
    assert_non_null(big);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (uint8_t)(i * 7 + 0xc3);
    rec.value = big;
    rec.value_len = big_len;
    v = line_of(&rec);
    assert_int_equal(int_member(v, "bytes"), big_len);
    assert_b64(v, "value_b64", big, HF_TAIL_RAW_BYTES_MAX);
    assert_int_equal(int_member(v, "value_truncated_bytes"), big_len - HF_TAIL_RAW_BYTES_MAX);
    json_decref(v);
    free(big);
}

/* A DeadLetter of key and value, encoded. */
static size_t dead_letter(const void *key, size_t key_len, const void *value, size_t value_len,
                          uint8_t *buf, size_t buf_size)
{
    hf_record_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->type = HF_REC_DEAD_LETTER;
    hf_dead_letter_t *d = &r->u.dead_letter;
    snprintf(d->source_topic, sizeof d->source_topic, "holdfast.requests");
    d->source_partition = 5;
    d->source_offset = 77;
    snprintf(d->stage, sizeof d->stage, "gateway");
    snprintf(d->reason, sizeof d->reason, "value does not decode: \"bad\" \\ bytes");
    assert_true(key_len <= sizeof d->key && value_len <= sizeof d->value);
    d->key_len = (uint32_t)key_len;
    memcpy(d->key, key, key_len);
    d->value_len = (uint32_t)value_len;
    memcpy(d->value, value, value_len);
    d->value_truncated = true;
    d->failed_at_ms = 1700000000000;
    size_t len = 0;
    char errstr[256] = "";
    assert_int_equal(codec_encode(r, buf, buf_size, &len, errstr, sizeof errstr), HF_OK);
    free(r);
    return len;
}

static void test_a_dead_letters_kept_bytes_print_whole_from_their_length(void **state)
{
    (void)state;
    static uint8_t buf[HF_RECORD_LEN_MAX], kept[HF_INPUT_VALUE_BYTES_MAX];
    /* Text with a NUL early (printf stopped there) and quotes, the whole 16 KiB. */
    for (size_t i = 0; i < sizeof kept; i++)
        kept[i] = (uint8_t)("ab\"\\\n"[i % 5]);
    kept[5] = 0;
    static const char key[] = "k\0\"1";
    tail_record_t rec = {.key = (const uint8_t *)key, .key_len = sizeof key - 1};
    rec.value = buf;
    rec.value_len = dead_letter(key, sizeof key - 1, kept, sizeof kept, buf, sizeof buf);
    json_t *line = line_of(&rec);
    assert_text(line, "key", key, sizeof key - 1);
    const json_t *v = json_object_get(line, "value");
    assert_text(v, "type", "DeadLetter", 10);
    assert_text(v, "key", key, sizeof key - 1);
    assert_text(v, "value", kept, sizeof kept);
    assert_text(v, "reason", "value does not decode: \"bad\" \\ bytes", 36);
    assert_true(json_is_true(json_object_get(v, "value_truncated")));
    json_decref(line);

    /* Binary kept bytes (an Avro single-object header, a NUL in the fingerprint):
     * base64, in the member's place. */
    static const uint8_t avro[] = {0xc3, 0x01, 0x00, 0x9a, 0xff, 'r', 'r', 0x00};
    rec.value_len = dead_letter("big1", 4, avro, sizeof avro, buf, sizeof buf);
    line = line_of(&rec);
    v = json_object_get(line, "value");
    assert_absent(v, "value");
    assert_b64(v, "value_b64", avro, sizeof avro);
    assert_text(v, "key", "big1", 4);
    static const char *const order[] = {
        "type",   "source_topic", "source_partition", "source_offset",   "stage",
        "reason", "key",          "value_b64",        "value_truncated", "failed_at_ms"};
    size_t i = 0;
    const char *name = NULL;
    json_t *member = NULL;
    json_object_foreach((json_t *)v, name, member)
    {
        (void)member;
        assert_true(i < sizeof order / sizeof order[0]);
        assert_string_equal(name, order[i++]);
    }
    assert_int_equal(i, sizeof order / sizeof order[0]);
    json_decref(line);
}

static void test_a_decoded_record_prints_as_the_codec_renders_it(void **state)
{
    (void)state;
    static uint8_t buf[HF_RECORD_LEN_MAX];
    hf_record_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->type = HF_REC_HOLD;
    snprintf(r->u.hold.reservation_id, sizeof r->u.hold.reservation_id, "r-\"1\"");
    snprintf(r->u.hold.warehouse_id, sizeof r->u.hold.warehouse_id, "W1");
    snprintf(r->u.hold.sku, sizeof r->u.hold.sku, "SKU-1");
    r->u.hold.qty = 2;
    size_t len = 0;
    char errstr[256] = "", *json = NULL;
    assert_int_equal(codec_encode(r, buf, sizeof buf, &len, errstr, sizeof errstr), HF_OK);
    free(r);
    assert_int_equal(codec_to_json(buf, len, &json, errstr, sizeof errstr), HF_OK);
    json_t *want = json_loads(json, 0, NULL);
    free(json);
    assert_non_null(want);

    static const char tp[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\"";
    tail_record_t rec = {.partition = 1, .offset = 9, .key = (const uint8_t *)"W1|SKU-1"};
    rec.key_len = 8;
    rec.value = buf;
    rec.value_len = len;
    rec.traceparent = (const uint8_t *)tp;
    rec.traceparent_len = sizeof tp - 1;
    json_t *line = line_of(&rec);
    assert_true(json_equal(json_object_get(line, "value"), want));
    assert_text(line, "traceparent", tp, sizeof tp - 1);
    assert_text(line, "key", "W1|SKU-1", 8);
    json_decref(want);
    json_decref(line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_nul_quotes_backslashes_and_control_characters_print_whole_and_escaped),
        cmocka_unit_test(test_bytes_that_are_not_utf8_print_as_base64_under_their_own_name),
        cmocka_unit_test(test_utf8_is_judged_by_the_standard_not_by_the_lead_byte),
        cmocka_unit_test(test_base64_pads_every_length_as_rfc4648_says),
        cmocka_unit_test(test_a_bound_cuts_text_at_a_character_and_counts_the_rest),
        cmocka_unit_test(test_a_value_the_codec_cannot_read_prints_why_its_size_and_its_bytes),
        cmocka_unit_test(test_a_dead_letters_kept_bytes_print_whole_from_their_length),
        cmocka_unit_test(test_a_decoded_record_prints_as_the_codec_renders_it),
    };
    return cmocka_run_group_tests_name("hfctl tail's JSON lines", tests, setup, NULL);
}
