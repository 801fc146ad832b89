/* Counter stage against the real broker through the real `holdfast` binary:
 * no oversell under concurrent producers, duplicates applied once, bad records
 * dead-lettered while the stage keeps going, and state restored from the
 * changelog after the local state folder is lost. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec.h"
#include "harness.h"

#define WAIT_MS 120000

/* ---- result tallies */

typedef struct {
    size_t ok, insufficient, other, total;
    size_t by_cmd[HF_CMD__COUNT][HF_OUTCOME__COUNT];
} tally_t;

static void tally_result(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    tally_t *t = opaque;
    assert_int_equal(rec->type, HF_REC_COUNTER_RESULT);
    const hf_counter_result_t *r = &rec->u.counter_result;
    t->total++;
    t->by_cmd[r->command][r->outcome]++;
    if (r->command != HF_CMD_HOLD)
        return;
    if (r->outcome == HF_OUTCOME_OK)
        t->ok++;
    else if (r->outcome == HF_OUTCOME_INSUFFICIENT)
        t->insufficient++;
    else
        t->other++;
}

typedef struct {
    size_t count;
    int64_t min_available, min_reserved, min_on_hand;
} levels_t;

static void check_level(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    levels_t *l = opaque;
    assert_int_equal(rec->type, HF_REC_STOCK_LEVEL);
    const hf_stock_level_t *s = &rec->u.stock_level;
    if (l->count++ == 0 || s->available < l->min_available)
        l->min_available = s->available;
    if (l->count == 1 || s->reserved < l->min_reserved)
        l->min_reserved = s->reserved;
    if (l->count == 1 || s->on_hand < l->min_on_hand)
        l->min_on_hand = s->on_hand;
}

/* ---- 8 producers, 20,000 single-unit holds, 1,000 units */

typedef struct {
    harness_t *h;
    int thread;
    int holds;
} producer_arg_t;

static void *hold_producer(void *arg)
{
    producer_arg_t *a = arg;
    char errstr[256], rid[64], key[128];
    kafka_producer_t *kp = NULL;
    if (kafka_producer_new(&a->h->kconf, NULL, 0, &kp, errstr, sizeof errstr) != HF_OK)
        return (void *)1;
    harness_pair(key, "W1", "SKU-HOT");
    uint8_t buf[512];
    for (int i = 0; i < a->holds; i++) {
        snprintf(rid, sizeof rid, "r-%d-%d", a->thread, i);
        hf_record_t rec = harness_hold(rid, 0, "W1", "SKU-HOT", 1);
        size_t len = 0;
        if (codec_encode(&rec, buf, sizeof buf, &len, errstr, sizeof errstr) != HF_OK ||
            kafka_produce(kp, topic_name(HF_T_COUNTER_COMMANDS), -1, key, strlen(key), buf, len,
                          NULL, 0, NULL, errstr, sizeof errstr) != HF_OK)
            return (void *)1;
    }
    int rc = kafka_producer_flush(kp, 60000, errstr, sizeof errstr);
    uint64_t failed = kafka_producer_failed_count(kp);
    kafka_producer_destroy(kp);
    return (void *)(intptr_t)(rc != HF_OK || failed != 0);
}

static void test_concurrent_holds_never_oversell(void **state)
{
    harness_t h;
    harness_init(&h, "oversell");
    char key[128];
    pid_t pid = harness_start(&h, "a", "counter");
    hf_record_t feed = harness_feed("W1", "SKU-HOT", HF_FEED_RECEIVE, 1000, 1);
    harness_send(&h, HF_T_STOCK_FEED, harness_pair(key, "W1", "SKU-HOT"), &feed);
    harness_flush(&h);
    /* The two input topics are not ordered with each other: let the stock land. */
    assert_int_equal(harness_wait_count(&h, HF_T_STOCK_LEVELS, 1, WAIT_MS), 1);

    enum { PRODUCERS = 8, HOLDS_EACH = 2500 };
    pthread_t th[PRODUCERS];
    producer_arg_t args[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        args[i] = (producer_arg_t){&h, i, HOLDS_EACH};
        pthread_create(&th[i], NULL, hold_producer, &args[i]);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        void *rc = NULL;
        pthread_join(th[i], &rc);
        assert_null(rc);
    }
    size_t n = harness_wait_count(&h, HF_T_COUNTER_RESULTS, PRODUCERS * HOLDS_EACH, WAIT_MS);
    assert_int_equal(n, PRODUCERS * HOLDS_EACH);

    tally_t t = {0};
    harness_read(&h, HF_T_COUNTER_RESULTS, tally_result, &t);
    assert_int_equal(t.ok, 1000);
    assert_int_equal(t.insufficient, PRODUCERS * HOLDS_EACH - 1000);
    assert_int_equal(t.other, 0);

    levels_t l = {0};
    harness_read(&h, HF_T_STOCK_LEVELS, check_level, &l);
    assert_true(l.count > 0);
    assert_true(l.min_available >= 0);
    assert_true(l.min_reserved >= 0);
    assert_true(l.min_on_hand >= 0);

    hf_counter_state_t c;
    assert_true(harness_counter(&h, "W1", "SKU-HOT", &c));
    assert_int_equal(c.on_hand, 1000);
    assert_int_equal(c.reserved, 1000);
    assert_int_equal(c.on_hand - c.reserved - c.safety_stock, 0);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* ---- duplicates */

static void send_twice(harness_t *h, hf_topic_id_t topic, const char *key, const hf_record_t *rec)
{
    harness_send(h, topic, key, rec);
    harness_send(h, topic, key, rec);
}

static void test_every_command_sent_twice_is_applied_once(void **state)
{
    harness_t h;
    harness_init(&h, "dupes");
    char key[128];
    harness_pair(key, "W2", "SKU-D");
    pid_t pid = harness_start(&h, "a", "counter");
    hf_record_t r = harness_feed("W2", "SKU-D", HF_FEED_RECEIVE, 10, 1);
    send_twice(&h, HF_T_STOCK_FEED, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_STOCK_LEVELS, 1, WAIT_MS), 1);
    r = harness_hold("res-a", 0, "W2", "SKU-D", 3);
    send_twice(&h, HF_T_COUNTER_COMMANDS, key, &r);
    r = harness_hold("res-b", 0, "W2", "SKU-D", 4);
    send_twice(&h, HF_T_COUNTER_COMMANDS, key, &r);
    r = harness_commit_hold("res-a", 0, "W2", "SKU-D");
    send_twice(&h, HF_T_COUNTER_COMMANDS, key, &r);
    r = harness_release_hold("res-b", 0, "W2", "SKU-D");
    send_twice(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);

    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 8, WAIT_MS), 8);
    harness_sleep_ms(500); /* nothing more may arrive */
    tally_t t = {0};
    assert_int_equal(harness_read(&h, HF_T_COUNTER_RESULTS, tally_result, &t), 8);
    /* The repeat of each command gets the original answer again. */
    assert_int_equal(t.by_cmd[HF_CMD_HOLD][HF_OUTCOME_OK], 4);
    assert_int_equal(t.by_cmd[HF_CMD_COMMIT][HF_OUTCOME_OK], 2);
    assert_int_equal(t.by_cmd[HF_CMD_RELEASE][HF_OUTCOME_OK], 2);

    hf_counter_state_t c;
    assert_true(harness_counter(&h, "W2", "SKU-D", &c));
    assert_int_equal(c.on_hand, 7);  /* 10 received once, 3 sold once */
    assert_int_equal(c.reserved, 0); /* b released once */
    assert_int_equal(c.feed_seq, 1);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* ---- dead letters */

typedef struct {
    size_t count;
    char reasons[8][300];
} dead_t;

static void collect_dead(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    dead_t *d = opaque;
    assert_int_equal(rec->type, HF_REC_DEAD_LETTER);
    char hdr[300];
    assert_true(kafka_msg_header(msg, "hf.error", hdr, sizeof hdr));
    assert_string_equal(hdr, rec->u.dead_letter.reason);
    if (d->count < 8)
        snprintf(d->reasons[d->count], sizeof d->reasons[0], "%s", hdr);
    d->count++;
}

static void test_bad_records_go_to_dead_letters_and_the_stage_goes_on(void **state)
{
    harness_t h;
    harness_init(&h, "deadletter");
    char key[128];
    harness_pair(key, "W3", "SKU-X");
    pid_t pid = harness_start(&h, "a", "counter");
    hf_record_t r = harness_feed("W3", "SKU-X", HF_FEED_RECEIVE, 5, 1);
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_STOCK_LEVELS, 1, WAIT_MS), 1);
    harness_send_raw(&h, HF_T_COUNTER_COMMANDS, key, "garbage, not avro", 17);
    r = harness_hold("res-zero", 0, "W3", "SKU-X", 0);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    r = harness_hold("res-miskeyed", 0, "W3", "SKU-X", 1);
    harness_send(&h, HF_T_COUNTER_COMMANDS, "W3|OTHER", &r);
    r = harness_feed("W3", "SKU-X", HF_FEED_ADJUST, -50, 2);
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    r = harness_hold("res-good", 0, "W3", "SKU-X", 2);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);

    assert_int_equal(harness_wait_count(&h, HF_T_DEAD_LETTERS, 4, WAIT_MS), 4);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 1, WAIT_MS), 1);
    dead_t d = {0};
    harness_read(&h, HF_T_DEAD_LETTERS, collect_dead, &d);
    assert_int_equal(d.count, 4);
    int decode = 0, qty = 0, key_bad = 0, negative = 0;
    for (size_t i = 0; i < d.count; i++) {
        decode += strstr(d.reasons[i], "HF_ERR_DECODE") != NULL;
        qty += strstr(d.reasons[i], "qty 0 must be in [1,") != NULL;
        key_bad += strstr(d.reasons[i], "record key must be \"W3|SKU-X\"") != NULL;
        negative += strstr(d.reasons[i], "would make on_hand negative") != NULL;
    }
    assert_int_equal(decode + qty + key_bad + negative, 4);
    assert_true(decode == 1 && qty == 1 && key_bad == 1 && negative == 1);

    tally_t t = {0};
    harness_read(&h, HF_T_COUNTER_RESULTS, tally_result, &t);
    assert_int_equal(t.ok, 1);
    hf_counter_state_t c;
    assert_true(harness_counter(&h, "W3", "SKU-X", &c));
    assert_int_equal(c.on_hand, 5);
    assert_int_equal(c.reserved, 2);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* ---- cycle counts with an as-of point; a runaway feed_seq */

static void last_level(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    assert_int_equal(rec->type, HF_REC_STOCK_LEVEL);
    *(hf_stock_level_t *)opaque = rec->u.stock_level;
}

static void test_a_count_taken_before_a_commit_does_not_give_the_sold_unit_back(void **state)
{
    harness_t h;
    harness_init(&h, "asof");
    char key[128];
    harness_pair(key, "W4", "SKU-C");
    pid_t pid = harness_start(&h, "a", "counter");
    hf_record_t r = harness_feed("W4", "SKU-C", HF_FEED_RECEIVE, 5, 1);
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_STOCK_LEVELS, 1, WAIT_MS), 1);
    r = harness_hold("res-sold", 0, "W4", "SKU-C", 2);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 1, WAIT_MS), 1);

    /* The warehouse counts 5 on the shelf and notes the committed_total the
     * counter reports at that moment... */
    hf_counter_state_t c;
    assert_true(harness_counter(&h, "W4", "SKU-C", &c));
    int64_t as_of = c.committed_total;
    assert_int_equal(as_of, 0);
    /* ...the hold is sold before the count reaches the counter... */
    r = harness_commit_hold("res-sold", 0, "W4", "SKU-C");
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 2, WAIT_MS), 2);
    /* ...then the count arrives, with its as-of point. */
    r = harness_feed("W4", "SKU-C", HF_FEED_COUNT_AS_OF, 5, 2);
    r.u.stock_feed.as_of_committed = as_of;
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    /* A runaway feed_seq is dead-lettered, and the pair goes on counting. */
    r = harness_feed("W4", "SKU-C", HF_FEED_RECEIVE, 100, 2 + HF_FEED_SEQ_JUMP_MAX + 1);
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    r = harness_feed("W4", "SKU-C", HF_FEED_RECEIVE, 1, 3);
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_DEAD_LETTERS, 1, WAIT_MS), 1);
    dead_t d = {0};
    harness_read(&h, HF_T_DEAD_LETTERS, collect_dead, &d);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.reasons[0], "restart the numbering with feed_epoch 1"));

    /* The last feed applied (the dead letter changes nothing); the count and the
     * receive may share a transaction, and then one StockLevel. */
    int64_t until_ms = harness_now_ms() + WAIT_MS;
    while ((!harness_counter(&h, "W4", "SKU-C", &c) || c.feed_seq != 3) &&
           harness_now_ms() < until_ms)
        harness_sleep_ms(100);
    assert_int_equal(c.feed_seq, 3);
    assert_true(harness_wait_count(&h, HF_T_STOCK_LEVELS, 4, WAIT_MS) >= 4);
    /* 5 counted, 2 of them sold since: 3, then 1 received. A plain COUNT
     * would have made it 5 + 1: the 2 sold units back on sale. */
    assert_int_equal(c.on_hand, 4);
    assert_int_equal(c.committed_total, 2);
    hf_stock_level_t sl;
    memset(&sl, 0, sizeof sl);
    harness_read(&h, HF_T_STOCK_LEVELS, last_level, &sl);
    assert_int_equal(sl.on_hand, 4);
    assert_int_equal(sl.committed_total, 2);
    assert_int_equal(sl.feed_seq, 3);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* ---- restore after the state folder is lost */

static int rm_rf(const char *path)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

static void test_lost_state_is_restored_from_the_changelog(void **state)
{
    harness_t h;
    harness_init(&h, "restore");
    char key[128];
    harness_pair(key, "W4", "SKU-R");
    pid_t pid = harness_start(&h, "a", "counter");
    hf_record_t r = harness_feed("W4", "SKU-R", HF_FEED_RECEIVE, 50, 1);
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_STOCK_LEVELS, 1, WAIT_MS), 1);
    for (int i = 0; i < 20; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "res-%d", i);
        r = harness_hold(rid, 0, "W4", "SKU-R", 2); /* 40 reserved */
        harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    }
    r = harness_commit_hold("res-0", 0, "W4", "SKU-R"); /* on_hand 48, reserved 38 */
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 21, WAIT_MS), 21);
    assert_int_equal(harness_stop(pid), 0);

    char state_dir[600];
    snprintf(state_dir, sizeof state_dir, "%s/state-a", h.workdir);
    assert_int_equal(rm_rf(state_dir), 0);

    /* Only a restored counter answers these right: 10 available exactly, a
     * repeated hold re-answers OK without reserving, and res-0 stays committed. */
    r = harness_hold("res-5", 0, "W4", "SKU-R", 2);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    r = harness_hold("probe-fit", 0, "W4", "SKU-R", 10);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    r = harness_hold("probe-over", 0, "W4", "SKU-R", 1);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    r = harness_release_hold("res-0", 0, "W4", "SKU-R");
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    pid = harness_start(&h, "a", "counter");
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 25, WAIT_MS), 25);
    tally_t t = {0};
    harness_read(&h, HF_T_COUNTER_RESULTS, tally_result, &t);
    assert_int_equal(t.by_cmd[HF_CMD_HOLD][HF_OUTCOME_OK], 22);
    assert_int_equal(t.by_cmd[HF_CMD_HOLD][HF_OUTCOME_INSUFFICIENT], 1);
    assert_int_equal(t.by_cmd[HF_CMD_COMMIT][HF_OUTCOME_OK], 1);
    assert_int_equal(t.by_cmd[HF_CMD_RELEASE][HF_OUTCOME_CONFLICT], 1);
    hf_counter_state_t c;
    assert_true(harness_counter(&h, "W4", "SKU-R", &c));
    assert_int_equal(c.on_hand, 48);
    assert_int_equal(c.reserved, 48);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* Settled holds are forgotten after hold_retention_ms (here 5 s, allowed with a
 * 100 ms result_timeout_ms):
 * their records leave the changelog as tombstones, open holds stay, and a
 * counter restored from that changelog still holds what it must. */
typedef struct {
    size_t hold_puts, hold_tombstones;
} hold_keys_t;

static void count_hold_keys(void *opaque, const kafka_msg_t *msg, const hf_record_t *rec)
{
    hold_keys_t *k = opaque;
    if (msg->key_len == 0 || ((const char *)msg->key)[0] != 'H')
        return;
    if (msg->value)
        k->hold_puts++;
    else
        k->hold_tombstones++;
}

static void test_settled_holds_are_forgotten_after_retention(void **state)
{
    harness_t h;
    harness_init(&h, "hold-retention");
    char key[128];
    harness_pair(key, "W5", "SKU-G");
    pid_t pid = harness_start_with(&h, "a", "counter",
                                   "{\"hold_retention_ms\": 5000, \"result_timeout_ms\": 100}");
    hf_record_t r = harness_feed("W5", "SKU-G", HF_FEED_RECEIVE, 100, 1);
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    harness_flush(&h);
    /* The two input topics are not ordered with each other: stock first. */
    assert_int_equal(harness_wait_count(&h, HF_T_STOCK_LEVELS, 1, WAIT_MS), 1);
    for (int i = 0; i < 30; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "g-%d", i);
        r = harness_hold(rid, 0, "W5", "SKU-G", 1);
        harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
        r = i % 2 ? harness_commit_hold(rid, 0, "W5", "SKU-G")
                  : harness_release_hold(rid, 0, "W5", "SKU-G");
        harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    }
    r = harness_hold("open", 0, "W5", "SKU-G", 4);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 61, WAIT_MS), 61);

    hold_keys_t k = {0};
    int64_t deadline = harness_now_ms() + WAIT_MS;
    while (k.hold_tombstones < 30 && harness_now_ms() < deadline) {
        harness_sleep_ms(500);
        memset(&k, 0, sizeof k);
        harness_read(&h, HF_T_COUNTER_CHANGELOG, count_hold_keys, &k);
    }
    print_message("hold records: %zu written, %zu forgotten\n", k.hold_puts, k.hold_tombstones);
    assert_int_equal(k.hold_tombstones, 30); /* every settled one, never the open one */
    assert_int_equal(harness_stop(pid), 0);

    char state_dir[600];
    snprintf(state_dir, sizeof state_dir, "%s/state-a", h.workdir);
    assert_int_equal(rm_rf(state_dir), 0);
    r = harness_release_hold("open", 0, "W5", "SKU-G");
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    pid = harness_start_with(&h, "a", "counter",
                             "{\"hold_retention_ms\": 5000, \"result_timeout_ms\": 100}");
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 62, WAIT_MS), 62);
    tally_t t = {0};
    harness_read(&h, HF_T_COUNTER_RESULTS, tally_result, &t);
    assert_int_equal(t.by_cmd[HF_CMD_RELEASE][HF_OUTCOME_OK], 16); /* 15 + the open one */
    hf_counter_state_t c;
    assert_true(harness_counter(&h, "W5", "SKU-G", &c));
    assert_int_equal(c.on_hand, 85); /* 15 sold */
    assert_int_equal(c.reserved, 0);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

/* Counts occurrences of needle in the instance's log. */
static int log_count(const harness_t *h, const char *instance, const char *needle)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.log", h->workdir, instance);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Local state is brought up to date from its stored changelog offset only while
 * it is younger than state_max_age_ms (here 3 s); older, it may miss deletions
 * whose tombstones compaction has dropped, so it is rebuilt from the whole
 * changelog — and is right either way. */
static void test_old_local_state_is_rebuilt_from_the_whole_changelog(void **state)
{
    harness_t h;
    harness_init(&h, "state-age");
    const char *cfg = "{\"state_max_age_ms\": 3000}";
    char key[128];
    harness_pair(key, "W6", "SKU-O");
    pid_t pid = harness_start_with(&h, "a", "counter", cfg);
    hf_record_t r = harness_feed("W6", "SKU-O", HF_FEED_RECEIVE, 10, 1);
    harness_send(&h, HF_T_STOCK_FEED, key, &r);
    harness_flush(&h);
    /* The two input topics are not ordered with each other: stock first. */
    assert_int_equal(harness_wait_count(&h, HF_T_STOCK_LEVELS, 1, WAIT_MS), 1);
    r = harness_hold("o-1", 0, "W6", "SKU-O", 2);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 1, WAIT_MS), 1);
    assert_int_equal(harness_stop(pid), 0);

    pid = harness_start_with(&h, "a", "counter", cfg); /* young state: incremental */
    r = harness_hold("o-2", 0, "W6", "SKU-O", 2);
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 2, WAIT_MS), 2);
    assert_int_equal(harness_stop(pid), 0);
    assert_int_equal(log_count(&h, "a", "rebuilding it from the whole changelog"), 0);

    harness_sleep_ms(3500);
    pid = harness_start_with(&h, "a", "counter", cfg); /* old state: rebuilt */
    r = harness_hold("o-1", 0, "W6", "SKU-O", 2);      /* repeated: answered from the restore */
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    r = harness_hold("o-3", 0, "W6", "SKU-O", 7); /* 6 left: refused */
    harness_send(&h, HF_T_COUNTER_COMMANDS, key, &r);
    harness_flush(&h);
    assert_int_equal(harness_wait_count(&h, HF_T_COUNTER_RESULTS, 4, WAIT_MS), 4);
    assert_true(log_count(&h, "a", "rebuilding it from the whole changelog") >= 1);
    tally_t t = {0};
    harness_read(&h, HF_T_COUNTER_RESULTS, tally_result, &t);
    assert_int_equal(t.ok, 3);
    assert_int_equal(t.insufficient, 1);
    hf_counter_state_t c;
    assert_true(harness_counter(&h, "W6", "SKU-O", &c));
    assert_int_equal(c.on_hand, 10);
    assert_int_equal(c.reserved, 4);
    assert_int_equal(harness_stop(pid), 0);
    harness_cleanup(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_holds_never_oversell),
        cmocka_unit_test(test_every_command_sent_twice_is_applied_once),
        cmocka_unit_test(test_bad_records_go_to_dead_letters_and_the_stage_goes_on),
        cmocka_unit_test(test_a_count_taken_before_a_commit_does_not_give_the_sold_unit_back),
        cmocka_unit_test(test_lost_state_is_restored_from_the_changelog),
        cmocka_unit_test(test_settled_holds_are_forgotten_after_retention),
        cmocka_unit_test(test_old_local_state_is_rebuilt_from_the_whole_changelog),
    };
    return cmocka_run_group_tests_name("counter stage on a real broker", tests, NULL, NULL);
}
