/* zarr_int.h: what the parts of the Zarr view (zarr.c, zarr_tree.c, zarr_meta.c) share. Only
 * src/zarr includes it; include/h5osfs/zarr/zarr.h is the contract. */
#ifndef H5OSFS_ZARR_INT_H
#define H5OSFS_ZARR_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "h5osfs/codec/codec.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/zarr/zarr.h"

#define ZARR_WHY_MAX 160

/* How a dataset's chunk objects become its chunk files. */
enum zarr_serve {
    ZARR_SERVE_RAW,   /* no filter: the object's bytes, compressor null */
    ZARR_SERVE_BLOSC, /* compressor "blosc": Blosc frames as stored, other chunks re-encoded */
    ZARR_SERVE_ZLIB,  /* compressor "zlib" (and filter "shuffle"): zlib streams as stored (HDF5's
                         deflate, as h5osfs ingests it), other chunks re-encoded */
    ZARR_SERVE_PLAIN, /* decoded (bitshuffle, shuffle alone), compressor null */
    ZARR_SERVE_VLEN,  /* vlen strings, decoded and framed as numcodecs' vlen-utf8 */
};

struct zarr_chunk {
    char key[STORE_KEY_MAX + 1];
    uint64_t size; /* STORE_SIZE_UNKNOWN until asked */
    uint64_t off;  /* ranged: the chunk is bytes [off, off + size) of the linked file key */
    int ranged;
};

/* Where a dataset's chunks are (spec §8): its own chunk objects, or a linked HDF5 file's
 * ranges from the layout's chunk map, its one contiguous range, or its chunk table; or, for a
 * kept version (and a ref-mode domain), the objects of its domain's version pool that its
 * chunk table names one by one (doc/versions.md §3.2). */
enum zarr_link { ZARR_LINK_NONE, ZARR_LINK_MAP, ZARR_LINK_CONTIG, ZARR_LINK_TABLE, ZARR_LINK_POOL };

/* Chunks as HSDS stores them (its codecs, Blosc frames), not pieces of an HDF5 file: the
 * dataset's own chunk objects, or its version pool's. */
static inline int zarr_hsds_chunks(enum zarr_link link)
{
    return link == ZARR_LINK_NONE || link == ZARR_LINK_POOL;
}

struct zarr_array {
    char id[SCHEMA_ID_BUF];
    int rank; /* 0: a scalar, one chunk "0" */
    uint64_t shape[HJSON_DIMS_MAX], chunk[HJSON_DIMS_MAX];
    int partitions;     /* layout.partition_count, 0: none */
    uint64_t unlimited; /* bit k: dimension k is unlimited (maxdims 0) */
    enum zarr_serve serve;
    struct codec_spec spec;
    size_t itemsize;          /* stored element size (fixed types) */
    size_t chunk_bytes;       /* a full decoded chunk (fixed types) */
    uint64_t elements;        /* elements of a chunk */
    json_t *meta;             /* .zarray but compressor and filters (they follow serve) */
    int settled;              /* serve is final: a gzip dataset's first chunk was looked at */
    int no_fill;              /* fill_value null in the view (xarray: no _FillValue) */
    int fill_chunks;          /* and chunks not stored are files of fill values */
    unsigned char *fill_elem; /* then: one element of the fill value, itemsize bytes */
    enum zarr_link link;
    char *link_key;  /* the linked file's key (the layout's file_uri) */
    char *link_etag; /* a version's pool file: the etag it kept, which every read must have */
    char link_table[SCHEMA_ID_BUF]; /* ZARR_LINK_TABLE, _POOL: the chunk table dataset */
    char pool[SCHEMA_ID_BUF];       /* ZARR_LINK_POOL: the pool its entries name, checked */
    char *pool_bucket;              /* and the bucket their URIs name */
    pthread_mutex_t lock;           /* guards listed and chunks */
    int listed;
    int table_failed;      /* its chunk table could not be used (logged): EIO until the tree goes */
    struct strmap *chunks; /* "i.j" -> struct zarr_chunk */
};

struct zarr_node {
    char *name;               /* link name; "" for the root group */
    struct zarr_array *array; /* NULL: a group */
    struct zarr_node **kids;  /* groups: sorted by name */
    size_t n_kids;
    char *zattrs;
    size_t zattrs_len;
    json_t *dset; /* a dataset's JSON while the tree is built; NULL after */
};

/* One domain's tree, shared by its readers (refs under the view's lock). */
struct zarr_tree {
    char root[SCHEMA_ID_BUF];
    struct zarr_node *top;
    double expires;
    unsigned refs;
};

/* ---- zarr_tree.c ---- */
/* Key key (a chunk's, or not: then skipped, logged) of a listing of a's objects, whose
 * prefix (".../d/C-D-E/") is prefix_len bytes long, into a->chunks: 0 or -ENOMEM. */
int zarr_chunk_listed(struct zarr_array *a, const char *domain, size_t prefix_len, const char *key,
                      const struct store_stat *st);
/* The dataset's chunks, listed once (caller holds a->lock, or is the only user). */
int zarr_list_chunks(struct store *store, const char *domain, struct zarr_array *a);
/* Decide how a compressed dataset's chunks are served from its first stored chunk (Blosc
 * frames: blosc; zlib streams: zlib), once (caller holds a->lock). 0 or -EIO. */
int zarr_settle(struct store *store, const char *domain, struct zarr_array *a);
/* Does a chunk object begin as a zlib stream (HDF5's deflate) rather than a Blosc frame? */
int zarr_is_zlib_stream(const unsigned char *b, size_t len);
struct store *zarr_view_store(const struct zarr_view *v);
/* The tree of the domain with root root_id (a reference, zarr.c), and its release. */
int zarr_tree_get(struct zarr_view *v, const char *domain, const char *root_id,
                  struct zarr_tree **out);
void zarr_tree_release(struct zarr_view *v, struct zarr_tree *t);
int zarr_tree_build(struct store *store, const char *bucket, const char *domain,
                    const char *root_id, struct zarr_tree **out);
void zarr_tree_free(struct zarr_tree *t);

/* ---- zarr.c, for the references ---- */
/* "3.0.12" (sep '.') or "3_0_12" (sep '_') -> idx, checked against a's grid: 0 or -ENOENT. */
int zarr_parse_index(const struct zarr_array *a, const char *s, char sep, uint64_t *idx);
/* The chunk file name's bytes as the view serves them (malloc'd); a->lock not held. */
int zarr_read_chunk(struct zarr_view *v, const char *domain, struct zarr_array *a, const char *name,
                    unsigned char **out, size_t *len);
/* Would a chunk object starting with head (its first 16 bytes or all of it) be served as
 * stored? (a settled.) */
int zarr_passes_through(const struct zarr_array *a, const unsigned char *head, size_t len);

/* idx -> "3.0.12", the chunk file's name. 0 or -ENAMETOOLONG. */
int zarr_index_name(const struct zarr_array *a, const uint64_t *idx, char *buf, size_t cap);
/* a's chunk map gets chunk `name`: bytes [off, off + size) of the object at key (ranged 0: the
 * whole object, off 0), replacing what it had. 0 or -ENOMEM. */
int zarr_chunk_put(struct zarr_array *a, const char *name, const char *key, uint64_t off,
                   uint64_t size, int ranged);

/* ---- zarr_linked.c: datasets linked to HDF5 files (spec §8) ---- */
/* The linked file of dset's REF layout (a->link set by zarr_meta_array), and the chunks the
 * layout itself lists (a chunk map, a contiguous range): 0, -EINVAL with a reason (left out),
 * -ENOMEM. in_pool: the file was checked to be of the domain's version pool. */
int zarr_linked_array(const json_t *dset, struct zarr_array *a, const char *bucket,
                      const char *root_id, int in_pool, char *why, size_t why_len);
/* A version's pooled dataset (ZARR_LINK_POOL): its table and pool, which must be the one
 * domain (whose root is root_id) may name (schema/pool.h; pool_ok: a pool already found to be,
 * or ""; set when this one is): 0, -EINVAL with a reason (left out), -ENOMEM. */
int zarr_pooled_array(struct store *store, const char *domain, const char *root_id,
                      const char *bucket, const json_t *dset, struct zarr_array *a,
                      char pool_ok[SCHEMA_ID_BUF], char *why, size_t why_len);
/* A ZARR_LINK_TABLE or _POOL array's chunks from its chunk table (caller holds a->lock): 0,
 * -EIO (logged), -ENOMEM. */
int zarr_linked_table(struct store *store, const char *domain, struct zarr_array *a);

/* ---- zarr_consolidated.c ---- */
#define ZARR_CONSOLIDATED ".zmetadata" /* in the root group only */
/* The root group's .zmetadata (malloc'd): 0, -EIO, -ENOMEM. */
int zarr_consolidated(struct store *store, const char *domain, struct zarr_node *top, char **out,
                      size_t *len);

/* ---- zarr_meta.c: the metadata texts ---- */
/* The .zarray of dataset json into a->meta (fills serve, spec, itemsize, chunk_bytes): 0,
 * -EINVAL with a reason (the dataset is left out) or -ENOMEM. */
int zarr_meta_array(const json_t *dset, struct zarr_array *a, char *why, size_t why_len);
/* The .zarray text of a as served (for_refs: as references give it, which cannot point at
 * fill chunks, so keep the fill value); malloc'd. a must be settled. 0 or -ENOMEM. */
int zarr_meta_zarray(const struct zarr_array *a, int for_refs, char **out, size_t *len);
/* a->fill_elem: the dataset's fill value as one stored element. 0, -EINVAL, -ENOMEM. */
int zarr_meta_fill_elem(const json_t *dset, struct zarr_array *a, char *why, size_t why_len);
/* The .zattrs text of an object's attributes; dims (rank names, or NULL) as
 * _ARRAY_DIMENSIONS. 0 or -ENOMEM. */
int zarr_meta_attrs(const json_t *attributes, const char *const *dims, int rank, char **out,
                    size_t *len);
/* Attributes that only carry the dimension scale machinery (left out of .zattrs). */
int zarr_meta_hidden_attr(const char *name);

#endif
