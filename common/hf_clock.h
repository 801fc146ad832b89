/* The two clocks the project reads: wall time (epoch ms, what is stored in
 * state and records) and monotonic time (ms, for waits and deadlines within one
 * process). One definition instead of a copy per file. */
#ifndef HF_CLOCK_H
#define HF_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t hf_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t hf_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps ms milliseconds (a signal may end it early). */
static inline void hf_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif
