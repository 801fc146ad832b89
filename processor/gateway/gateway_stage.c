/* The gateway stage's definition: its handler table, from record type (and the
 * topic that may carry it) to the file that handles it, and its timers, restore
 * hook and misrouted-request answer. Nothing else: what the handlers share lives
 * in gw_request.c, gw_answer.c, gw_emit.c and gw_state.c (gateway.h). */
#include "config.h"
#include "gateway.h"
#include "hf_assert.h"
#include "metrics_flow.h"
#include "topics.h"

static const hf_topic_id_t gateway_inputs[] = {HF_T_REQUESTS, HF_T_COUNTER_RESULTS};

static int on_counter_result(stage_ctx_t *ctx, const hf_record_t *rec);

/* What happens on each record type, and which topic may carry it: one
 * handler, one file. Clients write requests; only the counters write results
 * (a CounterResult on the requests topic would be a forged OK). */
static const stage_handler_t gateway_handlers[] = {
    {HF_T_REQUESTS, HF_REC_RESERVE, gateway_on_reserve},
    {HF_T_REQUESTS, HF_REC_COMMIT, gateway_on_commit},
    {HF_T_REQUESTS, HF_REC_RELEASE, gateway_on_release},
    {HF_T_REQUESTS, HF_REC_EXTEND, gateway_on_extend},
    {HF_T_REQUESTS, HF_REC_PAYMENT_EVENT, gateway_on_payment_event},
    {HF_T_COUNTER_RESULTS, HF_REC_COUNTER_RESULT, on_counter_result},
    {HF_T_COUNTER_RESULTS, HF_REC_ALLOTMENT_GRANT, gateway_on_allotment_grant},
};

/* Requests parked while a counter's answer was on its way (park.c) are applied
 * as soon as the result that brings it is: through the table, in the order
 * they came, in this transaction. Only a Hold's result can bring it. */
static int apply_parked(stage_ctx_t *ctx, const char *reservation_id)
{
    hf_reservation_state_t rs;
    int err = gw_load(ctx, reservation_id, &rs);
    if (err == HF_ERR_NOTFOUND || (!err && (!rs.counter_answers || gw_counter_awaited(&rs))))
        return HF_OK;
    for (int slot = 0; !err && slot < GW_PARKED_MAX; slot++) {
        hf_record_t parked;
        bool found = false;
        err = gw_unpark(ctx, reservation_id, slot, &parked, &found);
        if (err || !found)
            break;
        const stage_handler_t *row = NULL;
        for (size_t i = 0; i < sizeof gateway_handlers / sizeof gateway_handlers[0]; i++)
            if (gateway_handlers[i].topic == HF_T_REQUESTS &&
                gateway_handlers[i].type == parked.type)
                row = &gateway_handlers[i];
        hf_assert(row != NULL); /* only requests the prologue accepted are parked */
        err = row->handle(ctx, &parked);
    }
    return err;
}

static int on_counter_result(stage_ctx_t *ctx, const hf_record_t *rec)
{
    int err = gateway_on_counter_result(ctx, rec);
    /* Only the first round's Hold asks its counter to answer: no other result
     * can end a wait, and none costs the reservation's second load. */
    if (err || rec->u.counter_result.command != HF_CMD_HOLD || rec->u.counter_result.attempt != 0)
        return err;
    return apply_parked(ctx, rec->u.counter_result.reservation_id);
}

/* Time between two gateway transactions: the configured floor, and a period
 * that grows with the input rate (pacing.h). */
static void gateway_pacing(const hf_config_t *cfg, pacing_conf_t *out)
{
    out->floor_ms = cfg->gateway_commit_interval_ms;
    out->gap_pct = cfg->txn_gap_pct;
    out->period_max_ms = cfg->gateway_txn_period_max_ms;
    out->full_records_s = cfg->gateway_txn_period_full_records_s;
}

static const stage_def_t gateway_def = {
    .name = "gateway",
    .metrics_series = METRICS_FLOW_REPLIES | METRICS_FLOW_EXPIRY,
    .init = gateway_env_new,
    .destroy = gateway_env_destroy,
    .input_topics = gateway_inputs,
    .input_topics_count = sizeof gateway_inputs / sizeof gateway_inputs[0],
    .changelog_topic = HF_T_GATEWAY_CHANGELOG,
    .handlers = gateway_handlers,
    .handlers_count = sizeof gateway_handlers / sizeof gateway_handlers[0],
    .tick = gateway_tick,
    .tick_interval_ms = 250,
    .reindex = gateway_reindex,
    .pacing = gateway_pacing,
    .reindex_tags = "RI", /* reservations, idempotency records */
    .local_tags = "TC",   /* the timer index and the sweeper's cursor */
    .on_misrouted = gw_on_misrouted,
};

const stage_def_t *gateway_stage(void)
{
    return &gateway_def;
}
