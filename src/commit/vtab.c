/* vtab: a new version's chunk tables; see vtab.h. */
#include "vtab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/clock.h"
#include "h5osfs/util/pfor.h"

#define TABLE_ENTRIES_MAX VTAB_ENTRIES_MAX
#define URI_LEN VTABLE_URI_LEN /* fixed-length ASCII file_uri field */
#define ENTRY_BYTES VTABLE_ENTRY_BYTES
#define JSON_MAX VTAB_JSON_MAX

/* ---- a table entry: offset I64LE (always 0), size I32LE, file_uri ---- */

uint64_t vtab_entry_size(const unsigned char *e)
{
    uint64_t size = 0;
    for (int i = 0; i < 4; i++)
        size |= (uint64_t)e[8 + i] << (8 * i);
    return size;
}

void vtab_entry_uri(const unsigned char *e, char out[URI_LEN])
{
    memcpy(out, e + 12, URI_LEN - 1);
    out[URI_LEN - 1] = '\0';
}

static void put_entry(unsigned char *e, uint64_t size, const char *uri)
{
    memset(e, 0, ENTRY_BYTES);
    for (int i = 0; i < 4; i++)
        e[8 + i] = (unsigned char)(size >> (8 * i)); /* offset 0, I64LE; size I32LE */
    memcpy(e + 12, uri, strnlen(uri, URI_LEN - 1));
}

static json_t *table_json(const char *tid, const char *vroot, const struct vtable_geom *g)
{
    const uint64_t *grid = g->grid;
    int rank = g->rank;
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "{\"id\": \"%s\", \"root\": \"%s\", \"created\": 0, \"lastModified\": 0, "
                     "\"type\": {\"class\": \"H5T_COMPOUND\", "
                     "\"fields\": [{\"name\": \"offset\", \"type\": {\"class\": \"H5T_INTEGER\", "
                     "\"base\": \"H5T_STD_I64LE\"}}, {\"name\": \"size\", \"type\": {\"class\": "
                     "\"H5T_INTEGER\", \"base\": \"H5T_STD_I32LE\"}}, {\"name\": \"file_uri\", "
                     "\"type\": {\"class\": \"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", "
                     "\"strPad\": \"H5T_STR_NULLPAD\", \"length\": %d}}]}, \"shape\": null, "
                     "\"attributes\": {}, \"creationProperties\": {\"filters\": [{\"class\": "
                     "\"H5Z_FILTER_DEFLATE\", \"id\": 1, \"level\": 6, \"name\": \"gzip\"}]}, "
                     "\"layout\": null}",
                     tid, vroot, URI_LEN);
    /* members in the order HSDS writes them (spec §3.4): placeholders set below */
    json_t *doc = n > 0 && (size_t)n < sizeof text ? json_loads(text, 0, NULL) : NULL;
    json_t *dims = json_array(), *tile = json_array(), *shape = json_object(), *lay = json_object();
    for (int k = 0; dims && tile && k < rank; k++) {
        json_array_append_new(dims, json_integer((json_int_t)grid[k]));
        json_array_append_new(tile, json_integer((json_int_t)g->tile[k]));
    }
    if (!doc || !dims || !tile || !shape || !lay ||
        json_object_set_new(shape, "class", json_string("H5S_SIMPLE")) != 0 ||
        json_object_set(shape, "dims", dims) != 0 || json_object_set(shape, "maxdims", dims) != 0 ||
        json_object_set_new(lay, "class", json_string("H5D_CHUNKED")) != 0 ||
        json_object_set(lay, "dims", tile) != 0 || json_object_set(doc, "shape", shape) != 0 ||
        json_object_set(doc, "layout", lay) != 0 ||
        json_object_set_new(doc, "created", json_real(clock_wall())) != 0 ||
        json_object_set_new(doc, "lastModified", json_real(clock_wall())) != 0) {
        json_decref(doc);
        doc = NULL;
    }
    json_decref(dims);
    json_decref(tile);
    json_decref(shape);
    json_decref(lay);
    return doc;
}

int vtab_put_json(struct store *st, const char *key, const json_t *doc)
{
    char *text = NULL;
    int rc = hjson_dumps(doc, &text);
    if (rc == 0)
        rc = store_put_new(st, key, text, strlen(text));
    free(text);
    return rc;
}

/* ---- the new table ---- */

/* The entries kept chunks take from the base version's table: the same pool objects. 0, or
 * -EAGAIN when the base names none there (nothing to take: the commit ingests a whole root). */
static int take_kept_entries(unsigned char *table, const unsigned char *base,
                             const struct kept_list *kept, const uint64_t *grid, int rank)
{
    for (size_t i = 0; kept && i < kept->n; i++) {
        const uint64_t *idx = kept->idx + i * (size_t)rank;
        uint64_t lin = 0;
        for (int k = 0; k < rank; k++) {
            if (!base || kept->rank != rank || idx[k] >= grid[k])
                return -EAGAIN;
            lin = lin * grid[k] + idx[k];
        }
        if (vtab_entry_size(base + lin * ENTRY_BYTES) == 0)
            return -EAGAIN;
        memcpy(table + lin * ENTRY_BYTES, base + lin * ENTRY_BYTES, ENTRY_BYTES);
    }
    return 0;
}

struct tile_job {
    struct store *store;
    const struct vtable_geom *g;
    const unsigned char *table;
    const struct base_tab *base;
    const char *tid;
    int *rc; /* per tile */
};

/* Is tile t of the new table the base table's tile t, byte for byte as stored? */
static int same_as_base_tile(const struct tile_job *j, uint64_t first, uint64_t count)
{
    const struct base_tab *b = j->base;
    return b->entries && b->g.deflated && b->g.rank == j->g->rank &&
           memcmp(b->g.grid, j->g->grid, (size_t)j->g->rank * sizeof *b->g.grid) == 0 &&
           memcmp(b->g.tile, j->g->tile, (size_t)j->g->rank * sizeof *b->g.tile) == 0 &&
           memcmp(b->entries + first * ENTRY_BYTES, j->table + first * ENTRY_BYTES,
                  count * ENTRY_BYTES) == 0;
}

/* One tile of the new table: copied in the store from the base version's when unchanged (a
 * hard link on a local bucket, a CopyObject on S3: no bytes sent), else encoded and put. */
static void put_tile(void *ctx, size_t t)
{
    struct tile_job *j = ctx;
    char key[STORE_KEY_MAX + 1], from[STORE_KEY_MAX + 1];
    uint64_t first, count, idx[HJSON_DIMS_MAX];
    unsigned char *bytes = NULL;
    size_t len = 0;
    vtable_tile_span(j->g, t, &first, &count, idx);
    int rc = schema_chunk_key(j->tid, idx, j->g->rank, -1, key, sizeof key);
    if (rc == 0 && same_as_base_tile(j, first, count) &&
        schema_chunk_key(j->base->tid, idx, j->g->rank, -1, from, sizeof from) == 0 &&
        store_copy(j->store, from, key) == 0) {
        j->rc[t] = 0;
        return;
    }
    if (rc == 0)
        rc = vtable_tile_encode(j->g, j->table, t, &bytes, &len);
    if (rc == 0)
        rc = store_put_new(j->store, key, bytes, len);
    free(bytes);
    j->rc[t] = rc;
}

static int put_tiles(const struct versions_commit *vc, const struct vtable_geom *g,
                     const unsigned char *table, const struct base_tab *base, const char *tid)
{
    int *rcs = calloc(g->tiles, sizeof *rcs);
    if (!rcs)
        return -ENOMEM;
    struct tile_job job = { vc->store, g, table, base, tid, rcs };
    pfor(g->tiles, vc->workers ? vc->workers : 1, put_tile, &job);
    int rc = 0;
    for (uint64_t t = 0; rc == 0 && t < g->tiles; t++)
        rc = rcs[t];
    free(rcs);
    return rc;
}

int vtab_put(const struct versions_commit *vc, const char *pool, const char *vroot,
             const uint64_t *grid, int rank, const struct sealed *chunks, size_t n,
             const struct base_tab *base, const struct kept_list *kept,
             const char tid[SCHEMA_ID_BUF])
{
    char key[STORE_KEY_MAX + 1], absent[URI_LEN];
    struct vtable_geom g;
    vtable_geom_new(&g, grid, rank);
    if (g.entries > TABLE_ENTRIES_MAX)
        return -EOPNOTSUPP;
    unsigned char *table = malloc(g.entries * ENTRY_BYTES);
    if (!table)
        return -ENOMEM;
    snprintf(absent, sizeof absent, "%s/db/%.17s/c/0", vc->bucket_name, pool + 2);
    for (uint64_t e = 0; e < g.entries; e++)
        put_entry(table + e * ENTRY_BYTES, 0, absent); /* fill: a non-empty URI (spec §12) */
    if (take_kept_entries(table, base->entries, kept, grid, rank) != 0) {
        free(table);
        return -EAGAIN;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t lin = 0;
        for (int k = 0; k < rank; k++)
            lin = lin * grid[k] + chunks[i].idx[k];
        put_entry(table + lin * ENTRY_BYTES, chunks[i].size, chunks[i].uri);
    }
    json_t *doc = NULL;
    int rc = put_tiles(vc, &g, table, base, tid);
    if (rc == 0 && !(doc = table_json(tid, vroot, &g)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = schema_obj_key(tid, key, sizeof key);
    if (rc == 0)
        rc = vtab_put_json(vc->store, key, doc);
    json_decref(doc);
    free(table);
    return rc;
}

/* ---- the base version's table ---- */

/* The chunk grid of a dataset's JSON (shape over layout dims). 0 or -EINVAL. */
static int grid_of(const json_t *doc, uint64_t *grid, int *rank)
{
    uint64_t dims[HJSON_DIMS_MAX], cdims[HJSON_DIMS_MAX];
    int crank = 0;
    if (hjson_dims(json_object_get(json_object_get(doc, "shape"), "dims"), dims, rank) != 0 ||
        hjson_dims(json_object_get(json_object_get(doc, "layout"), "dims"), cdims, &crank) != 0 ||
        *rank != crank)
        return -EINVAL;
    for (int k = 0; k < *rank; k++) {
        if (cdims[k] == 0)
            return -EINVAL;
        grid[k] = dims[k] ? (dims[k] + cdims[k] - 1) / cdims[k] : 1;
    }
    return 0;
}

static int same_grid(const json_t *a, const json_t *b)
{
    uint64_t ga[HJSON_DIMS_MAX], gb[HJSON_DIMS_MAX];
    int ra = 0, rb = 0;
    return grid_of(a, ga, &ra) == 0 && grid_of(b, gb, &rb) == 0 && ra == rb &&
           memcmp(ga, gb, (size_t)ra * sizeof *ga) == 0;
}

/* With kept chunks (a ref-mode r+, which may resize a dataset within its grid: whole chunks
 * inside it keep their bytes), the same grid and chunk shape is enough; else the same shape. */
int vtab_base_read(struct store *st, unsigned workers, const char *base_key, const json_t *doc,
                   uint64_t entries, int same_grid_enough, struct base_tab *out)
{
    char why[200];
    struct store_buf buf = { 0 };
    memset(out, 0, sizeof *out);
    if (!base_key)
        return 0;
    int rc = store_get(st, base_key, JSON_MAX, &buf);
    if (rc != 0)
        return rc == -ENOENT ? 0 : rc; /* a dataset the base did not have */
    json_t *vdoc = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    const json_t *lay = json_object_get(json_object_get(vdoc, "creationProperties"), "layout");
    const char *tid = hjson_text(json_object_get(lay, "chunk_table"));
    int usable = tid && strlen(tid) < SCHEMA_ID_BUF &&
                 (json_equal(json_object_get(json_object_get(vdoc, "shape"), "dims"),
                             json_object_get(json_object_get(doc, "shape"), "dims")) ||
                  (same_grid_enough && same_grid(vdoc, doc))) &&
                 json_equal(json_object_get(json_object_get(vdoc, "layout"), "dims"),
                            json_object_get(json_object_get(doc, "layout"), "dims"));
    if (usable)
        snprintf(out->tid, sizeof out->tid, "%s", tid);
    json_decref(vdoc);
    if (!usable)
        return 0;
    rc = vtable_read(st, out->tid, workers, &out->g, &out->entries);
    if (rc == 0 && out->g.entries == entries)
        return 0;
    free(out->entries);
    out->entries = NULL;
    return rc == -ENOENT || rc == -EOPNOTSUPP || rc == -EIO || rc == 0 ? 0 : rc;
}

void vtab_point_at_base(struct sealed *chunks, size_t n, const unsigned char *table,
                        const uint64_t *grid, int rank)
{
    for (size_t i = 0; table && i < n; i++) {
        uint64_t lin = 0;
        int inside = 1;
        for (int k = 0; k < rank; k++) {
            inside = inside && chunks[i].idx[k] < grid[k];
            lin = lin * grid[k] + chunks[i].idx[k];
        }
        chunks[i].base_entry = inside ? table + lin * ENTRY_BYTES : NULL;
    }
}
