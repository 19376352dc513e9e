/*
 * test_store_faults: commit, gc, ns and the image builder, driven through the entry points
 * the fs layer calls, over a memory bucket behind the faulty wrapper (h5osfs/store/store_test.h).
 * Each test makes the store fail, lose a reply or answer garbage at one chosen call and
 * asserts what the bucket holds afterwards and the errno the caller got.
 *
 * 1. commit_staged: a chunk put fails (ENOSPC, a timeout) -> the commit fails with the errno,
 *    no .domain.json is written, and once the collector ran the bucket is exactly as before;
 *    the .domain.json put fails -> the same; its reply is lost though it landed -> the commit
 *    is done and the new version's objects are kept; a retry after a failure commits.
 * 2. gc: a delete or the listing fails -> the other objects go, the root is tried again, no
 *    other root is touched.
 * 3. ns: a listing fails or names garbage, a .domain.json cannot be read or is cut short ->
 *    EIO or a broken entry, nothing cached from the failure, no garbage shown.
 * 4. image_build / image_read: an object's JSON cannot be read or is cut short, the chunk
 *    listing fails, a chunk comes back short or garbled -> a clean error, and whatever does
 *    read is the bytes of the good image.
 */
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
#include "h5osfs/domops/gc.h"
#include "h5osfs/image/image.h"
#include "h5osfs/ingest/ingest.h"
#include "h5osfs/commit/journal.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/store/store_test.h"

#define BUCKET_ID "mem:test_store_faults"
#define N_VALUES (1 << 20) /* more than one HSDS chunk (ingest makes ~1 MiB chunks) */
#define CHUNK (1 << 16)
#define CHUNK_KEYS "db/*/d/*/[0-9]*"
#define DATASET_KEYS "db/*/d/*/.dataset.json"
#define DOMAIN_KEYS "*/.domain.json"

static char tmp_dir[256];

#define REQUIRE(expr)                                                                \
    do {                                                                             \
        if (!(expr)) {                                                               \
            fprintf(stderr, "%s:%d: cannot go on: %s\n", __FILE__, __LINE__, #expr); \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

/* ---- the rig: a memory bucket, the faulty store over it, and the modules over that ---- */

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

static void rig_open(struct rig *r, const char *name, double ns_ttl)
{
    struct ns_config nc = { .user = "u", .admin_user = "admin", .ttl = ns_ttl };
    memset(r, 0, sizeof *r);
    snprintf(r->cache_dir, sizeof r->cache_dir, "%s/%s", tmp_dir, name);
    REQUIRE(store_mem_open(&r->mem) == 0);
    REQUIRE(store_faulty_open(r->mem, &r->st) == 0);
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
    gc_free(r->gc);
    journal_close(r->journal);
    ns_free(r->ns);
    store_close(r->st);
    store_close(r->mem);
}

static void put_text(struct store *st, const char *key, const char *text)
{
    CHECK_INT(store_put(st, key, text, strlen(text)), 0);
}

/* An HDF5 file: a group, and a deflated int dataset "data" of N_VALUES in chunks of CHUNK
 * whose values are seed * 1000 + i. */
static void write_h5(const char *path, int seed)
{
    int *values = malloc(N_VALUES * sizeof *values);
    hsize_t dims[1] = { N_VALUES }, chunk[1] = { CHUNK };
    REQUIRE(values != NULL);
    for (int i = 0; i < N_VALUES; i++)
        values[i] = seed * 1000 + i;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(f >= 0 && space >= 0 && dcpl >= 0);
    REQUIRE(H5Pset_chunk(dcpl, 1, chunk) >= 0 && H5Pset_deflate(dcpl, 1) >= 0);
    hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_INT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(d >= 0 && g >= 0);
    REQUIRE(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Gclose(g);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    REQUIRE(H5Fclose(f) >= 0);
    free(values);
}

/* A staged file for domain (mode, base_root as the fs layer stages them), DIRTY. */
static void stage(struct rig *r, const char *domain, enum journal_mode mode, const char *base_root,
                  int seed, struct journal_rec *rec)
{
    int fd = -1;
    REQUIRE(journal_stage(r->journal, domain, mode, base_root, rec, &fd) == 0);
    close(fd);
    char *path = journal_staged_path(r->journal, rec);
    REQUIRE(path != NULL);
    write_h5(path, seed);
    free(path);
    rec->state = JOURNAL_DIRTY;
    REQUIRE(journal_write(r->journal, rec) == 0);
}

static void unstage(struct rig *r, struct journal_rec *rec)
{
    journal_remove(r->journal, rec);
    journal_rec_free(rec);
}

/* A domain committed without faults; its root in root. */
static void commit_clean(struct rig *r, const char *domain, int seed, char root[SCHEMA_ID_BUF])
{
    struct journal_rec rec;
    stage(r, domain, JOURNAL_NEW, NULL, seed, &rec);
    REQUIRE(commit_staged(&r->commit, &rec, NULL, NULL) == 0);
    snprintf(root, SCHEMA_ID_BUF, "%s", rec.base_root);
    unstage(r, &rec);
    gc_drain(r->gc);
}

/* Every object of the bucket with its etag, "key=etag|...": equal means nothing changed. */
static char *snapshot(struct store *mem)
{
    struct store_list l;
    size_t cap = 1, used = 0;
    REQUIRE(store_list(mem, "", NULL, NULL, 0, &l) == 0);
    for (size_t i = 0; i < l.n_objects; i++)
        cap += strlen(l.objects[i].key) + strlen(l.objects[i].st.etag) + 2;
    char *s = malloc(cap);
    REQUIRE(s != NULL);
    s[0] = '\0';
    for (size_t i = 0; i < l.n_objects; i++)
        used += (size_t)snprintf(s + used, cap - used, "%s=%s|", l.objects[i].key,
                                 l.objects[i].st.etag);
    store_list_free(&l);
    return s;
}

static void check_unchanged(struct store *mem, const char *before)
{
    char *now = snapshot(mem);
    CHECK_STR(now, before);
    free(now);
}

/* Objects of mem whose key matches glob. */
static size_t count_keys(struct store *mem, const char *glob)
{
    struct store_list l;
    size_t n = 0;
    REQUIRE(store_list(mem, "", NULL, NULL, 0, &l) == 0);
    for (size_t i = 0; i < l.n_objects; i++)
        n += fnmatch(glob, l.objects[i].key, 0) == 0;
    store_list_free(&l);
    return n;
}

/* The glob of every key of a v2 root: db/A-B/ and a star. */
static const char *root_glob(const char *root, char *buf, size_t len)
{
    snprintf(buf, len, "db/%.17s/*", root + 2);
    return buf;
}

/* The root the .domain.json of domain names in the bucket ("" when none). */
static void named_root(struct store *mem, const char *domain, char out[SCHEMA_ID_BUF])
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

static void add_rule(struct store *st, unsigned ops, const char *pattern, uint64_t nth,
                     uint64_t times, enum faulty_mode mode, int err)
{
    struct faulty_rule r = {
        .ops = ops, .pattern = pattern, .nth = nth, .times = times, .mode = mode, .err = err
    };
    REQUIRE(store_faulty_add(st, &r) == 0);
}

/* Index in the record of the last (or first) call of op whose key matches glob; -1: none. */
static long record_index(struct store *st, enum faulty_op op, const char *glob, int last)
{
    size_t n;
    const struct faulty_call *rec = store_faulty_record(st, &n);
    long found = -1;
    for (size_t i = 0; i < n; i++) {
        if (rec[i].op != op || fnmatch(glob, rec[i].key, 0) != 0)
            continue;
        found = (long)i;
        if (!last)
            break;
    }
    return found;
}

/* The index of the last record of op on a key matching glob but not except, or -1. */
static long record_index_except(struct store *st, enum faulty_op op, const char *glob,
                                const char *except)
{
    size_t n;
    const struct faulty_call *rec = store_faulty_record(st, &n);
    long found = -1;
    for (size_t i = 0; i < n; i++)
        if (rec[i].op == op && fnmatch(glob, rec[i].key, 0) == 0 &&
            fnmatch(except, rec[i].key, 0) != 0)
            found = (long)i;
    return found;
}

/* ---- 1. commit ---- */

static size_t n_chunks; /* chunk objects of a committed file (more than one) */

/* The chunk objects of root in mem. */
static size_t count_chunks(struct store *mem, const char *root)
{
    char glob[64];
    snprintf(glob, sizeof glob, "db/%.17s/d/*/[0-9]*", root + 2);
    return count_keys(mem, glob);
}

/* A chunk put fails: the errno (ENOSPC as it is, anything else EIO), no .domain.json
 * attempted, the record DIRTY; the collector takes the half-written root, and the bucket is
 * as before. */
static void check_chunk_put_fails(struct rig *r, const char *domain, const char *base, int err,
                                  int want)
{
    char *before = snapshot(r->mem);
    struct journal_rec rec;
    stage(r, domain, JOURNAL_REPLACE, base, 2, &rec);
    store_faulty_reset(r->st);
    add_rule(r->st, FAULTY_MASK(FAULTY_PUT), CHUNK_KEYS, 3, 1, FAULTY_FAIL, err);
    CHECK_INT(commit_staged(&r->commit, &rec, NULL, NULL), want);
    CHECK_INT(store_faulty_fired(r->st), 1);
    CHECK_INT(store_faulty_calls_matching(r->st, FAULTY_PUT_IF, DOMAIN_KEYS), 0);
    CHECK_INT(store_faulty_calls_matching(r->st, FAULTY_PUT, DOMAIN_KEYS), 0);
    CHECK_INT(rec.state, JOURNAL_DIRTY);
    CHECK_STR(rec.base_root, base);
    store_faulty_clear(r->st);
    gc_drain(r->gc);
    check_unchanged(r->mem, before);
    free(before);
    unstage(r, &rec);
}

static void test_commit_chunk_put_fails(void)
{
    struct rig r;
    char root[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF], glob[64];
    rig_open(&r, "chunk", 0);
    commit_clean(&r, "/home/u/x.h5", 1, root);
    n_chunks = count_chunks(r.mem, root);
    CHECK(n_chunks > 3); /* else the third chunk put below would not exist */
    check_chunk_put_fails(&r, "/home/u/x.h5", root, -ENOSPC, -ENOSPC);
    check_chunk_put_fails(&r, "/home/u/x.h5", root, -ETIMEDOUT, -EIO);
    check_chunk_put_fails(&r, "/home/u/x.h5", root, -EIO, -EIO);

    /* the retry of the same staged file commits, every object before the .domain.json */
    struct journal_rec rec;
    stage(&r, "/home/u/x.h5", JOURNAL_REPLACE, root, 2, &rec);
    add_rule(r.st, FAULTY_MASK(FAULTY_PUT), CHUNK_KEYS, 1, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), -EIO);
    store_faulty_reset(r.st);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), 0);
    CHECK_INT(rec.state, JOURNAL_CLEAN);
    named_root(r.mem, "/home/u/x.h5", now);
    CHECK_STR(now, rec.base_root);
    CHECK(strcmp(now, root) != 0);
    /* the domain's summary (.info.json) is the one object put after the swap */
    long last_put =
        record_index_except(r.st, FAULTY_PUT, root_glob(now, glob, sizeof glob), "*/.info.json");
    long swap = record_index(r.st, FAULTY_PUT_IF, DOMAIN_KEYS, 0);
    long summary = record_index(r.st, FAULTY_PUT, "*/.info.json", 1);
    CHECK(last_put >= 0 && swap > last_put);
    CHECK(summary > swap);
    gc_drain(r.gc);
    CHECK_INT(count_keys(r.mem, root_glob(root, glob, sizeof glob)), 0); /* old: collected */
    CHECK_INT(count_chunks(r.mem, now), n_chunks);
    unstage(&r, &rec);
    rig_close(&r);
}

/* The .domain.json put fails (a replacement, and a new domain): the commit fails with EIO
 * after every object was put, and the bucket ends as it was. */
static void test_commit_domain_put_fails(void)
{
    struct rig r;
    char root[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF];
    struct journal_rec rec;
    rig_open(&r, "domain", 0);
    commit_clean(&r, "/home/u/x.h5", 1, root);
    char *before = snapshot(r.mem);

    stage(&r, "/home/u/x.h5", JOURNAL_REPLACE, root, 3, &rec);
    store_faulty_reset(r.st);
    add_rule(r.st, FAULTY_MASK(FAULTY_PUT_IF), DOMAIN_KEYS, 1, 0, FAULTY_FAIL, -EIO);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), -EIO);
    CHECK_INT(store_faulty_calls_matching(r.st, FAULTY_PUT, CHUNK_KEYS), n_chunks);
    CHECK_INT(rec.state, JOURNAL_DIRTY);
    named_root(r.mem, "/home/u/x.h5", now);
    CHECK_STR(now, root);
    gc_drain(r.gc);
    check_unchanged(r.mem, before);
    unstage(&r, &rec);

    stage(&r, "/home/u/new.h5", JOURNAL_NEW, NULL, 4, &rec);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), -EIO);
    named_root(r.mem, "/home/u/new.h5", now);
    CHECK_STR(now, "");
    gc_drain(r.gc);
    check_unchanged(r.mem, before);
    store_faulty_clear(r.st);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), 0); /* and then it commits */
    named_root(r.mem, "/home/u/new.h5", now);
    CHECK_STR(now, rec.base_root);
    unstage(&r, &rec);
    free(before);
    rig_close(&r);
}

/* The .domain.json put lands but its reply is lost (a timeout after the server took it):
 * the domain names the new root, so the commit is done and that root must not be collected. */
static void test_commit_domain_reply_lost(void)
{
    struct rig r;
    char root[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF], glob[64];
    struct journal_rec rec;
    rig_open(&r, "lost", 0);
    commit_clean(&r, "/home/u/x.h5", 1, root);
    stage(&r, "/home/u/x.h5", JOURNAL_REPLACE, root, 5, &rec);
    add_rule(r.st, FAULTY_MASK(FAULTY_PUT_IF), DOMAIN_KEYS, 1, 1, FAULTY_AFTER, -EIO);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), 0);
    CHECK_INT(store_faulty_fired(r.st), 1);
    named_root(r.mem, "/home/u/x.h5", now);
    CHECK(strcmp(now, root) != 0);
    CHECK_STR(rec.base_root, now);
    CHECK_INT(rec.state, JOURNAL_CLEAN);
    gc_drain(r.gc);
    CHECK_INT(count_chunks(r.mem, now), n_chunks); /* the domain's data is there */
    CHECK_INT(count_keys(r.mem, root_glob(root, glob, sizeof glob)), 0);
    unstage(&r, &rec);
    rig_close(&r);
}

/* The reply is lost and the domain cannot be read again to tell whether the put landed: the
 * new root is not collected, the record stays COMMITTING, and recovery at the next mount
 * finds the commit finished. */
static void test_commit_domain_in_doubt(void)
{
    struct rig r;
    char root[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF], glob[64];
    struct journal_rec rec;
    rig_open(&r, "doubt", 0);
    commit_clean(&r, "/home/u/x.h5", 1, root);
    stage(&r, "/home/u/x.h5", JOURNAL_REPLACE, root, 6, &rec);
    add_rule(r.st, FAULTY_MASK(FAULTY_PUT_IF), DOMAIN_KEYS, 1, 1, FAULTY_AFTER, -EIO);
    /* GETs of the .domain.json: the check before the ingest, the swap's read, then the
     * read that would tell */
    add_rule(r.st, FAULTY_MASK(FAULTY_GET), DOMAIN_KEYS, 3, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), -EIO);
    CHECK_INT(store_faulty_fired(r.st), 2);
    CHECK_INT(rec.state, JOURNAL_COMMITTING);
    named_root(r.mem, "/home/u/x.h5", now);
    CHECK_STR(rec.new_root, now);
    gc_drain(r.gc);
    CHECK_INT(count_chunks(r.mem, now), n_chunks); /* what the domain names is kept */
    store_faulty_clear(r.st);
    CHECK_INT(commit_recover(&r.commit), 0);
    gc_drain(r.gc);
    CHECK_INT(count_chunks(r.mem, now), n_chunks);
    CHECK_INT(count_keys(r.mem, root_glob(root, glob, sizeof glob)), 0);
    struct journal_rec *left;
    size_t n;
    CHECK_INT(journal_list(r.journal, &left, &n), 0);
    CHECK_INT(n, 0);
    journal_recs_free(left, n);
    journal_rec_free(&rec);
    rig_close(&r);
}

static int versions_always(void *ctx, const char *domain, unsigned *keep, int *ref)
{
    (void)ctx;
    (void)domain;
    *keep = 0;
    if (ref)
        *ref = 0;
    return 1;
}

/* With versions on, the put of the version list lands but its reply is lost: the list names
 * the new version, so the commit is done and the version's root is never collected (before,
 * the commit failed and queued that root: the listed version lost its data). */
static void test_version_list_reply_lost(void)
{
    struct rig r;
    char root[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF], vroot[SCHEMA_ID_BUF] = "", glob[64];
    struct journal_rec rec;
    struct store_buf b;
    rig_open(&r, "vlost", 0);
    r.commit.versions_for = versions_always;
    commit_clean(&r, "/home/u/x.h5", 1, root);
    stage(&r, "/home/u/x.h5", JOURNAL_REPLACE, root, 7, &rec);
    add_rule(r.st, FAULTY_MASK(FAULTY_PUT_IF), "*/.h5osfs-versions", 1, 1, FAULTY_AFTER, -EIO);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), 0);
    CHECK_INT(store_faulty_fired(r.st), 1);
    named_root(r.mem, "/home/u/x.h5", now);
    CHECK(strcmp(now, root) != 0);
    REQUIRE(store_get(r.mem, "home/u/.versions/x.h5/.h5osfs-versions", 1 << 20, &b) == 0);
    json_t *l = json_loadb((const char *)b.data, b.len, 0, NULL);
    json_t *last = json_array_get(json_object_get(l, "versions"), 1);
    const char *listed = json_string_value(json_object_get(last, "root"));
    snprintf(vroot, sizeof vroot, "%s", listed ? listed : "");
    CHECK_INT(json_array_size(json_object_get(l, "versions")), 2);
    json_decref(l);
    store_buf_free(&b);
    gc_drain(r.gc);
    CHECK(vroot[0] != '\0');
    if (vroot[0])
        CHECK(count_keys(r.mem, root_glob(vroot, glob, sizeof glob)) > 0);
    unstage(&r, &rec);
    rig_close(&r);
}

/* The commit of the reply-lost, unreadable case, left COMMITTING with the domain naming its
 * new root (in now), as test_commit_domain_in_doubt makes it. */
static void commit_in_doubt(struct rig *r, const char *root, struct journal_rec *rec,
                            char now[SCHEMA_ID_BUF])
{
    stage(r, "/home/u/x.h5", JOURNAL_REPLACE, root, 6, rec);
    add_rule(r->st, FAULTY_MASK(FAULTY_PUT_IF), DOMAIN_KEYS, 1, 1, FAULTY_AFTER, -EIO);
    add_rule(r->st, FAULTY_MASK(FAULTY_GET), DOMAIN_KEYS, 3, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(commit_staged(&r->commit, rec, NULL, NULL), -EIO);
    CHECK_INT(rec->state, JOURNAL_COMMITTING);
    named_root(r->mem, "/home/u/x.h5", now);
    CHECK_STR(rec->new_root, now);
    store_faulty_clear(r->st);
}

/* The same mount tries the in-doubt commit again (the next close): the earlier swap landed,
 * so it is settled as recovery would, and the commit goes on from that version (it used to
 * find the domain changed "by another writer" and answer ESTALE). Nothing is left behind. */
static void test_commit_in_doubt_retried(void)
{
    struct rig r;
    char root[SCHEMA_ID_BUF], doubt[SCHEMA_ID_BUF], now[SCHEMA_ID_BUF], glob[64];
    struct journal_rec rec;
    rig_open(&r, "doubt-retry", 0);
    commit_clean(&r, "/home/u/x.h5", 1, root);
    commit_in_doubt(&r, root, &rec, doubt);
    CHECK_INT(commit_staged(&r.commit, &rec, NULL, NULL), 0);
    CHECK_INT(rec.state, JOURNAL_CLEAN);
    named_root(r.mem, "/home/u/x.h5", now);
    CHECK_STR(rec.base_root, now);
    gc_drain(r.gc);
    CHECK_INT(count_chunks(r.mem, now), n_chunks);
    CHECK_INT(count_keys(r.mem, "db/*"), count_keys(r.mem, root_glob(now, glob, sizeof glob)));
    unstage(&r, &rec);
    rig_close(&r);
}

/* Recovery of an in-doubt commit while the domain cannot be read: it cannot tell whether the
 * swap landed, so it collects nothing (the root the domain names keeps its chunks) and keeps
 * the record; a later mount settles it. */
static void test_recovery_cannot_read_the_domain(void)
{
    struct rig r;
    char root[SCHEMA_ID_BUF], doubt[SCHEMA_ID_BUF];
    struct journal_rec rec;
    rig_open(&r, "doubt-recover", 0);
    commit_clean(&r, "/home/u/x.h5", 1, root);
    commit_in_doubt(&r, root, &rec, doubt);
    add_rule(r.st, FAULTY_MASK(FAULTY_GET), DOMAIN_KEYS, 1, 1000, FAULTY_FAIL, -EIO);
    CHECK_INT(commit_recover(&r.commit), 1);
    gc_drain(r.gc);
    CHECK_INT(count_chunks(r.mem, doubt), n_chunks); /* the domain's data */
    store_faulty_clear(r.st);
    CHECK_INT(commit_recover(&r.commit), 0);
    gc_drain(r.gc);
    CHECK_INT(count_chunks(r.mem, doubt), n_chunks);
    journal_rec_free(&rec);
    rig_close(&r);
}

/* ---- 2. gc ---- */

static void put_root_objects(struct store *mem, const char *root, int n)
{
    char key[128];
    snprintf(key, sizeof key, "db/%.17s/.group.json", root + 2);
    put_text(mem, key, "{}");
    for (int i = 0; i < n - 1; i++) {
        snprintf(key, sizeof key, "db/%.17s/d/0000-000000-000001/%d", root + 2, i);
        put_text(mem, key, "chunk");
    }
}

static void test_gc_delete_fails(void)
{
    struct rig r;
    char a[SCHEMA_ID_BUF], b[SCHEMA_ID_BUF], glob[64], other[64];
    rig_open(&r, "gc", 0);
    REQUIRE(ingest_new_root_id(a) == 0 && ingest_new_root_id(b) == 0);
    put_root_objects(r.mem, a, 10);
    put_root_objects(r.mem, b, 10);
    root_glob(a, glob, sizeof glob);
    root_glob(b, other, sizeof other);

    /* one delete fails once: the rest go at once, that one at the next try */
    add_rule(r.st, FAULTY_MASK(FAULTY_DELETE), NULL, 3, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(gc_add(r.gc, a, NULL, NULL), 0);
    gc_drain(r.gc);
    CHECK_INT(count_keys(r.mem, glob), 0);
    CHECK_INT(count_keys(r.mem, other), 10);
    CHECK_INT(store_faulty_calls(r.st, FAULTY_DELETE), 11);

    /* a delete that always fails: tried a bounded number of times, the rest deleted */
    store_faulty_reset(r.st);
    put_root_objects(r.mem, a, 10);
    char stuck[128];
    snprintf(stuck, sizeof stuck, "db/%.17s/d/0000-000000-000001/4", a + 2);
    add_rule(r.st, FAULTY_MASK(FAULTY_DELETE), stuck, 1, 0, FAULTY_FAIL, -EIO);
    CHECK_INT(gc_add(r.gc, a, NULL, NULL), 0);
    gc_drain(r.gc);
    CHECK_INT(count_keys(r.mem, glob), 1);
    CHECK_INT(count_keys(r.mem, stuck), 1);
    CHECK(store_faulty_calls_matching(r.st, FAULTY_DELETE, stuck) > 1);
    CHECK_INT(count_keys(r.mem, other), 10);
    store_faulty_clear(r.st);

    /* the listing fails once: nothing deleted then, everything at the next try */
    store_faulty_reset(r.st);
    add_rule(r.st, FAULTY_MASK(FAULTY_LIST), NULL, 1, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(gc_add(r.gc, b, NULL, NULL), 0);
    gc_drain(r.gc);
    CHECK_INT(count_keys(r.mem, other), 0);
    /* the failed one, the one that finds the objects, the one that finds the prefix empty */
    CHECK_INT(store_faulty_calls(r.st, FAULTY_LIST), 3);
    CHECK_INT(count_keys(r.mem, stuck), 1); /* a's leftover: not b's to take */
    rig_close(&r);
}

/* The root group is deleted last: it shows whose the root's objects are (a version's root,
 * domops/vpool.h), so a collection cut short must never leave objects without it. */
static void test_gc_deletes_the_root_group_last(void)
{
    struct rig r;
    char a[SCHEMA_ID_BUF], group[64];
    rig_open(&r, "gc-order", 0);
    REQUIRE(ingest_new_root_id(a) == 0);
    put_root_objects(r.mem, a, 10);
    snprintf(group, sizeof group, "db/%.17s/.group.json", a + 2);
    CHECK_INT(gc_add(r.gc, a, NULL, NULL), 0);
    gc_drain(r.gc);
    size_t n, deletes = 0;
    const struct faulty_call *calls = store_faulty_record(r.st, &n);
    const char *last = NULL;
    for (size_t i = 0; i < n; i++)
        if (calls[i].op == FAULTY_DELETE) {
            deletes++;
            last = calls[i].key;
        }
    CHECK_INT(deletes, 10);
    CHECK(last && strcmp(last, group) == 0);
    rig_close(&r);
}

/* ---- 3. ns ---- */

#define FOLDER                                                                       \
    "{\"owner\": \"u\", \"acls\": {\"u\": {\"create\": true, \"read\": true, "       \
    "\"update\": true, \"delete\": true, \"readACL\": true, \"updateACL\": true}}, " \
    "\"created\": 1600000000, \"lastModified\": 1600000001}"
#define DOMAIN_JSON                                                             \
    "{\"root\": \"g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95\", \"owner\": \"u\", " \
    "\"acls\": {\"u\": {\"read\": true}}, \"created\": 1700000000, "            \
    "\"lastModified\": 1700000001}"

static void ns_bucket(struct store *mem)
{
    put_text(mem, "home/.domain.json", FOLDER);
    put_text(mem, "home/u/.domain.json", FOLDER);
    put_text(mem, "home/u/a.h5/.domain.json", DOMAIN_JSON);
    put_text(mem, "home/u/b.h5/.domain.json", DOMAIN_JSON);
    put_text(mem, "home/u/c.h5/.domain.json", DOMAIN_JSON);
    put_text(mem, "plain/deeper/d.h5/.domain.json", DOMAIN_JSON);
}

static void test_ns_listing_fails(void)
{
    struct rig r;
    struct ns_dir dir;
    struct ns_info info;
    rig_open(&r, "ns-list", 60);
    ns_bucket(r.mem);
    add_rule(r.st, FAULTY_MASK(FAULTY_LIST), "home/u/", 1, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(ns_readdir(r.ns, "/home/u", &dir), -EIO);
    CHECK_INT(dir.n, 0);
    CHECK_INT(ns_readdir(r.ns, "/home/u", &dir), 0); /* the failure was not cached */
    CHECK_INT(dir.n, 3);
    ns_dir_free(&dir);

    /* a plain directory is one only if a listing finds a domain below it */
    add_rule(r.st, FAULTY_MASK(FAULTY_LIST), "plain/*", 1, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(ns_stat(r.ns, "/plain", &info), -EIO);
    CHECK_INT(ns_stat(r.ns, "/plain", &info), 0);
    CHECK_INT(info.kind, NS_DIR);
    rig_close(&r);
}

/* A listing whose names are not below the prefix asked for (a broken server): nothing of it
 * is shown, nothing is read outside the names. */
static void test_ns_listing_garbage(void)
{
    struct rig r;
    struct ns_dir dir;
    rig_open(&r, "ns-garbage", 0);
    ns_bucket(r.mem);
    struct faulty_rule g = { .ops = FAULTY_MASK(FAULTY_LIST), .mode = FAULTY_GARBLE };
    REQUIRE(store_faulty_add(r.st, &g) == 0);
    CHECK_INT(ns_readdir(r.ns, "/home/u", &dir), 0);
    CHECK_INT(dir.n, 0);
    ns_dir_free(&dir);
    CHECK_INT(ns_readdir(r.ns, "/", &dir), 0);
    CHECK_INT(dir.n, 0);
    ns_dir_free(&dir);
    store_faulty_clear(r.st);
    CHECK_INT(ns_readdir(r.ns, "/home/u", &dir), 0);
    CHECK_INT(dir.n, 3);
    ns_dir_free(&dir);
    rig_close(&r);
}

static void test_ns_domain_json_fails(void)
{
    struct rig r;
    struct ns_info info;
    rig_open(&r, "ns-get", 60);
    ns_bucket(r.mem);
    add_rule(r.st, FAULTY_MASK(FAULTY_GET), "home/u/a.h5/*", 1, 1, FAULTY_FAIL, -EIO);
    add_rule(r.st, FAULTY_MASK(FAULTY_GET), "home/u/b.h5/*", 1, 1, FAULTY_FAIL, -ETIMEDOUT);
    CHECK_INT(ns_stat(r.ns, "/home/u/a.h5", &info), -EIO);
    CHECK_INT(ns_stat(r.ns, "/home/u/b.h5", &info), -EIO);
    CHECK_INT(ns_stat(r.ns, "/home/u/a.h5", &info), 0); /* not cached */
    CHECK_INT(info.kind, NS_DOMAIN);
    CHECK_STR(info.root, "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95");

    struct faulty_rule cut = { .ops = FAULTY_MASK(FAULTY_GET),
                               .pattern = "home/u/c.h5/*",
                               .mode = FAULTY_TRUNCATE,
                               .keep = 20,
                               .times = 1 };
    REQUIRE(store_faulty_add(r.st, &cut) == 0);
    CHECK_INT(ns_stat(r.ns, "/home/u/c.h5", &info), 0);
    CHECK_INT(info.kind, NS_BROKEN); /* a cut object: broken, no root */
    CHECK_STR(info.root, "");
    struct faulty_rule garb = { .ops = FAULTY_MASK(FAULTY_GET),
                                .pattern = "home/u/b.h5/*",
                                .mode = FAULTY_GARBLE,
                                .times = 1 };
    REQUIRE(store_faulty_add(r.st, &garb) == 0);
    CHECK_INT(ns_stat(r.ns, "/home/u/b.h5", &info), 0);
    CHECK_INT(info.kind, NS_BROKEN);
    rig_close(&r);
}

/* ---- 4. the image builder ---- */

/* Every block that reads at all reads as in good; 1 if some block failed with EIO. */
static int reads_good_or_eio(struct image *img, const unsigned char *good, size_t len)
{
    struct image_reader rd = { .cache = chunk_cache_new(16u << 20) };
    unsigned char buf[4096];
    int failed = 0;
    REQUIRE(rd.cache != NULL);
    for (size_t off = 0; off < len; off += sizeof buf) {
        size_t want = len - off < sizeof buf ? len - off : sizeof buf;
        ssize_t n = image_read(img, &rd, off, buf, want);
        if (n == -EIO) {
            failed = 1;
            continue;
        }
        CHECK_INT(n, want);
        CHECK(n == (ssize_t)want && memcmp(buf, good + off, want) == 0);
    }
    chunk_cache_free(rd.cache);
    return failed;
}

/* The values of /data in the image bytes, through the HDF5 library (a file on disk). */
static int image_values_ok(const unsigned char *bytes, size_t len, int seed)
{
    char path[320];
    int *values = malloc(N_VALUES * sizeof *values), ok = 1;
    REQUIRE(values != NULL);
    snprintf(path, sizeof path, "%s/image.h5", tmp_dir);
    FILE *fp = fopen(path, "wb");
    REQUIRE(fp && fwrite(bytes, 1, len, fp) == len && fclose(fp) == 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "data", H5P_DEFAULT) : -1;
    ok = d >= 0 && H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0;
    for (int i = 0; ok && i < N_VALUES; i++)
        ok = values[i] == seed * 1000 + i;
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    unlink(path);
    free(values);
    return ok;
}

static int build(struct rig *r, const char *root, struct image **img)
{
    struct image_source src = { .store = r->st, .bucket_name = "bucket" };
    *img = NULL;
    return image_build(&src, "/home/u/x.h5", root, img);
}

static int has_omission(struct image *img, enum image_omission_kind kind)
{
    size_t n;
    const struct image_omission *o = image_left_out(img, &n);
    for (size_t i = 0; i < n; i++)
        if (o[i].kind == kind)
            return 1;
    return 0;
}

static void test_image_faults(void)
{
    struct rig r;
    char root[SCHEMA_ID_BUF], glob[64];
    struct image *img;
    unsigned char *good = NULL, *bytes = NULL;
    size_t len = 0, n = 0;
    rig_open(&r, "image", 0);
    commit_clean(&r, "/home/u/x.h5", 7, root);
    REQUIRE(build(&r, root, &img) == 0);
    REQUIRE(image_read_all(img, 4096, &good, &len) == 0);
    CHECK(image_values_ok(good, len, 7));
    image_put(img);

    /* the root group's or the dataset's JSON cannot be read: no image */
    snprintf(glob, sizeof glob, "db/%.17s/.group.json", root + 2);
    add_rule(r.st, FAULTY_MASK(FAULTY_GET), glob, 1, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(build(&r, root, &img), -EIO);
    CHECK(img == NULL);
    add_rule(r.st, FAULTY_MASK(FAULTY_GET), glob, 1, 1, FAULTY_TRUNCATE, 0);
    CHECK_INT(build(&r, root, &img), -EIO);
    add_rule(r.st, FAULTY_MASK(FAULTY_GET), DATASET_KEYS, 1, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(build(&r, root, &img), -EIO);
    CHECK(img == NULL);
    store_faulty_clear(r.st);

    /* the dataset's JSON cut short: the rest of the domain shows, the link to the dataset
     * is left out (listed) */
    struct faulty_rule cut = { .ops = FAULTY_MASK(FAULTY_GET),
                               .pattern = DATASET_KEYS,
                               .mode = FAULTY_TRUNCATE,
                               .keep = 40,
                               .times = 1 };
    REQUIRE(store_faulty_add(r.st, &cut) == 0);
    CHECK_INT(build(&r, root, &img), 0);
    if (img) {
        CHECK(has_omission(img, IMAGE_OMIT_LINK));
        CHECK(image_read_all(img, 4096, &bytes, &n) == 0 && !image_values_ok(bytes, n, 7));
        free(bytes);
        image_put(img);
    }
    store_faulty_clear(r.st);

    /* the chunk listing fails: no image (a dataset without its chunks would read as fill) */
    snprintf(glob, sizeof glob, "db/%.17s/*", root + 2);
    add_rule(r.st, FAULTY_MASK(FAULTY_LIST), glob, 1, 1, FAULTY_FAIL, -EIO);
    CHECK_INT(build(&r, root, &img), -EIO);
    CHECK(img == NULL);
    CHECK_INT(store_faulty_fired(r.st) > 0, 1);
    store_faulty_clear(r.st);

    /* chunks that fail, come back short or garbled: reads fail with EIO, never wrong bytes */
    REQUIRE(build(&r, root, &img) == 0);
    static const enum faulty_mode modes[] = { FAULTY_FAIL, FAULTY_TRUNCATE, FAULTY_GARBLE };
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        struct faulty_rule bad = { .ops = FAULTY_MASK(FAULTY_GET),
                                   .pattern = CHUNK_KEYS,
                                   .nth = 2,
                                   .mode = modes[m],
                                   .err = -EIO,
                                   .keep = 5 };
        store_faulty_clear(r.st);
        REQUIRE(store_faulty_add(r.st, &bad) == 0);
        CHECK_INT(reads_good_or_eio(img, good, len), 1);
    }
    store_faulty_clear(r.st);
    CHECK_INT(reads_good_or_eio(img, good, len), 0);
    image_put(img);
    free(good);
    rig_close(&r);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_store_faults.XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    /* the modules log every failure they meet: keep the output for the test's own */
    if (log_setup(LOG_LVL_ERROR, LOG_SINK_FILE, "/dev/null") != 0)
        return 1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    test_commit_chunk_put_fails();
    test_commit_domain_put_fails();
    test_commit_domain_reply_lost();
    test_commit_domain_in_doubt();
    test_version_list_reply_lost();
    test_commit_in_doubt_retried();
    test_recovery_cannot_read_the_domain();
    test_gc_delete_fails();
    test_gc_deletes_the_root_group_last();
    test_ns_listing_fails();
    test_ns_listing_garbage();
    test_ns_domain_json_fails();
    test_image_faults();
    log_teardown();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_done("store_faults");
}
