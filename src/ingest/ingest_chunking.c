/*
 * ingest_chunking: the chunk shape HSDS gives a dataset (§5.4, chunkUtil's guessChunk,
 * expandChunk and shrinkChunk): the JSON (ingest_json.c), the linked layouts (ingest_link.c)
 * and the chunks themselves (ingest_data.c) all use it.
 */
#include <stdint.h>
#include <string.h>

#include "h5osfs/ingest/ingest_int.h"

static uint64_t chunk_bytes(int rank, const uint64_t *c, size_t itemsize)
{
    uint64_t s = itemsize;
    for (int k = 0; k < rank; k++)
        s = c[k] && s > UINT64_MAX / c[k] ? UINT64_MAX : s * c[k];
    return s;
}

/* chunkUtil.expandChunk; maxdims NULL: the shape states none (not extensible) */
static void expand_chunk(int rank, const uint64_t *dims, const uint64_t *maxdims, size_t itemsize,
                         uint64_t *c)
{
    int extendable = 0;
    uint64_t dset = itemsize;
    for (int k = 0; k < rank; k++) {
        extendable += maxdims && (maxdims[k] == 0 || maxdims[k] > dims[k]);
        if (dims[k] && __builtin_mul_overflow(dset, dims[k], &dset))
            dset = UINT64_MAX; /* Python's size has no bound: never "small" by wrapping */
    }
    if (dset <= INGEST_CHUNK_MIN && extendable == 0) {
        memcpy(c, dims, (size_t)rank * sizeof *c);
        return;
    }
    uint64_t size = chunk_bytes(rank, c, itemsize);
    while (size < INGEST_CHUNK_MIN) {
        uint64_t old = size;
        for (int k = rank - 1; k >= 0; k--) {
            if (extendable > 0) {
                if (maxdims[k] == 0) {
                    c[k] *= 2;
                } else if (maxdims[k] > c[k]) {
                    c[k] *= 2;
                    if (c[k] >= dims[k]) {
                        c[k] = maxdims[k];
                        extendable--;
                    }
                } else {
                    continue;
                }
            } else if (dims[k] > c[k]) {
                c[k] = c[k] * 2 > dims[k] ? dims[k] : c[k] * 2;
            } else {
                continue;
            }
            size = chunk_bytes(rank, c, itemsize);
            if (size > INGEST_CHUNK_MIN)
                break;
        }
        if (size <= old || size > INGEST_CHUNK_MIN)
            break;
    }
}

/* chunkUtil.shrinkChunk */
static void shrink_chunk(int rank, size_t itemsize, uint64_t *c)
{
    uint64_t size = chunk_bytes(rank, c, itemsize);
    while (size > INGEST_CHUNK_MAX) {
        /* a round that halves a dim makes HSDS's (unbounded) size smaller even while ours is
         * saturated: stop only when no dim can be halved */
        int halved = 0;
        for (int k = 0; k < rank; k++) {
            if (c[k] <= 1)
                continue;
            c[k] = c[k] / 2 + (c[k] % 2);
            halved = 1;
            size = chunk_bytes(rank, c, itemsize);
            if (size <= INGEST_CHUNK_MAX)
                break;
        }
        if (!halved)
            break;
    }
}

void ingest_chunk_dims(int rank, const uint64_t *dims, const uint64_t *maxdims, size_t itemsize,
                       const uint64_t *request, uint64_t *out)
{
    if (rank == 0) {
        out[0] = 1;
        return;
    }
    if (itemsize == 0)
        itemsize = INGEST_VLEN_ITEMSIZE;
    const uint64_t *guess = maxdims ? maxdims : dims;
    for (int k = 0; k < rank; k++) /* guessChunk: 0 (unlimited) guesses 1024 */
        out[k] = request ? request[k] : guess[k] ? guess[k] : 1024;
    if (chunk_bytes(rank, out, itemsize) < INGEST_CHUNK_MIN)
        expand_chunk(rank, dims, maxdims, itemsize, out);
    if (chunk_bytes(rank, out, itemsize) > INGEST_CHUNK_MAX)
        shrink_chunk(rank, itemsize, out);
}
