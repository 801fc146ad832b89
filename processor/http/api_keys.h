/* API keys of the checkout routes: who may call which route, and how often.
 * A keys file lists each key's id, the SHA-256 of its secret (the secret itself
 * is never stored), its scopes and its rate; api_keys_check turns an
 * Authorization header into a verdict: unknown, not allowed, over its rate, or
 * the key's id. Knows nothing of HTTP beyond the header's text, so the parsing,
 * the lookup and the token buckets are tested without a server.
 *
 * Keys file, one key per line ('#' starts a comment, blank lines are skipped):
 *     ID  SHA256-HEX  SCOPES  [RATE_PER_S [BURST]]
 * ID is 1..64 of [A-Za-z0-9._-]; SHA256-HEX the 64 hex digits of the secret's
 * SHA-256; SCOPES a comma list of reserve, commit, release, read; RATE_PER_S and
 * BURST integers (or '-': the configured default). Bounds in hf_limits.h. A
 * non-empty file must end with '\n': one that does not was caught half written
 * and is refused whole (write a new file and rename it over the old one).
 *
 * Thread safety: api_keys_check may run on any number of threads at once, also
 * while api_keys_reload swaps the table (one mutex; the critical section is a
 * scan of at most HF_API_KEYS_MAX keys). */
#ifndef HF_API_KEYS_H
#define HF_API_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "hf_limits.h"

typedef struct api_keys api_keys_t;

/* What a route needs; a key holds a set of them. */
typedef enum {
    API_SCOPE_RESERVE = 1 << 0,
    API_SCOPE_COMMIT = 1 << 1,
    API_SCOPE_RELEASE = 1 << 2,
    API_SCOPE_READ = 1 << 3,
} api_scope_t;

/* The rate of a key whose line names none. */
typedef struct {
    int rate_per_s; /* tokens added per second, 1..HF_API_KEY_RATE_PER_S_MAX */
    int burst;      /* bucket size: requests at once after a quiet spell */
} api_keys_rate_t;

typedef enum {
    API_KEYS_ALLOWED,   /* who names the key */
    API_KEYS_MISSING,   /* no Authorization header: 401 */
    API_KEYS_MALFORMED, /* not "Bearer <secret>" with a 16..256-byte secret: 401 */
    API_KEYS_UNKNOWN,   /* no key has that secret (or it was revoked): 401 */
    API_KEYS_FORBIDDEN, /* the key lacks the scope: 403 (who names it) */
    API_KEYS_LIMITED,   /* the key's bucket is empty: 429 (who names it, retry_after_s) */
} api_keys_verdict_t;

typedef struct {
    char key_id[HF_API_KEY_ID_LEN_MAX + 1]; /* "" unless a key was recognised */
    int retry_after_s;                      /* API_KEYS_LIMITED: seconds to a token, >= 1 */
} api_keys_who_t;

/* Reads path into a new key set. HF_ERR_CONFIG with the file and line in errstr
 * (a bad line, a duplicate id or secret, too many keys or lines, too long a line,
 * no final newline); HF_ERR_IO when it cannot be read; HF_ERR_NOMEM. Every error
 * writes errstr (and errstr is "" on success). The caller owns *out
 * (api_keys_destroy). */
int api_keys_load(const char *path, const api_keys_rate_t *defaults, api_keys_t **out, char *errstr,
                  size_t errstr_size) HF_MUST_CHECK;

/* Reads the file again and, when it is good, swaps it in: a key no longer listed is
 * refused from the next check; a key still listed keeps its bucket. When it is bad,
 * the keys in use stay and errstr says why. */
int api_keys_reload(api_keys_t *keys, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* The verdict on an Authorization header (NULL: none) for a route needing scope, at
 * now_ms (a monotonic clock). The scope is decided before the rate: a key without
 * the scope is FORBIDDEN even with an empty bucket, and LIMITED is only ever the
 * answer to a call the key may make. Every request of a recognised key takes a
 * token when there is one, a FORBIDDEN one too, so that refused calls count
 * against the key's rate. */
api_keys_verdict_t api_keys_check(api_keys_t *keys, const char *authorization, api_scope_t scope,
                                  int64_t now_ms, api_keys_who_t *who);

/* How many keys are in use. */
size_t api_keys_count(api_keys_t *keys);

/* The path the keys were read from. */
const char *api_keys_path(const api_keys_t *keys);

/* "reserve", "commit", "release", "read". */
const char *api_scope_name(api_scope_t scope);

/* Accepts NULL. */
void api_keys_destroy(api_keys_t *keys);

#endif
