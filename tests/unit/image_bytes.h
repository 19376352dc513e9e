/* The whole synthesised file of an image, read through a fresh chunk cache in reads of step
 * bytes: what the unit tests of the image builder, the commit and the staging area compare. */
#ifndef H5OSFS_TESTS_IMAGE_BYTES_H
#define H5OSFS_TESTS_IMAGE_BYTES_H

#include <errno.h>
#include <stdlib.h>

#include "h5osfs/cache/cache.h"
#include "h5osfs/image/image.h"

/* 0 with *out (malloc'd, *len bytes), or the first read's -errno (-EIO for a short read). */
static inline int image_read_all(struct image *img, size_t step, unsigned char **out, size_t *len)
{
    struct image_reader rd = { .cache = chunk_cache_new(16u << 20) };
    size_t size = (size_t)image_size(img);
    unsigned char *buf = malloc(size ? size : 1);
    int rc = rd.cache && buf ? 0 : -ENOMEM;
    for (size_t off = 0; off < size && rc == 0;) {
        ssize_t n = image_read(img, &rd, off, buf + off, size - off < step ? size - off : step);
        if (n <= 0)
            rc = n < 0 ? (int)n : -EIO;
        else
            off += (size_t)n;
    }
    chunk_cache_free(rd.cache);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = size;
    return 0;
}

#endif
