/* librdkafka's mock cluster for unit tests of error paths: brokers in this
 * process, one topic, holdfast's client configuration loaded, librdkafka's and
 * holdfast's logs quiet but for errors (a downed broker's warnings are expected),
 * and SIGALRM bound to a watchdog that fails the test with why_hung when a call
 * does not return (alarm(seconds) arms it). */
#ifndef HF_TEST_MOCK_KAFKA_H
#define HF_TEST_MOCK_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/* Starts brokers brokers with topic of partitions partitions, replication
 * replicas; fails the test (cmocka) on error. *bootstrap receives the list. */
rd_kafka_mock_cluster_t *mock_kafka_start(int brokers, const char *topic, int partitions,
                                          int replication, const char *why_hung, char *bootstrap,
                                          size_t bootstrap_size);
void mock_kafka_stop(void);

#endif
