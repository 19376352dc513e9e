/* commit: see include/h5osfs/commit/commit.h. */
#include "h5osfs/commit/commit.h"
#include "h5osfs/commit/versions.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/domops/gc.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/commit/info.h"
#include "h5osfs/util/log.h"
#include "h5osfs/commit/restore.h"
#include "h5osfs/util/testhook.h"

#define DOMAIN_JSON_MAX (1u << 20)

/* The crash tests' hooks: die here, or wait here, when asked to (testhook.h). */
static void crash_point(const char *stage)
{
    testhook_crash_at(stage);
    testhook_pause_at(stage, NULL);
}

static void on_ingest_stage(void *ctx, enum ingest_stage stage)
{
    (void)ctx;
    static const char *const names[] = { "chunks", "metadata", "root" };
    if ((unsigned)stage < sizeof names / sizeof names[0])
        crash_point(names[stage]);
}

/* Hand root, a version of domain that replaced_by replaced ("": none, a commit undone), to
 * the collector, which records it in the journal before it returns: called only where the
 * commit's own record no longer covers a crash (after the swap, or for a root never named). */
static void collect(const struct commit_ctx *c, const char *root, const char *domain,
                    const char *replaced_by)
{
    if (!*root)
        return;
    if (!c->ops->gc || gc_add(c->ops->gc, root, domain, replaced_by) != 0)
        log_warn("%s: the objects of root %s stay in the bucket (nothing collects them)", domain,
                 root);
}

/* The new root's .info.json: in the background where the mount has a queue for it. */
static void summarise(const struct commit_ctx *c, const char *root)
{
    if (c->info)
        info_queue_add(c->info, root);
    else
        info_write(c->ops->store, c->bucket_name, root, c->workers, NULL);
}

static int set_state(const struct commit_ctx *c, struct journal_rec *rec, enum journal_state state)
{
    rec->state = state;
    return journal_write(c->journal, rec);
}

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
static int read_domain(const struct commit_ctx *c, const char *key, struct store_stat *now,
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
static int named_root(const char *path, const char *key, const json_t *dom, const char **root)
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
static json_t *ref_member(const json_t *dom)
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
    json_t *own = ref_member(dom);
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

static int lost_to_another_writer(const struct journal_rec *rec, const char *now)
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
    int rc = read_domain(c, key, &now, &dom);
    if (rc == 0)
        rc = named_root(rec->domain, key, dom, &named);
    if (rc == 0 && strcmp(named, root) == 0) {
        snprintf(old, SCHEMA_ID_BUF, "%s", rec->base_root); /* ours landed */
    } else if (rc == 0 && strcmp(named, rec->base_root) != 0) {
        rc = lost_to_another_writer(rec, named);
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
static int swap_domain(const struct commit_ctx *c, const struct journal_rec *rec, const char *root,
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
static int current_root(const struct commit_ctx *c, const char *path, char out[SCHEMA_ID_BUF])
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
static int ref_mode_for(const struct commit_ctx *c, const char *path, unsigned *keep)
{
    int ref = 0;
    unsigned ignored;
    return c->versions_for && c->versions_for(c->link_ctx, path, keep ? keep : &ignored, &ref) &&
           ref;
}

/* A root the domain named before a commit replaced it goes to the collector, unless it is a
 * kept version's root (versions_current=ref names the head version itself): a version is
 * collected only through its list (sweep.h). -errno when that cannot be told: kept. */
static void collect_replaced(const struct commit_ctx *c, const char *root, const char *domain,
                             const char *replaced_by)
{
    int listed = *root ? versions_is_version_root(c->ops->store, domain, root) : 0;
    if (listed == 0)
        collect(c, root, domain, replaced_by);
    else if (listed < 0)
        log_warn("%s: whether root %s is a kept version cannot be told: not collected", domain,
                 root);
}

/* A commit whose version was listed (its commit point) but whose swap did not happen: the
 * swap now, as the commit would have done (to the version's root itself where the domain
 * names its head version, versions_current=ref). 1 when the domain names it after it. */
static int rolled_forward(const struct commit_ctx *c, const struct journal_rec *rec,
                          const char *vroot, const char *now)
{
    char old[SCHEMA_ID_BUF];
    /* a domain that names a version's root was in ref mode when the commit began, whatever
     * this mount says: its new root may be sparse (chunks left in the pool), never to be
     * named itself */
    int in_doubt = 0, ref = ref_mode_for(c, rec->domain, NULL) ||
                            versions_is_version_root(c->ops->store, rec->domain, now) != 0;
    log_info("%s: the interrupted commit of root %s was listed as a version: finishing it",
             rec->domain, rec->new_root);
    return swap_domain(c, rec, ref ? vroot : rec->new_root, ref, old, &in_doubt) == 0;
}

/* The version root an interrupted commit recorded (journal_rec.vroot): a version when the
 * list names it, else written for nothing, and collected (it may be partly written, or not at
 * all: the gc deletes what its prefix lists). A list that cannot be read keeps it (logged). */
static void settle_vroot(const struct commit_ctx *c, struct journal_rec *rec)
{
    if (!rec->vroot[0])
        return;
    int listed = versions_is_version_root(c->ops->store, rec->domain, rec->vroot);
    if (listed == 0) {
        log_info("%s: version root %s of the interrupted commit was never listed: collected",
                 rec->domain, rec->vroot);
        collect(c, rec->vroot, rec->domain, "");
    }
    rec->vroot[0] = '\0';
}

/* An interrupted or in-doubt new-root commit: finished when the swap happened (then rec is
 * as after that commit: 1), else undone (0). -errno (logged) when the domain cannot be read
 * to tell: nothing is collected, rec stays as it is. A versioned commit that was listed is
 * finished (rolled forward) rather than undone. */
static int settle_new_root(const struct commit_ctx *c, struct journal_rec *rec)
{
    char now[SCHEMA_ID_BUF], vroot[SCHEMA_ID_BUF] = "";
    int rc = current_root(c, rec->domain, now);
    if (rc != 0) {
        log_error("%s: whether the commit of root %s finished cannot be told (the domain "
                  "cannot be read: %s): kept, settled later",
                  rec->domain, rec->new_root, strerror(-rc));
        return rc;
    }
    int listed = strcmp(now, rec->new_root) != 0
                     ? versions_listed(c->ops->store, rec->domain, rec->new_root, vroot) == 1
                     : 0;
    /* versions_current=ref: the commit's end names its version's root, not the root made */
    int done_as_version = listed && strcmp(now, vroot) == 0;
    if (listed && !done_as_version && rolled_forward(c, rec, vroot, now)) {
        current_root(c, rec->domain, now);
        done_as_version = strcmp(now, vroot) == 0;
    }
    if (strcmp(now, rec->new_root) == 0 || done_as_version) {
        if (strcmp(rec->base_root, now) != 0)
            collect_replaced(c, rec->base_root, rec->domain, now);
        if (done_as_version)
            collect(c, rec->new_root, rec->domain, ""); /* sealed into the version, unnamed */
        log_info("%s: the interrupted commit of root %s had finished", rec->domain, now);
        if (!done_as_version)
            summarise(c, now);
        snprintf(rec->base_root, sizeof rec->base_root, "%s", now);
        rec->new_root[0] = '\0';
        settle_vroot(c, rec);
        rec->mode = JOURNAL_CHANGE;
        return 1;
    }
    log_info("%s: undoing the interrupted commit of root %s; committing again", rec->domain,
             rec->new_root);
    collect(c, rec->new_root, rec->domain, "");
    rec->new_root[0] = '\0';
    settle_vroot(c, rec);
    return 0;
}

/* Before the work of an ingest: is the domain still the version the staged file started
 * from? 0, -ESTALE, or the store's -errno (the swap checks again, atomically). */
/* The domain's "acls" that its versions pass on (doc/versions.md §3.5): dom's, or for a new
 * domain those its object will get. A new reference; NULL when there are none to be had (its
 * versions are then readable by the committer alone). */
static json_t *acls_of(const struct commit_ctx *c, const char *path, json_t *dom)
{
    char *text = NULL, why[200];
    if (dom) {
        json_t *own = ref_member(dom); /* a ref-mode domain's real ACLs */
        return json_incref(json_object_get(own ? own : dom, "acls"));
    }
    if (domops_domain_json(c->ops, path, NULL, &text) != 0)
        return NULL;
    json_t *made = hjson_loadb(text, strlen(text), why, sizeof why);
    free(text);
    json_t *acls = made ? json_incref(json_object_get(made, "acls")) : NULL;
    json_decref(made);
    return acls;
}

/* The domain is still what the staged file started from; *acls (may be NULL) gets its ACLs,
 * *base_ref whether it names its head version (versions_current=ref: never collected). */
static int check_base(const struct commit_ctx *c, const struct journal_rec *rec, json_t **acls,
                      int *base_ref)
{
    char key[STORE_KEY_MAX + 1];
    struct store_stat now;
    json_t *dom;
    const char *named;
    if (schema_domain_key(rec->domain, key, sizeof key) != 0)
        return -EINVAL;
    int rc = read_domain(c, key, &now, &dom);
    if (rc == 0)
        rc = named_root(rec->domain, key, dom, &named);
    if (rc == 0 && strcmp(named, rec->base_root) != 0)
        rc = lost_to_another_writer(rec, named);
    if (rc == 0 && acls)
        *acls = acls_of(c, rec->domain, dom);
    *base_ref = rc == 0 && dom && ref_member(dom) != NULL;
    json_decref(dom);
    return rc;
}

static struct ingest_config ingest_cfg(const struct commit_ctx *c)
{
    return (struct ingest_config){ .store = c->ops->store,
                                   .workers = c->workers,
                                   .link = c->link,
                                   .bucket_name = c->bucket_name,
                                   .on_stage = on_ingest_stage };
}

static void log_done(const struct journal_rec *rec, const struct ingest_stats *st)
{
    log_info("%s: committed (root %s): %llu groups, %llu datasets, %llu datatypes, "
             "%llu chunks written (%llu copied raw, %llu all-fill left out), %llu chunks "
             "copied in the store, %llu objects kept, %llu bytes, %llu objects stored "
             "differently",
             rec->domain, rec->base_root, (unsigned long long)st->groups,
             (unsigned long long)st->datasets, (unsigned long long)st->datatypes,
             (unsigned long long)st->chunks_written, (unsigned long long)st->chunks_raw,
             (unsigned long long)st->chunks_fill, (unsigned long long)st->chunks_copied,
             (unsigned long long)st->objects_kept, (unsigned long long)st->bytes_written,
             (unsigned long long)st->changes);
}

/* What a versioned commit settled: the version kept (vroot "" none) and what it said. */
struct kept_version {
    char vroot[SCHEMA_ID_BUF];
    struct versions_stats st;
};

struct vroot_reserve {
    const struct commit_ctx *c;
    struct journal_rec *rec;
};

/* versions_commit's reserve: the version root's id in the journal record before any object
 * of it is written. A full cache directory does not stop the commit (as start_new_root). */
static int reserve_vroot(void *ctx, const char *vroot)
{
    struct vroot_reserve *r = ctx;
    snprintf(r->rec->vroot, sizeof r->rec->vroot, "%s", vroot);
    int rc = journal_write(r->c->journal, r->rec);
    if (rc == -ENOSPC || rc == -EDQUOT) {
        log_warn("%s: version root %s not in the journal record: a crash before it is listed "
                 "would leave it in the bucket, named by nothing",
                 r->rec->domain, vroot);
        rc = 0;
    }
    return rc;
}

/* With versions on, the ingested root kept as a version before anyone is shown it. 0 (kept,
 * or a domain that cannot be kept yet: logged, committed without one), -EAGAIN (the chunks
 * kept left in the pool cannot be named: ingest a whole root), or -errno. */
static int keep_version(const struct commit_ctx *c, struct journal_rec *rec, const json_t *acls,
                        const struct versions_kept *pooled, struct kept_version *out)
{
    uint64_t n = 0;
    unsigned keep = 0;
    memset(out, 0, sizeof *out);
    if (!c->versions_for || !c->versions_for(c->link_ctx, rec->domain, &keep, NULL))
        return 0;
    struct versions_commit vc = { .store = c->ops->store,
                                  .bucket_name = c->bucket_name,
                                  .domain = rec->domain,
                                  .root = rec->new_root,
                                  .base_root = rec->base_root,
                                  .user = c->ops->user,
                                  .acls = acls,
                                  .workers = c->workers,
                                  .keep = keep,
                                  .measure = c->measure_version,
                                  .measure_ctx = c->link_ctx,
                                  .pool_fresh_for = c->pool_fresh_for,
                                  .stats = &out->st,
                                  .kept = pooled,
                                  .crash_point = crash_point };
    struct vroot_reserve reserve = { c, rec };
    if (rec->state == JOURNAL_COMMITTING) {
        vc.reserve = reserve_vroot;
        vc.reserve_ctx = &reserve;
    }
    int rc = versions_commit(&vc, &n, out->vroot);
    const struct versions_stats *st = &out->st;
    if (rc == 0)
        log_info("%s: kept as version %llu (root %s): %llu chunks in the pool, %llu of them new "
                 "(%llu copied in the store), %llu named as the base version names them",
                 rec->domain, (unsigned long long)n, out->vroot,
                 (unsigned long long)st->chunks_pooled, (unsigned long long)st->chunks_new,
                 (unsigned long long)st->chunks_copied, (unsigned long long)st->chunks_from_base);
    else if (out->vroot[0]) /* -EOPNOTSUPP too: the objects written before the refusal */
        collect(c, out->vroot, rec->domain, ""); /* not listed: nothing names it */
    if (rc != 0)
        rec->vroot[0] = '\0'; /* collected (or never written) */
    if (rc != 0)
        out->vroot[0] = '\0';
    if (rc == 0 && keep > 0 && c->ops->versions_removed)
        c->ops->versions_removed(c->ops->versions_ctx, rec->domain); /* expired ones, if any */
    return rc == -EOPNOTSUPP ? 0 : rc;
}

/* A replacement by a byte copy of a kept version (restore.h): the new root is written from
 * that version's root, no chunk stored again. 1 done, 0 not such a copy (ingest it), -errno. */
static int restore_version(const struct commit_ctx *c, const struct journal_rec *rec,
                           const char *staged, const struct ingest_base *base,
                           const struct ingest_config *cfg)
{
    char vroot[SCHEMA_ID_BUF];
    uint64_t n = 0;
    unsigned keep = 0;
    struct restore_stats st = { 0 };
    if (base || cfg->link || !c->same_as_version || !c->versions_for ||
        !c->versions_for(c->link_ctx, rec->domain, &keep, NULL))
        return 0; /* an r+ change, a linked file, or no versions here */
    int rc = restore_find(c->ops->store, rec->domain, staged, c->same_as_version, c->link_ctx, &n,
                          vroot);
    if (rc != 1)
        return rc;
    rc = restore_root(c->ops->store, c->bucket_name, rec->domain, vroot, rec->new_root, c->workers,
                      &st);
    if (rc != 0)
        return rc == -EOPNOTSUPP ? -EIO : rc;
    log_info("%s: restored from version %llu (root %s): %llu objects written, %llu chunks "
             "copied from the pool, none taken from the file",
             rec->domain, (unsigned long long)n, vroot, (unsigned long long)st.objects,
             (unsigned long long)st.chunks_copied);
    return 1;
}

/* The journal says COMMITTING with a fresh new root: 0, or -errno. A full cache directory must
 * not keep a whole staged file from becoming the domain (and then from freeing its space):
 * the record only lets a crash collect the root. */
static int start_new_root(const struct commit_ctx *c, struct journal_rec *rec)
{
    int rc = ingest_new_root_id_for(rec->base_root, rec->new_root);
    if (rc == 0)
        rc = set_state(c, rec, JOURNAL_COMMITTING);
    if (rc == -ENOSPC || rc == -EDQUOT) {
        log_warn("%s: committing without its journal record: a crash during this commit "
                 "would leave root %s in the bucket, named by nothing",
                 rec->domain, rec->new_root);
        rc = 0;
    }
    return rc;
}

/* The staged file stored under rec->new_root (restored from a version, or ingested; pooled:
 * chunks left in the base version's pool), durable, and kept as a version where versions
 * are on. 0 or -errno (-EAGAIN: see keep_version). */
static int store_new_root(const struct commit_ctx *c, struct journal_rec *rec, const char *staged,
                          const struct ingest_base *base, struct ingest_config *cfg,
                          struct ingest_stats *st, const json_t *acls, struct kept_version *kv)
{
    double t0 = clock_monotonic();
    int rc = restore_version(c, rec, staged, base, cfg);
    if (rc == 0)
        rc = ingest_new(cfg, staged, rec->domain, rec->new_root, base, st);
    else if (rc == 1)
        rc = 0;
    double t1 = clock_monotonic();
    if (rc == 0)
        rc = store_sync(c->ops->store); /* every object durable before it is named */
    log_debug("%s: ingest %.3f s, sync %.3f s", rec->domain, t1 - t0, clock_monotonic() - t1);
    if (rc == 0)
        rc = keep_version(c, rec, acls, cfg->pool_ctx, kv);
    return rc;
}

/*
 * versions_current=ref and an r+ of a domain that names its head version: the ingest leaves
 * the chunks the writer did not change in the pool (no copy per chunk), the version names
 * them as the head does. Where the version cannot (a dataset's grid changed), that root is
 * collected and a whole one ingested, as without ref (doc/versions.md §4.2, status of B).
 */
static int store_new_root_pooled(const struct commit_ctx *c, struct journal_rec *rec,
                                 const char *staged, const struct ingest_base *base,
                                 struct ingest_config *cfg, struct ingest_stats *st,
                                 const json_t *acls, int ref, struct kept_version *kv)
{
    struct versions_kept *pooled = NULL;
    if (ref && base && !cfg->link && versions_kept_new(&pooled) == 0) {
        cfg->kept_in_pool = versions_kept_add;
        cfg->pool_ctx = pooled;
    }
    int rc = store_new_root(c, rec, staged, base, cfg, st, acls, kv), sparse = pooled != NULL;
    cfg->kept_in_pool = NULL;
    cfg->pool_ctx = NULL;
    versions_kept_free(pooled);
    /* a sparse root kept as no version (it cannot be kept: logged) must not be named */
    if (sparse && (rc == -EAGAIN || (rc == 0 && !kv->vroot[0] && st->chunks_in_pool > 0))) {
        collect(c, rec->new_root, rec->domain, ""); /* never named */
        memset(st, 0, sizeof *st);
        rc = start_new_root(c, rec);
        if (rc == 0)
            rc = store_new_root(c, rec, staged, base, cfg, st, acls, kv);
    }
    return rc == -EAGAIN ? -EIO : rc;
}

/* After the swap: what the domain no longer names goes to the collector. The root it named
 * before, unless that is a version's root (ref mode: base_ref); in ref mode the root just
 * ingested too, now sealed into the version the domain names. */
static void collect_after_swap(const struct commit_ctx *c, const struct journal_rec *rec,
                               const char *old, int base_ref, const struct kept_version *kv,
                               int ref)
{
    const char *named = ref ? kv->vroot : rec->new_root;
    if (!base_ref && !kv->st.base_is_version)
        collect(c, old, rec->domain, named); /* before the record is CLEAN */
    if (ref)
        collect(c, rec->new_root, rec->domain, "");
}

/* A new root for the staged file, then the swap: the one put that makes it the domain. *acls
 * gets the domain's ACLs (for its version), the caller's to release. */
static int swap_in_new_root(const struct commit_ctx *c, struct journal_rec *rec, const char *staged,
                            const struct ingest_base *base, int *file_kept, json_t **acls)
{
    struct ingest_config cfg = ingest_cfg(c);
    struct ingest_stats st = { 0 };
    struct kept_version kv = { "", { 0 } };
    unsigned keep = 0;
    cfg.keep_file = file_kept != NULL;
    if (c->link_for)
        cfg.link = c->link_for(c->link_ctx, rec->domain, c->link);
    /* a version takes no *_REF layout yet: a VDS kept as mappings alone is kept as a version */
    cfg.no_vds_tables = c->versions_for && c->versions_for(c->link_ctx, rec->domain, &keep, NULL);
    char old[SCHEMA_ID_BUF];
    int in_doubt = 0, rc = 0, base_ref = 0, ref = ref_mode_for(c, rec->domain, NULL);
    /* an earlier try of this record whose swap was in doubt: settled first, as recovery would
     * (a landed swap is this commit's base now; an undone one is collected) */
    if (rec->state == JOURNAL_COMMITTING && *rec->new_root)
        rc = settle_new_root(c, rec);
    if (rc < 0)
        return rc;
    rc = check_base(c, rec, acls, &base_ref);
    if (rc == 0 && base && base->written_chunks_unchanged)
        rc = base->written_chunks_unchanged(base->ctx); /* HSDS rewrites chunks in place */
    if (rc == 0)
        rc = start_new_root(c, rec);
    if (rc != 0)
        return rc;
    crash_point("committing");
    rc = store_new_root_pooled(c, rec, staged, base, &cfg, &st, *acls, ref, &kv);
    if (file_kept)
        *file_kept = st.file_kept;
    ref = ref && kv.vroot[0]; /* a domain kept without a version names its root */
    if (rc == 0)
        rc = swap_domain(c, rec, ref ? kv.vroot : rec->new_root, ref, old, &in_doubt);
    if (rc != 0 && in_doubt) {
        /* the domain may name the new root: the record stays COMMITTING, so that recovery
         * finishes or undoes the commit once the domain can be read */
        log_error("%s: whether the domain now names root %s cannot be told: kept for "
                  "recovery at the next mount",
                  rec->domain, ref ? kv.vroot : rec->new_root);
        return rc;
    }
    if (rc != 0) {
        collect(c, rec->new_root, rec->domain, ""); /* never named by a .domain.json */
        rec->new_root[0] = '\0';
        rec->vroot[0] = '\0';
        set_state(c, rec, JOURNAL_DIRTY);
        return rc;
    }
    crash_point("domain");
    collect_after_swap(c, rec, old, base_ref, &kv, ref);
    snprintf(rec->base_root, sizeof rec->base_root, "%s", ref ? kv.vroot : rec->new_root);
    rec->new_root[0] = '\0';
    rec->vroot[0] = '\0';
    rec->mode = JOURNAL_CHANGE;
    log_done(rec, &st);
    set_state(c, rec, JOURNAL_CLEAN); /* a lost record only means one idempotent rerun */
    if (!ref)
        summarise(c, rec->base_root); /* a version root gets no .info.json */
    return 0;
}

static int commit_new_root(const struct commit_ctx *c, struct journal_rec *rec, const char *staged,
                           const struct ingest_base *base, int *file_kept)
{
    json_t *acls = NULL;
    int rc = swap_in_new_root(c, rec, staged, base, file_kept, &acls);
    json_decref(acls);
    return rc;
}

int commit_staged(const struct commit_ctx *c, struct journal_rec *rec,
                  const struct ingest_base *base, int *file_kept)
{
    char *staged = journal_staged_path(c->journal, rec);
    if (!staged)
        return -ENOMEM;
    int rc = commit_new_root(c, rec, staged, base, file_kept);
    if (rc != 0 && rc != -ESTALE) /* a lost race is logged where it is found, never retried */
        log_error("%s: commit of the staged file %s failed: %s (kept; retried at the next "
                  "flush or mount)",
                  rec->domain, staged, strerror(-rc));
    free(staged);
    return rc;
}

/* ---- recovery ---- */

static int recover_one(const struct commit_ctx *c, struct journal_rec *rec)
{
    if (rec->state == JOURNAL_CLEAN)
        return 0;
    if (rec->state == JOURNAL_COMMITTING && *rec->new_root) {
        int settled = settle_new_root(c, rec);
        if (settled != 0)
            return settled < 0 ? settled : 0;
    }
    struct ingest_base *base = NULL;
    int rc = rec->mode == JOURNAL_CHANGE && c->recover_base
                 ? c->recover_base(c->base_ctx, rec, &base)
                 : 0;
    int kept = 0; /* the staged file is only removed after this: it may become an object */
    if (rc == 0)
        rc = commit_staged(c, rec, base, &kept);
    if (base)
        c->release_base(c->base_ctx, base);
    return rc;
}

/* Earlier versions accepted names the bucket reserves at create and kept the staged file after
 * its commit failed (or wrote /db into HSDS's object tree). Such a file can never become a
 * domain: its bytes go to rejected/ once, instead of a commit at every mount. 0 or -errno. */
static int reject_reserved_name(const struct commit_ctx *c, const struct journal_rec *rec,
                                const char *why)
{
    char now[SCHEMA_ID_BUF], *kept = NULL;
    if (rec->state == JOURNAL_COMMITTING && *rec->new_root &&
        current_root(c, rec->domain, now) == 0 && strcmp(now, rec->new_root) != 0)
        collect(c, rec->new_root, rec->domain, ""); /* interrupted: nothing names it */
    int rc = journal_reject(c->journal, rec, &kept);
    if (rc == 0)
        log_error("%s: staged under a name the bucket reserves (%s): not committed; the bytes "
                  "are kept as %s",
                  rec->domain, why, kept ? kept : "(unknown)");
    free(kept);
    return rc;
}

/* A cache_dir can hold records of other buckets (one -o cache_dir given to mounts of different
 * buckets in turn): those wait for their own bucket's mount. A record naming no bucket was
 * written before records named one, so its bucket is unknown: it waits too, for the user. */
static int is_this_buckets(const struct commit_ctx *c, const struct journal_rec *rec)
{
    if (journal_rec_is_ours(c->journal, rec))
        return 1;
    if (rec->bucket) {
        log_warn("journal record %s (%s) is for bucket %s, not this one: kept for a mount of "
                 "that bucket",
                 rec->name, rec->domain, rec->bucket);
        return 0;
    }
    char *staged = journal_staged_path(c->journal, rec);
    log_warn("journal record %s (%s) names no bucket (an older h5osfs wrote it): not committed; "
             "its staged bytes stay in %s",
             rec->name, rec->domain, staged ? staged : "staging/");
    free(staged);
    return 0;
}

size_t commit_recover(const struct commit_ctx *c)
{
    struct journal_rec *recs;
    size_t n, left = 0;
    if (journal_list(c->journal, &recs, &n) != 0) {
        log_error("the journal cannot be read: staged files are not recovered");
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        struct journal_rec *rec = &recs[i];
        const char *why;
        if (!is_this_buckets(c, rec))
            continue;
        if (rec->state != JOURNAL_CLEAN && schema_domain_path_allowed(rec->domain, &why) != 0) {
            left += reject_reserved_name(c, rec, why) != 0;
            continue;
        }
        int rc = recover_one(c, rec);
        char *kept = NULL;
        if (rc == 0) {
            journal_remove(c->journal, rec);
        } else if (rc == -EINVAL && journal_reject(c->journal, rec, &kept) == 0) {
            log_error("%s: the staged bytes are not an HDF5 file: kept as %s", rec->domain,
                      kept ? kept : "(unknown)");
        } else if (rc == -ESTALE && rec->mode != JOURNAL_CHANGE &&
                   journal_reject(c->journal, rec, &kept) == 0) {
            log_error("%s: the staged file lost to another writer's change: kept as %s",
                      rec->domain, kept ? kept : "(unknown)");
        } else {
            left++;
        }
        free(kept);
    }
    journal_recs_free(recs, n);
    return left;
}
