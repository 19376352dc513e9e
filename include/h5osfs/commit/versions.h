/*
 * versions: the store side of a domain's kept versions (issue 26; doc/versions.md).
 *
 * versions_commit makes the domain's freshly ingested root (not named yet) a kept version:
 * its fixed-size datasets' chunks are sealed into the domain's pool db/<P>/c/<md5> (content
 * addressed, written once, never rewritten), a version root V gets every object's JSON with
 * those datasets as H5D_CHUNKED_REF_INDIRECT over a chunk table of pool URIs (other datasets'
 * chunks are copied under V), DIR/.versions/NAME/<n>.h5/.domain.json names V, and the entry
 * is appended to the version list by a conditional put: the version's commit point. The
 * caller then swaps the domain to the new root as for any commit. Nothing here is ever
 * deleted: V and P are not roots a domain's commit replaces; versions that lose their names
 * are collected by sweep.h.
 */
#ifndef H5OSFS_VERSIONS_H
#define H5OSFS_VERSIONS_H

#include <stdint.h>

#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

struct versions_stats {
    uint64_t chunks_pooled;    /* chunks the version names in the pool */
    uint64_t chunks_new;       /* of which were not there yet (stored now) */
    uint64_t chunks_copied;    /* of which were copied in the store, keyed by their listed MD5 */
    uint64_t chunks_from_base; /* of which were named as the base version names them, unread */
    int base_is_version;       /* the base root is a version root itself (versions_current=ref) */
};

/*
 * The chunks an r+ of a versions_current=ref domain left in the pool (ingest.h's
 * kept_in_pool): per dataset of the new root, the indexes whose entry the new version copies
 * from its base version's table. Filled by the ingest's threads (a lock inside), read by
 * versions_commit afterwards.
 */
struct versions_kept;
int versions_kept_new(struct versions_kept **out);
void versions_kept_free(struct versions_kept *k);
/* ingest.h's kept_in_pool, with ctx a struct versions_kept. 0 or -ENOMEM. */
int versions_kept_add(void *ctx, const char *dataset_id, const uint64_t *idx, int rank);

struct versions_commit {
    struct store *store;
    const char *bucket_name; /* the pool URIs' bucket (spec §8.3) */
    const char *domain;      /* "/DIR/NAME" */
    const char *root;        /* the new root, ingested and synced, not named yet */
    const char *base_root;   /* the domain's root the commit replaces ("" for a new domain) */
    const char *user;        /* owner of the version objects; the committer's name */
    const json_t *acls;      /* the domain's "acls": who may read its versions (NULL: user alone) */
    unsigned workers;        /* chunks sealed at once */
    unsigned keep; /* untagged versions kept, the new one included (0: all): older untagged
                    * ones lose their number in the same list put (doc/versions.md §4.5) */
    /* A pool object the version names that was written longer ago than this (seconds) is
     * written again, so that a pool sweep running meanwhile keeps it (sweep.h: half its grace
     * period). 0: never. */
    double pool_fresh_for;
    struct versions_stats *stats; /* filled (may be NULL) */
    /* The chunks the new root leaves out because its base version's pool holds them (NULL:
     * none; the root has every chunk). A version that cannot take such a chunk's entry from
     * its base's table (another grid) fails with -EAGAIN: the commit ingests a whole root. */
    const struct versions_kept *kept;
    /* The size of version path's file (root vroot) as this build lays it out, and the layout
     * stamp it holds for, recorded in the list so that a listing need not build it (NULL, or
     * an error: not recorded, the listing builds). */
    int (*measure)(void *ctx, const char *path, const char *vroot, uint64_t *size, char *stamp,
                   size_t stamp_len);
    void *measure_ctx;
    /* Called with V's root id before its first object is written (NULL: not called): a
     * failure (-errno) stops the commit before anything of V exists. The caller makes the id
     * durable, so that a crash before the list names V lets recovery collect it. */
    int (*reserve)(void *ctx, const char *vroot);
    void *reserve_ctx;
    /* The new root's linked file (ingest=link) is the base root's, carried over unchanged by
     * this commit (an r+): the base version's pool file has its bytes and is named again. */
    int linked_file_from_base;
    /* Test hook: called after V's objects are durable, and after the list put. */
    void (*crash_point)(const char *stage);
};

/* 0 with the version's number and root; -EAGAIN (logged) as said of kept; -ESTALE (logged) when the list already holds a
 * commit on base_root: another writer's, listed first, which wins as its swap will; -EOPNOTSUPP (logged: the commit goes on without a
 * version) for a domain it cannot keep yet (v1 ids, data linked to a file other than the
 * root's own, chunk tables too large);
 * else -errno (the store's, -ENOMEM), logged. */
int versions_commit(const struct versions_commit *vc, uint64_t *n, char vroot[SCHEMA_ID_BUF]);

/* Is new_root (a domain root a commit made) listed among domain's versions? A commit that
 * died after its list put and before its swap is then finished, not undone. 1 (vroot, may be
 * NULL, gets that version's root), 0, or -errno (logged). */
int versions_listed(struct store *store, const char *domain, const char *new_root,
                    char vroot[SCHEMA_ID_BUF]);

/* vroot, a version root an interrupted commit wrote and its list does not name, is being
 * collected: the linked file it may have copied into the domain's pool under its own name is
 * deleted too (no other version can name it). 0, or -errno (the list cannot be read: kept). */
int versions_drop_unlisted(struct store *store, const char *domain, const char *vroot);

/* Is root the root of one of domain's versions (never to be collected as a replaced root:
 * a versions_current=ref domain names its head version's root)? 1, 0, or -errno (logged). */
int versions_is_version_root(struct store *store, const char *domain, const char *root);

#endif
