/* staging_int.h: what the files of the staging table share: the table, its entries, and the
 * steps one file takes for another (staging.c the table, staging_io.c the bytes,
 * staging_commit.c the commit, staging_walk.c the walks, staging_recover.c the recovery). */
#ifndef H5OSFS_STAGING_INT_H
#define H5OSFS_STAGING_INT_H

#include <pthread.h>
#include <stdint.h>

#include "h5osfs/staging/staging.h"
#include "overlay.h"

/* Lock order: the table's lock may be taken while holding an entry's, never the reverse
 * (except on a new entry nobody else can have locked yet). */
struct staged {
    pthread_mutex_t lock; /* serialises its writes, truncates, commits and record */
    unsigned refs;        /* guarded by the table's lock, as are the next five */
    unsigned users;       /* opens (staging_open) whose staging_close has not come */
    int detached;         /* left the table at its last user's close (staging_close) */
    struct staged *next_detached, *prev_detached; /* the table's list of detached entries */
    char *path;                                   /* the key in the table */
    char root[SCHEMA_ID_BUF]; /* the root it edits, for the collector's question */
    int fd;
    int broken;                    /* -errno: the entry could not be prepared */
    int fill_pending;              /* r+: the domain's file is staged at the first use, so that
                                   an open(O_TRUNC) (an open, then a truncate to 0, since the
                                   kernel sends them apart) never stages it */
    struct overlay *overlay;       /* r+: the version it started as, and its unwritten chunks */
    char base_root[SCHEMA_ID_BUF]; /* that version's root (guarded like root) */
    uint64_t size;
    int dirty;     /* changed since the last commit, and journaled so */
    int torn;      /* -errno: a write or truncate of the staged file failed, so
                                   it lacks bytes its writer wrote: never committed, and its
                                   record is gone (a crash leaves nothing to recover) */
    int gone;      /* removed (unlink, rename over): out of the table, its bytes
                                   freed; its handles' reads and writes fail with ESTALE */
    int rejected;  /* the last commit found no HDF5 file, nothing changed since */
    int lost;      /* a commit lost to another writer's change of the domain
                                   (ESTALE): never committed; at the last close its bytes,
                                   whole, go to rejected/ */
    int committed; /* a commit succeeded: a domain exists behind it */
    int shared;    /* the staged file is also an object of the domain (a linked commit made
                      it one, store_put_new_file): copied before any change */
    double mtime, ctime;
    struct journal_rec rec; /* rec.domain is the entry's path */
};

struct staging {
    pthread_mutex_t lock; /* guards the map, every refs, and counts */
    struct staging_counts counts;
    struct strmap *by_path;
    size_t finishing;        /* left the map, their last commit and cleanup under way */
    struct staged *detached; /* entries staging_close took off their path, not yet released:
                                their bases' objects are still read (staging_root_in_use) */
    struct commit_ctx commit;
    struct staging_hooks hooks;
};

/* Under the entry's lock: its overlay's clean ranges into its journal record. 0 or -errno. */
int staging_save_overlay(struct staging *t, struct staged *s);

/* A new open joins the existing entry s, emptied first with truncate. 0 or -errno. */
int staging_join_entry(struct staging *t, struct staged *s, int truncate);

/* Last release, under the entry's lock: commit what is left, drop or keep the staged file. */
void staging_finish(struct staging *t, struct staged *s);

#endif
