/* restore: a kept version committed again from its own root; see include/h5osfs/commit/restore.h. */
#include "h5osfs/commit/restore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5osfs/domops/vpool.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/domops/vtable.h"
#include "vroot.h"

#define PREFIX_LEN 17          /* "A-B" of an id: its root's directory under db/ */
#define URI_LEN VTABLE_URI_LEN /* vtab.c's table entries: offset I64, size I32, URI */
#define ENTRY_BYTES VTABLE_ENTRY_BYTES
#define TABLE_ENTRIES_MAX (1u << 20)
#define JSON_MAX (64u << 20)
#define CHUNK_MAX (1ull << 31)

/* ---- the list ---- */

static int load_list(struct store *store, const char *domain, struct vlist *l)
{
    char key[STORE_KEY_MAX + 1], why[200];
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return -ENOENT;
    int rc = ns_vlist_read(store, key, l, NULL, why, sizeof why);
    if (rc == -EINVAL) {
        log_error("%s: version list unusable (%s): a copy of a version is ingested", key, why);
        rc = -EIO;
    }
    return rc;
}

int restore_find(struct store *store, const char *domain, const char *staged_path,
                 restore_same_fn same, void *ctx, uint64_t *n, char vroot[SCHEMA_ID_BUF])
{
    struct vlist l;
    struct stat sb;
    int rc = load_list(store, domain, &l);
    if (rc != 0)
        return rc == -ENOENT ? 0 : rc;
    int fd = open(staged_path, O_RDONLY | O_CLOEXEC);
    rc = fd < 0 || fstat(fd, &sb) != 0 ? -errno : 0;
    for (size_t i = l.n_entries; rc == 0 && i-- > 0;) {
        const struct vlist_entry *e = &l.entries[i];
        char name[32], path[STORE_KEY_MAX + 2];
        if (e->error || e->state != VLIST_KEPT || (e->size && e->size != (uint64_t)sb.st_size))
            continue; /* a recorded size that differs: not this version's file */
        snprintf(name, sizeof name, "%" PRIu64 ".h5", e->n);
        if (schema_version_domain_path(domain, name, path, sizeof path) != 0)
            continue;
        rc = same(ctx, path, e->root, fd, (uint64_t)sb.st_size);
        if (rc == 1) {
            *n = e->n;
            snprintf(vroot, SCHEMA_ID_BUF, "%s", e->root);
        }
    }
    if (fd >= 0)
        close(fd);
    vlist_free(&l);
    if (rc < 0)
        log_warn("%s: whether the file is a copy of a kept version cannot be told (%s): it is "
                 "ingested",
                 domain, strerror(-rc));
    return rc < 0 ? 0 : rc;
}

/* ---- ids and keys of the new root ---- */

struct restore_ctx {
    struct store *store;
    const char *bucket, *pool, *vroot, *root;
    unsigned workers;
    struct restore_stats *stats;
    char file_key[STORE_KEY_MAX + 1]; /* the pool file V's linked datasets name ("" none) */
};

/* text with every id of vroot moved under root (the root id, and the A-B prefix every other
 * object of the root shares; ids have one length: in place). */
static void move_ids(char *text, size_t len, const char *from, const char *to)
{
    const size_t id_len = strlen(from);
    for (char *p = text, *end = text + len; (p = memmem(p, (size_t)(end - p), from, id_len));
         p += id_len)
        memcpy(p, to, id_len);
    for (char *p = text, *end = text + len;
         (p = memmem(p, (size_t)(end - p), from + 2, PREFIX_LEN)); p += PREFIX_LEN)
        memcpy(p, to + 2, PREFIX_LEN);
}

/* The key of the same object under root: db/<A-B of vroot>/rest -> db/<A-B of root>/rest. */
static void moved_key(const struct restore_ctx *r, const char *key, char *out, size_t len)
{
    snprintf(out, len, "db/%.17s%s", r->root + 2, key + 3 + PREFIX_LEN);
}

/* Are the pool object src's bytes (the ETag of st, or buf) those its key names? A restore
 * must not make a forged object the domain's chunk (and then seal it under its own MD5). */
static int pool_bytes_ok(const struct restore_ctx *r, const char *src, const struct store_buf *buf)
{
    char why[160] = "";
    int rc = schema_pool_bytes_check(src, buf->data, buf->len, buf->etag, why, sizeof why);
    if (rc != 0)
        log_error("restore from version root %s: pool object %s: %s", r->vroot, src, why);
    return rc == 0;
}

/* A chunk copied to dst: in the store where its copy is a new object (S3, whose ETags are
 * MD5s); on a local bucket, whose copy is a hard link that HSDS's in-place writes to the new
 * root would change with the pool, by its bytes. */
static int copy_chunk(const struct restore_ctx *r, const char *src, const char *dst, int refs)
{
    struct store_stat st;
    struct store_buf buf = { 0 };
    int rc = refs ? 0 : store_head(r->store, src, &st);
    const char *md5 = schema_pool_key_md5(src); /* NULL: a version's own chunk, no pool's */
    /* an S3 ETag that is the key's MD5 proves the bytes (pool.h): copied in the store */
    if (rc == 0 && !refs && schema_is_md5_hex(st.etag) && (!md5 || strcmp(st.etag, md5) == 0))
        return store_copy(r->store, src, dst);
    if (rc == 0)
        rc = store_get(r->store, src, CHUNK_MAX - 1, &buf);
    if (rc == 0 && md5 && !pool_bytes_ok(r, src, &buf))
        rc = -EBADMSG;
    if (rc == 0 && refs) /* object references name the version's objects (spec §4) */
        move_ids((char *)buf.data, buf.len, r->vroot, r->root);
    if (rc == 0)
        rc = store_put_new(r->store, dst, buf.data, buf.len);
    store_buf_free(&buf);
    return rc;
}

static int put_doc(const struct restore_ctx *r, const char *key, const json_t *doc)
{
    char *text = NULL;
    int rc = hjson_dumps(doc, &text);
    if (rc == 0)
        rc = store_put_new(r->store, key, text, strlen(text));
    free(text);
    r->stats->objects += rc == 0;
    return rc;
}

/* ---- one dataset over a chunk table ---- */

struct table_job {
    const struct restore_ctx *r;
    const unsigned char *table;
    const char *dataset; /* its id under the new root */
    const uint64_t *grid;
    int rank, partitions;
    int *rcs;
};

static void restore_entry(void *ctx, size_t e)
{
    struct table_job *j = ctx;
    const unsigned char *p = j->table + e * ENTRY_BYTES;
    uint32_t size =
        (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
    char uri[URI_LEN + 1], dst[STORE_KEY_MAX + 1];
    uint64_t idx[32], lin = e;
    const char *key;
    j->rcs[e] = 0;
    if (size == 0)
        return; /* fill: no chunk */
    memcpy(uri, p + 12, URI_LEN);
    uri[URI_LEN] = '\0';
    if (schema_pool_uri_check(uri, j->r->bucket, j->r->pool, &key) != 0) {
        log_error("%s: chunk table entry %zu names %s, outside the pool: not restored", j->r->vroot,
                  e, uri);
        j->rcs[e] = -EIO;
        return;
    }
    for (int k = j->rank; k-- > 0;) {
        idx[k] = lin % j->grid[k];
        lin /= j->grid[k];
    }
    int part = j->partitions > 0 ? schema_chunk_partition(idx, j->rank, j->partitions) : -1;
    int rc = schema_chunk_key(j->dataset, idx, j->rank, part, dst, sizeof dst);
    if (rc == 0)
        rc = copy_chunk(j->r, key, dst, 0);
    j->rcs[e] = rc == 0 ? 1 : rc; /* 1: copied */
}

/* doc (its ids moved already) is a dataset of V over table tid: its chunks copied from the
 * pool, then its JSON with the plain layout it had before it was kept. */
static int pooled_dataset(const struct restore_ctx *r, json_t *doc, const char *tid,
                          const char *dst_key)
{
    uint64_t dims[HJSON_DIMS_MAX], cdims[HJSON_DIMS_MAX], grid[HJSON_DIMS_MAX], entries = 1;
    int rank = 0, crank = 0;
    json_t *lay = json_object_get(doc, "layout");
    if (hjson_dims(json_object_get(json_object_get(doc, "shape"), "dims"), dims, &rank) != 0 ||
        hjson_dims(json_object_get(lay, "dims"), cdims, &crank) != 0 || rank != crank)
        return -EOPNOTSUPP;
    for (int k = 0; k < rank; k++) {
        if (cdims[k] == 0)
            return -EOPNOTSUPP;
        grid[k] = dims[k] ? (dims[k] + cdims[k] - 1) / cdims[k] : 1;
        entries *= grid[k];
    }
    if (entries > TABLE_ENTRIES_MAX)
        return -EOPNOTSUPP;
    struct vtable_geom g;
    unsigned char *table = NULL;
    char vtid[SCHEMA_ID_BUF]; /* the table stays under V: tid was moved with the JSON */
    snprintf(vtid, sizeof vtid, "%s", tid);
    if (strlen(vtid) < 2 + PREFIX_LEN)
        return -EIO;
    memcpy(vtid + 2, r->vroot + 2, PREFIX_LEN);
    int rc = vtable_read(r->store, vtid, r->workers, &g, &table);
    if (rc == 0 && (g.entries != entries || g.rank != rank ||
                    memcmp(g.grid, grid, (size_t)rank * sizeof *grid) != 0)) {
        log_error("%s: chunk table %s has %" PRIu64 " entries, not %" PRIu64 ": not restored",
                  r->vroot, tid, g.entries, entries);
        rc = -EIO;
    } else if (rc != 0)
        log_error("%s: chunk table %s cannot be read (%s): not restored", r->vroot, tid,
                  strerror(-rc));
    int *rcs = rc == 0 ? calloc(entries, sizeof *rcs) : NULL;
    if (rc == 0 && !rcs)
        rc = -ENOMEM;
    const char *id = hjson_text(json_object_get(doc, "id"));
    json_t *parts = json_object_get(lay, "partition_count");
    struct table_job job = {
        r, table, id, grid, rank, json_is_integer(parts) ? (int)json_integer_value(parts) : 0, rcs
    };
    if (rc == 0 && !id)
        rc = -EIO;
    if (rc == 0)
        pfor(entries, r->workers ? r->workers : 1, restore_entry, &job);
    for (uint64_t e = 0; rc == 0 && e < entries; e++) {
        if (rcs[e] < 0)
            rc = rcs[e];
        else
            r->stats->chunks_copied += (uint64_t)rcs[e];
    }
    free(rcs);
    free(table);
    json_t *cprops = json_object_get(doc, "creationProperties");
    if (rc == 0 && (!json_is_object(cprops) ||
                    json_object_set_new(cprops, "layout",
                                        json_pack("{s:s, s:O}", "class", "H5D_CHUNKED", "dims",
                                                  json_object_get(lay, "dims"))) != 0))
        rc = -ENOMEM; /* the plain layout it had before it was kept */
    return rc == 0 ? put_doc(r, dst_key, doc) : rc;
}

/* ---- the version's objects ---- */

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* The JSON at key with its ids moved under the new root, parsed. */
static int load_moved(const struct restore_ctx *r, const char *key, json_t **doc)
{
    struct store_buf buf = { 0 };
    char why[200];
    *doc = NULL;
    int rc = store_get(r->store, key, JSON_MAX, &buf);
    if (rc == 0) {
        move_ids((char *)buf.data, buf.len, r->vroot, r->root);
        if (!(*doc = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why))) {
            log_error("%s: not JSON (%s): the version is not restored from it", key, why);
            rc = -EIO;
        }
    }
    store_buf_free(&buf);
    return rc;
}

/* The chunk table a dataset of V reads through ("" none). */
static const char *table_of(const json_t *doc)
{
    const json_t *clay = json_object_get(json_object_get(doc, "creationProperties"), "layout");
    const char *cls = hjson_text(json_object_get(clay, "class"));
    const char *tid = hjson_text(json_object_get(clay, "chunk_table"));
    return cls && strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0 && tid &&
                   json_object_get(clay, "h5osfs")
               ? tid
               : "";
}

/* Is key one of a chunk table's objects (tables: the ids, moved)? */
static int in_table(const struct restore_ctx *r, const char *key, char **tables, size_t n)
{
    char tkey[STORE_KEY_MAX + 1], moved[STORE_KEY_MAX + 1];
    moved_key(r, key, moved, sizeof moved);
    for (size_t i = 0; i < n; i++)
        if (schema_obj_key(tables[i], tkey, sizeof tkey) == 0 &&
            strncmp(moved, tkey, strlen(tkey) - strlen(".dataset.json")) == 0)
            return 1;
    return 0;
}

/* Any other dataset of V (vlen, references, too big for a table): its chunks copied. */
static int copied_dataset(const struct restore_ctx *r, const struct store_keys *keys,
                          const char *json_key, json_t *doc, const char *dst_key)
{
    char dst[STORE_KEY_MAX + 1];
    size_t dir_len = strlen(json_key) - strlen(".dataset.json");
    unsigned traits = 0;
    /* out of memory fails the copy (ids copied unchanged would be wrong bytes); a type that
     * cannot be parsed has no references to rewrite */
    int rc = h5type_traits_of(json_object_get(doc, "type"), &traits);
    if (rc == -EINVAL)
        rc = 0;
    int refs = (traits & H5TYPE_HAS_REF) != 0;
    for (size_t i = 0; rc == 0 && i < keys->n; i++) {
        const char *k = keys->keys[i];
        if (strncmp(k, json_key, dir_len) != 0 || ends_with(k, ".json"))
            continue;
        moved_key(r, k, dst, sizeof dst);
        rc = copy_chunk(r, k, dst, refs);
        r->stats->chunks_copied += rc == 0;
    }
    return rc == 0 ? put_doc(r, dst_key, doc) : rc;
}

/* A linked layout of V naming a pool file names the new root's own copy of it instead
 * (restore_pool_file): a current root reads only its own file, which goes with it. A pool
 * file other than the one V's root group names is none a version of this code writes:
 * -EOPNOTSUPP (the file is stored instead). */
static int own_file_instead(const struct restore_ctx *r, json_t *doc)
{
    json_t *lay = json_object_get(json_object_get(doc, "creationProperties"), "layout");
    const char *key =
        schema_pool_file_uri_key(hjson_text(json_object_get(lay, "file_uri")), r->bucket);
    char own[STORE_KEY_MAX + 1], text[STORE_KEY_MAX + 256];
    if (!key)
        return 0;
    if (!r->file_key[0] || strcmp(key, r->file_key) != 0)
        return -EOPNOTSUPP;
    if (schema_linked_file_key(r->root, own, sizeof own) != 0 ||
        snprintf(text, sizeof text, "%s/%s", r->bucket, own) >= (int)sizeof text)
        return -EIO;
    return json_object_set_new(lay, "file_uri", json_string(text)) == 0 ? 0 : -ENOMEM;
}

static int restore_object(const struct restore_ctx *r, const struct store_keys *keys,
                          const char *key)
{
    char dst[STORE_KEY_MAX + 1];
    json_t *doc;
    int rc = load_moved(r, key, &doc);
    moved_key(r, key, dst, sizeof dst);
    if (rc == 0 && ends_with(key, "/.dataset.json"))
        rc = own_file_instead(r, doc);
    if (rc == 0 && ends_with(key, "/.dataset.json")) {
        const char *tid = table_of(doc);
        char *table = tid[0] ? strdup(tid) : NULL;
        rc = tid[0] && !table ? -ENOMEM
             : table          ? pooled_dataset(r, doc, table, dst)
                              : copied_dataset(r, keys, key, doc, dst);
        free(table);
    } else if (rc == 0) {
        if (ends_with(key, "/.group.json")) /* a version root's claim on its pool (vpool.h) */
            json_object_del(doc, SCHEMA_H5OSFS_MEMBER);
        rc = put_doc(r, dst, doc);
    }
    json_decref(doc);
    return rc;
}

/* The ids (moved under the new root) of every chunk table of V: not objects of the domain. */
static int find_tables(const struct restore_ctx *r, const struct store_keys *keys, char ***tables,
                       size_t *n)
{
    size_t cap = 0;
    *tables = NULL;
    *n = 0;
    for (size_t i = 0; i < keys->n; i++) {
        json_t *doc;
        if (!ends_with(keys->keys[i], "/.dataset.json"))
            continue;
        int rc = load_moved(r, keys->keys[i], &doc);
        const char *tid = rc == 0 ? table_of(doc) : "";
        char **grown = tid[0] ? grow_array(*tables, &cap, *n + 1, sizeof *grown, 8) : *tables;
        if (tid[0] && grown) {
            *tables = grown;
            if ((grown[*n] = strdup(tid)) != NULL)
                (*n)++;
            else
                rc = -ENOMEM;
        } else if (tid[0]) {
            rc = -ENOMEM; /* a table left out would be restored as an object of the domain */
        }
        json_decref(doc);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* V's own linked file (ingest=link), copied as the new root's: the restored datasets name it
 * (their ids moved), and V's copy goes when V is collected. */
static int restore_linked_file(const struct restore_ctx *r, const char *key)
{
    struct store_stat st;
    char dst[STORE_KEY_MAX + 1];
    int rc = schema_linked_file_key(r->root, dst, sizeof dst);
    if (rc == 0)
        rc = store_head(r->store, key, &st);
    if (rc == 0)
        rc = store_copy_sized(r->store, key, dst, st.size);
    r->stats->objects += rc == 0;
    return rc;
}

/* The pool file V's root group names (vroot.c), copied as the new root's own file: 0 (none
 * named, or copied), -EOPNOTSUPP (a pool not domain's by its marker, a pool file gone or not
 * the one V kept, by its etag) or -EBADMSG (a group that says no such thing as a commit
 * writes): the staged file is stored instead; or -errno. */
static int restore_pool_file(struct restore_ctx *r, const char *domain)
{
    char name[33], etag[SCHEMA_POOL_ETAG_BUF], dst[STORE_KEY_MAX + 1];
    struct store_stat st;
    int rc = vroot_file_name(r->store, r->vroot, name, etag);
    if (rc == 0 && name[0] &&
        schema_pool_file_key(r->pool, name, r->file_key, sizeof r->file_key) != 0)
        rc = -EOPNOTSUPP;
    if (rc != 0 || !r->file_key[0])
        return rc;
    rc = vpool_owned_by(r->store, r->pool, domain); /* the list alone may be forged */
    rc = rc == 1 ? 0 : rc == 0 ? -EOPNOTSUPP : rc;
    if (rc == 0)
        rc = schema_linked_file_key(r->root, dst, sizeof dst);
    if (rc == 0)
        rc = store_head(r->store, r->file_key, &st);
    if (rc == 0 && etag[0] && strcmp(st.etag, etag) != 0) {
        log_error("%s: pool file %s is not the one the version kept (etag %s, kept %s): the "
                  "file read through the mount is stored instead",
                  domain, r->file_key, st.etag, etag);
        rc = -EOPNOTSUPP;
    }
    if (rc == 0)
        rc = store_copy_sized(r->store, r->file_key, dst, st.size);
    r->stats->objects += rc == 0;
    return rc == -ENOENT ? -EOPNOTSUPP : rc;
}

int restore_root(struct store *store, const char *bucket_name, const char *domain,
                 const char *vroot, const char *new_root, unsigned workers,
                 struct restore_stats *stats)
{
    struct vlist l;
    struct store_keys keys = { 0 };
    char prefix[32], file_key[STORE_KEY_MAX + 1], **tables = NULL;
    size_t n_tables = 0;
    const char *root_group = NULL;
    int rc = load_list(store, domain, &l);
    if (rc != 0)
        return rc == -ENOENT ? -EOPNOTSUPP : rc;
    struct restore_ctx r = { store, bucket_name, l.pool, vroot, new_root, workers, stats, "" };
    snprintf(prefix, sizeof prefix, "db/%.17s/", vroot + 2);
    rc = schema_linked_file_key(vroot, file_key, sizeof file_key);
    if (rc == 0)
        rc = store_collect_keys(store, prefix, &keys);
    if (rc == 0)
        rc = find_tables(&r, &keys, &tables, &n_tables);
    if (rc == 0)
        rc = restore_pool_file(&r, domain);
    for (size_t i = 0; rc == 0 && i < keys.n; i++) {
        const char *k = keys.keys[i];
        if (strcmp(k + strlen(prefix), ".group.json") == 0)
            root_group = k;
        else if ((ends_with(k, "/.group.json") || ends_with(k, "/.dataset.json") ||
                  ends_with(k, "/.datatype.json")) &&
                 !in_table(&r, k, tables, n_tables))
            rc = restore_object(&r, &keys, k);
        else if (strcmp(k, file_key) == 0)
            rc = restore_linked_file(&r, k);
    }
    if (rc == 0 && !root_group)
        rc = -EIO;
    if (rc == 0) /* last: nothing names the new root before the swap anyway */
        rc = restore_object(&r, &keys, root_group);
    if (rc == 0)
        rc = store_sync(store);
    for (size_t i = 0; i < n_tables; i++)
        free(tables[i]);
    free(tables);
    store_keys_free(&keys);
    vlist_free(&l);
    if (rc != 0 && rc != -EOPNOTSUPP)
        log_error("%s: root %s could not be restored from version root %s (%s)", domain, new_root,
                  vroot, strerror(-rc));
    return rc;
}
