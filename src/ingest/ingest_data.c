/*
 * ingest_data: a dataset's values -> its chunk objects.
 *
 * The chunk shape is HSDS's (§5.4), which often differs from the source's, so each chunk is
 * read with H5Dread as a hyperslab into a buffer of the full chunk shape prefilled with the
 * fill value (§6.1: edges hold the fill value), turned into stored bytes (§6.2, §6.3) and
 * handed to the workers to compress and put. A chunk holding nothing but the fill value is not
 * stored (HSDS reads a missing chunk as the fill value, §7).
 *
 * Raw copy: when the shape is the source's and the source's filters are [deflate] or
 * [shuffle, deflate], a chunk inside the dataspace is copied as the file stores it (a zlib
 * stream HSDS decodes and then unshuffles, §6.5) without decoding: that is most of the time
 * of a large compressed file saved.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/why.h"
#include "h5osfs/ingest/ingest_int.h"

/* ---- one dataset ---- */

struct dset_io {
    struct ingest *g;
    struct ingest_obj *o;
    hid_t dset, space, dcpl, mem;
    const json_t *type;
    int rank; /* 1 for scalars (one chunk of one element) */
    int scalar;
    hsize_t dims[INGEST_MAX_RANK], cdims[INGEST_MAX_RANK];
    size_t memsize, n;          /* element size in memory, elements per chunk */
    unsigned traits;            /* enum h5type_trait bits of the type */
    unsigned char *fill;        /* one element in memory layout */
    unsigned char *fill_stored; /* one element as stored */
    size_t fill_len;
    struct codec_spec spec;
    int raw;        /* raw copies possible */
    int same_grid;  /* the source's chunks are these chunks */
    int same_dims;  /* with the base's layout: the base's shape too */
    int partitions; /* layout.partition_count (0: none) */
    int virt;       /* virtual or external: reading may fail */
    /* Told by the base in one pass (clean_chunks), one bit per chunk in C order over grid
     * (NULL: ask HDF5 per chunk): `told` chunks are settled (copied in the store, or left in
     * the base version's pool); `extent` chunks have an extent in the base; a chunk with
     * neither is not allocated unless HDF5 says so. */
    unsigned char *told, *extent;
    uint64_t grid[INGEST_MAX_RANK];
};

static int layout_dims(const json_t *layout, int rank, hsize_t *out)
{
    const json_t *d = json_object_get(layout, "dims");
    if (json_array_size(d) != (size_t)rank)
        return -EINVAL;
    for (int k = 0; k < rank; k++)
        out[k] = (hsize_t)json_integer_value(json_array_get(d, (size_t)k));
    return 0;
}

/* The fill value: the file's when the JSON states one, else zeros (what HSDS assumes). */
static int io_fill(struct dset_io *io, char *why, size_t why_len)
{
    const json_t *cp = json_object_get(io->o->json, "creationProperties");
    io->fill = calloc(1, io->memsize);
    if (!io->fill)
        return -ENOMEM;
    if (json_object_get(cp, "fillValue") && H5Pget_fill_value(io->dcpl, io->mem, io->fill) < 0) {
        why_set(why, why_len, "the fill value cannot be read");
        return -EIO;
    }
    struct h5value_ids ids = { ingest_ref_id, io->g };
    return h5value_to_stored(io->type, io->mem, io->fill, 1, &ids, &io->fill_stored, &io->fill_len,
                             why, why_len)
               ? -EIO
               : 0;
}

static int io_grid(struct dset_io *io)
{
    const json_t *layout = json_object_get(io->o->json, "layout");
    if (io->scalar) {
        io->rank = 1;
        io->dims[0] = io->cdims[0] = 1;
    } else {
        io->rank = H5Sget_simple_extent_ndims(io->space);
        if (io->rank < 1 || io->rank > INGEST_MAX_RANK ||
            H5Sget_simple_extent_dims(io->space, io->dims, NULL) < 0 ||
            layout_dims(layout, io->rank, io->cdims) != 0)
            return -EIO;
    }
    io->n = 1;
    for (int k = 0; k < io->rank; k++)
        io->n *= io->cdims[k];
    hsize_t src[INGEST_MAX_RANK];
    io->same_grid = !io->scalar && H5Pget_layout(io->dcpl) == H5D_CHUNKED &&
                    H5Pget_chunk(io->dcpl, io->rank, src) == io->rank &&
                    memcmp(src, io->cdims, (size_t)io->rank * sizeof *src) == 0;
    return 0;
}

/* Raw copies need the file's element bytes to be the stored ones: a fixed-size type that
 * HDF5 considers equal to the packed type the JSON describes. */
static int raw_possible(struct dset_io *io)
{
    size_t stored;
    if (!io->same_grid || !ingest_filters_raw(io->dcpl, &io->spec) ||
        (io->traits & (H5TYPE_HAS_VLEN | H5TYPE_HAS_REF)) ||
        h5type_stored_size(io->type, &stored) != 0)
        return 0;
    hid_t ft = H5Dget_type(io->dset);
    int ok = ft >= 0 && H5Tget_size(ft) == stored && H5Tequal(ft, io->mem) > 0;
    if (ft >= 0)
        H5Tclose(ft);
    return ok;
}

static int io_open(struct dset_io *io, char *why, size_t why_len)
{
    const json_t *cp = json_object_get(io->o->json, "creationProperties");
    io->dset = H5Dopen2(io->g->file, io->o->path, H5P_DEFAULT);
    io->space = io->dset < 0 ? -1 : H5Dget_space(io->dset);
    io->dcpl = io->dset < 0 ? -1 : H5Dget_create_plist(io->dset);
    io->type = json_object_get(io->o->json, "type");
    int rc = h5type_build(io->type, &io->mem, why, why_len);
    if (rc == -ENOMEM)
        return rc;
    if (io->dset < 0 || io->space < 0 || io->dcpl < 0 || rc != 0)
        return -EIO;
    io->scalar = H5Sget_simple_extent_type(io->space) == H5S_SCALAR;
    io->memsize = H5Tget_size(io->mem);
    if ((rc = h5type_traits_of(io->type, &io->traits)) != 0)
        return rc == -ENOMEM ? rc : -EIO; /* a wrong "no vlen" would leak or misread values */
    unsigned traits = io->traits;
    size_t itemsize = 0;
    rc = traits & H5TYPE_HAS_VLEN ? 0 : h5type_stored_size(io->type, &itemsize);
    if (rc != 0)
        return rc == -ENOMEM ? rc : -EIO;
    if (codec_spec_from_filters(json_object_get(cp, "filters"), itemsize,
                                (traits & H5TYPE_HAS_VLEN) != 0, CODEC_SOURCE_HSDS, &io->spec, why,
                                why_len) != 0 ||
        io_grid(io) != 0)
        return -EIO;
    io->virt = H5Pget_layout(io->dcpl) == H5D_VIRTUAL || H5Pget_external_count(io->dcpl) > 0;
    io->raw = raw_possible(io);
    io->partitions = (int)json_integer_value(
        json_object_get(json_object_get(io->o->json, "layout"), "partition_count"));
    io->same_dims = io->o->base_layout &&
                    json_equal(json_object_get(json_object_get(io->o->json, "shape"), "dims"),
                               json_object_get(json_object_get(io->o->old, "shape"), "dims"));
    return io_fill(io, why, why_len);
}

static void io_close(struct dset_io *io)
{
    free(io->told);
    free(io->extent);
    free(io->fill);
    free(io->fill_stored);
    if (io->mem >= 0)
        H5Tclose(io->mem);
    if (io->dcpl >= 0)
        H5Pclose(io->dcpl);
    if (io->space >= 0)
        H5Sclose(io->space);
    if (io->dset >= 0)
        H5Dclose(io->dset);
}

/* ---- one chunk ---- */

struct chunk_at {
    uint64_t idx[INGEST_MAX_RANK];
    hsize_t off[INGEST_MAX_RANK], count[INGEST_MAX_RANK];
    int inside; /* the whole chunk lies inside the dataspace */
    char key[STORE_KEY_MAX + 1];
};

/* Read the chunk's region into buf (n elements, prefilled with the fill value). */
static int read_region(struct dset_io *io, const struct chunk_at *c, void *buf)
{
    for (size_t i = 0; i < io->n; i++)
        memcpy((unsigned char *)buf + i * io->memsize, io->fill, io->memsize);
    if (io->scalar)
        return H5Dread(io->dset, io->mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ? -EIO : 0;
    hsize_t zero[INGEST_MAX_RANK] = { 0 };
    hid_t ms = H5Screate_simple(io->rank, io->cdims, NULL);
    hid_t fs = H5Scopy(io->space);
    int rc = -EIO;
    if (ms >= 0 && fs >= 0 &&
        H5Sselect_hyperslab(ms, H5S_SELECT_SET, zero, NULL, c->count, NULL) >= 0 &&
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, c->off, NULL, c->count, NULL) >= 0 &&
        H5Dread(io->dset, io->mem, ms, fs, H5P_DEFAULT, buf) >= 0)
        rc = 0;
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    return rc;
}

static int all_fill(const struct dset_io *io, const unsigned char *s, size_t len)
{
    if (io->fill_len == 0 || len % io->fill_len != 0)
        return 0;
    for (size_t at = 0; at < len; at += io->fill_len)
        if (memcmp(s + at, io->fill_stored, io->fill_len) != 0)
            return 0;
    return 1;
}

static int submit(struct dset_io *io, const struct chunk_at *c, unsigned char *bytes, size_t len,
                  int raw)
{
    struct ingest_job job = { .bytes = bytes,
                              .src_fd = -1,
                              .len = len,
                              .encode = !raw,
                              .raw = raw,
                              .spec = io->spec,
                              .path = io->o->path };
    memcpy(job.key, c->key, sizeof job.key);
    return ingest_pool_submit(io->g->pool, &job);
}

/* A raw chunk straight from the file to the store, never in memory here. 1 when the chunk
 * index does not say where it is. */
static int copy_raw_by_fd(struct dset_io *io, const struct chunk_at *c)
{
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(io->dset, c->off, &mask, &addr, &size) < 0 || mask != 0 ||
        addr == HADDR_UNDEF || size == 0 || size > INGEST_CHUNK_MAX * 4)
        return 1;
    struct ingest_job job = { .src_fd = io->g->raw_fd,
                              .src_off = io->g->chunk_base + addr,
                              .len = size,
                              .raw = 1,
                              .path = io->o->path };
    snprintf(job.key, sizeof job.key, "%s", c->key);
    return ingest_pool_submit(io->g->pool, &job);
}

/* The file's own bytes of a chunk; 1 when it cannot be copied that way. */
static int copy_raw(struct dset_io *io, const struct chunk_at *c)
{
    hsize_t size = 0;
    uint32_t mask = 0;
    if (io->g->raw_fd >= 0)
        return copy_raw_by_fd(io, c);
    if (H5Dget_chunk_storage_size(io->dset, c->off, &size) < 0 || size == 0 ||
        size > INGEST_CHUNK_MAX * 4)
        return 1;
    unsigned char *buf = malloc(size);
    if (!buf)
        return -ENOMEM;
    if (H5Dread_chunk(io->dset, H5P_DEFAULT, c->off, &mask, buf) < 0 || mask != 0) {
        free(buf);
        return 1;
    }
    return submit(io, c, buf, size, 1);
}

/* Not allocated in the file: the chunk is the fill value everywhere. */
static int unallocated(struct dset_io *io, const struct chunk_at *c)
{
    hsize_t size = 1;
    return io->same_grid && H5Dget_chunk_storage_size(io->dset, c->off, &size) >= 0 && size == 0;
}

/* Free what H5Dread allocated for vlen elements; buf itself is reused for the next chunk. */
static void reclaim_vlen(struct dset_io *io, unsigned char *buf)
{
    if (!(io->traits & H5TYPE_HAS_VLEN))
        return;
    hsize_t n = io->n;
    hid_t space = H5Screate_simple(1, &n, NULL);
    if (space < 0 || H5Dvlen_reclaim(io->mem, space, H5P_DEFAULT, buf) < 0)
        log_error("%s: %s: variable-length values leaked", io->g->log_name, io->o->path);
    if (space >= 0)
        H5Sclose(space);
}

static int decoded_chunk(struct dset_io *io, const struct chunk_at *c, unsigned char *buf)
{
    unsigned char *s = NULL;
    size_t len = 0;
    char why[200];
    struct h5value_ids ids = { ingest_ref_id, io->g };
    int rc = read_region(io, c, buf);
    if (rc != 0) {
        reclaim_vlen(io, buf);
        return -ENODATA; /* HDF5 cannot read the values: the caller decides */
    }
    rc = h5value_to_stored(io->type, io->mem, buf, io->n, &ids, &s, &len, why, sizeof why);
    reclaim_vlen(io, buf);
    if (rc != 0) {
        log_error("%s: %s: chunk %s cannot be converted: %s", io->g->log_name, io->o->path, c->key,
                  why);
        return rc == -ENOMEM ? rc : -EIO;
    }
    if (all_fill(io, s, len) && !io->g->cfg->kept_in_pool) {
        io->g->stats->chunks_fill++;
        free(s);
        return 0;
    }
    return submit(io, c, s, len, 0);
}

/* With a base: a chunk whose bytes in the file are still the base's chunk object is copied in
 * the store (0); else its bytes are made real in the file first (1: read it). */
static int base_chunk(struct dset_io *io, const struct chunk_at *c)
{
    const struct ingest_base *b = io->g->base;
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (!io->same_grid || H5Dget_chunk_info_by_coord(io->dset, c->off, &mask, &addr, &size) < 0 ||
        addr == HADDR_UNDEF || size == 0)
        return 1; /* unallocated, or not one chunk of the file: no base bytes */
    struct ingest_job job = { .src_fd = -1, .path = io->o->path };
    if (io->o->base_layout && (c->inside || io->same_dims)) {
        int state = b->chunk_state(b->ctx, addr, size, io->o->base_id, c->idx, io->rank, 0,
                                   job.copy_of, sizeof job.copy_of);
        if (state < 0)
            return state;
        if (state == 2) {
            memcpy(job.key, c->key, sizeof job.key);
            return ingest_pool_submit(io->g->pool, &job);
        }
        if (state == 3 && io->g->cfg->kept_in_pool) {
            io->g->stats->chunks_in_pool++; /* the version names it: nothing stored */
            return io->g->cfg->kept_in_pool(io->g->cfg->pool_ctx, io->o->id, c->idx, io->rank);
        }
    }
    int rc = b->chunk_state(b->ctx, addr, size, io->o->base_id, c->idx, io->rank, 1, job.copy_of,
                            sizeof job.copy_of);
    return rc < 0 ? rc : 1;
}

/* The chunk's bit in io->told and io->extent: its index in C order. */
static uint64_t linear_of(const struct dset_io *io, const uint64_t *idx)
{
    uint64_t lin = 0;
    for (int k = 0; k < io->rank; k++)
        lin = lin * io->grid[k] + idx[k];
    return lin;
}

static void bit_set(unsigned char *bits, uint64_t i)
{
    bits[i / 8] |= (unsigned char)(1u << (i % 8));
}

static int bit_get(const unsigned char *bits, uint64_t i)
{
    return (bits[i / 8] >> (i % 8)) & 1;
}

/* A base chunk that is still the base's stored object: copied in the store, as base_chunk's
 * state 2, without reading it. */
static int copy_told(struct dset_io *io, const uint64_t *idx, const char *key)
{
    struct ingest_job job = { .src_fd = -1, .path = io->o->path };
    if (schema_chunk_key(io->o->id, idx, io->rank,
                         schema_chunk_partition(idx, io->rank, io->partitions), job.key,
                         sizeof job.key) != 0)
        return -EIO;
    snprintf(job.copy_of, sizeof job.copy_of, "%s", key);
    return ingest_pool_submit(io->g->pool, &job);
}

static int told_chunk(void *ctx, const uint64_t *idx, int rank, int state, const char *key)
{
    struct dset_io *io = ctx;
    if (rank != io->rank)
        return 0;
    for (int k = 0; k < rank; k++)
        if (idx[k] >= io->grid[k])
            return 0; /* outside today's grid: asked per chunk like any other */
    uint64_t lin = linear_of(io, idx);
    bit_set(io->extent, lin);
    int rc = 0;
    if (state == 2 && key[0]) {
        io->g->stats->copies_told++;
        rc = copy_told(io, idx, key);
    } else if (state == 3 && io->g->cfg->kept_in_pool) {
        io->g->stats->chunks_in_pool++; /* the version names it: nothing stored */
        io->g->stats->chunks_told++;
        rc = io->g->cfg->kept_in_pool(io->g->cfg->pool_ctx, io->o->id, idx, rank);
    } else {
        return 0; /* written, or not a whole stored object: asked per chunk */
    }
    bit_set(io->told, lin);
    return rc;
}

/* An r+ of a dataset on the base's grid and shape: the chunks the base can vouch for in one
 * pass are settled here, the rest asked of HDF5 chunk by chunk. 0 or -errno. */
static int tell_base_chunks(struct dset_io *io)
{
    const struct ingest_base *b = io->g->base;
    uint64_t total = 1;
    if (!b || !b->clean_chunks || !io->o->base_id[0] || !io->o->base_layout || !io->same_grid ||
        !io->same_dims || io->scalar)
        return 0;
    for (int k = 0; k < io->rank; k++) {
        io->grid[k] = io->cdims[k] ? (io->dims[k] + io->cdims[k] - 1) / io->cdims[k] : 0;
        if (io->grid[k] == 0 || __builtin_mul_overflow(total, io->grid[k], &total) ||
            total > ((uint64_t)1 << 40))
            return 0;
    }
    io->told = calloc(total / 8 + 1, 1);
    io->extent = calloc(total / 8 + 1, 1);
    if (!io->told || !io->extent)
        return -ENOMEM;
    int rc = b->clean_chunks(b->ctx, io->o->base_id, told_chunk, io);
    if (rc == 0) { /* it cannot tell (before telling any): every chunk asked for */
        free(io->told);
        free(io->extent);
        io->told = io->extent = NULL;
    }
    return rc == 1 ? 0 : rc;
}

static int one_chunk(struct dset_io *io, struct chunk_at *c, unsigned char *buf)
{
    int rc;
    uint64_t lin = io->told ? linear_of(io, c->idx) : 0;
    if (io->told && bit_get(io->told, lin))
        return 0; /* settled by tell_base_chunks */
    if (schema_chunk_key(io->o->id, c->idx, io->rank,
                         schema_chunk_partition(c->idx, io->rank, io->partitions), c->key,
                         sizeof c->key) != 0)
        return -EIO;
    if (io->g->base && io->o->base_id[0]) {
        struct ingest_job job = { .src_fd = -1, .path = io->o->path };
        if (ingest_base_kept_chunk(io->g, io->o, c->idx, io->rank, job.copy_of,
                                   sizeof job.copy_of)) {
            memcpy(job.key, c->key, sizeof job.key); /* unreadable in the file: as stored */
            return ingest_pool_submit(io->g->pool, &job);
        }
        if (io->told && !bit_get(io->extent, lin) && unallocated(io, c)) {
            io->g->stats->chunks_fill++; /* no extent in the base, none now: no lookup */
            return 0;
        }
        if ((rc = base_chunk(io, c)) <= 0)
            return rc;
    }
    if (unallocated(io, c)) {
        io->g->stats->chunks_fill++;
        return 0;
    }
    if (io->raw && c->inside && (rc = copy_raw(io, c)) <= 0)
        return rc;
    return decoded_chunk(io, c, buf);
}

/* Next chunk in C order; 0 when done. */
static int next_chunk(const struct dset_io *io, const uint64_t *grid, struct chunk_at *c)
{
    for (int k = io->rank - 1; k >= 0; k--) {
        if (++c->idx[k] < grid[k])
            return 1;
        c->idx[k] = 0;
    }
    return 0;
}

static void place_chunk(const struct dset_io *io, struct chunk_at *c)
{
    c->inside = 1;
    for (int k = 0; k < io->rank; k++) {
        c->off[k] = c->idx[k] * io->cdims[k];
        c->count[k] =
            io->dims[k] - c->off[k] < io->cdims[k] ? io->dims[k] - c->off[k] : io->cdims[k];
        c->inside &= c->count[k] == io->cdims[k];
    }
}

/* ---- which chunks to visit ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct target_list {
    uint64_t *idx; /* linear chunk indices (C order over the grid), sorted */
    size_t n, cap;
};

/* Add every target chunk that the source chunk at off (of src dims) overlaps. */
static int add_overlaps(const struct dset_io *io, const uint64_t *grid, const hsize_t *off,
                        const hsize_t *src, struct target_list *l)
{
    uint64_t lo[INGEST_MAX_RANK], hi[INGEST_MAX_RANK], cur[INGEST_MAX_RANK], count = 1;
    for (int k = 0; k < io->rank; k++) {
        uint64_t end = off[k] + src[k] < io->dims[k] ? off[k] + src[k] : io->dims[k];
        if (end <= off[k])
            return 0; /* beyond the dataspace (the dataset shrank) */
        lo[k] = cur[k] = off[k] / io->cdims[k];
        hi[k] = (end - 1) / io->cdims[k];
        if (__builtin_mul_overflow(count, hi[k] - lo[k] + 1, &count))
            return -ENOMEM;
    }
    if (l->n + count > l->cap) {
        uint64_t *bigger = count > SIZE_MAX - l->n
                               ? NULL
                               : grow_array(l->idx, &l->cap, l->n + count, sizeof *bigger, 256);
        if (!bigger)
            return -ENOMEM;
        l->idx = bigger;
    }
    for (int k = io->rank - 1;;) {
        uint64_t lin = 0;
        for (int j = 0; j < io->rank; j++)
            lin = lin * grid[j] + cur[j];
        l->idx[l->n++] = lin;
        for (k = io->rank - 1; k >= 0 && ++cur[k] > hi[k]; k--)
            cur[k] = lo[k];
        if (k < 0)
            return 0;
    }
}

/* (HDF5 1.10.8 refuses H5S_ALL here, and counts every chunk whatever the selection.) */
/* The target chunks that overlap a chunk the source file has allocated, when the source is
 * chunked and sparse: every other chunk is the fill value everywhere, and reading it from
 * HDF5 region by region (a 4 GiB dataset with two chunks written) takes minutes; a declared
 * extent of exabytes, forever. 1 with the list (as long as what the file stores), 0 when
 * every chunk has to be visited (listing saves little), -EIO (logged) or -ENOMEM. */
static int sparse_targets(struct dset_io *io, const uint64_t *grid, uint64_t total,
                          struct target_list *l)
{
    hsize_t src[INGEST_MAX_RANK], nchunks = 0;
    memset(l, 0, sizeof *l);
    if (io->scalar || io->virt || H5Pget_layout(io->dcpl) != H5D_CHUNKED ||
        H5Pget_chunk(io->dcpl, io->rank, src) != io->rank ||
        H5Dget_num_chunks(io->dset, io->space, &nchunks) < 0 || nchunks >= total / 2)
        return 0;
    int rc = 0;
    for (hsize_t i = 0; rc == 0 && i < nchunks; i++) {
        hsize_t off[INGEST_MAX_RANK], size;
        unsigned mask;
        haddr_t addr;
        if (H5Dget_chunk_info(io->dset, io->space, i, off, &mask, &addr, &size) < 0) {
            log_error("%s: %s: chunk %llu of the %llu the file has cannot be listed",
                      io->g->log_name, io->o->path, (unsigned long long)i,
                      (unsigned long long)nchunks);
            rc = -EIO;
        } else {
            rc = add_overlaps(io, grid, off, src, l);
        }
    }
    if (rc == 0 && l->n > 1)
        qsort(l->idx, l->n, sizeof *l->idx, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; rc == 0 && i < l->n; i++)
        if (u == 0 || l->idx[u - 1] != l->idx[i])
            l->idx[u++] = l->idx[i];
    l->n = u;
    if (rc == 0 && l->n < total / 2)
        return 1;
    free(l->idx);
    memset(l, 0, sizeof *l);
    return rc;
}

static void chunk_from_linear(const struct dset_io *io, const uint64_t *grid, uint64_t lin,
                              struct chunk_at *c)
{
    for (int k = io->rank - 1; k >= 0; k--) {
        c->idx[k] = lin % grid[k];
        lin /= grid[k];
    }
}

/* The file stores no values of the dataset at all (late allocation, nothing written): every
 * chunk is the fill value, whatever extent it declares. A virtual or external dataset's values
 * are elsewhere: never so. */
static int stores_nothing(const struct dset_io *io)
{
    H5D_space_status_t status;
    hsize_t nchunks = 1;
    if (io->virt || H5Dget_space_status(io->dset, &status) < 0)
        return 0;
    if (H5Pget_layout(io->dcpl) == H5D_CHUNKED)
        return H5Dget_num_chunks(io->dset, io->space, &nchunks) >= 0 && nchunks == 0;
    return status == H5D_SPACE_STATUS_NOT_ALLOCATED;
}

static int all_chunks(struct dset_io *io)
{
    uint64_t grid[INGEST_MAX_RANK], total = 1;
    struct chunk_at c;
    struct target_list l;
    memset(&c, 0, sizeof c);
    for (int k = 0; k < io->rank; k++) {
        /* dims may be near 2^64: no dims + cdims - 1 */
        grid[k] = io->cdims[k] ? io->dims[k] / io->cdims[k] + (io->dims[k] % io->cdims[k] != 0) : 0;
        if (grid[k] == 0)
            return 0; /* an empty dataset has no chunks */
        if (__builtin_mul_overflow(total, grid[k], &total))
            total = UINT64_MAX;
    }
    if (stores_nothing(io)) {
        io->g->stats->chunks_fill += total;
        return 0;
    }
    unsigned char *buf = malloc(io->n * io->memsize);
    if (!buf)
        return -ENOMEM;
    int rc = sparse_targets(io, grid, total, &l);
    if (rc == 1) {
        rc = 0;
        io->g->stats->chunks_fill += total - l.n;
        for (size_t i = 0; rc == 0 && i < l.n; i++) {
            chunk_from_linear(io, grid, l.idx[i], &c);
            place_chunk(io, &c);
            rc = one_chunk(io, &c, buf);
        }
        free(l.idx);
    } else if (rc == 0) {
        do {
            place_chunk(io, &c);
            rc = one_chunk(io, &c, buf);
        } while (rc == 0 && next_chunk(io, grid, &c));
    }
    free(buf);
    return rc;
}

/* The first filter of the pipeline HDF5 cannot apply here (no plugin), or -1. */
static int missing_filter(hid_t dcpl)
{
    int nf = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf; i++) {
        unsigned flags, cd[8], config;
        size_t n = 8;
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &n, cd, 0, NULL, &config);
        if (id >= 0 && H5Zfilter_avail(id) <= 0)
            return (int)id;
    }
    return -1;
}

int ingest_dataset_chunks(struct ingest *g, struct ingest_obj *o)
{
    struct dset_io io = { .g = g, .o = o, .dset = -1, .space = -1, .dcpl = -1, .mem = -1 };
    char why[200] = "HDF5 cannot open it";
    if (o->table)
        return ingest_link_table_chunks(g, o);
    if (o->dropped || !json_object_get(o->json, "layout") || o->base_ref || o->base_whole ||
        o->linked || ingest_is_virtual(o->json))
        return 0; /* left out, H5S_NULL, data in a linked file, carried over, or mappings */
    int rc = io_open(&io, why, sizeof why);
    if (rc != 0) {
        log_error("%s: %s: dataset cannot be read: %s", g->log_name, o->path, why);
        io_close(&io);
        return rc == -ENOMEM ? rc : -EIO;
    }
    if (io.virt)
        ingest_change(g, o->path, "external raw data stored as a regular dataset");
    if (g->base && o->base_id[0] && !io.same_grid)
        rc = ingest_base_materialize(g, o, io.dset);
    if (rc == 0)
        rc = tell_base_chunks(&io);
    if (rc == 0)
        rc = all_chunks(&io);
    if (rc == -ENODATA && io.virt) {
        ingest_change(g, o->path, "values cannot be read: stored without them");
        rc = 0;
    } else if (rc == -ENODATA && missing_filter(io.dcpl) >= 0) {
        /* the rule for what the schema cannot hold: store what can be read, say so */
        ingest_change(g, o->path,
                      "values not stored: HDF5 has no decoder for filter %d "
                      "(reads give the fill value)",
                      missing_filter(io.dcpl));
        rc = 0;
    } else if (rc == -ENODATA) {
        log_error("%s: %s: values cannot be read", g->log_name, o->path);
        rc = -EIO;
    }
    io_close(&io);
    return rc;
}
