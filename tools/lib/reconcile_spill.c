/* The sharded replay's local copy (--spill-dir): the first pass writes each
 * record that a later shard's pass needs — the records of that shard's pairs
 * to its own file, the ledger (every pass takes what its pairs hold and sold)
 * to one file all later passes read — as it read it (topic step, partition,
 * offset, key, value), in the order it read them. A later pass then reads its
 * file instead of Kafka: the same records in the same order, at the speed of a
 * local file. The files are unlinked as soon as they are made (nothing is left
 * behind, even by a crash) and a shard's file is emptied once its pass read it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_assert.h"
#include "reconcile_int.h"

/* The largest key and value a spilled record may have: a record the first
 * pass read, so only a damaged file has more. */
#define RC_SPILL_KEY_MAX   65536u
#define RC_SPILL_VALUE_MAX (4u << 20)
#define RC_SPILL_NO_VALUE  UINT32_MAX /* a tombstone */
#define RC_SPILL_BUF_BYTES (1u << 20)

typedef struct {
    uint8_t step;
    int32_t partition;
    int64_t offset;
    uint32_t key_len, value_len;
} spill_head_t;

typedef struct {
    FILE *f;
    char *iobuf;
    bool reading, pending, eof;
    spill_head_t head; /* the entry read ahead, when pending */
    uint64_t entries, bytes;
} spill_file_t;

struct rc_spill {
    char dir[256];
    uint32_t files; /* 0: the ledger; k: shard k */
    spill_file_t *f;
    uint8_t *key, *value; /* the entry being replayed */
    uint64_t bytes_max;   /* what the files held at most at once */
    uint64_t bytes_now;
};

static int spill_errno(const rc_spill_t *s, const char *what, char *errstr, size_t errstr_size)
{
    snprintf(errstr, errstr_size,
             "%s the spill files in %s: %s (give --spill-dir a directory with room for the "
             "pair-keyed topics, or run without it)",
             what, s->dir, strerror(errno));
    return HF_ERR_IO;
}

int rc_spill_open(const char *dir, uint32_t shards, rc_spill_t **out, char *errstr,
                  size_t errstr_size)
{
    hf_assert(shards >= 2);
    rc_spill_t *s = calloc(1, sizeof *s);
    if (!s)
        return HF_ERR_NOMEM;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->files = shards;
    s->f = calloc(shards, sizeof *s->f);
    s->key = malloc(RC_SPILL_KEY_MAX);
    s->value = malloc(RC_SPILL_VALUE_MAX);
    int err = s->f && s->key && s->value ? HF_OK : HF_ERR_NOMEM;
    for (uint32_t i = 0; !err && i < shards; i++) {
        char path[320];
        snprintf(path, sizeof path, "%s/hfctl-reconcile-XXXXXX", s->dir);
        int fd = mkstemp(path);
        if (fd < 0) {
            err = spill_errno(s, "cannot create", errstr, errstr_size);
            break;
        }
        unlink(path); /* gone with the process, whatever happens */
        s->f[i].f = fdopen(fd, "w+b");
        s->f[i].iobuf = malloc(RC_SPILL_BUF_BYTES);
        if (!s->f[i].f || !s->f[i].iobuf) {
            if (!s->f[i].f)
                close(fd);
            err = HF_ERR_NOMEM;
            break;
        }
        setvbuf(s->f[i].f, s->f[i].iobuf, _IOFBF, RC_SPILL_BUF_BYTES);
    }
    if (err) {
        rc_spill_close(s);
        return err;
    }
    *out = s;
    return HF_OK;
}

void rc_spill_close(rc_spill_t *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; s->f && i < s->files; i++) {
        if (s->f[i].f)
            fclose(s->f[i].f);
        free(s->f[i].iobuf);
    }
    free(s->f);
    free(s->key);
    free(s->value);
    free(s);
}

uint64_t rc_spill_bytes_max(const rc_spill_t *s)
{
    return s ? s->bytes_max : 0;
}

int rc_spill_put(rc_spill_t *s, uint32_t file, uint8_t step, const kafka_msg_t *m, char *errstr,
                 size_t errstr_size)
{
    hf_assert(file < s->files && !s->f[file].reading);
    if (m->key_len > RC_SPILL_KEY_MAX || m->value_len > RC_SPILL_VALUE_MAX) {
        snprintf(errstr, errstr_size,
                 "%s [%d] offset %lld: a record larger than the spill takes (key %zu, value %zu "
                 "bytes): run without --spill-dir",
                 m->topic, (int)m->partition, (long long)m->offset, m->key_len, m->value_len);
        return HF_ERR_LIMIT;
    }
    spill_head_t h = {step, m->partition, m->offset, (uint32_t)m->key_len,
                      m->value ? (uint32_t)m->value_len : RC_SPILL_NO_VALUE};
    FILE *f = s->f[file].f;
    size_t value_len = m->value ? m->value_len : 0;
    if (fwrite(&h, sizeof h, 1, f) != 1 || (m->key_len && fwrite(m->key, m->key_len, 1, f) != 1) ||
        (value_len && fwrite(m->value, value_len, 1, f) != 1))
        return spill_errno(s, "cannot write", errstr, errstr_size);
    uint64_t bytes = sizeof h + m->key_len + value_len;
    s->f[file].entries++;
    s->f[file].bytes += bytes;
    s->bytes_now += bytes;
    if (s->bytes_now > s->bytes_max)
        s->bytes_max = s->bytes_now;
    return HF_OK;
}

int rc_spill_rewind(rc_spill_t *s, uint32_t file, char *errstr, size_t errstr_size)
{
    spill_file_t *sf = &s->f[file];
    if (fflush(sf->f) != 0 || fseek(sf->f, 0, SEEK_SET) != 0)
        return spill_errno(s, "cannot read back", errstr, errstr_size);
    sf->reading = true;
    sf->pending = false;
    sf->eof = false;
    return HF_OK;
}

/* Reads the next entry's head ahead. */
static int read_head(rc_spill_t *s, spill_file_t *sf, char *errstr, size_t errstr_size)
{
    if (sf->pending || sf->eof)
        return HF_OK;
    size_t n = fread(&sf->head, sizeof sf->head, 1, sf->f);
    if (n == 1) {
        sf->pending = true;
        return HF_OK;
    }
    if (ferror(sf->f))
        return spill_errno(s, "cannot read", errstr, errstr_size);
    sf->eof = true;
    return HF_OK;
}

int rc_spill_next(rc_spill_t *s, uint32_t file, uint8_t step, kafka_msg_t *m, bool *got,
                  char *errstr, size_t errstr_size)
{
    spill_file_t *sf = &s->f[file];
    hf_assert(sf->reading);
    *got = false;
    int err = read_head(s, sf, errstr, errstr_size);
    if (err || !sf->pending || sf->head.step != step)
        return err; /* the file is done with this step */
    const spill_head_t *h = &sf->head;
    uint32_t value_len = h->value_len == RC_SPILL_NO_VALUE ? 0 : h->value_len;
    if (h->key_len > RC_SPILL_KEY_MAX || value_len > RC_SPILL_VALUE_MAX ||
        (h->key_len && fread(s->key, h->key_len, 1, sf->f) != 1) ||
        (value_len && fread(s->value, value_len, 1, sf->f) != 1)) {
        snprintf(errstr, errstr_size, "the spill file in %s is damaged or was cut short", s->dir);
        return HF_ERR_IO;
    }
    memset(m, 0, sizeof *m);
    m->partition = h->partition;
    m->offset = h->offset;
    m->key = s->key;
    m->key_len = h->key_len;
    m->value = h->value_len == RC_SPILL_NO_VALUE ? NULL : s->value;
    m->value_len = value_len;
    sf->pending = false;
    *got = true;
    return HF_OK;
}

/* A shard's file is read once: its space goes back to the disk. */
void rc_spill_done(rc_spill_t *s, uint32_t file)
{
    spill_file_t *sf = &s->f[file];
    if (fflush(sf->f) == 0 && ftruncate(fileno(sf->f), 0) == 0) {
        s->bytes_now -= sf->bytes;
        sf->bytes = 0;
    }
}
