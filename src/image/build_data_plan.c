/* build_data_plan: what every dataset of the image shares: its plan (the dataset JSON read:
 * type, shape, chunk layout), its creation as stored (creation properties, fill value, the
 * chunk index that follows the chunks written), and its entry in the image's dataset table.
 * The ways its data is carried are build_data_extents.c and build_data_values.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "build_data.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/why.h"

/* A chunk grid up to this many chunks, or up to DENSE_FACTOR times the chunks written, keeps
 * the index HDF5 picks (see build_data_index_by_stored_chunks). */
#define DENSE_GRID_MIN (1u << 20)
#define DENSE_FACTOR 4

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
int build_data_plan(struct builder *b, struct build_obj *o, struct dset_plan *p, char *why,
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

void build_data_plan_close(struct dset_plan *p)
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
hsize_t build_data_chunk_dim(const struct dset_plan *p, int k)
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
            c[k] = build_data_chunk_dim(p, k);
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
int build_data_create_as_stored(struct builder *b, struct build_obj *o, const struct dset_plan *p,
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
int build_data_index_by_stored_chunks(hid_t dset, const struct dset_plan *p, uint64_t written)
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
        uint64_t extent = unlimited ? p->dims[k] : p->maxdims[k], c = build_data_chunk_dim(p, k);
        uint64_t n = extent / c + (extent % c != 0);
        grid = n == 0 ? 0 : grid > dense / n ? dense + 1 : grid * n;
    }
    if (grid <= dense)
        return 0;
    return H5Dformat_convert(dset) < 0 ? -EIO : 0;
}

/* ---- the dataset table entry ---- */

int build_data_add(struct builder *b, struct image_dataset **out)
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

int build_data_describe(struct builder *b, struct build_obj *o, const struct dset_plan *p,
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

/* Declare [addr, addr+size) of dataset o unreadable: reads of it fail with EIO and fetch
 * nothing. The table entry is made on first use (*index UINT32_MAX). */
int build_data_poison_extent(struct builder *b, const struct build_obj *o, haddr_t addr,
                             hsize_t size, uint64_t chunk, uint32_t *index)
{
    if (*index == UINT32_MAX) {
        struct image_dataset *ds;
        int rc = build_data_add(b, &ds);
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
