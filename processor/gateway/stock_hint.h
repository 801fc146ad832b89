/* What the counters last said about a pair's sellable stock, remembered by
 * the gateway process so it routes on the freshest knowledge it has. The
 * routing view reaches the gateway two exactly-once hops after a counter
 * changes (counter, aggregator); a Hold's answer comes in one, carrying the
 * pair's sellable stock when the counter applied it (CounterResult available
 * + escrow_balance). For hint_ttl_ms after that, routing takes the figure
 * instead of the view's: a pair its counter just called empty is not asked
 * again, so a shopper it cannot serve is refused in one hop. Holds this
 * process sends take from the figure and releases of held units add to it,
 * so it stays the counter's figure minus what is in flight. Once older than
 * the TTL the view decides again; the first Hold sent to the pair then is its
 * probe, and while the probe is out (at most a TTL, and the hint under two
 * TTLs old) the other shoppers keep the figure: one stale-view Hold per pair
 * and TTL, and no refusal rests on an answer two TTLs old.
 *
 * Never a correctness matter: the counter still arbitrates every Hold, so a
 * hint can only make routing try a pair (a wrong positive costs a refused
 * Hold) or skip it (a wrong zero refuses a shopper who might have been served
 * within a TTL or two). Process-wide, bounded, in memory only (a restart
 * forgets it), thread-safe (one mutex). Not transactional: an aborted
 * transaction's takes and adds stay, wrong until the next answer or TTL. */
#ifndef HF_STOCK_HINT_H
#define HF_STOCK_HINT_H

#include <stdint.h>

#include "records.h"

typedef struct gw_hint gw_hint_t;

/* NULL when out of memory; ttl_ms > 0. */
gw_hint_t *gw_hint_new(int64_t ttl_ms);
void gw_hint_destroy(gw_hint_t *h); /* accepts NULL */
/* A counter said warehouse_id|sku has sellable units as of now_ms (when it
 * applied the Hold, at most the gateway's now); an answer older than the one
 * kept is ignored. The oldest hint of the probe run makes room when full. */
void gw_hint_note(gw_hint_t *h, const char *warehouse_id, const char *sku, int64_t sellable,
                  int64_t now_ms);
/* This process released qty held units at warehouse_id|sku: they are added
 * to its hint, if it has one (the counter's next answer settles the figure). */
void gw_hint_add(gw_hint_t *h, const char *warehouse_id, const char *sku, int64_t qty);
/* This process sent a Hold of qty at warehouse_id|sku at now_ms: its hint
 * counts the units as gone until the counter answers (so one unit that came
 * back draws one Hold, not one per shopper routed before the answer), never
 * below 0; on a stale hint the Hold is the pair's probe. */
void gw_hint_take(gw_hint_t *h, const char *warehouse_id, const char *sku, int64_t qty,
                  int64_t now_ms);
/* Rewrites the available units of av's warehouses that have a usable hint at
 * now_ms (escrow clamped to it), then av's total (in_stock, the signalled
 * state, is left as it is); returns how many warehouses it rewrote. */
int gw_hint_apply(gw_hint_t *h, hf_availability_t *av, int64_t now_ms);

#endif
