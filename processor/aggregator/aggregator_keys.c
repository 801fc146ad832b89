/* State keys of the aggregator: the timer index sorts by due time (big-endian),
 * so the tick reads only the timers that are due. */
#include <stdio.h>
#include <string.h>

#include "aggregator.h"
#include "hf_assert.h"

size_t sku_state_key(char *out, const char *sku)
{
    int n = snprintf(out, AGG_KEY_MAX, "S%s", sku);
    hf_assert(n > 1 && n < AGG_KEY_MAX);
    return (size_t)n;
}

size_t timer_key(char *out, int64_t due_ms, const char *sku)
{
    hf_assert(due_ms >= 0);
    out[0] = 'T';
    for (int i = 0; i < 8; i++)
        out[1 + i] = (char)(uint8_t)((uint64_t)due_ms >> (56 - 8 * i));
    size_t len = strlen(sku);
    hf_assert(len <= HF_SKU_LEN_MAX);
    memcpy(out + 9, sku, len);
    return 9 + len;
}

bool timer_key_parse(const char *key, size_t len, int64_t *due_ms, char *sku_out)
{
    if (len < 10 || len > 9 + HF_SKU_LEN_MAX || key[0] != 'T')
        return false;
    uint64_t due = 0;
    for (int i = 0; i < 8; i++)
        due = (due << 8) | (uint8_t)key[1 + i];
    *due_ms = (int64_t)due;
    memcpy(sku_out, key + 9, len - 9);
    sku_out[len - 9] = '\0';
    return true;
}
