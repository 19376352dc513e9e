/*
 * sigv4: see include/h5osfs/store/sigv4.h.
 *
 * Strings are built in a dynbuf, whose error is sticky: a run of appends is
 * checked once at its end, and a half-built string never escapes. Secrets reach only the HMAC
 * key buffers, which are wiped before they are freed; nothing logged ever holds a secret, a
 * session token or a header value.
 */
#include "h5osfs/store/sigv4.h"
#include "h5osfs/util/log.h"
#include "sigv4_int.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

/* ---- character classes (by hand, not <ctype.h>: the locale must not change a signature) ---- */

int sigv4_is_alnum(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int is_unreserved(unsigned char c)
{
    return sigv4_is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* RFC 9110 token characters: what a method or a header name may be made of. */
static int is_tchar(unsigned char c)
{
    return sigv4_is_alnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int is_token(const char *s)
{
    if (!s || !*s)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (!is_tchar(*p))
            return 0;
    return 1;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

void sigv4_hex_lower(const unsigned char *bin, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bin[i] >> 4];
        out[2 * i + 1] = digits[bin[i] & 15];
    }
    out[2 * n] = '\0';
}

/* ---- URI encoding ---- */

static void sb_put_encoded(struct dynbuf *b, const char *in, size_t len, int keep_slash)
{
    static const char digits[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (is_unreserved(c) || (keep_slash && c == '/')) {
            dynbuf_appendc(b, (char)c);
        } else {
            char esc[3] = { '%', digits[c >> 4], digits[c & 15] };
            dynbuf_append(b, esc, sizeof esc);
        }
    }
}

int sigv4_uri_encode(const char *in, size_t len, int keep_slash, char **out)
{
    if (!out || (!in && len))
        return -EINVAL;
    *out = NULL;
    if (len > SIZE_MAX / 4)
        return -ENOMEM;
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    (void)dynbuf_reserve(&b, len * 3); /* worst case, so the loop never reallocates */
    sb_put_encoded(&b, in, len, keep_slash);
    return dynbuf_take(&b, out, NULL);
}

/* Percent-decodes in[0..len) into b. '+' stays '+': SigV4 query strings are RFC 3986, not HTML
 * forms, and our own encoder never writes '+' for a space. */
static int sb_put_decoded(struct dynbuf *b, const char *in, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (in[i] != '%') {
            dynbuf_appendc(b, in[i]);
            continue;
        }
        int hi = i + 2 < len ? hex_value((unsigned char)in[i + 1]) : -1;
        int lo = hi >= 0 ? hex_value((unsigned char)in[i + 2]) : -1;
        if (lo < 0)
            return -EINVAL;
        dynbuf_appendc(b, (char)(hi << 4 | lo));
        i += 2;
    }
    return 0;
}

/* ---- SHA-256 and HMAC ---- */

int sigv4_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[SHA256_LEN];
    unsigned int md_len = 0;
    if (!out || (!data && len))
        return -EINVAL;
    /* EVP_Digest fails only when OpenSSL cannot allocate its context. */
    if (EVP_Digest(data ? data : "", len, md, &md_len, EVP_sha256(), NULL) != 1 ||
        md_len != SHA256_LEN) {
        log_error("sigv4: SHA-256 failed in OpenSSL");
        return -ENOMEM;
    }
    sigv4_hex_lower(md, SHA256_LEN, out);
    return 0;
}

int sigv4_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                      unsigned char out[SHA256_LEN])
{
    unsigned int out_len = 0;
    if (key_len > INT_MAX)
        return -EINVAL;
    if (!HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &out_len) ||
        out_len != SHA256_LEN) {
        log_error("sigv4: HMAC-SHA256 failed in OpenSSL");
        return -ENOMEM;
    }
    return 0;
}

/* ---- canonical path ---- */

/* S3 signs the path as sent, so it must be spelled exactly as sigv4_uri_encode(key, 1) spells
 * it: unreserved bytes and '/' as they are, everything else %XX in upper case. Any other
 * spelling of the same key (a raw space or '+', "%2f", "%41", "%2F") leaves it to the server
 * whether it signs the bytes received or re-encodes the decoded key, and servers differ. */
static int is_canonical_encoded_path(const char *path)
{
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (is_unreserved(*p) || *p == '/')
            continue;
        if (*p != '%')
            return 0;
        int hi = hex_value(p[1]), lo = hi >= 0 ? hex_value(p[2]) : -1;
        if (lo < 0 || (p[1] >= 'a' && p[1] <= 'f') || (p[2] >= 'a' && p[2] <= 'f'))
            return 0;
        unsigned char c = (unsigned char)(hi << 4 | lo);
        if (is_unreserved(c) || c == '/')
            return 0;
        p += 2;
    }
    return 1;
}

struct segment {
    const char *p;
    size_t n;
};

/* RFC 3986 remove_dot_segments with empty segments dropped (so "//" collapses first): a stack
 * of segments. A path whose last segment is empty, "." or ".." names a directory and keeps its
 * trailing slash ("/a/b/.." is "/a/"), unless nothing is left but the root. */
static int normalize_path(const char *path, struct dynbuf *out)
{
    size_t max = 1;
    for (const char *s = path; *s; s++)
        max += *s == '/';
    struct segment *stack = calloc(max, sizeof *stack);
    if (!stack)
        return -ENOMEM;
    size_t depth = 0;
    int dir = 0;
    for (const char *s = path + 1;; s++) {
        const char *e = strchrnul(s, '/');
        size_t n = (size_t)(e - s);
        dir = n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            if (depth > 0) /* ".." above the root stays at the root */
                depth--;
        } else if (!dir) {
            stack[depth++] = (struct segment){ s, n };
        }
        if (!*e)
            break;
        s = e;
    }
    for (size_t i = 0; i < depth; i++) {
        dynbuf_appendc(out, '/');
        dynbuf_append(out, stack[i].p, stack[i].n);
    }
    if (depth == 0 || dir)
        dynbuf_appendc(out, '/');
    free(stack);
    return 0;
}

/* Generic AWS services sign the normalised path URI-encoded once more (the suite's double
 * encoding); S3 signs the path it was sent. */
static int append_path(struct dynbuf *b, const char *path, int normalize)
{
    if (!normalize) {
        if (!is_canonical_encoded_path(path)) {
            log_error("sigv4: path \"%s\" is not URI-encoded as S3 signs it", path);
            return -EINVAL;
        }
        dynbuf_appends(b, path);
        return 0;
    }
    struct dynbuf norm = DYNBUF_INIT(DYNBUF_NO_MAX);
    int rc = normalize_path(path, &norm);
    if (rc == 0 && norm.err)
        rc = norm.err;
    if (rc == 0)
        sb_put_encoded(b, norm.p, norm.len, 1);
    dynbuf_free(&norm);
    return rc;
}

/* ---- canonical query ---- */

struct qparam {
    char *key, *value;
};

static int qparam_cmp(const void *a, const void *b)
{
    const struct qparam *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

/* A key or value arrives raw or already encoded; decoding first and encoding again gives one
 * spelling for both ("%E1%88%B4" and the raw UTF-8 bytes sign alike). */
static int canon_component(const char *s, size_t n, char **out)
{
    struct dynbuf raw = DYNBUF_INIT(DYNBUF_NO_MAX), enc = DYNBUF_INIT(DYNBUF_NO_MAX);
    int rc = sb_put_decoded(&raw, s, n);
    if (rc == 0 && raw.err)
        rc = raw.err;
    if (rc == 0)
        sb_put_encoded(&enc, raw.p, raw.len, 0);
    dynbuf_free(&raw);
    if (rc) {
        dynbuf_free(&enc);
        return rc;
    }
    return dynbuf_take(&enc, out, NULL);
}

/* One "key[=value]" piece; a bare key signs as "key=" (S3's "?lifecycle"). */
static int parse_qparam(const char *s, size_t n, struct qparam *qp)
{
    const char *eq = memchr(s, '=', n);
    size_t klen = eq ? (size_t)(eq - s) : n;
    int rc = canon_component(s, klen, &qp->key);
    if (rc == 0)
        rc = canon_component(eq ? eq + 1 : "", eq ? n - klen - 1 : 0, &qp->value);
    return rc;
}

static void free_qparams(struct qparam *qp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(qp[i].key);
        free(qp[i].value);
    }
    free(qp);
}

/* Splits at '&' (empty pieces, as in "a=1&&b=2", carry nothing and are skipped). */
static int parse_query(const char *query, struct qparam **out, size_t *count)
{
    size_t max = 1, n = 0;
    for (const char *s = query; *s; s++)
        max += *s == '&';
    struct qparam *qp = calloc(max, sizeof *qp);
    if (!qp)
        return -ENOMEM;
    int rc = 0;
    const char *s = query;
    for (; rc == 0; s++) {
        const char *e = strchrnul(s, '&');
        if (e > s)
            rc = parse_qparam(s, (size_t)(e - s), &qp[n++]);
        if (!*e)
            break;
        s = e;
    }
    if (rc) { /* where, not what: a query parameter may carry a token */
        log_error("sigv4: query parameter at offset %zu has a malformed %%-escape",
                  (size_t)(s - query));
        free_qparams(qp, n);
        return rc;
    }
    *out = qp;
    *count = n;
    return 0;
}

static int append_query(struct dynbuf *b, const char *query)
{
    struct qparam *qp = NULL;
    size_t n = 0;
    if (!query || !*query)
        return 0;
    int rc = parse_query(query, &qp, &n);
    if (rc)
        return rc;
    qsort(qp, n, sizeof *qp, qparam_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i)
            dynbuf_appendc(b, '&');
        dynbuf_appends(b, qp[i].key);
        dynbuf_appendc(b, '=');
        dynbuf_appends(b, qp[i].value);
    }
    free_qparams(qp, n);
    return 0;
}

/* ---- canonical headers ---- */

struct chdr {
    char *name;   /* lower case */
    char *value;  /* trimmed, inner blank runs folded to one space */
    size_t order; /* position in the request: duplicates keep their order when merged */
};

static int chdr_cmp(const void *a, const void *b)
{
    const struct chdr *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Control characters other than tab cannot be sent in a header (obs-fold is the HTTP parser's
 * business, not the signer's), and a newline here would forge a line of the canonical request. */
static int canon_value(const char *v, char **out)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    int pending_space = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == ' ' || *p == '\t') {
            pending_space = b.len > 0;
            continue;
        }
        if (*p < 0x20 || *p == 0x7f) {
            dynbuf_free(&b);
            return -EINVAL;
        }
        if (pending_space)
            dynbuf_appendc(&b, ' ');
        pending_space = 0;
        dynbuf_appendc(&b, (char)*p);
    }
    return dynbuf_take(&b, out, NULL);
}

static int canon_header(const struct sigv4_header *h, size_t order, struct chdr *out)
{
    if (!is_token(h->name) || !h->value) {
        log_error("sigv4: header %zu has an invalid name or no value", order);
        return -EINVAL;
    }
    out->order = order;
    out->name = strdup(h->name);
    if (!out->name)
        return -ENOMEM;
    for (char *p = out->name; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    int rc = canon_value(h->value, &out->value);
    if (rc == -EINVAL)
        log_error("sigv4: header \"%s\" has a control character in its value", out->name);
    return rc;
}

static void free_chdrs(struct chdr *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
}

/* Canonical, lower-cased and sorted by name; duplicates stay in request order. */
static int collect_headers(const struct sigv4_request *req, struct chdr **out)
{
    if (req->n_headers == 0 || !req->headers) {
        log_error("sigv4: no headers to sign (host is required)");
        return -EINVAL;
    }
    struct chdr *h = calloc(req->n_headers, sizeof *h);
    if (!h)
        return -ENOMEM;
    int rc = 0, have_host = 0;
    for (size_t i = 0; i < req->n_headers && rc == 0; i++) {
        rc = canon_header(&req->headers[i], i, &h[i]);
        have_host |= rc == 0 && strcmp(h[i].name, "host") == 0;
    }
    if (rc == 0 && !have_host) {
        log_error("sigv4: the host header must be signed");
        rc = -EINVAL;
    }
    if (rc) {
        free_chdrs(h, req->n_headers);
        return rc;
    }
    qsort(h, req->n_headers, sizeof *h, chdr_cmp);
    *out = h;
    return 0;
}

/* "name:v1,v2\n" per distinct name into b (repeated names merge, as one header with a list
 * value), and "name;name" into names. */
static int append_headers(struct dynbuf *b, struct dynbuf *names, const struct sigv4_request *req)
{
    struct chdr *h = NULL;
    int rc = collect_headers(req, &h);
    if (rc)
        return rc;
    for (size_t i = 0; i < req->n_headers; i++) {
        if (i > 0 && strcmp(h[i].name, h[i - 1].name) == 0) {
            dynbuf_appendc(b, ',');
        } else {
            if (i > 0) {
                dynbuf_appendc(b, '\n');
                dynbuf_appendc(names, ';');
            }
            dynbuf_appends(b, h[i].name);
            dynbuf_appendc(b, ':');
            dynbuf_appends(names, h[i].name);
        }
        dynbuf_appends(b, h[i].value);
    }
    dynbuf_appendc(b, '\n');
    free_chdrs(h, req->n_headers);
    return 0;
}

/* ---- canonical request ---- */

static int is_payload_hash(const char *s)
{
    if (strcmp(s, SIGV4_UNSIGNED) == 0)
        return 1;
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return 0;
    return n == 2 * SHA256_LEN;
}

static int check_request(const struct sigv4_request *req)
{
    if (!req || !is_token(req->method) || !req->path || req->path[0] != '/' || !req->payload_hash) {
        log_error("sigv4: request without a valid method, an absolute path or a payload hash");
        return -EINVAL;
    }
    if (!is_payload_hash(req->payload_hash)) {
        log_error("sigv4: payload hash is neither hex SHA-256 nor " SIGV4_UNSIGNED);
        return -EINVAL;
    }
    return 0;
}

/* The canonical request and, apart, the signed header list the Authorization header repeats. */
int sigv4_build_canonical(const struct sigv4_request *req, int normalize_path, char **creq,
                          char **signed_names)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX), names = DYNBUF_INIT(DYNBUF_NO_MAX);
    int rc = check_request(req);
    if (rc)
        return rc;
    dynbuf_appends(&b, req->method);
    dynbuf_appendc(&b, '\n');
    rc = append_path(&b, req->path, normalize_path);
    dynbuf_appendc(&b, '\n');
    if (rc == 0)
        rc = append_query(&b, req->query);
    dynbuf_appendc(&b, '\n');
    if (rc == 0)
        rc = append_headers(&b, &names, req);
    dynbuf_appendc(&b, '\n');
    dynbuf_appends(&b, names.p ? names.p : "");
    dynbuf_appendc(&b, '\n');
    dynbuf_appends(&b, req->payload_hash);
    if (rc == 0)
        rc = names.err;
    if (rc) {
        dynbuf_free(&b);
        dynbuf_free(&names);
        return rc;
    }
    rc = dynbuf_take(&b, creq, NULL);
    if (rc == 0 && signed_names)
        return dynbuf_take(&names, signed_names, NULL);
    dynbuf_free(&names);
    return rc;
}

int sigv4_canonical_request(const struct sigv4_request *req, int normalize_path, char **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    return sigv4_build_canonical(req, normalize_path, out, NULL);
}
