/* Inside the HTTP front: what the route handlers (one file per request kind:
 * api_reserve.c, api_commit.c, ...) share. Not for use outside processor/http/. */
#ifndef HF_HTTP_API_INT_H
#define HF_HTTP_API_INT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "api_keys.h"
#include "config.h"
#include "http_bridge.h"
#include "http_status.h"
#include "httpd.h"
#include "records.h"
#include "view.h"
#include "webhook_sig.h"

#define HTTP_PARAMS_MAX     2
/* A reservation the client just heard about may take the ledger reader a few
 * ms to see: GET waits up to this for it before answering 404. */
#define HTTP_STATUS_WAIT_MS 300

typedef struct {
    const hf_config_t *cfg;
    http_bridge_t *bridge;
    http_status_t *status;
    view_t *view;
    httpd_t *server;
    char reply_topic[HF_TOPIC_LEN_MAX + 1];
    webhook_secrets_t webhook_secrets; /* none: webhooks answered 503 */
    api_keys_t *keys;                  /* NULL: no keys file, the checkout routes are open */
    /* Counters exported as metrics (http_api.c). */
    _Atomic uint64_t requests, overloaded, timeouts, bad_signatures, invalid;
    _Atomic uint64_t unauthorized, forbidden, rate_limited; /* api_auth.c */
    _Atomic uint64_t tls_refused; /* client certificates refused (httpd.c counts) */
} http_ctx_t;

/* One routed request: the path's {params} in order. */
typedef struct {
    const httpd_req_t *req;
    const char *params[HTTP_PARAMS_MAX];
    char param_buf[HTTP_PARAMS_MAX][HF_ID_LEN_MAX * 3 + 1];
    char key_id[HF_API_KEY_ID_LEN_MAX + 1]; /* the caller's API key (api_auth); "": none */
} http_call_t;

typedef void (*http_route_fn)(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);

/* Which listener serves a route: the checkout routes (internal callers), the
 * payment provider's webhook, and the operators' metrics and health. */
typedef enum { HTTP_L_CHECKOUT, HTTP_L_WEBHOOK, HTTP_L_OPS, HTTP_L_COUNT } http_listener_t;

/* What an API key must be allowed to call a route (HTTP_SCOPE_NONE: no key:
 * the webhook is authenticated by its signature, the ops routes by their bind). */
typedef enum {
    HTTP_SCOPE_NONE,
    HTTP_SCOPE_RESERVE,
    HTTP_SCOPE_COMMIT,
    HTTP_SCOPE_RELEASE,
    HTTP_SCOPE_READ,
} http_scope_t;

/* ---- handlers */
void api_reserve(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_commit(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_release(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_extend(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_status(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_availability(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_webhook(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_metrics(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_healthz(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
void api_readyz(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);

/* Parses webhook_secrets (api_webhook.c) into out: HF_ERR_CONFIG naming the key
 * when one is refused (too short, blanks) or there are too many. */
int api_webhook_secrets(const hf_config_t *cfg, webhook_secrets_t *out, char *errstr,
                        size_t errstr_size);

/* ---- API keys (api_auth.c, on api_keys.h) */

/* Whether the call may go on to the route's handler: true for HTTP_SCOPE_NONE, with
 * no keys file, or for a known key with the scope and a token (its id then in
 * call->key_id); else false after answering 401 (+ WWW-Authenticate), 403 or 429
 * (+ Retry-After), counted. */
bool api_auth(http_ctx_t *ctx, http_call_t *call, http_scope_t scope, httpd_resp_t *resp);
/* Reads http_api_keys_file (when set) into ctx->keys and registers the metrics;
 * HF_ERR_CONFIG naming the file and line. Without a file it warns that the
 * checkout routes are open. */
int api_auth_start(http_ctx_t *ctx, char *errstr, size_t errstr_size);
/* SIGHUP: reads the keys file again; a bad file keeps the keys in use (logged). */
void api_auth_reload(http_ctx_t *ctx);
/* Whether http_api_keys_file reads (HF_ERR_CONFIG naming the line when not). */
int api_auth_check_config(const hf_config_t *cfg, char *errstr, size_t errstr_size);
void api_auth_stop(http_ctx_t *ctx);

/* ---- shared helpers (http_api.c) */

/* ---- the one error answer: RFC 9457 problem details
 *
 * Every 4xx and 5xx the front writes is application/problem+json:
 *   {"type": "urn:holdfast:problem:<code>", "title": <the code's fixed summary>,
 *    "status": <the HTTP status>, "detail": <this occurrence: what to do>,
 *    "code": <code>}
 * plus, when the pipeline decided (http_forward), its "outcome" and the rest of
 * the Reply (reservation_id, idempotency_key, allocations, ...) as extension
 * members. code is stable (clients branch on it); detail is for people. */
#define HTTP_PROBLEM_CONTENT_TYPE "application/problem+json"
#define HTTP_PROBLEM_TYPE_PREFIX  "urn:holdfast:problem:"
/* Room for one problem's detail (a longer one is cut). */
#define HTTP_PROBLEM_DETAIL_MAX   512

/* The fixed title of a problem code ("invalid_field": "A field is missing,
 * of the wrong type or out of range"); the status's reason phrase for a code
 * not in the table. Never NULL. */
const char *http_problem_title(const char *code, int status);

/* A new problem object (the caller owns it); detail's bytes outside printable
 * ASCII become '?' (it may echo a path). NULL when out of memory. */
json_t *http_problem_new(int status, const char *code, const char *detail);

/* Answers resp with problem (stolen: decref'd here), its status, the problem
 * content type and, for a 503, Retry-After; counts 422s. */
void http_problem_send(http_ctx_t *ctx, httpd_resp_t *resp, json_t *problem);

/* http_problem_send of http_problem_new(status, code, printf(fmt, ...)). */
void http_error(http_ctx_t *ctx, httpd_resp_t *resp, int status, const char *code, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));

/* The problem code of a pipeline's answer that is not the request's success:
 * "insufficient", "conflict", "rejected_invalid", "not_found", "busy",
 * "expired", or "wrong_state" (HELD, COMMITTED or RELEASED answered to another
 * kind of request: the reservation is in that state). */
const char *http_outcome_code(hf_reply_outcome_t outcome);

/* Answers resp with a pipeline's reply under status: the Reply JSON for a 2xx,
 * else a problem with code http_outcome_code, the reply's message as detail and
 * the reply's members (outcome first among them) as extensions. */
void http_answer_reply(http_ctx_t *ctx, httpd_resp_t *resp, int status, const hf_reply_t *reply);

/* The request body as a JSON object, or NULL after answering 422 (not JSON, not
 * an object). The caller decrefs. */
json_t *http_body_object(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);
/* http_body_object for a provider's event, of which only strings are read: its
 * numbers, whatever their size, are decoded as reals rather than refused (a
 * provider's extra members must not make an event 422). */
json_t *http_body_event(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp);

/* Copies a string member (or the fallback when absent and fallback != NULL) into
 * dst; false after answering 422 (missing, not a string, empty, too long, or a
 * character outside printable ASCII, or '|': the gateway's key separator; ASCII
 * keeps the document's maxLength, in characters, the bytes the server counts). */
bool http_take_string(http_ctx_t *ctx, httpd_resp_t *resp, json_t *obj, const char *name,
                      const char *fallback, char *dst, size_t dst_size);
/* Copies the reservation id member name into dst (dst_size > HF_ID_LEN_MAX);
 * false after answering 422: invalid_field when it is missing or not a string,
 * invalid_id when http_path_safe_id refuses it. */
bool http_take_id(http_ctx_t *ctx, httpd_resp_t *resp, json_t *obj, const char *name, char *dst,
                  size_t dst_size);

/* Fails (422) when obj has a member not in allowed (NULL-terminated): a typo
 * must not be silently ignored. */
bool http_only_members(http_ctx_t *ctx, httpd_resp_t *resp, json_t *obj,
                       const char *const *allowed);

/* Whether id is a reservation id the front can serve: 1..HF_ID_LEN_MAX
 * printable ASCII characters, none of them '/', '?', '#', '%', blank (libmicrohttpd
 * decodes the path before routing, so such an id could be created but never
 * reached) or '|' (the gateway's key separator: it dead-letters such a request
 * without an answer), and not "." or ".." (clients remove such path segments);
 * false after answering 422 invalid_id. */
bool http_path_safe_id(http_ctx_t *ctx, httpd_resp_t *resp, const char *what, const char *id);

/* The {id} of the path into dst after http_path_safe_id; false after 422. */
bool http_path_id(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp, char *dst,
                  size_t dst_size);

/* The Idempotency-Key header, else fallback (NULL: required); false after 422.
 * A header key is 1..dst_size-1 printable ASCII characters other than '|' and
 * blank (the gateway refuses '|' and control characters; HTTP trims blanks); a
 * fallback is a body member http_take_string already checked. */
bool http_idempotency_key(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp,
                          const char *fallback, char *dst, size_t dst_size);

/* Sends req through the bridge and waits for its reply: true with *reply
 * filled, false after answering resp with a problem (503 with Retry-After when
 * the front is full, the pipeline slow or unreachable; 409 when another request
 * under the key is in flight). */
bool http_send(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp, hf_record_t *req,
               hf_reply_t *reply);

/* Sends req through the bridge and answers (http_answer_reply) with a status
 * from the reply's outcome (success_status when it is one of the request's
 * successes); a problem 503 with Retry-After when the pipeline is full, slow or
 * cannot be sent to, 409 when another request under the key is in flight. */
void http_forward(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp, hf_record_t *req,
                  int success_status);

/* Whether path matches a route pattern ("/v1/reservations/{id}/commit": a
 * {name} matches one non-empty segment shorter than param_buf), capturing the
 * {params} into call. */
bool http_route_match(const char *pattern, const char *path, http_call_t *call);

/* The HTTP status for a reply outcome to a request of type req_type. */
int http_status_for(hf_rec_type_t req_type, hf_reply_outcome_t outcome, int success_status);

/* A record as the JSON the CLI prints (codec_to_json), as resp's body. */
void http_record_json(http_ctx_t *ctx, httpd_resp_t *resp, int status, const hf_record_t *rec);

#endif
