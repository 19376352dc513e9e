/* why: see include/h5osfs/why.h. */
#include "h5osfs/why.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int why_reject(char *why, size_t why_len, const char *fmt, ...)
{
    if (why && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        if (vsnprintf(why, why_len, fmt, ap) < 0)
            why[0] = '\0';
        va_end(ap);
    }
    return -EINVAL;
}

int why_oom(char *why, size_t why_len)
{
    why_reject(why, why_len, "out of memory");
    return -ENOMEM;
}
