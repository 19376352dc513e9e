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
#include "h5osfs/util/grow.h"
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

/* ---- sources in the file itself ---- */

#define LINK_DEPTH_MAX 16 /* soft links followed, and virtual datasets chained, at most */

/* The object at HDF5 path `path` below group g (from the root when it starts with '/'),
 * following hard and soft links as HDF5 does; NULL when there is none (or too many soft
 * links): HDF5 then finds no source and reads the fill value. */
static const struct build_obj *resolve(struct builder *b, const struct build_obj *g,
                                       const char *path, int depth)
{
    char name[1024];
    const struct build_obj *cur = path[0] == '/' || !g ? build_find(b, b->root_id) : g;
    for (const char *p = path; cur && *p;) {
        size_t len = strcspn(p, "/");
        if (len >= sizeof name)
            return NULL;
        memcpy(name, p, len);
        name[len] = '\0';
        p += len + (p[len] == '/');
        if (len == 0 || strcmp(name, ".") == 0)
            continue;
        const json_t *link = json_object_get(json_object_get(cur->json, "links"), name);
        const char *cls = json_string_value(json_object_get(link, "class"));
        const char *id = json_string_value(json_object_get(link, "id"));
        const char *h5path = json_string_value(json_object_get(link, "h5path"));
        if (cur->cls != 'g' || !link)
            return NULL;
        if (id && (!cls || strcmp(cls, "H5L_TYPE_HARD") == 0))
            cur = build_find(b, id);
        else if (h5path && cls && strcmp(cls, "H5L_TYPE_SOFT") == 0 && depth < LINK_DEPTH_MAX)
            cur = resolve(b, cur, h5path, depth + 1);
        else
            return NULL; /* external (another file) or unusable: no source of this file */
    }
    return cur;
}

/* The rank a selection states: that of its coordinates; -1 for "all" and "none". */
static int stated_rank(const json_t *sel)
{
    const char *cls = json_string_value(json_object_get(sel, "class"));
    if (!cls || strcmp(cls, "all") == 0 || strcmp(cls, "none") == 0)
        return -1;
    return selection_rank(sel);
}

/* The virtual datasets a walk has seen: each is looked into once. */
struct seen {
    const struct build_obj **v;
    size_t n, cap;
};

/* 1 when reading virtual dataset v reaches target through sources of the file itself (or
 * the chain is too long to tell), 0 when not, -ENOMEM. */
static int reaches(struct builder *b, const struct build_obj *v, const struct build_obj *target,
                   struct seen *seen, int depth)
{
    for (size_t i = 0; i < seen->n; i++)
        if (seen->v[i] == v)
            return 0;
    const struct build_obj **more = grow_array(seen->v, &seen->cap, seen->n + 1, sizeof *more, 16);
    if (!more)
        return -ENOMEM;
    seen->v = more;
    seen->v[seen->n++] = v;
    const json_t *list = json_object_get(json_object_get(v->json, "h5osfs"), "virtual");
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *m = json_array_get(list, i);
        const char *file = json_string_value(json_object_get(m, "file"));
        const char *dataset = json_string_value(json_object_get(m, "dataset"));
        const struct build_obj *src =
            file && dataset && strcmp(file, ".") == 0 ? resolve(b, NULL, dataset, 0) : NULL;
        if (!src || src->cls != 'd')
            continue;
        if (src == target)
            return 1;
        if (build_vds_is_virtual(src->json)) {
            int rc = depth >= LINK_DEPTH_MAX ? 1 : reaches(b, src, target, seen, depth + 1);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/*
 * HDF5 1.10 crashes a reader of a mapping whose source in the same file is the virtual
 * dataset itself, through any chain of virtual datasets (endless recursion), or whose source
 * selection is not of the source's rank (a division by zero, or a write past a buffer): a
 * stored member must not make the mount's file crash its readers. 0, or -EINVAL (why).
 * Sources in other files are the reader's to open, as for any file.
 */
static int own_source_readable(struct builder *b, const struct build_obj *o, const json_t *m,
                               char *why, size_t why_len)
{
    const char *file = json_string_value(json_object_get(m, "file"));
    const char *dataset = json_string_value(json_object_get(m, "dataset"));
    const struct build_obj *src = strcmp(file, ".") == 0 ? resolve(b, NULL, dataset, 0) : NULL;
    if (!src || src->cls != 'd')
        return 0; /* not found in the file: HDF5 reads the fill value */
    const json_t *dims = json_object_get(json_object_get(src->json, "shape"), "dims");
    int src_rank = (int)json_array_size(dims), sel_rank;
    if ((sel_rank = stated_rank(json_object_get(m, "src_select"))) >= 0 && sel_rank != src_rank)
        return why_reject(why, why_len, "a source selection of rank %d for %s of rank %d", sel_rank,
                          dataset, src_rank);
    struct seen seen = { 0 };
    int cycle = src == o ? 1 : build_vds_is_virtual(src->json) ? reaches(b, src, o, &seen, 0) : 0;
    free(seen.v);
    if (cycle < 0)
        return cycle;
    if (cycle)
        return why_reject(why, why_len, "its source %s leads back to the dataset itself", dataset);
    return 0;
}

int build_vds_mappings(struct builder *b, const struct build_obj *o, hid_t dcpl, int rank,
                       const hsize_t *dims, const hsize_t *maxdims, char *why, size_t why_len)
{
    const json_t *list = json_object_get(json_object_get(o->json, "h5osfs"), "virtual");
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
        const json_t *m = json_array_get(list, i);
        int rc = add_mapping(dcpl, m, rank, dims, maxdims, mwhy, sizeof mwhy);
        if (rc == 0)
            rc = own_source_readable(b, o, m, mwhy, sizeof mwhy);
        if (rc == -ENOMEM)
            return why_oom(why, why_len); /* the build fails: not the mapping's fault */
        if (rc != 0)
            return why_reject(why, why_len, "virtual mapping %zu: %s", i, mwhy);
    }
    return 0;
}
