/*
 * vfd: an HDF5 virtual file driver that writes a file into an extent map instead of a disk.
 *
 * The HDF5 library writes the synthesised file's metadata through it; raw chunk data is
 * declared with H5Dwrite_chunk from the one placeholder buffer of the target, which the driver
 * recognises by its address and records as a chunk extent tagged with vfd_target.tag (set by
 * the builder before each call), or, for a dataset that has every chunk of its grid, from the
 * fill writes of the library's own allocation of all of them (vfd_dense). Everything else is
 * kept as bytes. Reads are served from the map (the library reads metadata back while it
 * writes). At close the final end of allocation is the file size. The builder also records
 * extents itself: storage HDF5 allocated but that must read as EIO (build_data.c,
 * placeholders).
 *
 * One target per file being built; the driver itself holds no state.
 */
#ifndef H5OSFS_IMAGE_VFD_H
#define H5OSFS_IMAGE_VFD_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "extent.h"

/* A dense dataset's chunks, allocated by the library in one call: each raw write of
 * chunk_bytes while `on`, other than from the placeholder, is the fill of the next chunk of
 * the grid in order (the builder checks that order afterwards, build_declare.c). */
struct vfd_dense {
    int on;
    int broken; /* a raw write of another size, or more than n of them */
    uint32_t dset;
    uint64_t chunk_bytes, n, next;
};

struct vfd_target {
    struct extent_map *map;
    const void *placeholder; /* writes from this address are chunk placeholders */
    struct extent_tag tag;   /* what the next placeholder write is */
    struct vfd_dense dense;  /* on while a dense dataset's chunks are allocated */
    uint64_t placeholders;   /* count of placeholder writes seen */
    uint64_t eoa;            /* end of allocation at close: the file size */
    int failed;              /* -ENOMEM from the map: the build must fail */
    int closing;             /* set before H5Fclose: a failed write is only recorded */
};

/* A file access property list that uses the driver for target (H5Pclose it), or a negative
 * id. */
hid_t vfd_fapl(struct vfd_target *target);

#endif
