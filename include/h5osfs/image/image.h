/*
 * image: one version of a domain as a valid HDF5 file, synthesised from its objects.
 *
 * The HDF5 library writes the file (groups, links, attributes, committed types, datasets and
 * their chunk indexes) through an in-memory driver; chunk data is never copied in: each chunk
 * object that exists becomes an extent of the file, fetched and decoded from the store when
 * that extent is read. The result is an extent map (metadata runs in RAM, chunk extents,
 * holes) that is immutable, shared by every handle of the version (reference counted) and
 * byte-identical when rebuilt from unchanged objects. doc/image.md explains the choices.
 *
 * Building fails (-EIO, logged) only when the domain has no usable root group or the store
 * fails; a bad object, link, attribute or chunk key inside the domain is logged (one line per
 * build), shown with its data unreadable (reads fail with EIO) where HDF5 can represent it, left
 * out where it cannot, and the rest of the domain still reads. image_left_out lists what was
 * not shown as stored.
 */
#ifndef H5OSFS_IMAGE_H
#define H5OSFS_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "h5osfs/cache/cache.h"
#include "h5osfs/cache/prefetch.h"
#include "h5osfs/store/store.h"

struct image;

struct image_source {
    struct store *store;
    const char *bucket_name; /* resolves *_REF file_uri "bucket/key" to keys of this store */
    unsigned requests;       /* store requests a build makes at once (0: one) */
    const char *bucket_id;   /* names the bucket in the names of kept images */
    const char *image_dir;   /* where built images are kept (image_cache.h); NULL: nowhere */
    uint64_t image_dir_max;  /* bytes they may take */
    int no_repairs;          /* show what hsload changed as stored (image.md, "Repairs") */
    int bucket_images;       /* copies in the bucket (image_cache.h): 0 none, 1 read them,
                                 * 2 also put them (read-write mounts) */
    int paged;               /* paged aggregation (doc/image.md, "A copy is a cloud-optimised
                                 * file"): small raw data then shares pages */
};

/* Build the image of the domain at domain_path whose root group is root_id. */
int image_build(const struct image_source *src, const char *domain_path, const char *root_id,
                struct image **out);

void image_get(struct image *img);
void image_put(struct image *img);

uint64_t image_size(const struct image *img);

/* What an image's size depends on besides its objects: this executable (its digest, as for
 * kept images) and the options of src that change the layout. A size recorded with one stamp
 * is the size this process builds for the same root when the stamps are equal. */
#define IMAGE_STAMP_BUF 40
void image_layout_stamp(const struct image_source *src, char out[IMAGE_STAMP_BUF]);
/* A number no other build of this process had: the identity of this version of the file. */
uint64_t image_serial(const struct image *img);
/* True when some page of the file (the kernel's page) holds more than a few chunk extents of
 * one dataset (chunks of less than 512 bytes in 4 KiB pages) and the store is a server (not
 * local files): the kernel reads whole pages, so a reader of one value would make the daemon
 * GET every chunk of its page (256 GETs for chunks of 16 bytes). Such a file is read past the
 * page cache, each READ exactly the bytes the reader asked for. One such dataset decides for
 * the whole file. */
int image_reads_exact(struct image *img);
/* True when both images have the same bytes (same layout, metadata and chunk sources), and
 * were made after listings that saw the same chunk objects (key, size, etag): a chunk that
 * HSDS rewrote in place makes another version. */
int image_equal(const struct image *a, const struct image *b);
/* True once a chunk object changed in the store after img served it (HSDS rewrote it in place,
 * or wrote or deleted it): img's reads of that chunk fail with EIO, img is no longer equal to
 * any build, and image tables build the domain again at its next open. */
int image_changed_in_store(const struct image *img);

/* Before a commit of a change made on img (r+): each chunk object behind an extent the writer
 * wrote (written(ctx, off, len) != 0) is asked for (one HEAD each, `requests` at a time) and
 * compared with what the listing img was made after saw; an image too large to list compares
 * the object's mtime with the time its build began instead (a deletion is not told there). 0:
 * none changed, or img has neither (nothing to compare with); -ESTALE, logged with the key,
 * when one was rewritten, made or deleted since (another writer, HSDS itself, changed the
 * chunk the writer's copy is based on); else the store's -errno. */
int image_check_chunks(const struct image *img,
                       int (*written)(void *ctx, uint64_t off, uint64_t len), void *ctx,
                       unsigned requests);

/* What one open file's reads share: the caches, and how its reads move. A reader that moves
 * sequentially through a third chunk gets the next chunks in file order loaded ahead (a window
 * that doubles up to IMAGE_PREFETCH_MAX chunks or IMAGE_PREFETCH_BYTES while reads stay
 * sequential); reading within one chunk does not widen it, nor does the kernel's read-ahead
 * running one read past a chunk's end. A reader whose jumps step along one dimension of a
 * dataset's chunk grid (a column of a table: chunk (i, j), then (i + 1, j)) gets the rest of
 * that line of chunks loaded ahead, and so does a new line it starts at grid position 0 of
 * the same dimension. A jump that lands on a chunk nobody has loaded (a miss) also loads what
 * follows it, as a guess (a spread): the stored chunks after it in file order, or the lines
 * after its line when the reader steps along lines, up to 1/IMAGE_SPREAD_MISS of the cache
 * and to as many chunks as the reader has shown it jumps: none at its first two jumps, then
 * 1, 2, 4, ... (a reader of two values costs two chunks, not 32 MiB of guesses);
 * a reader's guesses not yet used may hold at most 1/IMAGE_SPREAD_UNUSED of it, so a reader
 * whose guesses go unused stops guessing. A chunk whose every byte the reader read in one
 * sequential run that began before the chunk leaves the cache (the kernel keeps its pages),
 * however the kernel's parallel READs of it were ordered. Several threads may read at once. */
#define IMAGE_PREFETCH_MAX 64
#define IMAGE_PREFETCH_BYTES (64u << 20)
#define IMAGE_SPREAD_MISS 32      /* the default 1 GiB cache: 32 MiB guessed at a miss */
#define IMAGE_SPREAD_UNUSED 8     /* and 128 MiB of guesses not yet used */
#define IMAGE_SPREAD_SCAN 4096    /* segments or lines looked at for one spread */
#define IMAGE_SPREAD_DOUBLINGS 20 /* chunks a miss may guess: 1 << (jumps - 3), at most this */
#define IMAGE_THROUGH_SLOTS 8 /* chunks counted at once: the kernel's READs in flight span few */
/* A chunk being read through: how many of its bytes the reader has read. */
struct image_through {
    _Atomic uint64_t seg;   /* 1 + its segment index; 0: free */
    _Atomic uint64_t bytes; /* read so far */
};
struct image_reader {
    struct chunk_cache *cache;
    struct prefetcher *prefetch;     /* NULL: no read-ahead */
    _Atomic uint64_t expect;         /* where a sequential read continues */
    _Atomic unsigned window;         /* chunks to load ahead */
    _Atomic uint64_t ahead;          /* segments before this index are already queued */
    _Atomic uint64_t last_chunk;     /* 1 + the segment index of the last chunk read */
    _Atomic uint64_t run_chunk;      /* 1 + that of the chunk the last jump landed in */
    _Atomic unsigned run_chunks;     /* chunks entered since then, in file order */
    _Atomic uint64_t stride;         /* 1 + dataset << 8 | dimension of the last step along
                                         * one grid dimension; 0: none seen */
    _Atomic uint64_t spread_guessed; /* bytes of chunks queued as guesses */
    _Atomic uint64_t spread_taken;   /* bytes of guesses this reader went on to read */
    _Atomic unsigned jumps;          /* reads that jumped into another chunk */
    _Atomic uint64_t run_from;       /* where the reader's sequential run began */
    struct image_through through[IMAGE_THROUGH_SLOTS];
    _Atomic unsigned through_next; /* the slot a new chunk takes */
    /* The base of a writer's staged file: a chunk whose bytes in the cache are not the version
     * the image served before (its object changed in the store) is read as it is, not refused. A reader
     * must never see pages of two versions; a writer's commit checks every chunk it wrote
     * against the version it started from (ESTALE) and keeps the others by key, so its base
     * may take the new bytes, as it did before chunks were pinned (chunk_pins.h). */
    int writer_base;
    /* The file is read past the kernel's page cache (image_reads_exact): a chunk read through
     * stays in the cache, which then holds its only copy. */
    int exact;
};

/* Copy up to len bytes at off into buf, fetching chunks through the reader's cache. Returns
 * the number of bytes (short only at the end of the file) or -EIO (a chunk that cannot be
 * read; logged). */
ssize_t image_read(struct image *img, struct image_reader *r, uint64_t off, void *buf, size_t len);

/* The bytes of one chunk, in the cache, without a copy. */
struct image_view {
    const void *data;
    size_t len;
    struct chunk_cache *cache; /* the cache that holds it: it outlives the reader, which may */
    struct chunk_entry *entry; /* be gone by the time this is released (image_view_release) */
};
/* Point v at the len bytes at off (fewer at the end of the file) when they all lie in one
 * chunk, as most reads of a chunk's pages do: 1 (release v with image_view_release), 0 when
 * they do not (nothing was done: image_read them), or -EIO. Read-ahead counts it as a read. */
int image_read_view(struct image *img, struct image_reader *r, uint64_t off, size_t len,
                    struct image_view *v);
void image_view_release(struct image_view *v);

/* A read as the pieces of memory that hold its bytes, in order, without a copy: chunks in the
 * cache (held), the files of chunks a local bucket holds (to splice from; checked unchanged
 * since the cache opened them, else -EIO), the image's own bytes, zeros for a gap. A READ of 1 MiB spans two or more
 * chunks, and a copy of it all into one buffer cost as much CPU as the kernel's copy of the
 * reply. */
#define IMAGE_PIECES_MAX 32
struct image_pieces {
    struct iovec iov[IMAGE_PIECES_MAX]; /* a piece in a file: iov_base NULL, iov_len bytes */
    int fd[IMAGE_PIECES_MAX];           /* -1, or that file (a held chunk's: open until the */
    uint64_t fd_off[IMAGE_PIECES_MAX];  /* release), its bytes from fd_off on */
    size_t n_iov, n_files;
    struct chunk_entry *held[IMAGE_PIECES_MAX];
    size_t n_held;
    struct chunk_cache *cache; /* as image_view's: it outlives the reader */
};
/* The len bytes at off (fewer at the end of the file) as pieces: 1 (release p with
 * image_pieces_release), 0 when they need more than IMAGE_PIECES_MAX pieces (nothing was
 * done: image_read them), or -EIO (nothing is held). Read-ahead counts it as a read. */
int image_read_pieces(struct image *img, struct image_reader *r, uint64_t off, size_t len,
                      struct image_pieces *p);
void image_pieces_release(struct image_pieces *p);

/*
 * What a copy of the file started from (an r+ change, staged and committed as a new version):
 * the HSDS object each HDF5 object of the file shows, by its object header's address (HDF5
 * keeps that address while a file is changed in place), and the chunk extents, whose bytes the
 * store holds.
 */
/* The HSDS id of the object whose header is at addr, or NULL. */
const char *image_object_id(const struct image *img, uint64_t addr);
/* Call fn for every chunk extent, in file order, until it returns non-zero (that value). */
int image_for_each_chunk(const struct image *img, int (*fn)(void *ctx, uint64_t off, uint64_t len),
                         void *ctx);
/* 1 when the chunk extent at off is chunk idx (rank coordinates) of dataset dataset_id and
 * its bytes are the chunk object whose key is written to key; 0 otherwise (another chunk, a
 * *_REF chunk, no chunk extent there). */
int image_chunk_source(const struct image *img, uint64_t off, const char *dataset_id,
                       const uint64_t *idx, int rank, char *key, size_t key_len);
/* 1 when the chunk extent at off is chunk idx of dataset dataset_id and its bytes are one
 * whole object of the domain's version pool (a versions_current=ref domain's head version:
 * that version's chunk table names it at idx); 0 otherwise. */
int image_chunk_pooled(const struct image *img, uint64_t off, const char *dataset_id,
                       const uint64_t *idx, int rank);
/* 1 when the file at fd has img's size and img's bytes everywhere but in its chunk extents:
 * whatever was written changed chunk bytes in place only, so every chunk (its index included)
 * is where img put it. 0 when anything else differs, -errno. */
int image_only_chunks_differ(const struct image *img, int fd);
/* Call fn for every chunk extent of dataset dataset_id, in file order, until it returns
 * non-zero (that value). */
int image_for_each_chunk_of(const struct image *img, const char *dataset_id,
                            int (*fn)(void *ctx, uint64_t off, uint64_t len, const uint64_t *idx,
                                      int rank),
                            void *ctx);

/* What the image does not show as stored; each was logged once when the image was built. A
 * commit of a change made through the file must carry these over unchanged. */
enum image_omission_kind {
    IMAGE_OMIT_OBJECT = 0,  /* an object not in the file (the links to it are listed too) */
    IMAGE_OMIT_PLACEHOLDER, /* a dataset shown as a placeholder: its type (opaque of the
                                 * stored element size when its own cannot be made), its shape
                                 * (scalar when it cannot be read) and fixed maximum dims, no
                                 * chunking, no attributes it could not make; every read of its
                                 * data fails with EIO */
    IMAGE_OMIT_CHUNK,       /* a chunk of a dataset shown as stored whose values could not be
                                 * read or converted when the file was built (name: its index,
                                 * "3_0"): reads of its region fail with EIO */
    IMAGE_OMIT_ATTRIBUTE,   /* attribute `name` of object id */
    IMAGE_OMIT_LINK,        /* link `name` of group id */
};

struct image_omission {
    enum image_omission_kind kind;
    const char *id;   /* the object; for a link, the group that holds it */
    const char *name; /* attribute, link or chunk index; NULL for an object */
    const char *path; /* where in the file: the object's (or group's) first path */
    const char *why;
};

/* What img left out or replaced, in build order; valid while img is held. */
const struct image_omission *image_left_out(const struct image *img, size_t *n);

/* Figures for the benchmark and the debug log. */
struct image_stats {
    uint64_t size;   /* file size */
    uint64_t memory; /* bytes of RAM the image holds */
    uint64_t datasets;
    uint64_t chunks; /* chunk extents */
    uint64_t runs;   /* runs of bytes kept in RAM (metadata, values) */
    double build_seconds;
};
void image_stats(const struct image *img, struct image_stats *out);

#endif
