/* The metrics endpoints of the real `holdfast` binary on the real broker, as a
 * Kubernetes kubelet and a Prometheus scraper use them: /readyz answers 503
 * naming what is not ready while the tasks start, join and restore, then 200;
 * /healthz (liveness) is 200 meanwhile; /metrics counts what the process owns,
 * over one keep-alive connection. A restart without its local state is not
 * ready until the changelog has been restored into it. After real reserves,
 * commits, releases, an expiry and a sold-out, the flow series (replies,
 * request latency, expiry lag, consumer lag, record and signal ages, signals)
 * are there and moved, and a Reserve answered in a later transaction counts its
 * latency from its append to holdfast.requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec.h"
#include "harness.h"
#include "lib/client.h"

#define WAIT_MS 60000

static char page[256 * 1024];

/* A port nobody listens on now (the kernel's pick, released). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* A connection to 127.0.0.1:port with a 5 s receive bound; -1 if refused. */
static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends request on fd and reads one response (head, Content-Length body) into
 * page; its status, or -1 when the connection fails. */
static int exchange(int fd, const char *request)
{
    if (send(fd, request, strlen(request), MSG_NOSIGNAL) != (ssize_t)strlen(request))
        return -1;
    size_t len = 0;
    page[0] = '\0';
    const char *end;
    while (!(end = strstr(page, "\r\n\r\n"))) {
        ssize_t r = recv(fd, page + len, sizeof page - 1 - len, 0);
        if (r <= 0)
            return -1;
        len += (size_t)r;
        page[len] = '\0';
    }
    const char *cl = strcasestr(page, "\r\nContent-Length:");
    assert_non_null(cl);
    size_t want = (size_t)(end + 4 - page) + strtoul(cl + 17, NULL, 10);
    while (len < want) {
        ssize_t r = recv(fd, page + len, sizeof page - 1 - len, 0);
        if (r <= 0)
            return -1;
        len += (size_t)r;
    }
    page[len] = '\0';
    int major, minor, status;
    return sscanf(page, "HTTP/%d.%d %d", &major, &minor, &status) == 3 ? status : -1;
}

/* GET path on a connection of its own; -1 while nothing listens. */
static int get(int port, const char *path)
{
    int fd = dial(port);
    if (fd < 0)
        return -1;
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: holdfast\r\nConnection: close\r\n\r\n",
             path);
    int status = exchange(fd, req);
    close(fd);
    return status;
}

/* Polls /readyz until 200; the first answer's status and body are kept. */
static void wait_ready(int port, int *first_status, char *first_body, size_t first_size)
{
    *first_status = -1;
    int64_t deadline = harness_now_ms() + WAIT_MS;
    int status = -1;
    while ((status = get(port, "/readyz")) != 200 && harness_now_ms() < deadline) {
        if (status > 0 && *first_status < 0) {
            *first_status = status;
            const char *body = strstr(page, "\r\n\r\n");
            snprintf(first_body, first_size, "%s", body ? body + 4 : "");
        }
        harness_sleep_ms(50);
    }
    if (status != 200)
        fail_msg("/readyz not 200 after %d ms; last answer:\n%s", WAIT_MS, page);
}

static void expect_in(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("missing \"%s\" in:\n%s", want, text);
}

static void test_readyz_follows_the_start_and_the_restore_and_metrics_count(void **state)
{
    harness_t h;
    harness_init(&h, "metrics");
    int port = free_port();
    char config[128], first[4096];
    snprintf(config, sizeof config, "{\"metrics_port\": %d}", port);
    pid_t pid = harness_start_with(&h, "m1", "counter,gateway", config);

    /* The server listens before the task threads run: the first answer is 503. */
    int first_status;
    wait_ready(port, &first_status, first, sizeof first);
    assert_int_equal(first_status, 503);
    if (!strstr(first, "task threads not started yet") && !strstr(first, " task (thread "))
        fail_msg("the first 503 names no task:\n%s", first);
    assert_int_equal(get(port, "/healthz"), 200);
    expect_in(page, "\r\n\r\nok\n");

    /* A scraper's two requests on one connection. */
    int fd = dial(port);
    assert_true(fd >= 0);
    assert_int_equal(exchange(fd, "GET /metrics HTTP/1.1\r\nHost: holdfast\r\n\r\n"), 200);
    char want[128]; /* ready: every partition assigned and restored */
    snprintf(want, sizeof want, "\nholdfast_partitions_owned{stage=\"counter\"} %d\n",
             harness_partitions(&h, HF_T_COUNTER_COMMANDS));
    expect_in(page, want);
    expect_in(page, "\nholdfast_gateway_view_staleness_ms ");
    assert_int_equal(exchange(fd, "GET /readyz HTTP/1.1\r\nHost: holdfast\r\n\r\n"), 200);
    close(fd);
    assert_int_equal(get(port, "/nothing"), 404);

    /* Some state, then a restart without the local state: ready only once the
     * changelog has been restored into it, every partition owned again. */
    char key[128];
    hf_record_t f = harness_feed("W1", "SKU-MX", HF_FEED_RECEIVE, 5, 1);
    harness_send(&h, HF_T_STOCK_FEED, harness_pair(key, "W1", "SKU-MX"), &f);
    harness_flush(&h);
    hf_counter_state_t c = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&h, "W1", "SKU-MX", &c) && c.on_hand == 5) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(c.on_hand, 5);
    assert_int_equal(harness_stop(pid), 0);
    assert_int_equal(get(port, "/readyz"), -1); /* stopped with the process */
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s/state-m1'", h.workdir);
    assert_int_equal(system(rm), 0);

    pid = harness_start_with(&h, "m1", "counter,gateway", config);
    wait_ready(port, &first_status, first, sizeof first);
    assert_int_equal(first_status, 503);
    assert_int_equal(get(port, "/metrics"), 200);
    expect_in(page, want); /* every partition owned */
    const char *restored =
        strstr(page, "\nholdfast_changelog_records_restored_total{stage=\"counter\"} ");
    assert_non_null(restored);
    if (strtoull(strchr(restored, '}') + 2, NULL, 10) < 1)
        fail_msg("ready before the counter's changelog was restored:\n%s", page);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* The gateway's check: a routing view staler than view_stale_max_ms makes the
 * process not ready, named. The view marks itself current every 500 ms
 * (view.c), so at the lowest bound (100 ms) it is stale most of the time. */
static void test_readyz_names_a_stale_gateway_view(void **state)
{
    harness_t h;
    harness_init(&h, "metrics-view");
    int port = free_port();
    char config[128];
    snprintf(config, sizeof config, "{\"metrics_port\": %d, \"view_stale_max_ms\": 100}", port);
    pid_t pid = harness_start_with(&h, "v1", "gateway", config);
    /* The tasks ready, only the view not: its line is the whole answer. */
    int64_t deadline = harness_now_ms() + WAIT_MS;
    bool seen = false;
    while (!seen && harness_now_ms() < deadline) {
        int status = get(port, "/readyz");
        const char *body = strstr(page, "\r\n\r\n");
        seen = status == 503 && body &&
               strncmp(body + 4, "gateway routing view stale for ", 31) == 0 &&
               strstr(body, " ms (view_stale_max_ms 100)\n") && !strstr(body, "task");
        harness_sleep_ms(20);
    }
    if (!seen)
        fail_msg("no 503 naming only the stale view; last answer:\n%s", page);
    assert_int_equal(get(port, "/healthz"), 200); /* alive all the same */
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* ---- the flow series after real traffic */

#define CALL_MS 15000

static void call_expect(hf_client_t *c, const hf_record_t *req, hf_reply_outcome_t want)
{
    hf_reply_t rep;
    char errstr[256] = "";
    if (client_call(c, req, CALL_MS, 3, &rep, errstr, sizeof errstr) != HF_OK)
        fail_msg("client_call: %s", errstr);
    if (rep.outcome != want)
        fail_msg("%s: %s (%s), want %s", rep.reservation_id, hf_reply_outcome_name(rep.outcome),
                 rep.message, hf_reply_outcome_name(want));
}

/* The sum of the values of every line of page that starts with prefix (the
 * series of a family matching some labels); -1 when no line does. */
static double sum_of(const char *prefix)
{
    double sum = -1;
    char want[512];
    snprintf(want, sizeof want, "\n%s", prefix);
    for (const char *at = strstr(page, want); at; at = strstr(at + 1, want)) {
        const char *end = strchr(at + 1, '\n');
        const char *space = at + 1;
        while (end && space < end && *space != ' ')
            space++;
        if (end && space < end)
            sum = (sum < 0 ? 0 : sum) + strtod(space + 1, NULL);
    }
    return sum;
}

typedef struct {
    const char *prefix; /* a series (family and leading labels) */
    double at_least;
    const char *why;
} expect_t;

/* Scrapes /metrics until every expectation holds; fails naming the first that
 * does not, with the page. */
static void wait_metrics(int port, const expect_t *e, size_t n)
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    size_t bad = 0;
    do {
        assert_int_equal(get(port, "/metrics"), 200);
        for (bad = 0; bad < n && sum_of(e[bad].prefix) >= e[bad].at_least; bad++)
            ;
        if (bad == n)
            return;
        harness_sleep_ms(250);
    } while (harness_now_ms() < deadline);
    fail_msg("%s: want \"%s\" >= %g, have %g in:\n%s", e[bad].why, e[bad].prefix, e[bad].at_least,
             sum_of(e[bad].prefix), page);
}

/* Writes the one warehouse W1 to <workdir>/warehouses.json; its absolute path
 * in path. */
static void write_warehouses(const harness_t *h, char *path, size_t path_size)
{
    char cwd[256];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(path, path_size, "%s/%s/warehouses.json", cwd, h->workdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"warehouses\": [{\"id\":\"W1\",\"lat\":40.71,\"lon\":-74.01,\"cost_per_unit\":1.0}]}",
          f);
    fclose(f);
}

static void test_flow_series_move_with_real_traffic(void **state)
{
    harness_t h;
    harness_init(&h, "metrics-flow");
    int port = free_port();
    char wpath[512], config[1024], key[128];
    write_warehouses(&h, wpath, sizeof wpath);
    snprintf(config, sizeof config,
             "{\"metrics_port\": %d, \"warehouses_file\": \"%s\", \"signal_dwell_ms\": 300}", port,
             wpath);
    pid_t pid = harness_start_with(&h, "f1", "counter,gateway,aggregator", config);
    int first_status;
    char first[4096];
    wait_ready(port, &first_status, first, sizeof first);

    /* Before any traffic: the declared series are there, at zero. */
    assert_int_equal(get(port, "/metrics"), 200);
    assert_true(sum_of("holdfast_replies_total{stage=\"gateway\",request=\"commit\"") == 0);
    assert_true(sum_of("holdfast_expiry_lag_ms_count{stage=\"gateway\"}") == 0);
    assert_true(sum_of("holdfast_signals_emitted_total{kind=\"sold_out\"}") == 0);
    assert_true(sum_of("holdfast_signals_pending_oldest_ms{stage=\"aggregator\"}") >= 0);
    assert_true(sum_of("holdfast_last_signal_age_seconds{stage=\"aggregator\"}") >= 0);

    hf_record_t fr = harness_feed("W1", "SKU-FLOW", HF_FEED_RECEIVE, 4, 1);
    harness_send(&h, HF_T_STOCK_FEED, harness_pair(key, "W1", "SKU-FLOW"), &fr);
    harness_flush(&h);
    hf_counter_state_t c = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&h, "W1", "SKU-FLOW", &c) && c.on_hand == 4) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(100);
    assert_int_equal(c.on_hand, 4);

    hf_client_t *cl = NULL;
    char errstr[256];
    assert_int_equal(client_new(h.bootstrap, NULL, &cl, errstr, sizeof errstr), HF_OK);
    /* Until the aggregator's view has the SKU a reserve may be refused: retry
     * under a new id until one is held. */
    hf_reply_t rep = {0};
    char rid[32] = "";
    deadline = harness_now_ms() + WAIT_MS;
    for (int i = 0; rep.outcome != HF_REPLY_HELD || !rid[0]; i++) {
        assert_true(harness_now_ms() < deadline);
        snprintf(rid, sizeof rid, "flow-r1-%d", i);
        hf_record_t r1 = harness_reserve_req(rid, "SKU-FLOW", 1, 0);
        assert_int_equal(client_call(cl, &r1, CALL_MS, 3, &rep, errstr, sizeof errstr), HF_OK);
        if (rep.outcome != HF_REPLY_HELD)
            harness_sleep_ms(250);
    }
    hf_record_t cm = harness_commit_req(rid, "pay-1", "payment-1");
    call_expect(cl, &cm, HF_REPLY_COMMITTED);
    hf_record_t r2 = harness_reserve_req("flow-r2", "SKU-FLOW", 1, 0);
    call_expect(cl, &r2, HF_REPLY_HELD);
    hf_record_t rl = harness_release_req("flow-r2", "rel-2");
    call_expect(cl, &rl, HF_REPLY_RELEASED);
    hf_record_t r3 = harness_reserve_req("flow-r3", "SKU-FLOW", 1, 1000); /* expires in a second */
    call_expect(cl, &r3, HF_REPLY_HELD);
    const expect_t expired[] = {
        {"holdfast_expiry_lag_ms_count{stage=\"gateway\"}", 1, "the expiry of flow-r3"},
    };
    wait_metrics(port, expired, 1);
    /* Every unit left held by one reservation: the network is sold out. The
     * expired unit reaches the routing view after the expiry (the counter's
     * release, then the aggregator): until then it is refused; retry under a
     * new id. */
    deadline = harness_now_ms() + WAIT_MS;
    for (int i = 0;; i++) { /* bounded by the deadline */
        assert_true(harness_now_ms() < deadline);
        snprintf(rid, sizeof rid, "flow-r4-%d", i);
        hf_record_t r4 = harness_reserve_req(rid, "SKU-FLOW", 3, 0);
        assert_int_equal(client_call(cl, &r4, CALL_MS, 3, &rep, errstr, sizeof errstr), HF_OK);
        if (rep.outcome == HF_REPLY_HELD)
            break;
        if (rep.outcome != HF_REPLY_REJECTED_INSUFFICIENT)
            fail_msg("%s: %s (%s)", rid, hf_reply_outcome_name(rep.outcome), rep.message);
        harness_sleep_ms(250);
    }
    client_destroy(cl);

    const expect_t moved[] = {
        {"holdfast_replies_total{stage=\"gateway\",request=\"commit\",outcome=\"committed\"}", 1,
         "the commit's reply"},
        {"holdfast_replies_total{stage=\"gateway\",request=\"release\",outcome=\"released\"}", 1,
         "the release's reply"},
        {"holdfast_request_latency_ms_count{stage=\"gateway\",request=\"commit\"}", 1,
         "the commit's latency"},
        {"holdfast_request_latency_ms_count{stage=\"gateway\",request=\"release\"}", 1,
         "the release's latency"},
        {"holdfast_signals_emitted_total{kind=\"sold_out\"}", 1, "SOLD_OUT after the dwell"},
        {"holdfast_consumer_lag_records{stage=\"gateway\",topic=\"", 0, "the gateway's lag"},
        {"holdfast_consumer_lag_records{stage=\"counter\",topic=\"", 0, "the counter's lag"},
        {"holdfast_consumer_lag_records{stage=\"aggregator\",topic=\"", 0, "the aggregator's lag"},
        {"holdfast_last_record_age_seconds{stage=\"gateway\"}", 0, "the gateway's record age"},
    };
    wait_metrics(port, moved, sizeof moved / sizeof moved[0]);
    /* Reserves are answered by the gateway, or in two hops by the counter. */
    double held = sum_of("holdfast_replies_total{stage=\"gateway\",request=\"reserve\",outcome="
                         "\"held\"}") +
                  sum_of("holdfast_replies_total{stage=\"counter\",request=\"reserve\",outcome="
                         "\"held\"}");
    double held_latency =
        sum_of("holdfast_request_latency_ms_count{stage=\"gateway\",request=\"reserve\"}") +
        sum_of("holdfast_request_latency_ms_count{stage=\"counter\",request=\"reserve\"}");
    if (held < 4 || held_latency < 4)
        fail_msg("4 reserves held: %g held replies, %g latencies counted in:\n%s", held,
                 held_latency, page);
    /* Latencies and the expiry's lag are those of a quiet local broker. */
    double commit_ms =
        sum_of("holdfast_request_latency_ms_sum{stage=\"gateway\",request=\"commit\"}");
    assert_true(commit_ms >= 0 && commit_ms < 10000);
    double lag_ms = sum_of("holdfast_expiry_lag_ms_sum{stage=\"gateway\"}");
    if (!(lag_ms >= 0 && lag_ms < 5000))
        fail_msg("the expiry fired %g ms after expires_at_ms:\n%s", lag_ms, page);
    assert_true(sum_of("holdfast_last_signal_age_seconds{stage=\"aggregator\"}") < 30);
    assert_true(sum_of("holdfast_last_record_age_seconds{stage=\"gateway\"}") < 30);

    /* Quiet now: every input partition read to its end, its lag 0 (a
     * transaction's commit marker is no record to read). */
    deadline = harness_now_ms() + 10000;
    double lag = -1;
    do {
        harness_sleep_ms(500);
        assert_int_equal(get(port, "/metrics"), 200);
        lag = sum_of("holdfast_consumer_lag_records{");
    } while (lag != 0 && harness_now_ms() < deadline);
    if (lag != 0)
        fail_msg("an idle pipeline has a consumer lag of %g:\n%s", lag, page);
    /* Every assigned input partition has its lag, those that never had a
     * record too. */
    char series[256];
    snprintf(
        series, sizeof series,
        "holdfast_consumer_lag_records{stage=\"counter\",topic=\"%sholdfast.counter-commands\"",
        h.prefix);
    int32_t lines = 0;
    for (const char *at = strstr(page, series); at; at = strstr(at + 1, series))
        lines++;
    if (lines != harness_partitions(&h, HF_T_COUNTER_COMMANDS))
        fail_msg("%d of %d counter-commands partitions have a lag:\n%s", lines,
                 harness_partitions(&h, HF_T_COUNTER_COMMANDS), page);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* ---- where a Reserve's latency starts */

/* How long the Reserves below wait in holdfast.requests while no gateway runs:
 * past the 5000 ms bucket, and far above what the hops after it take. */
#define QUEUED_MS 6000

typedef struct {
    const char *rid;
    int64_t appended_ms; /* its Reserve's timestamp on holdfast.requests; 0: not seen */
    bool replied;
    hf_reply_t reply;
} answered_t;

static void find_request(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    answered_t *a = opaque;
    if (rec->type == HF_REC_RESERVE && strcmp(rec->u.reserve.reservation_id, a->rid) == 0)
        a->appended_ms = msg->timestamp_ms;
}

static void find_reply(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    (void)msg;
    answered_t *a = opaque;
    if (rec->type == HF_REC_REPLY && strcmp(rec->u.reply.reservation_id, a->rid) == 0) {
        a->replied = true;
        a->reply = rec->u.reply;
    }
}

/* Waits for a's reply, then reads when its Reserve was appended; returns how
 * long after that it was answered, ms. */
static int64_t answered_after_ms(harness_t *h, answered_t *a)
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!a->replied && harness_now_ms() < deadline) {
        harness_read(h, HF_T_REPLIES, find_reply, a);
        if (!a->replied)
            harness_sleep_ms(250);
    }
    if (!a->replied)
        fail_msg("%s: no reply within %d ms", a->rid, WAIT_MS);
    if (a->reply.outcome != HF_REPLY_HELD)
        fail_msg("%s: %s (%s), want HELD", a->rid, hf_reply_outcome_name(a->reply.outcome),
                 a->reply.message);
    harness_read(h, HF_T_REQUESTS, find_request, a);
    assert_true(a->appended_ms > 0);
    return a->reply.replied_at_ms - a->appended_ms;
}

/* The reserve latency series of stage on the page at hand. */
typedef struct {
    double count, sum_ms, over_5000; /* observations, their sum, those over 5000 ms */
} reserve_latency_t;

static double series(const char *family, const char *stage, const char *more_labels)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix,
             "holdfast_request_latency_ms_%s{stage=\"%s\",request=\"reserve\"%s}", family, stage,
             more_labels);
    double v = sum_of(prefix);
    return v < 0 ? 0 : v;
}

static reserve_latency_t reserve_latency(int port, const char *stage)
{
    assert_int_equal(get(port, "/metrics"), 200);
    reserve_latency_t l;
    l.count = series("count", stage, "");
    l.sum_ms = series("sum", stage, "");
    l.over_5000 = l.count - series("bucket", stage, ",le=\"5000\"");
    return l;
}

/* The one observation the stage made since `before` is the Reserve's whole
 * latency, want_ms: over 5000 ms, and (when that stage made no other) exactly
 * from the Reserve's append time to its reply. */
static void expect_one_reserve_latency(int port, const char *stage, reserve_latency_t before,
                                       int64_t want_ms)
{
    reserve_latency_t l = reserve_latency(port, stage);
    print_message("%s: reserve latency %g ms over %g observation(s), want one of %lld ms\n", stage,
                  l.sum_ms - before.sum_ms, l.count - before.count, (long long)want_ms);
    if (l.over_5000 - before.over_5000 < 1)
        fail_msg("%s: the Reserve that waited %d ms in holdfast.requests is not counted over "
                 "5000 ms (answered %lld ms after its append):\n%s",
                 stage, QUEUED_MS, (long long)want_ms, page);
    if (l.count - before.count == 1 && l.sum_ms - before.sum_ms != (double)want_ms)
        fail_msg("%s: latency %g ms, want %lld ms (reply's replied_at_ms - the Reserve's "
                 "timestamp on holdfast.requests)",
                 stage, l.sum_ms - before.sum_ms, (long long)want_ms);
}

/* A Reserve answered in a later transaction than the one that applied it —
 * by its counter in two hops, or by the gateway after its holds' results —
 * counts its latency from its append to holdfast.requests, not from when the
 * gateway applied it: two Reserves queued there while the gateway is down
 * have their wait in the histogram. */
static void test_a_reserve_answered_later_counts_its_wait_in_the_requests_topic(void **state)
{
    harness_t h;
    harness_init(&h, "metrics-wait");
    int cport = free_port(), gport = free_port();
    char wpath[512], cconfig[1024], gconfig[1024], key[128];
    write_warehouses(&h, wpath, sizeof wpath);
    /* No shedding: a Reserve that waited past reserve_deadline_ms is BUSY. */
#define WAIT_CONFIG                                                                                \
    "{\"metrics_port\": %d, \"warehouses_file\": \"%s\", \"reserve_deadline_ms\": 0}"
    snprintf(cconfig, sizeof cconfig, WAIT_CONFIG, cport, wpath);
    snprintf(gconfig, sizeof gconfig, WAIT_CONFIG, gport, wpath);
#undef WAIT_CONFIG
    pid_t counter = harness_start_with(&h, "c1", "counter,aggregator", cconfig);
    pid_t gateway = harness_start_with(&h, "g1", "gateway", gconfig);
    int first_status;
    char first[4096];
    wait_ready(cport, &first_status, first, sizeof first);
    wait_ready(gport, &first_status, first, sizeof first);

    const char *skus[] = {"SKU-WA", "SKU-WB"};
    for (int i = 0; i < 2; i++) {
        hf_record_t fr = harness_feed("W1", skus[i], HF_FEED_RECEIVE, 10, 1);
        harness_send(&h, HF_T_STOCK_FEED, harness_pair(key, "W1", skus[i]), &fr);
    }
    harness_flush(&h);
    /* Until the routing view has both SKUs a reserve may be refused: retry
     * under a new id until one of both is held. */
    hf_client_t *cl = NULL;
    char errstr[256];
    assert_int_equal(client_new(h.bootstrap, NULL, &cl, errstr, sizeof errstr), HF_OK);
    hf_reply_t rep = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    for (int i = 0; rep.outcome != HF_REPLY_HELD || !rep.reservation_id[0]; i++) {
        assert_true(harness_now_ms() < deadline);
        char rid[32];
        snprintf(rid, sizeof rid, "wait-warm-%d", i);
        hf_record_t r = harness_reserve_req(rid, "SKU-WA", 1, 0);
        r.u.reserve.lines_count = 2;
        r.u.reserve.lines[1] = (hf_line_t){"SKU-WB", 1};
        assert_int_equal(client_call(cl, &r, CALL_MS, 3, &rep, errstr, sizeof errstr), HF_OK);
        if (rep.outcome != HF_REPLY_HELD)
            harness_sleep_ms(250);
    }
    client_destroy(cl);
    assert_int_equal(harness_stop(gateway), 0);

    /* With no gateway running: a Reserve its counter will answer (one line,
     * one hold) and one the gateway will (two lines, two holds) queue up. */
    reserve_latency_t counter_before = reserve_latency(cport, "counter");
    answered_t two_hops = {.rid = "wait-two-hops"}, three_hops = {.rid = "wait-three-hops"};
    hf_record_t r1 = harness_reserve_req(two_hops.rid, "SKU-WA", 1, 0);
    hf_record_t r2 = harness_reserve_req(three_hops.rid, "SKU-WA", 1, 0);
    r2.u.reserve.lines_count = 2;
    r2.u.reserve.lines[1] = (hf_line_t){"SKU-WB", 1};
    harness_send(&h, HF_T_REQUESTS, two_hops.rid, &r1);
    harness_send(&h, HF_T_REQUESTS, three_hops.rid, &r2);
    harness_flush(&h);
    harness_sleep_ms(QUEUED_MS);
    gateway = harness_start_with(&h, "g1", "gateway", gconfig);

    int64_t two_hops_ms = answered_after_ms(&h, &two_hops);
    int64_t three_hops_ms = answered_after_ms(&h, &three_hops);
    assert_true(two_hops_ms >= QUEUED_MS && three_hops_ms >= QUEUED_MS);
    expect_one_reserve_latency(cport, "counter", counter_before, two_hops_ms);
    /* The gateway's metrics started with its restart: only its own answer. */
    expect_one_reserve_latency(gport, "gateway", (reserve_latency_t){0}, three_hops_ms);

    assert_int_equal(harness_stop(gateway), 0);
    assert_int_equal(harness_stop(counter), 0);
    harness_cleanup(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readyz_follows_the_start_and_the_restore_and_metrics_count),
        cmocka_unit_test(test_readyz_names_a_stale_gateway_view),
        cmocka_unit_test(test_flow_series_move_with_real_traffic),
        cmocka_unit_test(test_a_reserve_answered_later_counts_its_wait_in_the_requests_topic),
    };
    return cmocka_run_group_tests_name("metrics endpoints of a real process", tests, NULL, NULL);
}
