/* GET /v1/reservations/{id}: the reservation's latest state, from the front's
 * store of holdfast.ledger (http_status.h): its last LedgerEvent (kind HELD,
 * COMMITTED, RELEASED, EXPIRED, REJECTED or LATE_PAYMENT) with the allocations
 * it held, as the JSON `hfctl tail` prints. 404 when the ledger has none. An
 * extension is not a ledger event: expires_at_ms is the one the hold was
 * given (the extend reply carries the new one). */
#include <string.h>

#include "http_api_int.h"

void api_status(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    static _Thread_local hf_record_t rec;
    rec.type = HF_REC_LEDGER_EVENT;
    char rid[HF_ID_LEN_MAX + 1];
    if (!http_path_id(ctx, call, resp, rid, sizeof rid))
        return;
    int err = http_status_get(ctx->status, rid, HTTP_STATUS_WAIT_MS, &rec.u.ledger_event);
    int64_t stale_ms = http_status_staleness_ms(ctx->status);
    if (err == HF_ERR_NOTFOUND && (stale_ms < 0 || stale_ms > ctx->cfg->view_stale_max_ms)) {
        /* Not found in a store that is behind the ledger proves nothing. */
        http_error(ctx, resp, 503, "not_current",
                   "the reservation store is %s the ledger; ask again",
                   stale_ms < 0 ? "still catching up with" : "behind");
        return;
    }
    if (err == HF_ERR_NOTFOUND) {
        http_error(ctx, resp, 404, "not_found", "no reservation '%s' in the ledger", rid);
        return;
    }
    if (err) {
        http_error(ctx, resp, 500, "store",
                   "reservation store: %s (the front's log says more; restarting it reopens the "
                   "store)",
                   hf_err_name(err));
        return;
    }
    http_record_json(ctx, resp, 200, &rec);
}
