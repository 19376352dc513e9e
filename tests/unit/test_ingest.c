/*
 * test_ingest: HDF5 files -> HSDS objects (src/ingest/ingest*.c).
 *
 * 1. §5.4's verified chunk-dims examples.
 * 2. Every fixture source file is ingested into a temporary posix bucket, the image builder
 *    makes an HDF5 file of it again, and h5diff finds it equal to the source.
 * 3. The JSON written equals what real HSDS stored for the same file (the fixture bucket),
 *    ids and timestamps aside, with the differences listed in known_difference().
 * 4. In place: one element changed -> exactly one chunk rewritten; a removed dataset's objects
 *    deleted; a second run changes nothing.
 * 5. A file that is not HDF5 gives -EINVAL; a store that fails gives an error.
 * 6. A VDS mapped chunk by chunk into a dataset of its file gets a chunk table over that
 *    dataset's chunk objects (ingest_vref.c); one mapped any other way does not.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>
#include <jansson.h>

#include "h5osfs/domops/vtable.h"
#include "h5osfs/ingest/ingest_int.h"
#include "check.h"
#include "fixture_walk.h"
#include "h5osfs/cache/cache.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/image/image.h"
#include "h5osfs/ingest/ingest.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

static const char *data_dir;
static char tmp_dir[256];

/* ---- 1. chunk dims ---- */

static void check_dims(int rank, const uint64_t *dims, const uint64_t *maxdims, size_t itemsize,
                       const uint64_t *request, const uint64_t *want)
{
    uint64_t out[INGEST_MAX_RANK];
    ingest_chunk_dims(rank, dims, maxdims, itemsize, request, out);
    for (int k = 0; k < (rank ? rank : 1); k++)
        CHECK_INT(out[k], want[k]);
}

static void test_chunk_dims(void)
{
    check_dims(2, (uint64_t[]){ 10000, 10000 }, NULL, 4, NULL, (uint64_t[]){ 625, 1250 });
    check_dims(2, (uint64_t[]){ 1000, 1000 }, NULL, 4, NULL, (uint64_t[]){ 1000, 1000 });
    check_dims(3, (uint64_t[]){ 365, 720, 1440 }, NULL, 4, NULL, (uint64_t[]){ 46, 90, 180 });
    check_dims(1, (uint64_t[]){ 10 }, NULL, 4, NULL, (uint64_t[]){ 10 });
    check_dims(1, (uint64_t[]){ 10 }, (uint64_t[]){ 0 }, 4, NULL, (uint64_t[]){ 262144 });
    check_dims(2, (uint64_t[]){ 100, 200 }, (uint64_t[]){ 0, 200 }, 8, NULL,
               (uint64_t[]){ 1024, 200 });
    check_dims(2, (uint64_t[]){ 1000, 1000 }, NULL, 4, (uint64_t[]){ 10, 10 },
               (uint64_t[]){ 640, 640 });
    check_dims(1, (uint64_t[]){ 1000000 }, NULL, 0, NULL, (uint64_t[]){ 31250 });
    check_dims(1, (uint64_t[]){ 0 }, NULL, 4, NULL, (uint64_t[]){ 0 });
    check_dims(0, NULL, NULL, 4, NULL, (uint64_t[]){ 1 });
    /* the fixture's: 8x4 f64 chunks of an unlimited 25x4 dataset -> 32768x4 */
    check_dims(2, (uint64_t[]){ 25, 4 }, (uint64_t[]){ 0, 4 }, 8, (uint64_t[]){ 8, 4 },
               (uint64_t[]){ 32768, 4 });
    check_dims(1, (uint64_t[]){ 7 }, (uint64_t[]){ 0 }, 4, (uint64_t[]){ 4 },
               (uint64_t[]){ 262144 });
    /* declared extents of exabytes (issue 10.4): HSDS's sizes are Python integers, so a
     * dataset size past 2^64 must not wrap to "small" (it made the chunk the whole dataset) */
    check_dims(2, (uint64_t[]){ 1ull << 32, 1ull << 32 }, NULL, 1, (uint64_t[]){ 10, 10 },
               (uint64_t[]){ 1280, 1280 });
    check_dims(1, (uint64_t[]){ INT64_MAX }, NULL, 1, NULL, (uint64_t[]){ 4194304 });
    check_dims(1, (uint64_t[]){ 1ull << 50 }, NULL, 8192, NULL, (uint64_t[]){ 512 });
    check_dims(2, (uint64_t[]){ 1ull << 62, 1ull << 62 }, NULL, 8, NULL, (uint64_t[]){ 512, 1024 });
}

/* ---- helpers ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static struct store *new_bucket(const char *name, char *dir, size_t len)
{
    struct store *st = NULL;
    snprintf(dir, len, "%s/%s", tmp_dir, name);
    CHECK_INT(mkdir(dir, 0755), 0);
    CHECK_INT(store_posix_open(dir, &st), 0);
    return st;
}

static json_t *get_json(struct store *st, const char *id)
{
    char key[STORE_KEY_MAX + 1];
    struct store_buf buf = { 0 };
    if (schema_obj_key(id, key, sizeof key) != 0 || store_get(st, key, 1 << 26, &buf) != 0)
        return NULL;
    json_t *j = hjson_loadb((const char *)buf.data, buf.len, NULL, 0);
    store_buf_free(&buf);
    return j;
}

static const struct ingest_config *config(struct store *st)
{
    static struct ingest_config cfg;
    cfg = (struct ingest_config){ .store = st, .workers = 3 };
    return &cfg;
}

/* Write the image of the domain to path; 0 on success. */
static int image_to_file(struct store *st, const char *root, const char *path)
{
    struct image_source src = { .store = st, .bucket_name = "bucket" };
    struct image *img = NULL;
    int rc = image_build(&src, "/home/u/x.h5", root, &img);
    CHECK_INT(rc, 0);
    if (rc != 0)
        return rc;
    struct image_reader r = { .cache = chunk_cache_new(64u << 20) };
    FILE *fp = fopen(path, "wb");
    uint64_t size = image_size(img), off = 0;
    static unsigned char buf[1 << 20];
    while (fp && r.cache && off < size) {
        ssize_t n = image_read(img, &r, off, buf, sizeof buf);
        if (n <= 0 || fwrite(buf, 1, (size_t)n, fp) != (size_t)n)
            break;
        off += (uint64_t)n;
    }
    CHECK_INT(off, size);
    if (fp)
        fclose(fp);
    chunk_cache_free(r.cache);
    image_put(img);
    return off == size ? 0 : -EIO;
}

/* ---- 2. round trip through the image ---- */

static const char *const sources[] = { "sample1.h5", "sample2.h5", "sample3.h5", "sample_link.h5",
                                       "partial_expected.h5" };

/* A v1 root's objects are all at the top level (§11): nothing under db/, the root's own key. */
static void check_v1_layout(const char *dir, struct store *st, const char *root)
{
    char db[600];
    struct stat sb;
    snprintf(db, sizeof db, "%s/db", dir);
    CHECK(stat(db, &sb) != 0 && errno == ENOENT);
    json_t *doc = get_json(st, root);
    CHECK(doc != NULL);
    const json_t *links = json_object_get(doc, "links");
    const char *name;
    const json_t *link;
    json_object_foreach((json_t *)links, name, link)
    {
        const char *id = json_string_value(json_object_get(link, "id"));
        if (id) {
            CHECK_INT(schema_id_version(id), 1);
            json_t *child = get_json(st, id);
            CHECK(child != NULL);
            CHECK_STR(json_string_value(json_object_get(child, "root")), root);
            json_decref(child);
        }
    }
    json_decref(doc);
}

/* base_root: the domain's root before ("": a new domain, which is v2; a v1 one keeps v1). */
static void test_round_trip(const char *name, const char *base_root)
{
    char dir[512], src[1024], img[1024], cmd[4096], root[SCHEMA_ID_BUF], bucket[300];
    struct ingest_stats stats;
    int v1 = schema_id_version(base_root) == 1;
    snprintf(bucket, sizeof bucket, "%s%s", v1 ? "v1-" : "", name);
    struct store *st = new_bucket(bucket, dir, sizeof dir);
    snprintf(src, sizeof src, "%s/hsds-v2/source/%s", data_dir, name);
    snprintf(img, sizeof img, "%s/%s.image.h5", tmp_dir, bucket);
    CHECK_INT(ingest_new_root_id_for(base_root, root), 0);
    if (v1) {
        CHECK_INT(schema_id_version(root), 1);
        CHECK_INT(schema_id_class(root), 'g');
        CHECK(strcmp(root, base_root) != 0);
    } else {
        CHECK_INT(schema_id_is_root(root), 1);
    }
    int rc = ingest_new(config(st), src, "/test", root, NULL, &stats);
    CHECK_INT(rc, 0);
    CHECK(stats.groups >= 1);
    if (rc == 0 && v1)
        check_v1_layout(dir, st, root);
    if (rc == 0 && image_to_file(st, root, img) == 0) {
        /* -c: compare counts of objects too; exit status 0: equal */
        snprintf(cmd, sizeof cmd, "h5diff -c '%s' '%s' > '%s/%s.diff' 2>&1", src, img, tmp_dir,
                 bucket);
        int st_diff = system(cmd);
        if (st_diff != 0) {
            snprintf(cmd, sizeof cmd, "cat '%s/%s.diff' | head -40 >&2", tmp_dir, bucket);
            if (system(cmd) != 0)
                fprintf(stderr, "cannot show %s/%s.diff\n", tmp_dir, bucket);
        }
        CHECK_INT(st_diff, 0);
    }
    store_close(st);
}

/* ---- 3. the JSON against what HSDS stored ---- */

/* A copy without what differs between any two loads of one file: ids, timestamps. */
static json_t *normalised(const json_t *doc)
{
    json_t *c = json_deep_copy(doc);
    json_object_del(c, "id");
    json_object_del(c, "root");
    json_object_del(c, "created");
    json_object_del(c, "lastModified");
    json_object_del(json_object_get(c, "type"), "id");
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(c, "links"), k, v)
    {
        json_object_del(v, "id");
        json_object_del(v, "created");
    }
    json_object_foreach(json_object_get(c, "attributes"), k, v)
    {
        json_object_del(v, "created");
        json_object_del(json_object_get(v, "type"), "id");
    }
    /* known: hsload always sends maxdims; we state them only where they differ from dims */
    json_t *shape = json_object_get(c, "shape");
    if (json_equal(json_object_get(shape, "dims"), json_object_get(shape, "maxdims")))
        json_object_del(shape, "maxdims");
    return c;
}

/* Member names of an object, in order, as one string. */
static void member_names(const json_t *o, char *buf, size_t len)
{
    const char *k;
    json_t *v;
    size_t n = 0;
    buf[0] = '\0';
    json_object_foreach((json_t *)o, k, v) n +=
        (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s,", k);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The same, sorted: ingest records attributes in their source's creation order (e9a6a09), the
 * HSDS fixtures list them by name; which attributes there are is what must agree. */
static void sorted_member_names(const json_t *o, char *buf, size_t len)
{
    size_t count = json_object_size(o), i = 0, n = 0;
    const char **names = calloc(count ? count : 1, sizeof *names);
    const char *k;
    json_t *v;
    buf[0] = '\0';
    CHECK(names != NULL);
    if (!names)
        return;
    json_object_foreach((json_t *)o, k, v) names[i++] = k;
    qsort(names, count, sizeof *names, by_name);
    for (i = 0; i < count; i++)
        n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s,", names[i]);
    free(names);
}

/* Our object at path (hard links followed from the root), or NULL. */
static json_t *ours_at(struct store *st, const char *root, const char *path)
{
    json_t *cur = get_json(st, root);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *name = strtok_r(buf, "/", &save); cur && name;
         name = strtok_r(NULL, "/", &save)) {
        const char *id = json_string_value(
            json_object_get(json_object_get(json_object_get(cur, "links"), name), "id"));
        json_t *next = id ? get_json(st, id) : NULL;
        json_decref(cur);
        cur = next;
    }
    return cur;
}

static int differences;

static void compare_attr_values(const char *path, const json_t *mine, const json_t *theirs)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)theirs, k, v)
    {
        json_t *m = json_object_get(mine, k);
        if (m && json_equal(m, v))
            continue;
        char *a = fixture_dumps(m), *b = fixture_dumps(v);
        printf("  difference %s attribute %s:\n    ours  %s\n    hsds  %s\n", path, k, a, b);
        differences++;
        free(a);
        free(b);
    }
}

static void compare_object(struct store *st, const char *root, const struct fixture_object *fo)
{
    json_t *mine = ours_at(st, root, fo->path);
    CHECK(mine != NULL);
    if (!mine)
        return;
    json_t *a = normalised(mine), *b = normalised(fo->doc);
    char na[1024], nb[1024];
    member_names(mine, na, sizeof na);
    member_names(fo->doc, nb, sizeof nb);
    CHECK_STR(na, nb);
    json_t *aa = json_object_get(a, "attributes"), *ba = json_object_get(b, "attributes");
    sorted_member_names(aa, na, sizeof na);
    sorted_member_names(ba, nb, sizeof nb);
    CHECK_STR(na, nb);
    compare_attr_values(fo->path, aa, ba);
    json_object_del(a, "attributes");
    json_object_del(b, "attributes");
    if (!json_equal(a, b)) {
        char *x = fixture_dumps(a), *y = fixture_dumps(b);
        printf("  difference %s:\n    ours  %s\n    hsds  %s\n", fo->path, x, y);
        differences++;
        free(x);
        free(y);
    }
    json_decref(a);
    json_decref(b);
    json_decref(mine);
}

static void test_fixture_json(const char *domain, const char *source)
{
    struct fixture fx;
    char name[300], dir[512], src[1024], root[SCHEMA_ID_BUF];
    struct ingest_stats stats;
    if (fixture_open(&fx, data_dir, domain, source) != 0)
        return;
    snprintf(name, sizeof name, "json-%s", domain);
    struct store *st = new_bucket(name, dir, sizeof dir);
    snprintf(src, sizeof src, "%s/hsds-v2/source/%s", data_dir, source);
    CHECK_INT(ingest_new_root_id(root), 0);
    CHECK_INT(ingest_new(config(st), src, "/test", root, NULL, &stats), 0);
    printf("%s against the fixture:\n", domain);
    for (size_t i = 0; i < fx.n; i++)
        compare_object(st, root, &fx.objects[i]);
    store_close(st);
    fixture_close(&fx);
}

/* ---- 4. in place ---- */

static int h5diff_equal(const char *a, const char *b)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "h5diff -c '%s' '%s' >&2", a, b);
    return system(cmd) == 0;
}

/* The base of a changed copy, for the test: the image the copy was written from. A chunk
 * is clean when its bytes are still the image's (the daemon knows it from its overlay). */
struct test_base {
    struct image *img;
    struct image_reader reader;
    int fd; /* the changed copy */
};

static const char *test_object_id(void *ctx, uint64_t addr)
{
    return image_object_id(((struct test_base *)ctx)->img, addr);
}

static int test_chunk_state(void *ctx, uint64_t addr, uint64_t len, const char *dataset_id,
                            const uint64_t *idx, int rank, int materialize, char *key,
                            size_t key_len)
{
    struct test_base *b = ctx;
    (void)materialize; /* the copy holds every byte */
    unsigned char *mine = malloc(len), *base = malloc(len);
    int same = mine && base && pread(b->fd, mine, len, (off_t)addr) == (ssize_t)len &&
               image_read(b->img, &b->reader, addr, base, len) == (ssize_t)len &&
               memcmp(mine, base, len) == 0;
    free(mine);
    free(base);
    if (!same)
        return 0;
    return image_chunk_source(b->img, addr, dataset_id, idx, rank, key, key_len) ? 2 : 1;
}

static void test_changed_copy(void)
{
    char dir[512], src[1024], copy[1024], img[1024], root[SCHEMA_ID_BUF], root2[SCHEMA_ID_BUF];
    struct ingest_stats st1, st2;
    struct store *st = new_bucket("changed", dir, sizeof dir);
    snprintf(src, sizeof src, "%s/hsds-v2/source/sample2.h5", data_dir);
    snprintf(copy, sizeof copy, "%s/changed.h5", tmp_dir);
    snprintf(img, sizeof img, "%s/changed.image.h5", tmp_dir);
    CHECK_INT(ingest_new_root_id(root), 0);
    CHECK_INT(ingest_new(config(st), src, "/test", root, NULL, &st1), 0);
    CHECK_INT(st1.chunks_raw, 8); /* multichunk_f32_gzip: [shuffle, deflate], kept shape */
    CHECK_INT(image_to_file(st, root, copy), 0);

    /* one element of one of the 8 chunks of multichunk_f32_gzip, and a dataset less */
    hid_t f = H5Fopen(copy, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/multichunk_f32_gzip", H5P_DEFAULT);
    hid_t fs = H5Dget_space(d);
    hsize_t at[2] = { 300, 1500 }, one[1] = { 1 };
    hid_t ms = H5Screate_simple(1, one, NULL);
    float v = 12345.5f;
    CHECK(H5Sselect_elements(fs, H5S_SELECT_SET, 1, at) >= 0);
    CHECK(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    CHECK(H5Ldelete(f, "/contiguous_int64", H5P_DEFAULT) >= 0);
    CHECK(H5Fclose(f) >= 0);

    struct image_source isrc = { .store = st, .bucket_name = "bucket" };
    struct test_base tb = { .reader = { .cache = chunk_cache_new(64u << 20) } };
    tb.fd = open(copy, O_RDONLY);
    CHECK_INT(image_build(&isrc, "/home/u/x.h5", root, &tb.img), 0);
    struct ingest_base base = {
        .root = root, .object_id = test_object_id, .chunk_state = test_chunk_state, .ctx = &tb
    };
    CHECK_INT(ingest_new_root_id(root2), 0);
    CHECK_INT(ingest_new(config(st), copy, "/test", root2, &base, &st2), 0);
    /* the changed chunk, and the 5 of variable-length data (the file holds their values,
     * not their chunk objects: they are encoded again) */
    CHECK_INT(st2.chunks_written, 6);
    CHECK(st2.chunks_copied >= 7); /* its 7 neighbours, and every other dataset's */
    CHECK(st2.objects_kept > 10);
    if (image_to_file(st, root2, img) == 0)
        CHECK(h5diff_equal(copy, img));

    /* the kept objects keep their ids' last 16 digits; the new root names every object */
    char key[STORE_KEY_MAX + 1];
    CHECK_INT(schema_obj_key(root2, key, sizeof key), 0);
    struct store_buf buf;
    if (store_get(st, key, 1u << 20, &buf) == 0) {
        CHECK(strstr((const char *)buf.data, "\"multichunk_f32_gzip\"") != NULL);
        CHECK(strstr((const char *)buf.data, "contiguous_int64") == NULL);
        store_buf_free(&buf);
    } else {
        CHECK(!"the new root group can be read");
    }
    close(tb.fd);
    image_put(tb.img);
    chunk_cache_free(tb.reader.cache);
    store_close(st);
}

/* ---- 4b. values the corpus round trip found wrong ---- */

static void put_attr(hid_t obj, const char *name, hid_t tid, hid_t space, const void *buf)
{
    hid_t a = H5Acreate2(obj, name, tid, space, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, tid, buf) >= 0);
    if (a >= 0)
        H5Aclose(a);
}

/* A dataset of object references whose fill value refers to a dataset found after it. */
static void put_ref_dataset(hid_t f, const char *name, hid_t target_file, const char *target)
{
    hobj_ref_t fill;
    hsize_t dims[2] = { 3, 1 };
    hid_t space = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK(H5Rcreate(&fill, target_file, target, H5R_OBJECT, -1) >= 0);
    CHECK(H5Pset_fill_value(dcpl, H5T_STD_REF_OBJ, &fill) >= 0);
    hid_t d = H5Dcreate2(f, name, H5T_STD_REF_OBJ, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
}

/* h5repack_attr.h5: fixed strings with a NUL inside ("\0d" NULL-terminated, "a\0b" NUL-padded);
 * test_table_be.h5: a big-endian subnormal double, and big-endian numbers in a compound fill
 * value; test_ref_array2.mat: datasets whose fill value is an object reference. */
static void make_edge_file(const char *path)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t two[1] = { 2 };
    hid_t s2 = H5Screate_simple(1, two, NULL), scalar = H5Screate(H5S_SCALAR);
    hid_t nullterm = H5Tcopy(H5T_C_S1), nullpad = H5Tcopy(H5T_C_S1);
    CHECK(H5Tset_size(nullterm, 2) >= 0 && H5Tset_size(nullpad, 3) >= 0);
    CHECK(H5Tset_strpad(nullpad, H5T_STR_NULLPAD) >= 0);
    put_attr(f, "nullterm", nullterm, s2, "ab\0d");
    put_attr(f, "nullpad", nullpad, s2, "a\0b\0\0c");
    static const unsigned char sub[8] = { 0, 0, 0, 0, 0xc0, 0x58, 0xc0, 0 };
    put_attr(f, "f64be", H5T_IEEE_F64BE, scalar, sub);

    hid_t rec = H5Tcreate(H5T_COMPOUND, 14);
    CHECK(H5Tinsert(rec, "i", 0, H5T_STD_I32BE) >= 0 &&
          H5Tinsert(rec, "d", 4, H5T_IEEE_F64BE) >= 0);
    CHECK(H5Tinsert(rec, "u", 12, H5T_STD_U16BE) >= 0);
    static const unsigned char fill[14] = { 0xff, 0xff, 0xff, 0x9c, 0, 0,    0,
                                            0,    0xc0, 0x58, 0xc0, 0, 0x01, 0x02 };
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK(H5Pset_fill_value(dcpl, rec, fill) >= 0);
    hid_t d = H5Dcreate2(f, "records", rec, s2, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0);
    put_attr(d, "fill_copy", rec, scalar, fill);
    H5Dclose(d);
    H5Pclose(dcpl);

    hid_t g = H5Gcreate2(f, "#refs#", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    double one = 1.0;
    d = H5Dcreate2(g, "a", H5T_IEEE_F64LE, scalar, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &one) >= 0);
    H5Dclose(d);
    put_ref_dataset(g, "d", f, "/#refs#/a");
    put_ref_dataset(f, "var", f, "/#refs#/a"); /* found before /#refs#/a */
    H5Gclose(g);
    H5Tclose(rec);
    H5Tclose(nullterm);
    H5Tclose(nullpad);
    H5Sclose(s2);
    H5Sclose(scalar);
    CHECK(H5Fclose(f) >= 0);
}

/* The name of what the fill value of dataset name in file path refers to, into out. */
static void fill_target(const char *path, const char *name, char *out, size_t len)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    hobj_ref_t ref = 0;
    out[0] = '\0';
    if (dcpl >= 0 && H5Pget_fill_value(dcpl, H5T_STD_REF_OBJ, &ref) >= 0) {
        hid_t o = H5Rdereference2(f, H5P_DEFAULT, H5R_OBJECT, &ref);
        if (o >= 0 && H5Iget_name(o, out, len) < 0)
            out[0] = '\0';
        if (o >= 0)
            H5Oclose(o);
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (d >= 0)
        H5Dclose(d);
    H5Fclose(f);
}

static void test_corpus_edges(void)
{
    char dir[512], src[1024], img[1024], root[SCHEMA_ID_BUF], target[256];
    struct ingest_stats stats;
    struct store *st = new_bucket("edges", dir, sizeof dir);
    snprintf(src, sizeof src, "%s/edges.h5", tmp_dir);
    snprintf(img, sizeof img, "%s/edges.image.h5", tmp_dir);
    make_edge_file(src);
    CHECK_INT(ingest_new_root_id(root), 0);
    CHECK_INT(ingest_new(config(st), src, "/test", root, NULL, &stats), 0);
    CHECK_INT(stats.changes, 0);
    if (image_to_file(st, root, img) == 0) {
        CHECK(h5diff_equal(src, img));
        fill_target(img, "/var", target, sizeof target);
        CHECK_STR(target, "/#refs#/a");
        fill_target(img, "/#refs#/d", target, sizeof target);
        CHECK_STR(target, "/#refs#/a");
        /* h5diff compares strings only up to a NUL: the bytes must be the source's */
        hid_t f = H5Fopen(img, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t a = H5Aopen(f, "nullterm", H5P_DEFAULT), t = H5Aget_type(a);
        char got[4] = "xxx";
        CHECK(H5Aread(a, t, got) >= 0 && memcmp(got, "ab\0d", 4) == 0);
        H5Tclose(t);
        H5Aclose(a);
        a = H5Aopen(f, "f64be", H5P_DEFAULT);
        unsigned char sub[8] = { 0 };
        CHECK(H5Aread(a, H5T_IEEE_F64BE, sub) >= 0);
        CHECK(sub[4] == 0xc0 && sub[5] == 0x58 && sub[6] == 0xc0 && sub[3] == 0);
        H5Aclose(a);
        H5Fclose(f);
    }
    store_close(st);
}

/* Unfiltered chunks whose grid HSDS keeps are copied as they are (in the kernel), in either
 * byte order: the file's bytes are the chunk objects' bytes. */
static void make_unfiltered_file(const char *path, hsize_t userblock)
{
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    CHECK(fcpl >= 0 && H5Pset_userblock(fcpl, userblock) >= 0);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    hsize_t dims[2] = { 1024, 512 }, chunk[2] = { 512, 512 };
    hid_t sp = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK(H5Pset_chunk(dcpl, 2, chunk) >= 0);
    static int32_t v[1024 * 512];
    for (size_t i = 0; i < 1024 * 512; i++)
        v[i] = (int32_t)(i * 2654435761u);
    const hid_t types[2] = { H5T_IEEE_F32LE, H5T_STD_I32BE };
    const char *names[2] = { "le_f4", "be_i4" };
    for (int k = 0; k < 2; k++) {
        hid_t d = H5Dcreate2(f, names[k], types[k], sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
        H5Dclose(d);
    }
    H5Pclose(dcpl);
    H5Sclose(sp);
    CHECK(H5Fclose(f) >= 0);
}

/* with a user block too: the chunks' file offsets count it (chunk_base) */
static void test_unfiltered_raw(hsize_t userblock)
{
    char dir[512], name[64], src[1024], img[1024], root[SCHEMA_ID_BUF];
    struct ingest_stats stats;
    snprintf(name, sizeof name, "unfiltered%llu", (unsigned long long)userblock);
    struct store *st = new_bucket(name, dir, sizeof dir);
    snprintf(src, sizeof src, "%s/%s.h5", tmp_dir, name);
    snprintf(img, sizeof img, "%s/%s.image.h5", tmp_dir, name);
    make_unfiltered_file(src, userblock);
    CHECK_INT(ingest_new_root_id(root), 0);
    CHECK_INT(ingest_new(config(st), src, "/test", root, NULL, &stats), 0);
    CHECK_INT(stats.chunks_written, 4);
    CHECK_INT(stats.chunks_raw, 4);
    if (image_to_file(st, root, img) == 0)
        CHECK(h5diff_equal(src, img));
    store_close(st);
}

/* ---- 6. chunk tables of chunk-aligned virtual datasets ---- */

/* One mapping of dataset S (8 x 6 int32, chunks 2 x 3) into the VDS of dcpl: rows and columns
 * [r0, r0 + nr) x [c0, c0 + nc) of S at [v0, v0 + nr) x [w0, w0 + nc). */
static void map_s(hid_t dcpl, hid_t vspace, hsize_t v0, hsize_t w0, hsize_t r0, hsize_t c0,
                  hsize_t nr, hsize_t nc)
{
    hsize_t sdims[2] = { 8, 6 }, vstart[2] = { v0, w0 }, sstart[2] = { r0, c0 },
            block[2] = { nr, nc }, one[2] = { 1, 1 };
    hid_t src = H5Screate_simple(2, sdims, NULL);
    CHECK(H5Sselect_hyperslab(vspace, H5S_SELECT_SET, vstart, NULL, one, block) >= 0);
    CHECK(H5Sselect_hyperslab(src, H5S_SELECT_SET, sstart, NULL, one, block) >= 0);
    CHECK(H5Pset_virtual(dcpl, vspace, ".", "S", src) >= 0);
    H5Sclose(src);
}

struct vmap {
    hsize_t v0, w0, r0, c0, nr, nc;
};

static void make_vds(hid_t f, const char *name, hid_t type, hsize_t rows, const struct vmap *m,
                     size_t n)
{
    hsize_t dims[2] = { rows, 6 };
    hid_t vspace = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    for (size_t i = 0; i < n; i++)
        map_s(dcpl, vspace, m[i].v0, m[i].w0, m[i].r0, m[i].c0, m[i].nr, m[i].nc);
    H5Sselect_all(vspace);
    hid_t d = H5Dcreate2(f, name, type, vspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(vspace);
}

static void make_vds_file(const char *path)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = { 8, 6 }, chunk[2] = { 2, 3 };
    hid_t sp = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK(H5Pset_chunk(dcpl, 2, chunk) >= 0);
    int32_t v[48];
    for (int i = 0; i < 48; i++)
        v[i] = i + 1;
    hid_t d = H5Dcreate2(f, "S", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    /* chunk (0,0) <- S chunk (2,1); row of chunks 1 <- S's row 0 (one block of two chunks);
     * chunk (0,1) unmapped */
    const struct vmap aligned[] = { { 0, 0, 4, 3, 2, 3 }, { 2, 0, 0, 0, 2, 6 } };
    make_vds(f, "aligned", H5T_STD_I32LE, 4, aligned, 2);
    /* the last row of chunks is one row: a partial block where it ends at the extent */
    const struct vmap edge[] = { { 0, 0, 2, 0, 2, 6 }, { 2, 3, 6, 3, 1, 3 } };
    make_vds(f, "edge", H5T_STD_I32LE, 3, edge, 2);
    const struct vmap off[] = { { 0, 0, 1, 0, 2, 3 } }; /* source rows 1-2: off the grid */
    make_vds(f, "off", H5T_STD_I32LE, 2, off, 1);
    const struct vmap twice[] = { { 0, 0, 0, 0, 2, 3 }, { 0, 0, 2, 0, 2, 3 } };
    make_vds(f, "twice", H5T_STD_I32LE, 2, twice, 2);
    make_vds(f, "wider", H5T_STD_I64LE, 2, aligned, 1); /* HDF5 converts, HSDS would not */
    CHECK(H5Fclose(f) >= 0);
}

static json_t *dataset_named(struct store *st, const char *root, const char *name)
{
    json_t *g = get_json(st, root);
    const char *id =
        hjson_text(json_object_get(json_object_get(json_object_get(g, "links"), name), "id"));
    json_t *d = id ? get_json(st, id) : NULL;
    json_decref(g);
    return d;
}

static const char *table_of(const json_t *d)
{
    const json_t *lay = json_object_get(json_object_get(d, "creationProperties"), "layout");
    const char *cls = hjson_text(json_object_get(lay, "class"));
    return cls && strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0
               ? hjson_text(json_object_get(lay, "chunk_table"))
               : NULL;
}

/* Entry e of a table names chunk idx ("i_j") of S at its stored size; "" for size 0. */
static void check_entry(struct store *st, const unsigned char *entries, uint64_t e,
                        const char *s_id, const char *idx)
{
    const unsigned char *x = entries + e * VTABLE_ENTRY_BYTES;
    uint32_t size =
        (uint32_t)x[8] | (uint32_t)x[9] << 8 | (uint32_t)x[10] << 16 | (uint32_t)x[11] << 24;
    char key[STORE_KEY_MAX + 1], uri[VTABLE_URI_LEN + 1];
    memcpy(uri, x + 12, VTABLE_URI_LEN);
    uri[VTABLE_URI_LEN] = '\0';
    CHECK(uri[0] != '\0'); /* never empty: HSDS would take the entry before's (spec §12) */
    for (int b = 0; b < 8; b++)
        CHECK_INT(x[b], 0);
    if (!idx[0]) {
        CHECK_INT(size, 0);
        return;
    }
    struct store_stat sst;
    CHECK(schema_obj_key(s_id, key, sizeof key) == 0);
    snprintf(strrchr(key, '/') + 1, sizeof key - (size_t)(strrchr(key, '/') + 1 - key), "%s", idx);
    CHECK_INT(store_head(st, key, &sst), 0);
    CHECK_INT(size, sst.size);
    CHECK(strncmp(uri, "bucket/", 7) == 0);
    CHECK_STR(uri + 7, key);
}

static void test_vds_tables(int off)
{
    char dir[512], src[1024], root[SCHEMA_ID_BUF];
    struct ingest_stats stats;
    struct store *st = new_bucket(off ? "vds_off" : "vds", dir, sizeof dir);
    snprintf(src, sizeof src, "%s/vds.h5", tmp_dir);
    make_vds_file(src);
    struct ingest_config cfg = *config(st);
    cfg.bucket_name = "bucket";
    cfg.no_vds_tables = off;
    CHECK_INT(ingest_new_root_id(root), 0);
    CHECK_INT(ingest_new(&cfg, src, "/test", root, NULL, &stats), 0);
    json_t *s = dataset_named(st, root, "S");
    CHECK(s != NULL);
    const char *s_id = hjson_text(json_object_get(s, "id"));
    const json_t *sdims = json_object_get(json_object_get(s, "layout"), "dims");
    /* pinned to the HDF5 chunk with tables; HSDS's choice (one chunk of 8 x 6) without */
    CHECK_INT(json_integer_value(json_array_get(sdims, 0)), off ? 8 : 2);
    const char *names[] = { "aligned", "edge", "off", "twice", "wider" };
    for (int i = 0; i < 5; i++) {
        json_t *d = dataset_named(st, root, names[i]);
        CHECK(d && json_object_get(json_object_get(d, "h5osfs"), "virtual"));
        const char *tid = table_of(d);
        CHECK((tid != NULL) == (!off && i < 2));
        struct vtable_geom g;
        unsigned char *entries = NULL;
        if (tid && vtable_read(st, tid, 1, &g, &entries) == 0) {
            CHECK_INT(g.entries, 4); /* 2 x 2 chunks of 2 x 3 */
            check_entry(st, entries, 0, s_id, i == 0 ? "2_1" : "1_0");
            check_entry(st, entries, 1, s_id, i == 0 ? "" : "1_1");
            check_entry(st, entries, 2, s_id, i == 0 ? "0_0" : "");
            check_entry(st, entries, 3, s_id, i == 0 ? "0_1" : "3_1");
            free(entries);
        } else {
            CHECK(!tid);
        }
        json_decref(d);
    }
    json_decref(s);
    store_close(st);
}

/* ---- 5. errors ---- */

static void test_errors(void)
{
    char dir[512], path[1024], src[1024], root[SCHEMA_ID_BUF];
    struct ingest_stats stats;
    struct store *st = new_bucket("errors", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/not.h5", tmp_dir);
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    if (fp) {
        fputs("not an HDF5 file\n", fp);
        fclose(fp);
    }
    CHECK_INT(ingest_new_root_id(root), 0);
    CHECK_INT(ingest_new(config(st), path, "/test", root, NULL, &stats), -EINVAL);
    snprintf(path, sizeof path, "%s/no-such-file.h5", tmp_dir);
    CHECK_INT(ingest_new(config(st), path, "/test", root, NULL, &stats), -EINVAL);
    CHECK_INT(ingest_new(config(st), path, "/test", "g-not-a-root", NULL, &stats), -EINVAL);
    struct ingest_base v1 = { .root = "g-2428ae0e-a082-11e6-9d93-0242ac110005" };
    CHECK_INT(ingest_new(config(st), path, "/test", root, &v1, &stats), -EINVAL);
    /* the bucket goes away: puts fail, the ingest stops with -EIO */
    rm_tree(dir);
    snprintf(src, sizeof src, "%s/hsds-v2/source/sample2.h5", data_dir);
    CHECK_INT(ingest_new(config(st), src, "/test", root, NULL, &stats), -EIO);
    store_close(st);
}

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : "tests/data";
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_ingest.XXXXXX");
    if (!mkdtemp(tmp_dir))
        return 2;
    log_setup(LOG_LVL_WARN, LOG_SINK_STDERR, NULL);
    test_chunk_dims();
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++)
        test_round_trip(sources[i], "");
    /* a change of a v1 domain stays v1 (spec §11) */
    test_round_trip("sample1.h5", "g-2428ae0e-a082-11e6-9d93-0242ac110005");
    test_round_trip("partial_expected.h5", "g-2428ae0e-a082-11e6-9d93-0242ac110005");
    test_fixture_json("sample1.h5", "sample1.h5");
    test_fixture_json("sample2.h5", "sample2.h5");
    test_fixture_json("sample3.h5", "sample3.h5");
    test_fixture_json("partial.h5", "partial_expected.h5");
    printf("%d differences from the fixture\n", differences);
    CHECK_INT(differences, 18); /* the fixture README's representation notes, and /raw */
    test_changed_copy();
    test_corpus_edges();
    test_unfiltered_raw(0);
    test_unfiltered_raw(4096);
    test_errors();
    test_vds_tables(0);
    test_vds_tables(1);
    rm_tree(tmp_dir);
    H5close();
    return check_done("ingest");
}
