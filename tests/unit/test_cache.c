/*
 * The chunk cache alone: hits, LRU order by bytes, held entries surviving eviction, no-cache
 * mode, failed loads (shared, not cached, retried), single flight, and a many-thread random
 * workload whose every read is checked against a pattern derived from the key.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "h5osfs/cache/cache.h"
#include "h5osfs/cache/prefetch.h"

/* What a test loader does; every field but key is optional. */
struct load_ctx {
    const char *key;
    atomic_int *calls; /* loads started */
    atomic_int *ok;    /* loads that succeeded */
    int fail;          /* -errno to return instead of loading */
    int sleep_ms;
    struct chunk_cache *cache; /* with wait_for: stall until that many callers wait */
    uint64_t wait_for;
    const char *nested;    /* get and put this key from inside the loader */
    atomic_int *done;      /* prefetch jobs over */
    struct start_log *log; /* records the order loads start in */
    atomic_int *gate;      /* the load runs until this is set */
};

/* The order in which loads start, and how many run at once. */
struct start_log {
    pthread_mutex_t lock;
    const char *keys[16];
    int n, running, most_running;
};

static void log_start(struct start_log *l, const char *key)
{
    pthread_mutex_lock(&l->lock);
    if (l->n < 16)
        l->keys[l->n++] = key;
    if (++l->running > l->most_running)
        l->most_running = l->running;
    pthread_mutex_unlock(&l->lock);
}

static void log_end(struct start_log *l)
{
    pthread_mutex_lock(&l->lock);
    l->running--;
    pthread_mutex_unlock(&l->lock);
}

static int started_at(struct start_log *l, const char *key)
{
    pthread_mutex_lock(&l->lock);
    int at = -1;
    for (int i = 0; i < l->n && at < 0; i++)
        if (strcmp(l->keys[i], key) == 0)
            at = i;
    pthread_mutex_unlock(&l->lock);
    return at;
}

static uint64_t key_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

static unsigned char pattern_byte(uint64_t h, size_t i)
{
    return (unsigned char)((h >> ((i % 8) * 8)) ^ i);
}

static int pattern_ok(const char *key, const void *data, size_t size)
{
    const unsigned char *b = data;
    uint64_t h = key_hash(key);
    for (size_t i = 0; i < size; i++)
        if (b[i] != pattern_byte(h, i))
            return 0;
    return 1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Single-flight tests stall the load until every other thread is waiting, so "exactly one
 * load" does not depend on thread start-up timing; the deadline keeps a bug from hanging. */
static void wait_for_waiters(struct chunk_cache *cache, uint64_t n)
{
    for (int i = 0; i < 10000; i++) {
        struct chunk_cache_stats st;
        chunk_cache_stats(cache, &st);
        if (st.waits >= n)
            return;
        sleep_ms(1);
    }
}

static int nested_load(void *ctx, size_t size, void **data, struct chunk_file *file);

static int test_load(void *arg, size_t size, void **data, struct chunk_file *file)
{
    (void)file; /* bytes in memory */
    struct load_ctx *ctx = arg;
    if (ctx->calls)
        atomic_fetch_add(ctx->calls, 1);
    if (ctx->log)
        log_start(ctx->log, ctx->key);
    if (ctx->sleep_ms)
        sleep_ms(ctx->sleep_ms);
    while (ctx->gate && !atomic_load(ctx->gate))
        sleep_ms(1);
    if (ctx->log)
        log_end(ctx->log);
    if (ctx->cache && ctx->wait_for)
        wait_for_waiters(ctx->cache, ctx->wait_for);
    if (ctx->nested) {
        /* Would deadlock if the cache held its lock around the loader. */
        struct load_ctx inner = { .key = ctx->nested };
        struct chunk_entry *e;
        int rc = chunk_cache_get(ctx->cache, ctx->nested, 16, nested_load, &inner, &e);
        if (rc < 0)
            return rc;
        chunk_entry_put(ctx->cache, e);
    }
    if (ctx->fail)
        return ctx->fail;
    uint64_t h = key_hash(ctx->key);
    unsigned char *b = malloc(size ? size : 1);
    if (!b)
        return -ENOMEM;
    *data = b;
    for (size_t i = 0; i < size; i++)
        b[i] = pattern_byte(h, i);
    if (ctx->ok)
        atomic_fetch_add(ctx->ok, 1);
    return 0;
}

static int nested_load(void *ctx, size_t size, void **data, struct chunk_file *file)
{
    return test_load(ctx, size, data, file);
}

/* Get and put key, checking its data; returns how many loads it started (0 or 1). */
static int touch(struct chunk_cache *c, const char *key, size_t size)
{
    atomic_int calls = 0;
    struct load_ctx ctx = { .key = key, .calls = &calls };
    struct chunk_entry *e;
    CHECK_INT(chunk_cache_get(c, key, size, test_load, &ctx, &e), 0);
    CHECK(pattern_ok(key, chunk_entry_data(e), size));
    chunk_entry_put(c, e);
    return atomic_load(&calls);
}

static struct chunk_cache_stats stats(struct chunk_cache *c)
{
    struct chunk_cache_stats st;
    chunk_cache_stats(c, &st);
    return st;
}

static void test_basic(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    CHECK(c != NULL);
    CHECK_INT(touch(c, "a", 100), 1);
    CHECK_INT(touch(c, "a", 100), 0);
    CHECK_INT(touch(c, "b", 0), 1); /* an empty chunk is still a chunk */
    CHECK_INT(touch(c, "b", 0), 0);
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.hits, 2);
    CHECK_INT(st.misses, 2);
    CHECK_INT(st.waits, 0);
    CHECK_INT(st.entries, 2);
    CHECK_INT(st.bytes, 100);
    CHECK_INT(st.evictions, 0);

    /* Two holders share one buffer. */
    struct load_ctx ctx = { .key = "a" };
    struct chunk_entry *e1, *e2;
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &ctx, &e1), 0);
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &ctx, &e2), 0);
    CHECK(e1 == e2);
    chunk_entry_put(c, e1);
    chunk_entry_put(c, e2);
    chunk_entry_put(c, NULL); /* harmless */
    chunk_cache_free(c);
    chunk_cache_free(NULL);
}

static void test_size_mismatch(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    CHECK_INT(touch(c, "a", 100), 1);
    struct load_ctx ctx = { .key = "a" };
    struct chunk_entry *e = (struct chunk_entry *)&ctx;
    fprintf(stderr, "(an error about chunk a's size is expected next)\n");
    CHECK_INT(chunk_cache_get(c, "a", 50, test_load, &ctx, &e), -EINVAL);
    CHECK(e == NULL);
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.hits, 0);
    CHECK_INT(st.entries, 1);
    CHECK_INT(touch(c, "a", 100), 0); /* the cached entry is untouched */
    chunk_cache_free(c);
}

static void test_lru_order(void)
{
    struct chunk_cache *c = chunk_cache_new(3 * (100 + CHUNK_CACHE_ENTRY_COST)); /* 3 of 100 */
    CHECK_INT(touch(c, "a", 100), 1);
    CHECK_INT(touch(c, "b", 100), 1);
    CHECK_INT(touch(c, "c", 100), 1);
    CHECK_INT(stats(c).bytes, 300);
    CHECK_INT(touch(c, "a", 100), 0); /* a is now newer than b and c */
    CHECK_INT(touch(c, "d", 100), 1); /* evicts b, the oldest */
    CHECK_INT(stats(c).evictions, 1);
    CHECK_INT(stats(c).entries, 3);
    CHECK_INT(stats(c).bytes, 300);
    CHECK_INT(touch(c, "c", 100), 0); /* order, newest first: c d a */
    CHECK_INT(touch(c, "a", 100), 0); /* a c d */
    CHECK_INT(touch(c, "b", 100), 1); /* b back, d out: b a c */
    CHECK_INT(touch(c, "d", 100), 1); /* d back, c out: d b a */
    CHECK_INT(touch(c, "a", 100), 0);
    CHECK_INT(touch(c, "b", 100), 0);
    CHECK_INT(touch(c, "c", 100), 1);
    CHECK_INT(stats(c).evictions, 4);
    CHECK_INT(touch(c, "big", 2000), 1); /* larger than the limit: loaded, not kept */
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.entries, 0); /* and it pushed everything else out first */
    CHECK_INT(st.bytes, 0);
    CHECK_INT(st.evictions, 8);
    chunk_cache_free(c);
}

/* Entries of a few bytes count what they cost: of 1,000 chunks of 16 bytes, a cache of 64 KiB
 * keeps 64 KiB / (16 + the entry's cost) = 240, not all 1,000 (16,000 bytes of data). */
static void test_tiny_entries_count_their_cost(void)
{
    struct chunk_cache *c = chunk_cache_new(64u << 10);
    char key[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK_INT(touch(c, key, 16), 1);
    }
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.entries, (64u << 10) / (16 + CHUNK_CACHE_ENTRY_COST));
    CHECK_INT(st.bytes, 16 * st.entries);
    CHECK_INT(st.charged, st.bytes + st.entries * CHUNK_CACHE_ENTRY_COST);
    CHECK(st.charged <= st.capacity);
    CHECK_INT(st.capacity, 64u << 10);
    chunk_cache_free(c);
}

static void test_held_not_evicted(void)
{
    struct chunk_cache *c = chunk_cache_new(2 * (100 + CHUNK_CACHE_ENTRY_COST)); /* 2 of 100 */
    struct load_ctx ca = { .key = "a" }, cb = { .key = "b" }, cc = { .key = "c" };
    struct chunk_entry *a, *b, *e;
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &ca, &a), 0);
    CHECK_INT(chunk_cache_get(c, "b", 100, test_load, &cb, &b), 0);
    CHECK_INT(chunk_cache_get(c, "c", 100, test_load, &cc, &e), 0);
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.bytes, 300); /* over the limit while all are held */
    CHECK_INT(st.entries, 3);
    CHECK_INT(st.evictions, 0);
    CHECK(pattern_ok("a", chunk_entry_data(a), 100));
    CHECK(pattern_ok("b", chunk_entry_data(b), 100));
    CHECK(pattern_ok("c", chunk_entry_data(e), 100));

    chunk_entry_put(c, e); /* c is the only idle one: it goes */
    st = stats(c);
    CHECK_INT(st.bytes, 200);
    CHECK_INT(st.evictions, 1);
    CHECK_INT(touch(c, "c", 100), 1); /* and a, b held: c goes again at once */
    CHECK_INT(stats(c).evictions, 2);
    CHECK(pattern_ok("a", chunk_entry_data(a), 100));
    chunk_entry_put(c, a);
    chunk_entry_put(c, b);
    st = stats(c);
    CHECK_INT(st.bytes, 200); /* fits: nothing more goes */
    CHECK_INT(st.evictions, 2);
    CHECK_INT(touch(c, "a", 100), 0);
    CHECK_INT(touch(c, "b", 100), 0);
    chunk_cache_free(c);
}

static void test_no_caching(void)
{
    struct chunk_cache *c = chunk_cache_new(0);
    CHECK_INT(touch(c, "a", 100), 1);
    CHECK_INT(touch(c, "a", 100), 1);
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.entries, 0);
    CHECK_INT(st.bytes, 0);
    CHECK_INT(st.misses, 2);

    /* A buffer still held is shared rather than fetched twice, then dropped with the last. */
    struct load_ctx ctx = { .key = "a" };
    struct chunk_entry *e1, *e2;
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &ctx, &e1), 0);
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &ctx, &e2), 0);
    CHECK(e1 == e2);
    CHECK_INT(stats(c).entries, 1);
    chunk_entry_put(c, e1);
    CHECK_INT(stats(c).entries, 1);
    chunk_entry_put(c, e2);
    CHECK_INT(stats(c).entries, 0);
    CHECK_INT(touch(c, "a", 100), 1);
    chunk_cache_free(c);
}

static void test_failing_loader(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    atomic_int calls = 0;
    struct load_ctx bad = { .key = "a", .calls = &calls, .fail = -EIO };
    struct chunk_entry *e = (struct chunk_entry *)&bad;
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &bad, &e), -EIO);
    CHECK(e == NULL);
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.entries, 0);
    CHECK_INT(st.bytes, 0);
    bad.fail = -ENOENT;
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &bad, &e), -ENOENT); /* tried again */
    CHECK_INT(atomic_load(&calls), 2);
    CHECK_INT(touch(c, "a", 100), 1); /* a good load after failures is cached */
    CHECK_INT(touch(c, "a", 100), 0);
    st = stats(c);
    CHECK_INT(st.misses, 3);
    CHECK_INT(st.hits, 1);
    CHECK_INT(st.entries, 1);
    chunk_cache_free(c);
}

/* A failure is remembered for the retry-after time, then retried; a success then caches. */
static void test_retry_after(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    atomic_int calls = 0;
    struct load_ctx bad = { .key = "a", .calls = &calls, .fail = -EIO };
    struct chunk_entry *e;
    /* An hour stands for "not yet", however slow the machine; 0 for "the time has passed"
     * (a remembered failure is due at once). */
    chunk_cache_set_retry_after(c, 3600);
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &bad, &e), -EIO);
    bad.fail = -ENOENT;
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &bad, &e), -EIO); /* remembered */
    CHECK_INT(atomic_load(&calls), 1);
    CHECK_INT(stats(c).entries, 0);
    chunk_cache_set_retry_after(c, 0);
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &bad, &e), -ENOENT); /* tried again */
    CHECK_INT(atomic_load(&calls), 2);
    chunk_cache_set_retry_after(c, 3600);
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &bad, &e), -ENOENT);
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &bad, &e), -ENOENT); /* remembered */
    CHECK_INT(atomic_load(&calls), 3);
    chunk_cache_set_retry_after(c, 0);
    CHECK_INT(touch(c, "a", 100), 1); /* a good load after the time passed is cached */
    CHECK_INT(touch(c, "a", 100), 0);
    CHECK_INT(stats(c).entries, 1);
    chunk_cache_set_retry_after(c, 3600);
    CHECK_INT(chunk_cache_get(c, "b", 10, test_load, &bad, &e), -ENOENT);
    chunk_cache_free(c); /* a remembered failure is freed with the cache */
}

static void test_nested_get(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    struct load_ctx ctx = { .key = "outer", .cache = c, .nested = "inner" };
    struct chunk_entry *e;
    CHECK_INT(chunk_cache_get(c, "outer", 64, test_load, &ctx, &e), 0);
    CHECK(pattern_ok("outer", chunk_entry_data(e), 64));
    chunk_entry_put(c, e);
    CHECK_INT(stats(c).entries, 2);
    CHECK_INT(touch(c, "inner", 16), 0);
    chunk_cache_free(c);
}

/* ---- single flight ---- */

#define FLIGHT_THREADS 16

struct flight {
    struct chunk_cache *cache;
    struct load_ctx ctx; /* shared: whichever thread loads uses it */
    pthread_barrier_t start;
    int rc[FLIGHT_THREADS];
    const void *data[FLIGHT_THREADS];
    int bad_data[FLIGHT_THREADS];
};

struct flight_arg {
    struct flight *f;
    int i;
};

static void *flight_thread(void *arg)
{
    struct flight_arg *a = arg;
    struct flight *f = a->f;
    struct chunk_entry *e;
    int rc = pthread_barrier_wait(&f->start);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        abort();
    f->rc[a->i] = chunk_cache_get(f->cache, "k", 4096, test_load, &f->ctx, &e);
    if (f->rc[a->i] == 0) {
        f->data[a->i] = chunk_entry_data(e);
        f->bad_data[a->i] = !pattern_ok("k", f->data[a->i], 4096);
        chunk_entry_put(f->cache, e);
    }
    return NULL;
}

/* nthreads get one key at once; the one load sleeps 50 ms, then fails with fail or succeeds. */
static void run_flight(uint64_t max_bytes, int nthreads, int fail)
{
    static struct flight f; /* static: the barrier and arrays are large for a stack */
    atomic_int calls = 0;
    pthread_t th[FLIGHT_THREADS];
    struct flight_arg args[FLIGHT_THREADS];

    memset(&f, 0, sizeof f);
    f.cache = chunk_cache_new(max_bytes);
    f.ctx = (struct load_ctx){ .key = "k",
                               .calls = &calls,
                               .fail = fail,
                               .sleep_ms = 50,
                               .cache = f.cache,
                               .wait_for = (uint64_t)nthreads - 1 };
    CHECK_INT(pthread_barrier_init(&f.start, NULL, (unsigned)nthreads), 0);
    for (int i = 0; i < nthreads; i++) {
        args[i] = (struct flight_arg){ &f, i };
        CHECK_INT(pthread_create(&th[i], NULL, flight_thread, &args[i]), 0);
    }
    for (int i = 0; i < nthreads; i++)
        CHECK_INT(pthread_join(th[i], NULL), 0);
    CHECK_INT(pthread_barrier_destroy(&f.start), 0);

    CHECK_INT(atomic_load(&calls), 1);
    int same = 1;
    for (int i = 0; i < nthreads; i++) {
        same &= f.rc[i] == fail && !f.bad_data[i] && f.data[i] == f.data[0];
    }
    CHECK(same);
    struct chunk_cache_stats st = stats(f.cache);
    CHECK_INT(st.misses, 1);
    CHECK_INT(st.waits, nthreads - 1);
    CHECK_INT(st.hits, 0);
    CHECK_INT(st.entries, fail || max_bytes == 0 ? 0 : 1);
    if (fail) {
        CHECK_INT(touch(f.cache, "k", 4096), 1); /* the failure was not cached */
    }
    chunk_cache_free(f.cache);
}

static void test_single_flight(void)
{
    run_flight(1 << 20, FLIGHT_THREADS, 0);
    run_flight(1 << 20, 8, -EIO);
    run_flight(0, 8, 0);
}

/* ---- random workload ---- */

#define STRESS_THREADS 8
#define STRESS_OPS 3000
#define STRESS_KEYS 48
#define STRESS_HOLD 3
#define STRESS_LIMIT 2048

struct stress {
    struct chunk_cache *cache;
    atomic_int calls, ok;
    atomic_long gets, failed, bad;
};

struct held {
    struct chunk_entry *e;
    char key[16];
    size_t size;
};

static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13; /* xorshift32: per-thread, no shared state */
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void stress_release(struct stress *s, struct held *h)
{
    if (!pattern_ok(h->key, chunk_entry_data(h->e), h->size))
        atomic_fetch_add(&s->bad, 1); /* changed or freed while held */
    chunk_entry_put(s->cache, h->e);
    h->e = NULL;
}

static void stress_get(struct stress *s, struct held *h, uint32_t *rnd)
{
    int k = (int)(next_rand(rnd) % STRESS_KEYS);
    snprintf(h->key, sizeof h->key, "key/%d", k);
    h->size = 64 + (size_t)(k % 7) * 48; /* one size per key, 64..352 bytes */
    /* Every 11th key fails a third of its loads: errors must reach waiters, never stick. */
    int fail = k % 11 == 0 && next_rand(rnd) % 3 == 0 ? -EIO : 0;
    struct load_ctx ctx = { .key = h->key, .calls = &s->calls, .ok = &s->ok, .fail = fail };
    atomic_fetch_add(&s->gets, 1);
    int rc = chunk_cache_get(s->cache, h->key, h->size, test_load, &ctx, &h->e);
    if (rc == -EIO && k % 11 == 0) {
        atomic_fetch_add(&s->failed, 1);
        h->e = NULL;
    } else if (rc != 0 || !pattern_ok(h->key, chunk_entry_data(h->e), h->size)) {
        atomic_fetch_add(&s->bad, 1);
        if (rc == 0)
            chunk_entry_put(s->cache, h->e);
        h->e = NULL;
    }
}

static void *stress_thread(void *arg)
{
    struct stress *s = arg;
    struct held held[STRESS_HOLD] = { 0 };
    static atomic_uint seeds = 1;
    uint32_t rnd = 0x9e3779b9u * atomic_fetch_add(&seeds, 1);

    for (int op = 0; op < STRESS_OPS; op++) {
        struct held *h = &held[next_rand(&rnd) % STRESS_HOLD];
        if (h->e)
            stress_release(s, h);
        if (next_rand(&rnd) % 4 != 0) /* sometimes leave the slot empty */
            stress_get(s, h, &rnd);
    }
    for (int i = 0; i < STRESS_HOLD; i++)
        if (held[i].e)
            stress_release(s, &held[i]);
    return NULL;
}

static void test_stress(void)
{
    static struct stress s;
    pthread_t th[STRESS_THREADS];

    memset(&s, 0, sizeof s);
    s.cache = chunk_cache_new(STRESS_LIMIT);
    CHECK(s.cache != NULL);
    for (int i = 0; i < STRESS_THREADS; i++)
        CHECK_INT(pthread_create(&th[i], NULL, stress_thread, &s), 0);
    for (int i = 0; i < STRESS_THREADS; i++)
        CHECK_INT(pthread_join(th[i], NULL), 0);

    struct chunk_cache_stats st = stats(s.cache);
    CHECK_INT(atomic_load(&s.bad), 0);
    CHECK_INT(st.hits + st.misses + st.waits, atomic_load(&s.gets));
    CHECK_INT(st.misses, atomic_load(&s.calls));
    /* Every good load made one entry; every entry is still here or was evicted. */
    CHECK_INT(atomic_load(&s.ok), st.evictions + st.entries);
    CHECK(st.bytes <= STRESS_LIMIT);
    CHECK(st.entries <= STRESS_KEYS);
    CHECK(st.evictions > 0);           /* the limit really was exercised */
    CHECK(atomic_load(&s.failed) > 0); /* and so were failures */
    chunk_cache_free(s.cache);
}

/* Read-ahead's load: it loads what is absent, leaves what is there alone, counts no hit. */
static void test_preload(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    atomic_int calls = 0;
    struct load_ctx ctx = { .key = "a", .calls = &calls };
    CHECK_INT(chunk_cache_preload(c, "a", 100, test_load, &ctx, 0), 0);
    CHECK_INT(atomic_load(&calls), 1);
    CHECK(chunk_cache_has(c, "a"));
    CHECK_INT(chunk_cache_preload(c, "a", 100, test_load, &ctx, 0), 0);
    CHECK_INT(atomic_load(&calls), 1); /* there: not loaded again */
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.hits, 0);
    CHECK_INT(st.misses, 1);
    CHECK_INT(st.entries, 1);
    CHECK_INT(touch(c, "a", 100), 0); /* the reader finds the preloaded bytes */

    struct load_ctx bad = { .key = "b", .fail = -EIO };
    CHECK_INT(chunk_cache_preload(c, "b", 100, test_load, &bad, 0), -EIO);
    CHECK(!chunk_cache_has(c, "b")); /* a failure is not "there" */
    CHECK_INT(touch(c, "b", 100), 1);
    CHECK(chunk_cache_has(c, "b"));
    CHECK(!chunk_cache_has(c, "never"));
    chunk_cache_free(c);
}

struct slow_get {
    struct chunk_cache *cache;
    atomic_int calls;
};

static void *slow_get(void *arg)
{
    struct slow_get *g = arg;
    struct load_ctx ctx = { .key = "slow", .calls = &g->calls, .sleep_ms = 200 };
    struct chunk_entry *e;
    CHECK_INT(chunk_cache_get(g->cache, "slow", 64, test_load, &ctx, &e), 0);
    chunk_entry_put(g->cache, e);
    return NULL;
}

static void done_count(void *ctx)
{
    atomic_fetch_add(((struct load_ctx *)ctx)->done, 1);
}

/* A chunk loaded or being loaded is not queued again: no job, no worker woken, no second load. */
static void test_prefetcher_skips_what_is_there(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    struct prefetcher *p = NULL;
    CHECK_INT(prefetcher_new(c, 2, 8, &p), 0);
    CHECK_INT(touch(c, "here", 32), 1);
    struct slow_get g = { .cache = c };
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, slow_get, &g), 0);
    while (!chunk_cache_has(c, "slow"))
        sleep_ms(1);
    atomic_int done = 0, calls = 0;
    struct load_ctx ctx = { .key = "here", .calls = &calls, .done = &done };
    CHECK_INT(prefetcher_add(p, PREFETCH_AHEAD, "here", 32, test_load, &ctx, done_count), 1);
    struct load_ctx slow = { .key = "slow", .calls = &calls, .done = &done };
    CHECK_INT(prefetcher_add(p, PREFETCH_SPREAD, "slow", 64, test_load, &slow, done_count), 1);
    CHECK_INT(atomic_load(&done), 2); /* both finished at once, as present */
    struct prefetch_counts pc;
    prefetcher_counts(p, &pc);
    CHECK_INT(pc.present, 2);
    CHECK_INT(pc.queued, 0);
    struct load_ctx fresh = { .key = "new", .calls = &calls, .done = &done };
    CHECK_INT(prefetcher_add(p, PREFETCH_AHEAD, "new", 16, test_load, &fresh, done_count), 0);
    for (int i = 0; i < 5000 && atomic_load(&done) < 3; i++)
        sleep_ms(1);
    CHECK_INT(atomic_load(&done), 3);
    CHECK(chunk_cache_has(c, "new"));
    prefetcher_counts(p, &pc);
    CHECK_INT(pc.queued, 1);
    CHECK_INT(pthread_join(t, NULL), 0);
    CHECK_INT(atomic_load(&g.calls), 1);
    CHECK_INT(atomic_load(&calls), 1); /* only "new" was loaded by the prefetcher */
    CHECK_INT(stats(c).hits, 0);       /* its worker's load counts no hit */
    prefetcher_free(p);
    chunk_cache_free(c);
}

/* A spread load is counted apart: loaded, then used by the first get (and only the first), or
 * evicted unused; a get that finds it loaded is no miss. */
static void test_spread_accounting(void)
{
    struct chunk_cache *c = chunk_cache_new(300 + 3 * CHUNK_CACHE_ENTRY_COST);
    struct load_ctx a = { .key = "a" }, b = { .key = "b" }, x = { .key = "x" };
    CHECK_INT(chunk_cache_capacity(c), 300 + 3 * CHUNK_CACHE_ENTRY_COST);
    CHECK_INT(chunk_cache_preload(c, "a", 100, test_load, &a, 1), 0);
    CHECK_INT(stats(c).spread_loaded, 1);
    struct chunk_entry *e;
    struct chunk_found found;
    uint64_t misses = stats(c).misses;
    CHECK_INT(chunk_cache_fetch(c, "a", 100, test_load, &a, &e, &found), 0);
    CHECK(found.spread_taken);
    CHECK_INT(stats(c).misses, misses);
    CHECK(pattern_ok("a", chunk_entry_data(e), 100));
    chunk_entry_put(c, e);
    CHECK_INT(chunk_cache_fetch(c, "a", 100, test_load, &a, &e, &found), 0);
    CHECK(!found.spread_taken); /* used once, counted once */
    CHECK_INT(stats(c).misses, misses);
    chunk_entry_put(c, e);
    CHECK_INT(stats(c).spread_used, 1);

    CHECK_INT(chunk_cache_preload(c, "b", 100, test_load, &b, 1), 0);
    misses = stats(c).misses;
    CHECK_INT(chunk_cache_fetch(c, "x", 150, test_load, &x, &e, &found), 0);
    CHECK(!found.spread_taken);
    CHECK_INT(stats(c).misses, misses + 1); /* loaded by this get */
    chunk_entry_put(c, e);
    /* 350 bytes > 300 (and 3 entries' cost): the least recently used, "a", went first; then
     * "b", never got */
    CHECK_INT(touch(c, "y", 100), 1);
    struct chunk_cache_stats st = stats(c);
    CHECK_INT(st.spread_loaded, 2);
    CHECK_INT(st.spread_unused, 1);
    CHECK_INT(st.spread_used, 1);
    CHECK(!chunk_cache_has(c, "b"));
    chunk_cache_free(c);
}

static void wait_done(atomic_int *done, int n)
{
    for (int i = 0; i < 10000 && atomic_load(done) < n; i++)
        sleep_ms(1);
    CHECK_INT(atomic_load(done), n);
}

/* Read-ahead jobs go before guesses, and guesses take at most half the workers: with two,
 * one guess at a time, and the read-ahead queued behind it starts first. */
static void test_prefetcher_reads_ahead_before_guessing(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    struct prefetcher *p = NULL;
    CHECK_INT(prefetcher_new(c, 2, 16, &p), 0);
    struct start_log log = { .lock = PTHREAD_MUTEX_INITIALIZER };
    atomic_int done = 0, gate = 0;
    /* s1 runs until every job is queued: what starts next is decided by the queue alone, not
     * by whether the machine queued them before a sleep of s1 ran out */
    struct load_ctx s1 = { .key = "s1", .gate = &gate, .log = &log, .done = &done },
                    s2 = { .key = "s2", .sleep_ms = 50, .log = &log, .done = &done },
                    s3 = { .key = "s3", .log = &log, .done = &done },
                    a1 = { .key = "a1", .sleep_ms = 300, .log = &log, .done = &done },
                    a2 = { .key = "a2", .log = &log, .done = &done };
    CHECK_INT(prefetcher_add(p, PREFETCH_SPREAD, "s1", 8, test_load, &s1, done_count), 0);
    CHECK_INT(prefetcher_add(p, PREFETCH_SPREAD, "s2", 8, test_load, &s2, done_count), 0);
    while (started_at(&log, "s1") < 0)
        sleep_ms(1);
    sleep_ms(50); /* the idle worker would have taken s2 by now if it could */
    CHECK_INT(started_at(&log, "s2"), -1);
    CHECK_INT(prefetcher_add(p, PREFETCH_AHEAD, "a1", 8, test_load, &a1, done_count), 0);
    CHECK_INT(prefetcher_add(p, PREFETCH_SPREAD, "s3", 8, test_load, &s3, done_count), 0);
    CHECK_INT(prefetcher_add(p, PREFETCH_AHEAD, "a2", 8, test_load, &a2, done_count), 0);
    while (started_at(&log, "a1") < 0)
        sleep_ms(1);
    atomic_store(&gate, 1);
    wait_done(&done, 5);
    CHECK_INT(started_at(&log, "a1"), 1); /* the idle worker, while s1 still ran */
    CHECK(started_at(&log, "a2") < started_at(&log, "s2"));
    CHECK(started_at(&log, "s2") < started_at(&log, "s3"));
    CHECK_INT(log.most_running, 2);
    struct prefetch_counts pc;
    prefetcher_counts(p, &pc);
    CHECK_INT(pc.queued, 5);
    CHECK_INT(pc.spread, 3);
    CHECK_INT(stats(c).spread_loaded, 3);
    prefetcher_free(p);
    chunk_cache_free(c);
}

/* A dropped entry leaves at once when idle, at its last release when held, and stays when a
 * get wants it again before that. */
static void test_drop(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    struct load_ctx a = { .key = "a" }, b = { .key = "b" };
    CHECK_INT(touch(c, "a", 100), 1);
    chunk_cache_drop(c, "a");
    CHECK(!chunk_cache_has(c, "a"));
    CHECK_INT(stats(c).evictions, 1);
    CHECK_INT(stats(c).bytes, 0);

    struct chunk_entry *held, *again;
    CHECK_INT(chunk_cache_get(c, "b", 100, test_load, &b, &held), 0);
    chunk_cache_drop(c, "b");
    CHECK(chunk_cache_has(c, "b")); /* held: still there */
    chunk_entry_put(c, held);
    CHECK(!chunk_cache_has(c, "b"));

    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &a, &held), 0);
    chunk_cache_drop(c, "a");
    CHECK_INT(chunk_cache_get(c, "a", 100, test_load, &a, &again), 0); /* wanted after all */
    chunk_entry_put(c, held);
    chunk_entry_put(c, again);
    CHECK(chunk_cache_has(c, "a"));
    chunk_cache_drop(c, "never loaded"); /* nothing to do */
    CHECK_INT(stats(c).entries, 1);
    chunk_cache_free(c);
}

/* A loader whose chunk is a file (unlinked) holding "file:" + the key, so that the bytes read
 * from it show which file an entry is. */
static int file_load(void *arg, size_t size, void **data, struct chunk_file *file)
{
    (void)data;
    char path[] = "/tmp/test_cache_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -EIO;
    unlink(path);
    char text[32];
    snprintf(text, sizeof text, "file:%-*s", (int)(size - 5), (const char *)arg);
    CHECK(pwrite(fd, text, size, 0) == (ssize_t)size);
    *file = (struct chunk_file){ fd, 42, 7 };
    return 0;
}

/* A loader may give a file instead of bytes: the entry is that file (no bytes in memory) up
 * to CHUNK_CACHE_FILES_MAX open at once; past that its bytes are read into memory and it is
 * closed. Every file is closed when its entry goes. */
static void test_file_entries(void)
{
    struct chunk_cache *c = chunk_cache_new(1 << 20);
    struct chunk_entry *held[CHUNK_CACHE_FILES_MAX + 1];
    char keys[CHUNK_CACHE_FILES_MAX + 1][16];
    for (int i = 0; i <= CHUNK_CACHE_FILES_MAX; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        CHECK_INT(chunk_cache_get(c, keys[i], 16, file_load, keys[i], &held[i]), 0);
    }
    for (int i = 0; i < CHUNK_CACHE_FILES_MAX; i++) {
        struct chunk_file f = chunk_entry_file(held[i]);
        CHECK(chunk_entry_data(held[i]) == NULL && f.fd >= 0 && f.stamp == 42);
        CHECK_INT(chunk_entry_version(held[i]), 7);
        char got[17] = "";
        CHECK(pread(f.fd, got, 16, 0) == 16);
        CHECK(strncmp(got + 5, keys[i], strlen(keys[i])) == 0);
    }
    const struct chunk_entry *last = held[CHUNK_CACHE_FILES_MAX];
    CHECK(chunk_entry_file(last).fd < 0 && chunk_entry_data(last) != NULL);
    CHECK_INT(chunk_entry_version(last), 7); /* its file read into memory: the same version */
    CHECK(strncmp((const char *)chunk_entry_data(last) + 5, "k256", 4) == 0);
    int fd0 = chunk_entry_file(held[0]).fd;
    for (int i = 0; i <= CHUNK_CACHE_FILES_MAX; i++)
        chunk_entry_put(c, held[i]);
    chunk_cache_free(c);
    CHECK(fcntl(fd0, F_GETFD) == -1 && errno == EBADF); /* closed with its entry */
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv; /* no data files needed */
    test_basic();
    test_size_mismatch();
    test_lru_order();
    test_held_not_evicted();
    test_tiny_entries_count_their_cost();
    test_no_caching();
    test_failing_loader();
    test_retry_after();
    test_nested_get();
    test_single_flight();
    test_stress();
    test_preload();
    test_prefetcher_skips_what_is_there();
    test_spread_accounting();
    test_drop();
    test_file_entries();
    test_prefetcher_reads_ahead_before_guessing();
    return check_done("cache");
}
