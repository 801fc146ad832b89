/* `holdfast run --config FILE`: defaults that pass their own rules, a typo or a
 * value out of bounds refused naming the key, the rules between settings, and
 * the settings a stage's init checks (its environment, built at start). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregator/aggregator.h"
#include "config.h"
#include "gateway/gateway.h"

static char errstr[512];

/* Loads json (written to a temporary file) over the defaults. */
static int load(const char *json, hf_config_t *cfg)
{
    char path[] = "/tmp/hf-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    config_defaults(cfg);
    errstr[0] = '\0';
    int err = config_load_file(cfg, path, errstr, sizeof errstr);
    unlink(path);
    return err;
}

static void expect_refused(const char *json, const char *needle)
{
    hf_config_t cfg;
    assert_int_equal(load(json, &cfg), HF_ERR_CONFIG);
    if (!strstr(errstr, needle))
        fail_msg("error \"%s\" does not say \"%s\"", errstr, needle);
}

static void test_defaults_pass_their_own_rules(void **state)
{
    hf_config_t cfg;
    config_defaults(&cfg);
    assert_int_equal(config_check(&cfg, errstr, sizeof errstr), HF_OK);
    assert_int_equal(load("{}", &cfg), HF_OK);
    assert_int_equal(cfg.hold_retention_ms, 3600 * 1000);
    assert_int_equal(cfg.aggregator_commit_interval_ms, 100);
    assert_int_equal(cfg.metrics_port, 0);
    assert_string_equal(cfg.late_payment_policy, "refund");
}

static void test_settings_are_applied_and_typos_or_bounds_refused_by_name(void **state)
{
    hf_config_t cfg;
    assert_int_equal(load("{\"late_payment_policy\": \"rereserve\", \"metrics_port\": 9464}", &cfg),
                     HF_OK);
    assert_string_equal(cfg.late_payment_policy, "rereserve");
    assert_int_equal(cfg.metrics_port, 9464);
    expect_refused("{\"metrics_prot\": 9464}", "metrics_prot");
    expect_refused("{\"metrics_port\": 70000}", "metrics_port");
    expect_refused("{\"state_max_age_ms\": 700000000}", "state_max_age_ms");
    expect_refused("[1]", "top level must be an object");
}

static void test_a_hold_must_outlive_the_gateways_resends(void **state)
{
    hf_config_t cfg;
    /* result_timeout_ms 3000: the gateway may re-send a Hold for 21 x 3 s. */
    expect_refused("{\"hold_retention_ms\": 60000}", "hold_retention_ms 60000 must be at least");
    assert_int_equal(load("{\"hold_retention_ms\": 126000}", &cfg), HF_OK);
    assert_int_equal(load("{\"hold_retention_ms\": 5000, \"result_timeout_ms\": 100}", &cfg),
                     HF_OK);
    expect_refused("{\"signal_low_watermark\": 5, \"signal_high_watermark\": 5}",
                   "signal_high_watermark 5 must be above");
}

/* The takeover after a kill -9 starts when the session ends: its defaults keep
 * it inside the 5 s expiry bound, and a heartbeat too slow for the session (two
 * lost heartbeats would end it) is refused naming both keys. */
static void test_session_heartbeat_and_standby_settings_are_checked(void **state)
{
    hf_config_t cfg;
    config_defaults(&cfg);
    assert_int_equal(cfg.consumer_session_timeout_ms, 3000);
    assert_int_equal(cfg.consumer_heartbeat_interval_ms, 500);
    assert_int_equal(cfg.standby_replicas, 1);
    assert_int_equal(load("{\"consumer_session_timeout_ms\": 6000, "
                          "\"consumer_heartbeat_interval_ms\": 2000, \"standby_replicas\": 0}",
                          &cfg),
                     HF_OK);
    assert_int_equal(cfg.consumer_session_timeout_ms, 6000);
    assert_int_equal(cfg.standby_replicas, 0);
    expect_refused("{\"consumer_session_timeout_ms\": 3000, "
                   "\"consumer_heartbeat_interval_ms\": 1500}",
                   "consumer_heartbeat_interval_ms 1500 must be at most a third of "
                   "consumer_session_timeout_ms 3000");
    expect_refused("{\"consumer_session_timeout_ms\": 500}", "consumer_session_timeout_ms");
    expect_refused("{\"standby_replicas\": 2}", "standby_replicas");
    assert_string_equal(cfg.group_protocol, "classic");
    assert_int_equal(load("{\"group_protocol\": \"consumer\"}", &cfg), HF_OK);
    assert_string_equal(cfg.group_protocol, "consumer");
    expect_refused("{\"group_protocol\": \"cooperative\"}",
                   "group_protocol: 'cooperative' is not one of classic, consumer");
}

static void test_reservations_outlive_their_idempotency_records(void **state)
{
    expect_refused("{\"reservation_retention_ms\": 1000, \"idempotency_retention_ms\": 2000}",
                   "reservation_retention_ms 1000 must be at least idempotency_retention_ms 2000");
}

static void test_registry_settings_are_checked_naming_the_key(void **state)
{
    hf_config_t cfg;
    config_defaults(&cfg);
    assert_string_equal(cfg.output_framing, "single-object");
    assert_string_equal(cfg.schema_registry_url, "");
    assert_int_equal(load("{\"output_framing\": \"confluent\", \"schema_registry_url\": "
                          "\"http://127.0.0.1:8081\"}",
                          &cfg),
                     HF_OK);
    assert_string_equal(cfg.output_framing, "confluent");
    assert_int_equal(load("{\"schema_registry_url\": \"https://sr.example:443/base/\"}", &cfg),
                     HF_OK);
    expect_refused("{\"output_framing\": \"avro\"}", "output_framing 'avro' must be");
    expect_refused("{\"output_framing\": \"confluent\"}",
                   "output_framing 'confluent' needs schema_registry_url");
    expect_refused("{\"schema_registry_url\": \"127.0.0.1:8081\"}",
                   "schema_registry_url '127.0.0.1:8081' must start with http://");
    expect_refused("{\"schema_registry_timeout_ms\": 10}", "schema_registry_timeout_ms");
}

/* The gateway's settings as its init reads them (gateway_env_configure is the
 * part before any Kafka client). */
static int gateway_with(const char *json, gateway_env_t *env)
{
    hf_config_t cfg;
    assert_int_equal(load(json, &cfg), HF_OK);
    errstr[0] = '\0';
    return gateway_env_configure(&cfg, env, errstr, sizeof errstr);
}

static void expect_gateway_refuses(const char *json, const char *needle)
{
    gateway_env_t env;
    assert_int_equal(gateway_with(json, &env), HF_ERR_CONFIG);
    if (!strstr(errstr, needle))
        fail_msg("error \"%s\" does not say \"%s\"", errstr, needle);
}

static void test_gateway_settings_are_checked_by_its_init_naming_the_key(void **state)
{
    static gateway_env_t env;
    assert_int_equal(gateway_with("{\"late_payment_policy\": \"rereserve\", "
                                  "\"campaign_ttls\": \"flash=120000,vip=1800000\"}",
                                  &env),
                     HF_OK);
    assert_int_equal(env.late_policy, GW_LATE_RERESERVE);
    assert_int_equal(env.campaigns_count, 2);
    assert_int_equal(env.campaigns[1].ttl_ms, 1800000);
    assert_true(env.routes.warehouses_count > 0);
    expect_gateway_refuses("{\"late_payment_policy\": \"refnd\"}",
                           "late_payment_policy: 'refnd' is not one of refund, rereserve");
    expect_gateway_refuses("{\"warehouses_file\": \"/nonexistent/warehouses.json\"}",
                           "warehouses_file: ");
    expect_gateway_refuses("{\"campaign_ttls\": \"flash=5m\"}",
                           "campaign_ttls: ttl of 'flash' must be in");
    expect_gateway_refuses("{\"campaign_ttls\": \"flash\"}",
                           "campaign_ttls: 'flash' is not name=ms");
    expect_gateway_refuses("{\"payment_policy\": \"failed=refund\"}",
                           "payment_policy: 'failed=refund' is not event=action");
    expect_refused("{\"payment_pending_max_ms\": 999999999}", "payment_pending_max_ms");
    expect_gateway_refuses("{\"ship_from_file\": \"/nonexistent/ship_from.txt\"}",
                           "ship_from_file /nonexistent/ship_from.txt: No such file");
    assert_int_equal(gateway_with("{\"payment_policy\": \"failed=release\", "
                                  "\"payment_pending_max_ms\": 86400000}",
                                  &env),
                     HF_OK);
    assert_int_equal(env.payment_action[HF_PAY_FAILED], GW_PAY_RELEASE);
    assert_int_equal(env.payment_action[HF_PAY_CANCELED], GW_PAY_RELEASE); /* the default */
    assert_int_equal(env.payment_action[HF_PAY_PROCESSING], GW_PAY_EXTEND);
    assert_int_equal(env.payment_pending_max_ms, 86400000);
    assert_int_equal(env.payment_pending_extend_ms, 15 * 60 * 1000);
}

/* Writes text to a temporary file named into path (PATH_MAX-ish). */
static void write_temp(const char *text, char *path, size_t path_size)
{
    snprintf(path, path_size, "/tmp/hf-overrides-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* The aggregator's init loads signal_overrides_file; a malformed one fails it. */
static int aggregator_with(const char *overrides, void **env)
{
    hf_config_t cfg;
    config_defaults(&cfg);
    char path[64] = "";
    if (overrides) {
        write_temp(overrides, path, sizeof path);
        snprintf(cfg.signal_overrides_file, sizeof cfg.signal_overrides_file, "%s", path);
    }
    errstr[0] = '\0';
    int err = aggregator_env_new(&cfg, env, errstr, sizeof errstr);
    if (path[0])
        unlink(path);
    return err;
}

static void test_signal_overrides_are_loaded_and_checked_by_the_aggregators_init(void **state)
{
    void *env = NULL;
    assert_int_equal(aggregator_with("{\"SKU-B\": {\"low\": 5, \"high\": 10}, "
                                     "\"SKU-A\": {\"dwell_ms\": 0}}",
                                     &env),
                     HF_OK);
    signal_policy_t p = policy_for(env, "SKU-B");
    assert_int_equal(p.low, 5);
    assert_int_equal(p.high, 10);
    assert_int_equal(p.dwell_ms, 2000); /* the global one where the override is silent */
    assert_int_equal(policy_for(env, "SKU-A").dwell_ms, 0);
    p = policy_for(env, "SKU-Z");
    assert_int_equal(p.low, 0);
    assert_int_equal(p.high, 1);
    aggregator_env_destroy(env);

    assert_int_equal(aggregator_with(NULL, &env), HF_OK); /* no file: the global policy */
    assert_int_equal(policy_for(env, "SKU-B").high, 1);
    aggregator_env_destroy(env);
    aggregator_env_destroy(NULL);

    const char *bad[][2] = {
        {"{\"SKU-1\": {\"low\": 5, \"high\": 2}}", "SKU 'SKU-1' needs"},
        {"{\"SKU-1\": {\"low\": \"5\"}}", "SKU 'SKU-1' needs"},
        {"[1, 2]", "must be an object"},
        {"{\"SKU-1\": ", "signal_overrides_file /tmp/hf-overrides-"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        env = &env; /* must come back NULL */
        assert_int_equal(aggregator_with(bad[i][0], &env), HF_ERR_CONFIG);
        assert_null(env);
        if (!strstr(errstr, bad[i][1]) || !strstr(errstr, "signal_overrides_file"))
            fail_msg("overrides %s: error \"%s\" does not say \"%s\"", bad[i][0], errstr,
                     bad[i][1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_pass_their_own_rules),
        cmocka_unit_test(test_settings_are_applied_and_typos_or_bounds_refused_by_name),
        cmocka_unit_test(test_a_hold_must_outlive_the_gateways_resends),
        cmocka_unit_test(test_session_heartbeat_and_standby_settings_are_checked),
        cmocka_unit_test(test_reservations_outlive_their_idempotency_records),
        cmocka_unit_test(test_registry_settings_are_checked_naming_the_key),
        cmocka_unit_test(test_gateway_settings_are_checked_by_its_init_naming_the_key),
        cmocka_unit_test(test_signal_overrides_are_loaded_and_checked_by_the_aggregators_init),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
