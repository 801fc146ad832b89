/* The fake stage (fake_stage.h): every function of processor/stage.h over a
 * state store in a temporary directory, with outputs captured instead of
 * produced, and the driver that runs a stage's handlers as the task loop does.
 * It exists so the handler tests of every stage share one fake instead of each
 * carrying its own copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fake_stage.h"
#include "topics.h"

/* ---- what a handler may do (stage.h) */

int64_t stage_now_ms(const stage_ctx_t *ctx)
{
    return ctx->now_ms;
}

void *stage_env(const stage_ctx_t *ctx)
{
    return ctx->env;
}

int32_t stage_partition(const stage_ctx_t *ctx)
{
    return ctx->partition;
}

void stage_set_partition(stage_ctx_t *ctx, int32_t partition)
{
    ctx->partition = partition;
}

int64_t stage_record_timestamp_ms(const stage_ctx_t *ctx)
{
    return ctx->record_timestamp_ms;
}

int64_t stage_input_timestamp_ms(const stage_ctx_t *ctx, hf_rec_type_t type)
{
    return ctx->input_type == (int)type ? ctx->record_timestamp_ms : -1;
}

int stage_metrics(const stage_ctx_t *ctx)
{
    (void)ctx;
    return -1; /* no metrics slot: handlers' observations are not kept */
}

const void *stage_record_key(const stage_ctx_t *ctx, size_t *key_len)
{
    *key_len = ctx->key_len;
    return ctx->key;
}

static int written_add(stage_ctx_t *ctx, const char *key, size_t key_len)
{
    for (size_t i = 0; i < ctx->written_count; i++) {
        const fake_stage_written_t *w = &ctx->written[i];
        if (w->partition == ctx->partition && w->key_len == key_len &&
            memcmp(w->key, key, key_len) == 0)
            return HF_OK;
    }
    if (ctx->written_count == ctx->written_cap) {
        size_t cap = ctx->written_cap ? ctx->written_cap * 2 : 64;
        fake_stage_written_t *w = realloc(ctx->written, cap * sizeof *w);
        if (!w)
            return HF_ERR_NOMEM;
        ctx->written = w;
        ctx->written_cap = cap;
    }
    fake_stage_written_t *w = &ctx->written[ctx->written_count++];
    w->partition = ctx->partition;
    memcpy(w->key, key, key_len);
    w->key_len = key_len;
    return HF_OK;
}

int stage_get(stage_ctx_t *ctx, const char *key, size_t key_len, hf_record_t *rec)
{
    size_t len = 0;
    int err = state_get(ctx->st, ctx->buf, ctx->partition, key, key_len, ctx->valbuf,
                        sizeof ctx->valbuf, &len);
    if (err)
        return err;
    if (codec_decode(ctx->valbuf, len, rec, ctx->errstr, sizeof ctx->errstr) != HF_OK)
        return HF_ERR_CORRUPT;
    return HF_OK;
}

int stage_put_raw(stage_ctx_t *ctx, const char *key, size_t key_len, const void *val,
                  size_t val_len)
{
    if (key_len > HF_STATE_KEY_LEN_MAX)
        return HF_ERR_LIMIT;
    int err = state_put(ctx->buf, ctx->partition, key, key_len, val, val_len);
    return err ? err : written_add(ctx, key, key_len);
}

int stage_put(stage_ctx_t *ctx, const char *key, size_t key_len, const hf_record_t *rec)
{
    return stage_put_as(ctx, key, key_len, rec->type, &rec->u);
}

int stage_get_as(stage_ctx_t *ctx, const char *key, size_t key_len, hf_rec_type_t type, void *dst)
{
    size_t len = 0;
    int err = state_get(ctx->st, ctx->buf, ctx->partition, key, key_len, ctx->valbuf,
                        sizeof ctx->valbuf, &len);
    if (err)
        return err;
    if (codec_decode_as(ctx->valbuf, len, type, dst, ctx->errstr, sizeof ctx->errstr) != HF_OK)
        return HF_ERR_CORRUPT;
    return HF_OK;
}

int stage_put_as(stage_ctx_t *ctx, const char *key, size_t key_len, hf_rec_type_t type,
                 const void *src)
{
    size_t len = 0;
    int err = codec_encode_as(type, src, ctx->valbuf, sizeof ctx->valbuf, &len, ctx->errstr,
                              sizeof ctx->errstr);
    if (err)
        return err;
    return stage_put_raw(ctx, key, key_len, ctx->valbuf, len);
}

int stage_del(stage_ctx_t *ctx, const char *key, size_t key_len)
{
    if (key_len > HF_STATE_KEY_LEN_MAX)
        return HF_ERR_LIMIT;
    int err = state_del(ctx->buf, ctx->partition, key, key_len);
    return err ? err : written_add(ctx, key, key_len);
}

int stage_put_local(stage_ctx_t *ctx, const char *key, size_t key_len, const void *val,
                    size_t val_len)
{
    if (key_len > HF_STATE_KEY_LEN_MAX || val_len == 0)
        return HF_ERR_LIMIT;
    return state_put(ctx->buf, ctx->partition, key, key_len, val, val_len);
}

int stage_del_local(stage_ctx_t *ctx, const char *key, size_t key_len)
{
    if (key_len > HF_STATE_KEY_LEN_MAX)
        return HF_ERR_LIMIT;
    return state_del(ctx->buf, ctx->partition, key, key_len);
}

state_iter_t *stage_iter(stage_ctx_t *ctx, const char *prefix, size_t prefix_len, bool reverse)
{
    return state_iter_new(ctx->st, ctx->buf, ctx->partition, prefix, prefix_len, reverse);
}

static int emit(stage_ctx_t *ctx, int topic_id, const char *topic, const char *key, size_t key_len,
                const hf_record_t *rec)
{
    size_t len = 0; /* the task encodes every output; one that does not encode is a failure */
    int err =
        codec_encode(rec, ctx->valbuf, sizeof ctx->valbuf, &len, ctx->errstr, sizeof ctx->errstr);
    if (err)
        return err;
    if (key_len > HF_STATE_KEY_LEN_MAX || strlen(topic) > HF_TOPIC_LEN_MAX)
        return HF_ERR_LIMIT;
    if (ctx->emits_count == ctx->emits_cap) {
        size_t cap = ctx->emits_cap ? ctx->emits_cap * 2 : 64;
        fake_stage_emit_t *e = realloc(ctx->emits, cap * sizeof *e);
        if (!e)
            return HF_ERR_NOMEM;
        ctx->emits = e;
        ctx->emits_cap = cap;
    }
    fake_stage_emit_t *e = &ctx->emits[ctx->emits_count++];
    e->topic_id = topic_id;
    snprintf(e->topic, sizeof e->topic, "%s", topic);
    memcpy(e->key, key, key_len);
    e->key_len = key_len;
    e->rec = *rec;
    return HF_OK;
}

int stage_emit(stage_ctx_t *ctx, hf_topic_id_t topic, const char *key, size_t key_len,
               const hf_record_t *rec)
{
    return emit(ctx, (int)topic, topic_name(topic), key, key_len, rec);
}

int stage_emit_to(stage_ctx_t *ctx, const char *topic, const char *key, size_t key_len,
                  const hf_record_t *rec)
{
    return emit(ctx, -1, topic, key, key_len, rec);
}

int stage_reject(stage_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->reject_reason, sizeof ctx->reject_reason, fmt, ap);
    va_end(ap);
    return HF_ERR_INVAL;
}

int stage_foreach_written(stage_ctx_t *ctx, stage_key_fn fn)
{
    /* fn may write more keys; visit those present at the start, as the task does. */
    size_t n = ctx->written_count;
    for (size_t i = 0; i < n; i++) {
        fake_stage_written_t w = ctx->written[i]; /* a copy: fn may grow the array */
        ctx->partition = w.partition;
        int err = fn(ctx, w.partition, w.key, w.key_len);
        if (err)
            return err;
    }
    return HF_OK;
}

/* ---- lifetime and driving (what the task loop does around a handler) */

stage_ctx_t *fake_stage_new(const char *name, int64_t now_ms)
{
    stage_ctx_t *ctx = calloc(1, sizeof *ctx);
    assert_non_null(ctx);
    int n = snprintf(ctx->dir, sizeof ctx->dir, "/tmp/hf_test_%s.XXXXXX", name);
    assert_true(n > 0 && (size_t)n < sizeof ctx->dir);
    assert_non_null(mkdtemp(ctx->dir));
    if (state_open(ctx->dir, NULL, &ctx->st, ctx->errstr, sizeof ctx->errstr) != HF_OK)
        fail_msg("state_open: %s", ctx->errstr);
    ctx->buf = state_buf_new(ctx->st);
    assert_non_null(ctx->buf);
    ctx->now_ms = now_ms;
    ctx->input_type = -1;
    return ctx;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

void fake_stage_destroy(stage_ctx_t *ctx)
{
    if (!ctx)
        return;
    state_buf_destroy(ctx->buf);
    state_close(ctx->st);
    nftw(ctx->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (size_t i = 0; i < ctx->changelog_count; i++)
        free(ctx->changelog[i].val);
    free(ctx->changelog);
    free(ctx->emits);
    free(ctx->written);
    free(ctx);
}

int32_t fake_stage_partition_of(const char *key)
{
    uint32_t h = 0;
    for (const char *p = key; *p; p++)
        h = h * 31 + (unsigned char)*p;
    return (int32_t)(h % FAKE_STAGE_PARTITIONS);
}

static const stage_handler_t *handler_for(const stage_def_t *def, hf_rec_type_t type)
{
    for (size_t i = 0; i < def->handlers_count; i++)
        if (def->handlers[i].type == type)
            return &def->handlers[i];
    return NULL;
}

int fake_stage_apply(stage_ctx_t *ctx, const stage_def_t *def, const char *key,
                     const hf_record_t *rec)
{
    size_t n = strlen(key);
    assert_true(n < sizeof ctx->key);
    memcpy(ctx->key, key, n);
    ctx->key_len = n;
    ctx->partition = fake_stage_partition_of(key);
    ctx->reject_reason[0] = '\0';
    size_t writes_before = state_buf_count(ctx->buf);
    size_t written_before = ctx->written_count, emits_before = ctx->emits_count;
    const stage_handler_t *h = handler_for(def, rec->type);
    assert_non_null(h);
    ctx->input_type = (int)rec->type;
    int err = h->handle(ctx, rec);
    ctx->input_type = -1;
    if (err == HF_ERR_INVAL) {
        assert_int_equal(state_buf_count(ctx->buf), writes_before);
        assert_int_equal(ctx->written_count, written_before);
        assert_int_equal(ctx->emits_count, emits_before);
        assert_true(ctx->reject_reason[0] != '\0');
    } else {
        assert_int_equal(err, HF_OK);
    }
    return err;
}

/* What the task's changelog would hold for written key w: its value at the end
 * of the transaction, or a tombstone. */
static void changelog_add(stage_ctx_t *ctx, const fake_stage_written_t *w)
{
    if (ctx->changelog_count == ctx->changelog_cap) {
        size_t cap = ctx->changelog_cap ? ctx->changelog_cap * 2 : 256;
        fake_stage_changelog_t *c = realloc(ctx->changelog, cap * sizeof *c);
        assert_non_null(c);
        ctx->changelog = c;
        ctx->changelog_cap = cap;
    }
    fake_stage_changelog_t *c = &ctx->changelog[ctx->changelog_count++];
    c->partition = w->partition;
    memcpy(c->key, w->key, w->key_len);
    c->key_len = w->key_len;
    size_t len = 0;
    int err = state_get(ctx->st, NULL, w->partition, w->key, w->key_len, ctx->valbuf,
                        sizeof ctx->valbuf, &len);
    assert_true(err == HF_OK || err == HF_ERR_NOTFOUND);
    c->val = NULL;
    c->val_len = 0;
    if (err == HF_OK) {
        c->val = malloc(len ? len : 1);
        assert_non_null(c->val);
        memcpy(c->val, ctx->valbuf, len);
        c->val_len = len;
    }
}

void fake_stage_changelog_raw(stage_ctx_t *ctx, int32_t partition, const char *key, size_t key_len,
                              const void *val, size_t val_len)
{
    fake_stage_written_t w = {.partition = partition, .key_len = key_len};
    assert_true(key_len <= sizeof w.key);
    memcpy(w.key, key, key_len);
    changelog_add(ctx, &w); /* a tombstone: the key is not in the store */
    fake_stage_changelog_t *c = &ctx->changelog[ctx->changelog_count - 1];
    if (val) {
        c->val = malloc(val_len ? val_len : 1);
        assert_non_null(c->val);
        memcpy(c->val, val, val_len);
        c->val_len = val_len;
    }
}

void fake_stage_commit(stage_ctx_t *ctx)
{
    if (state_buf_write(ctx->st, ctx->buf, ctx->errstr, sizeof ctx->errstr) != HF_OK)
        fail_msg("state_buf_write: %s", ctx->errstr);
    for (size_t i = 0; i < ctx->written_count; i++)
        changelog_add(ctx, &ctx->written[i]);
    ctx->written_count = 0;
}

void fake_stage_restore(stage_ctx_t *ctx, const stage_def_t *def)
{
    assert_int_equal(state_buf_count(ctx->buf), 0);
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++)
        if (state_drop_partition(ctx->st, p, ctx->errstr, sizeof ctx->errstr) != HF_OK)
            fail_msg("state_drop_partition: %s", ctx->errstr);
    for (size_t i = 0; i < ctx->changelog_count; i++) {
        const fake_stage_changelog_t *c = &ctx->changelog[i];
        ctx->partition = c->partition;
        if (def->local_tags && strchr(def->local_tags, c->key[0]))
            continue; /* as task.c: derived keys are rebuilt, never restored */
        hf_record_t rec;
        const hf_record_t *recp = NULL;
        bool derives = def->reindex && def->reindex_tags && strchr(def->reindex_tags, c->key[0]);
        if (derives && c->val) {
            if (codec_decode(c->val, c->val_len, &rec, ctx->errstr, sizeof ctx->errstr) != HF_OK)
                fail_msg("changelog value of %.*s: %s", (int)c->key_len, c->key, ctx->errstr);
            recp = &rec;
        }
        if (derives)
            assert_int_equal(def->reindex(ctx, c->key, c->key_len, recp), HF_OK);
        int err = c->val ? state_put(ctx->buf, c->partition, c->key, c->key_len, c->val, c->val_len)
                         : state_del(ctx->buf, c->partition, c->key, c->key_len);
        assert_int_equal(err, HF_OK);
    }
    if (state_buf_write(ctx->st, ctx->buf, ctx->errstr, sizeof ctx->errstr) != HF_OK)
        fail_msg("state_buf_write: %s", ctx->errstr);
}

const fake_warehouse_t fake_warehouses[FAKE_WAREHOUSES_COUNT] = {
    {"W1", 40.71, -74.01},  /* New York */
    {"W2", 41.88, -87.63},  /* Chicago */
    {"W3", 34.05, -118.24}, /* Los Angeles */
    {"W4", 32.78, -96.80},  /* Dallas */
    {"W5", 33.75, -84.39},  /* Atlanta */
    {"W6", 47.61, -122.33}, /* Seattle */
};

void fake_stage_routes(route_config_t *routes)
{
    for (size_t i = 0; i < FAKE_WAREHOUSES_COUNT; i++) {
        route_warehouse_t *w = &routes->warehouses[routes->warehouses_count++];
        snprintf(w->id, sizeof w->id, "%s", fake_warehouses[i].id);
        w->lat = fake_warehouses[i].lat;
        w->lon = fake_warehouses[i].lon;
        w->cost_per_unit = 1.0;
    }
    routes->weight_distance = 0.45;
    routes->weight_cost = 0.25;
    routes->weight_fill = 0.30;
}
