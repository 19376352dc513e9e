/* fs: see include/h5osfs/fs/fs.h. The mount's state and its lifetime; the FUSE operation table
 * is in fs_ops.c, the operations in fs_dir.c, fs_file.c and fs_change.c (fs_int.h), which call
 * this file and never the reverse. */
#include "fs_int.h"

#include "h5osfs/zarr/zarr.h"

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

void fs_forget_name(struct fs *fs, const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path)) : NULL;
    fuse_ino_t parent = dir ? inode_of(fs->inodes, *dir ? dir : "/") : 0;
    if (parent)
        notifier_entry(fs->notifier, parent, slash + 1);
    free(dir);
}

int fs_new(const struct fs_config *cfg, struct fs **out)
{
    struct fs *fs = calloc(1, sizeof *fs);
    if (!fs)
        return -ENOMEM;
    fs->cfg = *cfg;
    fs->images = cfg->images;
    fs->ops = cfg->ops;
    fs->callers = cfg->callers;
    fs->staging = cfg->staging;
    fs->started = clock_monotonic();
    fs->mnt_id = -1;
    pthread_mutex_init(&fs->handles_lock, NULL);
    fs->handles.next = fs->handles.prev = &fs->handles;
    int rc = inode_table_new(&fs->inodes);
    if (rc == 0 && (rc = recent_new(&fs->recent)) != 0)
        inode_table_free(fs->inodes);
    if (rc == 0 && (rc = zarr_view_new(cfg->store, cfg->bucket_name, cfg->ttl, &fs->zarr)) != 0) {
        recent_free(fs->recent);
        inode_table_free(fs->inodes);
    }
    if (rc != 0) {
        pthread_mutex_destroy(&fs->handles_lock);
        free(fs);
        return rc;
    }
    *out = fs;
    return 0;
}

int fs_stats_text(struct fs *fs, int pretty, char **out)
{
    struct fs_stats st = { .backend = fs->cfg.store->ops->name,
                           .uptime = clock_monotonic() - fs->started,
                           .read_only = fs->staging == NULL };
    store_counts(fs->cfg.store, &st.store);
    chunk_cache_stats(fs->cfg.cache, &st.cache);
    prefetcher_counts(fs->cfg.prefetch, &st.read_ahead);
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
    recent_free(fs->recent);
    zarr_view_free(fs->zarr);
    inode_table_free(fs->inodes);
    pthread_mutex_destroy(&fs->handles_lock);
    free(fs);
}

void fs_mounted(struct fs *fs, const char *mountpoint)
{
    char *real = realpath(mountpoint, NULL);
    fs->mnt_id = real ? holders_mount_id(real) : -1;
    if (fs->mnt_id < 0)
        log_warn("%s: this mount's id is not in /proc/self/mountinfo: a close that is not the "
                 "last may be taken for the last by another mount's descriptors",
                 real ? real : mountpoint);
    free(real);
}

bool fs_still_mounted(const struct fs *fs, const char *mountpoint)
{
    return fs->mnt_id >= 0 && holders_mount_id(mountpoint) == fs->mnt_id;
}

void fs_start_threads(struct fs *fs, struct fuse_session *se, struct prefetcher *p)
{
    fs->cfg.prefetch = p; /* before the loop starts: no request reads it yet */
    if (notifier_start(se, &fs->notifier) != 0)
        log_warn("no notifier thread: after a commit, the kernel may show the old version of "
                 "the file for up to ttl seconds");
}

struct fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}
