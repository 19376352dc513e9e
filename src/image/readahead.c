/* readahead: the read-ahead policy (readahead.h). Decisions only: io carries them out. */
#include "readahead.h"

#include <stdatomic.h>

#include "h5osfs/cache/cache.h"

#define READAHEAD_MAX_RANK 32 /* image_int.h's IMAGE_MAX_RANK: no dataset has more */
/* the kernel's parallel read-ahead arrives slightly out of order: allow some slack */
#define READAHEAD_SLACK (4u << 20)
/* a reader past the page cache (exact) sends its own reads, in its order: a page of slack (the
 * index metadata HDF5 reads between chunks), or values far apart would pass for a file read */
#define READAHEAD_EXACT_SLACK 4096u

static int dataset_of(const struct readahead_io *io, uint32_t dset, struct readahead_dataset *ds)
{
    return io->dataset(io->ctx, dset, ds) == 0 && ds->rank <= READAHEAD_MAX_RANK ? 0 : -1;
}

static int can_prefetch(const struct readahead_io *io, uint32_t dset)
{
    struct readahead_dataset ds;
    return dataset_of(io, dset, &ds) == 0 && ds.fetchable;
}

/* Chunk coordinates of a linear index (row-major, the last dimension fastest). */
static void chunk_index(const struct readahead_dataset *ds, uint64_t linear, uint64_t *idx)
{
    for (int k = ds->rank - 1; k >= 0; k--) {
        idx[k] = linear % ds->grid[k];
        linear /= ds->grid[k];
    }
}

static int queue_chunk(const struct readahead_io *io, uint32_t dset, uint64_t linear, uint64_t len)
{
    return io->queue(io->ctx, PREFETCH_AHEAD, dset, linear, len) < 0 ? -1 : 0;
}

/* ---- read-ahead in file order, and along lines ---- */

/* Queue the chunk segments after segment `last`, up to the reader's window of chunks; the
 * ones queued by earlier reads are not queued again. */
static void read_ahead(struct image_reader *r, const struct readahead_io *io, size_t last)
{
    const struct segment *segs = io->segs;
    size_t n_segs = io->n_segs, end = last + 1;
    uint64_t bytes = 0;
    for (unsigned seen = 0; end < n_segs && seen < r->window && bytes < IMAGE_PREFETCH_BYTES;
         end++) {
        seen += segs[end].kind == SEGMENT_CHUNK;
        bytes += segs[end].kind == SEGMENT_CHUNK ? segs[end].len : 0;
    }
    size_t i = last + 1 > r->ahead ? last + 1 : (size_t)r->ahead;
    for (; i < end; i++) {
        const struct segment *s = &segs[i];
        if (s->kind != SEGMENT_CHUNK || !can_prefetch(io, s->dset))
            continue;
        if (queue_chunk(io, s->dset, s->u.chunk, s->len) != 0)
            break;
    }
    if (i > r->ahead)
        r->ahead = i;
}

/* The grid dimension along which chunk `to` is one step from chunk `from` (both of ds), or -1.
 * The last dimension is not a step: that is the file order, which read_ahead follows. */
static int grid_step_dim(const struct readahead_dataset *ds, uint64_t from, uint64_t to)
{
    uint64_t a[READAHEAD_MAX_RANK], b[READAHEAD_MAX_RANK];
    int dim = -1;
    if (ds->rank < 2 || to <= from)
        return -1;
    chunk_index(ds, from, a);
    chunk_index(ds, to, b);
    for (int k = 0; k < ds->rank; k++) {
        if (a[k] == b[k])
            continue;
        if (dim >= 0 || b[k] != a[k] + 1)
            return -1;
        dim = k;
    }
    return dim < ds->rank - 1 ? dim : -1;
}

/* Chunks between one chunk and the next along dimension dim. */
static uint64_t line_step(const struct readahead_dataset *ds, int dim)
{
    uint64_t step = 1;
    for (int k = dim + 1; k < ds->rank; k++)
        step *= ds->grid[k];
    return step;
}

/* Queue the chunks after chunk `linear` along grid dimension dim, to the grid's edge, at most
 * IMAGE_PREFETCH_MAX chunks or IMAGE_PREFETCH_BYTES. */
static void line_ahead(const struct readahead_io *io, uint32_t dset,
                       const struct readahead_dataset *ds, uint64_t linear, int dim)
{
    uint64_t idx[READAHEAD_MAX_RANK], step = line_step(ds, dim);
    chunk_index(ds, linear, idx);
    uint64_t left = ds->grid[dim] - 1 - idx[dim], bytes = 0;
    for (uint64_t m = 1; m <= left && m <= IMAGE_PREFETCH_MAX && bytes < IMAGE_PREFETCH_BYTES;
         m++, bytes += ds->chunk_bytes)
        if (queue_chunk(io, dset, linear + m * step, ds->chunk_bytes) != 0)
            break;
}

/* ---- spread: guesses around a miss ---- */

/* Bytes a reader may guess at this miss: its guesses not yet used count against its share. */
static uint64_t spread_room(const struct image_reader *r, const struct readahead_io *io)
{
    uint64_t cache = io->cache_capacity;
    uint64_t guessed = r->spread_guessed, taken = r->spread_taken;
    uint64_t unused = guessed > taken ? guessed - taken : 0, most = cache / IMAGE_SPREAD_UNUSED;
    uint64_t room = unused < most ? most - unused : 0;
    return room < cache / IMAGE_SPREAD_MISS ? room : cache / IMAGE_SPREAD_MISS;
}

/* What one miss may still guess: bytes, and chunks. */
struct spread_room {
    uint64_t bytes;
    uint64_t chunks;
};

/* Chunks a reader may guess at a miss, after n jumps into another chunk. One value read after
 * another is two jumps, and guessing 32 MiB at each is dozens of GETs a reader never asked for
 * (S3 bills each): a reader earns guesses by jumping a third time, then twice as many at each
 * jump, so one that reads scattered boxes or columns is soon guessed as much as the bytes
 * allow (64 chunks by its ninth jump). Jumps, not misses, are counted: with the kernel's
 * parallel READs, the read that jumps often finds its chunk loading already. */
#define JUMPS_BEFORE_GUESSES 3

static uint64_t spread_chunks_allowed(unsigned jumps)
{
    if (jumps < JUMPS_BEFORE_GUESSES)
        return 0;
    unsigned doublings = jumps - JUMPS_BEFORE_GUESSES;
    return 1ull << (doublings < IMAGE_SPREAD_DOUBLINGS ? doublings : IMAGE_SPREAD_DOUBLINGS);
}

/* Queue one guess; 0 to go on, -1 when the queue is full or the room is used up. */
static int guess(struct image_reader *r, const struct readahead_io *io, uint32_t dset,
                 uint64_t linear, uint64_t len, struct spread_room *room)
{
    int rc = io->queue(io->ctx, PREFETCH_SPREAD, dset, linear, len);
    if (rc == 0) {
        uint64_t cost = chunk_cache_charge(len); /* bounded as the cache is */
        r->spread_guessed += cost;
        room->bytes = room->bytes > cost ? room->bytes - cost : 0;
        room->chunks--;
    }
    return rc < 0 || room->bytes == 0 || room->chunks == 0 ? -1 : 0;
}

/* The stored chunks after segment seg in file order, of the same dataset. */
static void spread_chunks(struct image_reader *r, const struct readahead_io *io, size_t seg,
                          struct spread_room room)
{
    const struct segment *segs = io->segs;
    uint32_t dset = segs[seg].dset;
    for (size_t i = seg + 1, seen = 0; i < io->n_segs && seen < IMAGE_SPREAD_SCAN; i++, seen++) {
        if (segs[i].kind != SEGMENT_CHUNK)
            continue;
        if (segs[i].dset != dset || guess(r, io, dset, segs[i].u.chunk, segs[i].len, &room))
            return;
    }
}

/* Step idx to the next line along dim in file order (the other dimensions counting, last
 * fastest); 0 past the grid's end. */
static int next_line(const struct readahead_dataset *ds, int dim, uint64_t *idx)
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
static void spread_lines(struct image_reader *r, const struct readahead_io *io, uint32_t dset,
                         const struct readahead_dataset *ds, uint64_t linear, int dim,
                         struct spread_room room)
{
    uint64_t idx[READAHEAD_MAX_RANK], step = line_step(ds, dim);
    chunk_index(ds, linear, idx);
    for (unsigned lines = 0; lines < IMAGE_SPREAD_SCAN && next_line(ds, dim, idx); lines++) {
        uint64_t at = 0;
        for (int k = 0; k < ds->rank; k++)
            at = at * ds->grid[k] + idx[k];
        for (uint64_t m = idx[dim]; m < ds->grid[dim]; m++, at += step)
            if (guess(r, io, dset, at, ds->chunk_bytes, &room))
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
static void spread(struct image_reader *r, const struct readahead_io *io,
                   const struct readahead_dataset *ds, size_t seg)
{
    const struct segment *s = &io->segs[seg];
    if (io->cached(io->ctx, s->dset, s->u.chunk))
        return; /* not a miss: loaded, or being loaded for the reader already */
    struct spread_room room = { spread_room(r, io), spread_chunks_allowed(r->jumps) };
    if (room.bytes == 0 || room.chunks == 0)
        return;
    int dim = line_dim(r, s->dset);
    if (dim >= 0 && ds->by_lines)
        spread_lines(r, io, s->dset, ds, s->u.chunk, dim, room);
    else
        spread_chunks(r, io, seg, room);
}

/* A read that begins a chunk away from where the last one was: a step along one dimension of
 * the grid (or a new line started where the last step's line started) queues the line. */
static void stride_ahead(struct image_reader *r, const struct readahead_io *io, size_t seg)
{
    const struct segment *segs = io->segs, *s = &segs[seg];
    struct readahead_dataset ds;
    uint64_t from = r->run_chunk;
    if (r->last_chunk == seg + 1 || dataset_of(io, s->dset, &ds) != 0 || !ds.fetchable)
        return; /* within the same chunk: nothing new */
    r->run_chunk = seg + 1;
    r->run_chunks = 1;
    r->jumps++;
    /* from where the last jump landed: the kernel's read-ahead runs past the chunk it read */
    const struct segment *p = from ? &segs[from - 1] : NULL;
    int dim = p && p->dset == s->dset ? grid_step_dim(&ds, p->u.chunk, s->u.chunk) : -1;
    if (dim >= 0) {
        r->stride = 1 + ((uint64_t)s->dset << 8 | (unsigned)dim);
        line_ahead(io, s->dset, &ds, s->u.chunk, dim);
    } else if ((dim = line_dim(r, s->dset)) >= 0) {
        uint64_t idx[READAHEAD_MAX_RANK];
        chunk_index(&ds, s->u.chunk, idx);
        if (idx[dim] == 0)
            line_ahead(io, s->dset, &ds, s->u.chunk, dim);
    }
    spread(r, io, &ds, seg);
}

/* ---- following the reader ---- */

int readahead_access(struct image_reader *r, uint64_t off, size_t len, uint64_t *run_from)
{
    uint64_t expect = r->expect, slack = r->exact ? READAHEAD_EXACT_SLACK : READAHEAD_SLACK;
    int sequential = off <= expect + slack && off + slack >= expect;
    r->expect = off + len;
    if (!sequential) {
        r->window = 0;
        r->ahead = 0;
        r->run_from = off;
    }
    *run_from = r->run_from;
    return sequential;
}

int readahead_brush_by_range(const struct image_reader *r)
{
    return r->jumps < JUMPS_BEFORE_GUESSES;
}

size_t readahead_subject(const struct readahead_io *io, size_t seg, uint64_t off, size_t len)
{
    const struct segment *s = &io->segs[seg];
    uint64_t page = io->page ? io->page : 1, first_page_end = off - off % page + page;
    uint64_t seg_end = s->off + s->len;
    if (seg_end <= first_page_end && seg_end < off + len && seg + 1 < io->n_segs &&
        io->segs[seg + 1].kind == SEGMENT_CHUNK && io->segs[seg + 1].off < off + len)
        return seg + 1;
    return seg;
}

/* Sequential reads that move into another chunk widen the window. Reads of metadata alone do
 * not (an open reads the metadata in order, and chunks fetched for it were fetched for
 * nobody), nor do reads within one chunk (a column of a chunk is read through all of it). */
static void widen(struct image_reader *r)
{
    unsigned w = r->window;
    r->window = w == 0 ? 2 : w < IMAGE_PREFETCH_MAX ? w * 2 : IMAGE_PREFETCH_MAX;
}

void readahead_follow(struct image_reader *r, const struct readahead_io *io, size_t seg,
                      int sequential)
{
    int new_chunk = r->last_chunk != seg + 1;
    if (sequential && new_chunk && ++r->run_chunks >= 3) {
        widen(r);
        read_ahead(r, io, seg);
    } else if (!sequential) {
        stride_ahead(r, io, seg);
    }
    if (!r->run_chunk)
        r->run_chunk = seg + 1; /* the reader's first chunk starts its first run */
    r->last_chunk = seg + 1;
}

/* ---- letting go of what was read through ---- */

static struct image_through *find_through(struct image_reader *r, size_t seg)
{
    for (unsigned k = 0; k < IMAGE_THROUGH_SLOTS; k++)
        if (r->through[k].seg == seg + 1)
            return &r->through[k];
    return NULL;
}

/* Once a run has read all of a chunk it came into from the bytes before it (a file read front
 * to back), the kernel holds every page of it and the cache need not. The bytes are counted,
 * not their order: the kernel's parallel READs arrive out of order. A run that began in the
 * chunk is a jump: a reader of columns lands on a chunk's first byte and reads it through, and
 * the guesses of its next jump would load the chunk again. A heuristic: a race between threads
 * can only lose a drop or drop early (a reload), never change a byte read. */
void readahead_read_through(struct image_reader *r, const struct readahead_io *io, size_t seg,
                            uint64_t n, uint64_t run_from)
{
    if (r->exact)
        return; /* no page of it is kept by the kernel */
    const struct segment *s = &io->segs[seg];
    struct image_through *t = find_through(r, seg);
    if (!t) {
        uint64_t page = io->page ? io->page : 1;
        if (run_from + page > s->off)
            return; /* a jump landed in it, or in the page its first byte lies in */
        t = &r->through[atomic_fetch_add(&r->through_next, 1) % IMAGE_THROUGH_SLOTS];
        t->seg = 0; /* the slot's last chunk, if unfinished, is given up */
        t->bytes = 0;
        t->seg = seg + 1;
    }
    uint64_t before = atomic_fetch_add(&t->bytes, n);
    if (before < s->len && before + n >= s->len) {
        t->seg = 0;
        io->drop(io->ctx, s->dset, s->u.chunk);
    }
}

void readahead_taken(struct image_reader *r, uint64_t len)
{
    r->spread_taken += chunk_cache_charge(len);
}
