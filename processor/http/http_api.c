/* http_api.h: the route table, start and stop, and what the handlers share
 * (http_api_int.h). Each route's handler lives in its own api_*.c file. */
#include "http_api.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hf_assert.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "http_api_int.h"
#include "lib/client.h"
#include "log.h"
#include "metrics.h"
#include "topics.h"
#include "trace.h"

/* How long start waits for the routing view and the ledger store. */
#define HTTP_VIEW_WAIT_MS   30000
/* An idle keep-alive connection (and its thread) is closed after this. */
#define HTTP_IDLE_TIMEOUT_S 30

struct http_api {
    http_ctx_t ctx;
    /* One server per listener started (NULL: its routes are served by the
     * checkout listener); servers[HTTP_L_CHECKOUT] is ctx.server. */
    httpd_t *servers[HTTP_L_COUNT];
};

static const char *const http_listener_names[HTTP_L_COUNT] = {"checkout", "webhook", "ops"};

/* What one listener serves and how (http_listeners_plan). */
typedef struct {
    const char *name; /* for logs: "http", "http-webhook", "http-ops" */
    const char *bind;
    int port;
    unsigned serves_mask; /* 1u << http_listener_t, per listener whose routes it serves */
    const char *tls_cert_file, *tls_key_file, *tls_client_ca_file; /* "" : plain */
} http_listener_plan_t;

typedef struct {
    const char *method;
    const char *path; /* segments; "{name}" matches one non-empty segment */
    http_route_fn fn;
    http_listener_t listener;
    http_scope_t scope;
} http_route_t;

/* What a newcomer looks for: "what happens on POST .../commit" is api_commit.c. */
static const http_route_t routes[] = {
    {"POST", "/v1/reservations", api_reserve, HTTP_L_CHECKOUT, HTTP_SCOPE_RESERVE},
    {"GET", "/v1/reservations/{id}", api_status, HTTP_L_CHECKOUT, HTTP_SCOPE_READ},
    {"POST", "/v1/reservations/{id}/commit", api_commit, HTTP_L_CHECKOUT, HTTP_SCOPE_COMMIT},
    {"POST", "/v1/reservations/{id}/release", api_release, HTTP_L_CHECKOUT, HTTP_SCOPE_RELEASE},
    {"POST", "/v1/reservations/{id}/extend", api_extend, HTTP_L_CHECKOUT, HTTP_SCOPE_RESERVE},
    {"GET", "/v1/availability/{sku}", api_availability, HTTP_L_CHECKOUT, HTTP_SCOPE_READ},
    {"POST", "/v1/webhooks/payments", api_webhook, HTTP_L_WEBHOOK, HTTP_SCOPE_NONE},
    {"GET", "/metrics", api_metrics, HTTP_L_OPS, HTTP_SCOPE_NONE},
    {"GET", "/healthz", api_healthz, HTTP_L_OPS, HTTP_SCOPE_NONE},
    {"GET", "/readyz", api_readyz, HTTP_L_OPS, HTTP_SCOPE_NONE},
};
#define ROUTES_COUNT (sizeof routes / sizeof routes[0])

void http_api_print_routes(FILE *out)
{
    for (size_t i = 0; i < ROUTES_COUNT; i++)
        fprintf(out, "%s %s\n", routes[i].method, routes[i].path);
}

bool http_route_match(const char *pattern, const char *path, http_call_t *call)
{
    int n = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p == '{') {
            const char *end = strchr(s, '/');
            size_t len = end ? (size_t)(end - s) : strlen(s);
            if (len == 0 || len >= sizeof call->param_buf[0] || n >= HTTP_PARAMS_MAX)
                return false;
            memcpy(call->param_buf[n], s, len);
            call->param_buf[n][len] = '\0';
            call->params[n] = call->param_buf[n];
            n++;
            s += len;
            p = strchr(p, '}');
            if (!p)
                return false;
            p++;
            continue;
        }
        if (*p++ != *s++)
            return false;
    }
    return *p == '\0' && *s == '\0';
}

static void on_http(void *opaque, const httpd_req_t *req, httpd_resp_t *resp)
{
    http_ctx_t *ctx = opaque;
    atomic_fetch_add(&ctx->requests, 1);
    const char *path = httpd_path(req), *method = httpd_method(req);
    if (strcmp(method, "HEAD") == 0)
        method = "GET"; /* libmicrohttpd sends the headers without the body */
    static _Thread_local char allow[64];
    allow[0] = '\0';
    /* A route of another listener is not served here: 404, as if unknown. */
    unsigned serves_mask = (unsigned)httpd_tag(req);
    http_call_t call;
    for (size_t i = 0; i < ROUTES_COUNT; i++) {
        if (!(serves_mask & (1u << routes[i].listener)))
            continue;
        memset(&call, 0, sizeof call);
        call.req = req;
        if (!http_route_match(routes[i].path, path, &call))
            continue;
        if (strcmp(routes[i].method, method) == 0) {
            if (api_auth(ctx, &call, routes[i].scope, resp))
                routes[i].fn(ctx, &call, resp);
            return;
        }
        size_t n = strlen(allow);
        snprintf(allow + n, sizeof allow - n, "%s%s", n ? ", " : "", routes[i].method);
    }
    if (allow[0]) {
        http_error(ctx, resp, 405, "method_not_allowed", "%s is not served on %s (%s is)", method,
                   path, allow);
        resp->allow = allow;
    } else
        http_error(ctx, resp, 404, "no_route", "no route %s %s (docs/openapi.json lists them)",
                   method, path);
}

/* ---- shared helpers */

/* Each problem code's fixed title (RFC 9457: the same for every occurrence). */
static const struct {
    const char *code;
    const char *title;
} problem_titles[] = {
    {"invalid_json", "The body is not a JSON object"},
    {"invalid_field", "A field is missing, of the wrong type or out of range"},
    {"unknown_field", "The body has a field this route does not take"},
    {"invalid_id", "The id cannot name a reservation"},
    {"invalid_idempotency_key", "The Idempotency-Key is missing or malformed"},
    {"invalid_sku", "The SKU cannot name a stocked item"},
    {"not_found", "No such resource"},
    {"no_route", "No such route"},
    {"method_not_allowed", "The route does not serve this method"},
    {"body_too_large", "The body is over http_body_max_bytes"},
    {"overloaded", "The front has too many requests in flight"},
    {"timeout", "The pipeline did not answer in time"},
    {"unavailable", "The front cannot send to the pipeline"},
    {"conflict", "The request conflicts with an earlier one or with the reservation"},
    {"encode", "The answer could not be encoded"},
    {"store", "The front's reservation store failed"},
    {"not_current", "The front's reservation store is behind the ledger"},
    {"not_ready", "The front is not ready"},
    {"not_configured", "Payment webhooks are not configured"},
    {"internal", "The front failed inside"},
    {"missing", "The webhook signature is missing"},
    {"malformed", "The webhook signature is malformed"},
    {"stale", "The webhook signature is too old"},
    {"future", "The webhook signature is from the future"},
    {"mismatch", "The webhook signature does not match"},
    {"insufficient", "Not enough stock"},
    {"rejected_invalid", "The pipeline refused the request as invalid"},
    {"busy", "The pipeline is shedding load"},
    {"expired", "The reservation has expired"},
    {"wrong_state", "The reservation is in another state"},
    {"unauthorized", "No valid API key"},
    {"forbidden", "The API key lacks the route's scope"},
    {"rate_limited", "The API key is over its rate"},
};
#define PROBLEM_TITLES_COUNT (sizeof problem_titles / sizeof problem_titles[0])

const char *http_problem_title(const char *code, int status)
{
    for (size_t i = 0; i < PROBLEM_TITLES_COUNT; i++)
        if (strcmp(problem_titles[i].code, code) == 0)
            return problem_titles[i].title;
    switch (status) {
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 409:
        return "Conflict";
    case 422:
        return "Unprocessable Content";
    case 503:
        return "Service Unavailable";
    default:
        return status >= 500 ? "Internal Server Error" : "Client Error";
    }
}

json_t *http_problem_new(int status, const char *code, const char *detail)
{
    hf_assert(status >= 400 && status <= 599);
    char type[sizeof HTTP_PROBLEM_TYPE_PREFIX + 64];
    snprintf(type, sizeof type, "%s%s", HTTP_PROBLEM_TYPE_PREFIX, code);
    char text[HTTP_PROBLEM_DETAIL_MAX];
    snprintf(text, sizeof text, "%s", detail);
    for (char *c = text; *c; c++) /* echoed paths may be any bytes; JSON wants UTF-8 */
        if ((unsigned char)*c >= 0x7f || (unsigned char)*c < 0x20)
            *c = '?';
    return json_pack("{s:s,s:s,s:i,s:s,s:s}", "type", type, "title",
                     http_problem_title(code, status), "status", status, "detail", text, "code",
                     code);
}

void http_problem_send(http_ctx_t *ctx, httpd_resp_t *resp, json_t *problem)
{
    int status = (int)json_integer_value(json_object_get(problem, "status"));
    hf_assert(status >= 400 && status <= 599);
    if (status == 422)
        atomic_fetch_add(&ctx->invalid, 1);
    if (status == 503 && resp->retry_after_s <= 0)
        resp->retry_after_s = ctx->cfg->http_retry_after_s;
    resp->status = status;
    resp->content_type = HTTP_PROBLEM_CONTENT_TYPE;
    resp->body_owned = json_dumps(problem, JSON_COMPACT);
    json_decref(problem);
}

void http_error(http_ctx_t *ctx, httpd_resp_t *resp, int status, const char *code, const char *fmt,
                ...)
{
    char detail[HTTP_PROBLEM_DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    json_t *problem = http_problem_new(status, code, detail);
    if (!problem) { /* out of memory: the status alone still says it */
        resp->status = status;
        return;
    }
    http_problem_send(ctx, resp, problem);
}

const char *http_outcome_code(hf_reply_outcome_t outcome)
{
    switch (outcome) {
    case HF_REPLY_REJECTED_INSUFFICIENT:
        return "insufficient";
    case HF_REPLY_CONFLICT:
        return "conflict";
    case HF_REPLY_REJECTED_INVALID:
        return "rejected_invalid";
    case HF_REPLY_NOT_FOUND:
        return "not_found";
    case HF_REPLY_BUSY:
        return "busy";
    case HF_REPLY_EXPIRED:
        return "expired";
    case HF_REPLY_HELD:
    case HF_REPLY_COMMITTED:
    case HF_REPLY_RELEASED:
    case HF_REPLY__COUNT:
        break;
    }
    return "wrong_state";
}

void http_answer_reply(http_ctx_t *ctx, httpd_resp_t *resp, int status, const hf_reply_t *reply)
{
    char *json = client_reply_json(reply);
    if (!json) {
        http_error(ctx, resp, 500, "encode", "the reply could not be written as JSON");
        return;
    }
    if (status < 400) {
        resp->status = status;
        resp->body_owned = json;
        return;
    }
    json_t *fields = json_loads(json, 0, NULL);
    free(json);
    const char *detail = reply->message[0] ? reply->message : hf_reply_outcome_name(reply->outcome);
    json_t *problem = http_problem_new(status, http_outcome_code(reply->outcome), detail);
    if (!fields || !problem) {
        json_decref(fields);
        json_decref(problem);
        resp->status = status;
        return;
    }
    /* The reply's members as extensions (outcome first, for a reader's eye);
     * none of them overwrites a problem member. */
    json_object_set(problem, "outcome", json_object_get(fields, "outcome"));
    const char *key;
    json_t *v;
    json_object_foreach(fields, key, v)
    {
        if (!json_object_get(problem, key))
            json_object_set(problem, key, v);
    }
    json_decref(fields);
    http_problem_send(ctx, resp, problem);
}

static json_t *body_object(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp,
                           size_t flags)
{
    size_t len = 0;
    const char *body = httpd_body(call->req, &len);
    json_error_t jerr;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES | flags, &jerr);
    if (!o) {
        http_error(ctx, resp, 422, "invalid_json", "the body is not JSON: %s (line %d, column %d)",
                   jerr.text, jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        http_error(ctx, resp, 422, "invalid_json", "the body must be a JSON object");
        return NULL;
    }
    return o;
}

json_t *http_body_object(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    return body_object(ctx, call, resp, 0);
}

json_t *http_body_event(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    return body_object(ctx, call, resp, JSON_DECODE_INT_AS_REAL);
}

/* Whether s is printable ASCII (blanks allowed when blank_ok) without '|'. */
static bool text_ok(const char *s, bool blank_ok)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < (blank_ok ? 0x20 : 0x21) || *p > 0x7e || *p == '|')
            return false;
    return true;
}

bool http_take_string(http_ctx_t *ctx, httpd_resp_t *resp, json_t *obj, const char *name,
                      const char *fallback, char *dst, size_t dst_size)
{
    json_t *v = json_object_get(obj, name);
    if (!v && fallback) {
        snprintf(dst, dst_size, "%s", fallback);
        return true;
    }
    if (!v || !json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) >= dst_size ||
        strlen(json_string_value(v)) != json_string_length(v) ||
        !text_ok(json_string_value(v), true)) {
        http_error(ctx, resp, 422, "invalid_field",
                   "'%s' must be a string of 1..%zu printable ASCII characters without '|' (it "
                   "separates holdfast's state keys)",
                   name, dst_size - 1);
        return false;
    }
    snprintf(dst, dst_size, "%s", json_string_value(v));
    return true;
}

bool http_take_id(http_ctx_t *ctx, httpd_resp_t *resp, json_t *obj, const char *name, char *dst,
                  size_t dst_size)
{
    hf_assert(dst_size > HF_ID_LEN_MAX);
    json_t *v = json_object_get(obj, name);
    if (!json_is_string(v)) {
        http_error(ctx, resp, 422, "invalid_field", "'%s' must be a string (a reservation id)",
                   name);
        return false;
    }
    const char *id = json_string_value(v);
    if (strlen(id) != json_string_length(v)) { /* a NUL inside */
        http_error(ctx, resp, 422, "invalid_id", "'%s' must not contain NUL characters", name);
        return false;
    }
    if (!http_path_safe_id(ctx, resp, name, id))
        return false;
    snprintf(dst, dst_size, "%s", id);
    return true;
}

bool http_only_members(http_ctx_t *ctx, httpd_resp_t *resp, json_t *obj, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, key) == 0;
        if (!ok) {
            http_error(ctx, resp, 422, "unknown_field", "unknown field '%s'", key);
            return false;
        }
    }
    return true;
}

bool http_path_safe_id(http_ctx_t *ctx, httpd_resp_t *resp, const char *what, const char *id)
{
    size_t len = strlen(id);
    bool ok = len >= 1 && len <= HF_ID_LEN_MAX && text_ok(id, false) && !strpbrk(id, "/?#%") &&
              strcmp(id, ".") != 0 && strcmp(id, "..") != 0;
    if (!ok)
        http_error(ctx, resp, 422, "invalid_id",
                   "'%s' must be 1..%d printable ASCII characters without '/', '?', '#', '%%', "
                   "'|' or blanks, and not '.' or '..' (it is a path segment of "
                   "/v1/reservations/{id}, and '|' separates holdfast's state keys)",
                   what, HF_ID_LEN_MAX);
    return ok;
}

bool http_path_id(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp, char *dst,
                  size_t dst_size)
{
    if (!http_path_safe_id(ctx, resp, "the reservation id in the path", call->params[0]))
        return false;
    snprintf(dst, dst_size, "%s", call->params[0]);
    return true;
}

bool http_idempotency_key(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp,
                          const char *fallback, char *dst, size_t dst_size)
{
    const char *k = httpd_header(call->req, "Idempotency-Key");
    /* A fallback is a body member http_take_string checked already; blanks are
     * refused only in the header, where HTTP trims them. */
    bool from_header = k != NULL;
    if (!k)
        k = fallback;
    if (!k || !k[0] || strlen(k) >= dst_size || (from_header && !text_ok(k, false))) {
        http_error(ctx, resp, 422, "invalid_idempotency_key",
                   "the Idempotency-Key header is %s: send 1..%zu printable ASCII characters "
                   "without '|' or blanks, the same on every retry",
                   k ? "malformed" : "required here", dst_size - 1);
        return false;
    }
    snprintf(dst, dst_size, "%s", k);
    return true;
}

int http_status_for(hf_rec_type_t req_type, hf_reply_outcome_t outcome, int success_status)
{
    switch (outcome) {
    case HF_REPLY_HELD: /* a payment event's answer is what payment_policy made of it */
        return req_type == HF_REC_RESERVE || req_type == HF_REC_EXTEND ||
                       req_type == HF_REC_PAYMENT_EVENT
                   ? success_status
                   : 409;
    case HF_REPLY_COMMITTED:
        return req_type == HF_REC_COMMIT || req_type == HF_REC_PAYMENT_EVENT ? success_status : 409;
    case HF_REPLY_RELEASED:
        return req_type == HF_REC_RELEASE || req_type == HF_REC_PAYMENT_EVENT ? success_status
                                                                              : 409;
    case HF_REPLY_EXPIRED: /* a release of an expired hold reached what it asked */
        return req_type == HF_REC_RELEASE ? success_status : 410;
    case HF_REPLY_REJECTED_INSUFFICIENT:
    case HF_REPLY_CONFLICT:
        return 409;
    case HF_REPLY_REJECTED_INVALID:
        return 422;
    case HF_REPLY_NOT_FOUND:
        return 404;
    case HF_REPLY_BUSY:
        return 503;
    case HF_REPLY__COUNT:
        break;
    }
    return 500;
}

void http_record_json(http_ctx_t *ctx, httpd_resp_t *resp, int status, const hf_record_t *rec)
{
    static _Thread_local uint8_t buf[HF_RECORD_LEN_MAX];
    size_t len = 0;
    char errstr[256];
    char *json = NULL;
    if (codec_encode(rec, buf, sizeof buf, &len, errstr, sizeof errstr) != HF_OK ||
        codec_to_json(buf, len, &json, errstr, sizeof errstr) != HF_OK) {
        http_error(ctx, resp, 500, "encode", "%s", errstr);
        return;
    }
    resp->status = status;
    resp->body_owned = json;
}

bool http_send(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp, hf_record_t *req,
               hf_reply_t *reply)
{
    char errstr[256];
    /* A valid W3C traceparent goes on as a child span of this hop (the front is
     * one); an invalid one is dropped, as every hop drops it. */
    const char *in_tp = httpd_header(call->req, TRACE_HEADER_NAME);
    trace_ctx_t parent, child;
    char tp_buf[TRACE_PARENT_LEN + 1];
    const char *tp = NULL;
    if (in_tp && trace_parse(in_tp, strlen(in_tp), &parent)) {
        trace_child(&parent, &child);
        trace_format(&child, tp_buf);
        tp = tp_buf;
    }
    switch (http_bridge_call(ctx->bridge, req, tp, ctx->cfg->http_reply_timeout_ms, reply, errstr,
                             sizeof errstr)) {
    case HTTP_BRIDGE_ANSWERED:
        return true;
    case HTTP_BRIDGE_FULL:
        atomic_fetch_add(&ctx->overloaded, 1);
        http_error(ctx, resp, 503, "overloaded", "%s; retry with the same Idempotency-Key", errstr);
        return false;
    case HTTP_BRIDGE_TIMEOUT:
        atomic_fetch_add(&ctx->timeouts, 1);
        http_error(ctx, resp, 503, "timeout",
                   "%s; the request may still be applied: retry with the same Idempotency-Key "
                   "for its answer",
                   errstr);
        return false;
    case HTTP_BRIDGE_FAILED:
        http_error(ctx, resp, 503, "unavailable", "cannot send to the pipeline: %s", errstr);
        return false;
    case HTTP_BRIDGE_CONFLICT:
        http_error(ctx, resp, 409, "conflict", "%s", errstr);
        return false;
    }
    http_error(ctx, resp, 500, "internal", "the bridge gave an unknown result");
    return false;
}

void http_forward(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp, hf_record_t *req,
                  int success_status)
{
    static _Thread_local hf_record_t reply;
    reply.type = HF_REC_REPLY;
    if (!http_send(ctx, call, resp, req, &reply.u.reply))
        return;
    int status = http_status_for(req->type, reply.u.reply.outcome, success_status);
    if (status == 503)
        atomic_fetch_add(&ctx->overloaded, 1);
    http_answer_reply(ctx, resp, status, &reply.u.reply);
    if (status == 201) {
        static _Thread_local char location[sizeof "/v1/reservations/" + HF_ID_LEN_MAX];
        snprintf(location, sizeof location, "/v1/reservations/%s", reply.u.reply.reservation_id);
        resp->location = location;
    }
}

/* ---- metrics and health of the front itself */

static double gauge_u64(void *p)
{
    return (double)atomic_load((_Atomic uint64_t *)p);
}
static double gauge_inflight(void *p)
{
    return http_bridge_inflight(((http_ctx_t *)p)->bridge);
}

void api_metrics(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    (void)call;
    size_t need = metrics_render(NULL, 0) + HF_METRICS_RENDER_SLACK;
    char *buf = malloc(need);
    if (!buf) {
        http_error(ctx, resp, 500, "internal", "out of memory rendering %zu bytes of metrics",
                   need);
        return;
    }
    metrics_render(buf, need);
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4";
    resp->body_owned = buf;
}

void api_healthz(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    (void)ctx;
    (void)call;
    resp->status = 200;
    resp->body = "{\"status\":\"ok\"}";
}

void api_readyz(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    (void)call;
    if (http_bridge_broken(ctx->bridge)) {
        http_error(ctx, resp, 503, "not_ready", "the request producer failed for good: restart");
        return;
    }
    int64_t view_ms = view_staleness_ms(ctx->view);
    int64_t ledger_ms = http_status_staleness_ms(ctx->status);
    int64_t max_ms = ctx->cfg->view_stale_max_ms;
    if (view_ms < 0 || view_ms > max_ms) {
        http_error(ctx, resp, 503, "not_ready", "routing view %s (view_stale_max_ms %lld)",
                   view_ms < 0 ? "not yet current" : "stale", (long long)max_ms);
        return;
    }
    if (ledger_ms < 0 || ledger_ms > max_ms) {
        http_error(ctx, resp, 503, "not_ready", "reservation store %s (view_stale_max_ms %lld)",
                   ledger_ms < 0 ? "not yet current" : "stale", (long long)max_ms);
        return;
    }
    resp->status = 200;
    resp->body = "{\"status\":\"ready\"}";
}

/* ---- listeners and TLS */

/* The listeners cfg asks for: plan[HTTP_L_CHECKOUT] always, the others when
 * their port is not -1 (else their routes go to the checkout listener, whose
 * serves_mask then has them); an entry not started has no name. */
static void http_listeners_plan(const hf_config_t *cfg, http_listener_plan_t plan[HTTP_L_COUNT])
{
    memset(plan, 0, sizeof *plan * HTTP_L_COUNT);
    plan[HTTP_L_CHECKOUT] = (http_listener_plan_t){"http",
                                                   cfg->http_bind,
                                                   cfg->http_port,
                                                   1u << HTTP_L_CHECKOUT,
                                                   cfg->http_tls_cert_file,
                                                   cfg->http_tls_key_file,
                                                   cfg->http_tls_client_ca_file};
    if (cfg->http_webhook_port < 0)
        plan[HTTP_L_CHECKOUT].serves_mask |= 1u << HTTP_L_WEBHOOK;
    else {
        bool own_cert = cfg->http_webhook_tls_cert_file[0] != '\0';
        plan[HTTP_L_WEBHOOK] = (http_listener_plan_t){
            "http-webhook",
            cfg->http_webhook_bind,
            cfg->http_webhook_port,
            1u << HTTP_L_WEBHOOK,
            own_cert ? cfg->http_webhook_tls_cert_file : cfg->http_tls_cert_file,
            own_cert ? cfg->http_webhook_tls_key_file : cfg->http_tls_key_file,
            ""};
    }
    if (cfg->http_ops_port < 0)
        plan[HTTP_L_CHECKOUT].serves_mask |= 1u << HTTP_L_OPS;
    else
        plan[HTTP_L_OPS] = (http_listener_plan_t){
            "http-ops", cfg->http_ops_bind, cfg->http_ops_port, 1u << HTTP_L_OPS, "", "", ""};
}

static int check_bind(const char *key, const char *bind, char *errstr, size_t errstr_size)
{
    struct in_addr a;
    if (inet_pton(AF_INET, bind, &a) == 1)
        return HF_OK;
    snprintf(errstr, errstr_size,
             "%s '%s' must be an IPv4 address (127.0.0.1: this host only; 0.0.0.0: every "
             "interface)",
             key, bind);
    return HF_ERR_CONFIG;
}

/* Each pair of listeners on distinct ports (0: the kernel picks, never equal). */
static int check_ports(const hf_config_t *cfg, char *errstr, size_t errstr_size)
{
    const struct {
        const char *key;
        int port;
    } p[] = {{"http_port", cfg->http_port},
             {"http_webhook_port", cfg->http_webhook_port},
             {"http_ops_port", cfg->http_ops_port}};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = i + 1; j < 3; j++)
            if (p[i].port > 0 && p[i].port == p[j].port) {
                snprintf(errstr, errstr_size,
                         "%s and %s are both %d: give each listener its own port, or -1 to "
                         "serve its routes on the checkout listener (http_port)",
                         p[i].key, p[j].key, p[i].port);
                return HF_ERR_CONFIG;
            }
    return HF_OK;
}

/* A certificate and its key come together; each pair loads and matches. */
static int check_tls_pair(const char *cert_key, const char *cert, const char *key_key,
                          const char *key, const char *ca_file, char *errstr, size_t errstr_size)
{
    if (!cert[0] && !key[0])
        return HF_OK;
    if (!cert[0] || !key[0]) {
        snprintf(errstr, errstr_size,
                 "%s is set but %s is not: TLS needs both the certificate chain (PEM) and its "
                 "private key (PEM), or neither for plain HTTP",
                 cert[0] ? cert_key : key_key, cert[0] ? key_key : cert_key);
        return HF_ERR_CONFIG;
    }
    return httpd_tls_check_files(cert, key, ca_file, errstr, errstr_size);
}

static int check_tls(const hf_config_t *cfg, char *errstr, size_t errstr_size)
{
    if (cfg->http_tls_client_ca_file[0] && !cfg->http_tls_cert_file[0]) {
        snprintf(errstr, errstr_size,
                 "http_tls_client_ca_file is set but http_tls_cert_file is not: mutual TLS "
                 "needs TLS (set http_tls_cert_file and http_tls_key_file)");
        return HF_ERR_CONFIG;
    }
    if (cfg->http_tls_client_ca_file[0] && cfg->http_ops_port < 0) {
        /* Prometheus and the supervisor's probes present no client certificate:
         * their handshakes would fail. */
        snprintf(errstr, errstr_size,
                 "http_tls_client_ca_file asks every client of the checkout listener for a "
                 "certificate, and /metrics /healthz /readyz are served there (http_ops_port "
                 "-1): health checks and Prometheus present none. Set http_ops_port to give "
                 "them their own listener (plain HTTP on http_ops_bind, 127.0.0.1 by default)");
        return HF_ERR_CONFIG;
    }
    int err =
        check_tls_pair("http_tls_cert_file", cfg->http_tls_cert_file, "http_tls_key_file",
                       cfg->http_tls_key_file, cfg->http_tls_client_ca_file, errstr, errstr_size);
    if (err)
        return err;
    bool webhook_cert = cfg->http_webhook_tls_cert_file[0] || cfg->http_webhook_tls_key_file[0];
    if (webhook_cert && cfg->http_webhook_port < 0) {
        snprintf(errstr, errstr_size,
                 "http_webhook_tls_cert_file/http_webhook_tls_key_file need the webhook on its "
                 "own listener (set http_webhook_port); with http_webhook_port -1 the webhook "
                 "is served with the checkout listener's http_tls_cert_file");
        return HF_ERR_CONFIG;
    }
    return check_tls_pair("http_webhook_tls_cert_file", cfg->http_webhook_tls_cert_file,
                          "http_webhook_tls_key_file", cfg->http_webhook_tls_key_file, "", errstr,
                          errstr_size);
}

/* Starts the listeners of plan, logging each one's URL. */
static int start_listeners(http_api_t *api, const hf_config_t *cfg, int *bound_port, char *errstr,
                           size_t errstr_size)
{
    http_listener_plan_t plan[HTTP_L_COUNT];
    http_listeners_plan(cfg, plan);
    static const char *const kinds[HTTP_L_COUNT] = {"checkout routes", "payment webhook",
                                                    "/metrics /healthz /readyz"};
    for (int l = 0; l < HTTP_L_COUNT; l++) {
        if (!plan[l].name)
            continue;
        httpd_opts_t ho = {.bind = plan[l].bind,
                           .port = plan[l].port,
                           .connections_max = cfg->http_connections_max,
                           .body_max_bytes = (size_t)cfg->http_body_max_bytes,
                           .idle_timeout_s = HTTP_IDLE_TIMEOUT_S,
                           .handler = on_http,
                           .opaque = &api->ctx,
                           .name = plan[l].name,
                           .tag = (int)plan[l].serves_mask,
                           .tls_cert_file = plan[l].tls_cert_file,
                           .tls_key_file = plan[l].tls_key_file,
                           .tls_client_ca_file = plan[l].tls_client_ca_file,
                           .tls_refused = &api->ctx.tls_refused};
        int port = 0;
        int err = httpd_start(&ho, &api->servers[l], &port, errstr, errstr_size);
        if (err)
            return err;
        /* served: the kinds joined, at most all three. */
        char served[sizeof "checkout routes, payment webhook, /metrics /healthz /readyz"] = "";
        char tls[HTTPD_TLS_DESCRIBE_BYTES] = "";
        for (int k = 0; k < HTTP_L_COUNT; k++)
            if (plan[l].serves_mask & (1u << k)) {
                size_t n = strlen(served);
                snprintf(served + n, sizeof served - n, "%s%s", n ? ", " : "", kinds[k]);
            }
        httpd_tls_describe(api->servers[l], tls, sizeof tls);
        log_info(plan[l].name, "%s listener on %s://%s:%d/ (%s)%s%s", http_listener_names[l],
                 httpd_tls(api->servers[l]) ? "https" : "http", plan[l].bind, port, served,
                 tls[0] ? ", TLS " : "", tls);
        if (l == HTTP_L_CHECKOUT)
            *bound_port = port;
    }
    api->ctx.server = api->servers[HTTP_L_CHECKOUT];
    return HF_OK;
}

/* SIGHUP: every TLS listener re-reads its files; one that fails keeps serving
 * its previous certificate, and says why. */
static void http_api_reload_tls(http_api_t *api)
{
    int tls_listeners = 0;
    for (int l = 0; l < HTTP_L_COUNT; l++) {
        httpd_t *server = api->servers[l];
        if (!server || !httpd_tls(server))
            continue;
        tls_listeners++;
        char errstr[512], tls[HTTPD_TLS_DESCRIBE_BYTES];
        if (httpd_reload_tls(server, errstr, sizeof errstr) != HF_OK) {
            httpd_tls_describe(server, tls, sizeof tls);
            log_error("http",
                      "SIGHUP: %s listener: TLS reload failed, still serving the previous "
                      "certificate (%s): %s",
                      http_listener_names[l], tls, errstr);
            continue;
        }
        httpd_tls_describe(server, tls, sizeof tls);
        log_info("http", "SIGHUP: the %s listener reloaded its TLS files: now %s",
                 http_listener_names[l], tls);
    }
    if (tls_listeners == 0)
        log_info("http", "SIGHUP: no listener serves TLS, no certificate to reload");
}

/* The ops routes on the checkout listener, beyond this host: they answer
 * whoever reaches the checkout routes, without a key. Allowed (the default
 * http_ops_port -1 keeps one listener), but said at start. */
static void warn_public_ops(const hf_config_t *cfg)
{
    struct in_addr a;
    if (cfg->http_ops_port >= 0 || inet_pton(AF_INET, cfg->http_bind, &a) != 1)
        return;
    if ((ntohl(a.s_addr) >> 24) == 127) /* 127.0.0.0/8: this host only */
        return;
    log_warn("http",
             "http_ops_port is -1: /metrics /healthz /readyz are served on the checkout listener "
             "(http_bind %s), reachable wherever the checkout routes are and without an API "
             "key. Set http_ops_port (and http_ops_bind, 127.0.0.1 by default) to give them "
             "their own listener",
             cfg->http_bind);
}

/* ---- start and stop */

int http_api_check_config(const hf_config_t *cfg, char *errstr, size_t errstr_size)
{
    struct in_addr a;
    if (inet_pton(AF_INET, cfg->http_bind, &a) != 1) {
        snprintf(errstr, errstr_size,
                 "http_bind '%s' must be an IPv4 address (127.0.0.1: this host only; 0.0.0.0: "
                 "every interface)",
                 cfg->http_bind);
        return HF_ERR_CONFIG;
    }
    if (cfg->http_inflight_max >= cfg->http_connections_max) {
        /* Each connection carries one request at a time: with as many slots as
         * connections the 503 could never come, and the connection past the
         * limit is refused (reset) instead. */
        snprintf(errstr, errstr_size,
                 "http_inflight_max %d must be below http_connections_max %d, so that an "
                 "overload is answered 503 rather than refused",
                 cfg->http_inflight_max, cfg->http_connections_max);
        return HF_ERR_CONFIG;
    }
    int err = api_auth_check_config(cfg, errstr, errstr_size);
    if (err)
        return err;
    webhook_secrets_t secrets;
    err = api_webhook_secrets(cfg, &secrets, errstr, errstr_size);
    if (!err)
        err = check_bind("http_webhook_bind", cfg->http_webhook_bind, errstr, errstr_size);
    if (!err)
        err = check_bind("http_ops_bind", cfg->http_ops_bind, errstr, errstr_size);
    if (!err)
        err = check_ports(cfg, errstr, errstr_size);
    if (!err)
        err = check_tls(cfg, errstr, errstr_size);
    if (!err && cfg->http_tls_client_ca_file[0] && cfg->http_webhook_port < 0 &&
        secrets.secrets_count > 0) {
        snprintf(errstr, errstr_size,
                 "http_tls_client_ca_file asks every client of the checkout listener for a "
                 "certificate, and the payment webhook is served there (http_webhook_port -1): "
                 "a provider presents none. Give the webhook its own listener "
                 "(http_webhook_port)");
        err = HF_ERR_CONFIG;
    }
    return err;
}

int http_api_start(const hf_config_t *cfg, const kafka_conf_t *kconf, http_api_t **out,
                   int *bound_port, char *errstr, size_t errstr_size)
{
    int err = http_api_check_config(cfg, errstr, errstr_size);
    if (err)
        return err;
    http_api_t *api = calloc(1, sizeof *api);
    if (!api)
        return HF_ERR_NOMEM;
    http_ctx_t *ctx = &api->ctx;
    ctx->cfg = cfg;
    if (api_webhook_secrets(cfg, &ctx->webhook_secrets, errstr, errstr_size) != HF_OK) {
        free(api);
        return HF_ERR_CONFIG;
    }
    int n = snprintf(ctx->reply_topic, sizeof ctx->reply_topic, "%s%shttp-%s", topics_prefix(),
                     cfg->reply_topic_prefix, cfg->instance_id);
    if (!cfg->reply_topic_prefix[0] || n < 0 || (size_t)n >= sizeof ctx->reply_topic) {
        snprintf(errstr, errstr_size,
                 "reply_topic_prefix must be set (the front's replies go to a topic under it) "
                 "and the reply topic name must fit %d bytes",
                 HF_TOPIC_LEN_MAX);
        free(api);
        return HF_ERR_CONFIG;
    }
    char dir[HF_CONFIG_STR_MAX + 80];
    snprintf(dir, sizeof dir, "%s/http-%s", cfg->state_dir, cfg->instance_id);
    http_bridge_opts_t bo = {kconf, ctx->reply_topic, cfg->http_inflight_max,
                             cfg->http_reply_retention_ms};
    err = view_new(kconf, topic_name(HF_T_AVAILABILITY), &ctx->view, errstr, errstr_size);
    /* A stored offset the ledger no longer has (the front was down longer than the
     * ledger's retention) restarts from the earliest one left, not the end:
     * applying an event twice is harmless, skipping some is not. */
    static const char *const ledger_overrides[] = {"auto.offset.reset=earliest", NULL};
    kafka_conf_t ledger_conf = {kconf->bootstrap, kconf->client_id, ledger_overrides};
    if (!err)
        err = http_status_new(&ledger_conf, topic_name(HF_T_LEDGER), dir,
                              cfg->reservation_retention_ms, &ctx->status, errstr, errstr_size);
    if (!err)
        err = http_bridge_new(&bo, &ctx->bridge, errstr, errstr_size);
    if (!err)
        err = api_auth_start(ctx, errstr, errstr_size);
    if (!err && view_wait_ready(ctx->view, HTTP_VIEW_WAIT_MS) != HF_OK)
        log_warn("http", "routing view not current after %d ms; serving, /readyz says 503",
                 HTTP_VIEW_WAIT_MS);
    if (!err) {
        metrics_counter_read("holdfast_http_requests_total", "HTTP requests received", gauge_u64,
                             &ctx->requests);
        metrics_counter_read("holdfast_http_overloaded_total",
                             "Requests answered 503 (busy or full)", gauge_u64, &ctx->overloaded);
        metrics_counter_read("holdfast_http_timeouts_total",
                             "Requests answered 503 (no reply within http_reply_timeout_ms)",
                             gauge_u64, &ctx->timeouts);
        metrics_counter_read("holdfast_http_invalid_total", "Requests answered 422", gauge_u64,
                             &ctx->invalid);
        metrics_counter_read("holdfast_http_webhook_bad_signatures_total",
                             "Payment webhooks refused 401 (signature)", gauge_u64,
                             &ctx->bad_signatures);
        metrics_counter_read("holdfast_http_tls_refused_total",
                             "TLS handshakes refused for their client certificate (mutual TLS)",
                             gauge_u64, &ctx->tls_refused);
        metrics_gauge("holdfast_http_inflight", "Requests waiting for the pipeline", gauge_inflight,
                      ctx);
        warn_public_ops(cfg);
        err = start_listeners(api, cfg, bound_port, errstr, errstr_size);
    }
    if (err) {
        http_api_stop(api);
        return err;
    }
    *out = api;
    return HF_OK;
}

void http_api_reload(http_api_t *api)
{
    /* What SIGHUP re-reads, each part on its own: a failed one keeps what it had. */
    http_api_reload_tls(api);
    api_auth_reload(&api->ctx);
}

bool http_api_broken(http_api_t *api)
{
    return http_bridge_broken(api->ctx.bridge);
}

void http_api_stop(http_api_t *api)
{
    if (!api)
        return;
    for (int l = 0; l < HTTP_L_COUNT; l++)
        httpd_stop(api->servers[l]);
    http_bridge_destroy(api->ctx.bridge);
    http_status_destroy(api->ctx.status);
    view_destroy(api->ctx.view);
    api_auth_stop(&api->ctx);
    free(api);
}
