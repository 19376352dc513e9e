/* why: see include/h5osfs/util/why.h. */
#include "h5osfs/util/why.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int why_vreject(char *why, size_t why_len, const char *fmt, va_list ap)
{
    if (why && why_len > 0 && vsnprintf(why, why_len, fmt, ap) < 0)
        why[0] = '\0';
    return -EINVAL;
}

int why_reject(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = why_vreject(why, why_len, fmt, ap);
    va_end(ap);
    return rc;
}

void why_set(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    why_vreject(why, why_len, fmt, ap);
    va_end(ap);
}

int why_oom(char *why, size_t why_len)
{
    why_reject(why, why_len, "out of memory");
    return -ENOMEM;
}
