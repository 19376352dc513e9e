/* codec_int.h: what codec.c (decoding) and codec_encode.c share. */
#ifndef H5OSFS_CODEC_INT_H
#define H5OSFS_CODEC_INT_H

#include <limits.h>
#include <stddef.h>

/* Write the reason (if why has room) and return err. */
int codec_fail(char *why, size_t why_len, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Shorthands for functions that report through parameters named why and why_len. */
#define EINVAL_WHY(...) codec_fail(why, why_len, -EINVAL, __VA_ARGS__)
#define ENOMEM_WHY(n) codec_fail(why, why_len, -ENOMEM, "cannot allocate %zu bytes", (size_t)(n))

/* A level Python's int() refuses (HSDS fails such a dataset) or that does not fit an int:
 * reading does not need the level, so only codec_encode refuses it. */
#define BAD_LEVEL INT_MIN

#endif
