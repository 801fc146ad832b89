/* POST /v1/reservations/{id}/release: the shopper abandoned the checkout; the
 * held stock goes back. Body optional: {"reason": "abandoned"}. The
 * Idempotency-Key defaults to "release" (a reservation is released once). 200
 * when released, or when it had already expired. */
#include <string.h>

#include "http_api_int.h"

void api_release(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    hf_record_t rec = {.type = HF_REC_RELEASE};
    hf_release_t *r = &rec.u.release;
    size_t len = 0;
    httpd_body(call->req, &len);
    json_t *body = len ? http_body_object(ctx, call, resp) : json_object();
    if (!body)
        return;
    static const char *const members[] = {"reason", NULL};
    bool ok =
        http_only_members(ctx, resp, body, members) &&
        http_take_string(ctx, resp, body, "reason", "abandoned", r->reason, sizeof r->reason) &&
        http_idempotency_key(ctx, call, resp, "release", r->idempotency_key,
                             sizeof r->idempotency_key);
    json_decref(body);
    if (!ok)
        return;
    if (!http_path_id(ctx, call, resp, r->reservation_id, sizeof r->reservation_id))
        return;
    http_forward(ctx, call, resp, &rec, 200);
}
