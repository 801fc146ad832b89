/* Unit tests of state/: read-your-writes through buffers, partition isolation and
 * drops, offsets, prefix iteration, and a randomized run against a sorted in-memory
 * model. Each test opens a fresh RocksDB in a temporary directory under /tmp. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_limits.h"
#include "state.h"

typedef struct {
    char dir[64];
    state_t *st;
} fixture_t;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int setup(void **ctx)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/hf_test_state.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char errstr[256] = "";
    int err = state_open(f->dir, NULL, &f->st, errstr, sizeof(errstr));
    if (err != HF_OK)
        fail_msg("state_open: %s", errstr);
    *ctx = f;
    return 0;
}

static int teardown(void **ctx)
{
    fixture_t *f = *ctx;
    state_close(f->st);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void reopen(fixture_t *f)
{
    char errstr[256] = "";
    state_close(f->st);
    f->st = NULL;
    if (state_open(f->dir, NULL, &f->st, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("state_open again: %s", errstr);
}

/* ---- helpers over C strings (the tests' keys and values are text unless noted) */

static void put(state_buf_t *buf, int32_t p, const char *k, const char *v)
{
    assert_int_equal(state_put(buf, p, k, strlen(k), v, strlen(v)), HF_OK);
}

static void del(state_buf_t *buf, int32_t p, const char *k)
{
    assert_int_equal(state_del(buf, p, k, strlen(k)), HF_OK);
}

static void write_buf(state_t *st, state_buf_t *buf)
{
    char errstr[256] = "";
    if (state_buf_write(st, buf, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("state_buf_write: %s", errstr);
    assert_int_equal(state_buf_count(buf), 0);
}

/* Value of k as a C string, or "<none>". */
static const char *get(state_t *st, state_buf_t *buf, int32_t p, const char *k)
{
    static char out[512];
    size_t n = 0;
    int err = state_get(st, buf, p, k, strlen(k), out, sizeof(out) - 1, &n);
    if (err == HF_ERR_NOTFOUND)
        return "<none>";
    assert_int_equal(err, HF_OK);
    out[n] = '\0';
    return out;
}

/* "k=v,k=v" of an iteration; bytes outside printable ASCII as \xHH. */
static void render(char *out, size_t out_size, size_t *at, const void *b, size_t n)
{
    const unsigned char *s = b;
    for (size_t i = 0; i < n; i++) {
        int w = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\')
                    ? snprintf(out + *at, out_size - *at, "%c", s[i])
                    : snprintf(out + *at, out_size - *at, "\\x%02x", s[i]);
        assert_true(w > 0 && (size_t)w < out_size - *at);
        *at += (size_t)w;
    }
}

/* Every entry a scan yields, "k=v,k=v"; after (may be NULL): start after it. */
static const char *scan_after(state_t *st, state_buf_t *buf, int32_t p, const char *prefix,
                              size_t prefix_len, bool reverse, const char *after)
{
    static char out[4096];
    size_t at = 0;
    out[0] = '\0';
    state_iter_t *it = state_iter_new(st, buf, p, prefix, prefix_len, reverse);
    assert_non_null(it);
    if (after)
        state_iter_start_after(it, p, after, strlen(after));
    const void *k, *v;
    size_t kl, vl;
    int n = 0;
    while (state_iter_next(it, &k, &kl, &v, &vl)) {
        assert_true(n++ < 1000);
        if (at > 0)
            render(out, sizeof(out), &at, ",", 1);
        render(out, sizeof(out), &at, k, kl);
        render(out, sizeof(out), &at, "=", 1);
        render(out, sizeof(out), &at, v, vl);
    }
    assert_false(state_iter_next(it, &k, &kl, &v, &vl)); /* stays at the end */
    state_iter_destroy(it);
    return out;
}

#define SCAN(st, buf, p, prefix, reverse)                                                          \
    scan_after(st, buf, p, prefix, strlen(prefix), reverse, NULL)

/* ---- read-your-writes */

static void test_buffered_put_is_visible_through_the_buffer_only_until_written(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 1, "k", "v1");
    assert_string_equal(get(f->st, buf, 1, "k"), "v1");
    assert_string_equal(get(f->st, NULL, 1, "k"), "<none>");
    state_buf_t *other = state_buf_new(f->st);
    assert_string_equal(get(f->st, other, 1, "k"), "<none>");
    write_buf(f->st, buf);
    assert_string_equal(get(f->st, NULL, 1, "k"), "v1");
    assert_string_equal(get(f->st, other, 1, "k"), "v1");
    assert_string_equal(get(f->st, buf, 1, "k"), "v1");
    state_buf_destroy(other);
    state_buf_destroy(buf);
}

static void test_buffered_delete_hides_a_db_value(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 1, "k", "v1");
    write_buf(f->st, buf);
    del(buf, 1, "k");
    assert_string_equal(get(f->st, buf, 1, "k"), "<none>");
    assert_string_equal(get(f->st, NULL, 1, "k"), "v1");
    write_buf(f->st, buf);
    assert_string_equal(get(f->st, NULL, 1, "k"), "<none>");
    state_buf_destroy(buf);
}

static void test_buffered_overwrite_wins_over_db_and_earlier_buffered_value(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 1, "k", "db");
    write_buf(f->st, buf);
    put(buf, 1, "k", "first");
    put(buf, 1, "k", "second");
    assert_string_equal(get(f->st, buf, 1, "k"), "second");
    del(buf, 1, "k");
    put(buf, 1, "k", "third");
    assert_string_equal(get(f->st, buf, 1, "k"), "third");
    assert_string_equal(get(f->st, NULL, 1, "k"), "db");
    write_buf(f->st, buf);
    assert_string_equal(get(f->st, NULL, 1, "k"), "third");
    state_buf_destroy(buf);
}

static void test_get_reports_the_needed_size_when_the_value_does_not_fit(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 1, "k", "0123456789");
    char small[4];
    size_t n = 0;
    assert_int_equal(state_get(f->st, buf, 1, "k", 1, small, sizeof(small), &n), HF_ERR_LIMIT);
    assert_int_equal(n, 10);
    write_buf(f->st, buf);
    n = 0;
    assert_int_equal(state_get(f->st, NULL, 1, "k", 1, small, sizeof(small), &n), HF_ERR_LIMIT);
    assert_int_equal(n, 10);
    assert_int_equal(state_get(f->st, NULL, 1, "k", 1, NULL, 0, &n), HF_ERR_LIMIT);
    assert_int_equal(n, 10);
    /* An empty value is a value, not an absence. */
    put(buf, 1, "e", "");
    assert_int_equal(state_get(f->st, buf, 1, "e", 1, small, sizeof(small), &n), HF_OK);
    assert_int_equal(n, 0);
    state_buf_destroy(buf);
}

/* state_get_buffered reads the buffer alone: a value only the DB holds is
 * NOTFOUND (the caller vouches the DB part is empty), a buffered one and a
 * buffered delete answer as through state_get. */
static void test_get_buffered_never_reads_the_db(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 1, "db", "in the db");
    write_buf(f->st, buf);
    char out[64];
    size_t n = 99;
    assert_string_equal(get(f->st, buf, 1, "db"), "in the db");
    assert_int_equal(state_get_buffered(buf, 1, "db", 2, out, sizeof out, &n), HF_ERR_NOTFOUND);
    assert_int_equal(n, 0);
    put(buf, 1, "b", "buffered");
    assert_int_equal(state_get_buffered(buf, 1, "b", 1, out, sizeof out, &n), HF_OK);
    assert_int_equal(n, 8);
    assert_memory_equal(out, "buffered", 8);
    /* Another partition's buffered key is not this one's. */
    assert_int_equal(state_get_buffered(buf, 2, "b", 1, out, sizeof out, &n), HF_ERR_NOTFOUND);
    del(buf, 1, "b");
    assert_int_equal(state_get_buffered(buf, 1, "b", 1, out, sizeof out, &n), HF_ERR_NOTFOUND);
    /* Too small a buffer and a bad key answer as state_get does. */
    put(buf, 1, "c", "0123456789");
    assert_int_equal(state_get_buffered(buf, 1, "c", 1, out, 4, &n), HF_ERR_LIMIT);
    assert_int_equal(n, 10);
    assert_int_equal(state_get_buffered(buf, -1, "c", 1, out, sizeof out, &n), HF_ERR_INVAL);
    state_buf_destroy(buf);
}

static void test_put_rejects_oversized_keys_values_and_negative_partitions(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    static char big[HF_RECORD_LEN_MAX + 1];
    memset(big, 'x', sizeof(big));
    assert_int_equal(state_put(buf, 1, big, HF_STATE_KEY_LEN_MAX + 1, "v", 1), HF_ERR_LIMIT);
    assert_int_equal(state_put(buf, 1, "k", 1, big, HF_RECORD_LEN_MAX + 1), HF_ERR_LIMIT);
    assert_int_equal(state_put(buf, -1, "k", 1, "v", 1), HF_ERR_INVAL);
    assert_int_equal(state_del(buf, -1, "k", 1), HF_ERR_INVAL);
    assert_int_equal(state_buf_count(buf), 0);
    /* The largest key and value do fit. */
    assert_int_equal(state_put(buf, 1, big, HF_STATE_KEY_LEN_MAX, big, HF_RECORD_LEN_MAX), HF_OK);
    write_buf(f->st, buf);
    static char out[HF_RECORD_LEN_MAX];
    size_t n = 0;
    assert_int_equal(state_get(f->st, NULL, 1, big, HF_STATE_KEY_LEN_MAX, out, sizeof(out), &n),
                     HF_OK);
    assert_int_equal(n, HF_RECORD_LEN_MAX);
    state_buf_destroy(buf);
}

/* ---- partitions */

static void test_same_key_in_two_partitions_holds_two_values(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 1, "k", "one");
    put(buf, 2, "k", "two");
    assert_string_equal(get(f->st, buf, 1, "k"), "one");
    assert_string_equal(get(f->st, buf, 2, "k"), "two");
    assert_string_equal(get(f->st, buf, 3, "k"), "<none>");
    write_buf(f->st, buf);
    assert_string_equal(get(f->st, NULL, 1, "k"), "one");
    assert_string_equal(get(f->st, NULL, 2, "k"), "two");
    del(buf, 1, "k");
    write_buf(f->st, buf);
    assert_string_equal(get(f->st, NULL, 1, "k"), "<none>");
    assert_string_equal(get(f->st, NULL, 2, "k"), "two");
    state_buf_destroy(buf);
}

static void test_drop_partition_removes_only_that_partition_and_its_offsets(void **ctx)
{
    fixture_t *f = *ctx;
    char errstr[256] = "";
    state_buf_t *buf = state_buf_new(f->st);
    /* 256 shares no byte pattern trouble with 1; 0xFF keys sit at the range's end. */
    const int32_t parts[] = {0, 1, 2, 256};
    for (size_t i = 0; i < 4; i++) {
        put(buf, parts[i], "a", "x");
        put(buf, parts[i], "\xff\xff", "y");
        assert_int_equal(state_buf_set_offsets(buf, parts[i], 10 + parts[i], 20, 1000), HF_OK);
    }
    write_buf(f->st, buf);
    if (state_drop_partition(f->st, 1, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("drop: %s", errstr);
    int64_t in, cl;
    assert_string_equal(get(f->st, NULL, 1, "a"), "<none>");
    assert_string_equal(get(f->st, NULL, 1, "\xff\xff"), "<none>");
    assert_int_equal(state_get_offsets(f->st, 1, &in, &cl, NULL), HF_OK);
    assert_int_equal(in, -1);
    assert_int_equal(cl, -1);
    assert_string_equal(SCAN(f->st, NULL, 1, "", false), "");
    const int32_t kept[] = {0, 2, 256};
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(SCAN(f->st, NULL, kept[i], "", false), "a=x,\\xff\\xff=y");
        assert_int_equal(state_get_offsets(f->st, kept[i], &in, &cl, NULL), HF_OK);
        assert_int_equal(in, 10 + kept[i]);
        assert_int_equal(cl, 20);
    }
    /* A dropped partition takes new writes again. */
    put(buf, 1, "a", "new");
    write_buf(f->st, buf);
    assert_string_equal(get(f->st, NULL, 1, "a"), "new");
    assert_int_equal(state_drop_partition(f->st, -1, errstr, sizeof(errstr)), HF_ERR_INVAL);
    state_buf_destroy(buf);
}

static void test_drop_partition_works_for_the_largest_partition(void **ctx)
{
    fixture_t *f = *ctx;
    char errstr[256] = "";
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, INT32_MAX, "\xff", "top");
    put(buf, INT32_MAX - 1, "\xff", "below");
    assert_int_equal(state_buf_set_offsets(buf, INT32_MAX, 5, 6, 1000), HF_OK);
    write_buf(f->st, buf);
    assert_string_equal(SCAN(f->st, NULL, INT32_MAX, "\xff", true), "\\xff=top");
    if (state_drop_partition(f->st, INT32_MAX, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("drop: %s", errstr);
    assert_string_equal(get(f->st, NULL, INT32_MAX, "\xff"), "<none>");
    assert_string_equal(get(f->st, NULL, INT32_MAX - 1, "\xff"), "below");
    int64_t in, cl;
    assert_int_equal(state_get_offsets(f->st, INT32_MAX, &in, &cl, NULL), HF_OK);
    assert_int_equal(in, -1);
    state_buf_destroy(buf);
}

/* ---- offsets */

static void test_offsets_are_absent_until_their_buffer_is_written(void **ctx)
{
    fixture_t *f = *ctx;
    int64_t in = 0, cl = 0;
    assert_int_equal(state_get_offsets(f->st, 3, &in, &cl, NULL), HF_OK);
    assert_int_equal(in, -1);
    assert_int_equal(cl, -1);
    state_buf_t *buf = state_buf_new(f->st);
    assert_int_equal(state_buf_set_offsets(buf, 3, 100, 200, 1000), HF_OK);
    assert_int_equal(state_get_offsets(f->st, 3, &in, &cl, NULL), HF_OK);
    assert_int_equal(in, -1);
    write_buf(f->st, buf);
    int64_t at = 0;
    assert_int_equal(state_get_offsets(f->st, 3, &in, &cl, &at), HF_OK);
    assert_int_equal(in, 100);
    assert_int_equal(cl, 200);
    assert_int_equal(at, 1000);
    assert_int_equal(state_get_offsets(f->st, 4, &in, &cl, &at), HF_OK);
    assert_int_equal(at, -1);
    assert_int_equal(state_get_offsets(f->st, 4, &in, &cl, NULL), HF_OK);
    assert_int_equal(in, -1);
    /* A cleared buffer takes its offsets with it. */
    assert_int_equal(state_buf_set_offsets(buf, 3, 101, 201, 1000), HF_OK);
    state_buf_clear(buf);
    write_buf(f->st, buf);
    assert_int_equal(state_get_offsets(f->st, 3, &in, &cl, NULL), HF_OK);
    assert_int_equal(in, 100);
    /* Large offsets keep all 64 bits. */
    assert_int_equal(state_buf_set_offsets(buf, 3, INT64_MAX, (int64_t)1 << 40, 1000), HF_OK);
    write_buf(f->st, buf);
    assert_int_equal(state_get_offsets(f->st, 3, &in, &cl, NULL), HF_OK);
    assert_true(in == INT64_MAX);
    assert_true(cl == (int64_t)1 << 40);
    assert_int_equal(state_buf_set_offsets(buf, 3, -2, 0, 1000), HF_ERR_INVAL);
    state_buf_destroy(buf);
}

/* A full restore's derive mark: stored by a buffer's write, per partition,
 * outside every caller key and scan, cleared by a write, gone with a drop, and
 * kept across a reopen (a killed restore's next start must see it). */
static void test_derive_mark_is_per_partition_outside_the_keys_and_goes_with_a_drop(void **ctx)
{
    fixture_t *f = *ctx;
    char errstr[256] = "";
    bool pending = true;
    assert_int_equal(state_get_derive_pending(f->st, 5, &pending), HF_OK);
    assert_false(pending);
    state_buf_t *buf = state_buf_new(f->st);
    assert_int_equal(state_buf_set_derive_pending(buf, 5, true), HF_OK);
    assert_int_equal(state_get_derive_pending(f->st, 5, &pending), HF_OK);
    assert_false(pending); /* not before the write */
    put(buf, 5, "a", "x");
    assert_int_equal(state_buf_set_offsets(buf, 5, 1, 2, 1000), HF_OK);
    write_buf(f->st, buf);
    state_buf_destroy(buf);
    assert_int_equal(state_get_derive_pending(f->st, 5, &pending), HF_OK);
    assert_true(pending);
    assert_int_equal(state_get_derive_pending(f->st, 6, &pending), HF_OK);
    assert_false(pending);
    assert_string_equal(SCAN(f->st, NULL, 5, "", false), "a=x");
    int64_t in, cl;
    assert_int_equal(state_get_offsets(f->st, 5, &in, &cl, NULL), HF_OK);
    assert_int_equal(cl, 2);
    reopen(f);
    assert_int_equal(state_get_derive_pending(f->st, 5, &pending), HF_OK);
    assert_true(pending);
    buf = state_buf_new(f->st);
    assert_int_equal(state_buf_set_derive_pending(buf, 5, false), HF_OK);
    write_buf(f->st, buf);
    assert_int_equal(state_get_derive_pending(f->st, 5, &pending), HF_OK);
    assert_false(pending);
    assert_int_equal(state_buf_set_derive_pending(buf, 5, true), HF_OK);
    write_buf(f->st, buf);
    if (state_drop_partition(f->st, 5, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("drop: %s", errstr);
    assert_int_equal(state_get_derive_pending(f->st, 5, &pending), HF_OK);
    assert_false(pending);
    assert_int_equal(state_buf_set_derive_pending(buf, -1, true), HF_ERR_INVAL);
    assert_int_equal(state_get_derive_pending(f->st, -1, &pending), HF_ERR_INVAL);
    state_buf_destroy(buf);
}

static void test_offsets_and_values_survive_close_and_reopen(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 7, "k", "kept");
    put(buf, 7, "gone", "x");
    assert_int_equal(state_buf_set_offsets(buf, 7, 42, 43, 1000), HF_OK);
    write_buf(f->st, buf);
    del(buf, 7, "gone");
    write_buf(f->st, buf);
    put(buf, 7, "pending", "never written");
    state_buf_destroy(buf);
    reopen(f);
    int64_t in, cl;
    assert_int_equal(state_get_offsets(f->st, 7, &in, &cl, NULL), HF_OK);
    assert_int_equal(in, 42);
    assert_int_equal(cl, 43);
    assert_string_equal(get(f->st, NULL, 7, "k"), "kept");
    assert_string_equal(get(f->st, NULL, 7, "gone"), "<none>");
    assert_string_equal(get(f->st, NULL, 7, "pending"), "<none>");
}

/* ---- iteration */

/* DB: a1 b1 b3 b5 c1; buffer: put b2, delete b3, overwrite b5, put b6. */
static state_buf_t *iter_fixture(state_t *st)
{
    state_buf_t *buf = state_buf_new(st);
    put(buf, 1, "a1", "db");
    put(buf, 1, "b1", "db");
    put(buf, 1, "b3", "db");
    put(buf, 1, "b5", "db");
    put(buf, 1, "c1", "db");
    write_buf(st, buf);
    put(buf, 1, "b2", "buf");
    del(buf, 1, "b3");
    put(buf, 1, "b5", "buf");
    put(buf, 1, "b6", "buf");
    return buf;
}

static void test_iterator_forward_merges_buffer_over_db(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = iter_fixture(f->st);
    assert_string_equal(SCAN(f->st, buf, 1, "b", false), "b1=db,b2=buf,b5=buf,b6=buf");
    assert_string_equal(SCAN(f->st, NULL, 1, "b", false), "b1=db,b3=db,b5=db");
    assert_string_equal(SCAN(f->st, buf, 1, "b5", false), "b5=buf");
    assert_string_equal(SCAN(f->st, buf, 1, "b3", false), "");
    assert_string_equal(SCAN(f->st, buf, 1, "x", false), "");
    state_buf_destroy(buf);
}

static void test_iterator_resumes_after_a_key_through_buffer_and_db(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = iter_fixture(f->st);
    /* A bounded scan resuming where the last one stopped (the counter's sweep). */
    assert_string_equal(scan_after(f->st, buf, 1, "b", 1, false, "b2"), "b5=buf,b6=buf");
    assert_string_equal(scan_after(f->st, buf, 1, "b", 1, false, "b3"), "b5=buf,b6=buf");
    assert_string_equal(scan_after(f->st, NULL, 1, "b", 1, false, "b1"), "b3=db,b5=db");
    assert_string_equal(scan_after(f->st, buf, 1, "b", 1, false, "a9"),
                        "b1=db,b2=buf,b5=buf,b6=buf");
    assert_string_equal(scan_after(f->st, buf, 1, "b", 1, false, "b6"), "");
    assert_string_equal(scan_after(f->st, buf, 1, "b", 1, false, "c"), "");
    state_buf_destroy(buf);
}

static void test_iterator_reverse_merges_buffer_over_db(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = iter_fixture(f->st);
    assert_string_equal(SCAN(f->st, buf, 1, "b", true), "b6=buf,b5=buf,b2=buf,b1=db");
    assert_string_equal(SCAN(f->st, NULL, 1, "b", true), "b5=db,b3=db,b1=db");
    assert_string_equal(SCAN(f->st, buf, 1, "b6", true), "b6=buf");
    assert_string_equal(SCAN(f->st, buf, 1, "b3", true), "");
    state_buf_destroy(buf);
}

/* The DB side of a merged iterator honours bounds, the buffered side does not:
 * buffered keys just outside the prefix or in the next partition must not leak. */
static void test_iterator_never_leaves_its_prefix_or_partition(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = iter_fixture(f->st);
    put(buf, 1, "a9", "below");
    put(buf, 1, "c0", "above");
    put(buf, 1, "c", "exactly the upper bound"); /* where a reverse scan seeks */
    put(buf, 1, "b\xff\xff", "edge");
    put(buf, 2, "b0", "next partition");
    put(buf, 0, "b9", "previous partition");
    assert_string_equal(SCAN(f->st, buf, 1, "b", false),
                        "b1=db,b2=buf,b5=buf,b6=buf,b\\xff\\xff=edge");
    assert_string_equal(SCAN(f->st, buf, 1, "b", true),
                        "b\\xff\\xff=edge,b6=buf,b5=buf,b2=buf,b1=db");
    /* An all-0xFF prefix's range ends at the next partition. */
    put(buf, 1, "\xff", "ff");
    put(buf, 2, "\xff", "other");
    assert_string_equal(SCAN(f->st, buf, 1, "\xff", false), "\\xff=ff");
    assert_string_equal(SCAN(f->st, buf, 1, "\xff", true), "\\xff=ff");
    write_buf(f->st, buf);
    assert_string_equal(SCAN(f->st, NULL, 1, "b", false),
                        "b1=db,b2=buf,b5=buf,b6=buf,b\\xff\\xff=edge");
    assert_string_equal(SCAN(f->st, buf, 2, "", true), "\\xff=other,b0=next partition");
    state_buf_destroy(buf);
}

static void test_iterator_with_empty_prefix_sees_the_partition_but_not_its_offsets(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    assert_string_equal(SCAN(f->st, buf, 1, "", false), "");
    assert_string_equal(SCAN(f->st, buf, 1, "", true), "");
    put(buf, 1, "b", "1");
    assert_int_equal(state_buf_set_offsets(buf, 1, 1, 1, 1000), HF_OK);
    assert_int_equal(state_buf_set_offsets(buf, 2, 1, 1, 1000), HF_OK);
    assert_string_equal(SCAN(f->st, buf, 1, "", false), "b=1");
    write_buf(f->st, buf);
    put(buf, 1, "a", "2");
    put(buf, 1, "\x01", "3");
    assert_string_equal(SCAN(f->st, buf, 1, "", false), "\\x01=3,a=2,b=1");
    assert_string_equal(SCAN(f->st, buf, 1, "", true), "b=1,a=2,\\x01=3");
    assert_string_equal(SCAN(f->st, NULL, 1, "", true), "b=1");
    assert_string_equal(SCAN(f->st, NULL, 2, "", true), "");
    state_buf_destroy(buf);
}

/* A timer scan deletes entries as it goes: the returned pointers stay valid across
 * buffer writes, and later deletes of keys ahead are seen by the scan. */
static void test_iterator_sees_buffer_writes_made_while_scanning(void **ctx)
{
    fixture_t *f = *ctx;
    static const char big[HF_RECORD_LEN_MAX] = {'x'};
    for (int reverse = 0; reverse <= 1; reverse++) {
        state_buf_t *buf = iter_fixture(f->st);
        const char *ahead = reverse ? "b5" : "b2"; /* the very next entry */
        state_iter_t *it = state_iter_new(f->st, buf, 1, "b", 1, reverse);
        assert_non_null(it);
        const void *k, *v;
        size_t kl, vl;
        char seen[256] = "";
        while (state_iter_next(it, &k, &kl, &v, &vl)) {
            char key[16];
            assert_true(kl < sizeof(key));
            memcpy(key, k, kl);
            key[kl] = '\0';
            assert_int_equal(state_del(buf, 1, k, kl), HF_OK);
            put(buf, 1, "b6", "rewritten");
            /* Grows the batch's memory, so it moves. */
            for (int i = 0; i < 4; i++)
                assert_int_equal(state_put(buf, 1, "z", 1, big, sizeof(big)), HF_OK);
            if (strcmp(key, "b1") == 0 || strcmp(key, "b6") == 0)
                del(buf, 1, ahead);
            /* Still the entry returned, after the writes. memcmp, not cmocka's
             * uninstrumented compare, so that ASan sees a dangling pointer. */
            assert_true(memcmp(k, key, kl) == 0);
            assert_true((vl == 2 && memcmp(v, "db", 2) == 0) ||
                        (vl == 3 && memcmp(v, "buf", 3) == 0) ||
                        (vl == 9 && memcmp(v, "rewritten", 9) == 0));
            strcat(seen, key);
            strcat(seen, " ");
        }
        state_iter_destroy(it);
        assert_string_equal(seen, reverse ? "b6 b2 b1 " : "b1 b5 b6 ");
        assert_string_equal(SCAN(f->st, buf, 1, "b", false), "b6=rewritten");
        state_buf_destroy(buf);
        char errstr[128];
        assert_int_equal(state_drop_partition(f->st, 1, errstr, sizeof(errstr)), HF_OK);
    }
}

/* ---- buffer bookkeeping */

static void test_buf_clear_drops_pending_writes(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    put(buf, 1, "kept", "1");
    write_buf(f->st, buf);
    put(buf, 1, "k", "v");
    del(buf, 1, "kept");
    state_buf_clear(buf);
    assert_int_equal(state_buf_count(buf), 0);
    assert_string_equal(get(f->st, buf, 1, "k"), "<none>");
    assert_string_equal(get(f->st, buf, 1, "kept"), "1");
    assert_string_equal(SCAN(f->st, buf, 1, "", false), "kept=1");
    write_buf(f->st, buf);
    assert_string_equal(get(f->st, NULL, 1, "k"), "<none>");
    assert_string_equal(get(f->st, NULL, 1, "kept"), "1");
    state_buf_destroy(buf);
}

static void test_buf_count_counts_pending_operations(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    assert_int_equal(state_buf_count(buf), 0);
    put(buf, 1, "a", "1");
    put(buf, 2, "a", "1");
    del(buf, 1, "b");
    assert_int_equal(state_buf_count(buf), 3);
    put(buf, 1, "a", "2"); /* an overwrite is one more operation */
    assert_int_equal(state_buf_count(buf), 4);
    assert_int_equal(state_buf_set_offsets(buf, 1, 1, 1, 1000), HF_OK);
    assert_int_equal(state_buf_count(buf), 5);
    write_buf(f->st, buf);
    assert_int_equal(state_buf_count(buf), 0);
    state_buf_destroy(buf);
}

/* Far more keys than the buffer's first table and arena chunk hold, values that
 * grow past their first allocation, and a buffer reused after a clear. */
enum { BIG_KEYS = 70000 };

static void big_key(char *k, size_t k_size, int i)
{
    /* Descending in key order as i rises, so the buffer has to sort. */
    snprintf(k, k_size, "k%06d", BIG_KEYS - i);
}

static void test_large_buffer_reads_iterates_and_writes_every_key_once(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = state_buf_new(f->st);
    static char big[HF_RECORD_LEN_MAX];
    memset(big, 'v', sizeof(big));
    char k[16], out[64];
    size_t n;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < BIG_KEYS; i++) {
            big_key(k, sizeof(k), i);
            assert_int_equal(state_put(buf, 3, k, strlen(k), "s", 1), HF_OK);
        }
        /* Rewrites: a few values grow (one to the largest value), the rest shrink
         * or are deleted. */
        for (int i = 0; i < BIG_KEYS; i += 7) {
            big_key(k, sizeof(k), i);
            if (i % 2 == 0)
                assert_int_equal(state_del(buf, 3, k, strlen(k)), HF_OK);
            else
                assert_int_equal(state_put(buf, 3, k, strlen(k), big, i == 7 ? sizeof(big) : 40),
                                 HF_OK);
        }
        assert_int_equal(state_buf_count(buf), BIG_KEYS + (BIG_KEYS + 6) / 7);
        for (int i = 0; i < BIG_KEYS; i += 1001) {
            big_key(k, sizeof(k), i);
            int err = state_get(f->st, buf, 3, k, strlen(k), out, sizeof(out), &n);
            if (i % 7 == 0 && i % 2 == 0) {
                assert_int_equal(err, HF_ERR_NOTFOUND);
            } else if (i % 7 == 0) {
                assert_int_equal(err, i == 7 ? HF_ERR_LIMIT : HF_OK);
                assert_int_equal(n, i == 7 ? sizeof(big) : 40);
            } else {
                assert_int_equal(err, HF_OK);
                assert_int_equal(n, 1);
            }
        }
        if (round == 0) { /* the first round is thrown away */
            state_buf_clear(buf);
            assert_int_equal(state_buf_count(buf), 0);
            assert_int_equal(state_get(f->st, buf, 3, "k000001", 7, out, sizeof(out), &n),
                             HF_ERR_NOTFOUND);
        }
    }
    /* Through the buffer and, once written, from the DB alone: the same keys in
     * ascending order. */
    for (int through = 1; through >= 0; through--) {
        if (!through)
            write_buf(f->st, buf);
        state_iter_t *it = state_iter_new(f->st, through ? buf : NULL, 3, "k", 1, false);
        assert_non_null(it);
        const void *key, *v;
        size_t kl, vl, seen = 0;
        char prev[16] = "";
        while (state_iter_next(it, &key, &kl, &v, &vl)) {
            assert_true(kl < sizeof(k));
            memcpy(k, key, kl);
            k[kl] = '\0';
            assert_true(strcmp(prev, k) < 0);
            memcpy(prev, k, kl + 1);
            seen++;
        }
        state_iter_destroy(it);
        size_t deleted = (BIG_KEYS + 13) / 14;
        assert_int_equal(seen, BIG_KEYS - deleted);
    }
    assert_int_equal(state_buf_count(buf), 0);
    state_buf_destroy(buf);
}

/* A key the buffer first takes while a scan is open is not part of that scan
 * (the scan's buffered keys are fixed when it opens); the next scan sees it. */
static void test_iterator_does_not_see_keys_new_to_the_buffer_after_it_opened(void **ctx)
{
    fixture_t *f = *ctx;
    state_buf_t *buf = iter_fixture(f->st);
    state_iter_t *it = state_iter_new(f->st, buf, 1, "b", 1, false);
    assert_non_null(it);
    const void *k, *v;
    size_t kl, vl;
    assert_true(state_iter_next(it, &k, &kl, &v, &vl));
    assert_memory_equal(k, "b1", 2);
    put(buf, 1, "b4", "new");
    char seen[64] = "";
    while (state_iter_next(it, &k, &kl, &v, &vl)) {
        strncat(seen, k, kl);
        strcat(seen, " ");
    }
    state_iter_destroy(it);
    assert_string_equal(seen, "b2 b5 b6 ");
    assert_string_equal(SCAN(f->st, buf, 1, "b", false), "b1=db,b2=buf,b4=new,b5=buf,b6=buf");
    state_buf_destroy(buf);
}

/* ---- sharing */

enum { T_THREADS = 4, T_ROUNDS = 300 };

typedef struct {
    state_t *st;
    int32_t partition;
    int mismatches;
} worker_t;

/* One buffer per thread over the shared state; cmocka asserts are not thread-safe,
 * so a worker counts what it saw wrong. */
static void *worker(void *arg)
{
    worker_t *w = arg;
    state_buf_t *buf = state_buf_new(w->st);
    char k[16], v[32], out[32];
    size_t n;
    for (int i = 0; i < T_ROUNDS; i++) {
        int kl = snprintf(k, sizeof(k), "k%03d", i % 50);
        int vl = snprintf(v, sizeof(v), "p%d-%d", w->partition, i);
        w->mismatches += state_put(buf, w->partition, k, (size_t)kl, v, (size_t)vl) != HF_OK;
        int err = state_get(w->st, buf, w->partition, k, (size_t)kl, out, sizeof(out), &n);
        w->mismatches += err != HF_OK || n != (size_t)vl || memcmp(out, v, n) != 0;
        if (i % 10 == 9) {
            w->mismatches += state_buf_write(w->st, buf, NULL, 0) != HF_OK;
            err = state_get(w->st, NULL, w->partition, k, (size_t)kl, out, sizeof(out), &n);
            w->mismatches += err != HF_OK || n != (size_t)vl || memcmp(out, v, n) != 0;
        }
    }
    state_buf_destroy(buf);
    return NULL;
}

static void test_threads_share_one_state_with_a_buffer_each(void **ctx)
{
    fixture_t *f = *ctx;
    pthread_t th[T_THREADS];
    worker_t w[T_THREADS];
    for (int i = 0; i < T_THREADS; i++) {
        w[i] = (worker_t){.st = f->st, .partition = i};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &w[i]), 0);
    }
    for (int i = 0; i < T_THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].mismatches, 0);
    }
    for (int i = 0; i < T_THREADS; i++) {
        char want[32];
        snprintf(want, sizeof(want), "p%d-%d", i, T_ROUNDS - 1);
        assert_string_equal(get(f->st, NULL, i, "k049"), want);
    }
}

/* Stages share the process's block cache; closing one DB leaves the other whole. */
static void test_two_dbs_in_one_process_work_independently(void **ctx)
{
    fixture_t *f = *ctx;
    fixture_t *g = NULL;
    state_opts_t opts = {.block_cache_bytes = 1 << 20};
    assert_int_equal(setup((void **)&g), 0);
    state_close(g->st);
    char errstr[256] = "";
    if (state_open(g->dir, &opts, &g->st, errstr, sizeof(errstr)) != HF_OK)
        fail_msg("state_open: %s", errstr);
    state_buf_t *bf = state_buf_new(f->st);
    state_buf_t *bg = state_buf_new(g->st);
    put(bf, 1, "k", "in f");
    put(bg, 1, "k", "in g");
    write_buf(f->st, bf);
    write_buf(g->st, bg);
    state_buf_destroy(bf);
    reopen(f); /* the other DB keeps the cache alive meanwhile */
    put(bg, 1, "k2", "still g");
    write_buf(g->st, bg);
    assert_string_equal(get(f->st, NULL, 1, "k"), "in f");
    assert_string_equal(get(g->st, NULL, 1, "k"), "in g");
    assert_string_equal(get(g->st, bg, 1, "k2"), "still g");
    state_buf_destroy(bg);
    /* Opening a DB a second time is refused while it is open. */
    state_t *again = NULL;
    assert_int_equal(state_open(g->dir, NULL, &again, errstr, sizeof(errstr)), HF_ERR_IO);
    assert_null(again);
    assert_true(strlen(errstr) > 0);
    assert_int_equal(teardown((void **)&g), 0);
    assert_string_equal(get(f->st, NULL, 1, "k"), "in f");
}

/* ---- randomized comparison against a model */

enum {
    M_PARTS = 3,
    M_KEYS = 39, /* first byte of 3, then 0..2 bytes of 3: 3 * (1 + 3 + 9) */
    M_VAL_MAX = 600,
    M_OPS = 10000,
};
static const int32_t m_parts[M_PARTS] = {1, 2, INT32_MAX};
static const uint8_t m_first[3] = {'a', 'b', 'c'};
static const uint8_t m_rest[3] = {0x00, 'a', 0xff};

typedef struct {
    uint8_t b[3];
    size_t len;
} m_key_t;

typedef struct {
    bool has;
    size_t len;
    uint8_t v[M_VAL_MAX];
} m_val_t;

typedef struct {
    m_val_t db[M_PARTS][M_KEYS];
    int pend[M_PARTS][M_KEYS]; /* 0 none, 1 put, 2 delete */
    m_val_t pend_val[M_PARTS][M_KEYS];
    int64_t off_db[M_PARTS][2];
    bool off_pend_has[M_PARTS];
    int64_t off_pend[M_PARTS][2];
    size_t pend_ops;
} model_t;

static m_key_t m_keys[M_KEYS]; /* sorted: the model's "sorted array" order */
static uint64_t m_rng;

static uint64_t rnd(void)
{
    uint64_t z = (m_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t rnd_below(size_t n)
{
    return (size_t)(rnd() % n);
}

static int m_key_cmp(const void *a, const void *b)
{
    const m_key_t *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->b, y->b, n);
    return c != 0 ? c : (int)x->len - (int)y->len;
}

static void m_keys_init(void)
{
    size_t n = 0;
    for (int a = 0; a < 3; a++) {
        m_keys[n++] = (m_key_t){{m_first[a]}, 1};
        for (int b = 0; b < 3; b++) {
            m_keys[n++] = (m_key_t){{m_first[a], m_rest[b]}, 2};
            for (int c = 0; c < 3; c++)
                m_keys[n++] = (m_key_t){{m_first[a], m_rest[b], m_rest[c]}, 3};
        }
    }
    assert_int_equal(n, M_KEYS);
    qsort(m_keys, M_KEYS, sizeof(m_keys[0]), m_key_cmp);
}

/* What a read through the buffer (or not) sees. */
static const m_val_t *m_view(const model_t *m, size_t p, size_t k, bool through_buf)
{
    static const m_val_t absent;
    if (through_buf && m->pend[p][k] == 1)
        return &m->pend_val[p][k];
    if (through_buf && m->pend[p][k] == 2)
        return &absent;
    return &m->db[p][k];
}

static void m_check_get(state_t *st, state_buf_t *buf, const model_t *m, size_t p, size_t k)
{
    bool through = rnd_below(5) != 0;
    static uint8_t out[M_VAL_MAX];
    size_t cap = rnd_below(4) == 0 ? 8 : sizeof(out);
    size_t n = 12345;
    const m_val_t *want = m_view(m, p, k, through);
    int err =
        state_get(st, through ? buf : NULL, m_parts[p], m_keys[k].b, m_keys[k].len, out, cap, &n);
    if (!want->has) {
        assert_int_equal(err, HF_ERR_NOTFOUND);
        return;
    }
    assert_int_equal(n, want->len);
    if (want->len > cap) {
        assert_int_equal(err, HF_ERR_LIMIT);
        return;
    }
    assert_int_equal(err, HF_OK);
    if (want->len > 0)
        assert_memory_equal(out, want->v, want->len);
}

static void m_check_iter(state_t *st, state_buf_t *buf, const model_t *m, size_t p)
{
    bool through = rnd_below(4) != 0;
    bool reverse = rnd_below(2) != 0;
    m_key_t prefix = m_keys[rnd_below(M_KEYS)];
    prefix.len = rnd_below(prefix.len + 1);
    state_iter_t *it =
        state_iter_new(st, through ? buf : NULL, m_parts[p], prefix.b, prefix.len, reverse);
    assert_non_null(it);
    const void *k, *v;
    size_t kl, vl;
    for (size_t i = 0; i < M_KEYS; i++) {
        size_t ki = reverse ? M_KEYS - 1 - i : i;
        const m_val_t *want = m_view(m, p, ki, through);
        if (!want->has || memcmp(m_keys[ki].b, prefix.b, prefix.len) != 0 ||
            m_keys[ki].len < prefix.len)
            continue;
        assert_true(state_iter_next(it, &k, &kl, &v, &vl));
        assert_int_equal(kl, m_keys[ki].len);
        assert_memory_equal(k, m_keys[ki].b, kl);
        assert_int_equal(vl, want->len);
        if (vl > 0)
            assert_memory_equal(v, want->v, vl);
    }
    assert_false(state_iter_next(it, &k, &kl, &v, &vl));
    state_iter_destroy(it);
}

static void m_write(state_t *st, state_buf_t *buf, model_t *m)
{
    write_buf(st, buf);
    for (size_t p = 0; p < M_PARTS; p++) {
        for (size_t k = 0; k < M_KEYS; k++) {
            if (m->pend[p][k] == 1)
                m->db[p][k] = m->pend_val[p][k];
            if (m->pend[p][k] == 2)
                m->db[p][k].has = false;
            m->pend[p][k] = 0;
        }
        if (m->off_pend_has[p])
            memcpy(m->off_db[p], m->off_pend[p], sizeof(m->off_db[p]));
        m->off_pend_has[p] = false;
    }
    m->pend_ops = 0;
}

static void m_clear(state_buf_t *buf, model_t *m)
{
    state_buf_clear(buf);
    memset(m->pend, 0, sizeof(m->pend));
    memset(m->off_pend_has, 0, sizeof(m->off_pend_has));
    m->pend_ops = 0;
}

static void m_put(state_buf_t *buf, model_t *m, size_t p, size_t k)
{
    m_val_t *pv = &m->pend_val[p][k];
    pv->has = true;
    pv->len = rnd_below(8) == 0 ? rnd_below(M_VAL_MAX + 1) : rnd_below(12);
    for (size_t i = 0; i < pv->len; i++)
        pv->v[i] = (uint8_t)rnd();
    assert_int_equal(state_put(buf, m_parts[p], m_keys[k].b, m_keys[k].len, pv->v, pv->len), HF_OK);
    m->pend[p][k] = 1;
    m->pend_ops++;
}

static void m_offsets(state_t *st, state_buf_t *buf, model_t *m, size_t p)
{
    int64_t in, cl;
    if (rnd_below(2) == 0) {
        m->off_pend_has[p] = true;
        m->off_pend[p][0] = (int64_t)rnd_below(1u << 30);
        m->off_pend[p][1] = (int64_t)rnd_below(1u << 30);
        assert_int_equal(
            state_buf_set_offsets(buf, m_parts[p], m->off_pend[p][0], m->off_pend[p][1], 1000),
            HF_OK);
        m->pend_ops++;
        return;
    }
    assert_int_equal(state_get_offsets(st, m_parts[p], &in, &cl, NULL), HF_OK);
    assert_true(in == m->off_db[p][0]);
    assert_true(cl == m->off_db[p][1]);
}

static void m_drop(state_t *st, model_t *m, size_t p)
{
    char errstr[256];
    assert_int_equal(state_drop_partition(st, m_parts[p], errstr, sizeof(errstr)), HF_OK);
    for (size_t k = 0; k < M_KEYS; k++)
        m->db[p][k].has = false;
    m->off_db[p][0] = m->off_db[p][1] = -1;
}

static void test_random_operations_match_a_sorted_model(void **ctx)
{
    fixture_t *f = *ctx;
    const char *seed_env = getenv("HF_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 0x5EEDull;
    m_rng = seed;
    print_message("random model seed %llu (HF_TEST_SEED)\n", (unsigned long long)seed);
    m_keys_init();
    model_t *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    for (size_t p = 0; p < M_PARTS; p++)
        m->off_db[p][0] = m->off_db[p][1] = -1;
    state_buf_t *buf = state_buf_new(f->st);
    for (int op = 0; op < M_OPS; op++) {
        size_t p = rnd_below(M_PARTS), k = rnd_below(M_KEYS), r = rnd_below(1000);
        if (r < 300) {
            m_put(buf, m, p, k);
        } else if (r < 450) {
            assert_int_equal(state_del(buf, m_parts[p], m_keys[k].b, m_keys[k].len), HF_OK);
            m->pend[p][k] = 2;
            m->pend_ops++;
        } else if (r < 750) {
            m_check_get(f->st, buf, m, p, k);
        } else if (r < 850) {
            m_check_iter(f->st, buf, m, p);
        } else if (r < 920) {
            m_write(f->st, buf, m);
        } else if (r < 935) {
            m_clear(buf, m);
        } else if (r < 990) {
            m_offsets(f->st, buf, m, p);
        } else if (r < 997) {
            m_drop(f->st, m, p);
        } else {
            /* A restart: pending writes are lost, written ones survive. */
            state_buf_destroy(buf);
            memset(m->pend, 0, sizeof(m->pend));
            memset(m->off_pend_has, 0, sizeof(m->off_pend_has));
            m->pend_ops = 0;
            reopen(f);
            buf = state_buf_new(f->st);
        }
        assert_int_equal(state_buf_count(buf), m->pend_ops);
    }
    for (size_t p = 0; p < M_PARTS; p++) {
        for (size_t k = 0; k < M_KEYS; k++)
            m_check_get(f->st, buf, m, p, k);
    }
    state_buf_destroy(buf);
    free(m);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_buffered_put_is_visible_through_the_buffer_only_until_written),
        T(test_buffered_delete_hides_a_db_value),
        T(test_buffered_overwrite_wins_over_db_and_earlier_buffered_value),
        T(test_get_reports_the_needed_size_when_the_value_does_not_fit),
        T(test_get_buffered_never_reads_the_db),
        T(test_put_rejects_oversized_keys_values_and_negative_partitions),
        T(test_same_key_in_two_partitions_holds_two_values),
        T(test_drop_partition_removes_only_that_partition_and_its_offsets),
        T(test_drop_partition_works_for_the_largest_partition),
        T(test_offsets_are_absent_until_their_buffer_is_written),
        T(test_derive_mark_is_per_partition_outside_the_keys_and_goes_with_a_drop),
        T(test_offsets_and_values_survive_close_and_reopen),
        T(test_iterator_forward_merges_buffer_over_db),
        T(test_iterator_resumes_after_a_key_through_buffer_and_db),
        T(test_iterator_reverse_merges_buffer_over_db),
        T(test_iterator_never_leaves_its_prefix_or_partition),
        T(test_iterator_with_empty_prefix_sees_the_partition_but_not_its_offsets),
        T(test_iterator_sees_buffer_writes_made_while_scanning),
        T(test_buf_clear_drops_pending_writes),
        T(test_buf_count_counts_pending_operations),
        T(test_large_buffer_reads_iterates_and_writes_every_key_once),
        T(test_iterator_does_not_see_keys_new_to_the_buffer_after_it_opened),
        T(test_threads_share_one_state_with_a_buffer_each),
        T(test_two_dbs_in_one_process_work_independently),
        T(test_random_operations_match_a_sorted_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
