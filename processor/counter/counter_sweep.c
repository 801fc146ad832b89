/* The counter's tick: settled holds are forgotten after their retention. A hold
 * record stays once it is committed, released or refused, so that a repeated
 * command gets its first answer; once nothing can repeat it (the gateway asks
 * again only while a reservation is pending, minutes at most; config.c makes
 * hold_retention_ms at least twice that window) it is dead weight, and without
 * this sweep the state would grow with every hold ever made.
 *
 * Each tick (once a second) every owned partition examines the next slice of
 * its hold records, resuming after the last one the previous tick saw, and
 * deletes the settled ones not updated for hold_retention_ms. The slice is paced
 * so that a whole pass takes a quarter of the retention: its size is the last
 * pass's count x 4 x tick / retention (HF_HOLD_SWEEP_FIRST_PASS before a pass
 * completed), kept within [HF_HOLD_SWEEP_SCAN_MIN, HF_HOLD_SWEEP_SCAN_MAX]. So a
 * settled hold lives at most 1.25 x the retention, and the work per tick follows
 * the rate holds are made at (about 4 x it), not a fixed guess. The cursors live
 * in memory, in the stage's environment (counter_env_new builds it at start; a
 * restart starts a pass over); a tick whose transaction aborts leaves its slice
 * to the next pass. Held and revoking holds are never touched.
 * Deletions are ordinary writes: tombstones in the changelog. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "config.h"
#include "counter.h"
#include "hf_assert.h"
#include "log.h"

typedef struct {
    char key[COUNTER_KEY_MAX];
    size_t len;
} sweep_key_t;

/* A partition's pass: where it has got to (empty = from the start), how many
 * records it has seen, and how many the last complete pass saw (0: none yet, or
 * an empty partition — either way the first-pass slice, which costs nothing).
 * A partition is swept by one task at a time, but may move between tasks. */
typedef struct {
    sweep_key_t cursor;
    int64_t seen, last_pass;
} sweep_pass_t;

/* The counter's environment: the retention and every partition's pass, shared
 * by the stage's tasks of the process. */
struct counter_env {
    int64_t hold_retention_ms;
    int grant_share_pct;
    pthread_mutex_t passes_mu;
    sweep_pass_t passes[HF_PARTITIONS_MAX];
};

int counter_env_new(const hf_config_t *cfg, void **env_out, char *errstr, size_t errstr_size)
{
    *env_out = NULL;
    counter_env_t *env = calloc(1, sizeof *env);
    if (!env) {
        snprintf(errstr, errstr_size, "counter: out of memory");
        return HF_ERR_NOMEM;
    }
    /* hold_retention_ms against the gateway's re-send window: config_check's
     * rule between settings, which main applies. */
    env->hold_retention_ms = cfg->hold_retention_ms;
    env->grant_share_pct = cfg->escrow_grant_share_pct;
    pthread_mutex_init(&env->passes_mu, NULL);
    *env_out = env;
    return HF_OK;
}

void counter_env_destroy(void *env)
{
    if (!env)
        return;
    counter_env_t *e = env;
    pthread_mutex_destroy(&e->passes_mu);
    free(e);
}

size_t counter_sweep_slice(int64_t last_pass, int64_t retention_ms, int tick_ms)
{
    if (last_pass <= 0 || retention_ms <= 0)
        return HF_HOLD_SWEEP_FIRST_PASS;
    /* last_pass x PASSES x tick / retention, rounded up (as a double: no overflow). */
    double want = (double)last_pass * HF_HOLD_SWEEP_PASSES * tick_ms / (double)retention_ms;
    if (want < HF_HOLD_SWEEP_SCAN_MIN)
        return HF_HOLD_SWEEP_SCAN_MIN;
    if (want > HF_HOLD_SWEEP_SCAN_MAX)
        return HF_HOLD_SWEEP_SCAN_MAX;
    return (size_t)want + 1;
}

static bool settled(hf_hold_status_t s)
{
    return s == HF_HOLD_COMMITTED || s == HF_HOLD_RELEASED || s == HF_HOLD_REFUSED;
}

/* True when the hold record (key, val) may be forgotten at cutoff_ms. */
static bool expired_hold(const void *key, size_t key_len, const void *val, size_t val_len,
                         int64_t cutoff_ms)
{
    hf_record_t rec;
    char errstr[256];
    if (codec_decode(val, val_len, &rec, errstr, sizeof errstr) != HF_OK ||
        rec.type != HF_REC_HOLD_STATE) {
        /* Not ours to judge: keep it, and say so. */
        log_error("counter", "hold record %.*s does not decode as HoldState (%s); kept",
                  (int)key_len, (const char *)key, errstr);
        return false;
    }
    const hf_hold_state_t *hs = &rec.u.hold_state;
    return settled(hs->status) && hs->updated_at_ms <= cutoff_ms;
}

int counter_tick(stage_ctx_t *ctx)
{
    int32_t p = stage_partition(ctx);
    hf_assert(p >= 0 && p < HF_PARTITIONS_MAX);
    counter_env_t *env = stage_env(ctx);
    hf_assert(env); /* the stage's init built it before any task started */
    int64_t retention_ms = env->hold_retention_ms;
    int64_t cutoff_ms = stage_now_ms(ctx) - retention_ms;

    sweep_pass_t pass;
    pthread_mutex_lock(&env->passes_mu);
    pass = env->passes[p];
    pthread_mutex_unlock(&env->passes_mu);
    size_t slice =
        counter_sweep_slice(pass.last_pass, retention_ms, counter_stage()->tick_interval_ms);

    hf_assert(slice <= HF_HOLD_SWEEP_SCAN_MAX);
    /* On the heap, sized to this slice (up to 16384 keys of 264 bytes, ~4 MB; only
     * the pages written are touched). Not a per-thread array: glibc carves static
     * thread-local storage out of every thread's stack and zeroes it at each
     * thread's start, librdkafka's threads and the HTTP front's connection
     * threads included (4.6 MB of resident memory per connection, measured). */
    sweep_key_t *doomed = malloc((slice ? slice : 1) * sizeof *doomed);
    if (!doomed)
        return HF_ERR_NOMEM;
    state_iter_t *it = stage_iter(ctx, "H", 1, false);
    if (!it) {
        free(doomed);
        return HF_ERR_NOMEM;
    }
    if (pass.cursor.len > 0)
        state_iter_start_after(it, p, pass.cursor.key, pass.cursor.len);
    size_t doomed_count = 0, scanned = 0;
    const void *k, *v;
    size_t klen, vlen;
    /* Collected first, deleted after: the iterator is closed before any write. */
    while (scanned < slice && state_iter_next(it, &k, &klen, &v, &vlen)) {
        scanned++;
        hf_assert(klen <= sizeof pass.cursor.key);
        memcpy(pass.cursor.key, k, klen);
        pass.cursor.len = klen;
        if (expired_hold(k, klen, v, vlen, cutoff_ms))
            doomed[doomed_count++] = pass.cursor;
    }
    state_iter_destroy(it);
    pass.seen += (int64_t)scanned;
    if (scanned < slice) { /* reached the end: the next pass starts over */
        pass.last_pass = pass.seen;
        pass.seen = 0;
        pass.cursor.len = 0;
    }
    pthread_mutex_lock(&env->passes_mu);
    env->passes[p] = pass;
    pthread_mutex_unlock(&env->passes_mu);

    int err = HF_OK;
    for (size_t i = 0; i < doomed_count && !err; i++)
        err = stage_del(ctx, doomed[i].key, doomed[i].len);
    free(doomed);
    if (err)
        return err;
    if (doomed_count > 0)
        log_debug("counter", "partition %d: %zu settled holds forgotten", p, doomed_count);
    return HF_OK;
}

int counter_grant_share_pct(stage_ctx_t *ctx)
{
    const counter_env_t *env = stage_env(ctx);
    hf_assert(env && env->grant_share_pct > 0 && env->grant_share_pct <= 100);
    return env->grant_share_pct;
}
