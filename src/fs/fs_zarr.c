/* fs_zarr: MOUNT/.zarr/<domain path>/..., the read-only Zarr view of every domain (zarr.h),
 * placed in the namespace: reachable by name, never listed at the root, folders below it as
 * the mount's folders, each domain a directory. Reading it needs the right to read the domain
 * (or folder) it shows; nothing may change it (EROFS). */
#include "fs_int.h"

#include "h5osfs/zarr/zarr.h"

#define VIEW_PREFIX "/" ZARR_VIEW_DIR

int fs_is_view_path(const char *path)
{
    size_t n = sizeof VIEW_PREFIX - 1;
    return strncmp(path, VIEW_PREFIX, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* A view path split: the mount's path it shows (a directory or a domain), and for a domain
 * the path inside its Zarr group. */
struct view_path {
    char real[STORE_KEY_MAX + 2]; /* "/" or "/home/u/x.h5" */
    const char *inner;            /* NULL: real is a directory; else "" or "g/x/.zarray" */
    struct ns_info info;          /* real's, for the mount's user */
};

/* Walk down from the root: the first component that is a domain ends the mount's path. */
static int split(struct fs *fs, const char *path, struct view_path *vp)
{
    const char *rest = path + sizeof VIEW_PREFIX - 1;
    size_t used = 0;
    vp->inner = NULL;
    strcpy(vp->real, "/");
    int rc = ns_stat(fs->cfg.ns, "/", &vp->info);
    while (rc == 0 && *rest == '/') {
        const char *name = rest + 1, *slash = strchr(name, '/');
        size_t len = slash ? (size_t)(slash - name) : strlen(name);
        if (len == 0 || used + 1 + len >= sizeof vp->real)
            return -ENOENT;
        vp->real[used] = '/';
        memcpy(vp->real + used + 1, name, len);
        used += 1 + len;
        vp->real[used] = '\0';
        rest = name + len;
        if ((rc = ns_stat(fs->cfg.ns, vp->real, &vp->info)) != 0)
            return rc;
        if (vp->info.kind == NS_BROKEN)
            return -EIO; /* logged when its .domain.json was read */
        if (vp->info.kind == NS_DOMAIN) {
            vp->inner = *rest == '/' ? rest + 1 : rest;
            return 0;
        }
        if (!fs_is_dir_kind(vp->info.kind))
            return -ENOENT;
    }
    return rc;
}

/* Read-only: the right to read what it shows, nothing more. */
static void view_info(const struct view_path *vp, enum ns_kind kind, uint64_t size,
                      struct ns_info *info)
{
    memset(info, 0, sizeof *info);
    info->kind = kind;
    info->rights = vp->info.rights & SCHEMA_ACL_READ;
    info->mtime = vp->info.mtime;
    info->ctime = vp->info.ctime;
    info->size = size;
}

int fs_zarr_stat(struct fs *fs, const char *path, struct ns_info *info)
{
    struct view_path vp;
    enum zarr_kind kind = ZARR_DIR;
    uint64_t size = 0;
    int rc = split(fs, path, &vp);
    if (rc == 0 && vp.inner && *vp.inner) /* a domain's group is a directory: nothing read */
        rc = zarr_stat(fs->zarr, vp.real, vp.info.root, vp.inner, &kind, &size);
    if (rc == 0)
        view_info(&vp, kind == ZARR_DIR ? NS_DIR : NS_VIEW, size, info);
    return rc;
}

int fs_zarr_rights(struct fs *fs, const struct caller *c, const char *path, struct ns_info *info)
{
    struct view_path vp;
    struct ns_info mine;
    int rc = split(fs, path, &vp);
    if (rc == 0 && !caller_is_mounter(c))
        rc = ns_stat_as(fs->cfg.ns, vp.real, caller_user(c), &mine);
    if (rc == 0)
        info->rights = (caller_is_mounter(c) ? vp.info.rights : mine.rights) & SCHEMA_ACL_READ;
    return rc;
}

static int entries_of_dir(struct fs *fs, const struct view_path *vp, struct ns_dir *out)
{
    int rc = ns_readdir(fs->cfg.ns, vp->real, out);
    size_t kept = 0;
    for (size_t i = 0; rc == 0 && i < out->n; i++) {
        struct ns_dirent *e = &out->entries[i];
        if (fs_is_dir_kind(e->info.kind) || e->info.kind == NS_DOMAIN) {
            view_info(vp, NS_DIR, 0, &e->info);
            out->entries[kept++] = *e;
        } else {
            free(e->name); /* a broken domain has no group to show */
        }
    }
    if (rc == 0)
        out->n = kept;
    return rc;
}

static int entries_of_group(struct fs *fs, const struct view_path *vp, struct ns_dir *out)
{
    struct zarr_entry *e;
    size_t n;
    int rc = zarr_list(fs->zarr, vp->real, vp->info.root, vp->inner, &e, &n);
    if (rc != 0)
        return rc;
    out->entries = calloc(n ? n : 1, sizeof *out->entries);
    out->n = 0;
    for (size_t i = 0; out->entries && i < n; i++) {
        out->entries[out->n].name = e[i].name;
        e[i].name = NULL;
        view_info(vp, e[i].kind == ZARR_DIR ? NS_DIR : NS_VIEW, 0, &out->entries[out->n++].info);
    }
    zarr_entries_free(e, n);
    return out->entries ? 0 : -ENOMEM;
}

int fs_zarr_readdir(struct fs *fs, const char *path, struct ns_dir *out)
{
    struct view_path vp;
    int rc = split(fs, path, &vp);
    if (rc != 0)
        return rc;
    return vp.inner ? entries_of_group(fs, &vp, out) : entries_of_dir(fs, &vp, out);
}

int fs_zarr_read(struct fs *fs, const char *path, char **text, size_t *len)
{
    struct view_path vp;
    int rc = split(fs, path, &vp);
    if (rc == 0 && !vp.inner)
        rc = -EISDIR;
    if (rc == 0)
        rc = zarr_read(fs->zarr, vp.real, vp.info.root, vp.inner, (unsigned char **)text, len);
    return rc;
}
