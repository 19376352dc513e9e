/* zarr_index: a chunk's index in an array's grid, its names and its entry in the chunk map
 * (zarr_int.h); a leaf every file of the view may call. */
#include "zarr_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t chunks_along(const struct zarr_array *a, int k)
{
    return a->rank == 0 ? 1 : (a->shape[k] + a->chunk[k] - 1) / a->chunk[k];
}

/* "3.0.12" (sep '.') or "3_0_12" (sep '_') -> index, checked against the grid. */
int zarr_parse_index(const struct zarr_array *a, const char *s, char sep, uint64_t *idx)
{
    int parts = a->rank ? a->rank : 1;
    for (int k = 0; k < parts; k++) {
        if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
            return -ENOENT;
        uint64_t x = 0;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (x > (UINT64_MAX - 9) / 10)
                return -ENOENT;
            x = x * 10 + (uint64_t)(*s - '0');
        }
        if (x >= chunks_along(a, k))
            return -ENOENT;
        idx[k] = x;
        if (k + 1 < parts && *s++ != sep)
            return -ENOENT;
    }
    return *s ? -ENOENT : 0;
}

int zarr_index_name(const struct zarr_array *a, const uint64_t *idx, char *buf, size_t cap)
{
    size_t used = 0;
    for (int k = 0; k < (a->rank ? a->rank : 1); k++) {
        int n =
            snprintf(buf + used, cap - used, "%s%llu", k ? "." : "", (unsigned long long)idx[k]);
        if (n < 0 || (size_t)n >= cap - used)
            return -ENAMETOOLONG;
        used += (size_t)n;
    }
    return 0;
}

int zarr_chunk_put(struct zarr_array *a, const char *name, const char *key, uint64_t off,
                   uint64_t size, int ranged)
{
    struct zarr_chunk *c = malloc(sizeof *c);
    if (!c)
        return -ENOMEM;
    snprintf(c->key, sizeof c->key, "%s", key);
    c->off = off;
    c->size = size;
    c->ranged = ranged;
    void *old = NULL;
    if (strmap_put(a->chunks, name, c, &old) != 0) {
        free(c);
        return -ENOMEM;
    }
    free(old);
    return 0;
}
