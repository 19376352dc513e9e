/* vtable: a kept version's chunk table; see include/h5osfs/domops/vtable.h. */
#include "h5osfs/domops/vtable.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <zlib.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"

#define JSON_MAX (64u << 20)
#define ZLIB_LEVEL 6

/* Entries per tile for a table of `entries`: VTABLE_TILE_ENTRIES, or enough that there are
 * about VTABLE_TILES_MAX tiles (a one-element r+ of 1e5 chunks: 4 tiles of 25,000, not 25:
 * each tile is a GET at the open, at the commit and at the measure of the new version). */
static uint64_t tile_target(const uint64_t *grid, int rank)
{
    uint64_t entries = 1;
    for (int k = 0; k < rank; k++)
        entries *= grid[k];
    uint64_t share = (entries + VTABLE_TILES_MAX - 1) / VTABLE_TILES_MAX;
    return share > VTABLE_TILE_ENTRIES ? share : VTABLE_TILE_ENTRIES;
}

void vtable_geom_new(struct vtable_geom *g, const uint64_t *grid, int rank)
{
    uint64_t trailing = 1, target = tile_target(grid, rank); /* trailing: entries of one step */
    int cut = 0;
    memset(g, 0, sizeof *g);
    g->rank = rank;
    g->deflated = 1;
    for (int k = rank - 1; k >= 0; k--) {
        g->grid[k] = grid[k];
        if (cut)
            g->tile[k] = 1;
        else if (trailing * grid[k] <= target)
            g->tile[k] = grid[k];
        else {
            uint64_t part = target / trailing;
            g->tile[k] = part ? part : 1;
            cut = 1;
        }
        trailing *= g->tile[k];
    }
    g->entries = 1;
    g->tiles = 1;
    for (int k = 0; k < rank; k++) {
        g->entries *= g->grid[k];
        g->tiles *= (g->grid[k] + g->tile[k] - 1) / g->tile[k];
    }
}

/* The dimension a tile cuts: the last whose tile is not the whole grid (0 if none). */
static int cut_dim(const struct vtable_geom *g)
{
    for (int k = g->rank - 1; k > 0; k--)
        if (g->tile[k] != g->grid[k])
            return k;
    return 0;
}

/* The entry type this module writes: offset, size, a fixed ASCII URI of VTABLE_URI_LEN. */
static int is_entry_type(const json_t *type)
{
    const json_t *fields = json_object_get(type, "fields");
    const json_t *uri = json_object_get(json_array_get(fields, 2), "type");
    return json_array_size(fields) == 3 &&
           json_integer_value(json_object_get(uri, "length")) == VTABLE_URI_LEN;
}

int vtable_geom_of(const json_t *doc, struct vtable_geom *g)
{
    int rank = 0, trank = 0;
    memset(g, 0, sizeof *g);
    if (!is_entry_type(json_object_get(doc, "type")) ||
        hjson_dims(json_object_get(json_object_get(doc, "shape"), "dims"), g->grid, &rank) != 0 ||
        hjson_dims(json_object_get(json_object_get(doc, "layout"), "dims"), g->tile, &trank) != 0 ||
        rank != trank)
        return -EOPNOTSUPP;
    g->rank = rank;
    g->entries = 1;
    g->tiles = 1;
    for (int k = 0; k < rank; k++) {
        /* the bucket's numbers: a product that wraps would size the table short of its tiles
         * (a tile, no larger than the grid in any dimension, has no more entries than it) */
        if (g->grid[k] == 0 || g->tile[k] == 0 || g->tile[k] > g->grid[k] ||
            __builtin_mul_overflow(g->entries, g->grid[k], &g->entries) ||
            g->entries > VTABLE_ENTRIES_MAX)
            return -EOPNOTSUPP;
        g->tiles *= (g->grid[k] + g->tile[k] - 1) / g->tile[k]; /* <= entries */
    }
    for (int k = 0; k < cut_dim(g); k++)
        if (g->tile[k] != 1)
            return -EOPNOTSUPP; /* not runs of rows */
    const json_t *f =
        json_array_get(json_object_get(json_object_get(doc, "creationProperties"), "filters"), 0);
    g->deflated = json_integer_value(json_object_get(f, "id")) == 1;
    return 0;
}

json_t *vtable_json(const char *tid, const char *root, const struct vtable_geom *g, double now)
{
    json_t *grid = hjson_dims_new(g->grid, g->rank), *tile = hjson_dims_new(g->tile, g->rank);
    /* "O" fails the pack on a NULL (ENOMEM), and takes its own reference: grid serves twice */
    json_t *doc =
        json_pack("{s:s,s:s,s:f,s:f,"
                  "s:{s:s,s:[{s:s,s:{s:s,s:s}},{s:s,s:{s:s,s:s}},{s:s,s:{s:s,s:s,s:s,s:i}}]},"
                  "s:{s:s,s:O,s:O},s:{},s:{s:[{s:s,s:i,s:i,s:s}]},s:{s:s,s:O}}",
                  "id", tid, "root", root, "created", now, "lastModified", now, "type", "class",
                  "H5T_COMPOUND", "fields", "name", "offset", "type", "class", "H5T_INTEGER",
                  "base", "H5T_STD_I64LE", "name", "size", "type", "class", "H5T_INTEGER", "base",
                  "H5T_STD_I32LE", "name", "file_uri", "type", "class", "H5T_STRING", "charSet",
                  "H5T_CSET_ASCII", "strPad", "H5T_STR_NULLPAD", "length", VTABLE_URI_LEN, "shape",
                  "class", "H5S_SIMPLE", "dims", grid, "maxdims", grid, "attributes",
                  "creationProperties", "filters", "class", "H5Z_FILTER_DEFLATE", "id", 1, "level",
                  ZLIB_LEVEL, "name", "gzip", "layout", "class", "H5D_CHUNKED", "dims", tile);
    json_decref(grid);
    json_decref(tile);
    return doc;
}

uint64_t vtable_tile_entries(const struct vtable_geom *g)
{
    uint64_t n = 1;
    for (int k = 0; k < g->rank; k++)
        n *= g->tile[k];
    return n;
}

void vtable_tile_span(const struct vtable_geom *g, uint64_t t, uint64_t *first, uint64_t *count,
                      uint64_t *idx)
{
    for (int k = g->rank - 1; k >= 0; k--) {
        uint64_t across = (g->grid[k] + g->tile[k] - 1) / g->tile[k];
        idx[k] = t % across;
        t /= across;
    }
    int j = cut_dim(g);
    *first = 0;
    *count = 1;
    for (int k = 0; k < g->rank; k++) {
        *first = *first * g->grid[k] + idx[k] * g->tile[k];
        if (k > j)
            *count *= g->grid[k];
    }
    uint64_t left = g->grid[j] - idx[j] * g->tile[j];
    *count *= left < g->tile[j] ? left : g->tile[j];
}

int vtable_tile_encode(const struct vtable_geom *g, const unsigned char *table, uint64_t t,
                       unsigned char **out, size_t *out_len)
{
    uint64_t first, count, idx[HJSON_DIMS_MAX];
    size_t raw_len = vtable_tile_entries(g) * VTABLE_ENTRY_BYTES;
    vtable_tile_span(g, t, &first, &count, idx);
    unsigned char *raw = calloc(1, raw_len);
    uLongf len = compressBound((uLong)raw_len);
    *out = malloc(len);
    if (!raw || !*out) {
        free(raw);
        free(*out);
        *out = NULL;
        return -ENOMEM;
    }
    memcpy(raw, table + first * VTABLE_ENTRY_BYTES, count * VTABLE_ENTRY_BYTES);
    int zrc = compress2(*out, &len, raw, (uLong)raw_len, ZLIB_LEVEL);
    free(raw);
    if (zrc != Z_OK) {
        free(*out);
        *out = NULL;
        return -ENOMEM; /* compress2 fails only for want of memory or of room, given compressBound */
    }
    *out_len = len;
    return 0;
}

/* A zlib stream's two header bytes (RFC 1950: deflate, a multiple of 31). */
static int is_zlib(const unsigned char *d, size_t len)
{
    return len >= 2 && (d[0] & 0x0f) == 8 && ((unsigned)d[0] << 8 | d[1]) % 31 == 0;
}

static int inflate_all(const unsigned char *in, size_t len, size_t max, unsigned char **out,
                       size_t *out_len)
{
    z_stream zs = { 0 };
    size_t cap = max < (1u << 20) ? max : (1u << 20);
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf || inflateInit(&zs) != Z_OK) {
        free(buf);
        return -ENOMEM;
    }
    zs.next_in = (unsigned char *)in; /* zlib does not write through next_in */
    zs.avail_in = (uInt)len;
    int zrc = Z_OK;
    while (zrc == Z_OK) {
        if (zs.total_out == cap) {
            unsigned char *grown = cap < max ? realloc(buf, cap * 2 > max ? max : cap * 2) : NULL;
            if (!grown)
                break;
            buf = grown;
            cap = cap * 2 > max ? max : cap * 2;
        }
        zs.next_out = buf + zs.total_out;
        zs.avail_out = (uInt)(cap - zs.total_out);
        zrc = inflate(&zs, Z_FINISH);
        if (zrc == Z_BUF_ERROR && zs.avail_out == 0)
            zrc = Z_OK; /* out of room: grow and go on */
    }
    *out_len = zs.total_out;
    inflateEnd(&zs);
    if (zrc != Z_STREAM_END || zs.avail_in != 0) {
        free(buf);
        return -EIO;
    }
    *out = buf;
    return 0;
}

int vtable_tile_decode(const void *data, size_t len, size_t max, unsigned char **out,
                       size_t *out_len)
{
    const unsigned char *d = data;
    *out = NULL;
    if (len > UINT32_MAX)
        return -EIO;
    if (is_zlib(d, len))
        return inflate_all(d, len, max, out, out_len);
    if (len > max || len % VTABLE_ENTRY_BYTES != 0 || (len > 0 && d[0] != 0))
        return -EIO; /* raw entries start with offset 0 */
    if (!(*out = malloc(len ? len : 1)))
        return -ENOMEM;
    memcpy(*out, d, len);
    *out_len = len;
    return 0;
}

struct read_job {
    struct store *st;
    const char *tid;
    const struct vtable_geom *g;
    unsigned char *table;
    int rc;
    pthread_mutex_t lock;
};

static int read_tile(struct read_job *j, uint64_t t)
{
    uint64_t first, count, idx[HJSON_DIMS_MAX];
    size_t want = vtable_tile_entries(j->g) * VTABLE_ENTRY_BYTES, len = 0;
    char key[STORE_KEY_MAX + 1];
    struct store_buf buf = { 0 };
    unsigned char *raw = NULL;
    vtable_tile_span(j->g, t, &first, &count, idx);
    int rc = schema_chunk_key(j->tid, idx, j->g->rank, -1, key, sizeof key);
    if (rc == 0)
        rc = store_get(j->st, key, want * 2 + 1024, &buf);
    if (rc == 0)
        rc = vtable_tile_decode(buf.data, buf.len, want, &raw, &len);
    if (rc == 0 && len != want)
        rc = -EIO; /* HSDS needs every tile whole (spec §6.5) */
    if (rc == 0)
        memcpy(j->table + first * VTABLE_ENTRY_BYTES, raw, count * VTABLE_ENTRY_BYTES);
    if (rc != 0 && rc != -ENOMEM)
        log_error("chunk table %s: tile %s cannot be read (%s)", j->tid, key, strerror(-rc));
    free(raw);
    store_buf_free(&buf);
    return rc;
}

static void read_one(void *ctx, size_t t)
{
    struct read_job *j = ctx;
    int rc = read_tile(j, t);
    pthread_mutex_lock(&j->lock);
    if (rc != 0 && j->rc == 0)
        j->rc = rc;
    pthread_mutex_unlock(&j->lock);
}

static int read_geometry(struct store *st, const char *tid, struct vtable_geom *g)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf = { 0 };
    int rc = schema_obj_key(tid, key, sizeof key);
    if (rc == 0)
        rc = store_get(st, key, JSON_MAX, &buf);
    json_t *doc = rc == 0 ? hjson_loadb((const char *)buf.data, buf.len, why, sizeof why) : NULL;
    store_buf_free(&buf);
    if (rc == 0 && !doc)
        rc = -EIO;
    if (rc == 0 && (rc = vtable_geom_of(doc, g)) != 0)
        log_error("chunk table %s: not a version's table (its type or tiling)", tid);
    else if (rc != 0 && rc != -ENOENT)
        log_error("chunk table %s: its JSON cannot be read (%s)", tid, strerror(-rc));
    json_decref(doc);
    return rc;
}

int vtable_read(struct store *st, const char *tid, unsigned workers, struct vtable_geom *g,
                unsigned char **out)
{
    *out = NULL;
    int rc = read_geometry(st, tid, g);
    if (rc != 0)
        return rc;
    struct read_job j = { st, tid,
                          g,  calloc(g->entries, VTABLE_ENTRY_BYTES),
                          0,  PTHREAD_MUTEX_INITIALIZER };
    if (!j.table)
        return -ENOMEM;
    pfor(g->tiles, workers ? workers : 1, read_one, &j);
    pthread_mutex_destroy(&j.lock);
    if (j.rc != 0) {
        free(j.table);
        return j.rc;
    }
    *out = j.table;
    return 0;
}
