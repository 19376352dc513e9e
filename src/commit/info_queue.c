/* info_queue: see include/h5osfs/commit/info.h. A FIFO of roots served by one thread. */
#include "h5osfs/commit/info.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"

struct info_item {
    struct info_item *next;
    char root[SCHEMA_ID_BUF];
};

struct info_queue {
    struct store *store;
    char *bucket;
    unsigned workers;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* an item came, or one was done, or stopping */
    struct info_item *head, *tail;
    char busy[SCHEMA_ID_BUF]; /* the root being summarised ("" when none) */
    int started, stopping;
    atomic_int abandon; /* set when a stop signal gives up: the summary under way stops too */
    pthread_t thread;
};

int info_queue_new(struct store *st, const char *bucket, unsigned workers, struct info_queue **out)
{
    struct info_queue *q = calloc(1, sizeof *q);
    if (!q || !(q->bucket = strdup(bucket ? bucket : ""))) {
        free(q);
        return -ENOMEM;
    }
    q->store = st;
    q->workers = workers;
    atomic_init(&q->abandon, 0);
    if (pthread_mutex_init(&q->lock, NULL) != 0) {
        free(q->bucket);
        free(q);
        return -ENOMEM;
    }
    if (pthread_cond_init(&q->wake, NULL) != 0) {
        pthread_mutex_destroy(&q->lock);
        free(q->bucket);
        free(q);
        return -ENOMEM;
    }
    *out = q;
    return 0;
}

/* Under the lock: the next root to summarise, or NULL once stopping with nothing left. */
static struct info_item *take_next(struct info_queue *q)
{
    while (!q->head && !q->stopping)
        pthread_cond_wait(&q->wake, &q->lock);
    struct info_item *it = q->head;
    if (it) {
        q->head = it->next;
        if (!q->head)
            q->tail = NULL;
        snprintf(q->busy, sizeof q->busy, "%s", it->root);
    }
    return it;
}

static void *info_thread(void *arg)
{
    struct info_queue *q = arg;
    pthread_mutex_lock(&q->lock);
    struct info_item *it;
    while ((it = take_next(q)) != NULL) {
        pthread_mutex_unlock(&q->lock);
        info_write(q->store, q->bucket, it->root, q->workers, &q->abandon);
        free(it);
        pthread_mutex_lock(&q->lock);
        q->busy[0] = '\0';
        pthread_cond_broadcast(&q->wake);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

/* Under the lock. 0 or -errno. */
static int start_locked(struct info_queue *q)
{
    if (q->started)
        return 0;
    int rc = pthread_create(&q->thread, NULL, info_thread, q);
    if (rc != 0)
        return -rc;
    q->started = 1;
    return 0;
}

void info_queue_add(struct info_queue *q, const char *root)
{
    struct info_item *it = calloc(1, sizeof *it);
    pthread_mutex_lock(&q->lock);
    int rc = !it ? -ENOMEM : q->stopping ? -ESHUTDOWN : start_locked(q);
    if (rc == 0) {
        snprintf(it->root, sizeof it->root, "%s", root);
        if (q->tail)
            q->tail->next = it;
        else
            q->head = it;
        q->tail = it;
        pthread_cond_broadcast(&q->wake);
    }
    pthread_mutex_unlock(&q->lock);
    if (rc == 0)
        return;
    free(it);
    info_write(q->store, q->bucket, root, q->workers, NULL); /* the caller waits, once */
}

int info_queue_has(struct info_queue *q, const char *root)
{
    pthread_mutex_lock(&q->lock);
    int found = strcmp(q->busy, root) == 0;
    for (const struct info_item *it = q->head; it && !found; it = it->next)
        found = strcmp(it->root, root) == 0;
    pthread_mutex_unlock(&q->lock);
    return found;
}

/* Under the lock: drop what waits, and abandon the summary being written. */
static void give_up_locked(struct info_queue *q)
{
    size_t n = 0;
    atomic_store(&q->abandon, 1);
    while (q->head) {
        struct info_item *it = q->head;
        q->head = it->next;
        free(it);
        n++;
    }
    q->tail = NULL;
    if (n)
        log_warn("stopping: %zu domains are left without a summary (.info.json)", n);
}

/* A signal handler cannot wake a condition wait: the flag is looked at every 100 ms. */
void info_queue_drain(struct info_queue *q, const volatile sig_atomic_t *give_up)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    while (q->started && (q->head || q->busy[0])) {
        if (give_up && *give_up) {
            give_up_locked(q);
            break;
        }
        struct timespec until = clock_wall_in_ms(100);
        pthread_cond_timedwait(&q->wake, &q->lock, &until);
    }
    q->stopping = 1;
    pthread_cond_broadcast(&q->wake);
    int started = q->started;
    q->started = 0;
    pthread_mutex_unlock(&q->lock);
    if (started)
        pthread_join(q->thread, NULL);
}

void info_queue_free(struct info_queue *q)
{
    if (!q)
        return;
    info_queue_drain(q, NULL);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->wake);
    free(q->bucket);
    free(q);
}
