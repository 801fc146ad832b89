/* The gateway stage: the checkout API. Owns, per reservation_id partition, the
 * reservations (their saga, allocations and the answer to their Reserve), the
 * idempotency records of the other requests and the timer index that drives expiry, lost-result re-requests and
 * idempotency retention. Inputs holdfast.requests (Reserve, Commit, Release,
 * Extend; key reservation_id) and holdfast.counter-results (key reservation_id),
 * co-partitioned; outputs Hold/CommitHold/ReleaseHold to
 * holdfast.counter-commands (key "warehouse|sku"), replies to each request's
 * reply_to, and every transition to holdfast.ledger.
 *
 * Files: gateway_stage.c (handler table, shared helpers), one file per record
 * type (reserve.c, commit.c, release.c, extend.c, counter_result.c), saga.c
 * (gather results, re-route, roll back), late_payment.c (a Commit after
 * expiry: refund or re-reserve), sweeper.c (the tick: timers),
 * gateway_rules.c (pure: validation, hashing, guards, TTL), gateway_keys.c
 * (state key layout), gateway_env.c (config, warehouses and the routing view,
 * created once per process). */
#ifndef HF_GATEWAY_H
#define HF_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "records.h"
#include "route/route.h"
#include "stage.h"

const stage_def_t *gateway_stage(void);

/* Reservation status (ReservationState.status). HELD -> COMMITTED | RELEASED |
 * EXPIRED is the only legal graph after PENDING; terminal states never move. */
typedef enum {
    GW_RES_PENDING = 0,
    GW_RES_HELD,
    GW_RES_COMMITTED,
    GW_RES_RELEASED,
    GW_RES_EXPIRED,
    GW_RES_REJECTED,
    GW_RES__COUNT
} gw_res_status_t;

/* Hold status (HoldRef.status). */
typedef enum {
    GW_HOLD_SENT = 0, /* Hold emitted, no result yet */
    GW_HOLD_OK,       /* the counter reserved it */
    GW_HOLD_REFUSED,  /* INSUFFICIENT: nothing reserved */
    GW_HOLD_RELEASED, /* ReleaseHold emitted (rollback, release, expiry, shortfall) */
} gw_hold_status_t;

const char *gw_res_status_name(int32_t status);
bool gw_res_terminal(int32_t status);

typedef enum { GW_LATE_REFUND = 0, GW_LATE_RERESERVE } gw_late_policy_t;

/* The re-reservation of an EXPIRED reservation for a payment that came late
 * (ReservationState.rebook; late_payment.c). It never changes the reservation's
 * status: the original reservation stays EXPIRED. */
typedef enum {
    GW_REBOOK_NONE = 0,
    GW_REBOOK_PENDING,   /* holds asked for, results awaited */
    GW_REBOOK_COMMITTED, /* every line held again and committed: the payment bought it */
    GW_REBOOK_REFUNDED,  /* stock did not allow: everything released, payment flagged */
} gw_rebook_t;

/* Reason (ReservationState.reason, ledger, ReleaseHold) of a reservation ended
 * because a stock count revoked one of its holds. */
#define GW_REASON_SHORTFALL "stock_shortfall"
/* LATE_PAYMENT ledger reasons: the payment is to be refunded, or it bought the
 * re-reserved units (the event's allocations). */
#define GW_LATE_REFUNDED    "refund"
#define GW_LATE_REBOOKED    "rereserved"

/* What the gateway needs from the outside world: built once per process by the
 * stage's init (gateway_env_new, in main before any task starts), or filled by
 * a unit test and handed to the fake stage. Read-only once built. */
typedef struct {
    route_config_t routes;
    int64_t ttl_default_ms;
    struct {
        hf_id_t name;
        int64_t ttl_ms;
    } campaigns[HF_CAMPAIGNS_MAX];
    size_t campaigns_count;
    int hold_max_factor_pct;
    int64_t idempotency_retention_ms;
    int64_t reservation_retention_ms; /* >= idempotency_retention_ms */
    gw_late_policy_t late_policy;
    int64_t result_timeout_ms;
    int64_t view_stale_max_ms;
    int64_t reserve_deadline_ms; /* load shedding (shed.c); 0: never shed */
    /* The routing view: HF_ERR_NOTFOUND when the sku is unknown. */
    int (*availability)(void *opaque, const char *sku, hf_availability_t *out);
    /* ms since the view was current; < 0 before it ever was. */
    int64_t (*staleness_ms)(void *opaque);
    void *opaque;
    /* A request's reply_to may name the replies topic or a topic that starts
     * with this (the deployment's topic prefix included); empty: only the
     * replies topic. Internal topics are refused whatever it says. */
    char reply_topic_prefix[HF_TOPIC_LEN_MAX + 1];
    /* Whether a reply topic exists (metadata, cached); NULL: assume it does. */
    bool (*topic_exists)(void *topics_opaque, const char *topic);
    void *topics_opaque;
} gateway_env_t;

/* The environment of ctx's stage (stage_env): the one gateway_env_new built
 * before the task started. Never NULL (asserted). */
const gateway_env_t *gateway_env(stage_ctx_t *ctx);
/* The stage's init (stage_def_t.init): checks every gateway setting of cfg
 * (HF_ERR_CONFIG, errstr naming the key), loads warehouses_file, then starts
 * the reply-topic reader and the routing view and waits up to 15 s for the
 * view to catch up. *env_out is a gateway_env_t the caller frees with
 * gateway_env_destroy. */
int gateway_env_new(const struct hf_config *cfg, void **env_out, char *errstr,
                    size_t errstr_size) HF_MUST_CHECK;
/* Stops the view and frees what gateway_env_new built; accepts NULL. */
void gateway_env_destroy(void *env);
/* The settings part of gateway_env_new, without Kafka: fills env from cfg
 * (routing view and topic check left NULL) or fails naming the key. */
int gateway_env_configure(const struct hf_config *cfg, gateway_env_t *env, char *errstr,
                          size_t errstr_size) HF_MUST_CHECK;
/* Parses "name=ms,name=ms" into env->campaigns. */
int gateway_parse_campaigns(const char *spec, gateway_env_t *env, char *errstr,
                            size_t errstr_size) HF_MUST_CHECK;

/* ---- state keys (gateway_keys.c). Identifiers may not contain '|'.
 *   R<reservation_id>                          -> ReservationState
 *   I<reservation_id>|<idempotency_key>        -> IdempotencyRecord (Commit, Release,
 *                                                 Extend; a Reserve's answer is in R)
 *   T<due_ms be64><kind><ref>                  -> "" (timer index, ordered by due time)
 *   P<reservation_id>|<payment_id>             -> "" (payment flagged for refund)
 * Timer kinds: 'E' expiry (ref = reservation_id), 'P' pending results
 * (ref = reservation_id), 'I' idempotency retention (ref = rid|key), 'F' forget
 * an ended reservation after the retention (ref = reservation_id). A timer is
 * checked against the state when it fires, so stale timers are harmless. */
#define GW_KEY_MAX           HF_STATE_KEY_LEN_MAX
#define GW_TIMER_EXPIRY      'E'
#define GW_TIMER_PENDING     'P'
#define GW_TIMER_IDEMPOTENCY 'I'
#define GW_TIMER_FORGET      'F'
size_t gw_res_key(char *out, const char *reservation_id);
size_t gw_idem_key(char *out, const char *reservation_id, const char *idempotency_key);
size_t gw_payment_key(char *out, const char *reservation_id, const char *payment_id);
size_t gw_timer_key(char *out, int64_t due_ms, char kind, const char *ref);
/* Splits a timer key; false if it is not one. ref is NUL-terminated into ref_out. */
bool gw_timer_parse(const char *key, size_t key_len, int64_t *due_ms, char *kind, char *ref_out,
                    size_t ref_size);

/* ---- rules (gateway_rules.c): pure */

/* NULL when id is a usable identifier (non-empty, printable, no '|'), else why. */
const char *gw_check_id(const char *id, const char *what);
/* Validates a Reserve's shape; NULL when fine, else a message for REJECTED_INVALID. */
const char *gw_check_reserve(const hf_reserve_t *r, char *buf, size_t buf_size);
/* The TTL a Reserve gets: its own, its campaign's, or the default. */
int64_t gw_ttl_ms(const gateway_env_t *env, const hf_reserve_t *r);
/* FNV-1a over the request body without sent_at_ms and reply_to. */
int64_t gw_request_hash(const hf_record_t *rec);
/* Sum of OK holds of sku in the reservation. */
int64_t gw_held_qty(const hf_reservation_state_t *rs, const char *sku);
/* True when no hold awaits a result. */
bool gw_all_answered(const hf_reservation_state_t *rs);
/* True while a saga gathers hold results: a PENDING reservation, or the
 * re-reservation of an EXPIRED one. */
bool gw_saga_open(const hf_reservation_state_t *rs);
/* True for a legal Kafka topic name (1..249 of [a-zA-Z0-9._-]). */
bool gw_topic_name_ok(const char *topic);
/* NULL when a request may name reply_to: empty, the replies topic, or a legal
 * topic name under allowed_prefix that is none of holdfast's own topics (a
 * reply must never land in the ledger, the signals or a changelog). Else the
 * message of the rejection, in buf. Existence is checked apart. */
const char *gw_check_reply_to(const char *reply_to, const char *allowed_prefix, char *buf,
                              size_t buf_size);
/* The reply topic: the request's or the default. */
const char *gw_reply_topic(const char *reply_to);

/* ---- handlers (one file each) */
int gateway_on_reserve(stage_ctx_t *ctx, const hf_record_t *rec);
int gateway_on_commit(stage_ctx_t *ctx, const hf_record_t *rec);
int gateway_on_release(stage_ctx_t *ctx, const hf_record_t *rec);
int gateway_on_extend(stage_ctx_t *ctx, const hf_record_t *rec);
int gateway_on_counter_result(stage_ctx_t *ctx, const hf_record_t *rec);
int gateway_tick(stage_ctx_t *ctx);
/* Restore: rebuilds the (unlogged) timer index from a restored record (sweeper.c). */
int gateway_reindex(stage_ctx_t *ctx, const char *key, size_t key_len, const hf_record_t *rec);

/* ---- shared (gateway_stage.c) */
int gw_load(stage_ctx_t *ctx, const char *reservation_id,
            hf_reservation_state_t *out) HF_MUST_CHECK; /* HF_ERR_NOTFOUND when absent */
int gw_store(stage_ctx_t *ctx, hf_reservation_state_t *rs) HF_MUST_CHECK;
int gw_timer_add(stage_ctx_t *ctx, int64_t due_ms, char kind, const char *ref) HF_MUST_CHECK;
/* Checks the record key is the reservation_id (the partition owns it). */
int gw_check_key(stage_ctx_t *ctx, const char *reservation_id) HF_MUST_CHECK;
/* gw_check_key, then the request's reply_to: empty (the default topic) or an
 * allowed (gw_check_reply_to), existing topic. A request naming a topic that is
 * illegal, not allowed or does not exist is
 * not applied: it is answered REJECTED_INVALID on the default replies topic
 * (where else could it go?) and *answered is set. Checked before anything is
 * written, so a reply can never fail the transaction. */
int gw_check_request(stage_ctx_t *ctx, const char *reservation_id, const char *idempotency_key,
                     const char *reply_to, bool *answered) HF_MUST_CHECK;

/* Idempotency of a Reserve: its answer lives in the reservation itself
 * (reserve_replied, reserve_reply), so the Reserve's transaction and the one
 * that answers it each write only R. A retry of a known reservation_id is
 * answered here and *handled set: the stored reply (the first answer, whatever
 * the reservation became since), nothing while it is PENDING, CONFLICT for
 * another body or another key. State written before the answer moved into R
 * keeps it in an IdempotencyRecord, which is still read. *handled stays false
 * for an unknown reservation_id. */
int gw_reserve_idem_check(stage_ctx_t *ctx, const hf_reserve_t *r, int64_t hash,
                          bool *handled) HF_MUST_CHECK;
/* Records in rs the answer to its Reserve and fills *reply to emit; the
 * caller stores rs (gw_store). A Reserve is answered once. */
void gw_reserve_answer(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                       const char *message, hf_reply_t *reply);

/* Idempotency of Commit, Release and Extend (and of a Reserve answered before
 * its answer moved into R): looks key up. Returns HF_OK and sets *handled when
 * the request was answered here (stored reply re-emitted, CONFLICT, or still
 * pending). */
int gw_idem_check(stage_ctx_t *ctx, const char *reservation_id, const char *idempotency_key,
                  int64_t hash, const char *reply_to, bool *handled) HF_MUST_CHECK;
/* Stores the reply for the key (complete) or a pending marker (reply == NULL). */
int gw_idem_store(stage_ctx_t *ctx, const char *reservation_id, const char *idempotency_key,
                  int64_t hash, const hf_reply_t *reply) HF_MUST_CHECK;

/* Fills a reply from the reservation (OK holds as allocations). */
void gw_reply_init(const hf_reservation_state_t *rs, const char *idempotency_key,
                   hf_reply_outcome_t outcome, const char *message, int64_t now_ms,
                   hf_reply_t *out);
int gw_emit_reply(stage_ctx_t *ctx, const char *reply_to, const hf_reply_t *reply) HF_MUST_CHECK;
/* Answers a request about rs: the reply is stored under (reservation,
 * idempotency_key) with the request's hash, then emitted to reply_to. */
int gw_answer(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const char *idempotency_key,
              int64_t hash, const char *reply_to, hf_reply_outcome_t outcome,
              const char *message) HF_MUST_CHECK;
/* Answers the Reserve of rs (gw_reserve_answer, rs stored, the reply emitted),
 * e.g. when the reservation ends before it was ever held. */
int gw_answer_reserve(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                      const char *message) HF_MUST_CHECK;
/* Replies without a reservation (invalid, not found, conflict): not stored. */
int gw_reply_simple(stage_ctx_t *ctx, const char *reservation_id, const char *idempotency_key,
                    const char *reply_to, hf_reply_outcome_t outcome,
                    const char *message) HF_MUST_CHECK;
int gw_emit_ledger(stage_ctx_t *ctx, const hf_reservation_state_t *rs, hf_ledger_kind_t kind,
                   const char *reason) HF_MUST_CHECK;
int gw_emit_hold(stage_ctx_t *ctx, const hf_reservation_state_t *rs,
                 const hf_hold_ref_t *h) HF_MUST_CHECK;
int gw_emit_commit_hold(stage_ctx_t *ctx, const hf_reservation_state_t *rs,
                        const hf_hold_ref_t *h) HF_MUST_CHECK;
/* Emits CommitHold for every OK hold: the sale goes to the counters. */
int gw_commit_holds(stage_ctx_t *ctx, const hf_reservation_state_t *rs) HF_MUST_CHECK;
/* Emits ReleaseHold for hold i (SENT or OK) and marks it RELEASED. */
int gw_release_one(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i,
                   const char *reason) HF_MUST_CHECK;
/* Emits ReleaseHold for every SENT or OK hold and marks them RELEASED. */
int gw_release_holds(stage_ctx_t *ctx, hf_reservation_state_t *rs,
                     const char *reason) HF_MUST_CHECK;

/* ---- saga (saga.c) */

/* Routes every line (first round) into rs->allocations and emits the Holds. On
 * a rejection (unknown sku, network cannot cover) returns HF_OK with *reject set
 * to the reply outcome and msg filled; nothing is emitted then. */
int gw_saga_start(stage_ctx_t *ctx, hf_reservation_state_t *rs, bool *rejected,
                  hf_reply_outcome_t *reject, char *msg, size_t msg_size) HF_MUST_CHECK;
/* Asks again, under a new attempt number, for the holds rs had confirmed and
 * has since released, when they cover every line exactly; false (nothing done)
 * when they do not. *err is the emit's error. */
bool gw_saga_restart(stage_ctx_t *ctx, hf_reservation_state_t *rs, int *err);
/* Once every hold of an open saga (gw_saga_open) is answered: re-route the
 * missing quantity, or end it — a PENDING reservation HELD or REJECTED, a
 * late payment's re-reservation committed or refunded. Stores rs. */
int gw_saga_settle(stage_ctx_t *ctx, hf_reservation_state_t *rs) HF_MUST_CHECK;
/* Ends a reservation that has holds: releases them, moves to status, ledger. */
int gw_finish(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t status, hf_ledger_kind_t kind,
              const char *reason) HF_MUST_CHECK;
/* Expires a HELD reservation whose expires_at_ms has passed. */
int gw_expire(stage_ctx_t *ctx, hf_reservation_state_t *rs) HF_MUST_CHECK;

/* ---- load shedding (shed.c) */

/* NULL when reserve r may be served now, else why it is answered BUSY: it waited
 * longer than env->reserve_deadline_ms to reach the gateway (sent_at_ms), or the
 * counter hop of this partition's sagas answered slower than that within the
 * last second. A BUSY reserve is not applied and not remembered, so a retry
 * with the same idempotency key is safe. Commits, releases and expiries are
 * never shed: shedding new reserves is what lets them through. */
const char *gw_shed_reserve(stage_ctx_t *ctx, const gateway_env_t *env, const hf_reserve_t *r,
                            char *why, size_t why_size);
/* Records how long a hold's result took (from the saga's last send to its
 * arrival): the counter hop's current latency for this partition. */
void gw_shed_observe_result(stage_ctx_t *ctx, int64_t lag_ms);

/* ---- late payments (late_payment.c) */

/* A Commit of an EXPIRED reservation: refund, or re-reserve, per the policy. */
int gw_late_payment(stage_ctx_t *ctx, const hf_commit_t *c, int64_t hash,
                    hf_reservation_state_t *rs) HF_MUST_CHECK;
/* Flags payment_id of rs for refund: a LATE_PAYMENT "refund" ledger event
 * (naming the units it no longer buys when returned is given), once per
 * (reservation, payment) — a P key remembers it. */
int gw_flag_refund(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const char *payment_id,
                   const hf_hold_ref_t *returned) HF_MUST_CHECK;
/* Flags c's payment for refund (once per payment_id) and answers it outcome/why. */
int gw_refund_payment(stage_ctx_t *ctx, const hf_commit_t *c, int64_t hash,
                      hf_reservation_state_t *rs, hf_reply_outcome_t outcome,
                      const char *why) HF_MUST_CHECK;
/* The re-reservation's saga ended: every line held (commit them) or not. */
int gw_rebook_held(stage_ctx_t *ctx, hf_reservation_state_t *rs) HF_MUST_CHECK;
int gw_rebook_refund(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *why) HF_MUST_CHECK;
/* A stock count revoked hold i of a re-reservation (pending or committed). */
int gw_rebook_revoked(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i) HF_MUST_CHECK;

#endif
