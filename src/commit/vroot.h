/*
 * vroot: a new version's root V written from the freshly ingested root R' (doc/versions.md
 * §4.1 step 3, §4.2 step 3). R' is listed with sizes, mtimes and ETags; every object's JSON is
 * put under V with its ids moved (same suffixes, V's A-B prefix); a fixed-size chunked dataset
 * is pooled (its chunks sealed, vseal.h; a chunk table, vtab.h; its layout
 * H5D_CHUNKED_REF_INDIRECT naming the pool), any other dataset copied under V (reference chunks
 * with their ids moved); the root group last. Nothing names V until versions.c lists it.
 * Called by versions.c; calls vseal.c, vtab.c and vkept.c, never versions.c.
 */
#ifndef H5OSFS_COMMIT_VROOT_H
#define H5OSFS_COMMIT_VROOT_H

#include "h5osfs/commit/versions.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/schema/schema.h"
#include "vseal.h"

/* A new v2 root id (random digits, as HSDS mints them): a version root's, a pool's. 0 or
 * -EIO (no random bytes). */
int vroot_mint(char out[SCHEMA_ID_BUF]);

/* V = vroot written from vc->root, its chunks sealed into pool, the unchanged ones named as
 * base names them; the root's linked file (ingest=link) copied as V's own; synced. 0;
 * -EOPNOTSUPP for a root a version cannot hold yet (data linked to another file, a table too
 * large, a chunk of 2 GiB, filtered references); -EAGAIN as versions.h says of
 * kept; else -errno. Partial objects of V stay for the caller's journal to collect. */
int vroot_write(const struct versions_commit *vc, const char *pool, const char *vroot,
                const struct base_version *base);

/* The pool file name (32 hex digits) version root vroot's group says its linked datasets name,
 * into name ("" none, or a group without one), and the etag it recorded for it into etag
 * (unless NULL; "" none: kept before etags), as schema_pool_file_named reads them. 0,
 * -EBADMSG for a group that is no JSON or a member no commit writes (name and etag ""), or
 * the store's -errno. */
int vroot_file_name(struct store *store, const char *vroot, char name[33],
                    char etag[SCHEMA_POOL_ETAG_BUF]);

/* The pool file V = vroot would put into pool for a linked file of its own (vroot_write):
 * db/<pool>/f/<V's 32 id digits>. Until V is listed no other version names it. 0 or -errno. */
int vroot_pool_file_key(const char *pool, const char *vroot, char *key, size_t len);

#endif
