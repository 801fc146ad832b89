/* The sweeper: the gateway's tick, every 250 ms per owned partition. It reads
 * the timer index in due order and fires what is due: expiry of HELD
 * reservations (holds released, EXPIRED), re-requests of hold results that did
 * not come back in time (same attempt: the counter answers a duplicate with its
 * first answer) — rolling back after HF_RESULT_RETRIES_MAX, unless the counter
 * may have answered the shopper itself (park.c: then asked again, logged) — and the end of the
 * retention of an idempotency record or of an ended reservation. Each timer is
 * checked against the state when it fires, so a timer left stale is harmless;
 * the common transitions (held, committed, released, extended) delete the
 * timers they make stale (gw_timer_del) rather than leave each to be read,
 * decoded and dropped here.
 *
 * Memory: as everywhere in the gateway but the load-shedding observations
 * (shed.c, per-thread state, not scratch) and the sweeper cursor's atomics
 * (env->sweep, built by gateway_env_new), nothing is allocated, static or
 * thread-local — records and key batches live on the stack of the call that
 * uses them. A task thread gets HF_TASK_STACK_BYTES (8 MiB); the deepest
 * gateway chain, the tick's, takes about 110 KB (gcc -fcallgraph-info=su, -O2;
 * a handler's about 76 KB). Due timers are read and fired GW_SWEEP_BATCH_MAX at
 * a time (17 KB), up to HF_SWEEP_TIMERS_MAX per tick. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"
#include "log.h"

typedef struct {
    char key[GW_KEY_MAX];
    size_t len;
} gw_due_timer_t;

/* Keys read before they are acted on (due timers, a forgotten reservation's
 * refund markers), this many at a time: a batch is 64 x 264 bytes on the stack. */
#define GW_SWEEP_BATCH_MAX 64

/* Reads up to max due timer keys, in due order; the iterator is closed before
 * anything is written. A fired timer is deleted, so the next call starts after
 * it; a fire never arms a timer due by now (every timeout and retention is at
 * least 100 ms, config.c), so batches fire exactly the timers, in the order,
 * that one long read would. */
static int collect_due(stage_ctx_t *ctx, int64_t now_ms, const gw_due_timer_t *after,
                       gw_due_timer_t *due, size_t max, size_t *count)
{
    *count = 0;
    state_iter_t *it = stage_iter(ctx, "T", 1, false);
    if (!it)
        return HF_ERR_NOMEM;
    /* A later batch resumes after the previous one's last timer: starting from
     * "T" again would walk past every timer this tick already deleted (the
     * batch's and the memtable's tombstones), and the tick's cost would grow
     * with the square of its batches. */
    if (after)
        state_iter_start_after(it, stage_partition(ctx), after->key, after->len);
    const void *k, *v;
    size_t klen, vlen;
    while (*count < max && state_iter_next(it, &k, &klen, &v, &vlen)) {
        int64_t due_ms = 0;
        char kind, ref[GW_KEY_MAX];
        if (!gw_timer_parse(k, klen, &due_ms, &kind, ref, sizeof ref) || due_ms > now_ms)
            break;
        hf_assert(klen < GW_KEY_MAX);
        memcpy(due[*count].key, k, klen);
        due[(*count)++].len = klen;
    }
    state_iter_destroy(it);
    return HF_OK;
}

static int fire_pending(stage_ctx_t *ctx, hf_reservation_state_t *rs, int64_t now_ms)
{
    if (!gw_saga_open(rs) || rs->result_deadline_ms == 0 || rs->result_deadline_ms > now_ms)
        return HF_OK;
    const gateway_env_t *env = gateway_env(ctx);
    /* A reservation its counter may have answered HELD is never rolled back
     * (the shopper may hold that answer): its Hold is asked again, as often as
     * it takes; the counter answers a repeat from the hold's record. */
    bool awaited = gw_counter_awaited(rs);
    if (rs->result_retries >= HF_RESULT_RETRIES_MAX && awaited)
        log_warn("gateway", "%s: its counter has not answered after %d re-requests; asking again",
                 rs->reservation_id, rs->result_retries);
    if (rs->result_retries >= HF_RESULT_RETRIES_MAX && !awaited) {
        log_warn("gateway", "%s: hold results missing after %d re-requests; rolling back",
                 rs->reservation_id, rs->result_retries);
        if (gw_is_rebook(rs))
            return gw_rebook_refund(ctx, rs, "the counters did not answer in time");
        int err = gw_end_holds(ctx, rs, HF_RES_REJECTED, "counter did not answer");
        return err ? err
                   : gw_end(ctx, rs,
                            &(gw_end_t){.store = true,
                                        .reserve = true,
                                        .reserve_outcome = HF_REPLY_REJECTED_INSUFFICIENT,
                                        .reserve_message = "the counters did not answer in time",
                                        .ledger = true,
                                        .ledger_kind = HF_LEDGER_REJECTED,
                                        .ledger_reason = "counter did not answer"});
    }
    for (int32_t i = 0; i < rs->allocations_count; i++)
        if (rs->allocations[i].status == HF_HOLD_REF_HOLD_SENT) {
            int err = gw_emit_hold(ctx, rs, &rs->allocations[i]);
            if (err)
                return err;
        }
    if (rs->result_retries < HF_RESULT_RETRIES_MAX) /* the backoff's bound, and its count's */
        rs->result_retries++;
    rs->result_deadline_ms = now_ms + env->result_timeout_ms * (1 + rs->result_retries);
    int err = gw_store(ctx, rs);
    return err ? err
               : gw_timer_add(ctx, rs->result_deadline_ms, GW_TIMER_PENDING, rs->reservation_id);
}

static int fire_idempotency(stage_ctx_t *ctx, const char *ref, int64_t now_ms)
{
    char key[GW_KEY_MAX];
    int n = snprintf(key, sizeof key, "I%s", ref);
    hf_assert(n > 0 && n < (int)sizeof key);
    return stage_del(ctx, key, (size_t)n);
}

/* An ended reservation left alone for the retention is deleted (its
 * idempotency records go on their own timers); one still settling a late
 * payment, or changed since the timer was armed, is kept. */
static int fire_forget(stage_ctx_t *ctx, const hf_reservation_state_t *rs, int64_t now_ms)
{
    const gateway_env_t *env = gateway_env(ctx);
    if (!gw_res_terminal(rs->status) || gw_saga_open(rs) ||
        rs->updated_at_ms + env->reservation_retention_ms > now_ms)
        return HF_OK;
    char key[GW_KEY_MAX];
    size_t len = gw_res_key(key, rs->reservation_id);
    int err = stage_del(ctx, key, len);
    if (err || !gw_res_may_flag_refund(rs))
        return err; /* the prefix scan below is the dearest step of a tick: skip it */
    /* Its refund markers go with it ("P<rid>|": '|' ends the id, so no other
     * reservation's keys share the prefix). */
    int n = snprintf(key, sizeof key, "P%s|", rs->reservation_id);
    hf_assert(n > 0 && n < (int)sizeof key);
    gw_due_timer_t markers[GW_SWEEP_BATCH_MAX];
    size_t count = GW_SWEEP_BATCH_MAX;
    while (!err && count == GW_SWEEP_BATCH_MAX) { /* deleted keys no longer show */
        count = 0;
        state_iter_t *it = stage_iter(ctx, key, (size_t)n, false);
        if (!it)
            return HF_ERR_NOMEM;
        const void *k, *v;
        size_t klen, vlen;
        while (count < GW_SWEEP_BATCH_MAX && state_iter_next(it, &k, &klen, &v, &vlen)) {
            hf_assert(klen < GW_KEY_MAX);
            memcpy(markers[count].key, k, klen);
            markers[count++].len = klen;
        }
        state_iter_destroy(it);
        for (size_t i = 0; i < count && !err; i++)
            err = stage_del(ctx, markers[i].key, markers[i].len);
    }
    return err;
}

static int fire(stage_ctx_t *ctx, const gw_due_timer_t *t, int64_t now_ms)
{
    int64_t due_ms = 0;
    char kind, ref[GW_KEY_MAX];
    hf_assert(gw_timer_parse(t->key, t->len, &due_ms, &kind, ref, sizeof ref));
    int err = stage_del_local(ctx, t->key, t->len);
    if (err)
        return err;
    if (kind == GW_TIMER_IDEMPOTENCY)
        return fire_idempotency(ctx, ref, now_ms);
    hf_reservation_state_t rs;
    err = gw_load(ctx, ref, &rs);
    if (err == HF_ERR_NOTFOUND)
        return HF_OK;
    if (err)
        return err;
    if (kind == GW_TIMER_EXPIRY)
        return rs.status == HF_RES_HELD && rs.expires_at_ms <= now_ms ? gw_expire(ctx, &rs) : HF_OK;
    if (kind == GW_TIMER_PENDING)
        return fire_pending(ctx, &rs, now_ms);
    if (kind == GW_TIMER_FORGET)
        return fire_forget(ctx, &rs, now_ms);
    return HF_OK;
}

/* The tick fired every timer due by now_ms (it stopped short of its bound), so
 * no live timer sorts before "due now_ms, after every kind": the cursor moves
 * there even when nothing fired. Without this it moved only past timers that
 * fired, and the tombstones of timers deleted before they were due — a Hold's
 * result timer, deleted when its answer comes, one for nearly every reserve —
 * were walked again by every tick until compaction dropped them: with a
 * growing store and few expiries (10M open holds building up) that took the
 * gateway's thread from 0.3 to over 0.8 of a core at 3,000 reserves/s. With
 * nothing fired, the cursor is rewritten at most every GW_SWEEP_STEP_MS, so an
 * idle partition writes a local key once a second, not at every tick. */
#define GW_SWEEP_STEP_MS 1000

static int sweep_to_now(stage_ctx_t *ctx, int64_t now_ms, size_t fired, int64_t cursor_due_ms)
{
    if (fired == 0 && cursor_due_ms >= 0 && now_ms - cursor_due_ms < GW_SWEEP_STEP_MS)
        return HF_OK;
    if (now_ms < 0 || now_ms < cursor_due_ms)
        return HF_OK; /* the clock went back: the cursor stays where it is */
    char key[GW_KEY_MAX];
    size_t len = gw_timer_key(key, now_ms, GW_TIMER_SWEPT_TO, "~");
    return gw_sweep_mark(ctx, key, len);
}

int gateway_tick(stage_ctx_t *ctx)
{
    int64_t now_ms = stage_now_ms(ctx);
    gw_due_timer_t due[GW_SWEEP_BATCH_MAX], last;
    size_t fired = 0, count = 0, want = 0;
    /* Where the previous tick stopped (gw_state.c): the timers before it are
     * fired, and their tombstones need not be walked again. */
    bool resume = false;
    int err = gw_sweep_resume(ctx, last.key, &last.len, &resume);
    if (err)
        return err;
    int64_t cursor_due_ms = -1;
    char kind, ref[GW_KEY_MAX];
    if (resume && !gw_timer_parse(last.key, last.len, &cursor_due_ms, &kind, ref, sizeof ref))
        cursor_due_ms = -1;
    do {
        want = HF_SWEEP_TIMERS_MAX - fired < GW_SWEEP_BATCH_MAX ? HF_SWEEP_TIMERS_MAX - fired
                                                                : GW_SWEEP_BATCH_MAX;
        err = collect_due(ctx, now_ms, resume || fired ? &last : NULL, due, want, &count);
        for (size_t i = 0; err == HF_OK && i < count; i++)
            err = fire(ctx, &due[i], now_ms);
        if (count > 0)
            last = due[count - 1];
        fired += count;
    } while (err == HF_OK && count == want && fired < HF_SWEEP_TIMERS_MAX);
    if (err == HF_OK && fired < HF_SWEEP_TIMERS_MAX)
        err = sweep_to_now(ctx, now_ms, fired, cursor_due_ms);
    else if (err == HF_OK && fired > 0)
        err = gw_sweep_mark(ctx, last.key, last.len);
    /* After the expiries: the units they gave back are in the balances. */
    return err ? err : gw_escrow_tick(ctx);
}

/* Restore: the timer index is derived state (stage_put_local), so it is rebuilt
 * from each restored reservation and idempotency record — the timers their
 * handlers would have armed. A timer left from an older value is harmless: it
 * is checked against the state when it fires. */
typedef struct {
    int64_t due_ms;
    char kind;
} gw_timer_ref_t;

/* The timers a reservation in state rs is due (what its handlers arm). */
static size_t reservation_timers(const gateway_env_t *env, const hf_reservation_state_t *rs,
                                 gw_timer_ref_t out[3])
{
    size_t n = 0;
    if (rs->status == HF_RES_HELD)
        out[n++] = (gw_timer_ref_t){rs->expires_at_ms, GW_TIMER_EXPIRY};
    if (gw_saga_open(rs) && rs->result_deadline_ms != 0)
        out[n++] = (gw_timer_ref_t){rs->result_deadline_ms, GW_TIMER_PENDING};
    if (gw_res_terminal(rs->status))
        out[n++] =
            (gw_timer_ref_t){rs->updated_at_ms + env->reservation_retention_ms, GW_TIMER_FORGET};
    return n;
}

int gateway_reindex(stage_ctx_t *ctx, const char *key, size_t key_len, const hf_record_t *rec)
{
    if (key_len < 2)
        return HF_OK;
    const gateway_env_t *env = gateway_env(ctx);
    if (key[0] == 'I') {
        if (key_len - 1 >= GW_KEY_MAX)
            return HF_OK; /* not a key this program wrote */
        char ref[GW_KEY_MAX];
        memcpy(ref, key + 1, key_len - 1);
        ref[key_len - 1] = '\0';
        /* The retention timer of the value being replaced goes, unless the new
         * value keeps it: a replay of a record and then its tombstone (it was
         * forgotten) leaves no timer behind. */
        hf_idempotency_record_t old;
        int err = stage_get_as(ctx, key, key_len, HF_REC_IDEMPOTENCY_RECORD, &old);
        if (err && err != HF_ERR_NOTFOUND && err != HF_ERR_CORRUPT)
            return err;
        const hf_idempotency_record_t *ir =
            rec && rec->type == HF_REC_IDEMPOTENCY_RECORD ? &rec->u.idempotency_record : NULL;
        if (err == HF_OK && (!ir || ir->stored_at_ms != old.stored_at_ms)) {
            char tkey[GW_KEY_MAX];
            err =
                stage_del_local(ctx, tkey,
                                gw_timer_key(tkey, old.stored_at_ms + env->idempotency_retention_ms,
                                             GW_TIMER_IDEMPOTENCY, ref));
            if (err)
                return err;
        }
        return ir ? gw_timer_add(ctx, ir->stored_at_ms + env->idempotency_retention_ms,
                                 GW_TIMER_IDEMPOTENCY, ref)
                  : HF_OK;
    }
    if (key[0] != 'R')
        return HF_OK;
    /* The timers of the value being replaced go, unless the new one keeps them:
     * a restore that replays HELD then EXPIRED leaves no expiry timer behind. */
    gw_timer_ref_t old_t[3], new_t[3];
    size_t old_n = 0, new_n = 0;
    hf_record_t old;
    int err = stage_get(ctx, key, key_len, &old);
    if (err && err != HF_ERR_NOTFOUND)
        return err;
    if (err == HF_OK && old.type == HF_REC_RESERVATION_STATE)
        old_n = reservation_timers(env, &old.u.reservation_state, old_t);
    const hf_reservation_state_t *rs =
        rec && rec->type == HF_REC_RESERVATION_STATE ? &rec->u.reservation_state : NULL;
    if (rs)
        new_n = reservation_timers(env, rs, new_t);
    const char *rid = rs ? rs->reservation_id : old.u.reservation_state.reservation_id;
    err = HF_OK;
    for (size_t i = 0; i < old_n && !err; i++) {
        bool kept = false;
        for (size_t j = 0; j < new_n; j++)
            kept |= new_t[j].due_ms == old_t[i].due_ms && new_t[j].kind == old_t[i].kind;
        if (!kept) {
            char tkey[GW_KEY_MAX];
            err =
                stage_del_local(ctx, tkey, gw_timer_key(tkey, old_t[i].due_ms, old_t[i].kind, rid));
        }
    }
    for (size_t j = 0; j < new_n && !err; j++)
        err = gw_timer_add(ctx, new_t[j].due_ms, new_t[j].kind, rid);
    return err;
}
