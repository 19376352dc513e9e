/*
 * ingest_vref: a virtual dataset whose mappings are chunk-aligned into one chunked dataset of
 * the same file (versioned-hdf5's versions over raw_data) also gets a layout HSDS reads:
 * H5D_CHUNKED_REF_INDIRECT (spec §8.3) over a chunk table whose entry per chunk of the
 * version names the chunk object of the source that the mapping puts there (offset 0, its
 * stored size, the URI "<bucket>/<its key>"), size 0 where no mapping puts anything (the
 * fill value). No value is copied: HSDS serves every version from the source's chunks.
 *
 * The "h5osfs": {"virtual": [...]} member stays, and h5osfs's image presents the dataset from
 * it, never through the table (doc/image.md, "Virtual datasets"). The source's chunk grid is
 * pinned to its HDF5 chunk (not HSDS's 1-4 MiB choice, §5.4), which the mappings align with.
 *
 * Two steps: ingest_vref_plan, once every JSON is built and before anything is stored, finds
 * the datasets and pins their sources' grids; ingest_vref_tables, once the chunks are stored,
 * lists each source's chunk objects (their sizes), writes the tables and sets the layouts.
 * Whatever does not fit (another selection, a mapping off the grid, a type that differs, a
 * source chunk the file leaves to a different fill value) leaves the dataset as it was: a VDS
 * that HSDS sees as an empty dataset.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/domops/vtable.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ingest/ingest_int.h"

#define VREF_ENTRIES_MAX (1u << 20) /* a table's entries are held in memory, 140 bytes each */
#define VREF_UNMAPPED UINT64_MAX

struct vref_plan {
    size_t vds, src; /* indices into g->objs */
    int rank;
    uint64_t chunk[INGEST_MAX_RANK]; /* the source's HDF5 chunk: both grids */
    uint64_t grid[INGEST_MAX_RANK];  /* the version's chunk grid (the table's shape) */
    uint64_t sgrid[INGEST_MAX_RANK]; /* the source's */
    uint64_t entries;
    uint64_t *target; /* per version chunk (row-major): the source chunk's linear index */
};

struct ingest_vref {
    struct vref_plan *v;
    size_t n, cap;
};

void ingest_vref_free(struct ingest *g)
{
    for (size_t i = 0; g->vref && i < g->vref->n; i++)
        free(g->vref->v[i].target);
    if (g->vref)
        free(g->vref->v);
    free(g->vref);
    g->vref = NULL;
}

/* ---- which datasets ---- */

/* rank unsigned coordinates of arr (no "H5S_UNLIMITED"). 0 or -1. */
static int coords(const json_t *arr, int rank, uint64_t *out)
{
    if (json_array_size(arr) != (size_t)rank)
        return -1;
    for (int k = 0; k < rank; k++) {
        const json_t *v = json_array_get(arr, (size_t)k);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return -1;
        out[k] = (uint64_t)json_integer_value(v);
    }
    return 0;
}

struct hyperslab {
    uint64_t start[INGEST_MAX_RANK], stride[INGEST_MAX_RANK], count[INGEST_MAX_RANK],
        block[INGEST_MAX_RANK];
};

/* A regular hyperslab of the member (ingest_vds.c's form). 0 or -1. */
static int hyperslab_of(const json_t *sel, int rank, struct hyperslab *h)
{
    const char *cls = hjson_text(json_object_get(sel, "class"));
    if (!cls || strcmp(cls, "hyperslab") != 0 ||
        coords(json_object_get(sel, "start"), rank, h->start) != 0 ||
        coords(json_object_get(sel, "stride"), rank, h->stride) != 0 ||
        coords(json_object_get(sel, "count"), rank, h->count) != 0 ||
        coords(json_object_get(sel, "block"), rank, h->block) != 0)
        return -1;
    return 0;
}

/* The source's index of the dataset a mapping names in the file itself, or -1. */
static long same_file_source(struct ingest *g, const json_t *mapping)
{
    const char *file = hjson_text(json_object_get(mapping, "file"));
    const char *name = hjson_text(json_object_get(mapping, "dataset"));
    H5O_info_t info;
    if (!file || !name || strcmp(file, ".") != 0 ||
        H5Oget_info_by_name2(g->file, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return -1;
    return ingest_find_addr(g, info.addr);
}

/* Mapping m names source src (the first mapping's, named first) too. */
static int same_source(struct ingest *g, const json_t *m, const char *first, long src)
{
    const char *name = hjson_text(json_object_get(m, "dataset"));
    const char *file = hjson_text(json_object_get(m, "file"));
    if (name && file && first && strcmp(file, ".") == 0 && strcmp(name, first) == 0)
        return 1; /* versioned-hdf5 names raw_data alike in every mapping: no lookup */
    return same_file_source(g, m) == src;
}

/* The shape dims of dataset JSON j: its rank, or -1. */
static int shape_dims(const json_t *j, uint64_t *dims)
{
    int rank = 0;
    const json_t *shape = json_object_get(j, "shape");
    const char *cls = hjson_text(json_object_get(shape, "class"));
    if (!cls || strcmp(cls, "H5S_SIMPLE") != 0 ||
        hjson_dims(json_object_get(shape, "dims"), dims, &rank) != 0 || rank < 1 ||
        rank > INGEST_MAX_RANK)
        return -1;
    return rank;
}

/* Source s can back the version v: a stored chunked dataset of the same fixed-size type and
 * rank, whose HDF5 chunk p->chunk is. 1 or 0. */
static int source_fits(struct ingest *g, const struct ingest_obj *v, const struct ingest_obj *s,
                       struct vref_plan *p)
{
    const json_t *type = json_object_get(v->json, "type");
    const char *cls = hjson_text(json_object_get(json_object_get(s->json, "layout"), "class"));
    uint64_t sdims[INGEST_MAX_RANK];
    hsize_t c[INGEST_MAX_RANK];
    if (s->cls != 'd' || s->dropped || !s->json || ingest_is_virtual(s->json) || !cls ||
        strcmp(cls, "H5D_CHUNKED") != 0 || !json_equal(type, json_object_get(s->json, "type")) ||
        (h5type_traits(type) & (H5TYPE_HAS_VLEN | H5TYPE_HAS_REF)) ||
        shape_dims(s->json, sdims) != p->rank)
        return 0;
    hid_t d = H5Dopen2(g->file, s->path, H5P_DEFAULT);
    hid_t dcpl = d < 0 ? H5I_INVALID_HID : H5Dget_create_plist(d);
    int ok = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
             H5Pget_chunk(dcpl, p->rank, c) == p->rank;
    for (int k = 0; ok && k < p->rank; k++) {
        p->chunk[k] = c[k];
        p->sgrid[k] = sdims[k] / c[k] + (sdims[k] % c[k] != 0);
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (d >= 0)
        H5Dclose(d);
    return ok;
}

/* One block of a mapping: version block at vstart, source block at sstart, both of shape
 * block. Chunk-aligned: both starts on the grid, the block whole chunks except where it ends
 * at the version's extent, inside the source's. 0, or -1 (off the grid, or a chunk mapped
 * twice). */
static int map_block(struct vref_plan *p, const uint64_t *vdims, const uint64_t *sdims,
                     const uint64_t *vstart, const uint64_t *sstart, const uint64_t *block)
{
    uint64_t n[INGEST_MAX_RANK], j[INGEST_MAX_RANK] = { 0 };
    for (int k = 0; k < p->rank; k++) {
        const uint64_t c = p->chunk[k];
        if (vstart[k] % c || sstart[k] % c || block[k] == 0 || vstart[k] > vdims[k] ||
            block[k] > vdims[k] - vstart[k] || sstart[k] > sdims[k] ||
            block[k] > sdims[k] - sstart[k] || (block[k] % c && vstart[k] + block[k] != vdims[k]))
            return -1;
        n[k] = block[k] / c + (block[k] % c != 0);
    }
    for (;;) {
        uint64_t lv = 0, ls = 0;
        for (int k = 0; k < p->rank; k++) {
            lv = lv * p->grid[k] + vstart[k] / p->chunk[k] + j[k];
            ls = ls * p->sgrid[k] + sstart[k] / p->chunk[k] + j[k];
        }
        if (p->target[lv] != VREF_UNMAPPED)
            return -1;
        p->target[lv] = ls;
        int k = p->rank - 1;
        for (; k >= 0 && ++j[k] == n[k]; k--)
            j[k] = 0;
        if (k < 0)
            return 0;
    }
}

/* Every block of a mapping's two hyperslabs, paired in order (the same count and block on
 * both sides, so the i-th block of one holds the i-th block's elements of the other). */
static int map_mapping(struct vref_plan *p, const json_t *m, const uint64_t *vdims,
                       const uint64_t *sdims)
{
    struct hyperslab v, s;
    uint64_t i[INGEST_MAX_RANK] = { 0 }, vs[INGEST_MAX_RANK], ss[INGEST_MAX_RANK];
    if (hyperslab_of(json_object_get(m, "vds_select"), p->rank, &v) != 0 ||
        hyperslab_of(json_object_get(m, "src_select"), p->rank, &s) != 0 ||
        memcmp(v.count, s.count, (size_t)p->rank * sizeof *v.count) != 0 ||
        memcmp(v.block, s.block, (size_t)p->rank * sizeof *v.block) != 0)
        return -1;
    for (int k = 0; k < p->rank; k++)
        if (v.count[k] == 0 || v.count[k] > p->entries)
            return -1; /* more blocks than chunks: some chunk is mapped twice */
    for (;;) {
        for (int k = 0; k < p->rank; k++)
            if (__builtin_mul_overflow(i[k], v.stride[k], &vs[k]) ||
                __builtin_add_overflow(vs[k], v.start[k], &vs[k]) ||
                __builtin_mul_overflow(i[k], s.stride[k], &ss[k]) ||
                __builtin_add_overflow(ss[k], s.start[k], &ss[k]))
                return -1;
        if (map_block(p, vdims, sdims, vs, ss, v.block) != 0)
            return -1;
        int k = p->rank - 1;
        for (; k >= 0 && ++i[k] == v.count[k]; k--)
            i[k] = 0;
        if (k < 0)
            return 0;
    }
}

/* Every mapping of v into one source that fits, chunk by chunk: 1 (p filled), 0, -ENOMEM. */
static int plan_dataset(struct ingest *g, size_t vi, struct vref_plan *p)
{
    const struct ingest_obj *v = &g->objs[vi];
    const json_t *list = json_object_get(json_object_get(v->json, "h5osfs"), "virtual");
    uint64_t vdims[INGEST_MAX_RANK], sdims[INGEST_MAX_RANK];
    memset(p, 0, sizeof *p);
    p->vds = vi;
    p->rank = shape_dims(v->json, vdims);
    long src = json_array_size(list) ? same_file_source(g, json_array_get(list, 0)) : -1;
    if (p->rank < 1 || src < 0 || !source_fits(g, v, &g->objs[src], p))
        return 0;
    p->src = (size_t)src;
    shape_dims(g->objs[src].json, sdims);
    p->entries = 1;
    for (int k = 0; k < p->rank; k++) {
        p->grid[k] = vdims[k] / p->chunk[k] + (vdims[k] % p->chunk[k] != 0);
        if (p->grid[k] == 0 || p->grid[k] > VREF_ENTRIES_MAX / p->entries)
            return 0;
        p->entries *= p->grid[k];
    }
    if (!(p->target = malloc(p->entries * sizeof *p->target)))
        return -ENOMEM;
    for (uint64_t e = 0; e < p->entries; e++)
        p->target[e] = VREF_UNMAPPED;
    const char *first = hjson_text(json_object_get(json_array_get(list, 0), "dataset"));
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *m = json_array_get(list, i);
        if ((i > 0 && !same_source(g, m, first, src)) || map_mapping(p, m, vdims, sdims) != 0) {
            free(p->target);
            p->target = NULL;
            return 0;
        }
    }
    return 1;
}

/* The source's stored grid is its HDF5 chunk, which the mappings align with. */
static int pin_source(struct ingest_obj *s, const struct vref_plan *p)
{
    json_t *dims = json_array();
    for (int k = 0; dims && k < p->rank; k++)
        if (json_array_append_new(dims, json_integer((json_int_t)p->chunk[k])) != 0) {
            json_decref(dims);
            dims = NULL;
        }
    json_t *lay = json_object_get(s->json, "layout");
    return dims && json_object_set_new(lay, "dims", dims) == 0 ? 0 : -ENOMEM;
}

int ingest_vref_plan(struct ingest *g)
{
    int rc = 0;
    /* no URI to name the chunks by; a ref-mode r+, whose unchanged chunks stay in the base
     * version's pool, not under the new root the table would name; or the caller's choice */
    if (!g->cfg->bucket_name || schema_id_version(g->root) != 2 || g->cfg->kept_in_pool ||
        g->cfg->no_vds_tables)
        return 0;
    for (size_t i = 0; rc == 0 && i < g->n_objs; i++) {
        struct vref_plan p;
        if (g->objs[i].cls != 'd' || g->objs[i].dropped || !g->objs[i].json ||
            !ingest_is_virtual(g->objs[i].json))
            continue;
        rc = plan_dataset(g, i, &p);
        if (rc <= 0)
            continue;
        if (!g->vref && !(g->vref = calloc(1, sizeof *g->vref)))
            rc = -ENOMEM;
        struct vref_plan *grown =
            rc < 0 ? NULL : grow_array(g->vref->v, &g->vref->cap, g->vref->n + 1, sizeof *grown, 8);
        if (!grown || pin_source(&g->objs[p.src], &p) != 0) {
            free(p.target);
            return -ENOMEM;
        }
        g->vref->v = grown;
        g->vref->v[g->vref->n++] = p;
        rc = 0;
    }
    return rc;
}

/* ---- the tables ---- */

/* The stored size of each chunk object of a source, by key. */
struct sizes {
    size_t src; /* whose (SIZE_MAX: none yet) */
    struct strmap *by_key;
};

static int list_sizes(struct ingest *g, size_t src, struct sizes *z)
{
    char prefix[STORE_KEY_MAX + 1];
    struct store_list list = { 0 };
    if (z->src == src)
        return 0;
    strmap_free(z->by_key, NULL);
    z->src = SIZE_MAX;
    if (!(z->by_key = strmap_new()))
        return -ENOMEM;
    if (schema_obj_key(g->objs[src].id, prefix, sizeof prefix) != 0)
        return -EIO;
    strrchr(prefix, '/')[1] = '\0'; /* db/A-B/d/C-D-E/: its chunks' keys */
    int rc = store_list(g->cfg->store, prefix, NULL, NULL, 0, &list);
    if (rc != 0)
        log_error("%s: %s: its chunks cannot be listed for the chunk tables of its versions: %s",
                  g->log_name, g->objs[src].path, strerror(-rc));
    for (size_t i = 0; rc == 0 && i < list.n_objects; i++)
        rc = strmap_put(z->by_key, list.objects[i].key,
                        (void *)(uintptr_t)(list.objects[i].st.size + 1), NULL);
    store_list_free(&list);
    if (rc == 0)
        z->src = src;
    return rc == -ENOMEM ? rc : rc ? -EIO : 0;
}

/* A fill value JSON said as HSDS takes it: none is 0. */
static int same_fill(const json_t *a, const json_t *b)
{
    if (a && b)
        return json_equal(a, b);
    const json_t *x = a ? a : b;
    return !x || (json_is_number(x) && json_number_value(x) == 0 && !signbit(json_number_value(x)));
}

static void put_entry(unsigned char *e, uint64_t size, const char *uri)
{
    memset(e, 0, VTABLE_ENTRY_BYTES);
    for (int b = 0; b < 4; b++)
        e[8 + b] = (unsigned char)(size >> (8 * b)); /* offset 0 (I64LE), size (I32LE) */
    memcpy(e + 12, uri, strnlen(uri, VTABLE_URI_LEN - 1));
}

/* The source chunk at linear index lin of p's source grid: its URI and stored size (0: not
 * stored). 0, 1 (cannot be named: too long a URI, 2 GiB or more), -EIO. */
static int source_entry(struct ingest *g, const struct vref_plan *p, const struct sizes *z,
                        uint64_t lin, char *uri, size_t uri_len, uint64_t *size)
{
    uint64_t idx[INGEST_MAX_RANK];
    char key[STORE_KEY_MAX + 1];
    for (int k = p->rank - 1; k >= 0; k--) {
        idx[k] = lin % p->sgrid[k];
        lin /= p->sgrid[k];
    }
    if (schema_chunk_key(g->objs[p->src].id, idx, p->rank, -1, key, sizeof key) != 0)
        return -EIO;
    uintptr_t v = (uintptr_t)strmap_get(z->by_key, key);
    *size = v ? v - 1 : 0;
    int n = snprintf(uri, uri_len, "%s/%s", g->cfg->bucket_name, key);
    return n < 0 || (size_t)n >= uri_len || *size > INT32_MAX ? 1 : 0;
}

/* The entries of p's table (malloc'd): 0, 1 (left a plain VDS: why says why), -errno. */
static int fill_table(struct ingest *g, const struct vref_plan *p, const struct sizes *z,
                      unsigned char **out, const char **why)
{
    char uri[VTABLE_URI_LEN], absent[VTABLE_URI_LEN], key[STORE_KEY_MAX + 1];
    const json_t *vfill =
        json_object_get(json_object_get(g->objs[p->vds].json, "creationProperties"), "fillValue");
    const json_t *sfill =
        json_object_get(json_object_get(g->objs[p->src].json, "creationProperties"), "fillValue");
    if (schema_obj_key(g->objs[p->src].id, key, sizeof key) != 0)
        return -EIO;
    strrchr(key, '/')[1] = '\0';
    /* no object: HSDS reads none for size 0, and an empty URI would be the one before (§12) */
    if (snprintf(absent, sizeof absent, "%s/%snone", g->cfg->bucket_name, key) >=
        (int)sizeof absent) {
        *why = "its chunks' URIs would be too long";
        return 1;
    }
    unsigned char *t = malloc(p->entries * VTABLE_ENTRY_BYTES);
    if (!(*out = t))
        return -ENOMEM;
    for (uint64_t e = 0; e < p->entries; e++) {
        uint64_t size = 0;
        int rc = p->target[e] == VREF_UNMAPPED
                     ? 0
                     : source_entry(g, p, z, p->target[e], uri, sizeof uri, &size);
        if (rc == 0 && p->target[e] != VREF_UNMAPPED && size == 0 && !same_fill(vfill, sfill)) {
            *why = "a source chunk the file leaves to a fill value other than the version's";
            rc = 1;
        } else if (rc == 1) {
            *why = "a source chunk's URI would be too long, or the chunk 2 GiB or more";
        }
        if (rc != 0) {
            free(t);
            *out = NULL;
            return rc;
        }
        put_entry(t + e * VTABLE_ENTRY_BYTES, size, size ? uri : absent);
    }
    return 0;
}

static int put_tiles(struct ingest *g, const char *tid, const struct vtable_geom *geom,
                     const unsigned char *table)
{
    int rc = 0;
    for (uint64_t t = 0; rc == 0 && t < geom->tiles; t++) {
        uint64_t first, count, idx[HJSON_DIMS_MAX];
        char key[STORE_KEY_MAX + 1];
        unsigned char *bytes = NULL;
        size_t len = 0;
        vtable_tile_span(geom, t, &first, &count, idx);
        rc = schema_chunk_key(tid, idx, geom->rank, -1, key, sizeof key) != 0 ? -EIO : 0;
        if (rc == 0)
            rc = vtable_tile_encode(geom, table, t, &bytes, &len);
        if (rc == 0 && (rc = store_put_new(g->cfg->store, key, bytes, len)) != 0)
            log_error("%s: chunk table tile %s cannot be stored: %s", g->log_name, key,
                      strerror(-rc));
        if (rc == 0)
            g->stats->bytes_written += len;
        free(bytes);
    }
    return rc;
}

/* The version's JSON names its table: REF_INDIRECT in creationProperties (with the source's
 * filters, which say how the chunks it names are encoded), H5D_CHUNKED of the same dims at top
 * level (§8). hsload sends no fillTime with a REF layout. */
static int set_layout(struct ingest *g, const struct vref_plan *p, const char *tid)
{
    json_t *v = g->objs[p->vds].json;
    const json_t *filters =
        json_object_get(json_object_get(g->objs[p->src].json, "creationProperties"), "filters");
    json_t *cp = json_object_get(v, "creationProperties");
    if (!cp && json_object_set_new(v, "creationProperties", json_object()) == 0)
        cp = json_object_get(v, "creationProperties");
    json_t *lay = json_pack("{s:s,s:o*,s:s}", "class", "H5D_CHUNKED_REF_INDIRECT", "dims",
                            hjson_dims_new(p->chunk, p->rank), "chunk_table", tid);
    json_t *top =
        json_pack("{s:s,s:o*}", "class", "H5D_CHUNKED", "dims", hjson_dims_new(p->chunk, p->rank));
    int rc =
        cp && lay && top && json_object_size(lay) == 3 && json_object_size(top) == 2 ? 0 : -ENOMEM;
    json_object_del(cp, "fillTime");
    json_object_del(cp, "filters");
    if (rc == 0 && filters && json_object_set_new(cp, "filters", json_deep_copy(filters)) != 0)
        rc = -ENOMEM;
    if (rc == 0 && (json_object_set(cp, "layout", lay) != 0 || json_object_set(v, "layout", top)))
        rc = -ENOMEM;
    json_decref(lay);
    json_decref(top);
    return rc;
}

/* The source still is what the plan saw: stored as chunk objects on the pinned grid. */
static int source_kept(const struct ingest *g, const struct vref_plan *p)
{
    const struct ingest_obj *s = &g->objs[p->src];
    const json_t *lay = json_object_get(s->json, "layout");
    uint64_t dims[INGEST_MAX_RANK];
    int rank = 0;
    if (s->linked || s->base_ref || s->dropped || json_object_get(lay, "partition_count") ||
        hjson_dims(json_object_get(lay, "dims"), dims, &rank) != 0 || rank != p->rank)
        return 0;
    return memcmp(dims, p->chunk, (size_t)rank * sizeof *dims) == 0;
}

static int one_table(struct ingest *g, const struct vref_plan *p, struct sizes *z)
{
    const char *why = "its source is no longer stored as chunk objects on the grid of its "
                      "HDF5 chunks (a linked file, or a layout kept from the base)";
    unsigned char *table = NULL;
    char tid[SCHEMA_ID_BUF], key[STORE_KEY_MAX + 1];
    struct vtable_geom geom;
    int rc = source_kept(g, p) ? list_sizes(g, p->src, z) : 1;
    if (rc == 0)
        rc = fill_table(g, p, z, &table, &why);
    if (rc == 1) {
        log_info("%s: %s: virtual dataset not given a chunk table (HSDS reads it as empty): %s",
                 g->log_name, g->objs[p->vds].path, why);
        return 0;
    }
    vtable_geom_new(&geom, p->grid, p->rank);
    json_t *doc = NULL;
    if (rc == 0)
        rc = ingest_new_id(g, 'd', tid);
    if (rc == 0)
        rc = put_tiles(g, tid, &geom, table);
    if (rc == 0 && !(doc = vtable_json(tid, g->root, &geom, ingest_now(g))))
        rc = -ENOMEM;
    if (rc == 0)
        rc = schema_obj_key(tid, key, sizeof key) != 0 ? -EIO : 0;
    if (rc == 0)
        rc = ingest_put_json(g, key, doc, g->objs[p->vds].path);
    if (rc == 0)
        rc = set_layout(g, p, tid);
    json_decref(doc);
    free(table);
    return rc;
}

int ingest_vref_tables(struct ingest *g)
{
    struct sizes z = { SIZE_MAX, NULL };
    int rc = 0;
    for (size_t i = 0; rc == 0 && g->vref && i < g->vref->n; i++)
        rc = one_table(g, &g->vref->v[i], &z);
    strmap_free(z.by_key, NULL);
    if (rc == -ENOMEM)
        log_error("%s: out of memory while the chunk tables of virtual datasets were made",
                  g->log_name);
    return rc == -ENOMEM || rc == -ENOSPC ? rc : rc ? -EIO : 0;
}
