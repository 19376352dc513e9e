/*
 * commit: a staged HDF5 file becomes a domain, in an order that no reader and no crash can
 * observe half-done (doc/design.md, "Writing").
 *
 * Every commit writes a new root: a new root id is journaled, the file is ingested under it
 * (chunks, then JSON, root group last), then the domain's .domain.json is written (new) or
 * swapped to the new root (owner, ACLs and created kept); the replaced root's objects go to
 * the collector. Until that one put, every reader of the bucket sees the old domain (or none),
 * also after a crash, whoever recovers. An r+ change (JOURNAL_CHANGE) passes its base
 * (ingest.h): what did not change keeps its ids and is copied inside the store, not rewritten.
 *
 * The swap is conditional (store_put_if): it happens only if the domain still names
 * rec->base_root (no domain, for a new file); else -ESTALE, logged: another writer's commit
 * won. Failures leave the journal record DIRTY and the staged file in place: the next flush, or the
 * next mount, tries again. Recovery at mount (commit_recover) looks at each record: a commit
 * whose .domain.json already names the new root is finished (old root collected); one that
 * never got there is undone (its new root collected) and retried; dirty staged files are
 * committed; staged bytes that are not HDF5 are moved to the cache directory's rejected/
 * folder, with one log line saying where. Records of another bucket, and records that name
 * none (written before records named their bucket), are left as they are, with one log line
 * each: they are never committed into this bucket.
 * A COMMITTING record that finds no room (ENOSPC,
 * EDQUOT: a full cache directory) does not stop the commit (logged): else a whole staged file
 * that filled the disk could never be committed nor its space freed, at any mount; a crash
 * during such a commit leaves its new root in the bucket, uncollected.
 *
 * After the swap, the new root gets its summary .info.json (info.h; never fails the commit),
 * also when recovery finds a commit that had swapped before a crash.
 *
 * With versions on (versions_for), the new root is also kept as a version before the swap
 * (versions.h): the version list's put is that version's commit point; a crash after it and
 * before the swap leaves the version listed and readable, and the retried commit keeps
 * another, equal one.
 *
 * Test hook: with the environment variable H5OSFS_TEST_CRASH_AT set to one of "committing",
 * "chunks", "metadata", "root", "vroot", "listed" or "domain", the daemon kills itself
 * (SIGKILL) at that point of the next commit: right after the journal says COMMITTING, after
 * the chunk objects, after the JSON objects but the root group, after the root group, after
 * a version's root (versions on), after its list entry, after the .domain.json put.
 */
#ifndef H5OSFS_COMMIT_H
#define H5OSFS_COMMIT_H

#include "h5osfs/domops/domops.h"
#include "h5osfs/ingest/ingest.h"
#include "h5osfs/commit/journal.h"
#include "h5osfs/commit/restore.h"

struct info_queue;

struct commit_ctx {
    const struct domops *ops; /* store, namespace, user, collector */
    struct journal *journal;
    unsigned workers; /* parallel chunk puts */
    int link;         /* -o ingest=link: linked ingest (ingest.h) of new files */
    /* The mode for the file at domain path: a folder's setting above it, else link (NULL:
     * link). 1 link, 0 copy. */
    int (*link_for)(void *ctx, const char *domain, int link);
    void *link_ctx;
    /* Does a commit of the domain at path keep a version (issue 26)? A folder's
     * user.h5osfs.versions above it, else -o versions. NULL: never. Called with link_ctx.
     * *keep gets how many untagged versions to keep (0: all), from the same setting. */
    /* *ref (may be NULL): versions_current=ref, the domain names its head version itself */
    int (*versions_for)(void *ctx, const char *domain, unsigned *keep, int *ref);
    /* versions_commit's measure (versions.h), called with link_ctx. NULL: sizes not recorded. */
    int (*measure_version)(void *ctx, const char *path, const char *vroot, uint64_t *size,
                           char *stamp, size_t stamp_len);
    double pool_fresh_for; /* versions_commit's (versions.h): half of -o versions_grace */
    /* restore.h's test: is this file the file of that kept version? Called with link_ctx.
     * NULL: a copy of a version is ingested like any file. */
    restore_same_fn same_as_version;
    struct info_queue *info; /* summaries after commits (NULL: written before returning) */
    const char *bucket_name; /* HSDS's name of the bucket: .info.json (info.h),
                                 * linked layouts' file_uri */
    /* Recovery of a JOURNAL_CHANGE record: the base its staged file needs (NULL hook, or
     * *base NULL: the staged file holds every byte). 0, or -errno to keep the record. */
    int (*recover_base)(void *ctx, const struct journal_rec *rec, struct ingest_base **base);
    void (*release_base)(void *ctx, struct ingest_base *base);
    void *base_ctx;
};

/* Commit the staged file of rec (base: what it started as, or NULL). Updates rec (and its
 * journal record): after success the mode is CHANGE with the domain's new root as base_root,
 * and the state CLEAN. 0 or -errno: -EINVAL when the staged bytes are not an HDF5 file, -EIO,
 * -ENOSPC, -ENOMEM, -EISDIR (a folder was made at the path meanwhile), -ESTALE (another writer
 * changed, made or removed the domain since base_root).
 * file_kept: NULL, or the caller lets a linked commit make the staged file itself an object of
 * the new root (store_put_new_file); then *file_kept says whether it did, whatever the
 * outcome, and from then on the caller must not change the staged file in place. */
int commit_staged(const struct commit_ctx *c, struct journal_rec *rec,
                  const struct ingest_base *base, int *file_kept);

/* At mount, before any request: finish, undo and retry what the journal holds. Returns the
 * number of records left for a later mount (logged each). */
size_t commit_recover(const struct commit_ctx *c);

#endif
