/* versions: a new root kept as a version; see include/h5osfs/commit/versions.h. */
#include "h5osfs/commit/versions.h"
#include "h5osfs/domops/vpool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/ns/ns.h"
#include "h5osfs/schema/vlist.h"
#include "h5osfs/domops/vnames.h"
#include "vroot.h"
#include "vtab.h"

#define LIST_TRIES 16

/* ---- the names: folders, the version's domain object, the list ---- */

/* A version's (or a version folder's) HSDS domain object: readable by whoever may read the
 * domain, writable by nobody (schema_acls_read_only). */
static json_t *read_only_domain(const struct versions_commit *vc, const char *root, uint64_t n)
{
    json_t *doc = json_object(), *acls = schema_acls_read_only(vc->acls, vc->user);
    int bad = !doc || !acls;
    if (!bad && root)
        bad = json_object_set_new(doc, "root", json_string(root)) != 0;
    if (!bad)
        bad = json_object_set_new(doc, "owner", json_string(vc->user)) != 0 ||
              json_object_set(doc, "acls", acls) != 0 ||
              json_object_set_new(doc, "created", json_real(clock_wall())) != 0 ||
              json_object_set_new(doc, "lastModified", json_real(clock_wall())) != 0;
    if (!bad && n > 0) {
        json_t *own = json_pack("{sI}", "version", (json_int_t)n);
        bad = !own || json_object_set_new(doc, SCHEMA_H5OSFS_MEMBER, own) != 0;
    }
    json_decref(acls);
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* HSDS lists domains through folders: DIR/.versions/ and DIR/.versions/NAME/, made once.
 * *made (may be NULL) is 1 when this put it. */
static int put_folder_once(const struct versions_commit *vc, const char *path, int *made)
{
    char key[STORE_KEY_MAX + 1], *text = NULL;
    struct store_stat st;
    if (made)
        *made = 0;
    if (schema_domain_key(path, key, sizeof key) != 0)
        return -EINVAL;
    if (store_head(vc->store, key, &st) == 0)
        return 0;
    json_t *doc = read_only_domain(vc, NULL, 0);
    int rc = doc ? hjson_dumps(doc, &text) : -ENOMEM;
    if (rc == 0)
        rc = store_put_if(vc->store, key, text, strlen(text), NULL);
    json_decref(doc);
    free(text);
    if (rc == 0 && made)
        *made = 1;
    return rc == -ESTALE ? 0 : rc; /* another writer made it */
}

/* DIR/.versions/, then DIR/.versions/NAME/; when this made NAME's (a first version), a second
 * look at DIR/.versions': an rmdir of DIR/.versions that saw no version folder may have deleted
 * it after the first look. Such an rmdir looks again after its delete and puts the object back
 * when it finds NAME's (vdrop_versions_dir), so one of the two always sees the other. */
static int put_folders(const struct versions_commit *vc)
{
    char dir[STORE_KEY_MAX + 2];
    int made = 0, rc = schema_versions_dir(vc->domain, dir, sizeof dir);
    char *slash = rc == 0 ? strrchr(dir, '/') : NULL;
    if (!slash)
        return -EINVAL;
    *slash = '\0';
    rc = put_folder_once(vc, dir, NULL);
    *slash = '/';
    if (rc == 0)
        rc = put_folder_once(vc, dir, &made);
    *slash = '\0';
    return rc == 0 && made ? put_folder_once(vc, dir, NULL) : rc;
}

static int put_version_domain(const struct versions_commit *vc, const char *vroot, uint64_t n)
{
    char name[32], path[STORE_KEY_MAX + 2], key[STORE_KEY_MAX + 1], *text = NULL;
    snprintf(name, sizeof name, "%" PRIu64 ".h5", n);
    int rc = schema_version_domain_path(vc->domain, name, path, sizeof path);
    if (rc == 0)
        rc = schema_domain_key(path, key, sizeof key);
    json_t *doc = rc == 0 ? read_only_domain(vc, vroot, n) : NULL;
    if (rc == 0)
        rc = doc ? hjson_dumps(doc, &text) : -ENOMEM;
    if (rc == 0)
        rc = store_put(vc->store, key, text, strlen(text));
    json_decref(doc);
    free(text);
    return rc;
}

/* The list at key and its etag (etag "" and a new list with a new pool when there is none:
 * the pool is claimed by begin_lineage, by the commit that puts the list). */
static int load_list(const struct versions_commit *vc, const char *key, struct vlist *l,
                     char etag[sizeof(((struct store_stat *)0)->etag)])
{
    char why[200], pool[SCHEMA_ID_BUF];
    int rc = ns_vlist_read(vc->store, key, l, etag, why, sizeof why);
    if (rc == -ENOENT) {
        etag[0] = '\0';
        return vroot_mint(pool) == 0 ? vlist_init(l, vc->domain, pool) : -EIO;
    }
    if (rc == -EINVAL) {
        log_error("%s: version list unusable (%s): no version kept until it is repaired", key, why);
        rc = -EIO;
    }
    return rc;
}

static int put_list(const struct versions_commit *vc, const char *key, const struct vlist *l,
                    const char *etag)
{
    char *text = NULL;
    int rc = vlist_dump(l, &text);
    if (rc == 0)
        rc = store_put_if(vc->store, key, text, strlen(text), etag[0] ? etag : NULL);
    free(text);
    return rc;
}

/* keep's expiry (§4.5) in the list being put: *expired (malloc'd, *n_expired long) gets the
 * numbers that lost their name, whose domain objects go once the put has landed. */
static int expire(struct vlist *l, unsigned keep, uint64_t head, uint64_t **expired,
                  size_t *n_expired)
{
    *n_expired = 0;
    if (keep == 0 || l->n_entries == 0)
        return 0;
    unsigned char *was_kept = malloc(l->n_entries);
    uint64_t *numbers = realloc(*expired, l->n_entries * sizeof *numbers);
    if (numbers)
        *expired = numbers;
    if (!was_kept || !numbers) {
        free(was_kept);
        return -ENOMEM;
    }
    for (size_t i = 0; i < l->n_entries; i++)
        was_kept[i] = !l->entries[i].error && l->entries[i].state == VLIST_KEPT;
    vlist_expire(l, keep, head);
    for (size_t i = 0; i < l->n_entries; i++)
        if (was_kept[i] && l->entries[i].state == VLIST_REMOVING)
            numbers[(*n_expired)++] = l->entries[i].n;
    free(was_kept);
    return 0;
}

/* The expired numbers' HSDS domain objects: the list, which h5osfs reads, no longer has them. */
static void drop_expired_objects(const struct versions_commit *vc, const uint64_t *expired,
                                 size_t n_expired)
{
    for (size_t i = 0; i < n_expired; i++) {
        char name[32];
        snprintf(name, sizeof name, "%" PRIu64 ".h5", expired[i]);
        int rc = vnames_delete_object(vc->store, vc->domain, name);
        if (rc != 0)
            log_warn("%s: version %" PRIu64 " expired (keep %u), but its HSDS domain object "
                     "stays (%s)",
                     vc->domain, expired[i], vc->keep, strerror(-rc));
    }
    if (n_expired > 0)
        log_info("%s: %zu version(s) expired (keep %u untagged)", vc->domain, n_expired, vc->keep);
}

/*
 * Version n's size, recorded in its list entry once the version is listed (a build needs the
 * list: its pool is what the version's table URIs are checked against), with one more
 * conditional put; so a listing need not build it. Best effort: when it fails (logged), the
 * entry keeps size 0 and listings build the file, as for lists written before sizes were.
 */
static void record_measured_size(const struct versions_commit *vc, const char *key, uint64_t n,
                                 const char *vroot)
{
    char name[32], path[STORE_KEY_MAX + 2], stamp[64] = "";
    char etag[sizeof(((struct store_stat *)0)->etag)];
    uint64_t size = 0;
    if (!vc->measure)
        return;
    snprintf(name, sizeof name, "%" PRIu64 ".h5", n);
    int rc = schema_version_domain_path(vc->domain, name, path, sizeof path);
    if (rc == 0)
        rc = vc->measure(vc->measure_ctx, path, vroot, &size, stamp, sizeof stamp);
    for (int tries = 0; rc == 0 && tries < LIST_TRIES; tries++) {
        struct vlist l;
        if ((rc = load_list(vc, key, &l, etag)) != 0)
            break;
        const struct vlist_entry *found = vlist_entry_of(&l, n);
        struct vlist_entry *e = found && !found->error ? &l.entries[found - l.entries] : NULL;
        char *copy = e ? strdup(stamp) : NULL;
        if (e && copy) {
            free(e->stamp);
            e->stamp = copy;
            e->size = size;
            rc = put_list(vc, key, &l, etag);
        } else {
            free(copy);
            rc = e ? -ENOMEM : 0; /* gone already (expired, removed): nothing to record */
        }
        vlist_free(&l);
        if (rc != -ESTALE)
            break;
    }
    if (rc != 0)
        log_warn("%s: version %" PRIu64 "'s size not recorded (%s): listings build it", vc->domain,
                 n, strerror(-rc));
}

static void committer(const struct versions_commit *vc, char *buf, size_t len)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    snprintf(buf, len, "%s%s%s", vc->user, host[0] ? "@" : "", host);
}

/* The listed version whose commit made base_root, the domain's root this commit replaces. */
static void base_version_of(const struct vlist *l, const char *base_root, struct base_version *b)
{
    for (size_t i = 0; base_root[0] && i < l->n_entries; i++) {
        const struct vlist_entry *e = &l->entries[i];
        if (!e->error && e->state == VLIST_KEPT &&
            (strcmp(e->current, base_root) == 0 || strcmp(e->root, base_root) == 0)) {
            snprintf(b->vroot, sizeof b->vroot, "%s", e->root);
            b->time = e->time;
            b->is_root = strcmp(e->root, base_root) == 0;
        }
    }
}

/* rm -r of the version folder is deleting the lineage (vdrop.h): the domain is committed,
 * kept as no version (the caller's -EOPNOTSUPP: what this version wrote is collected). */
static int being_dropped(const struct versions_commit *vc)
{
    log_warn("%s: its version folder is being removed (rm -r): committed without a version; "
             "the next commit after the removal starts new versions",
             vc->domain);
    return -EOPNOTSUPP;
}

/* A new lineage's pool is marked as the domain's before its first object (vpool.h). */
static int begin_lineage(const struct versions_commit *vc, const char *pool)
{
    int rc = vpool_claim(vc->store, pool, vc->domain, NULL);
    if (rc != 0)
        log_error("%s: the marker of its new version pool %s cannot be put (%s)", vc->domain, pool,
                  strerror(-rc));
    return rc;
}

/* A new lineage whose list was never put: its pool (marker, objects the root's write put) is
 * no one's, and nothing else would ever delete it. */
static void abandon_lineage(const struct versions_commit *vc, const char *pool)
{
    int rc = vpool_delete_pool(vc->store, pool, NULL);
    if (rc != 0)
        log_warn("%s: the unused version pool %s stays in the bucket (%s)", vc->domain, pool,
                 strerror(-rc));
}

/* A put of the list that failed may still have landed (a timeout, a reply lost): read back,
 * the list tells. Listed: 0, *n its number. Not listed: failed, as the put said. Cannot tell:
 * failed, and vroot forgotten (""), so that the caller does not collect a root a list may
 * name: space, never a listed version. */
static int settle_unsure_put(const struct versions_commit *vc, const char *key,
                             char vroot[SCHEMA_ID_BUF], uint64_t *n, int failed)
{
    char etag[sizeof(((struct store_stat *)0)->etag)];
    struct vlist l;
    int rc = load_list(vc, key, &l, etag);
    int listed = 0;
    for (size_t i = 0; rc == 0 && i < l.n_entries; i++)
        if (!l.entries[i].error && strcmp(l.entries[i].root, vroot) == 0) {
            *n = l.entries[i].n;
            listed = 1;
        }
    if (rc == 0)
        vlist_free(&l);
    if (listed)
        return 0;
    if (rc != 0) {
        log_error("%s: whether version root %s is listed cannot be told (%s): it stays in the "
                  "bucket",
                  vc->domain, vroot, strerror(-rc));
        vroot[0] = '\0';
    }
    return failed;
}

static int read_list(struct store *store, const char *domain, struct vlist *l);

/* A version root that will never be listed may have copied a linked file into the pool
 * under its own name (vroot_pool_file_key), which no version can name then: deleted, or the
 * file (a whole copy on S3) would wait for a sweep, which runs only after a removal. */
static void drop_unlisted_file(struct store *store, const char *domain, const char *pool,
                               const char *vroot)
{
    char key[STORE_KEY_MAX + 1];
    if (!pool[0] || !vroot[0] || vroot_pool_file_key(pool, vroot, key, sizeof key) != 0)
        return;
    int rc = store_delete(store, key);
    if (rc != 0 && rc != -ENOENT)
        log_warn("%s: pool file %s of the unlisted version root %s stays in the bucket (%s)",
                 domain, key, vroot, strerror(-rc));
}

int versions_drop_unlisted(struct store *store, const char *domain, const char *vroot)
{
    struct vlist l;
    int rc = read_list(store, domain, &l);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    drop_unlisted_file(store, domain, l.pool, vroot);
    vlist_free(&l);
    return 0;
}

int versions_commit(const struct versions_commit *vc, uint64_t *n, char vroot[SCHEMA_ID_BUF])
{
    char key[STORE_KEY_MAX + 1], etag[sizeof(((struct store_stat *)0)->etag)], by[320];
    struct vlist l;
    uint64_t *expired = NULL;
    size_t n_expired = 0;
    if (schema_id_version(vc->root) != 2 || schema_vlist_key(vc->domain, key, sizeof key) != 0) {
        log_warn("%s: versions are kept for v2 domains only: committed without a version",
                 vc->domain);
        return -EOPNOTSUPP;
    }
    struct base_version base = { "", 0, 0 };
    int rc = load_list(vc, key, &l, etag);
    if (rc == 0 && l.dropping) {
        vlist_free(&l);
        return being_dropped(vc);
    }
    if (rc == 0 && etag[0] && (rc = vpool_may_keep(vc->store, l.pool, vc->domain)) < 0) {
        vlist_free(&l);
        return rc == -EPERM ? -EOPNOTSUPP : rc; /* logged: committed without a version */
    }
    rc = rc > 0 ? 0 : rc;          /* the marker names the domain (1), or the pool has none (0) */
    char pool[SCHEMA_ID_BUF] = ""; /* the pool vroot's tables name */
    int fresh = rc == 0 && !etag[0], unsure = 0; /* unsure: a put of the list may have landed */
    int dropped = 0;                             /* the lineage is being deleted (logged) */
    if (rc == 0)
        snprintf(pool, sizeof pool, "%s", l.pool);
    if (rc == 0 && fresh)
        rc = begin_lineage(vc, pool);
    if (rc == 0)
        base_version_of(&l, vc->base_root, &base);
    if (rc == 0 && vc->stats)
        vc->stats->base_is_version = base.is_root;
    if (rc == 0)
        rc = vroot_mint(vroot);
    if (rc == 0 && vc->reserve && (rc = vc->reserve(vc->reserve_ctx, vroot)) != 0)
        vroot[0] = '\0'; /* nothing of it was written */
    if (rc == 0)
        rc = vroot_write(vc, l.pool, vroot, &base);
    if (rc == 0 && vc->crash_point)
        vc->crash_point("vroot");
    if (rc == 0)
        rc = put_folders(vc);
    committer(vc, by, sizeof by);
    for (int tries = 0; rc == 0; tries++) {
        const struct vlist_entry *won = vlist_committed_on(&l, vc->base_root);
        if (won) {
            log_error("%s: version %" PRIu64 " of another writer was committed on the same base "
                      "root %s first: this commit loses (ESTALE)",
                      vc->domain, won->n, vc->base_root);
            rc = -ESTALE;
            break;
        }
        rc = vlist_append_on(&l, vc->base_root, vc->root, vroot, clock_wall(), by, n);
        if (rc == 0)
            rc = expire(&l, vc->keep, *n, &expired, &n_expired);
        if (rc == 0)
            rc = put_version_domain(vc, vroot, *n);
        if (rc == 0) {
            rc = put_list(vc, key, &l, etag);
            unsure |= rc != 0 && rc != -ESTALE;
        }
        if (rc != -ESTALE || tries + 1 >= LIST_TRIES)
            break;
        vlist_free(&l); /* another writer changed the list: read it again, append again */
        rc = load_list(vc, key, &l, etag);
        if (rc == 0 && (l.dropping || (!fresh && !etag[0]))) {
            rc = being_dropped(vc); /* the pool this version's tables name is going */
            dropped = 1;
            break;
        }
        if (rc == 0 && strcmp(l.pool, pool) != 0) {
            log_error("%s: another writer began its versions (pool %s) while this commit wrote "
                      "a version over pool %s: this commit loses (ESTALE)",
                      vc->domain, l.pool, pool);
            rc = -ESTALE;
            break;
        }
    }
    vlist_free(&l);
    if (rc != 0 && rc != -ESTALE && unsure)
        rc = settle_unsure_put(vc, key, vroot, n, rc);
    if (rc != 0 && fresh && pool[0] && !unsure)
        abandon_lineage(vc, pool);
    else if (rc != 0)
        drop_unlisted_file(vc->store, vc->domain, pool, vroot); /* vroot "": cannot be told */
    if (rc == -EOPNOTSUPP && !dropped)
        log_warn("%s: this domain cannot be kept as a version yet (data linked to a file that "
                 "is not the domain's own, a chunk table of more than %u entries, or a chunk of "
                 "2 GiB): committed without a version",
                 vc->domain, VTAB_ENTRIES_MAX);
    else if (rc != 0 && rc != -EAGAIN)
        log_error("%s: version not kept (%s): the commit stops here", vc->domain, strerror(-rc));
    else if (vc->crash_point)
        vc->crash_point("listed");
    if (rc == 0)
        drop_expired_objects(vc, expired, n_expired);
    free(expired);
    if (rc == 0)
        record_measured_size(vc, key, *n, vroot);
    return rc;
}

/* The domain's list, parsed: 0, 1 (none), or -EIO (logged). */
static int read_list(struct store *store, const char *domain, struct vlist *l)
{
    char key[STORE_KEY_MAX + 1], why[200];
    struct store_buf buf = { 0 };
    if (schema_vlist_key(domain, key, sizeof key) != 0)
        return 1;
    int rc = store_get(store, key, VLIST_MAX_BYTES, &buf);
    if (rc == -ENOENT)
        return 1;
    if (rc == 0 && vlist_parse((const char *)buf.data, buf.len, l, why, sizeof why) != 0) {
        log_error("%s: version list unusable (%s)", key, why);
        rc = -EIO;
    }
    store_buf_free(&buf);
    return rc;
}

int versions_listed(struct store *store, const char *domain, const char *new_root,
                    char vroot[SCHEMA_ID_BUF])
{
    struct vlist l;
    int rc = read_list(store, domain, &l);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    const struct vlist_entry *e = vlist_listed_as(&l, new_root);
    if (e && vroot)
        snprintf(vroot, SCHEMA_ID_BUF, "%s", e->root);
    rc = e != NULL;
    vlist_free(&l);
    return rc;
}

int versions_is_version_root(struct store *store, const char *domain, const char *root)
{
    struct vlist l;
    int rc = read_list(store, domain, &l);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    rc = 0;
    for (size_t i = 0; root[0] && i < l.n_entries; i++)
        rc |= !l.entries[i].error && strcmp(l.entries[i].root, root) == 0;
    vlist_free(&l);
    return rc;
}
