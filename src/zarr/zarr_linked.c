/* zarr_linked: datasets linked to HDF5 files of the bucket (spec §8) in the Zarr view. Their
 * chunk files are byte ranges of the linked file: from the layout's chunk map, its contiguous
 * range (one chunk), or its chunk table (read when the dataset's chunks are first asked for).
 * The file_uri is resolved as the image resolves it (schema_linked_uri_key). */
#include "zarr_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/log.h"

#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), -EINVAL)
#define TABLE_JSON_MAX (16u << 20)
#define TABLE_CHUNK_MAX (256u << 20) /* as the image's REF_RANGE_MAX */
#define VTABLE_URI_MAX 1024          /* a pooled entry's URI: a bucket and a key at most */

static int json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -EINVAL;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* Chunk idx of a is bytes [off, off + size) of the linked file. */
static int add_range(struct zarr_array *a, const uint64_t *idx, uint64_t off, uint64_t size)
{
    char name[HJSON_DIMS_MAX * 21];
    if (zarr_index_name(a, idx, name, sizeof name) != 0)
        return -EINVAL;
    /* "0_1" and "00_1" name one chunk: the lower range stays whatever the order, as in the
     * image (refs.c, by_place) */
    const struct zarr_chunk *had = strmap_get(a->chunks, name);
    if (had && (had->off < off || (had->off == off && had->size <= size)))
        return 0;
    return zarr_chunk_put(a, name, a->link_key, off, size, 1);
}

/* A chunk map's index string "i_j_k" (spec §2.4, leading zeros allowed as HSDS parses them):
 * 0, 1 (outside a's grid: never read, as the image skips it) or -EINVAL (malformed). */
static int map_index(const struct zarr_array *a, const char *s, uint64_t *idx)
{
    int outside = 0;
    for (int k = 0; k < a->rank; k++) {
        uint64_t x = 0;
        if (*s < '0' || *s > '9')
            return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (x > (UINT64_MAX - 9) / 10)
                return -EINVAL;
            x = x * 10 + (uint64_t)(*s - '0');
        }
        if (*s != (k + 1 < a->rank ? '_' : '\0'))
            return -EINVAL;
        s += k + 1 < a->rank;
        outside |= x >= (a->shape[k] + a->chunk[k] - 1) / a->chunk[k];
        idx[k] = x;
    }
    return outside;
}

static int chunk_map(const json_t *lay, struct zarr_array *a, char *why, size_t why_len)
{
    const json_t *map = json_object_get(lay, "chunks"), *v;
    const char *index;
    if (!json_is_object(map))
        return WHY("H5D_CHUNKED_REF without chunks");
    json_object_foreach((json_t *)map, index, v)
    {
        uint64_t idx[HJSON_DIMS_MAX], off, size;
        int in = map_index(a, index, idx);
        if (in < 0 || json_array_size(v) != 2 || json_u64(json_array_get(v, 0), &off) ||
            json_u64(json_array_get(v, 1), &size))
            return WHY("chunk map entry \"%s\" is not index: [offset, size]", index);
        if (in == 1 || size == 0)
            continue; /* outside the grid, or not allocated: fill, as the image reads it */
        int rc = add_range(a, idx, off, size);
        if (rc != 0)
            return rc == -ENOMEM ? rc : WHY("chunk map entry \"%s\" has no name", index);
    }
    return 0;
}

static int contiguous(const json_t *lay, struct zarr_array *a, char *why, size_t why_len)
{
    uint64_t off, size, idx[HJSON_DIMS_MAX] = { 0 };
    if (json_u64(json_object_get(lay, "offset"), &off) ||
        json_u64(json_object_get(lay, "size"), &size))
        return WHY("H5D_CONTIGUOUS_REF without offset and size");
    if (size == 0)
        return WHY("H5D_CONTIGUOUS_REF of size 0 (chunks in the bucket)");
    if (size != a->chunk_bytes)
        return WHY("H5D_CONTIGUOUS_REF of %llu bytes, not the dataset's %zu",
                   (unsigned long long)size, a->chunk_bytes);
    return add_range(a, idx, off, size);
}

int zarr_linked_array(const json_t *dset, struct zarr_array *a, const char *bucket,
                      const char *root_id, int in_pool, char *why, size_t why_len)
{
    const json_t *lay = json_object_get(json_object_get(dset, "creationProperties"), "layout");
    const char *uri = hjson_text(json_object_get(lay, "file_uri")), *key;
    if (!uri)
        return WHY("a linked layout without file_uri (chunk tables naming files per entry)");
    int rc = schema_linked_uri_key(uri, bucket, root_id, in_pool, &key);
    if (rc == -EPERM)
        return WHY("file_uri \"%s\" names an object of a domain, not an HDF5 file", uri);
    if (rc != 0 || strlen(key) > STORE_KEY_MAX)
        return WHY("file_uri \"%s\" is not a key of this bucket", uri);
    if (!(a->link_key = strdup(key)))
        return -ENOMEM;
    if (a->link == ZARR_LINK_TABLE) {
        const char *table = hjson_text(json_object_get(lay, "chunk_table"));
        if (!table || schema_id_class(table) != 'd')
            return WHY("H5D_CHUNKED_REF_INDIRECT without a chunk_table dataset");
        snprintf(a->link_table, sizeof a->link_table, "%s", table);
        return 0; /* its chunks when first asked for: the table is read then */
    }
    rc = a->link == ZARR_LINK_MAP ? chunk_map(lay, a, why, why_len)
                                  : contiguous(lay, a, why, why_len);
    if (rc == 0)
        a->listed = 1;
    return rc;
}

/* ---- chunk tables ---- */

/* One integer member of a table element: where and how it is stored. */
struct member {
    size_t off, size;
    int big;
};

struct table {
    uint64_t dims[HJSON_DIMS_MAX], cdims[HJSON_DIMS_MAX];
    int rank;
    size_t elem;        /* a packed element */
    size_t chunk_bytes; /* a table chunk, decoded */
    struct member offset, length;
    struct member uri; /* a pooled table's: the entry's object, a fixed-length string */
    struct codec_spec spec;
    char prefix[STORE_KEY_MAX + 1]; /* of its chunk keys */
};

/* Field k of a compound: an integer's place in the packed element. */
static int member_of(const json_t *fields, size_t k, struct member *m, char *why, size_t why_len)
{
    size_t at = 0, size = 0;
    for (size_t i = 0; i <= k; i++) {
        at += size;
        if (h5type_stored_size(json_object_get(json_array_get(fields, i), "type"), &size) != 0)
            return WHY("chunk table field %zu has no fixed size", i);
    }
    const json_t *type = json_object_get(json_array_get(fields, k), "type");
    const char *base = hjson_text(json_is_string(type) ? type : json_object_get(type, "base"));
    if (!base || strncmp(base, "H5T_STD_", 8) != 0 || size == 0 || size > 8)
        return WHY("chunk table field %zu is not an integer", k);
    *m = (struct member){ at, size, strcmp(base + strlen(base) - 2, "BE") == 0 };
    return 0;
}

/* Field 2 of a pooled table: the object's URI, a fixed-length string (vtable.h). */
static int uri_member_of(const json_t *fields, struct member *m, char *why, size_t why_len)
{
    size_t at = 0, size = 0;
    for (size_t i = 0; i <= 2; i++) {
        at += size;
        if (h5type_stored_size(json_object_get(json_array_get(fields, i), "type"), &size) != 0)
            return WHY("chunk table field %zu has no fixed size", i);
    }
    const json_t *type = json_object_get(json_array_get(fields, 2), "type");
    const char *cls = hjson_text(json_object_get(type, "class"));
    if (!cls || strcmp(cls, "H5T_STRING") != 0 || size == 0)
        return WHY("a pooled chunk table's field 2 is no fixed-length string");
    *m = (struct member){ at, size, 0 };
    return 0;
}

static uint64_t member_value(const struct member *m, const unsigned char *elem)
{
    uint64_t v = 0;
    for (size_t i = 0; i < m->size; i++)
        v |= (uint64_t)elem[m->off + (m->big ? m->size - 1 - i : i)] << (8 * i);
    return v;
}

static int table_shape(const json_t *t, const struct zarr_array *a, struct table *tb, char *why,
                       size_t why_len)
{
    int rank, crank;
    const json_t *type = json_object_get(t, "type"), *fields = json_object_get(type, "fields");
    if (hjson_dims(json_object_get(json_object_get(t, "shape"), "dims"), tb->dims, &rank) != 0 ||
        hjson_dims(json_object_get(json_object_get(t, "layout"), "dims"), tb->cdims, &crank) != 0 ||
        rank != a->rank || crank != rank)
        return WHY("chunk table's shape or layout is not of the dataset's rank");
    if ((h5type_traits(type) & H5TYPE_HAS_VLEN) || json_array_size(fields) < 2 ||
        h5type_stored_size(type, &tb->elem) != 0)
        return WHY("chunk table's type is no fixed-size compound");
    int rc = member_of(fields, 0, &tb->offset, why, why_len);
    if (rc == 0)
        rc = member_of(fields, 1, &tb->length, why, why_len);
    if (rc == 0 && a->link == ZARR_LINK_POOL)
        rc = json_array_size(fields) >= 3 ? uri_member_of(fields, &tb->uri, why, why_len)
                                          : WHY("a pooled chunk table without its URI field");
    if (rc != 0)
        return rc;
    tb->rank = rank;
    tb->chunk_bytes = tb->elem;
    for (int k = 0; k < rank; k++) {
        if (tb->cdims[k] == 0 || tb->chunk_bytes > TABLE_CHUNK_MAX / tb->cdims[k])
            return WHY("chunk table's chunks are empty or too large");
        tb->chunk_bytes *= tb->cdims[k];
    }
    const json_t *filters = json_object_get(json_object_get(t, "creationProperties"), "filters");
    return codec_spec_from_filters(json_is_array(filters) ? filters : NULL, tb->elem, 0,
                                   CODEC_SOURCE_HSDS, &tb->spec, why, why_len);
}

/* A pooled entry: chunk idx of a is bytes [off, off + size) of the pool object its URI
 * names, which must be of a's pool. A range, so that a missing object is an error, not fill. */
static int add_pooled(struct zarr_array *a, const struct table *tb, const uint64_t *idx,
                      const unsigned char *elem, uint64_t off, uint64_t size, char *why,
                      size_t why_len)
{
    char uri[VTABLE_URI_MAX + 1], name[HJSON_DIMS_MAX * 21];
    const char *key = NULL;
    size_t n = tb->uri.size < VTABLE_URI_MAX ? tb->uri.size : VTABLE_URI_MAX;
    memcpy(uri, elem + tb->uri.off, n);
    uri[n] = '\0';
    if (schema_pool_uri_check(uri, a->pool_bucket, a->pool, &key) != 0 ||
        strlen(key) > STORE_KEY_MAX)
        return WHY("chunk table entry names \"%.60s\", outside pool %s", uri, a->pool);
    if (zarr_index_name(a, idx, name, sizeof name) != 0)
        return -EINVAL;
    return zarr_chunk_put(a, name, key, off, size, 1);
}

/* The entries of one table chunk (index cidx) as chunks of a. */
static int table_entries(struct zarr_array *a, const struct table *tb, const uint64_t *cidx,
                         const unsigned char *bytes, char *why, size_t why_len)
{
    uint64_t n = tb->chunk_bytes / tb->elem;
    for (uint64_t e = 0; e < n; e++) {
        uint64_t idx[HJSON_DIMS_MAX], rest = e;
        int inside = 1;
        for (int k = tb->rank - 1; k >= 0; k--) {
            idx[k] = cidx[k] * tb->cdims[k] + rest % tb->cdims[k];
            rest /= tb->cdims[k];
            inside &=
                idx[k] < tb->dims[k] && idx[k] < (a->shape[k] + a->chunk[k] - 1) / a->chunk[k];
        }
        const unsigned char *elem = bytes + e * tb->elem;
        uint64_t size = member_value(&tb->length, elem);
        if (!inside || size == 0)
            continue; /* past the table's extent, or not allocated: fill */
        uint64_t off = member_value(&tb->offset, elem);
        int rc = a->link == ZARR_LINK_POOL ? add_pooled(a, tb, idx, elem, off, size, why, why_len)
                                           : add_range(a, idx, off, size);
        if (rc != 0)
            return rc;
    }
    return 0;
}

struct table_walk {
    struct store *store;
    struct zarr_array *a;
    const struct table *tb;
    const char *domain;
    int rc;
};

/* One key of the table's listing: a chunk "i_j" (or "p<N>/i_j"), read and added. */
static int table_chunk(void *ctx, const char *key, const struct store_stat *st)
{
    (void)st;
    struct table_walk *w = ctx;
    const struct table *tb = w->tb;
    const char *rel = key + strlen(tb->prefix), *slash = strchr(rel, '/');
    struct zarr_array grid = { .rank = tb->rank };
    uint64_t cidx[HJSON_DIMS_MAX];
    char why[ZARR_WHY_MAX] = "";
    for (int k = 0; k < tb->rank; k++) {
        grid.shape[k] = tb->dims[k];
        grid.chunk[k] = tb->cdims[k];
    }
    if (w->rc != 0 || strchr(rel, '.') ||
        zarr_parse_index(&grid, slash ? slash + 1 : rel, '_', cidx) != 0)
        return 0; /* .dataset.json, and anything that is no chunk of the table */
    struct store_buf raw;
    unsigned char *bytes = malloc(tb->chunk_bytes);
    int rc = bytes ? store_get(w->store, key, 2 * tb->chunk_bytes + 4096, &raw) : -ENOMEM;
    if (rc == 0) {
        rc = codec_decode(&tb->spec, raw.data, raw.len, bytes, tb->chunk_bytes, why, sizeof why);
        store_buf_free(&raw);
    }
    if (rc == 0)
        rc = table_entries(w->a, tb, cidx, bytes, why, sizeof why);
    free(bytes);
    if (rc != 0 && rc != -ENOMEM)
        log_warn("%s: zarr view: chunk table chunk %s of %s: %s", w->domain, key, w->a->id,
                 *why ? why : strerror(-rc));
    w->rc = rc == 0 ? 0 : rc == -ENOMEM ? rc : -EIO;
    return 0;
}

int zarr_linked_table(struct store *store, const char *domain, struct zarr_array *a)
{
    struct table tb = { .rank = 0 };
    char key[STORE_KEY_MAX + 1] = "", why[ZARR_WHY_MAX] = "";
    struct store_buf buf;
    json_t *t = NULL;
    int rc = schema_obj_key(a->link_table, key, sizeof key);
    if (rc == 0)
        rc = store_get(store, key, TABLE_JSON_MAX, &buf);
    if (rc == 0) {
        t = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
        store_buf_free(&buf);
        rc = t ? table_shape(t, a, &tb, why, sizeof why) : -EINVAL;
    }
    json_decref(t);
    if (rc == 0) {
        snprintf(tb.prefix, sizeof tb.prefix, "%s", key);
        strrchr(tb.prefix, '/')[1] = '\0';
        struct table_walk w = { store, a, &tb, domain, 0 };
        rc = store_list_keys(store, tb.prefix, table_chunk, &w);
        if (rc == 0)
            rc = w.rc;
    }
    if (rc == 0) {
        a->listed = 1;
        return 0;
    }
    if (rc != -ENOMEM)
        log_warn("%s: zarr view: chunk table %s of %s dataset %s: %s: EIO", domain, key,
                 a->link == ZARR_LINK_POOL ? "pooled" : "linked", a->id,
                 *why ? why : strerror(-rc));
    return rc == -ENOMEM ? rc : -EIO;
}

int zarr_pooled_array(struct store *store, const char *domain, const char *root_id,
                      const char *bucket, const json_t *dset, struct zarr_array *a,
                      char pool_ok[SCHEMA_ID_BUF], char *why, size_t why_len)
{
    const json_t *lay = json_object_get(json_object_get(dset, "creationProperties"), "layout");
    const char *pool =
        hjson_text(json_object_get(json_object_get(lay, SCHEMA_H5OSFS_MEMBER), "pool"));
    const char *table = hjson_text(json_object_get(lay, "chunk_table"));
    const struct schema_fetch fetch = { store, store_get_bytes };
    if (!pool || json_object_get(lay, "file_uri") || !table || schema_id_class(table) != 'd' ||
        strlen(pool) >= SCHEMA_ID_BUF)
        return WHY("a version's reference layout without its pool or chunk table");
    int rc = pool_ok[0] ? (strcmp(pool_ok, pool) == 0
                               ? 0
                               : WHY("pool %s is not the domain's (%s)", pool, pool_ok))
                        : schema_pool_check(domain, root_id, pool, &fetch, why, why_len);
    if (rc != 0)
        return rc;
    snprintf(pool_ok, SCHEMA_ID_BUF, "%s", pool);
    snprintf(a->pool, sizeof a->pool, "%s", pool);
    snprintf(a->link_table, sizeof a->link_table, "%s", table);
    return (a->pool_bucket = strdup(bucket)) ? 0 : -ENOMEM;
}
