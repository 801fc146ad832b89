/* Payment-webhook signatures (webhook_sig.h): parses the Stripe-style header,
 * recomputes HMAC-SHA256 over "<t>.<body>" with each configured secret through
 * libcrypto's EVP_MAC, compares in constant time and then applies the replay
 * window. Written so a forged or broken header is told apart from a genuine but
 * late one, and every refusal says what the sender should change. */
#include "http/webhook_sig.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "hf_assert.h"

#define MAC_BYTES    32 /* SHA-256 */
#define MAC_HEX      (2 * MAC_BYTES)
/* Every v1 item takes "v1=" + 64 hex + a comma, so a header within its bound
 * holds at most this many. */
#define V1_MAX       (HF_WEBHOOK_SIG_HEADER_LEN_MAX / (3 + MAC_HEX + 1) + 1)
/* INT64_MAX has 19 digits. */
#define T_DIGITS_MAX 19

#define STR_(x) #x
#define STR(x)  STR_(x)

_Static_assert(WEBHOOK_SIG_HEADER_SIZE >= 2 + T_DIGITS_MAX + 4 + MAC_HEX + 1,
               "a signed header fits");
_Static_assert(HF_WEBHOOK_SECRETS_MAX >= 1, "at least one secret");
_Static_assert(HF_WEBHOOK_SECRET_LEN_MIN >= 1 &&
                   HF_WEBHOOK_SECRET_LEN_MIN <= HF_WEBHOOK_SECRET_LEN_MAX,
               "secret bounds");

typedef struct {
    const char *t_text; /* the timestamp exactly as sent: it is what was signed */
    size_t t_len;
    int64_t t_s;
    unsigned char v1[V1_MAX][MAC_BYTES];
    size_t v1_count;
} sig_header_t;

const char *webhook_sig_result_name(webhook_sig_result_t result)
{
    switch (result) {
#define WEBHOOK_SIG_RESULT_NAME(name, code, label)                                                 \
    case WEBHOOK_SIG_##name:                                                                       \
        return label;
        WEBHOOK_SIG_RESULT_MAP(WEBHOOK_SIG_RESULT_NAME)
#undef WEBHOOK_SIG_RESULT_NAME
    }
    return "unknown";
}

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t why_size, const char *fmt,
                                                      ...)
{
    if (!why || why_size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_space(char c)
{
    return is_blank(c) || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

const char *webhook_secret_check(const char *secret)
{
    size_t len = secret ? strnlen(secret, HF_WEBHOOK_SECRET_LEN_MAX + 1) : 0;
    if (len == 0)
        return "the webhook secret is empty: set the signing secret the payment provider shows "
               "for this endpoint";
    if (len < HF_WEBHOOK_SECRET_LEN_MIN)
        return "the webhook secret is shorter than " STR(
            HF_WEBHOOK_SECRET_LEN_MIN) " bytes, short enough to guess from one signed webhook: use "
                                       "the provider's generated secret (or openssl rand -hex 32)";
    if (len > HF_WEBHOOK_SECRET_LEN_MAX)
        return "the webhook secret is longer than " STR(
            HF_WEBHOOK_SECRET_LEN_MAX) " bytes: use the provider's generated secret";
    if (is_space(secret[0]) || is_space(secret[len - 1]))
        return "the webhook secret starts or ends with a blank or a line break (a pasted line's "
               "newline?): remove it, the provider signs without it";
    return NULL;
}

void webhook_secrets_init(webhook_secrets_t *secrets)
{
    hf_assert(secrets);
    memset(secrets, 0, sizeof *secrets);
}

int webhook_secrets_add(webhook_secrets_t *secrets, const char *secret, char *errstr,
                        size_t errstr_size)
{
    hf_assert(secrets && secrets->secrets_count <= HF_WEBHOOK_SECRETS_MAX);
    const char *problem = webhook_secret_check(secret);
    if (problem) {
        say(errstr, errstr_size, "%s", problem);
        return HF_ERR_CONFIG;
    }
    if (secrets->secrets_count == HF_WEBHOOK_SECRETS_MAX) {
        say(errstr, errstr_size,
            "more than %d webhook secrets: keep the current one and, during a rotation, the "
            "previous one",
            HF_WEBHOOK_SECRETS_MAX);
        return HF_ERR_CONFIG;
    }
    size_t i = secrets->secrets_count++;
    size_t len = strlen(secret);
    memcpy(secrets->secret[i], secret, len + 1);
    secrets->secret_len[i] = len;
    return HF_OK;
}

/* HMAC-SHA256(key, t "." body). False when libcrypto fails (out of memory). */
static bool mac_compute(const char *key, size_t key_len, const char *t, size_t t_len,
                        const void *body, size_t body_len, unsigned char mac[MAC_BYTES])
{
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
    size_t mac_len = 0;
    bool ok = ctx && EVP_MAC_init(ctx, (const unsigned char *)key, key_len, params) &&
              EVP_MAC_update(ctx, (const unsigned char *)t, t_len) &&
              EVP_MAC_update(ctx, (const unsigned char *)".", 1) &&
              (body_len == 0 || EVP_MAC_update(ctx, body, body_len)) &&
              EVP_MAC_final(ctx, mac, &mac_len, MAC_BYTES) && mac_len == MAC_BYTES;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(hmac);
    return ok;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool hex_decode(const char *hex, size_t len, unsigned char out[MAC_BYTES])
{
    if (len != MAC_HEX)
        return false;
    for (size_t i = 0; i < MAC_BYTES; i++) {
        int hi = hex_value(hex[2 * i]);
        int lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

/* Unix seconds: 1 to 19 decimal digits, no sign; false past INT64_MAX. */
static bool seconds_parse(const char *text, size_t len, int64_t *t_s)
{
    int64_t v = 0;
    if (len == 0 || len > T_DIGITS_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, text[i] - '0', &v))
            return false;
    }
    *t_s = v;
    return true;
}

/* One "key=value" item (blanks already trimmed), item_no counting from 1. */
static bool item_parse(const char *item, size_t len, size_t item_no, sig_header_t *sig, char *why,
                       size_t why_size)
{
    const char *eq = memchr(item, '=', len);
    if (!eq) {
        say(why, why_size, "item %zu has no '=': the header is t=<unix seconds>,v1=<hex>", item_no);
        return false;
    }
    size_t key_len = (size_t)(eq - item);
    const char *value = eq + 1;
    size_t value_len = len - key_len - 1;
    if (key_len == 1 && item[0] == 't') {
        if (sig->t_text) {
            say(why, why_size, "two t= items: the sender must send one timestamp");
            return false;
        }
        if (!seconds_parse(value, value_len, &sig->t_s)) {
            say(why, why_size, "t= is not a count of unix seconds (1 to %d digits, no sign)",
                T_DIGITS_MAX);
            return false;
        }
        sig->t_text = value;
        sig->t_len = value_len;
    } else if (key_len == 2 && item[0] == 'v' && item[1] == '1') {
        hf_assert(sig->v1_count < V1_MAX);
        if (!hex_decode(value, value_len, sig->v1[sig->v1_count])) {
            say(why, why_size,
                "v1= item %zu is not %d hex digits (an HMAC-SHA256): the sender must send the "
                "hex digest",
                item_no, MAC_HEX);
            return false;
        }
        sig->v1_count++;
    }
    return true; /* another scheme (v0=, ...): ignored */
}

/* header[0..len) into sig: true, or false with why (MALFORMED). */
static bool header_parse(const char *header, size_t len, sig_header_t *sig, char *why,
                         size_t why_size)
{
    memset(sig, 0, sizeof *sig);
    size_t item_no = 0;
    for (size_t start = 0; start <= len;) {
        const char *comma = memchr(header + start, ',', len - start);
        size_t end = comma ? (size_t)(comma - header) : len;
        size_t a = start, b = end;
        while (a < b && is_blank(header[a]))
            a++;
        while (b > a && is_blank(header[b - 1]))
            b--;
        item_no++;
        if (b > a && !item_parse(header + a, b - a, item_no, sig, why, why_size))
            return false;
        start = end + 1;
    }
    if (!sig->t_text) {
        say(why, why_size, "no t= timestamp: the sender must sign \"<t>.<body>\" and send t");
        return false;
    }
    if (sig->v1_count == 0) {
        say(why, why_size, "no v1= signature (other schemes such as v0= are not accepted)");
        return false;
    }
    return true;
}

/* The secret (0-based) whose MAC equals one of the v1 items, -1 for none, -2
 * when libcrypto failed. */
static int secret_matching(const webhook_secrets_t *secrets, const sig_header_t *sig,
                           const void *body, size_t body_len)
{
    for (size_t s = 0; s < secrets->secrets_count; s++) {
        unsigned char mac[MAC_BYTES];
        if (!mac_compute(secrets->secret[s], secrets->secret_len[s], sig->t_text, sig->t_len, body,
                         body_len, mac))
            return -2;
        for (size_t i = 0; i < sig->v1_count; i++)
            if (CRYPTO_memcmp(mac, sig->v1[i], MAC_BYTES) == 0)
                return (int)s;
    }
    return -1;
}

static webhook_sig_result_t window_check(int64_t t_s, int64_t now_s, int64_t tolerance_s, char *why,
                                         size_t why_size)
{
    int64_t age_s;
    /* t_s >= 0, so only a far-negative now_s overflows: t_s is then far ahead. */
    if (__builtin_sub_overflow(now_s, t_s, &age_s) || age_s < -tolerance_s) {
        say(why, why_size,
            "timestamp %lld is more than %lld s ahead of this server's clock (%lld): the "
            "sender's clock runs ahead; check NTP on both sides",
            (long long)t_s, (long long)tolerance_s, (long long)now_s);
        return WEBHOOK_SIG_FUTURE;
    }
    if (age_s > tolerance_s) {
        say(why, why_size,
            "timestamp %lld is %lld s old, tolerance %lld s: the sender must sign at send time "
            "(a replay, or a clock behind)",
            (long long)t_s, (long long)age_s, (long long)tolerance_s);
        return WEBHOOK_SIG_STALE;
    }
    return WEBHOOK_SIG_OK;
}

webhook_sig_result_t webhook_sig_verify(const webhook_secrets_t *secrets, const char *header,
                                        const void *body, size_t body_len, int64_t now_s,
                                        int64_t tolerance_s, char *why, size_t why_size)
{
    hf_assert(secrets && secrets->secrets_count <= HF_WEBHOOK_SECRETS_MAX);
    hf_assert(body || body_len == 0);
    hf_assert(tolerance_s >= 0);
    say(why, why_size, "%s", "");

    size_t len = header ? strnlen(header, HF_WEBHOOK_SIG_HEADER_LEN_MAX + 1) : 0;
    size_t blanks = 0;
    while (blanks < len && is_blank(header[blanks]))
        blanks++;
    if (blanks == len) {
        say(why, why_size,
            "no " WEBHOOK_SIG_HEADER_NAME " header: the sender must sign every webhook "
            "(t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">)");
        return WEBHOOK_SIG_MISSING;
    }
    if (len > HF_WEBHOOK_SIG_HEADER_LEN_MAX) {
        say(why, why_size, "the signature header is longer than %d bytes",
            HF_WEBHOOK_SIG_HEADER_LEN_MAX);
        return WEBHOOK_SIG_MALFORMED;
    }
    sig_header_t sig;
    if (!header_parse(header, len, &sig, why, why_size))
        return WEBHOOK_SIG_MALFORMED;
    if (secrets->secrets_count == 0) {
        say(why, why_size, "no webhook secret is configured here, so nothing can be verified");
        return WEBHOOK_SIG_MISMATCH;
    }
    int s = secret_matching(secrets, &sig, body, body_len);
    if (s == -2) {
        say(why, why_size, "libcrypto could not compute the HMAC (out of memory?): retry later");
        return WEBHOOK_SIG_INTERNAL;
    }
    if (s < 0) {
        say(why, why_size,
            "no v1= signature matches the %zu configured secret(s): the sender must sign "
            "\"<t>.<raw body>\" with this endpoint's secret, and the body must arrive unchanged",
            secrets->secrets_count);
        return WEBHOOK_SIG_MISMATCH;
    }
    webhook_sig_result_t result = window_check(sig.t_s, now_s, tolerance_s, why, why_size);
    if (result == WEBHOOK_SIG_OK)
        say(why, why_size, "signed with secret %d of %zu%s", s + 1, secrets->secrets_count,
            s > 0 ? " (the previous one: the sender has not switched to the current one yet)" : "");
    return result;
}

int webhook_sig_sign(const char *secret, int64_t t_s, const void *body, size_t body_len,
                     char *header, size_t header_size)
{
    hf_assert(header && header_size > 0);
    hf_assert(body || body_len == 0);
    header[0] = '\0';
    if (t_s < 0 || !secret || !secret[0])
        return HF_ERR_INVAL;
    char t[T_DIGITS_MAX + 1];
    int t_len = snprintf(t, sizeof t, "%lld", (long long)t_s);
    hf_assert(t_len > 0 && (size_t)t_len < sizeof t);
    unsigned char mac[MAC_BYTES];
    if (!mac_compute(secret, strlen(secret), t, (size_t)t_len, body, body_len, mac))
        return HF_ERR_NOMEM;
    char out[WEBHOOK_SIG_HEADER_SIZE];
    int n = snprintf(out, sizeof out, "t=%s,v1=", t);
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < MAC_BYTES; i++) {
        out[n++] = digits[mac[i] >> 4];
        out[n++] = digits[mac[i] & 0x0f];
    }
    out[n] = '\0';
    if ((size_t)n >= header_size)
        return HF_ERR_LIMIT;
    memcpy(header, out, (size_t)n + 1);
    return HF_OK;
}
