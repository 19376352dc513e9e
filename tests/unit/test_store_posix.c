/*
 * test_store_posix: the store wrappers and the POSIX backend against real temporary buckets.
 * Every test makes its own bucket under /tmp and removes it afterwards.
 */
#include "h5osfs/store/store.h"

#include "check.h"
#include "store_conformance.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* The conformance checks, plus what only a directory shows: no temporary file is left. */
static void test_round_trip(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    CHECK_INT(store_keeps_files(st), 1); /* objects are files: a request is a system call */
    cf_round_trip(st);
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

/* Plain and lazy puts: a reader never sees a part, and no temporary file is left. */
static void test_atomic_put(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    cf_atomic_puts(st);
    CHECK_INT(count_temp_files(dir), 0);
    store_close(st);
    remove_dir(dir);
}

/* put_if creates only where nothing is, and replaces only the version whose etag it names. */
static void test_put_if(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    cf_put_if(st);
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

static void *counter(void *arg)
{
    struct counter_ctx *c = arg;
    struct store *st = open_store(c->dir);
    for (int i = 0; i < c->adds; i++)
        c->failures += cf_add_one(st) != 0;
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

/* New puts and copies as every backend does them; here a new put makes the directories and
 * cannot go through an object, and a copy is a hard link (the same bytes under the new key, no
 * second copy on disk) that a later put of either key (temp + rename, or a new put that never
 * writes through a link) leaves as it was. */
static void test_new_puts_and_copy(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    struct stat a, b;
    char pa[512], pb[512];
    cf_new_puts_and_copy(st);
    CHECK(is_dir(dir, "db/r/d/x"));
    CHECK_INT(store_put_new(st, "/abs", "x", 1), -EINVAL);
    CHECK_INT(store_put_new(st, "db/r/d/x/0_0/under", "x", 1), -EIO); /* an object, not a dir */
    CHECK_INT(store_copy(st, "db/b/d/x/0_0", "db/e/d/x/0_0"), 0);
    snprintf(pa, sizeof pa, "%s/db/b/d/x/0_0", dir);
    snprintf(pb, sizeof pb, "%s/db/e/d/x/0_0", dir);
    CHECK(stat(pa, &a) == 0 && stat(pb, &b) == 0 && a.st_ino == b.st_ino && a.st_nlink == 2);
    CHECK_INT(store_copy(st, "db/a/d", "db/d/y"), -EISDIR);
    CHECK_INT(store_sync(st), 0);
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
    CHECK_INT(cf_list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "sub/file|");
    CHECK_INT(cf_list_all(st, "", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "sub/|");
    CHECK_INT(cf_list_all(st, "sub/", "/", buf, sizeof buf), 0);
    CHECK_STR(buf, "sub/file|");

    store_close(st);
    remove_dir(dir);
}

/* A range from far past the end to the end is empty, as one just past it is. */
static void test_range(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    struct store_buf b;
    cf_range(st);
    CHECK_INT(store_get_range(st, "r", 1000, STORE_RANGE_TO_END, &b), 0);
    CHECK_INT(b.len, 0);
    store_buf_free(&b);
    store_close(st);
    remove_dir(dir);
}

/* A delete takes the directories it empties with it (S3 has no directories), never the
 * bucket, and is no way to remove a directory; the store works on after they came and went. */
static void test_delete(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);

    cf_delete(st); /* deletes p/q/r */
    CHECK(!exists(dir, "p/q"));
    CHECK(!exists(dir, "p"));
    CHECK_INT(cf_put_str(st, "x/z", "1"), 0);
    CHECK_INT(cf_put_str(st, "top", "1"), 0);
    CHECK_INT(store_delete(st, "x/y"), 0);
    CHECK(is_dir(dir, "x")); /* not empty yet */
    CHECK_INT(store_delete(st, "x/z"), 0);
    CHECK(!exists(dir, "x"));
    CHECK_INT(store_delete(st, "top"), 0);
    CHECK(is_dir(dir, "."));
    CHECK_INT(store_delete(st, "p"), -ENOENT);
    CHECK_INT(cf_put_str(st, "p/q/r", "1"), 0);
    CHECK_INT(store_delete(st, "p"), -EISDIR);
    CHECK_INT(store_delete(st, "p/q/r"), 0);
    CHECK_INT(cf_put_str(st, "x/y", "again"), 0);
    CHECK(cf_has(st, "x/y", "again"));

    store_close(st);
    remove_dir(dir);
}

/* What the conformance listing leaves out: a NULL prefix lists all, a prefix that ends in a
 * partial name, and the bad arguments a directory tree rejects. */
static void test_list(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    char buf[4096];
    struct store_list l;

    cf_list(st);
    CHECK_INT(cf_list_all(st, NULL, NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "db/g-1/.group.json|db/g-1/d-1/0_0|db/g-1/d-1/0_1|home/.domain.json|"
                   "home/test_user1/.domain.json|home/test_user1/f.h5/.domain.json|"
                   "home/test_user2/.domain.json|homer|");
    CHECK_INT(cf_list_all(st, "home/..", "/", buf, sizeof buf), 0); /* a partial name */
    CHECK_STR(buf, "");
    CHECK_INT(store_list(st, "", ",", NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "../", "/", NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "a//", "/", NULL, 0, &l), -EINVAL);
    CHECK_INT(store_list(st, "./", NULL, NULL, 0, &l), -EINVAL);
    CHECK(l.objects == NULL && l.n_objects == 0 && l.next_token == NULL);

    store_close(st);
    remove_dir(dir);
}

/* A file "a" cannot exist next to the directory "a" (POSIX): put reports it, and the failed
 * puts leave nothing behind in the listing. */
static void test_order(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    char buf[1024];

    cf_order(st);
    CHECK_INT(cf_put_str(st, "a", "x"), -EISDIR);
    CHECK_INT(cf_put_str(st, "a-b/x", "x"), -EIO);
    CHECK_INT(cf_list_all(st, "", NULL, buf, sizeof buf), 0);
    CHECK_STR(buf, "Z|a-b|a.x|a/b-y|a/b/x|a/b0|a/c|a0|ab|~|");

    store_close(st);
    remove_dir(dir);
}

/* Deleting an odd name removes its emptied directory, escaped as it was on disk. */
static void test_odd_names(void)
{
    char *dir = make_dir();
    struct store *st = open_store(dir);
    cf_odd_names(st);
    CHECK(exists(dir, "plus+eq=pct%20"));
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
    static const struct conformance_backend posix = { "posix", open_fresh, close_fresh,
                                                      .opaque_tokens = 0 };
    store_conformance(&posix);
    test_key_check();
    test_round_trip();
    test_intermediate_dirs();
    test_atomic_put();
    test_put_if();
    test_put_if_no_lost_update();
    test_new_puts_and_copy();
    test_put_delete_race();
    test_missing_bucket();
    test_escapes();
    test_special_files();
    test_range();
    test_delete();
    test_list();
    test_order();
    test_odd_names();
    return check_done("store_posix");
}
