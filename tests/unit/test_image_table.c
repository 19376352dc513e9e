/*
 * test_image_table: the table of built images (h5osfs/image/image_table.h) over a memory
 * bucket behind the faulty store, with domains committed as a mount commits them. What the
 * header promises: an image is reused while fresh and its root unchanged; an old one is
 * rebuilt and, when equal, kept; expire forces a new image; a new root builds anew; a failed
 * build is an error and is not remembered; concurrent opens of one domain build it once; the
 * open-file count per root; warming builds a folder's domains ahead.
 */
#include <pthread.h>
#include <time.h>

/* a small file: what is tested here does not depend on its size (valgrind runs it too) */
#define RIG_VALUES (1 << 16)
#include "commit_rig.h"
#include "h5osfs/image/image_table.h"

#define LONG_TTL 3600.0
#define OPENERS 4

static struct image_source source_of(struct rig *r)
{
    return (struct image_source){ .store = r->st, .bucket_name = "bucket", .requests = 2 };
}

static struct image_table_counts counts_of(struct image_table *t)
{
    struct image_table_counts c;
    image_table_counts(t, &c);
    return c;
}

/* A fresh image is reused (same object, reused 1, one build); the bytes are the domain's. */
static void test_reuse_while_fresh(struct rig *r, const char *root)
{
    struct image_source src = source_of(r);
    struct image_table *t;
    struct image *a = NULL, *b = NULL;
    int reused = -1;
    unsigned char *bytes = NULL;
    size_t len = 0;
    REQUIRE(image_table_new(&src, LONG_TTL, &t) == 0);
    CHECK_INT(counts_of(t).held, 0);
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root, &a, &reused), 0);
    CHECK_INT(reused, 0);
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root, &b, &reused), 0);
    CHECK_INT(reused, 1);
    CHECK(a != NULL && a == b);
    struct image_table_counts c = counts_of(t);
    CHECK_INT(c.builds, 1);
    CHECK_INT(c.failures, 0);
    CHECK_INT(c.held, 1);
    CHECK(c.seconds > 0);
    if (a && rig_read_image(a, &bytes, &len) == 0) {
        CHECK(rig_values_ok(bytes, len, 1));
        free(bytes);
    }
    image_put(b);
    image_table_free(t); /* drops the table's reference: a stays valid on ours */
    CHECK(a && image_size(a) == len);
    image_put(a);
}

/* ttl 0: every open rebuilds; an identical rebuild gives back the image already known. */
static void test_equal_rebuild_keeps_image(struct rig *r, const char *root)
{
    struct image_source src = source_of(r);
    struct image_table *t;
    struct image *a = NULL, *b = NULL;
    int reused = -1;
    REQUIRE(image_table_new(&src, 0, &t) == 0);
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root, &a, &reused), 0);
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root, &b, &reused), 0);
    CHECK_INT(counts_of(t).builds, 2);
    CHECK_INT(reused, 1);
    CHECK(a != NULL && a == b);
    CHECK(a && b && image_serial(a) == image_serial(b));
    image_put(b);

    /* expired: the next open builds a new image, even though it is equal */
    image_table_expire(t, "/home/u/a.h5");
    CHECK_INT(counts_of(t).held, 0);
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root, &b, &reused), 0);
    CHECK_INT(reused, 0);
    CHECK(b != NULL && b != a);
    CHECK(a && b && image_serial(a) != image_serial(b));
    CHECK(a && b && image_equal(a, b));
    CHECK_INT(counts_of(t).builds, 3);
    image_put(a);
    image_put(b);
    image_table_free(t);
}

/* A new root of a path (a commit) builds the new version; the old image stays readable. */
static void test_new_root(struct rig *r, const char *root_a, const char *root_b)
{
    struct image_source src = source_of(r);
    struct image_table *t;
    struct image *a = NULL, *b = NULL;
    int reused = -1;
    unsigned char *bytes = NULL;
    size_t len = 0;
    REQUIRE(image_table_new(&src, LONG_TTL, &t) == 0);
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root_a, &a, &reused), 0);
    /* the path now names b's version (as after a commit of another file there) */
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root_b, &b, &reused), 0);
    CHECK_INT(reused, 0);
    CHECK(a != b);
    CHECK_INT(counts_of(t).builds, 2);
    CHECK_INT(counts_of(t).held, 1); /* one slot per path */
    if (b && rig_read_image(b, &bytes, &len) == 0) {
        CHECK(rig_values_ok(bytes, len, 2));
        free(bytes);
    }
    if (a && rig_read_image(a, &bytes, &len) == 0) {
        CHECK(rig_values_ok(bytes, len, 1));
        free(bytes);
    }
    image_put(a);
    image_put(b);
    image_table_free(t);
}

/* A build that fails: -EIO, no image, counted; the next open tries again and succeeds. */
static void test_failed_build(struct rig *r, const char *root)
{
    struct image_source src = source_of(r);
    struct image_table *t;
    struct image *img = (struct image *)&src; /* must be set to NULL */
    int reused = -1;
    char glob[64];
    REQUIRE(image_table_new(&src, LONG_TTL, &t) == 0);
    snprintf(glob, sizeof glob, "db/%.17s/.group.json", root + 2);
    rig_add_rule(r->st, FAULTY_MASK(FAULTY_GET), glob, FAULTY_FAIL, -EIO);
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root, &img, &reused), -EIO);
    CHECK(img == NULL);
    struct image_table_counts c = counts_of(t);
    CHECK_INT(c.builds, 1);
    CHECK_INT(c.failures, 1);
    CHECK_INT(c.held, 0);
    store_faulty_clear(r->st);
    CHECK_INT(image_table_get(t, "/home/u/a.h5", root, &img, &reused), 0);
    CHECK_INT(reused, 0);
    CHECK(img != NULL);
    c = counts_of(t);
    CHECK_INT(c.builds, 2);
    CHECK_INT(c.failures, 1);
    image_put(img);
    image_table_free(t);
}

struct opener {
    struct image_table *t;
    const char *root;
    pthread_barrier_t *start;
    struct image *img;
    int rc;
};

static void *open_one(void *arg)
{
    struct opener *o = arg;
    int reused;
    pthread_barrier_wait(o->start);
    o->rc = image_table_get(o->t, "/home/u/a.h5", o->root, &o->img, &reused);
    return NULL;
}

/* Concurrent opens of one domain build it once and all get that image. */
static void test_concurrent_opens_build_once(struct rig *r, const char *root)
{
    struct image_source src = source_of(r);
    struct image_table *t;
    struct opener o[OPENERS];
    pthread_t th[OPENERS];
    pthread_barrier_t start;
    REQUIRE(image_table_new(&src, LONG_TTL, &t) == 0);
    REQUIRE(pthread_barrier_init(&start, NULL, OPENERS) == 0);
    store_faulty_reset(r->st);
    for (int i = 0; i < OPENERS; i++) {
        o[i] = (struct opener){ .t = t, .root = root, .start = &start, .rc = -1 };
        REQUIRE(pthread_create(&th[i], NULL, open_one, &o[i]) == 0);
    }
    for (int i = 0; i < OPENERS; i++)
        pthread_join(th[i], NULL);
    CHECK_INT(counts_of(t).builds, 1);
    for (int i = 0; i < OPENERS; i++) {
        CHECK_INT(o[i].rc, 0);
        CHECK(o[i].img != NULL && o[i].img == o[0].img);
        image_put(o[i].img);
    }
    pthread_barrier_destroy(&start);
    image_table_free(t);
}

/* Open files per root: counted up and down, never below nothing. */
static void test_hold(struct rig *r)
{
    struct image_source src = source_of(r);
    struct image_table *t;
    char stamp[IMAGE_STAMP_BUF], want[IMAGE_STAMP_BUF];
    REQUIRE(image_table_new(&src, LONG_TTL, &t) == 0);
    CHECK_INT(image_table_root_in_use(t, "g-1"), 0);
    image_table_hold(t, "g-1", +1);
    image_table_hold(t, "g-1", +1);
    CHECK_INT(image_table_root_in_use(t, "g-1"), 1);
    CHECK_INT(image_table_root_in_use(t, "g-2"), 0);
    image_table_hold(t, "g-1", -1);
    CHECK_INT(image_table_root_in_use(t, "g-1"), 1);
    image_table_hold(t, "g-1", -1);
    CHECK_INT(image_table_root_in_use(t, "g-1"), 0);
    image_table_hold(t, "g-1", -1); /* one release too many does not go below nothing */
    image_table_hold(t, "g-1", +1);
    CHECK_INT(image_table_root_in_use(t, "g-1"), 1);
    image_table_hold(t, "g-1", -1);
    CHECK_INT(image_table_root_in_use(t, "g-1"), 0);
    image_table_stamp(t, stamp);
    image_layout_stamp(&src, want);
    CHECK_STR(stamp, want);
    image_table_free(t);
}

/* Wait (bounded) until the table holds n images. */
static int await_held(struct image_table *t, uint64_t n)
{
    struct timespec pause = { 0, 2 * 1000 * 1000 };
    for (int i = 0; i < 30000 && counts_of(t).held < n; i++)
        nanosleep(&pause, NULL);
    return counts_of(t).held >= n;
}

/* Warming builds the folder's domains ahead: the opens that follow reuse them; after
 * stop_warming nothing more is warmed. */
static void test_warm(struct rig *r, const char *root_a, const char *root_b)
{
    struct image_source src = source_of(r);
    struct image_table *t;
    struct image *img = NULL;
    int reused = -1;
    const char *paths[] = { "/home/u/a.h5", "/home/u/b.h5" }, *roots[] = { root_a, root_b };
    REQUIRE(image_table_new(&src, LONG_TTL, &t) == 0);
    CHECK_INT(image_table_warm(t, "/home/u", paths, roots, 2), 0);
    CHECK(await_held(t, 2));
    CHECK_INT(counts_of(t).builds, 2);
    for (int i = 0; i < 2; i++) {
        CHECK_INT(image_table_get(t, paths[i], roots[i], &img, &reused), 0);
        CHECK_INT(reused, 1);
        image_put(img);
    }
    CHECK_INT(counts_of(t).builds, 2);
    image_table_stop_warming(t);
    CHECK_INT(image_table_warm(t, "/home/u", paths, roots, 2), -EAGAIN);
    image_table_free(t);
}

int main(void)
{
    struct rig r;
    char root_a[SCHEMA_ID_BUF], root_b[SCHEMA_ID_BUF];
    rig_setup("image_table");
    rig_open(&r, "cache");
    rig_commit(&r, "/home/u/a.h5", 1, root_a);
    rig_commit(&r, "/home/u/b.h5", 2, root_b);
    test_reuse_while_fresh(&r, root_a);
    test_equal_rebuild_keeps_image(&r, root_a);
    test_new_root(&r, root_a, root_b);
    test_failed_build(&r, root_a);
    test_concurrent_opens_build_once(&r, root_a);
    test_hold(&r);
    test_warm(&r, root_a, root_b);
    rig_close(&r);
    rig_teardown();
    return check_done("image_table");
}
