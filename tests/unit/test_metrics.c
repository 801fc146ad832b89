/* The metrics registry, its Prometheus text and the HTTP endpoints, over a real
 * loopback socket: what a scraper and the liveness and readiness probes see
 * after the task loop counted and reported things. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "hf_limits.h"
#include "hf_clock.h"
#include "metrics.h"
#include "metrics_flow.h"

static char page[64 * 1024];

/* holdfast's static thread-local storage is megabytes (counter_sweep.c keeps a
 * 4.3 MB scan buffer per thread), and glibc carves it out of each new thread's
 * stack: a connection thread's stack must have room for it. This binary links
 * no stage, so it carries as much itself. */
#define PROCESS_TLS_BYTES (5 * 1024 * 1024)
static _Thread_local volatile char process_tls[PROCESS_TLS_BYTES];

static const metrics_serve_opts_t loopback = {"127.0.0.1", 0, 30000, 3, 0};

static double forty_two(void *opaque)
{
    return *(double *)opaque;
}

static void expect_line(const char *text, const char *line)
{
    char want[512];
    snprintf(want, sizeof want, "\n%s\n", line);
    if (!strstr(text, want))
        fail_msg("missing line \"%s\" in:\n%s", line, text);
}

static void test_counters_histogram_and_gauges_render_as_prometheus_text(void **state)
{
    int s = metrics_stage("counter");
    assert_int_equal(metrics_stage("counter"), s); /* one slot per stage */
    int g = metrics_stage("gateway");
    assert_true(g != s);
    metrics_add(s, HF_M_RECORDS, 5);
    metrics_add(s, HF_M_ABORTS, 1);
    metrics_add(g, HF_M_RECORDS, 2);
    metrics_observe_commit_ms(s, 3);
    metrics_observe_commit_ms(s, 700);
    metrics_observe_commit_ms(s, 9000);
    metrics_add_partitions(s, 3);
    metrics_add_partitions(s, -1);
    static double value = 42.5;
    assert_true(metrics_gauge("holdfast_test_gauge", "A test gauge", forty_two, &value));

    process_tls[PROCESS_TLS_BYTES - 1] = 1; /* used: kept by the compiler */
    assert_int_equal(process_tls[PROCESS_TLS_BYTES - 1], 1);
    size_t need = metrics_render(page, sizeof page);
    assert_true(need < sizeof page);
    expect_line(page, "# TYPE holdfast_records_applied_total counter");
    expect_line(page, "holdfast_records_applied_total{stage=\"counter\"} 5");
    expect_line(page, "holdfast_records_applied_total{stage=\"gateway\"} 2");
    expect_line(page, "holdfast_transactions_aborted_total{stage=\"counter\"} 1");
    expect_line(page, "holdfast_transactions_committed_total{stage=\"counter\"} 0");
    expect_line(page, "holdfast_partitions_owned{stage=\"counter\"} 2");
    /* Cumulative buckets: 3 ms is <= 5, 700 ms <= 1000, 9 s only in +Inf. */
    expect_line(page, "holdfast_transaction_commit_ms_bucket{stage=\"counter\",le=\"2\"} 0");
    expect_line(page, "holdfast_transaction_commit_ms_bucket{stage=\"counter\",le=\"5\"} 1");
    expect_line(page, "holdfast_transaction_commit_ms_bucket{stage=\"counter\",le=\"500\"} 1");
    expect_line(page, "holdfast_transaction_commit_ms_bucket{stage=\"counter\",le=\"1000\"} 2");
    expect_line(page, "holdfast_transaction_commit_ms_bucket{stage=\"counter\",le=\"5000\"} 2");
    expect_line(page, "holdfast_transaction_commit_ms_bucket{stage=\"counter\",le=\"+Inf\"} 3");
    expect_line(page, "holdfast_transaction_commit_ms_count{stage=\"counter\"} 3");
    expect_line(page, "holdfast_transaction_commit_ms_sum{stage=\"counter\"} 9703");
    expect_line(page, "# TYPE holdfast_test_gauge gauge");
    expect_line(page, "holdfast_test_gauge 42.5");

    /* A standby's lag per followed partition; a partition it stops following
     * (owned here now) is no longer shown, a lag of 0 is. */
    metrics_standby_lag(s, 3, 42);
    metrics_standby_lag(s, 4, 0);
    metrics_standby_lag(s, 5, 7);
    metrics_standby_lag(s, 5, -1);
    metrics_add(s, HF_M_RESTORE_MS, 12);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    expect_line(page, "# TYPE holdfast_standby_lag_records gauge");
    expect_line(page, "holdfast_standby_lag_records{stage=\"counter\",partition=\"3\"} 42");
    expect_line(page, "holdfast_standby_lag_records{stage=\"counter\",partition=\"4\"} 0");
    if (strstr(page, "partition=\"5\""))
        fail_msg("a partition no longer followed is still shown:\n%s", page);
    expect_line(page, "holdfast_restore_milliseconds_total{stage=\"counter\"} 12");
    expect_line(page, "# TYPE holdfast_metrics_render_truncated_total counter");
}

/* The value of the first line that starts with prefix, as a number; fails
 * when there is none. */
static double value_of(const char *text, const char *prefix)
{
    char want[512];
    snprintf(want, sizeof want, "\n%s", prefix);
    const char *at = strstr(text, want);
    if (!at) {
        fail_msg("no line starting \"%s\" in:\n%s", prefix, text);
        return -1;
    }
    return strtod(at + strlen(want), NULL);
}

/* Lines of text that are samples of the family name (name, name{...},
 * name_bucket{...}, name_sum{...}, name_count{...}). */
static int family_samples(const char *text, const char *name)
{
    static const char *const tails[] = {" ", "{", "_bucket{", "_sum{", "_count{"};
    size_t len = strlen(name);
    int n = 0;
    for (const char *line = text; *line;) {
        if (strncmp(line, name, len) == 0)
            for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++)
                if (strncmp(line + len, tails[t], strlen(tails[t])) == 0) {
                    n++;
                    break;
                }
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : line + strlen(line);
    }
    return n;
}

/* A page that does not fit its buffer is cut before the first metric family
 * that does not fit whole: every line whole, every family it shows with all
 * its samples (a histogram with all its buckets), and the trailer counting
 * the cut pages last, so a scraper never gets a line it cannot parse. */
static void test_a_page_too_big_keeps_whole_families_and_counts_the_cut(void **state)
{
    (void)state;
    int s = metrics_stage("counter");
    metrics_observe_commit_ms(s, 4);
    static char full[64 * 1024];
    size_t need = metrics_render(full, sizeof full);
    assert_true(need < sizeof full);
    double cut_before = value_of(full, "holdfast_metrics_render_truncated_total ");
    /* Measuring alone (no buffer) counts nothing. */
    assert_true(metrics_render(NULL, 0) >= need - 8);
    int cuts = 0;
    static char small[64 * 1024];
    for (size_t size = 1; size < need; size += need / 37 + 1) {
        assert_true(metrics_render(small, size) >= size);
        cuts++;
        size_t len = strlen(small);
        assert_true(len < size);
        if (len == 0) { /* no room for anything, not even the trailer */
            assert_true(size < 256);
            continue;
        }
        assert_int_equal(small[len - 1], '\n');
        const char *trailer = strstr(small, "# HELP holdfast_metrics_render_truncated_total ");
        assert_non_null(trailer);
        char want[96];
        snprintf(want, sizeof want, "\nholdfast_metrics_render_truncated_total %d\n",
                 (int)cut_before + cuts);
        assert_non_null(strstr(trailer, want));
        assert_string_equal(strstr(trailer, want) + strlen(want), ""); /* the trailer is last */
        /* Every family shown has every sample line the whole page has. */
        for (const char *h = strstr(small, "# HELP "); h && h < trailer;
             h = strstr(h + 1, "\n# HELP ")) {
            if (*h == '\n')
                h++;
            char name[96];
            assert_int_equal(sscanf(h, "# HELP %95s", name), 1);
            if (family_samples(small, name) != family_samples(full, name))
                fail_msg("family %s cut at a %zu-byte page: %d of %d samples:\n%s", name, size,
                         family_samples(small, name), family_samples(full, name), small);
        }
    }
    assert_true(cuts > 10);
    assert_true(metrics_render(full, sizeof full) < sizeof full);
    assert_int_equal(value_of(full, "holdfast_metrics_render_truncated_total "), cut_before + cuts);
}

static void test_replies_and_their_latency_render_by_request_and_outcome(void **state)
{
    int gw = metrics_stage("flow-gateway");
    int quiet = metrics_stage("flow-quiet"); /* declares no reply series */
    metrics_flow_declare(gw, METRICS_FLOW_REPLIES | METRICS_FLOW_EXPIRY);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    /* Declared: every request x outcome is there at 0 before the first reply. */
    expect_line(page, "# TYPE holdfast_replies_total counter");
    expect_line(page, "holdfast_replies_total{stage=\"flow-gateway\",request=\"extend\","
                      "outcome=\"busy\"} 0");
    expect_line(page,
                "holdfast_request_latency_ms_count{stage=\"flow-gateway\",request=\"commit\"} 0");
    expect_line(page, "holdfast_expiry_lag_ms_bucket{stage=\"flow-gateway\",le=\"+Inf\"} 0");
    if (strstr(page, "stage=\"flow-quiet\",request="))
        fail_msg("a stage that declared no replies has reply series:\n%s", page);

    metrics_reply(gw, HF_REC_RESERVE, HF_REPLY_HELD, 3);     /* <= 5 */
    metrics_reply(gw, HF_REC_RESERVE, HF_REPLY_HELD, 5);     /* <= 5: a bound is inclusive */
    metrics_reply(gw, HF_REC_RESERVE, HF_REPLY_HELD, 700);   /* <= 1000 */
    metrics_reply(gw, HF_REC_RESERVE, HF_REPLY_HELD, 20000); /* +Inf only */
    metrics_reply(gw, HF_REC_RESERVE, HF_REPLY_REJECTED_INSUFFICIENT, -1); /* no latency */
    metrics_reply(gw, HF_REC_COMMIT, HF_REPLY_COMMITTED, 12);
    metrics_reply(gw, HF_REC_HOLD, HF_REPLY_HELD, 1); /* not a request: dropped */
    metrics_reply(quiet, HF_REC_RELEASE, HF_REPLY_RELEASED, 1);
    metrics_expiry(gw, 40);
    metrics_expiry(gw, 6000);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    expect_line(page, "holdfast_replies_total{stage=\"flow-gateway\",request=\"reserve\","
                      "outcome=\"held\"} 4");
    expect_line(page, "holdfast_replies_total{stage=\"flow-gateway\",request=\"reserve\","
                      "outcome=\"rejected_insufficient\"} 1");
    expect_line(page, "holdfast_replies_total{stage=\"flow-gateway\",request=\"commit\","
                      "outcome=\"committed\"} 1");
    expect_line(page, "holdfast_replies_total{stage=\"flow-gateway\",request=\"commit\","
                      "outcome=\"held\"} 0");
    /* A stage that did not declare them has them once it replied. */
    expect_line(page, "holdfast_replies_total{stage=\"flow-quiet\",request=\"release\","
                      "outcome=\"released\"} 1");
    /* Cumulative buckets; the unknown latency counted as a reply, not observed. */
    const char *lat = "holdfast_request_latency_ms";
    char line[256];
    static const struct {
        const char *le;
        int count;
    } want[] = {{"5", 2},   {"10", 2},   {"25", 2},   {"50", 2},   {"100", 2},   {"250", 2},
                {"500", 2}, {"1000", 3}, {"2500", 3}, {"5000", 3}, {"10000", 3}, {"+Inf", 4}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(line, sizeof line,
                 "%s_bucket{stage=\"flow-gateway\",request=\"reserve\",le=\"%s\"} %d", lat,
                 want[i].le, want[i].count);
        expect_line(page, line);
    }
    expect_line(page, "holdfast_request_latency_ms_sum{stage=\"flow-gateway\",request=\"reserve\"} "
                      "20708");
    expect_line(page,
                "holdfast_request_latency_ms_count{stage=\"flow-gateway\",request=\"reserve\"} 4");
    expect_line(page,
                "holdfast_request_latency_ms_bucket{stage=\"flow-gateway\",request=\"commit\","
                "le=\"10\"} 0");
    expect_line(page,
                "holdfast_request_latency_ms_bucket{stage=\"flow-gateway\",request=\"commit\","
                "le=\"25\"} 1");
    expect_line(page, "holdfast_expiry_lag_ms_bucket{stage=\"flow-gateway\",le=\"50\"} 1");
    expect_line(page, "holdfast_expiry_lag_ms_bucket{stage=\"flow-gateway\",le=\"5000\"} 1");
    expect_line(page, "holdfast_expiry_lag_ms_bucket{stage=\"flow-gateway\",le=\"10000\"} 2");
    expect_line(page, "holdfast_expiry_lag_ms_sum{stage=\"flow-gateway\"} 6040");
    expect_line(page, "holdfast_expiry_lag_ms_count{stage=\"flow-gateway\"} 2");
    /* The reply to a record that is no request was dropped, and counted. */
    assert_true(value_of(page, "holdfast_metrics_dropped_total ") >= 1);
    /* One family, one TYPE line: Prometheus refuses a family split in two. */
    const char *first = strstr(page, "# TYPE holdfast_replies_total ");
    assert_non_null(first);
    assert_null(strstr(first + 1, "# TYPE holdfast_replies_total "));
}

static void test_consumer_lag_appears_per_assigned_partition_and_disappears(void **state)
{
    int st = metrics_stage("flow-lag");
    metrics_input_topic(st, 0, "t.requests");
    metrics_input_topic(st, 1, "t.results");
    metrics_input_topic(st, 1, "t.other"); /* the first name stays */
    metrics_consumer_lag(st, 0, 2, 17);
    metrics_consumer_lag(st, 1, 2, 0);
    metrics_consumer_lag(st, 0, 5, 3);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    expect_line(page, "# TYPE holdfast_consumer_lag_records gauge");
    expect_line(page, "holdfast_consumer_lag_records{stage=\"flow-lag\",topic=\"t.requests\","
                      "partition=\"2\"} 17");
    expect_line(page, "holdfast_consumer_lag_records{stage=\"flow-lag\",topic=\"t.results\","
                      "partition=\"2\"} 0");
    expect_line(page, "holdfast_consumer_lag_records{stage=\"flow-lag\",topic=\"t.requests\","
                      "partition=\"5\"} 3");
    /* Revoked: partition 2 goes from both topics, 5 stays; a lag not known
     * (< 0) takes it away too. */
    metrics_partition_gone(st, 2);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    if (strstr(page, "stage=\"flow-lag\",topic=\"t.requests\",partition=\"2\"") ||
        strstr(page, "topic=\"t.results\""))
        fail_msg("a revoked partition's lag is still shown:\n%s", page);
    expect_line(page, "holdfast_consumer_lag_records{stage=\"flow-lag\",topic=\"t.requests\","
                      "partition=\"5\"} 3");
    metrics_consumer_lag(st, 0, 5, -1);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    if (strstr(page, "holdfast_consumer_lag_records{stage=\"flow-lag\""))
        fail_msg("a partition whose lag is unknown is still shown:\n%s", page);
    /* Beyond the partition bound: dropped and counted, never a new series. */
    double dropped = value_of(page, "holdfast_metrics_dropped_total ");
    metrics_consumer_lag(st, 0, METRICS_FLOW_PARTITIONS_MAX, 9);
    metrics_consumer_lag(st, 0, -3, 9);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    assert_true(value_of(page, "holdfast_metrics_dropped_total ") == dropped + 2);
    if (strstr(page, "holdfast_consumer_lag_records{stage=\"flow-lag\""))
        fail_msg("a partition beyond the bound got a series:\n%s", page);
}

static void test_ages_and_signals_render_and_move(void **state)
{
    int agg = metrics_stage("flow-aggregator");
    metrics_flow_declare(agg, METRICS_FLOW_SIGNALS);
    hf_sleep_ms(30);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    /* Nothing applied or emitted yet: the ages count from the stage's start. */
    double record_age =
        value_of(page, "holdfast_last_record_age_seconds{stage=\"flow-aggregator\"} ");
    double signal_age =
        value_of(page, "holdfast_last_signal_age_seconds{stage=\"flow-aggregator\"} ");
    assert_true(record_age >= 0.02 && record_age < 60);
    assert_true(signal_age >= 0.02 && signal_age < 60);
    expect_line(page, "holdfast_signals_pending_oldest_ms{stage=\"flow-aggregator\"} 0");
    double sold_out = value_of(page, "holdfast_signals_emitted_total{kind=\"sold_out\"} ");
    expect_line(page, "# TYPE holdfast_signals_emitted_total counter");
    if (strstr(page, "holdfast_last_signal_age_seconds{stage=\"flow-gateway\"}"))
        fail_msg("a stage without signals has a signal age:\n%s", page);

    metrics_records_applied(agg, hf_mono_ms());
    metrics_signal(agg, HF_SIGNAL_SOLD_OUT);
    metrics_signal(agg, HF_SIGNAL_SOLD_OUT);
    metrics_signal(agg, HF_SIGNAL_BACK_IN_STOCK);
    /* Two partitions with due timers: the oldest counts; one revoked goes. */
    int64_t now = hf_wall_ms();
    metrics_signal_pending(agg, 1, now - 4000);
    metrics_signal_pending(agg, 2, now - 1500);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    assert_true(value_of(page, "holdfast_last_record_age_seconds{stage=\"flow-aggregator\"} ") <
                0.02);
    assert_true(value_of(page, "holdfast_last_signal_age_seconds{stage=\"flow-aggregator\"} ") <
                0.02);
    assert_true(value_of(page, "holdfast_signals_emitted_total{kind=\"sold_out\"} ") ==
                sold_out + 2);
    assert_true(value_of(page, "holdfast_signals_emitted_total{kind=\"back_in_stock\"} ") >= 1);
    double pending =
        value_of(page, "holdfast_signals_pending_oldest_ms{stage=\"flow-aggregator\"} ");
    assert_true(pending >= 4000 && pending < 4000 + 5000);
    metrics_partition_gone(agg, 1);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    pending = value_of(page, "holdfast_signals_pending_oldest_ms{stage=\"flow-aggregator\"} ");
    assert_true(pending >= 1500 && pending < 4000);
    metrics_signal_pending(agg, 2, 0); /* the tick found none due */
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    expect_line(page, "holdfast_signals_pending_oldest_ms{stage=\"flow-aggregator\"} 0");
}

/* One HTTP exchange with the server on 127.0.0.1:port (the server closes the
 * connection after it: HTTP/1.0 or Connection: close); the response in page. */
static void http(int port, const char *request)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(send(fd, request, strlen(request), 0), (ssize_t)strlen(request));
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof page && (r = recv(fd, page + len, sizeof page - 1 - len, 0)) > 0)
        len += (size_t)r;
    page[len] = '\0';
    close(fd);
}

/* The status code of the response in text ("HTTP/1.1 200 OK"), -1 if none. */
static int status_of(const char *text)
{
    int major, minor, status;
    return sscanf(text, "HTTP/%d.%d %d", &major, &minor, &status) == 3 ? status : -1;
}

static void expect_status(const char *text, int status)
{
    if (status_of(text) != status)
        fail_msg("expected status %d, got:\n%s", status, text);
}

/* Reads one response (head and Content-Length body) from fd into page. */
static void read_response(int fd)
{
    size_t len = 0;
    char *end = NULL;
    while (!(end = strstr(page, "\r\n\r\n"))) {
        ssize_t r = recv(fd, page + len, sizeof page - 1 - len, 0);
        assert_true(r > 0);
        len += (size_t)r;
        page[len] = '\0';
    }
    const char *cl = strcasestr(page, "\r\nContent-Length:");
    assert_non_null(cl);
    size_t want = (size_t)(end + 4 - page) + strtoul(cl + 17, NULL, 10);
    while (len < want) {
        ssize_t r = recv(fd, page + len, sizeof page - 1 - len, 0);
        assert_true(r > 0);
        len += (size_t)r;
    }
    page[len] = '\0';
}

static void test_http_serves_metrics_and_health_and_refuses_the_rest(void **state)
{
    int port = 0;
    char errstr[256];
    assert_int_equal(metrics_serve(&loopback, &port, errstr, sizeof errstr), 0);
    assert_true(port > 0);
    metrics_add(metrics_stage("relay"), HF_M_TXNS, 7);

    http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect_status(page, 200);
    assert_non_null(strstr(page, "Content-Type: text/plain; version=0.0.4\r\n"));
    expect_line(page, "holdfast_transactions_committed_total{stage=\"relay\"} 7");
    http(port, "GET /metrics?name[]=x HTTP/1.0\r\n\r\n"); /* a query is not a path */
    expect_status(page, 200);

    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    expect_status(page, 200);
    assert_non_null(strstr(page, "\r\n\r\nok\n"));
    http(port, "HEAD /healthz HTTP/1.0\r\n\r\n"); /* the head only */
    expect_status(page, 200);
    assert_non_null(strstr(page, "\r\n\r\n"));
    assert_string_equal(strstr(page, "\r\n\r\n"), "\r\n\r\n");

    /* A known path with another method: 405 naming the methods; an unknown one: 404. */
    http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    expect_status(page, 405);
    assert_non_null(strstr(page, "\r\nAllow: GET, HEAD\r\n"));
    http(port, "DELETE /readyz HTTP/1.0\r\n\r\n");
    expect_status(page, 405);
    http(port, "GET /metrics/ HTTP/1.0\r\n\r\n");
    expect_status(page, 404);
    http(port, "GET / HTTP/1.0\r\n\r\n");
    expect_status(page, 404);
    assert_non_null(strstr(page, "try GET /metrics, /healthz or /readyz"));
    /* No endpoint takes a body: a long one is refused before any handler runs. */
    static char big[HF_METRICS_BODY_MAX_BYTES + 200];
    int n = snprintf(big, sizeof big, "POST /healthz HTTP/1.0\r\nContent-Length: %d\r\n\r\n",
                     HF_METRICS_BODY_MAX_BYTES + 1);
    memset(big + n, 'x', (size_t)HF_METRICS_BODY_MAX_BYTES + 1);
    big[n + HF_METRICS_BODY_MAX_BYTES + 1] = '\0';
    http(port, big);
    expect_status(page, 413);
    assert_non_null(strstr(page, "body_too_large"));
    http(port, "GET /healthz HTTP/1.0\r\n\r\n"); /* and the server goes on */
    expect_status(page, 200);

    /* A client that connects and says nothing does not hold up the next probe. */
    int silent = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(silent, (struct sockaddr *)&to, sizeof to), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(strstr(page, "\r\n\r\nok\n"));
    assert_true(t1.tv_sec - t0.tv_sec <= 1);
    close(silent);

    /* The port is really held while serving. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), -1);
    close(fd);
    metrics_stop();
    metrics_stop(); /* idempotent */
}

static int connect_loopback(int port);

/* HTTP/1.1 keep-alive: a scraper's requests share one connection. */
static void test_requests_on_one_connection_are_each_answered(void **state)
{
    int port = 0;
    char errstr[256];
    assert_int_equal(metrics_serve(&loopback, &port, errstr, sizeof errstr), 0);
    int fd = connect_loopback(port);
    static const char scrape[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(send(fd, scrape, sizeof scrape - 1, 0), (ssize_t)sizeof scrape - 1);
    read_response(fd);
    expect_status(page, 200);
    assert_non_null(strstr(page, "# TYPE holdfast_records_applied_total counter"));
    page[0] = '\0';
    static const char probe[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert_int_equal(send(fd, probe, sizeof probe - 1, 0), (ssize_t)sizeof probe - 1);
    read_response(fd);
    expect_status(page, 200);
    assert_non_null(strstr(page, "\r\n\r\nok\n"));
    char c;
    assert_int_equal(recv(fd, &c, 1, 0), 0); /* closed as asked */
    close(fd);
    metrics_stop();
}

/* Elapsed ms since t0 (monotonic). */
static long elapsed_ms(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static int connect_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
    return fd;
}

static void test_idle_clients_do_not_delay_a_health_probe(void **state)
{
    int port = 0;
    char errstr[256];
    assert_int_equal(metrics_serve(&loopback, &port, errstr, sizeof errstr), 0);
    /* Three clients that connect and say nothing, one that sends half a line. */
    int idle[4];
    for (int i = 0; i < 3; i++)
        idle[i] = connect_loopback(port);
    idle[3] = connect_loopback(port);
    assert_int_equal(send(idle[3], "GET /hea", 8, 0), 8);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    long probe_ms = elapsed_ms(&t0);
    expect_status(page, 200);
    if (probe_ms >= 1000)
        fail_msg("the probe took %ld ms behind idle clients (a 1 s probe fails)", probe_ms);
    /* Each idle client is dropped at its deadline (2 s), not held forever. */
    char c;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(recv(idle[0], &c, 1, 0), 0);
    assert_true(elapsed_ms(&t0) <= 3000);
    for (int i = 0; i < 4; i++)
        close(idle[i]);
    metrics_stop();
}

/* What a client connecting to addr:port gets: 0 connected, else errno. */
static int connect_to(const char *addr, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, addr, &to.sin_addr);
    int rc = connect(fd, (struct sockaddr *)&to, sizeof to) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

static void test_it_listens_on_metrics_bind_only_loopback_by_default(void **state)
{
    static hf_config_t cfg;
    config_defaults(&cfg);
    assert_string_equal(cfg.metrics_bind, "127.0.0.1");
    /* 127.0.0.2 is also this host: bound there, 127.0.0.1 is refused. */
    metrics_serve_opts_t o = loopback;
    o.bind = "127.0.0.2";
    int port = 0;
    char errstr[256];
    assert_int_equal(metrics_serve(&o, &port, errstr, sizeof errstr), 0);
    assert_int_equal(connect_to("127.0.0.2", port), 0);
    assert_int_equal(connect_to("127.0.0.1", port), ECONNREFUSED);
    metrics_stop();
    o.bind = "localhost";
    assert_int_equal(metrics_serve(&o, &port, errstr, sizeof errstr), HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "metrics_bind 'localhost'"));
    /* The setting is checked when the config is loaded, naming the key. */
    FILE *f = fopen("build/test_metrics_bind.json", "w");
    assert_non_null(f);
    fputs("{\"metrics_bind\": \"0.0.0.0.0\"}", f);
    fclose(f);
    assert_int_equal(config_load_file(&cfg, "build/test_metrics_bind.json", errstr, sizeof errstr),
                     HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "metrics_bind"));
}

/* libmicrohttpd closes a connection beyond the bound at once: the probe fails
 * fast instead of waiting behind the idle ones. */
static void test_a_full_table_of_clients_is_refused_at_once_not_a_hang(void **state)
{
    int port = 0;
    char errstr[256];
    assert_int_equal(metrics_serve(&loopback, &port, errstr, sizeof errstr), 0);
    int idle[HF_METRICS_CLIENTS_MAX];
    for (int i = 0; i < HF_METRICS_CLIENTS_MAX; i++)
        idle[i] = connect_loopback(port);
    usleep(300 * 1000); /* the server has taken them all */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    assert_true(elapsed_ms(&t0) < 1000);
    assert_string_equal(page, ""); /* closed without an answer */
    for (int i = 0; i < HF_METRICS_CLIENTS_MAX; i++)
        close(idle[i]);
    usleep(300 * 1000); /* the closes are seen: the slots are free again */
    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    expect_status(page, 200);
    metrics_stop();
}

static bool view_current = true;
static long view_stale_ms = 12000;

static bool fake_view_check(void *opaque, char *why, size_t why_size)
{
    (void)opaque;
    if (!view_current)
        snprintf(why, why_size, "gateway routing view stale for %ld ms", view_stale_ms);
    return view_current;
}

/* Not ready until the task thread has been assigned, restored and looped, and
 * while a registered check fails; the reasons name each. Registers the test
 * thread as a counter task (it stays registered, ready, for the next test). */
static void test_readyz_waits_for_every_task_restored_and_the_checks(void **state)
{
    metrics_serve_opts_t o = loopback;
    o.tasks_expected = 1;
    int port = 0, stage = metrics_stage("counter");
    char errstr[256], why[512];
    assert_int_equal(metrics_serve(&o, &port, errstr, sizeof errstr), 0);
    assert_true(metrics_ready_check(fake_view_check, NULL));
    http(port, "GET /readyz HTTP/1.0\r\n\r\n");
    expect_status(page, 503);
    assert_non_null(strstr(page, "1 of 1 task threads not started yet"));

    metrics_task_heartbeat(stage, 0); /* a loop, before any assignment */
    http(port, "GET /readyz HTTP/1.0\r\n\r\n");
    expect_status(page, 503);
    assert_non_null(strstr(page, "counter task (thread 0): waiting for its partition assignment"));
    assert_null(strstr(page, "not started"));

    metrics_task_restoring(stage, true);
    http(port, "GET /readyz HTTP/1.0\r\n\r\n");
    expect_status(page, 503);
    assert_non_null(strstr(page, "counter task (thread 0): restoring partitions"));
    http(port, "GET /healthz HTTP/1.0\r\n\r\n"); /* alive all the same */
    expect_status(page, 200);

    metrics_task_restoring(stage, false);
    assert_false(metrics_ready(1, why, sizeof why));
    assert_non_null(strstr(why, "first loop since not completed"));
    metrics_task_heartbeat(stage, 0);
    http(port, "GET /readyz HTTP/1.0\r\n\r\n");
    expect_status(page, 200);
    assert_non_null(strstr(page, "\r\n\r\nok\n"));

    /* A second thread expected but not started; then the view goes stale: both named. */
    assert_false(metrics_ready(2, why, sizeof why));
    assert_non_null(strstr(why, "1 of 2 task threads not started yet"));
    view_current = false;
    http(port, "GET /readyz HTTP/1.0\r\n\r\n");
    expect_status(page, 503);
    assert_non_null(strstr(page, "\r\n\r\ngateway routing view stale for 12000 ms\n"));
    view_current = true;
    http(port, "GET /readyz HTTP/1.0\r\n\r\n");
    expect_status(page, 200);

    /* A new assignment (a rebalance): not ready again until it is restored and looped. */
    metrics_task_restoring(stage, true);
    assert_false(metrics_ready(1, why, sizeof why));
    assert_non_null(strstr(why, "restoring partitions"));
    metrics_task_restoring(stage, false);
    metrics_task_heartbeat(stage, 0);
    assert_true(metrics_ready(1, why, sizeof why));
    assert_string_equal(why, "ok\n");
    metrics_stop();
}

static void *one_loop_then_exit(void *arg)
{
    metrics_task_heartbeat(*(int *)arg, 0);
    return NULL;
}

/* Runs after the readiness and health tests: the tasks it registers stay
 * registered for the process. */
static void test_healthz_is_503_while_a_task_aborts_in_a_row_or_stalls(void **state)
{
    metrics_serve_opts_t o = loopback;
    o.loop_stall_ms = 400;
    o.aborts_max = 3;
    int port = 0, stage = metrics_stage("counter");
    char errstr[256], why[256];
    assert_int_equal(metrics_serve(&o, &port, errstr, sizeof errstr), 0);
    pthread_t other;
    assert_int_equal(pthread_create(&other, NULL, one_loop_then_exit, &stage), 0);
    pthread_join(other, NULL);
    metrics_task_heartbeat(stage, 0);
    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    expect_status(page, 200);

    metrics_task_heartbeat(stage, 2); /* aborts below the bound: still healthy */
    assert_true(metrics_healthy(o.loop_stall_ms, o.aborts_max, why, sizeof why));
    metrics_task_heartbeat(stage, 3);
    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    expect_status(page, 503);
    assert_non_null(strstr(page, "counter task"));
    assert_non_null(strstr(page, "3 transactions aborted in a row"));
    metrics_task_heartbeat(stage, 0); /* a commit: healthy again */

    /* The other thread completed one loop and then none: stalled. */
    usleep(600 * 1000);
    metrics_task_heartbeat(stage, 0);
    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    expect_status(page, 503);
    assert_non_null(strstr(page, "no loop completed for"));
    assert_non_null(strstr(page, "health_loop_stall_ms 400"));
    metrics_stop();
}

/* holdfast_task_loop_age_seconds{stage}: computed at scrape time from the
 * task threads' heartbeats, so a thread that stops looping (stuck in a call)
 * shows a growing age without writing anything itself; the largest over the
 * stage's threads. Runs last: its threads stay registered as stalled tasks. */
static void test_loop_age_grows_for_a_task_that_stops_looping(void **state)
{
    (void)state;
    int quiet = metrics_stage("flow-quiet"), none = metrics_stage("flow-lag");
    assert_true(quiet >= 0 && none >= 0);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    if (strstr(page, "holdfast_task_loop_age_seconds{stage=\"flow-quiet\"}"))
        fail_msg("a stage with no task thread yet has a loop age:\n%s", page);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, one_loop_then_exit, &quiet), 0);
    pthread_join(t, NULL);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    expect_line(page, "# TYPE holdfast_task_loop_age_seconds gauge");
    double young = value_of(page, "holdfast_task_loop_age_seconds{stage=\"flow-quiet\"} ");
    assert_true(young >= 0 && young < 0.25);
    usleep(400 * 1000);
    /* A second thread of the stage loops now: the stage shows its oldest. */
    assert_int_equal(pthread_create(&t, NULL, one_loop_then_exit, &quiet), 0);
    pthread_join(t, NULL);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    double old = value_of(page, "holdfast_task_loop_age_seconds{stage=\"flow-quiet\"} ");
    assert_true(old >= 0.4 && old < 5);
    if (strstr(page, "holdfast_task_loop_age_seconds{stage=\"flow-lag\"}"))
        fail_msg("a stage with no task thread has a loop age:\n%s", page);
}

/* A task restoring a long changelog completes no loop for a while, but each
 * record it applies is a sign of progress (metrics_task_alive): its loop age
 * stays young, so neither /healthz nor the stall alert takes a restore for a
 * stuck task. One that restores without progress ages like any other. */
static void *restore_with_progress(void *arg)
{
    int stage = *(int *)arg;
    metrics_task_restoring(stage, true);
    for (int i = 0; i < 8; i++) {
        usleep(50 * 1000);
        metrics_task_alive(stage, hf_mono_ms());
    }
    return NULL;
}

static void *restore_without_progress(void *arg)
{
    metrics_task_restoring(*(int *)arg, true);
    usleep(400 * 1000);
    return NULL;
}

static void test_a_restore_that_progresses_keeps_its_loop_age_young(void **state)
{
    (void)state;
    int moving = metrics_stage("flow-restoring"), stuck = metrics_stage("flow-lag");
    assert_true(moving >= 0 && stuck >= 0);
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, restore_with_progress, &moving), 0);
    assert_int_equal(pthread_create(&b, NULL, restore_without_progress, &stuck), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert_true(metrics_render(page, sizeof page) < sizeof page);
    double young = value_of(page, "holdfast_task_loop_age_seconds{stage=\"flow-restoring\"} ");
    double old = value_of(page, "holdfast_task_loop_age_seconds{stage=\"flow-lag\"} ");
    if (!(young >= 0 && young < 0.2 && old >= 0.35))
        fail_msg("loop ages: restoring with progress %.3f s (want < 0.2), without %.3f s (want >= "
                 "0.35)",
                 young, old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_histogram_and_gauges_render_as_prometheus_text),
        cmocka_unit_test(test_a_page_too_big_keeps_whole_families_and_counts_the_cut),
        cmocka_unit_test(test_replies_and_their_latency_render_by_request_and_outcome),
        cmocka_unit_test(test_consumer_lag_appears_per_assigned_partition_and_disappears),
        cmocka_unit_test(test_ages_and_signals_render_and_move),
        cmocka_unit_test(test_http_serves_metrics_and_health_and_refuses_the_rest),
        cmocka_unit_test(test_requests_on_one_connection_are_each_answered),
        cmocka_unit_test(test_idle_clients_do_not_delay_a_health_probe),
        cmocka_unit_test(test_it_listens_on_metrics_bind_only_loopback_by_default),
        cmocka_unit_test(test_a_full_table_of_clients_is_refused_at_once_not_a_hang),
        cmocka_unit_test(test_readyz_waits_for_every_task_restored_and_the_checks),
        cmocka_unit_test(test_healthz_is_503_while_a_task_aborts_in_a_row_or_stalls),
        cmocka_unit_test(test_loop_age_grows_for_a_task_that_stops_looping),
        cmocka_unit_test(test_a_restore_that_progresses_keeps_its_loop_age_young),
    };
    return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
