/* libFuzzer harness for the traceparent parser (common/trace.h): every byte
 * string a client may put in a record's `traceparent` header goes through
 * trace_parse, which must not read past the input. An accepted value must
 * write back as a version 00 value that parses to the same context, and a
 * child of it must keep the trace-id. The corpus (tests/fuzz/corpus/fuzz_trace)
 * is replayed by make test-fuzz-corpus. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so that reading one past the end is seen. */
    char *text = malloc(size ? size : 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    trace_ctx_t tc, back, child;
    if (trace_parse(text, size, &tc)) {
        char out[TRACE_PARENT_LEN + 1];
        trace_format(&tc, out);
        if (strlen(out) != TRACE_PARENT_LEN || !trace_parse(out, strlen(out), &back) ||
            memcmp(&back, &tc, sizeof tc) != 0)
            abort();
        trace_child(&tc, &child);
        if (memcmp(child.trace_id, tc.trace_id, sizeof tc.trace_id) != 0 || child.flags != tc.flags)
            abort();
    }
    free(text);
    return 0;
}
