/*
 * codec: see include/h5osfs/codec/codec.h.
 *
 * Decoding is two stages, as in HSDS's storUtil: undo the compressor (a blosc frame, or a zlib
 * stream for gzip datasets), then undo a shuffle that is still pending. Each stage knows the
 * exact size it must produce (fixed types) or an upper bound (vlen data, a bitshuffle stream
 * inside a frame), checks every header against it before allocating, and fails as a whole.
 *
 * Encoding is in codec_encode.c.
 */
#include "h5osfs/codec/codec.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>
#include <libdeflate.h>
#include <zlib.h>

#include "h5osfs/codec/bitshuffle.h"
#include "h5osfs/util/why.h"
#include "codec_int.h"

int codec_fail(char *why, size_t why_len, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)why_vreject(why, why_len, fmt, ap);
    va_end(ap);
    return err;
}

/* ---- filters (spec §5.2, dsetUtil.FILTER_DEFS and getFilterOps) ---- */

enum role { ROLE_IGNORED, ROLE_COMPRESSOR, ROLE_SHUFFLE, ROLE_BITSHUFFLE };

struct filter_def {
    const char *cls;
    long long id;
    const char *name;
    enum role role;
};

static const struct filter_def filter_defs[] = {
    { "H5Z_FILTER_NONE", 0, "none", ROLE_IGNORED },
    { "H5Z_FILTER_DEFLATE", 1, "gzip", ROLE_COMPRESSOR },
    { "H5Z_FILTER_SHUFFLE", 2, "shuffle", ROLE_SHUFFLE },
    { "H5Z_FILTER_FLETCHER32", 3, "fletcher32", ROLE_IGNORED },
    { "H5Z_FILTER_SZIP", 4, "szip", ROLE_COMPRESSOR },
    { "H5Z_FILTER_NBIT", 5, "nbit", ROLE_IGNORED },
    { "H5Z_FILTER_SCALEOFFSET", 6, "scaleoffset", ROLE_COMPRESSOR },
    { "H5Z_FILTER_LZF", 32000, "lzf", ROLE_COMPRESSOR },
    { "H5Z_FILTER_BLOSC", 32001, "blosclz", ROLE_COMPRESSOR },
    { "H5Z_FILTER_SNAPPY", 32003, "snappy", ROLE_COMPRESSOR },
    { "H5Z_FILTER_LZ4", 32004, "lz4", ROLE_COMPRESSOR },
    { "H5Z_FILTER_LZ4HC", 32005, "lz4hc", ROLE_COMPRESSOR },
    { "H5Z_FILTER_BITSHUFFLE", 32008, "bitshuffle", ROLE_BITSHUFFLE },
    { "H5Z_FILTER_ZSTD", 32015, "zstd", ROLE_COMPRESSOR },
};

#define N_DEFS (sizeof(filter_defs) / sizeof(filter_defs[0]))
#define USER_CLASS "H5Z_FILTER_USER"

static const struct filter_def *def_by_class(const char *cls)
{
    for (size_t i = 0; i < N_DEFS; i++)
        if (strcmp(filter_defs[i].cls, cls) == 0)
            return &filter_defs[i];
    return NULL;
}

static const struct filter_def *def_by_id(long long id)
{
    for (size_t i = 0; i < N_DEFS; i++)
        if (filter_defs[i].id == id)
            return &filter_defs[i];
    return NULL;
}

static int is_zlib_name(const char *name)
{
    return strcmp(name, "gzip") == 0 || strcmp(name, "deflate") == 0 || strcmp(name, "zlib") == 0;
}

/* Names are looked up as getFilterItem does, with "deflate" (and "zlib") meaning gzip. */
static const struct filter_def *def_by_name(const char *name)
{
    if (is_zlib_name(name))
        return def_by_id(1);
    for (size_t i = 0; i < N_DEFS; i++)
        if (strcmp(filter_defs[i].name, name) == 0)
            return &filter_defs[i];
    return NULL;
}

/* What one entry of the list does: its role and, for a compressor, the codec name HSDS would
 * use (DEFLATE is zlib; another class uses its name, lz4 when it has none) and its level. */
struct entry {
    enum role role;
    const char *compressor;
    int scaleoffset;
    int level;
};

#define DEFAULT_LEVEL 5

static int is_blank(char c)
{
    return c && strchr(" \t\n\r\v\f", c) != NULL;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* int(s) for a decimal string: surrounding blanks and a sign allowed, nothing else. */
static int string_level(const char *s)
{
    char *end = NULL;
    while (is_blank(*s))
        s++;
    if (!is_digit(*s) && !((*s == '+' || *s == '-') && is_digit(s[1])))
        return BAD_LEVEL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (is_blank(*end))
        end++;
    if (errno || *end || v <= INT_MIN || v > INT_MAX)
        return BAD_LEVEL;
    return (int)v;
}

/* getFilterOps: int(level), 5 when absent; int() of a float truncates, of a bool is 0 or 1. */
static int entry_level(const json_t *level)
{
    if (!level)
        return DEFAULT_LEVEL;
    if (json_is_integer(level)) {
        json_int_t v = json_integer_value(level);
        return v > INT_MIN && v <= INT_MAX ? (int)v : BAD_LEVEL;
    }
    if (json_is_real(level)) {
        double v = json_real_value(level);
        return v > (double)INT_MIN && v < (double)INT_MAX + 1.0 ? (int)v : BAD_LEVEL;
    }
    if (json_is_boolean(level))
        return json_is_true(level);
    if (json_is_string(level))
        return string_level(json_string_value(level));
    return BAD_LEVEL;
}

/* An H5Z_FILTER_USER entry is a compressor only with one of these names (getFilterOps). */
static int user_compressor_name(const char *name)
{
    static const char *const names[] = { "gzip",   "szip", "lzf",   "blosclz",
                                         "snappy", "lz4",  "lz4hc", "zstd" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

static int user_entry(const char *name, long long id, int has_id, struct entry *e, char *why,
                      size_t why_len)
{
    /* found by name, or by id when it has no name (normalisation adds the missing one) */
    const struct filter_def *def = name ? def_by_name(name) : has_id ? def_by_id(id) : NULL;
    if (!def)
        return EINVAL_WHY("unknown user filter %s (id %lld)", name ? name : "(no name)",
                          has_id ? id : -1);
    if (!name)
        name = def->name;
    if (user_compressor_name(name)) {
        e->role = ROLE_COMPRESSOR;
        e->compressor = name;
    } else if (def->role == ROLE_SHUFFLE || def->role == ROLE_BITSHUFFLE) {
        e->role = def->role;
    }
    return 0;
}

static void class_entry(const struct filter_def *def, const char *name, struct entry *e)
{
    e->role = def->role;
    if (def->role != ROLE_COMPRESSOR)
        return;
    e->scaleoffset = def->id == 6;
    e->compressor = def->id == 1 ? "zlib" : name ? name : "lz4";
}

static int object_entry(const json_t *f, struct entry *e, char *why, size_t why_len)
{
    const json_t *cls = json_object_get(f, "class");
    const json_t *name = json_object_get(f, "name");
    const json_t *id = json_object_get(f, "id");
    if (!json_is_string(cls))
        return EINVAL_WHY("filter entry without a class");
    if (name && !json_is_string(name))
        return EINVAL_WHY("filter %s has a name that is not a string", json_string_value(cls));
    if (id && !json_is_integer(id))
        return EINVAL_WHY("filter %s has an id that is not an integer", json_string_value(cls));
    const char *n = name ? json_string_value(name) : NULL;
    e->level = entry_level(json_object_get(f, "level"));
    if (strcmp(json_string_value(cls), USER_CLASS) == 0)
        return user_entry(n, id ? json_integer_value(id) : 0, id != NULL, e, why, why_len);
    const struct filter_def *def = def_by_class(json_string_value(cls));
    if (!def)
        return EINVAL_WHY("unknown filter class %s", json_string_value(cls));
    class_entry(def, n, e);
    return 0;
}

/* Integer and string entries are what normalisation turns into {class, id, name}. */
static int parse_entry(const json_t *f, struct entry *e, char *why, size_t why_len)
{
    memset(e, 0, sizeof(*e));
    e->level = DEFAULT_LEVEL;
    if (json_is_object(f))
        return object_entry(f, e, why, why_len);
    const struct filter_def *def = NULL;
    if (json_is_integer(f)) {
        def = def_by_id(json_integer_value(f));
        if (!def)
            return EINVAL_WHY("unknown filter id %lld", (long long)json_integer_value(f));
    } else if (json_is_string(f)) {
        def = def_by_name(json_string_value(f));
        if (!def)
            return EINVAL_WHY("unknown filter %s", json_string_value(f));
    } else {
        return EINVAL_WHY("filter entry is not an object, a name or an id");
    }
    class_entry(def, def->name, e);
    return 0;
}

/* The compressor HSDS would pick: may its chunks be decoded here? */
static int apply_compressor(const struct entry *e, struct codec_spec *out, char *why,
                            size_t why_len)
{
    const char *c = e->compressor;
    if (e->scaleoffset)
        return 0; /* scaleoffset as "compressor" is a no-op in HSDS */
    if (strcmp(c, "szip") == 0 || strcmp(c, "lzf") == 0)
        return EINVAL_WHY("%s compression is not supported (HSDS cannot decode it either)", c);
    if (is_zlib_name(c)) {
        out->zlib_fallback = 1;
    } else if (strcmp(c, "blosclz") && strcmp(c, "lz4") && strcmp(c, "lz4hc") &&
               strcmp(c, "zstd") && strcmp(c, "snappy")) {
        return EINVAL_WHY("unknown compressor %s", c);
    } else if (blosc_compname_to_compcode(c) < 0) {
        return EINVAL_WHY("this c-blosc cannot decode %s", c);
    }
    /* the blosc codec _compress uses (every name that got here fits the field) */
    const char *codec = is_zlib_name(c) ? "zlib" : c;
    int n = snprintf(out->compressor, sizeof(out->compressor), "%s", codec);
    if (n < 0 || (size_t)n >= sizeof(out->compressor))
        return EINVAL_WHY("compressor name %s is too long", codec);
    out->compressed = 1;
    out->level = e->level;
    return 0;
}

int codec_spec_from_filters(const json_t *filters, size_t itemsize, int is_vlen,
                            enum codec_source source, struct codec_spec *out, char *why,
                            size_t why_len)
{
    memset(out, 0, sizeof(*out));
    out->itemsize = itemsize;
    out->source = source;
    if (filters && !json_is_array(filters))
        return EINVAL_WHY("filters is not an array");
    int have_compressor = 0, have_shuffle = 0;
    for (size_t i = 0; filters && i < json_array_size(filters); i++) {
        struct entry e;
        int rc = parse_entry(json_array_get(filters, i), &e, why, why_len);
        if (rc)
            return rc;
        if (e.role == ROLE_COMPRESSOR && !have_compressor) {
            have_compressor = 1; /* only the first compressor counts, as in getFilterOps */
            rc = apply_compressor(&e, out, why, why_len);
            if (rc)
                return rc;
        } else if ((e.role == ROLE_SHUFFLE || e.role == ROLE_BITSHUFFLE) && !have_shuffle) {
            have_shuffle = 1;
            out->shuffle = e.role == ROLE_SHUFFLE ? CODEC_SHUFFLE_BYTE : CODEC_SHUFFLE_BIT;
        }
    }
    if (is_vlen)
        out->shuffle = CODEC_SHUFFLE_NONE; /* HSDS never shuffles variable-length data */
    if (out->shuffle != CODEC_SHUFFLE_NONE && itemsize == 0)
        return EINVAL_WHY("a shuffle filter needs the element size");
    return 0;
}

/* ---- blosc frames (spec §6.4, §6.5) ---- */

/* HSDS's sniff: numcodecs' cbuffer_metainfo reports a typesize exactly for these bytes. */
static int looks_like_blosc(const unsigned char *in, size_t in_len)
{
    return in_len >= 4 && in[0] == 2 && in[3] != 0;
}

/* Check a frame's header against its length and the size it may decode to, [min, max]:
 * the frame's own sizes are never trusted further than that. */
static int blosc_check(const unsigned char *in, size_t in_len, size_t min, size_t max,
                       size_t *nbytes, char *why, size_t why_len)
{
    size_t n = 0, cbytes = 0, blocksize = 0;
    if (in_len < BLOSC_MIN_HEADER_LENGTH)
        return EINVAL_WHY("blosc frame of %zu bytes is shorter than its header", in_len);
    blosc_cbuffer_sizes(in, &n, &cbytes, &blocksize);
    if (cbytes != in_len)
        return EINVAL_WHY("blosc frame states %zu bytes, the object has %zu", cbytes, in_len);
    if (blosc_cbuffer_validate(in, in_len, &n) < 0 || blocksize == 0)
        return EINVAL_WHY("blosc frame header is invalid");
    if (n < min || n > max) {
        if (min == max)
            return EINVAL_WHY("blosc frame decodes to %zu bytes, the chunk has %zu", n, max);
        return EINVAL_WHY("blosc frame decodes to %zu bytes, outside [%zu, %zu]", n, min, max);
    }
    if ((in[2] & BLOSC_MEMCPYED) && in_len != n + BLOSC_MAX_OVERHEAD)
        return EINVAL_WHY("stored blosc frame of %zu bytes holds %zu", in_len, n);
    *nbytes = n;
    return 0;
}

/* Decode a checked frame into exactly nbytes (single-threaded _ctx call: no global state). */
static int blosc_run(const unsigned char *in, void *out, size_t nbytes, char *why, size_t why_len)
{
    int got = blosc_decompress_ctx(in, out, nbytes, 1);
    if (got <= 0 || (size_t)got != nbytes)
        return EINVAL_WHY("blosc frame is corrupt (decoded %d of %zu bytes)", got, nbytes);
    return 0;
}

/* ---- zlib streams (RFC 1950: what HDF5's deflate filter stores) ---- */

/* Feed the input in pieces that fit zlib's unsigned counters. */
static void zlib_feed(z_stream *zs, const unsigned char **in, size_t *in_left)
{
    if (zs->avail_in == 0 && *in_left) {
        size_t n = *in_left < UINT_MAX ? *in_left : UINT_MAX;
        zs->next_in = (unsigned char *)*in; /* zlib does not write through next_in */
        zs->avail_in = (uInt)n;
        *in += n;
        *in_left -= n;
    }
}

struct zout {
    unsigned char *buf; /* filled up to len, allocated up to cap, grown up to max */
    size_t len, cap, max;
};

/* Point zlib at the free part of the output, growing it (doubling, at most max) if full. */
static int zout_room(struct zout *o, z_stream *zs, char *why, size_t why_len)
{
    if (o->len == o->cap) {
        size_t cap = o->cap > o->max / 2 ? o->max : o->cap * 2;
        unsigned char *p = realloc(o->buf, cap);
        if (!p)
            return ENOMEM_WHY(cap);
        o->buf = p;
        o->cap = cap;
    }
    size_t n = o->cap - o->len < UINT_MAX ? o->cap - o->len : UINT_MAX;
    zs->next_out = o->buf + o->len;
    zs->avail_out = (uInt)n;
    return 0;
}

/* Run inflate to the end of the stream; all input must be used (no trailing bytes). Once the
 * output reaches max, inflate still runs with no room: it may only have the trailer left. */
static int zlib_loop(z_stream *zs, const unsigned char *in, size_t in_len, struct zout *o,
                     char *why, size_t why_len)
{
    for (;;) {
        zlib_feed(zs, &in, &in_len);
        if (zs->avail_out == 0 && o->len < o->max) {
            int rc = zout_room(o, zs, why, why_len);
            if (rc)
                return rc;
        }
        uInt before = zs->avail_out;
        int zrc = inflate(zs, Z_NO_FLUSH);
        o->len += before - zs->avail_out;
        if (zrc == Z_STREAM_END)
            break;
        if (zrc == Z_OK || (zrc == Z_BUF_ERROR && zs->avail_in == 0 && in_len))
            continue; /* progress, or only more input needed */
        if (zrc == Z_BUF_ERROR && zs->avail_out == 0)
            return EINVAL_WHY("zlib stream decodes to more than %zu bytes", o->max);
        if (zrc == Z_BUF_ERROR)
            return EINVAL_WHY("zlib stream is truncated");
        if (zrc == Z_MEM_ERROR)
            return codec_fail(why, why_len, -ENOMEM, "zlib is out of memory");
        return EINVAL_WHY("zlib stream is corrupt (%s)", zs->msg ? zs->msg : "inflate");
    }
    if (zs->avail_in || in_len)
        return EINVAL_WHY("zlib stream is followed by %zu bytes", (size_t)zs->avail_in + in_len);
    return 0;
}

static int zlib_inflate(const unsigned char *in, size_t in_len, struct zout *o, char *why,
                        size_t why_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit(&zs) != Z_OK)
        return codec_fail(why, why_len, -ENOMEM, "zlib cannot start");
    int rc = zlib_loop(&zs, in, in_len, o, why, why_len);
    (void)inflateEnd(&zs); /* only fails for a stream that was never set up */
    return rc;
}

/* Inflate into a caller's buffer, which the stream must fill exactly. The size is known, so
 * libdeflate decodes it whole, 3.5x as fast as zlib here (1 MiB chunks of a gzip 4 field). */
static int zlib_fixed(const unsigned char *in, size_t in_len, unsigned char *out, size_t out_len,
                      char *why, size_t why_len)
{
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d)
        return codec_fail(why, why_len, -ENOMEM, "libdeflate cannot start");
    size_t used = 0, made = 0;
    enum libdeflate_result r =
        libdeflate_zlib_decompress_ex(d, in, in_len, out, out_len, &used, &made);
    libdeflate_free_decompressor(d);
    switch (r) {
    case LIBDEFLATE_SUCCESS:
        break;
    case LIBDEFLATE_SHORT_OUTPUT: /* not returned when made is asked for; kept for safety */
        return EINVAL_WHY("zlib stream decodes to fewer bytes than the chunk's %zu", out_len);
    case LIBDEFLATE_INSUFFICIENT_SPACE:
        return EINVAL_WHY("zlib stream decodes to more than %zu bytes", out_len);
    default: /* a truncated stream is bad data too: libdeflate cannot tell the two apart */
        return EINVAL_WHY("zlib stream is corrupt or truncated");
    }
    if (made != out_len)
        return EINVAL_WHY("zlib stream decodes to %zu bytes, the chunk has %zu", made, out_len);
    if (used != in_len)
        return EINVAL_WHY("zlib stream is followed by %zu bytes", in_len - used);
    return 0;
}

/* Inflate into a new buffer of at most max bytes, grown as the stream proves it needs it. */
static int zlib_alloc(const unsigned char *in, size_t in_len, size_t max, unsigned char **out,
                      size_t *out_len, char *why, size_t why_len)
{
    const size_t start = 64 * 1024;
    struct zout o = { NULL, 0, 0, max };
    o.cap = max < start ? max : start;
    if (o.cap == 0)
        return EINVAL_WHY("zlib output limit is 0 bytes");
    if (!(o.buf = malloc(o.cap)))
        return ENOMEM_WHY(o.cap);
    int rc = zlib_inflate(in, in_len, &o, why, why_len);
    if (rc) {
        free(o.buf);
        return rc;
    }
    *out = o.buf;
    *out_len = o.len;
    return 0;
}

/* ---- byte shuffle (numcodecs Shuffle, HDF5 filter 2) ---- */

/* Shuffled byte j * count + i is byte j of element i. */
static void byte_unshuffle(const unsigned char *in, unsigned char *out, size_t len, size_t itemsize)
{
    size_t count = len / itemsize;
    for (size_t j = 0; j < itemsize; j++) {
        const unsigned char *src = in + j * count;
        for (size_t i = 0; i < count; i++)
            out[i * itemsize + j] = src[i];
    }
}

static int unshuffle_check(size_t len, size_t itemsize, char *why, size_t why_len)
{
    if (itemsize == 0 || len % itemsize)
        return EINVAL_WHY("%zu shuffled bytes are not whole elements of %zu bytes", len, itemsize);
    return 0;
}

/* ---- fixed-size chunks ---- */

/* The shuffle still to undo before any decompression. HSDS stores shuffle-only chunks
 * unshuffled (its bug, spec §6.5); HDF5 files store them shuffled. */
static enum codec_shuffle initial_shuffle(const struct codec_spec *spec)
{
    if (!spec->compressed && spec->shuffle == CODEC_SHUFFLE_BYTE &&
        spec->source == CODEC_SOURCE_HSDS)
        return CODEC_SHUFFLE_NONE;
    return spec->shuffle;
}

/* Stage 2: data (decompressed, or the object itself) -> exactly out_len bytes. */
static int finish_fixed(enum codec_shuffle shuffle, size_t itemsize, const unsigned char *data,
                        size_t len, unsigned char *out, size_t out_len, char *why, size_t why_len)
{
    if (shuffle == CODEC_SHUFFLE_BIT)
        return bitshuffle_decode(data, len, itemsize, out, out_len, why, why_len);
    if (len != out_len)
        return EINVAL_WHY("chunk has %zu bytes, expected %zu", len, out_len);
    if (shuffle == CODEC_SHUFFLE_NONE) {
        memcpy(out, data, len);
        return 0;
    }
    int rc = unshuffle_check(len, itemsize, why, why_len);
    if (rc == 0)
        byte_unshuffle(data, out, len, itemsize);
    return rc;
}

/* A blosc frame holding a bitshuffle stream: decode it to a bounded buffer, then finish. */
static int blosc_bitshuffle_fixed(const struct codec_spec *spec, const unsigned char *in,
                                  size_t in_len, unsigned char *out, size_t out_len, char *why,
                                  size_t why_len)
{
    size_t n;
    int rc = blosc_check(in, in_len, BITSHUFFLE_HEADER_LEN, bitshuffle_stream_max(out_len), &n, why,
                         why_len);
    if (rc)
        return rc;
    unsigned char *tmp = malloc(n);
    if (!tmp)
        return ENOMEM_WHY(n);
    rc = blosc_run(in, tmp, n, why, why_len);
    if (rc == 0)
        rc = finish_fixed(CODEC_SHUFFLE_BIT, spec->itemsize, tmp, n, out, out_len, why, why_len);
    free(tmp);
    return rc;
}

static int blosc_fixed(const struct codec_spec *spec, const unsigned char *in, size_t in_len,
                       unsigned char *out, size_t out_len, char *why, size_t why_len)
{
    /* A byte shuffle was blosc's own business: HSDS considers it done after blosc. */
    if (spec->shuffle == CODEC_SHUFFLE_BIT)
        return blosc_bitshuffle_fixed(spec, in, in_len, out, out_len, why, why_len);
    size_t n;
    int rc = blosc_check(in, in_len, out_len, out_len, &n, why, why_len);
    return rc ? rc : blosc_run(in, out, n, why, why_len);
}

static int zlib_fixed_shuffled(const struct codec_spec *spec, const unsigned char *in,
                               size_t in_len, unsigned char *out, size_t out_len, char *why,
                               size_t why_len)
{
    unsigned char *tmp = NULL;
    size_t n = 0;
    int rc;
    if (spec->shuffle == CODEC_SHUFFLE_BIT) {
        rc = zlib_alloc(in, in_len, bitshuffle_stream_max(out_len), &tmp, &n, why, why_len);
    } else if (!(tmp = malloc(out_len))) {
        rc = ENOMEM_WHY(out_len);
    } else {
        n = out_len;
        rc = zlib_fixed(in, in_len, tmp, out_len, why, why_len);
    }
    if (rc == 0)
        rc = finish_fixed(spec->shuffle, spec->itemsize, tmp, n, out, out_len, why, why_len);
    free(tmp);
    return rc;
}

static int compressed_fixed(const struct codec_spec *spec, const unsigned char *in, size_t in_len,
                            unsigned char *out, size_t out_len, char *why, size_t why_len)
{
    if (looks_like_blosc(in, in_len))
        return blosc_fixed(spec, in, in_len, out, out_len, why, why_len);
    if (!spec->zlib_fallback)
        return EINVAL_WHY("not a blosc frame");
    if (spec->shuffle == CODEC_SHUFFLE_NONE)
        return zlib_fixed(in, in_len, out, out_len, why, why_len);
    return zlib_fixed_shuffled(spec, in, in_len, out, out_len, why, why_len);
}

static int args_check(const struct codec_spec *spec, const void *in, size_t in_len, const void *out,
                      char *why, size_t why_len)
{
    if (!spec || !in || !out)
        return EINVAL_WHY("missing argument");
    if (in_len == 0)
        return EINVAL_WHY("empty chunk object");
    return 0;
}

int codec_is_copy(const struct codec_spec *spec)
{
    return spec && !spec->compressed && initial_shuffle(spec) == CODEC_SHUFFLE_NONE;
}

int codec_decode(const struct codec_spec *spec, const void *in, size_t in_len, void *out,
                 size_t out_len, char *why, size_t why_len)
{
    int rc = args_check(spec, in, in_len, out, why, why_len);
    if (rc)
        return rc;
    if (out_len == 0)
        return EINVAL_WHY("chunk size is 0");
    if (spec->compressed)
        return compressed_fixed(spec, in, in_len, out, out_len, why, why_len);
    return finish_fixed(initial_shuffle(spec), spec->itemsize, in, in_len, out, out_len, why,
                        why_len);
}

/* ---- variable-length chunks: sizes known only from the stream, at most max ---- */

/* Stage 2 into a new buffer of at most max bytes. data may be a buffer of ours (*owned):
 * when nothing is left to undo it becomes the result instead of being copied. */
static int finish_alloc(enum codec_shuffle shuffle, size_t itemsize, const unsigned char *data,
                        size_t len, unsigned char **owned, size_t max, unsigned char **out,
                        size_t *out_len, char *why, size_t why_len)
{
    size_t n = len;
    if (shuffle == CODEC_SHUFFLE_BIT) {
        int rc = bitshuffle_total(data, len, &n, why, why_len);
        if (rc)
            return rc;
    }
    if (n > max)
        return EINVAL_WHY("chunk decodes to %zu bytes, more than the limit %zu", n, max);
    if (shuffle == CODEC_SHUFFLE_NONE && owned && *owned) {
        *out = *owned;
        *owned = NULL;
        *out_len = n;
        return 0;
    }
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf)
        return ENOMEM_WHY(n);
    int rc = finish_fixed(shuffle, itemsize, data, len, buf, n, why, why_len);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *out_len = n;
    return 0;
}

/* Stage 1 for a compressed chunk: a new buffer of at most max bytes (freed by the caller,
 * also on failure). */
static int decompress_alloc(const struct codec_spec *spec, int blosc, const unsigned char *in,
                            size_t in_len, size_t max, unsigned char **data, size_t *len, char *why,
                            size_t why_len)
{
    if (blosc) {
        size_t n;
        int rc = blosc_check(in, in_len, 1, max, &n, why, why_len);
        if (rc)
            return rc;
        if (!(*data = malloc(n)))
            return ENOMEM_WHY(n);
        *len = n;
        return blosc_run(in, *data, n, why, why_len);
    }
    if (!spec->zlib_fallback)
        return EINVAL_WHY("not a blosc frame");
    return zlib_alloc(in, in_len, max, data, len, why, why_len);
}

int codec_decode_alloc(const struct codec_spec *spec, const void *in, size_t in_len, size_t max,
                       unsigned char **out, size_t *out_len, char *why, size_t why_len)
{
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    int rc = args_check(spec, in, in_len, out, why, why_len);
    if (rc == 0 && !out_len)
        rc = EINVAL_WHY("missing argument");
    if (rc)
        return rc;
    enum codec_shuffle shuffle = initial_shuffle(spec);
    if (!spec->compressed)
        return finish_alloc(shuffle, spec->itemsize, in, in_len, NULL, max, out, out_len, why,
                            why_len);
    int blosc = looks_like_blosc(in, in_len);
    if (blosc && shuffle == CODEC_SHUFFLE_BYTE)
        shuffle = CODEC_SHUFFLE_NONE; /* blosc undoes its own byte shuffle */
    /* a bitshuffle stream inside the compression may be larger than what it decodes to */
    size_t limit = shuffle == CODEC_SHUFFLE_BIT ? bitshuffle_stream_max(max) : max;
    unsigned char *data = NULL;
    size_t len = 0;
    rc = decompress_alloc(spec, blosc, in, in_len, limit, &data, &len, why, why_len);
    if (rc == 0)
        rc = finish_alloc(shuffle, spec->itemsize, data, len, &data, max, out, out_len, why,
                          why_len);
    free(data);
    return rc;
}
