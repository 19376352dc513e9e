/*
 * ingest_vds: a virtual dataset's mappings -> the "h5osfs": {"virtual": [...]} member of its
 * JSON (doc/image.md, "Virtual datasets"). The mappings are kept, never the values HDF5 reads
 * through them: a source that is not beside the file being stored reads as the fill value,
 * which must never be stored as if it were the data (issue 27.1).
 *
 * A selection is {"class": "all"}, {"class": "none"}, a regular hyperslab {"class":
 * "hyperslab", "start", "stride", "count", "block"} (a count or block may be "H5S_UNLIMITED"), or any
 * other hyperslab as its blocks {"class": "blocks", "blocks": [[start, end], ...]} (corners,
 * inclusive). A source selection also names the source extent HDF5 stated ("dims"), when it
 * states one. HDF5 refuses point selections in a mapping, so none can be met here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"
#include "h5osfs/ingest/ingest_int.h"

#define NAME_MAX_BYTES 4096  /* source file and dataset names */
#define VDS_BLOCKS_MAX 65536 /* as the image takes them (src/image/build_vds.c) */

static json_t *u64_array(int rank, const hsize_t *v, int unlimited_ok)
{
    json_t *a = json_array();
    for (int k = 0; a && k < rank; k++) {
        json_t *x = unlimited_ok && v[k] == H5S_UNLIMITED ? json_string("H5S_UNLIMITED")
                    : v[k] > (hsize_t)INT64_MAX           ? NULL
                                                          : json_integer((json_int_t)v[k]);
        if (json_array_append_new(a, x) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *regular_json(hid_t space, int rank)
{
    hsize_t start[INGEST_MAX_RANK], stride[INGEST_MAX_RANK], count[INGEST_MAX_RANK],
        block[INGEST_MAX_RANK];
    if (H5Sget_regular_hyperslab(space, start, stride, count, block) < 0)
        return NULL;
    json_t *h = json_pack("{s:s,s:o*,s:o*,s:o*,s:o*}", "class", "hyperslab", "start",
                          u64_array(rank, start, 0), "stride", u64_array(rank, stride, 0), "count",
                          u64_array(rank, count, 1), "block", u64_array(rank, block, 1));
    if (h && json_object_size(h) != 5) { /* an array failed */
        json_decref(h);
        h = NULL;
    }
    return h;
}

/* An irregular hyperslab as the list of its blocks. */
static json_t *blocks_json(hid_t space, int rank)
{
    hssize_t n = H5Sget_select_hyper_nblocks(space);
    if (n < 0 || (uint64_t)n > VDS_BLOCKS_MAX)
        return NULL;
    hsize_t *buf = malloc(((size_t)n ? (size_t)n : 1) * 2 * (size_t)rank * sizeof *buf);
    json_t *list = json_array();
    int ok = buf && list && H5Sget_select_hyper_blocklist(space, 0, (hsize_t)n, buf) >= 0;
    for (hssize_t i = 0; ok && i < n; i++) {
        const hsize_t *corners = buf + (size_t)i * 2 * (size_t)rank;
        json_t *b =
            json_pack("[o*,o*]", u64_array(rank, corners, 0), u64_array(rank, corners + rank, 0));
        ok = b && json_array_size(b) == 2 && json_array_append_new(list, b) == 0;
    }
    free(buf);
    json_t *out = ok ? json_pack("{s:s,s:O}", "class", "blocks", "blocks", list) : NULL;
    json_decref(list);
    return out;
}

/* The selection of space; with_dims: the extent too (a source's). NULL: HDF5 failed or a
 * selection the member cannot say (points), or out of memory. */
static json_t *selection_json(hid_t space, int with_dims)
{
    int rank = H5Sget_simple_extent_ndims(space);
    H5S_sel_type type = H5Sget_select_type(space);
    json_t *sel = NULL;
    if (rank < 0 || rank > INGEST_MAX_RANK)
        return NULL;
    if (type == H5S_SEL_ALL || type == H5S_SEL_NONE)
        sel = json_pack("{s:s}", "class", type == H5S_SEL_ALL ? "all" : "none");
    else if (type == H5S_SEL_HYPERSLABS && rank > 0)
        sel = H5Sis_regular_hyperslab(space) > 0 ? regular_json(space, rank)
                                                 : blocks_json(space, rank);
    hsize_t dims[INGEST_MAX_RANK];
    if (sel && with_dims && rank > 0 &&
        (H5Sget_simple_extent_dims(space, dims, NULL) < 0 ||
         json_object_set_new(sel, "dims", u64_array(rank, dims, 0)) != 0)) {
        json_decref(sel);
        sel = NULL;
    }
    return sel;
}

static json_t *mapping_json(hid_t dcpl, size_t i)
{
    char file[NAME_MAX_BYTES], dataset[NAME_MAX_BYTES];
    ssize_t fl = H5Pget_virtual_filename(dcpl, i, file, sizeof file);
    ssize_t dl = H5Pget_virtual_dsetname(dcpl, i, dataset, sizeof dataset);
    if (fl < 0 || dl < 0 || (size_t)fl >= sizeof file || (size_t)dl >= sizeof dataset)
        return NULL;
    hid_t vspace = H5Pget_virtual_vspace(dcpl, i), src = H5Pget_virtual_srcspace(dcpl, i);
    json_t *out = vspace < 0 || src < 0 ? NULL
                                        : json_pack("{s:s,s:s,s:o*,s:o*}", "file", file, "dataset",
                                                    dataset, "src_select", selection_json(src, 1),
                                                    "vds_select", selection_json(vspace, 0));
    if (out && json_object_size(out) != 4) { /* a selection failed */
        json_decref(out);
        out = NULL;
    }
    if (vspace >= 0)
        H5Sclose(vspace);
    if (src >= 0)
        H5Sclose(src);
    return out;
}

int ingest_vds_json(struct ingest *g, const char *path, hid_t dcpl, json_t **member)
{
    size_t count = 0;
    json_t *list = json_array();
    *member = NULL;
    if (!list)
        return -ENOMEM;
    int rc = H5Pget_virtual_count(dcpl, &count) < 0 || count == 0 ? -EIO : 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        json_t *m = mapping_json(dcpl, i);
        if (!m || json_array_append_new(list, m) != 0) {
            log_error("%s: %s: mapping %zu of the virtual dataset cannot be read", g->log_name,
                      path, i);
            rc = -EIO;
        }
    }
    if (rc == 0 && !(*member = json_pack("{s:O}", "virtual", list)))
        rc = -ENOMEM;
    if (rc == -EIO && count == 0)
        log_error("%s: %s: the virtual dataset's mappings cannot be listed", g->log_name, path);
    json_decref(list);
    return rc;
}

int ingest_is_virtual(const json_t *dataset)
{
    return json_is_array(json_object_get(json_object_get(dataset, "h5osfs"), "virtual"));
}
