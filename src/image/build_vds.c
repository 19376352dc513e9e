/*
 * build_vds: a virtual dataset, from the "h5osfs": {"virtual": [...]} member its JSON keeps
 * (src/ingest/ingest_vds.c writes it; doc/image.md, "Virtual datasets", says its form). Each
 * mapping goes to the dataset's creation properties with H5Pset_virtual, so the library writes
 * the layout message (class 3) and the global heap object of the mappings as it writes them for
 * any file, and readers resolve the sources as they always do: "." is the file itself, a
 * relative name is looked for beside it (in the mount: another domain of the same folder).
 * The member is input like any stored JSON: what does not parse makes the dataset unreadable
 * (-EINVAL with why), never a different mapping.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/util/why.h"

#define VDS_MAPPINGS_MAX (1u << 20)
#define VDS_BLOCKS_MAX (1u << 16) /* HDF5 merges each OR into its span tree: keep it small */
#define VDS_COORD_MAX ((json_int_t)1 << 62)

int build_vds_is_virtual(const json_t *dataset)
{
    return json_object_get(json_object_get(dataset, "h5osfs"), "virtual") != NULL;
}

/* n coordinates of arr (exactly rank of them), each in [min, 2^62]; unlimited_ok: the string
 * "H5S_UNLIMITED" too. 0 or -EINVAL. */
static int read_coords(const json_t *arr, int rank, hsize_t *out, json_int_t min, int unlimited_ok)
{
    if (!json_is_array(arr) || json_array_size(arr) != (size_t)rank)
        return -EINVAL;
    for (int k = 0; k < rank; k++) {
        const json_t *v = json_array_get(arr, (size_t)k);
        if (unlimited_ok && json_is_string(v) &&
            strcmp(json_string_value(v), "H5S_UNLIMITED") == 0) {
            out[k] = H5S_UNLIMITED;
            continue;
        }
        if (!json_is_integer(v) || json_integer_value(v) < min ||
            json_integer_value(v) > VDS_COORD_MAX)
            return -EINVAL;
        out[k] = (hsize_t)json_integer_value(v);
    }
    return 0;
}

static int select_regular(hid_t space, int rank, const json_t *sel, char *why, size_t why_len)
{
    hsize_t start[IMAGE_MAX_RANK], stride[IMAGE_MAX_RANK], count[IMAGE_MAX_RANK],
        block[IMAGE_MAX_RANK];
    if (read_coords(json_object_get(sel, "start"), rank, start, 0, 0) != 0 ||
        read_coords(json_object_get(sel, "stride"), rank, stride, 1, 0) != 0 ||
        read_coords(json_object_get(sel, "count"), rank, count, 1, 1) != 0 ||
        read_coords(json_object_get(sel, "block"), rank, block, 1, 1) != 0)
        return why_reject(why, why_len,
                          "a hyperslab's start, stride, count or block is not %d "
                          "coordinates",
                          rank);
    if (H5Sselect_hyperslab(space, H5S_SELECT_SET, start, stride, count, block) < 0)
        return why_reject(why, why_len, "HDF5 refused a hyperslab");
    return 0;
}

static int select_blocks(hid_t space, int rank, const json_t *sel, char *why, size_t why_len)
{
    const json_t *blocks = json_object_get(sel, "blocks");
    size_t n = json_array_size(blocks);
    if (!json_is_array(blocks) || n == 0 || n > VDS_BLOCKS_MAX)
        return why_reject(why, why_len, "\"blocks\" is not a list of 1 to %u blocks",
                          VDS_BLOCKS_MAX);
    for (size_t i = 0; i < n; i++) {
        const json_t *b = json_array_get(blocks, i);
        hsize_t lo[IMAGE_MAX_RANK], hi[IMAGE_MAX_RANK], count[IMAGE_MAX_RANK];
        if (json_array_size(b) != 2 || read_coords(json_array_get(b, 0), rank, lo, 0, 0) != 0 ||
            read_coords(json_array_get(b, 1), rank, hi, 0, 0) != 0)
            return why_reject(why, why_len, "block %zu is not two corners of %d coordinates", i,
                              rank);
        for (int k = 0; k < rank; k++) {
            if (hi[k] < lo[k])
                return why_reject(why, why_len, "block %zu ends before it starts", i);
            count[k] = hi[k] - lo[k] + 1;
        }
        if (H5Sselect_hyperslab(space, i ? H5S_SELECT_OR : H5S_SELECT_SET, lo, NULL, count, NULL) <
            0)
            return why_reject(why, why_len, "HDF5 refused block %zu", i);
    }
    return 0;
}

/* Select in space (of rank) what sel says. 0 or -EINVAL (why). */
static int apply_selection(hid_t space, int rank, const json_t *sel, char *why, size_t why_len)
{
    const char *cls = json_string_value(json_object_get(sel, "class"));
    if (!cls)
        return why_reject(why, why_len, "a selection has no class");
    if (strcmp(cls, "all") == 0)
        return H5Sselect_all(space) < 0 ? why_reject(why, why_len, "HDF5 refused \"all\"") : 0;
    if (strcmp(cls, "none") == 0)
        return H5Sselect_none(space) < 0 ? why_reject(why, why_len, "HDF5 refused \"none\"") : 0;
    if (rank == 0)
        return why_reject(why, why_len, "a hyperslab of a scalar");
    if (strcmp(cls, "hyperslab") == 0)
        return select_regular(space, rank, sel, why, why_len);
    if (strcmp(cls, "blocks") == 0)
        return select_blocks(space, rank, sel, why, why_len);
    return why_reject(why, why_len, "unknown selection class \"%.40s\"", cls);
}

/* The rank of a hyperslab selection: the length of its coordinate lists. */
static int selection_rank(const json_t *sel)
{
    const json_t *start = json_object_get(sel, "start");
    if (start)
        return (int)json_array_size(start);
    return (int)json_array_size(
        json_array_get(json_array_get(json_object_get(sel, "blocks"), 0), 0));
}

/* The elements one source gives the virtual selection: all of them, or for a printf-style
 * mapping (an unlimited virtual selection, one source per block) those of one block. */
static hsize_t elements_per_source(hid_t vspace)
{
    hssize_t n = H5Sget_select_npoints(vspace);
    hsize_t start[IMAGE_MAX_RANK], stride[IMAGE_MAX_RANK], count[IMAGE_MAX_RANK],
        block[IMAGE_MAX_RANK];
    int rank = H5Sget_simple_extent_ndims(vspace);
    if (n >= 0 && (hsize_t)n != H5S_UNLIMITED)
        return (hsize_t)n;
    if (rank < 1 || rank > IMAGE_MAX_RANK ||
        H5Sget_regular_hyperslab(vspace, start, stride, count, block) < 0)
        return 0; /* HDF5 then refuses the mapping, which says why */
    hsize_t one = 1;
    for (int k = 0; k < rank; k++) {
        hsize_t span = count[k] == H5S_UNLIMITED ? block[k] : count[k] * block[k];
        if (block[k] == H5S_UNLIMITED || (span && one > UINT64_MAX / span))
            return 0;
        one *= span;
    }
    return one;
}

/* The source's dataspace: the extent HDF5 stated at ingest ("dims"), any maximum (an unlimited
 * selection must fit); without one (HDF5 states none for an "all" selection), one dimension of
 * as many elements as the virtual selection has, which is all HDF5 checks then. */
static hid_t source_space(const json_t *sel, hid_t vspace, int *rank, char *why, size_t why_len)
{
    const json_t *dims = json_object_get(sel, "dims");
    hsize_t d[IMAGE_MAX_RANK], max[IMAGE_MAX_RANK];
    *rank = dims ? (int)json_array_size(dims) : 1;
    if (!dims && selection_rank(sel) > 0) {
        why_set(why, why_len, "a source hyperslab without \"dims\"");
        return H5I_INVALID_HID;
    }
    if (*rank < 1 || *rank > IMAGE_MAX_RANK || (dims && read_coords(dims, *rank, d, 0, 0) != 0)) {
        why_set(why, why_len, "the source's \"dims\" are not 1 to %d coordinates", IMAGE_MAX_RANK);
        return H5I_INVALID_HID;
    }
    if (!dims)
        d[0] = elements_per_source(vspace);
    for (int k = 0; k < *rank; k++)
        max[k] = H5S_UNLIMITED;
    hid_t space = H5Screate_simple(*rank, d, max);
    if (space < 0)
        why_set(why, why_len, "HDF5 refused the source's extent");
    return space;
}

/* A name of the mapping: a non-empty string without NUL. */
static const char *mapping_name(const json_t *m, const char *key)
{
    const json_t *v = json_object_get(m, key);
    const char *s = json_string_value(v);
    return s && *s && strlen(s) == json_string_length(v) ? s : NULL;
}

static int add_mapping(hid_t dcpl, const json_t *m, int rank, const hsize_t *dims,
                       const hsize_t *maxdims, char *why, size_t why_len)
{
    const char *file = mapping_name(m, "file"), *dataset = mapping_name(m, "dataset");
    const json_t *vsel = json_object_get(m, "vds_select"), *ssel = json_object_get(m, "src_select");
    if (!file || !dataset || !json_is_object(vsel) || !json_is_object(ssel))
        return why_reject(why, why_len,
                          "it lacks \"file\", \"dataset\", \"vds_select\" or \"src_select\"");
    hid_t vspace = H5Screate_simple(rank, dims, maxdims), src = H5I_INVALID_HID;
    int src_rank = 0, rc = vspace < 0 ? why_reject(why, why_len, "HDF5 refused the shape") : 0;
    if (rc == 0)
        rc = apply_selection(vspace, rank, vsel, why, why_len);
    if (rc == 0 && (src = source_space(ssel, vspace, &src_rank, why, why_len)) < 0)
        rc = -EINVAL;
    if (rc == 0)
        rc = apply_selection(src, src_rank, ssel, why, why_len);
    if (rc == 0 && H5Pset_virtual(dcpl, vspace, file, dataset, src) < 0)
        rc = why_reject(why, why_len, "HDF5 refused it (the selections do not agree)");
    if (vspace >= 0)
        H5Sclose(vspace);
    if (src >= 0)
        H5Sclose(src);
    return rc;
}

int build_vds_mappings(const json_t *dataset, hid_t dcpl, int rank, const hsize_t *dims,
                       const hsize_t *maxdims, char *why, size_t why_len)
{
    const json_t *list = json_object_get(json_object_get(dataset, "h5osfs"), "virtual");
    size_t n = json_array_size(list);
    if (!json_is_array(list) || n == 0 || n > VDS_MAPPINGS_MAX)
        return why_reject(why, why_len,
                          "h5osfs.virtual is not a list of 1 to %u mappings of its virtual "
                          "dataset",
                          VDS_MAPPINGS_MAX);
    if (rank < 1)
        return why_reject(why, why_len, "a virtual dataset needs a simple shape");
    for (size_t i = 0; i < n; i++) {
        char mwhy[160] = "";
        if (add_mapping(dcpl, json_array_get(list, i), rank, dims, maxdims, mwhy, sizeof mwhy))
            return why_reject(why, why_len, "virtual mapping %zu: %s", i, mwhy);
    }
    return 0;
}
