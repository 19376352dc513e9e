/* The extent map alone: overlapping writes (last wins), chunk drops, freezing, lookups. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "extent.h"

static void fill(unsigned char *b, size_t n, unsigned char v)
{
    memset(b, v, n);
}

static void test_overwrites(void)
{
    struct extent_map *m = extent_map_new();
    unsigned char a[100], b[10], got[120];
    fill(a, sizeof a, 'a');
    fill(b, sizeof b, 'b');
    CHECK_INT(extent_write_bytes(m, 0, a, 100), 0);
    CHECK_INT(extent_write_bytes(m, 40, b, 10), 0); /* split in the middle */
    CHECK_INT(extent_write_bytes(m, 95, b, 10), 0); /* trims a tail, extends */
    extent_read(m, 0, got, 120);
    CHECK(got[39] == 'a' && got[40] == 'b' && got[49] == 'b' && got[50] == 'a');
    CHECK(got[94] == 'a' && got[95] == 'b' && got[104] == 'b' && got[105] == 0);

    struct extent_tag t = { 7, 42 };
    CHECK_INT(extent_write_chunk(m, 200, 50, t), 0);
    CHECK_INT(extent_write_chunk(m, 300, 50, (struct extent_tag){ 7, 43 }), 0);
    CHECK_INT(extent_write_bytes(m, 210, b, 5), 0); /* freed and reused: chunk gone */
    CHECK_INT(extent_write_chunk(m, 20, 10, (struct extent_tag){ 1, 1 }), 0); /* clears bytes */
    extent_read(m, 0, got, 40);
    CHECK(got[19] == 'a' && got[20] == 0 && got[29] == 0 && got[30] == 'a');

    CHECK_INT(extent_finish(m, 330), 0); /* chunk 43 ends past eof: dropped */
    CHECK_INT(extent_size(m), 330);
    size_t n, chunks = 0;
    const struct segment *s = extent_segments(m, &n);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) { /* sorted, disjoint, no holes */
        CHECK(s[i].off >= pos && s[i].len > 0 && s[i].kind != 0);
        pos = s[i].off + s[i].len;
        chunks += s[i].kind == SEGMENT_CHUNK;
    }
    CHECK(pos <= 330);
    CHECK_INT(chunks, 1);
    CHECK_INT(s[extent_find(m, 25)].kind, SEGMENT_CHUNK);
    CHECK_INT(s[extent_find(m, 0)].kind, SEGMENT_BYTES);
    CHECK(s[extent_find(m, 150)].off > 150); /* a hole: the next segment */
    CHECK_INT(s[extent_find(m, 212)].kind, SEGMENT_BYTES);
    CHECK_INT(extent_find(m, 329), n); /* a hole at the end */
    extent_map_free(m);
}

static void test_appends_merge(void)
{
    struct extent_map *m = extent_map_new();
    unsigned char b[8] = "12345678";
    for (int i = 0; i < 1000; i++)
        CHECK_INT(extent_write_bytes(m, (uint64_t)i * 8, b, 8), 0);
    CHECK_INT(extent_finish(m, 8000), 0);
    size_t n;
    extent_segments(m, &n);
    CHECK_INT(n, 1); /* appends became one run */
    extent_map_free(m);
}

static void test_empty(void)
{
    struct extent_map *m = extent_map_new();
    CHECK_INT(extent_finish(m, 0), 0);
    size_t n;
    extent_segments(m, &n);
    CHECK_INT(n, 0);
    extent_map_free(m);
}

/* Chunk extents of one dataset in one page are counted; other datasets' and pages' are not. */
#define PAGE 4096u
static void test_busiest_page(void)
{
    struct extent_map *m = extent_map_new();
    unsigned char meta[64] = { 0 };
    CHECK_INT(extent_write_bytes(m, 0, meta, sizeof meta), 0);
    for (uint64_t i = 0; i < 3; i++) /* page 0: 3 of dataset 1, after the bytes */
        CHECK_INT(extent_write_chunk(m, 64 + i * 16, 16, (struct extent_tag){ 1, i }), 0);
    for (uint64_t i = 0; i < 5; i++) /* page 1: one chunk each of 5 datasets */
        CHECK_INT(
            extent_write_chunk(m, PAGE + i * 16, 16, (struct extent_tag){ 10 + (uint32_t)i, 0 }),
            0);
    for (uint64_t i = 0; i < 4; i++) /* pages 2-3: 2 of dataset 2 in each */
        CHECK_INT(
            extent_write_chunk(m, 2 * PAGE + (PAGE - 32) + i * 16, 16, (struct extent_tag){ 2, i }),
            0);
    CHECK_INT(extent_finish(m, 4 * PAGE), 0);
    CHECK_INT(extent_busiest_page(m, PAGE), 3);
    extent_map_free(m);

    m = extent_map_new(); /* 256 chunks of 16 bytes: a whole page of one dataset */
    for (uint64_t i = 0; i < 300; i++)
        CHECK_INT(extent_write_chunk(m, 4000 + i * 16, 16, (struct extent_tag){ 0, i }), 0);
    CHECK_INT(extent_finish(m, 4000 + 300 * 16), 0); /* 6 in page 0, 256 in page 1 */
    CHECK_INT(extent_busiest_page(m, PAGE), 256);
    extent_map_free(m);

    m = extent_map_new();
    CHECK_INT(extent_finish(m, 0), 0);
    CHECK_INT(extent_busiest_page(m, PAGE), 0);
    extent_map_free(m);
}

int main(void)
{
    test_busiest_page();
    test_overwrites();
    test_appends_merge();
    test_empty();
    return check_done("extent");
}
