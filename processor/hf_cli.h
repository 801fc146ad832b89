/* The command-line convention of holdfast, hfctl and hfbench, on glibc's
 * getopt_long: each command declares a table of long options; the parser adds
 * -h/--help and --version to every command, prints the usage from the same
 * table (so help cannot drift from what is accepted) and names an unknown option
 * or a missing value in its error. Exit codes stay with the callers: 0 after
 * --help or --version, 2 on a usage mistake. */
#ifndef HF_CLI_H
#define HF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "hf_limits.h"

/* One option: its long name without "--", the placeholder of its value (NULL
 * for a flag without a value), whether the command needs it, one line of help. */
typedef struct {
    const char *name;
    const char *arg;
    bool required;
    const char *help;
} hf_cli_opt_t;

/* One command: its words ("reserve", "stock feed"), the synopsis of its
 * positional arguments (NULL when it takes none) and how many it takes at most,
 * one line saying what it does, and its options ending with a {NULL} entry. */
typedef struct {
    const char *name;
    const char *positional;
    size_t positional_max;
    const char *summary;
    const hf_cli_opt_t *opts;
} hf_cli_cmd_t;

/* What was given: values[i] belongs to cmd->opts[i] (NULL when absent; "" for a
 * flag that was given), then the positional arguments in order. */
typedef struct {
    const hf_cli_cmd_t *cmd;
    const char *values[HF_CLI_OPTS_MAX];
    const char *positional[HF_CLI_POSITIONAL_MAX];
    size_t positional_count;
} hf_cli_args_t;

typedef enum {
    HF_CLI_RUN,     /* parsed: run the command */
    HF_CLI_HELP,    /* -h/--help: usage printed on stdout, exit 0 */
    HF_CLI_VERSION, /* --version: the caller prints hf_version_print, exit 0 */
    HF_CLI_MISUSE,  /* the mistake and a pointer to --help printed on stderr, exit 2 */
} hf_cli_result_t;

/* Parses argv[1..argc) (argv[0] is the last command word) against cmd. prog is
 * the binary's name, used in messages ("hfctl"). Reorders argv (GNU
 * permutation: options and positional arguments may be mixed). */
hf_cli_result_t hf_cli_parse(const char *prog, const hf_cli_cmd_t *cmd, int argc, char **argv,
                             hf_cli_args_t *args);

/* The value of option name, or NULL when it was not given. Asserts that the
 * command declares name: asking for an undeclared option is a programming error. */
const char *hf_cli_get(const hf_cli_args_t *args, const char *name);

/* "usage: PROG NAME [options] POSITIONAL", the summary, then one line per option. */
void hf_cli_usage(FILE *out, const char *prog, const hf_cli_cmd_t *cmd);

#endif
