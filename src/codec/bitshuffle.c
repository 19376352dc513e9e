/*
 * bitshuffle: decode the bitshuffle/LZ4 stream of spec §6.6 (the framing of bitshuffle's
 * compress_lz4 behind the HDF5 filter's 12-byte header) and undo its bit transposition; and
 * write such a stream the way HSDS does (bit transposition, then LZ4_compress_default per block
 * into a buffer of LZ4_compressBound: what bitshuffle's compress_lz4 calls).
 *
 * Every length in the stream is checked against what the header and the caller imply before it
 * is used; LZ4 blocks go through LZ4_decompress_safe, which never reads or writes out of bounds.
 */
#include "h5osfs/codec/bitshuffle.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>

#include "h5osfs/util/why.h"

/* Elements per bit-transposed group: a block holds a multiple of this, the rest is raw. */
#define GROUP 8u
/* Each block is framed by its compressed length. */
#define BLOCK_LEN_BYTES 4u

static uint64_t read_be(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

int bitshuffle_total(const void *in, size_t in_len, size_t *total, char *why, size_t why_len)
{
    if (!in || in_len < BITSHUFFLE_HEADER_LEN)
        return why_reject(why, why_len, "bitshuffle stream of %zu bytes has no 12-byte header",
                          in_len);
    uint64_t t = read_be(in, 8);
    if (t > SIZE_MAX)
        return why_reject(why, why_len, "bitshuffle header states %llu bytes",
                          (unsigned long long)t);
    *total = (size_t)t;
    return 0;
}

size_t bitshuffle_stream_max(size_t total)
{
    /* The worst case is 8-byte blocks of incompressible data: 4 length bytes plus LZ4's bound
     * (n + n/255 + 16) for every 8 bytes, i.e. 3.5 bytes per byte; 4 per byte plus slack for
     * the header and a partial block covers it. */
    const size_t slack = 64;
    if (total > (SIZE_MAX - slack) / 4)
        return SIZE_MAX;
    return 4 * total + slack;
}

/* Transpose an 8x8 bit matrix held as 8 bytes (row r = byte r, column c = bit c): three
 * rounds of swapping the off-diagonal halves of 2x2, 4x4 and 8x8 sub-blocks (delta swaps). */
static uint64_t transpose_8x8(uint64_t x)
{
    static const struct {
        uint64_t mask;
        unsigned shift;
    } round[3] = {
        { 0x00AA00AA00AA00AAull, 7 },
        { 0x0000CCCC0000CCCCull, 14 },
        { 0x00000000F0F0F0F0ull, 28 },
    };
    for (size_t i = 0; i < 3; i++) {
        uint64_t t = (x ^ (x >> round[i].shift)) & round[i].mask;
        x ^= t ^ (t << round[i].shift);
    }
    return x;
}

void bitshuffle_untranspose(const unsigned char *in, unsigned char *out, size_t n, size_t itemsize)
{
    size_t row_len = n / GROUP; /* bytes per bit-row: one bit per element */
    for (size_t g = 0; g < row_len; g++) {
        for (size_t byte = 0; byte < itemsize; byte++) {
            /* The 8 bit-rows of this byte, at this group of 8 elements: byte k of x holds
             * bit k of the 8 elements; transposed, byte e holds the 8 bits of element e. */
            const unsigned char *rows = in + byte * GROUP * row_len + g;
            uint64_t x = 0;
            for (unsigned k = 0; k < GROUP; k++)
                x |= (uint64_t)rows[k * row_len] << (8 * k);
            x = transpose_8x8(x);
            unsigned char *dst = out + g * GROUP * itemsize + byte;
            for (unsigned e = 0; e < GROUP; e++)
                dst[e * itemsize] = (unsigned char)(x >> (8 * e));
        }
    }
}

/* The block geometry from the header, checked: elements per full block. */
static int block_elems(const unsigned char *in, size_t itemsize, size_t *elems, char *why,
                       size_t why_len)
{
    uint64_t bytes = read_be(in + 8, 4);
    if (bytes == 0 || bytes % itemsize)
        return why_reject(why, why_len,
                          "bitshuffle block size %llu is not whole elements of %zu bytes",
                          (unsigned long long)bytes, itemsize);
    if (bytes > LZ4_MAX_INPUT_SIZE)
        return why_reject(why, why_len, "bitshuffle block size %llu is larger than LZ4 allows",
                          (unsigned long long)bytes);
    if ((bytes / itemsize) % GROUP)
        return why_reject(why, why_len, "bitshuffle block of %llu elements is not a multiple of 8",
                          (unsigned long long)(bytes / itemsize));
    *elems = (size_t)(bytes / itemsize);
    return 0;
}

struct cursor {
    const unsigned char *p;
    size_t left;
};

/* One framed block of n elements at the cursor: LZ4 into tmp, untransposed into out. */
static int decode_block(struct cursor *c, size_t n, size_t itemsize, unsigned char *tmp,
                        unsigned char *out, char *why, size_t why_len)
{
    if (c->left < BLOCK_LEN_BYTES)
        return why_reject(why, why_len, "bitshuffle stream truncated before a block length");
    uint64_t clen = read_be(c->p, BLOCK_LEN_BYTES);
    if (clen > c->left - BLOCK_LEN_BYTES || clen > INT_MAX)
        return why_reject(why, why_len,
                          "bitshuffle block of %llu bytes runs past the end (%zu left)",
                          (unsigned long long)clen, c->left - BLOCK_LEN_BYTES);
    size_t raw = n * itemsize; /* <= block bytes <= LZ4_MAX_INPUT_SIZE: fits an int */
    int got =
        LZ4_decompress_safe((const char *)c->p + BLOCK_LEN_BYTES, (char *)tmp, (int)clen, (int)raw);
    if (got < 0 || (size_t)got != raw)
        return why_reject(why, why_len, "bitshuffle LZ4 block is corrupt (%d of %zu bytes)", got,
                          raw);
    bitshuffle_untranspose(tmp, out, n, itemsize);
    c->p += BLOCK_LEN_BYTES + clen;
    c->left -= BLOCK_LEN_BYTES + (size_t)clen;
    return 0;
}

/* The blocks and the raw tail, once the header is known good: n elements in all. */
static int decode_body(struct cursor *c, size_t n, size_t itemsize, size_t block,
                       unsigned char *out, char *why, size_t why_len)
{
    size_t first = n < block ? n - n % GROUP : block; /* the largest block this stream has */
    unsigned char *tmp = NULL;
    if (first && !(tmp = malloc(first * itemsize))) {
        (void)why_reject(why, why_len, "cannot allocate %zu bytes", first * itemsize);
        return -ENOMEM;
    }
    size_t done = 0;
    int rc = 0;
    while (rc == 0 && n - done >= GROUP) {
        size_t cnt = n - done < block ? (n - done) - (n - done) % GROUP : block;
        rc = decode_block(c, cnt, itemsize, tmp, out + done * itemsize, why, why_len);
        done += cnt;
    }
    free(tmp);
    if (rc)
        return rc;
    size_t tail = (n - done) * itemsize;
    if (c->left != tail)
        return why_reject(why, why_len, "bitshuffle stream ends with %zu bytes, not %zu raw ones",
                          c->left, tail);
    if (tail)
        memcpy(out + done * itemsize, c->p, tail);
    return 0;
}

int bitshuffle_decode(const void *in, size_t in_len, size_t itemsize, void *out, size_t out_len,
                      char *why, size_t why_len)
{
    size_t total = 0, block = 0;
    int rc = bitshuffle_total(in, in_len, &total, why, why_len);
    if (rc)
        return rc;
    if (itemsize == 0)
        return why_reject(why, why_len, "bitshuffle needs an element size");
    if (total != out_len)
        return why_reject(why, why_len, "bitshuffle header states %zu bytes, the chunk has %zu",
                          total, out_len);
    if (total % itemsize)
        return why_reject(why, why_len, "bitshuffle total %zu is not whole elements of %zu bytes",
                          total, itemsize);
    rc = block_elems(in, itemsize, &block, why, why_len);
    if (rc)
        return rc;
    struct cursor c = { (const unsigned char *)in + BITSHUFFLE_HEADER_LEN,
                        in_len - BITSHUFFLE_HEADER_LEN };
    return decode_body(&c, total / itemsize, itemsize, block, out, why, why_len);
}

/* ---- encoding ---- */

static void write_be(unsigned char *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[n - 1 - i] = (unsigned char)(v >> (8 * i));
}

void bitshuffle_transpose(const unsigned char *in, unsigned char *out, size_t n, size_t itemsize)
{
    size_t row_len = n / GROUP; /* bytes per bit-row: one bit per element */
    for (size_t g = 0; g < row_len; g++) {
        for (size_t byte = 0; byte < itemsize; byte++) {
            /* Byte e of x holds this byte of element e of the group; transposed, byte k holds
             * bit k of the 8 elements: byte g of bit-row byte * 8 + k. */
            const unsigned char *src = in + g * GROUP * itemsize + byte;
            uint64_t x = 0;
            for (unsigned e = 0; e < GROUP; e++)
                x |= (uint64_t)src[e * itemsize] << (8 * e);
            x = transpose_8x8(x);
            unsigned char *rows = out + byte * GROUP * row_len + g;
            for (unsigned k = 0; k < GROUP; k++)
                rows[k * row_len] = (unsigned char)(x >> (8 * k));
        }
    }
}

/* Sizes an encoder can write: whole elements, blocks of whole groups that LZ4 and the 4-byte
 * header field can express, and a total whose worst-case stream (below 4 bytes per byte, see
 * bitshuffle_stream_max) fits in a size_t. */
static int encode_check(size_t in_len, size_t itemsize, size_t block_elems, char *why,
                        size_t why_len)
{
    if (itemsize == 0 || in_len % itemsize)
        return why_reject(why, why_len, "%zu bytes are not whole elements of %zu bytes", in_len,
                          itemsize);
    if (block_elems == 0 || block_elems % GROUP)
        return why_reject(why, why_len, "bitshuffle block of %zu elements is not a multiple of 8",
                          block_elems);
    if (block_elems > LZ4_MAX_INPUT_SIZE / itemsize)
        return why_reject(why, why_len,
                          "bitshuffle block of %zu elements of %zu bytes is larger than LZ4 allows",
                          block_elems, itemsize);
    if (in_len > SIZE_MAX / 4 - 64)
        return why_reject(why, why_len, "%zu bytes are too many to bitshuffle", in_len);
    return 0;
}

/* The largest stream for n elements: every block at LZ4's bound (block sizes fit an int,
 * checked by encode_check). */
static size_t encode_bound(size_t n, size_t itemsize, size_t block)
{
    size_t full = n / block, rest = n % block, last = rest - rest % GROUP;
    size_t bound = BITSHUFFLE_HEADER_LEN +
                   full * (BLOCK_LEN_BYTES + (size_t)LZ4_compressBound((int)(block * itemsize)));
    if (last)
        bound += BLOCK_LEN_BYTES + (size_t)LZ4_compressBound((int)(last * itemsize));
    return bound + (rest % GROUP) * itemsize;
}

struct wcursor {
    unsigned char *p;
    size_t left;
};

/* One block of n elements: transposed into tmp, LZ4 behind its 4-byte length at the cursor. */
static int encode_block(const unsigned char *in, size_t n, size_t itemsize, unsigned char *tmp,
                        struct wcursor *c, char *why, size_t why_len)
{
    int raw = (int)(n * itemsize); /* <= block bytes <= LZ4_MAX_INPUT_SIZE */
    int cap = LZ4_compressBound(raw);
    if ((size_t)cap > c->left - BLOCK_LEN_BYTES) /* cannot happen: the buffer is the bound */
        return why_reject(why, why_len, "bitshuffle output buffer is too small");
    bitshuffle_transpose(in, tmp, n, itemsize);
    int got = LZ4_compress_default((const char *)tmp, (char *)c->p + BLOCK_LEN_BYTES, raw, cap);
    if (got <= 0)
        return why_reject(why, why_len, "LZ4 cannot compress a bitshuffle block of %d bytes", raw);
    write_be(c->p, (uint64_t)got, BLOCK_LEN_BYTES);
    c->p += BLOCK_LEN_BYTES + (size_t)got;
    c->left -= BLOCK_LEN_BYTES + (size_t)got;
    return 0;
}

/* The blocks and the raw tail of n elements, as decode_body reads them. */
static int encode_body(const unsigned char *in, size_t n, size_t itemsize, size_t block,
                       struct wcursor *c, char *why, size_t why_len)
{
    size_t first = n < block ? n - n % GROUP : block; /* the largest block this stream has */
    unsigned char *tmp = NULL;
    if (first && !(tmp = malloc(first * itemsize))) {
        (void)why_reject(why, why_len, "cannot allocate %zu bytes", first * itemsize);
        return -ENOMEM;
    }
    size_t done = 0;
    int rc = 0;
    while (rc == 0 && n - done >= GROUP) {
        size_t cnt = n - done < block ? (n - done) - (n - done) % GROUP : block;
        rc = encode_block(in + done * itemsize, cnt, itemsize, tmp, c, why, why_len);
        done += cnt;
    }
    free(tmp);
    if (rc)
        return rc;
    size_t tail = (n - done) * itemsize;
    if (tail > c->left)
        return why_reject(why, why_len, "bitshuffle output buffer is too small");
    if (tail)
        memcpy(c->p, in + done * itemsize, tail);
    c->p += tail;
    c->left -= tail;
    return 0;
}

int bitshuffle_encode(const void *in, size_t in_len, size_t itemsize, size_t block_elems,
                      unsigned char **out, size_t *out_len, char *why, size_t why_len)
{
    *out = NULL;
    *out_len = 0;
    int rc = encode_check(in_len, itemsize, block_elems, why, why_len);
    if (rc)
        return rc;
    size_t n = in_len / itemsize, cap = encode_bound(n, itemsize, block_elems);
    unsigned char *buf = malloc(cap);
    if (!buf) {
        (void)why_reject(why, why_len, "cannot allocate %zu bytes", cap);
        return -ENOMEM;
    }
    write_be(buf, in_len, 8);
    write_be(buf + 8, block_elems * itemsize, 4);
    struct wcursor c = { buf + BITSHUFFLE_HEADER_LEN, cap - BITSHUFFLE_HEADER_LEN };
    rc = encode_body(in, n, itemsize, block_elems, &c, why, why_len);
    if (rc) {
        free(buf);
        return rc;
    }
    size_t len = cap - c.left;
    unsigned char *shrunk = realloc(buf, len); /* give back LZ4's worst case; keep buf if not */
    *out = shrunk ? shrunk : buf;
    *out_len = len;
    return 0;
}
