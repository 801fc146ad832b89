/* hfplant: forges one violation into a deployment's real topics, so a fault
 * scenario can prove that the reconciler that just said PASS says FAIL when the
 * history is wrong (issue 14: "a planted-violation run proving the checker fails
 * when it should"). A test tool: never run it against topics anyone relies on.
 *
 *   hfplant second-answer   a real HELD reply copied, answered REJECTED_INSUFFICIENT
 *                           (same key, same partition): a key with two answers
 *   overbooked-level        a pair's last StockLevel copied with reserved above
 *                           on_hand (version + 1: the level after its last one):
 *                           a counter that oversold
 *   orphan-hold             a real HELD ledger event copied under a new
 *                           reservation id: units the ledger holds and no counter
 *                           reserved (a lost hold)
 *
 * It reads the topic from its beginning (read_committed), takes the first
 * record it can use (the last StockLevel of the first partition that has one),
 * and produces the forgery once, idempotently (not transactionally: a
 * read_committed reader sees a non-transactional record). Prints one JSON line:
 * what it planted, where. Exit 0 planted, 1 nothing usable or an error, 2 usage.
 * Env: HOLDFAST_BOOTSTRAP, HOLDFAST_TOPIC_PREFIX, HOLDFAST_KAFKA_CONFIG /
 * HOLDFAST_KAFKA_OVERRIDES (as hfctl). Stop the deployment's processes first:
 * the aggregator consumes stock levels. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "kafka.h"
#include "records.h"
#include "topics.h"

typedef enum { PLANT_SECOND_ANSWER, PLANT_OVERBOOKED_LEVEL, PLANT_ORPHAN_HOLD } plant_kind_t;

typedef struct {
    plant_kind_t kind;
    bool found;
    hf_record_t rec;
    char key[256];
    size_t key_len;
    int32_t partition;
    int64_t offset;
} plant_t;

/* Keeps the record the forgery is made from: the first usable one, or for a
 * stock level the last one of the partition being read. */
static int take_record(void *opaque, const kafka_msg_t *msg)
{
    plant_t *p = opaque;
    if (!msg->value || msg->key_len >= sizeof p->key)
        return HF_OK;
    static hf_record_t rec;
    char errstr[256];
    if (codec_decode(msg->value, msg->value_len, &rec, errstr, sizeof errstr) != HF_OK)
        return HF_OK;
    bool usable = false;
    switch (p->kind) {
    case PLANT_SECOND_ANSWER:
        usable = rec.type == HF_REC_REPLY && rec.u.reply.outcome == HF_REPLY_HELD;
        break;
    case PLANT_OVERBOOKED_LEVEL: /* any on_hand: a sold-out pair's last level too */
        usable = rec.type == HF_REC_STOCK_LEVEL;
        break;
    case PLANT_ORPHAN_HOLD:
        usable = rec.type == HF_REC_LEDGER_EVENT && rec.u.ledger_event.kind == HF_LEDGER_HELD &&
                 rec.u.ledger_event.allocations_count > 0;
        break;
    }
    if (!usable)
        return HF_OK;
    if (p->kind == PLANT_OVERBOOKED_LEVEL && p->found &&
        strcmp(rec.u.stock_level.sku, p->rec.u.stock_level.sku) != 0)
        return HF_OK; /* keep following the first pair's levels to its last */
    if (p->kind == PLANT_OVERBOOKED_LEVEL && p->found &&
        strcmp(rec.u.stock_level.warehouse_id, p->rec.u.stock_level.warehouse_id) != 0)
        return HF_OK;
    p->rec = rec;
    p->found = true;
    memcpy(p->key, msg->key, msg->key_len);
    p->key_len = msg->key_len;
    p->partition = msg->partition;
    p->offset = msg->offset;
    return p->kind == PLANT_OVERBOOKED_LEVEL ? HF_OK : HF_ERR_LIMIT; /* LIMIT: stop reading */
}

/* Turns the record read into the forgery; returns what it violates. */
static const char *forge(plant_t *p)
{
    switch (p->kind) {
    case PLANT_SECOND_ANSWER: {
        hf_reply_t *r = &p->rec.u.reply;
        r->outcome = HF_REPLY_REJECTED_INSUFFICIENT;
        r->allocations_count = 0;
        r->expires_at_ms = 0;
        snprintf(r->message, sizeof r->message, "planted by hfplant: a second answer");
        return "the idempotency key already answered HELD is answered REJECTED_INSUFFICIENT";
    }
    case PLANT_OVERBOOKED_LEVEL: {
        hf_stock_level_t *s = &p->rec.u.stock_level;
        s->version += 1;
        s->reserved = s->on_hand + s->allotted + 1;
        s->shortfall = 0;
        s->available = 0;
        return "the pair's counter reports more units reserved than it has on hand";
    }
    case PLANT_ORPHAN_HOLD: {
        hf_ledger_event_t *e = &p->rec.u.ledger_event;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(e->reservation_id, sizeof e->reservation_id, "planted-%ld-%ld", (long)getpid(),
                 (long)ts.tv_sec);
        snprintf(p->key, sizeof p->key, "%s", e->reservation_id);
        p->key_len = strlen(p->key);
        p->partition = -1; /* by key, as the gateway would have */
        return "the ledger holds units for a reservation no counter ever held";
    }
    }
    return "?";
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        plant_kind_t kind;
        hf_topic_id_t topic;
    } kinds[] = {
        {"second-answer", PLANT_SECOND_ANSWER, HF_T_REPLIES},
        {"overbooked-level", PLANT_OVERBOOKED_LEVEL, HF_T_STOCK_LEVELS},
        {"orphan-hold", PLANT_ORPHAN_HOLD, HF_T_LEDGER},
    };
    int which = -1;
    for (int i = 0; argc == 2 && i < (int)(sizeof kinds / sizeof kinds[0]); i++)
        if (strcmp(argv[1], kinds[i].name) == 0)
            which = i;
    if (which < 0) {
        fprintf(stderr, "usage: hfplant second-answer|overbooked-level|orphan-hold\n"
                        "  forges one violation into the topics of HOLDFAST_TOPIC_PREFIX "
                        "(a test tool: see tests/faults/hfplant.c)\n");
        return 2;
    }
    const char *bs = getenv("HOLDFAST_BOOTSTRAP");
    const char *prefix = getenv("HOLDFAST_TOPIC_PREFIX");
    topics_set_prefix(prefix ? prefix : "");
    kafka_conf_t kc = {bs && *bs ? bs : "127.0.0.1:9092", "hfplant", NULL};
    const char *topic = topic_name(kinds[which].topic);
    char errstr[512] = "";
    static plant_t p;
    p.kind = kinds[which].kind;

    kafka_reader_t *rd = NULL;
    int32_t parts = 0;
    int err = kafka_client_config_from_env(errstr, sizeof errstr);
    if (!err)
        err = codec_init(errstr, sizeof errstr);
    if (!err)
        err = kafka_reader_new(&kc, &rd, errstr, sizeof errstr);
    if (!err)
        err = kafka_partition_count(rd, topic, 10000, &parts, errstr, sizeof errstr);
    for (int32_t part = 0; !err && !p.found && part < parts; part++) {
        int64_t next = 0;
        err = kafka_reader_read_to_end(rd, topic, part, KAFKA_OFFSET_BEGINNING, 10000, take_record,
                                       &p, &next, errstr, sizeof errstr);
        if (err == HF_ERR_LIMIT)
            err = HF_OK;
    }
    kafka_reader_destroy(rd);
    if (!err && !p.found) {
        fprintf(stderr, "hfplant: %s has no record to forge %s from\n", topic, kinds[which].name);
        return 1;
    }
    int32_t read_partition = p.partition;
    int64_t read_offset = p.offset;
    const char *what = err ? NULL : forge(&p);

    static uint8_t buf[65536];
    size_t len = 0;
    int64_t offset = -1;
    kafka_producer_t *kp = NULL;
    if (!err)
        err = codec_encode(&p.rec, buf, sizeof buf, &len, errstr, sizeof errstr);
    if (!err)
        err = kafka_producer_new(&kc, NULL, 0, &kp, errstr, sizeof errstr);
    if (!err)
        err = kafka_produce(kp, topic, p.partition, p.key, p.key_len, buf, len, NULL, 0, &offset,
                            errstr, sizeof errstr);
    if (!err)
        err = kafka_producer_flush(kp, 30000, errstr, sizeof errstr);
    if (!err && kafka_producer_failed_count(kp) > 0) {
        snprintf(errstr, sizeof errstr, "the broker did not take the record");
        err = HF_ERR_IO;
    }
    kafka_producer_destroy(kp);
    if (err) {
        fprintf(stderr, "hfplant %s: %s: %s\n", kinds[which].name, hf_err_name(err), errstr);
        return 1;
    }
    printf("{\"planted\":\"%s\",\"topic\":\"%s\",\"key\":\"%.*s\",\"offset\":%" PRId64
           ",\"from_partition\":%d,\"from_offset\":%" PRId64 ",\"violates\":\"%s\"}\n",
           kinds[which].name, topic, (int)p.key_len, p.key, offset, read_partition, read_offset,
           what);
    return 0;
}
