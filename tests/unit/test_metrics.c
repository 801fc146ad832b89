/* The metrics registry, its Prometheus text and the HTTP endpoint, over a real
 * loopback socket: what a scraper sees after the task loop counted things. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics.h"

static char page[64 * 1024];

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

    /* A short buffer: truncated, terminated, and the needed length reported. */
    char small[16];
    assert_int_equal(metrics_render(small, sizeof small), need);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* One HTTP exchange with the server on 127.0.0.1:port; the response in page. */
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

static void test_http_serves_metrics_and_health_and_refuses_the_rest(void **state)
{
    int port = 0;
    char errstr[256];
    assert_int_equal(metrics_serve(0, &port, errstr, sizeof errstr), 0);
    assert_true(port > 0);
    metrics_add(metrics_stage("relay"), HF_M_TXNS, 7);

    http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_true(strncmp(page, "HTTP/1.0 200 OK\r\n", 17) == 0);
    assert_non_null(strstr(page, "Content-Type: text/plain; version=0.0.4\r\n"));
    expect_line(page, "holdfast_transactions_committed_total{stage=\"relay\"} 7");

    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    assert_true(strncmp(page, "HTTP/1.0 200 OK\r\n", 17) == 0);
    assert_non_null(strstr(page, "\r\n\r\nok\n"));

    http(port, "POST /metrics HTTP/1.0\r\n\r\n");
    assert_true(strncmp(page, "HTTP/1.0 404 Not Found\r\n", 24) == 0);

    /* A client that connects and says nothing holds the one server thread for
     * at most its 2 s deadline: the next probe is still answered. */
    int silent = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(silent, (struct sockaddr *)&to, sizeof to), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    http(port, "GET /healthz HTTP/1.0\r\n\r\n");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(strstr(page, "\r\n\r\nok\n"));
    assert_true(t1.tv_sec - t0.tv_sec <= 4);
    close(silent);

    /* The port is really held while serving. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), -1);
    close(fd);
    metrics_stop();
    metrics_stop(); /* idempotent */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_histogram_and_gauges_render_as_prometheus_text),
        cmocka_unit_test(test_http_serves_metrics_and_health_and_refuses_the_rest),
    };
    return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
