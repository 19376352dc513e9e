/* zarr: see include/h5osfs/zarr/zarr.h. The view's cache of trees, paths in a tree, chunks. */
#include "zarr_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/clock.h"
#include <zlib.h>

#include "h5osfs/schema/pool.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/why.h"

#define TREES_PRUNE_AT 64
#define VLEN_CHUNK_MAX (1u << 30) /* a decoded vlen chunk: HSDS caps items at 1 MB each */
#define ZGROUP_TEXT "{\"zarr_format\": 2}"

struct zarr_view {
    struct store *store;
    const char *bucket; /* linked layouts name files of this bucket (the caller's string) */
    double ttl;
    pthread_mutex_t lock; /* guards trees and every tree's refs */
    struct strmap *trees; /* root id -> struct zarr_tree */
};

int zarr_view_new(struct store *store, const char *bucket_name, double ttl, struct zarr_view **out)
{
    struct zarr_view *v = calloc(1, sizeof *v);
    if (v && (v->trees = strmap_new()) != NULL && pthread_mutex_init(&v->lock, NULL) == 0) {
        v->store = store;
        v->bucket = bucket_name;
        v->ttl = ttl;
        *out = v;
        return 0;
    }
    if (v)
        strmap_free(v->trees, NULL);
    free(v);
    return -ENOMEM;
}

static void tree_drop(void *value)
{
    struct zarr_tree *t = value;
    if (--t->refs == 0) /* under the lock, or at the end */
        zarr_tree_free(t);
}

struct store *zarr_view_store(const struct zarr_view *v)
{
    return v->store;
}

void zarr_view_free(struct zarr_view *v)
{
    if (!v)
        return;
    strmap_free(v->trees, tree_drop);
    pthread_mutex_destroy(&v->lock);
    free(v);
}

void zarr_tree_release(struct zarr_view *v, struct zarr_tree *t)
{
    pthread_mutex_lock(&v->lock);
    int last = --t->refs == 0;
    pthread_mutex_unlock(&v->lock);
    if (last)
        zarr_tree_free(t);
}

static int drop_expired(const char *key, void *value, void *ctx)
{
    (void)key;
    struct zarr_tree *t = value;
    if (t->expires > *(double *)ctx)
        return 0;
    tree_drop(t);
    return 1;
}

void zarr_forget(struct zarr_view *v, const char *root_id)
{
    pthread_mutex_lock(&v->lock);
    struct zarr_tree *t = strmap_remove(v->trees, root_id);
    int last = t && --t->refs == 0;
    pthread_mutex_unlock(&v->lock);
    if (last)
        zarr_tree_free(t);
}

/* The tree of the domain with root root_id (a reference): cached, or built now. Two readers
 * may build it at once; the later one's stays. */
int zarr_tree_get(struct zarr_view *v, const char *domain, const char *root_id,
                  struct zarr_tree **out)
{
    double now = clock_monotonic();
    pthread_mutex_lock(&v->lock);
    struct zarr_tree *t = strmap_get(v->trees, root_id);
    if (t && t->expires > now)
        t->refs++;
    else
        t = NULL;
    pthread_mutex_unlock(&v->lock);
    if (t) {
        *out = t;
        return 0;
    }
    int rc = zarr_tree_build(v->store, v->bucket, domain, root_id, &t);
    if (rc != 0)
        return rc;
    t->refs = 1;
    if (v->ttl > 0) {
        struct zarr_tree *old = NULL;
        pthread_mutex_lock(&v->lock);
        if (strmap_count(v->trees) >= TREES_PRUNE_AT)
            strmap_filter(v->trees, drop_expired, &now);
        t->expires = now + v->ttl;
        if (strmap_put(v->trees, root_id, t, (void **)&old) == 0)
            t->refs++; /* caching is an optimisation: not kept when memory runs out */
        int last_old = old && --old->refs == 0;
        pthread_mutex_unlock(&v->lock);
        if (last_old)
            zarr_tree_free(old);
    }
    *out = t;
    return 0;
}

/* ---- paths in a tree ---- */

static struct zarr_node *kid_named(const struct zarr_node *n, const char *name, size_t len)
{
    for (size_t i = 0; i < n->n_kids; i++)
        if (strlen(n->kids[i]->name) == len && memcmp(n->kids[i]->name, name, len) == 0)
            return n->kids[i];
    return NULL;
}

/* The node inner names, or the node holding the file it names (*file: its last part). */
static int find(const struct zarr_tree *t, const char *inner, struct zarr_node **node,
                const char **file)
{
    struct zarr_node *n = t->top;
    *file = NULL;
    while (*inner) {
        const char *slash = strchr(inner, '/');
        size_t len = slash ? (size_t)(slash - inner) : strlen(inner);
        struct zarr_node *kid = n->array ? NULL : kid_named(n, inner, len);
        if (!kid) {
            if (slash)
                return -ENOENT;
            *file = inner;
            break;
        }
        n = kid;
        inner = slash ? slash + 1 : "";
    }
    *node = n;
    return 0;
}

/* The chunk named name (a copy): 0, -ENOENT (not stored: Zarr reads the fill value). */
static int chunk_lookup(struct store *store, const char *domain, struct zarr_array *a,
                        const char *name, struct zarr_chunk *out, int want_size)
{
    uint64_t idx[HJSON_DIMS_MAX];
    if (zarr_parse_index(a, name, '.', idx) != 0)
        return -ENOENT;
    pthread_mutex_lock(&a->lock);
    int rc = zarr_settle(store, domain, a); /* how its chunks are served: fixed from here on */
    struct zarr_chunk *c = rc == 0 ? strmap_get(a->chunks, name) : NULL;
    if (rc == 0 && !c)
        rc = -ENOENT;
    if (rc == 0 && want_size && !c->ranged && c->size == STORE_SIZE_UNKNOWN) {
        struct store_stat st;
        rc = store_head(store, c->key, &st);
        if (rc == 0)
            c->size = st.size;
        else if (rc != -ENOENT && rc != -ENOMEM)
            rc = -EIO;
    }
    if (rc == 0)
        *out = *c;
    pthread_mutex_unlock(&a->lock);
    return rc;
}

/* ---- stat, list, read ---- */

static int is_metadata_name(const struct zarr_tree *t, const struct zarr_node *n, const char *file)
{
    return strcmp(file, ".zattrs") == 0 || strcmp(file, n->array ? ".zarray" : ".zgroup") == 0 ||
           (n == t->top && strcmp(file, ZARR_CONSOLIDATED) == 0);
}

/* The text of metadata file `file` of node n (malloc'd): 0, -ENOENT (no such file), -EIO,
 * -ENOMEM. A .zarray needs its array settled (its compressor), which may read a chunk. */
static int metadata_file(struct zarr_view *v, const char *domain, const struct zarr_tree *t,
                         struct zarr_node *n, const char *file, char **text, size_t *len)
{
    const char *fixed = NULL;
    if (!is_metadata_name(t, n, file))
        return -ENOENT;
    if (strcmp(file, ZARR_CONSOLIDATED) == 0)
        return zarr_consolidated(v->store, domain, n, text, len);
    if (strcmp(file, ".zattrs") == 0)
        fixed = n->zattrs;
    else if (!n->array)
        fixed = ZGROUP_TEXT;
    if (fixed) {
        *len = strlen(fixed);
        return (*text = strdup(fixed)) ? 0 : -ENOMEM;
    }
    pthread_mutex_lock(&n->array->lock);
    int rc = zarr_settle(v->store, domain, n->array);
    if (rc == 0)
        rc = zarr_meta_zarray(n->array, 0, text, len);
    pthread_mutex_unlock(&n->array->lock);
    return rc;
}

static int is_fill_chunk(const struct zarr_array *a, const char *name);

/* A fill chunk's size as stat shows it: the decoded size (a Blosc frame is smaller; its reads
 * are direct and end where its bytes do). */
static int fill_size(const struct zarr_array *a, uint64_t *size)
{
    *size = a->serve == ZARR_SERVE_VLEN ? (a->elements + 1) * 4 : a->chunk_bytes;
    return 0;
}

int zarr_stat(struct zarr_view *v, const char *domain, const char *root_id, const char *inner,
              enum zarr_kind *kind, uint64_t *size)
{
    struct zarr_tree *t;
    struct zarr_node *n;
    const char *file;
    char *text = NULL;
    size_t len = 0;
    struct zarr_chunk c;
    int rc = zarr_tree_get(v, domain, root_id, &t);
    if (rc != 0)
        return rc;
    rc = find(t, inner, &n, &file);
    *kind = file ? ZARR_FILE : ZARR_DIR;
    *size = 0;
    if (rc == 0 && file && is_metadata_name(t, n, file)) {
        rc = metadata_file(v, domain, t, n, file, &text, &len);
        *size = len;
        free(text);
    } else if (rc == 0 && file) {
        rc = n->array ? chunk_lookup(v->store, domain, n->array, file, &c, 1) : -ENOENT;
        if (rc == 0)
            *size = n->array->serve == ZARR_SERVE_PLAIN ? n->array->chunk_bytes : c.size;
        else if (rc == -ENOENT && n->array && is_fill_chunk(n->array, file))
            rc = fill_size(n->array, size);
    }
    zarr_tree_release(v, t);
    return rc;
}

void zarr_entries_free(struct zarr_entry *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++)
        free(e[i].name);
    free(e);
}

struct gather {
    struct zarr_entry *e;
    size_t n, cap;
    int rc; /* of gather_chunk, which must not return it (strmap_filter drops on non-zero) */
};

static int gather_add(struct gather *g, const char *name, enum zarr_kind kind)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        struct zarr_entry *e = realloc(g->e, cap * sizeof *e);
        if (!e)
            return -ENOMEM;
        g->e = e;
        g->cap = cap;
    }
    if (!(g->e[g->n].name = strdup(name)))
        return -ENOMEM;
    g->e[g->n++].kind = kind;
    return 0;
}

static int gather_chunk(const char *key, void *value, void *ctx)
{
    (void)value;
    struct gather *g = ctx;
    if (g->rc == 0)
        g->rc = gather_add(g, key, ZARR_FILE);
    return 0;
}

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const struct zarr_entry *)a)->name, ((const struct zarr_entry *)b)->name);
}

static int list_node(struct zarr_view *v, const char *domain, const struct zarr_node *top,
                     struct zarr_node *n, struct gather *g)
{
    int rc = gather_add(g, ".zattrs", ZARR_FILE);
    if (rc == 0)
        rc = gather_add(g, n->array ? ".zarray" : ".zgroup", ZARR_FILE);
    if (rc == 0 && n == top)
        rc = gather_add(g, ZARR_CONSOLIDATED, ZARR_FILE);
    for (size_t i = 0; rc == 0 && i < n->n_kids; i++)
        rc = gather_add(g, n->kids[i]->name, ZARR_DIR);
    if (rc != 0 || !n->array)
        return rc;
    pthread_mutex_lock(&n->array->lock);
    rc = zarr_list_chunks(v->store, domain, n->array);
    if (rc == 0)
        strmap_filter(n->array->chunks, gather_chunk, g);
    pthread_mutex_unlock(&n->array->lock);
    return rc != 0 ? rc : g->rc;
}

int zarr_list(struct zarr_view *v, const char *domain, const char *root_id, const char *inner,
              struct zarr_entry **out, size_t *n)
{
    struct zarr_tree *t;
    struct zarr_node *node;
    const char *file;
    struct gather g = { 0 };
    int rc = zarr_tree_get(v, domain, root_id, &t);
    if (rc != 0)
        return rc;
    rc = find(t, inner, &node, &file);
    if (rc == 0 && file)
        rc = is_metadata_name(t, node, file) ||
                     (node->array && zarr_parse_index(node->array, file, '.',
                                                      (uint64_t[HJSON_DIMS_MAX]){ 0 }) == 0)
                 ? -ENOTDIR
                 : -ENOENT;
    if (rc == 0)
        rc = list_node(v, domain, t->top, node, &g);
    zarr_tree_release(v, t);
    if (rc != 0) {
        zarr_entries_free(g.e, g.n);
        return rc;
    }
    if (g.n > 1)
        qsort(g.e, g.n, sizeof *g.e, compare_entries);
    *out = g.e;
    *n = g.n;
    return 0;
}

/* ---- chunk bodies ---- */

/* A Blosc-1 frame as HSDS and numcodecs sniff it (spec §6.5), whose header says it holds
 * exactly want bytes and is exactly len bytes long. */
static int blosc_frame_of(const unsigned char *b, size_t len, size_t want, int *whole)
{
    if (len < 16 || b[0] != 2 || b[3] == 0)
        return 0;
    uint32_t nbytes =
        (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
    uint32_t cbytes =
        (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 | (uint32_t)b[15] << 24;
    *whole = nbytes == want && cbytes == len;
    return 1;
}

/* A vlen chunk decoded (spec §6.3) -> numcodecs' vlen-utf8: item count, then the same items. */
static int vlen_frame(const struct zarr_array *a, const unsigned char *in, size_t len,
                      unsigned char **out, size_t *out_len, char *why, size_t why_len)
{
    size_t at = 0;
    for (uint64_t i = 0; i < a->elements; i++) {
        if (len - at < 4)
            return snprintf(why, why_len, "ends inside item %llu", (unsigned long long)i), -EINVAL;
        int32_t n = (int32_t)((uint32_t)in[at] | (uint32_t)in[at + 1] << 8 |
                              (uint32_t)in[at + 2] << 16 | (uint32_t)in[at + 3] << 24);
        at += 4;
        if (n < 0 || (size_t)n > len - at)
            return snprintf(why, why_len, "item %llu has a bad length", (unsigned long long)i),
                   -EINVAL;
        at += (size_t)n;
    }
    if (at != len || a->elements > UINT32_MAX)
        return snprintf(why, why_len, "%zu bytes after its items", len - at), -EINVAL;
    if (!(*out = malloc(len + 4)))
        return -ENOMEM;
    for (int k = 0; k < 4; k++)
        (*out)[k] = (unsigned char)(a->elements >> (8 * k));
    memcpy(*out + 4, in, len);
    *out_len = len + 4;
    return 0;
}

int zarr_passes_through(const struct zarr_array *a, const unsigned char *head, size_t len)
{
    int whole, frame = blosc_frame_of(head, len, a->chunk_bytes, &whole);
    return a->serve == ZARR_SERVE_RAW || (a->serve == ZARR_SERVE_BLOSC && frame) ||
           (a->serve == ZARR_SERVE_ZLIB && !frame && zarr_is_zlib_stream(head, len));
}

/* plain's bytes shuffled as HDF5's (and numcodecs') byte shuffle lays them out. */
static unsigned char *shuffled(const unsigned char *plain, size_t len, size_t itemsize)
{
    unsigned char *out = malloc(len ? len : 1);
    size_t count = itemsize ? len / itemsize : 0;
    for (size_t i = 0; out && i < count; i++)
        for (size_t j = 0; j < itemsize; j++)
            out[j * count + i] = plain[i * itemsize + j];
    return out;
}

/* A decoded chunk as a zlib stream, shuffled first when the dataset shuffles. */
static int zlib_encode(const struct zarr_array *a, const unsigned char *plain, unsigned char **out,
                       size_t *len)
{
    unsigned char *src = a->spec.shuffle == CODEC_SHUFFLE_BYTE
                             ? shuffled(plain, a->chunk_bytes, a->itemsize)
                             : (unsigned char *)plain;
    uLongf cap = compressBound((uLong)a->chunk_bytes);
    int rc = src && (*out = malloc(cap)) ? 0 : -ENOMEM;
    if (rc == 0 && compress2(*out, &cap, src, (uLong)a->chunk_bytes, a->spec.level) != Z_OK) {
        free(*out);
        rc = -ENOMEM; /* zlib fails only for memory with a sound level and buffer */
    }
    if (rc == 0)
        *len = cap;
    if (src != plain)
        free(src);
    return rc;
}

/* The chunk file's bytes from the object's (taken over in buf). */
static int serve_chunk(const struct zarr_array *a, struct store_buf *buf, unsigned char **out,
                       size_t *len, char *why, size_t why_len)
{
    int whole = 0, frame = blosc_frame_of(buf->data, buf->len, a->chunk_bytes, &whole), rc;
    unsigned char *plain = NULL;
    size_t plain_len = 0;
    if ((a->serve == ZARR_SERVE_RAW && buf->len == a->chunk_bytes) ||
        (a->serve == ZARR_SERVE_BLOSC && frame && whole) ||
        (a->serve == ZARR_SERVE_ZLIB && !frame && zarr_is_zlib_stream(buf->data, buf->len))) {
        *out = buf->data; /* passed through: the stored bytes, unchanged */
        *len = buf->len;
        buf->data = NULL;
        return 0;
    }
    if (a->serve == ZARR_SERVE_RAW || (a->serve == ZARR_SERVE_BLOSC && frame && !whole))
        return snprintf(why, why_len, "%zu bytes, not a whole chunk", buf->len), -EINVAL;
    if (a->serve == ZARR_SERVE_VLEN) {
        rc = codec_decode_alloc(&a->spec, buf->data, buf->len, VLEN_CHUNK_MAX, &plain, &plain_len,
                                why, why_len);
        if (rc == 0)
            rc = vlen_frame(a, plain, plain_len, out, len, why, why_len);
        free(plain);
        return rc;
    }
    if (!(plain = malloc(a->chunk_bytes ? a->chunk_bytes : 1)))
        return -ENOMEM;
    rc = codec_decode(&a->spec, buf->data, buf->len, plain, a->chunk_bytes, why, why_len);
    if (rc == 0 && a->serve == ZARR_SERVE_PLAIN) {
        *out = plain; /* no Zarr codec reads these as stored */
        *len = a->chunk_bytes;
        return 0;
    }
    if (rc == 0 && a->serve == ZARR_SERVE_ZLIB) /* a Blosc frame among zlib streams */
        rc = zlib_encode(a, plain, out, len);
    else if (rc == 0) /* a zlib stream among Blosc frames */
        rc = codec_encode(&a->spec, plain, a->chunk_bytes, out, len, why, why_len);
    free(plain);
    return rc;
}

/* A chunk not stored, of an array whose fill_value is null: the fill value's chunk, in the
 * array's codec. */
static int fill_chunk(const struct zarr_array *a, unsigned char **out, size_t *len, char *why,
                      size_t why_len)
{
    if (a->serve == ZARR_SERVE_VLEN) {
        if (a->elements > UINT32_MAX || !(*out = calloc(a->elements + 1, 4)))
            return -ENOMEM;
        for (int k = 0; k < 4; k++)
            (*out)[k] = (unsigned char)(a->elements >> (8 * k));
        *len = (size_t)(a->elements + 1) * 4;
        return 0;
    }
    unsigned char *plain = malloc(a->chunk_bytes ? a->chunk_bytes : 1);
    if (!plain)
        return -ENOMEM;
    for (uint64_t i = 0; i < a->elements; i++)
        memcpy(plain + i * a->itemsize, a->fill_elem, a->itemsize);
    if (a->serve != ZARR_SERVE_BLOSC && a->serve != ZARR_SERVE_ZLIB) {
        *out = plain;
        *len = a->chunk_bytes;
        return 0;
    }
    int rc = a->serve == ZARR_SERVE_ZLIB
                 ? zlib_encode(a, plain, out, len)
                 : codec_encode(&a->spec, plain, a->chunk_bytes, out, len, why, why_len);
    free(plain);
    return rc;
}

/* Is name a chunk of the grid that is a file of fill values when it is not stored? */
static int is_fill_chunk(const struct zarr_array *a, const char *name)
{
    uint64_t idx[HJSON_DIMS_MAX];
    return a->fill_chunks && zarr_parse_index(a, name, '.', idx) == 0;
}

static int read_stored_chunk(struct zarr_view *v, const char *domain, const struct zarr_array *a,
                             const struct zarr_chunk *c, unsigned char **out, size_t *len)
{
    struct store_buf buf;
    char why[ZARR_WHY_MAX] = "";
    size_t max = a->serve == ZARR_SERVE_VLEN ? VLEN_CHUNK_MAX : 2 * a->chunk_bytes + 4096;
    int rc = c->ranged && c->size > max ? -EFBIG
             : c->ranged                ? store_get_range(v->store, c->key, c->off, c->size, &buf)
                                        : store_get(v->store, c->key, max, &buf);
    if (rc == 0 && c->ranged && buf.len != c->size) {
        snprintf(why, sizeof why, "linked file ends inside %llu+%llu", (unsigned long long)c->off,
                 (unsigned long long)c->size);
        store_buf_free(&buf);
        rc = -EIO;
    }
    /* a version's pool file is the one it kept, by its etag (pool.h) */
    if (rc == 0 && c->ranged && a->link_etag && strcmp(c->key, a->link_key) == 0 &&
        strcmp(buf.etag, a->link_etag) != 0) {
        why_set(why, sizeof why,
                "the pool file is not the one the version kept (etag %.64s, "
                "kept %.64s)",
                buf.etag, a->link_etag);
        store_buf_free(&buf);
        rc = -EIO;
    }
    /* a pool object's bytes are those its key names, or none (pool.h) */
    if (rc == 0 && a->link == ZARR_LINK_POOL &&
        schema_pool_bytes_check(c->key, buf.data, buf.len, buf.etag, why, sizeof why) != 0) {
        store_buf_free(&buf);
        rc = -EIO;
    }
    if (rc == -EFBIG)
        snprintf(why, sizeof why, "larger than %zu bytes", max);
    if (rc == -ENOENT && c->ranged) { /* a missing file is no missing chunk: never fill */
        snprintf(why, sizeof why, "the linked file is missing");
        rc = -EIO;
    }
    if (rc == 0) {
        rc = serve_chunk(a, &buf, out, len, why, sizeof why);
        store_buf_free(&buf);
    }
    if (rc == -ENOMEM || rc == -ENOENT || rc == 0)
        return rc;
    if (c->ranged)
        log_warn("%s: zarr view: linked chunk %s@%llu+%llu of %s: %s: EIO", domain, c->key,
                 (unsigned long long)c->off, (unsigned long long)c->size, a->id,
                 *why ? why : strerror(-rc));
    else
        log_warn("%s: zarr view: chunk %s: %s: EIO", domain, c->key, *why ? why : strerror(-rc));
    return -EIO;
}

int zarr_read_chunk(struct zarr_view *v, const char *domain, struct zarr_array *a, const char *name,
                    unsigned char **out, size_t *len)
{
    struct zarr_chunk c;
    char why[ZARR_WHY_MAX] = "";
    int rc = chunk_lookup(v->store, domain, a, name, &c, 0);
    if (rc == 0)
        return read_stored_chunk(v, domain, a, &c, out, len);
    if (rc != -ENOENT || !is_fill_chunk(a, name))
        return rc;
    rc = fill_chunk(a, out, len, why, sizeof why);
    if (rc == -EINVAL)
        log_warn("%s: zarr view: fill chunk of %s: %s: EIO", domain, a->id, why);
    return rc == -EINVAL ? -EIO : rc;
}

int zarr_read(struct zarr_view *v, const char *domain, const char *root_id, const char *inner,
              unsigned char **data, size_t *len)
{
    struct zarr_tree *t;
    struct zarr_node *n;
    const char *file;
    int rc = zarr_tree_get(v, domain, root_id, &t);
    if (rc != 0)
        return rc;
    rc = find(t, inner, &n, &file);
    if (rc == 0 && !file)
        rc = -EISDIR;
    else if (rc == 0 && is_metadata_name(t, n, file))
        rc = metadata_file(v, domain, t, n, file, (char **)data, len);
    else if (rc == 0)
        rc = n->array ? zarr_read_chunk(v, domain, n->array, file, data, len) : -ENOENT;
    zarr_tree_release(v, t);
    return rc;
}
