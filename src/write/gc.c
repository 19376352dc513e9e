/* gc: see include/h5osfs/gc.h. A list of (root, not before) served by one thread. */
#include "h5osfs/gc.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5osfs/clock.h"
#include "h5osfs/log.h"
#include "h5osfs/schema.h"

#define GC_POSTPONE 10.0    /* seconds before a root in use is looked at again */
#define GC_RETRY_AFTER 60.0 /* seconds before a root whose removal failed is tried again */
#define GC_TRIES 3          /* then its leftovers stay (logged): the store keeps failing */

struct gc_item {
    struct gc_item *next;
    double not_before;
    int tries;
    char root[SCHEMA_ID_BUF];
};

struct gc {
    struct store *store;
    double grace;
    gc_in_use_fn in_use;
    void *ctx;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct gc_item *items;
    int stopping, started, draining;
    atomic_int abandon; /* stop within the root being deleted, too */
    pthread_t thread;
};

int gc_new(struct store *store, double grace, gc_in_use_fn in_use, void *ctx, struct gc **out)
{
    struct gc *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->store = store;
    g->grace = grace;
    g->in_use = in_use;
    g->ctx = ctx;
    if (pthread_mutex_init(&g->lock, NULL) != 0 || pthread_cond_init(&g->wake, NULL) != 0) {
        free(g);
        return -ENOMEM;
    }
    *out = g;
    return 0;
}

/* The multipart uploads under root's prefix that a daemon killed during them left (S3 keeps
 * and bills their parts): aborted first, so that none completes into an object after the
 * objects are gone. 0, or -EIO (logged) when some are left for a later try. */
static int abort_root_uploads(struct gc *g, const char *prefix, const char *root)
{
    size_t aborted = 0;
    int rc = store_abort_uploads(g->store, prefix, &aborted);
    if (aborted)
        log_info("gc: aborted %zu unfinished multipart uploads of root %s", aborted, root);
    if (rc != 0)
        log_error("gc: multipart uploads under %s (root %s) could not all be aborted: %s", prefix,
                  root, strerror(-rc));
    return rc != 0 ? -EIO : 0;
}

/* Delete every key of root's domain: db/A-B/ holds all of them (spec §2.1), the uploads of
 * parts under it too. 0, or -EIO when something is left that a later try may remove
 * (logged). */
static int remove_root(struct gc *g, const char *root)
{
    char prefix[64];
    struct store_list list = { 0 };
    if (schema_id_version(root) != 2) {
        log_warn("gc: objects of v1 root %s cannot be listed; left in the bucket", root);
        return 0;
    }
    snprintf(prefix, sizeof prefix, "db/%.17s/", root + 2);
    int uploads_left = abort_root_uploads(g, prefix, root) != 0;
    if (store_list(g->store, prefix, NULL, NULL, 0, &list) != 0) {
        log_error("gc: cannot list %s: objects of root %s left in the bucket", prefix, root);
        return -EIO;
    }
    size_t failed = 0, i;
    for (i = 0; i < list.n_objects && !atomic_load(&g->abandon); i++) {
        int rc = store_delete(g->store, list.objects[i].key);
        failed += rc != 0 && rc != -ENOENT; /* gone already is what we wanted */
    }
    if (i < list.n_objects) {
        log_warn("gc: stopping; %zu of %zu objects of root %s stay in the bucket",
                 list.n_objects - i, list.n_objects, root);
        store_list_free(&list);
        return 0; /* not tried again: the daemon is going */
    }
    if (failed)
        log_error("gc: %zu of %zu objects of root %s could not be deleted", failed, list.n_objects,
                  root);
    else
        log_info("gc: deleted the %zu objects of root %s", list.n_objects, root);
    store_list_free(&list);
    return failed || uploads_left ? -EIO : 0;
}

/* After a failed removal: queue it again (under g->lock), or give up and free it. */
static void retry_later(struct gc *g, struct gc_item *it)
{
    if (++it->tries >= GC_TRIES) {
        log_error("gc: root %s: %d tries failed; what is left of it stays in the bucket", it->root,
                  it->tries);
        free(it);
        return;
    }
    it->not_before = clock_monotonic() + GC_RETRY_AFTER;
    it->next = g->items;
    g->items = it;
}

/* The first item that is due (and not in use), taken off the list; NULL if none. */
static struct gc_item *take_due(struct gc *g)
{
    double t = clock_monotonic();
    for (struct gc_item **pp = &g->items; *pp; pp = &(*pp)->next) {
        struct gc_item *it = *pp;
        if (!g->draining && it->not_before > t)
            continue;
        if (g->in_use && g->in_use(g->ctx, it->root)) {
            it->not_before = t + GC_POSTPONE;
            continue;
        }
        *pp = it->next;
        return it;
    }
    return NULL;
}

static void *gc_thread(void *arg)
{
    struct gc *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        struct gc_item *it = take_due(g);
        if (!it) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            g->draining = 0;
            pthread_cond_broadcast(&g->wake);
            pthread_cond_timedwait(&g->wake, &g->lock, &until);
            continue;
        }
        pthread_mutex_unlock(&g->lock);
        int rc = remove_root(g, it->root);
        pthread_mutex_lock(&g->lock);
        if (rc != 0)
            retry_later(g, it);
        else
            free(it);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int gc_start(struct gc *g)
{
    if (pthread_create(&g->thread, NULL, gc_thread, g) != 0)
        return -EAGAIN;
    g->started = 1;
    return 0;
}

void gc_free(struct gc *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stopping = 1;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
    if (g->started)
        pthread_join(g->thread, NULL);
    while (g->items) {
        struct gc_item *it = g->items;
        g->items = it->next;
        log_warn("gc: stopping; objects of root %s stay in the bucket", it->root);
        free(it);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

int gc_add(struct gc *g, const char *root)
{
    struct gc_item *it = calloc(1, sizeof *it);
    if (!it)
        return -ENOMEM;
    snprintf(it->root, sizeof it->root, "%s", root);
    it->not_before = clock_monotonic() + g->grace;
    pthread_mutex_lock(&g->lock);
    it->next = g->items;
    g->items = it;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
    return 0;
}

void gc_drain(struct gc *g)
{
    gc_drain_until(g, NULL);
}

/* A signal handler cannot wake a condition wait: the flag is looked at every 100 ms. */
void gc_drain_until(struct gc *g, const volatile sig_atomic_t *give_up)
{
    pthread_mutex_lock(&g->lock);
    g->draining = 1;
    pthread_cond_broadcast(&g->wake);
    while (g->started && g->draining && !g->stopping) {
        if (give_up && *give_up) {
            atomic_store(&g->abandon, 1);
            break;
        }
        struct timespec until = clock_wall_in_ms(100);
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
    }
    pthread_mutex_unlock(&g->lock);
}
