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

/* CounterState v2, before the escrow fields (allotted, recalling,
 * escrow_balance; all defaulted 0). */
static const char counter_state_v2[] =
    "{\"type\":\"record\",\"name\":\"CounterState\",\"namespace\":\"holdfast\",\"doc\":\"A (w"
    "arehouse, sku) counter as stored in RocksDB and in the counter changelog.\",\"fields\":["
    "{\"name\":\"on_hand\",\"type\":\"long\",\"doc\":\"Units physically in the warehouse.\"},"
    "{\"name\":\"reserved\",\"type\":\"long\",\"doc\":\"Sum of HELD and REVOKING holds.\"},{\""
    "name\":\"safety_stock\",\"type\":\"long\",\"doc\":\"Units kept back from new holds.\"},{"
    "\"name\":\"revoking\",\"type\":\"long\",\"default\":0,\"doc\":\"Sum of REVOKING holds.\""
    "},{\"name\":\"version\",\"type\":\"long\",\"doc\":\"Bumped on every change.\"},{\"name\""
    ":\"feed_seq\",\"type\":\"long\",\"doc\":\"Last applied stock feed sequence number.\"},{\""
    "name\":\"committed_total\",\"type\":\"long\",\"default\":0,\"doc\":\"Units ever committe"
    "d (sold) at this pair; never decreases. The as-of point of a COUNT_AS_OF.\"},{\"name\":\""
    "feed_epoch\",\"type\":\"long\",\"default\":0,\"doc\":\"feed_epoch of the last applied st"
    "ock feed.\"}]}";

/* StockLevel v2, before the escrow fields (allotted, escrow_balance;
 * defaulted 0). */
static const char stock_level_v2[] =
    "{\"type\":\"record\",\"name\":\"StockLevel\",\"namespace\":\"holdfast\",\"doc\":\"One (w"
    "arehouse, sku) counter after a change. Topic holdfast.stock-levels, key sku. available ="
    " max(0, on_hand - reserved - safety_stock).\",\"fields\":[{\"name\":\"warehouse_id\",\"t"
    "ype\":\"string\",\"doc\":\"Warehouse of the counter.\"},{\"name\":\"sku\",\"type\":\"str"
    "ing\",\"doc\":\"Stock keeping unit of the counter.\"},{\"name\":\"on_hand\",\"type\":\"l"
    "ong\",\"doc\":\"Units physically in the warehouse.\"},{\"name\":\"reserved\",\"type\":\""
    "long\",\"doc\":\"Units held by HELD and REVOKING holds.\"},{\"name\":\"safety_stock\",\""
    "type\":\"long\",\"doc\":\"Units kept back from new holds.\"},{\"name\":\"available\",\"t"
    "ype\":\"long\",\"doc\":\"Units a new hold may take, never negative.\"},{\"name\":\"short"
    "fall\",\"type\":\"long\",\"default\":0,\"doc\":\"Units still reserved by revoked holds; "
    "> 0 while a stock shortfall is being resolved.\"},{\"name\":\"version\",\"type\":\"long\""
    ",\"doc\":\"Counter version, bumped on every change.\"},{\"name\":\"updated_at_ms\",\"typ"
    "e\":\"long\",\"doc\":\"When the counter changed, Unix epoch milliseconds.\"},{\"name\":\""
    "committed_total\",\"type\":\"long\",\"default\":0,\"doc\":\"Units ever committed at this"
    " pair: what a cycle count echoes as as_of_committed.\"},{\"name\":\"feed_seq\",\"type\":"
    "\"long\",\"default\":0,\"doc\":\"Last applied stock feed sequence number.\"},{\"name\":\""
    "feed_epoch\",\"type\":\"long\",\"default\":0,\"doc\":\"Its feed_epoch.\"}]}";

/* ReservationState v4, before HoldRef.escrow (defaulted false): every hold
 * was a counter hold. */
static const char reservation_state_v4[] =
    "{\"type\":\"record\",\"name\":\"ReservationState\",\"namespace\":\"holdfast\",\"doc\":\""
    "One reservation as the gateway stores it (RocksDB and changelog), keyed by reservation_i"
    "d: its saga, allocations and timers.\",\"fields\":[{\"name\":\"reservation_id\",\"type\""
    ":\"string\",\"doc\":\"The reservation.\"},{\"name\":\"idempotency_key\",\"type\":\"strin"
    "g\",\"doc\":\"Idempotency key of the Reserve that created it.\"},{\"name\":\"status\",\""
    "type\":{\"type\":\"enum\",\"name\":\"ReservationStatus\",\"doc\":\"Where a reservation i"
    "s: PENDING (hold results awaited) -> HELD | REJECTED, then HELD -> COMMITTED | RELEASED "
    "| EXPIRED. Terminal states never move. State written before this was an enum holds the i"
    "ndex as an int. Append symbols only.\",\"symbols\":[\"PENDING\",\"HELD\",\"COMMITTED\",\""
    "RELEASED\",\"EXPIRED\",\"REJECTED\"]},\"doc\":\"Where the reservation is in its lifecycl"
    "e.\"},{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\""
    "name\":\"Line\",\"doc\":\"One requested SKU and quantity.\",\"fields\":[{\"name\":\"sku\""
    ",\"type\":\"string\",\"doc\":\"Stock keeping unit.\"},{\"name\":\"qty\",\"type\":\"long\""
    ",\"doc\":\"Units wanted, 1..1000000.\"}]}},\"doc\":\"The requested lines.\"},{\"name\":\""
    "ship_to\",\"type\":{\"type\":\"record\",\"name\":\"Geo\",\"doc\":\"A point on Earth, WGS"
    "84 degrees.\",\"fields\":[{\"name\":\"lat\",\"type\":\"double\",\"doc\":\"Latitude, degr"
    "ees.\"},{\"name\":\"lon\",\"type\":\"double\",\"doc\":\"Longitude, degrees.\"}]},\"doc\""
    ":\"Destination, for re-routing.\"},{\"name\":\"allocations\",\"type\":{\"type\":\"array\""
    ",\"items\":{\"type\":\"record\",\"name\":\"HoldRef\",\"doc\":\"One hold the gateway aske"
    "d a counter for.\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\",\"doc\":\""
    "Warehouse of the hold.\"},{\"name\":\"sku\",\"type\":\"string\",\"doc\":\"Stock keeping "
    "unit.\"},{\"name\":\"qty\",\"type\":\"long\",\"doc\":\"Units asked for.\"},{\"name\":\"a"
    "ttempt\",\"type\":\"int\",\"doc\":\"Routing round that issued it; with the reservation, "
    "warehouse and sku it names the hold at its counter.\"},{\"name\":\"status\",\"type\":{\""
    "type\":\"enum\",\"name\":\"HoldRefStatus\",\"doc\":\"What the gateway knows of the hold:"
    " HOLD_SENT (no result yet), HELD (the counter reserved it), REFUSED (INSUFFICIENT, nothi"
    "ng reserved), RELEASE_SENT (ReleaseHold emitted). HELD and REFUSED mean what the counter"
    "'s HoldStatus symbols mean. State written before this was an enum holds the index as an "
    "int. Append symbols only.\",\"symbols\":[\"HOLD_SENT\",\"HELD\",\"REFUSED\",\"RELEASE_SE"
    "NT\"]},\"doc\":\"Where the hold is, as the gateway knows it.\"},{\"name\":\"available_se"
    "en\",\"type\":\"long\",\"default\":0,\"doc\":\"Available units the counter reported with"
    " its answer.\"}]}},\"doc\":\"Holds of the reservation; the HELD answer lists those with "
    "status HELD.\"},{\"name\":\"next_attempt\",\"type\":\"int\",\"doc\":\"Attempt number of "
    "the next routing round.\"},{\"name\":\"reroutes\",\"type\":\"int\",\"doc\":\"Routing rou"
    "nds after the first.\"},{\"name\":\"request_hash\",\"type\":\"long\",\"doc\":\"Hash of w"
    "hat the Reserve asks for (gw_request_hash: its meaningful fields, not its encoding).\"},"
    "{\"name\":\"reply_to\",\"type\":\"string\",\"doc\":\"Topic the Reserve asked replies on."
    "\"},{\"name\":\"campaign\",\"type\":\"string\",\"default\":\"\",\"doc\":\"Campaign id of"
    " the Reserve.\"},{\"name\":\"payment_id\",\"type\":\"string\",\"default\":\"\",\"doc\":\""
    "The payment that committed it.\"},{\"name\":\"reason\",\"type\":\"string\",\"default\":\""
    "\",\"doc\":\"Why it was released, expired or rejected.\"},{\"name\":\"created_at_ms\",\""
    "type\":\"long\",\"doc\":\"When the Reserve was applied, Unix epoch milliseconds.\"},{\"n"
    "ame\":\"expires_at_ms\",\"type\":\"long\",\"doc\":\"When the holds lapse, Unix epoch mil"
    "liseconds (absolute, computed once).\"},{\"name\":\"hold_deadline_ms\",\"type\":\"long\""
    ",\"doc\":\"Latest expires_at_ms an extension may reach, Unix epoch milliseconds.\"},{\"n"
    "ame\":\"result_deadline_ms\",\"type\":\"long\",\"doc\":\"When unanswered holds are asked"
    " again, Unix epoch milliseconds; 0 when none is awaited.\"},{\"name\":\"result_retries\""
    ",\"type\":\"int\",\"doc\":\"How often unanswered holds were asked again in this round.\""
    "},{\"name\":\"updated_at_ms\",\"type\":\"long\",\"doc\":\"When it last changed, Unix epo"
    "ch milliseconds.\"},{\"name\":\"rebook\",\"type\":{\"type\":\"enum\",\"name\":\"Rebook\""
    ",\"doc\":\"Re-reservation for a payment that came after expiry: NONE, PENDING (hold resu"
    "lts awaited), COMMITTED (the payment bought the lines again), REFUNDED (stock did not al"
    "low; the payment is flagged). State written before this was an enum holds the index as a"
    "n int. Append symbols only.\",\"symbols\":[\"NONE\",\"PENDING\",\"COMMITTED\",\"REFUNDED"
    "\"]},\"default\":\"NONE\",\"doc\":\"Re-reservation for a payment that came after expiry "
    "(late_payment_policy rereserve). The reservation itself stays EXPIRED.\"},{\"name\":\"re"
    "book_idempotency_key\",\"type\":\"string\",\"default\":\"\",\"doc\":\"Idempotency key of"
    " the late Commit being answered by the re-reservation.\"},{\"name\":\"rebook_request_has"
    "h\",\"type\":\"long\",\"default\":0,\"doc\":\"Hash of what that Commit asks for (gw_requ"
    "est_hash).\"},{\"name\":\"rebook_reply_to\",\"type\":\"string\",\"default\":\"\",\"doc\""
    ":\"Topic that Commit asked replies on.\"},{\"name\":\"reserve_replied\",\"type\":\"boole"
    "an\",\"default\":false,\"doc\":\"True once the Reserve has been answered: reserve_reply "
    "holds the answer. False while PENDING, and in state written before the answer moved here"
    " (its answer is then in an IdempotencyRecord).\"},{\"name\":\"reserve_reply\",\"type\":{"
    "\"type\":\"record\",\"name\":\"Reply\",\"doc\":\"What a checkout client is told about it"
    "s request.\",\"fields\":[{\"name\":\"reservation_id\",\"type\":\"string\",\"doc\":\"The "
    "reservation answered.\"},{\"name\":\"idempotency_key\",\"type\":\"string\",\"doc\":\"Ide"
    "mpotency key of the request answered.\"},{\"name\":\"outcome\",\"type\":{\"type\":\"enum"
    "\",\"name\":\"ReplyOutcome\",\"doc\":\"What a checkout client is told. Append symbols on"
    "ly.\",\"symbols\":[\"HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\",\"REJECTED_INSUFFICIE"
    "NT\",\"REJECTED_INVALID\",\"CONFLICT\",\"NOT_FOUND\",\"BUSY\"]},\"doc\":\"The answer.\"}"
    ",{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\""
    "name\":\"Allocation\",\"doc\":\"Units of one SKU held at one warehouse.\",\"fields\":[{\""
    "name\":\"warehouse_id\",\"type\":\"string\",\"doc\":\"Warehouse holding the units.\"},{\""
    "name\":\"sku\",\"type\":\"string\",\"doc\":\"Stock keeping unit.\"},{\"name\":\"qty\",\""
    "type\":\"long\",\"doc\":\"Units held there.\"}]}},\"doc\":\"Where the stock is held; emp"
    "ty unless HELD or COMMITTED.\"},{\"name\":\"expires_at_ms\",\"type\":\"long\",\"default\""
    ":0,\"doc\":\"When the holds lapse, Unix epoch milliseconds; 0 when not held.\"},{\"name\""
    ":\"message\",\"type\":\"string\",\"default\":\"\",\"doc\":\"Human-readable detail.\"},{\""
    "name\":\"replied_at_ms\",\"type\":\"long\",\"doc\":\"When the gateway answered, Unix epo"
    "ch milliseconds.\"}]},\"default\":{\"reservation_id\":\"\",\"idempotency_key\":\"\",\"ou"
    "tcome\":\"HELD\",\"allocations\":[],\"expires_at_ms\":0,\"message\":\"\",\"replied_at_ms"
    "\":0},\"doc\":\"The Reserve's first answer, re-emitted as it was to a retry of the Reser"
    "ve (same key and body) for as long as the reservation is kept, whatever it became since."
    " Stored with reservation_id and idempotency_key empty: they are this record's own.\"}]}";

/* Availability v1, before WarehouseAvailable.escrow (defaulted 0). */
static const char availability_v1[] =
    "{\"type\":\"record\",\"name\":\"Availability\",\"namespace\":\"holdfast\",\"doc\":\"The "
    "routing view of one SKU across the network. Topic holdfast.availability (compacted), key"
    " sku.\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\",\"doc\":\"Stock keeping unit.\""
    "},{\"name\":\"warehouses\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\""
    "name\":\"WarehouseAvailable\",\"doc\":\"Available units of the SKU at one warehouse.\",\""
    "fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\",\"doc\":\"Warehouse.\"},{\"name"
    "\":\"available\",\"type\":\"long\",\"doc\":\"Units a new hold may take there.\"}]}},\"do"
    "c\":\"Warehouses with their available units, up to 64.\"},{\"name\":\"total\",\"type\":\""
    "long\",\"doc\":\"Network-wide available units.\"},{\"name\":\"in_stock\",\"type\":\"bool"
    "ean\",\"doc\":\"Debounced in-stock flag (hysteresis around the sold-out watermark).\"},{"
    "\"name\":\"updated_at_ms\",\"type\":\"long\",\"doc\":\"When the view changed, Unix epoch"
    " milliseconds.\"}]}";

/* SkuState v1, before WarehouseAvailable.escrow (defaulted 0). */
static const char sku_state_v1[] =
    "{\"type\":\"record\",\"name\":\"SkuState\",\"namespace\":\"holdfast\",\"doc\":\"The aggr"
    "egator's state of one SKU: per-warehouse available, the network total and the debounced "
    "sold-out state. RocksDB value and changelog value (holdfast.aggregator-changelog), key S"
    "<sku>.\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\",\"doc\":\"Stock keeping unit."
    "\"},{\"name\":\"warehouses\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\""
    ",\"name\":\"WarehouseAvailable\",\"doc\":\"Available units of the SKU at one warehouse.\""
    ",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\",\"doc\":\"Warehouse.\"},{\"n"
    "ame\":\"available\",\"type\":\"long\",\"doc\":\"Units a new hold may take there.\"}]}},\""
    "doc\":\"Warehouses that reported the SKU, up to 64.\"},{\"name\":\"total\",\"type\":\"lo"
    "ng\",\"doc\":\"Network-wide available units.\"},{\"name\":\"in_stock\",\"type\":\"boolea"
    "n\",\"doc\":\"Debounced state, as last signalled.\"},{\"name\":\"low_since_ms\",\"type\""
    ":\"long\",\"default\":0,\"doc\":\"Since when the total has been at or below the low wate"
    "rmark, epoch ms; 0 when it is not.\"},{\"name\":\"changed_at_ms\",\"type\":\"long\",\"de"
    "fault\":0,\"doc\":\"When in_stock last changed, epoch ms.\"},{\"name\":\"updated_at_ms\""
    ",\"type\":\"long\",\"doc\":\"Last update, epoch ms.\"}]}";

/* CounterResult v1, before escrow_balance (default -1: not reported) was added. */
static const char counter_result_v1[] =
    "{\"type\":\"record\",\"name\":\"CounterResult\",\"namespace\":\"holdfast\",\"fields\":["
    "{\"name\":\"reservation_id\",\"type\":\"string\"},"
    "{\"name\":\"attempt\",\"type\":\"int\"},"
    "{\"name\":\"warehouse_id\",\"type\":\"string\"},"
    "{\"name\":\"sku\",\"type\":\"string\"},"
    "{\"name\":\"command\",\"type\":{\"type\":\"enum\",\"name\":\"CounterCommand\","
    "\"symbols\":[\"HOLD\",\"COMMIT\",\"RELEASE\",\"SHORTFALL\"]}},"
    "{\"name\":\"outcome\",\"type\":{\"type\":\"enum\",\"name\":\"Outcome\",\"symbols\":["
    "\"OK\",\"INSUFFICIENT\",\"EXISTS\",\"CONFLICT\",\"EXPIRED\",\"NOT_FOUND\",\"INVALID\","
    "\"REVOKED\"]}},"
    "{\"name\":\"qty\",\"type\":\"long\"},"
    "{\"name\":\"available\",\"type\":\"long\"},"
    "{\"name\":\"applied_at_ms\",\"type\":\"long\"}]}";

/* Hold v2, before the counter could answer a Reserve itself (answer_reserve,
 * idempotency_key, reply_to, expires_at_ms; all defaulted): Holds in flight
 * across the upgrade stay readable and are answered as before, by the gateway. */
static const char hold_v2[] =
    "{\"type\":\"record\",\"name\":\"Hold\",\"namespace\":\"holdfast\",\"fields\":[{\"name\":"
    "\"reservation_id\",\"type\":\"string\"},{\"name\":\"attempt\",\"type\":\"int\"},{\"name\""
    ":\"warehouse_id\",\"type\":\"string\"},{\"name\":\"sku\",\"type\":\"string\"},{\"name\":"
    "\"qty\",\"type\":\"long\"},{\"name\":\"issued_at_ms\",\"type\":\"long\",\"default\":0}]}";

/* ReservationState v5, before counter_answers (default false): reservations
 * stored before the upgrade were answered by their gateway. */
static const char reservation_state_v5[] =
    "{\"type\":\"record\",\"name\":\"ReservationState\",\"namespace\":\"holdfast\",\"fields\""
    ":[{\"name\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"idempotency_key\",\"type"
    "\":\"string\"},{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\"ReservationSt"
    "atus\",\"symbols\":[\"PENDING\",\"HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\",\"REJECT"
    "ED\"]}},{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
    "\"name\":\"Line\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\""
    "type\":\"long\"}]}}},{\"name\":\"ship_to\",\"type\":{\"type\":\"record\",\"name\":\"Geo\""
    ",\"fields\":[{\"name\":\"lat\",\"type\":\"double\"},{\"name\":\"lon\",\"type\":\"double\""
    "}]}},{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record"
    "\",\"name\":\"HoldRef\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},{\"n"
    "ame\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"},{\"name\":\"atte"
    "mpt\",\"type\":\"int\"},{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\"Hold"
    "RefStatus\",\"symbols\":[\"HOLD_SENT\",\"HELD\",\"REFUSED\",\"RELEASE_SENT\"]}},{\"name\""
    ":\"available_seen\",\"type\":\"long\",\"default\":0},{\"name\":\"escrow\",\"type\":\"boo"
    "lean\",\"default\":false}]}}},{\"name\":\"next_attempt\",\"type\":\"int\"},{\"name\":\"r"
    "eroutes\",\"type\":\"int\"},{\"name\":\"request_hash\",\"type\":\"long\"},{\"name\":\"re"
    "ply_to\",\"type\":\"string\"},{\"name\":\"campaign\",\"type\":\"string\",\"default\":\"\""
    "},{\"name\":\"payment_id\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"reason\",\""
    "type\":\"string\",\"default\":\"\"},{\"name\":\"created_at_ms\",\"type\":\"long\"},{\"na"
    "me\":\"expires_at_ms\",\"type\":\"long\"},{\"name\":\"hold_deadline_ms\",\"type\":\"long"
    "\"},{\"name\":\"result_deadline_ms\",\"type\":\"long\"},{\"name\":\"result_retries\",\"t"
    "ype\":\"int\"},{\"name\":\"updated_at_ms\",\"type\":\"long\"},{\"name\":\"rebook\",\"typ"
    "e\":{\"type\":\"enum\",\"name\":\"Rebook\",\"symbols\":[\"NONE\",\"PENDING\",\"COMMITTED"
    "\",\"REFUNDED\"]},\"default\":\"NONE\"},{\"name\":\"rebook_idempotency_key\",\"type\":\""
    "string\",\"default\":\"\"},{\"name\":\"rebook_request_hash\",\"type\":\"long\",\"default"
    "\":0},{\"name\":\"rebook_reply_to\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"re"
    "serve_replied\",\"type\":\"boolean\",\"default\":false},{\"name\":\"reserve_reply\",\"ty"
    "pe\":{\"type\":\"record\",\"name\":\"Reply\",\"fields\":[{\"name\":\"reservation_id\",\""
    "type\":\"string\"},{\"name\":\"idempotency_key\",\"type\":\"string\"},{\"name\":\"outcom"
    "e\",\"type\":{\"type\":\"enum\",\"name\":\"ReplyOutcome\",\"symbols\":[\"HELD\",\"COMMIT"
    "TED\",\"RELEASED\",\"EXPIRED\",\"REJECTED_INSUFFICIENT\",\"REJECTED_INVALID\",\"CONFLICT"
    "\",\"NOT_FOUND\",\"BUSY\"]}},{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"it"
    "ems\":{\"type\":\"record\",\"name\":\"Allocation\",\"fields\":[{\"name\":\"warehouse_id\""
    ",\"type\":\"string\"},{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":"
    "\"long\"}]}}},{\"name\":\"expires_at_ms\",\"type\":\"long\",\"default\":0},{\"name\":\"m"
    "essage\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"replied_at_ms\",\"type\":\"lo"
    "ng\"}]},\"default\":{\"reservation_id\":\"\",\"idempotency_key\":\"\",\"outcome\":\"HELD"
    "\",\"allocations\":[],\"expires_at_ms\":0,\"message\":\"\",\"replied_at_ms\":0}}]}";

/* Hold v3, before api_key_id (default ""): Holds in flight across the upgrade
 * answer their Reserve with a HELD event that names no key. */
static const char hold_v3[] =
    "{\"type\":\"record\",\"name\":\"Hold\",\"namespace\":\"holdfast\",\"fields\":[{\"name\""
    ":\"reservation_id\",\"type\":\"string\"},{\"name\":\"attempt\",\"type\":\"int\"},{\"na"
    "me\":\"warehouse_id\",\"type\":\"string\"},{\"name\":\"sku\",\"type\":\"string\"},{\"n"
    "ame\":\"qty\",\"type\":\"long\"},{\"name\":\"issued_at_ms\",\"type\":\"long\",\"defaul"
    "t\":0},{\"name\":\"answer_reserve\",\"type\":\"boolean\",\"default\":false},{\"name\":"
    "\"idempotency_key\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"reply_to\",\"typ"
    "e\":\"string\",\"default\":\"\"},{\"name\":\"expires_at_ms\",\"type\":\"long\",\"defau"
    "lt\":0}]}";

/* Reserve v1, before api_key_id (default "": no key): requests written by an
 * older front or client stay readable. */
static const char reserve_v1[] =
    "{\"type\":\"record\",\"name\":\"Reserve\",\"namespace\":\"holdfast\",\"fields\":[{\"na"
    "me\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"idempotency_key\",\"type\":\""
    "string\"},{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"recor"
    "d\",\"name\":\"Line\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"q"
    "ty\",\"type\":\"long\"}]}}},{\"name\":\"ship_to\",\"type\":{\"type\":\"record\",\"name"
    "\":\"Geo\",\"fields\":[{\"name\":\"lat\",\"type\":\"double\"},{\"name\":\"lon\",\"type"
    "\":\"double\"}]}},{\"name\":\"ttl_ms\",\"type\":\"long\",\"default\":0},{\"name\":\"ca"
    "mpaign\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"reply_to\",\"type\":\"strin"
    "g\",\"default\":\"\"},{\"name\":\"sent_at_ms\",\"type\":\"long\"}]}";

/* ReservationState v6, before api_key_id (default ""): reservations stored
 * before the upgrade name no key in their later ledger events. */
static const char reservation_state_v6[] =
    "{\"type\":\"record\",\"name\":\"ReservationState\",\"namespace\":\"holdfast\",\"fields"
    "\":[{\"name\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"idempotency_key\",\""
    "type\":\"string\"},{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\"Reserva"
    "tionStatus\",\"symbols\":[\"PENDING\",\"HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\","
    "\"REJECTED\"]}},{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\""
    "record\",\"name\":\"Line\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\""
    ":\"qty\",\"type\":\"long\"}]}}},{\"name\":\"ship_to\",\"type\":{\"type\":\"record\",\""
    "name\":\"Geo\",\"fields\":[{\"name\":\"lat\",\"type\":\"double\"},{\"name\":\"lon\",\""
    "type\":\"double\"}]}},{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\""
    ":{\"type\":\"record\",\"name\":\"HoldRef\",\"fields\":[{\"name\":\"warehouse_id\",\"ty"
    "pe\":\"string\"},{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"l"
    "ong\"},{\"name\":\"attempt\",\"type\":\"int\"},{\"name\":\"status\",\"type\":{\"type\""
    ":\"enum\",\"name\":\"HoldRefStatus\",\"symbols\":[\"HOLD_SENT\",\"HELD\",\"REFUSED\",\""
    "RELEASE_SENT\"]}},{\"name\":\"available_seen\",\"type\":\"long\",\"default\":0},{\"nam"
    "e\":\"escrow\",\"type\":\"boolean\",\"default\":false}]}}},{\"name\":\"next_attempt\","
    "\"type\":\"int\"},{\"name\":\"reroutes\",\"type\":\"int\"},{\"name\":\"request_hash\","
    "\"type\":\"long\"},{\"name\":\"reply_to\",\"type\":\"string\"},{\"name\":\"campaign\","
    "\"type\":\"string\",\"default\":\"\"},{\"name\":\"payment_id\",\"type\":\"string\",\"d"
    "efault\":\"\"},{\"name\":\"reason\",\"type\":\"string\",\"default\":\"\"},{\"name\":\""
    "created_at_ms\",\"type\":\"long\"},{\"name\":\"expires_at_ms\",\"type\":\"long\"},{\"n"
    "ame\":\"hold_deadline_ms\",\"type\":\"long\"},{\"name\":\"result_deadline_ms\",\"type\""
    ":\"long\"},{\"name\":\"result_retries\",\"type\":\"int\"},{\"name\":\"updated_at_ms\","
    "\"type\":\"long\"},{\"name\":\"rebook\",\"type\":{\"type\":\"enum\",\"name\":\"Rebook\""
    ",\"symbols\":[\"NONE\",\"PENDING\",\"COMMITTED\",\"REFUNDED\"]},\"default\":\"NONE\"},"
    "{\"name\":\"rebook_idempotency_key\",\"type\":\"string\",\"default\":\"\"},{\"name\":\""
    "rebook_request_hash\",\"type\":\"long\",\"default\":0},{\"name\":\"rebook_reply_to\",\""
    "type\":\"string\",\"default\":\"\"},{\"name\":\"reserve_replied\",\"type\":\"boolean\""
    ",\"default\":false},{\"name\":\"reserve_reply\",\"type\":{\"type\":\"record\",\"name\""
    ":\"Reply\",\"fields\":[{\"name\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"i"
    "dempotency_key\",\"type\":\"string\"},{\"name\":\"outcome\",\"type\":{\"type\":\"enum\""
    ",\"name\":\"ReplyOutcome\",\"symbols\":[\"HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\""
    ",\"REJECTED_INSUFFICIENT\",\"REJECTED_INVALID\",\"CONFLICT\",\"NOT_FOUND\",\"BUSY\"]}}"
    ",{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\""
    ",\"name\":\"Allocation\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},{"
    "\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"}]}}},{\"name"
    "\":\"expires_at_ms\",\"type\":\"long\",\"default\":0},{\"name\":\"message\",\"type\":\""
    "string\",\"default\":\"\"},{\"name\":\"replied_at_ms\",\"type\":\"long\"}]},\"default\""
    ":{\"reservation_id\":\"\",\"idempotency_key\":\"\",\"outcome\":\"HELD\",\"allocations\""
    ":[],\"expires_at_ms\":0,\"message\":\"\",\"replied_at_ms\":0}},{\"name\":\"counter_ans"
    "wers\",\"type\":\"boolean\",\"default\":false}]}";

/* LedgerEvent v1, before api_key_id (default ""): the ledger written before the
 * upgrade reads as made by no key. */
static const char ledger_event_v1[] =
    "{\"type\":\"record\",\"name\":\"LedgerEvent\",\"namespace\":\"holdfast\",\"fields\":[{"
    "\"name\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"kind\",\"type\":{\"type\""
    ":\"enum\",\"name\":\"LedgerKind\",\"symbols\":[\"HELD\",\"COMMITTED\",\"RELEASED\",\"E"
    "XPIRED\",\"REJECTED\",\"LATE_PAYMENT\"]}},{\"name\":\"allocations\",\"type\":{\"type\""
    ":\"array\",\"items\":{\"type\":\"record\",\"name\":\"Allocation\",\"fields\":[{\"name\""
    ":\"warehouse_id\",\"type\":\"string\"},{\"name\":\"sku\",\"type\":\"string\"},{\"name\""
    ":\"qty\",\"type\":\"long\"}]}},\"default\":[]},{\"name\":\"lines\",\"type\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"record\",\"name\":\"Line\",\"fields\":[{\"name\":\"sku"
    "\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"}]}},\"default\":[]},{\"nam"
    "e\":\"reason\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"payment_id\",\"type\""
    ":\"string\",\"default\":\"\"},{\"name\":\"expires_at_ms\",\"type\":\"long\",\"default\""
    ":0},{\"name\":\"at_ms\",\"type\":\"long\"}]}";

/* Hold v4, before requested_at_ms (default 0): a Hold in flight across the
 * upgrade answers its Reserve with the latency counted from issued_at_ms. */
static const char hold_v4[] =
    "{\"type\":\"record\",\"name\":\"Hold\",\"namespace\":\"holdfast\",\"fields\":[{\"n"
    "ame\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"attempt\",\"type\":\"int"
    "\"},{\"name\":\"warehouse_id\",\"type\":\"string\"},{\"name\":\"sku\",\"type\":\"s"
    "tring\"},{\"name\":\"qty\",\"type\":\"long\"},{\"name\":\"issued_at_ms\",\"type\":"
    "\"long\",\"default\":0},{\"name\":\"answer_reserve\",\"type\":\"boolean\",\"defaul"
    "t\":false},{\"name\":\"idempotency_key\",\"type\":\"string\",\"default\":\"\"},{\""
    "name\":\"reply_to\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"expires_at_m"
    "s\",\"type\":\"long\",\"default\":0},{\"name\":\"api_key_id\",\"type\":\"string\","
    "\"default\":\"\"}]}";

/* ReservationState v7, before requested_at_ms (default 0): a reservation stored
 * before the upgrade times a later answer to its Reserve from created_at_ms. */
static const char reservation_state_v7[] =
    "{\"type\":\"record\",\"name\":\"ReservationState\",\"namespace\":\"holdfast\",\"fi"
    "elds\":[{\"name\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"idempotency_"
    "key\",\"type\":\"string\"},{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name"
    "\":\"ReservationStatus\",\"symbols\":[\"PENDING\",\"HELD\",\"COMMITTED\",\"RELEASE"
    "D\",\"EXPIRED\",\"REJECTED\"]}},{\"name\":\"lines\",\"type\":{\"type\":\"array\","
    "\"items\":{\"type\":\"record\",\"name\":\"Line\",\"fields\":[{\"name\":\"sku\",\"t"
    "ype\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"}]}}},{\"name\":\"ship_to\","
    "\"type\":{\"type\":\"record\",\"name\":\"Geo\",\"fields\":[{\"name\":\"lat\",\"typ"
    "e\":\"double\"},{\"name\":\"lon\",\"type\":\"double\"}]}},{\"name\":\"allocations"
    "\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"HoldRef"
    "\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},{\"name\":\"sku\","
    "\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"},{\"name\":\"attempt\",\""
    "type\":\"int\"},{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\"HoldRe"
    "fStatus\",\"symbols\":[\"HOLD_SENT\",\"HELD\",\"REFUSED\",\"RELEASE_SENT\"]}},{\"n"
    "ame\":\"available_seen\",\"type\":\"long\",\"default\":0},{\"name\":\"escrow\",\"t"
    "ype\":\"boolean\",\"default\":false}]}}},{\"name\":\"next_attempt\",\"type\":\"int"
    "\"},{\"name\":\"reroutes\",\"type\":\"int\"},{\"name\":\"request_hash\",\"type\":"
    "\"long\"},{\"name\":\"reply_to\",\"type\":\"string\"},{\"name\":\"campaign\",\"typ"
    "e\":\"string\",\"default\":\"\"},{\"name\":\"payment_id\",\"type\":\"string\",\"de"
    "fault\":\"\"},{\"name\":\"reason\",\"type\":\"string\",\"default\":\"\"},{\"name\""
    ":\"created_at_ms\",\"type\":\"long\"},{\"name\":\"expires_at_ms\",\"type\":\"long"
    "\"},{\"name\":\"hold_deadline_ms\",\"type\":\"long\"},{\"name\":\"result_deadline_"
    "ms\",\"type\":\"long\"},{\"name\":\"result_retries\",\"type\":\"int\"},{\"name\":"
    "\"updated_at_ms\",\"type\":\"long\"},{\"name\":\"rebook\",\"type\":{\"type\":\"enu"
    "m\",\"name\":\"Rebook\",\"symbols\":[\"NONE\",\"PENDING\",\"COMMITTED\",\"REFUNDED"
    "\"]},\"default\":\"NONE\"},{\"name\":\"rebook_idempotency_key\",\"type\":\"string"
    "\",\"default\":\"\"},{\"name\":\"rebook_request_hash\",\"type\":\"long\",\"default"
    "\":0},{\"name\":\"rebook_reply_to\",\"type\":\"string\",\"default\":\"\"},{\"name"
    "\":\"reserve_replied\",\"type\":\"boolean\",\"default\":false},{\"name\":\"reserve"
    "_reply\",\"type\":{\"type\":\"record\",\"name\":\"Reply\",\"fields\":[{\"name\":\""
    "reservation_id\",\"type\":\"string\"},{\"name\":\"idempotency_key\",\"type\":\"str"
    "ing\"},{\"name\":\"outcome\",\"type\":{\"type\":\"enum\",\"name\":\"ReplyOutcome\""
    ",\"symbols\":[\"HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\",\"REJECTED_INSUFFICI"
    "ENT\",\"REJECTED_INVALID\",\"CONFLICT\",\"NOT_FOUND\",\"BUSY\"]}},{\"name\":\"allo"
    "cations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"A"
    "llocation\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},{\"name\":"
    "\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"}]}}},{\"name\":\""
    "expires_at_ms\",\"type\":\"long\",\"default\":0},{\"name\":\"message\",\"type\":\""
    "string\",\"default\":\"\"},{\"name\":\"replied_at_ms\",\"type\":\"long\"}]},\"defa"
    "ult\":{\"reservation_id\":\"\",\"idempotency_key\":\"\",\"outcome\":\"HELD\",\"all"
    "ocations\":[],\"expires_at_ms\":0,\"message\":\"\",\"replied_at_ms\":0}},{\"name\""
    ":\"counter_answers\",\"type\":\"boolean\",\"default\":false},{\"name\":\"api_key_i"
    "d\",\"type\":\"string\",\"default\":\"\"}]}";

/* Reserve v2, before only_warehouses (default []: anywhere): requests written
 * by clients built before pick-up at a store. */
static const char reserve_v2[] =
    "{\"type\":\"record\",\"name\":\"Reserve\",\"namespace\":\"holdfast\",\"fields\":[{\"name"
    "\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"idempotency_key\",\"type\":\"stri"
    "ng\"},{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\""
    "name\":\"Line\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"t"
    "ype\":\"long\"}]}}},{\"name\":\"ship_to\",\"type\":{\"type\":\"record\",\"name\":\"Geo\""
    ",\"fields\":[{\"name\":\"lat\",\"type\":\"double\"},{\"name\":\"lon\",\"type\":\"double"
    "\"}]}},{\"name\":\"ttl_ms\",\"type\":\"long\",\"default\":0},{\"name\":\"campaign\",\"ty"
    "pe\":\"string\",\"default\":\"\"},{\"name\":\"reply_to\",\"type\":\"string\",\"default\""
    ":\"\"},{\"name\":\"sent_at_ms\",\"type\":\"long\"},{\"name\":\"api_key_id\",\"type\":\"s"
    "tring\",\"default\":\"\"}]}";

/* ReservationState v8, before only_warehouses (default []): reservations
 * stored before pick-up at a store, which may be held anywhere. */
static const char reservation_state_v8[] =
    "{\"type\":\"record\",\"name\":\"ReservationState\",\"namespace\":\"holdfast\",\"fields\""
    ":[{\"name\":\"reservation_id\",\"type\":\"string\"},{\"name\":\"idempotency_key\",\"type"
    "\":\"string\"},{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\"ReservationSt"
    "atus\",\"symbols\":[\"PENDING\",\"HELD\",\"COMMITTED\",\"RELEASED\",\"EXPIRED\",\"REJECT"
    "ED\"]}},{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
    "\"name\":\"Line\",\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\","
    "\"type\":\"long\"}]}}},{\"name\":\"ship_to\",\"type\":{\"type\":\"record\",\"name\":\"Ge"
    "o\",\"fields\":[{\"name\":\"lat\",\"type\":\"double\"},{\"name\":\"lon\",\"type\":\"doub"
    "le\"}]}},{\"name\":\"allocations\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"re"
    "cord\",\"name\":\"HoldRef\",\"fields\":[{\"name\":\"warehouse_id\",\"type\":\"string\"},"
    "{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"long\"},{\"name\":\""
    "attempt\",\"type\":\"int\"},{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\""
    "HoldRefStatus\",\"symbols\":[\"HOLD_SENT\",\"HELD\",\"REFUSED\",\"RELEASE_SENT\"]}},{\"n"
    "ame\":\"available_seen\",\"type\":\"long\",\"default\":0},{\"name\":\"escrow\",\"type\":"
    "\"boolean\",\"default\":false}]}}},{\"name\":\"next_attempt\",\"type\":\"int\"},{\"name"
    "\":\"reroutes\",\"type\":\"int\"},{\"name\":\"request_hash\",\"type\":\"long\"},{\"name"
    "\":\"reply_to\",\"type\":\"string\"},{\"name\":\"campaign\",\"type\":\"string\",\"defaul"
    "t\":\"\"},{\"name\":\"payment_id\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"rea"
    "son\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"created_at_ms\",\"type\":\"long"
    "\"},{\"name\":\"expires_at_ms\",\"type\":\"long\"},{\"name\":\"hold_deadline_ms\",\"type"
    "\":\"long\"},{\"name\":\"result_deadline_ms\",\"type\":\"long\"},{\"name\":\"result_retr"
    "ies\",\"type\":\"int\"},{\"name\":\"updated_at_ms\",\"type\":\"long\"},{\"name\":\"reboo"
    "k\",\"type\":{\"type\":\"enum\",\"name\":\"Rebook\",\"symbols\":[\"NONE\",\"PENDING\",\""
    "COMMITTED\",\"REFUNDED\"]},\"default\":\"NONE\"},{\"name\":\"rebook_idempotency_key\",\""
    "type\":\"string\",\"default\":\"\"},{\"name\":\"rebook_request_hash\",\"type\":\"long\","
    "\"default\":0},{\"name\":\"rebook_reply_to\",\"type\":\"string\",\"default\":\"\"},{\"na"
    "me\":\"reserve_replied\",\"type\":\"boolean\",\"default\":false},{\"name\":\"reserve_rep"
    "ly\",\"type\":{\"type\":\"record\",\"name\":\"Reply\",\"fields\":[{\"name\":\"reservatio"
    "n_id\",\"type\":\"string\"},{\"name\":\"idempotency_key\",\"type\":\"string\"},{\"name\""
    ":\"outcome\",\"type\":{\"type\":\"enum\",\"name\":\"ReplyOutcome\",\"symbols\":[\"HELD\""
    ",\"COMMITTED\",\"RELEASED\",\"EXPIRED\",\"REJECTED_INSUFFICIENT\",\"REJECTED_INVALID\","
    "\"CONFLICT\",\"NOT_FOUND\",\"BUSY\"]}},{\"name\":\"allocations\",\"type\":{\"type\":\"ar"
    "ray\",\"items\":{\"type\":\"record\",\"name\":\"Allocation\",\"fields\":[{\"name\":\"war"
    "ehouse_id\",\"type\":\"string\"},{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty"
    "\",\"type\":\"long\"}]}}},{\"name\":\"expires_at_ms\",\"type\":\"long\",\"default\":0},{"
    "\"name\":\"message\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"replied_at_ms\","
    "\"type\":\"long\"}]},\"default\":{\"reservation_id\":\"\",\"idempotency_key\":\"\",\"out"
    "come\":\"HELD\",\"allocations\":[],\"expires_at_ms\":0,\"message\":\"\",\"replied_at_ms"
    "\":0}},{\"name\":\"counter_answers\",\"type\":\"boolean\",\"default\":false},{\"name\":"
    "\"api_key_id\",\"type\":\"string\",\"default\":\"\"},{\"name\":\"requested_at_ms\",\"typ"
    "e\":\"long\",\"default\":0}]}";

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
    {HF_REC_COUNTER_STATE, counter_state_v2},
    {HF_REC_STOCK_LEVEL, stock_level_v2},
    {HF_REC_RESERVATION_STATE, reservation_state_v4},
    {HF_REC_AVAILABILITY, availability_v1},
    {HF_REC_SKU_STATE, sku_state_v1},
    {HF_REC_COUNTER_RESULT, counter_result_v1},
    {HF_REC_HOLD, hold_v2},
    {HF_REC_RESERVATION_STATE, reservation_state_v5},
    {HF_REC_HOLD, hold_v3},
    {HF_REC_RESERVE, reserve_v1},
    {HF_REC_RESERVATION_STATE, reservation_state_v6},
    {HF_REC_LEDGER_EVENT, ledger_event_v1},
    {HF_REC_HOLD, hold_v4},
    {HF_REC_RESERVATION_STATE, reservation_state_v7},
    {HF_REC_RESERVE, reserve_v2},
    {HF_REC_RESERVATION_STATE, reservation_state_v8},
};
const size_t codec_history_count = sizeof codec_history / sizeof codec_history[0];
