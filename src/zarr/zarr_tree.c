/* zarr_tree: a domain's groups and datasets, read from the store, as the Zarr view's tree. */
#include "zarr_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"

#define OBJECT_JSON_MAX (16u << 20) /* far more than any group or dataset JSON */
#define TREE_DEPTH_MAX 256

/* What a build keeps while it walks: the ids seen, the name each dataset was first reached
 * by (what dimension scales are called), and the datasets' JSON until their .zattrs are made. */
struct walk {
    struct store *store;
    const char *domain;
    struct strmap *seen;  /* group ids walked (hard links may form cycles) */
    struct strmap *names; /* dataset id -> its first link name (not owned) */
    struct zarr_node **arrays;
    json_t **dsets;
    size_t n_arrays, cap_arrays;
};

static void array_free(struct zarr_array *a)
{
    if (!a)
        return;
    free(a->zarray);
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

static int remember_array(struct walk *w, struct zarr_node *n, json_t *dset)
{
    if (w->n_arrays == w->cap_arrays) {
        size_t cap = w->cap_arrays ? 2 * w->cap_arrays : 16;
        struct zarr_node **a = realloc(w->arrays, cap * sizeof *a);
        json_t **d = a ? realloc(w->dsets, cap * sizeof *d) : NULL;
        if (a)
            w->arrays = a;
        if (!d)
            return -ENOMEM;
        w->dsets = d;
        w->cap_arrays = cap;
    }
    w->arrays[w->n_arrays] = n;
    w->dsets[w->n_arrays++] = dset;
    return 0;
}

/* A dataset reached by link name: its node (NULL, logged, when the view leaves it out). */
static int add_dataset(struct walk *w, struct zarr_node *parent, const char *name, const char *id)
{
    json_t *dset;
    char why[ZARR_WHY_MAX] = "";
    int rc = load_object(w, id, &dset);
    if (rc != 0)
        return rc == -ENOMEM ? rc : 0;
    struct zarr_node *n = node_new(name);
    struct zarr_array *a = n ? calloc(1, sizeof *a) : NULL;
    if (!a || pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        node_free(n);
        json_decref(dset);
        return -ENOMEM;
    }
    n->array = a;
    snprintf(a->id, sizeof a->id, "%s", id);
    rc = zarr_meta_array(dset, a, why, sizeof why);
    if (rc == -EINVAL)
        log_info("%s: zarr view: dataset %s (%s) left out: %s", w->domain, name, id, why);
    if (rc == 0 && (rc = add_kid(parent, n)) == 0 && (rc = remember_array(w, n, dset)) == 0) {
        if (!strmap_get(w->names, id) && strmap_put(w->names, id, n->name, NULL) != 0)
            return -ENOMEM;
        return 0;
    }
    if (rc != -ENOMEM || !parent->n_kids || parent->kids[parent->n_kids - 1] != n)
        node_free(n);
    json_decref(dset);
    return rc == -ENOMEM ? rc : 0;
}

static int walk_group(struct walk *w, struct zarr_node *node, const json_t *group, int depth);

static int add_group(struct walk *w, struct zarr_node *parent, const char *name, const char *id,
                     int depth)
{
    json_t *group;
    if (strmap_get(w->seen, id))
        return 0; /* a second hard link to a group: Zarr has no links, the first one shows it */
    if (strmap_put(w->seen, id, (void *)1, NULL) != 0)
        return -ENOMEM;
    int rc = load_object(w, id, &group);
    if (rc != 0)
        return rc == -ENOMEM ? rc : 0;
    struct zarr_node *n = node_new(name);
    rc = !n ? -ENOMEM : add_kid(parent, n);
    if (rc != 0)
        node_free(n);
    else
        rc = walk_group(w, n, group, depth + 1);
    json_decref(group);
    return rc;
}

static int compare_nodes(const void *a, const void *b)
{
    return strcmp((*(struct zarr_node *const *)a)->name, (*(struct zarr_node *const *)b)->name);
}

/* The group's hard links to groups and datasets, depth first. */
static int walk_group(struct walk *w, struct zarr_node *node, const json_t *group, int depth)
{
    const char *name;
    json_t *link;
    int rc = 0;
    if (depth > TREE_DEPTH_MAX)
        return 0;
    const json_t *attrs = json_object_get(group, "attributes");
    if ((rc = zarr_meta_attrs(attrs, NULL, 0, &node->zattrs, &node->zattrs_len)) != 0)
        return rc;
    json_object_foreach(json_object_get(group, "links"), name, link)
    {
        const char *id = hjson_text(json_object_get(link, "id"));
        int cls = id ? schema_id_class(id) : -EINVAL;
        if (cls != 'g' && cls != 'd')
            continue; /* soft, external links and committed types have no place in Zarr */
        if (!name_usable(name)) {
            log_info("%s: zarr view: link \"%s\" left out: not a name Zarr can use", w->domain,
                     hjson_unloadable(name) ? name + 2 : name);
            continue;
        }
        rc = cls == 'g' ? add_group(w, node, name, id, depth) : add_dataset(w, node, name, id);
        if (rc != 0)
            return rc;
    }
    if (node->n_kids > 1)
        qsort(node->kids, node->n_kids, sizeof *node->kids, compare_nodes);
    return 0;
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

/* The names of a's dimensions, or 0 when it has none to give (not a netCDF-style dataset). */
static int dimension_names(struct walk *w, const struct zarr_node *n, const json_t *dset,
                           const char **dims)
{
    const json_t *attrs = json_object_get(dset, "attributes");
    int rank = n->array->rank;
    if (rank == 0)
        return 0;
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

static int finish_arrays(struct walk *w)
{
    for (size_t i = 0; i < w->n_arrays; i++) {
        struct zarr_node *n = w->arrays[i];
        const char *dims[HJSON_DIMS_MAX];
        int have = dimension_names(w, n, w->dsets[i], dims);
        int rc = zarr_meta_attrs(json_object_get(w->dsets[i], "attributes"), have ? dims : NULL,
                                 n->array->rank, &n->zattrs, &n->zattrs_len);
        if (rc == 0 && !(n->array->chunks = strmap_new()))
            rc = -ENOMEM;
        if (rc != 0)
            return rc;
    }
    return 0;
}

int zarr_tree_build(struct store *store, const char *domain, const char *root_id,
                    struct zarr_tree **out)
{
    struct walk w = { .store = store, .domain = domain };
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
            rc = walk_group(&w, t->top, root, 0);
        if (rc == 0)
            rc = finish_arrays(&w);
    }
    for (size_t i = 0; i < w.n_arrays; i++)
        json_decref(w.dsets[i]);
    free(w.arrays);
    free(w.dsets);
    json_decref(root);
    strmap_free(w.seen, NULL);
    strmap_free(w.names, NULL);
    if (rc != 0) {
        zarr_tree_free(t);
        return rc;
    }
    *out = t;
    return 0;
}
