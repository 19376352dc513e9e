/* fs_dir: lookup, getattr, access, directories and the read-only extended attributes. */
#include "fs_int.h"

#include "h5osfs/util/grow.h"

/* ---- lookup and attributes ---- */

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_of(req);
    struct fuse_entry_param e = { .attr_timeout = fs->cfg.ttl, .entry_timeout = fs->cfg.ttl };
    struct ns_info info;
    struct image *img = NULL;
    uint64_t version;
    char *dir = inode_path(fs->inodes, parent);
    char *path = dir ? fs_child_path(dir, name) : NULL;
    int rc = path ? fs_resolve_image(fs, path, &info, &version, &img) : -ENOMEM;
    if (rc == 0) /* a writer's second lookup gets a node of its own (inode.h) */
        rc = inode_lookup_by(fs->inodes, path, version, &info, fuse_req_ctx(req)->pid, &e.ino,
                             &e.generation);
    if (rc == 0 && img)
        recent_add(fs->recent, img); /* the open that follows gets this version */
    if (img)
        image_put(img);
    if (rc == 0) {
        fs_fill_stat(fs, e.ino, &info, &e.attr);
        e.attr_timeout = fs_attr_timeout(fs, version);
        if (fuse_reply_entry(req, &e) != 0)
            inode_forget(fs->inodes, e.ino, 1);
    } else if (rc == -ENOENT) {
        e.ino = 0; /* a negative entry: the kernel remembers the absence for ttl */
        fuse_reply_entry(req, &e);
    } else {
        fuse_reply_err(req, -rc);
    }
    free(path);
    free(dir);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    inode_forget(fs_of(req)->inodes, ino, nlookup);
    fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct fs *fs = fs_of(req);
    for (size_t i = 0; i < count; i++)
        inode_forget(fs->inodes, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi; /* every handle of ino reads ino's version */
    struct fs *fs = fs_of(req);
    struct ns_info info;
    struct stat st;
    uint64_t version;
    char *path = NULL;
    int rc = fs_kernel_attributes(fs, ino, &path, &version, &info);
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    fs_fill_stat(fs, ino, &info, &st);
    fuse_reply_attr(req, &st, fs_attr_timeout(fs, version));
    free(path);
}

/* ino's path and attributes with the request's caller's rights; *path is the caller's to free
 * on success only. */
static int stat_for_caller(struct fs *fs, fuse_req_t req, fuse_ino_t ino, char **path,
                           struct ns_info *info)
{
    struct caller caller;
    fs_caller_of(fs, req, &caller);
    int rc = fs_stat_ino(fs, ino, path, info);
    if (rc == 0 && (rc = fs_caller_rights(fs, &caller, *path, info)) != 0)
        free(*path);
    return rc;
}

void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct fs *fs = fs_of(req);
    struct ns_info info;
    char *path;
    int rc = stat_for_caller(fs, req, ino, &path, &info);
    if (rc == 0) {
        free(path);
        mode_t mode = fs_mode_of(fs, &info);
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
    size_t n = 0, cap = dir->n; /* ns hands the entries over exactly sized */
    int rc = staging_children(fs->staging, path, &names, &n);
    for (size_t i = 0; i < n; i++) {
        struct ns_dirent *bigger = NULL;
        if (rc == 0 && !has_entry(dir, names[i]) &&
            (bigger = grow_array(dir->entries, &cap, dir->n + 1, sizeof *bigger, 8))) {
            dir->entries = bigger;
            dir->entries[dir->n] =
                (struct ns_dirent){ .name = names[i], .info = { .kind = NS_DOMAIN } };
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
        if (dir->entries[i].info.kind != NS_DOMAIN ||
            fs_size_is_recorded(fs, &dir->entries[i].info))
            continue; /* a version whose size is recorded: its stat builds nothing */
        if (!(paths[n] = fs_child_path(path, dir->entries[i].name)))
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

void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct ns_info info;
    char *path;
    int rc = stat_for_caller(fs, req, ino, &path, &info);
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct fs_dir_handle *h = NULL;
    if (!fs_is_dir_kind(info.kind))
        rc = -ENOTDIR;
    else if (!(info.rights & SCHEMA_ACL_READ))
        rc = -EACCES;
    else if (!(h = calloc(1, sizeof *h)))
        rc = -ENOMEM;
    else if (fs_is_view_path(path))
        rc = fs_zarr_readdir(fs, path, &h->dir);
    else
        rc = ns_readdir(fs->cfg.ns, path, &h->dir);
    if (rc == 0 && !fs_is_view_path(path))
        warm_folder(fs, path, &h->dir);
    if (rc == 0 && fs->staging && !fs_is_view_path(path))
        rc = add_staged_children(fs, path, &h->dir);
    free(path);
    if (rc != 0) {
        free(h);
        fuse_reply_err(req, -rc);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)h;
    fs_handle_track(fs, &h->link, dir_handle_dispose);
    if (fuse_reply_open(req, fi) != 0) {
        fs_handle_untrack(fs, &h->link); /* the opener is gone: no releasedir will come */
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
    *type = e->info.unread                 ? 0
            : fs_is_dir_kind(e->info.kind) ? S_IFDIR
                                           : S_IFREG; /* 0: DT_UNKNOWN */
    return e->name;
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
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

void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct fs *fs = fs_of(req);
    struct fs_dir_handle *h = (struct fs_dir_handle *)(uintptr_t)fi->fh;
    fs_handle_untrack(fs, &h->link);
    dir_handle_dispose(fs, &h->link);
    fuse_reply_err(req, 0);
}

/* ---- extended attributes: the domain's root id and owner (read-only), a folder's ingest
 * mode (set in fs_change.c) ---- */

#define XATTR_TEXT_MAX 32 /* a version number or a versions setting, as text */

static int xattr_value(const struct ns_info *info, const char *name, const char **value,
                       char versions[XATTR_TEXT_MAX])
{
    if (strcmp(name, FS_XATTR_ROOT) == 0 && info->kind == NS_DOMAIN)
        *value = info->root;
    else if (strcmp(name, FS_XATTR_OWNER) == 0 &&
             (info->kind == NS_DOMAIN || info->kind == NS_FOLDER))
        *value = info->owner;
    else if (strcmp(name, FS_XATTR_INGEST) == 0 && info->kind == NS_FOLDER &&
             info->ingest != SCHEMA_INGEST_UNSET)
        *value = schema_ingest_name(info->ingest);
    else if (strcmp(name, FS_XATTR_VERSION) == 0 && info->version > 0 &&
             snprintf(versions, XATTR_TEXT_MAX, "%llu", (unsigned long long)info->version) > 0)
        *value = versions;
    else if (strcmp(name, FS_XATTR_COMMITTER) == 0 && info->version > 0)
        *value = info->committer;
    else if (strcmp(name, FS_XATTR_VERSIONS) == 0 && info->kind == NS_FOLDER &&
             schema_versions_text(&info->versions, versions, XATTR_TEXT_MAX) == 0)
        *value = versions;
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
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    struct fs *fs = fs_of(req);
    struct ns_info info;
    struct caller caller;
    const char *value = NULL;
    char versions[XATTR_TEXT_MAX];
    char *path;
    fs_caller_of(fs, req, &caller);
    int rc = fs_stat_ino(fs, ino, &path, &info);
    if (rc == 0) {
        rc = xattr_value(&info, name, &value, versions);
        if (rc == 0)
            rc = fs_caller_rights(fs, &caller, path, &info);
        if (rc == 0 && !(info.rights & SCHEMA_ACL_READ))
            rc = -EACCES;
        free(path);
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
    else
        reply_sized(req, value, strlen(value), size);
}

/* The names of the xattrs ino has, NUL-separated, into buf; returns their length. */
static size_t xattr_names(const struct ns_info *info, char *buf)
{
    static const char names_domain[] = FS_XATTR_ROOT "\0" FS_XATTR_OWNER;
    static const char names_version[] =
        FS_XATTR_ROOT "\0" FS_XATTR_OWNER "\0" FS_XATTR_VERSION "\0" FS_XATTR_COMMITTER;
    size_t len = 0;
    if (info->kind == NS_DOMAIN && info->version > 0) {
        memcpy(buf, names_version, sizeof names_version);
        return sizeof names_version;
    }
    if (info->kind == NS_DOMAIN) {
        memcpy(buf, names_domain, sizeof names_domain);
        return sizeof names_domain;
    }
    if (info->kind != NS_FOLDER)
        return 0;
    memcpy(buf, FS_XATTR_OWNER, sizeof FS_XATTR_OWNER);
    len = sizeof FS_XATTR_OWNER;
    if (info->ingest != SCHEMA_INGEST_UNSET) {
        memcpy(buf + len, FS_XATTR_INGEST, sizeof FS_XATTR_INGEST);
        len += sizeof FS_XATTR_INGEST;
    }
    if (info->versions.mode != SCHEMA_VERSIONS_UNSET) {
        memcpy(buf + len, FS_XATTR_VERSIONS, sizeof FS_XATTR_VERSIONS);
        len += sizeof FS_XATTR_VERSIONS;
    }
    return len;
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    char names[sizeof FS_XATTR_ROOT + sizeof FS_XATTR_OWNER + sizeof FS_XATTR_VERSION +
               sizeof FS_XATTR_COMMITTER + sizeof FS_XATTR_INGEST + sizeof FS_XATTR_VERSIONS];
    struct fs *fs = fs_of(req);
    struct ns_info info;
    char *path;
    int rc = fs_stat_ino(fs, ino, &path, &info);
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    free(path);
    reply_sized(req, names, xattr_names(&info, names), size);
}
