/* commit_domain: the domain object of a commit: reading what .domain.json names now, the text
 * that names the new root (ACLs kept, versions_current=ref's read-only ones), and the one
 * conditional put that swaps it in. See include/h5osfs/commit/commit.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commit_int.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/clock.h"
#include "h5osfs/util/log.h"

#define DOMAIN_JSON_MAX (1u << 20)

/* The domain object at key, parsed (NULL when it is not JSON). 0 or the store's -errno. */
static int load_domain(const struct commit_ctx *c, const char *key, json_t **dom)
{
    struct store_buf buf;
    char why[200];
    *dom = NULL;
    int rc = store_get(c->ops->store, key, DOMAIN_JSON_MAX, &buf);
    if (rc != 0)
        return rc;
    *dom = hjson_loadb((const char *)buf.data, buf.len, why, sizeof why);
    store_buf_free(&buf);
    return 0;
}

/* The domain object as it is now: its etag and content (*dom NULL, etag "" when there is
 * none). 0 or the store's -errno. */
int commit_read_domain(const struct commit_ctx *c, const char *key, struct store_stat *now,
                       json_t **dom)
{
    *dom = NULL;
    int rc = store_head(c->ops->store, key, now);
    if (rc == 0)
        rc = load_domain(c, key, dom);
    if (rc == 0 && !*dom) {
        log_error("%s: not JSON: the domain is not replaced", key);
        rc = -EIO;
    }
    if (rc == -ENOENT) { /* none, or deleted between the two requests */
        now->etag[0] = '\0';
        rc = 0;
    }
    return rc;
}

/* The root dom names ("" for no domain object); -EIO when it is not a domain object, -EISDIR
 * when it is a folder's. */
int commit_named_root(const char *path, const char *key, const json_t *dom, const char **root)
{
    *root = "";
    if (!dom)
        return 0;
    *root = json_is_object(dom) ? hjson_text(json_object_get(dom, "root")) : NULL;
    if (!json_is_object(dom)) {
        log_error("%s: %s is not a domain object: not replaced", path, key);
        return -EIO;
    }
    return *root ? 0 : -EISDIR; /* a folder was made at this path meanwhile */
}

/* The member of a versions_current=ref domain's object (schema.h SCHEMA_CURRENT_REF), or
 * NULL. */
json_t *commit_ref_member(const json_t *dom)
{
    json_t *own = json_object_get(dom, SCHEMA_H5OSFS_MEMBER);
    const char *mode = hjson_text(json_object_get(own, SCHEMA_CURRENT_REF));
    return mode && strcmp(mode, "ref") == 0 && json_is_object(json_object_get(own, "acls")) ? own
                                                                                            : NULL;
}

/*
 * versions_current=ref (doc/versions.md §2 B): the domain names its head version, whose
 * chunk tables HSDS would corrupt by writing (fact 2), so its bucket "acls" deny every write
 * (read kept as granted) and the real ones move into the h5osfs member, which the mount
 * enforces (schema_domain_parse). Back in root mode the real ones return. 0 or -ENOMEM.
 */
static int set_current_mode(const struct commit_ctx *c, json_t *dom, int ref)
{
    json_t *own = commit_ref_member(dom);
    json_t *real = own ? json_object_get(own, "acls") : json_object_get(dom, "acls");
    if (!ref && !own)
        return 0;
    json_incref(real);
    int rc = 0;
    if (ref) {
        json_t *member = json_object_get(dom, SCHEMA_H5OSFS_MEMBER);
        json_t *read_only = schema_acls_read_only(real, c->ops->user);
        if (!json_is_object(member) &&
            json_object_set_new(dom, SCHEMA_H5OSFS_MEMBER, member = json_object()) != 0)
            member = NULL;
        rc = !member || !read_only || !real ||
                     json_object_set_new(member, SCHEMA_CURRENT_REF, json_string("ref")) != 0 ||
                     json_object_set(member, "acls", real) != 0 ||
                     json_object_set(dom, "acls", read_only) != 0
                 ? -ENOMEM
                 : 0;
        json_decref(read_only);
    } else {
        rc = json_object_set(dom, "acls", real) != 0 ? -ENOMEM : 0;
        json_object_del(own, SCHEMA_CURRENT_REF);
        json_object_del(own, "acls");
        if (json_object_size(own) == 0)
            json_object_del(dom, SCHEMA_H5OSFS_MEMBER);
    }
    json_decref(real);
    return rc;
}

/* The text of the .domain.json naming root: a new one, or dom with its root swapped and
 * lastModified now (owner, ACLs, created and unknown members kept). HSDS itself moves
 * lastModified only for ACL changes, but it is the file's mtime here, which a change must
 * move for make, rsync and backups; HSDS reads any later time. */
static int domain_text(const struct commit_ctx *c, const char *path, json_t *dom, const char *root,
                       int ref, char **text)
{
    if (!dom && !ref)
        return domops_domain_json(c->ops, path, root, text);
    json_t *made = NULL;
    if (!dom) {
        char *fresh = NULL, why[200];
        int rc = domops_domain_json(c->ops, path, root, &fresh);
        made = rc == 0 ? hjson_loadb(fresh, strlen(fresh), why, sizeof why) : NULL;
        free(fresh);
        if (!made)
            return rc ? rc : -ENOMEM;
        dom = made;
    }
    int rc = 0;
    if (json_object_set_new(dom, "root", json_string(root)) != 0 ||
        (json_object_get(dom, "lastModified") &&
         json_object_set_new(dom, "lastModified", json_real(clock_wall())) != 0))
        rc = -ENOMEM;
    if (rc == 0)
        rc = set_current_mode(c, dom, ref);
    if (rc == 0)
        rc = hjson_dumps(dom, text);
    json_decref(made);
    return rc;
}

int commit_lost_to_another_writer(const struct journal_rec *rec, const char *now)
{
    log_error("%s: another writer changed the domain since this file was opened (it started "
              "from %s, the domain is now %s): not committed",
              rec->domain, *rec->base_root ? rec->base_root : "no domain", *now ? now : "deleted");
    return -ESTALE;
}

/* The swap is conditional on the domain being the version the staged file started from; a
 * put_if that loses to a change of something else in the object (or to our own put, landed
 * though its answer was lost) is read again. */
#define SWAP_TRIES 8

/*
 * A put_if that failed may have landed all the same: its reply was lost (a timeout or a
 * dropped connection after the store took it). Collecting the new root then would delete the
 * data of the domain as it now is, so the domain is read again: 0 when it names root, else
 * the put's error; *in_doubt when that read failed too (nobody can say which root is live).
 */
static int landed_anyway(const struct commit_ctx *c, const char *key, const char *root, int put_rc,
                         int *in_doubt)
{
    json_t *dom;
    int rc = load_domain(c, key, &dom);
    const char *named = rc == 0 ? hjson_text(json_object_get(dom, "root")) : NULL;
    int landed = named && strcmp(named, root) == 0;
    json_decref(dom);
    if (landed)
        log_warn("%s: the put failed (%s) but took effect: the domain names root %s", key,
                 strerror(-put_rc), root);
    *in_doubt = rc != 0 && rc != -ENOENT;
    return landed ? 0 : put_rc;
}

/* One attempt: 0 (swapped), 1 (read again), or -errno. *old gets the root replaced. */
static int swap_once(const struct commit_ctx *c, const struct journal_rec *rec, const char *key,
                     const char *root, int ref, char old[SCHEMA_ID_BUF], int *in_doubt)
{
    struct store_stat now;
    json_t *dom;
    const char *named;
    char *text = NULL;
    int rc = commit_read_domain(c, key, &now, &dom);
    if (rc == 0)
        rc = commit_named_root(rec->domain, key, dom, &named);
    if (rc == 0 && strcmp(named, root) == 0) {
        snprintf(old, SCHEMA_ID_BUF, "%s", rec->base_root); /* ours landed */
    } else if (rc == 0 && strcmp(named, rec->base_root) != 0) {
        rc = commit_lost_to_another_writer(rec, named);
    } else if (rc == 0) {
        snprintf(old, SCHEMA_ID_BUF, "%s", named);
        rc = domain_text(c, rec->domain, dom, root, ref, &text);
        if (rc == 0)
            rc = store_put_if(c->ops->store, key, text, strlen(text), dom ? now.etag : NULL);
        if (rc < 0 && rc != -ESTALE && text)
            rc = landed_anyway(c, key, root, rc, in_doubt);
        rc = rc == -ESTALE ? 1 : rc;
    }
    free(text);
    json_decref(dom);
    return rc;
}

/* The one put that makes the new root the domain. *in_doubt: it failed, and whether it
 * took effect is unknown. */
int commit_swap_domain(const struct commit_ctx *c, const struct journal_rec *rec, const char *root,
                       int ref, char old[SCHEMA_ID_BUF], int *in_doubt)
{
    char key[STORE_KEY_MAX + 1];
    old[0] = '\0';
    *in_doubt = 0;
    int rc = schema_domain_key(rec->domain, key, sizeof key) == 0 ? 1 : -EINVAL;
    for (int tries = 0; rc == 1 && tries < SWAP_TRIES; tries++)
        rc = swap_once(c, rec, key, root, ref, old, in_doubt);
    if (rc == 1) {
        log_error("%s: the domain object kept changing under the commit: not committed",
                  rec->domain);
        rc = -ESTALE;
    }
    ns_invalidate(c->ops->ns, rec->domain);
    return rc;
}

/* The root the domain's .domain.json names now ("" when there is no domain): 0, or -errno
 * when it cannot be read, and then nobody can tell whether a commit in doubt landed. */
int commit_current_root(const struct commit_ctx *c, const char *path, char out[SCHEMA_ID_BUF])
{
    char key[STORE_KEY_MAX + 1];
    json_t *dom;
    out[0] = '\0';
    if (schema_domain_key(path, key, sizeof key) != 0)
        return -EINVAL;
    int rc = load_domain(c, key, &dom);
    if (rc == -ENOENT)
        return 0;
    if (rc != 0)
        return rc;
    const char *root = hjson_text(json_object_get(dom, "root"));
    snprintf(out, SCHEMA_ID_BUF, "%s", root ? root : "");
    json_decref(dom);
    return 0;
}

/* Does the domain at path keep versions with versions_current=ref? */
int commit_ref_mode_for(const struct commit_ctx *c, const char *path, unsigned *keep)
{
    int ref = 0;
    unsigned ignored;
    return c->versions_for && c->versions_for(c->link_ctx, path, keep ? keep : &ignored, &ref) &&
           ref;
}
