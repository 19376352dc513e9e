/*
 * test_image_build: image_build on small buckets written here (src/image/build*.c).
 *
 * 1. Declared size: datasets declaring 10^12 elements in 10^12 chunks (fixed, unlimited, or a
 *    maximum of 10^13; chunk objects, or one chunk of a linked HDF5 file) with one chunk or
 *    none cost RAM and file size for the chunks that exist, not for their grid;
 *    HDF5 (sec2, on the image written to disk) reads their shapes, the stored chunk and the
 *    fill value right.
 * 2. What cannot be shown as stored: a dataset of an unknown type is a placeholder whose bytes
 *    fail to read (-EIO); a scalar whose value cannot be read, an attribute that cannot be made
 *    and a link to a missing object are left out; image_left_out lists each once, with its id
 *    and name.
 * 3. Read through: a reader that reads every byte of a chunk in a run begun before it lets the
 *    cache drop the chunk, whatever order its pieces came in (the kernel's parallel READs); a
 *    reader that jumps onto a chunk's first byte and reads it through keeps it.
 * 4. Dense datasets: one with every chunk of its grid stored and a shape that cannot grow has
 *    them allocated by HDF5 in one call (early allocation); one that can grow (an extensible
 *    array, a v2 B-tree index) or misses a chunk (that reads as the fill value) is built as
 *    before (incremental allocation); in each, with edge chunks, every element reads as stored.
 * 5. Group formats: a group that does not track creation order is a symbol table (HDF5's
 *    original format) unless an attribute is too large for that format's object header; a
 *    group that tracks it keeps the newer format; in each, every link and attribute is there,
 *    an external link and a UTF-8 name too (HDF5 converts a symbol table that gets one).
 * 6. Committed types: a dataset and an attribute of a committed type use it as stored, and
 *    the type stays usable after each use has released it.
 * 7. Virtual datasets: a dataset with an "h5osfs": {"virtual": [...]} member is a VDS whose
 *    mappings (names, both selections: regular, unlimited, blocks, all) HDF5 reads back as
 *    stated; each malformed member (wrong types, ranks, counts, classes, names) makes only
 *    its dataset a placeholder, listed once, whatever it holds.
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "check.h"
#include "h5osfs/cache/cache.h"
#include "h5osfs/image/image.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"
#include "image_int.h"

/* A v2 root id (its second half is the first rotated by 8, spec §1.2) and members of it. */
#define ROOT "g-01234567-89abcdef-89ab-cdef01-234567"
#define MEMBER(cls, tail) cls "-01234567-89abcdef-" tail
#define D_SPARSE MEMBER("d", "0000-000000-000001")
#define D_UNLIMITED MEMBER("d", "0000-000000-000002")
#define D_MAXDIMS MEMBER("d", "0000-000000-000003")
#define D_EMPTY MEMBER("d", "0000-000000-000004")
#define D_BADTYPE MEMBER("d", "0000-000000-000005")
#define D_SCALAR MEMBER("d", "0000-000000-000006")
#define D_GHOST MEMBER("d", "0000-000000-000007")
#define D_LINKED MEMBER("d", "0000-000000-000008")
#define D_THROUGH MEMBER("d", "0000-000000-000009")
#define D_DENSE MEMBER("d", "0000-000000-00000a")
#define D_DENSE_EA MEMBER("d", "0000-000000-00000b")
#define D_HOLED MEMBER("d", "0000-000000-00000c")
#define D_DENSE_BT2 MEMBER("d", "0000-000000-00000d")
#define G_PLAIN MEMBER("g", "0000-000000-00000e")
#define G_BIGATTR MEMBER("g", "0000-000000-00000f")
#define G_ORDERED MEMBER("g", "0000-000000-000010")
#define G_MIXED MEMBER("g", "0000-000000-000011")
#define T_NAMED MEMBER("t", "0000-000000-000012")
#define D_TYPED MEMBER("d", "0000-000000-000013")
#define D_VDS MEMBER("d", "0000-000000-000014")
#define D_VDS_BAD MEMBER("d", "0000-000000-000015")

#define TERA 1000000000000ull

static char tmp_dir[256];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void put(struct store *st, const char *key, const char *text)
{
    CHECK_INT(store_put(st, key, text, strlen(text)), 0);
}

/* Object id of the domain, its JSON members given by body. */
static void put_object(struct store *st, const char *id, const char *body)
{
    char key[STORE_KEY_MAX + 1], text[8192];
    CHECK_INT(schema_obj_key(id, key, sizeof key), 0);
    snprintf(text, sizeof text, "{\"id\": \"%s\", \"root\": \"%s\", %s}", id, ROOT, body);
    put(st, key, text);
}

static void put_dataset(struct store *st, const char *id, const char *body)
{
    char text[4096];
    snprintf(text, sizeof text, "\"attributes\": {}, %s", body);
    put_object(st, id, text);
}

static void put_chunk(struct store *st, const char *id, const uint64_t *index, int rank,
                      const void *bytes, size_t len)
{
    char key[STORE_KEY_MAX + 1];
    CHECK_INT(schema_chunk_key(id, index, rank, -1, key, sizeof key), 0);
    CHECK_INT(store_put(st, key, bytes, len), 0);
}

static const char *hard_link(const char *name, const char *id, char *buf, size_t len)
{
    snprintf(buf, len, "\"%s\": {\"class\": \"H5L_TYPE_HARD\", \"id\": \"%s\"}", name, id);
    return buf;
}

static void put_root(struct store *st, const char *links, const char *attrs)
{
    char body[2048];
    snprintf(body, sizeof body, "\"links\": {%s}, \"attributes\": {%s}", links, attrs);
    put_object(st, ROOT, body);
}

static struct store *new_bucket(const char *name)
{
    char dir[512];
    struct store *st = NULL;
    snprintf(dir, sizeof dir, "%s/%s", tmp_dir, name);
    CHECK_INT(mkdir(dir, 0755), 0);
    CHECK_INT(store_posix_open(dir, &st), 0);
    return st;
}

static struct image *build(struct store *st)
{
    struct image_source src = { .store = st, .bucket_name = "bucket" };
    struct image *img = NULL;
    CHECK_INT(image_build(&src, "/home/u/x.h5", ROOT, &img), 0);
    return img;
}

/* image_read_view of a chunk extent: the bytes image_read gives, inside the extent only. */
static void check_views(struct image *img, struct image_reader *r, const struct segment *s,
                        int poisoned)
{
    static unsigned char copy[4096];
    struct image_view v;
    size_t len = s->len < sizeof copy ? (size_t)s->len : sizeof copy;
    uint64_t at[] = { s->off, s->off + s->len - len };
    for (int k = 0; k < 2; k++) {
        int rc = image_read_view(img, r, at[k], len, &v);
        CHECK_INT(rc, poisoned ? -EIO : 1);
        if (rc != 1)
            continue;
        CHECK(v.len == len && image_read(img, r, at[k], copy, len) == (ssize_t)len);
        CHECK(memcmp(v.data, copy, len) == 0);
        image_view_release(&v);
    }
    /* across the extent's end (into the next segment or a hole): not one chunk */
    if (s->off + s->len < image_size(img))
        CHECK_INT(image_read_view(img, r, s->off + s->len - 1, 2, &v), 0);
}

/* The image on disk, with the bytes of unreadable extents as zeros (reads fail with -EIO: checked
 * here). Only for small images. */
static int write_image(struct image *img, const char *path)
{
    struct image_reader r = { .cache = chunk_cache_new(64u << 20) };
    size_t n;
    const struct segment *segs = extent_segments(img->map, &n);
    static unsigned char buf[1 << 20];
    FILE *fp = fopen(path, "wb");
    int rc = fp && r.cache ? 0 : -EIO;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct segment *s = &segs[i];
        int poisoned = s->kind == SEGMENT_CHUNK && img->datasets[s->dset].origin == ORIGIN_POISON;
        if (poisoned)
            CHECK_INT(image_read(img, &r, s->off, buf, 1), -EIO);
        if (s->kind == SEGMENT_CHUNK)
            check_views(img, &r, s, poisoned);
        if (fseeko(fp, (off_t)s->off, SEEK_SET) != 0) /* the holes between: zeros */
            rc = -EIO;
        for (uint64_t off = s->off; off < s->off + s->len && rc == 0;) {
            size_t len = s->off + s->len - off < sizeof buf ? s->off + s->len - off : sizeof buf;
            if (poisoned)
                memset(buf, 0, len);
            else if (image_read(img, &r, off, buf, len) != (ssize_t)len)
                rc = -EIO;
            if (rc == 0 && fwrite(buf, 1, len, fp) != len)
                rc = -EIO;
            off += len;
        }
    }
    if (fp && rc == 0 && ftruncate(fileno(fp), (off_t)image_size(img)) != 0)
        rc = -EIO;
    if (fp && fclose(fp) != 0)
        rc = -EIO;
    chunk_cache_free(r.cache);
    return rc;
}

/* ---- 1. declared size ---- */

static void put_sparse_domain(struct store *st)
{
    char l1[200], l2[200], l3[200], l4[200], l5[200], links[1024];
    const char *i8 = "\"type\": {\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I8LE\"}";
    char body[1024], linked[256];
    snprintf(
        links, sizeof links, "%s, %s, %s, %s, %s", hard_link("sparse", D_SPARSE, l1, sizeof l1),
        hard_link("unlimited", D_UNLIMITED, l2, sizeof l2),
        hard_link("maxdims", D_MAXDIMS, l3, sizeof l3), hard_link("empty", D_EMPTY, l4, sizeof l4),
        hard_link("linked", D_LINKED, l5, sizeof l5));
    put_root(st, links, "");
    /* 10^12 elements in chunks of one, fill value -1, one chunk object (42 at 123456789012) */
    snprintf(body, sizeof body,
             "%s, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [%llu]}, "
             "\"creationProperties\": {\"fillValue\": -1}, "
             "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [1]}",
             i8, TERA);
    put_dataset(st, D_SPARSE, body);
    put_chunk(st, D_SPARSE, (uint64_t[]){ 123456789012ull }, 1, "\x2a", 1);
    /* the same, extendible (one unlimited dimension: an extensible array in HDF5) */
    snprintf(body, sizeof body,
             "%s, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [%llu], "
             "\"maxdims\": [0]}, \"creationProperties\": {\"fillValue\": -1}, "
             "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [1]}",
             i8, TERA);
    put_dataset(st, D_UNLIMITED, body);
    put_chunk(st, D_UNLIMITED, (uint64_t[]){ TERA - 1 }, 1, "\x07", 1);
    /* small now, 10^13 at most */
    snprintf(body, sizeof body,
             "%s, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [1000], "
             "\"maxdims\": [%llu]}, \"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [1]}",
             i8, 10 * TERA);
    put_dataset(st, D_MAXDIMS, body);
    put_chunk(st, D_MAXDIMS, (uint64_t[]){ 999 }, 1, "\x05", 1);
    /* no chunk object at all */
    snprintf(body, sizeof body,
             "%s, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [1000000, "
             "1000000]}, \"creationProperties\": {\"fillValue\": 3}, "
             "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [1, 1]}",
             i8);
    put_dataset(st, D_EMPTY, body);
    /* element 5 is byte 77 of a linked file (an unfiltered one-byte HDF5 chunk) */
    for (int i = 0; i < 256; i++)
        linked[i] = (char)i;
    CHECK_INT(store_put(st, "linked/f.bin", linked, sizeof linked), 0);
    snprintf(body, sizeof body,
             "%s, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [%llu]}, "
             "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [1]}, "
             "\"creationProperties\": {\"layout\": {\"class\": \"H5D_CHUNKED_REF\", "
             "\"file_uri\": \"bucket/linked/f.bin\", \"dims\": [1], "
             "\"chunks\": {\"5\": [77, 1]}}}",
             i8, TERA);
    put_dataset(st, D_LINKED, body);
}

static signed char read_element(hid_t f, const char *name, const hsize_t *at, int rank)
{
    signed char v = 0;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), fs = d >= 0 ? H5Dget_space(d) : -1;
    hsize_t one[2] = { 1, 1 };
    hid_t ms = H5Screate_simple(rank, one, NULL);
    CHECK(d >= 0 && fs >= 0 && ms >= 0);
    if (d >= 0 && fs >= 0 && ms >= 0) {
        CHECK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, at, NULL, one, NULL) >= 0);
        CHECK(H5Dread(d, H5T_NATIVE_SCHAR, ms, fs, H5P_DEFAULT, &v) >= 0);
    }
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    if (d >= 0)
        H5Dclose(d);
    return v;
}

static void check_shape(hid_t f, const char *name, hsize_t dim, hsize_t maxdim)
{
    hsize_t dims[2], max[2];
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), s = d >= 0 ? H5Dget_space(d) : -1;
    CHECK(s >= 0 && H5Sget_simple_extent_dims(s, dims, max) == 1);
    CHECK_INT(dims[0], dim);
    CHECK(max[0] == maxdim);
    if (s >= 0)
        H5Sclose(s);
    if (d >= 0)
        H5Dclose(d);
}

static void test_declared_size(void)
{
    char path[512];
    struct store *st = new_bucket("declared");
    struct image_stats stats;
    put_sparse_domain(st);
    struct image *img = build(st);
    if (!img) {
        store_close(st);
        return;
    }
    image_stats(img, &stats);
    printf("declared: %" PRIu64 " bytes, %" PRIu64 " bytes of RAM, %.3f s\n", stats.size,
           stats.memory, stats.build_seconds);
    /* before: 8 TB, 244 MB (fixed arrays over 10^12 and 10^13 chunks: the latter 2.4 GB; a
     * linked dataset's piece table over its whole grid, refused beyond 10^7 chunks) */
    CHECK(stats.memory < (1u << 20));
    CHECK(stats.size < (4u << 20));
    CHECK_INT(stats.datasets, 5);
    CHECK_INT(stats.chunks, 5); /* four stored, the empty dataset's first */
    snprintf(path, sizeof path, "%s/declared.h5", tmp_dir);
    if (stats.size < (4u << 20) && write_image(img, path) == 0) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        CHECK(f >= 0);
        check_shape(f, "sparse", TERA, TERA);
        check_shape(f, "unlimited", TERA, H5S_UNLIMITED);
        check_shape(f, "maxdims", 1000, 10 * TERA);
        CHECK_INT(read_element(f, "sparse", (hsize_t[]){ 123456789012ull }, 1), 42);
        CHECK_INT(read_element(f, "sparse", (hsize_t[]){ 123456789011ull }, 1), -1);
        CHECK_INT(read_element(f, "unlimited", (hsize_t[]){ TERA - 1 }, 1), 7);
        CHECK_INT(read_element(f, "unlimited", (hsize_t[]){ 0 }, 1), -1);
        CHECK_INT(read_element(f, "maxdims", (hsize_t[]){ 999 }, 1), 5);
        CHECK_INT(read_element(f, "maxdims", (hsize_t[]){ 998 }, 1), 0);
        CHECK_INT(read_element(f, "empty", (hsize_t[]){ 999999, 5 }, 2), 3);
        CHECK_INT(read_element(f, "linked", (hsize_t[]){ 5 }, 1), 77);
        CHECK_INT(read_element(f, "linked", (hsize_t[]){ 6 }, 1), 0);
        H5Fclose(f);
    }
    image_put(img);
    store_close(st);
}

/* ---- 2. what cannot be shown as stored ---- */

static void put_bad_domain(struct store *st)
{
    char l1[200], l2[200], l3[200], links[1024];
    snprintf(links, sizeof links, "%s, %s, %s", hard_link("badtype", D_BADTYPE, l1, sizeof l1),
             hard_link("scalar", D_SCALAR, l2, sizeof l2),
             hard_link("ghost", D_GHOST, l3, sizeof l3));
    put_root(st, links,
             "\"broken\": {\"type\": {\"class\": \"H5T_MYSTERY\"}, "
             "\"shape\": {\"class\": \"H5S_SCALAR\"}, \"value\": 1}, "
             "\"fine\": {\"type\": {\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I32LE\"}, "
             "\"shape\": {\"class\": \"H5S_SCALAR\"}, \"value\": 1}");
    put_dataset(st, D_BADTYPE,
                "\"type\": {\"class\": \"H5T_MYSTERY\"}, "
                "\"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [100, 100]}, "
                "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [10, 10]}");
    /* a scalar whose one chunk has 2 bytes where an int32 needs 4 */
    put_dataset(st, D_SCALAR,
                "\"type\": {\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I32LE\"}, "
                "\"shape\": {\"class\": \"H5S_SCALAR\"}, "
                "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [1]}");
    put_chunk(st, D_SCALAR, (uint64_t[]){ 0 }, 1, "\x01\x02", 2);
}

static const struct image_omission *find_omission(const struct image *img,
                                                  enum image_omission_kind kind, const char *id,
                                                  const char *name)
{
    size_t n, found = 0;
    const struct image_omission *v = image_left_out(img, &n), *hit = NULL;
    for (size_t i = 0; i < n; i++)
        if (v[i].kind == kind && strcmp(v[i].id, id) == 0 &&
            (name ? v[i].name && strcmp(v[i].name, name) == 0 : !v[i].name)) {
            hit = &v[i];
            found++;
        }
    CHECK_INT(found, 1);
    return hit;
}

static void test_left_out(void)
{
    char path[512];
    struct store *st = new_bucket("bad");
    put_bad_domain(st);
    struct image *img = build(st);
    if (!img) {
        store_close(st);
        return;
    }
    size_t n;
    const struct image_omission *o;
    image_left_out(img, &n);
    CHECK_INT(n, 5);
    if ((o = find_omission(img, IMAGE_OMIT_PLACEHOLDER, D_BADTYPE, NULL))) {
        CHECK_STR(o->path, "/badtype");
        CHECK(strstr(o->why, "H5T_MYSTERY") != NULL);
    }
    if ((o = find_omission(img, IMAGE_OMIT_OBJECT, D_SCALAR, NULL)))
        CHECK(strstr(o->why, "scalar") != NULL);
    find_omission(img, IMAGE_OMIT_LINK, ROOT, "scalar");
    if ((o = find_omission(img, IMAGE_OMIT_LINK, ROOT, "ghost"))) {
        CHECK_STR(o->path, "/");
        CHECK(strstr(o->why, "missing") != NULL);
    }
    if ((o = find_omission(img, IMAGE_OMIT_ATTRIBUTE, ROOT, "broken")))
        CHECK_STR(o->path, "/");
    snprintf(path, sizeof path, "%s/bad.h5", tmp_dir);
    if (image_size(img) < (4u << 20) && write_image(img, path) == 0) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        CHECK(f >= 0);
        CHECK(H5Lexists(f, "badtype", H5P_DEFAULT) > 0);
        CHECK(H5Lexists(f, "scalar", H5P_DEFAULT) == 0);
        CHECK(H5Lexists(f, "ghost", H5P_DEFAULT) == 0);
        CHECK(H5Aexists(f, "fine") > 0);
        CHECK(H5Aexists(f, "broken") == 0);
        hid_t d = H5Dopen2(f, "badtype", H5P_DEFAULT), t = d >= 0 ? H5Dget_type(d) : -1;
        CHECK(t >= 0 && H5Tget_class(t) == H5T_OPAQUE);
        if (t >= 0)
            H5Tclose(t);
        if (d >= 0)
            H5Dclose(d);
        H5Fclose(f);
    }
    image_put(img);
    store_close(st);
}

/* ---- 3. read through ---- */

#define MIB (1u << 20)
#define THROUGH_CHUNKS 8

static struct image *build_through(struct store *st, const struct segment **chunks)
{
    static unsigned char bytes[MIB];
    char link[200], body[512];
    put_root(st, hard_link("big", D_THROUGH, link, sizeof link), "");
    snprintf(body, sizeof body,
             "\"type\": {\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_U8LE\"}, "
             "\"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [%u]}, "
             "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [%u]}",
             THROUGH_CHUNKS * MIB, MIB);
    put_dataset(st, D_THROUGH, body);
    for (uint64_t c = 0; c < THROUGH_CHUNKS; c++) {
        for (size_t k = 0; k < MIB; k++)
            bytes[k] = (unsigned char)(c * 7 + k);
        put_chunk(st, D_THROUGH, &c, 1, bytes, MIB);
    }
    struct image *img = build(st);
    size_t n, found = 0;
    const struct segment *segs = img ? extent_segments(img->map, &n) : NULL;
    for (size_t i = 0; img && i < n; i++)
        if (segs[i].kind == SEGMENT_CHUNK && found < THROUGH_CHUNKS)
            chunks[found++] = &segs[i];
    CHECK_INT(found, img ? THROUGH_CHUNKS : 0);
    return found == THROUGH_CHUNKS ? img : NULL;
}

/* The pieces' bytes, in order, into buf (a piece in a file read from it, as splice would). */
static size_t gather_pieces(const struct image_pieces *p, unsigned char *buf)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_iov; i++) {
        size_t len = p->iov[i].iov_len;
        if (p->fd[i] < 0)
            memcpy(buf + n, p->iov[i].iov_base, len);
        else
            CHECK(pread(p->fd[i], buf + n, len, (off_t)p->fd_off[i]) == (ssize_t)len);
        n += len;
    }
    return n;
}

/* Reads len bytes at off as pieces, without a copy (view != 0), or a copy, and checks them:
 * chunk c's byte k is c * 7 + k. */
static void read_checked(struct image *img, struct image_reader *r, const struct segment *s,
                         uint64_t c, uint64_t off, size_t len, int view)
{
    static unsigned char buf[MIB];
    struct image_pieces p;
    if (view) {
        CHECK_INT(image_read_pieces(img, r, off, len, &p), 1);
        CHECK(gather_pieces(&p, buf) == len);
        image_pieces_release(&p);
    } else {
        CHECK(image_read(img, r, off, buf, len) == (ssize_t)len);
    }
    int same = 1;
    for (size_t k = 0; k < len; k++)
        same &= buf[k] == (unsigned char)(c * 7 + (off - s->off) + k);
    CHECK(same);
}

/* Chunk c read whole in pieces of 64 KiB, each pair of pieces swapped. */
static void read_chunk_shuffled(struct image *img, struct image_reader *r, const struct segment *s,
                                uint64_t c)
{
    const size_t piece = 64u << 10;
    for (size_t p = 0; p < MIB / piece; p++)
        read_checked(img, r, s, c, s->off + (p ^ 1) * piece, piece, (int)(c & 1));
}

static void test_read_through(void)
{
    struct store *st = new_bucket("through");
    const struct segment *chunks[THROUGH_CHUNKS];
    struct image *img = build_through(st, chunks);
    struct chunk_cache_stats cs;
    if (!img) {
        store_close(st);
        return;
    }
    /* front to back, from byte 0 */
    struct image_reader r = { .cache = chunk_cache_new(64u * MIB) };
    static unsigned char meta[MIB];
    CHECK(chunks[0]->off <= sizeof meta &&
          image_read(img, &r, 0, meta, chunks[0]->off) == (ssize_t)chunks[0]->off);
    for (uint64_t c = 0; c < THROUGH_CHUNKS; c++)
        read_chunk_shuffled(img, &r, chunks[c], c);
    chunk_cache_stats(r.cache, &cs);
    CHECK_INT(cs.misses, THROUGH_CHUNKS);
    CHECK_INT(cs.evictions, THROUGH_CHUNKS);
    CHECK_INT(cs.bytes, 0);
    chunk_cache_free(r.cache);
    /* a jump (6 MiB past where the last read ended) onto chunk 6's first byte: it stays; the
     * run goes on into chunk 7, which leaves */
    struct image_reader j = { .cache = chunk_cache_new(64u * MIB) };
    read_checked(img, &j, chunks[0], 0, chunks[0]->off, 4096, 0);
    read_checked(img, &j, chunks[6], 6, chunks[6]->off, MIB / 2, 0);
    read_checked(img, &j, chunks[6], 6, chunks[6]->off + MIB / 2, MIB / 2, 1);
    read_chunk_shuffled(img, &j, chunks[7], 7);
    chunk_cache_stats(j.cache, &cs);
    CHECK_INT(cs.evictions, 1);
    CHECK_INT(cs.entries, 2); /* chunks 0 and 6 */
    chunk_cache_free(j.cache);
    image_put(img);
    store_close(st);
}

/* ---- 4. dense datasets ---- */

struct grid3 {
    const char *id, *name;
    hsize_t dims[3], chunk[3], n[3]; /* n: chunks per dimension */
    int rank;
    const char *maxdims; /* JSON, or "": fixed (a fixed array index) */
};

/* Element `e` (row-major within chunk `linear`): a value that tells both apart. */
static signed char dense_value(uint64_t linear, uint64_t e)
{
    return (signed char)((linear * 13 + e) % 127);
}

/* "[a, b, c]" of the first rank values of v. */
static const char *json_dims(const hsize_t *v, int rank, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int k = 0; k < rank && at < len; k++)
        at +=
            (size_t)snprintf(buf + at, len - at, "%s%llu", k ? ", " : "", (unsigned long long)v[k]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
    return buf;
}

/* Every chunk object of g but chunk `skip` (none: -1), full-sized as HSDS stores edge chunks. */
static void put_grid(struct store *st, const struct grid3 *g, int64_t skip)
{
    char body[512], dims[64], chunk[64];
    unsigned char buf[64];
    uint64_t per = 1, total = 1;
    for (int k = 0; k < g->rank; k++) {
        per *= g->chunk[k];
        total *= g->n[k];
    }
    snprintf(body, sizeof body,
             "\"type\": {\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I8LE\"}, "
             "\"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": %s%s}, "
             "\"creationProperties\": {\"fillValue\": -9}, "
             "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": %s}",
             json_dims(g->dims, g->rank, dims, sizeof dims), g->maxdims,
             json_dims(g->chunk, g->rank, chunk, sizeof chunk));
    put_dataset(st, g->id, body);
    for (uint64_t linear = 0; linear < total; linear++) {
        uint64_t index[3], rest = linear;
        for (int k = g->rank - 1; k >= 0; k--) {
            index[k] = rest % g->n[k];
            rest /= g->n[k];
        }
        for (uint64_t e = 0; e < per; e++)
            buf[e] = (unsigned char)dense_value(linear, e);
        if ((int64_t)linear != skip)
            put_chunk(st, g->id, index, g->rank, buf, per);
    }
}

/* What element at (within g's dims) holds: its chunk's value, or the fill value when that
 * chunk is `skip`. */
static signed char grid_expected(const struct grid3 *g, const hsize_t *at, int64_t skip)
{
    uint64_t linear = 0, e = 0;
    for (int k = 0; k < g->rank; k++) {
        linear = linear * g->n[k] + at[k] / g->chunk[k];
        e = e * g->chunk[k] + at[k] % g->chunk[k];
    }
    return (int64_t)linear == skip ? -9 : dense_value(linear, e);
}

/* Every element of dataset g of the image file f, and its allocation time. */
static void check_grid(hid_t f, const struct grid3 *g, int64_t skip, H5D_alloc_time_t when)
{
    signed char all[5 * 7 * 3];
    hid_t d = H5Dopen2(f, g->name, H5P_DEFAULT), dcpl = d >= 0 ? H5Dget_create_plist(d) : -1;
    H5D_alloc_time_t alloc = H5D_ALLOC_TIME_ERROR;
    CHECK(dcpl >= 0 && H5Pget_alloc_time(dcpl, &alloc) >= 0);
    CHECK_INT(alloc, when);
    CHECK(d >= 0 && H5Dread(d, H5T_NATIVE_SCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0);
    int wrong = 0;
    hsize_t at[3] = { 0 }, i = 0;
    for (at[0] = 0; at[0] < g->dims[0]; at[0]++)
        for (at[1] = 0; at[1] < g->dims[1]; at[1]++)
            for (at[2] = 0; at[2] < (g->rank == 3 ? g->dims[2] : 1); at[2]++)
                wrong += all[i++] != grid_expected(g, at, skip);
    CHECK_INT(wrong, 0);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (d >= 0)
        H5Dclose(d);
}

static void test_dense(void)
{
    char l1[200], l2[200], l3[200], l4[200], links[1024], path[512];
    const struct grid3 dense = { D_DENSE, "dense", { 5, 7, 3 }, { 2, 3, 2 }, { 3, 3, 2 }, 3, "" };
    /* one unlimited dimension: an extensible array; two: a version 2 B-tree */
    const struct grid3 ea = {
        D_DENSE_EA, "ea", { 9, 4 }, { 2, 3 }, { 5, 2 }, 2, ", \"maxdims\": [0, 4]"
    };
    const struct grid3 bt2 = {
        D_DENSE_BT2, "bt2", { 9, 4 }, { 2, 3 }, { 5, 2 }, 2, ", \"maxdims\": [0, 0]"
    };
    const struct grid3 holed = { D_HOLED, "holed", { 5, 7, 3 }, { 2, 3, 2 }, { 3, 3, 2 }, 3, "" };
    struct store *st = new_bucket("dense");
    snprintf(links, sizeof links, "%s, %s, %s, %s", hard_link("dense", D_DENSE, l1, sizeof l1),
             hard_link("ea", D_DENSE_EA, l2, sizeof l2),
             hard_link("bt2", D_DENSE_BT2, l3, sizeof l3),
             hard_link("holed", D_HOLED, l4, sizeof l4));
    put_root(st, links, "");
    put_grid(st, &dense, -1);
    put_grid(st, &ea, -1);
    put_grid(st, &bt2, -1);
    put_grid(st, &holed, 7);
    struct image *img = build(st);
    struct image_stats stats;
    if (img) {
        image_stats(img, &stats);
        CHECK_INT(stats.chunks, 18 + 10 + 10 + 17);
        snprintf(path, sizeof path, "%s/dense.h5", tmp_dir);
        CHECK_INT(write_image(img, path), 0);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        CHECK(f >= 0);
        if (f >= 0) {
            check_grid(f, &dense, -1, H5D_ALLOC_TIME_EARLY);
            check_grid(f, &ea, -1, H5D_ALLOC_TIME_INCR);
            check_grid(f, &bt2, -1, H5D_ALLOC_TIME_INCR);
            check_grid(f, &holed, 7, H5D_ALLOC_TIME_INCR);
            H5Fclose(f);
        }
        image_put(img);
    }
    store_close(st);
}

/* ---- 5. group formats ---- */

#define GROUP_LINKS 12 /* past HDF5's 8 compact links */
#define BIG_ATTR 20000 /* int32 values: 80 KB, more than a version-1 header message holds */

/* Group id with GROUP_LINKS soft links, the given extra links, attributes and properties. */
static void put_group(struct store *st, const char *id, const char *more_links, const char *attrs,
                      const char *props)
{
    size_t cap = 64 * 1024 + strlen(attrs), len = 0;
    char *body = malloc(cap);
    CHECK(body != NULL);
    if (!body)
        return;
    len += (size_t)snprintf(body + len, cap - len, "\"links\": {%s", more_links);
    for (int i = 0; i < GROUP_LINKS; i++)
        len += (size_t)snprintf(body + len, cap - len,
                                "%s\"l%02d\": {\"class\": \"H5L_TYPE_SOFT\", \"h5path\": \"/x%d\"}",
                                i == 0 && !more_links[0] ? "" : ", ", i, i);
    snprintf(body + len, cap - len, "}, \"attributes\": {%s}%s", attrs, props);
    char key[STORE_KEY_MAX + 1];
    size_t tcap = cap + 256;
    char *text = malloc(tcap);
    CHECK(text != NULL);
    CHECK_INT(schema_obj_key(id, key, sizeof key), 0);
    if (text) {
        snprintf(text, tcap, "{\"id\": \"%s\", \"root\": \"%s\", %s}", id, ROOT, body);
        put(st, key, text);
    }
    free(text);
    free(body);
}

static char *big_attribute(void)
{
    size_t cap = BIG_ATTR * 8 + 256, len = 0;
    char *a = malloc(cap);
    CHECK(a != NULL);
    if (!a)
        return NULL;
    len += (size_t)snprintf(a, cap,
                            "\"big\": {\"type\": {\"class\": \"H5T_INTEGER\", \"base\": "
                            "\"H5T_STD_I32LE\"}, \"shape\": {\"class\": \"H5S_SIMPLE\", "
                            "\"dims\": [%d]}, \"value\": [",
                            BIG_ATTR);
    for (int i = 0; i < BIG_ATTR; i++)
        len += (size_t)snprintf(a + len, cap - len, "%s%d", i ? "," : "", i);
    snprintf(a + len, cap - len, "]}");
    return a;
}

/* The group at name: its storage, its links (GROUP_LINKS + extra) and attribute `a` (n
 * values counting up from `first`). */
static void check_group(hid_t f, const char *name, int symbol_table, int extra, const char *a,
                        hsize_t n, int first)
{
    H5G_info_t gi;
    hid_t g = H5Gopen2(f, name, H5P_DEFAULT);
    CHECK(g >= 0);
    if (g < 0)
        return;
    CHECK_INT(H5Gget_info(g, &gi), 0);
    CHECK_INT(gi.storage_type == H5G_STORAGE_TYPE_SYMBOL_TABLE, symbol_table);
    CHECK_INT((int)gi.nlinks, GROUP_LINKS + extra);
    CHECK_INT(H5Lexists(g, "l11", H5P_DEFAULT), 1);
    hid_t attr = H5Aopen(g, a, H5P_DEFAULT);
    CHECK(attr >= 0);
    if (attr >= 0) {
        hid_t sp = H5Aget_space(attr);
        CHECK_INT((int)H5Sget_simple_extent_npoints(sp), (int)n);
        int *v = calloc(n, sizeof *v);
        CHECK(v != NULL);
        CHECK(v && H5Aread(attr, H5T_NATIVE_INT, v) >= 0);
        if (v) {
            CHECK_INT(v[0], first);
            CHECK_INT(v[n - 1], first + (int)n - 1);
        }
        free(v);
        H5Sclose(sp);
        H5Aclose(attr);
    }
    H5Gclose(g);
}

static void test_group_formats(void)
{
    char l[4][200], links[1024], path[512];
    const char *small = "\"n\": {\"type\": {\"class\": \"H5T_INTEGER\", \"base\": "
                        "\"H5T_STD_I32LE\"}, \"shape\": {\"class\": \"H5S_SCALAR\"}, "
                        "\"value\": 7}";
    const char *ext = "\"ext\": {\"class\": \"H5L_TYPE_EXTERNAL\", \"h5path\": \"/a\", "
                      "\"h5domain\": \"other.h5\"}, \"\u00e9t\u00e9\": {\"class\": "
                      "\"H5L_TYPE_SOFT\", \"h5path\": \"/b\"}";
    char *big = big_attribute();
    struct store *st = new_bucket("groups");
    snprintf(links, sizeof links, "%s, %s, %s, %s", hard_link("plain", G_PLAIN, l[0], 200),
             hard_link("bigattr", G_BIGATTR, l[1], 200), hard_link("ordered", G_ORDERED, l[2], 200),
             hard_link("mixed", G_MIXED, l[3], 200));
    put_root(st, links, "");
    put_group(st, G_PLAIN, "", small, "");
    put_group(st, G_BIGATTR, "", big ? big : small, "");
    put_group(st, G_ORDERED, "", small, ", \"creationProperties\": {\"CreateOrder\": 1}");
    put_group(st, G_MIXED, ext, small, "");
    free(big);
    struct image *img = build(st);
    if (img) {
        size_t n_out = 1;
        image_left_out(img, &n_out);
        CHECK_INT((int)n_out, 0);
        snprintf(path, sizeof path, "%s/groups.h5", tmp_dir);
        CHECK_INT(write_image(img, path), 0);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        CHECK(f >= 0);
        if (f >= 0) {
            check_group(f, "/plain", 1, 0, "n", 1, 7);
            check_group(f, "/bigattr", 0, 0, "big", BIG_ATTR, 0);
            check_group(f, "/ordered", 0, 0, "n", 1, 7);
            check_group(f, "/mixed", 0, 2, "n", 1, 7); /* converted by HDF5 */
            H5L_info_t li;
            CHECK_INT(H5Lget_info(f, "/mixed/\xc3\xa9t\xc3\xa9", &li, H5P_DEFAULT), 0);
            CHECK_INT(li.cset, H5T_CSET_UTF8);
            CHECK_INT(H5Lget_info(f, "/mixed/ext", &li, H5P_DEFAULT), 0);
            CHECK_INT(li.type, H5L_TYPE_EXTERNAL);
            H5Fclose(f);
        }
        image_put(img);
    }
    store_close(st);
}

/* ---- 6. committed types ---- */

static void test_committed_type(void)
{
    char l1[200], l2[200], links[512], body[1024], path[512];
    const char *i32 = "\"class\": \"H5T_INTEGER\", \"base\": \"H5T_STD_I32LE\"";
    struct store *st = new_bucket("typed");
    snprintf(links, sizeof links, "%s, %s", hard_link("int_t", T_NAMED, l1, sizeof l1),
             hard_link("typed", D_TYPED, l2, sizeof l2));
    put_root(st, links, "");
    snprintf(body, sizeof body, "\"type\": {%s}, \"attributes\": {}", i32);
    put_object(st, T_NAMED, body);
    snprintf(body, sizeof body,
             "\"type\": {%s, \"id\": \"%s\"}, \"shape\": {\"class\": \"H5S_SIMPLE\", "
             "\"dims\": [4]}, \"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [4]}, "
             "\"attributes\": {\"a\": {\"type\": {%s, \"id\": \"%s\"}, \"shape\": "
             "{\"class\": \"H5S_SCALAR\"}, \"value\": 5}}",
             i32, T_NAMED, i32, T_NAMED);
    put_object(st, D_TYPED, body);
    put_chunk(st, D_TYPED, (uint64_t[]){ 0 }, 1, "\1\0\0\0\2\0\0\0\3\0\0\0\4\0\0\0", 16);
    struct image *img = build(st);
    if (img) {
        snprintf(path, sizeof path, "%s/typed.h5", tmp_dir);
        CHECK_INT(write_image(img, path), 0);
        image_put(img);
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    if (f >= 0) {
        hid_t d = H5Dopen2(f, "typed", H5P_DEFAULT), a = H5Aopen(d, "a", H5P_DEFAULT);
        hid_t dt = H5Dget_type(d), at = H5Aget_type(a);
        int v[4] = { 0 }, x = 0;
        CHECK_INT(H5Tcommitted(dt), 1);
        CHECK_INT(H5Tcommitted(at), 1);
        CHECK(H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
        CHECK(H5Aread(a, H5T_NATIVE_INT, &x) >= 0);
        CHECK_INT(v[0] + v[3] * 10 + x * 100, 1 + 40 + 500);
        H5Tclose(at);
        H5Tclose(dt);
        H5Aclose(a);
        H5Dclose(d);
        H5Fclose(f);
    }
    store_close(st);
}

/* ---- 7. virtual datasets ---- */

#define VDS_TYPE "\"type\": {\"class\": \"H5T_FLOAT\", \"base\": \"H5T_IEEE_F64LE\"}, "
#define VDS_SHAPE(d, m)                                                             \
    "\"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": " d ", \"maxdims\": " m "}, " \
    "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": " d "}, "
#define HYPER(start, stride, count, block)                                                       \
    "{\"class\": \"hyperslab\", \"start\": " start ", \"stride\": " stride ", \"count\": " count \
    ", \"block\": " block

/* Members that must not make a VDS: each is a placeholder, never another mapping. */
static const char *const bad_members[] = {
    "[]",
    "{}",
    "[{}]",
    "[{\"file\": \".\", \"dataset\": \"a\"}]",
    "[{\"file\": \"\", \"dataset\": \"a\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": 3, \"dataset\": \"a\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \"x\\u0000y\", \"dataset\": \"a\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": {\"class\": \"points\"}, "
    "\"vds_select\": {\"class\": \"all\"}}]",
    /* a rank that is not the dataset's */
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": " HYPER("[0, 0]", "[1, 1]", "[1, 1]", "[1, 1]") "}}]",
    /* 6 elements for 8 */
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": " HYPER(
        "[0]", "[1]", "[1]", "[6]") ", \"dims\": [6]}, \"vds_select\": {\"class\": \"all\"}}]",
    /* stride 0, negative, huge, not integers, a bad unlimited */
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": " HYPER(
        "[0]", "[0]", "[8]", "[1]") ", \"dims\": [8]}, \"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": " HYPER(
        "[-1]", "[1]", "[8]", "[1]") ", \"dims\": [8]}, \"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": " HYPER(
        "[9223372036854775807]", "[1]", "[8]", "[1]") ", \"dims\": [8]}, "
                                                      "\"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": " HYPER(
        "[0.5]", "[1]", "[8]", "[1]") ", \"dims\": [8]}, \"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": " HYPER(
        "[\"H5S_UNLIMITED\"]", "[1]", "[8]", "[1]") ", \"dims\": [8]}, "
                                                    "\"vds_select\": {\"class\": \"all\"}}]",
    /* a source hyperslab without its extent; dims of the wrong kind */
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": " HYPER(
        "[0]", "[1]", "[8]", "[1]") "}, \"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": {\"class\": \"all\", "
    "\"dims\": []}, \"vds_select\": {\"class\": \"all\"}}]",
    /* blocks: none, reversed, of the wrong rank */
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"blocks\", \"blocks\": []}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"blocks\", \"blocks\": [[[7], [0]]]}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"blocks\", \"blocks\": [[[0, 0], [1, 1]]]}}]",
    "[{\"file\": \".\", \"dataset\": \"a\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"blocks\", \"blocks\": [[[0]]]}}]",
    /* sources HDF5 1.10 crashes a reader on: the dataset itself (by a path with a soft link
     * too), a chain back to it, a selection of another rank than its source's */
    "[{\"file\": \".\", \"dataset\": \"/bad\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \".\", \"dataset\": \"./me/\", \"src_select\": {\"class\": \"all\"}, "
    "\"vds_select\": {\"class\": \"all\"}}]",
    "[{\"file\": \".\", \"dataset\": \"vds\", \"src_select\": " HYPER(
        "[0]", "[1]", "[8]", "[1]") ", \"dims\": [8]}, \"vds_select\": {\"class\": \"all\"}}]",
};

/* The virtual dataset HDF5 reads at name: mapping i's names and selection types. */
static void check_mapping(hid_t dcpl, size_t i, const char *file, const char *dataset,
                          H5S_sel_type src_type, H5S_sel_type vds_type)
{
    char buf[64];
    CHECK(H5Pget_virtual_filename(dcpl, i, buf, sizeof buf) > 0 && strcmp(buf, file) == 0);
    CHECK(H5Pget_virtual_dsetname(dcpl, i, buf, sizeof buf) > 0 && strcmp(buf, dataset) == 0);
    hid_t src = H5Pget_virtual_srcspace(dcpl, i), vds = H5Pget_virtual_vspace(dcpl, i);
    CHECK(src >= 0 && H5Sget_select_type(src) == src_type);
    CHECK(vds >= 0 && H5Sget_select_type(vds) == vds_type);
    if (src >= 0)
        H5Sclose(src);
    if (vds >= 0)
        H5Sclose(vds);
}

static void check_vds_file(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "vds", H5P_DEFAULT) : -1;
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : -1;
    size_t n = 0;
    CHECK(dcpl >= 0 && H5Pget_layout(dcpl) == H5D_VIRTUAL);
    CHECK(dcpl >= 0 && H5Pget_virtual_count(dcpl, &n) >= 0 && n == 3);
    if (n == 3) {
        check_mapping(dcpl, 0, ".", "/a", H5S_SEL_ALL, H5S_SEL_HYPERSLABS);
        check_mapping(dcpl, 1, "other.h5", "/b", H5S_SEL_HYPERSLABS, H5S_SEL_HYPERSLABS);
        check_mapping(dcpl, 2, ".", "/c", H5S_SEL_HYPERSLABS, H5S_SEL_HYPERSLABS);
        hid_t v = H5Pget_virtual_vspace(dcpl, 2);
        CHECK(v >= 0 && H5Sis_regular_hyperslab(v) == 0 && H5Sget_select_hyper_nblocks(v) == 2);
        if (v >= 0)
            H5Sclose(v);
        v = H5Pget_virtual_vspace(dcpl, 1);
        hsize_t start[2], stride[2], count[2], block[2];
        CHECK(v >= 0 && H5Sget_regular_hyperslab(v, start, stride, count, block) >= 0 &&
              count[0] == H5S_UNLIMITED && stride[0] == 4);
        if (v >= 0)
            H5Sclose(v);
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    hid_t bad = f >= 0 ? H5Dopen2(f, "bad", H5P_DEFAULT) : -1;
    CHECK(bad >= 0);
    if (bad >= 0) {
        hid_t p = H5Dget_create_plist(bad);
        CHECK(p >= 0 && H5Pget_layout(p) != H5D_VIRTUAL);
        if (p >= 0)
            H5Pclose(p);
        H5Dclose(bad);
    }
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
}

static void put_vds_domain(struct store *st, const char *bad_member)
{
    char links[480], a[200], b[200], body[2000];
    snprintf(links, sizeof links,
             "%s, %s, \"me\": {\"class\": \"H5L_TYPE_SOFT\", \"h5path\": \"/bad\"}",
             hard_link("vds", D_VDS, a, sizeof a), hard_link("bad", D_VDS_BAD, b, sizeof b));
    put_root(st, links, "");
    put_dataset(
        st, D_VDS,
        VDS_TYPE VDS_SHAPE(
            "[4, 8]",
            "[0, 8]") "\"h5osfs\": {\"virtual\": ["
                      "{\"file\": \".\", \"dataset\": \"/a\", \"src_select\": {\"class\": "
                      "\"all\"}, "
                      "\"vds_select\": " HYPER(
                          "[0, 0]", "[1, 1]", "[1, 1]",
                          "[1, 8]") "}}, "
                                    "{\"file\": \"other.h5\", \"dataset\": \"/b\", "
                                    "\"src_select\": " HYPER(
                                        "[0, 0]", "[1, 1]", "[\"H5S_UNLIMITED\", 1]",
                                        "[1, 4]") ", \"dims\": [0, 4]}, "
                                                  "\"vds_select\": " HYPER(
                                                      "[1, 0]", "[4, 1]", "[\"H5S_UNLIMITED\", 1]",
                                                      "[1, 4]") "}}, "
                                                                "{\"file\": \".\", \"dataset\": "
                                                                "\"/c\", \"src_select\": " HYPER(
                                                                    "[0]", "[1]", "[1]",
                                                                    "[5]") ", \"dims\": [9]}, "
                                                                           "\"vds_select\": "
                                                                           "{\"class\": "
                                                                           "\"blocks\", "
                                                                           "\"blocks\": "
                                                                           "[[[2, 0], [2, 1]], "
                                                                           "[[3, 4], [3, 6]]]}}]}");
    snprintf(body, sizeof body, VDS_TYPE VDS_SHAPE("[8]", "[8]") "\"h5osfs\": {\"virtual\": %s}",
             bad_member);
    put_dataset(st, D_VDS_BAD, body);
}

static void test_virtual(void)
{
    char path[512];
    for (size_t i = 0; i < sizeof bad_members / sizeof *bad_members; i++) {
        char name[32];
        snprintf(name, sizeof name, "vds%zu", i);
        struct store *st = new_bucket(name);
        put_vds_domain(st, bad_members[i]);
        struct image *img = build(st);
        if (!img) {
            store_close(st);
            continue;
        }
        size_t n;
        image_left_out(img, &n);
        CHECK_INT(n, 1);
        if (!find_omission(img, IMAGE_OMIT_PLACEHOLDER, D_VDS_BAD, NULL))
            fprintf(stderr, "bad member %zu: %s\n", i, bad_members[i]);
        snprintf(path, sizeof path, "%s/%s.h5", tmp_dir, name);
        if (write_image(img, path) == 0)
            check_vds_file(path);
        image_put(img);
        store_close(st);
    }
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_image_build.XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    /* the build logs what it leaves out: keep the test output for failures */
    if (log_setup(LOG_LVL_WARN, LOG_SINK_FILE, "/dev/null") != 0)
        return 1;
    test_declared_size();
    test_left_out();
    test_read_through();
    test_dense();
    test_group_formats();
    test_committed_type();
    test_virtual();
    log_teardown();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_done("image_build");
}
