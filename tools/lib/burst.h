/* `hfctl burst`: a burst of concurrent single-unit holds on one SKU spread over
 * warehouses, with live progress read back from the results topic, and a verdict:
 * units held never exceed the stock, and no StockLevel ever went negative. The
 * demo's first act; the full load generator is hfbench. */
#ifndef HF_BURST_H
#define HF_BURST_H

#include <stddef.h>

#include "hf_err.h"

typedef struct {
    const char *bootstrap;
    const char *sku;
    const char *warehouses; /* "W1,W2,W3" */
    size_t holds;           /* total holds */
    int producers;          /* concurrent producer threads */
    int timeout_ms;         /* how long to wait for every result */
} burst_opts_t;

/* Prints progress lines and a JSON verdict on stdout. HF_ERR_CORRUPT when the
 * verdict fails (oversold or negative), HF_ERR_TIMEOUT when results are missing. */
int burst_run(const burst_opts_t *o, char *errstr, size_t errstr_size) HF_MUST_CHECK;

#endif
