/* Unit tests of the HTTP front's pure parts (processor/http/http_api.c): route
 * matching with {params}, the status each reply outcome gets per request kind —
 * the table docs/HTTP.md promises — and the one error shape, RFC 9457 problem
 * details. The whole front, with a broker, is tests/http/test_http.sh; the
 * document as a contract, tests/http/test_contract.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "http/http_api_int.h"

/* A context with only what the answer helpers read: the config's Retry-After. */
static hf_config_t test_cfg = {.http_retry_after_s = 7};
static http_ctx_t test_ctx = {.cfg = &test_cfg};

static json_t *answered_body(const httpd_resp_t *resp)
{
    assert_non_null(resp->body_owned);
    json_t *o = json_loads(resp->body_owned, 0, NULL);
    assert_non_null(o);
    return o;
}

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
    /* A payment event's answer is what payment_policy made of it. */
    assert_int_equal(http_status_for(HF_REC_PAYMENT_EVENT, HF_REPLY_HELD, 200), 200);
    assert_int_equal(http_status_for(HF_REC_PAYMENT_EVENT, HF_REPLY_COMMITTED, 200), 200);
    assert_int_equal(http_status_for(HF_REC_PAYMENT_EVENT, HF_REPLY_RELEASED, 200), 200);
    assert_int_equal(http_status_for(HF_REC_PAYMENT_EVENT, HF_REPLY_EXPIRED, 200), 410);
    const hf_rec_type_t kinds[] = {HF_REC_RESERVE, HF_REC_COMMIT, HF_REC_RELEASE, HF_REC_EXTEND,
                                   HF_REC_PAYMENT_EVENT};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_REJECTED_INSUFFICIENT, 200), 409);
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_CONFLICT, 200), 409);
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_REJECTED_INVALID, 200), 422);
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_NOT_FOUND, 200), 404);
        assert_int_equal(http_status_for(kinds[i], HF_REPLY_BUSY, 200), 503);
    }
}

static void test_errors_are_problem_details(void **state)
{
    (void)state;
    httpd_resp_t resp = {.status = 500};
    uint64_t invalid0 = atomic_load(&test_ctx.invalid);
    http_error(&test_ctx, &resp, 422, "invalid_field", "'%s' must be %d", "qty", 1);
    assert_int_equal(resp.status, 422);
    assert_string_equal(resp.content_type, "application/problem+json");
    assert_int_equal(resp.retry_after_s, 0);
    json_t *o = answered_body(&resp);
    assert_string_equal(json_string_value(json_object_get(o, "type")),
                        "urn:holdfast:problem:invalid_field");
    assert_string_equal(json_string_value(json_object_get(o, "code")), "invalid_field");
    assert_string_equal(json_string_value(json_object_get(o, "detail")), "'qty' must be 1");
    assert_int_equal(json_integer_value(json_object_get(o, "status")), 422);
    assert_string_equal(json_string_value(json_object_get(o, "title")),
                        http_problem_title("invalid_field", 422));
    assert_null(json_object_get(o, "error")); /* the old shape is gone */
    assert_int_equal(json_object_size(o), 5);
    assert_int_equal(atomic_load(&test_ctx.invalid), invalid0 + 1);
    json_decref(o);
    free(resp.body_owned);
}

static void test_503_problems_carry_retry_after(void **state)
{
    (void)state;
    httpd_resp_t resp = {.status = 500};
    http_error(&test_ctx, &resp, 503, "timeout", "slow");
    assert_int_equal(resp.status, 503);
    assert_int_equal(resp.retry_after_s, 7);
    free(resp.body_owned);
}

static void test_problem_detail_is_printable_ascii(void **state)
{
    (void)state;
    json_t *o = http_problem_new(404, "no_route", "no route GET /\xc3\x28\x01x");
    assert_non_null(o);
    const char *detail = json_string_value(json_object_get(o, "detail"));
    for (const char *c = detail; *c; c++)
        assert_true(*c >= 0x20 && *c < 0x7f);
    json_decref(o);
    /* A code outside the table still has a title: the status's reason phrase. */
    assert_string_equal(http_problem_title("no_such_code", 404), "Not Found");
}

static hf_reply_t reply_of(hf_reply_outcome_t outcome, const char *message)
{
    hf_reply_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.reservation_id, sizeof r.reservation_id, "r-1");
    snprintf(r.idempotency_key, sizeof r.idempotency_key, "k-1");
    snprintf(r.message, sizeof r.message, "%s", message);
    r.outcome = outcome;
    r.replied_at_ms = 1700000000000;
    return r;
}

static void test_pipeline_refusals_are_problems_with_the_reply(void **state)
{
    (void)state;
    hf_reply_t r = reply_of(HF_REPLY_NOT_FOUND, "no such reservation");
    httpd_resp_t resp = {.status = 500};
    http_answer_reply(&test_ctx, &resp, http_status_for(HF_REC_COMMIT, r.outcome, 200), &r);
    assert_int_equal(resp.status, 404);
    assert_string_equal(resp.content_type, "application/problem+json");
    json_t *o = answered_body(&resp);
    assert_string_equal(json_string_value(json_object_get(o, "code")), "not_found");
    assert_string_equal(json_string_value(json_object_get(o, "outcome")), "NOT_FOUND");
    assert_string_equal(json_string_value(json_object_get(o, "detail")), "no such reservation");
    assert_string_equal(json_string_value(json_object_get(o, "reservation_id")), "r-1");
    assert_int_equal(json_integer_value(json_object_get(o, "status")), 404);
    assert_true(json_is_integer(json_object_get(o, "replied_at_ms")));
    json_decref(o);
    free(resp.body_owned);
}

static void test_pipeline_successes_stay_the_reply(void **state)
{
    (void)state;
    hf_reply_t r = reply_of(HF_REPLY_HELD, "");
    httpd_resp_t resp = {.status = 500};
    http_answer_reply(&test_ctx, &resp, http_status_for(HF_REC_RESERVE, r.outcome, 201), &r);
    assert_int_equal(resp.status, 201);
    assert_null(resp.content_type); /* application/json */
    json_t *o = answered_body(&resp);
    assert_string_equal(json_string_value(json_object_get(o, "outcome")), "HELD");
    assert_null(json_object_get(o, "type"));
    json_decref(o);
    free(resp.body_owned);
}

static void test_outcome_codes(void **state)
{
    (void)state;
    assert_string_equal(http_outcome_code(HF_REPLY_REJECTED_INSUFFICIENT), "insufficient");
    assert_string_equal(http_outcome_code(HF_REPLY_CONFLICT), "conflict");
    assert_string_equal(http_outcome_code(HF_REPLY_REJECTED_INVALID), "rejected_invalid");
    assert_string_equal(http_outcome_code(HF_REPLY_NOT_FOUND), "not_found");
    assert_string_equal(http_outcome_code(HF_REPLY_BUSY), "busy");
    assert_string_equal(http_outcome_code(HF_REPLY_EXPIRED), "expired");
    assert_string_equal(http_outcome_code(HF_REPLY_COMMITTED), "wrong_state");
    /* A BUSY answer is a 503 problem with Retry-After. */
    hf_reply_t r = reply_of(HF_REPLY_BUSY, "busy");
    httpd_resp_t resp = {.status = 500};
    http_answer_reply(&test_ctx, &resp, http_status_for(HF_REC_RESERVE, r.outcome, 201), &r);
    assert_int_equal(resp.status, 503);
    assert_int_equal(resp.retry_after_s, 7);
    free(resp.body_owned);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_params_are_captured),
        cmocka_unit_test(test_route_mismatches),
        cmocka_unit_test(test_statuses_follow_the_table),
        cmocka_unit_test(test_errors_are_problem_details),
        cmocka_unit_test(test_503_problems_carry_retry_after),
        cmocka_unit_test(test_problem_detail_is_printable_ascii),
        cmocka_unit_test(test_pipeline_refusals_are_problems_with_the_reply),
        cmocka_unit_test(test_pipeline_successes_stay_the_reply),
        cmocka_unit_test(test_outcome_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
