/* test_zarr: the Zarr view's contract (include/h5osfs/zarr/zarr.h) over a domain written into
 * the memory store: .zarray texts (dtype with byte order, fill values, compressor), .zattrs
 * (dimension scales, hidden attributes), chunk names, forged keys, chunks served as stored or
 * refused, and the kerchunk references. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h5osfs/store/store_test.h"
#include "h5osfs/zarr/zarr.h"

#define ROOT "g-2dd05233-5ca263d5-a558-dabbd4-2aeb5d"
#define DB "db/2dd05233-5ca263d5/"
#define D_BE "d-2dd05233-5ca263d5-346b-a35040-52759d"  /* >i2, raw, 2 x 2 chunks, fill 7 */
#define D_NAN "d-2dd05233-5ca263d5-49e2-7c3388-4c6169" /* <f8 gzip, fill NaN, dims "x" */
#define D_X "d-2dd05233-5ca263d5-7c10-802727-d6128d"   /* the scale x */
#define D_CMP "d-2dd05233-5ca263d5-97f2-9c6688-fc45f3" /* compound, a string member */
#define D_REF "d-2dd05233-5ca263d5-4770-62ef00-f16e5b" /* references: left out */

static struct store *st;

static void put(const char *key, const char *text)
{
    CHECK_INT(store_put(st, key, text, strlen(text)), 0);
}

static void put_bytes(const char *key, const void *bytes, size_t n)
{
    CHECK_INT(store_put(st, key, bytes, n), 0);
}

static char *file(struct zarr_view *v, const char *inner, int *rc)
{
    unsigned char *data = NULL;
    size_t len = 0;
    *rc = zarr_read(v, "/t.h5", ROOT, inner, &data, &len);
    char *text = *rc == 0 ? calloc(1, len + 1) : NULL;
    if (text)
        memcpy(text, data, len);
    free(data);
    return text;
}

static void check_file(struct zarr_view *v, const char *inner, const char *want)
{
    int rc;
    char *got = file(v, inner, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(got, want);
    free(got);
}

static void write_domain(void)
{
    put(DB ".group.json",
        "{\"id\": \"" ROOT "\", \"root\": \"" ROOT "\", \"created\": 1, \"lastModified\": 1, "
        "\"links\": {\"be\": {\"id\": \"" D_BE "\", \"class\": \"H5L_TYPE_HARD\"}, "
        "\"t\": {\"id\": \"" D_NAN "\", \"class\": \"H5L_TYPE_HARD\"}, "
        "\"x\": {\"id\": \"" D_X "\", \"class\": \"H5L_TYPE_HARD\"}, "
        "\"cmp\": {\"id\": \"" D_CMP "\", \"class\": \"H5L_TYPE_HARD\"}, "
        "\"refs\": {\"id\": \"" D_REF "\", \"class\": \"H5L_TYPE_HARD\"}, "
        "\".zarray\": {\"id\": \"" D_BE "\", \"class\": \"H5L_TYPE_HARD\"}, "
        "\"soft\": {\"h5path\": \"/be\", \"class\": \"H5L_TYPE_SOFT\"}}, "
        "\"attributes\": {\"title\": {\"type\": {\"class\": \"H5T_STRING\", \"charSet\": "
        "\"H5T_CSET_UTF8\", \"length\": \"H5T_VARIABLE\"}, \"shape\": {\"class\": "
        "\"H5S_SCALAR\"}, \"value\": \"hello\"}, \"_NCProperties\": {\"type\": {\"class\": "
        "\"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 5}, \"shape\": {\"class\": "
        "\"H5S_SCALAR\"}, \"value\": \"x=1\"}}}");
    put(DB "d/346b-a35040-52759d/.dataset.json",
        "{\"id\": \"" D_BE "\", \"type\": {\"class\": \"H5T_INTEGER\", \"base\": "
        "\"H5T_STD_I16BE\"}, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [3, 4]}, "
        "\"attributes\": {}, \"creationProperties\": {\"fillValue\": 7}, \"layout\": "
        "{\"class\": \"H5D_CHUNKED\", \"dims\": [2, 2]}}");
    static const unsigned char chunk[8] = { 0, 1, 0, 2, 0, 3, 0, 4 };
    put_bytes(DB "d/346b-a35040-52759d/1_1", chunk, sizeof chunk);
    put_bytes(DB "d/346b-a35040-52759d/0_1", chunk, 6);   /* cut short */
    put_bytes(DB "d/346b-a35040-52759d/2_0", chunk, 8);   /* outside the grid: forged */
    put_bytes(DB "d/346b-a35040-52759d/0_0_0", chunk, 8); /* another rank: forged */
    put(DB "d/49e2-7c3388-4c6169/.dataset.json",
        "{\"id\": \"" D_NAN "\", \"type\": {\"class\": \"H5T_FLOAT\", \"base\": "
        "\"H5T_IEEE_F64LE\"}, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [5], "
        "\"maxdims\": [0]}, \"attributes\": {\"DIMENSION_LIST\": {\"type\": {\"class\": "
        "\"H5T_VLEN\"}, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [1]}, \"value\": "
        "[[\"datasets/" D_X "\"]]}, \"_FillValue\": {\"type\": \"H5T_IEEE_F64LE\", \"shape\": "
        "{\"class\": \"H5S_SIMPLE\", \"dims\": [1]}, \"value\": [NaN]}, \"scale\": {\"type\": "
        "\"H5T_IEEE_F32LE\", \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [1]}, "
        "\"value\": [\"0.5\"]}}, \"creationProperties\": {\"fillValue\": \"nan\", \"filters\": "
        "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"id\": 1, \"level\": 6, \"name\": \"gzip\"}]}, "
        "\"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [5]}}");
    put(DB "d/7c10-802727-d6128d/.dataset.json",
        "{\"id\": \"" D_X "\", \"type\": \"H5T_STD_U8LE\", \"shape\": {\"class\": "
        "\"H5S_SIMPLE\", \"dims\": [5]}, \"attributes\": {\"CLASS\": {\"type\": {\"class\": "
        "\"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 16}, \"shape\": {\"class\": "
        "\"H5S_SCALAR\"}, \"value\": \"DIMENSION_SCALE\"}}, \"layout\": {\"class\": "
        "\"H5D_CHUNKED\", \"dims\": [5]}}");
    put(DB "d/97f2-9c6688-fc45f3/.dataset.json",
        "{\"id\": \"" D_CMP "\", \"type\": {\"class\": \"H5T_COMPOUND\", \"fields\": [{\"name\": "
        "\"a\", \"type\": \"H5T_STD_I32LE\"}, {\"name\": \"s\", \"type\": {\"class\": "
        "\"H5T_STRING\", \"charSet\": \"H5T_CSET_ASCII\", \"length\": 3}}, {\"name\": \"v\", "
        "\"type\": {\"class\": \"H5T_ARRAY\", \"dims\": [2], \"base\": \"H5T_IEEE_F32BE\"}}]}, "
        "\"shape\": {\"class\": \"H5S_SCALAR\"}, \"attributes\": {}, \"layout\": {\"class\": "
        "\"H5D_CHUNKED\", \"dims\": [1]}}");
    put(DB "d/4770-62ef00-f16e5b/.dataset.json",
        "{\"id\": \"" D_REF "\", \"type\": {\"class\": \"H5T_REFERENCE\", \"base\": "
        "\"H5T_STD_REF_OBJ\"}, \"shape\": {\"class\": \"H5S_SIMPLE\", \"dims\": [2]}, "
        "\"attributes\": {}, \"layout\": {\"class\": \"H5D_CHUNKED\", \"dims\": [2]}}");
}

static void test_metadata(struct zarr_view *v)
{
    check_file(v, ".zgroup", "{\"zarr_format\": 2}");
    check_file(v, ".zattrs", "{\"title\": \"hello\"}"); /* _NCProperties is netCDF's own */
    check_file(v, "be/.zarray",
               "{\"chunks\": [2, 2], \"compressor\": null, \"dimension_separator\": \".\", "
               "\"dtype\": \">i2\", \"fill_value\": 7, \"filters\": null, \"order\": \"C\", "
               "\"shape\": [3, 4], \"zarr_format\": 2}");
    check_file(v, "be/.zattrs", "{\"_ARRAY_DIMENSIONS\": [\"phony_dim_0\", \"phony_dim_1\"]}");
    check_file(v, "t/.zarray",
               "{\"chunks\": [5], \"compressor\": {\"blocksize\": 0, \"clevel\": 6, \"cname\": "
               "\"zlib\", \"id\": \"blosc\", \"shuffle\": 0}, \"dimension_separator\": \".\", "
               "\"dtype\": \"<f8\", \"fill_value\": \"NaN\", \"filters\": null, \"order\": \"C\", "
               "\"shape\": [5], \"zarr_format\": 2}");
    /* the scale's name, one-element attributes as the element, numeric strings as numbers */
    check_file(v, "t/.zattrs", "{\"scale\": 0.5, \"_ARRAY_DIMENSIONS\": [\"x\"]}");
    check_file(v, "x/.zattrs", "{\"_ARRAY_DIMENSIONS\": [\"x\"]}");
    check_file(v, "cmp/.zarray",
               "{\"chunks\": [], \"compressor\": null, \"dimension_separator\": \".\", "
               "\"dtype\": [[\"a\", \"<i4\"], [\"s\", \"|S3\"], [\"v\", \">f4\", [2]]], "
               "\"fill_value\": null, \"filters\": null, \"order\": \"C\", "
               "\"shape\": [], \"zarr_format\": 2}");
    /* a scalar is a netCDF variable: without _FillValue its fill is a chunk file (zeros) */
    int rc;
    char *fill = file(v, "cmp/0", &rc);
    CHECK(rc == 0 && fill && memcmp(fill, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 15) == 0);
    free(fill);
}

static void test_consolidated(struct zarr_view *v)
{
    int rc;
    char *text = file(v, ".zmetadata", &rc);
    CHECK_INT(rc, 0);
    CHECK(text && strncmp(text,
                          "{\"metadata\": {\".zgroup\": {\"zarr_format\": 2}, "
                          "\".zattrs\": {\"title\": \"hello\"}, \"be/.zarray\": {",
                          70) == 0);
    CHECK(text && strstr(text, "\"t/.zattrs\": {\"scale\": 0.5, \"_ARRAY_DIMENSIONS\": [\"x\"]}"));
    CHECK(text && strstr(text, "\"fill_value\": \"NaN\""));
    CHECK(text && strstr(text, "}, \"zarr_consolidated_format\": 1}"));
    free(text);
    free(file(v, "be/.zmetadata", &rc));
    CHECK_INT(rc, -ENOENT); /* the root's only */
}

static void test_listing(struct zarr_view *v)
{
    struct zarr_entry *e;
    size_t n;
    CHECK_INT(zarr_list(v, "/t.h5", ROOT, "", &e, &n), 0);
    /* no refs (no dtype), no ".zarray" (a name Zarr reserves), no soft link */
    const char *want[] = { ".zattrs", ".zgroup", ".zmetadata", "be", "cmp", "t", "x" };
    CHECK_INT(n, 7);
    for (size_t i = 0; i < n && i < 7; i++)
        CHECK_STR(e[i].name, want[i]);
    zarr_entries_free(e, n);
    CHECK_INT(zarr_list(v, "/t.h5", ROOT, "be", &e, &n), 0);
    CHECK_INT(n, 4); /* .zarray .zattrs 0.1 1.1: not the forged keys */
    if (n == 4) {
        CHECK_STR(e[2].name, "0.1");
        CHECK_STR(e[3].name, "1.1");
    }
    zarr_entries_free(e, n);
    CHECK_INT(zarr_list(v, "/t.h5", ROOT, "be/.zarray", &e, &n), -ENOTDIR);
    CHECK_INT(zarr_list(v, "/t.h5", ROOT, "nope", &e, &n), -ENOENT);
}

static void test_chunks(struct zarr_view *v)
{
    enum zarr_kind kind;
    uint64_t size;
    int rc;
    CHECK_INT(zarr_stat(v, "/t.h5", ROOT, "be/1.1", &kind, &size), 0);
    CHECK_INT(kind, ZARR_FILE);
    CHECK_INT(size, 8); /* the store's size */
    char *bytes = file(v, "be/1.1", &rc);
    CHECK(rc == 0 && bytes && memcmp(bytes, "\0\1\0\2\0\3\0\4", 8) == 0);
    free(bytes);
    free(file(v, "be/0.1", &rc));
    CHECK_INT(rc, -EIO); /* cut short: never wrong bytes */
    CHECK_INT(zarr_stat(v, "/t.h5", ROOT, "be/0.0", &kind, &size), -ENOENT); /* not stored */
    CHECK_INT(zarr_stat(v, "/t.h5", ROOT, "be/2.0", &kind, &size), -ENOENT); /* forged */
    CHECK_INT(zarr_stat(v, "/t.h5", ROOT, "be/01.1", &kind, &size), -ENOENT);
    CHECK_INT(zarr_stat(v, "/t.h5", ROOT, "be/1_1", &kind, &size), -ENOENT);
    CHECK_INT(zarr_stat(v, "/t.h5", ROOT, "be", &kind, &size), 0);
    CHECK_INT(kind, ZARR_DIR);
    CHECK_INT(zarr_stat(v, "/t.h5", ROOT, "refs/.zarray", &kind, &size), -ENOENT);
}

static void test_refs(struct zarr_view *v)
{
    char *text = NULL;
    size_t len = 0;
    CHECK_INT(zarr_refs(v, "/t.h5", ROOT, "s3://b/p/", &text, &len), 0);
    CHECK(text && strstr(text, "\"version\":1"));
    CHECK(text && strstr(text, "\"be/1.1\":[\"s3://b/p/" DB "d/346b-a35040-52759d/1_1\"]"));
    CHECK(text && !strstr(text, "2_0"));
    CHECK(text && strstr(text, "\"be/.zarray\":\"{\\\"chunks\\\": [2, 2]"));
    free(text);
}

/* ---- datasets linked to a file of the bucket (spec §8) ---- */

#define ROOT2 "g-11111111-22222222-9999-9999aa-aaaaaa"
#define DB2 "db/11111111-22222222/"
#define LINKED(id, name) \
    "\"" name "\": {\"id\": \"d-11111111-22222222-" id "\", \"class\": \"H5L_TYPE_HARD\"}"
#define U1_REF(id, shape, layout)                                                                  \
    "{\"id\": \"d-11111111-22222222-" id "\", \"type\": \"H5T_STD_U8LE\", \"shape\": {\"class\": " \
    "\"H5S_SIMPLE\", \"dims\": " shape "}, \"attributes\": {}, \"layout\": {\"class\": "           \
    "\"H5D_CHUNKED\", \"dims\": [2]}, \"creationProperties\": {\"layout\": " layout "}}"

static void write_linked_domain(void)
{
    put("files/f.h5", "0123456789ABCDEF");
    put(DB2 ".group.json",
        "{\"id\": \"" ROOT2 "\", \"root\": \"" ROOT2 "\", \"created\": 1, \"lastModified\": 1, "
        "\"attributes\": {}, \"links\": {" LINKED("0001-000000-000001", "m") ", " LINKED(
            "0002-000000-000002",
            "c") ", " LINKED("0003-000000-000003",
                             "out") ", " LINKED("0004-000000-000004",
                                                "dom") ", " LINKED("0005-000000-000005",
                                                                   "gone") "}}");
    /* "01" and "1" name one chunk: the lower range stays; "7" is outside the grid */
    put(DB2 "d/0001-000000-000001/.dataset.json",
        U1_REF("0001-000000-000001", "[4]",
               "{\"class\": \"H5D_CHUNKED_REF\", \"file_uri\": \"s3://bkt/files/f.h5\", "
               "\"dims\": [2], \"chunks\": {\"0\": [3, 2], \"01\": [9, 2], \"1\": [5, 2], "
               "\"7\": [0, 2]}}"));
    put(DB2 "d/0002-000000-000002/.dataset.json",
        U1_REF("0002-000000-000002", "[2, 3]",
               "{\"class\": \"H5D_CONTIGUOUS_REF\", \"file_uri\": \"bkt/files/f.h5\", "
               "\"offset\": 1, \"size\": 6}"));
    put(DB2 "d/0003-000000-000003/.dataset.json", /* another bucket: left out */
        U1_REF("0003-000000-000003", "[4]",
               "{\"class\": \"H5D_CHUNKED_REF\", \"file_uri\": \"s3://other/files/f.h5\", "
               "\"dims\": [2], \"chunks\": {\"0\": [0, 2]}}"));
    put(DB2 "d/0004-000000-000004/.dataset.json", /* a domain's object: left out */
        U1_REF("0004-000000-000004", "[4]",
               "{\"class\": \"H5D_CHUNKED_REF\", \"file_uri\": \"bkt/home/x.h5/.domain.json\", "
               "\"dims\": [2], \"chunks\": {\"0\": [0, 2]}}"));
    put(DB2 "d/0005-000000-000005/.dataset.json", /* a file that is not there */
        U1_REF("0005-000000-000005", "[4]",
               "{\"class\": \"H5D_CHUNKED_REF\", \"file_uri\": \"bkt/files/gone.h5\", "
               "\"dims\": [2], \"chunks\": {\"0\": [0, 2]}}"));
}

static char *file2(struct zarr_view *v, const char *inner, size_t *len, int *rc)
{
    unsigned char *data = NULL;
    *rc = zarr_read(v, "/l.h5", ROOT2, inner, &data, len);
    char *text = *rc == 0 ? calloc(1, *len + 1) : NULL;
    if (text)
        memcpy(text, data, *len);
    free(data);
    return text;
}

static void test_linked(struct zarr_view *v)
{
    struct zarr_entry *e;
    size_t n, len = 0;
    int rc;
    CHECK_INT(zarr_list(v, "/l.h5", ROOT2, "", &e, &n), 0);
    const char *want[] = { ".zattrs", ".zgroup", ".zmetadata", "c", "gone", "m" };
    CHECK_INT(n, 6);
    for (size_t i = 0; i < n && i < 6; i++)
        CHECK_STR(e[i].name, want[i]);
    zarr_entries_free(e, n);
    char *text = file2(v, "m/0", &len, &rc);
    CHECK(rc == 0 && len == 2 && text && memcmp(text, "34", 2) == 0);
    free(text);
    text = file2(v, "m/1", &len, &rc);
    CHECK(rc == 0 && len == 2 && text && memcmp(text, "56", 2) == 0);
    free(text);
    enum zarr_kind kind;
    uint64_t size = 0;
    CHECK_INT(zarr_stat(v, "/l.h5", ROOT2, "m/1", &kind, &size), 0);
    CHECK_INT(size, 2);
    text = file2(v, "c/0.0", &len, &rc);
    CHECK(rc == 0 && len == 6 && text && memcmp(text, "123456", 6) == 0);
    free(text);
    text = file2(v, "c/.zarray", &len, &rc);
    CHECK(text && strstr(text, "\"chunks\": [2, 3]") && strstr(text, "\"compressor\": null"));
    free(text);
    free(file2(v, "gone/0", &len, &rc));
    CHECK_INT(rc, -EIO); /* a missing file is no missing chunk */
    CHECK_INT(zarr_refs(v, "/l.h5", ROOT2, "s3://b/p/", &text, &len), 0);
    CHECK(text && strstr(text, "\"m/1\":[\"s3://b/p/files/f.h5\",5,2]"));
    CHECK(text && strstr(text, "\"c/0.0\":[\"s3://b/p/files/f.h5\",1,6]"));
    CHECK(text && !strstr(text, "out/") && !strstr(text, "dom/"));
    free(text);
}

int main(void)
{
    struct zarr_view *v = NULL;
    CHECK_INT(store_mem_open(&st), 0);
    write_domain();
    write_linked_domain();
    CHECK_INT(zarr_view_new(st, "bkt", 5, &v), 0);
    test_metadata(v);
    test_consolidated(v);
    test_listing(v);
    test_chunks(v);
    test_refs(v);
    test_linked(v);
    zarr_view_free(v);
    store_close(st);
    return check_done("zarr");
}
