/* The reconciler's private parts: a string-keyed table that grows with the data
 * up to a cap, the per-key records it keeps (pair, hold, reservation, reply
 * key), and the helpers the checker files share. Only tools/lib/reconcile*.c
 * include this. */
#ifndef HF_RECONCILE_INT_H
#define HF_RECONCILE_INT_H

#include "kafka.h"
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
/* Bytes the table has allocated (slots, keys, entries): what it costs now. */
size_t rc_map_bytes(const rc_map_t *m);

/* ---- rc_vec: a growable array of fixed-size zeroed values, up to a cap; an
 * index is stable, a pointer is not across a push. */
typedef struct {
    uint8_t *vals;
    size_t val_size;
    size_t count, cap, max;
} rc_vec_t;

void rc_vec_init(rc_vec_t *v, size_t val_size, size_t max);
void rc_vec_free(rc_vec_t *v);
/* Appends a zeroed value; HF_ERR_LIMIT at the cap. */
int rc_vec_push(rc_vec_t *v, uint32_t *idx_out) HF_MUST_CHECK;
void *rc_vec_at(const rc_vec_t *v, uint32_t idx);
size_t rc_vec_bytes(const rc_vec_t *v);

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

/* A pair's escrow books, kept apart (rc->escrows) for the few pairs that ever
 * had an allotment: units HELD reservations hold here without a counter hold,
 * its allotments' grants - returns - sales, and the sums of its
 * AllotmentStates (all filled at the end of the pair's shard). */
typedef struct {
    int64_t held;
    int64_t allotted;
    int64_t states_allotted, states_recalling, states_reported;
    bool has_allotment_state;
} rc_escrow_pair_t;

/* One (warehouse, sku) pair: 184 bytes, plus 104 per input topic that touched
 * it (rc->streams) and 48 when it has allotments (rc->escrows). The last
 * CounterState is kept whole: finish reads every one of its fields (feed_seq
 * and feed_epoch are the horizon of the feeds). Of the last StockLevel only
 * what the checks need: its version (rising per pair), a digest of the fields
 * finish compares with the CounterState, and where it was read. */
typedef struct {
    hf_counter_state_t state; /* last in the changelog; zero when none */
    int64_t level_version;
    uint64_t level_digest; /* rc_level_digest of the last StockLevel */
    int64_t level_offset;
    /* from counter-results */
    int64_t reserved_model, revoking_model;
    int64_t ok_holds, changes, commit_qty;
    int64_t ledger_sold; /* units the ledger sold here, net of reversals (finish) */
    int32_t level_partition;
    uint32_t stream[2]; /* by rc_input_t: 1 + index in rc->streams; 0 = nothing read there */
    uint32_t escrow;    /* 1 + index in rc->escrows; 0 = never had an allotment */
    bool has_state, has_level;
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
    /* The ledger event that made it sold (COMMITTED or re-reserved), where the
     * first shard's pass read it: a later pass takes that event's units for
     * its own pairs. sale_offset -1: not sold. */
    int32_t sale_partition;
    int64_t sale_offset;
    int64_t held_units;
    uint64_t held_digest;   /* allocations of the HELD event */
    uint64_t rebook_digest; /* allocations of a LATE_PAYMENT "rereserved" event */
    bool rebooked;
    bool sold;             /* COMMITTED, or re-reserved for a late payment */
    bool reversed;         /* that sale undone by a revoked hold (shortfall, refund) */
    uint32_t api_key_hash; /* rc_str_hash32 of the first event's api_key_id */
    int64_t expires_at_ms; /* of the EXPIRED event */
    int64_t open_units;    /* at the counters (summed over the shards' ends) */
    int64_t escrow_units;  /* held in allotments (summed over the shards' ends) */
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
    /* Pair-keyed state (pairs, holds, sales, allots, streams, escrows) holds
     * only the pairs of the shard being fed; the rest spans every shard. */
    rc_map_t pairs, holds, res, replies, dead, sales, allots;
    rc_vec_t streams, escrows;
    /* Gateway changelog allotment keys whose last record is an EscrowState
     * (every shard's, counted in shard 0's pass): escrow states are judged
     * only where the gateway wrote any. */
    rc_map_t gw_live;
    size_t gw_live_count;
    uint32_t shards, shard;
    rc_tables_t done; /* entries of the shards already ended */
    rc_tables_t peak;
    int32_t gateway_partitions; /* 0: escrow judged per pair only */
    rc_violation_t *shown;
    size_t shown_count;
    size_t total, by_kind[RC_K__COUNT];
    bool quiescent, quiescent_set, finished;
    rc_counts_t n;
    rc_lag_t gw_lag, counter_lag;
};

/* Records a violation; key and the position may be NULL. */
void rc_violation(reconcile_t *rc, rc_kind_t kind, const char *key, const rc_pos_t *pos,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* True when the pair belongs to the shard being fed (always with one shard). */
bool rc_in_shard(const reconcile_t *rc, const char *warehouse_id, const char *sku);
/* The first shard's pass: reservation-keyed records are judged there only. */
static inline bool rc_first_pass(const reconcile_t *rc)
{
    return rc->shard == 0;
}
/* The pair's stream of one input topic, added (zeroed) when new: HF_ERR_LIMIT
 * at the cap. peek gives a zero stream for one never touched. */
int rc_stream_get(reconcile_t *rc, uint32_t pair_idx, rc_input_t input,
                  rc_stream_t **out) HF_MUST_CHECK;
const rc_stream_t *rc_stream_peek(const reconcile_t *rc, const rc_pair_t *p, rc_input_t input);
/* The pair's escrow books, added when new; peek gives NULL for none. */
int rc_escrow_pair_get(reconcile_t *rc, uint32_t pair_idx, rc_escrow_pair_t **out) HF_MUST_CHECK;
rc_escrow_pair_t *rc_escrow_pair_peek(const reconcile_t *rc, const rc_pair_t *p);
/* Digest of what finish compares between a StockLevel and a CounterState:
 * (version, on_hand, reserved, safety_stock, shortfall = revoking, allotted,
 * escrow_balance). */
uint64_t rc_level_digest(int64_t version, int64_t on_hand, int64_t reserved, int64_t safety,
                         int64_t shortfall, int64_t allotted, int64_t escrow_balance);

/* "w|sku" into out (RC_KEY_LEN_MAX). */
size_t rc_pair_key(char *out, const char *warehouse_id, const char *sku);
int rc_pair_get(reconcile_t *rc, const char *warehouse_id, const char *sku,
                uint32_t *idx) HF_MUST_CHECK;
/* "rid|attempt|w|sku" into out. */
size_t rc_hold_key(char *out, const char *reservation_id, int32_t attempt, const char *warehouse_id,
                   const char *sku);

/* A 32-bit digest of a string: what a table keeps to compare a field of many
 * records with the first one's (a differing one slips through 1 time in 2^32). */
uint32_t rc_str_hash32(const char *s);

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

/* Finish steps. The end of each shard's pass (pair-keyed state, in this
 * order): rc_finish_pairs, rc_finish_open_units, rc_finish_escrow_held,
 * rc_finish_escrow, rc_finish_sales; after the last shard, once:
 * rc_finish_reservations. */
void rc_finish_pairs(reconcile_t *rc);
/* What open holds hold, added to their reservations and (reservation, pair). */
void rc_finish_open_units(reconcile_t *rc);
/* Units HELD reservations hold in allotments, per pair and holder. */
void rc_finish_escrow_held(reconcile_t *rc);
/* Allotments against grants, returns, sales, stock and what they hold. */
void rc_finish_escrow(reconcile_t *rc);
void rc_finish_sales(reconcile_t *rc);
/* Each reservation against what every shard's counters and allotments hold. */
void rc_finish_reservations(reconcile_t *rc);

/* ---- the driver's progress line (reconcile_progress.c) */
typedef struct {
    FILE *out; /* NULL: none */
    bool tty, drawn;
    int64_t started_ms, last_ms, interval_ms;
    uint64_t ticks;
    uint64_t offsets_done, offsets_total; /* every pass's partitions */
    uint64_t records;                     /* delivered to the driver, every pass */
    uint32_t pass, passes;
    int attempt;
    const char *topic; /* the one being read */
} rc_progress_t;

void rc_progress_init(rc_progress_t *p, FILE *out);
/* One more record read: redraws when the interval is over. */
void rc_progress_tick(rc_progress_t *p);
/* A new topic or pass: redraws a terminal's line, if the interval is over. */
void rc_progress_now(rc_progress_t *p);
/* Takes a terminal's line away. */
void rc_progress_end(rc_progress_t *p);
size_t rc_fmt_count(char *out, size_t size, uint64_t v);

/* ---- the sharded replay's local copy (reconcile_spill.c): file 0 holds the
 * ledger, file k the records of shard k's pairs, each in the order the first
 * pass read them. */
typedef struct rc_spill rc_spill_t;
int rc_spill_open(const char *dir, uint32_t shards, rc_spill_t **out, char *errstr,
                  size_t errstr_size) HF_MUST_CHECK;
void rc_spill_close(rc_spill_t *s); /* accepts NULL */
/* Appends m (read at topic step `step`) to file. */
int rc_spill_put(rc_spill_t *s, uint32_t file, uint8_t step, const kafka_msg_t *m, char *errstr,
                 size_t errstr_size) HF_MUST_CHECK;
/* Starts reading file from its beginning. */
int rc_spill_rewind(rc_spill_t *s, uint32_t file, char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* The file's next entry into m (*got), if it was read at step (m->topic is
 * left NULL; key and value stay valid until the next call). */
int rc_spill_next(rc_spill_t *s, uint32_t file, uint8_t step, kafka_msg_t *m, bool *got,
                  char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Empties a shard's file once its pass read it. */
void rc_spill_done(rc_spill_t *s, uint32_t file);
uint64_t rc_spill_bytes_max(const rc_spill_t *s);
#endif
