/* fs: see include/h5osfs/fs.h. The mount's state, its lifetime and the FUSE operation table;
 * the operations are in fs_dir.c, fs_file.c and fs_change.c (fs_int.h). */
#include "fs_int.h"

void fs_handle_track(struct fs *fs, struct fs_handle *h,
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

void fs_handle_untrack(struct fs *fs, struct fs_handle *h)
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
        fs_handle_untrack(fs, h);
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

/* The nearest folder above domain that says how new files below it are stored decides
 * (user.h5osfs.ingest, inherited by everything below, subfolders too, until one says
 * otherwise); none: the mount's -o ingest. */
static int link_for(void *ctx, const char *domain, int link)
{
    struct fs *fs = ctx;
    char *dir = strdup(domain);
    for (char *slash = dir ? strrchr(dir, '/') : NULL; slash; slash = strrchr(dir, '/')) {
        struct ns_info info;
        slash[slash == dir ? 1 : 0] = '\0';
        if (ns_stat(fs->cfg.ns, dir, &info) == 0 && info.kind == NS_FOLDER &&
            info.ingest != SCHEMA_INGEST_UNSET) {
            link = info.ingest == SCHEMA_INGEST_LINK;
            break;
        }
        if (slash == dir)
            break;              /* "/" was the last */
    }
    free(dir);
    return link;
}

static int fs_new_staging(struct fs *fs)
{
    if (fs->cfg.read_only)
        return 0;
    int rc = journal_open(fs->cfg.cache_dir, fs->cfg.bucket_id, &fs->journal);
    if (rc != 0)
        return rc;
    struct commit_ctx commit = { .ops = &fs->ops, .journal = fs->journal,
                                 .workers = fs->cfg.write_workers,
                                 .link = fs->cfg.ingest_link,
                                 .bucket_name = fs->cfg.images.bucket_name,
                                 .link_for = link_for, .link_ctx = fs };
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

struct fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
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
