/*
 * image_check: whether a decoded image may be served (image_check.h).
 *
 * The rules are those of a build (build_data.c describe_dataset, refs.c, poison_extent): what a
 * build cannot make is refused, so every later use (image_read.c, refs.c, image.c) can rely on
 * them: a chunk's buffer is chunk_bytes = itemsize * prod(chunk_dims), every piece and extent
 * lies inside its dataset's grid, every divisor is non-zero, every key is a key.
 */
#include "image_check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/why.h"

/* a * b into *out: 0, or -1 when it does not fit 64 bits */
static int mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b != 0 && a > UINT64_MAX / b)
        return -1;
    *out = a * b;
    return 0;
}

static int check_codec(const struct image_dataset *d, char *why, size_t why_len)
{
    const struct codec_spec *c = &d->codec;
    if (memchr(c->compressor, '\0', sizeof c->compressor) == NULL)
        return why_reject(why, why_len, "codec name is not a string");
    if ((unsigned)c->shuffle > CODEC_SHUFFLE_BIT || (unsigned)c->source > CODEC_SOURCE_HDF5)
        return why_reject(why, why_len, "unknown shuffle or source %u/%u", (unsigned)c->shuffle,
                          (unsigned)c->source);
    if (c->itemsize != d->itemsize)
        return why_reject(why, why_len, "codec itemsize %zu, element size %zu", c->itemsize,
                          d->itemsize);
    return 0;
}

/* Shape, chunk shape, grid and chunk size as a build makes them. *chunks: chunks in the grid. */
static int check_geometry(const struct image_dataset *d, uint64_t *chunks, char *why,
                          size_t why_len)
{
    uint64_t bytes = d->itemsize, total = 1, elements = d->itemsize;
    if (d->rank < 1 || d->rank > IMAGE_MAX_RANK)
        return why_reject(why, why_len, "rank %d", d->rank);
    if (d->itemsize == 0)
        return why_reject(why, why_len, "element size 0");
    for (int k = 0; k < d->rank; k++) {
        uint64_t c = d->chunk_dims[k];
        if (c == 0)
            return why_reject(why, why_len, "chunk dimension %d is 0", k);
        if (d->grid[k] != d->dims[k] / c + (d->dims[k] % c != 0))
            return why_reject(why, why_len, "grid %" PRIu64 " for %" PRIu64 " / %" PRIu64,
                              d->grid[k], d->dims[k], c);
        if (mul_u64(bytes, c, &bytes) != 0 || mul_u64(total, d->grid[k], &total) != 0 ||
            mul_u64(elements, d->dims[k] ? d->dims[k] : 1, &elements) != 0)
            return why_reject(why, why_len, "its sizes overflow");
    }
    if (bytes != d->chunk_bytes || bytes > IMAGE_CHUNK_MAX)
        return why_reject(why, why_len, "chunk of %" PRIu64 " bytes, %zu-byte elements",
                          d->chunk_bytes, d->itemsize);
    *chunks = total;
    return 0;
}

static int check_prefix(const struct image_dataset *d, char *why, size_t why_len)
{
    char prefix[STORE_KEY_MAX + 1];
    if (build_chunk_key_prefix(d->id, d->rank, prefix, sizeof prefix) != 0 ||
        strcmp(prefix, d->key_prefix) != 0)
        return why_reject(why, why_len, "chunk keys \"%s\" are not those of its id", d->key_prefix);
    return 0;
}

static int check_uris(const struct image_dataset *d, char *why, size_t why_len)
{
    for (size_t i = 0; i < d->n_uris; i++)
        if (!d->uris[i] || store_key_check(d->uris[i]) != 0)
            return why_reject(why, why_len, "linked file %zu is not a key", i);
    if (!d->kept_file)
        return 0;
    if (!d->kept_etag || !d->kept_etag[0] || strlen(d->kept_etag) >= SCHEMA_POOL_ETAG_BUF)
        return why_reject(why, why_len, "the kept pool file has no usable etag");
    for (size_t i = 0; i < d->n_uris; i++)
        if (strcmp(d->uris[i], d->kept_file) == 0)
            return 0;
    return why_reject(why, why_len, "the kept pool file is none of its linked files");
}

/* The sub-chunks of H5D_CHUNKED_REF_INDIRECT with hyper_dims (refs.c sub_geometry). */
static int check_sub(const struct image_dataset *d, char *why, size_t why_len)
{
    uint64_t n = 1;
    if (d->n_sub == 0)
        return why_reject(why, why_len, "0 pieces per chunk");
    if (d->n_sub == 1)
        return 0; /* sub_dims unused: a piece is the chunk */
    for (int k = 0; k < d->rank; k++) {
        uint64_t s = d->sub_dims[k];
        if (s == 0 || d->chunk_dims[k] % s != 0 || mul_u64(n, d->chunk_dims[k] / s, &n) != 0)
            return why_reject(why, why_len,
                              "sub-chunk dimension %d (%" PRIu64 ") does not divide the chunk", k,
                              s);
    }
    if (n != d->n_sub)
        return why_reject(why, why_len, "%" PRIu32 " pieces per chunk, %" PRIu64 " by its shape",
                          d->n_sub, n);
    return 0;
}

static int check_pieces(const struct image_dataset *d, uint64_t chunks, char *why, size_t why_len)
{
    int rc = check_sub(d, why, why_len);
    for (size_t i = 0; rc == 0 && i < d->n_pieces; i++) {
        const struct ref_piece *p = &d->pieces[i], *prev = i ? &d->pieces[i - 1] : NULL;
        if (p->chunk >= chunks || p->sub >= d->n_sub || p->uri >= d->n_uris ||
            p->off > UINT64_MAX - p->size)
            rc = why_reject(why, why_len, "linked piece %zu is outside its dataset", i);
        else if (prev &&
                 (p->chunk < prev->chunk || (p->chunk == prev->chunk && p->sub <= prev->sub)))
            rc = why_reject(why, why_len, "linked pieces are not sorted and unique");
    }
    return rc;
}

static int check_origin(const struct image_dataset *d, uint64_t chunks, char *why, size_t why_len)
{
    switch (d->origin) {
    case ORIGIN_HSDS:
        return d->n_uris || d->n_pieces ? why_reject(why, why_len, "linked files of no layout") : 0;
    case ORIGIN_REF_CONTIG:
        if (d->n_uris != 1 || d->n_pieces || d->contig_off > UINT64_MAX - d->contig_size)
            return why_reject(why, why_len, "not one linked byte range");
        return check_uris(d, why, why_len);
    case ORIGIN_REF_PIECES:
        if (d->n_uris == 0 && d->n_pieces > 0) /* none: every chunk is fill (a version's
                                                   * table over an empty dataset) */
            return why_reject(why, why_len, "linked chunks without a file");
        int rc = check_uris(d, why, why_len);
        return rc ? rc : check_pieces(d, chunks, why, why_len);
    default:
        return why_reject(why, why_len, "unknown origin %d", (int)d->origin);
    }
}

/* A placeholder's entry (build_data.c poison_extent): only its id and path are ever used. */
static int check_poison(const struct image_dataset *d, char *why, size_t why_len)
{
    if (d->rank != 0 || d->n_uris || d->n_pieces || d->key_prefix[0])
        return why_reject(why, why_len, "a placeholder with a shape or sources");
    return 0;
}

/* 0 or -EINVAL; *chunks: the number of chunks of its grid (0 for a placeholder). */
static int check_dataset(const struct image_dataset *d, uint64_t *chunks, char *why, size_t why_len)
{
    *chunks = 0;
    if (!d->id || !d->path)
        return why_reject(why, why_len, "no id or path");
    if (d->origin == ORIGIN_POISON)
        return check_poison(d, why, why_len);
    int rc = check_geometry(d, chunks, why, why_len);
    if (rc == 0)
        rc = check_codec(d, why, why_len);
    if (rc == 0)
        rc = check_prefix(d, why, why_len);
    return rc == 0 ? check_origin(d, *chunks, why, why_len) : rc;
}

/* Every chunk extent is a whole chunk inside its dataset's grid (readers size buffers by it). */
static int check_extents(const struct image *img, const uint64_t *chunks, char *why, size_t why_len)
{
    size_t n;
    const struct segment *segs = extent_segments(img->map, &n);
    for (size_t i = 0; i < n; i++) {
        const struct segment *s = &segs[i];
        if (s->kind != SEGMENT_CHUNK)
            continue;
        if (s->dset >= img->n_datasets)
            return why_reject(why, why_len, "a chunk extent of no dataset");
        const struct image_dataset *d = &img->datasets[s->dset];
        if (d->origin != ORIGIN_POISON &&
            (s->u.chunk >= chunks[s->dset] || s->len != d->chunk_bytes))
            return why_reject(why, why_len,
                              "chunk extent %" PRIu64 "+%" PRIu64 " of %s is not "
                              "one of its chunks",
                              s->off, s->len, d->path);
    }
    return 0;
}

static int check_objects(const struct image *img, char *why, size_t why_len)
{
    uint64_t size = extent_size(img->map);
    for (size_t i = 0; i < img->n_objects; i++)
        if (!img->objects[i].id || img->objects[i].addr >= size ||
            (i > 0 && img->objects[i].addr <= img->objects[i - 1].addr))
            return why_reject(why, why_len, "object %zu is not in the file", i);
    for (size_t i = 0; i < img->n_omissions; i++) {
        const struct image_omission *m = &img->omissions[i];
        if ((unsigned)m->kind > IMAGE_OMIT_LINK || !m->id || !m->path || !m->why)
            return why_reject(why, why_len, "omission %zu is not one", i);
    }
    return 0;
}

int image_check(const struct image *img, char *why, size_t why_len)
{
    uint64_t *chunks = calloc(img->n_datasets ? img->n_datasets : 1, sizeof *chunks);
    if (!chunks) {
        why_set(why, why_len, "no memory to check it");
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < img->n_datasets; i++) {
        rc = check_dataset(&img->datasets[i], &chunks[i], why, why_len);
        if (rc != 0) {
            char what[200];
            snprintf(what, sizeof what, "%s", why);
            why_set(why, why_len, "dataset %zu (%s): %s", i,
                    img->datasets[i].id ? img->datasets[i].id : "no id", what);
        }
    }
    if (rc == 0)
        rc = check_extents(img, chunks, why, why_len);
    if (rc == 0)
        rc = check_objects(img, why, why_len);
    free(chunks);
    return rc;
}

/* ---- ids ---- */

static int by_text(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

static int is_listed(const char *id, const char *const *keys, size_t n)
{
    char key[STORE_KEY_MAX + 1];
    return schema_obj_key(id, key, sizeof key) == 0 && n > 0 &&
           bsearch(key, keys, n, sizeof *keys, by_text) != NULL;
}

static int of_root(const char *id, const char *root_prefix)
{
    char key[STORE_KEY_MAX + 1];
    return schema_obj_key(id, key, sizeof key) == 0 &&
           strncmp(key, root_prefix, strlen(root_prefix)) == 0;
}

int image_check_ids(const struct image *img, const char *root_prefix,
                    const char *const *object_keys, size_t n_keys, char *why, size_t why_len)
{
    for (size_t i = 0; i < img->n_datasets; i++)
        if (!is_listed(img->datasets[i].id, object_keys, n_keys))
            return why_reject(why, why_len, "dataset %s is not an object of %s",
                              img->datasets[i].id, root_prefix);
    for (size_t i = 0; i < img->n_objects; i++)
        if (!is_listed(img->objects[i].id, object_keys, n_keys))
            return why_reject(why, why_len, "object %s is not an object of %s", img->objects[i].id,
                              root_prefix);
    /* what the build left out may be missing from the listing (a link to nothing) */
    for (size_t i = 0; i < img->n_omissions; i++)
        if (!of_root(img->omissions[i].id, root_prefix))
            return why_reject(why, why_len, "omission of %s, not of %s", img->omissions[i].id,
                              root_prefix);
    return 0;
}

int image_check_no_links(const struct image *img, char *why, size_t why_len)
{
    for (size_t i = 0; i < img->n_datasets; i++) {
        enum chunk_origin o = img->datasets[i].origin;
        if (o == ORIGIN_REF_CONTIG || o == ORIGIN_REF_PIECES)
            return why_reject(why, why_len,
                              "dataset %s reads linked files, which only its JSON "
                              "may name",
                              img->datasets[i].path);
    }
    return 0;
}
