/*
 * strmap: a string-keyed hash map of pointers. Not locked: the owner holds its own lock.
 * Keys are copied; values belong to the caller. Grows as needed; lookups are O(1) on average.
 */
#ifndef H5OSFS_STRMAP_H
#define H5OSFS_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct strmap;

/* The 64-bit FNV-1a hash of key, the one the map files keys by: for callers that need a
 * stable number for a string (the same in every process and version). */
uint64_t strmap_hash(const char *key);

struct strmap *strmap_new(void);
/* Frees the map and its keys; free_value (may be NULL) is called for each value. */
void strmap_free(struct strmap *map, void (*free_value)(void *));

void *strmap_get(const struct strmap *map, const char *key);
/* Inserts or replaces; the old value, if any, is returned through *old. 0 or -ENOMEM. */
int strmap_put(struct strmap *map, const char *key, void *value, void **old);
/* Removes key and returns its value (NULL if absent). */
void *strmap_remove(struct strmap *map, const char *key);
size_t strmap_count(const struct strmap *map);

/* Calls fn for every entry; when fn returns nonzero the entry is removed (fn disposes of
 * the value). Must not touch the map otherwise while iterating. */
void strmap_filter(struct strmap *map, int (*fn)(const char *key, void *value, void *ctx),
                   void *ctx);

#endif
