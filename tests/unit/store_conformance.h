/*
 * store_conformance: what every backend of include/h5osfs/store/store.h must do, whatever it keeps
 * its objects in. store_conformance() runs each check on a fresh, empty store the backend's
 * open function gives, and closes it with its close function. test_store_posix runs it over
 * a directory, test_store_mem over memory (and over the faulty wrapper with no rules): the
 * same checks, so that modules tested over the memory store see what they see in a mount.
 *
 * Left out on purpose, because the backends differ there by design: whether "a" and "a/b" may
 * both be objects (a directory cannot be a file; S3 and memory are flat), delimiters other than
 * "/", and temporary files (test_store_posix checks those itself).
 *
 * Where S3 differs, the backend says so (struct conformance_backend) and the checks that do not
 * apply are skipped there, not dropped: store.h makes a listing's next_token opaque, to be
 * given back as it came, and S3's are (ListObjectsV2 continuation tokens: RGW's is a key
 * with the bucket prefix, s3rver's a base64 blob). The local stores' token is the page's last
 * item, and they take any key as one ("strictly after"); only those two checks assume it.
 * S3's DeleteObject of a missing key succeeds (it is idempotent; knowing would cost a HEAD
 * first, and the callers take -ENOENT and 0 alike). A HEAD's Last-Modified is an HTTP date,
 * whole seconds, where a listing's LastModified has milliseconds: the two agree to the second.
 * A test server with bugs of its own (s3rver's ListObjectsV2) names the checks it cannot pass
 * in skip, and the caller says why.
 */
#ifndef H5OSFS_TEST_STORE_CONFORMANCE_H
#define H5OSFS_TEST_STORE_CONFORMANCE_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "h5osfs/store/store.h"

struct conformance_backend {
    const char *name;
    struct store *(*open)(void **ctx);          /* a new empty bucket */
    void (*close)(struct store *st, void *ctx); /* close it and remove what it held */
    int opaque_tokens;       /* next_token is not the page's last item, nor is any key a token */
    int delete_missing_ok;   /* store_delete of no object is 0, not -ENOENT */
    int head_mtime_whole;    /* head's mtime is the listing's cut to whole seconds */
    const char *const *skip; /* names of checks not run (NULL-terminated), or NULL */
};

/* Set by store_conformance for the checks of one backend (they run one backend at a time). */
static const struct conformance_backend *cf_backend;

static int cf_put_str(struct store *st, const char *key, const char *val)
{
    return store_put(st, key, val, strlen(val));
}

/* 1 if key holds exactly want. */
static int cf_has(struct store *st, const char *key, const char *want)
{
    struct store_buf b;
    int err = store_get(st, key, SIZE_MAX, &b);
    int ok = err == 0 && b.len == strlen(want) && memcmp(b.data, want, b.len) == 0;
    if (!ok)
        fprintf(stderr, "get %s: err %d len %zu, expected \"%s\"\n", key, err, err ? 0 : b.len,
                want);
    store_buf_free(&b);
    return ok;
}

/* A page's objects and prefixes in merged key order, as "k1|k2|...|", appended to buf. */
static size_t cf_join_page(const struct store_list *l, char *buf, size_t cap)
{
    size_t used = strlen(buf), i = 0, j = 0, items = 0;
    while (i < l->n_objects || j < l->n_prefixes) {
        const char *k;
        if (j == l->n_prefixes ||
            (i < l->n_objects && strcmp(l->objects[i].key, l->prefixes[j]) < 0))
            k = l->objects[i++].key;
        else
            k = l->prefixes[j++];
        used += (size_t)snprintf(buf + used, used < cap ? cap - used : 0, "%s|", k);
        items++;
    }
    return items;
}

static int cf_list_all(struct store *st, const char *prefix, const char *delim, char *buf,
                       size_t cap)
{
    struct store_list l;
    buf[0] = '\0';
    int err = store_list(st, prefix, delim, NULL, 0, &l);
    if (!err) {
        cf_join_page(&l, buf, cap);
        CHECK(l.next_token == NULL);
    }
    store_list_free(&l);
    return err;
}

static void cf_put_all(struct store *st, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        CHECK_INT(cf_put_str(st, keys[i], keys[i]), 0);
}

/* ---- the checks ---- */

static void cf_round_trip(struct store *st)
{
    static const unsigned char bin[] = { 0, 1, 2, 0xff, 0, 'x' };
    struct store_buf b;
    CHECK_INT(cf_put_str(st, "k", "hello"), 0);
    CHECK(cf_has(st, "k", "hello"));
    CHECK_INT(store_put(st, "bin", bin, sizeof bin), 0);
    CHECK_INT(store_get(st, "bin", SIZE_MAX, &b), 0);
    CHECK(b.len == sizeof bin && memcmp(b.data, bin, sizeof bin) == 0);
    CHECK(b.data && b.data[b.len] == '\0'); /* one NUL after the bytes */
    store_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0); /* freeing empties the buffer */
    CHECK_INT(store_put(st, "empty", NULL, 0), 0);
    CHECK_INT(store_get(st, "empty", 0, &b), 0);
    CHECK_INT(b.len, 0);
    CHECK(b.data != NULL);
    store_buf_free(&b);
    CHECK_INT(store_get(st, "missing", SIZE_MAX, &b), -ENOENT);
    CHECK(b.data == NULL && b.len == 0);
    CHECK_INT(store_get(st, "no/such/dir", SIZE_MAX, &b), -ENOENT);
    CHECK_INT(cf_put_str(st, "k", "a much longer value than before"), 0);
    CHECK(cf_has(st, "k", "a much longer value than before"));
    CHECK_INT(cf_put_str(st, "k", "s"), 0);
    CHECK(cf_has(st, "k", "s"));
    CHECK_INT(cf_put_str(st, "home/user/dom/.domain.json", "{}"), 0);
    CHECK(cf_has(st, "home/user/dom/.domain.json", "{}"));
    CHECK_INT(cf_put_str(st, "/abs", "x"), -EINVAL);
    CHECK_INT(cf_put_str(st, "a/../b", "x"), -EINVAL);
    CHECK_INT(store_get(st, "a//b", SIZE_MAX, &b), -EINVAL);
}

static void cf_range(struct store *st)
{
    struct store_buf b;
    CHECK_INT(cf_put_str(st, "r", "0123456789"), 0);
    CHECK_INT(store_get_range(st, "r", 2, 3, &b), 0);
    CHECK(b.len == 3 && memcmp(b.data, "234", 3) == 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "r", 8, 10, &b), 0); /* short at the end */
    CHECK(b.len == 2 && memcmp(b.data, "89", 2) == 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "r", 4, STORE_RANGE_TO_END, &b), 0);
    CHECK(b.len == 6 && memcmp(b.data, "456789", 6) == 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "r", 10, 5, &b), 0);
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "r", UINT64_MAX - 1, 5, &b), 0);
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "r", 3, 0, &b), 0);
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "nope", 0, 1, &b), -ENOENT);
    CHECK_INT(store_get(st, "r", 9, &b), -EFBIG);
    CHECK(b.data == NULL);
    CHECK_INT(store_get(st, "r", 10, &b), 0);
    CHECK_INT(b.len, 10);
    store_buf_free(&b);
}

static void cf_head(struct store *st)
{
    struct store_stat s1, s2, s3;
    double now = (double)time(NULL);
    CHECK_INT(cf_put_str(st, "h/obj", "12345"), 0);
    CHECK_INT(store_head(st, "h/obj", &s1), 0);
    CHECK_INT(s1.size, 5);
    CHECK(s1.mtime > now - 60 && s1.mtime < now + 60);
    CHECK(strlen(s1.etag) > 0 && strspn(s1.etag, "0123456789abcdef") == strlen(s1.etag));
    CHECK_INT(store_head(st, "h/obj", &s2), 0);
    CHECK_STR(s2.etag, s1.etag);
    CHECK_INT(cf_put_str(st, "h/obj", "1234567"), 0);
    CHECK_INT(store_head(st, "h/obj", &s3), 0);
    CHECK_INT(s3.size, 7);
    CHECK(strcmp(s3.etag, s1.etag) != 0);
    CHECK_INT(store_head(st, "h/none", &s1), -ENOENT);
    CHECK_INT(s1.size, 0);
    CHECK_INT(store_head(st, "h/obj/x", &s1), -ENOENT);
}

static void cf_delete(struct store *st)
{
    CHECK_INT(cf_put_str(st, "p/q/r", "1"), 0);
    CHECK_INT(cf_put_str(st, "x/y", "1"), 0);
    CHECK_INT(store_delete(st, "p/q/r"), 0);
    CHECK_INT(store_delete(st, "p/q/r"), cf_backend->delete_missing_ok ? 0 : -ENOENT);
    CHECK_INT(store_delete(st, "no/such"), cf_backend->delete_missing_ok ? 0 : -ENOENT);
    CHECK(cf_has(st, "x/y", "1"));
    CHECK_INT(store_delete(st, "x/y"), 0);
    CHECK_INT(cf_put_str(st, "x/y", "again"), 0);
    CHECK(cf_has(st, "x/y", "again"));
    CHECK_INT(store_delete(st, "../x"), -EINVAL);
}

static void cf_put_if(struct store *st)
{
    struct store_stat a, b;
    CHECK_INT(store_put_if(st, "home/d/.domain.json", "v1", 2, NULL), 0);
    CHECK_INT(store_put_if(st, "home/d/.domain.json", "v0", 2, NULL), -ESTALE);
    CHECK(cf_has(st, "home/d/.domain.json", "v1"));
    CHECK_INT(store_head(st, "home/d/.domain.json", &a), 0);
    CHECK_INT(store_put_if(st, "home/d/.domain.json", "v2", 2, a.etag), 0);
    CHECK_INT(store_put_if(st, "home/d/.domain.json", "v3", 2, a.etag), -ESTALE);
    CHECK(cf_has(st, "home/d/.domain.json", "v2"));
    CHECK_INT(store_head(st, "home/d/.domain.json", &b), 0);
    CHECK(strcmp(a.etag, b.etag) != 0);
    CHECK_INT(store_delete(st, "home/d/.domain.json"), 0);
    CHECK_INT(store_put_if(st, "home/d/.domain.json", "v4", 2, b.etag), -ESTALE);
    CHECK_INT(store_head(st, "home/d/.domain.json", &b), -ENOENT);
    CHECK_INT(store_put_if(st, "home/d/.domain.json", "v4", 2, ""), -EINVAL);
}

/* Threads add 1 to a counter object by head, get, put_if, again on -ESTALE: none is lost. */
struct cf_counter {
    struct store *st;
    int adds, failures;
};

static int cf_add_one(struct store *st)
{
    for (;;) {
        struct store_stat now;
        struct store_buf buf;
        char text[32];
        int rc = store_head(st, "c/count", &now);
        if (rc == 0)
            rc = store_get(st, "c/count", 64, &buf);
        if (rc != 0)
            return rc;
        snprintf(text, sizeof text, "%ld", strtol((const char *)buf.data, NULL, 10) + 1);
        store_buf_free(&buf);
        rc = store_put_if(st, "c/count", text, strlen(text), now.etag);
        if (rc != -ESTALE)
            return rc;
    }
}

static void *cf_counter_thread(void *arg)
{
    struct cf_counter *c = arg;
    for (int i = 0; i < c->adds; i++)
        c->failures += cf_add_one(c->st) != 0;
    return NULL;
}

static void cf_put_if_no_lost_update(struct store *st)
{
    struct cf_counter c[4];
    pthread_t t[4];
    CHECK_INT(cf_put_str(st, "c/count", "0"), 0);
    for (int i = 0; i < 4; i++) {
        c[i] = (struct cf_counter){ .st = st, .adds = 100 };
        CHECK_INT(pthread_create(&t[i], NULL, cf_counter_thread, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK_INT(pthread_join(t[i], NULL), 0);
        CHECK_INT(c[i].failures, 0);
    }
    CHECK(cf_has(st, "c/count", "400"));
}

/* A reader gets obj/atom over and over while it is rewritten: one whole version or the
 * other, never a mix or a part. */
struct cf_atomic {
    struct store *st;
    const char *a, *b;
    atomic_int stop, reads;
    int bad;
};

static void *cf_reader(void *arg)
{
    struct cf_atomic *c = arg;
    while (!atomic_load(&c->stop)) {
        struct store_buf buf;
        int err = store_get(c->st, "obj/atom", SIZE_MAX, &buf);
        int ok = err == 0 && ((buf.len == strlen(c->a) && memcmp(buf.data, c->a, buf.len) == 0) ||
                              (buf.len == strlen(c->b) && memcmp(buf.data, c->b, buf.len) == 0));
        c->bad += !ok;
        atomic_fetch_add(&c->reads, 1);
        store_buf_free(&buf);
    }
    return NULL;
}

static char *cf_filled(char ch, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        exit(2);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

static void cf_atomic_puts(struct store *st)
{
    int (*const puts[])(struct store *, const char *, const void *, size_t) = { store_put,
                                                                                store_put_lazy };
    char *a = cf_filled('A', 3000), *b = cf_filled('B', 70000);
    for (size_t p = 0; p < sizeof puts / sizeof *puts; p++) {
        struct cf_atomic c = { .st = st, .a = a, .b = b };
        pthread_t t;
        int put_errors = 0;
        CHECK_INT(puts[p](st, "obj/atom", a, strlen(a)), 0);
        CHECK_INT(pthread_create(&t, NULL, cf_reader, &c), 0);
        /* the puts must overlap reads: a memory store's 200 puts end before a thread that
         * was just created is scheduled */
        while (atomic_load(&c.reads) == 0)
            sched_yield();
        for (int i = 0; i < 200; i++)
            put_errors += puts[p](st, "obj/atom", i % 2 ? a : b, i % 2 ? 3000 : 70000) != 0;
        atomic_store(&c.stop, 1);
        CHECK_INT(pthread_join(t, NULL), 0);
        CHECK_INT(put_errors, 0);
        CHECK(atomic_load(&c.reads) > 0);
        CHECK_INT(c.bad, 0);
    }
    free(a);
    free(b);
}

static void cf_new_puts_and_copy(struct store *st)
{
    CHECK_INT(store_put_new(st, "db/r/d/x/0_0", "chunk", 5), 0);
    CHECK(cf_has(st, "db/r/d/x/0_0", "chunk"));
    CHECK_INT(store_put_new(st, "db/r/d/x/0_0", "re", 2), 0);
    CHECK(cf_has(st, "db/r/d/x/0_0", "re"));
    CHECK_INT(store_sync(st), 0);
    CHECK_INT(cf_put_str(st, "db/a/d/x/0_0", "chunk!"), 0);
    CHECK_INT(store_copy(st, "db/a/d/x/0_0", "db/b/d/x/0_0"), 0);
    CHECK(cf_has(st, "db/b/d/x/0_0", "chunk!"));
    CHECK_INT(cf_put_str(st, "db/a/d/x/0_0", "new"), 0); /* the copy stays as it was */
    CHECK(cf_has(st, "db/b/d/x/0_0", "chunk!"));
    CHECK_INT(store_put_new(st, "db/c/d/x/0_0", "left", 4), 0);
    CHECK_INT(store_copy(st, "db/b/d/x/0_0", "db/c/d/x/0_0"), 0);
    CHECK(cf_has(st, "db/c/d/x/0_0", "chunk!"));
    CHECK_INT(store_put_new(st, "db/c/d/x/0_0", "over", 4), 0);
    CHECK(cf_has(st, "db/b/d/x/0_0", "chunk!"));
    CHECK_INT(store_copy(st, "db/none", "db/d/x"), -ENOENT);
    CHECK_INT(store_copy(st, "db/../x", "db/d/z"), -EINVAL);
}

static void cf_list(struct store *st)
{
    static const char *const keys[] = {
        "home/test_user1/.domain.json",
        "home/test_user1/f.h5/.domain.json",
        "home/test_user2/.domain.json",
        "home/.domain.json",
        "homer",
        "db/g-1/.group.json",
        "db/g-1/d-1/0_0",
        "db/g-1/d-1/0_1",
    };
    char buf[4096];
    struct store_list l;
    cf_put_all(st, keys, sizeof keys / sizeof *keys);
    CHECK_INT(cf_list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "db/g-1/.group.json|db/g-1/d-1/0_0|db/g-1/d-1/0_1|home/.domain.json|"
                   "home/test_user1/.domain.json|home/test_user1/f.h5/.domain.json|"
                   "home/test_user2/.domain.json|homer|");
    CHECK_INT(cf_list_all(st, NULL, NULL, buf, sizeof buf), 0);
    CHECK(strstr(buf, "homer|") != NULL);
    CHECK_INT(cf_list_all(st, "", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "db/|home/|homer|");
    CHECK_INT(cf_list_all(st, "", "", buf, sizeof buf), 0); /* "" = no delimiter */
    CHECK(strstr(buf, "db/g-1/d-1/0_1|") != NULL);
    CHECK_INT(cf_list_all(st, "home/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/.domain.json|home/test_user1/|home/test_user2/|");
    CHECK_INT(cf_list_all(st, "home", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/|homer|");
    CHECK_INT(cf_list_all(st, "home/te", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/test_user1/|home/test_user2/|");
    CHECK_INT(cf_list_all(st, "home/te", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "home/test_user1/.domain.json|home/test_user1/f.h5/.domain.json|"
                   "home/test_user2/.domain.json|");
    CHECK_INT(cf_list_all(st, "home/test_user1/.", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/test_user1/.domain.json|");
    CHECK_INT(cf_list_all(st, "db/g-1/d-1/0_", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "db/g-1/d-1/0_0|db/g-1/d-1/0_1|");
    CHECK_INT(cf_list_all(st, "homer", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "homer|");
    CHECK_INT(cf_list_all(st, "nothing/here/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "");
    CHECK_INT(cf_list_all(st, "nothing", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "");
    CHECK_INT(cf_list_all(st, "homer/x/", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "");
    CHECK_INT(store_list(st, "/home", "/", NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "home/../", NULL, NULL, 0, &l), -EINVAL);
    CHECK(l.objects == NULL && l.n_objects == 0 && l.next_token == NULL);
    /* stats are filled in, as head gives them; prefixes carry none */
    CHECK_INT(store_list(st, "db/g-1/", "/", NULL, 0, &l), 0);
    CHECK_INT(l.n_objects, 1);
    CHECK_INT(l.n_prefixes, 1);
    if (l.n_objects == 1 && l.n_prefixes == 1) {
        struct store_stat hs;
        CHECK_STR(l.objects[0].key, "db/g-1/.group.json");
        CHECK_INT(l.objects[0].st.size, strlen("db/g-1/.group.json"));
        CHECK_INT(store_head(st, "db/g-1/.group.json", &hs), 0);
        CHECK_STR(l.objects[0].st.etag, hs.etag);
        if (cf_backend->head_mtime_whole)
            CHECK((double)(int64_t)l.objects[0].st.mtime == hs.mtime);
        else
            CHECK(l.objects[0].st.mtime == hs.mtime);
        CHECK_STR(l.prefixes[0], "db/g-1/d-1/");
    }
    store_list_free(&l);
}

static void cf_order(struct store *st)
{
    static const char *const keys[] = { "ab",    "a0",    "a/c",  "a.x", "a-b",
                                        "a/b/x", "a/b-y", "a/b0", "Z",   "~" };
    char buf[1024];
    cf_put_all(st, keys, sizeof keys / sizeof *keys);
    CHECK_INT(cf_list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "Z|a-b|a.x|a/b-y|a/b/x|a/b0|a/c|a0|ab|~|");
    CHECK_INT(cf_list_all(st, "", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "Z|a-b|a.x|a/|a0|ab|~|");
    CHECK_INT(cf_list_all(st, "a/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "a/b-y|a/b/|a/b0|a/c|");
    CHECK_INT(cf_list_all(st, "a/b", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "a/b-y|a/b/x|a/b0|");
}

/* Pages of max items add up to the one-page listing; each token is its page's last item. */
static void cf_check_pages(struct store *st, const char *prefix, const char *delim, size_t max)
{
    char full[4096], paged[4096] = "";
    char *token = NULL;
    int pages = 0;
    CHECK_INT(cf_list_all(st, prefix, delim, full, sizeof full), 0);
    for (;;) {
        struct store_list l;
        char page[4096] = "";
        int err = store_list(st, prefix, delim, token, max, &l);
        CHECK_INT(err, 0);
        size_t n = cf_join_page(&l, page, sizeof page);
        CHECK(n <= max);
        size_t used = strlen(paged), len = strlen(page);
        CHECK(used + len < sizeof paged);
        if (used + len < sizeof paged)
            memcpy(paged + used, page, len + 1);
        free(token);
        token = NULL;
        if (l.next_token && cf_backend->opaque_tokens) {
            CHECK_INT(n, max);
            token = strdup(l.next_token);
        } else if (l.next_token) {
            CHECK_INT(n, max);
            size_t plen = strlen(page), tlen = strlen(l.next_token);
            CHECK(plen > tlen && strncmp(page + plen - tlen - 1, l.next_token, tlen) == 0);
            token = strdup(l.next_token);
        }
        store_list_free(&l);
        if (err || !token || ++pages > 100)
            break;
    }
    free(token);
    CHECK_STR(paged, full);
}

static void cf_pagination(struct store *st)
{
    static const char *const keys[] = { "ab",   "a0",      "a/c", "a.x", "a-b", "a/b/x", "a/b-y",
                                        "a/b0", "a/b/y/z", "q/1", "q/2", "q/3", "r" };
    static const char *const prefixes[] = { "", "a", "a/", "a/b", "q/", "zz" };
    struct store_list l;
    cf_put_all(st, keys, sizeof keys / sizeof *keys);
    for (size_t max = 1; max <= 3; max++) {
        for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
            cf_check_pages(st, prefixes[p], NULL, max);
            cf_check_pages(st, prefixes[p], "/", max);
        }
    }
    cf_check_pages(st, "", NULL, 13);
    cf_check_pages(st, "", NULL, 12);
    if (cf_backend->opaque_tokens)
        return;
    CHECK_INT(store_list(st, "", NULL, "a/b/x", 2, &l), 0); /* tokens: strictly after */
    CHECK_INT(l.n_objects, 2);
    if (l.n_objects == 2) {
        CHECK_STR(l.objects[0].key, "a/b/y/z");
        CHECK_STR(l.objects[1].key, "a/b0");
    }
    CHECK_STR(l.next_token, "a/b0");
    store_list_free(&l);
    CHECK_INT(store_list(st, "", "/", "a/", 0, &l), 0);
    CHECK_INT(l.n_prefixes, 1);
    if (l.n_prefixes == 1)
        CHECK_STR(l.prefixes[0], "q/");
    CHECK_INT(l.n_objects, 3);
    if (l.n_objects == 3)
        CHECK_STR(l.objects[0].key, "a0");
    CHECK(l.next_token == NULL);
    store_list_free(&l);
    CHECK_INT(store_list(st, "", NULL, "~", 0, &l), 0);
    CHECK_INT(l.n_objects + l.n_prefixes, 0);
    store_list_free(&l);
}

static void cf_odd_names(struct store *st)
{
    static const char *const keys[] = {
        "dir with space/file name.json",
        "ünïcødé/日本語.json",
        "plus+eq=pct%20/a+b=c%2F",
        "tab\there/x",
        "quote\"'`/$x",
    };
    char buf[2048];
    cf_put_all(st, keys, sizeof keys / sizeof *keys);
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        CHECK(cf_has(st, keys[i], keys[i]));
    CHECK_INT(cf_list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "dir with space/file name.json|plus+eq=pct%20/a+b=c%2F|quote\"'`/$x|"
                   "tab\there/x|ünïcødé/日本語.json|");
    CHECK_INT(cf_list_all(st, "ünïcødé/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "ünïcødé/日本語.json|");
}

/* store_list_keys: every key below a prefix exactly once, in whatever order. */
struct cf_keys {
    char seen[2048];
    int calls;
};

static int cf_key_seen(void *ctx, const char *key, const struct store_stat *st)
{
    struct cf_keys *k = ctx;
    (void)st;
    size_t used = strlen(k->seen);
    snprintf(k->seen + used, sizeof k->seen - used, "%s|", key);
    return ++k->calls == 1000 ? 7 : 0;
}

static void cf_list_keys(struct store *st)
{
    static const char *const keys[] = { "db/a/x", "db/a/y/z", "db/b", "dbx", "home/u" };
    struct cf_keys k = { "", 0 };
    cf_put_all(st, keys, sizeof keys / sizeof *keys);
    CHECK_INT(store_list_keys(st, "db/", cf_key_seen, &k), 0);
    CHECK_INT(k.calls, 3);
    CHECK(strstr(k.seen, "db/a/x|") && strstr(k.seen, "db/a/y/z|") && strstr(k.seen, "db/b|"));
    CHECK(!strstr(k.seen, "dbx") && !strstr(k.seen, "home/u"));
    k = (struct cf_keys){ "", 999 };
    CHECK_INT(store_list_keys(st, "db/", cf_key_seen, &k), 7); /* fn's value ends the walk */
    CHECK_INT(k.calls, 1000);
}

/* Many threads put and delete their own keys at once: each sees only its own results. */
struct cf_churn {
    struct store *st;
    int id, errors;
};

static void *cf_churn_thread(void *arg)
{
    struct cf_churn *c = arg;
    char key[64], val[64];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "d/t%d/k%d", c->id, i % 7);
        snprintf(val, sizeof val, "%d-%d", c->id, i);
        c->errors += cf_put_str(c->st, key, val) != 0;
        c->errors += !cf_has(c->st, key, val);
        if (i % 3 == 0)
            c->errors += store_delete(c->st, key) != 0;
    }
    return NULL;
}

static void cf_parallel(struct store *st)
{
    struct cf_churn c[4];
    pthread_t t[4];
    char buf[4096];
    for (int i = 0; i < 4; i++) {
        c[i] = (struct cf_churn){ .st = st, .id = i };
        CHECK_INT(pthread_create(&t[i], NULL, cf_churn_thread, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK_INT(pthread_join(t[i], NULL), 0);
        CHECK_INT(c[i].errors, 0);
    }
    /* i = 199 (k3) was put last and kept; 198 (k2: 198 % 3 == 0) deleted */
    CHECK_INT(cf_list_all(st, "d/t2/", NULL, buf, sizeof buf), 0);
    CHECK(strstr(buf, "d/t2/k3|") != NULL);
    CHECK(strstr(buf, "d/t2/k2|") == NULL);
}

static int cf_skipped(const struct conformance_backend *b, const char *name)
{
    for (const char *const *s = b->skip; s && *s; s++)
        if (strcmp(*s, name) == 0)
            return 1;
    return 0;
}

/* Run every check over the backend, each on a fresh bucket. */
static void store_conformance(const struct conformance_backend *b)
{
#define CF_CHECK(fn) \
    {                \
#fn, fn      \
    }
    static const struct {
        const char *name;
        void (*run)(struct store *);
    } checks[] = {
        CF_CHECK(cf_round_trip),  CF_CHECK(cf_range),
        CF_CHECK(cf_head),        CF_CHECK(cf_delete),
        CF_CHECK(cf_put_if),      CF_CHECK(cf_put_if_no_lost_update),
        CF_CHECK(cf_atomic_puts), CF_CHECK(cf_new_puts_and_copy),
        CF_CHECK(cf_list),        CF_CHECK(cf_order),
        CF_CHECK(cf_pagination),  CF_CHECK(cf_odd_names),
        CF_CHECK(cf_list_keys),   CF_CHECK(cf_parallel),
    };
#undef CF_CHECK
    cf_backend = b;
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
        void *ctx = NULL;
        if (cf_skipped(b, checks[i].name)) {
            printf("%s: %s skipped\n", b->name, checks[i].name);
            continue;
        }
        struct store *st = b->open(&ctx);
        if (!st) {
            fprintf(stderr, "%s: cannot open a bucket\n", b->name);
            CHECK(st != NULL);
            return;
        }
        checks[i].run(st);
        b->close(st, ctx);
    }
}

#endif
