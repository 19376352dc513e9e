/*
 * ingest_json: the JSON HSDS stores for each object (spec §3.2-§3.6), members in the order
 * HSDS inserts them, creationProperties as hsload sends them (layout request, fillTime,
 * filters, fillValue: the fixture bucket's order).
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

#define ATTR_VALUE_MAX (64u << 20) /* as the image builder's limit */

/* ---- small JSON helpers ---- */

static json_t *dims_json(int rank, const hsize_t *dims)
{
    json_t *a = json_array();
    for (int k = 0; a && k < rank; k++)
        if (json_array_append_new(a, json_integer((json_int_t)dims[k])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *class_json(const char *cls)
{
    return json_pack("{s:s}", "class", cls);
}

/* {"class": ..., "dims": [...]} and, for datasets, "maxdims" as hsload sends them: always,
 * 0 for unlimited (§3.4). A fixed extent of 0 would then read as unlimited, so a dataset with
 * one and no unlimited dimension states none (*stated 0). */
static json_t *shape_json(hid_t space, int with_maxdims, int *rank, hsize_t *dims, hsize_t *maxdims,
                          int *stated)
{
    *stated = 0;
    H5S_class_t cls = H5Sget_simple_extent_type(space);
    *rank = 0;
    if (cls == H5S_NULL)
        return class_json("H5S_NULL");
    if (cls == H5S_SCALAR)
        return class_json("H5S_SCALAR");
    int r = H5Sget_simple_extent_ndims(space);
    if (cls != H5S_SIMPLE || r < 1 || r > INGEST_MAX_RANK ||
        H5Sget_simple_extent_dims(space, dims, maxdims) < 0)
        return NULL;
    *rank = r;
    json_t *s = json_pack("{s:s,s:o*}", "class", "H5S_SIMPLE", "dims", dims_json(r, dims));
    int unlimited = 0, fixed_zero = 0;
    for (int k = 0; k < r; k++) {
        if (maxdims[k] == H5S_UNLIMITED)
            unlimited = 1;
        else
            fixed_zero |= maxdims[k] == 0;
        if (maxdims[k] == H5S_UNLIMITED)
            maxdims[k] = 0;
    }
    *stated = with_maxdims && (unlimited || !fixed_zero);
    if (s && *stated && json_object_set_new(s, "maxdims", dims_json(r, maxdims)) != 0) {
        json_decref(s);
        return NULL;
    }
    return s;
}

/* ---- types ---- */

json_t *ingest_type_json(struct ingest *g, hid_t tid, const char *path, const char *what, char *why,
                         size_t why_len)
{
    char note[200];
    json_t *t;
    if (h5type_json_closest(tid, &t, note, sizeof note, why, why_len) == -ENOMEM)
        g->out_of_memory = 1;
    if (t && note[0])
        ingest_change(g, path, "%s: %s", what, note);
    if (!t || H5Tcommitted(tid) <= 0)
        return t;
    H5O_info_t info;
    long i = H5Oget_info2(tid, &info, H5O_INFO_BASIC) < 0 ? -1 : ingest_find_addr(g, info.addr);
    /* a committed type used by this object: HSDS keeps its id in the type (§3.6, §4) */
    if (i >= 0 && g->objs[i].cls == 't' && !g->objs[i].dropped &&
        json_object_set_new(t, "id", json_string(g->objs[i].id)) != 0) {
        json_decref(t);
        return NULL;
    }
    return t;
}

/* ---- values ---- */

/* n elements of memtype in buf as the JSON value HSDS stores, or base64 of the stored bytes
 * when they are not valid UTF-8 text (*base64 set). */
static json_t *value_json(struct ingest *g, const json_t *type, hid_t memtype, const void *buf,
                          int rank, const hsize_t *dims, size_t n, int *base64, char *why,
                          size_t why_len)
{
    struct h5value_ids ids = { ingest_ref_id, g };
    json_t *v = NULL;
    *base64 = 0;
    int rc = h5value_to_json(type, memtype, buf, rank, dims, &ids, &v, why, why_len);
    if (rc == 0)
        return v;
    unsigned char *bytes = NULL;
    size_t len = 0;
    char *text = NULL;
    if (rc != -ENOMEM)
        rc = h5value_to_stored(type, memtype, buf, n, &ids, &bytes, &len, why, why_len);
    if (rc == 0) {
        rc = h5value_base64_encode(bytes, len, &text);
        free(bytes);
    }
    if (rc == -ENOMEM)
        g->out_of_memory = 1;
    if (rc != 0)
        return NULL;
    *base64 = 1;
    v = json_string(text);
    free(text);
    return v;
}

/* ---- attributes ---- */

struct names {
    char **v;
    size_t n, cap;
};

static herr_t collect_name(hid_t loc, const char *name, const H5A_info_t *info, void *ctx)
{
    (void)loc;
    (void)info;
    struct names *l = ctx;
    if (l->n == l->cap) {
        char **nv = grow_array(l->v, &l->cap, l->cap + 1, sizeof *nv, 8);
        if (!nv)
            return -1;
        l->v = nv;
    }
    return (l->v[l->n] = strdup(name)) ? (l->n++, 0) : -1;
}

static void names_free(struct names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int attr_order_tracked(hid_t obj)
{
    H5I_type_t t = H5Iget_type(obj);
    hid_t cpl = t == H5I_GROUP     ? H5Gget_create_plist(obj)
                : t == H5I_DATASET ? H5Dget_create_plist(obj)
                                   : H5Tget_create_plist(obj);
    return ingest_order_tracked(cpl, H5Pget_attr_creation_order);
}

static int list_attrs(hid_t obj, struct names *out)
{
    hsize_t idx = 0;
    memset(out, 0, sizeof *out);
    if (attr_order_tracked(obj) &&
        H5Aiterate2(obj, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect_name, out) >= 0)
        return 0;
    names_free(out);
    idx = 0;
    /* untracked: the order the object header holds them in, which is their creation order
     * (the order ncdump and other native-order readers list them in), stored as "created" */
    if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, collect_name, out) < 0) {
        names_free(out);
        return -EIO;
    }
    return 0;
}

/* The attribute's value: read with the packed memory type and converted. */
static json_t *attr_value(struct ingest *g, hid_t attr, const json_t *type, hid_t space, int rank,
                          const hsize_t *dims, int *base64, char *why, size_t why_len)
{
    if (H5Sget_simple_extent_type(space) == H5S_NULL)
        return json_null();
    hid_t mem;
    int rc = h5type_build(type, &mem, why, why_len);
    if (rc == -ENOMEM)
        g->out_of_memory = 1;
    if (rc != 0)
        return NULL;
    hssize_t np = H5Sget_simple_extent_npoints(space);
    size_t esize = H5Tget_size(mem);
    json_t *v = NULL;
    if (np < 0 || esize == 0 || (size_t)np > ATTR_VALUE_MAX / esize) {
        why_set(why, why_len, "value larger than %u bytes", ATTR_VALUE_MAX);
        H5Tclose(mem);
        return NULL;
    }
    void *buf = calloc((size_t)np ? (size_t)np : 1, esize);
    if (buf && H5Aread(attr, mem, buf) >= 0) {
        v = value_json(g, type, mem, buf, rank, dims, (size_t)np, base64, why, why_len);
        h5value_free(mem, buf, (size_t)np);
    } else {
        why_set(why, why_len, buf ? "HDF5 cannot read it" : "out of memory");
        g->out_of_memory |= !buf;
        free(buf);
    }
    H5Tclose(mem);
    return v;
}

static json_t *attribute_json(struct ingest *g, hid_t attr, const char *path, const char *name,
                              char *why, size_t why_len)
{
    char what[300];
    snprintf(what, sizeof what, "attribute \"%s\"", name);
    hid_t ftype = H5Aget_type(attr), space = H5Aget_space(attr);
    json_t *type = NULL, *shape = NULL, *value = NULL, *a = NULL;
    hsize_t dims[INGEST_MAX_RANK], maxdims[INGEST_MAX_RANK];
    int rank = 0, base64 = 0;
    if (ftype < 0 || space < 0) {
        why_set(why, why_len, "HDF5 cannot read its type or shape");
        goto out;
    }
    if (!(type = ingest_type_json(g, ftype, path, what, why, why_len)))
        goto out;
    int stated;
    if (!(shape = shape_json(space, 0, &rank, dims, maxdims, &stated))) {
        why_set(why, why_len, "a dataspace HSDS cannot hold");
        goto out;
    }
    if (!(value = attr_value(g, attr, type, space, rank, dims, &base64, why, why_len)))
        goto out;
    a = json_pack("{s:O,s:O,s:O,s:f}", "type", type, "shape", shape, "value", value, "created",
                  ingest_now(g));
    if (a && base64 && json_object_set_new(a, "encoding", json_string("base64")) != 0) {
        json_decref(a);
        a = NULL;
    }
out:
    json_decref(type);
    json_decref(shape);
    json_decref(value);
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0)
        H5Tclose(ftype);
    return a;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* attrs with its members in name order, as hsload writes an untracked object's (it visits them
 * by name); their "created" times keep the order they were made in. NULL: no memory. */
static json_t *members_by_name(json_t *attrs)
{
    size_t n = json_object_size(attrs), i = 0;
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    json_t *sorted = keys ? json_object() : NULL;
    const char *k;
    json_t *v;
    json_object_foreach(attrs, k, v) if (keys) keys[i++] = k;
    if (keys)
        qsort(keys, n, sizeof *keys, by_name);
    for (i = 0; sorted && i < n; i++)
        if (json_object_set(sorted, keys[i], json_object_get(attrs, keys[i])) != 0) {
            json_decref(sorted);
            sorted = NULL;
        }
    free(keys);
    json_decref(attrs);
    return sorted;
}

/* Every attribute of obj in its order; those HSDS cannot hold are left out and logged. */
static json_t *attributes_json(struct ingest *g, hid_t obj, const char *path)
{
    struct names names;
    char why[200];
    if (list_attrs(obj, &names) != 0) {
        log_error("%s: %s: attributes cannot be listed", g->log_name, path);
        return NULL;
    }
    json_t *attrs = json_object();
    for (size_t i = 0; attrs && i < names.n; i++) {
        hid_t attr = H5Aopen(obj, names.v[i], H5P_DEFAULT);
        json_t *a = NULL;
        why_set(why, sizeof why, "HDF5 cannot open it");
        if (attr >= 0) {
            a = attribute_json(g, attr, path, names.v[i], why, sizeof why);
            H5Aclose(attr);
        }
        if (!a)
            ingest_change(g, path, "attribute \"%s\" left out: %s", names.v[i], why);
        else if (json_object_set_new(attrs, names.v[i], a) != 0) {
            json_decref(attrs);
            attrs = NULL;
        }
    }
    names_free(&names);
    return attrs && !attr_order_tracked(obj) ? members_by_name(attrs) : attrs;
}

/* ---- groups ---- */

static json_t *link_json(struct ingest *g, const struct ingest_link *l)
{
    double now = ingest_now(g);
    if (l->type == H5L_TYPE_HARD)
        return json_pack("{s:s,s:s,s:f}", "id", g->objs[l->target].id, "class", "H5L_TYPE_HARD",
                         "created", now);
    if (l->type == H5L_TYPE_SOFT)
        return json_pack("{s:s,s:s,s:f}", "h5path", l->h5path, "class", "H5L_TYPE_SOFT", "created",
                         now);
    return json_pack("{s:s,s:s,s:s,s:f}", "h5path", l->h5path, "h5domain", l->file, "class",
                     "H5L_TYPE_EXTERNAL", "created", now);
}

static json_t *links_json(struct ingest *g, const struct ingest_obj *o)
{
    json_t *links = json_object();
    for (size_t k = 0; links && k < o->n_links; k++) {
        const struct ingest_link *l = &o->links[k];
        if (l->type == H5L_TYPE_HARD && g->objs[l->target].dropped)
            continue; /* the object was left out (logged there) */
        json_t *j = link_json(g, l);
        if (!j || json_object_set_new(links, l->name, j) != 0) {
            json_decref(links);
            return NULL;
        }
    }
    return links;
}

static json_t *head_json(struct ingest *g, const struct ingest_obj *o)
{
    double now = ingest_now(g);
    return json_pack("{s:s,s:s,s:f,s:f}", "id", o->id, "root", g->root, "created", now,
                     "lastModified", now);
}

static int group_json(struct ingest *g, struct ingest_obj *o, hid_t group)
{
    json_t *j = head_json(g, o);
    json_t *links = links_json(g, o);
    json_t *attrs = links ? attributes_json(g, group, o->path) : NULL;
    int rc = j && links && attrs ? 0 : -ENOMEM;
    if (rc == 0) {
        int failed = json_object_set_new(j, "links", links) != 0;
        failed |= json_object_set_new(j, "attributes", attrs) != 0; /* both run: released */
        rc = failed ? -ENOMEM : 0;
    } else {
        json_decref(links);
        json_decref(attrs);
    }
    /* h5pyd sends this for track_order groups, and readers list links by "created" then */
    if (rc == 0 && o->track_order &&
        json_object_set_new(j, "creationProperties", json_pack("{s:i}", "CreateOrder", 1)) != 0)
        rc = -ENOMEM;
    if (rc == 0)
        o->json = j;
    else
        json_decref(j);
    return rc;
}

/* ---- committed datatypes ---- */

static int datatype_json(struct ingest *g, struct ingest_obj *o, hid_t tid)
{
    char why[200];
    char note[200];
    json_t *type;
    if (h5type_json_closest(tid, &type, note, sizeof note, why, sizeof why) == -ENOMEM)
        return -ENOMEM;
    if (type && note[0])
        ingest_change(g, o->path, "committed datatype: %s", note);
    if (!type) {
        o->dropped = 1;
        ingest_change(g, o->path, "committed datatype left out: %s", why);
        return 0;
    }
    json_t *j = head_json(g, o), *attrs = attributes_json(g, tid, o->path);
    if (!j || !attrs) { /* each set_new below releases its value, even when it fails */
        json_decref(type);
        json_decref(attrs);
        json_decref(j);
        return -ENOMEM;
    }
    int failed = json_object_set_new(j, "type", type) != 0;
    failed |= json_object_set_new(j, "attributes", attrs) != 0; /* both run: attrs released */
    if (failed) {
        json_decref(j);
        return -ENOMEM;
    }
    o->json = j;
    return 0;
}

/* ---- datasets ---- */

static json_t *fill_json(struct ingest *g, hid_t dcpl, const json_t *type, int *base64)
{
    H5D_fill_value_t status;
    char why[200];
    hid_t mem = H5I_INVALID_HID;
    *base64 = 0;
    if (H5Pfill_value_defined(dcpl, &status) < 0 || status != H5D_FILL_VALUE_USER_DEFINED)
        return NULL;
    unsigned traits;
    int rc = h5type_traits_of(type, &traits);
    if (rc == 0 && (traits & H5TYPE_HAS_VLEN))
        return NULL; /* HSDS keeps no fill value for vlen types */
    if (rc == 0)
        rc = h5type_build(type, &mem, why, sizeof why);
    if (rc == -ENOMEM)
        g->out_of_memory = 1;
    if (rc != 0)
        return NULL;
    void *buf = calloc(1, H5Tget_size(mem));
    g->out_of_memory |= !buf; /* else the fill value would silently be left out */
    json_t *v = NULL;
    if (buf && H5Pget_fill_value(dcpl, mem, buf) >= 0)
        v = value_json(g, type, mem, buf, 0, NULL, 1, base64, why, sizeof why);
    if (buf)
        h5value_free(mem, buf, 1);
    H5Tclose(mem);
    return v;
}

/* creationProperties as hsload sends them: the layout the source had, fillTime, filters, the
 * fill value when the file defines one. NULL members are left out; *cp NULL: none. */
static int dataset_cprops(struct ingest *g, struct ingest_obj *o, hid_t dcpl, const json_t *type,
                          int rank, const hsize_t *dims, json_t **cp)
{
    int base64;
    hsize_t req[INGEST_MAX_RANK];
    *cp = json_object();
    if (!*cp)
        return -ENOMEM;
    int zero = 0;
    for (int k = 0; k < rank; k++)
        zero |= dims[k] == 0;
    int chunked = H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, req) == rank;
    if (rank > 0 && (chunked || !zero)) {
        json_t *lay = json_pack("{s:s,s:o*}", "class", "H5D_CHUNKED", "dims",
                                dims_json(rank, chunked ? req : dims));
        if (!lay || json_object_set_new(*cp, "layout", lay) != 0 ||
            json_object_set_new(*cp, "fillTime", json_string("H5D_FILL_TIME_ALLOC")) != 0)
            return -ENOMEM;
    }
    json_t *filters = ingest_filters_json(g, o->path, dcpl);
    if (filters && json_object_set_new(*cp, "filters", filters) != 0)
        return -ENOMEM;
    json_t *fill = fill_json(g, dcpl, type, &base64);
    if (fill && json_object_set_new(*cp, "fillValue", fill) != 0)
        return -ENOMEM;
    if (fill && base64 &&
        json_object_set_new(*cp, "fillValue_encoding", json_string("base64")) != 0)
        return -ENOMEM;
    if (json_object_size(*cp) == 0) {
        json_decref(*cp);
        *cp = NULL;
    }
    return 0;
}

/* The chunk shape HSDS would choose (§5.4), starting from the source's chunks. */
static json_t *layout_json(hid_t dcpl, const json_t *type, int rank, const hsize_t *dims,
                           const hsize_t *maxdims, int stated)
{
    uint64_t d[INGEST_MAX_RANK], m[INGEST_MAX_RANK], req[INGEST_MAX_RANK], out[INGEST_MAX_RANK];
    hsize_t c[INGEST_MAX_RANK];
    size_t itemsize = 0;
    if (!(h5type_traits(type) & H5TYPE_HAS_VLEN) && h5type_stored_size(type, &itemsize) != 0)
        return NULL;
    int chunked =
        rank > 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, c) == rank;
    for (int k = 0; k < rank; k++) {
        d[k] = dims[k];
        m[k] = maxdims[k];
        req[k] = chunked ? c[k] : 0;
    }
    ingest_chunk_dims(rank, d, stated ? m : NULL, itemsize, chunked ? req : NULL, out);
    hsize_t h[INGEST_MAX_RANK];
    int r = rank ? rank : 1;
    for (int k = 0; k < r; k++)
        h[k] = out[k] ? out[k] : 1; /* HSDS's [0] for empty datasets: any positive
                                         * value will do (§10.3) and readers divide by it */
    return json_pack("{s:s,s:o*}", "class", "H5D_CHUNKED", "dims", dims_json(r, h));
}

/* A virtual dataset keeps its mappings (ingest_vds.c), never the values HDF5 reads through
 * them; a source that cannot be found from the file being stored is named once, for it reads as
 * the fill value until it exists beside the domain. */
static int virtual_member(struct ingest *g, struct ingest_obj *o, hid_t dcpl, json_t **vds)
{
    char missing[600], why[200] = "";
    int rc = ingest_vds_json(dcpl, vds, why, sizeof why);
    int gone = rc == 0 ? ingest_vds_missing_source(g, dcpl, missing, sizeof missing) : 0;
    if (gone > 0)
        log_warn("%s: %s: virtual dataset kept as its mappings, though %s beside the file "
                 "being stored (in the mount HDF5 looks for it beside the domain; where it is "
                 "missing, reads give the fill value)",
                 g->log_name, o->path, missing);
    if (rc == -EIO) {
        o->dropped = 1;
        ingest_change(g, o->path, "virtual dataset left out: %s", why);
        rc = 0;
    }
    return rc != 0 ? rc : gone < 0 ? gone : 0;
}

static int dataset_json(struct ingest *g, struct ingest_obj *o, hid_t dset)
{
    char why[200];
    hid_t ftype = H5Dget_type(dset), space = H5Dget_space(dset), dcpl = H5Dget_create_plist(dset);
    json_t *j = NULL, *type = NULL, *shape = NULL, *attrs = NULL, *cp = NULL, *lay = NULL,
           *vds = NULL;
    hsize_t dims[INGEST_MAX_RANK], maxdims[INGEST_MAX_RANK];
    int rank = 0, rc = -EIO, stated = 0;
    if (ftype < 0 || space < 0 || dcpl < 0) {
        log_error("%s: %s: dataset cannot be read", g->log_name, o->path);
        goto out;
    }
    rc = 0;
    if (!(type = ingest_type_json(g, ftype, o->path, "dataset", why, sizeof why)) ||
        !(shape = shape_json(space, 1, &rank, dims, maxdims, &stated))) {
        o->dropped = 1;
        ingest_change(g, o->path, "dataset left out: %s",
                      type ? "a dataspace HSDS cannot hold" : why);
        goto out;
    }
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL &&
        ((rc = virtual_member(g, o, dcpl, &vds)) != 0 || o->dropped))
        goto out;
    rc = -ENOMEM;
    if (!(j = head_json(g, o)) || !(attrs = attributes_json(g, dset, o->path)) ||
        dataset_cprops(g, o, dcpl, type, rank, dims, &cp) != 0)
        goto out;
    if (H5Sget_simple_extent_type(space) != H5S_NULL &&
        !(lay = layout_json(dcpl, type, rank, dims, maxdims, stated)))
        goto out;
    if (json_object_set(j, "type", type) || json_object_set(j, "shape", shape) ||
        json_object_set(j, "attributes", attrs) ||
        (cp && json_object_set(j, "creationProperties", cp)) ||
        (lay && json_object_set(j, "layout", lay)) || (vds && json_object_set(j, "h5osfs", vds)))
        goto out;
    o->json = j;
    j = NULL;
    rc = 0;
out:
    json_decref(j);
    json_decref(type);
    json_decref(shape);
    json_decref(attrs);
    json_decref(cp);
    json_decref(lay);
    json_decref(vds);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0)
        H5Tclose(ftype);
    return rc;
}

int ingest_build_json(struct ingest *g, struct ingest_obj *o)
{
    hid_t obj = H5Oopen(g->file, o->path, H5P_DEFAULT);
    if (obj < 0) {
        log_error("%s: %s: object cannot be opened", g->log_name, o->path);
        return -EIO;
    }
    int rc = o->cls == 'g'   ? group_json(g, o, obj)
             : o->cls == 't' ? datatype_json(g, o, obj)
                             : dataset_json(g, o, obj);
    H5Oclose(obj);
    if (rc == -ENOMEM)
        log_error("%s: %s: out of memory", g->log_name, o->path);
    return rc;
}
