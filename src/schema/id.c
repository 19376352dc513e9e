/* schema ids: see include/h5osfs/schema/schema.h and spec/hsds-format.md §1. */
#include "h5osfs/schema/schema.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define ID_HEX_DIGITS 32
#define ID_HALF (ID_HEX_DIGITS / 2)
#define ID_GROUPS 5
/* Bounds on the decimal runs of chunk ids: a uint64 index has at most 20 digits, and a
 * partition number is an int, so 9 digits keep it representable. */
#define ID_INDEX_DIGITS_MAX 20
#define ID_PARTITION_DIGITS_MAX 9

/* v1 is a standard UUID; v2 is HSDS's split, where the third group tells the two apart. */
static const int v1_groups[ID_GROUPS] = { 8, 4, 4, 4, 12 };
static const int v2_groups[ID_GROUPS] = { 8, 8, 4, 6, 6 };

static int is_lower_hex(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* Length of the canonical decimal number at s (no sign, no leading zero unless "0"), or 0.
 * Non-canonical forms are refused because they would name keys HSDS never writes. */
static size_t decimal_run(const char *s, size_t max_digits)
{
    size_t n = 0;
    while (is_digit((unsigned char)s[n]))
        n++;
    if (n == 0 || n > max_digits || (n > 1 && s[0] == '0'))
        return 0;
    return n;
}

/* Pointer past "<class>-" or "c<N>-", or NULL when the prefix is not one HSDS mints. */
static const char *skip_class_prefix(const char *id)
{
    const char *p = id + 1;
    if (id[0] != 'g' && id[0] != 'd' && id[0] != 't' && id[0] != 'c')
        return NULL;
    if (id[0] == 'c')
        p += decimal_run(p, ID_PARTITION_DIGITS_MAX);
    return *p == '-' ? p + 1 : NULL;
}

/* 1 if hex holds exactly the given hyphen-separated groups of lowercase hex digits,
 * stopping at '\0' or the chunk suffix '_'. */
static int hex_groups_match(const char *hex, const int groups[ID_GROUPS])
{
    const char *p = hex;
    for (int g = 0; g < ID_GROUPS; g++) {
        if (g > 0 && *p++ != '-')
            return 0;
        for (int i = 0; i < groups[g]; i++, p++) {
            if (!is_lower_hex((unsigned char)*p))
                return 0;
        }
    }
    return *p == '\0' || *p == '_';
}

/* 1 if s is "_<i>_<j>…" to the end: a chunk's index string, at least one index. */
static int chunk_suffix_valid(const char *s)
{
    if (*s != '_')
        return 0;
    while (*s == '_') {
        size_t n = decimal_run(s + 1, ID_INDEX_DIGITS_MAX);
        if (n == 0)
            return 0;
        s += 1 + n;
    }
    return *s == '\0';
}

/* The text after the hex groups must be a chunk index string for chunks and nothing else
 * for the other classes. */
static int suffix_fits_class(const char *id, const char *hex)
{
    const char *end = strchr(hex, '_');
    if (id[0] == 'c')
        return end != NULL && chunk_suffix_valid(end);
    return end == NULL;
}

int schema_id_version(const char *id)
{
    if (!id)
        return -EINVAL;
    const char *hex = skip_class_prefix(id);
    if (!hex || !suffix_fits_class(id, hex))
        return -EINVAL;
    if (hex_groups_match(hex, v2_groups))
        return 2;
    if (hex_groups_match(hex, v1_groups))
        return 1;
    return -EINVAL;
}

int schema_id_class(const char *id)
{
    int version = schema_id_version(id);
    return version < 0 ? version : id[0];
}

int schema_hex_rot(int c)
{
    static const char digits[] = "0123456789abcdef";
    if (!is_lower_hex(c))
        return -EINVAL;
    int value = c <= '9' ? c - '0' : c - 'a' + 10;
    return digits[(value + 8) % 16];
}

/* The 32 hex digits of a valid id, hyphens dropped (idUtil.getIdHexChars). */
static void collect_hex_digits(const char *id, char digits[ID_HEX_DIGITS])
{
    const char *p = skip_class_prefix(id);
    for (int n = 0; n < ID_HEX_DIGITS; p++) {
        if (*p != '-')
            digits[n++] = *p;
    }
}

int schema_id_is_root(const char *id)
{
    char digits[ID_HEX_DIGITS];
    if (schema_id_version(id) != 2)
        return -EINVAL;
    if (id[0] != 'g')
        return 0;
    collect_hex_digits(id, digits);
    for (int i = 0; i < ID_HALF; i++) {
        if (digits[i] != schema_hex_rot(digits[i + ID_HALF]))
            return 0;
    }
    return 1;
}

int schema_root_of(const char *id, char out[SCHEMA_ID_BUF])
{
    /* NUL-terminated: "%.6s" of the last group reads to the array's end, which C only
     * allows when a terminator is inside the array. */
    char d[ID_HEX_DIGITS + 1] = "";
    if (schema_id_version(id) != 2)
        return -EINVAL;
    collect_hex_digits(id, d);
    for (int i = 0; i < ID_HALF; i++)
        d[i + ID_HALF] = (char)schema_hex_rot(d[i]);
    int n = snprintf(out, SCHEMA_ID_BUF, "g-%.8s-%.8s-%.4s-%.6s-%.6s", d, d + 8, d + 16, d + 20,
                     d + 26);
    return n == SCHEMA_ID_LEN ? 0 : -EINVAL;
}
