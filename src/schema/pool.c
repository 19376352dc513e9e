/* pool: whose version pool a pooled chunk table may name (pool.h). */
#include "h5osfs/schema/pool.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/schema/vlist.h"

#define DOMAIN_JSON_MAX (1u << 20)
#define KEY_BUF 1026 /* a key of the store (at most 1024 bytes, S3's limit), or a path: one more */
#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), -EINVAL)

/* The pool's marker (domops/vpool.h) names domain: the list alone may be forged to name
 * another domain's pool. A pool without one was made before markers: taken. */
static int marker_allows(const char *domain, const char *pool, const struct schema_fetch *fetch,
                         char *why, size_t why_len)
{
    char key[KEY_BUF], named[KEY_BUF] = "";
    unsigned char *data = NULL;
    size_t len = 0;
    if (schema_pool_marker_key(pool, key, sizeof key) != 0)
        return WHY("pool %s is no root id", pool);
    int rc = fetch->get(fetch->ctx, key, SCHEMA_POOL_MARKER_MAX, &data, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc == -ENOMEM)
        return rc;
    int ok = rc == 0 && schema_pool_marker_names(data, len, domain, named, sizeof named);
    free(data);
    return ok       ? 0
           : rc     ? WHY("pool %s: its marker cannot be read (%s)", pool, strerror(-rc))
           : *named ? WHY("pool %s is another domain's (%.200s)", pool, named)
                    : WHY("pool %s: its marker names no domain", pool);
}

/* Whether the list has root_id as a version: kept, or removed but not yet collected (the
 * sweep keeps what such an entry names while its root exists). */
static int lists_root(const struct vlist *l, const char *root_id)
{
    if (l->dropping || !root_id)
        return 0;
    for (size_t i = 0; i < l->n_entries; i++)
        if (!l->entries[i].error && strcmp(l->entries[i].root, root_id) == 0)
            return 1;
    return 0;
}

/* The pool domain's version list names, into pool (SCHEMA_ID_BUF); *listed: the list has
 * root_id (NULL: not asked) as a version. */
static int list_pool(const char *domain, const struct schema_fetch *fetch, const char *root_id,
                     char *pool, int *listed, char *why, size_t why_len)
{
    char key[KEY_BUF], lwhy[160] = "";
    unsigned char *data = NULL;
    size_t len = 0;
    struct vlist l;
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return WHY("a pool layout outside a domain's versions");
    int rc = fetch->get(fetch->ctx, key, VLIST_MAX_BYTES, &data, &len);
    if (rc == 0)
        rc = vlist_parse((const char *)data, len, &l, lwhy, sizeof lwhy);
    free(data);
    if (rc == -ENOMEM)
        return rc;
    if (rc != 0)
        return WHY("version list %s unusable (%s)", key, *lwhy ? lwhy : strerror(-rc));
    snprintf(pool, SCHEMA_ID_BUF, "%s", l.pool);
    *listed = lists_root(&l, root_id);
    vlist_free(&l);
    return 0;
}

/* The current domain at path is in ref mode and names root_id. */
static int current_in_ref_mode(const char *path, const char *root_id,
                               const struct schema_fetch *fetch, char *why, size_t why_len)
{
    char key[KEY_BUF], jwhy[160];
    unsigned char *data = NULL;
    size_t len = 0;
    if (schema_domain_key(path, key, sizeof key) != 0)
        return WHY("a pool layout outside a domain's versions");
    int rc = fetch->get(fetch->ctx, key, DOMAIN_JSON_MAX, &data, &len);
    json_t *dom = rc == 0 ? hjson_loadb((const char *)data, len, jwhy, sizeof jwhy) : NULL;
    free(data);
    const json_t *own = json_object_get(dom, SCHEMA_H5OSFS_MEMBER);
    const char *mode = hjson_text(json_object_get(own, SCHEMA_CURRENT_REF));
    const char *root = hjson_text(json_object_get(dom, "root"));
    int ref = mode && strcmp(mode, "ref") == 0 && root && root_id && strcmp(root, root_id) == 0;
    json_decref(dom);
    return ref ? 0
               : WHY("a pool layout outside a domain's versions, in a domain that does not "
                     "name its head version (ref mode)");
}

/* The current domain at path, whose root being read is root_id, may name its pool: that
 * root is a version of its list (the sweep keeps what versions name), or the domain object
 * names it in ref mode. The list is asked first: a build that read the domain before
 * another mount's commit swapped it to the next version still reads the one it chose. */
static int current_may_name_pool(const char *path, const char *root_id, int listed,
                                 const struct schema_fetch *fetch, char *why, size_t why_len)
{
    return listed ? 0 : current_in_ref_mode(path, root_id, fetch, why, why_len);
}

/* claimed is the pool the version list of domain names; root_id (NULL for a kept version,
 * which its list named already) is the current domain's root being read. */
static int list_names_pool(const char *domain, const char *root_id, const char *claimed,
                           const struct schema_fetch *fetch, char *why, size_t why_len)
{
    char pool[SCHEMA_ID_BUF];
    int listed = 0;
    int rc = list_pool(domain, fetch, root_id, pool, &listed, why, why_len);
    if (rc == 0 && root_id)
        rc = current_may_name_pool(domain, root_id, listed, fetch, why, why_len);
    if (rc == 0 && strcmp(pool, claimed) != 0)
        rc = WHY("pool %s is not the domain's (%s)", claimed, pool);
    return rc == 0 ? marker_allows(domain, claimed, fetch, why, why_len) : rc;
}

int schema_pool_check(const char *domain_path, const char *root_id, const char *claimed,
                      const struct schema_fetch *fetch, char *why, size_t why_len)
{
    char domain[KEY_BUF];
    if (schema_is_versions_path(domain_path) == 1) {
        if (schema_version_domain_of(domain_path, domain, sizeof domain) != 0)
            return WHY("a pool layout outside a domain's versions");
        return list_names_pool(domain, NULL, claimed, fetch, why, why_len);
    }
    if (!root_id)
        return WHY("a pool layout outside a domain's versions");
    return list_names_pool(domain_path, root_id, claimed, fetch, why, why_len);
}

/* The pool domain_path, whose root being read is root_id, may name (pool.h): its list's, for
 * the current domain only where that root is a version of it, and only while the pool's
 * marker allows the domain. into pool (SCHEMA_ID_BUF). 0, -EINVAL (why), -ENOMEM. */
static int own_pool(const char *domain_path, const char *root_id, const struct schema_fetch *fetch,
                    char *pool, char *why, size_t why_len)
{
    char domain[KEY_BUF];
    const char *current_root = NULL;
    int listed = 0;
    if (schema_is_versions_path(domain_path) == 1) {
        if (schema_version_domain_of(domain_path, domain, sizeof domain) != 0)
            return WHY("a pool named outside a domain's versions");
    } else if (!root_id ||
               snprintf(domain, sizeof domain, "%s", domain_path) >= (int)sizeof domain) {
        return WHY("a pool named outside a domain's versions");
    } else {
        current_root = root_id;
    }
    int rc = list_pool(domain, fetch, current_root, pool, &listed, why, why_len);
    if (rc == 0 && current_root)
        rc = current_may_name_pool(domain, current_root, listed, fetch, why, why_len);
    return rc == 0 ? marker_allows(domain, pool, fetch, why, why_len) : rc;
}

int schema_pool_file_check(const char *domain_path, const char *root_id, const char *key,
                           const struct schema_fetch *fetch, char pool[SCHEMA_ID_BUF], char *why,
                           size_t why_len)
{
    char want[KEY_BUF], found[SCHEMA_ID_BUF];
    const char *name = schema_pool_file_name(key);
    if (!name)
        return WHY("%.200s is no pool file", key ? key : "(none)");
    if (pool[0]) /* found before: the list and marker were read then */
        return schema_pool_file_key(pool, name, want, sizeof want) == 0 && strcmp(want, key) == 0
                   ? 0
                   : WHY("pool file %.200s is not of the domain's pool (%s)", key, pool);
    int rc = own_pool(domain_path, root_id, fetch, found, why, why_len);
    if (rc == 0 &&
        (schema_pool_file_key(found, name, want, sizeof want) != 0 || strcmp(want, key) != 0))
        rc = WHY("pool file %.200s is not of the domain's pool (%s)", key, found);
    if (rc == 0)
        memcpy(pool, found, SCHEMA_ID_BUF);
    return rc;
}

/* The pool a root group says it is a version over, or NULL. */
static const char *root_pool(const json_t *group)
{
    return hjson_text(json_object_get(json_object_get(group, SCHEMA_H5OSFS_MEMBER), "pool"));
}

int schema_pool_root_names(const json_t *group, const char *pool, char *why, size_t why_len)
{
    const char *named = root_pool(group);
    if (named && strcmp(named, pool) == 0)
        return 1;
    snprintf(why, why_len, "%s",
             named ? "its root group names another pool" : "its root group names no pool");
    return 0;
}

/* The pool of the current domain's root root_id when that root is a version of it (its list
 * has it, or its object names it in ref mode), into pool: 1, its list's and its marker allows
 * the domain; 0, a plain root the domain object names (as an older h5osfs or a hand edit
 * leaves it); -EINVAL (why), -ENOMEM. */
static int current_version_pool(const char *domain, const char *root_id,
                                const struct schema_fetch *fetch, char *pool, char *why,
                                size_t why_len)
{
    int listed = 0, rc = list_pool(domain, fetch, root_id, pool, &listed, why, why_len);
    if (rc == -ENOMEM)
        return rc;
    if (!listed && current_in_ref_mode(domain, root_id, fetch, why, why_len) != 0)
        return 0; /* its pooled tables are refused on their own (schema_pool_check) */
    if (rc == 0)
        rc = marker_allows(domain, pool, fetch, why, why_len);
    return rc == 0 ? 1 : rc;
}

int schema_pool_root_check(const char *domain_path, const char *root_id, const json_t *group,
                           const struct schema_fetch *fetch, char pool[SCHEMA_ID_BUF], char *why,
                           size_t why_len)
{
    char found[SCHEMA_ID_BUF], what[100];
    int rc;
    pool[0] = '\0';
    if (schema_is_versions_path(domain_path) == 1)
        rc = own_pool(domain_path, root_id, fetch, found, why, why_len);
    else if (!root_pool(group) || !root_id)
        return 0; /* a plain root: the domain object's to name, as HSDS reads it */
    else if ((rc = current_version_pool(domain_path, root_id, fetch, found, why, why_len)) <= 0)
        return rc;
    else
        rc = 0;
    if (rc == 0 && !schema_pool_root_names(group, found, what, sizeof what))
        rc = WHY("root %s is not a version over pool %s (%s)", root_id, found, what);
    if (rc == 0)
        memcpy(pool, found, SCHEMA_ID_BUF);
    return rc;
}

int schema_pool_file_named(const json_t *group, char name[33], char etag[SCHEMA_POOL_ETAG_BUF],
                           char *why, size_t why_len)
{
    const json_t *own = json_object_get(group, SCHEMA_H5OSFS_MEMBER);
    const char *file = hjson_text(json_object_get(own, SCHEMA_POOL_FILE));
    const char *kept = hjson_text(json_object_get(own, SCHEMA_POOL_FILE_ETAG));
    name[0] = etag[0] = '\0';
    if (!file) /* an etag belongs to the file named beside it: none named, none kept */
        return 0;
    if (schema_is_md5_hex(file) != 1)
        return WHY("a version names a pool file %.40s that no commit names", file);
    if (kept && (!*kept || strlen(kept) >= SCHEMA_POOL_ETAG_BUF))
        return WHY("the etag a version kept for pool file %s is no store's", file);
    memcpy(name, file, 33);
    if (kept)
        memcpy(etag, kept, strlen(kept) + 1);
    return 0;
}

int schema_pool_file_recorded(const json_t *group, const char *key, char etag[SCHEMA_POOL_ETAG_BUF],
                              char *why, size_t why_len)
{
    char named[33];
    const char *name = schema_pool_file_name(key);
    int rc = schema_pool_file_named(group, named, etag, why, why_len);
    if (rc != 0 || !etag[0]) /* none kept: a version kept before etags, or of no file */
        return rc;
    if (!name || strcmp(named, name) != 0) {
        etag[0] = '\0';
        return WHY("pool file %.200s is not the one its version kept (%s)", key ? key : "", named);
    }
    return 0;
}

int schema_pool_marker_dump(const char *domain, const char *moving_from, char **out)
{
    json_t *doc = json_pack("{s:s}", "domain", domain);
    if (doc && moving_from &&
        json_object_set_new(doc, SCHEMA_POOL_MOVING_FROM, json_string(moving_from)) != 0)
        json_decref(doc), doc = NULL;
    *out = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return *out ? 0 : -ENOMEM;
}

int schema_pool_marker_read(const void *data, size_t len, char *owner, size_t owner_len,
                            char *moving_from, size_t from_len)
{
    char why[160];
    json_t *doc = hjson_loadb((const char *)data, len, why, sizeof why);
    const char *text = hjson_text(json_object_get(doc, "domain"));
    const char *from = hjson_text(json_object_get(doc, SCHEMA_POOL_MOVING_FROM));
    snprintf(owner, owner_len, "%s", text ? text : "");
    snprintf(moving_from, from_len, "%s", from ? from : "");
    json_decref(doc);
    return *owner ? 0 : -EINVAL;
}

int schema_pool_marker_names(const void *data, size_t len, const char *domain, char *named,
                             size_t named_len)
{
    char from[KEY_BUF];
    if (schema_pool_marker_read(data, len, named, named_len, from, sizeof from) != 0)
        return 0;
    return strcmp(named, domain) == 0  ? SCHEMA_POOL_OWNER
           : strcmp(from, domain) == 0 ? SCHEMA_POOL_MOVING
                                       : 0;
}

/* ---- the bytes of a pool object ---- */

int schema_md5_hex(const void *data, size_t len, char out[33])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    if (EVP_Digest(data, len, md, &md_len, EVP_md5(), NULL) != 1 || md_len != 16)
        return -EIO;
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[32] = '\0';
    return 0;
}

const char *schema_pool_key_md5(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    if (n < 3 + 32 + 3 || strncmp(key, "db/", 3) != 0 || strncmp(key + n - 35, "/c/", 3) != 0)
        return NULL;
    return schema_is_md5_hex(key + n - 32) ? key + n - 32 : NULL;
}

int schema_pool_bytes_check(const char *key, const void *data, size_t len, const char *etag,
                            char *why, size_t why_len)
{
    const char *want = schema_pool_key_md5(key);
    char got[33];
    if (!want)
        return WHY("%s is no pool object's key", key ? key : "(none)");
    if (etag && schema_is_md5_hex(etag) && strcmp(etag, want) == 0)
        return 0;
    if (schema_md5_hex(data, len, got) != 0) {
        snprintf(why, why_len, "its MD5 cannot be computed");
        return -EIO;
    }
    if (strcmp(got, want) == 0)
        return 0;
    snprintf(why, why_len, "its %zu bytes have MD5 %s, not the %s its key names", len, got, want);
    return -EIO;
}
