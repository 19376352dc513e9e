/* staging: the table of staged entries (one per path open for writing) and each entry's life:
 * made at its first open, shared by the later ones, off the table at its last close, freed at
 * its last release. Its bytes are staging_io.c's, its commit staging_commit.c's, the walks
 * over the table staging_walk.c's, the recovery at mount staging_recover.c's. See
 * include/h5osfs/staging/staging.h. */
#include "h5osfs/staging/staging.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"
#include "staging_int.h"

int staging_new(const struct commit_ctx *commit, const struct staging_hooks *hooks,
                struct staging **out)
{
    struct staging *t = calloc(1, sizeof *t);
    if (!t || !(t->by_path = strmap_new())) {
        free(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->commit = *commit;
    t->hooks = *hooks;
    *out = t;
    return 0;
}

void staging_free(struct staging *t)
{
    if (!t)
        return;
    if (strmap_count(t->by_path) != 0)
        log_warn("%zu staged files still open at unmount", strmap_count(t->by_path));
    strmap_free(t->by_path, NULL);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static void staged_free(struct staged *s)
{
    overlay_free(s->overlay);
    free(s->path);
    if (s->fd >= 0)
        close(s->fd);
    journal_rec_free(&s->rec);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

struct staged *staging_find(struct staging *t, const char *path)
{
    pthread_mutex_lock(&t->lock);
    struct staged *s = strmap_get(t->by_path, path);
    if (s)
        s->refs++;
    pthread_mutex_unlock(&t->lock);
    return s;
}

/* A new entry, journaled, in the map and locked (the caller prepares its content). */
static int staged_create(struct staging *t, const char *path, const char *root, int truncate,
                         struct staged **out)
{
    struct staged *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    s->refs = 1;
    s->users = 1;
    s->ctime = s->mtime = clock_wall();
    snprintf(s->root, sizeof s->root, "%s", root ? root : "");
    if (!(s->path = strdup(path))) {
        s->fd = -1;
        staged_free(s);
        return -ENOMEM;
    }
    enum journal_mode mode = !root ? JOURNAL_NEW : truncate ? JOURNAL_REPLACE : JOURNAL_CHANGE;
    int rc = journal_stage(t->commit.journal, path, mode, root, &s->rec, &s->fd);
    if (rc != 0) {
        s->fd = -1;
        staged_free(s);
        return rc;
    }
    rc = journal_write(t->commit.journal, &s->rec);
    if (rc == 0)
        rc = strmap_put(t->by_path, path, s, NULL);
    if (rc != 0) {
        journal_remove(t->commit.journal, &s->rec);
        staged_free(s);
        return rc;
    }
    pthread_mutex_lock(&s->lock);
    *out = s;
    return 0;
}

int staging_open(struct staging *t, const char *path, const char *root, int truncate,
                 struct staged **out)
{
    pthread_mutex_lock(&t->lock);
    struct staged *s = strmap_get(t->by_path, path);
    int rc = 0, created = !s;
    if (s) {
        s->refs++;
        s->users++;
    } else {
        rc = staged_create(t, path, root, truncate, &s);
    }
    pthread_mutex_unlock(&t->lock);
    if (rc != 0)
        return rc;
    if (created) {
        s->fill_pending = root && !truncate;
        pthread_mutex_unlock(&s->lock); /* staged_create returned it locked */
    } else {
        rc = staging_join_entry(t, s, truncate);
    }
    if (rc != 0) {
        staging_close(t, s);
        staging_release(t, s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Under the table's lock. */
static void detach_locked(struct staging *t, struct staged *s)
{
    strmap_remove(t->by_path, s->path);
    s->detached = 1;
    s->next_detached = t->detached;
    if (t->detached)
        t->detached->prev_detached = s;
    t->detached = s;
    t->finishing++; /* its staged file stays until its last reference goes */
}

/* Under the table's lock, at the entry's last release. */
static void undetach_locked(struct staging *t, struct staged *s)
{
    if (s->prev_detached)
        s->prev_detached->next_detached = s->next_detached;
    else
        t->detached = s->next_detached;
    if (s->next_detached)
        s->next_detached->prev_detached = s->prev_detached;
    s->next_detached = s->prev_detached = NULL; /* it may be detached again (staging_reopen) */
}

void staging_close(struct staging *t, struct staged *s)
{
    pthread_mutex_lock(&t->lock);
    if (s->users > 0 && --s->users == 0 && strmap_get(t->by_path, s->path) == s)
        detach_locked(t, s);
    pthread_mutex_unlock(&t->lock);
}

int staging_reopen(struct staging *t, struct staged *s, struct staged **out)
{
    pthread_mutex_lock(&s->lock);
    int healthy = !s->lost && !s->torn && !s->broken; /* else it would fail whoever joins it */
    pthread_mutex_lock(&t->lock);
    struct staged *on = s->gone ? NULL : strmap_get(t->by_path, s->path);
    int rc = s->gone ? -ESTALE : 0;
    if (rc == 0 && !on && s->detached && healthy) {
        rc = strmap_put(t->by_path, s->path, s, NULL);
        if (rc == 0) {
            undetach_locked(t, s);
            s->detached = 0;
            t->finishing--; /* counted by the map again */
        }
    }
    if (rc == 0 && !on)
        on = s; /* back on its path, or left off it: its own file, which cannot be stored */
    if (rc == 0) {
        on->refs++;
        on->users++;
        *out = on;
    }
    pthread_mutex_unlock(&t->lock);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void staging_counts(struct staging *t, struct staging_counts *out)
{
    pthread_mutex_lock(&t->lock);
    *out = t->counts;
    out->open = strmap_count(t->by_path) + t->finishing;
    pthread_mutex_unlock(&t->lock);
}

void staging_release(struct staging *t, struct staged *s)
{
    pthread_mutex_lock(&t->lock);
    int last = --s->refs == 0;
    if (last && strmap_get(t->by_path, s->path) == s)
        strmap_remove(t->by_path, s->path); /* a gone entry has left it already */
    t->finishing += last && !s->detached;   /* a detached entry is counted already */
    if (last && s->detached)
        undetach_locked(t, s);
    pthread_mutex_unlock(&t->lock);
    if (!last)
        return;
    pthread_mutex_lock(&s->lock);
    staging_finish(t, s);
    pthread_mutex_unlock(&s->lock);
    staged_free(s);
    /* Counted open until its staged file is gone, so the statistics never show bytes
     * staged by no file. */
    pthread_mutex_lock(&t->lock);
    t->finishing--;
    pthread_mutex_unlock(&t->lock);
}

void staging_info(struct staged *s, struct ns_info *info)
{
    pthread_mutex_lock(&s->lock);
    memset(info, 0, sizeof *info);
    info->kind = NS_DOMAIN;
    info->rights = SCHEMA_ACL_ALL;
    info->size = s->size;
    info->mtime = s->mtime;
    info->ctime = s->ctime;
    snprintf(info->root, sizeof info->root, "%s", s->rec.base_root);
    pthread_mutex_unlock(&s->lock);
}

int staging_size_known(struct staged *s)
{
    pthread_mutex_lock(&s->lock);
    int known = !s->fill_pending;
    pthread_mutex_unlock(&s->lock);
    return known;
}

int staging_is_new(struct staged *s)
{
    pthread_mutex_lock(&s->lock);
    int fresh = !s->committed && s->rec.mode == JOURNAL_NEW;
    pthread_mutex_unlock(&s->lock);
    return fresh;
}
