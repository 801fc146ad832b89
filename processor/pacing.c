/* The transaction pacing of a task (pacing.h): the input rate, smoothed over
 * windows, and the period and wait it leads to. */
#include "pacing.h"

#include "hf_assert.h"

/* Weight of the newest window in the smoothed rate: a step in load shows at
 * half its size after one window, at 7/8 after three. */
#define PACING_NEW_WEIGHT 0.5

static int period_for_rate(const pacing_conf_t *c, double rate_records_s)
{
    if (c->period_max_ms == 0)
        return 0;
    double from = c->full_records_s / 2.0;
    if (rate_records_s <= from)
        return 0;
    double share = (rate_records_s - from) / (c->full_records_s - from);
    if (share > 1.0)
        share = 1.0;
    return (int)(share * c->period_max_ms + 0.5);
}

void pacing_init(pacing_t *p, const pacing_conf_t *conf)
{
    hf_assert(conf->floor_ms >= 0 && conf->period_max_ms >= 0 && conf->gap_pct >= 0);
    hf_assert(conf->period_max_ms == 0 || conf->full_records_s >= 2);
    p->conf = *conf;
    p->window_start_ms = -1;
    p->window_records = 0;
    p->rate_records_s = 0;
    p->period_ms = 0;
}

void pacing_observe(pacing_t *p, int64_t now_ms, int64_t records)
{
    hf_assert(records >= 0);
    if (p->window_start_ms < 0 || now_ms < p->window_start_ms) {
        /* First call, or a clock that stepped back: start a window here. */
        p->window_start_ms = now_ms;
        p->window_records = records;
        return;
    }
    p->window_records += records;
    int64_t elapsed_ms = now_ms - p->window_start_ms;
    if (elapsed_ms < PACING_WINDOW_MS)
        return;
    double rate = (double)p->window_records * 1000.0 / (double)elapsed_ms;
    /* A gap longer than several windows (an idle stage polls for up to
     * idle_poll_ms) means the load is gone: take the window's rate as it is. */
    if (elapsed_ms >= 4 * PACING_WINDOW_MS)
        p->rate_records_s = rate;
    else
        p->rate_records_s = PACING_NEW_WEIGHT * rate + (1 - PACING_NEW_WEIGHT) * p->rate_records_s;
    p->window_start_ms = now_ms;
    p->window_records = 0;
    p->period_ms = period_for_rate(&p->conf, p->rate_records_s);
}

int64_t pacing_ready_at_ms(const pacing_t *p, int64_t last_begin_ms, int64_t last_commit_end_ms)
{
    int64_t floor_ms = p->conf.floor_ms;
    if (p->conf.gap_pct > 0 && last_begin_ms > 0 && last_commit_end_ms > last_begin_ms) {
        int64_t gap_ms = (last_commit_end_ms - last_begin_ms) * p->conf.gap_pct / 100;
        gap_ms = gap_ms < PACING_GAP_MAX_MS ? gap_ms : PACING_GAP_MAX_MS;
        floor_ms = gap_ms > floor_ms ? gap_ms : floor_ms;
    }
    int64_t after_floor = last_commit_end_ms + floor_ms;
    int64_t after_period = last_begin_ms + p->period_ms;
    return after_floor > after_period ? after_floor : after_period;
}

int pacing_period_ms(const pacing_t *p)
{
    return p->period_ms;
}

int pacing_wait_max_ms(const pacing_t *p)
{
    int floor_ms = p->conf.gap_pct > 0 && PACING_GAP_MAX_MS > p->conf.floor_ms ? PACING_GAP_MAX_MS
                                                                               : p->conf.floor_ms;
    return floor_ms + p->conf.period_max_ms;
}

double pacing_rate_records_s(const pacing_t *p)
{
    return p->rate_records_s;
}
