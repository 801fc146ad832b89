/* Load shedding: above the rate the pipeline sustains, new reserves queue up and
 * every answer comes late — commits and expiries included, since they wait
 * behind the reserves in the same partitions. A burst the pipeline drains is
 * not that: its queue empties again within a few transactions. So shedding
 * follows CoDel (Nichols & Jacobson, "Controlling Queue Delay", ACM Queue
 * 2012): it looks at the *least* a Reserve waited over an interval, not at the
 * worst wait, and answers BUSY (one reply, no state, no counter round trip)
 * only while that least wait stays above a target — a standing queue. One
 * wait under the target ends it. Besides, a Reserve past `reserve_deadline_ms`
 * is shed whatever the queue does: its client has given up on it. Settings in
 * docs/CONFIGURATION.md (their defaults reasoned in config.c); the rule in
 * docs/ARCHITECTURE.md ("Load shedding"). */
#include <stdbool.h>
#include <stdio.h>

#include "gateway.h"
#include "hf_assert.h"
#include "log.h"

/* Without a broker timestamp, a request that seems older than this says more
 * about its client's clock than about our backlog: not a wait at all. */
#define GW_SHED_CLOCK_SKEW_MS       60000
/* While shedding, one reserve per interval / this is let through anyway: the
 * hop signal (below) learns only from the Holds a partition still sends, and
 * a few shoppers are served throughout. Probes come by time, not as a share
 * of the arrivals, so under any overload they add at most this many reserves
 * per interval and partition (with the defaults 20/s) — a share would grow
 * with the overload it is meant to shed. (CoDel's spacing interval/sqrt(count)
 * is for TCP senders, which slow down at each drop; shoppers do not.) */
#define GW_SHED_PROBES_PER_INTERVAL 4

/* One signal's CoDel state (RFC 8289's first_above_time). */
typedef struct {
    int64_t first_above_ms; /* 0: the last wait was under target; else when the
                               waits will have stood above it for an interval */
    int64_t seen_at_ms;     /* when the last wait was seen; 0: never */
    int64_t wait_ms;        /* the last wait */
} shed_signal_t;

/* Two signals per partition:
 * - queue: how long each new Reserve waited from its broker append to the
 *   gateway. A Reserve's own wait is seen before it is decided, so one that
 *   waited less than the target is never shed by it, and a shed one still
 *   counts: a shedding partition sees its queue drain.
 * - hop: how long the counters took to answer a saga round's Holds
 *   (counter_result.c), a round trip rather than a queue, whose floor is two
 *   transactions and whose swings (a cold producer, a busy box) are not load
 *   that shedding would take away: it counts only past reserve_deadline_ms —
 *   every answer of an interval slower than that means a reserve let in now
 *   is answered after its client gave up. A standing queue at the counters
 *   (a hot pair) shows here, not in the gateway's queue. */
typedef struct {
    shed_signal_t queue;
    shed_signal_t hop;
    bool shedding;
    int64_t probe_at_ms;    /* the last reserve let through while shedding */
    int64_t shed_since_ms;  /* when this shedding episode began */
    uint64_t shed_count;    /* reserves answered BUSY in it */
    uint64_t late_count;    /* reserves shed past the deadline since late_logged_ms */
    int64_t late_logged_ms; /* when those were last logged */
} shed_part_t;

/* Past-deadline sheds are logged at most this often per partition. */
#define GW_SHED_LOG_EVERY_MS 10000

/* Per task thread: a partition has one owner thread, so no locking. */
static _Thread_local shed_part_t parts[HF_PARTITIONS_MAX];

static shed_part_t *part_of(stage_ctx_t *ctx)
{
    int32_t p = stage_partition(ctx);
    hf_assert(p >= 0 && p < HF_PARTITIONS_MAX);
    return &parts[p];
}

static void observe(shed_signal_t *s, int64_t wait_ms, int64_t target_ms, int64_t interval_ms,
                    int64_t now_ms)
{
    /* Waits seen further apart than an interval (or across a clock that went
     * back) say nothing of what stood between them: the count starts again. */
    bool gap = s->seen_at_ms == 0 || now_ms < s->seen_at_ms || now_ms - s->seen_at_ms > interval_ms;
    s->seen_at_ms = now_ms;
    s->wait_ms = wait_ms;
    if (wait_ms < target_ms)
        s->first_above_ms = 0;
    else if (s->first_above_ms == 0 || gap)
        s->first_above_ms = now_ms + interval_ms;
}

/* Whether every wait seen over at least an interval was above target, the
 * last of them within an interval of now. */
static bool standing(const shed_signal_t *s, int64_t interval_ms, int64_t now_ms)
{
    return s->first_above_ms != 0 && now_ms >= s->first_above_ms && now_ms >= s->seen_at_ms &&
           now_ms - s->seen_at_ms <= interval_ms;
}

static bool codel_on(const gateway_env_t *env)
{
    return env->reserve_deadline_ms > 0 && env->reserve_shed_target_ms > 0;
}

void gw_shed_observe_result(stage_ctx_t *ctx, int64_t lag_ms)
{
    const gateway_env_t *env = gateway_env(ctx);
    if (!codel_on(env))
        return;
    observe(&part_of(ctx)->hop, lag_ms, env->reserve_deadline_ms, env->reserve_shed_interval_ms,
            stage_now_ms(ctx));
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

/* How long r waited to reach the gateway, in *waited_ms; false when unknown.
 * From the broker's append time (requests is a LogAppendTime topic: the
 * cluster's clock, not the client's), else from the client's sent_at_ms,
 * which a client clock far behind ours would make look old forever — so that
 * one counts only up to GW_SHED_CLOCK_SKEW_MS. */
static bool wait_of(stage_ctx_t *ctx, const hf_reserve_t *r, int64_t now_ms, int64_t *waited_ms)
{
    int64_t appended_ms = stage_record_timestamp_ms(ctx);
    *waited_ms = appended_ms > 0 ? now_ms - appended_ms : now_ms - r->sent_at_ms;
    return appended_ms > 0 || (r->sent_at_ms > 0 && *waited_ms <= GW_SHED_CLOCK_SKEW_MS);
}

/* The answer's text while a signal stands: which one, and for how long. */
static const char *busy_why(const gateway_env_t *env, const shed_signal_t *s, bool queue,
                            int64_t now_ms, char *why, size_t why_size)
{
    long long above_ms = (long long)(now_ms - (s->first_above_ms - env->reserve_shed_interval_ms));
    if (queue)
        snprintf(why, why_size,
                 "busy: reserves have waited over %lld ms to reach the gateway for %lld ms "
                 "(this one %lld ms); retry with the same idempotency key",
                 (long long)env->reserve_shed_target_ms, above_ms, (long long)s->wait_ms);
    else
        snprintf(why, why_size,
                 "busy: the counters have answered slower than %lld ms for %lld ms "
                 "(the last in %lld ms); retry with the same idempotency key",
                 (long long)env->reserve_deadline_ms, above_ms, (long long)s->wait_ms);
    return why;
}

const char *gw_shed_reserve(stage_ctx_t *ctx, const gateway_env_t *env, const hf_reserve_t *r,
                            char *why, size_t why_size)
{
    if (env->reserve_deadline_ms <= 0)
        return NULL;
    int64_t now = stage_now_ms(ctx), waited_ms = 0;
    bool known = wait_of(ctx, r, now, &waited_ms);
    if (known && waited_ms > env->reserve_deadline_ms) {
        shed_part_t *late = part_of(ctx);
        late->late_count++;
        if (now - late->late_logged_ms >= GW_SHED_LOG_EVERY_MS || now < late->late_logged_ms) {
            log_warn("gateway",
                     "partition %d: %llu reserve(s) waited past reserve_deadline_ms (%lld ms; "
                     "the last %lld ms) and were answered BUSY",
                     (int)stage_partition(ctx), (unsigned long long)late->late_count,
                     (long long)env->reserve_deadline_ms, (long long)waited_ms);
            late->late_count = 0;
            late->late_logged_ms = now;
        }
        snprintf(why, why_size,
                 "busy: the request waited %lld ms to reach the gateway (deadline %lld ms); "
                 "retry with the same idempotency key",
                 (long long)waited_ms, (long long)env->reserve_deadline_ms);
        return why;
    }
    if (!codel_on(env))
        return NULL;
    shed_part_t *s = part_of(ctx);
    int64_t interval_ms = env->reserve_shed_interval_ms;
    if (known)
        observe(&s->queue, waited_ms, env->reserve_shed_target_ms, interval_ms, now);
    bool queue = standing(&s->queue, interval_ms, now);
    if (!queue && !standing(&s->hop, interval_ms, now)) {
        if (s->shedding)
            log_info("gateway", "partition %d: stopped shedding after %lld ms, %llu BUSY",
                     (int)stage_partition(ctx), (long long)(now - s->shed_since_ms),
                     (unsigned long long)s->shed_count);
        s->shedding = false;
        return NULL;
    }
    if (!s->shedding) { /* the first reserve of a standing queue is shed */
        s->shedding = true;
        s->probe_at_ms = now;
        s->shed_since_ms = now;
        s->shed_count = 0;
        log_warn("gateway", "partition %d: shedding new reserves: %s", (int)stage_partition(ctx),
                 busy_why(env, queue ? &s->queue : &s->hop, queue, now, why, why_size));
    }
    if (!queue && held_here(ctx, env, r))
        return NULL; /* the counters are slow, but it does not wait for them */
    if (now < s->probe_at_ms || now - s->probe_at_ms >= interval_ms / GW_SHED_PROBES_PER_INTERVAL) {
        s->probe_at_ms = now;
        return NULL;
    }
    s->shed_count++;
    return busy_why(env, queue ? &s->queue : &s->hop, queue, now, why, why_size);
}
