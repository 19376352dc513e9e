/*
 * fs: the FUSE low-level front end. Every request gets exactly one reply; internal errors are
 * negative errnos until the reply. Namespace questions go to ns, file contents to image,
 * writes to staging (src/fs/staging.c) and its commit, namespace changes to domops: fs itself
 * makes no store request.
 */
#ifndef H5OSFS_FS_H
#define H5OSFS_FS_H

#include <sys/types.h>

#include <fuse_lowlevel.h>

#include "h5osfs/cache.h"
#include "h5osfs/image.h"
#include "h5osfs/ns.h"
#include "h5osfs/prefetch.h"

struct fs_config {
    struct ns *ns;
    struct image_source images;  /* where domains' files are built from */
    struct chunk_cache *cache;   /* decoded chunks, shared by every open file */
    struct prefetcher *prefetch; /* loads chunks ahead of sequential readers; may be NULL */
    double ttl;                 /* kernel entry/attribute timeout, seconds */
    int read_only;              /* -o ro: no w bits, every change is EROFS */
    uid_t uid;                  /* owner shown for every entry: the mounting user */
    gid_t gid;
    const char *user;           /* the mounting user's HSDS name, and the admin's */
    const char *admin_user;
    const char *user_map;       /* -o user_map: other callers' HSDS names (callers.h); NULL */
    double gc_grace;            /* seconds before a deleted domain's objects are removed */
    const char *cache_dir;      /* the staging area and its journal (not used when read-only) */
    const char *bucket_id;      /* the bucket's identity: its journal records carry it */
    unsigned write_workers;     /* chunk objects put in parallel by a commit */
    int ingest_link;            /* -o ingest=link: new files stored linked (ingest.h) */
};

struct fs;

int fs_new(const struct fs_config *cfg, struct fs **out);
/* What the mount has done since fs_new, as JSON (src/fs/stats.h; malloc'd): the statistics
 * file's content (pretty) and SIGUSR1's log line (one line). 0 or -ENOMEM. */
int fs_stats_text(struct fs *fs, int pretty, char **out);
void fs_free(struct fs *fs);

/* Start read-ahead with p (may be NULL), the collector's and the kernel notifier's threads
 * on session se, and recover the journal (after daemonising: threads would not survive the
 * fork). */
void fs_start_threads(struct fs *fs, struct fuse_session *se, struct prefetcher *p);
/* Stop the threads that use the session (before it is destroyed). */
void fs_stop_threads(struct fs *fs);

/* The operations table; the userdata given to fuse_session_new must be the struct fs. */
const struct fuse_lowlevel_ops *fs_operations(void);

#endif
