/* The replication of a deployment's topics (topics_file.h,
 * topics_replication_resolve): the factor from the topics file or from
 * `hfctl topics apply --replication-factor`, min.insync.replicas derived from it,
 * and a missing or impossible factor refused with a message that says what to do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_limits.h"
#include "lib/topics_file.h"

static char errstr[256];

static int resolve(const char *text, int override, topics_replication_t *r)
{
    errstr[0] = '\0';
    *r = (topics_replication_t){-1, -1};
    return topics_replication_resolve(text, override, r, errstr, sizeof errstr);
}

static void test_the_files_factor_applies_without_an_override(void **state)
{
    (void)state;
    topics_replication_t r;
    assert_int_equal(resolve("{\"replication_factor\": 1, \"topics\": []}", 0, &r), HF_OK);
    assert_int_equal(r.factor, 1);
    assert_int_equal(r.min_insync, 1);
    assert_int_equal(resolve("{\"replication_factor\": 3, \"topics\": []}", 0, &r), HF_OK);
    assert_int_equal(r.factor, 3);
    assert_int_equal(r.min_insync, 2);
}

static void test_an_override_beats_the_file(void **state)
{
    (void)state;
    topics_replication_t r;
    assert_int_equal(resolve("{\"replication_factor\": 1}", 3, &r), HF_OK);
    assert_int_equal(r.factor, 3);
    assert_int_equal(r.min_insync, 2);
    /* Down as well as up: a file written for a cluster, applied to one broker. */
    assert_int_equal(resolve("{\"replication_factor\": 3}", 1, &r), HF_OK);
    assert_int_equal(r.factor, 1);
    assert_int_equal(r.min_insync, 1);
}

/* min ISR 2 from a factor of 3: one broker lost, writes go on, no acknowledged
 * write lost. A factor of 2 keeps min ISR 1, or one broker down would stop every
 * write; 5 replicas still need only 2 in sync. */
static void test_min_insync_follows_the_factor(void **state)
{
    (void)state;
    static const int16_t want[HF_REPLICATION_FACTOR_MAX + 1] = {0, 1, 1, 2, 2, 2, 2, 2};
    for (int f = 1; f <= HF_REPLICATION_FACTOR_MAX; f++) {
        topics_replication_t r;
        assert_int_equal(resolve("{}", f, &r), HF_OK);
        assert_int_equal(r.factor, f);
        assert_int_equal(r.min_insync, want[f]);
        assert_true(r.min_insync <= r.factor);
    }
}

static void test_a_missing_or_bad_factor_is_refused(void **state)
{
    (void)state;
    topics_replication_t r;
    assert_int_equal(resolve("{\"topics\": []}", 0, &r), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "replication_factor"));
    assert_non_null(strstr(errstr, "--replication-factor"));
    assert_int_equal(resolve("{\"replication_factor\": \"3\"}", 0, &r), HF_ERR_CONFIG);
    assert_int_equal(resolve("{\"replication_factor\": 0}", 0, &r), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "out of range"));
    assert_int_equal(resolve("{\"replication_factor\": -3}", 0, &r), HF_ERR_CONFIG);
    assert_int_equal(resolve("{\"replication_factor\": 70000}", 0, &r), HF_ERR_CONFIG);
    assert_int_equal(resolve("{}", HF_REPLICATION_FACTOR_MAX + 1, &r), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "[1, 7]"));
    assert_int_equal(resolve("{\"replication_factor\": 3", 0, &r), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "topics file"));
    /* Nothing half-set on a refusal. */
    assert_int_equal(r.factor, -1);
}

/* The repository's own file resolves: one broker by default, 3 with the override
 * the cluster scenarios pass. */
static void test_the_shipped_topics_file_resolves(void **state)
{
    (void)state;
    FILE *f = fopen("topics/topics.json", "r");
    assert_non_null(f);
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    topics_replication_t r;
    assert_int_equal(resolve(text, 0, &r), HF_OK);
    assert_int_equal(r.factor, 1);
    assert_int_equal(resolve(text, 3, &r), HF_OK);
    assert_int_equal(r.min_insync, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_files_factor_applies_without_an_override),
        cmocka_unit_test(test_an_override_beats_the_file),
        cmocka_unit_test(test_min_insync_follows_the_factor),
        cmocka_unit_test(test_a_missing_or_bad_factor_is_refused),
        cmocka_unit_test(test_the_shipped_topics_file_resolves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
