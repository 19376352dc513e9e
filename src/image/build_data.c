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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/h5type.h"
#include "h5osfs/h5value.h"
#include "h5osfs/hjson.h"
#include "h5osfs/log.h"

#define V1_PROBE_MAX 1000000    /* v1 chunks cannot be listed: declare the grid up to this */

hid_t build_dataspace(const json_t *shape, size_t *n, char *why, size_t why_len);

struct dset_plan {
    const json_t *type, *shape, *layout, *cprops;
    hid_t tid;
    int rank;
    hsize_t dims[IMAGE_MAX_RANK], maxdims[IMAGE_MAX_RANK];
    uint64_t cdims[IMAGE_MAX_RANK];
    int chunked;                /* declared chunked in the image (simple shapes) */
    int by_value;               /* values written for real */
    size_t stored_size;         /* element size in chunk objects (fixed types) */
};

/* ---- reading the dataset JSON ---- */

static int read_dims(const json_t *arr, int rank, hsize_t *out, int allow_zero)
{
    for (int k = 0; k < rank; k++) {
        const json_t *v = json_array_get(arr, (size_t)k);
        if (!json_is_integer(v) || json_integer_value(v) < (allow_zero ? 0 : 1) ||
            json_integer_value(v) > ((json_int_t)1 << 50))
            return -EINVAL;
        out[k] = (hsize_t)json_integer_value(v);
    }
    return 0;
}

static int plan_shape(struct dset_plan *p, char *why, size_t why_len)
{
    const char *cls = hjson_text(json_object_get(p->shape, "class"));
    const json_t *dims = json_object_get(p->shape, "dims"), *max = json_object_get(p->shape, "maxdims");
    if (!cls || strcmp(cls, "H5S_SIMPLE") != 0)
        return 0;               /* NULL and SCALAR: rank 0 */
    p->rank = (int)json_array_size(dims);
    if (p->rank < 1 || p->rank > IMAGE_MAX_RANK || read_dims(dims, p->rank, p->dims, 1) != 0) {
        snprintf(why, why_len, "shape dims are not 1 to 32 non-negative integers");
        return -EINVAL;
    }
    if (max && (json_array_size(max) != (size_t)p->rank || read_dims(max, p->rank, p->maxdims, 1))) {
        snprintf(why, why_len, "maxdims do not match the shape");
        return -EINVAL;
    }
    for (int k = 0; k < p->rank; k++) {
        if (!max)
            p->maxdims[k] = p->dims[k];
        else if (p->maxdims[k] == 0)
            p->maxdims[k] = H5S_UNLIMITED;  /* HSDS writes 0 for unlimited (spec §3.4) */
        if (p->maxdims[k] < p->dims[k]) {
            snprintf(why, why_len, "maxdims smaller than dims");
            return -EINVAL;
        }
    }
    return 0;
}

static int plan_layout(struct dset_plan *p, char *why, size_t why_len)
{
    const json_t *dims = json_object_get(p->layout, "dims");
    hsize_t c[IMAGE_MAX_RANK];
    uint64_t bytes = p->stored_size ? p->stored_size : 16;
    if (p->rank == 0)
        return 0;
    if (json_array_size(dims) != (size_t)p->rank || read_dims(dims, p->rank, c, 0) != 0) {
        snprintf(why, why_len, "layout dims are missing, not positive or of the wrong rank");
        return -EINVAL;
    }
    for (int k = 0; k < p->rank; k++) {
        p->cdims[k] = c[k];
        if (bytes > IMAGE_CHUNK_MAX / c[k]) {
            snprintf(why, why_len, "a chunk of more than 2 GiB");
            return -EINVAL;
        }
        bytes *= c[k];
        /* HDF5 wants fixed dimensions no smaller than a chunk; HSDS does not care */
        if (p->maxdims[k] != H5S_UNLIMITED && c[k] > p->maxdims[k])
            p->by_value = 1;
    }
    p->chunked = 1;
    return 0;
}

static int plan_dataset(struct builder *b, struct build_obj *o, struct dset_plan *p, char *why,
                        size_t why_len)
{
    memset(p, 0, sizeof *p);
    p->type = json_object_get(o->json, "type");
    p->shape = json_object_get(o->json, "shape");
    p->layout = json_object_get(o->json, "layout");
    p->cprops = json_object_get(o->json, "creationProperties");
    p->tid = build_type(b, p->type, why, why_len);
    if (p->tid < 0)
        return -EINVAL;
    unsigned traits = h5type_traits(p->type);
    if (!(traits & H5TYPE_HAS_VLEN) && h5type_stored_size(p->type, &p->stored_size) != 0) {
        snprintf(why, why_len, "type has no stored size");
        return -EINVAL;
    }
    p->by_value = (traits & (H5TYPE_HAS_VLEN | H5TYPE_HAS_REF)) ||
                  H5Tget_size(p->tid) != p->stored_size;
    int rc = plan_shape(p, why, why_len);
    if (rc == 0)
        rc = plan_layout(p, why, why_len);
    if (p->rank == 0)
        p->by_value = 1;
    return rc;
}

/* ---- creating the dataset ---- */

static int set_fill_value(struct builder *b, const struct dset_plan *p, hid_t dcpl, char *why,
                          size_t why_len)
{
    const json_t *fv = json_object_get(p->cprops, "fillValue");
    const char *enc = hjson_text(json_object_get(p->cprops, "fillValue_encoding"));
    void *buf = NULL;
    int rc;
    if (!fv || json_is_null(fv) || (h5type_traits(p->type) & H5TYPE_HAS_VLEN))
        return 0;
    struct h5value_refs refs = { build_resolve_ref, b };
    if (enc && strcmp(enc, "base64") == 0 && json_is_string(fv)) {
        unsigned char *bytes;
        size_t len;
        rc = h5value_base64_decode(json_string_value(fv), json_string_length(fv), &bytes, &len);
        if (rc == 0) {
            rc = h5value_from_stored(p->type, p->tid, bytes, len, 1, &refs, &buf, why, why_len);
            free(bytes);
        }
    } else {
        rc = h5value_from_json(p->type, p->tid, fv, 1, &refs, &buf, why, why_len);
    }
    if (rc == 0 && H5Pset_fill_value(dcpl, p->tid, buf) < 0)
        rc = -EIO;
    if (buf)
        h5value_free(p->tid, buf, 1);
    return rc;
}

static hid_t dataset_plist(struct builder *b, const struct dset_plan *p, char *why, size_t why_len)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0)
        goto fail;
    if (p->chunked) {
        hsize_t c[IMAGE_MAX_RANK];
        for (int k = 0; k < p->rank; k++)
            c[k] = p->maxdims[k] != H5S_UNLIMITED && p->cdims[k] > p->maxdims[k]
                       ? (p->maxdims[k] ? p->maxdims[k] : 1) : p->cdims[k];
        if (H5Pset_chunk(dcpl, p->rank, c) < 0)
            goto fail;
    }
    if (set_fill_value(b, p, dcpl, why, why_len) != 0) {
        H5Pclose(dcpl);
        return H5I_INVALID_HID;
    }
    return dcpl;
fail:
    snprintf(why, why_len, "HDF5 refused the creation properties");
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return H5I_INVALID_HID;
}

static hid_t plan_space(const struct dset_plan *p, char *why, size_t why_len)
{
    size_t n;
    if (p->rank == 0)
        return build_dataspace(p->shape, &n, why, why_len);
    return H5Screate_simple(p->rank, p->dims, p->maxdims);
}

int build_dataset_fill_refers(const struct build_obj *o)
{
    const json_t *fv = json_object_get(json_object_get(o->json, "creationProperties"),
                                       "fillValue");
    return fv && !json_is_null(fv) &&
           (h5type_traits(json_object_get(o->json, "type")) & H5TYPE_HAS_REF) != 0;
}

int build_dataset_create(struct builder *b, struct build_obj *o)
{
    struct dset_plan p;
    char why[200] = "HDF5 refused it";
    hid_t space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
    int rc = plan_dataset(b, o, &p, why, sizeof why);
    if (rc == 0 && (space = plan_space(&p, why, sizeof why)) >= 0 &&
        (dcpl = dataset_plist(b, &p, why, sizeof why)) >= 0)
        o->hid = H5Dcreate_anon(b->file, p.tid, space, dcpl, H5P_DEFAULT);
    if (o->hid < 0) {
        log_error("%s: dataset %s (%s): %s: left out", b->domain_path, o->path, o->id, why);
        o->dropped = 1;
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (p.tid >= 0)
        H5Tclose(p.tid);
    return 0;
}

/* ---- which chunks exist ---- */

struct chunk_list {
    uint64_t *v;
    size_t n, cap;
};

static int chunk_list_add(struct chunk_list *l, uint64_t linear)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 256;
        uint64_t *nv = realloc(l->v, ncap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = ncap;
    }
    l->v[l->n++] = linear;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* "3_0_12" (after the dataset prefix and any "pN/") -> linear index; 0, 1 (outside), <0 bad. */
int build_parse_index(const struct image_dataset *ds, const char *s, uint64_t *linear)
{
    *linear = 0;
    for (int k = 0; k < ds->rank; k++) {
        char *end;
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end != (k + 1 < ds->rank ? '_' : '\0'))
            return -EINVAL;
        if (v >= ds->grid[k])
            return 1;           /* beyond the current shape: not part of this version */
        *linear = *linear * ds->grid[k] + v;
        s = end + 1;
    }
    return 0;
}

static const char *index_part(const struct image_dataset *ds, const char *rel)
{
    if (ds->partition_count > 0 && rel[0] == 'p') {
        const char *slash = strchr(rel, '/');
        return slash ? slash + 1 : NULL;
    }
    return strchr(rel, '/') ? NULL : rel;
}

static int list_page_chunks(struct builder *b, const struct image_dataset *ds,
                            const struct store_list *page, struct chunk_list *out, int *bad)
{
    size_t plen = strlen(ds->key_prefix);
    for (size_t i = 0; i < page->n_objects; i++) {
        const char *rel = page->objects[i].key + plen, *idx = index_part(ds, rel);
        uint64_t linear;
        if (strcmp(rel, ".dataset.json") == 0)
            continue;
        int rc = idx ? build_parse_index(ds, idx, &linear) : -EINVAL;
        if (rc < 0 && !(*bad)++)
            log_warn("%s: dataset %s: key %s is not a chunk of its grid: ignored",
                     b->domain_path, ds->path, page->objects[i].key);
        if (rc == 0 && chunk_list_add(out, linear) != 0)
            return -ENOMEM;
    }
    return 0;
}

static int list_chunks(struct builder *b, const struct image_dataset *ds, struct chunk_list *out)
{
    char *token = NULL;
    int rc, bad = 0;
    do {
        struct store_list page = { 0 };
        rc = store_list(b->src->store, ds->key_prefix, NULL, token, 0, &page);
        free(token);
        token = NULL;
        if (rc != 0)
            break;
        rc = list_page_chunks(b, ds, &page, out, &bad);
        token = page.next_token;
        page.next_token = NULL;
        store_list_free(&page);
    } while (token && rc == 0);
    free(token);
    if (rc == 0 && out->n > 1) {
        qsort(out->v, out->n, sizeof *out->v, cmp_u64);
        size_t w = 1;
        for (size_t i = 1; i < out->n; i++)
            if (out->v[i] != out->v[w - 1])
                out->v[w++] = out->v[i];
        out->n = w;
    }
    return rc == -ENOMEM ? rc : rc ? -EIO : 0;
}

static int all_chunks(const struct image_dataset *ds, struct chunk_list *out)
{
    uint64_t total = 1;
    for (int k = 0; k < ds->rank; k++)
        total = ds->grid[k] && total <= V1_PROBE_MAX / ds->grid[k] ? total * ds->grid[k]
                                                                   : V1_PROBE_MAX + 1;
    if (total > V1_PROBE_MAX)
        return -EFBIG;
    for (uint64_t i = 0; i < total; i++)
        if (chunk_list_add(out, i) != 0)
            return -ENOMEM;
    return 0;
}

int build_list_chunks(struct builder *b, const struct image_dataset *ds, uint64_t **v, size_t *n)
{
    struct chunk_list l = { 0 };
    int rc = schema_id_version(ds->id) == 1 ? all_chunks(ds, &l) : list_chunks(b, ds, &l);
    if (rc != 0) {
        free(l.v);
        return rc;
    }
    *v = l.v;
    *n = l.n;
    return 0;
}

static int all_chunks_nonzero(const struct image_dataset *ds)
{
    for (int k = 0; k < ds->rank; k++)
        if (ds->grid[k] == 0)
            return 0;
    return 1;
}

/* ---- the dataset table entry ---- */

static int add_dataset(struct builder *b, struct image_dataset **out)
{
    struct image *img = b->img;
    if (img->n_datasets == b->cap_datasets) {
        size_t ncap = b->cap_datasets ? b->cap_datasets * 2 : 16;
        struct image_dataset *n = realloc(img->datasets, ncap * sizeof *n);
        if (!n)
            return -ENOMEM;
        img->datasets = n;
        b->cap_datasets = ncap;
    }
    *out = &img->datasets[img->n_datasets++];
    memset(*out, 0, sizeof **out);
    return 0;
}

static int describe_dataset(struct build_obj *o, const struct dset_plan *p,
                            struct image_dataset *ds, char *why, size_t why_len)
{
    char probe[STORE_KEY_MAX + 1];
    uint64_t zero[IMAGE_MAX_RANK] = { 0 };
    ds->id = strdup(o->id);
    ds->path = strdup(o->path);
    ds->rank = p->rank;
    ds->itemsize = p->stored_size;
    ds->chunk_bytes = p->stored_size;
    ds->partition_count = (int)json_integer_value(json_object_get(p->layout, "partition_count"));
    for (int k = 0; k < p->rank; k++) {
        ds->dims[k] = p->dims[k];
        ds->chunk_dims[k] = p->cdims[k];
        ds->grid[k] = (p->dims[k] + p->cdims[k] - 1) / p->cdims[k];
        ds->chunk_bytes *= p->cdims[k];
    }
    if (!ds->id || !ds->path)
        return -ENOMEM;
    /* the prefix every chunk key of the dataset starts with: its chunk 0 key up to the index */
    if (schema_chunk_key(o->id, zero, p->rank, -1, probe, sizeof probe) != 0)
        return -EINVAL;
    char *cut = strrchr(probe, '/');
    if (!cut)
        return -EINVAL;
    cut[1] = '\0';
    snprintf(ds->key_prefix, sizeof ds->key_prefix, "%s", probe);
    const json_t *filters = json_object_get(p->cprops, "filters");
    return codec_spec_from_filters(filters, p->stored_size, 0, CODEC_SOURCE_HSDS, &ds->codec,
                                   why, why_len);
}

/* ---- chunk extents ---- */

static int ensure_placeholder(struct builder *b, size_t size)
{
    if (size <= b->placeholder_size)
        return 0;
    /* never written or read: calloc'd pages stay unbacked however large the chunk */
    unsigned char *p = calloc(1, size);
    if (!p)
        return -ENOMEM;
    free(b->placeholder);
    b->placeholder = p;
    b->placeholder_size = size;
    b->target.placeholder = p;
    return 0;
}

static int declare_chunks(struct builder *b, struct build_obj *o, uint32_t dset_index,
                          const struct chunk_list *chunks)
{
    struct image_dataset *ds = &b->img->datasets[dset_index];
    if (chunks->n > IMAGE_CHUNKS_MAX - b->declared)
        return -E2BIG;          /* the dataset goes, the rest of the domain stays readable */
    b->declared += chunks->n;
    int rc = ensure_placeholder(b, ds->chunk_bytes);
    for (size_t i = 0; i < chunks->n && rc == 0; i++) {
        hsize_t offset[IMAGE_MAX_RANK];
        uint64_t rest = chunks->v[i];
        for (int k = ds->rank - 1; k >= 0; k--) {
            offset[k] = (rest % ds->grid[k]) * ds->chunk_dims[k];
            rest /= ds->grid[k];
        }
        b->target.tag = (struct extent_tag){ dset_index, chunks->v[i] };
        if (H5Dwrite_chunk(o->hid, H5P_DEFAULT, 0, offset, ds->chunk_bytes, b->placeholder) < 0)
            rc = b->target.failed ? b->target.failed : -EIO;
    }
    return rc;
}

/* The element a missing chunk reads as, from the dataset HDF5 made (zeros when undefined). */
static int read_fill_value(struct build_obj *o, struct image_dataset *ds)
{
    H5D_fill_value_t state;
    hid_t dcpl = H5Dget_create_plist(o->hid), tid = H5Dget_type(o->hid);
    int rc = -EIO;
    if (!(ds->fill = calloc(1, ds->itemsize ? ds->itemsize : 1)))
        rc = -ENOMEM;
    else if (dcpl >= 0 && tid >= 0 && H5Pfill_value_defined(dcpl, &state) >= 0)
        rc = state == H5D_FILL_VALUE_UNDEFINED ||
             H5Pget_fill_value(dcpl, tid, ds->fill) >= 0 ? 0 : -EIO;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (tid >= 0)
        H5Tclose(tid);
    return rc;
}

/* A *_REF layout (data in another HDF5 file of the bucket) lives in creationProperties. */
static int is_ref_layout(const struct dset_plan *p)
{
    const char *cls = hjson_text(json_object_get(json_object_get(p->cprops, "layout"),
                                                        "class"));
    return cls && strstr(cls, "_REF") != NULL;
}

static int fill_extents(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                        char *out_why, size_t out_why_len)
{
    struct image_dataset *ds;
    struct chunk_list chunks = { 0 };
    char why[200] = "";
    int rc = add_dataset(b, &ds);
    if (rc != 0)
        return rc;
    uint32_t index = (uint32_t)(ds - b->img->datasets);
    rc = describe_dataset(o, p, ds, why, sizeof why);
    if (rc == 0)
        rc = read_fill_value(o, ds);
    if (rc == 0 && is_ref_layout(p))
        rc = build_ref_chunks(b, o, ds, &chunks.v, &chunks.n, why, sizeof why);
    else if (rc == 0)
        rc = 1;
    if (rc == 1)                /* chunk objects in the bucket */
        rc = schema_id_version(o->id) == 1 ? all_chunks(ds, &chunks) : list_chunks(b, ds, &chunks);
    if (rc == -EINVAL || rc == -EFBIG) {
        /* the data cannot be served: every declared chunk reads as EIO, never as fill */
        log_error("%s: dataset %s (%s): %s: reading its data fails", b->domain_path, o->path,
                  o->id, rc == -EFBIG ? "too many chunks" : why);
        ds->origin = ORIGIN_POISON;
        free(chunks.v);
        chunks = (struct chunk_list){ 0 };
        rc = all_chunks(ds, &chunks);
    }
    /* h5diff and others call a dataset without allocated storage "empty" and will not compare
     * it: declare its first chunk, which reads as the fill value like every absent chunk */
    if (rc == 0 && chunks.n == 0 && ds->origin == ORIGIN_HSDS && all_chunks_nonzero(ds))
        rc = chunk_list_add(&chunks, 0);
    if (rc == 0)
        rc = declare_chunks(b, o, index, &chunks);
    if (rc == -E2BIG)
        snprintf(out_why, out_why_len, "%zu more chunks would pass the image's limit of %u",
                 chunks.n, IMAGE_CHUNKS_MAX);
    free(chunks.v);
    return rc == -EFBIG || rc == -E2BIG ? -EINVAL : rc;
}

/* ---- values written for real ---- */

#define VALUES_CHUNK_MAX (256u << 20)   /* a vlen chunk's stored bytes, decoded */

/* Fetch and decode one chunk's stored bytes. -ENOENT: no such chunk (fill value). */
static int fetch_stored(struct builder *b, const struct image_dataset *ds, const char *key,
                        int vlen, unsigned char **out, size_t *len, char *why, size_t why_len)
{
    struct store_buf raw = { 0 };
    int rc = store_get(b->src->store, key, vlen ? VALUES_CHUNK_MAX : ds->chunk_bytes * 2 + 65536,
                       &raw);
    if (rc == -ENOENT)
        return rc;
    if (rc != 0) {
        snprintf(why, why_len, "chunk %.120s: %.60s", key, strerror(-rc));
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
        snprintf(why, why_len, "chunk %.120s: %.60s", key, cwhy);
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
             H5Dwrite(o->hid, p->tid, mem, file, H5P_DEFAULT, buf) >= 0 ? 0 : -EIO;
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
    int vlen = (h5type_traits(p->type) & H5TYPE_HAS_VLEN) != 0;
    int rc = image_chunk_key(ds, linear, key, sizeof key);
    if (rc == 0)
        rc = fetch_stored(b, ds, key, vlen, &bytes, &len, why, why_len);
    if (rc == -ENOENT)
        return 0;               /* no chunk: the fill value */
    for (int k = 0; k < ds->rank && p->rank > 0; k++)
        n *= ds->chunk_dims[k];
    struct h5value_refs refs = { build_resolve_ref, b };
    if (rc == 0) {
        char vwhy[160] = "";
        rc = h5value_from_stored(p->type, p->tid, bytes, len, n, &refs, &buf, vwhy, sizeof vwhy);
        if (rc != 0)
            snprintf(why, why_len, "chunk %.120s: %.60s", key, vwhy);
    }
    if (rc == 0 && (rc = write_chunk_values(o, p, ds, linear, buf)) != 0)
        snprintf(why, why_len, "chunk %.120s: HDF5 refused the values", key);
    if (buf)
        h5value_free(p->tid, buf, n);
    free(bytes);
    return rc == -EIO && !strstr(why, "HDF5") ? -EIO : rc ? -EINVAL : 0;
}

static int write_values(struct builder *b, struct build_obj *o, const struct dset_plan *p,
                        char *why, size_t why_len)
{
    struct image_dataset ds = { 0 };
    struct chunk_list chunks = { 0 };
    struct dset_plan q = *p;
    if (q.rank == 0) {          /* HSDS keeps a scalar as shape [1], chunk "0" (spec §2.4) */
        q.rank = 1;
        q.dims[0] = q.cdims[0] = 1;
    }
    if (!(h5type_traits(p->type) & H5TYPE_HAS_VLEN))
        q.stored_size = p->stored_size;
    else
        q.stored_size = 1;      /* vlen chunks have no fixed size; only their grid matters */
    int vlen = (h5type_traits(p->type) & H5TYPE_HAS_VLEN) != 0;
    int rc = describe_dataset(o, &q, &ds, why, why_len);
    if (rc == 0 && vlen)
        rc = codec_spec_from_filters(json_object_get(p->cprops, "filters"), 1, 1,
                                     CODEC_SOURCE_HSDS, &ds.codec, why, why_len);
    if (rc == 0)
        rc = list_chunks(b, &ds, &chunks);
    for (size_t i = 0; i < chunks.n && rc == 0; i++)
        rc = value_chunk(b, o, p, &ds, chunks.v[i], why, why_len);
    free(chunks.v);
    image_dataset_clear(&ds);
    return rc;
}

static int is_null_space(const json_t *shape)
{
    const char *cls = hjson_text(json_object_get(shape, "class"));
    return cls && strcmp(cls, "H5S_NULL") == 0;
}

int build_dataset_fill(struct builder *b, struct build_obj *o)
{
    struct dset_plan p;
    char why[200] = "its data cannot be served";
    int rc = plan_dataset(b, o, &p, why, sizeof why);
    if (rc == 0 && is_null_space(p.shape))
        rc = 0;                 /* a NULL dataspace has no data */
    else if (rc == 0 && p.rank > 0 && !p.by_value)
        rc = fill_extents(b, o, &p, why, sizeof why);
    else if (rc == 0)
        rc = write_values(b, o, &p, why, sizeof why);
    if (rc == -EINVAL)
        log_error("%s: dataset %s (%s): %s: left out", b->domain_path, o->path, o->id, why);
    if (p.tid >= 0)
        H5Tclose(p.tid);
    return rc;
}
