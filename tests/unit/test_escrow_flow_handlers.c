/* Escrow end to end over two fake stages (fake/fake_stage.h): the real gateway
 * handlers and the real counter handlers in one process, the commands topic
 * and the results topic played by two FIFO queues (each topic keeps its
 * order; the two are not ordered with each other), the routing view fed from
 * the counter's own numbers (sellable = free + escrow balance). Seeded random
 * runs of reserves, commits, releases, expiries, stock counts (shortfalls that
 * recall allotments) and ticks, with deliveries interleaved at random, must
 * leave the two sides agreeing: every unit the gateway says was sold was sold
 * once at the counter, nothing stays reserved or allotted once every
 * reservation has ended and the allotments went idle, and the handlers'
 * own assertions (counter_assert, the escrow checks) never fire. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "config.h"
#include "counter/counter.h"
#include "fake/fake_stage.h"
#include "gateway/gateway.h"
#include "hf_limits.h"
#include "log.h"
#include "stage.h"
#include "state.h"
#include "topics.h"

#define T0       1700000000000LL
#define TTL_MS   (60 * 1000LL)
#define IDLE_MS  5000
#define HOT      "HOT-1"
#define COLD     "COLD-1"
#define SKUS     2
#define RES_MAX  400
#define MSGS_MAX 20000

static const char *const skus[SKUS] = {HOT, COLD};

typedef struct {
    char key[HF_STATE_KEY_LEN_MAX];
    hf_record_t rec;
} msg_t;

typedef struct {
    msg_t *m;
    size_t head, tail;
} queue_t;

struct fake_stage_user {
    gateway_env_t env;
    gw_sweep_t sweep;
    hf_availability_t view[SKUS];
};

typedef struct {
    stage_ctx_t *gw, *ct;
    queue_t cmds, results;
    size_t gw_seen, ct_seen; /* emits already queued */
    char rids[RES_MAX][32];
    int rids_count;
    int ops;
    unsigned seed;
    int sales, recalls, escrow_held; /* what the run exercised */
} flow_t;

/* ---- the view: the gateway routes on what the counter says is sellable */

static void counter_state(stage_ctx_t *ct, const char *sku, hf_counter_state_t *c)
{
    char pk[COUNTER_KEY_MAX], key[COUNTER_KEY_MAX];
    pair_key(pk, "W1", sku);
    ct->partition = fake_stage_partition_of(pk);
    size_t len = counter_key(key, "W1", sku);
    hf_record_t rec;
    memset(c, 0, sizeof *c);
    int err = stage_get(ct, key, len, &rec);
    if (err == HF_ERR_NOTFOUND)
        return;
    assert_int_equal(err, HF_OK);
    *c = rec.u.counter_state;
}

static flow_t *flow_of(void *opaque);

static int fake_availability(void *opaque, const char *sku, hf_availability_t *out)
{
    flow_t *f = flow_of(opaque);
    for (int i = 0; i < SKUS; i++)
        if (strcmp(skus[i], sku) == 0) {
            hf_counter_state_t c;
            counter_state(f->ct, sku, &c);
            memset(out, 0, sizeof *out);
            snprintf(out->sku, sizeof out->sku, "%s", sku);
            out->warehouses_count = 1;
            snprintf(out->warehouses[0].warehouse_id, sizeof out->warehouses[0].warehouse_id, "W1");
            out->warehouses[0].available = counter_available_reported(&c) + c.escrow_balance;
            out->total = out->warehouses[0].available;
            out->in_stock = out->total > 0;
            return HF_OK;
        }
    return HF_ERR_NOTFOUND;
}

static int64_t fake_staleness(void *opaque)
{
    (void)opaque;
    return 0;
}

static flow_t *current_flow;
static flow_t *flow_of(void *opaque)
{
    (void)opaque;
    return current_flow;
}

/* ---- queues */

static void push(queue_t *q, const fake_stage_emit_t *e)
{
    assert_true(q->tail < MSGS_MAX);
    msg_t *m = &q->m[q->tail++];
    assert_true(e->key_len < sizeof m->key);
    memcpy(m->key, e->key, e->key_len);
    m->key[e->key_len] = '\0';
    m->rec = e->rec;
}

/* Moves what both stages emitted since last time onto the topics. */
static void collect(flow_t *f)
{
    for (; f->gw_seen < f->gw->emits_count; f->gw_seen++) {
        const fake_stage_emit_t *e = &f->gw->emits[f->gw_seen];
        if (e->topic_id == HF_T_COUNTER_COMMANDS)
            push(&f->cmds, e);
        f->sales += e->rec.type == HF_REC_ALLOTMENT_SALE;
    }
    for (; f->ct_seen < f->ct->emits_count; f->ct_seen++) {
        const fake_stage_emit_t *e = &f->ct->emits[f->ct_seen];
        if (e->topic_id == HF_T_COUNTER_RESULTS)
            push(&f->results, e);
        f->recalls +=
            e->rec.type == HF_REC_ALLOTMENT_GRANT && e->rec.u.allotment_grant.recall_qty > 0;
    }
}

static void gw_apply(flow_t *f, const char *key, const hf_record_t *rec)
{
    f->gw->now_ms = f->ct->now_ms;
    int err = fake_stage_apply(f->gw, gateway_stage(), key, rec);
    if (err != HF_OK)
        fail_msg("seed %u op %d: gateway rejected a %s: %s", f->seed, f->ops,
                 hf_rec_type_name(rec->type), f->gw->reject_reason);
    fake_stage_commit(f->gw);
    collect(f);
}

static void ct_apply(flow_t *f, const char *key, const hf_record_t *rec)
{
    int err = fake_stage_apply(f->ct, counter_stage(), key, rec);
    if (err != HF_OK)
        fail_msg("seed %u op %d: counter rejected a %s: %s", f->seed, f->ops,
                 hf_rec_type_name(rec->type), f->ct->reject_reason);
    assert_int_equal(counter_stage()->batch_end(f->ct), HF_OK);
    fake_stage_commit(f->ct);
    collect(f);
}

/* Delivers up to n messages, each from a topic picked at random. */
static void deliver(flow_t *f, int n)
{
    for (int i = 0; i < n; i++) {
        bool c = f->cmds.head < f->cmds.tail, r = f->results.head < f->results.tail;
        if (!c && !r)
            return;
        if (c && (!r || rand_r(&f->seed) % 2)) {
            msg_t m = f->cmds.m[f->cmds.head++];
            ct_apply(f, m.key, &m.rec);
        } else {
            msg_t m = f->results.m[f->results.head++];
            gw_apply(f, m.key, &m.rec);
        }
    }
}

static void drain(flow_t *f)
{
    for (int i = 0; i < 1000 && (f->cmds.head < f->cmds.tail || f->results.head < f->results.tail);
         i++)
        deliver(f, 1000);
    assert_true(f->cmds.head == f->cmds.tail && f->results.head == f->results.tail);
}

static void gw_tick(flow_t *f)
{
    f->gw->now_ms = f->ct->now_ms;
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        f->gw->partition = p;
        assert_int_equal(gateway_stage()->tick(f->gw), HF_OK);
    }
    fake_stage_commit(f->gw);
    collect(f);
}

/* ---- operations */

static void op_reserve(flow_t *f)
{
    if (f->rids_count == RES_MAX)
        return;
    char *rid = f->rids[f->rids_count++];
    snprintf(rid, 32, "flow-%d", f->rids_count);
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "ik-%s", rid);
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "%s", rand_r(&f->seed) % 5 ? HOT : COLD);
    q->lines[0].qty = 1 + rand_r(&f->seed) % 3;
    q->ship_to = (hf_geo_t){40.73, -73.99};
    q->ttl_ms = TTL_MS;
    q->sent_at_ms = f->ct->now_ms;
    gw_apply(f, rid, &r);
}

static hf_reservation_state_t load(flow_t *f, const char *rid)
{
    f->gw->partition = fake_stage_partition_of(rid);
    hf_reservation_state_t rs;
    int err = gw_load(f->gw, rid, &rs);
    if (err)
        fail_msg("reservation %s: %s", rid, hf_err_name(err));
    return rs;
}

/* A random reservation in status st, or NULL. */
static const char *pick(flow_t *f, hf_res_status_t st)
{
    if (f->rids_count == 0)
        return NULL;
    int start = (int)(rand_r(&f->seed) % (unsigned)f->rids_count);
    for (int i = 0; i < f->rids_count; i++) {
        const char *rid = f->rids[(start + i) % f->rids_count];
        if (load(f, rid).status == st)
            return rid;
    }
    return NULL;
}

static void op_end(flow_t *f, bool commit, const char *rid)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    char ikey[48];
    snprintf(ikey, sizeof ikey, "op%d-%s", f->ops, rid);
    if (commit) {
        r.type = HF_REC_COMMIT;
        snprintf(r.u.commit.reservation_id, sizeof r.u.commit.reservation_id, "%s", rid);
        snprintf(r.u.commit.idempotency_key, sizeof r.u.commit.idempotency_key, "%s", ikey);
        snprintf(r.u.commit.payment_id, sizeof r.u.commit.payment_id, "pay-%s", rid);
    } else {
        r.type = HF_REC_RELEASE;
        snprintf(r.u.release.reservation_id, sizeof r.u.release.reservation_id, "%s", rid);
        snprintf(r.u.release.idempotency_key, sizeof r.u.release.idempotency_key, "%s", ikey);
    }
    gw_apply(f, rid, &r);
}

static int64_t feed_seq[SKUS];

static void op_feed(flow_t *f, int sku, hf_feed_kind_t kind, int64_t qty)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_STOCK_FEED;
    snprintf(r.u.stock_feed.warehouse_id, sizeof r.u.stock_feed.warehouse_id, "W1");
    snprintf(r.u.stock_feed.sku, sizeof r.u.stock_feed.sku, "%s", skus[sku]);
    r.u.stock_feed.kind = kind;
    r.u.stock_feed.qty = qty;
    r.u.stock_feed.feed_seq = ++feed_seq[sku];
    char key[COUNTER_KEY_MAX];
    pair_key(key, "W1", skus[sku]);
    f->ct->now_ms++;
    ct_apply(f, key, &r);
}

/* Units of sku the gateway says it sold: its COMMITTED reservations' holds. */
static int64_t sold_per_gateway(flow_t *f, const char *sku)
{
    int64_t n = 0;
    for (int i = 0; i < f->rids_count; i++) {
        hf_reservation_state_t rs = load(f, f->rids[i]);
        if (rs.status != HF_RES_COMMITTED)
            continue;
        for (int32_t h = 0; h < rs.allocations_count; h++)
            if (rs.allocations[h].status == HF_HOLD_REF_HELD &&
                strcmp(rs.allocations[h].sku, sku) == 0)
                n += rs.allocations[h].qty;
    }
    return n;
}

static int64_t gateway_allotted(flow_t *f, int64_t *owed)
{
    int64_t n = 0;
    *owed = 0;
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        f->gw->partition = p;
        char key[GW_KEY_MAX];
        size_t len = gw_escrow_key(key, "W1", HOT);
        hf_record_t rec;
        if (stage_get(f->gw, key, len, &rec) != HF_OK)
            continue;
        n += rec.u.escrow_state.allotted;
        *owed += rec.u.escrow_state.owed_qty;
    }
    return n;
}

static void run(unsigned seed, int steps, bool shortfalls)
{
    flow_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    current_flow = f;
    f->seed = seed;
    f->cmds.m = calloc(MSGS_MAX, sizeof(msg_t));
    f->results.m = calloc(MSGS_MAX, sizeof(msg_t));
    assert_true(f->cmds.m && f->results.m);
    memset(feed_seq, 0, sizeof feed_seq);

    f->ct = fake_stage_new("flow_ct", T0);
    hf_config_t cfg;
    config_defaults(&cfg);
    char errstr[256];
    if (counter_stage()->init(&cfg, &f->ct->env, errstr, sizeof errstr) != HF_OK)
        fail_msg("counter init: %s", errstr);

    f->gw = fake_stage_new("flow_gw", T0);
    f->gw->user = calloc(1, sizeof *f->gw->user);
    assert_non_null(f->gw->user);
    gateway_env_t *e = &f->gw->user->env;
    fake_stage_routes(&e->routes);
    e->ttl_default_ms = TTL_MS;
    snprintf(e->reply_topic_prefix, sizeof e->reply_topic_prefix, "holdfast.replies.");
    e->hold_max_factor_pct = 200;
    e->idempotency_retention_ms = 24 * 3600 * 1000LL;
    e->reservation_retention_ms = 7 * 24 * 3600 * 1000LL;
    e->late_policy = GW_LATE_REFUND;
    e->result_timeout_ms = 5000;
    e->view_stale_max_ms = 10000;
    e->availability = fake_availability;
    e->staleness_ms = fake_staleness;
    e->opaque = f->gw;
    f->gw->user->sweep.run_id = 1;
    e->sweep = &f->gw->user->sweep;
    snprintf(e->escrow.skus[0], sizeof e->escrow.skus[0], "%s", HOT);
    e->escrow.skus_count = 1;
    e->escrow.refill_min_units = 10;
    e->escrow.refill_max_units = 200;
    e->escrow.refill_horizon_ms = 1000;
    e->escrow.idle_return_ms = IDLE_MS;
    e->escrow.scarce_units = 20;
    f->gw->env = e;

    op_feed(f, 0, HF_FEED_RECEIVE, 200);
    op_feed(f, 1, HF_FEED_RECEIVE, 50);
    for (f->ops = 0; f->ops < steps; f->ops++) {
        unsigned x = rand_r(&f->seed) % 100;
        const char *rid = NULL;
        if (x < 40) {
            op_reserve(f);
        } else if (x < 55) {
            if ((rid = pick(f, HF_RES_HELD)))
                op_end(f, true, rid);
        } else if (x < 65) {
            if ((rid = pick(f, HF_RES_HELD)))
                op_end(f, false, rid);
        } else if (x < 75) {
            f->ct->now_ms += 100 + rand_r(&f->seed) % 3000;
            gw_tick(f);
        } else if (x < 78 && shortfalls) {
            hf_counter_state_t c;
            counter_state(f->ct, HOT, &c);
            int64_t q = c.on_hand > 10 ? c.on_hand - 1 - rand_r(&f->seed) % 10 : c.on_hand;
            op_feed(f, 0, HF_FEED_COUNT, q);
        } else if (x < 80) {
            op_feed(f, rand_r(&f->seed) % 2, HF_FEED_RECEIVE, 10);
        } else {
            deliver(f, 1 + (int)(rand_r(&f->seed) % 8));
        }
    }
    /* Everything said; every reservation ends (released, or expired), then the
     * sale is over: the SKU is unpinned (a pinned SKU keeps its allotments warm)
     * and the allotments are returned. */
    drain(f);
    f->gw->user->env.escrow.skus_count = 0;
    for (int i = 0; i < f->rids_count; i++)
        if (load(f, f->rids[i]).status == HF_RES_HELD)
            op_end(f, false, f->rids[i]);
    drain(f);
    for (int round = 0; round < 6; round++) {
        f->ct->now_ms += TTL_MS;
        gw_tick(f);
        drain(f);
    }

    /* The run went through escrow: holds served from allotments, sales, and
     * with shortfalls, recalls. */
    for (int i = 0; i < f->rids_count; i++) {
        hf_reservation_state_t rs = load(f, f->rids[i]);
        for (int32_t h = 0; h < rs.allocations_count; h++)
            f->escrow_held += rs.allocations[h].escrow;
    }
    if (getenv("FLOW_STATS"))
        fprintf(stderr, "seed %u: %d reservations, %d escrow holds, %d sales, %d recalls\n", seed,
                f->rids_count, f->escrow_held, f->sales, f->recalls);
    assert_true(f->escrow_held > 0 && f->sales > 0);
    if (shortfalls)
        assert_true(f->recalls > 0);
    int unended = 0;
    for (int i = 0; i < f->rids_count; i++) {
        hf_res_status_t st = load(f, f->rids[i]).status;
        unended += st == HF_RES_PENDING || st == HF_RES_HELD;
    }
    assert_int_equal(unended, 0);
    for (int s = 0; s < SKUS; s++) {
        hf_counter_state_t c;
        counter_state(f->ct, skus[s], &c);
        counter_assert(&c);
        if (c.committed_total != sold_per_gateway(f, skus[s]))
            fail_msg("seed %u %s: the counter sold %lld, the gateway says %lld", seed, skus[s],
                     (long long)c.committed_total, (long long)sold_per_gateway(f, skus[s]));
        if (c.reserved != 0 || c.allotted != 0 || c.escrow_balance != 0)
            fail_msg("seed %u %s: left reserved %lld allotted %lld escrow_balance %lld", seed,
                     skus[s], (long long)c.reserved, (long long)c.allotted,
                     (long long)c.escrow_balance);
    }
    int64_t owed = 0;
    int64_t allotted = gateway_allotted(f, &owed);
    if (allotted != 0 || owed != 0)
        fail_msg("seed %u: gateway partitions left allotted %lld, owed %lld", seed,
                 (long long)allotted, (long long)owed);

    counter_stage()->destroy(f->ct->env);
    fake_stage_destroy(f->ct);
    free(f->gw->user);
    fake_stage_destroy(f->gw);
    free(f->cmds.m);
    free(f->results.m);
    free(f);
    current_flow = NULL;
}

static void test_flow_without_shortfalls(void **state)
{
    (void)state;
    for (unsigned seed = 1; seed <= 6; seed++)
        run(seed, 600, false);
}

static void test_flow_with_shortfalls(void **state)
{
    (void)state;
    for (unsigned seed = 101; seed <= 106; seed++)
        run(seed, 600, true);
}

int main(void)
{
    char errstr[256] = "";
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    log_set_level(HF_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_without_shortfalls),
        cmocka_unit_test(test_flow_with_shortfalls),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    codec_shutdown();
    return failed;
}
