/* The partition reader against librdkafka's mock cluster (three brokers in this
 * process): a read to the end, and a read to the end after the partition's
 * leader broker went down and another took over, must come back within its
 * timeout — librdkafka 2.0.2's rd_kafka_query_watermark_offsets never did
 * (a request to a broker that is down is never sent, so it never times out:
 * librdkafka #2588), which hung a restore after the leader's kill -9 on the
 * 3-broker cluster. The mock cluster ignores read_committed, so this proves the
 * bound on the calls' time, not anything about transactions (the real broker's
 * tests do that: itest_offsets). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "hf_clock.h"
#include "kafka.h"
#include "log.h"
#include "mock_kafka.h"

#define TOPIC      "hf-mock-reads"
#define WATCHDOG_S 90 /* a hang fails the test instead of the CI job's clock */

static rd_kafka_mock_cluster_t *mc;
static char bootstrap[256];
static char errstr[512];

static int setup(void **state)
{
    (void)state;
    mc = mock_kafka_start(3, TOPIC, 1, 3,
                          "test_kafka_reader_mock: a reader call did not return within the "
                          "watchdog (the watermark-query hang, librdkafka #2588)",
                          bootstrap, sizeof bootstrap);
    assert_int_equal(rd_kafka_mock_partition_set_leader(mc, TOPIC, 0, 1),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mock_kafka_stop();
    return 0;
}

static void produce(int count, int first)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, errstr, sizeof errstr),
                     RD_KAFKA_CONF_OK);
    rd_kafka_conf_set(c, "log_level", "0", NULL, 0);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, c, errstr, sizeof errstr);
    assert_non_null(p);
    for (int i = 0; i < count; i++) {
        char v[32];
        int n = snprintf(v, sizeof v, "record-%d", first + i);
        assert_int_equal(rd_kafka_producev(p, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_PARTITION(0),
                                           RD_KAFKA_V_VALUE(v, (size_t)n),
                                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                           RD_KAFKA_V_END),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    assert_int_equal(rd_kafka_flush(p, 20000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(p);
}

static int count_record(void *opaque, const kafka_msg_t *msg)
{
    (void)msg;
    (*(int *)opaque)++;
    return 0;
}

static kafka_reader_t *reader(void)
{
    const char *const overrides[] = {"log_level=0", NULL};
    kafka_conf_t conf = {
        .bootstrap = bootstrap, .client_id = "hf-mock-test", .overrides = overrides};
    kafka_reader_t *rd = NULL;
    assert_int_equal(kafka_reader_new(&conf, &rd, errstr, sizeof errstr), 0);
    return rd;
}

/* Records 0..4 read, the leader goes down and broker 2 leads; a second read
 * from where the first ended must find the five records written since, through
 * the new leader, well within its timeout. */
static void test_a_read_after_the_leader_died_finds_the_new_leader_within_its_timeout(void **state)
{
    (void)state;
    produce(5, 0);
    kafka_reader_t *rd = reader();
    int seen = 0;
    int64_t next = -1;
    alarm(WATCHDOG_S);
    assert_int_equal(kafka_reader_read_to_end(rd, TOPIC, 0, KAFKA_OFFSET_BEGINNING, 10000,
                                              count_record, &seen, &next, errstr, sizeof errstr),
                     0);
    assert_int_equal(seen, 5);
    assert_int_equal(next, 5);

    rd_kafka_mock_broker_set_down(mc, 1);
    assert_int_equal(rd_kafka_mock_partition_set_leader(mc, TOPIC, 0, 2),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    produce(5, 5);

    int64_t started_ms = hf_mono_ms();
    seen = 0;
    int err = kafka_reader_read_to_end(rd, TOPIC, 0, next, 20000, count_record, &seen, &next,
                                       errstr, sizeof errstr);
    int64_t took_ms = hf_mono_ms() - started_ms;
    print_message("read after the leader's death: %d in %lld ms (%s)\n", err, (long long)took_ms,
                  err ? errstr : "ok");
    assert_int_equal(err, 0);
    assert_int_equal(seen, 5);
    assert_int_equal(next, 10);
    assert_true(took_ms < 20000);

    /* The liveness probe is bounded too: with the only replica's broker down, it says no. */
    rd_kafka_mock_broker_set_down(mc, 2);
    started_ms = hf_mono_ms();
    assert_false(kafka_reader_broker_alive(rd, TOPIC, 0, 1000));
    took_ms = hf_mono_ms() - started_ms;
    assert_true(took_ms < 5000);
    rd_kafka_mock_broker_set_up(mc, 2);
    rd_kafka_mock_broker_set_up(mc, 1);
    alarm(0);
    kafka_reader_destroy(rd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_read_after_the_leader_died_finds_the_new_leader_within_its_timeout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
