/* Per-SKU ship-from lists (ship_from.h): the file read once at start into an
 * arena of SKU names and an open-addressing table (linear probing, at most half
 * full) of (name, warehouse mask). About 30 bytes a SKU besides its name: two
 * million restricted SKUs take ~100 MB, read once, shared by every task. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_limits.h"
#include "ship_from.h"

typedef struct {
    uint64_t mask;
    uint32_t sku_off; /* into the arena */
    uint32_t line;    /* where it was listed, for a duplicate's message */
} entry_t;

struct ship_from {
    entry_t *entries;
    size_t count, cap;
    char *arena; /* NUL-terminated names */
    size_t arena_len, arena_cap;
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t slots_mask;
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 1024;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

/* The mask of a comma-separated list of warehouse ids; 0 with why on error. */
static uint64_t parse_list(char *list, const route_config_t *routes, char *why, size_t why_size)
{
    uint64_t mask = 0;
    char *save = NULL;
    if (strstr(list, ",,") || list[0] == ',' || (list[0] && list[strlen(list) - 1] == ',')) {
        snprintf(why, why_size, "an empty warehouse id in \"%.64s\"", list);
        return 0;
    }
    for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*w))
            w++;
        char *end = w + strlen(w);
        while (end > w && isspace((unsigned char)end[-1]))
            *--end = '\0';
        const route_warehouse_t *wh = route_warehouse(routes, w);
        if (!wh) {
            snprintf(why, why_size, "warehouse \"%.64s\" is not in the warehouses file", w);
            return 0;
        }
        if (wh->store) {
            snprintf(why, why_size,
                     "%.64s is a store: a store sells for pick-up, which names it itself", w);
            return 0;
        }
        mask |= 1ULL << (size_t)(wh - routes->warehouses);
    }
    if (!mask)
        snprintf(why, why_size, "no warehouse listed");
    return mask;
}

/* One line: "" or a comment, or "sku w1,w2" (its end of line removed). */
static int parse_line(ship_from_t *sf, char *line, uint32_t line_no, const route_config_t *routes,
                      char *why, size_t why_size)
{
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
    char *end = line + len; /* trailing blanks: the list's, trimmed */
    while (end > line && isspace((unsigned char)end[-1]))
        *--end = '\0';
    if (line_no == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0) {
        snprintf(why, why_size, "starts with a UTF-8 byte order mark: save the file without it");
        return HF_ERR_CONFIG;
    }
    char *p = line;
    while (isspace((unsigned char)*p))
        p++;
    if (!*p || *p == '#')
        return HF_OK;
    char *sku = p;
    while (*p && !isspace((unsigned char)*p))
        p++;
    if (*p)
        *p++ = '\0';
    size_t sku_len = strlen(sku);
    bool control = false;
    for (const char *c = sku; *c; c++)
        control = control || (unsigned char)*c < 0x20 || *c == 0x7f;
    if (sku_len > HF_SKU_LEN_MAX || strchr(sku, '|') || control) {
        snprintf(why, why_size,
                 "sku \"%.64s\" must be 1..%d characters without '|' or control characters", sku,
                 HF_SKU_LEN_MAX);
        return HF_ERR_CONFIG;
    }
    char reason[160];
    uint64_t mask = parse_list(p, routes, reason, sizeof reason);
    if (!mask) {
        snprintf(why, why_size, "sku %s: %s", sku, reason);
        return HF_ERR_CONFIG;
    }
    if (sf->count == HF_SHIP_FROM_SKUS_MAX) {
        snprintf(why, why_size, "more than %d SKUs", HF_SHIP_FROM_SKUS_MAX);
        return HF_ERR_LIMIT;
    }
    if (!grow((void **)&sf->entries, &sf->cap, sf->count + 1, sizeof *sf->entries) ||
        !grow((void **)&sf->arena, &sf->arena_cap, sf->arena_len + sku_len + 1, 1)) {
        snprintf(why, why_size, "out of memory");
        return HF_ERR_NOMEM;
    }
    memcpy(sf->arena + sf->arena_len, sku, sku_len + 1);
    sf->entries[sf->count++] = (entry_t){mask, (uint32_t)sf->arena_len, line_no};
    sf->arena_len += sku_len + 1;
    return HF_OK;
}

/* The table over the entries; a SKU listed twice is refused. */
static int build_table(ship_from_t *sf, char *why, size_t why_size)
{
    size_t slots = 16;
    while (slots < 2 * sf->count)
        slots *= 2;
    sf->slots = calloc(slots, sizeof *sf->slots);
    if (!sf->slots) {
        snprintf(why, why_size, "out of memory");
        return HF_ERR_NOMEM;
    }
    sf->slots_mask = slots - 1;
    for (size_t i = 0; i < sf->count; i++) {
        const char *sku = sf->arena + sf->entries[i].sku_off;
        size_t s = fnv1a(sku) & sf->slots_mask;
        for (; sf->slots[s]; s = (s + 1) & sf->slots_mask) {
            const entry_t *other = &sf->entries[sf->slots[s] - 1];
            if (strcmp(sf->arena + other->sku_off, sku) == 0) {
                snprintf(why, why_size, "line %u: sku %s is listed on line %u already",
                         sf->entries[i].line, sku, other->line);
                return HF_ERR_CONFIG;
            }
        }
        sf->slots[s] = (uint32_t)(i + 1);
    }
    return HF_OK;
}

int ship_from_load(const char *path, const route_config_t *routes, ship_from_t **out, char *errstr,
                   size_t errstr_size)
{
    *out = NULL;
    hf_assert(routes->warehouses_count <= 64); /* a mask of uint64_t */
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(errstr, errstr_size, "ship_from_file %s: %s", path, strerror(errno));
        return HF_ERR_CONFIG;
    }
    ship_from_t *sf = calloc(1, sizeof *sf);
    char *line = NULL;
    size_t line_cap = 0;
    char why[256] = "out of memory";
    int err = sf ? HF_OK : HF_ERR_NOMEM;
    uint32_t line_no = 0;
    ssize_t n;
    while (!err && (n = getline(&line, &line_cap, f)) >= 0) {
        line_no++;
        size_t text = (size_t)n - (n > 0 && line[n - 1] == '\n');
        if (text > HF_SHIP_FROM_LINE_MAX) {
            snprintf(why, sizeof why, "longer than %d bytes", HF_SHIP_FROM_LINE_MAX);
            err = HF_ERR_CONFIG;
            break;
        }
        err = parse_line(sf, line, line_no, routes, why, sizeof why);
    }
    if (!err && ferror(f)) {
        snprintf(why, sizeof why, "read: %s", strerror(errno));
        err = HF_ERR_IO;
    }
    free(line);
    fclose(f);
    if (!err)
        err = build_table(sf, why, sizeof why);
    if (err) {
        /* build_table names its lines itself */
        if (strncmp(why, "line ", 5) == 0 || !line_no)
            snprintf(errstr, errstr_size, "ship_from_file %s: %s", path, why);
        else
            snprintf(errstr, errstr_size, "ship_from_file %s:%u: %s", path, line_no, why);
        ship_from_free(sf);
        return err;
    }
    *out = sf;
    return HF_OK;
}

uint64_t ship_from_mask(const ship_from_t *sf, const char *sku)
{
    if (!sf || sf->count == 0)
        return 0;
    for (size_t s = fnv1a(sku) & sf->slots_mask; sf->slots[s]; s = (s + 1) & sf->slots_mask) {
        const entry_t *e = &sf->entries[sf->slots[s] - 1];
        if (strcmp(sf->arena + e->sku_off, sku) == 0)
            return e->mask;
    }
    return 0;
}

size_t ship_from_count(const ship_from_t *sf)
{
    return sf ? sf->count : 0;
}

void ship_from_free(ship_from_t *sf)
{
    if (!sf)
        return;
    free(sf->entries);
    free(sf->arena);
    free(sf->slots);
    free(sf);
}
