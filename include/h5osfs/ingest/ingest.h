/*
 * ingest: an HDF5 file -> the objects of an HSDS domain, as HSDS itself would store them
 * (spec §1-§6, §10). The file is read with the HDF5 library; nothing here knows about FUSE,
 * staging or .domain.json (the caller writes that last, see commit.h).
 *
 * Objects are written whole through the store (each put atomic), in this order: chunk objects
 * (in parallel, cfg->workers at a time), then committed datatypes, datasets, groups, and the
 * root group last. Ids are v2: a root id that obeys the rotation rule and every other id sharing
 * its first 16 hex digits (§1.2).
 *
 * What the schema cannot hold is stored as well as it can be and logged, one line per object
 * naming the domain and the HDF5 path: datasets with external raw data become regular datasets
 * holding the values HDF5 reads; user-defined links, region references
 * and types HSDS has no JSON for are left out; filters HSDS cannot decode are replaced (the data
 * is stored decoded, compressed with zlib). Nothing is dropped silently: stats->changes counts
 * those lines. A virtual dataset keeps its mappings, in an "h5osfs" member of its JSON
 * (ingest_vds.c, doc/image.md), and no chunk objects: never the values HDF5 reads through them.
 */
#ifndef H5OSFS_INGEST_H
#define H5OSFS_INGEST_H

#include <stdint.h>

#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

/* Stages the commit passes, for the journal's test hook (crash tests) and the debug log. */
enum ingest_stage {
    INGEST_STAGE_CHUNKS_DONE,   /* every chunk object is stored, no JSON yet */
    INGEST_STAGE_METADATA_DONE, /* every JSON object but the root group's */
    INGEST_STAGE_ROOT_DONE,     /* the root group too */
};

struct ingest_config {
    struct store *store;
    unsigned workers; /* threads that encode and put chunks; 0 means 1 */
    /*
     * Linked ingest (spec §8, as hsload --link): the file itself is stored whole as one object
     * of the new root, db/A-B/.h5osfs-file (HSDS ignores a key of that shape, and deleting the
     * domain deletes it), and every dataset HSDS can read from it as the file stores it points
     * into it, its layout chosen as hsload chooses: contiguous -> H5D_CONTIGUOUS_REF, at most
     * 10 chunks -> H5D_CHUNKED_REF, more -> H5D_CHUNKED_REF_INDIRECT with a chunk table. The
     * rest (variable-length or reference types, compact, scalar, at most 512 elements, filters
     * other than deflate and shuffle+deflate, types HSDS describes differently) is stored as a
     * copy. Only without a base: an r+ change keeps the linked layouts its datasets had
     * (ingest_base). bucket_name makes the file_uri "<bucket_name>/<key>", which HSDS resolves
     * in its default storage and image/refs.c in the mounted bucket.
     */
    int link;
    const char *bucket_name;
    /* With link: the file may become the stored object itself (store_put_new_file); the
     * caller then changes it no more in place (stats->file_kept says it did). */
    int keep_file;
    /*
     * An r+ of a versions_current=ref domain (doc/versions.md §4.2, mode B): a chunk that is
     * still the base version's pool object (chunk_state 3) is not stored under the new root;
     * kept_in_pool(pool_ctx, new dataset id, idx, rank) is told instead (0 or -ENOMEM), and
     * the version made of the new root names it as the base version does. Chunks equal to
     * the fill value are then stored all the same: a chunk absent from the new root means
     * one the version does not have. NULL: every chunk is stored (copied) as always.
     */
    int (*kept_in_pool)(void *ctx, const char *dataset_id, const uint64_t *idx, int rank);
    void *pool_ctx;
    /*
     * 1: no chunk table for a virtual dataset mapped chunk by chunk into a dataset of the file
     * (ingest_vref.c; doc/image.md): the VDS is stored as its mappings alone, which HSDS reads
     * as fill values. For a commit that keeps a version (src/commit/versions.c takes no *_REF
     * layout into a version yet: with a table, the commit is made without one). 0: tables.
     */
    int no_vds_tables;
    /* Called at each stage (may be NULL). A test hook may kill the process here. */
    void (*on_stage)(void *ctx, enum ingest_stage stage);
    void *ctx;
};

/*
 * What the file started as, when it is a changed copy of a stored version (r+): every commit
 * stores a new root all the same (so readers switch from the old version to the new one at
 * once, src/commit/commit.c), but what did not change costs nothing:
 * - an object of the file whose header address the base knows keeps its id's last 16 digits
 *   (its identity across versions), the "created" time of its unchanged links and attributes,
 *   and, for a dataset of the same type and chunk shape, the base's layout and creation
 *   properties (filters, partitions, a *_REF layout while none of its chunks was written);
 * - a chunk whose bytes were not written is copied inside the store from the base's chunk
 *   object (store_copy), never read or encoded;
 * - what the base's file did not show (kept) is carried over as it is stored, unless the file
 *   now has an attribute or link of the same name (the user's then wins, logged).
 */
/* What the base's file did not show as it is stored (the image's omissions, image.h): the
 * user could not see or change it, so a commit carries it over unchanged. */
enum ingest_kept_kind {
    INGEST_KEPT_OBJECT,      /* not in the file (the links to it are listed as LINK) */
    INGEST_KEPT_PLACEHOLDER, /* in the file as a placeholder: stored as the base has it */
    INGEST_KEPT_CHUNK,       /* chunk `name` ("3_0") of dataset id, unreadable there */
    INGEST_KEPT_ATTRIBUTE,   /* attribute `name` of object id */
    INGEST_KEPT_LINK,        /* link `name` of group id */
};

struct ingest_kept {
    enum ingest_kept_kind kind;
    const char *id;
    const char *name; /* NULL for OBJECT and PLACEHOLDER */
};

struct ingest_base {
    const char *root;               /* the base version's root id (v2) */
    const struct ingest_kept *kept; /* see above */
    size_t n_kept;
    /* The id of the base object whose object header is at addr, or NULL. */
    const char *(*object_id)(void *ctx, uint64_t addr);
    /* The chunk bytes [addr, addr+len) of the file: 2 when they are still the base's chunk idx
     * of dataset_id, stored as the object whose key is given back; 1 when they are still the
     * base's but not such a chunk; 3 when still the base's chunk idx of dataset_id and one
     * whole object of the base version's pool (cfg->kept_in_pool); 0 when written. With
     * materialize, the file holds every byte
     * of the range when this returns (clean bytes are copied in). -errno on failure. */
    int (*chunk_state)(void *ctx, uint64_t addr, uint64_t len, const char *dataset_id,
                       const uint64_t *idx, int rank, int materialize, char *key, size_t key_len);
    /* Every chunk extent of base dataset dataset_id with its chunk_state (materialize 0; key
     * for state 2), told in one pass without asking HDF5 where each chunk is (HDF5 1.10's
     * H5Dget_chunk_info_by_coord walks the chunk index: O(chunks) per lookup, minutes for
     * 1e5), possible only where nothing but chunk bytes was written in place (no index node,
     * no allocation), so that every chunk is where the base put it. fn(fctx, idx, rank, state,
     * key) for each (non-zero stops: that value). 1 done; 0 when it cannot tell (ask HDF5 per
     * chunk); -errno. NULL: never. */
    int (*clean_chunks)(void *ctx, const char *dataset_id,
                        int (*fn)(void *fctx, const uint64_t *idx, int rank, int state,
                                  const char *key),
                        void *fctx);
    /* Before the ingest (commit.c): 0 when every base chunk object the file's writer wrote
     * over is still as the base saw it, -ESTALE (logged) when another writer (HSDS updates
     * chunks in place) changed one since, so that the commit does not undo it; -errno. NULL:
     * nothing to check. */
    int (*written_chunks_unchanged)(void *ctx);
    void *ctx;
};

struct ingest_stats {
    uint64_t groups, datasets, datatypes;
    uint64_t chunks_written;  /* chunk objects put */
    uint64_t chunks_raw;      /* of those, copied from the file without decoding */
    uint64_t chunks_copied;   /* unchanged chunks copied inside the store from the base */
    uint64_t chunks_fill;     /* chunks equal to the fill value everywhere: not stored */
    uint64_t chunks_in_pool;  /* unchanged chunks the base version's pool holds (kept_in_pool) */
    uint64_t chunks_told;     /* of those, told by clean_chunks (no lookup per chunk) */
    uint64_t copies_told;     /* of chunks_copied, told by clean_chunks */
    uint64_t objects_kept;    /* objects of the base the file still has (same id digits) */
    uint64_t bytes_written;   /* bytes put, JSON included */
    uint64_t changes;         /* objects stored differently from the file (each logged) */
    uint64_t datasets_linked; /* datasets whose values are read from the stored file */
    uint64_t bytes_linked;    /* size of that file (0: none stored) */
    int file_kept;            /* that object is the file itself (keep_file) */
    int file_from_base;       /* that object is the base root's, carried over unchanged (r+) */
    int pool_file_left;       /* layouts left naming the base version's pool file (ref mode) */
};

/*
 * Store the HDF5 file at h5path as a domain with a new root: root is a fresh id from
 * ingest_new_root_id or ingest_new_root_id_for (the caller journals it before anything is
 * written, so an interrupted commit can be undone). A v2 root's objects are all written under
 * its prefix (db/A-B/), nothing elsewhere; a v1 root's objects get fresh v1 ids and top-level
 * keys (§11), which only the root's JSON ties together. base: what the file started as (NULL
 * for a new file, a replacement, or a v1 root: v1 objects share no digits to keep).
 * log_name (the domain path) prefixes every log line. On failure the objects written so far
 * stay under root (unreachable; the caller has them collected).
 * 0, or -EINVAL (not an HDF5 file, or one HDF5 cannot open; logged), -EIO (the store failed or
 * the file could not be read; logged), -ENOSPC, -ENOMEM.
 */
int ingest_new(const struct ingest_config *cfg, const char *h5path, const char *log_name,
               const char *root, const struct ingest_base *base, struct ingest_stats *stats);

/* A fresh v2 root group id (§1.2), lowercase, from the system's random source. 0 or -EIO. */
int ingest_new_root_id(char out[SCHEMA_ID_BUF]);

/* The root of a new version of a domain whose current root is base_root ("" or NULL: a new
 * domain): a v1 group id "g-<uuid1>" when base_root is v1, so that a v1 domain stays v1 as
 * HSDS keeps it (§1.2, §11: its objects then get v1 ids and top-level keys), else a fresh v2
 * root (new domains are v2, as HSDS makes them). 0 or -EIO. */
int ingest_new_root_id_for(const char *base_root, char out[SCHEMA_ID_BUF]);

#endif
