/* prefetch: see include/h5osfs/cache/prefetch.h. Two bounded FIFOs served by a few threads. */
#include "h5osfs/cache/prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"

struct job {
    struct job *next;
    enum prefetch_kind kind;
    char *key;
    size_t size;
    chunk_load_fn load;
    void *ctx;
    void (*done)(void *ctx);
};

struct prefetcher {
    struct chunk_cache *cache;
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct fifo {
        struct job *head, *tail;
        size_t n;
    } q[2];             /* by enum prefetch_kind */
    unsigned spreading; /* workers loading a spread job */
    size_t queue_max;
    struct prefetch_counts counts; /* under lock */
    int stopping;
    pthread_t *threads;
    unsigned n_threads;
};

static void job_free(struct job *j)
{
    if (j->done)
        j->done(j->ctx);
    free(j->key);
    free(j);
}

static struct job *fifo_pop(struct fifo *f)
{
    struct job *j = f->head;
    if (j) {
        f->head = j->next;
        if (!f->head)
            f->tail = NULL;
        f->n--;
    }
    return j;
}

static void fifo_push(struct fifo *f, struct job *j)
{
    if (f->tail)
        f->tail->next = j;
    else
        f->head = j;
    f->tail = j;
    f->n++;
}

/* Spread jobs may take at most half the workers (at least one). */
static int may_spread(const struct prefetcher *p)
{
    return p->q[PREFETCH_SPREAD].head && p->spreading < (p->n_threads + 1) / 2;
}

/* The next job for a worker (locked): read-ahead first. */
static struct job *take_job(struct prefetcher *p)
{
    struct job *j = fifo_pop(&p->q[PREFETCH_AHEAD]);
    if (!j && may_spread(p)) {
        j = fifo_pop(&p->q[PREFETCH_SPREAD]);
        p->spreading++;
    }
    return j;
}

static struct job *next_job(struct prefetcher *p)
{
    pthread_mutex_lock(&p->lock);
    while (!p->q[PREFETCH_AHEAD].head && !may_spread(p) && !p->stopping)
        pthread_cond_wait(&p->work, &p->lock);
    struct job *j = p->stopping ? NULL : take_job(p);
    pthread_mutex_unlock(&p->lock);
    return j;
}

/* A spread job done frees its worker slot for the next one. */
static void end_spread(struct prefetcher *p)
{
    pthread_mutex_lock(&p->lock);
    p->spreading--;
    if (p->q[PREFETCH_SPREAD].head)
        pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
}

static void *worker(void *arg)
{
    struct prefetcher *p = arg;
    struct job *j;
    while ((j = next_job(p)) != NULL) {
        int spread = j->kind == PREFETCH_SPREAD;
        /* a failed load was logged; the reader will retry it */
        (void)chunk_cache_preload(p->cache, j->key, j->size, j->load, j->ctx, spread);
        job_free(j);
        if (spread)
            end_spread(p);
    }
    return NULL;
}

int prefetcher_new(struct chunk_cache *cache, unsigned workers, size_t queue_max,
                   struct prefetcher **out)
{
    struct prefetcher *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cache = cache;
    p->queue_max = queue_max;
    p->threads = calloc(workers ? workers : 1, sizeof *p->threads);
    if (!p->threads || pthread_mutex_init(&p->lock, NULL) != 0 ||
        pthread_cond_init(&p->work, NULL) != 0) {
        free(p->threads);
        free(p);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < workers; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0)
            break;
        p->n_threads++;
    }
    if (p->n_threads == 0 && workers > 0) {
        prefetcher_free(p);
        return -EAGAIN;
    }
    *out = p;
    return 0;
}

void prefetcher_free(struct prefetcher *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    for (int k = 0; k < 2; k++)
        for (struct job *j; (j = fifo_pop(&p->q[k])) != NULL;)
            job_free(j);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p);
}

void prefetcher_counts(struct prefetcher *p, struct prefetch_counts *out)
{
    *out = (struct prefetch_counts){ 0 };
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    *out = p->counts;
    pthread_mutex_unlock(&p->lock);
}

/* A reader that jumps back and forth queues the same chunks again and again; a chunk already
 * there costs one lookup here, not a job and a worker's wake-up. */
static int already_there(struct prefetcher *p, const char *key, void *ctx, void (*done)(void *ctx))
{
    if (!chunk_cache_has(p->cache, key))
        return 0;
    if (done)
        done(ctx);
    pthread_mutex_lock(&p->lock);
    p->counts.present++;
    pthread_mutex_unlock(&p->lock);
    return 1;
}

int prefetcher_add(struct prefetcher *p, enum prefetch_kind kind, const char *key, size_t size,
                   chunk_load_fn load, void *ctx, void (*done)(void *ctx))
{
    if (already_there(p, key, ctx, done))
        return 1;
    struct job *j = calloc(1, sizeof *j);
    char *k = strdup(key);
    if (!j || !k) {
        free(j);
        free(k);
        if (done)
            done(ctx);
        return -ENOMEM;
    }
    kind = kind == PREFETCH_SPREAD ? PREFETCH_SPREAD : PREFETCH_AHEAD;
    *j = (struct job){ NULL, kind, k, size, load, ctx, done };
    pthread_mutex_lock(&p->lock);
    /* guesses may fill half the queue, never the room read-ahead needs */
    int full = p->q[PREFETCH_AHEAD].n + p->q[PREFETCH_SPREAD].n >= p->queue_max || p->stopping ||
               (kind == PREFETCH_SPREAD && p->q[kind].n >= p->queue_max / 2);
    if (!full) {
        fifo_push(&p->q[kind], j);
        p->counts.queued++;
        p->counts.spread += (uint64_t)(kind == PREFETCH_SPREAD);
        pthread_cond_signal(&p->work);
    } else {
        p->counts.dropped++;
    }
    pthread_mutex_unlock(&p->lock);
    if (full) {
        job_free(j);
        return -EAGAIN;
    }
    return 0;
}
