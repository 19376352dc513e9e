/* image_table: see include/h5osfs/image/image_table.h. */
#include "h5osfs/image/image_table.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/strmap.h"
#include "image_int.h"

#define IMAGES_PRUNE_AT 256 /* unused images beyond this many are dropped when stale */

struct image_slot {
    char root[SCHEMA_ID_BUF];
    struct image *img; /* the table's reference */
    double built_at;
};

struct image_table {
    struct image_source src;
    double ttl;
    pthread_mutex_t lock;      /* guards slots, building and open_roots */
    pthread_cond_t built;      /* a build ended */
    struct strmap *building;   /* paths being built: concurrent opens of one build it once,
                                 * different domains build at once */
    struct strmap *slots;      /* path -> struct image_slot */
    struct strmap *open_roots; /* root id -> number of open files (as a pointer value) */
    struct strmap *warming;    /* folders whose domains are being built ahead */
    struct warm_job *jobs;     /* their threads, running or ended but not joined yet */
    int stopping;              /* image_table_stop_warming was called */
    struct image_table_counts counts;
};

int image_table_new(const struct image_source *src, double ttl, struct image_table **out)
{
    struct image_table *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->src = *src;
    t->ttl = ttl;
    t->slots = strmap_new();
    t->open_roots = strmap_new();
    t->building = strmap_new();
    t->warming = strmap_new();
    if (!t->slots || !t->open_roots || !t->building || !t->warming ||
        pthread_mutex_init(&t->lock, NULL) != 0 || pthread_cond_init(&t->built, NULL) != 0) {
        strmap_free(t->slots, NULL);
        strmap_free(t->open_roots, NULL);
        strmap_free(t->building, NULL);
        strmap_free(t->warming, NULL);
        free(t);
        return -ENOMEM;
    }
    *out = t;
    return 0;
}

static void slot_free(void *value)
{
    struct image_slot *s = value;
    image_put(s->img);
    free(s);
}

void image_table_free(struct image_table *t)
{
    if (!t)
        return;
    image_table_stop_warming(t);
    strmap_free(t->slots, slot_free);
    strmap_free(t->warming, NULL);
    strmap_free(t->open_roots, NULL);
    strmap_free(t->building, NULL);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->built);
    free(t);
}

/* How long a slot's image is fresh: ttl, but at least UNLISTED_FRESH seconds for an image
 * built without a listing. Each rebuild of one is a new version (image_equal), and a lookup and
 * the open that follows it must meet the same version: the kernel retries an open that fails
 * ESTALE once, with a new lookup, so with ttl=0 such a domain could never be opened. */
#define UNLISTED_FRESH 1.0

static double fresh_for(const struct image_table *t, const struct image_slot *s)
{
    return s->img->unlisted && t->ttl < UNLISTED_FRESH ? UNLISTED_FRESH : t->ttl;
}

/* A fresh, matching image (new reference) or NULL; *stale gets a matching but old one. */
static struct image *lookup(struct image_table *t, const char *path, const char *root,
                            struct image **stale)
{
    struct image *img = NULL;
    *stale = NULL;
    pthread_mutex_lock(&t->lock);
    struct image_slot *s = strmap_get(t->slots, path);
    if (s && strcmp(s->root, root) == 0) {
        image_get(s->img);
        if (clock_monotonic() - s->built_at < fresh_for(t, s) && !image_changed_in_store(s->img))
            img = s->img;
        else
            *stale = s->img;
    }
    pthread_mutex_unlock(&t->lock);
    return img;
}

void image_table_expire(struct image_table *t, const char *path)
{
    /* Dropped, not just aged: a rebuild would compare equal to it (same keys, same layout)
     * and be replaced by it, chunk cache entries and the kernel's pages included, although
     * the chunk objects behind those keys have new bytes. */
    pthread_mutex_lock(&t->lock);
    struct image_slot *s = strmap_remove(t->slots, path);
    pthread_mutex_unlock(&t->lock);
    if (s)
        slot_free(s);
}

static int drop_stale(const char *key, void *value, void *ctx)
{
    (void)key;
    struct image_slot *s = value;
    if (clock_monotonic() - s->built_at < *(double *)ctx)
        return 0;
    slot_free(s);
    return 1;
}

static int store_slot(struct image_table *t, const char *path, const char *root, struct image *img)
{
    struct image_slot *s = calloc(1, sizeof *s), *old = NULL;
    if (!s)
        return -ENOMEM;
    snprintf(s->root, sizeof s->root, "%s", root);
    s->img = img;
    s->built_at = clock_monotonic();
    image_get(img);
    pthread_mutex_lock(&t->lock);
    if (strmap_count(t->slots) >= IMAGES_PRUNE_AT) {
        double age = t->ttl > 60 ? t->ttl : 60;
        strmap_filter(t->slots, drop_stale, &age);
    }
    int rc = strmap_put(t->slots, path, s, (void **)&old);
    pthread_mutex_unlock(&t->lock);
    if (rc != 0)
        slot_free(s);
    if (old)
        slot_free(old);
    return 0; /* not remembering it only costs a rebuild */
}

/* Wait while another thread builds path, then claim it: 0 or -ENOMEM. */
static int claim_build(struct image_table *t, const char *path)
{
    pthread_mutex_lock(&t->lock);
    while (strmap_get(t->building, path))
        pthread_cond_wait(&t->built, &t->lock);
    int rc = strmap_put(t->building, path, (void *)1, NULL);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

static void release_build(struct image_table *t, const char *path)
{
    pthread_mutex_lock(&t->lock);
    strmap_remove(t->building, path);
    pthread_cond_broadcast(&t->built);
    pthread_mutex_unlock(&t->lock);
}

static void count_build(struct image_table *t, int rc, double seconds)
{
    pthread_mutex_lock(&t->lock);
    t->counts.builds++;
    t->counts.failures += rc != 0;
    t->counts.seconds += seconds;
    pthread_mutex_unlock(&t->lock);
}

void image_table_counts(struct image_table *t, struct image_table_counts *out)
{
    pthread_mutex_lock(&t->lock);
    *out = t->counts;
    out->held = strmap_count(t->slots);
    pthread_mutex_unlock(&t->lock);
}

void image_table_stamp(const struct image_table *t, char out[IMAGE_STAMP_BUF])
{
    image_layout_stamp(&t->src, out);
}

int image_table_get(struct image_table *t, const char *path, const char *root, struct image **out,
                    int *reused)
{
    struct image *stale, *img;
    *reused = 1;
    if ((*out = lookup(t, path, root, &stale)) != NULL)
        return 0;
    image_put(stale);
    int rc = claim_build(t, path);
    if (rc != 0)
        return rc;
    if ((*out = lookup(t, path, root, &stale)) != NULL) {
        release_build(t, path); /* built while we waited */
        return 0;
    }
    double t0 = clock_monotonic();
    rc = image_build(&t->src, path, root, &img);
    count_build(t, rc, clock_monotonic() - t0);
    if (rc == 0 && stale && image_equal(stale, img)) {
        image_put(img); /* unchanged: keep the image readers and caches know */
        img = stale;
        stale = NULL;
    } else {
        *reused = 0;
    }
    image_put(stale);
    if (rc == 0)
        store_slot(t, path, root, img);
    release_build(t, path);
    *out = rc == 0 ? img : NULL;
    return rc;
}

/* Open files per root: the collector must not delete a version someone still reads. */
void image_table_hold(struct image_table *t, const char *root, int delta)
{
    pthread_mutex_lock(&t->lock);
    uintptr_t n = (uintptr_t)strmap_get(t->open_roots, root);
    n = delta > 0 ? n + 1 : n > 0 ? n - 1 : 0;
    if (n == 0)
        strmap_remove(t->open_roots, root);
    else if (strmap_put(t->open_roots, root, (void *)n, NULL) != 0)
        log_warn("open files of root %s are not counted (out of memory)", root);
    pthread_mutex_unlock(&t->lock);
}

int image_table_root_in_use(struct image_table *t, const char *root)
{
    pthread_mutex_lock(&t->lock);
    int used = strmap_get(t->open_roots, root) != NULL;
    pthread_mutex_unlock(&t->lock);
    return used;
}

/* ---- building ahead ---- */

/* Warming threads are joined, not detached: a thread's last steps (OpenSSL's per-thread
 * state is freed by a key destructor) must be over before the process exits. */
struct warm_job {
    struct image_table *t;
    char *folder;
    size_t n;
    char **paths, **roots;
    pthread_t thread;
    int done; /* the thread has finished its work (guarded by t->lock) */
    struct warm_job *next;
};

static void warm_job_free(struct warm_job *j)
{
    for (size_t i = 0; i < j->n; i++) {
        free(j->paths[i]);
        free(j->roots[i]);
    }
    free(j->paths);
    free(j->roots);
    free(j->folder);
    free(j);
}

static void warm_one(void *ctx, size_t i)
{
    struct warm_job *j = ctx;
    struct image *img;
    int reused;
    pthread_mutex_lock(&j->t->lock);
    int stopping = j->t->stopping;
    pthread_mutex_unlock(&j->t->lock);
    /* a fresh image costs a lookup only; a failed build is logged, and again at the lookup */
    if (!stopping && image_table_get(j->t, j->paths[i], j->roots[i], &img, &reused) == 0)
        image_put(img);
}

static void *warm_thread(void *arg)
{
    struct warm_job *j = arg;
    struct image_table *t = j->t;
    pfor(j->n, t->src.requests ? t->src.requests : 1, warm_one, j);
    pthread_mutex_lock(&t->lock);
    strmap_remove(t->warming, j->folder);
    j->done = 1;
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* Join and free the jobs whose threads have ended (under t->lock: they need it no more). */
static void reap_warmers(struct image_table *t)
{
    for (struct warm_job **p = &t->jobs; *p;) {
        struct warm_job *j = *p;
        if (!j->done) {
            p = &j->next;
            continue;
        }
        *p = j->next;
        pthread_join(j->thread, NULL);
        warm_job_free(j);
    }
}

static int start_warming(struct image_table *t, struct warm_job *j)
{
    int rc = -EAGAIN;
    pthread_mutex_lock(&t->lock);
    reap_warmers(t);
    if (!t->stopping && !strmap_get(t->warming, j->folder) &&
        strmap_put(t->warming, j->folder, (void *)1, NULL) == 0) {
        rc = pthread_create(&j->thread, NULL, warm_thread, j) == 0 ? 0 : -EAGAIN;
        if (rc == 0) {
            j->next = t->jobs;
            t->jobs = j;
        } else {
            strmap_remove(t->warming, j->folder);
        }
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int image_table_warm(struct image_table *t, const char *folder, const char *const *paths,
                     const char *const *roots, size_t n)
{
    struct warm_job *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    j->t = t;
    j->folder = strdup(folder);
    j->paths = calloc(n ? n : 1, sizeof *j->paths);
    j->roots = calloc(n ? n : 1, sizeof *j->roots);
    int rc = j->folder && j->paths && j->roots ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++, j->n++) {
        j->paths[i] = strdup(paths[i]);
        j->roots[i] = strdup(roots[i]);
        if (!j->paths[i] || !j->roots[i])
            rc = -ENOMEM;
    }
    if (rc == 0)
        rc = start_warming(t, j);
    if (rc != 0)
        warm_job_free(j);
    return rc;
}

void image_table_stop_warming(struct image_table *t)
{
    pthread_mutex_lock(&t->lock);
    t->stopping = 1;
    struct warm_job *jobs = t->jobs;
    t->jobs = NULL;
    pthread_mutex_unlock(&t->lock);
    while (jobs) {
        struct warm_job *j = jobs;
        jobs = j->next;
        pthread_join(j->thread, NULL);
        warm_job_free(j);
    }
}
