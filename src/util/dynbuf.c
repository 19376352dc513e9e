/* dynbuf: see include/h5osfs/util/dynbuf.h. */
#include "h5osfs/util/dynbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"

/* Most appends are short: a first allocation this size saves the first few doublings. */
#define DYNBUF_FIRST 64

void dynbuf_init(struct dynbuf *b, size_t max)
{
    *b = (struct dynbuf)DYNBUF_INIT(max);
}

static int fail(struct dynbuf *b, int err)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->err = err;
    return err;
}

int dynbuf_reserve(struct dynbuf *b, size_t more)
{
    if (b->err)
        return b->err;
    if (more > b->max || b->len > b->max - more)
        return fail(b, -EOVERFLOW);
    size_t need = b->len + more + 1; /* the NUL; max is at most SIZE_MAX - 1 */
    if (need <= b->cap)
        return 0;
    char *grown = grow_array(b->p, &b->cap, need, 1, DYNBUF_FIRST);
    if (!grown)
        return fail(b, -ENOMEM);
    if (!b->p)
        grown[0] = '\0';
    b->p = grown;
    return 0;
}

int dynbuf_append(struct dynbuf *b, const void *bytes, size_t n)
{
    int rc = dynbuf_reserve(b, n);
    if (rc != 0)
        return rc;
    if (n > 0)
        memcpy(b->p + b->len, bytes, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int dynbuf_appends(struct dynbuf *b, const char *s)
{
    return dynbuf_append(b, s, strlen(s));
}

int dynbuf_appendc(struct dynbuf *b, char c)
{
    return dynbuf_append(b, &c, 1);
}

int dynbuf_appendf(struct dynbuf *b, const char *fmt, ...)
{
    if (b->err)
        return b->err;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return fail(b, -EINVAL);
    int rc = dynbuf_reserve(b, (size_t)n);
    if (rc != 0)
        return rc;
    va_start(ap, fmt);
    (void)vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap); /* the same text, now with room */
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int dynbuf_error(const struct dynbuf *b)
{
    return b->err;
}

size_t dynbuf_len(const struct dynbuf *b)
{
    return b->len;
}

const char *dynbuf_bytes(const struct dynbuf *b)
{
    return b->p ? b->p : "";
}

int dynbuf_take(struct dynbuf *b, char **out, size_t *len)
{
    int rc = dynbuf_reserve(b, 0); /* nothing appended yet: "" is still a string to hand over */
    *out = NULL;
    if (len)
        *len = 0;
    if (rc != 0) {
        dynbuf_free(b);
        return rc;
    }
    *out = b->p;
    if (len)
        *len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return 0;
}

void dynbuf_free(struct dynbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->err = 0;
}
