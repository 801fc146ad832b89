/* Unit tests of state/state_load.h, the bulk load of a full restore: runs of
 * records sealed with the offsets they bring the partition to, sorted (the last
 * put of a key wins, tombstones delete) and written on a worker thread while the
 * next run fills, then ingested as one table file each. Proves, against
 * in-memory models and qsort-sorted references: what the DB holds after many
 * small pipelined runs (prefix keys, empty values, tombstones, keys and values at
 * their bounds) and across a reopen; that keys already in the DB are overwritten
 * or deleted and other partitions are not touched; that nothing of a run shows
 * before its ingest; the order and content state_load_foreach shows; the offsets
 * each ingest stores; the run's bound; leftover table files (also with two
 * partitions loading into one DB); and the sort on 200,000 keys with long common
 * prefixes and on degenerate shapes. Each test opens a fresh RocksDB in a
 * temporary directory under /tmp; seeds are fixed (HF_TEST_SEED overrides). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf_limits.h"
#include "state.h"
#include "state_load.h"

/* The smallest run state_load_new accepts: two records of the largest size,
 * each with its 6 bytes of framing. */
#define RUN_BYTES_MIN ((size_t)STATE_LOAD_RUN_BYTES_MIN)
enum { RUN_FRAME = 6 };

typedef struct {
    char dir[64];
    state_t *st;
} fixture_t;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int setup(void **ctx)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/hf_test_state_load.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char errstr[256] = "";
    int err = state_open(f->dir, NULL, &f->st, errstr, sizeof(errstr));
    if (err != HF_OK)
        fail_msg("state_open: %s", errstr);
    *ctx = f;
    return 0;
}

static int teardown(void **ctx)
{
    fixture_t *f = *ctx;
    state_close(f->st);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void reopen(fixture_t *f)
{
    char errstr[256] = "";
    state_close(f->st);
    f->st = NULL;
    if (state_open(f->dir, NULL, &f->st, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("state_open again: %s", errstr);
}

/* ---- helpers */

static uint64_t rng;

static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t rnd_below(size_t n)
{
    return (size_t)(rnd() % n);
}

static void seed(uint64_t fixed)
{
    const char *env = getenv("HF_TEST_SEED");
    rng = env ? strtoull(env, NULL, 0) : fixed;
    print_message("seed %llu (HF_TEST_SEED)\n", (unsigned long long)rng);
}

/* Bytewise, a shorter key first (RocksDB's default comparator). */
static int key_cmp(const void *a, size_t a_len, const void *b, size_t b_len)
{
    size_t n = a_len < b_len ? a_len : b_len;
    int c = n ? memcmp(a, b, n) : 0;
    return c != 0 ? c : (a_len > b_len) - (a_len < b_len);
}

static state_load_t *load_new(state_t *st, int32_t p, size_t run_bytes_max)
{
    char errstr[256] = "";
    state_load_t *l = NULL;
    int err = state_load_new(st, p, run_bytes_max, &l, errstr, sizeof(errstr));
    if (err != HF_OK)
        fail_msg("state_load_new: %s (%s)", hf_err_str(err), errstr);
    assert_non_null(l);
    return l;
}

static void seal(state_load_t *l, int64_t in, int64_t cl, int64_t at)
{
    assert_false(state_load_has_sealed(l));
    assert_int_equal(state_load_seal(l, in, cl, at), HF_OK);
    assert_true(state_load_has_sealed(l));
    assert_int_equal(state_load_run_records(l), 0); /* the next run is empty */
}

static void wait_sealed(state_load_t *l)
{
    char errstr[256] = "";
    int err = state_load_wait(l, errstr, sizeof(errstr));
    if (err != HF_OK)
        fail_msg("state_load_wait: %s (%s)", hf_err_str(err), errstr);
}

static void ingest_sealed(state_load_t *l)
{
    char errstr[256] = "";
    int err = state_load_ingest(l, errstr, sizeof(errstr));
    if (err != HF_OK)
        fail_msg("state_load_ingest: %s (%s)", hf_err_str(err), errstr);
    assert_false(state_load_has_sealed(l));
}

/* The filling run, sealed, written and ingested at once. */
static void ingest(state_load_t *l, int64_t in, int64_t cl, int64_t at)
{
    seal(l, in, cl, at);
    wait_sealed(l);
    ingest_sealed(l);
}

static void lput(state_load_t *l, const char *k, const char *v)
{
    assert_int_equal(state_load_put(l, k, strlen(k), v, v ? strlen(v) : 0), HF_OK);
}

static void put(state_buf_t *buf, int32_t p, const char *k, const char *v)
{
    assert_int_equal(state_put(buf, p, k, strlen(k), v, strlen(v)), HF_OK);
}

static void write_buf(state_t *st, state_buf_t *buf)
{
    char errstr[256] = "";
    if (state_buf_write(st, buf, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("state_buf_write: %s", errstr);
}

/* Value of k as a C string, or "<none>" (read from the DB: buf NULL). */
static const char *get(state_t *st, int32_t p, const char *k)
{
    static char out[512];
    size_t n = 0;
    int err = state_get(st, NULL, p, k, strlen(k), out, sizeof(out) - 1, &n);
    if (err == HF_ERR_NOTFOUND)
        return "<none>";
    assert_int_equal(err, HF_OK);
    out[n] = '\0';
    return out;
}

/* "k=v,k=v" of a whole partition (text keys and values). */
static const char *scan(state_t *st, int32_t p)
{
    static char out[4096];
    size_t at = 0;
    out[0] = '\0';
    state_iter_t *it = state_iter_new(st, NULL, p, NULL, 0, false);
    assert_non_null(it);
    const void *k, *v;
    size_t kl, vl;
    while (state_iter_next(it, &k, &kl, &v, &vl)) {
        int w = snprintf(out + at, sizeof(out) - at, "%s%.*s=%.*s", at ? "," : "", (int)kl,
                         (const char *)k, (int)vl, (const char *)v);
        assert_true(w > 0 && (size_t)w < sizeof(out) - at);
        at += (size_t)w;
    }
    state_iter_destroy(it);
    return out;
}

static void check_offsets(state_t *st, int32_t p, int64_t in, int64_t cl, int64_t at)
{
    int64_t got_in = 0, got_cl = 0, got_at = 0;
    assert_int_equal(state_get_offsets(st, p, &got_in, &got_cl, &got_at), HF_OK);
    assert_true(got_in == in);
    assert_true(got_cl == cl);
    assert_true(got_at == at);
}

/* .sst files in <dir>/bulk-load (-1 if the directory is missing). */
static int bulk_sst_files(const char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/bulk-load", dir);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        n += len > 4 && strcmp(e->d_name + len - 4, ".sst") == 0;
    }
    closedir(d);
    return n;
}

/* ---- a run against a qsort-sorted reference */

typedef struct {
    const uint8_t *key;
    size_t key_len;
    const uint8_t *val; /* NULL: a tombstone */
    size_t val_len;
    size_t seq; /* put order */
} rec_t;

static int rec_cmp(const void *a, const void *b)
{
    const rec_t *x = a, *y = b;
    int c = key_cmp(x->key, x->key_len, y->key, y->key_len);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Sorts recs (the records of a run, in put order) and keeps each key's last. */
static size_t reference(rec_t *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        recs[i].seq = i;
    qsort(recs, n, sizeof(*recs), rec_cmp);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n &&
            key_cmp(recs[i].key, recs[i].key_len, recs[i + 1].key, recs[i + 1].key_len) == 0)
            continue;
        recs[kept++] = recs[i];
    }
    return kept;
}

/* Bytes as hex, for failure messages; out holds 2 * len + 1. */
static const char *hex(char *out, const void *b, size_t len)
{
    for (size_t i = 0; i < len; i++)
        sprintf(out + 2 * i, "%02x", ((const uint8_t *)b)[i]);
    out[2 * len] = '\0';
    return out;
}

typedef struct {
    const rec_t *want;
    size_t n, at;
    int stop_at; /* >= 0: return 7 at this visit */
    uint8_t prev[HF_STATE_KEY_LEN_MAX];
    size_t prev_len;
} each_ctx_t;

static int each_check(void *opaque, const void *key, size_t key_len, const void *val,
                      size_t val_len)
{
    each_ctx_t *c = opaque;
    if (c->at >= c->n)
        fail_msg("foreach: more than the %zu keys of the run", c->n);
    if (c->at > 0 && key_cmp(c->prev, c->prev_len, key, key_len) >= 0)
        fail_msg("foreach: key %zu is not above the one before it", c->at);
    const rec_t *w = &c->want[c->at];
    if (key_len != w->key_len || memcmp(key, w->key, key_len) != 0) {
        char got[2 * HF_STATE_KEY_LEN_MAX + 1], exp[2 * HF_STATE_KEY_LEN_MAX + 1];
        fail_msg("foreach: key %zu of %zu is %s (len %zu), the reference's %s (len %zu)", c->at,
                 c->n, hex(got, key, key_len), key_len, hex(exp, w->key, w->key_len), w->key_len);
    }
    if (w->val == NULL && val != NULL)
        fail_msg("foreach: key %zu: a value where a tombstone was put last", c->at);
    else if (w->val != NULL && val == NULL)
        fail_msg("foreach: key %zu: a tombstone where a value was put last", c->at);
    else if (w->val != NULL &&
             (val_len != w->val_len || (val_len > 0 && memcmp(val, w->val, val_len) != 0)))
        fail_msg("foreach: key %zu: value of %zu bytes is not the last put (%zu bytes)", c->at,
                 val_len, w->val_len);
    assert_true(key_len <= sizeof(c->prev));
    memcpy(c->prev, key, key_len);
    c->prev_len = key_len;
    bool stop = c->stop_at >= 0 && (size_t)c->stop_at == c->at;
    c->at++;
    return stop ? 7 : 0;
}

/* The sealed run of l shows exactly want[0..n), in that order. */
static void check_foreach(state_load_t *l, const rec_t *want, size_t n)
{
    each_ctx_t *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    *c = (each_ctx_t){.want = want, .n = n, .stop_at = -1};
    assert_int_equal(state_load_foreach(l, each_check, c), HF_OK);
    assert_int_equal(c->at, n);
    free(c);
}

/* Puts recs into l, seals and waits, and checks foreach against the
 * reference; recs becomes the reference, whose length is returned. */
static size_t put_sort_check(state_load_t *l, rec_t *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(
            state_load_put(l, recs[i].key, recs[i].key_len, recs[i].val, recs[i].val_len), HF_OK);
    assert_int_equal(state_load_run_records(l), n);
    seal(l, 1, 2, 3);
    wait_sealed(l);
    size_t kept = reference(recs, n);
    check_foreach(l, recs, kept);
    return kept;
}

/* ---- 1, 2 and 7: many small runs against a model */

enum {
    R_KEYS_MAX = 96,
    R_PART = 5, /* loaded; 4 and 6 hold the same keys and must not change */
    R_RUNS = 40,
};

typedef struct {
    uint8_t b[HF_STATE_KEY_LEN_MAX];
    size_t len;
} r_key_t;

typedef struct {
    bool has;
    size_t len;
    uint8_t *v; /* HF_RECORD_LEN_MAX bytes */
} r_val_t;

typedef struct {
    r_key_t keys[R_KEYS_MAX]; /* sorted, distinct */
    size_t nkeys;
    r_val_t db[R_KEYS_MAX]; /* what the DB should hold in R_PART */
    /* Two runs, the filling one and the sealed one: 0 absent, 1 put, 2 tombstone. */
    int pend[2][R_KEYS_MAX];
    r_val_t pend_val[2][R_KEYS_MAX];
    r_val_t side[2][R_KEYS_MAX]; /* partitions R_PART - 1 and R_PART + 1 */
    uint8_t *out;                /* a read buffer */
} r_model_t;

static int r_key_cmp(const void *a, const void *b)
{
    const r_key_t *x = a, *y = b;
    return key_cmp(x->b, x->len, y->b, y->len);
}

static void r_key_add(r_model_t *m, const void *b, size_t len)
{
    assert_true(m->nkeys < R_KEYS_MAX && len > 0 && len <= HF_STATE_KEY_LEN_MAX);
    memcpy(m->keys[m->nkeys].b, b, len);
    m->keys[m->nkeys++].len = len;
}

/* Keys that share prefixes, are prefixes of each other ("K", "Ka", "Kab"),
 * differ in a 0x00 or 0xFF byte, or only in their last byte at the longest
 * length. */
static void r_keys_init(r_model_t *m)
{
    static const char *const text[] = {"K",  "Ka",  "Kab", "Kabc", "Kaa", "Kb", "L",
                                       "La", "Lab", "~",   "A",    "Ab",  "K0", "Kz"};
    for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
        r_key_add(m, text[i], strlen(text[i]));
    r_key_add(m, "Ka\x00", 3);
    r_key_add(m, "Ka\x00\x00", 4);
    r_key_add(m, "Ka\x01", 3);
    r_key_add(m, "Ka\xff", 3);
    r_key_add(m, "Ka\xff\xff", 4);
    r_key_add(m, "K\x80", 2);
    uint8_t k[HF_STATE_KEY_LEN_MAX];
    static const size_t lens[] = {64, 200, 255, 256};
    for (size_t i = 0; i < 4; i++) {
        memset(k, 'a', sizeof(k));
        k[0] = 'K';
        r_key_add(m, k, lens[i]);
    }
    memset(k, 'a', sizeof(k));
    k[0] = 'K';
    k[255] = 0x00;
    r_key_add(m, k, 256);
    k[255] = 0xff;
    r_key_add(m, k, 256);
    k[255] = 'b';
    r_key_add(m, k, 256);
    k[254] = 'b';
    r_key_add(m, k, 255);
    memset(k, 0xff, sizeof(k));
    k[0] = 'K';
    r_key_add(m, k, 256);
    static const char *const prefixes[] = {"K", "Ka", "Kab", "L"};
    static const uint8_t alphabet[] = {0x00, 'a', 'b', 0xff};
    while (m->nkeys < 64) {
        const char *pre = prefixes[rnd_below(4)];
        size_t plen = strlen(pre);
        size_t len =
            plen + (rnd_below(4) == 0 ? rnd_below(HF_STATE_KEY_LEN_MAX - plen + 1) : rnd_below(6));
        memcpy(k, pre, plen);
        for (size_t i = plen; i < len; i++)
            k[i] = alphabet[rnd_below(4)];
        r_key_add(m, k, len);
    }
    qsort(m->keys, m->nkeys, sizeof(m->keys[0]), r_key_cmp);
    size_t kept = 0;
    for (size_t i = 0; i < m->nkeys; i++)
        if (kept == 0 || r_key_cmp(&m->keys[kept - 1], &m->keys[i]) != 0)
            m->keys[kept++] = m->keys[i];
    m->nkeys = kept;
}

static r_model_t *r_model_new(void)
{
    r_model_t *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    for (size_t k = 0; k < R_KEYS_MAX; k++) {
        m->db[k].v = malloc(HF_RECORD_LEN_MAX);
        m->pend_val[0][k].v = malloc(HF_RECORD_LEN_MAX);
        m->pend_val[1][k].v = malloc(HF_RECORD_LEN_MAX);
        m->side[0][k].v = malloc(64);
        m->side[1][k].v = malloc(64);
        assert_true(m->db[k].v && m->pend_val[0][k].v && m->pend_val[1][k].v && m->side[0][k].v &&
                    m->side[1][k].v);
    }
    m->out = malloc(HF_RECORD_LEN_MAX);
    assert_non_null(m->out);
    r_keys_init(m);
    return m;
}

static void r_model_free(r_model_t *m)
{
    for (size_t k = 0; k < R_KEYS_MAX; k++) {
        free(m->db[k].v);
        free(m->pend_val[0][k].v);
        free(m->pend_val[1][k].v);
        free(m->side[0][k].v);
        free(m->side[1][k].v);
    }
    free(m->out);
    free(m);
}

/* A value's length: empty, short, medium or up to the largest. */
static size_t r_val_len(bool small_only)
{
    size_t r = rnd_below(100);
    if (r < 15)
        return 0;
    if (r < 55 || small_only)
        return 1 + rnd_below(16);
    if (r < 88)
        return rnd_below(2000);
    return r < 92 ? HF_RECORD_LEN_MAX : rnd_below(HF_RECORD_LEN_MAX + 1);
}

static void r_fill(r_val_t *v, size_t len)
{
    v->has = true;
    v->len = len;
    for (size_t i = 0; i < len; i++)
        v->v[i] = (uint8_t)rnd();
}

/* Reads key k of partition p (buf NULL) and compares it with want. */
static void r_check_get(state_t *st, r_model_t *m, int32_t p, size_t k, const r_val_t *want)
{
    size_t n = 12345;
    int err = state_get(st, NULL, p, m->keys[k].b, m->keys[k].len, m->out, HF_RECORD_LEN_MAX, &n);
    if (!want->has) {
        if (err != HF_ERR_NOTFOUND)
            fail_msg("partition %d key %zu (len %zu): %s, expected not found", p, k, m->keys[k].len,
                     hf_err_str(err));
        return;
    }
    if (err != HF_OK)
        fail_msg("partition %d key %zu (len %zu): %s, expected %zu bytes", p, k, m->keys[k].len,
                 hf_err_str(err), want->len);
    if (n != want->len || (n > 0 && memcmp(m->out, want->v, n) != 0))
        fail_msg("partition %d key %zu (len %zu): %zu bytes, not the model's %zu", p, k,
                 m->keys[k].len, n, want->len);
}

/* A full scan of p yields exactly want's live keys, in order. */
static void r_check_iter(state_t *st, r_model_t *m, int32_t p, const r_val_t *want)
{
    state_iter_t *it = state_iter_new(st, NULL, p, NULL, 0, false);
    assert_non_null(it);
    const void *k, *v;
    size_t kl, vl;
    for (size_t i = 0; i < m->nkeys; i++) {
        if (!want[i].has)
            continue;
        if (!state_iter_next(it, &k, &kl, &v, &vl))
            fail_msg("partition %d: the scan ends before key %zu", p, i);
        if (kl != m->keys[i].len || memcmp(k, m->keys[i].b, kl) != 0)
            fail_msg("partition %d: the scan has another key where key %zu is expected", p, i);
        if (vl != want[i].len || (vl > 0 && memcmp(v, want[i].v, vl) != 0))
            fail_msg("partition %d: key %zu scanned with another value", p, i);
    }
    if (state_iter_next(it, &k, &kl, &v, &vl))
        fail_msg("partition %d: the scan has a key the model does not (len %zu)", p, kl);
    state_iter_destroy(it);
}

static void r_check_all(state_t *st, r_model_t *m)
{
    for (size_t k = 0; k < m->nkeys; k++) {
        r_check_get(st, m, R_PART, k, &m->db[k]);
        r_check_get(st, m, R_PART - 1, k, &m->side[0][k]);
        r_check_get(st, m, R_PART + 1, k, &m->side[1][k]);
    }
    r_check_iter(st, m, R_PART, m->db);
    r_check_iter(st, m, R_PART - 1, m->side[0]);
    r_check_iter(st, m, R_PART + 1, m->side[1]);
}

/* Writes (or deletes) key k of partition p directly, as a stage's own writes
 * between runs do; want follows. */
static void r_direct(state_t *st, state_buf_t *buf, r_model_t *m, int32_t p, size_t k,
                     r_val_t *want)
{
    if (rnd_below(4) == 0) {
        assert_int_equal(state_del(buf, p, m->keys[k].b, m->keys[k].len), HF_OK);
        want->has = false;
    } else {
        r_fill(want, rnd_below(p == R_PART ? 300 : 64));
        assert_int_equal(state_put(buf, p, m->keys[k].b, m->keys[k].len, want->v, want->len),
                         HF_OK);
    }
    write_buf(st, buf);
}

/* Before the load: some keys of R_PART and of its neighbours in the DB. */
static void r_populate(state_t *st, state_buf_t *buf, r_model_t *m)
{
    for (size_t k = 0; k < m->nkeys; k++) {
        if (rnd_below(2) == 0)
            r_direct(st, buf, m, R_PART, k, &m->db[k]);
        r_direct(st, buf, m, R_PART - 1, k, &m->side[0][k]);
        if (rnd_below(3) != 0)
            r_direct(st, buf, m, R_PART + 1, k, &m->side[1][k]);
    }
    assert_int_equal(state_buf_set_offsets(buf, R_PART - 1, 41, 42, 43), HF_OK);
    assert_int_equal(state_buf_set_offsets(buf, R_PART + 1, 61, 62, 63), HF_OK);
    write_buf(st, buf);
}

/* Run ri's records as foreach should show them: the model's keys in order. */
static size_t r_pending(const r_model_t *m, int ri, rec_t *out)
{
    size_t n = 0;
    for (size_t k = 0; k < m->nkeys; k++) {
        if (m->pend[ri][k] == 0)
            continue;
        out[n++] =
            (rec_t){m->keys[k].b, m->keys[k].len, m->pend[ri][k] == 1 ? m->pend_val[ri][k].v : NULL,
                    m->pend_val[ri][k].len, 0};
    }
    return n;
}

typedef struct {
    state_t *st;
    const char *dir;
    state_load_t *l;
    r_model_t *m;
    int fill;    /* the model's filling run; 1 - fill is the sealed one */
    bool sealed; /* a run is sealed */
    int64_t off[3];
    uint64_t files, keys;
    size_t foreach_checked;
} r_load_t;

/* As task.c does when a run is full: the sealed run (if any) is waited for,
 * shown, and ingested. */
static void r_finish_sealed(r_load_t *r)
{
    r_model_t *m = r->m;
    if (!r->sealed) {
        assert_false(state_load_has_sealed(r->l));
        return;
    }
    int s = 1 - r->fill;
    wait_sealed(r->l);
    assert_int_equal(bulk_sst_files(r->dir), 1);
    if (rnd_below(4) != 0) {
        rec_t want[R_KEYS_MAX];
        check_foreach(r->l, want, r_pending(m, s, want));
        r->foreach_checked++;
    }
    /* Written, not ingested: still nothing of it in the DB. */
    r_check_iter(r->st, m, R_PART, m->db);
    ingest_sealed(r->l);
    r->sealed = false;
    for (size_t k = 0; k < m->nkeys; k++) {
        if (m->pend[s][k] == 1) {
            memcpy(m->db[k].v, m->pend_val[s][k].v, m->pend_val[s][k].len);
            m->db[k].len = m->pend_val[s][k].len;
            m->db[k].has = true;
        } else if (m->pend[s][k] == 2) {
            m->db[k].has = false;
        }
        r->keys += m->pend[s][k] != 0;
        m->pend[s][k] = 0;
    }
    r->files++;
    check_offsets(r->st, R_PART, r->off[0], r->off[1], r->off[2]);
    assert_int_equal(state_load_files(r->l), r->files);
    assert_int_equal(state_load_keys(r->l), r->keys);
    r_check_all(r->st, m);
}

/* Ends the filling run: the sealed one is finished first, then this one is
 * sealed with its offsets. */
static void r_run_end(r_load_t *r, int run, size_t records)
{
    r_finish_sealed(r);
    r->off[0] = rnd_below(3) == 0 ? -1 : (int64_t)rnd_below(1u << 20);
    r->off[1] = 1000 + run * 100 + (int64_t)records;
    r->off[2] = rnd_below(5) == 0 ? -1 : 1700000000000ll + run;
    seal(r->l, r->off[0], r->off[1], r->off[2]);
    r->sealed = true;
    r->fill = 1 - r->fill;
}

static void test_many_small_runs_match_a_model(void **ctx)
{
    fixture_t *f = *ctx;
    seed(0x10ADull);
    r_model_t *m = r_model_new();
    state_buf_t *buf = state_buf_new(f->st);
    r_populate(f->st, buf, m);
    r_check_all(f->st, m);
    r_load_t r = {.st = f->st, .dir = f->dir, .l = load_new(f->st, R_PART, RUN_BYTES_MIN), .m = m};
    size_t records_total = 0, tombstones = 0, empties = 0, largest = 0, direct_in_run = 0;
    for (int run = 0; run < R_RUNS; run++) {
        /* Most runs go until full; some end early (a changelog's end), even empty. */
        size_t cap = rnd_below(8) == 0 ? rnd_below(4) : SIZE_MAX;
        bool small_only = rnd_below(4) == 0;
        size_t records = 0;
        int fi = r.fill;
        while (records < cap && !state_load_run_full(r.l)) {
            size_t k = rnd_below(m->nkeys);
            if (rnd_below(4) == 0) {
                assert_int_equal(state_load_put(r.l, m->keys[k].b, m->keys[k].len, NULL, 0), HF_OK);
                m->pend[fi][k] = 2;
                tombstones++;
            } else {
                r_val_t *v = &m->pend_val[fi][k];
                r_fill(v, r_val_len(small_only));
                assert_int_equal(state_load_put(r.l, m->keys[k].b, m->keys[k].len, v->v, v->len),
                                 HF_OK);
                m->pend[fi][k] = 1;
                empties += v->len == 0;
                largest += v->len == HF_RECORD_LEN_MAX;
            }
            records++;
            /* Neither the filling run nor the sealed one shows yet. */
            r_check_get(f->st, m, R_PART, k, &m->db[k]);
            if (rnd_below(40) == 0) {
                /* The DB is written meanwhile (a stage's reindex): a run holding
                 * the key overrides this write at its ingest. */
                size_t d = rnd_below(m->nkeys);
                direct_in_run += m->pend[0][d] != 0 || m->pend[1][d] != 0;
                r_direct(f->st, buf, m, R_PART, d, &m->db[d]);
            }
        }
        records_total += records;
        assert_int_equal(state_load_run_records(r.l), records);
        r_run_end(&r, run, records);
    }
    r_finish_sealed(&r);
    assert_int_equal(state_load_files(r.l), R_RUNS);
    state_load_destroy(r.l);
    assert_int_equal(bulk_sst_files(f->dir), 0);
    print_message("%d runs, %zu records (%zu tombstones, %zu empty, %zu of %d bytes), %d keys, "
                  "%zu writes of a key in a run before its ingest, %zu runs' foreach checked\n",
                  R_RUNS, records_total, tombstones, empties, largest, HF_RECORD_LEN_MAX,
                  (int)m->nkeys, direct_in_run, r.foreach_checked);
    /* Enough of each kind for the test to mean something. */
    assert_true(records_total > (size_t)R_RUNS * 10 && tombstones > 100 && empties > 50 &&
                largest > 5 && direct_in_run > 3);
    check_offsets(f->st, R_PART - 1, 41, 42, 43);
    check_offsets(f->st, R_PART + 1, 61, 62, 63);
    /* 7: the ingested files are the DB's. */
    state_buf_destroy(buf);
    reopen(f);
    r_check_all(f->st, m);
    check_offsets(f->st, R_PART, r.off[0], r.off[1], r.off[2]);
    r_model_free(m);
}

/* ---- 2: keys in the DB before the load */

static void test_load_overwrites_and_deletes_keys_already_in_the_db(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    for (int32_t p = 1; p <= 3; p++) {
        put(buf, p, "a", "old-a");
        put(buf, p, "b", "old-b");
        put(buf, p, "c", "old-c");
        put(buf, p, "d", "old-d");
        assert_int_equal(state_buf_set_offsets(buf, p, 10 * p, 20 * p, 30 * p), HF_OK);
    }
    write_buf(f->st, buf);
    assert_int_equal(bulk_sst_files(f->dir), -1);
    state_load_t *l = load_new(f->st, 2, RUN_BYTES_MIN);
    assert_int_equal(bulk_sst_files(f->dir), 0); /* it makes its directory */
    lput(l, "a", "new-a");
    lput(l, "b", NULL);
    lput(l, "e", "new-e");
    lput(l, "c", NULL);
    lput(l, "c", "back-c"); /* a tombstone then a value: the value */
    lput(l, "d", "gone");
    lput(l, "d", NULL); /* a value then a tombstone: deleted */
    lput(l, "f", NULL); /* a tombstone for a key that never was */
    /* Not visible while filling, sealed, or written and waiting for its ingest;
     * nor is the next run, filling meanwhile. */
    assert_string_equal(scan(f->st, 2), "a=old-a,b=old-b,c=old-c,d=old-d");
    seal(l, 7, 8, 9);
    lput(l, "e", NULL);
    lput(l, "b", "again-b");
    assert_string_equal(scan(f->st, 2), "a=old-a,b=old-b,c=old-c,d=old-d");
    wait_sealed(l);
    assert_string_equal(scan(f->st, 2), "a=old-a,b=old-b,c=old-c,d=old-d");
    check_offsets(f->st, 2, 20, 40, 60);
    ingest_sealed(l);
    assert_int_equal(state_load_run_records(l), 2); /* the filling run is kept */
    assert_string_equal(scan(f->st, 2), "a=new-a,c=back-c,e=new-e");
    assert_string_equal(get(f->st, 2, "b"), "<none>");
    assert_string_equal(get(f->st, 2, "d"), "<none>");
    assert_string_equal(get(f->st, 2, "f"), "<none>");
    check_offsets(f->st, 2, 7, 8, 9);
    /* The second run over the first: keys of the first it does not name stay. */
    ingest(l, 11, 12, 13);
    assert_string_equal(scan(f->st, 2), "a=new-a,b=again-b,c=back-c");
    /* The neighbours, on both sides of the loaded partition's range. */
    for (int32_t p = 1; p <= 3; p += 2) {
        assert_string_equal(scan(f->st, p), "a=old-a,b=old-b,c=old-c,d=old-d");
        check_offsets(f->st, p, 10 * p, 20 * p, 30 * p);
    }
    state_load_destroy(l);
    /* Writes after the load land over it as usual. */
    put(buf, 2, "a", "later");
    write_buf(f->st, buf);
    assert_string_equal(get(f->st, 2, "a"), "later");
    state_buf_destroy(buf);
}

/* A full restore drops the partition first (task.c): the load comes after
 * the range delete, and survives a reopen. */
static void test_load_after_a_partition_drop_survives_reopen(void **ctx)
{
    fixture_t *f = *ctx;
    char errstr[256] = "";
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 0, "a", "p0");
    put(buf, 1, "a", "stale");
    put(buf, 1, "z", "stale");
    put(buf, 2, "a", "p2");
    assert_int_equal(state_buf_set_offsets(buf, 1, 1, 2, 3), HF_OK);
    write_buf(f->st, buf);
    if (state_drop_partition(f->st, 1, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("drop: %s", errstr);
    state_load_t *l = load_new(f->st, 1, RUN_BYTES_MIN);
    lput(l, "a", "loaded");
    lput(l, "b", "");
    ingest(l, 5, 6, 7);
    lput(l, "c", "second");
    ingest(l, 5, 8, 7);
    state_load_destroy(l);
    assert_string_equal(scan(f->st, 1), "a=loaded,b=,c=second");
    reopen(f);
    assert_string_equal(scan(f->st, 0), "a=p0");
    assert_string_equal(scan(f->st, 1), "a=loaded,b=,c=second");
    assert_string_equal(scan(f->st, 2), "a=p2");
    check_offsets(f->st, 1, 5, 8, 7);
    /* A new load after the reopen (its file names begin again). */
    l = load_new(f->st, 1, RUN_BYTES_MIN);
    lput(l, "a", NULL);
    lput(l, "d", "third");
    ingest(l, 5, 9, 7);
    state_load_destroy(l);
    reopen(f);
    assert_string_equal(scan(f->st, 1), "b=,c=second,d=third");
    check_offsets(f->st, 1, 5, 9, 7);
    state_buf_destroy(buf);
}

/* Two partitions loaded at once into one DB (main.c runs threads_per_stage
 * task threads on one DB per stage, each restoring its own partitions): one
 * load's start must not take the other's table files, sealed and waiting for
 * their ingest. Interleaved here on one thread, in the order two threads may
 * take. */
static void test_two_partitions_load_side_by_side(void **ctx)
{
    fixture_t *f = *ctx;
    state_load_t *a = load_new(f->st, 3, RUN_BYTES_MIN);
    lput(a, "k", "a1");
    seal(a, 1, 10, 100);
    wait_sealed(a);
    lput(a, "k", "a2");                                  /* the next run of a fills */
    state_load_t *b = load_new(f->st, 4, RUN_BYTES_MIN); /* while a's file waits */
    lput(b, "k", "b1");
    seal(b, 2, 20, 200);
    ingest_sealed(a);
    wait_sealed(b);
    ingest_sealed(b);
    ingest(a, 3, 30, 300);
    lput(b, "j", "b2");
    ingest(b, 4, 40, 400);
    state_load_destroy(a);
    state_load_destroy(b);
    assert_string_equal(scan(f->st, 3), "k=a2");
    assert_string_equal(scan(f->st, 4), "j=b2,k=b1");
    check_offsets(f->st, 3, 3, 30, 300);
    check_offsets(f->st, 4, 4, 40, 400);
    assert_int_equal(bulk_sst_files(f->dir), 0);
}

/* ---- 3: foreach against a qsort-sorted reference */

static void test_foreach_shows_each_key_once_in_order_with_its_last_record(void **ctx)
{
    fixture_t *f = *ctx;
    seed(0xF0EAull);
    enum { N = 4000 };
    static uint8_t keys[N][8], vals[N][24];
    static rec_t recs[N];
    static const uint8_t alphabet[] = {0x00, 'a', 'b', 0x7f, 0x80, 0xff};
    for (size_t i = 0; i < N; i++) {
        /* Up to 7 bytes from 6 symbols after one of 3 tags: duplicates, and
         * keys that are prefixes of others. */
        size_t len = 1 + rnd_below(rnd_below(2) ? 3 : 8);
        keys[i][0] = "KLk"[rnd_below(3)];
        for (size_t j = 1; j < len; j++)
            keys[i][j] = alphabet[rnd_below(sizeof(alphabet))];
        size_t vlen = rnd_below(sizeof(vals[i]) + 1);
        for (size_t j = 0; j < vlen; j++)
            vals[i][j] = (uint8_t)rnd();
        recs[i] = (rec_t){keys[i], len, rnd_below(5) == 0 ? NULL : vals[i], vlen, 0};
    }
    state_load_t *l = load_new(f->st, 0, 1 << 20);
    size_t kept = put_sort_check(l, recs, N);
    assert_true(kept > 100 && kept < N);
    /* A non-zero return stops the walk and is returned. */
    each_ctx_t c = {.want = recs, .n = kept, .stop_at = 2};
    assert_int_equal(state_load_foreach(l, each_check, &c), 7);
    assert_int_equal(c.at, 3);
    state_load_destroy(l);
    /* A run of nothing shows nothing. */
    l = load_new(f->st, 0, RUN_BYTES_MIN);
    seal(l, -1, -1, -1);
    wait_sealed(l);
    check_foreach(l, NULL, 0);
    state_load_destroy(l);
}

/* ---- 4: offsets */

static void test_each_ingest_stores_the_offsets_it_was_given(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    assert_int_equal(state_buf_set_offsets(buf, 9, 1, 2, 3), HF_OK);
    assert_int_equal(state_buf_set_offsets(buf, 8, 81, 82, 83), HF_OK);
    write_buf(f->st, buf);
    state_load_t *l = load_new(f->st, 9, RUN_BYTES_MIN);
    static const int64_t offs[][3] = {
        {100, 200, 1700000000000ll},
        {-1, 300, -1},
        {-1, -1, 5},
        {INT64_MAX, INT64_MAX, INT64_MAX},
        {0, 0, 0},
        {101, 250, 1}, /* lower than before: stored as given */
    };
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        if (i % 2 == 0)
            lput(l, "k", i == 0 ? "v" : NULL); /* odd runs are empty: offsets only */
        ingest(l, offs[i][0], offs[i][1], offs[i][2]);
        check_offsets(f->st, 9, offs[i][0], offs[i][1], offs[i][2]);
        check_offsets(f->st, 8, 81, 82, 83);
    }
    assert_int_equal(state_load_files(l), 6);
    /* Offsets below -1 are refused, and the run is kept for a valid seal. */
    lput(l, "k", "kept");
    assert_int_equal(state_load_seal(l, -2, 5, 5), HF_ERR_INVAL);
    assert_int_equal(state_load_seal(l, 5, -2, 5), HF_ERR_INVAL);
    assert_false(state_load_has_sealed(l));
    assert_int_equal(state_load_run_records(l), 1);
    check_offsets(f->st, 9, 101, 250, 1);
    ingest(l, 6, 7, 8);
    check_offsets(f->st, 9, 6, 7, 8);
    assert_string_equal(get(f->st, 9, "k"), "kept");
    /* A sealed run brings its own offsets, not those of the run filling after it. */
    lput(l, "x", "1");
    seal(l, 20, 21, 22);
    lput(l, "x", "2");
    wait_sealed(l);
    check_offsets(f->st, 9, 6, 7, 8); /* not before its ingest */
    ingest_sealed(l);
    check_offsets(f->st, 9, 20, 21, 22);
    ingest(l, 30, 31, 32);
    check_offsets(f->st, 9, 30, 31, 32);
    assert_string_equal(get(f->st, 9, "x"), "2");
    /* Offsets written after an ingest win over it, and the next ingest over them. */
    assert_int_equal(state_buf_set_offsets(buf, 9, 60, 70, 80), HF_OK);
    write_buf(f->st, buf);
    check_offsets(f->st, 9, 60, 70, 80);
    ingest(l, 61, 71, 81);
    check_offsets(f->st, 9, 61, 71, 81);
    state_load_destroy(l);
    state_buf_destroy(buf);
    /* Offsets never show as a key of the partition. */
    assert_string_equal(scan(f->st, 9), "k=kept,x=2");
}

/* ---- 5: the run's bound */

static void test_put_refuses_what_does_not_fit_and_the_run_stays_ingestible(void **ctx)
{
    fixture_t *f = *ctx;
    static uint8_t big[HF_RECORD_LEN_MAX + 1], out[HF_RECORD_LEN_MAX];
    memset(big, 'v', sizeof(big));
    uint8_t key[HF_STATE_KEY_LEN_MAX + 1];
    memset(key, 'K', sizeof(key));
    size_t n = 0;
    state_load_t *l = load_new(f->st, 2, RUN_BYTES_MIN);
    assert_false(state_load_run_full(l));
    /* Bounds of one record. */
    assert_int_equal(state_load_put(l, "k", 1, big, HF_RECORD_LEN_MAX + 1), HF_ERR_LIMIT);
    assert_int_equal(state_load_put(l, key, HF_STATE_KEY_LEN_MAX + 1, "v", 1), HF_ERR_LIMIT);
    assert_int_equal(state_load_put(l, key, HF_STATE_KEY_LEN_MAX + 1, NULL, 0), HF_ERR_LIMIT);
    assert_int_equal(state_load_run_records(l), 0);

    /* The smallest run holds two of the largest records, and then is full to
     * the byte: nothing more fits. */
    key[1] = 'a';
    assert_int_equal(state_load_put(l, key, HF_STATE_KEY_LEN_MAX, big, HF_RECORD_LEN_MAX), HF_OK);
    assert_false(state_load_run_full(l));
    key[1] = 'b';
    assert_int_equal(state_load_put(l, key, HF_STATE_KEY_LEN_MAX, big, HF_RECORD_LEN_MAX), HF_OK);
    assert_true(state_load_run_full(l));
    key[1] = 'c';
    assert_int_equal(state_load_put(l, key, HF_STATE_KEY_LEN_MAX, big, HF_RECORD_LEN_MAX),
                     HF_ERR_LIMIT);
    assert_int_equal(state_load_put(l, "z", 1, NULL, 0), HF_ERR_LIMIT);
    assert_int_equal(state_load_put(l, "z", 1, "", 0), HF_ERR_LIMIT);
    assert_int_equal(state_load_run_records(l), 2);
    /* Sealed, it waits for its ingest while the next run fills: that run has
     * the whole bound again. A tombstone's val_len is not a value's: it is
     * neither refused nor counted. */
    seal(l, 1, 2, 3);
    assert_false(state_load_run_full(l));
    assert_int_equal(state_load_put(l, "t", 1, NULL, HF_RECORD_LEN_MAX + 1), HF_OK);
    char k[16];
    size_t small = 0;
    while (!state_load_run_full(l)) {
        snprintf(k, sizeof(k), "s%05zu", small++);
        assert_int_equal(state_load_put(l, k, strlen(k), big, 100), HF_OK);
    }
    /* Full: the largest record is refused, and the run is as it was... */
    key[1] = 'd';
    assert_int_equal(state_load_put(l, key, HF_STATE_KEY_LEN_MAX, big, HF_RECORD_LEN_MAX),
                     HF_ERR_LIMIT);
    assert_int_equal(state_load_run_records(l), 1 + small);
    /* ...but small records still fit until one does not. */
    int err = HF_OK;
    size_t past_full = 0;
    while (err == HF_OK) {
        snprintf(k, sizeof(k), "s%05zu", small);
        err = state_load_put(l, k, strlen(k), big, 100);
        small += err == HF_OK;
        past_full += err == HF_OK;
        assert_true(past_full < 1000);
    }
    assert_int_equal(err, HF_ERR_LIMIT);
    assert_true(past_full > 0);
    assert_int_equal(state_load_run_records(l), 1 + small);
    /* The bound is exact: a record takes its key, its value and 6 bytes
     * (state_load.h). What is left is filled to the byte, and then not even
     * the smallest record fits (ASan watches the run's buffer). */
    size_t used = (RUN_FRAME + 1) + small * (RUN_FRAME + 6 + 100);
    assert_true(used <= RUN_BYTES_MIN && used + RUN_FRAME + 6 + 100 > RUN_BYTES_MIN);
    size_t rest = RUN_BYTES_MIN - used;
    assert_true(rest >= RUN_FRAME + 1);
    assert_int_equal(state_load_put(l, "z", 1, big, rest - RUN_FRAME - 1 + 1), HF_ERR_LIMIT);
    assert_int_equal(state_load_put(l, "z", 1, big, rest - RUN_FRAME - 1), HF_OK);
    assert_int_equal(state_load_put(l, "y", 1, NULL, 0), HF_ERR_LIMIT);
    assert_int_equal(state_load_put(l, "y", 1, "", 0), HF_ERR_LIMIT);
    assert_int_equal(state_load_run_records(l), 2 + small);
    /* Both runs are ingestible, full as they are. */
    wait_sealed(l);
    ingest_sealed(l);
    for (int c = 'a'; c <= 'c'; c++) {
        key[1] = (uint8_t)c;
        assert_int_equal(state_get(f->st, NULL, 2, key, HF_STATE_KEY_LEN_MAX, out, sizeof(out), &n),
                         c == 'c' ? HF_ERR_NOTFOUND : HF_OK);
        if (c != 'c') {
            assert_int_equal(n, HF_RECORD_LEN_MAX);
            assert_memory_equal(out, big, n);
        }
    }
    ingest(l, 1, 3, 3);
    assert_int_equal(state_load_files(l), 2);
    snprintf(k, sizeof(k), "s%05zu", small - 1);
    assert_int_equal(state_get(f->st, NULL, 2, k, strlen(k), out, sizeof(out), &n), HF_OK);
    assert_int_equal(n, 100);
    snprintf(k, sizeof(k), "s%05zu", small);
    assert_int_equal(state_get(f->st, NULL, 2, k, strlen(k), out, sizeof(out), &n),
                     HF_ERR_NOTFOUND);
    key[1] = 'd';
    assert_int_equal(state_get(f->st, NULL, 2, key, HF_STATE_KEY_LEN_MAX, out, sizeof(out), &n),
                     HF_ERR_NOTFOUND);
    assert_string_equal(get(f->st, 2, "t"), "<none>");
    assert_int_equal(state_get(f->st, NULL, 2, "z", 1, out, sizeof(out), &n), HF_OK);
    assert_int_equal(n, rest - RUN_FRAME - 1);
    assert_string_equal(get(f->st, 2, "y"), "<none>");
    state_load_destroy(l);

    /* A negative partition is refused. */
    char errstr[256] = "";
    l = (state_load_t *)errstr; /* not NULL: the call must clear it */
    assert_int_equal(state_load_new(f->st, -1, 0, &l, errstr, sizeof(errstr)), HF_ERR_INVAL);
    assert_null(l);
}

/* ---- 6: leftover table files */

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    assert_true(fputs(text, fp) >= 0);
    assert_int_equal(fclose(fp), 0);
}

static void test_leftover_files_are_removed_and_an_ingest_leaves_none(void **ctx)
{
    fixture_t *f = *ctx;
    char dir[128], path[256];
    snprintf(dir, sizeof(dir), "%s/bulk-load", f->dir);
    assert_int_equal(bulk_sst_files(f->dir), -1);
    assert_int_equal(mkdir(dir, 0755), 0);
    /* What a process killed in a load of partition 0 leaves: the file it was
     * writing, and one it had written but not ingested. */
    snprintf(path, sizeof(path), "%s/p0-6-12345.sst", dir);
    write_file(path, "a table file written, never ingested");
    snprintf(path, sizeof(path), "%s/p0-7-12345.sst", dir);
    write_file(path, "a table file a killed process was writing");
    assert_int_equal(bulk_sst_files(f->dir), 2);
    state_load_t *l = load_new(f->st, 0, RUN_BYTES_MIN);
    assert_int_equal(bulk_sst_files(f->dir), 0);
    assert_int_equal(access(path, F_OK), -1);
    lput(l, "k", "v");
    seal(l, 1, 2, 3);
    wait_sealed(l);
    assert_int_equal(bulk_sst_files(f->dir), 1); /* written, waiting for its ingest */
    ingest_sealed(l);
    assert_int_equal(bulk_sst_files(f->dir), 0);
    lput(l, "k", "w");
    ingest(l, 1, 3, 3);
    assert_int_equal(bulk_sst_files(f->dir), 0);
    /* Runs never ingested leave neither a file nor a key: one written, one
     * filling; then one sealed, its worker maybe still writing. */
    lput(l, "k", "never");
    lput(l, "j", "never");
    seal(l, 1, 4, 3);
    wait_sealed(l);
    lput(l, "i", "never");
    state_load_destroy(l);
    assert_int_equal(bulk_sst_files(f->dir), 0);
    l = load_new(f->st, 0, RUN_BYTES_MIN);
    lput(l, "k", "never");
    seal(l, 1, 5, 3);
    state_load_destroy(l);
    assert_int_equal(bulk_sst_files(f->dir), 0);
    assert_string_equal(scan(f->st, 0), "k=w");
    check_offsets(f->st, 0, 1, 3, 3);
    /* A load that ingests nothing leaves nothing. */
    state_load_destroy(load_new(f->st, 0, RUN_BYTES_MIN));
    assert_int_equal(bulk_sst_files(f->dir), 0);
    state_load_destroy(NULL);
    /* The ingested data does not depend on the bulk-load directory. */
    reopen(f);
    assert_string_equal(scan(f->st, 0), "k=w");
}

/* ---- 8: the sort on many keys */

/* Records whose keys live in one arena; values are the 4-byte put index. */
typedef struct {
    uint8_t *bytes;
    size_t len, cap;
    rec_t *recs;
    uint32_t *idx;
    size_t n, max;
} recs_t;

static void recs_init(recs_t *r, size_t max, size_t bytes)
{
    *r = (recs_t){.bytes = malloc(bytes),
                  .cap = bytes,
                  .recs = malloc(max * sizeof(rec_t)),
                  .idx = malloc(max * sizeof(uint32_t)),
                  .max = max};
    assert_true(r->bytes && r->recs && r->idx);
}

static void recs_free(recs_t *r)
{
    free(r->bytes);
    free(r->recs);
    free(r->idx);
}

static void recs_add(recs_t *r, const void *key, size_t len, bool tombstone)
{
    assert_true(r->n < r->max && r->len + len <= r->cap && len > 0 && len <= HF_STATE_KEY_LEN_MAX);
    memcpy(r->bytes + r->len, key, len);
    r->idx[r->n] = (uint32_t)r->n;
    r->recs[r->n] = (rec_t){r->bytes + r->len, len, tombstone ? NULL : (uint8_t *)&r->idx[r->n],
                            sizeof(uint32_t), 0};
    r->len += len;
    r->n++;
}

static void recs_shuffle(recs_t *r)
{
    for (size_t i = r->n; i > 1; i--) {
        size_t j = rnd_below(i);
        rec_t t = r->recs[i - 1];
        r->recs[i - 1] = r->recs[j];
        r->recs[j] = t;
    }
}

/* Puts r's records in a fresh load of partition 7, checks the sorted run
 * against the reference (r->recs becomes it, *kept its length; kept may be
 * NULL), and returns the load, still holding its run. */
static state_load_t *recs_check(state_t *st, recs_t *r, size_t run_bytes, size_t *kept)
{
    state_load_t *l = load_new(st, 7, run_bytes);
    size_t n = put_sort_check(l, r->recs, r->n);
    if (kept != NULL)
        *kept = n;
    return l;
}

static void test_sort_orders_200000_keys_with_long_common_prefixes(void **ctx)
{
    fixture_t *f = *ctx;
    seed(0x50E7ull);
    enum { N = 200000 };
    recs_t r;
    recs_init(&r, N, (size_t)N * 64);
    static const char *const prefixes[] = {"Cwarehouse-0001|SKU-000000",
                                           "Cwarehouse-0001|SKU-0000001",
                                           "Cwarehouse-0001|SKU-",
                                           "Cwarehouse-0002|SKU-000000",
                                           "Hres-",
                                           "C",
                                           "Cwarehouse-0001|SKU-000000|attempt-"};
    static const uint8_t alphabet[] = {'0', '1', 0x00, 0xff};
    uint8_t k[HF_STATE_KEY_LEN_MAX];
    size_t longest = 0;
    for (size_t i = 0; i < N; i++) {
        if (i > 0 && rnd_below(5) == 0) { /* a key put before, again */
            const rec_t *o = &r.recs[rnd_below(i)];
            memcpy(k, o->key, o->key_len);
            recs_add(&r, k, o->key_len, rnd_below(4) == 0);
            continue;
        }
        const char *pre = prefixes[rnd_below(sizeof(prefixes) / sizeof(prefixes[0]))];
        size_t plen = strlen(pre);
        size_t len = plen + rnd_below(13);
        bool long_one = rnd_below(100) == 0; /* equal but for their last 4 bytes */
        if (long_one)
            len = HF_STATE_KEY_LEN_MAX - rnd_below(3);
        memcpy(k, pre, plen);
        for (size_t j = plen; j < len; j++)
            k[j] = long_one && j < len - 4 ? 'x' : alphabet[rnd_below(sizeof(alphabet))];
        longest += len == HF_STATE_KEY_LEN_MAX;
        recs_add(&r, k, len, rnd_below(10) == 0);
    }
    assert_true(longest > 100);
    size_t nref = 0;
    state_load_t *l = recs_check(f->st, &r, 32 << 20, &nref);
    /* The worker's table file writer refuses keys out of order too (the wait
     * would have failed); after the ingest a scan sees the reference's live
     * keys (r.recs[0..nref) is the deduplicated reference). */
    ingest_sealed(l);
    assert_int_equal(state_load_keys(l), nref);
    state_iter_t *it = state_iter_new(f->st, NULL, 7, NULL, 0, false);
    assert_non_null(it);
    const void *key, *val;
    size_t kl, vl, live = 0;
    for (size_t i = 0; i < nref; i++) {
        if (r.recs[i].val == NULL)
            continue;
        if (!state_iter_next(it, &key, &kl, &val, &vl))
            fail_msg("the scan ends before reference key %zu", i);
        if (kl != r.recs[i].key_len || memcmp(key, r.recs[i].key, kl) != 0)
            fail_msg("the scan has another key where reference key %zu is", i);
        assert_int_equal(vl, sizeof(uint32_t));
        assert_memory_equal(val, r.recs[i].val, vl);
        live++;
    }
    assert_false(state_iter_next(it, &key, &kl, &val, &vl));
    state_iter_destroy(it);
    print_message("%d records, %zu distinct keys, %zu live\n", N, nref, live);
    assert_true(nref > 50000 && nref < N); /* many keys, many put again */
    state_load_destroy(l);
    recs_free(&r);
}

/* Shapes a multikey quicksort can get wrong: all keys equal, keys that end
 * at every depth, sorted and reversed input, keys equal up to their last
 * byte, and small runs around the insertion sort's threshold. */
static void test_sort_handles_degenerate_shapes(void **ctx)
{
    fixture_t *f = *ctx;
    seed(0xDE6Eull);
    recs_t r;
    uint8_t k[HF_STATE_KEY_LEN_MAX];

    /* One key 5000 times, a tombstone among them; then only tombstones. */
    recs_init(&r, 5000, 5000 * 8);
    for (size_t i = 0; i < 5000; i++)
        recs_add(&r, "Kdup", 4, i == 2500);
    state_load_destroy(recs_check(f->st, &r, 8 << 20, NULL));
    r.n = r.len = 0;
    for (size_t i = 0; i < 100; i++)
        recs_add(&r, "Kdup", 4, true);
    state_load_destroy(recs_check(f->st, &r, 8 << 20, NULL));
    recs_free(&r);

    /* "K", "KK", ... up to the longest key, each three times, shuffled: each
     * key ends where the others go on (and the same with 0xFF and 0x00). */
    static const uint8_t fill[] = {'K', 0xff, 0x00};
    for (size_t fi = 0; fi < 3; fi++) {
        recs_init(&r, 3 * HF_STATE_KEY_LEN_MAX, 3 * HF_STATE_KEY_LEN_MAX * HF_STATE_KEY_LEN_MAX);
        memset(k, fill[fi], sizeof(k));
        k[0] = 'K';
        for (size_t rep = 0; rep < 3; rep++)
            for (size_t len = 1; len <= HF_STATE_KEY_LEN_MAX; len++)
                recs_add(&r, k, len, rep == 2 && len % 7 == 0);
        recs_shuffle(&r);
        state_load_destroy(recs_check(f->st, &r, 8 << 20, NULL));
        recs_free(&r);
    }

    /* 20,000 distinct keys in order, then reversed, then one key of 256 bytes
     * varied in its last two bytes only. */
    enum { S = 20000 };
    for (int shape = 0; shape < 3; shape++) {
        recs_init(&r, S, (size_t)S * HF_STATE_KEY_LEN_MAX);
        for (size_t i = 0; i < S; i++) {
            size_t j = shape == 1 ? S - 1 - i : i;
            if (shape < 2) {
                int n = snprintf((char *)k, sizeof(k), "Ckey|%08zu", j * 7);
                recs_add(&r, k, (size_t)n, false);
            } else {
                memset(k, 'w', sizeof(k));
                k[0] = 'C';
                k[254] = (uint8_t)rnd();
                k[255] = (uint8_t)rnd();
                recs_add(&r, k, HF_STATE_KEY_LEN_MAX - rnd_below(2), false);
            }
        }
        state_load_destroy(recs_check(f->st, &r, 8 << 20, NULL));
        recs_free(&r);
    }

    /* Many small runs (0 to 40 records, keys of 1 to 4 bytes of 4 symbols). */
    static const uint8_t alphabet[] = {'K', 'a', 0x00, 0xff};
    recs_init(&r, 40, 40 * 4);
    for (int run = 0; run < 150; run++) {
        r.n = r.len = 0;
        size_t n = rnd_below(41);
        for (size_t i = 0; i < n; i++) {
            size_t len = 1 + rnd_below(4);
            k[0] = 'K';
            for (size_t j = 1; j < len; j++)
                k[j] = alphabet[rnd_below(4)];
            recs_add(&r, k, len, rnd_below(6) == 0);
        }
        state_load_destroy(recs_check(f->st, &r, RUN_BYTES_MIN, NULL));
    }
    recs_free(&r);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_many_small_runs_match_a_model),
        T(test_load_overwrites_and_deletes_keys_already_in_the_db),
        T(test_load_after_a_partition_drop_survives_reopen),
        T(test_two_partitions_load_side_by_side),
        T(test_foreach_shows_each_key_once_in_order_with_its_last_record),
        T(test_each_ingest_stores_the_offsets_it_was_given),
        T(test_put_refuses_what_does_not_fit_and_the_run_stays_ingestible),
        T(test_leftover_files_are_removed_and_an_ingest_leaves_none),
        T(test_sort_orders_200000_keys_with_long_common_prefixes),
        T(test_sort_handles_degenerate_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
