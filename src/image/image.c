/* image: a built image's life, identity and comparison (see include/h5osfs/image/image.h); reading
 * is in image_read.c, building in build*.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
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
    free(ds->kept_file);
    free(ds->kept_etag);
    memset(ds, 0, sizeof *ds);
}

struct image *image_alloc(const struct image_source *src, const char *domain_path)
{
    static _Atomic uint64_t next_serial;
    struct image *img = calloc(1, sizeof *img);
    if (!img)
        return NULL;
    img->refs = 1;
    img->serial = ++next_serial;
    img->store = src->store;
    img->domain_path = strdup(domain_path);
    img->map = extent_map_new();
    img->pins = chunk_pins_new();
    if (!img->domain_path || !img->map || !img->pins) {
        image_put(img);
        return NULL;
    }
    return img;
}

void image_get(struct image *img)
{
    pthread_mutex_lock(&image_lock);
    img->refs++;
    pthread_mutex_unlock(&image_lock);
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
    image_chunk_states_free(&img->chunk_states);
    extent_map_free(img->map);
    chunk_pins_free(img->pins);
    free(img->domain_path);
    free(img);
}

uint64_t image_size(const struct image *img)
{
    return extent_size(img->map);
}

uint64_t image_kernel_page(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (uint64_t)page : 4096;
}

/* Up to this many chunks of one dataset in a page (chunks of 512 bytes), a reader of one value
 * costs a handful of GETs through the page cache. Chunks of different datasets in a page (a
 * domain of many small datasets, one chunk each) do not count: their readers read whole
 * datasets, and the metadata of such a domain is what the page cache serves best. */
#define PAGE_CHUNKS_CACHED 8

/* A local bucket keeps the page cache: there a chunk costs a file read, and a read of the
 * whole file past the cache made a FUSE round trip per chunk (7x the time for 10^5 chunks of
 * 16 bytes, bench/README.md), where the page's 256 file reads for one value cost a
 * millisecond. */
int image_reads_exact(struct image *img)
{
    int known = atomic_load(&img->reads_exact);
    if (known == 0) {
        uint64_t most = extent_busiest_page(img->map, image_kernel_page());
        known = most > PAGE_CHUNKS_CACHED && !store_keeps_files(img->store) ? 2 : 1;
        atomic_store(&img->reads_exact, known);
    }
    return known == 2;
}

int image_changed_in_store(const struct image *img)
{
    return atomic_load(&img->changed_in_store);
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

/* The chunk segment that begins at off when it is chunk idx of dataset dataset_id (rank
 * dimensions) in img, with its dataset; NULL otherwise. */
static const struct segment *chunk_at(const struct image *img, uint64_t off, const char *dataset_id,
                                      const uint64_t *idx, int rank,
                                      const struct image_dataset **ds_out)
{
    uint64_t at[IMAGE_MAX_RANK];
    if (off >= extent_size(img->map))
        return NULL;
    size_t n;
    const struct segment *seg = &extent_segments(img->map, &n)[extent_find(img->map, off)];
    if (seg->kind != SEGMENT_CHUNK || seg->off != off || seg->dset >= img->n_datasets)
        return NULL;
    const struct image_dataset *ds = &img->datasets[seg->dset];
    if (ds->rank != rank || strcmp(ds->id, dataset_id) != 0)
        return NULL;
    image_chunk_index(ds, seg->u.chunk, at);
    if (memcmp(at, idx, (size_t)rank * sizeof *at) != 0)
        return NULL;
    *ds_out = ds;
    return seg;
}

int image_chunk_source(const struct image *img, uint64_t off, const char *dataset_id,
                       const uint64_t *idx, int rank, char *key, size_t key_len)
{
    const struct image_dataset *ds;
    const struct segment *seg = chunk_at(img, off, dataset_id, idx, rank, &ds);
    if (!seg || ds->origin != ORIGIN_HSDS)
        return 0;
    return image_chunk_key(ds, seg->u.chunk, key, key_len) == 0;
}

int image_chunk_pooled(const struct image *img, uint64_t off, const char *dataset_id,
                       const uint64_t *idx, int rank)
{
    const struct image_dataset *ds;
    const struct segment *seg = chunk_at(img, off, dataset_id, idx, rank, &ds);
    if (!seg || ds->origin != ORIGIN_REF_PIECES || !ds->pooled)
        return 0;
    /* one piece, the whole pool object: the version's table entry at idx names these bytes */
    size_t lo = 0, hi = ds->n_pieces;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ds->pieces[mid].chunk < seg->u.chunk)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ds->n_pieces && ds->pieces[lo].chunk == seg->u.chunk && ds->pieces[lo].off == 0 &&
           (lo + 1 == ds->n_pieces || ds->pieces[lo + 1].chunk != seg->u.chunk);
}

/* len bytes of the file at fd from off equal want (NULL: zeros). 1, 0, or -errno. */
static int file_has(int fd, uint64_t off, uint64_t len, const unsigned char *want,
                    unsigned char *buf, size_t piece)
{
    while (len > 0) {
        size_t n = len < piece ? (size_t)len : piece;
        ssize_t got = pread(fd, buf, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if ((size_t)got != n)
            return 0;
        for (size_t i = 0; !want && i < n; i++)
            if (buf[i])
                return 0;
        if (want && memcmp(buf, want, n) != 0)
            return 0;
        if (want)
            want += n;
        off += n;
        len -= n;
    }
    return 1;
}

#define SAME_PIECE (1u << 20)

int image_only_chunks_differ(const struct image *img, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if ((uint64_t)st.st_size != extent_size(img->map))
        return 0; /* HDF5 allocated: a chunk or an index node may have moved */
    unsigned char *buf = malloc(SAME_PIECE);
    size_t n;
    const struct segment *seg = extent_segments(img->map, &n);
    uint64_t at = 0;
    int rc = buf ? 1 : -ENOMEM;
    for (size_t i = 0; rc == 1 && i <= n; i++) {
        uint64_t start = i < n ? seg[i].off : extent_size(img->map);
        if (start > at) /* a hole of the image: zeros */
            rc = file_has(fd, at, start - at, NULL, buf, SAME_PIECE);
        if (rc == 1 && i < n && seg[i].kind == SEGMENT_BYTES)
            rc = file_has(fd, seg[i].off, seg[i].len, seg[i].u.bytes, buf, SAME_PIECE);
        if (i < n)
            at = seg[i].off + seg[i].len;
    }
    free(buf);
    return rc;
}

int image_for_each_chunk_of(const struct image *img, const char *dataset_id,
                            int (*fn)(void *ctx, uint64_t off, uint64_t len, const uint64_t *idx,
                                      int rank),
                            void *ctx)
{
    uint64_t idx[IMAGE_MAX_RANK];
    size_t n;
    const struct segment *seg = extent_segments(img->map, &n);
    for (size_t i = 0; i < n; i++) {
        if (seg[i].kind != SEGMENT_CHUNK || seg[i].dset >= img->n_datasets)
            continue;
        const struct image_dataset *ds = &img->datasets[seg[i].dset];
        if (strcmp(ds->id, dataset_id) != 0)
            continue;
        image_chunk_index(ds, seg[i].u.chunk, idx);
        int rc = fn(ctx, seg[i].off, seg[i].len, idx, ds->rank);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- chunk keys ---- */

void image_fill(const struct image_dataset *ds, unsigned char *buf, uint64_t bytes)
{
    if (!ds->fill || ds->itemsize == 0) {
        memset(buf, 0, bytes);
        return;
    }
    for (uint64_t off = 0; off + ds->itemsize <= bytes; off += ds->itemsize)
        memcpy(buf + off, ds->fill, ds->itemsize);
}

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

static int same_text(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

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
    if (!same_text(a->kept_file, b->kept_file) || !same_text(a->kept_etag, b->kept_etag))
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

/* ---- chunk objects as listed ---- */

/* FNV-1a: 64 bits make a collision among one root's keys (at most a root listing's worth)
 * far less likely than a lost write anyway. */
static uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#define HASH_START 0xcbf29ce484222325ull

static uint64_t key_hash(const char *key)
{
    return hash_bytes(HASH_START, key, strlen(key));
}

static uint64_t content_hash(const struct store_stat *st)
{
    uint64_t h = hash_bytes(HASH_START, &st->size, sizeof st->size);
    return hash_bytes(h, st->etag, strnlen(st->etag, sizeof st->etag));
}

static uint64_t state_hash(const struct store_stat *st)
{
    uint64_t h = content_hash(st);
    return hash_bytes(h, &st->ctime_ns, sizeof st->ctime_ns);
}

int image_chunk_states_add(struct image_chunk_states *s, const char *key,
                           const struct store_stat *st)
{
    if (s->n == s->cap) {
        struct image_chunk_state *v = grow_array(s->v, &s->cap, s->cap + 1, sizeof *v, 256);
        if (!v)
            return -ENOMEM;
        s->v = v;
    }
    s->v[s->n++] = (struct image_chunk_state){ key_hash(key), state_hash(st), content_hash(st) };
    return 0;
}

static int by_key_hash(const void *a, const void *b)
{
    uint64_t x = ((const struct image_chunk_state *)a)->key;
    uint64_t y = ((const struct image_chunk_state *)b)->key;
    return x < y ? -1 : x > y;
}

void image_chunk_states_done(struct image_chunk_states *s)
{
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, by_key_hash);
    s->known = 1;
}

void image_chunk_states_free(struct image_chunk_states *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

void image_take_chunk_states(struct image *img, struct image_chunk_states *s)
{
    image_chunk_states_free(&img->chunk_states);
    img->chunk_states = *s;
    memset(s, 0, sizeof *s);
}

/* Two images made without a complete listing (too many objects, no image_cache) compare by
 * their layout alone; one with and one without cannot be told equal. */
static int same_chunk_states(const struct image_chunk_states *a, const struct image_chunk_states *b)
{
    if (a->known != b->known)
        return 0;
    return a->n == b->n && (a->n == 0 || memcmp(a->v, b->v, a->n * sizeof *a->v) == 0);
}

static const struct image_chunk_state *listed_state(const struct image_chunk_states *s,
                                                    const char *key)
{
    struct image_chunk_state want = { .key = key_hash(key) };
    return s->n ? bsearch(&want, s->v, s->n, sizeof *s->v, by_key_hash) : NULL;
}

struct chunk_check {
    const struct image *img;
    char (*keys)[STORE_KEY_MAX + 1];
    int *rc; /* per key: 0 unchanged, -ESTALE changed, or the head's -errno */
    size_t n, cap;
};

static void check_one(void *ctx, size_t i)
{
    struct chunk_check *c = ctx;
    struct store_stat now;
    int rc = store_head(c->img->store, c->keys[i], &now);
    if (!c->img->chunk_states.known) {
        /* no listing to compare with (too many objects to list at the open): a chunk object
         * whose mtime is after the build began was written by another writer since. S3 gives
         * whole seconds, so a rewrite within the second the build began in, a deletion, or
         * one on a store whose clock is behind ours goes untold; a store clock ahead of ours
         * turns an earlier write into ESTALE (nothing lost: the writer's file is kept) */
        int after = rc == 0 && now.mtime > c->img->built_at;
        c->rc[i] = rc == -ENOENT ? 0 : rc != 0 ? rc : after ? -ESTALE : 0;
        return;
    }
    const struct image_chunk_state *was = listed_state(&c->img->chunk_states, c->keys[i]);
    if (rc == -ENOENT)
        c->rc[i] = was ? -ESTALE : 0;
    else if (rc != 0)
        c->rc[i] = rc;
    else
        c->rc[i] = was && was->content == content_hash(&now) ? 0 : -ESTALE;
}

static int add_written_key(struct chunk_check *c, const struct image_dataset *ds, uint64_t linear)
{
    if (c->n == c->cap) {
        size_t cap = c->cap;
        void *keys = grow_array(c->keys, &cap, c->cap + 1, sizeof *c->keys, 16);
        if (!keys)
            return -ENOMEM;
        c->keys = keys;
        int *rc = realloc(c->rc, cap * sizeof *rc);
        if (!rc)
            return -ENOMEM;
        c->rc = rc;
        c->cap = cap;
    }
    int rc = image_chunk_key(ds, linear, c->keys[c->n], sizeof c->keys[c->n]);
    return rc == 0 ? (c->n++, 0) : rc;
}

/* The keys of the chunk objects behind the extents written says were written. */
static int written_keys(struct chunk_check *c,
                        int (*written)(void *ctx, uint64_t off, uint64_t len), void *ctx)
{
    size_t n;
    const struct segment *seg = extent_segments(c->img->map, &n);
    for (size_t i = 0; i < n; i++) {
        if (seg[i].kind != SEGMENT_CHUNK || seg[i].dset >= c->img->n_datasets)
            continue;
        const struct image_dataset *ds = &c->img->datasets[seg[i].dset];
        if (ds->origin != ORIGIN_HSDS || !written(ctx, seg[i].off, seg[i].len))
            continue;
        int rc = add_written_key(c, ds, seg[i].u.chunk);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* One line for the first chunk that stops the commit (the others are alike). */
static void report_check(const struct chunk_check *c)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->rc[i] == -ESTALE) {
            log_error("%s: chunk object %s was changed in the bucket by another writer since "
                      "this file was opened: the change written over it is not stored",
                      c->img->domain_path, c->keys[i]);
            break;
        }
        if (c->rc[i] != 0) {
            log_error("%s: cannot check chunk object %s before the commit: %s", c->img->domain_path,
                      c->keys[i], strerror(-c->rc[i]));
            break;
        }
    }
}

int image_check_chunks(const struct image *img,
                       int (*written)(void *ctx, uint64_t off, uint64_t len), void *ctx,
                       unsigned requests)
{
    if (!img->chunk_states.known && !img->unlisted)
        return 0;
    struct chunk_check c = { .img = img };
    int rc = written_keys(&c, written, ctx);
    if (rc != 0) {
        log_error("%s: cannot name the chunk objects written before the commit: %s",
                  img->domain_path, strerror(-rc));
    } else {
        pfor(c.n, requests ? requests : 1, check_one, &c);
        for (size_t i = 0; rc == 0 && i < c.n; i++)
            rc = c.rc[i];
        report_check(&c);
    }
    free(c.keys);
    free(c.rc);
    return rc;
}

/* ---- equal versions ---- */

int image_equal(const struct image *a, const struct image *b)
{
    /* nothing tells whether HSDS rewrote one of its chunks in place since: a new version, so
     * no page the kernel or the chunk cache holds of the old one is served again */
    if (a->unlisted || b->unlisted || image_changed_in_store(a) || image_changed_in_store(b))
        return 0;
    if (!same_chunk_states(&a->chunk_states, &b->chunk_states))
        return 0;
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
