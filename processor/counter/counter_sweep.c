/* The counter's tick: settled holds are forgotten after their retention. A hold
 * record stays once it is committed, released or refused, so that a repeated
 * command gets its first answer; once nothing can repeat it (the gateway asks
 * again only while a reservation is pending, minutes at most) it is dead weight,
 * and without this sweep the state would grow with every hold ever made.
 *
 * Every second each owned partition examines the next HF_HOLD_SWEEP_SCAN_MAX
 * hold records, resuming after the last one the previous tick saw (the cursor
 * lives in memory; after a restart a pass starts over), and deletes the settled
 * ones not updated for hold_retention_ms. A pass over N holds of a partition
 * takes N / HF_HOLD_SWEEP_SCAN_MAX seconds. Held and revoking holds are never
 * touched. Deletions are ordinary writes: tombstones in the changelog, in the
 * same transaction as whatever else the task applied. */
#include <pthread.h>
#include <stdio.h>
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

/* Where each partition's pass has got to; empty = from the start. A partition is
 * swept by one task at a time, but may move between tasks of the process. */
static pthread_mutex_t cursors_mu = PTHREAD_MUTEX_INITIALIZER;
static sweep_key_t cursors[HF_PARTITIONS_MAX];

static bool settled(hf_hold_status_t s)
{
    return s == HF_HOLD_COMMITTED || s == HF_HOLD_RELEASED || s == HF_HOLD_REFUSED;
}

/* True when the hold record (key, val) may be forgotten at cutoff_ms. */
static bool expired_hold(const void *key, size_t key_len, const void *val, size_t val_len,
                         int64_t cutoff_ms)
{
    static _Thread_local hf_record_t rec;
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
    const hf_config_t *cfg = stage_config(ctx);
    int64_t retention_ms = cfg ? cfg->hold_retention_ms : HF_HOLD_RETENTION_DEFAULT_MS;
    int64_t cutoff_ms = stage_now_ms(ctx) - retention_ms;

    sweep_key_t from;
    pthread_mutex_lock(&cursors_mu);
    from = cursors[p];
    pthread_mutex_unlock(&cursors_mu);

    state_iter_t *it = stage_iter(ctx, "H", 1, false);
    if (!it)
        return HF_ERR_NOMEM;
    if (from.len > 0)
        state_iter_start_after(it, p, from.key, from.len);
    static _Thread_local sweep_key_t doomed[HF_HOLD_SWEEP_SCAN_MAX];
    size_t doomed_count = 0, scanned = 0;
    sweep_key_t last = {.len = 0};
    const void *k, *v;
    size_t klen, vlen;
    /* Collected first, deleted after: the iterator is closed before any write. */
    while (scanned < HF_HOLD_SWEEP_SCAN_MAX && state_iter_next(it, &k, &klen, &v, &vlen)) {
        scanned++;
        hf_assert(klen <= sizeof last.key);
        memcpy(last.key, k, klen);
        last.len = klen;
        if (expired_hold(k, klen, v, vlen, cutoff_ms))
            doomed[doomed_count++] = last;
    }
    state_iter_destroy(it);

    pthread_mutex_lock(&cursors_mu);
    if (scanned < HF_HOLD_SWEEP_SCAN_MAX)
        cursors[p].len = 0; /* reached the end: the next pass starts over */
    else
        cursors[p] = last;
    pthread_mutex_unlock(&cursors_mu);

    for (size_t i = 0; i < doomed_count; i++) {
        int err = stage_del(ctx, doomed[i].key, doomed[i].len);
        if (err)
            return err;
    }
    if (doomed_count > 0)
        log_debug("counter", "partition %d: %zu settled holds forgotten", p, doomed_count);
    return HF_OK;
}
