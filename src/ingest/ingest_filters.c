/*
 * ingest_filters: a dataset's HDF5 filter pipeline -> creationProperties.filters in the form
 * HSDS normalises them to (§5.2), as hsload/h5pyd send them:
 *
 *   deflate      {"class": "H5Z_FILTER_DEFLATE", "id": 1, "level": N, "name": "gzip"}
 *   shuffle      {"class": "H5Z_FILTER_SHUFFLE", "id": 2, "name": "shuffle"}
 *   lz4, zstd    {"class": "H5Z_FILTER_USER", "name": ..., "level": N, "id": ...}
 *   blosc        the compressor inside it, as above, and shuffle when it shuffles
 *
 * HDF5 decodes the data for us (H5Dread), so a filter only has to be one HSDS can encode with:
 * the rest (fletcher32, nbit, scaleoffset, szip, bitshuffle, lzf, unknown ids) is dropped, the
 * data stored decoded and compressed with zlib instead, and that is logged once per dataset.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "h5osfs/util/log.h"
#include "h5osfs/ingest/ingest_int.h"

#define FILTER_LZ4 32004
#define FILTER_ZSTD 32015
#define FILTER_BLOSC 32001
#define DEFAULT_LEVEL 5 /* HSDS's level when a filter gives none */
#define MAX_CD 16

static json_t *deflate_entry(int level)
{
    return json_pack("{s:s,s:i,s:i,s:s}", "class", "H5Z_FILTER_DEFLATE", "id", 1, "level", level,
                     "name", "gzip");
}

static json_t *user_entry(const char *name, int level, int id)
{
    return json_pack("{s:s,s:s,s:i,s:i}", "class", "H5Z_FILTER_USER", "name", name, "level", level,
                     "id", id);
}

static json_t *shuffle_entry(void)
{
    return json_pack("{s:s,s:i,s:s}", "class", "H5Z_FILTER_SHUFFLE", "id", 2, "name", "shuffle");
}

static int level_of(const unsigned *cd, size_t n, size_t at)
{
    return n > at && cd[at] <= 9 ? (int)cd[at] : DEFAULT_LEVEL;
}

/* The compressor of an HDF5 blosc filter (cd_values 4: level, 5: shuffle, 6: codec). */
static int blosc_entries(json_t *out, const unsigned *cd, size_t n)
{
    static const char *const codecs[] = { "blosclz", "lz4", "lz4hc", "snappy", "gzip", "zstd" };
    static const int ids[] = { 32001, 32004, 32005, 32003, 1, 32015 };
    unsigned codec = n > 6 ? cd[6] : 0;
    if (codec >= sizeof ids / sizeof ids[0])
        return 1;
    if (n > 5 && cd[5] == 1 && json_array_append_new(out, shuffle_entry()) != 0)
        return -ENOMEM;
    int level = level_of(cd, n, 4);
    json_t *e =
        ids[codec] == 1 ? deflate_entry(level) : user_entry(codecs[codec], level, ids[codec]);
    return json_array_append_new(out, e) == 0 ? 0 : -ENOMEM;
}

/* Append the HSDS form of one filter; 1: HSDS has none (dropped). */
static int filter_entry(json_t *out, H5Z_filter_t id, const unsigned *cd, size_t n)
{
    json_t *e;
    switch (id) {
    case H5Z_FILTER_DEFLATE:
        e = deflate_entry(level_of(cd, n, 0));
        break;
    case H5Z_FILTER_SHUFFLE:
        e = shuffle_entry();
        break;
    case FILTER_LZ4:
        e = user_entry("lz4", DEFAULT_LEVEL, FILTER_LZ4);
        break;
    case FILTER_ZSTD:
        e = user_entry("zstd", level_of(cd, n, 0), FILTER_ZSTD);
        break;
    case FILTER_BLOSC:
        return blosc_entries(out, cd, n);
    default:
        return 1;
    }
    return json_array_append_new(out, e) == 0 ? 0 : -ENOMEM;
}

static int has_compressor(const json_t *filters)
{
    size_t i;
    json_t *e;
    json_array_foreach(filters, i, e) if (strcmp(json_string_value(json_object_get(e, "class")),
                                                 "H5Z_FILTER_SHUFFLE") != 0) return 1;
    return 0;
}

json_t *ingest_filters_json(struct ingest *g, const char *path, hid_t dcpl)
{
    int nf = H5Pget_nfilters(dcpl);
    json_t *out = json_array();
    char dropped[200] = "";
    size_t dlen = 0;
    for (int i = 0; out && i < nf; i++) {
        unsigned flags, cd[MAX_CD], config;
        size_t n = MAX_CD;
        char name[64] = "";
        H5Z_filter_t id =
            H5Pget_filter2(dcpl, (unsigned)i, &flags, &n, cd, sizeof name, name, &config);
        int rc = id < 0 ? 1 : filter_entry(out, id, cd, n < MAX_CD ? n : MAX_CD);
        if (rc < 0) {
            json_decref(out);
            return NULL;
        }
        if (rc == 1 && dlen < sizeof dropped)
            dlen += (size_t)snprintf(dropped + dlen, sizeof dropped - dlen, "%s%s (%d)",
                                     dlen ? ", " : "", name[0] ? name : "unnamed", (int)id);
    }
    if (!out)
        return NULL;
    if (dlen) {
        if (!has_compressor(out) && json_array_append_new(out, deflate_entry(DEFAULT_LEVEL)))
            return json_decref(out), NULL;
        ingest_change(g, path,
                      "filters HSDS cannot apply dropped: %s; data stored decoded, "
                      "compressed with zlib",
                      dropped);
    }
    if (!dlen && json_array_size(out) > 0 && !has_compressor(out)) {
        /* shuffle alone: HSDS stores such chunks unshuffled yet unshuffles them on read
         * (its bug, §6.5), so the shuffle is the one thing that must not be kept */
        json_array_clear(out);
        ingest_change(g, path, "shuffle without compression dropped (HSDS misreads it)");
    }
    if (json_array_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

int ingest_filters_raw(hid_t dcpl, const struct codec_spec *stored)
{
    int nf = H5Pget_nfilters(dcpl);
    H5Z_filter_t ids[2] = { -1, -1 };
    for (int i = 0; i < nf && i < 2; i++) {
        unsigned flags, cd[MAX_CD], config;
        size_t n = MAX_CD;
        ids[i] = H5Pget_filter2(dcpl, (unsigned)i, &flags, &n, cd, 0, NULL, &config);
    }
    /* the file's chunk bytes are what HSDS reads for exactly these: the values as they are,
     * or a zlib stream of them (§6.5) */
    int deflate = (nf == 1 && ids[0] == H5Z_FILTER_DEFLATE),
        shuffled = nf == 2 && ids[0] == H5Z_FILTER_SHUFFLE && ids[1] == H5Z_FILTER_DEFLATE;
    if (nf != 0 && !deflate && !shuffled)
        return 0;
    if (!stored)
        return 1;
    /* and the filters stored for them say so (an r+ base's kept filters may not) */
    enum codec_shuffle shuffle = shuffled ? CODEC_SHUFFLE_BYTE : CODEC_SHUFFLE_NONE;
    return stored->shuffle == shuffle &&
           (nf == 0 ? !stored->compressed : stored->compressed && stored->zlib_fallback);
}
