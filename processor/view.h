/* The routing view: an in-memory copy of the whole compacted
 * holdfast.availability topic (every partition), kept current by a background
 * thread — a global table, as every gateway needs every SKU. Reads take
 * microseconds and never touch Kafka. Staleness (how long since the view last
 * applied a record or confirmed it is at the end of every partition) tells a
 * caller when to stop trusting it and degrade. */
#ifndef HF_VIEW_H
#define HF_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "kafka.h"
#include "records.h"

typedef struct view view_t;

/* Starts reading topic from the beginning of every partition (read_committed). */
int view_new(const kafka_conf_t *conf, const char *topic, view_t **v_out, char *errstr,
             size_t errstr_size) HF_MUST_CHECK;
/* Stops the thread and frees. Accepts NULL. */
void view_destroy(view_t *v);

/* Copies the latest Availability of sku into out. HF_ERR_NOTFOUND if the view
 * has never seen the sku. Thread-safe. */
int view_get(view_t *v, const char *sku, hf_availability_t *out) HF_MUST_CHECK;

/* Milliseconds since the view was last known current (caught up with the end of
 * every partition, or applied a record); -1 before it first caught up. */
int64_t view_staleness_ms(const view_t *v);

/* Blocks until the view has caught up with the end of every partition once, or
 * timeout_ms passes (HF_ERR_TIMEOUT). */
int view_wait_ready(view_t *v, int timeout_ms) HF_MUST_CHECK;

/* Number of SKUs in the view. */
size_t view_size(view_t *v);
/* Bytes the view's table holds (view_table.h). */
size_t view_bytes(view_t *v);

#endif
