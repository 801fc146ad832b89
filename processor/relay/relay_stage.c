/* The relay stage (see relay.h): every command it reads is decoded and written
 * again, re-encoded, to the relay topic under the same key. */
#include "relay.h"

static int relay_any(stage_ctx_t *ctx, const hf_record_t *rec)
{
    size_t key_len = 0;
    const char *key = stage_record_key(ctx, &key_len);
    return stage_emit(ctx, HF_T_BENCH_RELAY, key, key_len, rec);
}

static const hf_topic_id_t relay_inputs[] = {HF_T_COUNTER_COMMANDS};

static const stage_handler_t relay_handlers[] = {
    {HF_T_COUNTER_COMMANDS, HF_REC_HOLD, relay_any},
    {HF_T_COUNTER_COMMANDS, HF_REC_COMMIT_HOLD, relay_any},
    {HF_T_COUNTER_COMMANDS, HF_REC_RELEASE_HOLD, relay_any},
    {HF_T_COUNTER_COMMANDS, HF_REC_STOCK_FEED, relay_any},
};

static const stage_def_t relay_def = {
    .name = "relay",
    .input_topics = relay_inputs,
    .input_topics_count = 1,
    .changelog_topic = HF_T_BENCH_RELAY_CHANGELOG,
    .handlers = relay_handlers,
    .handlers_count = sizeof relay_handlers / sizeof relay_handlers[0],
};

const stage_def_t *relay_stage(void)
{
    return &relay_def;
}
