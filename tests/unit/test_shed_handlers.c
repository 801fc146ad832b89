/* Unit tests of load shedding (processor/gateway/shed.c) and of the sold-out
 * check in front of it (reserve.c): the gateway's handlers on the fake stage
 * of fake/fake_stage.h, a routing view the test fills, a controllable clock,
 * and counters that answer every Hold when the test says. How long a Reserve
 * waited is set through the broker append time the fake stage answers
 * (record_timestamp_ms); every reserve of a test lands in one partition, as
 * shedding is decided per partition. Built like every test_*_handlers.c
 * (linked with the fake stage). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "config.h"
#include "fake/fake_stage.h"
#include "gateway/gateway.h"
#include "hf_limits.h"
#include "log.h"
#include "stage.h"
#include "state.h"
#include "topics.h"

#define T0             1700000000000LL
#define TTL_DEFAULT_MS (15 * 60 * 1000LL)
#define TARGET_MS      50
#define INTERVAL_MS    200
#define DEADLINE_MS    1000
#define PROBE_EVERY_MS (INTERVAL_MS / 4) /* shed.c: GW_SHED_PROBES_PER_INTERVAL */
#define VIEW_MAX       8
#define SENT_MAX       64

struct fake_stage_user {
    gateway_env_t env;
    gw_sweep_t sweep;
    hf_availability_t view[VIEW_MAX];
    size_t view_count;
    int64_t staleness_ms;
    int32_t partition; /* every reserve of the test lands here */
    int serial;        /* names new reservations */
    size_t cmd_cursor; /* Holds below it were answered */
    hf_id_t last_rid;
    char last_message[HF_TEXT_LEN_MAX + 1];
};

static int fake_availability(void *opaque, const char *sku, hf_availability_t *out)
{
    stage_ctx_t *fx = opaque;
    for (size_t i = 0; i < fx->user->view_count; i++)
        if (strcmp(fx->user->view[i].sku, sku) == 0) {
            *out = fx->user->view[i];
            return HF_OK;
        }
    return HF_ERR_NOTFOUND;
}

static int64_t fake_staleness(void *opaque)
{
    return ((stage_ctx_t *)opaque)->user->staleness_ms;
}

/* The view says sku has avail[i] at W(i+1). */
static void view_set(stage_ctx_t *fx, const char *sku, const int64_t *avail, size_t n)
{
    assert_true(fx->user->view_count < VIEW_MAX);
    hf_availability_t *a = &fx->user->view[fx->user->view_count++];
    memset(a, 0, sizeof *a);
    snprintf(a->sku, sizeof a->sku, "%s", sku);
    for (size_t i = 0; i < n; i++) {
        hf_wh_available_t *w = &a->warehouses[a->warehouses_count++];
        snprintf(w->warehouse_id, sizeof w->warehouse_id, "%s", fake_warehouses[i].id);
        w->available = avail[i];
        a->total += avail[i];
    }
    a->in_stock = a->total > 0;
}

static const int64_t plenty[6] = {1000, 1000, 1000, 1000, 1000, 1000};
static const int64_t none[6] = {0, 0, 0, 0, 0, 0};

/* The shedding state is per task thread, and cmocka runs every test on this
 * one: each test starts an hour after the last, when nothing of it counts. */
static int64_t test_hour;

static int setup(void **state)
{
    stage_ctx_t *fx = fake_stage_new("shed", T0 + ++test_hour * 3600 * 1000LL);
    fx->user = calloc(1, sizeof *fx->user);
    assert_non_null(fx->user);
    gateway_env_t *e = &fx->user->env;
    fake_stage_routes(&e->routes);
    e->ttl_default_ms = TTL_DEFAULT_MS;
    snprintf(e->reply_topic_prefix, sizeof e->reply_topic_prefix, "holdfast.replies.");
    e->hold_max_factor_pct = 200;
    e->idempotency_retention_ms = 24 * 3600 * 1000LL;
    e->reservation_retention_ms = 7 * 24 * 3600 * 1000LL;
    e->late_policy = GW_LATE_REFUND;
    e->result_timeout_ms = 5000;
    e->view_stale_max_ms = 10000;
    e->availability = fake_availability;
    e->staleness_ms = fake_staleness;
    e->opaque = fx;
    e->reserve_deadline_ms = DEADLINE_MS;
    e->reserve_shed_target_ms = TARGET_MS;
    e->reserve_shed_interval_ms = INTERVAL_MS;
    fx->user->sweep.run_id = 1;
    e->sweep = &fx->user->sweep;
    fx->user->partition = fake_stage_partition_of("shed-anchor");
    fx->env = e;
    view_set(fx, "SKU-A", plenty, 6);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    stage_ctx_t *fx = *state;
    gw_hint_destroy(fx->user->env.hint);
    free(fx->user);
    fake_stage_destroy(fx);
    return 0;
}

/* ---- driving */

static void apply(stage_ctx_t *fx, const char *rid, const hf_record_t *rec)
{
    assert_int_equal(fake_stage_apply(fx, gateway_stage(), rid, rec), HF_OK);
    fake_stage_commit(fx);
}

/* A reservation_id not used yet that lands in the test's partition. */
static void next_rid(stage_ctx_t *fx, char *out, size_t out_size)
{
    do
        snprintf(out, out_size, "sh-%d", fx->user->serial++);
    while (fake_stage_partition_of(out) != fx->user->partition);
}

typedef enum { SERVED, BUSY, INSUFFICIENT, OTHER } fate_t;

/* What became of a Reserve: its reply if it got one at once, else SERVED
 * when it sent Holds. The reply's text goes to last_message. */
static fate_t fate_of(stage_ctx_t *fx, size_t from)
{
    for (size_t i = from; i < fx->emits_count; i++) {
        const fake_stage_emit_t *e = &fx->emits[i];
        if (e->topic_id == -1 && e->rec.type == HF_REC_REPLY) {
            snprintf(fx->user->last_message, sizeof fx->user->last_message, "%s",
                     e->rec.u.reply.message);
            switch (e->rec.u.reply.outcome) {
            case HF_REPLY_BUSY:
                return BUSY;
            case HF_REPLY_REJECTED_INSUFFICIENT:
                return INSUFFICIENT;
            case HF_REPLY_HELD:
                return SERVED;
            default:
                return OTHER;
            }
        }
    }
    for (size_t i = from; i < fx->emits_count; i++)
        if (fx->emits[i].topic_id == HF_T_COUNTER_COMMANDS && fx->emits[i].rec.type == HF_REC_HOLD)
            return SERVED;
    return OTHER;
}

/* A new shopper's Reserve of one unit of sku that waited waited_ms in the
 * requests partition before the gateway read it, now. */
static fate_t offer(stage_ctx_t *fx, const char *sku, int64_t waited_ms)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    next_rid(fx, q->reservation_id, sizeof q->reservation_id);
    snprintf(fx->user->last_rid, sizeof fx->user->last_rid, "%s", q->reservation_id);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "k");
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "%s", sku);
    q->lines[0].qty = 1;
    q->ship_to = (hf_geo_t){40.73, -73.99}; /* Manhattan: W1 is the nearest */
    q->sent_at_ms = fx->now_ms - waited_ms;
    fx->record_timestamp_ms = fx->now_ms - waited_ms;
    size_t from = fx->emits_count;
    apply(fx, q->reservation_id, &r);
    fx->record_timestamp_ms = 0;
    return fate_of(fx, from);
}

/* The counters answer the Hold emitted at index i, now: held, `available`
 * left at its pair. */
static void counter_answers(stage_ctx_t *fx, size_t i, int64_t available)
{
    const hf_hold_t *h = &fx->emits[i].rec.u.hold;
    hf_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.type = HF_REC_COUNTER_RESULT;
    hf_counter_result_t *c = &rec.u.counter_result;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", h->reservation_id);
    c->attempt = h->attempt;
    snprintf(c->warehouse_id, sizeof c->warehouse_id, "%s", h->warehouse_id);
    snprintf(c->sku, sizeof c->sku, "%s", h->sku);
    c->command = HF_CMD_HOLD;
    c->outcome = HF_OUTCOME_OK;
    c->qty = h->qty;
    c->available = available;
    c->applied_at_ms = fx->now_ms;
    c->escrow_balance = 0;
    apply(fx, c->reservation_id, &rec);
}

static bool is_hold(const stage_ctx_t *fx, size_t i)
{
    return fx->emits[i].topic_id == HF_T_COUNTER_COMMANDS && fx->emits[i].rec.type == HF_REC_HOLD;
}

/* The counters answer every Hold sent since they last looked, now. */
static void counters_answer(stage_ctx_t *fx, int64_t available)
{
    size_t end = fx->emits_count;
    for (; fx->user->cmd_cursor < end; fx->user->cmd_cursor++)
        if (is_hold(fx, fx->user->cmd_cursor))
            counter_answers(fx, fx->user->cmd_cursor, available);
}

/* Reserves that keep waiting over the target, a batch every 40 ms, until the
 * partition sheds: returns when the first one was shed. */
static void stand_a_queue(stage_ctx_t *fx, int64_t waited_ms)
{
    for (int batch = 0; batch < 20; batch++, fx->now_ms += 40)
        for (int i = 0; i < 3; i++)
            if (offer(fx, "SKU-A", waited_ms + 10 * (2 - i)) == BUSY)
                return;
    fail_msg("a queue standing over the target for 800 ms was never shed");
}

static hf_reservation_state_t load_rs(stage_ctx_t *fx, const char *rid)
{
    fx->partition = fake_stage_partition_of(rid);
    hf_reservation_state_t rs;
    int err = gw_load(fx, rid, &rs);
    if (err)
        fail_msg("reservation %s: %s", rid, hf_err_name(err));
    return rs;
}

/* ======================================================================
 * Bursts
 * ====================================================================== */

/* A burst the pipeline drains: the whole of it read in one batch (its oldest
 * waited 900 ms), then a batch every 40 ms whose oldest reserves waited up
 * to 400 ms but whose freshest was read 5 ms after it was sent — for two
 * seconds; and the counters taking 400-900 ms to answer (a busy box), which
 * is no queue shedding would drain. Not one shopper is told BUSY. */
static void test_a_burst_whose_waits_fall_back_under_target_is_never_shed(void **state)
{
    stage_ctx_t *fx = *state;
    int busy = 0, served = 0;
    for (int i = 0; i < 40; i++) { /* 40 shoppers at once, read oldest first */
        fate_t f = offer(fx, "SKU-A", 900 - 20 * i);
        busy += f == BUSY;
        served += f == SERVED;
    }
    for (int batch = 0; batch < 50; batch++) {
        fx->now_ms += 40;
        const int64_t waits[4] = {400, 200, 60, 5};
        for (int i = 0; i < 4; i++) {
            fate_t f = offer(fx, "SKU-A", waits[i]);
            busy += f == BUSY;
            served += f == SERVED;
        }
        if (batch % 10 == 9) /* the answers of the last 400 ms, slow but in time */
            counters_answer(fx, 900);
    }
    assert_int_equal(busy, 0);
    assert_int_equal(served, 40 + 50 * 4);
}

/* ======================================================================
 * A standing queue
 * ====================================================================== */

/* Every reserve of a batch every 40 ms waited 80-100 ms: nothing is shed
 * until that has lasted an interval; then new reserves are answered BUSY,
 * leaving nothing behind, while a commit of the same partition is still
 * answered. */
static void
test_a_standing_queue_is_shed_once_its_least_wait_stays_over_target_for_an_interval(void **state)
{
    stage_ctx_t *fx = *state;
    int64_t start = fx->now_ms;
    /* Within the interval: served, however long each waited. */
    for (; fx->now_ms < start + INTERVAL_MS; fx->now_ms += 40)
        for (int i = 0; i < 3; i++)
            assert_int_equal(offer(fx, "SKU-A", 100 - 10 * i), SERVED);
    char held[sizeof(hf_id_t)];
    snprintf(held, sizeof held, "%s", fx->user->last_rid);
    counters_answer(fx, 900);
    assert_int_equal(load_rs(fx, held).status, HF_RES_HELD);
    /* An interval above the target: shed. */
    size_t from = fx->emits_count;
    assert_int_equal(offer(fx, "SKU-A", 80), BUSY);
    assert_non_null(strstr(fx->user->last_message, "waited over 50 ms"));
    assert_non_null(strstr(fx->user->last_message, "retry with the same idempotency key"));
    for (size_t i = from; i < fx->emits_count; i++)
        assert_int_not_equal(fx->emits[i].topic_id, HF_T_COUNTER_COMMANDS);
    hf_reservation_state_t rs;
    fx->partition = fx->user->partition;
    assert_int_equal(gw_load(fx, fx->user->last_rid, &rs), HF_ERR_NOTFOUND);
    /* Commits are never shed: shedding reserves is what lets them through. */
    hf_record_t c;
    memset(&c, 0, sizeof c);
    c.type = HF_REC_COMMIT;
    snprintf(c.u.commit.reservation_id, sizeof c.u.commit.reservation_id, "%s", held);
    snprintf(c.u.commit.idempotency_key, sizeof c.u.commit.idempotency_key, "c");
    snprintf(c.u.commit.payment_id, sizeof c.u.commit.payment_id, "pay");
    from = fx->emits_count;
    apply(fx, held, &c);
    bool committed = false;
    for (size_t i = from; i < fx->emits_count; i++)
        committed |= fx->emits[i].topic_id == -1 && fx->emits[i].rec.type == HF_REC_REPLY &&
                     fx->emits[i].rec.u.reply.outcome == HF_REPLY_COMMITTED;
    assert_true(committed);
}

/* While shedding, one reserve per PROBE_EVERY_MS is let through (for a
 * second, reserves every 10 ms, five at a time: 20 of 500), and the first
 * reserve that waited less than the target ends it: those after it are
 * served again, until another interval above the target. */
static void
test_a_shed_partition_lets_some_reserves_through_and_stops_shedding_when_waits_recover(void **state)
{
    stage_ctx_t *fx = *state;
    stand_a_queue(fx, 300);
    int served = 0, busy = 0;
    for (int tick = 0; tick < 100; tick++) {
        fx->now_ms += 10;
        for (int i = 0; i < 5; i++) {
            fate_t f = offer(fx, "SKU-A", 300);
            served += f == SERVED;
            busy += f == BUSY;
        }
    }
    assert_int_equal(served, 1000 / PROBE_EVERY_MS);
    assert_int_equal(busy, 500 - served);
    /* The queue drained: a reserve read 10 ms after it was sent... */
    fx->now_ms += 10;
    assert_int_equal(offer(fx, "SKU-A", 10), SERVED);
    /* ...and the ones after it are served, even slow ones, for an interval. */
    for (int64_t start = fx->now_ms; fx->now_ms < start + INTERVAL_MS; fx->now_ms += 20)
        for (int i = 0; i < 5; i++)
            assert_int_equal(offer(fx, "SKU-A", 300), SERVED);
}

/* The counters answer in 1.5 s — past the deadline, for longer than an
 * interval — while every Reserve reaches the gateway at once: new reserves are
 * shed but for the probes, and as soon as a probe's Holds come back in time,
 * shedding stops. */
static void test_a_slow_counter_hop_is_shed_until_a_probe_comes_back_fast(void **state)
{
    stage_ctx_t *fx = *state;
    int64_t t0 = fx->now_ms;
    for (int i = 0; i < 6; i++, fx->now_ms += 40) /* at t0 .. t0+200 */
        assert_int_equal(offer(fx, "SKU-A", 5), SERVED);
    /* Their answers, 1,500-1,580 ms after their Holds went out: #0 at +1500,
     * #1-#2 at +1600, #3-#5 at +1700. */
    size_t sent = fx->emits_count, seen = 0;
    for (size_t i = 0; i < sent; i++) {
        if (!is_hold(fx, i))
            continue;
        fx->now_ms = t0 + (seen == 0 ? 1500 : seen <= 2 ? 1600 : 1700);
        counter_answers(fx, i, 900);
        seen++;
    }
    assert_int_equal(seen, 6);
    fx->user->cmd_cursor = fx->emits_count;
    assert_int_equal(fx->now_ms, t0 + 1700);
    assert_int_equal(offer(fx, "SKU-A", 5), BUSY);
    assert_non_null(strstr(fx->user->last_message, "counters have answered slower than 1000 ms"));
    fx->now_ms += 20;
    assert_int_equal(offer(fx, "SKU-A", 5), BUSY);
    fx->now_ms = t0 + 1700 + PROBE_EVERY_MS; /* the probe */
    fx->user->cmd_cursor = fx->emits_count;
    assert_int_equal(offer(fx, "SKU-A", 5), SERVED);
    assert_int_equal(offer(fx, "SKU-A", 5), BUSY); /* only one */
    /* The probe's Holds come back 30 ms later: the counters have recovered. */
    fx->now_ms += 30;
    counters_answer(fx, 900);
    for (int i = 0; i < 10; i++)
        assert_int_equal(offer(fx, "SKU-A", 5), SERVED);
}

/* ======================================================================
 * The hard deadline
 * ====================================================================== */

/* A Reserve that waited past reserve_deadline_ms is shed with no queue
 * standing at all — and with the CoDel rule off (target 0) too; a deadline of
 * 0 sheds nothing, even a standing queue. */
static void test_the_hard_deadline_still_sheds(void **state)
{
    stage_ctx_t *fx = *state;
    assert_int_equal(offer(fx, "SKU-A", DEADLINE_MS + 1), BUSY);
    assert_non_null(strstr(fx->user->last_message, "waited 1001 ms to reach the gateway"));
    assert_non_null(strstr(fx->user->last_message, "deadline 1000 ms"));
    assert_int_equal(offer(fx, "SKU-A", DEADLINE_MS), SERVED);
    fx->now_ms += 10;
    assert_int_equal(offer(fx, "SKU-A", 5), SERVED);
    assert_int_equal(offer(fx, "SKU-A", 5000), BUSY);

    fx->user->env.reserve_shed_target_ms = 0; /* the deadline only */
    assert_int_equal(offer(fx, "SKU-A", DEADLINE_MS + 1), BUSY);
    for (int batch = 0; batch < 25; batch++, fx->now_ms += 40)
        assert_int_equal(offer(fx, "SKU-A", 300), SERVED);

    fx->user->env.reserve_shed_target_ms = TARGET_MS;
    fx->user->env.reserve_deadline_ms = 0; /* never shed */
    assert_int_equal(offer(fx, "SKU-A", 5000), SERVED);
    for (int batch = 0; batch < 25; batch++, fx->now_ms += 40)
        assert_int_equal(offer(fx, "SKU-A", 300), SERVED);
}

/* ======================================================================
 * Sold out before shedding
 * ====================================================================== */

/* While the partition sheds, a shopper for a SKU the view calls sold out, or
 * one the counters' last answers (stock hints) call empty, is answered
 * REJECTED_INSUFFICIENT in this hop — no Hold, a REJECTED reservation kept
 * for its retries — and so is one past the deadline; a shopper for a SKU in
 * stock is told BUSY meanwhile. A stale view says nothing: BUSY. */
static void test_a_sold_out_sku_is_answered_rejected_insufficient_even_while_shedding(void **state)
{
    stage_ctx_t *fx = *state;
    gateway_env_t *e = &fx->user->env;
    e->hint = gw_hint_new(500);
    assert_non_null(e->hint);
    view_set(fx, "SKU-GONE", none, 6);
    const int64_t ten_at_w1[1] = {10};
    view_set(fx, "SKU-HINTED", ten_at_w1, 1);
    stand_a_queue(fx, 300);
    gw_hint_note(e->hint, "W1", "SKU-HINTED", 0, fx->now_ms); /* a counter just said so */

    assert_int_equal(offer(fx, "SKU-A", 300), BUSY);
    size_t from = fx->emits_count;
    assert_int_equal(offer(fx, "SKU-GONE", 300), INSUFFICIENT);
    assert_non_null(strstr(fx->user->last_message, "sku SKU-GONE: 1 asked, 0 available"));
    for (size_t i = from; i < fx->emits_count; i++)
        assert_int_not_equal(fx->emits[i].topic_id, HF_T_COUNTER_COMMANDS);
    assert_int_equal(load_rs(fx, fx->user->last_rid).status, HF_RES_REJECTED);
    assert_int_equal(offer(fx, "SKU-HINTED", 300), INSUFFICIENT);
    assert_int_equal(offer(fx, "SKU-GONE", 5000), INSUFFICIENT); /* past the deadline */
    assert_int_equal(offer(fx, "SKU-A", 300), BUSY);

    fx->user->staleness_ms = e->view_stale_max_ms + 1; /* routing would degrade */
    assert_int_equal(offer(fx, "SKU-GONE", 300), BUSY);
}

/* ======================================================================
 * Settings
 * ====================================================================== */

static int load_config(const char *json, hf_config_t *cfg, char *errstr, size_t errstr_size)
{
    char path[] = "/tmp/hf-shed-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    config_defaults(cfg);
    int err = config_load_file(cfg, path, errstr, errstr_size);
    unlink(path);
    return err;
}

/* The defaults pass their rules and reach the gateway's environment; a target
 * at or over the deadline, or an interval out of range, is refused naming the
 * key; target 0 (the deadline only) and deadline 0 (never shed) are fine. */
static void test_the_shedding_settings_have_defaults_and_are_checked(void **state)
{
    (void)state;
    hf_config_t cfg;
    char errstr[512] = "";
    config_defaults(&cfg);
    assert_int_equal(cfg.reserve_deadline_ms, 1000);
    assert_int_equal(cfg.reserve_shed_target_ms, 150);
    assert_int_equal(cfg.reserve_shed_interval_ms, 500);
    assert_int_equal(config_check(&cfg, errstr, sizeof errstr), HF_OK);
    gateway_env_t env;
    assert_int_equal(gateway_env_configure(&cfg, &env, errstr, sizeof errstr), HF_OK);
    assert_int_equal(env.reserve_deadline_ms, 1000);
    assert_int_equal(env.reserve_shed_target_ms, 150);
    assert_int_equal(env.reserve_shed_interval_ms, 500);

    assert_int_equal(load_config("{\"reserve_shed_target_ms\": 1000}", &cfg, errstr, sizeof errstr),
                     HF_ERR_CONFIG);
    assert_non_null(
        strstr(errstr, "reserve_shed_target_ms 1000 must be below reserve_deadline_ms"));
    assert_int_equal(load_config("{\"reserve_shed_interval_ms\": 5}", &cfg, errstr, sizeof errstr),
                     HF_ERR_CONFIG);
    assert_non_null(strstr(errstr, "reserve_shed_interval_ms"));
    assert_int_equal(
        load_config("{\"reserve_shed_target_ms\": 0, \"reserve_shed_interval_ms\": 100}", &cfg,
                    errstr, sizeof errstr),
        HF_OK);
    assert_int_equal(cfg.reserve_shed_interval_ms, 100);
    assert_int_equal(load_config("{\"reserve_deadline_ms\": 0}", &cfg, errstr, sizeof errstr),
                     HF_OK);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    log_set_level(HF_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        T(test_a_burst_whose_waits_fall_back_under_target_is_never_shed),
        T(test_a_standing_queue_is_shed_once_its_least_wait_stays_over_target_for_an_interval),
        T(test_a_shed_partition_lets_some_reserves_through_and_stops_shedding_when_waits_recover),
        T(test_a_slow_counter_hop_is_shed_until_a_probe_comes_back_fast),
        T(test_the_hard_deadline_still_sheds),
        T(test_a_sold_out_sku_is_answered_rejected_insufficient_even_while_shedding),
        cmocka_unit_test(test_the_shedding_settings_have_defaults_and_are_checked),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    codec_shutdown();
    return failed;
}
