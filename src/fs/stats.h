/*
 * stats: what a mount has done since it started, as one JSON text, for the read-only file
 * /.h5osfs-stats at the mount's root and for the log line SIGUSR1 asks for (doc/h5osfs.1,
 * STATISTICS). Counters only: nothing here waits for the store.
 */
#ifndef H5OSFS_FS_STATS_H
#define H5OSFS_FS_STATS_H

#include <stdint.h>

#include "h5osfs/cache/cache.h"
#include "h5osfs/image/image_table.h"
#include "h5osfs/cache/prefetch.h"
#include "h5osfs/staging/staging.h"
#include "h5osfs/store/store.h"

#define STATS_FILE_NAME ".h5osfs-stats"

struct fs_stats {
    const char *backend; /* the store's name: "posix", "s3" */
    double uptime;       /* seconds since the mount */
    struct store_counts store;
    struct chunk_cache_stats cache;
    struct prefetch_counts read_ahead;
    struct image_table_counts images;
    int read_only; /* no staging: commits and staging are left out */
    struct staging_counts staging;
    uint64_t staged_bytes; /* disk used by cache_dir/staging/ now */
};

/* The JSON text of s (malloc'd, ending in a newline); pretty: indented, else one line. 0 or
 * -ENOMEM. */
int stats_json(const struct fs_stats *s, int pretty, char **out);

/* Bytes of disk the files in dir use (sparse staged files count what they hold); 0 when dir
 * cannot be read. */
uint64_t stats_dir_bytes(const char *dir);

#endif
