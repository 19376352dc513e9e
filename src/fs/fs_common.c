/* fs_common: what every request uses: stat of paths and inodes, versions, rights. */
#include "fs_int.h"

#include "h5osfs/util/strmap.h"

/* ---- attributes ---- */

/* read -> r for everyone; update or create -> w for the owner; directories x when readable. */
mode_t fs_mode_of(const struct fs *fs, const struct ns_info *info)
{
    mode_t mode = fs_is_dir_kind(info->kind) ? S_IFDIR : S_IFREG;
    if (info->rights & SCHEMA_ACL_READ)
        mode |= fs_is_dir_kind(info->kind) ? 0555 : 0444;
    if (!fs->cfg.read_only && (info->rights & (SCHEMA_ACL_UPDATE | SCHEMA_ACL_CREATE)))
        mode |= 0200;
    return mode;
}

static struct timespec timespec_of(double t)
{
    struct timespec ts = { 0, 0 };
    if (!(t > 0) || t > 1e15)
        return ts; /* absent or absurd timestamps show as the epoch */
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9); /* t > 0: the cast is floor() */
    return ts;
}

void fs_fill_stat(const struct fs *fs, fuse_ino_t ino, const struct ns_info *info, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_mode = fs_mode_of(fs, info);
    st->st_nlink = fs_is_dir_kind(info->kind) ? 2 : 1;
    st->st_uid = fs->cfg.uid;
    st->st_gid = fs->cfg.gid;
    st->st_size = fs_is_dir_kind(info->kind) ? 0 : (off_t)info->size;
    st->st_blksize = fs_is_dir_kind(info->kind) ? FS_BLOCK_SIZE : FS_IO_SIZE;
    st->st_blocks = (blkcnt_t)((info->size + 511) / 512);
    st->st_mtim = timespec_of(info->mtime);
    st->st_atim = st->st_mtim;
    st->st_ctim = timespec_of(info->ctime);
}

/* ---- helpers that every request uses ---- */

/* The statistics file is one name at the root, whatever the bucket holds. */
int fs_is_stats_path(const char *path)
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

/* Namespace answer for path as it is now; a file being written for the first time is its
 * staged file. A domain's size is not known here (see fs_resolve). */
static int stat_staged(struct fs *fs, const char *path, struct ns_info *info, int *staged)
{
    if (fs_is_stats_path(path)) {
        *staged = 0;
        stats_info(fs, info);
        return 0;
    }
    if (fs_is_view_path(path)) {
        *staged = 0;
        return fs_zarr_stat(fs, path, info);
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
 * *version as inode.h says. A domain whose file cannot be built shows as broken. *out (when
 * out is not NULL) gets that version's image (a reference), NULL for anything else.
 */
int fs_is_recorded_version(uint64_t version)
{
    return version != INODE_STAGED && (version & FS_RECORDED_VERSION) != 0;
}

/* FS_RECORDED_VERSION and 62 bits of FNV-1a of the root id: one number per version root, so
 * that a name given to another version later is another node. */
static uint64_t recorded_version(const char *root)
{
    return FS_RECORDED_VERSION | (strmap_hash(root) & (FS_RECORDED_VERSION - 1));
}

int fs_size_is_recorded(struct fs *fs, const struct ns_info *info)
{
    char stamp[IMAGE_STAMP_BUF];
    if (info->version == 0 || info->size == 0 || !info->size_stamp[0])
        return 0;
    image_table_stamp(fs->images, stamp);
    return strcmp(stamp, info->size_stamp) == 0;
}

int fs_resolve_image(struct fs *fs, const char *path, struct ns_info *info, uint64_t *version,
                     struct image **out)
{
    int staged;
    if (out)
        *out = NULL;
    int rc = stat_staged(fs, path, info, &staged);
    *version = staged ? INODE_STAGED : INODE_NO_VERSION;
    if (rc != 0 || staged || info->kind != NS_DOMAIN)
        return rc;
    if (fs_size_is_recorded(fs, info)) {
        *version = recorded_version(info->root);
        return 0;
    }
    struct image *img;
    int reused;
    rc = image_table_get(fs->images, path, info->root, &img, &reused);
    if (rc == -ENOMEM)
        return rc;
    if (rc != 0) {
        info->kind = NS_BROKEN; /* logged by the build; opens fail with EIO */
        info->size = 0;
        return 0;
    }
    info->size = image_size(img);
    *version = image_serial(img);
    if (out)
        *out = img;
    else
        image_put(img);
    return 0;
}

int fs_resolve(struct fs *fs, const char *path, struct ns_info *info, uint64_t *version)
{
    return fs_resolve_image(fs, path, info, version, NULL);
}

/* A version's attributes never change, so the kernel may keep them (and the version's pages)
 * as long as it likes; only rights may change, hence the ttl. A staged file grows. */
double fs_attr_timeout(const struct fs *fs, uint64_t version)
{
    return version == INODE_STAGED ? 0 : fs->cfg.ttl;
}

/* Path and namespace answer for ino; 0 or -errno. *path is the caller's to free. */
int fs_stat_ino(struct fs *fs, fuse_ino_t ino, char **path, struct ns_info *info)
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
int fs_version_attributes(struct fs *fs, fuse_ino_t ino, char **path, uint64_t *version,
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
        } else if ((rc = fs_resolve(fs, *path, info, version)) == 0) {
            inode_settle(fs->inodes, ino, *version, info);
        }
    }
    if (rc != 0) {
        free(*path);
        *path = NULL;
    }
    return rc;
}

int fs_kernel_attributes(struct fs *fs, fuse_ino_t ino, char **path, uint64_t *version,
                         struct ns_info *info)
{
    int rc = fs_version_attributes(fs, ino, path, version, info);
    if (rc != 0 || *version == INODE_STAGED || !inode_is_writers(fs->inodes, ino))
        return rc;
    *version = INODE_STAGED; /* the kernel keeps nothing: the staged file changes */
    struct staged *s = fs->staging ? staging_find(fs->staging, *path) : NULL;
    if (!s)
        return 0; /* its writers are done: the version it was opened on */
    struct ns_info staged;
    int known = staging_size_known(s);
    staging_info(s, &staged);
    staging_release(fs->staging, s);
    if (!known)
        return 0; /* an r+ not staged yet: the version's size is the file's */
    info->size = staged.size;
    info->mtime = staged.mtime;
    info->ctime = staged.ctime;
    return 0;
}

/* ---- rights: each request's caller's (doc/design.md, "Rights") ---- */

void fs_caller_of(struct fs *fs, fuse_req_t req, struct caller *c)
{
    callers_identify(fs->callers, fuse_req_ctx(req)->uid, c);
}

/* A file not committed yet has no ACL: it is its creator's alone (the mount's user when the
 * creator is not known: a file staged before this daemon started). */
unsigned fs_creator_rights(struct fs *fs, const struct caller *c, const char *path)
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
 * info (path's, as stat_path or fs_resolve answered) gets the caller's rights. Attributes show
 * the mounting user's (the kernel keeps one st_mode per inode for every caller); what a caller
 * may do is decided here, for its HSDS name, from the same ACL.
 */
int fs_caller_rights(struct fs *fs, const struct caller *c, const char *path, struct ns_info *info)
{
    if (fs_is_view_path(path))
        return fs_zarr_rights(fs, c, path, info);
    if (is_new_staged(fs, path)) {
        info->rights = fs_creator_rights(fs, c, path);
        return 0;
    }
    if (caller_is_mounter(c) || info->kind == NS_STATS)
        return 0; /* ns answered for the mount's user */
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

int fs_remember_creator(struct fs *fs, const struct caller *c, const char *path)
{
    if (!caller_user(c))
        return -EACCES; /* no name, no create right: domops_may_create refused it */
    int rc = callers_set_creator(fs->callers, path, caller_user(c));
    if (rc == 1)
        callers_prune_creators(fs->callers, staged_is_live, fs);
    return rc < 0 ? rc : 0;
}

char *fs_child_path(const char *parent, const char *name)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, name) < 0)
        return NULL;
    return path;
}
