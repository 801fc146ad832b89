/* State key layout of the gateway stage (see gateway.h). The timer index sorts
 * by a big-endian due time so the sweeper reads due timers first and stops at the
 * first one in the future. */
#include <stdio.h>
#include <string.h>

#include "gateway.h"
#include "hf_assert.h"

size_t gw_res_key(char *out, const char *reservation_id)
{
    int n = snprintf(out, GW_KEY_MAX, "R%s", reservation_id);
    hf_assert(n > 0 && n < GW_KEY_MAX);
    return (size_t)n;
}

size_t gw_idem_key(char *out, const char *reservation_id, const char *idempotency_key)
{
    int n = snprintf(out, GW_KEY_MAX, "I%s|%s", reservation_id, idempotency_key);
    hf_assert(n > 0 && n < GW_KEY_MAX);
    return (size_t)n;
}

size_t gw_payment_key(char *out, const char *reservation_id, const char *payment_id)
{
    int n = snprintf(out, GW_KEY_MAX, "P%s|%s", reservation_id, payment_id);
    hf_assert(n > 0 && n < GW_KEY_MAX);
    return (size_t)n;
}

size_t gw_park_key(char *out, const char *reservation_id, int slot)
{
    int n = snprintf(out, GW_KEY_MAX, "Q%s|%d", reservation_id, slot);
    hf_assert(n > 0 && n < GW_KEY_MAX);
    return (size_t)n;
}

size_t gw_timer_key(char *out, int64_t due_ms, char kind, const char *ref)
{
    hf_assert(due_ms >= 0);
    size_t ref_len = strlen(ref);
    hf_assert(1 + 8 + 1 + ref_len < GW_KEY_MAX);
    out[0] = 'T';
    for (int i = 0; i < 8; i++)
        out[1 + i] = (char)(uint8_t)((uint64_t)due_ms >> (56 - 8 * i));
    out[9] = kind;
    memcpy(out + 10, ref, ref_len);
    return 10 + ref_len;
}

bool gw_timer_parse(const char *key, size_t key_len, int64_t *due_ms, char *kind, char *ref_out,
                    size_t ref_size)
{
    if (key_len < 11 || key[0] != 'T' || key_len - 10 >= ref_size)
        return false;
    uint64_t due = 0;
    for (int i = 0; i < 8; i++)
        due = (due << 8) | (uint8_t)key[1 + i];
    *due_ms = (int64_t)due;
    *kind = key[9];
    memcpy(ref_out, key + 10, key_len - 10);
    ref_out[key_len - 10] = '\0';
    return true;
}

size_t gw_escrow_key(char *out, const char *warehouse_id, const char *sku)
{
    int n = snprintf(out, GW_KEY_MAX, "%c%s|%s", GW_ESCROW_TAG, warehouse_id, sku);
    hf_assert(n > 0 && n < GW_KEY_MAX);
    return (size_t)n;
}
