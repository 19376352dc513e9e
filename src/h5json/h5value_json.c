/* h5value_json: JSON element values (spec §3.6 table, §5.1) -> buffers for HDF5.
 * See include/h5osfs/h5json/h5value.h.
 *
 * The value's shape is found from the type: an element of a compound is an array of its
 * fields, an element of an H5T_ARRAY nested arrays of its dims, an element of a vlen an
 * array, any other element a JSON scalar. Arrays around elements are the dataspace's
 * dimensions: they must be regular, and hold exactly n elements. */
#include "h5osfs/h5json/h5value.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"

#include "h5osfs/util/fpenv.h"
#include "h5value_priv.h"
#include "h5osfs/util/why.h"

struct jctx {
    const struct h5value_refs *refs;
    char msg[H5VALUE_MSG_LEN];
};

#define FAIL(c, ...) why_reject((c)->msg, sizeof((c)->msg), __VA_ARGS__)

/* ---- shape ---- */

static bool fits(const struct h5type_desc *d, const json_t *v);

static bool fits_array(const struct h5type_desc *d, const json_t *v, int level)
{
    if (level == d->rank)
        return fits(d->base, v);
    if (!json_is_array(v) || json_array_size(v) != d->dims[level])
        return false;
    for (size_t k = 0; k < json_array_size(v); k++) {
        if (!fits_array(d, json_array_get(v, k), level + 1))
            return false;
    }
    return true;
}

/* Could v be one element of d, judging by its nesting only (values are checked later)? */
static bool fits(const struct h5type_desc *d, const json_t *v)
{
    switch (d->kind) {
    case H5TYPE_K_ARRAY:
        return fits_array(d, v, 0);
    case H5TYPE_K_VLEN:
        if (!json_is_array(v))
            return false;
        for (size_t k = 0; k < json_array_size(v); k++) {
            if (!fits(d->base, json_array_get(v, k)))
                return false;
        }
        return true;
    case H5TYPE_K_COMPOUND:
        if (!json_is_array(v) || json_array_size(v) != d->n_fields)
            return false;
        for (size_t k = 0; k < d->n_fields; k++) {
            if (!fits(d->fields[k].type, json_array_get(v, k)))
                return false;
        }
        return true;
    default:
        return !json_is_array(v) && !json_is_object(v);
    }
}

/* Dimensions around the elements, following first items. */
static int shape_of(const struct h5type_desc *d, const json_t *v, hsize_t *dims, int *rank,
                    char *why, size_t why_len)
{
    *rank = 0;
    while (!fits(d, v)) {
        if (!json_is_array(v))
            return why_reject(why, why_len, "value does not match the type");
        if (*rank == H5S_MAX_RANK)
            return why_reject(why, why_len, "value nested deeper than %d", H5S_MAX_RANK);
        dims[(*rank)++] = json_array_size(v);
        if (json_array_size(v) == 0)
            break;
        v = json_array_get(v, 0);
    }
    return 0;
}

static int count_of(const hsize_t *dims, int rank, size_t *count)
{
    *count = 1;
    for (int k = 0; k < rank; k++) {
        if (dims[k] != 0 && *count > SIZE_MAX / dims[k])
            return -EINVAL;
        *count *= dims[k];
    }
    return 0;
}

/* ---- scalars ---- */

static int put_int(struct jctx *c, const struct h5type_desc *d, const json_t *v, unsigned char *dst)
{
    struct h5type_int i;
    uint64_t bits;
    if (d->is_bool && json_is_boolean(v)) {
        dst[0] = json_is_true(v) ? 1 : 0;
        return 0;
    }
    int rc = h5type_int_from_json(v, true, &i);
    if (rc == -EINVAL)
        return FAIL(c, "not an integer");
    if (rc != 0 || h5type_int_bits(d, i, &bits) != 0)
        return FAIL(c, "integer out of range for %u-byte %s", d->nbytes,
                    d->is_signed ? "signed" : "unsigned");
    if (d->is_bool)
        bits = bits != 0; /* numpy's bool: any non-zero integer is true */
    h5type_store_bits(dst, bits, d->nbytes, d->big_endian);
    return 0;
}

/* Round to nearest even, straight from the double (as numpy's npy_double_to_half). */
static uint16_t half_from_double(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof(b));
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000u);
    int exp = (int)((b >> 52) & 0x7ff);
    uint64_t man = b & 0xfffffffffffffull;
    if (exp == 0x7ff) { /* inf, or NaN keeping the payload's top bits, never turned into inf */
        uint16_t h = (uint16_t)(0x7c00u | (man >> 42));
        return (uint16_t)(sign | (man && (h & 0x3ff) == 0 ? h | 0x200 : h));
    }
    int e = exp - 1023 + 15; /* the half's biased exponent */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e < -10)
        return sign; /* below half the smallest subnormal */
    unsigned shift = 42;
    uint64_t h;
    if (e <= 0) { /* subnormal half */
        man |= (uint64_t)1 << 52;
        shift = (unsigned)(43 - e);
        h = man >> shift;
    } else {
        h = ((uint64_t)e << 10) | (man >> 42);
    }
    uint64_t rem = man & (((uint64_t)1 << shift) - 1), halfway = (uint64_t)1 << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1)))
        h++; /* a carry into the exponent is right, up to inf */
    return (uint16_t)(sign | h);
}

static int put_float(struct jctx *c, const struct h5type_desc *d, const json_t *v,
                     unsigned char *dst)
{
    double x;
    uint64_t bits;
    if (hjson_number(v, &x) != 0)
        return FAIL(c, "not a number");
    if (d->nbytes == 8) {
        memcpy(&bits, &x, sizeof(bits));
    } else if (d->nbytes == 4) {
        float f = (float)x; /* IEEE: out of range gives ±inf, as numpy */
        uint32_t b32;
        memcpy(&b32, &f, sizeof(b32));
        bits = b32;
    } else {
        bits = half_from_double(x);
    }
    h5type_store_bits(dst, bits, d->nbytes, d->big_endian);
    return 0;
}

/* Fixed strings and opaque: the bytes, NUL-padded, cut at size (numpy does not refuse). */
static int put_bytes(struct jctx *c, size_t size, const json_t *v, unsigned char *dst)
{
    if (!json_is_string(v))
        return FAIL(c, "not a string");
    if (hjson_unloadable(json_string_value(v)))
        return FAIL(c, "string with a lone UTF-16 surrogate");
    size_t len = json_string_length(v);
    if (len > size)
        len = size;
    memcpy(dst, json_string_value(v), len);
    memset(dst + len, 0, size - len);
    return 0;
}

static int put_vstr(struct jctx *c, const json_t *v, unsigned char *dst)
{
    if (!json_is_string(v))
        return FAIL(c, "not a string");
    size_t len = json_string_length(v);
    if (strlen(json_string_value(v)) != len)
        return FAIL(c, "string with a NUL character");
    if (hjson_unloadable(json_string_value(v)))
        return FAIL(c, "string with a lone UTF-16 surrogate");
    char *s = strndup(json_string_value(v), len);
    if (!s)
        return -ENOMEM;
    memcpy(dst, &s, sizeof(s));
    return 0;
}

static int put_ref(struct jctx *c, const json_t *v, unsigned char *dst)
{
    hobj_ref_t ref;
    if (!json_is_string(v))
        return FAIL(c, "reference is not a string");
    int rc = h5value_ref_from_text(c->refs, json_string_value(v), json_string_length(v), &ref,
                                   c->msg, sizeof(c->msg));
    if (rc == 0)
        memcpy(dst, &ref, sizeof(ref));
    return rc;
}

/* ---- elements ---- */

static int put_elem(struct jctx *c, const struct h5type_desc *d, const json_t *v,
                    unsigned char *dst);

static int put_array(struct jctx *c, const struct h5type_desc *d, const json_t *v, int level,
                     unsigned char **dst)
{
    if (level == d->rank) {
        int rc = put_elem(c, d->base, v, *dst);
        *dst += d->base->mem_size;
        return rc;
    }
    if (!json_is_array(v) || json_array_size(v) != d->dims[level])
        return FAIL(c, "array element does not have dims of the array type");
    for (size_t k = 0; k < d->dims[level]; k++) {
        int rc = put_array(c, d, json_array_get(v, k), level + 1, dst);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int put_vlen(struct jctx *c, const struct h5type_desc *d, const json_t *v,
                    unsigned char *dst)
{
    hvl_t vl = { json_array_size(v), NULL };
    if (!json_is_array(v))
        return FAIL(c, "vlen element is not an array");
    if (vl.len > 0) {
        vl.p = calloc(vl.len, d->base->mem_size);
        if (!vl.p)
            return -ENOMEM;
        /* the base has no vlen parts: nothing inside needs freeing on failure */
        for (size_t k = 0; k < vl.len; k++) {
            int rc = put_elem(c, d->base, json_array_get(v, k),
                              (unsigned char *)vl.p + k * d->base->mem_size);
            if (rc != 0) {
                free(vl.p);
                return rc;
            }
        }
    }
    memcpy(dst, &vl, sizeof(vl));
    return 0;
}

static int put_compound(struct jctx *c, const struct h5type_desc *d, const json_t *v,
                        unsigned char *dst)
{
    if (!json_is_array(v) || json_array_size(v) != d->n_fields)
        return FAIL(c, "compound element is not an array of %zu fields", d->n_fields);
    for (size_t k = 0; k < d->n_fields; k++) {
        const struct h5type_field *f = &d->fields[k];
        int rc = put_elem(c, f->type, json_array_get(v, k), dst + f->offset);
        if (rc != 0)
            return rc; /* fields already set are freed with the whole buffer */
    }
    return 0;
}

static int put_elem(struct jctx *c, const struct h5type_desc *d, const json_t *v,
                    unsigned char *dst)
{
    switch (d->kind) {
    case H5TYPE_K_INT:
    case H5TYPE_K_ENUM:
        return put_int(c, d, v, dst);
    case H5TYPE_K_FLOAT:
        return put_float(c, d, v, dst);
    case H5TYPE_K_FSTR:
        return put_bytes(c, d->length, v, dst);
    case H5TYPE_K_OPAQUE:
        return put_bytes(c, d->mem_size, v, dst);
    case H5TYPE_K_VSTR:
        return put_vstr(c, v, dst);
    case H5TYPE_K_REF:
        return put_ref(c, v, dst);
    case H5TYPE_K_ARRAY:
        return put_array(c, d, v, 0, &dst);
    case H5TYPE_K_VLEN:
        return put_vlen(c, d, v, dst);
    case H5TYPE_K_COMPOUND:
        return put_compound(c, d, v, dst);
    }
    return FAIL(c, "unexpected type");
}

/* ---- the whole value ---- */

struct walk {
    struct jctx ctx;
    const struct h5type_desc *d;
    const hsize_t *dims;
    int rank;
    unsigned char *dst;
    size_t index;
    char *why;
    size_t why_len;
};

static int walk_value(struct walk *w, const json_t *v, int level)
{
    if (level == w->rank) {
        int rc = put_elem(&w->ctx, w->d, v, w->dst);
        if (rc != 0) {
            if (rc == -ENOMEM)
                why_reject(w->why, w->why_len, "out of memory");
            else
                why_reject(w->why, w->why_len, "element %zu: %s", w->index, w->ctx.msg);
            return rc;
        }
        w->dst += w->d->mem_size;
        w->index++;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) != w->dims[level])
        return why_reject(w->why, w->why_len, "nested arrays of the value are not regular");
    for (size_t k = 0; k < w->dims[level]; k++) {
        int rc = walk_value(w, json_array_get(v, k), level + 1);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The value's dimensions around its elements, which must number exactly n (checked before
 * anything is allocated for them). rank -1: an empty value for n == 0, nothing to walk. */
static int value_shape(const struct h5type_desc *d, const json_t *value, size_t n, hsize_t *dims,
                       int *rank, char *why, size_t why_len)
{
    size_t count;
    if (n == 0 && json_is_array(value) && json_array_size(value) == 0) {
        *rank = -1;
        return 0;
    }
    int rc = shape_of(d, value, dims, rank, why, why_len);
    if (rc != 0)
        return rc;
    if (count_of(dims, *rank, &count) != 0 || count != n)
        return why_reject(why, why_len, "value has %zu elements, expected %zu", count, n);
    return 0;
}

static int fill(const struct h5type_desc *d, const json_t *value, const hsize_t *dims, int rank,
                const struct h5value_refs *refs, unsigned char *buf, char *why, size_t why_len)
{
    if (rank < 0)
        return 0;
    struct walk w = { .ctx = { .refs = refs },
                      .d = d,
                      .dims = dims,
                      .rank = rank,
                      .dst = buf,
                      .why = why,
                      .why_len = why_len };
    return walk_value(&w, value, 0);
}

int h5value_from_json(const json_t *type_json, hid_t tid, const json_t *value, size_t n,
                      const struct h5value_refs *refs, void **buf, char *why, size_t why_len)
{
    struct h5type_desc *d;
    unsigned char *b = NULL;
    hsize_t dims[H5S_MAX_RANK];
    int rank = 0;
    if (!buf || !value)
        return why_reject(why, why_len, "no value");
    *buf = NULL;
    int rc = h5value_begin(type_json, tid, &d, why, why_len);
    if (rc != 0)
        return rc;
    rc = value_shape(d, value, n, dims, &rank, why, why_len);
    if (rc == 0)
        rc = h5value_alloc(d, n, &b, why, why_len);
    struct fpenv fe;
    fpenv_enter(&fe); /* doubles narrowed to floats keep their subnormals */
    if (rc == 0)
        rc = fill(d, value, dims, rank, refs, b, why, why_len);
    fpenv_leave(&fe);
    h5type_desc_free(d);
    if (rc != 0) {
        if (b)
            h5value_free(tid, b, n);
        return rc;
    }
    *buf = b;
    return 0;
}
