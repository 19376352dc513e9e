/* info: see include/h5osfs/commit/info.h. */
#include "h5osfs/commit/info.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/codec/codec.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/h5json/h5type.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/strmap.h"
#include "info_int.h"

#define KEY_PARTS_MAX 6 /* db/A-B/d/xxxx/pN/i_j */
#define DATASET_JSON_MAX INFO_DATASET_JSON_MAX
#define ETAG_PREFIX 16 /* numpy "S16": the part of an ETag the md5_sum takes */

/* ---- object ids (idUtil.getObjId for the v2 keys below db/) ---- */

/* s split at '/' in place; max + 1 when it has more than max parts. */
static size_t split_key(char *s, char *parts[], size_t max)
{
    size_t n = 0;
    for (;;) {
        if (n == max)
            return max + 1;
        parts[n++] = s;
        char *slash = strchr(s, '/');
        if (!slash)
            return n;
        *slash = '\0';
        s = slash + 1;
    }
}

/* HSDS builds ids from the key's hex digits with the dashes left out. 0 or -EINVAL. */
static int append_undashed(char token[33], size_t *t, const char *s, size_t want)
{
    size_t start = *t;
    for (; *s; s++) {
        if (*s == '-')
            continue;
        if (*t == 32)
            return -EINVAL;
        token[(*t)++] = *s;
    }
    token[*t] = '\0';
    return *t - start == want ? 0 : -EINVAL;
}

/* The root group's id: its 16 digits, then the same rotated by 8 (§1.3). */
static int root_token(char token[33])
{
    for (int i = 0; i < 16; i++) {
        int rot = schema_hex_rot(token[i]);
        if (rot < 0)
            return -EINVAL;
        token[16 + i] = (char)rot;
    }
    token[32] = '\0';
    return 0;
}

/* Class letter, partition digits and chunk index of the object a key of 5 or 6 parts names. */
static int object_kind(char *parts[], size_t n, char *cls, const char **partition,
                       const char **coord)
{
    *partition = *coord = "";
    if (n == 6) {
        if (parts[2][0] != 'd' || parts[4][0] != 'p')
            return -EINVAL;
        *cls = 'c';
        *partition = parts[4] + 1;
        *coord = parts[5];
    } else if (strcmp(parts[2], "g") == 0 && strcmp(parts[4], ".group.json") == 0) {
        *cls = 'g';
    } else if (strcmp(parts[2], "t") == 0 && strcmp(parts[4], ".datatype.json") == 0) {
        *cls = 't';
    } else if (strcmp(parts[2], "d") == 0) {
        *cls = strcmp(parts[4], ".dataset.json") == 0 ? 'd' : 'c';
        *coord = *cls == 'c' ? parts[4] : "";
    } else {
        return -EINVAL;
    }
    return 0;
}

int info_object_id(const char *key, char *out, size_t len)
{
    char copy[STORE_KEY_MAX + 1], *parts[KEY_PARTS_MAX], token[33], cls = 'g';
    const char *partition = "", *coord = "";
    size_t t = 0;
    if (strncmp(key, "db/", 3) != 0 || strlen(key) >= sizeof copy)
        return -EINVAL;
    strcpy(copy, key);
    size_t n = split_key(copy, parts, KEY_PARTS_MAX);
    int rc =
        n >= 3 && n <= KEY_PARTS_MAX && n != 4 ? append_undashed(token, &t, parts[1], 16) : -EINVAL;
    if (rc == 0 && n == 3)
        rc = strcmp(parts[2], ".group.json") == 0 ? root_token(token) : -EINVAL;
    else if (rc == 0)
        rc = append_undashed(token, &t, parts[3], 16) == 0
                 ? object_kind(parts, n, &cls, &partition, &coord)
                 : -EINVAL;
    if (rc != 0)
        return rc;
    int w = snprintf(out, len, "%c%s-%.8s-%.8s-%.4s-%.6s-%.6s%s%s", cls, partition, token,
                     token + 8, token + 16, token + 20, token + 26, *coord ? "_" : "", coord);
    if (w < 0 || (size_t)w >= len)
        return -EINVAL;
    return schema_id_version(out) == 2 ? 0 : -EINVAL;
}

/* ---- the tally (scanRootCallback) ---- */

struct dset_sum {
    char id[SCHEMA_ID_BUF];
    double mtime; /* 0: none seen (HSDS writes the int 0) */
    uint64_t chunks, allocated, logical, linked, linked_chunks;
    const json_t *doc;
};

struct checksum {
    char *id;
    char prefix[ETAG_PREFIX]; /* NUL-padded, as numpy's S16 holds it */
};

struct tally {
    double mtime;
    uint64_t groups, datatypes, chunks, allocated, metadata, linked_chunks, linked, logical;
    struct dset_sum *dsets;
    size_t n_dsets, cap_dsets;
    struct strmap *index; /* dataset id -> position + 1 in dsets */
    struct checksum *sums;
    size_t n_sums, cap_sums;
    char md5[33]; /* "" when not every object had an ETag */
};

static void tally_free(struct tally *t)
{
    for (size_t i = 0; i < t->n_sums; i++)
        free(t->sums[i].id);
    free(t->sums);
    free(t->dsets);
    strmap_free(t->index, NULL);
}

static struct dset_sum *dataset_of(struct tally *t, const char *dset_id)
{
    uintptr_t at = (uintptr_t)strmap_get(t->index, dset_id);
    if (at)
        return &t->dsets[at - 1];
    void *grown = grow_array(t->dsets, &t->cap_dsets, t->n_dsets + 1, sizeof *t->dsets, 16);
    if (!grown)
        return NULL;
    t->dsets = grown;
    struct dset_sum *d = &t->dsets[t->n_dsets];
    memset(d, 0, sizeof *d);
    snprintf(d->id, sizeof d->id, "%s", dset_id);
    if (strmap_put(t->index, dset_id, (void *)(uintptr_t)(t->n_dsets + 1), NULL) != 0)
        return NULL;
    t->n_dsets++;
    return d;
}

static int add_checksum(struct tally *t, const char *id, const char *etag)
{
    void *grown = grow_array(t->sums, &t->cap_sums, t->n_sums + 1, sizeof *t->sums, 64);
    if (!grown)
        return -ENOMEM;
    t->sums = grown;
    struct checksum *c = &t->sums[t->n_sums];
    memset(c->prefix, 0, sizeof c->prefix);
    memcpy(c->prefix, etag, strnlen(etag, ETAG_PREFIX));
    c->id = strdup(id);
    if (!c->id)
        return -ENOMEM;
    t->n_sums++;
    return 0;
}

/* A chunk counts for its dataset, a dataset's JSON makes it known; 0 or -ENOMEM. */
static int tally_dataset(struct tally *t, const char *id, const struct info_object *o)
{
    char dset_id[SCHEMA_ID_BUF];
    const char *dash = strchr(id, '-');
    snprintf(dset_id, sizeof dset_id, "d-%.36s", dash + 1); /* chunkUtil.getDatasetId */
    struct dset_sum *d = dataset_of(t, dset_id);
    if (!d)
        return -ENOMEM;
    if (o->mtime > d->mtime)
        d->mtime = o->mtime;
    if (id[0] == 'c') {
        d->chunks++;
        d->allocated += o->size;
    } else {
        d->doc = o->doc;
    }
    return 0;
}

static int tally_object(struct tally *t, const struct info_object *o)
{
    char id[STORE_KEY_MAX + 1];
    if (info_object_id(o->key, id, sizeof id) != 0)
        return 0; /* isS3ObjKey: not an object HSDS counts */
    if (*o->etag && add_checksum(t, id, o->etag) != 0)
        return -ENOMEM;
    if (o->mtime > t->mtime)
        t->mtime = o->mtime;
    if (id[0] == 'c') {
        t->chunks++;
        t->allocated += o->size;
    } else {
        t->metadata += o->size;
    }
    t->groups += id[0] == 'g';
    t->datatypes += id[0] == 't';
    return id[0] == 'c' || id[0] == 'd' ? tally_dataset(t, id, o) : 0;
}

/* ---- a dataset's logical and linked bytes (updateDatasetInfo) ---- */

static int mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b && a > UINT64_MAX / b)
        return -EOVERFLOW;
    *out = a * b;
    return 0;
}

static int add_u64(uint64_t *sum, uint64_t v)
{
    if (*sum > UINT64_MAX - v)
        return -EOVERFLOW;
    *sum += v;
    return 0;
}

static int json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -EINVAL;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* getShapeDims: 1 with the dims (a scalar is [1]), 0 for a null space, or -EINVAL. */
static int shape_dims(const json_t *shape, const json_t **dims, int *scalar)
{
    *dims = NULL;
    *scalar = 0;
    const char *cls = hjson_text(json_object_get(shape, "class"));
    if (json_is_integer(shape) || json_is_array(shape)) {
        *dims = shape;
        return 1;
    }
    if (!cls)
        return json_is_string(shape) ? 0 : -EINVAL;
    if (strcmp(cls, "H5S_NULL") == 0)
        return 0;
    *scalar = strcmp(cls, "H5S_SCALAR") == 0;
    *dims = json_object_get(shape, "dims");
    return *scalar || json_is_array(*dims) ? 1 : -EINVAL;
}

/* The product of dims (an integer, a list of them, or NULL for a scalar). */
static int dims_product(const json_t *dims, uint64_t *out)
{
    uint64_t v;
    *out = 1;
    if (!dims)
        return 0;
    if (json_is_integer(dims))
        return json_u64(dims, out);
    for (size_t i = 0; i < json_array_size(dims); i++) {
        int rc = json_u64(json_array_get(dims, i), &v);
        if (rc == 0)
            rc = mul_u64(*out, v, out);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* getDatasetLayout: the creation properties' layout first, else the stored one. */
const json_t *info_dataset_layout(const json_t *doc)
{
    const json_t *cp = json_object_get(json_object_get(doc, "creationProperties"), "layout");
    return cp ? cp : json_object_get(doc, "layout");
}

/* H5D_CONTIGUOUS_REF: the linked range cut into layout-dims pieces, each counted whole. */
static int contiguous_ref(const json_t *doc, const json_t *dims, uint64_t item_size,
                          struct dset_sum *d)
{
    const json_t *lay_dims = json_object_get(info_dataset_layout(doc), "dims");
    if (!lay_dims)
        lay_dims = json_object_get(json_object_get(doc, "layout"), "dims");
    size_t rank = json_array_size(lay_dims);
    uint64_t chunks = 1, chunk_size = item_size, extent, piece;
    if (!json_is_array(dims) || json_array_size(dims) != rank || rank == 0)
        return -EINVAL;
    for (size_t i = 0; i < rank; i++) {
        int rc = json_u64(json_array_get(dims, i), &extent);
        if (rc == 0)
            rc = json_u64(json_array_get(lay_dims, i), &piece);
        if (rc == 0 && piece == 0)
            rc = -EINVAL;
        if (rc == 0)
            rc = mul_u64(chunks, extent / piece + (extent % piece != 0), &chunks);
        if (rc == 0)
            rc = mul_u64(chunk_size, piece, &chunk_size);
        if (rc != 0)
            return rc;
    }
    d->linked_chunks = chunks;
    return mul_u64(chunk_size, chunks, &d->linked);
}

/* H5D_CHUNKED_REF: every listed chunk's [offset, size]. */
static int chunked_ref(const json_t *layout, struct dset_sum *d)
{
    json_t *chunks = json_object_get(layout, "chunks");
    uint64_t size;
    for (void *it = json_object_iter(chunks); it; it = json_object_iter_next(chunks, it)) {
        int rc = json_u64(json_array_get(json_object_iter_value(it), 1), &size);
        if (rc == 0)
            rc = add_u64(&d->linked, size);
        if (rc != 0)
            return rc;
        d->linked_chunks++;
    }
    return 0;
}

/* The JSON of dataset id among the listed objects (NULL if it has none). */
static const json_t *listed_doc(const struct info_scan *s, const char *id)
{
    char key[STORE_KEY_MAX + 1];
    if (schema_obj_key(id, key, sizeof key) != 0)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (s->objects[i].doc && strcmp(s->objects[i].key, key) == 0)
            return s->objects[i].doc;
    return NULL;
}

/* Where a chunk table entry keeps the linked chunk's size: its second field, an integer. */
struct entry_size {
    size_t itemsize, offset;
    unsigned nbytes;
    int is_signed, big_endian;
};

static int entry_size_field(const json_t *type, struct entry_size *e)
{
    const json_t *fields = json_object_get(type, "fields");
    const json_t *size_type = json_object_get(json_array_get(fields, 1), "type");
    const char *base =
        hjson_text(json_is_object(size_type) ? json_object_get(size_type, "base") : size_type);
    char sign, order[3];
    unsigned bits;
    if (h5type_stored_size(type, &e->itemsize) != 0 || !base ||
        h5type_stored_size(json_object_get(json_array_get(fields, 0), "type"), &e->offset) != 0 ||
        sscanf(base, "H5T_STD_%c%u%2s", &sign, &bits, order) != 3 ||
        (bits != 8 && bits != 16 && bits != 32 && bits != 64) || e->offset + bits / 8 > e->itemsize)
        return -EINVAL;
    e->nbytes = bits / 8;
    e->is_signed = sign == 'I';
    e->big_endian = strcmp(order, "BE") == 0;
    return 0;
}

/* int(e[1]) > 0 of one entry: its size, or 0. */
static uint64_t entry_size(const struct entry_size *e, const unsigned char *entry)
{
    const unsigned char *p = entry + e->offset;
    uint64_t v = 0;
    for (unsigned i = 0; i < e->nbytes; i++)
        v |= (uint64_t)p[e->big_endian ? i : e->nbytes - 1 - i] << (8 * (e->nbytes - 1 - i));
    int negative = e->is_signed && (p[e->big_endian ? 0 : e->nbytes - 1] & 0x80);
    return negative ? 0 : v;
}

struct table {
    const char *id;
    struct entry_size entry;
    struct codec_spec codec;
    size_t chunk_bytes; /* a whole decoded chunk of the table */
    unsigned char *buf;
};

/* The table's geometry, or 1 where HSDS gives up on it (linked bytes stay 0). */
static int table_open(const json_t *table, size_t rank, struct table *t)
{
    char why[200];
    const json_t *lay = info_dataset_layout(table), *lay_dims = json_object_get(lay, "dims");
    const json_t *tdims;
    int scalar;
    uint64_t elements;
    const char *cls = hjson_text(json_object_get(lay, "class"));
    if (shape_dims(json_object_get(table, "shape"), &tdims, &scalar) != 1 || scalar ||
        json_array_size(tdims) != rank || !cls || strcmp(cls, "H5D_CHUNKED") != 0 ||
        !json_is_array(lay_dims))
        return 1;
    int rc = entry_size_field(json_object_get(table, "type"), &t->entry);
    if (rc == 0)
        rc = codec_spec_from_filters(
            json_object_get(json_object_get(table, "creationProperties"), "filters"),
            t->entry.itemsize, 0, CODEC_SOURCE_HSDS, &t->codec, why, sizeof why);
    if (rc == 0)
        rc = dims_product(lay_dims, &elements);
    if (rc == 0 && (elements > SIZE_MAX / t->entry.itemsize ||
                    elements * t->entry.itemsize > DATASET_JSON_MAX))
        rc = -EINVAL;
    t->chunk_bytes = rc == 0 ? elements * t->entry.itemsize : 0;
    t->buf = rc == 0 ? malloc(t->chunk_bytes ? t->chunk_bytes : 1) : NULL;
    return rc == 0 && !t->buf ? -ENOMEM : rc;
}

/* Every entry of one stored chunk of the table, padding of edge chunks included. */
static int table_chunk(struct table *t, const struct info_object *o, struct dset_sum *d)
{
    char why[200];
    if (!o->bytes)
        return -ENOENT;
    int rc = codec_decode(&t->codec, o->bytes, o->len, t->buf, t->chunk_bytes, why, sizeof why);
    for (size_t at = 0; rc == 0 && at < t->chunk_bytes; at += t->entry.itemsize) {
        uint64_t size = entry_size(&t->entry, t->buf + at);
        if (size) {
            rc = add_u64(&d->linked, size);
            d->linked_chunks++;
        }
    }
    return rc;
}

static int is_chunk_of(const char *key, const char *dset_id)
{
    char id[STORE_KEY_MAX + 1];
    return info_object_id(key, id, sizeof id) == 0 && id[0] == 'c' &&
           strncmp(strchr(id, '-') + 1, dset_id + 2, 36) == 0;
}

/* H5D_CHUNKED_REF_INDIRECT: the entries of the chunk table with a size > 0. */
static int chunk_table(const struct info_scan *s, const json_t *doc, const json_t *dims,
                       struct dset_sum *d)
{
    struct table t = { .id = hjson_text(json_object_get(info_dataset_layout(doc), "chunk_table")) };
    if (!t.id)
        return 0;
    const json_t *table = listed_doc(s, t.id);
    if (!table)
        return -ENOENT;
    int rc = table_open(table, json_array_size(dims), &t);
    for (size_t i = 0; rc == 0 && i < s->n; i++)
        if (is_chunk_of(s->objects[i].key, t.id))
            rc = table_chunk(&t, &s->objects[i], d);
    free(t.buf);
    return rc == 1 ? 0 : rc;
}

static int linked_bytes(const struct info_scan *s, const json_t *doc, const json_t *dims,
                        int variable, uint64_t item_size, struct dset_sum *d)
{
    const char *cls = hjson_text(json_object_get(info_dataset_layout(doc), "class"));
    if (!cls)
        return 0;
    if (strcmp(cls, "H5D_CONTIGUOUS_REF") == 0)
        return variable ? -EINVAL : contiguous_ref(doc, dims, item_size, d);
    if (strcmp(cls, "H5D_CHUNKED_REF") == 0)
        return chunked_ref(info_dataset_layout(doc), d);
    if (strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0)
        return chunk_table(s, doc, dims, d);
    return 0;
}

static int dataset_bytes(const struct info_scan *s, struct dset_sum *d)
{
    const json_t *doc = d->doc, *dims = NULL, *type = json_object_get(d->doc, "type");
    int scalar = 0;
    size_t item_size = 0;
    if (!doc)
        return -ENOENT; /* chunks without a dataset: HSDS's scan stops there */
    int rc = json_object_get(doc, "shape")
                 ? shape_dims(json_object_get(doc, "shape"), &dims, &scalar)
                 : 0;
    if (rc <= 0 || !type || !json_object_get(doc, "layout"))
        return rc; /* HSDS skips these, keeping 0 */
    int variable = h5type_stored_size(type, &item_size) != 0;
    uint64_t elements;
    rc = dims_product(scalar ? NULL : dims, &elements);
    if (rc == 0 && variable)
        d->logical = d->allocated;
    else if (rc == 0)
        rc = mul_u64(elements, item_size, &d->logical);
    return rc == 0 ? linked_bytes(s, doc, dims, variable, item_size, d) : rc;
}

static int tally_datasets(struct tally *t, const struct info_scan *s)
{
    for (size_t i = 0; i < t->n_dsets; i++) {
        struct dset_sum *d = &t->dsets[i];
        int rc = dataset_bytes(s, d);
        if (rc == 0)
            rc = add_u64(&t->logical, d->logical);
        if (rc == 0)
            rc = add_u64(&t->linked, d->linked);
        if (rc == 0)
            rc = add_u64(&t->linked_chunks, d->linked_chunks);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- md5_sum: MD5 of the ETags' first 16 bytes, in object id order ---- */

static int by_id(const void *a, const void *b)
{
    return strcmp(((const struct checksum *)a)->id, ((const struct checksum *)b)->id);
}

static int tally_md5(struct tally *t)
{
    t->md5[0] = '\0';
    if (t->n_sums != t->groups + t->datatypes + t->n_dsets + t->chunks)
        return 0; /* HSDS: "skipping domain checksum calculation" */
    if (t->n_sums)
        qsort(t->sums, t->n_sums, sizeof *t->sums, by_id);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_md5(), NULL) == 1;
    for (size_t i = 0; ok && i < t->n_sums; i++)
        ok = EVP_DigestUpdate(ctx, t->sums[i].prefix, ETAG_PREFIX) == 1;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 16;
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; ok && i < len; i++)
        snprintf(t->md5 + 2 * i, 3, "%02x", md[i]);
    return ok ? 0 : -ENOMEM;
}

/* ---- json.dumps ---- */

/* Numbers and strings go through hjson's emitter, so the summary formats them exactly as every
 * other JSON the daemon writes (Python's repr for floats, json.dumps's escapes). The dynbuf's
 * error is sticky: the appends are checked once, at the end. */

/* A time from the listing: Python's int for HSDS's S3 driver, float for its POSIX one; the
 * int 0 where HSDS saw none. */
static void put_time(struct dynbuf *b, double t, int whole_seconds)
{
    if (t <= 0)
        dynbuf_appendc(b, '0');
    else if (whole_seconds)
        dynbuf_appendf(b, "%lld", (long long)t);
    else
        hjson_dump_real(b, t);
}

/* -EINVAL when s is not UTF-8. */
static int put_string(struct dynbuf *b, const char *s)
{
    return hjson_dump_string(b, s, strlen(s)) == -EINVAL ? -EINVAL : 0;
}

static void put_dataset(struct dynbuf *b, const struct dset_sum *d, int whole_seconds)
{
    dynbuf_appends(b, ": {\"lastModified\": ");
    put_time(b, d->mtime, whole_seconds);
    dynbuf_appendf(b,
                   ", \"num_chunks\": %llu, \"allocated_bytes\": %llu, \"logical_bytes\": %llu, "
                   "\"linked_bytes\": %llu, \"num_linked_chunks\": %llu}",
                   (unsigned long long)d->chunks, (unsigned long long)d->allocated,
                   (unsigned long long)d->logical, (unsigned long long)d->linked,
                   (unsigned long long)d->linked_chunks);
}

/* The members in scanRoot's order: its dict's insertion order. */
static int put_summary(struct dynbuf *b, const struct tally *t, const struct info_scan *s)
{
    dynbuf_appends(b, "{\"lastModified\": ");
    put_time(b, t->mtime, s->whole_seconds);
    dynbuf_appendf(b, ", \"num_groups\": %llu, \"num_datatypes\": %llu, \"datasets\": {",
                   (unsigned long long)t->groups, (unsigned long long)t->datatypes);
    int rc = 0;
    for (size_t i = 0; i < t->n_dsets; i++) {
        dynbuf_appends(b, i ? ", " : "");
        if (put_string(b, t->dsets[i].id) != 0)
            rc = -EINVAL;
        put_dataset(b, &t->dsets[i], s->whole_seconds);
    }
    dynbuf_appendf(b,
                   "}, \"num_chunks\": %llu, \"allocated_bytes\": %llu, \"metadata_bytes\": %llu, "
                   "\"num_linked_chunks\": %llu, \"linked_bytes\": %llu, \"logical_bytes\": %llu, "
                   "\"bucket\": ",
                   (unsigned long long)t->chunks, (unsigned long long)t->allocated,
                   (unsigned long long)t->metadata, (unsigned long long)t->linked_chunks,
                   (unsigned long long)t->linked, (unsigned long long)t->logical);
    if (put_string(b, s->bucket ? s->bucket : "") != 0)
        rc = -EINVAL;
    dynbuf_appends(b, ", \"scan_start\": ");
    hjson_dump_real(b, s->scan_start);
    if (*t->md5)
        dynbuf_appendf(b, ", \"md5_sum\": \"%s\"", t->md5);
    dynbuf_appends(b, ", \"scan_complete\": ");
    hjson_dump_real(b, s->scan_complete);
    dynbuf_appendc(b, '}');
    return rc;
}

static int write_text(const struct tally *t, const struct info_scan *s, char **out)
{
    struct dynbuf b = DYNBUF_INIT(DYNBUF_NO_MAX);
    int rc = put_summary(&b, t, s);
    if (rc != 0) {
        dynbuf_free(&b);
        *out = NULL;
        return rc;
    }
    return dynbuf_take(&b, out, NULL);
}

int info_text(const struct info_scan *scan, char **out)
{
    struct tally t = { .index = strmap_new() };
    int rc = t.index ? 0 : -ENOMEM;
    *out = NULL;
    for (size_t i = 0; rc == 0 && i < scan->n; i++)
        rc = tally_object(&t, &scan->objects[i]);
    if (rc == 0)
        rc = tally_datasets(&t, scan);
    if (rc == 0)
        rc = tally_md5(&t);
    if (rc == 0)
        rc = write_text(&t, scan, out);
    tally_free(&t);
    return rc;
}
