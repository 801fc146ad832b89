/* The gateway stage: the checkout API. Owns, per reservation_id partition, the
 * reservations (their saga, allocations and the answer to their Reserve), the
 * idempotency records of the other requests and the timer index that drives expiry, lost-result re-requests and
 * idempotency retention. Inputs holdfast.requests (Reserve, Commit, Release,
 * Extend; key reservation_id) and holdfast.counter-results (key reservation_id),
 * co-partitioned; outputs Hold/CommitHold/ReleaseHold to
 * holdfast.counter-commands (key "warehouse|sku"), replies to each request's
 * reply_to, and every transition to holdfast.ledger.
 *
 * Files, top-down (a file calls only files below it in this list, so no two
 * call each other):
 *   gateway_stage.c   the handler table (what handles which record type)
 *   reserve.c, commit.c, release.c, extend.c, counter_result.c, sweeper.c
 *                     one file per record type, and the tick (timers)
 *   late_payment.c    a Commit after expiry: refund or re-reserve
 *   saga.c            route lines into holds, gather results, re-route; it
 *                     returns how it stands (gw_saga_end_t), its caller decides
 *   gw_request.c      the prologue of every request: checks, idempotency,
 *                     the reservation loaded (gw_request_t)
 *   gw_answer.c       the one answer path (gw_end: store, refund flag,
 *                     idempotency record, reply, ledger) and replies
 *   gw_emit.c         counter commands, ledger events, refund flags
 *   gw_state.c        reservations loaded and stored, timers armed
 *   shed.c (load shedding), gateway_rules.c (pure: validation, hashing,
 *   guards, TTL), gateway_keys.c (state key layout), gateway_env.c (config,
 *   warehouses and the routing view). */
#ifndef HF_GATEWAY_H
#define HF_GATEWAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "escrow_heat.h"
#include "stock_hint.h"
#include "records.h"
#include "route/route.h"
#include "route/ship_from.h"
#include "stage.h"

const stage_def_t *gateway_stage(void);

/* The states on the wire are Avro enums, their C types in records.h, one name
 * table in records_names.c:
 * - ReservationState.status, hf_res_status_t (HF_RES_*): PENDING -> HELD |
 *   REJECTED, then HELD -> COMMITTED | RELEASED | EXPIRED is the only legal
 *   graph; terminal states never move.
 * - HoldRef.status, hf_hold_ref_status_t (HF_HOLD_REF_*): HOLD_SENT (no result
 *   yet), HELD (the counter reserved it), REFUSED (INSUFFICIENT: nothing
 *   reserved), RELEASE_SENT (ReleaseHold emitted; the counter's RELEASED is its
 *   answer to that). HELD and REFUSED mean what the counter means by them.
 * - ReservationState.rebook, hf_rebook_t (HF_REBOOK_*): the re-reservation of
 *   an EXPIRED reservation for a payment that came late (late_payment.c). It
 *   never changes the reservation's status: the original stays EXPIRED. */
bool gw_res_terminal(hf_res_status_t status);
/* A RELEASED reservation whose payment is refunded when it comes: a stock
 * shortfall revoked it, or a payment event released it (payment_policy) and the
 * shopper paid after all. A reservation the shopper released is not (CONFLICT:
 * the checkout that released it owns that payment). */
bool gw_res_released_for_payment(const hf_reservation_state_t *rs);
/* Whether payments of rs may have been flagged for refund (P keys): only an
 * EXPIRED reservation (a late payment, a failed re-reservation) or one
 * gw_res_released_for_payment is ever passed to gw_flag_refund, and terminal
 * states never move. The sweeper forgets any other without scanning for markers. */
bool gw_res_may_flag_refund(const hf_reservation_state_t *rs);

typedef enum { GW_LATE_REFUND = 0, GW_LATE_RERESERVE } gw_late_policy_t;

/* What a payment event does to its hold (payment_policy; payment_event.c). A
 * succeeded payment always commits; the others are configured. */
typedef enum {
    GW_PAY_KEEP = 0, /* nothing: the hold runs to its expiry */
    GW_PAY_EXTEND,   /* held while the payment is pending, up to its cap */
    GW_PAY_RELEASE,  /* released at once, the event's reason in the ledger */
    GW_PAY_COMMIT,   /* sold (SUCCEEDED only) */
    GW_PAY__COUNT
} gw_pay_action_t;

/* Reason (ReservationState.reason, ledger, ReleaseHold) of a reservation ended
 * because a stock count revoked one of its holds. */
#define GW_REASON_SHORTFALL      "stock_shortfall"
/* Reasons of reservations a payment event released: "payment_failed",
 * "payment_canceled", each maybe followed by ": <the provider's reason>". */
#define GW_REASON_PAYMENT_PREFIX "payment_"
/* LATE_PAYMENT ledger reasons: the payment is to be refunded, or it bought the
 * re-reserved units (the event's allocations). */
#define GW_LATE_REFUNDED         "refund"
#define GW_LATE_REBOOKED         "rereserved"

/* The sweeper cursor's bookkeeping (gw_state.c): the one part of the
 * environment the tasks change, shared by them, atomics only. */
typedef struct {
    uint64_t run_id;                  /* this process run's, never 0; set before any task */
    atomic_int_fast64_t fired_max_ms; /* the largest due time a cursor of this run named */
} gw_sweep_t;

/* Escrow counters for /metrics (escrow.c), shared by the tasks, atomics only;
 * counted as applied, so a transaction that aborts may have counted too. */
typedef struct {
    atomic_uint_fast64_t taken;    /* holds taken from an allotment (one hop) */
    atomic_uint_fast64_t missed;   /* holds of an escrow sku the balance could not cover */
    atomic_uint_fast64_t asked;    /* refills asked for */
    atomic_uint_fast64_t granted;  /* units granted */
    atomic_uint_fast64_t returned; /* units given back */
} gw_escrow_stats_t;

/* Which pinned SKUs each partition of this process has primed (escrow.c):
 * looked at once per process run, not at every tick. */
typedef struct {
    atomic_bool done[HF_PARTITIONS_MAX][HF_ESCROW_SKUS_MAX];
} gw_escrow_primed_t;

/* What the gateway needs from the outside world: built once per process by the
 * stage's init (gateway_env_new, in main before any task starts), or filled by
 * a unit test and handed to the fake stage. Read-only once built, but for what
 * sweep points at. */
typedef struct {
    route_config_t routes;
    /* Per-SKU ship-from lists (ship_from_file); NULL: none. Owned: freed by
     * gateway_env_release. */
    ship_from_t *ship_from;
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
    /* payment_policy, per hf_payment_event_kind_t (UNKNOWN: never applied);
     * a zeroed env keeps every hold but commits a success. */
    gw_pay_action_t payment_action[HF_PAY__COUNT];
    int64_t payment_pending_extend_ms; /* 0: a pending event extends nothing */
    int64_t payment_pending_max_ms;
    int64_t result_timeout_ms;
    int64_t view_stale_max_ms;
    /* reserve_answer_from_counter: a reservation one hold covers is answered by
     * its counter (park.c); false in a zeroed env, as unit tests build it. */
    bool counter_answers;
    /* Load shedding (shed.c): a Reserve older than the deadline is shed, and
     * while the least wait over an interval stays above the target (CoDel);
     * deadline 0: never shed; target 0: the deadline only. */
    int64_t reserve_deadline_ms;
    int64_t reserve_shed_target_ms;
    int64_t reserve_shed_interval_ms; /* > 0 when the target is */
    /* The counters' last answers per pair, routed on while fresher than the
     * view (stock_hint.h, route_hint_ttl_ms); NULL: off. */
    gw_hint_t *hint;
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
    /* The sweeper's cursor; NULL: none, every tick scans from the first timer. */
    gw_sweep_t *sweep;
    /* Escrow (escrow.c, docs/ESCROW.md); skus_count 0 and auto_reserves_s 0: off. */
    struct {
        hf_sku_t skus[HF_ESCROW_SKUS_MAX]; /* pinned to escrow */
        size_t skus_count;
        int64_t refill_min_units, refill_max_units, refill_horizon_ms;
        int64_t idle_return_ms;
        int64_t scarce_units;       /* at or under this many sellable units: direct */
        gw_escrow_stats_t *stats;   /* NULL: not counted */
        gw_escrow_primed_t *primed; /* NULL: every tick looks (tests) */
        gw_heat_t *heat;            /* per-SKU contention (escrow_auto_reserves_s); NULL: off */
        int32_t partitions;         /* of the requests topic; 0: unknown, pinned SKUs not primed */
        int64_t prime_units;        /* a pinned pair's allotment asked for before any shopper */
    } escrow;
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
/* Frees what gateway_env_configure loaded (the ship-from lists); env stays zeroed. */
void gateway_env_release(gateway_env_t *env);
/* Parses "sku,sku" into env->escrow.skus. */
int gateway_parse_escrow_skus(const char *spec, gateway_env_t *env, char *errstr,
                              size_t errstr_size) HF_MUST_CHECK;
/* Parses "name=ms,name=ms" into env->campaigns. */
int gateway_parse_campaigns(const char *spec, gateway_env_t *env, char *errstr,
                            size_t errstr_size) HF_MUST_CHECK;
/* "payment_policy": each event kind's action into env->payment_action (the
 * defaults first: HF_PAYMENT_POLICY_DEFAULT); HF_ERR_CONFIG with why. */
int gateway_parse_payment_policy(const char *spec, gateway_env_t *env, char *errstr,
                                 size_t errstr_size);

/* ---- state keys (gateway_keys.c). Identifiers may not contain '|'.
 *   R<reservation_id>                          -> ReservationState
 *   I<reservation_id>|<idempotency_key>        -> IdempotencyRecord (Commit, Release,
 *                                                 Extend; a Reserve's answer is in R)
 *   T<due_ms be64><kind><ref>                  -> "" (timer index, ordered by due time)
 *   P<reservation_id>|<payment_id>             -> "" (payment flagged for refund)
 *   C                                          -> run id be64 + the timer key the sweeper
 *                                                 swept up to (local, gw_state.c)
 * Timer kinds: 'E' expiry (ref = reservation_id), 'P' pending results
 * (ref = reservation_id), 'I' idempotency retention (ref = rid|key), 'F' forget
 * an ended reservation after the retention (ref = reservation_id). A timer is
 * checked against the state when it fires, so stale timers are harmless. */
#define GW_KEY_MAX           HF_STATE_KEY_LEN_MAX
#define GW_TIMER_EXPIRY      'E'
#define GW_TIMER_PENDING     'P'
#define GW_TIMER_IDEMPOTENCY 'I'
#define GW_TIMER_FORGET      'F'
#define GW_SWEEP_CURSOR_KEY  "C"
/* Never armed: the kind of the sweeper cursor's "swept up to" position
 * (sweeper.c), sorting after every real kind of its due time. */
#define GW_TIMER_SWEPT_TO    '~'
size_t gw_res_key(char *out, const char *reservation_id);
size_t gw_idem_key(char *out, const char *reservation_id, const char *idempotency_key);
size_t gw_payment_key(char *out, const char *reservation_id, const char *payment_id);
/* "Q<reservation_id>|<slot>": a request parked while its counter's answer is on
 * its way (park.c). */
size_t gw_park_key(char *out, const char *reservation_id, int slot);
size_t gw_timer_key(char *out, int64_t due_ms, char kind, const char *ref);
/* Splits a timer key; false if it is not one. ref is NUL-terminated into ref_out. */
bool gw_timer_parse(const char *key, size_t key_len, int64_t *due_ms, char *kind, char *ref_out,
                    size_t ref_size);

/* ---- rules (gateway_rules.c): pure */

/* NULL when id is a usable identifier (non-empty, printable, no '|'), else why. */
const char *gw_check_id(const char *id, const char *what);
/* Validates a Reserve's shape (only_warehouses against env's warehouses); NULL
 * when fine, else a message for REJECTED_INVALID. */
const char *gw_check_reserve(const gateway_env_t *env, const hf_reserve_t *r, char *buf,
                             size_t buf_size);
/* A line of rs (or of Reserve r, before rs exists) to route: qty of line l on
 * view, not to exclude, within the reservation's only_warehouses and the SKU's
 * ship-from list. */
route_line_t gw_route_line(const gateway_env_t *env, const hf_wh_ref_t *only, int32_t only_count,
                           const hf_geo_t *ship_to, const hf_line_t *l, int64_t qty,
                           const hf_availability_t *view, const char *const *exclude,
                           size_t exclude_count);
/* The TTL a Reserve gets: its own, its campaign's, or the default. */
int64_t gw_ttl_ms(const gateway_env_t *env, const hf_reserve_t *r);
/* The idempotency hash of a Reserve, Commit, Release or Extend: what it asks
 * for, from its decoded fields, never from its encoding, so a schema change does
 * not turn a retry across a deploy into a CONFLICT. Fields that count: Reserve
 * reservation_id, idempotency_key, lines (in the order sent), ship_to, ttl_ms,
 * campaign; Commit reservation_id, idempotency_key, payment_id; Release
 * reservation_id, idempotency_key, reason; Extend reservation_id,
 * idempotency_key, extend_by_ms. reply_to and sent_at_ms never count. A field
 * added to a request schema joins the hash only if it changes what the request
 * means, appended at the end of its kind's form and only when it differs from its
 * default, so stored hashes keep matching (gateway_rules.c). Aborts on any
 * other record type. */
int64_t gw_request_hash(const hf_record_t *rec);
/* Sum of HELD holds of sku in the reservation. */
int64_t gw_held_qty(const hf_reservation_state_t *rs, const char *sku);
/* True when no hold awaits a result. */
bool gw_all_answered(const hf_reservation_state_t *rs);
/* True while a saga gathers hold results: a PENDING reservation, or the
 * re-reservation of an EXPIRED one. */
bool gw_saga_open(const hf_reservation_state_t *rs);
/* True when rs's saga or holds are a late payment's re-reservation (an EXPIRED
 * reservation: expiry released every hold it had, so any it has since are the
 * re-reservation's), false for the reservation's own (PENDING, HELD, ...). */
bool gw_is_rebook(const hf_reservation_state_t *rs);
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
int gateway_on_payment_event(stage_ctx_t *ctx, const hf_record_t *rec);
int gateway_on_counter_result(stage_ctx_t *ctx, const hf_record_t *rec);
int gateway_on_allotment_grant(stage_ctx_t *ctx, const hf_record_t *rec);
int gateway_tick(stage_ctx_t *ctx);
/* Restore: rebuilds the (unlogged) timer index from a restored record (sweeper.c). */
int gateway_reindex(stage_ctx_t *ctx, const char *key, size_t key_len, const hf_record_t *rec);

/* ---- the request prologue (gw_request.c) */

/* Who is answered, and under what: a request's reservation_id, idempotency key
 * and reply topic, and the hash of its body, under which its answer is kept. */
typedef struct {
    const char *reservation_id;
    const char *idempotency_key;
    const char *reply_to;
    int64_t hash;
    hf_rec_type_t kind; /* HF_REC_RESERVE, _COMMIT, _RELEASE, _EXTEND or _PAYMENT_EVENT */
    /* For the latency of a reply sent in a later transaction: when the
     * request reached holdfast.requests, else when the gateway applied it,
     * epoch ms; 0: not known. (A reply to the record at hand measures from
     * that record's timestamp.) */
    int64_t requested_at_ms;
} gw_asker_t;

/* What the prologue left to its handler. */
typedef enum {
    GW_REQ_ANSWERED = 0, /* answered (or dead-lettered) already: the handler returns */
    GW_REQ_NEW,          /* a Reserve of a reservation_id not known yet */
    GW_REQ_FOUND,        /* rs is the reservation the request is about */
} gw_req_result_t;

typedef struct {
    gw_asker_t asker;
    gw_req_result_t result;
    hf_reservation_state_t rs; /* GW_REQ_FOUND: the reservation; GW_REQ_NEW: free */
} gw_request_t;

/* The one prologue of Reserve, Commit, Release and Extend, in this order: the
 * record key must be the reservation_id (else a dead letter: HF_ERR_INVAL); an
 * illegal, disallowed or missing reply_to is answered REJECTED_INVALID on the
 * default replies topic; a bad body (its idempotency key, a Reserve's lines, a
 * Commit's payment_id, an Extend's extend_by_ms) REJECTED_INVALID; then the
 * request is hashed and its idempotency key looked up — a retry gets the stored
 * answer (or none while it is pending), another body under the key CONFLICT —
 * and its reservation loaded: NOT_FOUND when absent (a Reserve: GW_REQ_NEW).
 * A request for a reservation whose counter may have answered it, before that
 * answer reached this gateway, is parked instead (park.c; GW_REQ_ANSWERED).
 * Nothing else is written before the handler decides. */
int gw_request_begin(stage_ctx_t *ctx, const hf_record_t *rec, gw_request_t *req) HF_MUST_CHECK;
/* Fills *out from a request record; false when rec is not a request. */
bool gw_request_ids(const hf_record_t *rec, gw_asker_t *out);
/* Checks the record key is the reservation_id (the partition owns it). */
int gw_check_key(stage_ctx_t *ctx, const char *reservation_id) HF_MUST_CHECK;
/* The stage's on_misrouted: answers a request that reached the wrong partition
 * REJECTED_INVALID (its reply_to if allowed) and stores nothing. */
int gw_on_misrouted(stage_ctx_t *ctx, const hf_record_t *rec, const char *why);

/* ---- requests waiting for a counter's answer (park.c) */

/* Requests parked per reservation at most (HF_PARKED_MAX). */
#define GW_PARKED_MAX HF_PARKED_MAX
/* True while rs's Reserve may have been answered by its counter (first round,
 * one Hold with answer_reserve) and that hold's result has not arrived. */
bool gw_counter_awaited(const hf_reservation_state_t *rs);
/* True when rs's counter answered its Reserve HELD (its first round's one
 * Hold held): the gateway records that answer and emits neither it nor the
 * ledger's HELD event again. */
bool gw_counter_told(const hf_reservation_state_t *rs);
/* Parks request rec of reservation_id in its first free slot; *parked false
 * when every slot is taken (nothing written). */
int gw_park(stage_ctx_t *ctx, const hf_record_t *rec, const char *reservation_id,
            bool *parked) HF_MUST_CHECK;
/* Takes (reads and deletes) the request parked in slot, if any. */
int gw_unpark(stage_ctx_t *ctx, const char *reservation_id, int slot, hf_record_t *out,
              bool *found) HF_MUST_CHECK;

/* ---- the answer path (gw_answer.c) */

/* How a request or a transition ends. gw_end does the steps asked for, always
 * in this order: the answer to rs's own Reserve recorded in rs (it lives there,
 * so before the store); rs stored; a payment flagged for refund; the answer to
 * the asker kept in its IdempotencyRecord; the replies emitted (the Reserve's,
 * then the asker's); the ledger event. Zeroed fields ask for nothing. */
typedef struct {
    bool store;                         /* rs changed: store it (gw_store) */
    bool reserve;                       /* answer rs's Reserve now (once; needs store) */
    hf_reply_outcome_t reserve_outcome; /* ... with this */
    const char *reserve_message;
    const char *refund_payment_id; /* flag this payment for refund (gw_flag_refund) */
    const gw_asker_t *asker;       /* answer this request, reply kept under its key */
    hf_reply_outcome_t outcome;    /* ... with this */
    const char *message;
    /* > 0: rs's counter told the shopper at this time (park.c): the answer is
     * recorded as told, with that time, and not emitted again */
    int64_t reserve_told_at_ms;
    bool ledger; /* emit a ledger event of rs */
    hf_ledger_kind_t ledger_kind;
    const char *ledger_reason;
} gw_end_t;
int gw_end(stage_ctx_t *ctx, hf_reservation_state_t *rs, const gw_end_t *end) HF_MUST_CHECK;
/* gw_end answering the asker about rs, which did not change. */
int gw_answer(stage_ctx_t *ctx, hf_reservation_state_t *rs, const gw_asker_t *asker,
              hf_reply_outcome_t outcome, const char *message) HF_MUST_CHECK;
/* Replies without a reservation and without keeping the answer (invalid, not
 * found, conflict, not yet decided): a retry is decided afresh. */
int gw_reply_simple(stage_ctx_t *ctx, const gw_asker_t *to, hf_reply_outcome_t outcome,
                    const char *message) HF_MUST_CHECK;
/* Emits reply to `to` (its reply_to) and counts it (holdfast_replies_total,
 * holdfast_request_latency_ms: from the request's timestamp when it is the
 * record at hand, else from to->requested_at_ms, else no latency). */
int gw_emit_reply(stage_ctx_t *ctx, const gw_asker_t *to, const hf_reply_t *reply) HF_MUST_CHECK;
/* Keeps the asker's answer under its key (complete), or a pending marker
 * (reply == NULL: the answer comes in a later transaction). */
int gw_idem_store(stage_ctx_t *ctx, const gw_asker_t *asker, const hf_reply_t *reply) HF_MUST_CHECK;
/* Emits ReleaseHold for every hold of rs still asked for or held and moves rs to
 * status (reason) — the transition; the caller ends it with gw_end. */
int gw_end_holds(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_res_status_t status,
                 const char *reason) HF_MUST_CHECK;
/* gw_end_holds, then stored with a ledger event of kind. */
int gw_finish(stage_ctx_t *ctx, hf_reservation_state_t *rs, hf_res_status_t status,
              hf_ledger_kind_t kind, const char *reason) HF_MUST_CHECK;
/* Expires a HELD reservation whose expires_at_ms has passed. */
int gw_expire(stage_ctx_t *ctx, hf_reservation_state_t *rs) HF_MUST_CHECK;

/* ---- what the gateway tells the others (gw_emit.c) */

int gw_emit_ledger(stage_ctx_t *ctx, const hf_reservation_state_t *rs, hf_ledger_kind_t kind,
                   const char *reason) HF_MUST_CHECK;
int gw_emit_hold(stage_ctx_t *ctx, const hf_reservation_state_t *rs,
                 const hf_hold_ref_t *h) HF_MUST_CHECK;
/* Emits CommitHold for every HELD hold: the sale goes to the counters. */
int gw_commit_holds(stage_ctx_t *ctx, const hf_reservation_state_t *rs) HF_MUST_CHECK;
/* Emits ReleaseHold for hold i (HOLD_SENT or HELD) and marks it RELEASE_SENT. */
int gw_release_one(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i,
                   const char *reason) HF_MUST_CHECK;
/* Emits ReleaseHold for every HOLD_SENT or HELD hold and marks them RELEASE_SENT. */
int gw_release_holds(stage_ctx_t *ctx, hf_reservation_state_t *rs,
                     const char *reason) HF_MUST_CHECK;
/* Whether payment_id of this reservation was flagged for refund already. */
int gw_refund_flagged(stage_ctx_t *ctx, const char *reservation_id, const char *payment_id,
                      bool *flagged) HF_MUST_CHECK;
/* Flags payment_id of rs for refund: a LATE_PAYMENT "refund" ledger event
 * (naming the units it no longer buys when returned is given), once per
 * (reservation, payment) — a P key remembers it. */
int gw_flag_refund(stage_ctx_t *ctx, const hf_reservation_state_t *rs, const char *payment_id,
                   const hf_hold_ref_t *returned) HF_MUST_CHECK;

/* ---- state (gw_state.c) */

int gw_load(stage_ctx_t *ctx, const char *reservation_id,
            hf_reservation_state_t *out) HF_MUST_CHECK; /* HF_ERR_NOTFOUND when absent */
/* Stores rs (updated_at_ms now); an ended one also arms its forget timer. */
int gw_store(stage_ctx_t *ctx, hf_reservation_state_t *rs) HF_MUST_CHECK;
int gw_timer_add(stage_ctx_t *ctx, int64_t due_ms, char kind, const char *ref) HF_MUST_CHECK;
/* Deletes a timer that can no longer fire usefully (the transition that made
 * it stale is being stored): the same tombstone its firing would leave, without
 * the reservation read and decoded to find out it is stale. */
int gw_timer_del(stage_ctx_t *ctx, int64_t due_ms, char kind, const char *ref) HF_MUST_CHECK;
/* The sweeper's cursor of the current partition (see gw_state.c): *found and
 * the timer key it swept up to (key_out, GW_KEY_MAX bytes) when one of this
 * process run is kept; gw_sweep_mark keeps key — a timer key just fired, or the
 * tick's own "due now" position once every due timer fired — in the batch. */
int gw_sweep_resume(stage_ctx_t *ctx, char *key_out, size_t *len_out, bool *found) HF_MUST_CHECK;
int gw_sweep_mark(stage_ctx_t *ctx, const char *key, size_t len) HF_MUST_CHECK;

/* ---- escrow (escrow.c; docs/ESCROW.md): this partition's allotments
 *   A<warehouse_id>|<sku>  -> EscrowState
 * A hold taken from an allotment (HoldRef.escrow) has no counter hold: it is
 * HELD at once, its sale is an AllotmentSale, its release puts the units back
 * into the balance. */
#define GW_ESCROW_TAG 'A'
size_t gw_escrow_key(char *out, const char *warehouse_id, const char *sku);
/* Whether this partition serves sku from allotments now: pinned (escrow_skus)
 * or contended (escrow_heat.h: its reserves and refused holds per second).
 * A scarce SKU (the view's sellable units at or under escrow_scarce_units)
 * still takes from the balance it has, but asks for no refill, and the tick
 * returns a balance unused for HF_ESCROW_DRAIN_IDLE_MS: its last units are
 * served exactly, wherever they sit. */
bool gw_escrow_mode(stage_ctx_t *ctx, const char *sku);
/* This partition's unheld allotment balances of sku at the warehouses of net
 * (the routing view), as an availability vector to route a line on first:
 * a line this partition can hold itself is routed where it can (one hop).
 * *any false when no balance is there. */
int gw_escrow_local_view(stage_ctx_t *ctx, const char *sku, const hf_availability_t *net,
                         hf_availability_t *out, bool *any) HF_MUST_CHECK;
/* Counts a reserve line or a refused hold of sku for the contention window. */
void gw_escrow_note(stage_ctx_t *ctx, const char *sku);
/* Takes h (HOLD_SENT, of rs) from the allotment of its pair when the balance
 * covers it (*taken: h is HELD, escrow); asks the counter for a refill when the
 * balance runs low or could not cover it. */
int gw_escrow_take(stage_ctx_t *ctx, const hf_reservation_state_t *rs, hf_hold_ref_t *h,
                   bool *taken) HF_MUST_CHECK;
/* An escrow hold released (release, expiry, rollback, revoke): its units go
 * back into the balance, or to the counter while a recall is owed. */
int gw_escrow_give_back(stage_ctx_t *ctx, const hf_hold_ref_t *h) HF_MUST_CHECK;
/* An escrow hold of rs sold: an AllotmentSale, the units leave the allotment. */
int gw_escrow_sell(stage_ctx_t *ctx, const hf_reservation_state_t *rs,
                   const hf_hold_ref_t *h) HF_MUST_CHECK;
/* Whether a HELD escrow hold of rs sits in an allotment a stock shortfall
 * recalls and that still owes units (its sale would be refused). */
int gw_escrow_owes(stage_ctx_t *ctx, const hf_reservation_state_t *rs, bool *owes) HF_MUST_CHECK;
/* When gw_escrow_owes, ends HELD rs RELEASED stock_shortfall (its units may not
 * be on the shelf: revoked here, as a counter revokes a direct hold) and sets
 * *revoked; the caller answers. */
int gw_escrow_revoke_owed(stage_ctx_t *ctx, hf_reservation_state_t *rs,
                          bool *revoked) HF_MUST_CHECK;
/* The counter refused the sale of h (REVOKED: its allotment is being
 * recalled): the units are this partition's again, to be released. */
int gw_escrow_unsell(stage_ctx_t *ctx, const hf_hold_ref_t *h) HF_MUST_CHECK;
/* A grant or recall from a pair's counter. */
int gw_escrow_apply_grant(stage_ctx_t *ctx, const hf_allotment_grant_t *g) HF_MUST_CHECK;
/* The tick's part: returns idle, scarce or owed balances, reports changed ones. */
int gw_escrow_tick(stage_ctx_t *ctx) HF_MUST_CHECK;

/* ---- saga (saga.c) */

/* Where a saga stands after a step. It never decides what that means for the
 * reservation: its caller does (a reservation's Reserve is answered HELD or
 * REJECTED; a late payment's re-reservation committed or refunded). */
typedef enum {
    GW_SAGA_ASKED = 0,    /* holds asked for: their results are awaited */
    GW_SAGA_HELD,         /* every line held in full */
    GW_SAGA_INSUFFICIENT, /* the network cannot cover every line: why says so */
    GW_SAGA_INVALID,      /* the lines cannot be served (unknown sku, too many holds) */
} gw_saga_end_t;

/* Routes every line (first round) into rs->allocations and emits the Holds
 * (GW_SAGA_ASKED), or says why it cannot (nothing emitted; rs->allocations may
 * hold the routed lines, which the caller drops). */
int gw_saga_start(stage_ctx_t *ctx, hf_reservation_state_t *rs, gw_saga_end_t *end, char *why,
                  size_t why_size) HF_MUST_CHECK;
/* Asks again, under a new attempt number, for the holds rs had confirmed and
 * has since released, when they cover every line exactly (*restarted); else
 * nothing is done. */
int gw_saga_restart(stage_ctx_t *ctx, hf_reservation_state_t *rs, bool *restarted) HF_MUST_CHECK;
/* Once every hold of an open saga (gw_saga_open) is answered: GW_SAGA_HELD, or
 * the missing quantity re-routed (GW_SAGA_ASKED, rs stored), or
 * GW_SAGA_INSUFFICIENT when that cannot be done. */
int gw_saga_settle(stage_ctx_t *ctx, hf_reservation_state_t *rs, gw_saga_end_t *end, char *why,
                   size_t why_size) HF_MUST_CHECK;
/* Ends a PENDING reservation's saga: HELD (answered, ledger, expiry armed), or
 * REJECTED_INSUFFICIENT for why (its holds rolled back). */
int gw_saga_hold(stage_ctx_t *ctx, hf_reservation_state_t *rs,
                 int64_t answered_at_ms) HF_MUST_CHECK;
int gw_saga_reject(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *why) HF_MUST_CHECK;

/* ---- load shedding (shed.c) */

/* NULL when reserve r may be served now, else why it is answered BUSY: it
 * waited longer than env->reserve_deadline_ms to reach the gateway (broker
 * append time, else sent_at_ms), or this partition has a standing queue —
 * every new Reserve over the last env->reserve_shed_interval_ms waited more
 * than env->reserve_shed_target_ms, or every counter answer over it took more
 * than the deadline (then not a reserve this partition's allotments hold) —
 * and r is not one of the few let through to see it recover. Sees r's wait
 * first, so call it once per new reserve. A BUSY reserve is not applied and
 * not remembered, so a retry with the same idempotency key is safe. Commits,
 * releases and expiries are never shed: shedding new reserves is what lets
 * them through. */
const char *gw_shed_reserve(stage_ctx_t *ctx, const gateway_env_t *env, const hf_reserve_t *r,
                            char *why, size_t why_size);
/* Records how long a hold's result took (from the saga's last send to its
 * arrival): the counter hop's current latency for this partition. */
void gw_shed_observe_result(stage_ctx_t *ctx, int64_t lag_ms);

/* ---- what Commit, Release and Extend do, for the payment events too */

/* Commits req's reservation for payment c (commit.c): held and in time, sold;
 * expired, a late payment; anything else answered as it stands. */
int gw_commit_request(stage_ctx_t *ctx, gw_request_t *req, const hf_commit_t *c) HF_MUST_CHECK;
/* Releases req's PENDING or HELD reservation for reason and answers req
 * RELEASED (release.c); a PENDING one's Reserve is answered too. */
int gw_release_open(stage_ctx_t *ctx, gw_request_t *req, const char *reason) HF_MUST_CHECK;
/* Moves HELD rs's expiry to expires_at_ms (later than its own), timer and all
 * (extend.c); the caller answers. */
int gw_extend_to(stage_ctx_t *ctx, hf_reservation_state_t *rs, int64_t expires_at_ms) HF_MUST_CHECK;

/* ---- late payments (late_payment.c) */

/* A Commit c (asked by asker) of an EXPIRED reservation: refund, or re-reserve,
 * per the policy. */
int gw_late_payment(stage_ctx_t *ctx, const hf_commit_t *c, const gw_asker_t *asker,
                    hf_reservation_state_t *rs) HF_MUST_CHECK;
/* Flags payment_id for refund (once per payment) and answers asker outcome/why. */
int gw_refund_payment(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *payment_id,
                      const gw_asker_t *asker, hf_reply_outcome_t outcome,
                      const char *why) HF_MUST_CHECK;
/* The re-reservation's saga ended: every line held (commit them) or not. */
int gw_rebook_held(stage_ctx_t *ctx, hf_reservation_state_t *rs) HF_MUST_CHECK;
int gw_rebook_refund(stage_ctx_t *ctx, hf_reservation_state_t *rs, const char *why) HF_MUST_CHECK;
/* A stock count revoked hold i of a re-reservation (pending or committed). */
int gw_rebook_revoked(stage_ctx_t *ctx, hf_reservation_state_t *rs, int32_t i) HF_MUST_CHECK;

#endif
