/* The replay's progress line: offsets read of the total the topics' ends gave
 * before the first pass, records/s and an ETA; redrawn in place (\r) at most
 * 4 times a second on a terminal, a plain line every 5 s otherwise. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hf_clock.h"
#include "reconcile_int.h"

#define RC_PROGRESS_TTY_MS   250
#define RC_PROGRESS_PLAIN_MS 5000
/* Records between two looks at the clock. */
#define RC_PROGRESS_EVERY    1024

void rc_progress_init(rc_progress_t *p, FILE *out)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = out && isatty(fileno(out));
    p->interval_ms = p->tty ? RC_PROGRESS_TTY_MS : RC_PROGRESS_PLAIN_MS;
    p->started_ms = hf_mono_ms();
    p->last_ms = p->started_ms;
}

/* 1234567 as "1,234,567". */
size_t rc_fmt_count(char *out, size_t size, uint64_t v)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    return o;
}

static void fmt_duration(char *out, size_t size, int64_t s)
{
    if (s < 0)
        snprintf(out, size, "?");
    else if (s >= 3600)
        snprintf(out, size, "%" PRId64 "h%02" PRId64 "m", s / 3600, s / 60 % 60);
    else
        snprintf(out, size, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
}

static void draw(rc_progress_t *p, int64_t now_ms)
{
    double secs = (double)(now_ms - p->started_ms) / 1000.0;
    uint64_t total = p->offsets_total > p->offsets_done ? p->offsets_total : p->offsets_done;
    double pct = total ? 100.0 * (double)p->offsets_done / (double)total : 0;
    double offsets_per_s = secs > 0 ? (double)p->offsets_done / secs : 0;
    int64_t eta_s =
        offsets_per_s > 0 ? (int64_t)((double)(total - p->offsets_done) / offsets_per_s) : -1;
    char done[32], tot[32], rate[32], eta[32];
    rc_fmt_count(done, sizeof done, p->offsets_done);
    rc_fmt_count(tot, sizeof tot, total);
    rc_fmt_count(rate, sizeof rate, secs > 0 ? (uint64_t)((double)p->records / secs) : 0);
    fmt_duration(eta, sizeof eta, eta_s);
    const char *dot = p->topic ? strrchr(p->topic, '.') : NULL;
    const char *topic = dot ? dot + 1 : p->topic ? p->topic : ""; /* without the prefix */
    fprintf(p->out,
            "%shfctl reconcile: %sshard %u/%u %-20.20s %s/%s offsets %5.1f%% %s records/s "
            "ETA %s%s",
            p->tty ? "\r" : "", p->attempt > 1 ? "re-read " : "", p->pass + 1,
            p->passes ? p->passes : 1, topic, done, tot, pct, rate, eta, p->tty ? "\033[K" : "\n");
    fflush(p->out);
    p->drawn = p->tty;
    p->last_ms = now_ms;
}

void rc_progress_tick(rc_progress_t *p)
{
    if (!p->out || ++p->ticks % RC_PROGRESS_EVERY != 0)
        return;
    int64_t now = hf_mono_ms();
    if (now - p->last_ms >= p->interval_ms)
        draw(p, now);
}

void rc_progress_now(rc_progress_t *p)
{
    int64_t now = p->out && p->tty ? hf_mono_ms() : 0;
    if (now && now - p->last_ms >= p->interval_ms)
        draw(p, now);
}

void rc_progress_end(rc_progress_t *p)
{
    if (p->out && p->drawn)
        fputs("\r\033[K", p->out);
    p->drawn = false;
}
