/*
 * hjson: parse JSON as HSDS writes it (Python's json.dumps, spec §3.0).
 *
 * Python writes NaN and infinities as the bare tokens NaN, Infinity and -Infinity, which jansson
 * (strict RFC 8259) refuses. hjson_loadb rewrites those tokens, outside strings only, into the
 * reserved strings HJSON_NAN, HJSON_INF and HJSON_NINF (which cannot occur in HSDS JSON: they
 * start with a NUL character) and parses the result with jansson. hjson_number reads a number
 * back, accepting those markers and the numeric strings HSDS stores ("nan", "1.5", …).
 */
#ifndef H5OSFS_HJSON_H
#define H5OSFS_HJSON_H

#include <stddef.h>

#include <jansson.h>

#define HJSON_NAN "\x01NaN"
#define HJSON_INF "\x01Infinity"
#define HJSON_NINF "\x01-Infinity"

/* A new reference, or NULL with a reason (jansson's message with line and column) in why. */
json_t *hjson_loadb(const char *text, size_t len, char *why, size_t why_len);

/* A JSON number, a marker, or a numeric string as a double. 0 or -EINVAL. */
int hjson_number(const json_t *value, double *out);

#endif
