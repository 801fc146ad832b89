/* The routing view's table (view_table.h). Four arrays, each grown by doubling:
 * hash slots (entry index + 1; 0 = empty) over a dense entry array, SKU names
 * NUL-terminated in one arena, and per-SKU warehouse vectors in one pool (a
 * vector of capacity c: c interned warehouse ids, then c int32 available, at a
 * byte offset). A SKU whose warehouse count outgrows its vector gets a new one
 * at the pool's end; the old bytes are not reused (a SKU rarely gains
 * warehouses, and the waste is counted in view_table_bytes). */
#include "view_table.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"

#define VT_SLOTS_INITIAL   1024
#define VT_WH_MAX          256 /* interned ids are one byte */
#define VT_WH_SLOTS        512 /* the warehouse-name hash: at most half full */
#define VT_ARENA_MAX       UINT32_MAX
#define VT_ARENA_STEP_FROM (16u << 20)

typedef struct {
    int64_t total;
    int64_t updated_at_ms;
    uint32_t name_at; /* offset of the NUL-terminated sku in names */
    uint32_t vec_at;  /* byte offset of its warehouse vector in pool */
    uint8_t count, cap;
    bool in_stock;
} vt_entry_t;

typedef struct {
    uint8_t *p;
    size_t len, cap;
} vt_arena_t;

struct view_table {
    uint32_t *slots;
    size_t slots_cap;
    vt_entry_t *entries;
    size_t count, entries_cap;
    vt_arena_t names, pool;
    char wh_names[VT_WH_MAX][HF_WAREHOUSE_LEN_MAX + 1];
    size_t wh_count;
    uint16_t wh_slots[VT_WH_SLOTS]; /* wh id + 1; 0 = empty */
};

_Static_assert(HF_WAREHOUSES_MAX <= UINT8_MAX, "a SKU's warehouse count fits a byte");

static uint64_t vt_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

view_table_t *view_table_new(void)
{
    view_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->slots = calloc(VT_SLOTS_INITIAL, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    t->slots_cap = VT_SLOTS_INITIAL;
    return t;
}

void view_table_destroy(view_table_t *t)
{
    if (!t)
        return;
    free(t->slots);
    free(t->entries);
    free(t->names.p);
    free(t->pool.p);
    free(t);
}

/* Room for n more bytes at the arena's end; returns their offset or -1. */
static int64_t arena_take(vt_arena_t *a, size_t n)
{
    if (a->len + n > VT_ARENA_MAX)
        return -1;
    if (a->len + n > a->cap) {
        /* Doubling while small; past VT_ARENA_STEP_FROM by a quarter, so that
         * the spare room of a large view stays under 25 % (glibc moves a large
         * block with mremap, without copying). */
        size_t cap = a->cap ? a->cap : 4096;
        while (cap < a->len + n)
            cap += cap < VT_ARENA_STEP_FROM ? cap : cap / 4;
        if (cap > VT_ARENA_MAX)
            cap = VT_ARENA_MAX;
        uint8_t *p = realloc(a->p, cap);
        if (!p)
            return -1;
        a->p = p;
        a->cap = cap;
    }
    int64_t at = (int64_t)a->len;
    a->len += n;
    return at;
}

static const char *entry_name(const view_table_t *t, const vt_entry_t *e)
{
    hf_assert(e != NULL && t->names.p != NULL);
    return (const char *)t->names.p + e->name_at;
}

/* The slot of sku: its entry's, or the empty one where it would go. */
static uint32_t *slot_of(const view_table_t *t, const char *sku, uint64_t h)
{
    size_t mask = t->slots_cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t s = t->slots[i];
        if (s == 0)
            return &t->slots[i];
        hf_assert(t->entries != NULL && s <= t->count);
        if (strcmp(entry_name(t, &t->entries[s - 1]), sku) == 0)
            return &t->slots[i];
    }
}

static int grow_slots(view_table_t *t)
{
    size_t cap = t->slots_cap * 2;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return HF_ERR_NOMEM;
    for (size_t i = 0; i < t->count; i++) {
        size_t j = vt_hash(entry_name(t, &t->entries[i])) & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = (uint32_t)(i + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->slots_cap = cap;
    return HF_OK;
}

/* The entry of a new SKU, its name stored; NULL on a limit or no memory. */
static vt_entry_t *add_entry(view_table_t *t, const char *sku, int *err)
{
    *err = HF_ERR_LIMIT;
    if (t->count >= VIEW_TABLE_SKUS_MAX)
        return NULL;
    *err = HF_ERR_NOMEM;
    if ((t->count + 1) * 2 > t->slots_cap && grow_slots(t) != HF_OK)
        return NULL;
    if (t->count == t->entries_cap) {
        size_t cap = t->entries_cap ? t->entries_cap : 1024;
        cap += cap * sizeof(vt_entry_t) < VT_ARENA_STEP_FROM ? cap : cap / 4; /* as arena_take */
        vt_entry_t *e = realloc(t->entries, cap * sizeof *e);
        if (!e)
            return NULL;
        t->entries = e;
        t->entries_cap = cap;
    }
    size_t len = strnlen(sku, HF_SKU_LEN_MAX);
    int64_t at = arena_take(&t->names, len + 1);
    if (at < 0)
        return NULL;
    memcpy(t->names.p + at, sku, len);
    t->names.p[at + (int64_t)len] = '\0';
    hf_assert(t->entries != NULL && t->count < t->entries_cap);
    vt_entry_t *e = &t->entries[t->count];
    *e = (vt_entry_t){.name_at = (uint32_t)at};
    *slot_of(t, sku, vt_hash(sku)) = (uint32_t)(++t->count);
    *err = HF_OK;
    return e;
}

/* The one-byte id of warehouse wh, interned on first sight; -1 past VT_WH_MAX. */
static int intern_wh(view_table_t *t, const char *wh)
{
    size_t i = vt_hash(wh) & (VT_WH_SLOTS - 1);
    for (; t->wh_slots[i]; i = (i + 1) & (VT_WH_SLOTS - 1))
        if (strcmp(t->wh_names[t->wh_slots[i] - 1], wh) == 0)
            return t->wh_slots[i] - 1;
    if (t->wh_count == VT_WH_MAX)
        return -1;
    size_t len = strnlen(wh, HF_WAREHOUSE_LEN_MAX);
    memcpy(t->wh_names[t->wh_count], wh, len);
    t->wh_names[t->wh_count][len] = '\0';
    t->wh_slots[i] = (uint16_t)(++t->wh_count);
    return (int)t->wh_count - 1;
}

static int32_t clamp_available(int64_t v)
{
    return v > INT32_MAX ? INT32_MAX : v < 0 ? 0 : (int32_t)v;
}

int view_table_apply(view_table_t *t, const hf_availability_t *a)
{
    hf_assert(a->warehouses_count >= 0 && a->warehouses_count <= HF_WAREHOUSES_MAX);
    uint8_t ids[HF_WAREHOUSES_MAX];
    for (int32_t i = 0; i < a->warehouses_count; i++) {
        int id = intern_wh(t, a->warehouses[i].warehouse_id);
        if (id < 0)
            return HF_ERR_LIMIT;
        ids[i] = (uint8_t)id;
    }
    uint32_t s = *slot_of(t, a->sku, vt_hash(a->sku));
    vt_entry_t *e = s ? &t->entries[s - 1] : NULL;
    int err = HF_OK;
    if (!e && !(e = add_entry(t, a->sku, &err)))
        return err;
    uint8_t n = (uint8_t)a->warehouses_count;
    if (n > e->cap) {
        int64_t at = arena_take(&t->pool, (size_t)n * (1 + sizeof(int32_t)));
        if (at < 0)
            return HF_ERR_LIMIT; /* the entry stays as it was (a new one: empty) */
        e->vec_at = (uint32_t)at;
        e->cap = n;
    }
    uint8_t *vec = t->pool.p + e->vec_at;
    memcpy(vec, ids, n);
    for (uint8_t i = 0; i < n; i++) {
        int32_t avail = clamp_available(a->warehouses[i].available);
        memcpy(vec + e->cap + (size_t)i * sizeof avail, &avail, sizeof avail);
    }
    e->count = n;
    e->total = a->total;
    e->in_stock = a->in_stock;
    e->updated_at_ms = a->updated_at_ms;
    return HF_OK;
}

int view_table_get(const view_table_t *t, const char *sku, hf_availability_t *out)
{
    uint32_t s = *slot_of(t, sku, vt_hash(sku));
    if (!s)
        return HF_ERR_NOTFOUND;
    hf_assert(t->entries != NULL && s <= t->count);
    const vt_entry_t *e = &t->entries[s - 1];
    memset(out, 0, sizeof *out);
    snprintf(out->sku, sizeof out->sku, "%s", entry_name(t, e));
    const uint8_t *vec = e->cap ? t->pool.p + e->vec_at : NULL;
    hf_assert(vec != NULL || e->count == 0);
    out->warehouses_count = e->count;
    for (uint8_t i = 0; i < e->count; i++) {
        int32_t avail;
        memcpy(&avail, vec + e->cap + (size_t)i * sizeof avail, sizeof avail);
        memcpy(out->warehouses[i].warehouse_id, t->wh_names[vec[i]],
               sizeof out->warehouses[i].warehouse_id);
        out->warehouses[i].available = avail;
    }
    out->total = e->total;
    out->in_stock = e->in_stock;
    out->updated_at_ms = e->updated_at_ms;
    return HF_OK;
}

size_t view_table_size(const view_table_t *t)
{
    return t->count;
}

size_t view_table_bytes(const view_table_t *t)
{
    return sizeof *t + t->slots_cap * sizeof *t->slots + t->entries_cap * sizeof *t->entries +
           t->names.cap + t->pool.cap;
}
