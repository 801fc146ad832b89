/* Who may call a checkout route (http_api_int.h's api_auth): the Authorization
 * header checked against the API keys (api_keys.h) before the route's handler
 * runs, so a refused request never reaches the pipeline. The answers are RFC 6750's:
 * 401 with WWW-Authenticate for no key or an unknown one, 403 for a key without
 * the route's scope, and 429 with Retry-After for a key over its rate. */
#include <stdio.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_clock.h"
#include "http_api_int.h"
#include "log.h"
#include "metrics.h"

_Static_assert(HF_API_KEY_ID_LEN_MAX <= HF_ID_LEN_MAX, "a key id travels in hf_id_t fields");

#define AUTH_CHALLENGE         "Bearer realm=\"holdfast\""
#define AUTH_CHALLENGE_INVALID "Bearer realm=\"holdfast\", error=\"invalid_token\""

static api_scope_t scope_bit(http_scope_t scope)
{
    switch (scope) {
    case HTTP_SCOPE_RESERVE:
        return API_SCOPE_RESERVE;
    case HTTP_SCOPE_COMMIT:
        return API_SCOPE_COMMIT;
    case HTTP_SCOPE_RELEASE:
        return API_SCOPE_RELEASE;
    case HTTP_SCOPE_READ:
        return API_SCOPE_READ;
    case HTTP_SCOPE_NONE:
        break;
    }
    hf_assert(!"a route without a scope has no key to check");
    return API_SCOPE_READ;
}

static void unauthorized(http_ctx_t *ctx, httpd_resp_t *resp, bool invalid, const char *why)
{
    atomic_fetch_add(&ctx->unauthorized, 1);
    http_error(ctx, resp, 401, "unauthorized", "%s (docs/HTTP.md, API keys)", why);
    resp->header_name = "WWW-Authenticate";
    resp->header_value = invalid ? AUTH_CHALLENGE_INVALID : AUTH_CHALLENGE;
}

bool api_auth(http_ctx_t *ctx, http_call_t *call, http_scope_t scope, httpd_resp_t *resp)
{
    call->key_id[0] = '\0';
    if (scope == HTTP_SCOPE_NONE || !ctx->keys)
        return true;
    api_keys_who_t who;
    api_scope_t need = scope_bit(scope);
    switch (api_keys_check(ctx->keys, httpd_header(call->req, "Authorization"), need, hf_mono_ms(),
                           &who)) {
    case API_KEYS_ALLOWED:
        snprintf(call->key_id, sizeof call->key_id, "%s", who.key_id);
        return true;
    case API_KEYS_MISSING:
        unauthorized(ctx, resp, false,
                     "this route needs an API key: send 'Authorization: Bearer "
                     "<secret>'");
        return false;
    case API_KEYS_MALFORMED:
        unauthorized(ctx, resp, true,
                     "the Authorization header must be 'Bearer <secret>', the secret 16..256 "
                     "characters of A-Z a-z 0-9 - . _ ~ + / =");
        return false;
    case API_KEYS_UNKNOWN:
        unauthorized(ctx, resp, true,
                     "no API key has this secret (revoked or mistyped): ask for a key");
        return false;
    case API_KEYS_FORBIDDEN:
        atomic_fetch_add(&ctx->forbidden, 1);
        http_error(ctx, resp, 403, "forbidden",
                   "API key '%s' lacks the '%s' scope this route needs: ask for a key with it",
                   who.key_id, api_scope_name(need));
        return false;
    case API_KEYS_LIMITED:
        atomic_fetch_add(&ctx->rate_limited, 1);
        http_error(ctx, resp, 429, "rate_limited",
                   "API key '%s' is over its rate: retry after %d s (the key's rate is in the "
                   "keys file)",
                   who.key_id, who.retry_after_s);
        resp->retry_after_s = who.retry_after_s;
        return false;
    }
    hf_assert(!"unreachable");
    return false;
}

static api_keys_rate_t defaults_of(const hf_config_t *cfg)
{
    return (api_keys_rate_t){cfg->http_api_key_rate_per_s, cfg->http_api_key_burst};
}

int api_auth_check_config(const hf_config_t *cfg, char *errstr, size_t errstr_size)
{
    if (!cfg->http_api_keys_file[0])
        return HF_OK;
    api_keys_rate_t defaults = defaults_of(cfg);
    api_keys_t *keys = NULL;
    int err = api_keys_load(cfg->http_api_keys_file, &defaults, &keys, errstr, errstr_size);
    api_keys_destroy(keys);
    /* The start fails naming the setting; the error stays what it is (a bad file
     * is HF_ERR_CONFIG, an unreadable one HF_ERR_IO, no memory HF_ERR_NOMEM), so
     * that the exit code tells a bad setting from a failure. */
    if (err) {
        size_t n = strnlen(errstr, errstr_size - 1);
        snprintf(errstr + n, errstr_size - n, " (http_api_keys_file)");
    }
    return err;
}

static double counter_u64(void *p)
{
    return (double)atomic_load((_Atomic uint64_t *)p);
}
static double gauge_keys(void *p)
{
    http_ctx_t *ctx = p;
    return ctx->keys ? (double)api_keys_count(ctx->keys) : 0;
}

int api_auth_start(http_ctx_t *ctx, char *errstr, size_t errstr_size)
{
    const hf_config_t *cfg = ctx->cfg;
    if (cfg->http_api_keys_file[0]) {
        api_keys_rate_t defaults = defaults_of(cfg);
        int err =
            api_keys_load(cfg->http_api_keys_file, &defaults, &ctx->keys, errstr, errstr_size);
        if (err)
            return err;
        log_info("http", "API keys: %zu from %s; the checkout routes need one",
                 api_keys_count(ctx->keys), cfg->http_api_keys_file);
    } else
        log_warn("http",
                 "NO API KEYS: http_api_keys_file is not set, so anyone who reaches this port "
                 "can reserve, commit and release. Set it before serving real traffic "
                 "(docs/HTTP.md, API keys)");
    bool ok = metrics_counter_read("holdfast_http_unauthorized_total",
                                   "Requests answered 401 (no API key, or an unknown one)",
                                   counter_u64, &ctx->unauthorized);
    ok &= metrics_counter_read("holdfast_http_forbidden_total",
                               "Requests answered 403 (the API key lacks the route's scope)",
                               counter_u64, &ctx->forbidden);
    ok &= metrics_counter_read("holdfast_http_rate_limited_total",
                               "Requests answered 429 (the API key is over its rate)", counter_u64,
                               &ctx->rate_limited);
    ok &= metrics_gauge("holdfast_http_api_keys", "API keys in use (0: none configured)",
                        gauge_keys, ctx);
    if (!ok)
        log_warn("http", "the metrics table is full (HF_METRICS_GAUGES_MAX): some API key "
                         "metrics are not exported");
    return HF_OK;
}

void api_auth_reload(http_ctx_t *ctx)
{
    if (!ctx->keys) {
        log_info("http", "SIGHUP: no http_api_keys_file, no keys to reload");
        return;
    }
    char errstr[512];
    if (api_keys_reload(ctx->keys, errstr, sizeof errstr) != HF_OK) {
        log_error("http",
                  "SIGHUP: %s; the %zu keys in use stay: fix the file and send SIGHUP again",
                  errstr, api_keys_count(ctx->keys));
        return;
    }
    log_info("http", "SIGHUP: API keys reloaded: %zu from %s", api_keys_count(ctx->keys),
             api_keys_path(ctx->keys));
}

void api_auth_stop(http_ctx_t *ctx)
{
    api_keys_destroy(ctx->keys);
    ctx->keys = NULL;
}
