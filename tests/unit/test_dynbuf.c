/* Unit tests of the byte buffer (include/h5osfs/util/dynbuf.h): appends of every kind, the
 * NUL after the bytes, max size, size overflow, the sticky error, take and reuse. */
#include "h5osfs/util/dynbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void test_appends(void)
{
    struct dynbuf b;
    dynbuf_init(&b, DYNBUF_NO_MAX);
    CHECK_STR(dynbuf_bytes(&b), "");
    CHECK_INT(dynbuf_append(&b, "ab\0c", 4), 0);
    CHECK_INT(dynbuf_appends(&b, "de"), 0);
    CHECK_INT(dynbuf_appendc(&b, 'f'), 0);
    CHECK_INT(dynbuf_appendf(&b, "%d-%s", 42, "x"), 0);
    CHECK_INT(dynbuf_len(&b), 11);
    CHECK(memcmp(dynbuf_bytes(&b), "ab\0cdef42-x", 12) == 0); /* with the NUL after */
    char *out = NULL;
    size_t len = 0;
    CHECK_INT(dynbuf_take(&b, &out, &len), 0);
    CHECK_INT(len, 11);
    CHECK(out && memcmp(out, "ab\0cdef42-x", 12) == 0);
    free(out);
    CHECK_INT(dynbuf_len(&b), 0); /* taken: empty and usable again */
    CHECK_INT(dynbuf_appends(&b, "again"), 0);
    CHECK_STR(dynbuf_bytes(&b), "again");
    dynbuf_free(&b);
}

/* Nothing appended still hands over a string: "". */
static void test_take_empty(void)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    char *out = NULL;
    CHECK_INT(dynbuf_take(&b, &out, NULL), 0);
    CHECK_STR(out, "");
    free(out);
}

/* Contents survive every doubling, including long appendf results. */
static void test_grows(void)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    char want[12];
    for (int i = 0; i < 10000; i++)
        CHECK_INT(dynbuf_appendf(&b, "%05d,", i % 100000), 0);
    CHECK_INT(dynbuf_len(&b), 60000);
    for (int i = 0; i < 10000; i += 997) {
        snprintf(want, sizeof want, "%05d,", i);
        CHECK(memcmp(dynbuf_bytes(&b) + 6 * (size_t)i, want, 6) == 0);
    }
    char big[5000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_INT(dynbuf_appendf(&b, "<%s>", big), 0);
    CHECK_INT(dynbuf_len(&b), 60000 + 5001);
    CHECK(dynbuf_bytes(&b)[60000] == '<' && dynbuf_bytes(&b)[65000] == '>');
    CHECK(dynbuf_bytes(&b)[65001] == '\0');
    dynbuf_free(&b);
}

/* Exactly max bytes fit; one more fails with -EOVERFLOW, frees the bytes and sticks. */
static void test_max(void)
{
    struct dynbuf b;
    dynbuf_init(&b, 8);
    CHECK_INT(dynbuf_appends(&b, "12345678"), 0);
    CHECK_INT(dynbuf_appendc(&b, '9'), -EOVERFLOW);
    CHECK_INT(dynbuf_error(&b), -EOVERFLOW);
    CHECK_INT(dynbuf_len(&b), 0);
    CHECK_STR(dynbuf_bytes(&b), "");
    CHECK_INT(dynbuf_appends(&b, ""), -EOVERFLOW); /* sticky, even for nothing */
    CHECK_INT(dynbuf_appendf(&b, "x"), -EOVERFLOW);
    char *out = (char *)"unchanged";
    CHECK_INT(dynbuf_take(&b, &out, NULL), -EOVERFLOW);
    CHECK(out == NULL);
    CHECK_INT(dynbuf_error(&b), 0); /* take cleared it: usable again */
    CHECK_INT(dynbuf_appendf(&b, "%s", "123456789"), -EOVERFLOW); /* appendf checks max too */
    dynbuf_free(&b);
    CHECK_INT(dynbuf_reserve(&b, 9), -EOVERFLOW);
    dynbuf_free(&b);
    dynbuf_init(&b, 0);
    CHECK_INT(dynbuf_appends(&b, ""), 0); /* nothing always fits */
    CHECK_INT(dynbuf_appendc(&b, 'a'), -EOVERFLOW);
    dynbuf_free(&b);
}

/* Lengths that wrap size_t are refused before any arithmetic can wrap. */
static void test_overflow(void)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    CHECK_INT(dynbuf_appends(&b, "abc"), 0);
    CHECK_INT(dynbuf_reserve(&b, SIZE_MAX), -EOVERFLOW);
    CHECK_INT(dynbuf_len(&b), 0);
    dynbuf_free(&b);
    CHECK_INT(dynbuf_appends(&b, "abc"), 0);
    CHECK_INT(dynbuf_reserve(&b, DYNBUF_NO_MAX - 2), -EOVERFLOW); /* len 3 + that passes max */
    dynbuf_free(&b);
    CHECK_INT(dynbuf_appends(&b, "abc"), 0);
    CHECK_INT(dynbuf_append(&b, "x", SIZE_MAX - 1), -EOVERFLOW);
    dynbuf_free(&b);
    /* within max but more than an array can grow to: memory, not the max, runs out (and no
     * allocator is asked for it) */
    CHECK_INT(dynbuf_reserve(&b, SIZE_MAX / 2 + 10), -ENOMEM);
    CHECK_INT(dynbuf_error(&b), -ENOMEM);
    CHECK_INT(dynbuf_appendc(&b, 'a'), -ENOMEM);
    dynbuf_free(&b);
}

/* A reserve makes the appends it covers unable to fail and moves nothing. */
static void test_reserve(void)
{
    struct dynbuf b = DYNBUF_INIT(100);
    CHECK_INT(dynbuf_reserve(&b, 100), 0);
    const char *p = dynbuf_bytes(&b);
    CHECK_STR(p, "");
    for (int i = 0; i < 100; i++)
        CHECK_INT(dynbuf_appendc(&b, 'a'), 0);
    CHECK(dynbuf_bytes(&b) == p);
    CHECK_INT(dynbuf_len(&b), 100);
    dynbuf_free(&b);
}

int main(void)
{
    test_appends();
    test_take_empty();
    test_grows();
    test_max();
    test_overflow();
    test_reserve();
    return check_done("dynbuf");
}
