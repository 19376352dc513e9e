/*
 * journal: the staging area's records on local disk, so that no staged byte is lost and every
 * commit can be finished or undone after a crash.
 *
 * Under the cache directory (created 0700 when missing):
 *   staging/<name>.h5    the staged HDF5 file of a domain being written
 *   staging/<name>.h5.base  an r+ change: which ranges of it are still the base's chunks
 *   journal/<name>.json  its record: bucket, domain path, mode, state and the roots involved
 *   rejected/<name>.h5   staged bytes that cannot be stored (not an HDF5 file, or a change
 *                        that lost to another writer's commit), kept for the user
 * A record is replaced atomically (temporary file, fsync, rename, fsync of the directory), so
 * after a crash each record is either the old or the new one. Thread-safe: records of
 * different names may be written at once; one name is written by one thread at a time.
 *
 * A record names the bucket it was staged for (the identity the stack gives journal_open: the
 * directory's real path, or "s3:ENDPOINT/bucket/prefix"): a cache directory used by mounts of
 * different buckets, one after the other, holds records of each, and recovery commits only the
 * mounted bucket's (journal_rec_is_ours).
 */
#ifndef H5OSFS_JOURNAL_H
#define H5OSFS_JOURNAL_H

#include "h5osfs/schema/schema.h"

#define JOURNAL_NAME_LEN 16

/* How the staged file becomes the domain. */
enum journal_mode {
    JOURNAL_NEW,     /* no domain there yet: a new root and a new .domain.json */
    JOURNAL_REPLACE, /* O_TRUNC over a domain: a new root, then the .domain.json swap */
    JOURNAL_CHANGE,  /* r+ of a domain: a new root made from the changed copy of base_root
                           (staging/<name>.h5.base says which chunk ranges are still base's) */
};

enum journal_state {
    JOURNAL_CLEAN,      /* everything staged is committed (or nothing was written yet) */
    JOURNAL_DIRTY,      /* staged bytes not committed yet: commit them at restart */
    JOURNAL_COMMITTING, /* a commit was under way: finish or undo it at restart */
};

struct journal_rec {
    char name[JOURNAL_NAME_LEN + 1];
    char *bucket; /* the bucket's identity (owned); NULL in a record
                                         * written before records named their bucket */
    char *domain; /* "/home/u/x.h5" (owned) */
    enum journal_mode mode;
    enum journal_state state;
    char base_root[SCHEMA_ID_BUF]; /* the domain's root when staging began ("" if new) */
    char new_root[SCHEMA_ID_BUF];  /* COMMITTING, NEW/REPLACE: the root being written */
    /* COMMITTING with versions: the version root being written, recorded before its first
     * object ("" none), so that a crash before it is listed leaves no root named by nothing */
    char vroot[SCHEMA_ID_BUF];
};

struct journal;

/* The journal of cache_dir for the bucket whose identity is bucket (copied; every record
 * staged names it). 0 or -errno. */
int journal_open(const char *cache_dir, const char *bucket, struct journal **out);
void journal_close(struct journal *j);

/* A new record (state CLEAN, not yet written) and its empty staged file, opened O_RDWR: *fd.
 * 0 or -errno. */
int journal_stage(struct journal *j, const char *domain, enum journal_mode mode,
                  const char *base_root, struct journal_rec *rec, int *fd);
/* The staged file made private again when it became an object of the domain (a hard link, see
 * commit_staged's file_kept): a new file under the same name holding the first keep bytes of
 * fd, copied in the kernel; the object keeps the old file. *new_fd is the new file, opened
 * O_RDWR (the caller closes fd). 0 or -errno (logged), and then nothing changed. */
int journal_restage(struct journal *j, const struct journal_rec *rec, int fd, uint64_t keep,
                    int *new_fd);
/* Write (or replace) the record durably. 0 or -errno (logged). */
int journal_write(struct journal *j, const struct journal_rec *rec);
/* An r+ change's base ranges (overlay.h): staging/<name>.h5.base, replaced durably; read back
 * at recovery (*text malloc'd; -ENOENT when there is none). 0 or -errno (logged when written). */
int journal_write_base(struct journal *j, const struct journal_rec *rec, const char *text);
int journal_read_base(struct journal *j, const struct journal_rec *rec, char **text);
/* The staged file's path (malloc'd) or NULL. */
char *journal_staged_path(const struct journal *j, const struct journal_rec *rec);
/* Remove the record and its staged file: the staged bytes are committed or abandoned. */
void journal_remove(struct journal *j, const struct journal_rec *rec);
/* Remove the record alone (no space is needed for that): the staged file stays for its open
 * handles but is never recovered. journal_write makes the record again. */
void journal_forget(struct journal *j, const struct journal_rec *rec);
/* At mount, before any record is written: remove the staged files (and base ranges) whose
 * record is gone, and records' temporaries a crash left: the space they hold would never be
 * freed otherwise. Returns how many went (logged once). */
size_t journal_sweep(struct journal *j);
/* Move the staged file to rejected/ and remove the record; *kept (malloc'd) says where. */
int journal_reject(struct journal *j, const struct journal_rec *rec, char **kept);
/* Every record on disk (for recovery at mount); unreadable records are logged and skipped. */
int journal_list(struct journal *j, struct journal_rec **recs, size_t *n);
/* 1 when rec was staged for this journal's bucket; 0 for another bucket's record and for one
 * that names none (its bucket is unknown). */
int journal_rec_is_ours(const struct journal *j, const struct journal_rec *rec);
void journal_rec_free(struct journal_rec *rec);
void journal_recs_free(struct journal_rec *recs, size_t n);

/*
 * The collector's records (gc.h): journal/gc.<B>.<root>.json, one per root waiting to be
 * collected, B a hash of the bucket's identity (two buckets on one cache_dir may hold the same
 * root id: a copied bucket). It says which domain the root was the version of and which root
 * replaced it ("" for a deleted domain). Written durably (as journal_write) before the root
 * is queued; removed once the root's prefix lists empty. A crash in between leaves the record,
 * and the next mount of the bucket with this cache_dir queues the root again.
 */
struct journal_gc_rec {
    char root[SCHEMA_ID_BUF];
    char *domain; /* owned; "/home/u/x.h5" */
    char replaced_by[SCHEMA_ID_BUF];
};

/* Write (or replace) root's record. 0 or -errno (logged). Not for two threads at once. */
int journal_gc_write(struct journal *j, const char *root, const char *domain,
                     const char *replaced_by);
/* Remove root's record (none there: nothing to do). */
void journal_gc_remove(struct journal *j, const char *root);
/* Every record of this journal's bucket (other buckets' stay; unreadable ones are logged and
 * left). 0 or -errno. */
int journal_gc_list(struct journal *j, struct journal_gc_rec **recs, size_t *n);
void journal_gc_recs_free(struct journal_gc_rec *recs, size_t n);

/*
 * The pool sweeps' records (sweep.h): journal/sweep.<B>.<pool>.json, one per domain pool whose
 * mark-and-sweep is owed (doc/versions.md §5): written durably before the sweep starts (or as
 * soon as a collected version makes one due), removed once it has finished. A daemon stopped
 * or killed in between leaves it, and the next mount of the bucket with this cache_dir sweeps
 * again from the start (a sweep is idempotent).
 */
struct journal_sweep_rec {
    char pool[SCHEMA_ID_BUF];
    char *domain; /* owned; "/home/u/x.h5" */
    double t0;    /* when it was owed (informative: a restarted sweep takes its own) */
};

int journal_pool_sweep_write(struct journal *j, const char *pool, const char *domain, double t0);
void journal_pool_sweep_remove(struct journal *j, const char *pool);
int journal_pool_sweep_list(struct journal *j, struct journal_sweep_rec **recs, size_t *n);
void journal_sweep_recs_free(struct journal_sweep_rec *recs, size_t n);

/*
 * A cache directory belongs to one daemon: a second one's recovery would commit the first
 * one's open files. journal_lock creates cache_dir (0700) when missing and takes an exclusive
 * flock on its file "lock" without waiting; the lock lasts while *fd is open in any process (a
 * fork's child keeps it after the parent exits) and ends with the last of them, also at a
 * crash. 0; -EBUSY when another process holds it (*holder: the pid that process wrote, 0 when
 * unknown); or -errno. Logs nothing: the caller says why it wanted the directory.
 */
int journal_lock(const char *cache_dir, int *fd, long *holder);
/* Write this process's pid into the lock file (again after a fork): the message a refused
 * daemon prints names it. 0 or -errno. */
int journal_lock_set_owner(int fd);

#endif
