/* POST /v1/reservations/{id}/extend: more time for a slow checkout. Body
 * {"extend_by_ms": 60000}; an Idempotency-Key header is required (each
 * extension is its own request). 200 with the new expires_at_ms; the gateway
 * caps the total hold time (hold_max_factor_pct). */
#include <string.h>

#include "hf_limits.h"
#include "http_api_int.h"

void api_extend(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    hf_record_t rec = {.type = HF_REC_EXTEND};
    hf_extend_t *x = &rec.u.extend;
    json_t *body = http_body_object(ctx, call, resp);
    if (!body)
        return;
    static const char *const members[] = {"extend_by_ms", NULL};
    json_t *by = json_object_get(body, "extend_by_ms");
    bool ok = http_only_members(ctx, resp, body, members);
    if (ok && (!json_is_integer(by) || json_integer_value(by) < 1 ||
               json_integer_value(by) > HF_TTL_MAX_MS)) {
        http_error(ctx, resp, 422, "invalid_field", "'extend_by_ms' must be an integer in 1..%lld",
                   (long long)HF_TTL_MAX_MS);
        ok = false;
    }
    if (ok)
        x->extend_by_ms = json_integer_value(by);
    json_decref(body);
    if (!ok ||
        !http_idempotency_key(ctx, call, resp, NULL, x->idempotency_key, sizeof x->idempotency_key))
        return;
    if (!http_path_id(ctx, call, resp, x->reservation_id, sizeof x->reservation_id))
        return;
    http_forward(ctx, call, resp, &rec, 200);
}
