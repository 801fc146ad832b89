/* Bulk load of one partition's state: the fast path of a full restore.
 *
 * A restore from the beginning of a changelog writes millions of keys that no
 * reader asks for until it ends. Put one by one, each key pays two skiplist
 * inserts (the indexed write batch and the memtable) and the flushes and
 * compactions after them. A load instead collects records into a bounded run
 * in memory, sorts it (the last record of a key wins, as in the changelog),
 * writes it as one RocksDB table file and ingests the file: the keys reach the
 * DB without a memtable.
 *
 * Each ingested file carries the partition's offsets (state.h
 * state_buf_set_offsets) in the same file, so the data of a run and the
 * changelog offset it brings the partition to land in one atomic step: a
 * process killed in the middle resumes after the last ingested run.
 *
 * Use: state_load_put until state_load_run_full (or the end of the
 * changelog), then state_load_seal with the offsets the run brings the
 * partition to: the run is sorted and its file written on a worker thread
 * while the next run fills. Before sealing the next, and at the end: the
 * sealed run's state_load_wait, optionally state_load_foreach to see each key's
 * final record of the run before it is ingested (what its file holds; the
 * restore derives a stage's indexes after the last run instead, in one scan of
 * the DB: processor/task.c restore_derive), then state_load_ingest. The DB may be read and written meanwhile; the partition
 * being loaded should not be written by anyone else.
 *
 * Memory: two runs of up to run_bytes_max (keys, values and 6 bytes a record),
 * plus 16 bytes a record of a run for the sort. */
#ifndef HF_STATE_LOAD_H
#define HF_STATE_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "state.h"

typedef struct state_load state_load_t;

/* The smallest run_bytes_max: two records of the largest size. */
#define STATE_LOAD_RUN_BYTES_MIN (2 * (6 + HF_STATE_KEY_LEN_MAX + HF_RECORD_LEN_MAX))

/* Starts a load of partition into st (its table files are written under the
 * DB's directory, in bulk-load/, and files a killed load of the same partition
 * left there are removed; loads of other partitions may run beside it). run_bytes_max bounds a run's memory (>= STATE_LOAD_RUN_BYTES_MIN;
 * 0 = HF_STATE_LOAD_RUN_BYTES). */
int state_load_new(state_t *st, int32_t partition, size_t run_bytes_max, state_load_t **out,
                   char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Accepts NULL; waits for a worker, removes files not ingested. */
void state_load_destroy(state_load_t *l);

/* Adds a record to the filling run: val NULL = a tombstone (the key is
 * deleted). Keys follow state_put's rules (a printable tag byte first, at most
 * HF_STATE_KEY_LEN_MAX). HF_ERR_LIMIT when the run has no room (seal it first:
 * state_load_run_full says when) or val_len > HF_RECORD_LEN_MAX. */
int state_load_put(state_load_t *l, const void *key, size_t key_len, const void *val,
                   size_t val_len) HF_MUST_CHECK;
/* Whether the filling run should be sealed before another record of up to
 * HF_STATE_KEY_LEN_MAX + HF_RECORD_LEN_MAX bytes is put. */
bool state_load_run_full(const state_load_t *l);
/* Records put into the filling run (duplicates of a key included). */
size_t state_load_run_records(const state_load_t *l);

/* Ends the filling run: it will bring the partition to these offsets (as
 * state_buf_set_offsets). Its sort (of one key's records the last put counts)
 * and table file are made in the background. At most one run is sealed: the
 * previous one must have been ingested. */
int state_load_seal(state_load_t *l, int64_t input_next_offset, int64_t changelog_next_offset,
                    int64_t current_at_ms) HF_MUST_CHECK;
bool state_load_has_sealed(const state_load_t *l);
/* Waits until the sealed run is sorted and its file written; its error if not. */
int state_load_wait(state_load_t *l, char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Calls each(opaque, key, key_len, val, val_len) for every key of the sealed
 * run in key order (bytewise, a prefix first), with its last record (val NULL
 * for a tombstone); a non-zero return stops and is returned. After wait. */
typedef int (*state_load_each_fn)(void *opaque, const void *key, size_t key_len, const void *val,
                                  size_t val_len);
int state_load_foreach(state_load_t *l, state_load_each_fn each, void *opaque) HF_MUST_CHECK;
/* Ingests the sealed run's file (its keys and the offsets, in one step). After
 * wait. */
int state_load_ingest(state_load_t *l, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Totals of the load so far: table files ingested, and keys written to them. */
uint64_t state_load_files(const state_load_t *l);
uint64_t state_load_keys(const state_load_t *l);

#endif
