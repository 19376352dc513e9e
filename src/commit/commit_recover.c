/* commit_recover: the journal's records at mount: each committed again once what was
 * interrupted is settled (commit_settle.c); records of other buckets and reserved names set
 * aside. See include/h5osfs/commit/commit.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commit_int.h"
#include "h5osfs/util/log.h"

static int recover_one(const struct commit_ctx *c, struct journal_rec *rec)
{
    if (rec->state == JOURNAL_CLEAN)
        return 0;
    if (rec->state == JOURNAL_COMMITTING && *rec->new_root) {
        int settled = commit_settle_new_root(c, rec);
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
        commit_current_root(c, rec->domain, now) == 0 && strcmp(now, rec->new_root) != 0)
        commit_collect(c, rec->new_root, rec->domain, ""); /* interrupted: nothing names it */
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
