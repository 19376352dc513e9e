/* bigbuf: see include/h5osfs/util/bigbuf.h. */
#include "h5osfs/util/bigbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

/* Huge pages pay when the rounding wastes at most 1/8 of what is asked for. */
static int slack_ok(size_t size, size_t cap)
{
    return cap - size <= size / 8;
}

static size_t huge_size(size_t size)
{
    if (size < HUGE_PAGE - HUGE_PAGE / 8 || size > SIZE_MAX - HUGE_PAGE)
        return 0;
    size_t rounded = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    return slack_ok(size, rounded) ? rounded : 0;
}

void *bigbuf_alloc(size_t size, size_t *cap)
{
    size_t huge = huge_size(size);
    void *p = NULL;
    if (huge && posix_memalign(&p, HUGE_PAGE, huge) == 0) {
        /* advice only: without transparent huge pages it is still a good buffer */
        (void)madvise(p, huge, MADV_HUGEPAGE);
        *cap = huge;
        return p;
    }
    p = malloc(size ? size : 1);
    *cap = p ? (size ? size : 1) : 0;
    return p;
}

void *bigbuf_fit(void *p, size_t size, size_t cap)
{
    if (cap >= size && slack_ok(size, cap))
        return p;
    void *fit = realloc(p, size ? size : 1);
    return fit ? fit : p;
}
