/* hjson: JSON as Python writes it -> jansson. See include/h5osfs/hjson.h and spec §3.0.
 *
 * The text is scanned once. Outside strings, the bare tokens NaN, Infinity and -Infinity become
 * the marker strings of hjson.h, and integers jansson cannot hold (json_int_t is 64-bit signed;
 * HSDS writes uint64 attribute values up to 2^64 - 1) become the string HJSON_BIGINT_PREFIX
 * followed by their decimal digits, so that no value is lost or rounded. Everything else is
 * passed through unchanged. When nothing needs rewriting, the caller's text is parsed as is.
 */
#include "h5osfs/hjson.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    size_t copied; /* input bytes up to here are already in out */
    char *out;
    size_t out_len, out_cap;
    struct span *spans;
    size_t n_spans, spans_cap;
};

static int out_append(struct rewrite *rw, const char *bytes, size_t n)
{
    if (rw->out_len + n + 1 > rw->out_cap) {
        size_t cap = rw->out_cap ? rw->out_cap : rw->len + 64;
        while (cap < rw->out_len + n + 1)
            cap *= 2;
        char *grown = realloc(rw->out, cap);
        if (!grown)
            return -ENOMEM;
        rw->out = grown;
        rw->out_cap = cap;
    }
    memcpy(rw->out + rw->out_len, bytes, n);
    rw->out_len += n;
    return 0;
}

static int span_add(struct rewrite *rw, struct span s)
{
    if (rw->n_spans == rw->spans_cap) {
        size_t cap = rw->spans_cap ? rw->spans_cap * 2 : 16;
        struct span *grown = realloc(rw->spans, cap * sizeof(*grown));
        if (!grown)
            return -ENOMEM;
        rw->spans = grown;
        rw->spans_cap = cap;
    }
    rw->spans[rw->n_spans++] = s;
    return 0;
}

/* Replace text[start, end) by the JSON text open + text[start, end) + close (or by a fixed
 * replacement when copy_token is false). */
static int replace(struct rewrite *rw, size_t start, size_t end, const char *open, bool copy_token,
                   const char *close)
{
    struct span s = {.in_start = start, .in_end = end};
    int rc = out_append(rw, rw->text + rw->copied, start - rw->copied);
    if (rc == 0) {
        s.out_start = rw->out_len;
        rc = out_append(rw, open, strlen(open));
    }
    if (rc == 0 && copy_token)
        rc = out_append(rw, rw->text + start, end - start);
    if (rc == 0 && close)
        rc = out_append(rw, close, strlen(close));
    if (rc != 0)
        return rc;
    s.out_end = rw->out_len;
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

static int scan(struct rewrite *rw)
{
    bool in_string = false;
    size_t i = 0;
    while (i < rw->len) {
        char c = rw->text[i];
        if (in_string) {
            if (c == '\\')
                i += 2; /* the escaped byte cannot end the string */
            else
                i++;
            if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
            i++;
            continue;
        }
        int rc = scan_token(rw, &i);
        if (rc != 0)
            return rc;
    }
    if (rw->out && rw->copied < rw->len)
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
    if (rw->out && err->position >= 0) {
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
    if (snprintf(why, why_len, "%s at line %d column %d", err->text, line, column) < 0)
        why[0] = '\0';
}

json_t *hjson_loadb(const char *text, size_t len, char *why, size_t why_len)
{
    struct rewrite rw = {.text = text ? text : "", .len = text ? len : 0};
    json_error_t err;
    json_t *doc = NULL;

    if (scan(&rw) != 0) {
        if (why && why_len > 0)
            snprintf(why, why_len, "out of memory");
        goto out;
    }
    if (rw.out)
        doc = json_loadb(rw.out, rw.out_len, JSON_DECODE_ANY, &err);
    else
        doc = json_loadb(rw.text, rw.len, JSON_DECODE_ANY, &err);
    if (!doc)
        report(&rw, &err, why, why_len);
out:
    free(rw.out);
    free(rw.spans);
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

int hjson_number(const json_t *value, double *out)
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
    if (!json_is_string(value))
        return -EINVAL;
    const char *s = json_string_value(value);
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
