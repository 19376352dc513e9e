/* Unit tests of grow_array (include/h5osfs/grow.h): capacities, contents kept, overflow. */
#include "h5osfs/grow.h"

#include <stdint.h>
#include <stdlib.h>

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

int main(void)
{
    test_doubles_from_first();
    test_need_beyond_double();
    test_overflow_leaves_the_array();
    return check_done("grow");
}
