/* Metrics: the registry (atomics, no locks on the hot path), the Prometheus text
 * rendering and a small HTTP/1.0 server thread. The server answers one request
 * per connection and closes it: a scraper every few seconds needs no more, and
 * there is nothing to keep alive. */
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
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "hf_assert.h"
#include "hf_clock.h"
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

/* ---- the HTTP server */

static struct {
    pthread_t thread;
    int fd;
    atomic_bool stop;
    bool running;
} server = {.fd = -1};

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return; /* the scraper went away: nothing to do */
        p += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, int status, const char *reason, const char *type, const char *body,
                    size_t body_len)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, type, body_len);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, body_len);
}

/* Reads the request head, bounded in size and in total time (a client that
 * trickles bytes cannot hold the one server thread); true once "\r\n\r\n" or
 * a full first line is in. */
static bool read_request(int fd, char *req, size_t size)
{
    size_t len = 0;
    int64_t deadline_ms = hf_mono_ms() + METRICS_IO_WAIT_MS;
    while (len + 1 < size) {
        int64_t left_ms = deadline_ms - hf_mono_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left_ms <= 0 || poll(&p, 1, (int)left_ms) <= 0)
            return false;
        ssize_t r = recv(fd, req + len, size - 1 - len, 0);
        if (r <= 0)
            return false;
        len += (size_t)r;
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            return true;
    }
    return strchr(req, '\n') != NULL;
}

static void serve_one(int fd)
{
    char req[METRICS_REQUEST_MAX];
    if (!read_request(fd, req, sizeof req))
        return;
    if (strncmp(req, "GET /metrics", 12) == 0 && (req[12] == ' ' || req[12] == '?')) {
        static char body[METRICS_BODY_MAX]; /* one server thread */
        size_t need = metrics_render(body, sizeof body);
        if (need >= sizeof body)
            log_warn("metrics", "metrics truncated at %zu of %zu bytes", sizeof body, need);
        size_t len = need < sizeof body ? need : sizeof body - 1;
        respond(fd, 200, "OK", "text/plain; version=0.0.4", body, len);
    } else if (strncmp(req, "GET /healthz", 12) == 0) {
        respond(fd, 200, "OK", "text/plain", "ok\n", 3);
    } else {
        static const char nf[] = "try GET /metrics or GET /healthz\n";
        respond(fd, 404, "Not Found", "text/plain", nf, sizeof nf - 1);
    }
}

static void *server_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&server.stop)) {
        struct pollfd p = {server.fd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0)
            continue;
        int c = accept(server.fd, NULL, NULL);
        if (c < 0)
            continue;
        /* A reader that stops reading cannot block the thread (or shutdown). */
        struct timeval send_wait = {METRICS_IO_WAIT_MS / 1000, 0};
        setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &send_wait, sizeof send_wait);
        serve_one(c);
        close(c);
    }
    return NULL;
}

int metrics_serve(int port, int *bound_port, char *errstr, size_t errstr_size)
{
    hf_assert(!server.running);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        snprintf(errstr, errstr_size, "metrics socket: %s", strerror(errno));
        return HF_ERR_IO;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t alen = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        snprintf(errstr, errstr_size,
                 "metrics port %d: %s (set metrics_port to a free port, or 0 "
                 "to pick one)",
                 port, strerror(errno));
        close(fd);
        return HF_ERR_IO;
    }
    server.fd = fd;
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
