/* POST /v1/reservations/{id}/commit: payment confirmed, the hold becomes a sale.
 * Body {"payment_id": "pay-1"}; the Idempotency-Key defaults to the payment_id
 * (the same payment committed twice is one commit). The payment provider's
 * webhook (api_webhook.c) is the usual way in; this route is for a checkout
 * that confirms payment itself. */
#include <string.h>

#include "http_api_int.h"

void api_commit(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    hf_record_t rec = {.type = HF_REC_COMMIT};
    hf_commit_t *c = &rec.u.commit;
    json_t *body = http_body_object(ctx, call, resp);
    if (!body)
        return;
    static const char *const members[] = {"payment_id", NULL};
    bool ok = http_only_members(ctx, resp, body, members) &&
              http_take_string(ctx, resp, body, "payment_id", NULL, c->payment_id,
                               sizeof c->payment_id) &&
              http_idempotency_key(ctx, call, resp, c->payment_id, c->idempotency_key,
                                   sizeof c->idempotency_key);
    json_decref(body);
    if (!ok)
        return;
    if (!http_path_id(ctx, call, resp, c->reservation_id, sizeof c->reservation_id))
        return;
    http_forward(ctx, call, resp, &rec, 200);
}
