/* h5value_out_json: buffers read from HDF5 -> the JSON value HSDS stores for an attribute
 * (spec §3.6 table). See include/h5osfs/h5json/h5value.h.
 *
 * Elements are what h5pyd sends (its attrs._bytesArrayToList of numpy's tolist()), which HSDS
 * stores without re-encoding: integers as JSON integers (uint64 above INT64_MAX as the big
 * integer marker of hjson.h, which hjson_dumps writes as digits), booleans as true/false, enums
 * as their integer, floats widened to double (NaN and infinities as the hjson markers), fixed
 * strings as their text with trailing NULs dropped (numpy's S type drops them), vlen strings as
 * text (unset as ""), opaque as the text of all its bytes, references as "groups/<id>" etc.,
 * compounds as arrays of field values, arrays as nested arrays of their dims, vlen sequences as
 * arrays. Text that is not valid UTF-8 is refused (-EINVAL): the caller stores the value
 * base64-encoded instead (§3.6 "encoding"). */
#include "h5osfs/h5json/h5value.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"

#include "h5osfs/util/fpenv.h"
#include "h5value_priv.h"
#include "h5osfs/util/why.h"

struct jout {
    const struct h5value_ids *ids;
    char msg[H5VALUE_MSG_LEN];
};

#define FAIL(c, ...) why_reject((c)->msg, sizeof((c)->msg), __VA_ARGS__)

static int elem_json(struct jout *c, const struct h5type_desc *d, const unsigned char *src,
                     json_t **out);

/* *out = v (a new reference, or NULL when jansson failed: out of memory). */
static int made(json_t *v, json_t **out)
{
    *out = v;
    return v ? 0 : -ENOMEM;
}

/* ---- numbers ---- */

static uint64_t load_bits(const unsigned char *src, unsigned nbytes, bool big_endian)
{
    uint64_t bits = 0;
    for (unsigned k = 0; k < nbytes; k++)
        bits |= (uint64_t)src[big_endian ? nbytes - 1 - k : k] << (8 * k);
    return bits;
}

static int int_json(const struct h5type_desc *d, const unsigned char *src, json_t **out)
{
    uint64_t bits = load_bits(src, d->nbytes, d->big_endian);
    if (d->is_bool)
        return made(json_boolean(bits != 0), out); /* numpy's bool: any non-zero byte is true */
    if (d->is_signed) {
        if (d->nbytes < 8 && (bits >> (8 * d->nbytes - 1)) & 1)
            bits |= UINT64_MAX << (8 * d->nbytes); /* sign-extend */
        return made(json_integer((json_int_t)(int64_t)bits), out);
    }
    if (bits <= INT64_MAX)
        return made(json_integer((json_int_t)bits), out);
    char text[32];
    snprintf(text, sizeof(text), "%s%" PRIu64, HJSON_BIGINT_PREFIX, bits);
    return made(json_string(text), out);
}

static double half_to_double(uint16_t h)
{
    int exp = (h >> 10) & 0x1f;
    double man = h & 0x3ff;
    double x;
    if (exp == 0)
        x = ldexp(man, -24); /* zero or subnormal */
    else if (exp == 31)
        x = man != 0 ? NAN : INFINITY;
    else
        x = ldexp(man + 1024, exp - 25);
    return (h & 0x8000) ? -x : x;
}

static int float_json(const struct h5type_desc *d, const unsigned char *src, json_t **out)
{
    uint64_t bits = load_bits(src, d->nbytes, d->big_endian);
    double x;
    if (d->nbytes == 8) {
        memcpy(&x, &bits, sizeof(x));
    } else if (d->nbytes == 4) {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof(f));
        x = f;
    } else {
        x = half_to_double((uint16_t)bits);
    }
    if (isnan(x))
        return made(json_string(HJSON_NAN), out);
    if (isinf(x))
        return made(json_string(x > 0 ? HJSON_INF : HJSON_NINF), out);
    return made(json_real(x), out);
}

/* ---- text ---- */

/* len bytes of text as a JSON string: -EINVAL if not UTF-8 (jansson validates). */
static int text_json(struct jout *c, const char *text, size_t len, const char *what, json_t **out)
{
    *out = json_stringn(text, len);
    return *out ? 0 : FAIL(c, "%s is not valid UTF-8", what);
}

static int fstr_json(struct jout *c, const struct h5type_desc *d, const unsigned char *src,
                     json_t **out)
{
    size_t len = d->length;
    while (len > 0 && src[len - 1] == '\0')
        len--;
    return text_json(c, (const char *)src, len, "fixed string", out);
}

static int vstr_json(struct jout *c, const unsigned char *src, json_t **out)
{
    const char *s;
    memcpy(&s, src, sizeof(s));
    return text_json(c, s ? s : "", s ? strlen(s) : 0, "string", out);
}

static int ref_json(struct jout *c, const unsigned char *src, json_t **out)
{
    hobj_ref_t ref;
    char text[H5VALUE_REF_TEXT];
    memcpy(&ref, src, sizeof(ref));
    int rc = h5value_ref_to_text(c->ids, &ref, text, c->msg, sizeof(c->msg));
    return rc == 0 ? made(json_string(text), out) : rc;
}

/* ---- lists ---- */

/* Append v (stolen) to list; -ENOMEM. */
static int append(json_t *list, json_t *v)
{
    return json_array_append_new(list, v) == 0 ? 0 : -ENOMEM;
}

/* n elements of d, step bytes apart, as a JSON array. */
static int list_json(struct jout *c, const struct h5type_desc *d, const unsigned char *src,
                     size_t n, size_t step, json_t **out)
{
    json_t *list = json_array();
    int rc = list ? 0 : -ENOMEM;
    for (size_t k = 0; k < n && rc == 0; k++) {
        json_t *v;
        rc = elem_json(c, d, src + k * step, &v);
        if (rc == 0)
            rc = append(list, v);
    }
    if (rc != 0)
        json_decref(list);
    *out = rc == 0 ? list : NULL;
    return rc;
}

/* The dims of an array element from level on, as nested arrays (C order). */
static int array_json(struct jout *c, const struct h5type_desc *d, const unsigned char *src,
                      int level, json_t **out)
{
    size_t inner = 1; /* base elements under one item of this level */
    for (int k = level + 1; k < d->rank; k++)
        inner *= d->dims[k];
    if (level == d->rank - 1)
        return list_json(c, d->base, src, d->dims[level], d->base->mem_size, out);
    json_t *list = json_array();
    int rc = list ? 0 : -ENOMEM;
    for (hsize_t k = 0; k < d->dims[level] && rc == 0; k++) {
        json_t *v;
        rc = array_json(c, d, src + k * inner * d->base->mem_size, level + 1, &v);
        if (rc == 0)
            rc = append(list, v);
    }
    if (rc != 0)
        json_decref(list);
    *out = rc == 0 ? list : NULL;
    return rc;
}

static int vlen_json(struct jout *c, const struct h5type_desc *d, const unsigned char *src,
                     json_t **out)
{
    hvl_t vl;
    memcpy(&vl, src, sizeof(vl));
    if (vl.len > 0 && !vl.p)
        return FAIL(c, "vlen of %zu items without data", vl.len);
    return list_json(c, d->base, vl.p, vl.len, d->base->mem_size, out);
}

static int compound_json(struct jout *c, const struct h5type_desc *d, const unsigned char *src,
                         json_t **out)
{
    json_t *list = json_array();
    int rc = list ? 0 : -ENOMEM;
    for (size_t k = 0; k < d->n_fields && rc == 0; k++) {
        json_t *v;
        rc = elem_json(c, d->fields[k].type, src + d->fields[k].offset, &v);
        if (rc == 0)
            rc = append(list, v);
    }
    if (rc != 0)
        json_decref(list);
    *out = rc == 0 ? list : NULL;
    return rc;
}

static int elem_json(struct jout *c, const struct h5type_desc *d, const unsigned char *src,
                     json_t **out)
{
    *out = NULL;
    switch (d->kind) {
    case H5TYPE_K_INT:
    case H5TYPE_K_ENUM:
        return int_json(d, src, out);
    case H5TYPE_K_FLOAT:
        return float_json(d, src, out);
    case H5TYPE_K_FSTR:
        return fstr_json(c, d, src, out);
    case H5TYPE_K_OPAQUE:
        return text_json(c, (const char *)src, d->mem_size, "opaque value", out);
    case H5TYPE_K_VSTR:
        return vstr_json(c, src, out);
    case H5TYPE_K_REF:
        return ref_json(c, src, out);
    case H5TYPE_K_ARRAY:
        return array_json(c, d, src, 0, out);
    case H5TYPE_K_VLEN:
        return vlen_json(c, d, src, out);
    case H5TYPE_K_COMPOUND:
        return compound_json(c, d, src, out);
    }
    return FAIL(c, "unexpected type");
}

/* ---- the whole value ---- */

struct walk {
    struct jout ctx;
    const struct h5type_desc *d;
    const hsize_t *dims;
    int rank;
    const unsigned char *src;
    size_t index;
    char *why;
    size_t why_len;
};

static int walk_value(struct walk *w, int level, json_t **out)
{
    if (level == w->rank) {
        int rc = elem_json(&w->ctx, w->d, w->src, out);
        if (rc == -ENOMEM)
            why_reject(w->why, w->why_len, "out of memory");
        else if (rc != 0)
            why_reject(w->why, w->why_len, "element %zu: %s", w->index, w->ctx.msg);
        w->src += w->d->mem_size;
        w->index++;
        return rc;
    }
    json_t *list = json_array();
    int rc = list ? 0 : -ENOMEM;
    for (hsize_t k = 0; k < w->dims[level] && rc == 0; k++) {
        json_t *v;
        rc = walk_value(w, level + 1, &v);
        if (rc == 0 && append(list, v) != 0)
            rc = -ENOMEM;
    }
    if (rc == -ENOMEM)
        why_reject(w->why, w->why_len, "out of memory");
    if (rc != 0)
        json_decref(list);
    *out = rc == 0 ? list : NULL;
    return rc;
}

/* The shape must be one HDF5 can have and its elements must fit in memory. */
static int check_shape(const struct h5type_desc *d, int rank, const hsize_t *dims, size_t *n,
                       char *why, size_t why_len)
{
    size_t count = 1;
    if (rank < 0 || rank > H5S_MAX_RANK || (rank > 0 && !dims))
        return why_reject(why, why_len, "rank %d is not 0..%d", rank, H5S_MAX_RANK);
    for (int k = 0; k < rank; k++) {
        if (dims[k] > SIZE_MAX || (dims[k] != 0 && count > SIZE_MAX / dims[k]))
            return why_reject(why, why_len, "shape overflows memory");
        count *= (size_t)dims[k];
    }
    if (count > SIZE_MAX / d->mem_size)
        return why_reject(why, why_len, "shape overflows memory");
    *n = count;
    return 0;
}

int h5value_to_json(const json_t *type_json, hid_t tid, const void *buf, int rank,
                    const hsize_t *dims, const struct h5value_ids *ids, json_t **out, char *why,
                    size_t why_len)
{
    struct h5type_desc *d;
    if (!out)
        return why_reject(why, why_len, "no output");
    *out = NULL;
    int rc = h5value_begin(type_json, tid, &d, why, why_len);
    if (rc != 0)
        return rc;
    size_t n = 0;
    rc = check_shape(d, rank, dims, &n, why, why_len);
    if (rc == 0 && !buf && n > 0)
        rc = why_reject(why, why_len, "no value");
    if (rc == 0) {
        struct walk w = { .ctx = { .ids = ids },
                          .d = d,
                          .dims = dims,
                          .rank = rank,
                          .src = buf,
                          .why = why,
                          .why_len = why_len };
        struct fpenv fe;
        fpenv_enter(&fe); /* floats widened to doubles keep their subnormals */
        rc = walk_value(&w, 0, out);
        fpenv_leave(&fe);
    }
    h5type_desc_free(d);
    return rc;
}
