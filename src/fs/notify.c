/* notify: see notify.h. */
#include "notify.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"

struct stale_name {
    struct stale_name *next;
    fuse_ino_t parent;
    char name[];
};

struct notifier {
    struct fuse_session *se;
    pthread_t thread;
    pthread_mutex_t lock; /* guards head, tail and stopping */
    pthread_cond_t more;
    pthread_cond_t sent;
    struct stale_name *head, *tail;
    uint64_t queued, done; /* counts of names queued and sent */
    int stopping;
};

static struct stale_name *next_name(struct notifier *n)
{
    pthread_mutex_lock(&n->lock);
    while (!n->head && !n->stopping)
        pthread_cond_wait(&n->more, &n->lock);
    struct stale_name *s = n->head;
    if (s) {
        n->head = s->next;
        if (!n->head)
            n->tail = NULL;
    }
    pthread_mutex_unlock(&n->lock);
    return s;
}

static void *notify_loop(void *arg)
{
    struct notifier *n = arg;
    struct stale_name *s;
    while ((s = next_name(n)) != NULL) {
        int rc = fuse_lowlevel_notify_inval_entry(n->se, s->parent, s->name, strlen(s->name));
        /* ENOENT: the kernel had not cached the name; ENOTCONN: unmounted meanwhile */
        if (rc != 0 && rc != -ENOENT && rc != -ENOTCONN)
            log_debug("kernel entry %s not invalidated: %s", s->name, strerror(-rc));
        free(s);
        pthread_mutex_lock(&n->lock);
        n->done++;
        pthread_cond_broadcast(&n->sent);
        pthread_mutex_unlock(&n->lock);
    }
    return NULL;
}

int notifier_start(struct fuse_session *se, struct notifier **out)
{
    struct notifier *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    n->se = se;
    pthread_mutex_init(&n->lock, NULL);
    pthread_cond_init(&n->more, NULL);
    pthread_cond_init(&n->sent, NULL);
    int rc = pthread_create(&n->thread, NULL, notify_loop, n);
    if (rc != 0) {
        pthread_cond_destroy(&n->sent);
        pthread_cond_destroy(&n->more);
        pthread_mutex_destroy(&n->lock);
        free(n);
        return -rc;
    }
    *out = n;
    return 0;
}

void notifier_entry(struct notifier *n, fuse_ino_t parent, const char *name)
{
    size_t len = strlen(name);
    struct stale_name *s = n ? malloc(sizeof *s + len + 1) : NULL;
    if (!s)
        return;
    s->next = NULL;
    s->parent = parent;
    memcpy(s->name, name, len + 1);
    pthread_mutex_lock(&n->lock);
    if (n->tail)
        n->tail->next = s;
    else
        n->head = s;
    n->tail = s;
    n->queued++;
    pthread_cond_signal(&n->more);
    pthread_mutex_unlock(&n->lock);
}

void notifier_drain(struct notifier *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    uint64_t want = n->queued;
    while (n->done < want && !n->stopping)
        pthread_cond_wait(&n->sent, &n->lock);
    pthread_mutex_unlock(&n->lock);
}

void notifier_stop(struct notifier *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    n->stopping = 1;
    pthread_cond_signal(&n->more);
    pthread_mutex_unlock(&n->lock);
    pthread_join(n->thread, NULL);
    pthread_cond_destroy(&n->sent);
    pthread_cond_destroy(&n->more);
    pthread_mutex_destroy(&n->lock);
    free(n);
}
