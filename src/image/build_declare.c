/* build_declare: the chunk extents of datasets served from chunk objects, declared after every
 * object, link and attribute exists (build.h, build_dataset_declare): one H5Dwrite_chunk from
 * the placeholder buffer per chunk, or, for a dense dataset, the library's own allocation of all
 * of them (vfd.h, vfd_dense; doc/image.md). */
#include <errno.h>
#include <stdlib.h>

#include "build.h"
#include "h5osfs/util/log.h"

static int ensure_placeholder(struct builder *b, size_t size)
{
    if (size <= b->placeholder_size)
        return 0;
    /* never written or read: calloc'd pages stay unbacked however large the chunk */
    unsigned char *p = calloc(1, size);
    if (!p)
        return -ENOMEM;
    free(b->placeholder);
    b->placeholder = p;
    b->placeholder_size = size;
    b->target.placeholder = p;
    return 0;
}

/* The element offset of the chunk at chunk coordinates idx, as the library's chunk calls take it. */
static void chunk_offset(const struct image_dataset *ds, const uint64_t *idx, hsize_t *offset)
{
    for (int k = 0; k < ds->rank; k++)
        offset[k] = idx[k] * ds->chunk_dims[k];
}

int build_chunk_info(hid_t dset, const struct image_dataset *ds, const uint64_t *idx, haddr_t *addr,
                     hsize_t *size)
{
    hsize_t offset[IMAGE_MAX_RANK];
    unsigned mask;
    chunk_offset(ds, idx, offset);
    return H5Dget_chunk_info_by_coord(dset, offset, &mask, addr, size) < 0 ? -EIO : 0;
}

static int declare_chunks(struct builder *b, struct build_obj *o, uint32_t dset_index,
                          const struct chunk_list *chunks)
{
    struct image_dataset *ds = &b->img->datasets[dset_index];
    int rc = ensure_placeholder(b, ds->chunk_bytes);
    if (rc == 0)
        rc = extent_reserve_chunks(b->img->map, chunks->n);
    for (size_t i = 0; i < chunks->n && rc == 0; i++) {
        hsize_t offset[IMAGE_MAX_RANK];
        uint64_t idx[IMAGE_MAX_RANK];
        image_chunk_index(ds, chunks->v[i], idx);
        chunk_offset(ds, idx, offset);
        b->target.tag = (struct extent_tag){ dset_index, chunks->v[i] };
        if (H5Dwrite_chunk(o->hid, H5P_DEFAULT, 0, offset, ds->chunk_bytes, b->placeholder) < 0)
            rc = b->target.failed ? b->target.failed : -EIO;
    }
    return rc;
}

/* The tag of the chunk the library keeps at chunk coordinates idx. 0 or -EIO. */
static int chunk_tag_at(struct builder *b, const struct build_obj *o,
                        const struct image_dataset *ds, const uint64_t *idx, struct extent_tag *tag)
{
    hsize_t size;
    haddr_t addr;
    if (build_chunk_info(o->hid, ds, idx, &addr, &size) != 0)
        return -EIO;
    return extent_chunk_at(b->img->map, addr, tag) ? 0 : -EIO;
}

/* The driver took the library's fill writes, in their order, as the chunks in grid order.
 * That order is the library's loop over the grid, last dimension fastest; check it where a
 * different loop would show: the first chunk, and one step along each dimension. (The
 * library's lookup by coordinates walks the index, so every chunk cannot be checked.) */
static int dense_in_grid_order(struct builder *b, const struct build_obj *o)
{
    const struct image_dataset *ds = &b->img->datasets[o->dset_index];
    const struct vfd_dense *d = &b->target.dense;
    uint64_t idx[IMAGE_MAX_RANK] = { 0 }, step = 1;
    struct extent_tag tag;
    if (d->broken || d->next != d->n)
        return 0;
    if (chunk_tag_at(b, o, ds, idx, &tag) != 0 || tag.dset != o->dset_index || tag.chunk != 0)
        return 0;
    for (int k = ds->rank - 1; k >= 0; step *= ds->grid[k], k--) {
        if (ds->grid[k] < 2)
            continue;
        idx[k] = 1;
        int ok = chunk_tag_at(b, o, ds, idx, &tag) == 0 && tag.dset == o->dset_index &&
                 tag.chunk == step;
        idx[k] = 0;
        if (!ok)
            return 0;
    }
    return 1;
}

/* A dense dataset's chunks. It was made with no elements and early allocation: grown to its
 * shape, it has the library allocate every chunk in one call, 1e6 chunks in 0.12 s where one
 * H5Dwrite_chunk each takes 1.2 s (late allocation, at the first write, takes 0.7 s). 0, 1
 * when the chunks must be declared one by one after all (which puts every tag right), or
 * -errno. */
static int declare_dense(struct builder *b, struct build_obj *o)
{
    const struct image_dataset *ds = &b->img->datasets[o->dset_index];
    hsize_t dims[IMAGE_MAX_RANK];
    for (int k = 0; k < ds->rank; k++)
        dims[k] = ds->dims[k];
    int rc = extent_reserve_chunks(b->img->map, o->n_chunks);
    if (rc != 0)
        return rc;
    b->target.dense = (struct vfd_dense){
        .on = 1, .dset = o->dset_index, .chunk_bytes = ds->chunk_bytes, .n = o->n_chunks
    };
    herr_t grown = H5Dset_extent(o->hid, dims);
    b->target.dense.on = 0;
    if (b->target.failed)
        return b->target.failed;
    if (grown < 0)
        return -EIO;
    if (dense_in_grid_order(b, o))
        return 0;
    log_warn("%s: %s: the HDF5 library did not allocate the chunks in grid order; they are "
             "declared one by one",
             b->domain_path, ds->path);
    return 1;
}

int build_dataset_declare(struct builder *b, struct build_obj *o)
{
    struct chunk_list chunks = { o->chunks, o->n_chunks, o->n_chunks };
    int rc = !o->chunks ? 0 : o->dense ? declare_dense(b, o) : 1;
    if (rc == 1) /* not dense, or the library's order was not the grid's */
        rc = declare_chunks(b, o, o->dset_index, &chunks);
    free(o->chunks);
    o->chunks = NULL;
    o->n_chunks = 0;
    return rc;
}
