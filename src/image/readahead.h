/*
 * readahead: the read-ahead policy of an image's readers, apart from its mechanics.
 *
 * image_read.c tells the policy where each read of a file goes; the policy decides what to
 * load ahead, what to guess and what to let go of, and says so through struct readahead_io:
 * it does no I/O, starts no thread, reads no clock, and keeps its state in the reader's fields
 * (struct image_reader: expect, window, ahead, last_chunk, run_*, stride, spread_*, through*).
 * The same reads and the same answers of io give the same decisions (tests/unit/test_readahead.c
 * replays traces of reads and checks them).
 *
 * What it guarantees (the constants are image.h's IMAGE_PREFETCH_* and IMAGE_SPREAD_*):
 * - sequential: a read within 4 MiB of where the last one ended continues the reader's run;
 *   anything else is a jump, which empties the window and starts a new run.
 * - read-ahead in file order: the third chunk a run enters (and each one after it) opens a
 *   window of chunks after it, 2, then doubling to IMAGE_PREFETCH_MAX chunks or
 *   IMAGE_PREFETCH_BYTES; a chunk is asked for once per run. Reads within one chunk and reads
 *   of metadata alone widen nothing.
 * - lines: a jump from the chunk the last jump landed in to its neighbour one step along a grid
 *   dimension other than the last (a column: (i, j) then (i + 1, j)) asks for the rest of that
 *   line of chunks, to the grid's edge (at most IMAGE_PREFETCH_MAX chunks or
 *   IMAGE_PREFETCH_BYTES); so a column reader has its line asked for from its 2nd chunk on,
 *   and a new line it starts at position 0 of that dimension from its 1st chunk on.
 * - spread: a jump that lands on a chunk io says is not loaded nor loading (a miss) guesses
 *   what follows: the next lines along the reader's line dimension, each from the miss's
 *   position to the edge (a reader of lines; HSDS chunks only), or else the stored chunks after
 *   it in file order of the same dataset. None at the reader's first two jumps into another
 *   chunk, then 1, 2, 4, ... chunks at its third, fourth, ... (jumps), and at most 1/IMAGE_SPREAD_MISS of the cache
 *   per miss,
 *   and the reader's guesses not yet read (readahead_taken) may hold at most
 *   1/IMAGE_SPREAD_UNUSED of it: a reader whose guesses go unused stops guessing.
 * - drops: a chunk whose every byte one sequential run read, a run that began before the
 *   chunk, is dropped (io->drop) once read through, however its reads were ordered; a run that
 *   began inside the chunk or in the page its first byte lies in (a jump landed there) keeps
 *   it. An exact reader (image_reader.exact: the kernel keeps no pages) drops nothing, and its
 *   reads are in order only within a page of each other.
 * - a full queue (io->queue < 0) stops the asking of that decision; nothing waits.
 * Several threads may call it for one reader at once: the fields are atomic, and a race can
 * only lose or repeat a request or a drop, never change a byte read.
 */
#ifndef H5OSFS_IMAGE_READAHEAD_H
#define H5OSFS_IMAGE_READAHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "extent.h"
#include "h5osfs/image/image.h"
#include "h5osfs/cache/prefetch.h"

/* What the policy needs to know of a dataset. */
struct readahead_dataset {
    int rank;
    const uint64_t *grid; /* chunks per dimension, rank of them */
    uint64_t chunk_bytes;
    int fetchable; /* its chunks can be loaded (not poisoned) */
    int by_lines;  /* a miss in it may guess whole lines (HSDS chunks) */
};

/* The file's layout, and what carries the policy's decisions out. */
struct readahead_io {
    const struct segment *segs; /* the file's segments, in file order */
    size_t n_segs;
    uint64_t page;           /* the kernel's page: a READ begins on one and spans whole ones,
                              * but for an exact reader's (image_reader.exact: any bytes) */
    uint64_t cache_capacity; /* bytes, as the cache charges them (CHUNK_CACHE_ENTRY_COST) */
    void *ctx;
    /* Dataset dset: 0, or -1 when there is none. */
    int (*dataset)(void *ctx, uint32_t dset, struct readahead_dataset *out);
    /* 1 when the chunk is loaded or being loaded. */
    int (*cached)(void *ctx, uint32_t dset, uint64_t chunk);
    /* Ask for a load of the chunk (len bytes): 0 queued, 1 already loaded or loading, -1 the
     * queue is full or memory short (stop asking). */
    int (*queue)(void *ctx, enum prefetch_kind kind, uint32_t dset, uint64_t chunk, uint64_t len);
    /* The reader has read the chunk through: the cache may let it go. */
    void (*drop)(void *ctx, uint32_t dset, uint64_t chunk);
};

/* A read of len bytes at off: 1 when it continues the reader's run, 0 when it is a jump.
 * *run_from: where the run it belongs to began (for readahead_read_through). */
int readahead_access(struct image_reader *r, uint64_t off, size_t len, uint64_t *run_from);

/* The chunk segment a read of len bytes at off is about, given seg, the first segment it
 * touches: seg, or the next when all the read takes of seg lies in its first page and it goes
 * on past seg (a READ begins on a page, and a jump to a chunk that does not begin on one
 * begins in the last page of the chunk before it, in file order). */
size_t readahead_subject(const struct readahead_io *io, size_t seg, uint64_t off, size_t len);

/* Whether the few bytes a read takes of a chunk it only brushes (readahead_subject moved past
 * it) are to be fetched alone, by a ranged GET, rather than by loading that chunk: while the
 * reader has shown no pattern (fewer jumps than earn guesses), since a reader of two values
 * would pay a whole chunk for a few bytes; not after, since a reader of columns or boxes goes
 * on to read most chunks, the brushed one too, and the range would be a request more. */
int readahead_brush_by_range(const struct image_reader *r);

/* The chunk segment a read is about (readahead_subject; once per read; only for readers that
 * read ahead): queues read-ahead, lines and guesses through io. */
void readahead_follow(struct image_reader *r, const struct readahead_io *io, size_t seg,
                      int sequential);

/* n more bytes of chunk segment seg read, in a run that began at run_from: may drop it. */
void readahead_read_through(struct image_reader *r, const struct readahead_io *io, size_t seg,
                            uint64_t n, uint64_t run_from);

/* The reader read len bytes of a chunk that was loaded as a guess. */
void readahead_taken(struct image_reader *r, uint64_t len);

#endif
