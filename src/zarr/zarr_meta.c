/* zarr_meta: the .zarray and .zattrs texts of the Zarr view, from HSDS JSON (spec §3.4-§5). */
#include "zarr_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "h5osfs/h5json/h5type.h"
#include "h5osfs/h5json/h5value.h"
#include "h5osfs/schema/hjson.h"

#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), -EINVAL)
#define DTYPE_DEPTH_MAX 16 /* as h5type's nesting limit */

/* ---- dtypes ---- */

/* "H5T_STD_I32LE" -> "<i4", "H5T_IEEE_F64BE" -> ">f8", "H5T_STD_U8LE" -> "|u1". */
static int base_dtype(const char *name, char out[32])
{
    char kind;
    const char *bits;
    if (!name)
        return -EINVAL;
    if (strncmp(name, "H5T_STD_", 8) == 0 && (name[8] == 'I' || name[8] == 'U')) {
        kind = name[8] == 'I' ? 'i' : 'u';
        bits = name + 9;
    } else if (strncmp(name, "H5T_IEEE_F", 10) == 0) {
        kind = 'f';
        bits = name + 10;
    } else {
        return -EINVAL;
    }
    char *end;
    long n = strtol(bits, &end, 10);
    int le = strcmp(end, "LE") == 0, be = strcmp(end, "BE") == 0;
    if ((!le && !be) || (n != 8 && n != 16 && n != 32 && n != 64) || (kind == 'f' && n == 8))
        return -EINVAL;
    snprintf(out, 32, "%c%c%ld", n == 8 ? '|' : le ? '<' : '>', kind, n / 8);
    return 0;
}

static const char *class_of(const json_t *type)
{
    return json_is_string(type) ? NULL : hjson_text(json_object_get(type, "class"));
}

/* The boolean HSDS writes: an enum over I8 whose mapping is exactly FALSE and TRUE. */
static int is_bool_enum(const json_t *type)
{
    const json_t *map = json_object_get(type, "mapping");
    const char *base = hjson_text(json_object_get(json_object_get(type, "base"), "base"));
    return json_object_size(map) == 2 && json_object_get(map, "FALSE") &&
           json_object_get(map, "TRUE") && base && strncmp(base, "H5T_STD_I8", 10) == 0;
}

static json_t *dtype_of(const json_t *type, int depth, char *why, size_t why_len);

/* One field of a structured dtype: [name, dtype] or, for an array member, [name, base, shape]. */
static json_t *field_of(const json_t *field, int depth, char *why, size_t why_len)
{
    const char *name = hjson_text(json_object_get(field, "name"));
    const json_t *type = json_object_get(field, "type");
    if (!name || !*name) {
        snprintf(why, why_len, "a compound field without a name");
        return NULL;
    }
    json_t *shape = NULL, *dt;
    if (class_of(type) && strcmp(class_of(type), "H5T_ARRAY") == 0) {
        const json_t *dims = json_object_get(type, "dims");
        shape = json_is_integer(dims) ? json_pack("[O]", dims) : json_deep_copy(dims);
        type = json_object_get(type, "base");
    }
    dt = dtype_of(type, depth + 1, why, why_len);
    if (!dt) {
        json_decref(shape);
        return NULL;
    }
    return shape ? json_pack("[s, o, o]", name, dt, shape) : json_pack("[s, o]", name, dt);
}

/* The numpy dtype (a string, or a list of fields) of a fixed-size HSDS type; NULL with a
 * reason for types Zarr v2 cannot hold as they are stored. */
static json_t *dtype_of(const json_t *type, int depth, char *why, size_t why_len)
{
    char s[32];
    const char *cls = class_of(type);
    if (depth > DTYPE_DEPTH_MAX) {
        snprintf(why, why_len, "type nested too deep");
        return NULL;
    }
    if (json_is_string(type) ||
        (cls && (strcmp(cls, "H5T_INTEGER") == 0 || strcmp(cls, "H5T_FLOAT") == 0))) {
        const char *name =
            json_is_string(type) ? hjson_text(type) : hjson_text(json_object_get(type, "base"));
        if (base_dtype(name, s) == 0)
            return json_string(s);
        snprintf(why, why_len, "base type %s has no numpy dtype", name ? name : "(none)");
        return NULL;
    }
    if (!cls) {
        snprintf(why, why_len, "a type without a class");
        return NULL;
    }
    const json_t *len = json_object_get(type, "length"), *size = json_object_get(type, "size");
    if (strcmp(cls, "H5T_STRING") == 0 && json_is_integer(len) && json_integer_value(len) > 0) {
        snprintf(s, sizeof s, "|S%lld", (long long)json_integer_value(len));
        return json_string(s);
    }
    if (strcmp(cls, "H5T_OPAQUE") == 0 && json_is_integer(size) && json_integer_value(size) > 0) {
        snprintf(s, sizeof s, "|V%lld", (long long)json_integer_value(size));
        return json_string(s);
    }
    if (strcmp(cls, "H5T_ENUM") == 0)
        return is_bool_enum(type)
                   ? json_string("|b1")
                   : dtype_of(json_object_get(type, "base"), depth + 1, why, why_len);
    if (strcmp(cls, "H5T_COMPOUND") == 0 && json_array_size(json_object_get(type, "fields"))) {
        json_t *list = json_array(), *field;
        size_t i;
        json_array_foreach(json_object_get(type, "fields"), i, field)
        {
            json_t *f = field_of(field, depth, why, why_len);
            if (!f || json_array_append_new(list, f) != 0) {
                json_decref(list);
                return NULL;
            }
        }
        return list;
    }
    snprintf(why, why_len, "type class %s has no Zarr v2 dtype as stored", cls);
    return NULL;
}

static int is_vlen_string(const json_t *type)
{
    const char *cls = class_of(type);
    return cls && strcmp(cls, "H5T_STRING") == 0 && json_is_string(json_object_get(type, "length"));
}

/* ---- fill values (Zarr v2: numbers, "NaN"/"Infinity", base64 of the element's bytes) ---- */

static json_t *float_json(double x)
{
    if (isnan(x))
        return json_string("NaN");
    if (isinf(x))
        return json_string(x > 0 ? "Infinity" : "-Infinity");
    return json_real(x);
}

/* The element's packed bytes (its stored form) from a JSON fill value, a base64 one, or
 * zeros. *out malloc'd, itemsize bytes. */
static int fill_bytes(const json_t *type, const json_t *value, const char *encoding,
                      size_t itemsize, unsigned char **out, char *why, size_t why_len)
{
    size_t n;
    if (!value || json_is_null(value)) {
        *out = calloc(1, itemsize);
        return *out ? 0 : -ENOMEM;
    }
    if (encoding && strcmp(encoding, "base64") == 0 && hjson_text(value)) {
        const char *t = hjson_text(value);
        int rc = h5value_base64_decode(t, strlen(t), out, &n);
        if (rc == 0 && n != itemsize) {
            free(*out);
            return WHY("fillValue is %zu bytes, not %zu", n, itemsize);
        }
        return rc == 0 ? 0 : WHY("fillValue is not base64");
    }
    hid_t tid = h5type_from_json(type, why, why_len);
    if (tid == H5I_INVALID_HID)
        return -EINVAL;
    void *buf = NULL;
    int rc = h5value_from_json(type, tid, value, 1, NULL, &buf, why, why_len);
    if (rc == 0 && H5Tget_size(tid) != itemsize) {
        rc = WHY("fillValue's type has vlen or reference parts");
    } else if (rc == 0 && (*out = malloc(itemsize)) != NULL) {
        memcpy(*out, buf, itemsize);
    } else if (rc == 0) {
        rc = -ENOMEM;
    }
    if (buf)
        h5value_free(tid, buf, 1);
    H5Tclose(tid);
    return rc;
}

/* A number of dtype dt ("<i4", ">f8", "|b1") from its packed bytes. */
static json_t *number_of_bytes(const char *dt, const unsigned char *b, size_t size)
{
    unsigned char v[8] = { 0 };
    int le = dt[0] != '>';
    for (size_t i = 0; i < size && i < 8; i++)
        v[i] = le ? b[i] : b[size - 1 - i]; /* v: little-endian */
    uint64_t u = 0;
    for (size_t i = 0; i < 8; i++)
        u |= (uint64_t)v[i] << (8 * i);
    if (dt[1] == 'b')
        return json_boolean(u != 0);
    if (dt[1] == 'f' && size == 4) {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, 4);
        return float_json(f);
    }
    if (dt[1] == 'f' && size == 8) {
        double d;
        memcpy(&d, &u, 8);
        return float_json(d);
    }
    if (dt[1] == 'f') /* half: its value as a double */
        return float_json(ldexp((double)((u & 0x3ff) | ((u >> 10 & 0x1f) ? 0x400 : 0)),
                                (int)((u >> 10 & 0x1f) ? (u >> 10 & 0x1f) : 1) - 25) *
                          ((u & 0x8000) ? -1 : 1));
    if (dt[1] == 'i') {
        int64_t s = (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);
        return json_integer(s);
    }
    if (u > INT64_MAX) {
        char digits[32];
        snprintf(digits, sizeof digits, HJSON_BIGINT_PREFIX "%llu", (unsigned long long)u);
        return json_string(digits);
    }
    return json_integer((json_int_t)u);
}

static json_t *fill_json(const json_t *dset, const json_t *dtype, size_t itemsize, char *why,
                         size_t why_len)
{
    const json_t *props = json_object_get(dset, "creationProperties");
    const json_t *type = json_object_get(dset, "type"),
                 *value = json_object_get(props, "fillValue");
    const char *enc = hjson_text(json_object_get(props, "fillValue_encoding"));
    const char *dt = json_string_value(dtype);
    unsigned char *bytes;
    if (fill_bytes(type, value, enc, itemsize, &bytes, why, why_len) != 0)
        return NULL;
    json_t *out = NULL;
    if (dt && dt[1] && strchr("iufb", dt[1])) {
        out = number_of_bytes(dt, bytes, itemsize);
    } else {
        char *text;
        if (h5value_base64_encode(bytes, itemsize, &text) == 0) {
            out = json_string(text);
            free(text);
        }
    }
    free(bytes);
    return out;
}

int zarr_meta_fill_elem(const json_t *dset, struct zarr_array *a, char *why, size_t why_len)
{
    const json_t *props = json_object_get(dset, "creationProperties");
    if (a->serve == ZARR_SERVE_VLEN)
        return 0; /* an unset item: a zero length */
    return fill_bytes(json_object_get(dset, "type"), json_object_get(props, "fillValue"),
                      hjson_text(json_object_get(props, "fillValue_encoding")), a->itemsize,
                      &a->fill_elem, why, why_len);
}

/* ---- .zarray ---- */

static json_t *compressor_json(const struct zarr_array *a)
{
    if (a->serve == ZARR_SERVE_ZLIB)
        return json_pack("{s:s, s:i}", "id", "zlib", "level", a->spec.level);
    if (a->serve != ZARR_SERVE_BLOSC)
        return json_null();
    return json_pack("{s:i, s:i, s:s, s:s, s:i}", "blocksize", 0, "clevel", a->spec.level, "cname",
                     a->spec.compressor, "id", "blosc", "shuffle",
                     a->spec.shuffle == CODEC_SHUFFLE_BYTE ? 1 : 0);
}

static json_t *filters_json(const struct zarr_array *a)
{
    if (a->serve == ZARR_SERVE_VLEN)
        return json_pack("[{s:s}]", "id", "vlen-utf8");
    if (a->serve == ZARR_SERVE_ZLIB && a->spec.shuffle == CODEC_SHUFFLE_BYTE)
        return json_pack("[{s:s, s:I}]", "id", "shuffle", "elementsize", (json_int_t)a->itemsize);
    return json_null();
}

int zarr_meta_zarray(const struct zarr_array *a, int for_refs, char **out, size_t *len)
{
    json_t *z = json_copy(a->meta);
    int keep_fill = !a->no_fill || (for_refs && a->fill_chunks);
    if (!z || json_object_set_new(z, "compressor", compressor_json(a)) != 0 ||
        json_object_set_new(z, "filters", filters_json(a)) != 0 ||
        (!keep_fill && json_object_set_new(z, "fill_value", json_null()) != 0)) {
        json_decref(z);
        return -ENOMEM;
    }
    int rc = hjson_dumps(z, out);
    json_decref(z);
    if (rc == 0)
        *len = strlen(*out);
    return rc == 0 ? 0 : -ENOMEM;
}

/*
 * A linked dataset's chunks are the file's (spec §8): a chunk map's over its dims, a chunk
 * table's over hyper_dims (the file's chunk) or dims; a contiguous range is one chunk, the
 * whole array, so that its chunk file is that range as it is (as kerchunk maps one). The
 * layout the chunk grid comes from, or NULL (not linked); *link says which.
 */
static const json_t *linked_layout(const json_t *dset, enum zarr_link *link, char *why,
                                   size_t why_len)
{
    const json_t *lay = json_object_get(json_object_get(dset, "creationProperties"), "layout");
    const char *cls = hjson_text(json_object_get(lay, "class"));
    *link = ZARR_LINK_NONE;
    if (!cls || !strstr(cls, "_REF"))
        return NULL;
    if (strcmp(cls, "H5D_CHUNKED_REF") == 0)
        *link = ZARR_LINK_MAP;
    else if (strcmp(cls, "H5D_CONTIGUOUS_REF") == 0)
        *link = ZARR_LINK_CONTIG;
    else if (strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0)
        *link = json_object_get(lay, SCHEMA_H5OSFS_MEMBER) ? ZARR_LINK_POOL : ZARR_LINK_TABLE;
    else
        snprintf(why, why_len, "unknown layout class %s", cls);
    return lay;
}

static int linked_chunks(const json_t *lay, struct zarr_array *a, char *why, size_t why_len)
{
    int crank;
    const json_t *dims = json_object_get(lay, "hyper_dims");
    if (a->link == ZARR_LINK_CONTIG) {
        memcpy(a->chunk, a->shape, sizeof a->chunk);
        return a->rank > 0 ? 0 : WHY("a linked scalar");
    }
    if (a->link == ZARR_LINK_POOL && dims)
        return WHY("a version's pooled chunk table with hyper_dims");
    if (a->link != ZARR_LINK_TABLE || !dims)
        dims = json_object_get(lay, "dims");
    if (a->rank == 0 || hjson_dims(dims, a->chunk, &crank) != 0 || crank != a->rank)
        return WHY("the linked layout's dims do not match the shape");
    return 0;
}

/* shape and chunks from the dataset's shape and its layout's dims (spec §2.4, §5.3). */
static int geometry(const json_t *dset, struct zarr_array *a, char *why, size_t why_len)
{
    const json_t *shape = json_object_get(dset, "shape"), *layout = json_object_get(dset, "layout");
    const char *cls = hjson_text(json_object_get(shape, "class"));
    const json_t *ref = linked_layout(dset, &a->link, why, why_len);
    int crank;
    if (ref && a->link == ZARR_LINK_NONE)
        return -EINVAL;
    if (!cls || strcmp(cls, "H5S_NULL") == 0)
        return WHY("an H5S_NULL dataset has no data");
    if (strcmp(cls, "H5S_SCALAR") == 0) {
        a->rank = 0;
        a->shape[0] = a->chunk[0] = 1;
    } else if (strcmp(cls, "H5S_SIMPLE") != 0 ||
               hjson_dims(json_object_get(shape, "dims"), a->shape, &a->rank) != 0) {
        return WHY("shape is not valid");
    }
    const json_t *max = json_object_get(shape, "maxdims");
    a->unlimited = 0;
    for (int k = 0; k < a->rank && json_array_size(max) == (size_t)a->rank; k++)
        if (json_is_integer(json_array_get(max, (size_t)k)) &&
            json_integer_value(json_array_get(max, (size_t)k)) == 0)
            a->unlimited |= 1ull << k;
    if (ref) {
        int rc = linked_chunks(ref, a, why, why_len);
        if (rc != 0)
            return rc;
    } else if (a->rank > 0 && (hjson_dims(json_object_get(layout, "dims"), a->chunk, &crank) != 0 ||
                               crank != a->rank)) {
        return WHY("layout dims do not match the shape");
    }
    a->elements = 1;
    for (int k = 0; k < (a->rank ? a->rank : 1); k++) {
        if (a->chunk[k] == 0 || a->chunk[k] > UINT32_MAX)
            return WHY("chunk dimension %d is %llu", k, (unsigned long long)a->chunk[k]);
        a->elements *= a->chunk[k];
        if (a->elements > (1ull << 40))
            return WHY("chunks of more than 2^40 elements");
    }
    const json_t *pc = ref ? NULL : json_object_get(layout, "partition_count");
    a->partitions =
        json_is_integer(pc) && json_integer_value(pc) > 0 && json_integer_value(pc) < 1000000
            ? (int)json_integer_value(pc)
            : 0;
    return 0;
}

/* A linked file's chunks: raw ones and HDF5's deflate (zlib streams, shuffled first or not)
 * are what numcodecs reads (compressor null; zlib with filter shuffle); the rest (shuffle
 * alone, bitshuffle, other compressors) is served decoded. */
static int linked_serving(struct zarr_array *a)
{
    a->settled = 1;
    if (codec_is_copy(&a->spec))
        a->serve = ZARR_SERVE_RAW;
    else if (a->spec.compressed && a->spec.zlib_fallback && a->spec.shuffle != CODEC_SHUFFLE_BIT)
        a->serve = ZARR_SERVE_ZLIB;
    else
        a->serve = ZARR_SERVE_PLAIN;
    return 0;
}

/* How chunks are served, and the dtype, for a fixed-size or vlen-string type. */
static int choose_serving(const json_t *dset, struct zarr_array *a, json_t **dtype, char *why,
                          size_t why_len)
{
    const json_t *type = json_object_get(dset, "type");
    const json_t *filters = json_object_get(json_object_get(dset, "creationProperties"), "filters");
    int vlen = is_vlen_string(type);
    if (vlen) {
        a->itemsize = 0;
        *dtype = json_string("|O");
    } else {
        int rc = h5type_stored_size(type, &a->itemsize);
        if (rc != 0)
            return rc == -ENOMEM ? rc : WHY("its type has variable-length parts");
        if (!(*dtype = dtype_of(type, 0, why, why_len)))
            return -EINVAL;
        if (a->elements > SIZE_MAX / a->itemsize || a->elements * a->itemsize > (1ull << 31)) {
            json_decref(*dtype);
            return WHY("chunks of more than 2 GiB");
        }
        a->chunk_bytes = (size_t)a->elements * a->itemsize;
    }
    /* a linked file's bytes are HDF5's filter output, not HSDS's chunk encoding */
    enum codec_source source = zarr_hsds_chunks(a->link) ? CODEC_SOURCE_HSDS : CODEC_SOURCE_HDF5;
    if (codec_spec_from_filters(json_is_array(filters) ? filters : NULL, a->itemsize, vlen, source,
                                &a->spec, why, why_len) != 0) {
        json_decref(*dtype);
        return -EINVAL;
    }
    if (!zarr_hsds_chunks(a->link)) {
        if (vlen) {
            json_decref(*dtype);
            return WHY("a linked dataset of variable-length strings");
        }
        return linked_serving(a);
    }
    a->settled = !a->spec.zlib_fallback || vlen || a->spec.shuffle == CODEC_SHUFFLE_BIT;
    if (vlen)
        a->serve = ZARR_SERVE_VLEN;
    else if (a->spec.compressed && a->spec.shuffle != CODEC_SHUFFLE_BIT)
        a->serve = ZARR_SERVE_BLOSC; /* a gzip dataset's may become zlib (zarr_settle) */
    else
        a->serve = codec_is_copy(&a->spec) ? ZARR_SERVE_RAW : ZARR_SERVE_PLAIN;
    return 0;
}

int zarr_meta_array(const json_t *dset, struct zarr_array *a, char *why, size_t why_len)
{
    json_t *dtype = NULL, *fill = NULL;
    int rc = geometry(dset, a, why, why_len);
    if (rc == 0)
        rc = choose_serving(dset, a, &dtype, why, why_len);
    if (rc != 0)
        return rc;
    if (a->serve == ZARR_SERVE_VLEN)
        fill = json_string("AQAAAAAAAAA="); /* vlen-utf8 of [""]: what h5py reads unset */
    else
        fill = fill_json(dset, dtype, a->itemsize, why, why_len);
    if (!fill) {
        json_decref(dtype);
        return *why ? -EINVAL : -ENOMEM;
    }
    /* keys in Zarr's order; compressor and filters are set when a text is made */
    a->meta = json_pack("{s:o, s:n, s:s, s:o, s:o, s:n, s:s, s:o, s:i}", "chunks",
                        hjson_dims_new(a->chunk, a->rank), "compressor", "dimension_separator", ".",
                        "dtype", dtype, "fill_value", fill, "filters", "order", "C", "shape",
                        hjson_dims_new(a->shape, a->rank), "zarr_format", 2);
    return a->meta ? 0 : -ENOMEM;
}

/* ---- .zattrs ---- */

int zarr_meta_hidden_attr(const char *name)
{
    static const char *const hidden[] = { "DIMENSION_LIST", "REFERENCE_LIST", "CLASS",
                                          "NAME",           "_Netcdf4Dimid",  "_Netcdf4Coordinates",
                                          "_NCProperties",  "_nc3_strict",    "_FillValue" };
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
        if (strcmp(name, hidden[i]) == 0)
            return 1;
    return 0;
}

/* An attribute value of a numeric type with its numeric strings ("nan", "1.5") as numbers;
 * NULL when a leaf is not a number. */
static json_t *numbers_of(const json_t *v, int depth)
{
    double x;
    if (depth > 64)
        return NULL;
    if (json_is_array(v)) {
        json_t *out = json_array(), *e;
        size_t i;
        json_array_foreach(v, i, e)
        {
            json_t *c = numbers_of(e, depth + 1);
            if (!c || json_array_append_new(out, c) != 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    if (json_is_number(v) || json_is_boolean(v))
        return json_incref((json_t *)v);
    const char *s = json_string_value(v);
    if (s && s[0] == '\x01' && !hjson_unloadable(s))
        return json_incref((json_t *)v); /* a NaN, infinity or big integer marker */
    if (s && hjson_number(v, &x) == 0)
        return isfinite(x) ? json_real(x)
                           : json_string(isnan(x) ? HJSON_NAN
                                         : x > 0  ? HJSON_INF
                                                  : HJSON_NINF);
    return NULL;
}

static int strings_only(const json_t *v, int depth)
{
    json_t *e;
    size_t i;
    if (depth > 64)
        return 0;
    if (json_is_string(v))
        return !hjson_unloadable(json_string_value(v)) && json_string_value(v)[0] != '\x01';
    if (!json_is_array(v))
        return 0;
    json_array_foreach(v, i, e) if (!strings_only(e, depth + 1)) return 0;
    return 1;
}

/* The value of attr as JSON holds it, or NULL (left out). One element of shape [1] is that
 * element, as netCDF reads it (xarray compares attributes as netCDF gives them). */
static json_t *attr_value(const json_t *attr)
{
    const json_t *type = json_object_get(attr, "type"), *value = json_object_get(attr, "value");
    const json_t *dims = json_object_get(json_object_get(attr, "shape"), "dims");
    if (json_array_size(dims) == 1 && json_integer_value(json_array_get(dims, 0)) == 1 &&
        json_array_size(value) == 1)
        value = json_array_get(value, 0);
    const char *cls = class_of(type);
    if (!value || json_is_null(value) || json_object_get(attr, "encoding"))
        return NULL;
    if (json_is_string(type) ||
        (cls && (strcmp(cls, "H5T_INTEGER") == 0 || strcmp(cls, "H5T_FLOAT") == 0 ||
                 strcmp(cls, "H5T_ENUM") == 0)))
        return numbers_of(value, 0);
    if (cls && strcmp(cls, "H5T_STRING") == 0 && strings_only(value, 0))
        return json_incref((json_t *)value);
    return NULL;
}

int zarr_meta_attrs(const json_t *attributes, const char *const *dims, int rank, char **out,
                    size_t *len)
{
    json_t *o = json_object();
    const char *name;
    json_t *attr;
    if (!o)
        return -ENOMEM;
    json_object_foreach((json_t *)attributes, name, attr)
    {
        json_t *v = zarr_meta_hidden_attr(name) || hjson_unloadable(name) ? NULL : attr_value(attr);
        if (v && json_object_set_new(o, name, v) != 0) {
            json_decref(o);
            return -ENOMEM;
        }
    }
    if (dims) {
        json_t *d = json_array();
        for (int k = 0; d && k < rank; k++)
            json_array_append_new(d, json_string(dims[k]));
        if (!d || json_object_set_new(o, "_ARRAY_DIMENSIONS", d) != 0) {
            json_decref(o);
            return -ENOMEM;
        }
    }
    int rc = hjson_dumps(o, out);
    json_decref(o);
    if (rc == 0)
        *len = strlen(*out);
    return rc;
}
