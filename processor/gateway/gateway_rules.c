/* The gateway's pure rules: request validation, the request hash behind
 * idempotency, TTL choice and small questions about a reservation's holds. No
 * state, no Kafka, so unit tests reach every branch directly. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"
#include "topics.h"

bool gw_res_terminal(hf_res_status_t status)
{
    return status == HF_RES_COMMITTED || status == HF_RES_RELEASED || status == HF_RES_EXPIRED ||
           status == HF_RES_REJECTED;
}

bool gw_res_released_for_payment(const hf_reservation_state_t *rs)
{
    return rs->status == HF_RES_RELEASED &&
           (strcmp(rs->reason, GW_REASON_SHORTFALL) == 0 ||
            strncmp(rs->reason, GW_REASON_PAYMENT_PREFIX, strlen(GW_REASON_PAYMENT_PREFIX)) == 0);
}

bool gw_res_may_flag_refund(const hf_reservation_state_t *rs)
{
    return rs->status == HF_RES_EXPIRED || gw_res_released_for_payment(rs);
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

const char *gw_check_reserve(const gateway_env_t *env, const hf_reserve_t *r, char *buf,
                             size_t buf_size)
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
    for (int32_t i = 0; i < r->only_warehouses_count; i++) {
        const char *w = r->only_warehouses[i].warehouse_id;
        if (!route_warehouse(&env->routes, w)) {
            snprintf(buf, buf_size,
                     "only_warehouses: \"%.64s\" is not in the warehouses file (warehouses_file)",
                     w);
            return buf;
        }
        for (int32_t j = 0; j < i; j++)
            if (strcmp(r->only_warehouses[j].warehouse_id, w) == 0) {
                snprintf(buf, buf_size, "only_warehouses: %.64s is named twice", w);
                return buf;
            }
    }
    return NULL;
}

route_line_t gw_route_line(const gateway_env_t *env, const hf_wh_ref_t *only, int32_t only_count,
                           const hf_geo_t *ship_to, const hf_line_t *l, int64_t qty,
                           const hf_availability_t *view, const char *const *exclude,
                           size_t exclude_count)
{
    hf_assert(only_count >= 0 && only_count <= HF_ONLY_WAREHOUSES_MAX);
    return (route_line_t){.sku = l->sku,
                          .qty = qty,
                          .ship_to = *ship_to,
                          .avail = view,
                          .exclude = exclude,
                          .exclude_count = exclude_count,
                          .only = only,
                          .only_count = (size_t)only_count,
                          .ship_from = ship_from_mask(env->ship_from, l->sku)};
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

/* ---- the request hash
 *
 * FNV-1a (64-bit) over a canonical form of what the request asks for, built from
 * its decoded fields and never from its encoding, so a schema change (a field
 * added with a default, a doc, a new symbol) leaves every hash alike. The form is
 * frozen at the bytes the encoding-based hash of earlier holdfast versions read:
 * a kind tag (the record type number and the 10 bytes that were the request's
 * single-object header), then the fields in the order below, each as Avro binary
 * writes it (zigzag varint longs, length-prefixed strings, little-endian
 * doubles). So the hashes already stored in IdempotencyRecords and
 * ReservationStates still match their retries after the deploy: no hash version
 * is needed. reply_to and sent_at_ms say where and when, not what: their slots
 * always hold "" and 0. A field added to a request later goes in only if it
 * changes what the request asks for, at the end of its kind's function and only
 * when it differs from its schema default, so a request that does not use it
 * hashes as before (tests/unit/test_request_hash.c pins today's values). */

#define HASH_FNV_OFFSET 1469598103934665603ULL
#define HASH_FNV_PRIME  1099511628211ULL

static void hash_byte(uint64_t *h, uint8_t b)
{
    *h = (*h ^ b) * HASH_FNV_PRIME;
}

static void hash_long(uint64_t *h, int64_t v)
{
    uint64_t u = (uint64_t)v;
    uint64_t z = (u << 1) ^ (0 - (u >> 63)); /* zigzag: the sign spread over every bit */
    while (z > 0x7f) {
        hash_byte(h, (uint8_t)(0x80 | (z & 0x7f)));
        z >>= 7;
    }
    hash_byte(h, (uint8_t)z);
}

static void hash_string(uint64_t *h, const char *s)
{
    size_t n = strlen(s);
    hash_long(h, (int64_t)n);
    for (size_t i = 0; i < n; i++)
        hash_byte(h, (uint8_t)s[i]);
}

static void hash_double(uint64_t *h, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    for (int i = 0; i < 8; i++)
        hash_byte(h, (uint8_t)(bits >> (8 * i)));
}

/* The kind tag: record type number, then C3 01 and the fingerprint of the
 * request schema the form was frozen at (little-endian). Constants, so a new
 * schema or a renumbering of hf_rec_type_t cannot move them. */
static void hash_kind(uint64_t *h, uint64_t type_number, uint64_t frozen_fingerprint)
{
    *h = (*h ^ type_number) * HASH_FNV_PRIME;
    hash_byte(h, 0xC3);
    hash_byte(h, 0x01);
    for (int i = 0; i < 8; i++)
        hash_byte(h, (uint8_t)(frozen_fingerprint >> (8 * i)));
}

/* The slots of reply_to and sent_at_ms, which every request ends with. */
static void hash_where_and_when(uint64_t *h)
{
    hash_string(h, "");
    hash_long(h, 0);
}

static void hash_reserve(uint64_t *h, const hf_reserve_t *r)
{
    hash_kind(h, 8, 0xd16e922aada1fc96ULL);
    hash_string(h, r->reservation_id);
    hash_string(h, r->idempotency_key);
    hf_assert(r->lines_count >= 0 && r->lines_count <= HF_LINES_MAX); /* as decoded */
    if (r->lines_count > 0) { /* lines in the order sent, as one Avro array block */
        hash_long(h, r->lines_count);
        for (int32_t i = 0; i < r->lines_count; i++) {
            hash_string(h, r->lines[i].sku);
            hash_long(h, r->lines[i].qty);
        }
    }
    hash_long(h, 0);
    hash_double(h, r->ship_to.lat);
    hash_double(h, r->ship_to.lon);
    hash_long(h, r->ttl_ms);
    hash_string(h, r->campaign);
    hash_where_and_when(h);
    /* Added after the form was frozen: hashed only when given, so a Reserve
     * without it hashes as it always did. */
    hf_assert(r->only_warehouses_count >= 0 &&
              r->only_warehouses_count <= HF_ONLY_WAREHOUSES_MAX); /* as decoded */
    if (r->only_warehouses_count > 0) {
        hash_long(h, r->only_warehouses_count);
        for (int32_t i = 0; i < r->only_warehouses_count; i++)
            hash_string(h, r->only_warehouses[i].warehouse_id);
    }
    if (r->allow_partial)
        hash_byte(h, 0xA1); /* a partial reserve is another request than the whole one */
}

static void hash_commit(uint64_t *h, const hf_commit_t *c)
{
    hash_kind(h, 9, 0x196d6433575f64adULL);
    hash_string(h, c->reservation_id);
    hash_string(h, c->idempotency_key);
    hash_string(h, c->payment_id);
    hash_where_and_when(h);
}

static void hash_release(uint64_t *h, const hf_release_t *r)
{
    hash_kind(h, 10, 0x92f1475472404bd4ULL);
    hash_string(h, r->reservation_id);
    hash_string(h, r->idempotency_key);
    hash_string(h, r->reason);
    hash_where_and_when(h);
}

static void hash_extend(uint64_t *h, const hf_extend_t *x)
{
    hash_kind(h, 19, 0x34572e46f905c65eULL);
    hash_string(h, x->reservation_id);
    hash_string(h, x->idempotency_key);
    hash_long(h, x->extend_by_ms);
    hash_where_and_when(h);
}

/* A succeeded payment is the Commit it stands for: the webhook sends a Commit
 * under the event id, a Kafka client may send the PaymentEvent; a redelivery
 * by the other road gets the first answer, not CONFLICT. */
static void hash_payment_event(uint64_t *h, const hf_payment_event_t *p)
{
    if (p->event == HF_PAY_SUCCEEDED) {
        hf_commit_t c;
        memset(&c, 0, sizeof c);
        snprintf(c.reservation_id, sizeof c.reservation_id, "%s", p->reservation_id);
        snprintf(c.idempotency_key, sizeof c.idempotency_key, "%s", p->idempotency_key);
        snprintf(c.payment_id, sizeof c.payment_id, "%s", p->payment_id);
        hash_commit(h, &c);
        return;
    }
    hash_kind(h, 25, 0x8d4a6c54272ea0b9ULL);
    hash_string(h, p->reservation_id);
    hash_string(h, p->idempotency_key);
    hash_long(h, p->event);
    hash_string(h, p->payment_id);
    hash_string(h, p->reason);
    hash_where_and_when(h);
}

int64_t gw_request_hash(const hf_record_t *rec)
{
    uint64_t h = HASH_FNV_OFFSET;
    switch (rec->type) {
    case HF_REC_RESERVE:
        hash_reserve(&h, &rec->u.reserve);
        break;
    case HF_REC_COMMIT:
        hash_commit(&h, &rec->u.commit);
        break;
    case HF_REC_RELEASE:
        hash_release(&h, &rec->u.release);
        break;
    case HF_REC_EXTEND:
        hash_extend(&h, &rec->u.extend);
        break;
    case HF_REC_PAYMENT_EVENT:
        hash_payment_event(&h, &rec->u.payment_event);
        break;
    default:
        hf_assert(!"gw_request_hash: not a request");
    }
    return (int64_t)(h & 0x7fffffffffffffffULL);
}

int64_t gw_held_qty(const hf_reservation_state_t *rs, const char *sku)
{
    int64_t q = 0;
    for (int32_t i = 0; i < rs->allocations_count; i++)
        if (rs->allocations[i].status == HF_HOLD_REF_HELD &&
            strcmp(rs->allocations[i].sku, sku) == 0)
            q += rs->allocations[i].qty;
    return q;
}

bool gw_all_answered(const hf_reservation_state_t *rs)
{
    for (int32_t i = 0; i < rs->allocations_count; i++)
        if (rs->allocations[i].status == HF_HOLD_REF_HOLD_SENT)
            return false;
    return true;
}

bool gw_saga_open(const hf_reservation_state_t *rs)
{
    return rs->status == HF_RES_PENDING || (gw_is_rebook(rs) && rs->rebook == HF_REBOOK_PENDING);
}

bool gw_is_rebook(const hf_reservation_state_t *rs)
{
    return rs->status == HF_RES_EXPIRED;
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
