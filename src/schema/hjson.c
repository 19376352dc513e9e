/* hjson: JSON as Python writes it -> jansson. See include/h5osfs/schema/hjson.h and spec §3.0.
 *
 * The text is scanned once. Outside strings, the bare tokens NaN, Infinity and -Infinity become
 * the marker strings of hjson.h, and integers jansson cannot hold (json_int_t is 64-bit signed;
 * HSDS writes uint64 attribute values up to 2^64 - 1) become the string HJSON_BIGINT_PREFIX
 * followed by their decimal digits, so that no value is lost or rounded. Everything else is
 * passed through unchanged. When nothing needs rewriting, the caller's text is parsed as is.
 */
#include "h5osfs/schema/hjson.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/dynbuf.h"
#include "h5osfs/util/fpenv.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/why.h"

/* The JSON text of the markers: jansson decodes \u0001 to the byte 0x01. */
#define NAN_JSON "\"\\u0001NaN\""
#define INF_JSON "\"\\u0001Infinity\""
#define NINF_JSON "\"\\u0001-Infinity\""
#define BIG_JSON_OPEN "\"\\u0001"

/* Where a rewritten token sits in the input and in the output (to report error positions in
 * the caller's text). */
struct span {
    size_t in_start, in_end, out_start, out_end;
};

struct rewrite {
    const char *text;
    size_t len;
    size_t copied;     /* input bytes up to here are already in out */
    struct dynbuf out; /* the rewritten text; nothing until the first rewrite */
    struct span *spans;
    size_t n_spans, spans_cap;
};

static int out_append(struct rewrite *rw, const char *bytes, size_t n)
{
    /* the first rewrite: room for the whole text and a few markers at once */
    if (!rw->out.p && dynbuf_reserve(&rw->out, rw->len + 64) != 0)
        return -ENOMEM;
    return dynbuf_append(&rw->out, bytes, n) == 0 ? 0 : -ENOMEM;
}

static int span_add(struct rewrite *rw, struct span s)
{
    if (rw->n_spans == rw->spans_cap) {
        struct span *grown =
            grow_array(rw->spans, &rw->spans_cap, rw->n_spans + 1, sizeof *grown, 16);
        if (!grown)
            return -ENOMEM;
        rw->spans = grown;
    }
    rw->spans[rw->n_spans++] = s;
    return 0;
}

/* Replace text[start, end) by the JSON text open + text[start, end) + close (or by a fixed
 * replacement when copy_token is false). */
static int replace(struct rewrite *rw, size_t start, size_t end, const char *open, bool copy_token,
                   const char *close)
{
    struct span s = { .in_start = start, .in_end = end };
    int rc = out_append(rw, rw->text + rw->copied, start - rw->copied);
    if (rc == 0) {
        s.out_start = rw->out.len;
        rc = out_append(rw, open, strlen(open));
    }
    if (rc == 0 && copy_token)
        rc = out_append(rw, rw->text + start, end - start);
    if (rc == 0 && close)
        rc = out_append(rw, close, strlen(close));
    if (rc != 0)
        return rc;
    s.out_end = rw->out.len;
    rw->copied = end;
    return span_add(rw, s);
}

/* A bare word ends at the end of the text or at a byte that cannot continue it. */
static bool word_at(const struct rewrite *rw, size_t i, const char *word)
{
    size_t n = strlen(word);
    if (rw->len - i < n || memcmp(rw->text + i, word, n) != 0)
        return false;
    return i + n == rw->len || !isalnum((unsigned char)rw->text[i + n]);
}

/* End of the number token starting at i (JSON number characters, not validated here). */
static size_t number_end(const struct rewrite *rw, size_t i, bool *integral)
{
    size_t j = i;
    *integral = true;
    if (j < rw->len && rw->text[j] == '-')
        j++;
    for (; j < rw->len; j++) {
        char c = rw->text[j];
        if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')
            *integral = false;
        else if (!isdigit((unsigned char)c))
            break;
    }
    return j;
}

/* True for a valid JSON integer (-?(0|[1-9][0-9]*)) outside json_int_t's range. */
static bool integer_too_big(const char *tok, size_t n)
{
    const char *digits = tok[0] == '-' ? tok + 1 : tok;
    size_t nd = n - (size_t)(digits - tok);
    if (nd == 0 || (digits[0] == '0' && nd > 1))
        return false; /* not a valid integer: jansson will say so */
    if (nd < 19)
        return false;
    if (nd > 19)
        return true;
    const char *limit = tok[0] == '-' ? "9223372036854775808" : "9223372036854775807";
    return memcmp(digits, limit, 19) > 0;
}

static int scan_token(struct rewrite *rw, size_t *i)
{
    size_t at = *i;
    char c = rw->text[at];
    if (c == 'N' && word_at(rw, at, "NaN")) {
        *i = at + 3;
        return replace(rw, at, *i, NAN_JSON, false, NULL);
    }
    if (c == 'I' && word_at(rw, at, "Infinity")) {
        *i = at + 8;
        return replace(rw, at, *i, INF_JSON, false, NULL);
    }
    if (c == '-' && word_at(rw, at, "-Infinity")) {
        *i = at + 9;
        return replace(rw, at, *i, NINF_JSON, false, NULL);
    }
    if (c == '-' || isdigit((unsigned char)c)) {
        bool integral;
        size_t end = number_end(rw, at, &integral);
        *i = end > at ? end : at + 1;
        if (integral && integer_too_big(rw->text + at, end - at))
            return replace(rw, at, end, BIG_JSON_OPEN, true, "\"");
        return 0;
    }
    *i = at + 1;
    return 0;
}

/* The UTF-16 unit of the escape \uXXXX at text[i] (i at the backslash), or -1. */
static long escaped_unit(const struct rewrite *rw, size_t i)
{
    if (i + 6 > rw->len || rw->text[i] != '\\' || rw->text[i + 1] != 'u')
        return -1;
    long unit = 0;
    for (size_t k = i + 2; k < i + 6; k++) {
        int c = (unsigned char)rw->text[k];
        if (!isxdigit(c))
            return -1;
        unit = unit * 16 + (isdigit(c) ? c - '0' : (tolower(c) - 'a') + 10);
    }
    return unit;
}

/* What jansson refuses in a string that Python writes and HSDS keeps: a UTF-16 surrogate
 * without its other half (a name Python decoded with surrogateescape), or in a key a NUL. The
 * string at [start, end) (between its quotes) holds one of those: true. */
static bool string_unloadable(const struct rewrite *rw, size_t start, size_t end, bool key)
{
    for (size_t i = start; i < end; i++) {
        if (rw->text[i] != '\\')
            continue;
        long unit = escaped_unit(rw, i);
        if (unit == 0 && key)
            return true;
        if (unit >= 0xD800 && unit <= 0xDBFF) {
            long low = escaped_unit(rw, i + 6);
            if (low < 0xDC00 || low > 0xDFFF)
                return true;
            i += 6; /* the pair */
        } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
            return true;
        }
        i++; /* the escaped character cannot start another escape */
    }
    return false;
}

/* The string at [start, end) becomes HJSON_UNLOADABLE followed by its JSON text as stored
 * (escapes and all, as plain characters): still a distinct name, shown as stored in logs. */
static int replace_unloadable(struct rewrite *rw, size_t start, size_t end)
{
    struct span s = { .in_start = start, .in_end = end };
    int rc = out_append(rw, rw->text + rw->copied, start - rw->copied);
    s.out_start = rw->out.len;
    if (rc == 0)
        rc = out_append(rw, "\\u0001\\u0002", 12);
    for (size_t i = start; i < end && rc == 0; i++) {
        char c = rw->text[i];
        if (c != '\\') {
            rc = out_append(rw, &c, 1);
            continue;
        }
        /* the escape as two plain characters: a backslash, then what it escapes */
        rc = out_append(rw, "\\\\", 2);
        if (rc == 0 && i + 1 < end && (rw->text[i + 1] == '"' || rw->text[i + 1] == '\\'))
            rc = out_append(rw, "\\", 1);
        if (rc == 0 && i + 1 < end)
            rc = out_append(rw, &rw->text[++i], 1);
    }
    if (rc != 0)
        return rc;
    s.out_end = rw->out.len;
    rw->copied = end;
    return span_add(rw, s);
}

/* The string whose opening quote is at *i; *i moves past its closing quote. */
static int scan_string(struct rewrite *rw, size_t *i)
{
    size_t start = *i + 1, end = start;
    while (end < rw->len && rw->text[end] != '"')
        end += rw->text[end] == '\\' ? 2 : 1;
    if (end > rw->len)
        end = rw->len;
    *i = end + 1;
    size_t next = *i;
    while (next < rw->len && isspace((unsigned char)rw->text[next]))
        next++;
    bool key = next < rw->len && rw->text[next] == ':';
    if (end >= rw->len || !string_unloadable(rw, start, end, key))
        return 0; /* an unterminated string is jansson's to report */
    return replace_unloadable(rw, start, end);
}

static int scan(struct rewrite *rw)
{
    size_t i = 0;
    while (i < rw->len) {
        int rc = rw->text[i] == '"' ? scan_string(rw, &i) : scan_token(rw, &i);
        if (rc != 0)
            return rc;
    }
    if (rw->out.p && rw->copied < rw->len)
        return out_append(rw, rw->text + rw->copied, rw->len - rw->copied);
    return 0;
}

/* Byte offset in the caller's text of a byte offset in the rewritten text. */
static size_t input_offset(const struct rewrite *rw, size_t out_pos)
{
    size_t in = out_pos;
    for (size_t k = 0; k < rw->n_spans; k++) {
        const struct span *s = &rw->spans[k];
        if (out_pos < s->out_start)
            break;
        in = out_pos < s->out_end ? s->in_start : s->in_end + (out_pos - s->out_end);
    }
    return in < rw->len ? in : rw->len;
}

static void report(const struct rewrite *rw, const json_error_t *err, char *why, size_t why_len)
{
    if (!why || why_len == 0)
        return;
    int line = err->line, column = err->column;
    if (rw->out.p && err->position >= 0) {
        size_t pos = input_offset(rw, (size_t)err->position);
        line = 1;
        column = 0;
        for (size_t k = 0; k < pos; k++) {
            column++;
            if (rw->text[k] == '\n') {
                line++;
                column = 0;
            }
        }
    }
    why_set(why, why_len, "%s at line %d column %d", err->text, line, column);
}

/* Allocation failures of jansson (hjson_setup_alloc), per thread: its parser reports some as
 * syntax errors ("string or '}' expected") and drops some members silently, and code that
 * builds documents may miss a failed json_object_set_new; none of that may make a good document
 * look malformed, or an incomplete one be written. Per thread, so that memory running out in
 * one thread never makes another thread's good document look bad. */
static _Thread_local unsigned long json_alloc_failures;

static void *counted_malloc(size_t size)
{
    void *p = malloc(size);
    if (!p)
        json_alloc_failures++;
    return p;
}

unsigned long hjson_alloc_failures(void)
{
    return json_alloc_failures;
}

void hjson_setup_alloc(void)
{
    json_set_alloc_funcs(counted_malloc, free);
}

static json_t *parse(struct rewrite *rw, json_error_t *err)
{
    /* HSDS stores the text of fixed strings as it is, NULs inside included (numpy drops only
     * trailing ones), and Python writes those as \u0000: string values may hold NULs, so code
     * that reads names from the document must use hjson_text. Numbers are read in the default
     * floating-point environment (fpenv.h), so subnormals stay what they are. */
    struct fpenv fe;
    json_t *doc;
    fpenv_enter(&fe);
    if (rw->out.p)
        doc = json_loadb(rw->out.p, rw->out.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, err);
    else
        doc = json_loadb(rw->text, rw->len, JSON_DECODE_ANY | JSON_ALLOW_NUL, err);
    fpenv_leave(&fe);
    return doc;
}

json_t *hjson_loadb(const char *text, size_t len, char *why, size_t why_len)
{
    struct rewrite rw = { .text = text ? text : "",
                          .len = text ? len : 0,
                          .out = DYNBUF_INIT(DYNBUF_NO_MAX) };
    json_error_t err;
    json_t *doc = NULL;
    unsigned long failures = hjson_alloc_failures();
    int oom = scan(&rw) != 0;
    if (!oom) {
        doc = parse(&rw, &err);
        /* jansson can also return a document without the member it could not store */
        oom = hjson_alloc_failures() != failures ||
              (!doc && json_error_code(&err) == json_error_out_of_memory);
    }
    if (oom) {
        json_decref(doc);
        doc = NULL;
    }
    if (oom && why && why_len > 0)
        why_set(why, why_len, "out of memory");
    else if (!doc)
        report(&rw, &err, why, why_len);
    dynbuf_free(&rw.out);
    free(rw.spans);
    if (!doc)
        errno = oom ? ENOMEM : EINVAL;
    return doc;
}

/* ---- numbers ---- */

static bool word_ci(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

/* Python's float(): optional blanks, sign, then nan / inf / infinity (any case) or a decimal
 * literal. Hex floats and "nan(...)" (which strtod would take) are refused. */
static int parse_numeric_string(const char *s, double *out)
{
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    while (n > 0 && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    if (n == 0)
        return -EINVAL;
    const char *body = s;
    size_t body_n = n;
    bool negative = false;
    if (*body == '+' || *body == '-') {
        negative = *body == '-';
        body++;
        body_n--;
    }
    if (word_ci(body, body_n, "nan")) {
        *out = negative ? -NAN : NAN;
        return 0;
    }
    if (word_ci(body, body_n, "inf") || word_ci(body, body_n, "infinity")) {
        *out = negative ? -INFINITY : INFINITY;
        return 0;
    }
    if (body_n == 0 || strspn(body, "0123456789.eE+-") < body_n)
        return -EINVAL;
    char *copy = strndup(s, n), *end;
    if (!copy)
        return -ENOMEM;
    errno = 0;
    double v = strtod(copy, &end);
    bool whole = end == copy + n && end != copy;
    free(copy);
    if (!whole)
        return -EINVAL;
    *out = v; /* overflow gives ±HUGE_VAL = ±inf, as Python's float() */
    return 0;
}

const char *hjson_text(const json_t *value)
{
    const char *s = json_string_value(value);
    return s && strlen(s) == json_string_length(value) && !hjson_unloadable(s) ? s : NULL;
}

bool hjson_unloadable(const char *s)
{
    return s && strncmp(s, HJSON_UNLOADABLE, strlen(HJSON_UNLOADABLE)) == 0;
}

static int number_of(const json_t *value, double *out);

int hjson_number(const json_t *value, double *out)
{
    struct fpenv fe;
    fpenv_enter(&fe);
    int rc = number_of(value, out);
    fpenv_leave(&fe);
    return rc;
}

static int number_of(const json_t *value, double *out)
{
    if (!value || !out)
        return -EINVAL;
    if (json_is_integer(value)) {
        *out = (double)json_integer_value(value);
        return 0;
    }
    if (json_is_real(value)) {
        *out = json_real_value(value);
        return 0;
    }
    const char *s = hjson_text(value); /* Python's float() refuses a NUL too */
    if (!s)
        return -EINVAL;
    if (strcmp(s, HJSON_NAN) == 0) {
        *out = NAN;
        return 0;
    }
    if (strcmp(s, HJSON_INF) == 0) {
        *out = INFINITY;
        return 0;
    }
    if (strcmp(s, HJSON_NINF) == 0) {
        *out = -INFINITY;
        return 0;
    }
    if (s[0] == HJSON_BIGINT_PREFIX[0])
        s++; /* a big integer: digits follow */
    else if (memchr(s, HJSON_BIGINT_PREFIX[0], json_string_length(value)))
        return -EINVAL;
    return parse_numeric_string(s, out);
}

/* ---- writing: Python's json.dumps ---- */

#define DUMP_MAX_DEPTH 2048

/* One UTF-8 sequence at s (n bytes left): its length, or 0 if it is not valid (overlong forms,
 * surrogates and code points above U+10FFFF are not). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    static const uint32_t min_of[] = { 0, 0, 0x80, 0x800, 0x10000 };
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (len == 0 || s[0] > 0xf4 || len > n)
        return 0;
    uint32_t c = s[0] & (0x3fu >> (len - 1));
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[k] & 0x3fu);
    }
    if (c < min_of[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

static int put_u_escape(struct dynbuf *b, uint32_t unit)
{
    char esc[16]; /* a unit is 16 bits, but the compiler cannot see that */
    snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)(unit & 0xffff));
    return dynbuf_append(b, esc, 6);
}

/* An ASCII byte that Python escapes, or any byte outside 0x20..0x7e. */
static int put_escaped_ascii(struct dynbuf *b, unsigned char c)
{
    switch (c) {
    case '"':
        return dynbuf_append(b, "\\\"", 2);
    case '\\':
        return dynbuf_append(b, "\\\\", 2);
    case '\n':
        return dynbuf_append(b, "\\n", 2);
    case '\r':
        return dynbuf_append(b, "\\r", 2);
    case '\t':
        return dynbuf_append(b, "\\t", 2);
    case '\b':
        return dynbuf_append(b, "\\b", 2);
    case '\f':
        return dynbuf_append(b, "\\f", 2);
    default:
        return put_u_escape(b, c);
    }
}

static int put_code_point(struct dynbuf *b, uint32_t cp)
{
    if (cp < 0x10000)
        return put_u_escape(b, cp);
    cp -= 0x10000;
    int rc = put_u_escape(b, 0xd800 | (cp >> 10));
    return rc == 0 ? put_u_escape(b, 0xdc00 | (cp & 0x3ff)) : rc;
}

/* true if s[0, n) is the text of a JSON string between its quotes, as it can be written as is:
 * no raw control character or quote, escapes complete, UTF-8. */
static bool json_string_body(const unsigned char *s, size_t n)
{
    static const char escapes[] = "\"\\/bfnrt";
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x20 || s[i] == '"')
            return false;
        if (s[i] >= 0x80) {
            size_t len = utf8_next(s + i, n - i, &cp);
            if (len == 0)
                return false;
            i += len;
        } else if (s[i] != '\\') {
            i++;
        } else if (i + 1 < n && s[i + 1] != '\0' && strchr(escapes, s[i + 1])) {
            i += 2;
        } else {
            if (i + 6 > n || s[i + 1] != 'u')
                return false;
            for (size_t k = i + 2; k < i + 6; k++)
                if (!isxdigit(s[k]))
                    return false;
            i += 6;
        }
    }
    return true;
}

static int dump_string(struct dynbuf *b, const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t marker = strlen(HJSON_UNLOADABLE);
    /* what hjson_loadb could not hold goes back as it was stored */
    if (n >= marker && hjson_unloadable(text) && json_string_body(s + marker, n - marker)) {
        int rc = dynbuf_append(b, "\"", 1);
        rc = rc ? rc : dynbuf_append(b, text + marker, n - marker);
        return rc ? rc : dynbuf_append(b, "\"", 1);
    }
    int rc = dynbuf_append(b, "\"", 1);
    size_t i = 0;
    while (rc == 0 && i < n) {
        size_t run = 0;
        while (i + run < n && s[i + run] >= 0x20 && s[i + run] < 0x7f && s[i + run] != '"' &&
               s[i + run] != '\\')
            run++;
        if (run > 0) {
            rc = dynbuf_append(b, text + i, run);
            i += run;
        } else if (s[i] < 0x80) {
            rc = put_escaped_ascii(b, s[i++]);
        } else {
            uint32_t cp;
            size_t len = utf8_next(s + i, n - i, &cp);
            if (len == 0)
                return -EINVAL;
            rc = put_code_point(b, cp);
            i += len;
        }
    }
    return rc == 0 ? dynbuf_append(b, "\"", 1) : rc;
}

/* The markers of hjson_loadb as the bare tokens they stand for; 1 if s was one. */
static int dump_marker(struct dynbuf *b, const char *s, size_t n)
{
    static const struct {
        const char *marker, *token;
    } tokens[] = { { HJSON_NAN, "NaN" }, { HJSON_INF, "Infinity" }, { HJSON_NINF, "-Infinity" } };
    size_t prefix = strlen(HJSON_BIGINT_PREFIX);
    if (n <= prefix || memcmp(s, HJSON_BIGINT_PREFIX, prefix) != 0)
        return 0;
    for (size_t k = 0; k < sizeof(tokens) / sizeof(tokens[0]); k++) {
        if (n == strlen(tokens[k].marker) && memcmp(s, tokens[k].marker, n) == 0)
            return dynbuf_appends(b, tokens[k].token) == 0 ? 1 : -ENOMEM;
    }
    size_t digits = s[prefix] == '-' ? prefix + 1 : prefix;
    if (digits == n || strspn(s + digits, "0123456789") != n - digits ||
        (s[digits] == '0' && n - digits > 1))
        return 0; /* not a JSON integer ("\x01" "007"): written as the string it is */
    return dynbuf_append(b, s + prefix, n - prefix) == 0 ? 1 : -ENOMEM;
}

/* ---- Python's float repr ---- */

/* Digits of x > 0 in "%.*e" form with p significant digits: the digits (no dot) and the
 * decimal exponent of the first. */
static void sci_digits(double x, int p, char digits[24], int *exp10)
{
    char buf[40];
    snprintf(buf, sizeof(buf), "%.*e", p - 1, x);
    size_t d = 0;
    char *c = buf;
    for (; *c && *c != 'e'; c++) {
        if (*c != '.')
            digits[d++] = *c;
    }
    digits[d] = '\0';
    *exp10 = atoi(c + 1);
}

static bool digits_equal(const char *digits, int exp10, double x)
{
    char buf[48];
    snprintf(buf, sizeof(buf), "%c.%se%d", digits[0], digits + 1, exp10);
    return strtod(buf, NULL) == x;
}

/* The next larger number of as many digits (carrying into a new leading 1). */
static void digits_up(char *digits, int *exp10)
{
    size_t k = strlen(digits);
    while (k > 0 && digits[k - 1] == '9')
        digits[--k] = '0';
    if (k > 0) {
        digits[k - 1]++;
        return;
    }
    digits[0] = '1'; /* all nines: 99 -> 100, one digit more before the dot */
    (*exp10)++;
}

/*
 * The shortest digits that read back as x > 0 (Python's repr, David Gay's mode 0): for each
 * length, the correctly rounded digits; at a power of two the gap below x is half the gap
 * above, so the next larger number of that length may read back when the rounded one (below
 * x) does not.
 */
static void shortest_digits(double x, char digits[24], int *exp10)
{
    int e2;
    bool power_of_two = frexp(x, &e2) == 0.5;
    for (int p = 1; p < 17; p++) {
        sci_digits(x, p, digits, exp10);
        if (digits_equal(digits, *exp10, x))
            return;
        if (power_of_two) {
            char up[24];
            int up_exp = *exp10;
            memcpy(up, digits, sizeof(up));
            digits_up(up, &up_exp);
            if (digits_equal(up, up_exp, x)) {
                memcpy(digits, up, sizeof(up));
                *exp10 = up_exp;
                return;
            }
        }
    }
    sci_digits(x, 17, digits, exp10); /* 17 digits always read back */
}

/* repr(x) of a finite double into out (at most 25 bytes with the NUL). */
static void float_repr(double x, char out[32])
{
    char digits[24];
    int exp10;
    char *o = out;
    if (signbit(x))
        *o++ = '-';
    x = fabs(x);
    if (x == 0) {
        strcpy(o, "0.0");
        return;
    }
    shortest_digits(x, digits, &exp10);
    size_t n = strlen(digits);
    while (n > 1 && digits[n - 1] == '0')
        digits[--n] = '\0';
    int decpt = exp10 + 1; /* x = 0.digits * 10^decpt */
    if (decpt <= -4 || decpt > 16) {
        *o++ = digits[0];
        if (n > 1)
            o += sprintf(o, ".%s", digits + 1);
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        o += sprintf(o, "0.");
        for (int k = 0; k < -decpt; k++)
            *o++ = '0';
        strcpy(o, digits);
    } else if ((size_t)decpt >= n) {
        o += sprintf(o, "%s", digits);
        for (size_t k = n; k < (size_t)decpt; k++)
            *o++ = '0';
        strcpy(o, ".0");
    } else {
        sprintf(o, "%.*s.%s", decpt, digits, digits + decpt);
    }
}

static int dump_real(struct dynbuf *b, double x)
{
    char text[32];
    if (isnan(x))
        return dynbuf_appends(b, "NaN");
    if (isinf(x))
        return dynbuf_appends(b, x > 0 ? "Infinity" : "-Infinity");
    float_repr(x, text);
    return dynbuf_appends(b, text);
}

/* ---- values ---- */

static int dump_value(struct dynbuf *b, const json_t *v, int depth);

static int dump_array(struct dynbuf *b, const json_t *v, int depth)
{
    int rc = dynbuf_append(b, "[", 1);
    for (size_t k = 0; rc == 0 && k < json_array_size(v); k++) {
        if (k > 0)
            rc = dynbuf_append(b, ", ", 2);
        if (rc == 0)
            rc = dump_value(b, json_array_get(v, k), depth + 1);
    }
    return rc == 0 ? dynbuf_append(b, "]", 1) : rc;
}

static int dump_object(struct dynbuf *b, const json_t *v, int depth)
{
    const char *key;
    json_t *member;
    bool first = true;
    int rc = dynbuf_append(b, "{", 1);
    json_object_foreach((json_t *)v, key, member)
    {
        if (rc == 0 && !first)
            rc = dynbuf_append(b, ", ", 2);
        if (rc == 0)
            rc = dump_string(b, key, strlen(key));
        if (rc == 0)
            rc = dynbuf_append(b, ": ", 2);
        if (rc == 0)
            rc = dump_value(b, member, depth + 1);
        if (rc != 0)
            return rc;
        first = false;
    }
    return rc == 0 ? dynbuf_append(b, "}", 1) : rc;
}

static int dump_value(struct dynbuf *b, const json_t *v, int depth)
{
    char text[32];
    if (!v || depth > DUMP_MAX_DEPTH)
        return -EINVAL;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return dump_object(b, v, depth);
    case JSON_ARRAY:
        return dump_array(b, v, depth);
    case JSON_STRING: {
        int rc = dump_marker(b, json_string_value(v), json_string_length(v));
        if (rc != 0)
            return rc < 0 ? rc : 0;
        return dump_string(b, json_string_value(v), json_string_length(v));
    }
    case JSON_INTEGER:
        snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return dynbuf_appends(b, text);
    case JSON_REAL:
        return dump_real(b, json_real_value(v));
    case JSON_TRUE:
        return dynbuf_appends(b, "true");
    case JSON_FALSE:
        return dynbuf_appends(b, "false");
    case JSON_NULL:
        return dynbuf_appends(b, "null");
    }
    return -EINVAL;
}

int hjson_dump_string(struct dynbuf *b, const char *s, size_t n)
{
    return dump_string(b, s, n);
}

int hjson_dump_real(struct dynbuf *b, double x)
{
    struct fpenv fe;
    fpenv_enter(&fe); /* reals are printed by comparing doubles: subnormals must stay */
    int rc = dump_real(b, x);
    fpenv_leave(&fe);
    return rc;
}

int hjson_dumps(const json_t *value, char **out)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    if (!out)
        return -EINVAL;
    *out = NULL;
    struct fpenv fe;
    fpenv_enter(&fe); /* reals are printed by comparing doubles: subnormals must stay */
    int rc = dump_value(&b, value, 0);
    fpenv_leave(&fe);
    if (rc != 0) {
        dynbuf_free(&b);
        return rc;
    }
    return dynbuf_take(&b, out, NULL);
}

json_t *hjson_dims_new(const uint64_t *v, int rank)
{
    json_t *a = json_array();
    for (int k = 0; a && k < rank; k++)
        if (json_array_append_new(a, json_integer((json_int_t)v[k])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

int hjson_dims(const json_t *arr, uint64_t *out, int *rank)
{
    size_t i;
    json_t *v;
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > HJSON_DIMS_MAX)
        return -EINVAL;
    json_array_foreach(arr, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return -EINVAL;
        out[i] = (uint64_t)json_integer_value(v);
    }
    *rank = (int)json_array_size(arr);
    return 0;
}
