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
 *
 * Whether HDF5 finds a mapping's source from the file is looked up only for the warning
 * (ingest_vds_missing_source).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5osfs/ingest/ingest_int.h"

#define NAME_MAX_BYTES 4096  /* source file and dataset names */
#define VDS_BLOCKS_MAX 65536 /* as the image takes them (src/image/build_vds.c) */

/* JSON values of the rank coordinates v (unlimited_ok: H5S_UNLIMITED as "H5S_UNLIMITED").
 * 0; -EIO: one cannot be said; -ENOMEM. */
static int u64_array(int rank, const hsize_t *v, int unlimited_ok, json_t **out)
{
    if (!(*out = json_array()))
        return -ENOMEM;
    for (int k = 0; k < rank; k++) {
        int unlimited = unlimited_ok && v[k] == H5S_UNLIMITED;
        if (!unlimited && v[k] > (hsize_t)INT64_MAX)
            return -EIO;
        json_t *x = unlimited ? json_string("H5S_UNLIMITED") : json_integer((json_int_t)v[k]);
        if (json_array_append_new(*out, x) != 0)
            return -ENOMEM;
    }
    return 0;
}

/* Member name of sel: the coordinates v. 0, -EIO or -ENOMEM. */
static int set_coords(json_t *sel, const char *name, int rank, const hsize_t *v, int unlimited_ok)
{
    json_t *a = NULL;
    int rc = u64_array(rank, v, unlimited_ok, &a);
    if (rc == 0 && json_object_set(sel, name, a) != 0)
        rc = -ENOMEM;
    json_decref(a);
    return rc;
}

static int regular_json(hid_t space, int rank, json_t *sel)
{
    hsize_t start[INGEST_MAX_RANK], stride[INGEST_MAX_RANK], count[INGEST_MAX_RANK],
        block[INGEST_MAX_RANK];
    if (H5Sget_regular_hyperslab(space, start, stride, count, block) < 0)
        return -EIO;
    int rc = json_object_set_new(sel, "class", json_string("hyperslab")) ? -ENOMEM : 0;
    if (rc == 0)
        rc = set_coords(sel, "start", rank, start, 0);
    if (rc == 0)
        rc = set_coords(sel, "stride", rank, stride, 0);
    if (rc == 0)
        rc = set_coords(sel, "count", rank, count, 1);
    return rc == 0 ? set_coords(sel, "block", rank, block, 1) : rc;
}

/* An irregular hyperslab as the list of its blocks (start and end corners of each). */
static int blocks_json(hid_t space, int rank, json_t *sel)
{
    hssize_t n = H5Sget_select_hyper_nblocks(space);
    if (n <= 0 || n > VDS_BLOCKS_MAX)
        return -EIO;
    hsize_t *buf = malloc((size_t)n * 2 * (size_t)rank * sizeof *buf);
    json_t *list = json_array();
    int rc = !buf || !list                                                  ? -ENOMEM
             : H5Sget_select_hyper_blocklist(space, 0, (hsize_t)n, buf) < 0 ? -EIO
                                                                            : 0;
    for (hssize_t i = 0; rc == 0 && i < n; i++) {
        const hsize_t *corners = buf + (size_t)i * 2 * (size_t)rank;
        json_t *lo = NULL, *hi = NULL, *b = NULL;
        rc = u64_array(rank, corners, 0, &lo);
        if (rc == 0)
            rc = u64_array(rank, corners + rank, 0, &hi);
        if (rc == 0 && (!(b = json_pack("[OO]", lo, hi)) || json_array_append(list, b) != 0))
            rc = -ENOMEM;
        json_decref(lo);
        json_decref(hi);
        json_decref(b);
    }
    if (rc == 0 && (json_object_set_new(sel, "class", json_string("blocks")) != 0 ||
                    json_object_set(sel, "blocks", list) != 0))
        rc = -ENOMEM;
    free(buf);
    json_decref(list);
    return rc;
}

/* The selection of space; with_dims: its extent too (a source's). 0; -EIO: HDF5 failed, or a
 * selection the member cannot say (points); -ENOMEM. */
static int selection_json(hid_t space, int with_dims, json_t **out)
{
    int rank = H5Sget_simple_extent_ndims(space);
    H5S_sel_type type = H5Sget_select_type(space);
    hsize_t dims[INGEST_MAX_RANK];
    if (rank < 0 || rank > INGEST_MAX_RANK)
        return -EIO;
    if (!(*out = json_object()))
        return -ENOMEM;
    int rc = -EIO;
    if (type == H5S_SEL_ALL || type == H5S_SEL_NONE)
        rc = json_object_set_new(*out, "class", json_string(type == H5S_SEL_ALL ? "all" : "none"))
                 ? -ENOMEM
                 : 0;
    else if (type == H5S_SEL_HYPERSLABS && rank > 0)
        rc = H5Sis_regular_hyperslab(space) > 0 ? regular_json(space, rank, *out)
                                                : blocks_json(space, rank, *out);
    if (rc == 0 && with_dims && rank > 0)
        rc = H5Sget_simple_extent_dims(space, dims, NULL) < 0
                 ? -EIO
                 : set_coords(*out, "dims", rank, dims, 0);
    return rc;
}

/* A name as a JSON string. 0; -EIO: not UTF-8 (HDF5 keeps bytes), which JSON cannot say;
 * -ENOMEM. */
static int name_json(const char *name, json_t **out)
{
    if ((*out = json_string(name)))
        return 0;
    json_t *probe = json_string(""); /* tells the two failures of json_string apart */
    json_decref(probe);
    return probe ? -EIO : -ENOMEM;
}

static int mapping_json(hid_t dcpl, size_t i, json_t **out)
{
    char file[NAME_MAX_BYTES], dataset[NAME_MAX_BYTES];
    ssize_t fl = H5Pget_virtual_filename(dcpl, i, file, sizeof file);
    ssize_t dl = H5Pget_virtual_dsetname(dcpl, i, dataset, sizeof dataset);
    if (fl < 0 || dl < 0 || (size_t)fl >= sizeof file || (size_t)dl >= sizeof dataset)
        return -EIO;
    json_t *f = NULL, *d = NULL, *ss = NULL, *vs = NULL;
    hid_t vspace = H5Pget_virtual_vspace(dcpl, i), src = H5Pget_virtual_srcspace(dcpl, i);
    int rc = vspace < 0 || src < 0 ? -EIO : name_json(file, &f);
    if (rc == 0)
        rc = name_json(dataset, &d);
    if (rc == 0)
        rc = selection_json(src, 1, &ss);
    if (rc == 0)
        rc = selection_json(vspace, 0, &vs);
    if (rc == 0 && !(*out = json_pack("{s:O,s:O,s:O,s:O}", "file", f, "dataset", d, "src_select",
                                      ss, "vds_select", vs)))
        rc = -ENOMEM;
    json_decref(f);
    json_decref(d);
    json_decref(ss);
    json_decref(vs);
    if (vspace >= 0)
        H5Sclose(vspace);
    if (src >= 0)
        H5Sclose(src);
    return rc;
}

int ingest_vds_json(hid_t dcpl, json_t **member, char *why, size_t why_len)
{
    size_t count = 0;
    json_t *list = NULL;
    *member = NULL;
    if (H5Pget_virtual_count(dcpl, &count) < 0 || count == 0) {
        snprintf(why, why_len, "HDF5 cannot list its mappings");
        return -EIO;
    }
    int rc = (list = json_array()) ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        json_t *m = NULL;
        rc = mapping_json(dcpl, i, &m);
        if (rc == 0 && json_array_append_new(list, m) != 0)
            rc = -ENOMEM;
        else if (rc != 0)
            json_decref(m);
        if (rc == -EIO)
            snprintf(why, why_len,
                     "its mapping %zu cannot be read or said (a name not UTF-8, a selection "
                     "of points)",
                     i);
    }
    if (rc == 0 && !(*member = json_pack("{s:O}", "virtual", list)))
        rc = -ENOMEM;
    json_decref(list);
    return rc;
}

int ingest_is_virtual(const json_t *dataset)
{
    return json_is_array(json_object_get(json_object_get(dataset, "h5osfs"), "virtual"));
}

/* ---- virtual datasets' sources ---- */

/* A printf-style source name (H5Pset_virtual: "%b" the block number, "%%" a percent sign) for
 * block 0, the first source HDF5 looks for; plain names as they are. */
static char *first_block_name(const char *pattern)
{
    size_t n = strlen(pattern);
    char *out = malloc(n + 1), *o = out;
    for (const char *p = pattern; out && *p; p++) {
        if (p[0] == '%' && (p[1] == 'b' || p[1] == '%')) {
            *o++ = p[1] == 'b' ? '0' : '%';
            p++;
        } else {
            *o++ = *p;
        }
    }
    if (out)
        *o = '\0';
    return out;
}

/* 1 when file holds a dataset at path (names HDF5 cannot resolve: 0). */
static int has_dataset(hid_t file, const char *path)
{
    hid_t obj = H5Oopen(file, path, H5P_DEFAULT);
    if (obj < 0)
        return 0;
    int is_dataset = H5Iget_type(obj) == H5I_DATASET;
    H5Oclose(obj);
    return is_dataset;
}

/* The file at path as a source: -1 when it does not open as HDF5 (HDF5 looks further), else
 * whether it holds the dataset (HDF5 takes the first file that opens). -ENOMEM: no path.
 * Only regular files are opened: a name in a user's file must not make the commit wait on a
 * FIFO or read a device. */
static int source_in(char *path, const char *dataset)
{
    struct stat st;
    if (!path)
        return -ENOMEM;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        free(path);
        return -1;
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    free(path);
    if (f < 0)
        return -1;
    int found = has_dataset(f, dataset);
    H5Fclose(f);
    return found;
}

static char *joined(const char *dir, size_t dir_len, const char *name)
{
    char *out;
    return asprintf(&out, "%.*s/%s", (int)dir_len, dir, name) < 0 ? NULL : out;
}

/* Whether HDF5 finds the source file name, from the file at own_path, where it looks for it
 * (H5Pset_virtual_prefix): an absolute name as it is, else its last component; then below each
 * folder of HDF5_VDS_PREFIX, the folder of the file, the name as it is (from the working
 * directory). 1 found, 0 missing, -ENOMEM. */
static int source_found(const char *own_path, const char *name, const char *dataset)
{
    const char *rel = name;
    int r = -1;
    if (name[0] == '/' && (r = source_in(strdup(name), dataset)) == -1)
        rel = strrchr(name, '/') + 1;
    for (const char *p = getenv("HDF5_VDS_PREFIX"); r == -1 && p && *p;) {
        size_t len = strcspn(p, ":");
        if (len > 0)
            r = source_in(joined(p, len, rel), dataset);
        p += len + (p[len] == ':');
    }
    const char *slash = strrchr(own_path, '/');
    if (r == -1)
        r = source_in(slash ? joined(own_path, (size_t)(slash - own_path), rel) : strdup(rel),
                      dataset);
    if (r == -1)
        r = source_in(strdup(rel), dataset);
    return r == -1 ? 0 : r;
}

int ingest_vds_missing_source(struct ingest *g, hid_t dcpl, char *what, size_t what_len)
{
    size_t count = 0;
    char own_path[4096];
    if (H5Pget_virtual_count(dcpl, &count) < 0 ||
        H5Fget_name(g->file, own_path, sizeof own_path) < 0) {
        snprintf(what, what_len, "HDF5 cannot list its mappings");
        return 1;
    }
    for (size_t i = 0; i < count; i++) {
        char file_pattern[4096], dset_pattern[4096];
        if (H5Pget_virtual_filename(dcpl, i, file_pattern, sizeof file_pattern) < 0 ||
            H5Pget_virtual_dsetname(dcpl, i, dset_pattern, sizeof dset_pattern) < 0) {
            snprintf(what, what_len, "HDF5 cannot read its mapping %zu", i);
            return 1;
        }
        char *file = first_block_name(file_pattern), *dset = first_block_name(dset_pattern);
        int found = !file || !dset           ? -ENOMEM
                    : strcmp(file, ".") == 0 ? has_dataset(g->file, dset)
                                             : source_found(own_path, file, dset);
        if (found == 0)
            snprintf(what, what_len, "its source dataset %s of file %s cannot be found", dset,
                     file);
        free(file);
        free(dset);
        if (found <= 0)
            return found < 0 ? found : 1;
    }
    return 0;
}
