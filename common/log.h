/* JSON-lines logging to stderr, one object per line, so logs of holdfast,
 * librdkafka and RocksDB can be read by the same tools. Thread-safe. */
#ifndef HF_LOG_H
#define HF_LOG_H

typedef enum { HF_LOG_DEBUG = 0, HF_LOG_INFO, HF_LOG_WARN, HF_LOG_ERROR } hf_log_level_t;

/* Messages below level are dropped. Default HF_LOG_INFO; env HOLDFAST_LOG_LEVEL
 * (debug|info|warn|error) overrides it at the first log call. */
void log_set_level(hf_log_level_t level);
int log_enabled(hf_log_level_t level);

/* {"ts_ms":..,"level":"info","comp":"task","msg":"..."} — comp names the module. */
void hf_log(hf_log_level_t level, const char *comp, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(comp, ...)                                                                       \
    do {                                                                                           \
        if (log_enabled(HF_LOG_DEBUG))                                                             \
            hf_log(HF_LOG_DEBUG, comp, __VA_ARGS__);                                               \
    } while (0)
#define log_info(comp, ...)  hf_log(HF_LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...)  hf_log(HF_LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) hf_log(HF_LOG_ERROR, comp, __VA_ARGS__)

#endif
