/* api_keys.h: the keys file's parser, the lookup of a presented secret by its
 * SHA-256 (compared in constant time with every key, so the time taken says
 * nothing about which key nearly matched), the scope check and one token bucket
 * per key. A table is immutable once loaded except for its buckets, which the
 * store's mutex guards together with the pointer to the table in use. */
#include "api_keys.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "hf_assert.h"

#define MILLI 1000 /* a token is 1000 millitokens: whole-ms refills stay exact */

_Static_assert((int64_t)HF_API_KEY_BURST_MAX *MILLI *HF_API_KEY_RATE_PER_S_MAX < INT64_MAX / 4,
               "the bucket arithmetic must not overflow");
_Static_assert(HF_API_KEYS_FILE_BYTES_MAX < 64 * 1024 * 1024, "a keys file is read whole");

typedef struct {
    char id[HF_API_KEY_ID_LEN_MAX + 1];
    uint8_t hash[SHA256_DIGEST_LENGTH];
    unsigned scopes; /* api_scope_t bits */
    int rate_per_s, burst;
    int64_t tokens_milli;   /* 0..burst*MILLI */
    int64_t refilled_at_ms; /* when tokens_milli was last brought up to date */
    bool used;              /* false: never asked (the bucket is full) */
} api_key_t;

typedef struct {
    size_t count;
    api_key_t keys[HF_API_KEYS_MAX];
} key_table_t;

struct api_keys {
    pthread_mutex_t mu;
    key_table_t *table; /* guarded by mu */
    api_keys_rate_t defaults;
    char path[HF_CONFIG_STR_MAX]; /* as config.h's http_api_keys_file */
};

static const struct {
    const char *name;
    api_scope_t bit;
} scope_names[] = {
    {"reserve", API_SCOPE_RESERVE},
    {"commit", API_SCOPE_COMMIT},
    {"release", API_SCOPE_RELEASE},
    {"read", API_SCOPE_READ},
};
#define SCOPES_COUNT (sizeof scope_names / sizeof scope_names[0])

const char *api_scope_name(api_scope_t scope)
{
    for (size_t i = 0; i < SCOPES_COUNT; i++)
        if (scope_names[i].bit == scope)
            return scope_names[i].name;
    return "?";
}

/* ---- parsing */

static bool id_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > HF_API_KEY_ID_LEN_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
            return false;
    return true;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool hash_parse(const char *s, uint8_t out[SHA256_DIGEST_LENGTH])
{
    if (strlen(s) != 2 * SHA256_DIGEST_LENGTH)
        return false;
    for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* "reserve,read" into bits; false naming the bad word in why. */
static bool scopes_parse(char *s, unsigned *out, char *why, size_t why_size)
{
    *out = 0;
    char *save = NULL;
    for (char *w = strtok_r(s, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < SCOPES_COUNT && strcmp(scope_names[i].name, w) != 0)
            i++;
        if (i == SCOPES_COUNT) {
            snprintf(why, why_size, "unknown scope '%.32s' (reserve, commit, release, read)", w);
            return false;
        }
        *out |= (unsigned)scope_names[i].bit;
    }
    if (*out == 0) {
        snprintf(why, why_size, "no scope (reserve, commit, release, read)");
        return false;
    }
    return true;
}

/* A rate field: '-' or absent is the default; else an integer in 1..max. */
static bool number_parse(const char *s, int dflt, int max, int *out)
{
    if (!s || strcmp(s, "-") == 0) {
        *out = dflt;
        return true;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !*s || *end || v < 1 || v > max)
        return false;
    *out = (int)v;
    return true;
}

/* One non-comment line into key; false with the reason in why. */
static bool line_parse(char *line, const api_keys_rate_t *defaults, api_key_t *key, char *why,
                       size_t why_size)
{
    char *f[6] = {0};
    size_t n = 0;
    char *save = NULL;
    for (char *w = strtok_r(line, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (n == 5) {
            snprintf(why, why_size, "more than 5 fields (ID SHA256-HEX SCOPES [RATE [BURST]])");
            return false;
        }
        f[n++] = w;
    }
    if (n < 3) {
        snprintf(why, why_size, "%zu field%s; expected ID SHA256-HEX SCOPES [RATE [BURST]]", n,
                 n == 1 ? "" : "s");
        return false;
    }
    memset(key, 0, sizeof *key);
    if (!id_valid(f[0])) {
        snprintf(why, why_size, "key id '%.80s' must be 1..%d of A-Z a-z 0-9 . _ -", f[0],
                 HF_API_KEY_ID_LEN_MAX);
        return false;
    }
    snprintf(key->id, sizeof key->id, "%s", f[0]);
    if (!hash_parse(f[1], key->hash)) {
        snprintf(why, why_size,
                 "'%.80s' is not a SHA-256 (64 hex digits: printf %%s \"$secret\" | sha256sum)",
                 f[1]);
        return false;
    }
    if (!scopes_parse(f[2], &key->scopes, why, why_size))
        return false;
    if (!number_parse(f[3], defaults->rate_per_s, HF_API_KEY_RATE_PER_S_MAX, &key->rate_per_s)) {
        snprintf(why, why_size, "rate '%.32s' must be '-' or an integer in 1..%d per second", f[3],
                 HF_API_KEY_RATE_PER_S_MAX);
        return false;
    }
    if (!number_parse(f[4], defaults->burst, HF_API_KEY_BURST_MAX, &key->burst)) {
        snprintf(why, why_size, "burst '%.32s' must be '-' or an integer in 1..%d", f[4],
                 HF_API_KEY_BURST_MAX);
        return false;
    }
    key->tokens_milli = (int64_t)key->burst * MILLI;
    return true;
}

/* Adds key to t unless its id or secret is already there; false with why. */
static bool table_add(key_table_t *t, const api_key_t *key, char *why, size_t why_size)
{
    if (t->count == HF_API_KEYS_MAX) {
        snprintf(why, why_size, "more than %d keys", HF_API_KEYS_MAX);
        return false;
    }
    for (size_t i = 0; i < t->count; i++) {
        if (strcmp(t->keys[i].id, key->id) == 0) {
            snprintf(why, why_size, "key id '%s' is listed twice", key->id);
            return false;
        }
        if (memcmp(t->keys[i].hash, key->hash, sizeof key->hash) == 0) {
            snprintf(why, why_size, "the same secret as key '%s' (a secret names one key)",
                     t->keys[i].id);
            return false;
        }
    }
    t->keys[t->count++] = *key;
    return true;
}

/* The file's text, whole, into a malloc'd NUL-terminated buffer. */
static int file_read(const char *path, char **out, char *errstr, size_t errstr_size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(errstr, errstr_size, "API keys file %s: %s", path, strerror(errno));
        return HF_ERR_IO;
    }
    char *buf = malloc(HF_API_KEYS_FILE_BYTES_MAX + 2);
    if (!buf) {
        fclose(fp);
        snprintf(errstr, errstr_size, "API keys file %s: out of memory for its text", path);
        return HF_ERR_NOMEM;
    }
    size_t n = fread(buf, 1, HF_API_KEYS_FILE_BYTES_MAX + 1, fp);
    bool failed = ferror(fp);
    fclose(fp);
    if (failed || n > HF_API_KEYS_FILE_BYTES_MAX) {
        snprintf(errstr, errstr_size, "API keys file %s: %s", path,
                 failed ? "read failed" : "larger than the keys file limit (hf_limits.h)");
        free(buf);
        return failed ? HF_ERR_IO : HF_ERR_CONFIG;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        snprintf(errstr, errstr_size, "API keys file %s: holds a NUL byte (not a text file)", path);
        free(buf);
        return HF_ERR_CONFIG;
    }
    /* A file caught while being written in place may end inside a line and still
     * parse: a key lost, or a line cut before its newline or inside its scopes or
     * rate. A complete file ends with '\n' (one cut just after a '\n' still looks
     * complete: only writing a new file and renaming it rules that out). */
    if (n > 0 && buf[n - 1] != '\n') {
        snprintf(errstr, errstr_size,
                 "API keys file %s: ends without a newline: written in place? write a new file "
                 "and rename it over this one",
                 path);
        free(buf);
        return HF_ERR_CONFIG;
    }
    *out = buf;
    return HF_OK;
}

static int table_parse(const char *path, char *text, const api_keys_rate_t *defaults,
                       key_table_t *t, char *errstr, size_t errstr_size)
{
    char why[256];
    size_t lineno = 0;
    char *line = text;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (++lineno > HF_API_KEYS_LINES_MAX) {
            snprintf(errstr, errstr_size, "API keys file %s: more than %d lines", path,
                     HF_API_KEYS_LINES_MAX);
            return HF_ERR_CONFIG;
        }
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        if (len > HF_API_KEYS_LINE_LEN_MAX) {
            snprintf(errstr, errstr_size, "API keys file %s line %zu: longer than %d bytes", path,
                     lineno, HF_API_KEYS_LINE_LEN_MAX);
            return HF_ERR_CONFIG;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        api_key_t key;
        if (*p && (!line_parse(p, defaults, &key, why, sizeof why) ||
                   !table_add(t, &key, why, sizeof why))) {
            snprintf(errstr, errstr_size, "API keys file %s line %zu: %s", path, lineno, why);
            return HF_ERR_CONFIG;
        }
        line = nl ? nl + 1 : NULL;
    }
    return HF_OK;
}

static int table_load(const char *path, const api_keys_rate_t *defaults, key_table_t **out,
                      char *errstr, size_t errstr_size)
{
    char *text = NULL;
    int err = file_read(path, &text, errstr, errstr_size);
    if (err)
        return err;
    key_table_t *t = calloc(1, sizeof *t);
    if (!t) {
        free(text);
        snprintf(errstr, errstr_size, "API keys file %s: out of memory for its keys", path);
        return HF_ERR_NOMEM;
    }
    err = table_parse(path, text, defaults, t, errstr, errstr_size);
    free(text);
    if (err) {
        free(t);
        return err;
    }
    *out = t;
    return HF_OK;
}

/* ---- the store */

int api_keys_load(const char *path, const api_keys_rate_t *defaults, api_keys_t **out, char *errstr,
                  size_t errstr_size)
{
    hf_assert(defaults->rate_per_s >= 1 && defaults->rate_per_s <= HF_API_KEY_RATE_PER_S_MAX);
    hf_assert(defaults->burst >= 1 && defaults->burst <= HF_API_KEY_BURST_MAX);
    hf_assert(errstr_size > 0);
    errstr[0] = '\0';
    if (strlen(path) >= sizeof((api_keys_t *)0)->path) {
        snprintf(errstr, errstr_size, "API keys file path is longer than %d bytes",
                 HF_CONFIG_STR_MAX - 1);
        return HF_ERR_CONFIG;
    }
    api_keys_t *keys = calloc(1, sizeof *keys);
    if (!keys) {
        snprintf(errstr, errstr_size, "API keys file %s: out of memory for the key store", path);
        return HF_ERR_NOMEM;
    }
    keys->defaults = *defaults;
    snprintf(keys->path, sizeof keys->path, "%s", path);
    int err = table_load(path, defaults, &keys->table, errstr, errstr_size);
    if (err)
        goto fail;
    int rc = pthread_mutex_init(&keys->mu, NULL);
    if (rc != 0) {
        snprintf(errstr, errstr_size, "API keys: cannot make the store's mutex: %s", strerror(rc));
        err = HF_ERR_NOMEM; /* pthread_mutex_init fails for want of memory (ENOMEM, EAGAIN) */
        goto fail;
    }
    *out = keys;
    return HF_OK;
fail:
    free(keys->table);
    free(keys);
    return err;
}

/* A key listed before and after a reload keeps the tokens it has (a SIGHUP must
 * not refill the bucket of a key that is over its rate). */
static void buckets_carry(const key_table_t *old, key_table_t *t)
{
    for (size_t i = 0; i < t->count; i++)
        for (size_t j = 0; j < old->count; j++)
            if (strcmp(t->keys[i].id, old->keys[j].id) == 0) {
                int64_t cap = (int64_t)t->keys[i].burst * MILLI;
                int64_t tokens = old->keys[j].tokens_milli;
                t->keys[i].tokens_milli = tokens < cap ? tokens : cap;
                t->keys[i].refilled_at_ms = old->keys[j].refilled_at_ms;
                t->keys[i].used = old->keys[j].used;
                break;
            }
}

int api_keys_reload(api_keys_t *keys, char *errstr, size_t errstr_size)
{
    hf_assert(errstr_size > 0);
    errstr[0] = '\0';
    key_table_t *t = NULL;
    int err = table_load(keys->path, &keys->defaults, &t, errstr, errstr_size);
    if (err)
        return err;
    pthread_mutex_lock(&keys->mu);
    key_table_t *old = keys->table;
    buckets_carry(old, t);
    keys->table = t;
    pthread_mutex_unlock(&keys->mu);
    free(old);
    return HF_OK;
}

/* ---- checking a request */

/* The secret of "Bearer <secret>" (scheme case-insensitive, RFC 6750's token68
 * characters), or NULL. */
static const char *bearer_secret(const char *authorization, size_t *len)
{
    static const char scheme[] = "Bearer ";
    if (strncasecmp(authorization, scheme, sizeof scheme - 1) != 0)
        return NULL;
    const char *s = authorization + sizeof scheme - 1;
    while (*s == ' ')
        s++;
    size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/");
    n += strspn(s + n, "=");
    if (s[n] != '\0' || n < HF_API_KEY_SECRET_LEN_MIN || n > HF_API_KEY_SECRET_LEN_MAX)
        return NULL;
    *len = n;
    return s;
}

/* The key with that hash, or NULL; every key is compared, in constant time. */
static api_key_t *table_find(key_table_t *t, const uint8_t hash[SHA256_DIGEST_LENGTH])
{
    api_key_t *found = NULL;
    for (size_t i = 0; i < t->count; i++)
        if (CRYPTO_memcmp(t->keys[i].hash, hash, SHA256_DIGEST_LENGTH) == 0)
            found = &t->keys[i];
    return found;
}

/* Refills key's bucket to now_ms and takes a token; false with the seconds until
 * the next one. */
static bool bucket_take(api_key_t *key, int64_t now_ms, int *retry_after_s)
{
    int64_t cap = (int64_t)key->burst * MILLI;
    if (!key->used) {
        key->used = true;
        key->refilled_at_ms = now_ms;
    }
    int64_t elapsed_ms = now_ms - key->refilled_at_ms;
    if (elapsed_ms > 0) {
        /* Beyond the time a bucket takes to fill, waiting adds nothing: clamp
         * first, so the product below stays small. */
        int64_t fill_ms = cap / key->rate_per_s + 1;
        if (elapsed_ms > fill_ms)
            elapsed_ms = fill_ms;
        key->tokens_milli += elapsed_ms * key->rate_per_s;
        if (key->tokens_milli > cap)
            key->tokens_milli = cap;
        key->refilled_at_ms = now_ms;
    }
    hf_assert(key->tokens_milli >= 0 && key->tokens_milli <= cap);
    if (key->tokens_milli >= MILLI) {
        key->tokens_milli -= MILLI;
        return true;
    }
    int64_t wait_ms = (MILLI - key->tokens_milli + key->rate_per_s - 1) / key->rate_per_s;
    int64_t wait_s = (wait_ms + 999) / 1000;
    *retry_after_s = wait_s < 1 ? 1 : (int)wait_s;
    return false;
}

api_keys_verdict_t api_keys_check(api_keys_t *keys, const char *authorization, api_scope_t scope,
                                  int64_t now_ms, api_keys_who_t *who)
{
    memset(who, 0, sizeof *who);
    if (!authorization)
        return API_KEYS_MISSING;
    size_t len = 0;
    const char *secret = bearer_secret(authorization, &len);
    if (!secret)
        return API_KEYS_MALFORMED;
    uint8_t hash[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)secret, len, hash);
    api_keys_verdict_t verdict = API_KEYS_ALLOWED;
    pthread_mutex_lock(&keys->mu);
    api_key_t *key = table_find(keys->table, hash);
    if (!key)
        verdict = API_KEYS_UNKNOWN;
    else {
        snprintf(who->key_id, sizeof who->key_id, "%s", key->id);
        /* The scope first: a key that may never call the route hears 403 whatever
         * its bucket holds (a 429 would tell it to retry). The 403 still takes a
         * token when there is one, so a key's refused calls count against its rate. */
        bool took = bucket_take(key, now_ms, &who->retry_after_s);
        if (!(key->scopes & (unsigned)scope)) {
            verdict = API_KEYS_FORBIDDEN;
            who->retry_after_s = 0;
        } else if (!took)
            verdict = API_KEYS_LIMITED;
    }
    pthread_mutex_unlock(&keys->mu);
    return verdict;
}

size_t api_keys_count(api_keys_t *keys)
{
    pthread_mutex_lock(&keys->mu);
    size_t n = keys->table->count;
    pthread_mutex_unlock(&keys->mu);
    return n;
}

const char *api_keys_path(const api_keys_t *keys)
{
    return keys->path;
}

void api_keys_destroy(api_keys_t *keys)
{
    if (!keys)
        return;
    pthread_mutex_destroy(&keys->mu);
    free(keys->table);
    free(keys);
}
