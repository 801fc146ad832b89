/* W3C traceparent parsing, formatting and span ids (trace.h). The parser
 * reads exactly the grammar of the W3C text and nothing looser: a header
 * that is almost right is still not propagated, because a trace joined to
 * the wrong parent misleads more than a trace that stops. */
#include "trace.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Positions in "vv-<trace-id>-<parent-id>-ff". */
#define TRACE_TRACE_ID_AT  3
#define TRACE_PARENT_ID_AT 36
#define TRACE_FLAGS_AT     53

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* uppercase is not allowed by the W3C grammar */
}

/* Decodes 2 * n lowercase hex characters into out; false on anything else. */
static bool hex_decode(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static bool all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

bool trace_parse(const char *text, size_t len, trace_ctx_t *out)
{
    uint8_t version = 0;
    trace_ctx_t tc;
    if (!text || len < TRACE_PARENT_LEN || !hex_decode(text, &version, 1) || version == 0xff)
        return false;
    if (version == 0 ? len != TRACE_PARENT_LEN
                     : (len > TRACE_PARENT_LEN && text[TRACE_PARENT_LEN] != '-'))
        return false;
    if (text[2] != '-' || text[TRACE_PARENT_ID_AT - 1] != '-' || text[TRACE_FLAGS_AT - 1] != '-')
        return false;
    if (!hex_decode(text + TRACE_TRACE_ID_AT, tc.trace_id, sizeof tc.trace_id) ||
        !hex_decode(text + TRACE_PARENT_ID_AT, tc.parent_id, sizeof tc.parent_id) ||
        !hex_decode(text + TRACE_FLAGS_AT, &tc.flags, 1))
        return false;
    if (all_zero(tc.trace_id, sizeof tc.trace_id) || all_zero(tc.parent_id, sizeof tc.parent_id))
        return false;
    if (version != 0)
        tc.flags &= 0x01; /* the only flag a later version is known to share */
    *out = tc;
    return true;
}

static char *hex_encode(char *p, const uint8_t *b, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        *p++ = digits[b[i] >> 4];
        *p++ = digits[b[i] & 0x0f];
    }
    return p;
}

void trace_format(const trace_ctx_t *tc, char out[TRACE_PARENT_LEN + 1])
{
    char *p = out;
    *p++ = '0';
    *p++ = '0';
    *p++ = '-';
    p = hex_encode(p, tc->trace_id, sizeof tc->trace_id);
    *p++ = '-';
    p = hex_encode(p, tc->parent_id, sizeof tc->parent_id);
    *p++ = '-';
    p = hex_encode(p, &tc->flags, 1);
    *p = '\0';
}

void trace_child(const trace_ctx_t *parent, trace_ctx_t *child)
{
    memcpy(child->trace_id, parent->trace_id, sizeof child->trace_id);
    child->flags = parent->flags;
    trace_span_id_new(child->parent_id);
}

/* splitmix64 (Steele, Lea, Flood 2014): one add and three multiply-xor steps
 * per draw; every seed gives a full-period sequence. */
static _Thread_local uint64_t span_state;
static _Thread_local bool span_seeded;

static uint64_t span_next(void)
{
    uint64_t z = (span_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void span_seed(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        seed ^= (uint64_t)(uintptr_t)&span_state; /* differs per thread */
    }
    span_state = seed;
    span_seeded = true;
}

void trace_span_id_new(uint8_t span_id[8])
{
    if (!span_seeded)
        span_seed();
    uint64_t v = 0;
    while (v == 0) /* an all-zero id is invalid; splitmix64 gives 0 once per 2^64 */
        v = span_next();
    memcpy(span_id, &v, sizeof v);
}
