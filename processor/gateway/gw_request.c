/* The prologue every gateway request goes through before its handler decides
 * (gw_request_begin): the record key and reply topic checked, the body checked,
 * the hash computed, a retry answered from what was kept (a Reserve's answer in
 * its reservation, the others' in IdempotencyRecords), the reservation loaded.
 * One prologue, so a Commit, a Release and an Extend cannot drift apart in how
 * they refuse or repeat an answer. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"
#include "topics.h"

#define ID_RULE " must be non-empty, printable, without '|'"
_Static_assert(HF_PAYMENT_REASON_LEN_MAX == 200, "check_body's message names the bound");

bool gw_request_ids(const hf_record_t *rec, gw_asker_t *out)
{
    memset(out, 0, sizeof *out);
    switch (rec->type) {
    case HF_REC_RESERVE:
        *out = (gw_asker_t){rec->u.reserve.reservation_id,
                            rec->u.reserve.idempotency_key,
                            rec->u.reserve.reply_to,
                            0,
                            HF_REC_RESERVE,
                            0};
        return true;
    case HF_REC_COMMIT:
        *out = (gw_asker_t){rec->u.commit.reservation_id,
                            rec->u.commit.idempotency_key,
                            rec->u.commit.reply_to,
                            0,
                            HF_REC_COMMIT,
                            0};
        return true;
    case HF_REC_RELEASE:
        *out = (gw_asker_t){rec->u.release.reservation_id,
                            rec->u.release.idempotency_key,
                            rec->u.release.reply_to,
                            0,
                            HF_REC_RELEASE,
                            0};
        return true;
    case HF_REC_EXTEND:
        *out = (gw_asker_t){rec->u.extend.reservation_id,
                            rec->u.extend.idempotency_key,
                            rec->u.extend.reply_to,
                            0,
                            HF_REC_EXTEND,
                            0};
        return true;
    case HF_REC_PAYMENT_EVENT:
        *out = (gw_asker_t){rec->u.payment_event.reservation_id,
                            rec->u.payment_event.idempotency_key,
                            rec->u.payment_event.reply_to,
                            0,
                            HF_REC_PAYMENT_EVENT,
                            0};
        return true;
    default:
        return false;
    }
}

int gw_check_key(stage_ctx_t *ctx, const char *reservation_id)
{
    const char *bad = gw_check_id(reservation_id, "reservation_id" ID_RULE);
    if (bad)
        return stage_reject(ctx, "%s", bad);
    size_t key_len = 0;
    const void *key = stage_record_key(ctx, &key_len);
    /* One reservation, one partition, one writer: a mis-keyed request would be
     * applied by a task that does not own the reservation. */
    if (key_len != strlen(reservation_id) || memcmp(key, reservation_id, key_len) != 0)
        return stage_reject(ctx, "record key must be the reservation_id \"%s\"", reservation_id);
    return HF_OK;
}

/* gw_check_key, then reply_to: empty (the default topic) or an allowed
 * (gw_check_reply_to), existing topic. A request naming another is not
 * applied: it is answered REJECTED_INVALID on the default replies topic (where
 * else could it go?) and *answered set — before anything is written, so a
 * reply can never fail the transaction. */
static int check_addresses(stage_ctx_t *ctx, const gw_asker_t *a, bool *answered)
{
    *answered = false;
    int err = gw_check_key(ctx, a->reservation_id);
    if (err || !a->reply_to[0] || strcmp(a->reply_to, topic_name(HF_T_REPLIES)) == 0)
        return err;
    const gateway_env_t *env = gateway_env(ctx);
    char why[HF_TEXT_LEN_MAX + 1];
    if (!gw_check_reply_to(a->reply_to, env->reply_topic_prefix, why, sizeof why)) {
        if (!env->topic_exists || env->topic_exists(env->topics_opaque, a->reply_to))
            return HF_OK;
        snprintf(why, sizeof why,
                 "reply_to topic \"%.64s\" does not exist: create it, or omit reply_to for %s",
                 a->reply_to, topic_name(HF_T_REPLIES));
    }
    *answered = true;
    gw_asker_t to_default = *a;
    to_default.reply_to = "";
    return gw_reply_simple(ctx, &to_default, HF_REPLY_REJECTED_INVALID, why);
}

/* NULL when the body of request rec can be served, else why not. */
static const char *check_body(const gateway_env_t *env, const hf_record_t *rec, const gw_asker_t *a,
                              char *buf, size_t buf_size)
{
    const char *bad = gw_check_id(a->idempotency_key, "idempotency_key" ID_RULE);
    if (bad)
        return bad;
    switch (rec->type) {
    case HF_REC_RESERVE:
        return gw_check_reserve(env, &rec->u.reserve, buf, buf_size);
    case HF_REC_COMMIT:
        return gw_check_id(rec->u.commit.payment_id, "payment_id" ID_RULE);
    case HF_REC_EXTEND: {
        int64_t by_ms = rec->u.extend.extend_by_ms;
        return by_ms <= 0 || by_ms > HF_TTL_MAX_MS
                   ? "extend_by_ms must be positive and at most a day"
                   : NULL;
    }
    case HF_REC_PAYMENT_EVENT: {
        const hf_payment_event_t *p = &rec->u.payment_event;
        if (p->event <= HF_PAY_UNKNOWN || p->event >= HF_PAY__COUNT)
            return "event must be one of PROCESSING, REQUIRES_ACTION, SUCCEEDED, FAILED, "
                   "CANCELED";
        if (strlen(p->reason) > HF_PAYMENT_REASON_LEN_MAX)
            return "reason must be at most 200 bytes"; /* HF_PAYMENT_REASON_LEN_MAX */
        for (const char *c = p->reason; *c; c++)       /* a ledger reason is one readable line */
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                return "reason must not hold control characters";
        return gw_check_id(p->payment_id, "payment_id" ID_RULE);
    }
    default:
        return NULL;
    }
}

/* Idempotency of Commit, Release, Extend and PaymentEvent (and of a Reserve answered before
 * its answer moved into R): *handled when the key is known and the request was
 * answered here (the stored reply again, CONFLICT, or nothing while pending). */
static int idem_lookup(stage_ctx_t *ctx, const gw_asker_t *a, bool *handled)
{
    *handled = false;
    char key[GW_KEY_MAX];
    size_t len = gw_idem_key(key, a->reservation_id, a->idempotency_key);
    hf_record_t rec;
    int err = stage_get(ctx, key, len, &rec);
    if (err == HF_ERR_NOTFOUND)
        return HF_OK;
    if (err)
        return err;
    hf_assert(rec.type == HF_REC_IDEMPOTENCY_RECORD);
    const hf_idempotency_record_t *ir = &rec.u.idempotency_record;
    *handled = true;
    if (ir->request_hash != a->hash)
        return gw_reply_simple(ctx, a, HF_REPLY_CONFLICT,
                               "idempotency key was used with a different request body");
    if (!ir->complete)
        return HF_OK; /* the answer is on its way; it will be sent once */
    return gw_emit_reply(ctx, a, &ir->reply);
}

/* A request for a reservation its counter may have answered, before that answer
 * reached this gateway, waits for it (park.c). Past the slots it is told BUSY:
 * nothing applied, nothing stored, so its retry with the same key is served —
 * never an answer that could contradict the counter's. */
static int park_or_busy(stage_ctx_t *ctx, const hf_record_t *rec, const gw_asker_t *a)
{
    bool parked = false;
    int err = gw_park(ctx, rec, a->reservation_id, &parked);
    if (err || parked)
        return err;
    return gw_reply_simple(ctx, a, HF_REPLY_BUSY,
                           "busy: the reservation's answer is on its way from its counter; retry "
                           "with the same idempotency key");
}

/* A retried Reserve of rs under its own key and body: the stored reply (the
 * first answer, whatever the reservation became since), nothing while PENDING
 * — but a retry its counter may have answered waits for that answer (park.c),
 * so it gets the stored reply then. */
static int reserve_retry(stage_ctx_t *ctx, const hf_record_t *rec, const hf_reservation_state_t *rs,
                         const gw_asker_t *a)
{
    if (gw_counter_awaited(rs))
        return park_or_busy(ctx, rec, a);
    if (rs->reserve_replied) {
        hf_reply_t reply = rs->reserve_reply;
        snprintf(reply.reservation_id, sizeof reply.reservation_id, "%s", rs->reservation_id);
        snprintf(reply.idempotency_key, sizeof reply.idempotency_key, "%s", rs->idempotency_key);
        return gw_emit_reply(ctx, a, &reply);
    }
    /* Answered before the answer moved into R: an IdempotencyRecord has it
     * (or its pending marker) until its retention ends. */
    bool handled = false;
    int err = idem_lookup(ctx, a, &handled);
    if (err || handled || rs->status == HF_RES_PENDING)
        return err; /* PENDING: the answer is on its way; it will be sent once */
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg,
             "the answer to this reserve is no longer kept; the reservation is %s (query it by "
             "reservation_id)",
             hf_res_status_name(rs->status));
    return gw_reply_simple(ctx, a, HF_REPLY_CONFLICT, msg);
}

/* Idempotency of a Reserve: its answer lives in the reservation itself. A
 * known reservation_id is answered here (a retry; CONFLICT for another body or
 * another key), an unknown one is GW_REQ_NEW. */
static int reserve_lookup(stage_ctx_t *ctx, const hf_record_t *rec, gw_request_t *req)
{
    const gw_asker_t *a = &req->asker;
    const hf_reservation_state_t *rs = &req->rs;
    int err = gw_load(ctx, a->reservation_id, &req->rs);
    if (err == HF_ERR_NOTFOUND) {
        req->result = GW_REQ_NEW; /* its Reserve never had a record without R */
        return HF_OK;
    }
    if (err)
        return err;
    if (strcmp(rs->idempotency_key, a->idempotency_key) != 0) {
        /* The key may be one of a Commit, Release or Extend of rs. */
        bool known = false;
        err = idem_lookup(ctx, a, &known);
        if (err || known)
            return err;
        return gw_reply_simple(
            ctx, a, HF_REPLY_CONFLICT,
            "reservation_id is already used by a request with another idempotency key");
    }
    if (rs->request_hash != a->hash)
        return gw_reply_simple(ctx, a, HF_REPLY_CONFLICT,
                               "idempotency key was used with a different request body");
    return reserve_retry(ctx, rec, rs, a);
}

int gw_request_begin(stage_ctx_t *ctx, const hf_record_t *rec, gw_request_t *req)
{
    req->result = GW_REQ_ANSWERED;
    bool is_request = gw_request_ids(rec, &req->asker);
    hf_assert(is_request);
    const gw_asker_t *a = &req->asker;
    bool answered = false;
    int err = check_addresses(ctx, a, &answered);
    if (err || answered)
        return err;
    char buf[HF_TEXT_LEN_MAX + 1];
    const char *bad = check_body(gateway_env(ctx), rec, a, buf, sizeof buf);
    if (bad)
        return gw_reply_simple(ctx, a, HF_REPLY_REJECTED_INVALID, bad);
    req->asker.hash = gw_request_hash(rec);
    if (rec->type == HF_REC_RESERVE)
        return reserve_lookup(ctx, rec, req);
    bool handled = false;
    err = idem_lookup(ctx, a, &handled);
    if (err || handled)
        return err;
    err = gw_load(ctx, a->reservation_id, &req->rs);
    if (err == HF_ERR_NOTFOUND)
        return gw_reply_simple(ctx, a, HF_REPLY_NOT_FOUND, "no such reservation");
    if (!err && gw_counter_awaited(&req->rs)) /* the shopper may hold HELD: wait for it */
        return park_or_busy(ctx, rec, a);
    if (!err)
        req->result = GW_REQ_FOUND;
    return err;
}

/* A request on a partition its reservation_id does not hash to, forwarded as
 * often as a task forwards one (task.c) and still off it: the task has
 * dead-lettered it; the client is told why (it is waiting for an answer), on
 * its reply topic if that one is allowed. Nothing is stored: the same request
 * sent with the right partitioner is then served as new. */
int gw_on_misrouted(stage_ctx_t *ctx, const hf_record_t *rec, const char *why)
{
    gw_asker_t to;
    if (!gw_request_ids(rec, &to))
        return HF_OK; /* not a request: nobody waits for an answer */
    if (gw_check_id(to.reservation_id, "") != NULL)
        return HF_OK; /* no reservation to answer about */
    const gateway_env_t *env = gateway_env(ctx);
    char buf[HF_TEXT_LEN_MAX + 1];
    if (gw_check_reply_to(to.reply_to, env->reply_topic_prefix, buf, sizeof buf))
        to.reply_to = "";
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg, "%s (librdkafka: partitioner=murmur2_random; the Java default)", why);
    return gw_reply_simple(ctx, &to, HF_REPLY_REJECTED_INVALID, msg);
}
