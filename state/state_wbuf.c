/* state_wbuf.h: an open-addressing hash table of entry pointers over an arena,
 * plus the list of entries, sorted on demand. */
#include "state_wbuf.h"

#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_err.h"
#include "state_int.h"

enum {
    WBUF_SLOTS_MIN = 1024,       /* a power of two */
    WBUF_SLOTS_KEPT = 1 << 16,   /* a clear shrinks a larger table back to the minimum */
    WBUF_CHUNK_BYTES = 64 << 10, /* arena chunk; larger requests get a chunk of their own */
    WBUF_ALIGN = 8,
};

typedef struct wbuf_chunk {
    struct wbuf_chunk *next;
    size_t used;
    size_t cap;
    _Alignas(WBUF_ALIGN) uint8_t mem[];
} wbuf_chunk_t;

struct wbuf {
    wbuf_entry_t **slots; /* cap_slots, NULL = empty */
    size_t cap_slots;
    wbuf_entry_t **order; /* every entry; sorted by key when is_sorted */
    size_t len;
    size_t cap_order;
    bool is_sorted;
    size_t ops;
    wbuf_chunk_t *chunks; /* newest first; the last one is kept by a clear */
};

/* A 64-bit hash of a short key, eight bytes at a time. */
static uint64_t wbuf_hash(const uint8_t *k, size_t len)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (len * 0xC2B2AE3D27D4EB4Full);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, k + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    for (size_t j = 0; i < len; i++, j += 8)
        tail |= (uint64_t)k[i] << j;
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 32);
}

static wbuf_chunk_t *wbuf_chunk_new(size_t cap)
{
    wbuf_chunk_t *c = malloc(sizeof(*c) + cap);
    if (c == NULL)
        return NULL;
    c->next = NULL;
    c->used = 0;
    c->cap = cap;
    return c;
}

static void *wbuf_alloc(wbuf_t *wb, size_t n)
{
    n = (n + WBUF_ALIGN - 1) & ~(size_t)(WBUF_ALIGN - 1);
    wbuf_chunk_t *c = wb->chunks;
    if (c->cap - c->used < n) {
        /* A big request gets its own chunk behind the current one, which keeps
         * serving small requests. */
        bool own = n > WBUF_CHUNK_BYTES / 4;
        wbuf_chunk_t *fresh = wbuf_chunk_new(own ? n : WBUF_CHUNK_BYTES);
        if (fresh == NULL)
            return NULL;
        if (own) {
            fresh->next = c->next;
            c->next = fresh;
            fresh->used = n;
            return fresh->mem;
        }
        fresh->next = c;
        wb->chunks = fresh;
        c = fresh;
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

wbuf_t *wbuf_new(void)
{
    wbuf_t *wb = calloc(1, sizeof(*wb));
    if (wb == NULL)
        return NULL;
    wb->cap_slots = WBUF_SLOTS_MIN;
    wb->slots = calloc(wb->cap_slots, sizeof(wbuf_entry_t *));
    wb->chunks = wbuf_chunk_new(WBUF_CHUNK_BYTES);
    wb->is_sorted = true;
    if (wb->slots == NULL || wb->chunks == NULL) {
        wbuf_destroy(wb);
        return NULL;
    }
    return wb;
}

static void wbuf_chunks_free(wbuf_chunk_t *c)
{
    while (c != NULL) {
        wbuf_chunk_t *next = c->next;
        free(c);
        c = next;
    }
}

void wbuf_destroy(wbuf_t *wb)
{
    if (wb == NULL)
        return;
    wbuf_chunks_free(wb->chunks);
    free(wb->slots);
    free(wb->order);
    free(wb);
}

void wbuf_clear(wbuf_t *wb)
{
    hf_assert(wb != NULL);
    if (wb->cap_slots > WBUF_SLOTS_KEPT) {
        wbuf_entry_t **small = calloc(WBUF_SLOTS_MIN, sizeof(wbuf_entry_t *));
        if (small != NULL) {
            free(wb->slots);
            wb->slots = small;
            wb->cap_slots = WBUF_SLOTS_MIN;
        } else {
            memset(wb->slots, 0, wb->cap_slots * sizeof(wbuf_entry_t *));
        }
    } else if (wb->len > 0) {
        memset(wb->slots, 0, wb->cap_slots * sizeof(wbuf_entry_t *));
    }
    /* Keep the oldest chunk (the list's tail) for the next batch. */
    wbuf_chunk_t *keep = wb->chunks;
    while (keep->next != NULL) {
        wbuf_chunk_t *c = keep;
        keep = keep->next;
        free(c);
    }
    keep->used = 0;
    wb->chunks = keep;
    wb->len = 0;
    wb->ops = 0;
    wb->is_sorted = true;
}

static size_t wbuf_probe(const wbuf_t *wb, uint64_t h, const uint8_t *key, size_t key_len)
{
    size_t mask = wb->cap_slots - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const wbuf_entry_t *e = wb->slots[i];
        if (e == NULL ||
            (e->hash == h && e->key_len == key_len && memcmp(e->key, key, key_len) == 0))
            return i;
    }
}

static int wbuf_grow(wbuf_t *wb)
{
    size_t cap = wb->cap_slots * 2;
    wbuf_entry_t **slots = calloc(cap, sizeof(wbuf_entry_t *));
    if (slots == NULL)
        return HF_ERR_NOMEM;
    for (size_t i = 0; i < wb->len; i++) {
        wbuf_entry_t *e = wb->order[i];
        size_t j = (size_t)e->hash & (cap - 1);
        while (slots[j] != NULL)
            j = (j + 1) & (cap - 1);
        slots[j] = e;
    }
    free(wb->slots);
    wb->slots = slots;
    wb->cap_slots = cap;
    return HF_OK;
}

static int wbuf_entry_cmp(const void *a, const void *b)
{
    const wbuf_entry_t *x = *(wbuf_entry_t *const *)a, *y = *(wbuf_entry_t *const *)b;
    return state_key_cmp(x->key, x->key_len, y->key, y->key_len);
}

/* Makes room for one more entry in order and in the table, before anything changes. */
static int wbuf_reserve(wbuf_t *wb)
{
    if (wb->len == wb->cap_order) {
        size_t cap = wb->cap_order ? wb->cap_order * 2 : WBUF_SLOTS_MIN / 2;
        wbuf_entry_t **order = realloc(wb->order, cap * sizeof(wbuf_entry_t *));
        if (order == NULL)
            return HF_ERR_NOMEM;
        wb->order = order;
        wb->cap_order = cap;
    }
    /* Load factor at most 1/2. */
    if ((wb->len + 1) * 2 > wb->cap_slots)
        return wbuf_grow(wb);
    return HF_OK;
}

int wbuf_set(wbuf_t *wb, const uint8_t *key, size_t key_len, const void *val, size_t val_len)
{
    hf_assert(wb != NULL && key != NULL && key_len > 0 && key_len <= STATE_KEY_LEN_MAX);
    hf_assert(val_len <= HF_RECORD_LEN_MAX && (val != NULL || val_len == 0));
    uint64_t h = wbuf_hash(key, key_len);
    size_t slot = wbuf_probe(wb, h, key, key_len);
    wbuf_entry_t *e = wb->slots[slot];
    if (e == NULL) {
        /* Everything a new entry needs is allocated before it becomes visible: a
         * failed put must not leave an empty value behind. */
        if (wbuf_reserve(wb) != HF_OK)
            return HF_ERR_NOMEM;
        size_t head = (sizeof(*e) + key_len + WBUF_ALIGN - 1) & ~(size_t)(WBUF_ALIGN - 1);
        e = wbuf_alloc(wb, head + val_len);
        if (e == NULL)
            return HF_ERR_NOMEM;
        memset(e, 0, sizeof(*e));
        e->hash = h;
        e->key_len = (uint16_t)key_len;
        memcpy(e->key, key, key_len);
        e->val = (uint8_t *)e + head;
        e->val_cap = (uint32_t)val_len;
        slot = wbuf_probe(wb, h, key, key_len); /* the table may have grown */
        wb->slots[slot] = e;
        /* Appending a key above the last one keeps the list sorted (ascending
         * keys are common: timers, sequential ids). */
        if (wb->is_sorted && wb->len > 0 && wbuf_entry_cmp(&wb->order[wb->len - 1], &e) > 0)
            wb->is_sorted = false;
        wb->order[wb->len++] = e;
    }
    if (val == NULL) {
        e->deleted = true;
        e->val_len = 0;
    } else {
        if (val_len > e->val_cap) {
            uint8_t *v = wbuf_alloc(wb, val_len);
            if (v == NULL) /* the entry stays as it was */
                return HF_ERR_NOMEM;
            e->val = v;
            e->val_cap = (uint32_t)val_len;
        }
        if (val_len > 0)
            memcpy(e->val, val, val_len);
        e->val_len = (uint32_t)val_len;
        e->deleted = false;
    }
    wb->ops++;
    return HF_OK;
}

const wbuf_entry_t *wbuf_find(const wbuf_t *wb, const uint8_t *key, size_t key_len)
{
    hf_assert(wb != NULL);
    if (wb->len == 0)
        return NULL;
    uint64_t h = wbuf_hash(key, key_len);
    return wb->slots[wbuf_probe(wb, h, key, key_len)];
}

size_t wbuf_ops(const wbuf_t *wb)
{
    hf_assert(wb != NULL);
    return wb->ops;
}

size_t wbuf_len(const wbuf_t *wb)
{
    hf_assert(wb != NULL);
    return wb->len;
}

const wbuf_entry_t *const *wbuf_sorted(wbuf_t *wb)
{
    hf_assert(wb != NULL);
    if (!wb->is_sorted) {
        qsort(wb->order, wb->len, sizeof(wbuf_entry_t *), wbuf_entry_cmp);
        wb->is_sorted = true;
    }
    return (const wbuf_entry_t *const *)wb->order;
}

size_t wbuf_lower_bound(const wbuf_entry_t *const *sorted, size_t n, const uint8_t *key,
                        size_t key_len, bool after)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = state_key_cmp(sorted[mid]->key, sorted[mid]->key_len, key, key_len);
        if (c < 0 || (after && c == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
