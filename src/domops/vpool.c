/* vpool: see include/h5osfs/domops/vpool.h. */
#include "h5osfs/domops/vpool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "h5osfs/schema/hjson.h"
#include "h5osfs/schema/pool.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/testhook.h"

#define GROUP_MAX (64u << 20) /* a root group's JSON (its links), as HSDS allows */
#define MARKER_NAME ".h5osfs-pool"

int vpool_claim(struct store *store, const char *pool, const char *domain, const char *moving_from)
{
    char key[64], *text = NULL;
    int rc = schema_pool_marker_key(pool, key, sizeof key);
    if (rc == 0)
        rc = schema_pool_marker_dump(domain, moving_from, &text);
    if (rc == 0)
        rc = store_put(store, key, text, strlen(text));
    free(text);
    return rc;
}

#define PATH_BUF (STORE_KEY_MAX + 2) /* a domain path a marker names */

/* pool's marker, read: its owner and the domain an mv is handing it on from ("" none). 0,
 * -ENOENT (none), -EINVAL (no usable marker, or pool is no root id), -errno of the store. */
static int read_marker(struct store *store, const char *pool, char owner[PATH_BUF],
                       char from[PATH_BUF])
{
    char key[64];
    struct store_buf buf = { 0 };
    owner[0] = from[0] = '\0';
    if (schema_pool_marker_key(pool, key, sizeof key) != 0)
        return -EINVAL;
    int rc = store_get(store, key, SCHEMA_POOL_MARKER_MAX, &buf);
    if (rc == 0)
        rc = schema_pool_marker_read(buf.data, buf.len, owner, PATH_BUF, from, PATH_BUF);
    store_buf_free(&buf);
    return rc;
}

/* What pool's marker says of domain: SCHEMA_POOL_OWNER or SCHEMA_POOL_MOVING, -ENOENT there
 * is none, -EPERM it names another domain or none (*why says which), other -errno: the store
 * cannot tell. */
static int marker_says(struct store *store, const char *pool, const char *domain, char *why,
                       size_t why_len)
{
    char owner[PATH_BUF], from[PATH_BUF];
    if (schema_id_is_root(pool) != 1) {
        snprintf(why, why_len, "%s is no root id", pool);
        return -EPERM;
    }
    int rc = read_marker(store, pool, owner, from);
    if (rc == 0 && strcmp(owner, domain) == 0)
        return SCHEMA_POOL_OWNER;
    if (rc == 0 && strcmp(from, domain) == 0)
        return SCHEMA_POOL_MOVING;
    if (rc == 0 || rc == -EINVAL) {
        snprintf(why, why_len, "%s",
                 rc == 0 ? "its marker names another domain" : "its marker names no domain");
        return -EPERM;
    }
    return rc;
}

int vpool_owned_by(struct store *store, const char *pool, const char *domain)
{
    char why[200] = "";
    int rc = marker_says(store, pool, domain, why, sizeof why);
    if (rc == -ENOENT && vpool_root_is_gone(store, pool) == 1)
        return 0; /* deleted whole (an rm -r of the version folder got there first) */
    if (rc == SCHEMA_POOL_MOVING)
        log_info("%s: pool %s is being handed on by an mv: nothing of it is deleted until the "
                 "move ends",
                 domain, pool);
    else if (rc == -ENOENT || rc == -EPERM)
        log_error("%s: pool %s is not this domain's (%s): nothing of it is deleted", domain, pool,
                  rc == -ENOENT ? "it has no marker " MARKER_NAME : why);
    return rc == SCHEMA_POOL_OWNER ? 1 : rc < 0 && rc != -ENOENT && rc != -EPERM ? rc : 0;
}

int vpool_hand_on(struct store *store, const char *pool, const char *from, const char *to)
{
    char why[200];
    int rc = marker_says(store, pool, from, why, sizeof why);
    if (rc == SCHEMA_POOL_OWNER)
        return (rc = vpool_claim(store, pool, to, from)) == 0 ? 1 : rc;
    /* already handed on by this very move (an mv tried again): nothing to put; a marker that
     * says from is moving it elsewhere, or names someone else, is not from's to hand on */
    return rc == SCHEMA_POOL_MOVING || rc == -ENOENT || rc == -EPERM ? 0 : rc;
}

int vpool_may_keep(struct store *store, const char *pool, const char *domain)
{
    char why[200] = "";
    int rc = marker_says(store, pool, domain, why, sizeof why);
    if (rc == -EPERM)
        log_error("%s: its version list names pool %s, which is not its own (%s): no version "
                  "is kept until the list is repaired",
                  domain, pool, why);
    return rc > 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

/* A move's end (from NULL: done; else undone), when the marker still says this move is under
 * way: it names to alone, or from again. */
static int settle_move(struct store *store, const char *pool, const char *to, const char *from)
{
    char owner[PATH_BUF], moving[PATH_BUF];
    int rc = read_marker(store, pool, owner, moving);
    int ours =
        rc == 0 && strcmp(owner, to) == 0 && moving[0] && (!from || strcmp(moving, from) == 0);
    rc = ours ? vpool_claim(store, pool, from ? from : to, NULL) : 0;
    if (rc != 0)
        log_warn("%s: the marker of pool %s cannot be settled after a move (%s): the next mv "
                 "of the domain puts it again",
                 from ? from : to, pool, strerror(-rc));
    return rc;
}

int vpool_move_done(struct store *store, const char *pool, const char *to)
{
    return settle_move(store, pool, to, NULL);
}

int vpool_move_undone(struct store *store, const char *pool, const char *to, const char *from)
{
    return settle_move(store, pool, to, from);
}

int vpool_root_is_gone(struct store *store, const char *root)
{
    char prefix[64];
    struct store_list page = { 0 };
    snprintf(prefix, sizeof prefix, "db/%.17s/", root + 2);
    int rc = store_list(store, prefix, NULL, NULL, 1, &page);
    if (rc == 0)
        rc = page.n_objects == 0;
    store_list_free(&page);
    return rc;
}

int vpool_root_of(struct store *store, const char *root, const char *pool, const char *domain)
{
    char key[STORE_KEY_MAX + 1], why[200] = "";
    struct store_buf buf = { 0 };
    if (schema_id_is_root(root) != 1 || schema_id_is_root(pool) != 1 ||
        schema_obj_key(root, key, sizeof key) != 0) {
        log_error("%s: version root %s is no root id: not collected", domain, root);
        return 0;
    }
    int rc = store_get(store, key, GROUP_MAX, &buf);
    json_t *doc = rc == 0 ? hjson_loadb((const char *)buf.data, buf.len, why, sizeof why) : NULL;
    store_buf_free(&buf);
    if (rc == -ENOENT)
        return rc; /* a pool has none, nor has a root the collector got to first */
    int ours = doc && schema_pool_root_names(doc, pool, why, sizeof why);
    if (!ours && rc == 0)
        log_error("%s: root %s is not a version over pool %s (%s): not collected", domain, root,
                  pool, why);
    json_decref(doc);
    return ours ? 1 : rc == 0 ? 0 : rc;
}

int vpool_delete_below(struct store *store, const char *prefix, const char *keep, const char *stage)
{
    struct store_keys k;
    int rc = store_collect_keys(store, prefix, &k); /* listed first: deletes do not move it */
    if (rc == -ENOENT)
        rc = 0;
    for (size_t i = 0, done = 0; rc == 0 && i < k.n; i++) {
        if (keep && strcmp(k.keys[i], keep) == 0)
            continue;
        rc = store_delete(store, k.keys[i]);
        rc = rc == -ENOENT ? 0 : rc; /* another deleter got there first */
        if (done++ == 0 && stage)
            testhook_crash_at(stage);
    }
    store_keys_free(&k);
    return rc;
}

/* db/<A-B of id>/ (spec §2.1), proof last. */
static int delete_with_proof_last(struct store *store, const char *id, const char *proof,
                                  const char *stage)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "db/%.17s/", id + 2);
    int rc = vpool_delete_below(store, prefix, proof, stage);
    if (rc == 0)
        rc = store_delete(store, proof);
    return rc == -ENOENT ? 0 : rc;
}

int vpool_delete_root(struct store *store, const char *root, const char *stage)
{
    char group[STORE_KEY_MAX + 1];
    if (schema_id_is_root(root) != 1 || schema_obj_key(root, group, sizeof group) != 0)
        return -EINVAL;
    return delete_with_proof_last(store, root, group, stage);
}

int vpool_delete_pool(struct store *store, const char *pool, const char *stage)
{
    char marker[64];
    if (schema_pool_marker_key(pool, marker, sizeof marker) != 0)
        return -EINVAL;
    return delete_with_proof_last(store, pool, marker, stage);
}

int vpool_owner(struct store *store, const char *pool, char *owner, size_t owner_len)
{
    char named[PATH_BUF], from[PATH_BUF];
    int rc = read_marker(store, pool, named, from);
    snprintf(owner, owner_len, "%s", rc == 0 ? named : "");
    return rc;
}
