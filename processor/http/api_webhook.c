/* POST /v1/webhooks/payments: the payment provider tells holdfast a payment
 * succeeded; that is the source of truth for a commit. The body is signed
 * (webhook_sig.h: header Holdfast-Signature, HMAC-SHA256 over "<t>.<body>" with a
 * shared secret, webhook_tolerance_s against replays); a bad signature is 401
 * and counted, nothing is sent. The event
 *   {"id": "evt-1", "type": "payment.succeeded", "created": 1700000000,
 *    "data": {"reservation_id": "r-1", "payment_id": "pay-1"}}
 * becomes a Commit whose idempotency key is the event id, so the provider's
 * retries (at-least-once delivery) get the first answer again. Other event types
 * are acknowledged (200, "ignored") so that the provider stops sending them. Any
 * answer the pipeline gave for good is 200 (the outcome is in the body); a 503
 * (pipeline busy or slow) makes the provider retry later, which is safe. */
#include <string.h>

#include "hf_clock.h"
#include "http_api_int.h"

/* The event type that becomes a Commit. */
#define WEBHOOK_PAID         "payment.succeeded"
/* Room for an ignored event's type in the acknowledgement (longer is cut). */
#define WEBHOOK_TYPE_LEN_MAX 63

int api_webhook_secrets(const hf_config_t *cfg, webhook_secrets_t *out, char *errstr,
                        size_t errstr_size)
{
    webhook_secrets_init(out);
    char list[HF_CONFIG_STR_MAX];
    snprintf(list, sizeof list, "%s", cfg->webhook_secrets);
    char *save = NULL;
    for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        char why[256];
        if (webhook_secrets_add(out, s, why, sizeof why) != HF_OK) {
            snprintf(errstr, errstr_size, "webhook_secrets: secret %zu: %s", out->secrets_count + 1,
                     why);
            return HF_ERR_CONFIG;
        }
    }
    return HF_OK;
}

void api_webhook(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    if (ctx->webhook_secrets.secrets_count == 0) {
        http_error(ctx, resp, 503, "not_configured",
                   "payment webhooks are off: set webhook_secrets (or HOLDFAST_WEBHOOK_SECRETS)");
        return;
    }
    size_t len = 0;
    const char *raw = httpd_body(call->req, &len);
    char why[256];
    webhook_sig_result_t v = webhook_sig_verify(
        &ctx->webhook_secrets, httpd_header(call->req, WEBHOOK_SIG_HEADER_NAME), raw, len,
        hf_wall_ms() / 1000, ctx->cfg->webhook_tolerance_s, why, sizeof why);
    if (v == WEBHOOK_SIG_INTERNAL) {
        http_error(ctx, resp, 503, "internal", "%s", why);
        return;
    }
    if (v != WEBHOOK_SIG_OK) {
        atomic_fetch_add(&ctx->bad_signatures, 1);
        http_error(ctx, resp, 401, webhook_sig_result_name(v), "%s", why);
        return;
    }
    json_t *body = http_body_event(ctx, call, resp);
    if (!body)
        return;
    hf_record_t rec = {.type = HF_REC_COMMIT};
    hf_commit_t *c = &rec.u.commit;
    char type[WEBHOOK_TYPE_LEN_MAX + 1];
    json_t *data = json_object_get(body, "data");
    json_t *type_v = json_object_get(body, "type");
    snprintf(type, sizeof type, "%s", json_is_string(type_v) ? json_string_value(type_v) : "");
    size_t type_len = strlen(type);
    if (type_len == WEBHOOK_TYPE_LEN_MAX) { /* cut: not inside a UTF-8 character */
        while (type_len > 0 && ((unsigned char)type[type_len - 1] & 0xC0) == 0x80)
            type_len--;
        if (type_len > 0 && (unsigned char)type[type_len - 1] >= 0xC0)
            type_len--;
        type[type_len] = '\0';
    }
    bool ok = http_take_string(ctx, resp, body, "id", NULL, c->idempotency_key,
                               sizeof c->idempotency_key);
    /* Any type but payment.succeeded (or none) is acknowledged and ignored: a
     * provider would retry a 4xx for days. */
    if (ok && (!json_is_string(type_v) || strcmp(json_string_value(type_v), WEBHOOK_PAID) != 0)) {
        json_t *o =
            json_pack("{s:b,s:s,s:s}", "ignored", 1, "id", c->idempotency_key, "type", type);
        resp->status = 200;
        resp->body_owned = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        json_decref(body);
        return;
    }
    if (ok && !json_is_object(data)) {
        http_error(ctx, resp, 422, "invalid_field",
                   "'data' must be {\"reservation_id\": ..., \"payment_id\": ...}");
        ok = false;
    }
    ok = ok &&
         http_take_id(ctx, resp, data, "reservation_id", c->reservation_id,
                      sizeof c->reservation_id) &&
         http_take_string(ctx, resp, data, "payment_id", NULL, c->payment_id, sizeof c->payment_id);
    json_decref(body);
    if (!ok)
        return;
    static _Thread_local hf_record_t reply;
    reply.type = HF_REC_REPLY;
    if (!http_send(ctx, call, resp, &rec, &reply.u.reply))
        return;
    /* A provider retries every non-2xx for days and may turn the endpoint off.
     * Once the pipeline has answered for good (a conflicting payment, a late one
     * the ledger records as LATE_PAYMENT, an unknown reservation, an event the
     * gateway refused as invalid), retrying cannot change the answer: 200 with
     * the Reply, the outcome in it. Only what a retry may change stays a problem:
     * 503 (busy, slow); the front's own 4xx for an event it could not read were
     * answered above. */
    int status = http_status_for(HF_REC_COMMIT, reply.u.reply.outcome, 200);
    if (status < 500)
        status = 200;
    if (status == 503)
        atomic_fetch_add(&ctx->overloaded, 1);
    http_answer_reply(ctx, resp, status, &reply.u.reply);
}
