/* Topic names the processor uses. Their partition counts, cleanup policies and
 * co-partitioning groups are data in topics/topics.json, applied by
 * `hfctl topics apply`, which also checks that every name here is declared there. */
#ifndef HF_TOPICS_H
#define HF_TOPICS_H

#define HF_TOPIC_COUNTER_COMMANDS "holdfast.counter-commands"
#define HF_TOPIC_STOCK_FEED "holdfast.stock-feed"
#define HF_TOPIC_COUNTER_RESULTS "holdfast.counter-results"
#define HF_TOPIC_STOCK_LEVELS "holdfast.stock-levels"
#define HF_TOPIC_COUNTER_CHANGELOG "holdfast.counter-changelog"
#define HF_TOPIC_REQUESTS "holdfast.requests"
#define HF_TOPIC_REPLIES "holdfast.replies"
#define HF_TOPIC_LEDGER "holdfast.ledger"
#define HF_TOPIC_GATEWAY_CHANGELOG "holdfast.gateway-changelog"
#define HF_TOPIC_AVAILABILITY "holdfast.availability"
#define HF_TOPIC_SIGNALS "holdfast.signals"
#define HF_TOPIC_AGGREGATOR_CHANGELOG "holdfast.aggregator-changelog"
#define HF_TOPIC_DEAD_LETTERS "holdfast.dead-letters"

#endif
