/* zarr_refs: a domain's Zarr view as a kerchunk reference set (version 1, issue 28 §2): the
 * metadata inline, each chunk a reference to its object in the store, for readers with no
 * mount (fsspec's "reference" file system). */
#include "zarr_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/h5json/h5value.h"
#include "h5osfs/util/log.h"

struct refs {
    struct zarr_view *v;
    const char *domain;
    const char *base; /* what a key is appended to: "s3://bucket/prefix/", "file:///dir/" */
    json_t *map;
    int rc; /* of add_chunk, which strmap_filter must not see */
};

static int put_text(json_t *map, const char *dir, const char *name, const char *text)
{
    char key[4096];
    int n = snprintf(key, sizeof key, "%s%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof key)
        return -ENAMETOOLONG;
    return json_object_set_new(map, key, json_string(text)) == 0 ? 0 : -ENOMEM;
}

struct chunk_ctx {
    struct refs *r;
    const char *dir;
    const struct zarr_array *a;
    char **edges; /* names of edge chunks, checked after the lock is let go */
    size_t n_edges;
};

/* Does chunk idx stick out of the dataset? h5osfs's ingest stores such chunks re-encoded
 * (Blosc), whatever the dataset's wholly inside ones are (zlib streams kept from the file). */
static int is_edge(const struct zarr_array *a, const char *name)
{
    uint64_t idx[HJSON_DIMS_MAX];
    if (zarr_parse_index(a, name, '.', idx) != 0)
        return 0;
    for (int k = 0; k < a->rank; k++)
        if ((idx[k] + 1) * a->chunk[k] > a->shape[k])
            return 1;
    return 0;
}

static int add_chunk(const char *name, void *value, void *ctx)
{
    struct chunk_ctx *c = ctx;
    const struct zarr_chunk *chunk = value;
    char key[4096], *url = NULL;
    if (c->r->rc != 0)
        return 0;
    int n = snprintf(key, sizeof key, "%s%s", c->dir, name);
    if (n < 0 || (size_t)n >= sizeof key || asprintf(&url, "%s%s", c->r->base, chunk->key) < 0) {
        c->r->rc = -ENOMEM;
        return 0;
    }
    /* a linked chunk: its byte range of the file, which fsspec reads with a ranged GET */
    json_t *ref = chunk->ranged
                      ? json_pack("[s, I, I]", url, (json_int_t)chunk->off, (json_int_t)chunk->size)
                      : json_pack("[s]", url);
    if (json_object_set_new(c->r->map, key, ref) != 0)
        c->r->rc = -ENOMEM;
    free(url);
    /* a linked file's chunks are all as HDF5 wrote them: no edge chunk was re-encoded */
    if (c->r->rc == 0 && c->a->serve != ZARR_SERVE_RAW && zarr_hsds_chunks(c->a->link) &&
        is_edge(c->a, name)) {
        char **more = realloc(c->edges, (c->n_edges + 1) * sizeof *more);
        if (more)
            c->edges = more;
        if (!more || !(c->edges[c->n_edges++] = strdup(name)))
            c->r->rc = -ENOMEM;
    }
    return 0;
}

/* An edge chunk whose object is not in the array's codec: its bytes as the view serves them,
 * inline ("base64:..."), where a reference to the object would fail the reader's decode. */
static int check_edge(struct refs *r, struct zarr_array *a, const char *dir, const char *name)
{
    char key[4096];
    struct store_buf head;
    unsigned char *bytes = NULL;
    char *text = NULL, *inline_text = NULL;
    size_t len;
    snprintf(key, sizeof key, "%s%s", dir, name); /* add_chunk made it: it fits */
    const char *url = json_string_value(json_array_get(json_object_get(r->map, key), 0));
    if (!url)
        return 0;
    int rc = store_get_range(zarr_view_store(r->v), url + strlen(r->base), 0, 16, &head);
    if (rc != 0)
        return rc == -ENOMEM ? rc : -EIO;
    int passes = zarr_passes_through(a, head.data, head.len);
    store_buf_free(&head);
    if (passes)
        return 0;
    rc = zarr_read_chunk(r->v, r->domain, a, name, &bytes, &len);
    if (rc == 0)
        rc = h5value_base64_encode(bytes, len, &text);
    if (rc == 0 && asprintf(&inline_text, "base64:%s", text) < 0)
        rc = -ENOMEM;
    if (rc == 0 && json_object_set_new(r->map, key, json_string(inline_text)) != 0)
        rc = -ENOMEM;
    free(bytes);
    free(text);
    free(inline_text);
    return rc;
}

/* A version's pool file is no longer the one it kept (its etag, pool.h): references to it
 * would hand readers, who check nothing, bytes the version never held. Asked once per
 * array, when the references are made. 1 changed or gone (logged), 0 the same, or the
 * store's -errno (the references are not made now: a failed HEAD proves nothing). */
static int kept_file_changed(struct refs *r, const struct zarr_array *a)
{
    struct store_stat st;
    if (!a->link_etag || !a->link_key)
        return 0;
    int rc = store_head(zarr_view_store(r->v), a->link_key, &st);
    if (rc == 0 && strcmp(st.etag, a->link_etag) == 0)
        return 0;
    if (rc != 0 && rc != -ENOENT)
        return rc;
    log_warn("%s: kerchunk references: array %s left out: its pool file %s is not the one "
             "the version kept (%s)",
             r->domain, a->id, a->link_key, rc ? "gone" : st.etag);
    return 1;
}

/* An array whose chunk files are its objects: its metadata and one reference per chunk. Arrays
 * served decoded have no object to point at and are left out, and so are those of a pool file
 * replaced since its version was kept. */
static int add_array(struct refs *r, struct zarr_node *n, const char *dir)
{
    struct zarr_array *a = n->array;
    char *zarray = NULL;
    size_t len;
    pthread_mutex_lock(&a->lock);
    int rc = zarr_settle(zarr_view_store(r->v), r->domain, a);
    int stored =
        a->serve == ZARR_SERVE_RAW || a->serve == ZARR_SERVE_BLOSC || a->serve == ZARR_SERVE_ZLIB;
    int changed = rc == 0 && stored ? kept_file_changed(r, a) : 0;
    if (changed < 0)
        rc = changed == -ENOMEM ? changed : -EIO;
    if (changed)
        stored = 0;
    if (rc == 0 && stored)
        rc = zarr_meta_zarray(a, 1, &zarray, &len);
    if (rc == 0 && stored)
        rc = put_text(r->map, dir, ".zarray", zarray);
    if (rc == 0 && stored)
        rc = put_text(r->map, dir, ".zattrs", n->zattrs);
    struct chunk_ctx c = { .r = r, .dir = dir, .a = a };
    if (rc == 0 && stored)
        strmap_filter(a->chunks, add_chunk, &c);
    pthread_mutex_unlock(&a->lock);
    free(zarray);
    if (rc == 0)
        rc = r->rc;
    for (size_t i = 0; i < c.n_edges; i++) {
        if (rc == 0)
            rc = check_edge(r, a, dir, c.edges[i]);
        free(c.edges[i]);
    }
    free(c.edges);
    return rc;
}

static int add_node(struct refs *r, struct zarr_node *n, const char *dir, int depth)
{
    if (n->array)
        return add_array(r, n, dir);
    int rc = put_text(r->map, dir, ".zgroup", "{\"zarr_format\": 2}");
    if (rc == 0)
        rc = put_text(r->map, dir, ".zattrs", n->zattrs);
    for (size_t i = 0; rc == 0 && i < n->n_kids && depth < 256; i++) {
        char *sub;
        if (asprintf(&sub, "%s%s/", dir, n->kids[i]->name) < 0)
            return -ENOMEM;
        rc = add_node(r, n->kids[i], sub, depth + 1);
        free(sub);
    }
    return rc;
}

int zarr_refs(struct zarr_view *v, const char *domain, const char *root_id, const char *url_base,
              char **out, size_t *len)
{
    struct zarr_tree *t;
    int rc = zarr_tree_get(v, domain, root_id, &t);
    if (rc != 0)
        return rc;
    struct refs r = { .v = v, .domain = domain, .base = url_base, .map = json_object() };
    rc = r.map ? add_node(&r, t->top, "", 0) : -ENOMEM;
    zarr_tree_release(v, t);
    json_t *doc = rc == 0 ? json_pack("{s:i, s:o}", "version", 1, "refs", r.map) : NULL;
    if (rc != 0)
        json_decref(r.map);
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    if (rc == 0 && !text)
        rc = -ENOMEM;
    if (rc == 0) {
        *out = text;
        *len = strlen(text);
    }
    return rc;
}
