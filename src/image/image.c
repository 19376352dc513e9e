/* image: a built image's life, identity and comparison (see include/h5osfs/image.h); reading is
 * in image_read.c, building in build*.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "image_int.h"

static pthread_mutex_t image_lock = PTHREAD_MUTEX_INITIALIZER; /* guards every refs count */

void image_dataset_clear(struct image_dataset *ds)
{
    free(ds->id);
    free(ds->path);
    free(ds->fill);
    for (size_t i = 0; i < ds->n_uris; i++)
        free(ds->uris[i]);
    free(ds->uris);
    free(ds->pieces);
    memset(ds, 0, sizeof *ds);
}

void image_get(struct image *img)
{
    pthread_mutex_lock(&image_lock);
    img->refs++;
    pthread_mutex_unlock(&image_lock);
}

int image_refs(struct image *img)
{
    pthread_mutex_lock(&image_lock);
    int refs = img->refs;
    pthread_mutex_unlock(&image_lock);
    return refs;
}

static void free_omissions(struct image *img)
{
    for (size_t i = 0; i < img->n_omissions; i++) {
        struct image_omission *o = &img->omissions[i];
        free((char *)o->id);
        free((char *)o->name);
        free((char *)o->path);
        free((char *)o->why);
    }
    free(img->omissions);
}

const struct image_omission *image_left_out(const struct image *img, size_t *n)
{
    *n = img->n_omissions;
    return img->omissions;
}

void image_put(struct image *img)
{
    if (!img)
        return;
    pthread_mutex_lock(&image_lock);
    int last = --img->refs == 0;
    pthread_mutex_unlock(&image_lock);
    if (!last)
        return;
    for (size_t i = 0; i < img->n_datasets; i++)
        image_dataset_clear(&img->datasets[i]);
    free(img->datasets);
    for (size_t i = 0; i < img->n_objects; i++)
        free(img->objects[i].id);
    free(img->objects);
    free_omissions(img);
    extent_map_free(img->map);
    free(img->domain_path);
    free(img);
}

uint64_t image_size(const struct image *img)
{
    return extent_size(img->map);
}

uint64_t image_serial(const struct image *img)
{
    return img->serial;
}

const char *image_object_id(const struct image *img, uint64_t addr)
{
    size_t lo = 0, hi = img->n_objects;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->objects[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < img->n_objects && img->objects[lo].addr == addr ? img->objects[lo].id : NULL;
}

int image_for_each_chunk(const struct image *img, int (*fn)(void *ctx, uint64_t off, uint64_t len),
                         void *ctx)
{
    size_t n;
    const struct segment *seg = extent_segments(img->map, &n);
    for (size_t i = 0; i < n; i++) {
        int rc = seg[i].kind == SEGMENT_CHUNK ? fn(ctx, seg[i].off, seg[i].len) : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

int image_chunk_source(const struct image *img, uint64_t off, const char *dataset_id,
                       const uint64_t *idx, int rank, char *key, size_t key_len)
{
    uint64_t at[IMAGE_MAX_RANK];
    if (off >= extent_size(img->map))
        return 0;
    size_t n;
    const struct segment *seg = &extent_segments(img->map, &n)[extent_find(img->map, off)];
    if (seg->kind != SEGMENT_CHUNK || seg->off != off || seg->dset >= img->n_datasets)
        return 0;
    const struct image_dataset *ds = &img->datasets[seg->dset];
    if (ds->origin != ORIGIN_HSDS || ds->rank != rank || strcmp(ds->id, dataset_id) != 0)
        return 0;
    image_chunk_index(ds, seg->u.chunk, at);
    if (memcmp(at, idx, (size_t)rank * sizeof *at) != 0)
        return 0;
    return image_chunk_key(ds, seg->u.chunk, key, key_len) == 0;
}

/* ---- chunk keys ---- */

void image_chunk_index(const struct image_dataset *ds, uint64_t linear, uint64_t *idx)
{
    for (int k = ds->rank - 1; k >= 0; k--) {
        idx[k] = linear % ds->grid[k];
        linear /= ds->grid[k];
    }
}

int image_chunk_key(const struct image_dataset *ds, uint64_t linear, char *key, size_t len)
{
    uint64_t idx[IMAGE_MAX_RANK];
    image_chunk_index(ds, linear, idx);
    return schema_chunk_key(ds->id, idx, ds->rank,
                            schema_chunk_partition(idx, ds->rank, ds->partition_count), key, len);
}

/* ---- comparing versions ---- */

static int same_dataset(const struct image_dataset *a, const struct image_dataset *b)
{
    if (strcmp(a->id, b->id) != 0 || strcmp(a->key_prefix, b->key_prefix) != 0 ||
        a->origin != b->origin || a->rank != b->rank || a->itemsize != b->itemsize ||
        a->chunk_bytes != b->chunk_bytes || a->partition_count != b->partition_count ||
        memcmp(&a->codec, &b->codec, sizeof a->codec) != 0 || a->n_uris != b->n_uris ||
        a->n_sub != b->n_sub || a->contig_off != b->contig_off ||
        memcmp(a->chunk_dims, b->chunk_dims, sizeof a->chunk_dims) != 0 ||
        memcmp(a->grid, b->grid, sizeof a->grid) != 0)
        return 0;
    if ((a->fill == NULL) != (b->fill == NULL) ||
        (a->fill && memcmp(a->fill, b->fill, a->itemsize) != 0))
        return 0;
    for (size_t i = 0; i < a->n_uris; i++)
        if (strcmp(a->uris[i], b->uris[i]) != 0)
            return 0;
    if (a->n_pieces != b->n_pieces)
        return 0;
    for (size_t i = 0; i < a->n_pieces; i++) {
        const struct ref_piece *x = &a->pieces[i], *y = &b->pieces[i];
        if (x->chunk != y->chunk || x->off != y->off || x->size != y->size || x->uri != y->uri ||
            x->sub != y->sub)
            return 0;
    }
    return 1;
}

static int same_text(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Equal bytes can hide different omissions (an attribute left out, then deleted): a commit
 * relies on the list, so it is part of the version. */
static int same_omissions(const struct image *a, const struct image *b)
{
    if (a->n_omissions != b->n_omissions)
        return 0;
    for (size_t i = 0; i < a->n_omissions; i++) {
        const struct image_omission *x = &a->omissions[i], *y = &b->omissions[i];
        if (x->kind != y->kind || !same_text(x->id, y->id) || !same_text(x->name, y->name) ||
            !same_text(x->path, y->path) || !same_text(x->why, y->why))
            return 0;
    }
    return 1;
}

int image_equal(const struct image *a, const struct image *b)
{
    size_t na, nb;
    const struct segment *sa = extent_segments(a->map, &na), *sb = extent_segments(b->map, &nb);
    if (extent_size(a->map) != extent_size(b->map) || na != nb || a->n_datasets != b->n_datasets ||
        !same_omissions(a, b))
        return 0;
    for (size_t i = 0; i < na; i++) {
        if (sa[i].off != sb[i].off || sa[i].len != sb[i].len || sa[i].kind != sb[i].kind)
            return 0;
        if (sa[i].kind == SEGMENT_BYTES && memcmp(sa[i].u.bytes, sb[i].u.bytes, sa[i].len) != 0)
            return 0;
        if (sa[i].kind == SEGMENT_CHUNK &&
            (sa[i].dset != sb[i].dset || sa[i].u.chunk != sb[i].u.chunk))
            return 0;
    }
    for (size_t i = 0; i < a->n_datasets; i++)
        if (!same_dataset(&a->datasets[i], &b->datasets[i]))
            return 0;
    return 1;
}

void image_stats(const struct image *img, struct image_stats *out)
{
    size_t n;
    const struct segment *s = extent_segments(img->map, &n);
    memset(out, 0, sizeof *out);
    out->size = extent_size(img->map);
    out->memory = extent_memory(img->map) + img->n_datasets * sizeof *img->datasets;
    out->datasets = img->n_datasets;
    for (size_t i = 0; i < n; i++) {
        out->chunks += s[i].kind == SEGMENT_CHUNK;
        out->runs += s[i].kind == SEGMENT_BYTES;
    }
    for (size_t i = 0; i < img->n_datasets; i++)
        out->memory += img->datasets[i].n_pieces * sizeof(struct ref_piece);
    out->build_seconds = img->build_seconds;
}
