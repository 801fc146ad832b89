/* POST /v1/webhooks/payments: the payment provider tells holdfast what became
 * of the payment for a reservation; that is the source of truth for a commit,
 * and (payment_policy, at the gateway) it drives the hold: pending extends it,
 * canceled releases it, failed keeps or releases it. The body is signed
 * (webhook_sig.h: header Holdfast-Signature, HMAC-SHA256 over "<t>.<body>" with a
 * shared secret, webhook_tolerance_s against replays); a bad signature is 401
 * and counted, nothing is sent. The event
 *   {"id": "evt-1", "type": "payment.succeeded", "created": 1700000000,
 *    "data": {"reservation_id": "r-1", "payment_id": "pay-1", "reason": "..."}}
 * becomes a Commit (payment.succeeded: what every gateway version applies, so a
 * front upgraded before its gateways loses no sale) or a PaymentEvent
 * (payment.processing, payment.requires_action, payment.failed,
 * payment.canceled; "reason" read when a string, cut to HF_PAYMENT_REASON_LEN_MAX bytes),
 * whose idempotency key is the event id, so the provider's retries
 * (at-least-once delivery) get the first answer again. Other event types are
 * acknowledged (200, "ignored") so that the provider stops sending them. Any
 * answer the pipeline gave for good is 200 (the outcome is in the body); a 503
 * (pipeline busy or slow) makes the provider retry later, which is safe. */
#include <string.h>

#include "hf_clock.h"
#include "http_api_int.h"

/* Room for an ignored event's type in the acknowledgement (longer is cut). */
#define WEBHOOK_TYPE_LEN_MAX 63

/* Cuts s to at most len_max bytes, not inside a UTF-8 character. */
static void cut_utf8(char *s, size_t len_max)
{
    size_t len = strlen(s);
    if (len <= len_max)
        return;
    len = len_max;
    /* s[len] is the first byte dropped: step back while it continues a character */
    while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
        len--;
    s[len] = '\0';
}

/* The provider's reason (data.reason) when it is a string: cut to fit, control
 * characters replaced, so a ledger reason stays one readable line. Any other
 * value (null, a provider's error object) is no reason: a payment event is
 * never refused over a member holdfast only records. */
static void take_reason(json_t *data, char *dst, size_t dst_size)
{
    json_t *v = json_object_get(data, "reason");
    snprintf(dst, dst_size, "%s", json_is_string(v) ? json_string_value(v) : "");
    cut_utf8(dst, HF_PAYMENT_REASON_LEN_MAX);
    for (char *c = dst; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
}

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
    char type[WEBHOOK_TYPE_LEN_MAX * 4 + 1];
    json_t *data = json_object_get(body, "data");
    json_t *type_v = json_object_get(body, "type");
    snprintf(type, sizeof type, "%s", json_is_string(type_v) ? json_string_value(type_v) : "");
    hf_payment_event_kind_t kind =
        strncmp(type, "payment.", 8) == 0 ? hf_payment_event_kind_parse(type) : HF_PAY_UNKNOWN;
    cut_utf8(type, WEBHOOK_TYPE_LEN_MAX);
    char event_id[HF_ID_LEN_MAX + 1];
    bool ok = http_take_string(ctx, resp, body, "id", NULL, event_id, sizeof event_id);
    /* Any other type (or none) is acknowledged and ignored: a provider would
     * retry a 4xx for days. */
    if (ok && kind == HF_PAY_UNKNOWN) {
        json_t *o = json_pack("{s:b,s:s,s:s}", "ignored", 1, "id", event_id, "type", type);
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
    hf_id_t reservation_id, payment_id;
    ok = ok &&
         http_take_id(ctx, resp, data, "reservation_id", reservation_id, sizeof reservation_id) &&
         http_take_string(ctx, resp, data, "payment_id", NULL, payment_id, sizeof payment_id);
    hf_record_t rec;
    if (ok && kind == HF_PAY_SUCCEEDED) {
        hf_commit_t *c = &hf_record_reset(&rec, HF_REC_COMMIT)->u.commit;
        snprintf(c->reservation_id, sizeof c->reservation_id, "%s", reservation_id);
        snprintf(c->idempotency_key, sizeof c->idempotency_key, "%s", event_id);
        snprintf(c->payment_id, sizeof c->payment_id, "%s", payment_id);
    } else if (ok) {
        hf_payment_event_t *p = &hf_record_reset(&rec, HF_REC_PAYMENT_EVENT)->u.payment_event;
        snprintf(p->reservation_id, sizeof p->reservation_id, "%s", reservation_id);
        snprintf(p->idempotency_key, sizeof p->idempotency_key, "%s", event_id);
        snprintf(p->payment_id, sizeof p->payment_id, "%s", payment_id);
        p->event = kind;
        take_reason(data, p->reason, sizeof p->reason);
    }
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
    int status = http_status_for(rec.type, reply.u.reply.outcome, 200);
    if (status < 500)
        status = 200;
    if (status == 503)
        atomic_fetch_add(&ctx->overloaded, 1);
    http_answer_reply(ctx, resp, status, &reply.u.reply);
}
