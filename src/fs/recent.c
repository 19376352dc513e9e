/* recent: see recent.h. */
#include "recent.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "h5osfs/util/clock.h"

struct recent_entry {
    struct image *img; /* NULL: a free slot */
    double at;         /* clock_monotonic() of its last lookup */
};

struct recent_images {
    pthread_mutex_t lock; /* guards entries */
    struct recent_entry entries[RECENT_MAX];
};

int recent_new(struct recent_images **out)
{
    struct recent_images *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

void recent_free(struct recent_images *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < RECENT_MAX; i++)
        if (r->entries[i].img)
            image_put(r->entries[i].img);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* Under the lock: entries older than RECENT_SECONDS leave (their images, to drop after it). */
static size_t take_expired(struct recent_images *r, double now, struct image **out)
{
    size_t n = 0;
    for (size_t i = 0; i < RECENT_MAX; i++) {
        struct recent_entry *e = &r->entries[i];
        if (e->img && now - e->at >= RECENT_SECONDS) {
            out[n++] = e->img;
            e->img = NULL;
        }
    }
    return n;
}

static void put_all(struct image **imgs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        image_put(imgs[i]);
}

/* Under the lock: img's entry, else a free one, else the oldest (whose image goes to *evicted). */
static struct recent_entry *slot_for(struct recent_images *r, struct image *img,
                                     struct image **evicted)
{
    struct recent_entry *free_slot = NULL, *oldest = &r->entries[0];
    for (size_t i = 0; i < RECENT_MAX; i++) {
        struct recent_entry *e = &r->entries[i];
        if (e->img && image_serial(e->img) == image_serial(img))
            return e;
        if (!e->img && !free_slot)
            free_slot = e;
        if (e->img && oldest->img && e->at < oldest->at)
            oldest = e;
    }
    if (free_slot)
        return free_slot;
    *evicted = oldest->img;
    oldest->img = NULL;
    return oldest;
}

void recent_add(struct recent_images *r, struct image *img)
{
    struct image *dropped[RECENT_MAX + 1];
    double now = clock_monotonic();
    pthread_mutex_lock(&r->lock);
    size_t n = take_expired(r, now, dropped);
    struct image *evicted = NULL;
    struct recent_entry *e = slot_for(r, img, &evicted);
    if (evicted)
        dropped[n++] = evicted;
    if (!e->img) {
        image_get(img);
        e->img = img;
    }
    e->at = now;
    pthread_mutex_unlock(&r->lock);
    put_all(dropped, n); /* a last reference frees an image: not under the lock */
}

struct image *recent_find(struct recent_images *r, uint64_t serial)
{
    struct image *dropped[RECENT_MAX], *found = NULL;
    pthread_mutex_lock(&r->lock);
    size_t n = take_expired(r, clock_monotonic(), dropped);
    for (size_t i = 0; i < RECENT_MAX && !found; i++) {
        struct image *img = r->entries[i].img;
        if (img && image_serial(img) == serial) {
            image_get(img);
            found = img;
        }
    }
    pthread_mutex_unlock(&r->lock);
    put_all(dropped, n);
    return found;
}
