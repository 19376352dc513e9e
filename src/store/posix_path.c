/*
 * posix_path: the posix backend's keys resolved beneath the bucket directory (openat2, or a
 * no-follow walk where it does not exist; see posix.c for why) and its errors turned into the
 * store contract's codes. What posix.c's objects and posix_list.c's listings both stand on:
 * neither calls the other for it, so the listings call nothing of posix.c (tests/meson.build,
 * --one-way).
 */
#include "h5osfs/util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "posix.h"

const struct posix_store *px(const struct store *st)
{
    return (const struct posix_store *)st;
}

const char *px_strerror(int err)
{
    const char *s = strerrordesc_np(err);
    return s ? s : "unknown error";
}

/*
 * Turn errno err from step `what` of operation `op` on key into the store contract's code,
 * logging everything that is a real failure rather than an answer (missing, a directory).
 */
int px_fail(const struct posix_store *ps, const char *op, const char *key, const char *what,
            int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR: /* a middle component is an object: the key does not exist */
        return -ENOENT;
    case EISDIR:
        return -EISDIR;
    case ENAMETOOLONG:
        log_debug("store %s: %s %s: %s: %s", ps->dir, op, key, what, px_strerror(err));
        return -EINVAL;
    case EXDEV: /* openat2 RESOLVE_BENEATH: the path would leave the bucket */
    case ELOOP: /* magic link, symlink loop, or a symlink under the fallback */
        log_warn("store %s: %s %s: refused: %s leads outside the bucket or through a symlink",
                 ps->dir, op, key, what);
        return -ENOENT; /* nothing outside the bucket is an object of it */
    case EACCES:
    case EPERM:
        log_error("store %s: %s %s: %s: %s", ps->dir, op, key, what, px_strerror(err));
        return -EACCES;
    case ENOMEM:
        log_error("store %s: %s %s: %s: %s", ps->dir, op, key, what, px_strerror(err));
        return -ENOMEM;
    case ENOSPC:
    case EDQUOT: /* a full disk is the user's to fix: say so, not just "I/O error" */
        log_error("store %s: %s %s: %s: %s", ps->dir, op, key, what, px_strerror(err));
        return -ENOSPC;
    default:
        log_error("store %s: %s %s: %s: %s", ps->dir, op, key, what, px_strerror(err));
        return -EIO;
    }
}

/* ---- resolving keys beneath the bucket ---------------------------------------------- */

int px_openat2(int root, const char *path, int flags, mode_t mode)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(flags | O_CLOEXEC);
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (int tries = 0;; tries++) {
        long fd = syscall(SYS_openat2, root, path, &how, sizeof how);
        if (fd >= 0)
            return (int)fd;
        /* EAGAIN: a concurrent rename kept the kernel from proving ".." safe; retry. */
        if ((errno != EINTR && errno != EAGAIN) || tries == PX_RETRIES)
            return -errno;
    }
}

int px_sys_openat(int dfd, const char *name, int flags, mode_t mode)
{
    int fd;
    do
        fd = openat(dfd, name, flags | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

/* A no-follow open of name in dfd failed with err: -EXDEV if name is a symlink, else -err. */
static int px_nofollow_err(int dfd, const char *name, int err)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
        return -EXDEV;
    return -err;
}

static int px_walk_step(int dfd, const char *name)
{
    int fd = px_sys_openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
    if (fd == -ELOOP || fd == -ENOTDIR)
        return px_nofollow_err(dfd, name, -fd);
    return fd;
}

static int px_walk_last(int dfd, const char *name, int flags, mode_t mode)
{
    int fd = px_sys_openat(dfd, name, flags | O_NOFOLLOW, mode);
    if (fd == -ELOOP || fd == -ENOTDIR)
        return px_nofollow_err(dfd, name, -fd);
    if (fd < 0 || !(flags & O_PATH))
        return fd;
    /* O_PATH | O_NOFOLLOW opens a symlink itself instead of failing. */
    struct stat sb;
    int err = fstat(fd, &sb) < 0 ? -errno : S_ISLNK(sb.st_mode) ? -EXDEV : 0;
    if (!err)
        return fd;
    close(fd);
    return err;
}

/* The openat2 fallback: one component at a time, never following a symlink. */
static int px_open_walk(int root, const char *path, int flags, mode_t mode)
{
    char name[NAME_MAX + 1];
    int cur = root;
    for (;;) {
        const char *slash = strchr(path, '/');
        size_t n = slash ? (size_t)(slash - path) : strlen(path);
        int fd = -ENAMETOOLONG;
        if (n <= NAME_MAX) {
            memcpy(name, path, n);
            name[n] = '\0';
            fd = slash ? px_walk_step(cur, name) : px_walk_last(cur, name, flags, mode);
        }
        if (cur != root)
            close(cur);
        if (!slash || fd < 0)
            return fd;
        cur = fd;
        path = slash + 1;
    }
}

/* Open path (relative, already checked: no "." / ".." / empty components) beneath the bucket. */
int px_open(const struct posix_store *ps, const char *path, int flags, mode_t mode)
{
    if (ps->have_openat2)
        return px_openat2(ps->root, path, flags, mode);
    return px_open_walk(ps->root, path, flags, mode);
}

/* ---- stat ---------------------------------------------------------------------------- */

void px_fill_stat(const struct stat *sb, struct store_stat *out)
{
    uint64_t ns = (uint64_t)sb->st_mtim.tv_sec * 1000000000u + (uint64_t)sb->st_mtim.tv_nsec;
    uint64_t cns = (uint64_t)sb->st_ctim.tv_sec * 1000000000u + (uint64_t)sb->st_ctim.tv_nsec;
    out->size = (uint64_t)sb->st_size;
    /* Python's float st_mtime (sec + nsec * 1e-9), the time HSDS's POSIX driver lists: the
     * .info.json h5osfs writes holds the very float HSDS's scan would (info.h). */
    out->mtime = (double)sb->st_mtim.tv_sec + (double)sb->st_mtim.tv_nsec * 1e-9;
    snprintf(out->etag, sizeof out->etag, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64,
             (uint64_t)sb->st_ino, (uint64_t)sb->st_size, ns);
    out->ctime_ns = cns;
}
