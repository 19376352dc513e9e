/* staging_walk: the walks over the whole table: the entries below a folder, those that read a
 * root, and the removals and renames that reach every entry at or below a path. See
 * include/h5osfs/staging/staging.h. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "h5osfs/util/strmap.h"
#include "staging_int.h"

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
