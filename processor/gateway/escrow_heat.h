/* How contended each SKU is, per gateway partition: the sliding rate of its
 * reserves and refused holds that switches it to escrow (docs/ESCROW.md) on
 * its own, with hysteresis so it does not flap. Process-wide, bounded, in
 * memory only: both modes are correct side by side, so a restart that forgets
 * it only starts the SKU direct again. Thread-safe (one mutex). */
#ifndef HF_ESCROW_HEAT_H
#define HF_ESCROW_HEAT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gw_heat gw_heat_t;

typedef struct {
    int64_t enter_per_s; /* events/s over the last full second that switch escrow on */
    int64_t cool_ms;     /* on until the rate stays under half of enter_per_s this long */
} gw_heat_conf_t;

/* NULL when out of memory. */
gw_heat_t *gw_heat_new(const gw_heat_conf_t *conf);
void gw_heat_destroy(gw_heat_t *h); /* accepts NULL */
/* Counts weight events (a reserve line, a refused hold) of sku at partition at
 * now_ms; true when the SKU is in escrow there afterwards. */
bool gw_heat_note(gw_heat_t *h, int32_t partition, const char *sku, int64_t now_ms,
                  uint32_t weight);
/* Whether sku is in escrow at partition at now_ms (its cool-down applied). */
bool gw_heat_hot(gw_heat_t *h, int32_t partition, const char *sku, int64_t now_ms);
/* SKU x partition entries in escrow now (a gauge). */
int64_t gw_heat_hot_count(gw_heat_t *h, int64_t now_ms);

#endif
