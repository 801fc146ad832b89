/* Crash safety of the counter stage, proved by killing it: 100,000 mixed commands
 * stream in while `holdfast` is kill -9'd at random moments and restarted. In
 * the end the counters must equal a sequential model of the same commands, and a
 * read_committed reader must see every result exactly once with the outcome the
 * model predicts. HF_CRASH_COMMANDS scales the run (default 100000). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define PAIRS         16
#define WAREHOUSES    4
#define INITIAL_STOCK 300

typedef enum { C_HOLD, C_COMMIT, C_RELEASE, C_FEED } cmd_kind_t;

typedef struct {
    cmd_kind_t kind;
    int pair;
    int rid; /* hold index for hold/commit/release */
    int64_t qty;
    hf_feed_kind_t feed_kind;
    int64_t seq;
} cmd_t;

typedef struct {
    int pair;
    int64_t qty;
    hf_hold_status_t status;
    bool exists;
    long order;
    bool committed_sent, released_sent;
    /* expected outcomes; -1 = no such command */
    int hold_outcome, commit_outcome, release_outcome, shortfalls;
    /* seen in the results topic */
    int seen_hold, seen_commit, seen_release, seen_shortfall;
} hold_t;

typedef struct {
    int64_t on_hand, reserved, revoking, feed_seq;
} pair_t;

typedef struct {
    cmd_t *cmds;
    size_t cmds_count;
    hold_t *holds;
    int holds_count;
    pair_t pairs[PAIRS];
    long order_next;
    size_t results_expected;
} model_t;

static void pair_ids(int pair, char *wh, char *sku)
{
    snprintf(wh, 16, "W%d", pair % WAREHOUSES);
    snprintf(sku, 32, "SKU-%d", pair / WAREHOUSES);
}

/* ---- the sequential model: the rules of DESIGN.md, written a second time */

static void model_revoke(model_t *m, int pair)
{
    pair_t *p = &m->pairs[pair];
    while (p->reserved - p->revoking - p->on_hand > 0) {
        int newest = -1;
        for (int i = 0; i < m->holds_count; i++) {
            hold_t *h = &m->holds[i];
            if (h->exists && h->pair == pair && h->status == HF_HOLD_HELD &&
                (newest < 0 || h->order > m->holds[newest].order))
                newest = i;
        }
        assert_true(newest >= 0);
        m->holds[newest].status = HF_HOLD_REVOKING;
        m->holds[newest].shortfalls++;
        p->revoking += m->holds[newest].qty;
        m->results_expected++;
    }
}

static void model_apply(model_t *m, const cmd_t *c)
{
    pair_t *p = &m->pairs[c->pair];
    hold_t *h = c->kind == C_FEED ? NULL : &m->holds[c->rid];
    switch (c->kind) {
    case C_HOLD:
        h->exists = true;
        h->pair = c->pair;
        h->qty = c->qty;
        if (p->on_hand - p->reserved >= c->qty) {
            p->reserved += c->qty;
            h->status = HF_HOLD_HELD;
            h->order = m->order_next++;
            h->hold_outcome = HF_OUTCOME_OK;
        } else {
            h->status = HF_HOLD_REFUSED;
            h->hold_outcome = HF_OUTCOME_INSUFFICIENT;
        }
        m->results_expected++;
        return;
    case C_COMMIT:
        m->results_expected++;
        if (h->status == HF_HOLD_HELD) {
            p->reserved -= h->qty;
            p->on_hand -= h->qty;
            h->status = HF_HOLD_COMMITTED;
            h->commit_outcome = HF_OUTCOME_OK;
        } else {
            h->commit_outcome =
                h->status == HF_HOLD_REVOKING ? HF_OUTCOME_REVOKED : HF_OUTCOME_CONFLICT;
        }
        return;
    case C_RELEASE:
        m->results_expected++;
        if (h->status == HF_HOLD_HELD || h->status == HF_HOLD_REVOKING) {
            p->reserved -= h->qty;
            if (h->status == HF_HOLD_REVOKING)
                p->revoking -= h->qty;
            h->status = HF_HOLD_RELEASED;
        }
        h->release_outcome = h->status == HF_HOLD_COMMITTED ? HF_OUTCOME_CONFLICT : HF_OUTCOME_OK;
        return;
    case C_FEED:
        if (c->seq <= p->feed_seq)
            return;
        p->feed_seq = c->seq;
        p->on_hand = c->feed_kind == HF_FEED_COUNT ? c->qty : p->on_hand + c->qty;
        model_revoke(m, c->pair);
        return;
    }
}

/* ---- the workload */

static int pick_settle_target(model_t *m, unsigned *seed, bool commit)
{
    for (int tries = 0; tries < 8 && m->holds_count > 0; tries++) {
        int lo = m->holds_count > 2000 ? m->holds_count - 2000 : 0;
        int i = lo + (int)(rand_r(seed) % (unsigned)(m->holds_count - lo));
        hold_t *h = &m->holds[i];
        if (!h->committed_sent && !h->released_sent) {
            if (commit)
                h->committed_sent = true;
            else
                h->released_sent = true;
            return i;
        }
    }
    return -1;
}

static void build_workload(model_t *m, size_t count)
{
    unsigned seed = 20261130;
    m->cmds = calloc(count, sizeof *m->cmds);
    m->holds = calloc(count, sizeof *m->holds);
    int64_t seqs[PAIRS] = {0};
    for (int p = 0; p < PAIRS; p++)
        m->cmds[m->cmds_count++] = (cmd_t){C_FEED, p, 0, INITIAL_STOCK, HF_FEED_RECEIVE, ++seqs[p]};
    while (m->cmds_count < count) {
        unsigned r = rand_r(&seed) % 100;
        int pair = (int)(rand_r(&seed) % PAIRS);
        cmd_t c = {C_HOLD, pair, 0, 0, HF_FEED_RECEIVE, 0};
        if (r < 60) {
            c.rid = m->holds_count++;
            c.qty = 1 + rand_r(&seed) % 3;
        } else if (r < 90) {
            bool commit = r < 75;
            c.kind = commit ? C_COMMIT : C_RELEASE;
            c.rid = pick_settle_target(m, &seed, commit);
            if (c.rid < 0)
                continue;
            c.pair = m->holds[c.rid].pair;
        } else {
            c.kind = C_FEED;
            c.feed_kind = r < 98 ? HF_FEED_RECEIVE : HF_FEED_COUNT;
            c.qty = c.feed_kind == HF_FEED_RECEIVE ? 5 + rand_r(&seed) % 40 : rand_r(&seed) % 20;
            c.seq = ++seqs[pair];
            if (r == 99)
                c.seq = seqs[pair] - 1; /* a replayed feed: must be ignored */
        }
        if (c.kind == C_HOLD)
            m->holds[c.rid].pair = pair;
        m->cmds[m->cmds_count++] = c;
        if (c.kind == C_HOLD) {
            m->holds[c.rid].hold_outcome = m->holds[c.rid].commit_outcome = -1;
            m->holds[c.rid].release_outcome = -1;
        }
    }
    for (int i = 0; i < m->holds_count; i++)
        m->holds[i].exists = false;
    for (size_t i = 0; i < m->cmds_count; i++)
        model_apply(m, &m->cmds[i]);
}

static void send_cmd(harness_t *h, const cmd_t *c)
{
    char wh[16], sku[32], key[128], rid[32];
    pair_ids(c->pair, wh, sku);
    harness_pair(key, wh, sku);
    snprintf(rid, sizeof rid, "r%07d", c->rid);
    hf_record_t rec;
    switch (c->kind) {
    case C_HOLD:
        rec = harness_hold(rid, 0, wh, sku, c->qty);
        break;
    case C_COMMIT:
        rec = harness_commit_hold(rid, 0, wh, sku);
        break;
    case C_RELEASE:
        rec = harness_release_hold(rid, 0, wh, sku);
        break;
    case C_FEED:
        /* On the commands topic, not holdfast.stock-feed: Kafka orders records
         * within one partition only, and a model needs one total order per pair.
         * The counter handles a record by its type, whichever input it came on. */
        rec = harness_feed(wh, sku, c->feed_kind, c->qty, c->seq);
        break;
    }
    harness_send(h, HF_T_COUNTER_COMMANDS, key, &rec);
}

/* ---- checking */

typedef struct {
    model_t *m;
    size_t dupes, unexpected;
    int64_t negative_levels;
} check_t;

static void check_result(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    check_t *c = opaque;
    assert_int_equal(rec->type, HF_REC_COUNTER_RESULT);
    const hf_counter_result_t *r = &rec->u.counter_result;
    int rid = atoi(r->reservation_id + 1);
    assert_true(rid >= 0 && rid < c->m->holds_count);
    hold_t *h = &c->m->holds[rid];
    int *seen = r->command == HF_CMD_HOLD      ? &h->seen_hold
                : r->command == HF_CMD_COMMIT  ? &h->seen_commit
                : r->command == HF_CMD_RELEASE ? &h->seen_release
                                               : &h->seen_shortfall;
    int want = r->command == HF_CMD_HOLD      ? h->hold_outcome
               : r->command == HF_CMD_COMMIT  ? h->commit_outcome
               : r->command == HF_CMD_RELEASE ? h->release_outcome
                                              : HF_OUTCOME_REVOKED;
    if (++*seen > (r->command == HF_CMD_SHORTFALL ? h->shortfalls : 1))
        c->dupes++;
    if ((int)r->outcome != want) {
        if (c->unexpected++ < 5)
            print_message("result %s %s: outcome %s, model says %d\n", r->reservation_id,
                          hf_cmd_name(r->command), hf_outcome_name(r->outcome), want);
    }
}

static void check_level(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    check_t *c = opaque;
    const hf_stock_level_t *s = &rec->u.stock_level;
    if (s->available < 0 || s->reserved < 0 || s->on_hand < 0)
        c->negative_levels++;
}

static void test_kill9_under_load_matches_sequential_model(void **state)
{
    const char *env = getenv("HF_CRASH_COMMANDS");
    size_t count = env ? (size_t)atol(env) : 100000;
    static model_t m;
    build_workload(&m, count);
    print_message("workload: %zu commands, %d holds, %zu results expected\n", m.cmds_count,
                  m.holds_count, m.results_expected);

    harness_t h;
    harness_init(&h, "crash");
    pid_t pid = harness_start(&h, "a", "counter");
    unsigned seed = 7;
    int kills = 0;
    int64_t next_kill = harness_now_ms() + 1500 + rand_r(&seed) % 2500;
    const size_t chunk = 2000;
    for (size_t i = 0; i < m.cmds_count; i++) {
        send_cmd(&h, &m.cmds[i]);
        if (i % chunk != chunk - 1)
            continue;
        harness_flush(&h);
        harness_sleep_ms(40); /* stream in over time rather than all at once */
        if (harness_now_ms() >= next_kill) {
            harness_kill9(pid);
            kills++;
            pid = harness_start(&h, "a", "counter");
            next_kill = harness_now_ms() + 1500 + rand_r(&seed) % 2500;
        }
    }
    harness_flush(&h);
    /* Two more kills while it catches up on the backlog. */
    for (int k = 0; k < 2; k++) {
        harness_sleep_ms(1500 + (int)(rand_r(&seed) % 1500));
        harness_kill9(pid);
        kills++;
        pid = harness_start(&h, "a", "counter");
    }
    size_t n = harness_wait_count(&h, HF_T_COUNTER_RESULTS, m.results_expected, 300000);
    print_message("killed %d times; %zu results\n", kills, n);
    harness_sleep_ms(1000);
    assert_int_equal(harness_stop(pid), 0);

    check_t c = {&m, 0, 0, 0};
    assert_int_equal(harness_read(&h, HF_T_COUNTER_RESULTS, check_result, &c), m.results_expected);
    assert_int_equal(c.dupes, 0);
    assert_int_equal(c.unexpected, 0);
    harness_read(&h, HF_T_STOCK_LEVELS, check_level, &c);
    assert_int_equal(c.negative_levels, 0);
    for (int p = 0; p < PAIRS; p++) {
        char wh[16], sku[32];
        pair_ids(p, wh, sku);
        hf_counter_state_t s;
        assert_true(harness_counter(&h, wh, sku, &s));
        if (s.on_hand != m.pairs[p].on_hand || s.reserved != m.pairs[p].reserved ||
            s.revoking != m.pairs[p].revoking)
            fail_msg("%s|%s: on_hand %lld reserved %lld revoking %lld; model %lld %lld %lld", wh,
                     sku, (long long)s.on_hand, (long long)s.reserved, (long long)s.revoking,
                     (long long)m.pairs[p].on_hand, (long long)m.pairs[p].reserved,
                     (long long)m.pairs[p].revoking);
    }
    harness_cleanup(&h);
    free(m.cmds);
    free(m.holds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill9_under_load_matches_sequential_model),
    };
    return cmocka_run_group_tests_name("counter crash safety (kill -9)", tests, NULL, NULL);
}
