/* h5value: HSDS stored bytes -> buffers for HDF5, base64, and what the JSON side shares.
 * See include/h5osfs/h5json/h5value.h, spec §3.6, §6.2, §6.3. JSON values are in
 * h5value_json.c. */
#include "h5osfs/h5json/h5value.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"

#include "h5value_priv.h"
#include "h5osfs/util/why.h"

int h5value_begin(const json_t *type_json, hid_t tid, struct h5type_desc **desc, char *why,
                  size_t why_len)
{
    *desc = NULL;
    int rc = h5type_desc_parse(type_json, desc, why, why_len);
    if (rc != 0)
        return rc;
    if (tid < 0 || H5Tget_size(tid) != (*desc)->mem_size) {
        h5type_desc_free(*desc);
        *desc = NULL;
        return why_reject(why, why_len, "the HDF5 type does not match the type JSON");
    }
    return 0;
}

int h5value_alloc(const struct h5type_desc *d, size_t n, unsigned char **buf, char *why,
                  size_t why_len)
{
    *buf = NULL;
    if (n > SIZE_MAX / d->mem_size)
        return why_reject(why, why_len, "%zu elements overflow memory", n);
    if (!(*buf = calloc(n ? n : 1, d->mem_size)))
        return why_oom(why, why_len);
    return 0;
}

/* ---- object references ---- */

static const struct {
    const char *prefix;
    int cls;
} ref_prefixes[] = { { "groups/", 'g' }, { "datasets/", 'd' }, { "datatypes/", 't' } };

int h5value_ref_from_text(const struct h5value_refs *refs, const char *text, size_t len,
                          hobj_ref_t *out, char *why, size_t why_len)
{
    char id[SCHEMA_ID_BUF + 16];
    int want = 0;
    *out = 0;
    if (len == 0)
        return 0; /* the null reference */
    for (size_t k = 0; k < sizeof(ref_prefixes) / sizeof(ref_prefixes[0]); k++) {
        size_t n = strlen(ref_prefixes[k].prefix);
        if (len > n && memcmp(text, ref_prefixes[k].prefix, n) == 0) {
            want = ref_prefixes[k].cls;
            text += n;
            len -= n;
            break;
        }
    }
    if (len >= sizeof(id) || memchr(text, '\0', len))
        return why_reject(why, why_len, "reference is not an object id");
    memcpy(id, text, len);
    id[len] = '\0';
    int cls = schema_id_class(id);
    if ((want && cls != want) || (!want && cls != 'g' && cls != 'd' && cls != 't'))
        return why_reject(why, why_len, "reference \"%s\" is not a %s id", id,
                          want == 'g'   ? "group"
                          : want == 'd' ? "dataset"
                          : want == 't' ? "datatype"
                                        : "object");
    if (!refs || !refs->resolve)
        return why_reject(why, why_len, "reference to %s but no resolver", id);
    int rc = refs->resolve(refs->ctx, id, out);
    if (rc == -ENOENT)
        return why_reject(why, why_len, "reference to unknown object %s", id);
    if (rc < 0) {
        why_reject(why, why_len, "resolving reference to %s failed", id);
        return rc;
    }
    return 0;
}

/* ---- stored bytes (§6.2, §6.3) ---- */

struct cursor {
    const unsigned char *p;
    size_t left;
    const struct h5value_refs *refs;
    char msg[H5VALUE_MSG_LEN];
};

static int stored_elem(struct cursor *c, const struct h5type_desc *d, unsigned char *dst);

static int take(struct cursor *c, size_t n, const unsigned char **out)
{
    if (c->left < n)
        return why_reject(c->msg, sizeof(c->msg), "data ends %zu bytes short", n - c->left);
    *out = c->p;
    c->p += n;
    c->left -= n;
    return 0;
}

/* A vlen item's 4-byte little-endian signed byte count, checked against the limits. */
static int take_count(struct cursor *c, size_t *count)
{
    const unsigned char *b = NULL;
    int rc = take(c, 4, &b);
    if (rc != 0)
        return rc;
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (u & 0x80000000u)
        return why_reject(c->msg, sizeof(c->msg), "negative vlen count");
    if (u > H5TYPE_DESC_MAX_VLEN)
        return why_reject(c->msg, sizeof(c->msg), "vlen count %u above %u", (unsigned)u,
                          (unsigned)H5TYPE_DESC_MAX_VLEN);
    if (u > c->left)
        return why_reject(c->msg, sizeof(c->msg), "vlen count %u past the end of data",
                          (unsigned)u);
    *count = u;
    return 0;
}

static int stored_vstr(struct cursor *c, unsigned char *dst)
{
    size_t count;
    const unsigned char *bytes = NULL;
    int rc = take_count(c, &count);
    if (rc == 0)
        rc = take(c, count, &bytes);
    if (rc != 0)
        return rc;
    char *s = malloc(count + 1); /* unset and empty both read back as "" */
    if (!s)
        return -ENOMEM;
    memcpy(s, bytes, count);
    s[count] = '\0';
    memcpy(dst, &s, sizeof(s));
    return 0;
}

static int stored_vlen(struct cursor *c, const struct h5type_desc *d, unsigned char *dst)
{
    const struct h5type_desc *base = d->base;
    hvl_t vl = { 0, NULL };
    size_t count;
    int rc = take_count(c, &count);
    if (rc != 0)
        return rc;
    if (count % base->stored_size != 0)
        return why_reject(c->msg, sizeof(c->msg),
                          "vlen count %zu is not a multiple of the base size %zu", count,
                          base->stored_size);
    vl.len = count / base->stored_size;
    if (vl.len > 0) {
        vl.p = calloc(vl.len, base->mem_size);
        if (!vl.p)
            return -ENOMEM;
        /* the base has no vlen parts: nothing inside needs freeing on failure */
        for (size_t k = 0; k < vl.len && rc == 0; k++)
            rc = stored_elem(c, base, (unsigned char *)vl.p + k * base->mem_size);
        if (rc != 0) {
            free(vl.p);
            return rc;
        }
    }
    memcpy(dst, &vl, sizeof(vl));
    return 0;
}

static int stored_ref(struct cursor *c, unsigned char *dst)
{
    const unsigned char *b = NULL;
    int rc = take(c, H5TYPE_DESC_REF_STORED, &b);
    if (rc != 0)
        return rc;
    size_t len = strnlen((const char *)b, H5TYPE_DESC_REF_STORED);
    for (size_t k = len; k < H5TYPE_DESC_REF_STORED; k++) {
        if (b[k] != 0)
            return why_reject(c->msg, sizeof(c->msg), "reference is not NUL-padded");
    }
    hobj_ref_t ref;
    rc = h5value_ref_from_text(c->refs, (const char *)b, len, &ref, c->msg, sizeof(c->msg));
    if (rc == 0)
        memcpy(dst, &ref, sizeof(ref));
    return rc;
}

static int stored_elem(struct cursor *c, const struct h5type_desc *d, unsigned char *dst)
{
    const unsigned char *b = NULL;
    int rc = 0;
    if (d->traits == 0) { /* fixed-size and no references: the layouts are the same */
        rc = take(c, d->stored_size, &b);
        if (rc == 0)
            memcpy(dst, b, d->stored_size);
        return rc;
    }
    switch (d->kind) {
    case H5TYPE_K_VSTR:
        return stored_vstr(c, dst);
    case H5TYPE_K_VLEN:
        return stored_vlen(c, d, dst);
    case H5TYPE_K_REF:
        return stored_ref(c, dst);
    case H5TYPE_K_ARRAY:
        for (size_t k = 0; k < d->count && rc == 0; k++)
            rc = stored_elem(c, d->base, dst + k * d->base->mem_size);
        return rc;
    case H5TYPE_K_COMPOUND:
        for (size_t k = 0; k < d->n_fields && rc == 0; k++)
            rc = stored_elem(c, d->fields[k].type, dst + d->fields[k].offset);
        return rc;
    default:
        return why_reject(c->msg, sizeof(c->msg), "unexpected type");
    }
}

/* The fewest stored bytes an element of d takes: its size, or 4 for each variable part's byte
 * count (at least 1: every part has a size or a count). */
static size_t min_stored(const struct h5type_desc *d)
{
    size_t sum = 0;
    if (d->stored_size)
        return d->stored_size;
    switch (d->kind) {
    case H5TYPE_K_VSTR:
    case H5TYPE_K_VLEN:
        return 4;
    case H5TYPE_K_ARRAY:
        return d->count * min_stored(d->base);
    case H5TYPE_K_COMPOUND:
        for (size_t k = 0; k < d->n_fields; k++)
            sum += min_stored(d->fields[k].type);
        return sum ? sum : 1;
    default:
        return 1;
    }
}

static int stored_all(const struct h5type_desc *d, struct cursor *c, size_t n, unsigned char *buf,
                      char *why, size_t why_len)
{
    if (d->stored_size) {
        if (c->left / d->stored_size != n || c->left % d->stored_size != 0)
            return why_reject(why, why_len, "%zu bytes for %zu elements of %zu bytes", c->left, n,
                              d->stored_size);
        if (d->traits == 0) {
            memcpy(buf, c->p, c->left);
            return 0;
        }
    }
    for (size_t k = 0; k < n; k++) {
        int rc = stored_elem(c, d, buf + k * d->mem_size);
        if (rc == -ENOMEM)
            return why_oom(why, why_len);
        if (rc != 0) {
            why_reject(why, why_len, "element %zu: %s", k, c->msg);
            return rc;
        }
    }
    if (c->left != 0)
        return why_reject(why, why_len, "%zu trailing bytes after %zu elements", c->left, n);
    return 0;
}

int h5value_from_stored(const json_t *type_json, hid_t tid, const void *bytes, size_t len, size_t n,
                        const struct h5value_refs *refs, void **buf, char *why, size_t why_len)
{
    struct h5type_desc *d;
    unsigned char *b;
    if (!buf || (!bytes && len > 0))
        return why_reject(why, why_len, "no data");
    *buf = NULL;
    int rc = h5value_begin(type_json, tid, &d, why, why_len);
    if (rc != 0)
        return rc;
    /* n elements need at least n * min_stored bytes: check before allocating for them */
    if (len / min_stored(d) < n)
        rc = why_reject(why, why_len, "%zu bytes cannot hold %zu elements", len, n);
    if (rc == 0)
        rc = h5value_alloc(d, n, &b, why, why_len);
    if (rc != 0) {
        h5type_desc_free(d);
        return rc;
    }
    struct cursor c = { .p = bytes, .left = len, .refs = refs };
    rc = stored_all(d, &c, n, b, why, why_len);
    h5type_desc_free(d);
    if (rc != 0) {
        h5value_free(tid, b, n);
        return rc;
    }
    *buf = b;
    return 0;
}

/* ---- base64 (RFC 4648 with padding, as Python's base64.b64encode writes it) ---- */

static int b64_digit(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

static bool b64_space(unsigned char ch)
{
    return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t';
}

/* Decode into out (room for 3 bytes per 4 digits); -EINVAL on any malformed input. */
static int b64_run(const char *text, size_t len, unsigned char *out, size_t *out_len)
{
    uint32_t acc = 0;
    size_t digits = 0, pad = 0, o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (b64_space(ch))
            continue;
        if (ch == '=') {
            pad++;
            continue;
        }
        int v = b64_digit(ch);
        if (v < 0 || pad > 0)
            return -EINVAL; /* a foreign byte, or a digit after padding */
        acc = acc << 6 | (uint32_t)v;
        if (++digits % 4 == 0) {
            out[o++] = (unsigned char)(acc >> 16);
            out[o++] = (unsigned char)(acc >> 8);
            out[o++] = (unsigned char)acc;
            acc = 0;
        }
    }
    size_t tail = digits % 4;
    if (tail == 1 || (tail == 0 && pad != 0) || (tail != 0 && pad != 4 - tail))
        return -EINVAL;
    if (tail >= 2) {
        acc <<= 6 * (4 - tail);
        out[o++] = (unsigned char)(acc >> 16);
        if (tail == 3)
            out[o++] = (unsigned char)(acc >> 8);
    }
    *out_len = o;
    return 0;
}

int h5value_base64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len)
{
    if (!out || !out_len || (!text && len > 0))
        return -EINVAL;
    *out = NULL;
    *out_len = 0;
    unsigned char *bytes = malloc(len / 4 * 3 + 3);
    if (!bytes)
        return -ENOMEM;
    size_t n;
    if (b64_run(text, len, bytes, &n) != 0) {
        free(bytes);
        return -EINVAL;
    }
    *out = bytes;
    *out_len = n;
    return 0;
}

/* ---- freeing ---- */

/* True if the type has vlen strings or sequences anywhere (H5Tdetect_class does not see vlen
 * strings as H5T_VLEN). Errors count as true: H5Dvlen_reclaim then decides. */
static bool has_vlen(hid_t tid)
{
    H5T_class_t cls = H5Tget_class(tid);
    if (cls == H5T_VLEN)
        return true;
    if (cls == H5T_STRING)
        return H5Tis_variable_str(tid) != 0;
    if (cls == H5T_ARRAY) {
        hid_t super = H5Tget_super(tid);
        if (super < 0)
            return true;
        bool v = has_vlen(super);
        return H5Tclose(super) < 0 || v;
    }
    if (cls == H5T_COMPOUND) {
        int n = H5Tget_nmembers(tid);
        bool v = n < 0;
        for (int k = 0; k < n && !v; k++) {
            hid_t member = H5Tget_member_type(tid, (unsigned)k);
            v = member < 0 || has_vlen(member);
            if (member >= 0 && H5Tclose(member) < 0)
                v = true;
        }
        return v;
    }
    return cls == H5T_NO_CLASS;
}

void h5value_free(hid_t tid, void *buf, size_t n)
{
    if (!buf)
        return;
    if (n > 0 && has_vlen(tid)) {
        hsize_t dims[1] = { n };
        hid_t space = H5Screate_simple(1, dims, NULL);
        if (space >= 0) {
            /* H5P_DEFAULT: the library frees with free(), which matches our malloc */
            if (H5Dvlen_reclaim(tid, space, H5P_DEFAULT, buf) < 0)
                log_error("h5value_free: H5Dvlen_reclaim failed, vlen data leaked");
            if (H5Sclose(space) < 0)
                log_error("h5value_free: H5Sclose failed");
        } else {
            log_error("h5value_free: H5Screate_simple failed, vlen data leaked");
        }
    }
    free(buf);
}
