/* sweep: collection of kept versions; see include/h5osfs/domops/sweep.h. */
#include "h5osfs/domops/sweep.h"
#include "h5osfs/domops/vpool.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/domops/gc.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/domops/vtable.h"
#include "h5osfs/util/testhook.h"

#define LIST_TRIES 16
#define ETAG_BUF sizeof(((struct store_stat *)0)->etag)
#define JSON_MAX (64u << 20)   /* a dataset's JSON */
#define TABLE_MAX (512u << 20) /* one chunk-table chunk (vtab.c: 2^20 entries of 140) */
#define MTIME_SLACK 1.0        /* S3's LastModified has whole seconds */
#define HINT_EVERY 60.0        /* a reader's hint starts a finish at most this often */

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* domain's list and its etag: 0, -ENOENT (no list), -EIO (logged), -ENOMEM. */
static int load_list(struct store *store, const char *key, struct vlist *l, char etag[ETAG_BUF])
{
    char why[200];
    int rc = ns_vlist_read(store, key, l, etag, why, sizeof why);
    if (rc == -EINVAL)
        log_error("%s: version list unusable (%s): no version is collected", key, why);
    return rc == 0 || rc == -ENOENT || rc == -ENOMEM ? rc : -EIO;
}

/* db/<A-B of root>/: every object of the root (spec §2.1). */
static void root_prefix(const char *root, char *buf, size_t len)
{
    snprintf(buf, len, "db/%.17s/", root + 2);
}

/* ---- finishing removals (§4.4 steps 2-4) ---- */

/* Does the HSDS domain object at key name root? 1, 0 (gone, or another root), -errno. */
static int object_names(struct store *store, const char *key, const char *root)
{
    struct store_buf buf = { 0 };
    char why[200];
    int rc = store_get(store, key, JSON_MAX, &buf);
    if (rc == -ENOENT)
        return 0;
    if (rc != 0)
        return rc;
    json_t *doc = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    const char *named = doc ? hjson_text(json_object_get(doc, "root")) : NULL;
    rc = named && strcmp(named, root) == 0;
    json_decref(doc);
    return rc;
}

static int is_listed_name(const struct vlist *l, const char *name)
{
    for (size_t i = 0; i < l->n_entries; i++)
        for (size_t k = 0; k < l->entries[i].n_names; k++)
            if (strcmp(l->entries[i].names[k], name) == 0)
                return 1;
    return 0;
}

/* The domain objects DIR/.versions/NAME/<x>/.domain.json that name e's root and that no list
 * entry calls <x> any more ("<n>.h5" and tags a killed daemon left): deleted, so that HSDS no
 * longer lists a version whose root is going. 0 or -errno (logged). */
static int delete_name_objects(struct store *store, const char *list_key, const struct vlist *l,
                               const struct vlist_entry *e)
{
    char dir[STORE_KEY_MAX + 1], key[STORE_KEY_MAX + 1];
    struct store_list page = { 0 };
    snprintf(dir, sizeof dir, "%s", list_key);
    *(strrchr(dir, '/') + 1) = '\0';
    int rc = store_list(store, dir, "/", NULL, 0, &page);
    for (size_t i = 0; rc == 0 && i < page.n_prefixes; i++) {
        const char *name = page.prefixes[i] + strlen(dir);
        size_t len = strlen(name);
        if (len < 2 ||
            snprintf(key, sizeof key, "%s.domain.json", page.prefixes[i]) >= (int)sizeof key)
            continue;
        char plain[VLIST_NAME_MAX + 1];
        snprintf(plain, sizeof plain, "%.*s", (int)(len - 1), name);
        if (is_listed_name(l, plain))
            continue;
        int named = object_names(store, key, e->root);
        if (named == 1)
            named = store_delete(store, key);
        if (named < 0 && named != -ENOENT)
            rc = named;
    }
    store_list_free(&page);
    if (rc != 0)
        log_error("%s: the HSDS names of removed version %" PRIu64 " cannot all be deleted (%s): "
                  "its root stays until they are",
                  list_key, e->n, strerror(-rc));
    return rc;
}

/* Drop entries numbered in drop (still removing) from the list, re-applied on a lost race. */
static int drop_entries(struct store *store, const char *key, const uint64_t *drop, size_t n)
{
    char etag[ETAG_BUF];
    int rc = -ESTALE;
    for (int tries = 0; rc == -ESTALE && tries < LIST_TRIES; tries++) {
        struct vlist l;
        char *text = NULL;
        if ((rc = load_list(store, key, &l, etag)) != 0)
            return rc;
        for (size_t i = 0; i < n; i++) {
            const struct vlist_entry *e = vlist_entry_of(&l, drop[i]);
            if (e && !e->error && e->state == VLIST_REMOVING)
                vlist_drop(&l, drop[i]);
        }
        rc = vlist_dump(&l, &text);
        if (rc == 0)
            rc = store_put_if(store, key, text, strlen(text), etag);
        free(text);
        vlist_free(&l);
    }
    return rc == -ESTALE ? -EIO : rc;
}

/* One removing entry: names deleted, then its root queued or, once gone, marked for drop. A
 * root not shown to be a version over the domain's own pool (owned: the pool's marker names
 * the domain, vpool.h) is never queued: the entry goes, the root stays (logged). */
static int finish_entry(struct store *store, struct gc *gc, const char *domain, const char *key,
                        const struct vlist *l, const struct vlist_entry *e, int owned, int *gone)
{
    char name[32], path[STORE_KEY_MAX + 2];
    *gone = 0;
    int rc = delete_name_objects(store, key, l, e);
    if (rc != 0)
        return rc;
    rc = vpool_root_is_gone(store, e->root);
    if (rc < 0) {
        log_error("%s: cannot list the root %s of removed version %" PRIu64 ": %s", domain, e->root,
                  e->n, strerror(-rc));
        return rc;
    }
    if (rc == 1) {
        *gone = 1;
        return 0;
    }
    rc = owned ? vpool_root_of(store, e->root, l->pool, domain) : 0;
    if (rc == -ENOENT && vpool_root_is_gone(store, e->root) == 1) {
        *gone = 1; /* deleted since the look above (rm -r; the group goes last) */
        return 0;
    }
    if (rc == -ENOENT) { /* objects but no root group: nothing shows whose they are */
        log_error("%s: %s, named by removed version %" PRIu64 ", holds objects but no root "
                  "group: not collected",
                  domain, e->root, e->n);
        rc = 0;
    }
    if (rc < 0)
        return rc;
    if (rc == 0) {
        log_warn("%s: removed version %" PRIu64 " is dropped from the list, its root %s stays in "
                 "the bucket",
                 domain, e->n, e->root);
        *gone = 1;
        return 0;
    }
    snprintf(name, sizeof name, "%" PRIu64 ".h5", e->n);
    rc = schema_version_domain_path(domain, name, path, sizeof path);
    if (rc == 0 && gc)
        rc = gc_add(gc, e->root, path, "");
    if (rc != 0)
        log_error("%s: root %s of removed version %" PRIu64 " cannot be queued for collection "
                  "(%s)",
                  domain, e->root, e->n, strerror(-rc));
    return rc;
}

int sweep_finish_removals(struct store *store, struct gc *gc, const char *domain,
                          sweep_owed_fn owed, void *owed_ctx, struct sweep_finish *out)
{
    char key[STORE_KEY_MAX + 1];
    struct vlist l;
    memset(out, 0, sizeof *out);
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return -EINVAL;
    int rc = load_list(store, key, &l, NULL);
    if (rc == -ENOENT)
        return 0;
    if (rc != 0)
        return rc;
    snprintf(out->pool, sizeof out->pool, "%s", l.pool);
    uint64_t *drop = calloc(l.n_entries + 1, sizeof *drop);
    size_t n_drop = 0;
    int failed = drop ? 0 : -ENOMEM, owned = -1; /* -1: not asked yet */
    for (size_t i = 0; drop && i < l.n_entries; i++) {
        const struct vlist_entry *e = &l.entries[i];
        int gone;
        if (e->error || e->state != VLIST_REMOVING)
            continue;
        if (owned < 0 && (owned = vpool_owned_by(store, l.pool, domain)) < 0) {
            failed = owned;
            break;
        }
        int erc = finish_entry(store, gc, domain, key, &l, e, owned, &gone);
        if (erc == 0 && gone)
            drop[n_drop++] = e->n;
        else
            out->waiting++;
        if (erc != 0)
            failed = erc;
    }
    vlist_free(&l);
    if (n_drop > 0 && owed)
        rc = owed(owed_ctx, out->pool, domain);
    if (n_drop > 0 && rc == 0) {
        testhook_crash_at("collected");
        rc = drop_entries(store, key, drop, n_drop);
        if (rc == -ENOENT) /* the version folder was removed meanwhile: nothing to drop */
            rc = 0;
        else if (rc == 0) {
            out->dropped = n_drop;
            log_info("%s: %zu removed version(s) collected (their roots are gone)", domain, n_drop);
        } else
            log_error("%s: removed versions whose roots are gone stay listed as removing (%s): "
                      "dropped later",
                      domain, strerror(-rc));
    }
    free(drop);
    return rc != 0 ? rc : failed;
}

/* ---- the mark ---- */

struct marks {
    struct strmap *md5s;  /* pool object name (32 hex) -> (void *)1 */
    struct strmap *files; /* pool file name (32 hex) -> (void *)1 */
    char needle[48];      /* "db/<A-B of pool>/c/" */
    size_t needle_len;
    char file_needle[48]; /* "db/<A-B of pool>/f/" */
};

static int is_md5(const unsigned char *p, size_t left)
{
    if (left < 32)
        return 0;
    for (int i = 0; i < 32; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return left == 32 || !((p[32] >= '0' && p[32] <= '9') || (p[32] >= 'a' && p[32] <= 'f'));
}

/* Mark every pool URI in a table chunk's bytes (table entries are fixed-length ASCII: found by
 * their text). Every entry, absent ones too (".../c/0"), names the pool: a chunk in which the
 * pool's prefix never occurs (empty, not a table) is not a table this code can read: -EIO. */
static int mark_table_bytes(struct marks *m, const unsigned char *data, size_t len)
{
    size_t seen = 0;
    const unsigned char *end = data + len;
    for (const unsigned char *p = data;
         (p = memmem(p, (size_t)(end - p), m->needle, m->needle_len)) != NULL;) {
        p += m->needle_len;
        seen++;
        if (!is_md5(p, (size_t)(end - p)))
            continue;
        char md5[33];
        memcpy(md5, p, 32);
        md5[32] = '\0';
        if (!strmap_get(m->md5s, md5) && strmap_put(m->md5s, md5, (void *)1, NULL) != 0)
            return -ENOMEM;
        p += 32;
    }
    return seen > 0 ? 0 : -EIO;
}

/* Does uri name root's own linked file (bucket/db/A-B/.h5osfs-file, in any of its forms)? The
 * sweep has no bucket name to check; what it decides by this is only to read no table. */
static int own_file_uri(const char *uri, const char *root)
{
    char own[64];
    size_t len = uri ? strlen(uri) : 0, own_len;
    if (!uri || schema_linked_file_key(root, own, sizeof own) != 0)
        return 0;
    own_len = strlen(own);
    return len > own_len && uri[len - own_len - 1] == '/' && strcmp(uri + len - own_len, own) == 0;
}

/* The name of the pool file uri names (bucket/db/<A-B of pool>/f/<name>, in any of its forms),
 * or NULL. */
static const char *pool_file_uri(const char *uri, const struct marks *m)
{
    size_t len = uri ? strlen(uri) : 0, tail = strlen(m->file_needle) + 32;
    if (len <= tail || uri[len - tail - 1] != '/' ||
        strncmp(uri + len - tail, m->file_needle, tail - 32) != 0)
        return NULL;
    return schema_pool_file_name(uri + len - tail);
}

/* A linked layout's file: the version's own (goes with its root) or a pool file of this pool
 * (marked). 0, or -EIO for any other (none a version of this code writes). */
static int mark_file(struct marks *m, const char *file, const char *root)
{
    const char *name = pool_file_uri(file, m);
    if (own_file_uri(file, root))
        return 0;
    if (!name)
        return -EIO;
    return strmap_get(m->files, name) || strmap_put(m->files, name, (void *)1, NULL) == 0 ? 0
                                                                                          : -ENOMEM;
}

/* The chunk table id of a dataset's JSON at key, if it names pool objects ("": none), and the
 * pool file its linked layout names, marked. The table of a dataset linked into a file holds
 * offsets into that file, which goes with the version's root or is a pool file: no pool
 * object. Any other table with a file_uri (a pool claim beside it, another file) is none a
 * version of this code writes: -EIO, so that nothing is deleted on a table that cannot be
 * told. A contiguous or mapped layout naming another file names nothing of the pool. */
static int table_of(struct store *store, struct marks *m, const char *key, const char *root,
                    char tid[SCHEMA_ID_BUF])
{
    struct store_buf buf = { 0 };
    char why[200];
    tid[0] = '\0';
    int rc = store_get(store, key, JSON_MAX, &buf);
    if (rc != 0)
        return rc;
    json_t *doc = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    if (!doc)
        return -EIO;
    const json_t *lay = json_object_get(json_object_get(doc, "creationProperties"), "layout");
    const char *cls = hjson_text(json_object_get(lay, "class"));
    const char *table = hjson_text(json_object_get(lay, "chunk_table"));
    const char *file = hjson_text(json_object_get(lay, "file_uri"));
    int linked = file && !json_object_get(lay, "h5osfs");
    if (cls && strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0 && file)
        rc = linked ? mark_file(m, file, root) : -EIO;
    else if (cls && strstr(cls, "_REF") && file && pool_file_uri(file, m))
        rc = mark_file(m, file, root); /* whatever else the layout has: marking more is safe */
    else if (cls && strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0)
        rc = table && strlen(table) < SCHEMA_ID_BUF ? (snprintf(tid, SCHEMA_ID_BUF, "%s", table), 0)
                                                    : -EIO;
    json_decref(doc);
    return rc;
}

/* Mark the chunks of table tid, whose objects are among keys. */
static int mark_table(struct store *store, struct marks *m, const struct store_keys *keys,
                      const char *tid)
{
    char json_key[STORE_KEY_MAX + 1];
    int rc = schema_obj_key(tid, json_key, sizeof json_key);
    if (rc != 0)
        return -EIO;
    size_t dir_len = strlen(json_key) - strlen(".dataset.json");
    for (size_t i = 0; rc == 0 && i < keys->n; i++) {
        const char *k = keys->keys[i];
        if (strncmp(k, json_key, dir_len) != 0 || ends_with(k, ".json"))
            continue;
        struct store_buf buf = { 0 };
        struct store_stat st;
        rc = store_get(store, k, TABLE_MAX, &buf);
        if (rc == 0)
            rc = store_head(store, k, &st);
        if (rc == 0 && st.size != buf.len)
            rc = -EIO; /* cut short: the entries past the cut would go unmarked */
        unsigned char *entries = NULL;
        size_t len = 0;
        if (rc == 0) /* a zlib stream (tiled tables) or raw entries (one chunk, before) */
            rc = vtable_tile_decode(buf.data, buf.len, TABLE_MAX, &entries, &len);
        if (rc == 0)
            rc = mark_table_bytes(m, entries, len);
        free(entries);
        store_buf_free(&buf);
        if (rc != 0 && rc != -ENOENT)
            log_error("pool sweep: chunk table object %s cannot be read (%s): nothing is "
                      "deleted",
                      k, strerror(-rc));
    }
    return rc;
}

/* Mark what version e's root names. A kept version whose root lists empty: -EIO (what it
 * needs cannot be told); a removing one: nothing (its root is gone or going). */
static int mark_version(struct store *store, struct marks *m, const struct vlist_entry *e)
{
    char prefix[64], tid[SCHEMA_ID_BUF];
    struct store_keys keys = { 0 };
    root_prefix(e->root, prefix, sizeof prefix);
    int rc = store_collect_keys(store, prefix, &keys);
    if (rc == 0 && keys.n == 0 && e->state == VLIST_KEPT) {
        log_error("pool sweep: kept version %" PRIu64 " names root %s, which lists empty: "
                  "nothing is deleted",
                  e->n, e->root);
        rc = -EIO;
    }
    for (size_t i = 0; rc == 0 && i < keys.n; i++) {
        if (!ends_with(keys.keys[i], "/.dataset.json"))
            continue;
        rc = table_of(store, m, keys.keys[i], e->root, tid);
        if (rc == 0 && tid[0])
            rc = mark_table(store, m, &keys, tid);
        else if (rc != 0 && rc != -ENOENT)
            log_error("pool sweep: %s cannot be read (%s): nothing is deleted", keys.keys[i],
                      strerror(-rc));
    }
    store_keys_free(&keys);
    /* a removing version's root is being deleted by the collector (no reader is left: it
     * waits for them): what is gone names nothing */
    if (rc == -ENOENT && e->state == VLIST_REMOVING)
        return 0;
    if (rc == -ENOENT) {
        log_error("pool sweep: objects of kept version %" PRIu64 " (root %s) vanished while "
                  "read: nothing is deleted",
                  e->n, e->root);
        return -EIO;
    }
    return rc;
}

/* Mark every entry of l not yet marked (done[n] set by number, grown as needed). */
static int mark_list(struct store *store, struct marks *m, const struct vlist *l,
                     struct strmap *done, struct sweep_stats *stats)
{
    for (size_t i = 0; i < l->n_entries; i++) {
        const struct vlist_entry *e = &l->entries[i];
        char n[24];
        if (e->error) {
            log_error("pool sweep: the version list has a malformed entry (%s): what it names "
                      "cannot be told, nothing is deleted",
                      e->error);
            return -EIO;
        }
        snprintf(n, sizeof n, "%" PRIu64, e->n);
        if (strmap_get(done, n))
            continue;
        int rc = mark_version(store, m, e);
        if (rc == 0)
            rc = strmap_put(done, n, (void *)1, NULL);
        if (rc != 0)
            return rc < 0 ? rc : -EIO;
        stats->versions++;
    }
    return 0;
}

/* ---- the sweep ---- */

/* When a pool object last changed, for its age: a local bucket's copy into the pool is a hard
 * link, which keeps its source's mtime, however old, and changes only the inode's ctime. So
 * an object a commit in flight just linked in (its version not listed yet) counts as young.
 * S3 has no ctime: a copy there gets a new LastModified. */
static double changed_at(const struct store_stat *st)
{
    double ctime = (double)st->ctime_ns / 1e9;
    return ctime > st->mtime ? ctime : st->mtime;
}

/* Delete the listed pool object if it still is unmarked and old (checked again by a HEAD:
 * a commit may have rewritten it since the listing). 1 deleted, 0 kept, -errno. */
static int sweep_object(struct store *store, const struct store_entry *o, double before)
{
    struct store_stat now;
    int rc = store_head(store, o->key, &now);
    if (rc == -ENOENT)
        return 0;
    if (rc != 0)
        return rc;
    if (changed_at(&now) >= before || strcmp(now.etag, o->st.etag) != 0)
        return 0;
    rc = store_delete(store, o->key);
    return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

struct sweep_run {
    struct store *store;
    const char *domain;
    double before; /* objects last modified before this may go */
    const atomic_int *stop;
    struct marks marks;
    struct strmap *done;
    struct sweep_stats *stats;
};

/* Delete the objects of pool (a listing of prefix) whose names marked lacks. */
static int delete_unmarked(struct sweep_run *r, const struct store_list *pool, const char *prefix,
                           const struct strmap *marked)
{
    for (size_t i = 0; i < pool->n_objects; i++) {
        const struct store_entry *o = &pool->objects[i];
        const char *name = o->key + strlen(prefix);
        if (strncmp(o->key, prefix, strlen(prefix)) != 0 || strlen(name) != 32 ||
            strmap_get(marked, name))
            continue;
        if (changed_at(&o->st) >= r->before) {
            r->stats->young++;
            continue;
        }
        if (r->stop && atomic_load(r->stop))
            return -EINTR;
        int rc = sweep_object(r->store, o, r->before);
        if (rc < 0) {
            log_error("pool sweep of %s: %s cannot be deleted (%s): the sweep stops here",
                      r->domain, o->key, strerror(-rc));
            return -EIO;
        }
        r->stats->deleted += (uint64_t)rc;
    }
    return 0;
}

static int list_pool_part(struct sweep_run *r, const char *prefix, struct store_list *out)
{
    int rc = store_list(r->store, prefix, NULL, NULL, 0, out);
    if (rc != 0)
        log_error("pool sweep of %s: cannot list %s (%s): nothing is deleted", r->domain, prefix,
                  strerror(-rc));
    return rc;
}

static int sweep_marked(struct sweep_run *r, const char *key)
{
    struct store_list pool = { 0 }, files = { 0 };
    struct vlist again;
    testhook_crash_at("sweep");
    int rc = list_pool_part(r, r->marks.needle, &pool);
    if (rc == 0)
        rc = list_pool_part(r, r->marks.file_needle, &files);
    r->stats->pooled = rc == 0 ? pool.n_objects + files.n_objects : 0;
    /* versions listed since the mark began name objects a commit wrote or reused meanwhile */
    if (rc == 0 && (rc = load_list(r->store, key, &again, NULL)) == 0) {
        rc = mark_list(r->store, &r->marks, &again, r->done, r->stats);
        vlist_free(&again);
    }
    if (rc == 0)
        rc = delete_unmarked(r, &pool, r->marks.needle, r->marks.md5s);
    if (rc == 0)
        rc = delete_unmarked(r, &files, r->marks.file_needle, r->marks.files);
    store_list_free(&pool);
    store_list_free(&files);
    return rc;
}

int sweep_pool(struct store *store, const char *domain, double grace, const atomic_int *stop,
               struct sweep_stats *stats)
{
    char key[STORE_KEY_MAX + 1];
    struct vlist l;
    struct sweep_run r = { .store = store, .domain = domain, .stop = stop, .stats = stats };
    memset(stats, 0, sizeof *stats);
    r.before = clock_wall() - grace - MTIME_SLACK;
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return -EINVAL;
    int rc = load_list(store, key, &l, NULL);
    if (rc != 0)
        return rc;
    rc = vpool_owned_by(store, l.pool, domain); /* else the list may name anyone's objects */
    if (rc != 1) {
        vlist_free(&l);
        return rc == 0 ? -EPERM : rc;
    }
    r.marks.needle_len =
        (size_t)snprintf(r.marks.needle, sizeof r.marks.needle, "db/%.17s/c/", l.pool + 2);
    snprintf(r.marks.file_needle, sizeof r.marks.file_needle, "db/%.17s/f/", l.pool + 2);
    r.marks.md5s = strmap_new();
    r.marks.files = strmap_new();
    r.done = strmap_new();
    rc = r.marks.md5s && r.marks.files && r.done ? mark_list(store, &r.marks, &l, r.done, stats)
                                                 : -ENOMEM;
    vlist_free(&l);
    if (rc == 0)
        rc = sweep_marked(&r, key);
    stats->marked = r.marks.md5s ? strmap_count(r.marks.md5s) : 0;
    stats->marked += r.marks.files ? strmap_count(r.marks.files) : 0;
    strmap_free(r.marks.md5s, NULL);
    strmap_free(r.marks.files, NULL);
    strmap_free(r.done, NULL);
    if (rc == 0)
        log_info("pool sweep of %s: %" PRIu64 " versions name %" PRIu64 " of %" PRIu64
                 " pool objects; %" PRIu64 " deleted, %" PRIu64 " unnamed but younger than the "
                 "grace period kept",
                 domain, stats->versions, stats->marked, stats->pooled, stats->deleted,
                 stats->young);
    return rc == -EINTR || rc == -ENOENT || rc == -ENOMEM ? rc : rc != 0 ? -EIO : 0;
}

/* ---- the sweeper ---- */

struct job {
    struct job *next;
    char *domain;
    char pool[SCHEMA_ID_BUF]; /* the sweep's record ("" none yet) */
    int finish;               /* removals to finish */
    int sweep;                /* a sweep owed, due at sweep_at (monotonic) */
    double sweep_at;
    double finished_at; /* last finish (hints are throttled by it) */
    double swept_at;    /* last sweep (0: none yet) */
};

struct sweeper {
    struct sweeper_config cfg;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct job *jobs; /* one per domain ever asked for (a mount's few) */
    int stopping, started;
    int finishing;   /* a finish is running (settle waits for it) */
    atomic_int stop; /* stops a sweep between two deletes */
    pthread_t thread;
};

int sweeper_new(const struct sweeper_config *cfg, struct sweeper **out)
{
    struct sweeper *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    if (pthread_mutex_init(&s->lock, NULL) != 0 || pthread_cond_init(&s->wake, NULL) != 0) {
        free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

/* domain's job (under lock), made when missing; NULL: out of memory (logged). */
static struct job *job_of(struct sweeper *s, const char *domain)
{
    for (struct job *j = s->jobs; j; j = j->next)
        if (strcmp(j->domain, domain) == 0)
            return j;
    struct job *j = calloc(1, sizeof *j);
    if (!j || !(j->domain = strdup(domain))) {
        free(j);
        log_error("%s: out of memory: its removed versions are collected later", domain);
        return NULL;
    }
    j->finished_at = -HINT_EVERY;
    j->next = s->jobs;
    s->jobs = j;
    return j;
}

static void ask(struct sweeper *s, const char *domain, int hint)
{
    pthread_mutex_lock(&s->lock);
    struct job *j = job_of(s, domain);
    if (j && (!hint || clock_monotonic() - j->finished_at >= HINT_EVERY)) {
        j->finish = 1;
        pthread_cond_broadcast(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
}

void sweeper_request(struct sweeper *s, const char *domain)
{
    ask(s, domain, 0);
}

void sweeper_hint(struct sweeper *s, const char *domain)
{
    ask(s, domain, 1);
}

void sweeper_resume(struct sweeper *s, const char *domain, const char *pool)
{
    pthread_mutex_lock(&s->lock);
    struct job *j = job_of(s, domain);
    if (j) {
        snprintf(j->pool, sizeof j->pool, "%s", pool);
        j->sweep = 1;
        j->sweep_at = clock_monotonic();
        pthread_cond_broadcast(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
}

/* A drop makes a sweep due: recorded before the drop (sweep_owed_fn). */
static int record_owed(void *ctx, const char *pool, const char *domain)
{
    struct sweeper *s = ctx;
    if (!s->cfg.records.write)
        return 0;
    return s->cfg.records.write(s->cfg.records.ctx, pool, domain, clock_wall());
}

static void run_finish(struct sweeper *s, struct job *j, const char *domain)
{
    struct sweep_finish f;
    int rc = sweep_finish_removals(s->cfg.store, s->cfg.gc, domain, record_owed, s, &f);
    pthread_mutex_lock(&s->lock);
    j->finished_at = clock_monotonic();
    if (rc == 0 && f.dropped > 0) {
        double due = j->swept_at > 0 ? j->swept_at + s->cfg.interval : 0;
        if (!j->sweep || due < j->sweep_at)
            j->sweep_at = due > j->finished_at ? due : j->finished_at;
        j->sweep = 1;
        snprintf(j->pool, sizeof j->pool, "%s", f.pool);
    }
    pthread_mutex_unlock(&s->lock);
}

/* The sweep owed to domain, whose list is gone or whose pool is no longer its own: an mv took
 * both to the domain the pool's marker names now. When that domain's list names the pool,
 * the sweep is owed there (its record rewritten first). 1 when it was handed on. */
static int follow_pool(struct sweeper *s, const char *domain, const char *pool)
{
    char owner[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1];
    struct vlist l;
    if (!pool[0] || vpool_owner(s->cfg.store, pool, owner, sizeof owner) != 0 ||
        strcmp(owner, domain) == 0 || schema_vlist_key(owner, key, sizeof key) != 0 ||
        load_list(s->cfg.store, key, &l, NULL) != 0)
        return 0;
    int names = strcmp(l.pool, pool) == 0;
    vlist_free(&l);
    if (!names || (s->cfg.records.write &&
                   s->cfg.records.write(s->cfg.records.ctx, pool, owner, clock_wall()) != 0))
        return 0;
    log_info("pool sweep of %s: its pool moved with its versions to %s: swept there", domain,
             owner);
    sweeper_resume(s, owner, pool);
    return 1;
}

/* A sweep that left unnamed objects because they were too young is owed again once they are
 * old enough (its record stays); one that failed waits for the next mount. */
static void run_sweep(struct sweeper *s, struct job *j, const char *domain, const char *pool)
{
    struct sweep_stats st;
    int rc = sweep_pool(s->cfg.store, domain, s->cfg.grace, &s->stop, &st);
    int again = rc == 0 && st.young > 0;
    if (rc == -EINTR)
        log_info("pool sweep of %s stopped by the unmount: swept again at the next mount", domain);
    if ((rc == -ENOENT || rc == -EPERM) && follow_pool(s, domain, pool))
        return; /* its record names the new owner now */
    if ((rc == 0 || rc == -ENOENT || rc == -EPERM) && !again && pool[0] && s->cfg.records.remove)
        s->cfg.records.remove(s->cfg.records.ctx, pool);
    pthread_mutex_lock(&s->lock);
    j->swept_at = clock_monotonic();
    if (again && !j->sweep) {
        double wait = s->cfg.grace + 2 * MTIME_SLACK;
        j->sweep = 1;
        j->sweep_at = j->swept_at + (s->cfg.interval > wait ? s->cfg.interval : wait);
    }
    pthread_mutex_unlock(&s->lock);
}

/* The next thing to do (under lock): a finish first, then a due sweep (none while stopping).
 * *what: 1 finish, 2 sweep. */
static struct job *take_work(struct sweeper *s, int *what)
{
    double now = clock_monotonic();
    for (struct job *j = s->jobs; j; j = j->next)
        if (j->finish) {
            j->finish = 0;
            *what = 1;
            return j;
        }
    for (struct job *j = s->jobs; j && !s->stopping; j = j->next)
        if (j->sweep && j->sweep_at <= now) {
            j->sweep = 0;
            *what = 2;
            return j;
        }
    return NULL;
}

static void *sweeper_thread(void *arg)
{
    struct sweeper *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        int what = 0;
        struct job *j = take_work(s, &what);
        if (!j && s->stopping)
            break;
        if (!j) {
            struct timespec until = clock_wall_in_ms(1000);
            pthread_cond_timedwait(&s->wake, &s->lock, &until);
            continue;
        }
        char pool[SCHEMA_ID_BUF];
        char *domain = strdup(j->domain); /* jobs are never freed before the thread ends */
        snprintf(pool, sizeof pool, "%s", j->pool);
        s->finishing = what == 1;
        pthread_mutex_unlock(&s->lock);
        if (domain && what == 1)
            run_finish(s, j, domain);
        else if (domain)
            run_sweep(s, j, domain, pool);
        free(domain);
        pthread_mutex_lock(&s->lock);
        s->finishing = 0;
        pthread_cond_broadcast(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int sweeper_start(struct sweeper *s)
{
    if (pthread_create(&s->thread, NULL, sweeper_thread, s) != 0)
        return -EAGAIN;
    s->started = 1;
    return 0;
}

/* Under lock: a finish asked for or running. */
static int finish_pending(const struct sweeper *s)
{
    for (const struct job *j = s->jobs; j; j = j->next)
        if (j->finish)
            return 1;
    return s->finishing;
}

void sweeper_settle(struct sweeper *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    while (s->started && finish_pending(s)) {
        struct timespec until = clock_wall_in_ms(100);
        pthread_cond_timedwait(&s->wake, &s->lock, &until);
    }
    pthread_mutex_unlock(&s->lock);
}

void sweeper_free(struct sweeper *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    atomic_store(&s->stop, 1);
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (s->started)
        pthread_join(s->thread, NULL);
    while (s->jobs) {
        struct job *j = s->jobs;
        s->jobs = j->next;
        if (j->sweep)
            log_info("pool sweep of %s left for the next mount%s", j->domain,
                     s->cfg.records.write ? " (recorded)" : "");
        free(j->domain);
        free(j);
    }
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
