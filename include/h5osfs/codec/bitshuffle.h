/*
 * bitshuffle (the codec's own, here for its unit test): the bitshuffle/LZ4 stream HSDS writes
 * (spec §6.6) and HDF5's filter 32008 stores with LZ4 (§8.3), and the bit transposition inside
 * it; both ways.
 *
 * Stream: [u64 BE total bytes][u32 BE block bytes] then, for every full block of B elements and
 * one final block of floor((N mod B)/8)*8 elements (if any), [u32 BE length][LZ4 block of the
 * bit-transposed elements]; then the last N mod 8 elements raw. Nothing may follow.
 */
#ifndef H5OSFS_CODEC_BITSHUFFLE_H
#define H5OSFS_CODEC_BITSHUFFLE_H

#include <stddef.h>

#define BITSHUFFLE_HEADER_LEN 12
/* Elements per block HSDS writes (config bit_shuffle_default_blocksize). */
#define BITSHUFFLE_HSDS_BLOCK 2048

/* The decoded size a stream's header states, so a caller can bound it before allocating:
 * 0 or -EINVAL (input shorter than the header). */
int bitshuffle_total(const void *in, size_t in_len, size_t *total, char *why, size_t why_len);

/* The largest stream that can decode to total bytes (every block incompressible, the
 * smallest blocks), or SIZE_MAX if that does not fit in a size_t: a bound for a stream whose
 * size is only known from an outer frame. */
size_t bitshuffle_stream_max(size_t total);

/* Decode a whole stream into out, which must be exactly the header's total: 0 or -EINVAL. */
int bitshuffle_decode(const void *in, size_t in_len, size_t itemsize, void *out, size_t out_len,
                      char *why, size_t why_len);

/* Undo the bit transposition of one block of n elements (n a multiple of 8) of itemsize
 * bytes: bit i of bit-row r (r = byte * 8 + bit) is that bit of element i. No overlap. */
void bitshuffle_untranspose(const unsigned char *in, unsigned char *out, size_t n, size_t itemsize);

/* The bit transposition itself (the inverse of bitshuffle_untranspose), same arguments. */
void bitshuffle_transpose(const unsigned char *in, unsigned char *out, size_t n, size_t itemsize);

/* Encode in_len bytes of itemsize-byte elements as a whole stream in blocks of block_elems
 * elements (a multiple of 8; HSDS: BITSHUFFLE_HSDS_BLOCK) with LZ4_compress_default, as
 * bitshuffle's compress_lz4 does: a new buffer (free()) in *out. 0, -EINVAL (sizes that are not
 * whole elements, a block LZ4 or the header cannot express) or -ENOMEM, with a reason. */
int bitshuffle_encode(const void *in, size_t in_len, size_t itemsize, size_t block_elems,
                      unsigned char **out, size_t *out_len, char *why, size_t why_len);

#endif
