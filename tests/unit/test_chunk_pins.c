/* chunk_pins (src/image/chunk_pins.h): the first token of a chunk is kept, the same one passes,
 * another is refused; chunks of other datasets and other indexes are apart; the table grows
 * past many chunks without losing any. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "chunk_pins.h"

/* chunk_pins_check; its first-refusal flag lands in `first`. */
static int first;
static int check(struct chunk_pins *p, uint32_t dset, uint64_t chunk, uint64_t token)
{
    return chunk_pins_check(p, dset, chunk, token, &first);
}

static void test_first_token_is_kept(void)
{
    struct chunk_pins *p = chunk_pins_new();
    CHECK(p != NULL);
    uint64_t a = chunk_pin_token("etag-a"), b = chunk_pin_token("etag-b");
    CHECK(a != b && a > CHUNK_PIN_ABSENT && b > CHUNK_PIN_ABSENT);
    CHECK_INT(chunk_pin_token(""), CHUNK_PIN_UNKNOWN);
    CHECK_INT(check(p, 0, 7, a), 0);
    CHECK_INT(check(p, 0, 7, a), 0);
    CHECK_INT(check(p, 0, 7, b), -ESTALE);
    CHECK_INT(first, 1);                                  /* said once per chunk */
    CHECK_INT(check(p, 0, 7, CHUNK_PIN_ABSENT), -ESTALE); /* deleted since */
    CHECK_INT(first, 0);
    CHECK_INT(check(p, 0, 7, CHUNK_PIN_UNKNOWN), 0); /* nothing to compare */
    CHECK_INT(check(p, 1, 7, b), 0);                 /* another dataset */
    CHECK_INT(check(p, 0, 8, CHUNK_PIN_ABSENT), 0);  /* missing: fill */
    CHECK_INT(check(p, 0, 8, a), -ESTALE);           /* written since */
    CHECK_INT(first, 1);
    CHECK_INT(chunk_pins_count(p), 3);
    chunk_pins_free(p);
}

static void test_many_chunks(void)
{
    struct chunk_pins *p = chunk_pins_new();
    char etag[32];
    int bad = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        snprintf(etag, sizeof etag, "%llx", (unsigned long long)i);
        bad += check(p, (uint32_t)(i % 3), i << 20, chunk_pin_token(etag)) != 0;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(chunk_pins_count(p), 100000);
    for (uint64_t i = 0; i < 100000; i++) {
        snprintf(etag, sizeof etag, "%llx", (unsigned long long)i);
        bad += check(p, (uint32_t)(i % 3), i << 20, chunk_pin_token(etag)) != 0;
        bad += check(p, (uint32_t)(i % 3), i << 20, chunk_pin_token("other")) != -ESTALE;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(chunk_pins_count(p), 100000);
    chunk_pins_free(p);
}

int main(void)
{
    test_first_token_is_kept();
    test_many_chunks();
    return check_done("chunk_pins");
}
