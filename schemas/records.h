/* The C shape of every holdfast record. Each struct mirrors one Avro schema in
 * schemas/<Name>.avsc field for field; the codec (schemas/codec.h) is the only
 * place that converts between these structs and Avro single-object bytes.
 * Strings are bounded NUL-terminated arrays (bounds in hf_limits.h), so a decoded
 * record owns no heap memory and can be copied with '='. */
#ifndef HF_RECORDS_H
#define HF_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include "hf_limits.h"

typedef char hf_id_t[HF_ID_LEN_MAX + 1];
typedef char hf_sku_t[HF_SKU_LEN_MAX + 1];
typedef char hf_wh_t[HF_WAREHOUSE_LEN_MAX + 1];
typedef char hf_text_t[HF_TEXT_LEN_MAX + 1];
typedef char hf_topic_t[HF_TOPIC_LEN_MAX + 1];

/* Record types. The order is this build's internal numbering only; on the wire a
 * record is identified by its schema fingerprint. Append only. */
#define HF_REC_MAP(X)                                                                              \
    X(HOLD, Hold, hf_hold_t, hold)                                                                 \
    X(COMMIT_HOLD, CommitHold, hf_commit_hold_t, commit_hold)                                      \
    X(RELEASE_HOLD, ReleaseHold, hf_release_hold_t, release_hold)                                  \
    X(STOCK_FEED, StockFeed, hf_stock_feed_t, stock_feed)                                          \
    X(COUNTER_RESULT, CounterResult, hf_counter_result_t, counter_result)                          \
    X(STOCK_LEVEL, StockLevel, hf_stock_level_t, stock_level)                                      \
    X(COUNTER_STATE, CounterState, hf_counter_state_t, counter_state)                              \
    X(HOLD_STATE, HoldState, hf_hold_state_t, hold_state)                                          \
    X(RESERVE, Reserve, hf_reserve_t, reserve)                                                     \
    X(COMMIT, Commit, hf_commit_t, commit)                                                         \
    X(RELEASE, Release, hf_release_t, release)                                                     \
    X(REPLY, Reply, hf_reply_t, reply)                                                             \
    X(LEDGER_EVENT, LedgerEvent, hf_ledger_event_t, ledger_event)                                  \
    X(AVAILABILITY, Availability, hf_availability_t, availability)                                 \
    X(SIGNAL, Signal, hf_signal_t, signal)                                                         \
    X(DEAD_LETTER, DeadLetter, hf_dead_letter_t, dead_letter)                                      \
    X(SKU_STATE, SkuState, hf_sku_state_t, sku_state)                                              \
    X(RESERVATION_STATE, ReservationState, hf_reservation_state_t, reservation_state)              \
    X(IDEMPOTENCY_RECORD, IdempotencyRecord, hf_idempotency_record_t, idempotency_record)          \
    X(EXTEND, Extend, hf_extend_t, extend)                                                         \
    X(ALLOTMENT_REQUEST, AllotmentRequest, hf_allotment_request_t, allotment_request)              \
    X(ALLOTMENT_GRANT, AllotmentGrant, hf_allotment_grant_t, allotment_grant)                      \
    X(ALLOTMENT_SALE, AllotmentSale, hf_allotment_sale_t, allotment_sale)                          \
    X(ALLOTMENT_STATE, AllotmentState, hf_allotment_state_t, allotment_state)                      \
    X(ESCROW_STATE, EscrowState, hf_escrow_state_t, escrow_state)                                  \
    X(PAYMENT_EVENT, PaymentEvent, hf_payment_event_t, payment_event)

typedef enum {
#define HF_REC_ENUM(UP, Name, type, field) HF_REC_##UP,
    HF_REC_MAP(HF_REC_ENUM)
#undef HF_REC_ENUM
        HF_REC__COUNT
} hf_rec_type_t;

/* ---- wire enums (Avro enums; symbol order is part of the schema: append only) */

/* Outcome of one counter command (Avro enum "Outcome"). */
typedef enum {
    HF_OUTCOME_OK = 0,
    HF_OUTCOME_INSUFFICIENT, /* not enough available for a Hold */
    HF_OUTCOME_EXISTS,       /* already applied (duplicate stock feed) */
    HF_OUTCOME_CONFLICT,     /* hold is in another terminal state */
    HF_OUTCOME_EXPIRED,
    HF_OUTCOME_NOT_FOUND, /* commit/release for a hold this counter never saw */
    HF_OUTCOME_INVALID,
    HF_OUTCOME_REVOKED, /* hold was revoked by a stock shortfall */
    HF_OUTCOME__COUNT
} hf_outcome_t;

/* Which command a CounterResult answers (Avro enum "CounterCommand"). */
typedef enum {
    HF_CMD_HOLD = 0,
    HF_CMD_COMMIT,
    HF_CMD_RELEASE,
    HF_CMD_SHORTFALL, /* counter asks the gateway to revoke this hold */
    HF_CMD__COUNT
} hf_cmd_t;

/* Avro enum "FeedKind". */
typedef enum {
    HF_FEED_RECEIVE = 0,  /* qty > 0 arrived: on_hand += qty */
    HF_FEED_ADJUST,       /* signed correction: on_hand += qty */
    HF_FEED_COUNT,        /* cycle count: on_hand = qty */
    HF_FEED_SAFETY_STOCK, /* safety_stock = qty (a gate for new holds) */
    HF_FEED_COUNT_AS_OF,  /* count as of a committed_total: on_hand = qty - sold since */
    HF_FEED__COUNT
} hf_feed_kind_t;

/* Avro enum "HoldStatus". */
typedef enum {
    HF_HOLD_HELD = 0,
    HF_HOLD_COMMITTED,
    HF_HOLD_RELEASED,
    HF_HOLD_REVOKING, /* still reserved; the gateway was told to release it */
    HF_HOLD_REFUSED,  /* the Hold was answered INSUFFICIENT; nothing reserved */
    HF_HOLD__COUNT
} hf_hold_status_t;

/* Gateway state: Avro enum "ReservationStatus" (ReservationState.status).
 * PENDING -> HELD | REJECTED, then HELD -> COMMITTED | RELEASED | EXPIRED;
 * terminal states never move. */
typedef enum {
    HF_RES_PENDING = 0, /* holds asked for, results awaited */
    HF_RES_HELD,
    HF_RES_COMMITTED,
    HF_RES_RELEASED,
    HF_RES_EXPIRED,
    HF_RES_REJECTED,
    HF_RES__COUNT
} hf_res_status_t;

/* Gateway state: Avro enum "HoldRefStatus" (HoldRef.status), what the gateway
 * knows of one hold it asked a counter for. HELD and REFUSED mean what the
 * counter's HoldStatus HELD and REFUSED mean; RELEASE_SENT is the gateway's
 * side of a release, before the counter's RELEASED. */
typedef enum {
    HF_HOLD_REF_HOLD_SENT = 0, /* Hold emitted, no result yet */
    HF_HOLD_REF_HELD,          /* the counter reserved it */
    HF_HOLD_REF_REFUSED,       /* INSUFFICIENT: nothing reserved */
    HF_HOLD_REF_RELEASE_SENT,  /* ReleaseHold emitted (rollback, release, expiry, shortfall) */
    HF_HOLD_REF__COUNT
} hf_hold_ref_status_t;

/* Gateway state: Avro enum "Rebook" (ReservationState.rebook), the
 * re-reservation of an EXPIRED reservation for a payment that came late. */
typedef enum {
    HF_REBOOK_NONE = 0,
    HF_REBOOK_PENDING,   /* holds asked for, results awaited */
    HF_REBOOK_COMMITTED, /* every line held again and committed: the payment bought it */
    HF_REBOOK_REFUNDED,  /* stock did not allow: everything released, payment flagged */
    HF_REBOOK__COUNT
} hf_rebook_t;

/* Avro enum "ReplyOutcome": what a checkout client is told. */
typedef enum {
    HF_REPLY_HELD = 0,
    HF_REPLY_COMMITTED,
    HF_REPLY_RELEASED,
    HF_REPLY_EXPIRED,
    HF_REPLY_REJECTED_INSUFFICIENT,
    HF_REPLY_REJECTED_INVALID,
    HF_REPLY_CONFLICT,
    HF_REPLY_NOT_FOUND,
    HF_REPLY_BUSY, /* not applied: the gateway is behind; retry with the same key */
    HF_REPLY__COUNT
} hf_reply_outcome_t;

/* Avro enum "LedgerKind". */
typedef enum {
    HF_LEDGER_HELD = 0,
    HF_LEDGER_COMMITTED,
    HF_LEDGER_RELEASED,
    HF_LEDGER_EXPIRED,
    HF_LEDGER_REJECTED,
    HF_LEDGER_LATE_PAYMENT,
    HF_LEDGER__COUNT
} hf_ledger_kind_t;

/* Avro enum "PaymentEventKind" (PaymentEvent.event): what the payment provider
 * says happened. UNKNOWN (the schema's default symbol) is what a reader makes
 * of a symbol appended after it was built. */
typedef enum {
    HF_PAY_UNKNOWN = 0,
    HF_PAY_PROCESSING,      /* pending: a bank transfer, a slow card network */
    HF_PAY_REQUIRES_ACTION, /* pending: the shopper must act (3-D Secure) */
    HF_PAY_SUCCEEDED,
    HF_PAY_FAILED, /* this attempt failed; most providers let the shopper retry */
    HF_PAY_CANCELED,
    HF_PAY__COUNT
} hf_payment_event_kind_t;

/* Avro enum "SignalKind". */
typedef enum { HF_SIGNAL_SOLD_OUT = 0, HF_SIGNAL_BACK_IN_STOCK, HF_SIGNAL__COUNT } hf_signal_kind_t;

/* ---- counter commands: topic holdfast.counter-commands, key "warehouse_id|sku" */

/* A hold is identified within its counter by (reservation_id, attempt): the
 * gateway bumps attempt when it re-routes, so a retry of the same attempt is a
 * duplicate and a new attempt is a new hold. */
typedef struct {
    hf_id_t reservation_id;
    int32_t attempt;
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int64_t qty;
    int64_t issued_at_ms;
    /* Two hops for a reservation this one hold covers: the counter answers
     * the Reserve itself (the reply and the ledger's HELD event) when it
     * holds. The fields below are the answer's; unused otherwise. */
    bool answer_reserve;
    hf_id_t idempotency_key;
    hf_topic_t reply_to; /* "" = holdfast.replies */
    int64_t expires_at_ms;
    hf_id_t api_key_id;      /* the Reserve's, for the HELD event */
    int64_t requested_at_ms; /* the Reserve's holdfast.requests timestamp; 0 = unknown */
} hf_hold_t;

typedef struct {
    hf_id_t reservation_id;
    int32_t attempt;
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int64_t issued_at_ms;
} hf_commit_hold_t;

typedef struct {
    hf_id_t reservation_id;
    int32_t attempt;
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    hf_text_t reason; /* "abandoned", "expired", "rollback", "stock_shortfall" */
    int64_t issued_at_ms;
} hf_release_hold_t;

/* Topic holdfast.stock-feed, key "warehouse_id|sku". Feeds of a pair are ordered
 * by (feed_epoch, feed_seq); one at or below the stored pair is a duplicate. */
typedef struct {
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    hf_feed_kind_t kind;
    int64_t qty;
    int64_t feed_seq;
    int64_t issued_at_ms;
    int64_t as_of_committed; /* COUNT_AS_OF: the pair's committed_total the count saw */
    int64_t feed_epoch;      /* one more than the pair's restarts feed_seq */
} hf_stock_feed_t;

/* ---- counter outputs */

/* Topic holdfast.counter-results, key reservation_id. */
typedef struct {
    hf_id_t reservation_id;
    int32_t attempt;
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    hf_cmd_t command;
    hf_outcome_t outcome;
    int64_t qty;       /* the hold's quantity */
    int64_t available; /* the counter's available after applying */
    int64_t applied_at_ms;
    int64_t escrow_balance; /* allotments' unheld units as reported; -1: not reported */
} hf_counter_result_t;

/* Topic holdfast.stock-levels, key sku. available = max(0, on_hand - reserved -
 * safety_stock); shortfall > 0 while revoked holds are still reserved. */
typedef struct {
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int64_t on_hand;
    int64_t reserved;
    int64_t safety_stock;
    int64_t available;
    int64_t shortfall;
    int64_t version;
    int64_t updated_at_ms;
    int64_t committed_total; /* units ever committed: a count's as-of point */
    int64_t feed_seq;
    int64_t feed_epoch;
    int64_t allotted;       /* escrow: out of available */
    int64_t escrow_balance; /* sellable = available + escrow_balance */
} hf_stock_level_t;

/* ---- counter state (RocksDB values and changelog values) */

typedef struct {
    int64_t on_hand;
    int64_t reserved; /* sum of HELD and REVOKING holds */
    int64_t safety_stock;
    int64_t revoking;        /* sum of REVOKING holds */
    int64_t version;         /* bumped on every change */
    int64_t feed_seq;        /* last applied stock feed sequence */
    int64_t committed_total; /* units ever committed at the pair; never decreases */
    int64_t feed_epoch;      /* of the last applied stock feed */
    int64_t allotted;        /* escrow: units allotted to gateway partitions */
    int64_t recalling;       /* ... of which a shortfall asked back */
    int64_t escrow_balance;  /* ... of which unheld, as last reported */
} hf_counter_state_t;

typedef struct {
    int64_t qty;
    hf_hold_status_t status;
    int64_t seq;                 /* counter version at creation: newest-first order */
    hf_outcome_t hold_outcome;   /* the original answer to the Hold */
    int64_t available_at_result; /* available in that original answer */
    int64_t created_at_ms;
    int64_t updated_at_ms;
} hf_hold_state_t;

/* ---- requests: topic holdfast.requests, key reservation_id */

typedef struct {
    hf_sku_t sku;
    int64_t qty;
} hf_line_t;

typedef struct {
    double lat;
    double lon;
} hf_geo_t;

/* A warehouse by id (Avro record "WarehouseRef"): the items of only_warehouses. */
typedef struct {
    hf_wh_t warehouse_id;
} hf_wh_ref_t;

typedef struct {
    hf_id_t reservation_id;
    hf_id_t idempotency_key;
    int32_t lines_count;
    hf_line_t lines[HF_LINES_MAX];
    hf_geo_t ship_to;
    int64_t ttl_ms;      /* 0 = the campaign's or the default TTL */
    hf_id_t campaign;    /* "" = none */
    hf_topic_t reply_to; /* "" = holdfast.replies */
    int64_t sent_at_ms;
    hf_id_t api_key_id; /* the HTTP front's caller (its API key's id); "" = none */
    /* Where the lines may be held (pick-up at a store: that store alone); none =
     * any warehouse but a store. */
    int32_t only_warehouses_count;
    hf_wh_ref_t only_warehouses[HF_ONLY_WAREHOUSES_MAX];
    /* Hold what the network has of each line rather than nothing. */
    bool allow_partial;
} hf_reserve_t;

typedef struct {
    hf_id_t reservation_id;
    hf_id_t idempotency_key;
    hf_id_t payment_id;
    hf_topic_t reply_to;
    int64_t sent_at_ms;
} hf_commit_t;

typedef struct {
    hf_id_t reservation_id;
    hf_id_t idempotency_key;
    hf_text_t reason;
    hf_topic_t reply_to;
    int64_t sent_at_ms;
} hf_release_t;

/* ---- gateway outputs */

typedef struct {
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int64_t qty;
} hf_allocation_t;

/* Topic reply_to (default holdfast.replies), key reservation_id. */
typedef struct {
    hf_id_t reservation_id;
    hf_id_t idempotency_key;
    hf_reply_outcome_t outcome;
    int32_t allocations_count;
    hf_allocation_t allocations[HF_ALLOCATIONS_MAX];
    int64_t expires_at_ms; /* 0 when not held */
    hf_text_t message;
    int64_t replied_at_ms;
} hf_reply_t;

/* Topic holdfast.ledger, key reservation_id: every state transition. */
typedef struct {
    hf_id_t reservation_id;
    hf_ledger_kind_t kind;
    int32_t allocations_count;
    hf_allocation_t allocations[HF_ALLOCATIONS_MAX];
    int32_t lines_count;
    hf_line_t lines[HF_LINES_MAX]; /* the requested lines */
    hf_text_t reason;
    hf_id_t payment_id;
    int64_t expires_at_ms;
    int64_t at_ms;
    hf_id_t api_key_id; /* who made the reservation (Reserve.api_key_id); "" = none */
} hf_ledger_event_t;

/* ---- aggregator outputs */

typedef struct {
    hf_wh_t warehouse_id;
    int64_t available;
    int64_t escrow; /* of available, units in allotments' unheld balances */
} hf_wh_available_t;

/* Topic holdfast.availability (compacted), key sku: the routing view. */
typedef struct {
    hf_sku_t sku;
    int32_t warehouses_count;
    hf_wh_available_t warehouses[HF_WAREHOUSES_MAX];
    int64_t total;
    bool in_stock; /* debounced */
    int64_t updated_at_ms;
} hf_availability_t;

/* Topic holdfast.signals, key sku. */
typedef struct {
    hf_sku_t sku;
    hf_signal_kind_t kind;
    int64_t total;
    int64_t changed_at_ms; /* when the total crossed the watermark */
    int64_t emitted_at_ms;
} hf_signal_t;

/* Topic holdfast.dead-letters, key = the original key. The original bytes are
 * kept whole so nothing is lost; reason says what to fix. */
typedef struct {
    hf_topic_t source_topic;
    int32_t source_partition;
    int64_t source_offset;
    hf_text_t stage;
    hf_text_t reason;
    uint32_t key_len;
    uint8_t key[HF_STATE_KEY_LEN_MAX];
    uint32_t value_len;
    /* Only input records are dead-lettered, and admission caps them at this. */
    uint8_t value[HF_INPUT_VALUE_BYTES_MAX]; /* truncated beyond this; value_truncated says so */
    bool value_truncated;
    int64_t failed_at_ms;
} hf_dead_letter_t;

/* ---- aggregator state (RocksDB value and changelog value), key "S<sku>" */

typedef struct {
    hf_sku_t sku;
    int32_t warehouses_count;
    hf_wh_available_t warehouses[HF_WAREHOUSES_MAX];
    int64_t total;         /* sum of the warehouses' available */
    bool in_stock;         /* the debounced state, as last signalled */
    int64_t low_since_ms;  /* total at or below the low watermark since; 0 = not low */
    int64_t changed_at_ms; /* when in_stock last changed */
    int64_t updated_at_ms;
} hf_sku_state_t;

/* ---- escrow (docs/ESCROW.md): allotments of a pair leased to gateway partitions */

/* Gateway -> counter (holdfast.counter-commands, key "warehouse_id|sku"). */
typedef struct {
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int32_t holder_partition;
    hf_id_t holder_key; /* a key that lands in holder_partition */
    int64_t seq;
    int64_t want_qty;
    int64_t return_qty;
    int64_t balance;
    int64_t sent_at_ms;
} hf_allotment_request_t;

/* Counter -> gateway (holdfast.counter-results, key the holder_key). */
typedef struct {
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int32_t holder_partition;
    int64_t seq; /* the request answered; 0: a recall */
    int64_t granted_qty;
    int64_t recall_qty;
    bool shortfall; /* recall_qty owed in full (a shortfall), or only the unheld balance */
    int64_t allotted;
    int64_t available;
    int64_t applied_at_ms;
} hf_allotment_grant_t;

/* Gateway -> counter: units of an allotment sold. */
typedef struct {
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int32_t holder_partition;
    hf_id_t reservation_id;
    int32_t attempt;
    int64_t qty;
    int64_t balance;
    int64_t sold_at_ms;
} hf_allotment_sale_t;

/* Counter state: one holder's allotment of a pair. */
typedef struct {
    int32_t holder_partition;
    hf_id_t holder_key;
    int64_t allotted;
    int64_t recalling;
    int64_t reported_balance;
    int64_t answered_seq;
    int64_t rebalance_asked_at_ms;
    int64_t granted_total;
    int64_t returned_total;
    int64_t sold_total;
    int64_t updated_at_ms;
} hf_allotment_state_t;

/* Gateway state: this partition's allotment of a pair. */
typedef struct {
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    hf_id_t holder_key;
    int64_t allotted;
    int64_t balance;
    int64_t seq;
    int64_t asking_seq;
    int64_t asking_qty;
    int64_t asked_at_ms;
    int64_t owed_qty;
    int64_t reported_balance;
    int64_t reported_at_ms;
    int64_t last_take_ms;
    int64_t rate_milli_units_s;
    int64_t updated_at_ms;
} hf_escrow_state_t;

/* ---- gateway state (RocksDB values and changelog values) */

/* One hold a reservation asked for. */
typedef struct {
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int64_t qty;
    int32_t attempt;
    hf_hold_ref_status_t status;
    int64_t available_seen;
    bool escrow; /* taken from this partition's allotment: no counter hold */
} hf_hold_ref_t;

typedef struct {
    hf_id_t reservation_id;
    hf_id_t idempotency_key;
    hf_res_status_t status;
    int32_t lines_count;
    hf_line_t lines[HF_LINES_MAX];
    hf_geo_t ship_to;
    int32_t allocations_count;
    hf_hold_ref_t allocations[HF_ALLOCATIONS_MAX];
    int32_t next_attempt;
    int32_t reroutes;
    int64_t request_hash;
    hf_topic_t reply_to;
    hf_id_t campaign;
    hf_id_t payment_id;
    hf_text_t reason;
    int64_t created_at_ms;
    int64_t expires_at_ms;
    int64_t hold_deadline_ms;
    int64_t result_deadline_ms;
    int32_t result_retries;
    int64_t updated_at_ms;
    hf_rebook_t rebook;
    hf_id_t rebook_idempotency_key;
    int64_t rebook_request_hash;
    hf_topic_t rebook_reply_to;
    /* The Reserve's first answer (gateway.h gw_reserve_answer), kept as long as
     * the reservation; reservation_id and idempotency_key are left empty. */
    bool reserve_replied;
    hf_reply_t reserve_reply;
    /* The first round's one Hold asked its counter to answer the Reserve
     * (hf_hold_t.answer_reserve): until its result is in, requests wait. */
    bool counter_answers;
    hf_id_t api_key_id; /* the creating Reserve's, stamped on each ledger event */
    /* The creating Reserve's timestamp on holdfast.requests, where the latency
     * of an answer sent in a later transaction starts; 0 = unknown. */
    int64_t requested_at_ms;
    /* The Reserve's only_warehouses: every routing round stays within them. */
    int32_t only_warehouses_count;
    hf_wh_ref_t only_warehouses[HF_ONLY_WAREHOUSES_MAX];
    /* The Reserve's allow_partial: lines the network cannot cover are cut to
     * what was held (reason says what was asked) instead of rolled back. */
    bool allow_partial;
} hf_reservation_state_t;

typedef struct {
    int64_t request_hash;
    bool complete;
    hf_reply_t reply;
    int64_t stored_at_ms;
} hf_idempotency_record_t;

/* Topic holdfast.requests, key reservation_id. */
typedef struct {
    hf_id_t reservation_id;
    hf_id_t idempotency_key;
    int64_t extend_by_ms;
    hf_topic_t reply_to;
    int64_t sent_at_ms;
} hf_extend_t;

/* Topic holdfast.requests, key reservation_id: a payment provider's event
 * (idempotency_key is its event id). */
typedef struct {
    hf_id_t reservation_id;
    hf_id_t idempotency_key;
    hf_payment_event_kind_t event;
    hf_id_t payment_id;
    hf_text_t reason; /* the provider's decline or cancellation reason; "" = none */
    hf_topic_t reply_to;
    int64_t sent_at_ms;
} hf_payment_event_t;

/* A record of any type. */
typedef struct {
    hf_rec_type_t type;
    union {
#define HF_REC_UNION(UP, Name, ctype, field) ctype field;
        HF_REC_MAP(HF_REC_UNION)
#undef HF_REC_UNION
    } u;
} hf_record_t;

/* Sets type and zeroes only that member's bytes (not the whole union). */
hf_record_t *hf_record_reset(hf_record_t *r, hf_rec_type_t type);

/* Enum symbol names as they are on the wire ("OK", "INSUFFICIENT", ...). */
const char *hf_outcome_name(hf_outcome_t v);
const char *hf_cmd_name(hf_cmd_t v);
const char *hf_feed_kind_name(hf_feed_kind_t v);
const char *hf_hold_status_name(hf_hold_status_t v);
const char *hf_reply_outcome_name(hf_reply_outcome_t v);
const char *hf_ledger_kind_name(hf_ledger_kind_t v);
const char *hf_signal_kind_name(hf_signal_kind_t v);
const char *hf_res_status_name(hf_res_status_t v);
const char *hf_hold_ref_status_name(hf_hold_ref_status_t v);
const char *hf_rebook_name(hf_rebook_t v);
/* "PROCESSING", ...; hf_payment_event_kind_parse takes the webhook's spelling
 * ("payment.processing") or the symbol ("PROCESSING"), and answers
 * HF_PAY_UNKNOWN for anything else. */
const char *hf_payment_event_kind_name(hf_payment_event_kind_t v);
hf_payment_event_kind_t hf_payment_event_kind_parse(const char *s);
/* "Hold", "CommitHold", ... (the Avro record name). */
const char *hf_rec_type_name(hf_rec_type_t t);

#endif
