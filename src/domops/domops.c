/* domops: see include/h5osfs/domops/domops.h. */
#include "h5osfs/domops/domops.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/domops/gc.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/domops/vmove.h"
#include "h5osfs/domops/vdrop.h"
#include "h5osfs/domops/vnames.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE (1 << 1)
#endif

#define DOMAIN_JSON_MAX (1u << 20)
#define USER_NAME_MAX 256

static const char *const acl_names[] = { "create", "read",    "update",
                                         "delete", "readACL", "updateACL" };

/* ---- paths ---- */

static void parent_of(const char *path, char *out, size_t len)
{
    snprintf(out, len, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash)
        slash[slash == out ? 1 : 0] = '\0';
}

static int key_of(const char *path, char *key, size_t len)
{
    return schema_domain_key(path, key, len) == 0 ? 0 : -EINVAL;
}

int domops_refs_key(const char *path, char *buf, size_t len)
{
    if (path[0] != '/' || !path[1])
        return -EINVAL;
    int n = snprintf(buf, len, "%s/%s", path + 1, DOMOPS_REFS_NAME);
    return n < 0 || (size_t)n >= len ? -EINVAL : 0;
}

/* The references of a domain that is gone: one stale set would name objects being collected. */
static void drop_refs(const struct domops *d, const char *path)
{
    char key[STORE_KEY_MAX + 1];
    if (domops_refs_key(path, key, sizeof key) != 0)
        return;
    int rc = store_delete(d->store, key);
    if (rc != 0 && rc != -ENOENT)
        log_warn("%s: its references %s stay in the bucket: %s", path, key, strerror(-rc));
}

/* Is rel (a key below some prefix) a domain's references? */
static int is_refs_key(const char *rel)
{
    const char *tail = strrchr(rel, '/');
    return strcmp(tail ? tail + 1 : rel, DOMOPS_REFS_NAME) == 0;
}

/* Copy the references at from_key to to_key. 0 or the store's -errno. */
static int copy_refs(const struct domops *d, const char *from_key, const char *to_key)
{
    struct store_buf buf = { 0 };
    int rc = store_get(d->store, from_key, DOMOPS_REFS_MAX, &buf);
    if (rc == 0)
        rc = store_put(d->store, to_key, buf.data, buf.len);
    store_buf_free(&buf);
    return rc;
}

/* A renamed domain's references follow it (they name chunk objects, not the path). */
static void move_refs(const struct domops *d, const char *from, const char *to)
{
    char from_key[STORE_KEY_MAX + 1], to_key[STORE_KEY_MAX + 1];
    if (domops_refs_key(from, from_key, sizeof from_key) != 0 ||
        domops_refs_key(to, to_key, sizeof to_key) != 0)
        return;
    int rc = copy_refs(d, from_key, to_key);
    if (rc == -ENOENT) {
        drop_refs(d, to); /* to's own, if it had some, describe what it no longer is */
        return;
    }
    if (rc != 0) {
        log_warn("%s: its references %s were not moved to %s: %s", to, from_key, to_key,
                 strerror(-rc));
        drop_refs(d, to);
    }
    drop_refs(d, from);
}

static int is_dir(enum ns_kind k)
{
    return k == NS_DIR || k == NS_FOLDER;
}

/* ---- names and rights ---- */

/* A name the bucket reserves (schema_domain_path_allowed), then the parent folder's "create"
 * for user. */
static int may_name(const struct domops *d, const char *user, const char *path)
{
    char parent[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1];
    struct ns_info info;
    const char *why;
    int rc = schema_domain_path_allowed(path, &why);
    if (rc != 0) {
        log_info("%s: refused: %s", path, why);
        return rc;
    }
    if (key_of(path, key, sizeof key) != 0)
        return -EINVAL;
    parent_of(path, parent, sizeof parent);
    rc = ns_stat_as(d->ns, parent, user, &info);
    if (rc != 0)
        return rc;
    if (!is_dir(info.kind))
        return -ENOTDIR;
    return info.rights & SCHEMA_ACL_CREATE ? 0 : -EACCES;
}

/* The namespace hides objects that are not domains (stray keys, HSDS's linked HDF5 files), but
 * one at path's own key is in the way of a new domain there: on a posix bucket its key could
 * not become the prefix of <path>/.domain.json, on S3 the two would shadow each other. */
static int nothing_hidden_at(const struct domops *d, const char *path)
{
    struct store_stat st;
    int rc = store_head(d->store, path + 1, &st);
    if (rc == -ENOENT || rc == -EISDIR)
        return 0; /* nothing, or a prefix (on posix: a directory) */
    if (rc == 0) {
        log_info("%s: refused: the bucket holds an object %s that is not a domain", path, path + 1);
        return -EEXIST;
    }
    return rc == -EACCES ? rc : -EIO; /* the store logged what failed */
}

int domops_may_create(const struct domops *d, const char *user, const char *path)
{
    int rc = may_name(d, user, path);
    return rc != 0 ? rc : nothing_hidden_at(d, path);
}

/* ---- the .domain.json of a new domain or folder ---- */

static json_t *acl_json(unsigned rights)
{
    json_t *a = json_object();
    for (size_t i = 0; a && i < 6; i++)
        if (json_object_set_new(a, acl_names[i], json_boolean(rights & (1u << i))) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* HSDS (§9): the parent's entries except default, all-false ones, admins and the owner;
 * then the owner with every right; then default read-only for folders. */
static int inherit_acls(const struct domops *d, const char *owner, const char *path, json_t *acls)
{
    char parent[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1], why[160];
    struct store_buf buf = { 0 };
    struct schema_domain dom;
    parent_of(path, parent, sizeof parent);
    if (strcmp(parent, "/") == 0 || key_of(parent, key, sizeof key) != 0 ||
        store_get(d->store, key, DOMAIN_JSON_MAX, &buf) != 0)
        return 0; /* no parent folder object: nothing to inherit */
    int rc = schema_domain_parse((const char *)buf.data, buf.len, &dom, why, sizeof why);
    store_buf_free(&buf);
    if (rc != 0)
        return 0;
    for (size_t i = 0; i < dom.n_acls && rc == 0; i++) {
        const struct schema_acl *a = &dom.acls[i];
        if (strcmp(a->user, "default") == 0 || a->rights == 0 ||
            strcmp(a->user, d->admin_user) == 0 || strcmp(a->user, owner) == 0)
            continue;
        rc = json_object_set_new(acls, a->user, acl_json(a->rights)) == 0 ? 0 : -ENOMEM;
    }
    schema_domain_free(&dom);
    return rc;
}

static int domain_json_of(const struct domops *d, const char *owner, const char *path,
                          const char *root, char **out)
{
    double now = clock_wall();
    json_t *j = json_object(), *acls = json_object();
    int rc = j && acls ? 0 : -ENOMEM;
    if (rc == 0 && root)
        rc = json_object_set_new(j, "root", json_string(root));
    if (rc == 0)
        rc = json_object_set_new(j, "owner", json_string(owner));
    if (rc == 0)
        rc = inherit_acls(d, owner, path, acls);
    if (rc == 0)
        rc = json_object_set_new(acls, owner, acl_json(SCHEMA_ACL_ALL));
    if (rc == 0 && !root)
        rc = json_object_set_new(acls, "default", acl_json(SCHEMA_ACL_READ));
    if (rc == 0) {
        rc = json_object_set(j, "acls", acls);
        rc |= json_object_set_new(j, "created", json_real(now));
        rc |= json_object_set_new(j, "lastModified", json_real(now));
    }
    *out = NULL;
    if (rc == 0)
        rc = hjson_dumps(j, out); /* as HSDS writes it: Python's json.dumps */
    json_decref(acls);
    json_decref(j);
    return rc == 0 ? 0 : -ENOMEM;
}

int domops_domain_json(const struct domops *d, const char *path, const char *root, char **out)
{
    char creator[USER_NAME_MAX];
    int rc = d->creator_of ? d->creator_of(d->creator_ctx, path, creator, sizeof creator) : -ENOENT;
    *out = NULL;
    if (rc != 0 && rc != -ENOENT)
        return rc;
    return domain_json_of(d, rc == 0 ? creator : d->user, path, root, out);
}

/* ---- mkdir / rmdir ---- */

int domops_mkdir(const struct domops *d, const char *user, const char *path)
{
    char key[STORE_KEY_MAX + 1], *json = NULL;
    struct ns_info info;
    if (key_of(path, key, sizeof key) != 0)
        return -EINVAL;
    int rc = ns_stat(d->ns, path, &info);
    if (rc == 0)
        return -EEXIST;
    if (rc != -ENOENT)
        return rc;
    rc = domops_may_create(d, user, path);
    if (rc != 0)
        return rc;
    rc = user ? domain_json_of(d, user, path, NULL, &json) : -EACCES;
    if (rc == 0) /* create only: another mount may have made a domain there meanwhile */
        rc = store_put_if(d->store, key, json, strlen(json), NULL);
    free(json);
    ns_invalidate(d->ns, path);
    if (rc == -ESTALE)
        return -EEXIST;
    return rc == 0 ? 0 : rc == -EACCES || rc == -ENOENT ? rc : -EIO;
}

/* Does folder path hold kept versions (DIR/.versions/, never listed)? 1, 0 or -EIO. Removing
 * the folder would leave them in the bucket and unreachable. */
static int holds_versions(const struct domops *d, const char *path)
{
    char prefix[STORE_KEY_MAX + 2];
    struct store_list list = { 0 };
    int n = snprintf(prefix, sizeof prefix, "%s/" SCHEMA_VERSIONS_DIR "/", path + 1);
    if (n < 0 || (size_t)n >= sizeof prefix)
        return 0; /* no key can be that long: nothing below */
    int rc = store_list(d->store, prefix, NULL, NULL, 1, &list);
    int found = rc == 0 && (list.n_objects > 0 || list.n_prefixes > 0);
    store_list_free(&list);
    return rc == 0 || rc == -ENOENT ? found : -EIO;
}

static int is_admin(const struct domops *d, const char *user);
static int version_rights(const struct domops *d, const char *user, const char *domain,
                          unsigned *rights, char root[SCHEMA_ID_BUF]);

/* rmdir DIR/.versions/NAME (the end of rm -r, vdrop.h) or DIR/.versions. While DIR/NAME
 * exists its current version keeps its number: the folder is not empty. */
static int rmdir_versions(const struct domops *d, const char *user, const char *path)
{
    char domain[STORE_KEY_MAX + 2], probe[STORE_KEY_MAX + 4], root[SCHEMA_ID_BUF];
    const char *last = strrchr(path, '/');
    unsigned rights;
    int rc;
    if (strcmp(last + 1, SCHEMA_VERSIONS_DIR) == 0) { /* DIR/.versions itself */
        snprintf(domain, sizeof domain, "%.*s", (int)(last == path ? 1 : last - path), path);
        ns_invalidate(d->ns, domain);
        struct ns_info info;
        rc = ns_stat_as(d->ns, domain, user, &info);
        if (rc == 0 && !(info.rights & SCHEMA_ACL_DELETE) && !is_admin(d, user))
            rc = -EACCES;
        rc = rc == 0 ? vdrop_versions_dir(d->store, domain) : rc;
    } else {
        int n = snprintf(probe, sizeof probe, "%s/x", path);
        if (n < 0 || (size_t)n >= sizeof probe ||
            schema_version_domain_of(probe, domain, sizeof domain) != 0)
            return -ENOTDIR; /* deeper: a version, a file */
        rc = version_rights(d, user, domain, &rights, root);
        /* the domain exists: its current version stays; unless an rmdir that was stopped
         * marked the list, after which the domain's commits kept no version there */
        if (rc == 0 && root[0] && vdrop_is_dropping(d->store, domain) != 1)
            rc = -ENOTEMPTY;
        else if (rc == 0 && !(rights & SCHEMA_ACL_DELETE) && !is_admin(d, user))
            rc = -EACCES;
        rc = rc == 0 ? vdrop_folder(d->store, domain) : rc;
        ns_invalidate(d->ns, domain); /* forgets its cached version list */
    }
    ns_invalidate(d->ns, path);
    return rc;
}

int domops_rmdir(const struct domops *d, const char *user, const char *path)
{
    if (schema_is_versions_path(path) == 1)
        return rmdir_versions(d, user, path);
    char key[STORE_KEY_MAX + 1];
    struct ns_info info;
    struct ns_dir dir;
    ns_invalidate(d->ns, path); /* decide on what the store says now */
    int rc = ns_stat_as(d->ns, path, user, &info);
    if (rc != 0)
        return rc;
    if (!is_dir(info.kind))
        return -ENOTDIR;
    if (info.kind == NS_DIR)
        return -ENOTEMPTY; /* a plain directory exists only because domains are below */
    if (!(info.rights & SCHEMA_ACL_DELETE))
        return -EACCES;
    rc = ns_readdir(d->ns, path, &dir);
    if (rc != 0)
        return rc;
    int empty = dir.n == 0;
    ns_dir_free(&dir);
    if (!empty)
        return -ENOTEMPTY;
    if ((rc = holds_versions(d, path)) != 0)
        return rc < 0 ? rc : -ENOTEMPTY; /* its versions are removed by name first */
    rc = key_of(path, key, sizeof key) == 0 ? store_delete(d->store, key) : -EINVAL;
    ns_invalidate(d->ns, path);
    return rc == 0 || rc == -ENOENT ? 0 : -EIO;
}

/* ---- names of versions (DIR/.versions/NAME/<name>) ---- */

/* user's rights on a version's names: the domain's while it exists (its root then says which
 * version is current), else its folder's. */
static int version_rights(const struct domops *d, const char *user, const char *domain,
                          unsigned *rights, char root[SCHEMA_ID_BUF])
{
    char parent[STORE_KEY_MAX + 2];
    struct ns_info info;
    root[0] = '\0';
    ns_invalidate(d->ns, domain);
    int rc = ns_stat_as(d->ns, domain, user, &info);
    if (rc == 0 && info.kind == NS_DOMAIN) {
        snprintf(root, SCHEMA_ID_BUF, "%s", info.root);
        *rights = info.rights;
        return 0;
    }
    if (rc != 0 && rc != -ENOENT)
        return rc;
    parent_of(domain, parent, sizeof parent);
    rc = ns_stat_as(d->ns, parent, user, &info);
    *rights = rc == 0 ? info.rights : 0;
    return rc;
}

static int is_admin(const struct domops *d, const char *user)
{
    return user && strcmp(user, d->admin_user) == 0;
}

static int unlink_version_name(const struct domops *d, const char *user, const char *path)
{
    char domain[STORE_KEY_MAX + 2], root[SCHEMA_ID_BUF];
    unsigned rights;
    if (schema_version_domain_of(path, domain, sizeof domain) != 0)
        return -EPERM; /* .versions itself or a version folder: not a file */
    int rc = version_rights(d, user, domain, &rights, root);
    if (rc != 0)
        return rc;
    if (!user || (!(rights & SCHEMA_ACL_DELETE) && !is_admin(d, user)))
        return -EACCES;
    rc = vnames_remove(d->store, domain, strrchr(path, '/') + 1, root);
    ns_invalidate(d->ns, path);
    if (rc == 0 && d->versions_removed)
        d->versions_removed(d->versions_ctx, domain);
    return rc;
}

/* A tag's name, by the rule for a domain's (schema_name_allowed), logged as may_name logs
 * it: before the folder is compared, since a path with a name no domain may have is in no
 * version folder and would read as another folder (EXDEV). */
static int may_name_tag(const char *to)
{
    const char *why, *slash = strrchr(to, '/');
    int rc = schema_name_allowed(slash ? slash + 1 : NULL, &why);
    if (rc != 0)
        log_info("%s: refused: %s", to, why);
    return rc;
}

int domops_link(const struct domops *d, const char *user, const char *from, const char *to)
{
    char domain[STORE_KEY_MAX + 2], to_domain[STORE_KEY_MAX + 2], root[SCHEMA_ID_BUF];
    unsigned rights;
    if (schema_version_domain_of(from, domain, sizeof domain) != 0)
        return -EROFS; /* a domain has one name, as before versions: only tags are links */
    int rc = may_name_tag(to);
    if (rc != 0)
        return rc;
    if (schema_version_domain_of(to, to_domain, sizeof to_domain) != 0 ||
        strcmp(domain, to_domain) != 0)
        return -EXDEV; /* a tag names a version of the same domain, in the same folder */
    rc = version_rights(d, user, domain, &rights, root);
    if (rc != 0)
        return rc;
    if (!user || (!(rights & SCHEMA_ACL_UPDATE) && !is_admin(d, user)))
        return -EACCES;
    rc = vnames_tag(d->store, user, domain, strrchr(from, '/') + 1, strrchr(to, '/') + 1);
    ns_invalidate(d->ns, to);
    return rc;
}

/* ---- unlink ---- */

int domops_unlink(const struct domops *d, const char *user, const char *path)
{
    char key[STORE_KEY_MAX + 1];
    struct ns_info info;
    if (schema_is_versions_path(path) == 1)
        return unlink_version_name(d, user, path);
    ns_invalidate(d->ns, path);
    int rc = ns_stat_as(d->ns, path, user, &info);
    if (rc != 0)
        return rc;
    if (is_dir(info.kind))
        return -EISDIR;
    int admin = user && strcmp(user, d->admin_user) == 0;
    if (info.kind == NS_BROKEN ? !admin : !(info.rights & SCHEMA_ACL_DELETE))
        return -EACCES;
    if (key_of(path, key, sizeof key) != 0)
        return -EINVAL;
    rc = store_delete(d->store, key); /* first: the domain is gone for every reader */
    ns_invalidate(d->ns, path);
    if (rc != 0 && rc != -ENOENT)
        return -EIO;
    /* queued only once nothing names it: a queued root whose delete failed could be renamed
     * with its folder and then deleted under its new name */
    if (info.kind == NS_DOMAIN && info.current_ref)
        log_info("%s: deleted; its root %s is its newest version's, kept in %s", path, info.root,
                 SCHEMA_VERSIONS_DIR);
    else if (info.kind == NS_DOMAIN && d->gc && gc_add(d->gc, info.root, path, "") != 0)
        log_warn("%s: deleted; its objects (root %s) stay in the bucket", path, info.root);
    drop_refs(d, path);
    return 0;
}

/* ---- rename ---- */

/* Copy the object at from_key to to_key (whole, atomic). */
static int copy_object(const struct domops *d, const char *from_key, const char *to_key)
{
    struct store_buf buf = { 0 };
    int rc = store_get(d->store, from_key, DOMAIN_JSON_MAX, &buf);
    if (rc == 0)
        rc = store_put(d->store, to_key, buf.data, buf.len);
    store_buf_free(&buf);
    return rc;
}

/* Every .domain.json below the folder at from (its own included) moves below to. New ones
 * are written before old ones are deleted, so nothing disappears in between. */
static int move_tree(const struct domops *d, const char *from, const char *to)
{
    char prefix[STORE_KEY_MAX + 2], to_key[STORE_KEY_MAX + 1];
    struct store_list list = { 0 };
    snprintf(prefix, sizeof prefix, "%s/", from + 1);
    int rc = store_list(d->store, prefix, NULL, NULL, 0, &list);
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < list.n_objects && rc == 0; i++) {
        const char *rel = list.objects[i].key + plen;
        const char *tail = strrchr(rel, '/');
        if (strcmp(tail ? tail + 1 : rel, ".domain.json") != 0)
            continue; /* stray keys stay where they are */
        if (snprintf(to_key, sizeof to_key, "%s/%s", to + 1, rel) >= (int)sizeof to_key)
            rc = -ENAMETOOLONG;
        else
            rc = copy_object(d, list.objects[i].key, to_key);
    }
    /* version lists after every name they list (vmove.h), naming their domains' new paths */
    for (size_t i = 0; i < list.n_objects && rc == 0; i++) {
        const char *rel = list.objects[i].key + plen;
        if (!vmove_is_list_key(list.objects[i].key))
            continue;
        if (snprintf(to_key, sizeof to_key, "%s/%s", to + 1, rel) >= (int)sizeof to_key)
            rc = -ENAMETOOLONG;
        else
            rc = vmove_copy_list_to(d->store, list.objects[i].key, to_key);
    }
    /* the references of the domains below follow them; one that cannot is dropped below (a
     * publisher's next commit of that domain puts it again) */
    for (size_t i = 0; i < list.n_objects && rc == 0; i++) {
        const char *rel = list.objects[i].key + plen;
        if (!is_refs_key(rel))
            continue;
        int copied = snprintf(to_key, sizeof to_key, "%s/%s", to + 1, rel) < (int)sizeof to_key
                         ? copy_refs(d, list.objects[i].key, to_key)
                         : -ENAMETOOLONG;
        if (copied != 0)
            log_warn("%s: references not moved to %s: %s", list.objects[i].key, to,
                     strerror(-copied));
    }
    for (size_t i = 0; i < list.n_objects && rc == 0; i++) {
        const char *rel = list.objects[i].key + plen, *tail = strrchr(rel, '/');
        int is_list = vmove_is_list_key(list.objects[i].key);
        if (!is_list && strcmp(tail ? tail + 1 : rel, ".domain.json") != 0 && !is_refs_key(rel))
            continue;
        if (store_delete(d->store, list.objects[i].key) != 0)
            log_warn("%s: moved to %s, but its old name could not be deleted and still shows",
                     list.objects[i].key, to);
        else if (is_list && /* the old list is gone: its pool is the new list's alone */
                 snprintf(to_key, sizeof to_key, "%s/%s", to + 1, rel) < (int)sizeof to_key)
            vmove_settle_list(d->store, to_key);
    }
    store_list_free(&list);
    return rc;
}

static int check_target(const struct domops *d, const char *user, const struct ns_info *src,
                        const char *to, unsigned flags, struct ns_info *dst, int *exists)
{
    int rc = ns_stat_as(d->ns, to, user, dst);
    *exists = rc == 0;
    if (rc != 0 && rc != -ENOENT)
        return rc;
    if (*exists && (flags & RENAME_NOREPLACE))
        return -EEXIST;
    if (*exists && is_dir(src->kind) != is_dir(dst->kind))
        return is_dir(src->kind) ? -ENOTDIR : -EISDIR;
    if (*exists && is_dir(dst->kind)) {
        struct ns_dir dir;
        if ((rc = ns_readdir(d->ns, to, &dir)) != 0)
            return rc;
        int empty = dir.n == 0;
        ns_dir_free(&dir);
        if (!empty)
            return -ENOTEMPTY;
    }
    if (*exists && !(dst->rights & (is_dir(dst->kind) ? SCHEMA_ACL_DELETE : SCHEMA_ACL_UPDATE)))
        return -EACCES;
    return *exists ? may_name(d, user, to) : domops_may_create(d, user, to);
}

/* The domain object from moves to to, with its versions (vmove.h); dst: what to was (NULL:
 * nothing). */
static int move_domain(const struct domops *d, const char *from, const char *to,
                       const struct ns_info *src, const struct ns_info *dst)
{
    char from_key[STORE_KEY_MAX + 1], to_key[STORE_KEY_MAX + 1];
    enum vmove_plan plan = VMOVE_NONE;
    if (key_of(from, from_key, sizeof from_key) || key_of(to, to_key, sizeof to_key))
        return -EINVAL;
    int rc = src->kind == NS_DOMAIN ? vmove_plan(d->store, from, to, &plan) : 0;
    /* a versions_current=ref domain names its head version's root, whose tables name its own
     * pool: as the next version of a target that keeps its own, it would read nothing. EXDEV
     * makes mv copy it instead (a commit to the target, then an rm of the source) */
    if (rc == 0 && plan == VMOVE_TARGET_KEEPS && src->current_ref)
        rc = -EXDEV;
    if (rc == 0 && plan == VMOVE_MOVE)
        rc = vmove_copy(d->store, from, to);
    if (rc == 0 && plan == VMOVE_TARGET_KEEPS && d->keep_moved)
        rc = d->keep_moved(d->keep_ctx, to, src->root);
    if (rc == 0)
        rc = copy_object(d, from_key, to_key);
    if (rc != 0 && plan == VMOVE_MOVE)
        vmove_undo(d->store, from, to); /* only a copy: from's are whole */
    /* to's old root is named by nothing once the copy is there, whether or not the old
     * name's delete then fails */
    /* (a versions_current=ref domain names a version's root: its list keeps it) */
    if (rc == 0 && dst && dst->kind == NS_DOMAIN && !dst->current_ref && d->gc &&
        strcmp(dst->root, src->root) != 0 && gc_add(d->gc, dst->root, to, src->root) != 0)
        log_warn("%s: replaced; its objects (root %s) stay in the bucket", to, dst->root);
    if (rc == 0)
        rc = store_delete(d->store, from_key);
    if (rc == 0 && plan == VMOVE_MOVE && vmove_drop(d->store, from) == 0)
        vmove_settle(d->store, to); /* else the old list still reads the pool: not settled */
    if (rc == 0)
        move_refs(d, from, to);
    return rc;
}

int domops_rename(const struct domops *d, const char *user, const char *from, const char *to,
                  unsigned flags)
{
    char from_key[STORE_KEY_MAX + 1], to_key[STORE_KEY_MAX + 1];
    struct ns_info src, dst;
    int exists;
    if (flags & ~(unsigned)RENAME_NOREPLACE)
        return -EINVAL;
    if (schema_is_versions_path(from) == 1)
        return -EROFS; /* a version keeps its name; a tag is made by ln */
    if (key_of(from, from_key, sizeof from_key) || key_of(to, to_key, sizeof to_key))
        return -EINVAL;
    size_t flen = strlen(from);
    if (strncmp(to, from, flen) == 0 && to[flen] == '/')
        return -EINVAL; /* into itself */
    ns_invalidate(d->ns, from);
    ns_invalidate(d->ns, to);
    int rc = ns_stat_as(d->ns, from, user, &src);
    if (rc != 0)
        return rc;
    if (strcmp(from, to) == 0)
        return 0;
    if (src.kind == NS_BROKEN || !(src.rights & SCHEMA_ACL_DELETE))
        return -EACCES;
    rc = check_target(d, user, &src, to, flags, &dst, &exists);
    if (rc != 0)
        return rc;
    if (is_dir(src.kind)) {
        if (exists && dst.kind == NS_FOLDER)
            store_delete(d->store, to_key); /* an empty folder is replaced */
        rc = move_tree(d, from, to);
    } else {
        rc = move_domain(d, from, to, &src, exists ? &dst : NULL);
    }
    ns_invalidate(d->ns, from);
    ns_invalidate(d->ns, to);
    return rc == 0 ? 0 : rc == -ENAMETOOLONG || rc == -EXDEV || rc == -EBUSY ? rc : -EIO;
}

/* ---- h5osfs's own folder settings ---- */

#define SETTING_TRIES 8 /* read-modify-write rounds lost to other writers */

/* The folder object at key with its h5osfs member's setting name set to value (NULL:
 * removed), written only if nobody changed it since it was read. 0, 1 (changed meanwhile:
 * again), or -errno. */
static int put_setting_once(const struct domops *d, const char *key, const char *name,
                            const char *value)
{
    struct store_stat st;
    struct store_buf buf = { 0 };
    char why[200], *text = NULL;
    json_t *dom = NULL;
    int rc = store_head(d->store, key, &st);
    if (rc == 0)
        rc = store_get(d->store, key, DOMAIN_JSON_MAX, &buf);
    if (rc == 0 && !(dom = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why))) {
        log_error("%s: not JSON (%s): its setting is not changed", key, why);
        rc = -EIO;
    }
    store_buf_free(&buf);
    json_t *own = dom ? json_object_get(dom, SCHEMA_H5OSFS_MEMBER) : NULL;
    if (rc == 0 && !own && value &&
        json_object_set_new(dom, SCHEMA_H5OSFS_MEMBER, own = json_object()) != 0)
        rc = -ENOMEM;
    if (rc == 0 && own && value && json_object_set_new(own, name, json_string(value)) != 0)
        rc = -ENOMEM;
    if (rc == 0 && own && !value) {
        json_object_del(own, name);
        if (json_object_size(own) == 0)
            json_object_del(dom, SCHEMA_H5OSFS_MEMBER); /* as HSDS wrote it */
    }
    if (rc == 0)
        rc = hjson_dumps(dom, &text);
    if (rc == 0)
        rc = store_put_if(d->store, key, text, strlen(text), st.etag);
    free(text);
    json_decref(dom);
    return rc == -ESTALE ? 1 : rc;
}

/* Set (value) or remove (NULL) the folder setting name of path, as user. */
static int set_folder_setting(const struct domops *d, const char *user, const char *path,
                              const char *name, const char *value)
{
    char key[STORE_KEY_MAX + 1];
    struct ns_info info;
    ns_invalidate(d->ns, path); /* decide on what the store says now */
    int rc = ns_stat_as(d->ns, path, user, &info);
    if (rc != 0)
        return rc;
    if (info.kind != NS_FOLDER)
        return -ENOTSUP; /* a domain, or a plain directory: no object holds it */
    if (!user || !(info.rights & SCHEMA_ACL_UPDATE))
        return -EACCES;
    if (key_of(path, key, sizeof key) != 0)
        return -EINVAL;
    rc = 1;
    for (int tries = 0; rc == 1 && tries < SETTING_TRIES; tries++)
        rc = put_setting_once(d, key, name, value);
    ns_invalidate(d->ns, path);
    if (rc == 1) {
        log_error("%s: the folder object kept changing: its %s setting is not changed", path, name);
        return -EAGAIN;
    }
    return rc == 0 || rc == -ENOENT || rc == -EACCES || rc == -ENOMEM ? rc : -EIO;
}

int domops_set_ingest(const struct domops *d, const char *user, const char *path,
                      enum schema_ingest mode)
{
    return set_folder_setting(d, user, path, "ingest", schema_ingest_name(mode));
}

int domops_set_versions(const struct domops *d, const char *user, const char *path,
                        const struct schema_versions *setting)
{
    char text[SCHEMA_VERSIONS_TEXT_MAX];
    if (setting && schema_versions_text(setting, text, sizeof text) != 0)
        return -EINVAL;
    return set_folder_setting(d, user, path, "versions", setting ? text : NULL);
}
