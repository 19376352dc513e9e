/* vdrop: see include/h5osfs/domops/vdrop.h. */
#include "h5osfs/domops/vdrop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/domops/vpool.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/testhook.h"

/* Delete every key below prefix except keep (NULL: none), listed first: the walk is not
 * disturbed by its own deletes. stage (NULL: none) is a crash point after the first delete
 * (testhook.h). 0 or -errno. */
static int delete_below(struct store *store, const char *prefix, const char *keep,
                        const char *stage)
{
    struct store_keys k;
    int rc = store_collect_keys(store, prefix, &k);
    if (rc == -ENOENT)
        rc = 0;
    for (size_t i = 0, done = 0; rc == 0 && i < k.n; i++) {
        if (keep && strcmp(k.keys[i], keep) == 0)
            continue;
        rc = store_delete(store, k.keys[i]);
        rc = rc == -ENOENT ? 0 : rc; /* the collector got there first */
        if (done++ == 0 && stage)
            testhook_crash_at(stage);
    }
    store_keys_free(&k);
    return rc;
}

/* db/<A-B of id>/: every object of a root or of a pool (spec §2.1), the object that shows
 * whose they are last (proof: the root group of a version, the marker of a pool). Until then a
 * collector or sweep running at the same time sees a root it may delete, never objects that
 * no longer show an owner (which it would keep and log). */
static int delete_root(struct store *store, const char *id, const char *proof, const char *stage)
{
    char prefix[64];
    if (strlen(id) < 19)
        return -EINVAL;
    snprintf(prefix, sizeof prefix, "db/%.17s/", id + 2);
    int rc = delete_below(store, prefix, proof, stage);
    if (rc == 0)
        rc = store_delete(store, proof);
    return rc == -ENOENT ? 0 : rc;
}

/* The list at key: 0, -ENOENT, -EIO (logged), -ENOMEM. */
static int read_list(struct store *store, const char *key, struct vlist *l)
{
    struct store_buf buf = { 0 };
    char why[200];
    int rc = store_get(store, key, VLIST_MAX_BYTES, &buf);
    if (rc == 0 && vlist_parse((const char *)buf.data, buf.len, l, why, sizeof why) != 0) {
        log_error("%s: version list unusable (%s): the version folder is not removed", key, why);
        rc = -EIO;
    }
    store_buf_free(&buf);
    return rc == 0 || rc == -ENOENT || rc == -ENOMEM ? rc : -EIO;
}

static int has_a_name(const struct vlist *l)
{
    for (size_t i = 0; i < l->n_entries; i++)
        if (l->entries[i].error || l->entries[i].n_names > 0)
            return 1; /* a broken entry is listed as <n>.h5 too: rm it first */
    return 0;
}

/* A removed version's root, when it is one over pool (vpool.h). 0 (deleted, already gone, or
 * not shown to be one: kept, logged) or -errno. */
static int delete_version_root(struct store *store, const char *domain, const char *root,
                               const char *pool)
{
    char group[STORE_KEY_MAX + 1];
    int rc = vpool_root_of(store, root, pool, domain);
    if (rc == 1 && schema_obj_key(root, group, sizeof group) == 0)
        return delete_root(store, root, group, "dropping version");
    if (rc != -ENOENT)
        return rc < 0 ? rc : 0;
    rc = vpool_root_is_gone(store, root);
    if (rc == 0) /* objects, no root group: a pool, not a version */
        log_error("%s: %s holds objects but no root group: not deleted", domain, root);
    return rc < 0 && rc != -ENOENT ? rc : 0;
}

/* Every removed version's root, then the pool: only those shown to be this domain's
 * (vpool.h); the others stay in the bucket (logged), and the list, which named them, goes. */
static int delete_data(struct store *store, const char *domain, const struct vlist *l)
{
    int rc = l->pool[0] ? vpool_owned_by(store, l->pool, domain) : 0;
    int owned = rc == 1;
    rc = rc < 0 ? rc : 0;
    for (size_t i = 0; owned && rc == 0 && i < l->n_entries; i++)
        rc = delete_version_root(store, domain, l->entries[i].root, l->pool);
    char marker[64];
    if (rc == 0 && owned && schema_pool_marker_key(l->pool, marker, sizeof marker) == 0)
        rc = delete_root(store, l->pool, marker, "dropping pool");
    if (rc != 0)
        log_error("%s: the data of its removed versions cannot all be deleted (%s): the version "
                  "folder stays, empty, until rmdir is tried again",
                  domain, strerror(-rc));
    return rc;
}

/* "DIR/.versions/NAME/" and the list's key, of domain "/DIR/NAME". */
static int folder_keys(const char *domain, char *prefix, size_t prefix_len, char *list_key,
                       size_t key_len)
{
    char dir[STORE_KEY_MAX + 2];
    if (schema_versions_dir(domain, dir, sizeof dir) != 0 ||
        schema_vlist_key(domain, list_key, key_len) != 0)
        return -EINVAL;
    int n = snprintf(prefix, prefix_len, "%s/", dir + 1);
    return n < 0 || (size_t)n >= prefix_len ? -ENAMETOOLONG : 0;
}

int vdrop_folder(struct store *store, const char *domain)
{
    char prefix[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1];
    struct vlist l;
    int rc = folder_keys(domain, prefix, sizeof prefix, key, sizeof key);
    if (rc != 0)
        return rc;
    rc = read_list(store, key, &l);
    if (rc != 0)
        return rc;
    rc = has_a_name(&l) ? -ENOTEMPTY : delete_data(store, domain, &l);
    vlist_free(&l);
    if (rc == 0)
        rc = delete_below(store, prefix, key,
                          NULL); /* tag objects a killed daemon left, the folder */
    if (rc == 0)
        rc = store_delete(store, key); /* last: until here a second rmdir finds what is left */
    if (rc != 0 && rc != -ENOTEMPTY) {
        log_error("%s: version folder %s not removed: %s", domain, prefix, strerror(-rc));
        return rc == -ENOENT ? 0 : -EIO;
    }
    if (rc == 0) {
        log_info("%s: version folder removed with the data of its removed versions", domain);
        char dir[STORE_KEY_MAX + 2];
        snprintf(dir, sizeof dir, "%s", domain);
        char *slash = strrchr(dir, '/'); /* "/DIR" of "/DIR/NAME" */
        slash[slash == dir] = '\0';
        int drc = vdrop_versions_dir(store, dir);
        if (drc != 0 && drc != -ENOTEMPTY)
            log_warn("%s: its empty folder .versions stays (%s)", domain, strerror(-drc));
    }
    return rc;
}

int vdrop_versions_dir(struct store *store, const char *dir)
{
    char prefix[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 2];
    struct store_list list = { 0 };
    const char *rel = strcmp(dir, "/") == 0 ? "" : dir + 1;
    int n = snprintf(prefix, sizeof prefix, "%s%s" SCHEMA_VERSIONS_DIR "/", rel, *rel ? "/" : "");
    if (n < 0 || (size_t)n >= sizeof prefix)
        return -ENAMETOOLONG;
    int rc = store_list(store, prefix, "/", NULL, 0, &list);
    int busy = rc == 0 && list.n_prefixes > 0;
    store_list_free(&list);
    if (rc != 0 && rc != -ENOENT)
        return -EIO;
    if (busy)
        return -ENOTEMPTY;
    n = snprintf(key, sizeof key, "%s.domain.json", prefix);
    if (n < 0 || (size_t)n >= sizeof key)
        return -ENAMETOOLONG;
    rc = store_delete(store, key);
    return rc == 0 || rc == -ENOENT ? 0 : -EIO;
}
