/* See burst.h. Producers are plain idempotent producers (like a checkout
 * service); progress and verdict come from committed outputs only
 * (read_committed), so what it shows is what downstream consumers see. */
#include "burst.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec.h"
#include "hf_clock.h"
#include "kafka.h"
#include "topics.h"

#define BURST_WAREHOUSES_MAX 64
#define BURST_PRODUCERS_MAX  32
#define BURST_PARTITIONS_MAX 256

typedef struct {
    const burst_opts_t *o;
    char wh[BURST_WAREHOUSES_MAX][HF_WAREHOUSE_LEN_MAX + 1];
    int wh_count;
    int index;
    int rc;
    char errstr[256];
} producer_t;

static void *produce_holds(void *arg)
{
    producer_t *p = arg;
    kafka_conf_t kc = {p->o->bootstrap, "hfctl-burst", NULL};
    kafka_producer_t *kp = NULL;
    p->rc = kafka_producer_new(&kc, NULL, 0, &kp, p->errstr, sizeof p->errstr);
    size_t mine = p->o->holds / (size_t)p->o->producers;
    unsigned seed = (unsigned)(p->index * 7919 + 1);
    for (size_t i = 0; p->rc == HF_OK && i < mine; i++) {
        hf_record_t rec;
        hf_record_reset(&rec, HF_REC_HOLD);
        hf_hold_t *h = &rec.u.hold;
        snprintf(h->reservation_id, sizeof h->reservation_id, "burst-%d-%zu-%lld", p->index, i,
                 (long long)(hf_wall_ms() % 1000000));
        snprintf(h->warehouse_id, sizeof h->warehouse_id, "%s",
                 p->wh[rand_r(&seed) % (unsigned)p->wh_count]);
        snprintf(h->sku, sizeof h->sku, "%s", p->o->sku);
        h->qty = 1;
        h->issued_at_ms = hf_wall_ms();
        uint8_t buf[512];
        size_t len = 0;
        char key[HF_WAREHOUSE_LEN_MAX + HF_SKU_LEN_MAX + 2];
        snprintf(key, sizeof key, "%s|%s", h->warehouse_id, h->sku);
        p->rc = codec_encode(&rec, buf, sizeof buf, &len, p->errstr, sizeof p->errstr);
        if (p->rc == HF_OK)
            p->rc = kafka_produce(kp, topic_name(HF_T_COUNTER_COMMANDS), -1, key, strlen(key), buf,
                                  len, NULL, 0, NULL, p->errstr, sizeof p->errstr);
    }
    if (p->rc == HF_OK)
        p->rc = kafka_producer_flush(kp, 60000, p->errstr, sizeof p->errstr);
    kafka_producer_destroy(kp);
    return NULL;
}

typedef struct {
    const char *sku;
    size_t results, ok, insufficient;
    size_t levels, negative;
    int64_t last_available[BURST_WAREHOUSES_MAX];
    char (*wh)[HF_WAREHOUSE_LEN_MAX + 1];
    int wh_count;
    hf_record_t rec;
} tally_t;

static int tally_result(void *opaque, const kafka_msg_t *msg)
{
    tally_t *t = opaque;
    char errstr[128];
    if (!msg->value || codec_decode(msg->value, msg->value_len, &t->rec, errstr, sizeof errstr))
        return HF_OK;
    const hf_counter_result_t *r = &t->rec.u.counter_result;
    if (t->rec.type != HF_REC_COUNTER_RESULT || strcmp(r->sku, t->sku) != 0 ||
        strncmp(r->reservation_id, "burst-", 6) != 0)
        return HF_OK;
    t->results++;
    t->ok += r->outcome == HF_OUTCOME_OK;
    t->insufficient += r->outcome == HF_OUTCOME_INSUFFICIENT;
    return HF_OK;
}

static int tally_level(void *opaque, const kafka_msg_t *msg)
{
    tally_t *t = opaque;
    char errstr[128];
    if (!msg->value || codec_decode(msg->value, msg->value_len, &t->rec, errstr, sizeof errstr) ||
        t->rec.type != HF_REC_STOCK_LEVEL)
        return HF_OK;
    const hf_stock_level_t *s = &t->rec.u.stock_level;
    if (strcmp(s->sku, t->sku) != 0)
        return HF_OK;
    t->levels++;
    t->negative += s->available < 0 || s->reserved < 0 || s->on_hand < 0;
    for (int i = 0; i < t->wh_count; i++)
        if (strcmp(t->wh[i], s->warehouse_id) == 0)
            t->last_available[i] = s->available;
    return HF_OK;
}

/* Reads what is new on every partition of topic since the last call. */
static int read_new(kafka_reader_t *rd, hf_topic_id_t topic, int64_t *next, kafka_record_fn fn,
                    void *opaque, char *errstr, size_t errstr_size)
{
    int32_t parts = 0;
    int err = kafka_partition_count(rd, topic_name(topic), 10000, &parts, errstr, errstr_size);
    for (int32_t p = 0; err == HF_OK && p < parts && p < BURST_PARTITIONS_MAX; p++)
        err = kafka_reader_read_to_end(rd, topic_name(topic), p,
                                       next[p] ? next[p] : KAFKA_OFFSET_BEGINNING, 10000, fn,
                                       opaque, &next[p], errstr, errstr_size);
    return err;
}

static int split_warehouses(const char *list, producer_t *p, char *errstr, size_t errstr_size)
{
    char buf[BURST_WAREHOUSES_MAX * (HF_WAREHOUSE_LEN_MAX + 1)], *save = NULL;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (p->wh_count == BURST_WAREHOUSES_MAX || strlen(w) > HF_WAREHOUSE_LEN_MAX) {
            snprintf(errstr, errstr_size, "at most %d warehouses of %d characters",
                     BURST_WAREHOUSES_MAX, HF_WAREHOUSE_LEN_MAX);
            return HF_ERR_INVAL;
        }
        snprintf(p->wh[p->wh_count++], sizeof p->wh[0], "%s", w);
    }
    return p->wh_count ? HF_OK : HF_ERR_INVAL;
}

int burst_run(const burst_opts_t *o, char *errstr, size_t errstr_size)
{
    static producer_t prods[BURST_PRODUCERS_MAX];
    static tally_t t;
    static int64_t next_results[BURST_PARTITIONS_MAX], next_levels[BURST_PARTITIONS_MAX];
    if (o->producers < 1 || o->producers > BURST_PRODUCERS_MAX || o->holds == 0) {
        snprintf(errstr, errstr_size, "--producers must be 1..%d and --holds positive",
                 BURST_PRODUCERS_MAX);
        return HF_ERR_INVAL;
    }
    memset(&prods[0], 0, sizeof prods[0]);
    prods[0].o = o;
    if (split_warehouses(o->warehouses, &prods[0], errstr, errstr_size) != HF_OK)
        return HF_ERR_INVAL;
    t.sku = o->sku;
    t.wh = prods[0].wh;
    t.wh_count = prods[0].wh_count;
    kafka_conf_t kc = {o->bootstrap, "hfctl-burst", NULL};
    kafka_reader_t *rd = NULL;
    int err = kafka_reader_new(&kc, &rd, errstr, errstr_size);
    /* Skip what is already on the topics: count only this burst. */
    if (!err)
        err =
            read_new(rd, HF_T_COUNTER_RESULTS, next_results, tally_result, &t, errstr, errstr_size);
    t.results = t.ok = t.insufficient = 0;
    if (err)
        goto done;

    size_t total = o->holds / (size_t)o->producers * (size_t)o->producers;
    pthread_t th[BURST_PRODUCERS_MAX];
    int64_t started = hf_wall_ms();
    for (int i = 0; i < o->producers; i++) {
        if (i > 0)
            prods[i] = prods[0];
        prods[i].index = i;
        pthread_create(&th[i], NULL, produce_holds, &prods[i]);
    }
    printf("burst: %zu holds of 1 unit on %s over %d warehouses from %d producers\n", total, o->sku,
           prods[0].wh_count, o->producers);
    for (int64_t deadline = started + o->timeout_ms;
         t.results < total && hf_wall_ms() < deadline;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        err =
            read_new(rd, HF_T_COUNTER_RESULTS, next_results, tally_result, &t, errstr, errstr_size);
        if (err)
            break;
        printf("  %5.1f s  results %zu/%zu  held %zu  insufficient %zu\n",
               (double)(hf_wall_ms() - started) / 1000.0, t.results, total, t.ok, t.insufficient);
        fflush(stdout);
    }
    for (int i = 0; i < o->producers; i++) {
        pthread_join(th[i], NULL);
        if (prods[i].rc && !err) {
            snprintf(errstr, errstr_size, "producer %d: %s", i, prods[i].errstr);
            err = prods[i].rc;
        }
    }
    if (!err)
        err = read_new(rd, HF_T_STOCK_LEVELS, next_levels, tally_level, &t, errstr, errstr_size);
    if (!err && t.results < total) {
        snprintf(errstr, errstr_size, "only %zu of %zu results arrived; is holdfast running?",
                 t.results, total);
        err = HF_ERR_TIMEOUT;
    }
    if (!err) {
        int64_t left = 0;
        for (int i = 0; i < t.wh_count; i++)
            left += t.last_available[i];
        bool pass = t.negative == 0;
        printf("{\"verdict\":\"%s\",\"holds\":%zu,\"held\":%zu,\"insufficient\":%zu,"
               "\"stock_levels_seen\":%zu,\"negative_stock_levels\":%zu,\"available_left\":%lld,"
               "\"seconds\":%.1f}\n",
               pass ? "PASS" : "FAIL", total, t.ok, t.insufficient, t.levels, t.negative,
               (long long)left, (double)(hf_wall_ms() - started) / 1000.0);
        if (!pass)
            err = HF_ERR_CORRUPT;
    }
done:
    kafka_reader_destroy(rd);
    return err;
}
