/* topics/topics.json: the declared topics, and `hfctl topics apply`, which makes
 * the cluster match — creating what is missing, refusing co-partition groups
 * whose partition counts differ (in the file or on the broker). Topics are
 * created with the deployment's replication factor (the file's
 * "replication_factor" or an override) and min.insync.replicas derived from it. */
#ifndef HF_TOPICS_FILE_H
#define HF_TOPICS_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "hf_err.h"

/* How the topics of a deployment are replicated. */
typedef struct {
    int16_t factor;     /* replicas of each partition */
    int16_t min_insync; /* replicas a write with acks=all needs in sync */
} topics_replication_t;

/* The replication of a deployment: factor_override when > 0, else the topics
 * file's "replication_factor" (json_text is that file's text), each in
 * [1, HF_REPLICATION_FACTOR_MAX]. min_insync is 2 from a factor of 3 (one broker
 * may be lost with no acknowledged write lost, and writes go on), else 1 (a
 * factor of 2 with min ISR 2 would stop every write while one broker is down). */
int topics_replication_resolve(const char *json_text, int factor_override,
                               topics_replication_t *out, char *errstr,
                               size_t errstr_size) HF_MUST_CHECK;

/* Creates missing topics (names get the configured prefix) with the replication
 * resolved as above (factor_override 0: the file's), verifies existing ones
 * (their replication is left as it is), prints one line per topic to out. */
int topics_apply(const char *bootstrap, const char *path, int factor_override, FILE *out,
                 char *errstr, size_t errstr_size) HF_MUST_CHECK;

#endif
