/* The gateway stage's definition — its handler table — and what its handlers
 * share: loading and storing reservations, idempotency (a Reserve's answer in
 * its reservation, the other requests' in IdempotencyRecords) and timers, and
 * emitting replies, ledger events and counter commands. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "gateway.h"
#include "hf_assert.h"
#include "log.h"
#include "topics.h"

static const hf_topic_id_t gateway_inputs[] = {HF_T_REQUESTS, HF_T_COUNTER_RESULTS};

/* What happens on each record type, and which topic may carry it: one
 * handler, one file. Clients write requests; only the counters write results
 * (a CounterResult on the requests topic would be a forged OK). */
static const stage_handler_t gateway_handlers[] = {
    {HF_T_REQUESTS, HF_REC_RESERVE, gateway_on_reserve},
    {HF_T_REQUESTS, HF_REC_COMMIT, gateway_on_commit},
    {HF_T_REQUESTS, HF_REC_RELEASE, gateway_on_release},
    {HF_T_REQUESTS, HF_REC_EXTEND, gateway_on_extend},
    {HF_T_COUNTER_RESULTS, HF_REC_COUNTER_RESULT, gateway_on_counter_result},
};

static int gateway_on_misrouted(stage_ctx_t *ctx, const hf_record_t *rec, const char *why);

/* Least time between two gateway transactions (config; 0: none). */
static int gateway_commit_interval_ms(const hf_config_t *cfg)
{
    return cfg ? cfg->gateway_commit_interval_ms : 0;
}

static const stage_def_t gateway_def = {
    .name = "gateway",
    .init = gateway_env_new,
    .destroy = gateway_env_destroy,
    .input_topics = gateway_inputs,
    .input_topics_count = sizeof gateway_inputs / sizeof gateway_inputs[0],
    .changelog_topic = HF_T_GATEWAY_CHANGELOG,
    .handlers = gateway_handlers,
    .handlers_count = sizeof gateway_handlers / sizeof gateway_handlers[0],
    .tick = gateway_tick,
    .tick_interval_ms = 250,
    .reindex = gateway_reindex,
    .commit_interval_ms = gateway_commit_interval_ms,
    .reindex_tags = "RI", /* reservations, idempotency records */
    .local_tags = "T",    /* the timer index */
    .on_misrouted = gateway_on_misrouted,
};

const stage_def_t *gateway_stage(void)
{
    return &gateway_def;
}

int gw_check_key(stage_ctx_t *ctx, const char *reservation_id)
{
    const char *bad =
        gw_check_id(reservation_id, "reservation_id must be non-empty, printable, without '|'");
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

int gw_check_request(stage_ctx_t *ctx, const char *reservation_id, const char *idempotency_key,
                     const char *reply_to, bool *answered)
{
    *answered = false;
    int err = gw_check_key(ctx, reservation_id);
    if (err || !reply_to[0] || strcmp(reply_to, topic_name(HF_T_REPLIES)) == 0)
        return err;
    const gateway_env_t *env = gateway_env(ctx);
    if (!env)
        return HF_ERR_CONFIG;
    char why[HF_TEXT_LEN_MAX + 1];
    if (!gw_check_reply_to(reply_to, env->reply_topic_prefix, why, sizeof why)) {
        if (!env->topic_exists || env->topic_exists(env->topics_opaque, reply_to))
            return HF_OK;
        snprintf(why, sizeof why,
                 "reply_to topic \"%.64s\" does not exist: create it, or omit reply_to for %s",
                 reply_to, topic_name(HF_T_REPLIES));
    }
    *answered = true;
    return gw_reply_simple(ctx, reservation_id, idempotency_key, "", HF_REPLY_REJECTED_INVALID,
                           why);
}

/* A request on a partition its reservation_id does not hash to: the task has
 * dead-lettered it; the client is told why (it is waiting for an answer), on
 * its reply topic if that one is allowed. Nothing is stored: the same request
 * sent with the right partitioner is then served as new. */
static int gateway_on_misrouted(stage_ctx_t *ctx, const hf_record_t *rec, const char *why)
{
    const char *rid, *ikey, *reply_to;
    switch (rec->type) {
    case HF_REC_RESERVE:
        rid = rec->u.reserve.reservation_id, ikey = rec->u.reserve.idempotency_key;
        reply_to = rec->u.reserve.reply_to;
        break;
    case HF_REC_COMMIT:
        rid = rec->u.commit.reservation_id, ikey = rec->u.commit.idempotency_key;
        reply_to = rec->u.commit.reply_to;
        break;
    case HF_REC_RELEASE:
        rid = rec->u.release.reservation_id, ikey = rec->u.release.idempotency_key;
        reply_to = rec->u.release.reply_to;
        break;
    case HF_REC_EXTEND:
        rid = rec->u.extend.reservation_id, ikey = rec->u.extend.idempotency_key;
        reply_to = rec->u.extend.reply_to;
        break;
    default:
        return HF_OK; /* not a request: nobody waits for an answer */
    }
    if (gw_check_id(rid, "") != NULL)
        return HF_OK; /* no reservation to answer about */
    const gateway_env_t *env = gateway_env(ctx);
    if (!env)
        return HF_ERR_CONFIG;
    char buf[HF_TEXT_LEN_MAX + 1];
    if (gw_check_reply_to(reply_to, env->reply_topic_prefix, buf, sizeof buf))
        reply_to = "";
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg, "%s (librdkafka: partitioner=murmur2_random; the Java default)", why);
    return gw_reply_simple(ctx, rid, ikey, reply_to, HF_REPLY_REJECTED_INVALID, msg);
}

int gw_load(stage_ctx_t *ctx, const char *reservation_id, hf_reservation_state_t *out)
{
    char key[GW_KEY_MAX];
    size_t len = gw_res_key(key, reservation_id);
    hf_record_t rec;
    int err = stage_get(ctx, key, len, &rec);
    if (err)
        return err;
    hf_assert(rec.type == HF_REC_RESERVATION_STATE);
    *out = rec.u.reservation_state;
    return HF_OK;
}

int gw_store(stage_ctx_t *ctx, hf_reservation_state_t *rs)
{
    rs->updated_at_ms = stage_now_ms(ctx);
    char key[GW_KEY_MAX];
    size_t len = gw_res_key(key, rs->reservation_id);
    hf_record_t rec = {.type = HF_REC_RESERVATION_STATE, .u.reservation_state = *rs};
    int err = stage_put(ctx, key, len, &rec);
    if (err || !gw_res_terminal(rs->status))
        return err;
    /* An ended reservation is forgotten once it has been left alone for the
     * retention (sweeper.c); a later change arms a later timer. */
    const gateway_env_t *env = gateway_env(ctx);
    if (!env)
        return HF_ERR_CONFIG;
    return gw_timer_add(ctx, rs->updated_at_ms + env->reservation_retention_ms, GW_TIMER_FORGET,
                        rs->reservation_id);
}

int gw_timer_add(stage_ctx_t *ctx, int64_t due_ms, char kind, const char *ref)
{
    char key[GW_KEY_MAX];
    size_t len = gw_timer_key(key, due_ms, kind, ref);
    /* Derived from the reservation and idempotency records (gateway_reindex), so
     * local only; not empty: an empty value reads as a tombstone. */
    return stage_put_local(ctx, key, len, "t", 1);
}

int gw_emit_reply(stage_ctx_t *ctx, const char *reply_to, const hf_reply_t *reply)
{
    hf_record_t rec = {.type = HF_REC_REPLY, .u.reply = *reply};
    return stage_emit_to(ctx, gw_reply_topic(reply_to), reply->reservation_id,
                         strlen(reply->reservation_id), &rec);
}

int gw_reply_simple(stage_ctx_t *ctx, const char *reservation_id, const char *idempotency_key,
                    const char *reply_to, hf_reply_outcome_t outcome, const char *message)
{
    hf_reply_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.reservation_id, sizeof r.reservation_id, "%s", reservation_id);
    snprintf(r.idempotency_key, sizeof r.idempotency_key, "%s", idempotency_key);
    r.outcome = outcome;
    snprintf(r.message, sizeof r.message, "%s", message);
    r.replied_at_ms = stage_now_ms(ctx);
    return gw_emit_reply(ctx, reply_to, &r);
}

void gw_reply_init(const hf_reservation_state_t *rs, const char *idempotency_key,
                   hf_reply_outcome_t outcome, const char *message, int64_t now_ms, hf_reply_t *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->reservation_id, sizeof out->reservation_id, "%s", rs->reservation_id);
    snprintf(out->idempotency_key, sizeof out->idempotency_key, "%s", idempotency_key);
    out->outcome = outcome;
    snprintf(out->message, sizeof out->message, "%s", message ? message : "");
    out->replied_at_ms = now_ms;
    bool with_allocs = outcome == HF_REPLY_HELD || outcome == HF_REPLY_COMMITTED;
    for (int32_t i = 0; with_allocs && i < rs->allocations_count; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        if (h->status != GW_HOLD_OK)
            continue;
        hf_allocation_t *a = &out->allocations[out->allocations_count++];
        snprintf(a->warehouse_id, sizeof a->warehouse_id, "%s", h->warehouse_id);
        snprintf(a->sku, sizeof a->sku, "%s", h->sku);
        a->qty = h->qty;
    }
    if (outcome == HF_REPLY_HELD)
        out->expires_at_ms = rs->expires_at_ms;
}

int gw_answer(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const char *idempotency_key,
              int64_t hash, const char *reply_to, hf_reply_outcome_t outcome, const char *message)
{
    hf_reply_t reply;
    gw_reply_init(rs, idempotency_key, outcome, message, stage_now_ms(ctx), &reply);
    int err = gw_idem_store(ctx, rs->reservation_id, idempotency_key, hash, &reply);
    return err ? err : gw_emit_reply(ctx, reply_to, &reply);
}

void gw_reserve_answer(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                       const char *message, hf_reply_t *reply)
{
    hf_assert(!rs->reserve_replied);
    gw_reply_init(rs, rs->idempotency_key, outcome, message, stage_now_ms(ctx), reply);
    rs->reserve_replied = true;
    rs->reserve_reply = *reply;
    /* The reservation's own ids: not stored twice (gw_reserve_idem_check puts
     * them back). */
    rs->reserve_reply.reservation_id[0] = '\0';
    rs->reserve_reply.idempotency_key[0] = '\0';
}

int gw_answer_reserve(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                      const char *message)
{
    hf_reply_t reply;
    gw_reserve_answer(ctx, rs, outcome, message, &reply);
    int err = gw_store(ctx, rs);
    return err ? err : gw_emit_reply(ctx, rs->reply_to, &reply);
}

/* A retried Reserve of rs under its own key and body. */
static int reserve_retry(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const hf_reserve_t *r,
                         int64_t hash)
{
    if (rs->reserve_replied) {
        hf_reply_t reply = rs->reserve_reply;
        snprintf(reply.reservation_id, sizeof reply.reservation_id, "%s", rs->reservation_id);
        snprintf(reply.idempotency_key, sizeof reply.idempotency_key, "%s", rs->idempotency_key);
        return gw_emit_reply(ctx, r->reply_to, &reply);
    }
    /* Answered before the answer moved into R: an IdempotencyRecord has it
     * (or its pending marker) until its retention ends. */
    bool handled = false;
    int err =
        gw_idem_check(ctx, r->reservation_id, r->idempotency_key, hash, r->reply_to, &handled);
    if (err || handled || rs->status == GW_RES_PENDING)
        return err; /* PENDING: the answer is on its way; it will be sent once */
    char msg[HF_TEXT_LEN_MAX + 1];
    snprintf(msg, sizeof msg,
             "the answer to this reserve is no longer kept; the reservation is %s (query it by "
             "reservation_id)",
             gw_res_status_name(rs->status));
    return gw_reply_simple(ctx, r->reservation_id, r->idempotency_key, r->reply_to,
                           HF_REPLY_CONFLICT, msg);
}

int gw_reserve_idem_check(stage_ctx_t *ctx, const hf_reserve_t *r, int64_t hash, bool *handled)
{
    *handled = false;
    hf_reservation_state_t rs;
    int err = gw_load(ctx, r->reservation_id, &rs);
    if (err == HF_ERR_NOTFOUND)
        return HF_OK; /* a new reservation (its Reserve never had a record without R) */
    if (err)
        return err;
    *handled = true;
    if (strcmp(rs.idempotency_key, r->idempotency_key) != 0) {
        /* The key may be one of a Commit, Release or Extend of rs. */
        bool known = false;
        err = gw_idem_check(ctx, r->reservation_id, r->idempotency_key, hash, r->reply_to, &known);
        if (err || known)
            return err;
        return gw_reply_simple(
            ctx, r->reservation_id, r->idempotency_key, r->reply_to, HF_REPLY_CONFLICT,
            "reservation_id is already used by a request with another idempotency key");
    }
    if (rs.request_hash != hash)
        return gw_reply_simple(ctx, r->reservation_id, r->idempotency_key, r->reply_to,
                               HF_REPLY_CONFLICT,
                               "idempotency key was used with a different request body");
    return reserve_retry(ctx, &rs, r, hash);
}

int gw_idem_check(stage_ctx_t *ctx, const char *reservation_id, const char *idempotency_key,
                  int64_t hash, const char *reply_to, bool *handled)
{
    *handled = false;
    char key[GW_KEY_MAX];
    size_t len = gw_idem_key(key, reservation_id, idempotency_key);
    hf_record_t rec;
    int err = stage_get(ctx, key, len, &rec);
    if (err == HF_ERR_NOTFOUND)
        return HF_OK;
    if (err)
        return err;
    hf_assert(rec.type == HF_REC_IDEMPOTENCY_RECORD);
    const hf_idempotency_record_t *ir = &rec.u.idempotency_record;
    *handled = true;
    if (ir->request_hash != hash)
        return gw_reply_simple(ctx, reservation_id, idempotency_key, reply_to, HF_REPLY_CONFLICT,
                               "idempotency key was used with a different request body");
    if (!ir->complete)
        return HF_OK; /* the answer is on its way; it will be sent once */
    return gw_emit_reply(ctx, reply_to, &ir->reply);
}

int gw_idem_store(stage_ctx_t *ctx, const char *reservation_id, const char *idempotency_key,
                  int64_t hash, const hf_reply_t *reply)
{
    char key[GW_KEY_MAX];
    size_t len = gw_idem_key(key, reservation_id, idempotency_key);
    hf_record_t rec = {.type = HF_REC_IDEMPOTENCY_RECORD};
    hf_idempotency_record_t *ir = &rec.u.idempotency_record;
    bool first = true;
    hf_record_t old;
    int err = stage_get(ctx, key, len, &old);
    if (err == HF_OK) {
        *ir = old.u.idempotency_record;
        first = false;
    } else if (err != HF_ERR_NOTFOUND) {
        return err;
    } else {
        ir->stored_at_ms = stage_now_ms(ctx);
    }
    ir->request_hash = hash;
    ir->complete = reply != NULL;
    if (reply)
        ir->reply = *reply;
    err = stage_put(ctx, key, len, &rec);
    if (err || !first)
        return err;
    const gateway_env_t *env = gateway_env(ctx);
    if (!env)
        return HF_ERR_CONFIG;
    char ref[GW_KEY_MAX];
    snprintf(ref, sizeof ref, "%s|%s", reservation_id, idempotency_key);
    return gw_timer_add(ctx, ir->stored_at_ms + env->idempotency_retention_ms, GW_TIMER_IDEMPOTENCY,
                        ref);
}

int gw_emit_ledger(stage_ctx_t *ctx, const hf_reservation_state_t *rs, hf_ledger_kind_t kind,
                   const char *reason)
{
    hf_record_t rec = {.type = HF_REC_LEDGER_EVENT};
    hf_ledger_event_t *e = &rec.u.ledger_event;
    snprintf(e->reservation_id, sizeof e->reservation_id, "%s", rs->reservation_id);
    e->kind = kind;
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        /* The holds the transition concerns: the held ones, or for a release or
         * expiry those it gave back (released after being confirmed held). */
        bool held = h->status == GW_HOLD_OK;
        bool given_back = h->status == GW_HOLD_RELEASED && h->available_seen >= 0;
        bool releasing = kind == HF_LEDGER_RELEASED || kind == HF_LEDGER_EXPIRED;
        if (kind == HF_LEDGER_REJECTED || !(releasing ? given_back : held))
            continue;
        hf_allocation_t *a = &e->allocations[e->allocations_count++];
        snprintf(a->warehouse_id, sizeof a->warehouse_id, "%s", h->warehouse_id);
        snprintf(a->sku, sizeof a->sku, "%s", h->sku);
        a->qty = h->qty;
    }
    e->lines_count = rs->lines_count;
    memcpy(e->lines, rs->lines, sizeof e->lines[0] * (size_t)rs->lines_count);
    snprintf(e->reason, sizeof e->reason, "%s", reason ? reason : "");
    snprintf(e->payment_id, sizeof e->payment_id, "%s", rs->payment_id);
    e->expires_at_ms = rs->expires_at_ms;
    e->at_ms = stage_now_ms(ctx);
    return stage_emit(ctx, HF_T_LEDGER, rs->reservation_id, strlen(rs->reservation_id), &rec);
}

static int emit_command(stage_ctx_t *ctx, const hf_hold_ref_t *h, const hf_record_t *rec)
{
    char key[GW_KEY_MAX];
    int n = snprintf(key, sizeof key, "%s|%s", h->warehouse_id, h->sku);
    hf_assert(n > 0 && n < (int)sizeof key);
    return stage_emit(ctx, HF_T_COUNTER_COMMANDS, key, (size_t)n, rec);
}

int gw_emit_hold(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const hf_hold_ref_t *h)
{
    hf_record_t rec = {.type = HF_REC_HOLD};
    hf_hold_t *c = &rec.u.hold;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", rs->reservation_id);
    c->attempt = h->attempt;
    snprintf(c->warehouse_id, sizeof c->warehouse_id, "%s", h->warehouse_id);
    snprintf(c->sku, sizeof c->sku, "%s", h->sku);
    c->qty = h->qty;
    c->issued_at_ms = stage_now_ms(ctx);
    return emit_command(ctx, h, &rec);
}

int gw_emit_commit_hold(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const hf_hold_ref_t *h)
{
    hf_record_t rec = {.type = HF_REC_COMMIT_HOLD};
    hf_commit_hold_t *c = &rec.u.commit_hold;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", rs->reservation_id);
    c->attempt = h->attempt;
    snprintf(c->warehouse_id, sizeof c->warehouse_id, "%s", h->warehouse_id);
    snprintf(c->sku, sizeof c->sku, "%s", h->sku);
    c->issued_at_ms = stage_now_ms(ctx);
    return emit_command(ctx, h, &rec);
}

int gw_commit_holds(stage_ctx_t *ctx, const hf_reservation_state_t *rs)
{
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        if (rs->allocations[i].status != GW_HOLD_OK)
            continue;
        int err = gw_emit_commit_hold(ctx, rs, &rs->allocations[i]);
        if (err)
            return err;
    }
    return HF_OK;
}

int gw_release_one(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i, const char *reason)
{
    hf_hold_ref_t *h = &rs->allocations[i];
    hf_assert(h->status == GW_HOLD_SENT || h->status == GW_HOLD_OK);
    hf_record_t rec = {.type = HF_REC_RELEASE_HOLD};
    hf_release_hold_t *c = &rec.u.release_hold;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", rs->reservation_id);
    c->attempt = h->attempt;
    snprintf(c->warehouse_id, sizeof c->warehouse_id, "%s", h->warehouse_id);
    snprintf(c->sku, sizeof c->sku, "%s", h->sku);
    snprintf(c->reason, sizeof c->reason, "%s", reason);
    c->issued_at_ms = stage_now_ms(ctx);
    /* Emitted after the Hold on the same partition, so the counter always sees
     * the Hold first, even for one whose result has not arrived. */
    int err = emit_command(ctx, h, &rec);
    if (err)
        return err;
    h->available_seen = h->status == GW_HOLD_OK ? 0 : -1; /* -1: never confirmed held */
    h->status = GW_HOLD_RELEASED;
    return HF_OK;
}

int gw_release_holds(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *reason)
{
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        int32_t st = rs->allocations[i].status;
        if (st != GW_HOLD_SENT && st != GW_HOLD_OK)
            continue;
        int err = gw_release_one(ctx, rs, i, reason);
        if (err)
            return err;
    }
    return HF_OK;
}
