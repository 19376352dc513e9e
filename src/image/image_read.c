/* image_read: serving a built image's bytes (include/h5osfs/image.h): chunks loaded through the
 * cache, and the read-ahead that keeps the store busy ahead of the reader. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/bigbuf.h"
#include "h5osfs/log.h"
#include "image_int.h"

/* ---- loading one chunk ---- */

void image_fill(const struct image_dataset *ds, unsigned char *buf, uint64_t bytes)
{
    if (!ds->fill || ds->itemsize == 0) {
        memset(buf, 0, bytes);
        return;
    }
    for (uint64_t off = 0; off + ds->itemsize <= bytes; off += ds->itemsize)
        memcpy(buf + off, ds->fill, ds->itemsize);
}

static unsigned char *chunk_buffer(const struct chunk_job *job, size_t size)
{
    size_t cap;
    unsigned char *buf = bigbuf_alloc(size, &cap);
    if (!buf)
        log_error("%s: %s: cannot allocate %zu bytes for chunk %" PRIu64, job->img->domain_path,
                  job->ds->path, size, job->linear);
    return buf;
}

/* The object's bytes become the chunk when they need no decoding (an unfiltered chunk): no
 * second buffer to fault in, no copy. */
static int decode_hsds(const struct chunk_job *job, const char *key, struct store_buf *raw,
                       size_t size, void **data)
{
    char why[160] = "";
    const struct image_dataset *ds = job->ds;
    if (codec_is_copy(&ds->codec) && raw->len == size) {
        /* a body that grew as it came (no length announced) may hold more than it uses, and
         * the cache counts size bytes: give the rest back */
        *data = bigbuf_fit(raw->data, size, raw->cap);
        raw->data = NULL;
        return 0;
    }
    unsigned char *buf = chunk_buffer(job, size);
    if (!buf)
        return -ENOMEM;
    if (codec_decode(&ds->codec, raw->data, raw->len, buf, size, why, sizeof why) != 0) {
        log_error("%s: %s: chunk %s: %s", job->img->domain_path, ds->path, key, why);
        free(buf);
        return -EIO;
    }
    *data = buf;
    return 0;
}

static int load_hsds(const struct chunk_job *job, size_t size, void **data)
{
    char key[STORE_KEY_MAX + 1];
    struct store_buf raw = { 0 };
    const struct image_dataset *ds = job->ds;
    if (image_chunk_key(ds, job->linear, key, sizeof key) != 0)
        return -EIO;
    int rc = store_get(job->img->store, key, size + size / 8 + 65536, &raw);
    if (rc == -ENOENT) {
        unsigned char *buf = chunk_buffer(job, size);
        if (!buf)
            return -ENOMEM;
        image_fill(ds, buf, size); /* deleted since the build: as HSDS reads it */
        *data = buf;
        return 0;
    }
    if (rc != 0) {
        if (rc == -EFBIG || rc == -EISDIR)
            log_error("%s: %s: chunk %s: %s", job->img->domain_path, ds->path, key,
                      rc == -EFBIG ? "larger than any encoding of the chunk" : "a directory");
        return -EIO;
    }
    rc = decode_hsds(job, key, &raw, size, data);
    store_buf_free(&raw);
    return rc;
}

static int load_chunk(void *ctx, size_t size, void **data)
{
    const struct chunk_job *job = ctx;
    if (job->ds->origin == ORIGIN_HSDS)
        return load_hsds(job, size, data);
    if (job->ds->origin != ORIGIN_REF_CONTIG && job->ds->origin != ORIGIN_REF_PIECES) {
        log_error("%s: %s: chunk %" PRIu64 ": the dataset's data cannot be served (see the "
                  "build's log line)",
                  job->img->domain_path, job->ds->path, job->linear);
        return -EIO;
    }
    unsigned char *buf = chunk_buffer(job, size);
    if (!buf)
        return -ENOMEM;
    int rc = image_load_ref(job, buf, size);
    if (rc != 0)
        free(buf);
    else
        *data = buf;
    return rc;
}

/* ---- reads ---- */

static void chunk_cache_key(const struct image *img, const struct segment *s, char *key, size_t len)
{
    snprintf(key, len, "%" PRIu64 ":%" PRIu32 ":%" PRIu64, img->serial, s->dset, s->u.chunk);
}

/* The cache entry of chunk segment s, held (chunk_entry_put when done). 0 or -EIO. */
static int hold_chunk(struct image *img, struct image_reader *r, const struct segment *s,
                      struct chunk_entry **e)
{
    char key[64];
    if (s->dset >= img->n_datasets)
        return -EIO;
    struct chunk_job job = { img, &img->datasets[s->dset], s->u.chunk };
    if (job.ds->origin == ORIGIN_POISON)
        return -EIO; /* logged once by the build; nothing to fetch (it may be huge) */
    if (job.ds->chunk_bytes != s->len)
        return -EIO; /* the driver declared what the table says: cannot happen */
    chunk_cache_key(img, s, key, sizeof key);
    struct chunk_found found;
    if (chunk_cache_fetch(r->cache, key, s->len, load_chunk, &job, e, &found) != 0)
        return -EIO;
    if (found.spread_taken)
        r->spread_taken += s->len;
    return 0;
}

static int copy_chunk(struct image *img, struct image_reader *r, const struct segment *s,
                      uint64_t from, unsigned char *out, uint64_t n)
{
    struct chunk_entry *e;
    if (hold_chunk(img, r, s, &e) != 0)
        return -EIO;
    memcpy(out, (const unsigned char *)chunk_entry_data(e) + (from - s->off), n);
    chunk_entry_put(r->cache, e);
    return 0;
}

static void prefetch_done(void *ctx)
{
    struct chunk_job *job = ctx;
    image_put(job->img);
    free(job);
}

/* Queue a load of chunk `linear` of dataset `dset` (len bytes). 0 (queued), 1 (already loaded
 * or loading), or -1 when the queue is full or memory is short: stop queueing, the reader
 * fetches for itself. */
static int queue_load(struct image *img, struct image_reader *r, enum prefetch_kind kind,
                      uint32_t dset, uint64_t linear, uint64_t len)
{
    struct chunk_job *job = malloc(sizeof *job);
    if (!job)
        return -1;
    *job = (struct chunk_job){ img, &img->datasets[dset], linear };
    image_get(img);
    char key[64];
    struct segment s = { .dset = dset, .len = len, .u.chunk = linear };
    chunk_cache_key(img, &s, key, sizeof key);
    int rc = prefetcher_add(r->prefetch, kind, key, len, load_chunk, job, prefetch_done);
    return rc < 0 ? -1 : rc;
}

static int queue_chunk(struct image *img, struct image_reader *r, uint32_t dset, uint64_t linear,
                       uint64_t len)
{
    return queue_load(img, r, PREFETCH_AHEAD, dset, linear, len) < 0 ? -1 : 0;
}

static int can_prefetch(const struct image *img, uint32_t dset)
{
    return dset < img->n_datasets && img->datasets[dset].origin != ORIGIN_POISON;
}

/* Queue the chunk segments after segment `last`, up to the reader's window of chunks; the
 * ones queued by earlier reads are not queued again. */
static void read_ahead(struct image *img, struct image_reader *r, size_t last)
{
    size_t n_segs, end = last + 1;
    const struct segment *segs = extent_segments(img->map, &n_segs);
    uint64_t bytes = 0;
    for (unsigned seen = 0; end < n_segs && seen < r->window && bytes < IMAGE_PREFETCH_BYTES;
         end++) {
        seen += segs[end].kind == SEGMENT_CHUNK;
        bytes += segs[end].kind == SEGMENT_CHUNK ? segs[end].len : 0;
    }
    size_t i = last + 1 > r->ahead ? last + 1 : (size_t)r->ahead;
    for (; i < end; i++) {
        const struct segment *s = &segs[i];
        if (s->kind != SEGMENT_CHUNK || !can_prefetch(img, s->dset))
            continue;
        if (queue_chunk(img, r, s->dset, s->u.chunk, s->len) != 0)
            break;
    }
    if (i > r->ahead)
        r->ahead = i;
}

/* The grid dimension along which chunk `to` is one step from chunk `from` (both of ds), or -1.
 * The last dimension is not a step: that is the file order, which read_ahead follows. */
static int grid_step_dim(const struct image_dataset *ds, uint64_t from, uint64_t to)
{
    uint64_t a[IMAGE_MAX_RANK], b[IMAGE_MAX_RANK];
    int dim = -1;
    if (ds->rank < 2 || to <= from)
        return -1;
    image_chunk_index(ds, from, a);
    image_chunk_index(ds, to, b);
    for (int k = 0; k < ds->rank; k++) {
        if (a[k] == b[k])
            continue;
        if (dim >= 0 || b[k] != a[k] + 1)
            return -1;
        dim = k;
    }
    return dim < ds->rank - 1 ? dim : -1;
}

/* Queue the chunks after chunk `linear` along grid dimension dim, to the grid's edge, at most
 * IMAGE_PREFETCH_MAX chunks or IMAGE_PREFETCH_BYTES. */
static void line_ahead(struct image *img, struct image_reader *r, uint32_t dset, uint64_t linear,
                       int dim)
{
    const struct image_dataset *ds = &img->datasets[dset];
    uint64_t idx[IMAGE_MAX_RANK], step = 1;
    image_chunk_index(ds, linear, idx);
    for (int k = dim + 1; k < ds->rank; k++)
        step *= ds->grid[k];
    uint64_t left = ds->grid[dim] - 1 - idx[dim], bytes = 0;
    for (uint64_t m = 1; m <= left && m <= IMAGE_PREFETCH_MAX && bytes < IMAGE_PREFETCH_BYTES;
         m++, bytes += ds->chunk_bytes)
        if (queue_chunk(img, r, dset, linear + m * step, ds->chunk_bytes) != 0)
            break;
}

/* ---- spread: guesses around a miss ---- */

/* Bytes a reader may guess at this miss: its guesses not yet used count against its share. */
static uint64_t spread_room(const struct image_reader *r)
{
    uint64_t cache = chunk_cache_capacity(r->cache);
    uint64_t guessed = r->spread_guessed, taken = r->spread_taken;
    uint64_t unused = guessed > taken ? guessed - taken : 0, most = cache / IMAGE_SPREAD_UNUSED;
    uint64_t room = unused < most ? most - unused : 0;
    return room < cache / IMAGE_SPREAD_MISS ? room : cache / IMAGE_SPREAD_MISS;
}

/* Queue one guess; 0 to go on, -1 when the queue is full or the room is used up. */
static int guess(struct image *img, struct image_reader *r, uint32_t dset, uint64_t linear,
                 uint64_t len, uint64_t *room)
{
    int rc = queue_load(img, r, PREFETCH_SPREAD, dset, linear, len);
    if (rc == 0) {
        r->spread_guessed += len;
        *room = *room > len ? *room - len : 0;
    }
    return rc < 0 || *room == 0 ? -1 : 0;
}

/* The stored chunks after segment seg in file order, of the same dataset. */
static void spread_chunks(struct image *img, struct image_reader *r, size_t seg, uint64_t room)
{
    size_t n_segs;
    const struct segment *segs = extent_segments(img->map, &n_segs);
    uint32_t dset = segs[seg].dset;
    for (size_t i = seg + 1, seen = 0; i < n_segs && seen < IMAGE_SPREAD_SCAN; i++, seen++) {
        if (segs[i].kind != SEGMENT_CHUNK)
            continue;
        if (segs[i].dset != dset || guess(img, r, dset, segs[i].u.chunk, segs[i].len, &room))
            return;
    }
}

/* Step idx to the next line along dim in file order (the other dimensions counting, last
 * fastest); 0 past the grid's end. */
static int next_line(const struct image_dataset *ds, int dim, uint64_t *idx)
{
    for (int k = ds->rank - 1; k >= 0; k--) {
        if (k == dim)
            continue;
        if (++idx[k] < ds->grid[k])
            return 1;
        idx[k] = 0;
    }
    return 0;
}

/* The lines after the one chunk `linear` lies on (along dim), each from the same position on
 * dim to the grid's edge: a reader of columns reads whole lines. */
static void spread_lines(struct image *img, struct image_reader *r, uint32_t dset, uint64_t linear,
                         int dim, uint64_t room)
{
    const struct image_dataset *ds = &img->datasets[dset];
    uint64_t idx[IMAGE_MAX_RANK], step = 1;
    image_chunk_index(ds, linear, idx);
    for (int k = dim + 1; k < ds->rank; k++)
        step *= ds->grid[k];
    for (unsigned lines = 0; lines < IMAGE_SPREAD_SCAN && next_line(ds, dim, idx); lines++) {
        uint64_t at = 0;
        for (int k = 0; k < ds->rank; k++)
            at = at * ds->grid[k] + idx[k];
        for (uint64_t m = idx[dim]; m < ds->grid[dim]; m++, at += step)
            if (guess(img, r, dset, at, ds->chunk_bytes, &room))
                return;
    }
}

/* The reader's line dimension in dataset dset (columns: 0), or -1. */
static int line_dim(const struct image_reader *r, uint32_t dset)
{
    uint64_t stride = r->stride;
    return stride && (stride - 1) >> 8 == dset ? (int)((stride - 1) & 0xff) : -1;
}

/* A jump that lands on a chunk nobody has loaded: what lies after it is loaded too, as a
 * guess that the reader will jump there next (whole lines when it reads lines). */
static void spread(struct image *img, struct image_reader *r, size_t seg)
{
    size_t n_segs;
    const struct segment *s = &extent_segments(img->map, &n_segs)[seg];
    char key[64];
    uint64_t room = spread_room(r);
    if (room == 0)
        return;
    chunk_cache_key(img, s, key, sizeof key);
    if (chunk_cache_has(r->cache, key))
        return; /* not a miss: loaded, or being loaded for the reader already */
    int dim = line_dim(r, s->dset);
    if (dim >= 0 && img->datasets[s->dset].origin == ORIGIN_HSDS)
        spread_lines(img, r, s->dset, s->u.chunk, dim, room);
    else
        spread_chunks(img, r, seg, room);
}

/* A read that begins a chunk away from where the last one was: a step along one dimension of
 * the grid (or a new line started where the last step's line started) queues the line. */
static void stride_ahead(struct image *img, struct image_reader *r, const struct segment *segs,
                         size_t seg)
{
    const struct segment *s = &segs[seg];
    uint64_t from = r->run_chunk;
    if (r->last_chunk == seg + 1 || !can_prefetch(img, s->dset))
        return; /* within the same chunk: nothing new */
    r->run_chunk = seg + 1;
    r->run_chunks = 1;
    /* from where the last jump landed: the kernel's read-ahead runs past the chunk it read */
    const struct image_dataset *ds = &img->datasets[s->dset];
    const struct segment *p = from ? &segs[from - 1] : NULL;
    int dim = p && p->dset == s->dset ? grid_step_dim(ds, p->u.chunk, s->u.chunk) : -1;
    if (dim >= 0) {
        r->stride = 1 + ((uint64_t)s->dset << 8 | (unsigned)dim);
        line_ahead(img, r, s->dset, s->u.chunk, dim);
    } else if ((dim = line_dim(r, s->dset)) >= 0) {
        uint64_t idx[IMAGE_MAX_RANK];
        image_chunk_index(ds, s->u.chunk, idx);
        if (idx[dim] == 0)
            line_ahead(img, r, s->dset, s->u.chunk, dim);
    }
    spread(img, r, seg);
}

/* A jump closes the window and begins a new run: 1 if this read continues the last one. */
static int note_access(struct image_reader *r, uint64_t off, size_t len)
{
    uint64_t expect = r->expect;
    /* the kernel's parallel read-ahead arrives slightly out of order: allow some slack */
    int sequential = off <= expect + (4u << 20) && off + (4u << 20) >= expect;
    r->expect = off + len;
    if (!sequential) {
        r->window = 0;
        r->ahead = 0;
        r->run_from = off;
    }
    return sequential;
}

static struct image_through *find_through(struct image_reader *r, size_t seg)
{
    for (unsigned k = 0; k < IMAGE_THROUGH_SLOTS; k++)
        if (r->through[k].seg == seg + 1)
            return &r->through[k];
    return NULL;
}

static void drop_chunk(struct image *img, struct image_reader *r, const struct segment *s)
{
    char key[64];
    chunk_cache_key(img, s, key, sizeof key);
    chunk_cache_drop(r->cache, key);
}

/* n more bytes of chunk segment seg read, in a run that began at from. Once the run has read
 * all of a chunk it came into from the bytes before it (a file read front to back), the kernel
 * holds every page of it and the cache need not (chunk_cache_drop). The bytes are counted, not
 * their order: the kernel's parallel READs arrive out of order. A run that began in the chunk
 * is a jump: a reader of columns lands on a chunk's first byte and reads it through, and the
 * guesses of its next jump would load the chunk again. A heuristic: a race between threads
 * can only lose a drop or drop early (a reload), never change a byte read. */
static void count_read_through(struct image *img, struct image_reader *r,
                               const struct segment *segs, size_t seg, uint64_t n, uint64_t from)
{
    const struct segment *s = &segs[seg];
    struct image_through *t = find_through(r, seg);
    if (!t) {
        if (from >= s->off)
            return; /* a jump landed in it */
        t = &r->through[atomic_fetch_add(&r->through_next, 1) % IMAGE_THROUGH_SLOTS];
        t->seg = 0; /* the slot's last chunk, if unfinished, is given up */
        t->bytes = 0;
        t->seg = seg + 1;
    }
    uint64_t before = atomic_fetch_add(&t->bytes, n);
    if (before < s->len && before + n >= s->len) {
        t->seg = 0;
        drop_chunk(img, r, s);
    }
}

/* Sequential reads that move into another chunk widen the window. Reads of metadata alone do
 * not (an open reads the metadata in order, and chunks fetched for it were fetched for
 * nobody), nor do reads within one chunk (a column of a chunk is read through all of it). */
static void widen(struct image_reader *r)
{
    unsigned w = r->window;
    r->window = w == 0 ? 2 : w < IMAGE_PREFETCH_MAX ? w * 2 : IMAGE_PREFETCH_MAX;
}

/* What the first chunk of a read tells read-ahead (segment seg, once per read). */
static void follow_reader(struct image *img, struct image_reader *r, const struct segment *segs,
                          size_t seg, int sequential)
{
    int new_chunk = r->last_chunk != seg + 1;
    if (sequential && new_chunk && ++r->run_chunks >= 3) {
        widen(r);
        read_ahead(img, r, seg);
    } else if (!sequential) {
        stride_ahead(img, r, segs, seg);
    }
    if (!r->run_chunk)
        r->run_chunk = seg + 1; /* the reader's first chunk starts its first run */
    r->last_chunk = seg + 1;
}

ssize_t image_read(struct image *img, struct image_reader *r, uint64_t off, void *buf, size_t len)
{
    uint64_t size = extent_size(img->map);
    if (off >= size)
        return 0;
    if (len > size - off)
        len = (size_t)(size - off);
    int sequential = note_access(r, off, len), first_chunk = 1;
    uint64_t from = r->run_from;
    size_t n_segs, done = 0, i;
    const struct segment *segs = extent_segments(img->map, &n_segs);
    for (i = extent_find(img->map, off); done < len;) {
        uint64_t pos = off + done;
        unsigned char *out = (unsigned char *)buf + done;
        if (i >= n_segs || segs[i].off > pos) { /* a hole up to the next segment */
            uint64_t to =
                i < n_segs && segs[i].off - pos < len - done ? segs[i].off - pos : len - done;
            memset(out, 0, to);
            done += to;
            continue;
        }
        const struct segment *s = &segs[i++];
        uint64_t n = s->off + s->len - pos < len - done ? s->off + s->len - pos : len - done;
        if (s->kind == SEGMENT_CHUNK && first_chunk && r->prefetch) {
            follow_reader(img, r, segs, i - 1, sequential);
            first_chunk = 0; /* once per read */
        }
        if (s->kind == SEGMENT_BYTES)
            memcpy(out, s->u.bytes + (pos - s->off), n);
        else if (copy_chunk(img, r, s, pos, out, n) != 0)
            return -EIO;
        else
            count_read_through(img, r, segs, i - 1, n, from);
        done += n;
    }
    return (ssize_t)done;
}

int image_read_view(struct image *img, struct image_reader *r, uint64_t off, size_t len,
                    struct image_view *v)
{
    uint64_t size = extent_size(img->map);
    size_t n_segs, i = extent_find(img->map, off);
    const struct segment *segs = extent_segments(img->map, &n_segs);
    if (off >= size || len == 0 || i >= n_segs)
        return 0;
    const struct segment *s = &segs[i];
    if (len > size - off)
        len = (size_t)(size - off);
    if (s->kind != SEGMENT_CHUNK || s->off > off || off + len > s->off + s->len)
        return 0; /* not all in one chunk */
    int sequential = note_access(r, off, len);
    uint64_t from = r->run_from;
    if (r->prefetch)
        follow_reader(img, r, segs, i, sequential);
    if (hold_chunk(img, r, s, &v->entry) != 0)
        return -EIO;
    count_read_through(img, r, segs, i, len, from); /* a drop leaves at image_view_release */
    v->data = (const unsigned char *)chunk_entry_data(v->entry) + (off - s->off);
    v->len = len;
    v->cache = r->cache;
    return 1;
}

void image_view_release(struct image_view *v)
{
    chunk_entry_put(v->cache, v->entry);
    v->entry = NULL;
}
