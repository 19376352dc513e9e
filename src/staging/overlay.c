/* overlay: see overlay.h. */
#include "overlay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5osfs/util/grow.h"

#include "h5osfs/util/log.h"

#define OVERLAY_PIECE (1u << 20) /* bytes copied at a time */

struct range {
    uint64_t off, len;
};

struct overlay {
    struct image *base;
    struct ingest_kept *kept; /* what the base's file did not show (image_left_out) */
    size_t n_kept;
    char root[SCHEMA_ID_BUF];
    int fd; /* the staged file */
    struct image_reader reader;
    struct range *clean; /* sorted, disjoint */
    size_t n, cap;
    int unsaved; /* a range without a whole block went dirty since overlay_saved */
    /* image_only_chunks_differ of the staged file, asked once per ingest (it reads the whole
     * file but its chunks, and clean_chunks asks for every dataset): < 0 not asked yet. The
     * ingest only copies the image's own bytes into the file, which keeps the answer. */
    int only_chunks_differ;
};

int overlay_new(struct image *base, const char *root, struct chunk_cache *cache, int fd,
                struct overlay **out)
{
    struct overlay *o = calloc(1, sizeof *o);
    if (!o)
        return -ENOMEM;
    image_get(base);
    o->base = base;
    o->fd = fd;
    o->only_chunks_differ = -1;
    snprintf(o->root, sizeof o->root, "%s", root);
    o->reader.cache = cache;
    o->reader.writer_base = 1;
    *out = o;
    return 0;
}

void overlay_free(struct overlay *o)
{
    if (!o)
        return;
    free(o->kept);
    image_put(o->base);
    free(o->clean);
    free(o);
}

const char *overlay_root(const struct overlay *o)
{
    return o->root;
}

static int add_clean(void *ctx, uint64_t off, uint64_t len)
{
    struct overlay *o = ctx;
    if (o->n == o->cap) {
        struct range *r = grow_array(o->clean, &o->cap, o->cap + 1, sizeof *r, 64);
        if (!r)
            return -ENOMEM;
        o->clean = r;
    }
    o->clean[o->n++] = (struct range){ off, len };
    return 0;
}

/* The first clean range that ends after off. */
static size_t first_after(const struct overlay *o, uint64_t off)
{
    size_t lo = 0, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->clean[mid].off + o->clean[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int write_all(int fd, const unsigned char *buf, size_t len, uint64_t off)
{
    while (len > 0) {
        ssize_t w = pwrite(fd, buf, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        buf += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int all_zero(const unsigned char *p, size_t n)
{
    return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* The base's bytes [off, end) into fd (zeros are left as holes: fd starts empty). */
static int copy_base(struct overlay *o, uint64_t off, uint64_t end, int skip_zeros)
{
    unsigned char *buf = malloc(OVERLAY_PIECE);
    int rc = buf ? 0 : -ENOMEM;
    while (rc == 0 && off < end) {
        size_t want = end - off < OVERLAY_PIECE ? (size_t)(end - off) : OVERLAY_PIECE;
        ssize_t n = image_read(o->base, &o->reader, off, buf, want);
        if (n <= 0) {
            rc = n < 0 ? (int)n : -EIO;
            break;
        }
        if (!skip_zeros || !all_zero(buf, (size_t)n))
            rc = write_all(o->fd, buf, (size_t)n, off);
        off += (uint64_t)n;
    }
    free(buf);
    return rc;
}

/* The whole file-system blocks inside [off, off+len): [*a, *b), empty when a >= b. */
static void inner_blocks(int fd, uint64_t off, uint64_t len, uint64_t *a, uint64_t *b)
{
    struct stat sb;
    uint64_t bs = fstat(fd, &sb) == 0 && sb.st_blksize > 0 ? (uint64_t)sb.st_blksize : 4096;
    *a = (off + bs - 1) / bs * bs;
    *b = (off + len) / bs * bs;
}

/* 1 when a whole block inside [off, off+len) holds data: the range was written, since a write
 * into a clean range writes all of it (materialize). 0 when none does, or none is whole. */
static int written(int fd, uint64_t off, uint64_t len)
{
    uint64_t a, b;
    inner_blocks(fd, off, len, &a, &b);
    if (a >= b)
        return 0;
    off_t data = lseek(fd, (off_t)a, SEEK_DATA);
    return data >= 0 && (uint64_t)data < b;
}

/* Does fd keep holes? Without them a crash could not tell written ranges from clean ones. */
static int keeps_holes(int fd, const struct overlay *o)
{
    for (size_t i = 0; i < o->n; i++) {
        uint64_t a, b;
        inner_blocks(fd, o->clean[i].off, o->clean[i].len, &a, &b);
        if (a < b)
            return !written(fd, o->clean[i].off, o->clean[i].len);
    }
    return 1;
}

int overlay_fill(struct overlay *o, uint64_t *size)
{
    int fd = o->fd;
    uint64_t end = image_size(o->base), at = 0;
    o->n = 0;
    int rc = image_for_each_chunk(o->base, add_clean, o);
    for (size_t i = 0; rc == 0 && i <= o->n; i++) {
        uint64_t next = i < o->n ? o->clean[i].off : end;
        rc = copy_base(o, at, next, 1);
        at = i < o->n ? o->clean[i].off + o->clean[i].len : end;
    }
    if (rc == 0 && ftruncate(fd, (off_t)end) != 0)
        rc = -errno;
    if (rc == 0 && !keeps_holes(fd, o)) {
        /* the cache directory's file system stores no holes: copy every chunk now */
        for (size_t i = 0; rc == 0 && i < o->n; i++)
            rc = copy_base(o, o->clean[i].off, o->clean[i].off + o->clean[i].len, 0);
        o->n = 0;
    }
    if (rc == 0)
        *size = end;
    return rc;
}

ssize_t overlay_read(struct overlay *o, uint64_t size, void *buf, size_t len, uint64_t off)
{
    if (off >= size)
        return 0;
    if (len > size - off)
        len = (size_t)(size - off);
    size_t done = 0, i = first_after(o, off);
    while (done < len) {
        uint64_t at = off + done;
        size_t want = len - done;
        ssize_t n;
        while (i < o->n && o->clean[i].off + o->clean[i].len <= at)
            i++;
        if (i < o->n && o->clean[i].off <= at) {
            uint64_t room = o->clean[i].off + o->clean[i].len - at;
            n = image_read(o->base, &o->reader, at, (char *)buf + done,
                           want < room ? want : (size_t)room);
        } else {
            if (i < o->n && o->clean[i].off - at < want)
                want = (size_t)(o->clean[i].off - at);
            n = pread(o->fd, (char *)buf + done, want, (off_t)at);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
        }
        if (n < 0)
            return n;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

static void drop(struct overlay *o, size_t i)
{
    memmove(&o->clean[i], &o->clean[i + 1], (o->n - i - 1) * sizeof *o->clean);
    o->n--;
}

/* Copy clean range i into fd (up to end) and make it dirty. */
static int materialize(struct overlay *o, size_t i, uint64_t end)
{
    struct range r = o->clean[i];
    uint64_t stop = r.off + r.len < end ? r.off + r.len : end;
    int rc = copy_base(o, r.off, stop, 0);
    if (rc != 0)
        return rc;
    drop(o, i);
    return 0;
}

/* Can a restore tell that r was written (overlay_restore)? Only from data in a whole
 * file-system block inside it: a range without one must be saved as dirty instead, and holds
 * the base's bytes (copied in) until the write lands, so that any crash finds it whole. */
static int tellable(const struct overlay *o, struct range r)
{
    uint64_t a, b;
    inner_blocks(o->fd, r.off, r.len, &a, &b);
    return a < b;
}

int overlay_before_write(struct overlay *o, uint64_t off, uint64_t len)
{
    size_t i = first_after(o, off);
    while (i < o->n && o->clean[i].off < off + len) {
        struct range r = o->clean[i];
        int rc = 0, telling = tellable(o, r);
        if (telling && r.off >= off && r.off + r.len <= off + len)
            drop(o, i); /* written whole: nothing of the base is kept */
        else
            rc = materialize(o, i, UINT64_MAX);
        if (rc != 0)
            return rc;
        o->unsaved |= !telling;
    }
    return o->unsaved;
}

int overlay_before_truncate(struct overlay *o, uint64_t size)
{
    size_t i = first_after(o, size);
    struct range r = i < o->n ? o->clean[i] : (struct range){ 0, 0 };
    int across = i < o->n && r.off < size;
    int rc = across ? materialize(o, i, size) : 0;
    if (rc == 0 && across)
        o->unsaved |= !tellable(o, (struct range){ r.off, size - r.off });
    if (rc == 0)
        o->n = first_after(o, size);
    return rc != 0 ? rc : o->unsaved;
}

void overlay_saved(struct overlay *o)
{
    o->unsaved = 0;
}

static const char *object_id(void *ctx, uint64_t addr)
{
    struct overlay *o = ctx;
    return image_object_id(o->base, addr);
}

/* 2: [addr, addr+len) is still the base's chunk idx of dataset_id, stored as the object
 * whose key is given back; 3: the same, a whole object of the base version's pool (no key);
 * 1: clean, but not such a chunk (a *_REF chunk, another chunk);
 * 0: written (with materialize, clean ranges it touches are copied in first, so the file
 * holds every byte of the range). */
static int chunk_state(void *ctx, uint64_t addr, uint64_t len, const char *dataset_id,
                       const uint64_t *idx, int rank, int materialize_, char *key, size_t key_len)
{
    struct overlay *o = ctx;
    size_t i = first_after(o, addr);
    if (i < o->n && o->clean[i].off == addr && o->clean[i].len == len) {
        int state = image_chunk_source(o->base, addr, dataset_id, idx, rank, key, key_len) ? 2
                    : image_chunk_pooled(o->base, addr, dataset_id, idx, rank)             ? 3
                                                                                           : 1;
        /* the caller reads the range from the file next (a *_REF chunk of a dataset that
         * became an ordinary one, a chunk of a grid that changed): it must be there */
        int rc = materialize_ ? materialize(o, i, UINT64_MAX) : 0;
        return rc ? rc : state;
    }
    while (materialize_ && i < o->n && o->clean[i].off < addr + len) {
        int rc = materialize(o, i, UINT64_MAX);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A base chunk extent the writer wrote into (or truncated away): no longer clean whole. */
static int written_extent(void *ctx, uint64_t off, uint64_t len)
{
    const struct overlay *o = ctx;
    size_t i = first_after(o, off);
    return !(i < o->n && o->clean[i].off == off && o->clean[i].len == len);
}

#define OVERLAY_CHECKS 8 /* chunk objects asked for at once before a commit */

static int written_chunks_unchanged(void *ctx)
{
    struct overlay *o = ctx;
    return image_check_chunks(o->base, written_extent, o, OVERLAY_CHECKS);
}

int overlay_materialize_all(struct overlay *o)
{
    int rc = 0;
    while (rc == 0 && o->n > 0)
        rc = materialize(o, 0, UINT64_MAX);
    return rc;
}

static const enum ingest_kept_kind kept_kinds[] = {
    [IMAGE_OMIT_OBJECT] = INGEST_KEPT_OBJECT, [IMAGE_OMIT_PLACEHOLDER] = INGEST_KEPT_PLACEHOLDER,
    [IMAGE_OMIT_CHUNK] = INGEST_KEPT_CHUNK,   [IMAGE_OMIT_ATTRIBUTE] = INGEST_KEPT_ATTRIBUTE,
    [IMAGE_OMIT_LINK] = INGEST_KEPT_LINK,
};

/* The image's omissions in ingest's words (the strings stay the image's). */
static int kept_of(struct overlay *o)
{
    size_t n;
    const struct image_omission *om = image_left_out(o->base, &n);
    if (o->kept || n == 0)
        return 0;
    if (!(o->kept = calloc(n, sizeof *o->kept)))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        o->kept[i] = (struct ingest_kept){ kept_kinds[om[i].kind], om[i].id, om[i].name };
    o->n_kept = n;
    return 0;
}

struct clean_walk {
    struct overlay *o;
    const char *dataset_id;
    int (*fn)(void *fctx, const uint64_t *idx, int rank, int state, const char *key);
    void *fctx;
};

static int tell_chunk(void *ctx, uint64_t off, uint64_t len, const uint64_t *idx, int rank)
{
    struct clean_walk *w = ctx;
    char key[STORE_KEY_MAX + 1] = "";
    int state = chunk_state(w->o, off, len, w->dataset_id, idx, rank, 0, key, sizeof key);
    return state < 0 ? state : w->fn(w->fctx, idx, rank, state, key);
}

/* Only where nothing but chunk bytes was written in place (no index node, no allocation)
 * is every chunk extent of the base still its chunk: then each is told with its state. */
static int clean_chunks(void *ctx, const char *dataset_id,
                        int (*fn)(void *fctx, const uint64_t *idx, int rank, int state,
                                  const char *key),
                        void *fctx)
{
    struct overlay *o = ctx;
    if (o->only_chunks_differ < 0)
        o->only_chunks_differ = image_only_chunks_differ(o->base, o->fd);
    int same = o->only_chunks_differ; /* a failure (-errno) is asked again */
    if (same != 1)
        return same;
    struct clean_walk w = { o, dataset_id, fn, fctx };
    int rc = image_for_each_chunk_of(o->base, dataset_id, tell_chunk, &w);
    return rc ? rc : 1;
}

int overlay_ingest_base(struct overlay *o, struct ingest_base *out)
{
    int rc = kept_of(o);
    o->only_chunks_differ = -1; /* the file may have changed since the last ingest */
    *out = (struct ingest_base){ .root = o->root,
                                 .kept = o->kept,
                                 .n_kept = o->n_kept,
                                 .object_id = object_id,
                                 .chunk_state = chunk_state,
                                 .clean_chunks = clean_chunks,
                                 .written_chunks_unchanged = written_chunks_unchanged,
                                 .ctx = o };
    return rc;
}

int overlay_save(const struct overlay *o, char **text)
{
    size_t cap = o->n * 44 + SCHEMA_ID_BUF + 8, used = 0;
    char *out = malloc(cap);
    if (!out)
        return -ENOMEM;
    used = (size_t)snprintf(out, cap, "root %s\n", o->root);
    for (size_t i = 0; i < o->n; i++)
        used += (size_t)snprintf(out + used, cap - used, "%llu %llu\n",
                                 (unsigned long long)o->clean[i].off,
                                 (unsigned long long)o->clean[i].len);
    *text = out;
    return 0;
}

char *overlay_saved_root(const char *text)
{
    char root[SCHEMA_ID_BUF];
    if (sscanf(text, "root %38s\n", root) != 1 || schema_id_class(root) != 'g')
        return NULL;
    return strdup(root);
}

int overlay_restore(struct overlay *o, const char *text)
{
    struct overlay all = { .base = o->base };
    const char *p = strchr(text, '\n');
    int rc = p ? image_for_each_chunk(o->base, add_clean, &all) : -EINVAL;
    o->n = 0;
    for (p = p ? p + 1 : p; rc == 0 && *p;) {
        unsigned long long off, len;
        int used = 0;
        if (sscanf(p, "%llu %llu\n%n", &off, &len, &used) != 2 || used == 0) {
            rc = -EINVAL;
            break;
        }
        p += used;
        size_t i = first_after(&all, off);
        if (i >= all.n || all.clean[i].off != off || all.clean[i].len != len)
            rc = -EINVAL; /* the base has no such chunk extent: it changed */
        else if (!written(o->fd, off, len))
            rc = add_clean(o, off, len);
    }
    free(all.clean);
    return rc;
}
