/* The parts of the state module its own files share (state.c, state_load.c):
 * the stored-key layout, the DB handle and the options every DB is opened with.
 * Nothing outside state/ includes this. */
#ifndef HF_STATE_INT_H
#define HF_STATE_INT_H

#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_err.h"
#include "hf_limits.h"

/* Memtable bloom filter size as a fraction of the memtable (3.2 MiB of 32). */
#define STATE_MEMTABLE_BLOOM_RATIO 0.1

enum {
    STATE_PART_LEN = 4,
    STATE_KEY_LEN_MAX = STATE_PART_LEN + HF_STATE_KEY_LEN_MAX,
    STATE_RESERVED_BYTE = 0x00, /* fifth stored byte of every module-owned key */
    STATE_OFFSETS_VAL_LEN = 24, /* input, changelog next offset, current-at ms; big-endian */
    STATE_OFFSETS_V1_LEN = 16,  /* before current-at: read as "age unknown" */
    STATE_CACHE_BYTES_DEFAULT = 64 << 20,
    STATE_WRITE_BUFFER_BYTES = 32 << 20,
    STATE_WRITE_BUFFERS_MAX = 4, /* memtables per DB: at most 4 x write_buffer_bytes */
    STATE_OPEN_FILES_MAX = 256,
    STATE_METADATA_BLOCK_BYTES = 4096, /* one partition of a table's index or filter */
    STATE_BG_THREADS = 2,
    STATE_LOG_FILES_MAX = 3,
    STATE_LOG_FILE_BYTES_MAX = 4 << 20,
    STATE_NUM_LEVELS = 7, /* RocksDB's default num_levels */
    STATE_INFO_LOG_WARN = 2,
};

static const uint8_t state_offsets_suffix[] = {STATE_RESERVED_BYTE, 'M', 'O'};
/* Present while a partition's derived state is still to be derived (state.h
 * state_buf_set_derive_pending); its value is not read. */
static const uint8_t state_derive_suffix[] = {STATE_RESERVED_BYTE, 'M', 'D'};

_Static_assert(STATE_RESERVED_BYTE < ' ', "reserved keys sort below printable tags");
_Static_assert(STATE_PART_LEN + sizeof(state_offsets_suffix) <= STATE_KEY_LEN_MAX,
               "offsets key fits a stored key buffer");

struct state {
    rocksdb_t *db;
    rocksdb_readoptions_t *ropts;  /* shared, never changed after open */
    rocksdb_writeoptions_t *wopts; /* shared, never changed after open */
    bool holds_cache;
    atomic_size_t iters_open;  /* RocksDB aborts a close under a live iterator */
    int compression;           /* what the DB was opened with (rocksdb_*_compression) */
    char *path;                /* the DB's directory (bulk loads write their files there) */
    size_t write_buffer_bytes; /* one memtable */
};

/* ---- small pure helpers */

static inline void state_put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline void state_put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline uint64_t state_get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline int state_key_cmp(const void *a, size_t a_len, const void *b, size_t b_len)
{
    size_t n = a_len < b_len ? a_len : b_len;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c;
    return (a_len > b_len) - (a_len < b_len);
}

/* Turns k into the smallest key greater than every key that starts with k: the last
 * byte that is not 0xFF is incremented and what follows is dropped. Returns the new
 * length, 0 if k is all 0xFF (no such key). */
static inline size_t state_key_successor(uint8_t *k, size_t len)
{
    for (size_t i = len; i > 0; i--) {
        if (k[i - 1] != 0xFF) {
            k[i - 1]++;
            return i;
        }
    }
    return 0;
}

/* Writes partition + key into out and returns the stored length. */
static inline size_t state_key_encode(int32_t partition, const void *key, size_t key_len,
                                      uint8_t out[STATE_KEY_LEN_MAX])
{
    hf_assert(partition >= 0 && key_len <= HF_STATE_KEY_LEN_MAX);
    state_put_be32(out, (uint32_t)partition);
    if (key_len > 0)
        memcpy(out + STATE_PART_LEN, key, key_len);
    return STATE_PART_LEN + key_len;
}

/* A caller's key: a real partition, a bounded length, a printable tag first (so it
 * cannot reach the reserved space). A key breaking the tag rule is a code bug. */
static inline int state_key_check(int32_t partition, const void *key, size_t key_len)
{
    if (partition < 0)
        return HF_ERR_INVAL;
    if (key_len > HF_STATE_KEY_LEN_MAX)
        return HF_ERR_LIMIT;
    hf_assert(key_len > 0 && key != NULL);
    hf_assert(((const uint8_t *)key)[0] != STATE_RESERVED_BYTE);
    return HF_OK;
}

static inline size_t state_offsets_key(int32_t partition, uint8_t out[STATE_KEY_LEN_MAX])
{
    return state_key_encode(partition, state_offsets_suffix, sizeof(state_offsets_suffix), out);
}

/* Copies "what: rocksdb's message" into errstr and frees the message. */
void state_errstr(char *errstr, size_t errstr_size, const char *what, char *rerr);
/* The options of every DB (and of the table files a bulk load writes): the
 * shared block cache, and compression for the levels below L1. */
rocksdb_options_t *state_options_new(rocksdb_cache_t *cache, int compression,
                                     size_t write_buffer_bytes);
/* The process's shared block cache (NULL when no DB is open). */
rocksdb_cache_t *state_cache_get(void);
/* The 24-byte value of a partition's offsets key. */
void state_offsets_encode(int64_t input_next_offset, int64_t changelog_next_offset,
                          int64_t current_at_ms, uint8_t out[STATE_OFFSETS_VAL_LEN]);

#endif
