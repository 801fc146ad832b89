/* Writer schemas of earlier holdfast versions that this build still reads. A
 * record written with one of them is resolved to the current schema: fields the
 * old writer lacks take the current schema's defaults, fields it had that are gone
 * are skipped. Append an entry whenever a schemas/<Name>.avsc changes in a
 * way that alters its fingerprint, so records already in Kafka and in changelogs
 * stay readable. */
#include "codec_internal.h"

/* Hold v1, the first draft of Hold, before issued_at_ms (default 0) was added.
 * Kept as the worked example of resolution: tests/unit/test_codec.c decodes
 * bytes that the Python Avro library wrote with it. */
static const char hold_v1[] =
    "{\"type\":\"record\",\"name\":\"Hold\",\"namespace\":\"holdfast\",\"fields\":["
    "{\"name\":\"reservation_id\",\"type\":\"string\"},"
    "{\"name\":\"attempt\",\"type\":\"int\"},"
    "{\"name\":\"warehouse_id\",\"type\":\"string\"},"
    "{\"name\":\"sku\",\"type\":\"string\"},"
    "{\"name\":\"qty\",\"type\":\"long\"}]}";

/* ReservationState v1, before the late-payment re-reservation fields (rebook,
 * rebook_idempotency_key, rebook_request_hash, rebook_reply_to; all defaulted)
 * were added: gateway changelogs written before then stay readable. */
static const char reservation_state_v1[] =
    "{\"type\":\"record\",\"name\":\"ReservationState\",\"namespace\":\"holdfast\",\"fields\":["
    "{\"name\":\"reservation_id\",\"type\":\"string\"},"
    "{\"name\":\"idempotency_key\",\"type\":\"string\"},"
    "{\"name\":\"status\",\"type\":\"int\"},"
    "{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":"
    "\"Line\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":"
    "\"long\"}]}}},"
    "{\"name\":\"ship_to\",\"type\":{\"type\":\"record\",\"name\":\"Geo\",\"fields\":[{\"name\":"
    "\"lat\",\"type\":\"double\"},{\"name\":\"lon\",\"type\":\"double\"}]}},"
    "{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
    "\"name\":\"HoldRef\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},{\"name\":"
    "\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"},{\"name\":\"attempt\","
    "\"type\":\"int\"},{\"name\":\"status\",\"type\":\"int\"},{\"name\":\"available_seen\","
    "\"type\":\"long\",\"default\":0}]}}},"
    "{\"name\":\"next_attempt\",\"type\":\"int\"},"
    "{\"name\":\"reroutes\",\"type\":\"int\"},"
    "{\"name\":\"request_hash\",\"type\":\"long\"},"
    "{\"name\":\"reply_to\",\"type\":\"string\"},"
    "{\"name\":\"campaign\",\"type\":\"string\",\"default\":\"\"},"
    "{\"name\":\"payment_id\",\"type\":\"string\",\"default\":\"\"},"
    "{\"name\":\"reason\",\"type\":\"string\",\"default\":\"\"},"
    "{\"name\":\"created_at_ms\",\"type\":\"long\"},"
    "{\"name\":\"expires_at_ms\",\"type\":\"long\"},"
    "{\"name\":\"hold_deadline_ms\",\"type\":\"long\"},"
    "{\"name\":\"result_deadline_ms\",\"type\":\"long\"},"
    "{\"name\":\"result_retries\",\"type\":\"int\"},"
    "{\"name\":\"updated_at_ms\",\"type\":\"long\"}]}";

/* ReservationState v2, v1 with the re-reservation fields, before the Reserve's
 * answer moved into the reservation (reserve_replied, reserve_reply; both
 * defaulted): its answer is then in an IdempotencyRecord, which is still read. */
static const char reservation_state_v2[] =
    "{\"type\":\"record\",\"name\":\"ReservationState\",\"namespace\":\"holdfast\",\"fields\":["
    "{\"name\":\"reservation_id\",\"type\":\"string\"},"
    "{\"name\":\"idempotency_key\",\"type\":\"string\"},"
    "{\"name\":\"status\",\"type\":\"int\"},"
    "{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":"
    "\"Line\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":"
    "\"long\"}]}}},"
    "{\"name\":\"ship_to\",\"type\":{\"type\":\"record\",\"name\":\"Geo\",\"fields\":[{\"name\":"
    "\"lat\",\"type\":\"double\"},{\"name\":\"lon\",\"type\":\"double\"}]}},"
    "{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
    "\"name\":\"HoldRef\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},{\"name\":"
    "\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"},{\"name\":\"attempt\","
    "\"type\":\"int\"},{\"name\":\"status\",\"type\":\"int\"},{\"name\":\"available_seen\","
    "\"type\":\"long\",\"default\":0}]}}},"
    "{\"name\":\"next_attempt\",\"type\":\"int\"},"
    "{\"name\":\"reroutes\",\"type\":\"int\"},"
    "{\"name\":\"request_hash\",\"type\":\"long\"},"
    "{\"name\":\"reply_to\",\"type\":\"string\"},"
    "{\"name\":\"campaign\",\"type\":\"string\",\"default\":\"\"},"
    "{\"name\":\"payment_id\",\"type\":\"string\",\"default\":\"\"},"
    "{\"name\":\"reason\",\"type\":\"string\",\"default\":\"\"},"
    "{\"name\":\"created_at_ms\",\"type\":\"long\"},"
    "{\"name\":\"expires_at_ms\",\"type\":\"long\"},"
    "{\"name\":\"hold_deadline_ms\",\"type\":\"long\"},"
    "{\"name\":\"result_deadline_ms\",\"type\":\"long\"},"
    "{\"name\":\"result_retries\",\"type\":\"int\"},"
    "{\"name\":\"updated_at_ms\",\"type\":\"long\"},"
    "{\"name\":\"rebook\",\"type\":\"int\",\"default\":0},"
    "{\"name\":\"rebook_idempotency_key\",\"type\":\"string\",\"default\":\"\"},"
    "{\"name\":\"rebook_request_hash\",\"type\":\"long\",\"default\":0},"
    "{\"name\":\"rebook_reply_to\",\"type\":\"string\",\"default\":\"\"}]}";

/* ReservationState v3, v2 with the Reserve's answer, before status,
 * HoldRef.status and rebook became enums (ReservationStatus, HoldRefStatus,
 * Rebook): they were ints then, holding the symbol indexes, which the codec
 * reads as the enums (codec_project). */
static const char reservation_state_v3[] =
    "{\"type\":\"record\",\"name\":\"ReservationState\",\"namespace\":\"holdfast\",\"fields\":[{"
    "\"name\":\"reservation_id\","
    "\"type\":\"string\"},{\"name\":\"idempotency_key\",\"type\":\"string\"},{\"name\":\"status\","
    "\"type\":\"int\"},{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"record\","
    "\"name\":\"Line\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\","
    "\"type\":\"long\"}]}}},{\"name\":\"ship_to\",\"type\":{\"type\":\"record\",\"name\":\"Geo\","
    "\"fields\":[{\"name\":\"lat\",\"type\":\"double\"},{\"name\":\"lon\",\"type\":\"double\"}]}},"
    "{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
    "\"name\":\"HoldRef\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},{\"name\":"
    "\"sku\","
    "\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"},{\"name\":\"attempt\",\"type\":"
    "\"int\"},"
    "{\"name\":\"status\",\"type\":\"int\"},{\"name\":\"available_seen\",\"type\":\"long\","
    "\"default\":0}]}}},{\"name\":\"next_attempt\",\"type\":\"int\"},{\"name\":\"reroutes\","
    "\"type\":\"int\"},{\"name\":\"request_hash\",\"type\":\"long\"},{\"name\":\"reply_to\","
    "\"type\":\"string\"},{\"name\":\"campaign\",\"type\":\"string\",\"default\":\"\"},{\"name\":"
    "\"payment_id\","
    "\"type\":\"string\",\"default\":\"\"},{\"name\":\"reason\",\"type\":\"string\",\"default\":"
    "\"\"},"
    "{\"name\":\"created_at_ms\",\"type\":\"long\"},{\"name\":\"expires_at_ms\",\"type\":\"long\"},"
    "{\"name\":\"hold_deadline_ms\",\"type\":\"long\"},{\"name\":\"result_deadline_ms\",\"type\":"
    "\"long\"},"
    "{\"name\":\"result_retries\",\"type\":\"int\"},{\"name\":\"updated_at_ms\",\"type\":\"long\"},"
    "{\"name\":\"rebook\",\"type\":\"int\",\"default\":0},{\"name\":\"rebook_idempotency_key\","
    "\"type\":\"string\",\"default\":\"\"},{\"name\":\"rebook_request_hash\",\"type\":\"long\","
    "\"default\":0},{\"name\":\"rebook_reply_to\",\"type\":\"string\",\"default\":\"\"},{\"name\":"
    "\"reserve_replied\","
    "\"type\":\"boolean\",\"default\":false},{\"name\":\"reserve_reply\",\"type\":{\"type\":"
    "\"record\","
    "\"name\":\"Reply\",\"fields\":[{\"name\":\"reservation_id\",\"type\":\"string\"},{\"name\":"
    "\"idempotency_key\","
    "\"type\":\"string\"},{\"name\":\"outcome\",\"type\":{\"type\":\"enum\",\"name\":"
    "\"ReplyOutcome\","
    "\"symbols\":[\"HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\",\"REJECTED_INSUFFICIENT\","
    "\"REJECTED_INVALID\",\"CONFLICT\",\"NOT_FOUND\",\"BUSY\"]}},{\"name\":\"allocations\","
    "\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"Allocation\","
    "\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},{\"name\":\"sku\",\"type\":"
    "\"string\"},"
    "{\"name\":\"qty\",\"type\":\"long\"}]}}},{\"name\":\"expires_at_ms\",\"type\":\"long\","
    "\"default\":0},{\"name\":\"message\",\"type\":\"string\",\"default\":\"\"},{\"name\":"
    "\"replied_at_ms\","
    "\"type\":\"long\"}]},\"default\":{\"reservation_id\":\"\",\"idempotency_key\":\"\","
    "\"outcome\":\"HELD\","
    "\"allocations\":[],\"expires_at_ms\":0,\"message\":\"\",\"replied_at_ms\":0}}]}";

/* StockFeed v1, before COUNT_AS_OF (a FeedKind symbol), as_of_committed and
 * feed_epoch (both default 0) were added: feeds already on the topic stay
 * readable and keep their meaning (epoch 0). */
static const char stock_feed_v1[] =
    "{\"type\":\"record\",\"name\":\"StockFeed\",\"namespace\":\"holdfast\",\"fields\":["
    "{\"name\":\"warehouse_id\",\"type\":\"string\"},"
    "{\"name\":\"sku\",\"type\":\"string\"},"
    "{\"name\":\"kind\",\"type\":{\"type\":\"enum\",\"name\":\"FeedKind\",\"symbols\":[\"RECEIVE\","
    "\"ADJUST\",\"COUNT\",\"SAFETY_STOCK\"]}},"
    "{\"name\":\"qty\",\"type\":\"long\"},"
    "{\"name\":\"feed_seq\",\"type\":\"long\"},"
    "{\"name\":\"issued_at_ms\",\"type\":\"long\",\"default\":0}]}";

/* CounterState v1, before committed_total and feed_epoch (default 0): a
 * counter restored from an older changelog starts its committed_total at 0,
 * so an as-of count can only name points from the upgrade on. */
static const char counter_state_v1[] =
    "{\"type\":\"record\",\"name\":\"CounterState\",\"namespace\":\"holdfast\",\"fields\":["
    "{\"name\":\"on_hand\",\"type\":\"long\"},"
    "{\"name\":\"reserved\",\"type\":\"long\"},"
    "{\"name\":\"safety_stock\",\"type\":\"long\"},"
    "{\"name\":\"revoking\",\"type\":\"long\",\"default\":0},"
    "{\"name\":\"version\",\"type\":\"long\"},"
    "{\"name\":\"feed_seq\",\"type\":\"long\"}]}";

/* StockLevel v1, before committed_total, feed_seq and feed_epoch (default 0). */
static const char stock_level_v1[] =
    "{\"type\":\"record\",\"name\":\"StockLevel\",\"namespace\":\"holdfast\",\"fields\":["
    "{\"name\":\"warehouse_id\",\"type\":\"string\"},"
    "{\"name\":\"sku\",\"type\":\"string\"},"
    "{\"name\":\"on_hand\",\"type\":\"long\"},"
    "{\"name\":\"reserved\",\"type\":\"long\"},"
    "{\"name\":\"safety_stock\",\"type\":\"long\"},"
    "{\"name\":\"available\",\"type\":\"long\"},"
    "{\"name\":\"shortfall\",\"type\":\"long\",\"default\":0},"
    "{\"name\":\"version\",\"type\":\"long\"},"
    "{\"name\":\"updated_at_ms\",\"type\":\"long\"}]}";

/* Reply v1, before the BUSY outcome (load shedding) was appended to
 * ReplyOutcome: replies already on reply topics stay readable. */
static const char reply_v1[] =
    "{\"type\":\"record\",\"name\":\"Reply\",\"namespace\":\"holdfast\",\"doc\":\"What a checkout "
    "client is "
    "told about its request. Topic reply_to (default holdfast.replies), key reservation_id.\","
    "\"fields\":[{\"name\":\"reservation_id\",\"type\":\"string\",\"doc\":\"The reservation "
    "answered.\"},{\""
    "name\":\"idempotency_key\",\"type\":\"string\",\"doc\":\"Idempotency key of the request "
    "answered.\""
    "},{\"name\":\"outcome\",\"type\":{\"type\":\"enum\",\"name\":\"ReplyOutcome\",\"doc\":\"What "
    "a checkout c"
    "lient is told. Append symbols "
    "only.\",\"symbols\":[\"HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\","
    "\"REJECTED_INSUFFICIENT\",\"REJECTED_INVALID\",\"CONFLICT\",\"NOT_FOUND\"]},\"doc\":\"The "
    "answer.\"}"
    ",{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
    "\"name\":\"Allocatio"
    "n\",\"doc\":\"Units of one SKU held at one "
    "warehouse.\",\"fields\":[{\"name\":\"warehouse_id\",\"typ"
    "e\":\"string\",\"doc\":\"Warehouse holding the "
    "units.\"},{\"name\":\"sku\",\"type\":\"string\",\"doc\":\"S"
    "tock keeping unit.\"},{\"name\":\"qty\",\"type\":\"long\",\"doc\":\"Units held "
    "there.\"}]}},\"doc\":\"Wh"
    "ere the stock is held; empty unless HELD or "
    "COMMITTED.\"},{\"name\":\"expires_at_ms\",\"type\":"
    "\"long\",\"default\":0,\"doc\":\"When the holds lapse, Unix epoch milliseconds; 0 when not "
    "held"
    ".\"},{\"name\":\"message\",\"type\":\"string\",\"default\":\"\",\"doc\":\"Human-readable "
    "detail.\"},{\"nam"
    "e\":\"replied_at_ms\",\"type\":\"long\",\"doc\":\"When the gateway answered, Unix epoch "
    "millisecon"
    "ds.\"}]}";

/* IdempotencyRecord v1: its embedded Reply before BUSY was appended; gateway
 * changelogs written before then stay readable. */
static const char idempotency_record_v1[] =
    "{\"type\":\"record\",\"name\":\"IdempotencyRecord\",\"namespace\":\"holdfast\",\"doc\":\"The "
    "stored out"
    "come of one idempotency key (gateway state, key reservation_id|idempotency_key). Expired"
    " by the sweeper after the "
    "retention.\",\"fields\":[{\"name\":\"request_hash\",\"type\":\"long\",\"do"
    "c\":\"Hash of the request body; a retry with another hash is a CONFLICT.\"},{\"name\":\"comple"
    "te\",\"type\":\"boolean\",\"doc\":\"False while the answer is not known yet (a Reserve "
    "awaiting "
    "its "
    "holds).\"},{\"name\":\"reply\",\"type\":{\"type\":\"record\",\"name\":\"Reply\",\"doc\":"
    "\"What a check"
    "out client is told about its "
    "request.\",\"fields\":[{\"name\":\"reservation_id\",\"type\":\"string"
    "\",\"doc\":\"The reservation "
    "answered.\"},{\"name\":\"idempotency_key\",\"type\":\"string\",\"doc\":\"Id"
    "empotency key of the request "
    "answered.\"},{\"name\":\"outcome\",\"type\":{\"type\":\"enum\",\"name\":"
    "\"ReplyOutcome\",\"doc\":\"What a checkout client is told. Append symbols "
    "only.\",\"symbols\":[\""
    "HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\",\"REJECTED_INSUFFICIENT\",\"REJECTED_INVALID\","
    "\"CONFL"
    "ICT\",\"NOT_FOUND\"]},\"doc\":\"The "
    "answer.\"},{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"it"
    "ems\":{\"type\":\"record\",\"name\":\"Allocation\",\"doc\":\"Units of one SKU held at one "
    "warehouse."
    "\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\",\"doc\":\"Warehouse holding the "
    "units.\"}"
    ",{\"name\":\"sku\",\"type\":\"string\",\"doc\":\"Stock keeping "
    "unit.\"},{\"name\":\"qty\",\"type\":\"long\","
    "\"doc\":\"Units held there.\"}]}},\"doc\":\"Where the stock is held; empty unless HELD or "
    "COMMI"
    "TTED.\"},{\"name\":\"expires_at_ms\",\"type\":\"long\",\"default\":0,\"doc\":\"When the holds "
    "lapse, U"
    "nix epoch milliseconds; 0 when not "
    "held.\"},{\"name\":\"message\",\"type\":\"string\",\"default\":\""
    "\",\"doc\":\"Human-readable "
    "detail.\"},{\"name\":\"replied_at_ms\",\"type\":\"long\",\"doc\":\"When the "
    "gateway answered, Unix epoch milliseconds.\"}]},\"doc\":\"The reply given, re-emitted as it "
    "was to a retry.\"},{\"name\":\"stored_at_ms\",\"type\":\"long\",\"doc\":\"When the key was "
    "first see"
    "n, Unix epoch milliseconds.\"}]}";

const codec_history_t codec_history[] = {
    {HF_REC_HOLD, hold_v1},
    {HF_REC_RESERVATION_STATE, reservation_state_v1},
    {HF_REC_STOCK_FEED, stock_feed_v1},
    {HF_REC_COUNTER_STATE, counter_state_v1},
    {HF_REC_STOCK_LEVEL, stock_level_v1},
    {HF_REC_REPLY, reply_v1},
    {HF_REC_IDEMPOTENCY_RECORD, idempotency_record_v1},
    {HF_REC_RESERVATION_STATE, reservation_state_v2},
    {HF_REC_RESERVATION_STATE, reservation_state_v3},
};
const size_t codec_history_count = sizeof codec_history / sizeof codec_history[0];
