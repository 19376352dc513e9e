/*
 * test_store_posix: the store wrappers and the POSIX backend against real temporary buckets.
 * Every test makes its own bucket under /tmp and removes it afterwards.
 */
#include "h5osfs/store.h"

#include "check.h"
#include "store_conformance.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_PREFIX ".h5osfs-tmp."

/* ---- helpers --------------------------------------------------------------------------- */

static char *make_dir(void)
{
    char tmpl[] = "/tmp/h5osfs-store-XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (!dir) {
        perror("mkdtemp");
        exit(2);
    }
    return strdup(dir);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(path) < 0)
        perror(path);
    return 0;
}

static void remove_dir(char *dir)
{
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
        perror(dir);
    free(dir);
}

static struct store *open_store(const char *dir)
{
    struct store *st = NULL;
    int err = store_posix_open(dir, &st);
    CHECK_INT(err, 0);
    if (err) {
        fprintf(stderr, "cannot open bucket %s\n", dir);
        exit(2);
    }
    return st;
}

static void path_of(char *buf, const char *dir, const char *rel)
{
    snprintf(buf, PATH_MAX, "%s/%s", dir, rel);
}

static int exists(const char *dir, const char *rel)
{
    char path[PATH_MAX];
    struct stat sb;
    path_of(path, dir, rel);
    return lstat(path, &sb) == 0;
}

static int is_dir(const char *dir, const char *rel)
{
    char path[PATH_MAX];
    struct stat sb;
    path_of(path, dir, rel);
    return lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fputs(content, f) >= 0);
    CHECK_INT(fclose(f), 0);
}

/* Whole listing (one page) joined as above; returns the store_list error. */
static int list_all(struct store *st, const char *prefix, const char *delim, char *buf, size_t cap)
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

static int temp_files;

static int count_tmp(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    if (strncmp(path + ftw->base, TMP_PREFIX, strlen(TMP_PREFIX)) == 0)
        temp_files++;
    return 0;
}

static int count_temp_files(const char *dir)
{
    temp_files = 0;
    CHECK_INT(nftw(dir, count_tmp, 16, FTW_PHYS), 0);
    return temp_files;
}

/* ---- tests ----------------------------------------------------------------------------- */

static void test_key_check(void)
{
    char longkey[STORE_KEY_MAX + 2];
    CHECK_INT(store_key_check("a"), 0);
    CHECK_INT(store_key_check("a/b/c.json"), 0);
    CHECK_INT(store_key_check("home/.domain.json"), 0);
    CHECK_INT(store_key_check("..a/b..c/..."), 0);
    CHECK_INT(store_key_check(NULL), -EINVAL);
    CHECK_INT(store_key_check(""), -EINVAL);
    CHECK_INT(store_key_check("/a"), -EINVAL);
    CHECK_INT(store_key_check("a/"), -EINVAL);
    CHECK_INT(store_key_check("a//b"), -EINVAL);
    CHECK_INT(store_key_check("."), -EINVAL);
    CHECK_INT(store_key_check(".."), -EINVAL);
    CHECK_INT(store_key_check("./a"), -EINVAL);
    CHECK_INT(store_key_check("a/./b"), -EINVAL);
    CHECK_INT(store_key_check("a/.."), -EINVAL);
    CHECK_INT(store_key_check("../x"), -EINVAL);
    memset(longkey, 'k', STORE_KEY_MAX);
    longkey[STORE_KEY_MAX] = '\0';
    CHECK_INT(store_key_check(longkey), 0);
    longkey[STORE_KEY_MAX] = 'k';
    longkey[STORE_KEY_MAX + 1] = '\0';
    CHECK_INT(store_key_check(longkey), -EINVAL);
}

static void test_round_trip(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    static const unsigned char bin[] = { 0, 1, 2, 0xff, 0, 'x' };
    struct store_buf b;

    CHECK_INT(cf_put_str(st, "k", "hello"), 0);
    CHECK(cf_has(st, "k", "hello"));
    CHECK_INT(store_put(st, "bin", bin, sizeof bin), 0);
    CHECK_INT(store_get(st, "bin", SIZE_MAX, &b), 0);
    CHECK(b.len == sizeof bin && memcmp(b.data, bin, sizeof bin) == 0);
    store_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0);
    CHECK_INT(store_put(st, "empty", NULL, 0), 0);
    CHECK_INT(store_get(st, "empty", 0, &b), 0);
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    CHECK_INT(store_get(st, "missing", SIZE_MAX, &b), -ENOENT);
    CHECK(b.data == NULL && b.len == 0);
    CHECK_INT(store_get(st, "no/such/dir", SIZE_MAX, &b), -ENOENT);

    /* overwrite, longer then shorter */
    CHECK_INT(cf_put_str(st, "k", "a much longer value than before"), 0);
    CHECK(cf_has(st, "k", "a much longer value than before"));
    CHECK_INT(cf_put_str(st, "k", "s"), 0);
    CHECK(cf_has(st, "k", "s"));
    CHECK_INT(count_temp_files(dir), 0);

    store_close(st);
    remove_dir(dir);
}

static void test_intermediate_dirs(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    struct store_buf b;

    CHECK_INT(cf_put_str(st, "home/user/dom/.domain.json", "{}"), 0);
    CHECK(is_dir(dir, "home"));
    CHECK(is_dir(dir, "home/user"));
    CHECK(is_dir(dir, "home/user/dom"));
    CHECK(cf_has(st, "home/user/dom/.domain.json", "{}"));
    CHECK_INT(cf_put_str(st, "home/user/other", "x"), 0);
    CHECK(cf_has(st, "home/user/other", "x"));

    /* a middle component that is an object */
    CHECK_INT(store_get(st, "home/user/other/x", SIZE_MAX, &b), -ENOENT);
    CHECK_INT(cf_put_str(st, "home/user/other/x", "y"), -EIO);
    /* a key that names a directory */
    CHECK_INT(store_get(st, "home/user", SIZE_MAX, &b), -EISDIR);
    CHECK_INT(cf_put_str(st, "home/user", "y"), -EISDIR);
    CHECK(is_dir(dir, "home/user"));
    CHECK_INT(count_temp_files(dir), 0);

    store_close(st);
    remove_dir(dir);
}

struct atomic_ctx {
    struct store *st;
    const char *a, *b;
    atomic_int stop;
    int reads, bad;
};

static void *reader(void *arg)
{
    struct atomic_ctx *c = arg;
    while (!atomic_load(&c->stop)) {
        struct store_buf buf;
        int err = store_get(c->st, "obj/atom", SIZE_MAX, &buf);
        int ok = err == 0 && ((buf.len == strlen(c->a) && memcmp(buf.data, c->a, buf.len) == 0) ||
                              (buf.len == strlen(c->b) && memcmp(buf.data, c->b, buf.len) == 0));
        if (!ok)
            c->bad++;
        c->reads++;
        store_buf_free(&buf);
    }
    return NULL;
}

static char *filled(char ch, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        exit(2);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

typedef int (*put_fn)(struct store *st, const char *key, const void *data, size_t len);

/* A reader checks obj/atom over and over while it is rewritten 200 times with put: it must
 * only ever see one whole version or the other. */
static void check_puts_atomic(struct store *st, put_fn put)
{
    struct atomic_ctx c = { .st = st };
    char *a = filled('A', 3000), *b = filled('B', 70000);
    pthread_t t;
    int put_errors = 0;
    c.a = a;
    c.b = b;
    CHECK_INT(put(c.st, "obj/atom", a, strlen(a)), 0);
    CHECK_INT(pthread_create(&t, NULL, reader, &c), 0);
    for (int i = 0; i < 200; i++)
        put_errors += put(c.st, "obj/atom", i % 2 ? a : b, i % 2 ? 3000 : 70000) != 0;
    atomic_store(&c.stop, 1);
    CHECK_INT(pthread_join(t, NULL), 0);
    CHECK_INT(put_errors, 0);
    CHECK(c.reads > 0);
    CHECK_INT(c.bad, 0);
    free(a);
    free(b);
}

static void test_atomic_put(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    check_puts_atomic(st, store_put);
    CHECK_INT(count_temp_files(dir), 0);
    store_close(st);
    remove_dir(dir);
}

/* put_if creates only where nothing is, and replaces only the version whose etag it names. */
static void test_put_if(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
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
    CHECK_INT(count_temp_files(dir), 0);
    store_close(st);
    remove_dir(dir);
}

/* Threads, each with its own store (as separate mounts have), add 1 to a counter object by
 * head, get, put_if, again on -ESTALE: no increment is lost. */
struct counter_ctx {
    const char *dir;
    int adds, failures;
};

static int add_one(struct store *st)
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

static void *counter(void *arg)
{
    struct counter_ctx *c = arg;
    struct store *st = open_store(c->dir);
    for (int i = 0; i < c->adds; i++)
        c->failures += add_one(st) != 0;
    store_close(st);
    return NULL;
}

static void test_put_if_no_lost_update(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    struct counter_ctx c[4];
    pthread_t t[4];
    CHECK_INT(store_put(st, "c/count", "0", 1), 0);
    for (int i = 0; i < 4; i++) {
        c[i] = (struct counter_ctx){ .dir = dir, .adds = 150 };
        CHECK_INT(pthread_create(&t[i], NULL, counter, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK_INT(pthread_join(t[i], NULL), 0);
        CHECK_INT(c[i].failures, 0);
    }
    CHECK(cf_has(st, "c/count", "600"));
    CHECK_INT(count_temp_files(dir), 0);
    store_close(st);
    remove_dir(dir);
}

/* Lazy puts stay atomic (a reader never sees a part); new puts write the key in place. */
static void test_lazy_and_new_puts(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    check_puts_atomic(st, store_put_lazy);
    CHECK_INT(store_put_new(st, "db/r/d/x/0_0", "chunk", 5), 0); /* directories made */
    CHECK(cf_has(st, "db/r/d/x/0_0", "chunk"));
    CHECK_INT(store_put_new(st, "db/r/d/x/0_0", "re", 2), 0); /* shorter: truncated */
    CHECK(cf_has(st, "db/r/d/x/0_0", "re"));
    CHECK_INT(store_put_new(st, "/abs", "x", 1), -EINVAL);
    CHECK_INT(store_put_new(st, "obj/atom/under", "x", 1), -EIO); /* an object, not a dir */
    CHECK_INT(store_sync(st), 0);
    CHECK_INT(count_temp_files(dir), 0);
    store_close(st);
    remove_dir(dir);
}

/* A copy is a hard link: the same bytes under the new key, no second copy on disk; putting
 * either key afterwards (temp + rename) leaves the other as it was; a copy over a file an
 * interrupted commit left there replaces it; a missing source is -ENOENT. */
static void test_copy(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    struct stat a, b;
    char pa[512], pb[512];
    CHECK_INT(store_put(st, "db/a/d/x/0_0", "chunk!", 6), 0);
    CHECK_INT(store_copy(st, "db/a/d/x/0_0", "db/b/d/x/0_0"), 0);
    CHECK(cf_has(st, "db/b/d/x/0_0", "chunk!"));
    snprintf(pa, sizeof pa, "%s/db/a/d/x/0_0", dir);
    snprintf(pb, sizeof pb, "%s/db/b/d/x/0_0", dir);
    CHECK(stat(pa, &a) == 0 && stat(pb, &b) == 0 && a.st_ino == b.st_ino && a.st_nlink == 2);
    CHECK_INT(store_put(st, "db/a/d/x/0_0", "new", 3), 0);
    CHECK(cf_has(st, "db/b/d/x/0_0", "chunk!"));
    CHECK_INT(store_put_new(st, "db/c/d/x/0_0", "left", 4), 0);
    CHECK_INT(store_copy(st, "db/b/d/x/0_0", "db/c/d/x/0_0"), 0);
    CHECK(cf_has(st, "db/c/d/x/0_0", "chunk!"));
    CHECK_INT(store_put_new(st, "db/c/d/x/0_0", "over", 4), 0); /* never through a link */
    CHECK(cf_has(st, "db/b/d/x/0_0", "chunk!"));
    CHECK_INT(store_copy(st, "db/none", "db/d/x"), -ENOENT);
    CHECK_INT(store_copy(st, "db/a/d", "db/d/y"), -EISDIR);
    CHECK_INT(store_copy(st, "db/../x", "db/d/z"), -EINVAL);
    CHECK_INT(count_temp_files(dir), 0);
    store_close(st);
    remove_dir(dir);
}

struct churn_ctx {
    struct store *st;
    const char *key;
    int errors;
};

/* put + delete in a loop: the two threads keep emptying and recreating directory d. */
static void *churn(void *arg)
{
    struct churn_ctx *c = arg;
    for (int i = 0; i < 300; i++) {
        c->errors += cf_put_str(c->st, c->key, "v") != 0;
        c->errors += store_delete(c->st, c->key) != 0;
    }
    return NULL;
}

static void test_put_delete_race(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    struct churn_ctx c1 = { st, "d/e/x", 0 }, c2 = { st, "d/e/y", 0 };
    pthread_t t1, t2;

    CHECK_INT(pthread_create(&t1, NULL, churn, &c1), 0);
    CHECK_INT(pthread_create(&t2, NULL, churn, &c2), 0);
    CHECK_INT(pthread_join(t1, NULL), 0);
    CHECK_INT(pthread_join(t2, NULL), 0);
    CHECK_INT(c1.errors, 0);
    CHECK_INT(c2.errors, 0);
    CHECK(!exists(dir, "d/e"));
    CHECK(is_dir(dir, "."));

    store_close(st);
    remove_dir(dir);
}

static void test_missing_bucket(void)
{
    char *dir = make_dir();
    char missing[PATH_MAX];
    struct store *st = NULL;

    path_of(missing, dir, "nope");
    CHECK_INT(store_posix_open(missing, &st), -ENOENT);
    CHECK(st == NULL);
    CHECK(!exists(dir, "nope"));
    write_file(missing, "a file, not a directory");
    CHECK_INT(store_posix_open(missing, &st), -ENOENT);
    CHECK_INT(unlink(missing), 0);

    /* a bucket removed after it was opened is not created again */
    CHECK_INT(mkdir(missing, 0755), 0);
    st = open_store(missing);
    CHECK_INT(rmdir(missing), 0);
    CHECK(cf_put_str(st, "k", "v") < 0);
    CHECK(cf_put_str(st, "a/b", "v") < 0);
    CHECK(!exists(dir, "nope"));
    store_close(st);
    remove_dir(dir);
}

static void test_escapes(void)
{
    char *dir = make_dir(), *outside = make_dir();
    struct store *st = open_store(dir);
    static const char *const bad[] = { "../x", "a/../../x", "/abs", "a//b", "./a",   "",
                                       "a/",   ".",         "..",   "a/.",  "x/../y" };
    char path[PATH_MAX], target[PATH_MAX];
    struct store_buf b;
    struct store_stat ss;

    CHECK_INT(cf_put_str(st, "a/k", "inside"), 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_INT(store_get(st, bad[i], SIZE_MAX, &b), -EINVAL);
        CHECK_INT(store_get_range(st, bad[i], 0, 1, &b), -EINVAL);
        CHECK_INT(cf_put_str(st, bad[i], "evil"), -EINVAL);
        CHECK_INT(store_head(st, bad[i], &ss), -EINVAL);
        CHECK_INT(store_delete(st, bad[i]), -EINVAL);
    }
    CHECK_INT(store_get(st, NULL, SIZE_MAX, &b), -EINVAL);
    CHECK_INT(cf_put_str(st, TMP_PREFIX "0123", "x"), -EINVAL);
    CHECK_INT(cf_put_str(st, "a/" TMP_PREFIX "0123", "x"), -EINVAL);

    /* symlinks inside the bucket that point outside */
    path_of(target, outside, "secret");
    write_file(target, "SECRET");
    path_of(path, dir, "link");
    CHECK_INT(symlink(target, path), 0);
    path_of(path, dir, "ldir");
    CHECK_INT(symlink(outside, path), 0);
    path_of(path, dir, "a/rel");
    CHECK_INT(symlink("../../", path), 0);

    CHECK_INT(store_get(st, "link", SIZE_MAX, &b), -ENOENT);
    CHECK(b.data == NULL && b.len == 0);
    CHECK_INT(store_get_range(st, "link", 0, 3, &b), -ENOENT);
    CHECK_INT(store_head(st, "link", &ss), -ENOENT);
    CHECK_INT(store_get(st, "ldir/secret", SIZE_MAX, &b), -ENOENT);
    CHECK(b.data == NULL);
    CHECK_INT(store_head(st, "ldir/secret", &ss), -ENOENT);
    CHECK(cf_put_str(st, "ldir/new", "evil") < 0);
    CHECK(cf_put_str(st, "ldir/sub/new", "evil") < 0);
    CHECK(!exists(outside, "new"));
    CHECK(!exists(outside, "sub"));
    CHECK(store_delete(st, "ldir/secret") < 0);
    CHECK(exists(outside, "secret"));
    CHECK(store_get(st,
                    "a/rel/"
                    "h5osfs-x",
                    SIZE_MAX, &b) < 0);
    {
        struct store_list l;
        /* nothing outside the bucket is listed: the prefix holds no object */
        CHECK_INT(store_list(st, "ldir/", "/", NULL, 0, &l), 0);
        CHECK_INT(l.n_objects + l.n_prefixes, 0);
        store_list_free(&l);
    }
    CHECK_INT(count_temp_files(dir), 0);
    CHECK_INT(count_temp_files(outside), 0);

    store_close(st);
    remove_dir(dir);
    remove_dir(outside);
}

static void test_special_files(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    char path[PATH_MAX], buf[1024];
    struct store_buf b;
    struct store_stat ss;

    CHECK_INT(cf_put_str(st, "sub/file", "x"), 0);
    path_of(path, dir, "fifo");
    CHECK_INT(mkfifo(path, 0644), 0);
    CHECK_INT(store_get(st, "fifo", SIZE_MAX, &b), -ENOENT); /* and does not hang */
    CHECK_INT(store_head(st, "fifo", &ss), -ENOENT);
    CHECK_INT(store_get(st, "sub", SIZE_MAX, &b), -EISDIR);
    CHECK_INT(store_get_range(st, "sub", 0, 10, &b), -EISDIR);
    CHECK_INT(store_head(st, "sub", &ss), -EISDIR);
    CHECK_INT(store_delete(st, "sub"), -EISDIR);
    CHECK(is_dir(dir, "sub"));

    /* temporary files, symlinks and fifos are not listed */
    path_of(path, dir, TMP_PREFIX "deadbeef");
    write_file(path, "partial");
    path_of(path, dir, "sub/" TMP_PREFIX "x");
    write_file(path, "partial");
    path_of(path, dir, "sub/lnk");
    CHECK_INT(symlink("file", path), 0);
    CHECK_INT(list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "sub/file|");
    CHECK_INT(list_all(st, "", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "sub/|");
    CHECK_INT(list_all(st, "sub/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "sub/file|");

    store_close(st);
    remove_dir(dir);
}

static void test_range(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
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
    CHECK_INT(store_get_range(st, "r", 10, 5, &b), 0); /* at the end */
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "r", 1000, STORE_RANGE_TO_END, &b), 0);
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "r", UINT64_MAX - 1, 5, &b), 0);
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "r", 3, 0, &b), 0);
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    CHECK_INT(store_get_range(st, "nope", 0, 1, &b), -ENOENT);

    /* the whole-object limit */
    CHECK_INT(store_get(st, "r", 9, &b), -EFBIG);
    CHECK(b.data == NULL);
    CHECK_INT(store_get(st, "r", 10, &b), 0);
    CHECK_INT(b.len, 10);
    store_buf_free(&b);

    store_close(st);
    remove_dir(dir);
}

static int all_hex(const char *s)
{
    for (; *s; s++)
        if (!strchr("0123456789abcdef", *s))
            return 0;
    return 1;
}

static void test_head(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    struct store_stat s1, s2, s3;
    double now = (double)time(NULL);

    CHECK_INT(cf_put_str(st, "h/obj", "12345"), 0);
    CHECK_INT(store_head(st, "h/obj", &s1), 0);
    CHECK_INT(s1.size, 5);
    CHECK(s1.mtime > now - 60 && s1.mtime < now + 60);
    CHECK(strlen(s1.etag) > 0 && all_hex(s1.etag));
    CHECK_INT(store_head(st, "h/obj", &s2), 0);
    CHECK_STR(s2.etag, s1.etag);
    CHECK_INT(cf_put_str(st, "h/obj", "1234567"), 0);
    CHECK_INT(store_head(st, "h/obj", &s3), 0);
    CHECK_INT(s3.size, 7);
    CHECK(strcmp(s3.etag, s1.etag) != 0);
    CHECK_INT(store_head(st, "h/none", &s1), -ENOENT);
    CHECK_INT(s1.size, 0);
    CHECK_INT(store_head(st, "h/obj/x", &s1), -ENOENT);

    store_close(st);
    remove_dir(dir);
}

static void test_delete(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);

    CHECK_INT(cf_put_str(st, "p/q/r", "1"), 0);
    CHECK_INT(cf_put_str(st, "x/y", "1"), 0);
    CHECK_INT(cf_put_str(st, "x/z", "1"), 0);
    CHECK_INT(cf_put_str(st, "top", "1"), 0);

    CHECK_INT(store_delete(st, "p/q/r"), 0);
    CHECK(!exists(dir, "p/q")); /* the emptied parent goes */
    CHECK(!exists(dir, "p"));   /* and its emptied parents: S3 has no directories */
    CHECK_INT(store_delete(st, "x/y"), 0);
    CHECK(is_dir(dir, "x")); /* not empty yet */
    CHECK_INT(store_delete(st, "x/z"), 0);
    CHECK(!exists(dir, "x"));
    CHECK_INT(store_delete(st, "top"), 0);
    CHECK(is_dir(dir, ".")); /* never the bucket */
    CHECK_INT(store_delete(st, "top"), -ENOENT);
    CHECK_INT(store_delete(st, "no/such"), -ENOENT);
    CHECK_INT(store_delete(st, "p"), -ENOENT);
    CHECK_INT(cf_put_str(st, "p/q/r", "1"), 0);
    CHECK_INT(store_delete(st, "p"), -EISDIR);
    CHECK_INT(store_delete(st, "p/q/r"), 0);

    /* the store still works after its directories came and went */
    CHECK_INT(cf_put_str(st, "x/y", "again"), 0);
    CHECK(cf_has(st, "x/y", "again"));

    store_close(st);
    remove_dir(dir);
}

static void put_all(struct store *st, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        CHECK_INT(cf_put_str(st, keys[i], keys[i]), 0);
}

static void test_list(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
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

    put_all(st, keys, sizeof keys / sizeof *keys);

    CHECK_INT(list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "db/g-1/.group.json|db/g-1/d-1/0_0|db/g-1/d-1/0_1|home/.domain.json|"
                   "home/test_user1/.domain.json|home/test_user1/f.h5/.domain.json|"
                   "home/test_user2/.domain.json|homer|");
    CHECK_INT(list_all(st, NULL, NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "db/g-1/.group.json|db/g-1/d-1/0_0|db/g-1/d-1/0_1|home/.domain.json|"
                   "home/test_user1/.domain.json|home/test_user1/f.h5/.domain.json|"
                   "home/test_user2/.domain.json|homer|");
    CHECK_INT(list_all(st, "", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "db/|home/|homer|");
    CHECK_INT(list_all(st, "", "", buf, sizeof buf), 0); /* "" = no delimiter */
    CHECK(strstr(buf, "db/g-1/d-1/0_1|") != NULL);
    CHECK_INT(list_all(st, "home/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/.domain.json|home/test_user1/|home/test_user2/|");
    CHECK_INT(list_all(st, "home", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/|homer|");
    CHECK_INT(list_all(st, "home/te", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/test_user1/|home/test_user2/|");
    CHECK_INT(list_all(st, "home/te", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "home/test_user1/.domain.json|home/test_user1/f.h5/.domain.json|"
                   "home/test_user2/.domain.json|");
    CHECK_INT(list_all(st, "home/test_user1/.", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "home/test_user1/.domain.json|");
    CHECK_INT(list_all(st, "db/g-1/d-1/0_", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "db/g-1/d-1/0_0|db/g-1/d-1/0_1|");
    CHECK_INT(list_all(st, "homer", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "homer|");

    /* missing prefixes: empty, not an error */
    CHECK_INT(list_all(st, "nothing/here/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "");
    CHECK_INT(list_all(st, "nothing", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "");
    CHECK_INT(list_all(st, "homer/x/", NULL, buf, sizeof buf), 0); /* through an object */
    CHECK_STR(buf, "");
    CHECK_INT(list_all(st, "home/..", "/", buf, sizeof buf), 0); /* a partial name */
    CHECK_STR(buf, "");

    /* bad arguments */
    CHECK_INT(store_list(st, "", ",", NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "/home", "/", NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "../", "/", NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "a//", "/", NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "./", NULL, NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "home/../", NULL, NULL, 0, &l), -EINVAL);
    CHECK(l.objects == NULL && l.n_objects == 0 && l.next_token == NULL);

    /* stats are filled in; prefixes carry none */
    CHECK_INT(store_list(st, "db/g-1/", "/", NULL, 0, &l), 0);
    CHECK_INT(l.n_objects, 1);
    CHECK_INT(l.n_prefixes, 1);
    if (l.n_objects == 1 && l.n_prefixes == 1) {
        struct store_stat hs;
        CHECK_STR(l.objects[0].key, "db/g-1/.group.json");
        CHECK_INT(l.objects[0].st.size, strlen("db/g-1/.group.json"));
        CHECK_INT(store_head(st, "db/g-1/.group.json", &hs), 0);
        CHECK_STR(l.objects[0].st.etag, hs.etag);
        CHECK(l.objects[0].st.mtime == hs.mtime);
        CHECK_STR(l.prefixes[0], "db/g-1/d-1/");
    }
    store_list_free(&l);

    store_close(st);
    remove_dir(dir);
}

static void test_order(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    static const char *const keys[] = { "ab",    "a0",    "a/c",  "a.x", "a-b",
                                        "a/b/x", "a/b-y", "a/b0", "Z",   "~" };
    char buf[1024];

    put_all(st, keys, sizeof keys / sizeof *keys);
    /* a file "a" cannot exist next to the directory "a" (POSIX); put reports it */
    CHECK_INT(cf_put_str(st, "a", "x"), -EISDIR);
    CHECK_INT(cf_put_str(st, "a-b/x", "x"), -EIO);

    CHECK_INT(list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "Z|a-b|a.x|a/b-y|a/b/x|a/b0|a/c|a0|ab|~|");
    CHECK_INT(list_all(st, "", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "Z|a-b|a.x|a/|a0|ab|~|");
    CHECK_INT(list_all(st, "a/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "a/b-y|a/b/|a/b0|a/c|");
    CHECK_INT(list_all(st, "a/b", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "a/b-y|a/b/x|a/b0|");

    store_close(st);
    remove_dir(dir);
}

/* Page through with max_keys and check the pages add up to the one-page listing. */
static void check_pages(struct store *st, const char *prefix, const char *delim, size_t max)
{
    char full[4096], paged[4096] = "";
    char *token = NULL;
    int pages = 0;

    CHECK_INT(list_all(st, prefix, delim, full, sizeof full), 0);
    for (;;) {
        struct store_list l;
        char page[4096] = "";
        int err = store_list(st, prefix, delim, token, max, &l);
        CHECK_INT(err, 0);
        size_t n = cf_join_page(&l, page, sizeof page);
        CHECK(n <= max);
        size_t used = strlen(paged), len = strlen(page);
        CHECK(used + len < sizeof paged); /* a cut-off join would fail the compare below */
        if (used + len < sizeof paged)
            memcpy(paged + used, page, len + 1);
        free(token);
        token = NULL;
        if (l.next_token) {
            CHECK_INT(n, max);
            /* the token is the last item of the page */
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

static void test_pagination(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    static const char *const keys[] = { "ab",   "a0",      "a/c", "a.x", "a-b", "a/b/x", "a/b-y",
                                        "a/b0", "a/b/y/z", "q/1", "q/2", "q/3", "r" };
    static const char *const prefixes[] = { "", "a", "a/", "a/b", "q/", "zz" };
    struct store_list l;

    put_all(st, keys, sizeof keys / sizeof *keys);
    for (size_t max = 1; max <= 3; max++) {
        for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
            check_pages(st, prefixes[p], NULL, max);
            check_pages(st, prefixes[p], "/", max);
        }
    }
    check_pages(st, "", NULL, 13); /* exactly everything: no further page */
    check_pages(st, "", NULL, 12);

    /* tokens: strictly greater */
    CHECK_INT(store_list(st, "", NULL, "a/b/x", 2, &l), 0);
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

    store_close(st);
    remove_dir(dir);
}

static void test_odd_names(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    static const char *const keys[] = {
        "dir with space/file name.json",
        "ünïcødé/日本語.json",
        "plus+eq=pct%20/a+b=c%2F",
        "tab\there/x",
        "quote\"'`/$x",
    };
    char buf[2048];

    put_all(st, keys, sizeof keys / sizeof *keys);
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        CHECK(cf_has(st, keys[i], keys[i]));
    CHECK_INT(list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "dir with space/file name.json|plus+eq=pct%20/a+b=c%2F|quote\"'`/$x|"
                   "tab\there/x|ünïcødé/日本語.json|");
    CHECK_INT(list_all(st, "ünïcødé/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "ünïcødé/日本語.json|");
    CHECK_INT(store_delete(st, "plus+eq=pct%20/a+b=c%2F"), 0);
    CHECK(!exists(dir, "plus+eq=pct%20"));

    store_close(st);
    remove_dir(dir);
}

/* The checks every backend passes (the memory store too: test_store_mem). */
static struct store *open_fresh(void **ctx)
{
    char *dir = make_dir();
    *ctx = dir;
    return open_store(dir);
}

static void close_fresh(struct store *st, void *ctx)
{
    store_close(st);
    remove_dir(ctx);
}

int main(void)
{
    static const struct conformance_backend posix = { "posix", open_fresh, close_fresh };
    store_conformance(&posix);
    test_key_check();
    test_round_trip();
    test_intermediate_dirs();
    test_atomic_put();
    test_lazy_and_new_puts();
    test_put_if();
    test_put_if_no_lost_update();
    test_copy();
    test_put_delete_race();
    test_missing_bucket();
    test_escapes();
    test_special_files();
    test_range();
    test_head();
    test_delete();
    test_list();
    test_order();
    test_pagination();
    test_odd_names();
    return check_done("store_posix");
}
