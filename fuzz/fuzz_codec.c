/*
 * fuzz_codec: the chunk decode path (src/codec): codec_spec_from_filters, then codec_decode
 * and/or codec_decode_alloc on arbitrary chunk bytes.
 *
 * Input: an 8-byte header, then the chunk object's bytes.
 *   byte 0   bits 0-3: compressor entry (see COMPRESSORS), bits 4-5: shuffle entry (none,
 *            "shuffle", 32008, {"class": "H5Z_FILTER_SHUFFLE"}), bit 6: shuffle listed first,
 *            bit 7: an ignored fletcher32 entry too
 *   byte 1   element size (0..16, or larger odd sizes from 0xf0 up)
 *   byte 2   bit 0: source HDF5 (else HSDS), bit 1: vlen type, bit 2: codec_decode_alloc
 *            instead of codec_decode, bit 3: both (and compare them)
 *   byte 3-6 expected decoded size (fixed) / limit (alloc), little-endian, at most 4 MiB
 *   byte 7   reserved
 *
 * Checks beyond "no crash, no leak, no UB": the return is 0, -EINVAL (with a reason) or
 * -ENOMEM; a successful alloc decode is within its limit; when both decoders succeed on the
 * same spec and size they produce the same bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "h5osfs/codec/codec.h"

#define HEADER_LEN 8
#define SIZE_MASK ((1u << 22) - 1)

/* Each as a filter entry the way HSDS may write it: object, name or numeric id. */
static const char *const COMPRESSORS[16] = {
    NULL,
    "\"gzip\"",
    "\"deflate\"",
    "1",
    "{\"class\": \"H5Z_FILTER_DEFLATE\", \"id\": 1, \"level\": 6}",
    "{\"class\": \"H5Z_FILTER_BLOSC\", \"id\": 32001, \"name\": \"blosclz\"}",
    "{\"class\": \"H5Z_FILTER_LZ4\", \"id\": 32004, \"name\": \"lz4\"}",
    "{\"class\": \"H5Z_FILTER_USER\", \"name\": \"lz4hc\", \"id\": 32005}",
    "{\"class\": \"H5Z_FILTER_USER\", \"name\": \"zstd\", \"level\": 5, \"id\": 32015}",
    "{\"class\": \"H5Z_FILTER_USER\", \"name\": \"gzip\", \"id\": 1}",
    "\"snappy\"",
    "{\"class\": \"H5Z_FILTER_SCALEOFFSET\", \"id\": 6}",
    "\"lzf\"",
    "{\"class\": \"H5Z_FILTER_USER\", \"id\": 32015}",
    "32004",
    "{\"class\": \"H5Z_FILTER_ZSTD\", \"id\": 32015}",
};

static const char *const SHUFFLES[4] = {
    NULL,
    "\"shuffle\"",
    "32008",
    "{\"class\": \"H5Z_FILTER_SHUFFLE\", \"id\": 2}",
};

static json_t *make_filters(unsigned b0)
{
    const char *comp = COMPRESSORS[b0 & 15], *shuf = SHUFFLES[(b0 >> 4) & 3];
    const char *first = (b0 & 0x40) ? shuf : comp, *second = (b0 & 0x40) ? comp : shuf;
    char text[512];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof(text) - n, "[");
    if (b0 & 0x80)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "\"fletcher32\"%s",
                              first || second ? ", " : "");
    if (first)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s", first, second ? ", " : "");
    if (second)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%s", second);
    snprintf(text + n, sizeof(text) - n, "]");
    json_t *f = json_loads(text, 0, NULL);
    if (!f)
        abort(); /* the table above is wrong */
    return f;
}

static void check_rc(int rc, const char *why, const char *what)
{
    if (rc == 0 || rc == -ENOMEM)
        return;
    if (rc != -EINVAL) {
        fprintf(stderr, "%s returned %d\n", what, rc);
        abort();
    }
    if (why[0] == '\0') {
        fprintf(stderr, "%s failed without a reason\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER_LEN)
        return 0;
    unsigned b0 = data[0], b1 = data[1], flags = data[2];
    size_t itemsize = b1 < 0xf0 ? b1 % 17 : (size_t)(b1 - 0xef) * 37;
    size_t expect =
        ((size_t)data[3] | (size_t)data[4] << 8 | (size_t)data[5] << 16 | (size_t)data[6] << 24) &
        SIZE_MASK;
    enum codec_source source = (flags & 1) ? CODEC_SOURCE_HDF5 : CODEC_SOURCE_HSDS;
    int is_vlen = (flags & 2) != 0;
    const uint8_t *in = data + HEADER_LEN;
    size_t in_len = size - HEADER_LEN;

    /* a copy of exactly in_len bytes, so ASan sees any read past the chunk object */
    uint8_t *chunk = malloc(in_len ? in_len : 1);
    if (!chunk)
        return 0;
    memcpy(chunk, in, in_len);

    json_t *filters = make_filters(b0);
    struct codec_spec spec;
    char why[256] = "";
    int rc = codec_spec_from_filters(filters, itemsize, is_vlen, source, &spec, why, sizeof why);
    json_decref(filters);
    check_rc(rc, why, "codec_spec_from_filters");
    if (rc != 0) {
        free(chunk);
        return 0;
    }

    int do_fixed = !(flags & 4) || (flags & 8), do_alloc = (flags & 4) || (flags & 8);
    unsigned char *fixed = NULL, *alloc = NULL;
    size_t alloc_len = 0;
    int rc_fixed = -1, rc_alloc = -1;
    if (do_fixed) {
        fixed = malloc(expect ? expect : 1);
        if (fixed) {
            why[0] = '\0';
            rc_fixed = codec_decode(&spec, chunk, in_len, fixed, expect, why, sizeof why);
            check_rc(rc_fixed, why, "codec_decode");
        }
    }
    if (do_alloc) {
        why[0] = '\0';
        rc_alloc =
            codec_decode_alloc(&spec, chunk, in_len, expect, &alloc, &alloc_len, why, sizeof why);
        check_rc(rc_alloc, why, "codec_decode_alloc");
        if (rc_alloc == 0 && (alloc_len > expect || !alloc)) {
            fprintf(stderr, "codec_decode_alloc: %zu bytes, limit %zu\n", alloc_len, expect);
            abort();
        }
        if (rc_alloc != 0 && alloc) {
            fprintf(stderr, "codec_decode_alloc failed but returned a buffer\n");
            abort();
        }
    }
    if (rc_fixed == 0 && rc_alloc == 0 && alloc_len == expect &&
        memcmp(fixed, alloc, expect) != 0) {
        fprintf(stderr, "codec_decode and codec_decode_alloc disagree on %zu bytes\n", expect);
        abort();
    }
    free(alloc);
    free(fixed);
    free(chunk);
    return 0;
}
