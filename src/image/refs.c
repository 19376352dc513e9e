/*
 * refs: datasets whose data stays in an HDF5 file of the bucket (spec §8): H5D_CONTIGUOUS_REF
 * (a byte range), H5D_CHUNKED_REF (a map of filtered chunks) and H5D_CHUNKED_REF_INDIRECT (a
 * chunk table dataset, optionally "hyperchunked": several file chunks per HSDS chunk).
 *
 * At build time the table is turned into pieces: for every HSDS chunk, the n_sub file chunks
 * it is made of (offset, size, which file). Only the pieces that exist are kept, sorted, so
 * memory follows the linked chunks, not the grid the dataset declares. A read fetches each
 * piece with a ranged GET, decodes it as HDF5 filter output and places it; absent pieces are
 * the fill value.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/why.h"

#define REF_GRID_MAX 10000000u /* linked chunks (pieces, contiguous chunks) one dataset may have */
#define REF_RANGE_MAX (256u << 20) /* largest byte range one chunk may need */

/* ---- file_uri -> key ---- */

/* in_pool: uri was checked to be an object of the domain's own version pool (a version's
 * table), the one object of a domain that a layout may name besides its root's. */
static int uri_key(struct builder *b, const char *uri, int in_pool, char **key, char *why,
                   size_t why_len)
{
    const char *k;
    int rc = schema_linked_uri_key(uri, b->src->bucket_name, b->root_id, in_pool, &k);
    if (rc == 0 && store_key_check(k) != 0)
        rc = -EINVAL;
    if (rc == -EPERM)
        return why_reject(why, why_len,
                          "file_uri \"%s\" names an object of a domain, not an HDF5 file", uri);
    if (rc != 0)
        return why_reject(why, why_len, "file_uri \"%s\" is not a key of this bucket", uri);
    *key = strdup(k);
    return *key ? 0 : -ENOMEM;
}

static int add_uri(struct builder *b, struct image_dataset *ds, const char *uri, int in_pool,
                   uint32_t *index, char *why, size_t why_len)
{
    char *key = NULL, *both = NULL;
    int rc = uri_key(b, uri, in_pool, &key, why, why_len);
    if (rc != 0)
        return rc;
    /* by a map, not a search of ds->uris: a version's table names up to a million distinct
     * pool objects, and a search per entry made building it quadratic (1e5: ~10 s CPU) */
    if (!b->uri_index && !(b->uri_index = strmap_new()))
        rc = -ENOMEM;
    if (rc == 0 && asprintf(&both, "%s\n%s", ds->id ? ds->id : "", key) < 0)
        rc = -ENOMEM;
    uintptr_t found = rc == 0 ? (uintptr_t)strmap_get(b->uri_index, both) : 0;
    if (found) {
        *index = (uint32_t)(found - 1);
        free(both);
        free(key);
        return 0;
    }
    char **n = rc == 0 ? grow_array(ds->uris, &ds->cap_uris, ds->n_uris + 1, sizeof *n, 4) : NULL;
    if (n)
        ds->uris = n;
    if (!n || strmap_put(b->uri_index, both, (void *)(uintptr_t)(ds->n_uris + 1), NULL) != 0) {
        free(both);
        free(key);
        return -ENOMEM;
    }
    free(both);
    ds->uris[ds->n_uris] = key;
    *index = (uint32_t)ds->n_uris++;
    return 0;
}

/* ---- helpers ---- */

static uint64_t grid_total(const struct image_dataset *ds)
{
    uint64_t total = 1;
    for (int k = 0; k < ds->rank; k++)
        total = total <= REF_GRID_MAX / (ds->grid[k] ? ds->grid[k] : 1) ? total * ds->grid[k]
                                                                        : REF_GRID_MAX + 1;
    return total;
}

static int json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -EINVAL;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* ---- the pieces of a dataset ---- */

struct piece_list {
    struct image_dataset *ds; /* pieces are appended to ds->pieces */
    size_t cap;
};

static int add_piece(struct piece_list *l, struct ref_piece piece, char *why, size_t why_len)
{
    struct image_dataset *ds = l->ds;
    if (ds->n_pieces == l->cap) {
        if (l->cap >= REF_GRID_MAX)
            return why_reject(why, why_len, "more than %u linked chunks", REF_GRID_MAX);
        struct ref_piece *n = grow_array(ds->pieces, &l->cap, l->cap + 1, sizeof *n, 64);
        if (!n)
            return -ENOMEM;
        ds->pieces = n;
    }
    ds->pieces[ds->n_pieces++] = piece;
    return 0;
}

static int cmp_u64(uint64_t x, uint64_t y)
{
    return x < y ? -1 : x > y;
}

/* By place, then by source, so that two entries for one place ("0" and "00" in a chunk map)
 * give the same result whatever order they come in. */
static int by_place(const void *a, const void *b)
{
    const struct ref_piece *x = a, *y = b;
    int c = cmp_u64(x->chunk, y->chunk);
    c = c ? c : cmp_u64(x->sub, y->sub);
    c = c ? c : cmp_u64(x->uri, y->uri);
    c = c ? c : cmp_u64(x->off, y->off);
    return c ? c : cmp_u64(x->size, y->size);
}

/* Sort the pieces, keep one per place, and list the chunks that have any, in order. */
static int present_chunks(struct image_dataset *ds, uint64_t **out, size_t *n)
{
    size_t w = 0;
    if (ds->n_pieces > 1)
        qsort(ds->pieces, ds->n_pieces, sizeof *ds->pieces, by_place);
    for (size_t i = 0; i < ds->n_pieces; i++)
        if (w == 0 || ds->pieces[i].chunk != ds->pieces[w - 1].chunk ||
            ds->pieces[i].sub != ds->pieces[w - 1].sub)
            ds->pieces[w++] = ds->pieces[i];
    ds->n_pieces = w;
    *n = 0;
    *out = malloc((w ? w : 1) * sizeof **out);
    if (!*out)
        return -ENOMEM;
    for (size_t i = 0; i < w; i++)
        if (*n == 0 || (*out)[*n - 1] != ds->pieces[i].chunk)
            (*out)[(*n)++] = ds->pieces[i].chunk;
    return 0;
}

/* ---- H5D_CONTIGUOUS_REF ---- */

static int contiguous(struct builder *b, const json_t *lay, struct image_dataset *ds,
                      uint64_t **chunks, size_t *n, char *why, size_t why_len)
{
    uint32_t uri;
    uint64_t off, size, total = grid_total(ds);
    const char *file = hjson_text(json_object_get(lay, "file_uri"));
    if (json_u64(json_object_get(lay, "offset"), &off) ||
        json_u64(json_object_get(lay, "size"), &size) || !file)
        return why_reject(why, why_len, "H5D_CONTIGUOUS_REF without file_uri, offset and size");
    if (size == 0)
        return 1; /* nothing linked: chunks live in the bucket (spec §8.1) */
    if (total > REF_GRID_MAX)
        return why_reject(why, why_len, "more than %u linked chunks", REF_GRID_MAX);
    int rc = add_uri(b, ds, file, 0, &uri, why, why_len);
    if (rc != 0)
        return rc;
    ds->origin = ORIGIN_REF_CONTIG;
    ds->contig_off = off;
    ds->contig_size = size;
    *chunks = malloc((total ? total : 1) * sizeof **chunks);
    if (!*chunks)
        return -ENOMEM;
    for (uint64_t c = 0; c < total; c++)
        (*chunks)[c] = c;
    *n = total;
    return 0;
}

/* ---- H5D_CHUNKED_REF ---- */

static int chunk_map(struct builder *b, const json_t *lay, struct image_dataset *ds,
                     uint64_t **chunks, size_t *n, char *why, size_t why_len)
{
    uint32_t uri;
    const char *file = hjson_text(json_object_get(lay, "file_uri"));
    const json_t *map = json_object_get(lay, "chunks");
    struct piece_list pieces = { ds, 0 };
    if (!file || !json_is_object(map))
        return why_reject(why, why_len, "H5D_CHUNKED_REF without file_uri and chunks");
    ds->n_sub = 1;
    int rc = add_uri(b, ds, file, 0, &uri, why, why_len);
    const char *index;
    json_t *v;
    json_object_foreach((json_t *)map, index, v)
    {
        uint64_t linear, off, size;
        if (rc != 0)
            break;
        int in = build_parse_index(ds, index, &linear);
        if (in < 0 || json_array_size(v) != 2 || json_u64(json_array_get(v, 0), &off) ||
            json_u64(json_array_get(v, 1), &size) || size > UINT32_MAX) {
            why_set(why, why_len, "chunk map entry \"%s\" is not index: [offset, size]", index);
            rc = -EINVAL;
        } else if (in == 0 && size > 0) {
            rc = add_piece(&pieces, (struct ref_piece){ linear, off, (uint32_t)size, uri, 0 }, why,
                           why_len);
        }
    }
    ds->origin = ORIGIN_REF_PIECES;
    return rc ? rc : present_chunks(ds, chunks, n);
}

/* ---- H5D_CHUNKED_REF_INDIRECT ---- */

struct table {
    json_t *json; /* the chunk table dataset */
    hid_t tid;
    struct image_dataset ds; /* its own chunk grid in the bucket */
    int has_uri_field;
    char pool[SCHEMA_ID_BUF]; /* a version's table: every entry names an object of this pool */
};

static uint64_t member_u64(hid_t tid, unsigned k, const unsigned char *elem)
{
    hid_t mt = H5Tget_member_type(tid, k);
    size_t off = H5Tget_member_offset(tid, k), size = mt >= 0 ? H5Tget_size(mt) : 0;
    int big = mt >= 0 && H5Tget_order(mt) == H5T_ORDER_BE;
    uint64_t v = 0;
    for (size_t i = 0; i < size && i < 8; i++)
        v |= (uint64_t)elem[off + (big ? size - 1 - i : i)] << (8 * i);
    if (mt >= 0)
        H5Tclose(mt);
    return v;
}

/* The URI of a table element (field 2): a vlen string (char *) or a fixed string. */
static int member_uri(hid_t tid, const unsigned char *elem, char *out, size_t len)
{
    hid_t mt = H5Tget_member_type(tid, 2);
    size_t off = H5Tget_member_offset(tid, 2);
    int rc = -EINVAL;
    if (mt >= 0 && H5Tget_class(mt) == H5T_STRING) {
        const char *s;
        size_t n;
        if (H5Tis_variable_str(mt) > 0) {
            memcpy(&s, elem + off, sizeof s);
            n = s ? strlen(s) : 0;
        } else {
            s = (const char *)elem + off;
            n = strnlen(s, H5Tget_size(mt));
        }
        if (n < len) {
            memcpy(out, s ? s : "", n);
            out[n] = '\0';
            rc = 0;
        }
    }
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

static int entry_to_piece(struct builder *b, struct table *t, struct image_dataset *ds,
                          const unsigned char *elem, uint32_t default_uri, struct ref_piece *out,
                          char *why, size_t why_len)
{
    uint64_t off = member_u64(t->tid, 0, elem), size = member_u64(t->tid, 1, elem);
    char uri_text[STORE_KEY_MAX + 64];
    uint32_t uri = default_uri;
    if (size == 0)
        return 0;
    if (size > UINT32_MAX)
        return why_reject(why, why_len, "chunk table entry of %" PRIu64 " bytes", size);
    if (t->has_uri_field) {
        int rc = member_uri(t->tid, elem, uri_text, sizeof uri_text);
        if (rc == 0 && !uri_text[0])
            return 0; /* HSDS would reuse a stale URI here (spec §12); we do not */
        if (rc == 0 && t->pool[0] &&
            schema_pool_uri_check(uri_text, b->src->bucket_name, t->pool, NULL) != 0)
            return why_reject(why, why_len, "chunk table entry names \"%s\", outside pool %s",
                              uri_text, t->pool);
        if (rc != 0 || (rc = add_uri(b, ds, uri_text, t->pool[0] != 0, &uri, why, why_len)) != 0)
            return rc ? rc : -EINVAL;
    }
    *out = (struct ref_piece){ 0, off, (uint32_t)size, uri, 0 };
    return 0;
}

/* Where table entry `entry` (linear in the table's shape) goes: chunk and piece. 0, or 1 when
 * that is outside the dataset's grid. */
static int place_entry(const struct image_dataset *ds, const struct table *t, uint64_t entry,
                       uint64_t *chunk, uint32_t *piece)
{
    uint64_t coord[IMAGE_MAX_RANK];
    for (int k = ds->rank - 1; k >= 0; k--) {
        coord[k] = entry % t->ds.dims[k];
        entry /= t->ds.dims[k];
    }
    *chunk = 0;
    *piece = 0;
    for (int k = 0; k < ds->rank; k++) {
        uint64_t f = ds->chunk_dims[k] / ds->sub_dims[k];
        if (coord[k] / f >= ds->grid[k])
            return 1;
        *chunk = *chunk * ds->grid[k] + coord[k] / f;
        *piece = *piece * (uint32_t)f + (uint32_t)(coord[k] % f);
    }
    return 0;
}

static int table_chunk(struct builder *b, struct table *t, struct piece_list *pieces,
                       uint64_t linear, uint32_t default_uri, char *why, size_t why_len)
{
    struct image_dataset *ds = pieces->ds;
    char key[STORE_KEY_MAX + 1];
    struct store_buf raw = { 0 };
    unsigned char *bytes = NULL;
    void *buf = NULL;
    size_t len, n = 1;
    int vlen = (h5type_traits(json_object_get(t->json, "type")) & H5TYPE_HAS_VLEN) != 0;
    for (int k = 0; k < t->ds.rank; k++)
        n *= t->ds.chunk_dims[k];
    int rc = image_chunk_key(&t->ds, linear, key, sizeof key);
    if (rc == 0)
        rc = store_get(b->src->store, key, REF_RANGE_MAX, &raw);
    if (rc == -ENOENT)
        return 0; /* fastlink tables fill in lazily: no entry, no data */
    if (rc == 0)
        rc = vlen ? codec_decode_alloc(&t->ds.codec, raw.data, raw.len, REF_RANGE_MAX, &bytes, &len,
                                       why, why_len)
             : (bytes = malloc(len = t->ds.chunk_bytes)) == NULL
                 ? -ENOMEM
                 : codec_decode(&t->ds.codec, raw.data, raw.len, bytes, len, why, why_len);
    store_buf_free(&raw);
    struct h5value_refs refs = { NULL, NULL };
    if (rc == 0)
        rc = h5value_from_stored(json_object_get(t->json, "type"), t->tid, bytes, len, n, &refs,
                                 &buf, why, why_len);
    uint64_t cidx[IMAGE_MAX_RANK];
    image_chunk_index(&t->ds, linear, cidx);
    size_t esize = H5Tget_size(t->tid);
    for (size_t e = 0; rc == 0 && e < n; e++) {
        uint64_t coord[IMAGE_MAX_RANK], rest = e, entry = 0;
        int inside = 1;
        for (int k = t->ds.rank - 1; k >= 0; k--) {
            coord[k] = cidx[k] * t->ds.chunk_dims[k] + rest % t->ds.chunk_dims[k];
            rest /= t->ds.chunk_dims[k];
            inside &= coord[k] < t->ds.dims[k];
        }
        for (int k = 0; k < t->ds.rank; k++)
            entry = entry * t->ds.dims[k] + coord[k];
        if (!inside)
            continue;
        struct ref_piece piece = { 0 };
        rc = entry_to_piece(b, t, ds, (const unsigned char *)buf + e * esize, default_uri, &piece,
                            why, why_len);
        if (rc == 0 && piece.size > 0 && place_entry(ds, t, entry, &piece.chunk, &piece.sub) == 0)
            rc = add_piece(pieces, piece, why, why_len);
    }
    if (buf)
        h5value_free(t->tid, buf, n);
    free(bytes);
    return rc == -ENOENT ? -EIO : rc;
}

/* The table dataset's own geometry, as build_data describes datasets. */
static int table_open(struct builder *b, const char *table_id, struct image_dataset *ds,
                      struct table *t, char *why, size_t why_len)
{
    const json_t *type, *shape, *layout;
    memset(t, 0, sizeof *t);
    t->tid = H5I_INVALID_HID;
    if (schema_id_class(table_id) != 'd')
        return why_reject(why, why_len, "chunk table %s is not a dataset id", table_id);
    char jwhy[320];
    int rc = build_load_json(b, table_id, &t->json, jwhy, sizeof jwhy);
    if (rc == -EIO || rc == -ENOMEM)
        return rc; /* the store failed: the build does */
    if (rc != 0)
        return why_reject(why, why_len, "chunk table: %s", jwhy);
    type = json_object_get(t->json, "type");
    shape = json_object_get(shape = t->json, "shape");
    layout = json_object_get(t->json, "layout");
    rc = h5type_build(type, &t->tid, why, why_len);
    if (rc != 0)
        return rc;
    int nfields = H5Tget_class(t->tid) == H5T_COMPOUND ? H5Tget_nmembers(t->tid) : 0;
    const json_t *dims = json_object_get(shape, "dims"), *cdims = json_object_get(layout, "dims");
    if (nfields < 2 || json_array_size(dims) != (size_t)ds->rank ||
        json_array_size(cdims) != (size_t)ds->rank)
        return why_reject(why, why_len, "chunk table %s is not a compound of the dataset's rank",
                          table_id);
    t->has_uri_field = nfields >= 3;
    t->ds.rank = ds->rank;
    t->ds.id = strdup(table_id);
    t->ds.path = strdup(table_id); /* for log lines about its chunk keys */
    t->ds.chunk_bytes = H5Tget_size(t->tid);
    for (int k = 0; k < ds->rank; k++) {
        uint64_t d, c;
        if (json_u64(json_array_get(dims, (size_t)k), &d) ||
            json_u64(json_array_get(cdims, (size_t)k), &c) || c == 0)
            return why_reject(why, why_len, "chunk table %s has a bad shape or layout", table_id);
        if (t->ds.chunk_bytes > REF_RANGE_MAX / c) { /* decoded whole before use */
            return why_reject(why, why_len, "chunk table %s has chunks of more than %u bytes",
                              table_id, REF_RANGE_MAX);
        }
        t->ds.dims[k] = d;
        t->ds.chunk_dims[k] = c;
        t->ds.grid[k] = (d + c - 1) / c;
        t->ds.chunk_bytes *= c;
    }
    size_t stored = 0;
    int vlen = (h5type_traits(type) & H5TYPE_HAS_VLEN) != 0;
    if (!t->ds.id || !t->ds.path)
        return -ENOMEM;
    /* the prefix its chunk keys share, to list them (as build_data does for datasets) */
    if (build_chunk_key_prefix(table_id, ds->rank, t->ds.key_prefix, sizeof t->ds.key_prefix) != 0)
        return why_reject(why, why_len, "chunk table %s has no chunk keys", table_id);
    if ((rc = h5type_stored_size(type, &stored)) == -ENOMEM)
        return rc;
    if (rc == 0)
        t->ds.chunk_bytes = t->ds.chunk_bytes / H5Tget_size(t->tid) * stored;
    const json_t *filters =
        json_object_get(json_object_get(t->json, "creationProperties"), "filters");
    return codec_spec_from_filters(filters, stored, vlen, CODEC_SOURCE_HSDS, &t->ds.codec, why,
                                   why_len);
}

static void table_close(struct table *t)
{
    if (t->tid >= 0)
        H5Tclose(t->tid);
    json_decref(t->json);
    image_dataset_clear(&t->ds);
}

static int sub_geometry(const json_t *lay, struct image_dataset *ds, char *why, size_t why_len)
{
    const json_t *hyper = json_object_get(lay, "hyper_dims");
    ds->n_sub = 1;
    for (int k = 0; k < ds->rank; k++) {
        uint64_t h = ds->chunk_dims[k];
        if (hyper &&
            (json_array_size(hyper) != (size_t)ds->rank ||
             json_u64(json_array_get(hyper, (size_t)k), &h) || h == 0 ||
             ds->chunk_dims[k] % h != 0 || ds->n_sub > REF_GRID_MAX / (ds->chunk_dims[k] / h)))
            return why_reject(why, why_len, "hyper_dims do not divide the chunk dims");
        ds->sub_dims[k] = h;
        ds->n_sub *= (uint32_t)(ds->chunk_dims[k] / h);
    }
    return 0;
}

/* The pool a layout names ("h5osfs": {"pool": P}), or NULL. */
static const char *layout_pool(const json_t *lay)
{
    return hjson_text(json_object_get(json_object_get(lay, "h5osfs"), "pool"));
}

/* claimed is a pool the domain being built may name (pool.h). The answer is kept for the rest
 * of the build: every pooled dataset would read the version list (and the domain object) again.
 * 0 or -EINVAL (why says why). */
static int pool_owned(struct builder *b, const char *claimed, char *why, size_t why_len)
{
    const struct schema_fetch fetch = { b->src->store, store_get_bytes };
    if (b->pool_ok[0])
        return strcmp(b->pool_ok, claimed) == 0
                   ? 0
                   : why_reject(why, why_len, "pool %s is not the domain's (%s)", claimed,
                                b->pool_ok);
    int rc = schema_pool_check(b->domain_path, b->root_id, claimed, &fetch, why, why_len);
    if (rc == 0)
        snprintf(b->pool_ok, sizeof b->pool_ok, "%s", claimed);
    return rc;
}

/* Versions name chunks only in their own domain's pool: a REF layout of a version is a
 * per-entry table over that pool, or it is refused. *pool gets it ("" for other domains). */
static int pool_of_layout(struct builder *b, const json_t *lay, char pool[SCHEMA_ID_BUF], char *why,
                          size_t why_len)
{
    const char *claimed = layout_pool(lay);
    pool[0] = '\0';
    int is_version = schema_is_versions_path(b->domain_path) == 1;
    if (!is_version && !claimed)
        return 0;
    if (!claimed || json_object_get(lay, "file_uri"))
        return why_reject(why, why_len, "a version's reference layout without its pool");
    int rc = pool_owned(b, claimed, why, why_len);
    if (rc == 0)
        snprintf(pool, SCHEMA_ID_BUF, "%s", claimed);
    return rc;
}

static int indirect(struct builder *b, const json_t *lay, struct image_dataset *ds,
                    uint64_t **chunks, size_t *n, char *why, size_t why_len)
{
    struct table t;
    struct piece_list pieces = { ds, 0 };
    uint32_t default_uri = 0;
    const char *file = hjson_text(json_object_get(lay, "file_uri"));
    const char *table_id = hjson_text(json_object_get(lay, "chunk_table"));
    if (!table_id)
        return why_reject(why, why_len, "H5D_CHUNKED_REF_INDIRECT without chunk_table");
    char pool[SCHEMA_ID_BUF];
    int rc = pool_of_layout(b, lay, pool, why, why_len);
    if (rc == 0)
        rc = sub_geometry(lay, ds, why, why_len);
    if (rc == 0)
        rc = table_open(b, table_id, ds, &t, why, why_len);
    else
        memset(&t, 0, sizeof t), t.tid = H5I_INVALID_HID;
    if (rc == 0)
        memcpy(t.pool, pool, sizeof pool);
    ds->pooled = rc == 0 && pool[0] && !file && ds->n_sub == 1;
    if (rc == 0 && file) {
        t.has_uri_field = 0;
        rc = add_uri(b, ds, file, 0, &default_uri, why, why_len);
    } else if (rc == 0 && !t.has_uri_field) {
        why_set(why, why_len, "no file_uri in the layout and none in the chunk table");
        rc = -EINVAL;
    }
    /* only the table chunks that exist: probing every index of a large grid is a GET each */
    uint64_t *table_chunks = NULL;
    size_t n_table_chunks = 0;
    if (rc == 0)
        rc = build_list_chunks(b, &t.ds, &table_chunks, &n_table_chunks);
    if (rc == -EFBIG) {
        why_set(why, why_len, "chunk table %s has too many chunks to probe", table_id);
        rc = -EINVAL;
    }
    for (size_t c = 0; rc == 0 && c < n_table_chunks; c++)
        rc = table_chunk(b, &t, &pieces, table_chunks[c], default_uri, why, why_len);
    free(table_chunks);
    table_close(&t);
    ds->origin = ORIGIN_REF_PIECES;
    return rc ? rc : present_chunks(ds, chunks, n);
}

int build_ref_chunks(struct builder *b, struct build_obj *o, struct image_dataset *ds,
                     uint64_t **chunks, size_t *n, char *why, size_t why_len)
{
    const json_t *cprops = json_object_get(o->json, "creationProperties");
    const json_t *lay = json_object_get(cprops, "layout");
    const char *cls = hjson_text(json_object_get(lay, "class"));
    *chunks = NULL;
    *n = 0;
    /* pool objects are chunks as HSDS stores them; other references are pieces of HDF5 files */
    enum codec_source source = layout_pool(lay) ? CODEC_SOURCE_HSDS : CODEC_SOURCE_HDF5;
    int rc = codec_spec_from_filters(json_object_get(cprops, "filters"), ds->itemsize, 0, source,
                                     &ds->codec, why, why_len);
    if (rc != 0)
        return rc;
    if (schema_is_versions_path(b->domain_path) == 1 &&
        strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") != 0)
        return why_reject(why, why_len, "a version's reference layout without its pool");
    if (strcmp(cls, "H5D_CONTIGUOUS_REF") == 0)
        return contiguous(b, lay, ds, chunks, n, why, why_len);
    if (strcmp(cls, "H5D_CHUNKED_REF") == 0)
        return chunk_map(b, lay, ds, chunks, n, why, why_len);
    if (strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0)
        return indirect(b, lay, ds, chunks, n, why, why_len);
    return why_reject(why, why_len, "unknown layout class %s", cls);
}

/* ---- reading ---- */

/* Copy a block of `dims` elements (row-major) into buf (row-major `into`) at element `at`. */
static void place_block(unsigned char *dst, const uint64_t *into, const unsigned char *src,
                        const uint64_t *dims, const uint64_t *at, int rank, size_t itemsize)
{
    uint64_t rows = 1, idx[IMAGE_MAX_RANK] = { 0 };
    for (int k = 0; k < rank - 1; k++)
        rows *= dims[k];
    size_t row_bytes = dims[rank - 1] * itemsize;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t off = 0;
        for (int k = 0; k < rank; k++)
            off = off * into[k] + at[k] + (k < rank - 1 ? idx[k] : 0);
        memcpy(dst + off * itemsize, src + r * row_bytes, row_bytes);
        for (int k = rank - 2; k >= 0 && ++idx[k] == dims[k]; k--)
            idx[k] = 0;
    }
}

static int fetch_range(const struct chunk_job *job, uint32_t uri, uint64_t off, uint64_t len,
                       struct store_buf *out)
{
    const struct image_dataset *ds = job->ds;
    if (uri >= ds->n_uris || len > REF_RANGE_MAX)
        return -EIO;
    int rc = store_get_range(job->img->store, ds->uris[uri], off, len, out);
    if (rc == 0 && out->len != len) {
        log_error("%s: %s: %s ends at %" PRIu64 ", before the linked bytes %" PRIu64 "+%" PRIu64,
                  job->img->domain_path, ds->path, ds->uris[uri], off + out->len, off, len);
        store_buf_free(out);
        return -EIO;
    }
    if (rc == -ENOENT)
        log_error("%s: %s: linked file %s is missing", job->img->domain_path, ds->path,
                  ds->uris[uri]);
    return rc ? -EIO : 0;
}

static int load_piece(const struct chunk_job *job, const struct ref_piece *p, unsigned char *dst,
                      size_t dst_len)
{
    struct store_buf raw = { 0 };
    char why[160] = "";
    int rc = fetch_range(job, p->uri, p->off, p->size, &raw);
    if (rc != 0)
        return rc;
    rc = codec_decode(&job->ds->codec, raw.data, raw.len, dst, dst_len, why, sizeof why);
    if (rc != 0)
        log_error("%s: %s: linked chunk %s@%" PRIu64 "+%" PRIu32 ": %s", job->img->domain_path,
                  job->ds->path, job->ds->uris[p->uri], p->off, p->size, why);
    store_buf_free(&raw);
    return rc ? -EIO : 0;
}

/* The first piece of chunk `linear`, or where it would be. */
static size_t first_piece(const struct image_dataset *ds, uint64_t linear)
{
    size_t lo = 0, hi = ds->n_pieces;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ds->pieces[mid].chunk < linear)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int load_pieces(const struct chunk_job *job, unsigned char *buf, size_t size)
{
    const struct image_dataset *ds = job->ds;
    size_t first = first_piece(ds, job->linear), end = first;
    while (end < ds->n_pieces && ds->pieces[end].chunk == job->linear)
        end++;
    if (ds->n_sub == 1 && end > first)
        return load_piece(job, &ds->pieces[first], buf, size);
    if (end == first) {
        image_fill(ds, buf, size);
        return 0;
    }
    uint64_t sub_bytes = ds->itemsize, f[IMAGE_MAX_RANK];
    for (int k = 0; k < ds->rank; k++) {
        sub_bytes *= ds->sub_dims[k];
        f[k] = ds->chunk_dims[k] / ds->sub_dims[k];
    }
    unsigned char *sub = malloc(sub_bytes ? sub_bytes : 1);
    if (!sub)
        return -EIO;
    image_fill(ds, buf, size);
    int rc = 0;
    for (size_t i = first; i < end && rc == 0; i++) {
        uint64_t at[IMAGE_MAX_RANK], rest = ds->pieces[i].sub;
        for (int k = ds->rank - 1; k >= 0; k--) {
            at[k] = (rest % f[k]) * ds->sub_dims[k];
            rest /= f[k];
        }
        rc = load_piece(job, &ds->pieces[i], sub, sub_bytes);
        if (rc == 0)
            place_block(buf, ds->chunk_dims, sub, ds->sub_dims, at, ds->rank, ds->itemsize);
    }
    free(sub);
    return rc;
}

/* A chunk of a contiguous linked dataset: its rows, gathered from one covering range. */
static int load_contiguous(const struct chunk_job *job, unsigned char *buf, size_t size)
{
    const struct image_dataset *ds = job->ds;
    uint64_t idx[IMAGE_MAX_RANK], start[IMAGE_MAX_RANK], count[IMAGE_MAX_RANK];
    uint64_t stride[IMAGE_MAX_RANK], first = 0, last = 0;
    image_chunk_index(ds, job->linear, idx);
    stride[ds->rank - 1] = ds->itemsize;
    for (int k = ds->rank - 2; k >= 0; k--)
        stride[k] = stride[k + 1] * ds->dims[k + 1];
    for (int k = 0; k < ds->rank; k++) {
        start[k] = idx[k] * ds->chunk_dims[k];
        count[k] =
            ds->dims[k] - start[k] < ds->chunk_dims[k] ? ds->dims[k] - start[k] : ds->chunk_dims[k];
        first += start[k] * stride[k];
        last += (start[k] + count[k] - 1) * stride[k];
    }
    last += ds->itemsize;
    if (last > ds->contig_size)
        last = ds->contig_size;
    image_fill(ds, buf, size);
    if (first >= last)
        return 0;
    struct store_buf raw = { 0 };
    int rc = fetch_range(job, 0, ds->contig_off + first, last - first, &raw);
    if (rc != 0)
        return rc;
    uint64_t rows = 1, r_idx[IMAGE_MAX_RANK] = { 0 };
    for (int k = 0; k < ds->rank - 1; k++)
        rows *= count[k];
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t src = 0, dst = 0;
        for (int k = 0; k < ds->rank - 1; k++) {
            src += (start[k] + r_idx[k]) * stride[k];
            dst = (dst + r_idx[k]) * ds->chunk_dims[k + 1];
        }
        uint64_t n = count[ds->rank - 1] * ds->itemsize;
        src += start[ds->rank - 1] * ds->itemsize;
        if (src - first + n <= raw.len)
            memcpy(buf + dst * ds->itemsize, raw.data + (src - first), n);
        for (int k = ds->rank - 2; k >= 0 && ++r_idx[k] == count[k]; k--)
            r_idx[k] = 0;
    }
    store_buf_free(&raw);
    return 0;
}

int image_load_ref(const struct chunk_job *job, unsigned char *buf, size_t size)
{
    if (job->ds->origin == ORIGIN_REF_CONTIG)
        return load_contiguous(job, buf, size);
    return load_pieces(job, buf, size);
}
