/*
 * image_int.h: what the image module's files share (build*.c make an image, image.c reads it).
 */
#ifndef H5OSFS_IMAGE_INT_H
#define H5OSFS_IMAGE_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include <hdf5.h>
#include <jansson.h>

#include "chunk_pins.h"
#include "extent.h"
#include "h5osfs/codec/codec.h"
#include "h5osfs/image/image.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"
#include "vfd.h"

#define IMAGE_MAX_RANK 32
#define IMAGE_JSON_MAX (64u << 20)   /* largest object JSON we parse */
#define IMAGE_CHUNK_MAX (1ull << 31) /* largest decoded chunk we serve (HDF5: < 4 GiB) */
#define IMAGE_META_BLOCK (64u << 10) /* metadata comes in blocks this large */
#define IMAGE_FS_PAGE 4096u          /* paged aggregation's page: the kernel's */
#define IMAGE_MDC_BYTES (2u << 20)   /* HDF5's metadata cache while a file is built */
/* Chunk extents one image may declare (each costs ~24 bytes here and HDF5 index metadata):
 * a few hundred bytes of JSON must not be able to ask for gigabytes (found by fuzzing). */
#define IMAGE_CHUNKS_MAX 20000000u

/* Where the bytes of a dataset's chunks come from. */
enum chunk_origin {
    ORIGIN_HSDS = 0,   /* chunk objects db/A-B/d/C-D-E/[pN/]i_j */
    ORIGIN_POISON,     /* its data cannot be served: reads fail EIO, nothing fetched */
    ORIGIN_REF_CONTIG, /* H5D_CONTIGUOUS_REF: a byte range of a linked HDF5 file */
    ORIGIN_REF_PIECES, /* H5D_CHUNKED_REF(_INDIRECT): filtered chunks of linked files */
};

/* One filtered HDF5 chunk of a linked file: piece `sub` of chunk `chunk` (linear index in the
 * dataset's grid). Only pieces with data are kept: absent ones are the fill value. */
struct ref_piece {
    uint64_t chunk;
    uint64_t off;
    uint32_t size;
    uint32_t uri; /* index into image_dataset.uris */
    uint32_t sub; /* < n_sub */
};

/* A dataset whose chunk extents are served from the store. */
struct image_dataset {
    char *id;
    char *path;                         /* first path in the file, for log lines */
    char key_prefix[STORE_KEY_MAX + 1]; /* "db/A-B/d/C-D-E/"; "" for v1 ids */
    enum chunk_origin origin;
    int rank;
    int partition_count;           /* 0: none */
    uint64_t dims[IMAGE_MAX_RANK]; /* the shape */
    uint64_t chunk_dims[IMAGE_MAX_RANK];
    uint64_t grid[IMAGE_MAX_RANK]; /* chunks per dimension over the current shape */
    size_t itemsize;
    uint64_t chunk_bytes;
    struct codec_spec codec;
    unsigned char *fill; /* one element: what a chunk deleted since the build reads as */
    /* *_REF layouts */
    char **uris; /* store keys of the linked files */
    size_t n_uris, cap_uris;
    uint64_t contig_off; /* ORIGIN_REF_CONTIG: where the data starts in uris[0] */
    uint64_t contig_size;
    struct ref_piece *pieces; /* ORIGIN_REF_PIECES: sorted by (chunk, sub), unique */
    size_t n_pieces;
    uint32_t n_sub; /* pieces per chunk: prod(dims / hyper_dims), 1 without */
    uint64_t sub_dims[IMAGE_MAX_RANK];
    int pooled; /* a version's table over its domain's pool: each piece a whole pool object */
    /* A version's pool file (one of uris) and the etag recorded when the version was kept:
     * every ranged read of it must come back with that etag (NULL: none recorded). */
    char *kept_file, *kept_etag;
};

/* An HDF5 object of the file and the HSDS object it shows. */
struct image_object {
    uint64_t addr; /* its object header's address: its identity in HDF5 */
    char *id;
};

/* One object below the root (not JSON) as the listing an image was made after saw it: what
 * tells a chunk HSDS rewrote in place (same key, same layout) from the one the image knew. */
struct image_chunk_state {
    uint64_t key;     /* hash of its key */
    uint64_t state;   /* hash of its size, etag and ctime_ns: any change, for readers */
    uint64_t content; /* hash of its size and etag: a change of content, for a commit's check */
};

struct image_chunk_states {
    struct image_chunk_state *v; /* sorted by key once done */
    size_t n, cap;
    int known; /* a complete listing filled it (else the image cannot tell rewrites) */
};

/* Add key's state (st as the listing or a head gave it). 0 or -ENOMEM. */
int image_chunk_states_add(struct image_chunk_states *s, const char *key,
                           const struct store_stat *st);
/* The listing is complete: sort, and known from now on. */
void image_chunk_states_done(struct image_chunk_states *s);
void image_chunk_states_free(struct image_chunk_states *s);
/* img takes s's states (s is left empty). */
void image_take_chunk_states(struct image *img, struct image_chunk_states *s);

struct image {
    int refs;                     /* guarded by image_lock in image.c */
    struct image_object *objects; /* sorted by addr */
    size_t n_objects;
    uint64_t serial; /* unique per build: the chunk cache key space */
    struct extent_map *map;
    struct image_dataset *datasets;
    size_t n_datasets;
    struct store *store;
    char *domain_path;
    double build_seconds;
    struct image_omission *omissions; /* what image_left_out lists; strings owned */
    size_t n_omissions;
    struct image_chunk_states chunk_states;
    int unlisted; /* built without listing its chunks: never equal to another build */
    /* wall-clock time (s) the build began, before it read anything of the root: a chunk object
     * of an unlisted image with a later mtime was written after the writer's copy was made */
    double built_at;
    /* the version of each chunk object the image served (chunk_pins.h) */
    struct chunk_pins *pins;
    /* a chunk object changed in the store since the image served it: this version can no
     * longer be served whole, and the next open builds another (image_changed_in_store) */
    atomic_int changed_in_store;
    /* image_reads_exact, once known: 0 not yet, 1 no, 2 yes (the same answer however many
     * threads find it) */
    atomic_int reads_exact;
};

/* A chunk to load: which image, dataset and chunk (linear index in the grid). */
struct chunk_job {
    struct image *img;
    const struct image_dataset *ds;
    uint64_t linear;
};

/* Load a chunk of a *_REF dataset (refs.c) into buf (size = chunk_bytes). 0 or -EIO. */
int image_load_ref(const struct chunk_job *job, unsigned char *buf, size_t size);
/* Fill bytes with the dataset's fill value. */
void image_fill(const struct image_dataset *ds, unsigned char *buf, uint64_t bytes);
/* Chunk coordinates of a linear index. */
void image_chunk_index(const struct image_dataset *ds, uint64_t linear, uint64_t *idx);

/* Index string of chunk `linear` of ds ("3_0_12"), and its key. 0 or -ENAMETOOLONG. */
int image_chunk_key(const struct image_dataset *ds, uint64_t linear, char *key, size_t len);

void image_dataset_clear(struct image_dataset *ds);

/* The kernel's page size: the least a buffered READ of a file covers. */
uint64_t image_kernel_page(void);

/* A new empty image of domain_path (one reference, a serial of its own, an empty map). */
struct image *image_alloc(const struct image_source *src, const char *domain_path);

#endif
