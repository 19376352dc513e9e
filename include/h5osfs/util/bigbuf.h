/*
 * bigbuf: buffers for chunk-sized data (a store's answer, a decoded chunk).
 *
 * Fresh memory is faulted in a page at a time: 512 faults per 2 MiB with 4 KiB pages, a third
 * of the daemon's CPU while it fetched 2 MB chunks over S3. A buffer that fills whole 2 MiB
 * huge pages to within 1/8 comes 2 MiB-aligned, rounded up to whole huge pages and marked for
 * transparent huge pages, so the kernel faults it in 2 MiB at a time; any other comes from
 * malloc. Either is released with free().
 */
#ifndef H5OSFS_BIGBUF_H
#define H5OSFS_BIGBUF_H

#include <stddef.h>

/* At least size bytes (size 0: one), *cap set to how many it holds; NULL when memory is
 * short. */
void *bigbuf_alloc(size_t size, size_t *cap);
/* p (cap bytes; 0: not known) holding size bytes, given back what it does not use, in place
 * where it can: unless its spare bytes are within the rounding a huge-page buffer keeps (a
 * shrink would split the page). p itself when nothing is given back or realloc fails. */
void *bigbuf_fit(void *p, size_t size, size_t cap);

#endif
