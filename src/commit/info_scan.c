/*
 * info_scan: the scan of a committed root behind info_write (info.h): its keys listed as
 * HSDS's storage driver lists them (sizes, mtimes, ETags: MD5s read from a local bucket's
 * bytes), the datasets' JSON and their chunk tables' chunks loaded, src/commit/info.c's
 * summary made of them and put at db/A-B/.info.json.
 */
#include "h5osfs/commit/info.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/strmap.h"
#include "h5osfs/util/testhook.h"
#include "info_int.h"

#define DATASET_JSON_MAX INFO_DATASET_JSON_MAX
#define MD5_PIECE (8u << 20) /* bytes read at once for an object's MD5 */

/* ---- the scan of a committed root ---- */

struct listed {
    struct info_object o;
    int have_stat;
    int rc;
};

struct scan_job {
    struct store *st;
    const atomic_int *abandon; /* NULL: never */
    int hsds_s3;               /* HSDS's S3 driver: ETags and whole seconds from the listing */
    struct listed *v;
    size_t n, cap;
    struct strmap *tables; /* ids of the chunk tables of the listed datasets */
};

/* store_list_keys's callback: keep the keys HSDS's scan counts. */
static int add_listed(void *ctx, const char *key, const struct store_stat *st)
{
    struct scan_job *j = ctx;
    char id[STORE_KEY_MAX + 1];
    if (info_object_id(key, id, sizeof id) != 0)
        return 0;
    void *grown = grow_array(j->v, &j->cap, j->n + 1, sizeof *j->v, 64);
    if (!grown)
        return -ENOMEM;
    j->v = grown;
    struct listed *l = &j->v[j->n];
    memset(l, 0, sizeof *l);
    l->o.key = strdup(key);
    if (!l->o.key)
        return -ENOMEM;
    j->n++;
    if (st) {
        l->have_stat = 1;
        l->o.size = st->size;
        l->o.mtime = st->mtime;
        if (j->hsds_s3 && *st->etag) /* botocore keeps the listing's quotes */
            snprintf(l->o.etag, sizeof l->o.etag, "\"%s\"", st->etag);
    }
    return 0;
}

/* HSDS's POSIX driver's ETag: the MD5 hex of the object's bytes. */
static int md5_of_object(struct store *st, const char *key, uint64_t size, char hex[33])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = ctx && EVP_DigestInit_ex(ctx, EVP_md5(), NULL) == 1 ? 0 : -ENOMEM;
    for (uint64_t off = 0; rc == 0 && off < size;) {
        struct store_buf buf;
        rc = store_get_range(st, key, off, MD5_PIECE, &buf);
        if (rc != 0)
            break;
        rc = EVP_DigestUpdate(ctx, buf.data, buf.len) == 1 ? 0 : -ENOMEM;
        off = buf.len ? off + buf.len : size;
        store_buf_free(&buf);
    }
    if (rc == 0 && (EVP_DigestFinal_ex(ctx, md, &len) != 1 || len != 16))
        rc = -ENOMEM;
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; rc == 0 && i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return rc;
}

static int load_dataset_json(struct store *st, struct info_object *o)
{
    struct store_buf buf;
    char why[200];
    int rc = store_get(st, o->key, DATASET_JSON_MAX, &buf);
    if (rc != 0)
        return rc;
    o->doc = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    return o->doc ? 0 : -EINVAL;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* What the listing did not give: stat, ETag, a dataset's JSON. */
static int abandoned(const struct scan_job *j)
{
    return j->abandon && atomic_load(j->abandon);
}

static void complete_one(void *ctx, size_t i)
{
    struct scan_job *j = ctx;
    struct listed *l = &j->v[i];
    struct store_stat st = { 0 };
    testhook_pause_at("summary", j->abandon);
    if (abandoned(j)) {
        l->rc = -ECANCELED;
        return;
    }
    int rc = l->have_stat ? 0 : store_head(j->st, l->o.key, &st);
    if (rc == 0 && !l->have_stat) {
        l->o.size = st.size;
        l->o.mtime = st.mtime;
    }
    if (rc == 0 && !j->hsds_s3)
        rc = md5_of_object(j->st, l->o.key, l->o.size, l->o.etag);
    if (rc == 0 && has_suffix(l->o.key, "/.dataset.json"))
        rc = load_dataset_json(j->st, &l->o);
    l->rc = rc;
}

static void scan_job_free(struct scan_job *j)
{
    for (size_t i = 0; i < j->n; i++) {
        free(j->v[i].o.key);
        json_decref(j->v[i].o.doc);
        free(j->v[i].o.bytes);
    }
    free(j->v);
    strmap_free(j->tables, NULL);
}

/* The chunk tables the listed H5D_CHUNKED_REF_INDIRECT datasets name. 0 or -ENOMEM. */
static int find_tables(struct scan_job *j)
{
    j->tables = strmap_new();
    for (size_t i = 0; j->tables && i < j->n; i++) {
        const json_t *lay = info_dataset_layout(j->v[i].o.doc);
        const char *cls = hjson_text(json_object_get(lay, "class"));
        const char *table = hjson_text(json_object_get(lay, "chunk_table"));
        if (cls && table && strcmp(cls, "H5D_CHUNKED_REF_INDIRECT") == 0 &&
            strmap_put(j->tables, table, (void *)table, NULL) != 0)
            return -ENOMEM;
    }
    return j->tables ? 0 : -ENOMEM;
}

/* The bytes of a chunk of a chunk table (the linked chunks are counted from them). */
static void load_table_chunk(void *ctx, size_t i)
{
    struct scan_job *j = ctx;
    struct listed *l = &j->v[i];
    char id[STORE_KEY_MAX + 1], dset_id[SCHEMA_ID_BUF];
    struct store_buf buf;
    if (info_object_id(l->o.key, id, sizeof id) != 0 || id[0] != 'c')
        return;
    snprintf(dset_id, sizeof dset_id, "d-%.36s", strchr(id, '-') + 1);
    if (!strmap_get(j->tables, dset_id))
        return;
    if (abandoned(j)) {
        l->rc = -ECANCELED;
        return;
    }
    l->rc = store_get(j->st, l->o.key, DATASET_JSON_MAX, &buf);
    if (l->rc == 0) {
        l->o.bytes = buf.data;
        l->o.len = buf.len;
    }
}

static int first_failure(const struct scan_job *j)
{
    if (abandoned(j))
        return -ECANCELED; /* logged once by info_write */
    for (size_t i = 0; i < j->n; i++) {
        if (j->v[i].rc != 0) {
            log_warn("%s: cannot read it for the domain summary (%s): no .info.json", j->v[i].o.key,
                     strerror(-j->v[i].rc));
            return j->v[i].rc;
        }
    }
    return 0;
}

/* The listed objects in listing order, each completed; or the first failure, logged. */
static int scan_root(struct scan_job *j, const char *prefix, unsigned workers)
{
    int rc = store_list_keys(j->st, prefix, add_listed, j);
    if (rc != 0) {
        log_warn("%s: cannot list the root's keys (%s): no .info.json", prefix, strerror(-rc));
        return rc;
    }
    pfor(j->n, workers ? workers : 1, complete_one, j);
    rc = first_failure(j);
    if (rc == 0 && (rc = find_tables(j)) != 0)
        log_warn("%s: out of memory for the domain summary: no .info.json", prefix);
    if (rc == 0 && strmap_count(j->tables)) {
        pfor(j->n, workers ? workers : 1, load_table_chunk, j);
        rc = first_failure(j);
    }
    return rc;
}

static int summary_text(const struct scan_job *j, const char *bucket, double start, char **text)
{
    struct info_object *objs = calloc(j->n ? j->n : 1, sizeof *objs);
    if (!objs)
        return -ENOMEM;
    for (size_t i = 0; i < j->n; i++)
        objs[i] = j->v[i].o;
    struct info_scan scan = { .bucket = bucket,
                              .whole_seconds = j->hsds_s3,
                              .scan_start = start,
                              .scan_complete = clock_wall(),
                              .objects = objs,
                              .n = j->n };
    int rc = info_text(&scan, text);
    free(objs);
    return rc;
}

void info_write(struct store *st, const char *bucket, const char *root, unsigned workers,
                const atomic_int *abandon)
{
    char key[STORE_KEY_MAX + 1], prefix[STORE_KEY_MAX + 1], *text = NULL;
    if (schema_id_version(root) != 2)
        return; /* HSDS: "no tabulation for schema v1" */
    if (schema_info_key(root, key, sizeof key) != 0) {
        log_warn("%s: not a root id: no .info.json", root);
        return;
    }
    snprintf(prefix, sizeof prefix, "%.*s", (int)(strrchr(key, '/') + 1 - key), key);
    /* Only HSDS's S3 driver takes ETags (and whole-second times) from the listing. */
    struct scan_job j = { .st = st,
                          .abandon = abandon,
                          .hsds_s3 = strcmp(st->ops->name, "s3") == 0 };
    double start = clock_wall(), t0 = clock_monotonic();
    int rc = scan_root(&j, prefix, workers);
    if (rc == -ECANCELED)
        log_warn("%s: stopping: the domain summary was abandoned half-way: no .info.json", key);
    if (rc == 0) {
        rc = summary_text(&j, bucket, start, &text);
        if (rc != 0)
            log_warn("%s: no domain summary can be made: %s", key, strerror(-rc));
    }
    if (rc == 0 && (rc = store_put(st, key, text, strlen(text))) != 0)
        log_warn("%s: the domain summary cannot be written: %s", key, strerror(-rc));
    log_debug("%s: %zu objects summarised in %.3f s", key, j.n, clock_monotonic() - t0);
    free(text);
    scan_job_free(&j);
}
