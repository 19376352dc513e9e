/*
 * ns_versions: the namespace below DIR/.versions (issue 26), read from the version lists.
 *
 *   /DIR/.versions             a directory in every folder: one subdirectory per domain
 *                              that has a version list
 *   /DIR/.versions/NAME        the names of the list DIR/.versions/NAME/.h5osfs-versions
 *   /DIR/.versions/NAME/<x>    the version named x: a domain whose root is that version's,
 *                              read-only, mtime its commit time
 *
 * Rights: reading a version needs the right to read the domain DIR/NAME (or, once it is
 * gone, its folder DIR); nobody may change one through here. A list that cannot be parsed
 * makes DIR/.versions/NAME EIO; a malformed entry makes its "<n>.h5" broken (EIO), the other
 * versions stay readable. Each problem is logged once, with the key and the reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/schema/vlist.h"
#include "ns_int.h"

#define OWN_DOMAIN_MAX (1u << 20) /* as ns.c: far more than any .domain.json */

#define VERSIONS_LIST_PAGE 1000

/* A path split at its .versions component: depth 0 "/D/.versions", 1 ".../NAME", 2
 * ".../NAME/x". */
struct vpath {
    char dir[STORE_KEY_MAX + 2];    /* "/D" ("/" for the top) */
    char domain[STORE_KEY_MAX + 2]; /* "/D/NAME" (depth >= 1) */
    char entry[VLIST_NAME_MAX + 1]; /* x (depth 2) */
    int depth;
};

static int copy_part(char *dst, size_t cap, const char *src, size_t len)
{
    if (len == 0 || len >= cap)
        return -ENOENT;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

static int split_versions_path(const char *path, struct vpath *v)
{
    static const char marker[] = "/" SCHEMA_VERSIONS_DIR;
    const size_t marker_len = sizeof marker - 1;
    const char *at = path;
    while ((at = strstr(at, marker)) != NULL && at[marker_len] != '\0' && at[marker_len] != '/')
        at++;
    if (!at)
        return -ENOENT;
    memset(v, 0, sizeof *v);
    size_t dir_len = (size_t)(at - path);
    if (dir_len == 0)
        strcpy(v->dir, "/");
    else if (copy_part(v->dir, sizeof v->dir, path, dir_len) != 0)
        return -ENOENT;
    const char *rest = at + marker_len;
    if (*rest == '\0')
        return 0;
    const char *name = rest + 1, *slash = strchr(name, '/');
    size_t name_len = slash ? (size_t)(slash - name) : strlen(name);
    int n = snprintf(v->domain, sizeof v->domain, "%s/%.*s", dir_len ? v->dir : "", (int)name_len,
                     name);
    if (n < 0 || (size_t)n >= sizeof v->domain || schema_domain_path_allowed(v->domain, NULL) != 0)
        return -ENOENT;
    v->depth = 1;
    if (!slash)
        return 0;
    if (strchr(slash + 1, '/') ||
        copy_part(v->entry, sizeof v->entry, slash + 1, strlen(slash + 1)) != 0)
        return -ENOENT;
    v->depth = 2;
    return 0;
}

void ns_on_removing(struct ns *ns, void (*fn)(void *ctx, const char *domain), void *ctx)
{
    ns_vlists_on_removing(ns_vlists_of(ns), fn, ctx);
}

/* The version list of domain (absolute path), as read in the last ttl or now: 0 with *out a
 * reference (give it back with ns_vlists_release), -ENOENT (none), -EIO (logged once), -ENOMEM. */
static int load_list(struct ns *ns, const char *domain, struct shared_vlist **out)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf = { 0 };
    if ((*out = ns_vlists_get(ns_vlists_of(ns), domain)) != NULL)
        return 0;
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return -ENOENT;
    struct shared_vlist *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int rc = store_get(ns_store_of(ns), key, VLIST_MAX_BYTES, &buf);
    if (rc == -EFBIG)
        snprintf(why, sizeof why, "larger than %u bytes", VLIST_MAX_BYTES);
    else if (rc == 0 && vlist_parse((const char *)buf.data, buf.len, &s->l, why, sizeof why) == 0)
        rc = 1;
    store_buf_free(&buf);
    if (rc == 1) {
        ns_vlists_tell_removing(ns_vlists_of(ns), domain, &s->l);
        s->refs = 1;
        ns_vlists_remember(ns_vlists_of(ns), domain, s);
        *out = s;
        return 0;
    }
    free(s);
    if (rc == -ENOENT || rc == -EINVAL)
        return -ENOENT;
    if (rc == 0 || rc == -EFBIG)
        ns_warn_once(ns, key, "version list unusable, its versions are not shown", why);
    return rc == -ENOMEM || rc == -EACCES ? rc : -EIO;
}

/* Once its domain is gone, a version's own domain object says who may read it, as HSDS reads
 * it (versions.c copies the domain's read rights into it): 1 with *rights, 0 when it has none
 * (a name whose object a killed daemon did not write: the folder decides, as before). */
static int own_rights(struct ns *ns, const struct vpath *v, const char *user, unsigned *rights)
{
    char path[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf = { 0 };
    struct schema_domain dom = { 0 };
    if (schema_version_domain_path(v->domain, v->entry, path, sizeof path) != 0 ||
        schema_domain_key(path, key, sizeof key) != 0)
        return 0;
    int rc = store_get(ns_store_of(ns), key, OWN_DOMAIN_MAX, &buf);
    if (rc == -ENOENT)
        return 0;
    *rights = 0; /* unreadable, or not a domain object: nobody */
    if (rc == 0 && schema_domain_parse((const char *)buf.data, buf.len, &dom, why, sizeof why) == 0)
        *rights = ns_domain_rights(ns, &dom, user) & SCHEMA_ACL_READ;
    else if (rc == 0)
        ns_warn_once(ns, key, "version's domain object unusable, nobody may read it", why);
    schema_domain_free(&dom);
    store_buf_free(&buf);
    return 1;
}

/* Reading a version is reading the domain: its rights; once it is gone, the version's own. */
static unsigned read_rights(struct ns *ns, const struct vpath *v, const char *user,
                            struct ns_info *domain)
{
    memset(domain, 0, sizeof *domain);
    if (v->depth >= 1 && ns_plain_stat_as(ns, v->domain, user, domain) == 0 &&
        domain->kind == NS_DOMAIN)
        return domain->rights & SCHEMA_ACL_READ;
    struct ns_info dir;
    unsigned own;
    if (ns_plain_stat_as(ns, v->dir, user, &dir) != 0 ||
        (dir.kind != NS_DIR && dir.kind != NS_FOLDER))
        return 0;
    if (v->depth == 2 && own_rights(ns, v, user, &own)) {
        snprintf(domain->owner, sizeof domain->owner, "%s", dir.owner);
        return own;
    }
    if (v->depth >= 1)
        snprintf(domain->owner, sizeof domain->owner, "%s", dir.owner);
    else
        domain->mtime = dir.mtime;
    return dir.rights & SCHEMA_ACL_READ;
}

/* The size the commit recorded, for the version's own number (the name it was built
 * under), with the layout stamp it holds for: fs trusts it only for an equal stamp. */
static void recorded_size(const struct vlist_entry *e, const char *name, struct ns_info *out)
{
    uint64_t n;
    if (e->size == 0 || !e->stamp || !e->stamp[0] || strlen(e->stamp) >= sizeof out->size_stamp ||
        !vlist_number_name(name, &n) || n != e->n)
        return;
    out->size = e->size;
    snprintf(out->size_stamp, sizeof out->size_stamp, "%s", e->stamp);
}

static void version_info(struct ns *ns, const char *domain, const struct vlist_entry *e,
                         const char *name, const struct ns_info *current, unsigned rights,
                         struct ns_info *out)
{
    memset(out, 0, sizeof *out);
    if (e->error) {
        char what[64];
        snprintf(what, sizeof what, "version %llu unreadable", (unsigned long long)e->n);
        ns_warn_once(ns, domain, what, e->error);
        out->kind = NS_BROKEN;
        return;
    }
    out->kind = NS_DOMAIN;
    out->rights = rights;
    out->mtime = out->ctime = e->time;
    snprintf(out->root, sizeof out->root, "%s", e->root);
    snprintf(out->owner, sizeof out->owner, "%s", current->owner);
    snprintf(out->committer, sizeof out->committer, "%s", e->by ? e->by : "");
    out->version = e->n;
    recorded_size(e, name, out);
}

static void dir_info(double mtime, unsigned rights, struct ns_info *out)
{
    memset(out, 0, sizeof *out);
    out->kind = NS_DIR;
    out->rights = rights;
    out->mtime = out->ctime = mtime;
}

static double latest_time(const struct vlist *l)
{
    const struct vlist_entry *e = vlist_latest(l);
    return e ? e->time : 0;
}

int ns_versions_stat(struct ns *ns, const char *path, const char *user, struct ns_info *out)
{
    struct vpath v;
    struct shared_vlist *l;
    struct ns_info current;
    if (split_versions_path(path, &v) != 0)
        return -ENOENT;
    unsigned rights = read_rights(ns, &v, user, &current);
    if (v.depth == 0) {
        if (!rights && current.mtime == 0)
            return -ENOENT; /* no such folder */
        dir_info(current.mtime, rights, out);
        return 0;
    }
    int rc = load_list(ns, v.domain, &l);
    if (rc != 0)
        return rc;
    if (v.depth == 1) {
        dir_info(latest_time(&l->l), rights, out);
    } else {
        const struct vlist_entry *e = vlist_lookup(&l->l, v.entry);
        if (e)
            version_info(ns, v.domain, e, v.entry, &current, rights, out);
        else
            rc = -ENOENT;
    }
    ns_vlists_release(ns_vlists_of(ns), l);
    return rc;
}

static int append(struct ns_dir *dir, size_t *cap, const char *name, const struct ns_info *info)
{
    if (dir->n == *cap) {
        struct ns_dirent *e = grow_array(dir->entries, cap, *cap + 1, sizeof *e, 16);
        if (!e)
            return -ENOMEM;
        dir->entries = e;
    }
    if (!(dir->entries[dir->n].name = strdup(name)))
        return -ENOMEM;
    dir->entries[dir->n].info = *info;
    dir->n++;
    return 0;
}

/* Does a valid entry of l have number n? */
static int number_taken(const struct vlist *l, uint64_t n)
{
    for (size_t i = 0; i < l->n_entries; i++)
        if (!l->entries[i].error && l->entries[i].n == n)
            return 1;
    return 0;
}

/* A broken entry shows as its number, EIO on open (logged then), unless it has none (then it
 * is only logged, once) or a valid entry has that number (that one is listed, once). */
static int list_broken(struct ns *ns, const struct vpath *v, const struct vlist *l,
                       const struct vlist_entry *e, const struct ns_info *current, unsigned rights,
                       struct ns_dir *out, size_t *cap)
{
    struct ns_info info;
    char own[32];
    if (e->n == 0) {
        ns_warn_once(ns, v->domain, "a version list entry without a valid number is not shown",
                     e->error);
        return 0;
    }
    snprintf(own, sizeof own, "%llu.h5", (unsigned long long)e->n);
    version_info(ns, v->domain, e, own, current, rights, &info);
    return number_taken(l, e->n) ? 0 : append(out, cap, own, &info);
}

/* Numbers ascending, then tags: an entry's names in the list's order, broken ones by number. */
static int list_names(struct ns *ns, const struct vpath *v, const struct vlist *l,
                      const struct ns_info *current, unsigned rights, struct ns_dir *out)
{
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < l->n_entries; i++) {
        const struct vlist_entry *e = &l->entries[i];
        struct ns_info info;
        if (e->error)
            rc = list_broken(ns, v, l, e, current, rights, out, &cap);
        for (size_t k = 0; rc == 0 && !e->error && k < e->n_names; k++) {
            version_info(ns, v->domain, e, e->names[k], current, rights, &info);
            rc = append(out, &cap, e->names[k], &info);
        }
    }
    return rc;
}

/* The domains of D that have a version list: the subdirectories of D/.versions/. */
static int list_domains(struct ns *ns, const struct vpath *v, const struct ns_info *current,
                        unsigned rights, struct ns_dir *out)
{
    char prefix[STORE_KEY_MAX + 2], *token = NULL;
    size_t cap = 0;
    int rc = 0, n = snprintf(prefix, sizeof prefix, "%s%s" SCHEMA_VERSIONS_DIR "/",
                             strcmp(v->dir, "/") == 0 ? "" : v->dir + 1,
                             strcmp(v->dir, "/") == 0 ? "" : "/");
    if (n < 0 || (size_t)n >= sizeof prefix)
        return -ENAMETOOLONG;
    do {
        struct store_list list = { 0 };
        rc = store_list(ns_store_of(ns), prefix, "/", token, VERSIONS_LIST_PAGE, &list);
        free(token);
        token = NULL;
        for (size_t i = 0; rc == 0 && i < list.n_prefixes; i++) {
            const char *name = list.prefixes[i] + strlen(prefix);
            size_t len = strlen(name);
            struct ns_info info;
            if (len < 2 || schema_name_valid(name, len - 1) != 1)
                continue;
            char copy[VLIST_NAME_MAX + 1];
            if (len - 1 >= sizeof copy)
                continue;
            memcpy(copy, name, len - 1);
            copy[len - 1] = '\0';
            dir_info(current->mtime, rights, &info);
            rc = append(out, &cap, copy, &info);
        }
        token = list.next_token;
        list.next_token = NULL;
        store_list_free(&list);
    } while (token && rc == 0);
    free(token);
    return rc;
}

int ns_versions_readdir(struct ns *ns, const char *path, struct ns_dir *out)
{
    struct vpath v;
    struct shared_vlist *l = NULL;
    struct ns_info current;
    memset(out, 0, sizeof *out);
    if (split_versions_path(path, &v) != 0)
        return -ENOENT;
    if (v.depth == 2)
        return -ENOTDIR;
    unsigned rights = read_rights(ns, &v, ns_user_of(ns), &current);
    int rc =
        v.depth == 0 ? list_domains(ns, &v, &current, rights, out) : load_list(ns, v.domain, &l);
    if (rc == 0 && v.depth == 1) {
        rc = list_names(ns, &v, &l->l, &current, rights, out);
        ns_vlists_release(ns_vlists_of(ns), l);
    }
    if (rc != 0)
        ns_dir_free(out);
    return rc == 0 || rc == -ENOENT || rc == -ENOMEM || rc == -EACCES ? rc : -EIO;
}
