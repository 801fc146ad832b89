/* What the gateway tells the rest of the system: Hold, CommitHold and
 * ReleaseHold commands to the counters (keyed "warehouse|sku"), ledger events
 * for every transition, and the refund flag of a payment that bought nothing (a
 * P marker and its one LATE_PAYMENT "refund" event). Each builds its record
 * from the reservation; none decides anything. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"

int gw_emit_ledger(stage_ctx_t *ctx, const hf_reservation_state_t *rs, hf_ledger_kind_t kind,
                   const char *reason)
{
    hf_record_t rec;
    hf_record_reset(&rec, HF_REC_LEDGER_EVENT);
    hf_ledger_event_t *e = &rec.u.ledger_event;
    snprintf(e->reservation_id, sizeof e->reservation_id, "%s", rs->reservation_id);
    e->kind = kind;
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        const hf_hold_ref_t *h = &rs->allocations[i];
        /* The holds the transition concerns: the held ones, or for a release or
         * expiry those it gave back (released after being confirmed held). */
        bool held = h->status == HF_HOLD_REF_HELD;
        bool given_back = h->status == HF_HOLD_REF_RELEASE_SENT && h->available_seen >= 0;
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
    snprintf(e->api_key_id, sizeof e->api_key_id, "%s", rs->api_key_id);
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
    hf_record_t rec;
    hf_record_reset(&rec, HF_REC_HOLD);
    hf_hold_t *c = &rec.u.hold;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", rs->reservation_id);
    c->attempt = h->attempt;
    snprintf(c->warehouse_id, sizeof c->warehouse_id, "%s", h->warehouse_id);
    snprintf(c->sku, sizeof c->sku, "%s", h->sku);
    c->qty = h->qty;
    c->issued_at_ms = stage_now_ms(ctx);
    if (rs->counter_answers && h->attempt == 0) { /* a resend asks for the same answer */
        c->answer_reserve = true;
        snprintf(c->idempotency_key, sizeof c->idempotency_key, "%s", rs->idempotency_key);
        snprintf(c->reply_to, sizeof c->reply_to, "%s", rs->reply_to);
        c->expires_at_ms = rs->expires_at_ms;
        snprintf(c->api_key_id, sizeof c->api_key_id, "%s", rs->api_key_id);
        c->requested_at_ms = rs->requested_at_ms; /* the answer's latency starts there */
    }
    return emit_command(ctx, h, &rec);
}

static int emit_commit_hold(stage_ctx_t *ctx, const hf_reservation_state_t *rs,
                            const hf_hold_ref_t *h)
{
    hf_record_t rec;
    hf_record_reset(&rec, HF_REC_COMMIT_HOLD);
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
        const hf_hold_ref_t *h = &rs->allocations[i];
        if (h->status != HF_HOLD_REF_HELD)
            continue;
        int err = h->escrow ? gw_escrow_sell(ctx, rs, h) : emit_commit_hold(ctx, rs, h);
        if (err)
            return err;
    }
    return HF_OK;
}

int gw_release_one(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i, const char *reason)
{
    hf_hold_ref_t *h = &rs->allocations[i];
    hf_assert(h->status == HF_HOLD_REF_HOLD_SENT || h->status == HF_HOLD_REF_HELD);
    if (h->escrow) { /* no counter hold: the units go back into the allotment */
        hf_assert(h->status == HF_HOLD_REF_HELD);
        int err = gw_escrow_give_back(ctx, h);
        if (err)
            return err;
        h->available_seen = 0;
        h->status = HF_HOLD_REF_RELEASE_SENT;
        return HF_OK;
    }
    hf_record_t rec;
    hf_record_reset(&rec, HF_REC_RELEASE_HOLD);
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
    const gateway_env_t *env = gateway_env(ctx);
    /* The units are the pair's again (a hold a stock count revoked adds units
     * that are gone: the counter's next answer, one refused Hold, corrects it). */
    if (env->hint && h->status == HF_HOLD_REF_HELD)
        gw_hint_add(env->hint, h->warehouse_id, h->sku, h->qty);
    h->available_seen = h->status == HF_HOLD_REF_HELD ? 0 : -1; /* -1: never confirmed held */
    h->status = HF_HOLD_REF_RELEASE_SENT;
    return HF_OK;
}

int gw_release_holds(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *reason)
{
    for (int32_t i = 0; i < rs->allocations_count; i++) {
        hf_hold_ref_status_t st = rs->allocations[i].status;
        if (st != HF_HOLD_REF_HOLD_SENT && st != HF_HOLD_REF_HELD)
            continue;
        int err = gw_release_one(ctx, rs, i, reason);
        if (err)
            return err;
    }
    return HF_OK;
}

int gw_refund_flagged(stage_ctx_t *ctx, const char *reservation_id, const char *payment_id,
                      bool *flagged)
{
    char key[GW_KEY_MAX];
    size_t len = gw_payment_key(key, reservation_id, payment_id);
    state_iter_t *it = stage_iter(ctx, key, len, false);
    if (!it)
        return HF_ERR_NOMEM;
    const void *k, *v;
    size_t klen, vlen;
    /* The prefix also matches longer payment ids: only the exact key counts. */
    *flagged = false;
    while (!*flagged && state_iter_next(it, &k, &klen, &v, &vlen))
        *flagged = klen == len && memcmp(k, key, len) == 0;
    state_iter_destroy(it);
    return HF_OK;
}

int gw_flag_refund(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const char *payment_id,
                   const hf_hold_ref_t *returned)
{
    /* The sweeper forgets any other reservation without looking for markers. */
    hf_assert(gw_res_may_flag_refund(rs));
    bool flagged = false;
    int err = gw_refund_flagged(ctx, rs->reservation_id, payment_id, &flagged);
    if (err || flagged)
        return err;
    char key[GW_KEY_MAX];
    size_t len = gw_payment_key(key, rs->reservation_id, payment_id);
    err = stage_put_raw(ctx, key, len, "t", 1);
    if (err)
        return err;
    /* The event names the payment, and the units it no longer buys, if any. */
    hf_reservation_state_t flag = *rs;
    snprintf(flag.payment_id, sizeof flag.payment_id, "%s", payment_id);
    flag.allocations_count = 0;
    if (returned) {
        flag.allocations[flag.allocations_count] = *returned;
        flag.allocations[flag.allocations_count++].status = HF_HOLD_REF_HELD;
    }
    return gw_emit_ledger(ctx, &flag, HF_LEDGER_LATE_PAYMENT, GW_LATE_REFUNDED);
}
