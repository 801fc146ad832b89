/* The warehouse table of the router, loaded from a JSON file (jansson): id,
 * location and outbound cost per unit of every warehouse. Loading validates
 * everything once so routing itself never meets a bad entry. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "route.h"

static int load_one(json_t *w, size_t i, route_warehouse_t *out, char *errstr, size_t errstr_size)
{
    json_t *id = json_object_get(w, "id"), *lat = json_object_get(w, "lat"),
           *lon = json_object_get(w, "lon"), *cost = json_object_get(w, "cost_per_unit");
    if (!json_is_string(id) || json_string_length(id) == 0 ||
        json_string_length(id) >= sizeof out->id || strchr(json_string_value(id), '|') ||
        !json_is_number(lat) || !json_is_number(lon) || !json_is_number(cost)) {
        snprintf(errstr, errstr_size,
                 "warehouse %zu needs id (1..%zu chars, no '|'), lat, lon, cost_per_unit", i,
                 sizeof out->id - 1);
        return HF_ERR_CONFIG;
    }
    snprintf(out->id, sizeof out->id, "%s", json_string_value(id));
    out->lat = json_number_value(lat);
    out->lon = json_number_value(lon);
    out->cost_per_unit = json_number_value(cost);
    json_t *kind = json_object_get(w, "kind");
    const char *k = json_is_string(kind) ? json_string_value(kind) : NULL;
    if (kind && (!k || (strcmp(k, "warehouse") != 0 && strcmp(k, "store") != 0))) {
        snprintf(errstr, errstr_size, "warehouse %s: kind must be \"warehouse\" or \"store\"",
                 out->id);
        return HF_ERR_CONFIG;
    }
    out->store = k && strcmp(k, "store") == 0;
    if (fabs(out->lat) > 90 || fabs(out->lon) > 180 || !(out->cost_per_unit >= 0)) {
        snprintf(errstr, errstr_size, "warehouse %s: lat/lon out of range or negative cost",
                 out->id);
        return HF_ERR_CONFIG;
    }
    return HF_OK;
}

int route_config_load(const char *path, route_config_t *cfg, char *errstr, size_t errstr_size)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        snprintf(errstr, errstr_size, "warehouses %s:%d: %s", path, jerr.line, jerr.text);
        return HF_ERR_CONFIG;
    }
    int err = HF_OK;
    json_t *arr = json_object_get(root, "warehouses");
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n == 0 || n > HF_WAREHOUSES_MAX) {
        snprintf(errstr, errstr_size, "warehouses %s: needs \"warehouses\": 1..%d entries", path,
                 HF_WAREHOUSES_MAX);
        err = HF_ERR_CONFIG;
        goto fail;
    }
    for (size_t i = 0; i < n && err == HF_OK; i++) {
        err = load_one(json_array_get(arr, i), i, &cfg->warehouses[i], errstr, errstr_size);
        for (size_t j = 0; j < i && err == HF_OK; j++)
            if (strcmp(cfg->warehouses[j].id, cfg->warehouses[i].id) == 0) {
                snprintf(errstr, errstr_size, "warehouse %s is listed twice",
                         cfg->warehouses[i].id);
                err = HF_ERR_CONFIG;
            }
    }
    if (err == HF_OK)
        cfg->warehouses_count = n;
fail:
    json_decref(root);
    return err;
}

const route_warehouse_t *route_warehouse(const route_config_t *cfg, const char *id)
{
    for (size_t i = 0; i < cfg->warehouses_count; i++)
        if (strcmp(cfg->warehouses[i].id, id) == 0)
            return &cfg->warehouses[i];
    return NULL;
}
