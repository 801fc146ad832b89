/* Confluent framing end to end (docs/SCHEMA_REGISTRY.md): the real `holdfast`
 * running counter, aggregator and gateway with output_framing "confluent"
 * against the in-process registry stand-in of tests/lib/fake_registry.h (the
 * Confluent REST API as documented; no real registry could be run here). It
 * registers its three subjects at start; the availability, signals and ledger
 * records it writes start 0x00 + the registered id; the gateway's view decodes
 * the framed availability (a second reserve routes to the only warehouse with
 * stock, where an undecoded view would answer "unknown sku"); hfctl reads them
 * with HOLDFAST_SCHEMA_REGISTRY_URL and says what to set without it; reconcile
 * passes; `holdfast http` serves the reservation and the availability from the
 * framed topics, and waits out a registry outage rather than skip a record; a
 * framed input with an id the registry does not know is
 * dead-lettered naming the id; and an unreachable registry fails the start with
 * exit 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "codec.h"
#include "fake_registry.h"
#include "harness.h"
#include "lib/client.h"
#include "registry.h"

#define WAIT_MS    60000
#define CALL_MS    15000
#define SKU        "SKU-R"
#define FRONTS_MAX 4 /* holdfast http processes one run starts */

static struct {
    harness_t h;
    fake_registry_t *fake;
    char url[64];
    registry_t *reg; /* this process's resolver, so harness_read decodes framed records */
    hf_client_t *c;
    pid_t pid;
    char cfg[1024];
    long ids[3]; /* availability, signals, ledger */
    pid_t fronts[FRONTS_MAX];
} w;

static long subject_id(hf_topic_id_t t)
{
    char subject[160];
    snprintf(subject, sizeof subject, "%s-value", topic_name(t));
    return fake_registry_subject_id(w.fake, subject);
}

static int setup(void **state)
{
    char errstr[256], wpath[512], cwd[256];
    harness_init(&w.h, "registry");
    w.fake = fake_registry_start(w.url, sizeof w.url);
    assert_int_equal(registry_new(w.url, 5000, &w.reg, errstr, sizeof errstr), HF_OK);
    codec_set_id_resolver(registry_resolve, w.reg);
    snprintf(wpath, sizeof wpath, "%s/warehouses.json", w.h.workdir);
    FILE *f = fopen(wpath, "w");
    assert_non_null(f);
    assert_non_null(getcwd(cwd, sizeof cwd));
    /* W1 New York (never stocked), W3 Los Angeles. */
    fputs("{\"warehouses\": [{\"id\":\"W1\",\"lat\":40.71,\"lon\":-74.01,\"cost_per_unit\":1.0},"
          "{\"id\":\"W3\",\"lat\":34.05,\"lon\":-118.24,\"cost_per_unit\":1.0}]}",
          f);
    fclose(f);
    snprintf(
        w.cfg, sizeof w.cfg,
        "{\"warehouses_file\": \"%s/%s\", \"result_timeout_ms\": 5000, \"signal_dwell_ms\": 0, "
        "\"output_framing\": \"confluent\", \"schema_registry_url\": \"%s\"}",
        cwd, wpath, w.url);
    w.pid = harness_start_with(&w.h, "s1", "counter,aggregator,gateway", w.cfg);
    assert_int_equal(client_new(w.h.bootstrap, NULL, &w.c, errstr, sizeof errstr), HF_OK);
    return 0;
}

static int teardown(void **state)
{
    for (size_t i = 0; i < FRONTS_MAX; i++)
        if (w.fronts[i] > 0) { /* a test failed while its front ran */
            kill(w.fronts[i], SIGKILL);
            waitpid(w.fronts[i], NULL, 0);
        }
    client_destroy(w.c);
    if (w.pid > 0)
        assert_int_equal(harness_stop(w.pid), 0);
    codec_set_id_resolver(NULL, NULL);
    registry_destroy(w.reg);
    fake_registry_stop(w.fake);
    harness_cleanup(&w.h);
    return 0;
}

/* ---- reading the framed topics */

typedef struct {
    long id;          /* the id every record must carry */
    size_t framed;    /* records that start 0x00 + id */
    size_t other;     /* records that do not */
    hf_record_t last; /* of SKU / any ledger event */
    bool sold_out;
} seen_t;

static void seen_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    seen_t *s = opaque;
    const uint8_t *b = msg->value;
    bool framed = msg->value_len > 5 && b[0] == 0x00 &&
                  (((long)b[1] << 24) | ((long)b[2] << 16) | ((long)b[3] << 8) | b[4]) == s->id;
    if (framed)
        s->framed++;
    else
        s->other++;
    s->last = *rec;
    if (rec->type == HF_REC_SIGNAL && rec->u.signal.kind == HF_SIGNAL_SOLD_OUT)
        s->sold_out = true;
}

static seen_t seen_on(hf_topic_id_t t, long id)
{
    seen_t s = {.id = id};
    harness_read(&w.h, t, seen_fn, &s);
    return s;
}

static void wait_total(int64_t total)
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    seen_t s = seen_on(HF_T_AVAILABILITY, w.ids[0]);
    while (!(s.framed && s.last.u.availability.total == total) && harness_now_ms() < deadline) {
        harness_sleep_ms(200);
        s = seen_on(HF_T_AVAILABILITY, w.ids[0]);
    }
    assert_int_equal(s.other, 0);
    assert_int_equal(s.last.u.availability.total, total);
}

static hf_reply_t reserve(const char *rid, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "k-%s", rid);
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, SKU);
    q->lines[0].qty = qty;
    q->ship_to = (hf_geo_t){40.73, -73.99}; /* Manhattan: W1 is nearest, and empty */
    q->ttl_ms = 600000;
    q->sent_at_ms = harness_now_ms();
    hf_reply_t rep;
    char errstr[256] = "";
    if (client_call(w.c, &r, CALL_MS, 3, &rep, errstr, sizeof errstr) != HF_OK)
        fail_msg("client_call: %s", errstr);
    return rep;
}

static void expect_held_at_w3(const hf_reply_t *rep)
{
    if (rep->outcome != HF_REPLY_HELD)
        fail_msg("reserve answered %d: %s", (int)rep->outcome, rep->message);
    assert_int_equal(rep->allocations_count, 1);
    assert_string_equal(rep->allocations[0].warehouse_id, "W3");
}

static void test_outputs_are_framed_with_the_registered_ids_and_still_read(void **state)
{
    char key[128], out[16384];
    /* registered at start, before anything was consumed */
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (subject_id(HF_T_LEDGER) < 0 && harness_now_ms() < deadline)
        harness_sleep_ms(100);
    w.ids[0] = subject_id(HF_T_AVAILABILITY);
    w.ids[1] = subject_id(HF_T_SIGNALS);
    w.ids[2] = subject_id(HF_T_LEDGER);
    assert_true(w.ids[0] > 0 && w.ids[1] > 0 && w.ids[2] > 0);
    assert_int_equal(subject_id(HF_T_STOCK_LEVELS), -1);

    hf_record_t f = harness_feed("W3", SKU, HF_FEED_RECEIVE, 10, 1);
    harness_send(&w.h, HF_T_STOCK_FEED, harness_pair(key, "W3", SKU), &f);
    harness_flush(&w.h);
    wait_total(10);

    /* The view knows SKU only from the framed availability: without it the
     * gateway would answer "unknown sku". */
    hf_reply_t r1 = reserve("r1", 2);
    expect_held_at_w3(&r1);
    wait_total(8);
    hf_reply_t r2 = reserve("r2", 3);
    expect_held_at_w3(&r2);
    wait_total(5);
    hf_reply_t r3 = reserve("r3", 5); /* the last units: SOLD_OUT */
    expect_held_at_w3(&r3);
    wait_total(0);

    seen_t ledger = seen_on(HF_T_LEDGER, w.ids[2]);
    assert_true(ledger.framed >= 3);
    assert_int_equal(ledger.other, 0);
    deadline = harness_now_ms() + WAIT_MS;
    seen_t sig = seen_on(HF_T_SIGNALS, w.ids[1]);
    while (!sig.sold_out && harness_now_ms() < deadline) {
        harness_sleep_ms(200);
        sig = seen_on(HF_T_SIGNALS, w.ids[1]);
    }
    assert_true(sig.sold_out);
    assert_true(sig.framed >= 1);
    assert_int_equal(sig.other, 0);
    /* the records the counter writes for holdfast alone keep single-object */
    seen_t levels = seen_on(HF_T_STOCK_LEVELS, -1);
    assert_true(levels.other >= 1);

    /* hfctl with the registry reads them; without it, it says what to set */
    setenv("HOLDFAST_SCHEMA_REGISTRY_URL", w.url, 1);
    assert_int_equal(harness_run_tool(&w.h, "hfctl", "availability --sku " SKU, out, sizeof out),
                     0);
    if (!strstr(out, "\"total\":0"))
        fail_msg("hfctl availability: %s", out);
    int rc = harness_run_tool(&w.h, "hfctl", "reconcile --quiescent 1 2>&1", out, sizeof out);
    print_message("reconcile: %s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "PASS"));
    unsetenv("HOLDFAST_SCHEMA_REGISTRY_URL");
    rc = harness_run_tool(&w.h, "hfctl", "availability --sku " SKU " 2>&1", out, sizeof out);
    assert_int_equal(rc, 1);
    if (!strstr(out, "no schema registry is configured") ||
        !strstr(out, "HOLDFAST_SCHEMA_REGISTRY_URL"))
        fail_msg("hfctl availability without a registry: %s", out);
}

/* A framed input whose id the registry does not know: a dead letter naming it. */
typedef struct {
    char reasons[4096];
} dead_t;

static void dead_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    dead_t *d = opaque;
    size_t used = strlen(d->reasons);
    snprintf(d->reasons + used, sizeof d->reasons - used, "[%s] ", rec->u.dead_letter.reason);
}

static void test_a_framed_input_with_an_unknown_id_is_dead_lettered_naming_it(void **state)
{
    static uint8_t buf[HF_RECORD_LEN_MAX];
    char errstr[256];
    size_t len = 0;
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    snprintf(r.u.reserve.reservation_id, sizeof r.u.reserve.reservation_id, "rx");
    snprintf(r.u.reserve.idempotency_key, sizeof r.u.reserve.idempotency_key, "k-rx");
    r.u.reserve.lines_count = 1;
    snprintf(r.u.reserve.lines[0].sku, sizeof r.u.reserve.lines[0].sku, SKU);
    r.u.reserve.lines[0].qty = 1;
    r.u.reserve.ttl_ms = 60000;
    r.u.reserve.sent_at_ms = harness_now_ms();
    assert_int_equal(codec_encode_confluent(&r, 999, buf, sizeof buf, &len, errstr, sizeof errstr),
                     HF_OK);
    harness_send_raw(&w.h, HF_T_REQUESTS, "rx", buf, len);
    harness_flush(&w.h);
    dead_t d = {{0}};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!strstr(d.reasons, "schema id 999") && harness_now_ms() < deadline) {
        harness_sleep_ms(200);
        d.reasons[0] = '\0';
        harness_read(&w.h, HF_T_DEAD_LETTERS, dead_fn, &d);
    }
    print_message("dead letters: %s\n", d.reasons);
    assert_non_null(strstr(d.reasons, "schema id 999"));
}

/* ---- the HTTP front (`holdfast http`): its reservation store follows the
 * ledger and its view the availability topic, both framed here */

typedef struct {
    char data[8192];
    size_t len;
} body_t;

static size_t on_body(char *p, size_t size, size_t n, void *opaque)
{
    body_t *b = opaque;
    size_t k = size * n;
    if (b->len + k >= sizeof b->data)
        return 0;
    memcpy(b->data + b->len, p, k);
    b->len += k;
    b->data[b->len] = '\0';
    return k;
}

static long http_get(int port, const char *path, body_t *b)
{
    char url[256];
    long status = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    b->len = 0;
    b->data[0] = '\0';
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    return status;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static pid_t start_http(const char *instance, int port)
{
    char cfg_path[600], log_path[600], state_dir[600], port_arg[16], app_id[96];
    snprintf(cfg_path, sizeof cfg_path, "%s/%s.json", w.h.workdir, instance);
    snprintf(log_path, sizeof log_path, "%s/%s.log", w.h.workdir, instance);
    snprintf(state_dir, sizeof state_dir, "%s/state-%s", w.h.workdir, instance);
    snprintf(port_arg, sizeof port_arg, "%d", port);
    snprintf(app_id, sizeof app_id, "%sapp", w.h.prefix);
    FILE *f = fopen(cfg_path, "w");
    assert_non_null(f);
    fprintf(f, "{\"schema_registry_url\": \"%s\"}", w.url);
    fclose(f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
        }
        setenv("HOLDFAST_TOPIC_PREFIX", w.h.prefix, 1);
        setenv("HOLDFAST_APP_ID", app_id, 1);
        setenv("HOLDFAST_BOOTSTRAP", w.h.bootstrap, 1);
        execl(w.h.holdfast_bin, w.h.holdfast_bin, "http", "--config", cfg_path, "--instance",
              instance, "--state-dir", state_dir, "--port", port_arg, (char *)NULL);
        _exit(127);
    }
    for (size_t i = 0; i < FRONTS_MAX; i++)
        if (w.fronts[i] <= 0) { /* stopped by the teardown if a test fails first */
            w.fronts[i] = pid;
            break;
        }
    return pid;
}

/* Stops a front start_http started (SIGTERM, its exit status) and forgets it. */
static int stop_http(pid_t pid)
{
    for (size_t i = 0; i < FRONTS_MAX; i++)
        if (w.fronts[i] == pid)
            w.fronts[i] = 0;
    return harness_stop(pid);
}

static void test_the_http_front_reads_the_framed_ledger_and_availability(void **state)
{
    static body_t b;
    int port = free_port();
    pid_t pid = start_http("h1", port);
    long status = 0;
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while ((status = http_get(port, "/v1/reservations/r1", &b)) != 200 &&
           harness_now_ms() < deadline)
        harness_sleep_ms(300);
    print_message("GET /v1/reservations/r1: %ld %s\n", status, b.data);
    assert_int_equal(status, 200);
    assert_non_null(strstr(b.data, "\"reservation_id\":\"r1\""));
    assert_non_null(strstr(b.data, "HELD"));
    assert_int_equal(http_get(port, "/v1/availability/" SKU, &b), 200);
    if (!strstr(b.data, "\"total\":0"))
        fail_msg("GET /v1/availability/%s: %s", SKU, b.data);
    assert_int_equal(stop_http(pid), 0);
}

static bool log_says(const char *instance, const char *needle)
{
    char path[600], line[4096];
    snprintf(path, sizeof path, "%s/%s.log", w.h.workdir, instance);
    bool said = false;
    FILE *f = fopen(path, "r");
    while (f && !said && fgets(line, sizeof line, f))
        said = strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return said;
}

/* A follower meeting a framed record while the registry does not answer waits
 * for it instead of skipping the record: a skipped ledger or availability record
 * would never be read again (the front would answer 404 for ever). */
static void test_followers_wait_for_an_unreachable_registry_instead_of_skipping(void **state)
{
    static body_t b;
    fake_registry_fail_with(w.fake, 503);
    int port = free_port();
    pid_t pid = start_http("h2", port);
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!log_says("h2", "asking again") && harness_now_ms() < deadline)
        harness_sleep_ms(100);
    assert_true(log_says("h2", "answered 503"));
    harness_sleep_ms(1000); /* a few more refused attempts */
    fake_registry_fail_with(w.fake, 0);
    long status = 0;
    deadline = harness_now_ms() + WAIT_MS;
    while ((status = http_get(port, "/v1/reservations/r1", &b)) != 200 &&
           harness_now_ms() < deadline)
        harness_sleep_ms(300);
    print_message("after the outage, GET /v1/reservations/r1: %ld %s\n", status, b.data);
    assert_int_equal(status, 200);
    assert_non_null(strstr(b.data, "HELD"));
    assert_int_equal(http_get(port, "/v1/availability/" SKU, &b), 200);
    if (!strstr(b.data, "\"total\":0"))
        fail_msg("GET /v1/availability/%s: %s", SKU, b.data);
    assert_int_equal(stop_http(pid), 0);
}

static void test_an_unreachable_registry_fails_the_start_with_exit_1(void **state)
{
    char cfg[512], log_path[600], line[2048];
    snprintf(
        cfg, sizeof cfg,
        "{\"output_framing\": \"confluent\", \"schema_registry_url\": \"http://127.0.0.1:1\"}");
    pid_t pid = harness_start_with(&w.h, "s2", "aggregator", cfg);
    snprintf(log_path, sizeof log_path, "%s/s2.log", w.h.workdir);
    bool said = false;
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!said && harness_now_ms() < deadline) {
        harness_sleep_ms(200);
        FILE *f = fopen(log_path, "r");
        while (f && fgets(line, sizeof line, f))
            said = said || strstr(line, "Start the registry or correct schema_registry_url");
        if (f)
            fclose(f);
    }
    assert_true(said);
    assert_int_equal(harness_stop(pid), 1); /* it had exited: the status is its own */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outputs_are_framed_with_the_registered_ids_and_still_read),
        cmocka_unit_test(test_a_framed_input_with_an_unknown_id_is_dead_lettered_naming_it),
        cmocka_unit_test(test_the_http_front_reads_the_framed_ledger_and_availability),
        cmocka_unit_test(test_followers_wait_for_an_unreachable_registry_instead_of_skipping),
        cmocka_unit_test(test_an_unreachable_registry_fails_the_start_with_exit_1),
    };
    return cmocka_run_group_tests_name("registry", tests, setup, teardown);
}
