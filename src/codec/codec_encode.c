/*
 * codec_encode: chunk array bytes -> what HSDS's storUtil._compress writes (see codec.h):
 * bitshuffle first when asked, then a blosc frame (typesize 1, the blosc shuffle flag for a
 * byte shuffle) when there is a compressor.
 */
#include "h5osfs/codec/codec.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>

#include "h5osfs/codec/bitshuffle.h"
#include "codec_int.h"

/* ---- encoding (spec §6.4, §6.6): what HSDS's storUtil._compress writes ---- */

/* The blosc codec and level of a spec with a compressor, checked before c-blosc sees them
 * (it would only print a complaint and fail). */
static int encode_codec(const struct codec_spec *spec, char *why, size_t why_len)
{
    const char *c = spec->compressor;
    if (!memchr(c, '\0', sizeof(spec->compressor)) || !c[0])
        return EINVAL_WHY("no blosc codec to compress with");
    if (blosc_compname_to_compcode(c) < 0)
        return EINVAL_WHY("this c-blosc cannot compress with %s", c);
    if (spec->level == BAD_LEVEL)
        return EINVAL_WHY("the compressor's level is not a number");
    if (spec->level < 0 || spec->level > 9)
        return EINVAL_WHY("compression level %d is not between 0 and 9", spec->level);
    return 0;
}

static int encode_args(const struct codec_spec *spec, const void *in, size_t in_len,
                       unsigned char **out, size_t *out_len, char *why, size_t why_len)
{
    if (!spec || !in || !out || !out_len)
        return EINVAL_WHY("missing argument");
    if (spec->source != CODEC_SOURCE_HSDS)
        return EINVAL_WHY("only HSDS chunk objects are encoded");
    if (in_len == 0)
        return EINVAL_WHY("empty chunk"); /* codec_decode refuses empty chunks too */
    if (spec->shuffle != CODEC_SHUFFLE_NONE && (spec->itemsize == 0 || in_len % spec->itemsize))
        return EINVAL_WHY("%zu bytes are not whole elements of %zu bytes", in_len, spec->itemsize);
    return spec->compressed ? encode_codec(spec, why, why_len) : 0;
}

static int copy_raw(const void *in, size_t len, unsigned char **out, size_t *out_len, char *why,
                    size_t why_len)
{
    unsigned char *buf = malloc(len);
    if (!buf)
        return ENOMEM_WHY(len);
    memcpy(buf, in, len);
    *out = buf;
    *out_len = len;
    return 0;
}

/* numcodecs Blosc(cname, clevel, shuffle).encode(bytes): typesize 1, automatic block size;
 * one thread through the _ctx call (the frame does not depend on the thread count). */
static int blosc_frame(const struct codec_spec *spec, int doshuffle, const unsigned char *in,
                       size_t len, unsigned char **out, size_t *out_len, char *why, size_t why_len)
{
    if (len > BLOSC_MAX_BUFFERSIZE)
        return EINVAL_WHY("%zu bytes are more than blosc can compress", len);
    size_t cap = len + BLOSC_MAX_OVERHEAD;
    unsigned char *buf = malloc(cap);
    if (!buf)
        return ENOMEM_WHY(cap);
    int n =
        blosc_compress_ctx(spec->level, doshuffle, 1, len, in, buf, cap, spec->compressor, 0, 1);
    if (n <= 0) { /* never stored raw instead, unlike HSDS (spec §12) */
        free(buf);
        return EINVAL_WHY("blosc cannot compress %zu bytes with %s (error %d)", len,
                          spec->compressor, n);
    }
    unsigned char *shrunk = realloc(buf, (size_t)n); /* give back the overhead; keep buf if not */
    *out = shrunk ? shrunk : buf;
    *out_len = (size_t)n;
    return 0;
}

/* Bitshuffle first (HSDS's block of 2048 elements); then blosc without shuffle if compressed. */
static int bitshuffle_chunk(const struct codec_spec *spec, const void *in, size_t in_len,
                            unsigned char **out, size_t *out_len, char *why, size_t why_len)
{
    unsigned char *stream = NULL;
    size_t len = 0;
    int rc = bitshuffle_encode(in, in_len, spec->itemsize, BITSHUFFLE_HSDS_BLOCK, &stream, &len,
                               why, why_len);
    if (rc)
        return rc;
    if (!spec->compressed) {
        *out = stream;
        *out_len = len;
        return 0;
    }
    rc = blosc_frame(spec, BLOSC_NOSHUFFLE, stream, len, out, out_len, why, why_len);
    free(stream);
    return rc;
}

int codec_encode(const struct codec_spec *spec, const void *in, size_t in_len, unsigned char **out,
                 size_t *out_len, char *why, size_t why_len)
{
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    int rc = encode_args(spec, in, in_len, out, out_len, why, why_len);
    if (rc)
        return rc;
    if (spec->shuffle == CODEC_SHUFFLE_BIT)
        return bitshuffle_chunk(spec, in, in_len, out, out_len, why, why_len);
    if (!spec->compressed) /* byte shuffle alone is not applied: HSDS stores such chunks raw */
        return copy_raw(in, in_len, out, out_len, why, why_len);
    int doshuffle = spec->shuffle == CODEC_SHUFFLE_BYTE ? BLOSC_SHUFFLE : BLOSC_NOSHUFFLE;
    return blosc_frame(spec, doshuffle, in, in_len, out, out_len, why, why_len);
}
