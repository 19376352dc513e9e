/* staging_io: the bytes of a staged entry: its reads, writes and truncates, the r+ copy of
 * the domain's file made at the first use, and what a failed change does (torn). See
 * include/h5osfs/staging/staging.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/util/log.h"
#include "h5osfs/util/clock.h"
#include "staging_int.h"

#define WRITE_BEHIND_WINDOW (8u << 20)

/* Save the overlay's clean ranges for a recovery after a crash (overlay.h). */
int staging_save_overlay(struct staging *t, struct staged *s)
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
        rc = staging_save_overlay(t, s);
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
        rc = staging_save_overlay(t, s); /* before the change: a recovery must not think it clean */
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
int staging_join_entry(struct staging *t, struct staged *s, int truncate)
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
    if (rc == 1) /* before the bytes land: a recovery must not think it clean */
        rc = staging_save_overlay(t, s);
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
    return staging_join_entry(t, s, 1);
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
