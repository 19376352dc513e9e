/*
 * zarr: every domain as a read-only Zarr v2 group (issue 28 §1; doc/image.md, "The Zarr view").
 *
 * A domain's tree, seen from its root group through hard links, becomes a Zarr v2 hierarchy:
 *
 *   ""                   the root group: ".zgroup", ".zattrs", one entry per child
 *   "g/"                 a group: the same
 *   "g/x/"               a dataset: ".zarray", ".zattrs", one file per stored chunk
 *   "g/x/i.j.k"          chunk (i, j, k): the object ".../i_j_k" (or "p<N>/i_j_k")
 *
 * .zarray: shape, chunks (the layout's chunk dims), dtype from the HSDS type (byte order kept),
 * fill_value, order "C", dimension_separator ".", and the compressor the stored chunks are in:
 * null for raw chunks (served as stored), "blosc" for compressed ones (Blosc frames served as
 * stored; a chunk that is not a Blosc frame, as old HSDS wrote gzip, is re-encoded into one).
 * Chunks no Zarr codec reads as stored (bitshuffle, byte shuffle without compressor) are served
 * decoded with compressor null; variable-length strings decoded and framed as numcodecs'
 * "vlen-utf8". .zattrs: the attributes JSON can hold; dimension scales become
 * "_ARRAY_DIMENSIONS" (xarray's convention), and the scale machinery (DIMENSION_LIST,
 * REFERENCE_LIST, CLASS, NAME, netCDF's hidden attributes) is left out.
 *
 * Datasets linked to HDF5 files of the bucket (*_REF layouts, spec §8) have the file's chunks
 * (a contiguous one: one chunk, the whole array); their chunk files are byte ranges of the
 * file (file_uri resolved by schema_linked_uri_key, as the image does), passed through where
 * HDF5's filters map exactly (none: null; deflate: "zlib", shuffle: filter "shuffle"), else
 * decoded; a chunk table is read once per tree, as a listing of chunk objects is.
 *
 * Left out (logged once per build, with the object and the reason): linked datasets whose
 * file_uri is outside the bucket or names a domain's object, H5S_NULL datasets, types Zarr v2
 * has no dtype for (references, vlen sequences, top-level arrays), filters HSDS cannot decode,
 * and link names Zarr reserves (".zarray", ".zgroup", ".zattrs"). Soft and external links are
 * not followed.
 *
 * A domain's tree is read once (ttl seconds, keyed by its root id); a dataset's chunk listing
 * once, when its directory or a chunk of it is first asked for. Chunk bodies are read only when
 * a chunk file is read. Thread-safe. Errors: -ENOENT (no such entry), -EIO (store failure or a
 * malformed object: logged with the key and the reason), -ENOMEM.
 */
#ifndef H5OSFS_ZARR_H
#define H5OSFS_ZARR_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/store/store.h"

#define ZARR_VIEW_DIR ".zarr" /* MOUNT/.zarr/<domain path>/ */

struct zarr_view;

/* bucket_name: what a linked layout's file_uri "bucket/key" must name (NULL: no linked
 * dataset is shown). */
int zarr_view_new(struct store *store, const char *bucket_name, double ttl, struct zarr_view **out);
void zarr_view_free(struct zarr_view *v);

enum zarr_kind { ZARR_DIR = 1, ZARR_FILE };

struct zarr_entry {
    char *name;
    enum zarr_kind kind;
};

/* inner: the path below the domain's group, "" for the group itself, "a/x/.zarray" (no leading
 * or trailing '/'). domain: the domain's path, for log lines. *size: a file's size as stat
 * shows it: a metadata file's exact size; a chunk's as the store lists it (its body is not
 * read), the decoded size for chunks served decoded; a vlen chunk's may differ from what a read
 * gives (readers read to the end). */
int zarr_stat(struct zarr_view *v, const char *domain, const char *root_id, const char *inner,
              enum zarr_kind *kind, uint64_t *size);

/* The entries of directory inner, sorted by name; free with zarr_entries_free. */
int zarr_list(struct zarr_view *v, const char *domain, const char *root_id, const char *inner,
              struct zarr_entry **out, size_t *n);
void zarr_entries_free(struct zarr_entry *e, size_t n);

/* The whole content of file inner (malloc'd). A chunk that cannot be served exactly (its bytes
 * do not decode to the chunk, a frame of the wrong size) is -EIO, logged: never wrong bytes. */
int zarr_read(struct zarr_view *v, const char *domain, const char *root_id, const char *inner,
              unsigned char **data, size_t *len);

/*
 * The domain's view as a kerchunk reference set, version 1 (issue 28 §2), JSON (malloc'd):
 * {"version": 1, "refs": {".zgroup": "<text>", "x/.zarray": "<text>", "x/0.0": [URL], ...}},
 * every metadata file inline, every stored chunk of an array whose chunk files are its objects
 * (no filter, or Blosc frames) as [url_base + key], a linked chunk passed through as
 * [url_base + file key, offset, size]. Arrays whose chunks are served decoded
 * (bitshuffle, shuffle alone, vlen strings) have no object to point at and are left out; an
 * array whose unstored chunks are files of fill values (a netCDF variable without _FillValue)
 * keeps its fill_value here, since no reference can point at such a file. Every dataset's
 * chunks are listed. 0, -EIO, -ENOMEM.
 */
#define ZARR_REFS_DIR ".kerchunk" /* MOUNT/.kerchunk/<domain path>.json */
int zarr_refs(struct zarr_view *v, const char *domain, const char *root_id, const char *url_base,
              char **out, size_t *len);

/* Forget the tree of the domain with this root (after a local change). */
void zarr_forget(struct zarr_view *v, const char *root_id);

#endif
