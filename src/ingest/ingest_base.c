/*
 * ingest_base: what a changed copy of a stored version keeps of it (ingest.h, struct
 * ingest_base). Every commit writes a new root; what did not change keeps its identity and
 * costs no bytes:
 * - ids: an object the base knows (by its HDF5 object header address) keeps its base id's
 *   last 16 digits under the new root's first 16, so references and links between versions
 *   name the same objects;
 * - JSON: unchanged links and attributes keep their "created" times, an unchanged object its
 *   "created" and "lastModified";
 * - a dataset whose chunk grid is the base's keeps the base's layout and creation properties
 *   (its filters and partitions: the chunks copied from the base are stored that way), and a
 *   *_REF layout as long as none of its chunks was written (then it becomes an ordinary
 *   chunked dataset: HSDS cannot write into a linked file, nor may we);
 * - the chunk table of a kept *_REF_INDIRECT layout, which no group links, is carried over,
 *   and the base's own linked file (db/A-B/.h5osfs-file, ingest_link.c) is copied in the store
 *   to the new root when a kept layout names it: the base's root, and with it its file, is
 *   collected once the new version is the domain.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ingest/ingest_int.h"

#define BASE_PREFIX_LEN 19 /* "-AAAAAAAA-BBBBBBBB-": the 16 digits a root gives its ids */
/* The path in log lines of objects the file did not have (a job's path must outlive it). */
static const char CARRIED[] = "(an object the file did not show)";

/* ---- ids ---- */

static void id_prefix(const char *root, char out[BASE_PREFIX_LEN + 1])
{
    snprintf(out, BASE_PREFIX_LEN + 1, "-%.8s-%.8s-", root + 2, root + 11);
}

void ingest_base_identify(struct ingest *g, struct ingest_obj *o)
{
    const char *b = g->base->object_id(g->base->ctx, (uint64_t)o->addr);
    int is_root = g->n_objs == 0;
    if (!b || b[0] != o->cls || schema_id_version(b) != 2 || strlen(b) != SCHEMA_ID_BUF - 1 ||
        (strcmp(b, g->base->root) == 0) != is_root)
        return;
    if (!is_root)
        snprintf(o->id, sizeof o->id, "%c-%.8s-%.8s%s", o->cls, g->root + 2, g->root + 11,
                 b + BASE_PREFIX_LEN);
    snprintf(o->base_id, sizeof o->base_id, "%s", b);
}

/* Every n-byte from in copy (of len bytes) made to. */
static void replace_all(char *copy, size_t len, const char *from, const char *to, size_t n)
{
    for (char *at = copy; (at = memmem(at, (size_t)(copy + len - at), from, n));) {
        memcpy(at, to, n);
        at += n;
    }
}

/* s with the base's root id made the new root's (its last 16 digits follow from the first 16)
 * and every other id's "-<base digits>-" made "-<new root digits>-". */
static json_t *remap_string(const char *s, size_t len, const char *from, const char *to,
                            const char *from_root, const char *to_root)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    replace_all(copy, len, from_root, to_root, SCHEMA_ID_BUF - 1);
    replace_all(copy, len, from, to, BASE_PREFIX_LEN);
    json_t *out = json_stringn(copy, len);
    free(copy);
    return out;
}

struct remapping {
    char from[BASE_PREFIX_LEN + 1], to[BASE_PREFIX_LEN + 1];
    const char *from_root, *to_root;
};

static json_t *remap(const json_t *v, const struct remapping *m)
{
    const char *k;
    json_t *x, *out = NULL;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        out = json_object();
        json_object_foreach((json_t *)v, k,
                            x) if (out && json_object_set_new(out, k, remap(x, m)) != 0)
        {
            json_decref(out);
            return NULL;
        }
        return out;
    case JSON_ARRAY:
        out = json_array();
        json_array_foreach(v, i, x) if (out && json_array_append_new(out, remap(x, m)) != 0)
        {
            json_decref(out);
            return NULL;
        }
        return out;
    case JSON_STRING:
        return remap_string(json_string_value(v), json_string_length(v), m->from, m->to,
                            m->from_root, m->to_root);
    default:
        return json_deep_copy(v);
    }
}

json_t *ingest_base_json(const struct ingest *g, const json_t *v)
{
    struct remapping m = { .from_root = g->base->root, .to_root = g->root };
    id_prefix(g->base->root, m.from);
    id_prefix(g->root, m.to);
    return v ? remap(v, &m) : NULL;
}

/* ---- the stored JSON of the base ---- */

static json_t *load_base_json(struct ingest *g, const char *id)
{
    char key[STORE_KEY_MAX + 1], why[200] = "not an object";
    struct store_buf buf = { 0 };
    if (schema_obj_key(id, key, sizeof key) != 0)
        return NULL;
    int rc = store_get(g->cfg->store, key, INGEST_JSON_MAX, &buf);
    json_t *j = rc == 0 ? hjson_loadb((const char *)buf.data, buf.len, why, sizeof why) : NULL;
    store_buf_free(&buf);
    if (!json_is_object(j)) {
        log_error("%s: the base version's object %s (%s) cannot be read: %s", g->log_name, id, key,
                  rc ? strerror(-rc) : why);
        json_decref(j);
        return NULL;
    }
    return j;
}

int ingest_base_load(struct ingest *g)
{
    if (!(g->by_base = strmap_new()) || !(g->carried = strmap_new()))
        return -ENOMEM;
    for (size_t i = 0; i < g->n_objs; i++) {
        struct ingest_obj *o = &g->objs[i];
        if (!o->base_id[0])
            continue;
        if (!(o->old = load_base_json(g, o->base_id)))
            return -EIO; /* retried: the chunks of this object are still the base's */
        if (strmap_put(g->by_base, o->base_id, (void *)(uintptr_t)(i + 1), NULL) != 0)
            return -ENOMEM;
    }
    return 0;
}

/* ---- chunks of the file as the file chunks it (with a base) ---- */

/* fn for every chunk dataset d has allocated in the file (its own chunk grid) inside its
 * extent, until fn gives non-zero (that value). The chunk index is listed, never the grid: a
 * declared extent costs nothing. */
static int for_each_file_chunk(struct ingest *g, hid_t d, const char *path,
                               int (*fn)(struct ingest *g, void *ctx, haddr_t addr, hsize_t size,
                                         const uint64_t *idx, int rank),
                               void *ctx)
{
    hid_t space = H5Dget_space(d), dcpl = H5Dget_create_plist(d);
    hsize_t dims[INGEST_MAX_RANK], cdims[INGEST_MAX_RANK], off[INGEST_MAX_RANK], n = 0;
    uint64_t idx[INGEST_MAX_RANK];
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    int rc = dcpl < 0 || rank < 0 || rank > INGEST_MAX_RANK ||
                     H5Sget_simple_extent_dims(space, dims, NULL) < 0
                 ? -EIO
                 : 0;
    int chunked = rc == 0 && rank > 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
                  H5Pget_chunk(dcpl, rank, cdims) == rank; /* else no chunk extents */
    if (chunked && H5Dget_num_chunks(d, space, &n) < 0)
        rc = -EIO;
    for (hsize_t i = 0; rc == 0 && chunked && i < n; i++) {
        unsigned mask;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        int inside = 1;
        if (H5Dget_chunk_info(d, space, i, off, &mask, &addr, &size) < 0) {
            log_error("%s: %s: chunk %llu of the %llu the file has cannot be listed", g->log_name,
                      path, (unsigned long long)i, (unsigned long long)n);
            rc = -EIO;
            break;
        }
        for (int k = 0; k < rank; k++) {
            inside &= cdims[k] > 0 && off[k] < dims[k]; /* not left by a shrink */
            idx[k] = cdims[k] ? off[k] / cdims[k] : 0;
        }
        if (inside && addr != HADDR_UNDEF && size > 0)
            rc = fn(g, ctx, addr, size, idx, rank);
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return rc;
}

struct base_walk {
    const char *base_id;
    int materialize;
};

/* 1 (stop) at a written chunk; with materialize, every clean byte is copied in (0). */
static int base_chunk_bytes(struct ingest *g, void *ctx, haddr_t addr, hsize_t size,
                            const uint64_t *idx, int rank)
{
    struct base_walk *w = ctx;
    char key[STORE_KEY_MAX + 1];
    int state = g->base->chunk_state(g->base->ctx, addr, size, w->base_id, idx, rank,
                                     w->materialize, key, sizeof key);
    return state < 0 ? state : !w->materialize && state == 0;
}

/* 1 when every allocated chunk of dataset o in the file is still the base's (none was
 * written), 0 when one was, -errno. */
static int dataset_untouched(struct ingest *g, struct ingest_obj *o)
{
    struct base_walk w = { o->base_id, 0 };
    hid_t d = H5Dopen2(g->file, o->path, H5P_DEFAULT);
    int rc = d < 0 ? -EIO : for_each_file_chunk(g, d, o->path, base_chunk_bytes, &w);
    if (d >= 0)
        H5Dclose(d);
    return rc < 0 ? rc : !rc;
}

/* A dataset of the base whose chunks are not copied one by one (its grid here is not the
 * file's): its clean bytes go into the file before anything of it is read. */
int ingest_base_materialize(struct ingest *g, const struct ingest_obj *o, hid_t dset)
{
    struct base_walk w = { o->base_id, 1 };
    return for_each_file_chunk(g, dset, o->path, base_chunk_bytes, &w);
}

/* ---- what is kept ---- */

/* 1 if a and b are equal once every "created" and "lastModified" is left out. */
static int json_same(const json_t *a, const json_t *b)
{
    if (json_is_object(a) && json_is_object(b)) {
        const char *k;
        json_t *v;
        size_t na = 0, nb = 0;
        json_object_foreach((json_t *)a, k, v)
        {
            if (strcmp(k, "created") == 0 || strcmp(k, "lastModified") == 0)
                continue;
            na++;
            if (!json_same(v, json_object_get(b, k)))
                return 0;
        }
        json_object_foreach((json_t *)b, k, v) if (strcmp(k, "created") != 0 &&
                                                   strcmp(k, "lastModified") != 0) nb++;
        return na == nb;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_same(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    }
    return a && b && json_equal(a, b);
}

/* Keep the timestamps of the members (links, attributes) that did not change. */
static void keep_member_times(json_t *now, const json_t *old)
{
    const char *name;
    json_t *v;
    json_object_foreach(now, name, v)
    {
        const json_t *o = json_object_get(old, name);
        if (o && json_same(v, o) && json_object_get(o, "created"))
            json_object_set(v, "created", json_object_get(o, "created"));
    }
}

static const char *member_text(const json_t *obj, const char *a, const char *b)
{
    const json_t *v = json_object_get(obj, a);
    return hjson_text(b ? json_object_get(v, b) : v);
}

/* The dataset's chunk dims in the file equal dims (a JSON array): its chunks are the base's. */
static int same_chunk_grid(struct ingest *g, const struct ingest_obj *o, const json_t *dims)
{
    hsize_t c[INGEST_MAX_RANK];
    hid_t d = H5Dopen2(g->file, o->path, H5P_DEFAULT);
    hid_t dcpl = d < 0 ? H5I_INVALID_HID : H5Dget_create_plist(d);
    int rank = (int)json_array_size(dims);
    int same = dcpl >= 0 && rank > 0 && rank <= INGEST_MAX_RANK &&
               H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, c) == rank;
    for (int k = 0; same && k < rank; k++)
        same = json_integer_value(json_array_get(dims, (size_t)k)) == (json_int_t)c[k];
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (d >= 0)
        H5Dclose(d);
    return same;
}

/* A version's table over its domain's pool (versions_current=ref: the base is a version). */
static int pool_layout(const json_t *cprops)
{
    const json_t *lay = json_object_get(cprops, "layout");
    return hjson_text(json_object_get(json_object_get(lay, "h5osfs"), "pool")) != NULL;
}

/* A dataset of a version whose chunks are pool objects: the new root gets it as the plain
 * chunked dataset it was before its version was made (its creation properties but the table
 * layout), its chunks per chunk_state: copied in (cfg->kept_in_pool NULL: a pool object is
 * never linked into a root HSDS may rewrite) or left to the next version's table. */
static int settle_pooled(struct ingest *g, struct ingest_obj *o, const json_t *layout,
                         const json_t *cprops)
{
    json_t *plain = json_deep_copy(cprops);
    if (!plain)
        return -ENOMEM;
    json_object_del(plain, "layout");
    int rc = json_object_set(o->json, "layout", (json_t *)layout) != 0 ||
                     json_object_set_new(o->json, "creationProperties", plain) != 0
                 ? -ENOMEM
                 : 0;
    (void)g;
    o->base_layout = rc == 0;
    o->base_ref = 0;
    return rc;
}

/* A dataset of the base's type, rank and chunk grid keeps the base's layout and creation
 * properties (old is the base JSON with the new root's ids). 0 or -errno. */
static int settle_dataset(struct ingest *g, struct ingest_obj *o, const json_t *old)
{
    const json_t *layout = json_object_get(old, "layout");
    const json_t *cprops = json_object_get(old, "creationProperties");
    const char *cls = member_text(layout, "class", NULL);
    const char *ref = member_text(cprops, "layout", "class");
    int is_ref = ref && strstr(ref, "_REF") != NULL;
    if (!json_object_get(o->json, "layout") || !cls || strcmp(cls, "H5D_CHUNKED") != 0 ||
        !json_equal(json_object_get(o->json, "type"), json_object_get(old, "type")) ||
        !same_chunk_grid(g, o, json_object_get(layout, "dims")))
        return 0;
    if (is_ref && pool_layout(cprops))
        return settle_pooled(g, o, layout, cprops);
    if (is_ref) {
        if (!json_equal(json_object_get(o->json, "shape"), json_object_get(old, "shape")))
            return 0;
        int untouched = dataset_untouched(g, o);
        if (untouched <= 0)
            return untouched; /* a chunk was written: an ordinary chunked dataset now */
    }
    if (json_object_set(o->json, "layout", (json_t *)layout) != 0)
        return -ENOMEM;
    if (!cprops)
        json_object_del(o->json, "creationProperties"); /* absent in both: fine */
    else if (json_object_set(o->json, "creationProperties", (json_t *)cprops) != 0)
        return -ENOMEM;
    o->base_layout = 1;
    o->base_ref = is_ref;
    return is_ref ? ingest_link_rebase(g, o->json) : 0;
}

static int settle_object(struct ingest *g, struct ingest_obj *o)
{
    json_t *old = ingest_base_json(g, o->old);
    if (!old)
        return -ENOMEM;
    keep_member_times(json_object_get(o->json, "links"), json_object_get(old, "links"));
    keep_member_times(json_object_get(o->json, "attributes"), json_object_get(old, "attributes"));
    if (json_object_get(old, "created"))
        json_object_set(o->json, "created", json_object_get(old, "created"));
    int rc = o->cls == 'd' ? settle_dataset(g, o, old) : 0;
    if (rc == 0 && json_same(o->json, old) && json_object_get(old, "lastModified"))
        json_object_set(o->json, "lastModified", json_object_get(old, "lastModified"));
    if (rc == 0)
        g->stats->objects_kept++;
    json_decref(old);
    return rc;
}

int ingest_base_settle(struct ingest *g)
{
    int rc = 0;
    for (size_t i = 0; i < g->n_objs && rc == 0; i++)
        if (g->objs[i].old && g->objs[i].json && !g->objs[i].dropped)
            rc = settle_object(g, &g->objs[i]);
    return rc;
}

/* ---- what the base's file did not show ---- */

/* Base object id is needed by the new root: 1 when it is not in the file and was not wanted
 * before (it is from now on), 0, or -ENOMEM. */
static int want_carried(struct ingest *g, const char *id)
{
    if (!id || schema_id_version(id) != 2 || strlen(id) != SCHEMA_ID_BUF - 1 ||
        strncmp(id + 1, g->base->root + 1, BASE_PREFIX_LEN) != 0 || ingest_by_base(g, id) ||
        strmap_get(g->carried, id))
        return 0;
    return strmap_put(g->carried, id, (void *)1, NULL) == 0 ? 1 : -ENOMEM;
}

/* Member name of members (links or attributes of an object of the file) back from old, unless
 * the file has one of that name now (then the user's stays). */
static int restore_member(struct ingest *g, struct ingest_obj *o, const char *what,
                          const char *name)
{
    json_t *members = json_object_get(o->json, what);
    const json_t *was = json_object_get(json_object_get(o->old, what), name);
    if (!json_is_object(members) || !was)
        return 0;
    if (json_object_get(members, name)) {
        ingest_change(g, o->path,
                      "%s \"%s\", which the file did not show, is replaced by the one "
                      "written through it",
                      strcmp(what, "links") == 0 ? "link" : "attribute", name);
        return 0;
    }
    json_t *now = ingest_base_json(g, was);
    if (!now || json_object_set_new(members, name, now) != 0)
        return -ENOMEM;
    int want =
        strcmp(what, "links") == 0 ? want_carried(g, hjson_text(json_object_get(was, "id"))) : 0;
    return want < 0 ? want : 0;
}

/* A placeholder of the base's file: stored as the base has it (the file showed none of it). */
static int restore_placeholder(struct ingest *g, struct ingest_obj *o)
{
    json_t *now = ingest_base_json(g, o->old);
    int rc = now ? ingest_link_rebase(g, now) : -ENOMEM;
    if (rc != 0) {
        json_decref(now);
        return rc;
    }
    json_decref(o->json);
    o->json = now;
    o->base_whole = 1;
    o->base_layout = o->base_ref = 0;
    return 0;
}

int ingest_base_restore(struct ingest *g)
{
    int rc = 0;
    for (size_t i = 0; i < g->base->n_kept && rc == 0; i++) {
        const struct ingest_kept *k = &g->base->kept[i];
        struct ingest_obj *o = ingest_by_base(g, k->id);
        if (!o || !o->json || !o->old)
            continue; /* OBJECT, or the object (or group) is gone: deleted through the file */
        if (k->kind == INGEST_KEPT_PLACEHOLDER)
            rc = restore_placeholder(g, o);
        else if (k->kind == INGEST_KEPT_ATTRIBUTE && k->name)
            rc = restore_member(g, o, "attributes", k->name);
        else if (k->kind == INGEST_KEPT_LINK && k->name)
            rc = restore_member(g, o, "links", k->name);
    }
    return rc;
}

int ingest_base_kept_chunk(const struct ingest *g, const struct ingest_obj *o, const uint64_t *idx,
                           int rank, char *key, size_t key_len)
{
    char name[INGEST_MAX_RANK * 21];
    size_t len = 0;
    name[0] = '\0';
    for (int k = 0; k < rank; k++)
        len += (size_t)snprintf(name + len, sizeof name - len, "%s%llu", k ? "_" : "",
                                (unsigned long long)idx[k]);
    for (size_t i = 0; i < g->base->n_kept; i++) {
        const struct ingest_kept *k = &g->base->kept[i];
        if (k->kind == INGEST_KEPT_CHUNK && k->name && strcmp(k->name, name) == 0 &&
            strcmp(k->id, o->base_id) == 0) {
            int parts = (int)json_integer_value(
                json_object_get(json_object_get(o->old, "layout"), "partition_count"));
            return schema_chunk_key(o->base_id, idx, rank, schema_chunk_partition(idx, rank, parts),
                                    key, key_len) == 0;
        }
    }
    return 0;
}

/* ---- objects carried over ---- */

/* Every chunk object of base dataset id, copied to the keys of dataset to. */
static int copy_chunks(struct ingest *g, const char *id, const char *to, const char *path)
{
    char prefix[STORE_KEY_MAX + 1];
    struct store_list list = { 0 };
    if (schema_obj_key(id, prefix, sizeof prefix) != 0)
        return -EIO;
    strrchr(prefix, '/')[1] = '\0'; /* db/A-B/d/C-D-E/: its chunks' keys */
    int rc = store_list(g->cfg->store, prefix, NULL, NULL, 0, &list);
    size_t plen = strlen(prefix);
    for (size_t i = 0; rc == 0 && i < list.n_objects; i++) {
        const char *k = list.objects[i].key;
        if (strlen(k) > 5 && strcmp(k + strlen(k) - 5, ".json") == 0)
            continue;
        struct ingest_job job = { .src_fd = -1, .path = path };
        snprintf(job.copy_of, sizeof job.copy_of, "%s", k);
        if (schema_obj_key(to, job.key, sizeof job.key) != 0) {
            rc = -EIO;
            break;
        }
        char *slash = strrchr(job.key, '/');
        snprintf(slash + 1, sizeof job.key - (size_t)(slash + 1 - job.key), "%s", k + plen);
        rc = ingest_pool_submit(g->pool, &job);
    }
    store_list_free(&list);
    return rc;
}

static int carry_object(struct ingest *g, const char *id);

/* What carried JSON old refers to that must come along: a group's hard links, a *_REF_INDIRECT
 * layout's chunk table. */
static int carry_referred(struct ingest *g, const json_t *old)
{
    const char *name;
    json_t *l;
    int rc = 0;
    json_object_foreach(json_object_get((json_t *)old, "links"), name, l)
    {
        const char *id = hjson_text(json_object_get(l, "id"));
        int want = rc == 0 ? want_carried(g, id) : 0;
        rc = want < 0 ? want : want ? carry_object(g, id) : rc;
    }
    const json_t *lay = json_object_get(json_object_get(old, "creationProperties"), "layout");
    const char *table = hjson_text(json_object_get(lay, "chunk_table"));
    int want = rc == 0 ? want_carried(g, table) : 0;
    return want < 0 ? want : want ? carry_object(g, table) : rc;
}

/* An object whose JSON cannot be read (or is missing): its bytes and chunks are copied as they
 * are, under the new root's keys: unchanged, as unusable as before, not lost. */
static int carry_unreadable(struct ingest *g, const char *id)
{
    char to[SCHEMA_ID_BUF];
    snprintf(to, sizeof to, "%c-%.8s-%.8s%s", id[0], g->root + 2, g->root + 11,
             id + BASE_PREFIX_LEN);
    struct ingest_job job = { .src_fd = -1, .path = CARRIED };
    int rc = schema_obj_key(id, job.copy_of, sizeof job.copy_of) == 0 &&
                     schema_obj_key(to, job.key, sizeof job.key) == 0
                 ? 0
                 : -EIO;
    if (rc == 0)
        rc = ingest_pool_submit(g->pool, &job);
    if (rc == 0 && id[0] == 'd')
        rc = copy_chunks(g, id, to, CARRIED);
    if (rc == 0)
        ingest_change(g, id, "its object cannot be read: carried over as it is stored");
    return rc;
}

/* Base object id (not in the file) under the new root: its JSON, its chunks, what it needs. */
static int carry_object(struct ingest *g, const char *id)
{
    char key[STORE_KEY_MAX + 1];
    if (strmap_get(g->carried, id) == (void *)2)
        return 0; /* done */
    if (strmap_put(g->carried, id, (void *)2, NULL) != 0)
        return -ENOMEM;
    json_t *old = load_base_json(g, id), *now = ingest_base_json(g, old);
    if (!old)
        return carry_unreadable(g, id);
    const char *new_id = hjson_text(json_object_get(now, "id"));
    const char *path = CARRIED;
    int rc = !now ? -ENOMEM : 0;
    if (rc == 0 && (!new_id || schema_obj_key(new_id, key, sizeof key) != 0))
        rc = -EIO;
    if (rc == 0)
        rc = ingest_link_rebase(g, now);
    if (rc == 0 && schema_id_class(id) == 'd')
        rc = copy_chunks(g, id, new_id, path);
    if (rc == 0)
        rc = carry_referred(g, old);
    if (rc == 0)
        rc = ingest_put_json(g, key, now, path);
    if (rc != 0)
        log_error("%s: %s, which the file did not show, could not be carried over (%s)",
                  g->log_name, id, strerror(-rc));
    json_decref(old);
    json_decref(now);
    return rc == -ENOMEM || rc == -ENOSPC ? rc : rc ? -EIO : 0;
}

struct pending {
    char **ids;
    size_t n;
};

static int collect_pending(const char *key, void *value, void *ctx)
{
    struct pending *p = ctx;
    if (value == (void *)1 && (p->ids[p->n] = strdup(key)) != NULL)
        p->n++;
    return 0;
}

int ingest_base_carry(struct ingest *g)
{
    int rc = 0;
    for (size_t i = 0; i < g->n_objs && rc == 0; i++) {
        const struct ingest_obj *o = &g->objs[i];
        if (o->base_whole)
            rc = copy_chunks(g, o->base_id, o->id, o->path);
        if (rc == 0 && (o->base_ref || o->base_whole))
            rc = carry_referred(g, o->old);
    }
    /* the objects restored links lead to (carrying one can add more: again until none) */
    for (size_t round = 0; rc == 0; round++) {
        struct pending p = { calloc(strmap_count(g->carried) + 1, sizeof *p.ids), 0 };
        if (!p.ids)
            return -ENOMEM;
        strmap_filter(g->carried, collect_pending, &p);
        for (size_t i = 0; i < p.n; i++) {
            if (rc == 0)
                rc = carry_object(g, p.ids[i]);
            free(p.ids[i]);
        }
        free(p.ids);
        if (p.n == 0)
            break;
    }
    return rc;
}
