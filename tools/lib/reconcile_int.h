/* The reconciler's private parts: a string-keyed table that grows with the data
 * up to a cap, the per-key records it keeps (pair, hold, reservation, reply
 * key), and the helpers the checker files share. Only tools/lib/reconcile*.c
 * include this. */
#ifndef HF_RECONCILE_INT_H
#define HF_RECONCILE_INT_H

#include "reconcile.h"

/* ---- rc_map: open addressing over an entry array; entries are never removed,
 * so an entry's index is stable (values may move when the table grows: hold an
 * index, not a pointer, across an insert). */
typedef struct {
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t slots_cap;
    char *keys;
    size_t keys_len, keys_cap;
    uint64_t *key_off;
    uint16_t *key_len;
    uint32_t *hash;
    uint8_t *vals;
    size_t val_size;
    size_t count, cap, max;
} rc_map_t;

#define RC_KEY_LEN_MAX 512

int rc_map_init(rc_map_t *m, size_t val_size, size_t max) HF_MUST_CHECK;
void rc_map_free(rc_map_t *m);
/* Finds or adds key; a new value is zeroed. HF_ERR_LIMIT at the cap. */
int rc_map_upsert(rc_map_t *m, const char *key, size_t len, uint32_t *idx_out,
                  bool *added) HF_MUST_CHECK;
bool rc_map_find(const rc_map_t *m, const char *key, size_t len, uint32_t *idx_out);
void *rc_map_val(const rc_map_t *m, uint32_t idx);
const char *rc_map_key(const rc_map_t *m, uint32_t idx, size_t *len);

/* ---- per-key records */

/* What one counter input topic tells about a pair, replayed in partition order:
 * the stock feeds the counter applied (feed_seq above the running maximum, not
 * dead-lettered, not beyond the counter's last applied feed_seq) and the
 * commits that changed the pair, at their place among the feeds. */
typedef struct {
    int64_t on_hand;            /* COUNT sets it, deltas add, matched commits subtract */
    int64_t max_epoch, max_seq; /* the last feed applied, in (feed_epoch, feed_seq) order */
    int64_t safety_stock;
    int64_t matched_commit_qty;
    int64_t commits_since_count; /* matched commits after the last COUNT / COUNT_AS_OF */
    int64_t count_qty, as_of;    /* the last count; its as_of_committed if COUNT_AS_OF */
    /* Units the applicable feeds can have brought in at most: RECEIVE, a positive
     * ADJUST, a count's qty — whatever the counter's horizon (an upper bound). */
    int64_t supply, supply_epoch, supply_seq;
    int32_t feeds;   /* candidate feeds (decoded, not dead-lettered) */
    int32_t applied; /* of which the counter applied */
    bool has_count, count_as_of, has_safety, stopped;
} rc_stream_t;

typedef struct {
    bool has_state, has_level;
    hf_counter_state_t state; /* last in the changelog */
    int64_t level_version, level_on_hand, level_reserved, level_safety, level_shortfall;
    int64_t level_allotted, level_escrow_balance;
    int32_t level_partition;
    int64_t level_offset;
    /* from counter-results */
    int64_t reserved_model, revoking_model;
    int64_t ok_holds, changes, commit_qty;
    rc_stream_t in[2];   /* by rc_input_t */
    int64_t ledger_sold; /* units the ledger sold here, net of reversals (finish) */
    /* escrow: the pair ever had an allotment (a request, grant or state); units
     * HELD reservations hold here without a counter hold (finish) */
    bool escrow;
    int64_t escrow_held;
    int64_t escrow_allotted; /* its allotments' grants - returns - sales (finish) */
    /* sums of its AllotmentStates (finish): allotted, recalling, reported_balance */
    int64_t states_allotted, states_recalling, states_reported;
    bool has_allotment_state;
} rc_pair_t;

typedef enum {
    RC_HOLD_NONE = 0, /* no Hold result seen */
    RC_HOLD_HELD,
    RC_HOLD_REFUSED,
    RC_HOLD_COMMITTED,
    RC_HOLD_RELEASED,
    RC_HOLD_REVOKING,
} rc_hold_status_t;

typedef struct {
    uint32_t pair;
    int8_t status;       /* rc_hold_status_t */
    int8_t hold_outcome; /* first Hold answer; -1 none */
    int32_t commit_results, change_ordinal, commit_cmds;
    int8_t commit_refused; /* 1 + the first answer other than OK to a CommitHold; 0 none */
    int64_t qty;
    /* escrow: REVOKED answers to AllotmentSales of this hold (no Hold seen), and
     * the AllotmentSales of it on counter-commands */
    int32_t escrow_revokes, escrow_sales;
} rc_hold_t;

typedef struct {
    uint16_t kinds_seen; /* bit per hf_ledger_kind_t */
    int8_t terminal;     /* hf_ledger_kind_t, -1 none */
    int64_t held_units;
    uint64_t held_digest;   /* allocations of the HELD event */
    uint64_t rebook_digest; /* allocations of a LATE_PAYMENT "rereserved" event */
    bool rebooked;
    bool sold;             /* COMMITTED, or re-reserved for a late payment */
    bool reversed;         /* that sale undone by a revoked hold (shortfall, refund) */
    int64_t expires_at_ms; /* of the EXPIRED event */
    int64_t open_units;    /* at the counters (finish) */
    int64_t escrow_units;  /* held in allotments (finish) */
} rc_res_t;

/* One reservation at one pair (key "rid|w|sku"): the units its COMMITTED (or
 * re-reserved) ledger event names, and the units the pair's counter committed
 * for it (a CommitHold answered OK for a held hold, or an AllotmentSale it
 * accepted); the units its HELD event names there and the counter's open holds
 * of it at the end — none while the units are held in an allotment. */
typedef struct {
    uint32_t pair;
    int64_t ledger_units, counter_units;
    int64_t held_units, open_units, escrow_sold;
} rc_sale_t;

/* One gateway partition's allotment of a pair (key "w|sku|holder"), from the
 * counter's grants and the gateway's returns and accepted sales; the counter's
 * own AllotmentState when the changelog has it. */
typedef struct {
    uint32_t pair;
    int32_t holder;
    int64_t granted, returned, sold, wanted;
    int64_t held; /* units HELD reservations of this holder hold in it (finish) */
    bool has_state;
    int64_t state_allotted, state_granted, state_returned, state_sold, state_recalling,
        state_reported;
    bool has_gw; /* the holder's EscrowState (gateway changelog) */
    int64_t gw_allotted, gw_balance;
} rc_allot_t;

typedef struct {
    int8_t outcome; /* hf_reply_outcome_t of the first settled reply */
    uint64_t digest;
    int32_t partition;
    int64_t offset;
} rc_reply_key_t;

/* Lag histogram: 10 ms buckets up to 120 s, the rest in the last one. */
#define RC_LAG_BUCKET_MS 10
#define RC_LAG_BUCKETS   12000
typedef struct {
    uint32_t *buckets;
    size_t count;
    int64_t max;
} rc_lag_t;

struct reconcile {
    reconcile_limits_t lim;
    rc_map_t pairs, holds, res, replies, dead, sales, allots;
    int32_t gateway_partitions; /* 0: escrow judged per pair only */
    rc_violation_t *shown;
    size_t shown_count;
    size_t total, by_kind[RC_K__COUNT];
    bool quiescent, finished;
    rc_counts_t n;
    rc_lag_t gw_lag, counter_lag;
};

/* Records a violation; key and the position may be NULL. */
void rc_violation(reconcile_t *rc, rc_kind_t kind, const char *key, const rc_pos_t *pos,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* "w|sku" into out (RC_KEY_LEN_MAX). */
size_t rc_pair_key(char *out, const char *warehouse_id, const char *sku);
int rc_pair_get(reconcile_t *rc, const char *warehouse_id, const char *sku,
                uint32_t *idx) HF_MUST_CHECK;
/* "rid|attempt|w|sku" into out. */
size_t rc_hold_key(char *out, const char *reservation_id, int32_t attempt, const char *warehouse_id,
                   const char *sku);

/* Order-independent digest of allocations (warehouse, sku, qty). */
uint64_t rc_allocations_digest(const hf_allocation_t *a, int32_t count);

void rc_lag_add(rc_lag_t *l, int64_t lag_ms);
int64_t rc_lag_p99(const rc_lag_t *l);

/* The reservation_id part of a key "rid|f1|...|fn" with n trailing fields
 * (which contain no '|'); 0 when there are fewer. */
size_t rc_key_rid_len(const char *key, size_t len, int fields);

/* Sales (reconcile_sales.c): the units a sale event of the ledger names, and
 * the units a counter committed for one hold of reservation_id. */
int rc_sales_ledger(reconcile_t *rc, const hf_ledger_event_t *e) HF_MUST_CHECK;
int rc_sales_counter(reconcile_t *rc, const hf_counter_result_t *r, int64_t qty) HF_MUST_CHECK;
/* The reservation's entry at a pair (added when new). */
int rc_sale_get(reconcile_t *rc, const char *reservation_id, const char *warehouse_id,
                const char *sku, rc_sale_t **out) HF_MUST_CHECK;
size_t rc_sale_key(char *out, const char *reservation_id, const char *warehouse_id,
                   const char *sku);
/* The reservation a key "rid|f1|..|fn" names (n trailing fields), or NULL. */
const rc_res_t *rc_res_of_key(const reconcile_t *rc, const char *key, size_t len, int fields);

/* Escrow (reconcile_escrow.c): counter inputs that change allotments. */
int rc_escrow_request(reconcile_t *rc, const hf_allotment_request_t *r) HF_MUST_CHECK;
int rc_escrow_sale(reconcile_t *rc, const hf_allotment_sale_t *s) HF_MUST_CHECK;
/* The pair's StockLevel must subtract what is allotted; a CounterState's escrow
 * fields within their bounds: NULL when fine, else why not (in buf). */
const char *rc_escrow_state_invalid(const hf_counter_state_t *c, char *buf, size_t size);

/* Finish steps (reconcile_counter.c, reconcile_gateway.c, reconcile_sales.c). */
void rc_finish_pairs(reconcile_t *rc);
void rc_finish_reservations(reconcile_t *rc);
void rc_finish_sales(reconcile_t *rc);
/* Units HELD reservations hold in allotments, per pair and holder (before
 * rc_finish_reservations judges each reservation). */
void rc_finish_escrow_held(reconcile_t *rc);
/* Allotments against grants, returns, sales, stock and what they hold. */
void rc_finish_escrow(reconcile_t *rc);

#endif
