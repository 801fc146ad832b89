/* How long a task waits between one transaction and the next.
 *
 * Every transaction costs a fixed amount whatever it carries: the broker's
 * AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn requests, a
 * commit marker in every partition it wrote, a verification request per
 * partition (KIP-890), a wake-up of every read_committed consumer of those
 * partitions, and ~1 ms of librdkafka 2.0.2's main thread spinning on its 1 ms
 * partition-registration timer. Measured on the 2-core box at 3,000
 * reservations/s (docs/PERFORMANCE.md): a 20 ms gap halved the counter's and
 * gateway's transactions and took the broker from 0.69 to 0.46 cores and
 * holdfast from 1.00 to 0.82, at +35 ms reserve p50; at 1,000/s the same gap
 * would only add latency, since the box has CPU to spare.
 *
 * So two bounds apply, whichever ends later: a fixed floor_ms from the end of
 * one commit to the start of the next, and under load a period from the start
 * of one transaction to the start of the next, which caps the transactions per
 * second without adding a wait where applying and committing a batch already
 * take that long. Below half of full_records_s input records/s the period is
 * 0; it grows linearly to period_max_ms at full_records_s and stays there. The
 * input rate is measured over windows of PACING_WINDOW_MS and smoothed, so a
 * burst lengthens the period within about a window and an idle stage drops it
 * as fast.
 *
 * Times are on the monotonic clock. The rate is per task: with
 * threads_per_stage N, each task sees about 1/N of its stage's input, so the
 * thresholds are per thread. */
#ifndef HF_PACING_H
#define HF_PACING_H

#include <stdint.h>

enum { PACING_WINDOW_MS = 500 };

/* The longest gap the last transaction's own duration may ask for (gap_pct). */
enum { PACING_GAP_MAX_MS = 50 };

typedef struct {
    int floor_ms; /* from a commit's end to the next transaction (0: none) */
    /* ... and at least gap_pct % of how long the last transaction took, up to
     * PACING_GAP_MAX_MS (0: none): the window follows the measured commit time,
     * so a slow broker is asked for fewer, larger transactions. */
    int gap_pct;
    int period_max_ms;  /* the longest period load brings (0: none) */
    int full_records_s; /* input records/s at which the whole period_max_ms applies */
} pacing_conf_t;

typedef struct {
    pacing_conf_t conf;
    int64_t window_start_ms; /* -1 before the first observation */
    int64_t window_records;
    double rate_records_s; /* smoothed input rate */
    int period_ms;         /* the current period */
} pacing_t;

/* conf->floor_ms, period_max_ms >= 0; full_records_s >= 2 when period_max_ms > 0. */
void pacing_init(pacing_t *p, const pacing_conf_t *conf);
/* Counts records that a batch applied at now_ms (0 for a batch of timers only). */
void pacing_observe(pacing_t *p, int64_t now_ms, int64_t records);
/* When the next transaction may start, given when the last one began and when
 * its commit ended (both -1 or 0 before the first). */
int64_t pacing_ready_at_ms(const pacing_t *p, int64_t last_begin_ms, int64_t last_commit_end_ms);
/* The current period (0 at low load). */
int pacing_period_ms(const pacing_t *p);
/* The longest wait pacing can ask for: the larger floor (floor_ms, or the gap's
 * bound when gap_pct is set) + period_max_ms. */
int pacing_wait_max_ms(const pacing_t *p);
/* The smoothed input rate (records/s) the gap was derived from. */
double pacing_rate_records_s(const pacing_t *p);

#endif
