/* The counter's arithmetic and invariants, as pure functions so unit tests can
 * reach every rule without Kafka or RocksDB. */
#include "counter.h"
#include "hf_assert.h"

#include <stdbool.h>
#include <string.h>

int64_t counter_available(const hf_counter_state_t *c)
{
    return c->on_hand - c->reserved - c->allotted - c->safety_stock;
}

int64_t counter_available_reported(const hf_counter_state_t *c)
{
    int64_t a = counter_available(c);
    return a > 0 ? a : 0;
}

int64_t counter_shortfall(const hf_counter_state_t *c)
{
    int64_t s = counter_promised(c) - c->on_hand;
    return s > 0 ? s : 0;
}

int64_t counter_promised(const hf_counter_state_t *c)
{
    return c->reserved - c->revoking + c->allotted - c->recalling;
}

int64_t counter_grant_qty(const hf_counter_state_t *c, int64_t want, int share_pct)
{
    hf_assert(want >= 0 && share_pct > 0 && share_pct <= 100);
    int64_t free_units = counter_available(c);
    if (free_units <= 0 || want == 0)
        return 0;
    /* At least one unit while any is free, so the last units can still move. */
    int64_t cap = (free_units * share_pct + 99) / 100;
    return want < cap ? want : cap;
}

void counter_sell_allotted(hf_counter_state_t *c, int64_t qty)
{
    hf_assert(qty > 0 && qty <= c->allotted - c->recalling && qty <= c->on_hand);
    c->allotted -= qty;
    c->on_hand -= qty;
    bool overflow = __builtin_add_overflow(c->committed_total, qty, &c->committed_total);
    hf_assert(!overflow);
}

void counter_commit_units(hf_counter_state_t *c, int64_t qty)
{
    hf_assert(qty > 0 && qty <= c->reserved && qty <= c->on_hand);
    c->reserved -= qty;
    c->on_hand -= qty;
    bool overflow = __builtin_add_overflow(c->committed_total, qty, &c->committed_total);
    hf_assert(!overflow);
}

int64_t counter_on_hand_as_of(const hf_counter_state_t *c, int64_t counted, int64_t as_of_committed)
{
    hf_assert(counted >= 0 && as_of_committed >= 0 && as_of_committed <= c->committed_total);
    int64_t sold_since = c->committed_total - as_of_committed;
    return counted > sold_since ? counted - sold_since : 0;
}

void counter_assert(const hf_counter_state_t *c)
{
    hf_assert(c->on_hand >= 0);
    hf_assert(c->reserved >= 0);
    hf_assert(c->revoking >= 0 && c->revoking <= c->reserved);
    hf_assert(c->safety_stock >= 0);
    hf_assert(c->committed_total >= 0 && c->feed_epoch >= 0);
    hf_assert(c->allotted >= 0);
    hf_assert(c->recalling >= 0 && c->recalling <= c->allotted);
    hf_assert(c->escrow_balance >= 0 && c->escrow_balance <= c->allotted);
    hf_assert(counter_promised(c) <= c->on_hand);
}

static const char *check_id(const char *id, const char *what)
{
    if (!id[0])
        return what;
    for (const char *p = id; *p; p++)
        if (*p == '|' || (unsigned char)*p < 0x20)
            return what;
    return NULL;
}

const char *counter_check_ids(const char *warehouse_id, const char *sku)
{
    const char *r =
        check_id(warehouse_id, "warehouse_id must be non-empty, printable, without '|'");
    return r ? r : check_id(sku, "sku must be non-empty, printable, without '|'");
}
