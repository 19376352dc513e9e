/* fs: see include/h5osfs/fs.h. */
#include "h5osfs/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "h5osfs/callers.h"
#include "h5osfs/clock.h"
#include "h5osfs/commit.h"
#include "h5osfs/domops.h"
#include "h5osfs/gc.h"
#include "h5osfs/journal.h"
#include "h5osfs/log.h"
#include "images.h"
#include "inode.h"
#include "notify.h"
#include "staging.h"
#include "stats.h"

#define FS_BLOCK_SIZE 4096
#define FS_IO_SIZE (1u << 20)       /* st_blksize of files: cp and stdio move 1 MiB at a time,
                                       as many FUSE requests as the 1 MiB max_write allows */
#define FS_NAME_MAX 255
#define FS_UNKNOWN_INO 0xffffffffu   /* readdir: "ask lookup", as libfuse's high-level API does */
#define FS_XATTR_ROOT "user.h5osfs.root"
#define FS_XATTR_OWNER "user.h5osfs.owner"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* Every handle given to the kernel, so that those whose release never came (the session ended
 * first: a SIGTERM right after a close) are still freed at unmount. */
struct fs_handle {
    struct fs_handle *prev, *next;      /* NULL while not handed out */
    void (*dispose)(struct fs *fs, struct fs_handle *h);
};

struct fs {
    struct fs_config cfg;
    pthread_mutex_t handles_lock;
    struct fs_handle handles;   /* the list's head */
    struct inode_table *inodes;
    struct image_table *images;
    struct gc *gc;
    struct domops ops;
    struct callers *callers;    /* who each request acts as; who created each new file */
    struct journal *journal;    /* NULL on a read-only mount */
    struct staging *staging;    /* NULL on a read-only mount */
    struct notifier *notifier;  /* NULL until the threads start */
    double started;             /* clock_monotonic() at fs_new */
};

/* An open domain file: its version and its reads' state; or, for writing (and for reading a
 * new file that is still being written), its staged entry. */
struct fs_file {
    struct fs_handle link;      /* first: the handle list holds it by this */
    fuse_ino_t ino;
    pid_t opener;               /* the thread whose open made it */
    _Atomic int fresh;          /* opened, nothing done with it yet (see truncate_of_open) */
    struct staged *stg;
    struct image *img;
    struct image_reader reader;
    char root[SCHEMA_ID_BUF];
    char *text;                 /* the statistics file: the text its open took */
    size_t text_len;
};

/* The listing a directory handle serves, taken once at opendir so offsets stay stable. */
struct fs_dir_handle {
    struct fs_handle link;      /* first: the handle list holds it by this */
    struct ns_dir dir;
};

static void handle_track(struct fs *fs, struct fs_handle *h,
                         void (*dispose)(struct fs *fs, struct fs_handle *h))
{
    h->dispose = dispose;
    pthread_mutex_lock(&fs->handles_lock);
    h->next = fs->handles.next;
    h->prev = &fs->handles;
    h->next->prev = h;
    fs->handles.next = h;
    pthread_mutex_unlock(&fs->handles_lock);
}

static void handle_untrack(struct fs *fs, struct fs_handle *h)
{
    pthread_mutex_lock(&fs->handles_lock);
    if (h->next) {
        h->prev->next = h->next;
        h->next->prev = h->prev;
        h->next = h->prev = NULL;
    }
    pthread_mutex_unlock(&fs->handles_lock);
}

/* At unmount: every handle whose release did not come. */
static void dispose_handles(struct fs *fs)
{
    size_t n = 0;
    for (;;) {
        pthread_mutex_lock(&fs->handles_lock);
        struct fs_handle *h = fs->handles.next == &fs->handles ? NULL : fs->handles.next;
        pthread_mutex_unlock(&fs->handles_lock);
        if (!h)
            break;
        handle_untrack(fs, h);
        h->dispose(fs, h);
        n++;
    }
    if (n)
        log_info("%zu handles were still open at unmount: released", n);
}

/* The collector asks: may root's objects go? Not while an open file reads them. */
static int root_in_use(void *ctx, const char *root)
{
    struct fs *fs = ctx;
    return image_table_root_in_use(fs->images, root) ||
           (fs->staging && staging_root_in_use(fs->staging, root));
}

/* r+ starts from a version of the domain: its image (staging keeps its chunks in the store). */
static int staging_base(void *ctx, const char *path, const char *root, struct image **img)
{
    struct fs *fs = ctx;
    int reused;
    int rc = image_table_get(fs->images, path, root, img, &reused);
    if (rc != 0)
        log_error("%s: the version with root %s cannot be staged: %s", path, root,
                  strerror(-rc));
    return rc;
}

/* A commit made a new version of path: the next lookup must find it, not the kernel's cached
 * name of the old version's node. */
static void forget_image(void *ctx, const char *path)
{
    struct fs *fs = ctx;
    callers_forget_creator(fs->callers, path);      /* its ACL decides from now on */
    image_table_expire(fs->images, path);
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path)) : NULL;
    fuse_ino_t parent = dir ? inode_of(fs->inodes, *dir ? dir : "/") : 0;
    if (parent)
        notifier_entry(fs->notifier, parent, slash + 1);
    free(dir);
}

static int fs_new_staging(struct fs *fs)
{
    if (fs->cfg.read_only)
        return 0;
    int rc = journal_open(fs->cfg.cache_dir, fs->cfg.bucket_id, &fs->journal);
    if (rc != 0)
        return rc;
    struct commit_ctx commit = { .ops = &fs->ops, .journal = fs->journal,
                                 .workers = fs->cfg.write_workers };
    struct staging_hooks hooks = { .base = staging_base, .cache = fs->cfg.cache,
                                   .committed = forget_image, .ctx = fs };
    rc = staging_new(&commit, &hooks, &fs->staging);
    if (rc != 0) {
        journal_close(fs->journal);
        fs->journal = NULL;
    }
    return rc;
}

/* A commit making a new domain asks domops who owns it: whoever created the file. */
static int creator_of(void *ctx, const char *path, char *buf, size_t len)
{
    return callers_creator(((struct fs *)ctx)->callers, path, buf, len);
}

static int fs_new_callers(struct fs *fs)
{
    struct callers_config cfg = { fs->cfg.uid, fs->cfg.user, fs->cfg.user_map };
    return callers_new(&cfg, &fs->callers);
}

int fs_new(const struct fs_config *cfg, struct fs **out)
{
    struct fs *fs = calloc(1, sizeof *fs);
    if (!fs)
        return -ENOMEM;
    fs->cfg = *cfg;
    fs->started = clock_monotonic();
    pthread_mutex_init(&fs->handles_lock, NULL);
    fs->handles.next = fs->handles.prev = &fs->handles;
    int rc = fs_new_callers(fs);
    if (rc != 0) {
        free(fs);
        return rc;
    }
    rc = inode_table_new(&fs->inodes);
    if (rc == 0 && (rc = image_table_new(&cfg->images, cfg->ttl, &fs->images)) != 0)
        inode_table_free(fs->inodes);
    if (rc == 0 && (rc = gc_new(cfg->images.store, cfg->gc_grace, root_in_use, fs, &fs->gc))) {
        image_table_free(fs->images);
        inode_table_free(fs->inodes);
    }
    if (rc != 0) {
        callers_free(fs->callers);
        free(fs);
        return rc;
    }
    fs->ops = (struct domops){ cfg->images.store, cfg->ns, cfg->user, cfg->admin_user, fs->gc,
                               creator_of, fs };
    rc = fs_new_staging(fs);
    if (rc != 0) {
        fs_free(fs);
        return rc;
    }
    *out = fs;
    return 0;
}

int fs_stats_text(struct fs *fs, int pretty, char **out)
{
    struct fs_stats st = { .backend = fs->cfg.images.store->ops->name,
                           .uptime = clock_monotonic() - fs->started,
                           .read_only = fs->staging == NULL };
    store_counts(fs->cfg.images.store, &st.store);
    chunk_cache_stats(fs->cfg.cache, &st.cache);
    image_table_counts(fs->images, &st.images);
    if (fs->staging) {
        char dir[4096];
        staging_counts(fs->staging, &st.staging);
        snprintf(dir, sizeof dir, "%s/staging", fs->cfg.cache_dir);
        st.staged_bytes = stats_dir_bytes(dir);
    }
    return stats_json(&st, pretty, out);
}

void fs_stop_threads(struct fs *fs)
{
    image_table_stop_warming(fs->images);
    notifier_stop(fs->notifier);
    fs->notifier = NULL;
}

void fs_free(struct fs *fs)
{
    if (!fs)
        return;
    fs_stop_threads(fs);
    if (fs->handles.next)
        dispose_handles(fs);
    gc_drain(fs->gc);           /* unmounted: no reader is left to wait for */
    gc_free(fs->gc);            /* before the tables its in_use question reads */
    staging_free(fs->staging);
    journal_close(fs->journal);
    image_table_free(fs->images);
    inode_table_free(fs->inodes);
    callers_free(fs->callers);
    pthread_mutex_destroy(&fs->handles_lock);
    free(fs);
}

void fs_start_threads(struct fs *fs, struct fuse_session *se, struct prefetcher *p)
{
    fs->cfg.prefetch = p;       /* before the loop starts: no request reads it yet */
    if (notifier_start(se, &fs->notifier) != 0)
        log_warn("no notifier thread: after a commit, the kernel may show the old version of "
                 "the file for up to ttl seconds");
    if (fs->staging) {
        size_t left = staging_recover(fs->staging);
        if (left)
            log_warn("%zu staged files could not be committed yet: kept for the next mount",
                     left);
    }
    if (gc_start(fs->gc) != 0)
        log_warn("no collector thread: deleted domains' objects stay in the bucket");
}

static struct fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* ---- attributes ---- */


static int is_dir_kind(enum ns_kind kind)
{
    return kind == NS_DIR || kind == NS_FOLDER;
}

/* read -> r for everyone; update or create -> w for the owner; directories x when readable. */
static mode_t mode_of(const struct fs *fs, const struct ns_info *info)
{
    mode_t mode = is_dir_kind(info->kind) ? S_IFDIR : S_IFREG;
    if (info->rights & SCHEMA_ACL_READ)
        mode |= is_dir_kind(info->kind) ? 0555 : 0444;
    if (!fs->cfg.read_only && (info->rights & (SCHEMA_ACL_UPDATE | SCHEMA_ACL_CREATE)))
        mode |= 0200;
    return mode;
}

static struct timespec timespec_of(double t)
{
    struct timespec ts = { 0, 0 };
    if (!(t > 0) || t > 1e15)
        return ts;              /* absent or absurd timestamps show as the epoch */
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - floor(t)) * 1e9);
    return ts;
}

static void fill_stat(const struct fs *fs, fuse_ino_t ino, const struct ns_info *info,
                      struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_mode = mode_of(fs, info);
    st->st_nlink = is_dir_kind(info->kind) ? 2 : 1;
    st->st_uid = fs->cfg.uid;
    st->st_gid = fs->cfg.gid;
    st->st_size = is_dir_kind(info->kind) ? 0 : (off_t)info->size;
    st->st_blksize = is_dir_kind(info->kind) ? FS_BLOCK_SIZE : FS_IO_SIZE;
    st->st_blocks = (blkcnt_t)((info->size + 511) / 512);
    st->st_mtim = timespec_of(info->mtime);
    st->st_atim = st->st_mtim;
    st->st_ctim = timespec_of(info->ctime);
}

/* ---- helpers that every request uses ---- */

/* Namespace answer for path as it is now; a file being written for the first time is its
 * staged file. A domain's size is not known here (see resolve). */
static int is_stats_path(const char *path)
{
    return strcmp(path, "/" STATS_FILE_NAME) == 0;
}

/* The statistics file: readable by every caller, size 0 (its reads are direct). */
static void stats_info(const struct fs *fs, struct ns_info *info)
{
    memset(info, 0, sizeof *info);
    info->kind = NS_STATS;
    info->rights = SCHEMA_ACL_READ;
    info->mtime = info->ctime = clock_wall() - (clock_monotonic() - fs->started);
}

static int stat_staged(struct fs *fs, const char *path, struct ns_info *info, int *staged)
{
    if (is_stats_path(path)) {
        *staged = 0;
        stats_info(fs, info);
        return 0;
    }
    struct staged *s = fs->staging ? staging_find(fs->staging, path) : NULL;
    *staged = s && staging_is_new(s);
    if (*staged)
        staging_info(s, info);
    if (s)
        staging_release(fs->staging, s);
    return *staged ? 0 : ns_stat(fs->cfg.ns, path, info);
}

static int stat_path(struct fs *fs, const char *path, struct ns_info *info)
{
    return stat_staged(fs, path, info, &(int){ 0 });
}

/*
 * What path is now and which version of it an open would get: for a domain, its file is built
 * (or the build of the last ttl reused), so that the size is exact whenever it is reported.
 * *version as inode.h says. A domain whose file cannot be built shows as broken.
 */
static int resolve(struct fs *fs, const char *path, struct ns_info *info, uint64_t *version)
{
    int staged;
    int rc = stat_staged(fs, path, info, &staged);
    *version = staged ? INODE_STAGED : INODE_NO_VERSION;
    if (rc != 0 || staged || info->kind != NS_DOMAIN)
        return rc;
    struct image *img;
    int reused;
    rc = image_table_get(fs->images, path, info->root, &img, &reused);
    if (rc == -ENOMEM)
        return rc;
    if (rc != 0) {
        info->kind = NS_BROKEN;     /* logged by the build; opens fail with EIO */
        info->size = 0;
        return 0;
    }
    info->size = image_size(img);
    *version = image_serial(img);
    image_put(img);
    return 0;
}

/* A version's attributes never change, so the kernel may keep them (and the version's pages)
 * as long as it likes; only rights may change, hence the ttl. A staged file grows. */
static double attr_timeout(const struct fs *fs, uint64_t version)
{
    return version == INODE_STAGED ? 0 : fs->cfg.ttl;
}

/* Path and namespace answer for ino; 0 or -errno. *path is the caller's to free. */
static int stat_ino(struct fs *fs, fuse_ino_t ino, char **path, struct ns_info *info)
{
    *path = inode_path(fs->inodes, ino);
    if (!*path)
        return -ENOMEM;
    int rc = stat_path(fs, *path, info);
    if (rc != 0) {
        free(*path);
        *path = NULL;
    }
    return rc;
}

/*
 * The attributes of ino's version. A domain version answers from what its lookup found; a
 * staged file from its staged entry, and once that is committed the node becomes the version
 * its path has now (it never had cached pages). Directories and broken domains answer live.
 */
static int version_attributes(struct fs *fs, fuse_ino_t ino, char **path, uint64_t *version,
                              struct ns_info *info)
{
    int rc = inode_get(fs->inodes, ino, path, version, info);
    if (rc != 0)
        return rc;
    if (*version == INODE_NO_VERSION) {
        rc = stat_path(fs, *path, info);
    } else if (*version == INODE_STAGED) {
        struct staged *s = fs->staging ? staging_find(fs->staging, *path) : NULL;
        if (s) {
            staging_info(s, info);
            staging_release(fs->staging, s);
        } else if ((rc = resolve(fs, *path, info, version)) == 0) {
            inode_settle(fs->inodes, ino, *version, info);
        }
    }
    if (rc != 0) {
        free(*path);
        *path = NULL;
    }
    return rc;
}

/* ---- rights: each request's caller's (doc/design.md, "Rights") ---- */

static void caller_of(struct fs *fs, fuse_req_t req, struct caller *c)
{
    callers_identify(fs->callers, fuse_req_ctx(req)->uid, c);
}

/* A file not committed yet has no ACL: it is its creator's alone (the mount's user when the
 * creator is not known: a file staged before this daemon started). */
static unsigned creator_rights(struct fs *fs, const struct caller *c, const char *path)
{
    char creator[CALLERS_NAME_MAX];
    const char *user = caller_user(c);
    int known = callers_creator(fs->callers, path, creator, sizeof creator) == 0;
    return user && strcmp(user, known ? creator : fs->cfg.user) == 0 ? SCHEMA_ACL_ALL : 0;
}

static int is_new_staged(struct fs *fs, const char *path)
{
    struct staged *s = fs->staging ? staging_find(fs->staging, path) : NULL;
    int fresh = s && staging_is_new(s);
    if (s)
        staging_release(fs->staging, s);
    return fresh;
}

/*
 * info (path's, as stat_path or resolve answered) gets the caller's rights. Attributes show
 * the mounting user's (the kernel keeps one st_mode per inode for every caller); what a caller
 * may do is decided here, for its HSDS name, from the same ACL.
 */
static int caller_rights(struct fs *fs, const struct caller *c, const char *path,
                         struct ns_info *info)
{
    if (is_new_staged(fs, path)) {
        info->rights = creator_rights(fs, c, path);
        return 0;
    }
    if (caller_is_mounter(c) || info->kind == NS_STATS)
        return 0;               /* ns answered for the mount's user */
    struct ns_info mine;
    int rc = ns_stat_as(fs->cfg.ns, path, caller_user(c), &mine);
    if (rc == 0)
        info->rights = mine.rights;
    return rc;
}

/* A new file's creator owns it until its commit, and is the owner of the domain it makes. */
static int staged_is_live(void *ctx, const char *path)
{
    struct fs *fs = ctx;
    struct staged *s = fs->staging ? staging_find(fs->staging, path) : NULL;
    if (s)
        staging_release(fs->staging, s);
    return s != NULL;
}

static int remember_creator(struct fs *fs, const struct caller *c, const char *path)
{
    if (!caller_user(c))
        return -EACCES;         /* no name, no create right: domops_may_create refused it */
    int rc = callers_set_creator(fs->callers, path, caller_user(c));
    if (rc == 1)
        callers_prune_creators(fs->callers, staged_is_live, fs);
    return rc < 0 ? rc : 0;
}

static char *child_path(const char *parent, const char *name)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, name) < 0)
        return NULL;
    return path;
}

/* ---- lookup and attributes ---- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_of(req);
    struct fuse_entry_param e = { .attr_timeout = fs->cfg.ttl, .entry_timeout = fs->cfg.ttl };
    struct ns_info info;
    uint64_t version;
    char *dir = inode_path(fs->inodes, parent);
    char *path = dir ? child_path(dir, name) : NULL;
    int rc = path ? resolve(fs, path, &info, &version) : -ENOMEM;
    if (rc == 0)
        rc = inode_lookup(fs->inodes, path, version, &info, &e.ino, &e.generation);
    if (rc == 0) {
        fill_stat(fs, e.ino, &info, &e.attr);
        e.attr_timeout = attr_timeout(fs, version);
        if (fuse_reply_entry(req, &e) != 0)
            inode_forget(fs->inodes, e.ino, 1);
    } else if (rc == -ENOENT) {
        e.ino = 0;              /* a negative entry: the kernel remembers the absence for ttl */
        fuse_reply_entry(req, &e);
    } else {
        fuse_reply_err(req, -rc);
    }
    free(path);
    free(dir);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    inode_forget(fs_of(req)->inodes, ino, nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct fs *fs = fs_of(req);
    for (size_t i = 0; i < count; i++)
        inode_forget(fs->inodes, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;                   /* every handle of ino reads ino's version */
    struct fs *fs = fs_of(req);
    struct ns_info info;
    struct stat st;
    uint64_t version;
    char *path = NULL;
    int rc = version_attributes(fs, ino, &path, &version, &info);
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    fill_stat(fs, ino, &info, &st);
    fuse_reply_attr(req, &st, attr_timeout(fs, version));
    free(path);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct fs *fs = fs_of(req);
    struct ns_info info;
    struct caller caller;
    char *path;
    caller_of(fs, req, &caller);
    int rc = stat_ino(fs, ino, &path, &info);
    if (rc == 0) {
        rc = caller_rights(fs, &caller, path, &info);
        free(path);
    }
    if (rc == 0) {
        mode_t mode = mode_of(fs, &info);
        if ((mask & W_OK) && fs->cfg.read_only)
            rc = -EROFS;
        else if (((mask & R_OK) && !(mode & S_IRUSR)) || ((mask & W_OK) && !(mode & S_IWUSR)) ||
                 ((mask & X_OK) && !(mode & S_IXUSR)))
            rc = -EACCES;
    }
    fuse_reply_err(req, -rc);
}

/* ---- directories ---- */

static int has_entry(const struct ns_dir *dir, const char *name)
{
    for (size_t i = 0; i < dir->n; i++)
        if (strcmp(dir->entries[i].name, name) == 0)
            return 1;
    return 0;
}

/* Files being written for the first time are listed too (the writer's ls must see them). */
static int add_staged_children(struct fs *fs, const char *path, struct ns_dir *dir)
{
    char **names = NULL;
    size_t n = 0;
    int rc = staging_children(fs->staging, path, &names, &n);
    for (size_t i = 0; i < n; i++) {
        struct ns_dirent *bigger = NULL;
        if (rc == 0 && !has_entry(dir, names[i]) &&
            (bigger = realloc(dir->entries, (dir->n + 1) * sizeof *bigger))) {
            dir->entries = bigger;
            dir->entries[dir->n] = (struct ns_dirent){ .name = names[i],
                                                       .info = { .kind = NS_DOMAIN } };
            dir->n++;
            names[i] = NULL;
        } else if (rc == 0 && !has_entry(dir, names[i])) {
            rc = -ENOMEM;
        }
        free(names[i]);
    }
    free(names);
    if (rc != 0)
        ns_dir_free(dir);
    return rc;
}

static void dir_handle_dispose(struct fs *fs, struct fs_handle *link)
{
    (void)fs;
    struct fs_dir_handle *h = (struct fs_dir_handle *)link;
    ns_dir_free(&h->dir);
    free(h);
}

/* Have the folder's domains built ahead: a listing is often followed by a stat of each. */
static void warm_folder(struct fs *fs, const char *path, const struct ns_dir *dir)
{
    const char **paths = calloc(dir->n ? dir->n : 1, sizeof *paths);
    const char **roots = calloc(dir->n ? dir->n : 1, sizeof *roots);
    size_t n = 0;
    for (size_t i = 0; paths && roots && i < dir->n; i++) {
        if (dir->entries[i].info.kind != NS_DOMAIN)
            continue;
        if (!(paths[n] = child_path(path, dir->entries[i].name)))
            break;
        roots[n++] = dir->entries[i].info.root;
    }
    if (n > 0 && image_table_warm(fs->images, path, paths, roots, n) == -ENOMEM)
        log_debug("%s: its domains are not built ahead (out of memory)", path);
    for (size_t i = 0; i < n; i++)
        free((char *)paths[i]);
    free(paths);
    free(roots);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct ns_info info;
    struct caller caller;
    char *path;
    caller_of(fs, req, &caller);
    int rc = stat_ino(fs, ino, &path, &info);
    if (rc == 0 && (rc = caller_rights(fs, &caller, path, &info)) != 0)
        free(path);
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct fs_dir_handle *h = NULL;
    if (!is_dir_kind(info.kind))
        rc = -ENOTDIR;
    else if (!(info.rights & SCHEMA_ACL_READ))
        rc = -EACCES;
    else if (!(h = calloc(1, sizeof *h)))
        rc = -ENOMEM;
    else
        rc = ns_readdir(fs->cfg.ns, path, &h->dir);
    if (rc == 0)
        warm_folder(fs, path, &h->dir);
    if (rc == 0 && fs->staging)
        rc = add_staged_children(fs, path, &h->dir);
    free(path);
    if (rc != 0) {
        free(h);
        fuse_reply_err(req, -rc);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)h;
    handle_track(fs, &h->link, dir_handle_dispose);
    if (fuse_reply_open(req, fi) != 0) {
        handle_untrack(fs, &h->link);   /* the opener is gone: no releasedir will come */
        dir_handle_dispose(fs, &h->link);
    }
}

/* Entry i of a listing: ".", "..", then the children. */
static const char *dir_entry_name(const struct fs_dir_handle *h, size_t i, mode_t *type)
{
    *type = S_IFDIR;
    if (i < 2)
        return i == 0 ? "." : "..";
    const struct ns_dirent *e = &h->dir.entries[i - 2];
    *type = is_dir_kind(e->info.kind) ? S_IFDIR : S_IFREG;
    return e->name;
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)ino;
    struct fs_dir_handle *h = (struct fs_dir_handle *)(uintptr_t)fi->fh;
    char *buf = malloc(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t used = 0, total = h->dir.n + 2;
    for (size_t i = off < 0 ? 0 : (size_t)off; i < total; i++) {
        struct stat st = { .st_ino = FS_UNKNOWN_INO };
        const char *name = dir_entry_name(h, i, &st.st_mode);
        size_t n = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)(i + 1));
        if (n > size - used)
            break;
        used += n;
    }
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct fs *fs = fs_of(req);
    struct fs_dir_handle *h = (struct fs_dir_handle *)(uintptr_t)fi->fh;
    handle_untrack(fs, &h->link);
    dir_handle_dispose(fs, &h->link);
    fuse_reply_err(req, 0);
}

/* ---- files ---- */

static int open_for_writing(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

static int check_open(const struct fs *fs, const struct ns_info *info, int flags)
{
    if (is_dir_kind(info->kind))
        return -EISDIR;
    if (open_for_writing(flags) && fs->cfg.read_only)
        return -EROFS;
    if (info->kind == NS_BROKEN)
        return -EIO;            /* logged when the domain object was read */
    if (info->kind == NS_STATS && open_for_writing(flags))
        return -EACCES;
    mode_t need = open_for_writing(flags) ? S_IWUSR : 0;
    if ((flags & O_ACCMODE) != O_WRONLY)
        need |= S_IRUSR;
    if ((mode_of(fs, info) & need) != need)
        return -EACCES;
    if (open_for_writing(flags) && !(info->rights & SCHEMA_ACL_UPDATE))
        return -EACCES;         /* "create" on a folder is not "update" on a domain */
    return 0;
}

static void fs_file_free(struct fs *fs, struct fs_file *f)
{
    if (!f)
        return;
    handle_untrack(fs, &f->link);
    if (f->stg)
        staging_release(fs->staging, f->stg);
    if (f->img) {
        image_table_hold(fs->images, f->root, -1);
        image_put(f->img);
    }
    free(f->text);
    free(f);
}

/* A reader of a committed version: the image of exactly that version, or -ESTALE when the
 * path has a newer one (the kernel then looks the name up again and opens the new node). */
static int open_image(struct fs *fs, const char *path, const struct ns_info *info,
                      uint64_t version, struct fs_file *f)
{
    int reused;
    int rc = image_table_get(fs->images, path, info->root, &f->img, &reused);
    if (rc != 0)
        return rc;
    if (image_serial(f->img) != version) {
        image_put(f->img);
        f->img = NULL;
        return -ESTALE;
    }
    snprintf(f->root, sizeof f->root, "%s", info->root);
    image_table_hold(fs->images, f->root, +1);
    f->reader.cache = fs->cfg.cache;
    f->reader.prefetch = fs->cfg.prefetch;
    return 0;
}

/* Writers share the path's staged file; so do readers of a file not committed yet. */
static int open_file(struct fs *fs, const char *path, const struct ns_info *info,
                     uint64_t version, int flags, struct fs_file *f)
{
    if (info->kind == NS_STATS) {
        int rc = fs_stats_text(fs, 1, &f->text);
        f->text_len = rc == 0 ? strlen(f->text) : 0;
        return rc;
    }
    if (open_for_writing(flags))
        return staging_open(fs->staging, path, info->root[0] ? info->root : NULL,
                            (flags & O_TRUNC) != 0, &f->stg);
    if (version == INODE_STAGED) {
        f->stg = fs->staging ? staging_find(fs->staging, path) : NULL;
        return f->stg ? 0 : -ESTALE;
    }
    return open_image(fs, path, info, version, f);
}

static void file_dispose(struct fs *fs, struct fs_handle *link)
{
    fs_file_free(fs, (struct fs_file *)link);
}

/* What the kernel keeps of an open file: the handle, and how to cache its pages. */
static void hand_out(struct fs *fs, struct fuse_file_info *fi, struct fs_file *f)
{
    handle_track(fs, &f->link, file_dispose);
    fi->fh = (uint64_t)(uintptr_t)f;
    fi->keep_cache = f->img != NULL;    /* the node is this version: its pages stay right */
    fi->direct_io = f->stg != NULL || f->text;  /* staged bytes change under other handles;
                                                   the statistics are longer than st_size */
}

/* The node's version, if it is still the one its path has (the same check opens make). */
static int check_current(struct fs *fs, const char *path, uint64_t version,
                         struct ns_info *info)
{
    uint64_t now;
    int rc = resolve(fs, path, info, &now);
    return rc == 0 && now != version ? -ESTALE : rc;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct ns_info info;
    uint64_t version;
    char *path = NULL;
    struct fs_file *f = calloc(1, sizeof *f);
    struct caller caller;
    caller_of(fs, req, &caller);
    int rc = f ? version_attributes(fs, ino, &path, &version, &info) : -ENOMEM;
    if (rc == 0 && version != INODE_STAGED && version != INODE_NO_VERSION)
        rc = check_current(fs, path, version, &info);
    if (rc == 0)
        rc = caller_rights(fs, &caller, path, &info);
    if (rc == 0)
        rc = check_open(fs, &info, fi->flags);
    if (rc == 0)
        rc = open_file(fs, path, &info, version, fi->flags, f);
    free(path);
    if (rc != 0) {
        fs_file_free(fs, f);
        fuse_reply_err(req, -rc);
        return;
    }
    f->ino = ino;
    f->opener = fuse_req_ctx(req)->pid;
    f->fresh = 1;
    hand_out(fs, fi, f);
    if (fuse_reply_open(req, fi) != 0)
        fs_file_free(fs, f);    /* the opener is gone: no release will come */
}

static ssize_t read_text(const struct fs_file *f, char *buf, size_t size, uint64_t off)
{
    size_t n = off < f->text_len ? f->text_len - (size_t)off : 0;
    n = n < size ? n : size;
    memcpy(buf, f->text + (off < f->text_len ? off : 0), n);
    return (ssize_t)n;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
    f->fresh = 0;
    char *buf = malloc(size ? size : 1);
    if (!buf || off < 0) {
        free(buf);
        fuse_reply_err(req, buf ? EINVAL : ENOMEM);
        return;
    }
    ssize_t n = f->stg ? staging_read(fs_of(req)->staging, f->stg, buf, size, (uint64_t)off)
              : f->text ? read_text(f, buf, size, (uint64_t)off)
                        : image_read(f->img, &f->reader, (uint64_t)off, buf, size);
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)ino;
    struct fs *fs = fs_of(req);
    struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
    f->fresh = 0;
    ssize_t n = !f->stg || (fi->flags & O_ACCMODE) == O_RDONLY ? -EBADF
              : off < 0 ? -EINVAL
              : staging_write(fs->staging, f->stg, buf, size, (uint64_t)off);
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_write(req, (size_t)n);
}

/* close() and fsync(): the moment a changed file becomes the domain. */
static void reply_commit(fuse_req_t req, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
    f->fresh = 0;
    int rc = f->stg ? staging_commit(fs->staging, f->stg) : 0;
    if (f->stg)
        notifier_drain(fs->notifier);   /* a stat right after close() sees the new version */
    fuse_reply_err(req, -rc);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    reply_commit(req, fi);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino, (void)datasync;
    reply_commit(req, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    fs_file_free(fs_of(req), (struct fs_file *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs st = {
        .f_bsize = FS_BLOCK_SIZE,
        .f_frsize = FS_BLOCK_SIZE,
        .f_namemax = FS_NAME_MAX,
    };
    fuse_reply_statfs(req, &st);
}

/* ---- extended attributes: the domain's root id and owner, read-only ---- */

static int xattr_value(const struct ns_info *info, const char *name, const char **value)
{
    if (strcmp(name, FS_XATTR_ROOT) == 0 && info->kind == NS_DOMAIN)
        *value = info->root;
    else if (strcmp(name, FS_XATTR_OWNER) == 0 &&
             (info->kind == NS_DOMAIN || info->kind == NS_FOLDER))
        *value = info->owner;
    else
        return -ENODATA;
    return 0;
}

static void reply_sized(fuse_req_t req, const char *data, size_t len, size_t size)
{
    if (size == 0)
        fuse_reply_xattr(req, len);
    else if (size < len)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, data, len);
}

/* The values come from the domain object, which HSDS gives to readers only. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    struct fs *fs = fs_of(req);
    struct ns_info info;
    struct caller caller;
    const char *value = NULL;
    char *path;
    caller_of(fs, req, &caller);
    int rc = stat_ino(fs, ino, &path, &info);
    if (rc == 0) {
        rc = xattr_value(&info, name, &value);
        if (rc == 0)
            rc = caller_rights(fs, &caller, path, &info);
        if (rc == 0 && !(info.rights & SCHEMA_ACL_READ))
            rc = -EACCES;
        free(path);
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
    else
        reply_sized(req, value, strlen(value), size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    static const char names_domain[] = FS_XATTR_ROOT "\0" FS_XATTR_OWNER;
    static const char names_folder[] = FS_XATTR_OWNER;
    struct fs *fs = fs_of(req);
    struct ns_info info;
    char *path;
    int rc = stat_ino(fs, ino, &path, &info);
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    free(path);
    if (info.kind == NS_DOMAIN)
        reply_sized(req, names_domain, sizeof names_domain, size);
    else if (info.kind == NS_FOLDER)
        reply_sized(req, names_folder, sizeof names_folder, size);
    else
        reply_sized(req, "", 0, size);
}

/* ---- writes and changes ---- */

/* Device nodes, symlinks, hard links and xattrs: HSDS has no object that could hold them. */
static void reply_erofs(fuse_req_t req)
{
    fuse_reply_err(req, EROFS);
}

/*
 * A truncate without a handle. The kernel sends open(O_TRUNC) as an open and then such a
 * truncate (op_init), so when the path has a staged entry its handles own the change: the
 * staged file is truncated and their close commits it. Otherwise (truncate(2) of a domain
 * nobody writes) it is staged, committed and released at once.
 */
static int truncate_path(struct fs *fs, const char *path, const struct ns_info *info,
                         uint64_t size)
{
    struct staged *s = fs->staging ? staging_find(fs->staging, path) : NULL;
    int rc = check_open(fs, info, O_WRONLY);
    if (s) {
        if (rc == 0)
            rc = staging_truncate(fs->staging, s, size);
        staging_release(fs->staging, s);
        return rc;
    }
    if (rc == 0)
        rc = staging_open(fs->staging, path, info->root[0] ? info->root : NULL, size == 0, &s);
    if (rc == 0)
        rc = staging_truncate(fs->staging, s, size);
    if (rc == 0)
        rc = staging_commit(fs->staging, s);
    if (s)
        staging_release(fs->staging, s);
    return rc;
}

/* Sizes change the staged file; times and modes are accepted and not kept (rights come from
 * ACLs, times from the store); owners cannot change. */
static int set_attributes(struct fs *fs, const char *path, struct ns_info *info,
                          const struct fs_file *f, const struct stat *attr, int to_set)
{
    if (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != fs->cfg.uid) ||
        ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != fs->cfg.gid))
        return -EPERM;
    if (!(to_set & FUSE_SET_ATTR_SIZE))
        return 0;
    if (fs->cfg.read_only)
        return -EROFS;
    if (is_dir_kind(info->kind))
        return -EISDIR;
    return f && f->stg ? staging_truncate(fs->staging, f->stg, (uint64_t)attr->st_size)
                       : truncate_path(fs, path, info, (uint64_t)attr->st_size);
}

/*
 * Without atomic_o_trunc (op_init) the kernel sends open(O_TRUNC) as an open, then a truncate
 * to 0 without a handle, from the same thread. That truncate belongs to the handle just opened:
 * a writer's staged file is emptied without being a change by itself (nothing is stored unless
 * written, as for a new file), and a reader's O_RDONLY|O_TRUNC stores nothing. 1 when it was
 * such a truncate.
 */
static int truncate_of_open(struct fs *fs, fuse_req_t req, fuse_ino_t ino, int *rc)
{
    pid_t tid = fuse_req_ctx(req)->pid;
    struct fs_file *found = NULL;
    pthread_mutex_lock(&fs->handles_lock);
    for (struct fs_handle *h = fs->handles.next; h != &fs->handles && !found; h = h->next) {
        struct fs_file *f = (struct fs_file *)h;
        if (h->dispose == file_dispose && f->ino == ino && f->opener == tid && f->fresh)
            found = f;
    }
    if (found)
        found->fresh = 0;
    pthread_mutex_unlock(&fs->handles_lock);
    /* the handle stays alive: its release cannot come before this open's syscall returns */
    *rc = found && found->stg ? staging_empty(fs->staging, found->stg) : 0;
    return found != NULL;
}

/* The answer is ino's version's attributes: a writer's truncate of a committed domain
 * changes its staged file, not the version other handles of the inode read. */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    const struct fs_file *f = fi ? (const struct fs_file *)(uintptr_t)fi->fh : NULL;
    struct ns_info info;
    struct caller caller;
    struct stat st;
    uint64_t version;
    char *path = NULL;
    int rc = 0;
    caller_of(fs, req, &caller);
    if (f || to_set != FUSE_SET_ATTR_SIZE || attr->st_size != 0 ||
        !truncate_of_open(fs, req, ino, &rc)) {
        rc = stat_ino(fs, ino, &path, &info);
        if (rc == 0)
            rc = caller_rights(fs, &caller, path, &info);
        if (rc == 0)
            rc = set_attributes(fs, path, &info, f, attr, to_set);
        free(path);
        path = NULL;
    }
    if (rc == 0)
        rc = version_attributes(fs, ino, &path, &version, &info);
    if (rc == 0) {
        fill_stat(fs, ino, &info, &st);
        fuse_reply_attr(req, &st, attr_timeout(fs, version));
    } else {
        fuse_reply_err(req, -rc);
    }
    free(path);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     dev_t rdev)
{
    (void)parent, (void)name, (void)mode, (void)rdev;
    reply_erofs(req);
}

/* The path of name in directory parent (new string) or NULL. */
static char *path_in(struct fs *fs, fuse_ino_t parent, const char *name)
{
    char *dir = inode_path(fs->inodes, parent);
    char *path = dir ? child_path(dir, name) : NULL;
    free(dir);
    return path;
}

static void reply_entry_for(fuse_req_t req, struct fs *fs, const char *path)
{
    struct fuse_entry_param e = { .entry_timeout = fs->cfg.ttl };
    struct ns_info info;
    uint64_t version;
    int rc = resolve(fs, path, &info, &version);
    if (rc == 0)
        rc = inode_lookup(fs->inodes, path, version, &info, &e.ino, &e.generation);
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    fill_stat(fs, e.ino, &info, &e.attr);
    e.attr_timeout = attr_timeout(fs, version);
    if (fuse_reply_entry(req, &e) != 0)
        inode_forget(fs->inodes, e.ino, 1);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    (void)mode;                 /* rights come from the folder's ACL, not from a mode */
    struct fs *fs = fs_of(req);
    struct caller caller;
    caller_of(fs, req, &caller);
    char *path = fs->cfg.read_only ? NULL : path_in(fs, parent, name);
    int rc = fs->cfg.read_only ? -EROFS : !path ? -ENOMEM : is_stats_path(path) ? -EEXIST
           : domops_mkdir(&fs->ops, caller_user(&caller), path);
    if (rc == 0)
        reply_entry_for(req, fs, path);
    else
        fuse_reply_err(req, -rc);
    free(path);
}

/* rmdir: one namespace change on name in parent, answered with its errno. */
static void reply_change(fuse_req_t req, fuse_ino_t parent, const char *name,
                         int (*change)(const struct domops *d, const char *user,
                                       const char *path))
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    caller_of(fs, req, &caller);
    char *path = fs->cfg.read_only ? NULL : path_in(fs, parent, name);
    int rc = fs->cfg.read_only ? -EROFS : !path ? -ENOMEM : is_stats_path(path) ? -EPERM
           : change(&fs->ops, caller_user(&caller), path);
    fuse_reply_err(req, -rc);
    free(path);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    reply_change(req, parent, name, domops_rmdir);
}

/* What an unlink or a rename replaces at a path, for staging_unlink (below). */
struct removal {
    struct fs *fs;
    const struct caller *caller;
    const char *from;           /* a rename's source; NULL for an unlink */
    unsigned flags;             /* a rename's */
};

/* A file never committed is its creator's to remove (the bucket has nothing of it); a domain
 * is deleted as HSDS would. */
static int unlink_at(void *ctx, const char *path, int fresh)
{
    struct removal *r = ctx;
    if (fresh)
        return creator_rights(r->fs, r->caller, path) & SCHEMA_ACL_DELETE ? 0 : -EACCES;
    return domops_unlink(&r->fs->ops, caller_user(r->caller), path);
}

/* A rename onto to: a file never committed there is replaced as if it were a domain. */
static int rename_onto(void *ctx, const char *to, int fresh)
{
    struct removal *r = ctx;
    if (fresh && (r->flags & RENAME_NOREPLACE))
        return -EEXIST;
    if (fresh && !(creator_rights(r->fs, r->caller, to) & SCHEMA_ACL_UPDATE))
        return -EACCES;
    return domops_rename(&r->fs->ops, caller_user(r->caller), r->from, to, r->flags);
}

/* The change staged at path goes with it (staging.h): its bytes are freed now, and its last
 * close commits nothing over what the bucket has now. */
static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    caller_of(fs, req, &caller);
    struct removal r = { .fs = fs, .caller = &caller };
    char *path = fs->cfg.read_only ? NULL : path_in(fs, parent, name);
    int rc = fs->cfg.read_only ? -EROFS : !path ? -ENOMEM : is_stats_path(path) ? -EPERM
           : staging_unlink(fs->staging, path, unlink_at, &r);
    if (rc == 0)
        callers_forget_creator(fs->callers, path);
    fuse_reply_err(req, -rc);
    free(path);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    (void)link, (void)parent, (void)name;
    reply_erofs(req);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    char *from = NULL, *to = NULL;
    int rc = -EROFS;
    caller_of(fs, req, &caller);
    if (!fs->cfg.read_only) {
        from = path_in(fs, parent, name);
        to = path_in(fs, newparent, newname);
        struct removal r = { .fs = fs, .caller = &caller, .from = from, .flags = flags };
        rc = !from || !to ? -ENOMEM
           : is_stats_path(from) || is_stats_path(to) ? -EPERM
           : strcmp(from, to) == 0 ? domops_rename(&fs->ops, caller_user(&caller), from, to,
                                                   flags)
           : staging_unlink(fs->staging, to, rename_onto, &r);
        if (rc == 0 && inode_rename(fs->inodes, from, to) != 0)
            log_warn("rename %s -> %s: open handles keep the old name", from, to);
        if (rc == 0 && fs->staging)
            staging_rename(fs->staging, from, to);
        if (rc == 0)
            callers_rename_creator(fs->callers, from, to);
    }
    fuse_reply_err(req, -rc);
    free(from);
    free(to);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    (void)ino, (void)newparent, (void)newname;
    reply_erofs(req);
}

/* A new domain's staged file (the caller's), or an existing domain opened as open(2) says. */
static int create_file(struct fs *fs, const struct caller *c, const char *path, int flags,
                       struct fs_file *f, struct ns_info *info, uint64_t *version)
{
    int rc = resolve(fs, path, info, version);
    if (rc == 0 && (flags & O_EXCL))
        return -EEXIST;
    if (rc == 0) {
        struct ns_info mine = *info;    /* info stays what the attributes show */
        rc = caller_rights(fs, c, path, &mine);
        if (rc == 0)
            rc = check_open(fs, &mine, flags);
    }
    if (rc == 0)
        return open_file(fs, path, info, *version, flags, f);
    if (rc != -ENOENT)
        return rc;
    /* names the bucket reserves and the parent's "create" for the caller: refused here */
    rc = domops_may_create(&fs->ops, caller_user(c), path);
    if (rc == 0)
        rc = staging_open(fs->staging, path, NULL, 1, &f->stg);
    if (rc == 0)
        rc = remember_creator(fs, c, path);
    if (rc == 0) {
        staging_info(f->stg, info);
        *version = INODE_STAGED;
    }
    return rc;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    (void)mode;                 /* rights come from the folder's ACL, not from a mode */
    struct fs *fs = fs_of(req);
    struct fuse_entry_param e = { .entry_timeout = fs->cfg.ttl };
    struct ns_info info;
    uint64_t version = INODE_NO_VERSION;
    struct fs_file *f = calloc(1, sizeof *f);
    struct caller caller;
    caller_of(fs, req, &caller);
    char *path = f && !fs->cfg.read_only ? path_in(fs, parent, name) : NULL;
    int rc = !f ? -ENOMEM : fs->cfg.read_only ? -EROFS : !path ? -ENOMEM : 0;
    if (rc == 0)
        rc = create_file(fs, &caller, path, fi->flags, f, &info, &version);
    if (rc == 0)
        rc = inode_lookup(fs->inodes, path, version, &info, &e.ino, &e.generation);
    free(path);
    if (rc != 0) {
        fs_file_free(fs, f);
        fuse_reply_err(req, -rc);
        return;
    }
    fill_stat(fs, e.ino, &info, &e.attr);
    e.attr_timeout = attr_timeout(fs, version);
    hand_out(fs, fi, f);
    if (fuse_reply_create(req, &e, fi) != 0) {
        inode_forget(fs->inodes, e.ino, 1);
        fs_file_free(fs, f);
    }
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    (void)ino, (void)name, (void)value, (void)size, (void)flags;
    reply_erofs(req);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    (void)ino, (void)name;
    reply_erofs(req);
}

/*
 * Each inode is one version of a domain whose attributes and bytes never change (inode.h), so
 * the kernel needs no re-checks of them before cached reads (auto_inval_data: one GETATTR per
 * read when attributes expire). An O_TRUNC open must not empty the kernel's view of an inode
 * that other handles still read: without atomic_o_trunc the kernel asks with a setattr, whose
 * answer is the version's size (op_setattr), and the writer's staged file alone is emptied.
 */
static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    conn->want &= ~(unsigned)(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_ATOMIC_O_TRUNC);
}

static const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .access = op_access,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .releasedir = op_releasedir,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .write = op_write,
    .flush = op_flush,
    .fsync = op_fsync,
    .statfs = op_statfs,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .setattr = op_setattr,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .create = op_create,
    .setxattr = op_setxattr,
    .removexattr = op_removexattr,
};

const struct fuse_lowlevel_ops *fs_operations(void)
{
    return &fs_ops;
}
