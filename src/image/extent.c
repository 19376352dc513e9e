/* extent: see extent.h. Two vectors sorted by offset whose items never overlap. */
#include "extent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"

struct run {
    uint64_t off, len, cap;
    unsigned char *data;
};

/* 24 bytes: with its chunk list, a million chunks being declared must fit beside the rest. */
struct chunk_extent {
    uint64_t off;
    uint64_t chunk;
    uint32_t len; /* a chunk is less than 4 GiB (HDF5's limit) */
    uint32_t dset;
};

struct extent_map {
    struct run *runs; /* while built */
    size_t n_runs, cap_runs;
    struct chunk_extent *chunks; /* while built */
    size_t n_chunks, cap_chunks;
    struct segment *segs; /* after extent_finish (made in the chunks' memory) */
    size_t n_segs;
    uint64_t size;
};

struct extent_map *extent_map_new(void)
{
    return calloc(1, sizeof(struct extent_map));
}

void extent_map_free(struct extent_map *map)
{
    if (!map)
        return;
    for (size_t i = 0; i < map->n_runs; i++)
        free(map->runs[i].data);
    free(map->runs);
    free(map->chunks);
    for (size_t i = 0; i < map->n_segs; i++)
        if (map->segs[i].kind == SEGMENT_BYTES)
            free((void *)map->segs[i].u.bytes);
    free(map->segs);
    free(map);
}

/* ---- binary searches: first item that ends after off ---- */
/* The library writes a file mostly in order (a build writes 10^6 chunks one after another):
 * an offset past the last item is answered without a search. */

static size_t first_run_ending_after(const struct extent_map *m, uint64_t off)
{
    size_t lo = 0, hi = m->n_runs;
    if (hi == 0 || m->runs[hi - 1].off + m->runs[hi - 1].len <= off)
        return hi;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->runs[mid].off + m->runs[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t first_chunk_ending_after(const struct extent_map *m, uint64_t off)
{
    size_t lo = 0, hi = m->n_chunks;
    if (hi == 0 || m->chunks[hi - 1].off + m->chunks[hi - 1].len <= off)
        return hi;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->chunks[mid].off + m->chunks[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- making room for a write ---- */

static void remove_run(struct extent_map *m, size_t i)
{
    free(m->runs[i].data);
    memmove(&m->runs[i], &m->runs[i + 1], (m->n_runs - i - 1) * sizeof *m->runs);
    m->n_runs--;
}

static int insert_run(struct extent_map *m, size_t i, struct run r)
{
    struct run *runs = grow_array(m->runs, &m->cap_runs, m->n_runs + 1, sizeof *runs, 64);
    if (!runs)
        return -ENOMEM;
    m->runs = runs;
    memmove(&m->runs[i + 1], &m->runs[i], (m->n_runs - i) * sizeof *m->runs);
    m->runs[i] = r;
    m->n_runs++;
    return 0;
}

/* Split run i around [off, end): keep the head in place, insert the tail as a new run. */
static int split_run(struct extent_map *m, size_t i, uint64_t off, uint64_t end)
{
    struct run *r = &m->runs[i];
    uint64_t tail_len = r->off + r->len - end;
    struct run tail = { end, tail_len, tail_len, malloc(tail_len) };
    if (!tail.data)
        return -ENOMEM;
    memcpy(tail.data, r->data + (end - r->off), tail_len);
    r->len = off - r->off;
    int rc = insert_run(m, i + 1, tail);
    if (rc != 0)
        free(tail.data);
    return rc;
}

/* Remove the bytes [off, end) from every run, trimming or splitting runs that straddle it. */
static int cut_runs(struct extent_map *m, uint64_t off, uint64_t end)
{
    size_t i = first_run_ending_after(m, off);
    while (i < m->n_runs && m->runs[i].off < end) {
        struct run *r = &m->runs[i];
        uint64_t r_end = r->off + r->len;
        if (r->off < off && r_end > end)
            return split_run(m, i, off, end);
        if (r->off < off) {
            r->len = off - r->off;
            i++;
        } else if (r_end > end) {
            memmove(r->data, r->data + (end - r->off), r_end - end);
            r->len = r_end - end;
            r->off = end;
            return 0;
        } else {
            remove_run(m, i);
        }
    }
    return 0;
}

/* A chunk extent that is overwritten in part is gone: its space was freed and reused. */
static void drop_chunks(struct extent_map *m, uint64_t off, uint64_t end)
{
    size_t i = first_chunk_ending_after(m, off), j = i;
    while (j < m->n_chunks && m->chunks[j].off < end)
        j++;
    if (i == j)
        return; /* nothing overlaps (and chunks may still be NULL) */
    memmove(&m->chunks[i], &m->chunks[j], (m->n_chunks - j) * sizeof *m->chunks);
    m->n_chunks -= j - i;
}

/* ---- writes ---- */

/* Appending to the run that ends at off is the common case (the library writes in order). */
static int append_to_run(struct run *r, const void *buf, uint64_t len)
{
    if (r->len + len > r->cap) {
        uint64_t ncap = r->cap * 2 > r->len + len ? r->cap * 2 : r->len + len;
        unsigned char *nd = realloc(r->data, ncap);
        if (!nd)
            return -ENOMEM;
        r->data = nd;
        r->cap = ncap;
    }
    memcpy(r->data + r->len, buf, len);
    r->len += len;
    return 0;
}

int extent_write_bytes(struct extent_map *map, uint64_t off, const void *buf, uint64_t len)
{
    if (len == 0)
        return 0;
    drop_chunks(map, off, off + len);
    int rc = cut_runs(map, off, off + len);
    if (rc != 0)
        return rc;
    size_t i = first_run_ending_after(map, off);
    if (i > 0 && map->runs[i - 1].off + map->runs[i - 1].len == off)
        return append_to_run(&map->runs[i - 1], buf, len);
    struct run r = { off, len, len, malloc(len) };
    if (!r.data)
        return -ENOMEM;
    memcpy(r.data, buf, len);
    rc = insert_run(map, i, r);
    if (rc != 0)
        free(r.data);
    return rc;
}

int extent_write_chunk(struct extent_map *map, uint64_t off, uint64_t len, struct extent_tag tag)
{
    if (len == 0)
        return 0;
    if (len > UINT32_MAX)
        return -EFBIG;
    drop_chunks(map, off, off + len);
    int rc = cut_runs(map, off, off + len);
    if (rc != 0)
        return rc;
    struct chunk_extent *chunks =
        grow_array(map->chunks, &map->cap_chunks, map->n_chunks + 1, sizeof *chunks, 64);
    if (!chunks)
        return -ENOMEM;
    map->chunks = chunks;
    size_t i = first_chunk_ending_after(map, off);
    memmove(&map->chunks[i + 1], &map->chunks[i], (map->n_chunks - i) * sizeof *map->chunks);
    map->chunks[i] = (struct chunk_extent){ off, tag.chunk, (uint32_t)len, tag.dset };
    map->n_chunks++;
    return 0;
}

int extent_chunk_at(const struct extent_map *map, uint64_t off, struct extent_tag *tag)
{
    size_t i = first_chunk_ending_after(map, off);
    if (i == map->n_chunks || map->chunks[i].off != off)
        return 0;
    *tag = (struct extent_tag){ map->chunks[i].dset, map->chunks[i].chunk };
    return 1;
}

int extent_reserve_chunks(struct extent_map *map, size_t n)
{
    size_t need = map->n_chunks + n;
    if (need <= map->cap_chunks)
        return 0;
    void *nv = realloc(map->chunks, need * sizeof *map->chunks);
    if (!nv)
        return -ENOMEM;
    map->chunks = nv;
    map->cap_chunks = need;
    return 0;
}

void extent_read(const struct extent_map *map, uint64_t off, void *buf, uint64_t len)
{
    unsigned char *out = buf;
    memset(out, 0, len);
    for (size_t i = first_run_ending_after(map, off); i < map->n_runs; i++) {
        const struct run *r = &map->runs[i];
        if (r->off >= off + len)
            break;
        uint64_t from = r->off > off ? r->off : off;
        uint64_t to = r->off + r->len < off + len ? r->off + r->len : off + len;
        memcpy(out + (from - off), r->data + (from - r->off), to - from);
    }
}

/* ---- freezing ---- */

static void drop_beyond(struct extent_map *m, uint64_t eof)
{
    while (m->n_runs > 0 && m->runs[m->n_runs - 1].off >= eof)
        remove_run(m, m->n_runs - 1);
    if (m->n_runs > 0 && m->runs[m->n_runs - 1].off + m->runs[m->n_runs - 1].len > eof)
        m->runs[m->n_runs - 1].len = eof - m->runs[m->n_runs - 1].off;
    while (m->n_chunks > 0 && m->chunks[m->n_chunks - 1].off + m->chunks[m->n_chunks - 1].len > eof)
        m->n_chunks--;
}

/* The chunks, turned into segments in their own array (grown, then spread from the back:
 * no second array of a million entries), and the runs merged in from the back. The runs'
 * bytes now belong to segments. */
int extent_finish(struct extent_map *map, uint64_t eof)
{
    _Static_assert(sizeof(struct segment) >= sizeof(struct chunk_extent),
                   "segments are made in the chunks' array");
    drop_beyond(map, eof);
    size_t nc = map->n_chunks, n = nc + map->n_runs;
    struct segment *segs = realloc(map->chunks, (n ? n : 1) * sizeof *segs);
    if (!segs)
        return -ENOMEM;
    map->chunks = NULL;
    map->cap_chunks = map->n_chunks = 0;
    for (size_t i = nc; i-- > 0;) { /* segment i lies over chunk extents i and later */
        struct chunk_extent c = ((struct chunk_extent *)segs)[i];
        segs[i] = (struct segment){
            .off = c.off, .len = c.len, .u.chunk = c.chunk, .dset = c.dset, .kind = SEGMENT_CHUNK
        };
    }
    size_t r = map->n_runs, c = nc, out = n;
    while (r > 0) { /* merge from the back: nothing not yet moved is written */
        const struct run *x = &map->runs[r - 1];
        if (c > 0 && segs[c - 1].off > x->off) {
            segs[--out] = segs[--c];
            continue;
        }
        segs[--out] = (struct segment){
            .off = x->off, .len = x->len, .u.bytes = x->data, .kind = SEGMENT_BYTES
        };
        r--;
    }
    free(map->runs);
    map->runs = NULL;
    map->n_runs = map->cap_runs = 0;
    map->segs = segs;
    map->n_segs = n;
    map->size = eof;
    return 0;
}

int extent_map_restore(struct extent_map *map, struct segment *segs, size_t n, uint64_t size)
{
    if (map->n_runs || map->n_chunks || map->segs)
        return -EINVAL;
    map->segs = segs;
    map->n_segs = n;
    map->size = size;
    return 0;
}

/* Segments are sorted, so one pass counts each page's run of one dataset's chunks; a build
 * declares a dataset's chunks together (build_declare.c), so a page's are one run. */
uint64_t extent_busiest_page(const struct extent_map *map, uint64_t page)
{
    uint64_t most = 0, count = 0, last = UINT64_MAX;
    uint32_t dset = UINT32_MAX;
    for (size_t i = 0; i < map->n_segs; i++) {
        const struct segment *s = &map->segs[i];
        if (s->kind != SEGMENT_CHUNK)
            continue;
        uint64_t p = s->off / page;
        count = p == last && s->dset == dset ? count + 1 : 1;
        last = p;
        dset = s->dset;
        most = count > most ? count : most;
    }
    return most;
}

uint64_t extent_size(const struct extent_map *map)
{
    return map->size;
}

const struct segment *extent_segments(const struct extent_map *map, size_t *n)
{
    *n = map->n_segs;
    return map->segs;
}

size_t extent_find(const struct extent_map *map, uint64_t off)
{
    size_t lo = 0, hi = map->n_segs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (map->segs[mid].off + map->segs[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint64_t extent_memory(const struct extent_map *map)
{
    uint64_t total = sizeof *map + map->cap_runs * sizeof *map->runs +
                     map->cap_chunks * sizeof *map->chunks + map->n_segs * sizeof *map->segs;
    for (size_t i = 0; i < map->n_runs; i++)
        total += map->runs[i].cap;
    for (size_t i = 0; i < map->n_segs; i++)
        total += map->segs[i].kind == SEGMENT_BYTES ? map->segs[i].len : 0;
    return total;
}
