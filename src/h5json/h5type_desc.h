/*
 * h5type_desc: the parsed form of an HSDS type JSON (spec §4), private to h5type.c and
 * h5value*.c. h5type_desc_parse validates the JSON once and computes, for every node, the
 * memory layout the HDF5 type built from it has (see h5type.h) and the size an element takes
 * when HSDS stores it (§6.2), so that values can be converted without asking HDF5 per element.
 * Names, tags and enum mappings point into the JSON, which must outlive the descriptor.
 */
#ifndef H5OSFS_H5TYPE_DESC_H
#define H5OSFS_H5TYPE_DESC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>
#include <jansson.h>

#include "h5osfs/schema/hjson.h"

#define H5TYPE_DESC_MAX_RANK 32
#define H5TYPE_DESC_MAX_DEPTH 16
#define H5TYPE_DESC_REF_STORED 48    /* HSDS stores object references as 48-byte strings */
#define H5TYPE_DESC_MAX_VLEN 1000000 /* largest vlen item HSDS reads back, in bytes (§6.3) */

enum h5type_kind {
    H5TYPE_K_INT, /* also the base of enums */
    H5TYPE_K_FLOAT,
    H5TYPE_K_FSTR, /* fixed-length string */
    H5TYPE_K_VSTR, /* variable-length string: char * */
    H5TYPE_K_OPAQUE,
    H5TYPE_K_ENUM, /* integer fields of the node describe the base; booleans too */
    H5TYPE_K_ARRAY,
    H5TYPE_K_VLEN, /* variable-length sequence: hvl_t */
    H5TYPE_K_COMPOUND,
    H5TYPE_K_REF, /* object reference: hobj_ref_t */
};

struct h5type_field;

struct h5type_desc {
    enum h5type_kind kind;
    size_t mem_size;    /* bytes of one element in the HDF5 type's memory layout */
    size_t stored_size; /* bytes of one element in HSDS storage; 0 if variable (§6.3) */
    unsigned traits;    /* enum h5type_trait bits */

    /* INT, FLOAT, ENUM (the base integer) */
    unsigned nbytes; /* 1, 2, 4 or 8 */
    bool is_signed;
    bool big_endian;
    bool is_bool; /* ENUM over I8 with exactly the names TRUE and FALSE */

    /* FSTR, VSTR */
    size_t length; /* FSTR only */
    H5T_cset_t cset;
    H5T_str_t pad;

    const char *tag;       /* OPAQUE */
    const json_t *mapping; /* ENUM: object name -> integer */

    /* ARRAY */
    int rank;
    hsize_t dims[H5TYPE_DESC_MAX_RANK];
    size_t count; /* product of dims */

    struct h5type_desc *base; /* ARRAY, VLEN */

    /* COMPOUND */
    size_t n_fields;
    struct h5type_field *fields;
};

struct h5type_field {
    const char *name;
    size_t offset; /* in the memory layout: packed, in declaration order */
    struct h5type_desc *type;
};

/* Integers from JSON: a JSON integer, a big integer as hjson_loadb writes it
 * (HJSON_BIGINT_PREFIX then decimal digits), or, when allow_real, a real with an integral value
 * (numpy takes 1.0 for an integer). */
#define HJSON_BIGINT_PREFIX_CHAR (HJSON_BIGINT_PREFIX[0])

struct h5type_int {
    bool negative;
    uint64_t magnitude;
};

/* 0, -EINVAL (not an integer) or -ERANGE (beyond 64 bits). */
int h5type_int_from_json(const json_t *v, bool allow_real, struct h5type_int *out);

/* The two's complement bits of v for the integer (or enum) node d: 0 or -ERANGE. */
int h5type_int_bits(const struct h5type_desc *d, struct h5type_int v, uint64_t *bits);

/* Write the low nbytes of bits in the given byte order. */
void h5type_store_bits(unsigned char *dst, uint64_t bits, unsigned nbytes, bool big_endian);

/* Validate type and describe it: 0, -EINVAL with a reason, or -ENOMEM. */
int h5type_desc_parse(const json_t *type, struct h5type_desc **out, char *why, size_t why_len);
void h5type_desc_free(struct h5type_desc *desc);

#endif
