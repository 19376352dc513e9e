/* posix_list: ListObjectsV2 over a directory tree, for the posix backend (see posix.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5osfs/util/grow.h"
#include "h5osfs/util/log.h"
#include "posix.h"

struct px_dirent {
    char *name;
    size_t len;
    int is_dir;
};

struct px_dirents {
    struct px_dirent *v;
    size_t n, cap;
};

struct px_walk {
    const struct posix_store *ps;
    int delim;        /* fold sub-directories into common prefixes */
    size_t max;       /* 0: no limit */
    size_t count;     /* items (objects + prefixes) in out so far */
    int truncated;    /* a further item exists beyond max */
    const char *last; /* the last item added (owned by out) */
    size_t obj_cap, pfx_cap;
    struct store_list *out;
    size_t keylen;
    char key[STORE_KEY_MAX + 1]; /* the key (or prefix) being visited */
};

static void px_dirents_free(struct px_dirents *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->v[i].name);
    free(d->v);
}

static int px_dirents_add(struct px_dirents *d, const char *name, int is_dir)
{
    if (d->n == d->cap) {
        void *nv = grow_array(d->v, &d->cap, d->cap + 1, sizeof *d->v, 16);
        if (!nv)
            return -ENOMEM;
        d->v = nv;
    }
    struct px_dirent *e = &d->v[d->n];
    e->name = strdup(name);
    if (!e->name)
        return -ENOMEM;
    e->len = strlen(name);
    e->is_dir = is_dir;
    d->n++;
    return 0;
}

/* Byte i of the entry's sort name: name + "/" for a directory; -1 past the end. */
static int px_sort_byte(const struct px_dirent *e, size_t i)
{
    if (i < e->len)
        return (unsigned char)e->name[i];
    return i == e->len && e->is_dir ? '/' : -1;
}

/*
 * Entries of one directory are sorted by name for files and name + "/" for directories,
 * which makes the depth-first walk yield keys in global byte order. Every key below
 * directory d starts with "d/", so it sorts against a sibling exactly as "d/" does: two sort
 * names either differ at a byte both have (and the keys differ at that same byte), or one is
 * a proper prefix of the other, which (names holding no '/') only happens for a file "m" and
 * a sort name "m..." -- and then the key "m" is also a prefix of, so before, every key in the
 * other block. So each subtree is one contiguous, correctly placed run of keys. Sorting by
 * bare names would not do: for "a/c" and "a-b" it puts directory "a" first although
 * "a-b" < "a/c" ('-' is 0x2d, '/' is 0x2f).
 */
static int px_dirent_cmp(const void *a, const void *b)
{
    const struct px_dirent *x = a, *y = b;
    for (size_t i = 0;; i++) {
        int cx = px_sort_byte(x, i), cy = px_sort_byte(y, i);
        if (cx != cy)
            return cx < cy ? -1 : 1;
        if (cx < 0)
            return 0;
    }
}

static int px_skip_name(const char *name)
{
    return strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
           strncmp(name, PX_TMP_PREFIX, PX_TMP_PREFIX_LEN) == 0;
}

/* 1 directory, 0 regular file, -1 anything else (symlinks included) or already gone. */
static int px_entry_type(int dfd, const struct dirent *de)
{
    struct stat sb;
    if (de->d_type == DT_DIR)
        return 1;
    if (de->d_type == DT_REG)
        return 0;
    if (de->d_type != DT_UNKNOWN || fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    return S_ISDIR(sb.st_mode) ? 1 : S_ISREG(sb.st_mode) ? 0 : -1;
}

static int px_read_dir(struct px_walk *w, DIR *d, const char *partial, struct px_dirents *ents)
{
    size_t plen = strlen(partial);
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de)
            return errno ? px_fail(w->ps, "list", w->key, "readdir", errno) : 0;
        if (strncmp(de->d_name, partial, plen) != 0 || px_skip_name(de->d_name))
            continue;
        int type = px_entry_type(dirfd(d), de);
        if (type < 0)
            continue;
        if (px_dirents_add(ents, de->d_name, type) < 0)
            return px_fail(w->ps, "list", w->key, "allocate", ENOMEM);
    }
}

/* Count one more item, or note that the page is full and a further item exists. */
static int px_walk_full(struct px_walk *w)
{
    if (w->max && w->count >= w->max) {
        w->truncated = 1;
        return 1;
    }
    return 0;
}

static int px_add_object(struct px_walk *w, const struct stat *sb)
{
    struct store_list *l = w->out;
    if (l->n_objects == w->obj_cap) {
        void *nv = grow_array(l->objects, &w->obj_cap, w->obj_cap + 1, sizeof *l->objects, 16);
        if (!nv)
            return px_fail(w->ps, "list", w->key, "allocate", ENOMEM);
        l->objects = nv;
    }
    struct store_entry *e = &l->objects[l->n_objects];
    memset(e, 0, sizeof *e);
    e->key = strdup(w->key);
    if (!e->key)
        return px_fail(w->ps, "list", w->key, "allocate", ENOMEM);
    px_fill_stat(sb, &e->st);
    l->n_objects++;
    w->last = e->key;
    w->count++;
    return 0;
}

static int px_add_prefix(struct px_walk *w)
{
    struct store_list *l = w->out;
    if (l->n_prefixes == w->pfx_cap) {
        void *nv = grow_array(l->prefixes, &w->pfx_cap, w->pfx_cap + 1, sizeof *l->prefixes, 16);
        if (!nv)
            return px_fail(w->ps, "list", w->key, "allocate", ENOMEM);
        l->prefixes = nv;
    }
    char *p = strdup(w->key);
    if (!p)
        return px_fail(w->ps, "list", w->key, "allocate", ENOMEM);
    l->prefixes[l->n_prefixes++] = p;
    w->last = p;
    w->count++;
    return 0;
}

static int px_walk_file(struct px_walk *w, int dfd, const char *name, const char *token)
{
    struct stat sb;
    if ((token && strcmp(w->key, token) <= 0) || px_walk_full(w))
        return 0;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : px_fail(w->ps, "list", w->key, "stat", errno);
    if (!S_ISREG(sb.st_mode))
        return 0; /* replaced by something else since readdir */
    return px_add_object(w, &sb);
}

/*
 * With a delimiter a sub-directory is one common prefix (HSDS lists even empty ones). It is
 * one item, returned when it sorts after the token; tokens come from our own pages, so a
 * token inside the prefix ("a/b" for "a/") only happens when the caller changed delimiter.
 */
static int px_walk_prefix(struct px_walk *w, const char *token)
{
    if ((token && strcmp(w->key, token) <= 0) || px_walk_full(w))
        return 0;
    return px_add_prefix(w);
}

static int px_walk_dir(struct px_walk *w, int fd, const char *partial, const char *token);

/* Without a delimiter: every key below the directory (w->key ends in '/'). */
static int px_walk_subtree(struct px_walk *w, int dfd, const char *name, const char *token)
{
    if (token && strncmp(token, w->key, w->keylen) != 0) {
        if (strcmp(w->key, token) < 0)
            return 0; /* every key below sorts before the token: skip it all */
        token = NULL; /* every key below sorts after it: no more comparisons */
    }
    if (w->keylen >= STORE_KEY_MAX)
        return 0; /* no room for a valid key below */
    int fd = px_sys_openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
        return 0; /* removed or replaced since readdir */
    if (fd < 0)
        return px_fail(w->ps, "list", w->key, "open directory", -fd);
    return px_walk_dir(w, fd, "", token);
}

static int px_walk_entry(struct px_walk *w, int dfd, const struct px_dirent *e, const char *token)
{
    size_t old = w->keylen, add = e->len + (e->is_dir ? 1 : 0);
    if (old + add > STORE_KEY_MAX)
        return 0; /* longer than any usable key */
    memcpy(w->key + old, e->name, e->len);
    if (e->is_dir)
        w->key[old + e->len] = '/';
    w->keylen = old + add;
    w->key[w->keylen] = '\0';
    int err;
    if (!e->is_dir)
        err = px_walk_file(w, dfd, e->name, token);
    else if (w->delim)
        err = px_walk_prefix(w, token);
    else
        err = px_walk_subtree(w, dfd, e->name, token);
    w->keylen = old;
    w->key[old] = '\0';
    return err;
}

/* Visit the directory fd (consumed) whose key prefix is w->key, names starting with partial. */
static int px_walk_dir(struct px_walk *w, int fd, const char *partial, const char *token)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        int err = errno;
        close(fd);
        return px_fail(w->ps, "list", w->key, "opendir", err);
    }
    struct px_dirents ents = { 0 };
    int err = px_read_dir(w, d, partial, &ents);
    if (err)
        goto out_free_ents;
    if (ents.n > 1)
        qsort(ents.v, ents.n, sizeof *ents.v, px_dirent_cmp);
    for (size_t i = 0; i < ents.n && !err && !w->truncated; i++)
        err = px_walk_entry(w, dirfd(d), &ents.v[i], token);

out_free_ents:
    px_dirents_free(&ents);
    closedir(d);
    return err;
}

/* The directory part of prefix (up to its last '/'): fd, -ENOENT if absent, or an error. */
static int px_list_open(const struct posix_store *ps, const char *prefix, size_t dirlen)
{
    char dir[STORE_KEY_MAX + 1];
    if (dirlen == 0) {
        strcpy(dir, ".");
    } else {
        memcpy(dir, prefix, dirlen - 1);
        dir[dirlen - 1] = '\0';
    }
    int fd = px_open(ps, dir, O_RDONLY | O_DIRECTORY, 0);
    return fd >= 0 ? fd : px_fail(ps, "list", prefix, "open directory", -fd);
}

int px_list(struct store *st, const char *prefix, const char *delimiter, const char *token,
            size_t max_keys, struct store_list *out)
{
    const struct posix_store *ps = px(st);
    memset(out, 0, sizeof *out);
    if (delimiter && *delimiter && strcmp(delimiter, "/") != 0)
        return -EINVAL;
    const char *slash = strrchr(prefix, '/');
    size_t dirlen = slash ? (size_t)(slash - prefix) + 1 : 0;
    int fd = px_list_open(ps, prefix, dirlen);
    if (fd == -ENOENT)
        return 0; /* nothing under this prefix: an empty listing */
    if (fd < 0)
        return fd;

    struct px_walk w = {
        .ps = ps, .delim = delimiter && *delimiter, .max = max_keys, .out = out, .keylen = dirlen
    };
    memcpy(w.key, prefix, dirlen);
    w.key[dirlen] = '\0';
    int err = px_walk_dir(&w, fd, prefix + dirlen, token);
    if (!err && w.truncated && !(out->next_token = strdup(w.last)))
        err = px_fail(ps, "list", prefix, "allocate", ENOMEM);
    if (err)
        store_list_free(out);
    return err;
}

/* ---- every key, in no order (store_list_keys) ---- */

struct px_keys {
    const struct posix_store *ps;
    int (*fn)(void *ctx, const char *key, const struct store_stat *st);
    void *ctx;
    size_t keylen;
    char key[STORE_KEY_MAX + 1];
};

static int px_keys_dir(struct px_keys *k, int fd);

static int px_keys_entry(struct px_keys *k, int dfd, const struct dirent *de)
{
    size_t old = k->keylen, len = strlen(de->d_name);
    int type = px_entry_type(dfd, de);
    if (type < 0 || old + len + 1 > STORE_KEY_MAX)
        return 0;
    memcpy(k->key + old, de->d_name, len);
    k->keylen = old + len;
    k->key[k->keylen] = '\0';
    int rc = 0;
    if (type == 0) {
        rc = k->fn(k->ctx, k->key, NULL); /* no stat: that is the point */
    } else {
        k->key[k->keylen++] = '/';
        k->key[k->keylen] = '\0';
        int fd = px_sys_openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (fd >= 0)
            rc = px_keys_dir(k, fd);
        else if (fd != -ENOENT && fd != -ENOTDIR && fd != -ELOOP)
            rc = px_fail(k->ps, "list", k->key, "open directory", -fd);
    }
    k->keylen = old;
    k->key[old] = '\0';
    return rc;
}

/* The keys below directory fd (consumed), whose key prefix is k->key: read as readdir gives
 * them, without sorting or a stat of each (readdir says which are files). */
static int px_keys_dir(struct px_keys *k, int fd)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        int err = errno;
        close(fd);
        return px_fail(k->ps, "list", k->key, "opendir", err);
    }
    int rc = 0;
    while (rc == 0) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            rc = errno ? px_fail(k->ps, "list", k->key, "readdir", errno) : 0;
            break;
        }
        if (!px_skip_name(de->d_name))
            rc = px_keys_entry(k, dirfd(d), de);
    }
    closedir(d);
    return rc;
}

int px_list_keys(struct store *st, const char *prefix,
                 int (*fn)(void *ctx, const char *key, const struct store_stat *st), void *ctx)
{
    const struct posix_store *ps = px(st);
    const char *slash = strrchr(prefix, '/');
    size_t dirlen = slash ? (size_t)(slash - prefix) + 1 : 0;
    if (prefix[dirlen] != '\0')
        return -EINVAL; /* only whole "directories" are walked this way */
    int fd = px_list_open(ps, prefix, dirlen);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    struct px_keys k = { .ps = ps, .fn = fn, .ctx = ctx, .keylen = dirlen };
    memcpy(k.key, prefix, dirlen);
    k.key[dirlen] = '\0';
    return px_keys_dir(&k, fd);
}
