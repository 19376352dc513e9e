/*
 * build_data: datasets. Two ways to carry a dataset's data into the image:
 *
 * - chunk extents: fixed-size types whose stored element bytes are the HDF5 element bytes
 *   (everything but object references). The dataset is chunked with the store's own chunk
 *   shape (top-level layout.dims, which HSDS may have changed from the source's), declared
 *   without filters, and every chunk object that exists is written as a placeholder: reading
 *   it later fetches and decodes that object. Chunks that do not exist are not declared, so
 *   HDF5 readers see the fill value there.
 * - values: variable-length data and references cannot be served byte for byte (HDF5 keeps
 *   vlen data in a global heap and references are addresses), so those chunks are fetched
 *   now, converted, and written for real; scalar datasets too (HDF5 cannot chunk them).
 *
 * Chunk extents are declared when the dataset is created, values once every object exists.
 * Neither may cost more than the chunks that exist: the chunk index HDF5 would pick for a
 * sparse grid is replaced by one that grows with the chunks written (index_by_stored_chunks).
 * A dataset that cannot be made as stored is shown as a placeholder whose reads fail
 * (create_placeholder); a chunk whose values cannot be written reads as EIO
 * (poison_value_chunk). What cannot be shown even so is left out. Each is noted once
 * (build_omit).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/why.h"

/* A chunk grid up to this many chunks, or up to DENSE_FACTOR times the chunks written, keeps
 * the index HDF5 picks (see index_by_stored_chunks). */
#define DENSE_GRID_MIN (1u << 20)
#define DENSE_FACTOR 4
#define PLACEHOLDER_CHUNK_BYTES (1u << 30)
/* The library fills one chunk-sized buffer to allocate a dense dataset's chunks (declare_dense) */
#define DENSE_FILL_MAX (8u << 20)
#define PLACEHOLDER_CHUNKS_MAX (1u << 20)

struct dset_plan {
    const json_t *type, *shape, *layout, *cprops;
    hid_t tid; /* invalid when the type cannot be made */
    int rank;
    int shape_ok; /* its class and dims were read (maxdims may be bad) */
    hsize_t dims[IMAGE_MAX_RANK], maxdims[IMAGE_MAX_RANK];
    uint64_t cdims[IMAGE_MAX_RANK];
    int chunked;                 /* declared chunked in the image (simple shapes) */
    int by_value;                /* values written for real */
    size_t stored_size;          /* element size in chunk objects (fixed types) */
    unsigned traits;             /* enum h5type_trait bits of the type */
    const struct build_obj *obj; /* the dataset */
    int virtual;                 /* a virtual dataset: its mappings, no chunks (build_vds.c) */
};

/* ---- reading the dataset JSON ---- */

static int read_dims(const json_t *arr, int rank, hsize_t *out, int allow_zero)
{
    for (int k = 0; k < rank; k++) {
        const json_t *v = json_array_get(arr, (size_t)k);
        if (!json_is_integer(v) || json_integer_value(v) < (allow_zero ? 0 : 1) ||
            json_integer_value(v) > ((json_int_t)1 << 50))
            return -EINVAL;
        out[k] = (hsize_t)json_integer_value(v);
    }
    return 0;
}

/* Elements beyond this cannot be counted: a product past 2^64 wraps (HDF5 1.10 then counts 0
 * elements), and so would the chunk grid's linear index, which would put one chunk object's
 * bytes where another's belong. A grid has no more chunks than its shape has elements. */
#define COUNT_MAX ((uint64_t)1 << 62)

/* 1 when the product of n[0..rank) (each > 0) stays within COUNT_MAX. */
static int countable(const uint64_t *n, int rank)
{
    uint64_t product = 1;
    for (int k = 0; k < rank; k++) {
        if (n[k] > COUNT_MAX / product)
            return 0;
        product *= n[k];
    }
    return 1;
}

/* The shape; shape_ok once its class and dims are known (all a placeholder needs). */
static int plan_shape(struct dset_plan *p, char *why, size_t why_len)
{
    const char *cls = hjson_text(json_object_get(p->shape, "class"));
    const json_t *dims = json_object_get(p->shape, "dims"),
                 *max = json_object_get(p->shape, "maxdims");
    if (!cls || strcmp(cls, "H5S_SIMPLE") != 0) {
        size_t n;
        char unused[8];
        hid_t space = build_dataspace(p->shape, &n, unused, sizeof unused);
        p->shape_ok = space >= 0;
        if (space >= 0)
            H5Sclose(space);
        return 0; /* NULL and SCALAR: rank 0 (others fail at creation) */
    }
    p->rank = (int)json_array_size(dims);
    if (p->rank < 1 || p->rank > IMAGE_MAX_RANK || read_dims(dims, p->rank, p->dims, 1) != 0) {
        p->rank = 0;
        return why_reject(why, why_len, "shape dims are not 1 to 32 non-negative integers");
    }
    uint64_t n[IMAGE_MAX_RANK];
    for (int k = 0; k < p->rank; k++)
        n[k] = p->dims[k] ? p->dims[k] : 1;
    if (!countable(n, p->rank)) {
        p->rank = 0;
        return why_reject(why, why_len, "more than 2^62 elements");
    }
    p->shape_ok = 1;
    if (max && (json_array_size(max) != (size_t)p->rank || read_dims(max, p->rank, p->maxdims, 1)))
        return why_reject(why, why_len, "maxdims do not match the shape");
    for (int k = 0; k < p->rank; k++) {
        if (!max)
            p->maxdims[k] = p->dims[k];
        else if (p->maxdims[k] == 0)
            p->maxdims[k] = H5S_UNLIMITED; /* HSDS writes 0 for unlimited (spec §3.4) */
        if (p->maxdims[k] < p->dims[k])
            return why_reject(why, why_len, "maxdims smaller than dims");
    }
    return 0;
}

static int plan_layout(struct dset_plan *p, char *why, size_t why_len)
{
    const json_t *dims = json_object_get(p->layout, "dims");
    hsize_t c[IMAGE_MAX_RANK];
    uint64_t bytes = p->stored_size ? p->stored_size : 16;
    if (p->rank == 0)
        return 0;
    if (json_array_size(dims) != (size_t)p->rank || read_dims(dims, p->rank, c, 0) != 0)
        return why_reject(why, why_len,
                          "layout dims are missing, not positive or of the wrong rank");
    for (int k = 0; k < p->rank; k++) {
        p->cdims[k] = c[k];
        if (bytes > IMAGE_CHUNK_MAX / c[k])
            return why_reject(why, why_len, "a chunk of more than 2 GiB");
        bytes *= c[k];
        /* HDF5 wants fixed dimensions no smaller than a chunk; HSDS does not care */
        if (p->maxdims[k] != H5S_UNLIMITED && c[k] > p->maxdims[k])
            p->by_value = 1;
    }
    p->chunked = 1;
    return 0;
}

/* Everything about the dataset that can be read, even after a failure (a placeholder shows
 * what is known); why tells the first failure. 0, -EINVAL or -ENOMEM. */
static int plan_dataset(struct builder *b, struct build_obj *o, struct dset_plan *p, char *why,
                        size_t why_len)
{
    char later[200];
    memset(p, 0, sizeof *p);
    p->type = json_object_get(o->json, "type");
    p->shape = json_object_get(o->json, "shape");
    p->layout = json_object_get(o->json, "layout");
    p->cprops = json_object_get(o->json, "creationProperties");
    p->obj = o;
    p->virtual = build_vds_is_virtual(o->json);
    int rc = build_type(b, p->type, &p->tid, why, why_len);
    if (rc == -ENOMEM || h5type_traits_of(p->type, &p->traits) == -ENOMEM)
        return -ENOMEM; /* a bad type has no traits: the build_type failure says why */
    unsigned traits = p->traits;
    int size_rc = traits & H5TYPE_HAS_VLEN ? 0 : h5type_stored_size(p->type, &p->stored_size);
    if (size_rc == -ENOMEM)
        return size_rc;
    if (size_rc != 0) {
        p->stored_size = 0;
        if (rc == 0)
            why_set(why, why_len, "type has no stored size");
        rc = -EINVAL;
    }
    p->by_value = (traits & (H5TYPE_HAS_VLEN | H5TYPE_HAS_REF)) ||
                  (p->tid >= 0 && H5Tget_size(p->tid) != p->stored_size);
    int shape_rc = plan_shape(p, rc ? later : why, rc ? sizeof later : why_len);
    if (rc == 0 && shape_rc == 0)
        rc = plan_layout(p, why, why_len);
    if (p->rank == 0)
        p->by_value = 1;
    return rc ? rc : shape_rc;
}

static void plan_close(struct dset_plan *p)
{
    if (p->tid >= 0)
        H5Tclose(p->tid);
    p->tid = H5I_INVALID_HID;
}

/* ---- creating the dataset ---- */

static int set_fill_value(struct builder *b, const struct dset_plan *p, hid_t dcpl, char *why,
                          size_t why_len)
{
    const json_t *fv = json_object_get(p->cprops, "fillValue");
    const char *enc = hjson_text(json_object_get(p->cprops, "fillValue_encoding"));
    void *buf = NULL;
    int rc;
    if (!fv || json_is_null(fv) || (p->traits & H5TYPE_HAS_VLEN))
        return 0;
    struct h5value_refs refs = { build_resolve_ref, b };
    if (enc && strcmp(enc, "base64") == 0 && json_is_string(fv)) {
        unsigned char *bytes;
        size_t len;
        rc = h5value_base64_decode(json_string_value(fv), json_string_length(fv), &bytes, &len);
        if (rc == 0) {
            rc = h5value_from_stored(p->type, p->tid, bytes, len, 1, &refs, &buf, why, why_len);
            free(bytes);
        }
    } else {
        rc = h5value_from_json(p->type, p->tid, fv, 1, &refs, &buf, why, why_len);
    }
    if (rc == 0 && H5Pset_fill_value(dcpl, p->tid, buf) < 0)
        rc = -EIO;
    if (buf)
        h5value_free(p->tid, buf, 1);
    return rc;
}

/* The chunk dimension HDF5 is given: no larger than a fixed maximum dimension. */
static hsize_t hdf5_chunk_dim(const struct dset_plan *p, int k)
{
    if (p->maxdims[k] != H5S_UNLIMITED && p->cdims[k] > p->maxdims[k])
        return p->maxdims[k] ? p->maxdims[k] : 1;
    return p->cdims[k];
}

/* dense: the chunks are allocated as the dataset grows to its shape (declare_dense). *rc: 0,
 * -EINVAL (why) or -ENOMEM, which must fail the build rather than make a placeholder. */
static hid_t dataset_plist(struct builder *b, const struct dset_plan *p, int dense, int *rc,
                           char *why, size_t why_len)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    *rc = -EINVAL;
    if (dcpl < 0 || build_object_plist(dcpl) != 0)
        goto fail;
    if (p->chunked && !p->virtual) {
        hsize_t c[IMAGE_MAX_RANK];
        for (int k = 0; k < p->rank; k++)
            c[k] = hdf5_chunk_dim(p, k);
        if (H5Pset_chunk(dcpl, p->rank, c) < 0)
            goto fail;
    }
    if (dense && (H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0 ||
                  H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC) < 0))
        goto fail;
    *rc = set_fill_value(b, p, dcpl, why, why_len);
    if (*rc == 0 && p->virtual)
        *rc = build_vds_mappings(b, p->obj, dcpl, p->rank, p->dims, p->maxdims, why, why_len);
    if (*rc != 0) {
        *rc = *rc == -ENOMEM ? -ENOMEM : -EINVAL;
        H5Pclose(dcpl);
        return H5I_INVALID_HID;
    }
    return dcpl;
fail:
    why_set(why, why_len, "HDF5 refused the creation properties");
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return H5I_INVALID_HID;
}

/* dense: no elements yet (declare_dense grows it to its shape) */
static hid_t plan_space(const struct dset_plan *p, int dense, char *why, size_t why_len)
{
    size_t n;
    hsize_t none[IMAGE_MAX_RANK] = { 0 };
    if (p->rank == 0)
        return build_dataspace(p->shape, &n, why, why_len);
    return H5Screate_simple(p->rank, dense ? none : p->dims, p->maxdims);
}

/* The dataset as stored: its type, shape and creation properties (a dense one: its shape at
 * declare_dense). 0, -EINVAL (why) or -ENOMEM. */
static int create_as_stored(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                            int dense, char *why, size_t why_len)
{
    hid_t space = plan_space(p, dense, why, why_len), dcpl = H5I_INVALID_HID;
    int plist_rc = -EINVAL;
    if (space >= 0)
        dcpl = dataset_plist(b, p, dense, &plist_rc, why, why_len);
    if (dcpl >= 0 && (o->hid = H5Dcreate_anon(b->file, p->tid, space, dcpl, H5P_DEFAULT)) < 0)
        why_set(why, why_len, "HDF5 refused it");
    if (o->hid >= 0 && build_reserve_attr_room(o) != 0) {
        why_set(why, why_len, "HDF5 refused room for its attributes");
        H5Dclose(o->hid); /* already failing */
        o->hid = H5I_INVALID_HID;
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return o->hid >= 0 ? 0 : plist_rc == -ENOMEM ? -ENOMEM : -EINVAL;
}

/*
 * HDF5 1.10 indexes the chunks of a dataset whose dimensions are all fixed with a fixed array
 * over its maximal grid, and those of a dataset with one unlimited dimension with an extensible
 * array over its current grid. Both follow the declared grid, not the chunks written: a fixed
 * array keeps a bitmap of its whole grid (in the file, and in RAM while it is written) and up to
 * 8 KiB per page of 1024 chunks touched, and refuses chunk indexes from 2^32 on. 10^12 declared
 * chunks with one written made an 8 TB file and 250 MB of RAM. When the grid is far larger than
 * the chunks to be written, the dataset gets a version 1 B-tree index instead (H5Dformat_convert
 * before any chunk is written: the index of HDF5 1.8 files, which every reader knows), whose
 * size follows the chunks written. Several unlimited dimensions already get a v2 B-tree, which does too.
 */
static int index_by_stored_chunks(hid_t dset, const struct dset_plan *p, uint64_t written)
{
    uint64_t dense =
        written > DENSE_GRID_MIN / DENSE_FACTOR ? written * DENSE_FACTOR : DENSE_GRID_MIN;
    uint64_t grid = 1;
    int unlimited = 0;
    if (!p->chunked)
        return 0;
    for (int k = 0; k < p->rank; k++)
        unlimited += p->maxdims[k] == H5S_UNLIMITED;
    if (unlimited > 1)
        return 0;
    for (int k = 0; k < p->rank && grid <= dense; k++) {
        uint64_t extent = unlimited ? p->dims[k] : p->maxdims[k], c = hdf5_chunk_dim(p, k);
        uint64_t n = extent / c + (extent % c != 0);
        grid = n == 0 ? 0 : grid > dense / n ? dense + 1 : grid * n;
    }
    if (grid <= dense)
        return 0;
    return H5Dformat_convert(dset) < 0 ? -EIO : 0;
}

int build_dataset_fill_refers(const struct build_obj *o)
{
    const json_t *fv = json_object_get(json_object_get(o->json, "creationProperties"), "fillValue");
    return fv && !json_is_null(fv) &&
           (h5type_traits(json_object_get(o->json, "type")) & H5TYPE_HAS_REF) != 0;
}

/* ---- the dataset table entry ---- */

static int add_dataset(struct builder *b, struct image_dataset **out)
{
    struct image *img = b->img;
    if (img->n_datasets == b->cap_datasets) {
        struct image_dataset *n =
            grow_array(img->datasets, &b->cap_datasets, b->cap_datasets + 1, sizeof *n, 16);
        if (!n)
            return -ENOMEM;
        img->datasets = n;
    }
    *out = &img->datasets[img->n_datasets++];
    memset(*out, 0, sizeof **out);
    return 0;
}

static int describe_dataset(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                            struct image_dataset *ds, char *why, size_t why_len)
{
    ds->id = strdup(o->id);
    ds->path = build_path(b, o) ? strdup(build_path(b, o)) : NULL;
    ds->rank = p->rank;
    ds->itemsize = p->stored_size;
    ds->chunk_bytes = p->stored_size;
    ds->partition_count = (int)json_integer_value(json_object_get(p->layout, "partition_count"));
    for (int k = 0; k < p->rank; k++) {
        ds->dims[k] = p->dims[k];
        ds->chunk_dims[k] = p->cdims[k];
        ds->grid[k] = (p->dims[k] + p->cdims[k] - 1) / p->cdims[k];
        ds->chunk_bytes *= p->cdims[k];
    }
    if (!ds->id || !ds->path)
        return -ENOMEM;
    if (build_chunk_key_prefix(o->id, p->rank, ds->key_prefix, sizeof ds->key_prefix) != 0)
        return why_reject(why, why_len, "its id has no chunk keys");
    const json_t *filters = json_object_get(p->cprops, "filters");
    return codec_spec_from_filters(filters, p->stored_size, 0, CODEC_SOURCE_HSDS, &ds->codec, why,
                                   why_len);
}

/* ---- chunk extents ---- */

/* The element a missing chunk reads as, from the dataset HDF5 made (zeros when undefined). */
static int read_fill_value(struct build_obj *o, struct image_dataset *ds)
{
    H5D_fill_value_t state;
    hid_t dcpl = H5Dget_create_plist(o->hid), tid = H5Dget_type(o->hid);
    int rc = -EIO;
    if (!(ds->fill = calloc(1, ds->itemsize ? ds->itemsize : 1)))
        rc = -ENOMEM;
    else if (dcpl >= 0 && tid >= 0 && H5Pfill_value_defined(dcpl, &state) >= 0)
        rc = state == H5D_FILL_VALUE_UNDEFINED || H5Pget_fill_value(dcpl, tid, ds->fill) >= 0
                 ? 0
                 : -EIO;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (tid >= 0)
        H5Tclose(tid);
    return rc;
}

/* A *_REF layout (data in another HDF5 file of the bucket) lives in creationProperties. */
static int is_ref_layout(const struct dset_plan *p)
{
    const char *cls = hjson_text(json_object_get(json_object_get(p->cprops, "layout"), "class"));
    return cls && strstr(cls, "_REF") != NULL;
}

/* The chunks a dataset served from extents declares: those of the linked file (*_REF), the
 * listed chunk objects, or for v1 ids every chunk of the grid. 0; -EINVAL (why): its data cannot
 * be served; -ENOMEM, -EIO. */
static int chunk_source(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                        struct image_dataset *ds, struct chunk_list *chunks, char *why,
                        size_t why_len)
{
    int rc =
        is_ref_layout(p) ? build_ref_chunks(b, o, ds, &chunks->v, &chunks->n, why, why_len) : 1;
    if (rc == 1) /* chunk objects in the bucket */
        rc = build_take_listed(o, ds, chunks) ? 0 : build_extent_chunks(b, ds, chunks);
    if (rc == -EFBIG)
        why_set(why, why_len, "a v1 dataset of more than %u chunks, which cannot be listed",
                V1_PROBE_MAX);
    /* h5diff and others call a dataset without allocated storage "empty" and will not compare
     * it: declare its first chunk, which reads as the fill value like every absent chunk */
    if (rc == 0 && chunks->n == 0 && ds->origin == ORIGIN_HSDS && build_all_chunks_nonzero(ds))
        rc = build_chunk_list_add(chunks, 0);
    if (rc == 0 && chunks->n > IMAGE_CHUNKS_MAX - b->declared) {
        why_set(why, why_len, "%zu more chunks would pass the image's limit of %u", chunks->n,
                IMAGE_CHUNKS_MAX);
        rc = -EINVAL;
    }
    if (rc == 0)
        b->declared += chunks->n; /* every dataset is made before any chunk is declared */
    return rc == -EFBIG ? -EINVAL : rc;
}

/* The table entry ds (moved in) of the dataset just created; its chunks (moved to o) are
 * declared by build_dataset_declare. */
static int declare_extents(struct builder *b, struct build_obj *o, struct image_dataset *ds,
                           struct chunk_list *chunks)
{
    struct image_dataset *entry;
    int rc = add_dataset(b, &entry);
    if (rc != 0)
        return rc;
    *entry = *ds;
    memset(ds, 0, sizeof *ds);
    o->dset_index = (uint32_t)(entry - b->img->datasets);
    o->chunks = chunks->v;
    o->n_chunks = chunks->n;
    *chunks = (struct chunk_list){ 0 };
    return read_fill_value(o, entry);
}

/* Every chunk of the grid stored, each as large as HDF5's chunk, the library's fill buffer
 * small, and a shape that cannot grow: the chunks can be allocated by the library in one call
 * (declare_dense). Early allocation stays with the dataset: an r+ writer that grew one by 4x
 * and wrote one element stored 64 chunk objects (48 of them fill) instead of 17, so a dataset
 * that can grow keeps incremental allocation and is declared chunk by chunk. */
static int is_dense(const struct dset_plan *p, const struct image_dataset *ds, size_t n)
{
    uint64_t grid = 1;
    if (!p->chunked || p->rank == 0 || n == 0 || ds->chunk_bytes > DENSE_FILL_MAX)
        return 0;
    for (int k = 0; k < p->rank; k++) {
        if (hdf5_chunk_dim(p, k) != p->cdims[k])
            return 0;
        if (p->maxdims[k] != p->dims[k])
            return 0;
        grid *= ds->grid[k];
    }
    return grid == n;
}

/* A dataset served from chunk extents, complete at creation: which chunks exist is settled
 * first, so that one whose chunks cannot be served becomes a placeholder instead (-EINVAL). */
static int create_extents(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                          char *why, size_t why_len)
{
    struct image_dataset ds = { 0 };
    struct chunk_list chunks = { 0 };
    int rc = describe_dataset(b, o, p, &ds, why, why_len);
    if (rc == 0)
        rc = chunk_source(b, o, p, &ds, &chunks, why, why_len);
    o->dense = rc == 0 && is_dense(p, &ds, chunks.n);
    if (rc == 0)
        rc = create_as_stored(b, o, p, o->dense, why, why_len);
    if (rc == 0)
        rc = index_by_stored_chunks(o->hid, p, chunks.n);
    if (rc == 0)
        rc = declare_extents(b, o, &ds, &chunks);
    o->data_done = rc == 0;
    image_dataset_clear(&ds);
    free(chunks.v);
    return rc;
}

static int is_null_space(const json_t *shape)
{
    const char *cls = hjson_text(json_object_get(shape, "class"));
    return cls && strcmp(cls, "H5S_NULL") == 0;
}

/* The chunk grid and codec of a dataset written as values. 0 or -EINVAL (why). */
static int values_grid(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                       struct image_dataset *ds, char *why, size_t why_len)
{
    struct dset_plan q = *p;
    int vlen = (p->traits & H5TYPE_HAS_VLEN) != 0;
    if (q.rank == 0) { /* HSDS keeps a scalar as shape [1], chunk "0" (spec §2.4) */
        q.rank = 1;
        q.dims[0] = q.cdims[0] = 1;
    }
    if (vlen)
        q.stored_size = 1; /* vlen chunks have no fixed size; only their grid matters */
    int rc = describe_dataset(b, o, &q, ds, why, why_len);
    if (rc == 0 && vlen)
        rc = codec_spec_from_filters(json_object_get(p->cprops, "filters"), 1, 1, CODEC_SOURCE_HSDS,
                                     &ds->codec, why, why_len);
    return rc;
}

/* A dataset whose values are written later (build_dataset_fill): made now, once its chunks are
 * known to be decodable at all, or -EINVAL (why) for a placeholder. */
static int create_for_values(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                             char *why, size_t why_len)
{
    struct image_dataset ds = { 0 };
    int rc = is_null_space(p->shape) ? 0 : values_grid(b, o, p, &ds, why, why_len);
    image_dataset_clear(&ds);
    return rc ? rc : create_as_stored(b, o, p, 0, why, why_len);
}

/* ---- placeholders: what cannot be shown as stored, shown unreadable ---- */

/* Declare [addr, addr+size) of dataset o unreadable: reads of it fail with EIO and fetch
 * nothing. The table entry is made on first use (*index UINT32_MAX). */
static int poison_extent(struct builder *b, const struct build_obj *o, haddr_t addr, hsize_t size,
                         uint64_t chunk, uint32_t *index)
{
    if (*index == UINT32_MAX) {
        struct image_dataset *ds;
        int rc = add_dataset(b, &ds);
        if (rc != 0)
            return rc;
        ds->origin = ORIGIN_POISON;
        ds->chunk_bytes = size;
        ds->id = strdup(o->id);
        ds->path = build_path(b, o) ? strdup(build_path(b, o)) : NULL;
        if (!ds->id || !ds->path)
            return -ENOMEM;
        *index = (uint32_t)(ds - b->img->datasets);
    }
    return extent_write_chunk(b->target.map, addr, size, (struct extent_tag){ *index, chunk });
}

/*
 * How a placeholder holds its data: chunked, allocated at creation and never written (HDF5's
 * implicit chunk index: one allocation and no index, a hole that costs nothing however large),
 * in chunks of up to PLACEHOLDER_CHUNK_BYTES, whole rows first. Not contiguous: HDF5 readers
 * keep a failed read of contiguous data in their sieve buffer and return zeros for it the next
 * time, while a chunk that fails to read is not kept. Allocation costs time per chunk, hence
 * PLACEHOLDER_CHUNKS_MAX. 0, or -EFBIG (too large to show).
 */
static int placeholder_chunks(const struct dset_plan *p, size_t elem, hsize_t *c)
{
    uint64_t bytes = elem ? elem : 1, chunks = 1;
    for (int k = p->rank - 1; k >= 0; k--) {
        uint64_t fit = PLACEHOLDER_CHUNK_BYTES / bytes;
        c[k] = p->dims[k] < fit ? p->dims[k] : fit ? fit : 1;
        bytes *= c[k];
        uint64_t n = p->dims[k] / c[k] + (p->dims[k] % c[k] != 0);
        if (n > PLACEHOLDER_CHUNKS_MAX / chunks)
            return -EFBIG;
        chunks *= n;
    }
    return 0;
}

static int plan_has_data(const struct dset_plan *p)
{
    for (int k = 0; k < p->rank; k++)
        if (p->dims[k] == 0)
            return 0;
    return p->rank > 0;
}

static hid_t placeholder_plist(const struct dset_plan *p, hid_t tid, char *why, size_t why_len)
{
    hsize_t c[IMAGE_MAX_RANK];
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int ok = dcpl >= 0 && build_object_plist(dcpl) == 0;
    if (ok && plan_has_data(p)) { /* else nothing to read: the default layout */
        if (placeholder_chunks(p, H5Tget_size(tid), c) != 0) {
            why_set(why, why_len, "too large to show even as a placeholder");
            ok = 0;
        } else {
            ok = H5Pset_chunk(dcpl, p->rank, c) >= 0 &&
                 H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
                 H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0;
        }
    }
    if (!ok && dcpl >= 0) {
        H5Pclose(dcpl);
        return H5I_INVALID_HID;
    }
    return dcpl;
}

/* The placeholder with type tid; its shape is the dataset's, with fixed maximum dims (an
 * implicit chunk index cannot grow). why: the reason it could not be made. */
static int try_placeholder(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                           hid_t tid, char *why, size_t why_len)
{
    size_t n;
    hid_t space = p->rank == 0 ? build_dataspace(p->shape, &n, why, why_len)
                               : H5Screate_simple(p->rank, p->dims, NULL);
    hid_t dcpl = space >= 0 ? placeholder_plist(p, tid, why, why_len) : H5I_INVALID_HID;
    if (dcpl >= 0 && (o->hid = H5Dcreate_anon(b->file, tid, space, dcpl, H5P_DEFAULT)) < 0)
        why_set(why, why_len, "HDF5 refused even a placeholder");
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return o->hid >= 0;
}

/* Its type when HDF5 can make it, else an opaque one of the stored element size. The opaque
 * type has no tag: h5py reads only untagged (or its own) opaque types, and a tag would make
 * reads fail on the type instead of with EIO. */
static int make_placeholder(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                            char *why, size_t why_len)
{
    if (p->tid >= 0 && try_placeholder(b, o, p, p->tid, why, why_len))
        return 1;
    hid_t opaque = H5Tcreate(H5T_OPAQUE, p->stored_size ? p->stored_size : 1);
    int made = opaque >= 0 && try_placeholder(b, o, p, opaque, why, why_len);
    if (opaque >= 0)
        H5Tclose(opaque);
    return made;
}

/* A scalar cannot be chunked, and an unreadable contiguous value would read as zeros the
 * second time (placeholder_chunks): it cannot be shown unreadable. */
static int placeholder_possible(const struct dset_plan *p, char *why, size_t why_len)
{
    const char *cls = hjson_text(json_object_get(p->shape, "class"));
    if (!p->shape_ok)
        why_set(why, why_len, "its shape is not one HDF5 can make");
    else if (p->rank == 0 && (!cls || strcmp(cls, "H5S_NULL") != 0))
        why_set(why, why_len, "a scalar cannot be shown unreadable");
    else
        return 1;
    return 0;
}

/*
 * Dataset o cannot be made as stored (why): it is shown in its place with what could be read
 * of it (its type, or an opaque one; its shape) and its storage declared unreadable, so h5ls
 * lists it and every read of its data fails with EIO instead of it vanishing. Left out (its
 * links too) when even that cannot be made.
 */
static int create_placeholder(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                              const char *why)
{
    char no[200] = "", full[420];
    if (!placeholder_possible(p, no, sizeof no) || !make_placeholder(b, o, p, no, sizeof no)) {
        o->dropped = 1;
        snprintf(full, sizeof full, "%s; %s", why, no);
        return build_omit(b, IMAGE_OMIT_OBJECT, o->id, build_path(b, o), NULL, full);
    }
    o->data_done = 1;
    int rc = 0;
    hsize_t size = H5Dget_storage_size(o->hid), zero[IMAGE_MAX_RANK] = { 0 }, first;
    haddr_t addr = HADDR_UNDEF;
    unsigned mask;
    uint32_t index = UINT32_MAX;
    if (size > 0) { /* one allocation from the first chunk on */
        if (H5Dget_chunk_info_by_coord(o->hid, zero, &mask, &addr, &first) < 0 ||
            addr == HADDR_UNDEF)
            return -EIO;
        rc = poison_extent(b, o, addr, size, 0, &index);
    }
    return rc ? rc : build_omit(b, IMAGE_OMIT_PLACEHOLDER, o->id, build_path(b, o), NULL, why);
}

int build_dataset_create(struct builder *b, struct build_obj *o)
{
    struct dset_plan p;
    char why[200] = "HDF5 refused it";
    int rc = plan_dataset(b, o, &p, why, sizeof why);
    if (rc == 0 && p.virtual) { /* its values are its sources': nothing to fetch or write */
        rc = create_as_stored(b, o, &p, 0, why, sizeof why);
        o->data_done = rc == 0;
    } else if (rc == 0 && p.rank > 0 && !p.by_value)
        rc = create_extents(b, o, &p, why, sizeof why);
    else if (rc == 0)
        rc = create_for_values(b, o, &p, why, sizeof why);
    if (rc == -EINVAL)
        rc = create_placeholder(b, o, &p, why);
    plan_close(&p);
    return rc;
}

/* ---- values written for real ---- */

#define VALUES_CHUNK_MAX (256u << 20) /* a vlen chunk's stored bytes, decoded */

/* Fetch and decode one chunk's stored bytes. -ENOENT: no such chunk (fill value). */
static int fetch_stored(struct builder *b, const struct image_dataset *ds, const char *key,
                        int vlen, unsigned char **out, size_t *len, char *why, size_t why_len)
{
    struct store_buf raw = { 0 };
    int rc =
        store_get(b->src->store, key, vlen ? VALUES_CHUNK_MAX : ds->chunk_bytes * 2 + 65536, &raw);
    if (rc == -ENOENT)
        return rc;
    if (rc != 0) {
        why_set(why, why_len, "chunk %.120s: %.60s", key, strerror(-rc));
        return rc == -EFBIG || rc == -EISDIR ? -EINVAL : -EIO;
    }
    char cwhy[160] = "";
    if (vlen) {
        rc = codec_decode_alloc(&ds->codec, raw.data, raw.len, VALUES_CHUNK_MAX, out, len, cwhy,
                                sizeof cwhy);
    } else if (!(*out = malloc(ds->chunk_bytes ? ds->chunk_bytes : 1))) {
        rc = -ENOMEM;
    } else {
        *len = ds->chunk_bytes;
        rc = codec_decode(&ds->codec, raw.data, raw.len, *out, *len, cwhy, sizeof cwhy);
        if (rc != 0) {
            free(*out);
            *out = NULL;
        }
    }
    if (rc == -EINVAL)
        why_set(why, why_len, "chunk %.120s: %.60s", key, cwhy);
    store_buf_free(&raw);
    return rc;
}

/* Select in space the part of chunk `linear` that lies inside dims (at start, or at 0). */
static herr_t select_chunk(hid_t space, const struct image_dataset *ds, const hsize_t *dims,
                           uint64_t linear, int at_origin)
{
    hsize_t start[IMAGE_MAX_RANK], count[IMAGE_MAX_RANK];
    for (int k = ds->rank - 1; k >= 0; k--) {
        uint64_t i = linear % ds->grid[k];
        linear /= ds->grid[k];
        start[k] = i * ds->chunk_dims[k];
        count[k] = dims[k] - start[k] < ds->chunk_dims[k] ? dims[k] - start[k] : ds->chunk_dims[k];
        if (at_origin)
            start[k] = 0;
    }
    return H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
}

static int write_chunk_values(struct build_obj *o, const struct dset_plan *p,
                              const struct image_dataset *ds, uint64_t linear, const void *buf)
{
    if (p->rank == 0)
        return H5Dwrite(o->hid, p->tid, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ? -EIO : 0;
    hsize_t cdims[IMAGE_MAX_RANK];
    for (int k = 0; k < p->rank; k++)
        cdims[k] = ds->chunk_dims[k];
    hid_t mem = H5Screate_simple(p->rank, cdims, NULL), file = H5Dget_space(o->hid);
    int rc = mem >= 0 && file >= 0 && select_chunk(mem, ds, p->dims, linear, 1) >= 0 &&
                     select_chunk(file, ds, p->dims, linear, 0) >= 0 &&
                     H5Dwrite(o->hid, p->tid, mem, file, H5P_DEFAULT, buf) >= 0
                 ? 0
                 : -EIO;
    if (mem >= 0)
        H5Sclose(mem);
    if (file >= 0)
        H5Sclose(file);
    return rc;
}

static int value_chunk(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                       const struct image_dataset *ds, uint64_t linear, char *why, size_t why_len)
{
    char key[STORE_KEY_MAX + 1];
    unsigned char *bytes = NULL;
    size_t len = 0, n = 1;
    void *buf = NULL;
    int vlen = (p->traits & H5TYPE_HAS_VLEN) != 0;
    int rc = image_chunk_key(ds, linear, key, sizeof key);
    if (rc == 0)
        rc = fetch_stored(b, ds, key, vlen, &bytes, &len, why, why_len);
    if (rc == -ENOENT)
        return 0; /* no chunk: the fill value */
    for (int k = 0; k < ds->rank && p->rank > 0; k++)
        n *= ds->chunk_dims[k];
    struct h5value_refs refs = { build_resolve_ref, b };
    if (rc == 0) {
        char vwhy[160] = "";
        rc = h5value_from_stored(p->type, p->tid, bytes, len, n, &refs, &buf, vwhy, sizeof vwhy);
        if (rc != 0)
            why_set(why, why_len, "chunk %.120s: %.60s", key, vwhy);
    }
    if (rc == 0 && (rc = write_chunk_values(o, p, ds, linear, buf)) != 0)
        why_set(why, why_len, "chunk %.120s: HDF5 refused the values", key);
    if (buf)
        h5value_free(p->tid, buf, n);
    free(bytes);
    if (rc == -ENOMEM)
        return rc; /* not the chunk's fault: it must not be shown unreadable */
    return rc == -EIO && !strstr(why, "HDF5") ? -EIO : rc ? -EINVAL : 0;
}

/* Where HDF5 put chunk `linear` of o. 0 or -EIO. */
static int chunk_storage(struct build_obj *o, const struct image_dataset *ds, uint64_t linear,
                         haddr_t *addr, hsize_t *size)
{
    uint64_t idx[IMAGE_MAX_RANK];
    *addr = HADDR_UNDEF;
    *size = 0;
    image_chunk_index(ds, linear, idx);
    if (build_chunk_info(o->hid, ds, idx, addr, size) != 0)
        return -EIO;
    return *addr == HADDR_UNDEF || *size == 0 ? -EIO : 0;
}

/*
 * Chunk `linear` of o could not be read or converted (why): HDF5 writes it as zeros, so that it
 * exists with its exact size and place, and then its bytes are declared unreadable. Reads of
 * its region fail with EIO, as a bad chunk of a dataset served from extents does, and the other
 * chunks keep their values. -EINVAL when that cannot be done (the dataset must go): HDF5
 * refuses, or o is a scalar, which is not chunked (see placeholder_chunks).
 */
static int poison_value_chunk(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                              const struct image_dataset *ds, uint64_t linear, uint32_t *index,
                              const char *why)
{
    char name[IMAGE_MAX_RANK * 21];
    uint64_t idx[IMAGE_MAX_RANK], n = 1;
    size_t len = 0, elem = H5Tget_size(p->tid);
    if (p->rank == 0)
        return -EINVAL;
    for (int k = 0; k < ds->rank; k++)
        n *= ds->chunk_dims[k];
    void *zeros = calloc(n, elem ? elem : 1);
    if (!zeros)
        return -ENOMEM;
    haddr_t addr;
    hsize_t size;
    int rc = write_chunk_values(o, p, ds, linear, zeros);
    free(zeros);
    /* the chunk leaves HDF5's caches now, or it could be written again over the poison */
    if (rc == 0 && H5Fflush(b->file, H5F_SCOPE_LOCAL) < 0)
        rc = -EIO;
    if (rc == 0)
        rc = chunk_storage(o, ds, linear, &addr, &size);
    if (rc != 0)
        return -EINVAL;
    if ((rc = poison_extent(b, o, addr, size, linear, index)) != 0)
        return rc;
    image_chunk_index(ds, linear, idx);
    for (int k = 0; k < ds->rank; k++)
        len += (size_t)snprintf(name + len, sizeof name - len, "%s%" PRIu64, k ? "_" : "", idx[k]);
    return build_omit(b, IMAGE_OMIT_CHUNK, o->id, build_path(b, o), name, why);
}

static int write_values(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                        char *why, size_t why_len)
{
    struct image_dataset ds = { 0 };
    struct chunk_list chunks = { 0 };
    uint32_t poisoned = UINT32_MAX;
    int rc = values_grid(b, o, p, &ds, why, why_len);
    if (rc == 0 && !build_take_listed(o, &ds, &chunks))
        rc = build_dataset_chunks(b, &ds, &chunks);
    if (rc == -EFBIG) {
        why_set(why, why_len, "a v1 dataset of more than %u chunks, which cannot be listed",
                V1_PROBE_MAX);
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = index_by_stored_chunks(o->hid, p, chunks.n);
    for (size_t i = 0; i < chunks.n && rc == 0; i++) {
        char cwhy[200] = "";
        rc = value_chunk(b, o, p, &ds, chunks.v[i], cwhy, sizeof cwhy);
        if (rc == -EINVAL &&
            (rc = poison_value_chunk(b, o, p, &ds, chunks.v[i], &poisoned, cwhy)) == -EINVAL)
            why_set(why, why_len, "%s; %s", cwhy,
                    p->rank == 0 ? "a scalar cannot be shown unreadable"
                                 : "HDF5 refused to make it unreadable");
    }
    free(chunks.v);
    image_dataset_clear(&ds);
    return rc;
}

int build_dataset_fill(struct builder *b, struct build_obj *o, char *why, size_t why_len)
{
    struct dset_plan p;
    int rc = plan_dataset(b, o, &p, why, why_len);
    if (rc == 0 && !is_null_space(p.shape)) /* a NULL dataspace has no data */
        rc = write_values(b, o, &p, why, why_len);
    plan_close(&p);
    return rc;
}
