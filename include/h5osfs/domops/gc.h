/*
 * gc: removes the objects of domains that no .domain.json names any more (deleted or replaced
 * domains), after a grace period, on a thread of its own. A root still in use by an open file
 * (the caller's in_use callback) is postponed. Deletion aborts the multipart uploads under
 * db/A-B/ (store_abort_uploads: what a daemon killed during an upload left), then lists
 * db/A-B/ and deletes every key (v2 roots only: v1 objects cannot be found by listing, as in
 * HSDS). A root whose listing, a delete or an abort failed is tried again a minute later,
 * three tries in all (at once under gc_drain).
 * With records (gc_use_records: the cache_dir's journal), the queue survives the daemon: a root is recorded in the
 * cache_dir before it is queued, its record dropped only when db/A-B/ lists empty, and the
 * next mount of the bucket with that cache_dir queues it again (gc_requeue). Without one (or
 * with another cache_dir), a daemon stopped before the grace period ends leaves objects behind
 * (unreachable garbage, never wrong data); so does a store that keeps failing.
 * Before deleting, the root's domain is read: a root its .domain.json names is never deleted.
 */
#ifndef H5OSFS_GC_H
#define H5OSFS_GC_H

#include <signal.h>

#include "h5osfs/store/store.h"

struct gc;

typedef int (*gc_in_use_fn)(void *ctx, const char *root);

int gc_new(struct store *store, double grace, gc_in_use_fn in_use, void *ctx, struct gc **out);
/* Start the thread (after daemonising). 0 or -errno. */
int gc_start(struct gc *gc);
/* Stop the thread; roots still waiting are left in the bucket (logged). */
void gc_free(struct gc *gc);

/* Where the queue is made durable (the stack gives the journal's journal_gc_*: this layer
 * cannot call it). write records root before it is queued (0 or -errno); remove drops the
 * record once root's prefix lists empty, or once its domain is found to name it. */
struct gc_records {
    int (*write)(void *ctx, const char *root, const char *domain, const char *replaced_by);
    void (*remove)(void *ctx, const char *root);
    void *ctx;
};
/* Before gc_start; without it (write NULL) the queue is in memory only. */
void gc_use_records(struct gc *gc, const struct gc_records *records);
/* Remove root's objects once grace seconds have passed; domain: the domain it was a version
 * of, whose .domain.json is read right before the deletion (a root it names is never deleted);
 * replaced_by: the root that replaced it ("" or NULL when the domain was deleted), for the
 * record. A root queued already stays as it is. 0 or -ENOMEM. */
int gc_add(struct gc *gc, const char *root, const char *domain, const char *replaced_by);
/* At mount, before gc_start: queue again a root whose record an earlier daemon of this
 * bucket left (killed within the grace period or during a collection, or stopped before it
 * finished); the record is not written again. 0 or -ENOMEM. */
int gc_requeue(struct gc *gc, const char *root, const char *domain);
/* Told (on the collector's thread, under its lock: fn must not call gc_*) of each root whose
 * objects are all gone; domain as given to gc_add (NULL: none). The version collector
 * (sweep.h) learns here that a removed version's root is gone. fn NULL: nobody is told. */
typedef void (*gc_gone_fn)(void *ctx, const char *root, const char *domain);
void gc_on_gone(struct gc *gc, gc_gone_fn fn, void *ctx);
/* Remove every root queued now, ignoring the grace period (tests, unmount). */
void gc_drain(struct gc *gc);
/* gc_drain, given up as soon as *give_up is set (by a signal handler: a stop asked for while
 * the objects of an unmounted daemon are deleted); what is left stays in the bucket. */
void gc_drain_until(struct gc *gc, const volatile sig_atomic_t *give_up);

#endif
