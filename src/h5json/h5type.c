/* h5type: HSDS type JSON -> HDF5 datatypes. See include/h5osfs/h5json/h5type.h and spec §4.
 *
 * The JSON is first parsed into a descriptor tree (h5type_desc.c) that applies every validation
 * rule and fixes the memory layout; the HDF5 type is then built from the descriptor, so that
 * h5value, which converts values with the same descriptor, always agrees with the type. */
#include "h5osfs/h5json/h5type.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "h5type_desc.h"
#include "h5osfs/util/why.h"

/* ---- building HDF5 types ---- */

struct builder {
    char *why;
    size_t why_len;
};

static hid_t build(struct builder *b, const struct h5type_desc *d);

static hid_t failed(struct builder *b, hid_t tid, const char *what)
{
    if (tid >= 0)
        (void)H5Tclose(tid); /* already failing: nothing more to do if this fails too */
    why_reject(b->why, b->why_len, "HDF5 refused to build the %s type", what);
    return H5I_INVALID_HID;
}

/* Close the base a derived type tid was made from; either failing fails the build. */
static hid_t base_closed(struct builder *b, hid_t tid, hid_t base, const char *what)
{
    if (H5Tclose(base) < 0 || tid < 0)
        return failed(b, tid, what);
    return tid;
}

static hid_t predefined_int(const struct h5type_desc *d)
{
    static const struct {
        unsigned nbytes;
        bool is_signed, big_endian;
    } order[] = {
        { 1, true, false }, { 1, true, true }, { 1, false, false }, { 1, false, true },
        { 2, true, false }, { 2, true, true }, { 2, false, false }, { 2, false, true },
        { 4, true, false }, { 4, true, true }, { 4, false, false }, { 4, false, true },
        { 8, true, false }, { 8, true, true }, { 8, false, false }, { 8, false, true },
    };
    hid_t ids[] = {
        H5T_STD_I8LE,  H5T_STD_I8BE,  H5T_STD_U8LE,  H5T_STD_U8BE,  H5T_STD_I16LE, H5T_STD_I16BE,
        H5T_STD_U16LE, H5T_STD_U16BE, H5T_STD_I32LE, H5T_STD_I32BE, H5T_STD_U32LE, H5T_STD_U32BE,
        H5T_STD_I64LE, H5T_STD_I64BE, H5T_STD_U64LE, H5T_STD_U64BE,
    };
    for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
        if (order[k].nbytes == d->nbytes && order[k].is_signed == d->is_signed &&
            order[k].big_endian == d->big_endian)
            return ids[k];
    }
    return H5I_INVALID_HID;
}

static hid_t build_int(struct builder *b, const struct h5type_desc *d)
{
    hid_t tid = H5Tcopy(predefined_int(d));
    return tid >= 0 ? tid : failed(b, tid, "integer");
}

/* HDF5 1.10 has no half float: a 2-byte IEEE layout, as h5py builds it. */
static hid_t build_half(struct builder *b, bool big_endian)
{
    hid_t tid = H5Tcopy(big_endian ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
    if (tid < 0 || H5Tset_fields(tid, 15, 10, 5, 0, 10) < 0 || H5Tset_size(tid, 2) < 0 ||
        H5Tset_ebias(tid, 15) < 0)
        return failed(b, tid, "half float");
    return tid;
}

static hid_t build_float(struct builder *b, const struct h5type_desc *d)
{
    if (d->nbytes == 2)
        return build_half(b, d->big_endian);
    hid_t src;
    if (d->nbytes == 4)
        src = d->big_endian ? H5T_IEEE_F32BE : H5T_IEEE_F32LE;
    else
        src = d->big_endian ? H5T_IEEE_F64BE : H5T_IEEE_F64LE;
    hid_t tid = H5Tcopy(src);
    return tid >= 0 ? tid : failed(b, tid, "float");
}

static hid_t build_string(struct builder *b, const struct h5type_desc *d)
{
    hid_t tid = H5Tcopy(H5T_C_S1);
    size_t size = d->kind == H5TYPE_K_VSTR ? H5T_VARIABLE : d->length;
    if (tid < 0 || H5Tset_size(tid, size) < 0 || H5Tset_cset(tid, d->cset) < 0 ||
        H5Tset_strpad(tid, d->pad) < 0)
        return failed(b, tid, "string");
    return tid;
}

static hid_t build_opaque(struct builder *b, const struct h5type_desc *d)
{
    hid_t tid = H5Tcreate(H5T_OPAQUE, d->mem_size);
    if (tid < 0 || (d->tag[0] != '\0' && H5Tset_tag(tid, d->tag) < 0))
        return failed(b, tid, "opaque");
    return tid;
}

static hid_t build_enum(struct builder *b, const struct h5type_desc *d)
{
    hid_t base = build_int(b, d);
    if (base < 0)
        return H5I_INVALID_HID;
    hid_t tid = base_closed(b, H5Tenum_create(base), base, "enum");
    if (tid < 0)
        return H5I_INVALID_HID;
    const char *name;
    const json_t *value;
    json_object_foreach((json_t *)d->mapping, name, value)
    {
        struct h5type_int v;
        uint64_t bits;
        unsigned char bytes[8];
        if (h5type_int_from_json(value, false, &v) != 0 || h5type_int_bits(d, v, &bits) != 0)
            return failed(b, tid, "enum");
        h5type_store_bits(bytes, bits, d->nbytes, d->big_endian);
        if (H5Tenum_insert(tid, name, bytes) < 0)
            return failed(b, tid, "enum");
    }
    return tid;
}

static hid_t build_array(struct builder *b, const struct h5type_desc *d)
{
    hid_t base = build(b, d->base);
    if (base < 0)
        return H5I_INVALID_HID;
    return base_closed(b, H5Tarray_create2(base, (unsigned)d->rank, d->dims), base, "array");
}

static hid_t build_vlen(struct builder *b, const struct h5type_desc *d)
{
    hid_t base = build(b, d->base);
    if (base < 0)
        return H5I_INVALID_HID;
    return base_closed(b, H5Tvlen_create(base), base, "vlen");
}

static hid_t build_compound(struct builder *b, const struct h5type_desc *d)
{
    hid_t tid = H5Tcreate(H5T_COMPOUND, d->mem_size);
    if (tid < 0)
        return failed(b, tid, "compound");
    for (size_t k = 0; k < d->n_fields; k++) {
        const struct h5type_field *f = &d->fields[k];
        hid_t member = build(b, f->type);
        if (member < 0)
            return failed(b, tid, "compound");
        herr_t rc = H5Tinsert(tid, f->name, f->offset, member);
        if (H5Tclose(member) < 0 || rc < 0)
            return failed(b, tid, "compound");
    }
    return tid;
}

static hid_t build(struct builder *b, const struct h5type_desc *d)
{
    switch (d->kind) {
    case H5TYPE_K_INT:
        return build_int(b, d);
    case H5TYPE_K_FLOAT:
        return build_float(b, d);
    case H5TYPE_K_FSTR:
    case H5TYPE_K_VSTR:
        return build_string(b, d);
    case H5TYPE_K_OPAQUE:
        return build_opaque(b, d);
    case H5TYPE_K_ENUM:
        return build_enum(b, d);
    case H5TYPE_K_ARRAY:
        return build_array(b, d);
    case H5TYPE_K_VLEN:
        return build_vlen(b, d);
    case H5TYPE_K_COMPOUND:
        return build_compound(b, d);
    case H5TYPE_K_REF: {
        hid_t tid = H5Tcopy(H5T_STD_REF_OBJ);
        return tid >= 0 ? tid : failed(b, tid, "reference");
    }
    }
    return failed(b, H5I_INVALID_HID, "unknown");
}

int h5type_build(const json_t *type, hid_t *out, char *why, size_t why_len)
{
    struct h5type_desc *d;
    *out = H5I_INVALID_HID;
    int rc = h5type_desc_parse(type, &d, why, why_len);
    if (rc != 0)
        return rc == -ENOMEM ? rc : -EINVAL;
    struct builder b = { why, why_len };
    hid_t tid = build(&b, d);
    if (tid >= 0 && H5Tget_size(tid) != d->mem_size)
        tid = failed(&b, tid, "expected size of the");
    h5type_desc_free(d);
    *out = tid;
    return tid >= 0 ? 0 : -EINVAL;
}

hid_t h5type_from_json(const json_t *type, char *why, size_t why_len)
{
    hid_t tid;
    (void)h5type_build(type, &tid, why, why_len); /* tid tells the failure */
    return tid;
}

int h5type_stored_size(const json_t *type, size_t *out)
{
    struct h5type_desc *d;
    if (!out)
        return -EINVAL;
    int rc = h5type_desc_parse(type, &d, NULL, 0);
    if (rc != 0)
        return rc == -ENOMEM ? rc : -EINVAL;
    rc = d->stored_size ? 0 : -EINVAL;
    if (rc == 0)
        *out = d->stored_size;
    h5type_desc_free(d);
    return rc;
}

int h5type_traits_of(const json_t *type, unsigned *out)
{
    struct h5type_desc *d;
    *out = 0;
    int rc = h5type_desc_parse(type, &d, NULL, 0);
    if (rc != 0)
        return rc == -ENOMEM ? rc : -EINVAL;
    *out = d->traits;
    h5type_desc_free(d);
    return 0;
}

unsigned h5type_traits(const json_t *type)
{
    unsigned traits;
    (void)h5type_traits_of(type, &traits); /* 0 when it fails */
    return traits;
}
