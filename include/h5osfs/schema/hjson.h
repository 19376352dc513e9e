/*
 * hjson: parse and write JSON as HSDS writes it (Python's json.dumps, spec §3.0).
 *
 * Python writes NaN and infinities as the bare tokens NaN, Infinity and -Infinity, which jansson
 * (strict RFC 8259) refuses, and integers beyond int64 (uint64 attribute values), which
 * jansson cannot hold. hjson_loadb rewrites those tokens, outside strings only, into reserved
 * strings that start with the control character \x01 (which HSDS never writes unescaped in a
 * name or value it makes): HJSON_NAN, HJSON_INF, HJSON_NINF, and HJSON_BIGINT_PREFIX followed by
 * the decimal digits; then it parses the result with jansson. hjson_number reads a number back,
 * accepting those markers and the numeric strings HSDS stores ("nan", "1.5", …).
 */
#ifndef H5OSFS_HJSON_H
#define H5OSFS_HJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "h5osfs/util/dynbuf.h"

#define HJSON_NAN "\x01NaN"
#define HJSON_INF "\x01Infinity"
#define HJSON_NINF "\x01-Infinity"
/* Integers outside json_int_t (uint64 values above INT64_MAX) become the string
 * HJSON_BIGINT_PREFIX followed by their decimal digits. */
#define HJSON_BIGINT_PREFIX "\x01"
/* A string jansson cannot hold but Python writes and HSDS keeps: a lone UTF-16 surrogate
 * ("\udc80", from a name decoded with surrogateescape) anywhere, or a NUL in an object key.
 * It becomes HJSON_UNLOADABLE followed by its JSON text as stored (escapes as plain
 * characters), so the rest of the document loads and the string stays distinct and printable:
 * the name or value that holds it is the only thing that fails (hjson_unloadable). */
#define HJSON_UNLOADABLE "\x01\x02"

/* A new reference, or NULL with a reason (jansson's message with line and column) in why.
 * String values may hold NUL characters ("\u0000": HSDS stores fixed-string values with their
 * inner NULs, as numpy keeps them), so read them with json_string_length, and names, ids and
 * other text meant for C strings with hjson_text. Object keys with a NUL, and strings with a
 * lone surrogate, load as HJSON_UNLOADABLE strings. */
json_t *hjson_loadb(const char *text, size_t len, char *why, size_t why_len);
/* With NULL, errno says why: ENOMEM when memory ran out (the text may be good: the caller must
 * not treat the document as malformed), EINVAL when the text is not JSON. Running out is seen
 * for certain once hjson_setup_alloc routed jansson's allocations through hjson (the daemon
 * does at start, before any thread); without it, only where jansson itself says so. */

/* Routes jansson's allocations through hjson's counting allocator. Once, before any thread
 * uses jansson. */
void hjson_setup_alloc(void);
/* How many of jansson's allocations have failed in the calling thread so far (0 without
 * hjson_setup_alloc): a change across a piece of work done in this thread means a document it
 * built may lack a member whose json_object_set_new failed unnoticed. */
unsigned long hjson_alloc_failures(void);

/* The text of a string value without NUL characters, or NULL (not a string, one that a C
 * string would cut short, or an unloadable one). */
const char *hjson_text(const json_t *value);

/* true if s (a key or a string value) stood for a string jansson cannot hold
 * (HJSON_UNLOADABLE): no name or text may be made of it. Its JSON text is s + 2. */
bool hjson_unloadable(const char *s);

/* A shape's or layout's "dims": a non-empty array of at most HJSON_DIMS_MAX integers >= 0, in
 * out (HJSON_DIMS_MAX entries) and *rank. 0 or -EINVAL. */
#define HJSON_DIMS_MAX 32
int hjson_dims(const json_t *arr, uint64_t *out, int *rank);
/* The JSON array of rank integers v[0..rank): a new reference, or NULL (out of memory). */
json_t *hjson_dims_new(const uint64_t *v, int rank);

/* A JSON number, a marker, or a numeric string (no NUL inside) as a double. 0 or -EINVAL. */
int hjson_number(const json_t *value, double *out);

/*
 * The other way: value as Python's json.dumps(value) writes it with its default settings, the
 * way HSDS writes every JSON object (§3.0): separators ", " and ": ", object keys in insertion
 * order, ensure_ascii (non-ASCII as lowercase \uXXXX escapes, astral characters as surrogate
 * pairs, control characters as \n \r \t \b \f or \u00XX), integers as digits, reals in
 * Python's repr (shortest round-trip digits: 0.1, 1e-05, 1e+16, 2.0, -0.0). The markers of
 * hjson_loadb become bare tokens again: HJSON_NAN -> NaN, HJSON_INF -> Infinity,
 * HJSON_NINF -> -Infinity, HJSON_BIGINT_PREFIX + digits -> the digits. *out is malloc'd and
 * NUL-terminated. 0, -EINVAL (no value, a string that is not UTF-8, nesting deeper than 2048)
 * or -ENOMEM.
 */
int hjson_dumps(const json_t *value, char **out);

/*
 * The parts of hjson_dumps for text written by hand (the domain summary, src/commit/info.c), so
 * that every JSON the daemon writes formats numbers and strings in one place.
 * hjson_dump_string appends s[0, n) as a JSON string (an HJSON_UNLOADABLE string as the text it
 * stood for; the number markers are not interpreted: they are strings here); -EINVAL when s is
 * not UTF-8. hjson_dump_real appends x in Python's repr (NaN, Infinity, -Infinity bare). Both
 * return 0, the error of the buffer (dynbuf.h), or -EINVAL, and append nothing usable on error.
 */
int hjson_dump_string(struct dynbuf *b, const char *s, size_t n);
int hjson_dump_real(struct dynbuf *b, double x);

#endif
