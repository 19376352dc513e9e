/*
 * chunk_cache: see include/h5osfs/cache/cache.h.
 *
 * One mutex guards everything; one condition variable announces finished loads. Every entry
 * that is loading or loaded sits in the map, so a second caller for the same key finds it and
 * waits instead of fetching again. Loaded entries no reader holds also sit on the idle list,
 * most recently released first; eviction takes from its tail, so an entry a reader holds is
 * never a candidate. A failed load stays in the map for the retry-after time (0 by default),
 * so the kernel's immediate re-read of a page whose read just failed gets the same error at
 * once instead of a second round of store retries; after that the next get loads afresh. Its
 * waiters hold it, and the last reference frees it once it has left the map.
 */
#include "h5osfs/cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"

enum entry_state { ENTRY_LOADING, ENTRY_READY, ENTRY_FAILED };

struct chunk_entry {
    struct chunk_entry *prev, *next; /* idle list links; meaningful only while idle */
    void *data;                      /* written by the loader before READY, read-only after */
    struct chunk_file file;          /* or (data NULL) the file that holds the bytes */
    uint64_t version;                /* the loader's struct chunk_file.version */
    atomic_uint *files;              /* the cache's count of open files */
    size_t size;
    unsigned long refs; /* the loader, waiters and readers holding it */
    enum entry_state state;
    int err;          /* the loader's -errno once FAILED */
    int in_map;       /* 0 once a failed load removed it */
    int idle;         /* on the idle list (READY, refs 0) */
    int spread;       /* loaded by a spread preload and not yet got by anyone */
    int drop;         /* leaves the cache when its last holder lets go */
    double failed_at; /* CLOCK_MONOTONIC seconds, once FAILED */
    char key[];       /* our own copy: eviction removes by key */
};

struct chunk_cache {
    pthread_mutex_t lock;
    pthread_cond_t loaded;         /* broadcast whenever a load finishes, either way */
    struct strmap *map;            /* key -> struct chunk_entry, loading or loaded */
    struct chunk_entry *idle_head; /* most recently released */
    struct chunk_entry *idle_tail; /* next to evict */
    uint64_t max_bytes;
    double retry_after;          /* seconds a failed load is remembered */
    struct chunk_cache_stats st; /* bytes and entries count loaded entries in the map */
    atomic_uint files;           /* entries that hold an open file */
};

/* A failing lock primitive means a corrupted or misused lock: nothing sane is left to do. */
static void must(int rc, const char *what)
{
    if (rc != 0) {
        log_error("cache: %s failed: %s", what, strerror(rc));
        abort();
    }
}

static void cache_lock(struct chunk_cache *c)
{
    must(pthread_mutex_lock(&c->lock), "pthread_mutex_lock");
}

static void cache_unlock(struct chunk_cache *c)
{
    must(pthread_mutex_unlock(&c->lock), "pthread_mutex_unlock");
}

void chunk_cache_set_retry_after(struct chunk_cache *cache, double seconds)
{
    cache_lock(cache);
    cache->retry_after = seconds;
    cache_unlock(cache);
}

static void close_file(struct chunk_entry *e)
{
    if (e->file.fd < 0)
        return;
    if (close(e->file.fd) != 0)
        log_warn("cache: closing the file of chunk %s: %s", e->key, strerror(errno));
    e->file.fd = -1;
    atomic_fetch_sub(e->files, 1);
}

static void free_entry(struct chunk_entry *e)
{
    close_file(e);
    free(e->data);
    free(e);
}

/* strmap_free wants a void * callback. */
static void free_entry_value(void *v)
{
    free_entry(v);
}

struct chunk_cache *chunk_cache_new(uint64_t max_bytes)
{
    struct chunk_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->max_bytes = max_bytes;
    c->map = strmap_new();
    if (!c->map)
        goto fail_map;
    if (pthread_mutex_init(&c->lock, NULL) != 0)
        goto fail_lock;
    if (pthread_cond_init(&c->loaded, NULL) != 0)
        goto fail_cond;
    return c;

fail_cond:
    pthread_mutex_destroy(&c->lock);
fail_lock:
    strmap_free(c->map, NULL);
fail_map:
    free(c);
    return NULL;
}

void chunk_cache_free(struct chunk_cache *cache)
{
    if (!cache)
        return;
    /* No reader holds anything now, so every live entry is in the map. */
    strmap_free(cache->map, free_entry_value);
    pthread_cond_destroy(&cache->loaded);
    pthread_mutex_destroy(&cache->lock);
    free(cache);
}

uint64_t chunk_cache_capacity(const struct chunk_cache *cache)
{
    return cache->max_bytes; /* set at creation, never changed: no lock */
}

static void idle_push(struct chunk_cache *c, struct chunk_entry *e)
{
    e->prev = NULL;
    e->next = c->idle_head;
    if (c->idle_head)
        c->idle_head->prev = e;
    else
        c->idle_tail = e;
    c->idle_head = e;
    e->idle = 1;
}

static void idle_unlink(struct chunk_cache *c, struct chunk_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->idle_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->idle_tail = e->prev;
    e->prev = e->next = NULL;
    e->idle = 0;
}

/* Take an idle loaded entry out of the cache and free it (locked). */
static void evict_one(struct chunk_cache *c, struct chunk_entry *v)
{
    idle_unlink(c, v);
    strmap_remove(c->map, v->key);
    c->st.bytes -= v->size;
    c->st.entries--;
    c->st.evictions++;
    c->st.spread_unused += (uint64_t)v->spread;
    free_entry(v);
}

/* What the loaded entries hold, chunk bytes and entries (locked). */
static uint64_t charged(const struct chunk_cache *c)
{
    return c->st.bytes + c->st.entries * (uint64_t)CHUNK_CACHE_ENTRY_COST;
}

/* Drop least recently used idle entries until the total fits; held entries are not idle. */
static void evict(struct chunk_cache *c)
{
    while (charged(c) > c->max_bytes && c->idle_tail)
        evict_one(c, c->idle_tail);
}

/* Drop one reference (locked). The last one idles a cached entry or frees a failed one. */
static void release(struct chunk_cache *c, struct chunk_entry *e)
{
    if (--e->refs > 0)
        return;
    if (!e->in_map) {
        free_entry(e);
        return;
    }
    if (e->state == ENTRY_FAILED)
        return; /* remembered in the map until forgotten */
    idle_push(c, e);
    if (e->drop)
        evict_one(c, e);
    evict(c);
}

/* The first get of an entry a spread preload made is what proves the guess right (locked). */
static void take_spread(struct chunk_cache *c, struct chunk_entry *e, struct chunk_found *found)
{
    if (!e->spread)
        return;
    e->spread = 0;
    c->st.spread_used++;
    if (found)
        found->spread_taken = 1;
}

/* Share an entry already in the map (locked): a hit, or a wait for another caller's load. */
static int join(struct chunk_cache *c, struct chunk_entry *e, struct chunk_found *found)
{
    take_spread(c, e, found);
    e->drop = 0; /* wanted again after all */
    if (e->state == ENTRY_READY) {
        c->st.hits++;
        if (e->idle)
            idle_unlink(c, e);
        e->refs++;
        return 0;
    }
    c->st.waits++;
    e->refs++; /* keeps a failed entry alive until this waiter has read its error */
    while (e->state == ENTRY_LOADING)
        must(pthread_cond_wait(&c->loaded, &c->lock), "pthread_cond_wait");
    if (e->state == ENTRY_READY)
        return 0;
    int err = e->err;
    release(c, e);
    return err;
}

/* The first size bytes of file f into a new buffer (*data): a file entry past the cache's
 * limit of open files. 0 or -EIO (logged). */
static int read_file(const struct chunk_entry *e, int fd, void **data)
{
    unsigned char *buf = malloc(e->size ? e->size : 1);
    size_t got = 0;
    while (buf && got < e->size) {
        ssize_t n = pread(fd, buf + got, e->size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            log_error("cache: reading the file of chunk %s: %s", e->key,
                      n < 0 ? strerror(errno) : "shorter than the chunk");
            free(buf);
            return -EIO;
        }
        got += (size_t)n;
    }
    if (!buf)
        log_error("cache: cannot allocate %zu bytes for chunk %s", e->size, e->key);
    *data = buf;
    return buf ? 0 : -ENOMEM;
}

/* A file the loader gave becomes the entry, or its bytes do (past the limit of open files). */
static int take_file(struct chunk_entry *e, struct chunk_file file, void **data)
{
    if (atomic_fetch_add(e->files, 1) < CHUNK_CACHE_FILES_MAX) {
        e->file = file;
        return 0;
    }
    atomic_fetch_sub(e->files, 1);
    int rc = read_file(e, file.fd, data);
    if (close(file.fd) != 0)
        log_warn("cache: closing the file of chunk %s: %s", e->key, strerror(errno));
    return rc;
}

/* Load the buffer, without the lock: the loader may do network I/O. */
static int fill(struct chunk_entry *e, chunk_load_fn load, void *ctx)
{
    void *data = NULL;
    struct chunk_file file = { -1, 0, 0 };
    int rc = load(ctx, e->size, &data, &file);
    e->version = file.version;
    if (rc == 0 && !data && file.fd >= 0)
        rc = take_file(e, file, &data);
    else if (file.fd >= 0 && close(file.fd) != 0) /* a loader that gave both, or failed */
        log_warn("cache: closing the file of chunk %s: %s", e->key, strerror(errno));
    /* The loader promises 0 with a buffer or a file, or -errno; nothing else is success. */
    if (rc == 0 && !data && e->file.fd < 0) {
        log_error("cache: the loader of chunk %s returned no buffer", e->key);
        rc = -EIO;
    }
    if (rc != 0) {
        free(data);
        return rc > 0 ? -EIO : rc;
    }
    e->data = data;
    return 0;
}

/* Take a failed entry out of the map (locked); the last reference frees it. */
static void forget(struct chunk_cache *c, struct chunk_entry *e)
{
    strmap_remove(c->map, e->key);
    e->in_map = 0;
    if (e->refs == 0)
        free_entry(e);
}

/* Publish a finished load (locked) and wake everyone waiting for any load. */
static void finish_load(struct chunk_cache *c, struct chunk_entry *e, int rc)
{
    if (rc == 0) {
        e->state = ENTRY_READY;
        c->st.bytes += e->size;
        c->st.entries++;
        evict(c); /* e is held by its loader, so only older idle entries go */
    } else {
        e->state = ENTRY_FAILED;
        e->err = rc;
        e->failed_at = clock_monotonic();
        free(e->data);
        e->data = NULL;
        if (c->retry_after <= 0)
            forget(c, e); /* not remembered: the next get loads afresh */
    }
    must(pthread_cond_broadcast(&c->loaded), "pthread_cond_broadcast");
}

/* Create the entry and load it (called and returns locked; unlocked while loading). */
static int load_new(struct chunk_cache *c, const char *key, size_t size, chunk_load_fn load,
                    void *ctx, int spread, struct chunk_entry **out)
{
    size_t klen = strlen(key);
    struct chunk_entry *e = calloc(1, sizeof *e + klen + 1);
    if (!e) {
        log_error("cache: cannot allocate an entry for chunk %s", key);
        return -ENOMEM;
    }
    memcpy(e->key, key, klen + 1);
    e->size = size;
    e->file.fd = -1;
    e->files = &c->files;
    e->refs = 1;
    e->state = ENTRY_LOADING;
    e->in_map = 1;
    e->spread = spread; /* a reader that joins the load takes it too */
    int rc = strmap_put(c->map, key, e, NULL);
    if (rc < 0) {
        log_error("cache: cannot index chunk %s: %s", key, strerror(-rc));
        free(e);
        return rc;
    }
    c->st.misses++;
    c->st.spread_loaded += (uint64_t)(spread != 0);

    cache_unlock(c);
    rc = fill(e, load, ctx);
    cache_lock(c);

    finish_load(c, e, rc);
    if (rc < 0) {
        release(c, e);
        return rc;
    }
    *out = e;
    return 0;
}

/* A failed entry (locked) old enough to be loaded again; younger, it answers with its error. */
static int retry_due(const struct chunk_cache *c, const struct chunk_entry *e)
{
    return clock_monotonic() - e->failed_at >= c->retry_after;
}

int chunk_cache_fetch(struct chunk_cache *cache, const char *key, size_t size, chunk_load_fn load,
                      void *ctx, struct chunk_entry **out, struct chunk_found *found)
{
    struct chunk_entry *e = NULL;
    size_t have = 0;
    int mismatch = 0, rc;

    *out = NULL;
    if (found)
        *found = (struct chunk_found){ 0 };
    cache_lock(cache);
    struct chunk_entry *there = strmap_get(cache->map, key);
    if (there && there->size != size) {
        have = there->size; /* a caller bug: two sizes for one chunk; never mix them */
        mismatch = 1;
        rc = -EINVAL;
    } else if (there && there->state == ENTRY_FAILED && !retry_due(cache, there)) {
        rc = there->err; /* failed a moment ago: the same answer, without the wait */
        cache->st.hits++;
    } else if (there && there->state != ENTRY_FAILED) {
        rc = join(cache, there, found);
        e = there;
    } else {
        if (there)
            forget(cache, there); /* failed long enough ago: try again */
        rc = load_new(cache, key, size, load, ctx, 0, &e);
    }
    cache_unlock(cache);

    if (mismatch) /* logged outside the lock: the cache's log is no reason to wait */
        log_error("cache: chunk %s requested as %zu bytes but cached as %zu", key, size, have);
    if (rc == 0)
        *out = e;
    return rc;
}

int chunk_cache_get(struct chunk_cache *cache, const char *key, size_t size, chunk_load_fn load,
                    void *ctx, struct chunk_entry **out)
{
    return chunk_cache_fetch(cache, key, size, load, ctx, out, NULL);
}

/* An entry a get would share as it is (locked): loaded or loading. */
static int usable(const struct chunk_entry *e)
{
    return e && e->state != ENTRY_FAILED;
}

int chunk_cache_preload(struct chunk_cache *cache, const char *key, size_t size, chunk_load_fn load,
                        void *ctx, int spread)
{
    struct chunk_entry *e = NULL;
    int rc = 0;
    cache_lock(cache);
    struct chunk_entry *found = strmap_get(cache->map, key);
    if (!found || (found->state == ENTRY_FAILED && retry_due(cache, found))) {
        if (found)
            forget(cache, found);
        rc = load_new(cache, key, size, load, ctx, spread, &e);
        if (rc == 0)
            release(cache, e);
    }
    cache_unlock(cache);
    return rc;
}

void chunk_cache_drop(struct chunk_cache *cache, const char *key)
{
    cache_lock(cache);
    struct chunk_entry *e = strmap_get(cache->map, key);
    if (e && e->state == ENTRY_READY) {
        e->drop = 1;
        if (e->idle)
            evict_one(cache, e);
    }
    cache_unlock(cache);
}

int chunk_cache_has(struct chunk_cache *cache, const char *key)
{
    cache_lock(cache);
    int has = usable(strmap_get(cache->map, key));
    cache_unlock(cache);
    return has;
}

const void *chunk_entry_data(const struct chunk_entry *e)
{
    return e->data;
}

uint64_t chunk_entry_version(const struct chunk_entry *e)
{
    return e->version;
}

struct chunk_file chunk_entry_file(const struct chunk_entry *e)
{
    return e->file;
}

void chunk_entry_put(struct chunk_cache *cache, struct chunk_entry *e)
{
    if (!e)
        return;
    cache_lock(cache);
    release(cache, e);
    cache_unlock(cache);
}

void chunk_cache_stats(struct chunk_cache *cache, struct chunk_cache_stats *out)
{
    cache_lock(cache);
    *out = cache->st;
    out->charged = charged(cache);
    cache_unlock(cache);
    out->capacity = cache->max_bytes;
}
