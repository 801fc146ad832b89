/* The sold-out hysteresis as a pure function. SOLD_OUT needs the total to stay at
 * or below the low watermark for a whole dwell time (so a flash sale's 0 <-> 1
 * flapping never signals); BACK_IN_STOCK needs it to reach the high watermark,
 * above the low one. At most one transition per dwell window follows. */
#include "aggregator.h"

int signals_evaluate(hf_sku_state_t *s, const signal_policy_t *p, int64_t now_ms,
                     int64_t *timer_due_ms)
{
    *timer_due_ms = 0;
    if (s->total > p->low) {
        s->low_since_ms = 0;
        if (!s->in_stock && s->total >= p->high) {
            s->in_stock = true;
            s->changed_at_ms = now_ms;
            return HF_SIGNAL_BACK_IN_STOCK;
        }
        return SIGNAL_NONE;
    }
    if (s->low_since_ms == 0)
        s->low_since_ms = now_ms;
    if (!s->in_stock)
        return SIGNAL_NONE;
    int64_t due = s->low_since_ms + p->dwell_ms;
    if (now_ms < due) {
        *timer_due_ms = due;
        return SIGNAL_NONE;
    }
    s->in_stock = false;
    s->changed_at_ms = s->low_since_ms; /* when it actually ran out */
    return HF_SIGNAL_SOLD_OUT;
}
