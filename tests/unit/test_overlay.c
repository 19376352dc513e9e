/*
 * test_overlay: an r+ change's staged file over a version's image (src/staging/overlay.h),
 * on a domain committed into a memory bucket behind the faulty store. What the header
 * promises: the fill writes the file without its chunk extents (holes) and those read the
 * image's bytes; a write into part of a chunk copies the rest of it in first, one that covers
 * a chunk whole copies nothing; a write spanning chunks copies both; a truncate copies the
 * chunk across the new end and forgets those beyond; materialize_all leaves every byte in the
 * file; the saved ranges restore the overlay after a crash, less the ranges written since;
 * a chunk that cannot be read is an error, never other bytes.
 */
#include <fcntl.h>

#include "commit_rig.h"
#include "overlay.h"

#define MAX_EXTENTS 64

struct extents {
    uint64_t off[MAX_EXTENTS], len[MAX_EXTENTS];
    size_t n;
};

static int add_extent(void *ctx, uint64_t off, uint64_t len)
{
    struct extents *e = ctx;
    if (e->n == MAX_EXTENTS)
        return -ENOSPC;
    e->off[e->n] = off;
    e->len[e->n++] = len;
    return 0;
}

/* A committed domain, its image and that image's bytes and chunk extents. */
struct base {
    struct rig r;
    char root[SCHEMA_ID_BUF];
    struct image *img;
    unsigned char *bytes;
    size_t len;
    struct extents ext;
};

static void base_open(struct base *b)
{
    struct image_source src;
    rig_open(&b->r, "cache");
    rig_commit(&b->r, "/home/u/r.h5", 7, b->root);
    src = (struct image_source){ .store = b->r.st, .bucket_name = "bucket" };
    REQUIRE(image_build(&src, "/home/u/r.h5", b->root, &b->img) == 0);
    REQUIRE(rig_read_image(b->img, &b->bytes, &b->len) == 0);
    b->ext.n = 0;
    REQUIRE(image_for_each_chunk(b->img, add_extent, &b->ext) == 0);
    /* the cases below need four chunks, each holding whole file-system blocks */
    REQUIRE(b->ext.n >= 4);
    for (size_t i = 0; i < b->ext.n; i++)
        REQUIRE(b->ext.len[i] > 3 * 4096);
}

static void base_close(struct base *b)
{
    image_put(b->img);
    free(b->bytes);
    rig_close(&b->r);
}

/* A new staged file (empty) for an overlay. */
static int staged_file(const char *name)
{
    char path[320];
    snprintf(path, sizeof path, "%s/%s", rig_tmp, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    return fd;
}

/* 1 when the overlay reads exactly want (size bytes). */
static int overlay_reads(struct overlay *o, uint64_t size, const unsigned char *want)
{
    unsigned char *buf = malloc(size + 16);
    REQUIRE(buf != NULL);
    ssize_t n = overlay_read(o, size, buf, size + 16, 0);
    int same = n == (ssize_t)size && memcmp(buf, want, size) == 0;
    free(buf);
    return same;
}

/* 1 when the file's bytes [off, off+len) are want's there (want NULL: all zero). */
static int file_holds(int fd, uint64_t off, uint64_t len, const unsigned char *want)
{
    unsigned char *buf = malloc(len);
    REQUIRE(buf != NULL);
    int same = pread(fd, buf, len, (off_t)off) == (ssize_t)len;
    for (uint64_t i = 0; same && i < len; i++)
        same = buf[i] == (want ? want[off + i] : 0);
    free(buf);
    return same;
}

/* Clean ranges in the overlay's saved text (its lines after the root's). */
static size_t clean_ranges(struct overlay *o)
{
    char *text = NULL;
    size_t n = 0;
    REQUIRE(overlay_save(o, &text) == 0);
    for (const char *p = strchr(text, '\n'); p && p[1]; p = strchr(p + 1, '\n'))
        n++;
    free(text);
    return n;
}

/* A write as staging makes it: the overlay first, then the file; and the same in expect. */
static void write_at(struct overlay *o, int fd, unsigned char *expect, uint64_t off, size_t len,
                     int byte)
{
    unsigned char *buf = malloc(len);
    REQUIRE(buf != NULL);
    memset(buf, byte, len);
    CHECK_INT(overlay_before_write(o, off, len), 0);
    CHECK(pwrite(fd, buf, len, (off_t)off) == (ssize_t)len);
    memcpy(expect + off, buf, len);
    free(buf);
}

static void test_fill_leaves_chunks_as_holes(struct base *b)
{
    struct chunk_cache *cache = chunk_cache_new(16u << 20);
    struct overlay *o = NULL;
    uint64_t size = 0;
    int fd = staged_file("fill.h5");
    REQUIRE(cache != NULL);
    CHECK_INT(overlay_new(b->img, b->root, cache, fd, &o), 0);
    CHECK_STR(overlay_root(o), b->root);
    store_faulty_reset(b->r.st);
    CHECK_INT(overlay_fill(o, &size), 0);
    CHECK_INT(size, b->len);
    /* nothing is fetched (the image holds the metadata): the chunks are holes in the file */
    CHECK_INT(store_faulty_calls(b->r.st, FAULTY_GET), 0);
    CHECK_INT(clean_ranges(o), b->ext.n);
    for (size_t i = 0; i < b->ext.n; i++) {
        CHECK(file_holds(fd, b->ext.off[i], b->ext.len[i], NULL));
        off_t data = lseek(fd, (off_t)(b->ext.off[i] + 4096), SEEK_DATA);
        CHECK(data < 0 || (uint64_t)data >= b->ext.off[i] + b->ext.len[i] - 4096);
    }
    CHECK(file_holds(fd, 0, b->ext.off[0], b->bytes));
    /* and through the overlay the holes read as the image */
    CHECK(overlay_reads(o, size, b->bytes));
    CHECK(rig_values_ok(b->bytes, b->len, 7));
    overlay_free(o);
    close(fd);
    chunk_cache_free(cache);
}

static void test_writes(struct base *b)
{
    struct chunk_cache *cache = chunk_cache_new(16u << 20);
    struct overlay *o = NULL, *again = NULL;
    uint64_t size = 0;
    char *saved = NULL, *root = NULL;
    int fd = staged_file("writes.h5");
    unsigned char *expect = malloc(b->len);
    const struct extents *e = &b->ext;
    size_t n = e->n;
    REQUIRE(cache && expect);
    memcpy(expect, b->bytes, b->len);
    REQUIRE(overlay_new(b->img, b->root, cache, fd, &o) == 0);
    REQUIRE(overlay_fill(o, &size) == 0);
    CHECK_INT(overlay_save(o, &saved), 0);

    /* into part of chunk 0: the rest of it is copied in first */
    write_at(o, fd, expect, e->off[0] + 100, 200, 0xa1);
    CHECK_INT(clean_ranges(o), n - 1);
    CHECK(file_holds(fd, e->off[0], e->len[0], expect));
    /* over chunk 1 whole: nothing of the base is copied */
    CHECK_INT(overlay_before_write(o, e->off[1], e->len[1]), 0);
    CHECK(file_holds(fd, e->off[1], e->len[1], NULL));
    write_at(o, fd, expect, e->off[1], e->len[1], 0xb2);
    CHECK_INT(clean_ranges(o), n - 2);
    CHECK(overlay_reads(o, size, expect));

    /* a crash: the ranges saved at the fill, less those written since, are clean again */
    REQUIRE(overlay_new(b->img, b->root, cache, fd, &again) == 0);
    CHECK_INT(overlay_restore(again, saved), 0);
    CHECK_INT(clean_ranges(again), n - 2);
    CHECK(overlay_reads(again, size, expect));
    root = overlay_saved_root(saved);
    CHECK_STR(root, b->root);
    free(root);
    overlay_free(again);

    /* a truncate into the last chunk: copied in up to the new end, nothing clean after */
    uint64_t cut = e->off[n - 1] + e->len[n - 1] / 2;
    CHECK_INT(overlay_before_truncate(o, cut), 0);
    CHECK(ftruncate(fd, (off_t)cut) == 0);
    CHECK_INT(clean_ranges(o), n - 3);
    CHECK(file_holds(fd, e->off[n - 1], cut - e->off[n - 1], expect));
    CHECK(overlay_reads(o, cut, expect));

    /* across the end of chunk n-2 into the last: the clean one is copied in around it */
    uint64_t from = e->off[n - 2] + e->len[n - 2] - 1000, to = e->off[n - 1] + 1000;
    write_at(o, fd, expect, from, to - from, 0xc3);
    CHECK_INT(clean_ranges(o), n - 4);
    CHECK(file_holds(fd, e->off[n - 2], cut - e->off[n - 2], expect));
    CHECK(overlay_reads(o, cut, expect));
    overlay_free(o);
    free(saved);
    free(expect);
    close(fd);
    chunk_cache_free(cache);
}

/* A write across the boundary of two clean chunks copies the rest of both in. */
static void test_write_spanning_two_clean_chunks(struct base *b)
{
    struct chunk_cache *cache = chunk_cache_new(16u << 20);
    struct overlay *o = NULL;
    uint64_t size = 0;
    int fd = staged_file("span.h5");
    unsigned char *expect = malloc(b->len);
    const struct extents *e = &b->ext;
    REQUIRE(cache && expect);
    memcpy(expect, b->bytes, b->len);
    REQUIRE(overlay_new(b->img, b->root, cache, fd, &o) == 0);
    REQUIRE(overlay_fill(o, &size) == 0);
    uint64_t from = e->off[0] + e->len[0] - 3000, to = e->off[1] + 5000;
    write_at(o, fd, expect, from, to - from, 0xd4);
    CHECK_INT(clean_ranges(o), e->n - 2);
    CHECK(file_holds(fd, e->off[0], e->off[1] + e->len[1] - e->off[0], expect));
    CHECK(file_holds(fd, e->off[2], e->len[2], NULL)); /* the next one untouched */
    CHECK(overlay_reads(o, size, expect));
    overlay_free(o);
    free(expect);
    close(fd);
    chunk_cache_free(cache);
}

static void test_restore_refuses(struct base *b)
{
    struct overlay *o = NULL;
    char text[200];
    int fd = staged_file("restore.h5");
    REQUIRE(overlay_new(b->img, b->root, NULL, fd, &o) == 0);
    CHECK_INT(overlay_restore(o, "garbage"), -EINVAL);
    snprintf(text, sizeof text, "root %s\nnot numbers\n", b->root);
    CHECK_INT(overlay_restore(o, text), -EINVAL);
    /* a range the base has no chunk extent for: the base changed */
    snprintf(text, sizeof text, "root %s\n%llu %llu\n", b->root,
             (unsigned long long)b->ext.off[0] + 1, (unsigned long long)b->ext.len[0]);
    CHECK_INT(overlay_restore(o, text), -EINVAL);
    CHECK(overlay_saved_root("garbage") == NULL);
    CHECK(overlay_saved_root("root d-d64bf735-c43d061d-5ec3-7fbd4c-b58e95\n") == NULL);
    overlay_free(o);
    close(fd);
}

/* A chunk that cannot be read: reads of it and a partial write into it fail with the store's
 * error, nothing is copied; once it reads again, all is well. */
static void test_chunk_read_fails(struct base *b)
{
    struct chunk_cache *cache = chunk_cache_new(16u << 20);
    struct overlay *o = NULL;
    uint64_t size = 0;
    unsigned char buf[512];
    int fd = staged_file("faults.h5");
    REQUIRE(cache != NULL);
    REQUIRE(overlay_new(b->img, b->root, cache, fd, &o) == 0);
    REQUIRE(overlay_fill(o, &size) == 0);
    rig_add_rule(b->r.st, FAULTY_MASK(FAULTY_GET), RIG_CHUNK_KEYS, FAULTY_FAIL, -EIO);
    CHECK_INT(overlay_read(o, size, buf, sizeof buf, b->ext.off[0]), -EIO);
    CHECK(overlay_before_write(o, b->ext.off[0] + 10, 10) < 0);
    CHECK_INT(clean_ranges(o), b->ext.n); /* still clean */
    CHECK_INT(overlay_materialize_all(o) < 0, 1);
    store_faulty_clear(b->r.st);
    CHECK_INT(overlay_before_write(o, b->ext.off[0] + 10, 10), 0);
    CHECK_INT(clean_ranges(o), b->ext.n - 1);
    CHECK(file_holds(fd, b->ext.off[0], b->ext.len[0], b->bytes));
    CHECK(overlay_reads(o, size, b->bytes));
    /* every byte into the file */
    CHECK_INT(overlay_materialize_all(o), 0);
    CHECK_INT(clean_ranges(o), 0);
    CHECK(file_holds(fd, 0, size, b->bytes));
    overlay_free(o);
    close(fd);
    chunk_cache_free(cache);
}

static int first_small_extent(void *ctx, uint64_t off, uint64_t len)
{
    struct extents *e = ctx;
    if (len < 4096 && e->n == 0) {
        e->off[0] = off;
        e->len[e->n++] = len;
    }
    return 0;
}

/*
 * A chunk extent that holds no whole file-system block: a restore cannot see from holes that
 * it was written, so the write that makes it dirty asks for the ranges to be saved first (1),
 * and the text saved then restores it dirty, with the written bytes. It is copied in before
 * even a write that covers it whole, so that the file holds whole bytes whenever it is saved.
 */
static void test_small_chunk_written_survives_restore(struct base *b)
{
    struct chunk_cache *cache = chunk_cache_new(16u << 20);
    struct overlay *o = NULL, *again = NULL;
    struct image *img = NULL;
    struct image_source src = { .store = b->r.st, .bucket_name = "bucket" };
    struct extents small = { .n = 0 };
    char root[SCHEMA_ID_BUF], *after = NULL;
    unsigned char *bytes = NULL, *expect = NULL;
    size_t len = 0;
    uint64_t size = 0;
    int fd = staged_file("small.h5");
    REQUIRE(cache != NULL);
    rig_commit_small(&b->r, "/home/u/small.h5", root);
    REQUIRE(image_build(&src, "/home/u/small.h5", root, &img) == 0);
    REQUIRE(image_for_each_chunk(img, first_small_extent, &small) == 0 && small.n == 1);
    REQUIRE(rig_read_image(img, &bytes, &len) == 0);
    REQUIRE((expect = malloc(len)) != NULL);
    memcpy(expect, bytes, len);
    REQUIRE(overlay_new(img, root, cache, fd, &o) == 0);
    REQUIRE(overlay_fill(o, &size) == 0);
    size_t clean_at_fill = clean_ranges(o);

    /* value 2 of "small" (its bytes 8-11) becomes 0x7f7f7f7f */
    uint64_t value2 = small.off[0] + 2 * sizeof(int);
    CHECK_INT(overlay_before_write(o, value2, 4), 1);
    CHECK(file_holds(fd, small.off[0], small.len[0], bytes)); /* copied in before the save */
    CHECK(pwrite(fd, "\x7f\x7f\x7f\x7f", 4, (off_t)value2) == 4);
    memset(expect + value2, 0x7f, 4);
    CHECK_INT(overlay_before_write(o, value2, 4), 1); /* not saved yet: still asks */
    CHECK_INT(overlay_save(o, &after), 0);
    overlay_saved(o);
    CHECK_INT(overlay_before_write(o, value2, 4), 0); /* saved, and already dirty */
    CHECK_INT(clean_ranges(o), clean_at_fill - 1);
    CHECK(overlay_reads(o, size, expect));
    CHECK_INT(rig_small_value(expect, len, 2), 0x7f7f7f7f);

    /* a crash: the text saved after the write restores the range dirty, its bytes the file's */
    REQUIRE(overlay_new(img, root, cache, fd, &again) == 0);
    CHECK_INT(overlay_restore(again, after), 0);
    CHECK_INT(clean_ranges(again), clean_at_fill - 1);
    CHECK(overlay_reads(again, size, expect));
    overlay_free(again);
    overlay_free(o);

    /* a write that covers it whole still copies it in first (and asks for the save) */
    close(fd);
    fd = staged_file("small_whole.h5");
    REQUIRE(overlay_new(img, root, cache, fd, &o) == 0);
    REQUIRE(overlay_fill(o, &size) == 0);
    CHECK_INT(overlay_before_write(o, small.off[0], small.len[0]), 1);
    CHECK(file_holds(fd, small.off[0], small.len[0], bytes));
    /* a truncate into it the same */
    overlay_free(o);
    close(fd);
    fd = staged_file("small_truncate.h5");
    REQUIRE(overlay_new(img, root, cache, fd, &o) == 0);
    REQUIRE(overlay_fill(o, &size) == 0);
    CHECK_INT(overlay_before_truncate(o, small.off[0] + 100), 1);
    CHECK(file_holds(fd, small.off[0], 100, bytes));
    overlay_free(o);
    image_put(img);
    free(after);
    free(bytes);
    free(expect);
    close(fd);
    chunk_cache_free(cache);
}

int main(void)
{
    struct base b;
    rig_setup("overlay");
    base_open(&b);
    test_fill_leaves_chunks_as_holes(&b);
    test_writes(&b);
    test_write_spanning_two_clean_chunks(&b);
    test_restore_refuses(&b);
    test_small_chunk_written_survives_restore(&b);
    test_chunk_read_fails(&b);
    base_close(&b);
    rig_teardown();
    return check_done("overlay");
}
