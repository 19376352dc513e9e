/* refs_read: a read of a linked dataset's chunk: each piece fetched with a ranged GET and
 * decoded as HDF5 filter output into its place, or the rows of a contiguous range gathered;
 * absent pieces are the fill value. See refs.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/pool.h"
#include "h5osfs/util/log.h"
#include "refs_int.h"

/* Copy a block of `dims` elements (row-major) into buf (row-major `into`) at element `at`. */
static void place_block(unsigned char *dst, const uint64_t *into, const unsigned char *src,
                        const uint64_t *dims, const uint64_t *at, int rank, size_t itemsize)
{
    uint64_t rows = 1, idx[IMAGE_MAX_RANK] = { 0 };
    for (int k = 0; k < rank - 1; k++)
        rows *= dims[k];
    size_t row_bytes = dims[rank - 1] * itemsize;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t off = 0;
        for (int k = 0; k < rank; k++)
            off = off * into[k] + at[k] + (k < rank - 1 ? idx[k] : 0);
        memcpy(dst + off * itemsize, src + r * row_bytes, row_bytes);
        for (int k = rank - 2; k >= 0 && ++idx[k] == dims[k]; k--)
            idx[k] = 0;
    }
}

static int fetch_range(const struct chunk_job *job, uint32_t uri, uint64_t off, uint64_t len,
                       struct store_buf *out)
{
    const struct image_dataset *ds = job->ds;
    if (uri >= ds->n_uris || len > REF_RANGE_MAX)
        return -EIO;
    int rc = store_get_range(job->img->store, ds->uris[uri], off, len, out);
    if (rc == 0 && out->len != len) {
        log_error("%s: %s: %s ends at %" PRIu64 ", before the linked bytes %" PRIu64 "+%" PRIu64,
                  job->img->domain_path, ds->path, ds->uris[uri], off + out->len, off, len);
        store_buf_free(out);
        return -EIO;
    }
    /* a version's pool file is named by no digest of its bytes: its etag tells (pool.h) */
    if (rc == 0 && ds->kept_etag && strcmp(ds->uris[uri], ds->kept_file) == 0 &&
        strcmp(out->etag, ds->kept_etag) != 0) {
        log_error("%s: %s: pool file %s is not the one the version kept (etag %s, kept %s): EIO",
                  job->img->domain_path, ds->path, ds->uris[uri], out->etag, ds->kept_etag);
        store_buf_free(out);
        return -EIO;
    }
    if (rc == -ENOENT)
        log_error("%s: %s: linked file %s is missing", job->img->domain_path, ds->path,
                  ds->uris[uri]);
    return rc ? -EIO : 0;
}

/* A piece of a pool object must be bytes of the object its key names (pool.h): a bucket
 * writer could put others there, under every version that shares the chunk. 0 or -EIO. */
static int check_pooled(const struct chunk_job *job, const char *key, const struct store_buf *raw)
{
    char why[200] = "";
    if (!schema_pool_key_md5(key) ||
        schema_pool_bytes_check(key, raw->data, raw->len, raw->etag, why, sizeof why) == 0)
        return 0;
    log_error("%s: %s: pool object %s: %s: EIO", job->img->domain_path, job->ds->path, key, why);
    return -EIO;
}

/* Decode piece p from raw, the bytes of its object from span_off on. 0 or -EIO (logged). */
static int decode_piece(const struct chunk_job *job, const struct ref_piece *p,
                        const struct store_buf *raw, uint64_t span_off, unsigned char *dst,
                        size_t dst_len)
{
    char why[160] = "";
    if (p->off < span_off || p->off - span_off > raw->len ||
        raw->len - (p->off - span_off) < p->size)
        return -EIO; /* not within what was read: cannot happen (piece_run_from) */
    int rc = codec_decode(&job->ds->codec, raw->data + (p->off - span_off), p->size, dst, dst_len,
                          why, sizeof why);
    if (rc != 0)
        log_error("%s: %s: linked chunk %s@%" PRIu64 "+%" PRIu32 ": %s", job->img->domain_path,
                  job->ds->path, job->ds->uris[p->uri], p->off, p->size, why);
    return rc ? -EIO : 0;
}

static int load_piece(const struct chunk_job *job, const struct ref_piece *p, unsigned char *dst,
                      size_t dst_len)
{
    struct store_buf raw = { 0 };
    int rc = fetch_range(job, p->uri, p->off, p->size, &raw);
    if (rc != 0)
        return rc;
    if (check_pooled(job, job->ds->uris[p->uri], &raw) != 0) {
        store_buf_free(&raw);
        return -EIO;
    }
    rc = decode_piece(job, p, &raw, p->off, dst, dst_len);
    store_buf_free(&raw);
    return rc;
}

/* The first piece of chunk `linear`, or where it would be. */
static size_t first_piece(const struct image_dataset *ds, uint64_t linear)
{
    size_t lo = 0, hi = ds->n_pieces;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ds->pieces[mid].chunk < linear)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A run of a chunk's pieces read with one ranged GET: HSDS links a file's small chunks as
 * the pieces of one larger chunk (hsload's hyper chunks: 4,096 pieces of 16 bytes in one
 * 64 KiB chunk), which one GET per piece made thousands of requests. A run is pieces of one
 * file (never a pool object: each is checked whole against its name) lying in a span no more
 * than RUN_SPAN_MAX long, and at most RUN_SLACK times the bytes its pieces need (or
 * RUN_SPAN_DENSE): what lies between them in the file is read and dropped. */
#define RUN_SPAN_MAX (4u << 20)
#define RUN_SPAN_DENSE (64u << 10)
#define RUN_SLACK 4

struct piece_run {
    size_t end;       /* pieces [first, end) */
    uint64_t lo, len; /* the span they lie in */
};

static struct piece_run piece_run_from(const struct image_dataset *ds, size_t first, size_t end)
{
    const struct ref_piece *p = &ds->pieces[first];
    struct piece_run run = { first + 1, p->off, p->size };
    uint64_t need = p->size;
    if (p->off + p->size < p->off || schema_pool_key_md5(ds->uris[p->uri]))
        return run; /* a forged offset at the end of the number range, or a pool object: alone */
    for (; run.end < end; run.end++) {
        const struct ref_piece *q = &ds->pieces[run.end];
        if (q->uri != p->uri || q->off + q->size < q->off)
            break;
        uint64_t lo = q->off < run.lo ? q->off : run.lo;
        uint64_t hi = q->off + q->size > run.lo + run.len ? q->off + q->size : run.lo + run.len;
        if (hi - lo > RUN_SPAN_MAX ||
            (hi - lo > RUN_SPAN_DENSE && hi - lo > RUN_SLACK * (need + q->size)))
            break;
        run.lo = lo, run.len = hi - lo, need += q->size;
    }
    return run;
}

/* Place piece p, decoded from raw (read from span_off on), into chunk buf. 0 or -EIO. */
static int place_piece(const struct chunk_job *job, const struct ref_piece *p,
                       const struct store_buf *raw, uint64_t span_off, unsigned char *sub,
                       uint64_t sub_bytes, unsigned char *buf)
{
    const struct image_dataset *ds = job->ds;
    uint64_t at[IMAGE_MAX_RANK], rest = p->sub;
    for (int k = ds->rank - 1; k >= 0; k--) {
        uint64_t f = ds->chunk_dims[k] / ds->sub_dims[k];
        at[k] = (rest % f) * ds->sub_dims[k];
        rest /= f;
    }
    int rc = decode_piece(job, p, raw, span_off, sub, sub_bytes);
    if (rc == 0)
        place_block(buf, ds->chunk_dims, sub, ds->sub_dims, at, ds->rank, ds->itemsize);
    return rc;
}

static int load_pieces(const struct chunk_job *job, unsigned char *buf, size_t size)
{
    const struct image_dataset *ds = job->ds;
    size_t first = first_piece(ds, job->linear), end = first;
    while (end < ds->n_pieces && ds->pieces[end].chunk == job->linear)
        end++;
    if (ds->n_sub == 1 && end > first)
        return load_piece(job, &ds->pieces[first], buf, size);
    if (end == first) {
        image_fill(ds, buf, size);
        return 0;
    }
    uint64_t sub_bytes = ds->itemsize;
    for (int k = 0; k < ds->rank; k++)
        sub_bytes *= ds->sub_dims[k];
    unsigned char *sub = malloc(sub_bytes ? sub_bytes : 1);
    if (!sub)
        return -EIO;
    image_fill(ds, buf, size);
    int rc = 0;
    for (size_t i = first; i < end && rc == 0;) {
        struct piece_run run = piece_run_from(ds, i, end);
        struct store_buf raw = { 0 };
        rc = fetch_range(job, ds->pieces[i].uri, run.lo, run.len, &raw);
        if (rc == 0) /* a pool object is always a run of its own: checked whole */
            rc = check_pooled(job, ds->uris[ds->pieces[i].uri], &raw);
        for (; rc == 0 && i < run.end; i++)
            rc = place_piece(job, &ds->pieces[i], &raw, run.lo, sub, sub_bytes, buf);
        store_buf_free(&raw);
    }
    free(sub);
    return rc;
}

/* A chunk of a contiguous linked dataset: its rows, gathered from one covering range. */
static int load_contiguous(const struct chunk_job *job, unsigned char *buf, size_t size)
{
    const struct image_dataset *ds = job->ds;
    uint64_t idx[IMAGE_MAX_RANK], start[IMAGE_MAX_RANK], count[IMAGE_MAX_RANK];
    uint64_t stride[IMAGE_MAX_RANK], first = 0, last = 0;
    image_chunk_index(ds, job->linear, idx);
    stride[ds->rank - 1] = ds->itemsize;
    for (int k = ds->rank - 2; k >= 0; k--)
        stride[k] = stride[k + 1] * ds->dims[k + 1];
    for (int k = 0; k < ds->rank; k++) {
        start[k] = idx[k] * ds->chunk_dims[k];
        count[k] =
            ds->dims[k] - start[k] < ds->chunk_dims[k] ? ds->dims[k] - start[k] : ds->chunk_dims[k];
        first += start[k] * stride[k];
        last += (start[k] + count[k] - 1) * stride[k];
    }
    last += ds->itemsize;
    if (last > ds->contig_size)
        last = ds->contig_size;
    image_fill(ds, buf, size);
    if (first >= last)
        return 0;
    struct store_buf raw = { 0 };
    int rc = fetch_range(job, 0, ds->contig_off + first, last - first, &raw);
    if (rc != 0)
        return rc;
    uint64_t rows = 1, r_idx[IMAGE_MAX_RANK] = { 0 };
    for (int k = 0; k < ds->rank - 1; k++)
        rows *= count[k];
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t src = 0, dst = 0;
        for (int k = 0; k < ds->rank - 1; k++) {
            src += (start[k] + r_idx[k]) * stride[k];
            dst = (dst + r_idx[k]) * ds->chunk_dims[k + 1];
        }
        uint64_t n = count[ds->rank - 1] * ds->itemsize;
        src += start[ds->rank - 1] * ds->itemsize;
        if (src - first + n <= raw.len)
            memcpy(buf + dst * ds->itemsize, raw.data + (src - first), n);
        for (int k = ds->rank - 2; k >= 0 && ++r_idx[k] == count[k]; k--)
            r_idx[k] = 0;
    }
    store_buf_free(&raw);
    return 0;
}

int image_load_ref(const struct chunk_job *job, unsigned char *buf, size_t size)
{
    if (job->ds->origin == ORIGIN_REF_CONTIG)
        return load_contiguous(job, buf, size);
    return load_pieces(job, buf, size);
}
