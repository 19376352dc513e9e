/*
 * fs: the FUSE low-level front end. Every request gets exactly one reply; internal errors are
 * negative errnos until the reply. Namespace questions go to ns, file contents to the image
 * table, writes to staging (staging.h) and its commit, namespace changes to domops: fs itself
 * makes no store request. It builds none of them: the stack (src/main/stack.c) does, and
 * outlives it.
 */
#ifndef H5OSFS_FS_H
#define H5OSFS_FS_H

#include <stdbool.h>
#include <sys/types.h>

#include <fuse_lowlevel.h>

#include "h5osfs/cache/cache.h"
#include "h5osfs/fs/callers.h"
#include "h5osfs/domops/domops.h"
#include "h5osfs/image/image_table.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/cache/prefetch.h"
#include "h5osfs/staging/staging.h"
#include "h5osfs/store/store.h"

/* What fs serves from; none of it is fs's own (each must outlive fs_free). */
struct fs_config {
    struct ns *ns;
    struct store *store;     /* its counters and name, for the statistics; MOUNT/.zarr reads it */
    const char *bucket_name; /* MOUNT/.zarr: the bucket linked layouts' file_uri must name */
    struct image_table *images;  /* the domains' files */
    struct chunk_cache *cache;   /* decoded chunks, shared by every open file */
    struct prefetcher *prefetch; /* loads chunks ahead of sequential readers; may be NULL */
    struct callers *callers;     /* who each request acts as; who created each new file */
    const struct domops *ops;    /* namespace changes */
    struct staging *staging;     /* files open for writing; NULL on a read-only mount */
    double ttl;                  /* kernel entry/attribute timeout, seconds */
    int read_only;               /* -o ro: no w bits, every change is EROFS */
    uid_t uid;                   /* owner shown for every entry: the mounting user */
    gid_t gid;
    const char *user;      /* the mounting user's HSDS name */
    const char *cache_dir; /* where staging keeps its files (not used when read-only) */
    const char *refs_base; /* MOUNT/.kerchunk: what chunk keys are appended to in references
                              ("s3://bucket/prefix/", "file:///dir/"); NULL: no .kerchunk */
    uint64_t read_ahead;   /* bytes of kernel read-ahead the mount asks for; 0: the kernel's */
};

struct fs;

int fs_new(const struct fs_config *cfg, struct fs **out);
/* What the mount has done since fs_new, as JSON (src/fs/stats.h; malloc'd): the statistics
 * file's content (pretty) and SIGUSR1's log line (one line). 0 or -ENOMEM. */
int fs_stats_text(struct fs *fs, int pretty, char **out);
void fs_free(struct fs *fs);

/* The file system is mounted at mountpoint: what a close's check of other descriptors needs
 * (src/fs/holders.h). Before requests are served. */
void fs_mounted(struct fs *fs, const char *mountpoint);

/* Whether the mount fs_mounted saw at mountpoint is still in the mount table (after the loop:
 * an unmount removed it, an aborted connection left it). Reads /proc/self/mountinfo only, so
 * it never waits on a mount nobody serves. false when the mount's id was never known. */
bool fs_still_mounted(const struct fs *fs, const char *mountpoint);

/* Start read-ahead with p (may be NULL) and the kernel notifier's thread on session se
 * (after daemonising: threads would not survive the fork). */
void fs_start_threads(struct fs *fs, struct fuse_session *se, struct prefetcher *p);
/* Stop the threads that use the session (before it is destroyed). */
void fs_stop_threads(struct fs *fs);

/* A commit made a new version of path: the kernel's cached name of the old version's node
 * must not answer the next lookup. */
void fs_forget_name(struct fs *fs, const char *path);

/* The operations table; the userdata given to fuse_session_new must be the struct fs. */
const struct fuse_lowlevel_ops *fs_operations(void);

#endif
