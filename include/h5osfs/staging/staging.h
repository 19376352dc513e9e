/*
 * staging: domains open for writing, each a local file in the cache directory (journal.h)
 * that the handles of that path share. Writes, reads and truncates go to that file; a flush or
 * fsync of a handle that changed it commits it (commit.h); the entry goes away with its last
 * handle. A commit that fails keeps the staged bytes and the journal record: a later flush, or
 * the next mount, tries again; bytes that are not HDF5 are moved to rejected/ at the last close.
 * A write or truncate that the staged file cannot take (ENOSPC, EDQUOT, EIO: it is then torn,
 * missing bytes its writer wrote) is never committed: its record goes at once, later writes and
 * flushes fail with that error, and its staged bytes are dropped at the last close (a full disk
 * is freed, not kept full in rejected/); a truncation to 0 starts it afresh.
 *
 * The writer sees its file from creation on (stat, readdir, reads of its handles); the bucket
 * and every other mount see nothing until the commit's .domain.json put. Thread-safe.
 */
#ifndef H5OSFS_STAGING_H
#define H5OSFS_STAGING_H

#include <stdint.h>
#include <sys/types.h>

#include "h5osfs/cache/cache.h"
#include "h5osfs/commit/commit.h"
#include "h5osfs/image/image.h"
#include "h5osfs/ns/ns.h"

struct staging;
struct staged;

/* What staging asks of the parts above it, which the stack wires (src/main/stack.c; ctx is
 * theirs). */
struct staging_hooks {
    /* The file of the domain at path whose root is root (a new reference): r+ starts from it. */
    int (*base)(void *ctx, const char *path, const char *root, struct image **img);
    struct chunk_cache *cache; /* reads of its chunks go through it */
    /* path's domain changed (a commit succeeded): forget what was built from it. */
    void (*committed)(void *ctx, const char *path);
    void *ctx;
};

int staging_new(const struct commit_ctx *commit, const struct staging_hooks *hooks,
                struct staging **out);
/* Every entry must be released before. */
void staging_free(struct staging *t);

/*
 * The staged entry of path for a new handle (a reference: staging_release it). An existing
 * entry is shared (with truncate it is emptied first, as staging_empty does). Otherwise one is
 * made: with truncate (O_TRUNC, or a domain that does not exist yet: root NULL) it starts
 * empty and replaces the domain; else it is a copy of the domain whose root is root, made at
 * its first read, write or truncate (so an open that is then truncated to 0 copies nothing),
 * and is committed in place.
 */
int staging_open(struct staging *t, const char *path, const char *root, int truncate,
                 struct staged **out);
/*
 * One open of the entry (staging_open) had its last close. When no open is left, the entry
 * leaves the table at once, though references remain (the kernel's release of a closed file
 * comes after close() returned, and may be held back by a process that inherited the
 * descriptor): from then on the path is what the bucket has, as after the release:
 * staging_find and staging_children no longer see it, a new open stages afresh. The entry is
 * finished (staging_release) at its last reference, as before; the writes its handles may
 * still send go to it and are committed under its path. Each open is closed at most once.
 */
void staging_close(struct staging *t, struct staged *s);
/*
 * An open of s's path again, by a handle of s that had its last close (a process that
 * inherited the descriptor writes through it: it still names the file, as on any file system):
 * *out is the entry on the table for that path, joined as staging_open joins it (a new
 * reference and open), which is s itself when s had left the path and none took it meanwhile
 * (s is then back on its path, with what it holds). Which entry a write goes to thus never
 * depends on when the kernel's release comes: a writer that opened the path in between shares
 * its file with the handle, and one commit holds both their writes. An s whose change can no
 * longer be stored (lost to another writer: ESTALE; torn) stays off the path, so that no new
 * writer joins it: *out is s, its commits fail as before. -ESTALE when s was removed
 * (staging_unlink).
 */
int staging_reopen(struct staging *t, struct staged *s, struct staged **out);
/* The entry of path if one exists (a reference), else NULL. */
struct staged *staging_find(struct staging *t, const char *path);
/* Drop a reference; the last one of an entry commits what is still uncommitted and removes
 * the entry (see above). */
void staging_release(struct staging *t, struct staged *s);

ssize_t staging_read(struct staging *t, struct staged *s, void *buf, size_t len, uint64_t off);
ssize_t staging_write(struct staging *t, struct staged *s, const void *buf, size_t len,
                      uint64_t off);
int staging_truncate(struct staging *t, struct staged *s, uint64_t size);
/* The truncate of an open(O_TRUNC): empty, as a new entry starts, and no change by itself (an
 * empty file is no HDF5 file: nothing is committed unless something is written). What was
 * staged and not committed is dropped: its bytes are freed, its record goes, a torn entry is
 * whole again. */
int staging_empty(struct staging *t, struct staged *s);
/* Commit if anything changed since the last commit. 0 or -errno (see commit_staged); a torn
 * entry's error, committing nothing. */
int staging_commit(struct staging *t, struct staged *s);

/* Commits since the table was made: done, failed, lost to another writer (ESTALE); and the
 * paths staged now. */
struct staging_counts {
    uint64_t commits, failures, lost, open;
};
void staging_counts(struct staging *t, struct staging_counts *out);

/* What a staged entry looks like in the namespace: a domain of the staged size. */
void staging_info(struct staged *s, struct ns_info *info);
/* 1 if the entry has never been committed (no domain in the bucket is behind it). */
int staging_is_new(struct staged *s);
/* 1 if the entry's size is its file's: not an r+ whose domain's file is still to be staged
 * (it is staged at its first read or write, and is the base version's size until then). */
int staging_size_known(struct staged *s);

/* Names of staged entries directly inside directory dir (for readdir); *names is an array of
 * malloc'd strings (free each, then the array). */
int staging_children(struct staging *t, const char *dir, char ***names, size_t *n);
/*
 * Remove path, and with it every change staged there: the entry on the table and every entry
 * that a last close took off the path but whose release has not come (staging_close; its
 * commit may still be tried at the release, and a child that inherited a descriptor may write
 * through it), and the entries below path. remove(ctx, path, fresh) decides and does what the
 * bucket needs: fresh is 1 when path is a file never committed (no domain behind it: nothing
 * to delete, only rights to check; asked of the entry on the table, else of the latest
 * detached one), else 0; it runs under the locks of all those entries, so no commit of any
 * comes in between. When it returns 0 they are all discarded: out of the table, their staged
 * bytes freed at once (even while handles are open), their journal records gone, and nothing
 * of them is ever committed; their handles' reads, writes and truncates fail with ESTALE,
 * their flushes and closes succeed. Returns remove's answer.
 */
int staging_unlink(struct staging *t, const char *path,
                   int (*remove)(void *ctx, const char *path, int fresh), void *ctx);
/* The same for the folder path (remove is asked with fresh 0): -ENOTEMPTY without asking
 * while a file below it is open for writing (staging_children lists it); else the entries
 * below it that their last close detached are discarded when remove succeeds, so that no
 * release stores a file in a folder that is gone. */
int staging_rmdir(struct staging *t, const char *path,
                  int (*remove)(void *ctx, const char *path, int fresh), void *ctx);
/* Move the entry of from to to after a rename of its domain; after a rename of a folder,
 * every entry below it too (to + the rest of its path), as the files open there move with it. */
void staging_rename(struct staging *t, const char *from, const char *to);
/* At mount, before any request: staged files no record names are deleted (journal_sweep:
 * torn files a crash left), then what the journal holds is finished, undone and retried
 * (commit.h);
 * an r+ change's staged file is matched with its base version again (overlay.h). Returns the
 * number of records left for a later mount. */
size_t staging_recover(struct staging *t);
/* 1 if an open staged entry edits the domain whose root is root (the collector waits). */
int staging_root_in_use(struct staging *t, const char *root);

#endif
