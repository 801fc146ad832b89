/* The pending writes behind a state_buf_t: the latest value (or delete) of each
 * stored key, found by hash, and sorted by key only when asked (for an iterator,
 * or to apply them). Internal to state/.
 *
 * Why not RocksDB's write batch with index: it keeps every operation, so a key
 * written N times in one transaction (a hot SKU's counter, an escrow's balance) is
 * inserted N times into the memtable's skiplist at apply time, and every put and
 * read walks the batch's own skiplist. Here a put is a hash-table update, a read a
 * hash lookup, and the apply writes each key once, in key order (consecutive
 * skiplist inserts then start close to where the previous one ended).
 *
 * Entries never move while the buffer lives: an overwrite updates the entry in
 * place, so an iterator holding entry pointers sees deletes and rewrites made
 * while it scans. Memory comes from an arena freed by wbuf_clear. */
#ifndef HF_STATE_WBUF_H
#define HF_STATE_WBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct wbuf wbuf_t;

typedef struct wbuf_entry {
    uint64_t hash;
    uint8_t *val; /* val_len bytes (arena); unused when deleted */
    uint32_t val_len;
    uint32_t val_cap; /* bytes available at val for a rewrite in place */
    uint16_t key_len;
    bool deleted;
    uint8_t key[]; /* the stored key: partition prefix + caller's key */
} wbuf_entry_t;

wbuf_t *wbuf_new(void);
void wbuf_destroy(wbuf_t *wb); /* accepts NULL */
/* Forgets every entry; entry pointers handed out before are dangling after. */
void wbuf_clear(wbuf_t *wb);

/* Sets key's pending value (val NULL = a delete). HF_ERR_NOMEM leaves the buffer
 * as it was. */
int wbuf_set(wbuf_t *wb, const uint8_t *key, size_t key_len, const void *val, size_t val_len);
/* The entry of key, or NULL if it has no pending write. */
const wbuf_entry_t *wbuf_find(const wbuf_t *wb, const uint8_t *key, size_t key_len);

/* Operations since the last clear (an overwrite counts again). */
size_t wbuf_ops(const wbuf_t *wb);
/* Distinct keys pending. */
size_t wbuf_len(const wbuf_t *wb);

/* Every entry (wbuf_len of them) in key order, deletes included; the array is
 * valid until the next wbuf_set of a new key or a clear. */
const wbuf_entry_t *const *wbuf_sorted(wbuf_t *wb);
/* Of the sorted entries, the index of the first whose key is >= key (after:
 * > key); wbuf_len if none. */
size_t wbuf_lower_bound(const wbuf_entry_t *const *sorted, size_t n, const uint8_t *key,
                        size_t key_len, bool after);

#endif
