/* The process's Kafka client configuration (kafka_props.h, kafka_client_config_load):
 * a properties file and kafka_overrides parsed, applied to every client's
 * configuration, and a property holdfast controls, an unknown one or a bad value
 * refused by name — without echoing a value that may be a password. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_limits.h"
#include "kafka_int.h"
#include "kafka_props.h"

static char errstr[512];

/* Writes text to a temporary file; the caller unlinks path. */
static void write_tmp(char *path, const char *text)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int load_text(kafka_props_t *props, const char *text)
{
    char path[] = "/tmp/hf-kprops-XXXXXX";
    write_tmp(path, text);
    errstr[0] = '\0';
    int err = kafka_props_load_file(props, path, errstr, sizeof errstr);
    unlink(path);
    return err;
}

static const char *value_of(const kafka_props_t *props, const char *wanted)
{
    for (size_t i = 0; i < kafka_props_count(props); i++) {
        const char *name, *value;
        kafka_props_at(props, i, &name, &value);
        if (strcmp(name, wanted) == 0)
            return value;
    }
    return NULL;
}

static void expect_err(int err, const char *needle)
{
    assert_int_not_equal(err, HF_OK);
    if (!strstr(errstr, needle))
        fail_msg("error \"%s\" does not say \"%s\"", errstr, needle);
}

static void test_properties_file_is_parsed_java_style(void **state)
{
    kafka_props_t *props = kafka_props_new();
    assert_int_equal(load_text(props, "# security\n"
                                      "! also a comment\n"
                                      "\n"
                                      "  security.protocol = SASL_SSL  \n"
                                      "sasl.mechanisms=PLAIN\n"
                                      "sasl.username=checkout\n"
                                      "sasl.password=a=b#c\n"
                                      "linger.ms=5\n"
                                      "linger.ms=7\n"),
                     HF_OK);
    assert_int_equal(kafka_props_count(props), 5); /* the second linger.ms replaced the first */
    assert_string_equal(value_of(props, "security.protocol"), "SASL_SSL");
    assert_string_equal(value_of(props, "sasl.password"), "a=b#c"); /* first '=' splits */
    assert_string_equal(value_of(props, "linger.ms"), "7");
    kafka_props_destroy(props);
}

static void test_property_holdfast_controls_is_refused_by_name(void **state)
{
    const char *names[] = {"transactional.id",
                           "isolation.level",
                           "enable.auto.commit",
                           "partitioner",
                           "acks",
                           "enable.idempotence",
                           "group.id",
                           "ISOLATION.LEVEL",
                           "bootstrap.servers",
                           "auto.offset.reset"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        kafka_props_t *props = kafka_props_new();
        char text[128], needle[64];
        snprintf(text, sizeof text, "security.protocol=SSL\n%s=x\n", names[i]);
        snprintf(needle, sizeof needle, ":2: kafka property '%s' is set by holdfast", names[i]);
        expect_err(load_text(props, text), needle);
        kafka_props_destroy(props);
    }
    assert_non_null(kafka_props_reserved_reason("partitioner"));
    assert_null(kafka_props_reserved_reason("sasl.password"));
}

static void test_unknown_property_or_bad_value_is_refused_without_the_value(void **state)
{
    kafka_props_t *props = kafka_props_new();
    expect_err(load_text(props, "sasl.pasword=hunter2\n"), "'sasl.pasword'");
    assert_null(strstr(errstr, "hunter2"));
    expect_err(load_text(props, "security.protocol=hunter2\n"), "invalid value");
    assert_null(strstr(errstr, "hunter2"));
    expect_err(load_text(props, "just-a-name\n"), "expected name=value");
    kafka_props_destroy(props);
}

static void test_bounds_are_refused(void **state)
{
    kafka_props_t *props = kafka_props_new();
    size_t n = HF_KAFKA_PROPS_LINE_LEN_MAX + 100;
    char *text = malloc(n + 2);
    memset(text, 'x', n);
    memcpy(text, "sasl.password=", 14);
    text[n] = '\n';
    text[n + 1] = '\0';
    expect_err(load_text(props, text), "longer than");
    free(text);
    errstr[0] = '\0';
    assert_int_equal(
        kafka_props_load_file(props, "/nonexistent/kafka.properties", errstr, sizeof errstr),
        HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "/nonexistent/kafka.properties"));
    kafka_props_destroy(props);
}

static void test_overrides_list_is_parsed_and_checked(void **state)
{
    kafka_props_t *props = kafka_props_new();
    assert_int_equal(kafka_props_load_list(props, "linger.ms=3, socket.timeout.ms=20000,",
                                           "kafka_overrides", errstr, sizeof errstr),
                     HF_OK);
    assert_string_equal(value_of(props, "socket.timeout.ms"), "20000");
    expect_err(kafka_props_load_list(props, "linger.ms=3,partitioner=random", "kafka_overrides",
                                     errstr, sizeof errstr),
               "kafka_overrides: kafka property 'partitioner' is set by holdfast");
    kafka_props_destroy(props);
}

static const char *conf_value(rd_kafka_conf_t *c, const char *name, char *buf, size_t size)
{
    size_t n = size;
    assert_int_equal(rd_kafka_conf_get(c, name, buf, &n), RD_KAFKA_CONF_OK);
    return buf;
}

/* Runs last: the process configuration is loaded once. */
static void test_every_client_conf_gets_the_file_then_the_overrides(void **state)
{
    char path[] = "/tmp/hf-kprops-XXXXXX";
    write_tmp(path, "security.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\nlinger.ms=9\n");
    assert_int_equal(kafka_client_config_load(path, "linger.ms=4", errstr, sizeof errstr), HF_OK);
    unlink(path);
    const char *const defaults[] = {"linger.ms=1", "partitioner=murmur2_random", NULL};
    kafka_conf_t conf = {"127.0.0.1:1", "test", NULL};
    rd_kafka_conf_t *c = kafka_conf_build(&conf, defaults, errstr, sizeof errstr);
    assert_non_null(c);
    char buf[256];
    assert_string_equal(conf_value(c, "security.protocol", buf, sizeof buf), "sasl_ssl");
    assert_string_equal(conf_value(c, "sasl.mechanisms", buf, sizeof buf), "PLAIN");
    assert_string_equal(conf_value(c, "linger.ms", buf, sizeof buf), "4"); /* overrides win */
    assert_string_equal(conf_value(c, "partitioner", buf, sizeof buf), "murmur2_random");
    rd_kafka_conf_destroy(c);
    /* the admin and reader paths build without defaults: the same properties */
    c = kafka_conf_build(&conf, NULL, errstr, sizeof errstr);
    assert_non_null(c);
    assert_string_equal(conf_value(c, "security.protocol", buf, sizeof buf), "sasl_ssl");
    rd_kafka_conf_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_properties_file_is_parsed_java_style),
        cmocka_unit_test(test_property_holdfast_controls_is_refused_by_name),
        cmocka_unit_test(test_unknown_property_or_bad_value_is_refused_without_the_value),
        cmocka_unit_test(test_bounds_are_refused),
        cmocka_unit_test(test_overrides_list_is_parsed_and_checked),
        cmocka_unit_test(test_every_client_conf_gets_the_file_then_the_overrides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
