/*
 * h5type: HSDS type JSON (spec §4) -> HDF5 datatypes.
 *
 * The HDF5 type built here is used both as file and memory type, so its memory layout is what
 * h5value produces: fixed strings inline, compound fields packed in declaration order with no
 * padding (as HSDS packs them), enums and booleans over their base integer, arrays inline,
 * opaque bytes inline, vlen strings as char *, vlen sequences as hvl_t, object references as
 * hobj_ref_t (8 bytes; HSDS stores 48-byte strings, so stored and memory sizes differ there).
 * Half floats are built as 2-byte IEEE types (HDF5 1.10 has no predefined F16).
 *
 * Invalid JSON is refused with a reason, never half-built: unknown classes or names, sizes of
 * 0, array ranks above 32 or element counts that overflow, compounds without fields or with
 * duplicate names, enums without mapping, vlen of vlen, region references (HSDS cannot store
 * them, §4), nesting deeper than 16 levels, elements larger than 64 MiB.
 */
#ifndef H5OSFS_H5TYPE_H
#define H5OSFS_H5TYPE_H

#include <stddef.h>

#include <hdf5.h>
#include <jansson.h>

#define H5TYPE_MAX_ELEMENT (64u << 20)

enum h5type_trait {
    H5TYPE_HAS_VLEN = 1u << 0, /* a vlen string or sequence anywhere in the type */
    H5TYPE_HAS_REF = 1u << 1,  /* an object reference anywhere in the type */
};

/* A new HDF5 type (H5Tclose it), or H5I_INVALID_HID with a reason in why. A member "id" (the
 * committed type the JSON was copied from) is ignored here. */
hid_t h5type_from_json(const json_t *type, char *why, size_t why_len);

/* The same, telling why it failed: 0 and a new type in *out (H5Tclose it), -EINVAL with a
 * reason (a type that cannot be held: callers leave its object out), or -ENOMEM (the type is
 * fine, the process is out of memory: callers fail, they must not leave anything out).
 * *out is H5I_INVALID_HID on failure. */
int h5type_build(const json_t *type, hid_t *out, char *why, size_t why_len);

/* Bytes one element takes in an HSDS chunk (§6.2); -EINVAL for types with vlen parts or
 * invalid, -ENOMEM out of memory. */
int h5type_stored_size(const json_t *type, size_t *out);

/* enum h5type_trait bits of a valid type (0 when it cannot be parsed, even for lack of
 * memory: where a wrong 0 would store or build wrong bytes, use h5type_traits_of). */
unsigned h5type_traits(const json_t *type);

/* The same into *out: 0, -EINVAL (not a valid type) or -ENOMEM. */
int h5type_traits_of(const json_t *type, unsigned *out);

/*
 * The other way, for writing domains: the type JSON HSDS would store for an HDF5 type (as
 * h5pyd/hsload send it and HSDS expands it, spec §4): every class above, big-endian types as
 * ...BE names, compound fields in member order (HSDS packs them: member offsets are not kept),
 * enums with their mapping, booleans as the FALSE/TRUE enum over I8, references as h5pyd
 * sends them (class, base H5T_STD_REF_OBJ, charSet, length 48, strPad), and h5pyd's quirks
 * where the bucket shows them (vlen bases of LE I32/I64/F64 as bare names without byte order,
 * "size": "H5T_VARIABLE" on vlen types). A committed type's JSON is the same (the caller adds
 * "id" where a dataset uses it). Types HSDS cannot hold (region references,
 * bitfields, time, 128-bit numbers, vlen of vlen, non-IEEE floats other than half) give NULL
 * and a reason; see h5type_to_json_closest for stand-ins.
 */
json_t *h5type_to_json(hid_t tid, char *why, size_t why_len);

/*
 * The same, but a type HSDS cannot hold gets the closest one it can where there is one: a
 * bitfield becomes the unsigned integer of its size (its bits kept), a float that is not IEEE
 * (long double, VAX, n-bit, 128-bit) the smallest IEEE single or double that holds its values
 * (rounded beyond double precision), a time type opaque bytes of its size (tagged "HDF5
 * H5T_TIME, ..."). note then says what is lost (else ""). Reading the
 * file's data as the stand-in needs h5type_register_stand_ins() once per process.
 */
json_t *h5type_to_json_closest(hid_t tid, char *note, size_t note_len, char *why, size_t why_len);

/* The same, telling why it failed: 0 and the JSON in *out, -EINVAL with a reason (HSDS cannot
 * hold the type), or -ENOMEM (out of memory while the type was checked: not the type's
 * fault, the caller fails). *out is NULL on failure. */
int h5type_json_closest(hid_t tid, json_t **out, char *note, size_t note_len, char *why,
                        size_t why_len);

/* Teach HDF5 the bitfield -> unsigned integer and time -> opaque conversions (thread-safe,
 * once). 0 or -1. */
int h5type_register_stand_ins(void);

#endif
