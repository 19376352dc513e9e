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
 *
 * This file: the layouts that name one linked file (H5D_CONTIGUOUS_REF, H5D_CHUNKED_REF) and
 * the choice of layout; refs_table.c the chunk tables (H5D_CHUNKED_REF_INDIRECT, versions'
 * pooled tables too), refs_pieces.c the keys and pieces they all build, refs_read.c the reads.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/why.h"
#include "refs_int.h"

static uint64_t grid_total(const struct image_dataset *ds)
{
    uint64_t total = 1;
    for (int k = 0; k < ds->rank; k++)
        total = total <= REF_GRID_MAX / (ds->grid[k] ? ds->grid[k] : 1) ? total * ds->grid[k]
                                                                        : REF_GRID_MAX + 1;
    return total;
}

/* ---- H5D_CONTIGUOUS_REF ---- */

static int contiguous(struct builder *b, const json_t *lay, int file_in_pool,
                      struct image_dataset *ds, uint64_t **chunks, size_t *n, char *why,
                      size_t why_len)
{
    uint32_t uri;
    uint64_t off, size, total = grid_total(ds);
    const char *file = hjson_text(json_object_get(lay, "file_uri"));
    if (refs_json_u64(json_object_get(lay, "offset"), &off) ||
        refs_json_u64(json_object_get(lay, "size"), &size) || !file)
        return why_reject(why, why_len, "H5D_CONTIGUOUS_REF without file_uri, offset and size");
    if (size == 0) {         /* nothing linked: chunks live in the bucket (spec §8.1) */
        free(ds->kept_file); /* nor a kept file to check */
        free(ds->kept_etag);
        ds->kept_file = ds->kept_etag = NULL;
        return 1;
    }
    if (total > REF_GRID_MAX)
        return why_reject(why, why_len, "more than %u linked chunks", REF_GRID_MAX);
    int rc = refs_add_uri(b, ds, file, file_in_pool, &uri, why, why_len);
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

static int chunk_map(struct builder *b, const json_t *lay, int file_in_pool,
                     struct image_dataset *ds, uint64_t **chunks, size_t *n, char *why,
                     size_t why_len)
{
    uint32_t uri;
    const char *file = hjson_text(json_object_get(lay, "file_uri"));
    const json_t *map = json_object_get(lay, "chunks");
    struct piece_list pieces = { ds, 0 };
    if (!file || !json_is_object(map))
        return why_reject(why, why_len, "H5D_CHUNKED_REF without file_uri and chunks");
    ds->n_sub = 1;
    int rc = refs_add_uri(b, ds, file, file_in_pool, &uri, why, why_len);
    const char *index;
    json_t *v;
    json_object_foreach((json_t *)map, index, v)
    {
        uint64_t linear, off, size;
        if (rc != 0)
            break;
        int in = build_parse_index(ds, index, &linear);
        if (in < 0 || json_array_size(v) != 2 || refs_json_u64(json_array_get(v, 0), &off) ||
            refs_json_u64(json_array_get(v, 1), &size) || size > UINT32_MAX) {
            why_set(why, why_len, "chunk map entry \"%s\" is not index: [offset, size]", index);
            rc = -EINVAL;
        } else if (in == 0 && size > 0) {
            rc = refs_add_piece(&pieces, (struct ref_piece){ linear, off, (uint32_t)size, uri, 0 },
                                why, why_len);
        }
    }
    ds->origin = ORIGIN_REF_PIECES;
    return rc ? rc : refs_present_chunks(ds, chunks, n);
}

/* The etag b's root group recorded for pool file key, kept in ds for every read of the file
 * (refs_read.c): 0 (none recorded: a version kept before etags, read as before), -EINVAL
 * (the group names another file), -ENOMEM. */
static int keep_file_etag(struct builder *b, const char *key, struct image_dataset *ds, char *why,
                          size_t why_len)
{
    const struct build_obj *root = build_find(b, b->root_id);
    char etag[SCHEMA_POOL_ETAG_BUF];
    int rc = schema_pool_file_recorded(root ? root->json : NULL, key, etag, why, why_len);
    if (rc != 0 || !etag[0])
        return rc;
    free(ds->kept_file);
    free(ds->kept_etag);
    ds->kept_file = strdup(key);
    ds->kept_etag = strdup(etag);
    return ds->kept_file && ds->kept_etag ? 0 : -ENOMEM;
}

/* Which linked file a layout may read. A version reads only what was kept with it: its
 * domain's pool (a table of pool URIs, whose owner refs_table.c checks; or a linked file kept
 * there, with the etag it had then) or its own root's linked file (copied there by versions
 * before pool files); a file elsewhere in the bucket may have been replaced since by anyone.
 * The current domain names a pool file only where its root is a version's, as in ref mode
 * (refs_pool_file_owned checks that too); any other file_uri of it goes by the rules of
 * linked files (refs_add_uri). *file_in_pool: the file is the domain's pool's, checked. 0 or
 * -EINVAL (why). */
static int linked_file_check(struct builder *b, const json_t *lay, const char *cls,
                             struct image_dataset *ds, int *file_in_pool, char *why, size_t why_len)
{
    const char *key = NULL;
    int ok = 1;
    if (schema_is_versions_path(b->domain_path) != 1)
        key = schema_pool_file_uri_key(hjson_text(json_object_get(lay, "file_uri")),
                                       b->src->bucket_name);
    else if (refs_layout_pool(lay))
        return !json_object_get(lay, "file_uri") && strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0
                   ? 0
                   : why_reject(why, why_len, "a version's pooled layout names a file");
    else
        ok = schema_version_linked_ok(lay, b->src->bucket_name, b->root_id, &key);
    if (key) {
        int rc = refs_pool_file_owned(b, key, why, why_len);
        *file_in_pool = rc == 0;
        return rc == 0 ? keep_file_etag(b, key, ds, why, why_len) : rc;
    }
    return ok ? 0
              : why_reject(why, why_len,
                           "a version's reference layout names neither its pool nor its own file");
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
    enum codec_source source = refs_layout_pool(lay) ? CODEC_SOURCE_HSDS : CODEC_SOURCE_HDF5;
    int rc = codec_spec_from_filters(json_object_get(cprops, "filters"), ds->itemsize, 0, source,
                                     &ds->codec, why, why_len);
    if (rc != 0)
        return rc;
    int in_pool = 0;
    rc = linked_file_check(b, lay, cls, ds, &in_pool, why, why_len);
    if (rc != 0)
        return rc;
    if (strcmp(cls, "H5D_CONTIGUOUS_REF") == 0)
        return contiguous(b, lay, in_pool, ds, chunks, n, why, why_len);
    if (strcmp(cls, "H5D_CHUNKED_REF") == 0)
        return chunk_map(b, lay, in_pool, ds, chunks, n, why, why_len);
    if (strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0)
        return refs_indirect(b, lay, in_pool, ds, chunks, n, why, why_len);
    return why_reject(why, why_len, "unknown layout class %s", cls);
}
