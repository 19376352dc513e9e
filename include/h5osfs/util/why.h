/*
 * why: the short reason that goes with an error from a parser, converter or builder.
 * Callers pass a buffer (why, why_len) that may be NULL or empty; it is always left a valid
 * string. One helper for every module, so every reason is written the same way.
 */
#ifndef H5OSFS_WHY_H
#define H5OSFS_WHY_H

#include <stdarg.h>
#include <stddef.h>

/* Write the reason; returns -EINVAL, so "return why_reject(why, len, ...);" reads naturally. */
int why_reject(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same with a va_list, for helpers that take their own format. */
int why_vreject(char *why, size_t why_len, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Write the reason that goes with another error (-EIO, -ENOMEM, an invalid hid), which the
 * caller returns itself. */
void why_set(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "out of memory"; returns -ENOMEM. */
int why_oom(char *why, size_t why_len);

#endif
