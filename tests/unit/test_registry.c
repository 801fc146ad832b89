/* Unit tests of the schema registry client (processor/registry.h) and of the
 * start-up registration (processor/framing.h), against the in-process stand-in
 * of tests/lib/fake_registry.h: the REST calls and answers of a Confluent
 * registry as its API documents them, not a real registry (none could be run
 * here: docs/SCHEMA_REGISTRY.md). Registering gives one id per schema, a
 * remembered id costs no request, an id registered elsewhere with other
 * whitespace resolves to our fingerprint, the id table is bounded, and an
 * unknown id, an error status and an unreachable registry say so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "config.h"
#include "fake_registry.h"
#include "framing.h"
#include "hf_limits.h"
#include "registry.h"
#include "topics.h"

typedef struct {
    fake_registry_t *fake;
    char url[64];
    registry_t *r;
} fixture_t;

static int setup(void **state)
{
    char errstr[256];
    assert_int_equal(codec_init(errstr, sizeof errstr), HF_OK);
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->fake = fake_registry_start(f->url, sizeof f->url);
    assert_int_equal(registry_new(f->url, 2000, &f->r, errstr, sizeof errstr), HF_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    registry_destroy(f->r);
    fake_registry_stop(f->fake);
    free(f);
    codec_shutdown();
    return 0;
}

static void test_registering_gives_one_id_per_schema_and_remembers_it(void **state)
{
    fixture_t *f = *state;
    char errstr[512];
    uint32_t a = 0, a2 = 0, s = 0;
    uint64_t fp = 0;
    const char *avail = codec_canonical_form(HF_REC_AVAILABILITY);
    assert_int_equal(
        registry_register(f->r, "t.availability-value", avail, &a, errstr, sizeof errstr), HF_OK);
    assert_int_equal(registry_register(f->r, "t.signals-value", codec_canonical_form(HF_REC_SIGNAL),
                                       &s, errstr, sizeof errstr),
                     HF_OK);
    assert_int_equal(
        registry_register(f->r, "t.availability-value", avail, &a2, errstr, sizeof errstr), HF_OK);
    assert_int_equal(a, 1);
    assert_int_equal(s, 2);
    assert_int_equal(a2, a);
    assert_int_equal(fake_registry_subject_id(f->fake, "t.availability-value"), a);
    assert_int_equal(fake_registry_subject_id(f->fake, "t.signals-value"), s);
    assert_int_equal(registry_requests(f->r), 3);
    /* what we registered resolves from memory: no request */
    assert_int_equal(registry_resolve(f->r, a, &fp, errstr, sizeof errstr), HF_OK);
    assert_true(fp == codec_fingerprint(HF_REC_AVAILABILITY));
    assert_int_equal(registry_resolve(f->r, s, &fp, errstr, sizeof errstr), HF_OK);
    assert_true(fp == codec_fingerprint(HF_REC_SIGNAL));
    assert_int_equal(registry_requests(f->r), 3);
    assert_int_equal(fake_registry_requests(f->fake), 3);
}

/* Another producer registered our LedgerEvent with its own formatting: the id
 * is asked once and resolves to the fingerprint of our schema. */
static void test_an_id_registered_elsewhere_is_asked_once(void **state)
{
    fixture_t *f = *state;
    char errstr[512];
    uint64_t fp = 0;
    const char *canonical = codec_canonical_form(HF_REC_LEDGER_EVENT);
    size_t n = strlen(canonical);
    char *spaced = malloc(n * 2 + 1), *p = spaced;
    assert_non_null(spaced);
    for (size_t i = 0; i < n; i++) { /* a space after every ',' and ':' outside strings */
        *p++ = canonical[i];
        if (canonical[i] == ',' || canonical[i] == ':')
            *p++ = ' ';
    }
    *p = '\0';
    fake_registry_put(f->fake, 42, spaced);
    free(spaced);
    assert_int_equal(registry_resolve(f->r, 42, &fp, errstr, sizeof errstr), HF_OK);
    assert_true(fp == codec_fingerprint(HF_REC_LEDGER_EVENT));
    assert_int_equal(registry_resolve(f->r, 42, &fp, errstr, sizeof errstr), HF_OK);
    assert_int_equal(fake_registry_requests(f->fake), 1);
}

static void test_an_unknown_id_and_a_non_avro_schema_are_unknown_schemas(void **state)
{
    fixture_t *f = *state;
    char errstr[512];
    uint64_t fp = 0;
    assert_int_equal(registry_resolve(f->r, 777, &fp, errstr, sizeof errstr),
                     HF_ERR_UNKNOWN_SCHEMA);
    if (!strstr(errstr, "has no schema with this id") || !strstr(errstr, "Schema 777 not found"))
        fail_msg("errstr: %s", errstr);
    /* a Protobuf schema, as a registry shared with other formats holds */
    fake_registry_put(f->fake, 5, "syntax = \"proto3\"; message Signal { string sku = 1; }");
    assert_int_equal(registry_resolve(f->r, 5, &fp, errstr, sizeof errstr), HF_ERR_UNKNOWN_SCHEMA);
    if (!strstr(errstr, "no Avro schema"))
        fail_msg("errstr: %s", errstr);
    /* unknown ids are not remembered: a second ask is a second request */
    size_t before = fake_registry_requests(f->fake);
    assert_int_equal(registry_resolve(f->r, 777, &fp, errstr, sizeof errstr),
                     HF_ERR_UNKNOWN_SCHEMA);
    assert_int_equal(fake_registry_requests(f->fake), before + 1);
}

static void test_an_error_status_carries_the_registrys_message(void **state)
{
    fixture_t *f = *state;
    char errstr[512];
    uint32_t id = 0;
    uint64_t fp = 0;
    fake_registry_fail_with(f->fake, 500);
    assert_int_equal(registry_register(f->r, "x-value", codec_canonical_form(HF_REC_SIGNAL), &id,
                                       errstr, sizeof errstr),
                     HF_ERR_IO);
    if (!strstr(errstr, "answered 500") || !strstr(errstr, "backend data store"))
        fail_msg("errstr: %s", errstr);
    assert_int_equal(registry_resolve(f->r, 3, &fp, errstr, sizeof errstr), HF_ERR_IO);
    fake_registry_fail_with(f->fake, 0);
    /* "string" is an Avro schema but not the object the fake takes: its 422, passed on */
    assert_int_equal(registry_register(f->r, "x-value", "\"string\"", &id, errstr, sizeof errstr),
                     HF_ERR_IO);
    if (!strstr(errstr, "answered 422") || !strstr(errstr, "invalid"))
        fail_msg("errstr: %s", errstr);
    /* text that is no schema at all is refused before anything is sent */
    size_t before = fake_registry_requests(f->fake);
    assert_int_equal(registry_register(f->r, "x-value", "not json", &id, errstr, sizeof errstr),
                     HF_ERR_CONFIG);
    assert_int_equal(fake_registry_requests(f->fake), before);
}

static void test_an_unreachable_registry_is_an_io_error_naming_the_url(void **state)
{
    fixture_t *f = *state;
    char errstr[512], url[80];
    registry_t *dead = NULL;
    uint32_t id = 0;
    /* the fake's port once it is stopped: nothing listens there */
    snprintf(url, sizeof url, "%s/", f->url);
    fake_registry_stop(f->fake);
    f->fake = fake_registry_start(f->url, sizeof f->url); /* teardown stops this one */
    assert_int_equal(registry_new(url, 1000, &dead, errstr, sizeof errstr), HF_OK);
    if (strcmp(url, f->url) == 0)
        skip(); /* the new fake took the old port */
    assert_int_equal(registry_register(dead, "x-value", codec_canonical_form(HF_REC_SIGNAL), &id,
                                       errstr, sizeof errstr),
                     HF_ERR_IO);
    url[strlen(url) - 1] = '\0';
    if (!strstr(errstr, url) || !strstr(errstr, "/subjects/x-value/versions"))
        fail_msg("errstr: %s", errstr);
    registry_destroy(dead);
}

static void test_the_id_table_is_bounded_and_forgets_its_oldest(void **state)
{
    fixture_t *f = *state;
    char errstr[512];
    uint64_t fp = 0;
    const char *sig = codec_canonical_form(HF_REC_SIGNAL);
    char *variant = malloc(strlen(sig) + HF_REGISTRY_IDS_MAX + 2);
    assert_non_null(variant);
    for (uint32_t i = 0; i <= HF_REGISTRY_IDS_MAX; i++) {
        /* the same schema, i spaces in front: another text under another id */
        memset(variant, ' ', i);
        strcpy(variant + i, sig);
        fake_registry_put(f->fake, 100 + i, variant);
    }
    free(variant);
    for (uint32_t i = 0; i <= HF_REGISTRY_IDS_MAX; i++)
        assert_int_equal(registry_resolve(f->r, 100 + i, &fp, errstr, sizeof errstr), HF_OK);
    size_t asked = fake_registry_requests(f->fake);
    assert_int_equal(asked, HF_REGISTRY_IDS_MAX + 1);
    assert_int_equal(registry_resolve(f->r, 100 + HF_REGISTRY_IDS_MAX, &fp, errstr, sizeof errstr),
                     HF_OK);
    assert_int_equal(registry_resolve(f->r, 101, &fp, errstr, sizeof errstr), HF_OK);
    assert_int_equal(fake_registry_requests(f->fake), asked); /* both remembered */
    assert_int_equal(registry_resolve(f->r, 100, &fp, errstr, sizeof errstr), HF_OK);
    assert_int_equal(fake_registry_requests(f->fake), asked + 1); /* the oldest was forgotten */
    assert_true(fp == codec_fingerprint(HF_REC_SIGNAL));
}

/* ---- registration at start (framing.h) */

static void config_for(hf_config_t *cfg, const char *url, const char *framing, const char *stages)
{
    config_defaults(cfg);
    snprintf(cfg->schema_registry_url, sizeof cfg->schema_registry_url, "%s", url);
    snprintf(cfg->output_framing, sizeof cfg->output_framing, "%s", framing);
    snprintf(cfg->stages, sizeof cfg->stages, "%s", stages);
    char errstr[256];
    assert_int_equal(config_check(cfg, errstr, sizeof errstr), HF_OK);
}

static void test_start_registers_the_topics_the_stages_write_and_frames_them(void **state)
{
    fixture_t *f = *state;
    static hf_config_t cfg;
    static uint8_t buf[HF_RECORD_LEN_MAX];
    char errstr[512];
    size_t len = 0;
    uint32_t id = 0;
    topics_set_prefix("ut.");
    config_for(&cfg, f->url, "confluent", "counter,gateway,aggregator");
    assert_int_equal(framing_start(&cfg, true, errstr, sizeof errstr), HF_OK);
    long avail = fake_registry_subject_id(f->fake, "ut.holdfast.availability-value");
    long sig = fake_registry_subject_id(f->fake, "ut.holdfast.signals-value");
    long led = fake_registry_subject_id(f->fake, "ut.holdfast.ledger-value");
    assert_true(avail > 0 && sig > 0 && led > 0 && avail != sig && sig != led);
    assert_int_equal(fake_registry_subject_id(f->fake, "ut.holdfast.stock-levels-value"), -1);
    assert_true(framing_schema_id(topic_name(HF_T_LEDGER), &id));
    assert_int_equal(id, led);

    hf_record_t *r = calloc(1, sizeof *r), *out = calloc(1, sizeof *out);
    assert_non_null(r);
    assert_non_null(out);
    r->type = HF_REC_AVAILABILITY;
    snprintf(r->u.availability.sku, sizeof r->u.availability.sku, "S1");
    r->u.availability.total = 3;
    assert_int_equal(framing_encode(topic_name(HF_T_AVAILABILITY), r, buf, sizeof buf, &len, errstr,
                                    sizeof errstr),
                     HF_OK);
    assert_int_equal(buf[0], 0x00);
    assert_int_equal(((uint32_t)buf[1] << 24) | (buf[2] << 16) | (buf[3] << 8) | buf[4], avail);
    assert_int_equal(codec_decode(buf, len, out, errstr, sizeof errstr), HF_OK);
    assert_int_equal(out->u.availability.total, 3);
    /* a topic that is not framed keeps single-object encoding */
    assert_int_equal(framing_encode(topic_name(HF_T_STOCK_LEVELS), r, buf, sizeof buf, &len, errstr,
                                    sizeof errstr),
                     HF_OK);
    assert_int_equal(buf[0], 0xc3);
    framing_stop();
    /* no resolver any more: the framed record names its id and what to set */
    assert_int_equal(framing_encode(topic_name(HF_T_AVAILABILITY), r, buf, sizeof buf, &len, errstr,
                                    sizeof errstr),
                     HF_OK);
    assert_int_equal(buf[0], 0xc3);
    free(r);
    free(out);
    topics_set_prefix("");
}

static void test_start_registers_only_what_its_stages_write(void **state)
{
    fixture_t *f = *state;
    static hf_config_t cfg;
    char errstr[512];
    uint32_t id = 0;
    config_for(&cfg, f->url, "confluent", "counter,gateway");
    assert_int_equal(framing_start(&cfg, true, errstr, sizeof errstr), HF_OK);
    assert_true(fake_registry_subject_id(f->fake, "holdfast.ledger-value") > 0);
    assert_int_equal(fake_registry_subject_id(f->fake, "holdfast.availability-value"), -1);
    assert_false(framing_schema_id(topic_name(HF_T_AVAILABILITY), &id));
    framing_stop();
    /* single-object with a registry: nothing registered, ids still resolve */
    config_for(&cfg, f->url, "single-object", "aggregator");
    size_t before = fake_registry_requests(f->fake);
    assert_int_equal(framing_start(&cfg, true, errstr, sizeof errstr), HF_OK);
    assert_int_equal(fake_registry_requests(f->fake), before);
    assert_false(framing_schema_id(topic_name(HF_T_AVAILABILITY), &id));
    framing_stop();
}

static void test_start_against_an_unreachable_registry_says_what_to_do(void **state)
{
    fixture_t *f = *state;
    static hf_config_t cfg;
    char errstr[512];
    fake_registry_fail_with(f->fake, 503);
    config_for(&cfg, f->url, "confluent", "aggregator");
    assert_int_equal(framing_start(&cfg, true, errstr, sizeof errstr), HF_ERR_IO);
    if (!strstr(errstr, "holdfast.availability") || !strstr(errstr, "answered 503") ||
        !strstr(errstr, "Start the registry or correct schema_registry_url"))
        fail_msg("errstr: %s", errstr);
    config_for(&cfg, "http://127.0.0.1:1", "confluent", "gateway");
    assert_int_equal(framing_start(&cfg, true, errstr, sizeof errstr), HF_ERR_IO);
    if (!strstr(errstr, "http://127.0.0.1:1/subjects/holdfast.ledger-value/versions"))
        fail_msg("errstr: %s", errstr);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_registering_gives_one_id_per_schema_and_remembers_it),
        T(test_an_id_registered_elsewhere_is_asked_once),
        T(test_an_unknown_id_and_a_non_avro_schema_are_unknown_schemas),
        T(test_an_error_status_carries_the_registrys_message),
        T(test_an_unreachable_registry_is_an_io_error_naming_the_url),
        T(test_the_id_table_is_bounded_and_forgets_its_oldest),
        T(test_start_registers_the_topics_the_stages_write_and_frames_them),
        T(test_start_registers_only_what_its_stages_write),
        T(test_start_against_an_unreachable_registry_says_what_to_do),
    };
#undef T
    return cmocka_run_group_tests_name("registry", tests, NULL, NULL);
}
