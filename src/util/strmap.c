/* strmap: see include/h5osfs/util/strmap.h. Separate chaining, power-of-two bucket count. */
#include "h5osfs/util/strmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct strmap_slot {
    struct strmap_slot *next;
    uint64_t hash;
    void *value;
    char key[];
};

struct strmap {
    struct strmap_slot **buckets;
    size_t n_buckets;
    size_t count;
};

#define STRMAP_MIN_BUCKETS 64

uint64_t strmap_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: short keys, good enough spread */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

struct strmap *strmap_new(void)
{
    struct strmap *map = calloc(1, sizeof *map);
    if (!map)
        return NULL;
    map->buckets = calloc(STRMAP_MIN_BUCKETS, sizeof *map->buckets);
    if (!map->buckets) {
        free(map);
        return NULL;
    }
    map->n_buckets = STRMAP_MIN_BUCKETS;
    return map;
}

void strmap_free(struct strmap *map, void (*free_value)(void *))
{
    if (!map)
        return;
    for (size_t i = 0; i < map->n_buckets; i++) {
        struct strmap_slot *s = map->buckets[i];
        while (s) {
            struct strmap_slot *next = s->next;
            if (free_value)
                free_value(s->value);
            free(s);
            s = next;
        }
    }
    free(map->buckets);
    free(map);
}

static struct strmap_slot **find_slot(const struct strmap *map, const char *key, uint64_t h)
{
    struct strmap_slot **pp = &map->buckets[h & (map->n_buckets - 1)];
    while (*pp && ((*pp)->hash != h || strcmp((*pp)->key, key) != 0))
        pp = &(*pp)->next;
    return pp;
}

void *strmap_get(const struct strmap *map, const char *key)
{
    struct strmap_slot *s = *find_slot(map, key, strmap_hash(key));
    return s ? s->value : NULL;
}

/* Doubling keeps chains short; a failed grow only costs speed, so it is not an error. */
static void grow(struct strmap *map)
{
    size_t n = map->n_buckets * 2;
    struct strmap_slot **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < map->n_buckets; i++) {
        struct strmap_slot *s = map->buckets[i];
        while (s) {
            struct strmap_slot *next = s->next;
            s->next = b[s->hash & (n - 1)];
            b[s->hash & (n - 1)] = s;
            s = next;
        }
    }
    free(map->buckets);
    map->buckets = b;
    map->n_buckets = n;
}

int strmap_put(struct strmap *map, const char *key, void *value, void **old)
{
    uint64_t h = strmap_hash(key);
    struct strmap_slot **pp = find_slot(map, key, h);
    if (old)
        *old = NULL;
    if (*pp) {
        if (old)
            *old = (*pp)->value;
        (*pp)->value = value;
        return 0;
    }
    size_t klen = strlen(key);
    struct strmap_slot *s = malloc(sizeof *s + klen + 1);
    if (!s)
        return -ENOMEM;
    memcpy(s->key, key, klen + 1);
    s->hash = h;
    s->value = value;
    s->next = NULL;
    *pp = s;
    map->count++;
    if (map->count > map->n_buckets)
        grow(map);
    return 0;
}

void *strmap_remove(struct strmap *map, const char *key)
{
    struct strmap_slot **pp = find_slot(map, key, strmap_hash(key));
    struct strmap_slot *s = *pp;
    if (!s)
        return NULL;
    void *value = s->value;
    *pp = s->next;
    free(s);
    map->count--;
    return value;
}

size_t strmap_count(const struct strmap *map)
{
    return map->count;
}

void strmap_filter(struct strmap *map, int (*fn)(const char *key, void *value, void *ctx),
                   void *ctx)
{
    for (size_t i = 0; i < map->n_buckets; i++) {
        struct strmap_slot **pp = &map->buckets[i];
        while (*pp) {
            struct strmap_slot *s = *pp;
            if (fn(s->key, s->value, ctx)) {
                *pp = s->next;
                free(s);
                map->count--;
            } else {
                pp = &s->next;
            }
        }
    }
}
