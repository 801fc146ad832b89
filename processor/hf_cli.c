/* The shared argument parser (hf_cli.h): builds getopt_long's table from a
 * command's option list, collects values by option index, and renders the usage
 * text from the same list. Messages are its own (opterr = 0), so they name the
 * command as the user typed it. */
#include "hf_cli.h"

#include <getopt.h>
#include <string.h>

#include "hf_assert.h"

/* getopt_long's val for the option at index i (above every short option). */
#define CLI_VAL_BASE    1000
#define CLI_VAL_VERSION (CLI_VAL_BASE - 1)

static size_t opts_count(const hf_cli_cmd_t *cmd)
{
    size_t n = 0;
    while (cmd->opts && cmd->opts[n].name)
        n++;
    hf_assert(n <= HF_CLI_OPTS_MAX);
    return n;
}

static void misuse_hint(const char *prog, const hf_cli_cmd_t *cmd)
{
    fprintf(stderr, "(%s %s --help lists its options)\n", prog, cmd->name);
}

static hf_cli_result_t check_args(const char *prog, const hf_cli_cmd_t *cmd, int argc, char **argv,
                                  hf_cli_args_t *args)
{
    for (int i = optind; i < argc; i++) {
        if (args->positional_count == cmd->positional_max) {
            fprintf(stderr, "%s %s: unexpected argument '%s'\n", prog, cmd->name, argv[i]);
            misuse_hint(prog, cmd);
            return HF_CLI_MISUSE;
        }
        args->positional[args->positional_count++] = argv[i];
    }
    for (size_t i = 0; i < opts_count(cmd); i++)
        if (cmd->opts[i].required && !args->values[i]) {
            fprintf(stderr, "%s %s: missing --%s %s\n", prog, cmd->name, cmd->opts[i].name,
                    cmd->opts[i].arg ? cmd->opts[i].arg : "");
            misuse_hint(prog, cmd);
            return HF_CLI_MISUSE;
        }
    return HF_CLI_RUN;
}

hf_cli_result_t hf_cli_parse(const char *prog, const hf_cli_cmd_t *cmd, int argc, char **argv,
                             hf_cli_args_t *args)
{
    struct option table[HF_CLI_OPTS_MAX + 3];
    size_t n = opts_count(cmd);
    memset(args, 0, sizeof *args);
    args->cmd = cmd;
    for (size_t i = 0; i < n; i++)
        table[i] =
            (struct option){cmd->opts[i].name, cmd->opts[i].arg ? required_argument : no_argument,
                            NULL, CLI_VAL_BASE + (int)i};
    table[n] = (struct option){"help", no_argument, NULL, 'h'};
    table[n + 1] = (struct option){"version", no_argument, NULL, CLI_VAL_VERSION};
    table[n + 2] = (struct option){NULL, 0, NULL, 0};
    optind = 0; /* glibc: a full re-initialisation, so a second parse starts afresh */
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":h", table, NULL);
        if (c == -1)
            break;
        if (c == 'h') {
            hf_cli_usage(stdout, prog, cmd);
            return HF_CLI_HELP;
        }
        if (c == CLI_VAL_VERSION)
            return HF_CLI_VERSION;
        if (c >= CLI_VAL_BASE && c < CLI_VAL_BASE + (int)n) {
            args->values[c - CLI_VAL_BASE] = optarg ? optarg : "";
            continue;
        }
        if (c == ':' && optopt >= CLI_VAL_BASE && optopt < CLI_VAL_BASE + (int)n)
            fprintf(stderr, "%s %s: option --%s needs a value (%s)\n", prog, cmd->name,
                    cmd->opts[optopt - CLI_VAL_BASE].name, cmd->opts[optopt - CLI_VAL_BASE].arg);
        else if (c == '?' && optopt == 0 && optind > 0)
            fprintf(stderr, "%s %s: unknown option '%s'\n", prog, cmd->name, argv[optind - 1]);
        else if (c == '?' && optopt >= CLI_VAL_BASE)
            fprintf(stderr, "%s %s: option --%s takes no value\n", prog, cmd->name,
                    cmd->opts[optopt - CLI_VAL_BASE].name);
        else
            fprintf(stderr, "%s %s: unknown option '-%c'\n", prog, cmd->name,
                    optopt > 32 && optopt < 127 ? optopt : '?');
        misuse_hint(prog, cmd);
        return HF_CLI_MISUSE;
    }
    return check_args(prog, cmd, argc, argv, args);
}

const char *hf_cli_get(const hf_cli_args_t *args, const char *name)
{
    const hf_cli_cmd_t *cmd = args->cmd;
    for (size_t i = 0; i < opts_count(cmd); i++)
        if (strcmp(cmd->opts[i].name, name) == 0)
            return args->values[i];
    hf_assert(!"option not declared by the command");
    return NULL;
}

void hf_cli_usage(FILE *out, const char *prog, const hf_cli_cmd_t *cmd)
{
    fprintf(out, "usage: %s %s [options]%s%s\n", prog, cmd->name, cmd->positional ? " " : "",
            cmd->positional ? cmd->positional : "");
    if (cmd->summary)
        fprintf(out, "%s\n", cmd->summary);
    fprintf(out, "options:\n");
    for (size_t i = 0; i < opts_count(cmd); i++) {
        const hf_cli_opt_t *o = &cmd->opts[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(out, "  %-24s %s%s\n", left, o->required ? "(required) " : "", o->help);
    }
    fprintf(out, "  %-24s %s\n", "-h, --help", "print this help and exit");
    fprintf(out, "  %-24s %s\n", "--version", "print the versions of holdfast and its libraries");
}
