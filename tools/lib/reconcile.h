/* `hfctl reconcile`: the proof a retailer runs after a flash sale. It replays
 * every holdfast topic from the beginning (read_committed, all partitions) and
 * checks the invariants of DESIGN.md section 10, that every unit sold was
 * sold by a counter from stock fed (check 8) and the escrow allotments' books
 * (check 9, reconcile_escrow.c), then prints one JSON verdict.
 *
 * Two layers. The checker (reconcile_t, reconcile_*.c except reconcile.c) is
 * pure: it is fed decoded records with their positions, in a fixed order (see
 * "Feeding order"), keeps bounded per-key tables, and judges. The driver
 * (reconcile_run, reconcile.c) reads the topics with kafka.h and feeds the
 * checker; unit tests feed it synthetic histories instead.
 *
 * Soundness rests on Kafka's one ordering guarantee — within a partition — and
 * on each stage being the single writer of its keys: a pair's StockLevels, a
 * hold's CounterResults and a reservation's ledger events are each in one
 * partition in the order their writer made them. Nothing assumes an order
 * across topics. Checks that compare topics with each other (scope SNAPSHOT)
 * need a consistent cut; the driver re-reads until the topics stopped moving
 * during a pass, and calls the outcome INCONCLUSIVE if they never did. */
#ifndef HF_RECONCILE_H
#define HF_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hf_err.h"
#include "records.h"

/* When a violation is conclusive.
 *   RECORD:    from one partition's own history; true on any snapshot.
 *   SNAPSHOT:  compares topics; conclusive only on a quiet snapshot.
 *   QUIESCENT: compares the gateway's ledger with the counters; only enforced
 *              with --quiescent (the caller says every input was processed). */
typedef enum { RC_SCOPE_RECORD = 0, RC_SCOPE_SNAPSHOT, RC_SCOPE_QUIESCENT } rc_scope_t;

/* Every violation kind: id, wire name, the invariant check it belongs to
 * (numbering of the reconcile brief, 0 = topic hygiene), scope. Append only. */
#define RC_KIND_MAP(X)                                                                             \
    X(STOCK_LEVEL_NEGATIVE, "stock_level_negative", 1, RC_SCOPE_RECORD)                            \
    X(STOCK_LEVEL_INCONSISTENT, "stock_level_inconsistent", 1, RC_SCOPE_RECORD)                    \
    X(STOCK_LEVEL_VERSION, "stock_level_version_not_increasing", 1, RC_SCOPE_RECORD)               \
    X(COUNTER_STATE_INVALID, "counter_state_invalid", 1, RC_SCOPE_RECORD)                          \
    X(STOCK_LEVEL_VS_STATE, "stock_level_vs_counter_state", 2, RC_SCOPE_SNAPSHOT)                  \
    X(RESERVED_MISMATCH, "reserved_mismatch", 2, RC_SCOPE_SNAPSHOT)                                \
    X(REVOKING_MISMATCH, "revoking_mismatch", 2, RC_SCOPE_SNAPSHOT)                                \
    X(ON_HAND_MISMATCH, "on_hand_mismatch", 2, RC_SCOPE_SNAPSHOT)                                  \
    X(SAFETY_STOCK_MISMATCH, "safety_stock_mismatch", 2, RC_SCOPE_SNAPSHOT)                        \
    X(VERSION_MISMATCH, "version_mismatch", 2, RC_SCOPE_SNAPSHOT)                                  \
    X(HOLD_OUTCOME_CHANGED, "hold_outcome_changed", 3, RC_SCOPE_RECORD)                            \
    X(HOLD_SETTLED_TWICE, "hold_settled_twice", 3, RC_SCOPE_RECORD)                                \
    X(COUNTER_RESULT_ILLEGAL, "counter_result_illegal", 3, RC_SCOPE_RECORD)                        \
    X(LEDGER_TERMINAL_TWICE, "ledger_terminal_twice", 4, RC_SCOPE_RECORD)                          \
    X(LEDGER_AFTER_TERMINAL, "ledger_event_after_terminal", 4, RC_SCOPE_RECORD)                    \
    X(LEDGER_ILLEGAL_TRANSITION, "ledger_illegal_transition", 4, RC_SCOPE_RECORD)                  \
    X(LEDGER_ALLOCATIONS, "ledger_allocations_mismatch", 4, RC_SCOPE_RECORD)                       \
    X(IDEMPOTENCY_OUTCOME, "idempotency_outcome_changed", 5, RC_SCOPE_RECORD)                      \
    X(IDEMPOTENCY_ALLOCATIONS, "idempotency_allocations_changed", 5, RC_SCOPE_RECORD)              \
    X(REPLY_VS_LEDGER, "reply_allocations_vs_ledger", 5, RC_SCOPE_RECORD)                          \
    X(EXPIRY_LATE, "expiry_late", 6, RC_SCOPE_RECORD)                                              \
    X(EXPIRY_EARLY, "expiry_early", 6, RC_SCOPE_RECORD)                                            \
    X(LEDGER_VS_COUNTERS, "ledger_held_vs_counter_reserved", 7, RC_SCOPE_QUIESCENT)                \
    X(RESERVATION_HOLDS, "reservation_vs_counter_holds", 7, RC_SCOPE_QUIESCENT)                    \
    X(FOREIGN_RECORD, "foreign_record", 0, RC_SCOPE_RECORD)                                        \
    X(SALE_COMMIT_REFUSED, "sale_commit_refused_by_counter", 8, RC_SCOPE_RECORD)                   \
    X(SALE_COMMIT_REVOKED, "sale_commit_revoked_without_reversal", 8, RC_SCOPE_QUIESCENT)          \
    X(SALE_UNBACKED, "sale_without_counter_commit", 8, RC_SCOPE_QUIESCENT)                         \
    X(SALE_UNRECORDED, "counter_commit_without_sale", 8, RC_SCOPE_SNAPSHOT)                        \
    X(SOLD_BEYOND_STOCK, "units_sold_beyond_stock_fed", 8, RC_SCOPE_SNAPSHOT)                      \
    X(ALLOTMENT_GRANT_INVALID, "allotment_grant_invalid", 9, RC_SCOPE_RECORD)                      \
    X(ALLOTMENT_VS_COUNTER, "allotment_vs_grants_returns_sales", 9, RC_SCOPE_SNAPSHOT)             \
    X(ALLOTMENT_OVERSOLD, "allotment_sold_beyond_grants", 9, RC_SCOPE_SNAPSHOT)                    \
    X(ALLOTMENTS_BEYOND_STOCK, "allotments_beyond_stock_on_hand", 9, RC_SCOPE_SNAPSHOT)            \
    X(ESCROW_HELD_BEYOND_ALLOTMENT, "escrow_held_beyond_allotment", 9, RC_SCOPE_QUIESCENT)         \
    X(ESCROW_STATE_INVALID, "escrow_state_invalid", 9, RC_SCOPE_RECORD)                            \
    X(ESCROW_STATE_VS_ALLOTMENT, "escrow_state_vs_allotment", 9, RC_SCOPE_QUIESCENT)               \
    X(LEDGER_API_KEY, "ledger_api_key_changed", 4, RC_SCOPE_RECORD)

typedef enum {
#define RC_KIND_ENUM(id, name, check, scope) RC_K_##id,
    RC_KIND_MAP(RC_KIND_ENUM)
#undef RC_KIND_ENUM
        RC_K__COUNT
} rc_kind_t;

const char *rc_kind_name(rc_kind_t k);
int rc_kind_check(rc_kind_t k);
rc_scope_t rc_kind_scope(rc_kind_t k);

/* Where a record was read. topic is copied by the checker when it keeps it. */
typedef struct {
    const char *topic;
    int32_t partition;
    int64_t offset;
} rc_pos_t;

typedef struct {
    rc_kind_t kind;
    char key[HF_ID_LEN_MAX + HF_SKU_LEN_MAX + HF_WAREHOUSE_LEN_MAX + 16];
    char topic[HF_TOPIC_LEN_MAX + 1]; /* "" when the violation is about end state */
    int32_t partition;
    int64_t offset; /* -1 when not about one record */
    char detail[HF_TEXT_LEN_MAX + 1];
} rc_violation_t;

/* Table caps. Tables grow with the data; a cap reached stops the replay with
 * HF_ERR_LIMIT (the verdict would be unsound with entries dropped). Memory is
 * about 110 bytes per hold, 330 per pair (one input topic; 430 with two), 130
 * per reservation, 110 per reply key, 110 per (reservation, pair) held or sold,
 * 180 per allotment (value, key, index and slots), and up to a third more while
 * a table's entries, which grow by half when full, wait to be filled: measured
 * 345 MiB of tables for 1,000,005 pairs. With K shards (reconcile_set_shards)
 * the pair-keyed caps (pairs, holds, sales, allotments) bound one shard's share. */
typedef struct {
    size_t pairs_max;        /* (warehouse, sku) counters */
    size_t holds_max;        /* (reservation, attempt, warehouse, sku) holds */
    size_t reservations_max; /* reservation ids in the ledger */
    size_t reply_keys_max;   /* (reservation_id, idempotency_key) with a settled reply */
    size_t sales_max; /* (reservation, warehouse, sku) held or sold by the ledger or a counter */
    size_t allotments_max;   /* (warehouse, sku, gateway partition) escrow allotments */
    size_t dead_letters_max; /* dead-lettered counter inputs */
    size_t violations_shown_max;
    int64_t expiry_lag_max_ms; /* DESIGN: released within 5 s of expires_at */
} reconcile_limits_t;

#define RC_PAIRS_MAX_DEFAULT         1000000
#define RC_HOLDS_MAX_DEFAULT         8000000
#define RC_RESERVATIONS_MAX_DEFAULT  4000000
#define RC_REPLY_KEYS_MAX_DEFAULT    8000000
#define RC_SALES_MAX_DEFAULT         8000000
#define RC_ALLOTMENTS_MAX_DEFAULT    1000000
#define RC_DEAD_LETTERS_MAX_DEFAULT  1000000
#define RC_VIOLATIONS_SHOWN_DEFAULT  20
#define RC_EXPIRY_LAG_MAX_MS_DEFAULT 5000

void reconcile_limits_default(reconcile_limits_t *lim);

typedef struct reconcile reconcile_t;

int reconcile_new(const reconcile_limits_t *lim, reconcile_t **out) HF_MUST_CHECK;
void reconcile_destroy(reconcile_t *rc); /* accepts NULL */

/* ---- Shards: bounded memory in K passes.
 * Every pair-keyed table (pairs, holds, sales, allotments, the pairs' feed
 * streams and escrow books) keeps only the pairs of one shard at a time —
 * reconcile_pair_shard(warehouse, sku, K) — and the checker is fed the whole
 * history once per shard, shard 0 first, each time in the feeding order below:
 *     for k in 0..K-1: feed everything; k < K-1 ? reconcile_next_shard : reconcile_finish
 * Records are judged once: a pair's records in its shard's pass; what is keyed
 * by reservation (the ledger's own rules, replies, dead letters) in shard 0's
 * pass, the later passes taking from the ledger only what their pairs hold and
 * sold. The reservation table spans every pass and sums what each shard's
 * counters and allotments hold for it; the reservation-level checks (7) run
 * after the last shard. Verdict, violation kinds and counts, and every count
 * are the same for any K (only the order of the violations shown differs).
 * Call reconcile_set_shards before the first record (1, the default: one pass).
 * The driver (reconcile_run) reads the topics once per shard, each later pass
 * up to where the first one ended; or, with a spill directory, only once: the
 * first pass copies each later shard's records and the ledger to local files,
 * which the later passes read in the same order. */
#define RC_SHARDS_MAX 4096
int reconcile_set_shards(reconcile_t *rc, uint32_t shards) HF_MUST_CHECK;
uint32_t reconcile_shards(const reconcile_t *rc);
uint32_t reconcile_shard(const reconcile_t *rc); /* the shard being fed */
uint32_t reconcile_pair_shard(const char *warehouse_id, const char *sku, uint32_t shards);
/* Ends the current shard's pass: judges its pairs, adds what they hold to
 * their reservations, frees its tables; the next record starts shard + 1.
 * quiescent as for reconcile_finish (the same value each time). */
int reconcile_next_shard(reconcile_t *rc, bool quiescent) HF_MUST_CHECK;

/* What the tables hold: entries of each and bytes of all together. */
typedef struct {
    size_t pairs, holds, reservations, reply_keys, sales, allotments, dead_letters;
    size_t bytes;
} rc_tables_t;
/* The largest the tables were at the end of any shard (or now, if larger). */
void reconcile_tables_peak(const reconcile_t *rc, rc_tables_t *out);

/* ---- Feeding order (each step may depend on the ones before):
 *   1. reconcile_dead_letter      holdfast.dead-letters
 *   2. reconcile_counter_state    holdfast.counter-changelog (CounterState values)
 *      reconcile_allotment_state  ... and its AllotmentState values
 *      reconcile_escrow_state     holdfast.gateway-changelog (EscrowState values)
 *   3. reconcile_stock_level      holdfast.stock-levels
 *   4. reconcile_ledger           holdfast.ledger
 *   5. reconcile_counter_result   holdfast.counter-results
 *      reconcile_allotment_grant  ... and its AllotmentGrants
 *   6. reconcile_counter_input    holdfast.counter-commands and holdfast.stock-feed
 *   7. reconcile_reply            holdfast.replies and every reply_to topic
 *   8. reconcile_finish
 * Within one topic, each partition's records in offset order. Every feeding
 * call returns HF_OK, HF_ERR_LIMIT (a table cap) or HF_ERR_NOMEM. */

/* Escrow (DESIGN.md section 5): reservations live in gateway partition
 * murmur2(reservation_id) % gateway_partitions (the requests topic's count).
 * Set it (> 0) to judge units held in escrow per allotment; 0 (the default)
 * judges them per pair only. Call before reconcile_finish. */
void reconcile_set_gateway_partitions(reconcile_t *rc, int32_t partitions);

/* Input streams of the counter: the two topics it consumes. */
typedef enum { RC_IN_COMMANDS = 0, RC_IN_STOCK_FEED = 1 } rc_input_t;

int reconcile_dead_letter(reconcile_t *rc, const hf_dead_letter_t *d) HF_MUST_CHECK;
int reconcile_counter_state(reconcile_t *rc, const rc_pos_t *pos, const char *warehouse_id,
                            const char *sku, const hf_counter_state_t *c) HF_MUST_CHECK;
int reconcile_stock_level(reconcile_t *rc, const rc_pos_t *pos,
                          const hf_stock_level_t *sl) HF_MUST_CHECK;
int reconcile_ledger(reconcile_t *rc, const rc_pos_t *pos,
                     const hf_ledger_event_t *e) HF_MUST_CHECK;
int reconcile_counter_result(reconcile_t *rc, const rc_pos_t *pos,
                             const hf_counter_result_t *r) HF_MUST_CHECK;
/* Changelog key "L<w>|<sku>|<holder %08x>": one holder's allotment at the counter. */
int reconcile_allotment_state(reconcile_t *rc, const rc_pos_t *pos, const char *warehouse_id,
                              const char *sku, const hf_allotment_state_t *a) HF_MUST_CHECK;
int reconcile_allotment_grant(reconcile_t *rc, const rc_pos_t *pos,
                              const hf_allotment_grant_t *g) HF_MUST_CHECK;
/* Gateway changelog key "A<w>|<sku>" in partition pos->partition (the holder):
 * its allotment as the gateway counts it; es NULL for a tombstone. */
int reconcile_escrow_state(reconcile_t *rc, const rc_pos_t *pos, const char *warehouse_id,
                           const char *sku, const hf_escrow_state_t *es) HF_MUST_CHECK;
/* Any record on a counter input topic (StockFeed, CommitHold, AllotmentRequest
 * and AllotmentSale matter). */
int reconcile_counter_input(reconcile_t *rc, rc_input_t input, const rc_pos_t *pos,
                            const hf_record_t *rec) HF_MUST_CHECK;
int reconcile_reply(reconcile_t *rc, const rc_pos_t *pos, const hf_reply_t *r) HF_MUST_CHECK;
/* A record on an output topic that is not what its writer writes. */
void reconcile_foreign(reconcile_t *rc, const rc_pos_t *pos, const char *what);

/* End-state checks: conservation per pair, ledger vs counters. quiescent turns
 * the QUIESCENT checks from report-only into violations. Call once. */
void reconcile_finish(reconcile_t *rc, bool quiescent);

/* ---- results */
size_t reconcile_violations_total(const reconcile_t *rc);
size_t reconcile_violations_of(const reconcile_t *rc, rc_kind_t kind);
/* Violations of a scope (QUIESCENT ones are only counted when enforced). */
size_t reconcile_violations_in_scope(const reconcile_t *rc, rc_scope_t scope);
/* The first violations_shown_max violations, in the order found. */
size_t reconcile_violations_shown(const reconcile_t *rc, const rc_violation_t **out);

typedef enum { RC_PASS = 0, RC_FAIL = 1, RC_INCONCLUSIVE = 2 } rc_verdict_t;
/* FAIL on any RECORD violation, or any violation on a quiet snapshot;
 * INCONCLUSIVE when only SNAPSHOT/QUIESCENT ones exist on a moving one. */
rc_verdict_t reconcile_verdict(const reconcile_t *rc, bool snapshot_quiet);
const char *rc_verdict_name(rc_verdict_t v);

/* Counts shown in the verdict; records per topic are counted by the driver. */
typedef struct {
    size_t pairs, stock_levels, counter_states;
    size_t holds, holds_ok, holds_refused, holds_open, holds_committed, holds_released,
        holds_revoked;
    size_t reservations, held, committed, released, expired, rejected, late_payments,
        late_rereserved;
    size_t replies, reply_keys;
    size_t feeds, feeds_applied, dead_letters;
    size_t pairs_on_hand_exact, pairs_on_hand_bounded, pairs_feed_order_ambiguous;
    int64_t ledger_held_units, counter_reserved_units, open_units_without_reservation;
    size_t reservations_out_of_step;
    size_t expiries;
    int64_t gateway_expiry_lag_ms_max, gateway_expiry_lag_ms_p99;
    size_t counter_expiry_releases;
    int64_t counter_expiry_lag_ms_max, counter_expiry_lag_ms_p99;
    /* sales against stock: units the ledger sold (net of reversals), units the
     * counters committed, the most the applicable stock feeds can have brought in */
    int64_t ledger_sold_units, counter_committed_units, stock_fed_units_max;
    /* escrow: allotments (pair, gateway partition), the counter's grants and
     * recalls, the gateway's returns and sales (accepted, or answered REVOKED),
     * units allotted at the end and held in them by HELD reservations */
    size_t escrow_pairs, allotments, escrow_states, escrow_grants, escrow_recalls, escrow_requests,
        escrow_returns, escrow_sales, escrow_sales_revoked;
    int64_t escrow_granted_units, escrow_recalled_units, escrow_returned_units, escrow_sold_units,
        escrow_allotted_units, escrow_held_units;
} rc_counts_t;

void reconcile_counts(const reconcile_t *rc, rc_counts_t *out);

/* ---- the driver (reconcile.c) */

typedef struct {
    const char *bootstrap;
    bool quiescent;
    int settle_attempts_max; /* full re-reads while the topics move (>= 1) */
    int settle_wait_ms;      /* between them */
    int timeout_ms;          /* per Kafka call */
    reconcile_limits_t limits;
    /* Shards (passes over the pair-keyed topics): shards when > 0; else, with
     * memory_mb > 0, as many as an estimate of the pairs from the topics' end
     * offsets needs to keep the tables within memory_mb; else 1. */
    uint32_t shards;
    size_t memory_mb;
    /* With more than one shard: a directory where the first pass copies what
     * the later passes need (each later shard's records, and the ledger), so
     * they read that instead of Kafka again (NULL: Kafka). */
    const char *spill_dir;
    /* Progress on this stream (NULL: none): redrawn in place at most 4 times a
     * second when it is a terminal, else a line every 5 s. */
    FILE *progress;
} reconcile_opts_t;

void reconcile_opts_default(reconcile_opts_t *o);

/* Replays the deployment's topics (topic_name(): the prefix set with
 * topics_set_prefix) and prints one JSON verdict line on out — also when it
 * cannot read, as {"verdict":"ERROR",...}. Returns HF_OK with *verdict set, or
 * the error that stopped the replay (detail in errstr). */
int reconcile_run(const reconcile_opts_t *o, FILE *out, rc_verdict_t *verdict, char *errstr,
                  size_t errstr_size) HF_MUST_CHECK;

/* Writes the verdict object as one line of JSON for a finished checker.
 * records_json is the driver's {"topic": count} object text, or NULL. */
int reconcile_print(const reconcile_t *rc, bool snapshot_quiet, int attempts, bool quiescent,
                    const char *records_json, double seconds, FILE *out) HF_MUST_CHECK;

/* How a replay went: records read (every pass of every attempt), records of
 * the snapshot judged (the first pass's), wall seconds, shards and passes; with
 * the tables' peak and the process's peak RSS it is the verdict's "run" member
 * (after every other one, so the line still starts with {"verdict":...}):
 * records_per_s is records read per second, seconds_per_million_records the
 * time to judge a million records of the snapshot. */
typedef struct {
    uint64_t records, snapshot_records;
    double seconds;
    uint32_t shards, passes;
    size_t peak_rss_kib;
    uint64_t spill_bytes_max; /* what the spill files held at most (0: none) */
} rc_run_t;
int reconcile_print_run(const reconcile_t *rc, bool snapshot_quiet, int attempts, bool quiescent,
                        const char *records_json, const rc_run_t *run, FILE *out) HF_MUST_CHECK;

/* ---- a recorded history (reconcile_history.c): every feeding call kept with
 * a copy of its record, fed again into a checker of any shard count — how the
 * unit tests prove that K shards judge as one. */
typedef enum {
    RC_FEED_DEAD_LETTER = 0,
    RC_FEED_COUNTER_STATE,
    RC_FEED_ALLOTMENT_STATE,
    RC_FEED_ESCROW_STATE,
    RC_FEED_STOCK_LEVEL,
    RC_FEED_LEDGER,
    RC_FEED_COUNTER_RESULT,
    RC_FEED_ALLOTMENT_GRANT,
    RC_FEED_COUNTER_INPUT,
    RC_FEED_REPLY,
} rc_feed_kind_t;

/* One feeding call: which, its position, and its record (warehouse_id and sku
 * for the changelog kinds; input for COUNTER_INPUT; rec NULL only for an
 * EscrowState tombstone). */
typedef struct {
    rc_feed_kind_t kind;
    rc_pos_t pos;
    rc_input_t input;
    const char *warehouse_id, *sku;
    const hf_record_t *rec;
} rc_feed_t;

/* Calls the reconcile_* function the feed names. */
int reconcile_feed(reconcile_t *rc, const rc_feed_t *f) HF_MUST_CHECK;

typedef struct reconcile_history reconcile_history_t;
int reconcile_history_new(size_t feeds_max, reconcile_history_t **out) HF_MUST_CHECK;
void reconcile_history_destroy(reconcile_history_t *h); /* accepts NULL */
void reconcile_history_clear(reconcile_history_t *h);
size_t reconcile_history_count(const reconcile_history_t *h);
/* Keeps a copy of f (its record, topic and strings). */
int reconcile_history_add(reconcile_history_t *h, const rc_feed_t *f) HF_MUST_CHECK;
/* A fresh checker (lim, gateway_partitions, shards) fed the history once per
 * shard and finished. */
int reconcile_history_replay(const reconcile_history_t *h, const reconcile_limits_t *lim,
                             int32_t gateway_partitions, uint32_t shards, bool quiescent,
                             reconcile_t **out) HF_MUST_CHECK;
/* Replays the history in 1..shards_max shards, quiescent as rc (the checker it
 * was recorded from) finished (both ways when it did not), and checks that
 * each judges as one shard does and one shard as rc: the same verdicts,
 * violations of every kind and counts. HF_ERR_CORRUPT with the first
 * difference in why. */
int reconcile_history_check(const reconcile_history_t *h, const reconcile_limits_t *lim,
                            int32_t gateway_partitions, const reconcile_t *rc, uint32_t shards_max,
                            char *why, size_t why_size) HF_MUST_CHECK;

#endif
