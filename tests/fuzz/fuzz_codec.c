/* libFuzzer harness for the codec: every byte string a Kafka topic could hand the
 * processor goes through codec_decode and codec_to_json, in either framing: a
 * resolver stands in for the schema registry (id N < HF_REC__COUNT is record type
 * N's current schema, any other id is unknown). Either must succeed or
 * fail with an error code, without reading past the input, leaking, or letting
 * avro-c allocate on a hostile length. A decoded record must also re-encode. The
 * corpus (tests/fuzz/corpus/fuzz_codec) is replayed by make test-fuzz-corpus. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__lsan_default_options(void);

/* avro-c 1.11 places each value instance 4 bytes past its allocation (a refcount
 * comes first), so pointers inside the codec's cached per-thread values sit at
 * addresses LeakSanitizer skips by default and it reports their strings and
 * arrays as leaked. Scanning unaligned words sees them; real leaks still show. */
const char *__lsan_default_options(void)
{
    return "use_unaligned=1";
}

static hf_record_t g_rec, g_again; /* ~17 KiB each: static, not on the stack */
static uint8_t g_buf[2 * HF_RECORD_LEN_MAX];

static int fuzz_resolve(void *opaque, uint32_t id, uint64_t *fingerprint, char *errstr,
                        size_t errstr_size)
{
    if (id >= HF_REC__COUNT) {
        snprintf(errstr, errstr_size, "no schema with this id");
        return HF_ERR_UNKNOWN_SCHEMA;
    }
    *fingerprint = codec_fingerprint((hf_rec_type_t)id);
    return HF_OK;
}

static void init_once(void)
{
    static int inited;
    char errstr[256];
    if (inited)
        return;
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        abort();
    }
    codec_set_id_resolver(fuzz_resolve, NULL);
    inited = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char errstr[256];
    char *json = NULL;
    size_t len = 0;

    init_once();
    memset(&g_rec, 0, sizeof g_rec); /* decode fills only the record's own member */
    memset(&g_again, 0, sizeof g_again);
    if (codec_decode(data, size, &g_rec, errstr, sizeof errstr) == HF_OK) {
        /* Whatever decodes is within every bound, so it must encode again. */
        if (codec_encode(&g_rec, g_buf, sizeof g_buf, &len, errstr, sizeof errstr) != HF_OK) {
            fprintf(stderr, "decoded record does not re-encode: %s\n", errstr);
            abort();
        }
        if (codec_decode(g_buf, len, &g_again, errstr, sizeof errstr) != HF_OK ||
            g_again.type != g_rec.type ||
            /* Byte-exact on purpose: the codec fills fixed-size structs, and the same
             * bytes must decode to the same struct, padding included. */
            // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
            memcmp(&g_again.u, &g_rec.u, sizeof g_rec.u) != 0) {
            fprintf(stderr, "re-encoded record does not decode to itself: %s\n", errstr);
            abort();
        }
    }
    if (codec_to_json(data, size, &json, errstr, sizeof errstr) == HF_OK && !json)
        abort();
    free(json);
    return 0;
}
