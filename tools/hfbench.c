/* hfbench: the flash-sale load generator. It drives a running holdfast (counter,
 * aggregator and gateway stages) the way checkout does: open-loop reserves at a
 * target rate, latency measured from each request's intended send time (a stall
 * shows up as latency, it does not slow the sender), shoppers at random
 * locations, Zipf-popular SKUs, and after a HELD reply a commit, an abandon
 * (release), nothing at all (the hold expires) or a payment that comes after
 * the hold expired (--late-pct), each after a random delay.
 * Some reserves are sent twice with the same idempotency key; their replies
 * must agree.
 *
 *   hfbench seed  --skus N | --pairs N [--catalog uniform|zipf] ...  (hfbench seed --help)
 *   hfbench run   --scenario steady|flash-sale ...                  (hfbench run --help)
 *
 * `seed` places each SKU at distinct warehouses — --per-sku of them (uniform) or
 * a Zipf-distributed number (zipf) — and returns once the routing view shows
 * every pair's stock, with a progress line on stderr. `run` prints one progress
 * line per second and writes a JSON report (summary, per-second series) for
 * plots and docs/PERFORMANCE.md. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "framing.h"
#include "hf_assert.h"
#include "hf_cli.h"
#include "hf_clock.h"
#include "hf_datafile.h"
#include "hf_limits.h"
#include "hf_version.h"
#include "kafka.h"
#include "lib/client.h"
#include "topics.h"

/* 10M open holds built at ~3,000/s (make bench-holds) need ~1 hour of one run:
 * 20M requests and 4 hours bound it (about 100 bytes a request in memory). */
#define BENCH_REQS_MAX           20000000
#define BENCH_SECONDS_MAX        14400
#define BENCH_TTL_MS_MAX         86400000 /* the HTTP API's own bound */
#define BENCH_TTL_WAITED_MS_MAX  3600000  /* without --leave-open: the run waits it out */
/* Commit and release latencies kept (the first ones of a run), and the
 * doorbuster's rejection latencies. */
#define BENCH_SETTLE_SAMPLES_MAX 1000000
#define BENCH_REJECT_SAMPLES_MAX 500000
#define BENCH_WAREHOUSES_MAX     64
/* Enough for 100M pairs of a zipf catalog with few warehouses a SKU; what a seed
 * plan costs is at BENCH_PAIRS_MAX below (4 bytes a SKU, 17 a pair). */
#define BENCH_SKUS_MAX           50000000
#define BENCH_PENDING_MAX        65536
/* After the planned end, how long the run keeps listening while a reserve still
 * awaits its first reply, or a re-send of a shed (BUSY) reserve awaits its own
 * (a broker outage delays answers by tens of seconds): a reserve it stopped
 * listening for could be HELD with nobody to settle it. */
#define BENCH_DRAIN_MAX_MS       60000
#define DOORBUSTER               "DOORBUSTER"

typedef struct {
    const char *bootstrap, *scenario, *report, *warehouses_file;
    const char *partitioner; /* the requests producer's (--partitioner); NULL = murmur2_random */
    int rate, seconds, skus, per_sku, dup_pct, commit_pct, abandon_pct, late_pct, ttl_ms,
        timeout_ms, busy_retries;
    int declined_pct, canceled_pct; /* payment events: a card declined then another; canceled */
    int64_t stock, doorbuster_stock;
    int burst_factor;
    int door_tail_rate; /* flash-sale: doorbuster shoppers/s after the burst */
    double zipf_s;
    unsigned seed;
    /* seed: the catalog's shape (seed_catalog_t), its Zipf exponent, the pairs
     * asked for (0: --skus SKUs instead), plan without feeding, the plan's file */
    int catalog;
    double catalog_s;
    int pairs;
    bool plan_only;
    bool leave_open; /* run: end without waiting out the TTL (--leave-open) */
    const char *plan_out;
} bench_opts_t;

/* One reserve's life, indexed by its number. */
typedef struct {
    int64_t intended_ms, reply_ms;
    int8_t outcome; /* -1 = no reply yet */
    /* 0 commit, 1 abandon, 2 let expire, 3 pay after expiry, 4 a card declined
     * (payment.failed) then another paid, 5 payment canceled */
    int8_t fate;
    uint8_t settles_sent; /* fate 4 sends two: the failure, then the commit */
    bool doorbuster, built, settled;
    bool resend_unanswered; /* its duplicate was sent and not answered yet */
    uint8_t busy_retries;   /* sends again after a BUSY answer (--busy-retries) */
    int32_t sku_rank;       /* the request's body, fixed at first build so a */
    float lat, lon;         /* duplicate send repeats it exactly */
} req_t;

/* A delayed action: settle reserve `req` at `due_ms`, or send its duplicate. */
typedef struct {
    int64_t due_ms;
    int req;
    bool duplicate;
} action_t;

typedef struct {
    uint32_t sent, replies, held, committed, released, rejected_insufficient, rejected_invalid,
        busy, other, signals;
    uint32_t expired;             /* this run's reservations expired in the second */
    int64_t expiry_lag_max_ms;    /* the latest of them: ledger at_ms - expires_at_ms */
    int64_t doorbuster_available; /* last seen in the second */
    int doorbuster_in_stock;      /* -1 = no record in the second */
} second_t;

static req_t *reqs;
static action_t pending[BENCH_PENDING_MAX];
static size_t pending_count;
static second_t series[BENCH_SECONDS_MAX + 120];
static int64_t *lat_all;    /* reserve latency per reply, ms */
static int32_t *lat_second; /* the second each latency belongs to */
static size_t lat_count;
static int64_t settle_lat[2][BENCH_SETTLE_SAMPLES_MAX]; /* commit, release */
static size_t settle_count[2];
/* Payments sent after their hold expired, and how they were answered. */
static size_t late_sent, late_committed, late_expired, late_other;
/* payment.failed events sent (fate 4), answered HELD (the default policy keeps the
 * hold for the next card) or otherwise; payment.canceled events sent (fate 5). */
static size_t declined_sent, declined_held, declined_other, canceled_sent;
static int64_t doorbuster_reject_lat[BENCH_REJECT_SAMPLES_MAX];
static size_t doorbuster_reject_count;
static size_t duplicate_mismatches, duplicates_checked, expired_seen;
static int64_t doorbuster_units_held, doorbuster_units_committed, doorbuster_sold_out_ms,
    doorbuster_last_hold_ms, doorbuster_last_answer_ms;
static int64_t bench_start_ms;
static int dup_pct_global;
static int busy_retries_global;
static uint64_t busy_resends;
static int64_t ttl_ms_global; /* of the holds left to expire */
/* Expiry lag of this run's expired reservations (the ledger's EXPIRED event:
 * at_ms - expires_at_ms, the gateway's own clock), one per event, bounded by the
 * reserves planned. */
static int64_t *expiry_lag;
static size_t expiry_lag_count, expiry_lag_cap;
static char run_prefix[32]; /* "hb-<seed>-": this run's reservation ids */
static char wh_ids[BENCH_WAREHOUSES_MAX][HF_WAREHOUSE_LEN_MAX + 1];
static int wh_count;

/* ---- min-heap of delayed actions */

static void heap_push(action_t a)
{
    if (pending_count == BENCH_PENDING_MAX)
        return; /* bounded: an action dropped here leaves its hold to expire */
    size_t i = pending_count++;
    while (i > 0 && pending[(i - 1) / 2].due_ms > a.due_ms) {
        pending[i] = pending[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    pending[i] = a;
}

static action_t heap_pop(void)
{
    action_t top = pending[0], last = pending[--pending_count];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= pending_count)
            break;
        if (c + 1 < pending_count && pending[c + 1].due_ms < pending[c].due_ms)
            c++;
        if (pending[c].due_ms >= last.due_ms)
            break;
        pending[i] = pending[c];
        i = c;
    }
    pending[i] = last;
    return top;
}

/* ---- workload */

/* Zipf rank in [0, n) by inverting the continuous approximation of its CDF. */
static int zipf_rank(int n, double s, unsigned *seed)
{
    double u = (rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0);
    if (fabs(s - 1.0) < 1e-9)
        return (int)fmin(n - 1, floor(exp(u * log(n + 1.0)) - 1));
    double a = 1.0 - s, hn = (pow(n + 1.0, a) - 1.0) / a;
    return (int)fmin(n - 1, floor(pow(u * hn * a + 1.0, 1.0 / a) - 1));
}

static hf_record_t make_reserve(const bench_opts_t *o, int i, unsigned *seed)
{
    static hf_record_t r;
    hf_reserve_t *q = &hf_record_reset(&r, HF_REC_RESERVE)->u.reserve;
    snprintf(q->reservation_id, sizeof q->reservation_id, "hb-%u-%d", o->seed, i);
    snprintf(q->idempotency_key, sizeof q->idempotency_key, "hbk-%u-%d", o->seed, i);
    req_t *b = &reqs[i];
    if (!b->built) {
        /* Shoppers across the continental US and western Europe. */
        bool eu = rand_r(seed) % 3 == 0;
        b->sku_rank = zipf_rank(o->skus, o->zipf_s, seed);
        b->lat = eu ? 43 + rand_r(seed) % 12 : 30 + rand_r(seed) % 17;
        b->lon = eu ? -5 + (float)(rand_r(seed) % 25) : -122 + (float)(rand_r(seed) % 50);
        b->built = true;
    }
    q->lines_count = 1;
    if (b->doorbuster)
        snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "%s", DOORBUSTER);
    else
        snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "SKU-%05d", b->sku_rank);
    q->lines[0].qty = 1;
    q->ship_to = (hf_geo_t){b->lat, b->lon};
    q->ttl_ms = reqs[i].fate == 2 || reqs[i].fate == 3 ? o->ttl_ms : 0;
    q->sent_at_ms = hf_wall_ms();
    return r;
}

/* A payment event of kind for reserve i, under the event id "<tag>-<seed>-<i>". */
static hf_record_t *make_payment_event(const bench_opts_t *o, int i, hf_payment_event_kind_t kind,
                                       char tag, hf_record_t *r)
{
    hf_payment_event_t *p = &hf_record_reset(r, HF_REC_PAYMENT_EVENT)->u.payment_event;
    snprintf(p->reservation_id, sizeof p->reservation_id, "hb-%u-%d", o->seed, i);
    snprintf(p->idempotency_key, sizeof p->idempotency_key, "hb%c-%u-%d", tag, o->seed, i);
    p->event = kind;
    snprintf(p->payment_id, sizeof p->payment_id, "pay-%u-%d", o->seed, i);
    snprintf(p->reason, sizeof p->reason, "%s",
             kind == HF_PAY_FAILED ? "card_declined" : "shopper_canceled");
    return r;
}

static hf_record_t make_settle(const bench_opts_t *o, int i)
{
    static hf_record_t r;
    const req_t *q = &reqs[i];
    if (q->fate == 4 && q->settles_sent == 0)
        return *make_payment_event(o, i, HF_PAY_FAILED, 'f', &r);
    if (q->fate == 5)
        return *make_payment_event(o, i, HF_PAY_CANCELED, 'x', &r);
    if (q->fate == 0 || q->fate == 3 || q->fate == 4) {
        hf_commit_t *c = &hf_record_reset(&r, HF_REC_COMMIT)->u.commit;
        snprintf(c->reservation_id, sizeof c->reservation_id, "hb-%u-%d", o->seed, i);
        snprintf(c->idempotency_key, sizeof c->idempotency_key, "hbc-%u-%d", o->seed, i);
        snprintf(c->payment_id, sizeof c->payment_id, "pay-%u-%d", o->seed, i);
    } else {
        hf_release_t *x = &hf_record_reset(&r, HF_REC_RELEASE)->u.release;
        snprintf(x->reservation_id, sizeof x->reservation_id, "hb-%u-%d", o->seed, i);
        snprintf(x->idempotency_key, sizeof x->idempotency_key, "hbr-%u-%d", o->seed, i);
        snprintf(x->reason, sizeof x->reason, "abandoned");
    }
    return r;
}

/* ---- replies */

static int second_of(int64_t t)
{
    return (int)((t - bench_start_ms) / 1000);
}

static second_t *sec(int64_t t)
{
    int s = second_of(t);
    if (s < 0)
        s = 0;
    if (s >= (int)(sizeof series / sizeof series[0]))
        s = (int)(sizeof series / sizeof series[0]) - 1;
    return &series[s];
}

/* What an answer to reserve i means for the run: the counts of its second, and
 * its settle (commit, abandon, late payment) once it is held. */
static void count_outcome(int i, const hf_reply_t *rep, int64_t now, int64_t lat)
{
    req_t *q = &reqs[i];
    second_t *s = sec(now);
    if (q->doorbuster && now > doorbuster_last_answer_ms)
        doorbuster_last_answer_ms = now;
    if (rep->outcome == HF_REPLY_HELD) {
        s->held++;
        if (q->doorbuster) {
            doorbuster_units_held++;
            doorbuster_last_hold_ms = now;
        }
        static unsigned settle_seed = 1;
        if (q->fate == 0 || q->fate == 1) /* commit after 50-500 ms, abandon after 50-1000 ms */
            heap_push(
                (action_t){now + 50 + rand_r(&settle_seed) % (q->fate == 0 ? 450 : 950), i, false});
        else if (q->fate == 3) /* the payment comes 0.5-1.5 s after the hold expired */
            heap_push(
                (action_t){now + ttl_ms_global + 500 + rand_r(&settle_seed) % 1000, i, false});
        else if (q->fate == 4) { /* declined after 50-300 ms, another card 100-400 ms later */
            int64_t declined_at = now + 50 + rand_r(&settle_seed) % 250;
            heap_push((action_t){declined_at, i, false});
            heap_push((action_t){declined_at + 100 + rand_r(&settle_seed) % 300, i, false});
        } else if (q->fate == 5) /* canceled after 50-1000 ms */
            heap_push((action_t){now + 50 + rand_r(&settle_seed) % 950, i, false});
    } else if (rep->outcome == HF_REPLY_REJECTED_INSUFFICIENT) {
        s->rejected_insufficient++;
        if (q->doorbuster &&
            doorbuster_reject_count < sizeof doorbuster_reject_lat / sizeof(int64_t))
            doorbuster_reject_lat[doorbuster_reject_count++] = lat;
    } else if (rep->outcome == HF_REPLY_REJECTED_INVALID) {
        s->rejected_invalid++;
    } else if (rep->outcome == HF_REPLY_BUSY) {
        s->busy++; /* shed: nothing was reserved, nothing to settle */
    } else {
        s->other++;
    }
}

/* A shopper answered BUSY (shed: nothing reserved) tries again with the same
 * key, as a checkout's retry would: after 250 ms, doubling, plus up to 100 ms
 * of jitter, at most --busy-retries times. */
static void retry_if_busy(int i, const hf_reply_t *rep, int64_t now)
{
    req_t *q = &reqs[i];
    bool unserved = q->outcome < 0 || q->outcome == HF_REPLY_BUSY; /* so far */
    if (!unserved || rep->outcome != HF_REPLY_BUSY || q->busy_retries >= busy_retries_global)
        return;
    static unsigned busy_seed = 11;
    int64_t pause_ms =
        (250LL << (q->busy_retries < 4 ? q->busy_retries : 4)) + rand_r(&busy_seed) % 101;
    q->busy_retries++;
    busy_resends++;
    heap_push((action_t){now + pause_ms, i, true});
}

static void on_reserve_reply(int i, const hf_reply_t *rep, int64_t now)
{
    req_t *q = &reqs[i];
    retry_if_busy(i, rep, now);
    if (q->outcome >= 0) { /* the duplicate's reply: must match the first */
        q->resend_unanswered = false;
        /* BUSY is no outcome: the request was not applied, either send may get
         * it. When the first send was shed and the duplicate served, the
         * duplicate's answer is the reserve's outcome. */
        if (q->outcome == HF_REPLY_BUSY && rep->outcome != HF_REPLY_BUSY) {
            q->outcome = (int8_t)rep->outcome;
            count_outcome(i, rep, now, now - q->intended_ms);
        } else if (q->outcome != HF_REPLY_BUSY && rep->outcome != HF_REPLY_BUSY) {
            duplicates_checked++;
            duplicate_mismatches += q->outcome != (int8_t)rep->outcome;
        }
        return;
    }
    q->outcome = (int8_t)rep->outcome;
    q->reply_ms = now;
    /* A checkout retry: the same request again, which must get the same answer. */
    static unsigned dup_seed = 7;
    if ((int)(rand_r(&dup_seed) % 100) < dup_pct_global)
        heap_push((action_t){now + 10, i, true});
    int64_t lat = now - q->intended_ms;
    lat_all[lat_count] = lat;
    lat_second[lat_count++] = second_of(q->intended_ms);
    sec(now)->replies++;
    count_outcome(i, rep, now, lat);
}

static void on_reply(const bench_opts_t *o, const hf_reply_t *rep, int reqs_count)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "hb-%u-", o->seed);
    if (strncmp(rep->reservation_id, prefix, (size_t)n) != 0)
        return;
    int i = atoi(rep->reservation_id + n);
    if (i < 0 || i >= reqs_count)
        return;
    int64_t now = hf_wall_ms();
    if (strncmp(rep->idempotency_key, "hbk-", 4) == 0) {
        on_reserve_reply(i, rep, now);
        return;
    }
    req_t *q = &reqs[i];
    if (rep->idempotency_key[2] == 'f') { /* the declined card: the hold waits for the next */
        declined_held += rep->outcome == HF_REPLY_HELD;
        declined_other += rep->outcome != HF_REPLY_HELD;
        return;
    }
    int kind = rep->idempotency_key[2] == 'c' ? 0 : 1; /* a cancellation releases */
    if (q->settled)
        return;
    q->settled = true;
    if (q->fate == 3) { /* not a commit of a live hold: counted apart */
        late_committed += rep->outcome == HF_REPLY_COMMITTED;
        late_expired += rep->outcome == HF_REPLY_EXPIRED;
        late_other += rep->outcome != HF_REPLY_COMMITTED && rep->outcome != HF_REPLY_EXPIRED;
        return;
    }
    if (settle_count[kind] < BENCH_SETTLE_SAMPLES_MAX)
        settle_lat[kind][settle_count[kind]++] = now - q->intended_ms;
    second_t *s = sec(now);
    if (rep->outcome == HF_REPLY_COMMITTED) {
        s->committed++;
        doorbuster_units_committed += q->doorbuster;
    } else if (rep->outcome == HF_REPLY_RELEASED)
        s->released++;
}

/* Follows every partition of topic from its end as of now: a run counts the
 * signals, availability and expiries of its own window only (each check is
 * also bounded by bench_start_ms, which lies after the warm-up). Read from the
 * beginning, a big catalog's side topics made the measurement measure the bench:
 * at 100M pairs hfbench decoded the seed's history at 0.4-0.55 cores and the
 * broker read 369 MiB from disk to serve it, during the 15 s load. */
static int follow_from_now(kafka_reader_t *rd, const char *topic, char *errstr, size_t errstr_size)
{
    static int64_t ends[HF_PARTITIONS_MAX];
    for (size_t p = 0; p < HF_PARTITIONS_MAX; p++)
        ends[p] = KAFKA_OFFSET_END;
    int32_t parts = 0;
    int err = kafka_reader_follow_from(rd, topic, ends, HF_PARTITIONS_MAX, 10000, &parts, errstr,
                                       errstr_size);
    if (!err && parts > HF_PARTITIONS_MAX) {
        snprintf(errstr, errstr_size, "%s has %d partitions, hfbench follows at most %d", topic,
                 (int)parts, HF_PARTITIONS_MAX);
        return HF_ERR_LIMIT;
    }
    return err;
}

/* A signal or ledger record (expiries) seen on the side topics. */
static void on_side_record(const kafka_msg_t *m)
{
    static hf_record_t rec;
    char errstr[128];
    if (!m->value || codec_decode(m->value, m->value_len, &rec, errstr, sizeof errstr))
        return;
    if (rec.type == HF_REC_SIGNAL && rec.u.signal.emitted_at_ms >= bench_start_ms) {
        sec(hf_wall_ms())->signals++;
        if (strcmp(rec.u.signal.sku, DOORBUSTER) == 0 && rec.u.signal.kind == HF_SIGNAL_SOLD_OUT)
            doorbuster_sold_out_ms = rec.u.signal.emitted_at_ms;
    } else if (rec.type == HF_REC_AVAILABILITY && strcmp(rec.u.availability.sku, DOORBUSTER) == 0 &&
               rec.u.availability.updated_at_ms >= bench_start_ms) {
        second_t *s = sec(hf_wall_ms());
        s->doorbuster_available = rec.u.availability.total;
        s->doorbuster_in_stock = rec.u.availability.in_stock;
    } else if (rec.type == HF_REC_LEDGER_EVENT && rec.u.ledger_event.kind == HF_LEDGER_EXPIRED &&
               strncmp(rec.u.ledger_event.reservation_id, run_prefix, strlen(run_prefix)) == 0) {
        expired_seen++;
        int64_t lag_ms = rec.u.ledger_event.at_ms - rec.u.ledger_event.expires_at_ms;
        second_t *s = sec(hf_wall_ms());
        if (s->expired++ == 0 || lag_ms > s->expiry_lag_max_ms)
            s->expiry_lag_max_ms = lag_ms;
        if (expiry_lag_count < expiry_lag_cap)
            expiry_lag[expiry_lag_count++] = lag_ms;
    }
}

/* ---- reporting */

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t pctl(int64_t *v, size_t n, double p)
{
    if (n == 0)
        return -1;
    qsort(v, n, sizeof *v, cmp64);
    size_t i = (size_t)(p * (double)n);
    return v[i >= n ? n - 1 : i];
}

/* p99 of the reserves intended in second s that were answered so far, for the
 * progress line printed once s is over. An answer comes after its send, so the
 * latencies of second s were all recorded at or after the moment s began
 * (first_lat_of_second[s]): only those are scanned, not the whole run. */
static size_t first_lat_of_second[BENCH_SECONDS_MAX + 120];
static int64_t *p99_tmp; /* lat_count entries at most */

static int64_t second_p99(int s)
{
    size_t n = 0;
    for (size_t i = first_lat_of_second[s]; i < lat_count; i++)
        if (lat_second[i] == s)
            p99_tmp[n++] = lat_all[i];
    return pctl(p99_tmp, n, 0.99);
}

/* Every second's reserve p99 at the end of the run, in one pass: the latencies
 * grouped by their second (a counting sort), each group sorted once. out[s] for
 * s < seconds; -1 for a second without answers. */
static void seconds_p99(int64_t *out, int seconds)
{
    size_t *start = calloc((size_t)seconds + 1, sizeof *start);
    hf_assert(start);
    for (size_t i = 0; i < lat_count; i++)
        if (lat_second[i] >= 0 && lat_second[i] < seconds)
            start[lat_second[i] + 1]++;
    for (int s = 0; s < seconds; s++)
        start[s + 1] += start[s];
    size_t *fill = calloc((size_t)seconds, sizeof *fill);
    hf_assert(fill);
    for (size_t i = 0; i < lat_count; i++) {
        int s = lat_second[i];
        if (s >= 0 && s < seconds)
            p99_tmp[start[s] + fill[s]++] = lat_all[i];
    }
    for (int s = 0; s < seconds; s++)
        out[s] = pctl(p99_tmp + start[s], start[s + 1] - start[s], 0.99);
    free(fill);
    free(start);
}

static void progress_line(int s)
{
    const second_t *x = &series[s];
    printf("  t=%3ds  sent %5u  replies %5u  reserve p99 %5lld ms  held %5u  committed %5u  "
           "released %5u  rejected %5u  expired(total) %5zu  signals %u\n",
           s, x->sent, x->replies, (long long)second_p99(s), x->held, x->committed, x->released,
           x->rejected_insufficient + x->rejected_invalid, expired_seen, x->signals);
    fflush(stdout);
}

static json_t *summary_json(const bench_opts_t *o, int reqs_count)
{
    int64_t *tmp = p99_tmp; /* sorted here; the per-second p99 fill it again */
    memcpy(tmp, lat_all, lat_count * sizeof *tmp);
    size_t held = 0, rejected = 0, missing = 0, busy = 0;
    for (int i = 0; i < reqs_count; i++) {
        held += reqs[i].outcome == HF_REPLY_HELD;
        busy += reqs[i].outcome == HF_REPLY_BUSY;
        rejected += reqs[i].outcome == HF_REPLY_REJECTED_INSUFFICIENT;
        missing += reqs[i].outcome < 0;
    }
    json_t *j = json_pack(
        "{s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}, "
        "s:{s:I, s:I}, s:I, s:I, s:I}",
        "scenario", o->scenario, "rate", o->rate, "seconds", o->seconds, "skus", o->skus,
        "reserves", (json_int_t)reqs_count, "held", (json_int_t)held, "rejected_insufficient",
        (json_int_t)rejected, "without_reply", (json_int_t)missing, "reserve_ms", "p50",
        (json_int_t)pctl(tmp, lat_count, 0.50), "p99", (json_int_t)pctl(tmp, lat_count, 0.99),
        "p999", (json_int_t)pctl(tmp, lat_count, 0.999), "max",
        (json_int_t)pctl(tmp, lat_count, 1.0), "commit_ms", "p50",
        (json_int_t)pctl(settle_lat[0], settle_count[0], 0.50), "p99",
        (json_int_t)pctl(settle_lat[0], settle_count[0], 0.99), "release_ms", "p50",
        (json_int_t)pctl(settle_lat[1], settle_count[1], 0.50), "p99",
        (json_int_t)pctl(settle_lat[1], settle_count[1], 0.99), "expired_seen",
        (json_int_t)expired_seen, "duplicates_checked", (json_int_t)duplicates_checked,
        "duplicate_mismatches", (json_int_t)duplicate_mismatches);
    /* The tails the pipeline bench reports, and how many reserves were answered
     * within a second (overload must be answered, not queued). */
    size_t within_1s = 0;
    for (size_t i = 0; i < lat_count; i++)
        within_1s += lat_all[i] <= 1000;
    json_object_set_new(j, "busy", json_integer((json_int_t)busy));
    json_object_set_new(j, "busy_resends", json_integer((json_int_t)busy_resends));
    json_object_set_new(json_object_get(j, "reserve_ms"), "answered_within_1000ms",
                        json_integer((json_int_t)within_1s));
    json_object_set_new(json_object_get(j, "commit_ms"), "p999",
                        json_integer(pctl(settle_lat[0], settle_count[0], 0.999)));
    json_object_set_new(json_object_get(j, "release_ms"), "p999",
                        json_integer(pctl(settle_lat[1], settle_count[1], 0.999)));
    json_object_set_new(j, "expiry_lag_ms",
                        json_pack("{s:I, s:I, s:I, s:I}", "count", (json_int_t)expiry_lag_count,
                                  "p50", (json_int_t)pctl(expiry_lag, expiry_lag_count, 0.50),
                                  "p99", (json_int_t)pctl(expiry_lag, expiry_lag_count, 0.99),
                                  "max", (json_int_t)pctl(expiry_lag, expiry_lag_count, 1.0)));
    json_object_set_new(
        j, "payment_events",
        json_pack("{s:I, s:I, s:I, s:I}", "declined_sent", (json_int_t)declined_sent,
                  "declined_held", (json_int_t)declined_held, "declined_other",
                  (json_int_t)declined_other, "canceled_sent", (json_int_t)canceled_sent));
    json_object_set_new(j, "late_payments",
                        json_pack("{s:I, s:I, s:I, s:I}", "sent", (json_int_t)late_sent,
                                  "committed", (json_int_t)late_committed, "expired",
                                  (json_int_t)late_expired, "other", (json_int_t)late_other));
    if (strcmp(o->scenario, "flash-sale") == 0) {
        /* Units no shopper was left to take: abandoned (released) after the
         * last doorbuster shopper had been answered. A settle's send time
         * replaces its reserve's intended time. */
        int64_t after_demand = 0;
        for (int i = 0; i < reqs_count; i++)
            after_demand += reqs[i].doorbuster && reqs[i].fate == 1 &&
                            reqs[i].outcome == HF_REPLY_HELD &&
                            reqs[i].intended_ms > doorbuster_last_answer_ms;
        json_object_set_new(
            j, "doorbuster",
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "stock",
                      (json_int_t)o->doorbuster_stock, "released_after_demand",
                      (json_int_t)after_demand, "held_replies", (json_int_t)doorbuster_units_held,
                      "units_committed", (json_int_t)doorbuster_units_committed, "oversold",
                      (json_int_t)(doorbuster_units_committed > o->doorbuster_stock
                                       ? doorbuster_units_committed - o->doorbuster_stock
                                       : 0),
                      "rejection_p99_ms",
                      (json_int_t)pctl(doorbuster_reject_lat, doorbuster_reject_count, 0.99),
                      "sold_out_signal_after_last_hold_ms",
                      (json_int_t)(doorbuster_sold_out_ms && doorbuster_last_hold_ms
                                       ? doorbuster_sold_out_ms - doorbuster_last_hold_ms
                                       : -1)));
    }
    return j;
}

static void write_report(const bench_opts_t *o, json_t *summary, int seconds_seen)
{
    if (!o->report)
        return;
    json_t *rows = json_array();
    int64_t door_available = -1;
    int door_in_stock = -1;
    int64_t *p99 = calloc((size_t)seconds_seen + 1, sizeof *p99);
    hf_assert(p99);
    seconds_p99(p99, seconds_seen);
    for (int s = 0; s < seconds_seen; s++) {
        const second_t *x = &series[s];
        if (x->doorbuster_in_stock >= 0) { /* carry the last value into quiet seconds */
            door_available = x->doorbuster_available;
            door_in_stock = x->doorbuster_in_stock;
        }
        json_t *row = json_pack("{s:i, s:i, s:i, s:I, s:i, s:i, s:i, s:i, s:i, s:I, s:i}", "t", s,
                                "sent", (int)x->sent, "replies", (int)x->replies, "reserve_p99_ms",
                                (json_int_t)p99[s], "held", (int)x->held, "committed",
                                (int)x->committed, "released", (int)x->released, "rejected",
                                (int)(x->rejected_insufficient + x->rejected_invalid), "signals",
                                (int)x->signals, "doorbuster_available", (json_int_t)door_available,
                                "doorbuster_in_stock", door_in_stock);
        json_object_set_new(row, "expired", json_integer(x->expired));
        json_object_set_new(row, "expiry_lag_max_ms",
                            json_integer(x->expired ? x->expiry_lag_max_ms : -1));
        json_array_append_new(rows, row);
    }
    free(p99);
    json_t *root = json_pack("{s:O, s:o}", "summary", summary, "per_second", rows);
    if (json_dump_file(root, o->report, JSON_INDENT(2)) != 0)
        fprintf(stderr, "hfbench: cannot write %s\n", o->report);
    json_decref(root);
}

/* ---- run */

typedef struct {
    hf_client_t *c;
    kafka_reader_t *signals, *ledger, *avail;
    int reqs_count;
    int next_req;
    unsigned seed;
} run_t;

static int send_reserve(const bench_opts_t *o, run_t *r, int i)
{
    char errstr[256];
    hf_record_t rec = make_reserve(o, i, &r->seed);
    int err = client_send_async(r->c, &rec, errstr, sizeof errstr);
    if (err)
        fprintf(stderr, "hfbench: send: %s\n", errstr);
    return err;
}

/* Sends what is due: reserves in order of intended time, then delayed actions. */
static int send_due(const bench_opts_t *o, run_t *r, int64_t now)
{
    char errstr[256];
    while (r->next_req < r->reqs_count && reqs[r->next_req].intended_ms <= now) {
        int i = r->next_req++;
        if (send_reserve(o, r, i))
            return HF_ERR_KAFKA;
        sec(now)->sent++;
    }
    while (pending_count && pending[0].due_ms <= now) {
        action_t a = heap_pop();
        if (a.duplicate) {
            if (send_reserve(o, r, a.req))
                return HF_ERR_KAFKA;
            reqs[a.req].resend_unanswered = true;
            continue;
        }
        hf_record_t s = make_settle(o, a.req);
        late_sent += reqs[a.req].fate == 3;
        declined_sent += s.type == HF_REC_PAYMENT_EVENT && s.u.payment_event.event == HF_PAY_FAILED;
        canceled_sent +=
            s.type == HF_REC_PAYMENT_EVENT && s.u.payment_event.event == HF_PAY_CANCELED;
        reqs[a.req].settles_sent++;
        reqs[a.req].intended_ms = now; /* settle latency from its own send */
        if (client_send_async(r->c, &s, errstr, sizeof errstr))
            return HF_ERR_KAFKA;
    }
    /* A flush that times out (broker away) is not fatal: librdkafka keeps
     * retrying, and latency from the intended send time shows the stall. */
    if (client_flush(r->c, 10000, errstr, sizeof errstr))
        fprintf(stderr, "hfbench: flush: %s (still retrying)\n", errstr);
    return HF_OK;
}

static void poll_side(kafka_reader_t *rd)
{
    char errstr[128];
    kafka_msg_t m = {0};
    for (int n = 0; n < 1000 && kafka_reader_poll(rd, 0, &m, errstr, sizeof errstr) > 0; n++) {
        if (m.handle) {
            on_side_record(&m);
            kafka_msg_release(&m);
        }
        memset(&m, 0, sizeof m);
    }
}

static void poll_replies(const bench_opts_t *o, run_t *r, int timeout_ms)
{
    char errstr[256];
    hf_reply_t rep;
    int rc = client_poll(r->c, timeout_ms, &rep, errstr, sizeof errstr);
    for (int n = 0; rc == 1 && n < 10000; n++) {
        on_reply(o, &rep, r->reqs_count);
        rc = client_poll(r->c, 0, &rep, errstr, sizeof errstr);
    }
}

/* True while an action is still due, a reserve has no reply, or the re-send of
 * a reserve first answered BUSY has none (it may yet be HELD, and then it is
 * settled like any other). */
static bool answers_awaited(int reqs_count)
{
    if (pending_count > 0)
        return true;
    for (int i = 0; i < reqs_count; i++)
        if (reqs[i].outcome < 0 || (reqs[i].resend_unanswered && reqs[i].outcome == HF_REPLY_BUSY))
            return true;
    return false;
}

/* Intended send times: the steady stream, plus for a flash sale a burst on the
 * doorbuster of burst_factor x its stock within two seconds, from t = 2 s,
 * then door_tail_rate doorbuster shoppers/s from t = 4 s to the end (the
 * latecomers, who take what the rush's shoppers abandon). */
static int plan(const bench_opts_t *o, unsigned *seed)
{
    int steady = o->rate * o->seconds;
    bool flash = strcmp(o->scenario, "flash-sale") == 0;
    int burst = flash ? (int)(o->doorbuster_stock * o->burst_factor) : 0;
    int tail_s = o->seconds > 4 ? o->seconds - 4 : 0;
    int tail = flash ? o->door_tail_rate * tail_s : 0;
    int n = steady + burst + tail;
    if (n > BENCH_REQS_MAX)
        return -1;
    reqs = calloc((size_t)n, sizeof *reqs);
    lat_all = calloc((size_t)n * 2, sizeof *lat_all);
    lat_second = calloc((size_t)n * 2, sizeof *lat_second);
    p99_tmp = calloc((size_t)n, sizeof *p99_tmp); /* a latency per reserve at most */
    expiry_lag = calloc((size_t)n, sizeof *expiry_lag);
    expiry_lag_cap = (size_t)n;
    if (!reqs || !lat_all || !lat_second || !p99_tmp || !expiry_lag)
        return -1;
    int si = 0, bi = 0;
    for (int i = 0; i < n; i++) {
        int64_t ts = si < steady ? (int64_t)si * 1000 / o->rate : INT64_MAX;
        int64_t tb = bi < burst          ? 2000 + (int64_t)bi * 2000 / burst
                     : bi < burst + tail ? 4000 + (int64_t)(bi - burst) * 1000 / o->door_tail_rate
                                         : INT64_MAX;
        bool door = tb < ts;
        reqs[i].intended_ms = bench_start_ms + (door ? tb : ts);
        reqs[i].doorbuster = door;
        reqs[i].outcome = -1;
        /* A shopper who got a doorbuster nearly always buys it. */
        int f = (int)(rand_r(seed) % 100), commit = door ? 90 : o->commit_pct,
            abandon = door ? 10 : o->abandon_pct, late = door ? 0 : o->late_pct,
            declined = door ? 0 : o->declined_pct, canceled = door ? 0 : o->canceled_pct;
        int settled = commit + abandon + late;
        reqs[i].fate = f < commit                          ? 0
                       : f < commit + abandon              ? 1
                       : f < settled                       ? 3
                       : f < settled + declined            ? 4
                       : f < settled + declined + canceled ? 5
                                                           : 2;
        door ? bi++ : si++;
    }
    return n;
}

#define WARM_UP_RESERVES 20

/* Sends WARM_UP_RESERVES reserves of one unit (ids "hw-"), waits for their
 * replies, and releases the held ones. */
static int warm_up(const bench_opts_t *o, run_t *r)
{
    char errstr[256];
    static hf_record_t rec;
    int answered = 0;
    for (int i = 0; i < WARM_UP_RESERVES; i++) {
        hf_reserve_t *q = &hf_record_reset(&rec, HF_REC_RESERVE)->u.reserve;
        snprintf(q->reservation_id, sizeof q->reservation_id, "hw-%u-%d", o->seed, i);
        snprintf(q->idempotency_key, sizeof q->idempotency_key, "hwk-%u-%d", o->seed, i);
        q->lines_count = 1;
        snprintf(q->lines[0].sku, sizeof q->lines[0].sku, "SKU-%05d", i % o->skus);
        q->lines[0].qty = 1;
        q->ship_to = (hf_geo_t){40.7, -74.0};
        q->ttl_ms = 2000; /* left to expire: nothing to settle */
        if (client_send(r->c, &rec, errstr, sizeof errstr))
            return HF_ERR_KAFKA;
    }
    hf_reply_t rep;
    for (int64_t deadline = hf_wall_ms() + 60000;
         answered < WARM_UP_RESERVES && hf_wall_ms() < deadline;)
        if (client_poll(r->c, 200, &rep, errstr, sizeof errstr) == 1 &&
            strncmp(rep.reservation_id, "hw-", 3) == 0)
            answered++;
    if (answered < WARM_UP_RESERVES) {
        fprintf(stderr,
                "hfbench: warm-up: %d of %d reserves answered in 60 s; is holdfast "
                "running the gateway stage?\n",
                answered, WARM_UP_RESERVES);
        return HF_ERR_TIMEOUT;
    }
    return HF_OK;
}

static int run_bench(const bench_opts_t *o)
{
    char errstr[256];
    run_t r = {.seed = o->seed};
    dup_pct_global = o->dup_pct;
    busy_retries_global = o->busy_retries;
    ttl_ms_global = o->ttl_ms;
    snprintf(run_prefix, sizeof run_prefix, "hb-%u-", o->seed);
    bench_start_ms = hf_wall_ms() + 1000;
    int64_t planned_start = bench_start_ms;
    r.reqs_count = plan(o, &r.seed);
    if (r.reqs_count < 0) {
        fprintf(stderr, "hfbench: too many requests (at most %d)\n", BENCH_REQS_MAX);
        return 2;
    }
    kafka_conf_t kc = {o->bootstrap, "hfbench", NULL};
    if (client_new_partitioned(o->bootstrap, NULL, o->partitioner, &r.c, errstr, sizeof errstr) ||
        kafka_reader_new(&kc, &r.signals, errstr, sizeof errstr) ||
        kafka_reader_new(&kc, &r.ledger, errstr, sizeof errstr) ||
        follow_from_now(r.signals, topic_name(HF_T_SIGNALS), errstr, sizeof errstr) ||
        follow_from_now(r.ledger, topic_name(HF_T_LEDGER), errstr, sizeof errstr) ||
        kafka_reader_new(&kc, &r.avail, errstr, sizeof errstr) ||
        follow_from_now(r.avail, topic_name(HF_T_AVAILABILITY), errstr, sizeof errstr)) {
        fprintf(stderr, "hfbench: %s (is holdfast running? make kafka-up?)\n", errstr);
        return 1;
    }
    /* Warm-up, not measured: connections, metadata and the gateway's routing view
     * are paid for by a few reserves (released at once) before the clock starts. */
    if (warm_up(o, &r) != HF_OK)
        return 1;
    bench_start_ms = hf_wall_ms() + 500;
    for (int i = 0; i < r.reqs_count; i++)
        reqs[i].intended_ms += bench_start_ms - planned_start;
    for (size_t i = 0; i < sizeof series / sizeof series[0]; i++)
        series[i].doorbuster_in_stock = -1;
    printf("hfbench %s: %d reserves/s for %d s over %d SKUs (Zipf s=%.2f)%s; fates: %d%% commit, "
           "%d%% abandon, %d%% pay after expiry, %d%% a card declined then another paid, %d%% "
           "payment canceled, rest expire (ttl %d ms); %d%% duplicates\n",
           o->scenario, o->rate, o->seconds, o->skus, o->zipf_s,
           strcmp(o->scenario, "flash-sale") == 0 ? ", plus a doorbuster burst" : "", o->commit_pct,
           o->abandon_pct, o->late_pct, o->declined_pct, o->canceled_pct, o->ttl_ms, o->dup_pct);
    /* Past the last send: 3 s for its answer, then (unless --leave-open) the TTL and
     * 6 s for the expiries of the holds left to lapse. */
    int64_t end =
        reqs[r.reqs_count - 1].intended_ms + 3000 + (o->leave_open ? 0 : o->ttl_ms + 6000);
    int printed = 0, marked = 0;
    while (hf_wall_ms() < end ||
           (hf_wall_ms() < end + BENCH_DRAIN_MAX_MS && answers_awaited(r.reqs_count))) {
        int64_t now = hf_wall_ms();
        for (; marked <= second_of(now) && marked < BENCH_SECONDS_MAX + 120; marked++)
            first_lat_of_second[marked] = lat_count;
        if (send_due(o, &r, now))
            return 1;
        poll_replies(o, &r, 5);
        poll_side(r.signals);
        poll_side(r.ledger);
        poll_side(r.avail);
        for (; printed < second_of(now) && printed < BENCH_SECONDS_MAX; printed++)
            if (printed >= 0)
                progress_line(printed);
    }
    json_t *summary = summary_json(o, r.reqs_count);
    char *text = json_dumps(summary, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    write_report(o, summary, printed);
    json_decref(summary);
    client_destroy(r.c);
    kafka_reader_destroy(r.signals);
    kafka_reader_destroy(r.ledger);
    kafka_reader_destroy(r.avail);
    /* Committed units can never exceed the stock (commits are permanent), so this
     * client-side check is sound; the full proof is `hfctl reconcile`. */
    return duplicate_mismatches || doorbuster_units_committed > o->doorbuster_stock ? 3 : 0;
}

/* ---- seed */

/* The warehouses file's ids by name: open addressing in twice as many slots as
 * there can be warehouses, so a lookup of the routing view's ids stays short. */
#define WH_SLOTS 128
static int8_t wh_slot[WH_SLOTS]; /* index into wh_ids, -1 for an empty slot */

static uint32_t wh_hash(const char *id)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

static int wh_find(const char *id)
{
    for (uint32_t h = wh_hash(id) % WH_SLOTS, probes = 0; probes < WH_SLOTS;
         h = (h + 1) % WH_SLOTS, probes++) {
        if (wh_slot[h] < 0)
            return -1;
        if (strcmp(wh_ids[wh_slot[h]], id) == 0)
            return wh_slot[h];
    }
    return -1;
}

static int load_warehouses(const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    json_t *arr = json_object_get(root, "warehouses");
    memset(wh_slot, -1, sizeof wh_slot);
    int err = HF_OK;
    for (size_t i = 0; i < json_array_size(arr) && wh_count < BENCH_WAREHOUSES_MAX && !err; i++) {
        const char *id = json_string_value(json_object_get(json_array_get(arr, i), "id"));
        if (!id || strlen(id) > HF_WAREHOUSE_LEN_MAX)
            continue;
        if (wh_find(id) >= 0) {
            fprintf(stderr, "hfbench: warehouse '%s' is listed twice in %s: remove one\n", id,
                    path);
            err = HF_ERR_CONFIG;
            break;
        }
        uint32_t h = wh_hash(id) % WH_SLOTS;
        while (wh_slot[h] >= 0)
            h = (h + 1) % WH_SLOTS;
        wh_slot[h] = (int8_t)wh_count;
        snprintf(wh_ids[wh_count++], sizeof wh_ids[0], "%s", id);
    }
    json_decref(root);
    if (!err && wh_count == 0) {
        fprintf(stderr, "hfbench: no warehouses in %s: %s\n", path, root ? "" : jerr.text);
        err = HF_ERR_CONFIG;
    }
    return err;
}

#define HFBENCH_SEQ_EPOCH_S 1704067200LL /* 2024-01-01T00:00:00Z */

static int feed(kafka_producer_t *kp, const char *wh, const char *sku, int64_t qty, int64_t seq)
{
    char errstr[256], key[HF_WAREHOUSE_LEN_MAX + HF_SKU_LEN_MAX + 2];
    static hf_record_t rec;
    hf_stock_feed_t *f = &hf_record_reset(&rec, HF_REC_STOCK_FEED)->u.stock_feed;
    snprintf(f->warehouse_id, sizeof f->warehouse_id, "%s", wh);
    snprintf(f->sku, sizeof f->sku, "%s", sku);
    f->kind = HF_FEED_RECEIVE;
    f->qty = qty;
    f->feed_seq = seq;
    f->issued_at_ms = hf_wall_ms();
    uint8_t buf[512];
    size_t len = 0;
    snprintf(key, sizeof key, "%s|%s", wh, sku);
    int err = codec_encode(&rec, buf, sizeof buf, &len, errstr, sizeof errstr);
    if (!err)
        err = kafka_produce(kp, topic_name(HF_T_STOCK_FEED), -1, key, strlen(key), buf, len, NULL,
                            0, NULL, errstr, sizeof errstr);
    if (err)
        fprintf(stderr, "hfbench: feed: %s\n", errstr);
    return err;
}

/* -- the plan: what seed feeds and what the routing view must then show.
 *
 * Row r < skus is SKU r (SKU-%05d), row skus the doorbuster; row r's pairs are
 * first[r] .. first[r + 1] - 1, each a distinct warehouse of the row. Memory: 17
 * bytes a pair (warehouse 1, want 8, seen 8) and 4 a SKU; 100M pairs of the
 * default zipf catalog (~18M SKUs) take ~1.8 GB, 20M uniform pairs (4M SKUs)
 * ~0.36 GB; BENCH_PAIRS_MAX bounds it at ~3.5 GB. The feeds in flight are
 * bounded by the producer's queue (queue.buffering.max.messages). */
#define BENCH_PAIRS_MAX            200000000
#define SEED_DOORBUSTER_WAREHOUSES 5
#define SEED_VIEW_PARTITIONS_MAX   1024
#define SEED_VIEW_POLL_MS          250
/* zipf quantities: lognormal with this sigma, mean --stock, within [1, 20 x --stock] */
#define SEED_QTY_SIGMA             1.0
#define SEED_QTY_SPREAD_MAX        20
/* Independent random streams of a zipf plan, so each is fixed by --seed alone. */
#define SEED_STREAM_COUNTS         1
#define SEED_STREAM_PICKS          2
#define SEED_STREAM_QTYS           3

_Static_assert(BENCH_PAIRS_MAX < UINT32_MAX, "first[] holds pair indexes in 32 bits");
_Static_assert(BENCH_WAREHOUSES_MAX <= UINT8_MAX && BENCH_WAREHOUSES_MAX < WH_SLOTS,
               "a pair's warehouse is one byte; wh_slot has free slots");

typedef enum { SEED_CATALOG_UNIFORM, SEED_CATALOG_ZIPF } seed_catalog_t;

typedef struct {
    int rows;         /* SKUs and the doorbuster, the last row */
    size_t first_cap; /* entries allocated in first */
    uint32_t *first;  /* [rows + 1] */
    size_t pairs;     /* first[rows] */
    uint8_t *wh;      /* [pairs] index into wh_ids */
    int64_t *want;    /* [pairs] units fed; once armed, the available before + units fed */
    int64_t *seen;    /* [pairs] last available the routing view showed */
    bool armed;       /* want is final: applied counts the pairs with seen >= want */
    size_t applied;
    int32_t view_parts;                          /* 0 until the view was first read */
    int64_t view_next[SEED_VIEW_PARTITIONS_MAX]; /* where the next read of the view starts */
} seed_plan_t;

typedef struct {
    int skus, row_min, row_max, last_row; /* pairs per SKU; last_row: the last SKU's */
    size_t pairs;                         /* every pair, the doorbuster's included */
    int64_t units;                        /* the same */
    int64_t sku_units, qty_min, qty_max;  /* of the SKUs' pairs, the doorbuster's left out */
    uint64_t digest;                      /* FNV-1a of every row's warehouses and units */
} seed_stats_t;

static int plan_skus(const seed_plan_t *sp)
{
    return sp->rows - 1;
}

static int plan_row_len(const seed_plan_t *sp, int r)
{
    return (int)(sp->first[r + 1] - sp->first[r]);
}

static void plan_sku_name(const seed_plan_t *sp, int r, char *out, size_t out_size)
{
    if (r == plan_skus(sp))
        snprintf(out, out_size, "%s", DOORBUSTER);
    else
        snprintf(out, out_size, "SKU-%05d", r);
}

static int seed_row(const seed_plan_t *sp, const char *sku)
{
    if (strcmp(sku, DOORBUSTER) == 0)
        return plan_skus(sp);
    int n = 0, consumed = 0;
    if (sscanf(sku, "SKU-%d%n", &n, &consumed) != 1 || sku[consumed] || n < 0 || n >= plan_skus(sp))
        return -1;
    return n;
}

/* splitmix64: a small, fast generator whose sequence is the same on every platform. */
static uint64_t mix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t seed_stream(unsigned seed, unsigned stream)
{
    uint64_t state = ((uint64_t)seed << 8) | stream;
    return mix64(&state);
}

/* Uniform in (0, 1), never 0 or 1. */
static double unit_open(uint64_t *state)
{
    return ((double)(mix64(state) >> 11) + 0.5) / 9007199254740992.0;
}

/* cdf[k - 1] = P(count <= k) of a Zipf(s) count in [1, n]. */
static void zipf_count_cdf(double *cdf, int n, double s)
{
    double total = 0;
    for (int k = 1; k <= n; k++)
        total += pow(k, -s);
    double sum = 0;
    for (int k = 1; k <= n; k++) {
        sum += pow(k, -s);
        cdf[k - 1] = sum / total;
    }
    cdf[n - 1] = 1.0;
}

static int zipf_count(const double *cdf, int n, uint64_t *state)
{
    double u = unit_open(state);
    int lo = 0, hi = n - 1; /* the first k with u <= cdf[k] */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (u <= cdf[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo + 1;
}

/* Lognormal units with mean stock (sigma SEED_QTY_SIGMA), within [1, 20 x stock]. */
static int64_t zipf_qty(int64_t stock, uint64_t *state)
{
    double u1 = unit_open(state), u2 = unit_open(state);
    double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    double q = (double)stock * exp(SEED_QTY_SIGMA * z - SEED_QTY_SIGMA * SEED_QTY_SIGMA / 2.0);
    double hi = (double)stock * SEED_QTY_SPREAD_MAX;
    return llround(q < 1.0 ? 1.0 : q > hi ? hi : q);
}

/* Appends a row of count pairs; HF_ERR_CONFIG past BENCH_SKUS_MAX or BENCH_PAIRS_MAX. */
static int plan_push_row(seed_plan_t *sp, int count)
{
    hf_assert(count >= 1 && count <= BENCH_WAREHOUSES_MAX && sp->first);
    if (sp->rows > BENCH_SKUS_MAX || sp->first[sp->rows] + (uint32_t)count > BENCH_PAIRS_MAX) {
        fprintf(stderr,
                "hfbench seed: a plan holds at most %d SKUs and %d pairs (%d SKUs and %lu pairs "
                "planned so far): ask for fewer with --skus or --pairs\n",
                BENCH_SKUS_MAX, BENCH_PAIRS_MAX, sp->rows, (unsigned long)sp->first[sp->rows]);
        return HF_ERR_CONFIG;
    }
    if ((size_t)sp->rows + 2 > sp->first_cap) {
        size_t cap = 2 * sp->first_cap;
        uint32_t *grown = realloc(sp->first, cap * sizeof *grown);
        if (!grown)
            return HF_ERR_NOMEM;
        sp->first = grown;
        sp->first_cap = cap;
    }
    sp->first[sp->rows + 1] = sp->first[sp->rows] + (uint32_t)count;
    sp->rows++;
    return HF_OK;
}

/* Every row's pair count: --skus rows, or rows until --pairs pairs (the last SKU
 * cut to fit, so there are exactly --pairs), then the doorbuster's five. */
static int plan_counts(const bench_opts_t *o, seed_plan_t *sp)
{
    sp->first_cap = 4096;
    sp->first = malloc(sp->first_cap * sizeof *sp->first);
    if (!sp->first)
        return HF_ERR_NOMEM;
    sp->first[0] = 0;
    double cdf[BENCH_WAREHOUSES_MAX];
    zipf_count_cdf(cdf, wh_count, o->catalog_s);
    uint64_t counts = seed_stream(o->seed, SEED_STREAM_COUNTS);
    size_t target = o->pairs > 0 ? (size_t)o->pairs : SIZE_MAX, planned = 0;
    int rows_max = o->pairs > 0 ? BENCH_SKUS_MAX : o->skus, err = HF_OK;
    while (!err && planned < target && sp->rows < rows_max) {
        int n = o->catalog == SEED_CATALOG_ZIPF ? zipf_count(cdf, wh_count, &counts) : o->per_sku;
        if ((size_t)n > target - planned)
            n = (int)(target - planned);
        err = plan_push_row(sp, n);
        planned += (size_t)n;
    }
    if (!err && o->pairs > 0 && planned < target) {
        fprintf(stderr,
                "hfbench seed: %d SKUs hold only %zu of the %d pairs asked for: lower --pairs, "
                "or give a SKU more warehouses (a higher --per-sku, a lower --catalog-s)\n",
                BENCH_SKUS_MAX, planned, o->pairs);
        err = HF_ERR_CONFIG;
    }
    if (!err)
        err = plan_push_row(sp, SEED_DOORBUSTER_WAREHOUSES);
    if (!err)
        sp->pairs = sp->first[sp->rows];
    return err;
}

/* Each SKU's warehouses: the first of a fresh shuffle of all of them, so they
 * are distinct. The uniform catalog draws as it always has (rand_r from --seed:
 * the same plan for the same seed), --stock units each; zipf draws from its own
 * streams, units lognormal. */
static void plan_fill(const bench_opts_t *o, seed_plan_t *sp)
{
    const bool zipf = o->catalog == SEED_CATALOG_ZIPF;
    unsigned seed = o->seed;
    uint64_t picks = seed_stream(o->seed, SEED_STREAM_PICKS);
    uint64_t qtys = seed_stream(o->seed, SEED_STREAM_QTYS);
    const int whs = wh_count;
    int order[BENCH_WAREHOUSES_MAX];
    for (int r = 0; r < plan_skus(sp); r++) {
        int n = plan_row_len(sp, r);
        hf_assert(n >= 1 && n <= whs);                 /* distinct: seed_check_opts, zipf_count */
        for (int w = 0; w < BENCH_WAREHOUSES_MAX; w++) /* all: only [k, whs) is drawn from */
            order[w] = w;
        for (int k = 0; k < n; k++) {
            uint64_t draw = zipf ? mix64(&picks) : (uint64_t)rand_r(&seed);
            int pick = k + (int)(draw % (uint64_t)(whs - k));
            int t = order[k];
            order[k] = order[pick];
            order[pick] = t;
            sp->wh[sp->first[r] + k] = (uint8_t)order[k];
            sp->want[sp->first[r] + k] = zipf ? zipf_qty(o->stock, &qtys) : o->stock;
        }
    }
}

/* The doorbuster's stock split over the first five warehouses. */
static void plan_fill_doorbuster(const bench_opts_t *o, seed_plan_t *sp)
{
    int r = plan_skus(sp);
    hf_assert(plan_row_len(sp, r) == SEED_DOORBUSTER_WAREHOUSES);
    for (int k = 0; k < SEED_DOORBUSTER_WAREHOUSES; k++) {
        sp->wh[sp->first[r] + k] = (uint8_t)k;
        sp->want[sp->first[r] + k] = o->doorbuster_stock / SEED_DOORBUSTER_WAREHOUSES +
                                     (k < o->doorbuster_stock % SEED_DOORBUSTER_WAREHOUSES);
    }
}

static int seed_plan(const bench_opts_t *o, seed_plan_t *sp)
{
    int err = plan_counts(o, sp);
    if (err)
        return err;
    sp->wh = malloc(sp->pairs * sizeof *sp->wh);
    sp->want = malloc(sp->pairs * sizeof *sp->want);
    sp->seen = calloc(sp->pairs, sizeof *sp->seen);
    if (!sp->wh || !sp->want || !sp->seen) {
        fprintf(stderr, "hfbench seed: no memory for a plan of %zu pairs (17 bytes each)\n",
                sp->pairs);
        return HF_ERR_NOMEM;
    }
    plan_fill(o, sp);
    plan_fill_doorbuster(o, sp);
    return HF_OK;
}

static void seed_plan_free(seed_plan_t *sp)
{
    free(sp->first);
    free(sp->wh);
    free(sp->want);
    free(sp->seen);
}

static uint64_t fnv64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        h = (h ^ (v & 0xff)) * 0x100000001b3ULL;
    return h;
}

/* The plan's size and shape (before it is armed: want is still the units fed). */
static seed_stats_t plan_stats(const seed_plan_t *sp)
{
    hf_assert(!sp->armed);
    seed_stats_t st = {.skus = plan_skus(sp),
                       .pairs = sp->pairs,
                       .row_min = INT32_MAX,
                       .qty_min = INT64_MAX,
                       .digest = 0xcbf29ce484222325ULL};
    for (int r = 0; r < sp->rows; r++) {
        int n = plan_row_len(sp, r);
        bool sku = r < plan_skus(sp);
        if (sku) {
            st.row_min = n < st.row_min ? n : st.row_min;
            st.row_max = n > st.row_max ? n : st.row_max;
            st.last_row = n;
        }
        st.digest = fnv64(st.digest, (uint64_t)n);
        for (uint32_t i = sp->first[r]; i < sp->first[r + 1]; i++) {
            int64_t q = sp->want[i];
            hf_assert(q >= 1);
            st.digest = fnv64(fnv64(st.digest, sp->wh[i]), (uint64_t)q);
            st.units += q;
            if (sku) {
                st.sku_units += q;
                st.qty_min = q < st.qty_min ? q : st.qty_min;
                st.qty_max = q > st.qty_max ? q : st.qty_max;
            }
        }
    }
    hf_assert(st.skus >= 1);
    return st;
}

static void print_plan(const bench_opts_t *o, const seed_stats_t *st)
{
    size_t catalog_pairs = st->pairs - SEED_DOORBUSTER_WAREHOUSES;
    printf("seed plan: catalog %s", o->catalog == SEED_CATALOG_ZIPF ? "zipf" : "uniform");
    if (o->catalog == SEED_CATALOG_ZIPF)
        printf(" (s %.2f)", o->catalog_s);
    printf(", seed %u: %d SKUs, %zu pairs (%d..%d warehouses a SKU, mean %.2f), %lld units "
           "(%lld..%lld a pair), DOORBUSTER %lld units over %d warehouses; in all %zu pairs, "
           "%lld units; digest %016llx\n",
           o->seed, st->skus, catalog_pairs, st->row_min, st->row_max,
           (double)catalog_pairs / st->skus, (long long)st->sku_units, (long long)st->qty_min,
           (long long)st->qty_max, (long long)o->doorbuster_stock, SEED_DOORBUSTER_WAREHOUSES,
           st->pairs, (long long)st->units, (unsigned long long)st->digest);
    fflush(stdout);
}

/* Every pair as "SKU<TAB>warehouse<TAB>units" (--plan-out), for checks and diffs. */
static int write_plan(const seed_plan_t *sp, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "hfbench seed: --plan-out %s: %s\n", path, strerror(errno));
        return HF_ERR_CONFIG;
    }
    for (int r = 0; r < sp->rows; r++) {
        char sku[HF_SKU_LEN_MAX + 1];
        plan_sku_name(sp, r, sku, sizeof sku);
        for (uint32_t i = sp->first[r]; i < sp->first[r + 1]; i++)
            fprintf(f, "%s\t%s\t%lld\n", sku, wh_ids[sp->wh[i]], (long long)sp->want[i]);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "hfbench seed: writing --plan-out %s: %s\n", path, strerror(errno));
        return HF_ERR_CONFIG;
    }
    return HF_OK;
}

/* -- progress on stderr: redrawn in place at most every PROGRESS_TTY_MS on a
 * terminal, one plain line every PROGRESS_LOG_MS otherwise (logs are files). */
#define PROGRESS_TTY_MS 250
#define PROGRESS_LOG_MS 5000

typedef struct {
    const char *phase;
    size_t total;
    int64_t start_ms, drawn_ms;
    bool tty;
} progress_t;

static void progress_start(progress_t *p, const char *phase, size_t total)
{
    *p = (progress_t){.phase = phase,
                      .total = total,
                      .start_ms = hf_mono_ms(),
                      .tty = isatty(fileno(stderr)) == 1};
    p->drawn_ms = p->start_ms;
}

static void format_eta(char *out, size_t out_size, double eta_s)
{
    if (!(eta_s >= 0) || eta_s > 359999)
        snprintf(out, out_size, "--:--");
    else if (eta_s >= 3600)
        snprintf(out, out_size, "%d:%02d:%02d", (int)eta_s / 3600, (int)eta_s / 60 % 60,
                 (int)eta_s % 60);
    else
        snprintf(out, out_size, "%d:%02d", (int)eta_s / 60, (int)eta_s % 60);
}

/* done of total pairs so far; last draws the final state and ends the line. */
static void progress_draw(progress_t *p, size_t done, bool last)
{
    int64_t now_ms = hf_mono_ms();
    if (!last && now_ms - p->drawn_ms < (p->tty ? PROGRESS_TTY_MS : PROGRESS_LOG_MS))
        return;
    p->drawn_ms = now_ms;
    double elapsed_s = (double)(now_ms - p->start_ms) / 1000.0;
    double rate = elapsed_s > 0 ? (double)done / elapsed_s : 0;
    char eta[32];
    format_eta(eta, sizeof eta, rate > 0 ? (double)(p->total - done) / rate : -1);
    fprintf(stderr, "%sseed %-7s %zu/%zu pairs %5.1f%%  %.0f pairs/s  ETA %s  (%.0f s)%s",
            p->tty ? "\r" : "", p->phase, done, p->total,
            p->total ? 100.0 * (double)done / (double)p->total : 100.0, rate, eta, elapsed_s,
            p->tty ? "\033[K" : "\n");
    if (p->tty && last)
        fputc('\n', stderr);
    fflush(stderr);
}

/* -- the routing view */

/* Sets pair i's last available, counting it applied once armed. */
static void seed_note(seed_plan_t *sp, size_t i, int64_t available)
{
    if (sp->armed) {
        bool was = sp->seen[i] >= sp->want[i], now = available >= sp->want[i];
        if (now && !was)
            sp->applied++;
        else if (was && !now)
            sp->applied--;
    }
    sp->seen[i] = available;
}

/* Records the last available of every planned pair of one Availability. */
static int seed_observe(void *opaque, const kafka_msg_t *m)
{
    seed_plan_t *sp = opaque;
    static hf_record_t rec;
    char errstr[128];
    if (!m->value || codec_decode(m->value, m->value_len, &rec, errstr, sizeof errstr) ||
        rec.type != HF_REC_AVAILABILITY)
        return HF_OK;
    const hf_availability_t *a = &rec.u.availability;
    int r = seed_row(sp, a->sku);
    if (r < 0)
        return HF_OK;
    int64_t available[BENCH_WAREHOUSES_MAX] = {0}; /* a warehouse the record leaves out has none */
    for (int32_t i = 0; i < a->warehouses_count; i++) {
        int w = wh_find(a->warehouses[i].warehouse_id);
        if (w >= 0)
            available[w] = a->warehouses[i].available;
    }
    for (uint32_t i = sp->first[r]; i < sp->first[r + 1]; i++)
        seed_note(sp, i, available[sp->wh[i]]);
    return HF_OK;
}

/* Reads what the availability topic gained since the last call (all of it at
 * the first): every record is read once, so a poll costs only what is new. */
static int seed_read_view(kafka_reader_t *rd, seed_plan_t *sp, char *errstr, size_t errstr_size)
{
    const char *topic = topic_name(HF_T_AVAILABILITY);
    if (sp->view_parts == 0) {
        int err = kafka_partition_count(rd, topic, 10000, &sp->view_parts, errstr, errstr_size);
        if (!err && (sp->view_parts < 1 || sp->view_parts > SEED_VIEW_PARTITIONS_MAX)) {
            snprintf(errstr, errstr_size, "%s has %d partitions; hfbench reads 1..%d", topic,
                     (int)sp->view_parts, SEED_VIEW_PARTITIONS_MAX);
            err = HF_ERR_KAFKA;
        }
        if (err) {
            sp->view_parts = 0;
            return err;
        }
        for (int32_t p = 0; p < sp->view_parts; p++)
            sp->view_next[p] = KAFKA_OFFSET_BEGINNING;
    }
    int err = HF_OK;
    for (int32_t p = 0; !err && p < sp->view_parts; p++)
        err = kafka_reader_read_to_end(rd, topic, p, sp->view_next[p], 10000, seed_observe, sp,
                                       &sp->view_next[p], errstr, errstr_size);
    return err;
}

/* From here on want is the available before the feeds plus what they add. */
static void seed_arm(seed_plan_t *sp)
{
    hf_assert(!sp->armed);
    sp->applied = 0;
    for (size_t i = 0; i < sp->pairs; i++) {
        sp->want[i] += sp->seen[i];
        sp->applied += sp->seen[i] >= sp->want[i];
    }
    sp->armed = true;
}

/* The first pair the view does not show yet, and its row. */
static size_t seed_lagging(const seed_plan_t *sp, int *row)
{
    for (int r = 0; r < sp->rows; r++)
        for (uint32_t i = sp->first[r]; i < sp->first[r + 1]; i++)
            if (sp->seen[i] < sp->want[i]) {
                *row = r;
                return i;
            }
    *row = -1;
    return 0;
}

/* Polls the routing view until every planned pair shows its stock: the counter
 * applied the feed and the aggregator published it. */
static int seed_wait(kafka_reader_t *rd, seed_plan_t *sp, int timeout_ms)
{
    char errstr[256];
    progress_t pg;
    progress_start(&pg, "view", sp->pairs);
    for (;;) {
        if (seed_read_view(rd, sp, errstr, sizeof errstr)) {
            progress_draw(&pg, sp->applied, true);
            fprintf(stderr, "hfbench seed: reading the routing view: %s\n", errstr);
            return HF_ERR_KAFKA;
        }
        int64_t waited_ms = hf_mono_ms() - pg.start_ms;
        if (sp->applied == sp->pairs) {
            progress_draw(&pg, sp->applied, true);
            printf("seed: all %zu pairs show their stock in the routing view (%.1f s)\n", sp->pairs,
                   (double)waited_ms / 1000.0);
            return HF_OK;
        }
        if (waited_ms > timeout_ms) {
            progress_draw(&pg, sp->applied, true);
            int r = -1;
            size_t lag = seed_lagging(sp, &r);
            hf_assert(r >= 0);
            char sku[HF_SKU_LEN_MAX + 1];
            plan_sku_name(sp, r, sku, sizeof sku);
            fprintf(stderr,
                    "hfbench seed: after %d ms only %zu of %zu pairs show their stock (e.g. %s at "
                    "%s: %lld available, %lld expected); is holdfast running the counter and "
                    "aggregator stages? (a large catalog may need a longer --timeout-ms)\n",
                    timeout_ms, sp->applied, sp->pairs, sku, wh_ids[sp->wh[lag]],
                    (long long)sp->seen[lag], (long long)sp->want[lag]);
            return HF_ERR_TIMEOUT;
        }
        progress_draw(&pg, sp->applied, false);
        hf_sleep_ms(SEED_VIEW_POLL_MS);
    }
}

/* -- feeding */

/* The seed's own producer settings on top of the client defaults: records
 * leave in large batches (nobody waits for one feed; the flush at the end
 * sends what lingers). */
static const char *const seed_producer_overrides[] = {
    "linger.ms=20",
    "batch.num.messages=10000",
    NULL,
};

/* Feeds every planned pair (armed: units = want - seen, the view before). */
static int seed_produce(const bench_opts_t *o, const seed_plan_t *sp)
{
    char errstr[256];
    kafka_conf_t kc = {o->bootstrap, "hfbench", seed_producer_overrides};
    kafka_producer_t *kp = NULL;
    if (kafka_producer_new(&kc, NULL, 0, &kp, errstr, sizeof errstr)) {
        fprintf(stderr, "hfbench seed: %s\n", errstr);
        return HF_ERR_KAFKA;
    }
    /* Increasing across runs, so a re-seed adds stock: seconds since 2024, well
     * within the counter's HF_FEED_SEQ_JUMP_MAX of the last seed (wall-clock
     * milliseconds would be dead-lettered as a runaway feed_seq). Taken at the
     * start of a fresh second, so two seeds one after the other never share one
     * (the second's feeds would be stale). */
    hf_sleep_ms(1000 - hf_wall_ms() % 1000);
    int64_t seq = hf_wall_ms() / 1000 - HFBENCH_SEQ_EPOCH_S;
    progress_t pg;
    progress_start(&pg, "produce", sp->pairs);
    int err = HF_OK;
    size_t done = 0;
    for (int r = 0; r < sp->rows && !err; r++) {
        char sku[HF_SKU_LEN_MAX + 1];
        plan_sku_name(sp, r, sku, sizeof sku);
        for (uint32_t i = sp->first[r]; i < sp->first[r + 1] && !err; i++, done++) {
            int64_t units = sp->want[i] - sp->seen[i];
            hf_assert(units >= 1);
            err = feed(kp, wh_ids[sp->wh[i]], sku, units, seq);
            if ((done & 1023) == 0)
                progress_draw(&pg, done, false);
        }
    }
    if (!err && kafka_producer_flush(kp, 60000, errstr, sizeof errstr)) {
        fprintf(stderr, "hfbench seed: %s\n", errstr);
        err = HF_ERR_KAFKA;
    }
    progress_draw(&pg, done, true);
    if (!err && kafka_producer_failed_count(kp)) {
        fprintf(stderr, "hfbench seed: some feeds were not delivered (is the broker up?)\n");
        err = HF_ERR_KAFKA;
    }
    kafka_producer_destroy(kp);
    return err;
}

static void print_fed(const bench_opts_t *o, const seed_stats_t *st)
{
    size_t catalog_pairs = st->pairs - SEED_DOORBUSTER_WAREHOUSES;
    if (o->catalog == SEED_CATALOG_ZIPF)
        printf("seed: fed %d SKUs at %d..%d distinct warehouses each (zipf s %.2f: %zu pairs, "
               "%lld..%lld units each)",
               st->skus, st->row_min, st->row_max, o->catalog_s, catalog_pairs,
               (long long)st->qty_min, (long long)st->qty_max);
    else if (st->last_row != o->per_sku)
        printf("seed: fed %d SKUs at %d distinct warehouses each, the last at %d (%zu pairs, "
               "%lld units each)",
               st->skus, o->per_sku, st->last_row, catalog_pairs, (long long)o->stock);
    else
        printf("seed: fed %d SKUs at %d distinct warehouses each (%zu pairs, %lld units each)",
               st->skus, o->per_sku, catalog_pairs, (long long)o->stock);
    printf(" and %s (%lld units over %d warehouses); waiting until the routing view shows "
           "every pair\n",
           DOORBUSTER, (long long)o->doorbuster_stock, SEED_DOORBUSTER_WAREHOUSES);
    fflush(stdout);
}

/* One line for scripts: what was seeded and how fast, the feeds' start to the
 * moment the routing view showed every pair (the doorbuster's pairs included). */
static void print_summary(const bench_opts_t *o, const seed_stats_t *st, int64_t produce_ms,
                          int64_t total_ms)
{
    double total_s = (double)total_ms / 1000.0;
    printf("seed: summary: catalog=%s skus=%d pairs=%zu units=%lld seconds=%.1f pairs_per_s=%.0f "
           "produce_s=%.1f view_s=%.1f\n",
           o->catalog == SEED_CATALOG_ZIPF ? "zipf" : "uniform", st->skus, st->pairs,
           (long long)st->units, total_s, total_s > 0 ? (double)st->pairs / total_s : 0.0,
           (double)produce_ms / 1000.0, (double)(total_ms - produce_ms) / 1000.0);
}

static int seed_check_opts(const bench_opts_t *o)
{
    if (o->catalog == SEED_CATALOG_UNIFORM && o->per_sku > wh_count) {
        fprintf(stderr,
                "hfbench seed: --per-sku %d asks for more distinct warehouses than %s has (%d)\n",
                o->per_sku, o->warehouses_file, wh_count);
        return HF_ERR_CONFIG;
    }
    if (wh_count < SEED_DOORBUSTER_WAREHOUSES) {
        fprintf(stderr, "hfbench seed: %s has %d warehouses; the doorbuster needs %d\n",
                o->warehouses_file, wh_count, SEED_DOORBUSTER_WAREHOUSES);
        return HF_ERR_CONFIG;
    }
    return HF_OK;
}

/* Reads the view before the feeds (what each pair must show once they are
 * applied), feeds every pair and waits for the view. */
static int seed_feed_and_wait(const bench_opts_t *o, seed_plan_t *sp, const seed_stats_t *st)
{
    char errstr[256];
    kafka_conf_t kc = {o->bootstrap, "hfbench", NULL};
    kafka_reader_t *rd = NULL;
    if (kafka_reader_new(&kc, &rd, errstr, sizeof errstr)) {
        fprintf(stderr, "hfbench seed: %s\n", errstr);
        return HF_ERR_KAFKA;
    }
    int err = seed_read_view(rd, sp, errstr, sizeof errstr);
    if (err)
        fprintf(stderr,
                "hfbench seed: reading the routing view: %s (did hfctl topics apply run?)\n",
                errstr);
    int64_t start_ms = hf_mono_ms(), produced_ms = start_ms;
    if (!err) {
        seed_arm(sp);
        err = seed_produce(o, sp);
        produced_ms = hf_mono_ms();
    }
    if (!err) {
        print_fed(o, st);
        err = seed_wait(rd, sp, o->timeout_ms);
    }
    if (!err)
        print_summary(o, st, produced_ms - start_ms, hf_mono_ms() - start_ms);
    kafka_reader_destroy(rd);
    return err;
}

static int seed_catalog(const bench_opts_t *o)
{
    if (load_warehouses(o->warehouses_file) || seed_check_opts(o))
        return 2;
    seed_plan_t sp = {0};
    int err = seed_plan(o, &sp);
    seed_stats_t st = {0};
    if (!err) {
        st = plan_stats(&sp);
        print_plan(o, &st);
    }
    if (!err && o->plan_out)
        err = write_plan(&sp, o->plan_out);
    if (!err && !o->plan_only)
        err = seed_feed_and_wait(o, &sp, &st);
    seed_plan_free(&sp);
    return err == HF_ERR_CONFIG ? 2 : err ? 1 : 0;
}

/* ---- command line */

#define OPT_END                                                                                    \
    {                                                                                              \
        NULL, NULL, false, NULL                                                                    \
    }

static const hf_cli_opt_t seed_opts[] = {
    {"skus", "N", false, "SKUs SKU-00000.. to seed (default 1000)"},
    {"pairs", "N", false,
     "instead of --skus: SKUs until exactly N pairs (the last SKU cut to fit), DOORBUSTER's 5 "
     "besides"},
    {"catalog", "uniform|zipf", false,
     "uniform: --per-sku warehouses a SKU, --stock units each; zipf: a Zipf number of "
     "warehouses a SKU, lognormal units (default uniform)"},
    {"catalog-s", "S", false,
     "zipf: the exponent; over 50 warehouses 1.5 gives a mean of 5.47 warehouses a SKU, 1.0 of "
     "11.1 (default 1.5)"},
    {"stock", "Q", false,
     "units of each SKU at each of its warehouses; zipf: their mean, within [1, 20 Q] (default "
     "1000)"},
    {"per-sku", "W", false, "uniform: distinct warehouses per SKU (default 5)"},
    {"doorbuster-stock", "Q", false, "DOORBUSTER units, split over 5 warehouses (default 100)"},
    {"warehouses", "FILE", false,
     "warehouses file (default config/warehouses.json, else /etc/holdfast/warehouses.json)"},
    {"seed", "N", false, "random seed of the plan (default 1)"},
    {"timeout-ms", "N", false,
     "wait this long for the routing view to show every pair "
     "(default 120000)"},
    {"plan-only", NULL, false, "print the plan's summary and exit: no broker, nothing fed"},
    {"plan-out", "FILE", false, "write every planned pair as SKU<TAB>warehouse<TAB>units"},
    OPT_END};

static const hf_cli_opt_t run_opts[] = {
    {"scenario", "steady|flash-sale", false, "load shape (default steady)"},
    {"rate", "R", false, "reserves per second (default 200)"},
    {"seconds", "S", false, "length of the load (default 20)"},
    {"skus", "N", false, "SKUs the shoppers pick from, Zipf-popular (default 1000)"},
    {"zipf", "S", false, "Zipf exponent (default 1.1)"},
    {"doorbuster-stock", "Q", false, "flash-sale: DOORBUSTER units (default 100)"},
    {"burst-factor", "F", false, "flash-sale: shoppers per doorbuster unit (default 20)"},
    {"door-tail-rate", "R", false,
     "flash-sale: doorbuster shoppers/s after the burst, t = 4 s to the end (default 0)"},
    {"commit-pct", "P", false, "held reserves that are paid (default 60)"},
    {"abandon-pct", "P", false, "held reserves released (default 25)"},
    {"late-pct", "P", false, "held reserves paid after they expired (default 0)"},
    {"declined-pct", "P", false,
     "held reserves whose card is declined (payment.failed), then paid with another (default 0)"},
    {"canceled-pct", "P", false, "held reserves whose payment is canceled (default 0)"},
    {"ttl-ms", "T", false, "TTL of the holds left to expire (default 3000, at most 86400000)"},
    {"leave-open", NULL, false,
     "end once every reserve is answered, without waiting for the holds left to expire "
     "(make bench-holds: they stay open)"},
    {"dup-pct", "P", false, "reserves sent twice with the same key (default 5)"},
    {"busy-retries", "N", false,
     "a reserve answered BUSY is sent again with its key, after 250 ms doubling, up to N times "
     "(default 0)"},
    {"seed", "N", false, "random seed (default 1)"},
    {"partitioner", "NAME", false,
     "librdkafka partitioner of the requests (default murmur2_random; consistent_random, "
     "librdkafka's own default, puts requests where holdfast forwards them)"},
    {"report", "FILE", false, "write the JSON report (summary, per-second series) here"},
    OPT_END};

static const hf_cli_cmd_t bench_cmds[] = {
    {"seed", NULL, 0,
     "Feeds stock for a catalog and waits until the routing view shows every pair.", seed_opts},
    {"run", NULL, 0,
     "Drives a flash sale or a steady load and reports latency and outcomes.\n"
     "Exit: 0 ok, 1 error, 2 usage, 3 duplicate replies disagreed or the doorbuster oversold.",
     run_opts},
};

static int int_opt(const hf_cli_args_t *a, const char *name, long long lo, long long hi, int *out)
{
    const char *v = hf_cli_get(a, name);
    if (!v)
        return 0;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || !end || *end || x < lo || x > hi) {
        fprintf(stderr, "hfbench %s: --%s must be an integer in [%lld, %lld], not '%s'\n",
                a->cmd->name, name, lo, hi, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int int64_opt(const hf_cli_args_t *a, const char *name, long long lo, long long hi,
                     int64_t *out)
{
    int x = (int)*out;
    if (int_opt(a, name, lo, hi, &x))
        return -1;
    *out = x;
    return 0;
}

static int double_opt(const hf_cli_args_t *a, const char *name, double lo, double hi, double *out)
{
    const char *v = hf_cli_get(a, name);
    if (!v)
        return 0;
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || !end || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "hfbench %s: --%s must be a number in [%g, %g], not '%s'\n", a->cmd->name,
                name, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* The seed command's options into o; -1 after a message on a bad value. */
static int apply_seed_opts(const hf_cli_args_t *a, bench_opts_t *o)
{
    const char *catalog = hf_cli_get(a, "catalog");
    if (catalog && strcmp(catalog, "uniform") != 0 && strcmp(catalog, "zipf") != 0) {
        fprintf(stderr, "hfbench seed: --catalog must be uniform or zipf, not '%s'\n", catalog);
        return -1;
    }
    o->catalog = catalog && strcmp(catalog, "zipf") == 0 ? SEED_CATALOG_ZIPF : SEED_CATALOG_UNIFORM;
    bool zipf = o->catalog == SEED_CATALOG_ZIPF;
    if (hf_cli_get(a, "pairs") && hf_cli_get(a, "skus")) {
        fprintf(stderr, "hfbench seed: give --skus or --pairs, not both\n");
        return -1;
    }
    if (zipf ? hf_cli_get(a, "per-sku") != NULL : hf_cli_get(a, "catalog-s") != NULL) {
        fprintf(stderr, "hfbench seed: %s\n",
                zipf ? "--per-sku is for --catalog uniform (zipf draws each SKU's warehouses; "
                       "shape them with --catalog-s)"
                     : "--catalog-s is for --catalog zipf");
        return -1;
    }
    if (hf_cli_get(a, "warehouses"))
        o->warehouses_file = hf_cli_get(a, "warehouses");
    o->plan_only = hf_cli_get(a, "plan-only") != NULL;
    o->plan_out = hf_cli_get(a, "plan-out");
    return int_opt(a, "per-sku", 1, BENCH_WAREHOUSES_MAX, &o->per_sku) ||
                   int_opt(a, "pairs", 1, BENCH_PAIRS_MAX, &o->pairs) ||
                   double_opt(a, "catalog-s", 0.0, 10.0, &o->catalog_s) ||
                   int64_opt(a, "stock", 1, 1000000, &o->stock) ||
                   int_opt(a, "timeout-ms", 1000, 86400000, &o->timeout_ms)
               ? -1
               : 0;
}

/* The options of either command into o; -1 after a message on a bad value. */
static int apply_opts(const hf_cli_args_t *a, bench_opts_t *o)
{
    int seed = (int)o->seed;
    bool seeding = a->cmd == &bench_cmds[0];
    if (int_opt(a, "skus", 1, BENCH_SKUS_MAX, &o->skus) ||
        int64_opt(a, "doorbuster-stock", 5, 100000, &o->doorbuster_stock) ||
        int_opt(a, "seed", 0, 1000000000, &seed))
        return -1;
    o->seed = (unsigned)seed;
    if (seeding)
        return apply_seed_opts(a, o);
    const char *sc = hf_cli_get(a, "scenario"), *z = hf_cli_get(a, "zipf");
    if (sc && strcmp(sc, "steady") != 0 && strcmp(sc, "flash-sale") != 0) {
        fprintf(stderr, "hfbench run: --scenario must be steady or flash-sale, not '%s'\n", sc);
        return -1;
    }
    o->scenario = sc ? sc : o->scenario;
    o->report = hf_cli_get(a, "report");
    o->leave_open = hf_cli_get(a, "leave-open") != NULL;
    o->partitioner = hf_cli_get(a, "partitioner");
    o->zipf_s = z ? atof(z) : o->zipf_s;
    if (int_opt(a, "rate", 1, 100000, &o->rate) ||
        int_opt(a, "seconds", 1, BENCH_SECONDS_MAX, &o->seconds) ||
        int_opt(a, "burst-factor", 1, 1000, &o->burst_factor) ||
        int_opt(a, "door-tail-rate", 0, 10000, &o->door_tail_rate) ||
        int_opt(a, "dup-pct", 0, 100, &o->dup_pct) ||
        int_opt(a, "busy-retries", 0, 20, &o->busy_retries) ||
        int_opt(a, "commit-pct", 0, 100, &o->commit_pct) ||
        int_opt(a, "abandon-pct", 0, 100, &o->abandon_pct) ||
        int_opt(a, "late-pct", 0, 100, &o->late_pct) ||
        int_opt(a, "declined-pct", 0, 100, &o->declined_pct) ||
        int_opt(a, "canceled-pct", 0, 100, &o->canceled_pct) ||
        int_opt(a, "ttl-ms", 1000, BENCH_TTL_MS_MAX, &o->ttl_ms))
        return -1;
    if (o->commit_pct + o->abandon_pct + o->late_pct + o->declined_pct + o->canceled_pct > 100) {
        fprintf(stderr, "hfbench run: --commit-pct + --abandon-pct + --late-pct + --declined-pct + "
                        "--canceled-pct must not exceed 100\n");
        return -1;
    }
    /* Without --leave-open the run waits out the TTL, and its per-second series
     * ends BENCH_SECONDS_MAX after the start. */
    if (!o->leave_open && o->ttl_ms > BENCH_TTL_WAITED_MS_MAX) {
        fprintf(stderr,
                "hfbench run: --ttl-ms above %d needs --leave-open (the run would wait %d s "
                "for the holds to lapse)\n",
                BENCH_TTL_WAITED_MS_MAX, o->ttl_ms / 1000);
        return -1;
    }
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hfbench seed|run [options]   hfbench seed --help, hfbench run --help\n"
            "       hfbench --help | --version\n"
            "  seed   %s\n  run    %s\n"
            "env: HOLDFAST_BOOTSTRAP (default 127.0.0.1:9092), HOLDFAST_TOPIC_PREFIX,\n"
            "     HOLDFAST_KAFKA_CONFIG, HOLDFAST_KAFKA_OVERRIDES (docs/SECURITY.md),\n"
            "     HOLDFAST_SCHEMA_REGISTRY_URL (reads Confluent-framed outputs)\n"
            "     HOLDFAST_SYSCONFDIR (default /etc/holdfast: warehouses.json when no ./config/)\n",
            "Feeds stock for a catalog and waits until the routing view shows every pair.",
            "Drives a flash sale or a steady load and reports latency and outcomes.");
}

/* The command and its options into o; -1 to run, else the exit code. */
static int parse_command_line(int argc, char **argv, bench_opts_t *o, hf_cli_args_t *a)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        hf_version_print(stdout, "hfbench");
        return 0;
    }
    const hf_cli_cmd_t *cmd = NULL;
    for (size_t i = 0; argc >= 2 && i < sizeof bench_cmds / sizeof bench_cmds[0]; i++)
        if (strcmp(argv[1], bench_cmds[i].name) == 0)
            cmd = &bench_cmds[i];
    if (!cmd) {
        if (argc >= 2)
            fprintf(stderr, "hfbench: unknown command '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    switch (hf_cli_parse("hfbench", cmd, argc - 1, argv + 1, a)) {
    case HF_CLI_RUN:
        return apply_opts(a, o) ? 2 : -1;
    case HF_CLI_HELP:
        return 0;
    case HF_CLI_VERSION:
        hf_version_print(stdout, "hfbench");
        return 0;
    case HF_CLI_MISUSE:
        break;
    }
    return 2;
}

int main(int argc, char **argv)
{
    char warehouses_default[HF_DATAFILE_PATH_MAX];
    hf_datafile_find("config/warehouses.json", "warehouses.json", warehouses_default,
                     sizeof warehouses_default);
    bench_opts_t o = {.scenario = "steady",
                      .warehouses_file = warehouses_default,
                      .rate = 200,
                      .seconds = 20,
                      .skus = 1000,
                      .per_sku = 5,
                      .dup_pct = 5,
                      .commit_pct = 60,
                      .abandon_pct = 25,
                      .ttl_ms = 3000,
                      .timeout_ms = 120000,
                      .stock = 1000,
                      .doorbuster_stock = 100,
                      .burst_factor = 20,
                      .zipf_s = 1.1,
                      .seed = 1,
                      .catalog = SEED_CATALOG_UNIFORM,
                      .catalog_s = 1.5};
    const char *bs = getenv("HOLDFAST_BOOTSTRAP"), *prefix = getenv("HOLDFAST_TOPIC_PREFIX");
    char errstr[512];
    o.bootstrap = bs && *bs ? bs : "127.0.0.1:9092";
    topics_set_prefix(prefix ? prefix : "");
    hf_cli_args_t a;
    int exit_code = parse_command_line(argc, argv, &o, &a);
    if (exit_code >= 0)
        return exit_code;
    if (kafka_client_config_from_env(errstr, sizeof errstr) || codec_init(errstr, sizeof errstr) ||
        framing_start_from_env(errstr, sizeof errstr)) { /* reads framed outputs too */
        fprintf(stderr, "hfbench: %s\n", errstr);
        return 1;
    }
    return a.cmd == &bench_cmds[0] ? seed_catalog(&o) : run_bench(&o);
}
