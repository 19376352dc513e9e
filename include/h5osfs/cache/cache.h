/*
 * cache: decoded chunks, shared by every image and reader, bounded in bytes (LRU).
 *
 * One fetch per chunk however many readers want it at once: the first caller loads it, the
 * others wait for that load and share its result (or its error). Entries are reference
 * counted; eviction never frees an entry a reader still holds. Thread-safe.
 */
#ifndef H5OSFS_CACHE_H
#define H5OSFS_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct chunk_cache;
struct chunk_entry;

/* A chunk whose bytes are already in a file (a local store's chunk object): its first size
 * bytes, and what the loader knows the file by (stamp), to tell later whether it changed.
 * version, for any entry (a file or bytes in memory): what the loader knows the bytes' source
 * by (the object's change token; 0: nothing), kept with the entry (chunk_entry_version). */
struct chunk_file {
    int fd; /* -1: none */
    uint64_t stamp;
    uint64_t version;
};

/* The chunk's decoded bytes: on 0, *data is a buffer of at least size bytes from malloc, now
 * the cache's; or *data is left NULL and file->fd (the cache sets it to -1 first) is a file
 * that holds them, now the cache's to close: readers then hand its bytes on by splice,
 * without a copy in memory. Else -errno (logged by the loader), *data NULL, no file. The
 * loader allocates, so a body that needs no decoding becomes the entry itself instead of a
 * copy of it. */
typedef int (*chunk_load_fn)(void *ctx, size_t size, void **data, struct chunk_file *file);

/* What an entry costs beside its chunk's bytes (the entry, its key, its place in the index,
 * the allocator's headers): charged against max_bytes, so that a cache of chunks of a few
 * bytes (10^6 chunks of 16 bytes: ~16 MB of data, ~250 MB of entries) stays within it. */
#define CHUNK_CACHE_ENTRY_COST 256u

/* What a chunk of size bytes counts against the limit. */
static inline uint64_t chunk_cache_charge(uint64_t size)
{
    return size + CHUNK_CACHE_ENTRY_COST;
}

/* A cache of at most max_bytes: each entry counts its size plus CHUNK_CACHE_ENTRY_COST. */
struct chunk_cache *chunk_cache_new(uint64_t max_bytes);
/* Remember a failed load for this many seconds (default 0): gets within that time return the
 * same error at once. The kernel re-reads a page whose read failed; that re-read must not
 * start another round of store retries. */
void chunk_cache_set_retry_after(struct chunk_cache *cache, double seconds);
void chunk_cache_free(struct chunk_cache *cache);
/* The byte limit it was made with (chunk bytes and CHUNK_CACHE_ENTRY_COST per entry). */
uint64_t chunk_cache_capacity(const struct chunk_cache *cache);

/* The entry for key, loaded with load(ctx, …) if absent. 0 or the loader's -errno. */
int chunk_cache_get(struct chunk_cache *cache, const char *key, size_t size, chunk_load_fn load,
                    void *ctx, struct chunk_entry **out);
/* How a get found its entry, for a reader that adapts its read-ahead: */
struct chunk_found {
    int spread_taken; /* the first use of an entry a spread load brought in */
};
/* chunk_cache_get, telling how the entry was found (found may be NULL). */
int chunk_cache_fetch(struct chunk_cache *cache, const char *key, size_t size, chunk_load_fn load,
                      void *ctx, struct chunk_entry **out, struct chunk_found *found);
/* Load key if no entry for it is loaded or loading, without waiting for another caller's load
 * and without counting a hit: what read-ahead wants. spread: a guess, not a reader's next
 * step (counted apart: used or evicted unused). 0 or the loader's -errno. */
int chunk_cache_preload(struct chunk_cache *cache, const char *key, size_t size, chunk_load_fn load,
                        void *ctx, int spread);
/* The caller has read all of key's bytes and nobody is likely to want them soon (a file read
 * front to back: the kernel keeps its pages): key's entry leaves the cache once nobody holds
 * it, so its memory serves the next load instead of fresh pages. Counted as an eviction. */
void chunk_cache_drop(struct chunk_cache *cache, const char *key);
/* 1 if key is loaded or being loaded (a failed load does not count). */
int chunk_cache_has(struct chunk_cache *cache, const char *key);
/* The entry's bytes; NULL for an entry that is a file (chunk_entry_file). */
const void *chunk_entry_data(const struct chunk_entry *e);
/* The file an entry is (fd -1 for bytes in memory). The cache keeps at most
 * CHUNK_CACHE_FILES_MAX open: past that, a loaded file's bytes are read into memory. */
#define CHUNK_CACHE_FILES_MAX 256
struct chunk_file chunk_entry_file(const struct chunk_entry *e);
/* The version its loader gave (struct chunk_file). */
uint64_t chunk_entry_version(const struct chunk_entry *e);
void chunk_entry_put(struct chunk_cache *cache, struct chunk_entry *e);

struct chunk_cache_stats {
    uint64_t hits, misses, waits, evictions, bytes, entries;
    uint64_t spread_loaded, spread_used, spread_unused; /* unused: evicted before any get */
    uint64_t charged;  /* what the held entries count against capacity: bytes + entries' cost */
    uint64_t capacity; /* chunk_cache_capacity */
};
void chunk_cache_stats(struct chunk_cache *cache, struct chunk_cache_stats *out);

#endif
