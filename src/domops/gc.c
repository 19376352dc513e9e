/* gc: see include/h5osfs/domops/gc.h. A list of (root, not before) served by one thread. */
#include "h5osfs/domops/gc.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/testhook.h"

#define GC_POSTPONE 10.0         /* seconds before a root in use is looked at again */
#define GC_RETRY_AFTER 60.0      /* seconds before a root whose removal failed is tried again */
#define GC_TRIES 3               /* then its leftovers stay (logged): the store keeps failing */
#define GC_DOMAIN_MAX (1u << 20) /* a .domain.json read to check which root it names */

/* What became of a root handed to remove_root, besides -EIO (left for a later try). */
enum gc_outcome {
    GC_GONE,      /* its prefix lists empty: the record goes */
    GC_NAMED,     /* the domain names it (again): never deleted, the record goes */
    GC_ABANDONED, /* the daemon is stopping: the record stays for the next mount */
};

struct gc_item {
    struct gc_item *next;
    double not_before;
    int tries;
    int journaled; /* a record in the journal names it */
    char *domain;  /* the domain it was a version of (owned; NULL: unknown) */
    char root[SCHEMA_ID_BUF];
};

struct gc {
    struct store *store;
    struct gc_records records; /* write NULL: the queue is in memory only */
    double grace;
    gc_in_use_fn in_use;
    void *ctx;
    gc_gone_fn on_gone; /* under lock */
    void *gone_ctx;
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

/* Does the domain object of path name root? 0 (no, or no such domain), 1 (yes), or -EIO
 * (cannot tell: logged, tried again later). */
static int domain_names(struct gc *g, const char *path, const char *root)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf;
    if (schema_domain_key(path, key, sizeof key) != 0)
        return 0;
    int rc = store_get(g->store, key, GC_DOMAIN_MAX, &buf);
    if (rc == -ENOENT)
        return 0;
    json_t *dom = rc == 0 ? hjson_loadb((const char *)buf.data, buf.len, why, sizeof why) : NULL;
    if (rc == 0)
        store_buf_free(&buf);
    if (!dom) {
        log_error("gc: %s cannot be read (%s): root %s is kept until it can be told that the "
                  "domain does not name it",
                  key, rc != 0 ? strerror(-rc) : "not JSON", root);
        return -EIO;
    }
    const char *named = hjson_text(json_object_get(dom, "root"));
    int same = named && strcmp(named, root) == 0;
    json_decref(dom);
    return same;
}

/* Does it->domain's .domain.json name it->root, or, for a version's root, the current domain
 * whose version it is (a versions_current=ref domain names its head version's root: a commit
 * whose swap failed after its list expired that version leaves it named there)? Roots are
 * queued only once nothing names them, but a record is read back at a later mount, after
 * whatever happened to the bucket meanwhile (another tool, a restored backup): what a domain
 * names is never garbage. 0 (no: it may go), 1 (yes), or -EIO (cannot tell: logged, tried
 * again later). */
static int named_by_its_domain(struct gc *g, const struct gc_item *it)
{
    char current[STORE_KEY_MAX + 2];
    if (!it->domain)
        return 0; /* only an in-memory caller that names no domain (unit tests) */
    int rc = domain_names(g, it->domain, it->root);
    if (rc == 0 && schema_version_domain_of(it->domain, current, sizeof current) == 0)
        rc = domain_names(g, current, it->root);
    return rc;
}

/* The prefix lists empty: only then is the record dropped (a delete that answered 0 but left
 * the key, or a put of a killed daemon that landed late, is found here). 0 or -EIO. */
static int prefix_is_empty(struct gc *g, const char *prefix, const char *root)
{
    struct store_list list = { 0 };
    int rc = store_list(g->store, prefix, NULL, NULL, 1, &list);
    size_t left = list.n_objects;
    store_list_free(&list);
    if (rc == 0 && left == 0)
        return 0;
    log_error("gc: %s still lists %s after its objects were deleted (root %s): tried again later",
              prefix, rc != 0 ? "nothing it can tell" : "objects", root);
    return -EIO;
}

/* The root group goes last: it is what shows a version's root to be one (domops/vpool.h), so
 * a version folder's rm -r, a sweep, or a mount after a kill meets either a root group or
 * nothing, never objects that no longer show whose they are (kept for ever, logged). */
static void order_group_last(struct store_list *list, const char *root)
{
    char group[STORE_KEY_MAX + 1];
    if (schema_obj_key(root, group, sizeof group) != 0)
        return;
    for (size_t i = 0; i + 1 < list->n_objects; i++)
        if (strcmp(list->objects[i].key, group) == 0) {
            struct store_entry o = list->objects[i];
            list->objects[i] = list->objects[list->n_objects - 1];
            list->objects[list->n_objects - 1] = o;
            return;
        }
}

/* Delete every key of root's domain: db/A-B/ holds all of them (spec §2.1), the uploads of
 * parts under it too. GC_GONE or GC_ABANDONED, or -EIO when something is left that a later
 * try may remove (logged). */
static int remove_root(struct gc *g, const char *root)
{
    char prefix[64];
    struct store_list list = { 0 };
    if (schema_id_version(root) != 2) {
        log_warn("gc: objects of v1 root %s cannot be listed; left in the bucket", root);
        return GC_GONE;
    }
    snprintf(prefix, sizeof prefix, "db/%.17s/", root + 2);
    int uploads_left = abort_root_uploads(g, prefix, root) != 0;
    if (store_list(g->store, prefix, NULL, NULL, 0, &list) != 0) {
        log_error("gc: cannot list %s: objects of root %s left in the bucket", prefix, root);
        return -EIO;
    }
    size_t failed = 0, i;
    order_group_last(&list, root);
    for (i = 0; i < list.n_objects && !atomic_load(&g->abandon); i++) {
        int rc = store_delete(g->store, list.objects[i].key);
        failed += rc != 0 && rc != -ENOENT; /* gone already is what we wanted */
        if (i == 0 && list.n_objects > 1)
            testhook_crash_at("collecting");
    }
    if (i < list.n_objects) {
        log_warn("gc: stopping; %zu of %zu objects of root %s stay in the bucket%s",
                 list.n_objects - i, list.n_objects, root,
                 g->records.write ? " (journaled: collected at the next mount)" : "");
        store_list_free(&list);
        return GC_ABANDONED; /* not tried again: the daemon is going */
    }
    if (failed)
        log_error("gc: %zu of %zu objects of root %s could not be deleted", failed, list.n_objects,
                  root);
    else
        log_info("gc: deleted the %zu objects of root %s", list.n_objects, root);
    store_list_free(&list);
    if (failed || uploads_left)
        return -EIO;
    return prefix_is_empty(g, prefix, root) == 0 ? GC_GONE : -EIO;
}

/* One root, checked against its domain first. A GC_* outcome or -EIO. */
static int collect_root(struct gc *g, const struct gc_item *it)
{
    int named = named_by_its_domain(g, it);
    if (named < 0)
        return named;
    if (named) {
        log_warn("gc: %s names root %s (again): it is not collected", it->domain, it->root);
        return GC_NAMED;
    }
    return remove_root(g, it->root);
}

static void item_free(struct gc_item *it)
{
    free(it->domain);
    free(it);
}

/* After a failed removal: queue it again (under g->lock), or give up and free it. */
static void retry_later(struct gc *g, struct gc_item *it)
{
    if (++it->tries >= GC_TRIES) {
        log_error("gc: root %s: %d tries failed; what is left of it stays in the bucket%s",
                  it->root, it->tries,
                  it->journaled ? " (journaled: tried again at the next mount)" : "");
        item_free(it);
        return;
    }
    it->not_before = clock_monotonic() + GC_RETRY_AFTER;
    it->next = g->items;
    g->items = it;
}

/* After collect_root (under g->lock): the record goes with a root that is gone or that a
 * domain names; it stays for one abandoned, or given up after GC_TRIES. */
static void settle_item(struct gc *g, struct gc_item *it, int rc)
{
    if (rc < 0) {
        retry_later(g, it);
        return;
    }
    if (rc != GC_ABANDONED && it->journaled)
        g->records.remove(g->records.ctx, it->root);
    if (rc == GC_GONE && g->on_gone)
        g->on_gone(g->gone_ctx, it->root, it->domain);
    item_free(it);
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
        int rc = collect_root(g, it);
        pthread_mutex_lock(&g->lock);
        settle_item(g, it, rc);
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
        log_warn("gc: stopping; objects of root %s stay in the bucket%s", it->root,
                 it->journaled ? " (journaled: collected at the next mount)" : "");
        item_free(it);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void gc_on_gone(struct gc *g, gc_gone_fn fn, void *ctx)
{
    pthread_mutex_lock(&g->lock);
    g->on_gone = fn;
    g->gone_ctx = ctx;
    pthread_mutex_unlock(&g->lock);
}

void gc_use_records(struct gc *g, const struct gc_records *records)
{
    g->records = *records;
}

/* Under g->lock. */
static int is_queued(const struct gc *g, const char *root)
{
    for (const struct gc_item *it = g->items; it; it = it->next)
        if (strcmp(it->root, root) == 0)
            return 1;
    return 0;
}

/* Queue root (under g->lock); a root queued already stays as it is. with_record: write its
 * record first (a v1 root gets none: nothing could collect it at the next mount either). */
static int queue_root(struct gc *g, const char *root, const char *domain, const char *replaced_by,
                      int with_record)
{
    if (is_queued(g, root))
        return 0;
    struct gc_item *it = calloc(1, sizeof *it);
    if (!it || (domain && !(it->domain = strdup(domain)))) {
        free(it);
        return -ENOMEM;
    }
    snprintf(it->root, sizeof it->root, "%s", root);
    it->not_before = clock_monotonic() + g->grace;
    it->journaled = !with_record;
    if (with_record && g->records.write && schema_id_version(root) == 2)
        /* a record that cannot be written (a full cache_dir) only costs the crash-safety */
        it->journaled = g->records.write(g->records.ctx, root, domain, replaced_by) == 0;
    it->next = g->items;
    g->items = it;
    pthread_cond_broadcast(&g->wake);
    return 0;
}

/* The record is written under g->lock: records of one root are never written at once, and
 * none is written between a collection's end and the removal of its record. */
int gc_add(struct gc *g, const char *root, const char *domain, const char *replaced_by)
{
    pthread_mutex_lock(&g->lock);
    int rc = queue_root(g, root, domain, replaced_by, 1);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int gc_requeue(struct gc *g, const char *root, const char *domain)
{
    pthread_mutex_lock(&g->lock);
    int rc = queue_root(g, root, domain, NULL, 0);
    pthread_mutex_unlock(&g->lock);
    return rc;
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
