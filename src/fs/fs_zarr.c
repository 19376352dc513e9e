/* fs_zarr: the read-only views of every domain (zarr.h), placed in the namespace: reachable
 * by name, never listed at the root, folders below them as the mount's folders.
 *
 *   MOUNT/.zarr/<domain path>/...      the domain's Zarr v2 group, a directory
 *   MOUNT/.kerchunk/<domain path>.json its kerchunk references (size 0 for stat: the text is
 *                                      made at open, and read directly)
 *
 * Reading them needs the right to read the domain (or folder) they show; nothing may change
 * them (EROFS). */
#include "fs_int.h"

#include "h5osfs/zarr/zarr.h"

#define VIEW_PREFIX "/" ZARR_VIEW_DIR
#define REFS_PREFIX "/" ZARR_REFS_DIR
#define REFS_SUFFIX ".json"

static int has_prefix(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int is_refs_path(const char *path)
{
    return has_prefix(path, REFS_PREFIX);
}

int fs_is_view_path(const char *path)
{
    return has_prefix(path, VIEW_PREFIX) || is_refs_path(path);
}

/* A view path split: the mount's path it shows (a directory or a domain), and for a domain
 * the path inside its Zarr group. */
struct view_path {
    char real[STORE_KEY_MAX + 2]; /* "/" or "/home/u/x.h5" */
    const char *inner;            /* NULL: real is a directory; else "" or "g/x/.zarray" */
    int refs;                     /* a .kerchunk path (inner "": the domain's references) */
    struct ns_info info;          /* real's, for the mount's user */
};

/* real + "/" + name[0, len) into real; -ENOENT when too long. */
static int append(struct view_path *vp, size_t *used, const char *name, size_t len)
{
    if (len == 0 || *used + 1 + len >= sizeof vp->real)
        return -ENOENT;
    vp->real[*used] = '/';
    memcpy(vp->real + *used + 1, name, len);
    *used += 1 + len;
    vp->real[*used] = '\0';
    return 0;
}

/* In .kerchunk, the last name "NAME.json" is domain NAME's references. */
static int refs_file(struct fs *fs, struct view_path *vp, size_t used, const char *name, size_t len)
{
    size_t suffix = sizeof REFS_SUFFIX - 1;
    int rc = len > suffix && strncmp(name + len - suffix, REFS_SUFFIX, suffix) == 0
                 ? append(vp, &used, name, len - suffix)
                 : -ENOENT;
    if (rc == 0)
        rc = ns_stat(fs->cfg.ns, vp->real, &vp->info);
    if (rc == 0 && vp->info.kind == NS_BROKEN)
        rc = -EIO;
    if (rc == 0 && vp->info.kind != NS_DOMAIN)
        rc = -ENOENT;
    if (rc == 0)
        vp->inner = "";
    return rc;
}

/* Walk down from the root: the first component that is a domain ends the mount's path. */
static int split(struct fs *fs, const char *path, struct view_path *vp)
{
    vp->refs = is_refs_path(path);
    const char *rest = path + (vp->refs ? sizeof REFS_PREFIX : sizeof VIEW_PREFIX) - 1;
    size_t used = 0;
    vp->inner = NULL;
    strcpy(vp->real, "/");
    int rc = ns_stat(fs->cfg.ns, "/", &vp->info);
    if (rc == 0 && vp->refs && !fs->cfg.refs_base)
        return -ENOENT;
    while (rc == 0 && *rest == '/') {
        const char *name = rest + 1, *slash = strchr(name, '/');
        size_t len = slash ? (size_t)(slash - name) : strlen(name), before = used;
        if ((rc = append(vp, &used, name, len)) != 0)
            return rc;
        rest = name + len;
        rc = ns_stat(fs->cfg.ns, vp->real, &vp->info);
        if (rc == 0 && vp->info.kind == NS_BROKEN)
            return -EIO; /* logged when its .domain.json was read */
        if (rc == 0 && fs_is_dir_kind(vp->info.kind))
            continue;
        if (vp->refs)
            return *rest ? -ENOENT : refs_file(fs, vp, before, name, len);
        if (rc == 0 && vp->info.kind == NS_DOMAIN) {
            vp->inner = *rest == '/' ? rest + 1 : rest;
            /* what a domain holds is read only for those who may read it: its group is
             * there for all (as its .h5 file), nothing below it is looked up otherwise */
            return *vp->inner && !(vp->info.rights & SCHEMA_ACL_READ) ? -EACCES : 0;
        }
        return rc != 0 ? rc : -ENOENT;
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
    if (rc == 0 && vp.refs && vp.inner)
        kind = ZARR_FILE;
    else if (rc == 0 && vp.inner && *vp.inner) /* a domain's group is a directory: not read */
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
        char *json = NULL;
        if (fs_is_dir_kind(e->info.kind) || (e->info.kind == NS_DOMAIN && !vp->refs)) {
            view_info(vp, NS_DIR, 0, &e->info);
            out->entries[kept++] = *e;
        } else if (e->info.kind == NS_DOMAIN && asprintf(&json, "%s" REFS_SUFFIX, e->name) > 0) {
            free(e->name);
            e->name = json;
            view_info(vp, NS_VIEW, 0, &e->info);
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
    if (rc == 0 && vp.refs)
        return zarr_refs(fs->zarr, vp.real, vp.info.root, fs->cfg.refs_base, text, len);
    if (rc == 0)
        rc = zarr_read(fs->zarr, vp.real, vp.info.root, vp.inner, (unsigned char **)text, len);
    return rc;
}
