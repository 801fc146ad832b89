/* Metrics: the registry (atomics, no locks on the hot path), the tasks' health
 * (a heartbeat per loop) and readiness (restored, then a loop), the Prometheus
 * text rendering, and the three endpoints on httpd.h. A connection has its own
 * thread there, so a slow or silent client holds only its own slot (until the
 * idle timeout) and never delays a probe. */
#include "metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "http/httpd.h"
#include "log.h"
#include "metrics_flow.h"
#include "metrics_hist.h"

#define METRICS_NAME_MAX 64
/* A page: a stage's lag series are one line per owned input partition (up to
 * HF_PARTITIONS_MAX x its input topics); 256 KiB hold a few stages at 256. */
#define METRICS_BODY_MAX (256 * 1024)
#define METRICS_WHY_MAX  192 /* one ready check's line */

/* Commit duration buckets, milliseconds (+Inf on top). */
static const int64_t commit_le_ms[] = {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000};
static const metrics_buckets_t commit_buckets = {commit_le_ms,
                                                 sizeof commit_le_ms / sizeof commit_le_ms[0]};

static const struct {
    const char *name, *help;
} metric_info[HF_M__COUNT] = {
#define HF_METRIC_INFO(id, name, help) {name, help},
    HF_METRIC_MAP(HF_METRIC_INFO)
#undef HF_METRIC_INFO
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static char stage_names[HF_METRICS_STAGES_MAX][METRICS_NAME_MAX];
static atomic_int stages_count;
static _Atomic uint64_t counters[HF_METRICS_STAGES_MAX][HF_M__COUNT];
static metrics_hist_t commit_ms[HF_METRICS_STAGES_MAX];
static _Atomic int64_t partitions[HF_METRICS_STAGES_MAX];
/* lag + 1 per partition: 0 (the zeroed start) = not followed. */
static _Atomic int64_t standby_lag1[HF_METRICS_STAGES_MAX][HF_PARTITIONS_MAX];

static struct {
    char name[METRICS_NAME_MAX], help[128];
    const char *type; /* "gauge" or "counter" */
    double (*fn)(void *opaque);
    void *opaque;
} gauges[HF_METRICS_GAUGES_MAX];
static size_t gauges_count;

int metrics_stage(const char *stage_name)
{
    pthread_mutex_lock(&reg_mu);
    int n = atomic_load(&stages_count), slot = -1;
    for (int i = 0; i < n && slot < 0; i++)
        if (strcmp(stage_names[i], stage_name) == 0)
            slot = i;
    if (slot < 0 && n < HF_METRICS_STAGES_MAX) {
        snprintf(stage_names[n], sizeof stage_names[n], "%s", stage_name);
        slot = n;
        metrics_flow_stage_started(n, hf_mono_ms());
        atomic_store(&stages_count, n + 1); /* published after the name is written */
    }
    pthread_mutex_unlock(&reg_mu);
    return slot;
}

static bool slot_ok(int stage)
{
    return stage >= 0 && stage < HF_METRICS_STAGES_MAX;
}

void metrics_add(int stage, hf_metric_t m, uint64_t n)
{
    if (slot_ok(stage) && (unsigned)m < HF_M__COUNT)
        atomic_fetch_add_explicit(&counters[stage][m], n, memory_order_relaxed);
}

void metrics_observe_commit_ms(int stage, int64_t ms)
{
    if (slot_ok(stage))
        metrics_hist_observe(&commit_ms[stage], &commit_buckets, ms);
}

void metrics_add_partitions(int stage, int64_t delta)
{
    if (slot_ok(stage))
        atomic_fetch_add_explicit(&partitions[stage], delta, memory_order_relaxed);
}

void metrics_standby_lag(int stage, int32_t partition, int64_t lag)
{
    if (slot_ok(stage) && partition >= 0 && partition < HF_PARTITIONS_MAX)
        atomic_store_explicit(&standby_lag1[stage][partition], lag < 0 ? 0 : lag + 1,
                              memory_order_relaxed);
}

static bool register_read(const char *type, const char *name, const char *help,
                          double (*fn)(void *opaque), void *opaque)
{
    pthread_mutex_lock(&reg_mu);
    bool ok = gauges_count < HF_METRICS_GAUGES_MAX;
    if (ok) {
        snprintf(gauges[gauges_count].name, sizeof gauges[0].name, "%s", name);
        snprintf(gauges[gauges_count].help, sizeof gauges[0].help, "%s", help);
        gauges[gauges_count].type = type;
        gauges[gauges_count].fn = fn;
        gauges[gauges_count].opaque = opaque;
        gauges_count++;
    }
    pthread_mutex_unlock(&reg_mu);
    return ok;
}

bool metrics_gauge(const char *name, const char *help, double (*fn)(void *opaque), void *opaque)
{
    return register_read("gauge", name, help, fn, opaque);
}

bool metrics_counter_read(const char *name, const char *help, double (*fn)(void *opaque),
                          void *opaque)
{
    return register_read("counter", name, help, fn, opaque);
}

/* ---- rendering */

static void render_histograms(metrics_out_t *o, int stages)
{
    metrics_out(o, "# HELP holdfast_transaction_commit_ms Time to commit one Kafka transaction\n"
                   "# TYPE holdfast_transaction_commit_ms histogram\n");
    char labels[METRICS_NAME_MAX + 16];
    for (int s = 0; s < stages; s++) {
        snprintf(labels, sizeof labels, "stage=\"%.*s\"", METRICS_NAME_MAX - 1, stage_names[s]);
        metrics_hist_render(o, "holdfast_transaction_commit_ms", labels, &commit_ms[s],
                            &commit_buckets);
    }
}

static void render_standby_lag(metrics_out_t *o, int stages)
{
    metrics_out(o, "# HELP holdfast_standby_lag_records Changelog records a standby is behind on a "
                   "partition its process does not own\n"
                   "# TYPE holdfast_standby_lag_records gauge\n");
    for (int s = 0; s < stages; s++)
        for (int32_t p = 0; p < HF_PARTITIONS_MAX; p++) {
            int64_t lag1 = atomic_load_explicit(&standby_lag1[s][p], memory_order_relaxed);
            if (lag1 > 0)
                metrics_out(o, "holdfast_standby_lag_records{stage=\"%s\",partition=\"%d\"} %lld\n",
                            stage_names[s], p, (long long)(lag1 - 1));
        }
}

static void render_loop_ages(metrics_out_t *o, int stages, int64_t now_ms);

/* Pages cut because they did not fit their buffer (the trailer of every page). */
static _Atomic uint64_t render_truncated;
static atomic_bool render_truncated_logged;

/* Room kept at the end of a page for its trailer, which must always fit. */
#define METRICS_TRAILER_MAX 256

static void render_body(metrics_out_t *o)
{
    int stages = atomic_load(&stages_count);
    for (int m = 0; m < HF_M__COUNT; m++) {
        metrics_out(o, "# HELP %s %s\n# TYPE %s counter\n", metric_info[m].name,
                    metric_info[m].help, metric_info[m].name);
        for (int s = 0; s < stages; s++)
            metrics_out(o, "%s{stage=\"%s\"} %llu\n", metric_info[m].name, stage_names[s],
                        (unsigned long long)atomic_load(&counters[s][m]));
    }
    metrics_out(o, "# HELP holdfast_partitions_owned Partitions the stage's tasks own\n"
                   "# TYPE holdfast_partitions_owned gauge\n");
    for (int s = 0; s < stages; s++)
        metrics_out(o, "holdfast_partitions_owned{stage=\"%s\"} %lld\n", stage_names[s],
                    (long long)atomic_load(&partitions[s]));
    render_histograms(o, stages);
    render_standby_lag(o, stages);
    const char *names[HF_METRICS_STAGES_MAX];
    for (int s = 0; s < stages; s++)
        names[s] = stage_names[s];
    int64_t now_ms = hf_mono_ms();
    render_loop_ages(o, stages, now_ms);
    metrics_flow_render(o, names, stages, now_ms, hf_wall_ms());
    pthread_mutex_lock(&reg_mu);
    for (size_t g = 0; g < gauges_count; g++)
        metrics_out(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", gauges[g].name, gauges[g].help,
                    gauges[g].name, gauges[g].type, gauges[g].name, gauges[g].fn(gauges[g].opaque));
    pthread_mutex_unlock(&reg_mu);
}

size_t metrics_render(char *buf, size_t size)
{
    /* The body in all but the trailer's room; whole metric families only. */
    metrics_out_t o = {.buf = buf,
                       .size = size > METRICS_TRAILER_MAX ? size - METRICS_TRAILER_MAX : 0};
    if (size)
        buf[0] = '\0';
    render_body(&o);
    if (buf && size && o.kept < o.len) {
        uint64_t n = atomic_fetch_add(&render_truncated, 1) + 1;
        if (!atomic_exchange(&render_truncated_logged, true))
            log_warn("metrics",
                     "the /metrics page needs %zu bytes and has %zu: its last metric families "
                     "are left out (whole families, the rest of the page is valid; counted in "
                     "holdfast_metrics_render_truncated_total, %llu so far; logged once). Too "
                     "many partitions or stages in one process: split the stages over processes",
                     o.len, size, (unsigned long long)n);
    }
    /* The trailer: after the kept body, in the room kept for it. */
    metrics_out_t t = {.buf = size ? buf + o.kept : NULL, .size = size ? size - o.kept : 0};
    metrics_out(&t,
                "# HELP holdfast_metrics_render_truncated_total Pages of /metrics whose last "
                "metric families did not fit the page and were left out\n"
                "# TYPE holdfast_metrics_render_truncated_total counter\n"
                "holdfast_metrics_render_truncated_total %llu\n",
                (unsigned long long)atomic_load(&render_truncated));
    hf_assert(t.len < METRICS_TRAILER_MAX);
    /* What the whole page needs; a cut page reports at least size, so that
     * "did it fit" is always "returned < size" (metrics.h). */
    size_t need = o.len + t.len;
    return o.kept < o.len && need < size ? size : need;
}

/* ---- task health and readiness */

/* Where a task stands for /readyz. Only its own thread writes it. */
typedef enum {
    TASK_UNASSIGNED, /* no assignment yet */
    TASK_RESTORING,  /* in the restore of an assignment */
    TASK_RESTORED,   /* restored; the loop after it has not completed */
    TASK_READY,      /* a loop completed since the last restore */
} task_phase_t;

static const char *const phase_why[] = {
    [TASK_UNASSIGNED] = "waiting for its partition assignment",
    [TASK_RESTORING] = "restoring partitions",
    [TASK_RESTORED] = "partitions restored, first loop since not completed",
};

static struct {
    int stage;
    _Atomic int64_t last_loop_ms; /* hf_mono_ms of the last completed loop */
    atomic_int aborts_in_row;
    atomic_int phase; /* task_phase_t */
} tasks[HF_METRICS_TASKS_MAX];
static atomic_int tasks_count;
static _Thread_local int my_task = -1;

static struct {
    bool (*fn)(void *opaque, char *why, size_t why_size);
    void *opaque;
} checks[HF_METRICS_CHECKS_MAX];
static size_t checks_count;

/* The calling thread's task slot, registered on first use; -1 when every slot
 * is taken (the thread then goes unwatched). */
static int my_slot(int stage)
{
    if (my_task >= 0)
        return my_task;
    pthread_mutex_lock(&reg_mu);
    int n = atomic_load(&tasks_count);
    if (n < HF_METRICS_TASKS_MAX) {
        tasks[n].stage = stage;
        atomic_store(&tasks[n].last_loop_ms, hf_mono_ms());
        atomic_store(&tasks[n].aborts_in_row, 0);
        atomic_store(&tasks[n].phase, TASK_UNASSIGNED);
        my_task = n;
        atomic_store(&tasks_count, n + 1); /* published once the slot is filled */
    }
    pthread_mutex_unlock(&reg_mu);
    return my_task;
}

void metrics_task_heartbeat(int stage, int aborts_in_row)
{
    int i = my_slot(stage);
    if (i < 0)
        return;
    atomic_store_explicit(&tasks[i].aborts_in_row, aborts_in_row, memory_order_relaxed);
    atomic_store_explicit(&tasks[i].last_loop_ms, hf_mono_ms(), memory_order_relaxed);
    if (atomic_load_explicit(&tasks[i].phase, memory_order_relaxed) == TASK_RESTORED)
        atomic_store(&tasks[i].phase, TASK_READY);
}

void metrics_task_restoring(int stage, bool restoring)
{
    int i = my_slot(stage);
    if (i >= 0)
        atomic_store(&tasks[i].phase, restoring ? TASK_RESTORING : TASK_RESTORED);
}

void metrics_task_alive(int stage, int64_t now_ms)
{
    int i = my_slot(stage);
    if (i >= 0)
        atomic_store_explicit(&tasks[i].last_loop_ms, now_ms, memory_order_relaxed);
}

/* holdfast_task_loop_age_seconds{stage}: the longest any task thread of the
 * stage has gone without completing a loop, computed here at scrape time from
 * the heartbeats /healthz reads, so a thread stuck in a call shows a growing
 * age although it refreshes none of its own gauges. A stage with no task
 * thread registered yet has no series. */
static void render_loop_ages(metrics_out_t *o, int stages, int64_t now_ms)
{
    metrics_out(o, "# HELP holdfast_task_loop_age_seconds Longest time any task thread of the "
                   "stage has gone without completing a loop (a stuck thread's grows)\n"
                   "# TYPE holdfast_task_loop_age_seconds gauge\n");
    int n = atomic_load(&tasks_count);
    for (int s = 0; s < stages; s++) {
        int64_t oldest_ms = -1;
        for (int i = 0; i < n; i++) {
            if (tasks[i].stage != s)
                continue;
            int64_t quiet_ms = now_ms - atomic_load(&tasks[i].last_loop_ms);
            if (quiet_ms > oldest_ms)
                oldest_ms = quiet_ms < 0 ? 0 : quiet_ms;
        }
        if (oldest_ms >= 0)
            metrics_out(o, "holdfast_task_loop_age_seconds{stage=\"%s\"} %.3f\n", stage_names[s],
                        (double)oldest_ms / 1000.0);
    }
}

static const char *task_stage_name(int i)
{
    return slot_ok(tasks[i].stage) ? stage_names[tasks[i].stage] : "?";
}

bool metrics_healthy(int64_t loop_stall_ms, int aborts_max, char *reason, size_t reason_size)
{
    int n = atomic_load(&tasks_count);
    int64_t now_ms = hf_mono_ms();
    for (int i = 0; i < n; i++) {
        int64_t quiet_ms = now_ms - atomic_load(&tasks[i].last_loop_ms);
        int aborts = atomic_load(&tasks[i].aborts_in_row);
        if (quiet_ms > loop_stall_ms) {
            snprintf(reason, reason_size,
                     "%s task (thread %d): no loop completed for %lld ms "
                     "(health_loop_stall_ms %lld)\n",
                     task_stage_name(i), i, (long long)quiet_ms, (long long)loop_stall_ms);
            return false;
        }
        if (aborts >= aborts_max) {
            snprintf(reason, reason_size,
                     "%s task (thread %d): %d transactions aborted in a row "
                     "(health_aborts_max %d)\n",
                     task_stage_name(i), i, aborts, aborts_max);
            return false;
        }
    }
    snprintf(reason, reason_size, "ok\n");
    return true;
}

bool metrics_ready_check(bool (*fn)(void *opaque, char *why, size_t why_size), void *opaque)
{
    pthread_mutex_lock(&reg_mu);
    bool ok = checks_count < HF_METRICS_CHECKS_MAX;
    if (ok) {
        checks[checks_count].fn = fn;
        checks[checks_count].opaque = opaque;
        checks_count++;
    }
    pthread_mutex_unlock(&reg_mu);
    return ok;
}

bool metrics_ready(int tasks_expected, char *reason, size_t reason_size)
{
    metrics_out_t o = {.buf = reason, .size = reason_size};
    if (reason_size)
        reason[0] = '\0';
    int n = atomic_load(&tasks_count);
    if (n < tasks_expected)
        metrics_out(&o, "%d of %d task threads not started yet\n", tasks_expected - n,
                    tasks_expected);
    for (int i = 0; i < n; i++) {
        int phase = atomic_load(&tasks[i].phase);
        if (phase != TASK_READY)
            metrics_out(&o, "%s task (thread %d): %s\n", task_stage_name(i), i, phase_why[phase]);
    }
    pthread_mutex_lock(&reg_mu);
    for (size_t c = 0; c < checks_count; c++) {
        char why[METRICS_WHY_MAX];
        if (!checks[c].fn(checks[c].opaque, why, sizeof why))
            metrics_out(&o, "%s\n", why);
    }
    pthread_mutex_unlock(&reg_mu);
    bool ready = o.len == 0;
    if (ready)
        metrics_out(&o, "ok\n");
    return ready;
}

/* ---- the endpoints, on httpd.h */

static struct {
    httpd_t *h;
    int64_t loop_stall_ms;
    int aborts_max, tasks_expected;
} server;

/* Each connection thread renders into its own page: a response body must
 * outlive the handler (httpd copies it once the handler returned), and pages
 * are too big for thread-local storage in every thread of the process. The
 * page is freed with its thread. */
static pthread_key_t page_key;
static pthread_once_t page_key_once = PTHREAD_ONCE_INIT;

static void page_key_create(void)
{
    int rc = pthread_key_create(&page_key, free);
    hf_assert(rc == 0);
}

static char *thread_page(void)
{
    pthread_once(&page_key_once, page_key_create);
    char *page = pthread_getspecific(page_key);
    if (!page) {
        page = malloc(METRICS_BODY_MAX);
        if (page && pthread_setspecific(page_key, page) != 0) {
            free(page);
            page = NULL;
        }
    }
    return page;
}

static void text(httpd_resp_t *resp, int status, const char *body)
{
    resp->status = status;
    resp->content_type = "text/plain";
    resp->body = body;
    resp->body_len = SIZE_MAX;
}

static void on_request(void *opaque, const httpd_req_t *req, httpd_resp_t *resp)
{
    (void)opaque;
    const char *path = httpd_path(req), *method = httpd_method(req);
    bool is_metrics = strcmp(path, "/metrics") == 0, is_health = strcmp(path, "/healthz") == 0,
         is_ready = strcmp(path, "/readyz") == 0;
    if (!is_metrics && !is_health && !is_ready) {
        text(resp, 404, "not found: try GET /metrics, /healthz or /readyz\n");
        return;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        text(resp, 405, "method not allowed: these endpoints answer GET (and HEAD)\n");
        resp->allow = "GET, HEAD";
        return;
    }
    char *page = thread_page();
    if (!page) {
        text(resp, 500, "out of memory\n");
        return;
    }
    if (is_metrics) {
        (void)metrics_render(page, METRICS_BODY_MAX); /* a page too big is logged there */
        text(resp, 200, page);
        resp->content_type = "text/plain; version=0.0.4";
    } else if (is_health) {
        bool ok = metrics_healthy(server.loop_stall_ms, server.aborts_max, page, METRICS_BODY_MAX);
        text(resp, ok ? 200 : 503, page);
    } else {
        bool ok = metrics_ready(server.tasks_expected, page, METRICS_BODY_MAX);
        text(resp, ok ? 200 : 503, page);
    }
}

int metrics_serve(const metrics_serve_opts_t *o, int *bound_port, char *errstr, size_t errstr_size)
{
    hf_assert(!server.h);
    httpd_opts_t ho = {
        .bind = o->bind,
        .port = o->port,
        .connections_max = HF_METRICS_CLIENTS_MAX,
        .body_max_bytes = HF_METRICS_BODY_MAX_BYTES,
        .idle_timeout_s = HF_METRICS_IDLE_TIMEOUT_S,
        .handler = on_request,
        .name = "metrics",
    };
    server.loop_stall_ms = o->loop_stall_ms;
    server.aborts_max = o->aborts_max;
    server.tasks_expected = o->tasks_expected;
    int port = 0;
    int err = httpd_start(&ho, &server.h, &port, errstr, errstr_size);
    if (err == HF_ERR_CONFIG)
        snprintf(errstr, errstr_size,
                 "metrics_bind '%s' is not an IPv4 address (e.g. 127.0.0.1, or 0.0.0.0 for "
                 "every interface)",
                 o->bind);
    else if (err == HF_ERR_IO)
        snprintf(errstr, errstr_size,
                 "metrics on %s:%d: cannot listen (set metrics_port to a free port, or 0 to "
                 "pick one; metrics_bind to an address of this host)",
                 o->bind, o->port);
    else if (err)
        snprintf(errstr, errstr_size, "metrics: %s", hf_err_str(err));
    else if (bound_port)
        *bound_port = port;
    return err;
}

void metrics_stop(void)
{
    httpd_stop(server.h);
    server.h = NULL;
}
