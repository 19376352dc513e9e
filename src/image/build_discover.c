/*
 * build_discover: step 1 of a build (build.c): from the root group, breadth first over hard
 * links (links in file order), every object's JSON loaded once, the objects the next groups
 * link fetched ahead all at once (src->requests in flight); an object's first path is where it
 * was first reached. Store requests only, no HDF5 call: it runs outside the build lock. Calls
 * build_objects.c only (tests/meson.build, --one-way).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/util/why.h"

/* ---- objects ---- */

void build_fetched_free(void *v)
{
    struct fetched *f = v;
    store_buf_free(&f->buf);
    free(f);
}

static int add_obj(struct builder *b, const char *id, size_t parent, const char *name, json_t *json)
{
    if (b->n_objs == b->cap_objs) {
        struct build_obj *n = grow_array(b->objs, &b->cap_objs, b->cap_objs + 1, sizeof *n, 64);
        if (!n)
            return -ENOMEM;
        b->objs = n;
    }
    struct build_obj *o = &b->objs[b->n_objs];
    memset(o, 0, sizeof *o);
    o->hid = H5I_INVALID_HID;
    o->id = strdup(id);
    o->parent = parent;
    o->name = name;
    o->cls = id[0];
    o->json = json;
    if (!o->id || strmap_put(b->by_id, id, (void *)(uintptr_t)(b->n_objs + 1), NULL)) {
        free(o->id);
        return -ENOMEM;
    }
    b->n_objs++;
    return 0;
}

/* ---- 1. discovery ---- */

/* id may be linked here if it is an object id of this domain (same 16-digit prefix). */
static int member_id_ok(const struct builder *b, const char *id)
{
    int cls = schema_id_class(id);
    if (cls != 'g' && cls != 'd' && cls != 't')
        return 0;
    if (schema_id_version(id) == 2 && schema_id_version(b->root_id) == 2)
        return strncmp(id + 2, b->root_id + 2, 17) == 0;
    return 1;
}

static int discover_link(struct builder *b, size_t parent, const struct link_ref *l)
{
    const char *id = build_hard_target(l->json);
    const struct build_obj *g = &b->objs[parent];
    char why[320];
    if (!id || build_find(b, id))
        return 0;
    if (!member_id_ok(b, id)) {
        why_set(why, sizeof why, "to %.120s, which is not an object of this domain", id);
        return build_omit(b, IMAGE_OMIT_LINK, g->id, build_path(b, g), l->name, why);
    }
    json_t *j;
    int rc = build_load_json(b, id, &j, why, sizeof why);
    if (rc == -ENOENT || rc == -EINVAL)
        return build_omit(b, IMAGE_OMIT_LINK, g->id, build_path(b, g), l->name, why);
    if (rc != 0)
        return rc;
    rc = add_obj(b, id, parent, l->name, j);
    if (rc != 0)
        json_decref(j);
    return rc;
}

/* ---- fetching ahead: the objects the next groups link are asked for at once ---- */

struct fetch_job {
    struct builder *b;
    char **ids;
    struct fetched **out;
};

static void fetch_one(void *ctx, size_t i)
{
    struct fetch_job *j = ctx;
    char key[STORE_KEY_MAX + 1];
    struct fetched *f = calloc(1, sizeof *f);
    if (f && schema_obj_key(j->ids[i], key, sizeof key) == 0)
        f->rc = store_get(j->b->src->store, key, IMAGE_JSON_MAX, &f->buf);
    else if (f)
        f->rc = -EINVAL;
    j->out[i] = f;
}

/* Add id to ids when it is a hard link target of the domain not found or fetched yet. */
static int want_fetched(struct builder *b, const char *id, char ***ids, size_t *n, size_t *cap)
{
    if (!id || !member_id_ok(b, id) || build_find(b, id) || strmap_get(b->fetched, id))
        return 0;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*ids)[i], id) == 0)
            return 0;
    if (*n == *cap) {
        char **bigger = grow_array(*ids, cap, *cap + 1, sizeof *bigger, 64);
        if (!bigger)
            return -ENOMEM;
        *ids = bigger;
    }
    (*ids)[(*n)++] = (char *)id;
    return 0;
}

/* Fetch, all at once, the objects that the groups from the next unfetched one on link to: the
 * breadth-first walk then finds them waiting, in its own order. */
static int fetch_ahead(struct builder *b)
{
    char **ids = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    if (b->src->requests <= 1 || b->fetched_upto > b->n_objs)
        return 0;
    for (size_t i = b->fetched_upto; i < b->n_objs && rc == 0; i++) {
        const char *name;
        json_t *l;
        if (b->objs[i].cls == 'g')
            json_object_foreach(json_object_get(b->objs[i].json, "links"), name, l) if (rc == 0)
                rc = want_fetched(b, build_hard_target(l), &ids, &n, &cap);
    }
    b->fetched_upto = b->n_objs;
    struct fetch_job job = { b, ids, n ? calloc(n, sizeof *job.out) : NULL };
    if (rc == 0 && n && !job.out)
        rc = -ENOMEM;
    if (rc == 0 && n)
        pfor(n, b->src->requests, fetch_one, &job);
    for (size_t i = 0; i < n && job.out; i++) {
        if (job.out[i] && (rc != 0 || strmap_put(b->fetched, ids[i], job.out[i], NULL) != 0)) {
            build_fetched_free(job.out[i]);
            rc = rc ? rc : -ENOMEM;
        }
    }
    free(job.out);
    free(ids);
    return rc;
}

/* A version's root is whatever its list names, and the list is a key that a writer of the
 * domain's folder may forge: before anything of the root is built, its group (read here
 * anyway) must say it is a version over the domain's own pool; so must a ref-mode domain's
 * head version (schema/pool.h). The pool found is kept for the pooled datasets, which would
 * otherwise read the list and the marker again. */
static int root_is_the_domains(struct builder *b, const json_t *root, char *why, size_t why_len)
{
    const struct schema_fetch fetch = { b->src->store, store_get_bytes };
    return schema_pool_root_check(b->domain_path, b->root_id, root, &fetch, b->pool_ok, why,
                                  why_len);
}

int build_discover(struct builder *b)
{
    json_t *root;
    char why[320] = "";
    int rc = build_load_json(b, b->root_id, &root, why, sizeof why);
    if (rc == 0 && (rc = root_is_the_domains(b, root, why, sizeof why)) != 0)
        json_decref(root);
    if (rc != 0) {
        log_error("%s: root group: %s", b->domain_path, why);
        return rc == -ENOMEM ? rc : -EIO;
    }
    rc = add_obj(b, b->root_id, SIZE_MAX, NULL, root);
    if (rc != 0) {
        json_decref(root);
        return rc;
    }
    for (size_t i = 0; i < b->n_objs && rc == 0; i++) {
        if (b->objs[i].cls != 'g')
            continue;
        if (i >= b->fetched_upto && (rc = fetch_ahead(b)) != 0)
            break;
        size_t n;
        struct link_ref *links = build_ordered_members(json_object_get(b->objs[i].json, "links"),
                                                       build_creation_ordered(b->objs[i].json), &n);
        if (!links)
            return -ENOMEM;
        for (size_t k = 0; k < n && rc == 0; k++)
            if (build_link_name_ok(links[k].name))
                rc = discover_link(b, i, &links[k]);
        free(links);
    }
    return rc;
}
