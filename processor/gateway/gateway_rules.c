/* The gateway's pure rules: request validation, the request hash behind
 * idempotency, TTL choice and small questions about a reservation's holds. No
 * state, no Kafka, so unit tests reach every branch directly. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "gateway.h"
#include "topics.h"

static const char *const res_status_names[GW_RES__COUNT] = {
    "PENDING", "HELD", "COMMITTED", "RELEASED", "EXPIRED", "REJECTED",
};

const char *gw_res_status_name(int32_t status)
{
    return status >= 0 && status < GW_RES__COUNT ? res_status_names[status] : "UNKNOWN";
}

bool gw_res_terminal(int32_t status)
{
    return status == GW_RES_COMMITTED || status == GW_RES_RELEASED || status == GW_RES_EXPIRED ||
           status == GW_RES_REJECTED;
}

const char *gw_check_id(const char *id, const char *what)
{
    if (!id[0])
        return what;
    for (const char *p = id; *p; p++)
        if (*p == '|' || (unsigned char)*p < 0x20)
            return what;
    return NULL;
}

const char *gw_check_reserve(const hf_reserve_t *r, char *buf, size_t buf_size)
{
    if (r->lines_count < 1 || r->lines_count > HF_LINES_MAX) {
        snprintf(buf, buf_size, "a reserve needs 1..%d lines, got %d", HF_LINES_MAX,
                 r->lines_count);
        return buf;
    }
    for (int32_t i = 0; i < r->lines_count; i++) {
        const hf_line_t *l = &r->lines[i];
        if (gw_check_id(l->sku, "x")) {
            snprintf(buf, buf_size, "line %d: sku must be non-empty, printable, without '|'", i);
            return buf;
        }
        if (l->qty <= 0 || l->qty > HF_QTY_MAX) {
            snprintf(buf, buf_size, "line %d (%s): qty %lld must be in [1, %lld]", i, l->sku,
                     (long long)l->qty, (long long)HF_QTY_MAX);
            return buf;
        }
        for (int32_t j = 0; j < i; j++)
            if (strcmp(r->lines[j].sku, l->sku) == 0) {
                snprintf(buf, buf_size, "sku %s appears in two lines; merge them", l->sku);
                return buf;
            }
    }
    if (r->ttl_ms != 0 && (r->ttl_ms < HF_TTL_MIN_MS || r->ttl_ms > HF_TTL_MAX_MS)) {
        snprintf(buf, buf_size, "ttl_ms %lld must be 0 (default) or in [%lld, %lld]",
                 (long long)r->ttl_ms, (long long)HF_TTL_MIN_MS, (long long)HF_TTL_MAX_MS);
        return buf;
    }
    if (!(fabs(r->ship_to.lat) <= 90) || !(fabs(r->ship_to.lon) <= 180)) {
        snprintf(buf, buf_size, "ship_to must be lat in [-90, 90], lon in [-180, 180]");
        return buf;
    }
    return NULL;
}

int64_t gw_ttl_ms(const gateway_env_t *env, const hf_reserve_t *r)
{
    if (r->ttl_ms > 0)
        return r->ttl_ms;
    for (size_t i = 0; r->campaign[0] && i < env->campaigns_count; i++)
        if (strcmp(env->campaigns[i].name, r->campaign) == 0)
            return env->campaigns[i].ttl_ms;
    return env->ttl_default_ms;
}

int64_t gw_request_hash(const hf_record_t *rec)
{
    hf_record_t copy = *rec;
    switch (copy.type) {
    case HF_REC_RESERVE:
        copy.u.reserve.sent_at_ms = 0;
        copy.u.reserve.reply_to[0] = '\0';
        break;
    case HF_REC_COMMIT:
        copy.u.commit.sent_at_ms = 0;
        copy.u.commit.reply_to[0] = '\0';
        break;
    case HF_REC_RELEASE:
        copy.u.release.sent_at_ms = 0;
        copy.u.release.reply_to[0] = '\0';
        break;
    case HF_REC_EXTEND:
        copy.u.extend.sent_at_ms = 0;
        copy.u.extend.reply_to[0] = '\0';
        break;
    default:
        break;
    }
    uint8_t buf[HF_RECORD_LEN_MAX];
    size_t len = 0;
    char err[128];
    uint64_t h = 1469598103934665603ULL;
    if (codec_encode(&copy, buf, sizeof buf, &len, err, sizeof err) != HF_OK)
        len = 0; /* a decoded record always re-encodes; hash the type alone if not */
    h = (h ^ (uint64_t)copy.type) * 1099511628211ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ buf[i]) * 1099511628211ULL;
    return (int64_t)(h & 0x7fffffffffffffffULL);
}

int64_t gw_held_qty(const hf_reservation_state_t *rs, const char *sku)
{
    int64_t q = 0;
    for (int32_t i = 0; i < rs->allocations_count; i++)
        if (rs->allocations[i].status == GW_HOLD_OK && strcmp(rs->allocations[i].sku, sku) == 0)
            q += rs->allocations[i].qty;
    return q;
}

bool gw_all_answered(const hf_reservation_state_t *rs)
{
    for (int32_t i = 0; i < rs->allocations_count; i++)
        if (rs->allocations[i].status == GW_HOLD_SENT)
            return false;
    return true;
}

bool gw_saga_open(const hf_reservation_state_t *rs)
{
    return rs->status == GW_RES_PENDING || (gw_is_rebook(rs) && rs->rebook == GW_REBOOK_PENDING);
}

bool gw_is_rebook(const hf_reservation_state_t *rs)
{
    return rs->status == GW_RES_EXPIRED;
}

bool gw_topic_name_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > 249)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", t[i]))
            return false;
    return true;
}

const char *gw_check_reply_to(const char *reply_to, const char *allowed_prefix, char *buf,
                              size_t buf_size)
{
    if (!reply_to[0] || strcmp(reply_to, topic_name(HF_T_REPLIES)) == 0)
        return NULL;
    if (!gw_topic_name_ok(reply_to)) {
        snprintf(buf, buf_size, "reply_to \"%.64s\" is not a legal Kafka topic name", reply_to);
        return buf;
    }
    for (int i = 0; i < HF_T__COUNT; i++)
        if (strcmp(reply_to, topic_name((hf_topic_id_t)i)) == 0) {
            snprintf(buf, buf_size,
                     "reply_to \"%.64s\" is an internal topic: omit reply_to for %s, or use a "
                     "topic under \"%.64s\"",
                     reply_to, topic_name(HF_T_REPLIES), allowed_prefix);
            return buf;
        }
    size_t n = strlen(allowed_prefix);
    if (n == 0 || strncmp(reply_to, allowed_prefix, n) != 0 || reply_to[n] == '\0') {
        snprintf(buf, buf_size,
                 "reply_to \"%.64s\" is not allowed: omit it for %s, or name a topic under "
                 "\"%.64s\" (reply_topic_prefix)",
                 reply_to, topic_name(HF_T_REPLIES), allowed_prefix);
        return buf;
    }
    return NULL;
}

const char *gw_reply_topic(const char *reply_to)
{
    return reply_to && gw_topic_name_ok(reply_to) ? reply_to : topic_name(HF_T_REPLIES);
}
