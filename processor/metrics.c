/* Metrics: the registry (atomics, no locks on the hot path), the tasks' health
 * (a heartbeat per loop), the Prometheus text rendering and a small HTTP/1.0
 * server thread. The server answers one request per connection and closes it: a
 * scraper every few seconds needs no more, and there is nothing to keep alive.
 * It multiplexes its connections with poll(2), each with a deadline, so an idle
 * client never delays a health probe. */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hf_assert.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "log.h"

#define METRICS_NAME_MAX    64
#define METRICS_BODY_MAX    (64 * 1024)
#define METRICS_REQUEST_MAX 2048
#define METRICS_IO_WAIT_MS  2000

/* Commit duration buckets, milliseconds (the last is +Inf). */
static const int64_t commit_le_ms[] = {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000};
#define COMMIT_BUCKETS (sizeof commit_le_ms / sizeof commit_le_ms[0])

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
static _Atomic uint64_t commit_buckets[HF_METRICS_STAGES_MAX][COMMIT_BUCKETS + 1];
static _Atomic uint64_t commit_sum_ms[HF_METRICS_STAGES_MAX];
static _Atomic int64_t partitions[HF_METRICS_STAGES_MAX];

static struct {
    char name[METRICS_NAME_MAX], help[128];
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
    if (!slot_ok(stage))
        return;
    size_t b = 0;
    while (b < COMMIT_BUCKETS && ms > commit_le_ms[b])
        b++;
    atomic_fetch_add_explicit(&commit_buckets[stage][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&commit_sum_ms[stage], (uint64_t)(ms < 0 ? 0 : ms),
                              memory_order_relaxed);
}

void metrics_add_partitions(int stage, int64_t delta)
{
    if (slot_ok(stage))
        atomic_fetch_add_explicit(&partitions[stage], delta, memory_order_relaxed);
}

bool metrics_gauge(const char *name, const char *help, double (*fn)(void *opaque), void *opaque)
{
    pthread_mutex_lock(&reg_mu);
    bool ok = gauges_count < HF_METRICS_GAUGES_MAX;
    if (ok) {
        snprintf(gauges[gauges_count].name, sizeof gauges[0].name, "%s", name);
        snprintf(gauges[gauges_count].help, sizeof gauges[0].help, "%s", help);
        gauges[gauges_count].fn = fn;
        gauges[gauges_count].opaque = opaque;
        gauges_count++;
    }
    pthread_mutex_unlock(&reg_mu);
    return ok;
}

/* ---- rendering */

typedef struct {
    char *buf;
    size_t size, len;
} out_t;

static void out(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->size ? o->size - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static void render_histograms(out_t *o, int stages)
{
    out(o, "# HELP holdfast_transaction_commit_ms Time to commit one Kafka transaction\n"
           "# TYPE holdfast_transaction_commit_ms histogram\n");
    for (int s = 0; s < stages; s++) {
        uint64_t cumulative = 0;
        for (size_t b = 0; b <= COMMIT_BUCKETS; b++) {
            cumulative += atomic_load_explicit(&commit_buckets[s][b], memory_order_relaxed);
            if (b < COMMIT_BUCKETS)
                out(o, "holdfast_transaction_commit_ms_bucket{stage=\"%s\",le=\"%lld\"} %llu\n",
                    stage_names[s], (long long)commit_le_ms[b], (unsigned long long)cumulative);
            else
                out(o, "holdfast_transaction_commit_ms_bucket{stage=\"%s\",le=\"+Inf\"} %llu\n",
                    stage_names[s], (unsigned long long)cumulative);
        }
        out(o, "holdfast_transaction_commit_ms_sum{stage=\"%s\"} %llu\n", stage_names[s],
            (unsigned long long)atomic_load(&commit_sum_ms[s]));
        out(o, "holdfast_transaction_commit_ms_count{stage=\"%s\"} %llu\n", stage_names[s],
            (unsigned long long)cumulative);
    }
}

size_t metrics_render(char *buf, size_t size)
{
    out_t o = {buf, size, 0};
    if (size)
        buf[0] = '\0';
    int stages = atomic_load(&stages_count);
    for (int m = 0; m < HF_M__COUNT; m++) {
        out(&o, "# HELP %s %s\n# TYPE %s counter\n", metric_info[m].name, metric_info[m].help,
            metric_info[m].name);
        for (int s = 0; s < stages; s++)
            out(&o, "%s{stage=\"%s\"} %llu\n", metric_info[m].name, stage_names[s],
                (unsigned long long)atomic_load(&counters[s][m]));
    }
    out(&o, "# HELP holdfast_partitions_owned Partitions the stage's tasks own\n"
            "# TYPE holdfast_partitions_owned gauge\n");
    for (int s = 0; s < stages; s++)
        out(&o, "holdfast_partitions_owned{stage=\"%s\"} %lld\n", stage_names[s],
            (long long)atomic_load(&partitions[s]));
    render_histograms(&o, stages);
    pthread_mutex_lock(&reg_mu);
    for (size_t g = 0; g < gauges_count; g++)
        out(&o, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", gauges[g].name, gauges[g].help,
            gauges[g].name, gauges[g].name, gauges[g].fn(gauges[g].opaque));
    pthread_mutex_unlock(&reg_mu);
    return o.len;
}

/* ---- task health */

static struct {
    int stage;
    _Atomic int64_t last_loop_ms; /* hf_mono_ms of the last completed loop */
    atomic_int aborts_in_row;
} tasks[HF_METRICS_TASKS_MAX];
static atomic_int tasks_count;
static _Thread_local int my_task = -1;

void metrics_task_heartbeat(int stage, int aborts_in_row)
{
    if (my_task < 0) {
        pthread_mutex_lock(&reg_mu);
        int n = atomic_load(&tasks_count);
        if (n < HF_METRICS_TASKS_MAX) {
            tasks[n].stage = stage;
            atomic_store(&tasks[n].last_loop_ms, hf_mono_ms());
            my_task = n;
            atomic_store(&tasks_count, n + 1); /* published once the slot is filled */
        }
        pthread_mutex_unlock(&reg_mu);
        if (my_task < 0)
            return; /* more threads than slots: this one goes unwatched */
    }
    atomic_store_explicit(&tasks[my_task].aborts_in_row, aborts_in_row, memory_order_relaxed);
    atomic_store_explicit(&tasks[my_task].last_loop_ms, hf_mono_ms(), memory_order_relaxed);
}

bool metrics_healthy(int64_t loop_stall_ms, int aborts_max, char *reason, size_t reason_size)
{
    int n = atomic_load(&tasks_count);
    int64_t now_ms = hf_mono_ms();
    for (int i = 0; i < n; i++) {
        const char *stage = slot_ok(tasks[i].stage) ? stage_names[tasks[i].stage] : "?";
        int64_t quiet_ms = now_ms - atomic_load(&tasks[i].last_loop_ms);
        int aborts = atomic_load(&tasks[i].aborts_in_row);
        if (quiet_ms > loop_stall_ms) {
            snprintf(reason, reason_size,
                     "%s task (thread %d): no loop completed for %lld ms "
                     "(health_loop_stall_ms %lld)\n",
                     stage, i, (long long)quiet_ms, (long long)loop_stall_ms);
            return false;
        }
        if (aborts >= aborts_max) {
            snprintf(reason, reason_size,
                     "%s task (thread %d): %d transactions aborted in a row "
                     "(health_aborts_max %d)\n",
                     stage, i, aborts, aborts_max);
            return false;
        }
    }
    snprintf(reason, reason_size, "ok\n");
    return true;
}

/* ---- the HTTP server: one thread, poll(2) over non-blocking sockets, so a
 * client that is slow or silent holds only its own slot, until its deadline. */

typedef struct {
    int fd; /* -1: free slot */
    int64_t deadline_ms;
    char in[METRICS_REQUEST_MAX];
    size_t in_len;
    char *out; /* the whole response once the request is in; malloc'd */
    size_t out_len, out_sent;
} conn_t;

static struct {
    pthread_t thread;
    int fd;
    atomic_bool stop;
    bool running;
    int64_t loop_stall_ms;
    int aborts_max;
    conn_t conns[HF_METRICS_CLIENTS_MAX];
} server = {.fd = -1};

static void conn_close(conn_t *c)
{
    close(c->fd);
    free(c->out);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

/* The response: head and body in one buffer (NULL when out of memory). */
static char *respond(int status, const char *reason, const char *type, const char *body,
                     size_t body_len, size_t *len_out)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, type, body_len);
    char *r = malloc((size_t)n + body_len);
    if (!r)
        return NULL;
    memcpy(r, head, (size_t)n);
    memcpy(r + n, body, body_len);
    *len_out = (size_t)n + body_len;
    return r;
}

static char *route(const char *req, size_t *len_out)
{
    if (strncmp(req, "GET /metrics", 12) == 0 && (req[12] == ' ' || req[12] == '?')) {
        static char body[METRICS_BODY_MAX]; /* only the server thread renders */
        size_t need = metrics_render(body, sizeof body);
        if (need >= sizeof body)
            log_warn("metrics", "metrics truncated at %zu of %zu bytes", sizeof body, need);
        size_t len = need < sizeof body ? need : sizeof body - 1;
        return respond(200, "OK", "text/plain; version=0.0.4", body, len, len_out);
    }
    if (strncmp(req, "GET /healthz", 12) == 0 && (req[12] == ' ' || req[12] == '?')) {
        char why[256];
        bool ok = metrics_healthy(server.loop_stall_ms, server.aborts_max, why, sizeof why);
        return respond(ok ? 200 : 503, ok ? "OK" : "Service Unavailable", "text/plain", why,
                       strlen(why), len_out);
    }
    static const char nf[] = "try GET /metrics or GET /healthz\n";
    return respond(404, "Not Found", "text/plain", nf, sizeof nf - 1, len_out);
}

/* Reads what is there; once the request head is in, prepares the response. */
static void conn_read(conn_t *c)
{
    ssize_t r = recv(c->fd, c->in + c->in_len, sizeof c->in - 1 - c->in_len, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) {
        conn_close(c);
        return;
    }
    c->in_len += (size_t)r;
    c->in[c->in_len] = '\0';
    bool full = c->in_len + 1 >= sizeof c->in;
    if (!strstr(c->in, "\r\n\r\n") && !strstr(c->in, "\n\n") && !(full && strchr(c->in, '\n'))) {
        if (full)
            conn_close(c); /* a head longer than we read, without a line end */
        return;
    }
    c->out = route(c->in, &c->out_len);
    if (!c->out)
        conn_close(c);
}

static void conn_write(conn_t *c)
{
    ssize_t w = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (w <= 0) {
        conn_close(c);
        return;
    }
    c->out_sent += (size_t)w;
    if (c->out_sent == c->out_len)
        conn_close(c);
}

/* A new client into a free slot; with none free it is told so and closed. */
static void accept_one(void)
{
    int fd = accept4(server.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    for (size_t i = 0; i < HF_METRICS_CLIENTS_MAX; i++) {
        conn_t *c = &server.conns[i];
        if (c->fd >= 0)
            continue;
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->deadline_ms = hf_mono_ms() + METRICS_IO_WAIT_MS;
        return;
    }
    static const char busy[] = "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n"
                               "Connection: close\r\n\r\n";
    (void)send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
}

static void *server_main(void *arg)
{
    (void)arg;
    struct pollfd p[HF_METRICS_CLIENTS_MAX + 1];
    conn_t *polled[HF_METRICS_CLIENTS_MAX];
    while (!atomic_load(&server.stop)) {
        int64_t now_ms = hf_mono_ms(), wait_ms = 200;
        size_t n = 0;
        p[n++] = (struct pollfd){server.fd, POLLIN, 0};
        for (size_t i = 0; i < HF_METRICS_CLIENTS_MAX; i++) {
            conn_t *c = &server.conns[i];
            if (c->fd < 0)
                continue;
            if (now_ms >= c->deadline_ms) { /* slow or silent: its time is up */
                conn_close(c);
                continue;
            }
            if (c->deadline_ms - now_ms < wait_ms)
                wait_ms = c->deadline_ms - now_ms;
            polled[n - 1] = c;
            p[n++] = (struct pollfd){c->fd, c->out ? POLLOUT : POLLIN, 0};
        }
        if (poll(p, n, (int)wait_ms) <= 0)
            continue;
        for (size_t i = 1; i < n; i++) {
            conn_t *c = polled[i - 1];
            if (p[i].revents & (POLLERR | POLLNVAL))
                conn_close(c);
            else if (p[i].revents & (POLLIN | POLLHUP) && !c->out)
                conn_read(c);
            else if (p[i].revents & POLLOUT && c->out)
                conn_write(c);
            else if (p[i].revents & POLLHUP)
                conn_close(c);
        }
        if (p[0].revents & POLLIN)
            accept_one();
    }
    for (size_t i = 0; i < HF_METRICS_CLIENTS_MAX; i++)
        if (server.conns[i].fd >= 0)
            conn_close(&server.conns[i]);
    return NULL;
}

int metrics_serve(const metrics_serve_opts_t *o, int *bound_port, char *errstr, size_t errstr_size)
{
    hf_assert(!server.running);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->bind, &a.sin_addr) != 1) {
        snprintf(errstr, errstr_size,
                 "metrics_bind '%s' is not an IPv4 address (e.g. 127.0.0.1, or 0.0.0.0 for "
                 "every interface)",
                 o->bind);
        return HF_ERR_CONFIG;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(errstr, errstr_size, "metrics socket: %s", strerror(errno));
        return HF_ERR_IO;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t alen = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        snprintf(errstr, errstr_size,
                 "metrics on %s:%d: %s (set metrics_port to a free port, or 0 to pick one; "
                 "metrics_bind to an address of this host)",
                 o->bind, o->port, strerror(errno));
        close(fd);
        return HF_ERR_IO;
    }
    server.fd = fd;
    server.loop_stall_ms = o->loop_stall_ms;
    server.aborts_max = o->aborts_max;
    for (size_t i = 0; i < HF_METRICS_CLIENTS_MAX; i++)
        server.conns[i] = (conn_t){.fd = -1};
    atomic_store(&server.stop, false);
    if (pthread_create(&server.thread, NULL, server_main, NULL) != 0) {
        snprintf(errstr, errstr_size, "metrics thread: %s", strerror(errno));
        close(fd);
        server.fd = -1;
        return HF_ERR_IO;
    }
    server.running = true;
    if (bound_port)
        *bound_port = ntohs(a.sin_port);
    return HF_OK;
}

void metrics_stop(void)
{
    if (!server.running)
        return;
    atomic_store(&server.stop, true);
    pthread_join(server.thread, NULL);
    close(server.fd);
    server.fd = -1;
    server.running = false;
}
