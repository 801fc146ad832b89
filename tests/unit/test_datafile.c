/* Unit tests of the data-file search order (common/hf_datafile.h) that every binary
 * uses for topics.json and warehouses.json when none is named: the working
 * directory's copy wins (a checkout), then the installed one ($HOLDFAST_SYSCONFDIR,
 * default /etc/holdfast), and with neither the working-directory path comes back, so
 * the error that follows names it. Each test runs in a temp dir of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf_datafile.h"

typedef struct {
    char old_cwd[PATH_MAX];
    char dir[64];
} fixture_t;

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{}\n", f);
    fclose(f);
}

static int setup(void **state)
{
    static fixture_t fx;
    assert_non_null(getcwd(fx.old_cwd, sizeof fx.old_cwd));
    snprintf(fx.dir, sizeof fx.dir, "/tmp/hf-datafile.XXXXXX");
    assert_non_null(mkdtemp(fx.dir));
    assert_int_equal(chdir(fx.dir), 0);
    assert_int_equal(mkdir("cwd", 0755), 0);
    assert_int_equal(mkdir("cwd/config", 0755), 0);
    assert_int_equal(mkdir("etc", 0755), 0);
    assert_int_equal(chdir("cwd"), 0);
    unsetenv("HOLDFAST_SYSCONFDIR");
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    unsetenv("HOLDFAST_SYSCONFDIR");
    assert_int_equal(chdir(fx->old_cwd), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_the_working_directory_copy_wins(void **state)
{
    fixture_t *fx = *state;
    char etc[96], out[HF_DATAFILE_PATH_MAX];
    snprintf(etc, sizeof etc, "%s/etc", fx->dir);
    setenv("HOLDFAST_SYSCONFDIR", etc, 1);
    touch("config/warehouses.json");
    touch("../etc/warehouses.json");
    assert_string_equal(
        hf_datafile_find("config/warehouses.json", "warehouses.json", out, sizeof out),
        "config/warehouses.json");
}

static void test_the_installed_copy_when_the_working_directory_has_none(void **state)
{
    fixture_t *fx = *state;
    char etc[96], want[128], out[HF_DATAFILE_PATH_MAX];
    snprintf(etc, sizeof etc, "%s/etc", fx->dir);
    snprintf(want, sizeof want, "%s/etc/topics.json", fx->dir);
    setenv("HOLDFAST_SYSCONFDIR", etc, 1);
    touch("../etc/topics.json");
    const char *got = hf_datafile_find("topics/topics.json", "topics.json", out, sizeof out);
    assert_ptr_equal(got, out);
    assert_string_equal(got, want);
}

static void test_neither_gives_the_working_directory_path(void **state)
{
    fixture_t *fx = *state;
    char etc[96], out[HF_DATAFILE_PATH_MAX];
    snprintf(etc, sizeof etc, "%s/etc", fx->dir);
    setenv("HOLDFAST_SYSCONFDIR", etc, 1);
    assert_string_equal(hf_datafile_find("topics/topics.json", "topics.json", out, sizeof out),
                        "topics/topics.json");
    /* An empty HOLDFAST_SYSCONFDIR is unset: the default directory, which has no
     * such file on a test machine. */
    setenv("HOLDFAST_SYSCONFDIR", "", 1);
    assert_string_equal(
        hf_datafile_find("topics/topics.json", "no-such-file.json", out, sizeof out),
        "topics/topics.json");
}

static void test_a_directory_too_long_for_the_buffer_is_not_used(void **state)
{
    fixture_t *fx = *state;
    char etc[96], out[24];
    snprintf(etc, sizeof etc, "%s/etc", fx->dir);
    setenv("HOLDFAST_SYSCONFDIR", etc, 1);
    touch("../etc/topics.json");
    /* "<dir>/etc/topics.json" does not fit in 24 bytes: never a cut path. */
    assert_string_equal(hf_datafile_find("topics/topics.json", "topics.json", out, sizeof out),
                        "topics/topics.json");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_the_working_directory_copy_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_installed_copy_when_the_working_directory_has_none,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_neither_gives_the_working_directory_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_directory_too_long_for_the_buffer_is_not_used, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
