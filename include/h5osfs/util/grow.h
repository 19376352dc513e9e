/*
 * grow: the one way an array grows here. Every list the daemon builds (listing entries, ids,
 * datasets, chunk keys, ...) doubles its capacity as it fills, with the same overflow check.
 */
#ifndef H5OSFS_GROW_H
#define H5OSFS_GROW_H

#include <stddef.h>

/* items (n_cap elements of elem_size bytes, NULL when n_cap is 0) made to hold at least need
 * elements: the capacity doubles, starting at first. The new array, *cap updated; NULL when
 * memory or the size runs out, items and *cap then unchanged. */
void *grow_array(void *items, size_t *cap, size_t need, size_t elem_size, size_t first);

#endif
