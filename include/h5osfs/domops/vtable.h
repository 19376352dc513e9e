/*
 * vtable: a kept version's chunk table (doc/versions.md §3.2): the plain chunked compound
 * dataset {offset I64LE, size I32LE, file_uri ASCII[VTABLE_URI_LEN]} that an
 * H5D_CHUNKED_REF_INDIRECT layout reads by position (spec §8.3), one entry per chunk of the
 * dataset's grid.
 *
 * Tables are written in tiles of VTABLE_TILE_ENTRIES entries (more for a large table: at most
 * about VTABLE_TILES_MAX tiles, since every tile costs a few requests per commit and per open),
 * each a zlib stream (the deflate filter: HSDS decodes a non-blosc gzip chunk as zlib, spec
 * §6.5), so that a version costs a few bytes per entry and an unchanged tile can be copied in
 * the store from the version before instead of being written again. A tile is a run of whole rows: its dims are
 * 1 in the leading dimensions, the grid's in the trailing ones, and a part of the grid's in
 * between, so its entries are one contiguous span of the row-major table. Tables written
 * before (one raw chunk over the whole grid) have that form too and are read as they are.
 */
#ifndef H5OSFS_VTABLE_H
#define H5OSFS_VTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/store/store.h"

#define VTABLE_URI_LEN 128
#define VTABLE_ENTRY_BYTES (8 + 4 + VTABLE_URI_LEN)
#define VTABLE_TILE_ENTRIES 4096
#define VTABLE_TILES_MAX 4
/* Entries of a table at most, and of one tile: a table is held whole in memory (140 MiB at
 * this bound). A stored table's JSON that says more is refused (vtable_geom_of). */
#define VTABLE_ENTRIES_MAX (1u << 20)

struct vtable_geom {
    int rank;
    uint64_t grid[HJSON_DIMS_MAX]; /* the table's shape: the dataset's chunk grid */
    uint64_t tile[HJSON_DIMS_MAX]; /* its chunk dims */
    uint64_t entries;              /* product of grid */
    uint64_t tiles;                /* number of tiles */
    int deflated;                  /* tiles are zlib streams (else raw entries) */
};

/* The tiling a new table over grid gets (deflated). */
void vtable_geom_new(struct vtable_geom *g, const uint64_t *grid, int rank);
/* The tiling of a stored table's JSON: 0, or -EOPNOTSUPP for a table this module did not
 * write (another entry type, tiles that are not runs of rows, more than VTABLE_ENTRIES_MAX
 * entries). */
int vtable_geom_of(const json_t *table_doc, struct vtable_geom *g);

/* The JSON of table tid under root (HSDS's member order, spec §3.4): the entry type, the
 * shape of g's grid, deflate, g's tiles as its chunks; created and lastModified now. NULL on
 * ENOMEM. */
json_t *vtable_json(const char *tid, const char *root, const struct vtable_geom *g, double now);

/* Tile t's first entry (row-major in the table), its number of entries inside the grid, and
 * its chunk index (rank numbers, for schema_chunk_key). */
void vtable_tile_span(const struct vtable_geom *g, uint64_t t, uint64_t *first, uint64_t *count,
                      uint64_t *idx);
/* Entries a stored tile holds, edge padding included. */
uint64_t vtable_tile_entries(const struct vtable_geom *g);

/* Tile t of table (g->entries entries) as its stored bytes (malloc'd into *out). 0 or -ENOMEM. */
int vtable_tile_encode(const struct vtable_geom *g, const unsigned char *table, uint64_t t,
                       unsigned char **out, size_t *out_len);
/* A stored tile's entries (raw or a zlib stream, told by its first bytes: a raw tile starts
 * with offset 0), at most max bytes, into *out (malloc'd). 0, -EIO (not a tile), -ENOMEM. */
int vtable_tile_decode(const void *data, size_t len, size_t max, unsigned char **out,
                       size_t *out_len);

/* The whole table tid (g->entries entries, every tile read, edge padding dropped) into *out
 * (malloc'd), its geometry into *g. -ENOENT (no such table or a tile missing), -EOPNOTSUPP (see
 * vtable_geom_of), -EIO (a tile that does not decode), or the store's error. Logged. */
int vtable_read(struct store *st, const char *tid, unsigned workers, struct vtable_geom *g,
                unsigned char **out);

#endif
