/*
 * test_sweep: the collection of removed versions (sweep.h) over a memory bucket behind the
 * faulty store. A version root V names pool objects a and b through its chunk table; c and d
 * are in the pool, named by nothing. Whatever call fails (the root's or the pool's listing, a
 * table's GET, a garbled table, the list's second read, a HEAD or a delete), a and b are never
 * deleted; a sweep that could not mark everything deletes nothing at all; a failed delete
 * stops the sweep, and the next one finishes it. Removing entries: the name objects go, the
 * entry stays while its root lists objects, and is dropped (the sweep recorded as owed first)
 * once it lists empty.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "check.h"
#include "h5osfs/util/log.h"
#include "h5osfs/store/store_test.h"
#include "h5osfs/domops/sweep.h"
#include "h5osfs/domops/vpool.h"
#include "h5osfs/schema/vlist.h"

#define DOMAIN "/home/u/v.h5"
#define ENTRY 140 /* versions.c's table entry: offset I64, size I32, 128 bytes of URI */

#define REQUIRE(expr)                                                                \
    do {                                                                             \
        if (!(expr)) {                                                               \
            fprintf(stderr, "%s:%d: cannot go on: %s\n", __FILE__, __LINE__, #expr); \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

static const char *const named_md5[] = { "0123456789abcdef0123456789abcdef",
                                         "fedcba9876543210fedcba9876543210" };
static const char *const orphan_md5[] = { "00000000000000000000000000000001",
                                          "00000000000000000000000000000002" };

struct rig {
    struct store *mem, *st; /* st: the faulty store over mem */
    char pool[SCHEMA_ID_BUF], vroot[SCHEMA_ID_BUF], list_key[STORE_KEY_MAX + 1];
    char table_chunk[STORE_KEY_MAX + 1];
};

/* A v2 id: 16 digits from seed, the next 16 their rotation (spec §1.2); kind 'g' or 'd' (a
 * dataset of root, sharing its first 16 digits). */
static void make_id(char kind, unsigned seed, const char *root, char out[SCHEMA_ID_BUF])
{
    char d[33];
    snprintf(d, 17, "%08x%08x", seed * 2654435761u, seed ^ 0x5bd1e995u);
    if (root) /* the root's digits 0-15, from its A-B prefix */
        snprintf(d, 17, "%.8s%.8s", root + 2, root + 11);
    for (int i = 0; i < 16; i++)
        d[16 + i] = (char)schema_hex_rot(d[i]);
    d[32] = '\0';
    if (root) /* other digits 16-31: any (only roots follow the rule) */
        for (int i = 16; i < 32; i++)
            d[i] = "0123456789abcdef"[(seed + (unsigned)i) & 15];
    snprintf(out, SCHEMA_ID_BUF, "%c-%.8s-%.8s-%.4s-%.6s-%.6s", kind, d, d + 8, d + 16, d + 20,
             d + 26);
}

static void put_text(struct store *st, const char *key, const char *text)
{
    REQUIRE(store_put(st, key, text, strlen(text)) == 0);
}

static void pool_key(const struct rig *r, const char *md5, char *buf, size_t len)
{
    REQUIRE(schema_pool_key(r->pool, md5, buf, len) == 0);
}

/* V: a root group, a dataset over a chunk table naming a and b (and an absent entry). */
static void put_version_root(struct rig *r, unsigned seed)
{
    char key[STORE_KEY_MAX + 1], did[SCHEMA_ID_BUF], tid[SCHEMA_ID_BUF], text[1024];
    uint64_t zero = 0;
    make_id('d', seed + 1, r->vroot, did);
    make_id('d', seed + 2, r->vroot, tid);
    REQUIRE(schema_obj_key(r->vroot, key, sizeof key) == 0);
    snprintf(text, sizeof text, "{\"id\": \"root\", \"h5osfs\": {\"pool\": \"%s\"}}", r->pool);
    put_text(r->mem, key, text); /* a version over the pool (vpool.h) */
    REQUIRE(schema_obj_key(did, key, sizeof key) == 0);
    snprintf(text, sizeof text,
             "{\"creationProperties\": {\"layout\": {\"class\": \"H5D_CHUNKED_REF_INDIRECT\", "
             "\"chunk_table\": \"%s\"}}}",
             tid);
    put_text(r->mem, key, text);
    REQUIRE(schema_obj_key(tid, key, sizeof key) == 0);
    put_text(r->mem, key, "{\"creationProperties\": {}}");
    unsigned char table[3 * ENTRY] = { 0 };
    for (int i = 0; i < 3; i++) {
        char uri[STORE_KEY_MAX + 16];
        if (i < 2) {
            pool_key(r, named_md5[i], key, sizeof key);
            snprintf(uri, sizeof uri, "hsdstest/%s", key);
        } else
            snprintf(uri, sizeof uri, "hsdstest/db/%.17s/c/0", r->pool + 2);
        REQUIRE(strlen(uri) < 128);
        table[i * ENTRY + 8] = 16;
        memcpy(table + i * ENTRY + 12, uri, strlen(uri));
    }
    REQUIRE(schema_chunk_key(tid, &zero, 1, -1, r->table_chunk, sizeof r->table_chunk) == 0);
    REQUIRE(store_put(r->mem, r->table_chunk, table, sizeof table) == 0);
}

static void put_list(struct rig *r, enum vlist_state state, const char *extra_entry)
{
    struct vlist l;
    char *text = NULL;
    REQUIRE(vlist_init(&l, DOMAIN, r->pool) == 0);
    REQUIRE(vlist_append(&l, r->vroot, 1.0, "u", 0, "", NULL) == 0);
    if (state == VLIST_REMOVING)
        REQUIRE(vlist_unname(&l, "1.h5", 0) == 0);
    REQUIRE(vlist_dump(&l, &text) == 0);
    vlist_free(&l);
    if (extra_entry) { /* before the closing "]}" */
        char *end = strrchr(text, ']');
        REQUIRE(end);
        size_t head = (size_t)(end - text);
        char *joined = malloc(head + strlen(extra_entry) + 8);
        REQUIRE(joined);
        snprintf(joined, head + strlen(extra_entry) + 8, "%.*s, %s]}", (int)head, text,
                 extra_entry);
        free(text);
        text = joined;
    }
    put_text(r->mem, r->list_key, text);
    free(text);
}

/* The rig over base (taken over), or a memory bucket (NULL). */
static void rig_open_on(struct rig *r, enum vlist_state state, struct store *base)
{
    char key[STORE_KEY_MAX + 1];
    memset(r, 0, sizeof *r);
    if (base)
        r->mem = base;
    else
        REQUIRE(store_mem_open(&r->mem) == 0);
    REQUIRE(store_faulty_open(r->mem, &r->st) == 0);
    make_id('g', 7, NULL, r->pool);
    make_id('g', 11, NULL, r->vroot);
    REQUIRE(schema_vlist_key(DOMAIN, r->list_key, sizeof r->list_key) == 0);
    REQUIRE(vpool_claim(r->mem, r->pool, DOMAIN, NULL) == 0);
    put_version_root(r, 20);
    put_list(r, state, NULL);
    for (int i = 0; i < 2; i++) {
        pool_key(r, named_md5[i], key, sizeof key);
        put_text(r->mem, key, "named");
        pool_key(r, orphan_md5[i], key, sizeof key);
        put_text(r->mem, key, "orphan");
    }
}

static void rig_open(struct rig *r, enum vlist_state state)
{
    rig_open_on(r, state, NULL);
}

static void rig_close(struct rig *r)
{
    store_close(r->st);
    store_close(r->mem);
}

static int pool_has(struct rig *r, const char *md5)
{
    char key[STORE_KEY_MAX + 1];
    struct store_stat st;
    pool_key(r, md5, key, sizeof key);
    return store_head(r->mem, key, &st) == 0;
}

static int named_all_there(struct rig *r)
{
    return pool_has(r, named_md5[0]) && pool_has(r, named_md5[1]);
}

static int orphans_left(struct rig *r)
{
    return pool_has(r, orphan_md5[0]) + pool_has(r, orphan_md5[1]);
}

static size_t truncate_to;   /* TRUNCATE rules keep this many bytes */
static int fault_err = -EIO; /* what FAIL rules answer */

static void add_rule(struct store *st, unsigned ops, const char *pattern, uint64_t nth,
                     uint64_t times, enum faulty_mode mode)
{
    struct faulty_rule rule = { .ops = ops,
                                .pattern = pattern,
                                .nth = nth,
                                .times = times,
                                .mode = mode,
                                .err = fault_err,
                                .keep = truncate_to };
    REQUIRE(store_faulty_add(st, &rule) == 0);
}

/* Every object is old: grace -10 puts "before" in the future. */
#define ALL_OLD (-10.0)

static void test_clean_sweep(void)
{
    struct rig r;
    struct sweep_stats st;
    rig_open(&r, VLIST_KEPT);
    CHECK_INT(sweep_pool(r.st, DOMAIN, 3600, NULL, &st), 0); /* all young: nothing goes */
    CHECK_INT(orphans_left(&r), 2);
    CHECK_INT(st.young, 2);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0);
    CHECK(named_all_there(&r));
    CHECK_INT(orphans_left(&r), 0);
    CHECK_INT(st.marked, 2);
    CHECK_INT(st.deleted, 2);
    CHECK_INT(sweep_pool(r.st, "/home/u/none.h5", ALL_OLD, NULL, &st), -ENOENT);
    rig_close(&r);
}

/* A failure anywhere before the deletes: -EIO and nothing deleted at all. */
static void expect_nothing_deleted(const char *what, unsigned ops, int which, int nth,
                                   enum faulty_mode mode)
{
    struct rig r;
    struct sweep_stats st;
    char pattern[STORE_KEY_MAX + 8];
    rig_open(&r, VLIST_KEPT);
    if (which == 0)
        snprintf(pattern, sizeof pattern, "db/%.17s/*", r.vroot + 2); /* the version's root */
    else if (which == 1)
        snprintf(pattern, sizeof pattern, "%s", r.table_chunk);
    else if (which == 2)
        snprintf(pattern, sizeof pattern, "db/%.17s/c/*", r.pool + 2); /* the pool */
    else
        snprintf(pattern, sizeof pattern, "%s", r.list_key);
    add_rule(r.st, ops, pattern, (uint64_t)nth, 1, mode);
    int rc = sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st);
    if (rc != -EIO || !named_all_there(&r) || orphans_left(&r) != 2)
        fprintf(stderr, "case %s: rc %d, orphans left %d\n", what, rc, orphans_left(&r));
    CHECK_INT(rc, -EIO);
    CHECK(named_all_there(&r));
    CHECK_INT(orphans_left(&r), 2);
    store_faulty_clear(r.st);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0); /* the next sweep does it */
    CHECK(named_all_there(&r));
    CHECK_INT(orphans_left(&r), 0);
    rig_close(&r);
}

static void test_failed_mark_deletes_nothing(void)
{
    expect_nothing_deleted("root listing", FAULTY_MASK(FAULTY_LIST), 0, 1, FAULTY_FAIL);
    expect_nothing_deleted("table get", FAULTY_MASK(FAULTY_GET), 1, 1, FAULTY_FAIL);
    expect_nothing_deleted("table garbled", FAULTY_MASK(FAULTY_GET), 1, 1, FAULTY_GARBLE);
    expect_nothing_deleted("table empty", FAULTY_MASK(FAULTY_GET), 1, 1, FAULTY_TRUNCATE);
    truncate_to = ENTRY + 20; /* a's entry whole, b's cut */
    expect_nothing_deleted("table cut", FAULTY_MASK(FAULTY_GET), 1, 1, FAULTY_TRUNCATE);
    truncate_to = 0;
    fault_err = -ENOENT; /* listed, then gone: a kept version's table is never "nothing" */
    expect_nothing_deleted("table vanished", FAULTY_MASK(FAULTY_GET), 1, 1, FAULTY_FAIL);
    fault_err = -EIO;
    expect_nothing_deleted("pool listing", FAULTY_MASK(FAULTY_LIST), 2, 1, FAULTY_FAIL);
    expect_nothing_deleted("list read again", FAULTY_MASK(FAULTY_GET), 3, 2, FAULTY_FAIL);
    expect_nothing_deleted("head before delete", FAULTY_MASK(FAULTY_HEAD), 2, 1, FAULTY_FAIL);
}

/* A delete fails (or its reply is lost): the sweep stops there; the named objects stay. */
static void test_failed_delete_stops_the_sweep(void)
{
    for (int mode = 0; mode < 2; mode++) {
        struct rig r;
        struct sweep_stats st;
        char pattern[64];
        rig_open(&r, VLIST_KEPT);
        snprintf(pattern, sizeof pattern, "db/%.17s/c/*", r.pool + 2);
        add_rule(r.st, FAULTY_MASK(FAULTY_DELETE), pattern, 1, 1,
                 mode ? FAULTY_AFTER : FAULTY_FAIL);
        CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), -EIO);
        CHECK(named_all_there(&r));
        CHECK_INT(orphans_left(&r), mode ? 1 : 2); /* the lost reply's delete took effect */
        CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0);
        CHECK(named_all_there(&r));
        CHECK_INT(orphans_left(&r), 0);
        rig_close(&r);
    }
}

/* What cannot be told from the list stops the sweep before it deletes anything. */
static void test_unknowable_lists_delete_nothing(void)
{
    struct rig r;
    struct sweep_stats st;
    char prefix[64];
    rig_open(&r, VLIST_KEPT);
    put_list(&r, VLIST_KEPT, "{\"n\": 5, \"root\": 12}"); /* malformed: names who knows what */
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), -EIO);
    CHECK_INT(orphans_left(&r), 2);
    put_list(&r, VLIST_KEPT, NULL);
    snprintf(prefix, sizeof prefix, "db/%.17s/", r.vroot + 2);
    struct store_list all = { 0 };
    REQUIRE(store_list(r.mem, prefix, NULL, NULL, 0, &all) == 0);
    for (size_t i = 0; i < all.n_objects; i++) /* a kept version whose root is missing */
        REQUIRE(store_delete(r.mem, all.objects[i].key) == 0);
    store_list_free(&all);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), -EIO);
    CHECK_INT(orphans_left(&r), 2);
    CHECK(named_all_there(&r));
    rig_close(&r);
}

static int owed_calls;
static int count_owed(void *ctx, const char *pool, const char *domain)
{
    (void)ctx;
    (void)pool;
    owed_calls += strcmp(domain, DOMAIN) == 0;
    return 0;
}

/* A removing entry: its name object goes; the entry stays while its root lists objects (and
 * while the root cannot be listed), then is dropped, the sweep recorded as owed first; the
 * removing entry's tables are still marked while its root is there. */
static void test_finish_removals(void)
{
    struct rig r;
    struct sweep_finish f;
    struct sweep_stats st;
    char key[STORE_KEY_MAX + 1], path[STORE_KEY_MAX + 2], prefix[64], text[128];
    rig_open(&r, VLIST_REMOVING);
    REQUIRE(schema_version_domain_path(DOMAIN, "1.h5", path, sizeof path) == 0);
    REQUIRE(schema_domain_key(path, key, sizeof key) == 0);
    snprintf(text, sizeof text, "{\"root\": \"%s\"}", r.vroot);
    put_text(r.mem, key, text);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0);
    CHECK(named_all_there(&r)); /* a removing version's root is still read: marked */
    CHECK_INT(sweep_finish_removals(r.st, NULL, DOMAIN, count_owed, NULL, &f), 0);
    CHECK_INT(f.waiting, 1);
    CHECK_INT(f.dropped, 0);
    CHECK_INT(store_head(r.mem, key, &(struct store_stat){ 0 }), -ENOENT);
    snprintf(prefix, sizeof prefix, "db/%.17s/", r.vroot + 2);
    struct store_list all = { 0 };
    REQUIRE(store_list(r.mem, prefix, NULL, NULL, 0, &all) == 0);
    for (size_t i = 0; i < all.n_objects; i++) /* what the collector does */
        REQUIRE(store_delete(r.mem, all.objects[i].key) == 0);
    store_list_free(&all);
    char pattern[80];
    snprintf(pattern, sizeof pattern, "%s*", prefix);
    add_rule(r.st, FAULTY_MASK(FAULTY_LIST), pattern, 1, 1, FAULTY_FAIL);
    CHECK(sweep_finish_removals(r.st, NULL, DOMAIN, count_owed, NULL, &f) < 0);
    CHECK_INT(f.dropped, 0);
    CHECK_INT(owed_calls, 0);
    CHECK_INT(sweep_finish_removals(r.st, NULL, DOMAIN, count_owed, NULL, &f), 0);
    CHECK_INT(f.dropped, 1);
    CHECK_INT(owed_calls, 1);
    struct store_buf buf = { 0 };
    struct vlist l;
    char why[200];
    REQUIRE(store_get(r.mem, r.list_key, 1 << 20, &buf) == 0);
    REQUIRE(vlist_parse((const char *)buf.data, buf.len, &l, why, sizeof why) == 0);
    CHECK_INT(l.n_entries, 0);
    vlist_free(&l);
    store_buf_free(&buf);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0);
    CHECK_INT(orphans_left(&r), 0);
    CHECK_INT(pool_has(&r, named_md5[0]) + pool_has(&r, named_md5[1]), 0);
    rig_close(&r);
}

/* A list may name a pool or a root that is not its domain's (a forged list: vpool.h).
 * Nothing of them is deleted: not by a sweep, not by a removal. */
static void test_what_is_not_the_domains_is_never_deleted(void)
{
    struct rig r;
    struct sweep_finish f;
    struct sweep_stats st;
    char key[STORE_KEY_MAX + 1], text[256];
    rig_open(&r, VLIST_REMOVING);
    CHECK_INT(vpool_may_keep(r.st, r.pool, DOMAIN), 1);
    REQUIRE(vpool_claim(r.mem, r.pool, "/home/u/other.h5", NULL) == 0); /* the pool: another's */
    CHECK_INT(vpool_may_keep(r.st, r.pool, DOMAIN), -EPERM);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), -EPERM);
    CHECK_INT(orphans_left(&r), 2);
    CHECK_INT(sweep_finish_removals(r.st, NULL, DOMAIN, count_owed, NULL, &f), 0);
    CHECK_INT(f.dropped, 1); /* the entry goes; its root stays */
    REQUIRE(schema_obj_key(r.vroot, key, sizeof key) == 0);
    CHECK_INT(store_head(r.mem, key, &(struct store_stat){ 0 }), 0);
    rig_close(&r);

    rig_open(&r, VLIST_REMOVING); /* the pool is the domain's, the root another pool's */
    REQUIRE(schema_obj_key(r.vroot, key, sizeof key) == 0);
    snprintf(text, sizeof text, "{\"id\": \"root\", \"h5osfs\": {\"pool\": \"%s\"}}", r.vroot);
    put_text(r.mem, key, text);
    CHECK_INT(vpool_root_of(r.st, r.vroot, r.pool, DOMAIN), 0);
    put_text(r.mem, key, "{\"id\": \"root\"}"); /* a plain root (a domain's current) */
    CHECK_INT(vpool_root_of(r.st, r.vroot, r.pool, DOMAIN), 0);
    CHECK_INT(sweep_finish_removals(r.st, NULL, DOMAIN, count_owed, NULL, &f), 0);
    CHECK_INT(f.dropped, 1);
    CHECK_INT(store_head(r.mem, key, &(struct store_stat){ 0 }), 0);
    CHECK_INT(store_delete(r.mem, key), 0); /* objects, no root group: a pool, say */
    CHECK_INT(vpool_root_of(r.st, r.vroot, r.pool, DOMAIN), -ENOENT);
    put_list(&r, VLIST_REMOVING, NULL);
    CHECK_INT(sweep_finish_removals(r.st, NULL, DOMAIN, count_owed, NULL, &f), 0);
    CHECK_INT(f.dropped, 1); /* not queued: nothing shows whose those objects are */
    CHECK_INT(store_head(r.mem, r.table_chunk, &(struct store_stat){ 0 }), 0);
    CHECK_INT(vpool_owned_by(r.st, r.pool, DOMAIN), 1);
    CHECK_INT(vpool_owned_by(r.st, r.pool, "/home/u/other.h5"), 0);
    char marker[64];
    REQUIRE(schema_pool_marker_key(r.pool, marker, sizeof marker) == 0);
    CHECK_INT(store_delete(r.mem, marker), 0); /* a pool made before markers */
    CHECK_INT(vpool_may_keep(r.st, r.pool, DOMAIN), 0);
    CHECK_INT(vpool_owned_by(r.st, r.pool, DOMAIN), 0);
    add_rule(r.st, FAULTY_MASK(FAULTY_GET), "*.h5osfs-pool", 1, 1, FAULTY_FAIL);
    CHECK(vpool_owned_by(r.st, r.pool, DOMAIN) < 0); /* the store cannot tell: no answer */
    rig_close(&r);
}

/* An mv hands a pool on in steps (vmove.h): while the marker names both domains, the old
 * one still reads and commits but only the new one deletes; the end settles it, or an undo
 * gives it back. A stale "moving_from" (a move never finished) hands nothing on again: a
 * forged list at the old name cannot take the pool to a third domain. */
static void test_a_pool_being_moved(void)
{
    struct rig r;
    struct sweep_stats st;
    const char *to = "/home/u/moved.h5", *third = "/home/u/third.h5";
    rig_open(&r, VLIST_REMOVING);
    CHECK_INT(vpool_hand_on(r.st, r.pool, "/home/u/other.h5", to), 0); /* not other's */
    CHECK_INT(vpool_owned_by(r.st, r.pool, DOMAIN), 1);
    CHECK_INT(vpool_hand_on(r.st, r.pool, DOMAIN, to), 1);
    CHECK_INT(vpool_may_keep(r.st, r.pool, DOMAIN), 1);
    CHECK_INT(vpool_may_keep(r.st, r.pool, to), 1);
    CHECK_INT(vpool_owned_by(r.st, r.pool, DOMAIN), 0);
    CHECK_INT(vpool_owned_by(r.st, r.pool, to), 1);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), -EPERM);
    CHECK_INT(orphans_left(&r), 2);
    CHECK_INT(vpool_hand_on(r.st, r.pool, DOMAIN, third), 0); /* moving: not DOMAIN's to give */
    CHECK_INT(vpool_owned_by(r.st, r.pool, to), 1);
    CHECK_INT(vpool_hand_on(r.st, r.pool, DOMAIN, to), 0); /* the same move tried again */
    CHECK_INT(vpool_move_done(r.st, r.pool, third), 0);    /* not its move: nothing */
    CHECK_INT(vpool_move_undone(r.st, r.pool, third, DOMAIN), 0);
    CHECK_INT(vpool_owned_by(r.st, r.pool, to), 1);
    CHECK_INT(vpool_may_keep(r.st, r.pool, DOMAIN), 1);
    CHECK_INT(vpool_move_undone(r.st, r.pool, to, DOMAIN), 0);
    CHECK_INT(vpool_owned_by(r.st, r.pool, DOMAIN), 1);
    CHECK_INT(vpool_may_keep(r.st, r.pool, to), -EPERM);
    CHECK_INT(vpool_hand_on(r.st, r.pool, DOMAIN, to), 1);
    CHECK_INT(vpool_move_done(r.st, r.pool, to), 0);
    CHECK_INT(vpool_may_keep(r.st, r.pool, DOMAIN), -EPERM);
    CHECK_INT(vpool_move_undone(r.st, r.pool, to, DOMAIN), 0); /* done: not undone any more */
    CHECK_INT(vpool_owned_by(r.st, r.pool, to), 1);
    rig_close(&r);
}

/* V also holds a dataset linked into a file (ingest=link) through a table of offsets, its
 * layout's extra members given: such a table names no pool object. */
static void put_linked_dataset(struct rig *r, const char *file_uri, const char *extra)
{
    char key[STORE_KEY_MAX + 1], did[SCHEMA_ID_BUF], tid[SCHEMA_ID_BUF], text[1024];
    uint64_t zero = 0;
    make_id('d', 31, r->vroot, did);
    make_id('d', 32, r->vroot, tid);
    REQUIRE(schema_obj_key(did, key, sizeof key) == 0);
    snprintf(text, sizeof text,
             "{\"creationProperties\": {\"layout\": {\"class\": \"H5D_CHUNKED_REF_INDIRECT\", "
             "\"file_uri\": \"%s\", \"chunk_table\": \"%s\"%s}}}",
             file_uri, tid, extra);
    put_text(r->mem, key, text);
    REQUIRE(schema_obj_key(tid, key, sizeof key) == 0);
    put_text(r->mem, key, "{\"creationProperties\": {}}");
    unsigned char entries[2 * 12] = { 0 }; /* offset I64, size I32: no URI */
    entries[8] = entries[20] = 16;
    REQUIRE(schema_chunk_key(tid, &zero, 1, -1, key, sizeof key) == 0);
    REQUIRE(store_put(r->mem, key, entries, sizeof entries) == 0);
}

/* A kept version's linked table is passed (its file goes with its root); one that claims the
 * pool too, or names a file not the version's own, is none this code writes: nothing deleted. */
static void test_linked_tables(void)
{
    struct rig r;
    struct sweep_stats st;
    char own[STORE_KEY_MAX + 1], uri[STORE_KEY_MAX + 16], pool_claim[128];
    rig_open(&r, VLIST_KEPT);
    REQUIRE(schema_linked_file_key(r.vroot, own, sizeof own) == 0);
    snprintf(uri, sizeof uri, "hsdstest/%s", own);
    put_linked_dataset(&r, uri, "");
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0);
    CHECK(named_all_there(&r));
    CHECK_INT(orphans_left(&r), 0);
    rig_close(&r);

    snprintf(pool_claim, sizeof pool_claim, ", \"h5osfs\": {\"pool\": \"%s\"}", r.pool);
    const char *const uris[] = { uri, "hsdstest/data/elsewhere.h5" };
    const char *const extras[] = { pool_claim, "" };
    for (int i = 0; i < 2; i++) {
        rig_open(&r, VLIST_KEPT);
        snprintf(pool_claim, sizeof pool_claim, ", \"h5osfs\": {\"pool\": \"%s\"}", r.pool);
        REQUIRE(schema_linked_file_key(r.vroot, own, sizeof own) == 0);
        snprintf(uri, sizeof uri, "hsdstest/%s", own);
        put_linked_dataset(&r, uris[i], extras[i]);
        CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), -EIO);
        CHECK(named_all_there(&r));
        CHECK_INT(orphans_left(&r), 2);
        rig_close(&r);
    }
}

/* Pool files (db/P/f/<name>, linked files kept once for every version with their bytes): the
 * one a kept version's linked layout names stays, in any form of its URI, whatever the
 * layout's class; an unnamed one goes; one of another pool named by a table is no pool file
 * of this pool: nothing deleted. */
static void test_pool_files(void)
{
    static const char *const forms[] = { "hsdstest/", "s3://hsdstest/", "file://hsdstest/" };
    static const char *const named = "0123456789abcdef0123456789abcdef";
    static const char *const unnamed = "fedcba9876543210fedcba9876543210";
    struct rig r;
    struct sweep_stats st;
    char fkey[STORE_KEY_MAX + 1], gone[STORE_KEY_MAX + 1], uri[STORE_KEY_MAX + 16];
    struct store_stat ss;
    for (int i = 0; i < 3; i++) {
        rig_open(&r, VLIST_KEPT);
        REQUIRE(schema_pool_file_key(r.pool, named, fkey, sizeof fkey) == 0);
        REQUIRE(schema_pool_file_key(r.pool, unnamed, gone, sizeof gone) == 0);
        put_text(r.mem, fkey, "file");
        put_text(r.mem, gone, "file");
        snprintf(uri, sizeof uri, "%s%s", forms[i], fkey);
        put_linked_dataset(&r, uri, "");
        CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0);
        CHECK_INT(store_head(r.mem, fkey, &ss), 0);
        CHECK_INT(store_head(r.mem, gone, &ss), -ENOENT);
        CHECK(named_all_there(&r));
        CHECK_INT(orphans_left(&r), 0);
        rig_close(&r);
    }
    /* a contiguous layout naming it marks it too */
    rig_open(&r, VLIST_KEPT);
    REQUIRE(schema_pool_file_key(r.pool, named, fkey, sizeof fkey) == 0);
    put_text(r.mem, fkey, "file");
    char did[SCHEMA_ID_BUF], key[STORE_KEY_MAX + 1], text[2048];
    make_id('d', 33, r.vroot, did);
    REQUIRE(schema_obj_key(did, key, sizeof key) == 0);
    snprintf(text, sizeof text,
             "{\"creationProperties\": {\"layout\": {\"class\": \"H5D_CONTIGUOUS_REF\", "
             "\"file_uri\": \"hsdstest/%s\", \"offset\": 0, \"size\": 4}}}",
             fkey);
    put_text(r.mem, key, text);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0);
    CHECK_INT(store_head(r.mem, fkey, &ss), 0);
    rig_close(&r);
    /* another pool's file under a table: not this pool's, cannot be told: nothing deleted */
    rig_open(&r, VLIST_KEPT);
    char other[SCHEMA_ID_BUF];
    make_id('g', 13, NULL, other);
    REQUIRE(schema_pool_file_key(other, named, fkey, sizeof fkey) == 0);
    snprintf(uri, sizeof uri, "hsdstest/%s", fkey);
    put_linked_dataset(&r, uri, "");
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), -EIO);
    CHECK_INT(orphans_left(&r), 2);
    rig_close(&r);
}

/* Set the mtime of key in the local bucket at dir back by an hour (its ctime becomes now). */
static void set_mtime_back(const char *dir, const char *key)
{
    char path[4096];
    struct timespec t[2];
    REQUIRE(clock_gettime(CLOCK_REALTIME, &t[0]) == 0);
    t[0].tv_sec -= 3600;
    t[1] = t[0];
    snprintf(path, sizeof path, "%s/%s", dir, key);
    REQUIRE(utimensat(AT_FDCWD, path, t, 0) == 0);
}

/* A local bucket's copy into the pool is a hard link: the new pool object keeps its source's
 * mtime, however old, and only its ctime says it was just made. The sweep counts an object's
 * age from the later of the two, so an unnamed object a commit in flight just linked in (its
 * version not listed yet) is young, not deleted; with every object old it goes. */
static void test_a_fresh_hard_link_is_young(void)
{
    char dir[] = "/tmp/test_sweep_XXXXXX", key[STORE_KEY_MAX + 1];
    struct store *posix;
    struct rig r;
    struct sweep_stats st;
    REQUIRE(mkdtemp(dir) != NULL);
    REQUIRE(store_posix_open(dir, &posix) == 0);
    rig_open_on(&r, VLIST_KEPT, posix);
    for (int i = 0; i < 2; i++) {
        pool_key(&r, orphan_md5[i], key, sizeof key);
        set_mtime_back(dir, key);
    }
    CHECK_INT(sweep_pool(r.st, DOMAIN, 600.0, NULL, &st), 0);
    CHECK_INT(orphans_left(&r), 2);
    CHECK_INT(st.young, 2);
    CHECK_INT(sweep_pool(r.st, DOMAIN, ALL_OLD, NULL, &st), 0);
    CHECK_INT(orphans_left(&r), 0);
    CHECK(named_all_there(&r));
    rig_close(&r);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
}

int main(void)
{
    if (log_setup(LOG_LVL_ERROR, LOG_SINK_FILE, "/dev/null") != 0)
        return 2;
    test_clean_sweep();
    test_failed_mark_deletes_nothing();
    test_failed_delete_stops_the_sweep();
    test_unknowable_lists_delete_nothing();
    test_finish_removals();
    test_what_is_not_the_domains_is_never_deleted();
    test_a_pool_being_moved();
    test_linked_tables();
    test_pool_files();
    test_a_fresh_hard_link_is_young();
    log_teardown();
    return check_done("sweep");
}
