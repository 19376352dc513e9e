/* image_read: serving a built image's bytes (include/h5osfs/image/image.h): chunks loaded through
 * the cache, and the loads, guesses and drops the read-ahead policy (readahead.h) decides. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5osfs/util/bigbuf.h"
#include "h5osfs/util/log.h"
#include "image_int.h"
#include "readahead.h"

/* ---- loading one chunk ---- */

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

/* What a file is known by: an in-place write changes its mtime, a replacement its inode. Not
 * its ctime, which a hard link made or removed changes too: every commit of the domain links
 * the chunks it keeps into its new root, and the collector unlinks the old root's. */
static uint64_t file_stamp(const struct stat *sb)
{
    uint64_t mtime_ns = (uint64_t)sb->st_mtim.tv_sec * 1000000000u + (uint64_t)sb->st_mtim.tv_nsec;
    return mtime_ns ^ ((uint64_t)sb->st_ino * 0x9E3779B97F4A7C15u) ^ ((uint64_t)sb->st_size << 32);
}

/* Chunk `linear` of dataset `dset` is served from bytes that came with token (their object's
 * etag, CHUNK_PIN_ABSENT for a missing object): the same version as every earlier serving of
 * it by this image (chunk_pins.h), 0; else -ESTALE, the image marked changed and, the first
 * time for that chunk, one log line. */
static int pin_served(struct image *img, uint32_t dset, uint64_t linear, uint64_t token)
{
    int first;
    if (chunk_pins_check(img->pins, dset, linear, token, &first) != -ESTALE)
        return 0;
    atomic_store(&img->changed_in_store, 1);
    char key[STORE_KEY_MAX + 1];
    const struct image_dataset *ds = &img->datasets[dset];
    if (first && image_chunk_key(ds, linear, key, sizeof key) == 0)
        log_error("%s: %s: chunk %s: %s in the store since this version of the file served it: "
                  "its readers get EIO for it; the next open reads the new version",
                  img->domain_path, ds->path, key,
                  token == CHUNK_PIN_ABSENT ? "deleted" : "written");
    return -ESTALE;
}

/* Chunks smaller than this are read into memory: a splice per piece costs more than a copy. */
#define FILE_CHUNK_MIN 65536

/* An unfiltered chunk whose object is a file of exactly the chunk's size (a local bucket): that
 * file becomes the entry, and READs splice from it. 1 when *file is it; 0 when it is not to be
 * (the store keeps no files, the chunk is filtered or small, the file is not the chunk's size:
 * read it as ever); -ENOENT. */
static int open_chunk_file(const struct chunk_job *job, const char *key, size_t size,
                           struct chunk_file *file)
{
    if (!codec_is_copy(&job->ds->codec) || size < FILE_CHUNK_MIN)
        return 0;
    int fd;
    struct store_stat st;
    int rc = store_open_object(job->img->store, key, &fd, &st);
    if (rc == -ENOENT || rc != 0)
        return rc == -ENOENT ? rc : 0; /* another failure: the get says why */
    struct stat sb;
    if (st.size != size || fstat(fd, &sb) != 0) {
        close(fd);
        return 0;
    }
    *file = (struct chunk_file){ fd, file_stamp(&sb), chunk_pin_token(st.etag) };
    return 1;
}

static int load_hsds(const struct chunk_job *job, size_t size, void **data, struct chunk_file *file)
{
    char key[STORE_KEY_MAX + 1];
    struct store_buf raw = { 0 };
    const struct image_dataset *ds = job->ds;
    if (image_chunk_key(ds, job->linear, key, sizeof key) != 0)
        return -EIO;
    int rc = open_chunk_file(job, key, size, file);
    if (rc == 1)
        return 0;
    if (rc == 0)
        rc = store_get(job->img->store, key, size + size / 8 + 65536, &raw);
    if (rc == 0 || rc == -ENOENT) /* what the served bytes are checked by (pin_served) */
        file->version = rc == 0 ? chunk_pin_token(raw.etag) : CHUNK_PIN_ABSENT;
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

static int load_chunk(void *ctx, size_t size, void **data, struct chunk_file *file)
{
    const struct chunk_job *job = ctx;
    if (job->ds->origin == ORIGIN_HSDS)
        return load_hsds(job, size, data, file);
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

/* The file of chunk segment s is still the one its entry opened: not written in place since
 * (a replacement is another file, and the entry keeps the old one open). A chunk HSDS rewrote
 * in place is not served, lest a page of the new bytes follow pages of the old: EIO. */
static int check_chunk_file(const struct image *img, const struct segment *s,
                            struct chunk_file file)
{
    struct stat sb;
    if (fstat(file.fd, &sb) == 0 && file_stamp(&sb) == file.stamp && (uint64_t)sb.st_size == s->len)
        return 0;
    log_error("%s: %s: chunk %" PRIu64 ": its file changed since it was opened (written in "
              "place): not served (EIO)",
              img->domain_path, img->datasets[s->dset].path, s->u.chunk);
    return -EIO;
}

/* The cache entry of chunk segment s, held (chunk_entry_put when done), its bytes the version
 * the image served before (chunk_pins.h). 0 or -EIO. */
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
    /* a writer's base takes the bytes as they are now (struct image_reader), and pins them
     * for the readers of the version if nobody served the chunk yet */
    if (pin_served(img, s->dset, s->u.chunk, chunk_entry_version(*e)) != 0 && !r->writer_base) {
        chunk_entry_put(r->cache, *e);
        return -EIO;
    }
    if (found.spread_taken)
        readahead_taken(r, s->len);
    return 0;
}

/* n bytes at off of the file a chunk's entry is, after checking it is still the file loaded. */
static int read_chunk_file(const struct image *img, const struct segment *s, struct chunk_file file,
                           uint64_t off, unsigned char *out, uint64_t n)
{
    if (check_chunk_file(img, s, file) != 0)
        return -EIO;
    for (uint64_t got = 0; got < n;) {
        ssize_t k = pread(file.fd, out + got, (size_t)(n - got), (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            log_error("%s: %s: chunk %" PRIu64 ": reading its file: %s", img->domain_path,
                      img->datasets[s->dset].path, s->u.chunk,
                      k < 0 ? strerror(errno) : "shorter than the chunk");
            return -EIO;
        }
        got += (uint64_t)k;
    }
    return 0;
}

static int copy_chunk(struct image *img, struct image_reader *r, const struct segment *s,
                      uint64_t from, unsigned char *out, uint64_t n)
{
    struct chunk_entry *e;
    if (hold_chunk(img, r, s, &e) != 0)
        return -EIO;
    const unsigned char *data = chunk_entry_data(e);
    int rc = 0;
    if (data)
        memcpy(out, data + (from - s->off), n);
    else
        rc = read_chunk_file(img, s, chunk_entry_file(e), from - s->off, out, n);
    chunk_entry_put(r->cache, e);
    return rc;
}

/* ---- the part of a chunk a READ only brushes ---- */

/*
 * The kernel reads whole pages, and a READ that jumps to a chunk beginning inside a page
 * begins in the last page of the chunk before it (readahead_subject): it takes a few bytes of
 * that chunk. Loading the chunk for them costs the GET of its whole object, and the READ waits
 * for it before the chunk it is about. When nothing holds or loads that chunk and its object
 * is its bytes as they are (an HSDS chunk with no filter), and the reader has shown no
 * pattern yet (readahead_brush_by_range), the bytes come from a ranged GET of exactly them
 * instead; they are served, not cached (they are no chunk).
 */
static int brushable(struct image *img, struct image_reader *r, const struct segment *s)
{
    char key[64];
    if (s->kind != SEGMENT_CHUNK || s->dset >= img->n_datasets)
        return 0;
    const struct image_dataset *ds = &img->datasets[s->dset];
    if (ds->origin != ORIGIN_HSDS || !codec_is_copy(&ds->codec) || ds->chunk_bytes != s->len)
        return 0;
    chunk_cache_key(img, s, key, sizeof key);
    return !chunk_cache_has(r->cache, key);
}

/* The index of the chunk segment a READ only brushes (see above), or n_segs when none. */
static size_t brushed(struct image *img, struct image_reader *r, const struct readahead_io *io,
                      size_t i, uint64_t off, size_t len)
{
    if (i >= io->n_segs || io->segs[i].kind != SEGMENT_CHUNK || io->segs[i].off > off)
        return io->n_segs;
    if (r->writer_base || !readahead_brush_by_range(r) || readahead_subject(io, i, off, len) == i ||
        !brushable(img, r, &io->segs[i]))
        return io->n_segs;
    return i;
}

/* n bytes at pos of chunk segment s by a ranged GET: 1 when out holds them; 0 when the chunk
 * is to be loaded as ever (its object is missing: the fill value; or shorter than the chunk:
 * the load says why); -EIO, for this READ alone. */
static int read_brushed(struct image *img, const struct segment *s, uint64_t pos,
                        unsigned char *out, uint64_t n)
{
    char key[STORE_KEY_MAX + 1];
    struct store_buf got = { 0 };
    const struct image_dataset *ds = &img->datasets[s->dset];
    if (image_chunk_key(ds, s->u.chunk, key, sizeof key) != 0)
        return -EIO;
    int rc = store_get_range(img->store, key, pos - s->off, n, &got);
    int whole = rc == 0 && got.len == n;
    if (whole && pin_served(img, s->dset, s->u.chunk, chunk_pin_token(got.etag)) != 0) {
        store_buf_free(&got);
        return -EIO;
    }
    if (whole)
        memcpy(out, got.data, n);
    else if (rc != 0 && rc != -ENOENT)
        log_error("%s: %s: chunk %s: bytes %" PRIu64 "-%" PRIu64 ": %s", img->domain_path, ds->path,
                  key, pos - s->off, pos - s->off + n - 1, strerror(-rc));
    store_buf_free(&got);
    return rc != 0 && rc != -ENOENT ? -EIO : whole;
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

static int can_prefetch(const struct image *img, uint32_t dset)
{
    return dset < img->n_datasets && img->datasets[dset].origin != ORIGIN_POISON;
}

/* ---- what carries out the read-ahead policy's decisions (readahead.h) ---- */

/* The image and reader a policy call is about. */
struct policy_ctx {
    struct image *img;
    struct image_reader *r;
};

static int policy_dataset(void *ctx, uint32_t dset, struct readahead_dataset *out)
{
    const struct image *img = ((struct policy_ctx *)ctx)->img;
    if (dset >= img->n_datasets)
        return -1;
    const struct image_dataset *ds = &img->datasets[dset];
    *out = (struct readahead_dataset){ ds->rank, ds->grid, ds->chunk_bytes, can_prefetch(img, dset),
                                       ds->origin == ORIGIN_HSDS };
    return 0;
}

static int policy_cached(void *ctx, uint32_t dset, uint64_t chunk)
{
    const struct policy_ctx *p = ctx;
    char key[64];
    struct segment s = { .dset = dset, .u.chunk = chunk };
    chunk_cache_key(p->img, &s, key, sizeof key);
    return chunk_cache_has(p->r->cache, key);
}

static int policy_queue(void *ctx, enum prefetch_kind kind, uint32_t dset, uint64_t chunk,
                        uint64_t len)
{
    const struct policy_ctx *p = ctx;
    return queue_load(p->img, p->r, kind, dset, chunk, len);
}

static void policy_drop(void *ctx, uint32_t dset, uint64_t chunk)
{
    const struct policy_ctx *p = ctx;
    char key[64];
    struct segment s = { .dset = dset, .u.chunk = chunk };
    chunk_cache_key(p->img, &s, key, sizeof key);
    chunk_cache_drop(p->r->cache, key);
}

static struct readahead_io policy_io(struct policy_ctx *p)
{
    struct readahead_io io = { .ctx = p,
                               .dataset = policy_dataset,
                               .cached = policy_cached,
                               .queue = policy_queue,
                               .drop = policy_drop };
    io.segs = extent_segments(p->img->map, &io.n_segs);
    io.cache_capacity = chunk_cache_capacity(p->r->cache);
    io.page = image_kernel_page();
    return io;
}

ssize_t image_read(struct image *img, struct image_reader *r, uint64_t off, void *buf, size_t len)
{
    uint64_t size = extent_size(img->map);
    if (off >= size)
        return 0;
    if (len > size - off)
        len = (size_t)(size - off);
    uint64_t from;
    int sequential = readahead_access(r, off, len, &from), first_chunk = 1;
    struct policy_ctx ctx = { img, r };
    struct readahead_io io = policy_io(&ctx);
    size_t n_segs = io.n_segs, done = 0, i = extent_find(img->map, off);
    size_t brush = brushed(img, r, &io, i, off, len);
    const struct segment *segs = io.segs;
    for (; done < len;) {
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
            readahead_follow(r, &io, readahead_subject(&io, i - 1, off, len), sequential);
            first_chunk = 0; /* once per read */
        }
        int got = i - 1 == brush ? read_brushed(img, s, pos, out, n) : 0;
        if (got < 0)
            return -EIO;
        if (s->kind == SEGMENT_BYTES)
            memcpy(out, s->u.bytes + (pos - s->off), n);
        else if (got == 0 && copy_chunk(img, r, s, pos, out, n) != 0)
            return -EIO;
        else if (got == 0)
            readahead_read_through(r, &io, i - 1, n, from);
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
    uint64_t from;
    int sequential = readahead_access(r, off, len, &from);
    struct policy_ctx ctx = { img, r };
    struct readahead_io io = policy_io(&ctx);
    if (r->prefetch)
        readahead_follow(r, &io, i, sequential);
    if (hold_chunk(img, r, s, &v->entry) != 0)
        return -EIO;
    readahead_read_through(r, &io, i, len, from); /* a drop leaves at image_view_release */
    if (!chunk_entry_data(v->entry)) {            /* a file: no bytes in memory to point at */
        chunk_entry_put(r->cache, v->entry);
        return 0;
    }
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

/* ---- a read as pieces of memory ---- */

/* A gap between segments reads as zeros: up to this many per piece. */
#define ZEROS_LEN 65536
static const unsigned char zeros[ZEROS_LEN];

/* The pieces [off, off + len) takes from segment i on (len within the file), or
 * IMAGE_PIECES_MAX + 1 once there are more. */
static size_t count_pieces(const struct segment *segs, size_t n_segs, size_t i, uint64_t off,
                           size_t len)
{
    size_t n = 0;
    uint64_t pos = off, end = off + len;
    while (pos < end && n <= IMAGE_PIECES_MAX) {
        if (i >= n_segs || segs[i].off > pos) {
            uint64_t to = i < n_segs && segs[i].off < end ? segs[i].off : end;
            n += (size_t)((to - pos + ZEROS_LEN - 1) / ZEROS_LEN);
            pos = to;
            continue;
        }
        pos = segs[i].off + segs[i].len;
        i++;
        n++;
    }
    return n;
}

static void add_piece(struct image_pieces *p, const void *data, uint64_t n)
{
    p->iov[p->n_iov].iov_base = (void *)(uintptr_t)data; /* writev only reads it */
    p->iov[p->n_iov].iov_len = (size_t)n;
    p->fd[p->n_iov] = -1;
    p->n_iov++;
}

static void add_file_piece(struct image_pieces *p, int fd, uint64_t off, uint64_t n)
{
    p->iov[p->n_iov].iov_base = NULL;
    p->iov[p->n_iov].iov_len = (size_t)n;
    p->fd[p->n_iov] = fd;
    p->fd_off[p->n_iov] = off;
    p->n_iov++;
    p->n_files++;
}

int image_read_pieces(struct image *img, struct image_reader *r, uint64_t off, size_t len,
                      struct image_pieces *p)
{
    uint64_t size = extent_size(img->map);
    p->n_iov = p->n_held = p->n_files = 0;
    p->cache = r->cache;
    if (off >= size || len == 0)
        return 0;
    if (len > size - off)
        len = (size_t)(size - off);
    size_t n_segs, i = extent_find(img->map, off);
    const struct segment *segs = extent_segments(img->map, &n_segs);
    if (count_pieces(segs, n_segs, i, off, len) > IMAGE_PIECES_MAX)
        return 0;
    struct policy_ctx ctx = { img, r };
    struct readahead_io io = policy_io(&ctx);
    if (brushed(img, r, &io, i, off, len) != n_segs)
        return 0; /* image_read copies: the brushed bytes have no home in the cache */
    uint64_t from;
    int sequential = readahead_access(r, off, len, &from), first_chunk = 1;
    for (uint64_t done = 0; done < len;) {
        uint64_t pos = off + done;
        if (i >= n_segs || segs[i].off > pos) {
            uint64_t to =
                i < n_segs && segs[i].off - pos < len - done ? segs[i].off - pos : len - done;
            to = to < ZEROS_LEN ? to : ZEROS_LEN;
            add_piece(p, zeros, to);
            done += to;
            continue;
        }
        const struct segment *s = &segs[i++];
        uint64_t n = s->off + s->len - pos < len - done ? s->off + s->len - pos : len - done;
        if (s->kind == SEGMENT_BYTES) {
            add_piece(p, s->u.bytes + (pos - s->off), n);
        } else {
            if (first_chunk && r->prefetch)
                readahead_follow(r, &io, readahead_subject(&io, i - 1, off, len), sequential);
            first_chunk = 0; /* once per read */
            struct chunk_entry *e;
            if (hold_chunk(img, r, s, &e) != 0) {
                image_pieces_release(p);
                return -EIO;
            }
            p->held[p->n_held++] = e;
            const unsigned char *data = chunk_entry_data(e);
            struct chunk_file file = chunk_entry_file(e);
            if (!data && check_chunk_file(img, s, file) != 0) {
                image_pieces_release(p);
                return -EIO;
            }
            if (data)
                add_piece(p, data + (pos - s->off), n);
            else
                add_file_piece(p, file.fd, pos - s->off, n);
            readahead_read_through(r, &io, i - 1, n, from); /* a drop leaves at release */
        }
        done += n;
    }
    return 1;
}

void image_pieces_release(struct image_pieces *p)
{
    for (size_t k = 0; k < p->n_held; k++)
        chunk_entry_put(p->cache, p->held[k]);
    p->n_held = p->n_iov = p->n_files = 0;
}
