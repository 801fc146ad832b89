/* A fake of processor/stage.h for unit tests of stage handlers: it defines every
 * stage_* function over a real state store in a temporary directory and the real
 * codec, captures every output as the record the handler gave, and drives a
 * stage's handler table the way task.c does, so handlers run without a broker.
 *
 * Link it only into the tests that need it (the Makefile's test_*_handlers
 * rule): processor/task.c defines the same stage_* symbols. Unlike the real
 * stage_ctx_t the struct is open, because a test reads what the handler did
 * (emits, written keys, the reject reason) and sets the clock, partition,
 * record key and the stage's environment (env) directly. */
#ifndef HF_FAKE_STAGE_H
#define HF_FAKE_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "hf_limits.h"
#include "records.h"
#include "route/route.h"
#include "stage.h"
#include "state.h"

/* Partitions of the fake: keys spread over them as they would after murmur2. */
#define FAKE_STAGE_PARTITIONS 4

typedef struct {
    int topic_id; /* hf_topic_id_t, or -1 when emitted with stage_emit_to */
    char topic[HF_TOPIC_LEN_MAX + 1];
    char key[HF_STATE_KEY_LEN_MAX];
    size_t key_len;
    hf_record_t rec; /* as the handler gave it: nothing is decoded */
} fake_stage_emit_t;

typedef struct {
    int32_t partition;
    char key[HF_STATE_KEY_LEN_MAX];
    size_t key_len;
} fake_stage_written_t;

/* One changelog record: a key's value at the end of a transaction (val NULL: a
 * tombstone), as the task would produce it. */
typedef struct {
    int32_t partition;
    char key[HF_STATE_KEY_LEN_MAX];
    size_t key_len;
    uint8_t *val;
    size_t val_len;
} fake_stage_changelog_t;

/* Whatever a test keeps beside the fake (fx->user); each test that needs one
 * defines it, the fake never looks inside. */
struct fake_stage_user;

struct stage_ctx {
    char dir[64]; /* the state store's temporary directory */
    state_t *st;
    state_buf_t *buf; /* this transaction's writes; fake_stage_commit writes them */
    int32_t partition;
    char key[HF_STATE_KEY_LEN_MAX]; /* the current record's Kafka key */
    size_t key_len;
    int64_t now_ms;              /* what stage_now_ms answers; the test moves it */
    int64_t record_timestamp_ms; /* what stage_record_timestamp_ms answers (0: unknown) */
    int input_type;              /* the applied record's type while it is handled, else -1 */
    fake_stage_emit_t *emits;    /* every output, in order; tests may reset emits_count */
    size_t emits_count, emits_cap;
    fake_stage_written_t *written; /* distinct keys written this transaction, first-write order */
    size_t written_count, written_cap;
    char reject_reason[HF_TEXT_LEN_MAX * 2];
    uint8_t valbuf[HF_RECORD_LEN_MAX];
    char errstr[512];
    fake_stage_changelog_t *changelog; /* every committed transaction's written keys */
    size_t changelog_count, changelog_cap;
    struct fake_stage_user *user; /* the test's own; NULL unless it sets one */
    /* What stage_env answers: the stage's environment, which the test builds
     * (the stage's init, or filled by hand) and owns; NULL until it sets one. */
    void *env;
};

/* Opens an empty state store in a new /tmp/hf_test_<name>.XXXXXX directory with
 * the clock at now_ms; fails the test (cmocka) on error. The caller owns the
 * returned context and passes it to fake_stage_destroy. */
stage_ctx_t *fake_stage_new(const char *name, int64_t now_ms);
/* Closes the store, removes its directory and frees ctx (not ctx->user); NULL is
 * fine. */
void fake_stage_destroy(stage_ctx_t *ctx);

/* The partition a record keyed by key lands in (a stable hash of the key). */
int32_t fake_stage_partition_of(const char *key);

/* Applies rec as task.c apply_record does: the Kafka key and partition come from
 * key, the reject reason is cleared, and the handler of rec's type in def's
 * table runs. A rejection (HF_ERR_INVAL) must leave no write, no written key, no
 * output and a reason behind; anything else must be HF_OK. Fails the test
 * otherwise; returns the handler's result. */
int fake_stage_apply(stage_ctx_t *ctx, const stage_def_t *def, const char *key,
                     const hf_record_t *rec);

/* Ends the transaction: the buffer goes to the store and the written keys are
 * forgotten. Fails the test if the store refuses the write. */
void fake_stage_commit(stage_ctx_t *ctx);

/* Drops every partition's state and rebuilds it from the changelog the commits
 * so far produced, calling def->reindex as the task's restore does: what a
 * crash that lost the local disk leaves. Fails the test on error. */
void fake_stage_restore(stage_ctx_t *ctx, const stage_def_t *def);
/* Appends a changelog record as an older version might have written it (val NULL:
 * a tombstone), without touching the store. */
void fake_stage_changelog_raw(stage_ctx_t *ctx, int32_t partition, const char *key, size_t key_len,
                              const void *val, size_t val_len);

/* The six warehouses the gateway's tests and benches route over (US cities). */
typedef struct {
    const char *id;
    double lat, lon;
} fake_warehouse_t;
#define FAKE_WAREHOUSES_COUNT 6
extern const fake_warehouse_t fake_warehouses[FAKE_WAREHOUSES_COUNT];
/* Appends them to routes (cost 1.0 per unit each) and sets the routing weights. */
void fake_stage_routes(route_config_t *routes);

#endif
