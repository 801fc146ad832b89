/* The topics holdfast uses, by id. Names are "<prefix><base name>"; the prefix
 * (config topic_prefix, default empty) lets several holdfast deployments — or
 * test runs — share one cluster. Partition counts, cleanup policies and
 * co-partitioning groups are data in topics/topics.json, applied by
 * `hfctl topics apply`, which checks that every base name here is declared there. */
#ifndef HF_TOPICS_H
#define HF_TOPICS_H

#define HF_TOPIC_MAP(X)                                                                            \
    X(COUNTER_COMMANDS, "holdfast.counter-commands")                                               \
    X(STOCK_FEED, "holdfast.stock-feed")                                                           \
    X(COUNTER_RESULTS, "holdfast.counter-results")                                                 \
    X(STOCK_LEVELS, "holdfast.stock-levels")                                                       \
    X(COUNTER_CHANGELOG, "holdfast.counter-changelog")                                             \
    X(REQUESTS, "holdfast.requests")                                                               \
    X(REPLIES, "holdfast.replies")                                                                 \
    X(LEDGER, "holdfast.ledger")                                                                   \
    X(GATEWAY_CHANGELOG, "holdfast.gateway-changelog")                                             \
    X(AVAILABILITY, "holdfast.availability")                                                       \
    X(SIGNALS, "holdfast.signals")                                                                 \
    X(AGGREGATOR_CHANGELOG, "holdfast.aggregator-changelog")                                       \
    X(DEAD_LETTERS, "holdfast.dead-letters")                                                       \
    X(BENCH_RELAY, "holdfast.bench-relay")                                                         \
    X(BENCH_RELAY_CHANGELOG, "holdfast.bench-relay-changelog")

typedef enum {
#define HF_TOPIC_ENUM(id, name) HF_T_##id,
    HF_TOPIC_MAP(HF_TOPIC_ENUM)
#undef HF_TOPIC_ENUM
        HF_T__COUNT
} hf_topic_id_t;

#define HF_TOPIC_PREFIX_MAX 48

/* Sets the prefix once, before any thread reads names. */
void topics_set_prefix(const char *prefix);
const char *topics_prefix(void);
/* "<prefix>holdfast.counter-commands"; never NULL, stable for the process. */
const char *topic_name(hf_topic_id_t id);
/* The name without prefix. */
const char *topic_base_name(hf_topic_id_t id);
/* Looks a base name up; returns -1 if unknown. */
int topic_id_of_base(const char *base_name);

#endif
