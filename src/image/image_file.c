/*
 * image_file: a built image kept on local disk (image_file.h).
 *
 * Layout: "H5OSFSIM" and a format number, the stamp (32 bytes), then the image field by field
 * (little-endian integers, strings and byte runs with their lengths). Reading checks every
 * length against what is left, so a truncated or corrupt file is a miss, never a crash.
 */
#include "image_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/why.h"
#include "image_check.h"

#define FILE_MAGIC "H5OSFSIM"
/* 2: a dataset says whether its pieces are whole pool objects; 3: and which pool file its
 * version kept, with what etag */
#define FILE_FORMAT 3u
#define FILE_MAX (1ull << 32) /* an image's metadata is far smaller */

/* ---- writing ---- */

struct out {
    unsigned char *p;
    size_t len, cap;
    int failed;
};

static void put(struct out *o, const void *data, size_t n)
{
    if (o->failed || n == 0)
        return; /* data may be NULL then, which memcpy must not get */
    if (o->len + n > o->cap) {
        unsigned char *bigger = grow_array(o->p, &o->cap, o->len + n, 1, 65536);
        if (!bigger) {
            o->failed = 1;
            return;
        }
        o->p = bigger;
    }
    memcpy(o->p + o->len, data, n);
    o->len += n;
}

static void put_u64(struct out *o, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put(o, b, 8);
}

static void put_str(struct out *o, const char *s)
{
    put_u64(o, s ? strlen(s) + 1 : 0); /* 0: NULL */
    if (s)
        put(o, s, strlen(s) + 1);
}

static void put_dataset(struct out *o, const struct image_dataset *d)
{
    put_str(o, d->id);
    put_str(o, d->path);
    put_str(o, d->key_prefix);
    put_u64(o, (uint64_t)d->origin);
    put_u64(o, (uint64_t)d->rank);
    put_u64(o, (uint64_t)d->partition_count);
    for (int k = 0; k < IMAGE_MAX_RANK; k++) {
        put_u64(o, d->dims[k]);
        put_u64(o, d->chunk_dims[k]);
        put_u64(o, d->grid[k]);
        put_u64(o, d->sub_dims[k]);
    }
    put_u64(o, d->itemsize);
    put_u64(o, d->chunk_bytes);
    put(o, &d->codec, sizeof d->codec); /* plain data, read back by the same build */
    put_u64(o, d->fill ? d->itemsize : 0);
    if (d->fill)
        put(o, d->fill, d->itemsize);
    put_u64(o, d->n_uris);
    for (size_t i = 0; i < d->n_uris; i++)
        put_str(o, d->uris[i]);
    put_u64(o, d->contig_off);
    put_u64(o, d->contig_size);
    put_u64(o, d->n_pieces);
    put(o, d->pieces, d->n_pieces * sizeof *d->pieces);
    put_u64(o, d->n_sub);
    put_u64(o, (uint64_t)d->pooled);
    put_str(o, d->kept_file);
    put_str(o, d->kept_etag);
}

static void put_image(struct out *o, const struct image *img)
{
    size_t n;
    const struct segment *segs = extent_segments(img->map, &n);
    put_u64(o, extent_size(img->map));
    put_u64(o, n);
    for (size_t i = 0; i < n; i++) {
        put_u64(o, segs[i].off);
        put_u64(o, segs[i].len);
        put_u64(o, segs[i].kind);
        put_u64(o, segs[i].dset);
        if (segs[i].kind == SEGMENT_BYTES)
            put(o, segs[i].u.bytes, segs[i].len);
        else
            put_u64(o, segs[i].u.chunk);
    }
    put_u64(o, img->n_datasets);
    for (size_t i = 0; i < img->n_datasets; i++)
        put_dataset(o, &img->datasets[i]);
    put_u64(o, img->n_objects);
    for (size_t i = 0; i < img->n_objects; i++) {
        put_u64(o, img->objects[i].addr);
        put_str(o, img->objects[i].id);
    }
    put_u64(o, img->n_omissions);
    for (size_t i = 0; i < img->n_omissions; i++) {
        const struct image_omission *m = &img->omissions[i];
        put_u64(o, (uint64_t)m->kind);
        put_str(o, m->id);
        put_str(o, m->name);
        put_str(o, m->path);
        put_str(o, m->why);
    }
}

static int write_file(const char *dir, const char *name, const struct out *o)
{
    char tmp[4096], final[4096];
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)getpid();
    snprintf(final, sizeof final, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.%016llx", dir, name, (unsigned long long)r);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : 0;
    for (size_t done = 0; rc == 0 && done < o->len;) {
        ssize_t w = write(fd, o->p + done, o->len - done);
        if (w <= 0)
            rc = w < 0 && errno != EINTR ? -errno : w == 0 ? -EIO : 0;
        else
            done += (size_t)w;
    }
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, final) != 0) /* readers see the old file or the new one */
        rc = -errno;
    if (rc != 0 && fd >= 0)
        unlink(tmp);
    return rc;
}

int image_file_encode(const unsigned char stamp[32], const struct image *img, unsigned char **out,
                      size_t *len)
{
    struct out o = { 0 };
    uint64_t format = FILE_FORMAT;
    put(&o, FILE_MAGIC, 8);
    put_u64(&o, format);
    put(&o, stamp, 32);
    put_image(&o, img);
    if (o.failed) {
        free(o.p);
        return -ENOMEM;
    }
    *out = o.p;
    *len = o.len;
    return 0;
}

int image_file_save(const char *dir, const char *name, const unsigned char stamp[32],
                    const struct image *img)
{
    struct out o = { 0 };
    int rc = image_file_encode(stamp, img, &o.p, &o.len);
    if (rc == 0)
        rc = write_file(dir, name, &o);
    free(o.p);
    if (rc != 0)
        log_debug("%s: the built file is not kept in %s: %s", img->domain_path, dir, strerror(-rc));
    return rc;
}

/* ---- reading ---- */

struct in {
    const unsigned char *p;
    size_t left;
    int bad;
};

static const unsigned char *take(struct in *in, size_t n)
{
    if (in->bad || n > in->left) {
        in->bad = 1;
        return NULL;
    }
    const unsigned char *at = in->p;
    in->p += n;
    in->left -= n;
    return at;
}

static uint64_t get_u64(struct in *in)
{
    const unsigned char *b = take(in, 8);
    uint64_t v = 0;
    for (int i = 0; b && i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

/* A copy of n bytes (n may be 0: a 1-byte buffer), or NULL (bad input or no memory). */
static void *get_copy(struct in *in, uint64_t n)
{
    const unsigned char *at = n <= in->left ? take(in, (size_t)n) : (in->bad = 1, NULL);
    void *copy = at ? malloc(n ? (size_t)n : 1) : NULL;
    if (copy)
        memcpy(copy, at, (size_t)n);
    else
        in->bad = 1;
    return copy;
}

static char *get_str(struct in *in)
{
    uint64_t n = get_u64(in);
    if (n == 0)
        return NULL;
    char *s = get_copy(in, n);
    if (s && s[n - 1] != '\0') {
        free(s);
        in->bad = 1;
        return NULL;
    }
    return s;
}

/* A number that must be at most max (what a narrower field of the image holds): larger is
 * corrupt, never cut down to another value. */
static uint64_t get_upto(struct in *in, uint64_t max)
{
    uint64_t v = get_u64(in);
    if (v > max)
        in->bad = 1;
    return in->bad ? 0 : v;
}

/* A count of items each taking at least min bytes: more than the file holds is corrupt. */
static uint64_t get_count(struct in *in, size_t min)
{
    uint64_t n = get_u64(in);
    if (n > in->left / (min ? min : 1))
        in->bad = 1;
    return in->bad ? 0 : n;
}

static void get_dataset(struct in *in, struct image_dataset *d)
{
    char *prefix;
    d->id = get_str(in);
    d->path = get_str(in);
    prefix = get_str(in);
    snprintf(d->key_prefix, sizeof d->key_prefix, "%s", prefix ? prefix : "");
    free(prefix);
    d->origin = (enum chunk_origin)get_upto(in, ORIGIN_REF_PIECES);
    d->rank = (int)get_upto(in, IMAGE_MAX_RANK);
    d->partition_count = (int)get_upto(in, INT_MAX);
    for (int k = 0; k < IMAGE_MAX_RANK; k++) {
        d->dims[k] = get_u64(in);
        d->chunk_dims[k] = get_u64(in);
        d->grid[k] = get_u64(in);
        d->sub_dims[k] = get_u64(in);
    }
    d->itemsize = (size_t)get_upto(in, SIZE_MAX);
    d->chunk_bytes = get_u64(in);
    const unsigned char *codec = take(in, sizeof d->codec);
    if (codec)
        memcpy(&d->codec, codec, sizeof d->codec);
    uint64_t fill = get_u64(in);
    if (fill && fill == d->itemsize)
        d->fill = get_copy(in, fill);
    else if (fill)
        in->bad = 1;
    d->n_uris = (size_t)get_count(in, 8);
    if (d->n_uris && !(d->uris = calloc(d->n_uris, sizeof *d->uris)))
        in->bad = 1;
    d->cap_uris = d->uris ? d->n_uris : 0;
    for (size_t i = 0; d->uris && i < d->n_uris; i++)
        d->uris[i] = get_str(in);
    d->contig_off = get_u64(in);
    d->contig_size = get_u64(in);
    d->n_pieces = (size_t)get_count(in, sizeof *d->pieces);
    if (d->n_pieces)
        d->pieces = get_copy(in, d->n_pieces * sizeof *d->pieces);
    d->n_sub = (uint32_t)get_upto(in, UINT32_MAX);
    d->pooled = (int)get_upto(in, 1);
    d->kept_file = get_str(in);
    d->kept_etag = get_str(in);
    if ((d->kept_file == NULL) != (d->kept_etag == NULL))
        in->bad = 1;
    if (d->rank < 0 || d->rank > IMAGE_MAX_RANK || d->origin > ORIGIN_REF_PIECES || !d->id ||
        !d->path)
        in->bad = 1;
}

static int get_segments(struct in *in, struct image *img)
{
    uint64_t size = get_u64(in), n = get_count(in, 32);
    struct segment *segs = calloc(n ? n : 1, sizeof *segs);
    if (!segs)
        return -ENOMEM;
    uint64_t end = 0;
    for (uint64_t i = 0; i < n && !in->bad; i++) {
        struct segment *s = &segs[i];
        s->off = get_u64(in);
        s->len = get_u64(in);
        s->kind = (uint32_t)get_upto(in, UINT32_MAX);
        s->dset = (uint32_t)get_upto(in, UINT32_MAX);
        if (s->kind == SEGMENT_BYTES)
            s->u.bytes = get_copy(in, s->len);
        else if (s->kind == SEGMENT_CHUNK)
            s->u.chunk = get_u64(in);
        if ((s->kind != SEGMENT_BYTES && s->kind != SEGMENT_CHUNK) || s->off < end || s->len == 0 ||
            s->len > size || s->off > size - s->len)
            in->bad = 1;
        end = s->off + s->len;
    }
    int rc = in->bad ? -EINVAL : extent_map_restore(img->map, segs, (size_t)n, size);
    if (rc != 0) {
        for (uint64_t i = 0; i < n; i++)
            if (segs[i].kind == SEGMENT_BYTES)
                free((void *)segs[i].u.bytes);
        free(segs);
    }
    return rc;
}

static int get_image(struct in *in, struct image *img)
{
    int rc = get_segments(in, img);
    if (rc != 0)
        return rc;
    img->n_datasets = (size_t)get_count(in, 64);
    if (!(img->datasets = calloc(img->n_datasets ? img->n_datasets : 1, sizeof *img->datasets)))
        return -ENOMEM;
    for (size_t i = 0; i < img->n_datasets && !in->bad; i++)
        get_dataset(in, &img->datasets[i]);
    img->n_objects = (size_t)get_count(in, 16);
    if (!(img->objects = calloc(img->n_objects ? img->n_objects : 1, sizeof *img->objects)))
        return -ENOMEM;
    for (size_t i = 0; i < img->n_objects && !in->bad; i++) {
        img->objects[i].addr = get_u64(in);
        img->objects[i].id = get_str(in);
        if (!img->objects[i].id || (i > 0 && img->objects[i].addr <= img->objects[i - 1].addr))
            in->bad = 1;
    }
    img->n_omissions = (size_t)get_count(in, 40);
    if (img->n_omissions && !(img->omissions = calloc(img->n_omissions, sizeof *img->omissions)))
        return -ENOMEM;
    for (size_t i = 0; i < img->n_omissions && !in->bad; i++) {
        struct image_omission *m = &img->omissions[i];
        m->kind = (enum image_omission_kind)get_upto(in, IMAGE_OMIT_LINK);
        m->id = get_str(in);
        m->name = get_str(in);
        m->path = get_str(in);
        m->why = get_str(in);
    }
    return in->bad || in->left ? -EINVAL : 0; /* then image_check: what the fields mean */
}

static int read_whole(const char *path, unsigned char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    int rc = fstat(fd, &sb) == 0 ? 0 : -errno;
    if (rc == 0 && (uint64_t)sb.st_size > FILE_MAX)
        rc = -EFBIG;
    unsigned char *buf = rc == 0 ? malloc(sb.st_size ? (size_t)sb.st_size : 1) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    for (size_t done = 0; rc == 0 && done < (size_t)sb.st_size;) {
        ssize_t n = pread(fd, buf + done, (size_t)sb.st_size - done, (off_t)done);
        if (n <= 0)
            rc = n < 0 && errno != EINTR ? -errno : n == 0 ? -EIO : 0;
        else
            done += (size_t)n;
    }
    close(fd);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = (size_t)sb.st_size;
    return 0;
}

int image_file_decode(const unsigned char *buf, size_t len, const unsigned char stamp[32],
                      struct image *img, const char *what)
{
    struct in in = { buf, len, 0 };
    const unsigned char *magic = take(&in, 8);
    uint64_t format = get_u64(&in);
    const unsigned char *was = take(&in, 32);
    char why[256] = "";
    int rc;
    if (!magic || memcmp(magic, FILE_MAGIC, 8) != 0 || format != FILE_FORMAT || !was)
        rc = why_reject(why, sizeof why, "not an image of this format");
    else if (memcmp(was, stamp, 32) != 0)
        rc = -ENOENT; /* another version of the domain: built again */
    else if ((rc = get_image(&in, img)) == -EINVAL)
        why_set(why, sizeof why, "truncated or malformed");
    if (rc == 0)
        rc = image_check(img, why, sizeof why);
    if (rc == -EINVAL)
        log_warn("%s: not a usable built file: %s: built again", what, why);
    return rc == -ENOMEM ? rc : rc ? -ENOENT : 0;
}

int image_file_load(const char *dir, const char *name, const unsigned char stamp[32],
                    struct image *img)
{
    char path[4096];
    unsigned char *buf = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = read_whole(path, &buf, &len);
    if (rc != 0)
        return rc == -ENOMEM ? rc : -ENOENT;
    rc = image_file_decode(buf, len, stamp, img, path);
    free(buf);
    return rc;
}
