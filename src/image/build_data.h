/* build_data.h: what the files of a dataset's build share (build_data.c picks the way and
 * makes placeholders, build_data_plan.c the plan and the dataset as stored,
 * build_data_extents.c chunk extents, build_data_values.c values written for real). */
#ifndef H5OSFS_IMAGE_BUILD_DATA_H
#define H5OSFS_IMAGE_BUILD_DATA_H

#include "build.h"

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

/* Read o's dataset JSON into p (what is known even on failure). 0, -EINVAL (why), -ENOMEM. */
int build_data_plan(struct builder *b, struct build_obj *o, struct dset_plan *p, char *why,
                    size_t why_len);

/* Release what build_data_plan made. */
void build_data_plan_close(struct dset_plan *p);

/* Chunk dimension k as HDF5 is given it: no larger than a fixed maximum dimension. */
hsize_t build_data_chunk_dim(const struct dset_plan *p, int k);

/* Make o as p says (dense: allocated as it grows at declaring). 0, -EINVAL (why), -ENOMEM. */
int build_data_create_as_stored(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                                int dense, char *why, size_t why_len);

/* Give dset a chunk index that grows with the written chunks where its grid is far larger. */
int build_data_index_by_stored_chunks(hid_t dset, const struct dset_plan *p, uint64_t written);

/* A new zeroed entry at the end of the image's dataset table. 0 or -ENOMEM. */
int build_data_add(struct builder *b, struct image_dataset **out);

/* Fill ds (ids, grid, chunk keys, codec) from o and p. 0, -EINVAL (why), -ENOMEM. */
int build_data_describe(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                        struct image_dataset *ds, char *why, size_t why_len);

/* Declare [addr, addr+size) of o unreadable (table entry made at *index UINT32_MAX). */
int build_data_poison_extent(struct builder *b, const struct build_obj *o, haddr_t addr,
                             hsize_t size, uint64_t chunk, uint32_t *index);

/* Make o as a dataset served from chunk extents. 0, -EINVAL (why: a placeholder), -errno. */
int build_data_create_extents(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                              char *why, size_t why_len);

/* Make o for values written later (build_dataset_fill). 0, -EINVAL (why), -errno. */
int build_data_create_for_values(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                                 char *why, size_t why_len);

#endif
