/* JSON-lines logger. A whole line is formatted first, then written with one
 * write(2), so lines from threads never interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 2048

static int log_level = -1;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(hf_log_level_t level)
{
    log_level = (int)level;
}

int log_enabled(hf_log_level_t level)
{
    if (log_level < 0) {
        const char *env = getenv("HOLDFAST_LOG_LEVEL");
        log_level = HF_LOG_INFO;
        for (int i = 0; env && i < 4; i++)
            if (strcasecmp(env, level_names[i]) == 0)
                log_level = i;
    }
    return (int)level >= log_level;
}

/* Appends s to out as JSON string content; returns the new length. */
static size_t json_escape(char *out, size_t len, size_t cap, const char *s)
{
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[len++] = '\\';
            out[len++] = (char)c;
        } else if (c == '\n') {
            out[len++] = '\\';
            out[len++] = 'n';
        } else if (c < 0x20) {
            len += (size_t)snprintf(out + len, cap - len, "\\u%04x", c);
        } else {
            out[len++] = (char)c;
        }
    }
    return len;
}

void hf_log(hf_log_level_t level, const char *comp, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    char msg[LOG_LINE_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now_ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;

    char line[LOG_LINE_MAX];
    size_t len = (size_t)snprintf(line, sizeof line, "{\"ts_ms\":%lld,\"level\":\"%s\",\"comp\":\"",
                                  now_ms, level_names[level]);
    len = json_escape(line, len, sizeof line, comp);
    len += (size_t)snprintf(line + len, sizeof line - len, "\",\"msg\":\"");
    len = json_escape(line, len, sizeof line - 4, msg);
    len += (size_t)snprintf(line + len, sizeof line - len, "\"}\n");
    ssize_t rc = write(STDERR_FILENO, line, len);
    (void)rc;
}
