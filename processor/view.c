/* The routing view (see view.h). One thread follows every partition of the
 * availability topic and applies each record to the packed table of
 * view_table.h under a write lock; readers copy out under a read lock. */
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
#include "view_table.h"

#define VIEW_PARTITIONS_MAX       256
#define VIEW_LIVENESS_INTERVAL_MS 500

struct view {
    kafka_reader_t *rd;
    char topic[HF_TOPIC_LEN_MAX + 1];
    int32_t partitions;
    pthread_t thread;
    atomic_bool stop;
    pthread_rwlock_t lock;
    view_table_t *table;
    bool at_end[VIEW_PARTITIONS_MAX];
    atomic_llong current_at_ms; /* -1 until first caught up */
    pthread_mutex_t ready_mu;
    pthread_cond_t ready_cv;
    bool ready;
    hf_record_t rec;
};

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
        log_info("view", "routing view caught up: %zu SKUs in %zu bytes", view_table_size(v->table),
                 view_table_bytes(v->table));
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
    int err = view_table_apply(v->table, &v->rec.u.availability);
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
    v->table = view_table_new();
    int err = v->table ? HF_OK : HF_ERR_NOMEM;
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
        view_table_destroy(v->table);
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
    view_table_destroy(v->table);
    pthread_rwlock_destroy(&v->lock);
    pthread_mutex_destroy(&v->ready_mu);
    pthread_cond_destroy(&v->ready_cv);
    free(v);
}

int view_get(view_t *v, const char *sku, hf_availability_t *out)
{
    pthread_rwlock_rdlock(&v->lock);
    int err = view_table_get(v->table, sku, out);
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
    size_t n = view_table_size(v->table);
    pthread_rwlock_unlock(&v->lock);
    return n;
}

size_t view_bytes(view_t *v)
{
    pthread_rwlock_rdlock(&v->lock);
    size_t n = view_table_bytes(v->table);
    pthread_rwlock_unlock(&v->lock);
    return n;
}
