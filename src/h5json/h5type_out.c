/* h5type_out: HDF5 datatypes -> the type JSON HSDS stores. See spec §4 and
 * include/h5osfs/h5json/h5type.h.
 *
 * The JSON is what h5pyd (hsload) sends for the type h5py reads from the file, which HSDS stores
 * as sent (only a top-level predefined name would be expanded, and h5pyd never sends one), so
 * the members and their order are h5pyd's getTypeItem's, as the fixture bucket shows:
 *
 *   integer    {"class", "base": "H5T_STD_[IU]<bits>(LE|BE)"}  (h5pyd says LE for every 1-byte
 *              int, numpy having no byte order for them; the file's order is kept here, as
 *              HDF5 tools show it and HSDS accepts H5T_STD_I8BE alike)
 *   float      {"class", "base": "H5T_IEEE_F<bits>(LE|BE)"}     (16, 32, 64 bits, IEEE layout)
 *   fixed str  {"class", "charSet", "length": N, "strPad"}
 *   vlen str   {"class", "length": "H5T_VARIABLE", "charSet", "strPad"}
 *   opaque     {"class", "size", "tag"}
 *   reference  {"class", "base": "H5T_STD_REF_OBJ", "charSet": "H5T_CSET_ASCII", "length": 48,
 *              "strPad": "H5T_STR_NULLPAD"}  (h5pyd builds references as 48-byte strings)
 *   enum       {"class", "mapping": {name: value} in HDF5 member order, "base": {integer}}
 *   compound   {"class", "fields": [{"name", "type"}]} in member order, offsets dropped
 *   array      {"dims": [...], "class", "base"}
 *   vlen       {"class", "size": "H5T_VARIABLE", "base"}; h5pyd sends the bases int32, int64
 *              and float64 of native (little-endian) order as the bare names "H5T_STD_I32",
 *              "H5T_STD_I64", "H5T_IEEE_F64" (HSDS reads them as little-endian), others as
 *              objects.
 *
 * Where the file's type says more than h5pyd keeps, the file wins: the charSet and strPad of
 * fixed strings (h5pyd always sends ASCII and NULLPAD), the opaque tag (h5pyd sends ""). The
 * result is checked with the reader's own validation (h5type_desc_parse), so a type HSDS could
 * not rebuild (an array of compounds, a vlen of vlen strings, ...) is refused here, never
 * written.
 */
#include "h5osfs/h5json/h5type.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "h5osfs/util/why.h"
#include "h5type_desc.h"

#define NAME_LEN 24

struct emitter {
    char *why;
    size_t why_len;
    char *note; /* non-NULL: stand-ins allowed, and what they lose goes here */
    size_t note_len;
    bool out_of_memory; /* a failure that is not the type's: h5type_json_closest says so */
};

/* A stand-in type is allowed: say what it loses (the first stand-in's note is kept). */
__attribute__((format(printf, 2, 3))) static bool stand_in(struct emitter *e, const char *fmt, ...)
{
    if (!e->note)
        return false;
    va_list ap;
    va_start(ap, fmt);
    if (e->note_len > 0 && e->note[0] == '\0')
        (void)why_vreject(e->note, e->note_len, fmt, ap);
    va_end(ap);
    return true;
}

__attribute__((format(printf, 2, 3))) static json_t *refuse(struct emitter *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)why_vreject(e->why, e->why_len, fmt, ap);
    va_end(ap);
    return NULL;
}

static json_t *refuse_oom(struct emitter *e)
{
    e->out_of_memory = true;
    return refuse(e, "out of memory");
}

static json_t *emit(struct emitter *e, hid_t tid, int depth);

/* ---- building objects ---- */

/* Set key to value (a new reference, released even on failure). 0 or -ENOMEM. */
static int put(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0 ? 0 : -ENOMEM;
}

/* {"class": cls, k1: v1, ...} from NULL-terminated key, value pairs whose values are new
 * references (all released on failure). The class goes first unless first_key is given. */
static json_t *object_of(struct emitter *e, const char *first_key, json_t *first_value,
                         const char *cls, ...)
{
    json_t *obj = json_object();
    int rc = obj ? 0 : -ENOMEM;
    if (first_key && rc == 0)
        rc = put(obj, first_key, first_value);
    else if (first_key)
        json_decref(first_value);
    if (rc == 0)
        rc = put(obj, "class", json_string(cls));
    va_list ap;
    va_start(ap, cls);
    for (const char *key = va_arg(ap, const char *); key; key = va_arg(ap, const char *)) {
        json_t *value = va_arg(ap, json_t *);
        if (rc == 0)
            rc = put(obj, key, value);
        else
            json_decref(value);
    }
    va_end(ap);
    if (rc != 0) {
        json_decref(obj);
        return refuse_oom(e);
    }
    return obj;
}

/* ---- numbers ---- */

/* "LE" or "BE"; NULL for VAX or mixed orders. A 1-byte type keeps the order it declares (h5dump
 * shows it), and one without any reads as LE. */
static const char *order_suffix(hid_t tid, size_t size)
{
    H5T_order_t order = H5Tget_order(tid);
    if (order == H5T_ORDER_BE)
        return "BE";
    return size == 1 || order == H5T_ORDER_LE ? "LE" : NULL;
}

static int int_name(struct emitter *e, hid_t tid, char name[NAME_LEN])
{
    size_t size = H5Tget_size(tid);
    H5T_sign_t sign = H5Tget_sign(tid);
    const char *suffix = order_suffix(tid, size);
    if (size != 1 && size != 2 && size != 4 && size != 8) {
        refuse(e, "%zu-byte integers are not supported by HSDS", size);
        return -EINVAL;
    }
    if (sign == H5T_SGN_ERROR || !suffix) {
        refuse(e, "integer type with an unknown sign or byte order");
        return -EINVAL;
    }
    snprintf(name, NAME_LEN, "H5T_STD_%c%zu%s", sign == H5T_SGN_NONE ? 'U' : 'I', size * 8, suffix);
    return 0;
}

/* IEEE 754 binary16/32/64 layouts (HDF5's H5T_IEEE_* and h5py's half). */
static bool ieee_layout(hid_t tid, size_t size)
{
    static const struct {
        size_t size, spos, epos, esize, mpos, msize, ebias;
    } layouts[] = { { 2, 15, 10, 5, 0, 10, 15 },
                    { 4, 31, 23, 8, 0, 23, 127 },
                    { 8, 63, 52, 11, 0, 52, 1023 } };
    size_t spos, epos, esize, mpos, msize;
    if (H5Tget_fields(tid, &spos, &epos, &esize, &mpos, &msize) < 0 ||
        H5Tget_precision(tid) != size * 8 || H5Tget_offset(tid) != 0 ||
        H5Tget_norm(tid) != H5T_NORM_IMPLIED)
        return false;
    for (size_t k = 0; k < sizeof(layouts) / sizeof(layouts[0]); k++) {
        if (layouts[k].size == size)
            return spos == layouts[k].spos && epos == layouts[k].epos &&
                   esize == layouts[k].esize && mpos == layouts[k].mpos &&
                   msize == layouts[k].msize && H5Tget_ebias(tid) == layouts[k].ebias;
    }
    return false;
}

/* The smallest IEEE single or double that holds every value of a float type (long double,
 * VAX, n-bit, 128-bit): HDF5 converts to it. 0 when it rounds (precision beyond double). */
static unsigned ieee_bits_for(hid_t tid, bool *exact)
{
    size_t spos, epos, esize, mpos, msize;
    if (H5Tget_fields(tid, &spos, &epos, &esize, &mpos, &msize) < 0)
        return 0;
    *exact = esize <= 11 && msize <= 52;
    return esize <= 8 && msize <= 23 ? 32 : 64;
}

static int float_name(struct emitter *e, hid_t tid, char name[NAME_LEN])
{
    size_t size = H5Tget_size(tid);
    unsigned bits;
    const char *suffix = order_suffix(tid, size);
    bool exact;
    if (suffix && ieee_layout(tid, size)) {
        snprintf(name, NAME_LEN, "H5T_IEEE_F%zu%s", size * 8, suffix);
        return 0;
    }
    if (!(bits = ieee_bits_for(tid, &exact)) ||
        !stand_in(e,
                  "a %zu-byte float that is not IEEE half, single or double is stored as IEEE "
                  "F%u%s",
                  size, bits,
                  exact ? " (the same values)"
                        : ": values rounded to double precision, out of its range infinite")) {
        refuse(e, "%zu-byte float is not IEEE half, single or double", size);
        return -EINVAL;
    }
    bool big = suffix && strcmp(suffix, "BE") == 0; /* VAX's stand-in is LE */
    snprintf(name, NAME_LEN, "H5T_IEEE_F%u%s", bits, big ? "BE" : "LE");
    return 0;
}

static json_t *emit_number(struct emitter *e, hid_t tid, H5T_class_t cls)
{
    char name[NAME_LEN];
    int rc = cls == H5T_INTEGER ? int_name(e, tid, name) : float_name(e, tid, name);
    if (rc != 0)
        return NULL;
    return object_of(e, NULL, NULL, cls == H5T_INTEGER ? "H5T_INTEGER" : "H5T_FLOAT", "base",
                     json_string(name), NULL);
}

/* HSDS has no bitfields: their bits as an unsigned integer of their size (the conversion
 * h5type_register_stand_ins adds makes HDF5 read them so). */
static json_t *emit_bitfield(struct emitter *e, hid_t tid)
{
    size_t size = H5Tget_size(tid);
    const char *suffix = order_suffix(tid, size);
    char name[NAME_LEN];
    if (!suffix || (size != 1 && size != 2 && size != 4 && size != 8) ||
        !stand_in(e,
                  "a %zu-byte bitfield is stored as an unsigned integer of its size "
                  "(the bits are kept, the type class is not)",
                  size))
        return refuse(e, "bitfield types are not supported by HSDS");
    snprintf(name, NAME_LEN, "H5T_STD_U%zu%s", size * 8, suffix);
    return object_of(e, NULL, NULL, "H5T_INTEGER", "base", json_string(name), NULL);
}

/* ---- strings, opaque, references ---- */

static json_t *emit_string(struct emitter *e, hid_t tid)
{
    static const char *const pads[] = { "H5T_STR_NULLTERM", "H5T_STR_NULLPAD", "H5T_STR_SPACEPAD" };
    htri_t variable = H5Tis_variable_str(tid);
    H5T_cset_t cset = H5Tget_cset(tid);
    H5T_str_t pad = H5Tget_strpad(tid);
    size_t size = H5Tget_size(tid);
    if (variable < 0 || size == 0)
        return refuse(e, "HDF5 could not describe the string type");
    if (cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8)
        return refuse(e, "string character set %d is not supported", (int)cset);
    if (pad < H5T_STR_NULLTERM || pad > H5T_STR_SPACEPAD)
        return refuse(e, "string padding %d is not supported", (int)pad);
    json_t *charset = json_string(cset == H5T_CSET_UTF8 ? "H5T_CSET_UTF8" : "H5T_CSET_ASCII");
    if (variable)
        return object_of(e, NULL, NULL, "H5T_STRING", "length", json_string("H5T_VARIABLE"),
                         "charSet", charset, "strPad", json_string(pads[pad]), NULL);
    return object_of(e, NULL, NULL, "H5T_STRING", "charSet", charset, "length",
                     json_integer((json_int_t)size), "strPad", json_string(pads[pad]), NULL);
}

static json_t *emit_opaque(struct emitter *e, hid_t tid)
{
    size_t size = H5Tget_size(tid);
    char *tag = H5Tget_tag(tid);
    if (size == 0 || !tag) {
        if (tag)
            (void)H5free_memory(tag); /* already failing */
        return refuse(e, "HDF5 could not describe the opaque type");
    }
    json_t *tag_json = json_string(tag);
    if (H5free_memory(tag) < 0) {
        json_decref(tag_json);
        return refuse(e, "HDF5 could not free the opaque tag");
    }
    if (!tag_json)
        return refuse(e, "opaque tag is not UTF-8");
    return object_of(e, NULL, NULL, "H5T_OPAQUE", "size", json_integer((json_int_t)size), "tag",
                     tag_json, NULL);
}

/* HSDS has no time class (HDF5 hardly has one: no conversions): the bytes as an opaque type
 * whose tag says what they were (h5type_register_stand_ins copies them across). */
static json_t *emit_time(struct emitter *e, hid_t tid)
{
    size_t size = H5Tget_size(tid);
    H5T_order_t order = H5Tget_order(tid);
    char tag[64];
    if (size == 0 || (order != H5T_ORDER_LE && order != H5T_ORDER_BE) ||
        !stand_in(e, "a %zu-byte time type is stored as opaque bytes of its size", size))
        return refuse(e, "time types are not supported by HSDS");
    snprintf(tag, sizeof tag, "HDF5 H5T_TIME, %zu bytes, %s", size,
             order == H5T_ORDER_LE ? "little-endian" : "big-endian");
    return object_of(e, NULL, NULL, "H5T_OPAQUE", "size", json_integer((json_int_t)size), "tag",
                     json_string(tag), NULL);
}

static json_t *emit_reference(struct emitter *e, hid_t tid)
{
    htri_t obj = H5Tequal(tid, H5T_STD_REF_OBJ);
    if (obj < 0)
        return refuse(e, "HDF5 could not compare the reference type");
    if (!obj)
        return refuse(e, "region references are not supported by HSDS");
    return object_of(e, NULL, NULL, "H5T_REFERENCE", "base", json_string("H5T_STD_REF_OBJ"),
                     "charSet", json_string("H5T_CSET_ASCII"), "length",
                     json_integer(H5TYPE_DESC_REF_STORED), "strPad", json_string("H5T_STR_NULLPAD"),
                     NULL);
}

/* ---- enums ---- */

/* An enum member's value (bytes of the base integer) as JSON: an integer, or for unsigned
 * values above INT64_MAX the big-integer marker of hjson.h (hjson_dumps writes the digits). */
static json_t *enum_value(const unsigned char *bytes, size_t size, bool big_endian, bool is_signed)
{
    uint64_t bits = 0;
    for (size_t k = 0; k < size; k++)
        bits |= (uint64_t)bytes[big_endian ? size - 1 - k : k] << (8 * k);
    if (is_signed && size < 8 && (bits >> (8 * size - 1)) & 1)
        bits |= UINT64_MAX << (8 * size); /* sign-extend */
    if (is_signed || bits <= INT64_MAX)
        return json_integer(is_signed ? (json_int_t)(int64_t)bits : (json_int_t)bits);
    char text[32];
    snprintf(text, sizeof(text), "%s%" PRIu64, HJSON_BIGINT_PREFIX, bits);
    return json_string(text);
}

static int add_member(struct emitter *e, hid_t tid, unsigned k, json_t *mapping, hid_t base)
{
    unsigned char bytes[8];
    size_t size = H5Tget_size(base);
    char *name = H5Tget_member_name(tid, k);
    if (!name || H5Tget_member_value(tid, k, bytes) < 0) {
        if (name)
            (void)H5free_memory(name); /* already failing */
        refuse(e, "HDF5 could not read enum member %u", k);
        return -EINVAL;
    }
    json_t *value =
        enum_value(bytes, size, H5Tget_order(base) == H5T_ORDER_BE, H5Tget_sign(base) == H5T_SGN_2);
    int rc = put(mapping, name, value);
    if (H5free_memory(name) < 0 && rc == 0)
        rc = -EIO;
    if (rc != 0)
        refuse(e, "enum member %u: %s", k,
               rc == -EIO ? "HDF5 error" : "name not UTF-8, or out of memory");
    return rc;
}

/* The mapping of an enum whose base (an integer type of 1 to 8 bytes) is base. */
static json_t *enum_mapping(struct emitter *e, hid_t tid, hid_t base)
{
    int n = H5Tget_nmembers(tid);
    if (n < 0)
        return refuse(e, "HDF5 could not list the enum members");
    json_t *mapping = json_object();
    if (!mapping)
        return refuse_oom(e);
    for (int k = 0; k < n; k++) {
        if (add_member(e, tid, (unsigned)k, mapping, base) != 0) {
            json_decref(mapping);
            return NULL;
        }
    }
    return mapping;
}

static json_t *emit_enum(struct emitter *e, hid_t tid, int depth)
{
    hid_t base = H5Tget_super(tid);
    if (base < 0)
        return refuse(e, "HDF5 could not give the enum base type");
    json_t *base_json = NULL, *mapping = NULL;
    if (H5Tget_class(base) != H5T_INTEGER)
        refuse(e, "enum base is not an integer");
    else if ((base_json = emit(e, base, depth + 1)) != NULL)
        mapping = enum_mapping(e, tid, base);
    if (H5Tclose(base) < 0 && mapping) {
        json_decref(mapping);
        mapping = refuse(e, "HDF5 could not close the enum base type");
    }
    if (!mapping) {
        json_decref(base_json);
        return NULL;
    }
    return object_of(e, NULL, NULL, "H5T_ENUM", "mapping", mapping, "base", base_json, NULL);
}

/* ---- compounds, arrays, vlens ---- */

/* h5pyd's vlen base: the bare names of its special cases, else the base's JSON. */
static json_t *vlen_base(struct emitter *e, hid_t base, int depth)
{
    static const char *const bare[][2] = { { "H5T_STD_I32LE", "H5T_STD_I32" },
                                           { "H5T_STD_I64LE", "H5T_STD_I64" },
                                           { "H5T_IEEE_F64LE", "H5T_IEEE_F64" } };
    json_t *json = emit(e, base, depth + 1);
    const char *cls = json_string_value(json_object_get(json, "class"));
    const char *name = json_string_value(json_object_get(json, "base"));
    if (!cls || !name || (strcmp(cls, "H5T_INTEGER") != 0 && strcmp(cls, "H5T_FLOAT") != 0))
        return json;
    for (size_t k = 0; k < sizeof(bare) / sizeof(bare[0]); k++) {
        if (strcmp(name, bare[k][0]) == 0) {
            json_decref(json);
            json = json_string(bare[k][1]);
            return json ? json : refuse_oom(e);
        }
    }
    return json;
}

/* The JSON of the type of member k of a compound, or of the base of an array or vlen
 * (k < 0), closing the HDF5 type it asks for. */
static json_t *emit_inner(struct emitter *e, hid_t tid, int k, int depth, bool vlen)
{
    hid_t inner = k >= 0 ? H5Tget_member_type(tid, (unsigned)k) : H5Tget_super(tid);
    if (inner < 0)
        return refuse(e, "HDF5 could not give an inner type");
    json_t *json = vlen ? vlen_base(e, inner, depth) : emit(e, inner, depth + 1);
    if (H5Tclose(inner) < 0 && json) {
        json_decref(json);
        json = refuse(e, "HDF5 could not close an inner type");
    }
    return json;
}

static json_t *emit_field(struct emitter *e, hid_t tid, unsigned k, int depth)
{
    char *name = H5Tget_member_name(tid, k);
    if (!name)
        return refuse(e, "HDF5 could not give the name of compound field %u", k);
    json_t *name_json = json_string(name);
    if (H5free_memory(name) < 0 || !name_json) {
        json_decref(name_json);
        return refuse(e, "compound field %u: name not UTF-8, or HDF5 error", k);
    }
    json_t *type = emit_inner(e, tid, (int)k, depth, false);
    if (!type) {
        json_decref(name_json);
        return NULL;
    }
    json_t *field = json_object();
    if (!field) {
        json_decref(name_json);
        json_decref(type);
        return refuse_oom(e);
    }
    if (put(field, "name", name_json) != 0) { /* put released name_json */
        json_decref(type);
        json_decref(field);
        return refuse_oom(e);
    }
    if (put(field, "type", type) != 0) {
        json_decref(field);
        return refuse_oom(e);
    }
    return field;
}

static json_t *emit_compound(struct emitter *e, hid_t tid, int depth)
{
    int n = H5Tget_nmembers(tid);
    if (n < 0)
        return refuse(e, "HDF5 could not list the compound members");
    json_t *fields = json_array();
    if (!fields)
        return refuse_oom(e);
    for (int k = 0; k < n; k++) {
        json_t *field = emit_field(e, tid, (unsigned)k, depth);
        if (!field || json_array_append_new(fields, field) != 0) {
            json_decref(fields);
            return field ? refuse_oom(e) : NULL;
        }
    }
    return object_of(e, NULL, NULL, "H5T_COMPOUND", "fields", fields, NULL);
}

static json_t *array_dims(struct emitter *e, hid_t tid)
{
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Tget_array_ndims(tid);
    if (rank <= 0 || rank > H5S_MAX_RANK || H5Tget_array_dims2(tid, dims) != rank)
        return refuse(e, "HDF5 could not give the array dims");
    json_t *json = json_array();
    for (int k = 0; json && k < rank; k++) {
        if (json_array_append_new(json, json_integer((json_int_t)dims[k])) != 0) {
            json_decref(json);
            json = NULL;
        }
    }
    return json ? json : refuse_oom(e);
}

static json_t *emit_array(struct emitter *e, hid_t tid, int depth)
{
    json_t *dims = array_dims(e, tid);
    json_t *base = dims ? emit_inner(e, tid, -1, depth, false) : NULL;
    if (!base) {
        json_decref(dims);
        return NULL;
    }
    return object_of(e, "dims", dims, "H5T_ARRAY", "base", base, NULL);
}

static json_t *emit_vlen(struct emitter *e, hid_t tid, int depth)
{
    json_t *base = emit_inner(e, tid, -1, depth, true);
    if (!base)
        return NULL;
    return object_of(e, NULL, NULL, "H5T_VLEN", "size", json_string("H5T_VARIABLE"), "base", base,
                     NULL);
}

static json_t *emit(struct emitter *e, hid_t tid, int depth)
{
    if (depth > H5TYPE_DESC_MAX_DEPTH)
        return refuse(e, "type nested deeper than %d levels", H5TYPE_DESC_MAX_DEPTH);
    H5T_class_t cls = H5Tget_class(tid);
    switch (cls) {
    case H5T_INTEGER:
    case H5T_FLOAT:
        return emit_number(e, tid, cls);
    case H5T_STRING:
        return emit_string(e, tid);
    case H5T_OPAQUE:
        return emit_opaque(e, tid);
    case H5T_REFERENCE:
        return emit_reference(e, tid);
    case H5T_ENUM:
        return emit_enum(e, tid, depth);
    case H5T_COMPOUND:
        return emit_compound(e, tid, depth);
    case H5T_ARRAY:
        return emit_array(e, tid, depth);
    case H5T_VLEN:
        return emit_vlen(e, tid, depth);
    case H5T_TIME:
        return emit_time(e, tid);
    case H5T_BITFIELD:
        return emit_bitfield(e, tid);
    default:
        return refuse(e, "HDF5 could not give the type class");
    }
}

json_t *h5type_to_json(hid_t tid, char *why, size_t why_len)
{
    return h5type_to_json_closest(tid, NULL, 0, why, why_len);
}

json_t *h5type_to_json_closest(hid_t tid, char *note, size_t note_len, char *why, size_t why_len)
{
    json_t *json;
    (void)h5type_json_closest(tid, &json, note, note_len, why, why_len); /* json tells */
    return json;
}

int h5type_json_closest(hid_t tid, json_t **out, char *note, size_t note_len, char *why,
                        size_t why_len)
{
    struct emitter e = { why, why_len, note, note_len, false };
    if (why && why_len > 0)
        why[0] = '\0';
    if (note && note_len > 0)
        note[0] = '\0';
    *out = NULL;
    json_t *json = emit(&e, tid, 0);
    if (!json)
        return e.out_of_memory ? -ENOMEM : -EINVAL;
    /* HSDS must be able to rebuild it: the reader's validation decides */
    struct h5type_desc *d;
    char reason[200];
    int rc = h5type_desc_parse(json, &d, reason, sizeof(reason));
    if (rc != 0) {
        json_decref(json);
        if (rc == -ENOMEM)
            return why_oom(why, why_len); /* the type is fine: no reason to refuse it */
        (void)refuse(&e, "HSDS cannot hold this type: %s", reason);
        return -EINVAL;
    }
    h5type_desc_free(d);
    *out = json;
    return 0;
}
