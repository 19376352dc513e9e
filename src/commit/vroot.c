/* vroot: a new version's root written from the ingested one; see vroot.h. */
#include "vroot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "vkept.h"
#include "vtab.h"

#define CHUNK_MAX VSEAL_CHUNK_MAX
#define TABLE_ENTRIES_MAX VTAB_ENTRIES_MAX
#define JSON_MAX VTAB_JSON_MAX
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

int vroot_mint(char out[SCHEMA_ID_BUF])
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
    if (vroot_mint(r) != 0)
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

/* ---- one dataset ---- */

struct dataset_ctx {
    const struct versions_commit *vc;
    const char *pool, *vroot;
    const struct key_set *keys;
    const struct base_version *base;
    const char *root_group; /* its key under the root being kept (NULL until it is written) */
    char **linked_tables;   /* JSON keys of the chunk tables of linked datasets */
    size_t n_linked_tables;
    /* The pool file V's linked datasets name (its name; "" none), copied there by this
     * version (file_new) or named as the base version names it; file_named: datasets that
     * name it. */
    char file_name[33];
    char file_key[STORE_KEY_MAX + 1];
    char file_etag[SCHEMA_POOL_ETAG_BUF]; /* the file's etag, recorded with V ("" unknown) */
    int file_new;
    size_t file_named;
    int *etags; /* VSEAL_ETAGS_*: what the commit's first sealed chunks told */
};

/* Does a linked layout of root name the file V keeps: root's own (1; V's pool file, if any,
 * replaces it) or that pool file itself (SCHEMA_LINKED_POOL_FILE: an r+ in ref mode carries
 * the base's layouts over)? 0: neither. */
static int names_kept_file(const struct dataset_ctx *d, const json_t *lay, const char *root)
{
    const char *key = NULL;
    int ok = schema_version_linked_ok(lay, d->vc->bucket_name, root, &key);
    return ok == SCHEMA_LINKED_POOL_FILE && (!d->file_name[0] || strcmp(key, d->file_key) != 0)
               ? 0
               : ok;
}

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

/* The table of the base version's dataset the one at json_key continues (vtab_base_read). */
static int base_table(const struct dataset_ctx *d, const char *json_key, const json_t *doc,
                      uint64_t entries, int same_grid_enough, struct base_tab *out)
{
    char key[STORE_KEY_MAX + 1];
    if (d->base->vroot[0])
        moved_key(json_key, d->base->vroot, key, sizeof key);
    return vtab_base_read(d->vc->store, d->vc->workers, d->base->vroot[0] ? key : NULL, doc,
                          entries, same_grid_enough, out);
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
        vtab_point_at_base(chunks, n, base.entries, grid, rank);
    if (rc == 0)
        vseal_chunks(d->vc, d->pool, d->base, chunks, n, d->etags);
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
        rc = mint_dataset(d->vroot, tid);
    if (rc == 0)
        rc = vtab_put(d->vc, d->pool, d->vroot, grid, rank, chunks, n, &base, kept, tid);
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
        rc = vtab_put_json(d->vc->store, vkey, doc);
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

/* ---- data linked into the root's own file (ingest=link) ---- */

/* A dataset linked into the root's own file: the version keeps its own copy of that file
 * (vroot_write), which the JSON, its ids moved, names already; chunk objects it may have
 * beside (a contiguous layout of size 0) are copied. A layout naming anything else (a file
 * elsewhere in the bucket, which anyone may replace; another root's table; per-entry URIs)
 * cannot be kept as it reads today. */
static int linked_dataset(const struct dataset_ctx *d, const char *json_key, json_t *doc,
                          const char *text, const char *vkey)
{
    json_t *lay = json_object_get(json_object_get(doc, "creationProperties"), "layout");
    char uri[STORE_KEY_MAX + 256], *out = NULL;
    if (!names_kept_file(d, lay, d->vroot))
        return -EOPNOTSUPP;
    if (!d->file_name[0] || !schema_linked_own_file(hjson_text(json_object_get(lay, "file_uri")),
                                                    d->vc->bucket_name, d->vroot))
        return copied_dataset(d, json_key, doc, text, vkey); /* as it is */
    /* the pool file, named as HSDS names a linked file (spec §8): "BUCKET/KEY" */
    if (snprintf(uri, sizeof uri, "%s/%s", d->vc->bucket_name, d->file_key) >= (int)sizeof uri)
        return -EIO;
    int rc = json_object_set_new(lay, "file_uri", json_string(uri)) == 0 ? 0 : -ENOMEM;
    if (rc == 0)
        rc = hjson_dumps(doc, &out);
    if (rc == 0)
        rc = copied_dataset(d, json_key, doc, out, vkey);
    free(out);
    return rc;
}

static int is_linked_table(const struct dataset_ctx *d, const char *key)
{
    for (size_t i = 0; i < d->n_linked_tables; i++)
        if (strcmp(d->linked_tables[i], key) == 0)
            return 1;
    return 0;
}

/* The JSON key of the chunk table the dataset at key reads its linked chunks through, if it
 * has one and is kept (out ""): such a table holds offsets into the file, and a version copies
 * it as it is; pooled, it would be a table read through a table, which HSDS refuses (spec
 * §8.3). A layout a version cannot keep (linked_dataset) names no table to copy. */
static int linked_table_of(struct dataset_ctx *d, const char *key, char *out, size_t len)
{
    struct store_buf buf = { 0 };
    char why[200];
    out[0] = '\0';
    int rc = store_get(d->vc->store, key, JSON_MAX, &buf);
    json_t *doc = rc == 0 ? hjson_loadb((const char *)buf.data, buf.len, why, sizeof why) : NULL;
    store_buf_free(&buf);
    if (rc != 0 || !doc)
        return rc ? rc : -EIO;
    const json_t *lay = json_object_get(json_object_get(doc, "creationProperties"), "layout");
    const char *cls = hjson_text(json_object_get(lay, "class"));
    const char *tid = hjson_text(json_object_get(lay, "chunk_table"));
    const char *id = hjson_text(json_object_get(doc, "id"));
    int kept = names_kept_file(d, lay, d->vc->root);
    d->file_named += kept == SCHEMA_LINKED_POOL_FILE;
    if (cls && strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0 && tid && id && strcmp(tid, id) != 0 &&
        kept && schema_obj_key(tid, out, len) != 0)
        rc = -EOPNOTSUPP;
    json_decref(doc);
    return rc;
}

static int find_linked_tables(struct dataset_ctx *d)
{
    size_t cap = 0;
    char tkey[STORE_KEY_MAX + 1];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < d->keys->n; i++) {
        if (!ends_with(d->keys->keys[i], "/.dataset.json"))
            continue;
        rc = linked_table_of(d, d->keys->keys[i], tkey, sizeof tkey);
        if (rc != 0 || !tkey[0])
            continue;
        char **grown = grow_array(d->linked_tables, &cap, d->n_linked_tables + 1, sizeof *grown, 8);
        if (!grown)
            return -ENOMEM;
        d->linked_tables = grown;
        if (!(grown[d->n_linked_tables] = strdup(tkey)))
            return -ENOMEM;
        d->n_linked_tables++;
    }
    return rc;
}

static void free_linked_tables(struct dataset_ctx *d)
{
    for (size_t i = 0; i < d->n_linked_tables; i++)
        free(d->linked_tables[i]);
    free(d->linked_tables);
}

/* The root's linked file kept with V (a hard link on a local bucket; on S3 a copy in the
 * store): nobody rewrites it, but the root it came from is collected once replaced. Into the
 * pool when V's layouts name a new pool file; as V's own in ref mode; not at all when the
 * base version's pool file is named. */
static int copy_linked_file(struct dataset_ctx *d, const char *key, const struct store_stat *listed)
{
    char dst[STORE_KEY_MAX + 1];
    struct store_stat st;
    if (d->file_name[0] && !d->file_new)
        return 0;
    int rc = d->file_name[0] ? (snprintf(dst, sizeof dst, "%s", d->file_key), 0)
                             : schema_linked_file_key(d->vroot, dst, sizeof dst);
    if (rc == 0)
        rc = store_copy_sized(d->vc->store, key, dst, listed->size);
    /* the copy's own etag: an S3 copy in parts has another than its source */
    if (rc == 0 && d->file_name[0])
        rc = store_head(d->vc->store, dst, &st);
    if (rc == 0 && d->file_name[0])
        memcpy(d->file_etag, st.etag, sizeof d->file_etag);
    return rc;
}

int vroot_file_name(struct store *store, const char *vroot, char name[33],
                    char etag[SCHEMA_POOL_ETAG_BUF])
{
    char key[STORE_KEY_MAX + 1], why[200], kept[SCHEMA_POOL_ETAG_BUF];
    struct store_buf buf = { 0 };
    name[0] = '\0';
    if (etag)
        etag[0] = '\0';
    if (schema_obj_key(vroot, key, sizeof key) != 0)
        return -EINVAL;
    int rc = store_get(store, key, JSON_MAX, &buf);
    json_t *doc = rc == 0 ? hjson_loadb((const char *)buf.data, buf.len, why, sizeof why) : NULL;
    store_buf_free(&buf);
    if (rc == 0 && (!doc || schema_pool_file_named(doc, name, kept, why, sizeof why) != 0))
        rc = -EBADMSG;
    if (rc == 0 && etag)
        memcpy(etag, kept, sizeof kept);
    json_decref(doc);
    return rc;
}

/* The pool file of d->pool the base version's linked datasets name, as d->file_name and
 * d->file_key: 1; 0 none (no base, a version kept before pool files or of no linked file, or
 * one whose group cannot be read now: the file is then copied again, which costs space, not
 * the version); -ENOMEM. */
static int base_pool_file(struct dataset_ctx *d)
{
    d->file_name[0] = d->file_etag[0] = '\0';
    if (!d->base->vroot[0])
        return 0;
    if (vroot_file_name(d->vc->store, d->base->vroot, d->file_name, d->file_etag) == -ENOMEM)
        return -ENOMEM;
    if (d->file_name[0] &&
        schema_pool_file_key(d->pool, d->file_name, d->file_key, sizeof d->file_key) == 0)
        return 1;
    d->file_name[0] = '\0';
    return 0;
}

/* Which pool file V's linked datasets name, for a root with a file of its own (doc/versions.md
 * §3.2): the base version's when this commit carried that file over unchanged (an r+) and
 * the pool file has its size and etag; else a new one, named by V's id digits, copied at the
 * end. */
static int choose_pool_file(struct dataset_ctx *d, const struct store_stat *listed)
{
    struct store_stat st;
    /* the same size and etag: on a local bucket both are links to one inode, on S3 copies the
     * store made the same way (CopyObject keeps the ETag; UploadPartCopy gives equal ones for
     * equal parts). Anything else (a file replaced in place, another part size) is copied. */
    int rc = d->vc->linked_file_from_base ? base_pool_file(d) : 0;
    if (rc < 0)
        return rc;
    /* and the etag the base version kept, where it kept one: a file replaced since is not
     * named again (the root's own file, whatever it holds, is copied instead) */
    if (rc == 1 && store_head(d->vc->store, d->file_key, &st) == 0 && st.size == listed->size &&
        strcmp(st.etag, listed->etag) == 0 &&
        (!d->file_etag[0] || strcmp(st.etag, d->file_etag) == 0)) {
        memcpy(d->file_etag, st.etag, sizeof d->file_etag);
        return 0;
    }
    d->file_new = 1;
    d->file_etag[0] = '\0'; /* known once copied */
    rc = vroot_pool_file_key(d->pool, d->vroot, d->file_key, sizeof d->file_key);
    const char *name = rc == 0 ? schema_pool_file_name(d->file_key) : NULL;
    if (name)
        memcpy(d->file_name, name, 33);
    return rc == 0 && !name ? -EIO : rc;
}

int vroot_pool_file_key(const char *pool, const char *vroot, char *key, size_t len)
{
    char name[33];
    size_t k = 0;
    for (const char *p = vroot + 2; *p && k < 32; p++)
        if (*p != '-')
            name[k++] = *p;
    name[k] = '\0';
    return schema_pool_file_key(pool, name, key, len);
}

/* V's root group says whose pool its tables name ("h5osfs": {"pool": P}, vpool.h): what a
 * version list alone may not claim when V is to be deleted. */
static int root_group_object(const struct dataset_ctx *d, const char *text, const char *vkey)
{
    char why[200], *out = NULL;
    json_t *doc = hjson_loadb(text, strlen(text), why, sizeof why);
    int rc = json_is_object(doc) ? 0 : -EIO;
    json_t *own = rc == 0 ? json_pack("{s:s}", "pool", d->pool) : NULL;
    if (own && d->file_name[0] &&
        json_object_set_new(own, SCHEMA_POOL_FILE, json_string(d->file_name)) != 0)
        json_decref(own), own = NULL;
    if (own && d->file_name[0] && d->file_etag[0] &&
        json_object_set_new(own, SCHEMA_POOL_FILE_ETAG, json_string(d->file_etag)) != 0)
        json_decref(own), own = NULL;
    if (rc == 0 && (!own || json_object_set_new(doc, SCHEMA_H5OSFS_MEMBER, own) != 0))
        rc = -ENOMEM;
    if (rc == 0)
        rc = hjson_dumps(doc, &out);
    if (rc == 0)
        rc = store_put_new(d->vc->store, vkey, out, strlen(out));
    free(out);
    json_decref(doc);
    return rc;
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
    if (d->root_group && strcmp(key, d->root_group) == 0) {
        rc = root_group_object(d, text, vkey);
        free(text);
        return rc;
    }
    if (!ends_with(key, "/.dataset.json")) {
        rc = store_put_new(d->vc->store, vkey, text, strlen(text));
        free(text);
        return rc;
    }
    json_t *doc = hjson_loadb(text, strlen(text), why, sizeof why);
    if (!doc)
        rc = -EIO;
    else if (is_linked_table(d, key))
        rc = copied_dataset(d, key, doc, text, vkey);
    else if (is_reference_layout(doc))
        rc = linked_dataset(d, key, doc, text, vkey);
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
int vroot_write(const struct versions_commit *vc, const char *pool, const char *vroot,
                const struct base_version *base)
{
    struct key_set keys = { 0 };
    char prefix[32], file_key[STORE_KEY_MAX + 1];
    snprintf(prefix, sizeof prefix, "db/%.17s/", vc->root + 2);
    int rc = list_with_stats(vc->store, prefix, &keys);
    int etags = VSEAL_ETAGS_UNKNOWN;
    struct dataset_ctx d = {
        .vc = vc, .pool = pool, .vroot = vroot, .keys = &keys, .base = base, .etags = &etags
    };
    const char *root_group = NULL;
    size_t file = keys.n; /* the root's linked file, if it has one */
    if (rc == 0)
        rc = schema_linked_file_key(vc->root, file_key, sizeof file_key);
    for (size_t i = 0; rc == 0 && i < keys.n; i++)
        if (strcmp(keys.keys[i], file_key) == 0) /* only then are there linked tables */
            file = i;
    if (rc == 0 && file < keys.n)
        rc = choose_pool_file(&d, &keys.listed[file]);
    else if (rc == 0 && base_pool_file(&d) < 0)
        rc = -ENOMEM;
    /* linked tables: a root with its own file, or one whose layouts name the base's pool file
     * (an r+ in ref mode: the layouts carried over as they were) */
    if (rc == 0 && (file < keys.n || d.file_name[0]))
        rc = find_linked_tables(&d);
    if (rc == 0 && file == keys.n && d.file_named == 0)
        d.file_name[0] = '\0'; /* the base's file, named by none of V's datasets */
    for (size_t i = 0; rc == 0 && i < keys.n; i++) {
        const char *k = keys.keys[i];
        if (strcmp(k + strlen(prefix), ".group.json") == 0)
            root_group = k;
        else if (ends_with(k, "/.group.json") || ends_with(k, "/.dataset.json") ||
                 ends_with(k, "/.datatype.json"))
            rc = version_object(&d, k);
    }
    if (rc == 0 && !root_group)
        rc = -EIO;
    /* once every object is kept: a version refused part way copies no file (S3: its bytes) */
    if (rc == 0 && file < keys.n)
        rc = copy_linked_file(&d, keys.keys[file], &keys.listed[file]);
    d.root_group = root_group;
    if (rc == 0)
        rc = version_object(&d, root_group);
    if (rc == 0)
        rc = store_sync(vc->store);
    free_linked_tables(&d);
    key_set_free(&keys);
    return rc;
}
