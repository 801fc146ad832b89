/* The field descriptor tables: for every record struct in records.h, its fields in
 * Avro schema order with their offsets, kinds and bounds. One generic encoder and
 * decoder walk these tables instead of 16 hand-written pairs; codec_init checks
 * each table against its .avsc file, so a struct and its schema cannot drift. */
#include <stddef.h>

#include "codec_internal.h"

/* Enums are stored as int-sized C enums; the codec copies them as int. */
_Static_assert(sizeof(hf_outcome_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_cmd_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_feed_kind_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_hold_status_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_reply_outcome_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_ledger_kind_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_signal_kind_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_res_status_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_hold_ref_status_t) == sizeof(int), "enum size");
_Static_assert(sizeof(hf_rebook_t) == sizeof(int), "enum size");

#define MEMBER_SIZE(T, f) sizeof(((T *)0)->f)
#define COUNT_OF(a)       (sizeof(a) / sizeof((a)[0]))

/* clang-format off */
#define F_SCALAR(T, f, k) {.name = #f, .kind = (k), .offset = offsetof(T, f)}
#define F_STRING(T, f) \
    {.name = #f, .kind = CODEC_KIND_STRING, .offset = offsetof(T, f), .size = MEMBER_SIZE(T, f)}
#define F_INT(T, f) F_SCALAR(T, f, CODEC_KIND_INT)
#define F_LONG(T, f) F_SCALAR(T, f, CODEC_KIND_LONG)
#define F_DOUBLE(T, f) F_SCALAR(T, f, CODEC_KIND_DOUBLE)
#define F_BOOLEAN(T, f) F_SCALAR(T, f, CODEC_KIND_BOOLEAN)
#define F_ENUM(T, f, syms) \
    {.name = #f, .kind = CODEC_KIND_ENUM, .offset = offsetof(T, f), .symbols = (syms), \
     .symbols_count = COUNT_OF(syms)}
#define F_BYTES(T, f) \
    {.name = #f, .kind = CODEC_KIND_BYTES, .offset = offsetof(T, f), \
     .size = MEMBER_SIZE(T, f), .len_offset = offsetof(T, f##_len)}
#define F_RECORD(T, f, desc) \
    {.name = #f, .kind = CODEC_KIND_RECORD, .offset = offsetof(T, f), .rec = (desc)}
#define F_ARRAY(T, f, desc) \
    {.name = #f, .kind = CODEC_KIND_ARRAY, .offset = offsetof(T, f), \
     .size = COUNT_OF(((T *)0)->f), .len_offset = offsetof(T, f##_count), \
     .elem_size = sizeof(((T *)0)->f[0]), .rec = (desc)}

#define REC_DESC(var, avro_name, T, fields_table) \
    static const codec_rec_desc_t var = {.name = (avro_name), .struct_size = sizeof(T), \
                                         .fields = (fields_table), \
                                         .fields_count = COUNT_OF(fields_table)}

/* ---- nested records */

static const codec_field_t line_fields[] = {
    F_STRING(hf_line_t, sku),
    F_LONG(hf_line_t, qty),
};
REC_DESC(line_desc, "Line", hf_line_t, line_fields);

static const codec_field_t geo_fields[] = {
    F_DOUBLE(hf_geo_t, lat),
    F_DOUBLE(hf_geo_t, lon),
};
REC_DESC(geo_desc, "Geo", hf_geo_t, geo_fields);

static const codec_field_t allocation_fields[] = {
    F_STRING(hf_allocation_t, warehouse_id),
    F_STRING(hf_allocation_t, sku),
    F_LONG(hf_allocation_t, qty),
};
REC_DESC(allocation_desc, "Allocation", hf_allocation_t, allocation_fields);

static const codec_field_t wh_available_fields[] = {
    F_STRING(hf_wh_available_t, warehouse_id),
    F_LONG(hf_wh_available_t, available),
    F_LONG(hf_wh_available_t, escrow),
};
REC_DESC(wh_available_desc, "WarehouseAvailable", hf_wh_available_t, wh_available_fields);

/* ---- counter commands and outputs */

static const codec_field_t hold_fields[] = {
    F_STRING(hf_hold_t, reservation_id),
    F_INT(hf_hold_t, attempt),
    F_STRING(hf_hold_t, warehouse_id),
    F_STRING(hf_hold_t, sku),
    F_LONG(hf_hold_t, qty),
    F_LONG(hf_hold_t, issued_at_ms),
    F_BOOLEAN(hf_hold_t, answer_reserve),
    F_STRING(hf_hold_t, idempotency_key),
    F_STRING(hf_hold_t, reply_to),
    F_LONG(hf_hold_t, expires_at_ms),
    F_STRING(hf_hold_t, api_key_id),
    F_LONG(hf_hold_t, requested_at_ms),
};
REC_DESC(hold_desc, "Hold", hf_hold_t, hold_fields);

static const codec_field_t commit_hold_fields[] = {
    F_STRING(hf_commit_hold_t, reservation_id),
    F_INT(hf_commit_hold_t, attempt),
    F_STRING(hf_commit_hold_t, warehouse_id),
    F_STRING(hf_commit_hold_t, sku),
    F_LONG(hf_commit_hold_t, issued_at_ms),
};
REC_DESC(commit_hold_desc, "CommitHold", hf_commit_hold_t, commit_hold_fields);

static const codec_field_t release_hold_fields[] = {
    F_STRING(hf_release_hold_t, reservation_id),
    F_INT(hf_release_hold_t, attempt),
    F_STRING(hf_release_hold_t, warehouse_id),
    F_STRING(hf_release_hold_t, sku),
    F_STRING(hf_release_hold_t, reason),
    F_LONG(hf_release_hold_t, issued_at_ms),
};
REC_DESC(release_hold_desc, "ReleaseHold", hf_release_hold_t, release_hold_fields);

static const codec_field_t stock_feed_fields[] = {
    F_STRING(hf_stock_feed_t, warehouse_id),
    F_STRING(hf_stock_feed_t, sku),
    F_ENUM(hf_stock_feed_t, kind, hf_feed_kind_symbols),
    F_LONG(hf_stock_feed_t, qty),
    F_LONG(hf_stock_feed_t, feed_seq),
    F_LONG(hf_stock_feed_t, issued_at_ms),
    F_LONG(hf_stock_feed_t, as_of_committed),
    F_LONG(hf_stock_feed_t, feed_epoch),
};
REC_DESC(stock_feed_desc, "StockFeed", hf_stock_feed_t, stock_feed_fields);

static const codec_field_t counter_result_fields[] = {
    F_STRING(hf_counter_result_t, reservation_id),
    F_INT(hf_counter_result_t, attempt),
    F_STRING(hf_counter_result_t, warehouse_id),
    F_STRING(hf_counter_result_t, sku),
    F_ENUM(hf_counter_result_t, command, hf_cmd_symbols),
    F_ENUM(hf_counter_result_t, outcome, hf_outcome_symbols),
    F_LONG(hf_counter_result_t, qty),
    F_LONG(hf_counter_result_t, available),
    F_LONG(hf_counter_result_t, applied_at_ms),
    F_LONG(hf_counter_result_t, escrow_balance),
};
REC_DESC(counter_result_desc, "CounterResult", hf_counter_result_t, counter_result_fields);

static const codec_field_t stock_level_fields[] = {
    F_STRING(hf_stock_level_t, warehouse_id),
    F_STRING(hf_stock_level_t, sku),
    F_LONG(hf_stock_level_t, on_hand),
    F_LONG(hf_stock_level_t, reserved),
    F_LONG(hf_stock_level_t, safety_stock),
    F_LONG(hf_stock_level_t, available),
    F_LONG(hf_stock_level_t, shortfall),
    F_LONG(hf_stock_level_t, version),
    F_LONG(hf_stock_level_t, updated_at_ms),
    F_LONG(hf_stock_level_t, committed_total),
    F_LONG(hf_stock_level_t, feed_seq),
    F_LONG(hf_stock_level_t, feed_epoch),
    F_LONG(hf_stock_level_t, allotted),
    F_LONG(hf_stock_level_t, escrow_balance),
};
REC_DESC(stock_level_desc, "StockLevel", hf_stock_level_t, stock_level_fields);

/* ---- counter state */

static const codec_field_t counter_state_fields[] = {
    F_LONG(hf_counter_state_t, on_hand),
    F_LONG(hf_counter_state_t, reserved),
    F_LONG(hf_counter_state_t, safety_stock),
    F_LONG(hf_counter_state_t, revoking),
    F_LONG(hf_counter_state_t, version),
    F_LONG(hf_counter_state_t, feed_seq),
    F_LONG(hf_counter_state_t, committed_total),
    F_LONG(hf_counter_state_t, feed_epoch),
    F_LONG(hf_counter_state_t, allotted),
    F_LONG(hf_counter_state_t, recalling),
    F_LONG(hf_counter_state_t, escrow_balance),
};
REC_DESC(counter_state_desc, "CounterState", hf_counter_state_t, counter_state_fields);

static const codec_field_t hold_state_fields[] = {
    F_LONG(hf_hold_state_t, qty),
    F_ENUM(hf_hold_state_t, status, hf_hold_status_symbols),
    F_LONG(hf_hold_state_t, seq),
    F_ENUM(hf_hold_state_t, hold_outcome, hf_outcome_symbols),
    F_LONG(hf_hold_state_t, available_at_result),
    F_LONG(hf_hold_state_t, created_at_ms),
    F_LONG(hf_hold_state_t, updated_at_ms),
};
REC_DESC(hold_state_desc, "HoldState", hf_hold_state_t, hold_state_fields);

/* ---- requests */

static const codec_field_t wh_ref_fields[] = {
    F_STRING(hf_wh_ref_t, warehouse_id),
};
REC_DESC(wh_ref_desc, "WarehouseRef", hf_wh_ref_t, wh_ref_fields);

static const codec_field_t reserve_fields[] = {
    F_STRING(hf_reserve_t, reservation_id),
    F_STRING(hf_reserve_t, idempotency_key),
    F_ARRAY(hf_reserve_t, lines, &line_desc),
    F_RECORD(hf_reserve_t, ship_to, &geo_desc),
    F_LONG(hf_reserve_t, ttl_ms),
    F_STRING(hf_reserve_t, campaign),
    F_STRING(hf_reserve_t, reply_to),
    F_LONG(hf_reserve_t, sent_at_ms),
    F_STRING(hf_reserve_t, api_key_id),
    F_ARRAY(hf_reserve_t, only_warehouses, &wh_ref_desc),
    F_BOOLEAN(hf_reserve_t, allow_partial),
};
REC_DESC(reserve_desc, "Reserve", hf_reserve_t, reserve_fields);

static const codec_field_t commit_fields[] = {
    F_STRING(hf_commit_t, reservation_id),
    F_STRING(hf_commit_t, idempotency_key),
    F_STRING(hf_commit_t, payment_id),
    F_STRING(hf_commit_t, reply_to),
    F_LONG(hf_commit_t, sent_at_ms),
};
REC_DESC(commit_desc, "Commit", hf_commit_t, commit_fields);

static const codec_field_t release_fields[] = {
    F_STRING(hf_release_t, reservation_id),
    F_STRING(hf_release_t, idempotency_key),
    F_STRING(hf_release_t, reason),
    F_STRING(hf_release_t, reply_to),
    F_LONG(hf_release_t, sent_at_ms),
};
REC_DESC(release_desc, "Release", hf_release_t, release_fields);

/* ---- gateway and aggregator outputs */

static const codec_field_t reply_fields[] = {
    F_STRING(hf_reply_t, reservation_id),
    F_STRING(hf_reply_t, idempotency_key),
    F_ENUM(hf_reply_t, outcome, hf_reply_outcome_symbols),
    F_ARRAY(hf_reply_t, allocations, &allocation_desc),
    F_LONG(hf_reply_t, expires_at_ms),
    F_STRING(hf_reply_t, message),
    F_LONG(hf_reply_t, replied_at_ms),
};
REC_DESC(reply_desc, "Reply", hf_reply_t, reply_fields);

static const codec_field_t ledger_event_fields[] = {
    F_STRING(hf_ledger_event_t, reservation_id),
    F_ENUM(hf_ledger_event_t, kind, hf_ledger_kind_symbols),
    F_ARRAY(hf_ledger_event_t, allocations, &allocation_desc),
    F_ARRAY(hf_ledger_event_t, lines, &line_desc),
    F_STRING(hf_ledger_event_t, reason),
    F_STRING(hf_ledger_event_t, payment_id),
    F_LONG(hf_ledger_event_t, expires_at_ms),
    F_LONG(hf_ledger_event_t, at_ms),
    F_STRING(hf_ledger_event_t, api_key_id),
};
REC_DESC(ledger_event_desc, "LedgerEvent", hf_ledger_event_t, ledger_event_fields);

static const codec_field_t availability_fields[] = {
    F_STRING(hf_availability_t, sku),
    F_ARRAY(hf_availability_t, warehouses, &wh_available_desc),
    F_LONG(hf_availability_t, total),
    F_BOOLEAN(hf_availability_t, in_stock),
    F_LONG(hf_availability_t, updated_at_ms),
};
REC_DESC(availability_desc, "Availability", hf_availability_t, availability_fields);

static const codec_field_t signal_fields[] = {
    F_STRING(hf_signal_t, sku),
    F_ENUM(hf_signal_t, kind, hf_signal_kind_symbols),
    F_LONG(hf_signal_t, total),
    F_LONG(hf_signal_t, changed_at_ms),
    F_LONG(hf_signal_t, emitted_at_ms),
};
REC_DESC(signal_desc, "Signal", hf_signal_t, signal_fields);

static const codec_field_t dead_letter_fields[] = {
    F_STRING(hf_dead_letter_t, source_topic),
    F_INT(hf_dead_letter_t, source_partition),
    F_LONG(hf_dead_letter_t, source_offset),
    F_STRING(hf_dead_letter_t, stage),
    F_STRING(hf_dead_letter_t, reason),
    F_BYTES(hf_dead_letter_t, key),
    F_BYTES(hf_dead_letter_t, value),
    F_BOOLEAN(hf_dead_letter_t, value_truncated),
    F_LONG(hf_dead_letter_t, failed_at_ms),
};
REC_DESC(dead_letter_desc, "DeadLetter", hf_dead_letter_t, dead_letter_fields);

static const codec_field_t sku_state_fields[] = {
    F_STRING(hf_sku_state_t, sku),
    F_ARRAY(hf_sku_state_t, warehouses, &wh_available_desc),
    F_LONG(hf_sku_state_t, total),
    F_BOOLEAN(hf_sku_state_t, in_stock),
    F_LONG(hf_sku_state_t, low_since_ms),
    F_LONG(hf_sku_state_t, changed_at_ms),
    F_LONG(hf_sku_state_t, updated_at_ms),
};
REC_DESC(sku_state_desc, "SkuState", hf_sku_state_t, sku_state_fields);

/* ---- gateway state and requests */

static const codec_field_t hold_ref_fields[] = {
    F_STRING(hf_hold_ref_t, warehouse_id),
    F_STRING(hf_hold_ref_t, sku),
    F_LONG(hf_hold_ref_t, qty),
    F_INT(hf_hold_ref_t, attempt),
    F_ENUM(hf_hold_ref_t, status, hf_hold_ref_status_symbols),
    F_LONG(hf_hold_ref_t, available_seen),
    F_BOOLEAN(hf_hold_ref_t, escrow),
};
REC_DESC(hold_ref_desc, "HoldRef", hf_hold_ref_t, hold_ref_fields);

static const codec_field_t reservation_state_fields[] = {
    F_STRING(hf_reservation_state_t, reservation_id),
    F_STRING(hf_reservation_state_t, idempotency_key),
    F_ENUM(hf_reservation_state_t, status, hf_res_status_symbols),
    F_ARRAY(hf_reservation_state_t, lines, &line_desc),
    F_RECORD(hf_reservation_state_t, ship_to, &geo_desc),
    F_ARRAY(hf_reservation_state_t, allocations, &hold_ref_desc),
    F_INT(hf_reservation_state_t, next_attempt),
    F_INT(hf_reservation_state_t, reroutes),
    F_LONG(hf_reservation_state_t, request_hash),
    F_STRING(hf_reservation_state_t, reply_to),
    F_STRING(hf_reservation_state_t, campaign),
    F_STRING(hf_reservation_state_t, payment_id),
    F_STRING(hf_reservation_state_t, reason),
    F_LONG(hf_reservation_state_t, created_at_ms),
    F_LONG(hf_reservation_state_t, expires_at_ms),
    F_LONG(hf_reservation_state_t, hold_deadline_ms),
    F_LONG(hf_reservation_state_t, result_deadline_ms),
    F_INT(hf_reservation_state_t, result_retries),
    F_LONG(hf_reservation_state_t, updated_at_ms),
    F_ENUM(hf_reservation_state_t, rebook, hf_rebook_symbols),
    F_STRING(hf_reservation_state_t, rebook_idempotency_key),
    F_LONG(hf_reservation_state_t, rebook_request_hash),
    F_STRING(hf_reservation_state_t, rebook_reply_to),
    F_BOOLEAN(hf_reservation_state_t, reserve_replied),
    F_RECORD(hf_reservation_state_t, reserve_reply, &reply_desc),
    F_BOOLEAN(hf_reservation_state_t, counter_answers),
    F_STRING(hf_reservation_state_t, api_key_id),
    F_LONG(hf_reservation_state_t, requested_at_ms),
    F_ARRAY(hf_reservation_state_t, only_warehouses, &wh_ref_desc),
    F_BOOLEAN(hf_reservation_state_t, allow_partial),
};
REC_DESC(reservation_state_desc, "ReservationState", hf_reservation_state_t,
         reservation_state_fields);

static const codec_field_t idempotency_record_fields[] = {
    F_LONG(hf_idempotency_record_t, request_hash),
    F_BOOLEAN(hf_idempotency_record_t, complete),
    F_RECORD(hf_idempotency_record_t, reply, &reply_desc),
    F_LONG(hf_idempotency_record_t, stored_at_ms),
};
REC_DESC(idempotency_record_desc, "IdempotencyRecord", hf_idempotency_record_t,
         idempotency_record_fields);

static const codec_field_t extend_fields[] = {
    F_STRING(hf_extend_t, reservation_id),
    F_STRING(hf_extend_t, idempotency_key),
    F_LONG(hf_extend_t, extend_by_ms),
    F_STRING(hf_extend_t, reply_to),
    F_LONG(hf_extend_t, sent_at_ms),
};
REC_DESC(extend_desc, "Extend", hf_extend_t, extend_fields);

static const codec_field_t payment_event_fields[] = {
    F_STRING(hf_payment_event_t, reservation_id),
    F_STRING(hf_payment_event_t, idempotency_key),
    F_ENUM(hf_payment_event_t, event, hf_payment_event_kind_symbols),
    F_STRING(hf_payment_event_t, payment_id),
    F_STRING(hf_payment_event_t, reason),
    F_STRING(hf_payment_event_t, reply_to),
    F_LONG(hf_payment_event_t, sent_at_ms),
};
REC_DESC(payment_event_desc, "PaymentEvent", hf_payment_event_t, payment_event_fields);

/* ---- escrow */

static const codec_field_t allotment_request_fields[] = {
    F_STRING(hf_allotment_request_t, warehouse_id),
    F_STRING(hf_allotment_request_t, sku),
    F_INT(hf_allotment_request_t, holder_partition),
    F_STRING(hf_allotment_request_t, holder_key),
    F_LONG(hf_allotment_request_t, seq),
    F_LONG(hf_allotment_request_t, want_qty),
    F_LONG(hf_allotment_request_t, return_qty),
    F_LONG(hf_allotment_request_t, balance),
    F_LONG(hf_allotment_request_t, sent_at_ms),
};
REC_DESC(allotment_request_desc, "AllotmentRequest", hf_allotment_request_t,
         allotment_request_fields);

static const codec_field_t allotment_grant_fields[] = {
    F_STRING(hf_allotment_grant_t, warehouse_id),
    F_STRING(hf_allotment_grant_t, sku),
    F_INT(hf_allotment_grant_t, holder_partition),
    F_LONG(hf_allotment_grant_t, seq),
    F_LONG(hf_allotment_grant_t, granted_qty),
    F_LONG(hf_allotment_grant_t, recall_qty),
    F_BOOLEAN(hf_allotment_grant_t, shortfall),
    F_LONG(hf_allotment_grant_t, allotted),
    F_LONG(hf_allotment_grant_t, available),
    F_LONG(hf_allotment_grant_t, applied_at_ms),
};
REC_DESC(allotment_grant_desc, "AllotmentGrant", hf_allotment_grant_t, allotment_grant_fields);

static const codec_field_t allotment_sale_fields[] = {
    F_STRING(hf_allotment_sale_t, warehouse_id),
    F_STRING(hf_allotment_sale_t, sku),
    F_INT(hf_allotment_sale_t, holder_partition),
    F_STRING(hf_allotment_sale_t, reservation_id),
    F_INT(hf_allotment_sale_t, attempt),
    F_LONG(hf_allotment_sale_t, qty),
    F_LONG(hf_allotment_sale_t, balance),
    F_LONG(hf_allotment_sale_t, sold_at_ms),
};
REC_DESC(allotment_sale_desc, "AllotmentSale", hf_allotment_sale_t, allotment_sale_fields);

static const codec_field_t allotment_state_fields[] = {
    F_INT(hf_allotment_state_t, holder_partition),
    F_STRING(hf_allotment_state_t, holder_key),
    F_LONG(hf_allotment_state_t, allotted),
    F_LONG(hf_allotment_state_t, recalling),
    F_LONG(hf_allotment_state_t, reported_balance),
    F_LONG(hf_allotment_state_t, answered_seq),
    F_LONG(hf_allotment_state_t, rebalance_asked_at_ms),
    F_LONG(hf_allotment_state_t, granted_total),
    F_LONG(hf_allotment_state_t, returned_total),
    F_LONG(hf_allotment_state_t, sold_total),
    F_LONG(hf_allotment_state_t, updated_at_ms),
};
REC_DESC(allotment_state_desc, "AllotmentState", hf_allotment_state_t, allotment_state_fields);

static const codec_field_t escrow_state_fields[] = {
    F_STRING(hf_escrow_state_t, warehouse_id),
    F_STRING(hf_escrow_state_t, sku),
    F_STRING(hf_escrow_state_t, holder_key),
    F_LONG(hf_escrow_state_t, allotted),
    F_LONG(hf_escrow_state_t, balance),
    F_LONG(hf_escrow_state_t, seq),
    F_LONG(hf_escrow_state_t, asking_seq),
    F_LONG(hf_escrow_state_t, asking_qty),
    F_LONG(hf_escrow_state_t, asked_at_ms),
    F_LONG(hf_escrow_state_t, owed_qty),
    F_LONG(hf_escrow_state_t, reported_balance),
    F_LONG(hf_escrow_state_t, reported_at_ms),
    F_LONG(hf_escrow_state_t, last_take_ms),
    F_LONG(hf_escrow_state_t, rate_milli_units_s),
    F_LONG(hf_escrow_state_t, updated_at_ms),
};
REC_DESC(escrow_state_desc, "EscrowState", hf_escrow_state_t, escrow_state_fields);

/* clang-format on */

const codec_rec_desc_t *const codec_rec_descs[HF_REC__COUNT] = {
#define HF_REC_DESC(UP, Name, type, field) [HF_REC_##UP] = &field##_desc,
    HF_REC_MAP(HF_REC_DESC)
#undef HF_REC_DESC
};

/* ---- worst-case body length, for sizing per-thread scratch buffers */

static size_t varint_len(uint64_t zigzag)
{
    size_t n = 1;
    while (zigzag >= 0x80) {
        zigzag >>= 7;
        n++;
    }
    return n;
}

/* Length of a non-negative long's varint (zigzag doubles it). */
static size_t count_len(size_t v)
{
    return varint_len((uint64_t)v << 1);
}

static size_t field_len_max(const codec_field_t *f)
{
    switch (f->kind) {
    case CODEC_KIND_STRING:
        return count_len(f->size - 1) + f->size - 1;
    case CODEC_KIND_INT:
        return 5;
    case CODEC_KIND_LONG:
        return 10;
    case CODEC_KIND_DOUBLE:
        return 8;
    case CODEC_KIND_BOOLEAN:
        return 1;
    case CODEC_KIND_ENUM:
        return count_len(f->symbols_count);
    case CODEC_KIND_BYTES:
        return count_len(f->size) + f->size;
    case CODEC_KIND_RECORD:
        return codec_desc_body_len_max(f->rec);
    case CODEC_KIND_ARRAY: /* one block: count, items, the 0 that ends it */
        return count_len(f->size) + f->size * codec_desc_body_len_max(f->rec) + 1;
    }
    return 0;
}

size_t codec_desc_body_len_max(const codec_rec_desc_t *rd)
{
    size_t len = 0;
    for (size_t i = 0; i < rd->fields_count; i++)
        len += field_len_max(&rd->fields[i]);
    return len;
}
