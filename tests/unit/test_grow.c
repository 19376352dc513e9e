/* Unit tests of grow_array (include/h5osfs/util/grow.h): capacities, contents kept, overflow; and
 * of the buffers chunk data comes in (include/h5osfs/util/bigbuf.h). */
#include "h5osfs/util/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/bigbuf.h"

#include "check.h"

static void test_doubles_from_first(void)
{
    int *v = NULL;
    size_t cap = 0, n = 0;
    for (int i = 0; i < 100; i++) {
        if (n == cap) {
            size_t before = cap;
            int *bigger = grow_array(v, &cap, n + 1, sizeof *bigger, 4);
            CHECK(bigger != NULL);
            if (!bigger)
                break;
            CHECK_INT(cap, before ? before * 2 : 4);
            v = bigger;
        }
        v[n++] = i;
    }
    for (int i = 0; i < 100; i++)
        CHECK_INT(v[i], i);
    CHECK_INT(cap, 128);
    free(v);
}

static void test_need_beyond_double(void)
{
    size_t cap = 0;
    char *v = grow_array(NULL, &cap, 1000, 1, 16);
    CHECK(v != NULL && cap == 1024);
    char *same = grow_array(v, &cap, 10, 1, 16); /* room already: nothing moves */
    CHECK(same == v && cap == 1024);
    free(v);
}

static void test_overflow_leaves_the_array(void)
{
    size_t cap = 4;
    uint64_t *v = malloc(cap * sizeof *v);
    CHECK(v != NULL);
    CHECK(grow_array(v, &cap, SIZE_MAX / 2, sizeof *v, 4) == NULL);
    CHECK_INT(cap, 4);
    cap = SIZE_MAX / 2 + 1; /* doubling would wrap */
    CHECK(grow_array(v, &cap, cap + 1, 1, 4) == NULL);
    CHECK(grow_array(v, &(size_t){ 0 }, 1, 0, 4) == NULL); /* no element size */
    free(v);
}

/* Huge-page buffers only where whole 2 MiB pages are nearly filled; the rest from malloc. */
static void test_bigbuf_sizes(void)
{
    const size_t mib2 = (size_t)2 << 20;
    struct {
        size_t size, cap; /* cap 0: the size itself */
    } cases[] = {
        { 0, 1 },                      /* one byte, as malloc(0) may give none */
        { 4096, 0 },                   /* small */
        { (1u << 20) + 1, 0 },         /* a 1 MiB chunk's body: a huge page would be half empty */
        { 2000001, mib2 },             /* a 2 MB chunk's body: 5% rounding */
        { mib2, mib2 },                /* exactly one */
        { mib2 + 1, 0 },               /* a second page almost empty */
        { 2 * mib2 - 4096, 2 * mib2 }, /* two, nearly full */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t cap = 0;
        unsigned char *p = bigbuf_alloc(cases[i].size, &cap);
        CHECK(p != NULL);
        if (!p)
            continue;
        CHECK_INT(cap, cases[i].cap ? cases[i].cap : cases[i].size);
        if (cap % mib2 == 0)
            CHECK_INT((uintptr_t)p % mib2, 0);
        memset(p, 0xa5, cap); /* all of it is usable */
        CHECK(p[cap - 1] == 0xa5);
        free(p);
    }
}

/* A huge-page buffer keeps its rounding; a buffer that grew past what it holds gives the rest
 * back, keeping its bytes. */
static void test_bigbuf_fit(void)
{
    size_t cap = 0, size = 2000001;
    unsigned char *p = bigbuf_alloc(size, &cap);
    CHECK(p != NULL);
    if (p)
        CHECK(bigbuf_fit(p, size, cap) == p);
    free(p);
    size_t grown = 4 * size;
    unsigned char *q = malloc(grown);
    CHECK(q != NULL);
    if (!q)
        return;
    memset(q, 0x5a, size);
    q = bigbuf_fit(q, size, grown);
    CHECK(q != NULL && q[0] == 0x5a && q[size - 1] == 0x5a);
    free(q);
}

int main(void)
{
    test_doubles_from_first();
    test_need_beyond_double();
    test_overflow_leaves_the_array();
    test_bigbuf_sizes();
    test_bigbuf_fit();
    return check_done("grow");
}
