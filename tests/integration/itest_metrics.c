/* The metrics endpoints of the real `holdfast` binary on the real broker, as a
 * Kubernetes kubelet and a Prometheus scraper use them: /readyz answers 503
 * naming what is not ready while the tasks start, join and restore, then 200;
 * /healthz (liveness) is 200 meanwhile; /metrics counts what the process owns,
 * over one keep-alive connection. A restart without its local state is not
 * ready until the changelog has been restored into it. */
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

#include "harness.h"

#define WAIT_MS 60000

static char page[64 * 1024];

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readyz_follows_the_start_and_the_restore_and_metrics_count),
        cmocka_unit_test(test_readyz_names_a_stale_gateway_view),
    };
    return cmocka_run_group_tests_name("metrics endpoints of a real process", tests, NULL, NULL);
}
