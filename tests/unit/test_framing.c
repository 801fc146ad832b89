/* Unit tests of the Confluent framing in the codec (codec.h): a record framed
 * 0x00 + schema id decodes to the same record as its single-object form through
 * the id resolver, both framings decode side by side, and a wrong magic byte, a
 * short record, an id the resolver does not know, a registry that does not
 * answer and a process without a resolver are refused with a reason that names
 * the id. The resolver here is a fake: a table of ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hf_limits.h"

#define BUF_SIZE (HF_RECORD_LEN_MAX * 2)

/* ---- the fake resolver: id 7 Availability, 8 Signal, 9 LedgerEvent; 66 a
 * schema this build does not know; 99 a registry that does not answer. */

static unsigned resolver_calls;

static int fake_resolve(void *opaque, uint32_t id, uint64_t *fp, char *errstr, size_t errstr_size)
{
    resolver_calls++;
    assert_ptr_equal(opaque, &resolver_calls);
    switch (id) {
    case 7:
        *fp = codec_fingerprint(HF_REC_AVAILABILITY);
        return HF_OK;
    case 8:
        *fp = codec_fingerprint(HF_REC_SIGNAL);
        return HF_OK;
    case 9:
        *fp = codec_fingerprint(HF_REC_LEDGER_EVENT);
        return HF_OK;
    case 66:
        *fp = 0x0123456789abcdefULL;
        return HF_OK;
    case 99:
        snprintf(errstr, errstr_size, "schema registry http://x: Couldn't connect to server");
        return HF_ERR_IO;
    default:
        snprintf(errstr, errstr_size, "schema registry http://x has no schema with this id");
        return HF_ERR_UNKNOWN_SCHEMA;
    }
}

static int setup(void **state)
{
    char errstr[256];
    assert_int_equal(codec_init(errstr, sizeof errstr), HF_OK);
    codec_set_id_resolver(fake_resolve, &resolver_calls);
    resolver_calls = 0;
    return 0;
}

static int teardown(void **state)
{
    codec_set_id_resolver(NULL, NULL);
    codec_shutdown();
    return 0;
}

static hf_record_t *availability(void)
{
    hf_record_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->type = HF_REC_AVAILABILITY;
    hf_availability_t *a = &r->u.availability;
    snprintf(a->sku, sizeof a->sku, "SKU-1");
    a->warehouses_count = 2;
    snprintf(a->warehouses[0].warehouse_id, sizeof a->warehouses[0].warehouse_id, "WH-A");
    a->warehouses[0].available = 5;
    snprintf(a->warehouses[1].warehouse_id, sizeof a->warehouses[1].warehouse_id, "WH-B");
    a->warehouses[1].available = 7;
    a->total = 12;
    a->in_stock = true;
    a->updated_at_ms = 1764600000000;
    return r;
}

static hf_record_t *signal_rec(void)
{
    hf_record_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->type = HF_REC_SIGNAL;
    snprintf(r->u.signal.sku, sizeof r->u.signal.sku, "SKU-2");
    r->u.signal.kind = HF_SIGNAL_SOLD_OUT;
    r->u.signal.changed_at_ms = 1764600000001;
    r->u.signal.emitted_at_ms = 1764600000002;
    return r;
}

static hf_record_t *ledger(void)
{
    hf_record_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->type = HF_REC_LEDGER_EVENT;
    hf_ledger_event_t *l = &r->u.ledger_event;
    snprintf(l->reservation_id, sizeof l->reservation_id, "r-1");
    l->kind = HF_LEDGER_HELD;
    l->allocations_count = 1;
    snprintf(l->allocations[0].warehouse_id, sizeof l->allocations[0].warehouse_id, "WH-A");
    snprintf(l->allocations[0].sku, sizeof l->allocations[0].sku, "SKU-1");
    l->allocations[0].qty = 2;
    l->lines_count = 1;
    snprintf(l->lines[0].sku, sizeof l->lines[0].sku, "SKU-1");
    l->lines[0].qty = 2;
    l->expires_at_ms = 1764600900000;
    l->at_ms = 1764600000000;
    return r;
}

static size_t encode_confluent(const hf_record_t *r, uint32_t id, uint8_t *buf)
{
    char errstr[256];
    size_t len = 0;
    if (codec_encode_confluent(r, id, buf, BUF_SIZE, &len, errstr, sizeof errstr) != HF_OK)
        fail_msg("confluent encode: %s", errstr);
    return len;
}

static void expect_decode_err(const uint8_t *buf, size_t len, int want, const char *needle)
{
    char errstr[512] = "";
    hf_record_t *out = malloc(sizeof *out);
    assert_non_null(out);
    int err = codec_decode(buf, len, out, errstr, sizeof errstr);
    free(out);
    if (err != want)
        fail_msg("decode gave %s (%s), want %s", hf_err_name(err), errstr, hf_err_name(want));
    if (needle && !strstr(errstr, needle))
        fail_msg("errstr \"%s\" does not mention \"%s\"", errstr, needle);
}

/* ---- round trips */

/* The framed record is 0x00, the id big-endian, then exactly the single-object
 * body; it decodes to a record whose single-object encoding is the original's. */
static void round_trip(hf_record_t *r, uint32_t id)
{
    static uint8_t framed[BUF_SIZE], single[BUF_SIZE], again[BUF_SIZE];
    char errstr[512];
    size_t single_len = 0, again_len = 0;
    assert_int_equal(codec_encode(r, single, sizeof single, &single_len, errstr, sizeof errstr),
                     HF_OK);
    size_t len = encode_confluent(r, id, framed);
    assert_int_equal(len, single_len - 10 + CODEC_CONFLUENT_HEADER_LEN);
    assert_int_equal(framed[0], 0x00);
    assert_int_equal(framed[1], (id >> 24) & 0xff);
    assert_int_equal(framed[2], (id >> 16) & 0xff);
    assert_int_equal(framed[3], (id >> 8) & 0xff);
    assert_int_equal(framed[4], id & 0xff);
    assert_memory_equal(framed + 5, single + 10, len - 5);

    hf_record_t *out = calloc(1, sizeof *out);
    assert_non_null(out);
    if (codec_decode(framed, len, out, errstr, sizeof errstr) != HF_OK)
        fail_msg("framed decode: %s", errstr);
    assert_int_equal(out->type, r->type);
    assert_int_equal(codec_encode(out, again, sizeof again, &again_len, errstr, sizeof errstr),
                     HF_OK);
    assert_int_equal(again_len, single_len);
    assert_memory_equal(again, single, single_len);
    free(out);
    free(r);
}

static void test_each_framed_record_round_trips_through_the_resolver(void **state)
{
    round_trip(availability(), 7);
    round_trip(signal_rec(), 8);
    round_trip(ledger(), 9);
    assert_int_equal(resolver_calls, 3);
}

static void test_single_object_records_decode_beside_framed_ones(void **state)
{
    static uint8_t buf[BUF_SIZE];
    char errstr[512];
    size_t len = 0;
    hf_record_t *r = availability(), *out = calloc(1, sizeof *out);
    assert_non_null(out);
    assert_int_equal(codec_encode(r, buf, sizeof buf, &len, errstr, sizeof errstr), HF_OK);
    assert_int_equal(codec_decode(buf, len, out, errstr, sizeof errstr), HF_OK);
    assert_string_equal(out->u.availability.sku, "SKU-1");
    assert_int_equal(resolver_calls, 0); /* the fingerprint needs no registry */
    len = encode_confluent(r, 7, buf);
    memset(out, 0, sizeof *out);
    assert_int_equal(codec_decode(buf, len, out, errstr, sizeof errstr), HF_OK);
    assert_int_equal(out->u.availability.total, 12);
    free(out);
    free(r);
}

static void test_a_framed_record_prints_as_json(void **state)
{
    static uint8_t buf[BUF_SIZE];
    char errstr[512], *json = NULL;
    hf_record_t *r = signal_rec();
    size_t len = encode_confluent(r, 8, buf);
    assert_int_equal(codec_to_json(buf, len, &json, errstr, sizeof errstr), HF_OK);
    if (!strstr(json, "\"type\":\"Signal\"") || !strstr(json, "SKU-2"))
        fail_msg("json %s", json);
    free(json);
    free(r);
}

static void test_a_large_id_keeps_all_four_bytes(void **state)
{
    /* The fake knows only small ids: 0x01020307 is unknown, and says so by number. */
    static uint8_t buf[BUF_SIZE];
    hf_record_t *r = availability();
    size_t len = encode_confluent(r, 0x01020307u, buf);
    assert_memory_equal(buf, "\x00\x01\x02\x03\x07", 5);
    expect_decode_err(buf, len, HF_ERR_UNKNOWN_SCHEMA, "schema id 16909063");
    free(r);
}

/* ---- refusals */

static void test_a_wrong_magic_byte_is_refused(void **state)
{
    static uint8_t buf[BUF_SIZE];
    hf_record_t *r = availability();
    size_t len = encode_confluent(r, 7, buf);
    buf[0] = 0x01;
    expect_decode_err(buf, len, HF_ERR_DECODE, "magic 01");
    buf[0] = 0xc3; /* a single-object magic before a Confluent id: not our header either */
    expect_decode_err(buf, len, HF_ERR_DECODE, NULL);
    assert_int_equal(resolver_calls, 0);
    free(r);
}

static void test_short_and_truncated_framed_records_are_refused(void **state)
{
    static uint8_t buf[BUF_SIZE];
    hf_record_t *r = ledger();
    size_t len = encode_confluent(r, 9, buf);
    for (size_t cut = 1; cut < CODEC_CONFLUENT_HEADER_LEN; cut++) {
        uint8_t *prefix = malloc(cut); /* exactly cut bytes: ASan sees a read past them */
        assert_non_null(prefix);
        memcpy(prefix, buf, cut);
        expect_decode_err(prefix, cut, HF_ERR_DECODE, "shorter than the 5-byte Confluent header");
        free(prefix);
    }
    for (size_t cut = CODEC_CONFLUENT_HEADER_LEN; cut < len; cut++) {
        uint8_t *prefix = malloc(cut);
        assert_non_null(prefix);
        memcpy(prefix, buf, cut);
        expect_decode_err(prefix, cut, HF_ERR_DECODE, NULL);
        free(prefix);
    }
    free(r);
}

static void test_an_unknown_or_unresolvable_id_is_refused_naming_it(void **state)
{
    static uint8_t buf[BUF_SIZE];
    hf_record_t *r = availability();
    size_t len = encode_confluent(r, 12, buf);
    expect_decode_err(buf, len, HF_ERR_UNKNOWN_SCHEMA,
                      "schema id 12: schema registry http://x has no");
    len = encode_confluent(r, 66, buf);
    expect_decode_err(buf, len, HF_ERR_UNKNOWN_SCHEMA, "schema id 66 is registered with a schema");
    len = encode_confluent(r, 99, buf);
    expect_decode_err(buf, len, HF_ERR_IO, "schema id 99: schema registry http://x: Couldn't");
    /* An id of another record type: the body is read as that type, and must fit it. */
    len = encode_confluent(r, 8, buf);
    expect_decode_err(buf, len, HF_ERR_DECODE, NULL);
    free(r);
}

static void test_without_a_resolver_a_framed_record_says_what_to_configure(void **state)
{
    static uint8_t buf[BUF_SIZE];
    hf_record_t *r = availability();
    size_t len = encode_confluent(r, 7, buf);
    codec_set_id_resolver(NULL, &resolver_calls);
    expect_decode_err(buf, len, HF_ERR_UNKNOWN_SCHEMA, "schema id 7, but no schema registry");
    expect_decode_err(buf, len, HF_ERR_UNKNOWN_SCHEMA, "schema_registry_url");
    assert_int_equal(resolver_calls, 0);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_framed_record_round_trips_through_the_resolver,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_object_records_decode_beside_framed_ones, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_framed_record_prints_as_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_large_id_keeps_all_four_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_wrong_magic_byte_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_and_truncated_framed_records_are_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_unknown_or_unresolvable_id_is_refused_naming_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_without_a_resolver_a_framed_record_says_what_to_configure, setup, teardown),
    };
    return cmocka_run_group_tests_name("framing", tests, NULL, NULL);
}
