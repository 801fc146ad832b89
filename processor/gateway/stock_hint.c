/* The counters' last answers per pair (stock_hint.h). One slot per pair in an
 * open-addressed table of HF_STOCK_HINT_SLOTS_MAX; a probe run of at most
 * HF_STOCK_HINT_PROBE_MAX slots; a new pair takes a free slot of its run or
 * the one noted longest ago. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_limits.h"
#include "stock_hint.h"

typedef struct {
    bool used;
    hf_wh_t warehouse_id;
    hf_sku_t sku;
    int64_t sellable;
    int64_t noted_at_ms;
    int64_t probe_at_ms; /* a shopper was let route on the view then; 0: none */
} hint_slot_t;

struct gw_hint {
    pthread_mutex_t mu;
    int64_t ttl_ms;
    hint_slot_t slots[HF_STOCK_HINT_SLOTS_MAX];
};

gw_hint_t *gw_hint_new(int64_t ttl_ms)
{
    hf_assert(ttl_ms > 0);
    gw_hint_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ttl_ms = ttl_ms;
    pthread_mutex_init(&h->mu, NULL);
    return h;
}

void gw_hint_destroy(gw_hint_t *h)
{
    if (!h)
        return;
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static uint32_t hash_of(const char *warehouse_id, const char *sku)
{
    uint32_t x = 2166136261u; /* FNV-1a over "warehouse|sku" */
    for (const unsigned char *p = (const unsigned char *)warehouse_id; *p; p++)
        x = (x ^ *p) * 16777619u;
    x = (x ^ '|') * 16777619u;
    for (const unsigned char *p = (const unsigned char *)sku; *p; p++)
        x = (x ^ *p) * 16777619u;
    return x;
}

/* The pair's slot, or NULL; with take, a free or the stalest slot of the run
 * is claimed for it (emptied). */
static hint_slot_t *find(gw_hint_t *h, const char *warehouse_id, const char *sku, bool take)
{
    uint32_t at = hash_of(warehouse_id, sku);
    hint_slot_t *stalest = NULL;
    for (uint32_t i = 0; i < HF_STOCK_HINT_PROBE_MAX; i++) {
        hint_slot_t *s = &h->slots[(at + i) % HF_STOCK_HINT_SLOTS_MAX];
        if (s->used && strcmp(s->sku, sku) == 0 && strcmp(s->warehouse_id, warehouse_id) == 0)
            return s;
        if (!s->used) {
            stalest = s;
            break; /* a free slot ends the run: the pair is not further on */
        }
        if (!stalest || s->noted_at_ms < stalest->noted_at_ms)
            stalest = s;
    }
    if (!take)
        return NULL;
    memset(stalest, 0, sizeof *stalest);
    stalest->used = true;
    snprintf(stalest->warehouse_id, sizeof stalest->warehouse_id, "%s", warehouse_id);
    snprintf(stalest->sku, sizeof stalest->sku, "%s", sku);
    return stalest;
}

void gw_hint_note(gw_hint_t *h, const char *warehouse_id, const char *sku, int64_t sellable,
                  int64_t now_ms)
{
    hf_assert(sellable >= 0);
    pthread_mutex_lock(&h->mu);
    hint_slot_t *s = find(h, warehouse_id, sku, true);
    /* Answers of one pair reach this process out of order (results are keyed
     * by reservation): an older one does not replace a newer. */
    if (now_ms >= s->noted_at_ms) {
        s->sellable = sellable;
        s->noted_at_ms = now_ms;
        s->probe_at_ms = 0;
    }
    pthread_mutex_unlock(&h->mu);
}

void gw_hint_add(gw_hint_t *h, const char *warehouse_id, const char *sku, int64_t qty)
{
    hf_assert(qty > 0);
    pthread_mutex_lock(&h->mu);
    hint_slot_t *s = find(h, warehouse_id, sku, false);
    if (s)
        s->sellable = s->sellable > INT64_MAX - qty ? INT64_MAX : s->sellable + qty;
    pthread_mutex_unlock(&h->mu);
}

static bool in_flight(const gw_hint_t *h, const hint_slot_t *s, int64_t now_ms)
{
    return s->probe_at_ms != 0 && now_ms - s->probe_at_ms < h->ttl_ms;
}

void gw_hint_take(gw_hint_t *h, const char *warehouse_id, const char *sku, int64_t qty,
                  int64_t now_ms)
{
    hf_assert(qty > 0);
    pthread_mutex_lock(&h->mu);
    hint_slot_t *s = find(h, warehouse_id, sku, false);
    if (s) {
        s->sellable = s->sellable > qty ? s->sellable - qty : 0;
        /* A Hold to a pair whose hint is stale is its probe. */
        if (now_ms - s->noted_at_ms >= h->ttl_ms && !in_flight(h, s, now_ms))
            s->probe_at_ms = now_ms;
    }
    pthread_mutex_unlock(&h->mu);
}

/* Whether the slot's figure stands in for the view's at now_ms: while fresh,
 * and while stale (under two TTLs old) with a probe out, whose answer will
 * refresh it. Otherwise the view decides: the next Hold there probes. */
static bool usable(const gw_hint_t *h, const hint_slot_t *s, int64_t now_ms)
{
    int64_t age_ms = now_ms - s->noted_at_ms;
    if (age_ms < h->ttl_ms)
        return true;
    return age_ms < 2 * h->ttl_ms && in_flight(h, s, now_ms);
}

int gw_hint_apply(gw_hint_t *h, hf_availability_t *av, int64_t now_ms)
{
    int rewritten = 0;
    pthread_mutex_lock(&h->mu);
    for (int32_t w = 0; w < av->warehouses_count; w++) {
        hf_wh_available_t *wa = &av->warehouses[w];
        hint_slot_t *s = find(h, wa->warehouse_id, av->sku, false);
        if (!s || !usable(h, s, now_ms))
            continue;
        wa->available = s->sellable;
        if (wa->escrow > wa->available)
            wa->escrow = wa->available;
        rewritten++;
    }
    pthread_mutex_unlock(&h->mu);
    if (rewritten == 0)
        return 0;
    av->total = 0;
    for (int32_t w = 0; w < av->warehouses_count; w++)
        av->total += av->warehouses[w].available;
    return rewritten;
}
