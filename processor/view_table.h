/* The routing view's table: the latest Availability of every SKU, packed for a
 * catalog of millions (the product's network is 2M SKUs x 50 warehouses).
 *
 * Per SKU: a 4-byte hash slot (the table is kept at most half full), a 32-byte
 * entry, its name once in a shared arena, and per warehouse 5 bytes (an
 * interned warehouse id and the available units, clamped to int32). About
 * 310 bytes for a SKU at 50 warehouses, 90 at 5. Not thread-safe: view.c locks.
 * What is kept of an Availability: sku, per warehouse id and available, total,
 * in_stock, updated_at_ms (not the escrow share: routing does not read it). */
#ifndef HF_VIEW_TABLE_H
#define HF_VIEW_TABLE_H

#include <stddef.h>

#include "hf_err.h"
#include "records.h"

typedef struct view_table view_table_t;

/* NULL when out of memory. */
view_table_t *view_table_new(void);
void view_table_destroy(view_table_t *t); /* accepts NULL */

/* Stores a (replacing the SKU's previous one). HF_ERR_LIMIT past
 * VIEW_TABLE_SKUS_MAX SKUs, 256 distinct warehouse ids or 4 GiB of vectors;
 * HF_ERR_NOMEM. On an error the table is unchanged for other SKUs. */
int view_table_apply(view_table_t *t, const hf_availability_t *a) HF_MUST_CHECK;

/* The SKU's latest Availability into out (escrow shares 0). HF_ERR_NOTFOUND
 * for a SKU never applied. */
int view_table_get(const view_table_t *t, const char *sku, hf_availability_t *out) HF_MUST_CHECK;

size_t view_table_size(const view_table_t *t); /* SKUs */
/* Bytes the table holds allocated (slots, entries, names, vectors): the view's
 * memory, as holdfast_gateway_view_bytes reports it. */
size_t view_table_bytes(const view_table_t *t);

#define VIEW_TABLE_SKUS_MAX (64u << 20)

#endif
