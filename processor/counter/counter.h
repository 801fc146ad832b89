/* The counter stage: owns available / reserved / on-hand of every (warehouse, sku)
 * in its partitions and is the arbiter of every hold. Inputs
 * holdfast.counter-commands and holdfast.stock-feed (key "warehouse|sku"); outputs
 * CounterResult (key reservation_id) and one coalesced StockLevel per changed pair
 * per transaction (key sku).
 *
 * Files: counter_stage.c (the handler table, batch end), one file per record type
 * (hold.c, commit_hold.c, release_hold.c, stock_feed.c), counter_sweep.c (the
 * tick: settled holds forgotten after their retention), counter_rules.c (pure
 * arithmetic and invariants), counter_keys.c (state key layout). */
#ifndef HF_COUNTER_H
#define HF_COUNTER_H

#include <stdbool.h>
#include <stddef.h>

#include "records.h"
#include "stage.h"

const stage_def_t *counter_stage(void);

/* ---- state keys (counter_keys.c). All keys of one pair share "<tag>w|sku|".
 *   C w|sku                      -> CounterState
 *   H w|sku|<attempt %08x>|<reservation_id> -> HoldState
 *   O w|sku|<seq be64>           -> hold key suffix "<attempt>|<reservation_id>" (open holds)
 * Identifiers may not contain '|' (validated), so keys never collide. */
#define COUNTER_KEY_MAX HF_STATE_KEY_LEN_MAX
size_t counter_key(char *out, const char *warehouse_id, const char *sku);
size_t hold_key(char *out, const char *warehouse_id, const char *sku, int32_t attempt,
                const char *reservation_id);
/* A hold's reference "<attempt %08x>|<reservation_id>": the tail of its key and
 * the value of its open-hold index entry. */
size_t hold_ref(char *out, int32_t attempt, const char *reservation_id);
size_t hold_key_of_ref(char *out, const char *warehouse_id, const char *sku, const char *ref,
                       size_t ref_len);
size_t open_hold_key(char *out, const char *warehouse_id, const char *sku, int64_t seq);
size_t open_hold_prefix(char *out, const char *warehouse_id, const char *sku);
/* The Kafka key a command for this pair must carry: "warehouse|sku". */
size_t pair_key(char *out, const char *warehouse_id, const char *sku);

/* ---- rules (counter_rules.c): pure functions over counter state */

/* available = on_hand - reserved - allotted - safety_stock (free stock); may be
 * negative during a shortfall or when safety stock exceeds what is left. */
int64_t counter_available(const hf_counter_state_t *c);
/* What the outside world is told: never below zero. */
int64_t counter_available_reported(const hf_counter_state_t *c);
/* Asserts the stored invariants (aborts the process if broken):
 * on_hand, reserved, revoking, safety_stock, committed_total, feed_epoch,
 * allotted >= 0; revoking <= reserved; recalling, escrow_balance in [0, allotted];
 * counter_promised <= on_hand (a promise never exceeds stock on hand, except by
 * holds being revoked and allotment units being recalled). */
void counter_assert(const hf_counter_state_t *c);
/* Units promised and not being taken back: reserved - revoking + allotted -
 * recalling. */
int64_t counter_promised(const hf_counter_state_t *c);
/* The quantity still to revoke or recall: counter_promised - on_hand, or 0. */
int64_t counter_shortfall(const hf_counter_state_t *c);
/* Units an AllotmentRequest wanting want gets: at most share_pct of the free
 * stock (rounded up, so the last free unit can still be granted), 0 when none
 * is free. */
int64_t counter_grant_qty(const hf_counter_state_t *c, int64_t want, int share_pct);
/* qty allotted units were sold (an AllotmentSale): they leave the allotment and
 * on_hand; committed_total moves on by qty. */
void counter_sell_allotted(hf_counter_state_t *c, int64_t qty);
/* A HELD hold of qty becomes a sale: it leaves reserved and on_hand, and
 * committed_total (the as-of clock of cycle counts) moves on by qty. */
void counter_commit_units(hf_counter_state_t *c, int64_t qty);
/* on_hand after a cycle count of `counted` units taken when the pair's
 * committed_total was as_of_committed (<= c->committed_total): the units sold
 * since the count are gone from the shelf it counted, so they are taken off
 * again; never below 0 (a count that saw fewer units than were sold since). */
int64_t counter_on_hand_as_of(const hf_counter_state_t *c, int64_t counted,
                              int64_t as_of_committed);

/* Validation shared by handlers; returns NULL when fine, else a reason. */
const char *counter_check_ids(const char *warehouse_id, const char *sku);

/* ---- escrow (allotment.c; docs/ESCROW.md). A pair's allotments, one per
 * gateway partition holding one:
 *   L w|sku|<holder_partition %08x>   -> AllotmentState */
size_t allotment_key(char *out, const char *warehouse_id, const char *sku, int32_t holder);
size_t allotment_prefix(char *out, const char *warehouse_id, const char *sku);
/* Loads holder's allotment of the pair; a zero one (holder set) when absent. */
int counter_load_allotment(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                           int32_t holder, hf_allotment_state_t *out) HF_MUST_CHECK;
/* Stores a, and moves c's escrow_balance by what a's reported_balance changed
 * since old_reported. */
int counter_store_allotment(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                            hf_allotment_state_t *a, int64_t old_reported,
                            hf_counter_state_t *c) HF_MUST_CHECK;
/* Emits an AllotmentGrant to a's holder (keyed by its holder_key). */
int counter_emit_grant(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                       const hf_allotment_state_t *a, int64_t seq, int64_t granted_qty,
                       int64_t recall_qty, bool shortfall,
                       const hf_counter_state_t *c) HF_MUST_CHECK;
/* Recalls up to qty units from the pair's allotments (a stock shortfall):
 * marks them recalling in the allotments and c, and asks each holder back.
 * *recalled says how many. */
int counter_recall(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                   hf_counter_state_t *c, int64_t qty, int64_t *recalled) HF_MUST_CHECK;
/* Free stock ran out while holders other than except_holder (-1: none) report
 * unheld balances: asks each of them (at most every
 * HF_ESCROW_REBALANCE_INTERVAL_MS) to give its balance back, so the units go
 * where shoppers are instead of sitting idle. Nothing is owed. */
int counter_rebalance(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                      hf_counter_state_t *c, int32_t except_holder) HF_MUST_CHECK;
/* The share of free stock one grant may take (escrow_grant_share_pct). */
int counter_grant_share_pct(stage_ctx_t *ctx);

/* ---- handlers (one file each) */
int counter_on_hold(stage_ctx_t *ctx, const hf_record_t *rec);
int counter_on_commit_hold(stage_ctx_t *ctx, const hf_record_t *rec);
int counter_on_release_hold(stage_ctx_t *ctx, const hf_record_t *rec);
int counter_on_stock_feed(stage_ctx_t *ctx, const hf_record_t *rec);
int counter_on_allotment_request(stage_ctx_t *ctx, const hf_record_t *rec);
int counter_on_allotment_sale(stage_ctx_t *ctx, const hf_record_t *rec);
/* The tick (counter_sweep.c): forgets settled holds after hold_retention_ms. */
int counter_tick(stage_ctx_t *ctx);
/* How many hold records one tick examines, given the last complete pass's
 * count (<= 0: none yet): a pass takes about retention / HF_HOLD_SWEEP_PASSES. */
size_t counter_sweep_slice(int64_t last_pass, int64_t retention_ms, int tick_ms);
/* The counter's environment (counter_sweep.c): hold_retention_ms and where
 * every partition's sweep has got to, shared by the stage's tasks. */
typedef struct counter_env counter_env_t;
/* The stage's init (stage_def_t.init). *env_out is a counter_env_t the caller
 * frees with counter_env_destroy. */
int counter_env_new(const struct hf_config *cfg, void **env_out, char *errstr,
                    size_t errstr_size) HF_MUST_CHECK;
/* Accepts NULL. */
void counter_env_destroy(void *env);

/* ---- shared by the handlers (counter_stage.c) */

/* Checks the record's Kafka key is "warehouse|sku" of its body, and the ids. */
int counter_check_routing(stage_ctx_t *ctx, const char *warehouse_id, const char *sku);
/* Loads a pair's counter (zero if it never existed); asserts its invariants. */
int counter_load(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                 hf_counter_state_t *out) HF_MUST_CHECK;
/* Bumps the version, asserts the invariants and buffers the counter. */
int counter_store(stage_ctx_t *ctx, const char *warehouse_id, const char *sku,
                  hf_counter_state_t *c) HF_MUST_CHECK;
/* Emits a CounterResult keyed by reservation_id (escrow_balance not reported). */
int counter_emit_result(stage_ctx_t *ctx, const char *reservation_id, int32_t attempt,
                        const char *warehouse_id, const char *sku, hf_cmd_t command,
                        hf_outcome_t outcome, int64_t qty, int64_t available) HF_MUST_CHECK;
/* The answer to a Hold applied now: c is the pair's counter after it, so the
 * result carries its sellable stock (available and the allotments' balance). */
int counter_emit_hold_result(stage_ctx_t *ctx, const hf_hold_t *h, hf_outcome_t outcome,
                             const hf_counter_state_t *c) HF_MUST_CHECK;
/* Loads a hold; HF_ERR_NOTFOUND if the counter never saw it. */
int counter_load_hold(stage_ctx_t *ctx, const char *key, size_t key_len,
                      hf_hold_state_t *out) HF_MUST_CHECK;
int counter_store_hold(stage_ctx_t *ctx, const char *key, size_t key_len,
                       const hf_hold_state_t *h) HF_MUST_CHECK;

/* Settling an existing hold (commit or release). The rule decides the outcome
 * from the hold's status and, when it changes something, updates the hold and
 * the counter in place; found is false for a hold the counter never saw. */
typedef hf_outcome_t (*counter_settle_rule_fn)(bool found, hf_hold_state_t *hs,
                                               hf_counter_state_t *c, bool *changed);
typedef struct {
    const char *reservation_id;
    int32_t attempt;
    const char *warehouse_id;
    const char *sku;
    hf_cmd_t command;
} counter_hold_id_t;
/* Validates, loads, applies rule, stores what changed (closing the open-hold index
 * entry when the hold leaves HELD/REVOKING) and emits the result. */
int counter_settle_hold(stage_ctx_t *ctx, const counter_hold_id_t *id,
                        counter_settle_rule_fn rule) HF_MUST_CHECK;

#endif
