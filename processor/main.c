/* `holdfast run`: starts the configured stages, each as threads_per_stage task
 * threads sharing one RocksDB per stage, until SIGINT/SIGTERM. Set up before it
 * serves: every stage's environment (stage.h init) is built and its settings
 * checked before any state DB is opened or any task thread starts, so a bad
 * setting exits 2 naming its key with nothing consumed. Exits non-zero when
 * a task stops on a fatal error (fenced, or state broken), so a supervisor
 * restarts the process — which then restores from the changelogs. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "codec.h"
#include "config.h"
#include "framing.h"
#include "kafka.h"
#include "hf_cli.h"
#include "hf_limits.h"
#include "hf_clock.h"
#include "hf_version.h"
#include "http/http_api.h"
#include "log.h"
#include "metrics.h"
#include "stages.h"
#include "state.h"
#include "task.h"
#include "topics.h"

#define MAIN_STAGES_MAX  4
#define MAIN_THREADS_MAX (MAIN_STAGES_MAX * 17) /* 16 tasks and a standby per stage */

static atomic_bool stop_flag;

typedef struct {
    task_opts_t opts;
    atomic_int_fast64_t alive_ms; /* the task's last sign of life (task.h) */
    atomic_bool running;
    int rc;
    char errstr[512];
} worker_t;

static void on_signal(int sig)
{
    atomic_store(&stop_flag, true);
}

/* `holdfast http`: SIGHUP asks the main loop to reload certificates and keys. */
static atomic_bool reload_flag;
static void on_sighup(int sig)
{
    (void)sig;
    atomic_store(&reload_flag, true);
}

/* A task stopped on a fatal error: the exit code the watchdog gives. */
static atomic_bool fatal_seen;
/* The process closed everything (set just before main returns). */
static atomic_bool shutdown_done;

/* Once asked to stop, the process has HF_SHUTDOWN_GRACE_MS to close its clients
 * and state. A close that never returns (seen: a producer or consumer waiting on
 * a broker that died, after a fatal transaction error) must not leave a process
 * alive that serves nothing and that a supervisor does not restart: it exits
 * without the rest, which is as safe as kill -9 — its open transactions are
 * aborted by the broker or fenced by the next owner, its state is restored. */
static worker_t *watched;
static size_t watched_count;
static int64_t stall_exit_ms = HF_TASK_STALL_EXIT_MS; /* HOLDFAST_TASK_STALL_EXIT_MS: tests */

/* With HOLDFAST_STALL_BACKTRACE=1 (the fault suites set it), the stall watchdog
 * has gdb print every thread's stack to stderr (the log) before the exit, so a
 * call that never returns is named; gdb missing or refused costs nothing but
 * the lines. Not for production: gdb stops the process while it reads it. */
static void backtrace_all_threads(void)
{
    const char *on = getenv("HOLDFAST_STALL_BACKTRACE");
    if (!on || strcmp(on, "1") != 0)
        return;
    /* Under Yama's ptrace_scope 1 a process may be read only by its ancestors
     * unless it names a reader: any, here, for the next seconds. SIGINT on
     * timeout lets gdb detach instead of leaving the process stopped. */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    char cmd[160];
    snprintf(cmd, sizeof cmd,
             "timeout -s INT 30 gdb -p %d -batch -nx -ex 'thread apply all bt' </dev/null >&2 2>&1",
             (int)getpid());
    fflush(stderr);
    int rc = system(cmd);
    log_error("main", "stall backtrace: %s exited %d", cmd, rc);
}

/* A task thread that stopped showing signs of life for HF_TASK_STALL_EXIT_MS
 * while running is stuck in a call that does not return (seen once on the
 * 3-broker cluster: a counter task in its assignment's restore, after a broker
 * died, holding four partitions that no other process could take while its
 * group waited for it). Nothing would restart it: it exits 4, as safe as
 * kill -9. */
static void check_stalls(void)
{
    int64_t now = hf_mono_ms();
    for (size_t i = 0; i < watched_count; i++) {
        worker_t *w = &watched[i];
        int64_t alive = atomic_load(&w->alive_ms);
        if (!atomic_load(&w->running) || now - alive < stall_exit_ms)
            continue;
        log_error("main",
                  "%s %s %d shows no sign of life for %lld ms (stuck in a Kafka or RocksDB call "
                  "that does not return): exiting 4 so that the supervisor restarts the process, "
                  "as safe as kill -9 (the next owner fences and restores)",
                  w->opts.def->name, w->opts.standby ? "standby" : "task", w->opts.thread_index,
                  (long long)(now - alive));
        backtrace_all_threads();
        _exit(4);
    }
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_flag)) {
        hf_sleep_ms(100);
        check_stalls();
    }
    int64_t deadline = hf_mono_ms() + HF_SHUTDOWN_GRACE_MS;
    while (!atomic_load(&shutdown_done) && hf_mono_ms() < deadline)
        hf_sleep_ms(100);
    if (atomic_load(&shutdown_done))
        return NULL;
    int rc = atomic_load(&fatal_seen) ? 4 : 1;
    log_error("main",
              "shutdown stuck for %d ms (a Kafka or RocksDB close did not return): exiting %d "
              "without it, as safe as kill -9 (the next owner fences and restores)",
              HF_SHUTDOWN_GRACE_MS, rc);
    _exit(rc);
}

static void log_done(const worker_t *w, const task_t *t)
{
    task_stats_t s;
    task_stats(t, &s);
    log_info("main",
             "%s %s %d done: %llu records, %llu transactions, %llu aborts, %llu dead letters, "
             "%llu forwarded, %llu changelog records restored in %llu ms, %llu applied as a "
             "standby",
             w->opts.def->name, w->opts.standby ? "standby" : "task", w->opts.thread_index,
             (unsigned long long)s.records, (unsigned long long)s.transactions,
             (unsigned long long)s.aborts, (unsigned long long)s.dead_letters,
             (unsigned long long)s.forwarded, (unsigned long long)s.restored_records,
             (unsigned long long)s.restore_ms, (unsigned long long)s.standby_records);
}

/* Whether a task that stopped with rc may be started again in this process: a
 * fatal Kafka error (fenced; a producer broken by a broker's death) is what a
 * restart would repair, and an in-process one repairs it the same way — the
 * task is closed dirty (its unflushed batch dropped, its open transaction left
 * to the next init_transactions, which aborts it), a new consumer and producer
 * with the same group.instance.id and transactional.id take its place, and it
 * processes only once the group has assigned its partitions to it again,
 * restored from local state and the changelog tail (task.c on_assign): a zombie
 * never writes. Bounded by HF_TASK_RECOVERIES_MAX in HF_TASK_RECOVERY_WINDOW_MS;
 * beyond that, or for a task that could not start at all the first time, the
 * process stops (exit 4 or 1) for its supervisor. */
static bool recover(worker_t *w, int rc, int64_t *window_start_ms, int *recoveries)
{
    if (rc != HF_ERR_FATAL || w->opts.standby || atomic_load(&stop_flag))
        return false;
    int64_t now = hf_mono_ms();
    if (now - *window_start_ms > HF_TASK_RECOVERY_WINDOW_MS) {
        *window_start_ms = now;
        *recoveries = 0;
    }
    if (*recoveries >= HF_TASK_RECOVERIES_MAX) {
        log_error("main",
                  "%s task %d: %d fatal errors within %d s; stopping the process for its "
                  "supervisor",
                  w->opts.def->name, w->opts.thread_index, *recoveries + 1,
                  HF_TASK_RECOVERY_WINDOW_MS / 1000);
        return false;
    }
    int64_t backoff_ms = HF_TASK_RECOVERY_BACKOFF_MS << (*recoveries < 5 ? *recoveries : 5);
    if (backoff_ms > HF_TASK_RECOVERY_BACKOFF_MAX_MS)
        backoff_ms = HF_TASK_RECOVERY_BACKOFF_MAX_MS;
    (*recoveries)++;
    int stage = metrics_stage(w->opts.def->name);
    metrics_add(stage, HF_M_RECOVERIES, 1);
    /* This thread's health slot: not ready until the new task has restored its
     * partitions, and neither the old task's aborts nor its last loop held against it. */
    metrics_task_restoring(stage, true);
    metrics_task_heartbeat(stage, 0);
    log_warn("main",
             "%s task %d: %s; closed dirty, starting it again in %lld ms (recovery %d of at most "
             "%d within %d s)",
             w->opts.def->name, w->opts.thread_index, w->errstr, (long long)backoff_ms, *recoveries,
             HF_TASK_RECOVERIES_MAX, HF_TASK_RECOVERY_WINDOW_MS / 1000);
    for (int64_t until = hf_mono_ms() + backoff_ms;
         hf_mono_ms() < until && !atomic_load(&stop_flag);) {
        atomic_store(&w->alive_ms, hf_mono_ms()); /* waiting, not stuck */
        hf_sleep_ms(50);
    }
    return !atomic_load(&stop_flag);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    task_t *t = NULL;
    w->opts.alive_ms = &w->alive_ms;
    int64_t window_start_ms = hf_mono_ms();
    int recoveries = 0;
    bool started_once = false;
    for (;;) {
        w->rc = task_new(&w->opts, &t, w->errstr, sizeof w->errstr);
        if (w->rc == HF_OK) {
            started_once = true;
            w->rc = task_run(t, w->errstr, sizeof w->errstr);
        } else if (started_once && w->rc != HF_ERR_CONFIG && w->rc != HF_ERR_NOMEM) {
            w->rc = HF_ERR_FATAL; /* a recovery that could not start yet: try again */
        }
        if (w->rc == HF_OK || !started_once || w->rc != HF_ERR_FATAL || atomic_load(&stop_flag))
            break;
        /* Closed dirty before the backoff: its buffer was never written (the broker
         * has the rest), and its partitions are free for whoever the group gives
         * them to meanwhile — another thread of this stage included. */
        task_destroy(t);
        t = NULL;
        if (!recover(w, w->rc, &window_start_ms, &recoveries))
            break;
    }
    if (w->rc != HF_OK) {
        log_error("main", "%s %s %d stopped: %s", w->opts.def->name,
                  w->opts.standby ? "standby" : "task", w->opts.thread_index, w->errstr);
        if (w->rc == HF_ERR_FATAL)
            atomic_store(&fatal_seen, true);
        atomic_store(&stop_flag, true); /* one broken task stops the process */
    } else if (t) {
        log_done(w, t);
    }
    atomic_store(&w->running, false); /* its close is the shutdown watchdog's */
    task_destroy(t);
    return NULL;
}

static const hf_cli_opt_t run_opts[] = {
    {"config", "FILE", false, "JSON object overriding defaults (see docs/CONFIGURATION.md)"},
    {"stages", "LIST", false, "comma-separated stages to run (default: counter)"},
    {"instance", "ID", false,
     "stable id of this process; a restart with the same id fences the old one"},
    {"state-dir", "DIR", false, "RocksDB state root (default ./.state)"},
    {NULL, NULL, false, NULL},
};

static const hf_cli_cmd_t run_cmd = {
    "run", NULL, 0,
    "Runs the configured stages until SIGINT/SIGTERM. Exit: 0 stopped by a signal, 1 error,\n"
    "2 usage mistake or bad setting (checked at start, before anything is consumed), 3 a\n"
    "partition could not be restored or its group offsets are behind the local state (the log\n"
    "says what to do), 4 a task stopped on a fatal error (fenced or broken state: restart it).",
    run_opts};

static const hf_cli_opt_t http_opts[] = {
    {"config", "FILE", false, "JSON object overriding defaults (see docs/CONFIGURATION.md)"},
    {"instance", "ID", false, "stable id of this process: names its reply topic and store"},
    {"state-dir", "DIR", false, "root of its reservation store (default ./.state)"},
    {"bind", "ADDR", false, "IPv4 address to listen on (http_bind; default 127.0.0.1)"},
    {"port", "N", false, "port to listen on (http_port; 0: any free port, logged)"},
    {"routes", NULL, false, "print the routes served, one 'METHOD PATH' per line, and exit"},
    {NULL, NULL, false, NULL},
};

static const hf_cli_cmd_t http_cmd = {
    "http", NULL, 0,
    "Serves the checkout HTTP API, the payment webhook and the read API (docs/HTTP.md) in\n"
    "front of the pipeline until SIGINT/SIGTERM. Exit: 0 stopped by a signal, 1 error, 2 usage\n"
    "mistake or bad setting.",
    http_opts};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: holdfast run [options]     (holdfast run --help lists them)\n"
            "       holdfast http [options]    (the HTTP front: holdfast http --help)\n"
            "       holdfast --help | --version\n"
            "stages: %s\n"
            "env: HOLDFAST_BOOTSTRAP (default 127.0.0.1:9092), HOLDFAST_TOPIC_PREFIX, "
            "HOLDFAST_APP_ID,\n"
            "     HOLDFAST_INSTANCE, HOLDFAST_STATE_DIR, HOLDFAST_LOG_LEVEL,\n"
            "     HOLDFAST_KAFKA_CONFIG (librdkafka properties file: SASL/TLS, docs/SECURITY.md)\n"
            "     HOLDFAST_SCHEMA_REGISTRY_URL (Confluent framing: docs/SCHEMA_REGISTRY.md)\n"
            "     HOLDFAST_SYSCONFDIR (default /etc/holdfast: warehouses.json when no\n"
            "     ./config/warehouses.json and no warehouses_file setting)\n"
            "settings: docs/CONFIGURATION.md\n",
            stages_names());
}

/* The config file first, then the options that override it. */
static int apply_args(const hf_cli_args_t *args, hf_config_t *cfg, char *errstr, size_t errstr_size)
{
    const char *v = hf_cli_get(args, "config");
    if (v) {
        int err = config_load_file(cfg, v, errstr, errstr_size);
        if (err)
            return err;
    }
    if (args->cmd == &run_cmd && (v = hf_cli_get(args, "stages")))
        snprintf(cfg->stages, sizeof cfg->stages, "%s", v);
    if (args->cmd == &http_cmd && (v = hf_cli_get(args, "bind")))
        snprintf(cfg->http_bind, sizeof cfg->http_bind, "%s", v);
    if (args->cmd == &http_cmd && (v = hf_cli_get(args, "port"))) {
        char *end = NULL;
        long port = strtol(v, &end, 10);
        if (!*v || *end || port < 0 || port > 65535) {
            snprintf(errstr, errstr_size, "--port '%s' must be an integer in [0, 65535]", v);
            return HF_ERR_CONFIG;
        }
        cfg->http_port = (int)port;
    }
    if ((v = hf_cli_get(args, "instance")))
        snprintf(cfg->instance_id, sizeof cfg->instance_id, "%s", v);
    if ((v = hf_cli_get(args, "state-dir")))
        snprintf(cfg->state_dir, sizeof cfg->state_dir, "%s", v);
    return HF_OK;
}

/* Returns -1 to run, else the exit code (help, version, usage mistake). */
static int parse_command_line(int argc, char **argv, hf_cli_args_t *args)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        hf_version_print(stdout, "holdfast");
        return 0;
    }
    const hf_cli_cmd_t *cmd = argc < 2                       ? NULL
                              : strcmp(argv[1], "run") == 0  ? &run_cmd
                              : strcmp(argv[1], "http") == 0 ? &http_cmd
                                                             : NULL;
    if (!cmd) {
        fprintf(stderr, "holdfast: %s\n",
                argc < 2 ? "expected a command: 'run' or 'http'"
                         : "unknown command (expected 'run' or 'http')");
        usage(stderr);
        return 2;
    }
    switch (hf_cli_parse("holdfast", cmd, argc - 1, argv + 1, args)) {
    case HF_CLI_RUN:
        return -1;
    case HF_CLI_HELP:
        if (cmd == &run_cmd)
            fprintf(stdout, "stages: %s\n", stages_names());
        fprintf(stdout, "env and settings: holdfast --help\n");
        return 0;
    case HF_CLI_VERSION:
        hf_version_print(stdout, "holdfast");
        return 0;
    case HF_CLI_MISUSE:
        break;
    }
    return 2;
}

/* One configured stage of this process: its definition, the environment its
 * init built and its state DB (shared by its tasks). */
typedef struct {
    const stage_def_t *def;
    void *env;
    state_t *st;
    task_owners_t *owners; /* which partitions its tasks own, for its standby */
} main_stage_t;

/* Resolves the names of cfg->stages. */
static int find_stages(const hf_config_t *cfg, main_stage_t *stages, size_t *stages_count,
                       char *errstr, size_t errstr_size)
{
    char list[HF_CONFIG_STR_MAX];
    snprintf(list, sizeof list, "%s", cfg->stages);
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const stage_def_t *def = stages_find(name);
        if (!def) {
            snprintf(errstr, errstr_size, "stages: unknown stage '%s' (known: %s)", name,
                     stages_names());
            return HF_ERR_CONFIG;
        }
        for (size_t i = 0; i < *stages_count; i++)
            if (stages[i].def == def) {
                snprintf(errstr, errstr_size, "stages: '%s' is listed twice", name);
                return HF_ERR_CONFIG;
            }
        if (*stages_count == MAIN_STAGES_MAX) {
            snprintf(errstr, errstr_size, "stages: at most %d", MAIN_STAGES_MAX);
            return HF_ERR_CONFIG;
        }
        stages[(*stages_count)++] = (main_stage_t){def, NULL, NULL, NULL};
    }
    return HF_OK;
}

/* Builds every stage's environment (its settings checked, files loaded, the
 * gateway's routing view started) before anything is opened on disk or any
 * task thread starts: a bad setting fails here, naming its key. In registry
 * order (stages_at), whatever the order of cfg->stages: the gateway, whose
 * init waits for the view, comes after the stages that only read settings. */
static int build_envs(const hf_config_t *cfg, main_stage_t *stages, size_t stages_count,
                      char *errstr, size_t errstr_size)
{
    const stage_def_t *def;
    for (size_t r = 0; (def = stages_at(r)) != NULL; r++)
        for (size_t i = 0; i < stages_count; i++) {
            if (stages[i].def != def)
                continue;
            int err = stages_env_new(def, cfg, &stages[i].env, errstr, errstr_size);
            if (err)
                return err;
        }
    return HF_OK;
}

/* Opens one state DB per stage and fills one worker per task thread, and one
 * for the stage's standby when standby_replicas is 1 (it follows every
 * partition of the stage no task of this process owns). *tasks_count: the
 * workers that are tasks (what /readyz waits for). */
static int plan_workers(const hf_config_t *cfg, main_stage_t *stages, size_t stages_count,
                        worker_t *workers, size_t *workers_count, size_t *tasks_count, char *errstr,
                        size_t errstr_size)
{
    if (mkdir(cfg->state_dir, 0755) != 0 && errno != EEXIST) {
        snprintf(errstr, errstr_size, "state dir %s: %s", cfg->state_dir, strerror(errno));
        return HF_ERR_IO;
    }
    for (size_t i = 0; i < stages_count; i++) {
        main_stage_t *s = &stages[i];
        char path[HF_CONFIG_STR_MAX + 160];
        snprintf(path, sizeof path, "%s/%s-%s", cfg->state_dir, s->def->name, cfg->instance_id);
        state_opts_t so = {.block_cache_bytes = (size_t)cfg->state_block_cache_mib << 20,
                           .write_buffer_bytes = (size_t)cfg->state_memtable_mib << 20};
        int err = state_open(path, &so, &s->st, errstr, errstr_size);
        if (err)
            return err;
        s->owners = task_owners_new();
        if (!s->owners)
            return HF_ERR_NOMEM;
        for (int t = 0; t < cfg->threads_per_stage; t++) {
            worker_t *w = &workers[(*workers_count)++];
            w->opts =
                (task_opts_t){cfg, s->def, s->env, s->st, t, &stop_flag, s->owners, false, NULL};
            (*tasks_count)++;
        }
        if (cfg->standby_replicas >= 1) {
            worker_t *w = &workers[(*workers_count)++];
            w->opts =
                (task_opts_t){cfg, s->def, s->env, s->st, 0, &stop_flag, s->owners, true, NULL};
        }
    }
    return HF_OK;
}

/* After every task stopped: each stage's state DB and environment. */
static void close_stages(main_stage_t *stages, size_t stages_count)
{
    for (size_t i = 0; i < stages_count; i++) {
        state_close(stages[i].st);
        task_owners_destroy(stages[i].owners);
        stages_env_destroy(stages[i].def, stages[i].env);
    }
}

/* Everything before the first task thread: the process-wide clients, every
 * stage's environment, the state DBs, the metrics server. */
static int start(const hf_config_t *cfg, main_stage_t *stages, size_t *stages_count,
                 worker_t *workers, size_t *workers_count, char *errstr, size_t errstr_size)
{
    topics_set_prefix(cfg->topic_prefix);
    int err = config_check(cfg, errstr, errstr_size);
    if (!err)
        err = find_stages(cfg, stages, stages_count, errstr, errstr_size);
    if (!err)
        err = kafka_client_config_load(cfg->kafka_config_file, cfg->kafka_overrides, errstr,
                                       errstr_size);
    if (!err) {
        /* A schema that does not match its C struct is a defect of this build,
         * not the operator's setting: exit 1, not 2. */
        err = codec_init(errstr, errstr_size);
        if (err == HF_ERR_CONFIG)
            err = HF_ERR_CORRUPT;
    }
    if (!err) /* before build_envs: the gateway's view decodes from there on */
        err = framing_start(cfg, true, errstr, errstr_size);
    if (!err)
        err = build_envs(cfg, stages, *stages_count, errstr, errstr_size);
    size_t tasks_count = 0;
    if (!err)
        err = plan_workers(cfg, stages, *stages_count, workers, workers_count, &tasks_count, errstr,
                           errstr_size);
    if (!err && cfg->metrics_port > 0) {
        int port = 0;
        metrics_serve_opts_t mo = {cfg->metrics_bind, cfg->metrics_port, cfg->health_loop_stall_ms,
                                   cfg->health_aborts_max, (int)tasks_count};
        err = metrics_serve(&mo, &port, errstr, errstr_size);
        if (!err)
            log_info("main", "metrics on http://%s:%d/metrics", cfg->metrics_bind, port);
    }
    return err;
}

/* `holdfast http`: the HTTP front (processor/http/http_api.h) until a signal. */
static int serve_http(const hf_config_t *cfg)
{
    char errstr[512];
    topics_set_prefix(cfg->topic_prefix);
    int err = config_check(cfg, errstr, sizeof errstr);
    if (!err)
        err = http_api_check_config(cfg, errstr, sizeof errstr);
    if (err) {
        /* A bad setting is exit 2; a file that cannot be read, or no memory, is 1. */
        if (err == HF_ERR_CONFIG)
            fprintf(stderr, "holdfast: %s\n", errstr);
        else
            log_error("main", "%s", errstr);
        return err == HF_ERR_CONFIG ? 2 : 1;
    }
    err = kafka_client_config_load(cfg->kafka_config_file, cfg->kafka_overrides, errstr,
                                   sizeof errstr);
    if (err) {
        fprintf(stderr, "holdfast: %s\n", errstr);
        return 2;
    }
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        log_error("main", "%s", errstr);
        return 1;
    }
    /* Reads only (the view, the ledger store): the resolver, nothing registered. */
    if (framing_start(cfg, false, errstr, sizeof errstr) != HF_OK) {
        log_error("main", "%s", errstr);
        codec_shutdown();
        return 1;
    }
    if (mkdir(cfg->state_dir, 0755) != 0 && errno != EEXIST) {
        log_error("main", "state dir %s: %s", cfg->state_dir, strerror(errno));
        framing_stop();
        codec_shutdown();
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct sigaction hup = {.sa_handler = on_sighup};
    sigaction(SIGHUP, &hup, NULL);
    kafka_conf_t kconf = {cfg->bootstrap, "holdfast-http", NULL};
    http_api_t *api = NULL;
    int port = 0;
    err = http_api_start(cfg, &kconf, &api, &port, errstr, sizeof errstr);
    if (err) {
        if (err == HF_ERR_CONFIG)
            fprintf(stderr, "holdfast: %s\n", errstr);
        else
            log_error("main", "%s", errstr);
        framing_stop();
        codec_shutdown();
        return err == HF_ERR_CONFIG ? 2 : 1;
    }
    log_info("main", "holdfast http listening on %s://%s:%d/ (instance %s, against %s)",
             cfg->http_tls_cert_file[0] ? "https" : "http", cfg->http_bind, port, cfg->instance_id,
             cfg->bootstrap);
    int rc = 0;
    while (!atomic_load(&stop_flag) && rc == 0)
        if (http_api_broken(api))
            rc = 1; /* cannot send any more: let the supervisor restart the process */
        else if (atomic_exchange(&reload_flag, false))
            http_api_reload(api);
        else
            hf_sleep_ms(100);
    http_api_stop(api);
    framing_stop();
    codec_shutdown();
    log_info("main", "holdfast http stopped (exit %d)", rc);
    return rc;
}

int main(int argc, char **argv)
{
    static hf_config_t cfg;
    static worker_t workers[MAIN_THREADS_MAX];
    main_stage_t stages[MAIN_STAGES_MAX] = {0};
    size_t stages_count = 0, workers_count = 0;
    char errstr[512];
    hf_cli_args_t args;
    int exit_code = parse_command_line(argc, argv, &args);
    if (exit_code >= 0)
        return exit_code;
    config_defaults(&cfg);
    config_apply_env(&cfg);
    int err = apply_args(&args, &cfg, errstr, sizeof errstr);
    if (args.cmd == &http_cmd) {
        if (hf_cli_get(&args, "routes")) {
            http_api_print_routes(stdout);
            return 0;
        }
        if (err) {
            fprintf(stderr, "holdfast: %s\n", errstr);
            return 2;
        }
        return serve_http(&cfg);
    }
    if (!err)
        err = start(&cfg, stages, &stages_count, workers, &workers_count, errstr, sizeof errstr);
    if (err) {
        /* Nothing was consumed: a setting names its key, and is exit 2. */
        if (err == HF_ERR_CONFIG)
            fprintf(stderr, "holdfast: %s\n", errstr);
        else
            log_error("main", "%s", errstr);
        close_stages(stages, stages_count);
        framing_stop();
        codec_shutdown();
        return err == HF_ERR_CONFIG ? 2 : 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    log_info("main", "holdfast running stages '%s' as instance %s against %s", cfg.stages,
             cfg.instance_id, cfg.bootstrap);

    pthread_t threads[MAIN_THREADS_MAX];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, HF_TASK_STACK_BYTES);
    size_t started = 0;
    for (size_t i = 0; i < workers_count; i++) {
        atomic_store(&workers[i].alive_ms, hf_mono_ms());
        atomic_store(&workers[i].running, true);
    }
    watched = workers;
    watched_count = workers_count;
    const char *stall_env = getenv("HOLDFAST_TASK_STALL_EXIT_MS");
    if (stall_env && atoll(stall_env) >= 1000)
        stall_exit_ms = atoll(stall_env);
    for (; started < workers_count; started++) {
        int e = pthread_create(&threads[started], &attr, worker_main, &workers[started]);
        if (e != 0) {
            log_error("main", "cannot start task thread %zu: %s; stopping the others", started,
                      strerror(e));
            for (size_t i = started; i < workers_count; i++)
                atomic_store(&workers[i].running, false);
            atomic_store(&stop_flag, true);
            break;
        }
    }
    pthread_attr_destroy(&attr);
    pthread_t watchdog;
    if (pthread_create(&watchdog, NULL, watchdog_main, NULL) == 0)
        pthread_detach(watchdog);
    else
        log_warn("main", "no shutdown watchdog: a stuck close would keep the process");
    int rc = started < workers_count ? 1 : 0;
    for (size_t i = 0; i < started; i++) {
        pthread_join(threads[i], NULL);
        if (workers[i].rc != HF_OK)
            rc = workers[i].rc == HF_ERR_FATAL ? 4 : 1;
    }
    metrics_stop(); /* before the environments its gauges read go */
    close_stages(stages, stages_count);
    framing_stop();
    codec_shutdown();
    log_info("main", "holdfast stopped (exit %d)", rc);
    atomic_store(&shutdown_done, true);
    return rc;
}
