/* Unit tests of the payment-webhook signature check (processor/http/webhook_sig.c),
 * the only thing between a payment provider's HTTP call and a Commit. They prove
 * that a genuine signature passes (against vectors computed outside holdfast with
 * `openssl dgst -sha256 -hmac`), that any change to body, timestamp or secret
 * fails, that rotation and the Stripe header's leniencies work, that the replay
 * window holds exactly at its edges, and that each refusal has its own result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "http/webhook_sig.h"

#define SECRET     "whsec_test_secret_0123456789"
#define SECRET_OLD "whsec_previous_secret_abcdef"
#define T0         1700000000LL
#define TOL_S      300

/* printf '%s' '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test_secret_0123456789 */
#define VECTOR_BODY "{\"a\":1}"
#define VECTOR_MAC  "10fb0e5eb2c2204d471e7d252958fb5af663638b8d24fc8dc03090a74bcc366c"
/* printf '1700000000.ab\0cd' | openssl dgst -sha256 -hmac whsec_test_secret_0123456789 */
static const char nul_body[] = {'a', 'b', '\0', 'c', 'd'};
#define NUL_BODY_MAC "355492a9fb0a107823fb8eb80392d3dfd27dbf558d66aa6758d7f574dc8e80e0"

static webhook_secrets_t secrets_of(const char *first, const char *second)
{
    webhook_secrets_t secrets;
    char errstr[256];
    webhook_secrets_init(&secrets);
    if (first && webhook_secrets_add(&secrets, first, errstr, sizeof errstr) != HF_OK)
        fail_msg("add: %s", errstr);
    if (second && webhook_secrets_add(&secrets, second, errstr, sizeof errstr) != HF_OK)
        fail_msg("add: %s", errstr);
    return secrets;
}

static webhook_sig_result_t verify_at(const webhook_secrets_t *secrets, const char *header,
                                      const char *body, int64_t now_s, char *why, size_t why_size)
{
    return webhook_sig_verify(secrets, header, body, strlen(body), now_s, TOL_S, why, why_size);
}

/* The v1 hex a secret gives body at t_s (from webhook_sig_sign's header). */
static void v1_of(const char *secret, int64_t t_s, const char *body, char hex[65])
{
    char header[WEBHOOK_SIG_HEADER_SIZE];
    assert_int_equal(webhook_sig_sign(secret, t_s, body, strlen(body), header, sizeof header),
                     HF_OK);
    const char *v1 = strstr(header, ",v1=");
    assert_non_null(v1);
    assert_int_equal(strlen(v1 + 4), 64);
    memcpy(hex, v1 + 4, 65);
}

static void test_openssl_vector_verifies_and_sign_writes_it(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    char why[256];
    const char *header = "t=1700000000,v1=" VECTOR_MAC;
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0, why, sizeof why), WEBHOOK_SIG_OK);
    assert_non_null(strstr(why, "secret 1 of 1"));

    char signed_header[WEBHOOK_SIG_HEADER_SIZE];
    assert_int_equal(webhook_sig_sign(SECRET, T0, VECTOR_BODY, strlen(VECTOR_BODY), signed_header,
                                      sizeof signed_header),
                     HF_OK);
    assert_string_equal(signed_header, header);
}

static void test_body_is_raw_bytes_not_a_c_string(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    const char *header = "t=1700000000,v1=" NUL_BODY_MAC;
    assert_int_equal(
        webhook_sig_verify(&secrets, header, nul_body, sizeof nul_body, T0, TOL_S, NULL, 0),
        WEBHOOK_SIG_OK);
    /* The same bytes cut at the NUL are another body. */
    assert_int_equal(webhook_sig_verify(&secrets, header, nul_body, 2, T0, TOL_S, NULL, 0),
                     WEBHOOK_SIG_MISMATCH);
}

static void test_signed_header_verifies_for_any_body_and_time(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    const char *bodies[] = {"", "{}", "{\"id\":\"evt_1\",\"type\":\"payment_intent.succeeded\"}"};
    const int64_t times[] = {0, 1, T0, 4102444800LL};
    for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++)
        for (size_t t = 0; t < sizeof times / sizeof times[0]; t++) {
            char header[WEBHOOK_SIG_HEADER_SIZE];
            assert_int_equal(webhook_sig_sign(SECRET, times[t], bodies[b], strlen(bodies[b]),
                                              header, sizeof header),
                             HF_OK);
            assert_int_equal(verify_at(&secrets, header, bodies[b], times[t], NULL, 0),
                             WEBHOOK_SIG_OK);
        }
    /* An empty POST may come as a NULL body. */
    char header[WEBHOOK_SIG_HEADER_SIZE];
    assert_int_equal(webhook_sig_sign(SECRET, T0, NULL, 0, header, sizeof header), HF_OK);
    assert_int_equal(webhook_sig_verify(&secrets, header, NULL, 0, T0, TOL_S, NULL, 0),
                     WEBHOOK_SIG_OK);
    assert_int_equal(webhook_sig_verify(&secrets, header, "x", 1, T0, TOL_S, NULL, 0),
                     WEBHOOK_SIG_MISMATCH);
}

static void test_wrong_secret_is_a_mismatch(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of("whsec_some_other_secret_xyz", NULL);
    char why[256];
    assert_int_equal(
        verify_at(&secrets, "t=1700000000,v1=" VECTOR_MAC, VECTOR_BODY, T0, why, sizeof why),
        WEBHOOK_SIG_MISMATCH);
    assert_non_null(strstr(why, "secret"));
    assert_null(strstr(why, VECTOR_MAC));
}

static void test_any_changed_byte_or_timestamp_is_a_mismatch(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    const char *header = "t=1700000000,v1=" VECTOR_MAC;
    char body[] = VECTOR_BODY;
    for (size_t i = 0; i < strlen(body); i++) {
        body[i] ^= 0x01;
        assert_int_equal(verify_at(&secrets, header, body, T0, NULL, 0), WEBHOOK_SIG_MISMATCH);
        body[i] ^= 0x01;
    }
    assert_int_equal(verify_at(&secrets, header, body, T0, NULL, 0), WEBHOOK_SIG_OK);
    assert_int_equal(verify_at(&secrets, header, "{\"a\":1} ", T0, NULL, 0), WEBHOOK_SIG_MISMATCH);
    assert_int_equal(verify_at(&secrets, header, "{\"a\":1", T0, NULL, 0), WEBHOOK_SIG_MISMATCH);
    /* The timestamp is signed, as sent: another second or leading zero fails. */
    assert_int_equal(verify_at(&secrets, "t=1700000001,v1=" VECTOR_MAC, VECTOR_BODY, T0, NULL, 0),
                     WEBHOOK_SIG_MISMATCH);
    assert_int_equal(verify_at(&secrets, "t=01700000000,v1=" VECTOR_MAC, VECTOR_BODY, T0, NULL, 0),
                     WEBHOOK_SIG_MISMATCH);
    /* One changed hex digit of the MAC. */
    char forged[] = "t=1700000000,v1=" VECTOR_MAC;
    forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == 'c' ? 'd' : 'c';
    assert_int_equal(verify_at(&secrets, forged, VECTOR_BODY, T0, NULL, 0), WEBHOOK_SIG_MISMATCH);
}

static void test_missing_header_is_missing(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    const char *headers[] = {NULL, "", "   ", "\t "};
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        char why[256] = "";
        assert_int_equal(verify_at(&secrets, headers[i], VECTOR_BODY, T0, why, sizeof why),
                         WEBHOOK_SIG_MISSING);
        assert_non_null(strstr(why, "Holdfast-Signature"));
    }
}

static void test_broken_headers_are_malformed_with_a_reason(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    const char *v1 = ",v1=" VECTOR_MAC;
    const struct {
        const char *header;
        const char *why;
    } cases[] = {
        {"v1=" VECTOR_MAC, "no t="},
        {"t=1700000000", "no v1="},
        {"t=1700000000,v0=" VECTOR_MAC, "no v1="},
        {"t=,v1=" VECTOR_MAC, "t= is not"},
        {"t=abc,v1=" VECTOR_MAC, "t= is not"},
        {"t=-1700000000,v1=" VECTOR_MAC, "t= is not"},
        {"t=+1700000000,v1=" VECTOR_MAC, "t= is not"},
        {"t=1700000000.5,v1=" VECTOR_MAC, "t= is not"},
        {"t=9223372036854775808,v1=" VECTOR_MAC, "t= is not"}, /* INT64_MAX + 1 */
        {"t=99999999999999999999,v1=" VECTOR_MAC, "t= is not"},
        {"t= 1700000000,v1=" VECTOR_MAC, "t= is not"},
        {"t=1700000000,t=1700000000,v1=" VECTOR_MAC, "two t="},
        {"t=1700000000,v1=", "not 64 hex"},
        {"t=1700000000,v1=abc", "not 64 hex"},
        {"t=1700000000,v1=" VECTOR_MAC "0", "not 64 hex"},
        {"t=1700000000,v1=0fb0e5eb2c2204d471e7d252958fb5af663638b8d24fc8dc03090a74bcc366c",
         "not 64"},
        {"t=1700000000,v1=g0fb0e5eb2c2204d471e7d252958fb5af663638b8d24fc8dc03090a74bcc366c",
         "not 64"},
        {"t=1700000000,garbage,v1=" VECTOR_MAC, "item 2 has no '='"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[256] = "";
        webhook_sig_result_t got =
            verify_at(&secrets, cases[i].header, VECTOR_BODY, T0, why, sizeof why);
        if (got != WEBHOOK_SIG_MALFORMED || !strstr(why, cases[i].why))
            fail_msg("case %zu '%s': got %s, why '%s'", i, cases[i].header,
                     webhook_sig_result_name(got), why);
    }
    /* A valid t and v1 beside the broken parts still pass: the cases above fail for
     * what they break. */
    char header[128];
    snprintf(header, sizeof header, "t=1700000000%s", v1);
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0, NULL, 0), WEBHOOK_SIG_OK);
}

static void test_tolerance_edges_pass_and_one_second_past_fails(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    const char *header = "t=1700000000,v1=" VECTOR_MAC;
    char why[256];
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0 + TOL_S, NULL, 0), WEBHOOK_SIG_OK);
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0 - TOL_S, NULL, 0), WEBHOOK_SIG_OK);
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0 + TOL_S + 1, why, sizeof why),
                     WEBHOOK_SIG_STALE);
    assert_non_null(strstr(why, "301 s old, tolerance 300 s"));
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0 - TOL_S - 1, why, sizeof why),
                     WEBHOOK_SIG_FUTURE);
    assert_non_null(strstr(why, "ahead"));
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0 + 400, why, sizeof why),
                     WEBHOOK_SIG_STALE);
    assert_non_null(strstr(why, "timestamp 1700000000 is 400 s old, tolerance 300 s: the sender "
                                "must sign at send time"));
    /* A zero tolerance accepts the second itself only. */
    assert_int_equal(
        webhook_sig_verify(&secrets, header, VECTOR_BODY, strlen(VECTOR_BODY), T0, 0, NULL, 0),
        WEBHOOK_SIG_OK);
    assert_int_equal(
        webhook_sig_verify(&secrets, header, VECTOR_BODY, strlen(VECTOR_BODY), T0 + 1, 0, NULL, 0),
        WEBHOOK_SIG_STALE);
    /* Clocks at the ends of int64 do not overflow the window arithmetic. */
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, INT64_MIN, NULL, 0),
                     WEBHOOK_SIG_FUTURE);
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, INT64_MAX, NULL, 0),
                     WEBHOOK_SIG_STALE);
}

static void test_forged_old_header_is_a_mismatch_not_stale(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of("whsec_some_other_secret_xyz", NULL);
    const char *header = "t=1700000000,v1=" VECTOR_MAC;
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0 + 3600, NULL, 0),
                     WEBHOOK_SIG_MISMATCH);
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0 - 3600, NULL, 0),
                     WEBHOOK_SIG_MISMATCH);
}

static void test_rotation_any_v1_with_any_secret_passes(void **state)
{
    (void)state;
    char now_hex[65], old_hex[65], other_hex[65], header[256], why[256];
    v1_of(SECRET, T0, VECTOR_BODY, now_hex);
    v1_of(SECRET_OLD, T0, VECTOR_BODY, old_hex);
    v1_of("whsec_nobody_knows_this_one", T0, VECTOR_BODY, other_hex);
    webhook_secrets_t both = secrets_of(SECRET, SECRET_OLD);
    webhook_secrets_t current = secrets_of(SECRET, NULL);

    /* The sender still signs with the previous secret only. */
    snprintf(header, sizeof header, "t=1700000000,v1=%s", old_hex);
    assert_int_equal(verify_at(&both, header, VECTOR_BODY, T0, why, sizeof why), WEBHOOK_SIG_OK);
    assert_non_null(strstr(why, "secret 2 of 2 (the previous one"));
    assert_int_equal(verify_at(&current, header, VECTOR_BODY, T0, NULL, 0), WEBHOOK_SIG_MISMATCH);

    /* The sender signs with an unknown secret and, second, with the current one. */
    snprintf(header, sizeof header, "t=1700000000,v1=%s,v1=%s", other_hex, now_hex);
    assert_int_equal(verify_at(&current, header, VECTOR_BODY, T0, NULL, 0), WEBHOOK_SIG_OK);
    snprintf(header, sizeof header, "t=1700000000,v1=%s,v1=%s", old_hex, other_hex);
    assert_int_equal(verify_at(&both, header, VECTOR_BODY, T0, NULL, 0), WEBHOOK_SIG_OK);
    assert_int_equal(verify_at(&current, header, VECTOR_BODY, T0, NULL, 0), WEBHOOK_SIG_MISMATCH);
}

static void test_blanks_order_case_and_other_schemes_are_tolerated(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    const char *headers[] = {
        " t=1700000000 , v1=" VECTOR_MAC " ",
        "t=1700000000,\tv1=" VECTOR_MAC "\t",
        "v1=" VECTOR_MAC ",t=1700000000",
        "t=1700000000,v0=deadbeef,v1=" VECTOR_MAC,
        "t=1700000000,v1=" VECTOR_MAC ",v0=" VECTOR_MAC ",scheme=x",
        "t=1700000000,v1=" VECTOR_MAC ",",
        "t=1700000000,,v1=" VECTOR_MAC,
        "t=1700000000,v1=10FB0E5EB2C2204D471E7D252958FB5AF663638B8D24FC8DC03090A74BCC366C",
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        char why[256] = "";
        webhook_sig_result_t got =
            verify_at(&secrets, headers[i], VECTOR_BODY, T0, why, sizeof why);
        if (got != WEBHOOK_SIG_OK)
            fail_msg("'%s': %s (%s)", headers[i], webhook_sig_result_name(got), why);
    }
}

static void test_header_longer_than_its_bound_is_malformed(void **state)
{
    (void)state;
    webhook_secrets_t secrets = secrets_of(SECRET, NULL);
    char header[HF_WEBHOOK_SIG_HEADER_LEN_MAX + 2];
    /* A valid header padded with blanks to exactly the bound passes. */
    memset(header, ' ', sizeof header);
    const char *valid = "t=1700000000,v1=" VECTOR_MAC;
    memcpy(header, valid, strlen(valid));
    header[HF_WEBHOOK_SIG_HEADER_LEN_MAX] = '\0';
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0, NULL, 0), WEBHOOK_SIG_OK);
    /* One byte more is refused unread. */
    header[HF_WEBHOOK_SIG_HEADER_LEN_MAX] = ' ';
    header[HF_WEBHOOK_SIG_HEADER_LEN_MAX + 1] = '\0';
    char why[256];
    assert_int_equal(verify_at(&secrets, header, VECTOR_BODY, T0, why, sizeof why),
                     WEBHOOK_SIG_MALFORMED);
    assert_non_null(strstr(why, "longer than 1024 bytes"));
}

static void test_empty_secret_set_fails_closed(void **state)
{
    (void)state;
    webhook_secrets_t none = secrets_of(NULL, NULL);
    char why[256];
    assert_int_equal(
        verify_at(&none, "t=1700000000,v1=" VECTOR_MAC, VECTOR_BODY, T0, why, sizeof why),
        WEBHOOK_SIG_MISMATCH);
    assert_non_null(strstr(why, "no webhook secret is configured"));
}

static void test_secret_check_refuses_short_long_and_padded_secrets(void **state)
{
    (void)state;
    char long_secret[HF_WEBHOOK_SECRET_LEN_MAX + 2];
    memset(long_secret, 'k', sizeof long_secret);
    long_secret[HF_WEBHOOK_SECRET_LEN_MAX + 1] = '\0';
    assert_non_null(strstr(webhook_secret_check(long_secret), "longer than 256"));
    long_secret[HF_WEBHOOK_SECRET_LEN_MAX] = '\0';
    assert_null(webhook_secret_check(long_secret));

    assert_non_null(strstr(webhook_secret_check(NULL), "empty"));
    assert_non_null(strstr(webhook_secret_check(""), "empty"));
    assert_non_null(strstr(webhook_secret_check("0123456789abcde"), "shorter than 16 bytes"));
    assert_null(webhook_secret_check("0123456789abcdef"));
    assert_non_null(strstr(webhook_secret_check("0123456789abcdef\n"), "line break"));
    assert_non_null(strstr(webhook_secret_check(" 0123456789abcdef"), "blank"));

    webhook_secrets_t secrets;
    char errstr[256];
    webhook_secrets_init(&secrets);
    assert_int_equal(webhook_secrets_add(&secrets, "short", errstr, sizeof errstr), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "the webhook secret is shorter than 16 bytes"));
    assert_int_equal(secrets.secrets_count, 0);
    assert_int_equal(webhook_secrets_add(&secrets, SECRET, errstr, sizeof errstr), HF_OK);
    assert_int_equal(webhook_secrets_add(&secrets, SECRET_OLD, errstr, sizeof errstr), HF_OK);
    assert_int_equal(
        webhook_secrets_add(&secrets, "whsec_a_third_secret_0000", errstr, sizeof errstr),
        HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "more than 2 webhook secrets"));
    assert_int_equal(secrets.secrets_count, 2);
}

static void test_sign_refuses_small_buffer_negative_time_and_empty_secret(void **state)
{
    (void)state;
    char header[WEBHOOK_SIG_HEADER_SIZE];
    size_t need = strlen("t=1700000000,v1=" VECTOR_MAC) + 1;
    assert_int_equal(
        webhook_sig_sign(SECRET, T0, VECTOR_BODY, strlen(VECTOR_BODY), header, need - 1),
        HF_ERR_LIMIT);
    assert_string_equal(header, "");
    assert_int_equal(webhook_sig_sign(SECRET, T0, VECTOR_BODY, strlen(VECTOR_BODY), header, need),
                     HF_OK);
    assert_int_equal(webhook_sig_sign(SECRET, -1, "", 0, header, sizeof header), HF_ERR_INVAL);
    assert_int_equal(webhook_sig_sign("", T0, "", 0, header, sizeof header), HF_ERR_INVAL);
    /* The largest timestamp fits the documented size. */
    assert_int_equal(webhook_sig_sign(SECRET, INT64_MAX, "", 0, header, sizeof header), HF_OK);
    assert_int_equal(strlen(header), 2 + 19 + 4 + 64);
}

/* The longest sentence of each kind (widest numbers, the last item of a full
 * header) fits WEBHOOK_SIG_WHY_SIZE, so the caller's 401 body is never cut. */
static void test_longest_reasons_fit_the_documented_why_size(void **state)
{
    (void)state;
    webhook_secrets_t both = secrets_of(SECRET, SECRET_OLD);
    char header[HF_WEBHOOK_SIG_HEADER_LEN_MAX + 1], why[4 * WEBHOOK_SIG_WHY_SIZE];
    size_t longest = 0;
#define CHECK(call, expect)                                                                        \
    do {                                                                                           \
        assert_int_equal((call), (expect));                                                        \
        longest = strlen(why) > longest ? strlen(why) : longest;                                   \
    } while (0)

    assert_int_equal(webhook_sig_sign(SECRET, INT64_MAX, "", 0, header, sizeof header), HF_OK);
    CHECK(webhook_sig_verify(&both, header, "", 0, INT64_MIN, INT64_MAX, why, sizeof why),
          WEBHOOK_SIG_FUTURE);
    assert_int_equal(webhook_sig_sign(SECRET, INT64_MAX / 2, "", 0, header, sizeof header), HF_OK);
    CHECK(webhook_sig_verify(&both, header, "", 0, INT64_MAX, 0, why, sizeof why),
          WEBHOOK_SIG_STALE);
    CHECK(webhook_sig_verify(&both, header, "x", 1, INT64_MAX, 0, why, sizeof why),
          WEBHOOK_SIG_MISMATCH);
    assert_int_equal(webhook_sig_sign(SECRET_OLD, T0, "", 0, header, sizeof header), HF_OK);
    CHECK(webhook_sig_verify(&both, header, "", 0, T0, 0, why, sizeof why), WEBHOOK_SIG_OK);
    CHECK(webhook_sig_verify(&both, NULL, "", 0, T0, 0, why, sizeof why), WEBHOOK_SIG_MISSING);
    /* The last of ~500 items is broken: the widest item number. */
    const char *tails[] = {"x", "v1=x"};
    for (size_t i = 0; i < 2; i++) {
        memset(header, ',', sizeof header);
        memcpy(header, "t=1", 3);
        size_t at = HF_WEBHOOK_SIG_HEADER_LEN_MAX - strlen(tails[i]);
        memcpy(header + at, tails[i], strlen(tails[i]));
        header[HF_WEBHOOK_SIG_HEADER_LEN_MAX] = '\0';
        CHECK(webhook_sig_verify(&both, header, "", 0, T0, 0, why, sizeof why),
              WEBHOOK_SIG_MALFORMED);
        assert_non_null(strstr(why, "item 10"));
    }
#undef CHECK
    assert_in_range(longest, 100, WEBHOOK_SIG_WHY_SIZE - 1);
    /* And so does every refusal of a secret. */
    char long_secret[HF_WEBHOOK_SECRET_LEN_MAX + 2];
    memset(long_secret, 'k', sizeof long_secret);
    long_secret[HF_WEBHOOK_SECRET_LEN_MAX + 1] = '\0';
    const char *secrets[] = {"", "short", " 0123456789abcdef", long_secret};
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++)
        assert_in_range(strlen(webhook_secret_check(secrets[i])), 20, WEBHOOK_SIG_WHY_SIZE - 1);
}

static void test_result_names_are_the_metrics_labels(void **state)
{
    (void)state;
    assert_string_equal(webhook_sig_result_name(WEBHOOK_SIG_OK), "ok");
    assert_string_equal(webhook_sig_result_name(WEBHOOK_SIG_MISSING), "missing");
    assert_string_equal(webhook_sig_result_name(WEBHOOK_SIG_MALFORMED), "malformed");
    assert_string_equal(webhook_sig_result_name(WEBHOOK_SIG_STALE), "stale");
    assert_string_equal(webhook_sig_result_name(WEBHOOK_SIG_FUTURE), "future");
    assert_string_equal(webhook_sig_result_name(WEBHOOK_SIG_MISMATCH), "mismatch");
    assert_string_equal(webhook_sig_result_name(WEBHOOK_SIG_INTERNAL), "internal");
    assert_string_equal(webhook_sig_result_name((webhook_sig_result_t)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openssl_vector_verifies_and_sign_writes_it),
        cmocka_unit_test(test_body_is_raw_bytes_not_a_c_string),
        cmocka_unit_test(test_signed_header_verifies_for_any_body_and_time),
        cmocka_unit_test(test_wrong_secret_is_a_mismatch),
        cmocka_unit_test(test_any_changed_byte_or_timestamp_is_a_mismatch),
        cmocka_unit_test(test_missing_header_is_missing),
        cmocka_unit_test(test_broken_headers_are_malformed_with_a_reason),
        cmocka_unit_test(test_tolerance_edges_pass_and_one_second_past_fails),
        cmocka_unit_test(test_forged_old_header_is_a_mismatch_not_stale),
        cmocka_unit_test(test_rotation_any_v1_with_any_secret_passes),
        cmocka_unit_test(test_blanks_order_case_and_other_schemes_are_tolerated),
        cmocka_unit_test(test_header_longer_than_its_bound_is_malformed),
        cmocka_unit_test(test_empty_secret_set_fails_closed),
        cmocka_unit_test(test_secret_check_refuses_short_long_and_padded_secrets),
        cmocka_unit_test(test_sign_refuses_small_buffer_negative_time_and_empty_secret),
        cmocka_unit_test(test_longest_reasons_fit_the_documented_why_size),
        cmocka_unit_test(test_result_names_are_the_metrics_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
