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
 * - the chunk table of a kept *_REF_INDIRECT layout, which no group links, is carried over.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/hjson.h"
#include "h5osfs/log.h"
#include "ingest_int.h"

#define BASE_PREFIX_LEN 19      /* "-AAAAAAAA-BBBBBBBB-": the 16 digits a root gives its ids */

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

/* s with every "-<base digits>-" made "-<new root digits>-". */
static json_t *remap_string(const char *s, size_t len, const char *from, const char *to)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    for (char *at = copy; (at = memmem(at, (size_t)(copy + len - at), from, BASE_PREFIX_LEN));) {
        memcpy(at, to, BASE_PREFIX_LEN);
        at += BASE_PREFIX_LEN;
    }
    json_t *out = json_stringn(copy, len);
    free(copy);
    return out;
}

static json_t *remap(const json_t *v, const char *from, const char *to)
{
    const char *k;
    json_t *x, *out = NULL;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        out = json_object();
        json_object_foreach((json_t *)v, k, x)
            if (out && json_object_set_new(out, k, remap(x, from, to)) != 0) {
                json_decref(out);
                return NULL;
            }
        return out;
    case JSON_ARRAY:
        out = json_array();
        json_array_foreach(v, i, x)
            if (out && json_array_append_new(out, remap(x, from, to)) != 0) {
                json_decref(out);
                return NULL;
            }
        return out;
    case JSON_STRING:
        return remap_string(json_string_value(v), json_string_length(v), from, to);
    default:
        return json_deep_copy(v);
    }
}

json_t *ingest_base_json(const struct ingest *g, const json_t *v)
{
    char from[BASE_PREFIX_LEN + 1], to[BASE_PREFIX_LEN + 1];
    id_prefix(g->base->root, from);
    id_prefix(g->root, to);
    return v ? remap(v, from, to) : NULL;
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
        log_error("%s: the base version's object %s (%s) cannot be read: %s", g->log_name, id,
                  key, rc ? strerror(-rc) : why);
        json_decref(j);
        return NULL;
    }
    return j;
}

int ingest_base_load(struct ingest *g)
{
    for (size_t i = 0; i < g->n_objs; i++) {
        struct ingest_obj *o = &g->objs[i];
        if (o->base_id[0] && !(o->old = load_base_json(g, o->base_id)))
            return -EIO;        /* retried: the chunks of this object are still the base's */
    }
    return 0;
}

/* ---- what is kept ---- */

/* Keep the timestamps of the members (links, attributes) that did not change. */
static void keep_member_times(json_t *now, const json_t *old)
{
    const char *name;
    json_t *v;
    json_object_foreach(now, name, v) {
        const json_t *o = json_object_get(old, name);
        if (o && ingest_json_same(v, o) && json_object_get(o, "created"))
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
    if (is_ref) {
        if (!json_equal(json_object_get(o->json, "shape"), json_object_get(old, "shape")))
            return 0;
        int untouched = ingest_dataset_untouched(g, o);
        if (untouched <= 0)
            return untouched;   /* a chunk was written: an ordinary chunked dataset now */
    }
    if (json_object_set(o->json, "layout", (json_t *)layout) != 0)
        return -ENOMEM;
    if (!cprops)
        json_object_del(o->json, "creationProperties");     /* absent in both: fine */
    else if (json_object_set(o->json, "creationProperties", (json_t *)cprops) != 0)
        return -ENOMEM;
    o->base_layout = 1;
    o->base_ref = is_ref;
    return 0;
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
    if (rc == 0 && ingest_json_same(o->json, old) && json_object_get(old, "lastModified"))
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

/* ---- objects carried over ---- */

/* The base's dataset id (its JSON and every chunk) under the new root: a chunk table. */
static int carry_dataset(struct ingest *g, const char *id, const char *path)
{
    char key[STORE_KEY_MAX + 1], prefix[STORE_KEY_MAX + 1] = "", to[SCHEMA_ID_BUF];
    struct store_list list = { 0 };
    json_t *old = load_base_json(g, id);
    json_t *now = ingest_base_json(g, old);
    int rc = now ? 0 : old ? -ENOMEM : -EIO;
    const char *new_id = hjson_text(json_object_get(now, "id"));
    if (rc == 0 && (!new_id || schema_obj_key(new_id, key, sizeof key) != 0))
        rc = -EIO;
    if (rc == 0) {
        snprintf(to, sizeof to, "%s", new_id);
        json_object_set_new(now, "root", json_string(g->root));
        rc = ingest_put_json(g, key, now, path);
    }
    if (rc == 0 && schema_obj_key(id, prefix, sizeof prefix) == 0) {
        strrchr(prefix, '/')[1] = '\0';    /* db/A-B/d/C-D-E/: its chunks' keys */
        rc = store_list(g->cfg->store, prefix, NULL, NULL, 0, &list);
    }
    size_t plen = strlen(prefix);
    for (size_t i = 0; rc == 0 && i < list.n_objects; i++) {
        const char *k = list.objects[i].key;
        if (strlen(k) > 5 && strcmp(k + strlen(k) - 5, ".json") == 0)
            continue;
        struct ingest_job job = { .src_fd = -1, .path = path };
        snprintf(job.copy_of, sizeof job.copy_of, "%s", k);
        if (schema_obj_key(to, job.key, sizeof job.key) != 0)
            rc = -EIO;
        else {
            char *slash = strrchr(job.key, '/');
            snprintf(slash + 1, sizeof job.key - (size_t)(slash + 1 - job.key), "%s", k + plen);
            rc = ingest_pool_submit(g->pool, &job);
        }
    }
    store_list_free(&list);
    json_decref(old);
    json_decref(now);
    if (rc != 0)
        log_error("%s: %s: the chunk table %s could not be carried over (%s)", g->log_name,
                  path, id, strerror(-rc));
    return rc == -ENOMEM || rc == -ENOSPC ? rc : rc ? -EIO : 0;
}

int ingest_base_carry(struct ingest *g)
{
    int rc = 0;
    for (size_t i = 0; i < g->n_objs && rc == 0; i++) {
        const struct ingest_obj *o = &g->objs[i];
        const json_t *lay = json_object_get(json_object_get(o->old, "creationProperties"),
                                            "layout");
        const char *id = o->base_ref ? hjson_text(json_object_get(lay, "chunk_table")) : NULL;
        if (id && schema_id_class(id) == 'd')
            rc = carry_dataset(g, id, o->path);
    }
    return rc;
}
