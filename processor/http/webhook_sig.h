/* Signatures of payment webhooks (POST /v1/webhooks/payments): the check the HTTP
 * front runs before a payment event may become a Commit, and the signer tests and
 * load tools use. Pure functions over the header text, the raw body and a clock
 * reading the caller passes in; no state, safe from any thread.
 *
 * Format (Stripe's, the default): the header
 *     Holdfast-Signature: t=<unix seconds>,v1=<64 hex>[,v1=<64 hex>...]
 * where each v1 is HMAC-SHA256(secret, "<t as sent>.<raw body bytes>") in hex. Any
 * v1 made with any configured secret passes (rotation); hex digits in either case;
 * other schemes (v0=) are ignored; blanks around items and empty items are tolerated. A provider's test rig signs a body
 * the same way: `printf '%s' "$t.$body" | openssl dgst -sha256 -hmac "$secret"`. */
#ifndef HF_WEBHOOK_SIG_H
#define HF_WEBHOOK_SIG_H

#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "hf_limits.h"

/* The HTTP header that carries the signature (one spelling for server and docs). */
#define WEBHOOK_SIG_HEADER_NAME "Holdfast-Signature"

/* Outcomes of a check. The names are metrics labels and stable; never renumber.
 * Only OK may be acted on. STALE and FUTURE are reported only for a header whose
 * signature is genuine (the signature is checked first), so their counts mean
 * clock trouble or replays, not forgeries. INTERNAL: libcrypto failed (out of
 * memory); nothing was decided, so answer 5xx and let the sender retry. */
#define WEBHOOK_SIG_RESULT_MAP(X)                                                                  \
    X(OK, 0, "ok")                                                                                 \
    X(MISSING, 1, "missing")                                                                       \
    X(MALFORMED, 2, "malformed")                                                                   \
    X(STALE, 3, "stale")                                                                           \
    X(FUTURE, 4, "future")                                                                         \
    X(MISMATCH, 5, "mismatch")                                                                     \
    X(INTERNAL, 6, "internal")

typedef enum {
#define WEBHOOK_SIG_RESULT_ENUM(name, code, label) WEBHOOK_SIG_##name = code,
    WEBHOOK_SIG_RESULT_MAP(WEBHOOK_SIG_RESULT_ENUM)
#undef WEBHOOK_SIG_RESULT_ENUM
} webhook_sig_result_t;

/* "ok", "missing", ...; "unknown" for a value outside the enum. Never NULL. */
const char *webhook_sig_result_name(webhook_sig_result_t result);

/* The secrets one endpoint accepts, copied in (the set owns them): secret[0] is
 * the current one, secret[1] the previous while a rotation is under way. Fill it
 * with webhook_secrets_init and webhook_secrets_add; it may then be copied and
 * shared read-only between threads. */
typedef struct {
    char secret[HF_WEBHOOK_SECRETS_MAX][HF_WEBHOOK_SECRET_LEN_MAX + 1];
    size_t secret_len[HF_WEBHOOK_SECRETS_MAX];
    size_t secrets_count;
} webhook_secrets_t;

/* Why secret cannot be used (a sentence naming the problem and the fix), or NULL
 * when it can: empty, shorter than HF_WEBHOOK_SECRET_LEN_MIN or longer than
 * HF_WEBHOOK_SECRET_LEN_MAX bytes, or with blanks at either end (a pasted line's
 * newline). For config validation; the text does not contain the secret. */
const char *webhook_secret_check(const char *secret);

void webhook_secrets_init(webhook_secrets_t *secrets);
/* Appends one secret after webhook_secret_check. HF_ERR_CONFIG with errstr when
 * the secret is refused or the set already holds HF_WEBHOOK_SECRETS_MAX; errstr is
 * the problem alone (the caller names the setting and the secret's position). */
int webhook_secrets_add(webhook_secrets_t *secrets, const char *secret, char *errstr,
                        size_t errstr_size) HF_MUST_CHECK;

/* A why buffer of this size holds every sentence webhook_sig_verify writes whole. */
#define WEBHOOK_SIG_WHY_SIZE 256

/* Checks the value of a Holdfast-Signature header (NULL when the request had
 * none) against body[0..body_len) at now_s (unix seconds): a timestamp more than
 * tolerance_s (>= 0) before or after now_s fails; exactly tolerance_s passes. A
 * header over HF_WEBHOOK_SIG_HEADER_LEN_MAX bytes is MALFORMED unread; an empty
 * secret set gives MISMATCH (fail closed). why (may be NULL) gets a sentence for
 * the log or the 401 body: what failed and what the sender should do; on OK,
 * which secret matched. It never contains a secret or an expected MAC. */
webhook_sig_result_t webhook_sig_verify(const webhook_secrets_t *secrets, const char *header,
                                        const void *body, size_t body_len, int64_t now_s,
                                        int64_t tolerance_s, char *why, size_t why_size);

/* Room for a header webhook_sig_sign writes: "t=" + 19 digits + ",v1=" + 64 hex + NUL. */
#define WEBHOOK_SIG_HEADER_SIZE 96

/* Writes the header value "t=<t_s>,v1=<hex>" that signs body with secret at t_s
 * (>= 0) into header (header_size >= WEBHOOK_SIG_HEADER_SIZE is always enough).
 * HF_ERR_INVAL for a negative t_s or an empty secret, HF_ERR_LIMIT when header is
 * too small, HF_ERR_NOMEM when libcrypto fails; header is then "". */
int webhook_sig_sign(const char *secret, int64_t t_s, const void *body, size_t body_len,
                     char *header, size_t header_size) HF_MUST_CHECK;

#endif
