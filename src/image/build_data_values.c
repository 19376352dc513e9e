/* build_data_values: a dataset whose values are written for real (variable-length data,
 * references, scalars): made at creation, filled once every object exists, each chunk fetched,
 * converted and written; a chunk that cannot be is declared unreadable. See build_data.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_data.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/why.h"

static int is_null_space(const json_t *shape)
{
    const char *cls = hjson_text(json_object_get(shape, "class"));
    return cls && strcmp(cls, "H5S_NULL") == 0;
}

/* The chunk grid and codec of a dataset written as values. 0 or -EINVAL (why). */
static int values_grid(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                       struct image_dataset *ds, char *why, size_t why_len)
{
    struct dset_plan q = *p;
    int vlen = (p->traits & H5TYPE_HAS_VLEN) != 0;
    if (q.rank == 0) { /* HSDS keeps a scalar as shape [1], chunk "0" (spec §2.4) */
        q.rank = 1;
        q.dims[0] = q.cdims[0] = 1;
    }
    if (vlen)
        q.stored_size = 1; /* vlen chunks have no fixed size; only their grid matters */
    int rc = build_data_describe(b, o, &q, ds, why, why_len);
    if (rc == 0 && vlen)
        rc = codec_spec_from_filters(json_object_get(p->cprops, "filters"), 1, 1, CODEC_SOURCE_HSDS,
                                     &ds->codec, why, why_len);
    return rc;
}

/* A dataset whose values are written later (build_dataset_fill): made now, once its chunks are
 * known to be decodable at all, or -EINVAL (why) for a placeholder. */
int build_data_create_for_values(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                                 char *why, size_t why_len)
{
    struct image_dataset ds = { 0 };
    int rc = is_null_space(p->shape) ? 0 : values_grid(b, o, p, &ds, why, why_len);
    image_dataset_clear(&ds);
    return rc ? rc : build_data_create_as_stored(b, o, p, 0, why, why_len);
}

#define VALUES_CHUNK_MAX (256u << 20) /* a vlen chunk's stored bytes, decoded */

/* Fetch and decode one chunk's stored bytes. -ENOENT: no such chunk (fill value). */
static int fetch_stored(struct builder *b, const struct image_dataset *ds, const char *key,
                        int vlen, unsigned char **out, size_t *len, char *why, size_t why_len)
{
    struct store_buf raw = { 0 };
    int rc =
        store_get(b->src->store, key, vlen ? VALUES_CHUNK_MAX : ds->chunk_bytes * 2 + 65536, &raw);
    if (rc == -ENOENT)
        return rc;
    if (rc != 0) {
        why_set(why, why_len, "chunk %.120s: %.60s", key, strerror(-rc));
        return rc == -EFBIG || rc == -EISDIR ? -EINVAL : -EIO;
    }
    char cwhy[160] = "";
    if (vlen) {
        rc = codec_decode_alloc(&ds->codec, raw.data, raw.len, VALUES_CHUNK_MAX, out, len, cwhy,
                                sizeof cwhy);
    } else if (!(*out = malloc(ds->chunk_bytes ? ds->chunk_bytes : 1))) {
        rc = -ENOMEM;
    } else {
        *len = ds->chunk_bytes;
        rc = codec_decode(&ds->codec, raw.data, raw.len, *out, *len, cwhy, sizeof cwhy);
        if (rc != 0) {
            free(*out);
            *out = NULL;
        }
    }
    if (rc == -EINVAL)
        why_set(why, why_len, "chunk %.120s: %.60s", key, cwhy);
    store_buf_free(&raw);
    return rc;
}

/* Select in space the part of chunk `linear` that lies inside dims (at start, or at 0). */
static herr_t select_chunk(hid_t space, const struct image_dataset *ds, const hsize_t *dims,
                           uint64_t linear, int at_origin)
{
    hsize_t start[IMAGE_MAX_RANK], count[IMAGE_MAX_RANK];
    for (int k = ds->rank - 1; k >= 0; k--) {
        uint64_t i = linear % ds->grid[k];
        linear /= ds->grid[k];
        start[k] = i * ds->chunk_dims[k];
        count[k] = dims[k] - start[k] < ds->chunk_dims[k] ? dims[k] - start[k] : ds->chunk_dims[k];
        if (at_origin)
            start[k] = 0;
    }
    return H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
}

static int write_chunk_values(struct build_obj *o, const struct dset_plan *p,
                              const struct image_dataset *ds, uint64_t linear, const void *buf)
{
    if (p->rank == 0)
        return H5Dwrite(o->hid, p->tid, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ? -EIO : 0;
    hsize_t cdims[IMAGE_MAX_RANK];
    for (int k = 0; k < p->rank; k++)
        cdims[k] = ds->chunk_dims[k];
    hid_t mem = H5Screate_simple(p->rank, cdims, NULL), file = H5Dget_space(o->hid);
    int rc = mem >= 0 && file >= 0 && select_chunk(mem, ds, p->dims, linear, 1) >= 0 &&
                     select_chunk(file, ds, p->dims, linear, 0) >= 0 &&
                     H5Dwrite(o->hid, p->tid, mem, file, H5P_DEFAULT, buf) >= 0
                 ? 0
                 : -EIO;
    if (mem >= 0)
        H5Sclose(mem);
    if (file >= 0)
        H5Sclose(file);
    return rc;
}

static int value_chunk(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                       const struct image_dataset *ds, uint64_t linear, char *why, size_t why_len)
{
    char key[STORE_KEY_MAX + 1];
    unsigned char *bytes = NULL;
    size_t len = 0, n = 1;
    void *buf = NULL;
    int vlen = (p->traits & H5TYPE_HAS_VLEN) != 0;
    int rc = image_chunk_key(ds, linear, key, sizeof key);
    if (rc == 0)
        rc = fetch_stored(b, ds, key, vlen, &bytes, &len, why, why_len);
    if (rc == -ENOENT)
        return 0; /* no chunk: the fill value */
    for (int k = 0; k < ds->rank && p->rank > 0; k++)
        n *= ds->chunk_dims[k];
    struct h5value_refs refs = { build_resolve_ref, b };
    if (rc == 0) {
        char vwhy[160] = "";
        rc = h5value_from_stored(p->type, p->tid, bytes, len, n, &refs, &buf, vwhy, sizeof vwhy);
        if (rc != 0)
            why_set(why, why_len, "chunk %.120s: %.60s", key, vwhy);
    }
    if (rc == 0 && (rc = write_chunk_values(o, p, ds, linear, buf)) != 0)
        why_set(why, why_len, "chunk %.120s: HDF5 refused the values", key);
    if (buf)
        h5value_free(p->tid, buf, n);
    free(bytes);
    if (rc == -ENOMEM)
        return rc; /* not the chunk's fault: it must not be shown unreadable */
    return rc == -EIO && !strstr(why, "HDF5") ? -EIO : rc ? -EINVAL : 0;
}

/* Where HDF5 put chunk `linear` of o. 0 or -EIO. */
static int chunk_storage(struct build_obj *o, const struct image_dataset *ds, uint64_t linear,
                         haddr_t *addr, hsize_t *size)
{
    uint64_t idx[IMAGE_MAX_RANK];
    *addr = HADDR_UNDEF;
    *size = 0;
    image_chunk_index(ds, linear, idx);
    if (build_chunk_info(o->hid, ds, idx, addr, size) != 0)
        return -EIO;
    return *addr == HADDR_UNDEF || *size == 0 ? -EIO : 0;
}

/*
 * Chunk `linear` of o could not be read or converted (why): HDF5 writes it as zeros, so that it
 * exists with its exact size and place, and then its bytes are declared unreadable. Reads of
 * its region fail with EIO, as a bad chunk of a dataset served from extents does, and the other
 * chunks keep their values. -EINVAL when that cannot be done (the dataset must go): HDF5
 * refuses, or o is a scalar, which is not chunked (see placeholder_chunks).
 */
static int poison_value_chunk(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                              const struct image_dataset *ds, uint64_t linear, uint32_t *index,
                              const char *why)
{
    char name[IMAGE_MAX_RANK * 21];
    uint64_t idx[IMAGE_MAX_RANK], n = 1;
    size_t len = 0, elem = H5Tget_size(p->tid);
    if (p->rank == 0)
        return -EINVAL;
    for (int k = 0; k < ds->rank; k++)
        n *= ds->chunk_dims[k];
    void *zeros = calloc(n, elem ? elem : 1);
    if (!zeros)
        return -ENOMEM;
    haddr_t addr;
    hsize_t size;
    int rc = write_chunk_values(o, p, ds, linear, zeros);
    free(zeros);
    /* the chunk leaves HDF5's caches now, or it could be written again over the poison */
    if (rc == 0 && H5Fflush(b->file, H5F_SCOPE_LOCAL) < 0)
        rc = -EIO;
    if (rc == 0)
        rc = chunk_storage(o, ds, linear, &addr, &size);
    if (rc != 0)
        return -EINVAL;
    if ((rc = build_data_poison_extent(b, o, addr, size, linear, index)) != 0)
        return rc;
    image_chunk_index(ds, linear, idx);
    for (int k = 0; k < ds->rank; k++)
        len += (size_t)snprintf(name + len, sizeof name - len, "%s%" PRIu64, k ? "_" : "", idx[k]);
    return build_omit(b, IMAGE_OMIT_CHUNK, o->id, build_path(b, o), name, why);
}

static int write_values(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                        char *why, size_t why_len)
{
    struct image_dataset ds = { 0 };
    struct chunk_list chunks = { 0 };
    uint32_t poisoned = UINT32_MAX;
    int rc = values_grid(b, o, p, &ds, why, why_len);
    if (rc == 0 && !build_take_listed(o, &ds, &chunks))
        rc = build_dataset_chunks(b, &ds, &chunks);
    if (rc == -EFBIG) {
        why_set(why, why_len, "a v1 dataset of more than %u chunks, which cannot be listed",
                V1_PROBE_MAX);
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = build_data_index_by_stored_chunks(o->hid, p, chunks.n);
    for (size_t i = 0; i < chunks.n && rc == 0; i++) {
        char cwhy[200] = "";
        rc = value_chunk(b, o, p, &ds, chunks.v[i], cwhy, sizeof cwhy);
        if (rc == -EINVAL &&
            (rc = poison_value_chunk(b, o, p, &ds, chunks.v[i], &poisoned, cwhy)) == -EINVAL)
            why_set(why, why_len, "%s; %s", cwhy,
                    p->rank == 0 ? "a scalar cannot be shown unreadable"
                                 : "HDF5 refused to make it unreadable");
    }
    free(chunks.v);
    image_dataset_clear(&ds);
    return rc;
}

int build_dataset_fill(struct builder *b, struct build_obj *o, char *why, size_t why_len)
{
    struct dset_plan p;
    int rc = build_data_plan(b, o, &p, why, why_len);
    if (rc == 0 && !is_null_space(p.shape)) /* a NULL dataspace has no data */
        rc = write_values(b, o, &p, why, why_len);
    build_data_plan_close(&p);
    return rc;
}
