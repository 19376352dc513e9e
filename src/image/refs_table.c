/* refs_table: H5D_CHUNKED_REF_INDIRECT: a chunk table dataset of the bucket (optionally
 * "hyperchunked") read into pieces; a version's table names objects of its domain's own pool
 * only, checked once per build. See refs.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/why.h"
#include "refs_int.h"

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
        if (rc != 0 ||
            (rc = refs_add_uri(b, ds, uri_text, t->pool[0] != 0, &uri, why, why_len)) != 0)
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
            rc = refs_add_piece(pieces, piece, why, why_len);
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
        if (refs_json_u64(json_array_get(dims, (size_t)k), &d) ||
            refs_json_u64(json_array_get(cdims, (size_t)k), &c) || c == 0)
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
             refs_json_u64(json_array_get(hyper, (size_t)k), &h) || h == 0 ||
             ds->chunk_dims[k] % h != 0 || ds->n_sub > REF_GRID_MAX / (ds->chunk_dims[k] / h)))
            return why_reject(why, why_len, "hyper_dims do not divide the chunk dims");
        ds->sub_dims[k] = h;
        ds->n_sub *= (uint32_t)(ds->chunk_dims[k] / h);
    }
    return 0;
}

/* The pool a layout names ("h5osfs": {"pool": P}), or NULL. */
const char *refs_layout_pool(const json_t *lay)
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

int refs_pool_file_owned(struct builder *b, const char *key, char *why, size_t why_len)
{
    const struct schema_fetch fetch = { b->src->store, store_get_bytes };
    return schema_pool_file_check(b->domain_path, b->root_id, key, &fetch, b->pool_ok, why,
                                  why_len);
}

/* Versions name chunks only in their own domain's pool or their own linked file: a REF layout
 * of a version without a file is a per-entry table over that pool, or it is refused. *pool
 * gets it ("" for other domains and linked files). */
static int pool_of_layout(struct builder *b, const json_t *lay, char pool[SCHEMA_ID_BUF], char *why,
                          size_t why_len)
{
    const char *claimed = refs_layout_pool(lay);
    pool[0] = '\0';
    int is_version = schema_is_versions_path(b->domain_path) == 1;
    if (!claimed && (!is_version || json_object_get(lay, "file_uri")))
        return 0; /* a version's linked file is its own (build_ref_chunks) */
    if (!claimed || json_object_get(lay, "file_uri"))
        return why_reject(why, why_len, "a version's reference layout without its pool");
    int rc = pool_owned(b, claimed, why, why_len);
    if (rc == 0)
        snprintf(pool, SCHEMA_ID_BUF, "%s", claimed);
    return rc;
}

int refs_indirect(struct builder *b, const json_t *lay, int file_in_pool, struct image_dataset *ds,
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
        rc = refs_add_uri(b, ds, file, file_in_pool, &default_uri, why, why_len);
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
    return rc ? rc : refs_present_chunks(ds, chunks, n);
}
