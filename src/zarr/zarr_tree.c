/* zarr_tree: a domain's groups and datasets, read from the store, as the Zarr view's tree. */
#include "zarr_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/pool.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/util/why.h"

#define OBJECT_JSON_MAX (16u << 20) /* far more than any group or dataset JSON */
#define TREE_DEPTH_MAX 256
#define ZARR_TREE_REQUESTS 16 /* objects fetched at once while a tree is built */

/* What a build keeps while it walks: the ids seen, and the name each dataset was first reached
 * by (what dimension scales are called). */
struct walk {
    struct store *store;
    const char *bucket;  /* linked layouts' file_uri names files of it */
    const char *root_id; /* and of no domain but this root's */
    const char *domain;
    const json_t *root_group;    /* its "h5osfs" member records the version's pool file */
    struct strmap *seen;         /* group ids walked (hard links may form cycles) */
    struct strmap *names;        /* dataset id -> its first link name (owned) */
    char pool_ok[SCHEMA_ID_BUF]; /* the version pool the domain may name, once checked */
};

/* netCDF-4 writes a dimension that is no variable as a dimension scale with this NAME; netCDF
 * readers (xarray) show no variable for it, and neither does the view. */
#define NETCDF_DIM_ONLY "This is a netCDF dimension but not a netCDF variable"

static void array_free(struct zarr_array *a)
{
    if (!a)
        return;
    json_decref(a->meta);
    free(a->fill_elem);
    free(a->link_key);
    free(a->link_etag);
    free(a->pool_bucket);
    strmap_free(a->chunks, free);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

static void node_free(struct zarr_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n_kids; i++)
        node_free(n->kids[i]);
    free(n->kids);
    array_free(n->array);
    json_decref(n->dset);
    free(n->name);
    free(n->zattrs);
    free(n);
}

void zarr_tree_free(struct zarr_tree *t)
{
    if (t)
        node_free(t->top);
    free(t);
}

/* The object id's JSON: 0, -EINVAL (logged: malformed), or the store's -errno (logged). */
static int load_object(struct walk *w, const char *id, json_t **out)
{
    char key[STORE_KEY_MAX + 1], why[ZARR_WHY_MAX] = "";
    struct store_buf buf;
    int rc = schema_obj_key(id, key, sizeof key);
    if (rc != 0) {
        log_warn("%s: zarr view: object id %s is not valid: left out", w->domain, id);
        return -EINVAL;
    }
    if ((rc = store_get(w->store, key, OBJECT_JSON_MAX, &buf)) != 0) {
        if (rc != -ENOMEM)
            log_warn("%s: zarr view: %s: %s: left out", w->domain, key, strerror(-rc));
        return rc;
    }
    *out = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    if (!*out && errno == ENOMEM)
        return -ENOMEM;
    if (!*out || !json_is_object(*out)) {
        log_warn("%s: zarr view: %s: %s: left out", w->domain, key,
                 *out ? "not a JSON object" : why);
        json_decref(*out);
        return -EINVAL;
    }
    return 0;
}

static int add_kid(struct zarr_node *parent, struct zarr_node *kid)
{
    struct zarr_node **k = realloc(parent->kids, (parent->n_kids + 1) * sizeof *k);
    if (!k)
        return -ENOMEM;
    parent->kids = k;
    k[parent->n_kids++] = kid;
    return 0;
}

static struct zarr_node *node_new(const char *name)
{
    struct zarr_node *n = calloc(1, sizeof *n);
    if (n && !(n->name = strdup(name))) {
        free(n);
        n = NULL;
    }
    return n;
}

/* Zarr's own names, and names a directory cannot have, cannot be links of the view. */
static int name_usable(const char *name)
{
    return *name && !hjson_unloadable(name) && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
           strcmp(name, ".zarray") != 0 && strcmp(name, ".zgroup") != 0 &&
           strcmp(name, ".zattrs") != 0 && schema_name_valid(name, strlen(name)) == 1;
}

static int remember_name(struct walk *w, const char *id, const char *name)
{
    char *copy;
    if (strmap_get(w->names, id))
        return 0;
    if (!(copy = strdup(name)) || strmap_put(w->names, id, copy, NULL) != 0) {
        free(copy);
        return -ENOMEM;
    }
    return 0;
}

static int is_dimension_only(const json_t *dset)
{
    const json_t *name =
        json_object_get(json_object_get(json_object_get(dset, "attributes"), "NAME"), "value");
    const char *s = hjson_text(name);
    return s && strncmp(s, NETCDF_DIM_ONLY, strlen(NETCDF_DIM_ONLY)) == 0;
}

/* A linked dataset is read from the file the image reads it from (refs.c linked_file_check): a
 * version's from the file kept with it (any other may have changed since the commit), the
 * current domain's from a pool file only where its root is a version's (ref mode). *in_pool:
 * that file is in the domain's pool (checked: its pool kept in w->pool_ok, as a pooled
 * table's is); etag: what its version kept for it ("" none). */
static int linked_file_refused(struct walk *w, const json_t *dset, int *in_pool,
                               char etag[SCHEMA_POOL_ETAG_BUF], char *why, size_t why_len)
{
    const json_t *lay = json_object_get(json_object_get(dset, "creationProperties"), "layout");
    const struct schema_fetch fetch = { w->store, store_get_bytes };
    const char *key = NULL;
    int ok = 1;
    *in_pool = 0;
    etag[0] = '\0';
    if (schema_is_versions_path(w->domain) != 1)
        key = schema_pool_file_uri_key(hjson_text(json_object_get(lay, "file_uri")), w->bucket);
    else
        ok = schema_version_linked_ok(lay, w->bucket, w->root_id, &key);
    if (key) {
        int rc =
            schema_pool_file_check(w->domain, w->root_id, key, &fetch, w->pool_ok, why, why_len);
        *in_pool = rc == 0;
        return rc == 0 ? schema_pool_file_recorded(w->root_group, key, etag, why, why_len) : rc;
    }
    if (ok)
        return 0;
    why_set(why, why_len, "a version's linked layout names a file that is not its own");
    return -EINVAL;
}

/* A dataset reached by link name: a node, or nothing (logged) when the view leaves it out. */
/* dset: its JSON (taken over), or rc: why it could not be loaded (logged). */
static int add_dataset(struct walk *w, struct zarr_node *parent, const char *name, const char *id,
                       json_t *dset, int rc)
{
    char why[ZARR_WHY_MAX] = "", etag[SCHEMA_POOL_ETAG_BUF] = "";
    int in_pool = 0;
    if (rc != 0)
        return rc == -ENOMEM ? rc : 0;
    if ((rc = remember_name(w, id, name)) != 0 || is_dimension_only(dset)) {
        json_decref(dset);
        return rc;
    }
    struct zarr_node *n = node_new(name);
    struct zarr_array *a = n ? calloc(1, sizeof *a) : NULL;
    if (!a || pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        node_free(n);
        json_decref(dset);
        return -ENOMEM;
    }
    n->array = a;
    n->dset = dset;
    if (!(a->chunks = strmap_new())) {
        node_free(n);
        return -ENOMEM;
    }
    snprintf(a->id, sizeof a->id, "%s", id);
    rc = zarr_meta_array(dset, a, why, sizeof why);
    if (rc == 0 && a->link == ZARR_LINK_POOL)
        rc = zarr_pooled_array(w->store, w->domain, w->root_id, w->bucket, dset, a, w->pool_ok, why,
                               sizeof why);
    else if (rc == 0 && a->link != ZARR_LINK_NONE &&
             (rc = linked_file_refused(w, dset, &in_pool, etag, why, sizeof why)) == 0)
        rc = zarr_linked_array(dset, a, w->bucket, w->root_id, in_pool, why, sizeof why);
    if (rc == 0 && etag[0] && !(a->link_etag = strdup(etag)))
        rc = -ENOMEM;
    if (rc == -EINVAL)
        log_info("%s: zarr view: dataset %s (%s) left out: %s", w->domain, name, id, why);
    if (rc == 0 && (rc = add_kid(parent, n)) == 0)
        return 0;
    node_free(n);
    return rc == -ENOMEM ? rc : 0;
}

static int compare_nodes(const void *a, const void *b)
{
    return strcmp((*(struct zarr_node *const *)a)->name, (*(struct zarr_node *const *)b)->name);
}

/* The id of a link the view follows ('g' or 'd' in *cls), or NULL. */
static const char *followed(const char *name, const json_t *link, int *cls)
{
    const char *id = hjson_text(json_object_get(link, "id"));
    *cls = id ? schema_id_class(id) : -EINVAL;
    if (*cls != 'g' && *cls != 'd')
        return NULL; /* soft, external links and committed types have no place in Zarr */
    return name_usable(name) ? id : NULL;
}

/* The groups reached at one depth of the walk, with their JSON (owned). */
struct level {
    struct zarr_node **nodes;
    json_t **groups;
    size_t n, cap;
};

static int level_add(struct level *lv, struct zarr_node *node, json_t *group)
{
    if (lv->n == lv->cap) {
        size_t cap = lv->cap ? 2 * lv->cap : 16;
        struct zarr_node **nodes = realloc(lv->nodes, cap * sizeof *nodes);
        if (nodes)
            lv->nodes = nodes;
        json_t **groups = nodes ? realloc(lv->groups, cap * sizeof *groups) : NULL;
        if (!groups)
            return -ENOMEM;
        lv->groups = groups;
        lv->cap = cap;
    }
    lv->nodes[lv->n] = node;
    lv->groups[lv->n++] = group;
    return 0;
}

static void level_free(struct level *lv)
{
    for (size_t i = 0; i < lv->n; i++)
        json_decref(lv->groups[i]);
    free(lv->nodes);
    free(lv->groups);
    *lv = (struct level){ 0 };
}

/* A link of a group of the level, to load with the others of the level. */
struct pending {
    struct zarr_node *parent;
    const char *name; /* a key of the parent's JSON: alive while the level is */
    const char *id;
    int cls;
    json_t *doc;
    int rc;
};

struct fetch {
    struct walk *w;
    struct pending *items;
    size_t n, cap;
};

static void fetch_one(void *ctx, size_t i)
{
    struct fetch *f = ctx;
    f->items[i].rc = load_object(f->w, f->items[i].id, &f->items[i].doc);
}

/* The links of every group of the level the view follows, each group once (hard links may
 * reach one twice, or form a cycle: Zarr has no links, the first one reached shows it). */
static int collect_links(struct walk *w, const struct level *lv, struct fetch *f)
{
    for (size_t g = 0; g < lv->n; g++) {
        const char *name;
        json_t *link;
        int cls;
        json_object_foreach(json_object_get(lv->groups[g], "links"), name, link)
        {
            const char *id = followed(name, link, &cls);
            if (!id && (cls == 'g' || cls == 'd'))
                log_info("%s: zarr view: link \"%s\" left out: not a name Zarr can use", w->domain,
                         hjson_unloadable(name) ? name + 2 : name);
            if (!id || (cls == 'g' && strmap_get(w->seen, id)))
                continue;
            if (cls == 'g' && strmap_put(w->seen, id, (void *)1, NULL) != 0)
                return -ENOMEM;
            if (f->n == f->cap) {
                size_t cap = f->cap ? 2 * f->cap : 64;
                struct pending *items = realloc(f->items, cap * sizeof *items);
                if (!items)
                    return -ENOMEM;
                f->items = items;
                f->cap = cap;
            }
            f->items[f->n++] = (struct pending){ lv->nodes[g], name, id, cls, NULL, 0 };
        }
    }
    return 0;
}

/* The level's links made nodes: datasets done, groups into the next level. */
static int place_links(struct walk *w, struct fetch *f, struct level *next)
{
    int rc = 0;
    for (size_t i = 0; i < f->n; i++) {
        struct pending *p = &f->items[i];
        json_t *doc = p->doc;
        p->doc = NULL;
        if (rc != 0) {
            json_decref(doc);
            continue;
        }
        if (p->cls == 'd') { /* add_dataset takes doc over */
            rc = add_dataset(w, p->parent, p->name, p->id, doc, p->rc);
            continue;
        }
        if (p->rc != 0) { /* logged */
            rc = p->rc == -ENOMEM ? p->rc : 0;
            continue;
        }
        struct zarr_node *n = node_new(p->name);
        rc = !n ? -ENOMEM : add_kid(p->parent, n);
        if (rc != 0)
            node_free(n);
        if (rc == 0 && (rc = level_add(next, n, doc)) == 0)
            doc = NULL;
        json_decref(doc);
    }
    return rc;
}

/*
 * The tree below the root, one depth at a time: the links of all the groups of a depth are
 * loaded together, ZARR_TREE_REQUESTS at a time (a walk of many small objects pays the store's
 * latency, not its bandwidth: over S3, 500 datasets in 50 groups are two rounds, not 50).
 */
static int walk_tree(struct walk *w, struct zarr_node *top, json_t *root)
{
    struct level cur = { 0 }, next = { 0 };
    int rc = level_add(&cur, top, json_incref(root));
    if (rc != 0)
        json_decref(root);
    for (int depth = 0; rc == 0 && cur.n > 0 && depth <= TREE_DEPTH_MAX; depth++) {
        struct fetch f = { .w = w };
        for (size_t g = 0; rc == 0 && g < cur.n; g++)
            rc = zarr_meta_attrs(json_object_get(cur.groups[g], "attributes"), NULL, 0,
                                 &cur.nodes[g]->zattrs, &cur.nodes[g]->zattrs_len);
        if (rc == 0)
            rc = collect_links(w, &cur, &f);
        if (rc == 0)
            pfor(f.n, ZARR_TREE_REQUESTS, fetch_one, &f);
        if (rc == 0)
            rc = place_links(w, &f, &next);
        for (size_t i = 0; i < f.n; i++)
            json_decref(f.items[i].doc);
        free(f.items);
        for (size_t g = 0; g < cur.n; g++)
            if (cur.nodes[g]->n_kids > 1)
                qsort(cur.nodes[g]->kids, cur.nodes[g]->n_kids, sizeof *cur.nodes[g]->kids,
                      compare_nodes);
        level_free(&cur);
        cur = next;
        next = (struct level){ 0 };
    }
    level_free(&cur);
    level_free(&next);
    return rc;
}

/* ---- dimension scales -> _ARRAY_DIMENSIONS ---- */

static int is_dimension_scale(const json_t *attrs)
{
    const char *cls = hjson_text(json_object_get(json_object_get(attrs, "CLASS"), "value"));
    return cls && strcmp(cls, "DIMENSION_SCALE") == 0;
}

/* The id a DIMENSION_LIST entry names first: "datasets/d-..." or a bare id. */
static const char *scale_id(const json_t *entry)
{
    const json_t *ref = json_is_array(entry) ? json_array_get(entry, 0) : entry;
    const char *s = hjson_text(ref);
    if (s && strncmp(s, "datasets/", 9) == 0)
        s += 9;
    return s && schema_id_class(s) == 'd' ? s : NULL;
}

/* The names of a's dimensions from its dimension scales: 1, or 0 when it has none. */
static int dimension_names(struct walk *w, const struct zarr_node *n, const char **dims)
{
    const json_t *attrs = json_object_get(n->dset, "attributes");
    int rank = n->array->rank;
    if (is_dimension_scale(attrs) && rank == 1) {
        dims[0] = n->name;
        return 1;
    }
    const json_t *list = json_object_get(json_object_get(attrs, "DIMENSION_LIST"), "value");
    if (!json_is_array(list) || json_array_size(list) != (size_t)rank)
        return 0;
    for (int k = 0; k < rank; k++) {
        const char *id = scale_id(json_array_get(list, (size_t)k));
        if (!id || !(dims[k] = strmap_get(w->names, id)))
            return 0;
    }
    return 1;
}

/* netCDF's names for the dimensions of a dataset without scales, shared in its group: a
 * dimension takes the first phony dimension of its length and kind (unlimited or not) that it
 * does not use already. */
struct phony {
    uint64_t len[64];
    int unlimited[64];
    char name[64][24];
    int n;
};

static int phony_names(struct phony *p, const struct zarr_array *a, const char **dims)
{
    uint64_t used = 0; /* bits: phony dims this dataset took */
    for (int k = 0; k < a->rank; k++) {
        int j = 0;
        int unlimited = (a->unlimited >> k & 1) != 0;
        while (j < p->n &&
               (p->len[j] != a->shape[k] || p->unlimited[j] != unlimited || (used >> j & 1)))
            j++;
        if (j == p->n) {
            if (p->n == 64)
                return 0;
            p->len[j] = a->shape[k];
            p->unlimited[j] = unlimited;
            snprintf(p->name[j], sizeof p->name[j], "phony_dim_%d", j);
            p->n++;
        }
        used |= 1ull << j;
        dims[k] = p->name[j];
    }
    return 1;
}

static uint64_t grid_chunks(const struct zarr_array *a)
{
    uint64_t n = 1;
    for (int k = 0; k < a->rank; k++)
        n *= (a->shape[k] + a->chunk[k] - 1) / a->chunk[k];
    return n;
}

/*
 * xarray reads a Zarr fill_value as the variable's _FillValue and masks every value equal to
 * it; netCDF readers mask only where a _FillValue attribute says so. A dataset with dimensions
 * and no _FillValue gets fill_value null, so that open_zarr equals open_dataset: where the
 * chunks it has not stored then read as the fill value because they are files of it
 * (serve_fill: netCDF variables), or where it stores every chunk (datasets with netCDF's
 * phony dimensions, whose missing chunks stay missing files).
 */
static int drop_fill(struct walk *w, struct zarr_node *n, int serve_fill)
{
    struct zarr_array *a = n->array;
    char why[ZARR_WHY_MAX] = "";
    if (json_object_get(json_object_get(n->dset, "attributes"), "_FillValue"))
        return 0;
    int rc = serve_fill ? zarr_meta_fill_elem(n->dset, a, why, sizeof why)
                        : zarr_list_chunks(w->store, w->domain, a);
    if (rc != 0 || (!serve_fill && strmap_count(a->chunks) != grid_chunks(a)))
        return rc == -ENOMEM ? rc : 0;
    a->no_fill = 1;
    a->fill_chunks = serve_fill;
    return 0;
}

static int finish_array(struct walk *w, struct zarr_node *n, struct phony *p)
{
    const char *dims[HJSON_DIMS_MAX];
    int netcdf = n->array->rank == 0 || dimension_names(w, n, dims);
    int named = netcdf || phony_names(p, n->array, dims);
    int rc = zarr_meta_attrs(json_object_get(n->dset, "attributes"), named ? dims : NULL,
                             n->array->rank, &n->zattrs, &n->zattrs_len);
    if (rc == 0 && named)
        rc = drop_fill(w, n, netcdf);
    json_decref(n->dset);
    n->dset = NULL;
    return rc;
}

/* .zattrs with _ARRAY_DIMENSIONS for every dataset of the tree, group by group. */
static int finish_group(struct walk *w, struct zarr_node *g, int depth)
{
    struct phony p = { .n = 0 };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g->n_kids; i++)
        rc = g->kids[i]->array        ? finish_array(w, g->kids[i], &p)
             : depth < TREE_DEPTH_MAX ? finish_group(w, g->kids[i], depth + 1)
                                      : 0;
    return rc;
}

/* ---- every dataset's chunks from one listing of the domain ---- */

struct bulk {
    struct walk *w;
    struct strmap *arrays; /* ".../d/C-D-E/" -> struct zarr_array ** (NULL-ended) */
    size_t tree_len;       /* of "db/A-B/d/" */
};

static int bulk_add(struct strmap *arrays, struct zarr_array *a)
{
    char key[STORE_KEY_MAX + 1];
    if (schema_obj_key(a->id, key, sizeof key) != 0)
        return 0; /* cannot happen: the id was loaded by this key */
    strrchr(key, '/')[1] = '\0';
    struct zarr_array **list = strmap_get(arrays, key), **more;
    size_t n = 0;
    while (list && list[n])
        n++;
    if (!(more = realloc(list, (n + 2) * sizeof *more)))
        return -ENOMEM;
    more[n] = a;
    more[n + 1] = NULL;
    if (strmap_put(arrays, key, more, NULL) != 0) {
        if (!list)
            free(more);
        return -ENOMEM;
    }
    return 0;
}

static int bulk_collect(struct strmap *arrays, struct zarr_node *n, int depth)
{
    /* a linked dataset's chunks are in its layout, not among its objects */
    int rc = n->array && n->array->link == ZARR_LINK_NONE ? bulk_add(arrays, n->array) : 0;
    for (size_t i = 0; rc == 0 && i < n->n_kids && depth < TREE_DEPTH_MAX; i++)
        rc = bulk_collect(arrays, n->kids[i], depth + 1);
    return rc;
}

static int bulk_one(void *ctx, const char *key, const struct store_stat *st)
{
    struct bulk *b = ctx;
    char prefix[STORE_KEY_MAX + 1];
    const char *end = strlen(key) > b->tree_len ? strchr(key + b->tree_len, '/') : NULL;
    if (!end || strncmp(key + b->tree_len - 2, "d/", 2) != 0 ||
        (size_t)(end - key) >= sizeof prefix)
        return 0; /* groups, types, the summary: no chunk */
    memcpy(prefix, key, (size_t)(end - key) + 1);
    prefix[end - key + 1] = '\0';
    struct zarr_array **list = strmap_get(b->arrays, prefix);
    for (size_t i = 0; list && list[i]; i++)
        if (zarr_chunk_listed(list[i], b->w->domain, (size_t)(end - key) + 1, key, st) != 0)
            return -ENOMEM;
    return 0;
}

static int mark_listed(const char *key, void *value, void *ctx)
{
    (void)key, (void)ctx;
    for (struct zarr_array **list = value; *list; list++)
        (*list)->listed = 1;
    return 0;
}

/* A v2 domain's objects all lie below db/A-B/ (spec §2.1): one listing there gives every
 * dataset's chunks, as the image's build takes them, where a listing per dataset would cost a
 * request each (500 datasets over S3: 500 lists). v1 domains are listed per dataset. */
static int list_domain(struct walk *w, struct zarr_node *top, const char *root_id)
{
    char prefix[STORE_KEY_MAX + 1];
    if (schema_id_version(root_id) != 2 || schema_obj_key(root_id, prefix, sizeof prefix) != 0)
        return 0;
    strrchr(prefix, '/')[1] = '\0';
    struct bulk b = { .w = w, .arrays = strmap_new() };
    int rc = b.arrays ? bulk_collect(b.arrays, top, 0) : -ENOMEM;
    char tree[STORE_KEY_MAX + 4];
    snprintf(tree, sizeof tree, "%sd/", prefix);
    b.tree_len = strlen(tree);
    if (rc == 0 && strmap_count(b.arrays) > 0)
        rc = store_list_keys(w->store, prefix, bulk_one, &b);
    if (rc == 0)
        strmap_filter(b.arrays, mark_listed, NULL);
    strmap_free(b.arrays, free);
    if (rc != 0 && rc != -ENOMEM) {
        log_warn("%s: zarr view: listing of %s: %s", w->domain, prefix, strerror(-rc));
        rc = -EIO;
    }
    return rc;
}

/* A version's root is whatever its forgeable list names: nothing of it is shown unless its
 * group says it is a version over the domain's own pool (schema/pool.h), as the image build
 * asks. The pool found is kept for the pooled arrays. 0, -EIO (logged), -ENOMEM. */
static int root_is_the_domains(struct walk *w, const json_t *root)
{
    char why[ZARR_WHY_MAX] = "";
    const struct schema_fetch fetch = { w->store, store_get_bytes };
    int rc =
        schema_pool_root_check(w->domain, w->root_id, root, &fetch, w->pool_ok, why, sizeof why);
    if (rc != 0 && rc != -ENOMEM)
        log_error("%s: zarr view: root group: %s", w->domain, why);
    return rc == 0 || rc == -ENOMEM ? rc : -EIO;
}

int zarr_tree_build(struct store *store, const char *bucket, const char *domain,
                    const char *root_id, struct zarr_tree **out)
{
    struct walk w = { .store = store, .bucket = bucket, .root_id = root_id, .domain = domain };
    struct zarr_tree *t = calloc(1, sizeof *t);
    json_t *root = NULL;
    int rc = -ENOMEM;
    w.seen = strmap_new();
    w.names = strmap_new();
    if (t && w.seen && w.names && (t->top = node_new(""))) {
        snprintf(t->root, sizeof t->root, "%s", root_id);
        rc = strmap_put(w.seen, root_id, (void *)1, NULL);
        if (rc == 0 && (rc = load_object(&w, root_id, &root)) != 0 && rc != -ENOMEM)
            rc = -EIO; /* no root group, no group: logged */
        if (rc == 0)
            rc = root_is_the_domains(&w, root);
        w.root_group = root;
        if (rc == 0)
            rc = walk_tree(&w, t->top, root);
        if (rc == 0)
            rc = list_domain(&w, t->top, root_id);
        if (rc == 0)
            rc = finish_group(&w, t->top, 0);
    }
    json_decref(root);
    strmap_free(w.seen, NULL);
    strmap_free(w.names, free);
    if (rc != 0) {
        zarr_tree_free(t);
        return rc;
    }
    *out = t;
    return 0;
}
