/* journal_int.h: what journal.c (the commits' records, staged files, the lock) shares with
 * journal_gc.c (the collector's and the pool sweeps' records). */
#ifndef H5OSFS_COMMIT_JOURNAL_INT_H
#define H5OSFS_COMMIT_JOURNAL_INT_H

#include <stddef.h>

#include "h5osfs/commit/journal.h"
#include "h5osfs/schema/schema.h"

#define JOURNAL_REC_MAX (64u << 10)
#define GC_PREFIX "gc." /* the collector's records: gc.<bucket tag>.<root>.json */
#define GC_SUFFIX ".json"
#define SWEEP_PREFIX "sweep." /* pool sweeps owed: sweep.<bucket tag>.<pool>.json */

struct journal {
    char *root;                     /* the cache directory */
    char *bucket;                   /* the identity every record staged here names */
    int staging, records, rejected; /* directory fds */
};

/* text as file name of directory dir, replaced atomically and durably. 0 or -errno. */
int journal_replace_file(int dir, const char *tmp, const char *final, const char *text);

/* Only what journal_write writes: "" or a root group id (v2 by the rotation rule, v1 by
 * class). Recovery hands these roots to gc, which deletes everything below db/A-B/: a dataset
 * id there is its live domain's whole tree, and a chunk id did not even fit. 0 or -EINVAL. */
int journal_copy_root(char out[SCHEMA_ID_BUF], const char *id);

/* The files of the records directory that wanted() takes, each read by read_one() into the
 * next element (size bytes) of a growing array; one that cannot be read is logged as what and
 * left where it is. On failure (-errno, -ENOMEM) nothing is returned: free_all frees what was
 * read. */
struct file_list {
    int (*wanted)(const struct journal *j, const char *name);
    int (*read_one)(struct journal *j, const char *name, void *elem);
    void (*free_all)(void *elems, size_t n);
    size_t size;
    const char *what;
};
int journal_list_files(struct journal *j, const struct file_list *how, void **out, size_t *n);

#endif
