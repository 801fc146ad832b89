/* The reconciler's string-keyed table (see reconcile_int.h): FNV-1a hashes,
 * linear probing at most half full, entries in arrays that grow by half as
 * they fill (a third of them unused at worst, where doubling wastes half), so
 * memory follows the data and a cap bounds it. And rc_vec, an array of values
 * that grows the same way. */
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "reconcile_int.h"

#define RC_MAP_INITIAL 64

static uint32_t fnv1a(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h;
}

int rc_map_init(rc_map_t *m, size_t val_size, size_t max)
{
    memset(m, 0, sizeof *m);
    m->val_size = val_size;
    m->max = max;
    m->slots_cap = RC_MAP_INITIAL * 2;
    m->slots = calloc(m->slots_cap, sizeof *m->slots);
    return m->slots ? HF_OK : HF_ERR_NOMEM;
}

void rc_map_free(rc_map_t *m)
{
    free(m->slots);
    free(m->keys);
    free(m->key_off);
    free(m->key_len);
    free(m->hash);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static bool same_key(const rc_map_t *m, uint32_t idx, const char *key, size_t len, uint32_t h)
{
    return m->hash[idx] == h && m->key_len[idx] == len &&
           memcmp(m->keys + m->key_off[idx], key, len) == 0;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t probe(const rc_map_t *m, const char *key, size_t len, uint32_t h)
{
    size_t mask = m->slots_cap - 1, s = h & mask;
    while (m->slots[s] && !same_key(m, m->slots[s] - 1, key, len, h))
        s = (s + 1) & mask;
    return s;
}

bool rc_map_find(const rc_map_t *m, const char *key, size_t len, uint32_t *idx_out)
{
    size_t s = probe(m, key, len, fnv1a(key, len));
    if (!m->slots[s])
        return false;
    *idx_out = m->slots[s] - 1;
    return true;
}

static int grow_slots(rc_map_t *m)
{
    size_t cap = m->slots_cap * 2;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return HF_ERR_NOMEM;
    for (size_t i = 0; i < m->count; i++) {
        size_t s = m->hash[i] & (cap - 1);
        while (slots[s])
            s = (s + 1) & (cap - 1);
        slots[s] = (uint32_t)i + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->slots_cap = cap;
    return HF_OK;
}

static int grow(void **p, size_t elem, size_t cap)
{
    void *q = realloc(*p, elem * cap);
    if (!q)
        return HF_ERR_NOMEM;
    *p = q;
    return HF_OK;
}

/* The next capacity: half again, at least RC_MAP_INITIAL, at most max. */
static size_t next_cap(size_t cap, size_t max)
{
    size_t next = cap ? cap + cap / 2 : RC_MAP_INITIAL;
    return next > max ? max : next;
}

static int grow_entries(rc_map_t *m)
{
    size_t cap = next_cap(m->cap, m->max);
    int err = grow((void **)&m->key_off, sizeof *m->key_off, cap);
    if (!err)
        err = grow((void **)&m->key_len, sizeof *m->key_len, cap);
    if (!err)
        err = grow((void **)&m->hash, sizeof *m->hash, cap);
    if (!err)
        err = grow((void **)&m->vals, m->val_size, cap);
    if (!err)
        m->cap = cap;
    return err;
}

static int add_key_bytes(rc_map_t *m, const char *key, size_t len)
{
    if (m->keys_len + len > m->keys_cap) {
        size_t cap = m->keys_cap ? m->keys_cap + m->keys_cap / 2 : 4096;
        while (cap < m->keys_len + len)
            cap += cap / 2;
        int err = grow((void **)&m->keys, 1, cap);
        if (err)
            return err;
        m->keys_cap = cap;
    }
    memcpy(m->keys + m->keys_len, key, len);
    m->keys_len += len;
    return HF_OK;
}

int rc_map_upsert(rc_map_t *m, const char *key, size_t len, uint32_t *idx_out, bool *added)
{
    if (len > RC_KEY_LEN_MAX)
        return HF_ERR_LIMIT;
    uint32_t h = fnv1a(key, len);
    size_t s = probe(m, key, len, h);
    if (added)
        *added = m->slots[s] == 0;
    if (m->slots[s]) {
        *idx_out = m->slots[s] - 1;
        return HF_OK;
    }
    if (m->count >= m->max || m->count >= UINT32_MAX - 1)
        return HF_ERR_LIMIT;
    int err = m->count == m->cap ? grow_entries(m) : HF_OK;
    if (!err)
        err = add_key_bytes(m, key, len);
    if (err)
        return err;
    size_t i = m->count++;
    m->key_off[i] = m->keys_len - len;
    m->key_len[i] = (uint16_t)len;
    m->hash[i] = h;
    memset(m->vals + i * m->val_size, 0, m->val_size);
    m->slots[s] = (uint32_t)i + 1;
    *idx_out = (uint32_t)i;
    return m->count * 2 > m->slots_cap ? grow_slots(m) : HF_OK;
}

void *rc_map_val(const rc_map_t *m, uint32_t idx)
{
    return m->vals + (size_t)idx * m->val_size;
}

const char *rc_map_key(const rc_map_t *m, uint32_t idx, size_t *len)
{
    *len = m->key_len[idx];
    return m->keys + m->key_off[idx];
}

size_t rc_map_bytes(const rc_map_t *m)
{
    size_t per_entry = sizeof *m->key_off + sizeof *m->key_len + sizeof *m->hash + m->val_size;
    return m->slots_cap * sizeof *m->slots + m->keys_cap + m->cap * per_entry;
}

/* ---- rc_vec */

void rc_vec_init(rc_vec_t *v, size_t val_size, size_t max)
{
    memset(v, 0, sizeof *v);
    v->val_size = val_size;
    v->max = max;
}

void rc_vec_free(rc_vec_t *v)
{
    free(v->vals);
    v->vals = NULL;
    v->count = v->cap = 0;
}

int rc_vec_push(rc_vec_t *v, uint32_t *idx_out)
{
    if (v->count >= v->max || v->count >= UINT32_MAX - 1)
        return HF_ERR_LIMIT;
    if (v->count == v->cap) {
        size_t cap = next_cap(v->cap, v->max);
        int err = grow((void **)&v->vals, v->val_size, cap);
        if (err)
            return err;
        v->cap = cap;
    }
    memset(v->vals + v->count * v->val_size, 0, v->val_size);
    *idx_out = (uint32_t)v->count++;
    return HF_OK;
}

void *rc_vec_at(const rc_vec_t *v, uint32_t idx)
{
    hf_assert(idx < v->count);
    return v->vals + (size_t)idx * v->val_size;
}

size_t rc_vec_bytes(const rc_vec_t *v)
{
    return v->cap * v->val_size;
}
