/* W3C Trace Context: the `traceparent` value a request may carry
 * (https://www.w3.org/TR/trace-context/), parsed, checked and written again
 * with a span id of this process's own, so a record's trace can be followed
 * from hop to hop. Pure text and a per-thread random source: no Kafka here,
 * so the task loop, the client library and the tests share it. */
#ifndef HF_TRACE_H
#define HF_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The Kafka header (and HTTP header) that carries the value. */
#define TRACE_HEADER_NAME "traceparent"
/* "00-" + 32 hex trace-id + "-" + 16 hex parent-id + "-" + 2 hex flags: the
 * exact length of a version 00 value, and the length this module writes. */
#define TRACE_PARENT_LEN  55

typedef struct {
    uint8_t trace_id[16]; /* never all zero */
    uint8_t parent_id[8]; /* the span that emitted the record; never all zero */
    uint8_t flags;        /* bit 0: sampled */
} trace_ctx_t;

/* Parses text (len bytes, not NUL-terminated) strictly: version 00 is exactly
 * TRACE_PARENT_LEN characters; lowercase hex only; neither id all zero;
 * version ff is invalid. A later version is read as the W3C text says (the
 * first 55 characters, followed by the end or '-'); only its sampled flag is
 * kept. False, with *out untouched, for anything else: the caller ignores the
 * header. */
bool trace_parse(const char *text, size_t len, trace_ctx_t *out);

/* Writes tc as a version 00 value and a NUL into out. */
void trace_format(const trace_ctx_t *tc, char out[TRACE_PARENT_LEN + 1]);

/* The context of a new span under parent: the same trace-id and flags, a fresh
 * parent-id (trace_span_id_new). */
void trace_child(const trace_ctx_t *parent, trace_ctx_t *child);

/* Eight random bytes, never all zero, from a per-thread generator seeded once
 * per thread from getrandom(2) (clock and thread address if that fails): a
 * few nanoseconds, no lock, no system call after the first. Not for secrets. */
void trace_span_id_new(uint8_t span_id[8]);

#endif
