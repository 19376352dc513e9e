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
 * naming the domain and the HDF5 path: virtual datasets and datasets with external raw data
 * become regular datasets holding the values HDF5 reads; user-defined links, region references
 * and types HSDS has no JSON for are left out; filters HSDS cannot decode are replaced (the data
 * is stored decoded, compressed with zlib). Nothing is dropped silently: stats->changes counts
 * those lines.
 */
#ifndef H5OSFS_INGEST_H
#define H5OSFS_INGEST_H

#include <stdint.h>

#include "h5osfs/schema.h"
#include "h5osfs/store.h"

/* Stages the commit passes, for the journal's test hook (crash tests) and the debug log. */
enum ingest_stage {
    INGEST_STAGE_CHUNKS_DONE,     /* every chunk object is stored, no JSON yet */
    INGEST_STAGE_METADATA_DONE,   /* every JSON object but the root group's */
    INGEST_STAGE_ROOT_DONE,       /* the root group too */
};

struct ingest_config {
    struct store *store;
    unsigned workers;           /* threads that encode and put chunks; 0 means 1 */
    /* Called at each stage (may be NULL). A test hook may kill the process here. */
    void (*on_stage)(void *ctx, enum ingest_stage stage);
    void *ctx;
};

struct ingest_stats {
    uint64_t groups, datasets, datatypes;
    uint64_t chunks_written;     /* chunk objects put */
    uint64_t chunks_raw;         /* of those, copied from the file without decoding */
    uint64_t chunks_fill;        /* chunks equal to the fill value everywhere: not stored */
    uint64_t objects_unchanged;  /* in place: same content as stored, not written */
    uint64_t objects_deleted;    /* in place: objects the file no longer has */
    uint64_t bytes_written;      /* bytes put, JSON included */
    uint64_t changes;            /* objects stored differently from the file (each logged) */
};

/*
 * Store the HDF5 file at h5path as a domain with a new root: root is a fresh id from
 * ingest_new_root_id (the caller journals it before anything is written, so an interrupted
 * commit can be undone), and every object is written under that root's prefix (db/A-B/),
 * nothing elsewhere. log_name (the domain path) prefixes every log line. On failure the
 * objects written so far stay under root (unreachable; the caller has them collected).
 * 0, or -EINVAL (not an HDF5 file, or one HDF5 cannot open; logged), -EIO (the store failed or
 * the file could not be read; logged), -ENOSPC, -ENOMEM.
 */
int ingest_new(const struct ingest_config *cfg, const char *h5path, const char *log_name,
               const char *root, struct ingest_stats *stats);

/*
 * Store the HDF5 file at h5path into the existing v2 domain whose root is root, changing only
 * what changed: an object keeps its id where the file has an object of the same kind at the
 * same path (a dataset also needs the same type and rank, else it gets a new id); an object is
 * written only when its content differs from what is stored (JSON compared without timestamps,
 * chunks compared decoded); objects the file no longer has are deleted after everything else
 * is written, the root group last but one. Running it again with the same file after an
 * interruption finishes the job (it is idempotent). Same errors as ingest_new, and -ENOTSUP for
 * a v1 root (the caller then replaces the domain instead).
 */
int ingest_in_place(const struct ingest_config *cfg, const char *h5path, const char *log_name,
                    const char *root, struct ingest_stats *stats);

/* A fresh v2 root group id (§1.2), lowercase, from the system's random source. 0 or -EIO. */
int ingest_new_root_id(char out[SCHEMA_ID_BUF]);

#endif
