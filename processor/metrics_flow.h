/* The series of what flows through the stages (issue 44): replies by request
 * kind and outcome and how long after the request they went out, how late
 * expiries fire, how far each consumer is behind, how long since a stage
 * applied a record, and the aggregator's signals. Every label is bounded:
 * stages (HF_METRICS_STAGES_MAX), request kinds, outcomes and signal kinds
 * (the schemas' enums), input topics (METRICS_FLOW_TOPICS_MAX) and partitions
 * (METRICS_FLOW_PARTITIONS_MAX); never a SKU, reservation or customer. Writers
 * are the task threads, with relaxed atomics only; metrics.c renders them. */
#ifndef HF_METRICS_FLOW_H
#define HF_METRICS_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "metrics_hist.h"
#include "records.h"

/* Input topics per stage with a lag series (a stage has at most 4). */
#define METRICS_FLOW_TOPICS_MAX     4
/* Partitions per input topic with a lag series: every partition a task may
 * own (task.c refuses an assignment beyond HF_PARTITIONS_MAX). A partition
 * beyond it is not kept, counted in holdfast_metrics_dropped_total and logged
 * once. */
#define METRICS_FLOW_PARTITIONS_MAX HF_PARTITIONS_MAX

/* Series a stage has from its start (stage_def_t.metrics_series), even before
 * its first observation, so that a rule over them sees zeros, not nothing.
 * A stage has a series it did not declare from its first observation on. */
#define METRICS_FLOW_REPLIES 1u /* holdfast_replies_total, holdfast_request_latency_ms */
#define METRICS_FLOW_EXPIRY  2u /* holdfast_expiry_lag_ms */
#define METRICS_FLOW_SIGNALS 4u /* holdfast_last_signal_age_seconds, ..._pending_oldest_ms */

/* Called by metrics_stage when it registers a stage (started_mono_ms: now):
 * the ages count from there until the first record or signal. */
void metrics_flow_stage_started(int stage, int64_t started_mono_ms);
/* The series the stage has (METRICS_FLOW_*, or-ed); adds to earlier calls. */
void metrics_flow_declare(int stage, unsigned series);

/* A reply the stage emitted: request is HF_REC_RESERVE, _COMMIT, _RELEASE or
 * _EXTEND (another type is dropped and counted); latency_ms from the request's
 * timestamp to the reply, < 0 when not known (the reply is counted, no
 * latency observed). */
void metrics_reply(int stage, hf_rec_type_t request, hf_reply_outcome_t outcome,
                   int64_t latency_ms);
/* A reservation released because its TTL ran out, lag_ms after expires_at_ms. */
void metrics_expiry(int stage, int64_t lag_ms);
/* The stage applied input records; mono_ms: hf_mono_ms() of that batch. */
void metrics_records_applied(int stage, int64_t mono_ms);

/* The name of the stage's input topic topic_index (first call wins). */
void metrics_input_topic(int stage, size_t topic_index, const char *topic);
/* Records the consumer of topic_index/partition has not read; lag < 0: the
 * partition is not assigned here (its series disappears). */
void metrics_consumer_lag(int stage, size_t topic_index, int32_t partition, int64_t lag);
/* Partition left the task (revoked, task closed): its lag series and its
 * pending signals go. */
void metrics_partition_gone(int stage, int32_t partition);

/* A signal the stage emitted (holdfast_signals_emitted_total{kind}). */
void metrics_signal(int stage, hf_signal_kind_t kind);
/* The oldest dwell timer due (epoch ms) but not yet fired in partition, as the
 * tick found it; 0: none due. */
void metrics_signal_pending(int stage, int32_t partition, int64_t oldest_due_ms);

/* Writes every series of stages 0..stages-1 (names[i] is stage i's name);
 * mono and wall: the clocks now. */
void metrics_flow_render(metrics_out_t *o, const char *const *names, int stages,
                         int64_t now_mono_ms, int64_t now_wall_ms);

#endif
