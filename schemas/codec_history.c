/* Writer schemas of earlier holdfast versions that this build still reads. A
 * record written with one of them is resolved to the current schema: fields the
 * old writer lacks take the current schema's defaults, fields it had that are gone
 * are skipped. Append an entry whenever a schemas/<Name>.avsc changes in a
 * way that alters its fingerprint, so records already in Kafka and in changelogs
 * stay readable. */
#include "codec_internal.h"

/* Hold v1, the first draft of Hold, before issued_at_ms (default 0) was added.
 * Kept as the worked example of resolution: tests/unit/test_codec.c decodes
 * bytes that the Python Avro library wrote with it. */
static const char hold_v1[] =
    "{\"type\":\"record\",\"name\":\"Hold\",\"namespace\":\"holdfast\",\"fields\":["
    "{\"name\":\"reservation_id\",\"type\":\"string\"},"
    "{\"name\":\"attempt\",\"type\":\"int\"},"
    "{\"name\":\"warehouse_id\",\"type\":\"string\"},"
    "{\"name\":\"sku\",\"type\":\"string\"},"
    "{\"name\":\"qty\",\"type\":\"long\"}]}";

const codec_history_t codec_history[] = {
    {HF_REC_HOLD, hold_v1},
};
const size_t codec_history_count = sizeof codec_history / sizeof codec_history[0];
