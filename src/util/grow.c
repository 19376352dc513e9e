/* grow: see include/h5osfs/util/grow.h. */
#include "h5osfs/util/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *grow_array(void *items, size_t *cap, size_t need, size_t elem_size, size_t first)
{
    if (need <= *cap && items)
        return items;
    size_t ncap = *cap ? *cap : (first ? first : 1);
    if (*cap && ncap <= SIZE_MAX / 2)
        ncap *= 2;
    while (ncap < need && ncap <= SIZE_MAX / 2)
        ncap *= 2;
    if (ncap < need || elem_size == 0 || ncap > SIZE_MAX / elem_size)
        return NULL;
    void *bigger = realloc(items, ncap * elem_size);
    if (bigger)
        *cap = ncap;
    return bigger;
}
