/* The per-SKU contention window (escrow_heat.h). One slot per (partition, sku)
 * in an open-addressed table: events are counted in whole seconds, the last
 * full second is the rate. A SKU enters escrow when a second (the last full
 * one, or the current one so far) reaches enter_per_s, stays while the rate is
 * at least half of that, and leaves after cool_ms below it. A new SKU takes
 * the coldest slot of its probe run when the table is full there. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escrow_heat.h"
#include "hf_assert.h"
#include "hf_limits.h"

typedef struct {
    bool used;
    bool hot;
    int32_t partition;
    char sku[HF_SKU_LEN_MAX + 1];
    int64_t second;     /* the second (now_ms / 1000) cur counts */
    uint32_t cur, prev; /* events in that second, in the one before */
    int64_t warm_at_ms; /* last time the rate was at least half of enter */
} heat_slot_t;

struct gw_heat {
    pthread_mutex_t mu;
    gw_heat_conf_t conf;
    heat_slot_t slots[HF_ESCROW_HEAT_SLOTS_MAX];
};

gw_heat_t *gw_heat_new(const gw_heat_conf_t *conf)
{
    hf_assert(conf->enter_per_s > 0 && conf->cool_ms >= 0);
    gw_heat_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->conf = *conf;
    pthread_mutex_init(&h->mu, NULL);
    return h;
}

void gw_heat_destroy(gw_heat_t *h)
{
    if (!h)
        return;
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static uint32_t hash_of(int32_t partition, const char *sku)
{
    uint32_t x = 2166136261u ^ (uint32_t)partition; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)sku; *p; p++)
        x = (x ^ *p) * 16777619u;
    return x;
}

/* Moves s's window to now's second. */
static void roll(heat_slot_t *s, int64_t now_ms)
{
    int64_t second = now_ms / 1000;
    if (second == s->second)
        return;
    s->prev = second == s->second + 1 ? s->cur : 0;
    s->cur = 0;
    s->second = second;
}

static uint32_t rate(const heat_slot_t *s)
{
    return s->cur > s->prev ? s->cur : s->prev;
}

/* Applies the thresholds to s at now_ms. */
static void settle(const gw_heat_conf_t *c, heat_slot_t *s, int64_t now_ms)
{
    roll(s, now_ms);
    uint32_t r = rate(s);
    if ((int64_t)r * 2 >= c->enter_per_s)
        s->warm_at_ms = now_ms;
    if (!s->hot && (int64_t)r >= c->enter_per_s)
        s->hot = true;
    else if (s->hot && now_ms - s->warm_at_ms >= c->cool_ms)
        s->hot = false;
}

/* The slot of (partition, sku), or NULL; with take, a free or the coldest
 * slot of the probe run is claimed for it. */
static heat_slot_t *find(gw_heat_t *h, int32_t partition, const char *sku, int64_t now_ms,
                         bool take)
{
    uint32_t at = hash_of(partition, sku);
    heat_slot_t *coldest = NULL;
    for (uint32_t i = 0; i < HF_ESCROW_HEAT_PROBE_MAX; i++) {
        heat_slot_t *s = &h->slots[(at + i) % HF_ESCROW_HEAT_SLOTS_MAX];
        if (s->used && s->partition == partition && strcmp(s->sku, sku) == 0)
            return s;
        if (!s->used) {
            coldest = s;
            break; /* a free slot ends the run: the key is not further on */
        }
        roll(s, now_ms);
        if (!s->hot && (!coldest || rate(s) < rate(coldest)))
            coldest = s;
    }
    if (!take || !coldest)
        return NULL;
    memset(coldest, 0, sizeof *coldest);
    coldest->used = true;
    coldest->partition = partition;
    snprintf(coldest->sku, sizeof coldest->sku, "%s", sku);
    coldest->second = now_ms / 1000;
    return coldest;
}

bool gw_heat_note(gw_heat_t *h, int32_t partition, const char *sku, int64_t now_ms, uint32_t weight)
{
    pthread_mutex_lock(&h->mu);
    heat_slot_t *s = find(h, partition, sku, now_ms, true);
    bool hot = false;
    if (s) {
        roll(s, now_ms);
        s->cur = s->cur > UINT32_MAX - weight ? UINT32_MAX : s->cur + weight;
        settle(&h->conf, s, now_ms);
        hot = s->hot;
    }
    pthread_mutex_unlock(&h->mu);
    return hot;
}

bool gw_heat_hot(gw_heat_t *h, int32_t partition, const char *sku, int64_t now_ms)
{
    pthread_mutex_lock(&h->mu);
    heat_slot_t *s = find(h, partition, sku, now_ms, false);
    bool hot = false;
    if (s) {
        settle(&h->conf, s, now_ms);
        hot = s->hot;
    }
    pthread_mutex_unlock(&h->mu);
    return hot;
}

int64_t gw_heat_hot_count(gw_heat_t *h, int64_t now_ms)
{
    int64_t n = 0;
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < HF_ESCROW_HEAT_SLOTS_MAX; i++)
        if (h->slots[i].used) {
            settle(&h->conf, &h->slots[i], now_ms);
            n += h->slots[i].hot;
        }
    pthread_mutex_unlock(&h->mu);
    return n;
}
