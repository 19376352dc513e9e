/* Unit tests of a version's chunk table format (include/h5osfs/domops/vtable.h): the tiling
 * of a grid, tiles as spans of the row-major table, the zlib tiles and the raw tiles written
 * before tiling, and vtable_read over the memory store. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "check.h"
#include "h5osfs/domops/vtable.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store_test.h"

#define TID "d-11111111-22222222-3333-444444-555555"

/* Every entry of the grid is in exactly one tile, and no tile is larger than its dims say. */
static void check_spans_cover(const struct vtable_geom *g)
{
    unsigned char *seen = calloc(g->entries, 1);
    uint64_t idx[HJSON_DIMS_MAX];
    CHECK(seen != NULL);
    for (uint64_t t = 0; seen && t < g->tiles; t++) {
        uint64_t first, count;
        vtable_tile_span(g, t, &first, &count, idx);
        CHECK(count > 0 && count <= vtable_tile_entries(g));
        CHECK(first + count <= g->entries);
        for (uint64_t e = first; e < first + count && e < g->entries; e++)
            seen[e]++;
    }
    for (uint64_t e = 0; seen && e < g->entries; e++)
        CHECK_INT(seen[e], 1);
    free(seen);
}

static void test_tiling(void)
{
    struct vtable_geom g;
    uint64_t small[] = { 1000 }, mid[] = { 5000 }, big[] = { 100000 }, two[] = { 7, 1500 },
             wide[] = { 3, 50000 };
    vtable_geom_new(&g, small, 1);
    CHECK_INT(g.tiles, 1);
    CHECK_INT(g.tile[0], 1000);
    CHECK_INT(g.deflated, 1);
    vtable_geom_new(&g, mid, 1);
    CHECK_INT(g.tiles, 2);
    CHECK_INT(g.tile[0], VTABLE_TILE_ENTRIES);
    check_spans_cover(&g);
    vtable_geom_new(&g, big, 1); /* a large table: about VTABLE_TILES_MAX tiles */
    CHECK_INT(g.tiles, VTABLE_TILES_MAX);
    CHECK_INT(g.tile[0], 25000);
    check_spans_cover(&g);
    vtable_geom_new(&g, two, 2); /* rows of 1500: two whole rows per tile */
    CHECK_INT(g.tile[0], 2);
    CHECK_INT(g.tile[1], 1500);
    CHECK_INT(g.tiles, 4);
    check_spans_cover(&g);
    vtable_geom_new(&g, wide, 2); /* a row longer than a tile: cut within it */
    CHECK_INT(g.tile[0], 1);
    CHECK(g.tile[1] < 50000);
    check_spans_cover(&g);
}

static json_t *table_doc(uint64_t grid, uint64_t tile, int deflate)
{
    json_t *doc = json_pack(
        "{s:{s:s, s:[{s:s}, {s:s}, {s:s, s:{s:s, s:i}}]}, s:{s:[I]}, s:{s:[I]}, s:{}}", "type",
        "class", "H5T_COMPOUND", "fields", "name", "offset", "name", "size", "name", "file_uri",
        "type", "class", "H5T_STRING", "length", VTABLE_URI_LEN, "shape", "dims", (json_int_t)grid,
        "layout", "dims", (json_int_t)tile, "creationProperties");
    if (doc && deflate)
        json_object_set_new(
            json_object_get(doc, "creationProperties"), "filters",
            json_pack("[{s:s, s:i, s:s}]", "class", "H5Z_FILTER_DEFLATE", "id", 1, "name", "gzip"));
    return doc;
}

static void test_geometry_of_stored_tables(void)
{
    struct vtable_geom g;
    json_t *tiled = table_doc(5000, 4096, 1), *old = table_doc(5000, 5000, 0),
           *odd = table_doc(5000, 6000, 0);
    CHECK_INT(vtable_geom_of(tiled, &g), 0);
    CHECK_INT(g.tiles, 2);
    CHECK_INT(g.deflated, 1);
    CHECK_INT(vtable_geom_of(old, &g), 0); /* written before tiling: one raw chunk */
    CHECK_INT(g.tiles, 1);
    CHECK_INT(g.deflated, 0);
    CHECK_INT(vtable_geom_of(odd, &g), -EOPNOTSUPP); /* a tile larger than the table */
    json_object_set_new(
        json_object_get(
            json_array_get(json_object_get(json_object_get(tiled, "type"), "fields"), 2), "type"),
        "length", json_integer(64));
    CHECK_INT(vtable_geom_of(tiled, &g), -EOPNOTSUPP); /* not this module's entries */
    json_decref(tiled);
    json_decref(old);
    json_decref(odd);
}

/* A table's JSON is the bucket's: its counts are checked, never trusted to multiply. */
static void test_geometry_counts_are_bounded(void)
{
    struct vtable_geom g;
    json_t *at_max = table_doc(VTABLE_ENTRIES_MAX, 4096, 1),
           *past_max = table_doc(VTABLE_ENTRIES_MAX + 1ull, 4096, 1), *wrapped = table_doc(1, 1, 1);
    CHECK_INT(vtable_geom_of(at_max, &g), 0);
    CHECK_INT(g.entries, VTABLE_ENTRIES_MAX);
    CHECK_INT(vtable_geom_of(past_max, &g), -EOPNOTSUPP);
    /* 2^32 x 2^32 entries: a uint64_t product of 0, which once sized the table */
    json_object_set_new(json_object_get(wrapped, "shape"), "dims",
                        json_pack("[I, I]", (json_int_t)1 << 32, (json_int_t)1 << 32));
    json_object_set_new(json_object_get(wrapped, "layout"), "dims",
                        json_pack("[I, I]", (json_int_t)1, (json_int_t)1 << 32));
    CHECK_INT(vtable_geom_of(wrapped, &g), -EOPNOTSUPP);
    /* 4 x (2^62 + 1) wraps to 4, within the bound at every step: only the overflow check
     * stops it */
    json_object_set_new(json_object_get(wrapped, "shape"), "dims",
                        json_pack("[I, I]", (json_int_t)4, ((json_int_t)1 << 62) + 1));
    json_object_set_new(json_object_get(wrapped, "layout"), "dims",
                        json_pack("[I, I]", (json_int_t)1, ((json_int_t)1 << 62) + 1));
    CHECK_INT(vtable_geom_of(wrapped, &g), -EOPNOTSUPP);
    json_decref(at_max);
    json_decref(past_max);
    json_decref(wrapped);
}

static void fill(unsigned char *table, uint64_t n)
{
    memset(table, 0, n * VTABLE_ENTRY_BYTES);
    for (uint64_t e = 0; e < n; e++) {
        unsigned char *p = table + e * VTABLE_ENTRY_BYTES;
        p[8] = (unsigned char)(e & 0xff);
        p[9] = 0x10;
        snprintf((char *)p + 12, VTABLE_URI_LEN, "bucket/db/11111111-22222222/c/%032llx",
                 (unsigned long long)(e * 2654435761u));
    }
}

static void test_encode_decode(void)
{
    struct vtable_geom g;
    uint64_t grid[] = { 5000 };
    vtable_geom_new(&g, grid, 1);
    unsigned char *table = malloc(g.entries * VTABLE_ENTRY_BYTES), *tile = NULL, *back = NULL;
    size_t len = 0, back_len = 0;
    CHECK(table != NULL);
    fill(table, g.entries);
    CHECK_INT(vtable_tile_encode(&g, table, 1, &tile, &len), 0); /* the edge tile */
    CHECK(len < (5000 - 4096) * VTABLE_ENTRY_BYTES / 2);         /* deflated */
    CHECK_INT(vtable_tile_decode(tile, len, 4096 * VTABLE_ENTRY_BYTES, &back, &back_len), 0);
    CHECK_INT(back_len, 4096 * VTABLE_ENTRY_BYTES); /* whole, zero-padded */
    CHECK(memcmp(back, table + 4096 * VTABLE_ENTRY_BYTES, 904 * VTABLE_ENTRY_BYTES) == 0);
    CHECK(back[904 * VTABLE_ENTRY_BYTES + 12] == 0);
    free(back);
    /* at most max bytes: a bomb is refused, not inflated */
    CHECK_INT(vtable_tile_decode(tile, len, 1000, &back, &back_len), -EIO);
    /* raw entries (tables before tiling) are taken as they are; anything else is -EIO */
    CHECK_INT(vtable_tile_decode(table, 3 * VTABLE_ENTRY_BYTES, 1 << 20, &back, &back_len), 0);
    CHECK_INT(back_len, 3 * VTABLE_ENTRY_BYTES);
    free(back);
    CHECK_INT(vtable_tile_decode("hello", 5, 1 << 20, &back, &back_len), -EIO);
    tile[len / 2] ^= 0x55;
    CHECK_INT(vtable_tile_decode(tile, len, 4096 * VTABLE_ENTRY_BYTES, &back, &back_len), -EIO);
    free(tile);
    free(table);
}

static int put_text(struct store *st, const char *key, const json_t *doc)
{
    char *text = json_dumps(doc, 0);
    int rc = text ? store_put(st, key, text, strlen(text)) : -ENOMEM;
    free(text);
    return rc;
}

static void test_read(void)
{
    struct store *st = NULL;
    struct vtable_geom g, got;
    uint64_t grid[] = { 5000 }, idx[1], first, count;
    char key[STORE_KEY_MAX + 1];
    unsigned char *table = malloc(5000 * VTABLE_ENTRY_BYTES), *out = NULL;
    CHECK_INT(store_mem_open(&st), 0);
    CHECK(table != NULL);
    fill(table, 5000);
    vtable_geom_new(&g, grid, 1);
    json_t *doc = table_doc(5000, g.tile[0], 1);
    CHECK_INT(schema_obj_key(TID, key, sizeof key), 0);
    CHECK_INT(put_text(st, key, doc), 0);
    for (uint64_t t = 0; t < g.tiles; t++) {
        unsigned char *tile = NULL;
        size_t len = 0;
        vtable_tile_span(&g, t, &first, &count, idx);
        CHECK_INT(vtable_tile_encode(&g, table, t, &tile, &len), 0);
        CHECK_INT(schema_chunk_key(TID, idx, 1, -1, key, sizeof key), 0);
        CHECK_INT(store_put(st, key, tile, len), 0);
        free(tile);
    }
    CHECK_INT(vtable_read(st, TID, 2, &got, &out), 0);
    CHECK_INT(got.entries, 5000);
    CHECK(out && memcmp(out, table, 5000 * VTABLE_ENTRY_BYTES) == 0);
    free(out);
    CHECK_INT(store_delete(st, key), 0); /* a tile missing: the table cannot be read */
    CHECK_INT(vtable_read(st, TID, 2, &got, &out), -ENOENT);
    CHECK(out == NULL);
    json_decref(doc);
    free(table);
    store_close(st);
}

int main(void)
{
    test_tiling();
    test_geometry_of_stored_tables();
    test_geometry_counts_are_bounded();
    test_encode_decode();
    test_read();
    return check_done("vtable");
}
