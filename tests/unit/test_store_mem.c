/*
 * test_store_mem: the two test stores of include/h5osfs/store/store_test.h.
 *
 * 1. The memory store passes the checks every backend passes (store_conformance.h, which
 *    test_store_posix runs over a directory), and so does the faulty wrapper with no rule.
 * 2. What the memory store does differently by design: a flat namespace, any delimiter,
 *    MD5 etags.
 * 3. The faulty wrapper: each mode, nth and times, patterns, counters, the record, and that a
 *    failed call leaves the inner store as it was (or, "reply lost", changed).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h5osfs/util/log.h"
#include "h5osfs/store/store_test.h"
#include "store_conformance.h"

static struct store *open_mem(void **ctx)
{
    struct store *st = NULL;
    *ctx = NULL;
    CHECK_INT(store_mem_open(&st), 0);
    return st;
}

static void close_mem(struct store *st, void *ctx)
{
    (void)ctx;
    store_close(st);
}

/* A faulty store over a memory store; ctx is the inner store. */
static struct store *open_faulty(void **ctx)
{
    struct store *inner = open_mem(ctx), *st = NULL;
    CHECK_INT(store_faulty_open(inner, &st), 0);
    *ctx = inner;
    return st;
}

static void close_faulty(struct store *st, void *ctx)
{
    store_close(st);
    store_close(ctx);
}

/* ---- 2. the memory store's own ---- */

static void test_mem_flat(void)
{
    void *ctx;
    struct store *st = open_mem(&ctx);
    struct store_stat s;
    char buf[256];
    CHECK_INT(store_keeps_files(st), 0); /* as S3: no object is a local file */
    /* "a" and "a/b" are both objects, as S3 allows */
    CHECK_INT(cf_put_str(st, "a", "file"), 0);
    CHECK_INT(cf_put_str(st, "a/b", "below"), 0);
    CHECK(cf_has(st, "a", "file"));
    CHECK(cf_has(st, "a/b", "below"));
    CHECK_INT(cf_list_all(st, "", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "a|a/|");
    /* any delimiter */
    CHECK_INT(cf_put_str(st, "x,1,y", "1"), 0);
    CHECK_INT(cf_put_str(st, "x,2", "2"), 0);
    CHECK_INT(cf_list_all(st, "x,", ",", buf, sizeof buf), 0);
    CHECK_STR(buf, "x,1,|x,2|");
    /* the etag is the MD5 of the content, so equal content gives equal etags */
    CHECK_INT(cf_put_str(st, "m", "hello"), 0);
    CHECK_INT(store_head(st, "m", &s), 0);
    CHECK_STR(s.etag, "5d41402abc4b2a76b9719d911017c592");
    CHECK_INT(store_copy(st, "m", "m2"), 0);
    CHECK_INT(store_head(st, "m2", &s), 0);
    CHECK_STR(s.etag, "5d41402abc4b2a76b9719d911017c592");
    /* no multipart uploads in memory: nothing to abort, nothing counted, keys untouched */
    size_t aborted = 7;
    struct store_counts before, after;
    store_counts(st, &before);
    CHECK_INT(store_abort_uploads(st, "m", &aborted), 0);
    CHECK_INT((long)aborted, 0);
    store_counts(st, &after);
    CHECK_INT((long)after.requests[STORE_LIST], (long)before.requests[STORE_LIST]);
    CHECK_INT(store_head(st, "m2", &s), 0);
    CHECK_INT(store_abort_uploads(st, "db/../x/", &aborted), -EINVAL);
    close_mem(st, ctx);
}

/* ---- 3. the faulty wrapper ---- */

struct faulty_fixture {
    struct store *inner, *st;
};

static struct faulty_fixture faulty_fixture(void)
{
    struct faulty_fixture f;
    void *ctx;
    f.st = open_faulty(&ctx);
    f.inner = ctx;
    return f;
}

static void faulty_fixture_close(struct faulty_fixture *f)
{
    close_faulty(f->st, f->inner);
}

/* The nth matching call fails, `times` times; others pass; nothing reaches the inner store. */
static void test_faulty_nth(void)
{
    struct faulty_fixture f = faulty_fixture();
    struct faulty_rule r = { .ops = FAULTY_MASK(FAULTY_PUT),
                             .pattern = "db/*",
                             .nth = 2,
                             .times = 2,
                             .mode = FAULTY_FAIL,
                             .err = -ETIMEDOUT };
    CHECK_INT(store_faulty_add(f.st, &r), 0);
    CHECK_INT(cf_put_str(f.st, "db/1", "1"), 0);
    CHECK_INT(cf_put_str(f.st, "home/x", "x"), 0); /* does not match */
    CHECK_INT(cf_put_str(f.st, "db/2", "2"), -ETIMEDOUT);
    CHECK_INT(store_put_new(f.st, "db/a/b/3", "3", 1), -ETIMEDOUT); /* '*' matches '/' */
    CHECK_INT(cf_put_str(f.st, "db/4", "4"), 0);
    CHECK(cf_has(f.inner, "db/1", "1"));
    CHECK(cf_has(f.inner, "db/4", "4"));
    struct store_buf b;
    CHECK_INT(store_get(f.inner, "db/2", SIZE_MAX, &b), -ENOENT);
    CHECK_INT(store_get(f.inner, "db/a/b/3", SIZE_MAX, &b), -ENOENT);
    CHECK_INT(store_faulty_calls(f.st, FAULTY_PUT), 5);
    CHECK_INT(store_faulty_calls_matching(f.st, FAULTY_PUT, "db/*"), 4);
    CHECK_INT(store_faulty_calls(f.st, FAULTY_GET), 0);
    CHECK_INT(store_faulty_fired(f.st), 2);
    /* the outer store's counters count the failures as any backend's */
    struct store_counts c;
    store_counts(f.st, &c);
    CHECK_INT(c.requests[STORE_PUT], 5);
    CHECK_INT(c.failures, 2);
    /* the record: in order, with the answers */
    size_t n;
    const struct faulty_call *rec = store_faulty_record(f.st, &n);
    CHECK_INT(n, 5);
    if (n == 5) {
        CHECK_STR(rec[2].key, "db/2");
        CHECK_INT(rec[2].rc, -ETIMEDOUT);
        CHECK_INT(rec[2].fired, 1);
        CHECK_STR(rec[4].key, "db/4");
        CHECK_INT(rec[4].rc, 0);
        CHECK_INT(rec[4].fired, 0);
    }
    store_faulty_reset(f.st);
    CHECK_INT(store_faulty_calls(f.st, FAULTY_PUT), 0);
    rec = store_faulty_record(f.st, &n);
    CHECK_INT(n, 0);
    faulty_fixture_close(&f);
}

/* times 0: every matching call from the nth on; err 0 is -EIO; clear lets all pass again. */
static void test_faulty_every(void)
{
    struct faulty_fixture f = faulty_fixture();
    struct faulty_rule r = { .ops = FAULTY_MASK(FAULTY_GET) | FAULTY_MASK(FAULTY_HEAD),
                             .mode = FAULTY_FAIL };
    struct store_buf b;
    struct store_stat s;
    CHECK_INT(cf_put_str(f.st, "k", "v"), 0);
    CHECK_INT(store_faulty_add(f.st, &r), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_INT(store_get(f.st, "k", SIZE_MAX, &b), -EIO);
        CHECK(b.data == NULL);
        CHECK_INT(store_head(f.st, "k", &s), -EIO);
    }
    CHECK_INT(store_faulty_fired(f.st), 6);
    r = (struct faulty_rule){ .ops = FAULTY_MASK(FAULTY_PUT), .mode = FAULTY_FAIL, .err = -ENOSPC };
    CHECK_INT(store_faulty_add(f.st, &r), 0);
    CHECK_INT(cf_put_str(f.st, "k", "w"), -ENOSPC);
    store_faulty_clear(f.st);
    CHECK(cf_has(f.st, "k", "v"));
    CHECK_INT(cf_put_str(f.st, "k", "w"), 0);
    CHECK(cf_has(f.st, "k", "w"));
    faulty_fixture_close(&f);
}

/* AFTER: the call took effect, the caller hears of a failure. */
static void test_faulty_reply_lost(void)
{
    struct faulty_fixture f = faulty_fixture();
    struct faulty_rule r = { .ops = FAULTY_MASK(FAULTY_PUT_IF) | FAULTY_MASK(FAULTY_DELETE) |
                                    FAULTY_MASK(FAULTY_COPY),
                             .mode = FAULTY_AFTER,
                             .err = -EIO };
    CHECK_INT(cf_put_str(f.st, "gone", "x"), 0);
    CHECK_INT(store_faulty_add(f.st, &r), 0);
    CHECK_INT(store_put_if(f.st, "d/.domain.json", "{}", 2, NULL), -EIO);
    CHECK(cf_has(f.inner, "d/.domain.json", "{}"));
    CHECK_INT(store_delete(f.st, "gone"), -EIO);
    struct store_stat s;
    CHECK_INT(store_head(f.inner, "gone", &s), -ENOENT);
    CHECK_INT(store_copy(f.st, "d/.domain.json", "e/.domain.json"), -EIO);
    CHECK(cf_has(f.inner, "e/.domain.json", "{}"));
    /* an inner failure is the inner failure, not the rule's */
    CHECK_INT(store_delete(f.st, "gone"), -ENOENT);
    faulty_fixture_close(&f);
}

/* GET: truncated or garbled bytes, as a torn or corrupted transfer would give. */
static void test_faulty_bad_bytes(void)
{
    struct faulty_fixture f = faulty_fixture();
    struct faulty_rule trunc = {
        .ops = FAULTY_MASK(FAULTY_GET), .pattern = "t*", .mode = FAULTY_TRUNCATE, .keep = 3
    };
    struct faulty_rule garb = { .ops = FAULTY_MASK(FAULTY_GET),
                                .pattern = "g*",
                                .mode = FAULTY_GARBLE };
    struct store_buf b;
    CHECK_INT(cf_put_str(f.st, "tjson", "{\"root\": 1}"), 0);
    CHECK_INT(cf_put_str(f.st, "gjson", "AB"), 0);
    CHECK_INT(store_faulty_add(f.st, &trunc), 0);
    CHECK_INT(store_faulty_add(f.st, &garb), 0);
    CHECK_INT(store_get(f.st, "tjson", SIZE_MAX, &b), 0);
    CHECK(b.len == 3 && memcmp(b.data, "{\"r", 4) == 0); /* NUL after the 3 bytes */
    store_buf_free(&b);
    CHECK_INT(store_get_range(f.st, "tjson", 2, 8, &b), 0);
    CHECK(b.len == 3 && memcmp(b.data, "roo", 3) == 0);
    store_buf_free(&b);
    CHECK_INT(store_get(f.st, "gjson", SIZE_MAX, &b), 0);
    CHECK(b.len == 2 && b.data[0] == (unsigned char)~'A' && b.data[1] == (unsigned char)~'B');
    store_buf_free(&b);
    CHECK(cf_has(f.inner, "tjson", "{\"root\": 1}"));
    faulty_fixture_close(&f);
}

/* LIST: fails, or every name comes back garbled; store_list_keys goes through it too. */
static int count_key(void *ctx, const char *key, const struct store_stat *st)
{
    (void)key, (void)st;
    ++*(int *)ctx;
    return 0;
}

static void test_faulty_list(void)
{
    struct faulty_fixture f = faulty_fixture();
    struct faulty_rule fail = { .ops = FAULTY_MASK(FAULTY_LIST),
                                .pattern = "db/*",
                                .mode = FAULTY_FAIL,
                                .err = -EIO,
                                .times = 1 };
    struct faulty_rule garb = { .ops = FAULTY_MASK(FAULTY_LIST),
                                .pattern = "home/*",
                                .mode = FAULTY_GARBLE };
    char buf[256];
    int n = 0;
    CHECK_INT(cf_put_str(f.st, "db/x/1", "1"), 0);
    CHECK_INT(cf_put_str(f.st, "home/u/.domain.json", "{}"), 0);
    CHECK_INT(store_faulty_add(f.st, &fail), 0);
    CHECK_INT(store_faulty_add(f.st, &garb), 0);
    CHECK_INT(store_list_keys(f.st, "db/", count_key, &n), -EIO);
    CHECK_INT(n, 0);
    CHECK_INT(store_list_keys(f.st, "db/", count_key, &n), 0); /* times 1: once only */
    CHECK_INT(n, 1);
    /* what the backend answers: "home/u/" cut to "home", 'e' inverted */
    struct store_list l;
    CHECK_INT(f.st->ops->list(f.st, "home/", "/", NULL, 0, &l), 0);
    CHECK(l.n_prefixes == 1 && strcmp(l.prefixes[0], "hom\x9a") == 0);
    store_list_free(&l);
    /* what store_list gives callers: only names below the prefix (the garbage logged) */
    CHECK_INT(cf_list_all(f.st, "home/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "");
    CHECK_INT(store_faulty_calls(f.st, FAULTY_LIST), 4);
    faulty_fixture_close(&f);
}

static void test_faulty_bad_rules(void)
{
    struct faulty_fixture f = faulty_fixture();
    struct faulty_rule r = { .ops = FAULTY_MASK(FAULTY_PUT), .mode = FAULTY_TRUNCATE };
    CHECK_INT(store_faulty_add(f.st, &r), -EINVAL);
    r = (struct faulty_rule){ .ops = 0, .mode = FAULTY_GARBLE };
    CHECK_INT(store_faulty_add(f.st, &r), -EINVAL);
    r = (struct faulty_rule){ .mode = FAULTY_FAIL, .err = EIO }; /* errnos are negative */
    CHECK_INT(store_faulty_add(f.st, &r), -EINVAL);
    CHECK_INT(store_faulty_add(f.inner, &r), -EINVAL); /* not a faulty store */
    CHECK_INT(store_faulty_calls(f.inner, FAULTY_GET), 0);
    faulty_fixture_close(&f);
}

/* Rules and counters under many threads: exactly `times` calls fire, every call counts. */
struct put_thread {
    struct store *st;
    int id, failed;
};

static void *put_many(void *arg)
{
    struct put_thread *t = arg;
    char key[32];
    for (int i = 0; i < 250; i++) {
        snprintf(key, sizeof key, "p/%d/%d", t->id, i);
        t->failed += store_put(t->st, key, "x", 1) != 0;
    }
    return NULL;
}

static void test_faulty_threads(void)
{
    struct faulty_fixture f = faulty_fixture();
    struct faulty_rule r = {
        .ops = FAULTY_MASK(FAULTY_PUT), .nth = 100, .times = 50, .mode = FAULTY_FAIL, .err = -EIO
    };
    struct put_thread t[4];
    pthread_t th[4];
    char buf[1 << 16];
    int failed = 0;
    CHECK_INT(store_faulty_add(f.st, &r), 0);
    for (int i = 0; i < 4; i++) {
        t[i] = (struct put_thread){ .st = f.st, .id = i };
        CHECK_INT(pthread_create(&th[i], NULL, put_many, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK_INT(pthread_join(th[i], NULL), 0);
        failed += t[i].failed;
    }
    CHECK_INT(failed, 50);
    CHECK_INT(store_faulty_calls(f.st, FAULTY_PUT), 1000);
    CHECK_INT(cf_list_all(f.inner, "p/", NULL, buf, sizeof buf), 0);
    size_t objects = 0;
    for (const char *p = buf; (p = strchr(p, '|')); p++)
        objects++;
    CHECK_INT(objects, 950);
    faulty_fixture_close(&f);
}

int main(void)
{
    static const struct conformance_backend mem = { "mem", open_mem, close_mem,
                                                    .opaque_tokens = 0 };
    static const struct conformance_backend faulty = { "faulty", open_faulty, close_faulty,
                                                       .opaque_tokens = 0 };
    CHECK_INT(log_setup(LOG_LVL_ERROR, LOG_SINK_STDERR, NULL), 0);
    store_conformance(&mem);
    store_conformance(&faulty);
    test_mem_flat();
    test_faulty_nth();
    test_faulty_every();
    test_faulty_reply_lost();
    test_faulty_bad_bytes();
    test_faulty_list();
    test_faulty_bad_rules();
    test_faulty_threads();
    return check_done("store_mem");
}
