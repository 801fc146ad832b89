/* A transaction call against librdkafka's mock cluster whose transaction
 * coordinator stops answering: kafka_txn_send_offsets must come back with an
 * error within about the producer's transaction timeout, not wait for the
 * coordinator. holdfast passes -1 (kafka.c) and relies on librdkafka capping the
 * call at the transaction timeout; this proves that bound, the one every task
 * loop's liveness assumes (the stall watchdog ends what it does not cover). The
 * coordinator's silence is a 60 s delay on every AddOffsetsToTxn. */
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

#define TOPIC                  "hf-mock-txn"
#define TXN_ID                 "hf-mock-txn-0"
#define GROUP                  "hf-mock-txn-group"
#define TXN_TIMEOUT_MS         2000
#define SILENCE_MS             60000 /* the coordinator's delay: far beyond the bound */
#define WATCHDOG_S             40    /* a hang fails the test instead of the CI job's clock */
#define API_ADD_OFFSETS_TO_TXN 25

static rd_kafka_mock_cluster_t *mc;
static char bootstrap[256];
static char errstr[512];

static int setup(void **state)
{
    (void)state;
    mc = mock_kafka_start(1, TOPIC, 1, 1,
                          "test_kafka_txn_mock: send_offsets did not return within the "
                          "watchdog (an unbounded wait on a silent coordinator)",
                          bootstrap, sizeof bootstrap);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mock_kafka_stop();
    return 0;
}

static void
test_send_offsets_to_a_silent_coordinator_ends_within_the_transaction_timeout(void **state)
{
    (void)state;
    kafka_conf_t kc = {bootstrap, "hf-mock-txn", NULL};
    kafka_producer_t *kp = NULL;
    assert_int_equal(kafka_producer_new(&kc, TXN_ID, TXN_TIMEOUT_MS, &kp, errstr, sizeof errstr),
                     HF_OK);
    assert_int_equal(kafka_txn_init(kp, 10000, errstr, sizeof errstr), HF_OK);
    const char *topics[] = {TOPIC};
    kafka_rebalance_t rb = {.committed_timeout_ms = 10000};
    kafka_consumer_t *cons = NULL;
    kafka_group_t g = {.group_id = GROUP};
    assert_int_equal(kafka_consumer_new(&kc, &g, topics, 1, &rb, &cons, errstr, sizeof errstr),
                     HF_OK);
    assert_int_equal(kafka_txn_begin(kp, errstr, sizeof errstr), HF_OK);

    /* Every attempt librdkafka makes within the call meets the same silence. */
    assert_int_equal(rd_kafka_mock_broker_push_request_error_rtts(
                         mc, 1, API_ADD_OFFSETS_TO_TXN, 4, RD_KAFKA_RESP_ERR_NO_ERROR, SILENCE_MS,
                         RD_KAFKA_RESP_ERR_NO_ERROR, SILENCE_MS, RD_KAFKA_RESP_ERR_NO_ERROR,
                         SILENCE_MS, RD_KAFKA_RESP_ERR_NO_ERROR, SILENCE_MS),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    kafka_tp_t tp = {TOPIC, 0};
    int64_t next = 1;
    alarm(WATCHDOG_S);
    int64_t t0 = hf_mono_ms();
    int err = kafka_txn_send_offsets(kp, cons, &tp, &next, 1, errstr, sizeof errstr);
    int64_t took_ms = hf_mono_ms() - t0;
    print_message("send_offsets to a silent coordinator: %s after %lld ms: %s\n", hf_err_name(err),
                  (long long)took_ms, errstr);
    assert_int_not_equal(err, HF_OK);
    assert_true(err != HF_ERR_FATAL); /* the producer is fine: abort and retry the batch */
    /* librdkafka notices a timed-out request once a second: allow for it */
    assert_true(took_ms < 3 * TXN_TIMEOUT_MS);
    kafka_consumer_destroy(cons);
    kafka_producer_destroy(kp);
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_send_offsets_to_a_silent_coordinator_ends_within_the_transaction_timeout),
    };
    return cmocka_run_group_tests_name("kafka transactions on the mock cluster", tests, setup,
                                       teardown);
}
