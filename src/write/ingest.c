/*
 * ingest: see include/h5osfs/ingest.h. This file holds the order of the work: walk the file,
 * settle ids (in place: the stored domain's where path and kind agree), build every JSON,
 * store the chunks through the worker pool, then datatypes, datasets, groups, the root group,
 * and (in place) delete what the domain no longer has.
 */
#include "h5osfs/ingest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "h5osfs/clock.h"
#include "h5osfs/h5type.h"
#include "h5osfs/hjson.h"
#include "h5osfs/log.h"
#include "ingest_int.h"

#define TIME_STEP 1e-6          /* timestamps of one ingest are distinct and increasing */

/* ---- ids (§1.2) ---- */

static int random_hex(char *out, size_t n)
{
    unsigned char bytes[32];
    if (n > 2 * sizeof bytes || getrandom(bytes, (n + 1) / 2, 0) != (ssize_t)((n + 1) / 2))
        return -EIO;
    for (size_t i = 0; i < n; i++)
        out[i] = "0123456789abcdef"[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    return 0;
}

static void format_id(char cls, const char *hex, char out[SCHEMA_ID_BUF])
{
    snprintf(out, SCHEMA_ID_BUF, "%c-%.8s-%.8s-%.4s-%.6s-%.6s", cls, hex, hex + 8, hex + 16,
             hex + 20, hex + 26);
}

int ingest_new_root_id(char out[SCHEMA_ID_BUF])
{
    char hex[32];
    if (random_hex(hex, 16) != 0)
        return -EIO;
    for (int i = 0; i < 16; i++)
        hex[16 + i] = (char)schema_hex_rot(hex[i]);     /* the root rule (§1.3) */
    format_id('g', hex, out);
    return 0;
}

int ingest_new_id(const struct ingest *g, char cls, char out[SCHEMA_ID_BUF])
{
    char hex[32];
    const char *r = g->root + 2;    /* "A-B-..." : the first 16 digits come from the root */
    memcpy(hex, r, 8);
    memcpy(hex + 8, r + 9, 8);
    if (random_hex(hex + 16, 16) != 0)
        return -EIO;
    format_id(cls, hex, out);
    return 0;
}

/* ---- shared helpers ---- */

int ingest_order_tracked(hid_t cpl, herr_t (*get)(hid_t, unsigned *))
{
    unsigned flags = 0;
    if (cpl < 0)
        return 0;
    if (get(cpl, &flags) < 0)
        flags = 0;
    H5Pclose(cpl);
    return (flags & H5P_CRT_ORDER_TRACKED) != 0;
}

double ingest_now(struct ingest *g)
{
    double t = clock_wall();
    if (t <= g->last_time)
        t = g->last_time + TIME_STEP;
    g->last_time = t;
    return t;
}

void ingest_change(struct ingest *g, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
        msg[0] = '\0';
    va_end(ap);
    log_warn("%s: %s: %s", g->log_name, path, msg);
    g->stats->changes++;
}

int ingest_keep(struct ingest *g, const char *key)
{
    return g->keep ? strmap_put(g->keep, key, (void *)1, NULL) : 0;
}

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
        return -ENOENT;         /* dangling: stored as a null reference */
    const char *found = ingest_id_of_object(g, obj);
    H5Oclose(obj);
    if (!found)
        return -ENOENT;
    memcpy(id, found, SCHEMA_ID_BUF);
    return 0;
}

static void stage(struct ingest *g, enum ingest_stage s)
{
    if (g->cfg->on_stage)
        g->cfg->on_stage(g->cfg->ctx, s);
}

/* ---- the stored domain (in place) ---- */

static json_t *load_json(struct ingest *g, const char *id)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf = { 0 };
    if (schema_obj_key(id, key, sizeof key) != 0 ||
        store_get(g->cfg->store, key, INGEST_JSON_MAX, &buf) != 0)
        return NULL;
    json_t *j = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

static int old_put(struct ingest *g, char cls, const char *path, json_t *j)
{
    char *key = NULL;
    if (asprintf(&key, "%c%s", cls, path) < 0)
        return -ENOMEM;
    void *prev = NULL;
    int rc = strmap_get(g->old_by_path, key) ? 1 : strmap_put(g->old_by_path, key, j, &prev);
    free(key);
    return rc;
}

/* The stored objects by first path, breadth first over hard links like ingest_walk. */
static int load_old(struct ingest *g)
{
    json_t *queue = json_array(), *seen = json_object();
    json_t *root = load_json(g, g->root);
    int rc = queue && seen && root ? 0 : -EIO;
    if (rc == 0 && (json_array_append_new(queue, json_pack("[s,O]", "/", root)) != 0 ||
                    old_put(g, 'g', "/", root) != 0))
        rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < json_array_size(queue); i++) {
        const char *path = json_string_value(json_array_get(json_array_get(queue, i), 0));
        json_t *grp = json_array_get(json_array_get(queue, i), 1);
        const char *name;
        json_t *l;
        json_object_foreach(json_object_get(grp, "links"), name, l) {
            const char *id = json_string_value(json_object_get(l, "id"));
            int cls = id ? schema_id_class(id) : -1;
            if ((cls != 'g' && cls != 'd' && cls != 't') || json_object_get(seen, id) ||
                strncmp(id + 2, g->root + 2, 17) != 0)
                continue;
            json_t *j = load_json(g, id);
            char *child = NULL;
            if (!j || asprintf(&child, "%s/%s", strcmp(path, "/") ? path : "", name) < 0) {
                json_decref(j);
                continue;       /* missing objects: nothing to keep */
            }
            json_object_set_new(seen, id, json_true());
            int put = old_put(g, (char)cls, child, j);
            if (put == 1)
                json_decref(j);     /* a second link of that name cannot be: keep the first */
            if (put < 0 ||
                (cls == 'g' && json_array_append_new(queue, json_pack("[s,O]", child, j))))
                rc = -ENOMEM;
            free(child);
        }
    }
    if (rc == -EIO)
        log_error("%s: root group %s cannot be read", g->log_name, g->root);
    json_decref(queue);
    json_decref(seen);
    return rc;
}

static void old_free(void *v)
{
    json_decref(v);
}

/* A dataset keeps its id only with the same type and rank (ingest.h). */
static int same_type_and_rank(struct ingest *g, const struct ingest_obj *o, const json_t *old)
{
    hid_t d = H5Dopen2(g->file, o->path, H5P_DEFAULT);
    hid_t t = d < 0 ? -1 : H5Dget_type(d), s = d < 0 ? -1 : H5Dget_space(d);
    json_t *type = t < 0 ? NULL : h5type_to_json(t, NULL, 0);
    json_t *otype = json_deep_copy(json_object_get(old, "type"));
    const json_t *shape = json_object_get(old, "shape");
    json_object_del(otype, "id");
    int rank = s < 0 ? -1 : H5Sget_simple_extent_ndims(s);
    int orank = (int)json_array_size(json_object_get(shape, "dims"));
    int same = type && otype && json_equal(type, otype) && rank == orank &&
               (H5Sget_simple_extent_type(s) == H5S_NULL) ==
                   (strcmp(json_string_value(json_object_get(shape, "class")), "H5S_NULL") == 0);
    json_decref(type);
    json_decref(otype);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (d >= 0)
        H5Dclose(d);
    return same;
}

static int settle_ids(struct ingest *g)
{
    for (size_t i = 1; i < g->n_objs; i++) {
        struct ingest_obj *o = &g->objs[i];
        char key[4096];
        snprintf(key, sizeof key, "%c%s", o->cls, o->path);
        json_t *old = strmap_get(g->old_by_path, key);
        const char *id = json_string_value(json_object_get(old, "id"));
        if (!id || (o->cls == 'd' && !same_type_and_rank(g, o, old)))
            continue;
        snprintf(o->id, sizeof o->id, "%s", id);
        o->old = json_incref(old);
    }
    g->objs[0].old = json_incref(strmap_get(g->old_by_path, "g/"));
    return 0;
}

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

/* In place: 1 if o is stored as it is (not to be written); timestamps carried over. */
static int settle_times(struct ingest_obj *o)
{
    if (!o->old)
        return 0;
    keep_member_times(json_object_get(o->json, "links"), json_object_get(o->old, "links"));
    keep_member_times(json_object_get(o->json, "attributes"),
                      json_object_get(o->old, "attributes"));
    if (json_object_get(o->old, "created"))
        json_object_set(o->json, "created", json_object_get(o->old, "created"));
    if (!ingest_json_same(o->json, o->old))
        return 0;
    json_object_set(o->json, "lastModified", json_object_get(o->old, "lastModified"));
    return 1;
}

/* ---- writing ---- */

static int put_object(struct ingest *g, struct ingest_obj *o)
{
    char key[STORE_KEY_MAX + 1];
    if (o->dropped || !o->json)
        return 0;
    if (schema_obj_key(o->id, key, sizeof key) != 0 || ingest_keep(g, key) != 0)
        return -ENOMEM;
    if (o->cls == 'g')
        g->stats->groups++;
    else if (o->cls == 'd')
        g->stats->datasets++;
    else
        g->stats->datatypes++;
    if (o->unchanged) {
        g->stats->objects_unchanged++;
        return 0;
    }
    return ingest_put_json(g, key, o->json, o->path);
}

static int put_class(struct ingest *g, char cls)
{
    int rc = 0;
    for (size_t i = 1; i < g->n_objs && rc == 0; i++)
        if (g->objs[i].cls == cls)
            rc = put_object(g, &g->objs[i]);
    return rc;
}

static int build_all(struct ingest *g)
{
    static const char order[] = "tdg";
    int rc = 0;
    for (int pass = 0; pass < 3 && rc == 0; pass++)
        for (size_t i = 0; i < g->n_objs && rc == 0; i++)
            if (g->objs[i].cls == order[pass])
                rc = ingest_build_json(g, &g->objs[i]);
    return rc;
}

static int store_chunks(struct ingest *g)
{
    unsigned workers = g->cfg->workers ? g->cfg->workers : 1;
    int rc = ingest_pool_start(g, workers, &g->pool);
    for (size_t i = 0; i < g->n_objs && rc == 0; i++)
        if (g->objs[i].cls == 'd')
            rc = ingest_dataset_chunks(g, &g->objs[i]);
    int prc = ingest_pool_stop(g->pool);
    g->pool = NULL;
    return rc ? rc : prc;
}

static int write_all(struct ingest *g)
{
    int rc = store_chunks(g);
    if (rc != 0)
        return rc;
    stage(g, INGEST_STAGE_CHUNKS_DONE);
    for (size_t i = 0; i < g->n_objs; i++)
        g->objs[i].unchanged = g->in_place && settle_times(&g->objs[i]);
    if ((rc = put_class(g, 't')) || (rc = put_class(g, 'd')) || (rc = put_class(g, 'g')))
        return rc;
    stage(g, INGEST_STAGE_METADATA_DONE);
    if ((rc = put_object(g, &g->objs[0])) != 0)
        return rc;
    stage(g, INGEST_STAGE_ROOT_DONE);
    return 0;
}

/* In place, last: every key under the root's prefix this ingest did not keep, chunks before
 * the JSON objects (as HSDS deletes a dataset). The summary .info.json stays. */
static int delete_stale(struct ingest *g)
{
    char prefix[32];
    struct store_list list = { 0 };
    snprintf(prefix, sizeof prefix, "db/%.8s-%.8s/", g->root + 2, g->root + 11);
    int rc = store_list(g->cfg->store, prefix, NULL, NULL, 0, &list);
    if (rc != 0) {
        log_error("%s: %s cannot be listed (%s)", g->log_name, prefix, strerror(-rc));
        return rc;
    }
    for (int json_pass = 0; json_pass < 2 && rc == 0; json_pass++)
        for (size_t i = 0; i < list.n_objects && rc == 0; i++) {
            const char *key = list.objects[i].key;
            size_t len = strlen(key);
            int is_json = len > 5 && strcmp(key + len - 5, ".json") == 0;
            if (is_json != json_pass || strmap_get(g->keep, key) ||
                strcmp(key + strlen(prefix), ".info.json") == 0)
                continue;
            rc = store_delete(g->cfg->store, key);
            if (rc == -ENOENT)
                rc = 0;
            else if (rc != 0)
                log_error("%s: %s cannot be deleted (%s)", g->log_name, key, strerror(-rc));
            else
                g->stats->objects_deleted++;
        }
    store_list_free(&list);
    return rc;
}

/* ---- entry points ---- */

static int open_file(struct ingest *g)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);  /* failures are logged by us, once */
    htri_t ok = H5Fis_hdf5(g->h5path);  /* H5Fis_accessible is 1.12 */
    g->file = ok > 0 ? H5Fopen(g->h5path, H5F_ACC_RDONLY, H5P_DEFAULT) : H5I_INVALID_HID;
    if (g->file < 0) {
        log_error("%s: %s is not an HDF5 file HDF5 can open", g->log_name, g->h5path);
        return -EINVAL;
    }
    /* raw chunks of a new root go from this fd to the store (copy_file_range); in place they
     * are compared with the stored ones, so they are read through HDF5 */
    hid_t fcpl = H5Fget_create_plist(g->file);
    hsize_t userblock = 0;
    if (!g->in_place && fcpl >= 0 && H5Pget_userblock(fcpl, &userblock) >= 0)
        g->raw_fd = open(g->h5path, O_RDONLY | O_CLOEXEC);
    g->base_addr = userblock;
    if (fcpl >= 0)
        H5Pclose(fcpl);
    return 0;
}

static int run(struct ingest *g)
{
    int rc = open_file(g);
    if (rc != 0)
        return rc;
    if (!(g->by_addr = strmap_new()))
        rc = -ENOMEM;
    if (rc == 0)
        rc = ingest_walk(g);
    if (rc == 0 && g->in_place && (rc = load_old(g)) == 0)
        rc = settle_ids(g);
    if (rc == 0)
        rc = build_all(g);
    if (rc == 0)
        rc = write_all(g);
    if (rc == 0 && g->in_place)
        rc = delete_stale(g);
    ingest_objs_free(g);
    strmap_free(g->by_addr, NULL);
    if (g->raw_fd >= 0)
        close(g->raw_fd);
    if (H5Fclose(g->file) < 0 && rc == 0) {
        log_error("%s: %s could not be closed", g->log_name, g->h5path);
        rc = -EIO;
    }
    return rc;
}

static int start(const struct ingest_config *cfg, const char *h5path, const char *log_name,
                 const char *root, struct ingest_stats *stats, int in_place)
{
    struct ingest g = { .cfg = cfg, .log_name = log_name, .h5path = h5path, .stats = stats,
                        .in_place = in_place, .file = H5I_INVALID_HID, .raw_fd = -1 };
    memset(stats, 0, sizeof *stats);
    if (in_place && schema_id_version(root) == 1)
        return -ENOTSUP;
    if (schema_id_is_root(root) != 1) {
        log_error("%s: %s is not a v2 root group id", log_name, root);
        return -EINVAL;
    }
    snprintf(g.root, sizeof g.root, "%s", root);
    if (in_place && (!(g.old_by_path = strmap_new()) || !(g.keep = strmap_new()))) {
        strmap_free(g.old_by_path, NULL);
        return -ENOMEM;
    }
    int rc = run(&g);
    strmap_free(g.old_by_path, old_free);
    strmap_free(g.keep, NULL);
    if (rc == 0)
        log_info("%s: stored from %s: %llu groups, %llu datasets, %llu chunks (%llu copied), "
                 "%llu unchanged, %llu deleted, %llu changes", log_name, h5path,
                 (unsigned long long)stats->groups, (unsigned long long)stats->datasets,
                 (unsigned long long)stats->chunks_written, (unsigned long long)stats->chunks_raw,
                 (unsigned long long)stats->objects_unchanged,
                 (unsigned long long)stats->objects_deleted, (unsigned long long)stats->changes);
    return rc;
}

int ingest_new(const struct ingest_config *cfg, const char *h5path, const char *log_name,
               const char *root, struct ingest_stats *stats)
{
    return start(cfg, h5path, log_name, root, stats, 0);
}

int ingest_in_place(const struct ingest_config *cfg, const char *h5path, const char *log_name,
                    const char *root, struct ingest_stats *stats)
{
    return start(cfg, h5path, log_name, root, stats, 1);
}
