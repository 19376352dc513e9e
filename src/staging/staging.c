/* staging: see include/h5osfs/staging/staging.h. */
#include "h5osfs/staging/staging.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/util/clock.h"
#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"
#include "overlay.h"

#define WRITE_BEHIND_WINDOW (8u << 20)

/* Lock order: the table's lock may be taken while holding an entry's, never the reverse
 * (except on a new entry nobody else can have locked yet). */
struct staged {
    pthread_mutex_t lock; /* serialises its writes, truncates, commits and record */
    unsigned refs;        /* guarded by the table's lock, as are the next five */
    unsigned users;       /* opens (staging_open) whose staging_close has not come */
    int detached;         /* left the table at its last user's close (staging_close) */
    struct staged *next_detached, *prev_detached; /* the table's list of detached entries */
    char *path;                                   /* the key in the table */
    char root[SCHEMA_ID_BUF]; /* the root it edits, for the collector's question */
    int fd;
    int broken;                    /* -errno: the entry could not be prepared */
    int fill_pending;              /* r+: the domain's file is staged at the first use, so that
                                   an open(O_TRUNC) (an open, then a truncate to 0, since the
                                   kernel sends them apart) never stages it */
    struct overlay *overlay;       /* r+: the version it started as, and its unwritten chunks */
    char base_root[SCHEMA_ID_BUF]; /* that version's root (guarded like root) */
    uint64_t size;
    int dirty;     /* changed since the last commit, and journaled so */
    int torn;      /* -errno: a write or truncate of the staged file failed, so
                                   it lacks bytes its writer wrote: never committed, and its
                                   record is gone (a crash leaves nothing to recover) */
    int gone;      /* removed (unlink, rename over): out of the table, its bytes
                                   freed; its handles' reads and writes fail with ESTALE */
    int rejected;  /* the last commit found no HDF5 file, nothing changed since */
    int lost;      /* a commit lost to another writer's change of the domain
                                   (ESTALE): never committed; at the last close its bytes,
                                   whole, go to rejected/ */
    int committed; /* a commit succeeded: a domain exists behind it */
    int shared;    /* the staged file is also an object of the domain (a linked commit made
                      it one, store_put_new_file): copied before any change */
    double mtime, ctime;
    struct journal_rec rec; /* rec.domain is the entry's path */
};

struct staging {
    pthread_mutex_t lock; /* guards the map, every refs, and counts */
    struct staging_counts counts;
    struct strmap *by_path;
    size_t finishing;        /* left the map, their last commit and cleanup under way */
    struct staged *detached; /* entries staging_close took off their path, not yet released:
                                their bases' objects are still read (staging_root_in_use) */
    struct commit_ctx commit;
    struct staging_hooks hooks;
};

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

/* Save the overlay's clean ranges for a recovery after a crash (overlay.h). */
static int save_overlay(struct staging *t, struct staged *s)
{
    char *text = NULL;
    int rc = s->overlay ? overlay_save(s->overlay, &text) : 0;
    if (rc == 0 && text)
        rc = journal_write_base(t->commit.journal, &s->rec, text);
    if (rc == 0 && s->overlay)
        overlay_saved(s->overlay);
    free(text);
    return rc;
}

/* Stage the domain's file (r+) if that is still to do: its metadata, and its chunks as clean
 * ranges of an overlay (overlay.h), so a large domain costs its metadata here. Under the
 * entry's lock, outside the table's. A failure stays with the entry (every use fails). */
static int staged_fill(struct staging *t, struct staged *s)
{
    if (!s->fill_pending || s->broken)
        return s->broken;
    s->fill_pending = 0;
    struct image *img = NULL;
    int rc = t->hooks.base(t->hooks.ctx, s->rec.domain, s->rec.base_root, &img);
    if (rc == 0)
        rc = overlay_new(img, s->rec.base_root, t->hooks.cache, s->fd, &s->overlay);
    image_put(img);
    if (rc == 0) {
        pthread_mutex_lock(&t->lock);
        snprintf(s->base_root, sizeof s->base_root, "%s", s->rec.base_root);
        pthread_mutex_unlock(&t->lock);
        rc = overlay_fill(s->overlay, &s->size);
    }
    if (rc == 0)
        rc = save_overlay(t, s);
    if (rc != 0)
        log_error("%s: cannot stage the domain's file: %s", s->rec.domain, strerror(-rc));
    s->broken = rc;
    return rc;
}

/* A change of the staged file failed part way: what its writer wrote is not all there, so it
 * must never be committed. Its record goes now (no space is needed for that), so that neither
 * a close nor a recovery after a crash commits it; its bytes go at the last close or at its
 * removal, or stay as the start of a new content after a truncation to 0. */
static void tear(struct staging *t, struct staged *s, int err)
{
    if (s->torn)
        return;
    s->torn = err;
    s->dirty = 0;
    journal_forget(t->commit.journal, &s->rec);
    char *staged = journal_staged_path(t->commit.journal, &s->rec);
    log_error("%s: writing its staged file %s failed (%s): the file is incomplete and is not "
              "stored; its staged bytes are removed at its last close or its removal",
              s->rec.domain, staged ? staged : s->rec.name, strerror(-err));
    free(staged);
}

/* Before a change of a staged file that is also an object of the domain: a private copy of
 * its first keep bytes takes its place, so that the stored version stays as committed. */
static int own_file(struct staging *t, struct staged *s, uint64_t keep)
{
    if (!s->shared)
        return 0;
    int fd;
    int rc =
        journal_restage(t->commit.journal, &s->rec, s->fd, keep < s->size ? keep : s->size, &fd);
    if (rc != 0)
        return rc;
    close(s->fd);
    s->fd = fd;
    s->shared = 0;
    return 0;
}

static int truncate_locked(struct staging *t, struct staged *s, uint64_t size)
{
    if (size == 0)
        s->fill_pending = 0; /* nothing of the domain's bytes would be left */
    int rc = staged_fill(t, s);
    if (rc == 0)
        rc = own_file(t, s, size);
    if (rc != 0)
        return rc;
    if (s->overlay)
        rc = overlay_before_truncate(s->overlay, size);
    if (rc == 1)
        rc = save_overlay(t, s); /* before the change: a recovery must not think it clean */
    if (rc == 0 && ftruncate(s->fd, (off_t)size) != 0)
        rc = -errno;
    if (rc != 0) {
        tear(t, s, rc);
        return rc;
    }
    s->size = size;
    if (size == 0)
        s->torn = 0; /* nothing is missing from an empty file */
    if (size == 0 && s->rec.mode == JOURNAL_CHANGE)
        s->rec.mode = JOURNAL_REPLACE; /* all new content: a new root, one swap */
    return 0;
}

/* An O_TRUNC open of a path with an entry: empty, as a new entry would start, and no more a
 * change than that (an empty file is no HDF5 file: nothing is committed unless written): what
 * was not committed is dropped, bytes and record. */
static int join_entry(struct staging *t, struct staged *s, int truncate)
{
    pthread_mutex_lock(&s->lock);
    int rc = s->broken;
    if (rc == 0 && truncate && !s->gone)
        rc = truncate_locked(t, s, 0);
    if (rc == 0 && truncate && s->dirty) {
        s->dirty = 0;
        journal_forget(t->commit.journal, &s->rec); /* the next write journals again */
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
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
        rc = join_entry(t, s, truncate);
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

/* Mark the entry changed; the first change after a commit is journaled (restart commits it). */
static int mark_dirty(struct staging *t, struct staged *s)
{
    s->mtime = clock_wall();
    s->rejected = 0;
    if (s->dirty)
        return 0;
    s->rec.state = JOURNAL_DIRTY;
    int rc = journal_write(t->commit.journal, &s->rec);
    if (rc == 0)
        s->dirty = 1;
    return rc;
}

ssize_t staging_read(struct staging *t, struct staged *s, void *buf, size_t len, uint64_t off)
{
    pthread_mutex_lock(&s->lock);
    int rc = s->gone ? -ESTALE : staged_fill(t, s);
    ssize_t n = rc != 0      ? rc
                : s->overlay ? overlay_read(s->overlay, s->size, buf, len, off)
                             : pread(s->fd, buf, len, (off_t)off);
    if (rc == 0 && !s->overlay && n < 0)
        n = -errno;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* A file written front to back (cp) is sent to the disk behind the writer, a window at a
 * time, so that the commit's sync, which must make its bytes durable anyway, finds them
 * written: the copy and the disk work at once instead of one after the other. Only a hint:
 * the kernel may refuse it, and a file written in any other order is left to it. */
static void write_behind(struct staged *s, uint64_t off, uint64_t len)
{
    uint64_t end = off + len;
    if (off / WRITE_BEHIND_WINDOW == end / WRITE_BEHIND_WINDOW)
        return;
    uint64_t window = end / WRITE_BEHIND_WINDOW * WRITE_BEHIND_WINDOW - WRITE_BEHIND_WINDOW;
    (void)sync_file_range(s->fd, (off_t)window, WRITE_BEHIND_WINDOW, SYNC_FILE_RANGE_WRITE);
}

/* A torn file takes no more writes: they could not make it whole (a truncation to 0 can). */
static ssize_t write_locked(struct staging *t, struct staged *s, const void *buf, size_t len,
                            uint64_t off)
{
    int rc = s->gone ? -ESTALE : s->torn;
    if (rc == 0)
        rc = staged_fill(t, s);
    if (rc == 0)
        rc = own_file(t, s, UINT64_MAX);
    if (rc == 0)
        rc = mark_dirty(t, s);
    if (rc != 0)
        return rc; /* the staged file is as it was */
    if (s->overlay)
        rc = overlay_before_write(s->overlay, off, len);
    if (rc == 1)
        rc = save_overlay(t, s); /* before the bytes land: a recovery must not think it clean */
    ssize_t n = rc == 0 ? pwrite(s->fd, buf, len, (off_t)off) : rc;
    if (rc == 0 && n < 0)
        n = -errno;
    if (n < 0) {
        tear(t, s, (int)n);
        return n;
    }
    if (off + (uint64_t)n > s->size)
        s->size = off + (uint64_t)n;
    write_behind(s, off, (uint64_t)n);
    return n;
}

ssize_t staging_write(struct staging *t, struct staged *s, const void *buf, size_t len,
                      uint64_t off)
{
    pthread_mutex_lock(&s->lock);
    ssize_t n = write_locked(t, s, buf, len, off);
    pthread_mutex_unlock(&s->lock);
    return n;
}

int staging_empty(struct staging *t, struct staged *s)
{
    return join_entry(t, s, 1);
}

int staging_truncate(struct staging *t, struct staged *s, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    int rc = s->gone ? -ESTALE : size != 0 ? s->torn : 0;
    if (rc == 0)
        rc = mark_dirty(t, s);
    if (rc == 0)
        rc = truncate_locked(t, s, size);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* The base the commit passes to ingest (NULL: none, and then the staged file must hold every
 * byte: a v1 base's ids have no digits a new root could keep). */
static int commit_base(struct staging *t, struct staged *s, struct ingest_base *base)
{
    if (!s->overlay || s->rec.mode != JOURNAL_CHANGE)
        return 0;
    if (schema_id_version(overlay_root(s->overlay)) != 2) {
        int rc = overlay_materialize_all(s->overlay);
        return rc == 0 ? save_overlay(t, s) : rc;
    }
    int rc = overlay_ingest_base(s->overlay, base);
    if (rc == 0)
        rc = save_overlay(t, s);
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
        rc = save_overlay(t, s);
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

void staging_counts(struct staging *t, struct staging_counts *out)
{
    pthread_mutex_lock(&t->lock);
    *out = t->counts;
    out->open = strmap_count(t->by_path) + t->finishing;
    pthread_mutex_unlock(&t->lock);
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
static void staged_finish(struct staging *t, struct staged *s)
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
    staged_finish(t, s);
    pthread_mutex_unlock(&s->lock);
    staged_free(s);
    /* Counted open until its staged file is gone, so the statistics never show bytes
     * staged by no file. */
    pthread_mutex_lock(&t->lock);
    t->finishing--;
    pthread_mutex_unlock(&t->lock);
}

/* Under the entry's lock: it leaves the table (the path is free for a new file), its bytes
 * are freed now though handles keep the descriptor, its files and record go, and nothing of
 * it is committed. */
static void discard_locked(struct staging *t, struct staged *s)
{
    pthread_mutex_lock(&t->lock);
    if (strmap_get(t->by_path, s->path) == s)
        strmap_remove(t->by_path, s->path);
    s->gone = 1;
    pthread_mutex_unlock(&t->lock);
    if (!s->shared && ftruncate(s->fd, 0) != 0) /* a shared file's bytes are the object's */
        log_warn("%s: removed; its staged file keeps its bytes until its last close: %s",
                 s->rec.domain, strerror(errno));
    journal_remove(t->commit.journal, &s->rec);
    overlay_free(s->overlay); /* reads no more of the base version */
    s->overlay = NULL;
    s->fill_pending = 0;
    s->size = 0;
    s->dirty = s->torn = s->rejected = 0;
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

int staging_is_new(struct staged *s)
{
    pthread_mutex_lock(&s->lock);
    int fresh = !s->committed && s->rec.mode == JOURNAL_NEW;
    pthread_mutex_unlock(&s->lock);
    return fresh;
}

/* ---- walks over the table ---- */

struct children_walk {
    const char *dir;
    size_t dir_len;
    char **names;
    size_t n, cap;
    int rc;
};

static int child_of(const char *key, void *value, void *ctx)
{
    (void)value;
    struct children_walk *w = ctx;
    const char *name = key + w->dir_len;
    if (w->rc != 0 || strncmp(key, w->dir, w->dir_len) != 0 || !*name || strchr(name, '/'))
        return 0;
    char **bigger = grow_array(w->names, &w->cap, w->n + 1, sizeof *bigger, 8);
    if (!bigger || !(bigger[w->n] = strdup(name))) {
        if (bigger)
            w->names = bigger;
        w->rc = -ENOMEM;
        return 0;
    }
    w->names = bigger;
    w->n++;
    return 0;
}

int staging_children(struct staging *t, const char *dir, char ***names, size_t *n)
{
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s/", strcmp(dir, "/") == 0 ? "" : dir);
    struct children_walk w = { .dir = prefix, .dir_len = strlen(prefix) };
    pthread_mutex_lock(&t->lock);
    strmap_filter(t->by_path, child_of, &w);
    pthread_mutex_unlock(&t->lock);
    if (w.rc != 0) {
        for (size_t i = 0; i < w.n; i++)
            free(w.names[i]);
        free(w.names);
        return w.rc;
    }
    *names = w.names;
    *n = w.n;
    return 0;
}

struct root_walk {
    const char *root;
    int found;
};

static int uses_root(const char *key, void *value, void *ctx)
{
    (void)key;
    struct staged *s = value;
    struct root_walk *w = ctx;
    if (strcmp(s->root, w->root) == 0 || strcmp(s->base_root, w->root) == 0)
        w->found = 1; /* its overlay reads the base's chunks until it goes */
    return 0;
}

int staging_root_in_use(struct staging *t, const char *root)
{
    struct root_walk w = { root, 0 };
    pthread_mutex_lock(&t->lock);
    strmap_filter(t->by_path, uses_root, &w);
    for (struct staged *s = t->detached; s && !w.found; s = s->next_detached)
        uses_root(s->path, s, &w);
    pthread_mutex_unlock(&t->lock);
    return w.found;
}

/* The entries a rename of from moves: from's own and, when from is a folder, those below. */
struct moved_walk {
    const char *from;
    size_t from_len;
    struct staged **entries;
    size_t n, cap;
    int rc;
};

static int at_or_below(const char *key, void *value, void *ctx)
{
    struct moved_walk *w = ctx;
    if (w->rc != 0 || strncmp(key, w->from, w->from_len) != 0)
        return 0;
    char next = key[w->from_len]; /* within key only once key starts with from */
    if (next != '\0' && next != '/')
        return 0;
    struct staged **bigger = grow_array(w->entries, &w->cap, w->n + 1, sizeof *bigger, 4);
    if (!bigger) {
        w->rc = -ENOMEM;
        return 0;
    }
    w->entries = bigger;
    w->entries[w->n++] = value;
    return 0;
}

/* The entries at or below path, on the table and detached (their release may still commit
 * them: a last close whose commit failed is tried again; a child that inherited a descriptor
 * may write through it after the last close), each with a reference for the caller. */
static int reach_entries(struct staging *t, const char *path, struct moved_walk *w)
{
    *w = (struct moved_walk){ .from = path, .from_len = strlen(path) };
    pthread_mutex_lock(&t->lock);
    strmap_filter(t->by_path, at_or_below, w);
    for (struct staged *d = t->detached; d; d = d->next_detached)
        at_or_below(d->path, d, w);
    for (size_t i = 0; w->rc == 0 && i < w->n; i++)
        w->entries[i]->refs++;
    pthread_mutex_unlock(&t->lock);
    if (w->rc != 0) {
        free(w->entries);
        w->entries = NULL;
        w->n = 0;
    }
    return w->rc;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (struct staged *const *)a,
              y = (uintptr_t) * (struct staged *const *)b;
    return (x > y) - (x < y);
}

/* Under the table's lock (it guards the paths) and the entries' locks (gone): of the entries
 * reach_entries found, in its order, the one whose view path shows: the one on the table, else
 * the latest detached one (the list's first), never a discarded one; or NULL. A removal asks
 * of it whether the file was never committed. */
static struct staged *entry_of_path(struct staged **entries, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(entries[i]->path, path) == 0 && !entries[i]->gone)
            return entries[i];
    return NULL;
}

/* Lock the entries in address order, so that two removals never wait for each other (the
 * order of unlocking does not matter). */
static int lock_in_address_order(struct staged **entries, size_t n)
{
    struct staged **order = n ? malloc(n * sizeof *order) : NULL;
    if (n && !order)
        return -ENOMEM;
    if (n)
        memcpy(order, entries, n * sizeof *order);
    if (n > 1)
        qsort(order, n, sizeof *order, by_address);
    for (size_t i = 0; i < n; i++)
        pthread_mutex_lock(&order[i]->lock);
    free(order);
    return 0;
}

/*
 * Remove path (a file, or with folder an empty folder) and every entry at or below it: all of
 * them are locked while remove decides, so that no commit of any comes in between, and all are
 * discarded when it succeeded. A folder with an entry on the table below it is not empty: a
 * writer has a file open there.
 */
static int remove_reaching(struct staging *t, const char *path, int folder,
                           int (*remove)(void *ctx, const char *path, int fresh), void *ctx)
{
    struct moved_walk w;
    int rc = reach_entries(t, path, &w);
    if (rc == 0)
        rc = lock_in_address_order(w.entries, w.n);
    if (rc != 0) {
        for (size_t i = 0; i < w.n; i++)
            staging_release(t, w.entries[i]);
        free(w.entries);
        return rc;
    }
    pthread_mutex_lock(&t->lock);
    struct staged *own = folder ? NULL : entry_of_path(w.entries, w.n, path);
    for (size_t i = 0; folder && i < w.n; i++)
        if (!w.entries[i]->detached && !w.entries[i]->gone)
            rc = -ENOTEMPTY; /* a writer has it open */
    pthread_mutex_unlock(&t->lock);
    if (rc == 0)
        rc = remove(ctx, path, own && !own->committed && own->rec.mode == JOURNAL_NEW);
    size_t dropped = 0;
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        if (!w.entries[i]->gone) {
            discard_locked(t, w.entries[i]);
            dropped++;
        }
    }
    if (dropped)
        log_info("%s: removed or replaced while staged: its %zu staged changes are dropped", path,
                 dropped);
    for (size_t i = 0; i < w.n; i++)
        pthread_mutex_unlock(&w.entries[i]->lock);
    for (size_t i = 0; i < w.n; i++)
        staging_release(t, w.entries[i]);
    free(w.entries);
    return rc;
}

int staging_unlink(struct staging *t, const char *path,
                   int (*remove)(void *ctx, const char *path, int fresh), void *ctx)
{
    return remove_reaching(t, path, 0, remove, ctx);
}

int staging_rmdir(struct staging *t, const char *path,
                  int (*remove)(void *ctx, const char *path, int fresh), void *ctx)
{
    return remove_reaching(t, path, 1, remove, ctx);
}

/* Under the table's lock: s takes the path to + what followed from in its path, and a
 * reference for the caller, who renames its record (*domain, the new path). 0 or -ENOMEM
 * (it keeps its old name). */
static int move_entry(struct staging *t, struct staged *s, size_t from_len, const char *to,
                      char **domain)
{
    char *key = NULL;
    *domain = NULL;
    if (asprintf(&key, "%s%s", to, s->path + from_len) < 0)
        return -ENOMEM;
    if (!(*domain = strdup(key)) || (!s->detached && strmap_put(t->by_path, key, s, NULL) != 0)) {
        free(*domain);
        *domain = NULL;
        free(key);
        return -ENOMEM;
    }
    if (!s->detached) /* a detached entry is on the table's list, not in its map */
        strmap_remove(t->by_path, s->path);
    free(s->path);
    s->path = key;
    s->refs++;
    return 0;
}

/* The record of a moved entry names its new path (a recovery commits it there). */
static void rename_record(struct staging *t, struct staged *s, char *domain)
{
    pthread_mutex_lock(&s->lock);
    free(s->rec.domain);
    s->rec.domain = domain;
    int rc = journal_write(t->commit.journal, &s->rec);
    pthread_mutex_unlock(&s->lock);
    if (rc != 0)
        log_warn("%s: renamed, but its journal record could not be rewritten (%s): a recovery "
                 "after a crash would commit it under its old name",
                 domain, strerror(-rc));
}

/* A folder's rename moves the files staged below it too, as the fs layer moves their inodes:
 * else their last close would commit them under a path that no longer exists. */
void staging_rename(struct staging *t, const char *from, const char *to)
{
    struct moved_walk w = { .from = from, .from_len = strlen(from) };
    char **domains = NULL;
    pthread_mutex_lock(&t->lock);
    strmap_filter(t->by_path, at_or_below, &w);
    for (struct staged *d = t->detached; d; d = d->next_detached)
        at_or_below(d->path, d, &w); /* their release may still commit them: under the new name */
    if (w.n && !(domains = calloc(w.n, sizeof *domains)))
        w.rc = -ENOMEM;
    for (size_t i = 0; w.rc == 0 && i < w.n; i++)
        if (move_entry(t, w.entries[i], w.from_len, to, &domains[i]) != 0)
            log_warn("rename %s -> %s: the staged file %s keeps the old name", from, to,
                     w.entries[i]->path);
    pthread_mutex_unlock(&t->lock);
    if (w.rc != 0)
        log_warn("rename %s -> %s: the staged files there keep the old names (out of memory)", from,
                 to);
    for (size_t i = 0; domains && i < w.n; i++) {
        if (!domains[i])
            continue;
        rename_record(t, w.entries[i], domains[i]);
        staging_release(t, w.entries[i]);
    }
    free(domains);
    free(w.entries);
}

/* ---- recovery ---- */

struct recovered_base {
    struct ingest_base base; /* first: what commit gets and gives back */
    struct overlay *overlay;
    int fd;
};

static void release_base(void *ctx, struct ingest_base *base)
{
    (void)ctx;
    struct recovered_base *r = (struct recovered_base *)base;
    overlay_free(r->overlay);
    if (r->fd >= 0)
        close(r->fd);
    free(r);
}

/* The overlay an interrupted r+ change had, from its saved ranges and its base's file. */
static int recover_overlay(struct staging *t, const struct journal_rec *rec, const char *text,
                           struct recovered_base *r)
{
    char *root = overlay_saved_root(text), *staged = journal_staged_path(t->commit.journal, rec);
    struct image *img = NULL;
    int rc = !root ? -EINVAL : !staged ? -ENOMEM : 0;
    if (rc == 0 && (r->fd = open(staged, O_RDWR | O_CLOEXEC)) < 0)
        rc = -errno;
    if (rc == 0)
        rc = t->hooks.base(t->hooks.ctx, rec->domain, root, &img);
    if (rc == 0)
        rc = overlay_new(img, root, t->hooks.cache, r->fd, &r->overlay);
    if (rc == 0)
        rc = overlay_restore(r->overlay, text);
    if (rc == 0 && schema_id_version(root) != 2)
        rc = overlay_materialize_all(r->overlay);
    if (rc != 0)
        log_error("%s: the version root %s that the staged file %s changes cannot be matched "
                  "again (%s): kept for a later mount",
                  rec->domain, root ? root : "?", staged ? staged : "?", strerror(-rc));
    image_put(img);
    free(root);
    free(staged);
    return rc;
}

static int recover_base(void *ctx, const struct journal_rec *rec, struct ingest_base **out)
{
    struct staging *t = ctx;
    char *text = NULL;
    *out = NULL;
    int rc = journal_read_base(t->commit.journal, rec, &text);
    if (rc == -ENOENT)
        return 0; /* no overlay: the staged file holds every byte */
    struct recovered_base *r = rc == 0 ? calloc(1, sizeof *r) : NULL;
    if (rc == 0 && !r)
        rc = -ENOMEM;
    if (r)
        r->fd = -1;
    if (rc == 0)
        rc = recover_overlay(t, rec, text, r);
    free(text);
    if (rc == 0 && schema_id_version(overlay_root(r->overlay)) == 2)
        rc = overlay_ingest_base(r->overlay, &r->base);
    if (rc == 0 && r->overlay && schema_id_version(overlay_root(r->overlay)) == 2) {
        *out = &r->base;
    } else if (r) {
        release_base(t, &r->base);
    }
    return rc;
}

size_t staging_recover(struct staging *t)
{
    journal_sweep(t->commit.journal); /* first: on a full disk, the space records need */
    struct commit_ctx c = t->commit;
    c.recover_base = recover_base;
    c.release_base = release_base;
    c.base_ctx = t;
    return commit_recover(&c);
}
