/* fs_change: writes and changes: setattr, create, mkdir, unlink, rmdir, rename. */
#include "fs_int.h"

#include <sys/xattr.h>

/* ---- writes and changes ---- */

/* Device nodes, symlinks and hard links: HSDS has no object that could hold them. */
static void reply_erofs(fuse_req_t req)
{
    fuse_reply_err(req, EROFS);
}

/*
 * A truncate without a handle. When the path has a staged entry, a writer has it open (its
 * last close takes it off the path, staging_close, before close() returns): that writer owns
 * the change, the staged file is truncated and its close commits it. Otherwise (truncate(2) of
 * a domain nobody writes, or whose writers all closed it, released or not) the truncate is a
 * change by itself: staged, committed, and its commit's error is the caller's.
 */
static int truncate_path(struct fs *fs, const char *path, const struct ns_info *info, uint64_t size)
{
    struct staged *s = fs->staging ? staging_find(fs->staging, path) : NULL;
    int rc = fs_check_open(fs, info, O_WRONLY);
    if (s) {
        if (rc == 0)
            rc = staging_truncate(fs->staging, s, size);
        staging_release(fs->staging, s);
        return rc;
    }
    if (rc == 0)
        rc = staging_open(fs->staging, path, info->root[0] ? info->root : NULL, size == 0, &s);
    if (rc != 0)
        return rc;
    rc = staging_truncate(fs->staging, s, size);
    if (rc == 0)
        rc = staging_commit(fs->staging, s);
    staging_close(fs->staging, s);
    staging_release(fs->staging, s);
    return rc;
}

/* Sizes change the staged file; times and modes are accepted and not kept (rights come from
 * ACLs, times from the store); owners cannot change. */
static int set_attributes(struct fs *fs, const char *path, struct ns_info *info, struct fs_file *f,
                          const struct stat *attr, int to_set)
{
    if (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != fs->cfg.uid) ||
        ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != fs->cfg.gid))
        return -EPERM;
    if (!(to_set & FUSE_SET_ATTR_SIZE))
        return 0;
    if (fs->cfg.read_only)
        return -EROFS;
    if (fs_is_dir_kind(info->kind))
        return -EISDIR;
    if (!f || !f->stg)
        return truncate_path(fs, path, info, (uint64_t)attr->st_size);
    int rc = fs_file_reopen(fs, f); /* an ftruncate after the last close: as a write */
    return rc == 0 ? staging_truncate(fs->staging, f->stg, (uint64_t)attr->st_size) : rc;
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
        if (h->dispose == fs_file_dispose && f->ino == ino && f->opener == tid && f->fresh)
            found = f;
    }
    if (found)
        found->fresh = 0;
    pthread_mutex_unlock(&fs->handles_lock);
    /* the handle stays alive: its release cannot come before this open's syscall returns */
    *rc = found && found->stg ? staging_empty(fs->staging, found->stg) : 0;
    return found != NULL;
}

/* The answer is what the kernel is told of ino (fs_kernel_attributes): a writer's truncate of
 * a committed domain changes its staged file, which only the writer's node shows. */
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct fs_file *f = fi ? (struct fs_file *)(uintptr_t)fi->fh : NULL;
    struct ns_info info;
    struct caller caller;
    struct stat st;
    uint64_t version;
    char *path = NULL;
    int rc = 0;
    fs_caller_of(fs, req, &caller);
    if (f || to_set != FUSE_SET_ATTR_SIZE || attr->st_size != 0 ||
        !truncate_of_open(fs, req, ino, &rc)) {
        rc = fs_stat_ino(fs, ino, &path, &info);
        if (rc == 0)
            rc = fs_caller_rights(fs, &caller, path, &info);
        if (rc == 0)
            rc = set_attributes(fs, path, &info, f, attr, to_set);
        free(path);
        path = NULL;
    }
    if (rc == 0)
        rc = fs_kernel_attributes(fs, ino, &path, &version, &info);
    if (rc == 0) {
        fs_fill_stat(fs, ino, &info, &st);
        fuse_reply_attr(req, &st, fs_attr_timeout(fs, version));
    } else {
        fuse_reply_err(req, -rc);
    }
    free(path);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    (void)parent, (void)name, (void)mode, (void)rdev;
    reply_erofs(req);
}

/* The path of name in directory parent (new string) or NULL. */
static char *path_in(struct fs *fs, fuse_ino_t parent, const char *name)
{
    char *dir = inode_path(fs->inodes, parent);
    char *path = dir ? fs_child_path(dir, name) : NULL;
    free(dir);
    return path;
}

static void reply_entry_for(fuse_req_t req, struct fs *fs, const char *path)
{
    struct fuse_entry_param e = { .entry_timeout = fs->cfg.ttl };
    struct ns_info info;
    uint64_t version;
    int rc = fs_resolve(fs, path, &info, &version);
    if (rc == 0)
        rc = inode_lookup(fs->inodes, path, version, &info, &e.ino, &e.generation);
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    fs_fill_stat(fs, e.ino, &info, &e.attr);
    e.attr_timeout = fs_attr_timeout(fs, version);
    if (fuse_reply_entry(req, &e) != 0)
        inode_forget(fs->inodes, e.ino, 1);
}

/* One namespace change on name in parent, as the request's caller: 0 or -errno (stats_errno
 * for the statistics file's name). *path is the caller's to free. */
static int change_at(fuse_req_t req, fuse_ino_t parent, const char *name, int stats_errno,
                     int (*change)(const struct domops *d, const char *user, const char *path),
                     char **path)
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    fs_caller_of(fs, req, &caller);
    *path = fs->cfg.read_only ? NULL : path_in(fs, parent, name);
    return fs->cfg.read_only         ? -EROFS
           : !*path                  ? -ENOMEM
           : fs_is_view_path(*path)  ? -EROFS
           : fs_is_stats_path(*path) ? stats_errno
                                     : change(fs->ops, caller_user(&caller), *path);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    (void)mode; /* rights come from the folder's ACL, not from a mode */
    char *path;
    int rc = change_at(req, parent, name, -EEXIST, domops_mkdir, &path);
    if (rc == 0)
        reply_entry_for(req, fs_of(req), path);
    else
        fuse_reply_err(req, -rc);
    free(path);
}

/* What an unlink or a rename replaces at a path, for staging_unlink (below). */
struct removal {
    struct fs *fs;
    const struct caller *caller;
    const char *from; /* a rename's source; NULL for an unlink */
    unsigned flags;   /* a rename's */
};

/* A file never committed is its creator's to remove (the bucket has nothing of it); a domain
 * is deleted as HSDS would. */
static int unlink_at(void *ctx, const char *path, int fresh)
{
    struct removal *r = ctx;
    if (fresh)
        return fs_creator_rights(r->fs, r->caller, path) & SCHEMA_ACL_DELETE ? 0 : -EACCES;
    return domops_unlink(r->fs->ops, caller_user(r->caller), path);
}

/* A rename onto to: a file never committed there is replaced as if it were a domain. */
static int rename_onto(void *ctx, const char *to, int fresh)
{
    struct removal *r = ctx;
    if (fresh && (r->flags & RENAME_NOREPLACE))
        return -EEXIST;
    if (fresh && !(fs_creator_rights(r->fs, r->caller, to) & SCHEMA_ACL_UPDATE))
        return -EACCES;
    return domops_rename(r->fs->ops, caller_user(r->caller), r->from, to, r->flags);
}

/* A folder is removed as HSDS would. */
static int rmdir_at(void *ctx, const char *path, int fresh)
{
    (void)fresh;
    struct removal *r = ctx;
    return domops_rmdir(r->fs->ops, caller_user(r->caller), path);
}

/* A removal of name in parent through staging (staging_unlink or staging_rmdir, which take
 * the staged files there with it): 0 or -errno; *path the removed path (the caller frees). */
static int remove_at(fuse_req_t req, fuse_ino_t parent, const char *name,
                     int (*staged)(struct staging *t, const char *path,
                                   int (*remove)(void *ctx, const char *path, int fresh),
                                   void *ctx),
                     int (*remove)(void *ctx, const char *path, int fresh), char **path)
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    fs_caller_of(fs, req, &caller);
    struct removal r = { .fs = fs, .caller = &caller };
    *path = fs->cfg.read_only ? NULL : path_in(fs, parent, name);
    return fs->cfg.read_only         ? -EROFS
           : !*path                  ? -ENOMEM
           : fs_is_view_path(*path)  ? -EROFS
           : fs_is_stats_path(*path) ? -EPERM
                                     : staged(fs->staging, *path, remove, &r);
}

/* The files staged below the folder go with it (staging_rmdir): a writer's open file keeps
 * it (ENOTEMPTY), as a listing shows it; no closed writer's release stores into it later. */
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    char *path;
    fuse_reply_err(req, -remove_at(req, parent, name, staging_rmdir, rmdir_at, &path));
    free(path);
}

/* The change staged at path goes with it (staging.h): its bytes are freed now, and its last
 * close commits nothing over what the bucket has now. */
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    char *path;
    int rc = remove_at(req, parent, name, staging_unlink, unlink_at, &path);
    if (rc == 0)
        callers_forget_creator(fs_of(req)->callers, path);
    fuse_reply_err(req, -rc);
    free(path);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    (void)link, (void)parent, (void)name;
    reply_erofs(req);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags)
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    char *from = NULL, *to = NULL;
    int rc = -EROFS;
    fs_caller_of(fs, req, &caller);
    if (!fs->cfg.read_only) {
        from = path_in(fs, parent, name);
        to = path_in(fs, newparent, newname);
        struct removal r = { .fs = fs, .caller = &caller, .from = from, .flags = flags };
        rc = !from || !to                                     ? -ENOMEM
             : fs_is_view_path(from) || fs_is_view_path(to)   ? -EROFS
             : fs_is_stats_path(from) || fs_is_stats_path(to) ? -EPERM
             : strcmp(from, to) == 0 ? domops_rename(fs->ops, caller_user(&caller), from, to, flags)
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

/* Only a version gets a second name (a tag, domops_link); the new name is then looked up. */
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    fs_caller_of(fs, req, &caller);
    char *from = NULL, *to = NULL;
    int rc = -EROFS;
    if (!fs->cfg.read_only) {
        from = inode_path(fs->inodes, ino);
        to = path_in(fs, newparent, newname);
        rc = !from || !to ? -ENOMEM
             : fs_is_view_path(from) || fs_is_view_path(to)
                 ? -EROFS
                 : domops_link(fs->ops, caller_user(&caller), from, to);
    }
    if (rc == 0)
        reply_entry_for(req, fs, to);
    else
        fuse_reply_err(req, -rc);
    free(from);
    free(to);
}

/* A new domain's staged file (the caller's), or an existing domain opened as open(2) says. */
static int create_file(struct fs *fs, const struct caller *c, const char *path, int flags,
                       struct fs_file *f, struct ns_info *info, uint64_t *version)
{
    int rc = fs_resolve(fs, path, info, version);
    if (rc == 0 && (flags & O_EXCL))
        return -EEXIST;
    if (rc == 0) {
        struct ns_info mine = *info; /* info stays what the attributes show */
        rc = fs_caller_rights(fs, c, path, &mine);
        if (rc == 0)
            rc = fs_check_open(fs, &mine, flags);
    }
    if (rc == 0)
        return fs_open_file(fs, path, info, *version, flags, f);
    if (rc != -ENOENT)
        return rc;
    /* names the bucket reserves and the parent's "create" for the caller: refused here */
    rc = domops_may_create(fs->ops, caller_user(c), path);
    struct staged *s = NULL;
    if (rc == 0)
        rc = staging_open(fs->staging, path, NULL, 1, &s);
    f->stg = s;
    f->stg_opened = rc == 0;
    if (rc == 0)
        rc = fs_remember_creator(fs, c, path);
    if (rc == 0) {
        staging_info(f->stg, info);
        *version = INODE_STAGED;
    }
    return rc;
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi)
{
    (void)mode; /* rights come from the folder's ACL, not from a mode */
    struct fs *fs = fs_of(req);
    struct fuse_entry_param e = { .entry_timeout = fs->cfg.ttl };
    struct ns_info info;
    uint64_t version = INODE_NO_VERSION;
    struct fs_file *f = fs_file_new();
    struct caller caller;
    fs_caller_of(fs, req, &caller);
    char *path = f && !fs->cfg.read_only ? path_in(fs, parent, name) : NULL;
    int rc = !f                      ? -ENOMEM
             : fs->cfg.read_only     ? -EROFS
             : !path                 ? -ENOMEM
             : fs_is_view_path(path) ? -EROFS
                                     : 0;
    if (rc == 0)
        rc = create_file(fs, &caller, path, fi->flags, f, &info, &version);
    if (rc == 0 && version != INODE_STAGED) /* an existing domain, opened to be written */
        rc = inode_lookup_writer(fs->inodes, path, version, &info, &e.ino, &e.generation);
    else if (rc == 0)
        rc = inode_lookup(fs->inodes, path, version, &info, &e.ino, &e.generation);
    free(path);
    if (rc != 0) {
        fs_file_free(fs, f);
        fuse_reply_err(req, -rc);
        return;
    }
    fs_fill_stat(fs, e.ino, &info, &e.attr);
    e.attr_timeout = fs_attr_timeout(fs, version);
    f->ino = e.ino;
    holders_add(&f->holders, fuse_req_ctx(req)->pid);
    fs_hand_out(fs, fi, f);
    if (fuse_reply_create(req, &e, fi) != 0) {
        inode_forget(fs->inodes, e.ino, 1);
        fs_file_free(fs, f);
    }
}

static int ingest_is_set(const struct ns_info *info)
{
    return info->ingest != SCHEMA_INGEST_UNSET;
}

static int versions_is_set(const struct ns_info *info)
{
    return info->versions.mode != SCHEMA_VERSIONS_UNSET;
}

/* The path of ino for a change of one of a folder's settings, after the xattr flags' rules:
 * XATTR_CREATE (-EEXIST when set), XATTR_REPLACE (-ENODATA when not). *path to be freed. */
static int setting_target(struct fs *fs, fuse_ino_t ino, int flags,
                          int (*is_set)(const struct ns_info *), char **path)
{
    struct ns_info info;
    *path = NULL;
    int rc = fs->cfg.read_only ? -EROFS : fs_stat_ino(fs, ino, path, &info);
    if (rc == 0 && fs_is_view_path(*path))
        rc = -EROFS;
    if (rc == 0 && info.kind == NS_FOLDER && (flags & XATTR_CREATE) && is_set(&info))
        rc = -EEXIST;
    else if (rc == 0 && info.kind == NS_FOLDER && (flags & XATTR_REPLACE) && !is_set(&info))
        rc = -ENODATA;
    return rc;
}

/* A folder's ingest mode (domops_set_ingest), as the caller. */
static int set_ingest(fuse_req_t req, fuse_ino_t ino, enum schema_ingest mode, int flags)
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    char *path;
    fs_caller_of(fs, req, &caller);
    int rc = setting_target(fs, ino, flags, ingest_is_set, &path);
    if (rc == 0)
        rc = domops_set_ingest(fs->ops, caller_user(&caller), path, mode);
    free(path);
    return rc;
}

/* user.h5osfs.versions, as set_ingest: on, off or keep:N (setting NULL: remove it). */
static int set_versions(fuse_req_t req, fuse_ino_t ino, const struct schema_versions *setting,
                        int flags)
{
    struct fs *fs = fs_of(req);
    struct caller caller;
    char *path;
    fs_caller_of(fs, req, &caller);
    int rc = setting_target(fs, ino, flags, versions_is_set, &path);
    if (rc == 0)
        rc = domops_set_versions(fs->ops, caller_user(&caller), path, setting);
    free(path);
    return rc;
}

/* Extended attributes but a folder's user.h5osfs.ingest and user.h5osfs.versions have no
 * place in HSDS either (the others shown are computed), and EROFS would fail the tools that
 * copy them along: cp -p, cp -a, mv and install (POSIX ACLs), Python's shutil.copy2 and
 * copytree (every attribute listed): they take ENOTSUP to mean "none kept here" and go on. A
 * read-only mount refuses every change with EROFS. */
static void reply_no_xattr(fuse_req_t req)
{
    fuse_reply_err(req, fs_of(req)->cfg.read_only ? EROFS : ENOTSUP);
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                 int flags)
{
    struct schema_versions versions;
    if (strcmp(name, FS_XATTR_VERSIONS) == 0) {
        if (schema_versions_parse(value, size, &versions) != 0)
            fuse_reply_err(req, EINVAL); /* only on, off, keep:N or ref */
        else
            fuse_reply_err(req, -set_versions(req, ino, &versions, flags));
        return;
    }
    enum schema_ingest mode = schema_ingest_parse(value, size);
    if (strcmp(name, FS_XATTR_INGEST) != 0)
        reply_no_xattr(req);
    else if (mode == SCHEMA_INGEST_UNSET)
        fuse_reply_err(req, EINVAL); /* only "link" or "copy" */
    else
        fuse_reply_err(req, -set_ingest(req, ino, mode, flags));
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    if (strcmp(name, FS_XATTR_VERSIONS) == 0)
        fuse_reply_err(req, -set_versions(req, ino, NULL, XATTR_REPLACE));
    else if (strcmp(name, FS_XATTR_INGEST) != 0)
        reply_no_xattr(req);
    else
        fuse_reply_err(req, -set_ingest(req, ino, SCHEMA_INGEST_UNSET, XATTR_REPLACE));
}
