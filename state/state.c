/* The RocksDB side of state.h: one DB per stage, write buffers over it (pending
 * writes by key, state_wbuf.h, read through for read-your-writes), per-partition
 * offsets, and range deletes. It exists so that nothing else in holdfast includes
 * <rocksdb/c.h>.
 *
 * Stored keys are partition (4 bytes, big-endian) + the caller's key. Callers' keys
 * start with a printable ASCII tag byte, never 0x00 (asserted on every call), so a
 * stored key whose fifth byte is 0x00 can never be a caller's: that space is kept for
 * this module and holds the partition's offsets (partition + 0x00 'M' 'O'). It sorts
 * inside the partition's range, so a partition drop removes it with the data, and
 * below every caller key, so iteration starts past it (lower bound partition + 0x01).
 * Partitions are Kafka's, so >= 0: p + 1 always fits the 4-byte prefix.
 *
 * Threads: after state_open a state_t changes only inside RocksDB (thread-safe) and
 * in an atomic count of open iterators; a state_buf_t and its iterators belong to
 * one thread. The block cache is shared by every DB of the process.
 *
 * An iterator through a buffer merges a DB iterator with the buffer's entries in
 * its range, sorted when it opens; entries are looked up live as the scan reaches
 * them, so deletes and rewrites made while scanning are seen, but a key first
 * written to the buffer after the iterator opened is not.
 *
 * RocksDB C API note (7.8.3): there is no C getter for the default column family
 * handle needed by rocksdb_delete_range_cf, so a partition is dropped with a plain
 * write batch. */
#include "state.h"

#include <pthread.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_limits.h"
#include "log.h"
#include "state_int.h"
#include "state_wbuf.h"

struct state_buf {
    state_t *st;
    wbuf_t *wb;
    rocksdb_writebatch_t *batch; /* reused by every state_buf_write */
    size_t iters_open;           /* iterators reading wb: it must not be cleared under them */
};

enum { ITER_TOOK_DB = 1, ITER_TOOK_BUF = 2 }; /* where the entry last returned came from */

struct state_iter {
    state_t *st;
    state_buf_t *buf;             /* NULL: DB only */
    rocksdb_readoptions_t *ropts; /* points at lower and upper below */
    rocksdb_iterator_t *it;
    const wbuf_entry_t **bent; /* the buffer's entries in range, sorted; NULL if none */
    size_t bn;
    size_t bi; /* forward: index of the next; reverse: entries not yet passed */
    int took;  /* ITER_TOOK_* of the entry returned last; 0 before the first */
    bool reverse;
    bool started;
    bool done;
    size_t lower_len;
    size_t upper_len;
    size_t after_len; /* > 0: a forward scan starts after this key */
    uint8_t lower[STATE_KEY_LEN_MAX];
    uint8_t upper[STATE_KEY_LEN_MAX];
    uint8_t after[STATE_KEY_LEN_MAX];
    /* The current entry is copied so that its pointers survive writes to the
     * buffer between two state_iter_next calls (a scan that deletes as it goes).
     * state_iter_new zeroes only the fields before key: a field added must go
     * above it (or be set there). */
    uint8_t key[HF_STATE_KEY_LEN_MAX];
    uint8_t val[HF_RECORD_LEN_MAX];
};

/* ---- shared block cache: one per process, alive while any DB is open */

static pthread_mutex_t state_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static rocksdb_cache_t *state_cache;
static size_t state_cache_refs;

/* The first open sizes the cache; later opens share it as it is. */
static rocksdb_cache_t *state_cache_acquire(size_t bytes)
{
    pthread_mutex_lock(&state_cache_mu);
    if (state_cache_refs == 0) {
        hf_assert(state_cache == NULL);
        state_cache = rocksdb_cache_create_lru(bytes);
    }
    state_cache_refs++;
    rocksdb_cache_t *cache = state_cache;
    pthread_mutex_unlock(&state_cache_mu);
    return cache;
}

rocksdb_cache_t *state_cache_get(void)
{
    pthread_mutex_lock(&state_cache_mu);
    rocksdb_cache_t *cache = state_cache;
    pthread_mutex_unlock(&state_cache_mu);
    return cache;
}

static void state_cache_release(void)
{
    pthread_mutex_lock(&state_cache_mu);
    hf_assert(state_cache_refs > 0 && state_cache != NULL);
    state_cache_refs--;
    if (state_cache_refs == 0) {
        /* Drops our reference only; a table factory still using it keeps its own. */
        rocksdb_cache_destroy(state_cache);
        state_cache = NULL;
    }
    pthread_mutex_unlock(&state_cache_mu);
}

/* Copies "what: rocksdb's message" into errstr and frees the message. */
void state_errstr(char *errstr, size_t errstr_size, const char *what, char *rerr)
{
    if (errstr != NULL && errstr_size > 0)
        snprintf(errstr, errstr_size, "%s: %s", what, rerr != NULL ? rerr : "unknown");
    rocksdb_free(rerr);
}

/* ---- open / close */

rocksdb_options_t *state_options_new(rocksdb_cache_t *cache, int compression,
                                     size_t write_buffer_bytes)
{
    rocksdb_block_based_table_options_t *bbo = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(bbo, cache);
    /* The table options take ownership of the policy. */
    rocksdb_block_based_options_set_filter_policy(bbo, rocksdb_filterpolicy_create_bloom_full(10));
    /* Index and filter blocks live in (and are bounded by) the shared cache. */
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(bbo, 1);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(bbo, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(bbo, 1);
    /* Partitioned: a table's index and filter are cut into 4 KiB blocks under a
     * small top level, which stays pinned. Whole filters did not fit: once the state
     * outgrew the cache (a counter at ~13M pairs, 64 MiB cache), a point read of a
     * new key evicted and re-read a table file's whole filter block (megabytes of
     * pread for one answer), and a seed slowed from ~19k to ~5k pairs/s. A read
     * now touches one 4 KiB filter partition. */
    rocksdb_block_based_options_set_index_type(
        bbo, rocksdb_block_based_table_index_type_two_level_index_search);
    rocksdb_block_based_options_set_partition_filters(bbo, 1);
    rocksdb_block_based_options_set_metadata_block_size(bbo, STATE_METADATA_BLOCK_BYTES);
    rocksdb_block_based_options_set_pin_top_level_index_and_filter(bbo, 1);

    rocksdb_options_t *o = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(o, 1);
    rocksdb_options_increase_parallelism(o, STATE_BG_THREADS);
    rocksdb_options_optimize_level_style_compaction(o, STATE_WRITE_BUFFERS_MAX *
                                                           (uint64_t)write_buffer_bytes);
    rocksdb_options_set_write_buffer_size(o, write_buffer_bytes);
    rocksdb_options_set_max_write_buffer_number(o, STATE_WRITE_BUFFERS_MAX);
    /* A bloom filter over each memtable's whole keys: most point reads of a
     * handler ask for a key that is not there yet (a new reservation, a new
     * idempotency key, a new hold), and without it each one walks the memtable's
     * skiplist — the largest single cost of the gateway's thread in a profile. */
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(o, STATE_MEMTABLE_BLOOM_RATIO);
    rocksdb_options_set_memtable_whole_key_filtering(o, 1);
    rocksdb_options_set_max_open_files(o, STATE_OPEN_FILES_MAX);
    rocksdb_options_set_block_based_table_factory(o, bbo);
    rocksdb_block_based_options_destroy(bbo);
    /* L0 and L1 are rewritten soon, so they stay uncompressed (RocksDB's own
     * level-style tuning); deeper levels use the requested compression. */
    int levels[STATE_NUM_LEVELS];
    for (int i = 0; i < STATE_NUM_LEVELS; i++)
        levels[i] = i < 2 ? rocksdb_no_compression : compression;
    rocksdb_options_set_num_levels(o, STATE_NUM_LEVELS);
    rocksdb_options_set_compression_per_level(o, levels, STATE_NUM_LEVELS);
    rocksdb_options_set_compression(o, compression);
    rocksdb_options_set_info_log_level(o, STATE_INFO_LOG_WARN);
    rocksdb_options_set_keep_log_file_num(o, STATE_LOG_FILES_MAX);
    rocksdb_options_set_max_log_file_size(o, STATE_LOG_FILE_BYTES_MAX);
    return o;
}

/* Opens with LZ4, or without compression if this RocksDB was built without LZ4
 * (open then fails with "Compression type LZ4 is not linked with the binary"). */
static int state_db_open(state_t *st, const char *path, rocksdb_cache_t *cache, char *errstr,
                         size_t errstr_size)
{
    static const int compressions[] = {rocksdb_lz4_compression, rocksdb_no_compression};
    char *rerr = NULL;
    for (size_t i = 0; i < sizeof(compressions) / sizeof(compressions[0]); i++) {
        rocksdb_free(rerr);
        rerr = NULL;
        rocksdb_options_t *o = state_options_new(cache, compressions[i], st->write_buffer_bytes);
        st->db = rocksdb_open(o, path, &rerr);
        rocksdb_options_destroy(o);
        if (st->db != NULL) {
            st->compression = compressions[i];
            return HF_OK;
        }
        if (rerr == NULL || strstr(rerr, "not linked") == NULL)
            break;
        log_warn("state", "%s: %s; opening without compression", path, rerr);
    }
    state_errstr(errstr, errstr_size, path, rerr);
    return HF_ERR_IO;
}

/* Frees whatever of st exists, without flushing. */
static void state_free(state_t *st)
{
    if (st->db != NULL)
        rocksdb_close(st->db);
    if (st->ropts != NULL)
        rocksdb_readoptions_destroy(st->ropts);
    if (st->wopts != NULL)
        rocksdb_writeoptions_destroy(st->wopts);
    if (st->holds_cache)
        state_cache_release();
    free(st->path);
    free(st);
}

int state_open(const char *path, const state_opts_t *opts, state_t **st_out, char *errstr,
               size_t errstr_size)
{
    int err = HF_OK;
    state_t *st = NULL;
    if (path == NULL || st_out == NULL) {
        err = HF_ERR_INVAL;
        goto fail;
    }
    *st_out = NULL;
    size_t cache_bytes = STATE_CACHE_BYTES_DEFAULT;
    bool sync_writes = false, disable_wal = false;
    size_t write_buffer_bytes = STATE_WRITE_BUFFER_BYTES;
    if (opts != NULL) {
        if (opts->write_buffer_bytes != 0)
            write_buffer_bytes = opts->write_buffer_bytes;
        cache_bytes = opts->block_cache_bytes != 0 ? opts->block_cache_bytes : cache_bytes;
        sync_writes = opts->sync_writes;
        disable_wal = opts->disable_wal && !sync_writes;
    }
    st = calloc(1, sizeof(*st));
    if (st == NULL) {
        err = HF_ERR_NOMEM;
        goto fail;
    }
    atomic_init(&st->iters_open, 0);
    st->write_buffer_bytes = write_buffer_bytes;
    st->path = strdup(path);
    if (st->path == NULL) {
        err = HF_ERR_NOMEM;
        goto fail;
    }
    rocksdb_cache_t *cache = state_cache_acquire(cache_bytes);
    st->holds_cache = true;
    err = state_db_open(st, path, cache, errstr, errstr_size);
    if (err != HF_OK)
        goto fail;
    st->ropts = rocksdb_readoptions_create();
    st->wopts = rocksdb_writeoptions_create();
    /* The changelog topic is the durable log (DESIGN.md section 4); the unsynced
     * WAL only spares a full changelog replay after a process crash. */
    rocksdb_writeoptions_set_sync(st->wopts, sync_writes);
    rocksdb_writeoptions_disable_WAL(st->wopts, disable_wal);
    *st_out = st;
    return HF_OK;
fail:
    if (err != HF_ERR_IO && errstr != NULL && errstr_size > 0)
        snprintf(errstr, errstr_size, "state_open: %s", hf_err_str(err));
    if (st != NULL)
        state_free(st);
    return err;
}

/* Without the WAL, memtables are the only copy of recent writes: a clean close
 * flushes them so the next open sees everything. */
void state_close(state_t *st)
{
    if (st == NULL)
        return;
    hf_assert(atomic_load(&st->iters_open) == 0);
    if (st->db != NULL) {
        char *rerr = NULL;
        rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
        rocksdb_flushoptions_set_wait(fo, 1);
        rocksdb_flush(st->db, fo, &rerr);
        rocksdb_flushoptions_destroy(fo);
        if (rerr != NULL) {
            log_error("state", "flush on close failed: %s", rerr);
            rocksdb_free(rerr);
        }
    }
    state_free(st);
}

/* ---- buffers */

state_buf_t *state_buf_new(state_t *st)
{
    hf_assert(st != NULL);
    state_buf_t *buf = calloc(1, sizeof(*buf));
    if (buf == NULL)
        return NULL;
    buf->st = st;
    buf->wb = wbuf_new();
    buf->batch = rocksdb_writebatch_create();
    if (buf->wb == NULL) {
        state_buf_destroy(buf);
        return NULL;
    }
    return buf;
}

void state_buf_destroy(state_buf_t *buf)
{
    if (buf == NULL)
        return;
    hf_assert(buf->iters_open == 0);
    wbuf_destroy(buf->wb);
    rocksdb_writebatch_destroy(buf->batch);
    free(buf);
}

void state_buf_clear(state_buf_t *buf)
{
    hf_assert(buf != NULL && buf->iters_open == 0);
    wbuf_clear(buf->wb);
}

size_t state_buf_count(const state_buf_t *buf)
{
    hf_assert(buf != NULL);
    return wbuf_ops(buf->wb);
}

int state_put(state_buf_t *buf, int32_t partition, const void *key, size_t key_len, const void *val,
              size_t val_len)
{
    hf_assert(buf != NULL);
    uint8_t sk[STATE_KEY_LEN_MAX];
    int err = state_key_check(partition, key, key_len);
    if (err != HF_OK)
        goto fail;
    if (val_len > HF_RECORD_LEN_MAX) {
        err = HF_ERR_LIMIT;
        goto fail;
    }
    hf_assert(val != NULL || val_len == 0);
    size_t sk_len = state_key_encode(partition, key, key_len, sk);
    /* A NULL value means a delete to wbuf_set. */
    return wbuf_set(buf->wb, sk, sk_len, val_len > 0 ? val : "", val_len);
fail:
    return err;
}

int state_del(state_buf_t *buf, int32_t partition, const void *key, size_t key_len)
{
    hf_assert(buf != NULL);
    uint8_t sk[STATE_KEY_LEN_MAX];
    int err = state_key_check(partition, key, key_len);
    if (err != HF_OK)
        goto fail;
    size_t sk_len = state_key_encode(partition, key, key_len, sk);
    return wbuf_set(buf->wb, sk, sk_len, NULL, 0);
fail:
    return err;
}

int state_buf_write(state_t *st, state_buf_t *buf, char *errstr, size_t errstr_size)
{
    hf_assert(st != NULL && buf != NULL && buf->st == st);
    hf_assert(buf->iters_open == 0); /* a successful write clears the batch */
    char *rerr = NULL;
    int err = HF_OK;
    if (wbuf_ops(buf->wb) == 0)
        return HF_OK;
    /* Each key once, in key order. */
    const wbuf_entry_t *const *sorted = wbuf_sorted(buf->wb);
    size_t n = wbuf_len(buf->wb);
    rocksdb_writebatch_clear(buf->batch);
    for (size_t i = 0; i < n; i++) {
        const wbuf_entry_t *e = sorted[i];
        if (e->deleted)
            rocksdb_writebatch_delete(buf->batch, (const char *)e->key, e->key_len);
        else
            rocksdb_writebatch_put(buf->batch, (const char *)e->key, e->key_len,
                                   e->val_len > 0 ? (const char *)e->val : "", e->val_len);
    }
    rocksdb_write(st->db, st->wopts, buf->batch, &rerr);
    rocksdb_writebatch_clear(buf->batch);
    if (rerr != NULL) {
        /* The buffer is kept: the caller decides between a retry and a clear. */
        state_errstr(errstr, errstr_size, "state_buf_write", rerr);
        err = HF_ERR_IO;
        goto fail;
    }
    wbuf_clear(buf->wb);
    return HF_OK;
fail:
    return err;
}

/* ---- reads */

/* Copies a found value out; the needed size goes to *val_len either way. */
static int state_copy_out(const char *v, size_t v_len, void *val, size_t val_size, size_t *val_len)
{
    *val_len = v_len;
    if (v_len > val_size)
        return HF_ERR_LIMIT;
    if (v_len > 0)
        memcpy(val, v, v_len);
    return HF_OK;
}

/* DB only; a pinned read avoids copying the value twice. */
static int state_get_db(state_t *st, const uint8_t *sk, size_t sk_len, void *val, size_t val_size,
                        size_t *val_len)
{
    char *rerr = NULL;
    int err = HF_OK;
    rocksdb_pinnableslice_t *ps =
        rocksdb_get_pinned(st->db, st->ropts, (const char *)sk, sk_len, &rerr);
    if (rerr != NULL) {
        rocksdb_free(rerr);
        err = HF_ERR_IO;
        goto fail;
    }
    if (ps == NULL) {
        err = HF_ERR_NOTFOUND;
        goto fail;
    }
    size_t v_len = 0;
    const char *v = rocksdb_pinnableslice_value(ps, &v_len);
    err = state_copy_out(v, v_len, val, val_size, val_len);
    rocksdb_pinnableslice_destroy(ps);
    return err;
fail:
    *val_len = 0;
    return err;
}

/* Reads key through buf: its buffered value or delete, else (read_db) the DB's
 * value; without read_db a key buf does not hold is absent. buf NULL: the DB. */
static int state_get_through(state_t *st, state_buf_t *buf, bool read_db, int32_t partition,
                             const void *key, size_t key_len, void *val, size_t val_size,
                             size_t *val_len)
{
    hf_assert(val_len != NULL);
    hf_assert(val != NULL || val_size == 0);
    uint8_t sk[STATE_KEY_LEN_MAX];
    *val_len = 0;
    int err = state_key_check(partition, key, key_len);
    if (err != HF_OK)
        return err;
    size_t sk_len = state_key_encode(partition, key, key_len, sk);
    const wbuf_entry_t *e = buf ? wbuf_find(buf->wb, sk, sk_len) : NULL;
    if (e == NULL)
        return read_db ? state_get_db(st, sk, sk_len, val, val_size, val_len) : HF_ERR_NOTFOUND;
    if (e->deleted)
        return HF_ERR_NOTFOUND;
    return state_copy_out((const char *)e->val, e->val_len, val, val_size, val_len);
}

int state_get(state_t *st, state_buf_t *buf, int32_t partition, const void *key, size_t key_len,
              void *val, size_t val_size, size_t *val_len)
{
    hf_assert(st != NULL);
    hf_assert(buf == NULL || buf->st == st);
    return state_get_through(st, buf, true, partition, key, key_len, val, val_size, val_len);
}

int state_get_buffered(state_buf_t *buf, int32_t partition, const void *key, size_t key_len,
                       void *val, size_t val_size, size_t *val_len)
{
    hf_assert(buf != NULL);
    return state_get_through(buf->st, buf, false, partition, key, key_len, val, val_size, val_len);
}

/* ---- offsets */

void state_offsets_encode(int64_t input_next_offset, int64_t changelog_next_offset,
                          int64_t current_at_ms, uint8_t out[STATE_OFFSETS_VAL_LEN])
{
    state_put_be64(out, (uint64_t)input_next_offset);
    state_put_be64(out + 8, (uint64_t)changelog_next_offset);
    state_put_be64(out + 16, (uint64_t)current_at_ms);
}

int state_buf_set_offsets(state_buf_t *buf, int32_t partition, int64_t input_next_offset,
                          int64_t changelog_next_offset, int64_t current_at_ms)
{
    hf_assert(buf != NULL);
    uint8_t sk[STATE_KEY_LEN_MAX];
    uint8_t v[STATE_OFFSETS_VAL_LEN];
    int err = HF_OK;
    if (partition < 0 || input_next_offset < -1 || changelog_next_offset < -1) {
        err = HF_ERR_INVAL;
        goto fail;
    }
    size_t sk_len = state_offsets_key(partition, sk);
    state_offsets_encode(input_next_offset, changelog_next_offset, current_at_ms, v);
    return wbuf_set(buf->wb, sk, sk_len, v, sizeof(v));
fail:
    return err;
}

int state_buf_set_derive_pending(state_buf_t *buf, int32_t partition, bool pending)
{
    hf_assert(buf != NULL);
    if (partition < 0)
        return HF_ERR_INVAL;
    uint8_t sk[STATE_KEY_LEN_MAX];
    size_t sk_len =
        state_key_encode(partition, state_derive_suffix, sizeof state_derive_suffix, sk);
    return wbuf_set(buf->wb, sk, sk_len, pending ? "1" : NULL, pending ? 1 : 0);
}

int state_get_derive_pending(state_t *st, int32_t partition, bool *pending)
{
    hf_assert(st != NULL && pending != NULL);
    *pending = false;
    if (partition < 0)
        return HF_ERR_INVAL;
    uint8_t sk[STATE_KEY_LEN_MAX], v[8];
    size_t sk_len =
        state_key_encode(partition, state_derive_suffix, sizeof state_derive_suffix, sk);
    size_t v_len = 0;
    int err = state_get_db(st, sk, sk_len, v, sizeof v, &v_len);
    *pending = err == HF_OK;
    return err == HF_ERR_NOTFOUND ? HF_OK : err;
}

int state_get_offsets(state_t *st, int32_t partition, int64_t *input_next_offset,
                      int64_t *changelog_next_offset, int64_t *current_at_ms)
{
    hf_assert(st != NULL && input_next_offset != NULL && changelog_next_offset != NULL);
    uint8_t sk[STATE_KEY_LEN_MAX];
    uint8_t v[STATE_OFFSETS_VAL_LEN];
    size_t v_len = 0;
    int err = HF_OK;
    *input_next_offset = -1;
    *changelog_next_offset = -1;
    if (current_at_ms != NULL)
        *current_at_ms = -1;
    if (partition < 0) {
        err = HF_ERR_INVAL;
        goto fail;
    }
    size_t sk_len = state_offsets_key(partition, sk);
    err = state_get_db(st, sk, sk_len, v, sizeof(v), &v_len);
    if (err == HF_ERR_NOTFOUND)
        return HF_OK;
    if (err == HF_ERR_LIMIT ||
        (err == HF_OK && v_len != sizeof(v) && v_len != STATE_OFFSETS_V1_LEN))
        err = HF_ERR_CORRUPT;
    if (err != HF_OK)
        goto fail;
    *input_next_offset = (int64_t)state_get_be64(v);
    *changelog_next_offset = (int64_t)state_get_be64(v + 8);
    if (current_at_ms != NULL && v_len == sizeof(v))
        *current_at_ms = (int64_t)state_get_be64(v + 16);
    if (*input_next_offset < -1 || *changelog_next_offset < -1) {
        *input_next_offset = -1;
        *changelog_next_offset = -1;
        err = HF_ERR_CORRUPT;
        goto fail;
    }
    return HF_OK;
fail:
    return err;
}

/* ---- partition drop */

int state_drop_partition(state_t *st, int32_t partition, char *errstr, size_t errstr_size)
{
    hf_assert(st != NULL);
    uint8_t lo[STATE_PART_LEN];
    uint8_t hi[STATE_PART_LEN];
    char *rerr = NULL;
    int err = HF_OK;
    if (partition < 0) {
        err = HF_ERR_INVAL;
        if (errstr != NULL && errstr_size > 0)
            snprintf(errstr, errstr_size, "state_drop_partition: partition %d", partition);
        goto fail;
    }
    /* [p, p + 1) covers every stored key of p, offsets included. p <= INT32_MAX, so
     * p + 1 <= 0x80000000 still fits the 4-byte prefix. */
    state_put_be32(lo, (uint32_t)partition);
    state_put_be32(hi, (uint32_t)partition + 1u);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_writebatch_delete_range(wb, (const char *)lo, sizeof(lo), (const char *)hi, sizeof(hi));
    rocksdb_write(st->db, st->wopts, wb, &rerr);
    rocksdb_writebatch_destroy(wb);
    if (rerr != NULL) {
        state_errstr(errstr, errstr_size, "state_drop_partition", rerr);
        err = HF_ERR_IO;
        goto fail;
    }
    return HF_OK;
fail:
    return err;
}

/* ---- iteration */

/* [lower, upper) = every caller key of partition starting with prefix. An empty
 * prefix starts at partition + 0x01, past the reserved 0x00 space. */
static void state_iter_bounds(state_iter_t *it, int32_t partition, const void *prefix,
                              size_t prefix_len)
{
    if (prefix_len == 0) {
        static const uint8_t first_caller_byte = STATE_RESERVED_BYTE + 1;
        it->lower_len = state_key_encode(partition, &first_caller_byte, 1, it->lower);
        it->upper_len = state_key_encode(partition, NULL, 0, it->upper);
    } else {
        it->lower_len = state_key_encode(partition, prefix, prefix_len, it->lower);
        memcpy(it->upper, it->lower, it->lower_len);
        it->upper_len = it->lower_len;
    }
    /* The partition's first byte is at most 0x7F, so a successor always exists. */
    it->upper_len = state_key_successor(it->upper, it->upper_len);
    hf_assert(it->upper_len > 0);
}

/* Copies the buffer's entries in [lower, upper) (their pointers) in key order. */
static int state_iter_take_buf(state_iter_t *it)
{
    size_t n = wbuf_len(it->buf->wb);
    if (n == 0)
        return HF_OK;
    const wbuf_entry_t *const *sorted = wbuf_sorted(it->buf->wb);
    size_t lo = wbuf_lower_bound(sorted, n, it->lower, it->lower_len, false);
    size_t hi = wbuf_lower_bound(sorted, n, it->upper, it->upper_len, false);
    if (hi <= lo)
        return HF_OK;
    it->bent = malloc((hi - lo) * sizeof(wbuf_entry_t *));
    if (it->bent == NULL)
        return HF_ERR_NOMEM;
    memcpy(it->bent, sorted + lo, (hi - lo) * sizeof(wbuf_entry_t *));
    it->bn = hi - lo;
    return HF_OK;
}

/* The iterator reads buf's entries in place: buf may take puts and deletes while
 * it is open, but not a clear, a write (which clears) or a destroy; nor may st
 * close. Each of those asserts that no iterator is open. */
state_iter_t *state_iter_new(state_t *st, state_buf_t *buf, int32_t partition, const void *prefix,
                             size_t prefix_len, bool reverse)
{
    hf_assert(st != NULL && (buf == NULL || buf->st == st));
    /* Partitions come from Kafka assignments and prefixes from code: a bad one is a
     * bug, and this constructor has no error channel. */
    hf_assert(partition >= 0 && prefix_len <= HF_STATE_KEY_LEN_MAX);
    hf_assert(prefix_len == 0 || ((const uint8_t *)prefix)[0] != STATE_RESERVED_BYTE);
    /* Only the fields before the entry copies are zeroed: the 32 KiB value buffer
     * is written before it is read, and clearing it cost more than the seek of a
     * short scan (a tick opens several per partition). */
    state_iter_t *it = malloc(sizeof(*it));
    if (it == NULL)
        return NULL;
    memset(it, 0, offsetof(state_iter_t, key));
    it->st = st;
    it->buf = buf;
    it->reverse = reverse;
    state_iter_bounds(it, partition, prefix, prefix_len);
    if (buf != NULL && state_iter_take_buf(it) != HF_OK) {
        free(it);
        return NULL;
    }
    it->ropts = rocksdb_readoptions_create();
    /* Lets the DB side stop early (and skip range tombstones). */
    rocksdb_readoptions_set_iterate_lower_bound(it->ropts, (const char *)it->lower, it->lower_len);
    rocksdb_readoptions_set_iterate_upper_bound(it->ropts, (const char *)it->upper, it->upper_len);
    it->it = rocksdb_create_iterator(st->db, it->ropts);
    if (buf != NULL)
        buf->iters_open++;
    atomic_fetch_add(&st->iters_open, 1);
    return it;
}

void state_iter_start_after(state_iter_t *it, int32_t partition, const void *key, size_t key_len)
{
    hf_assert(it != NULL && !it->started && !it->reverse && key_len <= HF_STATE_KEY_LEN_MAX);
    uint8_t enc[STATE_KEY_LEN_MAX];
    size_t enc_len = state_key_encode(partition, key, key_len, enc);
    /* Before the range: start at its beginning; inside: after key. */
    if (state_key_cmp((const char *)enc, enc_len, it->lower, it->lower_len) < 0)
        return;
    memcpy(it->after, enc, enc_len);
    it->after_len = enc_len;
}

void state_iter_destroy(state_iter_t *it)
{
    if (it == NULL)
        return;
    rocksdb_iter_destroy(it->it);
    rocksdb_readoptions_destroy(it->ropts);
    free(it->bent);
    if (it->buf != NULL) {
        hf_assert(it->buf->iters_open > 0);
        it->buf->iters_open--;
    }
    size_t open_before = atomic_fetch_sub(&it->st->iters_open, 1);
    hf_assert(open_before > 0);
    free(it);
}

static bool state_iter_in_range(const state_iter_t *it, const char *k, size_t k_len)
{
    return state_key_cmp(k, k_len, it->lower, it->lower_len) >= 0 &&
           state_key_cmp(k, k_len, it->upper, it->upper_len) < 0;
}

/* Positions both sides at the scan's first entry. */
static void state_iter_seek(state_iter_t *it)
{
    if (!it->reverse && it->after_len > 0) {
        it->bi =
            it->bn > 0 ? wbuf_lower_bound(it->bent, it->bn, it->after, it->after_len, true) : 0;
        rocksdb_iter_seek(it->it, (const char *)it->after, it->after_len);
        size_t k_len = 0;
        const char *k = rocksdb_iter_valid(it->it) ? rocksdb_iter_key(it->it, &k_len) : NULL;
        if (k && state_key_cmp(k, k_len, it->after, it->after_len) == 0)
            rocksdb_iter_next(it->it);
        return;
    }
    if (!it->reverse) {
        it->bi = 0;
        rocksdb_iter_seek(it->it, (const char *)it->lower, it->lower_len);
        return;
    }
    it->bi = it->bn;
    /* Last key <= upper; upper itself is outside the range. */
    rocksdb_iter_seek_for_prev(it->it, (const char *)it->upper, it->upper_len);
    if (rocksdb_iter_valid(it->it)) {
        size_t k_len = 0;
        const char *k = rocksdb_iter_key(it->it, &k_len);
        if (state_key_cmp(k, k_len, it->upper, it->upper_len) >= 0)
            rocksdb_iter_prev(it->it);
    }
}

/* Steps past the entry returned (or skipped) last, on the side(s) it came from. */
static void state_iter_step(state_iter_t *it)
{
    if (it->took & ITER_TOOK_DB) {
        if (it->reverse)
            rocksdb_iter_prev(it->it);
        else
            rocksdb_iter_next(it->it);
    }
    if (it->took & ITER_TOOK_BUF) {
        if (it->reverse)
            it->bi--;
        else
            it->bi++;
    }
    it->took = 0;
}

/* An I/O error mid-scan cannot be reported through state_iter_next, and ending the
 * scan early would look like "no more keys" (a missed timer, a wrong count). Stop. */
static void state_iter_check_status(const state_iter_t *it)
{
    char *rerr = NULL;
    rocksdb_iter_get_error(it->it, &rerr);
    if (rerr != NULL) {
        log_error("state", "iterator failed, stopping: %s", rerr);
        abort();
    }
}

/* The buffer's next candidate in scan order, or NULL. */
static const wbuf_entry_t *state_iter_buf_next(const state_iter_t *it)
{
    if (it->reverse)
        return it->bi > 0 ? it->bent[it->bi - 1] : NULL;
    return it->bi < it->bn ? it->bent[it->bi] : NULL;
}

/* Moves lazily: the step to the next entry happens at the start of the next call,
 * so writes made to the buffer in between (deleting the entry just returned, or one
 * ahead) are seen by the scan. */
bool state_iter_next(state_iter_t *it, const void **key, size_t *key_len, const void **val,
                     size_t *val_len)
{
    hf_assert(it != NULL && key != NULL && key_len != NULL && val != NULL && val_len != NULL);
    if (it->done)
        return false;
    if (!it->started) {
        it->started = true;
        state_iter_seek(it);
    } else {
        state_iter_step(it);
    }
    for (;; state_iter_step(it)) {
        size_t dk_len = 0;
        const char *dk = NULL;
        if (rocksdb_iter_valid(it->it)) {
            dk = rocksdb_iter_key(it->it, &dk_len);
            /* The read options' bounds keep the DB side in range; past them, it
             * has simply ended. */
            if (!state_iter_in_range(it, dk, dk_len))
                dk = NULL;
        } else {
            state_iter_check_status(it);
        }
        const wbuf_entry_t *be = state_iter_buf_next(it);
        if (dk == NULL && be == NULL) {
            it->done = true;
            return false;
        }
        /* c < 0: the DB's key comes first in scan order; 0: the same key. */
        int c = dk == NULL ? 1 : be == NULL ? -1 : state_key_cmp(dk, dk_len, be->key, be->key_len);
        if (it->reverse && dk != NULL && be != NULL)
            c = -c;
        const wbuf_entry_t *e = be;
        it->took = c < 0 ? ITER_TOOK_DB : c == 0 ? ITER_TOOK_DB | ITER_TOOK_BUF : ITER_TOOK_BUF;
        if (c < 0) /* a key the buffer may have taken since the scan opened */
            e = it->buf != NULL ? wbuf_find(it->buf->wb, (const uint8_t *)dk, dk_len) : NULL;
        if (e != NULL && e->deleted)
            continue;
        const char *k = dk, *v = NULL;
        size_t k_len = dk_len, v_len = 0;
        if (e != NULL) {
            k = (const char *)e->key;
            k_len = e->key_len;
            v = (const char *)e->val;
            v_len = e->val_len;
        } else {
            v = rocksdb_iter_value(it->it, &v_len);
        }
        /* state_put bounds both; anything longer was not written by this module. */
        hf_assert(k_len > STATE_PART_LEN && k_len - STATE_PART_LEN <= HF_STATE_KEY_LEN_MAX);
        hf_assert(v_len <= HF_RECORD_LEN_MAX);
        memcpy(it->key, k + STATE_PART_LEN, k_len - STATE_PART_LEN);
        if (v_len > 0)
            memcpy(it->val, v, v_len);
        *key = it->key;
        *key_len = k_len - STATE_PART_LEN;
        *val = it->val;
        *val_len = v_len;
        return true;
    }
}
