/*
 * vseal: a new version's chunks sealed into the domain's pool (doc/versions.md §4.1 step 2,
 * §4.2 step 2, and its "status of the seal"). Each chunk of the freshly ingested root goes to
 * db/<P>/c/<md5>, content addressed and written once: by a CopyObject keyed by its listed ETag
 * when that is an MD5 (S3), else read, hashed and put (never a hard link: HSDS rewrites chunk
 * files in place). A chunk the base version names at the same index is named as it names it,
 * without a HEAD or a rewrite. Called by vroot.c per pooled dataset; calls only vtab.c (the
 * table entries' layout).
 */
#ifndef H5OSFS_COMMIT_VSEAL_H
#define H5OSFS_COMMIT_VSEAL_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/commit/versions.h"
#include "h5osfs/domops/vtable.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

#define VSEAL_CHUNK_MAX (1ull << 31) /* table sizes are I32 (spec §8.3) */

/* One chunk of the new root: the caller fills key, listed, idx and base_entry; vseal_chunks
 * fills the rest. */
struct sealed {
    char *key;                       /* the chunk's key under the new root */
    const struct store_stat *listed; /* as the new root's listing gave it */
    uint64_t *idx;                   /* its index (rank numbers) */
    const unsigned char *base_entry; /* the base version's table entry (NULL: none) */
    char uri[VTABLE_URI_LEN];
    uint64_t size;
    int rc;
    int fresh, copied, from_base; /* stored now; by a copy in the store; named as in V_n */
};

/* The version the commit's base root was kept as (doc/versions.md §4.2): V_n's tables name
 * the pool object of every chunk the writer did not change. */
struct base_version {
    char vroot[SCHEMA_ID_BUF]; /* "" when the base is no listed version */
    double time;               /* when it was listed */
    int is_root;               /* the base root is that version's root (versions_current=ref) */
};

/* What a commit knows of the store's listed ETags (vseal_chunks' *etags, one per commit,
 * UNKNOWN at its start): whether one that looks like an MD5 (32 hex digits) is one. */
#define VSEAL_ETAGS_UNKNOWN 0
#define VSEAL_ETAGS_MD5 1     /* two were proven: such ETags key their chunks unread */
#define VSEAL_ETAGS_NOT_MD5 2 /* SSE-KMS, SSE-C: every chunk is read and hashed */

/* Seal chunks[0..n) into pool (vc->workers at once). Each chunk's rc says how it went: 0 with
 * its uri and size (fresh, copied, from_base told), -EOPNOTSUPP for a chunk of 2 GiB or more,
 * else the store's -errno. While *etags is UNKNOWN, the oldest and the newest chunk listed
 * with an MD5-like ETag are read first and tell (the rest of the commit keeps the answer). */
void vseal_chunks(const struct versions_commit *vc, const char *pool,
                  const struct base_version *base, struct sealed *chunks, size_t n, int *etags);

#endif
