/* h5value_out: buffers read from HDF5 -> HSDS stored bytes (§6.2, §6.3), base64, and object
 * references as HSDS writes them. See include/h5osfs/h5json/h5value.h. JSON values are in
 * h5value_out_json.c.
 *
 * The buffers are in the memory layout of the type h5type_from_json builds (h5type.h), which
 * the descriptor of the type JSON describes: fixed-size parts without references are the
 * stored bytes already; vlen strings (char *), vlen sequences (hvl_t) and references
 * (hobj_ref_t) are written as HSDS stores them. A vlen item longer than the 1,000,000 bytes HSDS
 * reads back (§6.3) is refused rather than written unreadable. */
#include "h5osfs/h5json/h5value.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/schema.h"
#include "h5osfs/util/dynbuf.h"

#include "h5value_priv.h"
#include "h5osfs/util/why.h"

/* ---- object references ---- */

int h5value_ref_to_text(const struct h5value_ids *ids, const hobj_ref_t *ref,
                        char text[H5VALUE_REF_TEXT], char *why, size_t why_len)
{
    static const hobj_ref_t null_ref;
    char id[SCHEMA_ID_BUF + 1];
    text[0] = '\0';
    if (memcmp(ref, &null_ref, sizeof(null_ref)) == 0)
        return 0;
    if (!ids || !ids->id_of)
        return why_reject(why, why_len, "reference but no id resolver");
    memset(id, 0, sizeof(id));
    int rc = ids->id_of(ids->ctx, ref, id);
    if (rc == -ENOENT)
        return 0; /* dangling: HSDS's null reference */
    if (rc < 0) {
        why_reject(why, why_len, "resolving a reference failed");
        return rc;
    }
    int cls = id[SCHEMA_ID_BUF - 1] == '\0' ? schema_id_class(id) : -EINVAL;
    const char *prefix = cls == 'g' ? "groups/" : cls == 'd' ? "datasets/" : "datatypes/";
    if (cls != 'g' && cls != 'd' && cls != 't')
        return why_reject(why, why_len, "reference resolved to \"%.*s\", not an object id",
                          SCHEMA_ID_LEN, id);
    if (snprintf(text, H5VALUE_REF_TEXT, "%s%s", prefix, id) >= H5VALUE_REF_TEXT) {
        text[0] = '\0';
        return why_reject(why, why_len, "reference to %s longer than %d bytes", id,
                          H5TYPE_DESC_REF_STORED);
    }
    return 0;
}

/* ---- stored bytes (§6.2, §6.3) ---- */

struct out {
    struct dynbuf bytes;
    const struct h5value_ids *ids;
    char msg[H5VALUE_MSG_LEN];
};

/* The callers tell only memory apart: any failure of the buffer is -ENOMEM. */
static int put(struct out *o, const void *bytes, size_t n)
{
    return dynbuf_append(&o->bytes, bytes, n) == 0 ? 0 : -ENOMEM;
}

/* A vlen item's 4-byte little-endian byte count, checked against what HSDS reads back. */
static int put_count(struct out *o, size_t count)
{
    if (count > H5TYPE_DESC_MAX_VLEN)
        return why_reject(o->msg, sizeof(o->msg), "vlen item of %zu bytes, above %u", count,
                          (unsigned)H5TYPE_DESC_MAX_VLEN);
    unsigned char b[4] = { (unsigned char)count, (unsigned char)(count >> 8),
                           (unsigned char)(count >> 16), (unsigned char)(count >> 24) };
    return put(o, b, sizeof(b));
}

static int elem_stored(struct out *o, const struct h5type_desc *d, const unsigned char *src);

static int vstr_stored(struct out *o, const unsigned char *src)
{
    const char *s;
    memcpy(&s, src, sizeof(s));
    size_t len = s ? strlen(s) : 0; /* unset and empty are both a count of 0 */
    int rc = put_count(o, len);
    return rc == 0 ? put(o, s, len) : rc;
}

static int vlen_stored(struct out *o, const struct h5type_desc *d, const unsigned char *src)
{
    const struct h5type_desc *base = d->base;
    hvl_t vl;
    memcpy(&vl, src, sizeof(vl));
    if (vl.len > 0 && !vl.p)
        return why_reject(o->msg, sizeof(o->msg), "vlen of %zu items without data", vl.len);
    if (vl.len > H5TYPE_DESC_MAX_VLEN / base->stored_size)
        return why_reject(o->msg, sizeof(o->msg), "vlen of %zu items, above %u bytes", vl.len,
                          (unsigned)H5TYPE_DESC_MAX_VLEN);
    int rc = put_count(o, vl.len * base->stored_size);
    for (size_t k = 0; k < vl.len && rc == 0; k++)
        rc = elem_stored(o, base, (const unsigned char *)vl.p + k * base->mem_size);
    return rc;
}

static int ref_stored(struct out *o, const unsigned char *src)
{
    hobj_ref_t ref;
    char text[H5VALUE_REF_TEXT];
    unsigned char bytes[H5TYPE_DESC_REF_STORED] = { 0 };
    memcpy(&ref, src, sizeof(ref));
    int rc = h5value_ref_to_text(o->ids, &ref, text, o->msg, sizeof(o->msg));
    if (rc != 0)
        return rc;
    memcpy(bytes, text, strlen(text)); /* NUL-padded to 48 bytes; "" is the null reference */
    return put(o, bytes, sizeof(bytes));
}

static int elem_stored(struct out *o, const struct h5type_desc *d, const unsigned char *src)
{
    int rc = 0;
    if (d->traits == 0) /* fixed-size and no references: the layouts are the same */
        return put(o, src, d->stored_size);
    switch (d->kind) {
    case H5TYPE_K_VSTR:
        return vstr_stored(o, src);
    case H5TYPE_K_VLEN:
        return vlen_stored(o, d, src);
    case H5TYPE_K_REF:
        return ref_stored(o, src);
    case H5TYPE_K_ARRAY:
        for (size_t k = 0; k < d->count && rc == 0; k++)
            rc = elem_stored(o, d->base, src + k * d->base->mem_size);
        return rc;
    case H5TYPE_K_COMPOUND:
        for (size_t k = 0; k < d->n_fields && rc == 0; k++)
            rc = elem_stored(o, d->fields[k].type, src + d->fields[k].offset);
        return rc;
    default:
        return why_reject(o->msg, sizeof(o->msg), "unexpected type");
    }
}

static int all_stored(const struct h5type_desc *d, struct out *o, const unsigned char *buf,
                      size_t n, char *why, size_t why_len)
{
    if (d->stored_size && n > SIZE_MAX / d->stored_size)
        return why_reject(why, why_len, "%zu elements overflow memory", n);
    if (n > SIZE_MAX / d->mem_size)
        return why_reject(why, why_len, "%zu elements overflow memory", n);
    /* fixed sizes: exactly the bytes needed; variable: a guess (at most 1 MiB) that grows */
    size_t guess = d->stored_size ? n * d->stored_size : (n < (1u << 16) ? n * 16 : 1u << 20);
    if (dynbuf_reserve(&o->bytes, guess) != 0)
        return why_oom(why, why_len);
    if (d->traits == 0)
        return put(o, buf, n * d->stored_size); /* reserved: cannot fail */
    for (size_t k = 0; k < n; k++) {
        int rc = elem_stored(o, d, buf + k * d->mem_size);
        if (rc == -ENOMEM)
            return why_oom(why, why_len);
        if (rc != 0) {
            why_reject(why, why_len, "element %zu: %s", k, o->msg);
            return rc;
        }
    }
    return 0;
}

int h5value_to_stored(const json_t *type_json, hid_t tid, const void *buf, size_t n,
                      const struct h5value_ids *ids, unsigned char **out, size_t *out_len,
                      char *why, size_t why_len)
{
    struct h5type_desc *d;
    if (!out || !out_len || (!buf && n > 0))
        return why_reject(why, why_len, "no value or no output");
    *out = NULL;
    *out_len = 0;
    int rc = h5value_begin(type_json, tid, &d, why, why_len);
    if (rc != 0)
        return rc;
    struct out o = { .bytes = DYNBUF_INIT(DYNBUF_NO_MAX), .ids = ids };
    rc = all_stored(d, &o, buf, n, why, why_len);
    h5type_desc_free(d);
    if (rc != 0) {
        dynbuf_free(&o.bytes);
        return rc;
    }
    char *bytes;
    if (dynbuf_take(&o.bytes, &bytes, out_len) != 0)
        return why_oom(why, why_len);
    *out = (unsigned char *)bytes;
    return 0;
}

/* ---- base64 (RFC 4648 with padding, as Python's base64.b64encode writes it) ---- */

int h5value_base64_encode(const void *bytes, size_t len, char **out)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = bytes;
    if (!out || (!bytes && len > 0))
        return -EINVAL;
    *out = NULL;
    if (len / 3 >= (SIZE_MAX - 5) / 4)
        return -ENOMEM;
    char *text = malloc((len + 2) / 3 * 4 + 1), *t = text;
    if (!text)
        return -ENOMEM;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t acc = (uint32_t)b[i] << 16;
        if (i + 1 < len)
            acc |= (uint32_t)b[i + 1] << 8;
        if (i + 2 < len)
            acc |= b[i + 2];
        *t++ = digits[acc >> 18];
        *t++ = digits[(acc >> 12) & 63];
        *t++ = i + 1 < len ? digits[(acc >> 6) & 63] : '=';
        *t++ = i + 2 < len ? digits[acc & 63] : '=';
    }
    *t = '\0';
    *out = text;
    return 0;
}
