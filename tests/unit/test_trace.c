/* Unit tests of the W3C traceparent module (common/trace.h): what the task loop
 * propagates and what it ignores. A value that is valid by the W3C grammar
 * parses and formats back to the same text; every way of being almost right
 * (uppercase, a zero id, version ff, a wrong length or separator) is refused,
 * since the task loop drops a refused header instead of propagating it; and a
 * child span keeps the trace-id and flags while its parent-id is new. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "trace.h"

static const char valid[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

static bool parses(const char *text)
{
    trace_ctx_t tc;
    return trace_parse(text, strlen(text), &tc);
}

static void test_a_valid_value_parses_and_formats_back_unchanged(void **state)
{
    trace_ctx_t tc;
    assert_int_equal(strlen(valid), TRACE_PARENT_LEN);
    assert_true(trace_parse(valid, strlen(valid), &tc));
    assert_int_equal(tc.trace_id[0], 0x4b);
    assert_int_equal(tc.trace_id[15], 0x36);
    assert_int_equal(tc.parent_id[0], 0x00);
    assert_int_equal(tc.parent_id[7], 0xb7);
    assert_int_equal(tc.flags, 0x01);
    char out[TRACE_PARENT_LEN + 1];
    trace_format(&tc, out);
    assert_string_equal(out, valid);

    /* Not sampled, and flags the W3C text has not named yet: kept as they are. */
    assert_true(parses("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
    const char *other = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe";
    assert_true(trace_parse(other, strlen(other), &tc));
    assert_int_equal(tc.flags, 0xfe);
}

static void test_only_len_bytes_are_read(void **state)
{
    /* Kafka header values are not NUL-terminated. */
    char buf[80];
    snprintf(buf, sizeof buf, "%sXYZ", valid);
    trace_ctx_t tc;
    assert_true(trace_parse(buf, TRACE_PARENT_LEN, &tc));
    assert_false(trace_parse(buf, TRACE_PARENT_LEN - 1, &tc));
    assert_false(trace_parse(NULL, 0, &tc));
}

static void test_malformed_values_are_refused_and_leave_the_output_alone(void **state)
{
    static const char *const bad[] = {
        "",
        "00",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  /* uppercase trace-id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",  /* uppercase parent-id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",  /* uppercase flags */
        "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  /* uppercase version */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  /* zero trace-id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  /* zero parent-id */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  /* version ff */
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",   /* short trace-id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",   /* short parent-id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",   /* short flags */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", /* version 00 is 55 */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-010",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* separators */
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", /* not hex */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", /* later version, no '-' */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        trace_ctx_t tc;
        memset(&tc, 0xab, sizeof tc);
        if (trace_parse(bad[i], strlen(bad[i]), &tc))
            fail_msg("accepted '%s'", bad[i]);
        for (size_t b = 0; b < sizeof tc.trace_id; b++)
            assert_int_equal(tc.trace_id[b], 0xab);
    }
}

static void test_a_later_version_is_read_as_the_w3c_text_says(void **state)
{
    trace_ctx_t tc;
    const char *v1 = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-what-comes-next";
    assert_true(trace_parse(v1, strlen(v1), &tc));
    assert_int_equal(tc.flags, 0x01); /* only the sampled bit is known to mean the same */
    char out[TRACE_PARENT_LEN + 1];
    trace_format(&tc, out);
    assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    assert_true(parses("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
}

static void test_a_child_keeps_trace_id_and_flags_and_gets_a_new_parent_id(void **state)
{
    trace_ctx_t parent, child, grandchild;
    assert_true(trace_parse(valid, strlen(valid), &parent));
    trace_child(&parent, &child);
    assert_memory_equal(child.trace_id, parent.trace_id, sizeof child.trace_id);
    assert_int_equal(child.flags, parent.flags);
    assert_memory_not_equal(child.parent_id, parent.parent_id, sizeof child.parent_id);
    trace_child(&child, &grandchild);
    assert_memory_equal(grandchild.trace_id, parent.trace_id, sizeof child.trace_id);
    assert_memory_not_equal(grandchild.parent_id, child.parent_id, sizeof child.parent_id);

    /* What a child writes is itself a valid value with the new parent-id. */
    char out[TRACE_PARENT_LEN + 1];
    trace_format(&child, out);
    trace_ctx_t back;
    assert_true(trace_parse(out, strlen(out), &back));
    assert_memory_equal(back.parent_id, child.parent_id, sizeof back.parent_id);
    assert_memory_equal(out, valid, 36); /* "00-<trace-id>-" */
    assert_memory_not_equal(out + 36, valid + 36, 16);
    assert_string_equal(out + 52, "-01");
}

static void test_span_ids_are_not_zero_and_do_not_repeat(void **state)
{
    enum { n = 4096 };
    static uint64_t seen[n];
    for (size_t i = 0; i < n; i++) {
        uint8_t id[8];
        trace_span_id_new(id);
        memcpy(&seen[i], id, sizeof id);
        assert_true(seen[i] != 0);
        for (size_t j = 0; j < i; j++)
            assert_true(seen[j] != seen[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_valid_value_parses_and_formats_back_unchanged),
        cmocka_unit_test(test_only_len_bytes_are_read),
        cmocka_unit_test(test_malformed_values_are_refused_and_leave_the_output_alone),
        cmocka_unit_test(test_a_later_version_is_read_as_the_w3c_text_says),
        cmocka_unit_test(test_a_child_keeps_trace_id_and_flags_and_gets_a_new_parent_id),
        cmocka_unit_test(test_span_ids_are_not_zero_and_do_not_repeat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
