#include "mock_kafka.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "kafka.h"
#include "log.h"

static rd_kafka_t *mock_owner;
static rd_kafka_mock_cluster_t *mock_cluster;
static char watchdog_msg[256];

static void watchdog_fired(int sig)
{
    (void)sig;
    ssize_t w = write(2, watchdog_msg, strlen(watchdog_msg));
    (void)w;
    _exit(3);
}

rd_kafka_mock_cluster_t *mock_kafka_start(int brokers, const char *topic, int partitions,
                                          int replication, const char *why_hung, char *bootstrap,
                                          size_t bootstrap_size)
{
    char errstr[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "log_level", "0", NULL, 0);
    mock_owner = rd_kafka_new(RD_KAFKA_PRODUCER, c, errstr, sizeof errstr);
    assert_non_null(mock_owner);
    mock_cluster = rd_kafka_mock_cluster_new(mock_owner, brokers);
    assert_non_null(mock_cluster);
    snprintf(bootstrap, bootstrap_size, "%s", rd_kafka_mock_cluster_bootstraps(mock_cluster));
    assert_int_equal(rd_kafka_mock_topic_create(mock_cluster, topic, partitions, replication),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    snprintf(watchdog_msg, sizeof watchdog_msg, "%s\n", why_hung);
    signal(SIGALRM, watchdog_fired);
    log_set_level(HF_LOG_ERROR);
    assert_int_equal(kafka_client_config_load(NULL, NULL, errstr, sizeof errstr), 0);
    return mock_cluster;
}

void mock_kafka_stop(void)
{
    rd_kafka_mock_cluster_destroy(mock_cluster);
    rd_kafka_destroy(mock_owner);
    mock_cluster = NULL;
    mock_owner = NULL;
}
