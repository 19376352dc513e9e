/*
 * build.h: the state of one image build, shared by build.c (objects, links, attributes) and
 * build_data.c (datasets: creation properties, chunk extents, materialised values).
 */
#ifndef H5OSFS_IMAGE_BUILD_H
#define H5OSFS_IMAGE_BUILD_H

#include "h5osfs/strmap.h"
#include "image_int.h"

/* One object of the domain reached by hard links from the root, in discovery order. */
struct build_obj {
    char *id;
    char *path;                 /* first path found: "/" for the root */
    char cls;                   /* 'g', 'd' or 't' */
    json_t *json;
    hid_t hid;                  /* the HDF5 object (anonymous until linked) */
    int dropped;                /* could not be made: links to it are left out */
};

struct builder {
    const struct image_source *src;
    const char *domain_path;
    const char *root_id;
    struct image *img;
    hid_t file;
    struct vfd_target target;
    struct build_obj *objs;
    size_t n_objs, cap_objs;
    struct strmap *by_id;       /* id -> index + 1 into objs */
    size_t cap_datasets;
    unsigned char *placeholder; /* the buffer every chunk placeholder is written from */
    size_t placeholder_size;
    uint64_t declared;          /* chunk extents declared so far, against IMAGE_CHUNKS_MAX */
};

/* Load and parse an object's JSON by id: a JSON object whose "id" is id. 0, -ENOENT, -EIO. */
int build_load_json(struct builder *b, const char *id, json_t **out);

/* The built object of id, or NULL. */
struct build_obj *build_find(struct builder *b, const char *id);

/* Create dataset o (anonymous) with its type, shape and creation properties. 0 or -EINVAL. */
int build_dataset_create(struct builder *b, struct build_obj *o);
/* 1 if dataset o's fill value holds object references: it can only be made once the objects
 * it refers to exist (HDF5 takes the fill value at creation). */
int build_dataset_fill_refers(const struct build_obj *o);
/* Declare or write its data (after every object exists, for references). 0 or -errno. */
int build_dataset_fill(struct builder *b, struct build_obj *o);

/* The chunks of a *_REF dataset (spec §8): fills ds's origin, uris and pieces, and the sorted
 * linear indexes of the chunks that have data. 0, -EINVAL (with why), -ENOMEM, -EIO. */
int build_ref_chunks(struct builder *b, struct build_obj *o, struct image_dataset *ds,
                     uint64_t **chunks, size_t *n, char *why, size_t why_len);

/* The sorted linear indexes of ds's chunk objects (ds->id, key_prefix, rank, grid and
 * partition_count set): listed for v2 ids, every index of the grid for v1 ids (which cannot be
 * listed; -EFBIG beyond a million). A new array in *v (free it). 0, -EFBIG, -ENOMEM, -EIO. */
int build_list_chunks(struct builder *b, const struct image_dataset *ds, uint64_t **v, size_t *n);

/* "3_0_12" -> linear index in ds's grid: 0, 1 when outside the current shape, -EINVAL. */
int build_parse_index(const struct image_dataset *ds, const char *s, uint64_t *linear);

/* The HDF5 type of a type JSON: a committed type of the domain when it carries "id". */
hid_t build_type(struct builder *b, const json_t *type, char *why, size_t why_len);

/* The resolver h5value uses: object id -> reference to the object, which must have been
 * created (it may not be linked yet). */
int build_resolve_ref(void *ctx, const char *id, hobj_ref_t *out);

#endif
