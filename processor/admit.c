/* See admit.h. The checks run cheapest first and before the decoder where
 * they can: an oversize value never reaches avro-c, a misrouted record is
 * refused whatever its bytes say. */
#include "admit.h"

#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "hf_assert.h"
#include "hf_limits.h"
#include "kafka.h"
#include "topics.h"

void admit_init(admit_t *a, const stage_def_t *def)
{
    hf_assert(def->input_topics_count <= ADMIT_INPUTS_MAX);
    memset(a, 0, sizeof *a);
    a->def = def;
}

void admit_set_partitions(admit_t *a, size_t input_index, int32_t partition_count)
{
    hf_assert(input_index < a->def->input_topics_count && partition_count > 0);
    a->partitions[input_index] = partition_count;
}

const stage_handler_t *admit_handler_for(const stage_def_t *def, hf_topic_id_t topic,
                                         hf_rec_type_t type)
{
    for (size_t i = 0; i < def->handlers_count; i++)
        if (def->handlers[i].topic == topic && def->handlers[i].type == type)
            return &def->handlers[i];
    return NULL;
}

static admit_verdict_t check_size(const char *topic, size_t key_len, size_t value_len, char *why,
                                  size_t why_size)
{
    if (key_len == 0) {
        snprintf(why, why_size, "a record on %s needs a key (murmur2 places it by key)", topic);
        return ADMIT_REFUSED;
    }
    if (key_len > HF_INPUT_KEY_BYTES_MAX) {
        snprintf(why, why_size, "key of %zu bytes on %s exceeds HF_INPUT_KEY_BYTES_MAX (%d)",
                 key_len, topic, HF_INPUT_KEY_BYTES_MAX);
        return ADMIT_REFUSED;
    }
    if (value_len > HF_INPUT_VALUE_BYTES_MAX) {
        snprintf(why, why_size,
                 "value of %zu bytes on %s exceeds HF_INPUT_VALUE_BYTES_MAX (%d); "
                 "the dead letter keeps its first bytes",
                 value_len, topic, HF_INPUT_VALUE_BYTES_MAX);
        return ADMIT_REFUSED;
    }
    if (value_len == 0) {
        snprintf(why, why_size, "empty value on %s: a command must be an Avro record", topic);
        return ADMIT_REFUSED;
    }
    return ADMIT_OK;
}

int32_t admit_partition_for(const admit_t *a, size_t input_index, const void *key, size_t key_len)
{
    hf_assert(input_index < a->def->input_topics_count);
    int32_t count = a->partitions[input_index];
    hf_assert(count > 0); /* set on assignment, before any record */
    return kafka_partition_for_key(key, key_len, count);
}

admit_verdict_t admit_record(const admit_t *a, size_t input_index, int32_t partition,
                             const void *key, size_t key_len, const void *value, size_t value_len,
                             hf_record_t *rec, const stage_handler_t **handler_out, char *why,
                             size_t why_size)
{
    hf_assert(input_index < a->def->input_topics_count);
    hf_topic_id_t topic_id = a->def->input_topics[input_index];
    const char *topic = topic_name(topic_id);
    *handler_out = NULL;
    why[0] = '\0';
    admit_verdict_t v = check_size(topic, key_len, value ? value_len : 0, why, why_size);
    if (v != ADMIT_OK)
        return v;

    int32_t count = a->partitions[input_index];
    int32_t want = admit_partition_for(a, input_index, key, key_len);
    bool misrouted = want != partition;

    char errstr[400];
    int err = codec_decode(value, value_len, rec, errstr, sizeof errstr);
    if (misrouted) {
        snprintf(why, why_size,
                 "record on partition %d of %s, but its key hashes to partition %d of %d "
                 "(murmur2): the producer must use the murmur2 partitioner",
                 partition, topic, want, count);
        return err ? ADMIT_REFUSED : ADMIT_MISROUTED;
    }
    if (err) {
        snprintf(why, why_size, "%s: %s", hf_err_name(err), errstr);
        return ADMIT_REFUSED;
    }
    *handler_out = admit_handler_for(a->def, topic_id, rec->type);
    if (!*handler_out) {
        snprintf(why, why_size, "a %s record may not come from %s (stage %s)",
                 hf_rec_type_name(rec->type), topic, a->def->name);
        return ADMIT_REFUSED;
    }
    return ADMIT_OK;
}
