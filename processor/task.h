/* The exactly-once task loop (DESIGN.md section 4). One task = one worker thread
 * = one group consumer + one transactional producer for one stage. Per batch:
 * gather what the consumer has (adaptive: never idle-wait a fixed interval once a
 * record is there), apply each record through the stage's handler table into a
 * state buffer, begin a transaction, produce outputs and changelog records, send
 * the consumed offsets, commit, then write the buffer (with the offsets it now
 * reflects) to RocksDB. On partition assignment the task restores each
 * partition's state from its changelog before consuming.
 *
 * A standby (opts.standby) is a task without consumer or producer: it follows
 * the changelog partitions of its stage that no task of this process owns
 * (read_committed, so only committed batches) into the same state, with the
 * changelog offset it reached stored alongside, so that when one of them is
 * assigned here the restore reads only the tail. It never emits anything. */
#ifndef HF_TASK_H
#define HF_TASK_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "hf_err.h"
#include "stage.h"
#include "state.h"

typedef struct task task_t;

/* The header of a record a task forwarded to its key's partition (admit.h):
 * "<hops> <topic>/<partition>/<offset>" of the record it copies. */
#define TASK_FORWARD_HEADER "hf.forwarded"

/* Which partitions of one stage the tasks of this process own: shared by the
 * stage's tasks (they claim a partition before restoring it and release it on
 * revoke) and its standby (which writes only partitions nobody here owns). */
typedef struct task_owners task_owners_t;

task_owners_t *task_owners_new(void);       /* NULL: out of memory */
void task_owners_destroy(task_owners_t *o); /* accepts NULL */

typedef struct {
    const hf_config_t *cfg;
    const stage_def_t *def;
    void *env;               /* what def->init built (stage_env); NULL: none */
    state_t *st;             /* shared by the stage's tasks in this process */
    int thread_index;        /* part of the transactional.id */
    const atomic_bool *stop; /* task_run returns soon after it becomes true */
    task_owners_t *owners;   /* shared by the stage's tasks and standby in this process */
    bool standby;            /* this is the stage's standby, not a task */
    /* Set to hf_mono_ms() at every sign of life (a loop turn, a restored
     * record) for the process's stall watchdog (main.c); NULL: none. */
    atomic_int_fast64_t *alive_ms;
} task_opts_t;

typedef struct {
    uint64_t records;          /* input records applied */
    uint64_t dead_letters;     /* input records sent to the dead-letter topic */
    uint64_t forwarded;        /* input records forwarded to their key's partition */
    uint64_t transactions;     /* committed */
    uint64_t aborts;           /* aborted and retried */
    uint64_t restored_records; /* changelog records applied on assignment */
    uint64_t restore_ms;       /* time those restores took */
    uint64_t standby_records;  /* changelog records a standby applied */
} task_stats_t;

int task_new(const task_opts_t *opts, task_t **t_out, char *errstr,
             size_t errstr_size) HF_MUST_CHECK;
/* Runs until *stop or a fatal error (HF_ERR_FATAL: fenced, or state broken). */
int task_run(task_t *t, char *errstr, size_t errstr_size) HF_MUST_CHECK;
void task_stats(const task_t *t, task_stats_t *out);
void task_destroy(task_t *t); /* accepts NULL */

#endif
