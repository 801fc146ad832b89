/* The flow series of metrics_flow.h: fixed arrays of atomics indexed by stage
 * slot and bounded label values, written by the task threads (relaxed, no
 * locks, no allocation) and read by the metrics server at scrape time. A
 * value that would need a label outside its bound is dropped, counted in
 * holdfast_metrics_dropped_total and logged the first time. */
#include "metrics_flow.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hf_clock.h"
#include "log.h"
#include "metrics.h"

#define FLOW_TOPIC_LEN_MAX (HF_TOPIC_LEN_MAX + 1)

/* The request kinds a reply answers (label request). */
typedef enum {
    REQ_RESERVE = 0,
    REQ_COMMIT,
    REQ_RELEASE,
    REQ_EXTEND,
    REQ_PAYMENT,
    REQ__COUNT
} flow_request_t;
static const char *const request_names[REQ__COUNT] = {"reserve", "commit", "release", "extend",
                                                      "payment"};

/* Request latency and expiry lag buckets, ms (metrics-spec.md). */
static const int64_t latency_le_ms[] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};
static const int64_t expiry_le_ms[] = {50, 100, 250, 500, 1000, 2000, 5000, 10000, 30000};
static const metrics_buckets_t latency_buckets = {latency_le_ms,
                                                  sizeof latency_le_ms / sizeof latency_le_ms[0]};
static const metrics_buckets_t expiry_buckets = {expiry_le_ms,
                                                 sizeof expiry_le_ms / sizeof expiry_le_ms[0]};
_Static_assert(sizeof latency_le_ms / sizeof latency_le_ms[0] <= METRICS_HIST_BUCKETS_MAX,
               "latency buckets fit a histogram");
_Static_assert(sizeof expiry_le_ms / sizeof expiry_le_ms[0] <= METRICS_HIST_BUCKETS_MAX,
               "expiry buckets fit a histogram");

#define STAGES HF_METRICS_STAGES_MAX

static atomic_uint declared[STAGES];
static _Atomic int64_t started_mono_ms[STAGES];
static _Atomic uint64_t replies[STAGES][REQ__COUNT][HF_REPLY__COUNT];
static metrics_hist_t latency[STAGES][REQ__COUNT];
static metrics_hist_t expiry[STAGES];
static _Atomic int64_t applied_mono_ms[STAGES]; /* 0: none applied yet */
static _Atomic uint64_t signals[HF_SIGNAL__COUNT];
static _Atomic int64_t signal_mono_ms[STAGES]; /* 0: none emitted yet */
/* Epoch ms of the oldest due dwell timer per partition; 0: none. */
static _Atomic int64_t pending_due_ms[STAGES][METRICS_FLOW_PARTITIONS_MAX];
/* lag + 1 per input topic and partition: 0 (the zeroed start) = not assigned. */
static _Atomic int64_t lag1[STAGES][METRICS_FLOW_TOPICS_MAX][METRICS_FLOW_PARTITIONS_MAX];
/* Topic names: 0 unset, 1 being written, 2 readable. */
static atomic_int topic_state[STAGES][METRICS_FLOW_TOPICS_MAX];
static char topic_names[STAGES][METRICS_FLOW_TOPICS_MAX][FLOW_TOPIC_LEN_MAX];
static _Atomic uint64_t dropped;
static atomic_bool dropped_logged;

static bool stage_ok(int stage)
{
    return stage >= 0 && stage < STAGES;
}

/* A stage that observes a series it did not declare has it from then on. */
static void observed(int stage, unsigned series)
{
    if (!(atomic_load_explicit(&declared[stage], memory_order_relaxed) & series))
        atomic_fetch_or(&declared[stage], series);
}

static void drop(const char *what, long long value)
{
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
    if (!atomic_exchange(&dropped_logged, true))
        log_warn("metrics",
                 "%s %lld is outside the bounds of the metrics' labels: not kept (counted in "
                 "holdfast_metrics_dropped_total; logged once)",
                 what, value);
}

void metrics_flow_stage_started(int stage, int64_t mono_ms)
{
    if (stage_ok(stage))
        atomic_store(&started_mono_ms[stage], mono_ms);
}

void metrics_flow_declare(int stage, unsigned series)
{
    if (stage_ok(stage))
        atomic_fetch_or(&declared[stage], series);
}

static int request_index(hf_rec_type_t request)
{
    switch (request) {
    case HF_REC_RESERVE:
        return REQ_RESERVE;
    case HF_REC_COMMIT:
        return REQ_COMMIT;
    case HF_REC_RELEASE:
        return REQ_RELEASE;
    case HF_REC_EXTEND:
        return REQ_EXTEND;
    case HF_REC_PAYMENT_EVENT:
        return REQ_PAYMENT;
    default:
        return -1;
    }
}

void metrics_reply(int stage, hf_rec_type_t request, hf_reply_outcome_t outcome, int64_t latency_ms)
{
    int r = request_index(request);
    if (!stage_ok(stage))
        return;
    if (r < 0 || (unsigned)outcome >= HF_REPLY__COUNT) {
        drop(r < 0 ? "reply to record type" : "reply outcome",
             r < 0 ? (long long)request : (long long)outcome);
        return;
    }
    observed(stage, METRICS_FLOW_REPLIES);
    atomic_fetch_add_explicit(&replies[stage][r][outcome], 1, memory_order_relaxed);
    if (latency_ms >= 0)
        metrics_hist_observe(&latency[stage][r], &latency_buckets, latency_ms);
}

void metrics_expiry(int stage, int64_t lag_ms)
{
    if (!stage_ok(stage))
        return;
    observed(stage, METRICS_FLOW_EXPIRY);
    metrics_hist_observe(&expiry[stage], &expiry_buckets, lag_ms);
}

void metrics_records_applied(int stage, int64_t mono_ms)
{
    if (stage_ok(stage))
        atomic_store_explicit(&applied_mono_ms[stage], mono_ms, memory_order_relaxed);
}

void metrics_input_topic(int stage, size_t topic_index, const char *topic)
{
    if (!stage_ok(stage) || topic_index >= METRICS_FLOW_TOPICS_MAX) {
        drop("input topic index", (long long)topic_index);
        return;
    }
    int unset = 0;
    if (!atomic_compare_exchange_strong(&topic_state[stage][topic_index], &unset, 1))
        return;
    snprintf(topic_names[stage][topic_index], FLOW_TOPIC_LEN_MAX, "%s", topic);
    atomic_store(&topic_state[stage][topic_index], 2);
}

static bool partition_ok(int32_t partition)
{
    if (partition >= 0 && partition < METRICS_FLOW_PARTITIONS_MAX)
        return true;
    drop("partition", partition);
    return false;
}

void metrics_consumer_lag(int stage, size_t topic_index, int32_t partition, int64_t lag)
{
    if (!stage_ok(stage) || topic_index >= METRICS_FLOW_TOPICS_MAX || !partition_ok(partition))
        return;
    atomic_store_explicit(&lag1[stage][topic_index][partition], lag < 0 ? 0 : lag + 1,
                          memory_order_relaxed);
}

void metrics_partition_gone(int stage, int32_t partition)
{
    if (!stage_ok(stage) || partition < 0 || partition >= METRICS_FLOW_PARTITIONS_MAX)
        return;
    for (size_t t = 0; t < METRICS_FLOW_TOPICS_MAX; t++)
        atomic_store_explicit(&lag1[stage][t][partition], 0, memory_order_relaxed);
    atomic_store_explicit(&pending_due_ms[stage][partition], 0, memory_order_relaxed);
}

void metrics_signal(int stage, hf_signal_kind_t kind)
{
    if ((unsigned)kind >= HF_SIGNAL__COUNT) {
        drop("signal kind", (long long)kind);
        return;
    }
    atomic_fetch_add_explicit(&signals[kind], 1, memory_order_relaxed);
    if (!stage_ok(stage))
        return;
    observed(stage, METRICS_FLOW_SIGNALS);
    atomic_store_explicit(&signal_mono_ms[stage], hf_mono_ms(), memory_order_relaxed);
}

void metrics_signal_pending(int stage, int32_t partition, int64_t oldest_due_ms)
{
    if (stage_ok(stage) && partition_ok(partition))
        atomic_store_explicit(&pending_due_ms[stage][partition], oldest_due_ms,
                              memory_order_relaxed);
}

/* ---- rendering */

/* A schema symbol as a label value: "REJECTED_INVALID" -> "rejected_invalid". */
static const char *lower(const char *symbol, char *out, size_t out_size)
{
    size_t i = 0;
    for (; symbol[i] && i + 1 < out_size; i++)
        out[i] = (char)(symbol[i] >= 'A' && symbol[i] <= 'Z' ? symbol[i] - 'A' + 'a' : symbol[i]);
    out[i] = '\0';
    return out;
}

static bool has(int stage, unsigned series)
{
    return (atomic_load(&declared[stage]) & series) != 0;
}

static void render_replies(metrics_out_t *o, const char *const *names, int stages)
{
    metrics_out(o, "# HELP holdfast_replies_total Replies the stage emitted, by the request they "
                   "answer and their outcome\n"
                   "# TYPE holdfast_replies_total counter\n");
    char outcome[48];
    for (int s = 0; s < stages; s++)
        for (int r = 0; has(s, METRICS_FLOW_REPLIES) && r < REQ__COUNT; r++)
            for (int k = 0; k < HF_REPLY__COUNT; k++)
                metrics_out(
                    o,
                    "holdfast_replies_total{stage=\"%s\",request=\"%s\",outcome=\"%s\"} "
                    "%llu\n",
                    names[s], request_names[r],
                    lower(hf_reply_outcome_name((hf_reply_outcome_t)k), outcome, sizeof outcome),
                    (unsigned long long)atomic_load_explicit(&replies[s][r][k],
                                                             memory_order_relaxed));
    metrics_out(o, "# HELP holdfast_request_latency_ms From the request's timestamp on "
                   "holdfast.requests to the reply\n"
                   "# TYPE holdfast_request_latency_ms histogram\n");
    char labels[160];
    for (int s = 0; s < stages; s++)
        for (int r = 0; has(s, METRICS_FLOW_REPLIES) && r < REQ__COUNT; r++) {
            snprintf(labels, sizeof labels, "stage=\"%s\",request=\"%s\"", names[s],
                     request_names[r]);
            metrics_hist_render(o, "holdfast_request_latency_ms", labels, &latency[s][r],
                                &latency_buckets);
        }
}

static void render_expiry(metrics_out_t *o, const char *const *names, int stages)
{
    metrics_out(o, "# HELP holdfast_expiry_lag_ms How long after its expires_at_ms a "
                   "reservation was released for its TTL\n"
                   "# TYPE holdfast_expiry_lag_ms histogram\n");
    char labels[96];
    for (int s = 0; s < stages; s++) {
        if (!has(s, METRICS_FLOW_EXPIRY))
            continue;
        snprintf(labels, sizeof labels, "stage=\"%s\"", names[s]);
        metrics_hist_render(o, "holdfast_expiry_lag_ms", labels, &expiry[s], &expiry_buckets);
    }
}

static void render_lag(metrics_out_t *o, const char *const *names, int stages)
{
    metrics_out(o, "# HELP holdfast_consumer_lag_records Records of an assigned input partition "
                   "the stage has not read (high watermark minus position)\n"
                   "# TYPE holdfast_consumer_lag_records gauge\n");
    for (int s = 0; s < stages; s++)
        for (int t = 0; t < METRICS_FLOW_TOPICS_MAX; t++) {
            if (atomic_load(&topic_state[s][t]) != 2)
                continue;
            for (int32_t p = 0; p < METRICS_FLOW_PARTITIONS_MAX; p++) {
                int64_t v = atomic_load_explicit(&lag1[s][t][p], memory_order_relaxed);
                if (v > 0)
                    metrics_out(o,
                                "holdfast_consumer_lag_records{stage=\"%s\",topic=\"%s\","
                                "partition=\"%d\"} %lld\n",
                                names[s], topic_names[s][t], p, (long long)(v - 1));
            }
        }
}

/* Seconds from since_mono_ms (or the stage's start when 0) to now. */
static double age_s(int stage, int64_t since_mono_ms, int64_t now_mono_ms)
{
    int64_t from = since_mono_ms > 0 ? since_mono_ms : atomic_load(&started_mono_ms[stage]);
    return from > 0 && now_mono_ms > from ? (double)(now_mono_ms - from) / 1000.0 : 0.0;
}

static void render_ages(metrics_out_t *o, const char *const *names, int stages, int64_t mono,
                        int64_t wall)
{
    metrics_out(o, "# HELP holdfast_last_record_age_seconds Seconds since the stage last "
                   "applied an input record (since its start when none)\n"
                   "# TYPE holdfast_last_record_age_seconds gauge\n");
    for (int s = 0; s < stages; s++)
        metrics_out(
            o, "holdfast_last_record_age_seconds{stage=\"%s\"} %.3f\n", names[s],
            age_s(s, atomic_load_explicit(&applied_mono_ms[s], memory_order_relaxed), mono));
    metrics_out(o, "# HELP holdfast_signals_emitted_total Availability signals the aggregator "
                   "emitted\n"
                   "# TYPE holdfast_signals_emitted_total counter\n");
    char kind[48];
    for (int k = 0; k < HF_SIGNAL__COUNT; k++)
        metrics_out(o, "holdfast_signals_emitted_total{kind=\"%s\"} %llu\n",
                    lower(hf_signal_kind_name((hf_signal_kind_t)k), kind, sizeof kind),
                    (unsigned long long)atomic_load_explicit(&signals[k], memory_order_relaxed));
    metrics_out(o, "# HELP holdfast_last_signal_age_seconds Seconds since the aggregator last "
                   "emitted a signal (since its start when none)\n"
                   "# TYPE holdfast_last_signal_age_seconds gauge\n");
    for (int s = 0; s < stages; s++)
        if (has(s, METRICS_FLOW_SIGNALS))
            metrics_out(
                o, "holdfast_last_signal_age_seconds{stage=\"%s\"} %.3f\n", names[s],
                age_s(s, atomic_load_explicit(&signal_mono_ms[s], memory_order_relaxed), mono));
    metrics_out(o, "# HELP holdfast_signals_pending_oldest_ms Age of the oldest SKU whose signal "
                   "is due (dwell ended) but not yet emitted; 0 when none\n"
                   "# TYPE holdfast_signals_pending_oldest_ms gauge\n");
    for (int s = 0; s < stages; s++) {
        if (!has(s, METRICS_FLOW_SIGNALS))
            continue;
        int64_t oldest = 0;
        for (int32_t p = 0; p < METRICS_FLOW_PARTITIONS_MAX; p++) {
            int64_t due = atomic_load_explicit(&pending_due_ms[s][p], memory_order_relaxed);
            if (due > 0 && (oldest == 0 || due < oldest))
                oldest = due;
        }
        metrics_out(o, "holdfast_signals_pending_oldest_ms{stage=\"%s\"} %lld\n", names[s],
                    (long long)(oldest > 0 && wall > oldest ? wall - oldest : 0));
    }
}

void metrics_flow_render(metrics_out_t *o, const char *const *names, int stages,
                         int64_t now_mono_ms, int64_t now_wall_ms)
{
    if (stages > STAGES)
        stages = STAGES;
    render_replies(o, names, stages);
    render_expiry(o, names, stages);
    render_lag(o, names, stages);
    render_ages(o, names, stages, now_mono_ms, now_wall_ms);
    metrics_out(o,
                "# HELP holdfast_metrics_dropped_total Observations not kept: a label value "
                "outside its bound\n"
                "# TYPE holdfast_metrics_dropped_total counter\n"
                "holdfast_metrics_dropped_total %llu\n",
                (unsigned long long)atomic_load(&dropped));
}
