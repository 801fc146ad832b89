/* Every bound in holdfast, with its reason (in the spirit of SQLite's sqliteLimit.h).
 * Records are fixed-size C structs, so string and array bounds here are also the
 * wire limits: the codec rejects anything longer as invalid. */
#ifndef HF_LIMITS_H
#define HF_LIMITS_H

/* Identifiers. Retail ids (UUIDs, SKU codes, warehouse codes) fit easily. */
#define HF_ID_LEN_MAX        64  /* reservation_id, idempotency_key, payment_id */
#define HF_SKU_LEN_MAX       64  /* sku */
#define HF_WAREHOUSE_LEN_MAX 32  /* warehouse_id */
#define HF_TOPIC_LEN_MAX     128 /* reply_to, dead-letter source topic */
#define HF_TEXT_LEN_MAX      256 /* reasons and human-readable messages */

/* Request shape. A checkout with more than 32 distinct SKUs is a bulk order,
 * which goes through another channel. */
#define HF_LINES_MAX       32
/* One line can be split over at most 8 warehouses; allocations of a whole
 * reservation are bounded by lines x splits. */
#define HF_SPLITS_MAX      8
#define HF_ALLOCATIONS_MAX 64
/* The network has ~50 warehouses; availability vectors carry up to 64. */
#define HF_WAREHOUSES_MAX  64

/* Quantities: one line never asks for more than a million units; counters are
 * int64 and checked for overflow before arithmetic. */
#define HF_QTY_MAX        1000000LL
/* The most units one pair may count: a stock feed's quantity, an allotment
 * request's return, a reported allotment balance, a counter's figure in its
 * answers. Anything above is a broken or hostile record. */
#define HF_PAIR_UNITS_MAX (HF_QTY_MAX * 1000)

/* Stock feeds: how far one feed_seq may run ahead of the pair's last applied
 * one (within a feed_epoch; from 0 in a new epoch). A feed applied far ahead
 * would make every later report of the pair look old and freeze it silently;
 * a billion is decades of reports at one a second, so anything beyond is a
 * typo or another system's numbers, and is dead-lettered instead. */
#define HF_FEED_SEQ_JUMP_MAX 1000000000LL

/* A full state key: tag + warehouse + sku + reservation + attempt, with room. */
#define HF_STATE_KEY_LEN_MAX 256
/* A state value or encoded record; an Availability of 64 warehouses is ~3 KiB.
 * The largest is a ReservationState of 32 lines and 64 allocations with every
 * string at its bound, holding its Reserve's answer (64 allocations more):
 * ~19 KiB (test_codec.c encodes that worst case). */
#define HF_RECORD_LEN_MAX    32768

/* A full restore's bulk load (state/state_load.h): the bytes of one sorted run,
 * written as one table file. Larger runs mean fewer, larger files for RocksDB
 * to compact, at that much more memory during a restore. */
#define HF_STATE_LOAD_RUN_BYTES (64u << 20)

/* Input records, checked before decoding (processor/admit.c): a larger one is
 * dead-lettered with its first bytes. The largest legitimate input is a
 * Reserve of HF_LINES_MAX lines (under 4 KiB) or a StockLevel; every value a
 * stage stores or emits fits HF_RECORD_LEN_MAX anyway. A key is a
 * reservation_id, a sku or warehouse|sku. */
#define HF_INPUT_VALUE_BYTES_MAX 16384
#define HF_INPUT_KEY_BYTES_MAX   HF_STATE_KEY_LEN_MAX
/* hfctl tail: the raw bytes it prints of one key, header or undecodable value
 * (tools/lib/tail_json.h); the rest is counted, not printed. The largest input
 * holdfast admits, so whatever it would accept, and a dead letter's kept bytes,
 * print whole, while a 1 MB garbage value makes one bounded line. */
#define HF_TAIL_RAW_BYTES_MAX    HF_INPUT_VALUE_BYTES_MAX

/* Task loop: records per transaction. Larger batches amortise the commit (a
 * round trip to the transaction coordinator) but add latency under load. */
#define HF_BATCH_RECORDS_MAX      2000
/* Partitions one task may own. */
#define HF_PARTITIONS_MAX         256
/* Replicas of a holdfast topic (hfctl topics apply --replication-factor): a
 * replica beyond the fifth buys no durability a retailer's cluster needs and costs
 * every write another fetch; Kafka itself takes any int16. */
#define HF_REPLICATION_FACTOR_MAX 7
/* Retries of an abortable transaction before the task gives up and exits. */
#define HF_TXN_RETRIES_MAX        20

_Static_assert(HF_ALLOCATIONS_MAX >= HF_SPLITS_MAX, "one line's split must fit");
_Static_assert(HF_INPUT_VALUE_BYTES_MAX <= HF_RECORD_LEN_MAX, "an admitted input fits a record");
_Static_assert(HF_WAREHOUSES_MAX >= HF_SPLITS_MAX, "splits go to distinct warehouses");

/* Gateway saga. A reservation re-routes its missing quantity at most this many
 * times before it releases everything and rejects: each round costs two hops. */
#define HF_REROUTES_MAX                 3
/* Unanswered holds are asked again (same attempt: the counter dedups) at most
 * this many times before the reservation gives up and rolls back. */
#define HF_RESULT_RETRIES_MAX           5
/* Requests that wait for a counter's answer, per reservation (gateway park.c):
 * a Commit, a Release, an Extend and a retried Reserve; one more is told BUSY. */
#define HF_PARKED_MAX                   4
/* The gateway waits result_timeout_ms x (1 + 2 + ... + (1 + HF_RESULT_RETRIES_MAX))
 * for a Hold's result before rolling back: this factor times the timeout. */
#define HF_RESULT_WAIT_FACTOR           ((1 + HF_RESULT_RETRIES_MAX) * (2 + HF_RESULT_RETRIES_MAX) / 2)
/* Timers one sweep of one partition fires; the rest wait for the next tick. */
#define HF_SWEEP_TIMERS_MAX             2000
/* Counter hold retention sweep (counter_sweep.c): hold records examined per
 * partition per tick (once a second) — the first pass, then at least, at most —
 * and how long a settled hold is kept by default (1 h: long past any re-send). */
#define HF_HOLD_SWEEP_FIRST_PASS        256
#define HF_HOLD_SWEEP_SCAN_MIN          64
#define HF_HOLD_SWEEP_SCAN_MAX          16384
#define HF_HOLD_SWEEP_PASSES            4 /* per retention: a hold lives <= 1.25 x retention */
#define HF_HOLD_RETENTION_DEFAULT_MS    (3600 * 1000)
/* Campaigns with their own TTL in the configuration. */
#define HF_CAMPAIGNS_MAX                32
/* SKUs escrow_skus may pin to escrow (docs/ESCROW.md): a flash sale's doorbusters. */
#define HF_ESCROW_SKUS_MAX              64
/* Allotments one gateway tick looks at (idle returns, recalls owed, balance
 * reports); an allotment exists only for a pair served in escrow. */
#define HF_ESCROW_TICK_ALLOTMENTS_MAX   512
/* An AllotmentRequest unanswered this long no longer blocks the next one (a
 * dead-lettered request is never answered); a late answer still counts. */
#define HF_ESCROW_ASK_TIMEOUT_MS        5000
/* SKU x gateway partition entries the contention window tracks per process
 * (escrow_heat.c): the hottest stay, a cold one gives way. */
#define HF_ESCROW_HEAT_SLOTS_MAX        4096
#define HF_ESCROW_HEAT_PROBE_MAX        16
/* Pairs whose counter answer the gateway remembers (stock_hint.c), and the
 * probe run of its table. */
#define HF_STOCK_HINT_SLOTS_MAX         8192
#define HF_STOCK_HINT_PROBE_MAX         16
/* A balance change smaller than a minimum refill is reported (escrow, for the
 * routing view) at the latest after this long; a drained balance at once. */
#define HF_ESCROW_REPORT_MAX_MS         1000
/* A scarce SKU's balance unused this long goes back to the counter (escrow):
 * short, so its last units do not wait in a quiet partition. */
#define HF_ESCROW_DRAIN_IDLE_MS         500
/* A counter asks one holder for its unheld balance (for a starving holder) at
 * most this often: a burst of refusals must not become a burst of recalls. */
#define HF_ESCROW_REBALANCE_INTERVAL_MS 250
/* Warehouses a Reserve may restrict its lines to (only_warehouses): pick-up
 * names one store; a retailer's "these DCs only" a few. */
#define HF_ONLY_WAREHOUSES_MAX          8
_Static_assert(HF_WAREHOUSES_MAX <= 64, "a SKU's ship-from list is a 64-bit mask");
_Static_assert(HF_ONLY_WAREHOUSES_MAX <= HF_WAREHOUSES_MAX, "named among the warehouses");
/* Per-SKU ship-from lists (ship_from_file): SKUs with a list (twice a 2M
 * catalog) and the longest line (a SKU and 64 warehouse ids). */
#define HF_SHIP_FROM_SKUS_MAX        4000000
#define HF_SHIP_FROM_LINE_MAX        4096
/* TTL bounds a request may ask for. */
#define HF_TTL_MIN_MS                1000LL
#define HF_TTL_MAX_MS                (24LL * 3600 * 1000)
/* A payment event's reason (bytes): room left in a ledger reason for ours. */
#define HF_PAYMENT_REASON_LEN_MAX    200
/* The longest a pending payment may keep a hold, from the reservation's
 * creation (payment_pending_max_ms): a bank transfer takes a working day or
 * two; a week of held stock is more than any retailer asked for. */
#define HF_PAYMENT_PENDING_MAX_MS    (7 * 24 * 3600 * 1000)
/* Warehouses file size (JSON) the router loads. */
#define HF_WAREHOUSES_FILE_BYTES_MAX (1 << 20)

/* Kafka client properties (kafka_props.c): a properties file holds security
 * settings and a little tuning, tens of lines; a value is at most a path, a
 * principal or a password. Longer lines or more properties are refused. */
#define HF_KAFKA_PROPS_MAX          64
#define HF_KAFKA_PROP_NAME_LEN_MAX  127
#define HF_KAFKA_PROP_VALUE_LEN_MAX 1023
#define HF_KAFKA_PROPS_LINE_LEN_MAX (HF_KAFKA_PROP_NAME_LEN_MAX + HF_KAFKA_PROP_VALUE_LEN_MAX + 2)
#define HF_KAFKA_PROPS_LINES_MAX    1024
/* Command line (hf_cli.h): options one command declares (hfctl reserve has 12,
 * with --help and --version added by the parser), and positional arguments after
 * the command words (hfctl tail takes one topic). */
#define HF_CLI_OPTS_MAX             32
#define HF_CLI_POSITIONAL_MAX       4

/* Metrics server (metrics.c on http/httpd.h): connections open at once (a
 * scraper, the two probes, an operator's curl; each is a thread while open, and
 * libmicrohttpd closes one more at once), how long an idle connection is kept (a
 * keep-alive scraper reconnects after it; a silent client frees its slot), the
 * request body accepted (no endpoint takes one; a longer one is answered 413),
 * and task threads whose health /healthz and /readyz report (main.c runs at most
 * 4 stages x 16 threads). */
#define HF_METRICS_CLIENTS_MAX    32
#define HF_METRICS_IDLE_TIMEOUT_S 2
#define HF_METRICS_BODY_MAX_BYTES 1024
#define HF_METRICS_TASKS_MAX      64

/* Stack of a task thread: handlers keep their records (an hf_record_t is ~17 KB)
 * on the stack, and the deepest chain (the gateway's tick) was measured at about
 * 110 KB (gcc -fcallgraph-info=su). Set explicitly so a small RLIMIT_STACK or
 * another libc's default cannot shrink it under that. */
#define HF_TASK_STACK_BYTES (8 * 1024 * 1024)

/* Payment webhooks (processor/http/webhook_sig.c). Secrets one endpoint accepts at
 * once: the current one and, during a rotation, the previous (the sender signs with
 * both until every receiver has the new one). A signature header holds t= and one
 * v1= (~70 bytes) per secret the sender signs with, maybe a legacy v0=; 1 KiB is
 * several times that, and a longer header is refused before it is parsed. A secret
 * has at least 16 bytes (a shorter one can be guessed offline from a single signed
 * webhook) and at most 256 (providers issue 32 to 64 characters). */
#define HF_WEBHOOK_SECRETS_MAX        2
#define HF_WEBHOOK_SIG_HEADER_LEN_MAX 1024
#define HF_WEBHOOK_SECRET_LEN_MIN     16
#define HF_WEBHOOK_SECRET_LEN_MAX     256

/* API keys of the checkout routes (processor/http/api_keys.c). A deployment has a
 * handful of calling services, each with a key or two during a rotation; 256 is
 * far above that and keeps the constant-time scan of every key per request (one
 * 32-byte compare each) a few microseconds. A keys-file line holds an id (64), a
 * 64-hex hash, four scopes and two numbers: under 200 bytes, so 512 leaves room
 * for blanks; a longer line, more lines or a larger file is refused with its line
 * number. A presented secret is 16..256 bytes (tools/api-key.sh makes 32 random
 * bytes, 46 characters; shorter ones can be guessed). Rates: a key's tokens per
 * second and bucket size are bounded so the millitoken arithmetic cannot
 * overflow (burst x 1000 x rate stays far below 2^63). */
#define HF_API_KEYS_MAX            256
#define HF_API_KEY_ID_LEN_MAX      64
#define HF_API_KEY_SECRET_LEN_MIN  16
#define HF_API_KEY_SECRET_LEN_MAX  256
#define HF_API_KEYS_LINE_LEN_MAX   512
#define HF_API_KEYS_LINES_MAX      4096
#define HF_API_KEYS_FILE_BYTES_MAX (HF_API_KEYS_LINE_LEN_MAX * HF_API_KEYS_LINES_MAX)
#define HF_API_KEY_RATE_PER_S_MAX  100000
#define HF_API_KEY_BURST_MAX       100000

/* Schema registry client (processor/registry.c). Ids it remembers (id ->
 * fingerprint): holdfast registers three subjects, and a topic another system
 * also writes brings a few versions more; 64 is many times that, and a full
 * cache forgets its oldest id (asked again on its next record). A registry answer
 * holds one schema, ours are under 4 KiB; 256 KiB leaves room for other systems'
 * and bounds what a broken server can make the client buffer. */
#define HF_REGISTRY_URL_LEN_MAX        255 /* a config string (HF_CONFIG_STR_MAX) */
#define HF_REGISTRY_IDS_MAX            64
#define HF_REGISTRY_RESPONSE_BYTES_MAX (256 * 1024)
/* A follower that must not skip a record (the routing view, the HTTP front's
 * ledger store) asks an unreachable registry again after 100 ms, doubling up to
 * this: a restarted registry is noticed within seconds, and an outage costs one
 * request per 5 s per follower. */
#define HF_REGISTRY_RETRY_WAIT_MAX_MS  5000

/* After a stop is asked (a signal, a task's fatal error), the process has this
 * long to close its clients and state before it exits without them (main.c). */
#define HF_SHUTDOWN_GRACE_MS 20000

/* A task or standby thread that shows no sign of life this long (no loop turn,
 * no restored record) is stuck in a call that does not return; the process
 * exits 4 so that its supervisor restarts it (main.c). Every bounded wait of a
 * task (a transaction's commit, a restore without progress, a fence) ends well
 * before it. */
#define HF_TASK_STALL_EXIT_MS 120000

/* A task whose producer hit a fatal error (fenced, or broken after a broker's
 * death) is closed dirty and started again inside the process (main.c), at most
 * this many times within HF_TASK_RECOVERY_WINDOW_MS; one more and the process
 * exits 4 for its supervisor. The first retry waits HF_TASK_RECOVERY_BACKOFF_MS,
 * doubling up to HF_TASK_RECOVERY_BACKOFF_MAX_MS: a task that cannot start
 * (no coordinator yet) tries again rather than spin. */
#define HF_TASK_RECOVERIES_MAX          6
#define HF_TASK_RECOVERY_WINDOW_MS      300000
#define HF_TASK_RECOVERY_BACKOFF_MS     250
#define HF_TASK_RECOVERY_BACKOFF_MAX_MS 4000

/* One attempt of a watermark query (kafka.c query_watermarks): a leader that died
 * answers nothing, and the next attempt asks fresh metadata for its successor. */
#define HF_WATERMARK_ATTEMPT_MS 2000

/* TLS of the HTTP front (processor/http/tls_creds.c): a certificate, key or CA
 * file is read whole, up to this size (a PEM chain of a few certificates is a
 * few KB); a served chain or a client's chain holds at most this many
 * certificates (leaf, intermediates). */
#define HF_TLS_FILE_BYTES_MAX (1024 * 1024)
#define HF_TLS_CHAIN_MAX      8

#endif
