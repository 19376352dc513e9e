/*
 * gc: removes the objects of domains that no .domain.json names any more (deleted or replaced
 * domains), after a grace period, on a thread of its own. A root still in use by an open file
 * (the caller's in_use callback) is postponed. Deletion aborts the multipart uploads under
 * db/A-B/ (store_abort_uploads: what a daemon killed during an upload left), then lists
 * db/A-B/ and deletes every key (v2 roots only: v1 objects cannot be found by listing, as in
 * HSDS). A root whose listing, a delete or an abort failed is tried again a minute later,
 * three tries in all (at once under gc_drain).
 * A daemon stopped before the grace period ends, or a store that keeps failing, leaves objects
 * behind (unreachable garbage, never wrong data).
 */
#ifndef H5OSFS_GC_H
#define H5OSFS_GC_H

#include <signal.h>

#include "h5osfs/store.h"

struct gc;

typedef int (*gc_in_use_fn)(void *ctx, const char *root);

int gc_new(struct store *store, double grace, gc_in_use_fn in_use, void *ctx, struct gc **out);
/* Start the thread (after daemonising). 0 or -errno. */
int gc_start(struct gc *gc);
/* Stop the thread; roots still waiting are left in the bucket (logged). */
void gc_free(struct gc *gc);

/* Remove root's objects once grace seconds have passed. 0 or -ENOMEM. */
int gc_add(struct gc *gc, const char *root);
/* Remove every root queued now, ignoring the grace period (tests, unmount). */
void gc_drain(struct gc *gc);
/* gc_drain, given up as soon as *give_up is set (by a signal handler: a stop asked for while
 * the objects of an unmounted daemon are deleted); what is left stays in the bucket. */
void gc_drain_until(struct gc *gc, const volatile sig_atomic_t *give_up);

#endif
