/* Routing: which warehouses hold a line of a reservation. Pure functions over a
 * warehouse table (locations, outbound cost) and one SKU's availability vector,
 * so every rule is unit-tested without Kafka. Rules (DESIGN.md section 5): a
 * single warehouse covering the line beats any split; candidates rank by
 * score = w_distance * distance + w_cost * cost + w_fill * (1 - fill), each term
 * normalised to [0, 1], lower is better; a split goes over the fewest warehouses;
 * a missing or stale view degrades to the single nearest warehouse and lets the
 * counter arbitrate. A strategy seam (route_strategy_for) lets a SKU be routed
 * another way later (the pessimistic path through the aggregator). */
#ifndef HF_ROUTE_H
#define HF_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "records.h"

typedef struct {
    hf_wh_t id;
    double lat, lon;
    double cost_per_unit;
    /* kind "store": its stock is its shelf's, held only for reservations that
     * name it (pick-up), never routed to otherwise. */
    bool store;
} route_warehouse_t;

typedef struct {
    route_warehouse_t warehouses[HF_WAREHOUSES_MAX];
    size_t warehouses_count;
    double weight_distance, weight_cost, weight_fill; /* fractions, sum ~1 */
} route_config_t;

/* Loads {"warehouses": [{"id", "lat", "lon", "cost_per_unit", "kind"?}...]} from
 * path; kind is "warehouse" (the default) or "store".
 * Weights are left as they are in cfg (set them before or after). */
int route_config_load(const char *path, route_config_t *cfg, char *errstr,
                      size_t errstr_size) HF_MUST_CHECK;
const route_warehouse_t *route_warehouse(const route_config_t *cfg, const char *id);

/* Great-circle distance, kilometres. */
double route_distance_km(double lat1, double lon1, double lat2, double lon2);

typedef enum {
    ROUTE_OK = 0,       /* allocations cover qty */
    ROUTE_DEGRADED,     /* no usable view: one allocation at the nearest warehouse */
    ROUTE_INSUFFICIENT, /* the view says the network cannot cover qty */
} route_result_t;

/* One line to route. avail == NULL means the view has nothing usable (missing or
 * stale): degrade. exclude names warehouses not to use (already refused or
 * already holding this line), exclude_count of them. only, when only_count > 0,
 * names the only warehouses the line may go to (a pick-up store, a retailer's
 * choice), stores included; with none, any warehouse but a store. ship_from,
 * when not 0, is the SKU's ship-from list (ship_from.h: bit i for
 * cfg->warehouses[i]), which bounds the warehouses but not a store named for
 * pick-up. Degrading keeps to the same candidates. */
typedef struct {
    const char *sku;
    int64_t qty;
    hf_geo_t ship_to;
    const hf_availability_t *avail;
    const char *const *exclude;
    size_t exclude_count;
    const hf_wh_ref_t *only;
    size_t only_count;
    uint64_t ship_from;
} route_line_t;

/* Whether line may go to w (one of cfg's) at all (only, stores, ship_from),
 * exclude aside. */
bool route_may_use(const route_config_t *cfg, const route_line_t *line, const route_warehouse_t *w);

typedef struct {
    hf_allocation_t items[HF_SPLITS_MAX];
    size_t count;
} route_plan_t;

/* The optimistic strategy: route on the cached view; the counter arbitrates. */
route_result_t route_line(const route_config_t *cfg, const route_line_t *line, route_plan_t *out);

/* The most units of line the view lets its candidates cover within
 * HF_SPLITS_MAX warehouses, at most line->qty (a partial hold routes that
 * many); 0 without a view. */
int64_t route_coverable(const route_config_t *cfg, const route_line_t *line);

/* The strategy seam: today every SKU is routed optimistically. */
typedef route_result_t (*route_strategy_fn)(const route_config_t *cfg, const route_line_t *line,
                                            route_plan_t *out);
route_strategy_fn route_strategy_for(const char *sku);

#endif
