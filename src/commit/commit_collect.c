/* commit_collect: what a commit hands on once the domain no longer names a root: the roots it
 * replaced (or that nothing named) to the collector, never a kept version's; the new root to
 * the summary. See include/h5osfs/commit/commit.h. */
#include "commit_int.h"
#include "h5osfs/commit/info.h"
#include "h5osfs/commit/versions.h"
#include "h5osfs/domops/gc.h"
#include "h5osfs/util/log.h"

/* Hand root, a version of domain that replaced_by replaced ("": none, a commit undone), to
 * the collector, which records it in the journal before it returns: called only where the
 * commit's own record no longer covers a crash (after the swap, or for a root never named). */
void commit_collect(const struct commit_ctx *c, const char *root, const char *domain,
                    const char *replaced_by)
{
    if (!*root)
        return;
    if (!c->ops->gc || gc_add(c->ops->gc, root, domain, replaced_by) != 0)
        log_warn("%s: the objects of root %s stay in the bucket (nothing collects them)", domain,
                 root);
}

/* The new root's .info.json: in the background where the mount has a queue for it. */
void commit_summarise(const struct commit_ctx *c, const char *root)
{
    if (c->info)
        info_queue_add(c->info, root);
    else
        info_write(c->ops->store, c->bucket_name, root, c->workers, NULL);
}

/* A root the domain named before a commit replaced it goes to the collector, unless it is a
 * kept version's root (versions_current=ref names the head version itself): a version is
 * collected only through its list (sweep.h). -errno when that cannot be told: kept. */
void commit_collect_replaced(const struct commit_ctx *c, const char *root, const char *domain,
                             const char *replaced_by)
{
    int listed = *root ? versions_is_version_root(c->ops->store, domain, root) : 0;
    if (listed == 0)
        commit_collect(c, root, domain, replaced_by);
    else if (listed < 0)
        log_warn("%s: whether root %s is a kept version cannot be told: not collected", domain,
                 root);
}

/* After the swap: what the domain no longer names goes to the collector. The root it named
 * before, unless that is a version's root (ref mode: base_ref); in ref mode the root just
 * ingested too, now sealed into the version the domain names. */
void commit_collect_after_swap(const struct commit_ctx *c, const struct journal_rec *rec,
                               const char *old, int base_ref, const struct kept_version *kv,
                               int ref)
{
    const char *named = ref ? kv->vroot : rec->new_root;
    if (!base_ref && !kv->st.base_is_version)
        commit_collect(c, old, rec->domain, named); /* before the record is CLEAN */
    if (ref)
        commit_collect(c, rec->new_root, rec->domain, "");
}
