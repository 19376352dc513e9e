/* staging_commit: an entry's commit (at a flush, and at its last release) and what a commit
 * that failed or lost leaves of it. See include/h5osfs/staging/staging.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/util/log.h"
#include "staging_int.h"

/* The base the commit passes to ingest (NULL: none, and then the staged file must hold every
 * byte: a v1 base's ids have no digits a new root could keep). */
static int commit_base(struct staging *t, struct staged *s, struct ingest_base *base)
{
    if (!s->overlay || s->rec.mode != JOURNAL_CHANGE)
        return 0;
    if (schema_id_version(overlay_root(s->overlay)) != 2) {
        int rc = overlay_materialize_all(s->overlay);
        return rc == 0 ? staging_save_overlay(t, s) : rc;
    }
    int rc = overlay_ingest_base(s->overlay, base);
    if (rc == 0)
        rc = staging_save_overlay(t, s);
    return rc == 0 ? 1 : rc;
}

/* Another writer changed the domain since it was staged: this change can never be committed
 * (every commit answers ESTALE). The staged file is made whole now, while the version it
 * started from is most likely still in the bucket, and journaled as a whole file (a recovery
 * finds the same conflict and keeps the bytes the same way). */
static void lose(struct staging *t, struct staged *s)
{
    s->lost = 1;
    if (!s->overlay || s->rec.mode != JOURNAL_CHANGE)
        return;
    int rc = overlay_materialize_all(s->overlay);
    if (rc == 0)
        rc = staging_save_overlay(t, s);
    if (rc == 0) {
        s->rec.mode = JOURNAL_REPLACE;
        rc = journal_write(t->commit.journal, &s->rec);
    }
    if (rc != 0)
        log_error("%s: the bytes of the change that lost could not all be staged (%s): the "
                  "staged file lacks the unchanged chunks",
                  s->rec.domain, strerror(-rc));
}

static int commit_locked(struct staging *t, struct staged *s)
{
    if (s->lost)
        return -ESTALE;
    if (!s->dirty)
        return 0;
    struct ingest_base base;
    int rc = commit_base(t, s, &base), kept = 0;
    if (rc >= 0) /* an overlay holds the descriptor: that file stays private */
        rc = commit_staged(&t->commit, &s->rec, rc == 1 ? &base : NULL, s->overlay ? NULL : &kept);
    s->shared |= kept;
    if (rc == 0) {
        s->dirty = 0;
        s->committed = 1;
        pthread_mutex_lock(&t->lock);
        snprintf(s->root, sizeof s->root, "%s", s->rec.base_root);
        pthread_mutex_unlock(&t->lock);
        t->hooks.committed(t->hooks.ctx, s->rec.domain);
    }
    s->rejected = rc == -EINVAL;
    if (rc == -ESTALE)
        lose(t, s);
    pthread_mutex_lock(&t->lock);
    t->counts.commits += rc == 0;
    t->counts.failures += rc != 0 && rc != -ESTALE;
    t->counts.lost += rc == -ESTALE;
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int staging_commit(struct staging *t, struct staged *s)
{
    pthread_mutex_lock(&s->lock);
    int rc = s->gone ? 0 : s->torn ? s->torn : s->rejected ? -EINVAL : commit_locked(t, s);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* The last handle is gone: commit what is left, then drop or keep the staged file (a torn
 * one is not dirty: dropped). */
void staging_finish(struct staging *t, struct staged *s)
{
    if (s->gone)
        return; /* its files went at its removal */
    int rc = s->broken || s->rejected ? 0 : commit_locked(t, s);
    char *kept = NULL;
    if (!s->dirty || s->broken) {
        journal_remove(t->commit.journal, &s->rec);
    } else if ((s->rejected || rc == -EINVAL || s->lost) &&
               (!s->overlay || overlay_materialize_all(s->overlay) == 0) &&
               journal_reject(t->commit.journal, &s->rec, &kept) == 0) {
        log_error(s->lost ? "%s: another writer changed the domain while it was open: this "
                            "change is not stored; the file as written is kept as %s"
                          : "%s: not an HDF5 file: not stored; the bytes written are kept "
                            "as %s",
                  s->rec.domain, kept ? kept : "(unknown)");
    } else {
        log_error("%s: closed with uncommitted changes: kept in the staging area, committed "
                  "at the next mount",
                  s->rec.domain);
    }
    free(kept);
}
