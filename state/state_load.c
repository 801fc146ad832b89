/* Bulk load (state_load.h). A run is an arena of framed records and, once
 * sealed, an array of (key, record) references sorted by key, one per key; its
 * table file is written with RocksDB's SstFileWriter and ingested with the
 * file moved into the DB. Two runs: one filling while the other is sorted and
 * written by a worker thread, then reindexed and ingested by the caller. */
#include "state_load.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
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

typedef struct {
    uint8_t *arena;
    size_t arena_len;
    size_t records;
    load_ref_t *refs; /* once sealed: sorted, one per key */
    size_t refs_count, refs_cap;
    int64_t input_next, changelog_next, current_at_ms; /* the offsets it brings */
    char file[LOAD_PATH_MAX];                          /* its table file; "" when none */
    int err;                                           /* of the worker */
    char errstr[256];
} load_run_t;

struct state_load {
    state_t *st;
    int32_t partition;
    size_t run_bytes_max;
    load_run_t runs[2];
    load_run_t *filling;
    load_run_t *sealed; /* NULL: none */
    pthread_t worker;
    bool worker_running;
    char dir[LOAD_PATH_MAX];
    unsigned file_seq;
    rocksdb_options_t *opts;
    rocksdb_envoptions_t *env;
    uint64_t files, keys;
};

/* Files a killed load of this partition left behind: never ingested, so
 * nothing refers to them. Only this partition's ("p<partition>-..."): the
 * loads of other partitions of the DB may be running on other task threads. */
static void load_clean_dir(const char *dir, int32_t partition)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    char mine[32];
    int mine_len = snprintf(mine, sizeof mine, "p%d-", (int)partition);
    struct dirent *e;
    char path[LOAD_PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".sst") == 0 &&
            strncmp(e->d_name, mine, (size_t)mine_len) == 0 &&
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
    hf_assert(l->run_bytes_max >= STATE_LOAD_RUN_BYTES_MIN);
    hf_assert(l->run_bytes_max < UINT32_MAX); /* arena offsets are 32-bit */
    l->filling = &l->runs[0];
    int n = snprintf(l->dir, sizeof l->dir, "%s/%s", st->path, LOAD_DIR);
    if (n < 0 || (size_t)n >= sizeof l->dir - 64) {
        snprintf(errstr, errstr_size, "state_load: path too long: %s/%s", st->path, LOAD_DIR);
        free(l);
        return HF_ERR_LIMIT;
    }
    if (mkdir(l->dir, 0755) != 0 && errno != EEXIST) {
        snprintf(errstr, errstr_size,
                 "state_load: cannot create %s: %s (check the state_dir's permissions and free "
                 "space)",
                 l->dir, strerror(errno));
        free(l);
        return HF_ERR_IO;
    }
    load_clean_dir(l->dir, partition);
    l->runs[0].arena = malloc(l->run_bytes_max);
    l->runs[1].arena = malloc(l->run_bytes_max);
    /* Tables of a load are written uncompressed, as L0 files are: compaction
     * recompresses what moves down. */
    l->opts = state_options_new(state_cache_get(), rocksdb_no_compression, st->write_buffer_bytes);
    l->env = rocksdb_envoptions_create();
    if (!l->runs[0].arena || !l->runs[1].arena || !l->opts || !l->env) {
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
    if (l->worker_running)
        pthread_join(l->worker, NULL);
    for (int i = 0; i < 2; i++) {
        if (l->runs[i].file[0] != '\0')
            (void)unlink(l->runs[i].file);
        free(l->runs[i].refs);
        free(l->runs[i].arena);
    }
    if (l->opts != NULL)
        rocksdb_options_destroy(l->opts);
    if (l->env != NULL)
        rocksdb_envoptions_destroy(l->env);
    free(l);
}

bool state_load_run_full(const state_load_t *l)
{
    return l->filling->arena_len + LOAD_FRAME_LEN + HF_STATE_KEY_LEN_MAX + HF_RECORD_LEN_MAX >
           l->run_bytes_max;
}

size_t state_load_run_records(const state_load_t *l)
{
    return l->filling->records;
}

bool state_load_has_sealed(const state_load_t *l)
{
    return l->sealed != NULL;
}

int state_load_put(state_load_t *l, const void *key, size_t key_len, const void *val,
                   size_t val_len)
{
    hf_assert(l != NULL);
    int err = state_key_check(l->partition, key, key_len);
    if (err != HF_OK)
        return err;
    if (val != NULL && val_len > HF_RECORD_LEN_MAX)
        return HF_ERR_LIMIT;
    load_run_t *r = l->filling;
    size_t need = LOAD_FRAME_LEN + key_len + (val != NULL ? val_len : 0);
    if (r->arena_len + need > l->run_bytes_max)
        return HF_ERR_LIMIT;
    uint8_t *p = r->arena + r->arena_len;
    uint16_t klen16 = (uint16_t)key_len;
    uint32_t vlen32 = val != NULL ? (uint32_t)val_len : LOAD_TOMBSTONE_LEN;
    memcpy(p, &klen16, sizeof klen16);
    memcpy(p + 2, &vlen32, sizeof vlen32);
    memcpy(p + LOAD_FRAME_LEN, key, key_len);
    if (val != NULL && val_len > 0)
        memcpy(p + LOAD_FRAME_LEN + key_len, val, val_len);
    r->arena_len += need;
    r->records++;
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
 * and again. Equal keys end adjacent, in no particular order. */
static void refs_sort(load_ref_t *refs, size_t n, size_t d)
{
    while (n > 1) {
        if (n < 12) { /* insertion sort on the rest of the keys */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && state_key_cmp(refs[j - 1].key, refs[j - 1].key_len,
                                                          refs[j].key, refs[j].key_len) > 0;
                     j--)
                    ref_swap(&refs[j - 1], &refs[j]);
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
        /* Of the three parts (the equal one a byte deeper, unless its keys
         * ended here) the two smaller are recursed into and the largest is
         * looped on: each recursion gets at most 2/3 of its caller's refs, so
         * the stack stays O(log n) deep. */
        size_t eq = gt - lt, hi = n - gt;
        bool eq_done = pivot < 0; /* equal keys that ended at depth d: sorted */
        if (eq >= lt && eq >= hi && !eq_done) {
            refs_sort(refs, lt, d);
            refs_sort(refs + gt, hi, d);
            refs += lt;
            n = eq;
            d++;
        } else if (lt >= hi) {
            refs_sort(refs + gt, hi, d);
            if (!eq_done)
                refs_sort(refs + lt, eq, d + 1);
            n = lt;
        } else {
            refs_sort(refs, lt, d);
            if (!eq_done)
                refs_sort(refs + lt, eq, d + 1);
            refs += gt;
            n = hi;
        }
    }
}

/* The value of the record at arena offset at; NULL for a tombstone. */
static const uint8_t *ref_val(const load_run_t *r, uint32_t at, size_t *val_len)
{
    const uint8_t *p = r->arena + at;
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

/* Sorts a run; of the records of one key the one put last stays. */
static int run_sort(load_run_t *r)
{
    if (r->refs_cap < r->records) {
        /* Grown to the largest run so far: 16 bytes a record. */
        load_ref_t *refs = realloc(r->refs, r->records * sizeof *refs);
        if (refs == NULL)
            return HF_ERR_NOMEM;
        r->refs = refs;
        r->refs_cap = r->records;
    }
    size_t n = 0;
    for (size_t at = 0; at < r->arena_len; n++) {
        uint16_t klen16;
        uint32_t vlen32;
        memcpy(&klen16, r->arena + at, sizeof klen16);
        memcpy(&vlen32, r->arena + at + 2, sizeof vlen32);
        r->refs[n] = (load_ref_t){r->arena + at + LOAD_FRAME_LEN, (uint32_t)at, klen16};
        at += LOAD_FRAME_LEN + klen16 + (vlen32 == LOAD_TOMBSTONE_LEN ? 0 : vlen32);
    }
    hf_assert(n == r->records);
    refs_sort(r->refs, n, 0);
    size_t kept = 0;
    for (size_t i = 0; i < n;) {
        size_t last = i, j = i + 1;
        for (; j < n && state_key_cmp(r->refs[i].key, r->refs[i].key_len, r->refs[j].key,
                                      r->refs[j].key_len) == 0;
             j++)
            if (r->refs[j].at > r->refs[last].at)
                last = j;
        r->refs[kept++] = r->refs[last];
        i = j;
    }
    r->refs_count = kept;
    return HF_OK;
}

/* Puts (or deletes) one stored key into the open writer. */
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
 * sorted run into r->file. */
static int run_write_file(const state_load_t *l, load_run_t *r, char *errstr, size_t errstr_size)
{
    char *rerr = NULL;
    rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(l->env, l->opts);
    if (w == NULL)
        return HF_ERR_NOMEM;
    rocksdb_sstfilewriter_open(w, r->file, &rerr);
    int err = HF_OK;
    if (rerr != NULL) {
        state_errstr(errstr, errstr_size, "state_load: opening a table file", rerr);
        err = HF_ERR_IO;
    }
    uint8_t sk[STATE_KEY_LEN_MAX];
    uint8_t offs[STATE_OFFSETS_VAL_LEN];
    if (!err) {
        state_offsets_encode(r->input_next, r->changelog_next, r->current_at_ms, offs);
        err = load_write(w, sk, state_offsets_key(l->partition, sk), offs, sizeof offs, false,
                         errstr, errstr_size);
    }
    for (size_t i = 0; i < r->refs_count && !err; i++) {
        size_t val_len;
        const uint8_t *val = ref_val(r, r->refs[i].at, &val_len);
        size_t sk_len = state_key_encode(l->partition, r->refs[i].key, r->refs[i].key_len, sk);
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

/* The sealed run's sort and file: on the worker thread, or inline. */
static void run_prepare(const state_load_t *l, load_run_t *r)
{
    r->err = run_sort(r);
    if (r->err)
        snprintf(r->errstr, sizeof r->errstr, "state_load: no memory to sort a run of %zu records",
                 r->records);
    else
        r->err = run_write_file(l, r, r->errstr, sizeof r->errstr);
}

static void *worker_main(void *arg)
{
    state_load_t *l = arg;
    run_prepare(l, l->sealed);
    return NULL;
}

int state_load_seal(state_load_t *l, int64_t input_next_offset, int64_t changelog_next_offset,
                    int64_t current_at_ms)
{
    hf_assert(l != NULL && l->sealed == NULL && !l->worker_running);
    if (input_next_offset < -1 || changelog_next_offset < -1)
        return HF_ERR_INVAL;
    load_run_t *r = l->filling;
    r->input_next = input_next_offset;
    r->changelog_next = changelog_next_offset;
    r->current_at_ms = current_at_ms;
    int n = snprintf(r->file, sizeof r->file, "%s/p%d-%u-%ld.sst", l->dir, (int)l->partition,
                     l->file_seq++, (long)getpid());
    hf_assert(n > 0 && (size_t)n < sizeof r->file); /* dir was checked with room to spare */
    l->sealed = r;
    l->filling = r == &l->runs[0] ? &l->runs[1] : &l->runs[0];
    hf_assert(l->filling->records == 0 && l->filling->arena_len == 0);
    /* Without a thread the work is done here: slower, not wrong. */
    l->worker_running = pthread_create(&l->worker, NULL, worker_main, l) == 0;
    if (!l->worker_running)
        run_prepare(l, r);
    return HF_OK;
}

int state_load_wait(state_load_t *l, char *errstr, size_t errstr_size)
{
    hf_assert(l != NULL && l->sealed != NULL);
    if (l->worker_running) {
        pthread_join(l->worker, NULL);
        l->worker_running = false;
    }
    if (l->sealed->err && errstr != NULL && errstr_size > 0)
        snprintf(errstr, errstr_size, "%s", l->sealed->errstr);
    return l->sealed->err;
}

int state_load_foreach(state_load_t *l, state_load_each_fn each, void *opaque)
{
    hf_assert(l != NULL && l->sealed != NULL && !l->worker_running && l->sealed->err == HF_OK);
    hf_assert(each != NULL);
    const load_run_t *r = l->sealed;
    for (size_t i = 0; i < r->refs_count; i++) {
        size_t val_len;
        const uint8_t *val = ref_val(r, r->refs[i].at, &val_len);
        int err = each(opaque, r->refs[i].key, r->refs[i].key_len, val, val_len);
        if (err != 0)
            return err;
    }
    return HF_OK;
}

int state_load_ingest(state_load_t *l, char *errstr, size_t errstr_size)
{
    hf_assert(l != NULL && l->sealed != NULL && !l->worker_running && l->sealed->err == HF_OK);
    load_run_t *r = l->sealed;
    char *rerr = NULL;
    rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
    const char *files[1] = {r->file};
    rocksdb_ingest_external_file(l->st->db, files, 1, io, &rerr);
    rocksdb_ingestexternalfileoptions_destroy(io);
    int err = HF_OK;
    if (rerr != NULL) {
        state_errstr(errstr, errstr_size, "state_load: ingesting a table file", rerr);
        err = HF_ERR_IO;
    }
    (void)unlink(r->file); /* moved into the DB on success: this removes the old name */
    r->file[0] = '\0';
    if (err)
        return err;
    l->files++;
    l->keys += r->refs_count;
    r->arena_len = 0;
    r->records = 0;
    r->refs_count = 0;
    l->sealed = NULL;
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
