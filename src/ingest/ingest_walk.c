/*
 * ingest_walk: the objects of an HDF5 file reached by hard links from "/", breadth first,
 * each once (hard links to one object share its id), with the links of every group in the
 * group's own order: creation order when the group tracks it (as HDF5 lists them), else by
 * name.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"

#include "h5osfs/util/log.h"
#include "h5osfs/ingest/ingest_int.h"

struct raw_link {
    char *name;
    H5L_info_t info;
};

struct link_list {
    struct raw_link *v;
    size_t n, cap;
};

static herr_t collect_link(hid_t group, const char *name, const H5L_info_t *info, void *ctx)
{
    (void)group;
    struct link_list *l = ctx;
    if (l->n == l->cap) {
        struct raw_link *nv = grow_array(l->v, &l->cap, l->cap + 1, sizeof *nv, 16);
        if (!nv)
            return -1;
        l->v = nv;
    }
    l->v[l->n].name = strdup(name);
    if (!l->v[l->n].name)
        return -1;
    l->v[l->n++].info = *info;
    return 0;
}

static void link_list_free(struct link_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
}

static int tracks_creation_order(hid_t group)
{
    return ingest_order_tracked(H5Gget_create_plist(group), H5Pget_link_creation_order);
}

/* The group's links in its order. Creation order needs the index HDF5 keeps only when
 * asked to; without it (tracked but not indexed) name order is the best there is. */
static int list_links(hid_t group, int by_creation, struct link_list *out)
{
    hsize_t idx = 0;
    memset(out, 0, sizeof *out);
    if (by_creation &&
        H5Literate(group, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect_link, out) >= 0)
        return 0;
    link_list_free(out);
    memset(out, 0, sizeof *out);
    idx = 0;
    if (H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_link, out) < 0) {
        link_list_free(out);
        return -EIO;
    }
    return 0;
}

static char *child_path(const char *parent, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, name) < 0)
        return NULL;
    return p;
}

static int addr_key(haddr_t addr, char *buf, size_t len)
{
    return snprintf(buf, len, "%llx", (unsigned long long)addr) < (int)len ? 0 : -EINVAL;
}

long ingest_find_addr(const struct ingest *g, haddr_t addr)
{
    char key[32];
    if (addr_key(addr, key, sizeof key) != 0)
        return -1;
    uintptr_t v = (uintptr_t)strmap_get(g->by_addr, key);
    return v ? (long)(v - 1) : -1;
}

static int add_obj(struct ingest *g, char cls, haddr_t addr, char *path, size_t *index)
{
    char key[32];
    if (g->n_objs == g->cap_objs) {
        struct ingest_obj *n = grow_array(g->objs, &g->cap_objs, g->cap_objs + 1, sizeof *n, 64);
        if (!n)
            return -ENOMEM;
        g->objs = n;
    }
    struct ingest_obj *o = &g->objs[g->n_objs];
    memset(o, 0, sizeof *o);
    o->cls = cls;
    o->addr = addr;
    o->path = path;
    int rc = g->n_objs == 0 ? (snprintf(o->id, sizeof o->id, "%s", g->root), 0)
                            : ingest_new_id(g, cls, o->id);
    if (rc == 0 && g->base)
        ingest_base_identify(g, o);
    if (rc == 0)
        rc = addr_key(addr, key, sizeof key);
    if (rc == 0)
        rc = strmap_put(g->by_addr, key, (void *)(uintptr_t)(g->n_objs + 1), NULL);
    if (rc != 0)
        return rc;
    *index = g->n_objs++;
    return 0;
}

static char class_of(H5O_type_t t)
{
    return t == H5O_TYPE_GROUP            ? 'g'
           : t == H5O_TYPE_DATASET        ? 'd'
           : t == H5O_TYPE_NAMED_DATATYPE ? 't'
                                          : 0;
}

static int hard_link(struct ingest *g, size_t gi, hid_t group, const struct raw_link *rl,
                     struct ingest_link *l)
{
    long found = ingest_find_addr(g, rl->info.u.address);
    if (found >= 0) {
        l->target = (size_t)found;
        return 0;
    }
    H5O_info_t info;
    if (H5Oget_info_by_name2(group, rl->name, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        log_error("%s: %s: the object of link \"%s\" cannot be read", g->log_name, g->objs[gi].path,
                  rl->name);
        return -EIO;
    }
    char cls = class_of(info.type);
    if (!cls)
        return 1;
    char *path = child_path(g->objs[gi].path, rl->name);
    if (!path)
        return -ENOMEM;
    int rc = add_obj(g, cls, info.addr, path, &l->target);
    if (rc != 0)
        free(path);
    return rc;
}

static int value_link(struct ingest *g, size_t gi, hid_t group, const struct raw_link *rl,
                      struct ingest_link *l)
{
    size_t size = rl->info.u.val_size;
    char *val = malloc(size + 1);
    if (!val)
        return -ENOMEM;
    if (H5Lget_val(group, rl->name, val, size, H5P_DEFAULT) < 0) {
        free(val);
        log_error("%s: %s: link \"%s\" cannot be read", g->log_name, g->objs[gi].path, rl->name);
        return -EIO;
    }
    val[size] = '\0';
    if (rl->info.type == H5L_TYPE_SOFT) {
        l->h5path = val;
        return 0;
    }
    const char *file = NULL, *obj = NULL;
    unsigned flags;
    if (H5Lunpack_elink_val(val, size, &flags, &file, &obj) < 0 || !file || !obj) {
        free(val);
        log_error("%s: %s: external link \"%s\" cannot be read", g->log_name, g->objs[gi].path,
                  rl->name);
        return -EIO;
    }
    l->file = strdup(file);
    l->h5path = strdup(obj);
    free(val);
    return l->file && l->h5path ? 0 : -ENOMEM;
}

/* Turn the raw links of group gi into ingest_links, discovering new objects. */
static int group_links(struct ingest *g, size_t gi, hid_t group, const struct link_list *raw)
{
    struct ingest_link *v = calloc(raw->n ? raw->n : 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    g->objs[gi].links = v;
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < raw->n && rc >= 0; i++) {
        const struct raw_link *rl = &raw->v[i];
        struct ingest_link *l = &v[n];
        if (rl->info.type != H5L_TYPE_HARD && rl->info.type != H5L_TYPE_SOFT &&
            rl->info.type != H5L_TYPE_EXTERNAL) {
            ingest_change(g, g->objs[gi].path, "user-defined link \"%s\" (type %d) left out",
                          rl->name, (int)rl->info.type);
            continue;
        }
        l->type = rl->info.type;
        rc = l->type == H5L_TYPE_HARD ? hard_link(g, gi, group, rl, l)
                                      : value_link(g, gi, group, rl, l);
        if (rc == 1) {
            ingest_change(g, g->objs[gi].path,
                          "link \"%s\" to an object of no known kind "
                          "left out",
                          rl->name);
            rc = 0;
            continue;
        }
        if (rc == 0 && !(l->name = strdup(rl->name)))
            rc = -ENOMEM;
        if (rc == 0)
            n++;
        else {
            free(l->h5path);
            free(l->file);
        }
        g->objs[gi].links = v; /* add_obj may not move v, but objs may have moved */
        g->objs[gi].n_links = n;
    }
    g->objs[gi].links = v;
    g->objs[gi].n_links = n;
    return rc;
}

static int walk_group(struct ingest *g, size_t gi)
{
    hid_t group = H5Gopen2(g->file, g->objs[gi].path, H5P_DEFAULT);
    if (group < 0) {
        log_error("%s: %s: group cannot be opened", g->log_name, g->objs[gi].path);
        return -EIO;
    }
    struct link_list raw;
    g->objs[gi].track_order = tracks_creation_order(group);
    int rc = list_links(group, g->objs[gi].track_order, &raw);
    if (rc != 0)
        log_error("%s: %s: links cannot be listed", g->log_name, g->objs[gi].path);
    else {
        rc = group_links(g, gi, group, &raw);
        link_list_free(&raw);
    }
    H5Gclose(group);
    return rc;
}

int ingest_walk(struct ingest *g)
{
    H5O_info_t info;
    size_t root;
    char *path = strdup("/");
    if (!path)
        return -ENOMEM;
    if (H5Oget_info_by_name2(g->file, "/", &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        free(path);
        log_error("%s: the root group of %s cannot be read", g->log_name, g->h5path);
        return -EIO;
    }
    int rc = add_obj(g, 'g', info.addr, path, &root);
    if (rc != 0) {
        free(path);
        return rc;
    }
    for (size_t i = 0; i < g->n_objs && rc == 0; i++)
        if (g->objs[i].cls == 'g')
            rc = walk_group(g, i);
    return rc;
}

void ingest_objs_free(struct ingest *g)
{
    for (size_t i = 0; i < g->n_objs; i++) {
        struct ingest_obj *o = &g->objs[i];
        for (size_t k = 0; k < o->n_links; k++) {
            free(o->links[k].name);
            free(o->links[k].h5path);
            free(o->links[k].file);
        }
        free(o->links);
        free(o->path);
        json_decref(o->json);
        json_decref(o->old);
        ingest_link_table_free(o->table);
    }
    free(g->objs);
    g->objs = NULL;
    g->n_objs = g->cap_objs = 0;
}

/* ---- lookups in the objects found ---- */

const char *ingest_id_of_object(const struct ingest *g, hid_t hid)
{
    H5O_info_t info;
    if (H5Oget_info2(hid, &info, H5O_INFO_BASIC) < 0)
        return NULL;
    long i = ingest_find_addr(g, info.addr);
    return i < 0 || g->objs[i].dropped ? NULL : g->objs[i].id;
}

int ingest_ref_id(void *ctx, const hobj_ref_t *ref, char id[39])
{
    struct ingest *g = ctx;
    if (*ref == 0)
        return -ENOENT;
    hid_t obj = H5Rdereference2(g->file, H5P_DEFAULT, H5R_OBJECT, ref);
    if (obj < 0)
        return -ENOENT; /* dangling: stored as a null reference */
    const char *found = ingest_id_of_object(g, obj);
    H5Oclose(obj);
    if (!found)
        return -ENOENT;
    memcpy(id, found, SCHEMA_ID_BUF);
    return 0;
}
