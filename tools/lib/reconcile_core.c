/* The reconciler's shared core: creating and destroying the checker, its
 * shards (the pair-keyed tables kept for one shard at a time, the end of each
 * shard's pass and of the whole), recording violations (all counted, the first
 * few kept whole), the verdict rule, the lag histograms and the small key and
 * digest helpers the checks share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "reconcile_int.h"

static const struct {
    const char *name;
    int check;
    rc_scope_t scope;
} kinds[RC_K__COUNT] = {
#define RC_KIND_ROW(id, name, check, scope) {name, check, scope},
    RC_KIND_MAP(RC_KIND_ROW)
#undef RC_KIND_ROW
};

const char *rc_kind_name(rc_kind_t k)
{
    return k < RC_K__COUNT ? kinds[k].name : "?";
}
int rc_kind_check(rc_kind_t k)
{
    return k < RC_K__COUNT ? kinds[k].check : 0;
}
rc_scope_t rc_kind_scope(rc_kind_t k)
{
    return k < RC_K__COUNT ? kinds[k].scope : RC_SCOPE_RECORD;
}

void reconcile_limits_default(reconcile_limits_t *lim)
{
    lim->pairs_max = RC_PAIRS_MAX_DEFAULT;
    lim->holds_max = RC_HOLDS_MAX_DEFAULT;
    lim->reservations_max = RC_RESERVATIONS_MAX_DEFAULT;
    lim->reply_keys_max = RC_REPLY_KEYS_MAX_DEFAULT;
    lim->sales_max = RC_SALES_MAX_DEFAULT;
    lim->allotments_max = RC_ALLOTMENTS_MAX_DEFAULT;
    lim->dead_letters_max = RC_DEAD_LETTERS_MAX_DEFAULT;
    lim->violations_shown_max = RC_VIOLATIONS_SHOWN_DEFAULT;
    lim->expiry_lag_max_ms = RC_EXPIRY_LAG_MAX_MS_DEFAULT;
}

/* The tables of one shard's pairs, empty. */
static int shard_tables_init(reconcile_t *rc)
{
    const reconcile_limits_t *lim = &rc->lim;
    int err = rc_map_init(&rc->pairs, sizeof(rc_pair_t), lim->pairs_max);
    if (!err)
        err = rc_map_init(&rc->holds, sizeof(rc_hold_t), lim->holds_max);
    if (!err)
        err = rc_map_init(&rc->sales, sizeof(rc_sale_t), lim->sales_max);
    if (!err)
        err = rc_map_init(&rc->allots, sizeof(rc_allot_t), lim->allotments_max);
    /* Every pair has at most one stream per input topic and one escrow book. */
    rc_vec_init(&rc->streams, sizeof(rc_stream_t), 2 * lim->pairs_max);
    rc_vec_init(&rc->escrows, sizeof(rc_escrow_pair_t), lim->pairs_max);
    return err;
}

static void shard_tables_free(reconcile_t *rc)
{
    rc_map_free(&rc->pairs);
    rc_map_free(&rc->holds);
    rc_map_free(&rc->sales);
    rc_map_free(&rc->allots);
    rc_vec_free(&rc->streams);
    rc_vec_free(&rc->escrows);
}

int reconcile_new(const reconcile_limits_t *lim, reconcile_t **out)
{
    reconcile_t *rc = calloc(1, sizeof *rc);
    if (!rc)
        return HF_ERR_NOMEM;
    rc->lim = *lim;
    rc->shards = 1;
    int err = shard_tables_init(rc);
    if (!err)
        err = rc_map_init(&rc->res, sizeof(rc_res_t), lim->reservations_max);
    if (!err)
        err = rc_map_init(&rc->replies, sizeof(rc_reply_key_t), lim->reply_keys_max);
    if (!err)
        err = rc_map_init(&rc->dead, 1, lim->dead_letters_max);
    if (!err)
        err = rc_map_init(&rc->gw_live, 1, lim->allotments_max);
    rc->shown =
        calloc(lim->violations_shown_max ? lim->violations_shown_max : 1, sizeof *rc->shown);
    rc->gw_lag.buckets = calloc(RC_LAG_BUCKETS, sizeof(uint32_t));
    rc->counter_lag.buckets = calloc(RC_LAG_BUCKETS, sizeof(uint32_t));
    if (!err && (!rc->shown || !rc->gw_lag.buckets || !rc->counter_lag.buckets))
        err = HF_ERR_NOMEM;
    if (err) {
        reconcile_destroy(rc);
        return err;
    }
    *out = rc;
    return HF_OK;
}

void reconcile_destroy(reconcile_t *rc)
{
    if (!rc)
        return;
    shard_tables_free(rc);
    rc_map_free(&rc->res);
    rc_map_free(&rc->replies);
    rc_map_free(&rc->dead);
    rc_map_free(&rc->gw_live);
    free(rc->shown);
    free(rc->gw_lag.buckets);
    free(rc->counter_lag.buckets);
    free(rc);
}

/* ---- shards */

static uint64_t mix64(uint64_t x);

uint32_t reconcile_pair_shard(const char *warehouse_id, const char *sku, uint32_t shards)
{
    if (shards <= 1)
        return 0;
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = warehouse_id; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    h = (h ^ '|') * 1099511628211ULL;
    for (const char *s = sku; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return (uint32_t)(mix64(h) % shards);
}

bool rc_in_shard(const reconcile_t *rc, const char *warehouse_id, const char *sku)
{
    return rc->shards == 1 || reconcile_pair_shard(warehouse_id, sku, rc->shards) == rc->shard;
}

int reconcile_set_shards(reconcile_t *rc, uint32_t shards)
{
    if (shards < 1 || shards > RC_SHARDS_MAX)
        return HF_ERR_INVAL;
    /* Only before the first record: nothing may be tabled under another split. */
    hf_assert(rc->shard == 0 && rc->pairs.count == 0 && rc->res.count == 0 && !rc->finished);
    rc->shards = shards;
    return HF_OK;
}

uint32_t reconcile_shards(const reconcile_t *rc)
{
    return rc->shards;
}

uint32_t reconcile_shard(const reconcile_t *rc)
{
    return rc->shard;
}

static void tables_now(const reconcile_t *rc, rc_tables_t *t)
{
    t->pairs = rc->pairs.count;
    t->holds = rc->holds.count;
    t->reservations = rc->res.count;
    t->reply_keys = rc->replies.count;
    t->sales = rc->sales.count;
    t->allotments = rc->allots.count;
    t->dead_letters = rc->dead.count;
    t->bytes = rc_map_bytes(&rc->pairs) + rc_map_bytes(&rc->holds) + rc_map_bytes(&rc->res) +
               rc_map_bytes(&rc->replies) + rc_map_bytes(&rc->dead) + rc_map_bytes(&rc->sales) +
               rc_map_bytes(&rc->allots) + rc_map_bytes(&rc->gw_live) + rc_vec_bytes(&rc->streams) +
               rc_vec_bytes(&rc->escrows);
}

#define RC_MAX_OF(a, b) ((a) > (b) ? (a) : (b))

static void note_peak(reconcile_t *rc)
{
    rc_tables_t t;
    tables_now(rc, &t);
    rc_tables_t *p = &rc->peak;
    p->pairs = RC_MAX_OF(p->pairs, t.pairs);
    p->holds = RC_MAX_OF(p->holds, t.holds);
    p->reservations = RC_MAX_OF(p->reservations, t.reservations);
    p->reply_keys = RC_MAX_OF(p->reply_keys, t.reply_keys);
    p->sales = RC_MAX_OF(p->sales, t.sales);
    p->allotments = RC_MAX_OF(p->allotments, t.allotments);
    p->dead_letters = RC_MAX_OF(p->dead_letters, t.dead_letters);
    p->bytes = RC_MAX_OF(p->bytes, t.bytes);
}

void reconcile_tables_peak(const reconcile_t *rc, rc_tables_t *out)
{
    *out = rc->peak;
    rc_tables_t t;
    tables_now(rc, &t);
    out->pairs = RC_MAX_OF(out->pairs, t.pairs);
    out->holds = RC_MAX_OF(out->holds, t.holds);
    out->reservations = RC_MAX_OF(out->reservations, t.reservations);
    out->reply_keys = RC_MAX_OF(out->reply_keys, t.reply_keys);
    out->sales = RC_MAX_OF(out->sales, t.sales);
    out->allotments = RC_MAX_OF(out->allotments, t.allotments);
    out->dead_letters = RC_MAX_OF(out->dead_letters, t.dead_letters);
    out->bytes = RC_MAX_OF(out->bytes, t.bytes);
}

static void set_quiescent(reconcile_t *rc, bool quiescent)
{
    hf_assert(!rc->quiescent_set || rc->quiescent == quiescent); /* one rule for every shard */
    rc->quiescent = quiescent;
    rc->quiescent_set = true;
}

/* The end of one shard's pass: its pairs judged, what they hold added to the
 * reservations (in this order: each step reads what the ones before filled). */
static void finish_shard(reconcile_t *rc)
{
    rc_finish_pairs(rc);
    rc_finish_open_units(rc);
    rc_finish_escrow_held(rc);
    rc_finish_escrow(rc);
    rc_finish_sales(rc);
    note_peak(rc);
}

int reconcile_next_shard(reconcile_t *rc, bool quiescent)
{
    hf_assert(!rc->finished && rc->shard + 1 < rc->shards);
    set_quiescent(rc, quiescent);
    finish_shard(rc);
    rc->done.pairs += rc->pairs.count;
    rc->done.holds += rc->holds.count;
    rc->done.sales += rc->sales.count;
    rc->done.allotments += rc->allots.count;
    shard_tables_free(rc);
    if (rc->shard == 0) {
        /* Read once, in shard 0's pass: the count stays, the keys go. */
        rc->n.reply_keys = rc->replies.count;
        rc_map_free(&rc->replies);
        rc_map_free(&rc->gw_live);
    }
    rc->shard++;
    return shard_tables_init(rc);
}

void reconcile_finish(reconcile_t *rc, bool quiescent)
{
    if (rc->finished)
        return;
    rc->finished = true;
    set_quiescent(rc, quiescent);
    finish_shard(rc);
    rc_finish_reservations(rc);
}

/* ---- what pairs keep apart */

int rc_stream_get(reconcile_t *rc, uint32_t pair_idx, rc_input_t input, rc_stream_t **out)
{
    rc_pair_t *p = rc_map_val(&rc->pairs, pair_idx);
    if (!p->stream[input]) {
        uint32_t idx;
        int err = rc_vec_push(&rc->streams, &idx);
        if (err)
            return err;
        p->stream[input] = idx + 1;
    }
    *out = rc_vec_at(&rc->streams, p->stream[input] - 1);
    return HF_OK;
}

const rc_stream_t *rc_stream_peek(const reconcile_t *rc, const rc_pair_t *p, rc_input_t input)
{
    static const rc_stream_t none;
    return p->stream[input] ? rc_vec_at(&rc->streams, p->stream[input] - 1) : &none;
}

int rc_escrow_pair_get(reconcile_t *rc, uint32_t pair_idx, rc_escrow_pair_t **out)
{
    rc_pair_t *p = rc_map_val(&rc->pairs, pair_idx);
    if (!p->escrow) {
        uint32_t idx;
        int err = rc_vec_push(&rc->escrows, &idx);
        if (err)
            return err;
        p->escrow = idx + 1;
    }
    *out = rc_vec_at(&rc->escrows, p->escrow - 1);
    return HF_OK;
}

rc_escrow_pair_t *rc_escrow_pair_peek(const reconcile_t *rc, const rc_pair_t *p)
{
    return p->escrow ? rc_vec_at(&rc->escrows, p->escrow - 1) : NULL;
}

void rc_violation(reconcile_t *rc, rc_kind_t kind, const char *key, const rc_pos_t *pos,
                  const char *fmt, ...)
{
    rc->total++;
    rc->by_kind[kind]++;
    if (rc->shown_count >= rc->lim.violations_shown_max)
        return;
    rc_violation_t *v = &rc->shown[rc->shown_count++];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    snprintf(v->key, sizeof v->key, "%s", key ? key : "");
    v->offset = -1;
    if (pos) {
        snprintf(v->topic, sizeof v->topic, "%s", pos->topic ? pos->topic : "");
        v->partition = pos->partition;
        v->offset = pos->offset;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
}

void reconcile_foreign(reconcile_t *rc, const rc_pos_t *pos, const char *what)
{
    rc_violation(rc, RC_K_FOREIGN_RECORD, NULL, pos, "%s", what);
}

size_t reconcile_violations_total(const reconcile_t *rc)
{
    return rc->total;
}

size_t reconcile_violations_of(const reconcile_t *rc, rc_kind_t kind)
{
    return kind < RC_K__COUNT ? rc->by_kind[kind] : 0;
}

size_t reconcile_violations_in_scope(const reconcile_t *rc, rc_scope_t scope)
{
    size_t n = 0;
    for (int k = 0; k < RC_K__COUNT; k++)
        if (kinds[k].scope == scope)
            n += rc->by_kind[k];
    return n;
}

size_t reconcile_violations_shown(const reconcile_t *rc, const rc_violation_t **out)
{
    *out = rc->shown;
    return rc->shown_count;
}

rc_verdict_t reconcile_verdict(const reconcile_t *rc, bool snapshot_quiet)
{
    if (reconcile_violations_in_scope(rc, RC_SCOPE_RECORD) > 0)
        return RC_FAIL;
    if (rc->total == 0)
        return RC_PASS;
    return snapshot_quiet ? RC_FAIL : RC_INCONCLUSIVE;
}

const char *rc_verdict_name(rc_verdict_t v)
{
    return v == RC_PASS ? "PASS" : v == RC_FAIL ? "FAIL" : "INCONCLUSIVE";
}

void reconcile_counts(const reconcile_t *rc, rc_counts_t *out)
{
    *out = rc->n;
    out->pairs = rc->done.pairs + rc->pairs.count;
    out->holds = rc->done.holds + rc->holds.count;
    out->reservations = rc->res.count;
    out->reply_keys = rc->shard == 0 ? rc->replies.count : rc->n.reply_keys;
    out->expiries = rc->gw_lag.count;
    out->gateway_expiry_lag_ms_max = rc->gw_lag.max;
    out->gateway_expiry_lag_ms_p99 = rc_lag_p99(&rc->gw_lag);
    out->counter_expiry_releases = rc->counter_lag.count;
    out->counter_expiry_lag_ms_max = rc->counter_lag.max;
    out->counter_expiry_lag_ms_p99 = rc_lag_p99(&rc->counter_lag);
}

/* ---- helpers */

size_t rc_pair_key(char *out, const char *warehouse_id, const char *sku)
{
    int n = snprintf(out, RC_KEY_LEN_MAX, "%s|%s", warehouse_id, sku);
    return n < 0 ? 0 : (size_t)n < RC_KEY_LEN_MAX ? (size_t)n : RC_KEY_LEN_MAX - 1;
}

int rc_pair_get(reconcile_t *rc, const char *warehouse_id, const char *sku, uint32_t *idx)
{
    hf_assert(rc_in_shard(rc, warehouse_id, sku)); /* its caller filters by shard */
    char key[RC_KEY_LEN_MAX];
    size_t len = rc_pair_key(key, warehouse_id, sku);
    return rc_map_upsert(&rc->pairs, key, len, idx, NULL);
}

size_t rc_key_rid_len(const char *key, size_t len, int fields)
{
    int bars = 0;
    for (size_t i = len; i > 0; i--)
        if (key[i - 1] == '|' && ++bars == fields)
            return i - 1;
    return 0;
}

size_t rc_hold_key(char *out, const char *reservation_id, int32_t attempt, const char *warehouse_id,
                   const char *sku)
{
    int n = snprintf(out, RC_KEY_LEN_MAX, "%s|%d|%s|%s", reservation_id, (int)attempt, warehouse_id,
                     sku);
    return n < 0 ? 0 : (size_t)n < RC_KEY_LEN_MAX ? (size_t)n : RC_KEY_LEN_MAX - 1;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

uint32_t rc_str_hash32(const char *s)
{
    return (uint32_t)mix64(str_hash(s));
}

uint64_t rc_level_digest(int64_t version, int64_t on_hand, int64_t reserved, int64_t safety,
                         int64_t shortfall, int64_t allotted, int64_t escrow_balance)
{
    const int64_t f[] = {version, on_hand, reserved, safety, shortfall, allotted, escrow_balance};
    uint64_t d = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        d = mix64(d ^ (uint64_t)f[i]) + i;
    return d;
}

/* A sum of mixed per-allocation hashes: the same set in any order digests
 * the same. */
uint64_t rc_allocations_digest(const hf_allocation_t *a, int32_t count)
{
    uint64_t d = mix64((uint64_t)count);
    for (int32_t i = 0; i < count && i < HF_ALLOCATIONS_MAX; i++)
        d += mix64(str_hash(a[i].warehouse_id) * 31 + str_hash(a[i].sku) * 7 + (uint64_t)a[i].qty);
    return d;
}

void rc_lag_add(rc_lag_t *l, int64_t lag_ms)
{
    int64_t b = lag_ms < 0 ? 0 : lag_ms / RC_LAG_BUCKET_MS;
    if (b >= RC_LAG_BUCKETS)
        b = RC_LAG_BUCKETS - 1;
    l->buckets[b]++;
    if (l->count == 0 || lag_ms > l->max)
        l->max = lag_ms;
    l->count++;
}

/* Upper bound of the bucket holding the 99th percentile. */
int64_t rc_lag_p99(const rc_lag_t *l)
{
    if (l->count == 0)
        return 0;
    size_t want = l->count - l->count / 100, seen = 0;
    for (int64_t b = 0; b < RC_LAG_BUCKETS; b++) {
        seen += l->buckets[b];
        if (seen >= want)
            return (b + 1) * RC_LAG_BUCKET_MS < l->max ? (b + 1) * RC_LAG_BUCKET_MS : l->max;
    }
    return l->max;
}
