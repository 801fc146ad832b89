/* State key layout of the counter stage (see counter.h). Keys are text with '|'
 * separators so `hfctl tail` of the changelog stays readable; the open-hold index
 * ends in a big-endian sequence so a reverse scan yields the newest hold first. */
#include <stdio.h>
#include <string.h>

#include "counter.h"
#include "hf_assert.h"

static size_t tagged(char *out, char tag, const char *warehouse_id, const char *sku)
{
    int n = snprintf(out, COUNTER_KEY_MAX, "%c%s|%s|", tag, warehouse_id, sku);
    hf_assert(n > 0 && n < COUNTER_KEY_MAX);
    return (size_t)n;
}

size_t pair_key(char *out, const char *warehouse_id, const char *sku)
{
    int n = snprintf(out, COUNTER_KEY_MAX, "%s|%s", warehouse_id, sku);
    hf_assert(n > 0 && n < COUNTER_KEY_MAX);
    return (size_t)n;
}

size_t counter_key(char *out, const char *warehouse_id, const char *sku)
{
    return tagged(out, 'C', warehouse_id, sku);
}

size_t hold_ref(char *out, int32_t attempt, const char *reservation_id)
{
    int n = snprintf(out, COUNTER_KEY_MAX, "%08x|%s", (unsigned)attempt, reservation_id);
    hf_assert(n > 0 && n < COUNTER_KEY_MAX);
    return (size_t)n;
}

size_t hold_key_of_ref(char *out, const char *warehouse_id, const char *sku, const char *ref,
                       size_t ref_len)
{
    size_t n = tagged(out, 'H', warehouse_id, sku);
    hf_assert(n + ref_len < COUNTER_KEY_MAX);
    memcpy(out + n, ref, ref_len);
    return n + ref_len;
}

size_t hold_key(char *out, const char *warehouse_id, const char *sku, int32_t attempt,
                const char *reservation_id)
{
    char ref[COUNTER_KEY_MAX];
    size_t ref_len = hold_ref(ref, attempt, reservation_id);
    return hold_key_of_ref(out, warehouse_id, sku, ref, ref_len);
}

size_t open_hold_prefix(char *out, const char *warehouse_id, const char *sku)
{
    return tagged(out, 'O', warehouse_id, sku);
}

size_t open_hold_key(char *out, const char *warehouse_id, const char *sku, int64_t seq)
{
    size_t n = open_hold_prefix(out, warehouse_id, sku);
    hf_assert(n + 8 <= COUNTER_KEY_MAX && seq >= 0);
    for (int i = 0; i < 8; i++)
        out[n + (size_t)i] = (char)(uint8_t)((uint64_t)seq >> (56 - 8 * i));
    return n + 8;
}
