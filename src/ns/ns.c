/* ns: see include/h5osfs/ns/ns.h. */
#include "h5osfs/ns/ns.h"
#include "ns_int.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/pfor.h"
#include "h5osfs/util/strmap.h"

#define NS_DOMAIN_JSON_MAX (1u << 20) /* HSDS domain JSON is < 1 KiB; more is hostile */
#define NS_LIST_PAGE 1000
#define NS_SCAN_PAGES_MAX 100 /* bound on the search for domains below a prefix */
#define NS_CACHE_PRUNE_AT 20000
#define NS_WARNED_MAX 4096

struct ns_cached {
    int err;                  /* 0 or -ENOENT */
    struct ns_info info;      /* rights: decided per user from acl at every lookup */
    struct schema_domain acl; /* folders and domains: the parsed .domain.json (its ACLs) */
    double expires;           /* CLOCK_MONOTONIC seconds */
};

struct ns {
    struct store *store;
    char *user;
    char *admin_user;
    double ttl;
    double mount_time;
    unsigned requests;        /* children stat at once by a listing */
    pthread_mutex_t lock;     /* guards cache, warned and listings */
    struct strmap *cache;     /* path -> struct ns_cached */
    struct strmap *warned;    /* keys already reported as unusable names */
    struct strmap *listings;  /* path -> struct ns_cached_dir */
    struct ns_vlists *vlists; /* version lists (ns_vlists.c), locked on their own */
};

static void cached_dir_free(void *value);
static void cached_free(void *value);

int ns_new(struct store *store, const struct ns_config *cfg, struct ns **out)
{
    struct ns *ns = calloc(1, sizeof *ns);
    if (!ns)
        return -ENOMEM;
    ns->store = store;
    ns->ttl = cfg->ttl;
    ns->requests = cfg->requests;
    ns->mount_time = (double)time(NULL);
    ns->user = strdup(cfg->user);
    ns->admin_user = strdup(cfg->admin_user);
    ns->cache = strmap_new();
    ns->warned = strmap_new();
    ns->listings = strmap_new();
    if (!ns->user || !ns->admin_user || !ns->cache || !ns->warned || !ns->listings ||
        ns_vlists_new(cfg->ttl, &ns->vlists) != 0 || pthread_mutex_init(&ns->lock, NULL) != 0) {
        ns_vlists_free(ns->vlists);
        strmap_free(ns->cache, NULL);
        strmap_free(ns->warned, NULL);
        strmap_free(ns->listings, NULL);
        free(ns->user);
        free(ns->admin_user);
        free(ns);
        return -ENOMEM;
    }
    *out = ns;
    return 0;
}

void ns_free(struct ns *ns)
{
    if (!ns)
        return;
    strmap_free(ns->cache, cached_free);
    strmap_free(ns->warned, NULL);
    strmap_free(ns->listings, cached_dir_free);
    ns_vlists_free(ns->vlists);
    pthread_mutex_destroy(&ns->lock);
    free(ns->user);
    free(ns->admin_user);
    free(ns);
}

/* ---- what a path may be, before asking the store ---- */

/* What may be created may be seen, and nothing else: one rule for both (schema.h). */
static bool path_may_be_visible(const char *path)
{
    return schema_domain_path_allowed(path, NULL) == 0;
}

struct store *ns_store_of(const struct ns *ns)
{
    return ns->store;
}

struct ns_vlists *ns_vlists_of(const struct ns *ns)
{
    return ns->vlists;
}

const char *ns_user_of(const struct ns *ns)
{
    return ns->user;
}

/* Report an unusable name once (per NS_WARNED_MAX distinct keys), not on every listing. */
static void warn_once(struct ns *ns, const char *key, const char *why)
{
    ns_warn_once(ns, key, "hidden", why);
}

void ns_warn_once(struct ns *ns, const char *key, const char *what, const char *why)
{
    bool first;
    pthread_mutex_lock(&ns->lock);
    if (strmap_count(ns->warned) >= NS_WARNED_MAX) {
        strmap_free(ns->warned, NULL);
        ns->warned = strmap_new();
    }
    first = ns->warned && !strmap_get(ns->warned, key);
    if (first && strmap_put(ns->warned, key, (void *)1, NULL) != 0)
        first = true;
    pthread_mutex_unlock(&ns->lock);
    if (first)
        log_warn("%s: %s: %s", key, what, why);
}

/* ---- resolving one path against the store ---- */

static void fill_from_domain(const struct schema_domain *dom, struct ns_info *out)
{
    out->kind = dom->root ? NS_DOMAIN : NS_FOLDER;
    out->mtime = dom->last_modified;
    out->ctime = dom->created;
    if (dom->root)
        snprintf(out->root, sizeof out->root, "%s", dom->root);
    snprintf(out->owner, sizeof out->owner, "%s", dom->owner);
    out->ingest = dom->root ? SCHEMA_INGEST_UNSET : dom->ingest;
    out->current_ref = dom->root && dom->current_ref;
    out->versions =
        dom->root ? (struct schema_versions){ SCHEMA_VERSIONS_UNSET, 0, 0 } : dom->versions;
}

/* Plain directories have no ACL: anyone may list them, only the admin may create in them
 * (HSDS lets only admins create domains where no parent folder grants it). */
static unsigned plain_dir_rights(const struct ns *ns, const char *user)
{
    return user && strcmp(user, ns->admin_user) == 0 ? SCHEMA_ACL_ALL : SCHEMA_ACL_READ;
}

/* What user may do with what info and acl describe (§9). No user: a caller without an HSDS
 * name, who gets what HSDS gives unauthenticated requests: default's read, nothing more. */
static unsigned rights_for(const struct ns *ns, const struct ns_info *info,
                           const struct schema_domain *acl, const char *user)
{
    switch (info->kind) {
    case NS_DIR:
        return plain_dir_rights(ns, user);
    case NS_FOLDER:
    case NS_DOMAIN:
        if (!user)
            return schema_acl_rights(acl, "default", NULL, NULL, 0) & SCHEMA_ACL_READ;
        return schema_acl_rights(acl, user, ns->admin_user, NULL, 0);
    default:
        return 0; /* broken: nobody may use it */
    }
}

unsigned ns_domain_rights(const struct ns *ns, const struct schema_domain *dom, const char *user)
{
    struct ns_info info = { .kind = NS_DOMAIN };
    return rights_for(ns, &info, dom, user);
}

/* 1 if some key below prefix is a usable .domain.json, 0 if none, <0 on store errors. */
static int prefix_holds_domains(struct ns *ns, const char *prefix)
{
    char *token = NULL;
    int found = 0, rc = 0;
    for (int page = 0; page < NS_SCAN_PAGES_MAX && !found; page++) {
        struct store_list list = { 0 };
        rc = store_list(ns->store, prefix, NULL, token, NS_LIST_PAGE, &list);
        free(token);
        token = NULL;
        if (rc != 0)
            break;
        for (size_t i = 0; i < list.n_objects && !found; i++) {
            char path[STORE_KEY_MAX + 2];
            found = schema_domain_path(list.objects[i].key, path, sizeof path) == 0 &&
                    path_may_be_visible(path);
        }
        token = list.next_token;
        list.next_token = NULL;
        store_list_free(&list);
        if (!token)
            break;
    }
    if (token && !found)
        log_warn("%s: more than %d pages of keys without a domain; shown as empty", prefix,
                 NS_SCAN_PAGES_MAX);
    free(token);
    return rc < 0 ? rc : found;
}

static void mark_broken(struct ns_info *out, const char *key, const char *why)
{
    memset(out, 0, sizeof *out);
    out->kind = NS_BROKEN;
    log_warn("%s: unusable domain object: %s", key, why);
}

/* *acl keeps the parsed domain: rights are decided from it for whoever asks. */
static int resolve_domain_json(const char *key, const struct store_buf *buf, struct ns_info *out,
                               struct schema_domain *acl)
{
    char why[160];
    if (schema_domain_parse((const char *)buf->data, buf->len, acl, why, sizeof why) != 0) {
        mark_broken(out, key, why);
        return 0;
    }
    fill_from_domain(acl, out);
    return 0;
}

static int resolve_without_domain_json(struct ns *ns, const char *key, struct ns_info *out)
{
    /* key is "P/.domain.json"; the prefix to search is "P/" */
    size_t plen = strlen(key) - strlen(SCHEMA_DOMAIN_KEY_SUFFIX) + 1;
    char prefix[STORE_KEY_MAX + 1];
    memcpy(prefix, key, plen);
    prefix[plen] = '\0';
    int rc = prefix_holds_domains(ns, prefix);
    if (rc <= 0)
        return rc == 0 ? -ENOENT : rc == -EACCES ? -EACCES : -EIO;
    out->kind = NS_DIR;
    out->mtime = out->ctime = ns->mount_time;
    return 0;
}

/* What path is (rights not set) and, for folders and domains, its parsed domain object in
 * *acl (empty otherwise; the caller frees it either way). */
static int resolve(struct ns *ns, const char *path, struct ns_info *out, struct schema_domain *acl)
{
    char key[STORE_KEY_MAX + 1];
    struct store_buf buf = { 0 };
    memset(out, 0, sizeof *out);
    memset(acl, 0, sizeof *acl);
    if (schema_domain_key(path, key, sizeof key) != 0)
        return -ENOENT;
    int rc = store_get(ns->store, key, NS_DOMAIN_JSON_MAX, &buf);
    switch (rc) {
    case 0:
        rc = resolve_domain_json(key, &buf, out, acl);
        store_buf_free(&buf);
        return rc;
    case -ENOENT:
        return resolve_without_domain_json(ns, key, out);
    case -EISDIR:
        mark_broken(out, key, "a directory where an object was expected");
        return 0;
    case -EFBIG:
        mark_broken(out, key, "larger than 1 MiB");
        return 0;
    case -EINVAL:
        return -ENOENT; /* not a usable key: nothing there to show */
    case -EACCES:
        return -EACCES; /* the store refused us (logged): say so, do not hide it */
    default:
        return -EIO; /* the store logged what failed */
    }
}

/* ---- the cache ---- */

static void cached_free(void *value)
{
    struct ns_cached *c = value;
    if (!c)
        return;
    schema_domain_free(&c->acl);
    free(c);
}

/* 1 when path is not cached (or expired); else its answer, with user's rights. */
static int lookup_cached(struct ns *ns, const char *path, const char *user, struct ns_info *out)
{
    int rc = 1;
    pthread_mutex_lock(&ns->lock);
    struct ns_cached *c = strmap_get(ns->cache, path);
    if (c && c->expires > clock_monotonic()) {
        rc = c->err;
        if (rc == 0) {
            *out = c->info;
            out->rights = rights_for(ns, &c->info, &c->acl, user);
        }
    }
    pthread_mutex_unlock(&ns->lock);
    return rc;
}

static int drop_expired(const char *key, void *value, void *ctx)
{
    (void)key;
    struct ns_cached *c = value;
    if (c->expires > *(double *)ctx)
        return 0;
    cached_free(c);
    return 1;
}

/* Takes acl over (freed when not cached). */
static void remember(struct ns *ns, const char *path, int err, const struct ns_info *info,
                     struct schema_domain *acl)
{
    struct ns_cached *c = ns->ttl > 0 ? calloc(1, sizeof *c) : NULL, *old = NULL;
    if (!c) {
        schema_domain_free(acl);
        return; /* caching is an optimisation; skip it */
    }
    double now = clock_monotonic();
    c->err = err;
    if (err == 0)
        c->info = *info;
    c->acl = *acl;
    memset(acl, 0, sizeof *acl);
    c->expires = now + ns->ttl;
    pthread_mutex_lock(&ns->lock);
    if (strmap_count(ns->cache) >= NS_CACHE_PRUNE_AT)
        strmap_filter(ns->cache, drop_expired, &now);
    if (strmap_put(ns->cache, path, c, (void **)&old) != 0)
        old = c;
    pthread_mutex_unlock(&ns->lock);
    cached_free(old);
}

void ns_invalidate(struct ns *ns, const char *path)
{
    char parent[STORE_KEY_MAX + 2];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash)
        slash[slash == parent ? 1 : 0] = '\0';
    pthread_mutex_lock(&ns->lock);
    void *self = strmap_remove(ns->cache, path);
    void *up = strmap_remove(ns->cache, parent);
    void *listing = strmap_remove(ns->listings, parent);
    void *own = strmap_remove(ns->listings, path);
    pthread_mutex_unlock(&ns->lock);
    ns_vlists_invalidate(ns->vlists, path);
    cached_free(self);
    cached_free(up);
    if (listing)
        cached_dir_free(listing);
    if (own)
        cached_dir_free(own);
}

static void root_info(struct ns *ns, const char *user, struct ns_info *out)
{
    memset(out, 0, sizeof *out);
    out->kind = NS_DIR;
    out->rights = plain_dir_rights(ns, user);
    out->mtime = out->ctime = ns->mount_time;
}

int ns_plain_stat_as(struct ns *ns, const char *path, const char *user, struct ns_info *out)
{
    struct schema_domain acl;
    if (strcmp(path, "/") == 0) {
        root_info(ns, user, out);
        return 0;
    }
    if (!path_may_be_visible(path))
        return -ENOENT;
    int rc = lookup_cached(ns, path, user, out);
    if (rc <= 0)
        return rc;
    rc = resolve(ns, path, out, &acl);
    if (rc == 0)
        out->rights = rights_for(ns, out, &acl, user);
    if (rc == 0 || rc == -ENOENT)
        remember(ns, path, rc, out, &acl);
    else
        schema_domain_free(&acl);
    return rc;
}

/* ---- listing a directory ---- */

static int dir_append(struct ns_dir *dir, size_t *cap, const char *name, const struct ns_info *info)
{
    if (dir->n == *cap) {
        struct ns_dirent *e = grow_array(dir->entries, cap, *cap + 1, sizeof *e, 16);
        if (!e)
            return -ENOMEM;
        dir->entries = e;
    }
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    dir->entries[dir->n].name = copy;
    dir->entries[dir->n].info = *info;
    dir->n++;
    return 0;
}

/* One common prefix "…/name/" of the listing of dir_path: add it if it is visible. */
/* The child named by listing prefix `common` (below list_prefix), or NULL when its name
 * cannot be a path (warned once). A new string: its path. */
static char *child_of(struct ns *ns, const char *dir_path, const char *list_prefix,
                      const char *common)
{
    const char *name = common + strlen(list_prefix);
    size_t len = strlen(name);
    if (len == 0 || name[len - 1] != '/')
        return NULL;
    len--;
    if (len == strlen(SCHEMA_VERSIONS_DIR) && memcmp(name, SCHEMA_VERSIONS_DIR, len) == 0)
        return NULL; /* reachable by name, never listed: tar, rsync, du skip the versions */
    if (schema_name_valid(name, len) != 1) {
        warn_once(ns, common, "the name is not valid UTF-8, is too long or has control characters");
        return NULL;
    }
    char path[STORE_KEY_MAX + 2];
    int n = snprintf(path, sizeof path, "%s/%.*s", strcmp(dir_path, "/") == 0 ? "" : dir_path,
                     (int)len, name);
    if (n < 0 || (size_t)n >= sizeof path) {
        warn_once(ns, common, "the path is longer than a key may be");
        return NULL;
    }
    return strdup(path);
}

struct child_stats {
    struct ns *ns;
    char **paths;
    struct ns_info *info;
    int *rc;
};

static void stat_child(void *ctx, size_t i)
{
    struct child_stats *c = ctx;
    c->rc[i] = ns_plain_stat_as(c->ns, c->paths[i], c->ns->user, &c->info[i]);
}

/*
 * Stat the children (each a GET of its .domain.json over S3: several at once, as a folder of
 * a thousand domains took 27 s one by one) and append those that show, in listing order. A
 * child the store failed to describe (the error is logged) is listed by name alone, so that a
 * store's bad moment neither hides a domain (a sync tool would take it for deleted) nor fails
 * the whole folder: its lookup asks again, and fails alone. *unread counts such children.
 */
static int add_children(struct ns *ns, char **paths, size_t n, struct ns_dir *dir, size_t *cap,
                        size_t *unread)
{
    struct child_stats c = { ns, paths, calloc(n ? n : 1, sizeof *c.info),
                             calloc(n ? n : 1, sizeof *c.rc) };
    int rc = c.info && c.rc ? 0 : -ENOMEM;
    if (rc == 0)
        pfor(n, ns->requests ? ns->requests : 1, stat_child, &c);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (c.rc[i] == -ENOENT)
            continue; /* hidden */
        if (c.rc[i] == -EIO || c.rc[i] == -EACCES) {
            memset(&c.info[i], 0, sizeof c.info[i]);
            c.info[i].kind = NS_BROKEN;
            c.info[i].unread = 1;
            c.rc[i] = 0;
            ++*unread;
        }
        rc = c.rc[i] != 0 ? c.rc[i] : dir_append(dir, cap, strrchr(paths[i], '/') + 1, &c.info[i]);
    }
    free(c.info);
    free(c.rc);
    return rc;
}

static int list_prefix_of(const char *path, char *buf, size_t len)
{
    if (strcmp(path, "/") == 0) {
        buf[0] = '\0';
        return 0;
    }
    int n = snprintf(buf, len, "%s/", path + 1);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* *unread: how many children are listed by name alone (add_children). */
static int list_from_store(struct ns *ns, const char *path, struct ns_dir *out, size_t *unread)
{
    struct ns_info self;
    char prefix[STORE_KEY_MAX + 2];
    char *token = NULL;
    size_t cap = 0;
    memset(out, 0, sizeof *out);
    int rc = ns_plain_stat_as(ns, path, ns->user, &self);
    if (rc != 0)
        return rc;
    if (self.kind != NS_DIR && self.kind != NS_FOLDER)
        return -ENOTDIR;
    if (list_prefix_of(path, prefix, sizeof prefix) != 0)
        return -ENAMETOOLONG;
    do {
        struct store_list list = { 0 };
        rc = store_list(ns->store, prefix, "/", token, NS_LIST_PAGE, &list);
        free(token);
        token = NULL;
        if (rc != 0)
            break;
        char **paths = calloc(list.n_prefixes ? list.n_prefixes : 1, sizeof *paths);
        size_t n = 0;
        for (size_t i = 0; paths && i < list.n_prefixes; i++)
            if ((prefix[0] != '\0' || strcmp(list.prefixes[i], "db/") != 0) &&
                (paths[n] = child_of(ns, path, prefix, list.prefixes[i])) != NULL)
                n++;
        rc = paths ? add_children(ns, paths, n, out, &cap, unread) : -ENOMEM;
        for (size_t i = 0; i < n; i++)
            free(paths[i]);
        free(paths);
        token = list.next_token;
        list.next_token = NULL;
        store_list_free(&list);
    } while (token && rc == 0);
    free(token);
    if (rc != 0) {
        ns_dir_free(out);
        return rc == -ENOENT || rc == -ENOMEM || rc == -EACCES ? rc : -EIO;
    }
    return 0;
}

/* ---- the listing cache: a directory's entries are trusted for ttl, like its stat ---- */

struct ns_cached_dir {
    struct ns_dir dir;
    double expires;
};

static int dir_copy(const struct ns_dir *src, struct ns_dir *dst)
{
    size_t cap = 0;
    memset(dst, 0, sizeof *dst);
    for (size_t i = 0; i < src->n; i++)
        if (dir_append(dst, &cap, src->entries[i].name, &src->entries[i].info) != 0) {
            ns_dir_free(dst);
            return -ENOMEM;
        }
    return 0;
}

static void cached_dir_free(void *value)
{
    struct ns_cached_dir *c = value;
    ns_dir_free(&c->dir);
    free(c);
}

static int drop_expired_dir(const char *key, void *value, void *ctx)
{
    (void)key;
    if (((struct ns_cached_dir *)value)->expires > *(double *)ctx)
        return 0;
    cached_dir_free(value);
    return 1;
}

static int listing_cached(struct ns *ns, const char *path, struct ns_dir *out)
{
    int rc = 1;
    pthread_mutex_lock(&ns->lock);
    struct ns_cached_dir *c = strmap_get(ns->listings, path);
    if (c && c->expires > clock_monotonic())
        rc = dir_copy(&c->dir, out);
    pthread_mutex_unlock(&ns->lock);
    return rc;
}

static void remember_listing(struct ns *ns, const char *path, const struct ns_dir *dir)
{
    struct ns_cached_dir *c = calloc(1, sizeof *c);
    void *old = NULL;
    if (ns->ttl <= 0 || !c || dir_copy(dir, &c->dir) != 0) {
        free(c);
        return; /* caching is an optimisation; skip it */
    }
    double now = clock_monotonic();
    c->expires = now + ns->ttl;
    pthread_mutex_lock(&ns->lock);
    if (strmap_count(ns->listings) >= NS_CACHE_PRUNE_AT / 10)
        strmap_filter(ns->listings, drop_expired_dir, &now);
    if (strmap_put(ns->listings, path, c, &old) != 0)
        old = c;
    pthread_mutex_unlock(&ns->lock);
    if (old)
        cached_dir_free(old);
}

int ns_plain_readdir(struct ns *ns, const char *path, struct ns_dir *out)
{
    int rc = listing_cached(ns, path, out);
    if (rc <= 0)
        return rc;
    size_t unread = 0;
    rc = list_from_store(ns, path, out, &unread);
    if (rc == 0 && unread == 0) /* a listing with names the store could not describe is not
                                   kept: the next one asks again */
        remember_listing(ns, path, out);
    return rc;
}

void ns_dir_free(struct ns_dir *dir)
{
    for (size_t i = 0; i < dir->n; i++)
        free(dir->entries[i].name);
    free(dir->entries);
    dir->entries = NULL;
    dir->n = 0;
}
