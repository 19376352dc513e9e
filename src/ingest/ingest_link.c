/*
 * ingest_link: linked ingest (spec §8, seed 003; ingest.h, struct ingest_config.link). The file
 * is stored whole as db/A-B/.h5osfs-file of the new root, and the datasets HSDS can read from
 * it as the file stores them get the layout hsload --link gives them
 * (h5pyd utillib.create_chunktable and create_dataset, for a 0.9 server):
 *
 *   contiguous                 H5D_CONTIGUOUS_REF {file_uri, offset, size}; top-level dims as
 *                              HSDS's getContiguousLayout makes them (§5.5)
 *   chunked, <= 10 chunks      H5D_CHUNKED_REF {file_uri, dims (the file's), chunks}
 *   chunked, more              H5D_CHUNKED_REF_INDIRECT {file_uri, dims, chunk_table,
 *                              hyper_dims}: hyper_dims the file's chunk, dims that chunk
 *                              doubled (last dimension first) to >= 1 MiB within the shape
 *                              (utillib.expandChunk); the chunk table an anonymous dataset of
 *                              (offset I64, size I32) per file chunk, its chunks stored raw
 *
 * A dataset is linked only when the file's bytes are exactly what HSDS decodes: a simple
 * dataspace of more than 512 elements (hsload's MIN_DSET_ELEMENTS_FOR_LINKING), contiguous or
 * chunked storage in the file itself, a fixed-size type without references that HDF5 finds
 * equal to the packed type the JSON states, and no filter or exactly [deflate] or
 * [shuffle, deflate] on every chunk. The rest is copied as before.
 *
 * Chunk addresses are HDF5 addresses before HDF5 1.14.4: the file offset adds the user block
 * (g->chunk_base), which hsload forgets; H5Dget_offset always counted it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ingest/ingest_int.h"

#define LINK_MIN_ELEMENTS 512           /* hsload copies datasets of no more elements */
#define LINK_MAP_MAX 10                 /* more chunks: a chunk table */
#define LINK_EXPAND_MIN (1u << 20)      /* hsload's MIN_CHUNK_SIZE (expandChunk) */
#define LINK_TABLE_ITEM 12              /* offset I64LE, size I32LE, packed */
#define LINK_CHUNK_MAX 0x7fffffffu      /* the table's size member is a signed 32-bit integer */
#define LINK_TABLE_DIM_MAX (1ull << 53) /* JSON integers readers take exactly */

/* A chunk table's entries, until its chunks are stored. */
struct link_entry {
    uint64_t idx[INGEST_MAX_RANK]; /* the file chunk's index = its place in the table */
    uint64_t off, size;
};

struct ingest_link_table {
    int rank;
    uint64_t dims[INGEST_MAX_RANK], cdims[INGEST_MAX_RANK]; /* the table's shape, chunks */
    struct link_entry *v;
    size_t n, cap;
};

void ingest_link_table_free(struct ingest_link_table *t)
{
    if (t)
        free(t->v);
    free(t);
}

/* ---- which datasets ---- */

struct link_src {
    hid_t dset, space, dcpl;
    int rank;
    hsize_t dims[INGEST_MAX_RANK], cdims[INGEST_MAX_RANK];
    size_t itemsize;
    int chunked, filtered;
};

static void src_close(struct link_src *s)
{
    if (s->dcpl >= 0)
        H5Pclose(s->dcpl);
    if (s->space >= 0)
        H5Sclose(s->space);
    if (s->dset >= 0)
        H5Dclose(s->dset);
}

/* The file's element bytes are the stored ones: HDF5 finds the file type equal to the packed
 * type the JSON describes (no stand-in, no padding, no references or variable lengths). */
static int type_as_stored(hid_t dset, const json_t *type, size_t *itemsize)
{
    char why[200];
    if ((h5type_traits(type) & (H5TYPE_HAS_VLEN | H5TYPE_HAS_REF)) ||
        h5type_stored_size(type, itemsize) != 0 || *itemsize == 0)
        return 0;
    hid_t ft = H5Dget_type(dset), mem = h5type_from_json(type, why, sizeof why);
    int same = ft >= 0 && mem >= 0 && H5Tget_size(ft) == *itemsize && H5Tequal(ft, mem) > 0;
    if (mem >= 0)
        H5Tclose(mem);
    if (ft >= 0)
        H5Tclose(ft);
    return same;
}

/* The filters HSDS undoes on linked bytes as HDF5 applied them (§6.5): none, deflate, or
 * shuffle then deflate, on every chunk, partial edge chunks included. */
static int filters_as_stored(hid_t dcpl, int *filtered)
{
    unsigned opts = 0;
    int nf = H5Pget_nfilters(dcpl);
    *filtered = nf > 0;
    if (nf == 0)
        return 1;
    return ingest_filters_raw(dcpl, NULL) && H5Pget_chunk_opts(dcpl, &opts) >= 0 &&
           !(opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS);
}

/* 1 when o can be linked (s open), 0 when it is copied. */
static int linkable(struct ingest *g, const struct ingest_obj *o, struct link_src *s)
{
    const json_t *type = json_object_get(o->json, "type");
    if (o->dropped || !json_object_get(o->json, "layout") ||
        (s->dset = H5Dopen2(g->file, o->path, H5P_DEFAULT)) < 0 ||
        (s->space = H5Dget_space(s->dset)) < 0 || (s->dcpl = H5Dget_create_plist(s->dset)) < 0 ||
        H5Sget_simple_extent_type(s->space) != H5S_SIMPLE)
        return 0;
    s->rank = H5Sget_simple_extent_ndims(s->space);
    hssize_t np = H5Sget_simple_extent_npoints(s->space);
    H5D_layout_t layout = H5Pget_layout(s->dcpl);
    if (s->rank < 1 || s->rank > INGEST_MAX_RANK || np <= LINK_MIN_ELEMENTS ||
        H5Sget_simple_extent_dims(s->space, s->dims, NULL) < 0 ||
        (layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED) ||
        H5Pget_external_count(s->dcpl) != 0 || !type_as_stored(s->dset, type, &s->itemsize))
        return 0;
    s->chunked = layout == H5D_CHUNKED;
    if (!s->chunked)
        return 1;
    return H5Pget_chunk(s->dcpl, s->rank, s->cdims) == s->rank &&
           filters_as_stored(s->dcpl, &s->filtered);
}

/* ---- the layouts ---- */

/* chunkUtil.getContiguousLayout with HSDS's max_chunk_size (§5.5). */
static int below_max(uint64_t n, uint64_t running)
{
    uint64_t bytes;
    return !__builtin_mul_overflow(n, running, &bytes) && bytes < INGEST_CHUNK_MAX;
}

static void contiguous_dims(const struct link_src *s, uint64_t *out)
{
    uint64_t running = s->itemsize;
    for (int k = 0; k < s->rank; k++)
        out[k] = 1;
    for (int k = s->rank - 1; k >= 0; k--) {
        if (below_max(s->dims[k], running)) {
            out[k] = s->dims[k];
            running *= s->dims[k];
            continue;
        }
        uint64_t n = s->dims[k];
        while (n > 1) {
            n = n / 2 + n % 2;
            if (below_max(n, running))
                break;
        }
        out[k] = n;
        break;
    }
}

/* utillib.expandChunk: double one dimension per step, the fastest that stays within the
 * shape, until the chunk holds 1 MiB. */
static void expand_dims(const struct link_src *s, uint64_t *out)
{
    uint64_t size = s->itemsize;
    for (int k = 0; k < s->rank; k++) {
        out[k] = s->cdims[k];
        size *= s->cdims[k];
    }
    while (size < LINK_EXPAND_MIN) {
        int k = s->rank - 1;
        while (k >= 0 && out[k] * 2 > s->dims[k])
            k--;
        if (k < 0)
            return;
        out[k] *= 2;
        size *= 2;
    }
}

/* Put lay as the requested layout and dims as the top-level one (§8: a REF dataset's layout
 * is H5D_CHUNKED at top level). hsload sends no fillTime with a REF layout. */
static int set_layout(struct ingest_obj *o, json_t *lay, int rank, const uint64_t *dims)
{
    json_t *cp = json_object_get(o->json, "creationProperties");
    json_t *top =
        json_pack("{s:s,s:o*}", "class", "H5D_CHUNKED", "dims", hjson_dims_new(dims, rank));
    if (!cp && json_object_set_new(o->json, "creationProperties", json_object()) == 0)
        cp = json_object_get(o->json, "creationProperties");
    if (!lay || !top || !cp) {
        json_decref(lay);
        json_decref(top);
        return -ENOMEM;
    }
    json_object_del(cp, "fillTime");
    return json_object_set_new(cp, "layout", lay) == 0 &&
                   json_object_set_new(o->json, "layout", top) == 0
               ? 0
               : -ENOMEM;
}

static int link_contiguous(struct ingest_obj *o, const struct link_src *s, const char *uri)
{
    haddr_t off = H5Dget_offset(s->dset);
    hsize_t size = H5Dget_storage_size(s->dset);
    uint64_t need = s->itemsize, dims[INGEST_MAX_RANK];
    for (int k = 0; k < s->rank; k++)
        need *= s->dims[k];
    if (off == HADDR_UNDEF || size != need)
        return 1; /* nothing stored (late allocation): nothing to link */
    contiguous_dims(s, dims);
    json_t *lay = json_pack("{s:s,s:s,s:I,s:I}", "class", "H5D_CONTIGUOUS_REF", "file_uri", uri,
                            "offset", (json_int_t)off, "size", (json_int_t)size);
    return set_layout(o, lay, s->rank, dims);
}

/* One chunk of the file as a table entry (nothing when it is not stored or lies beyond the
 * extent); 1 when it cannot be linked. */
static int add_entry(struct ingest *g, const struct link_src *s, struct ingest_link_table *t,
                     const hsize_t *off, unsigned mask, haddr_t addr, hsize_t size)
{
    if ((s->filtered && mask != 0) || size > LINK_CHUNK_MAX)
        return 1; /* a chunk HSDS could not decode as the others */
    int inside = addr != HADDR_UNDEF && size > 0;
    for (int k = 0; k < s->rank; k++)
        inside &= off[k] < s->dims[k];
    if (!inside)
        return 0;
    if (t->n == t->cap) {
        struct link_entry *v = grow_array(t->v, &t->cap, t->n + 1, sizeof *v, 16);
        if (!v)
            return -ENOMEM;
        t->v = v;
    }
    struct link_entry *e = &t->v[t->n++];
    for (int k = 0; k < s->rank; k++)
        e->idx[k] = off[k] / s->cdims[k];
    e->off = g->chunk_base + addr;
    e->size = size;
    return 0;
}

/* The chunks the index lists, in its order (hsload's order of a chunk map). HDF5 1.10 walks
 * the index from its start at every H5Dget_chunk_info: n chunks cost n^2/2 steps. */
static int list_by_index(struct ingest *g, const struct ingest_obj *o, const struct link_src *s,
                         hsize_t n, struct ingest_link_table *t)
{
    int rc = 0;
    for (hsize_t i = 0; rc == 0 && i < n; i++) {
        hsize_t off[INGEST_MAX_RANK], size = 0;
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        if (H5Dget_chunk_info(s->dset, s->space, i, off, &mask, &addr, &size) < 0) {
            log_error("%s: %s: chunk %llu of the %llu the file has cannot be listed", g->log_name,
                      o->path, (unsigned long long)i, (unsigned long long)n);
            return -EIO;
        }
        rc = add_entry(g, s, t, off, mask, addr, size);
    }
    return rc;
}

/* Every place of the grid looked up by its coordinates (one index lookup each): for a dataset
 * that stores most of its grid, cheaper than the listing. */
static int list_by_grid(struct ingest *g, const struct ingest_obj *o, const struct link_src *s,
                        const uint64_t *grid, struct ingest_link_table *t)
{
    uint64_t idx[INGEST_MAX_RANK] = { 0 };
    int rc = 0;
    for (int k = 0; rc == 0 && k >= 0;) {
        hsize_t off[INGEST_MAX_RANK], size = 0;
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        for (int j = 0; j < s->rank; j++)
            off[j] = idx[j] * s->cdims[j];
        if (H5Dget_chunk_info_by_coord(s->dset, off, &mask, &addr, &size) < 0) {
            log_error("%s: %s: a chunk of the file cannot be looked up", g->log_name, o->path);
            return -EIO;
        }
        rc = add_entry(g, s, t, off, mask, addr, size);
        for (k = s->rank - 1; k >= 0 && ++idx[k] == grid[k]; k--)
            idx[k] = 0;
    }
    return rc;
}

#define LINK_LIST_MAX 4096 /* more chunks, most of the grid stored: by coordinates */

/* The file's chunks (inside the extent) as table entries; 1 when one cannot be linked. */
static int list_chunks(struct ingest *g, const struct ingest_obj *o, const struct link_src *s,
                       struct ingest_link_table *t)
{
    hsize_t n = 0;
    uint64_t grid[INGEST_MAX_RANK], total = 1;
    if (H5Dget_num_chunks(s->dset, s->space, &n) < 0) {
        log_error("%s: %s: the chunks the file has cannot be counted", g->log_name, o->path);
        return -EIO;
    }
    for (int k = 0; k < s->rank; k++) {
        grid[k] = s->dims[k] / s->cdims[k] + (s->dims[k] % s->cdims[k] != 0);
        if (__builtin_mul_overflow(total, grid[k], &total))
            total = UINT64_MAX;
    }
    if (n > LINK_LIST_MAX && total / 2 <= n)
        return list_by_grid(g, o, s, grid, t);
    return list_by_index(g, o, s, n, t);
}

static int index_text(int rank, const uint64_t *idx, char *out, size_t len)
{
    size_t at = 0;
    for (int k = 0; k < rank; k++) {
        int n = snprintf(out + at, len - at, "%s%llu", k ? "_" : "", (unsigned long long)idx[k]);
        if (n < 0 || (size_t)n >= len - at)
            return -EINVAL;
        at += (size_t)n;
    }
    return 0;
}

static int link_map(struct ingest_obj *o, const struct link_src *s,
                    const struct ingest_link_table *t, const char *uri)
{
    uint64_t cdims[INGEST_MAX_RANK];
    char index[INGEST_MAX_RANK * 21];
    json_t *chunks = json_object();
    for (size_t i = 0; chunks && i < t->n; i++) {
        const struct link_entry *e = &t->v[i];
        if (index_text(s->rank, e->idx, index, sizeof index) != 0 ||
            json_object_set_new(chunks, index,
                                json_pack("[I,I]", (json_int_t)e->off, (json_int_t)e->size)) != 0) {
            json_decref(chunks);
            chunks = NULL;
        }
    }
    if (!chunks)
        return -ENOMEM;
    for (int k = 0; k < s->rank; k++)
        cdims[k] = s->cdims[k];
    json_t *lay = json_pack("{s:s,s:s,s:o*,s:o}", "class", "H5D_CHUNKED_REF", "file_uri", uri,
                            "dims", hjson_dims_new(cdims, s->rank), "chunks", chunks);
    return set_layout(o, lay, s->rank, cdims);
}

/* The chunk table: a dataset of the new root that no group links (as hsload's anonymous one),
 * appended to g->objs with its entries; its chunks are stored with the others. */
static int add_table(struct ingest *g, const char *dataset_path, struct ingest_link_table *t,
                     char id[SCHEMA_ID_BUF])
{
    int rc = ingest_new_id(g, 'd', id);
    if (rc != 0)
        return rc;
    double now = ingest_now(g);
    json_t *type = json_pack("{s:s,s:[{s:s,s:{s:s,s:s}},{s:s,s:{s:s,s:s}}]}", "class",
                             "H5T_COMPOUND", "fields", "name", "offset", "type", "class",
                             "H5T_INTEGER", "base", "H5T_STD_I64LE", "name", "size", "type",
                             "class", "H5T_INTEGER", "base", "H5T_STD_I32LE");
    json_t *j = json_pack("{s:s,s:s,s:f,s:f,s:o*,s:{s:s,s:o*,s:o*},s:{},s:{s:s,s:o*}}", "id", id,
                          "root", g->root, "created", now, "lastModified", now, "type", type,
                          "shape", "class", "H5S_SIMPLE", "dims", hjson_dims_new(t->dims, t->rank),
                          "maxdims", hjson_dims_new(t->dims, t->rank), "attributes", "layout",
                          "class", "H5D_CHUNKED", "dims", hjson_dims_new(t->cdims, t->rank));
    char *path = NULL;
    if (!j || asprintf(&path, "(chunk table of %s)", dataset_path) < 0) {
        json_decref(j);
        return -ENOMEM;
    }
    if (g->n_objs == g->cap_objs) {
        struct ingest_obj *n = grow_array(g->objs, &g->cap_objs, g->n_objs + 1, sizeof *n, 64);
        if (!n) {
            json_decref(j);
            free(path);
            return -ENOMEM;
        }
        g->objs = n;
    }
    struct ingest_obj *o = &g->objs[g->n_objs++];
    memset(o, 0, sizeof *o);
    snprintf(o->id, sizeof o->id, "%s", id);
    o->cls = 'd';
    o->addr = HADDR_UNDEF;
    o->path = path;
    o->json = j;
    o->table = t;
    return 0;
}

/* *tp goes to the table object (NULL here) once that exists. */
static int link_indirect(struct ingest *g, size_t at, const struct link_src *s,
                         struct ingest_link_table **tp, const char *uri)
{
    uint64_t cdims[INGEST_MAX_RANK], dims[INGEST_MAX_RANK];
    char id[SCHEMA_ID_BUF];
    struct ingest_link_table *t = *tp;
    t->rank = s->rank;
    for (int k = 0; k < s->rank; k++) {
        cdims[k] = s->cdims[k];
        t->dims[k] = s->dims[k] / s->cdims[k] + (s->dims[k] % s->cdims[k] != 0);
        if (t->dims[k] > LINK_TABLE_DIM_MAX)
            return 1; /* a declared extent no table can describe: copied */
    }
    ingest_chunk_dims(t->rank, t->dims, t->dims, LINK_TABLE_ITEM, NULL, t->cdims);
    expand_dims(s, dims);
    /* g->objs may move: the dataset is found again by its index */
    int rc = add_table(g, g->objs[at].path, t, id);
    if (rc != 0)
        return rc;
    *tp = NULL;
    struct ingest_obj *o = &g->objs[at];
    json_t *lay = json_pack("{s:s,s:s,s:o*,s:s,s:o*}", "class", "H5D_CHUNKED_REF_INDIRECT",
                            "file_uri", uri, "dims", hjson_dims_new(dims, s->rank), "chunk_table",
                            id, "hyper_dims", hjson_dims_new(cdims, s->rank));
    return set_layout(o, lay, s->rank, dims);
}

/* The layout of a linkable dataset: 0 (linked), 1 (copied after all), -errno. */
static int link_layout(struct ingest *g, size_t at, const struct link_src *s, const char *uri)
{
    if (!s->chunked)
        return link_contiguous(&g->objs[at], s, uri);
    struct ingest_link_table *t = calloc(1, sizeof *t);
    int rc = t ? list_chunks(g, &g->objs[at], s, t) : -ENOMEM;
    if (rc == 0 && t->n <= LINK_MAP_MAX) {
        rc = link_map(&g->objs[at], s, t, uri);
    } else if (rc == 0) {
        rc = link_indirect(g, at, s, &t, uri);
    }
    ingest_link_table_free(t);
    return rc;
}

/* 0 when linked or left to the copy (o->linked says which), -errno. */
static int link_dataset(struct ingest *g, size_t at, const char *uri)
{
    struct link_src s = { .dset = -1, .space = -1, .dcpl = -1 };
    int rc = linkable(g, &g->objs[at], &s) ? link_layout(g, at, &s, uri) : 1;
    src_close(&s);
    if (rc == 0) {
        g->objs[at].linked = 1;
        g->stats->datasets_linked++;
    }
    return rc == 1 ? 0 : rc;
}

int ingest_link_layouts(struct ingest *g)
{
    char key[STORE_KEY_MAX + 1], uri[STORE_KEY_MAX + 256];
    if (!g->cfg->link || g->base || schema_id_version(g->root) != 2 || !g->cfg->bucket_name)
        return 0;
    int rc = schema_linked_file_key(g->root, key, sizeof key);
    if (rc == 0 && snprintf(uri, sizeof uri, "%s/%s", g->cfg->bucket_name, key) >= (int)sizeof uri)
        rc = -ENAMETOOLONG;
    size_t n = g->n_objs; /* chunk tables are appended behind */
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (g->objs[i].cls == 'd')
            rc = link_dataset(g, i, uri);
    if (rc != 0 && rc != -ENOMEM)
        rc = -EIO;
    return rc;
}

/* ---- storing ---- */

static int link_size(struct ingest *g, uint64_t *size)
{
    off_t end = lseek(g->raw_fd, 0, SEEK_END);
    if (end < 0) {
        log_error("%s: %s: its size cannot be found: %s", g->log_name, g->h5path, strerror(errno));
        return -EIO;
    }
    *size = (uint64_t)end;
    return 0;
}

/* A HEAD of the file at key (its rc and now) says it still has the etag its base version
 * kept (g->link_from_etag, if any): 0, or -EIO (logged). */
static int kept_etag_holds(struct ingest *g, const char *key, int rc, const struct store_stat *now,
                           const char *when)
{
    if (!g->link_from_etag[0] || (rc == 0 && strcmp(now->etag, g->link_from_etag) == 0))
        return 0;
    log_error("%s: pool file %s is not the one the base version kept (%s%s, kept %s): not "
              "carried over (%s)",
              g->log_name, key, rc ? "" : "etag ", rc ? strerror(-rc) : now->etag,
              g->link_from_etag, when);
    return -EIO;
}

/* The file at key, asked now, still has the etag its base version kept: 0, or -EIO. */
static int base_file_unchanged(struct ingest *g, const char *key, const char *when)
{
    struct store_stat now;
    if (!g->link_from_etag[0])
        return 0;
    int rc = store_head(g->cfg->store, key, &now);
    return kept_etag_holds(g, key, rc, &now, when);
}

int ingest_link_store_file(struct ingest *g)
{
    char key[STORE_KEY_MAX + 1];
    uint64_t size = 0;
    if (g->stats->datasets_linked == 0 && !g->link_from[0])
        return 0;
    int rc = schema_linked_file_key(g->root, key, sizeof key);
    if (rc == 0 && g->link_from[0]) {
        /* r+: the base's file, whose size decides how the store copies it (S3: in parts
         * above the multipart threshold; one CopyObject takes at most 5 GiB) */
        struct store_stat from;
        rc = store_head(g->cfg->store, g->link_from, &from);
        if (rc == 0 && kept_etag_holds(g, g->link_from, rc, &from, "at the copy") != 0)
            return -EIO;
        if (rc == 0)
            rc = store_copy_sized(g->cfg->store, g->link_from, key, from.size);
        /* replaced while it was copied: the copy may hold the new bytes */
        if (rc == 0 && base_file_unchanged(g, g->link_from, "after the copy") != 0)
            return -EIO;
        g->stats->file_from_base = rc == 0;
        if (rc != 0)
            log_error("%s: the linked file %s could not be carried over to %s: %s", g->log_name,
                      g->link_from, key, strerror(-rc));
        return ingest_store_error(rc);
    }
    if (g->raw_fd < 0) {
        log_error("%s: %s cannot be opened to be stored whole", g->log_name, g->h5path);
        return -EIO;
    }
    if (rc == 0)
        rc = link_size(g, &size);
    if (rc == 0 && size > SIZE_MAX)
        rc = -EFBIG;
    if (rc == 0) {
        rc = g->cfg->keep_file
                 ? store_put_new_file(g->cfg->store, key, g->raw_fd, (size_t)size,
                                      &g->stats->file_kept)
                 : store_put_new_from_fd(g->cfg->store, key, g->raw_fd, 0, (size_t)size);
        if (rc != 0)
            log_error("%s: the file could not be stored as %s: %s", g->log_name, key,
                      strerror(-rc));
        rc = ingest_store_error(rc);
    }
    if (rc == 0) {
        g->stats->bytes_linked = size;
        g->stats->bytes_written += size;
    }
    return rc;
}

static int by_table_chunk(const void *a, const void *b, void *ctx)
{
    const struct ingest_link_table *t = ctx;
    const struct link_entry *x = a, *y = b;
    for (int k = 0; k < t->rank; k++) {
        uint64_t cx = x->idx[k] / t->cdims[k], cy = y->idx[k] / t->cdims[k];
        if (cx != cy)
            return cx < cy ? -1 : 1;
    }
    return 0;
}

/* One table chunk of entries [first, end) (sorted by table chunk), raw, zeros elsewhere. */
static int put_table_chunk(struct ingest *g, const struct ingest_obj *o, size_t first, size_t end)
{
    const struct ingest_link_table *t = o->table;
    uint64_t cidx[INGEST_MAX_RANK], n = 1;
    for (int k = 0; k < t->rank; k++) {
        cidx[k] = t->v[first].idx[k] / t->cdims[k];
        n *= t->cdims[k];
    }
    struct ingest_job job = { .src_fd = -1, .len = (size_t)n * LINK_TABLE_ITEM, .path = o->path };
    if (schema_chunk_key(o->id, cidx, t->rank, -1, job.key, sizeof job.key) != 0)
        return -EIO;
    if (!(job.bytes = calloc(n, LINK_TABLE_ITEM)))
        return -ENOMEM;
    for (size_t i = first; i < end; i++) {
        uint64_t at = 0;
        for (int k = 0; k < t->rank; k++)
            at = at * t->cdims[k] + t->v[i].idx[k] % t->cdims[k];
        unsigned char *e = job.bytes + at * LINK_TABLE_ITEM;
        for (int b = 0; b < 8; b++)
            e[b] = (unsigned char)(t->v[i].off >> (8 * b));
        for (int b = 0; b < 4; b++)
            e[8 + b] = (unsigned char)(t->v[i].size >> (8 * b));
    }
    return ingest_pool_submit(g->pool, &job);
}

int ingest_link_table_chunks(struct ingest *g, struct ingest_obj *o)
{
    struct ingest_link_table *t = o->table;
    if (t->n > 1)
        qsort_r(t->v, t->n, sizeof *t->v, by_table_chunk, t);
    int rc = 0;
    for (size_t first = 0, end; rc == 0 && first < t->n; first = end) {
        for (end = first + 1; end < t->n && by_table_chunk(&t->v[first], &t->v[end], t) == 0;)
            end++;
        rc = put_table_chunk(g, o, first, end);
    }
    return rc;
}

/* ---- r+: the base's file ---- */

/* The base version's root group: as the ingest loaded it with the file's objects, or read
 * now (a file whose root is not the base's). A new reference, or NULL (why). */
static json_t *base_root_group(struct ingest *g, char *why, size_t why_len)
{
    const struct ingest_obj *root = ingest_by_base(g, g->base->root);
    if (root && root->old)
        return json_incref(root->old);
    char gkey[STORE_KEY_MAX + 1];
    unsigned char *data = NULL;
    size_t len = 0;
    int rc = schema_obj_key(g->base->root, gkey, sizeof gkey) == 0 ? 0 : -EINVAL;
    if (rc == 0)
        rc = store_get_bytes(g->cfg->store, gkey, INGEST_JSON_MAX, &data, &len);
    json_t *group = rc == 0 ? hjson_loadb((const char *)data, len, why, why_len) : NULL;
    free(data);
    if (rc != 0)
        snprintf(why, why_len, "its root group cannot be read: %s", strerror(-rc));
    else if (group && !json_is_object(group))
        snprintf(why, why_len, "its root group is no JSON object");
    if (!json_is_object(group))
        json_decref(group), group = NULL;
    return group;
}

/* The etag the base version's root group kept for its pool file key, into g->link_from_etag
 * ("" none kept: a version from before etags). 0 or -errno; why says what failed. */
static int base_kept_etag(struct ingest *g, const char *key, char *why, size_t why_len)
{
    char etag[SCHEMA_POOL_ETAG_BUF];
    json_t *group = base_root_group(g, why, why_len);
    int rc = group ? schema_pool_file_recorded(group, key, etag, why, why_len) : -EINVAL;
    json_decref(group);
    if (rc == 0)
        snprintf(g->link_from_etag, sizeof g->link_from_etag, "%s", etag);
    return rc;
}

/* May the base (a ref-mode domain names its head version's root) name pool file key, one of
 * the domain's own pool (schema_pool_file_check; the pool kept for the rest of the ingest)?
 * Its version's kept etag is noted for the copy (ingest_link_store_file). 0, or -EIO
 * (logged): a whole root must own its file, and this one cannot be told to be the domain's
 * to copy. */
static int base_pool_file_ok(struct ingest *g, const char *key)
{
    const struct schema_fetch fetch = { g->cfg->store, store_get_bytes };
    char why[200] = "";
    if (strcmp(g->link_from, key) == 0)
        return 0; /* checked for an earlier dataset of this ingest */
    int rc = schema_pool_file_check(g->log_name, g->base->root, key, &fetch, g->pool_ok, why,
                                    sizeof why);
    if (rc == 0)
        rc = base_kept_etag(g, key, why, sizeof why);
    /* before any chunk is stored: a file replaced already fails the commit at once */
    if (rc == 0 && base_file_unchanged(g, key, "at the start") != 0)
        return -EIO;
    if (rc != 0)
        log_error("%s: the base names pool file %s, which cannot be carried over (%s)", g->log_name,
                  key, *why ? why : strerror(-rc));
    return rc == -ENOMEM ? rc : rc ? -EIO : 0;
}

int ingest_link_rebase(struct ingest *g, json_t *dataset)
{
    char from[STORE_KEY_MAX + 1], to[STORE_KEY_MAX + 1], uri[STORE_KEY_MAX + 256];
    json_t *lay = json_object_get(json_object_get(dataset, "creationProperties"), "layout");
    const char *now = hjson_text(json_object_get(lay, "file_uri")), *pooled = NULL;
    const char *bucket = g->cfg->bucket_name;
    if (!now || !bucket || !g->base ||
        schema_linked_file_key(g->base->root, from, sizeof from) != 0)
        return 0;
    /* The base's own file, in any form of its URI; or, in ref mode, its version's pool file:
     * left named where the new root is sparse (its version must name that file again, or
     * the root is never named: pool_file_left), copied where it is whole (it may become the
     * domain, which then owns its file). Any other file stays where it is. */
    if (!schema_linked_own_file(now, bucket, g->base->root)) {
        if (!(pooled = schema_pool_file_uri_key(now, bucket)))
            return 0;
        if (g->cfg->kept_in_pool) {
            g->stats->pool_file_left = 1;
            return 0;
        }
        int rc = base_pool_file_ok(g, pooled);
        if (rc != 0)
            return rc;
        snprintf(from, sizeof from, "%s", pooled);
    }
    if (g->link_from[0] && strcmp(g->link_from, from) != 0) {
        log_error("%s: the base's linked datasets name two files (%s, %s): one root holds one",
                  g->log_name, g->link_from, from);
        return -EIO;
    }
    if (schema_linked_file_key(g->root, to, sizeof to) != 0 ||
        snprintf(uri, sizeof uri, "%s/%s", bucket, to) >= (int)sizeof uri)
        return -EIO;
    snprintf(g->link_from, sizeof g->link_from, "%s", from);
    return json_object_set_new(lay, "file_uri", json_string(uri)) == 0 ? 0 : -ENOMEM;
}
