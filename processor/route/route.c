/* The routing rules as pure functions: rank a SKU's candidate warehouses for one
 * line and choose a single warehouse, the fewest-warehouse split, or (without a
 * usable view) the nearest warehouse. Nothing here reads Kafka or state. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "route.h"

typedef struct {
    const route_warehouse_t *w;
    int64_t available;
    double distance_km;
    double score;
} candidate_t;

double route_distance_km(double lat1, double lon1, double lat2, double lon2)
{
    const double r_km = 6371.0, rad = M_PI / 180.0;
    double dlat = (lat2 - lat1) * rad, dlon = (lon2 - lon1) * rad;
    double a = sin(dlat / 2) * sin(dlat / 2) +
               cos(lat1 * rad) * cos(lat2 * rad) * sin(dlon / 2) * sin(dlon / 2);
    return 2 * r_km * atan2(sqrt(a), sqrt(1 - a));
}

static bool excluded(const route_line_t *line, const char *id)
{
    for (size_t i = 0; i < line->exclude_count; i++)
        if (strcmp(line->exclude[i], id) == 0)
            return true;
    return false;
}

bool route_may_use(const route_config_t *cfg, const route_line_t *line, const route_warehouse_t *w)
{
    bool named = false;
    for (size_t i = 0; i < line->only_count && !named; i++)
        named = strcmp(line->only[i].warehouse_id, w->id) == 0;
    if (w->store) /* its shelf: only for a pick-up that names it */
        return named;
    size_t idx = (size_t)(w - cfg->warehouses);
    hf_assert(idx < cfg->warehouses_count && idx < 64);
    if (line->ship_from && !(line->ship_from >> idx & 1))
        return false;
    return line->only_count == 0 || named;
}

static void plan_add(route_plan_t *out, const char *wh, const char *sku, int64_t qty)
{
    hf_assert(out->count < HF_SPLITS_MAX && qty > 0);
    hf_allocation_t *a = &out->items[out->count++];
    memset(a, 0, sizeof *a);
    strncpy(a->warehouse_id, wh, sizeof a->warehouse_id - 1);
    strncpy(a->sku, sku, sizeof a->sku - 1);
    a->qty = qty;
}

/* No usable view: the nearest configured warehouse takes the whole line. */
static route_result_t route_nearest(const route_config_t *cfg, const route_line_t *line,
                                    route_plan_t *out)
{
    const route_warehouse_t *best = NULL;
    double best_km = 0;
    for (size_t i = 0; i < cfg->warehouses_count; i++) {
        const route_warehouse_t *w = &cfg->warehouses[i];
        if (excluded(line, w->id) || !route_may_use(cfg, line, w))
            continue;
        double km = route_distance_km(line->ship_to.lat, line->ship_to.lon, w->lat, w->lon);
        if (!best || km < best_km) {
            best = w;
            best_km = km;
        }
    }
    if (!best)
        return ROUTE_INSUFFICIENT;
    plan_add(out, best->id, line->sku, line->qty);
    return ROUTE_DEGRADED;
}

static size_t gather_candidates(const route_config_t *cfg, const route_line_t *line, candidate_t *c)
{
    size_t n = 0;
    double dmax = 0, cmax = 0;
    for (int32_t i = 0; i < line->avail->warehouses_count && i < HF_WAREHOUSES_MAX; i++) {
        const hf_wh_available_t *wa = &line->avail->warehouses[i];
        const route_warehouse_t *w = route_warehouse(cfg, wa->warehouse_id);
        if (!w || wa->available <= 0 || excluded(line, w->id) || !route_may_use(cfg, line, w))
            continue;
        c[n] = (candidate_t){
            w, wa->available,
            route_distance_km(line->ship_to.lat, line->ship_to.lon, w->lat, w->lon), 0};
        dmax = fmax(dmax, c[n].distance_km);
        cmax = fmax(cmax, w->cost_per_unit);
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        double fill =
            c[i].available >= line->qty ? 1.0 : (double)c[i].available / (double)line->qty;
        c[i].score = cfg->weight_distance * (dmax > 0 ? c[i].distance_km / dmax : 0) +
                     cfg->weight_cost * (cmax > 0 ? c[i].w->cost_per_unit / cmax : 0) +
                     cfg->weight_fill * (1.0 - fill);
    }
    return n;
}

static int by_score(const void *a, const void *b)
{
    const candidate_t *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return strcmp(x->w->id, y->w->id); /* deterministic across processes */
}

/* Sum of the `slots` largest available among candidates from index `from` on. */
static int64_t largest_sum(const candidate_t *c, size_t n, size_t from, size_t slots)
{
    int64_t sum = 0;
    bool used[HF_WAREHOUSES_MAX] = {false};
    for (size_t s = 0; s < slots; s++) {
        size_t best = n;
        for (size_t i = from; i < n; i++)
            if (!used[i] && (best == n || c[i].available > c[best].available))
                best = i;
        if (best == n)
            break;
        used[best] = true;
        sum += c[best].available;
    }
    return sum;
}

/* The fewest warehouses that can cover qty (k_min), or 0 if more than allowed. */
static size_t fewest_count(const candidate_t *c, size_t n, int64_t qty)
{
    for (size_t k = 1; k <= n && k <= HF_SPLITS_MAX; k++)
        if (largest_sum(c, n, 0, k) >= qty)
            return k;
    return 0;
}

route_result_t route_line(const route_config_t *cfg, const route_line_t *line, route_plan_t *out)
{
    out->count = 0;
    hf_assert(line->qty > 0);
    if (!line->avail)
        return route_nearest(cfg, line, out);
    candidate_t c[HF_WAREHOUSES_MAX];
    size_t n = gather_candidates(cfg, line, c);
    qsort(c, n, sizeof c[0], by_score);
    for (size_t i = 0; i < n; i++) /* rule 1: one shipment beats any split */
        if (c[i].available >= line->qty) {
            plan_add(out, c[i].w->id, line->sku, line->qty);
            return ROUTE_OK;
        }
    size_t k_min = fewest_count(c, n, line->qty);
    if (k_min == 0)
        return ROUTE_INSUFFICIENT;
    /* Greedy by score, taking a candidate only if what is left can still be
     * covered by the candidates after it within k_min warehouses: the best-scored
     * split among the fewest (a cover always remains, so the loop completes). */
    int64_t remaining = line->qty;
    size_t taken = 0;
    for (size_t i = 0; i < n && remaining > 0; i++) {
        int64_t take = c[i].available < remaining ? c[i].available : remaining;
        size_t slots_left = k_min - taken - 1;
        if (remaining - take > 0 && largest_sum(c, n, i + 1, slots_left) < remaining - take)
            continue;
        taken++;
        remaining -= take;
        plan_add(out, c[i].w->id, line->sku, take);
    }
    hf_assert(remaining == 0 && taken == k_min);
    return ROUTE_OK;
}

int64_t route_coverable(const route_config_t *cfg, const route_line_t *line)
{
    if (!line->avail)
        return 0;
    candidate_t c[HF_WAREHOUSES_MAX];
    size_t n = gather_candidates(cfg, line, c);
    int64_t most = largest_sum(c, n, 0, HF_SPLITS_MAX);
    return most < line->qty ? most : line->qty;
}

route_strategy_fn route_strategy_for(const char *sku)
{
    (void)sku;
    return route_line;
}
