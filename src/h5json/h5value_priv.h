/* h5value_priv: what h5value.c (stored bytes, base64, free), h5value_json.c (JSON values) and
 * the writing side (h5value_out.c, h5value_out_json.c) share. Private to src/schema. */
#ifndef H5OSFS_H5VALUE_PRIV_H
#define H5OSFS_H5VALUE_PRIV_H

#include <stddef.h>

#include "h5osfs/h5json/h5value.h"

#include "h5type_desc.h"
#include "h5osfs/util/why.h"

/* A reason of an inner failure, before "element N: " is put in front of it. */
#define H5VALUE_MSG_LEN 200

/* Parse type_json and check that tid has its memory size. 0, -EINVAL or -ENOMEM with a
 * reason. */
int h5value_begin(const json_t *type_json, hid_t tid, struct h5type_desc **desc, char *why,
                  size_t why_len);

/* A zeroed buffer for n elements of d (at least one byte). 0, -EINVAL or -ENOMEM with a reason.
 * Called only once the value or data is known to hold n elements: n comes from a shape the
 * caller read from untrusted JSON, and must not decide an allocation on its own. */
int h5value_alloc(const struct h5type_desc *d, size_t n, unsigned char **buf, char *why,
                  size_t why_len);

/* An object reference as HSDS writes it ("groups/<id>", "datasets/<id>", "datatypes/<id>" or
 * a bare id; len bytes, no NUL inside; empty = null reference) -> hobj_ref_t. */
int h5value_ref_from_text(const struct h5value_refs *refs, const char *text, size_t len,
                          hobj_ref_t *out, char *why, size_t why_len);

/* ---- the other way (h5value_out.c, h5value_out_json.c) ---- */

/* Room for an object reference as HSDS stores it ("datatypes/" and a 38-character id) and a
 * NUL. */
#define H5VALUE_REF_TEXT (H5TYPE_DESC_REF_STORED + 1)

/* The text HSDS stores for an object reference read from a file: "groups/<id>",
 * "datasets/<id>" or "datatypes/<id>"; "" for a null reference (all bits 0) and for a dangling
 * one (ids->id_of says -ENOENT), which HSDS stores as the null reference. 0, or a negative
 * errno with a reason: a non-null reference and no resolver, a resolver failure, an id that is
 * not a group, dataset or datatype id. */
int h5value_ref_to_text(const struct h5value_ids *ids, const hobj_ref_t *ref,
                        char text[H5VALUE_REF_TEXT], char *why, size_t why_len);

#endif
