/* make bench-state: RocksDB state as a seed of a large catalog uses it, with no
 * Kafka and nothing else in the way (issue 13). A counter that learns a new pair
 * reads its row (absent), then writes it; the writes of 500 such records commit as
 * one buffer. This drives the state API the same way over BENCH_STATE_KEYS keys
 * (default 10,000,000) in a shuffled order over 8 partitions, with the stages'
 * default 64 MiB block cache and 32 MiB memtables, and prints, for every 10 % of
 * the keys, the rate (keys/s) and the bytes read from files per key (rchar of
 * /proc/self/io: RocksDB's preads of table files, cached or not). Then point reads
 * of present and absent keys over the full state. The figures are this build's;
 * compare builds side by side (docs/PERFORMANCE.md).
 * Env: BENCH_STATE_KEYS, BENCH_STATE_DIR (default build/bench/state-db, removed
 * first), BENCH_STATE_CACHE_MIB (64). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_clock.h"
#include "state.h"

enum {
    BENCH_PARTITIONS = 8,
    BENCH_BATCH_KEYS = 500,
    BENCH_VAL_LEN = 48,
    BENCH_STEPS = 10,
    BENCH_READS = 200000,
};

static double now_s(void)
{
    return (double)hf_mono_ms() / 1000.0;
}

/* rchar of /proc/self/io: bytes this process read through read/pread. */
static uint64_t read_chars(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    hf_assert(f != NULL);
    char line[128];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "rchar: %lu", &v) == 1)
            break;
    fclose(f);
    return v;
}

/* The i-th key of a fixed permutation of 0..n-1 (an odd multiplier modulo a power
 * of two above n, values >= n skipped by the caller), so writes arrive in no key
 * order, as a seed's pairs reach a partition hashed. */
static uint64_t permute(uint64_t i, uint64_t mask)
{
    return (i * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL) & mask;
}

static size_t make_key(char *key, size_t size, uint64_t id)
{
    int n = snprintf(key, size, "C|WH-%02u|SKU-%09lu", (unsigned)(id % 50), id / 50);
    hf_assert(n > 0 && (size_t)n < size);
    return (size_t)n;
}

static void make_val(uint8_t *val, uint64_t id)
{
    for (size_t i = 0; i < BENCH_VAL_LEN; i++)
        val[i] = (uint8_t)(i < 16 ? (id >> (i % 8 * 8)) : i);
}

static void die(const char *what, const char *errstr)
{
    fprintf(stderr, "bench-state: %s: %s\n", what, errstr);
    exit(1);
}

int main(void)
{
    const char *keys_env = getenv("BENCH_STATE_KEYS");
    const char *dir_env = getenv("BENCH_STATE_DIR");
    const char *cache_env = getenv("BENCH_STATE_CACHE_MIB");
    uint64_t n = keys_env != NULL ? strtoull(keys_env, NULL, 10) : 10000000;
    const char *dir = dir_env != NULL ? dir_env : "build/bench/state-db";
    size_t cache_mib = cache_env != NULL ? strtoull(cache_env, NULL, 10) : 64;
    if (n < BENCH_STEPS || cache_mib == 0)
        die("config", "BENCH_STATE_KEYS >= 10 and BENCH_STATE_CACHE_MIB > 0 please");
    uint64_t mask = 1;
    while (mask < n)
        mask <<= 1;
    mask -= 1;

    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        die("remove", dir);
    state_opts_t opts = {.block_cache_bytes = cache_mib << 20};
    state_t *st = NULL;
    char errstr[512];
    if (state_open(dir, &opts, &st, errstr, sizeof errstr) != HF_OK)
        die("open", errstr);
    printf("bench-state: %lu keys (\"C|WH-nn|SKU-nnnnnnnnn\", %d-byte values) over %d "
           "partitions, a read of each (absent) before its write, %d writes a buffer, "
           "block cache %zu MiB, in %s\n",
           n, BENCH_VAL_LEN, BENCH_PARTITIONS, BENCH_BATCH_KEYS, cache_mib, dir);

    state_buf_t *buf = state_buf_new(st);
    hf_assert(buf != NULL);
    char key[64];
    uint8_t val[BENCH_VAL_LEN], got[BENCH_VAL_LEN * 2];
    size_t got_len = 0;
    uint64_t written = 0, step_keys = n / BENCH_STEPS, next_step = step_keys;
    double t0 = now_s(), step_t = t0;
    uint64_t step_rchar = read_chars();
    for (uint64_t i = 0; written < n; i++) {
        uint64_t id = permute(i, mask);
        if (id >= n)
            continue;
        size_t key_len = make_key(key, sizeof key, id);
        int32_t part = (int32_t)(id % BENCH_PARTITIONS);
        int rc = state_get(st, buf, part, key, key_len, got, sizeof got, &got_len);
        hf_assert(rc == HF_ERR_NOTFOUND);
        make_val(val, id);
        rc = state_put(buf, part, key, key_len, val, sizeof val);
        hf_assert(rc == HF_OK);
        written++;
        if (state_buf_count(buf) >= BENCH_BATCH_KEYS || written == n) {
            if (state_buf_write(st, buf, errstr, sizeof errstr) != HF_OK)
                die("write", errstr);
        }
        if (written == next_step) {
            double t = now_s();
            uint64_t rchar = read_chars();
            printf("  %3lu %% %10lu keys: %8.0f keys/s, %7.0f bytes read a key\n",
                   written * 100 / n, written, (double)step_keys / (t - step_t),
                   (double)(rchar - step_rchar) / (double)step_keys);
            fflush(stdout);
            step_t = t;
            step_rchar = rchar;
            next_step += step_keys;
        }
    }
    double load_s = now_s() - t0;
    printf("  load: %lu keys in %.1f s, %.0f keys/s\n", n, load_s, (double)n / load_s);

    /* Point reads over the whole state: present keys, then keys never written. */
    for (int absent = 0; absent <= 1; absent++) {
        double r0 = now_s();
        uint64_t rc0 = read_chars();
        uint64_t found = 0;
        for (uint64_t i = 0; i < BENCH_READS; i++) {
            uint64_t id = permute(i * 7919, mask) % n + (absent ? n : 0);
            size_t key_len = make_key(key, sizeof key, id);
            int rc = state_get(st, NULL, (int32_t)(id % BENCH_PARTITIONS), key, key_len, got,
                               sizeof got, &got_len);
            hf_assert(rc == (absent ? HF_ERR_NOTFOUND : HF_OK));
            found += rc == HF_OK;
        }
        double r_s = now_s() - r0;
        printf("  reads of %s keys: %.0f/s, %.0f bytes read a key (%lu found)\n",
               absent ? "absent" : "present", BENCH_READS / r_s,
               (double)(read_chars() - rc0) / BENCH_READS, found);
    }
    state_buf_destroy(buf);
    state_close(st);
    return 0;
}
