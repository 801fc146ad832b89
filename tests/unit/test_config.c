/* `holdfast run --config FILE`: defaults that pass their own rules, a typo or a
 * value out of bounds refused naming the key, and the rules between settings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_pass_their_own_rules),
        cmocka_unit_test(test_settings_are_applied_and_typos_or_bounds_refused_by_name),
        cmocka_unit_test(test_a_hold_must_outlive_the_gateways_resends),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
