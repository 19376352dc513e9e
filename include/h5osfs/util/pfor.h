/*
 * pfor: a loop whose iterations run on several threads at once, for blocking work such as
 * store requests (the image build fetches a domain's objects this way: an object store answers
 * many requests at once, and one at a time a domain of 500 datasets took seconds).
 */
#ifndef H5OSFS_PFOR_H
#define H5OSFS_PFOR_H

#include <stddef.h>

/* fn(ctx, i) for every i in [0, n), on up to threads threads (the caller's among them); returns
 * when every call has returned. Iterations must not depend on each other's order; results go
 * through ctx. Without threads to be had it runs them all in the caller. */
void pfor(size_t n, unsigned threads, void (*fn)(void *ctx, size_t i), void *ctx);

#endif
