/*
 * Unit tests of the chunk codec (spec/hsds-format.md §5.2, §6.4-§6.6, §8.3).
 *
 * argv[1] is tests/data. Real chunks come from the HSDS fixture bucket (hsds-v2/hsdstest) and
 * are checked against the CRC-32 of the source .h5 data (codec/fixtures.txt); bitshuffle,
 * shuffle, zlib and HDF5-filtered vectors were encoded by other software
 * (tools/make_codec_vectors.py, codec/vectors.txt). Corrupt inputs are derived in memory from
 * those valid ones and must all fail with -EINVAL and a reason, never crash (run under
 * valgrind too: meson test --setup valgrind).
 *
 * codec_encode is checked by round trips over every filter combination, by the frame and
 * stream layout the spec states, against the reference bitshuffle's output, and against frames
 * it wrote that numcodecs and bitshuffle (HSDS's decoders) read back
 * (tools/check_codec_encode.py, codec/encode.txt).
 */
#include "h5osfs/codec/codec.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>
#include <lz4.h>
#include <zlib.h>

#include "h5osfs/codec/bitshuffle.h"
#include "check.h"

#define WHY_LEN 256
#define PATH_LEN 1024

/* The fixture chunks the corrupt-input tests start from (sample3 noise_f32, 128x128 f32). */
#define NOISE_RAW "hsds-v2/hsdstest/db/5081627e-84cc3427/d/139d-6ef9a2-d2a124/0_0"
#define NOISE_GZIP "hsds-v2/hsdstest/db/2dd05233-5ca263d5/d/49e2-7c3388-4c6169/0_0"
#define NOISE_LZ4 "hsds-v2/hsdstest/db/1e526a9c-e25565c6/d/7f3d-fb50af-05c311/0_0"
#define NOISE_LEN 65536
/* small_u16 (1000 x u16), blosc zlib and blosc lz4: small enough to fuzz under valgrind. */
#define SMALL_GZIP "hsds-v2/hsdstest/db/2dd05233-5ca263d5/d/7c10-802727-d6128d/0"
#define SMALL_LZ4 "hsds-v2/hsdstest/db/1e526a9c-e25565c6/d/4e48-de71f6-588226/0"
#define SMALL_LEN 2000
/* vlen_int in sample2_z_zstd: a zstd frame holding a 56-byte vlen stream. */
#define VLEN_ZSTD "hsds-v2/hsdstest/db/55dd170e-0f0e83c7/d/351d-d84cd3-b9ee43/0"

struct buf {
    unsigned char *p;
    size_t len;
};

/* ---- helpers ---- */

/* len bytes at off of a file under the data directory (len 0: to the end). */
static struct buf load(const char *dir, const char *rel, size_t off, size_t len)
{
    struct buf b = { NULL, 0 };
    char path[PATH_LEN];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return b;
    }
    if (len == 0 && fseek(f, 0, SEEK_END) == 0) {
        long end = ftell(f);
        len = end > (long)off ? (size_t)end - off : 0;
    }
    if (len && fseek(f, (long)off, SEEK_SET) == 0 && (b.p = malloc(len)) &&
        fread(b.p, 1, len, f) == len) {
        b.len = len;
    } else {
        free(b.p);
        b.p = NULL;
        fprintf(stderr, "cannot read %zu bytes at %zu of %s\n", len, off, path);
    }
    fclose(f);
    return b;
}

static struct buf dup_buf(const void *p, size_t len, size_t extra)
{
    struct buf b = { malloc(len + extra + 1), len };
    if (b.p)
        memcpy(b.p, p, len);
    return b;
}

static struct codec_spec spec_of(int compressed, int zlib, enum codec_shuffle shuffle,
                                 size_t itemsize, enum codec_source source)
{
    struct codec_spec s = { .compressed = compressed,
                            .zlib_fallback = zlib,
                            .shuffle = shuffle,
                            .itemsize = itemsize,
                            .source = source };
    return s;
}

/* A small deterministic generator (xorshift64*), its state owned by the caller. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static void put_be(unsigned char *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[n - 1 - i] = (unsigned char)(v >> (8 * i));
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (size_t i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Decode in both ways and compare; the alloc way must also refuse a limit one byte short. */
static void expect_decode(const char *what, const struct codec_spec *s, const void *in,
                          size_t in_len, const void *want, size_t want_len)
{
    char why[WHY_LEN] = "";
    unsigned char *out = malloc(want_len);
    int rc = out ? codec_decode(s, in, in_len, out, want_len, why, sizeof(why)) : -ENOMEM;
    if (rc || memcmp(out, want, want_len))
        fprintf(stderr, "%s: decode: rc %d (%s)\n", what, rc, why);
    CHECK_INT(rc, 0);
    CHECK(rc == 0 && memcmp(out, want, want_len) == 0);
    free(out);

    unsigned char *a = NULL;
    size_t alen = 0;
    rc = codec_decode_alloc(s, in, in_len, want_len, &a, &alen, why, sizeof(why));
    if (rc)
        fprintf(stderr, "%s: decode_alloc: rc %d (%s)\n", what, rc, why);
    CHECK_INT(rc, 0);
    CHECK(rc == 0 && alen == want_len && memcmp(a, want, want_len) == 0);
    free(a);
    a = (unsigned char *)1;
    rc = codec_decode_alloc(s, in, in_len, want_len - 1, &a, &alen, why, sizeof(why));
    if (rc != -EINVAL)
        fprintf(stderr, "%s: decode_alloc with max %zu: rc %d\n", what, want_len - 1, rc);
    CHECK_INT(rc, -EINVAL);
    CHECK(a == NULL && alen == 0);
}

/* A fixed-size decode that must fail with -EINVAL and a reason. */
static void expect_fail(const char *what, const struct codec_spec *s, const void *in, size_t in_len,
                        size_t out_len)
{
    char why[WHY_LEN] = "";
    unsigned char *out = malloc(out_len ? out_len : 1);
    int rc = out ? codec_decode(s, in, in_len, out, out_len, why, sizeof(why)) : -ENOMEM;
    if (rc != -EINVAL || !why[0])
        fprintf(stderr, "%s: expected -EINVAL, got %d (%s)\n", what, rc, why);
    CHECK_INT(rc, -EINVAL);
    CHECK(why[0] != '\0');
    free(out);
}

/* The same for the alloc way, whose output must stay NULL. */
static void expect_fail_alloc(const char *what, const struct codec_spec *s, const void *in,
                              size_t in_len, size_t max)
{
    char why[WHY_LEN] = "";
    unsigned char *out = (unsigned char *)1;
    size_t out_len = 1;
    int rc = codec_decode_alloc(s, in, in_len, max, &out, &out_len, why, sizeof(why));
    if (rc != -EINVAL || !why[0])
        fprintf(stderr, "%s: expected -EINVAL, got %d (%s)\n", what, rc, why);
    CHECK_INT(rc, -EINVAL);
    CHECK(why[0] != '\0');
    CHECK(out == NULL && out_len == 0);
    if (rc == 0)
        free(out);
}

/* Decode that may succeed or fail but must not crash (fuzzing); returns the result. */
static int try_decode(const struct codec_spec *s, const void *in, size_t in_len, size_t out_len)
{
    char why[WHY_LEN];
    unsigned char *out = malloc(out_len);
    int rc = out ? codec_decode(s, in, in_len, out, out_len, why, sizeof(why)) : -ENOMEM;
    free(out);
    return rc;
}

/* ---- codec_spec_from_filters ---- */

struct spec_case {
    const char *json; /* NULL: no filters at all */
    int is_vlen;
    int rc, compressed, zlib;
    enum codec_shuffle shuffle;
};

static const struct spec_case spec_cases[] = {
    /* the four filter lists of the fixture bucket, as HSDS stored them */
    { "[{\"class\": \"H5Z_FILTER_SHUFFLE\", \"id\": 2, \"name\": \"shuffle\"}, "
      "{\"class\": \"H5Z_FILTER_DEFLATE\", \"id\": 1, \"level\": 6, \"name\": \"gzip\"}]",
      0, 0, 1, 1, CODEC_SHUFFLE_BYTE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"lz4\", \"level\": 5, \"id\": 32004}]", 0, 0, 1,
      0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"zstd\", \"level\": 5, \"id\": 32015}]", 0, 0,
      1, 0, CODEC_SHUFFLE_NONE },
    { NULL, 0, 0, 0, 0, CODEC_SHUFFLE_NONE },
    { "[]", 0, 0, 0, 0, CODEC_SHUFFLE_NONE },
    /* numeric ids and names, as normalisation accepts them */
    { "[1]", 0, 0, 1, 1, CODEC_SHUFFLE_NONE },
    { "[2, 1]", 0, 0, 1, 1, CODEC_SHUFFLE_BYTE },
    { "[32004]", 0, 0, 1, 0, CODEC_SHUFFLE_NONE },
    { "[32001]", 0, 0, 1, 0, CODEC_SHUFFLE_NONE },
    { "[32008]", 0, 0, 0, 0, CODEC_SHUFFLE_BIT },
    { "[\"gzip\"]", 0, 0, 1, 1, CODEC_SHUFFLE_NONE },
    { "[\"deflate\"]", 0, 0, 1, 1, CODEC_SHUFFLE_NONE },
    { "[\"lz4\"]", 0, 0, 1, 0, CODEC_SHUFFLE_NONE },
    { "[\"lz4hc\", \"shuffle\"]", 0, 0, 1, 0, CODEC_SHUFFLE_BYTE },
    { "[\"shuffle\"]", 0, 0, 0, 0, CODEC_SHUFFLE_BYTE },
    { "[\"bitshuffle\", \"zstd\"]", 0, 0, 1, 0, CODEC_SHUFFLE_BIT },
    { "[{\"class\": \"H5Z_FILTER_BITSHUFFLE\", \"id\": 32008, \"name\": \"bitshuffle\"}]", 0, 0, 0,
      0, CODEC_SHUFFLE_BIT },
    { "[{\"class\": \"H5Z_FILTER_BLOSC\", \"id\": 32001, \"name\": \"blosclz\"}]", 0, 0, 1, 0,
      CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_SNAPPY\", \"id\": 32003, \"name\": \"snappy\"}]", 0, 0, 1, 0,
      CODEC_SHUFFLE_NONE },
    /* H5Z_FILTER_USER: found by id or name; a compressor only by one of HSDS's names */
    { "[{\"class\": \"H5Z_FILTER_USER\", \"id\": 32004}]", 0, 0, 1, 0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"gzip\", \"id\": 1}]", 0, 0, 1, 1,
      CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"deflate\"}]", 0, 0, 0, 0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"bitshuffle\"}]", 0, 0, 0, 0,
      CODEC_SHUFFLE_BIT },
    /* a DEFLATE entry is zlib whatever its name; a missing name elsewhere means lz4 */
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"id\": 1}]", 0, 0, 1, 1, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_LZ4\"}]", 0, 0, 1, 0, CODEC_SHUFFLE_NONE },
    /* first compressor and first shuffle win; scaleoffset as compressor is a no-op */
    { "[\"shuffle\", \"bitshuffle\"]", 0, 0, 0, 0, CODEC_SHUFFLE_BYTE },
    { "[\"bitshuffle\", \"shuffle\"]", 0, 0, 0, 0, CODEC_SHUFFLE_BIT },
    { "[\"scaleoffset\", \"gzip\"]", 0, 0, 0, 0, CODEC_SHUFFLE_NONE },
    { "[\"gzip\", \"lzf\"]", 0, 0, 1, 1, CODEC_SHUFFLE_NONE },
    { "[\"fletcher32\", \"nbit\", \"none\", \"lz4\"]", 0, 0, 1, 0, CODEC_SHUFFLE_NONE },
    /* vlen types: shuffles ignored */
    { "[\"shuffle\", \"gzip\"]", 1, 0, 1, 1, CODEC_SHUFFLE_NONE },
    { "[\"bitshuffle\"]", 1, 0, 0, 0, CODEC_SHUFFLE_NONE },
    /* refused: compressors nobody decodes, unknown filters, malformed lists */
    { "[\"szip\"]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[4]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[\"lzf\"]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_LZF\", \"id\": 32000, \"name\": \"lzf\"}]", 0, -EINVAL, 0, 0,
      CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"szip\"}]", 0, -EINVAL, 0, 0,
      CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_BLOSC\", \"name\": \"blosc2\"}]", 0, -EINVAL, 0, 0,
      CODEC_SHUFFLE_NONE },
    { "[12345]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[\"bzip2\"]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_FOO\"}]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"id\": 307}]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"lz5\", \"id\": 32004}]", 0, -EINVAL, 0, 0,
      CODEC_SHUFFLE_NONE },
    { "[{\"name\": \"gzip\"}]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"name\": 1}]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"id\": \"32004\"}]", 0, -EINVAL, 0, 0,
      CODEC_SHUFFLE_NONE },
    { "[null]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[true]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[[1]]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "[1.5]", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "{\"filters\": [1]}", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "\"gzip\"", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
    { "1", 0, -EINVAL, 0, 0, CODEC_SHUFFLE_NONE },
};

static void test_spec_case(const struct spec_case *c)
{
    json_error_t err;
    json_t *j = c->json ? json_loads(c->json, JSON_DECODE_ANY, &err) : NULL;
    CHECK(!c->json || j);
    struct codec_spec s;
    char why[WHY_LEN] = "";
    int rc = codec_spec_from_filters(j, 4, c->is_vlen, CODEC_SOURCE_HDF5, &s, why, sizeof(why));
    if (rc != c->rc || (rc == 0 && (s.compressed != c->compressed || s.zlib_fallback != c->zlib ||
                                    s.shuffle != c->shuffle)))
        fprintf(stderr, "spec case %s: rc %d (%s) compressed %d zlib %d shuffle %d\n",
                c->json ? c->json : "(none)", rc, why, s.compressed, s.zlib_fallback,
                (int)s.shuffle);
    CHECK_INT(rc, c->rc);
    if (rc == 0) {
        CHECK_INT(s.compressed, c->compressed);
        CHECK_INT(s.zlib_fallback, c->zlib);
        CHECK_INT(s.shuffle, c->shuffle);
        CHECK_INT(s.itemsize, 4);
        CHECK_INT(s.source, CODEC_SOURCE_HDF5);
    } else {
        CHECK(why[0] != '\0');
    }
    json_decref(j);
}

/* compressor and level: the blosc codec _compress uses, int(level) or 5 (getFilterOps) */
struct codec_case {
    const char *json;
    const char *compressor;
    int level; /* INT_MIN: none that encoding accepts */
};

#define NO_LEVEL INT_MIN

static const struct codec_case codec_cases[] = {
    { "[{\"class\": \"H5Z_FILTER_SHUFFLE\", \"id\": 2, \"name\": \"shuffle\"}, "
      "{\"class\": \"H5Z_FILTER_DEFLATE\", \"id\": 1, \"level\": 6, \"name\": \"gzip\"}]",
      "zlib", 6 },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"lz4\", \"level\": 5, \"id\": 32004}]", "lz4",
      5 },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"zstd\", \"level\": 3, \"id\": 32015}]", "zstd",
      3 },
    { NULL, "", 0 },
    { "[]", "", 0 },
    { "[\"shuffle\"]", "", 0 },
    { "[\"bitshuffle\"]", "", 0 },
    { "[1]", "zlib", 5 },
    { "[\"gzip\"]", "zlib", 5 },
    { "[\"deflate\"]", "zlib", 5 },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"gzip\", \"level\": 9}]", "zlib", 9 },
    { "[{\"class\": \"H5Z_FILTER_LZ4\", \"name\": \"gzip\"}]", "zlib", 5 },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"name\": \"lz4\", \"level\": 1}]", "zlib", 1 },
    { "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"deflate\"}]", "", 0 },
    { "[32001]", "blosclz", 5 },
    { "[32003]", "snappy", 5 },
    { "[\"lz4hc\", \"shuffle\"]", "lz4hc", 5 },
    { "[\"bitshuffle\", \"zstd\"]", "zstd", 5 },
    { "[{\"class\": \"H5Z_FILTER_LZ4\"}]", "lz4", 5 },
    { "[{\"class\": \"H5Z_FILTER_ZSTD\", \"id\": 32015}]", "lz4", 5 }, /* no name: lz4 */
    { "[\"scaleoffset\", \"gzip\"]", "", 0 },
    /* only the first compressor's level; other entries' levels are not looked at */
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": 2}, "
      "{\"class\": \"H5Z_FILTER_USER\", \"name\": \"lz4\", \"level\": 7}]",
      "zlib", 2 },
    { "[{\"class\": \"H5Z_FILTER_SHUFFLE\", \"name\": \"shuffle\", \"level\": 1}, \"lz4\"]", "lz4",
      5 },
    /* int(): floats truncate, numeric strings and booleans convert */
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": 0}]", "zlib", 0 },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": 9.7}]", "zlib", 9 },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": \"7\"}]", "zlib", 7 },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": \" +3 \"}]", "zlib", 3 },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": true}]", "zlib", 1 },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": false}]", "zlib", 0 },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": 10}]", "zlib", 10 },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": -2}]", "zlib", -2 },
    /* what int() refuses, or beyond an int: kept out of reach of encoding */
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": \"9.5\"}]", "zlib", NO_LEVEL },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": \"\"}]", "zlib", NO_LEVEL },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": \"nine\"}]", "zlib", NO_LEVEL },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": null}]", "zlib", NO_LEVEL },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": [5]}]", "zlib", NO_LEVEL },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": 99999999999}]", "zlib", NO_LEVEL },
    { "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": 1e300}]", "zlib", NO_LEVEL },
};

/* The whole struct is set: two calls on differently filled memory give equal bytes. */
static void test_codec_case(const struct codec_case *c)
{
    json_t *j = c->json ? json_loads(c->json, 0, NULL) : NULL;
    CHECK(!c->json || j);
    struct codec_spec a, b;
    memset(&a, 0xA5, sizeof(a));
    memset(&b, 0x00, sizeof(b));
    CHECK_INT(codec_spec_from_filters(j, 4, 0, CODEC_SOURCE_HSDS, &a, NULL, 0), 0);
    CHECK_INT(codec_spec_from_filters(j, 4, 0, CODEC_SOURCE_HSDS, &b, NULL, 0), 0);
    CHECK(memcmp(&a, &b, sizeof(a)) == 0);
    int level_ok = c->level == NO_LEVEL ? a.level < 0 || a.level > 9 : a.level == c->level;
    if (strcmp(a.compressor, c->compressor) || !level_ok)
        fprintf(stderr, "codec case %s: compressor \"%s\" level %d\n", c->json ? c->json : "(none)",
                a.compressor, a.level);
    CHECK_STR(a.compressor, c->compressor);
    CHECK(level_ok);
    CHECK_INT(a.compressed, c->compressor[0] != '\0');
    json_decref(j);
}

static void test_spec(void)
{
    for (size_t i = 0; i < sizeof(spec_cases) / sizeof(spec_cases[0]); i++)
        test_spec_case(&spec_cases[i]);
    for (size_t i = 0; i < sizeof(codec_cases) / sizeof(codec_cases[0]); i++)
        test_codec_case(&codec_cases[i]);

    /* a shuffle needs an element size; the source is kept; why may be NULL */
    json_t *j = json_loads("[\"shuffle\"]", 0, NULL);
    struct codec_spec s;
    CHECK_INT(codec_spec_from_filters(j, 0, 0, CODEC_SOURCE_HSDS, &s, NULL, 0), -EINVAL);
    CHECK_INT(codec_spec_from_filters(j, 0, 1, CODEC_SOURCE_HSDS, &s, NULL, 0), 0);
    CHECK_INT(codec_spec_from_filters(j, 8, 0, CODEC_SOURCE_HSDS, &s, NULL, 0), 0);
    CHECK_INT(s.source, CODEC_SOURCE_HSDS);
    CHECK_INT(s.itemsize, 8);
    json_decref(j);
}

/* ---- fixture chunks (codec/fixtures.txt) ---- */

static int spec_from_json_file(const char *dir, const char *rel, size_t itemsize, int is_vlen,
                               enum codec_source src, struct codec_spec *s)
{
    char path[PATH_LEN], why[WHY_LEN] = "";
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    json_error_t err;
    json_t *d = json_load_file(path, JSON_ALLOW_NUL, &err);
    if (!d) {
        fprintf(stderr, "%s: %s\n", path, err.text);
        return -1;
    }
    const json_t *filters = json_object_get(json_object_get(d, "creationProperties"), "filters");
    int rc = codec_spec_from_filters(filters, itemsize, is_vlen, src, s, why, sizeof(why));
    if (rc)
        fprintf(stderr, "%s: %s\n", path, why);
    json_decref(d);
    return rc;
}

struct fixture {
    char source[16], kind[16], object[512], json[512], crc[16];
    size_t off, len, itemsize, decoded;
};

static void test_fixture_line(const char *dir, const struct fixture *f)
{
    int is_vlen = strcmp(f->kind, "vlen") == 0;
    enum codec_source src = strcmp(f->source, "hdf5") ? CODEC_SOURCE_HSDS : CODEC_SOURCE_HDF5;
    struct codec_spec s;
    CHECK_INT(spec_from_json_file(dir, f->json, f->itemsize, is_vlen, src, &s), 0);
    struct buf in = load(dir, f->object, f->off, f->len);
    CHECK(in.p != NULL);
    if (!in.p)
        return;
    unsigned char *out = NULL;
    size_t out_len = f->decoded;
    char why[WHY_LEN] = "";
    int rc;
    if (is_vlen) {
        rc = codec_decode_alloc(&s, in.p, in.len, 1 << 20, &out, &out_len, why, sizeof(why));
    } else {
        out = malloc(out_len);
        rc = codec_decode(&s, in.p, in.len, out, out_len, why, sizeof(why));
    }
    char crc[16];
    snprintf(crc, sizeof(crc), "%08lx", rc ? 0ul : crc32(0, out, (uInt)out_len));
    if (rc || strcmp(crc, f->crc))
        fprintf(stderr, "fixture %s: rc %d (%s), crc %s\n", f->object, rc, why, crc);
    CHECK_INT(rc, 0);
    CHECK_INT(out_len, f->decoded);
    CHECK_STR(crc, f->crc);
    free(out);
    free(in.p);
}

static void test_fixtures(const char *dir)
{
    char path[PATH_LEN], line[2048];
    snprintf(path, sizeof(path), "%s/codec/fixtures.txt", dir);
    FILE *fp = fopen(path, "r");
    CHECK(fp != NULL);
    if (!fp)
        return;
    int n = 0;
    while (fgets(line, sizeof(line), fp)) {
        struct fixture f;
        if (line[0] == '#')
            continue;
        int got = sscanf(line, "%15s %15s %511s %zu %zu %511s %zu %zu %15s", f.source, f.kind,
                         f.object, &f.off, &f.len, f.json, &f.itemsize, &f.decoded, f.crc);
        CHECK_INT(got, 9);
        if (got == 9)
            test_fixture_line(dir, &f);
        n++;
    }
    fclose(fp);
    CHECK(n >= 20);
}

/* The brief's pair: the gzip and lz4 domains' noise_f32 chunk equals the raw domain's. */
static void test_noise_pair(const char *dir)
{
    struct buf raw = load(dir, NOISE_RAW, 0, 0), gz = load(dir, NOISE_GZIP, 0, 0),
               lz = load(dir, NOISE_LZ4, 0, 0);
    CHECK(raw.len == NOISE_LEN && gz.len == 58678 && lz.len == 65552);
    if (raw.len == NOISE_LEN && gz.p && lz.p) {
        struct codec_spec gzs = spec_of(1, 1, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HSDS);
        struct codec_spec lzs = spec_of(1, 0, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HSDS);
        struct codec_spec none = spec_of(0, 0, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HSDS);
        expect_decode("noise gzip", &gzs, gz.p, gz.len, raw.p, raw.len);
        expect_decode("noise lz4", &lzs, lz.p, lz.len, raw.p, raw.len);
        /* the frame's codec wins over the filter's name */
        expect_decode("noise gzip as lz4", &lzs, gz.p, gz.len, raw.p, raw.len);
        expect_decode("noise raw", &none, raw.p, raw.len, raw.p, raw.len);
    }
    free(raw.p);
    free(gz.p);
    free(lz.p);
}

/* ---- encoded vectors (codec/vectors.txt) ---- */

/* Whether this machine's c-blosc and LZ4 are the ones codec/encode.txt was made with: then our
 * encoder must reproduce the vectors byte for byte (other versions may compress differently,
 * and only the decodings are compared). */
struct versions {
    int blosc, lz4;
};

static struct versions vector_versions(const char *dir)
{
    struct versions v = { 0, 0 };
    char path[PATH_LEN], line[256], blosc[32] = "", lz4[32] = "";
    snprintf(path, sizeof(path), "%s/codec/encode.txt", dir);
    FILE *fp = fopen(path, "r");
    CHECK(fp != NULL);
    while (fp && fgets(line, sizeof(line), fp))
        if (sscanf(line, "# versions blosc=%31s lz4=%31s", blosc, lz4) == 2)
            break;
    if (fp)
        fclose(fp);
    CHECK(blosc[0] && lz4[0]);
    v.blosc = strcmp(blosc, blosc_get_version_string()) == 0;
    v.lz4 = strcmp(lz4, LZ4_versionString()) == 0;
    if (!v.blosc || !v.lz4)
        fprintf(stderr,
                "note: vectors made with c-blosc %s, LZ4 %s; this is c-blosc %s, LZ4 %s: "
                "byte-exact encoding checks skipped\n",
                blosc, lz4, blosc_get_version_string(), LZ4_versionString());
    return v;
}

/* codec_encode(raw) must be exactly want. */
static void expect_encoding(const char *what, const struct codec_spec *s, const struct buf *raw,
                            const struct buf *want)
{
    unsigned char *enc = NULL;
    size_t len = 0;
    char why[WHY_LEN] = "";
    int rc = codec_encode(s, raw->p, raw->len, &enc, &len, why, sizeof(why));
    int same = rc == 0 && len == want->len && memcmp(enc, want->p, len) == 0;
    if (!same)
        fprintf(stderr, "%s: encode: rc %d (%s), %zu bytes where the vector has %zu\n", what, rc,
                why, len, want->len);
    CHECK(same);
    free(enc);
}

static uint64_t get_be(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i > 0; i--)
        v = (v << 8) | p[i - 1];
    return v;
}

/* Wrap bytes in a blosc frame the way numcodecs does for HSDS (lz4, typesize and shuffle as
 * given); returns the frame or an empty buffer. */
static struct buf blosc_wrap(const void *p, size_t len, size_t typesize, int doshuffle)
{
    struct buf b = { malloc(len + BLOSC_MAX_OVERHEAD), 0 };
    int n = b.p ? blosc_compress_ctx(5, doshuffle, typesize, len, p, b.p, len + BLOSC_MAX_OVERHEAD,
                                     "lz4", 0, 1)
                : -1;
    if (n > 0)
        b.len = (size_t)n;
    CHECK(n > 0);
    return b;
}

static struct buf zlib_wrap(const void *p, size_t len)
{
    uLongf n = compressBound((uLong)len);
    struct buf b = { malloc(n), 0 };
    if (b.p && compress2(b.p, &n, p, (uLong)len, 6) == Z_OK)
        b.len = n;
    CHECK(b.len > 0);
    return b;
}

static void vec_bitshuffle(const char *name, const struct buf *enc, const struct buf *raw,
                           size_t itemsize, const struct versions *v)
{
    struct codec_spec hsds = spec_of(0, 0, CODEC_SHUFFLE_BIT, itemsize, CODEC_SOURCE_HSDS);
    struct codec_spec hdf5 = spec_of(0, 0, CODEC_SHUFFLE_BIT, itemsize, CODEC_SOURCE_HDF5);
    expect_decode(name, &hsds, enc->p, enc->len, raw->p, raw->len);
    expect_decode(name, &hdf5, enc->p, enc->len, raw->p, raw->len);
    /* bitshuffle plus a compressor: HSDS blosc-wraps the stream with blosc shuffle off */
    struct codec_spec both = spec_of(1, 0, CODEC_SHUFFLE_BIT, itemsize, CODEC_SOURCE_HSDS);
    struct buf frame = blosc_wrap(enc->p, enc->len, 1, 0);
    expect_decode(name, &both, frame.p, frame.len, raw->p, raw->len);
    free(frame.p);
    /* and an HDF5 file with deflate after bitshuffle: a zlib stream of the stream */
    struct codec_spec zb = spec_of(1, 1, CODEC_SHUFFLE_BIT, itemsize, CODEC_SOURCE_HDF5);
    struct buf z = zlib_wrap(enc->p, enc->len);
    expect_decode(name, &zb, z.p, z.len, raw->p, raw->len);
    free(z.p);
    /* our encoder writes what bitshuffle's compress_lz4 wrote for HSDS */
    if (v->lz4)
        expect_encoding(name, &hsds, raw, enc);
}

/* HDF5's bitshuffle filter (same framing, its own block size): our encoder with that block. */
static void vec_h5bitshuffle(const char *name, const struct buf *enc, const struct buf *raw,
                             size_t itemsize, const struct versions *v)
{
    CHECK(enc->len >= BITSHUFFLE_HEADER_LEN);
    if (!v->lz4 || enc->len < BITSHUFFLE_HEADER_LEN)
        return;
    unsigned char *out = NULL;
    size_t len = 0;
    int rc = bitshuffle_encode(raw->p, raw->len, itemsize, get_be(enc->p + 8, 4) / itemsize, &out,
                               &len, NULL, 0);
    if (rc || len != enc->len || memcmp(out, enc->p, len))
        fprintf(stderr, "%s: bitshuffle_encode: rc %d, %zu bytes of %zu\n", name, rc, len,
                enc->len);
    CHECK(rc == 0 && len == enc->len && memcmp(out, enc->p, len) == 0);
    free(out);
}

static void vec_transpose(const struct buf *enc, const struct buf *raw, size_t itemsize)
{
    unsigned char *out = malloc(raw->len);
    CHECK(out != NULL && enc->len == raw->len);
    if (out && enc->len == raw->len) {
        bitshuffle_untranspose(enc->p, out, raw->len / itemsize, itemsize);
        CHECK(memcmp(out, raw->p, raw->len) == 0);
        bitshuffle_transpose(raw->p, out, raw->len / itemsize, itemsize);
        CHECK(memcmp(out, enc->p, raw->len) == 0); /* the reference's bitshuffle() */
    }
    free(out);
}

static void vec_shuffle(const char *name, const struct buf *enc, const struct buf *raw,
                        size_t itemsize)
{
    struct codec_spec hdf5 = spec_of(0, 0, CODEC_SHUFFLE_BYTE, itemsize, CODEC_SOURCE_HDF5);
    struct codec_spec hsds = spec_of(0, 0, CODEC_SHUFFLE_BYTE, itemsize, CODEC_SOURCE_HSDS);
    expect_decode(name, &hdf5, enc->p, enc->len, raw->p, raw->len);
    /* HSDS stores shuffle-only chunks unshuffled: they pass through unchanged */
    expect_decode(name, &hsds, raw->p, raw->len, raw->p, raw->len);
    /* shuffle inside blosc (typesize = itemsize): done by blosc, not again by us */
    struct codec_spec bl = spec_of(1, 0, CODEC_SHUFFLE_BYTE, itemsize, CODEC_SOURCE_HSDS);
    struct buf frame = blosc_wrap(raw->p, raw->len, itemsize, 1);
    expect_decode(name, &bl, frame.p, frame.len, raw->p, raw->len);
    free(frame.p);
}

/* One vectors.txt case: kind, then its spec as the decoder sees it. */
static void test_vector(const char *kind, const char *name, const struct buf *enc,
                        const struct buf *raw, size_t itemsize, const struct versions *v)
{
    struct codec_spec s;
    json_t *f = NULL;
    if (strcmp(kind, "bitshuffle") == 0)
        vec_bitshuffle(name, enc, raw, itemsize, v);
    else if (strcmp(kind, "transpose") == 0)
        vec_transpose(enc, raw, itemsize);
    else if (strcmp(kind, "shuffle") == 0)
        vec_shuffle(name, enc, raw, itemsize);
    else if (strcmp(kind, "zlib") == 0 || strcmp(kind, "hdf5-deflate") == 0)
        f = json_loads("[\"gzip\"]", 0, NULL);
    else if (strcmp(kind, "zlib-shuffle") == 0 || strcmp(kind, "hdf5-deflate-shuffle") == 0)
        f = json_loads("[\"shuffle\", \"gzip\"]", 0, NULL);
    else if (strcmp(kind, "hdf5-shuffle") == 0)
        f = json_loads("[2]", 0, NULL);
    else if (strcmp(kind, "hdf5-bitshuffle") == 0)
        f = json_loads("[32008]", 0, NULL);
    else
        CHECK(!"unknown vector kind");
    if (strcmp(kind, "hdf5-bitshuffle") == 0)
        vec_h5bitshuffle(name, enc, raw, itemsize, v);
    if (f) {
        CHECK_INT(codec_spec_from_filters(f, itemsize, 0, CODEC_SOURCE_HDF5, &s, NULL, 0), 0);
        expect_decode(name, &s, enc->p, enc->len, raw->p, raw->len);
        json_decref(f);
    }
}

static void test_vectors(const char *dir, const struct versions *v)
{
    char path[PATH_LEN], line[1024], kind[32], encf[256], rawf[256], rel[PATH_LEN];
    size_t itemsize;
    snprintf(path, sizeof(path), "%s/codec/vectors.txt", dir);
    FILE *fp = fopen(path, "r");
    CHECK(fp != NULL);
    int n = 0;
    while (fp && fgets(line, sizeof(line), fp)) {
        if (line[0] == '#')
            continue;
        CHECK_INT(sscanf(line, "%31s %255s %255s %zu", kind, encf, rawf, &itemsize), 4);
        snprintf(rel, sizeof(rel), "codec/%s", encf);
        struct buf enc = load(dir, rel, 0, 0);
        snprintf(rel, sizeof(rel), "codec/%s", rawf);
        struct buf raw = load(dir, rel, 0, 0);
        CHECK(enc.p && raw.p);
        if (enc.p && raw.p)
            test_vector(kind, encf, &enc, &raw, itemsize, v);
        free(enc.p);
        free(raw.p);
        n++;
    }
    if (fp)
        fclose(fp);
    CHECK(n >= 20);
}

/* The spec's worked example: 20 x int32 -> 51 bytes, one 19-byte block, 16 raw bytes. */
static void test_spec_example(const char *dir)
{
    static const unsigned char header[] = { 0, 0, 0, 0, 0, 0, 0, 0x50, 0, 0, 0x20, 0, 0, 0, 0, 19 };
    struct buf enc = load(dir, "codec/bs_i32_20.bs", 0, 0);
    CHECK_INT(enc.len, 51);
    CHECK(enc.p && memcmp(enc.p, header, sizeof(header)) == 0);
    int32_t want[20], got[20];
    for (int i = 0; i < 20; i++)
        want[i] = i;
    CHECK(enc.p && memcmp(enc.p + 51 - 16, want + 16, 16) == 0);
    CHECK(enc.p && bitshuffle_decode(enc.p, enc.len, 4, got, sizeof(got), NULL, 0) == 0 &&
          memcmp(got, want, sizeof(want)) == 0);
    free(enc.p);
}

/* ---- encoding (codec_encode, spec §6.4-§6.6) ---- */

/* Flag bits of a Blosc-1 frame's byte 2 as the spec states them (§6.4). */
#define FLAG_SHUFFLE 0x01
#define FLAG_MEMCPYED 0x02
#define FLAG_BITSHUFFLE 0x04
#define FRAME_HEADER 16

static const char *const enc_compressors[] = { NULL,   "gzip",    "lz4",   "lz4hc",
                                               "zstd", "blosclz", "snappy" };
static const char *const enc_shuffles[] = { NULL, "shuffle", "bitshuffle" };
static const size_t enc_itemsizes[] = { 1, 2, 4, 8, 3 };
static const size_t enc_counts[] = { 1, 7, 8, 2047, 2048, 2049 };
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The codec number in bits 5-7 of the flags for a blosc codec name (§6.4). */
static int codec_format(const char *name)
{
    static const struct {
        const char *name;
        int format;
    } formats[] = { { "blosclz", 0 }, { "lz4", 1 },  { "lz4hc", 1 },
                    { "snappy", 2 },  { "zlib", 3 }, { "zstd", 4 } };
    for (size_t i = 0; i < N_OF(formats); i++)
        if (strcmp(formats[i].name, name) == 0)
            return formats[i].format;
    return -1;
}

/* The spec of an HSDS dataset whose filters are shuffle (a name or NULL) and compressor (a
 * filter name or NULL) at level, written as HSDS stores such lists (§5.2). */
static int spec_for(const char *compressor, int level, const char *shuffle, size_t itemsize,
                    int is_vlen, struct codec_spec *s)
{
    char text[512], shuf[64] = "", comp[256] = "", why[WHY_LEN] = "";
    if (shuffle)
        snprintf(shuf, sizeof(shuf), "\"%s\"%s", shuffle, compressor ? ", " : "");
    if (compressor && strcmp(compressor, "gzip") == 0)
        snprintf(
            comp, sizeof(comp),
            "{\"class\": \"H5Z_FILTER_DEFLATE\", \"id\": 1, \"level\": %d, \"name\": \"gzip\"}",
            level);
    else if (compressor)
        snprintf(comp, sizeof(comp),
                 "{\"class\": \"H5Z_FILTER_USER\", \"name\": \"%s\", \"level\": %d}", compressor,
                 level);
    snprintf(text, sizeof(text), "[%s%s]", shuf, comp);
    json_t *j = json_loads(text, 0, NULL);
    CHECK(j != NULL);
    int rc =
        j ? codec_spec_from_filters(j, itemsize, is_vlen, CODEC_SOURCE_HSDS, s, why, sizeof(why))
          : -1;
    if (rc)
        fprintf(stderr, "spec of %s: rc %d (%s)\n", text, rc, why);
    CHECK_INT(rc, 0);
    json_decref(j);
    return rc;
}

/* Smooth little-endian counts with a low bit that is sometimes noisy (compressible), or random
 * bytes. */
static unsigned char *make_data(size_t len, size_t itemsize, int random, uint64_t seed)
{
    unsigned char *p = malloc(len ? len : 1);
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; p && i < len; i++) {
        size_t e = i / itemsize, b = i % itemsize;
        uint64_t r = next_rand(&st);
        if (random)
            p[i] = (unsigned char)r;
        else
            p[i] = (unsigned char)(b == 0 ? e / 16 + ((r & 63) == 0) : b == 1 ? e / 4096 : 0);
    }
    CHECK(p != NULL);
    return p;
}

/* A Blosc-1 frame as numcodecs writes it for HSDS: version 2, typesize 1, the requested
 * shuffle flag, never bitshuffle, the codec's number, sizes that agree with the object. */
static void check_frame(const struct codec_spec *s, const unsigned char *f, size_t len,
                        size_t nbytes)
{
    CHECK(len >= FRAME_HEADER);
    if (len < FRAME_HEADER)
        return;
    CHECK_INT(f[0], 2);
    CHECK_INT(f[3], 1);
    CHECK_INT(f[2] & FLAG_SHUFFLE, s->shuffle == CODEC_SHUFFLE_BYTE ? FLAG_SHUFFLE : 0);
    CHECK_INT(f[2] & FLAG_BITSHUFFLE, 0);
    CHECK_INT(f[2] >> 5, codec_format(s->compressor));
    CHECK_INT(get_le(f + 4, 4), nbytes);
    CHECK_INT(get_le(f + 12, 4), len);
    if (f[2] & FLAG_MEMCPYED)
        CHECK_INT(len, nbytes + FRAME_HEADER);
}

/* The framing of §6.6 checked on its own: header, the length and LZ4 size of every block
 * (2048 elements, then floor((N mod 2048)/8)*8), and the last N mod 8 elements raw. */
static void check_bs_stream(const unsigned char *st, size_t st_len, const unsigned char *data,
                            size_t len, size_t itemsize)
{
    CHECK(st_len >= BITSHUFFLE_HEADER_LEN);
    if (st_len < BITSHUFFLE_HEADER_LEN)
        return;
    CHECK_INT(get_be(st, 8), len);
    CHECK_INT(get_be(st + 8, 4), BITSHUFFLE_HSDS_BLOCK * itemsize);
    size_t n = len / itemsize, pos = BITSHUFFLE_HEADER_LEN, done = 0;
    unsigned char *tmp = malloc(BITSHUFFLE_HSDS_BLOCK * itemsize);
    while (tmp && n - done >= 8 && st_len - pos >= 4) {
        size_t cnt = n - done >= BITSHUFFLE_HSDS_BLOCK ? BITSHUFFLE_HSDS_BLOCK : (n - done) / 8 * 8;
        size_t clen = get_be(st + pos, 4);
        int got = clen <= st_len - pos - 4
                      ? LZ4_decompress_safe((const char *)st + pos + 4, (char *)tmp, (int)clen,
                                            (int)(cnt * itemsize))
                      : -1;
        CHECK_INT(got, cnt * itemsize);
        if (got < 0)
            break;
        pos += 4 + clen;
        done += cnt;
    }
    free(tmp);
    size_t tail = (n % 8) * itemsize;
    CHECK_INT(done, n - n % 8);
    CHECK(pos <= st_len && st_len - pos == tail);
    CHECK(pos <= st_len && st_len - pos == tail && memcmp(st + pos, data + len - tail, tail) == 0);
}

/* What codec_encode must have written for this spec (§6.4): raw, a bitshuffle stream, or a
 * frame around the data or around the stream. */
static void check_encoded(const struct codec_spec *s, const unsigned char *data, size_t len,
                          const unsigned char *enc, size_t enc_len)
{
    if (!s->compressed && s->shuffle != CODEC_SHUFFLE_BIT) {
        CHECK(enc_len == len && memcmp(enc, data, len) == 0); /* unshuffled, as HSDS stores */
        return;
    }
    if (!s->compressed) {
        check_bs_stream(enc, enc_len, data, len, s->itemsize);
        return;
    }
    size_t nbytes = enc_len >= FRAME_HEADER ? get_le(enc + 4, 4) : 0;
    check_frame(s, enc, enc_len, nbytes);
    if (s->shuffle != CODEC_SHUFFLE_BIT) {
        CHECK_INT(nbytes, len);
        return;
    }
    unsigned char *inner = malloc(nbytes ? nbytes : 1);
    int got = inner ? blosc_decompress_ctx(enc, inner, nbytes, 1) : -1;
    CHECK(got >= 0 && (size_t)got == nbytes);
    if (got >= 0 && (size_t)got == nbytes)
        check_bs_stream(inner, nbytes, data, len, s->itemsize);
    free(inner);
}

/* Encode, check the layout, decode both ways: returns the encoded size (0 on failure). */
static size_t roundtrip(const char *what, const struct codec_spec *s, const unsigned char *data,
                        size_t len)
{
    unsigned char *enc = NULL;
    size_t enc_len = 0;
    char why[WHY_LEN] = "";
    int rc = codec_encode(s, data, len, &enc, &enc_len, why, sizeof(why));
    if (rc)
        fprintf(stderr, "%s: encode of %zu bytes: rc %d (%s)\n", what, len, rc, why);
    CHECK_INT(rc, 0);
    if (rc == 0) {
        check_encoded(s, data, len, enc, enc_len);
        expect_decode(what, s, enc, enc_len, data, len);
    }
    free(enc);
    return rc ? 0 : enc_len;
}

/* An encode that must fail with -EINVAL, a reason, and no output. */
static void expect_encode_fail(const char *what, const struct codec_spec *s, const void *in,
                               size_t in_len)
{
    unsigned char *out = (unsigned char *)1;
    size_t out_len = 1;
    char why[WHY_LEN] = "";
    int rc = codec_encode(s, in, in_len, &out, &out_len, why, sizeof(why));
    if (rc != -EINVAL || !why[0])
        fprintf(stderr, "%s: expected -EINVAL, got %d (%s)\n", what, rc, why);
    CHECK_INT(rc, -EINVAL);
    CHECK(why[0] != '\0');
    CHECK(out == NULL && out_len == 0);
    if (rc == 0)
        free(out);
}

/* One filter combination over every item size and element count (and an empty chunk). */
static void encode_combination(const char *comp, const char *shuf, int level)
{
    for (size_t i = 0; i < N_OF(enc_itemsizes); i++) {
        size_t itemsize = enc_itemsizes[i];
        struct codec_spec s;
        if (spec_for(comp, level, shuf, itemsize, 0, &s))
            continue;
        for (size_t k = 0; k < N_OF(enc_counts); k++) {
            size_t len = enc_counts[k] * itemsize;
            char what[128];
            snprintf(what, sizeof(what), "encode %s/%s level %d, %zu x %zu", comp ? comp : "none",
                     shuf ? shuf : "none", level, enc_counts[k], itemsize);
            unsigned char *data = make_data(len, itemsize, k % 2, len);
            if (data)
                roundtrip(what, &s, data, len);
            free(data);
        }
        expect_encode_fail("encode of an empty chunk", &s, "", 0);
    }
}

static void test_encode_matrix(void)
{
    for (size_t c = 0; c < N_OF(enc_compressors); c++)
        for (size_t h = 0; h < N_OF(enc_shuffles); h++)
            encode_combination(enc_compressors[c], enc_shuffles[h], (int)((c * 3 + h) % 10));
}

/* 1 MiB of random and of compressible int32 through every combination at the default level;
 * what compresses must come out smaller. */
static void test_encode_big(void)
{
    const size_t len = 1 << 20;
    unsigned char *smooth = make_data(len, 4, 0, 1), *noise = make_data(len, 4, 1, 2);
    for (size_t c = 0; smooth && noise && c < N_OF(enc_compressors); c++) {
        for (size_t h = 0; h < N_OF(enc_shuffles); h++) {
            const char *comp = enc_compressors[c], *shuf = enc_shuffles[h];
            struct codec_spec s;
            if (spec_for(comp, 5, shuf, 4, 0, &s))
                continue;
            char what[128];
            snprintf(what, sizeof(what), "encode 1 MiB %s/%s", comp ? comp : "none",
                     shuf ? shuf : "none");
            size_t n = roundtrip(what, &s, smooth, len);
            if ((comp || shuf == enc_shuffles[2]) && !(n > 0 && n < len / 2))
                fprintf(stderr, "%s: %zu bytes\n", what, n);
            if (comp || shuf == enc_shuffles[2])
                CHECK(n > 0 && n < len / 2);
            n = roundtrip(what, &s, noise, len);
            CHECK(n > 0 && n <= len + len / 64 + 4096);
        }
    }
    free(smooth);
    free(noise);
}

/* The spec's samples (§6.4): 80 bytes of int32 are stored (memcpyed); gzip with shuffle sets
 * the shuffle flag (0x73 against 0x72), lz4 is codec 1. Bits, not whole bytes, are checked. */
static void test_encode_spec_sample(void)
{
    unsigned char v[80];
    for (size_t i = 0; i < 20; i++)
        put_le32(v + 4 * i, (uint32_t)i);
    static const struct {
        const char *comp, *shuf;
        int shuffle_flag, format;
    } cases[] = { { "gzip", "shuffle", 1, 3 }, { "gzip", NULL, 0, 3 }, { "lz4", NULL, 0, 1 } };
    for (size_t i = 0; i < N_OF(cases); i++) {
        struct codec_spec s;
        if (spec_for(cases[i].comp, 6, cases[i].shuf, 4, 0, &s))
            continue;
        unsigned char *f = NULL;
        size_t len = 0;
        CHECK_INT(codec_encode(&s, v, sizeof(v), &f, &len, NULL, 0), 0);
        CHECK_INT(len, 96);
        if (len != 96) {
            free(f);
            continue;
        }
        CHECK_INT(f[0], 2);
        CHECK_INT(f[3], 1);
        CHECK_INT(f[2] & FLAG_SHUFFLE, cases[i].shuffle_flag);
        CHECK_INT(f[2] & FLAG_MEMCPYED, FLAG_MEMCPYED);
        CHECK_INT(f[2] >> 5, cases[i].format);
        CHECK_INT(get_le(f + 4, 4), 80);
        CHECK_INT(get_le(f + 12, 4), 96);
        CHECK(memcmp(f + FRAME_HEADER, v, sizeof(v)) == 0);
        free(f);
    }
}

/* The level reaches blosc: 0 stores, 9 compresses at least as well as 1. */
static void test_encode_levels(void)
{
    const size_t len = 64 * 1024;
    unsigned char *data = make_data(len, 4, 0, 3);
    size_t got[3] = { 0, 0, 0 };
    const int levels[3] = { 0, 1, 9 };
    for (size_t i = 0; data && i < 3; i++) {
        struct codec_spec s;
        if (spec_for("zstd", levels[i], NULL, 4, 0, &s))
            continue;
        got[i] = roundtrip("encode zstd level", &s, data, len);
    }
    CHECK_INT(got[0], len + FRAME_HEADER);
    CHECK(got[1] > 0 && got[2] > 0 && got[2] <= got[1] && got[1] < len / 2);
    free(data);
}

/* Variable-length data: shuffles are ignored, the frame holds the stream as it is. */
static void test_encode_vlen(void)
{
    static const unsigned char stream[] = {
        2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 2, 0, 0, 0, 0xc3, 0xa9
    };
    for (size_t h = 0; h < N_OF(enc_shuffles); h++) {
        struct codec_spec s;
        if (spec_for("zstd", 5, enc_shuffles[h], 0, 1, &s) == 0) {
            CHECK_INT(s.shuffle, CODEC_SHUFFLE_NONE);
            roundtrip("encode vlen zstd", &s, stream, sizeof(stream));
        }
        if (spec_for(NULL, 5, enc_shuffles[h], 0, 1, &s) == 0)
            roundtrip("encode vlen raw", &s, stream, sizeof(stream));
    }
}

static void encode_fail_levels(void)
{
    static const char *const lists[] = {
        "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"lz4\", \"level\": 10}]",
        "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"lz4\", \"level\": -1}]",
        "[{\"class\": \"H5Z_FILTER_USER\", \"name\": \"lz4\", \"level\": \"high\"}]",
        "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": null}]",
        "[{\"class\": \"H5Z_FILTER_DEFLATE\", \"level\": 4294967296}]",
    };
    unsigned char data[16] = { 0 };
    for (size_t i = 0; i < N_OF(lists); i++) {
        json_t *j = json_loads(lists[i], 0, NULL);
        struct codec_spec s;
        /* reading does not need the level: the spec is fine for decoding */
        CHECK_INT(codec_spec_from_filters(j, 4, 0, CODEC_SOURCE_HSDS, &s, NULL, 0), 0);
        expect_encode_fail(lists[i], &s, data, sizeof(data));
        json_decref(j);
    }
}

static void encode_fail_specs(void)
{
    unsigned char data[16] = { 0 };
    struct codec_spec s;
    if (spec_for("lz4", 5, "shuffle", 4, 0, &s))
        return;
    struct codec_spec t = s;
    t.source = CODEC_SOURCE_HDF5;
    expect_encode_fail("encode for an HDF5 file", &t, data, sizeof(data));
    t = s;
    t.compressor[0] = '\0';
    expect_encode_fail("encode without a codec name", &t, data, sizeof(data));
    memset(t.compressor, 'z', sizeof(t.compressor));
    expect_encode_fail("encode with an unterminated codec name", &t, data, sizeof(data));
    snprintf(t.compressor, sizeof(t.compressor), "lzf");
    expect_encode_fail("encode with lzf", &t, data, sizeof(data));
    t = spec_of(1, 0, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HSDS); /* compressed, no name */
    expect_encode_fail("encode of a hand-made spec", &t, data, sizeof(data));
    expect_encode_fail("encode not whole elements", &s, data, 10);
    t = spec_of(0, 0, CODEC_SHUFFLE_BIT, 0, CODEC_SOURCE_HSDS);
    expect_encode_fail("bitshuffle without an element size", &t, data, sizeof(data));
    t = spec_of(0, 0, CODEC_SHUFFLE_BIT, 3, CODEC_SOURCE_HSDS);
    expect_encode_fail("bitshuffle not whole elements", &t, data, sizeof(data));
}

static void encode_fail_args(void)
{
    unsigned char data[16] = { 0 }, *out = NULL;
    size_t out_len = 0;
    struct codec_spec s;
    if (spec_for("zstd", 5, NULL, 4, 0, &s))
        return;
    CHECK_INT(codec_encode(NULL, data, 16, &out, &out_len, NULL, 0), -EINVAL);
    CHECK_INT(codec_encode(&s, NULL, 16, &out, &out_len, NULL, 0), -EINVAL);
    CHECK_INT(codec_encode(&s, data, 16, NULL, &out_len, NULL, 0), -EINVAL);
    CHECK_INT(codec_encode(&s, data, 16, &out, NULL, NULL, 0), -EINVAL);
    CHECK(out == NULL);
    /* a block of 2048 elements of 1 MiB is more than LZ4 takes */
    size_t big = 1 << 20;
    unsigned char *elem = calloc(1, big);
    struct codec_spec t = spec_of(0, 0, CODEC_SHUFFLE_BIT, big, CODEC_SOURCE_HSDS);
    if (elem)
        expect_encode_fail("bitshuffle of huge elements", &t, elem, big);
    free(elem);
}

static void test_encode_errors(void)
{
    encode_fail_levels();
    encode_fail_specs();
    encode_fail_args();
}

/* codec/encode.txt: frames our encoder wrote, with what numcodecs and bitshuffle (HSDS's own
 * decoders) made of them (tools/check_codec_encode.py). We must read them back the same, and
 * with the same c-blosc and LZ4, write them again byte for byte. */
static void encode_vector(const char *dir, const char *kind, size_t itemsize, const char *framef,
                          const char *rawf, const char *filters, const struct versions *v)
{
    char rel[PATH_LEN], why[WHY_LEN] = "";
    snprintf(rel, sizeof(rel), "codec/%s", framef);
    struct buf frame = load(dir, rel, 0, 0);
    snprintf(rel, sizeof(rel), "codec/%s", rawf);
    struct buf raw = load(dir, rel, 0, 0);
    json_t *j = json_loads(filters, 0, NULL);
    struct codec_spec s;
    int rc = j ? codec_spec_from_filters(j, itemsize, strcmp(kind, "vlen") == 0, CODEC_SOURCE_HSDS,
                                         &s, why, sizeof(why))
               : -1;
    if (rc)
        fprintf(stderr, "%s: %s: rc %d (%s)\n", framef, filters, rc, why);
    CHECK(frame.p && raw.p && rc == 0);
    if (frame.p && raw.p && rc == 0) {
        expect_decode(framef, &s, frame.p, frame.len, raw.p, raw.len);
        if (v->blosc && v->lz4)
            expect_encoding(framef, &s, &raw, &frame);
    }
    json_decref(j);
    free(frame.p);
    free(raw.p);
}

static void test_encode_vectors(const char *dir, const struct versions *v)
{
    char path[PATH_LEN], line[2048], kind[8], framef[256], rawf[256], filters[1024];
    size_t itemsize;
    snprintf(path, sizeof(path), "%s/codec/encode.txt", dir);
    FILE *fp = fopen(path, "r");
    CHECK(fp != NULL);
    int n = 0;
    while (fp && fgets(line, sizeof(line), fp)) {
        if (line[0] == '#')
            continue;
        int got =
            sscanf(line, "%7s %zu %255s %255s %1023s", kind, &itemsize, framef, rawf, filters);
        CHECK_INT(got, 5);
        if (got == 5)
            encode_vector(dir, kind, itemsize, framef, rawf, filters, v);
        n++;
    }
    if (fp)
        fclose(fp);
    CHECK(n >= 21);
}

/* ---- corrupt input ---- */

static void corrupt_blosc_header(const struct buf *gz)
{
    struct codec_spec s = spec_of(1, 1, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HSDS);
    struct buf b = dup_buf(gz->p, gz->len, 1);
    put_le32(b.p + 4, NOISE_LEN + 4); /* nbytes bigger than the chunk */
    expect_fail("blosc nbytes bigger", &s, b.p, b.len, NOISE_LEN);
    expect_fail_alloc("blosc nbytes over max", &s, b.p, b.len, NOISE_LEN);
    put_le32(b.p + 4, NOISE_LEN - 4); /* smaller */
    expect_fail("blosc nbytes smaller", &s, b.p, b.len, NOISE_LEN);
    expect_fail("blosc nbytes smaller, decode", &s, b.p, b.len, NOISE_LEN - 4);
    memcpy(b.p, gz->p, gz->len);
    expect_fail("blosc cbytes > in_len", &s, b.p, b.len - 1, NOISE_LEN);
    b.p[b.len] = 0;
    expect_fail("blosc cbytes < in_len", &s, b.p, b.len + 1, NOISE_LEN);
    expect_fail("blosc truncated", &s, b.p, 1000, NOISE_LEN);
    put_le32(b.p + 12, 1000); /* consistent header, truncated body */
    expect_fail("blosc truncated, cbytes patched", &s, b.p, 1000, NOISE_LEN);
    expect_fail_alloc("blosc truncated, alloc", &s, b.p, 1000, NOISE_LEN);
    expect_fail("blosc header only", &s, b.p, 15, NOISE_LEN);
    memcpy(b.p, gz->p, gz->len);
    b.p[0] = 3; /* not a frame HSDS recognises: zlib then fails */
    expect_fail("blosc version 3", &s, b.p, b.len, NOISE_LEN);
    free(b.p);
}

static void corrupt_blosc_body(const struct buf *gz, const struct buf *lz)
{
    struct codec_spec s = spec_of(1, 0, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HSDS);
    struct buf b = dup_buf(gz->p, gz->len, 0);
    for (size_t i = 100; i < 200; i++)
        b.p[i] ^= 0x5a;
    expect_fail("blosc zlib body corrupt", &s, b.p, b.len, NOISE_LEN);
    free(b.p);
    b = dup_buf(lz->p, lz->len, 0);
    b.p[2] &= (unsigned char)~BLOSC_MEMCPYED; /* stored data read as lz4 blocks */
    expect_fail("blosc memcpyed flag cleared", &s, b.p, b.len, NOISE_LEN);
    memcpy(b.p, lz->p, lz->len);
    put_le32(b.p + 8, 0); /* block size 0 */
    expect_fail("blosc blocksize 0", &s, b.p, b.len, NOISE_LEN);
    free(b.p);
}

/* Random bytes that look like a frame (byte 0 == 2) fail; with a consistent header they must
 * still never crash c-blosc. */
static void corrupt_blosc_random(void)
{
    struct codec_spec s = spec_of(1, 0, CODEC_SHUFFLE_NONE, 1, CODEC_SOURCE_HSDS);
    uint64_t st = 0x9E3779B97F4A7C15ull;
    unsigned char b[512];
    for (int round = 0; round < 200; round++) {
        size_t len = 16 + next_rand(&st) % (sizeof(b) - 16);
        for (size_t i = 0; i < len; i++)
            b[i] = (unsigned char)next_rand(&st);
        b[0] = 2;
        b[3] |= 1;
        expect_fail("random frame", &s, b, len, 1000);
        b[1] = 1;
        put_le32(b + 4, 1000);
        put_le32(b + 8, 1 + (uint32_t)(next_rand(&st) % 2000));
        put_le32(b + 12, (uint32_t)len);
        int rc = try_decode(&s, b, len, 1000);
        CHECK(rc == 0 || rc == -EINVAL);
    }
}

static void corrupt_zlib(const char *dir)
{
    struct buf z = load(dir, "codec/zlib_f32_1000.zlib", 0, 0);
    struct codec_spec s = spec_of(1, 1, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HDF5);
    struct codec_spec sh = spec_of(1, 1, CODEC_SHUFFLE_BYTE, 4, CODEC_SOURCE_HDF5);
    struct codec_spec lz = spec_of(1, 0, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HDF5);
    CHECK(z.p != NULL);
    if (!z.p)
        return;
    struct buf b = dup_buf(z.p, z.len, 8);
    expect_fail("zlib truncated by 1", &s, b.p, b.len - 1, 4000);
    expect_fail("zlib truncated by half", &s, b.p, b.len / 2, 4000);
    expect_fail_alloc("zlib truncated, alloc", &s, b.p, b.len / 2, 4000);
    expect_fail("zlib truncated, shuffle", &sh, b.p, b.len / 2, 4000);
    memcpy(b.p + b.len, "garbage!", 8);
    expect_fail("zlib trailing garbage", &s, b.p, b.len + 8, 4000);
    expect_fail_alloc("zlib trailing garbage, alloc", &s, b.p, b.len + 8, 4000);
    expect_fail("zlib wrong size (smaller)", &s, b.p, b.len, 3996);
    expect_fail("zlib wrong size (bigger)", &s, b.p, b.len, 4004);
    expect_fail_alloc("zlib over max", &s, b.p, b.len, 3999);
    expect_fail("zlib wrong size, shuffle", &sh, b.p, b.len, 4004);
    expect_fail("zlib not blosc for lz4", &lz, b.p, b.len, 4000);
    b.p[0] = 0x79; /* bad header */
    expect_fail("zlib bad header", &s, b.p, b.len, 4000);
    memcpy(b.p, z.p, z.len);
    b.p[b.len - 1] ^= 1; /* Adler-32 */
    expect_fail("zlib bad checksum", &s, b.p, b.len, 4000);
    free(b.p);
    free(z.p);
}

/* Rewrite the header of a copy of enc (total, block bytes) and expect failure. */
static void bs_header_case(const char *what, const struct buf *enc, uint64_t total, uint32_t block,
                           size_t out_len)
{
    struct codec_spec s = spec_of(0, 0, CODEC_SHUFFLE_BIT, 4, CODEC_SOURCE_HSDS);
    struct buf b = dup_buf(enc->p, enc->len, 0);
    put_be(b.p, total, 8);
    put_be(b.p + 8, block, 4);
    expect_fail(what, &s, b.p, b.len, out_len);
    free(b.p);
}

static void corrupt_bitshuffle_header(const struct buf *enc)
{
    struct codec_spec s = spec_of(0, 0, CODEC_SHUFFLE_BIT, 4, CODEC_SOURCE_HSDS);
    const size_t n = 20000;
    bs_header_case("bs total wrong", enc, n + 4, 8192, n);
    bs_header_case("bs total wrong (smaller)", enc, n - 4, 8192, n);
    bs_header_case("bs block 0", enc, n, 0, n);
    bs_header_case("bs block not whole elements", enc, n, 8194, n);
    bs_header_case("bs block not 8 elements", enc, n, 4 * 12, n);
    bs_header_case("bs block huge", enc, n, 0xFFFFFFE0u, n);
    bs_header_case("bs block smaller than coded", enc, n, 4096, n);
    expect_fail("bs shorter than header", &s, enc->p, 11, n);
    expect_fail("bs header only", &s, enc->p, 12, n);
    expect_fail("bs total 0 with empty chunk", &s, enc->p, 12, 0);
    struct buf b = dup_buf(enc->p, enc->len, 0);
    put_be(b.p, UINT64_MAX, 8);
    expect_fail_alloc("bs total huge, alloc", &s, b.p, b.len, 1 << 20);
    free(b.p);
    struct codec_spec odd = spec_of(0, 0, CODEC_SHUFFLE_BIT, 3, CODEC_SOURCE_HSDS);
    expect_fail("bs total not whole elements", &odd, enc->p, enc->len, n);
}

static void corrupt_bitshuffle_blocks(const struct buf *enc)
{
    struct codec_spec s = spec_of(0, 0, CODEC_SHUFFLE_BIT, 4, CODEC_SOURCE_HSDS);
    const size_t n = 20000;
    struct buf b = dup_buf(enc->p, enc->len, 4);
    CHECK(b.p != NULL);
    if (!b.p)
        return;
    put_be(b.p + 12, b.len, 4); /* first block's length past the end */
    expect_fail("bs block length past end", &s, b.p, b.len, n);
    put_be(b.p + 12, 0xFFFFFFFFu, 4);
    expect_fail("bs block length huge", &s, b.p, b.len, n);
    memcpy(b.p, enc->p, enc->len);
    memset(b.p + 16, 0xFF, 64); /* LZ4 garbage */
    expect_fail("bs lz4 garbage", &s, b.p, b.len, n);
    memcpy(b.p, enc->p, enc->len);
    expect_fail("bs truncated", &s, b.p, b.len - 1, n);
    expect_fail("bs truncated in a block", &s, b.p, b.len / 2, n);
    expect_fail("bs truncated to a block length", &s, b.p, 14, n);
    memcpy(b.p + b.len, "tail", 4);
    expect_fail("bs trailing garbage", &s, b.p, b.len + 4, n);
    free(b.p);
    /* a blosc frame too small to hold a bitshuffle header */
    struct codec_spec both = spec_of(1, 0, CODEC_SHUFFLE_BIT, 4, CODEC_SOURCE_HSDS);
    struct buf frame = blosc_wrap(enc->p, 8, 1, 0);
    expect_fail("bs in a too small blosc frame", &both, frame.p, frame.len, n);
    free(frame.p);
}

static void corrupt_misc(const char *dir)
{
    struct codec_spec raw = spec_of(0, 0, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HSDS);
    struct codec_spec sh = spec_of(0, 0, CODEC_SHUFFLE_BYTE, 3, CODEC_SOURCE_HDF5);
    struct codec_spec gz = spec_of(1, 1, CODEC_SHUFFLE_NONE, 4, CODEC_SOURCE_HSDS);
    struct codec_spec vl = spec_of(1, 0, CODEC_SHUFFLE_NONE, 0, CODEC_SOURCE_HSDS);
    unsigned char bytes[16] = { 0 };
    expect_fail("empty input", &raw, bytes, 0, 16);
    expect_fail("empty input, gzip", &gz, bytes, 0, 16);
    expect_fail_alloc("empty input, alloc", &gz, bytes, 0, 16);
    expect_fail("raw size mismatch", &raw, bytes, 12, 16);
    expect_fail("zero chunk size", &raw, bytes, 16, 0);
    expect_fail("shuffle not whole elements", &sh, bytes, 10, 10);
    expect_fail_alloc("shuffle not whole elements, alloc", &sh, bytes, 10, 16);
    expect_fail_alloc("raw over max", &raw, bytes, 16, 15);
    expect_fail("blosc-looking but short", &vl, (const unsigned char *)"\2\1\1\1", 4, 16);
    struct buf v = load(dir, VLEN_ZSTD, 0, 0);
    CHECK(v.p != NULL);
    if (v.p) {
        expect_fail_alloc("vlen max too small", &vl, v.p, v.len, 55);
        unsigned char *out = NULL;
        size_t out_len = 0;
        CHECK_INT(codec_decode_alloc(&vl, v.p, v.len, 56, &out, &out_len, NULL, 0), 0);
        CHECK_INT(out_len, 56);
        free(out);
    }
    free(v.p);
}

/* Random byte changes to valid inputs: any result but a crash or a leak. */
static void fuzz(const char *what, const struct codec_spec *s, const struct buf *in, size_t out_len,
                 int rounds)
{
    uint64_t st = 0x1234567887654321ull ^ in->len;
    struct buf b = dup_buf(in->p, in->len, 0);
    int ok = 0, failed = 0;
    for (int r = 0; r < rounds && b.p; r++) {
        memcpy(b.p, in->p, in->len);
        int flips = 1 + (int)(next_rand(&st) % 4);
        for (int i = 0; i < flips; i++)
            b.p[next_rand(&st) % b.len] ^= (unsigned char)(1 + next_rand(&st) % 255);
        int rc = try_decode(s, b.p, b.len, out_len);
        if (rc == 0)
            ok++;
        else if (rc == -EINVAL)
            failed++;
    }
    if (ok + failed != rounds)
        fprintf(stderr, "fuzz %s: %d ok, %d -EINVAL of %d\n", what, ok, failed, rounds);
    CHECK_INT(ok + failed, rounds);
    free(b.p);
}

static void test_fuzz(const char *dir)
{
    struct buf gz = load(dir, SMALL_GZIP, 0, 0), lz = load(dir, SMALL_LZ4, 0, 0),
               bs = load(dir, "codec/bs_i32_5000.bs", 0, 0),
               z = load(dir, "codec/h5zlibshuf_f32_2000.h5zlib", 0, 0);
    struct codec_spec bl = spec_of(1, 1, CODEC_SHUFFLE_NONE, 2, CODEC_SOURCE_HSDS);
    struct codec_spec bit = spec_of(0, 0, CODEC_SHUFFLE_BIT, 4, CODEC_SOURCE_HSDS);
    struct codec_spec zs = spec_of(1, 1, CODEC_SHUFFLE_BYTE, 4, CODEC_SOURCE_HDF5);
    if (gz.p && lz.p && bs.p && z.p) {
        fuzz("blosc zlib", &bl, &gz, SMALL_LEN, 300);
        fuzz("blosc lz4", &bl, &lz, SMALL_LEN, 300);
        fuzz("bitshuffle", &bit, &bs, 20000, 300);
        fuzz("zlib", &zs, &z, 8000, 300);
    }
    CHECK(gz.p && lz.p && bs.p && z.p);
    free(gz.p);
    free(lz.p);
    free(bs.p);
    free(z.p);
}

static void test_corrupt(const char *dir)
{
    struct buf gz = load(dir, NOISE_GZIP, 0, 0), lz = load(dir, NOISE_LZ4, 0, 0),
               bs = load(dir, "codec/bs_i32_5000.bs", 0, 0);
    CHECK(gz.p && lz.p && bs.p);
    if (gz.p && lz.p && bs.p) {
        corrupt_blosc_header(&gz);
        corrupt_blosc_body(&gz, &lz);
        corrupt_bitshuffle_header(&bs);
        corrupt_bitshuffle_blocks(&bs);
    }
    free(gz.p);
    free(lz.p);
    free(bs.p);
    corrupt_blosc_random();
    corrupt_zlib(dir);
    corrupt_misc(dir);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s TESTS_DATA_DIR\n", argv[0]);
        return 2;
    }
    test_spec();
    test_fixtures(argv[1]);
    test_noise_pair(argv[1]);
    struct versions v = vector_versions(argv[1]);
    test_vectors(argv[1], &v);
    test_spec_example(argv[1]);
    test_corrupt(argv[1]);
    test_fuzz(argv[1]);
    test_encode_matrix();
    test_encode_big();
    test_encode_spec_sample();
    test_encode_levels();
    test_encode_vlen();
    test_encode_errors();
    test_encode_vectors(argv[1], &v);
    return check_done("codec");
}
