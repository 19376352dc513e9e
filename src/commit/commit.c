/* commit: a staged file made the domain: a new root ingested (or restored from a kept version),
 * made durable, kept as a version where versions are on, then swapped in (commit_domain.c);
 * what that replaced goes to the collector (commit_collect.c). An interrupted commit is
 * settled by commit_settle.c, recovery at mount is commit_recover.c's. See
 * include/h5osfs/commit/commit.h. */
#include "h5osfs/commit/commit.h"
#include "h5osfs/commit/versions.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commit_int.h"
#include "h5osfs/util/clock.h"
#include "h5osfs/schema/hjson.h"
#include "h5osfs/util/log.h"
#include "h5osfs/commit/restore.h"
#include "h5osfs/util/testhook.h"

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

static int set_state(const struct commit_ctx *c, struct journal_rec *rec, enum journal_state state)
{
    rec->state = state;
    return journal_write(c->journal, rec);
}

/* The domain's "acls" that its versions pass on (doc/versions.md §3.5): dom's, or for a new
 * domain those its object will get. A new reference; NULL when there are none to be had (its
 * versions are then readable by the committer alone). */
static json_t *acls_of(const struct commit_ctx *c, const char *path, json_t *dom)
{
    char *text = NULL, why[200];
    if (dom) {
        json_t *own = commit_ref_member(dom); /* a ref-mode domain's real ACLs */
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

/* Before the work of an ingest: is the domain still the version the staged file started
 * from? 0, -ESTALE, or the store's -errno (the swap checks again, atomically). *acls (may be
 * NULL) gets its ACLs, *base_ref whether it names its head version (versions_current=ref:
 * never collected). */
static int check_base(const struct commit_ctx *c, const struct journal_rec *rec, json_t **acls,
                      int *base_ref)
{
    char key[STORE_KEY_MAX + 1];
    struct store_stat now;
    json_t *dom;
    const char *named;
    if (schema_domain_key(rec->domain, key, sizeof key) != 0)
        return -EINVAL;
    int rc = commit_read_domain(c, key, &now, &dom);
    if (rc == 0)
        rc = commit_named_root(rec->domain, key, dom, &named);
    if (rc == 0 && strcmp(named, rec->base_root) != 0)
        rc = commit_lost_to_another_writer(rec, named);
    if (rc == 0 && acls)
        *acls = acls_of(c, rec->domain, dom);
    *base_ref = rc == 0 && dom && commit_ref_member(dom) != NULL;
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
                        const struct versions_kept *pooled, int file_from_base,
                        struct kept_version *out)
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
                                  .linked_file_from_base = file_from_base,
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
        commit_collect(c, out->vroot, rec->domain, ""); /* not listed: nothing names it */
    if (rc != 0)
        rec->vroot[0] = '\0'; /* collected (or never written) */
    if (rc != 0)
        out->vroot[0] = '\0';
    if (rc == 0 && keep > 0 && c->ops->versions_removed)
        c->ops->versions_removed(c->ops->versions_ctx, rec->domain); /* expired ones, if any */
    return rc == -EOPNOTSUPP ? 0 : rc;
}

/* A replacement by a byte copy of a kept version (restore.h): the new root is written from
 * that version's root, no chunk stored again. 1 done, 0 not such a copy (ingest it), 2 given
 * up part way (ingest it under another root), -errno. */
static int restore_version(const struct commit_ctx *c, const struct journal_rec *rec,
                           const char *staged, const struct ingest_base *base)
{
    char vroot[SCHEMA_ID_BUF];
    uint64_t n = 0;
    unsigned keep = 0;
    struct restore_stats st = { 0 };
    if (base || !c->same_as_version || !c->versions_for ||
        !c->versions_for(c->link_ctx, rec->domain, &keep, NULL))
        return 0; /* an r+ change, or no versions here */
    int rc = restore_find(c->ops->store, rec->domain, staged, c->same_as_version, c->link_ctx, &n,
                          vroot);
    if (rc != 1)
        return rc;
    rc = restore_root(c->ops->store, c->bucket_name, rec->domain, vroot, rec->new_root, c->workers,
                      &st);
    if (rc == -EOPNOTSUPP || rc == -EBADMSG) {
        log_warn("%s: not restored from version %llu (root %s): the file is stored instead",
                 rec->domain, (unsigned long long)n, vroot);
        return 2;
    }
    if (rc != 0)
        return rc;
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
    int rc = restore_version(c, rec, staged, base);
    if (rc == 2) { /* what the restore wrote is named by nothing: collected */
        commit_collect(c, rec->new_root, rec->domain, "");
        rc = start_new_root(c, rec);
    }
    if (rc == 0)
        rc = ingest_new(cfg, staged, rec->domain, rec->new_root, base, st);
    else if (rc == 1)
        rc = 0;
    double t1 = clock_monotonic();
    if (rc == 0)
        rc = store_sync(c->ops->store); /* every object durable before it is named */
    log_debug("%s: ingest %.3f s, sync %.3f s", rec->domain, t1 - t0, clock_monotonic() - t1);
    if (rc == 0)
        rc = keep_version(c, rec, acls, cfg->pool_ctx, st->file_from_base, kv);
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
    /* an r+ links no file, even under ingest=link: its linked datasets keep their layouts */
    if (ref && base && versions_kept_new(&pooled) == 0) {
        cfg->kept_in_pool = versions_kept_add;
        cfg->pool_ctx = pooled;
    }
    int rc = store_new_root(c, rec, staged, base, cfg, st, acls, kv), sparse = pooled != NULL;
    cfg->kept_in_pool = NULL;
    cfg->pool_ctx = NULL;
    versions_kept_free(pooled);
    /* a sparse root kept as no version (it cannot be kept: logged) must not be named: its
     * chunks, or its linked file, are the pool's, which only versions keep */
    if (sparse && (rc == -EAGAIN ||
                   (rc == 0 && !kv->vroot[0] && (st->chunks_in_pool > 0 || st->pool_file_left)))) {
        commit_collect(c, rec->new_root, rec->domain, ""); /* never named */
        memset(st, 0, sizeof *st);
        rc = start_new_root(c, rec);
        if (rc == 0)
            rc = store_new_root(c, rec, staged, base, cfg, st, acls, kv);
    }
    return rc == -EAGAIN ? -EIO : rc;
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
    /* a version takes no table of per-entry URIs (a VDS's sources, other domains' objects): a
     * VDS kept as mappings alone is kept as a version */
    cfg.no_vds_tables = c->versions_for && c->versions_for(c->link_ctx, rec->domain, &keep, NULL);
    char old[SCHEMA_ID_BUF];
    int in_doubt = 0, rc = 0, base_ref = 0, ref = commit_ref_mode_for(c, rec->domain, NULL);
    /* an earlier try of this record whose swap was in doubt: settled first, as recovery would
     * (a landed swap is this commit's base now; an undone one is collected) */
    if (rec->state == JOURNAL_COMMITTING && *rec->new_root)
        rc = commit_settle_new_root(c, rec);
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
        rc = commit_swap_domain(c, rec, ref ? kv.vroot : rec->new_root, ref, old, &in_doubt);
    if (rc != 0 && in_doubt) {
        /* the domain may name the new root: the record stays COMMITTING, so that recovery
         * finishes or undoes the commit once the domain can be read */
        log_error("%s: whether the domain now names root %s cannot be told: kept for "
                  "recovery at the next mount",
                  rec->domain, ref ? kv.vroot : rec->new_root);
        return rc;
    }
    if (rc != 0) {
        commit_collect(c, rec->new_root, rec->domain, ""); /* never named by a .domain.json */
        rec->new_root[0] = '\0';
        rec->vroot[0] = '\0';
        set_state(c, rec, JOURNAL_DIRTY);
        return rc;
    }
    crash_point("domain");
    commit_collect_after_swap(c, rec, old, base_ref, &kv, ref);
    snprintf(rec->base_root, sizeof rec->base_root, "%s", ref ? kv.vroot : rec->new_root);
    rec->new_root[0] = '\0';
    rec->vroot[0] = '\0';
    rec->mode = JOURNAL_CHANGE;
    log_done(rec, &st);
    set_state(c, rec, JOURNAL_CLEAN); /* a lost record only means one idempotent rerun */
    if (!ref)
        commit_summarise(c, rec->base_root); /* a version root gets no .info.json */
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
    /* a lost race is logged where it is found; bytes that are no storable HDF5 file (EINVAL)
     * are rejected by staging, never retried */
    if (rc != 0 && rc != -ESTALE)
        log_error("%s: commit of the staged file %s failed: %s (%s)", rec->domain, staged,
                  strerror(-rc),
                  rc == -EINVAL ? "not retried" : "kept; retried at the next flush or mount");
    free(staged);
    return rc;
}
