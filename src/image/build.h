/*
 * build.h: the state of one image build, shared by build.c (objects, links, attributes) and
 * build_data*.c (datasets: creation properties, chunk sources, materialised values),
 * build_vds.c (a virtual dataset's mappings) and build_declare.c (the chunk extents, declared
 * last).
 */
#ifndef H5OSFS_IMAGE_BUILD_H
#define H5OSFS_IMAGE_BUILD_H

#include <pthread.h>

#include "h5osfs/util/strmap.h"
#include "image_int.h"

/* One object of the domain reached by hard links from the root, in discovery order. */
struct build_obj {
    char *id;
    size_t parent;    /* where it was first found: objs[parent] links it ... */
    const char *name; /* ... by this name (a key of that group's JSON); the root: SIZE_MAX */
    char *path;       /* that path, made when first asked for (build_path), else NULL */
    char cls;         /* 'g', 'd' or 't' */
    json_t *json;
    hid_t hid;           /* the HDF5 object (anonymous until linked) */
    int dropped;         /* could not be made: links to it are left out */
    int data_done;       /* a dataset whose data is settled at creation */
    int attr_room;       /* a dataset holding BUILD_ATTR_ROOM until its attributes are made */
    uint64_t *chunks;    /* ... served from these chunk extents (linear indexes), */
    size_t n_chunks;     /*     declared after every object, link and attribute */
    uint32_t dset_index; /*     exists (build_dataset_declare) */
    int dense;           /*     every chunk of the grid: made empty, grown at declaring */
    uint64_t *listed;    /* its chunk objects, listed ahead (build_list_ahead): sorted */
    size_t n_listed;     /*     linear indexes over listed_grid */
    int listed_ok;
    int listed_rank;
    uint64_t listed_grid[IMAGE_MAX_RANK];
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
    struct strmap *by_id; /* id -> index + 1 into objs */
    size_t cap_datasets;
    unsigned char *placeholder; /* the buffer every chunk placeholder is written from */
    size_t placeholder_size;
    uint64_t declared;      /* chunk extents declared so far, against IMAGE_CHUNKS_MAX */
    struct strmap *fetched; /* id -> struct fetched: JSON fetched ahead, in parallel */
    size_t fetched_upto;    /* the groups before this one had their links fetched */
    size_t cap_omissions;
    const struct build_obj *converting; /* whose values (or attributes) are being converted */
    uint64_t dangling_refs;             /* references to objects not in the image, made null */
    char dangling_first[160];           /* the first of them: target and where */
    struct strmap *uri_index;           /* "dataset id\nkey" -> index + 1 into its uris */
    char pool_ok
        [SCHEMA_ID_BUF]; /* the version pool the domain may name, once checked ("" not yet) */
    int unlisted; /* a root of more chunk objects than one listing page: datasets declare their
                   * whole grid, unlisted (build_dataset_chunks) */
};

/* An object's JSON fetched ahead of its turn (the store's answer, taken by build_load_json). */
struct fetched {
    int rc;
    struct store_buf buf;
};

/* ---- the builder's objects (build_objects.c, which calls no other file of the image) ---- */

/* Load and parse an object's JSON by id: a JSON object whose "id" is id. 0, -ENOENT, -EIO
 * (why says which key and what is wrong with it), -ENOMEM. */
int build_load_json(struct builder *b, const char *id, json_t **out, char *why, size_t why_len);

/* Note what the image does not show as stored (image_left_out) and log it: the one line the
 * build writes about it. name: attribute, link or chunk index, or NULL. 0 or -ENOMEM. */
int build_omit(struct builder *b, enum image_omission_kind kind, const char *id, const char *path,
               const char *name, const char *why);
/* The same note without the log line, for what the caller has logged (or another line says).
 * 0 or -ENOMEM (also when path is NULL: build_path could not make it). */
int build_record_omission(struct builder *b, enum image_omission_kind kind, const char *id,
                          const char *path, const char *name, const char *why);

/* The path where o was first found ("/" for the root), or NULL (out of memory). Made only for
 * the objects whose path is asked for: every path of n nested groups would take memory
 * quadratic in n. */
const char *build_path(struct builder *b, const struct build_obj *o);

/* The built object of id, or NULL. */
struct build_obj *build_find(struct builder *b, const char *id);

/* ---- step 1, discovery (build_discover.c, which calls only build_objects.c) ---- */

/* Every object reached by hard links from the root group into b->objs, breadth first, each
 * with its JSON (links that cannot be followed noted with build_omit). 0, -EIO (the root group
 * unusable, logged), -ENOMEM, or the store's -errno. */
int build_discover(struct builder *b);
/* Free a struct fetched (b->fetched's values). */
void build_fetched_free(void *v);

/* The keys below the root (db/A-B/), listed in a thread of its own while the objects are
 * fetched: one listing instead of one per dataset, when the domain has few chunks. */
struct root_listing {
    struct store *store;
    char prefix[32];
    pthread_t thread;
    int started;
    int complete; /* every chunk key is in keys (none past ROOT_LISTING_KEYS) */
    int too_many; /* known to have more: the build lists nothing (builder.unlisted) */
    char **keys;  /* chunk keys (JSON objects are left out) */
    size_t n, cap;
};
void build_root_listing_init(struct store *store, const char *root_id, struct root_listing *rl);
/* Start listing, unless rl is complete already (then the build uses it as it is). */
void build_root_listing_start(struct builder *b, struct root_listing *rl);
/* Keep one chunk key: 0, 1 when the listing holds ROOT_LISTING_KEYS already, -ENOMEM. */
int build_root_listing_add(struct root_listing *rl, const char *key);
/* Wait for it if it still runs, and free it. */
void build_root_listing_end(struct root_listing *rl);

/* List the chunk objects of every dataset before HDF5 makes anything (from the root listing
 * when it is complete, else up to src->requests listings in flight): each build then takes
 * its dataset's list. 0 or -ENOMEM (a listing that fails is done again when the dataset is
 * built). */
int build_list_ahead(struct builder *b, struct root_listing *rl);

/* Create dataset o (anonymous) with its type, shape and creation properties; a dataset served
 * from chunk extents gets them now (data_done). One that cannot be made as stored becomes a
 * placeholder whose reads fail, or is dropped when not even that can be made (both noted with
 * build_omit). 0, or -ENOMEM / -EIO (the build fails). */
/* Repairs (repair.c): attribute name (JSON attr) of object JSON obj as the source had it, when
 * hsload is known to have changed it (a new reference), else NULL: show it as stored. */
json_t *build_repaired_attr(const json_t *obj, const char *name, const json_t *attr);

/* Set what every object of the image gets on its create plist ocpl. 0 or -1. */
int build_object_plist(hid_t ocpl);

/* ---- members in file order (build_objects.c) ---- */

/* A link or attribute of an object's JSON. */
struct link_ref {
    const char *name;
    json_t *json;
    double created;
};
/* Whether the object JSON asks for creation order to be tracked. */
int build_creation_ordered(const json_t *obj_json);
/* The members (links or attributes) in the order the file should list them: by "created"
 * (by_creation) or by name. calloc'd; NULL on -ENOMEM. */
struct link_ref *build_ordered_members(const json_t *members, int by_creation, size_t *n);
/* A link name HDF5 accepts and a user can type: no '/', not ".", Unicode text. */
int build_link_name_ok(const char *name);
/* The target id of a link's JSON when it is a hard link (a class of none or H5L_TYPE_HARD),
 * else NULL. */
const char *build_hard_target(const json_t *link);
/* A name as the log shows it (an unloadable one as its JSON text), and why it is unusable. */
const char *build_shown_name(const char *name);
const char *build_bad_name_why(const char *name);
/* A link or attribute create plist for name (UTF-8 when it is not ASCII), or < 0. */
hid_t build_link_plist(const char *name);

/* ---- attributes and header room (build_attrs.c) ---- */

/* A group (cls H5P_GROUP_CREATE) or file (H5P_FILE_CREATE) create plist for group JSON json:
 * build_object_plist, room in the header for its links and attributes, creation order when
 * the JSON tracks it. < 0 on failure. */
hid_t build_group_plist(hid_t cls, const json_t *json);
/* 1 if the group is made in HDF5's original format (a symbol table: no creation order, every
 * attribute fits a version-1 header message), 0 if not, -ENOMEM. */
int build_original_format(struct builder *b, const json_t *group);
/* Step 4: the attributes of object o, in the order they were made in (those HDF5 cannot hold
 * noted with build_omit). 0, or -ENOMEM / -EIO (the build fails). */
int build_attributes_of(struct builder *b, struct build_obj *o);
/* The dataspace of a shape JSON (NULL, SCALAR or SIMPLE), *n its number of elements; < 0
 * with why set when it is not one HDF5 or the image can hold. */
hid_t build_dataspace(const json_t *shape, size_t *n, char *why, size_t why_len);

int build_dataset_create(struct builder *b, struct build_obj *o);
/* build_vds.c: 1 when dataset JSON keeps a virtual dataset's mappings ("h5osfs": {"virtual"}). */
int build_vds_is_virtual(const json_t *dataset);
/* The mappings of dataset o into dcpl, for its shape (rank >= 1, dims, maxdims). 0, -ENOMEM,
 * or -EINVAL with why when the member is not one the image can show, or would crash a reader
 * (doc/image.md). */
int build_vds_mappings(struct builder *b, const struct build_obj *o, hid_t dcpl, int rank,
                       const hsize_t *dims, const hsize_t *maxdims, char *why, size_t why_len);
/* Room in the header of dataset o, just made, for the attributes its JSON lists, held by an
 * attribute of this name until they are made (attributes_of). 0 or -1. */
#define BUILD_ATTR_ROOM "h5osfs: room for the attributes"
int build_reserve_attr_room(struct build_obj *o);
/* 1 if dataset o's fill value holds object references: it can only be made once the objects
 * it refers to exist (HDF5 takes the fill value at creation). */
int build_dataset_fill_refers(const struct build_obj *o);
/* Write the values of a dataset that is not data_done (after every object exists, for
 * references); a chunk whose values cannot be read or converted is made unreadable (noted).
 * 0, -EINVAL (why: not even that could be done, the dataset must go), or -errno. */
int build_dataset_fill(struct builder *b, struct build_obj *o, char *why, size_t why_len);
/* The chunk placeholders of a dataset served from chunk extents, written last: HDF5 keeps
 * allocating and moving metadata while objects, links and attributes are made, and chunks
 * written among them made some of it overlap a chunk (a metadata checksum error on reading
 * files of 10^5 chunks and more). 0 or -errno. */
int build_dataset_declare(struct builder *b, struct build_obj *o);
/* Where the library keeps the chunk of dataset dset at chunk coordinates idx (build_declare.c):
 * its address and size, HADDR_UNDEF and 0 when it has none. 0 or -EIO. */
int build_chunk_info(hid_t dset, const struct image_dataset *ds, const uint64_t *idx, haddr_t *addr,
                     hsize_t *size);

/* The chunks of a *_REF dataset (spec §8): fills ds's origin, uris and pieces, and the sorted
 * linear indexes of the chunks that have data. 0, -EINVAL (with why), -ENOMEM, -EIO. */
int build_ref_chunks(struct builder *b, struct build_obj *o, struct image_dataset *ds,
                     uint64_t **chunks, size_t *n, char *why, size_t why_len);

/* The prefix every chunk key of dataset dset_id (of rank dimensions) starts with, for listing
 * them: "db/A-B/d/C-D-E/" for v2; "" for v1, whose chunk keys share no prefix (each starts
 * with its own hash, spec §11) and are never listed. 0 or -EINVAL, -ENAMETOOLONG. */
int build_chunk_key_prefix(const char *dset_id, int rank, char *buf, size_t len);

/* The sorted linear indexes of ds's chunk objects (ds->id, key_prefix, rank, grid and
 * partition_count set): listed for v2 ids, every index of the grid for v1 ids (which cannot be
 * listed; -EFBIG beyond a million). A new array in *v (free it). 0, -EFBIG, -ENOMEM, -EIO. */
int build_list_chunks(struct builder *b, const struct image_dataset *ds, uint64_t **v, size_t *n);

/* ---- build_chunks.c: which chunk objects exist ---- */

#define V1_PROBE_MAX 1000000 /* v1 chunks cannot be listed: declare the grid up to this */

/* Linear chunk indexes of a dataset's grid. */
struct chunk_list {
    uint64_t *v;
    size_t n, cap;
};

int build_chunk_list_add(struct chunk_list *l, uint64_t linear);
/* Every chunk of a v1 dataset's grid (see build_list_chunks). 0, -EFBIG, -ENOMEM. */
int build_all_chunks(const struct image_dataset *ds, struct chunk_list *out);
/* ds's chunks, as build_list_chunks finds them, into out (sorted, unique). */
int build_dataset_chunks(struct builder *b, const struct image_dataset *ds, struct chunk_list *out);
/* The chunks a dataset served from chunk extents declares: build_dataset_chunks', or in an
 * unlisted root (builder.unlisted) every chunk of a v2 grid of at most V1_PROBE_MAX, a missing
 * one read as the fill value, with no request (a larger grid is listed). Datasets whose values
 * the build reads keep their listing: each chunk declared there would be a GET. */
int build_extent_chunks(struct builder *b, const struct image_dataset *ds, struct chunk_list *out);
/* The listing made ahead for o, if it was of ds's grid (moved into out): 1, else 0. */
int build_take_listed(struct build_obj *o, const struct image_dataset *ds, struct chunk_list *out);
/* 1 when no dimension of ds's grid is 0. */
int build_all_chunks_nonzero(const struct image_dataset *ds);

/* "3_0_12" -> linear index in ds's grid: 0, 1 when outside the current shape, -EINVAL. */
int build_parse_index(const struct image_dataset *ds, const char *s, uint64_t *linear);

/* The HDF5 type of a type JSON, into *out: a committed type of the domain when it carries
 * "id". 0, -EINVAL with a reason (leave the object out) or -ENOMEM (fail the build). */
int build_type(struct builder *b, const json_t *type, hid_t *out, char *why, size_t why_len);

/* The resolver h5value uses: object id -> reference to the object, which must have been
 * created (it may not be linked yet). */
int build_resolve_ref(void *ctx, const char *id, hobj_ref_t *out);

#endif
