/* vmove: versions follow a renamed domain; see include/h5osfs/domops/vmove.h. */
#include "h5osfs/domops/vmove.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"
#include "h5osfs/schema/schema.h"
#include "h5osfs/domops/vpool.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/util/testhook.h"

#define FOLDER_JSON_MAX (1u << 20)
#define LIST_SUFFIX "/" VLIST_OBJECT_NAME
#define DOMAIN_SUFFIX "/.domain.json"

/* ---- keys ---- */

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* "/DIR/NAME" -> "DIR/.versions/NAME/" (the version folder's key prefix). */
static int folder_prefix(const char *domain, char *buf, size_t len)
{
    char dir[STORE_KEY_MAX + 2];
    if (schema_versions_dir(domain, dir, sizeof dir) != 0)
        return -EINVAL;
    int n = snprintf(buf, len, "%s/", dir + 1);
    return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int vmove_is_list_key(const char *key)
{
    if (!ends_with(key, LIST_SUFFIX))
        return 0;
    size_t n = strlen(key) - strlen(LIST_SUFFIX);
    const char *slash = memrchr(key, '/', n);
    const char *dir_end = slash ? slash : key; /* ".../.versions" ends here */
    size_t vlen = strlen(SCHEMA_VERSIONS_DIR);
    if ((size_t)(dir_end - key) < vlen || !slash)
        return 0;
    return strncmp(dir_end - vlen, SCHEMA_VERSIONS_DIR, vlen) == 0 &&
           (dir_end - vlen == key || dir_end[-(long)vlen - 1] == '/');
}

/* The domain path whose list is at key ("a/.versions/x.h5/.h5osfs-versions" -> "/a/x.h5"). */
static int domain_of_list_key(const char *key, char *buf, size_t len)
{
    if (!vmove_is_list_key(key))
        return -EINVAL;
    size_t n = strlen(key) - strlen(LIST_SUFFIX), vlen = strlen(SCHEMA_VERSIONS_DIR);
    const char *name = (const char *)memrchr(key, '/', n) + 1;
    size_t dir_len = (size_t)(name - 1 - key) - vlen; /* "a/" or "" */
    int w = snprintf(buf, len, "/%.*s%.*s", (int)dir_len, key, (int)(key + n - name), name);
    return w > 0 && (size_t)w < len ? 0 : -ENAMETOOLONG;
}

/* ---- the lists ---- */

/* A list an rm -r is deleting (vdrop.h) does not move: that rm -r deletes by its old name. */
static int refuse_dropping(const char *key)
{
    log_error("%s: its version folder is being removed (rm -r): not moved until that rmdir "
              "is done",
              key);
    return -EBUSY;
}

/* The pool of the list at key: 1 (pool filled), 0 (no list), -EBUSY (being dropped: logged),
 * or -errno. A list that cannot be
 * parsed has no pool: "" (it is nobody's copy). */
static int list_pool(struct store *store, const char *key, char pool[SCHEMA_ID_BUF])
{
    struct store_buf buf = { 0 };
    struct vlist l;
    char why[200];
    pool[0] = '\0';
    int rc = store_get(store, key, VLIST_MAX_BYTES, &buf);
    if (rc == -ENOENT)
        return 0;
    if (rc != 0) {
        log_error("%s: version list cannot be read (%s)", key, strerror(-rc));
        return rc;
    }
    int dropping = 0;
    if (vlist_parse((const char *)buf.data, buf.len, &l, why, sizeof why) == 0) {
        snprintf(pool, SCHEMA_ID_BUF, "%s", l.pool);
        dropping = l.dropping;
        vlist_free(&l);
    }
    store_buf_free(&buf);
    return dropping ? refuse_dropping(key) : 1;
}

int vmove_plan(struct store *store, const char *from, const char *to, enum vmove_plan *plan)
{
    char from_key[STORE_KEY_MAX + 1], to_key[STORE_KEY_MAX + 1];
    char from_pool[SCHEMA_ID_BUF], to_pool[SCHEMA_ID_BUF];
    *plan = VMOVE_NONE;
    if (schema_vlist_key(from, from_key, sizeof from_key) != 0 ||
        schema_vlist_key(to, to_key, sizeof to_key) != 0)
        return 0; /* a name too long for versions has none */
    int has_from = list_pool(store, from_key, from_pool);
    int has_to = has_from < 0 ? 0 : list_pool(store, to_key, to_pool);
    if (has_from < 0 || has_to < 0)
        return has_from < 0 ? has_from : has_to;
    if (has_to && !(has_from && from_pool[0] && strcmp(from_pool, to_pool) == 0))
        *plan = VMOVE_TARGET_KEEPS;
    else if (has_from)
        *plan = VMOVE_MOVE; /* a list at to with from's pool: an earlier, interrupted move */
    return 0;
}

/* The list at from_key put at to_key, naming domain (a list that cannot be parsed is copied
 * as it is: it stays as unusable as it was, no worse). */
static int copy_list(struct store *store, const char *from_key, const char *to_key,
                     const char *domain)
{
    struct store_buf buf = { 0 };
    struct vlist l;
    char why[200], *text = NULL, pool[SCHEMA_ID_BUF] = "", from[STORE_KEY_MAX + 2];
    int rc = domain_of_list_key(from_key, from, sizeof from);
    if (rc == 0)
        rc = store_get(store, from_key, VLIST_MAX_BYTES, &buf);
    if (rc == 0 && vlist_parse((const char *)buf.data, buf.len, &l, why, sizeof why) == 0) {
        char *named = strdup(domain);
        if (named) {
            free(l.domain);
            l.domain = named;
        }
        snprintf(pool, sizeof pool, "%s", l.pool);
        rc = l.dropping ? refuse_dropping(from_key) : named ? vlist_dump(&l, &text) : -ENOMEM;
        vlist_free(&l);
    }
    if (rc == 0)
        rc = text ? store_put(store, to_key, text, strlen(text))
                  : store_put(store, to_key, buf.data, buf.len);
    /* the pool goes with the list, once the list is there: until then the old list alone
     * holds it (an interrupted move refuses deletes through the new one, never the reverse),
     * and only a pool the old domain owns is handed on. Until the old list is gone
     * (vmove_settle) the marker names both: either name reads it and may commit to it, only
     * the new one deletes from it. */
    if (rc == 0 && pool[0]) {
        int handed = vpool_hand_on(store, pool, from, domain);
        rc = handed < 0 ? handed : 0;
    }
    free(text);
    store_buf_free(&buf);
    if (rc != 0)
        log_error("%s: version list not copied to %s (%s)", from_key, to_key, strerror(-rc));
    return rc;
}

int vmove_copy_list_to(struct store *store, const char *from_key, const char *to_key)
{
    char domain[STORE_KEY_MAX + 2];
    int rc = domain_of_list_key(to_key, domain, sizeof domain);
    return rc == 0 ? copy_list(store, from_key, to_key, domain) : rc;
}

/* ---- the folder ---- */

static int copy_small(struct store *store, const char *from_key, const char *to_key)
{
    struct store_buf buf = { 0 };
    int rc = store_get(store, from_key, FOLDER_JSON_MAX, &buf);
    if (rc == 0)
        rc = store_put(store, to_key, buf.data, buf.len);
    store_buf_free(&buf);
    return rc;
}

/* "DIR/.versions/" of to, for HSDS's listing of DIR: made from from's when it is missing. */
static int put_versions_folder(struct store *store, const char *from_prefix, const char *to_prefix)
{
    char from_key[STORE_KEY_MAX + 1], to_key[STORE_KEY_MAX + 1];
    struct store_stat st;
    /* the prefixes end "/.versions/NAME/": the folder object is ".versions/.domain.json" */
    const char *f = strrchr(from_prefix, '/'), *t = strrchr(to_prefix, '/');
    f = memrchr(from_prefix, '/', (size_t)(f - from_prefix));
    t = memrchr(to_prefix, '/', (size_t)(t - to_prefix));
    snprintf(from_key, sizeof from_key, "%.*s%s", (int)(f - from_prefix), from_prefix,
             DOMAIN_SUFFIX);
    snprintf(to_key, sizeof to_key, "%.*s%s", (int)(t - to_prefix), to_prefix, DOMAIN_SUFFIX);
    if (store_head(store, to_key, &st) == 0)
        return 0;
    struct store_buf buf = { 0 };
    int rc = store_get(store, from_key, FOLDER_JSON_MAX, &buf);
    if (rc == 0)
        rc = store_put_if(store, to_key, buf.data, buf.len, NULL);
    store_buf_free(&buf);
    return rc == -ESTALE || rc == -ENOENT ? 0 : rc; /* made meanwhile; none to copy */
}

int vmove_copy(struct store *store, const char *from, const char *to)
{
    char from_prefix[STORE_KEY_MAX + 2], to_prefix[STORE_KEY_MAX + 2];
    char to_key[STORE_KEY_MAX + 1], from_list[STORE_KEY_MAX + 1], to_list[STORE_KEY_MAX + 1];
    struct store_keys keys = { 0 };
    int rc = folder_prefix(from, from_prefix, sizeof from_prefix);
    if (rc == 0)
        rc = folder_prefix(to, to_prefix, sizeof to_prefix);
    if (rc == 0 && (schema_vlist_key(from, from_list, sizeof from_list) != 0 ||
                    schema_vlist_key(to, to_list, sizeof to_list) != 0))
        rc = -ENAMETOOLONG;
    if (rc == 0)
        rc = put_versions_folder(store, from_prefix, to_prefix);
    if (rc == 0)
        rc = store_collect_keys(store, from_prefix, &keys);
    size_t plen = strlen(from_prefix);
    for (size_t i = 0; rc == 0 && i < keys.n; i++) {
        const char *rel = keys.keys[i] + plen;
        if (strcmp(rel, ".domain.json") != 0 && !ends_with(rel, DOMAIN_SUFFIX))
            continue; /* the list comes last; stray keys stay */
        if (snprintf(to_key, sizeof to_key, "%s%s", to_prefix, rel) >= (int)sizeof to_key)
            rc = -ENAMETOOLONG;
        else
            rc = copy_small(store, keys.keys[i], to_key);
    }
    if (rc == 0)
        rc = copy_list(store, from_list, to_list, to);
    if (rc == 0)
        rc = store_sync(store);
    store_keys_free(&keys);
    if (rc != 0) {
        log_error("%s: its versions could not be copied to %s (%s): not moved", from, to,
                  strerror(-rc));
        return rc;
    }
    testhook_crash_at("vmoved");
    return 0;
}

/* DIR/.versions/.domain.json, once no version folder is left below it: else the folder DIR
 * could never be removed (rmdir sees versions in it). */
static void drop_empty_versions_folder(struct store *store, const char *prefix)
{
    char dir[STORE_KEY_MAX + 2];
    struct store_list list = { 0 };
    const char *end = memrchr(prefix, '/', strlen(prefix) - 1); /* ".../.versions/" */
    snprintf(dir, sizeof dir, "%.*s", (int)(end - prefix + 1), prefix);
    int rc = store_list(store, dir, NULL, NULL, 2, &list);
    int alone = rc == 0 && list.n_objects == 1 &&
                strcmp(list.objects[0].key + strlen(dir), ".domain.json") == 0;
    if (alone && store_delete(store, list.objects[0].key) != 0)
        log_warn("%s: no versions are left below it, but it could not be deleted", dir);
    store_list_free(&list);
}

int vmove_drop(struct store *store, const char *from)
{
    char prefix[STORE_KEY_MAX + 2], list_key[STORE_KEY_MAX + 1];
    struct store_keys keys = { 0 };
    if (folder_prefix(from, prefix, sizeof prefix) != 0 ||
        schema_vlist_key(from, list_key, sizeof list_key) != 0)
        return -ENAMETOOLONG;
    int rc = store_delete(store, list_key);
    int list_gone = rc == 0 || rc == -ENOENT;
    if (list_gone)
        rc = store_collect_keys(store, prefix, &keys);
    size_t failed = 0;
    /* the names first, the folder object last: a folder never hides names below it */
    for (int folder = 0; rc == 0 && folder < 2; folder++)
        for (size_t i = 0; i < keys.n; i++) {
            const char *rel = keys.keys[i] + strlen(prefix);
            int is_folder = strcmp(rel, ".domain.json") == 0;
            if (is_folder != folder || (!is_folder && !ends_with(rel, DOMAIN_SUFFIX)))
                continue;
            int drc = store_delete(store, keys.keys[i]);
            failed += drc != 0 && drc != -ENOENT;
        }
    store_keys_free(&keys);
    if (rc != 0 || failed > 0)
        log_warn("%s: moved with its versions, but objects of the old version folder %s stay "
                 "(%s)",
                 from, prefix, rc ? strerror(-rc) : "deletes failed");
    else
        drop_empty_versions_folder(store, prefix);
    return list_gone ? 0 : -EIO;
}

/* The pool of the list at list_key, or "" (none, or unusable: nothing to settle). */
static void pool_of_list(struct store *store, const char *list_key, char pool[SCHEMA_ID_BUF])
{
    if (list_pool(store, list_key, pool) != 1)
        pool[0] = '\0';
}

void vmove_settle_list(struct store *store, const char *to_key)
{
    char pool[SCHEMA_ID_BUF], to[STORE_KEY_MAX + 2];
    if (domain_of_list_key(to_key, to, sizeof to) != 0)
        return;
    pool_of_list(store, to_key, pool);
    if (pool[0])
        vpool_move_done(store, pool, to);
}

void vmove_settle(struct store *store, const char *to)
{
    char to_key[STORE_KEY_MAX + 1];
    if (schema_vlist_key(to, to_key, sizeof to_key) == 0)
        vmove_settle_list(store, to_key);
}

void vmove_undo(struct store *store, const char *from, const char *to)
{
    char pool[SCHEMA_ID_BUF], to_key[STORE_KEY_MAX + 1];
    if (schema_vlist_key(to, to_key, sizeof to_key) != 0)
        return;
    pool_of_list(store, to_key, pool);
    if (pool[0])
        vpool_move_undone(store, pool, to, from);
    (void)vmove_drop(store, to); /* logged */
}
