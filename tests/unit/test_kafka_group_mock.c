/* The group consumer under KIP-848's consumer protocol (kafka.h kafka_group_t
 * consumer_protocol), against librdkafka's mock cluster: assignments arrive
 * as deltas and kafka.c applies them incrementally. Two co-partitioned topics
 * of 4 partitions, two consumers:
 *
 *  - the first alone is given all 8 partitions;
 *  - when the second joins, the first gives up only what moves (its revoke
 *    names 4 partitions, not 8, and it keeps the rest without a pause), the
 *    two never hold a partition at once, and each ends with the same
 *    partition numbers of both topics (partition p of every input together);
 *  - when the second leaves, the first is given its 4 back and holds all 8.
 *
 * The group's session settings are left to the cluster (the mock has no
 * IncrementalAlterConfigs; the real broker's path is proved by the fault
 * suite, tests/faults/process.sh with FT_CONFIG group_protocol consumer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "hf_clock.h"
#include "kafka.h"
#include "mock_kafka.h"

#define TOPIC_A    "hf-grp-a"
#define TOPIC_B    "hf-grp-b"
#define GROUP      "hf-grp"
#define PARTS      4
#define WAIT_MS    30000
#define WATCHDOG_S 90

static rd_kafka_mock_cluster_t *mc;
static char bootstrap[256];
static char errstr[512];

/* What one consumer holds, as its callbacks said. */
typedef struct member {
    bool held[2][PARTS];
    int revoked_tps; /* partitions named by its revokes */
    int revokes;     /* revoke callbacks */
    struct member *other;
} member_t;

static int topic_ix(const char *topic)
{
    return strcmp(topic, TOPIC_A) == 0 ? 0 : strcmp(topic, TOPIC_B) == 0 ? 1 : -1;
}

static int on_assign(void *opaque, const kafka_tp_t *tps, const int64_t *committed, size_t n)
{
    (void)committed;
    member_t *m = opaque;
    for (size_t i = 0; i < n; i++) {
        int ti = topic_ix(tps[i].topic);
        assert_true(ti >= 0 && tps[i].partition >= 0 && tps[i].partition < PARTS);
        if (m->other->held[ti][tps[i].partition])
            fail_msg("%s [%d] assigned while the other member still holds it", tps[i].topic,
                     tps[i].partition);
        m->held[ti][tps[i].partition] = true;
    }
    return 0;
}

static void on_revoke(void *opaque, const kafka_tp_t *tps, size_t n)
{
    member_t *m = opaque;
    m->revokes++;
    m->revoked_tps += (int)n;
    for (size_t i = 0; i < n; i++) {
        int ti = topic_ix(tps[i].topic);
        assert_true(ti >= 0 && tps[i].partition >= 0 && tps[i].partition < PARTS);
        m->held[ti][tps[i].partition] = false;
    }
}

static int held_count(const member_t *m)
{
    int n = 0;
    for (int t = 0; t < 2; t++)
        for (int p = 0; p < PARTS; p++)
            n += m->held[t][p];
    return n;
}

static kafka_consumer_t *join(member_t *m)
{
    kafka_conf_t kc = {bootstrap, "hf-grp-test", NULL};
    kafka_rebalance_t rb = {
        .on_assign = on_assign, .on_revoke = on_revoke, .opaque = m, .committed_timeout_ms = 10000};
    kafka_group_t g = {.group_id = GROUP, .consumer_protocol = true};
    const char *topics[] = {TOPIC_A, TOPIC_B};
    kafka_consumer_t *c = NULL;
    if (kafka_consumer_new(&kc, &g, topics, 2, &rb, &c, errstr, sizeof errstr) != 0)
        fail_msg("consumer: %s", errstr);
    return c;
}

/* Polls c1 (and c2 unless NULL) until m1 holds want1 and m2 want2. */
static void poll_until(kafka_consumer_t *c1, member_t *m1, int want1, kafka_consumer_t *c2,
                       member_t *m2, int want2)
{
    int64_t deadline = hf_mono_ms() + WAIT_MS;
    while (held_count(m1) != want1 || (c2 && held_count(m2) != want2)) {
        if (hf_mono_ms() > deadline)
            fail_msg("after %d ms the members hold %d and %d partitions, not %d and %d", WAIT_MS,
                     held_count(m1), m2 ? held_count(m2) : 0, want1, want2);
        kafka_msg_t msg;
        assert_true(kafka_consumer_poll(c1, 50, &msg, errstr, sizeof errstr) == 0);
        if (c2)
            assert_true(kafka_consumer_poll(c2, 50, &msg, errstr, sizeof errstr) == 0);
    }
}

static int setup(void **state)
{
    (void)state;
    mc = mock_kafka_start(1, TOPIC_A, PARTS, 1,
                          "test_kafka_group_mock: the group did not settle within the watchdog",
                          bootstrap, sizeof bootstrap);
    assert_int_equal(rd_kafka_mock_topic_create(mc, TOPIC_B, PARTS, 1), 0);
    rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(mc, 200);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mock_kafka_stop();
    return 0;
}

static void test_a_joining_member_takes_only_what_moves_and_keeps_partitions_together(void **state)
{
    (void)state;
    alarm(WATCHDOG_S);
    static member_t m1, m2;
    m1.other = &m2;
    m2.other = &m1;
    kafka_consumer_t *c1 = join(&m1);
    poll_until(c1, &m1, 2 * PARTS, NULL, &m2, 0);
    assert_int_equal(m1.revokes, 0);

    kafka_consumer_t *c2 = join(&m2);
    poll_until(c1, &m1, PARTS, c2, &m2, PARTS);
    /* Incremental: the first gave up the half that moved, nothing more. */
    assert_int_equal(m1.revoked_tps, PARTS);
    for (int p = 0; p < PARTS; p++) {
        assert_int_equal(m1.held[0][p], m1.held[1][p]); /* partition p of both together */
        assert_int_equal(m2.held[0][p], m2.held[1][p]);
        assert_true(m1.held[0][p] != m2.held[0][p]); /* each partition has one owner */
    }

    /* The second leaves (a clean close): the first is given its share back. */
    kafka_consumer_destroy(c2);
    memset(m2.held, 0, sizeof m2.held);
    poll_until(c1, &m1, 2 * PARTS, NULL, &m2, 0);
    assert_int_equal(m1.revoked_tps, PARTS);
    kafka_consumer_destroy(c1);
    assert_int_equal(m1.revoked_tps, 3 * PARTS); /* the close revokes all it held */
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_joining_member_takes_only_what_moves_and_keeps_partitions_together),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
