/*
 * test_oom: out-of-memory injection (as curl's and SQLite's torture tests) over the commit of a
 * staged file and the build of an image, on the memory store.
 *
 * This program is linked with -Wl,--wrap for malloc, calloc, realloc, strdup, strndup,
 * posix_memalign and asprintf (tests/meson.build), so every allocation the daemon's libraries
 * make goes through one place here, and jansson's too (json_set_alloc_funcs). For k = 1, 2, ...
 * the k-th allocation after arming fails (once); the run must then end cleanly: a negative
 * errno or success, no crash, nothing leaked (valgrind and ASan runs of the unit tests check
 * that at exit), and never wrong bytes: whatever was committed or built reads back as the
 * file's values. The loop ends at the first k the operation no longer reaches.
 *
 * OOM_ONLY=image|commit runs one of the two; OOM_FIRST_K=k starts at k; OOM_TRACE=1 prints
 * the stack of each failed allocation (addr2line -e test_oom ADDRESSES names the lines).
 */
#include <errno.h>
#include <execinfo.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdatomic.h>
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
#include "h5osfs/schema/hjson.h"
#include "h5osfs/store/store_test.h"
#include "h5osfs/util/log.h"

#define BUCKET_ID "mem:test_oom"
#define DOMAIN "/home/u/x.h5"
#define N_VALUES 4096
#define CHUNK 1024
#define SEED 7
#define MAX_K 200000 /* far above what either operation allocates: a runaway loop stops */

#define REQUIRE(expr)                                                                \
    do {                                                                             \
        if (!(expr)) {                                                               \
            fprintf(stderr, "%s:%d: cannot go on: %s\n", __FILE__, __LINE__, #expr); \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

/* ---- the one place allocations go through ---- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
int __wrap_asprintf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocations left before the one that fails; <= 0: none fails. Threads share it. */
static atomic_long countdown;
static atomic_int fired;

static int injected_failure(void)
{
    if (atomic_load(&countdown) <= 0)
        return 0;
    if (atomic_fetch_sub(&countdown, 1) != 1)
        return 0;
    atomic_store(&fired, 1);
    if (getenv("OOM_TRACE")) {
        void *frames[32];
        backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
    }
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t size)
{
    return injected_failure() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return injected_failure() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    return injected_failure() ? NULL : __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
    return injected_failure() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return injected_failure() ? NULL : __real_strndup(s, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t size)
{
    return injected_failure() ? ENOMEM : __real_posix_memalign(p, align, size);
}

int __wrap_asprintf(char **out, const char *fmt, ...)
{
    if (injected_failure())
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

static void arm(long k)
{
    atomic_store(&fired, 0);
    atomic_store(&countdown, k);
}

/* 1 if the armed failure happened. */
static int disarm(void)
{
    atomic_store(&countdown, 0);
    return atomic_load(&fired);
}

/* ---- a memory bucket and the modules over it ---- */

static char tmp_dir[256];

struct rig {
    char cache_dir[320];
    struct store *st;
    struct ns *ns;
    struct gc *gc;
    struct journal *journal;
    struct domops ops;
    struct commit_ctx commit;
};

static void rig_open(struct rig *r, const char *name)
{
    struct ns_config nc = { .user = "u", .admin_user = "admin" };
    memset(r, 0, sizeof *r);
    snprintf(r->cache_dir, sizeof r->cache_dir, "%s/%s", tmp_dir, name);
    REQUIRE(store_mem_open(&r->st) == 0);
    REQUIRE(ns_new(r->st, &nc, &r->ns) == 0);
    REQUIRE(gc_new(r->st, 0, NULL, NULL, &r->gc) == 0);
    REQUIRE(gc_start(r->gc) == 0);
    REQUIRE(journal_open(r->cache_dir, BUCKET_ID, &r->journal) == 0);
    r->ops = (struct domops){
        .store = r->st, .ns = r->ns, .user = "u", .admin_user = "admin", .gc = r->gc
    };
    r->commit = (struct commit_ctx){ .ops = &r->ops, .journal = r->journal, .workers = 2 };
}

static void rig_close(struct rig *r)
{
    gc_drain(r->gc);
    gc_free(r->gc);
    journal_close(r->journal);
    ns_free(r->ns);
    store_close(r->st);
}

static const char *const LABELS[] = { "oom", "variable length" };

/* A variable-length string dataset "labels" (LABELS): its type's traits decide how it is
 * stored and built, so a traits lookup that runs out of memory must not pass for "no vlen". */
static void write_labels(hid_t f)
{
    hsize_t dims[1] = { 2 };
    hid_t space = H5Screate_simple(1, dims, NULL), str = H5Tcopy(H5T_C_S1);
    REQUIRE(space >= 0 && str >= 0 && H5Tset_size(str, H5T_VARIABLE) >= 0);
    hid_t d = H5Dcreate2(f, "labels", str, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(d >= 0 && H5Dwrite(d, str, H5S_ALL, H5S_ALL, H5P_DEFAULT, LABELS) >= 0);
    H5Dclose(d);
    H5Tclose(str);
    H5Sclose(space);
}

static int labels_ok(hid_t f)
{
    char *got[2] = { NULL, NULL };
    hid_t d = H5Dopen2(f, "labels", H5P_DEFAULT), str = H5Tcopy(H5T_C_S1);
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    int ok = d >= 0 && str >= 0 && space >= 0 && H5Tset_size(str, H5T_VARIABLE) >= 0 &&
             H5Sget_simple_extent_npoints(space) == 2 &&
             H5Dread(d, str, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0;
    for (int i = 0; ok && i < 2; i++)
        ok = got[i] && strcmp(got[i], LABELS[i]) == 0;
    if (ok || (got[0] || got[1]))
        H5Dvlen_reclaim(str, space, H5P_DEFAULT, got);
    if (space >= 0)
        H5Sclose(space);
    if (str >= 0)
        H5Tclose(str);
    if (d >= 0)
        H5Dclose(d);
    return ok;
}

#define VIEW 8 /* elements of the virtual datasets over "data" */

/* "view", a virtual dataset of data[0:VIEW], and "view2", one of view: the mappings are kept
 * through a commit and built back, ingest_vds.c and build_vds.c (which follows a chain of
 * virtual datasets of the file) running out of memory at each of their allocations. */
static void write_views(hid_t f)
{
    hsize_t n = VIEW, whole = N_VALUES, start = 0;
    int fill = -1;
    hid_t vspace = H5Screate_simple(1, &n, NULL), src = H5Screate_simple(1, &whole, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), dcpl2 = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(vspace >= 0 && src >= 0 && dcpl >= 0 && dcpl2 >= 0);
    REQUIRE(H5Sselect_hyperslab(src, H5S_SELECT_SET, &start, NULL, &n, NULL) >= 0);
    REQUIRE(H5Pset_fill_value(dcpl, H5T_NATIVE_INT, &fill) >= 0);
    REQUIRE(H5Pset_virtual(dcpl, vspace, ".", "/data", src) >= 0);
    REQUIRE(H5Pset_virtual(dcpl2, vspace, ".", "view", vspace) >= 0);
    hid_t v = H5Dcreate2(f, "view", H5T_NATIVE_INT, vspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t v2 = H5Dcreate2(f, "view2", H5T_NATIVE_INT, vspace, H5P_DEFAULT, dcpl2, H5P_DEFAULT);
    REQUIRE(v >= 0 && v2 >= 0);
    H5Dclose(v2);
    H5Dclose(v);
    H5Pclose(dcpl2);
    H5Pclose(dcpl);
    H5Sclose(src);
    H5Sclose(vspace);
}

static int views_ok(hid_t f)
{
    int ok = 1;
    for (int k = 0; ok && k < 2; k++) {
        int got[VIEW];
        hid_t d = H5Dopen2(f, k ? "view2" : "view", H5P_DEFAULT);
        hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : -1;
        ok = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_VIRTUAL &&
             H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0;
        for (int i = 0; ok && i < VIEW; i++)
            ok = got[i] == SEED * 1000 + i;
        if (dcpl >= 0)
            H5Pclose(dcpl);
        if (d >= 0)
            H5Dclose(d);
    }
    return ok;
}

/* A group, an attribute, a deflated, chunked int dataset "data" (seed * 1000 + i), the
 * labels and the views. */
static void write_h5(const char *path)
{
    int values[N_VALUES];
    hsize_t dims[1] = { N_VALUES }, chunk[1] = { CHUNK };
    for (int i = 0; i < N_VALUES; i++)
        values[i] = SEED * 1000 + i;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t scalar = H5Screate(H5S_SCALAR);
    REQUIRE(f >= 0 && space >= 0 && dcpl >= 0 && scalar >= 0);
    REQUIRE(H5Pset_chunk(dcpl, 1, chunk) >= 0 && H5Pset_deflate(dcpl, 1) >= 0);
    hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_INT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t a = H5Acreate2(g, "scale", H5T_NATIVE_DOUBLE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    double scale = 0.1;
    REQUIRE(d >= 0 && g >= 0 && a >= 0);
    REQUIRE(H5Awrite(a, H5T_NATIVE_DOUBLE, &scale) >= 0);
    REQUIRE(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    write_labels(f);
    write_views(f);
    H5Aclose(a);
    H5Gclose(g);
    H5Dclose(d);
    H5Sclose(scalar);
    H5Pclose(dcpl);
    H5Sclose(space);
    REQUIRE(H5Fclose(f) >= 0);
}

static void stage(struct rig *r, struct journal_rec *rec)
{
    int fd = -1;
    REQUIRE(journal_stage(r->journal, DOMAIN, JOURNAL_NEW, NULL, rec, &fd) == 0);
    close(fd);
    char *path = journal_staged_path(r->journal, rec);
    REQUIRE(path != NULL);
    write_h5(path);
    free(path);
    rec->state = JOURNAL_DIRTY;
    REQUIRE(journal_write(r->journal, rec) == 0);
}

/* The root the domain's .domain.json names ("" when there is none). */
static void named_root(struct store *st, char out[SCHEMA_ID_BUF])
{
    char key[STORE_KEY_MAX + 1];
    struct store_buf b;
    out[0] = '\0';
    REQUIRE(schema_domain_key(DOMAIN, key, sizeof key) == 0);
    if (store_get(st, key, 1 << 20, &b) != 0)
        return;
    json_t *j = json_loadb((const char *)b.data, b.len, 0, NULL);
    const char *root = json_string_value(json_object_get(j, "root"));
    snprintf(out, SCHEMA_ID_BUF, "%s", root ? root : "");
    json_decref(j);
    store_buf_free(&b);
}

/* ---- reading back ---- */

/* The image's /data, /labels, /g's attribute and the views, read by the HDF5 library, are
 * the file's. */
static int image_values_ok(struct image *img)
{
    char path[320];
    unsigned char *bytes;
    size_t len;
    int values[N_VALUES], ok;
    double scale = 0;
    if (image_read_all(img, 4096, &bytes, &len) != 0)
        return 0;
    snprintf(path, sizeof path, "%s/image.h5", tmp_dir);
    FILE *fp = fopen(path, "wb");
    REQUIRE(fp && fwrite(bytes, 1, len, fp) == len && fclose(fp) == 0);
    free(bytes);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "data", H5P_DEFAULT) : -1;
    hid_t a = f >= 0 ? H5Aopen_by_name(f, "g", "scale", H5P_DEFAULT, H5P_DEFAULT) : -1;
    ok = d >= 0 && H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0;
    ok = ok && a >= 0 && H5Aread(a, H5T_NATIVE_DOUBLE, &scale) >= 0 && scale == 0.1;
    for (int i = 0; ok && i < N_VALUES; i++)
        ok = values[i] == SEED * 1000 + i;
    ok = ok && labels_ok(f) && views_ok(f);
    if (a >= 0)
        H5Aclose(a);
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    unlink(path);
    return ok;
}

static int build(struct store *st, const char *root, struct image **img)
{
    struct image_source src = { .store = st, .bucket_name = "bucket" };
    *img = NULL;
    return image_build(&src, DOMAIN, root, img);
}

/* What the bucket shows for the domain, if anything, is the file's values. */
static int domain_absent_or_right(struct rig *r)
{
    char root[SCHEMA_ID_BUF];
    struct image *img;
    named_root(r->st, root);
    if (!root[0])
        return 1;
    if (build(r->st, root, &img) != 0)
        return 0;
    int ok = image_values_ok(img);
    size_t n_out = 0;
    const struct image_omission *o = image_left_out(img, &n_out);
    if (!ok && n_out)
        fprintf(stderr, "left out: %s\n", o[0].why);
    image_put(img);
    return ok;
}

/* ---- the runs ---- */

/* OOM_FIRST_K=k starts the loops at k (with OOM_TRACE=1: where the k-th allocation is). */
static long first_k(void)
{
    const char *k = getenv("OOM_FIRST_K");
    return k && atol(k) > 0 ? atol(k) : 1;
}

/* A negative errno the caller can report, not a made-up code. */
static int clean_error(int rc)
{
    return rc < 0 && rc > -4096;
}

static void test_commit_oom(void)
{
    long k;
    int failures = 0;
    for (k = first_k(); k < MAX_K; k++) {
        struct rig r;
        struct journal_rec rec;
        char name[32];
        snprintf(name, sizeof name, "commit-%ld", k);
        rig_open(&r, name);
        stage(&r, &rec);
        arm(k);
        int rc = commit_staged(&r.commit, &rec, NULL, NULL);
        int hit = disarm();
        gc_drain(r.gc);
        if (!hit) {
            CHECK_INT(rc, 0);
        } else if (rc != 0) {
            failures++;
            CHECK(clean_error(rc));
            if (!clean_error(rc))
                fprintf(stderr, "commit, allocation %ld failed: %d\n", k, rc);
        }
        int right = domain_absent_or_right(&r);
        CHECK(right);
        if (!right)
            fprintf(stderr, "commit, allocation %ld failed: wrong bytes committed\n", k);
        journal_remove(r.journal, &rec);
        journal_rec_free(&rec);
        rig_close(&r);
        ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
        CHECK_INT(open_ids, 0);
        if (open_ids != 0) {
            fprintf(stderr, "commit, allocation %ld failed: HDF5 ids left open\n", k);
            break;
        }
        if (!hit)
            break;
    }
    CHECK(k < MAX_K);
    printf("commit: %ld allocations, %d runs failed cleanly\n", k - 1, failures);
}

static void test_image_build_oom(void)
{
    struct rig r;
    struct journal_rec rec;
    char root[SCHEMA_ID_BUF];
    rig_open(&r, "image");
    stage(&r, &rec);
    REQUIRE(commit_staged(&r.commit, &rec, NULL, NULL) == 0);
    journal_remove(r.journal, &rec);
    journal_rec_free(&rec);
    named_root(r.st, root);
    REQUIRE(root[0]);
    long k;
    int failures = 0;
    for (k = first_k(); k < MAX_K; k++) {
        struct image *img;
        arm(k);
        int rc = build(r.st, root, &img);
        int hit = disarm();
        if (rc != 0) {
            failures++;
            CHECK(hit && clean_error(rc) && img == NULL);
            if (!clean_error(rc))
                fprintf(stderr, "image build, allocation %ld failed: %d\n", k, rc);
        } else {
            int ok = image_values_ok(img);
            CHECK(ok);
            if (!ok) {
                size_t n_out = 0;
                const struct image_omission *o = image_left_out(img, &n_out);
                fprintf(stderr,
                        "image build, allocation %ld failed: wrong bytes (%zu left out%s%s)\n", k,
                        n_out, n_out ? ": " : "", n_out ? o[0].why : "");
            }
            image_put(img);
        }
        ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
        CHECK_INT(open_ids, 0);
        if (open_ids != 0) {
            fprintf(stderr, "image build, allocation %ld failed: HDF5 ids left open\n", k);
            break;
        }
        if (!hit)
            break;
    }
    CHECK(k < MAX_K);
    printf("image build: %ld allocations, %d runs failed cleanly\n", k - 1, failures);
    rig_close(&r);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    if (getenv("H5OSFS_UNDER_VALGRIND")) {
        /* every run fails one allocation of thousands: minutes under valgrind, while the clang
         * ASan+LSan stage (scripts/test.sh) runs it whole */
        printf("oom: skipped under valgrind (run by the ASan+UBSan unit stage)\n");
        return 77;
    }
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_oom.XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    hjson_setup_alloc(); /* as the daemon: jansson's allocations counted, and wrapped here */
    /* every failure is logged where it is understood: keep the output for the test's own */
    if (log_setup(LOG_LVL_ERROR, LOG_SINK_FILE, "/dev/null") != 0)
        return 1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const char *only = getenv("OOM_ONLY"); /* "image" or "commit": one of the two runs */
    if (!only || strcmp(only, "image") == 0)
        test_image_build_oom();
    if (!only || strcmp(only, "commit") == 0)
        test_commit_oom();
    log_teardown();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_done("oom");
}
