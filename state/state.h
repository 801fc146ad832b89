/* Local state of one stage in one process: a RocksDB database behind an opaque
 * API. This is the only module that includes <rocksdb/c.h>.
 *
 * Keys are namespaced by input partition: the stored key is a 4-byte big-endian
 * partition followed by the caller's key, so one partition's state can be dropped
 * with a range delete and restored from its changelog partition. Callers never see
 * the prefix.
 *
 * Writes go to a state_buf_t (the latest pending value of each key): reads through
 * the buffer see its own writes on top of the DB. A buffer is applied to the DB in
 * one atomic write, each key once, after the Kafka transaction that produced its
 * changelog committed.
 * The changelog topic is the durable log (DESIGN.md section 4). The WAL is on but
 * never synced: it costs a write to the page cache and survives a killed process,
 * so a restart after kill -9 resumes its restore from the stored changelog offset
 * instead of replaying the whole changelog; after a machine crash the restore
 * simply starts further back.
 *
 * Thread safety: a state_t may be shared by threads; a state_buf_t belongs to one
 * thread. */
#ifndef HF_STATE_H
#define HF_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"

typedef struct state state_t;
typedef struct state_buf state_buf_t;
typedef struct state_iter state_iter_t;

typedef struct {
    size_t block_cache_bytes;  /* shared LRU cache; 0 = 64 MiB */
    size_t write_buffer_bytes; /* one memtable (at most 4 a DB); 0 = 32 MiB */
    bool sync_writes;          /* default false: the changelog is the durable log */
    bool disable_wal;          /* default false; true = no WAL at all (benchmarks) */
} state_opts_t;

/* Opens (creating if missing) the DB in directory path. opts may be NULL. */
int state_open(const char *path, const state_opts_t *opts, state_t **st_out, char *errstr,
               size_t errstr_size) HF_MUST_CHECK;
/* Accepts NULL. */
void state_close(state_t *st);

state_buf_t *state_buf_new(state_t *st);
void state_buf_destroy(state_buf_t *buf); /* accepts NULL */
/* Forgets every pending write (after an aborted transaction). */
void state_buf_clear(state_buf_t *buf);
/* Number of pending puts/deletes. */
size_t state_buf_count(const state_buf_t *buf);

/* Reads key in partition through buf (buf may be NULL: DB only). Copies the value
 * into val (capacity val_size) and sets *val_len. HF_ERR_NOTFOUND if absent,
 * HF_ERR_LIMIT if val_size is too small. */
int state_get(state_t *st, state_buf_t *buf, int32_t partition, const void *key, size_t key_len,
              void *val, size_t val_size, size_t *val_len) HF_MUST_CHECK;
/* The same through buf alone, for a partition whose DB part is known to be
 * empty (the first run of a full restore: state_drop_partition emptied it and
 * nothing was ingested since): HF_ERR_NOTFOUND for a key buf does not hold,
 * without the DB read. */
int state_get_buffered(state_buf_t *buf, int32_t partition, const void *key, size_t key_len,
                       void *val, size_t val_size, size_t *val_len) HF_MUST_CHECK;
int state_put(state_buf_t *buf, int32_t partition, const void *key, size_t key_len, const void *val,
              size_t val_len) HF_MUST_CHECK;
int state_del(state_buf_t *buf, int32_t partition, const void *key, size_t key_len) HF_MUST_CHECK;

/* Records the next input offset and the changelog offset this buffer brings the
 * partition up to, and when the state was last known to be current with its
 * changelog (epoch ms; -1 unknown); stored by the same atomic write as the buffer. */
int state_buf_set_offsets(state_buf_t *buf, int32_t partition, int64_t input_next_offset,
                          int64_t changelog_next_offset, int64_t current_at_ms) HF_MUST_CHECK;
/* Reads them back; -1 for what was never stored (current_at_ms may be NULL; it
 * is -1 too for offsets written before it existed). */
int state_get_offsets(state_t *st, int32_t partition, int64_t *input_next_offset,
                      int64_t *changelog_next_offset, int64_t *current_at_ms) HF_MUST_CHECK;

/* Marks partition's derived state (a stage's local indexes, which its reindex
 * rebuilds from the values) as still to be derived, or clears the mark: a full
 * restore sets it before it loads the first values and clears it in the write
 * of the pass that derived them all, so a process killed in between derives
 * them on its next restore. Stored by the same atomic write as buf;
 * state_drop_partition removes it. */
int state_buf_set_derive_pending(state_buf_t *buf, int32_t partition, bool pending) HF_MUST_CHECK;
/* Whether the mark is set in the DB. */
int state_get_derive_pending(state_t *st, int32_t partition, bool *pending) HF_MUST_CHECK;

/* Applies buf to the DB atomically and clears it. */
int state_buf_write(state_t *st, state_buf_t *buf, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Deletes every key of a partition, its offsets included (a revoked or lost
 * partition, before a full restore). */
int state_drop_partition(state_t *st, int32_t partition, char *errstr,
                         size_t errstr_size) HF_MUST_CHECK;

/* Iterates keys of partition that start with prefix, in key order, through buf
 * (buf may be NULL). reverse = from the last such key backwards. The key and value
 * pointers stay valid until the next state_iter_next or state_iter_destroy.
 * Deletes and rewrites made through buf while scanning are seen; a key buf first
 * takes after the iterator opened is not part of this scan. */
state_iter_t *state_iter_new(state_t *st, state_buf_t *buf, int32_t partition, const void *prefix,
                             size_t prefix_len, bool reverse);
/* Returns true and sets key/val (key without the partition prefix) while there is
 * a current entry, then advances; false at the end. */
bool state_iter_next(state_iter_t *it, const void **key, size_t *key_len, const void **val,
                     size_t *val_len);
void state_iter_destroy(state_iter_t *it); /* accepts NULL */
/* Before the first state_iter_next of a forward scan: begin after key (a key of
 * the same partition, without the partition prefix), e.g. to resume a bounded
 * scan where the previous one stopped. A key before the scan's range is ignored. */
void state_iter_start_after(state_iter_t *it, int32_t partition, const void *key, size_t key_len);

#endif
