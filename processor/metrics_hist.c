/* The page writer and the fixed-bucket histograms of metrics_hist.h. */
#include "metrics_hist.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hf_assert.h"

void metrics_out(metrics_out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool family = strncmp(fmt, "# HELP ", 7) == 0;
    size_t room = o->full || o->kept >= o->size ? 0 : o->size - o->kept;
    int n = vsnprintf(room ? o->buf + o->kept : NULL, room, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    o->len += (size_t)n;
    if (!o->full && (size_t)n < room) {
        if (family) {
            o->family_at = o->kept;
            o->families = true;
        }
        o->kept += (size_t)n;
        return;
    }
    /* Did not fit (whole): nothing more is written; a cut family goes. */
    if (!o->full && o->families && !family)
        o->kept = o->family_at;
    o->full = true;
    if (o->size > 0)
        o->buf[o->kept] = '\0';
}

void metrics_hist_observe(metrics_hist_t *h, const metrics_buckets_t *b, int64_t value)
{
    hf_assert(b->count <= METRICS_HIST_BUCKETS_MAX);
    if (value < 0)
        value = 0;
    size_t i = 0;
    while (i < b->count && value > b->le[i])
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, (uint64_t)value, memory_order_relaxed);
}

void metrics_hist_render(metrics_out_t *o, const char *name, const char *labels,
                         const metrics_hist_t *h, const metrics_buckets_t *b)
{
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= b->count; i++) {
        cumulative += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        if (i < b->count)
            metrics_out(o, "%s_bucket{%s,le=\"%lld\"} %llu\n", name, labels, (long long)b->le[i],
                        (unsigned long long)cumulative);
        else
            metrics_out(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels,
                        (unsigned long long)cumulative);
    }
    metrics_out(o, "%s_sum{%s} %llu\n", name, labels,
                (unsigned long long)atomic_load_explicit(&h->sum, memory_order_relaxed));
    metrics_out(o, "%s_count{%s} %llu\n", name, labels, (unsigned long long)cumulative);
}
