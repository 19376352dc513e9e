/*
 * prefetch: load chunks into the cache ahead of a sequential reader, on worker threads.
 *
 * A job is a chunk the reader will probably want next; a worker loads it into the cache unless
 * it is there or being loaded by then (chunk_cache_preload). A chunk already there when it is
 * added is not queued at all. Jobs come in two kinds: read-ahead (where the reader is going)
 * and spread (a guess at where it may jump to: the chunks around a miss). Workers take
 * read-ahead first, and at most half of them load spread jobs at once, so a guess never keeps
 * the reader's next chunk waiting for a worker.
 * The queue is bounded: when it is full new jobs are dropped, never waited for. Thread-safe.
 */
#ifndef H5OSFS_PREFETCH_H
#define H5OSFS_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/cache/cache.h"

struct prefetcher;

/* workers threads, at most queue_max jobs waiting. */
int prefetcher_new(struct chunk_cache *cache, unsigned workers, size_t queue_max,
                   struct prefetcher **out);
/* Stops the workers (waiting jobs are dropped, their ctx released with done). */
void prefetcher_free(struct prefetcher *p);

enum prefetch_kind { PREFETCH_AHEAD, PREFETCH_SPREAD };

/* Queue a load of key (size bytes) with load(ctx); done(ctx) is called when the job is over
 * or dropped. 0 (queued), 1 (the chunk is already loaded or loading: done was called), or
 * -EAGAIN when the queue is full (done was called), -ENOMEM. */
int prefetcher_add(struct prefetcher *p, enum prefetch_kind kind, const char *key, size_t size,
                   chunk_load_fn load, void *ctx, void (*done)(void *ctx));

/* Jobs queued (spread: those of them that are spread jobs), jobs dropped (queue full or
 * stopping), and chunks not queued because they were already loaded or loading, since the
 * start; p may be NULL. */
struct prefetch_counts {
    uint64_t queued, spread, dropped, present;
};
void prefetcher_counts(struct prefetcher *p, struct prefetch_counts *out);

#endif
