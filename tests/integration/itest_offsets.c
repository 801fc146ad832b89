/* Offsets and transactions across owners, on the real broker through the real
 * `holdfast` binary: a previous owner that stalls (SIGSTOP, not a kill) with a
 * transaction open and commits it after the new owner took its partitions,
 * and a consumer group whose offsets are gone while local state remembers
 * what it applied. The first once cost the new owner a hold (its restore ran
 * before the stalled batch committed, and it consumed past it); the second
 * replayed every record already applied. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define WAIT_MS    60000
/* Exit status of a process continued after the stall (processor/kafka.c). */
#define STALL_EXIT 86

/* `holdfast run` with an app id and an extra environment variable of the
 * test's choosing (harness_start_with fixes both). */
static pid_t start_proc(harness_t *h, const char *instance, const char *stages, const char *app,
                        const char *config_json, const char *env_name, const char *env_value)
{
    char log_path[512], state_dir[512], config_path[512];
    snprintf(config_path, sizeof config_path, "%s/%s.json", h->workdir, instance);
    FILE *cf = fopen(config_path, "w");
    assert_non_null(cf);
    fputs(config_json ? config_json : "{}", cf);
    fclose(cf);
    snprintf(log_path, sizeof log_path, "%s/%s.log", h->workdir, instance);
    snprintf(state_dir, sizeof state_dir, "%s/state-%s", h->workdir, instance);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
        }
        setenv("HOLDFAST_TOPIC_PREFIX", h->prefix, 1);
        setenv("HOLDFAST_APP_ID", app, 1);
        setenv("HOLDFAST_BOOTSTRAP", h->bootstrap, 1);
        if (env_name)
            setenv(env_name, env_value, 1);
        execl(h->holdfast_bin, h->holdfast_bin, "run", "--stages", stages, "--instance", instance,
              "--state-dir", state_dir, "--config", config_path, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Exit status of pid once it ends within timeout_ms, else -1. */
static int wait_exit(pid_t pid, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;
    int status = 0;
    while (harness_now_ms() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        harness_sleep_ms(100);
    }
    return -1;
}

static bool is_stopped(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't');
}

/* Counts the lines of instance's log in h's workdir that hold needle. */
static int log_lines_with(const harness_t *h, const char *instance, const char *needle)
{
    char path[600];
    static char line[8192];
    snprintf(path, sizeof path, "%s/%s.log", h->workdir, instance);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Whether the log of instance holds needle. */
static bool log_has(harness_t *h, const char *instance, const char *needle)
{
    return log_lines_with(h, instance, needle) > 0;
}

static void wait_on_hand(harness_t *h, const char *sku, int64_t want, hf_counter_state_t *c)
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    memset(c, 0, sizeof *c);
    while (!(harness_counter(h, "W1", sku, c) && c->on_hand == want) && harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(c->on_hand, want);
}

/* The fault tests' common start: W1|sku gets 10 units (applied), then the fault
 * file is created and one hold of 1 unit is sent, whose batch meets the fault. */
static void feed_then_hold_into_fault(harness_t *h, const char *key, const char *sku,
                                      const char *fault, const char *reservation_id)
{
    hf_record_t f = harness_feed("W1", sku, HF_FEED_RECEIVE, 10, 1);
    harness_send(h, HF_T_STOCK_FEED, key, &f);
    harness_flush(h);
    hf_counter_state_t c;
    wait_on_hand(h, sku, 10, &c);
    FILE *ff = fopen(fault, "w");
    assert_non_null(ff);
    fclose(ff);
    hf_record_t hold = harness_hold(reservation_id, 0, "W1", sku, 1);
    harness_send(h, HF_T_COUNTER_COMMANDS, key, &hold);
    harness_flush(h);
}

/* Owner A stops itself (SIGSTOP) right before committing a transaction that
 * holds a Hold's result, changelog and offsets. B takes A's partitions once
 * A's session times out; only then is A continued, commits, and exits. B's
 * restore must include that batch: its counter keeps the unit reserved. */
static void test_a_stalled_owner_committing_after_the_new_owner_restored_loses_no_hold(void **state)
{
    harness_t h;
    harness_init(&h, "off-stall");
    char app[96], stall[512], key[128];
    snprintf(app, sizeof app, "%sapp", h.prefix);
    snprintf(stall, sizeof stall, "%s/stall-now", h.workdir);
    harness_pair(key, "W1", "SKU-S");
    /* A's transaction must outlive the wait for B's assignment (session
     * timeout 10 s), or the broker aborts it before A can commit it. */
    pid_t a = start_proc(&h, "a", "counter", app, "{\"transaction_timeout_ms\": 90000}",
                         "HOLDFAST_FAULT_STALL_COMMIT", stall);
    feed_then_hold_into_fault(&h, key, "SKU-S", stall, "s1");
    hf_counter_state_t c;
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!is_stopped(a) && harness_now_ms() < deadline)
        harness_sleep_ms(50);
    assert_true(is_stopped(a));

    pid_t b = start_proc(&h, "b", "counter", app, NULL, NULL, NULL);
    deadline = harness_now_ms() + WAIT_MS;
    while (!log_has(&h, "b", "fetching their committed offsets") && !log_has(&h, "b", "restored") &&
           harness_now_ms() < deadline)
        harness_sleep_ms(100);
    assert_true(harness_now_ms() < deadline);
    harness_sleep_ms(2000); /* B restores now, or waits for stable offsets */
    kill(a, SIGCONT);
    assert_int_equal(wait_exit(a, WAIT_MS), STALL_EXIT);

    /* B writes the counter again; the changelog then shows what B holds. */
    hf_record_t f = harness_feed("W1", "SKU-S", HF_FEED_RECEIVE, 5, 2);
    harness_send(&h, HF_T_STOCK_FEED, key, &f);
    harness_flush(&h);
    wait_on_hand(&h, "SKU-S", 15, &c);
    print_message("after the stalled commit: on_hand %lld reserved %lld\n", (long long)c.on_hand,
                  (long long)c.reserved);
    assert_int_equal(c.reserved, 1);
    assert_int_equal(harness_stop(b), 0);
    harness_cleanup(&h);
}

/* Local state applied records the group no longer has offsets for (here: the
 * same state dir under another app id, as after a rename or an offsets
 * expiry). Starting would replay them; the process must refuse, saying what
 * to do. */
static void test_a_group_offset_behind_local_state_is_refused_with_what_to_do(void **state)
{
    harness_t h;
    harness_init(&h, "off-lost");
    char app[96], key[128];
    snprintf(app, sizeof app, "%sapp", h.prefix);
    harness_pair(key, "W1", "SKU-L");
    pid_t a = start_proc(&h, "a", "counter", app, NULL, NULL, NULL);
    hf_record_t f = harness_feed("W1", "SKU-L", HF_FEED_RECEIVE, 10, 1);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &f);
    hf_record_t hold = harness_hold("l1", 0, "W1", "SKU-L", 2);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &hold);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 1, WAIT_MS), 1);
    harness_sleep_ms(500); /* the state write follows the commit */
    assert_int_equal(harness_stop(a), 0);

    char other[128];
    snprintf(other, sizeof other, "%sapp-renamed", h.prefix);
    pid_t again = start_proc(&h, "a", "counter", other, NULL, NULL, NULL);
    int status = wait_exit(again, 30000);
    if (status < 0) {
        kill(again, SIGKILL);
        waitpid(again, NULL, 0);
    }
    print_message("restart under another group: exit %d\n", status);
    assert_int_not_equal(status, -1);
    assert_int_not_equal(status, 0);
    assert_true(log_has(&h, "a", "--reset-offsets --to-offset 2"));
    /* Nothing was replayed: still one result for the one hold. */
    assert_int_equal(harness_read(&h, HF_T_COUNTER_RESULTS, NULL, NULL), 1);
    harness_cleanup(&h);
}

/* A commit whose answer is lost (it did commit; the client saw a timeout).
 * Treating it as an abort used to drop the batch from RocksDB while Kafka had
 * it — the consumer rewound past it, the hold was gone locally and the next
 * counter write gave the unit back. Then the process exited for a restart that
 * restored the batch from the changelog. Now the task stops with a fatal error
 * and is started again inside the process, whose restore keeps the batch: the
 * process stays up, the hold stays reserved, and it is answered once. */
static void
test_a_commit_with_an_unknown_outcome_restarts_the_task_and_keeps_the_batch(void **state)
{
    harness_t h;
    harness_init(&h, "off-unknown");
    char app[96], fault[512], key[128];
    snprintf(app, sizeof app, "%sapp", h.prefix);
    snprintf(fault, sizeof fault, "%s/hide-outcome", h.workdir);
    harness_pair(key, "W1", "SKU-U");
    pid_t a = start_proc(&h, "a", "counter", app, NULL, "HOLDFAST_FAULT_COMMIT_UNKNOWN", fault);
    feed_then_hold_into_fault(&h, key, "SKU-U", fault, "u1");
    hf_counter_state_t c;
    int64_t deadline = harness_now_ms() + 20000;
    while (log_lines_with(&h, "a", "closed dirty, starting it again") == 0 &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    int status = wait_exit(a, 100);
    print_message("after a commit of unknown outcome: %s\n",
                  status < 0 ? "running, the task restarted inside it" : "exited");
    assert_int_equal(status, -1);
    assert_int_equal(log_lines_with(&h, "a", "closed dirty, starting it again"), 1);

    hf_record_t f = harness_feed("W1", "SKU-U", HF_FEED_RECEIVE, 5, 2);
    harness_send(&h, HF_T_STOCK_FEED, key, &f);
    harness_flush(&h);
    wait_on_hand(&h, "SKU-U", 15, &c);
    assert_int_equal(c.reserved, 1); /* the batch Kafka has is kept, not given back */
    assert_int_equal(harness_read(&h, HF_T_COUNTER_RESULTS, NULL, NULL), 1);
    kill(a, SIGTERM);
    assert_int_equal(wait_exit(a, 30000), 0);
    harness_cleanup(&h);
}

/* A task stuck in a call that never returns (here its commit, by fault
 * injection) used to leave a live process that served nothing and that no
 * supervisor restarts (seen on the 3-broker cluster: a counter task stuck in a
 * restore, holding four partitions). The stall watchdog exits it 4 (with
 * HOLDFAST_STALL_BACKTRACE=1 after gdb printed every thread's stack, naming
 * the stuck call); the restart redoes the batch the stuck transaction never
 * committed. */
static void test_a_task_stuck_in_a_call_exits_the_process_and_the_restart_redoes_it(void **state)
{
    harness_t h;
    harness_init(&h, "off-hang");
    char app[96], fault[512], key[128];
    snprintf(app, sizeof app, "%sapp", h.prefix);
    snprintf(fault, sizeof fault, "%s/hang-commit", h.workdir);
    harness_pair(key, "W1", "SKU-H");
    setenv("HOLDFAST_TASK_STALL_EXIT_MS", "3000", 1);
    setenv("HOLDFAST_STALL_BACKTRACE", "1", 1);
    pid_t a = start_proc(&h, "a", "counter", app, NULL, "HOLDFAST_FAULT_HANG_COMMIT", fault);
    unsetenv("HOLDFAST_TASK_STALL_EXIT_MS");
    unsetenv("HOLDFAST_STALL_BACKTRACE");
    feed_then_hold_into_fault(&h, key, "SKU-H", fault, "h1");
    hf_counter_state_t c;
    int64_t t0 = harness_now_ms();
    int status = wait_exit(a, 30000);
    print_message("a task stuck in its commit: exit %d after %lld ms\n", status,
                  (long long)(harness_now_ms() - t0));
    if (status < 0) {
        kill(a, SIGKILL);
        waitpid(a, NULL, 0);
    }
    assert_int_equal(status, 4);
    assert_true(log_has(&h, "a", "shows no sign of life"));
    /* The stack of the stuck call is in the log when gdb is there to print it. */
    if (system("command -v gdb >/dev/null 2>&1") != 0)
        print_message("no gdb on this machine: the stall backtrace is not checked\n");
    else if (log_has(&h, "a", "ptrace: Operation not permitted"))
        print_message("gdb may not attach here (ptrace refused): the backtrace is not checked\n");
    else
        assert_true(log_has(&h, "a", "fault_hang_commit"));
    assert_int_equal(harness_read(&h, HF_T_COUNTER_RESULTS, NULL, NULL), 0); /* never committed */

    pid_t again = start_proc(&h, "a", "counter", app, NULL, NULL, NULL);
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (harness_read(&h, HF_T_COUNTER_RESULTS, NULL, NULL) < 1 && harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(harness_read(&h, HF_T_COUNTER_RESULTS, NULL, NULL), 1);
    assert_true(harness_counter(&h, "W1", "SKU-H", &c));
    assert_int_equal(c.reserved, 1);
    kill(again, SIGTERM);
    assert_int_equal(wait_exit(again, 30000), 0);
    harness_cleanup(&h);
}

typedef struct {
    kafka_producer_t *kp;
    bool commit; /* else abort */
    int after_ms;
    int err;
} ender_t;

static void *end_later(void *arg)
{
    ender_t *e = arg;
    char errstr[512];
    harness_sleep_ms(e->after_ms);
    e->err = e->commit ? kafka_txn_commit(e->kp, errstr, sizeof errstr)
                       : kafka_txn_abort(e->kp, errstr, sizeof errstr);
    return NULL;
}

static int count_record(void *opaque, const kafka_msg_t *msg)
{
    (void)msg;
    (*(int *)opaque)++;
    return HF_OK;
}

/* One transaction of 3 records, open (produced and acknowledged) while a
 * reader reads the partition to its end; the transaction ends after_ms later.
 * Returns the records the reader delivered and how long it took. */
static int read_across_open_transaction(harness_t *h, const char *txn_id, bool commit,
                                        int64_t *took_ms, int64_t *next_out, int64_t *hw_out)
{
    char errstr[512] = "";
    kafka_producer_t *kp = NULL;
    const char *topic = topic_name(HF_T_COUNTER_CHANGELOG);
    assert_int_equal(kafka_producer_new(&h->kconf, txn_id, 30000, &kp, errstr, sizeof errstr),
                     HF_OK);
    assert_int_equal(kafka_txn_init(kp, 30000, errstr, sizeof errstr), HF_OK);
    assert_int_equal(kafka_txn_begin(kp, errstr, sizeof errstr), HF_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(
            kafka_produce(kp, topic, 0, "k", 1, "v", 1, NULL, 0, NULL, errstr, sizeof errstr),
            HF_OK);
    }
    assert_int_equal(kafka_producer_flush(kp, 30000, errstr, sizeof errstr), HF_OK);
    ender_t e = {kp, commit, 1500, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, end_later, &e), 0);
    kafka_reader_t *rd = NULL;
    assert_int_equal(kafka_reader_new(&h->kconf, &rd, errstr, sizeof errstr), HF_OK);
    int records = 0;
    int64_t t0 = harness_now_ms(), next = -1;
    int err = kafka_reader_read_to_end(rd, topic, 0, KAFKA_OFFSET_BEGINNING, 20000, count_record,
                                       &records, &next, errstr, sizeof errstr);
    *took_ms = harness_now_ms() - t0;
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(err, HF_OK);
    assert_int_equal(e.err, HF_OK);
    *hw_out = kafka_reader_high_watermark(rd, topic, 0);
    *next_out = next;
    kafka_reader_destroy(rd);
    kafka_producer_destroy(kp);
    return records;
}

/* A restore reads a changelog partition "to its end". Under read_committed the
 * first end a reader meets is the last stable offset, which stops short of a
 * transaction still open there — and a transaction whose commit was already
 * acknowledged is open until the coordinator's marker lands on that partition,
 * after the new owner may already see the offsets it committed. So the end is
 * the high watermark at the call: the reader waits for the open transaction and
 * delivers its records if it commits (it returned at once with none before),
 * and skips them if it aborts. */
static void test_a_read_to_end_waits_for_the_transaction_open_at_its_end(void **state)
{
    harness_t h;
    harness_init(&h, "off-lso");
    char txn_id[128];
    int64_t took_ms = 0, next = -1, hw = -1;
    snprintf(txn_id, sizeof txn_id, "%stxn-commit", h.prefix);
    int got = read_across_open_transaction(&h, txn_id, true, &took_ms, &next, &hw);
    assert_int_equal(got, 3);
    assert_true(took_ms >= 1000); /* it waited for the commit */
    assert_true(next >= 3);

    snprintf(txn_id, sizeof txn_id, "%stxn-abort", h.prefix);
    got = read_across_open_transaction(&h, txn_id, false, &took_ms, &next, &hw);
    assert_int_equal(got, 3); /* the committed 3 of before; the aborted ones skipped */
    assert_true(took_ms >= 1000);
    assert_true(next >= 7); /* 3 + marker, 3 aborted records: past them all */
    harness_cleanup(&h);
}

int main(void)
{
    const char *only = getenv("OFFSETS_TEST");
    if (only && *only)
        cmocka_set_test_filter(only);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_read_to_end_waits_for_the_transaction_open_at_its_end),
        cmocka_unit_test(test_a_task_stuck_in_a_call_exits_the_process_and_the_restart_redoes_it),
        cmocka_unit_test(
            test_a_stalled_owner_committing_after_the_new_owner_restored_loses_no_hold),
        cmocka_unit_test(test_a_group_offset_behind_local_state_is_refused_with_what_to_do),
        cmocka_unit_test(
            test_a_commit_with_an_unknown_outcome_restarts_the_task_and_keeps_the_batch),
    };
    return cmocka_run_group_tests_name("offsets and transactions across owners on a real broker",
                                       tests, NULL, NULL);
}
