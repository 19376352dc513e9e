/* versions: a new root kept as a version; see include/h5osfs/commit/versions.h. */
#include "h5osfs/commit/versions.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/domops/vnames.h"
#include "h5osfs/domops/vtable.h"
#include "vkept.h"

#define CHUNK_MAX (1ull << 31)       /* table sizes are I32 (spec §8.3) */
#define TABLE_ENTRIES_MAX (1u << 20) /* a table is held whole in memory while written */
#define URI_LEN VTABLE_URI_LEN       /* fixed-length ASCII file_uri field */
#define ENTRY_BYTES VTABLE_ENTRY_BYTES
#define JSON_MAX (64u << 20)
#define LIST_TRIES 16
#define PREFIX_LEN 17 /* "A-B" of an id: the root's directory under db/ */

/* ---- the keys of the new root ---- */

struct key_set {
    char **keys;
    struct store_stat *listed; /* what the listing said of each key */
    size_t n, cap;
};

static int collect_key(void *ctx, const char *key, const struct store_stat *st)
{
    struct key_set *s = ctx;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        char **k = realloc(s->keys, cap * sizeof *k);
        if (k)
            s->keys = k;
        struct store_stat *l = realloc(s->listed, cap * sizeof *l);
        if (l)
            s->listed = l;
        if (!k || !l)
            return -ENOMEM;
        s->cap = cap;
    }
    s->listed[s->n] = *st;
    return (s->keys[s->n] = strdup(key)) ? (s->n++, 0) : -ENOMEM;
}

#define LIST_PAGE 1000

/* Every key below prefix with its size, mtime and etag. Not store_list_keys: a local bucket's
 * walk stats nothing, and the seal needs each chunk's mtime (take_base_entry). S3: one LIST
 * per 1,000 keys. A local bucket (the store with a key walk) in one listing: each page would
 * read and sort the whole directory again (100 pages of 1e5 chunks: seconds of CPU). */
static int list_with_stats(struct store *st, const char *prefix, struct key_set *s)
{
    const size_t per_page = st->ops->list_keys ? 0 : LIST_PAGE;
    char *token = NULL;
    int rc;
    do {
        struct store_list page = { 0 };
        rc = store_list(st, prefix, NULL, token, per_page, &page);
        free(token);
        token = NULL;
        for (size_t i = 0; rc == 0 && i < page.n_objects; i++)
            if (strncmp(page.objects[i].key, prefix, strlen(prefix)) == 0)
                rc = collect_key(s, page.objects[i].key, &page.objects[i].st);
        if (rc == 0) {
            token = page.next_token;
            page.next_token = NULL;
        }
        store_list_free(&page);
    } while (rc == 0 && token);
    free(token);
    return rc;
}

static void key_set_free(struct key_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->keys[i]);
    free(s->keys);
    free(s->listed);
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* ---- ids ---- */

static int mint_root(char out[SCHEMA_ID_BUF])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[8];
    char d[33];
    if (RAND_bytes(r, sizeof r) != 1)
        return -EIO;
    for (int i = 0; i < 8; i++) {
        d[2 * i] = hex[r[i] >> 4];
        d[2 * i + 1] = hex[r[i] & 15];
    }
    for (int i = 0; i < 16; i++)
        d[16 + i] = (char)schema_hex_rot(d[i]);
    d[32] = '\0';
    snprintf(out, SCHEMA_ID_BUF, "g-%.8s-%.8s-%.4s-%.6s-%.6s", d, d + 8, d + 16, d + 20, d + 26);
    return 0;
}

/* A new dataset id under root vroot (its chunk table). */
static int mint_dataset(const char *vroot, char out[SCHEMA_ID_BUF])
{
    char r[SCHEMA_ID_BUF];
    if (mint_root(r) != 0)
        return -EIO;
    /* random digits 16-31 of r, digits 0-15 of vroot (spec §1.2) */
    snprintf(out, SCHEMA_ID_BUF, "d-%.17s-%s", vroot + 2, r + 20);
    return 0;
}

/* text with every id of root moved under vroot: the root id itself, and the A-B prefix that
 * every other object of the root shares (suffixes kept, as ingest_base_identify does). */
static char *moved(const char *text, size_t len, const char *root, const char *vroot)
{
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    memcpy(out, text, len);
    out[len] = '\0';
    for (char *p = out; (p = strstr(p, root)) != NULL; p += strlen(root))
        memcpy(p, vroot, strlen(vroot)); /* ids have one length: in place */
    char from[PREFIX_LEN + 1], to[PREFIX_LEN + 1];
    memcpy(from, root + 2, PREFIX_LEN);
    from[PREFIX_LEN] = '\0';
    memcpy(to, vroot + 2, PREFIX_LEN);
    to[PREFIX_LEN] = '\0';
    for (char *p = out; (p = strstr(p, from)) != NULL; p += PREFIX_LEN)
        memcpy(p, to, PREFIX_LEN);
    return out;
}

/* The same on bytes (a reference dataset's chunk: ids of fixed length, in place). */
static void move_ids_in_place(unsigned char *data, size_t len, const char *root, const char *vroot)
{
    const size_t id_len = strlen(root);
    for (unsigned char *p = data, *end = data + len;
         (p = memmem(p, (size_t)(end - p), root, id_len)) != NULL; p += id_len)
        memcpy(p, vroot, id_len);
    for (unsigned char *p = data, *end = data + len;
         (p = memmem(p, (size_t)(end - p), root + 2, PREFIX_LEN)) != NULL; p += PREFIX_LEN)
        memcpy(p, vroot + 2, PREFIX_LEN);
}

/* The key of the same object under vroot: db/<A-B of root>/rest -> db/<A-B of vroot>/rest. */
static void moved_key(const char *key, const char *vroot, char *out, size_t len)
{
    snprintf(out, len, "db/%.17s%s", vroot + 2, key + 3 + PREFIX_LEN);
}

/* ---- sealing chunks into the pool ---- */

struct sealed {
    char *key;                       /* the chunk's key under the new root */
    const struct store_stat *listed; /* as the new root's listing gave it */
    uint64_t *idx;                   /* its index (rank numbers) */
    const unsigned char *base_entry; /* the base version's table entry (NULL: none) */
    char uri[URI_LEN];
    uint64_t size;
    int rc;
    int fresh, copied, from_base; /* stored now; by a copy in the store; named as in V_n */
};

/* The version the commit's base root was kept as (doc/versions.md §4.2): V_n's tables name
 * the pool object of every chunk the writer did not change. */
struct base_version {
    char vroot[SCHEMA_ID_BUF]; /* "" when the base is no listed version */
    double time;               /* when it was listed */
    int is_root;               /* the base root is that version's root (versions_current=ref) */
};

struct seal_job {
    const struct versions_commit *vc;
    const char *pool;
    const struct base_version *base;
    struct sealed *chunks;
};

static int md5_hex(const void *data, size_t len, char out[33])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    if (EVP_Digest(data, len, md, &md_len, EVP_md5(), NULL) != 1 || md_len != 16)
        return -EIO;
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[32] = '\0';
    return 0;
}

/* 1 if etag is 32 lowercase hex digits: a single-part S3 object's MD5 (a local bucket's etags
 * are longer, multipart ones have a "-N"). An S3 server whose ETag is not the MD5 (AWS with
 * SSE-KMS) gives unique ones instead: then equal chunks are not shared, never wrongly so. */
static int etag_is_md5(const char *etag)
{
    size_t n = strlen(etag);
    for (size_t i = 0; n == 32 && i < n; i++)
        if (!((etag[i] >= '0' && etag[i] <= '9') || (etag[i] >= 'a' && etag[i] <= 'f')))
            return 0;
    return n == 32;
}

/* Must the pool object at key be written? Yes when it is absent (*absent), and when it is
 * older than pool_fresh_for: written again (same bytes), it is new to a concurrent sweep of
 * the pool (sweep.h), which deletes only objects older than its grace period. */
static int must_write(struct seal_job *j, const char *key, int *absent)
{
    struct store_stat st;
    *absent = store_head(j->vc->store, key, &st) != 0;
    return *absent ||
           (j->vc->pool_fresh_for > 0 && st.mtime < clock_wall() - j->vc->pool_fresh_for);
}

/* The size and URI of a table entry (put_entry's layout). */
static uint64_t entry_size(const unsigned char *e)
{
    uint64_t size = 0;
    for (int i = 0; i < 4; i++)
        size |= (uint64_t)e[8 + i] << (8 * i);
    return size;
}

static void entry_uri(const unsigned char *e, char out[URI_LEN])
{
    memcpy(out, e + 12, URI_LEN - 1);
    out[URI_LEN - 1] = '\0';
}

/* Is pool key (of the chunk s) what the base version names at s's index? */
static int same_as_base_entry(const struct seal_job *j, const struct sealed *s, const char *key)
{
    char uri[URI_LEN], want[URI_LEN];
    if (!s->base_entry || entry_size(s->base_entry) != s->size)
        return 0;
    entry_uri(s->base_entry, uri);
    return snprintf(want, sizeof want, "%s/%s", j->vc->bucket_name, key) < URI_LEN &&
           strcmp(uri, want) == 0;
}

/*
 * A chunk the writer did not change, named as V_n names it, without reading it: the ingest
 * copied it from the base root, so the new root's object is the base's (a local bucket's copy
 * is a hard link: same mtime), unchanged since before V_n was listed (V_n sealed those very
 * bytes then), unless someone wrote it after V_n was listed (HSDS in place): then its mtime
 * is later and the bytes are read. 1 taken, 0 not.
 */
static int take_base_entry(const struct seal_job *j, struct sealed *s)
{
    const char *key = NULL;
    if (!s->base_entry || s->listed->mtime >= j->base->time ||
        entry_size(s->base_entry) != s->listed->size || s->listed->size == 0)
        return 0;
    entry_uri(s->base_entry, s->uri);
    if (schema_pool_uri_check(s->uri, j->vc->bucket_name, j->pool, &key) != 0)
        return 0;
    s->size = s->listed->size;
    s->from_base = 1;
    return 1;
}

/* Into the pool by CopyObject, keyed by the chunk's listed MD5: no byte crosses the wire. 0,
 * or 1 when the etag is no MD5 (the bytes must be read). The listing of the new root (made by
 * this commit, named by nothing yet) gave the ETag: no HEAD. A pool object V_n names at the
 * same index needs neither a HEAD nor a rewrite: every sweep marks it (doc/versions.md §4.2,
 * status of the seal). */
static int seal_by_etag(struct seal_job *j, struct sealed *s, char *key, size_t key_len)
{
    const struct store_stat *st = s->listed;
    int absent;
    if (!etag_is_md5(st->etag))
        return 1;
    if (st->size >= CHUNK_MAX)
        return -EOPNOTSUPP;
    int rc = schema_pool_key(j->pool, st->etag, key, key_len);
    s->size = st->size;
    if (rc == 0 && same_as_base_entry(j, s, key))
        s->from_base = 1;
    else if (rc == 0 && must_write(j, key, &absent)) {
        rc = store_copy(j->vc->store, s->key, key);
        s->fresh = s->copied = absent;
    }
    return rc;
}

/* By the bytes: read, hash, put (an object already there has these bytes). A local bucket's
 * copy is a hard link, which HSDS's in-place chunk writes would change with the chunk. */
static int seal_by_bytes(struct seal_job *j, struct sealed *s, char *key, size_t key_len)
{
    struct store_buf buf = { 0 };
    char md5[33];
    int absent;
    int rc = store_get(j->vc->store, s->key, CHUNK_MAX - 1, &buf);
    if (rc == 0)
        rc = md5_hex(buf.data, buf.len, md5);
    if (rc == 0)
        rc = schema_pool_key(j->pool, md5, key, key_len);
    s->size = buf.len;
    if (rc == 0 && same_as_base_entry(j, s, key))
        s->from_base = 1;
    else if (rc == 0 && must_write(j, key, &absent)) {
        rc = store_put_lazy(j->vc->store, key, buf.data, buf.len);
        s->fresh = absent;
    }
    s->size = buf.len;
    store_buf_free(&buf);
    return rc == -EFBIG ? -EOPNOTSUPP : rc;
}

/* One chunk into the pool, at the key its MD5 names (content addressed: written once). */
static void seal_one(void *ctx, size_t i)
{
    struct seal_job *j = ctx;
    struct sealed *s = &j->chunks[i];
    char key[STORE_KEY_MAX + 1];
    if (!etag_is_md5(s->listed->etag) && take_base_entry(j, s)) {
        s->rc = 0;
        return;
    }
    int rc = seal_by_etag(j, s, key, sizeof key);
    if (rc == 1)
        rc = seal_by_bytes(j, s, key, sizeof key);
    if (rc == 0 && snprintf(s->uri, sizeof s->uri, "%s/%s", j->vc->bucket_name, key) >= URI_LEN)
        rc = -ENAMETOOLONG;
    s->rc = rc;
}

/* ---- one dataset ---- */

struct dataset_ctx {
    const struct versions_commit *vc;
    const char *pool, *vroot;
    const struct key_set *keys;
    const struct base_version *base;
};

/* Plain chunked, simple shape, fixed-size type: its chunks can live in the pool. */
/* A type without vlen or reference parts. A type whose traits cannot be told (out of memory)
 * counts as not fixed: its dataset is copied per version, which is right for any type. */
static int type_is_fixed(const json_t *type)
{
    unsigned traits;
    return h5type_traits_of(type, &traits) == 0 && !(traits & (H5TYPE_HAS_VLEN | H5TYPE_HAS_REF));
}

static int poolable(const json_t *doc)
{
    const json_t *lay = json_object_get(doc, "layout");
    const json_t *clay = json_object_get(json_object_get(doc, "creationProperties"), "layout");
    const char *cls = hjson_text(json_object_get(lay, "class"));
    const char *ccls = clay ? hjson_text(json_object_get(clay, "class")) : "H5D_CHUNKED";
    const char *shape = hjson_text(json_object_get(json_object_get(doc, "shape"), "class"));
    return cls && strcmp(cls, "H5D_CHUNKED") == 0 && ccls && strcmp(ccls, "H5D_CHUNKED") == 0 &&
           shape && strcmp(shape, "H5S_SIMPLE") == 0 && type_is_fixed(json_object_get(doc, "type"));
}

static int is_reference_layout(const json_t *doc)
{
    const json_t *clay = json_object_get(json_object_get(doc, "creationProperties"), "layout");
    const char *ccls = hjson_text(json_object_get(clay, "class"));
    return ccls && strstr(ccls, "_REF") != NULL;
}

/* The index "i_j_k" at the end of a chunk key. */
static int chunk_index(const char *key, int rank, uint64_t *idx)
{
    const char *p = strrchr(key, '/');
    p = p ? p + 1 : key;
    for (int k = 0; k < rank; k++) {
        char *end;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        idx[k] = strtoull(p, &end, 10);
        if (*end != (k == rank - 1 ? '\0' : '_'))
            return -EINVAL;
        p = end + 1;
    }
    return 0;
}

static void put_entry(unsigned char *e, uint64_t size, const char *uri)
{
    memset(e, 0, ENTRY_BYTES);
    for (int i = 0; i < 4; i++)
        e[8 + i] = (unsigned char)(size >> (8 * i)); /* offset 0, I64LE; size I32LE */
    memcpy(e + 12, uri, strnlen(uri, URI_LEN - 1));
}

static json_t *table_json(const char *tid, const char *vroot, const struct vtable_geom *g)
{
    const uint64_t *grid = g->grid;
    int rank = g->rank;
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "{\"id\": \"%s\", \"root\": \"%s\", \"created\": 0, \"lastModified\": 0, "
                     "\"type\": {\"class\": \"H5T_COMPOUND\", "
                     "\"fields\": [{\"name\": \"offset\", \"type\": {\"class\": \"H5T_INTEGER\", "
                     "\"base\": \"H5T_STD_I64LE\"}}, {\"name\": \"size\", \"type\": {\"class\": "
                     "\"H5T_INTEGER\", \"base\": \"H5T_STD_I32LE\"}}, {\"name\": \"file_uri\", "
                     "\"type\": {\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", "
                     "\"strPad\": \"H5T_STR_NULLPAD\", \"length\": %d}}]}, \"shape\": null, "
                     "\"attributes\": {}, \"creationProperties\": {\"filters\": [{\"class\": "
                     "\"H5Z_FILTER_DEFLATE\", \"id\": 1, \"level\": 6, \"name\": \"gzip\"}]}, "
                     "\"layout\": null}",
                     tid, vroot, URI_LEN);
    /* members in the order HSDS writes them (spec §3.4): placeholders set below */
    json_t *doc = n > 0 && (size_t)n < sizeof text ? json_loads(text, 0, NULL) : NULL;
    json_t *dims = json_array(), *tile = json_array(), *shape = json_object(), *lay = json_object();
    for (int k = 0; dims && tile && k < rank; k++) {
        json_array_append_new(dims, json_integer((json_int_t)grid[k]));
        json_array_append_new(tile, json_integer((json_int_t)g->tile[k]));
    }
    if (!doc || !dims || !tile || !shape || !lay ||
        json_object_set_new(shape, "class", json_string("H5S_SIMPLE")) != 0 ||
        json_object_set(shape, "dims", dims) != 0 || json_object_set(shape, "maxdims", dims) != 0 ||
        json_object_set_new(lay, "class", json_string("H5D_CHUNKED")) != 0 ||
        json_object_set(lay, "dims", tile) != 0 || json_object_set(doc, "shape", shape) != 0 ||
        json_object_set(doc, "layout", lay) != 0 ||
        json_object_set_new(doc, "created", json_real(clock_wall())) != 0 ||
        json_object_set_new(doc, "lastModified", json_real(clock_wall())) != 0) {
        json_decref(doc);
        doc = NULL;
    }
    json_decref(dims);
    json_decref(tile);
    json_decref(shape);
    json_decref(lay);
    return doc;
}

static int put_json(struct store *st, const char *key, const json_t *doc)
{
    char *text = NULL;
    int rc = hjson_dumps(doc, &text);
    if (rc == 0)
        rc = store_put_new(st, key, text, strlen(text));
    free(text);
    return rc;
}

/* The chunk table over sealed chunks, put under vroot; its id into tid. */
/* The entries kept chunks take from the base version's table: the same pool objects. 0, or
 * -EAGAIN when the base names none there (nothing to take: the commit ingests a whole root). */
static int take_kept_entries(unsigned char *table, const unsigned char *base,
                             const struct kept_list *kept, const uint64_t *grid, int rank)
{
    for (size_t i = 0; kept && i < kept->n; i++) {
        const uint64_t *idx = kept->idx + i * (size_t)rank;
        uint64_t lin = 0;
        for (int k = 0; k < rank; k++) {
            if (!base || kept->rank != rank || idx[k] >= grid[k])
                return -EAGAIN;
            lin = lin * grid[k] + idx[k];
        }
        if (entry_size(base + lin * ENTRY_BYTES) == 0)
            return -EAGAIN;
        memcpy(table + lin * ENTRY_BYTES, base + lin * ENTRY_BYTES, ENTRY_BYTES);
    }
    return 0;
}

/* The base version's table of a dataset: its entries (NULL: none to use), id and tiling. */
struct base_tab {
    unsigned char *entries;
    char tid[SCHEMA_ID_BUF];
    struct vtable_geom g;
};

struct tile_job {
    const struct dataset_ctx *d;
    const struct vtable_geom *g;
    const unsigned char *table;
    const struct base_tab *base;
    const char *tid;
    int *rc; /* per tile */
};

/* Is tile t of the new table the base table's tile t, byte for byte as stored? */
static int same_as_base_tile(const struct tile_job *j, uint64_t first, uint64_t count)
{
    const struct base_tab *b = j->base;
    return b->entries && b->g.deflated && b->g.rank == j->g->rank &&
           memcmp(b->g.grid, j->g->grid, (size_t)j->g->rank * sizeof *b->g.grid) == 0 &&
           memcmp(b->g.tile, j->g->tile, (size_t)j->g->rank * sizeof *b->g.tile) == 0 &&
           memcmp(b->entries + first * ENTRY_BYTES, j->table + first * ENTRY_BYTES,
                  count * ENTRY_BYTES) == 0;
}

/* One tile of the new table: copied in the store from the base version's when unchanged (a
 * hard link on a local bucket, a CopyObject on S3: no bytes sent), else encoded and put. */
static void put_tile(void *ctx, size_t t)
{
    struct tile_job *j = ctx;
    char key[STORE_KEY_MAX + 1], from[STORE_KEY_MAX + 1];
    uint64_t first, count, idx[HJSON_DIMS_MAX];
    unsigned char *bytes = NULL;
    size_t len = 0;
    vtable_tile_span(j->g, t, &first, &count, idx);
    int rc = schema_chunk_key(j->tid, idx, j->g->rank, -1, key, sizeof key);
    if (rc == 0 && same_as_base_tile(j, first, count) &&
        schema_chunk_key(j->base->tid, idx, j->g->rank, -1, from, sizeof from) == 0 &&
        store_copy(j->d->vc->store, from, key) == 0) {
        j->rc[t] = 0;
        return;
    }
    if (rc == 0)
        rc = vtable_tile_encode(j->g, j->table, t, &bytes, &len);
    if (rc == 0)
        rc = store_put_new(j->d->vc->store, key, bytes, len);
    free(bytes);
    j->rc[t] = rc;
}

static int put_tiles(const struct dataset_ctx *d, const struct vtable_geom *g,
                     const unsigned char *table, const struct base_tab *base, const char *tid)
{
    int *rcs = calloc(g->tiles, sizeof *rcs);
    if (!rcs)
        return -ENOMEM;
    struct tile_job job = { d, g, table, base, tid, rcs };
    pfor(g->tiles, d->vc->workers ? d->vc->workers : 1, put_tile, &job);
    int rc = 0;
    for (uint64_t t = 0; rc == 0 && t < g->tiles; t++)
        rc = rcs[t];
    free(rcs);
    return rc;
}

static int put_table(const struct dataset_ctx *d, const uint64_t *grid, int rank,
                     struct sealed *chunks, size_t n, const struct base_tab *base,
                     const struct kept_list *kept, char tid[SCHEMA_ID_BUF])
{
    char key[STORE_KEY_MAX + 1], absent[URI_LEN];
    struct vtable_geom g;
    vtable_geom_new(&g, grid, rank);
    if (g.entries > TABLE_ENTRIES_MAX)
        return -EOPNOTSUPP;
    unsigned char *table = malloc(g.entries * ENTRY_BYTES);
    if (!table)
        return -ENOMEM;
    snprintf(absent, sizeof absent, "%s/db/%.17s/c/0", d->vc->bucket_name, d->pool + 2);
    for (uint64_t e = 0; e < g.entries; e++)
        put_entry(table + e * ENTRY_BYTES, 0, absent); /* fill: a non-empty URI (spec §12) */
    if (take_kept_entries(table, base->entries, kept, grid, rank) != 0) {
        free(table);
        return -EAGAIN;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t lin = 0;
        for (int k = 0; k < rank; k++)
            lin = lin * grid[k] + chunks[i].idx[k];
        put_entry(table + lin * ENTRY_BYTES, chunks[i].size, chunks[i].uri);
    }
    json_t *doc = NULL;
    int rc = mint_dataset(d->vroot, tid);
    if (rc == 0)
        rc = put_tiles(d, &g, table, base, tid);
    if (rc == 0 && !(doc = table_json(tid, d->vroot, &g)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = schema_obj_key(tid, key, sizeof key);
    if (rc == 0)
        rc = put_json(d->vc->store, key, doc);
    json_decref(doc);
    free(table);
    return rc;
}

/* The chunk keys of the dataset whose JSON is at json_key (same directory, partitions too). */
static int chunks_of(const struct dataset_ctx *d, const char *json_key, int rank,
                     struct sealed **out, size_t *n)
{
    size_t dir_len = strlen(json_key) - strlen(".dataset.json");
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < d->keys->n; i++) {
        const char *k = d->keys->keys[i];
        if (strncmp(k, json_key, dir_len) != 0 || ends_with(k, ".json"))
            continue;
        struct sealed *grown = realloc(*out, (*n + 1) * sizeof *grown);
        if (!grown)
            return -ENOMEM;
        *out = grown;
        memset(&grown[*n], 0, sizeof *grown);
        grown[*n].key = (char *)k;
        grown[*n].listed = &d->keys->listed[i];
        if (!(grown[*n].idx = calloc((size_t)rank, sizeof(uint64_t))))
            return -ENOMEM;
        (*n)++;
        if (chunk_index(k, rank, grown[*n - 1].idx) != 0)
            return -EOPNOTSUPP;
    }
    return 0;
}

static void sealed_free(struct sealed *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(s[i].idx);
    free(s);
}

/* Give doc an empty "creationProperties" just before its "layout", where HSDS has it (spec
 * §3.4): jansson appends, so the members after it are moved behind it. */
static json_t *add_creation_properties(json_t *doc)
{
    json_t *cprops = json_object(), *tail = json_object();
    const char *name;
    json_t *value;
    int after = 0, rc = cprops && tail ? 0 : -1;
    json_object_foreach(doc, name, value)
    {
        after = after || strcmp(name, "layout") == 0;
        if (after && rc == 0)
            rc = json_object_set(tail, name, value);
    }
    json_object_foreach(tail, name, value)
    {
        if (rc == 0)
            rc = json_object_del(doc, name);
    }
    if (rc == 0)
        rc = json_object_set(doc, "creationProperties", cprops);
    if (rc == 0)
        rc = json_object_update(doc, tail);
    json_decref(tail);
    json_decref(cprops);
    return rc == 0 ? cprops : NULL; /* doc holds it */
}

static int set_ref_layout(json_t *doc, const char *tid, const char *pool)
{
    json_t *cprops = json_object_get(doc, "creationProperties");
    json_t *lay = json_object(), *own = json_object();
    if (!cprops)
        cprops = add_creation_properties(doc);
    int rc = cprops && lay && own ? 0 : -ENOMEM;
    if (rc == 0 &&
        (json_object_set_new(lay, "class", json_string("H5D_CHUNKED_REF_INDIRECT")) != 0 ||
         json_object_set(lay, "dims", json_object_get(json_object_get(doc, "layout"), "dims")) !=
             0 ||
         json_object_set_new(lay, "chunk_table", json_string(tid)) != 0 ||
         json_object_set_new(own, "pool", json_string(pool)) != 0 ||
         json_object_set(lay, "h5osfs", own) != 0 || json_object_set(cprops, "layout", lay) != 0))
        rc = -ENOMEM;
    json_decref(lay);
    json_decref(own);
    return rc;
}

/*
 * The table of the base version's dataset that the dataset at json_key continues (same id
 * digits, same grid): entries*ENTRY_BYTES bytes into *out (malloc'd), or *out NULL when there
 * is none to use (no base version, another shape, a layout it was not pooled in). Only a
 * failing store is an error: without the table every chunk is sealed as before.
 */
/* The chunk grid of a dataset's JSON (shape over layout dims). 0 or -EINVAL. */
static int grid_of(const json_t *doc, uint64_t *grid, int *rank)
{
    uint64_t dims[HJSON_DIMS_MAX], cdims[HJSON_DIMS_MAX];
    int crank = 0;
    if (hjson_dims(json_object_get(json_object_get(doc, "shape"), "dims"), dims, rank) != 0 ||
        hjson_dims(json_object_get(json_object_get(doc, "layout"), "dims"), cdims, &crank) != 0 ||
        *rank != crank)
        return -EINVAL;
    for (int k = 0; k < *rank; k++) {
        if (cdims[k] == 0)
            return -EINVAL;
        grid[k] = dims[k] ? (dims[k] + cdims[k] - 1) / cdims[k] : 1;
    }
    return 0;
}

static int same_grid(const json_t *a, const json_t *b)
{
    uint64_t ga[HJSON_DIMS_MAX], gb[HJSON_DIMS_MAX];
    int ra = 0, rb = 0;
    return grid_of(a, ga, &ra) == 0 && grid_of(b, gb, &rb) == 0 && ra == rb &&
           memcmp(ga, gb, (size_t)ra * sizeof *ga) == 0;
}

/* With kept chunks (a ref-mode r+, which may resize a dataset within its grid: whole chunks
 * inside it keep their bytes), the same grid and chunk shape is enough; else the same shape. */
static int base_table(const struct dataset_ctx *d, const char *json_key, const json_t *doc,
                      uint64_t entries, int same_grid_enough, struct base_tab *out)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf = { 0 };
    memset(out, 0, sizeof *out);
    if (!d->base->vroot[0])
        return 0;
    moved_key(json_key, d->base->vroot, key, sizeof key);
    int rc = store_get(d->vc->store, key, JSON_MAX, &buf);
    if (rc != 0)
        return rc == -ENOENT ? 0 : rc; /* a dataset the base did not have */
    json_t *vdoc = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    const json_t *lay = json_object_get(json_object_get(vdoc, "creationProperties"), "layout");
    const char *tid = hjson_text(json_object_get(lay, "chunk_table"));
    int usable = tid && strlen(tid) < SCHEMA_ID_BUF &&
                 (json_equal(json_object_get(json_object_get(vdoc, "shape"), "dims"),
                             json_object_get(json_object_get(doc, "shape"), "dims")) ||
                  (same_grid_enough && same_grid(vdoc, doc))) &&
                 json_equal(json_object_get(json_object_get(vdoc, "layout"), "dims"),
                            json_object_get(json_object_get(doc, "layout"), "dims"));
    if (usable)
        snprintf(out->tid, sizeof out->tid, "%s", tid);
    json_decref(vdoc);
    if (!usable)
        return 0;
    rc = vtable_read(d->vc->store, out->tid, d->vc->workers, &out->g, &out->entries);
    if (rc == 0 && out->g.entries == entries)
        return 0;
    free(out->entries);
    out->entries = NULL;
    return rc == -ENOENT || rc == -EOPNOTSUPP || rc == -EIO || rc == 0 ? 0 : rc;
}

/* Each chunk's entry in the base version's table (none outside the grid). */
static void point_at_base(struct sealed *chunks, size_t n, const unsigned char *table,
                          const uint64_t *grid, int rank)
{
    for (size_t i = 0; table && i < n; i++) {
        uint64_t lin = 0;
        int inside = 1;
        for (int k = 0; k < rank; k++) {
            inside = inside && chunks[i].idx[k] < grid[k];
            lin = lin * grid[k] + chunks[i].idx[k];
        }
        chunks[i].base_entry = inside ? table + lin * ENTRY_BYTES : NULL;
    }
}

/* A fixed-size dataset: chunks sealed, a table, the JSON with the table layout. */
static int pooled_dataset(const struct dataset_ctx *d, const char *json_key, json_t *doc,
                          const char *vkey)
{
    uint64_t dims[HJSON_DIMS_MAX], cdims[HJSON_DIMS_MAX], grid[HJSON_DIMS_MAX];
    int rank = 0, crank = 0;
    struct sealed *chunks = NULL;
    size_t n = 0;
    char tid[SCHEMA_ID_BUF];
    if (hjson_dims(json_object_get(json_object_get(doc, "shape"), "dims"), dims, &rank) != 0 ||
        hjson_dims(json_object_get(json_object_get(doc, "layout"), "dims"), cdims, &crank) != 0 ||
        rank != crank)
        return -EOPNOTSUPP;
    for (int k = 0; k < rank; k++) {
        if (cdims[k] == 0)
            return -EOPNOTSUPP;
        grid[k] = dims[k] ? (dims[k] + cdims[k] - 1) / cdims[k] : 1;
    }
    uint64_t entries = 1;
    struct base_tab base = { 0 };
    for (int k = 0; k < rank; k++)
        entries *= grid[k];
    if (entries > TABLE_ENTRIES_MAX)
        return -EOPNOTSUPP;
    const struct kept_list *kept = versions_kept_of(d->vc->kept, json_key);
    int rc = chunks_of(d, json_key, rank, &chunks, &n);
    if (rc == 0)
        rc = base_table(d, json_key, doc, entries, kept != NULL, &base);
    if (rc == 0)
        point_at_base(chunks, n, base.entries, grid, rank);
    struct seal_job job = { d->vc, d->pool, d->base, chunks };
    if (rc == 0)
        pfor(n, d->vc->workers ? d->vc->workers : 1, seal_one, &job);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = chunks[i].rc;
        if (d->vc->stats) {
            d->vc->stats->chunks_pooled++;
            d->vc->stats->chunks_new += (uint64_t)chunks[i].fresh;
            d->vc->stats->chunks_copied += (uint64_t)chunks[i].copied;
            d->vc->stats->chunks_from_base += (uint64_t)chunks[i].from_base;
        }
        for (int k = 0; rc == 0 && k < rank; k++)
            if (chunks[i].idx[k] >= grid[k])
                rc = -EOPNOTSUPP;
    }
    if (rc == 0)
        rc = put_table(d, grid, rank, chunks, n, &base, kept, tid);
    if (rc == -EAGAIN)
        log_warn("%s: %s: the base version's table cannot name the chunks left in the pool "
                 "(another grid): a whole root is ingested instead",
                 d->vc->domain, json_key);
    if (rc == 0 && kept && d->vc->stats) {
        d->vc->stats->chunks_pooled += kept->n;
        d->vc->stats->chunks_from_base += kept->n;
    }
    if (rc == 0)
        rc = set_ref_layout(doc, tid, d->pool);
    if (rc == 0)
        rc = put_json(d->vc->store, vkey, doc);
    sealed_free(chunks, n);
    free(base.entries);
    return rc;
}

/* A chunk of object references names objects of the root: the version's copy must name
 * the version's (spec §4). Only unfiltered chunks can be edited as bytes. */
static int copy_reference_chunk(const struct dataset_ctx *d, const char *key, const char *dst)
{
    struct store_buf buf = { 0 };
    int rc = store_get(d->vc->store, key, CHUNK_MAX - 1, &buf);
    if (rc == 0) {
        move_ids_in_place(buf.data, buf.len, d->vc->root, d->vroot);
        rc = store_put_new(d->vc->store, dst, buf.data, buf.len);
    }
    store_buf_free(&buf);
    return rc;
}

static int has_filters(const json_t *doc)
{
    const json_t *f = json_object_get(json_object_get(doc, "creationProperties"), "filters");
    return json_is_array(f) && json_array_size(f) > 0;
}

/* Any other dataset: its chunks copied under V, its JSON as it is (ids moved). */
static int copied_dataset(const struct dataset_ctx *d, const char *json_key, const json_t *doc,
                          const char *text, const char *vkey)
{
    size_t dir_len = strlen(json_key) - strlen(".dataset.json");
    char dst[STORE_KEY_MAX + 1];
    unsigned traits = 0;
    /* out of memory fails the copy (ids copied unchanged would be wrong bytes); a type that
     * cannot be parsed has no references to rewrite */
    int rc = h5type_traits_of(json_object_get(doc, "type"), &traits);
    if (rc == -EINVAL)
        rc = 0;
    int refs = (traits & H5TYPE_HAS_REF) != 0;
    if (rc == 0 && refs && has_filters(doc))
        rc = -EOPNOTSUPP;
    for (size_t i = 0; rc == 0 && i < d->keys->n; i++) {
        const char *k = d->keys->keys[i];
        if (strncmp(k, json_key, dir_len) != 0 || ends_with(k, ".json"))
            continue;
        moved_key(k, d->vroot, dst, sizeof dst);
        rc = refs ? copy_reference_chunk(d, k, dst) : store_copy(d->vc->store, k, dst);
    }
    return rc == 0 ? store_put_new(d->vc->store, vkey, text, strlen(text)) : rc;
}

static int version_object(const struct dataset_ctx *d, const char *key)
{
    struct store_buf buf = { 0 };
    char vkey[STORE_KEY_MAX + 1], why[200];
    int rc = store_get(d->vc->store, key, JSON_MAX, &buf);
    char *text = rc == 0 ? moved((const char *)buf.data, buf.len, d->vc->root, d->vroot) : NULL;
    store_buf_free(&buf);
    if (rc != 0 || !text)
        return rc ? rc : -ENOMEM;
    moved_key(key, d->vroot, vkey, sizeof vkey);
    if (!ends_with(key, "/.dataset.json")) {
        rc = store_put_new(d->vc->store, vkey, text, strlen(text));
        free(text);
        return rc;
    }
    json_t *doc = hjson_loadb(text, strlen(text), why, sizeof why);
    if (!doc)
        rc = -EIO;
    else if (is_reference_layout(doc))
        rc = -EOPNOTSUPP; /* linked data: the file is not in the pool yet */
    else if (poolable(doc))
        rc = pooled_dataset(d, key, doc, vkey);
    else if (versions_kept_of(d->vc->kept, key))
        rc = -EAGAIN; /* chunks left in the pool of a dataset that is no longer pooled */
    else
        rc = copied_dataset(d, key, doc, text, vkey);
    json_decref(doc);
    free(text);
    return rc;
}

/* V's objects, the root group last: nothing names V before the list does anyway. */
static int write_version_root(const struct versions_commit *vc, const char *pool, const char *vroot,
                              const struct base_version *base)
{
    struct key_set keys = { 0 };
    char prefix[32];
    snprintf(prefix, sizeof prefix, "db/%.17s/", vc->root + 2);
    int rc = list_with_stats(vc->store, prefix, &keys);
    struct dataset_ctx d = { vc, pool, vroot, &keys, base };
    const char *root_group = NULL;
    for (size_t i = 0; rc == 0 && i < keys.n; i++) {
        const char *k = keys.keys[i];
        if (strcmp(k + strlen(prefix), ".group.json") == 0)
            root_group = k;
        else if (ends_with(k, "/.group.json") || ends_with(k, "/.dataset.json") ||
                 ends_with(k, "/.datatype.json"))
            rc = version_object(&d, k);
        else if (strcmp(k + strlen(prefix), ".h5osfs-file") == 0)
            rc = -EOPNOTSUPP;
    }
    if (rc == 0 && !root_group)
        rc = -EIO;
    if (rc == 0)
        rc = version_object(&d, root_group);
    if (rc == 0)
        rc = store_sync(vc->store);
    key_set_free(&keys);
    return rc;
}

/* ---- the names: folders, the version's domain object, the list ---- */

/* A version's (or a version folder's) HSDS domain object: readable by whoever may read the
 * domain, writable by nobody (schema_acls_read_only). */
static json_t *read_only_domain(const struct versions_commit *vc, const char *root, uint64_t n)
{
    json_t *doc = json_object(), *acls = schema_acls_read_only(vc->acls, vc->user);
    int bad = !doc || !acls;
    if (!bad && root)
        bad = json_object_set_new(doc, "root", json_string(root)) != 0;
    if (!bad)
        bad = json_object_set_new(doc, "owner", json_string(vc->user)) != 0 ||
              json_object_set(doc, "acls", acls) != 0 ||
              json_object_set_new(doc, "created", json_real(clock_wall())) != 0 ||
              json_object_set_new(doc, "lastModified", json_real(clock_wall())) != 0;
    if (!bad && n > 0) {
        json_t *own = json_pack("{sI}", "version", (json_int_t)n);
        bad = !own || json_object_set_new(doc, SCHEMA_H5OSFS_MEMBER, own) != 0;
    }
    json_decref(acls);
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* HSDS lists domains through folders: DIR/.versions/ and DIR/.versions/NAME/, made once. */
static int put_folder_once(const struct versions_commit *vc, const char *path)
{
    char key[STORE_KEY_MAX + 1], *text = NULL;
    struct store_stat st;
    if (schema_domain_key(path, key, sizeof key) != 0)
        return -EINVAL;
    if (store_head(vc->store, key, &st) == 0)
        return 0;
    json_t *doc = read_only_domain(vc, NULL, 0);
    int rc = doc ? hjson_dumps(doc, &text) : -ENOMEM;
    if (rc == 0)
        rc = store_put_if(vc->store, key, text, strlen(text), NULL);
    json_decref(doc);
    free(text);
    return rc == -ESTALE ? 0 : rc; /* another writer made it */
}

static int put_folders(const struct versions_commit *vc)
{
    char dir[STORE_KEY_MAX + 2];
    int rc = schema_versions_dir(vc->domain, dir, sizeof dir);
    char *slash = rc == 0 ? strrchr(dir, '/') : NULL;
    if (!slash)
        return -EINVAL;
    *slash = '\0';
    rc = put_folder_once(vc, dir);
    *slash = '/';
    return rc == 0 ? put_folder_once(vc, dir) : rc;
}

static int put_version_domain(const struct versions_commit *vc, const char *vroot, uint64_t n)
{
    char name[32], path[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1], *text = NULL;
    snprintf(name, sizeof name, "%" PRIu64 ".h5", n);
    int rc = schema_version_domain_path(vc->domain, name, path, sizeof path);
    if (rc == 0)
        rc = schema_domain_key(path, key, sizeof key);
    json_t *doc = rc == 0 ? read_only_domain(vc, vroot, n) : NULL;
    if (rc == 0)
        rc = doc ? hjson_dumps(doc, &text) : -ENOMEM;
    if (rc == 0)
        rc = store_put(vc->store, key, text, strlen(text));
    json_decref(doc);
    free(text);
    return rc;
}

/* The list at key and its etag (etag "" and a new list with a new pool when there is none). */
static int load_list(const struct versions_commit *vc, const char *key, struct vlist *l,
                     char etag[sizeof(((struct store_stat *)0)->etag)])
{
    char why[200], pool[SCHEMA_ID_BUF];
    int rc = ns_vlist_read(vc->store, key, l, etag, why, sizeof why);
    if (rc == -ENOENT) {
        etag[0] = '\0';
        return mint_root(pool) == 0 ? vlist_init(l, vc->domain, pool) : -EIO;
    }
    if (rc == -EINVAL) {
        log_error("%s: version list unusable (%s): no version kept until it is repaired", key, why);
        rc = -EIO;
    }
    return rc;
}

static int put_list(const struct versions_commit *vc, const char *key, const struct vlist *l,
                    const char *etag)
{
    char *text = NULL;
    int rc = vlist_dump(l, &text);
    if (rc == 0)
        rc = store_put_if(vc->store, key, text, strlen(text), etag[0] ? etag : NULL);
    free(text);
    return rc;
}

/* keep's expiry (§4.5) in the list being put: *expired (malloc'd, *n_expired long) gets the
 * numbers that lost their name, whose domain objects go once the put has landed. */
static int expire(struct vlist *l, unsigned keep, uint64_t head, uint64_t **expired,
                  size_t *n_expired)
{
    *n_expired = 0;
    if (keep == 0 || l->n_entries == 0)
        return 0;
    unsigned char *was_kept = malloc(l->n_entries);
    uint64_t *numbers = realloc(*expired, l->n_entries * sizeof *numbers);
    if (numbers)
        *expired = numbers;
    if (!was_kept || !numbers) {
        free(was_kept);
        return -ENOMEM;
    }
    for (size_t i = 0; i < l->n_entries; i++)
        was_kept[i] = !l->entries[i].error && l->entries[i].state == VLIST_KEPT;
    vlist_expire(l, keep, head);
    for (size_t i = 0; i < l->n_entries; i++)
        if (was_kept[i] && l->entries[i].state == VLIST_REMOVING)
            numbers[(*n_expired)++] = l->entries[i].n;
    free(was_kept);
    return 0;
}

/* The expired numbers' HSDS domain objects: the list, which h5osfs reads, no longer has them. */
static void drop_expired_objects(const struct versions_commit *vc, const uint64_t *expired,
                                 size_t n_expired)
{
    for (size_t i = 0; i < n_expired; i++) {
        char name[32];
        snprintf(name, sizeof name, "%" PRIu64 ".h5", expired[i]);
        int rc = vnames_delete_object(vc->store, vc->domain, name);
        if (rc != 0)
            log_warn("%s: version %" PRIu64 " expired (keep %u), but its HSDS domain object "
                     "stays (%s)",
                     vc->domain, expired[i], vc->keep, strerror(-rc));
    }
    if (n_expired > 0)
        log_info("%s: %zu version(s) expired (keep %u untagged)", vc->domain, n_expired, vc->keep);
}

/*
 * Version n's size, recorded in its list entry once the version is listed (a build needs the
 * list: its pool is what the version's table URIs are checked against), with one more
 * conditional put; so a listing need not build it. Best effort: when it fails (logged), the
 * entry keeps size 0 and listings build the file, as for lists written before sizes were.
 */
static void record_measured_size(const struct versions_commit *vc, const char *key, uint64_t n,
                                 const char *vroot)
{
    char name[32], path[STORE_KEY_MAX + 2], stamp[64] = "";
    char etag[sizeof(((struct store_stat *)0)->etag)];
    uint64_t size = 0;
    if (!vc->measure)
        return;
    snprintf(name, sizeof name, "%" PRIu64 ".h5", n);
    int rc = schema_version_domain_path(vc->domain, name, path, sizeof path);
    if (rc == 0)
        rc = vc->measure(vc->measure_ctx, path, vroot, &size, stamp, sizeof stamp);
    for (int tries = 0; rc == 0 && tries < LIST_TRIES; tries++) {
        struct vlist l;
        if ((rc = load_list(vc, key, &l, etag)) != 0)
            break;
        const struct vlist_entry *found = vlist_entry_of(&l, n);
        struct vlist_entry *e = found && !found->error ? &l.entries[found - l.entries] : NULL;
        char *copy = e ? strdup(stamp) : NULL;
        if (e && copy) {
            free(e->stamp);
            e->stamp = copy;
            e->size = size;
            rc = put_list(vc, key, &l, etag);
        } else {
            free(copy);
            rc = e ? -ENOMEM : 0; /* gone already (expired, removed): nothing to record */
        }
        vlist_free(&l);
        if (rc != -ESTALE)
            break;
    }
    if (rc != 0)
        log_warn("%s: version %" PRIu64 "'s size not recorded (%s): listings build it", vc->domain,
                 n, strerror(-rc));
}

static void committer(const struct versions_commit *vc, char *buf, size_t len)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    snprintf(buf, len, "%s%s%s", vc->user, host[0] ? "@" : "", host);
}

/* The listed version whose commit made base_root, the domain's root this commit replaces. */
static void base_version_of(const struct vlist *l, const char *base_root, struct base_version *b)
{
    for (size_t i = 0; base_root[0] && i < l->n_entries; i++) {
        const struct vlist_entry *e = &l->entries[i];
        if (!e->error && e->state == VLIST_KEPT &&
            (strcmp(e->current, base_root) == 0 || strcmp(e->root, base_root) == 0)) {
            snprintf(b->vroot, sizeof b->vroot, "%s", e->root);
            b->time = e->time;
            b->is_root = strcmp(e->root, base_root) == 0;
        }
    }
}

int versions_commit(const struct versions_commit *vc, uint64_t *n, char vroot[SCHEMA_ID_BUF])
{
    char key[STORE_KEY_MAX + 1], etag[sizeof(((struct store_stat *)0)->etag)], by[320];
    struct vlist l;
    uint64_t *expired = NULL;
    size_t n_expired = 0;
    if (schema_id_version(vc->root) != 2 || schema_vlist_key(vc->domain, key, sizeof key) != 0) {
        log_warn("%s: versions are kept for v2 domains only: committed without a version",
                 vc->domain);
        return -EOPNOTSUPP;
    }
    struct base_version base = { "", 0, 0 };
    int rc = load_list(vc, key, &l, etag);
    if (rc == 0)
        base_version_of(&l, vc->base_root, &base);
    if (rc == 0 && vc->stats)
        vc->stats->base_is_version = base.is_root;
    if (rc == 0)
        rc = mint_root(vroot);
    if (rc == 0 && vc->reserve && (rc = vc->reserve(vc->reserve_ctx, vroot)) != 0)
        vroot[0] = '\0'; /* nothing of it was written */
    if (rc == 0)
        rc = write_version_root(vc, l.pool, vroot, &base);
    if (rc == 0 && vc->crash_point)
        vc->crash_point("vroot");
    if (rc == 0)
        rc = put_folders(vc);
    committer(vc, by, sizeof by);
    for (int tries = 0; rc == 0; tries++) {
        const struct vlist_entry *won = vlist_committed_on(&l, vc->base_root);
        if (won) {
            log_error("%s: version %" PRIu64 " of another writer was committed on the same base "
                      "root %s first: this commit loses (ESTALE)",
                      vc->domain, won->n, vc->base_root);
            rc = -ESTALE;
            break;
        }
        rc = vlist_append_on(&l, vc->base_root, vc->root, vroot, clock_wall(), by, n);
        if (rc == 0)
            rc = expire(&l, vc->keep, *n, &expired, &n_expired);
        if (rc == 0)
            rc = put_version_domain(vc, vroot, *n);
        if (rc == 0)
            rc = put_list(vc, key, &l, etag);
        if (rc != -ESTALE || tries + 1 >= LIST_TRIES)
            break;
        vlist_free(&l); /* another writer changed the list: read it again, append again */
        rc = load_list(vc, key, &l, etag);
    }
    vlist_free(&l);
    if (rc == -EOPNOTSUPP)
        log_warn("%s: this domain cannot be kept as a version yet (linked data, a chunk table "
                 "of more than %u entries, or a chunk of 2 GiB): committed without a version",
                 vc->domain, TABLE_ENTRIES_MAX);
    else if (rc != 0 && rc != -EAGAIN)
        log_error("%s: version not kept (%s): the commit stops here", vc->domain, strerror(-rc));
    else if (vc->crash_point)
        vc->crash_point("listed");
    if (rc == 0)
        drop_expired_objects(vc, expired, n_expired);
    free(expired);
    if (rc == 0)
        record_measured_size(vc, key, *n, vroot);
    return rc;
}

/* The domain's list, parsed: 0, 1 (none), or -EIO (logged). */
static int read_list(struct store *store, const char *domain, struct vlist *l)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf = { 0 };
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return 1;
    int rc = store_get(store, key, VLIST_MAX_BYTES, &buf);
    if (rc == -ENOENT)
        return 1;
    if (rc == 0 && vlist_parse((const char *)buf.data, buf.len, l, why, sizeof why) != 0) {
        log_error("%s: version list unusable (%s)", key, why);
        rc = -EIO;
    }
    store_buf_free(&buf);
    return rc;
}

int versions_listed(struct store *store, const char *domain, const char *new_root,
                    char vroot[SCHEMA_ID_BUF])
{
    struct vlist l;
    int rc = read_list(store, domain, &l);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    const struct vlist_entry *e = vlist_listed_as(&l, new_root);
    if (e && vroot)
        snprintf(vroot, SCHEMA_ID_BUF, "%s", e->root);
    rc = e != NULL;
    vlist_free(&l);
    return rc;
}

int versions_is_version_root(struct store *store, const char *domain, const char *root)
{
    struct vlist l;
    int rc = read_list(store, domain, &l);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    rc = 0;
    for (size_t i = 0; root[0] && i < l.n_entries; i++)
        rc |= !l.entries[i].error && strcmp(l.entries[i].root, root) == 0;
    vlist_free(&l);
    return rc;
}
