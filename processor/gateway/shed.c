/* Load shedding: above the rate the pipeline sustains, new reserves queue up and
 * every answer comes late — commits and expiries included, since they wait behind
 * the reserves in the same partitions. So a Reserve that arrives past its
 * deadline, or while the counter hop is slower than that deadline, is answered
 * BUSY at once (one reply, no state, no counter round trip) and the backlog
 * drains. A slow counter hop does not shed a reserve this partition's
 * allotments cover (escrow.c): it is answered without the counters. What counts as late is `reserve_deadline_ms` (docs/CONFIGURATION.md). */
#include <stdbool.h>
#include <stdio.h>

#include "gateway.h"
#include "hf_assert.h"

/* How long one observation of the counter hop counts: long enough to span a
 * few transactions, short enough that shedding stops soon after the hop
 * recovers (a shed partition sends no holds, so it learns nothing new). */
#define GW_SHED_OBSERVATION_MS 1000
/* Without a broker timestamp, a request that seems older than this says more
 * about its client's clock than about our backlog: not shed for its age. */
#define GW_SHED_CLOCK_SKEW_MS  60000

typedef struct {
    int64_t lag_ms; /* the slowest result seen in the window */
    int64_t at_ms;  /* when the window started */
} shed_hop_t;

/* Per task thread: a partition has one owner thread, so no locking. */
static _Thread_local shed_hop_t hops[HF_PARTITIONS_MAX];

void gw_shed_observe_result(stage_ctx_t *ctx, int64_t lag_ms)
{
    int32_t p = stage_partition(ctx);
    hf_assert(p >= 0 && p < HF_PARTITIONS_MAX);
    int64_t now = stage_now_ms(ctx);
    shed_hop_t *h = &hops[p];
    if (now - h->at_ms > GW_SHED_OBSERVATION_MS) {
        h->lag_ms = lag_ms;
        h->at_ms = now;
    } else if (lag_ms > h->lag_ms) {
        h->lag_ms = lag_ms;
    }
}

/* Whether this partition's own allotments cover every line of r (escrow.c):
 * such a reserve is answered in one hop and does not wait for the counters.
 * Looked at only when the counter hop is slow. */
static bool held_here(stage_ctx_t *ctx, const gateway_env_t *env, const hf_reserve_t *r)
{
    for (int32_t i = 0; i < r->lines_count; i++) {
        const hf_line_t *l = &r->lines[i];
        hf_availability_t net, mine;
        bool any = false;
        if (!gw_escrow_mode(ctx, l->sku) || env->availability(env->opaque, l->sku, &net) != HF_OK ||
            gw_escrow_local_view(ctx, l->sku, &net, &mine, &any) != HF_OK || mine.total < l->qty)
            return false;
    }
    return r->lines_count > 0;
}

const char *gw_shed_reserve(stage_ctx_t *ctx, const gateway_env_t *env, const hf_reserve_t *r,
                            char *why, size_t why_size)
{
    if (env->reserve_deadline_ms <= 0)
        return NULL;
    int64_t now = stage_now_ms(ctx);
    /* How long the request waited: from the broker's append time (requests is a
     * LogAppendTime topic: the cluster's clock, not the client's), else from the
     * client's sent_at_ms, which a client clock far behind ours would make look
     * old forever — so that one counts only up to GW_SHED_CLOCK_SKEW_MS. */
    int64_t appended_ms = stage_record_timestamp_ms(ctx);
    int64_t waited_ms = appended_ms > 0 ? now - appended_ms : now - r->sent_at_ms;
    bool known = appended_ms > 0 || (r->sent_at_ms > 0 && waited_ms <= GW_SHED_CLOCK_SKEW_MS);
    if (known && waited_ms > env->reserve_deadline_ms) {
        snprintf(why, why_size,
                 "busy: the request waited %lld ms to reach the gateway (deadline %lld ms); "
                 "retry with the same idempotency key",
                 (long long)waited_ms, (long long)env->reserve_deadline_ms);
        return why;
    }
    const shed_hop_t *h = &hops[stage_partition(ctx)];
    if (now - h->at_ms <= GW_SHED_OBSERVATION_MS && h->lag_ms > env->reserve_deadline_ms &&
        !held_here(ctx, env, r)) {
        snprintf(why, why_size,
                 "busy: the counters answer in %lld ms (deadline %lld ms); "
                 "retry with the same idempotency key",
                 (long long)h->lag_ms, (long long)env->reserve_deadline_ms);
        return why;
    }
    return NULL;
}
