/* fs_file: open domain files: reads from the image or the staged file, writes, commits. */
#include "fs_int.h"

#include "h5osfs/util/grow.h"

/* ---- files ---- */

static int open_for_writing(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

int fs_check_open(const struct fs *fs, const struct ns_info *info, int flags)
{
    if (fs_is_dir_kind(info->kind))
        return -EISDIR;
    if (open_for_writing(flags) && fs->cfg.read_only)
        return -EROFS;
    if (info->kind == NS_BROKEN)
        return -EIO; /* logged when the domain object was read */
    if (info->kind == NS_VIEW && open_for_writing(flags))
        return -EROFS; /* MOUNT/.zarr shows the domains; nothing changes them through it */
    if (info->kind == NS_STATS && open_for_writing(flags))
        return -EACCES;
    mode_t need = open_for_writing(flags) ? S_IWUSR : 0;
    if ((flags & O_ACCMODE) != O_WRONLY)
        need |= S_IRUSR;
    if ((fs_mode_of(fs, info) & need) != need)
        return -EACCES;
    if (open_for_writing(flags) && !(info->rights & SCHEMA_ACL_UPDATE))
        return -EACCES; /* "create" on a folder is not "update" on a domain */
    return 0;
}

struct fs_file *fs_file_new(void)
{
    struct fs_file *f = calloc(1, sizeof *f);
    if (f) {
        holders_init(&f->holders);
        pthread_mutex_init(&f->reopen_lock, NULL);
    }
    return f;
}

/* f had its last close: its staged entry no longer counts it as open (staging_close), so
 * that after the last writer's close() the path is the bucket's, whenever the release comes. */
void fs_file_closed(struct fs *fs, struct fs_file *f)
{
    if (!atomic_exchange(&f->closed, 1) && f->stg && f->stg_opened)
        staging_close(fs->staging, f->stg);
}

/* Under f's reopen_lock: see fs_file_reopen. */
static int reopen_locked(struct fs *fs, struct fs_file *f)
{
    struct staged *before = f->stg, *now = NULL;
    int rc = staging_reopen(fs->staging, before, &now);
    if (rc != 0)
        return rc;
    if (now == before) {
        staging_release(fs->staging, now); /* f holds a reference to it already */
    } else {
        struct staged **bigger =
            grow_array(f->former, &f->cap_former, f->n_former + 1, sizeof *bigger, 2);
        if (!bigger) {
            staging_close(fs->staging, now);
            staging_release(fs->staging, now);
            return -ENOMEM;
        }
        f->former = bigger;
        f->former[f->n_former++] = before; /* a request of f may be using it now */
        f->stg = now;
    }
    atomic_store(&f->closed, 0); /* after stg: a close that sees f open closes now */
    return 0;
}

/*
 * A write or truncate through f after its last close. Only a process that inherited the
 * descriptor and had not used it can send one (op_flush counts every process that did), so
 * that close took f's entry off its path. The descriptor still names the file, as on any file
 * system: the write is an open of the path again (staging_reopen), into the file a writer has
 * open there now, else into f's own entry, back on its path; f's next last close commits it.
 * 0, or -ESTALE when the file was removed since.
 */
int fs_file_reopen(struct fs *fs, struct fs_file *f)
{
    if (!atomic_load(&f->closed) || !f->stg_opened)
        return 0;
    pthread_mutex_lock(&f->reopen_lock);
    int rc = atomic_load(&f->closed) ? reopen_locked(fs, f) : 0;
    pthread_mutex_unlock(&f->reopen_lock);
    return rc;
}

void fs_file_free(struct fs *fs, struct fs_file *f)
{
    if (!f)
        return;
    fs_file_closed(fs, f); /* a handle whose close never came (a failed open reply, unmount) */
    holders_destroy(&f->holders);
    fs_handle_untrack(fs, &f->link);
    if (f->stg)
        staging_release(fs->staging, f->stg);
    for (size_t i = 0; i < f->n_former; i++)
        staging_release(fs->staging, f->former[i]);
    free(f->former);
    pthread_mutex_destroy(&f->reopen_lock);
    if (f->img) {
        image_table_hold(fs->images, f->root, -1);
        image_put(f->img);
    }
    free(f->text);
    free(f);
}

/* f reads img (its reference, taken over), the version whose attributes info has; the
 * collector keeps that version's objects while f is open. */
static void read_image(struct fs *fs, const struct ns_info *info, struct image *img,
                       struct fs_file *f)
{
    f->img = img;
    snprintf(f->root, sizeof f->root, "%s", info->root);
    image_table_hold(fs->images, f->root, +1);
    f->reader.cache = fs->cfg.cache;
    f->reader.prefetch = fs->cfg.prefetch;
    f->reader.exact = image_reads_exact(img);
}

/* A reader of a committed version: the image of exactly that version, or -ESTALE when the
 * path has a newer one (the kernel then looks the name up again and opens the new node). */
static int open_image(struct fs *fs, const char *path, const struct ns_info *info, uint64_t version,
                      struct fs_file *f)
{
    int reused;
    struct image *img;
    int rc = image_table_get(fs->images, path, info->root, &img, &reused);
    if (rc != 0)
        return rc;
    if (fs_is_recorded_version(version) && image_size(img) != info->size) {
        log_error("%s: version built as %llu bytes, but its commit recorded %llu: not read "
                  "(EIO)",
                  path, (unsigned long long)image_size(img), (unsigned long long)info->size);
        image_put(img);
        return -EIO;
    }
    if (!fs_is_recorded_version(version) && image_serial(img) != version) {
        image_put(img);
        return -ESTALE;
    }
    read_image(fs, info, img, f);
    return 0;
}

/* Writers share the path's staged file; so do readers of a file not committed yet. */
int fs_open_file(struct fs *fs, const char *path, const struct ns_info *info, uint64_t version,
                 int flags, struct fs_file *f)
{
    if (info->kind == NS_STATS) {
        int rc = fs_stats_text(fs, 1, &f->text);
        f->text_len = rc == 0 ? strlen(f->text) : 0;
        return rc;
    }
    if (info->kind == NS_VIEW)
        return fs_zarr_read(fs, path, &f->text, &f->text_len);
    if (open_for_writing(flags)) {
        struct staged *s = NULL;
        int rc = staging_open(fs->staging, path, info->root[0] ? info->root : NULL,
                              (flags & O_TRUNC) != 0, &s);
        f->stg = s;
        f->stg_opened = rc == 0;
        return rc;
    }
    if (version == INODE_STAGED) {
        f->stg = fs->staging ? staging_find(fs->staging, path) : NULL;
        return f->stg ? 0 : -ESTALE;
    }
    return open_image(fs, path, info, version, f);
}

void fs_file_dispose(struct fs *fs, struct fs_handle *link)
{
    fs_file_free(fs, (struct fs_file *)link);
}

/* What the kernel keeps of an open file: the handle, and how to cache its pages. */
void fs_hand_out(struct fs *fs, struct fuse_file_info *fi, struct fs_file *f)
{
    fs_handle_track(fs, &f->link, fs_file_dispose);
    fi->fh = (uint64_t)(uintptr_t)f;
    /* the node is this version (a reader never opens a writer's: inode.h): its pages stay
     * right */
    fi->keep_cache = f->img != NULL;
    /* staged bytes change under other handles; the statistics are longer than st_size; a page
     * of tiny chunks would be fetched whole for one value */
    fi->direct_io = f->stg != NULL || f->text || f->reader.exact;
}

/*
 * Which version an open of a domain's node gets, and the attributes it goes by (*info).
 * A reader of the version a lookup handed out lately gets it, with the node's attributes,
 * even if the path has a newer one now (*looked_up: its image; recent.h says why that is
 * whole): so an open that follows its lookup never fails because the domain was replaced in
 * between, however long the machine made it wait. Any other open needs the node to be the
 * path's version: else ESTALE, and the kernel looks the name up again (once) and opens the new
 * node.
 */
static int settle_version(struct fs *fs, const char *path, uint64_t version, int flags,
                          struct ns_info *info, struct image **looked_up)
{
    *looked_up = NULL;
    if (version == INODE_STAGED || version == INODE_NO_VERSION)
        return 0;
    if (!open_for_writing(flags) && (*looked_up = recent_find(fs->recent, version)) != NULL) {
        if (!image_changed_in_store(*looked_up))
            return 0;
        image_put(*looked_up); /* it cannot be read whole any more: the path's version now */
        *looked_up = NULL;
    }
    uint64_t now;
    int rc = fs_resolve(fs, path, info, &now);
    return rc == 0 && now != version ? -ESTALE : rc;
}

/*
 * The kernel reads ahead of a sequential reader 128 KiB at a time (its default for a FUSE
 * mount, and what it offers at INIT, the most a daemon may answer): one READ request, one
 * wakeup of a thread and one reply per 128 KiB. Past INIT, the mount's own read_ahead_kb in
 * sysfs takes a larger value, and READs grow with it (up to libfuse's max_pages, 1 MiB): a
 * full read costs the daemon less CPU. Only root may write it; anyone else keeps 128 KiB.
 */
static int mount_device(int mnt_id, char *dev, size_t len)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char line[4096];
    int rc = -ENOENT;
    while (rc != 0 && fgets(line, sizeof line, f)) {
        int id;
        unsigned major, minor;
        if (sscanf(line, "%d %*d %u:%u", &id, &major, &minor) == 3 && id == mnt_id) {
            snprintf(dev, len, "%u:%u", major, minor);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

static int write_read_ahead(int mnt_id, uint64_t bytes, char *path, size_t len)
{
    char dev[32];
    int rc = mount_device(mnt_id, dev, sizeof dev);
    snprintf(path, len, "/sys/class/bdi/%s/read_ahead_kb", rc == 0 ? dev : "?");
    int fd = rc == 0 ? open(path, O_WRONLY | O_CLOEXEC) : -1;
    if (rc == 0 && fd < 0)
        rc = -errno;
    if (fd >= 0) {
        if (dprintf(fd, "%llu\n", (unsigned long long)(bytes >> 10)) < 0)
            rc = -errno;
        if (close(fd) != 0 && rc == 0)
            rc = -errno;
    }
    return rc;
}

/* Once, at the first open: INIT is answered by then, and nothing has been read. */
static void set_read_ahead(struct fs *fs)
{
    if (fs->cfg.read_ahead == 0 || fs->mnt_id < 0 || atomic_exchange(&fs->read_ahead_set, 1))
        return;
    char path[96];
    int rc = write_read_ahead(fs->mnt_id, fs->cfg.read_ahead, path, sizeof path);
    if (rc == 0)
        log_debug("%s: %llu KiB", path, (unsigned long long)(fs->cfg.read_ahead >> 10));
    else
        log_info("read_ahead: %s: %s: the kernel reads ahead 128 KiB at a time", path,
                 strerror(-rc));
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    set_read_ahead(fs);
    struct ns_info info;
    uint64_t version;
    char *path = NULL;
    struct fs_file *f = fs_file_new();
    struct caller caller;
    fs_caller_of(fs, req, &caller);
    struct image *looked_up = NULL;
    int rc = f ? fs_version_attributes(fs, ino, &path, &version, &info) : -ENOMEM;
    if (rc == 0)
        rc = settle_version(fs, path, version, fi->flags, &info, &looked_up);
    pid_t tid = fuse_req_ctx(req)->pid;
    if (rc == -ESTALE && open_for_writing(fi->flags) && inode_writer_wanted(fs->inodes, path, tid))
        rc = -ENOMEM; /* else the lookup the kernel makes again hands out a writer's node */
    if (rc == 0)
        rc = fs_caller_rights(fs, &caller, path, &info);
    if (rc == 0)
        rc = fs_check_open(fs, &info, fi->flags);
    if (rc == 0 && open_for_writing(fi->flags) &&
        (rc = inode_writer_node(fs->inodes, ino, tid)) == 1)
        rc = -ESTALE; /* the kernel opens the writer's node instead (inode.h) */
    if (rc == 0 && !open_for_writing(fi->flags) && version != INODE_STAGED)
        rc = inode_reader_open(fs->inodes, ino); /* never a writer's node (inode.h) */
    if (rc == 0 && looked_up) {
        read_image(fs, &info, looked_up, f);
        looked_up = NULL;
    } else if (rc == 0) {
        rc = fs_open_file(fs, path, &info, version, fi->flags, f);
    }
    if (looked_up)
        image_put(looked_up);
    free(path);
    if (rc != 0) {
        fs_file_free(fs, f);
        fuse_reply_err(req, -rc);
        return;
    }
    f->ino = ino;
    f->opener = fuse_req_ctx(req)->pid;
    f->fresh = 1;
    holders_add(&f->holders, f->opener);
    fs_hand_out(fs, fi, f);
    if (fuse_reply_open(req, fi) != 0)
        fs_file_free(fs, f); /* the opener is gone: no release will come */
}

static ssize_t read_text(const struct fs_file *f, char *buf, size_t size, uint64_t off)
{
    size_t n = off < f->text_len ? f->text_len - (size_t)off : 0;
    n = n < size ? n : size;
    memcpy(buf, f->text + (off < f->text_len ? off : 0), n);
    return (ssize_t)n;
}

/* Pieces some of which lie in files, by splice where the session has it (libfuse copies them
 * through memory where it has not): a page of a chunk file goes into a pipe by reference, and
 * from there into the reader's page, with no copy into and out of our memory. */
static void reply_spliced(fuse_req_t req, const struct image_pieces *p)
{
    struct fuse_bufvec *bv = calloc(1, sizeof *bv + (p->n_iov - 1) * sizeof bv->buf[0]);
    if (!bv) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    bv->count = p->n_iov;
    for (size_t i = 0; i < p->n_iov; i++) {
        struct fuse_buf *b = &bv->buf[i];
        b->size = p->iov[i].iov_len;
        if (p->fd[i] < 0) {
            b->mem = p->iov[i].iov_base;
        } else {
            b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
            b->fd = p->fd[i];
            b->pos = (off_t)p->fd_off[i];
        }
    }
    fuse_reply_data(req, bv, 0);
    free(bv);
}

/* A read is answered from the cache's bytes, the chunk files and the image's bytes, as they
 * lie: no copy but the kernel's. 1 when it was answered. */
static int reply_from_pieces(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
    struct image_pieces p;
    int rc = off >= 0 ? image_read_pieces(f->img, &f->reader, (uint64_t)off, size, &p) : 0;
    if (rc < 0)
        fuse_reply_err(req, EIO);
    if (rc != 1)
        return rc < 0;
    if (p.n_files)
        reply_spliced(req, &p);
    else
        fuse_reply_iov(req, p.iov, (int)p.n_iov);
    image_pieces_release(&p); /* not f's reader: once answered, the file may be released */
    return 1;
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)ino;
    struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
    f->fresh = 0;
    if (f->img && reply_from_pieces(req, f, size, off))
        return;
    char *buf = malloc(size ? size : 1);
    if (!buf || off < 0) {
        free(buf);
        fuse_reply_err(req, buf ? EINVAL : ENOMEM);
        return;
    }
    ssize_t n = f->stg    ? staging_read(fs_of(req)->staging, f->stg, buf, size, (uint64_t)off)
                : f->text ? read_text(f, buf, size, (uint64_t)off)
                          : image_read(f->img, &f->reader, (uint64_t)off, buf, size);
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    free(buf);
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
              struct fuse_file_info *fi)
{
    (void)ino;
    struct fs *fs = fs_of(req);
    struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
    f->fresh = 0;
    holders_add(&f->holders, fuse_req_ctx(req)->pid); /* direct_io: the writer's own request */
    ssize_t n = !f->stg || (fi->flags & O_ACCMODE) == O_RDONLY ? -EBADF
                : off < 0                                      ? -EINVAL
                                                               : fs_file_reopen(fs, f);
    if (n == 0)
        n = staging_write(fs->staging, f->stg, buf, size, (uint64_t)off);
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_write(req, (size_t)n);
}

/* close() and fsync(): the moment a changed file becomes the domain. A last close (closing)
 * then leaves the path to the bucket before close() returns (fs_file_closed). */
static void reply_commit(fuse_req_t req, struct fuse_file_info *fi, int closing)
{
    struct fs *fs = fs_of(req);
    struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
    f->fresh = 0;
    /* a reader of a file not committed yet shares its staged entry, but only a writer's open
     * commits it: a reader's close must not store what the writer has written so far */
    int rc = f->stg && f->stg_opened ? staging_commit(fs->staging, f->stg) : 0;
    if (closing)
        fs_file_closed(fs, f);
    if (f->stg)
        notifier_drain(fs->notifier); /* a stat right after close() sees the new version */
    fuse_reply_err(req, -rc);
}

/*
 * close(): the last close of a written file commits it, and its error is close()'s. An open
 * file description may have many descriptors (dup, fork: a shell's `(head; tail) > f` hands
 * one to each command), each close a flush; while a process known to use it still has a
 * descriptor open for writing on the inode, this close is not the last: it commits nothing
 * and succeeds, so that no half-written file is ever tried (doc/semantics.md, "Commit at the
 * last close"). The release commits what a close could not see the end of.
 */
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
    if (f->stg) {
        holders_add(&f->holders, fuse_req_ctx(req)->pid);
        struct holders_file file = { fs_of(req)->mnt_id, f->ino };
        if (holders_still_writing(&f->holders, file)) {
            f->fresh = 0;
            fuse_reply_err(req, 0);
            return;
        }
    }
    reply_commit(req, fi, f->stg != NULL);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino, (void)datasync;
    reply_commit(req, fi, 0);
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    fs_file_free(fs_of(req), (struct fs_file *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs st = {
        .f_bsize = FS_BLOCK_SIZE,
        .f_frsize = FS_BLOCK_SIZE,
        .f_namemax = FS_NAME_MAX,
    };
    fuse_reply_statfs(req, &st);
}
