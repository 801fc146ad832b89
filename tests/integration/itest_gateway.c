/* Gateway stage end to end against the real broker through the real `holdfast`
 * binary running counter and gateway: reserve -> commit / release / expiry with
 * idempotency and the ledger, splits with re-route and rollback, a contended
 * last-units burst, invalid requests, and a kill -9 in the middle of 5,000
 * reservations. Requests go through the client library (tools/lib/client.h);
 * availability is produced straight to the availability topic, as the
 * aggregator would. Every wait polls for a condition with a generous bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/client.h"
#include "codec.h"
#include "harness.h"

#define WAIT_MS 60000
#define CALL_MS 15000

typedef struct {
    harness_t h;
    hf_client_t *c;
    pid_t pid;
    int64_t feed_seq;
    char cfg[1024];
} gw_t;

static const char *const whs[] = {"W1", "W2", "W3"};

static void start(gw_t *g, const char *name, const char *extra_config)
{
    memset(g, 0, sizeof *g);
    harness_init(&g->h, name);
    char wpath[512], cwd[256];
    snprintf(wpath, sizeof wpath, "%s/warehouses.json", g->h.workdir);
    FILE *f = fopen(wpath, "w");
    assert_non_null(f);
    /* W1 New York, W2 Chicago, W3 Los Angeles; S1 a store in Manhattan. */
    fputs("{\"warehouses\": [{\"id\":\"W1\",\"lat\":40.71,\"lon\":-74.01,\"cost_per_unit\":1.0},"
          "{\"id\":\"W2\",\"lat\":41.88,\"lon\":-87.63,\"cost_per_unit\":1.0},"
          "{\"id\":\"W3\",\"lat\":34.05,\"lon\":-118.24,\"cost_per_unit\":1.0},"
          "{\"id\":\"S1\",\"lat\":40.75,\"lon\":-73.99,\"cost_per_unit\":0.5,"
          "\"kind\":\"store\"}]}",
          f);
    fclose(f);
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(g->cfg, sizeof g->cfg,
             "{\"warehouses_file\": \"%s/%s\", \"result_timeout_ms\": 5000%s%s}", cwd, wpath,
             extra_config ? ", " : "", extra_config ? extra_config : "");
    g->pid = harness_start_with(&g->h, "g1", "counter,gateway", g->cfg);
    char errstr[256];
    assert_int_equal(client_new(g->h.bootstrap, NULL, &g->c, errstr, sizeof errstr), HF_OK);
}

static void stop(gw_t *g)
{
    client_destroy(g->c);
    assert_int_equal(harness_stop(g->pid), 0);
    harness_cleanup(&g->h);
}

/* Stock at the counters (waited for) and the matching availability record. */
static void stock(gw_t *g, const char *sku, const int64_t qty[3], const int64_t view_qty[3])
{
    char key[128];
    hf_record_t av = {.type = HF_REC_AVAILABILITY};
    snprintf(av.u.availability.sku, sizeof av.u.availability.sku, "%s", sku);
    for (int i = 0; i < 3; i++) {
        if (qty[i] > 0) {
            hf_record_t f = harness_feed(whs[i], sku, HF_FEED_RECEIVE, qty[i], ++g->feed_seq);
            harness_send(&g->h, HF_T_STOCK_FEED, harness_pair(key, whs[i], sku), &f);
        }
        hf_wh_available_t *w = &av.u.availability.warehouses[av.u.availability.warehouses_count++];
        snprintf(w->warehouse_id, sizeof w->warehouse_id, "%s", whs[i]);
        w->available = view_qty[i];
        av.u.availability.total += view_qty[i];
    }
    av.u.availability.in_stock = av.u.availability.total > 0;
    av.u.availability.updated_at_ms = harness_now_ms();
    harness_send(&g->h, HF_T_AVAILABILITY, sku, &av);
    harness_flush(&g->h);
    for (int i = 0; i < 3; i++) {
        hf_counter_state_t c = {0};
        int64_t deadline = harness_now_ms() + WAIT_MS;
        while (qty[i] > 0 && !(harness_counter(&g->h, whs[i], sku, &c) && c.on_hand == qty[i]) &&
               harness_now_ms() < deadline)
            harness_sleep_ms(200);
        if (qty[i] > 0)
            assert_int_equal(c.on_hand, qty[i]);
    }
}

static hf_record_t reserve(const char *rid, const char *ikey, const char *sku, int64_t qty,
                           int64_t ttl_ms)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "%s", rid);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "%s", ikey);
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "%s", sku);
    q->lines[0].qty = qty;
    q->ship_to = (hf_geo_t){40.73, -73.99}; /* Manhattan: W1 is nearest */
    q->ttl_ms = ttl_ms;
    q->sent_at_ms = harness_now_ms();
    return r;
}

static hf_reply_t call(gw_t *g, const hf_record_t *req)
{
    hf_reply_t rep;
    char errstr[256] = "";
    int err = client_call(g->c, req, CALL_MS, 3, &rep, errstr, sizeof errstr);
    if (err)
        fail_msg("client_call: %s", errstr);
    return rep;
}

/* ---- ledger and counters */

typedef struct {
    const char *rid; /* NULL = all */
    size_t by_kind[HF_LEDGER__COUNT];
    hf_ledger_event_t last;
} ledger_t;

static void ledger_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    ledger_t *l = opaque;
    const hf_ledger_event_t *e = &rec->u.ledger_event;
    if (l->rid && strcmp(e->reservation_id, l->rid) != 0)
        return;
    l->by_kind[e->kind]++;
    l->last = *e;
}

static ledger_t ledger_of(gw_t *g, const char *rid)
{
    ledger_t l = {.rid = rid};
    harness_read(&g->h, HF_T_LEDGER, ledger_fn, &l);
    return l;
}

static void wait_ledger(gw_t *g, const char *rid, hf_ledger_kind_t kind)
{
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (ledger_of(g, rid).by_kind[kind] == 0 && harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_true(ledger_of(g, rid).by_kind[kind] >= 1);
}

static int64_t reserved_of(gw_t *g, const char *wh, const char *sku)
{
    hf_counter_state_t c = {0};
    harness_counter(&g->h, wh, sku, &c);
    assert_true(c.on_hand - c.reserved - c.safety_stock >= 0 || c.revoking > 0);
    return c.reserved;
}

/* Waits until the summed reserved of sku over W1..W3 equals want. */
static void wait_reserved(gw_t *g, const char *sku, int64_t want)
{
    int64_t deadline = harness_now_ms() + WAIT_MS, sum = -1;
    while (harness_now_ms() < deadline) {
        sum = 0;
        for (int i = 0; i < 3; i++)
            sum += reserved_of(g, whs[i], sku);
        if (sum == want)
            return;
        harness_sleep_ms(200);
    }
    fail_msg("%s: reserved %lld, want %lld", sku, (long long)sum, (long long)want);
}

typedef struct {
    const char *rid;
    size_t holds;
} holds_t;

static void count_holds(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    holds_t *h = opaque;
    if (rec->type == HF_REC_HOLD && strcmp(rec->u.hold.reservation_id, h->rid) == 0)
        h->holds++;
}

/* ---- tests */

static void test_reserve_commit_release_and_idempotency(void **state)
{
    gw_t g;
    start(&g, "gw-basic", NULL);
    stock(&g, "SKU-A", (int64_t[]){100, 0, 0}, (int64_t[]){100, 0, 0});

    hf_record_t r1 = reserve("r1", "k1", "SKU-A", 2, 0);
    hf_reply_t a = call(&g, &r1);
    assert_int_equal(a.outcome, HF_REPLY_HELD);
    assert_int_equal(a.allocations_count, 1);
    assert_string_equal(a.allocations[0].warehouse_id, "W1");
    assert_int_equal(a.allocations[0].qty, 2);
    assert_true(a.expires_at_ms > harness_now_ms() + 14 * 60 * 1000); /* default 15 min */

    /* Retried: the identical reply, no second hold. */
    r1.u.reserve.sent_at_ms += 5;
    hf_reply_t b = call(&g, &r1);
    assert_int_equal(b.outcome, HF_REPLY_HELD);
    assert_int_equal(b.expires_at_ms, a.expires_at_ms);
    assert_int_equal(b.replied_at_ms, a.replied_at_ms);
    assert_memory_equal(&a.allocations[0], &b.allocations[0], sizeof a.allocations[0]);
    holds_t hc = {"r1", 0};
    harness_read(&g.h, HF_T_COUNTER_COMMANDS, count_holds, &hc);
    assert_int_equal(hc.holds, 1);
    wait_reserved(&g, "SKU-A", 2);

    /* Same key, another body. */
    hf_record_t r1x = reserve("r1", "k1", "SKU-A", 3, 0);
    assert_int_equal(call(&g, &r1x).outcome, HF_REPLY_CONFLICT);

    /* Commit, its duplicated webhook, and the same payment under another key. */
    hf_record_t c1 = harness_commit_req("r1", "c1", "pay-1");
    assert_int_equal(call(&g, &c1).outcome, HF_REPLY_COMMITTED);
    assert_int_equal(call(&g, &c1).outcome, HF_REPLY_COMMITTED);
    hf_record_t c1b = harness_commit_req("r1", "c1b", "pay-1");
    assert_int_equal(call(&g, &c1b).outcome, HF_REPLY_COMMITTED);
    hf_record_t c1c = harness_commit_req("r1", "c1c", "pay-2");
    assert_int_equal(call(&g, &c1c).outcome, HF_REPLY_CONFLICT);
    wait_reserved(&g, "SKU-A", 0);
    hf_counter_state_t cs;
    assert_true(harness_counter(&g.h, "W1", "SKU-A", &cs));
    assert_int_equal(cs.on_hand, 98);
    ledger_t l1 = ledger_of(&g, "r1");
    assert_int_equal(l1.by_kind[HF_LEDGER_HELD], 1);
    assert_int_equal(l1.by_kind[HF_LEDGER_COMMITTED], 1);
    assert_string_equal(l1.last.payment_id, "pay-1");

    /* Reserve then release. */
    hf_record_t r2 = reserve("r2", "k2", "SKU-A", 3, 0);
    assert_int_equal(call(&g, &r2).outcome, HF_REPLY_HELD);
    wait_reserved(&g, "SKU-A", 3);
    hf_record_t x2 = harness_release_req("r2", "x2");
    assert_int_equal(call(&g, &x2).outcome, HF_REPLY_RELEASED);
    assert_int_equal(call(&g, &x2).outcome, HF_REPLY_RELEASED);
    hf_record_t c2 = harness_commit_req("r2", "c2", "pay-3");
    assert_int_equal(call(&g, &c2).outcome, HF_REPLY_CONFLICT); /* terminal states never move */
    wait_reserved(&g, "SKU-A", 0);
    ledger_t l2 = ledger_of(&g, "r2");
    assert_int_equal(l2.by_kind[HF_LEDGER_RELEASED], 1);
    assert_int_equal(l2.by_kind[HF_LEDGER_COMMITTED], 0);

    /* Unknown reservation. */
    hf_record_t c9 = harness_commit_req("r-none", "c9", "pay-9");
    assert_int_equal(call(&g, &c9).outcome, HF_REPLY_NOT_FOUND);
    stop(&g);
}

static void test_ttl_expiry_restores_counters_and_late_payment(void **state)
{
    gw_t g;
    start(&g, "gw-ttl", NULL);
    stock(&g, "SKU-T", (int64_t[]){50, 0, 0}, (int64_t[]){50, 0, 0});
    hf_record_t r = reserve("t1", "k1", "SKU-T", 4, 2000);
    hf_reply_t a = call(&g, &r);
    assert_int_equal(a.outcome, HF_REPLY_HELD);
    /* Not waiting for reserved == 4 here: with a 2 s TTL the hold may already be
     * gone by the time the changelog is read. The HELD reply proves it was held. */
    /* No client action: the sweeper releases within 5 s of expires_at. */
    int64_t deadline = a.expires_at_ms + 15000, restored_at = 0;
    while (harness_now_ms() < deadline) {
        if (reserved_of(&g, "W1", "SKU-T") == 0) {
            restored_at = harness_now_ms();
            break;
        }
        harness_sleep_ms(100);
    }
    assert_true(restored_at > 0);
    print_message("expiry: counters restored %lld ms after expires_at (upper bound, polled)\n",
                  (long long)(restored_at - a.expires_at_ms));
    assert_true(restored_at - a.expires_at_ms <= 5000);
    wait_ledger(&g, "t1", HF_LEDGER_EXPIRED);

    /* The payment arrives late: EXPIRED and a late_payment ledger event. */
    hf_record_t c = harness_commit_req("t1", "c1", "pay-late");
    assert_int_equal(call(&g, &c).outcome, HF_REPLY_EXPIRED);
    wait_ledger(&g, "t1", HF_LEDGER_LATE_PAYMENT);
    ledger_t l = ledger_of(&g, "t1");
    assert_int_equal(l.by_kind[HF_LEDGER_COMMITTED], 0);
    assert_int_equal(l.by_kind[HF_LEDGER_EXPIRED], 1);

    /* Extension is capped by the max hold time (2 x TTL). */
    hf_record_t r2 = reserve("t2", "k2", "SKU-T", 1, 2000);
    hf_reply_t h2 = call(&g, &r2);
    assert_int_equal(h2.outcome, HF_REPLY_HELD);
    hf_record_t x = {.type = HF_REC_EXTEND};
    snprintf(x.u.extend.reservation_id, sizeof x.u.extend.reservation_id, "t2");
    snprintf(x.u.extend.idempotency_key, sizeof x.u.extend.idempotency_key, "e1");
    x.u.extend.extend_by_ms = 60000;
    hf_reply_t e = call(&g, &x);
    assert_int_equal(e.outcome, HF_REPLY_HELD);
    assert_int_equal(e.expires_at_ms, h2.expires_at_ms + 2000);

    /* Commit racing expiry: exactly one of COMMITTED / EXPIRED wins. */
    hf_record_t r3 = reserve("t3", "k3", "SKU-T", 1, 1000);
    hf_reply_t h3 = call(&g, &r3);
    assert_int_equal(h3.outcome, HF_REPLY_HELD);
    while (harness_now_ms() < h3.expires_at_ms)
        harness_sleep_ms(1);
    hf_record_t c3 = harness_commit_req("t3", "c3", "pay-race");
    hf_reply_t o3 = call(&g, &c3);
    assert_true(o3.outcome == HF_REPLY_COMMITTED || o3.outcome == HF_REPLY_EXPIRED);
    wait_ledger(&g, "t3",
                o3.outcome == HF_REPLY_COMMITTED ? HF_LEDGER_COMMITTED : HF_LEDGER_EXPIRED);
    harness_sleep_ms(1500); /* give a wrong second winner the time to show up */
    ledger_t l3 = ledger_of(&g, "t3");
    assert_int_equal(l3.by_kind[HF_LEDGER_COMMITTED] + l3.by_kind[HF_LEDGER_EXPIRED], 1);
    print_message("commit at expires_at: %s\n", hf_reply_outcome_name(o3.outcome));
    stop(&g);
}

static hf_record_t payment(const char *rid, const char *event_id, hf_payment_event_kind_t kind,
                           const char *reason)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_PAYMENT_EVENT;
    hf_payment_event_t *p = &r.u.payment_event;
    snprintf(p->reservation_id, sizeof p->reservation_id, "%s", rid);
    snprintf(p->idempotency_key, sizeof p->idempotency_key, "%s", event_id);
    p->event = kind;
    snprintf(p->payment_id, sizeof p->payment_id, "pay-%s", rid);
    snprintf(p->reason, sizeof p->reason, "%s", reason);
    p->sent_at_ms = harness_now_ms();
    return r;
}

/* Payment events drive the hold (payment_event.c), with a pending extension of
 * 4 s capped 6 s after creation and failed=release: a pending payment keeps a
 * 2 s hold past its TTL and its Extend deadline and stops at the cap (then
 * the sweeper expires it); a failed one gives the units back at once, the
 * reason in the ledger; a failure after the sale undoes nothing. */
static void test_payment_events_drive_the_hold(void **state)
{
    gw_t g;
    start(&g, "gw-pay",
          "\"payment_policy\": \"failed=release\", \"payment_pending_extend_ms\": 4000, "
          "\"payment_pending_max_ms\": 6000");
    stock(&g, "SKU-P", (int64_t[]){20, 0, 0}, (int64_t[]){20, 0, 0});

    hf_record_t r1 = reserve("p1", "k1", "SKU-P", 2, 2000);
    hf_reply_t h1 = call(&g, &r1);
    assert_int_equal(h1.outcome, HF_REPLY_HELD);
    int64_t created = h1.expires_at_ms - 2000, cap = created + 6000;
    hf_record_t e1 = payment("p1", "evt-1", HF_PAY_PROCESSING, "");
    hf_reply_t a = call(&g, &e1);
    assert_int_equal(a.outcome, HF_REPLY_HELD);
    assert_true(a.expires_at_ms > created + 4000); /* past the Extend deadline (2 x TTL) */
    while (harness_now_ms() < created + 2500)
        harness_sleep_ms(50);
    hf_record_t e2 = payment("p1", "evt-2", HF_PAY_REQUIRES_ACTION, "");
    hf_reply_t b = call(&g, &e2);
    assert_int_equal(b.outcome, HF_REPLY_HELD);
    assert_int_equal(b.expires_at_ms, cap);
    /* Still held after the TTL and the Extend deadline... */
    while (harness_now_ms() < created + 4500)
        harness_sleep_ms(50);
    assert_int_equal(ledger_of(&g, "p1").by_kind[HF_LEDGER_EXPIRED], 0);
    wait_reserved(&g, "SKU-P", 2);
    /* ... and expired at the cap: the units back within the sweeper's 5 s. */
    wait_ledger(&g, "p1", HF_LEDGER_EXPIRED);
    int64_t seen_at = harness_now_ms();
    wait_reserved(&g, "SKU-P", 0);
    assert_true(seen_at >= cap);
    print_message("pending payment: held to the cap, EXPIRED seen %lld ms after it\n",
                  (long long)(seen_at - cap));

    hf_record_t r2 = reserve("p2", "k2", "SKU-P", 3, 0);
    assert_int_equal(call(&g, &r2).outcome, HF_REPLY_HELD);
    wait_reserved(&g, "SKU-P", 3);
    hf_record_t f2 = payment("p2", "evt-1", HF_PAY_FAILED, "card_declined");
    assert_int_equal(call(&g, &f2).outcome, HF_REPLY_RELEASED);
    wait_reserved(&g, "SKU-P", 0);
    ledger_t l2 = ledger_of(&g, "p2");
    assert_int_equal(l2.by_kind[HF_LEDGER_RELEASED], 1);
    assert_string_equal(l2.last.reason, "payment_failed: card_declined");

    hf_record_t r3 = reserve("p3", "k3", "SKU-P", 1, 0);
    assert_int_equal(call(&g, &r3).outcome, HF_REPLY_HELD);
    hf_record_t s3 = payment("p3", "evt-1", HF_PAY_SUCCEEDED, "");
    assert_int_equal(call(&g, &s3).outcome, HF_REPLY_COMMITTED);
    hf_record_t f3 = payment("p3", "evt-2", HF_PAY_FAILED, "");
    assert_int_equal(call(&g, &f3).outcome, HF_REPLY_COMMITTED);
    wait_reserved(&g, "SKU-P", 0);
    hf_counter_state_t cs;
    assert_true(harness_counter(&g.h, "W1", "SKU-P", &cs));
    assert_int_equal(cs.on_hand, 19);
    ledger_t l3 = ledger_of(&g, "p3");
    assert_int_equal(l3.by_kind[HF_LEDGER_COMMITTED], 1);
    assert_int_equal(l3.by_kind[HF_LEDGER_RELEASED], 0);
    stop(&g);
}

/* Pick-up at a store (only_warehouses, a location of kind store): held there
 * alone; when the store runs out the shopper is refused though W1 next door has
 * plenty, and no other shopper is ever served from the store's shelf. */
static void test_a_pick_up_holds_at_its_store_alone(void **state)
{
    gw_t g;
    start(&g, "gw-pickup", NULL);
    stock(&g, "SKU-S", (int64_t[]){100, 0, 0}, (int64_t[]){100, 0, 0});
    char key[128];
    hf_record_t f = harness_feed("S1", "SKU-S", HF_FEED_RECEIVE, 3, ++g.feed_seq);
    harness_send(&g.h, HF_T_STOCK_FEED, harness_pair(key, "S1", "SKU-S"), &f);
    hf_record_t av = {.type = HF_REC_AVAILABILITY};
    hf_availability_t *a = &av.u.availability;
    snprintf(a->sku, sizeof a->sku, "SKU-S");
    a->warehouses_count = 2;
    snprintf(a->warehouses[0].warehouse_id, sizeof a->warehouses[0].warehouse_id, "W1");
    a->warehouses[0].available = 100;
    snprintf(a->warehouses[1].warehouse_id, sizeof a->warehouses[1].warehouse_id, "S1");
    a->warehouses[1].available = 3;
    a->total = 103, a->in_stock = true, a->updated_at_ms = harness_now_ms();
    harness_send(&g.h, HF_T_AVAILABILITY, "SKU-S", &av);
    harness_flush(&g.h);
    hf_counter_state_t c = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&g.h, "S1", "SKU-S", &c) && c.on_hand == 3) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(c.on_hand, 3);

    hf_record_t walk_in = reserve("u1", "k", "SKU-S", 1, 0); /* ships from W1, not S1 */
    hf_reply_t w = call(&g, &walk_in);
    assert_int_equal(w.outcome, HF_REPLY_HELD);
    assert_string_equal(w.allocations[0].warehouse_id, "W1");
    hf_record_t p1 = reserve("u2", "k", "SKU-S", 2, 0);
    p1.u.reserve.only_warehouses_count = 1;
    snprintf(p1.u.reserve.only_warehouses[0].warehouse_id,
             sizeof p1.u.reserve.only_warehouses[0].warehouse_id, "S1");
    hf_reply_t h = call(&g, &p1);
    assert_int_equal(h.outcome, HF_REPLY_HELD);
    assert_int_equal(h.allocations_count, 1);
    assert_string_equal(h.allocations[0].warehouse_id, "S1");
    hf_record_t p2 = p1;
    snprintf(p2.u.reserve.reservation_id, sizeof p2.u.reserve.reservation_id, "u3");
    hf_reply_t r = call(&g, &p2); /* 2 more: the store has 1 left */
    assert_int_equal(r.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_true(harness_counter(&g.h, "S1", "SKU-S", &c));
    assert_int_equal(c.reserved, 2);
    wait_reserved(&g, "SKU-S", 1); /* W1..W3: the walk-in's one unit only */
    stop(&g);
}

/* A partial reserve on a real broker: 5 asked, 3 in the network (2 at W1, 1 at
 * W2): HELD with 3, and the reply, the ledger's HELD event and the counters
 * agree on them; its commit sells 3. */
static void test_a_partial_reserve_holds_what_there_is(void **state)
{
    gw_t g;
    start(&g, "gw-partial", NULL);
    stock(&g, "SKU-Q", (int64_t[]){2, 1, 0}, (int64_t[]){2, 1, 0});
    hf_record_t r = reserve("q1", "k", "SKU-Q", 5, 0);
    r.u.reserve.allow_partial = true;
    hf_reply_t h = call(&g, &r);
    assert_int_equal(h.outcome, HF_REPLY_HELD);
    int64_t held = 0;
    for (int32_t i = 0; i < h.allocations_count; i++)
        held += h.allocations[i].qty;
    assert_int_equal(held, 3);
    assert_non_null(strstr(h.message, "partially held: SKU-Q 3 of 5;"));
    wait_reserved(&g, "SKU-Q", 3);
    wait_ledger(&g, "q1", HF_LEDGER_HELD);
    ledger_t l = ledger_of(&g, "q1");
    assert_int_equal(l.last.lines_count, 1);
    assert_int_equal(l.last.lines[0].qty, 3);
    assert_string_equal(l.last.reason, h.message);
    hf_record_t c = harness_commit_req("q1", "c", "pay-q1");
    assert_int_equal(call(&g, &c).outcome, HF_REPLY_COMMITTED);
    wait_reserved(&g, "SKU-Q", 0);
    hf_counter_state_t cs;
    assert_true(harness_counter(&g.h, "W1", "SKU-Q", &cs));
    assert_int_equal(cs.on_hand, 0);
    assert_true(harness_counter(&g.h, "W2", "SKU-Q", &cs));
    assert_int_equal(cs.on_hand, 0);
    hf_record_t none = reserve("q2", "k", "SKU-Q", 1, 0);
    none.u.reserve.allow_partial = true;
    assert_int_equal(call(&g, &none).outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    stop(&g);
}

/* late_payment_policy rereserve: a payment after expiry buys the lines after
 * all when stock allows (COMMITTED, the units sold at the counter), and is
 * flagged for refund when it does not. */
static void test_late_payment_rereserves_or_refunds(void **state)
{
    gw_t g;
    start(&g, "gw-late", "\"late_payment_policy\": \"rereserve\"");
    stock(&g, "SKU-L", (int64_t[]){5, 0, 0}, (int64_t[]){5, 0, 0});

    hf_record_t r1 = reserve("l1", "k1", "SKU-L", 3, 1000);
    assert_int_equal(call(&g, &r1).outcome, HF_REPLY_HELD);
    wait_ledger(&g, "l1", HF_LEDGER_EXPIRED);
    wait_reserved(&g, "SKU-L", 0);
    hf_record_t c1 = harness_commit_req("l1", "c1", "pay-1");
    hf_reply_t sold = call(&g, &c1);
    assert_int_equal(sold.outcome, HF_REPLY_COMMITTED);
    assert_int_equal(sold.allocations_count, 1);
    assert_string_equal(sold.allocations[0].warehouse_id, "W1");
    assert_int_equal(sold.allocations[0].qty, 3);
    print_message("late payment: %s (%s)\n", hf_reply_outcome_name(sold.outcome), sold.message);
    wait_ledger(&g, "l1", HF_LEDGER_LATE_PAYMENT);
    ledger_t l = ledger_of(&g, "l1");
    assert_string_equal(l.last.reason, "rereserved");
    assert_string_equal(l.last.payment_id, "pay-1");
    assert_int_equal(l.by_kind[HF_LEDGER_EXPIRED], 1);
    assert_int_equal(l.by_kind[HF_LEDGER_COMMITTED], 0);
    hf_counter_state_t cs = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&g.h, "W1", "SKU-L", &cs) && cs.on_hand == 2) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(cs.on_hand, 2); /* sold */
    assert_int_equal(cs.reserved, 0);
    hf_record_t c1b = harness_commit_req("l1", "c1-retry", "pay-1"); /* webhook retried */
    assert_int_equal(call(&g, &c1b).outcome, HF_REPLY_COMMITTED);

    /* l2 expires; meanwhile l3 takes the last 2 units: l2's payment is refunded. */
    hf_record_t r2 = reserve("l2", "k2", "SKU-L", 2, 1000);
    assert_int_equal(call(&g, &r2).outcome, HF_REPLY_HELD);
    wait_ledger(&g, "l2", HF_LEDGER_EXPIRED);
    hf_record_t r3 = reserve("l3", "k3", "SKU-L", 2, 0);
    assert_int_equal(call(&g, &r3).outcome, HF_REPLY_HELD);
    hf_record_t c2 = harness_commit_req("l2", "c2", "pay-2");
    hf_reply_t refused = call(&g, &c2);
    assert_int_equal(refused.outcome, HF_REPLY_EXPIRED);
    assert_non_null(strstr(refused.message, "refund"));
    wait_ledger(&g, "l2", HF_LEDGER_LATE_PAYMENT);
    assert_string_equal(ledger_of(&g, "l2").last.reason, "refund");
    wait_reserved(&g, "SKU-L", 2); /* l3's only */
    assert_true(harness_counter(&g.h, "W1", "SKU-L", &cs));
    assert_int_equal(cs.on_hand, 2);
    stop(&g);
}

static void test_split_reroute_and_rollback(void **state)
{
    gw_t g;
    start(&g, "gw-split", NULL);
    /* No warehouse covers 9: the fewest warehouses, 5 + 4. */
    stock(&g, "SKU-S", (int64_t[]){5, 4, 3}, (int64_t[]){5, 4, 3});
    hf_record_t s1 = reserve("s1", "k", "SKU-S", 9, 0);
    hf_reply_t a = call(&g, &s1);
    assert_int_equal(a.outcome, HF_REPLY_HELD);
    assert_int_equal(a.allocations_count, 2);
    assert_int_equal(a.allocations[0].qty + a.allocations[1].qty, 9);

    /* W2 lost its stock (count 0) but the view still shows 4: re-routed to W3. */
    stock(&g, "SKU-Q", (int64_t[]){5, 4, 10}, (int64_t[]){5, 4, 4});
    char key[128];
    hf_record_t cnt = harness_feed("W2", "SKU-Q", HF_FEED_COUNT, 0, ++g.feed_seq);
    harness_send(&g.h, HF_T_STOCK_FEED, harness_pair(key, "W2", "SKU-Q"), &cnt);
    harness_flush(&g.h);
    hf_counter_state_t c = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&g.h, "W2", "SKU-Q", &c) && c.on_hand == 0) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    hf_record_t q1 = reserve("q1", "k", "SKU-Q", 9, 0);
    hf_reply_t b = call(&g, &q1);
    assert_int_equal(b.outcome, HF_REPLY_HELD);
    int64_t sum = 0;
    for (int32_t i = 0; i < b.allocations_count; i++) {
        assert_string_not_equal(b.allocations[i].warehouse_id, "W2");
        sum += b.allocations[i].qty;
    }
    assert_int_equal(sum, 9);
    wait_reserved(&g, "SKU-Q", 9);

    /* W2 lost its stock and nothing else can cover: complete rollback. */
    stock(&g, "SKU-R", (int64_t[]){5, 4, 0}, (int64_t[]){5, 4, 0});
    hf_record_t cnt2 = harness_feed("W2", "SKU-R", HF_FEED_COUNT, 0, ++g.feed_seq);
    harness_send(&g.h, HF_T_STOCK_FEED, harness_pair(key, "W2", "SKU-R"), &cnt2);
    harness_flush(&g.h);
    deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&g.h, "W2", "SKU-R", &c) && c.on_hand == 0) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    hf_record_t x1 = reserve("x1", "k", "SKU-R", 9, 0);
    hf_reply_t x = call(&g, &x1);
    assert_int_equal(x.outcome, HF_REPLY_REJECTED_INSUFFICIENT);
    assert_int_equal(x.allocations_count, 0);
    wait_reserved(&g, "SKU-R", 0); /* W1's 5 were held, then rolled back */
    assert_int_equal(ledger_of(&g, "x1").by_kind[HF_LEDGER_REJECTED], 1);
    stop(&g);
}

static void test_200_concurrent_reserves_for_the_last_10_units(void **state)
{
    gw_t g;
    /* The contention on the last units is what is tested, so none of the 200 may be
     * shed: a burst on the sanitizer build can slow the counter hop past the
     * shedding deadline (which itest of its own would then prove; here it is off). */
    start(&g, "gw-last10", "\"reserve_deadline_ms\": 0");
    stock(&g, "SKU-L", (int64_t[]){4, 3, 3}, (int64_t[]){4, 3, 3});
    char errstr[256];
    enum { N = 200 };
    for (int i = 0; i < N; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "L%03d", i);
        hf_record_t r = reserve(rid, "k", "SKU-L", 1, 0);
        assert_int_equal(client_send_async(g.c, &r, errstr, sizeof errstr), HF_OK);
    }
    assert_int_equal(client_flush(g.c, 10000, errstr, sizeof errstr), HF_OK);
    size_t replies = 0, held = 0, rejected = 0;
    int64_t deadline = harness_now_ms() + 120000;
    while (replies < N && harness_now_ms() < deadline) {
        hf_reply_t rep;
        if (client_poll(g.c, 1000, &rep, errstr, sizeof errstr) != 1)
            continue;
        replies++;
        held += rep.outcome == HF_REPLY_HELD;
        rejected += rep.outcome == HF_REPLY_REJECTED_INSUFFICIENT;
    }
    print_message("200 reserves for 10 units: %zu replies, %zu held, %zu rejected\n", replies, held,
                  rejected);
    assert_int_equal(replies, N);
    assert_int_equal(held, 10);
    assert_int_equal(rejected, N - 10);
    wait_reserved(&g, "SKU-L", 10);
    for (int i = 0; i < 3; i++) {
        hf_counter_state_t c;
        assert_true(harness_counter(&g.h, whs[i], "SKU-L", &c));
        assert_int_equal(c.on_hand - c.reserved, 0);
    }
    stop(&g);
}

/* A Reserve with `lines` lines, hand-encoded: the C struct cannot hold more
 * than HF_LINES_MAX, the wire can. */
static size_t wire_reserve(uint8_t *b, size_t cap, int lines)
{
    size_t n = 0;
    uint64_t fp = codec_fingerprint(HF_REC_RESERVE);
    b[n++] = 0xC3;
    b[n++] = 0x01;
    for (int i = 0; i < 8; i++)
        b[n++] = (uint8_t)(fp >> (8 * i));
#define LONG(v)                                                                                    \
    do {                                                                                           \
        uint64_t z = ((uint64_t)(v) << 1) ^ (uint64_t)((int64_t)(v) >> 63);                        \
        while (z >= 0x80) {                                                                        \
            b[n++] = (uint8_t)(z | 0x80);                                                          \
            z >>= 7;                                                                               \
        }                                                                                          \
        b[n++] = (uint8_t)z;                                                                       \
    } while (0)
#define STR(s)                                                                                     \
    do {                                                                                           \
        LONG(strlen(s));                                                                           \
        memcpy(b + n, s, strlen(s));                                                               \
        n += strlen(s);                                                                            \
    } while (0)
    STR("big");
    STR("k");
    LONG(lines);
    for (int i = 0; i < lines && n + 32 < cap; i++) {
        STR("SKU-A");
        LONG(1);
    }
    LONG(0);
    memset(b + n, 0, 16); /* ship_to */
    n += 16;
    LONG(0);
    STR("");
    STR("");
    LONG(0);
    return n;
}

typedef struct {
    size_t count;
    char reasons[2048];
} dead_t;

static void dead_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    dead_t *d = opaque;
    d->count++;
    size_t used = strlen(d->reasons);
    snprintf(d->reasons + used, sizeof d->reasons - used, "[%s] ", rec->u.dead_letter.reason);
}

static void test_invalid_requests_get_clear_rejections(void **state)
{
    gw_t g;
    start(&g, "gw-invalid", NULL);
    stock(&g, "SKU-A", (int64_t[]){10, 0, 0}, (int64_t[]){10, 0, 0});
    hf_record_t z = reserve("i1", "k", "SKU-A", 0, 0);
    hf_reply_t a = call(&g, &z);
    assert_int_equal(a.outcome, HF_REPLY_REJECTED_INVALID);
    print_message("qty 0: %s\n", a.message);
    hf_record_t u = reserve("i2", "k", "SKU-NOPE", 1, 0);
    hf_reply_t b = call(&g, &u);
    assert_int_equal(b.outcome, HF_REPLY_REJECTED_INVALID);
    print_message("unknown sku: %s\n", b.message);
    hf_record_t t = reserve("i3", "k", "SKU-A", 1, 5);
    assert_int_equal(call(&g, &t).outcome, HF_REPLY_REJECTED_INVALID);

    static uint8_t big[300000];
    size_t len = wire_reserve(big, sizeof big, 10000);
    harness_send_raw(&g.h, HF_T_REQUESTS, "big", big, len);
    harness_send_raw(&g.h, HF_T_REQUESTS, "garbage", "\x01\x02garbage", 9);
    harness_flush(&g.h);
    dead_t d = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (d.count < 2 && harness_now_ms() < deadline) {
        memset(&d, 0, sizeof d);
        harness_read(&g.h, HF_T_DEAD_LETTERS, dead_fn, &d);
        harness_sleep_ms(200);
    }
    assert_int_equal(d.count, 2);
    print_message("dead letters: %s\n", d.reasons);

    /* A reply topic that does not exist: rejected on the default topic, nothing
     * applied (it used to fail every transaction that carried its reply). */
    hf_record_t m = reserve("i5", "k", "SKU-A", 1, 0);
    snprintf(m.u.reserve.reply_to, sizeof m.u.reserve.reply_to, "%sholdfast.replies.none",
             g.h.prefix);
    hf_reply_t nt = call(&g, &m);
    assert_int_equal(nt.outcome, HF_REPLY_REJECTED_INVALID);
    assert_non_null(strstr(nt.message, "does not exist"));
    print_message("missing reply_to: %s\n", nt.message);

    /* Nothing else is affected. */
    hf_record_t ok = reserve("i4", "k", "SKU-A", 1, 0);
    assert_int_equal(call(&g, &ok).outcome, HF_REPLY_HELD);
    wait_reserved(&g, "SKU-A", 1);
    stop(&g);
}

/* ---- kill -9 in the middle of 5,000 reservations */

typedef struct {
    size_t events;
    size_t first[5000]; /* HELD or REJECTED events per reservation */
    int64_t held_units;
} crash_ledger_t;

static void crash_ledger_fn(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    crash_ledger_t *l = opaque;
    const hf_ledger_event_t *e = &rec->u.ledger_event;
    int i = atoi(e->reservation_id + 1);
    if (i < 0 || i >= 5000)
        return;
    l->events++;
    if (e->kind == HF_LEDGER_HELD || e->kind == HF_LEDGER_REJECTED)
        l->first[i]++;
    for (int32_t a = 0; e->kind == HF_LEDGER_HELD && a < e->allocations_count; a++)
        l->held_units += e->allocations[a].qty;
}

static void test_kill9_mid_5000_reservations(void **state)
{
    enum { N = 5000 };
    gw_t g;
    start(&g, "gw-crash", NULL);
    stock(&g, "SKU-K", (int64_t[]){2000, 1500, 1000}, (int64_t[]){2000, 1500, 1000});
    char errstr[256];
    for (int i = 0; i < N; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "K%04d", i);
        hf_record_t r = reserve(rid, "k", "SKU-K", 1 + i % 2, 0);
        assert_int_equal(client_send_async(g.c, &r, errstr, sizeof errstr), HF_OK);
    }
    assert_int_equal(client_flush(g.c, 30000, errstr, sizeof errstr), HF_OK);
    /* Kill once some, not all, replies are out. */
    size_t replies = 0;
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (replies < 500 && harness_now_ms() < deadline) {
        hf_reply_t rep;
        if (client_poll(g.c, 500, &rep, errstr, sizeof errstr) == 1)
            replies++;
    }
    harness_kill9(g.pid);
    print_message("killed after %zu of %d replies\n", replies, N);
    g.pid = harness_start_with(&g.h, "g1", "counter,gateway", g.cfg);

    crash_ledger_t *l = calloc(1, sizeof *l);
    size_t done = 0;
    deadline = harness_now_ms() + 150000;
    while (harness_now_ms() < deadline) {
        memset(l, 0, sizeof *l);
        harness_read(&g.h, HF_T_LEDGER, crash_ledger_fn, l);
        done = 0;
        for (int i = 0; i < N; i++)
            done += l->first[i] >= 1;
        if (done == N)
            break;
        harness_sleep_ms(1000);
    }
    for (int i = 0; i < N; i++)
        if (l->first[i] != 1)
            fail_msg("K%04d has %zu HELD/REJECTED ledger events", i, l->first[i]);
    wait_reserved(&g, "SKU-K", l->held_units);
    print_message("after kill -9: %zu reservations settled once, %lld units held = counters\n",
                  done, (long long)l->held_units);
    free(l);
    stop(&g);
}

/* ---- appended: shortfall and lost results */

typedef struct {
    const char *rid;
    size_t count;
    hf_reply_t last;
} replies_t;

static void count_replies(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    replies_t *r = opaque;
    if (rec->type == HF_REC_REPLY && strcmp(rec->u.reply.reservation_id, r->rid) == 0) {
        r->count++;
        r->last = rec->u.reply;
    }
}

static void send_count(gw_t *g, const char *wh, const char *sku, int64_t qty)
{
    char key[128];
    hf_record_t cnt = harness_feed(wh, sku, HF_FEED_COUNT, qty, ++g->feed_seq);
    harness_send(&g->h, HF_T_STOCK_FEED, harness_pair(key, wh, sku), &cnt);
    harness_flush(&g->h);
}

/* A cycle count below what is held revokes the hold: the counter tells the
 * gateway (SHORTFALL), the gateway ends the reservation RELEASED with reason
 * stock_shortfall and gives the hold back, so nothing stays reserved; a payment
 * arriving afterwards is refused and flagged for refund. */
static void
test_stock_count_revoking_a_held_reservation_releases_it_as_stock_shortfall(void **state)
{
    gw_t g;
    start(&g, "gw-shortfall", NULL);
    stock(&g, "SKU-F", (int64_t[]){5, 0, 0}, (int64_t[]){5, 0, 0});
    hf_record_t r = reserve("f1", "k", "SKU-F", 3, 0);
    hf_reply_t held = call(&g, &r);
    assert_int_equal(held.outcome, HF_REPLY_HELD);
    assert_string_equal(held.allocations[0].warehouse_id, "W1");
    wait_reserved(&g, "SKU-F", 3);

    send_count(&g, "W1", "SKU-F", 1); /* 1 on hand, 3 held */
    wait_ledger(&g, "f1", HF_LEDGER_RELEASED);
    ledger_t l = ledger_of(&g, "f1");
    assert_string_equal(l.last.reason, "stock_shortfall");
    assert_int_equal(l.by_kind[HF_LEDGER_HELD], 1);
    assert_int_equal(l.by_kind[HF_LEDGER_RELEASED], 1);
    wait_reserved(&g, "SKU-F", 0);
    hf_counter_state_t c = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (!(harness_counter(&g.h, "W1", "SKU-F", &c) && c.revoking == 0 && c.reserved == 0) &&
           harness_now_ms() < deadline)
        harness_sleep_ms(200);
    assert_int_equal(c.on_hand, 1);
    assert_int_equal(c.reserved, 0);
    assert_int_equal(c.revoking, 0);

    hf_record_t pay = harness_commit_req("f1", "c1", "pay-f1");
    hf_reply_t rep = call(&g, &pay);
    assert_int_equal(rep.outcome, HF_REPLY_CONFLICT);
    assert_non_null(strstr(rep.message, "stock_shortfall"));
    wait_ledger(&g, "f1", HF_LEDGER_LATE_PAYMENT);
    assert_int_equal(ledger_of(&g, "f1").by_kind[HF_LEDGER_COMMITTED], 0);
    stop(&g);
}

/* The gateway runs without any counter: its Hold goes unanswered, the sweeper
 * asks again after result_timeout_ms (same attempt). A counter started later
 * answers the original and the repeats alike; the reservation is HELD exactly
 * once, with one reply, one held ledger event and the units reserved once.
 * The Reserve is sent once, while the restarted gateway is still joining: on a
 * slow box it reached the gateway 713 ms later and was shed BUSY by the 300 ms
 * reserve_deadline_ms (no Hold at all), so shedding is off here. */
static void test_lost_counter_result_is_requested_again_and_the_reserve_is_held_once(void **state)
{
    gw_t g;
    start(&g, "gw-lost", "\"result_timeout_ms\": 1500, \"reserve_deadline_ms\": 0");
    stock(&g, "SKU-O", (int64_t[]){10, 0, 0}, (int64_t[]){10, 0, 0});
    /* The same instance name: static membership hands the partitions back at once. */
    assert_int_equal(harness_stop(g.pid), 0);
    g.pid = harness_start_with(&g.h, "g1", "gateway", g.cfg);

    char errstr[256];
    hf_record_t r = reserve("o1", "k", "SKU-O", 4, 0);
    assert_int_equal(client_send(g.c, &r, errstr, sizeof errstr), HF_OK);
    holds_t hc = {"o1", 0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (hc.holds < 2 && harness_now_ms() < deadline) {
        harness_sleep_ms(300);
        hc.holds = 0;
        harness_read(&g.h, HF_T_COUNTER_COMMANDS, count_holds, &hc);
    }
    assert_true(hc.holds >= 2); /* asked again */
    replies_t none = {.rid = "o1"};
    harness_read(&g.h, HF_T_REPLIES, count_replies, &none);
    assert_int_equal(none.count, 0);

    pid_t counter = harness_start_with(&g.h, "g1", "counter", g.cfg);
    hf_reply_t rep = {0};
    int got = 0;
    deadline = harness_now_ms() + WAIT_MS;
    while (got != 1 && harness_now_ms() < deadline) {
        got = client_poll(g.c, 1000, &rep, errstr, sizeof errstr);
        if (got == 1 && strcmp(rep.reservation_id, "o1") != 0)
            got = 0;
    }
    assert_int_equal(got, 1);
    assert_int_equal(rep.outcome, HF_REPLY_HELD);
    assert_int_equal(rep.allocations_count, 1);
    assert_int_equal(rep.allocations[0].qty, 4);
    wait_reserved(&g, "SKU-O", 4);
    harness_sleep_ms(2000); /* room for a wrong second answer to show */
    replies_t all = {.rid = "o1"};
    harness_read(&g.h, HF_T_REPLIES, count_replies, &all);
    assert_int_equal(all.count, 1);
    ledger_t l = ledger_of(&g, "o1");
    assert_int_equal(l.by_kind[HF_LEDGER_HELD], 1);
    assert_int_equal(l.by_kind[HF_LEDGER_REJECTED], 0);
    assert_int_equal(reserved_of(&g, "W1", "SKU-O"), 4);
    hc.holds = 0;
    harness_read(&g.h, HF_T_COUNTER_COMMANDS, count_holds, &hc);
    print_message("lost result: %zu Holds sent for one reservation, held once\n", hc.holds);
    assert_int_equal(harness_stop(counter), 0);
    stop(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_commit_release_and_idempotency),
        cmocka_unit_test(test_ttl_expiry_restores_counters_and_late_payment),
        cmocka_unit_test(test_late_payment_rereserves_or_refunds),
        cmocka_unit_test(test_payment_events_drive_the_hold),
        cmocka_unit_test(test_a_pick_up_holds_at_its_store_alone),
        cmocka_unit_test(test_a_partial_reserve_holds_what_there_is),
        cmocka_unit_test(test_split_reroute_and_rollback),
        cmocka_unit_test(test_200_concurrent_reserves_for_the_last_10_units),
        cmocka_unit_test(test_invalid_requests_get_clear_rejections),
        cmocka_unit_test(test_kill9_mid_5000_reservations),
        cmocka_unit_test(
            test_stock_count_revoking_a_held_reservation_releases_it_as_stock_shortfall),
        cmocka_unit_test(test_lost_counter_result_is_requested_again_and_the_reserve_is_held_once),
    };
    return cmocka_run_group_tests_name("gateway stage on a real broker", tests, NULL, NULL);
}
