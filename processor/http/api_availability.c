/* GET /v1/availability/{sku}: the SKU's routing view (its last Availability
 * record: per-warehouse available units, the total and the debounced in_stock
 * flag), read from this process's copy of the compacted availability topic
 * (Kafka Streams' interactive-query convention: a local view, no Kafka round
 * trip). 404 when the SKU was never stocked. */
#include <string.h>

#include "http_api_int.h"

void api_availability(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    static _Thread_local hf_record_t rec;
    rec.type = HF_REC_AVAILABILITY;
    const char *sku = call->params[0];
    size_t len = strlen(sku);
    bool ok = len <= HF_SKU_LEN_MAX && strcmp(sku, ".") != 0 && strcmp(sku, "..") != 0;
    for (const unsigned char *p = (const unsigned char *)sku; ok && *p; p++)
        ok = *p >= 0x20 && *p < 0x7f && *p != '|' && *p != '/';
    if (!ok) {
        http_error(ctx, resp, 422, "invalid_sku",
                   "a SKU is 1..%d printable ASCII characters without '|' (and, to be read "
                   "here, without '/' and not '.' or '..': it is a path segment)",
                   HF_SKU_LEN_MAX);
        return;
    }
    if (view_get(ctx->view, sku, &rec.u.availability) != HF_OK) {
        http_error(ctx, resp, 404, "not_found", "no availability for SKU '%s'", sku);
        return;
    }
    http_record_json(ctx, resp, 200, &rec);
}
