/* h5type_desc: HSDS type JSON (spec §4) -> a validated descriptor. See h5type_desc.h.
 *
 * Every rule HSDS applies when it builds a numpy dtype from type JSON (hdf5dtype.createDataType)
 * is checked here, plus the limits of h5type.h, so that h5type.c and h5value*.c can trust the
 * descriptor. */
#include "h5type_desc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/why.h"

/* ---- predefined names (§4): H5T_STD_[IU]{8,16,32,64} and H5T_IEEE_F{16,32,64}, each with
 * LE or BE; HSDS (getNumpyTypename) also takes them without a suffix, as little-endian. ---- */

static int parse_bits(const char *s, const char **suffix)
{
    static const struct {
        const char *digits;
        int bits;
    } widths[] = { { "8", 8 }, { "16", 16 }, { "32", 32 }, { "64", 64 } };
    for (size_t k = 0; k < sizeof(widths) / sizeof(widths[0]); k++) {
        size_t n = strlen(widths[k].digits);
        if (strncmp(s, widths[k].digits, n) == 0) {
            *suffix = s + n;
            return widths[k].bits;
        }
    }
    return -1;
}

static int parse_name(const char *name, struct h5type_desc *d)
{
    const char *rest, *suffix;
    if (strncmp(name, "H5T_STD_", 8) == 0 && (name[8] == 'I' || name[8] == 'U')) {
        d->kind = H5TYPE_K_INT;
        d->is_signed = name[8] == 'I';
        rest = name + 9;
    } else if (strncmp(name, "H5T_IEEE_F", 10) == 0) {
        d->kind = H5TYPE_K_FLOAT;
        rest = name + 10;
    } else {
        return -EINVAL;
    }
    int bits = parse_bits(rest, &suffix);
    if (bits < 0 || (d->kind == H5TYPE_K_FLOAT && bits == 8))
        return -EINVAL;
    if (strcmp(suffix, "BE") == 0)
        d->big_endian = true;
    else if (strcmp(suffix, "LE") != 0 && suffix[0] != '\0')
        return -EINVAL;
    d->nbytes = (unsigned)bits / 8;
    d->mem_size = d->stored_size = d->nbytes;
    return 0;
}

/* ---- the parser ---- */

struct parser {
    char *why;
    size_t why_len;
};

static int parse_node(struct parser *p, const json_t *type, int depth, struct h5type_desc **out);

static int parse_named(struct parser *p, const char *name, struct h5type_desc *d,
                       enum h5type_kind want)
{
    if (parse_name(name, d) != 0 || d->kind != want)
        return why_reject(p->why, p->why_len, "unknown %s type name \"%s\"",
                          want == H5TYPE_K_INT ? "integer" : "float", name);
    return 0;
}

static int parse_number_class(struct parser *p, const json_t *type, struct h5type_desc *d,
                              enum h5type_kind want)
{
    const json_t *base = json_object_get(type, "base");
    if (!hjson_text(base))
        return why_reject(p->why, p->why_len, "%s type without a base name",
                          want == H5TYPE_K_INT ? "integer" : "float");
    return parse_named(p, hjson_text(base), d, want);
}

/* A positive JSON integer no larger than H5TYPE_MAX_ELEMENT. */
static int size_member(const json_t *v, size_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
        json_integer_value(v) > (json_int_t)H5TYPE_MAX_ELEMENT)
        return -EINVAL;
    *out = (size_t)json_integer_value(v);
    return 0;
}

static int parse_string(struct parser *p, const json_t *type, struct h5type_desc *d)
{
    const char *cset = hjson_text(json_object_get(type, "charSet"));
    const char *pad = hjson_text(json_object_get(type, "strPad"));
    const json_t *length = json_object_get(type, "length");

    if (cset && strcmp(cset, "H5T_CSET_ASCII") == 0)
        d->cset = H5T_CSET_ASCII;
    else if (cset && strcmp(cset, "H5T_CSET_UTF8") == 0)
        d->cset = H5T_CSET_UTF8;
    else
        return why_reject(p->why, p->why_len, "string type without a valid charSet");

    bool variable = hjson_text(length) && strcmp(hjson_text(length), "H5T_VARIABLE") == 0;
    if (!variable && size_member(length, &d->length) != 0)
        return why_reject(p->why, p->why_len, "string length is not H5T_VARIABLE or 1..%u",
                          H5TYPE_MAX_ELEMENT);

    d->pad = variable ? H5T_STR_NULLTERM : H5T_STR_NULLPAD;
    if (pad && strcmp(pad, "H5T_STR_NULLPAD") == 0)
        d->pad = H5T_STR_NULLPAD;
    else if (pad && strcmp(pad, "H5T_STR_NULLTERM") == 0)
        d->pad = H5T_STR_NULLTERM;
    else if (pad && strcmp(pad, "H5T_STR_SPACEPAD") == 0)
        d->pad = H5T_STR_SPACEPAD;
    else if (json_object_get(type, "strPad"))
        return why_reject(p->why, p->why_len, "unknown strPad");

    if (variable) {
        d->kind = H5TYPE_K_VSTR;
        d->mem_size = sizeof(char *);
        d->traits = H5TYPE_HAS_VLEN;
    } else {
        d->kind = H5TYPE_K_FSTR;
        d->mem_size = d->stored_size = d->length;
    }
    return 0;
}

static int parse_opaque(struct parser *p, const json_t *type, struct h5type_desc *d)
{
    const json_t *tag = json_object_get(type, "tag");
    if (size_member(json_object_get(type, "size"), &d->mem_size) != 0)
        return why_reject(p->why, p->why_len, "opaque size is not 1..%u", H5TYPE_MAX_ELEMENT);
    if (tag && (!hjson_text(tag) || json_string_length(tag) >= H5T_OPAQUE_TAG_MAX))
        return why_reject(p->why, p->why_len, "opaque tag is not a text of < %d bytes",
                          H5T_OPAQUE_TAG_MAX);
    d->kind = H5TYPE_K_OPAQUE;
    d->stored_size = d->mem_size;
    d->tag = tag ? hjson_text(tag) : "";
    return 0;
}

static int parse_reference(struct parser *p, const json_t *type, struct h5type_desc *d)
{
    const char *base = hjson_text(json_object_get(type, "base"));
    if (base && strcmp(base, "H5T_STD_REF_DSETREG") == 0)
        return why_reject(p->why, p->why_len, "region references are not supported");
    if (!base || strcmp(base, "H5T_STD_REF_OBJ") != 0)
        return why_reject(p->why, p->why_len, "reference type without base H5T_STD_REF_OBJ");
    d->kind = H5TYPE_K_REF;
    d->mem_size = sizeof(hobj_ref_t);
    d->stored_size = H5TYPE_DESC_REF_STORED;
    d->traits = H5TYPE_HAS_REF;
    return 0;
}

/* Both names present and nothing else: numpy turns such an I8 enum into bool. */
static bool mapping_is_bool(const json_t *mapping)
{
    return json_object_size(mapping) == 2 && json_object_get(mapping, "TRUE") &&
           json_object_get(mapping, "FALSE");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Names non-empty, values in range of the base and distinct (HDF5's H5Tenum_insert refuses
 * repeated values). */
static int check_mapping(struct parser *p, const json_t *mapping, const struct h5type_desc *d)
{
    const char *name;
    const json_t *value;
    size_t n = json_object_size(mapping), i = 0;
    uint64_t *seen = calloc(n, sizeof(*seen));
    if (!seen)
        return why_oom(p->why, p->why_len);
    int rc = 0;
    json_object_foreach((json_t *)mapping, name, value)
    {
        struct h5type_int v;
        if (name[0] == '\0') {
            rc = why_reject(p->why, p->why_len, "enum with an empty name");
            break;
        }
        if (hjson_unloadable(name)) {
            rc = why_reject(p->why, p->why_len, "enum name \"%.60s\" is not Unicode text",
                            name + strlen(HJSON_UNLOADABLE));
            break;
        }
        if (h5type_int_from_json(value, false, &v) != 0 || h5type_int_bits(d, v, &seen[i++]) != 0) {
            rc = why_reject(p->why, p->why_len, "enum value of \"%s\" is not an integer in range",
                            name);
            break;
        }
    }
    if (rc == 0) {
        qsort(seen, n, sizeof(*seen), cmp_u64);
        for (size_t k = 1; k < n && rc == 0; k++) {
            if (seen[k] == seen[k - 1])
                rc = why_reject(p->why, p->why_len, "enum values are not distinct");
        }
    }
    free(seen);
    return rc;
}

static int parse_enum(struct parser *p, const json_t *type, int depth, struct h5type_desc *d)
{
    const json_t *base_json = json_object_get(type, "base");
    const json_t *mapping = json_object_get(type, "mapping");
    const char *base_class = hjson_text(json_object_get(base_json, "class"));
    struct h5type_desc *base = NULL;

    if (!json_is_object(base_json) || !base_class || strcmp(base_class, "H5T_INTEGER") != 0)
        return why_reject(p->why, p->why_len, "enum base is not an H5T_INTEGER object");
    if (!json_is_object(mapping) || json_object_size(mapping) == 0)
        return why_reject(p->why, p->why_len, "enum without mapping");
    int rc = parse_node(p, base_json, depth + 1, &base);
    if (rc != 0)
        return rc;
    d->kind = H5TYPE_K_ENUM;
    d->nbytes = base->nbytes;
    d->is_signed = base->is_signed;
    d->big_endian = base->big_endian;
    d->mem_size = d->stored_size = base->mem_size;
    d->is_bool = d->nbytes == 1 && d->is_signed && mapping_is_bool(mapping);
    d->mapping = mapping;
    h5type_desc_free(base);
    return check_mapping(p, mapping, d);
}

static int parse_dims(struct parser *p, const json_t *dims, struct h5type_desc *d)
{
    size_t n = json_is_integer(dims) ? 1 : json_array_size(dims);
    if (n == 0 || n > H5TYPE_DESC_MAX_RANK)
        return why_reject(p->why, p->why_len, "array dims is not an integer or a list of 1..%d",
                          H5TYPE_DESC_MAX_RANK);
    d->rank = (int)n;
    d->count = 1;
    for (size_t k = 0; k < n; k++) {
        const json_t *dim = json_is_integer(dims) ? dims : json_array_get(dims, k);
        size_t v;
        if (size_member(dim, &v) != 0 || d->count > H5TYPE_MAX_ELEMENT / v)
            return why_reject(p->why, p->why_len, "array dims must be positive, product <= %u",
                              H5TYPE_MAX_ELEMENT);
        d->dims[k] = v;
        d->count *= v;
    }
    return 0;
}

/* The classes a base may have: HSDS's createBaseDataType refuses the others (§4). */
static int check_base_class(struct parser *p, const json_t *base, const char *const *allowed,
                            const char *what)
{
    if (json_is_string(base))
        return 0;
    const char *cls = hjson_text(json_object_get(base, "class"));
    for (size_t k = 0; cls && allowed[k]; k++) {
        if (strcmp(cls, allowed[k]) == 0)
            return 0;
    }
    return why_reject(p->why, p->why_len, "%s base of class %s not supported", what,
                      cls ? cls : "(none)");
}

static int parse_array(struct parser *p, const json_t *type, int depth, struct h5type_desc *d)
{
    static const char *const allowed[] = { "H5T_INTEGER", "H5T_FLOAT", "H5T_STRING", "H5T_ARRAY",
                                           NULL };
    const json_t *base = json_object_get(type, "base");
    int rc = parse_dims(p, json_object_get(type, "dims"), d);
    if (rc == 0)
        rc = check_base_class(p, base, allowed, "array");
    if (rc == 0)
        rc = parse_node(p, base, depth + 1, &d->base);
    if (rc != 0)
        return rc;
    d->kind = H5TYPE_K_ARRAY;
    d->traits = d->base->traits;
    if (d->base->mem_size > H5TYPE_MAX_ELEMENT / d->count ||
        d->base->stored_size > H5TYPE_MAX_ELEMENT / d->count)
        return why_reject(p->why, p->why_len, "array element larger than %u bytes",
                          H5TYPE_MAX_ELEMENT);
    d->mem_size = d->count * d->base->mem_size;
    d->stored_size = d->count * d->base->stored_size;
    return 0;
}

static int parse_vlen(struct parser *p, const json_t *type, int depth, struct h5type_desc *d)
{
    static const char *const allowed[] = { "H5T_INTEGER", "H5T_FLOAT", "H5T_STRING",
                                           "H5T_OPAQUE",  "H5T_ENUM",  "H5T_REFERENCE",
                                           "H5T_ARRAY",   NULL };
    const json_t *base = json_object_get(type, "base");
    int rc = check_base_class(p, base, allowed, "vlen");
    if (rc == 0)
        rc = parse_node(p, base, depth + 1, &d->base);
    if (rc != 0)
        return rc;
    if (d->base->traits & H5TYPE_HAS_VLEN)
        return why_reject(p->why, p->why_len, "vlen of variable-length data not supported");
    d->kind = H5TYPE_K_VLEN;
    d->mem_size = sizeof(hvl_t);
    d->traits = H5TYPE_HAS_VLEN | d->base->traits;
    return 0;
}

static int parse_field(struct parser *p, const json_t *field, int depth, struct h5type_field *f)
{
    const json_t *name = json_object_get(field, "name");
    if (!hjson_text(name) || json_string_length(name) == 0)
        return why_reject(p->why, p->why_len, "compound field without a name");
    for (const unsigned char *c = (const unsigned char *)hjson_text(name); *c; c++) {
        if (*c >= 0x80)
            return why_reject(p->why, p->why_len, "compound field name is not ASCII");
    }
    f->name = hjson_text(name);
    if (!json_object_get(field, "type"))
        return why_reject(p->why, p->why_len, "compound field \"%s\" without a type", f->name);
    return parse_node(p, json_object_get(field, "type"), depth + 1, &f->type);
}

static int add_field(struct parser *p, struct h5type_desc *d, size_t k)
{
    struct h5type_field *f = &d->fields[k];
    for (size_t j = 0; j < k; j++) {
        if (strcmp(d->fields[j].name, f->name) == 0)
            return why_reject(p->why, p->why_len, "compound field \"%s\" repeated", f->name);
    }
    if (f->type->mem_size > H5TYPE_MAX_ELEMENT - d->mem_size ||
        f->type->stored_size > H5TYPE_MAX_ELEMENT - d->stored_size)
        return why_reject(p->why, p->why_len, "compound larger than %u bytes", H5TYPE_MAX_ELEMENT);
    f->offset = d->mem_size;
    d->mem_size += f->type->mem_size;
    d->stored_size += f->type->stored_size;
    d->traits |= f->type->traits;
    return 0;
}

static int parse_compound(struct parser *p, const json_t *type, int depth, struct h5type_desc *d)
{
    const json_t *fields = json_object_get(type, "fields");
    size_t n = json_array_size(fields);
    if (n == 0)
        return why_reject(p->why, p->why_len, "compound without fields");
    d->kind = H5TYPE_K_COMPOUND;
    d->fields = calloc(n, sizeof(*d->fields));
    if (!d->fields)
        return why_oom(p->why, p->why_len);
    d->n_fields = n;
    bool variable = false;
    for (size_t k = 0; k < n; k++) {
        int rc = parse_field(p, json_array_get(fields, k), depth, &d->fields[k]);
        if (rc == 0)
            rc = add_field(p, d, k);
        if (rc != 0)
            return rc;
        variable = variable || d->fields[k].type->stored_size == 0;
    }
    if (variable)
        d->stored_size = 0;
    return 0;
}

static int parse_object(struct parser *p, const json_t *type, int depth, struct h5type_desc *d)
{
    const char *cls = hjson_text(json_object_get(type, "class"));
    if (!cls)
        return why_reject(p->why, p->why_len, "type without a class");
    if (json_object_get(type, "dims") && strcmp(cls, "H5T_ARRAY") != 0)
        return why_reject(p->why, p->why_len, "dims in a type of class %s", cls);
    if (strcmp(cls, "H5T_INTEGER") == 0)
        return parse_number_class(p, type, d, H5TYPE_K_INT);
    if (strcmp(cls, "H5T_FLOAT") == 0)
        return parse_number_class(p, type, d, H5TYPE_K_FLOAT);
    if (strcmp(cls, "H5T_STRING") == 0)
        return parse_string(p, type, d);
    if (strcmp(cls, "H5T_OPAQUE") == 0)
        return parse_opaque(p, type, d);
    if (strcmp(cls, "H5T_REFERENCE") == 0)
        return parse_reference(p, type, d);
    if (strcmp(cls, "H5T_ENUM") == 0)
        return parse_enum(p, type, depth, d);
    if (strcmp(cls, "H5T_ARRAY") == 0)
        return parse_array(p, type, depth, d);
    if (strcmp(cls, "H5T_VLEN") == 0)
        return parse_vlen(p, type, depth, d);
    if (strcmp(cls, "H5T_COMPOUND") == 0)
        return parse_compound(p, type, depth, d);
    return why_reject(p->why, p->why_len, "unknown type class \"%s\"", cls);
}

static int parse_node(struct parser *p, const json_t *type, int depth, struct h5type_desc **out)
{
    *out = NULL;
    if (depth > H5TYPE_DESC_MAX_DEPTH)
        return why_reject(p->why, p->why_len, "type nested deeper than %d levels",
                          H5TYPE_DESC_MAX_DEPTH);
    if (!json_is_string(type) && !json_is_object(type))
        return why_reject(p->why, p->why_len, "type is not a name or an object");
    struct h5type_desc *d = calloc(1, sizeof(*d));
    if (!d)
        return why_oom(p->why, p->why_len);
    int rc;
    if (json_is_string(type)) {
        const char *name = hjson_text(type);
        rc = name ? parse_name(name, d) : -EINVAL;
        if (rc != 0)
            rc = why_reject(p->why, p->why_len, "unknown type name \"%s\"", name ? name : "");
    } else {
        rc = parse_object(p, type, depth, d);
    }
    if (rc == 0 && (d->mem_size == 0 || d->mem_size > H5TYPE_MAX_ELEMENT))
        rc = why_reject(p->why, p->why_len, "element size not 1..%u", H5TYPE_MAX_ELEMENT);
    if (rc != 0) {
        h5type_desc_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int h5type_desc_parse(const json_t *type, struct h5type_desc **out, char *why, size_t why_len)
{
    struct parser p = { why, why_len };
    if (!out)
        return why_reject(why, why_len, "no output");
    return parse_node(&p, type, 0, out);
}

void h5type_desc_free(struct h5type_desc *desc)
{
    if (!desc)
        return;
    h5type_desc_free(desc->base);
    for (size_t k = 0; k < desc->n_fields; k++)
        h5type_desc_free(desc->fields[k].type);
    free(desc->fields);
    free(desc);
}

/* ---- integers, shared with h5value ---- */

int h5type_int_from_json(const json_t *v, bool allow_real, struct h5type_int *out)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        out->negative = i < 0;
        out->magnitude = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
        return 0;
    }
    if (json_is_real(v) && allow_real) {
        double x = json_real_value(v);
        /* every double of magnitude >= 2^52 is integral */
        bool small = x > -4503599627370496.0 && x < 4503599627370496.0;
        if (!(x > -18446744073709551616.0 && x < 18446744073709551616.0) ||
            (small && x != (double)(int64_t)x))
            return -EINVAL;
        out->negative = x < 0;
        out->magnitude = (uint64_t)(x < 0 ? -x : x);
        return 0;
    }
    const char *s = hjson_text(v);
    if (!s || s[0] != HJSON_BIGINT_PREFIX_CHAR)
        return -EINVAL;
    s++;
    out->negative = s[0] == '-';
    if (out->negative)
        s++;
    if (s[0] < '0' || s[0] > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long m = strtoull(s, &end, 10);
    if (*end != '\0' || errno == ERANGE)
        return -ERANGE; /* more than 64 bits: out of range for every integer type */
    out->magnitude = m;
    return 0;
}

int h5type_int_bits(const struct h5type_desc *d, struct h5type_int v, uint64_t *bits)
{
    unsigned width = d->nbytes * 8;
    uint64_t mask = width == 64 ? UINT64_MAX : (((uint64_t)1 << width) - 1);
    if (v.magnitude == 0)
        v.negative = false;
    if (d->is_signed) {
        uint64_t limit = (uint64_t)1 << (width - 1); /* |min|; max is limit - 1 */
        if (v.negative ? v.magnitude > limit : v.magnitude >= limit)
            return -ERANGE;
    } else if (v.negative || v.magnitude > mask) {
        return -ERANGE;
    }
    *bits = (v.negative ? (uint64_t)0 - v.magnitude : v.magnitude) & mask;
    return 0;
}

void h5type_store_bits(unsigned char *dst, uint64_t bits, unsigned nbytes, bool big_endian)
{
    for (unsigned k = 0; k < nbytes; k++) {
        unsigned char byte = (unsigned char)(bits >> (8 * k));
        dst[big_endian ? nbytes - 1 - k : k] = byte;
    }
}
