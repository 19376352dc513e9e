/* commit_settle: a commit interrupted (a crash) or in doubt (its swap's answer lost) is
 * settled: finished where its swap or its version's listing happened, else undone (its root
 * collected). Recovery at mount and a retry of the same record both come here. See
 * include/h5osfs/commit/commit.h. */
#include <stdio.h>
#include <string.h>

#include "commit_int.h"
#include "h5osfs/commit/versions.h"
#include "h5osfs/util/log.h"

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
    int in_doubt = 0, ref = commit_ref_mode_for(c, rec->domain, NULL) ||
                            versions_is_version_root(c->ops->store, rec->domain, now) != 0;
    log_info("%s: the interrupted commit of root %s was listed as a version: finishing it",
             rec->domain, rec->new_root);
    return commit_swap_domain(c, rec, ref ? vroot : rec->new_root, ref, old, &in_doubt) == 0;
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
        commit_collect(c, rec->vroot, rec->domain, "");
        versions_drop_unlisted(c->ops->store, rec->domain, rec->vroot);
    }
    rec->vroot[0] = '\0';
}

/* An interrupted or in-doubt new-root commit: finished when the swap happened (then rec is
 * as after that commit: 1), else undone (0). -errno (logged) when the domain cannot be read
 * to tell: nothing is collected, rec stays as it is. A versioned commit that was listed is
 * finished (rolled forward) rather than undone. */
int commit_settle_new_root(const struct commit_ctx *c, struct journal_rec *rec)
{
    char now[SCHEMA_ID_BUF], vroot[SCHEMA_ID_BUF] = "";
    int rc = commit_current_root(c, rec->domain, now);
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
        commit_current_root(c, rec->domain, now);
        done_as_version = strcmp(now, vroot) == 0;
    }
    if (strcmp(now, rec->new_root) == 0 || done_as_version) {
        if (strcmp(rec->base_root, now) != 0)
            commit_collect_replaced(c, rec->base_root, rec->domain, now);
        if (done_as_version) /* sealed into the version, unnamed */
            commit_collect(c, rec->new_root, rec->domain, "");
        log_info("%s: the interrupted commit of root %s had finished", rec->domain, now);
        if (!done_as_version)
            commit_summarise(c, now);
        snprintf(rec->base_root, sizeof rec->base_root, "%s", now);
        rec->new_root[0] = '\0';
        settle_vroot(c, rec);
        rec->mode = JOURNAL_CHANGE;
        return 1;
    }
    log_info("%s: undoing the interrupted commit of root %s; committing again", rec->domain,
             rec->new_root);
    commit_collect(c, rec->new_root, rec->domain, "");
    rec->new_root[0] = '\0';
    settle_vroot(c, rec);
    return 0;
}
