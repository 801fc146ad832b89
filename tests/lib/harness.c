/* See harness.h. Failures call cmocka's fail_msg so a test stops where the
 * environment broke, with the reason. */
#include "harness.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec.h"
#include "counter/counter.h"
#include "lib/topics_file.h"

long harness_env_int(const char *name, long def)
{
    const char *v = getenv(name);
    return v && *v ? atol(v) : def;
}

const char *harness_env_str(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

int64_t harness_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void harness_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Children still running: a failed assertion longjmps out of a test before its
 * harness_stop, so leftovers are killed when the next test starts and at exit. */
#define HARNESS_CHILDREN_MAX 64
static pid_t children[HARNESS_CHILDREN_MAX];

static void child_add(pid_t pid)
{
    for (int i = 0; i < HARNESS_CHILDREN_MAX; i++)
        if (children[i] == 0) {
            children[i] = pid;
            return;
        }
}

static void child_forget(pid_t pid)
{
    for (int i = 0; i < HARNESS_CHILDREN_MAX; i++)
        if (children[i] == pid)
            children[i] = 0;
}

static void children_kill(void)
{
    for (int i = 0; i < HARNESS_CHILDREN_MAX; i++)
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
}

void harness_init(harness_t *h, const char *name)
{
    static bool at_exit_registered;
    if (!at_exit_registered) {
        atexit(children_kill);
        at_exit_registered = true;
    }
    children_kill();
    char errstr[512];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "%s", name);
    snprintf(h->prefix, sizeof h->prefix, "it%d-%lld-%s.", (int)getpid(),
             (long long)(harness_now_ms() % 100000), name);
    const char *bs = getenv("HOLDFAST_BOOTSTRAP");
    snprintf(h->bootstrap, sizeof h->bootstrap, "%s", bs && *bs ? bs : "127.0.0.1:9092");
    const char *bin = getenv("HOLDFAST_BIN");
    snprintf(h->holdfast_bin, sizeof h->holdfast_bin, "%s", bin && *bin ? bin : "build/holdfast");
    snprintf(h->workdir, sizeof h->workdir, "build/itest/%s", h->prefix);
    mkdir("build/itest", 0755);
    mkdir(h->workdir, 0755);
    topics_set_prefix(h->prefix);
    if (codec_init(errstr, sizeof errstr) != HF_OK)
        fail_msg("codec_init: %s", errstr);
    /* Once per process; holdfast children read the same environment. */
    static bool client_config_loaded;
    if (!client_config_loaded && kafka_client_config_from_env(errstr, sizeof errstr) != HF_OK)
        fail_msg("kafka client config: %s", errstr);
    client_config_loaded = true;
    FILE *devnull = fopen("/dev/null", "w");
    int err = topics_apply(h->bootstrap, "topics/topics.json", 0, devnull, errstr, sizeof errstr);
    fclose(devnull);
    if (err)
        fail_msg("topics apply: %s (is the broker up? make kafka-up)", errstr);
    h->kconf = (kafka_conf_t){h->bootstrap, "itest", NULL};
    if (kafka_producer_new(&h->kconf, NULL, 0, &h->kp, errstr, sizeof errstr) != HF_OK)
        fail_msg("producer: %s", errstr);
}

void harness_cleanup(harness_t *h)
{
    kafka_producer_destroy(h->kp);
    h->kp = NULL;
    /* The test's topics go with it: a broker carrying thousands of leftover
     * partitions slows every later test and restart. HARNESS_KEEP_TOPICS=1 keeps
     * them for a post-mortem (hfctl tail with HOLDFAST_TOPIC_PREFIX). */
    const char *keep = getenv("HARNESS_KEEP_TOPICS");
    if (keep && strcmp(keep, "1") == 0)
        return;
    char errstr[256];
    size_t deleted = 0;
    if (kafka_topics_delete_prefix(&h->kconf, h->prefix, &deleted, errstr, sizeof errstr) != HF_OK)
        print_message("could not delete topics %s*: %s\n", h->prefix, errstr);
}

pid_t harness_start(harness_t *h, const char *instance, const char *stages)
{
    return harness_start_with(h, instance, stages, NULL);
}

pid_t harness_start_with(harness_t *h, const char *instance, const char *stages,
                         const char *config_json)
{
    char log_path[512], state_dir[512], app_id[96], config_path[512];
    snprintf(config_path, sizeof config_path, "%s/%s.json", h->workdir, instance);
    FILE *cf = fopen(config_path, "w");
    if (!cf)
        fail_msg("cannot write %s", config_path);
    fputs(config_json ? config_json : "{}", cf);
    fclose(cf);
    snprintf(log_path, sizeof log_path, "%s/%s.log", h->workdir, instance);
    snprintf(state_dir, sizeof state_dir, "%s/state-%s", h->workdir, instance);
    snprintf(app_id, sizeof app_id, "%sapp", h->prefix);
    pid_t pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
        }
        setenv("HOLDFAST_TOPIC_PREFIX", h->prefix, 1);
        setenv("HOLDFAST_APP_ID", app_id, 1);
        setenv("HOLDFAST_BOOTSTRAP", h->bootstrap, 1);
        execl(h->holdfast_bin, h->holdfast_bin, "run", "--stages", stages, "--instance", instance,
              "--state-dir", state_dir, "--config", config_path, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", h->holdfast_bin, strerror(errno));
        _exit(127);
    }
    child_add(pid);
    return pid;
}

int harness_stop(pid_t pid)
{
    int status = 0;
    child_forget(pid);
    kill(pid, SIGTERM);
    for (int i = 0; i < 300; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        harness_sleep_ms(100);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

void harness_kill9(pid_t pid)
{
    int status;
    child_forget(pid);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
}

void harness_send_raw(harness_t *h, hf_topic_id_t topic, const char *key, const void *val,
                      size_t len)
{
    char errstr[512];
    if (kafka_produce(h->kp, topic_name(topic), -1, key, strlen(key), val, len, NULL, 0, NULL,
                      errstr, sizeof errstr) != HF_OK)
        fail_msg("produce: %s", errstr);
}

void harness_send(harness_t *h, hf_topic_id_t topic, const char *key, const hf_record_t *rec)
{
    uint8_t buf[HF_RECORD_LEN_MAX];
    size_t len = 0;
    char errstr[512];
    if (codec_encode(rec, buf, sizeof buf, &len, errstr, sizeof errstr) != HF_OK)
        fail_msg("encode: %s", errstr);
    harness_send_raw(h, topic, key, buf, len);
}

void harness_send_to_partition(harness_t *h, hf_topic_id_t topic, int32_t partition,
                               const char *key, const hf_record_t *rec)
{
    uint8_t buf[HF_RECORD_LEN_MAX];
    size_t len = 0;
    char errstr[512];
    if (codec_encode(rec, buf, sizeof buf, &len, errstr, sizeof errstr) != HF_OK)
        fail_msg("encode: %s", errstr);
    if (kafka_produce(h->kp, topic_name(topic), partition, key, strlen(key), buf, len, NULL, 0,
                      NULL, errstr, sizeof errstr) != HF_OK)
        fail_msg("produce: %s", errstr);
}

void harness_flush(harness_t *h)
{
    char errstr[512];
    if (kafka_producer_flush(h->kp, 60000, errstr, sizeof errstr) != HF_OK)
        fail_msg("flush: %s", errstr);
    assert_int_equal(kafka_producer_failed_count(h->kp), 0);
}

typedef struct {
    harness_record_fn fn;
    void *opaque;
    size_t count;
    hf_record_t rec;
} read_ctx_t;

static int read_one(void *opaque, const kafka_msg_t *msg)
{
    read_ctx_t *r = opaque;
    char errstr[256];
    r->count++;
    if (!r->fn)
        return HF_OK;
    if (!msg->value || codec_decode(msg->value, msg->value_len, &r->rec, errstr, sizeof errstr))
        r->rec.type = HF_REC__COUNT; /* undecodable: the callback sees the type */
    r->fn(r->opaque, msg, &r->rec);
    return HF_OK;
}

size_t harness_read(harness_t *h, hf_topic_id_t topic, harness_record_fn fn, void *opaque)
{
    char errstr[512];
    kafka_reader_t *rd = NULL;
    int32_t parts = 0;
    static read_ctx_t r; /* large: holds an hf_record_t */
    r.fn = fn;
    r.opaque = opaque;
    r.count = 0;
    int err = kafka_reader_new(&h->kconf, &rd, errstr, sizeof errstr);
    if (!err)
        err = kafka_partition_count(rd, topic_name(topic), 10000, &parts, errstr, sizeof errstr);
    for (int32_t p = 0; !err && p < parts; p++) {
        int64_t next = 0;
        err = kafka_reader_read_to_end(rd, topic_name(topic), p, KAFKA_OFFSET_BEGINNING, 30000,
                                       read_one, &r, &next, errstr, sizeof errstr);
    }
    kafka_reader_destroy(rd);
    r.fn = NULL; /* the caller's opaque is not kept past the call */
    r.opaque = NULL;
    if (err)
        fail_msg("read %s: %s", topic_name(topic), errstr);
    return r.count;
}

int32_t harness_partitions(harness_t *h, hf_topic_id_t topic)
{
    char errstr[512];
    kafka_reader_t *rd = NULL;
    int32_t parts = 0;
    int err = kafka_reader_new(&h->kconf, &rd, errstr, sizeof errstr);
    if (!err)
        err = kafka_partition_count(rd, topic_name(topic), 10000, &parts, errstr, sizeof errstr);
    kafka_reader_destroy(rd);
    if (err)
        fail_msg("partitions of %s: %s", topic_name(topic), errstr);
    return parts;
}

size_t harness_wait_count(harness_t *h, hf_topic_id_t topic, size_t n, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;
    size_t count = 0;
    for (;;) {
        count = harness_read(h, topic, NULL, NULL);
        if (count >= n || harness_now_ms() > deadline)
            return count;
        harness_sleep_ms(250);
    }
}

typedef struct {
    const char *key;
    size_t key_len;
    hf_counter_state_t state;
    bool found;
} counter_find_t;

static void counter_find(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    counter_find_t *f = opaque;
    if (msg->key_len != f->key_len || memcmp(msg->key, f->key, f->key_len) != 0)
        return;
    f->found = msg->value != NULL;
    if (f->found) {
        assert_int_equal(rec->type, HF_REC_COUNTER_STATE);
        f->state = rec->u.counter_state;
    }
}

bool harness_counter(harness_t *h, const char *wh, const char *sku, hf_counter_state_t *out)
{
    char key[COUNTER_KEY_MAX];
    counter_find_t f = {key, counter_key(key, wh, sku), {0}, false};
    harness_read(h, HF_T_COUNTER_CHANGELOG, counter_find, &f);
    *out = f.state;
    return f.found;
}

const char *harness_pair(char *out, const char *wh, const char *sku)
{
    snprintf(out, 128, "%s|%s", wh, sku);
    return out;
}

static void ids(char *rid, const char *r, char *w, const char *wh, char *s, const char *sku)
{
    snprintf(rid, sizeof(hf_id_t), "%s", r);
    snprintf(w, sizeof(hf_wh_t), "%s", wh);
    snprintf(s, sizeof(hf_sku_t), "%s", sku);
}

hf_record_t harness_hold(const char *rid, int32_t attempt, const char *wh, const char *sku,
                         int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_HOLD;
    ids(r.u.hold.reservation_id, rid, r.u.hold.warehouse_id, wh, r.u.hold.sku, sku);
    r.u.hold.attempt = attempt;
    r.u.hold.qty = qty;
    r.u.hold.issued_at_ms = harness_now_ms();
    return r;
}

hf_record_t harness_commit_hold(const char *rid, int32_t attempt, const char *wh, const char *sku)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_COMMIT_HOLD;
    ids(r.u.commit_hold.reservation_id, rid, r.u.commit_hold.warehouse_id, wh, r.u.commit_hold.sku,
        sku);
    r.u.commit_hold.attempt = attempt;
    r.u.commit_hold.issued_at_ms = harness_now_ms();
    return r;
}

hf_record_t harness_release_hold(const char *rid, int32_t attempt, const char *wh, const char *sku)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RELEASE_HOLD;
    ids(r.u.release_hold.reservation_id, rid, r.u.release_hold.warehouse_id, wh,
        r.u.release_hold.sku, sku);
    r.u.release_hold.attempt = attempt;
    snprintf(r.u.release_hold.reason, sizeof r.u.release_hold.reason, "abandoned");
    r.u.release_hold.issued_at_ms = harness_now_ms();
    return r;
}

hf_record_t harness_feed(const char *wh, const char *sku, hf_feed_kind_t kind, int64_t qty,
                         int64_t seq)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_STOCK_FEED;
    snprintf(r.u.stock_feed.warehouse_id, sizeof r.u.stock_feed.warehouse_id, "%s", wh);
    snprintf(r.u.stock_feed.sku, sizeof r.u.stock_feed.sku, "%s", sku);
    r.u.stock_feed.kind = kind;
    r.u.stock_feed.qty = qty;
    r.u.stock_feed.feed_seq = seq;
    r.u.stock_feed.issued_at_ms = harness_now_ms();
    return r;
}

hf_record_t harness_reserve_req(const char *rid, const char *sku, int64_t qty, int64_t ttl_ms)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "k-%s", rid);
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "%s", sku);
    q->lines[0].qty = qty;
    q->ship_to = (hf_geo_t){40.73, -73.99};
    q->ttl_ms = ttl_ms;
    q->sent_at_ms = harness_now_ms();
    return r;
}

hf_record_t harness_commit_req(const char *rid, const char *idempotency_key, const char *payment)
{
    hf_record_t r;
    hf_commit_t *c = &hf_record_reset(&r, HF_REC_COMMIT)->u.commit;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", rid);
    snprintf(c->idempotency_key, sizeof c->idempotency_key, "%s", idempotency_key);
    snprintf(c->payment_id, sizeof c->payment_id, "%s", payment);
    c->sent_at_ms = harness_now_ms();
    return r;
}

hf_record_t harness_release_req(const char *rid, const char *idempotency_key)
{
    hf_record_t r;
    hf_release_t *x = &hf_record_reset(&r, HF_REC_RELEASE)->u.release;
    snprintf(x->reservation_id, sizeof x->reservation_id, "%s", rid);
    snprintf(x->idempotency_key, sizeof x->idempotency_key, "%s", idempotency_key);
    x->sent_at_ms = harness_now_ms();
    return r;
}

int harness_run_tool(const harness_t *h, const char *tool, const char *args, char *out,
                     size_t out_size)
{
    char bin[512], cmd[1024];
    snprintf(bin, sizeof bin, "%s", h->holdfast_bin);
    char *slash = strrchr(bin, '/');
    snprintf(slash ? slash + 1 : bin, sizeof bin - (size_t)(slash ? slash + 1 - bin : 0), "%s",
             tool);
    if (access(bin, X_OK) != 0)
        return -2;
    setenv("HOLDFAST_TOPIC_PREFIX", h->prefix, 1);
    setenv("HOLDFAST_BOOTSTRAP", h->bootstrap, 1);
    snprintf(cmd, sizeof cmd, "%s %s", bin, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, out_size - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
