/*
 * ingest_pool: the worker threads that encode chunks and put them. The queue holds at most two
 * jobs per worker, so the reader (the ingest thread, the only one that touches HDF5) waits
 * when the workers fall behind and memory stays at a few chunks per worker.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ingest/ingest_int.h"

#define JOBS_PER_WORKER 2

struct ingest_pool {
    struct ingest *g;
    pthread_mutex_t lock;
    pthread_cond_t changed;   /* a job queued or finished, or stopping */
    struct ingest_job *queue; /* ring of cap jobs */
    size_t cap, head, count;
    unsigned busy; /* jobs taken by workers and not finished */
    int error;     /* the first error: later jobs are dropped */
    int stopping;
    pthread_t *threads;
    unsigned n_threads;
};

/* An unchanged chunk: the store copies the base's object (a chunk deleted since reads as the
 * fill value, as it did through the base's file: nothing to copy, *copied stays 0). */
static int copy_job(struct ingest_pool *p, const struct ingest_job *job, int *copied)
{
    int rc = store_copy(p->g->cfg->store, job->copy_of, job->key);
    *copied = rc == 0;
    if (rc == -ENOENT)
        return 0;
    if (rc != 0)
        log_error("%s: %s: chunk %s could not be copied to %s (%s)", p->g->log_name, job->path,
                  job->copy_of, job->key, strerror(-rc));
    return ingest_store_error(rc);
}

static int run_job(struct ingest_pool *p, struct ingest_job *job, size_t *put_bytes, int *copied)
{
    if (job->copy_of[0])
        return copy_job(p, job, copied);
    unsigned char *enc = NULL;
    size_t enc_len = 0;
    const unsigned char *data = job->bytes;
    size_t len = job->len;
    char why[200];
    if (job->encode) {
        int rc = codec_encode(&job->spec, job->bytes, job->len, &enc, &enc_len, why, sizeof why);
        if (rc != 0) {
            log_error("%s: %s: chunk %s cannot be encoded: %s", p->g->log_name, job->path, job->key,
                      why);
            return rc == -ENOMEM ? -ENOMEM : -EIO;
        }
        data = enc;
        len = enc_len;
    }
    struct store *st = p->g->cfg->store;
    int rc = !data ? store_put_new_from_fd(st, job->key, job->src_fd, job->src_off, len)
                   : store_put_new(st, job->key, data, len);
    if (rc != 0)
        log_error("%s: %s: chunk %s could not be stored (%s)", p->g->log_name, job->path, job->key,
                  strerror(-rc));
    rc = ingest_store_error(rc);
    *put_bytes = len;
    free(enc);
    return rc;
}

static void *worker(void *arg)
{
    struct ingest_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->count == 0 && !p->stopping)
            pthread_cond_wait(&p->changed, &p->lock);
        if (p->count == 0)
            break;
        struct ingest_job job = p->queue[p->head];
        p->head = (p->head + 1) % p->cap;
        p->count--;
        p->busy++;
        int skip = p->error != 0;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
        size_t put = 0;
        int copied = 0;
        int rc = skip ? 0 : run_job(p, &job, &put, &copied);
        free(job.bytes);
        pthread_mutex_lock(&p->lock);
        p->busy--;
        if (rc != 0 && p->error == 0)
            p->error = rc;
        if (rc == 0 && !skip && job.copy_of[0]) {
            p->g->stats->chunks_copied += copied;
        } else if (rc == 0 && !skip) {
            p->g->stats->chunks_written++;
            p->g->stats->chunks_raw += job.raw ? 1 : 0;
            p->g->stats->bytes_written += put;
        }
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int ingest_pool_start(struct ingest *g, unsigned workers, struct ingest_pool **out)
{
    struct ingest_pool *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->g = g;
    p->cap = (size_t)workers * JOBS_PER_WORKER;
    p->queue = calloc(p->cap, sizeof *p->queue);
    p->threads = calloc(workers, sizeof *p->threads);
    if (!p->queue || !p->threads || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p->queue);
        free(p->threads);
        free(p);
        return -ENOMEM;
    }
    pthread_cond_init(&p->changed, NULL);
    for (; p->n_threads < workers; p->n_threads++)
        if (pthread_create(&p->threads[p->n_threads], NULL, worker, p) != 0)
            break;
    *out = p;
    if (p->n_threads == 0) {
        ingest_pool_stop(p);
        *out = NULL;
        return -EAGAIN;
    }
    return 0;
}

int ingest_pool_submit(struct ingest_pool *p, struct ingest_job *job)
{
    pthread_mutex_lock(&p->lock);
    while (p->count == p->cap && p->error == 0)
        pthread_cond_wait(&p->changed, &p->lock);
    int rc = p->error;
    if (rc == 0) {
        p->queue[(p->head + p->count) % p->cap] = *job;
        p->count++;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc != 0)
        free(job->bytes);
    job->bytes = NULL;
    return rc;
}

int ingest_pool_drain(struct ingest_pool *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->count > 0 || p->busy > 0)
        pthread_cond_wait(&p->changed, &p->lock);
    int rc = p->error;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int ingest_pool_stop(struct ingest_pool *p)
{
    if (!p)
        return 0;
    int rc = ingest_pool_drain(p);
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p->queue);
    free(p);
    return rc;
}

int ingest_store_error(int rc)
{
    return rc == 0 || rc == -ENOSPC || rc == -ENOMEM ? rc : -EIO;
}

int ingest_put_json(struct ingest *g, const char *key, const json_t *doc, const char *path)
{
    char *text = NULL;
    int rc = hjson_dumps(doc, &text);
    if (rc != 0) {
        log_error("%s: %s: JSON of %s cannot be written (%s)", g->log_name, path, key,
                  strerror(-rc));
        return rc == -ENOMEM ? -ENOMEM : -EIO;
    }
    size_t len = strlen(text);
    rc = store_put_new(g->cfg->store, key, text, len);
    free(text);
    if (rc != 0) {
        log_error("%s: %s: %s could not be stored (%s)", g->log_name, path, key, strerror(-rc));
        return ingest_store_error(rc);
    }
    g->stats->bytes_written += len;
    return 0;
}
