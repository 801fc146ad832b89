/* Admission of input records: what a task checks before any handler sees a
 * record, in one place. A record is admitted only if it is within the size
 * caps, has a key that hashes (murmur2, the Java clients' and librdkafka's
 * murmur2_random partitioner) to the partition it arrived on, decodes, and is
 * of a record type its topic may carry (the stage's handler table says which).
 * A record that decodes but arrived on another partition (a producer on another
 * partitioner, such as librdkafka's default) is MISROUTED: the task forwards it
 * to its key's partition (task.c), whose owner admits it there. Everything else
 * is refused with a reason that names the topic, and the task turns it into a
 * dead letter: producers are outside the trust boundary, and a record on the
 * wrong partition or topic would be applied by a task that does not own its
 * state, or taken as an answer only another stage may give. */
#ifndef HF_ADMIT_H
#define HF_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#include "records.h"
#include "stage.h"

#define ADMIT_INPUTS_MAX 4

typedef enum {
    ADMIT_OK,        /* decoded into rec, *handler set */
    ADMIT_REFUSED,   /* dead letter with why; rec not usable */
    ADMIT_MISROUTED, /* decoded, on the wrong partition: forwarded (dead letter with why
                        once forwarded too often; the stage may answer it then) */
} admit_verdict_t;

typedef struct {
    const stage_def_t *def;
    int32_t partitions[ADMIT_INPUTS_MAX]; /* per input topic; 0 until known */
} admit_t;

void admit_init(admit_t *a, const stage_def_t *def);
/* The partition count of input topic input_index (from broker metadata, on
 * every assignment: a topic may have grown). */
void admit_set_partitions(admit_t *a, size_t input_index, int32_t partition_count);

/* One input record of input topic input_index. errstr receives the decoder's
 * detail. Pure but for the codec: no Kafka, no state. */
admit_verdict_t admit_record(const admit_t *a, size_t input_index, int32_t partition,
                             const void *key, size_t key_len, const void *value, size_t value_len,
                             hf_record_t *rec, const stage_handler_t **handler_out, char *why,
                             size_t why_size);

/* The partition of input topic input_index that key hashes to (murmur2); the
 * topic's partition count must be known. Where a MISROUTED record belongs. */
int32_t admit_partition_for(const admit_t *a, size_t input_index, const void *key, size_t key_len);

/* The handler for a record type on an input topic; NULL if that topic may not
 * carry it. */
const stage_handler_t *admit_handler_for(const stage_def_t *def, hf_topic_id_t topic,
                                         hf_rec_type_t type);

#endif
