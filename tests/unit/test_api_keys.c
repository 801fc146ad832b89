/* Unit tests of the checkout routes' API keys (processor/http/api_keys.c): the
 * keys file parser (a good file, each kind of bad line named by its number, the
 * bounds), the lookup of a presented secret by its SHA-256 (a vector made with
 * sha256sum, as docs/HTTP.md tells operators to), the scope check, the token
 * bucket on an injected clock, the scope decided before the rate, a reload that
 * revokes a key, keeps the keys in use when the new file is bad or half written,
 * and does not refill a bucket, and the errors' kinds and texts as the start
 * sees them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "http/api_keys.h"
#include "http/http_api.h"

/* printf %s hf_live_checkout_0123456789abcdef | sha256sum */
#define SECRET_A "hf_live_checkout_0123456789abcdef"
#define HASH_A   "4be6f337a556e295162dee2f5aa144e1a7cc9927f816975da009b2787d3f3ee9"
#define SECRET_B "hf_live_reader_ffffffffffffffffff"
#define SECRET_C "hf_live_another_0000000000000000"
#define T0_MS    1000000LL

static const api_keys_rate_t defaults = {10, 20};
static char path[64];

static int setup(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "/tmp/test_api_keys.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    return 0;
}
static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static void write_file(const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void hash_hex(const char *secret, char hex[65])
{
    uint8_t h[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)secret, strlen(secret), h);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        sprintf(hex + 2 * i, "%02x", h[i]);
}

/* A keys file line for secret: "ID HASH SCOPES REST". */
static void add_line(char *buf, size_t size, const char *id, const char *secret, const char *scopes,
                     const char *rest)
{
    char hex[65];
    hash_hex(secret, hex);
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, "%s %s %s %s\n", id, hex, scopes, rest);
}

static api_keys_t *load_ok(const char *text)
{
    write_file(text);
    char errstr[512] = "";
    api_keys_t *keys = NULL;
    int err = api_keys_load(path, &defaults, &keys, errstr, sizeof errstr);
    if (err != HF_OK)
        fail_msg("load: %s", errstr);
    return keys;
}

/* Loading text fails with HF_ERR_CONFIG and an errstr holding want. */
static void expect_refused(const char *text, const char *want)
{
    write_file(text);
    char errstr[512] = "";
    api_keys_t *keys = NULL;
    assert_int_equal(api_keys_load(path, &defaults, &keys, errstr, sizeof errstr), HF_ERR_CONFIG);
    assert_null(keys);
    if (!strstr(errstr, want))
        fail_msg("errstr '%s' lacks '%s'", errstr, want);
    if (!strstr(errstr, path))
        fail_msg("errstr '%s' does not name the file", errstr);
}

static api_keys_verdict_t check(api_keys_t *keys, const char *secret, api_scope_t scope,
                                int64_t now_ms, api_keys_who_t *who)
{
    char header[400];
    snprintf(header, sizeof header, "Bearer %s", secret);
    return api_keys_check(keys, header, scope, now_ms, who);
}

static void test_good_file_with_comments_blanks_and_defaults(void **state)
{
    (void)state;
    char text[2048] = "# holdfast API keys\n\n   \t\n";
    add_line(text, sizeof text, "checkout-web", SECRET_A, "reserve,commit,release,read",
             "  # the storefront");
    add_line(text, sizeof text, "reports_1.x", SECRET_B, "read", "5 7");
    add_line(text, sizeof text, "ops", SECRET_C, "release", "- 3\r");
    api_keys_t *keys = load_ok(text);
    assert_int_equal(api_keys_count(keys), 3);
    assert_string_equal(api_keys_path(keys), path);
    api_keys_who_t who;
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_ALLOWED);
    assert_string_equal(who.key_id, "checkout-web");
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    assert_string_equal(who.key_id, "reports_1.x");
    assert_int_equal(check(keys, SECRET_C, API_SCOPE_RELEASE, T0_MS, &who), API_KEYS_ALLOWED);
    assert_string_equal(who.key_id, "ops");
    api_keys_destroy(keys);
    api_keys_destroy(NULL);
}

static void test_hash_is_what_sha256sum_prints(void **state)
{
    (void)state;
    api_keys_t *keys = load_ok("storefront " HASH_A " reserve\n");
    api_keys_who_t who;
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_ALLOWED);
    assert_string_equal(who.key_id, "storefront");
    api_keys_destroy(keys);
    /* Upper-case hex is the same hash. */
    char upper[] = HASH_A;
    for (char *c = upper; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    char text[256];
    snprintf(text, sizeof text, "storefront %s reserve\n", upper);
    keys = load_ok(text);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_ALLOWED);
    api_keys_destroy(keys);
}

static void test_bad_lines_are_named_by_number(void **state)
{
    (void)state;
    expect_refused("# c\nonly-two " HASH_A "\n", "line 2: 2 fields");
    expect_refused("a " HASH_A " reserve 1 2 extra\n", "line 1: more than 5 fields");
    expect_refused("\n\nbad/id " HASH_A " reserve\n", "line 3: key id 'bad/id'");
    expect_refused("k 4be6f337 reserve\n", "line 1: '4be6f337' is not a SHA-256");
    expect_refused("k " HASH_A "zz reserve\n", "is not a SHA-256");
    expect_refused("k " HASH_A " reserve,write\n", "line 1: unknown scope 'write'");
    expect_refused("k " HASH_A " ,\n", "line 1: no scope");
    expect_refused("k " HASH_A " read 0\n", "line 1: rate '0'");
    expect_refused("k " HASH_A " read 100001\n", "rate '100001'");
    expect_refused("k " HASH_A " read 5x\n", "rate '5x'");
    expect_refused("k " HASH_A " read 5 -1\n", "line 1: burst '-1'");
    expect_refused("k " HASH_A " read - 100001\n", "burst '100001'");
}

static void test_duplicate_id_or_secret_is_refused(void **state)
{
    (void)state;
    char text[1024] = "";
    add_line(text, sizeof text, "a", SECRET_A, "read", "");
    add_line(text, sizeof text, "a", SECRET_B, "read", "");
    expect_refused(text, "line 2: key id 'a' is listed twice");
    text[0] = '\0';
    add_line(text, sizeof text, "a", SECRET_A, "read", "");
    add_line(text, sizeof text, "b", SECRET_A, "read", "");
    expect_refused(text, "line 2: the same secret as key 'a'");
}

static void test_limits_keys_line_length_and_lines(void **state)
{
    (void)state;
    size_t size = (HF_API_KEYS_MAX + 2) * 120;
    char *text = calloc(1, size);
    assert_non_null(text);
    for (int i = 0; i < HF_API_KEYS_MAX; i++) {
        char id[16], secret[40];
        snprintf(id, sizeof id, "k%d", i);
        snprintf(secret, sizeof secret, "secret-number-%08d", i);
        add_line(text, size, id, secret, "read", "");
    }
    api_keys_t *keys = load_ok(text);
    assert_int_equal(api_keys_count(keys), HF_API_KEYS_MAX);
    api_keys_destroy(keys);
    add_line(text, size, "one-too-many", "secret-number-too-many", "read", "");
    char want[64];
    snprintf(want, sizeof want, "line %d: more than %d keys", HF_API_KEYS_MAX + 1, HF_API_KEYS_MAX);
    expect_refused(text, want);
    free(text);

    char line[HF_API_KEYS_LINE_LEN_MAX + 16];
    memset(line, ' ', sizeof line);
    snprintf(line + HF_API_KEYS_LINE_LEN_MAX - 1, 16, "#x\n");
    expect_refused(line, "line 1: longer than");

    size = (HF_API_KEYS_LINES_MAX + 2) * 2;
    text = calloc(1, size);
    assert_non_null(text);
    memset(text, '\n', HF_API_KEYS_LINES_MAX + 1);
    snprintf(want, sizeof want, "more than %d lines", HF_API_KEYS_LINES_MAX);
    expect_refused(text, want);
    free(text);
}

static void test_unreadable_file_is_an_io_error_naming_it(void **state)
{
    (void)state;
    char errstr[512];
    api_keys_t *keys = NULL;
    assert_int_equal(
        api_keys_load("/nonexistent/keys.txt", &defaults, &keys, errstr, sizeof errstr), HF_ERR_IO);
    assert_non_null(strstr(errstr, "/nonexistent/keys.txt"));
    assert_null(keys);
}

static void test_missing_malformed_and_unknown_keys(void **state)
{
    (void)state;
    char text[512] = "";
    add_line(text, sizeof text, "a", SECRET_A, "read", "");
    api_keys_t *keys = load_ok(text);
    api_keys_who_t who;
    assert_int_equal(api_keys_check(keys, NULL, API_SCOPE_READ, T0_MS, &who), API_KEYS_MISSING);
    assert_int_equal(api_keys_check(keys, "", API_SCOPE_READ, T0_MS, &who), API_KEYS_MALFORMED);
    assert_int_equal(api_keys_check(keys, "Basic " SECRET_A, API_SCOPE_READ, T0_MS, &who),
                     API_KEYS_MALFORMED);
    assert_int_equal(api_keys_check(keys, SECRET_A, API_SCOPE_READ, T0_MS, &who),
                     API_KEYS_MALFORMED);
    assert_int_equal(api_keys_check(keys, "Bearer short", API_SCOPE_READ, T0_MS, &who),
                     API_KEYS_MALFORMED);
    assert_int_equal(api_keys_check(keys, "Bearer " SECRET_A " x", API_SCOPE_READ, T0_MS, &who),
                     API_KEYS_MALFORMED);
    assert_int_equal(api_keys_check(keys, "Bearer " SECRET_A "\"", API_SCOPE_READ, T0_MS, &who),
                     API_KEYS_MALFORMED);
    assert_int_equal(api_keys_check(keys, "Bearer ", API_SCOPE_READ, T0_MS, &who),
                     API_KEYS_MALFORMED);
    char longer[HF_API_KEY_SECRET_LEN_MAX + 16] = "Bearer ";
    memset(longer + 7, 'a', HF_API_KEY_SECRET_LEN_MAX + 1);
    assert_int_equal(api_keys_check(keys, longer, API_SCOPE_READ, T0_MS, &who), API_KEYS_MALFORMED);
    /* One character off: another secret. */
    assert_int_equal(check(keys, SECRET_A "x", API_SCOPE_READ, T0_MS, &who), API_KEYS_UNKNOWN);
    assert_string_equal(who.key_id, "");
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_UNKNOWN);
    /* The scheme is case-insensitive (RFC 7235), extra blanks before the secret pass. */
    assert_int_equal(api_keys_check(keys, "bearer   " SECRET_A, API_SCOPE_READ, T0_MS, &who),
                     API_KEYS_ALLOWED);
    api_keys_destroy(keys);
}

static void test_scope_is_checked_per_route(void **state)
{
    (void)state;
    char text[512] = "";
    add_line(text, sizeof text, "reader", SECRET_B, "read", "");
    add_line(text, sizeof text, "buyer", SECRET_A, "reserve,commit", "");
    api_keys_t *keys = load_ok(text);
    api_keys_who_t who;
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_FORBIDDEN);
    assert_string_equal(who.key_id, "reader");
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_COMMIT, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_RELEASE, T0_MS, &who), API_KEYS_FORBIDDEN);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS, &who), API_KEYS_FORBIDDEN);
    assert_string_equal(api_scope_name(API_SCOPE_RELEASE), "release");
    assert_string_equal(api_scope_name(API_SCOPE_READ), "read");
    api_keys_destroy(keys);
}

static void test_token_bucket_burst_refill_and_retry_after(void **state)
{
    (void)state;
    char text[512] = "";
    add_line(text, sizeof text, "slow", SECRET_A, "read", "2 3");
    add_line(text, sizeof text, "other", SECRET_B, "read", "");
    api_keys_t *keys = load_ok(text);
    api_keys_who_t who;
    for (int i = 0; i < 3; i++)
        assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS, &who), API_KEYS_LIMITED);
    assert_string_equal(who.key_id, "slow");
    assert_int_equal(who.retry_after_s, 1);
    /* Another key has its own bucket (the default 20). */
    for (int i = 0; i < 20; i++)
        assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_LIMITED);
    /* 2 per second: one token after 500 ms, not after 499. */
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS + 499, &who), API_KEYS_LIMITED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS + 500, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS + 500, &who), API_KEYS_LIMITED);
    /* A long quiet spell fills the bucket to its burst, no further. */
    int64_t later = T0_MS + 3600 * 1000;
    for (int i = 0; i < 3; i++)
        assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, later, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, later, &who), API_KEYS_LIMITED);
    /* A clock that steps back adds nothing and breaks nothing. */
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, later - 5000, &who), API_KEYS_LIMITED);
    api_keys_destroy(keys);
}

static void test_retry_after_counts_whole_seconds_to_the_next_token(void **state)
{
    (void)state;
    char text[512] = "";
    add_line(text, sizeof text, "one", SECRET_A, "read", "1 1");
    api_keys_t *keys = load_ok(text);
    api_keys_who_t who;
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS + 1, &who), API_KEYS_LIMITED);
    assert_int_equal(who.retry_after_s, 1);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS + 999, &who), API_KEYS_LIMITED);
    assert_int_equal(who.retry_after_s, 1); /* 1 ms away: still at least 1 */
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS + 1000, &who), API_KEYS_ALLOWED);
    api_keys_destroy(keys);
}

static void test_a_file_without_a_final_newline_is_refused(void **state)
{
    (void)state;
    static const char want[] = "ends without a newline: written in place? write a new file and "
                               "rename it over this one";
    expect_refused("k " HASH_A " read", want);
    expect_refused("k " HASH_A " read\n# the end", want);
    expect_refused("k " HASH_A " read\r", want);
    /* Empty, or ending in "\n" or "\r\n": complete. */
    api_keys_t *keys = load_ok("");
    assert_int_equal(api_keys_count(keys), 0);
    api_keys_destroy(keys);
    keys = load_ok("k " HASH_A " read\r\n");
    assert_int_equal(api_keys_count(keys), 1);
    api_keys_destroy(keys);
}

/* A keys file being written in place when SIGHUP comes, cut just before a line's
 * '\n': it would parse, with a key missing and another one's scopes cut short.
 * The reload refuses it and every key in use stays as it was. */
static void test_reload_of_a_half_written_file_keeps_the_keys(void **state)
{
    (void)state;
    char text[512] = "";
    add_line(text, sizeof text, "a", SECRET_A, "read,reserve", "");
    add_line(text, sizeof text, "b", SECRET_B, "read", "");
    api_keys_t *keys = load_ok(text);
    char *cut = strstr(text, "read,reserve");
    assert_non_null(cut);
    cut[strlen("read")] = '\0'; /* "a <hash> read": a good line, a scope short */
    write_file(text);           /* as it is: no newline added */
    char errstr[512];
    assert_int_equal(api_keys_reload(keys, errstr, sizeof errstr), HF_ERR_CONFIG);
    if (!strstr(errstr, "ends without a newline") || !strstr(errstr, path))
        fail_msg("errstr '%s' does not name the file and the missing newline", errstr);
    assert_int_equal(api_keys_count(keys), 2);
    api_keys_who_t who;
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    /* The same file finished (its '\n' written) is good. */
    size_t n = strlen(text);
    snprintf(text + n, sizeof text - n, "\n");
    write_file(text); /* as it is: no newline added */
    assert_int_equal(api_keys_reload(keys, errstr, sizeof errstr), HF_OK);
    assert_string_equal(errstr, "");
    assert_int_equal(api_keys_count(keys), 1);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_FORBIDDEN);
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_UNKNOWN);
    api_keys_destroy(keys);
}

/* errstr is written on every path: "" on success, the reason on a failure, never
 * what the caller's buffer held before. */
static void test_errstr_is_always_written(void **state)
{
    (void)state;
    char errstr[64];
    memset(errstr, 'Z', sizeof errstr); /* no NUL anywhere: a read of it would run off */
    api_keys_t *keys = NULL;
    write_file("k " HASH_A " read\n");
    assert_int_equal(api_keys_load(path, &defaults, &keys, errstr, sizeof errstr), HF_OK);
    assert_string_equal(errstr, "");
    memset(errstr, 'Z', sizeof errstr);
    assert_int_equal(api_keys_reload(keys, errstr, sizeof errstr), HF_OK);
    assert_string_equal(errstr, "");
    api_keys_destroy(keys);
    char longer[HF_CONFIG_STR_MAX + 8];
    memset(longer, 'p', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    memset(errstr, 'Z', sizeof errstr);
    keys = NULL;
    assert_int_equal(api_keys_load(longer, &defaults, &keys, errstr, sizeof errstr), HF_ERR_CONFIG);
    assert_null(keys);
    assert_non_null(memchr(errstr, '\0', sizeof errstr));
    assert_non_null(strstr(errstr, "path is longer than"));
}

/* As `holdfast http` starts: the setting named, and the error's kind kept, so that
 * a bad file exits 2 and an unreadable one 1 (not a bad setting's 2 for every
 * failure). */
static void test_start_check_keeps_the_kind_of_error_and_names_the_setting(void **state)
{
    (void)state;
    static hf_config_t cfg;
    config_defaults(&cfg);
    char errstr[512];
    snprintf(cfg.http_api_keys_file, sizeof cfg.http_api_keys_file, "/nonexistent/keys.txt");
    assert_int_equal(http_api_check_config(&cfg, errstr, sizeof errstr), HF_ERR_IO);
    if (!strstr(errstr, "/nonexistent/keys.txt") || !strstr(errstr, "(http_api_keys_file)"))
        fail_msg("errstr '%s' does not name the file and the setting", errstr);
    snprintf(cfg.http_api_keys_file, sizeof cfg.http_api_keys_file, "%s", path);
    write_file("k 123 read\n");
    assert_int_equal(http_api_check_config(&cfg, errstr, sizeof errstr), HF_ERR_CONFIG);
    if (!strstr(errstr, "line 1") || !strstr(errstr, "(http_api_keys_file)"))
        fail_msg("errstr '%s' does not name the line and the setting", errstr);
    write_file("k " HASH_A " read\n");
    assert_int_equal(http_api_check_config(&cfg, errstr, sizeof errstr), HF_OK);
}

/* A key that lacks the route's scope hears 403 whatever its bucket holds: a 429
 * would tell it to retry a call it may never make. */
static void test_scope_is_decided_before_the_rate(void **state)
{
    (void)state;
    char text[512] = "";
    add_line(text, sizeof text, "reader", SECRET_B, "read", "1 1");
    api_keys_t *keys = load_ok(text);
    api_keys_who_t who;
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    /* The bucket is empty now. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(check(keys, SECRET_B, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_FORBIDDEN);
        assert_string_equal(who.key_id, "reader");
        assert_int_equal(who.retry_after_s, 0);
    }
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_LIMITED);
    assert_int_equal(who.retry_after_s, 1);
    api_keys_destroy(keys);
}

static void test_a_forbidden_request_takes_a_token(void **state)
{
    (void)state;
    char text[512] = "";
    add_line(text, sizeof text, "reader", SECRET_B, "read", "1 2");
    api_keys_t *keys = load_ok(text);
    api_keys_who_t who;
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_FORBIDDEN);
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_RESERVE, T0_MS, &who), API_KEYS_FORBIDDEN);
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_LIMITED);
    api_keys_destroy(keys);
}

static void test_reload_revokes_keeps_old_on_error_and_keeps_buckets(void **state)
{
    (void)state;
    char text[512] = "";
    add_line(text, sizeof text, "a", SECRET_A, "read", "1 1");
    add_line(text, sizeof text, "b", SECRET_B, "read", "");
    api_keys_t *keys = load_ok(text);
    api_keys_who_t who;
    char errstr[512];
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS, &who), API_KEYS_LIMITED);
    /* b revoked, c added, a still limited: a reload is not a refill. */
    text[0] = '\0';
    add_line(text, sizeof text, "a", SECRET_A, "read,reserve", "1 1");
    add_line(text, sizeof text, "c", SECRET_C, "read", "");
    write_file(text);
    assert_int_equal(api_keys_reload(keys, errstr, sizeof errstr), HF_OK);
    assert_int_equal(api_keys_count(keys), 2);
    assert_int_equal(check(keys, SECRET_B, API_SCOPE_READ, T0_MS, &who), API_KEYS_UNKNOWN);
    assert_int_equal(check(keys, SECRET_C, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_READ, T0_MS, &who), API_KEYS_LIMITED);
    assert_int_equal(check(keys, SECRET_A, API_SCOPE_RESERVE, T0_MS + 1000, &who),
                     API_KEYS_ALLOWED);
    /* A bad file: an error naming the line, and the keys in use stay. */
    write_file("c 123 read\n");
    assert_int_equal(api_keys_reload(keys, errstr, sizeof errstr), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "line 1"));
    assert_int_equal(api_keys_count(keys), 2);
    assert_int_equal(check(keys, SECRET_C, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    /* A missing file too. */
    unlink(path);
    assert_int_equal(api_keys_reload(keys, errstr, sizeof errstr), HF_ERR_IO);
    assert_int_equal(check(keys, SECRET_C, API_SCOPE_READ, T0_MS, &who), API_KEYS_ALLOWED);
    api_keys_destroy(keys);
}

/* Checks on many threads while another thread swaps the table over and over (the
 * front's connection threads and its SIGHUP): every check sees one table or the
 * other, whole. Under AddressSanitizer a table freed while still read would show. */
typedef struct {
    api_keys_t *keys;
    atomic_bool stop;
    atomic_long allowed, unknown, other;
    _Atomic int64_t now_ms; /* one clock for every thread, as hf_mono_ms is */
} race_t;

static void *race_checker(void *arg)
{
    race_t *r = arg;
    while (!atomic_load(&r->stop)) {
        api_keys_who_t who;
        int64_t now_ms = atomic_fetch_add(&r->now_ms, 1);
        switch (check(r->keys, SECRET_B, API_SCOPE_READ, now_ms, &who)) {
        case API_KEYS_ALLOWED:
            atomic_fetch_add(&r->allowed, 1);
            if (strcmp(who.key_id, "b") != 0)
                atomic_fetch_add(&r->other, 1);
            break;
        case API_KEYS_UNKNOWN:
            atomic_fetch_add(&r->unknown, 1);
            break;
        default:
            atomic_fetch_add(&r->other, 1);
        }
    }
    return NULL;
}

static void test_checks_on_many_threads_while_reloading(void **state)
{
    (void)state;
    char with_b[512] = "", without_b[512] = "";
    add_line(with_b, sizeof with_b, "a", SECRET_A, "read", "");
    /* A rate no run reaches: only the table decides. */
    add_line(with_b, sizeof with_b, "b", SECRET_B, "read", "100000 100000");
    add_line(without_b, sizeof without_b, "a", SECRET_A, "read", "");
    static race_t r;
    r.keys = load_ok(with_b);
    atomic_store(&r.stop, false);
    atomic_store(&r.now_ms, T0_MS);
    pthread_t threads[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, race_checker, &r), 0);
    char errstr[512];
    for (int i = 0; i < 200; i++) {
        write_file(i % 2 ? with_b : without_b);
        assert_int_equal(api_keys_reload(r.keys, errstr, sizeof errstr), HF_OK);
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(atomic_load(&r.other), 0);
    assert_true(atomic_load(&r.allowed) + atomic_load(&r.unknown) > 0);
    assert_int_equal(api_keys_count(r.keys), 2); /* the last file written had b */
    api_keys_destroy(r.keys);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_file_with_comments_blanks_and_defaults, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hash_is_what_sha256sum_prints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_lines_are_named_by_number, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_id_or_secret_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits_keys_line_length_and_lines, setup, teardown),
        cmocka_unit_test(test_unreadable_file_is_an_io_error_naming_it),
        cmocka_unit_test_setup_teardown(test_missing_malformed_and_unknown_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scope_is_checked_per_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_bucket_burst_refill_and_retry_after, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_counts_whole_seconds_to_the_next_token,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_forbidden_request_takes_a_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scope_is_decided_before_the_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_file_without_a_final_newline_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reload_of_a_half_written_file_keeps_the_keys, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_errstr_is_always_written, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_start_check_keeps_the_kind_of_error_and_names_the_setting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_revokes_keeps_old_on_error_and_keeps_buckets,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_checks_on_many_threads_while_reloading, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
