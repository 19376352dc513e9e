/* build_data_extents: a dataset served from chunk extents: which chunks exist (chunk objects,
 * or a linked file's: refs.c) is settled before it is made, and its table entry and chunks
 * wait for build_dataset_declare. See build_data.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "build_data.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/why.h"

/* The library fills one chunk-sized buffer to allocate a dense dataset's chunks (declare_dense) */
#define DENSE_FILL_MAX (8u << 20)

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
    int rc = build_data_add(b, &entry);
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
        if (build_data_chunk_dim(p, k) != p->cdims[k])
            return 0;
        if (p->maxdims[k] != p->dims[k])
            return 0;
        grid *= ds->grid[k];
    }
    return grid == n;
}

/* A dataset served from chunk extents, complete at creation: which chunks exist is settled
 * first, so that one whose chunks cannot be served becomes a placeholder instead (-EINVAL). */
int build_data_create_extents(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                              char *why, size_t why_len)
{
    struct image_dataset ds = { 0 };
    struct chunk_list chunks = { 0 };
    int rc = build_data_describe(b, o, p, &ds, why, why_len);
    if (rc == 0)
        rc = chunk_source(b, o, p, &ds, &chunks, why, why_len);
    o->dense = rc == 0 && is_dense(p, &ds, chunks.n);
    if (rc == 0)
        rc = build_data_create_as_stored(b, o, p, o->dense, why, why_len);
    if (rc == 0)
        rc = build_data_index_by_stored_chunks(o->hid, p, chunks.n);
    if (rc == 0)
        rc = declare_extents(b, o, &ds, &chunks);
    o->data_done = rc == 0;
    image_dataset_clear(&ds);
    free(chunks.v);
    return rc;
}
