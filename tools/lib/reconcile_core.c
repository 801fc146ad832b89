/* The reconciler's shared core: creating and destroying the checker, recording
 * violations (all counted, the first few kept whole), the verdict rule, the
 * lag histograms and the small key and digest helpers the checks share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int reconcile_new(const reconcile_limits_t *lim, reconcile_t **out)
{
    reconcile_t *rc = calloc(1, sizeof *rc);
    if (!rc)
        return HF_ERR_NOMEM;
    rc->lim = *lim;
    int err = rc_map_init(&rc->pairs, sizeof(rc_pair_t), lim->pairs_max);
    if (!err)
        err = rc_map_init(&rc->holds, sizeof(rc_hold_t), lim->holds_max);
    if (!err)
        err = rc_map_init(&rc->res, sizeof(rc_res_t), lim->reservations_max);
    if (!err)
        err = rc_map_init(&rc->replies, sizeof(rc_reply_key_t), lim->reply_keys_max);
    if (!err)
        err = rc_map_init(&rc->dead, 1, lim->dead_letters_max);
    if (!err)
        err = rc_map_init(&rc->sales, sizeof(rc_sale_t), lim->sales_max);
    if (!err)
        err = rc_map_init(&rc->allots, sizeof(rc_allot_t), lim->allotments_max);
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
    rc_map_free(&rc->pairs);
    rc_map_free(&rc->holds);
    rc_map_free(&rc->res);
    rc_map_free(&rc->replies);
    rc_map_free(&rc->dead);
    rc_map_free(&rc->sales);
    rc_map_free(&rc->allots);
    free(rc->shown);
    free(rc->gw_lag.buckets);
    free(rc->counter_lag.buckets);
    free(rc);
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
    out->pairs = rc->pairs.count;
    out->holds = rc->holds.count;
    out->reservations = rc->res.count;
    out->reply_keys = rc->replies.count;
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
