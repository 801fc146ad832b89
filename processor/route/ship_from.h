/* Per-SKU ship-from lists: the warehouses a SKU may be shipped from (hazardous
 * goods from licensed sites only, oversize items from the DCs with the dock for
 * them). A catalog of millions of SKUs does not fit a config string, so they
 * come from a file of their own (ship_from_file), one SKU a line:
 *
 *   # sku   warehouses it may ship from
 *   SKU-00042 US-NYC,US-CHI
 *   SKU-00077 EU-BER
 *
 * A SKU not in the file ships from anywhere. A line whose first non-blank
 * character is '#' is a comment (a SKU starting with '#' cannot be listed). Every warehouse named must be in
 * the warehouses file and not of kind store (a store's shelf is for pick-up,
 * which names the store itself: route.h); a SKU listed twice, an empty list or
 * a line over HF_SHIP_FROM_LINE_MAX is refused at load with its line number.
 * Read-only once loaded: lookups from any thread. */
#ifndef HF_SHIP_FROM_H
#define HF_SHIP_FROM_H

#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "route/route.h"

typedef struct ship_from ship_from_t;

/* Loads path against routes (warehouse i of routes is bit i of a mask). */
int ship_from_load(const char *path, const route_config_t *routes, ship_from_t **out, char *errstr,
                   size_t errstr_size) HF_MUST_CHECK;
/* The warehouses sku may ship from, bit i for routes->warehouses[i]; 0: it has
 * no list (anywhere). sf may be NULL (no file). */
uint64_t ship_from_mask(const ship_from_t *sf, const char *sku);
/* SKUs with a list. */
size_t ship_from_count(const ship_from_t *sf);
void ship_from_free(ship_from_t *sf);

#endif
