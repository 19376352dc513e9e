/* vdrop: see include/h5osfs/domops/vdrop.h. */
#include "h5osfs/domops/vdrop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/domops/vpool.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/testhook.h"

#define FOLDER_JSON_MAX (1u << 20) /* a folder object (.domain.json of DIR/.versions) */
#define DROP_TRIES 8 /* rounds of the dropping mark lost to other writers of the list */

/* The list at key and its etag: 0, -ENOENT, -EIO (logged), -ENOMEM. */
static int read_list(struct store *store, const char *key, struct vlist *l, char *etag)
{
    char why[200];
    int rc = ns_vlist_read(store, key, l, etag, why, sizeof why);
    if (rc == -EINVAL)
        log_error("%s: version list unusable (%s): the version folder is not removed", key, why);
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
    int rc = vpool_root_of(store, root, pool, domain);
    if (rc == 1)
        return vpool_delete_root(store, root, "dropping version");
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
    if (rc == 0 && owned)
        rc = vpool_delete_pool(store, l->pool, "dropping pool");
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

/* The list at key, read into *l and marked "dropping" in the store before anything is
 * deleted, by a conditional put: a commit that lists a version first makes the mark read the
 * list again (and find a name: -ENOTEMPTY); one that comes after finds the mark and keeps no
 * version in this lineage (commit/versions.c). 0, -ENOTEMPTY, -ENOENT, -EIO, -ENOMEM. */
static int mark_dropping(struct store *store, const char *key, struct vlist *l)
{
    char etag[sizeof(((struct store_stat *)0)->etag)];
    int rc = -ESTALE;
    for (int tries = 0; rc == -ESTALE && tries < DROP_TRIES; tries++) {
        char *text = NULL;
        if ((rc = read_list(store, key, l, etag)) != 0)
            return rc;
        if (has_a_name(l))
            rc = -ENOTEMPTY;
        else if (l->dropping)
            return 0; /* an earlier rmdir's mark: it goes on where that one stopped */
        l->dropping = 1;
        if (rc == 0)
            rc = vlist_dump(l, &text);
        if (rc == 0)
            rc = store_put_if(store, key, text, strlen(text), etag);
        free(text);
        if (rc != 0)
            vlist_free(l);
    }
    return rc == -ESTALE ? -EIO : rc;
}

int vdrop_folder(struct store *store, const char *domain)
{
    char prefix[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1];
    struct vlist l;
    int rc = folder_keys(domain, prefix, sizeof prefix, key, sizeof key);
    if (rc != 0)
        return rc;
    rc = mark_dropping(store, key, &l);
    if (rc != 0 && rc != -ENOTEMPTY && rc != -ENOENT && rc != -ENOMEM) {
        log_error("%s: version folder %s not removed: its list cannot be marked (%s)", domain,
                  prefix, strerror(-rc));
        rc = -EIO;
    }
    if (rc != 0)
        return rc;
    testhook_pause_at("dropping", NULL);
    rc = delete_data(store, domain, &l);
    vlist_free(&l);
    if (rc == 0) /* tag objects a killed daemon left, the folder */
        rc = vpool_delete_below(store, prefix, key, NULL);
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

/* Version folders below prefix (DIR/.versions/): 1 some, 0 none, -EIO. */
static int has_version_folders(struct store *store, const char *prefix)
{
    struct store_list list = { 0 };
    int rc = store_list(store, prefix, "/", NULL, 0, &list);
    int busy = rc == 0 && list.n_prefixes > 0;
    store_list_free(&list);
    if (rc != 0 && rc != -ENOENT)
        return -EIO;
    return busy;
}

/* The folder object at key, deleted when DIR/.versions looked empty, is put back when a first
 * version below it was committed meanwhile: that commit may have seen the object before the
 * delete and not put it, and HSDS lists domains through folders. was: its bytes. When the
 * second look fails, it is put back all the same: an empty DIR/.versions costs nothing, a
 * version folder under no folder object hides it from HSDS. */
static void put_folder_back(struct store *store, const char *prefix, const char *key,
                            const struct store_buf *was)
{
    int busy = has_version_folders(store, prefix);
    if (busy == 0)
        return;
    int rc = store_put_if(store, key, was->data, was->len, NULL);
    if (rc == 0 && busy > 0)
        log_info("%s: put back: a version was committed below it while it was removed", key);
    else if (rc == 0)
        log_warn("%s: put back, empty or not: whether a version was committed below it while it "
                 "was removed cannot be told",
                 key);
    else if (rc != -ESTALE) /* -ESTALE: a commit put one itself */
        log_warn("%s: a version may have been committed below it while it was removed, and it "
                 "cannot be put back (%s): HSDS does not list .versions until the next versioned "
                 "commit in the folder",
                 key, strerror(-rc));
}

int vdrop_versions_dir(struct store *store, const char *dir)
{
    char prefix[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 2];
    struct store_buf was = { 0 };
    const char *rel = strcmp(dir, "/") == 0 ? "" : dir + 1;
    int n = snprintf(prefix, sizeof prefix, "%s%s" SCHEMA_VERSIONS_DIR "/", rel, *rel ? "/" : "");
    if (n < 0 || (size_t)n >= sizeof prefix)
        return -ENAMETOOLONG;
    n = snprintf(key, sizeof key, "%s.domain.json", prefix);
    if (n < 0 || (size_t)n >= sizeof key)
        return -ENAMETOOLONG;
    int rc = has_version_folders(store, prefix);
    if (rc != 0)
        return rc > 0 ? -ENOTEMPTY : rc;
    rc = store_get(store, key, FOLDER_JSON_MAX, &was);
    if (rc == -ENOENT)
        return 0;
    if (rc != 0) { /* without its bytes it could not be put back */
        log_error("%s: not removed: it cannot be read (%s)", key, strerror(-rc));
        return rc == -ENOMEM ? rc : -EIO;
    }
    testhook_pause_at("versions dir", NULL);
    rc = store_delete(store, key);
    if (rc == 0)
        put_folder_back(store, prefix, key, &was);
    store_buf_free(&was);
    return rc == 0 || rc == -ENOENT ? 0 : -EIO;
}

int vdrop_is_dropping(struct store *store, const char *domain)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct vlist l;
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return 0;
    int rc = ns_vlist_read(store, key, &l, NULL, why, sizeof why);
    if (rc != 0)
        return rc == -ENOENT || rc == -EINVAL ? 0 : rc;
    rc = l.dropping;
    vlist_free(&l);
    return rc;
}
