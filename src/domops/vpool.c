/* vpool: see include/h5osfs/domops/vpool.h. */
#include "h5osfs/domops/vpool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/log.h"

#define MARKER_MAX 8192       /* {"domain": path}: a path of at most 1024 bytes, escaped */
#define GROUP_MAX (64u << 20) /* a root group's JSON (its links), as HSDS allows */
#define MARKER_NAME ".h5osfs-pool"

static int marker_key(const char *pool, char *key, size_t len)
{
    return schema_pool_marker_key(pool, key, len);
}

int vpool_claim(struct store *store, const char *pool, const char *domain)
{
    char key[64];
    int rc = marker_key(pool, key, sizeof key);
    json_t *doc = rc == 0 ? json_pack("{s:s}", "domain", domain) : NULL;
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    if (rc == 0 && !text)
        rc = -ENOMEM;
    if (rc == 0)
        rc = store_put(store, key, text, strlen(text));
    free(text);
    json_decref(doc);
    return rc;
}

/* key's JSON, parsed; NULL with *rc: -ENOENT, -errno of the store, or 0 for a body that is
 * no JSON object (why says so). */
static json_t *load_json(struct store *store, const char *key, size_t max, int *rc, char *why,
                         size_t why_len)
{
    struct store_buf buf = { 0 };
    *rc = store_get(store, key, max, &buf);
    json_t *doc = *rc == 0 ? hjson_loadb((const char *)buf.data, buf.len, why, why_len) : NULL;
    store_buf_free(&buf);
    if (doc && !json_is_object(doc)) {
        snprintf(why, why_len, "not a JSON object");
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

/* What pool's marker says of domain: 1 it names domain, -ENOENT there is none, -EPERM it
 * names another domain or none (*why says which), other -errno: the store cannot tell. */
static int marker_says(struct store *store, const char *pool, const char *domain, char *why,
                       size_t why_len)
{
    char key[64];
    int rc = marker_key(pool, key, sizeof key);
    if (rc != 0) {
        snprintf(why, why_len, "%s is no root id", pool);
        return -EPERM;
    }
    json_t *doc = load_json(store, key, MARKER_MAX, &rc, why, why_len);
    const char *named = hjson_text(json_object_get(doc, "domain"));
    int owned = named && strcmp(named, domain) == 0;
    if (!owned && rc == 0)
        snprintf(why, why_len, "%s",
                 named  ? "its marker names another domain"
                 : *why ? why
                        : "its marker names no domain");
    json_decref(doc);
    return owned ? 1 : rc == 0 ? -EPERM : rc;
}

int vpool_owned_by(struct store *store, const char *pool, const char *domain)
{
    char why[200] = "";
    int rc = marker_says(store, pool, domain, why, sizeof why);
    if (rc == -ENOENT || rc == -EPERM)
        log_error("%s: pool %s is not this domain's (%s): nothing of it is deleted", domain, pool,
                  rc == -ENOENT ? "it has no marker " MARKER_NAME : why);
    return rc == 1 ? 1 : rc == -ENOENT || rc == -EPERM ? 0 : rc;
}

int vpool_may_keep(struct store *store, const char *pool, const char *domain)
{
    char why[200] = "";
    int rc = marker_says(store, pool, domain, why, sizeof why);
    if (rc == -EPERM)
        log_error("%s: its version list names pool %s, which is not its own (%s): no version "
                  "is kept until the list is repaired",
                  domain, pool, why);
    return rc == 1 || rc == -ENOENT ? 0 : rc;
}

int vpool_root_of(struct store *store, const char *root, const char *pool, const char *domain)
{
    char key[64], why[200] = "";
    int rc = 0;
    if (schema_id_is_root(root) != 1 || schema_id_is_root(pool) != 1 ||
        snprintf(key, sizeof key, "db/%.17s/.group.json", root + 2) >= (int)sizeof key) {
        log_error("%s: version root %s is no root id: not collected", domain, root);
        return 0;
    }
    json_t *doc = load_json(store, key, GROUP_MAX, &rc, why, sizeof why);
    if (rc == -ENOENT)
        return rc; /* a pool has none, nor has a root the collector got to first */
    const char *named =
        hjson_text(json_object_get(json_object_get(doc, SCHEMA_H5OSFS_MEMBER), "pool"));
    int ours = named && strcmp(named, pool) == 0;
    if (!ours && rc == 0)
        log_error("%s: root %s is not a version over pool %s (%s): not collected", domain, root,
                  pool,
                  named  ? "its root group names another pool"
                  : *why ? why
                         : "its root "
                           "group names no pool");
    json_decref(doc);
    return ours ? 1 : rc == 0 ? 0 : rc;
}
