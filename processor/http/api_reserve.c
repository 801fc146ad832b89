/* POST /v1/reservations: a checkout starts. The JSON body becomes a Reserve:
 *   {"reservation_id": "r-1", "lines": [{"sku": "SKU-1", "qty": 2}],
 *    "ship_to": {"lat": 40.7, "lon": -74.0}, "ttl_ms": 600000, "campaign": "flash"}
 * reservation_id is required (the reservation's name: so the document can say
 * which bodies are whole); the Idempotency-Key header defaults to it; ship_to,
 * ttl_ms, campaign, only_warehouses (["STORE-12"]: pick-up there) and
 * allow_partial (hold what the network has of each line) are optional. What the gateway would refuse as invalid
 * and the front can see (a SKU in two lines, ttl_ms neither 0 nor in
 * [HF_TTL_MIN_MS, HF_TTL_MAX_MS]) is refused here, 422 invalid_field. 201 with
 * the allocations when held; the gateway's refusals are problems: 422
 * rejected_invalid (an unknown SKU), 409 insufficient. */
#include <string.h>

#include "hf_limits.h"
#include "http_api_int.h"

static bool take_lines(http_ctx_t *ctx, httpd_resp_t *resp, json_t *body, hf_reserve_t *r)
{
    json_t *lines = json_object_get(body, "lines");
    if (!json_is_array(lines) || json_array_size(lines) == 0 ||
        json_array_size(lines) > HF_LINES_MAX) {
        http_error(ctx, resp, 422, "invalid_field",
                   "'lines' must be an array of 1..%d {\"sku\", \"qty\"} objects", HF_LINES_MAX);
        return false;
    }
    static const char *const line_members[] = {"sku", "qty", NULL};
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l)
    {
        hf_line_t *dst = &r->lines[i];
        if (!json_is_object(l)) {
            http_error(ctx, resp, 422, "invalid_field", "lines[%zu] must be an object", i);
            return false;
        }
        if (!http_only_members(ctx, resp, l, line_members) ||
            !http_take_string(ctx, resp, l, "sku", NULL, dst->sku, sizeof dst->sku))
            return false;
        json_t *q = json_object_get(l, "qty");
        if (!json_is_integer(q) || json_integer_value(q) < 1 ||
            json_integer_value(q) > HF_QTY_MAX) {
            http_error(ctx, resp, 422, "invalid_field",
                       "lines[%zu].qty must be an integer in 1..%lld", i, (long long)HF_QTY_MAX);
            return false;
        }
        dst->qty = json_integer_value(q);
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->lines[j].sku, dst->sku) == 0) {
                http_error(ctx, resp, 422, "invalid_field",
                           "lines[%zu] and lines[%zu] both hold SKU '%s': merge them into one line",
                           j, i, dst->sku);
                return false;
            }
    }
    r->lines_count = (int32_t)json_array_size(lines);
    return true;
}

static bool take_ship_to(http_ctx_t *ctx, httpd_resp_t *resp, json_t *body, hf_reserve_t *r)
{
    json_t *g = json_object_get(body, "ship_to");
    r->ship_to.lat = 40.71; /* as hfctl: the default destination */
    r->ship_to.lon = -74.01;
    if (!g)
        return true;
    json_t *lat = json_object_get(g, "lat"), *lon = json_object_get(g, "lon");
    if (!json_is_object(g) || !json_is_number(lat) || !json_is_number(lon) ||
        json_object_size(g) != 2 || json_number_value(lat) < -90 || json_number_value(lat) > 90 ||
        json_number_value(lon) < -180 || json_number_value(lon) > 180) {
        http_error(ctx, resp, 422, "invalid_field",
                   "'ship_to' must be {\"lat\": -90..90, \"lon\": -180..180}");
        return false;
    }
    r->ship_to.lat = json_number_value(lat);
    r->ship_to.lon = json_number_value(lon);
    return true;
}

/* only_warehouses: 1..HF_ONLY_WAREHOUSES_MAX distinct warehouse ids (whether
 * they are in the warehouses file is the gateway's to say: 422 rejected_invalid). */
static bool take_only(http_ctx_t *ctx, httpd_resp_t *resp, json_t *body, hf_reserve_t *r)
{
    json_t *only = json_object_get(body, "only_warehouses");
    if (!only)
        return true;
    if (!json_is_array(only) || json_array_size(only) == 0 ||
        json_array_size(only) > HF_ONLY_WAREHOUSES_MAX) {
        http_error(ctx, resp, 422, "invalid_field",
                   "'only_warehouses' must be an array of 1..%d warehouse ids",
                   HF_ONLY_WAREHOUSES_MAX);
        return false;
    }
    size_t i;
    json_t *w;
    json_array_foreach(only, i, w)
    {
        hf_wh_ref_t *dst = &r->only_warehouses[i];
        char name[48];
        snprintf(name, sizeof name, "only_warehouses[%zu]", i);
        json_t *holder = json_pack("{s:O}", name, w);
        bool taken = holder && http_take_string(ctx, resp, holder, name, NULL, dst->warehouse_id,
                                                sizeof dst->warehouse_id);
        json_decref(holder);
        if (!taken)
            return false;
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->only_warehouses[j].warehouse_id, dst->warehouse_id) == 0) {
                http_error(ctx, resp, 422, "invalid_field",
                           "only_warehouses[%zu] and only_warehouses[%zu] are both '%s'", j, i,
                           dst->warehouse_id);
                return false;
            }
    }
    r->only_warehouses_count = (int32_t)json_array_size(only);
    return true;
}

void api_reserve(http_ctx_t *ctx, const http_call_t *call, httpd_resp_t *resp)
{
    static _Thread_local hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_RESERVE;
    hf_reserve_t *r = &rec.u.reserve;
    json_t *body = http_body_object(ctx, call, resp);
    if (!body)
        return;
    static const char *const members[] = {"reservation_id", "lines",    "ship_to",
                                          "ttl_ms",         "campaign", "only_warehouses",
                                          "allow_partial",  NULL};
    json_t *ttl = json_object_get(body, "ttl_ms");
    bool ok =
        http_only_members(ctx, resp, body, members) &&
        http_take_id(ctx, resp, body, "reservation_id", r->reservation_id,
                     sizeof r->reservation_id) &&
        http_idempotency_key(ctx, call, resp, r->reservation_id, r->idempotency_key,
                             sizeof r->idempotency_key) &&
        take_lines(ctx, resp, body, r) && take_ship_to(ctx, resp, body, r) &&
        take_only(ctx, resp, body, r) &&
        (!json_object_get(body, "campaign") ||
         http_take_string(ctx, resp, body, "campaign", NULL, r->campaign, sizeof r->campaign));
    if (ok && ttl) {
        json_int_t ttl_ms = json_is_integer(ttl) ? json_integer_value(ttl) : -1;
        if (ttl_ms != 0 && (ttl_ms < HF_TTL_MIN_MS || ttl_ms > HF_TTL_MAX_MS)) {
            http_error(ctx, resp, 422, "invalid_field",
                       "'ttl_ms' must be 0 (the default hold time) or an integer in %lld..%lld",
                       (long long)HF_TTL_MIN_MS, (long long)HF_TTL_MAX_MS);
            ok = false;
        } else {
            r->ttl_ms = json_integer_value(ttl);
        }
    }
    json_t *partial = json_object_get(body, "allow_partial");
    if (ok && partial && !json_is_boolean(partial)) {
        http_error(ctx, resp, 422, "invalid_field", "'allow_partial' must be true or false");
        ok = false;
    }
    r->allow_partial = json_is_true(partial);
    json_decref(body);
    if (ok) {
        snprintf(r->api_key_id, sizeof r->api_key_id, "%s", call->key_id);
        http_forward(ctx, call, resp, &rec, 201);
    }
}
