/*
 * restore: `cp DIR/.versions/NAME/<k>.h5 DIR/NAME` commits version k again without storing
 * its chunk bytes again (issue 26, doc/versions.md §4.8).
 *
 * The copied file is not ingested: its bytes are the file h5osfs synthesises for version k,
 * which shows stored chunks decoded where their encoding has no HDF5 filter, so an ingest
 * would store different bytes (and a different pool object) for the same values. Instead the
 * commit recognises the staged file as version k's (same size as listed, then the same bytes
 * as k's file) and writes the new root from k's root V_k: every object's JSON with its ids
 * moved to the new root, chunk tables made plain chunked layouts again, and each chunk copied
 * to its key under the new root from the pool (S3: CopyObject, no byte crosses the wire; a
 * local bucket: a real copy, never a hard link, since HSDS rewrites a domain's chunks in
 * place). Sealing the new root as version n+1 then finds every chunk's MD5 in the pool.
 */
#ifndef H5OSFS_RESTORE_H
#define H5OSFS_RESTORE_H

#include <stdint.h>

#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

/* 1 if the size bytes of fd are the bytes of the version at path (root vroot), 0 if not,
 * -errno when that cannot be told. */
typedef int (*restore_same_fn)(void *ctx, const char *path, const char *vroot, int fd,
                               uint64_t size);

struct restore_stats {
    uint64_t objects;       /* JSON objects written */
    uint64_t chunks_copied; /* chunks copied from the pool or the version root */
};

/* The kept version of domain whose file the staged file at staged_path is, newest first:
 * 1 with its number and root, 0 (none: the file is ingested as usual), or -errno (logged). */
int restore_find(struct store *store, const char *domain, const char *staged_path,
                 restore_same_fn same, void *ctx, uint64_t *n, char vroot[SCHEMA_ID_BUF]);

/* Write the objects of root new_root (a fresh id, not named yet) as copies of the version
 * root vroot of domain's list, whose pool URIs are in bucket bucket_name; the version's own
 * linked file (ingest=link) is copied as new_root's, which its datasets then name. 0 or -errno
 * (logged); -EOPNOTSUPP for a version this cannot copy, -EBADMSG for one whose pool object
 * holds other bytes than its key names (the caller ingests instead, under another root: this
 * one may hold some objects already). */
int restore_root(struct store *store, const char *bucket_name, const char *domain,
                 const char *vroot, const char *new_root, unsigned workers,
                 struct restore_stats *stats);

#endif
