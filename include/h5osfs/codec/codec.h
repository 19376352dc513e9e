/*
 * codec: chunk object bytes -> the chunk's array bytes (spec §5.2, §6.4-§6.6, §8).
 *
 * HSDS decides how to decode a chunk from the dataset's filters plus sniffing, and so does this
 * module: with a compressor filter, bytes that look like a Blosc-1 frame (byte 0 == 2, byte 3
 * != 0) are blosc-decoded (any codec c-blosc knows; the frame's codec wins over the filter's
 * name); otherwise a gzip/deflate/zlib compressor means a zlib (RFC 1950) stream; then byte
 * shuffle or bitshuffle (12-byte big-endian header, LZ4 blocks) is undone if still pending.
 *
 * Every decoder checks sizes before it allocates or copies: a frame or header that states a size
 * other than the expected one, a truncated stream, trailing garbage, a size beyond the caller's
 * limit: -EINVAL (with a reason; -ENOMEM when memory runs out) and no partial output is ever
 * reported as success.
 * Pure and thread-safe (c-blosc is used through its _ctx functions only).
 */
#ifndef H5OSFS_CODEC_H
#define H5OSFS_CODEC_H

#include <stddef.h>

#include <jansson.h>

enum codec_shuffle { CODEC_SHUFFLE_NONE = 0, CODEC_SHUFFLE_BYTE, CODEC_SHUFFLE_BIT };

/* Where the bytes come from: an HSDS chunk object, or a byte range of an HDF5 file that a
 * *_REF layout points at. They differ for shuffle-only datasets: HSDS stores such chunks
 * unshuffled (spec §6.5, an HSDS bug), HDF5 files store them shuffled. */
enum codec_source { CODEC_SOURCE_HSDS = 0, CODEC_SOURCE_HDF5 };

struct codec_spec {
    int compressed;             /* a compressor filter (not scaleoffset) is present */
    char compressor[16];        /* for encoding: blosc codec name ("zlib", "lz4", "zstd", ...) */
    int level;                  /* for encoding: the filter's level (default 5) */
    int zlib_fallback;          /* the compressor is gzip/deflate/zlib: non-blosc = zlib stream */
    enum codec_shuffle shuffle; /* pending after decompression (never for vlen types) */
    size_t itemsize;            /* element size in bytes, for the shuffles */
    enum codec_source source;
};

/*
 * The spec of a dataset from its creationProperties.filters (a JSON array or NULL), its stored
 * element size, and whether the type holds variable-length data (then shuffles are ignored, as
 * HSDS ignores them). Entries may be objects, names or numeric ids (§5.2). 0 or -EINVAL with a
 * reason: a filter that no HSDS reader can decode (szip, lzf, unknown ids) is refused.
 */
int codec_spec_from_filters(const json_t *filters, size_t itemsize, int is_vlen,
                            enum codec_source source, struct codec_spec *out, char *why,
                            size_t why_len);

/* 1 if decoding a fixed-size chunk is a plain copy of the object: it may serve as it is. */
int codec_is_copy(const struct codec_spec *spec);

/* Decode a fixed-size chunk: the result must be exactly out_len bytes (the full chunk). */
int codec_decode(const struct codec_spec *spec, const void *in, size_t in_len, void *out,
                 size_t out_len, char *why, size_t why_len);

/* Decode a chunk of variable-length data, whose decoded size is only known from the stream:
 * a new buffer (free()) of at most max bytes. */
int codec_decode_alloc(const struct codec_spec *spec, const void *in, size_t in_len, size_t max,
                       unsigned char **out, size_t *out_len, char *why, size_t why_len);

/*
 * Encode a chunk's array bytes the way HSDS stores them for this spec (spec §6.4): raw when
 * there is no compressor (byte shuffle alone is NOT applied: HSDS stores such chunks
 * unshuffled); otherwise a Blosc-1 frame with typesize 1, the compressor's codec (gzip/deflate
 * -> zlib, lz4, lz4hc, zstd, blosclz, snappy), its level (default 5) and the blosc shuffle flag
 * when byte shuffle is requested; bitshuffle is written as HSDS writes it (bitshuffle+LZ4
 * framing, then blosc without shuffle when a compressor is also set). *out is malloc'd.
 * Anything codec_decode(spec) reads back equal. Only spec->source == CODEC_SOURCE_HSDS.
 * -EINVAL with a reason for another source, an empty chunk, a length that is not whole
 * elements, an unknown codec or a level outside 0..9, a blosc failure; -ENOMEM.
 */
int codec_encode(const struct codec_spec *spec, const void *in, size_t in_len, unsigned char **out,
                 size_t *out_len, char *why, size_t why_len);

#endif
