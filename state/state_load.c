/* Bulk load (state_load.h): a run is an arena of framed records and, once
 * sorted, an array of (key, record) references; a table file is written with
 * RocksDB's SstFileWriter and ingested with its file moved into the DB. */
#include "state_load.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state_int.h"

#define LOAD_DIR           "bulk-load"
#define LOAD_PATH_MAX      4096
#define LOAD_TOMBSTONE_LEN UINT32_MAX

/* A record in the arena: key_len (2 bytes) and val_len (4 bytes, LOAD_TOMBSTONE_LEN
 * for a tombstone), native order, then the key and the value. */
enum { LOAD_FRAME_LEN = 6 };

typedef struct {
    const uint8_t *key;
    uint32_t at; /* the record's arena offset: put order, for ties */
    uint16_t key_len;
} load_ref_t;

struct state_load {
    state_t *st;
    int32_t partition;
    size_t run_bytes_max;
    uint8_t *arena;
    size_t arena_len;
    size_t records;
    load_ref_t *refs; /* the sorted run: one per key after dedup */
    size_t refs_count, refs_cap;
    bool sorted;
    char dir[LOAD_PATH_MAX];
    char file[LOAD_PATH_MAX]; /* the file being written; "" when none */
    unsigned file_seq;
    rocksdb_options_t *opts;
    rocksdb_envoptions_t *env;
    uint64_t files, keys;
};

/* Files a killed load left behind: never ingested, so nothing refers to them. */
static void load_clean_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[LOAD_PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".sst") == 0 &&
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            (void)unlink(path);
    }
    closedir(d);
}

int state_load_new(state_t *st, int32_t partition, size_t run_bytes_max, state_load_t **out,
                   char *errstr, size_t errstr_size)
{
    hf_assert(st != NULL && out != NULL);
    *out = NULL;
    if (partition < 0)
        return HF_ERR_INVAL;
    state_load_t *l = calloc(1, sizeof *l);
    if (l == NULL)
        return HF_ERR_NOMEM;
    l->st = st;
    l->partition = partition;
    l->run_bytes_max = run_bytes_max != 0 ? run_bytes_max : HF_STATE_LOAD_RUN_BYTES;
    hf_assert(l->run_bytes_max >= 2 * (LOAD_FRAME_LEN + HF_STATE_KEY_LEN_MAX + HF_RECORD_LEN_MAX));
    hf_assert(l->run_bytes_max < UINT32_MAX); /* arena offsets are 32-bit */
    int n = snprintf(l->dir, sizeof l->dir, "%s/%s", st->path, LOAD_DIR);
    if (n < 0 || (size_t)n >= sizeof l->dir) {
        snprintf(errstr, errstr_size, "state_load: path too long: %s/%s", st->path, LOAD_DIR);
        free(l);
        return HF_ERR_LIMIT;
    }
    if (mkdir(l->dir, 0755) != 0 && errno != EEXIST) {
        snprintf(errstr, errstr_size,
                 "state_load: cannot create %s: %s (check the state_dir's "
                 "permissions and free space)",
                 l->dir, strerror(errno));
        free(l);
        return HF_ERR_IO;
    }
    load_clean_dir(l->dir);
    l->arena = malloc(l->run_bytes_max);
    /* Tables of a load are written uncompressed, as L0 files are: compaction
     * recompresses what moves down. */
    l->opts = state_options_new(state_cache_get(), rocksdb_no_compression, st->write_buffer_bytes);
    l->env = rocksdb_envoptions_create();
    if (l->arena == NULL || l->opts == NULL || l->env == NULL) {
        state_load_destroy(l);
        return HF_ERR_NOMEM;
    }
    *out = l;
    return HF_OK;
}

void state_load_destroy(state_load_t *l)
{
    if (l == NULL)
        return;
    if (l->file[0] != '\0')
        (void)unlink(l->file);
    if (l->opts != NULL)
        rocksdb_options_destroy(l->opts);
    if (l->env != NULL)
        rocksdb_envoptions_destroy(l->env);
    free(l->refs);
    free(l->arena);
    free(l);
}

bool state_load_run_full(const state_load_t *l)
{
    return l->arena_len + LOAD_FRAME_LEN + HF_STATE_KEY_LEN_MAX + HF_RECORD_LEN_MAX >
           l->run_bytes_max;
}

size_t state_load_run_records(const state_load_t *l)
{
    return l->records;
}

int state_load_put(state_load_t *l, const void *key, size_t key_len, const void *val,
                   size_t val_len)
{
    hf_assert(l != NULL && !l->sorted);
    int err = state_key_check(l->partition, key, key_len);
    if (err != HF_OK)
        return err;
    if (val != NULL && val_len > HF_RECORD_LEN_MAX)
        return HF_ERR_LIMIT;
    size_t need = LOAD_FRAME_LEN + key_len + (val != NULL ? val_len : 0);
    if (l->arena_len + need > l->run_bytes_max)
        return HF_ERR_LIMIT;
    uint8_t *p = l->arena + l->arena_len;
    uint16_t klen16 = (uint16_t)key_len;
    uint32_t vlen32 = val != NULL ? (uint32_t)val_len : LOAD_TOMBSTONE_LEN;
    memcpy(p, &klen16, sizeof klen16);
    memcpy(p + 2, &vlen32, sizeof vlen32);
    memcpy(p + LOAD_FRAME_LEN, key, key_len);
    if (val != NULL && val_len > 0)
        memcpy(p + LOAD_FRAME_LEN + key_len, val, val_len);
    l->arena_len += need;
    l->records++;
    return HF_OK;
}

/* Byte d of a ref's key, or -1 past its end (a shorter key sorts first). */
static inline int ref_byte(const load_ref_t *r, size_t d)
{
    return d < r->key_len ? r->key[d] : -1;
}

static inline void ref_swap(load_ref_t *a, load_ref_t *b)
{
    load_ref_t t = *a;
    *a = *b;
    *b = t;
}

/* Sorts refs[0..n) by key bytes from depth d on (the bytes before d are equal):
 * multikey quicksort (Bentley and Sedgewick), which looks at each distinguishing
 * byte about once — the keys of a changelog share long prefixes
 * ("Cwarehouse|SKU-0000..."), where a comparison sort would compare them again
 * and again. Equal keys end adjacent, in no particular order. The largest
 * part is looped on, not recursed into: the stack stays bounded by the key
 * length times log n. */
static void refs_sort(load_ref_t *refs, size_t n, size_t d)
{
    while (n > 1) {
        if (n < 12) { /* insertion sort on the rest of the keys */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0; j--) {
                    const load_ref_t *a = &refs[j - 1], *b = &refs[j];
                    size_t la = a->key_len > d ? a->key_len - d : 0;
                    size_t lb = b->key_len > d ? b->key_len - d : 0;
                    if (state_key_cmp(a->key + (la ? d : 0), la, b->key + (lb ? d : 0), lb) <= 0)
                        break;
                    ref_swap(&refs[j - 1], &refs[j]);
                }
            return;
        }
        ref_swap(&refs[0], &refs[n / 2]);
        int pivot = ref_byte(&refs[0], d);
        /* [0, lt) < pivot, [lt, i) == pivot, [gt, n) > pivot */
        size_t lt = 0, i = 1, gt = n;
        while (i < gt) {
            int c = ref_byte(&refs[i], d);
            if (c < pivot)
                ref_swap(&refs[lt++], &refs[i++]);
            else if (c > pivot)
                ref_swap(&refs[i], &refs[--gt]);
            else
                i++;
        }
        size_t eq = gt - lt, hi = n - gt;
        /* The equal part goes one byte deeper, unless its keys ended here. */
        if (lt <= hi) {
            refs_sort(refs, lt, d);
            refs_sort(refs + gt, hi, d);
            if (pivot < 0)
                return;
            refs += lt;
            n = eq;
            d++;
        } else {
            refs_sort(refs + gt, hi, d);
            if (pivot >= 0)
                refs_sort(refs + lt, eq, d + 1);
            n = lt;
        }
    }
}

/* The value of the record at arena offset at; NULL for a tombstone. */
static const uint8_t *ref_val(const state_load_t *l, uint32_t at, size_t *val_len)
{
    const uint8_t *p = l->arena + at;
    uint16_t klen16;
    uint32_t vlen32;
    memcpy(&klen16, p, sizeof klen16);
    memcpy(&vlen32, p + 2, sizeof vlen32);
    if (vlen32 == LOAD_TOMBSTONE_LEN) {
        *val_len = 0;
        return NULL;
    }
    *val_len = vlen32;
    return p + LOAD_FRAME_LEN + klen16;
}

int state_load_sort(state_load_t *l)
{
    hf_assert(l != NULL);
    if (l->sorted)
        return HF_OK;
    if (l->refs_cap < l->records) {
        /* Grown to the largest run so far: 16 bytes a record. */
        load_ref_t *refs = realloc(l->refs, l->records * sizeof *refs);
        if (refs == NULL)
            return HF_ERR_NOMEM;
        l->refs = refs;
        l->refs_cap = l->records;
    }
    size_t n = 0;
    for (size_t at = 0; at < l->arena_len; n++) {
        uint16_t klen16;
        uint32_t vlen32;
        memcpy(&klen16, l->arena + at, sizeof klen16);
        memcpy(&vlen32, l->arena + at + 2, sizeof vlen32);
        l->refs[n] = (load_ref_t){l->arena + at + LOAD_FRAME_LEN, (uint32_t)at, klen16};
        at += LOAD_FRAME_LEN + klen16 + (vlen32 == LOAD_TOMBSTONE_LEN ? 0 : vlen32);
    }
    hf_assert(n == l->records);
    refs_sort(l->refs, n, 0);
    /* Of equal keys (adjacent) the one put last stays. */
    size_t kept = 0;
    for (size_t i = 0; i < n;) {
        size_t last = i, j = i + 1;
        for (; j < n && state_key_cmp(l->refs[i].key, l->refs[i].key_len, l->refs[j].key,
                                      l->refs[j].key_len) == 0;
             j++)
            if (l->refs[j].at > l->refs[last].at)
                last = j;
        l->refs[kept++] = l->refs[last];
        i = j;
    }
    l->refs_count = kept;
    l->sorted = true;
    return HF_OK;
}

int state_load_foreach(state_load_t *l, state_load_each_fn each, void *opaque)
{
    hf_assert(l != NULL && l->sorted && each != NULL);
    for (size_t i = 0; i < l->refs_count; i++) {
        size_t val_len;
        const uint8_t *val = ref_val(l, l->refs[i].at, &val_len);
        int err = each(opaque, l->refs[i].key, l->refs[i].key_len, val, val_len);
        if (err != 0)
            return err;
    }
    return HF_OK;
}

/* Puts (or deletes) one stored key into the open writer; "what" names it. */
static int load_write(rocksdb_sstfilewriter_t *w, const uint8_t *sk, size_t sk_len,
                      const uint8_t *val, size_t val_len, bool tombstone, char *errstr,
                      size_t errstr_size)
{
    char *rerr = NULL;
    if (tombstone)
        rocksdb_sstfilewriter_delete(w, (const char *)sk, sk_len, &rerr);
    else
        rocksdb_sstfilewriter_put(w, (const char *)sk, sk_len, val_len ? (const char *)val : "",
                                  val_len, &rerr);
    if (rerr != NULL) {
        state_errstr(errstr, errstr_size, "state_load: writing a table file", rerr);
        return HF_ERR_IO;
    }
    return HF_OK;
}

/* Writes the offsets key (below every caller key of the partition) and the
 * sorted run into l->file. */
static int load_write_file(state_load_t *l, int64_t input_next_offset,
                           int64_t changelog_next_offset, int64_t current_at_ms, char *errstr,
                           size_t errstr_size)
{
    char *rerr = NULL;
    rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(l->env, l->opts);
    if (w == NULL)
        return HF_ERR_NOMEM;
    rocksdb_sstfilewriter_open(w, l->file, &rerr);
    int err = HF_OK;
    if (rerr != NULL) {
        state_errstr(errstr, errstr_size, "state_load: opening a table file", rerr);
        err = HF_ERR_IO;
    }
    uint8_t sk[STATE_KEY_LEN_MAX];
    uint8_t offs[STATE_OFFSETS_VAL_LEN];
    if (!err) {
        state_offsets_encode(input_next_offset, changelog_next_offset, current_at_ms, offs);
        err = load_write(w, sk, state_offsets_key(l->partition, sk), offs, sizeof offs, false,
                         errstr, errstr_size);
    }
    for (size_t i = 0; i < l->refs_count && !err; i++) {
        size_t val_len;
        const uint8_t *val = ref_val(l, l->refs[i].at, &val_len);
        size_t sk_len = state_key_encode(l->partition, l->refs[i].key, l->refs[i].key_len, sk);
        err = load_write(w, sk, sk_len, val, val_len, val == NULL, errstr, errstr_size);
    }
    if (!err) {
        rocksdb_sstfilewriter_finish(w, &rerr);
        if (rerr != NULL) {
            state_errstr(errstr, errstr_size, "state_load: finishing a table file", rerr);
            err = HF_ERR_IO;
        }
    }
    rocksdb_sstfilewriter_destroy(w);
    return err;
}

int state_load_ingest(state_load_t *l, int64_t input_next_offset, int64_t changelog_next_offset,
                      int64_t current_at_ms, char *errstr, size_t errstr_size)
{
    hf_assert(l != NULL);
    if (input_next_offset < -1 || changelog_next_offset < -1)
        return HF_ERR_INVAL;
    int err = state_load_sort(l);
    if (err)
        return err;
    int n = snprintf(l->file, sizeof l->file, "%s/p%d-%u-%ld.sst", l->dir, (int)l->partition,
                     l->file_seq++, (long)getpid());
    hf_assert(n > 0 && (size_t)n < sizeof l->file); /* dir was checked with room to spare */
    err = load_write_file(l, input_next_offset, changelog_next_offset, current_at_ms, errstr,
                          errstr_size);
    if (!err) {
        char *rerr = NULL;
        rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
        rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
        const char *files[1] = {l->file};
        rocksdb_ingest_external_file(l->st->db, files, 1, io, &rerr);
        rocksdb_ingestexternalfileoptions_destroy(io);
        if (rerr != NULL) {
            state_errstr(errstr, errstr_size, "state_load: ingesting a table file", rerr);
            err = HF_ERR_IO;
        }
    }
    (void)unlink(l->file); /* moved into the DB on success: this removes the old name */
    l->file[0] = '\0';
    if (err)
        return err;
    l->files++;
    l->keys += l->refs_count;
    l->arena_len = 0;
    l->records = 0;
    l->refs_count = 0;
    l->sorted = false;
    return HF_OK;
}

uint64_t state_load_files(const state_load_t *l)
{
    return l->files;
}

uint64_t state_load_keys(const state_load_t *l)
{
    return l->keys;
}
