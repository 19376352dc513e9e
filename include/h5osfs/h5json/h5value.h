/*
 * h5value: element values as HSDS stores them -> buffers in the memory layout of the HDF5 type
 * that h5type_from_json built (see h5type.h), ready for H5Awrite, H5Dwrite or H5Pset_fill_value.
 *
 * Two sources: JSON values (attribute values, fill values; spec §3.6 table, §5.1) and stored
 * bytes (decoded chunk bytes, base64 values; §6.2, §6.3). Object references ("groups/<id>",
 * "datasets/<id>", "datatypes/<id>" or a bare id, as JSON strings or 48-byte stored strings;
 * empty = null reference) are turned into hobj_ref_t by the caller's resolver, which knows
 * where each object was created in the file.
 *
 * Every function validates counts and sizes before writing: a value with the wrong number of
 * elements, a string longer than its fixed length (truncated, as numpy does), a vlen count that
 * is negative, above 1,000,000 bytes or past the end of the data, a number out of range for its
 * integer type, trailing bytes: -EINVAL with a reason. Buffers are allocated with malloc, vlen
 * parts too, so h5value_free (H5Dvlen_reclaim underneath) releases them.
 */
#ifndef H5OSFS_H5VALUE_H
#define H5OSFS_H5VALUE_H

#include <stddef.h>

#include <hdf5.h>
#include <jansson.h>

/* Resolve the object id (without "groups/" etc.) to a reference; 0 or -ENOENT. */
typedef int (*h5value_resolve_fn)(void *ctx, const char *id, hobj_ref_t *out);

struct h5value_refs {
    h5value_resolve_fn resolve; /* NULL: any non-empty reference is -EINVAL */
    void *ctx;
};

/*
 * n elements from a JSON value: a bare element when n == 1 (a one-element array is accepted
 * too), nested arrays whose leaves in C order number exactly n otherwise. Elements per class:
 * integers (and true/false for booleans), numbers or NaN/Infinity markers (hjson.h) or numeric
 * strings for floats, strings for fixed and vlen strings, enums as integers, compounds as arrays
 * of field values, arrays as nested arrays, vlen sequences as arrays, opaque as strings.
 */
int h5value_from_json(const json_t *type_json, hid_t tid, const json_t *value, size_t n,
                      const struct h5value_refs *refs, void **buf, char *why, size_t why_len);

/* n elements from HSDS stored bytes (a decoded chunk, or a base64-decoded value). */
int h5value_from_stored(const json_t *type_json, hid_t tid, const void *bytes, size_t len, size_t n,
                        const struct h5value_refs *refs, void **buf, char *why, size_t why_len);

/* base64 text (attribute "encoding": "base64", "fillValue_encoding": "base64") -> bytes. */
int h5value_base64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len);

/* ---- the other way, for writing domains ---- */

/* Resolve a reference read from a file to the HSDS object id it points at ("g-…"): 0, or
 * -ENOENT for a null or dangling reference. */
typedef int (*h5value_ref_id_fn)(void *ctx, const hobj_ref_t *ref, char id[39]);

struct h5value_ids {
    h5value_ref_id_fn id_of;
    void *ctx;
};

/*
 * n elements in the memory layout of tid (as H5Aread/H5Dread with tid as memory type give
 * them; tid is h5type_from_json(h5type_to_json(file type)), so compounds are packed) -> the
 * JSON value HSDS stores for an attribute of that shape (§3.6): a bare element when scalar
 * (rank 0), nested arrays of dims otherwise. References become "groups/<id>",
 * "datasets/<id>", "datatypes/<id>" (null references: ""). Strings that are not valid UTF-8
 * give -EINVAL (the caller then stores the value base64-encoded).
 */
int h5value_to_json(const json_t *type_json, hid_t tid, const void *buf, int rank,
                    const hsize_t *dims, const struct h5value_ids *ids, json_t **out, char *why,
                    size_t why_len);

/* n elements in tid's memory layout -> HSDS stored bytes (§6.2, §6.3: fixed parts packed,
 * vlen items as 4-byte little-endian byte counts + bytes, references as 48-byte strings).
 * *out is malloc'd. */
int h5value_to_stored(const json_t *type_json, hid_t tid, const void *buf, size_t n,
                      const struct h5value_ids *ids, unsigned char **out, size_t *out_len,
                      char *why, size_t why_len);

/* bytes -> base64 text (malloc'd, NUL-terminated). */
int h5value_base64_encode(const void *bytes, size_t len, char **out);

/* Free a buffer of n elements made by the functions above, vlen parts included. */
void h5value_free(hid_t tid, void *buf, size_t n);

#endif
