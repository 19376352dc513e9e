/* images: see images.h. */
#include "images.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5osfs/clock.h"
#include "h5osfs/log.h"
#include "h5osfs/schema.h"
#include "h5osfs/strmap.h"

#define IMAGES_PRUNE_AT 256     /* unused images beyond this many are dropped when stale */

struct image_slot {
    char root[SCHEMA_ID_BUF];
    struct image *img;          /* the table's reference */
    double built_at;
};

struct image_table {
    struct image_source src;
    double ttl;
    pthread_mutex_t lock;       /* guards slots */
    pthread_mutex_t build_lock; /* one build at a time: concurrent opens build once */
    struct strmap *slots;       /* path -> struct image_slot */
    struct strmap *open_roots;  /* root id -> number of open files (as a pointer value) */
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
    if (!t->slots || !t->open_roots || pthread_mutex_init(&t->lock, NULL) != 0 ||
        pthread_mutex_init(&t->build_lock, NULL) != 0) {
        strmap_free(t->slots, NULL);
        strmap_free(t->open_roots, NULL);
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
    strmap_free(t->slots, slot_free);
    strmap_free(t->open_roots, NULL);
    pthread_mutex_destroy(&t->lock);
    pthread_mutex_destroy(&t->build_lock);
    free(t);
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
        if (clock_monotonic() - s->built_at < t->ttl)
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

static int store_slot(struct image_table *t, const char *path, const char *root,
                      struct image *img)
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
    return 0;                   /* not remembering it only costs a rebuild */
}

int image_table_get(struct image_table *t, const char *path, const char *root, struct image **out,
                    int *reused)
{
    struct image *stale, *img;
    *reused = 1;
    if ((*out = lookup(t, path, root, &stale)) != NULL)
        return 0;
    pthread_mutex_lock(&t->build_lock);
    image_put(stale);
    if ((*out = lookup(t, path, root, &stale)) != NULL) {
        pthread_mutex_unlock(&t->build_lock);   /* built while we waited */
        return 0;
    }
    int rc = image_build(&t->src, path, root, &img);
    if (rc == 0 && stale && image_equal(stale, img)) {
        image_put(img);         /* unchanged: keep the image readers and caches know */
        img = stale;
        stale = NULL;
    } else {
        *reused = 0;
    }
    image_put(stale);
    if (rc == 0)
        store_slot(t, path, root, img);
    pthread_mutex_unlock(&t->build_lock);
    *out = rc == 0 ? img : NULL;
    return rc;
}

int image_table_size(struct image_table *t, const char *path, const char *root, uint64_t *size)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&t->lock);
    struct image_slot *s = strmap_get(t->slots, path);
    if (s && strcmp(s->root, root) == 0) {
        *size = image_size(s->img);
        rc = 0;
    }
    pthread_mutex_unlock(&t->lock);
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
