/* Unit tests of the HTTP front's pure parts (processor/http/http_api.c): route
 * matching with {params}, and the status each reply outcome gets per request
 * kind — the table docs/HTTP.md promises. The whole front, with a broker, is
 * tests/http/test_http.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "http/http_api_int.h"

static void test_route_params_are_captured(void **state)
{
    (void)state;
    http_call_t c;
    memset(&c, 0, sizeof c);
    assert_true(
        http_route_match("/v1/reservations/{id}/commit", "/v1/reservations/r-1/commit", &c));
    assert_string_equal(c.params[0], "r-1");
    memset(&c, 0, sizeof c);
    assert_true(http_route_match("/v1/reservations", "/v1/reservations", &c));
    assert_null(c.params[0]);
    memset(&c, 0, sizeof c);
    assert_true(http_route_match("/v1/availability/{sku}", "/v1/availability/SKU-00001", &c));
    assert_string_equal(c.params[0], "SKU-00001");
}

static void test_route_mismatches(void **state)
{
    (void)state;
    http_call_t c;
    const char *misses[][2] = {
        {"/v1/reservations/{id}", "/v1/reservations/"},    /* empty segment */
        {"/v1/reservations/{id}", "/v1/reservations/a/b"}, /* one segment only */
        {"/v1/reservations/{id}/commit", "/v1/reservations/a/commi"},
        {"/v1/reservations/{id}/commit", "/v1/reservations/a/commits"},
        {"/v1/reservations", "/v1/reservations/"},
        {"/v1/reservations", "/v1/reservation"},
        {"/healthz", "/healthz/x"},
    };
    for (size_t i = 0; i < sizeof misses / sizeof misses[0]; i++) {
        memset(&c, 0, sizeof c);
        if (http_route_match(misses[i][0], misses[i][1], &c))
            fail_msg("%s matched %s", misses[i][0], misses[i][1]);
    }
    /* A segment longer than a parameter may be is no match (not a truncation). */
    char path[512] = "/v1/reservations/";
    memset(path + strlen(path), 'x', sizeof c.param_buf[0]);
    memset(&c, 0, sizeof c);
    assert_false(http_route_match("/v1/reservations/{id}", path, &c));
}

static void test_statuses_follow_the_table(void **state)
{
    (void)state;
    /* Each request kind's success outcome gets its success status. */
    assert_int_equal(http_status_for(HF_REC_RESERVE, HF_REPLY_HELD, 201), 201);
    assert_int_equal(http_status_for(HF_REC_EXTEND, HF_REPLY_HELD, 200), 200);
    assert_int_equal(http_status_for(HF_REC_COMMIT, HF_REPLY_COMMITTED, 200), 200);
    assert_int_equal(http_status_for(HF_REC_RELEASE, HF_REPLY_RELEASED, 200), 200);
    assert_int_equal(http_status_for(HF_REC_RELEASE, HF_REPLY_EXPIRED, 200), 200);
    /* Another request's success is a conflict: a commit answered RELEASED did not
     * commit, a release answered COMMITTED did not release. */
    assert_int_equal(http_status_for(HF_REC_COMMIT, HF_REPLY_RELEASED, 200), 409);
    assert_int_equal(http_status_for(HF_REC_RELEASE, HF_REPLY_COMMITTED, 200), 409);
    assert_int_equal(http_status_for(HF_REC_COMMIT, HF_REPLY_HELD, 200), 409);
    assert_int_equal(http_status_for(HF_REC_COMMIT, HF_REPLY_EXPIRED, 200), 410);
    const hf_rec_type_t kinds[] = {HF_REC_RESERVE, HF_REC_COMMIT, HF_REC_RELEASE, HF_REC_EXTEND};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_REJECTED_INSUFFICIENT, 200), 409);
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_CONFLICT, 200), 409);
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_REJECTED_INVALID, 200), 422);
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_NOT_FOUND, 200), 404);
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_BUSY, 200), 503);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_params_are_captured),
        cmocka_unit_test(test_route_mismatches),
        cmocka_unit_test(test_statuses_follow_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
