/* pool: whose version pool a pooled chunk table may name (pool.h). */
#include "h5osfs/schema/pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/schema/vlist.h"

#define DOMAIN_JSON_MAX (1u << 20)
#define KEY_BUF 1026 /* a key of the store (at most 1024 bytes, S3's limit), or a path: one more */
#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), -EINVAL)

/* claimed is the pool domain's version list names. */
static int list_names_pool(const char *domain, const char *claimed,
                           const struct schema_fetch *fetch, char *why, size_t why_len)
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
    rc =
        strcmp(l.pool, claimed) == 0 ? 0 : WHY("pool %s is not the domain's (%s)", claimed, l.pool);
    vlist_free(&l);
    return rc;
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

int schema_pool_check(const char *domain_path, const char *root_id, const char *claimed,
                      const struct schema_fetch *fetch, char *why, size_t why_len)
{
    char domain[KEY_BUF];
    if (schema_is_versions_path(domain_path) == 1) {
        if (schema_version_domain_of(domain_path, domain, sizeof domain) != 0)
            return WHY("a pool layout outside a domain's versions");
        return list_names_pool(domain, claimed, fetch, why, why_len);
    }
    int rc = current_in_ref_mode(domain_path, root_id, fetch, why, why_len);
    return rc == 0 ? list_names_pool(domain_path, claimed, fetch, why, why_len) : rc;
}
