/* A recorded feeding history: every reconcile_* call kept with a copy of its
 * record and position, fed again into a fresh checker of any shard count, once
 * per shard. The unit tests record each history they build and prove with it
 * that K shards give the verdict, violations and counts of one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "reconcile_int.h"

typedef struct {
    rc_feed_t f;
    char *topic, *warehouse_id, *sku;
    hf_record_t *rec;
} rc_hist_entry_t;

struct reconcile_history {
    rc_hist_entry_t *entries;
    size_t count, cap, max;
};

int reconcile_feed(reconcile_t *rc, const rc_feed_t *f)
{
    const hf_record_t *r = f->rec;
    hf_assert(r || f->kind == RC_FEED_ESCROW_STATE);
    switch (f->kind) {
    case RC_FEED_DEAD_LETTER:
        return reconcile_dead_letter(rc, &r->u.dead_letter);
    case RC_FEED_COUNTER_STATE:
        return reconcile_counter_state(rc, &f->pos, f->warehouse_id, f->sku, &r->u.counter_state);
    case RC_FEED_ALLOTMENT_STATE:
        return reconcile_allotment_state(rc, &f->pos, f->warehouse_id, f->sku,
                                         &r->u.allotment_state);
    case RC_FEED_ESCROW_STATE:
        return reconcile_escrow_state(rc, &f->pos, f->warehouse_id, f->sku,
                                      r ? &r->u.escrow_state : NULL);
    case RC_FEED_STOCK_LEVEL:
        return reconcile_stock_level(rc, &f->pos, &r->u.stock_level);
    case RC_FEED_LEDGER:
        return reconcile_ledger(rc, &f->pos, &r->u.ledger_event);
    case RC_FEED_COUNTER_RESULT:
        return reconcile_counter_result(rc, &f->pos, &r->u.counter_result);
    case RC_FEED_ALLOTMENT_GRANT:
        return reconcile_allotment_grant(rc, &f->pos, &r->u.allotment_grant);
    case RC_FEED_COUNTER_INPUT:
        return reconcile_counter_input(rc, f->input, &f->pos, r);
    case RC_FEED_REPLY:
        return reconcile_reply(rc, &f->pos, &r->u.reply);
    }
    return HF_ERR_INVAL;
}

int reconcile_history_new(size_t feeds_max, reconcile_history_t **out)
{
    reconcile_history_t *h = calloc(1, sizeof *h);
    if (!h)
        return HF_ERR_NOMEM;
    h->max = feeds_max;
    *out = h;
    return HF_OK;
}

void reconcile_history_clear(reconcile_history_t *h)
{
    for (size_t i = 0; i < h->count; i++) {
        free(h->entries[i].topic);
        free(h->entries[i].warehouse_id);
        free(h->entries[i].sku);
        free(h->entries[i].rec);
    }
    h->count = 0;
}

void reconcile_history_destroy(reconcile_history_t *h)
{
    if (!h)
        return;
    reconcile_history_clear(h);
    free(h->entries);
    free(h);
}

size_t reconcile_history_count(const reconcile_history_t *h)
{
    return h->count;
}

static char *dup_or_null(const char *s, bool *failed)
{
    char *d = s ? strdup(s) : NULL;
    *failed |= s && !d;
    return d;
}

int reconcile_history_add(reconcile_history_t *h, const rc_feed_t *f)
{
    if (h->count == h->max)
        return HF_ERR_LIMIT;
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        rc_hist_entry_t *e = realloc(h->entries, cap * sizeof *e);
        if (!e)
            return HF_ERR_NOMEM;
        h->entries = e;
        h->cap = cap;
    }
    rc_hist_entry_t *e = &h->entries[h->count];
    memset(e, 0, sizeof *e);
    bool failed = false;
    e->topic = dup_or_null(f->pos.topic, &failed);
    e->warehouse_id = dup_or_null(f->warehouse_id, &failed);
    e->sku = dup_or_null(f->sku, &failed);
    if (f->rec) {
        e->rec = malloc(sizeof *e->rec);
        failed |= !e->rec;
        if (e->rec)
            memcpy(e->rec, f->rec, sizeof *e->rec);
    }
    e->f = *f;
    e->f.pos.topic = e->topic;
    e->f.warehouse_id = e->warehouse_id;
    e->f.sku = e->sku;
    e->f.rec = e->rec;
    h->count++;
    if (failed) {
        h->count--;
        free(e->topic);
        free(e->warehouse_id);
        free(e->sku);
        free(e->rec);
        return HF_ERR_NOMEM;
    }
    return HF_OK;
}

static int feed_all(const reconcile_history_t *h, reconcile_t *rc)
{
    int err = HF_OK;
    for (size_t i = 0; !err && i < h->count; i++)
        err = reconcile_feed(rc, &h->entries[i].f);
    return err;
}

int reconcile_history_replay(const reconcile_history_t *h, const reconcile_limits_t *lim,
                             int32_t gateway_partitions, uint32_t shards, bool quiescent,
                             reconcile_t **out)
{
    reconcile_t *rc = NULL;
    int err = reconcile_new(lim, &rc);
    if (!err)
        err = reconcile_set_shards(rc, shards);
    if (!err)
        reconcile_set_gateway_partitions(rc, gateway_partitions);
    for (uint32_t k = 0; !err && k < shards; k++) {
        err = feed_all(h, rc);
        if (!err && k + 1 < shards)
            err = reconcile_next_shard(rc, quiescent);
    }
    if (err) {
        reconcile_destroy(rc);
        return err;
    }
    reconcile_finish(rc, quiescent);
    *out = rc;
    return HF_OK;
}

/* Whether got (shards) judges as want: the same verdicts, violations of every
 * kind and counts; why names the first difference. */
static bool judged_alike(const reconcile_t *want, const reconcile_t *got, uint32_t shards,
                         char *why, size_t why_size)
{
    for (int k = 0; k < RC_K__COUNT; k++)
        if (reconcile_violations_of(want, (rc_kind_t)k) !=
            reconcile_violations_of(got, (rc_kind_t)k)) {
            snprintf(why, why_size, "%u shards: %zu %s, one shard %zu", shards,
                     reconcile_violations_of(got, (rc_kind_t)k), rc_kind_name((rc_kind_t)k),
                     reconcile_violations_of(want, (rc_kind_t)k));
            return false;
        }
    if (reconcile_violations_total(got) != reconcile_violations_total(want) ||
        reconcile_verdict(got, true) != reconcile_verdict(want, true) ||
        reconcile_verdict(got, false) != reconcile_verdict(want, false)) {
        snprintf(why, why_size, "%u shards: another verdict or violation total than one shard",
                 shards);
        return false;
    }
    rc_counts_t a, b;
    reconcile_counts(want, &a);
    reconcile_counts(got, &b);
    const int64_t *x = (const int64_t *)&a, *y = (const int64_t *)&b;
    for (size_t i = 0; i < sizeof a / sizeof *x; i++)
        if (x[i] != y[i]) {
            snprintf(why, why_size,
                     "%u shards: count #%zu (rc_counts_t order) is %lld, one shard %lld", shards, i,
                     (long long)y[i], (long long)x[i]);
            return false;
        }
    return true;
}

int reconcile_history_check(const reconcile_history_t *h, const reconcile_limits_t *lim,
                            int32_t gateway_partitions, const reconcile_t *rc, uint32_t shards_max,
                            char *why, size_t why_size)
{
    for (int q = 0; q < 2; q++) {
        if (rc->finished && rc->quiescent != (q == 1))
            continue;
        reconcile_t *one = NULL;
        int err = reconcile_history_replay(h, lim, gateway_partitions, 1, q == 1, &one);
        bool alike = !err && (!rc->finished || judged_alike(rc, one, 1, why, why_size));
        for (uint32_t k = 2; alike && k <= shards_max; k++) {
            reconcile_t *many = NULL;
            err = reconcile_history_replay(h, lim, gateway_partitions, k, q == 1, &many);
            alike =
                !err && reconcile_shards(many) == k && judged_alike(one, many, k, why, why_size);
            reconcile_destroy(many);
        }
        reconcile_destroy(one);
        if (err) {
            snprintf(why, why_size, "replaying the history: %s", hf_err_str(err));
            return err;
        }
        if (!alike)
            return HF_ERR_CORRUPT;
    }
    return HF_OK;
}
