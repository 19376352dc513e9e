/*
 * vtab: a new version's chunk table per pooled dataset (doc/versions.md §4.2 step 3, "status
 * of the chunk tables"): one entry per chunk of the grid (the sealed chunks' pool URIs, the
 * base version's entries for the chunks a ref-mode r+ left in the pool, an absent chunk's fill
 * elsewhere), written in tiles, each tile copied in the store from the base version's table
 * where it is unchanged; and the base version's table read for that. The entry layout (offset
 * I64LE, size I32LE, file_uri) is read here too. Called by vroot.c and vseal.c; calls no other
 * file of the commit library.
 */
#ifndef H5OSFS_COMMIT_VTAB_H
#define H5OSFS_COMMIT_VTAB_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "h5osfs/commit/versions.h"
#include "h5osfs/domops/vtable.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"
#include "vkept.h"
#include "vseal.h"

#define VTAB_ENTRIES_MAX VTABLE_ENTRIES_MAX /* a table is held whole in memory while written */
#define VTAB_JSON_MAX (64u << 20)           /* an object's JSON, read */

/* A table entry's size, and its URI (NUL-terminated) into out. */
uint64_t vtab_entry_size(const unsigned char *e);
void vtab_entry_uri(const unsigned char *e, char out[VTABLE_URI_LEN]);

/* doc put at key as HSDS writes JSON, to a key that must not exist yet. 0 or -errno. */
int vtab_put_json(struct store *st, const char *key, const json_t *doc);

/* The base version's table of a dataset: its entries (NULL: none to use), id and tiling. */
struct base_tab {
    unsigned char *entries;
    char tid[SCHEMA_ID_BUF];
    struct vtable_geom g;
};

/*
 * The table of the base version's dataset that the dataset doc continues (same shape and
 * chunk shape; with same_grid_enough, the same grid is enough): base_key is that dataset's JSON
 * key under the base version (NULL: there is no base version). out->entries is NULL when there
 * is none to use (the base did not have the dataset, another shape, a layout it was not pooled
 * in, a table of another size than entries); free it. Only a failing store is an error
 * (-errno): without the table every chunk is sealed as before.
 */
int vtab_base_read(struct store *st, unsigned workers, const char *base_key, const json_t *doc,
                   uint64_t entries, int same_grid_enough, struct base_tab *out);

/* Each chunk's entry in the base version's table (none outside the grid; none at all for a
 * NULL table). */
void vtab_point_at_base(struct sealed *chunks, size_t n, const unsigned char *table,
                        const uint64_t *grid, int rank);

/*
 * The chunk table of a dataset of grid (rank dims) under vroot, with id tid (minted by the
 * caller): sealed chunks[0..n) at their indexes, kept chunks (NULL: none) with base's entries,
 * its tiles and its JSON put (vc->workers at once). 0; -EAGAIN when base names no entry for a
 * kept chunk (the commit ingests a whole root); -EOPNOTSUPP for more than VTAB_ENTRIES_MAX
 * entries; else -errno.
 */
int vtab_put(const struct versions_commit *vc, const char *pool, const char *vroot,
             const uint64_t *grid, int rank, const struct sealed *chunks, size_t n,
             const struct base_tab *base, const struct kept_list *kept,
             const char tid[SCHEMA_ID_BUF]);

#endif
