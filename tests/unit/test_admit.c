/* Admission of input records (processor/admit.c) against the real stage
 * tables: size caps before decoding, the key's murmur2 partition against the
 * one a record arrived on, and which record type each input topic may carry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "admit.h"
#include "codec.h"
#include "hf_limits.h"
#include "kafka.h"
#include "stages.h"
#include "topics.h"

#define PARTS 8

static uint8_t buf[HF_INPUT_VALUE_BYTES_MAX * 4];
static hf_record_t rec;

static int setup(void **state)
{
    char errstr[256];
    assert_int_equal(codec_init(errstr, sizeof errstr), HF_OK);
    return 0;
}

static size_t encode(const hf_record_t *r)
{
    size_t len = 0;
    char errstr[256];
    assert_int_equal(codec_encode(r, buf, sizeof buf, &len, errstr, sizeof errstr), HF_OK);
    return len;
}

static admit_t admit_of(const char *stage)
{
    admit_t a;
    const stage_def_t *def = stages_find(stage);
    assert_non_null(def);
    admit_init(&a, def);
    for (size_t i = 0; i < def->input_topics_count; i++)
        admit_set_partitions(&a, i, PARTS);
    return a;
}

static size_t input_index(const admit_t *a, hf_topic_id_t topic)
{
    for (size_t i = 0; i < a->def->input_topics_count; i++)
        if (a->def->input_topics[i] == topic)
            return i;
    fail_msg("%s is no input of %s", topic_name(topic), a->def->name);
    return 0;
}

/* Admits r as it would arrive on topic, keyed key, on the key's own partition
 * plus shift. */
static admit_verdict_t admit_on(const admit_t *a, hf_topic_id_t topic, const char *key,
                                int32_t shift, const hf_record_t *r, char *why, size_t why_size)
{
    size_t len = encode(r);
    int32_t p = (kafka_partition_for_key(key, strlen(key), PARTS) + shift) % PARTS;
    const stage_handler_t *h = NULL;
    admit_verdict_t v = admit_record(a, input_index(a, topic), p, key, strlen(key), buf, len, &rec,
                                     &h, why, why_size);
    assert_true((v == ADMIT_OK) == (h != NULL));
    return v;
}

static hf_record_t hold(void)
{
    hf_record_t r = {.type = HF_REC_HOLD};
    snprintf(r.u.hold.reservation_id, sizeof r.u.hold.reservation_id, "r1");
    snprintf(r.u.hold.warehouse_id, sizeof r.u.hold.warehouse_id, "W1");
    snprintf(r.u.hold.sku, sizeof r.u.hold.sku, "SKU-A");
    r.u.hold.qty = 1;
    return r;
}

static void test_each_counter_topic_accepts_only_its_record_types(void **state)
{
    admit_t a = admit_of("counter");
    char why[HF_TEXT_LEN_MAX + 1];
    hf_record_t h = hold();
    assert_int_equal(admit_on(&a, HF_T_COUNTER_COMMANDS, "W1|SKU-A", 0, &h, why, sizeof why),
                     ADMIT_OK);
    assert_int_equal(admit_on(&a, HF_T_STOCK_FEED, "W1|SKU-A", 0, &h, why, sizeof why),
                     ADMIT_REFUSED);
    assert_non_null(strstr(why, "a Hold record may not come from holdfast.stock-feed"));

    hf_record_t rel = {.type = HF_REC_RELEASE_HOLD};
    snprintf(rel.u.release_hold.reservation_id, sizeof rel.u.release_hold.reservation_id, "r1");
    assert_int_equal(admit_on(&a, HF_T_STOCK_FEED, "W1|SKU-A", 0, &rel, why, sizeof why),
                     ADMIT_REFUSED);
    assert_non_null(strstr(why, "ReleaseHold"));
    assert_non_null(strstr(why, "holdfast.stock-feed"));

    hf_record_t feed = {.type = HF_REC_STOCK_FEED};
    snprintf(feed.u.stock_feed.warehouse_id, sizeof feed.u.stock_feed.warehouse_id, "W1");
    snprintf(feed.u.stock_feed.sku, sizeof feed.u.stock_feed.sku, "SKU-A");
    assert_int_equal(admit_on(&a, HF_T_STOCK_FEED, "W1|SKU-A", 0, &feed, why, sizeof why),
                     ADMIT_OK);
    /* Documented: a feed may be ordered with the holds on the commands topic. */
    assert_int_equal(admit_on(&a, HF_T_COUNTER_COMMANDS, "W1|SKU-A", 0, &feed, why, sizeof why),
                     ADMIT_OK);
}

static void test_a_counter_result_is_accepted_only_from_the_counter_results_topic(void **state)
{
    admit_t a = admit_of("gateway");
    char why[HF_TEXT_LEN_MAX + 1];
    hf_record_t cr = {.type = HF_REC_COUNTER_RESULT};
    snprintf(cr.u.counter_result.reservation_id, sizeof cr.u.counter_result.reservation_id, "r1");
    assert_int_equal(admit_on(&a, HF_T_COUNTER_RESULTS, "r1", 0, &cr, why, sizeof why), ADMIT_OK);
    assert_int_equal(admit_on(&a, HF_T_REQUESTS, "r1", 0, &cr, why, sizeof why), ADMIT_REFUSED);
    assert_non_null(strstr(why, "a CounterResult record may not come from holdfast.requests"));

    hf_record_t res = {.type = HF_REC_RESERVE};
    snprintf(res.u.reserve.reservation_id, sizeof res.u.reserve.reservation_id, "r1");
    assert_int_equal(admit_on(&a, HF_T_REQUESTS, "r1", 0, &res, why, sizeof why), ADMIT_OK);
    assert_int_equal(admit_on(&a, HF_T_COUNTER_RESULTS, "r1", 0, &res, why, sizeof why),
                     ADMIT_REFUSED);
}

static void test_every_table_row_names_an_input_topic_of_its_stage(void **state)
{
    const char *names[] = {"counter", "gateway", "aggregator", "relay"};
    for (size_t s = 0; s < sizeof names / sizeof names[0]; s++) {
        const stage_def_t *def = stages_find(names[s]);
        assert_non_null(def);
        for (size_t i = 0; i < def->handlers_count; i++) {
            bool input = false;
            for (size_t t = 0; t < def->input_topics_count; t++)
                input |= def->handlers[i].topic == def->input_topics[t];
            if (!input)
                fail_msg("%s: row %zu names %s, not an input", names[s], i,
                         topic_name(def->handlers[i].topic));
        }
    }
}

static void test_a_record_off_its_keys_partition_is_misrouted_but_still_decoded(void **state)
{
    admit_t a = admit_of("gateway");
    char why[HF_TEXT_LEN_MAX + 1];
    hf_record_t res = {.type = HF_REC_RESERVE};
    snprintf(res.u.reserve.reservation_id, sizeof res.u.reserve.reservation_id, "r-key");
    for (int32_t shift = 1; shift < PARTS; shift++) {
        memset(&rec, 0, sizeof rec);
        assert_int_equal(admit_on(&a, HF_T_REQUESTS, "r-key", shift, &res, why, sizeof why),
                         ADMIT_MISROUTED);
        assert_int_equal(rec.type, HF_REC_RESERVE); /* the stage may answer it */
        assert_string_equal(rec.u.reserve.reservation_id, "r-key");
        assert_non_null(strstr(why, "murmur2"));
    }
    /* Where the task forwards it: the partition admission would have admitted it on. */
    int32_t home = admit_partition_for(&a, 0, "r-key", 5);
    assert_int_equal(home, kafka_partition_for_key("r-key", 5, PARTS));
    memset(&rec, 0, sizeof rec);
    assert_int_equal(admit_on(&a, HF_T_REQUESTS, "r-key", 0, &res, why, sizeof why), ADMIT_OK);
    /* Undecodable and misrouted: refused, nothing to answer. */
    int32_t wrong = (kafka_partition_for_key("r-key", 5, PARTS) + 1) % PARTS;
    const stage_handler_t *h = NULL;
    assert_int_equal(admit_record(&a, 0, wrong, "r-key", 5, "\xC3\x01junkjunkjunk", 14, &rec, &h,
                                  why, sizeof why),
                     ADMIT_REFUSED);
    /* Counter side: a pair key off its partition. */
    admit_t c = admit_of("counter");
    hf_record_t hd = hold();
    assert_int_equal(admit_on(&c, HF_T_COUNTER_COMMANDS, "W1|SKU-A", 3, &hd, why, sizeof why),
                     ADMIT_MISROUTED);
    assert_non_null(strstr(why, "holdfast.counter-commands"));
}

static void test_oversize_empty_and_keyless_records_are_refused_before_decoding(void **state)
{
    admit_t a = admit_of("gateway");
    char why[HF_TEXT_LEN_MAX + 1];
    const stage_handler_t *h = NULL;
    int32_t p = kafka_partition_for_key("r1", 2, PARTS);
    memset(buf, 'x', sizeof buf);
    assert_int_equal(admit_record(&a, 0, p, "r1", 2, buf, HF_INPUT_VALUE_BYTES_MAX + 1, &rec, &h,
                                  why, sizeof why),
                     ADMIT_REFUSED);
    assert_non_null(strstr(why, "value of 16385 bytes"));
    assert_non_null(strstr(why, "HF_INPUT_VALUE_BYTES_MAX"));

    static char long_key[HF_INPUT_KEY_BYTES_MAX + 2];
    memset(long_key, 'k', HF_INPUT_KEY_BYTES_MAX + 1);
    int32_t pk = kafka_partition_for_key(long_key, HF_INPUT_KEY_BYTES_MAX + 1, PARTS);
    assert_int_equal(admit_record(&a, 0, pk, long_key, HF_INPUT_KEY_BYTES_MAX + 1, buf, 10, &rec,
                                  &h, why, sizeof why),
                     ADMIT_REFUSED);
    assert_non_null(strstr(why, "HF_INPUT_KEY_BYTES_MAX"));

    assert_int_equal(admit_record(&a, 0, 0, "", 0, buf, 10, &rec, &h, why, sizeof why),
                     ADMIT_REFUSED);
    assert_non_null(strstr(why, "needs a key"));
    assert_int_equal(admit_record(&a, 0, p, "r1", 2, NULL, 0, &rec, &h, why, sizeof why),
                     ADMIT_REFUSED);
    assert_non_null(strstr(why, "empty value"));

    /* At the cap exactly, the size check lets it through (to the decoder). */
    assert_int_equal(
        admit_record(&a, 0, p, "r1", 2, buf, HF_INPUT_VALUE_BYTES_MAX, &rec, &h, why, sizeof why),
        ADMIT_REFUSED);
    assert_null(strstr(why, "exceeds"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_counter_topic_accepts_only_its_record_types),
        cmocka_unit_test(test_a_counter_result_is_accepted_only_from_the_counter_results_topic),
        cmocka_unit_test(test_every_table_row_names_an_input_topic_of_its_stage),
        cmocka_unit_test(test_a_record_off_its_keys_partition_is_misrouted_but_still_decoded),
        cmocka_unit_test(test_oversize_empty_and_keyless_records_are_refused_before_decoding),
    };
    return cmocka_run_group_tests_name("admission of input records", tests, setup, NULL);
}
