/*
 * fuzz_vtable: a kept version's chunk table as a bucket writer may have left it
 * (src/domops/vtable.c): the table's JSON, which says its shape and tiling, and its tiles
 * (zlib streams or raw entries), read back by vtable_read from a bucket in memory, as the
 * sweep, a commit's base, a restore and the Zarr view read them.
 *
 * Input: parts separated by the line "\n@@\n": 0 the table's .dataset.json, 1.. the bytes of
 * tiles 0, 1, ... (at most MAX_TILES; a tile with no part is missing).
 *
 * Checks beyond "no crash, no leak, no UB":
 *   - vtable_geom_of accepts only a geometry whose counts are exact (no product wrapped) and
 *     within VTABLE_ENTRIES_MAX, with tiles no larger than the grid; every tile's span lies
 *     inside the table and inside one tile;
 *   - vtable_tile_decode never gives more than it was allowed;
 *   - vtable_read answers 0 only with a table of exactly `entries` entries in which each given
 *     tile's entries stand where its span says; else -ENOENT, -EIO, -EOPNOTSUPP, -EFBIG (a
 *     tile object too large to be one) or -ENOMEM.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "h5osfs/domops/vtable.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store_test.h"
#include "fuzz_scratch.h"

#define SEP "\n@@\n"
#define MAX_TILES 4
#define TABLE_ID "d-5897df5c-0a297b92-d01f-57d482-a1f31a"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fuzz_fail("fuzz_vtable", what);
}

FUZZ_INIT_LOG_ONLY

struct part {
    const uint8_t *p;
    size_t len;
};

static size_t split(const uint8_t *data, size_t size, struct part *parts, size_t max)
{
    size_t n = 0, at = 0;
    for (; n < max && at <= size; n++) {
        const uint8_t *end = memmem(data + at, size - at, SEP, strlen(SEP));
        size_t len = end ? (size_t)(end - (data + at)) : size - at;
        parts[n] = (struct part){ data + at, len };
        at += len + strlen(SEP);
    }
    return n;
}

/* The geometry's counts, recomputed without wrapping: 0 when they are exact. */
static int counts_exact(const struct vtable_geom *g)
{
    unsigned __int128 entries = 1, tiles = 1, tile = 1;
    for (int k = 0; k < g->rank; k++) {
        if (g->grid[k] == 0 || g->tile[k] == 0 || g->tile[k] > g->grid[k])
            return -1;
        entries *= g->grid[k];
        tile *= g->tile[k];
        tiles *= (g->grid[k] + g->tile[k] - 1) / g->tile[k];
        if (entries > VTABLE_ENTRIES_MAX || tile > VTABLE_ENTRIES_MAX)
            return -1;
    }
    return entries == g->entries && tiles == g->tiles && tile == vtable_tile_entries(g) ? 0 : -1;
}

static void check_spans(const struct vtable_geom *g)
{
    for (uint64_t t = 0; t < g->tiles && t < 64; t++) {
        uint64_t first, count, idx[HJSON_DIMS_MAX];
        vtable_tile_span(g, t, &first, &count, idx);
        if (count == 0 || count > vtable_tile_entries(g) || first >= g->entries ||
            count > g->entries - first)
            fail("a tile's span is outside the table or larger than a tile");
    }
}

static void check_decode(const struct part *tile, size_t max)
{
    unsigned char *out = NULL;
    size_t len = 0;
    int rc = vtable_tile_decode(tile->p, tile->len, max, &out, &len);
    if (rc == 0 && len > max)
        fail("vtable_tile_decode gave more than it was allowed");
    if (rc != 0 && rc != -EIO && rc != -ENOMEM)
        fail("vtable_tile_decode returned an unexpected error");
    free(out);
}

/* Tile t's decoded entries stand at its span in the table. */
static void check_placed(const struct vtable_geom *g, const unsigned char *table,
                         const struct part *tile, uint64_t t)
{
    uint64_t first, count, idx[HJSON_DIMS_MAX];
    size_t want = vtable_tile_entries(g) * VTABLE_ENTRY_BYTES, len = 0;
    unsigned char *raw = NULL;
    vtable_tile_span(g, t, &first, &count, idx);
    if (vtable_tile_decode(tile->p, tile->len, want, &raw, &len) != 0 || len != want)
        fail("vtable_read used a tile that does not decode whole");
    if (memcmp(table + first * VTABLE_ENTRY_BYTES, raw, count * VTABLE_ENTRY_BYTES) != 0)
        fail("a tile's entries are not where its span says");
    free(raw);
}

/* The table's JSON (as given) and its tiles in a bucket, read back by vtable_read. */
static void check_read(const struct vtable_geom *g, const struct part *json,
                       const struct part *tiles, size_t n_tiles)
{
    struct store *st = NULL;
    char key[STORE_KEY_MAX + 1];
    if (store_mem_open(&st) != 0)
        return;
    if (schema_obj_key(TABLE_ID, key, sizeof key) != 0 ||
        store_put(st, key, json->p, json->len) != 0)
        fail("the table's JSON cannot be put");
    for (uint64_t t = 0; t < n_tiles && t < g->tiles; t++) {
        uint64_t first, count, idx[HJSON_DIMS_MAX];
        vtable_tile_span(g, t, &first, &count, idx);
        if (schema_chunk_key(TABLE_ID, idx, g->rank, -1, key, sizeof key) != 0 ||
            store_put(st, key, tiles[t].p, tiles[t].len) != 0)
            fail("a tile cannot be put");
    }
    struct vtable_geom got;
    unsigned char *table = NULL;
    int rc = vtable_read(st, TABLE_ID, 2, &got, &table);
    /* -EFBIG: a tile object larger than any encoding of a tile (the store's error) */
    if (rc != 0 && rc != -ENOENT && rc != -EIO && rc != -EOPNOTSUPP && rc != -ENOMEM &&
        rc != -EFBIG)
        fail("vtable_read returned an unexpected error");
    if (rc == 0) {
        if (got.entries != g->entries || got.tiles > n_tiles)
            fail("vtable_read answered without every tile");
        volatile unsigned char last = table[g->entries * VTABLE_ENTRY_BYTES - 1];
        (void)last;
        for (uint64_t t = 0; t < got.tiles; t++)
            check_placed(&got, table, &tiles[t], t);
    }
    free(table);
    store_close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct part parts[1 + MAX_TILES];
    size_t n = split(data, size, parts, 1 + MAX_TILES);
    char why[200];
    json_t *doc = hjson_loadb((const char *)parts[0].p, parts[0].len, why, sizeof why);
    struct vtable_geom g;
    int rc = doc ? vtable_geom_of(doc, &g) : -EINVAL;
    if (rc == 0 && counts_exact(&g) != 0)
        fail("vtable_geom_of accepted counts that wrapped or exceed VTABLE_ENTRIES_MAX");
    if (rc == 0) {
        check_spans(&g);
        for (size_t i = 1; i < n; i++)
            check_decode(&parts[i], vtable_tile_entries(&g) * VTABLE_ENTRY_BYTES);
    }
    json_decref(doc);
    if (rc == 0)
        check_read(&g, &parts[0], &parts[1], n - 1);
    return 0;
}
