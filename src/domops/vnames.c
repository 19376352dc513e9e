/* vnames: see include/h5osfs/domops/vnames.h. */
#include "h5osfs/domops/vnames.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/util/testhook.h"

#define DOMAIN_JSON_MAX (1u << 20) /* as domops.c: far more than any .domain.json */
#define LIST_TRIES 16              /* put_if rounds lost to other writers before giving up (-EIO) */
#define ETAG_BUF sizeof(((struct store_stat *)0)->etag)

/* domain's list and its etag: 0, -ENOENT (no list), -EIO (logged), -ENOMEM. */
static int load_list(struct store *store, const char *key, struct vlist *l, char etag[ETAG_BUF])
{
    char why[200];
    int rc = ns_vlist_read(store, key, l, etag, why, sizeof why);
    if (rc == -EINVAL)
        log_error("%s: version list unusable (%s): its names cannot change", key, why);
    return rc == 0 || rc == -ENOENT || rc == -ENOMEM ? rc : -EIO;
}

static int put_list(struct store *store, const char *key, const struct vlist *l, const char *etag)
{
    char *text = NULL;
    int rc = vlist_dump(l, &text);
    if (rc == 0)
        rc = store_put_if(store, key, text, strlen(text), etag);
    free(text);
    return rc;
}

/*
 * One change to domain's list, re-applied on a fresh read whenever another writer changed the
 * list in between (-ESTALE from the put). change returns 0 to put, or -errno to stop. *entry
 * gets a copy of the changed version's root and number (for the domain objects).
 */
struct list_change {
    int (*apply)(struct list_change *c, struct vlist *l);
    char root[SCHEMA_ID_BUF];
    uint64_t n;
};

static int change_list(struct store *store, const char *domain, struct list_change *c)
{
    char key[STORE_KEY_MAX + 1], etag[ETAG_BUF];
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return -EINVAL;
    int rc = -ESTALE;
    for (int tries = 0; rc == -ESTALE && tries < LIST_TRIES; tries++) {
        struct vlist l;
        rc = load_list(store, key, &l, etag);
        if (rc != 0)
            return rc;
        rc = c->apply(c, &l);
        if (rc == 0)
            rc = put_list(store, key, &l, etag);
        vlist_free(&l);
    }
    if (rc == -ESTALE) {
        log_error("%s: version list changed by other writers %d times in a row: not changed", key,
                  LIST_TRIES);
        return -EIO;
    }
    return rc;
}

/* The "acls" of the domain object at path (NULL: none to be had). */
static json_t *acls_at(struct store *store, const char *path)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf = { 0 };
    if (schema_domain_key(path, key, sizeof key) != 0 ||
        store_get(store, key, DOMAIN_JSON_MAX, &buf) != 0)
        return NULL;
    json_t *doc = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    json_t *acls = doc ? json_incref(json_object_get(doc, "acls")) : NULL;
    json_decref(doc);
    return acls;
}

/* Who may read a new name of a version: who may read the domain now, or, once it is gone,
 * who may read the name it is given beside (existing). */
static json_t *readers_of(struct store *store, const char *domain, const char *existing)
{
    char path[STORE_KEY_MAX + 2];
    json_t *acls = acls_at(store, domain);
    if (!acls && schema_version_domain_path(domain, existing, path, sizeof path) == 0)
        acls = acls_at(store, path);
    return acls;
}

/* The read-only HSDS domain object of one name of version n (root), readable as acls say
 * (schema_acls_read_only). */
static int put_name_object(struct store *store, const char *owner, const json_t *acls,
                           const char *domain, const char *name, const char *root, uint64_t n)
{
    char path[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1], *text = NULL;
    if (schema_version_domain_path(domain, name, path, sizeof path) != 0 ||
        schema_domain_key(path, key, sizeof key) != 0)
        return -EINVAL;
    json_t *doc =
        json_pack("{ss ss so sf sf s{sI}}", "root", root, "owner", owner, "acls",
                  schema_acls_read_only(acls, owner), "created", clock_wall(), "lastModified",
                  clock_wall(), SCHEMA_H5OSFS_MEMBER, "version", (json_int_t)n);
    int rc = doc ? hjson_dumps(doc, &text) : -ENOMEM;
    if (rc == 0)
        rc = store_put(store, key, text, strlen(text));
    json_decref(doc);
    free(text);
    return rc;
}

int vnames_delete_object(struct store *store, const char *domain, const char *name)
{
    char path[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1];
    if (schema_version_domain_path(domain, name, path, sizeof path) != 0 ||
        schema_domain_key(path, key, sizeof key) != 0)
        return -EINVAL;
    int rc = store_delete(store, key);
    return rc == -ENOENT ? 0 : rc;
}

/* ---- tag ---- */

struct tag_change {
    struct list_change c;
    const char *existing, *tag;
};

static int add_tag(struct list_change *c, struct vlist *l)
{
    struct tag_change *t = (struct tag_change *)c;
    int rc = vlist_name(l, t->existing, t->tag);
    const struct vlist_entry *e = rc == 0 ? vlist_lookup(l, t->tag) : NULL;
    if (e) {
        snprintf(c->root, sizeof c->root, "%s", e->root);
        c->n = e->n;
    }
    return rc;
}

int vnames_tag(struct store *store, const char *owner, const char *domain, const char *existing,
               const char *tag)
{
    struct tag_change t = { .c = { .apply = add_tag }, .existing = existing, .tag = tag };
    int rc = change_list(store, domain, &t.c);
    if (rc == -EINVAL)
        log_info("%s: refused tag %s: a tag is a name a domain may have, not the version "
                 "list's own (" VLIST_OBJECT_NAME ") and not of the form <number>.h5",
                 domain, tag);
    if (rc != 0)
        return rc;
    testhook_crash_at("tagged");
    json_t *acls = readers_of(store, domain, existing);
    rc = put_name_object(store, owner, acls, domain, tag, t.c.root, t.c.n);
    json_decref(acls);
    if (rc != 0)
        log_warn("%s: tag %s of version %" PRIu64 " is listed, but HSDS does not see it (%s)",
                 domain, tag, t.c.n, strerror(-rc));
    return 0; /* the list, which h5osfs reads, has it */
}

/* ---- removal ---- */

struct removal_change {
    struct list_change c;
    const char *name, *current_root;
};

/* The current version: the one whose commit made current_root, or whose root it is (the
 * domain names its head version with versions_current=ref); when no entry says so (a list
 * written before entries recorded it), the newest kept one, so that it is never removed. */
static uint64_t head_of(const struct vlist *l, const char *current_root)
{
    if (!current_root || !current_root[0])
        return 0;
    const struct vlist_entry *e = vlist_listed_as(l, current_root);
    for (size_t i = 0; !e && i < l->n_entries; i++)
        if (!l->entries[i].error && strcmp(l->entries[i].root, current_root) == 0)
            e = &l->entries[i];
    if (!e)
        e = vlist_latest(l);
    return e ? e->n : 0;
}

static int drop_name(struct list_change *c, struct vlist *l)
{
    struct removal_change *r = (struct removal_change *)c;
    const struct vlist_entry *e = vlist_lookup(l, r->name);
    if (e) {
        snprintf(c->root, sizeof c->root, "%s", e->root);
        c->n = e->n;
    }
    return vlist_unname(l, r->name, head_of(l, r->current_root));
}

int vnames_remove(struct store *store, const char *domain, const char *name,
                  const char *current_root)
{
    struct removal_change r = { .c = { .apply = drop_name },
                                .name = name,
                                .current_root = current_root };
    int rc = change_list(store, domain, &r.c);
    if (rc == -EBUSY)
        log_info("%s: %s names the current version: it stays while the domain exists", domain,
                 name);
    if (rc != 0)
        return rc;
    testhook_crash_at("unnamed");
    rc = vnames_delete_object(store, domain, name);
    if (rc != 0)
        log_warn("%s: name %s is gone from the list, but its HSDS domain object stays (%s)", domain,
                 name, strerror(-rc));
    return 0;
}
