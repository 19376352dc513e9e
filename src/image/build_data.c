/*
 * build_data: datasets. Two ways to carry a dataset's data into the image:
 *
 * - chunk extents: fixed-size types whose stored element bytes are the HDF5 element bytes
 *   (everything but object references). The dataset is chunked with the store's own chunk
 *   shape (top-level layout.dims, which HSDS may have changed from the source's), declared
 *   without filters, and every chunk object that exists is written as a placeholder: reading
 *   it later fetches and decodes that object. Chunks that do not exist are not declared, so
 *   HDF5 readers see the fill value there.
 * - values: variable-length data and references cannot be served byte for byte (HDF5 keeps
 *   vlen data in a global heap and references are addresses), so those chunks are fetched
 *   now, converted, and written for real; scalar datasets too (HDF5 cannot chunk them).
 *
 * Chunk extents are declared when the dataset is created, values once every object exists.
 * Neither may cost more than the chunks that exist: the chunk index HDF5 would pick for a
 * sparse grid is replaced by one that grows with the chunks written
 * (build_data_index_by_stored_chunks). A dataset that cannot be made as stored is shown as a
 * placeholder whose reads fail
 * (create_placeholder); a chunk whose values cannot be written reads as EIO
 * (poison_value_chunk). What cannot be shown even so is left out. Each is noted once
 * (build_omit).
 *
 * Files: build_data_plan.c reads the dataset JSON and makes the dataset as stored,
 * build_data_extents.c serves its chunks as extents, build_data_values.c writes its values;
 * this one picks the way and makes the placeholders.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_data.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/why.h"

#define PLACEHOLDER_CHUNK_BYTES (1u << 30)
#define PLACEHOLDER_CHUNKS_MAX (1u << 20)

int build_dataset_fill_refers(const struct build_obj *o)
{
    const json_t *fv = json_object_get(json_object_get(o->json, "creationProperties"), "fillValue");
    return fv && !json_is_null(fv) &&
           (h5type_traits(json_object_get(o->json, "type")) & H5TYPE_HAS_REF) != 0;
}

/* ---- placeholders: what cannot be shown as stored, shown unreadable ---- */

/*
 * How a placeholder holds its data: chunked, allocated at creation and never written (HDF5's
 * implicit chunk index: one allocation and no index, a hole that costs nothing however large),
 * in chunks of up to PLACEHOLDER_CHUNK_BYTES, whole rows first. Not contiguous: HDF5 readers
 * keep a failed read of contiguous data in their sieve buffer and return zeros for it the next
 * time, while a chunk that fails to read is not kept. Allocation costs time per chunk, hence
 * PLACEHOLDER_CHUNKS_MAX. 0, or -EFBIG (too large to show).
 */
static int placeholder_chunks(const struct dset_plan *p, size_t elem, hsize_t *c)
{
    uint64_t bytes = elem ? elem : 1, chunks = 1;
    for (int k = p->rank - 1; k >= 0; k--) {
        uint64_t fit = PLACEHOLDER_CHUNK_BYTES / bytes;
        c[k] = p->dims[k] < fit ? p->dims[k] : fit ? fit : 1;
        bytes *= c[k];
        uint64_t n = p->dims[k] / c[k] + (p->dims[k] % c[k] != 0);
        if (n > PLACEHOLDER_CHUNKS_MAX / chunks)
            return -EFBIG;
        chunks *= n;
    }
    return 0;
}

static int plan_has_data(const struct dset_plan *p)
{
    for (int k = 0; k < p->rank; k++)
        if (p->dims[k] == 0)
            return 0;
    return p->rank > 0;
}

static hid_t placeholder_plist(const struct dset_plan *p, hid_t tid, char *why, size_t why_len)
{
    hsize_t c[IMAGE_MAX_RANK];
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int ok = dcpl >= 0 && build_object_plist(dcpl) == 0;
    if (ok && plan_has_data(p)) { /* else nothing to read: the default layout */
        if (placeholder_chunks(p, H5Tget_size(tid), c) != 0) {
            why_set(why, why_len, "too large to show even as a placeholder");
            ok = 0;
        } else {
            ok = H5Pset_chunk(dcpl, p->rank, c) >= 0 &&
                 H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
                 H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0;
        }
    }
    if (!ok && dcpl >= 0) {
        H5Pclose(dcpl);
        return H5I_INVALID_HID;
    }
    return dcpl;
}

/* The placeholder with type tid; its shape is the dataset's, with fixed maximum dims (an
 * implicit chunk index cannot grow). why: the reason it could not be made. */
static int try_placeholder(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                           hid_t tid, char *why, size_t why_len)
{
    size_t n;
    hid_t space = p->rank == 0 ? build_dataspace(p->shape, &n, why, why_len)
                               : H5Screate_simple(p->rank, p->dims, NULL);
    hid_t dcpl = space >= 0 ? placeholder_plist(p, tid, why, why_len) : H5I_INVALID_HID;
    if (dcpl >= 0 && (o->hid = H5Dcreate_anon(b->file, tid, space, dcpl, H5P_DEFAULT)) < 0)
        why_set(why, why_len, "HDF5 refused even a placeholder");
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return o->hid >= 0;
}

/* Its type when HDF5 can make it, else an opaque one of the stored element size. The opaque
 * type has no tag: h5py reads only untagged (or its own) opaque types, and a tag would make
 * reads fail on the type instead of with EIO. */
static int make_placeholder(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                            char *why, size_t why_len)
{
    if (p->tid >= 0 && try_placeholder(b, o, p, p->tid, why, why_len))
        return 1;
    hid_t opaque = H5Tcreate(H5T_OPAQUE, p->stored_size ? p->stored_size : 1);
    int made = opaque >= 0 && try_placeholder(b, o, p, opaque, why, why_len);
    if (opaque >= 0)
        H5Tclose(opaque);
    return made;
}

/* A scalar cannot be chunked, and an unreadable contiguous value would read as zeros the
 * second time (placeholder_chunks): it cannot be shown unreadable. */
static int placeholder_possible(const struct dset_plan *p, char *why, size_t why_len)
{
    const char *cls = hjson_text(json_object_get(p->shape, "class"));
    if (!p->shape_ok)
        why_set(why, why_len, "its shape is not one HDF5 can make");
    else if (p->rank == 0 && (!cls || strcmp(cls, "H5S_NULL") != 0))
        why_set(why, why_len, "a scalar cannot be shown unreadable");
    else
        return 1;
    return 0;
}

/*
 * Dataset o cannot be made as stored (why): it is shown in its place with what could be read
 * of it (its type, or an opaque one; its shape) and its storage declared unreadable, so h5ls
 * lists it and every read of its data fails with EIO instead of it vanishing. Left out (its
 * links too) when even that cannot be made.
 */
static int create_placeholder(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                              const char *why)
{
    char no[200] = "", full[420];
    if (!placeholder_possible(p, no, sizeof no) || !make_placeholder(b, o, p, no, sizeof no)) {
        o->dropped = 1;
        snprintf(full, sizeof full, "%s; %s", why, no);
        return build_omit(b, IMAGE_OMIT_OBJECT, o->id, build_path(b, o), NULL, full);
    }
    o->data_done = 1;
    int rc = 0;
    hsize_t size = H5Dget_storage_size(o->hid), zero[IMAGE_MAX_RANK] = { 0 }, first;
    haddr_t addr = HADDR_UNDEF;
    unsigned mask;
    uint32_t index = UINT32_MAX;
    if (size > 0) { /* one allocation from the first chunk on */
        if (H5Dget_chunk_info_by_coord(o->hid, zero, &mask, &addr, &first) < 0 ||
            addr == HADDR_UNDEF)
            return -EIO;
        rc = build_data_poison_extent(b, o, addr, size, 0, &index);
    }
    return rc ? rc : build_omit(b, IMAGE_OMIT_PLACEHOLDER, o->id, build_path(b, o), NULL, why);
}

int build_dataset_create(struct builder *b, struct build_obj *o)
{
    struct dset_plan p;
    char why[200] = "HDF5 refused it";
    int rc = build_data_plan(b, o, &p, why, sizeof why);
    if (rc == 0 && p.virtual) { /* its values are its sources': nothing to fetch or write */
        rc = build_data_create_as_stored(b, o, &p, 0, why, sizeof why);
        o->data_done = rc == 0;
    } else if (rc == 0 && p.rank > 0 && !p.by_value)
        rc = build_data_create_extents(b, o, &p, why, sizeof why);
    else if (rc == 0)
        rc = build_data_create_for_values(b, o, &p, why, sizeof why);
    if (rc == -EINVAL)
        rc = create_placeholder(b, o, &p, why);
    build_data_plan_close(&p);
    return rc;
}
