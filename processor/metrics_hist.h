/* Building blocks of the Prometheus text the metrics modules write: the page
 * (a bounded buffer that still counts what it would have needed) and
 * fixed-bucket histograms kept as atomics, so that observing one is a bucket
 * search and two relaxed adds on the hot path, never a lock. Shared by
 * metrics.c (transaction commits) and metrics_flow.c (replies, expiries). */
#ifndef HF_METRICS_HIST_H
#define HF_METRICS_HIST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The page being rendered. buf holds whole calls of metrics_out only (each
 * ends its lines), so a page that does not fit is never cut mid-line: the
 * first call that does not fit marks the page full, and the metric family it
 * was part of (from its "# HELP" call on) is taken back out, so that a scraper
 * sees whole families. len grows past size to what the whole page needs (the
 * caller compares the two and says so); kept is what buf holds (NUL-ended when
 * size > 0). Set buf and size (designated initialisers), the rest zero. */
typedef struct {
    char *buf;
    size_t size, len;
    size_t kept;
    size_t family_at; /* kept when the family being written began */
    bool families;    /* a "# HELP" call was seen: cut back to family_at */
    bool full;
} metrics_out_t;

void metrics_out(metrics_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Finite upper bounds a histogram may have (+Inf comes on top). */
#define METRICS_HIST_BUCKETS_MAX 16

/* Upper bounds of a histogram's buckets, ascending, in the unit of the
 * metric's name; +Inf is implied after the last. */
typedef struct {
    const int64_t *le;
    size_t count; /* <= METRICS_HIST_BUCKETS_MAX */
} metrics_buckets_t;

/* One histogram series: counts per bucket (not cumulative; [count] is +Inf)
 * and the sum of the observations. Zeroed is empty. */
typedef struct {
    _Atomic uint64_t bucket[METRICS_HIST_BUCKETS_MAX + 1];
    _Atomic uint64_t sum;
} metrics_hist_t;

/* Counts value (a negative one as 0: a clock step, not a real duration). */
void metrics_hist_observe(metrics_hist_t *h, const metrics_buckets_t *b, int64_t value);

/* Writes name_bucket{labels,le="..."} (cumulative, +Inf last), name_sum{labels}
 * and name_count{labels}; labels is the inside of the braces without a
 * trailing comma, e.g. stage="gateway" (non-empty). */
void metrics_hist_render(metrics_out_t *o, const char *name, const char *labels,
                         const metrics_hist_t *h, const metrics_buckets_t *b);

#endif
