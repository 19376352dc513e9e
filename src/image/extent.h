/*
 * extent: the byte layout of a synthesised file while it is being written and after.
 *
 * While the HDF5 library writes the file (through vfd.c), two kinds of writes arrive: metadata
 * (and other bytes that must be kept: small raw data, the global heap of vlen data), stored as
 * runs of bytes; and chunk placeholders, recorded as (offset, size, tag) without bytes. The
 * library frees and reuses space within one build, so every write replaces whatever it overlaps:
 * overlapped runs are trimmed, an overlapped chunk extent is dropped whole (its chunk was
 * rewritten elsewhere or deleted). Last write wins.
 *
 * extent_finish freezes the layout at the final end of allocation into a sorted list of
 * segments (runs and chunks; the gaps between them, holes, read as zeros), which is what a read
 * walks. Not thread-safe while being
 * built; immutable and freely shared after extent_finish.
 */
#ifndef H5OSFS_IMAGE_EXTENT_H
#define H5OSFS_IMAGE_EXTENT_H

#include <stddef.h>
#include <stdint.h>

/* What a chunk extent serves: chunk `chunk` (linear index in the grid) of dataset `dset`. */
struct extent_tag {
    uint32_t dset;
    uint64_t chunk;
};

enum segment_kind { SEGMENT_BYTES = 1, SEGMENT_CHUNK };

/* 32 bytes: a domain of a million chunks keeps a million of these. */
struct segment {
    uint64_t off;
    uint64_t len;
    union {
        const unsigned char *bytes; /* SEGMENT_BYTES: len bytes */
        uint64_t chunk;             /* SEGMENT_CHUNK: the extent is the whole chunk */
    } u;
    uint32_t dset; /* SEGMENT_CHUNK: the chunk's dataset (extent_tag) */
    uint32_t kind; /* enum segment_kind */
};

struct extent_map;

struct extent_map *extent_map_new(void);
void extent_map_free(struct extent_map *map);

/* Keep len bytes at off. 0 or -ENOMEM. */
int extent_write_bytes(struct extent_map *map, uint64_t off, const void *buf, uint64_t len);
/* Record a chunk placeholder at off. 0 or -ENOMEM. */
int extent_write_chunk(struct extent_map *map, uint64_t off, uint64_t len, struct extent_tag tag);
/* While built: 1 and the tag of the chunk extent that starts at off, or 0 when none does. */
int extent_chunk_at(const struct extent_map *map, uint64_t off, struct extent_tag *tag);
/* Room for n more chunk extents at once (a dataset's chunks are declared together): a million
 * chunks grow the table once, to its size, not by doubling past it. 0 or -ENOMEM. */
int extent_reserve_chunks(struct extent_map *map, size_t n);
/* Bytes at [off, off+len) as currently known (runs; zeros for chunks and holes). */
void extent_read(const struct extent_map *map, uint64_t off, void *buf, uint64_t len);

/* A new, empty map frozen as n segments (sorted, disjoint, within size; taken, with the bytes
 * of their runs) of a file of size bytes: an image read back from disk. 0 or -EINVAL. */
int extent_map_restore(struct extent_map *map, struct segment *segs, size_t n, uint64_t size);
/* Freeze at file size eof (items beyond it are dropped or trimmed). 0 or -ENOMEM. */
int extent_finish(struct extent_map *map, uint64_t eof);

/* After extent_finish: the file size, and the segments in order (bytes between them are
 * holes: zeros). */
uint64_t extent_size(const struct extent_map *map);
const struct segment *extent_segments(const struct extent_map *map, size_t *n);
/* After extent_finish: the most chunk extents of one dataset that begin, one after another, in
 * one page (page > 0 bytes, aligned) of the file. O(segments). */
uint64_t extent_busiest_page(const struct extent_map *map, uint64_t page);
/* Index of the first segment that ends after off (n when none does). */
size_t extent_find(const struct extent_map *map, uint64_t off);

/* Bytes of RAM the map holds (runs and tables), for the memory figures. */
uint64_t extent_memory(const struct extent_map *map);

#endif
