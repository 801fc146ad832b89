/* The gateway's CPU per reservation lifecycle (issue 11), counted in
 * instructions: N reservations go through the real gateway handlers over a
 * real RocksDB store (the fake stage of tests/unit/fake), the way the pipeline
 * feeds them — Reserve, the counter's Hold result, then a Commit (70 %), a
 * Release (20 %) or nothing until the sweeper expires it (10 %), each with the
 * counter's answer to its CommitHold / ReleaseHold; 1 % of Reserves and of
 * Commits are sent twice. Records are applied at BENCH_RATE_PER_MS per
 * simulated millisecond, a transaction is written every BENCH_BATCH records
 * and the tick runs every 250 ms per partition (its writes end the batch), as
 * task.c does; at the end the
 * clock runs on until every timer (pending, expiry, forget, idempotency) has
 * fired, so each lifecycle's whole cost is counted.
 *
 * Under valgrind --tool=callgrind only the task's own work is collected
 * (CALLGRIND_TOGGLE_COLLECT around handlers, ticks and the batch write); the
 * driver, the counters' model and the fake's bookkeeping are not. Without
 * valgrind it prints wall-clock figures instead. `make bench-gateway-cpu`.
 *
 * How the fake's commit differs from task.c's: task.c keeps each written
 * key's value as it is put (for the changelog) and writes the buffer with
 * state_buf_write after the Kafka commit; here the batch is written with
 * state_buf_write directly and no changelog is kept (fake_stage_commit would
 * read every written key back from the DB, which the task does not). The
 * fake's written-key list is a linear scan (the task's is not): its cost
 * is inside the handlers and shows as written_add in callgrind_annotate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <valgrind/callgrind.h>

#include "../unit/fake/fake_stage.h"
#include "codec.h"
#include "gateway/gateway.h"
#include "log.h"
#include "topics.h"

#define T0                 1700000000000LL
#define BENCH_N_DEFAULT    20000
#define BENCH_BATCH        50
#define BENCH_RATE_PER_MS  3 /* new reservations per simulated ms: 3,000/s */
#define BENCH_SKUS         50
#define BENCH_TTL_MS       10000
#define BENCH_RESULT_MS    3000  /* result_timeout_ms */
#define BENCH_RETENTION_MS 20000 /* idempotency and reservation retention */
#define BENCH_SHOPPER_MS   500   /* HELD -> the shopper's Commit or Release */
#define BENCH_COUNTER_MS   5     /* a command -> its result */
#define BENCH_TICK_MS      250

typedef struct {
    int64_t due_ms;
    hf_record_t rec;
} pending_t;

/* A FIFO of records due at a time (each queue has one constant delay, so its
 * due times never decrease). */
typedef struct {
    pending_t *q;
    size_t head, tail, cap;
} queue_t;

static void q_push(queue_t *q, int64_t due_ms, const hf_record_t *rec)
{
    if (q->tail == q->cap) {
        if (q->head > 0 && q->head >= q->cap / 2) { /* compact only when it halves the queue */
            memmove(q->q, q->q + q->head, (q->tail - q->head) * sizeof *q->q);
            q->tail -= q->head;
            q->head = 0;
        } else {
            q->cap = q->cap ? q->cap * 2 : 1024;
            q->q = realloc(q->q, q->cap * sizeof *q->q);
            if (!q->q)
                abort();
        }
    }
    q->q[q->tail].due_ms = due_ms;
    q->q[q->tail++].rec = *rec;
}

static const hf_record_t *q_due(queue_t *q, int64_t now_ms)
{
    if (q->head == q->tail || q->q[q->head].due_ms > now_ms)
        return NULL;
    return &q->q[q->head++].rec;
}

typedef struct {
    stage_ctx_t *fx;
    gateway_env_t env;
    gw_sweep_t sweep;
    gw_escrow_primed_t primed;
    hf_availability_t view[BENCH_SKUS];
    queue_t requests, results;
    size_t in_batch;
    uint64_t applied, batches, ticks, lifecycles_done;
    uint64_t held, committed, released, expired_left, dups;
    uint32_t rng;
} bench_t;

static int bench_availability(void *opaque, const char *sku, hf_availability_t *out)
{
    bench_t *b = opaque;
    int i = atoi(sku + 3);
    if (strncmp(sku, "SKU", 3) != 0 || i < 0 || i >= BENCH_SKUS)
        return HF_ERR_NOTFOUND;
    *out = b->view[i];
    return HF_OK;
}

static int64_t bench_staleness(void *opaque)
{
    return 0;
}

static uint32_t rnd(bench_t *b)
{
    b->rng = b->rng * 1103515245u + 12345u;
    return b->rng >> 8;
}

static void env_init(bench_t *b)
{
    gateway_env_t *e = &b->env;
    fake_stage_routes(&e->routes);
    e->ttl_default_ms = BENCH_TTL_MS;
    e->hold_max_factor_pct = 200;
    e->idempotency_retention_ms = BENCH_RETENTION_MS;
    e->reservation_retention_ms = BENCH_RETENTION_MS;
    e->late_policy = GW_LATE_REFUND;
    e->result_timeout_ms = BENCH_RESULT_MS;
    e->view_stale_max_ms = 10000;
    e->availability = bench_availability;
    e->staleness_ms = bench_staleness;
    e->opaque = b;
    b->sweep.run_id = 1;
    e->sweep = &b->sweep;
    /* BENCH_ESCROW=1: every SKU pinned to escrow (docs/ESCROW.md), the driver
     * granting each refill. */
    const char *escrow = getenv("BENCH_ESCROW");
    if (escrow && strcmp(escrow, "1") == 0) {
        for (int s = 0; s < BENCH_SKUS; s++)
            snprintf(e->escrow.skus[e->escrow.skus_count++], sizeof e->escrow.skus[0], "SKU%d", s);
        e->escrow.refill_min_units = 10;
        e->escrow.refill_max_units = 2000;
        e->escrow.refill_horizon_ms = 1000;
        e->escrow.idle_return_ms = 5000;
        e->escrow.scarce_units = 20;
        e->escrow.primed = &b->primed; /* as a process has: priming looked at once */
    }
    for (int s = 0; s < BENCH_SKUS; s++) {
        hf_availability_t *a = &b->view[s];
        snprintf(a->sku, sizeof a->sku, "SKU%d", s);
        for (size_t i = 0; i < FAKE_WAREHOUSES_COUNT; i++) {
            hf_wh_available_t *w = &a->warehouses[a->warehouses_count++];
            snprintf(w->warehouse_id, sizeof w->warehouse_id, "%s", fake_warehouses[i].id);
            w->available = 1000000000;
            a->total += w->available;
        }
        a->in_stock = true;
    }
}

static const char *rid_of(const hf_record_t *rec)
{
    switch (rec->type) {
    case HF_REC_RESERVE:
        return rec->u.reserve.reservation_id;
    case HF_REC_COMMIT:
        return rec->u.commit.reservation_id;
    case HF_REC_RELEASE:
        return rec->u.release.reservation_id;
    case HF_REC_COUNTER_RESULT:
        return rec->u.counter_result.reservation_id;
    case HF_REC_ALLOTMENT_GRANT: { /* keyed by a holder key of its partition */
        static char key[32];
        for (int n = 0;; n++) {
            snprintf(key, sizeof key, "holder-%d", n);
            if (fake_stage_partition_of(key) == rec->u.allotment_grant.holder_partition)
                return key;
        }
    }
    default:
        abort();
    }
}

static void result_for(bench_t *b, const char *rid, int32_t attempt, const char *w, const char *sku,
                       int64_t qty, hf_cmd_t cmd)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_COUNTER_RESULT;
    hf_counter_result_t *c = &r.u.counter_result;
    snprintf(c->reservation_id, sizeof c->reservation_id, "%s", rid);
    c->attempt = attempt;
    snprintf(c->warehouse_id, sizeof c->warehouse_id, "%s", w);
    snprintf(c->sku, sizeof c->sku, "%s", sku);
    c->command = cmd;
    c->outcome = HF_OUTCOME_OK;
    c->qty = qty;
    c->available = 1000;
    c->applied_at_ms = b->fx->now_ms;
    q_push(&b->results, b->fx->now_ms + BENCH_COUNTER_MS, &r);
}

/* The shopper's next step once its reservation is HELD. */
static void shopper(bench_t *b, const char *rid)
{
    b->held++;
    uint32_t x = rnd(b) % 100;
    if (x >= 90) {
        b->expired_left++;
        return;
    }
    hf_record_t r;
    memset(&r, 0, sizeof r);
    int64_t due = b->fx->now_ms + BENCH_SHOPPER_MS;
    if (x < 70) {
        r.type = HF_REC_COMMIT;
        snprintf(r.u.commit.reservation_id, sizeof r.u.commit.reservation_id, "%s", rid);
        snprintf(r.u.commit.idempotency_key, sizeof r.u.commit.idempotency_key, "c-%.50s", rid);
        snprintf(r.u.commit.payment_id, sizeof r.u.commit.payment_id, "pay-%.50s", rid);
        b->committed++;
        q_push(&b->requests, due, &r);
        if (rnd(b) % 100 == 0) { /* a retried webhook */
            b->dups++;
            q_push(&b->requests, due + 1, &r);
        }
        return;
    }
    r.type = HF_REC_RELEASE;
    snprintf(r.u.release.reservation_id, sizeof r.u.release.reservation_id, "%s", rid);
    snprintf(r.u.release.idempotency_key, sizeof r.u.release.idempotency_key, "r-%.50s", rid);
    b->released++;
    q_push(&b->requests, due, &r);
}

/* What the counters and shoppers do with the outputs of the last record. */
static void react(bench_t *b)
{
    stage_ctx_t *fx = b->fx;
    for (size_t i = 0; i < fx->emits_count; i++) {
        const hf_record_t *r = &fx->emits[i].rec;
        if (fx->emits[i].topic_id == HF_T_COUNTER_COMMANDS) {
            switch (r->type) {
            case HF_REC_HOLD:
                result_for(b, r->u.hold.reservation_id, r->u.hold.attempt, r->u.hold.warehouse_id,
                           r->u.hold.sku, r->u.hold.qty, HF_CMD_HOLD);
                break;
            case HF_REC_COMMIT_HOLD:
                result_for(b, r->u.commit_hold.reservation_id, r->u.commit_hold.attempt,
                           r->u.commit_hold.warehouse_id, r->u.commit_hold.sku, 0, HF_CMD_COMMIT);
                break;
            case HF_REC_RELEASE_HOLD:
                result_for(b, r->u.release_hold.reservation_id, r->u.release_hold.attempt,
                           r->u.release_hold.warehouse_id, r->u.release_hold.sku, 0,
                           HF_CMD_RELEASE);
                break;
            case HF_REC_ALLOTMENT_REQUEST: /* escrow: the counter grants what is asked */
                if (r->u.allotment_request.want_qty > 0) {
                    hf_record_t g;
                    hf_allotment_grant_t *a =
                        &hf_record_reset(&g, HF_REC_ALLOTMENT_GRANT)->u.allotment_grant;
                    snprintf(a->warehouse_id, sizeof a->warehouse_id, "%s",
                             r->u.allotment_request.warehouse_id);
                    snprintf(a->sku, sizeof a->sku, "%s", r->u.allotment_request.sku);
                    a->holder_partition = r->u.allotment_request.holder_partition;
                    a->seq = r->u.allotment_request.seq;
                    a->granted_qty = r->u.allotment_request.want_qty;
                    q_push(&b->results, fx->now_ms + BENCH_COUNTER_MS, &g);
                }
                break;
            default:
                break;
            }
        } else if (r->type == HF_REC_REPLY && r->u.reply.outcome == HF_REPLY_HELD &&
                   r->u.reply.idempotency_key[0] == 'k') {
            shopper(b, r->u.reply.reservation_id);
        } else if (r->type == HF_REC_LEDGER_EVENT) {
            hf_ledger_kind_t k = r->u.ledger_event.kind;
            if (k == HF_LEDGER_COMMITTED || k == HF_LEDGER_RELEASED || k == HF_LEDGER_EXPIRED ||
                k == HF_LEDGER_REJECTED)
                b->lifecycles_done++;
        }
    }
    fx->emits_count = 0;
}

static void batch_end(bench_t *b)
{
    stage_ctx_t *fx = b->fx;
    CALLGRIND_TOGGLE_COLLECT;
    int err = state_buf_write(fx->st, fx->buf, fx->errstr, sizeof fx->errstr);
    CALLGRIND_TOGGLE_COLLECT;
    if (err) {
        fprintf(stderr, "state_buf_write: %s\n", fx->errstr);
        exit(1);
    }
    fx->written_count = 0;
    b->in_batch = 0;
    b->batches++;
}

static void apply(bench_t *b, const hf_record_t *rec)
{
    stage_ctx_t *fx = b->fx;
    const char *rid = rid_of(rec);
    size_t n = strlen(rid);
    memcpy(fx->key, rid, n);
    fx->key_len = n;
    fx->partition = fake_stage_partition_of(rid);
    fx->reject_reason[0] = '\0';
    const stage_def_t *def = gateway_stage();
    const stage_handler_t *h = NULL;
    for (size_t i = 0; i < def->handlers_count; i++)
        if (def->handlers[i].type == rec->type)
            h = &def->handlers[i];
    if (!h) {
        fprintf(stderr, "no gateway handler for %s\n", hf_rec_type_name(rec->type));
        exit(1);
    }
    CALLGRIND_TOGGLE_COLLECT;
    int err = h->handle(fx, rec);
    CALLGRIND_TOGGLE_COLLECT;
    if (err) {
        fprintf(stderr, "handler of %s: %s (%s%s)\n", hf_rec_type_name(rec->type), hf_err_name(err),
                fx->reject_reason, fx->errstr);
        exit(1);
    }
    react(b);
    b->applied++;
    if (++b->in_batch >= BENCH_BATCH)
        batch_end(b);
}

static void tick(bench_t *b)
{
    stage_ctx_t *fx = b->fx;
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        fx->partition = p;
        CALLGRIND_TOGGLE_COLLECT;
        int err = gateway_stage()->tick(fx);
        CALLGRIND_TOGGLE_COLLECT;
        if (err) {
            fprintf(stderr, "tick: %s\n", hf_err_name(err));
            exit(1);
        }
        react(b);
    }
    b->ticks++;
    batch_end(b); /* a tick's writes end the batch, as a quiet task's interval does */
}

static void reserve(bench_t *b, uint64_t i)
{
    hf_record_t r;
    memset(&r, 0, sizeof r);
    r.type = HF_REC_RESERVE;
    hf_reserve_t *q = &r.u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "res-%08llu", (unsigned long long)i);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "k-%08llu", (unsigned long long)i);
    q->lines_count = 1;
    snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "SKU%u", rnd(b) % BENCH_SKUS);
    q->lines[0].qty = 1 + rnd(b) % 3;
    q->ship_to = (hf_geo_t){40.73, -73.99};
    q->sent_at_ms = b->fx->now_ms;
    apply(b, &r);
    if (rnd(b) % 100 == 0) { /* a retried Reserve */
        b->dups++;
        apply(b, &r);
    }
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : BENCH_N_DEFAULT;
    log_set_level(HF_LOG_ERROR);
    char errstr[256];
    if (codec_init(errstr, sizeof errstr) != HF_OK) {
        fprintf(stderr, "codec_init: %s\n", errstr);
        return 1;
    }
    bench_t *b = calloc(1, sizeof *b);
    if (!b)
        return 1;
    b->rng = 12345;
    b->fx = fake_stage_new("bench_gw_cpu", T0);
    env_init(b);
    b->fx->env = &b->env;
    stage_ctx_t *fx = b->fx;
    double t0 = wall_s();
    uint64_t started = 0;
    int64_t next_tick = T0 + BENCH_TICK_MS;
    int64_t end_ms = INT64_MAX;
    const hf_record_t *rec;
    for (;;) {
        for (int k = 0; k < BENCH_RATE_PER_MS && started < n; k++)
            reserve(b, started++);
        while ((rec = q_due(&b->results, fx->now_ms)) || (rec = q_due(&b->requests, fx->now_ms)))
            apply(b, rec);
        if (fx->now_ms >= next_tick) {
            tick(b);
            next_tick += BENCH_TICK_MS;
        }
        if (started == n && end_ms == INT64_MAX)
            end_ms = fx->now_ms + BENCH_SHOPPER_MS + BENCH_TTL_MS + 2 * BENCH_RETENTION_MS +
                     4 * BENCH_RESULT_MS;
        if (fx->now_ms >= end_ms)
            break;
        fx->now_ms++;
    }
    if (b->in_batch > 0 || state_buf_count(fx->buf) > 0)
        batch_end(b);
    double secs = wall_s() - t0;

    /* Every timer has fired: nothing of any reservation is left. */
    state_iter_t *it = state_iter_new(fx->st, NULL, 0, "", 0, false);
    size_t left = 0;
    const void *k, *v;
    size_t kl, vl;
    for (int32_t p = 0; p < FAKE_STAGE_PARTITIONS; p++) {
        state_iter_destroy(it);
        it = state_iter_new(fx->st, NULL, p, "", 0, false);
        while (state_iter_next(it, &k, &kl, &v, &vl))
            /* The sweeper's cursor stays, and a pinned SKU's allotments. */
            left += *(const char *)k != 'C' && *(const char *)k != GW_ESCROW_TAG;
    }
    state_iter_destroy(it);

    printf("bench_gateway_cpu: %llu reservations at %d/ms simulated, batch %d records, tick %d ms, "
           "ttl %d ms, result timeout %d ms, retention %d ms, %s\n",
           (unsigned long long)n, BENCH_RATE_PER_MS, BENCH_BATCH, BENCH_TICK_MS, BENCH_TTL_MS,
           BENCH_RESULT_MS, BENCH_RETENTION_MS,
           b->env.escrow.skus_count ? "escrow (every SKU pinned)" : "direct");
    printf("  records applied %llu, batches %llu, ticks %llu; held %llu, commit %llu, release "
           "%llu, left to expire %llu, duplicates %llu; lifecycles ended %llu; keys left %zu\n",
           (unsigned long long)b->applied, (unsigned long long)b->batches,
           (unsigned long long)b->ticks, (unsigned long long)b->held,
           (unsigned long long)b->committed, (unsigned long long)b->released,
           (unsigned long long)b->expired_left, (unsigned long long)b->dups,
           (unsigned long long)b->lifecycles_done, left);
    if (RUNNING_ON_VALGRIND)
        printf("  under valgrind: instructions of handlers + ticks + batch writes are in the "
               "callgrind output; divide Ir by %llu for instructions per lifecycle\n",
               (unsigned long long)n);
    else
        printf("  wall %.3f s: %.2f us per lifecycle (handlers, ticks, writes and the driver)\n",
               secs, secs * 1e6 / (double)n);
    int rc = b->lifecycles_done == n && left == 0 ? 0 : 2;
    if (rc)
        fprintf(stderr, "bench_gateway_cpu: not every lifecycle ended or state is left behind\n");
    fake_stage_destroy(fx);
    free(b->requests.q);
    free(b->results.q);
    free(b);
    return rc;
}
