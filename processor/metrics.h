/* Process metrics in the Prometheus text exposition format, served over HTTP
 * (http/httpd.h) when metrics_port is set: GET /metrics, GET /healthz (liveness:
 * each task thread reports every loop it completes) and GET /readyz (readiness:
 * every task has restored its assigned partitions and the registered checks,
 * such as the gateway's routing view, pass). Counters are lock-free atomics
 * bumped by the task loop (per stage), gauges are callbacks read at scrape time
 * (e.g. the gateway's routing view). Counts include the work of transactions
 * that were later aborted and retried: they measure effort, the topics are the
 * record of what happened. */
#ifndef HF_METRICS_H
#define HF_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"

#define HF_METRICS_STAGES_MAX 8
/* Read-at-scrape gauges and counters of one process: `holdfast http` registers
 * 10 (6 of its own, 4 of its API keys), a gateway up to 9 (routing view, escrow);
 * 16 leaves room for a few more. One past it is refused (the caller logs it). */
#define HF_METRICS_GAUGES_MAX 16
#define HF_METRICS_CHECKS_MAX 8

/* Per-stage counters: name, help. */
#define HF_METRIC_MAP(X)                                                                           \
    X(RECORDS, "holdfast_records_applied_total", "Input records applied by a handler")             \
    X(DEAD_LETTERS, "holdfast_dead_letters_total", "Input records sent to the dead-letter topic")  \
    X(FORWARDED, "holdfast_records_forwarded_total",                                               \
      "Input records on a partition their key does not hash to, forwarded to the key's")           \
    X(TXNS, "holdfast_transactions_committed_total", "Kafka transactions committed")               \
    X(RECOVERIES, "holdfast_task_recoveries_total",                                                \
      "Tasks closed after a fatal Kafka error and started again inside the process")               \
    X(ABORTS, "holdfast_transactions_aborted_total", "Kafka transactions aborted (and retried)")   \
    X(RESTORED, "holdfast_changelog_records_restored_total",                                       \
      "Changelog records applied while restoring state")                                           \
    X(RESTORE_MS, "holdfast_restore_milliseconds_total",                                           \
      "Time spent restoring assigned partitions from their changelogs, ms")                        \
    X(STANDBY_APPLIED, "holdfast_standby_records_applied_total",                                   \
      "Changelog records a standby applied to partitions this process does not own")

typedef enum {
#define HF_METRIC_ENUM(id, name, help) HF_M_##id,
    HF_METRIC_MAP(HF_METRIC_ENUM)
#undef HF_METRIC_ENUM
        HF_M__COUNT
} hf_metric_t;

/* The slot of a stage's series (registered on first call); -1 when the table is
 * full (the metrics of that stage are then not kept). */
int metrics_stage(const char *stage_name);
void metrics_add(int stage, hf_metric_t m, uint64_t n);
/* One transaction's commit duration (histogram holdfast_transaction_commit_ms). */
void metrics_observe_commit_ms(int stage, int64_t ms);
/* Partitions a stage's tasks own right now (holdfast_partitions_owned). */
void metrics_add_partitions(int stage, int64_t delta);

/* How many changelog records the stage's standby is behind on a partition it
 * does not own (holdfast_standby_lag_records{stage,partition}); lag < 0: it
 * does not follow that partition (owned here, or no standby). */
void metrics_standby_lag(int stage, int32_t partition, int64_t lag);

/* A gauge read at scrape time: name must be a valid metric name; fn returns the
 * value. Registered once per process; false when the table is full. */
bool metrics_gauge(const char *name, const char *help, double (*fn)(void *opaque), void *opaque);
/* The same for a counter kept elsewhere (a monotonic count: TYPE counter). */
bool metrics_counter_read(const char *name, const char *help, double (*fn)(void *opaque),
                          void *opaque);

/* Renders every metric into buf (NUL-terminated); returns the length the
 * whole page needs. A page that does not fit (the return is >= size) holds
 * whole metric families only, never a cut line, and ends with
 * holdfast_metrics_render_truncated_total, which counts such pages (the first
 * is logged); buf NULL and size 0 only measure. A caller sizing buf from a
 * measuring call adds HF_METRICS_RENDER_SLACK to it: room for the series that
 * may appear between the two calls (a partition assigned) and for the
 * trailer's reserve. */
#define HF_METRICS_RENDER_SLACK 4096
size_t metrics_render(char *buf, size_t size);

/* Called by a task thread after each loop of its task (stage from
 * metrics_stage): a heartbeat, with how many transactions it has aborted in a
 * row. The calling thread is registered as a task on its first call. */
void metrics_task_heartbeat(int stage, int aborts_in_row);

/* A sign of progress from a task thread that completes no loop meanwhile (it is
 * restoring its partitions from their changelogs): /healthz and
 * holdfast_task_loop_age_seconds count it as a completed loop, so a long restore
 * that moves is not a stuck task, as for the stall watchdog (task.h alive_ms).
 * now_ms is hf_mono_ms(). */
void metrics_task_alive(int stage, int64_t now_ms);

/* What /healthz decides: true when every registered task completed a loop within
 * loop_stall_ms and has fewer than aborts_max aborts in a row; otherwise false
 * with the first unhealthy task and why in reason. */
bool metrics_healthy(int64_t loop_stall_ms, int aborts_max, char *reason, size_t reason_size);

/* Called by a task thread around the restore of an assignment (task.c's
 * on_assign): true before it, false once every assigned partition is restored.
 * The task counts as ready after the next loop it completes. The calling thread
 * is registered as a task on its first call, as by metrics_task_heartbeat. */
void metrics_task_restoring(int stage, bool restoring);

/* A condition of readiness beside the tasks' (the gateway's: its routing view
 * is current): fn returns true when ready, else false with why (one line, no
 * newline). Registered once per process; false when the table is full. */
bool metrics_ready_check(bool (*fn)(void *opaque, char *why, size_t why_size), void *opaque);

/* What /readyz decides: true when tasks_expected task threads have registered
 * (0: any number), each was assigned its partitions, restored them and completed
 * a loop since, and every check passes; otherwise false with one line per thing
 * not ready in reason. */
bool metrics_ready(int tasks_expected, char *reason, size_t reason_size);

typedef struct {
    const char *bind;      /* IPv4 address to listen on: "127.0.0.1" (metrics_bind) */
    int port;              /* 0: any free port */
    int64_t loop_stall_ms; /* health_loop_stall_ms */
    int aborts_max;        /* health_aborts_max */
    int tasks_expected;    /* task threads the process starts (0: not counted) */
} metrics_serve_opts_t;

/* Serves HTTP on bind:port (httpd.h: a thread per connection, keep-alive) until
 * metrics_stop: up to HF_METRICS_CLIENTS_MAX connections at once, each closed
 * after HF_METRICS_IDLE_TIMEOUT_S idle. *bound_port is the port listened on. */
int metrics_serve(const metrics_serve_opts_t *o, int *bound_port, char *errstr,
                  size_t errstr_size) HF_MUST_CHECK;
void metrics_stop(void);

#endif
