/* pfor: see include/h5osfs/util/pfor.h. */
#include "h5osfs/util/pfor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define PFOR_THREADS_MAX 64

struct pfor_run {
    size_t n;
    _Atomic size_t next;
    void (*fn)(void *ctx, size_t i);
    void *ctx;
};

static void *pfor_worker(void *arg)
{
    struct pfor_run *run = arg;
    for (size_t i; (i = atomic_fetch_add(&run->next, 1)) < run->n;)
        run->fn(run->ctx, i);
    return NULL;
}

void pfor(size_t n, unsigned threads, void (*fn)(void *ctx, size_t i), void *ctx)
{
    struct pfor_run run = { .n = n, .fn = fn, .ctx = ctx };
    pthread_t tids[PFOR_THREADS_MAX];
    size_t started = 0;
    if (threads > PFOR_THREADS_MAX)
        threads = PFOR_THREADS_MAX;
    while (started + 1 < threads && started + 1 < n &&
           pthread_create(&tids[started], NULL, pfor_worker, &run) == 0)
        started++;
    pfor_worker(&run);
    for (size_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
}
