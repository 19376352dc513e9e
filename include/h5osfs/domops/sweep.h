/*
 * sweep: collection of kept versions (issue 26; doc/versions.md §4.4 steps 2-4 and §5).
 *
 * A version left without a name (rm of its last name, versions_keep expiry) is "removing" in
 * its domain's list DIR/.versions/NAME/.h5osfs-versions. sweep_finish_removals finishes it
 * from what the bucket holds alone (a fresh cache_dir, another mount): it deletes the HSDS
 * domain objects that still name the version's root, queues the root db/V_n/ to the durable
 * collector (gc_add), and once db/V_n/ lists empty drops the entry from the list (the put_if
 * loop: concurrent list changes are re-applied, never lost).
 *
 * sweep_pool is the mark-and-sweep of one domain's pool db/P/c/<md5>: it marks every pool
 * object that the chunk tables of any listed version name (kept or removing), lists the pool,
 * reads the list again and marks versions added since, and deletes an object only when it is
 * unmarked and its LastModified is older than grace before the sweep began, checked again by
 * a HEAD right before its delete (a commit in flight rewrites the pool objects it reuses once
 * they are older than half the grace, versions.h). It deletes nothing when anything it must
 * read cannot be read: a malformed list entry, a kept version whose root lists empty, a chunk
 * table in which no pool URI can be found (a compressed table this code cannot read).
 *
 * The sweeper runs both on a thread of its own, per domain: removals are finished whenever
 * asked (sweeper_request), a sweep is owed once a version's entry is dropped and runs at most
 * once per interval per domain. A sweep owed is recorded (records.write) before the entry is
 * dropped and the record removed only when the sweep has finished, so that a daemon killed or
 * unmounted before that sweeps again at the next mount with that cache_dir (sweeper_resume).
 * Unmount (sweeper_free) finishes the removals asked for and stops a sweep between two deletes.
 *
 * Test hooks (H5OSFS_TEST_CRASH_AT): "collected" kills the daemon once a removed version's
 * root lists empty, right before its entry is dropped; "sweep" after the mark, before the pool
 * is listed and anything deleted.
 */
#ifndef H5OSFS_SWEEP_H
#define H5OSFS_SWEEP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

struct gc;

struct sweep_finish {
    char pool[SCHEMA_ID_BUF]; /* the list's pool ("" when there is no list) */
    size_t dropped;           /* entries dropped: their roots are gone */
    size_t waiting;           /* removing entries whose roots are still being deleted */
};

/* Called (may be NULL) right before entries are dropped: the sweep the drop makes due. 0 to go
 * on; else the entries stay removing (tried again later). */
typedef int (*sweep_owed_fn)(void *ctx, const char *pool, const char *domain);

/* Finish domain's removing entries as above. 0 (no list: nothing to do), or -errno (logged):
 * what is left is finished by a later call. */
int sweep_finish_removals(struct store *store, struct gc *gc, const char *domain,
                          sweep_owed_fn owed, void *owed_ctx, struct sweep_finish *out);

struct sweep_stats {
    uint64_t versions; /* list entries whose tables were read */
    uint64_t marked;   /* distinct pool objects they name */
    uint64_t pooled;   /* pool objects listed */
    uint64_t young;    /* unmarked but within the grace period: kept */
    uint64_t deleted;
};

/* One mark-and-sweep of domain's pool (objects older than grace seconds before it started may
 * go). stop (may be NULL) set: it stops between two deletes, -EINTR. 0; -ENOENT when domain has
 * no list (nothing deleted); -EPERM when the list's pool is not shown to be the domain's
 * (vpool.h: nothing deleted, logged); -EIO (logged: nothing more deleted). */
int sweep_pool(struct store *store, const char *domain, double grace, const atomic_int *stop,
               struct sweep_stats *stats);

/* ---- the background sweeper ---- */

struct sweeper_records {
    int (*write)(void *ctx, const char *pool, const char *domain, double t0);
    void (*remove)(void *ctx, const char *pool);
    void *ctx;
};

struct sweeper_config {
    struct store *store;
    struct gc *gc;   /* where removed versions' roots go */
    double grace;    /* -o versions_grace */
    double interval; /* -o versions_sweep_interval: one sweep per domain per interval */
    struct sweeper_records records; /* write NULL: sweeps owed are not kept across mounts */
};

struct sweeper;

int sweeper_new(const struct sweeper_config *cfg, struct sweeper **out);
/* Start the thread (after daemonising). 0 or -errno. */
int sweeper_start(struct sweeper *s);
/* Finish domain's removals soon (a name was removed, versions expired, a root is gone). */
void sweeper_request(struct sweeper *s, const char *domain);
/* The same, from a reader that saw a removing entry: at most once a minute per domain. */
void sweeper_hint(struct sweeper *s, const char *domain);
/* A sweep of domain's pool an earlier daemon recorded as owed: swept soon. */
void sweeper_resume(struct sweeper *s, const char *domain, const char *pool);
/* Wait until the removals asked for are finished as far as they can be now (their roots
 * queued to the collector): at unmount, before the collector drains. */
void sweeper_settle(struct sweeper *s);
/* Finish the removals asked for, stop any sweep (its record stays), join the thread. */
void sweeper_free(struct sweeper *s);

#endif
