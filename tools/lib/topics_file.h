/* topics/topics.json: the declared topics, and `hfctl topics apply`, which makes
 * the cluster match — creating what is missing, refusing co-partition groups
 * whose partition counts differ (in the file or on the broker). */
#ifndef HF_TOPICS_FILE_H
#define HF_TOPICS_FILE_H

#include <stdio.h>

#include "hf_err.h"

/* Creates missing topics (names get the configured prefix), verifies existing
 * ones, prints one line per topic to out. */
int topics_apply(const char *bootstrap, const char *path, FILE *out, char *errstr,
                 size_t errstr_size) HF_MUST_CHECK;

#endif
