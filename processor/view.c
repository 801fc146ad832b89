/* The routing view (see view.h). One thread follows every partition of the
 * availability topic and applies each record to a hash table under a write lock;
 * readers copy out under a read lock. To stay small at 2M SKUs an entry keeps
 * warehouse ids interned (one byte each) and available as int32. */
#include "view.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec.h"
#include "framing.h"
#include "hf_assert.h"
#include "hf_clock.h"
#include "log.h"

#define VIEW_PARTITIONS_MAX       256
#define VIEW_ENTRIES_MAX          (64u << 20) /* hash slots; far above 2M SKUs */
#define VIEW_LIVENESS_INTERVAL_MS 500

typedef struct {
    uint8_t wh;        /* index into view.wh_names */
    int32_t available; /* clamped to int32 */
} view_wh_t;

typedef struct {
    char *sku; /* NULL = empty slot */
    int64_t total;
    int64_t updated_at_ms;
    bool in_stock;
    uint8_t count;
    view_wh_t *whs;
} view_entry_t;

struct view {
    kafka_reader_t *rd;
    char topic[HF_TOPIC_LEN_MAX + 1];
    int32_t partitions;
    pthread_t thread;
    atomic_bool stop;
    pthread_rwlock_t lock;
    view_entry_t *slots;
    size_t slots_cap, size;
    char wh_names[HF_WAREHOUSES_MAX * 4][HF_WAREHOUSE_LEN_MAX + 1];
    size_t wh_count;
    bool at_end[VIEW_PARTITIONS_MAX];
    atomic_llong current_at_ms; /* -1 until first caught up */
    pthread_mutex_t ready_mu;
    pthread_cond_t ready_cv;
    bool ready;
    hf_record_t rec;
};

static uint64_t sku_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

static view_entry_t *slot_for(view_entry_t *slots, size_t cap, const char *sku)
{
    size_t i = sku_hash(sku) & (cap - 1);
    while (slots[i].sku && strcmp(slots[i].sku, sku) != 0)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int grow(view_t *v)
{
    size_t cap = v->slots_cap ? v->slots_cap * 2 : 1024;
    if (cap > VIEW_ENTRIES_MAX)
        return HF_ERR_LIMIT;
    view_entry_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return HF_ERR_NOMEM;
    for (size_t i = 0; i < v->slots_cap; i++)
        if (v->slots[i].sku)
            *slot_for(slots, cap, v->slots[i].sku) = v->slots[i];
    free(v->slots);
    v->slots = slots;
    v->slots_cap = cap;
    return HF_OK;
}

static int intern_wh(view_t *v, const char *wh)
{
    for (size_t i = 0; i < v->wh_count; i++)
        if (strcmp(v->wh_names[i], wh) == 0)
            return (int)i;
    if (v->wh_count == sizeof v->wh_names / sizeof v->wh_names[0])
        return -1;
    size_t len = strnlen(wh, HF_WAREHOUSE_LEN_MAX);
    memcpy(v->wh_names[v->wh_count], wh, len);
    v->wh_names[v->wh_count][len] = '\0';
    return (int)v->wh_count++;
}

/* Applies one Availability record (writer thread, under the write lock). */
static int apply(view_t *v, const hf_availability_t *a)
{
    if ((v->size + 1) * 2 > v->slots_cap) {
        int err = grow(v);
        if (err)
            return err;
    }
    view_entry_t *e = slot_for(v->slots, v->slots_cap, a->sku);
    if (!e->sku) {
        e->sku = strdup(a->sku);
        if (!e->sku)
            return HF_ERR_NOMEM;
        v->size++;
    }
    view_wh_t *whs =
        realloc(e->whs, (size_t)(a->warehouses_count ? a->warehouses_count : 1) * sizeof *whs);
    if (!whs)
        return HF_ERR_NOMEM;
    e->whs = whs;
    e->count = 0;
    for (int32_t i = 0; i < a->warehouses_count; i++) {
        int wh = intern_wh(v, a->warehouses[i].warehouse_id);
        if (wh < 0)
            return HF_ERR_LIMIT;
        int64_t avail = a->warehouses[i].available;
        e->whs[e->count++] = (view_wh_t){(uint8_t)wh, (int32_t)(avail > INT32_MAX ? INT32_MAX
                                                                : avail < 0       ? 0
                                                                                  : avail)};
    }
    e->total = a->total;
    e->in_stock = a->in_stock;
    e->updated_at_ms = a->updated_at_ms;
    return HF_OK;
}

static void mark_current(view_t *v)
{
    for (int32_t p = 0; p < v->partitions; p++)
        if (!v->at_end[p])
            return;
    atomic_store(&v->current_at_ms, hf_wall_ms());
    if (!v->ready) {
        pthread_mutex_lock(&v->ready_mu);
        v->ready = true;
        pthread_cond_broadcast(&v->ready_cv);
        pthread_mutex_unlock(&v->ready_mu);
        log_info("view", "routing view caught up: %zu SKUs", v->size);
    }
}

static void handle_msg(view_t *v, const kafka_msg_t *msg)
{
    char errstr[256];
    if (!msg->value) /* a tombstone: the SKU left the catalog */
        return;
    if (framing_decode_waiting(msg->value, msg->value_len, &v->rec, &v->stop, errstr,
                               sizeof errstr) != HF_OK ||
        v->rec.type != HF_REC_AVAILABILITY) {
        log_warn("view", "skipping undecodable availability record at %d/%lld: %s", msg->partition,
                 (long long)msg->offset, errstr);
        return;
    }
    pthread_rwlock_wrlock(&v->lock);
    int err = apply(v, &v->rec.u.availability);
    pthread_rwlock_unlock(&v->lock);
    if (err)
        log_error("view", "cannot apply availability of %s: %s", v->rec.u.availability.sku,
                  hf_err_str(err));
}

static void *view_main(void *arg)
{
    view_t *v = arg;
    int64_t next_liveness = 0;
    char errstr[256];
    while (!atomic_load(&v->stop)) {
        kafka_msg_t msg = {0};
        int rc = kafka_reader_poll(v->rd, 100, &msg, errstr, sizeof errstr);
        if (rc == 1) {
            v->at_end[msg.partition] = false;
            handle_msg(v, &msg);
            kafka_msg_release(&msg);
            continue;
        }
        if (rc == 2 && msg.partition >= 0 && msg.partition < v->partitions)
            v->at_end[msg.partition] = true;
        if (rc < 0)
            log_warn("view", "%s", errstr);
        /* At the end of every partition, and the broker still answers: current. */
        if (hf_wall_ms() >= next_liveness) {
            next_liveness = hf_wall_ms() + VIEW_LIVENESS_INTERVAL_MS;
            if (kafka_reader_broker_alive(v->rd, v->topic, 0, 1000))
                mark_current(v);
        } else if (rc == 2) {
            mark_current(v);
        }
    }
    return NULL;
}

int view_new(const kafka_conf_t *conf, const char *topic, view_t **v_out, char *errstr,
             size_t errstr_size)
{
    view_t *v = calloc(1, sizeof *v);
    if (!v)
        return HF_ERR_NOMEM;
    snprintf(v->topic, sizeof v->topic, "%s", topic);
    atomic_init(&v->current_at_ms, -1);
    pthread_rwlock_init(&v->lock, NULL);
    pthread_mutex_init(&v->ready_mu, NULL);
    pthread_cond_init(&v->ready_cv, NULL);
    int err = grow(v);
    if (!err)
        err = kafka_reader_new(conf, &v->rd, errstr, errstr_size);
    if (!err)
        err = kafka_reader_follow(v->rd, topic, 10000, &v->partitions, errstr, errstr_size);
    if (!err && v->partitions > VIEW_PARTITIONS_MAX)
        err = HF_ERR_LIMIT;
    if (!err && pthread_create(&v->thread, NULL, view_main, v) != 0)
        err = HF_ERR_NOMEM;
    if (err) {
        kafka_reader_destroy(v->rd);
        free(v->slots);
        free(v);
        return err;
    }
    *v_out = v;
    return HF_OK;
}

void view_destroy(view_t *v)
{
    if (!v)
        return;
    atomic_store(&v->stop, true);
    pthread_join(v->thread, NULL);
    kafka_reader_destroy(v->rd);
    for (size_t i = 0; i < v->slots_cap; i++) {
        free(v->slots[i].sku);
        free(v->slots[i].whs);
    }
    free(v->slots);
    pthread_rwlock_destroy(&v->lock);
    pthread_mutex_destroy(&v->ready_mu);
    pthread_cond_destroy(&v->ready_cv);
    free(v);
}

int view_get(view_t *v, const char *sku, hf_availability_t *out)
{
    int err = HF_ERR_NOTFOUND;
    pthread_rwlock_rdlock(&v->lock);
    const view_entry_t *e = slot_for(v->slots, v->slots_cap, sku);
    if (e->sku) {
        memset(out, 0, sizeof *out);
        snprintf(out->sku, sizeof out->sku, "%s", e->sku);
        out->warehouses_count = e->count;
        for (uint8_t i = 0; i < e->count; i++) {
            snprintf(out->warehouses[i].warehouse_id, sizeof out->warehouses[i].warehouse_id, "%s",
                     v->wh_names[e->whs[i].wh]);
            out->warehouses[i].available = e->whs[i].available;
        }
        out->total = e->total;
        out->in_stock = e->in_stock;
        out->updated_at_ms = e->updated_at_ms;
        err = HF_OK;
    }
    pthread_rwlock_unlock(&v->lock);
    return err;
}

int64_t view_staleness_ms(const view_t *v)
{
    int64_t at = atomic_load(&v->current_at_ms);
    return at < 0 ? -1 : hf_wall_ms() - at;
}

int view_wait_ready(view_t *v, int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&v->ready_mu);
    int rc = 0;
    while (!v->ready && rc == 0)
        rc = pthread_cond_timedwait(&v->ready_cv, &v->ready_mu, &deadline);
    bool ready = v->ready;
    pthread_mutex_unlock(&v->ready_mu);
    return ready ? HF_OK : HF_ERR_TIMEOUT;
}

size_t view_size(view_t *v)
{
    pthread_rwlock_rdlock(&v->lock);
    size_t n = v->size;
    pthread_rwlock_unlock(&v->lock);
    return n;
}
