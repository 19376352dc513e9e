/*
 * commit_rig.h: a bucket in memory behind the faulty store, with the namespace, collector,
 * journal and commit context over it, as the stack wires them (src/main/stack.c) but without
 * a mount; and the few helpers the tests of the modules above commit share: an HDF5 file of
 * known values, a domain committed from it, what the bucket names. Header-only, as check.h.
 */
#ifndef H5OSFS_TEST_COMMIT_RIG_H
#define H5OSFS_TEST_COMMIT_RIG_H

#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>
#include <jansson.h>

#include "check.h"
#include "image_bytes.h"
#include "h5osfs/cache/cache.h"
#include "h5osfs/commit/commit.h"
#include "h5osfs/commit/journal.h"
#include "h5osfs/domops/gc.h"
#include "h5osfs/image/image.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/store/store_test.h"
#include "h5osfs/util/log.h"

#define RIG_BUCKET_ID "mem:commit_rig"
#ifndef RIG_VALUES
#define RIG_VALUES (1 << 20) /* more than one HSDS chunk (ingest makes ~1 MiB chunks) */
#endif
#define RIG_CHUNK (1 << 16)
#define RIG_DOMAIN_KEYS "*/.domain.json"
#define RIG_CHUNK_KEYS "db/*/d/*/[0-9]*"

#define REQUIRE(expr)                                                                \
    do {                                                                             \
        if (!(expr)) {                                                               \
            fprintf(stderr, "%s:%d: cannot go on: %s\n", __FILE__, __LINE__, #expr); \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

static char rig_tmp[256];

struct rig {
    char cache_dir[320];
    struct store *mem; /* what the bucket holds, read without faults */
    struct store *st;  /* the faulty store every module uses */
    struct ns *ns;
    struct gc *gc;
    struct journal *journal;
    struct domops ops;
    struct commit_ctx commit;
};

static inline void rig_open(struct rig *r, const char *name)
{
    struct ns_config nc = { .user = "u", .admin_user = "admin", .ttl = 0 };
    memset(r, 0, sizeof *r);
    snprintf(r->cache_dir, sizeof r->cache_dir, "%s/%s", rig_tmp, name);
    REQUIRE(store_mem_open(&r->mem) == 0);
    REQUIRE(store_faulty_open(r->mem, &r->st) == 0);
    REQUIRE(ns_new(r->st, &nc, &r->ns) == 0);
    REQUIRE(gc_new(r->st, 0, NULL, NULL, &r->gc) == 0);
    REQUIRE(gc_start(r->gc) == 0);
    REQUIRE(journal_open(r->cache_dir, RIG_BUCKET_ID, &r->journal) == 0);
    r->ops = (struct domops){
        .store = r->st, .ns = r->ns, .user = "u", .admin_user = "admin", .gc = r->gc
    };
    r->commit = (struct commit_ctx){ .ops = &r->ops, .journal = r->journal, .workers = 2 };
}

static inline void rig_close(struct rig *r)
{
    gc_free(r->gc);
    journal_close(r->journal);
    ns_free(r->ns);
    store_close(r->st);
    store_close(r->mem);
}

static inline void rig_add_rule(struct store *st, unsigned ops, const char *pattern,
                                enum faulty_mode mode, int err)
{
    struct faulty_rule rule = { .ops = ops, .pattern = pattern, .mode = mode, .err = err };
    REQUIRE(store_faulty_add(st, &rule) == 0);
}

/* An HDF5 file at path: a deflated int dataset "data" of RIG_VALUES in chunks of RIG_CHUNK
 * whose values are seed * 1000 + i. */
static inline void rig_write_h5(const char *path, int seed)
{
    int *values = malloc(RIG_VALUES * sizeof *values);
    hsize_t dims[1] = { RIG_VALUES }, chunk[1] = { RIG_CHUNK };
    REQUIRE(values != NULL);
    for (int i = 0; i < RIG_VALUES; i++)
        values[i] = seed * 1000 + i;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(f >= 0 && space >= 0 && dcpl >= 0);
    REQUIRE(H5Pset_chunk(dcpl, 1, chunk) >= 0 && H5Pset_deflate(dcpl, 1) >= 0);
    hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_INT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    REQUIRE(d >= 0);
    REQUIRE(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    REQUIRE(H5Fclose(f) >= 0);
    free(values);
}

/* The bytes of the HDF5 file rig_write_h5 makes for seed (malloc'd). */
static inline unsigned char *rig_h5_bytes(int seed, size_t *len)
{
    char path[320];
    struct stat st;
    snprintf(path, sizeof path, "%s/seed%d.h5", rig_tmp, seed);
    rig_write_h5(path, seed);
    FILE *fp = fopen(path, "rb");
    REQUIRE(fp && stat(path, &st) == 0);
    unsigned char *buf = malloc((size_t)st.st_size);
    REQUIRE(buf && fread(buf, 1, (size_t)st.st_size, fp) == (size_t)st.st_size);
    fclose(fp);
    unlink(path);
    *len = (size_t)st.st_size;
    return buf;
}

/* 1 when bytes are an HDF5 file whose /data holds the values of seed. */
static inline int rig_values_ok(const unsigned char *bytes, size_t len, int seed)
{
    char path[320];
    int *values = malloc(RIG_VALUES * sizeof *values), ok;
    REQUIRE(values != NULL);
    snprintf(path, sizeof path, "%s/check.h5", rig_tmp);
    FILE *fp = fopen(path, "wb");
    REQUIRE(fp && fwrite(bytes, 1, len, fp) == len && fclose(fp) == 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "data", H5P_DEFAULT) : -1;
    ok = d >= 0 && H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0;
    for (int i = 0; ok && i < RIG_VALUES; i++)
        ok = values[i] == seed * 1000 + i;
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    unlink(path);
    free(values);
    return ok;
}

/* A domain committed without faults from the file of seed; its root in root. */
static inline void rig_commit(struct rig *r, const char *domain, int seed, char root[SCHEMA_ID_BUF])
{
    struct journal_rec rec;
    int fd = -1;
    REQUIRE(journal_stage(r->journal, domain, JOURNAL_NEW, NULL, &rec, &fd) == 0);
    close(fd);
    char *path = journal_staged_path(r->journal, &rec);
    REQUIRE(path != NULL);
    rig_write_h5(path, seed);
    free(path);
    rec.state = JOURNAL_DIRTY;
    REQUIRE(journal_write(r->journal, &rec) == 0);
    REQUIRE(commit_staged(&r->commit, &rec, NULL, NULL) == 0);
    snprintf(root, SCHEMA_ID_BUF, "%s", rec.base_root);
    journal_remove(r->journal, &rec);
    journal_rec_free(&rec);
    gc_drain(r->gc);
}

#define RIG_SMALL_VALUES 300 /* a dataset whose chunk extent holds no whole 4 KiB block */

/* A domain committed from a file of one small dataset "small" whose values are i + 1. */
static inline void rig_commit_small(struct rig *r, const char *domain, char root[SCHEMA_ID_BUF])
{
    struct journal_rec rec;
    int fd = -1, values[RIG_SMALL_VALUES];
    hsize_t dims[1] = { RIG_SMALL_VALUES };
    for (int i = 0; i < RIG_SMALL_VALUES; i++)
        values[i] = i + 1;
    REQUIRE(journal_stage(r->journal, domain, JOURNAL_NEW, NULL, &rec, &fd) == 0);
    close(fd);
    char *path = journal_staged_path(r->journal, &rec);
    REQUIRE(path != NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, dims, NULL);
    REQUIRE(f >= 0 && space >= 0);
    hid_t d = H5Dcreate2(f, "small", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(d);
    H5Sclose(space);
    REQUIRE(H5Fclose(f) >= 0);
    free(path);
    rec.state = JOURNAL_DIRTY;
    REQUIRE(journal_write(r->journal, &rec) == 0);
    REQUIRE(commit_staged(&r->commit, &rec, NULL, NULL) == 0);
    snprintf(root, SCHEMA_ID_BUF, "%s", rec.base_root);
    journal_remove(r->journal, &rec);
    journal_rec_free(&rec);
}

/* Value i of "small" in an HDF5 file's bytes; -1 when it cannot be read. */
static inline long rig_small_value(const unsigned char *bytes, size_t len, int i)
{
    char path[320];
    int values[RIG_SMALL_VALUES];
    long v = -1;
    snprintf(path, sizeof path, "%s/small.h5", rig_tmp);
    FILE *fp = fopen(path, "wb");
    REQUIRE(fp && fwrite(bytes, 1, len, fp) == len && fclose(fp) == 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "small", H5P_DEFAULT) : -1;
    if (d >= 0 && H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0)
        v = values[i];
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    unlink(path);
    return v;
}

/* The root the .domain.json of domain names in the bucket ("" when there is none). */
static inline void rig_named_root(struct store *mem, const char *domain, char out[SCHEMA_ID_BUF])
{
    char key[STORE_KEY_MAX + 1];
    struct store_buf b;
    out[0] = '\0';
    REQUIRE(schema_domain_key(domain, key, sizeof key) == 0);
    if (store_get(mem, key, 1 << 20, &b) != 0)
        return;
    json_t *j = json_loadb((const char *)b.data, b.len, 0, NULL);
    const char *root = json_string_value(json_object_get(j, "root"));
    snprintf(out, SCHEMA_ID_BUF, "%s", root ? root : "");
    json_decref(j);
    store_buf_free(&b);
}

/* Objects of mem whose key matches glob. */
static inline size_t rig_count_keys(struct store *mem, const char *glob)
{
    struct store_list l;
    size_t n = 0;
    REQUIRE(store_list(mem, "", NULL, NULL, 0, &l) == 0);
    for (size_t i = 0; i < l.n_objects; i++)
        n += fnmatch(glob, l.objects[i].key, 0) == 0;
    store_list_free(&l);
    return n;
}

/* The objects of a v2 root: db/A-B/... */
static inline size_t rig_root_objects(struct store *mem, const char *root)
{
    char glob[64];
    snprintf(glob, sizeof glob, "db/%.17s/*", root + 2);
    return rig_count_keys(mem, glob);
}

/* The whole image read through cache (a fresh one when NULL): 0 and the bytes, or -errno. */
static inline int rig_read_image(struct image *img, unsigned char **out, size_t *len)
{
    return image_read_all(img, 65536, out, len);
}

static inline int rig_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* The temporary directory, quiet logs (the modules log every failure the tests cause). */
static inline void rig_setup(const char *name)
{
    snprintf(rig_tmp, sizeof rig_tmp, "/tmp/test_%s.XXXXXX", name);
    REQUIRE(mkdtemp(rig_tmp) != NULL);
    REQUIRE(log_setup(LOG_LVL_ERROR, LOG_SINK_FILE, "/dev/null") == 0);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static inline void rig_teardown(void)
{
    log_teardown();
    nftw(rig_tmp, rig_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
