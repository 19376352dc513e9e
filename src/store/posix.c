/*
 * posix: a local directory as a bucket, laid out as HSDS's own POSIX driver does (spec §2.5):
 * key a/b/c is the file <dir>/a/b/c, intermediate directories are created on put and the
 * directories a delete empties are removed (never the bucket itself).
 *
 * Confinement. The bucket is opened once as an O_PATH directory fd and every key is resolved
 * relative to it with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so neither ".." nor a
 * symlink (absolute or relative) can lead outside the bucket; such keys do not exist (-ENOENT,
 * with a warning in the log).
 * Where openat2 does not exist (kernels before 5.6, valgrind) keys are walked one component at
 * a time with O_NOFOLLOW instead, which is stricter: every symlink is refused, even one that
 * stays inside the bucket. Listings never follow symlinks and skip them.
 *
 * Atomic put: the object is written to ".h5osfs-tmp.<random>" in the target directory, fsynced
 * and renamed over the final name, then the directory is fsynced. Such temporary names are
 * never listed and may not be used as keys. A lazy put skips both fsyncs (the rename alone
 * keeps it atomic); a new put (a key nobody reads yet) writes the final name directly, which
 * spares the rename's directory lock that parallel puts into one dataset's directory contend
 * for; sync is one syncfs of the bucket's filesystem. A conditional put (put_if) checks the
 * etag and renames (or, to create, links) under an flock of the object's directory, which
 * every put_if on that directory, from any process, takes too.
 *
 * The etag is a change token, not HSDS's MD5 of the content: hex of (inode, size, mtime in ns).
 * Every put renames a new inode into place, so a rewrite changes it; computing it costs one
 * stat instead of reading the whole object. The ctime goes beside it (store_stat.ctime_ns), not
 * into it: it tells writers that rewrite a file in place (same inode, same size) and set its
 * mtime back (touch -r, os.utime), since nobody can set a ctime back, but it also changes when
 * a hard link to the file is made or removed, which the store's copies between roots and the
 * collection of old roots do all the time. Readers take it as a reason to read again (a
 * re-read); a commit's check that nobody else wrote a chunk compares the etag alone, so that
 * the collection of an old root never fails a writer's commit.
 *
 * No mutable state is shared: the struct is written once by store_posix_open, so any number
 * of threads may use one store.
 */
#include "h5osfs/util/bigbuf.h"
#include "h5osfs/util/log.h"
#include "h5osfs/store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posix.h"

/* The last component of key is one of our temporary names (which no key may use). */
static int px_reserved(const char *key)
{
    const char *slash = strrchr(key, '/');
    const char *name = slash ? slash + 1 : key;
    return strncmp(name, PX_TMP_PREFIX, PX_TMP_PREFIX_LEN) == 0;
}

/* ---- get / head ---------------------------------------------------------------------- */

static int px_check_regular(const struct stat *sb)
{
    if (S_ISDIR(sb->st_mode))
        return -EISDIR;
    return S_ISREG(sb->st_mode) ? 0 : -ENOENT; /* fifos, sockets, devices: no object */
}

/* Read n bytes at off into a new buffer (one NUL after the data); short at end of file. */
static int px_read(const struct posix_store *ps, const char *key, int fd, uint64_t off, size_t n,
                   struct store_buf *out)
{
    size_t cap;
    unsigned char *buf = bigbuf_alloc(n + 1, &cap);
    if (!buf)
        return px_fail(ps, "get", key, "allocate", ENOMEM);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int err = errno;
            free(buf);
            return px_fail(ps, "get", key, "read", err);
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    out->data = buf;
    out->len = got;
    out->cap = cap;
    return 0;
}

static int px_get_fd(const struct posix_store *ps, const char *key, int fd, uint64_t off,
                     uint64_t len, size_t max, struct store_buf *out)
{
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return px_fail(ps, "get", key, "fstat", errno);
    int err = px_check_regular(&sb);
    if (err)
        return err;
    uint64_t size = (uint64_t)sb.st_size;
    uint64_t n = off < size ? size - off : 0;
    if (len < n)
        n = len;
    if (n > max || n >= SIZE_MAX)
        return -EFBIG;
    int rc = px_read(ps, key, fd, off, (size_t)n, out);
    if (rc == 0) {
        struct store_stat st;
        px_fill_stat(&sb, &st);
        memcpy(out->etag, st.etag, sizeof out->etag);
    }
    return rc;
}

static int px_get(struct store *st, const char *key, uint64_t off, uint64_t len, size_t max,
                  struct store_buf *out)
{
    const struct posix_store *ps = px(st);
    if (px_reserved(key))
        return -EINVAL;
    /* O_NONBLOCK: opening a fifo someone left in the bucket must not hang. */
    int fd = px_open(ps, key, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0)
        return px_fail(ps, "get", key, "open", -fd);
    int err = px_get_fd(ps, key, fd, off, len, max, out);
    close(fd);
    return err;
}

static int px_open_object(struct store *st, const char *key, int *fd, struct store_stat *out)
{
    const struct posix_store *ps = px(st);
    if (px_reserved(key))
        return -EINVAL;
    int f = px_open(ps, key, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    if (f < 0)
        return px_fail(ps, "get", key, "open", -f);
    struct stat sb;
    int err = fstat(f, &sb) < 0 ? px_fail(ps, "get", key, "fstat", errno) : px_check_regular(&sb);
    if (err) {
        close(f);
        return err;
    }
    *fd = f;
    px_fill_stat(&sb, out);
    return 0;
}

static int px_head(struct store *st, const char *key, struct store_stat *out)
{
    const struct posix_store *ps = px(st);
    if (px_reserved(key))
        return -EINVAL;
    int fd = px_open(ps, key, O_PATH, 0);
    if (fd < 0)
        return px_fail(ps, "head", key, "open", -fd);
    struct stat sb;
    int err = fstat(fd, &sb) < 0 ? px_fail(ps, "head", key, "fstat", errno) : px_check_regular(&sb);
    if (!err)
        px_fill_stat(&sb, out);
    close(fd);
    return err;
}

#define PX_WRITE_BEHIND_MIN (256u << 10)

/* ---- put ------------------------------------------------------------------------------- */

struct px_put {
    const struct posix_store *ps;
    const char *key;
    const void *data;
    size_t len;
    int lazy;   /* no fsync: durable at the next px_sync */
    int direct; /* no temporary name either: nobody reads the key yet */
    int src_fd; /* >= 0: the bytes are len bytes of this file at src_off */
    uint64_t src_off;
    int link_fd;         /* >= 0: the object is a hard link to this file (src_fd too) */
    int *linked;         /* non-NULL: set to 1 when the hard link was made */
    int conditional;     /* put_if: replace only an object whose etag is if_etag */
    const char *if_etag; /* NULL (conditional): create only, where no object is */
    const char *what;    /* the step that failed, for the log line */
};

/* Create and open (O_RDONLY) directory path one level at a time beneath the bucket. */
static int px_mkdirs(struct px_put *p, char *path)
{
    int parent = p->ps->root;
    for (char *name = path;;) {
        char *slash = strchr(name, '/');
        int fd;
        if (slash)
            *slash = '\0';
        /* mkdirat never follows a symlink in its last component; parent is beneath root. */
        if (mkdirat(parent, name, PX_DIR_MODE) < 0 && errno != EEXIST) {
            p->what = "mkdir";
            fd = -errno;
        } else {
            p->what = "open directory";
            fd = px_open(p->ps, path, O_RDONLY | O_DIRECTORY, 0);
        }
        if (slash)
            *slash = '/';
        if (parent != p->ps->root)
            close(parent);
        if (fd < 0 || !slash)
            return fd;
        parent = fd;
        name = slash + 1;
    }
}

/* The directory that will hold the object (dir NULL: the bucket itself, never created). */
static int px_open_parent(struct px_put *p, char *dir)
{
    p->what = "open directory";
    int fd = px_open(p->ps, dir ? dir : ".", O_RDONLY | O_DIRECTORY, 0);
    if (fd != -ENOENT || !dir)
        return fd;
    return px_mkdirs(p, dir);
}

static int px_random(uint64_t *r)
{
    ssize_t n;
    do
        n = getrandom(r, sizeof *r, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return n == (ssize_t)sizeof *r ? 0 : -EIO;
}

static int px_tmp_create(struct px_put *p, int dfd, char *tmp)
{
    for (int tries = 0; tries < PX_RETRIES; tries++) {
        uint64_t r;
        p->what = "random temporary name";
        int fd = px_random(&r);
        if (fd < 0)
            return fd;
        snprintf(tmp, PX_TMP_LEN + 1, PX_TMP_PREFIX "%016" PRIx64, r);
        p->what = "create temporary file";
        fd = px_sys_openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, PX_FILE_MODE);
        if (fd != -EEXIST)
            return fd;
    }
    return -EEXIST;
}

static int px_write_all(int fd, const unsigned char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -EIO;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Write, fsync and close the temporary file fd; 0 or -errno with p->what set. */
static int px_tmp_fill(struct px_put *p, int fd)
{
    p->what = "write";
    int err = px_write_all(fd, p->data, p->len);
    if (!err && !p->lazy && fsync(fd) < 0) {
        p->what = "fsync";
        err = -errno;
    }
    if (close(fd) < 0 && !err) {
        p->what = "close";
        err = -errno;
    }
    return err;
}

/* The bytes of p's source file into fd, copied in the kernel where it can. */
static int px_copy_range(struct px_put *p, int fd)
{
    off_t in = (off_t)p->src_off;
    size_t left = p->len;
    p->what = "copy";
    while (left > 0) {
        ssize_t n = copy_file_range(p->src_fd, &in, fd, NULL, left, 0);
        if (n < 0 &&
            (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) &&
            left == p->len)
            break; /* not between these files: read and write instead */
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        left -= (size_t)n;
    }
    if (left == 0)
        return 0;
    unsigned char buf[1 << 16];
    while (left > 0) {
        ssize_t n = pread(p->src_fd, buf, left < sizeof buf ? left : sizeof buf, in);
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        int err = px_write_all(fd, buf, (size_t)n);
        if (err)
            return err;
        in += n;
        left -= (size_t)n;
    }
    return 0;
}

/* The object as a hard link to p's link_fd (through /proc, so no capability is needed): 0,
 * 1 when links cannot be made here (another file system, a link limit), or -errno. */
static int px_link(struct px_put *p, int dfd, const char *base)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", p->link_fd);
    p->what = "link";
    for (int tries = 0; tries < 2; tries++) {
        if (linkat(AT_FDCWD, proc, dfd, base, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        if (errno != EEXIST || unlinkat(dfd, base, 0) < 0)
            break; /* EEXIST: a copy left by an interrupted commit */
    }
    int err = errno;
    if (err == EXDEV || err == EMLINK || err == EPERM || err == ENOENT || err == EOPNOTSUPP)
        return 1;
    return -err;
}

/* A lazy put's bytes are durable at the next sync (a commit's, before the swap): a big object
 * is sent to the disk now, so that the disk works while the commit puts the next ones and
 * the sync finds it written. Only a hint; small objects are left to the kernel's batching. */
static void px_write_behind(int fd, size_t len)
{
    if (len >= PX_WRITE_BEHIND_MIN)
        (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* A key nobody reads yet: written where it goes; a failure removes what was written. */
static int px_put_direct(struct px_put *p, int dfd, const char *base)
{
    int linked = p->link_fd >= 0 ? px_link(p, dfd, base) : 1;
    if (linked == 0 && p->linked)
        *p->linked = 1;
    if (linked <= 0)
        return linked;
    p->what = "create";
    /* never O_TRUNC: a file left there may be a hard link to another version's object */
    int fd = px_sys_openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, PX_FILE_MODE);
    if (fd == -EEXIST && unlinkat(dfd, base, 0) == 0)
        fd = px_sys_openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, PX_FILE_MODE);
    if (fd < 0)
        return fd;
    int err = p->src_fd >= 0 ? px_copy_range(p, fd) : 0;
    if (!err && p->src_fd >= 0)
        px_write_behind(fd, p->len);
    if (err) {
        close(fd);
    } else if (p->src_fd >= 0) {
        p->what = "close";
        err = close(fd) < 0 ? -errno : 0;
    } else {
        err = px_tmp_fill(p, fd);
    }
    if (err && unlinkat(dfd, base, 0) < 0)
        log_warn("store %s: put %s: remove the partial object: %s", p->ps->dir, p->key,
                 px_strerror(errno));
    return err;
}

static int px_lock_dir(struct px_put *p, int dfd, int op)
{
    p->what = op == LOCK_UN ? "unlock directory" : "lock directory";
    while (flock(dfd, op) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return 0;
}

/* Is the object base of dfd still the one whose etag is p->if_etag? 0 or -ESTALE. */
static int px_still_same(struct px_put *p, int dfd, const char *base)
{
    struct stat sb;
    struct store_stat now;
    p->what = "stat";
    if (fstatat(dfd, base, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? -ESTALE : -errno;
    if (!S_ISREG(sb.st_mode))
        return -ESTALE;
    px_fill_stat(&sb, &now);
    return strcmp(now.etag, p->if_etag) == 0 ? 0 : -ESTALE;
}

/*
 * The compare and the swap of a put_if, under an flock of the directory so that no other
 * put_if of it (another mount's commit) comes between them. A create is a link of the
 * temporary file, which fails if the name exists; tmp is removed then. 0 or -errno: tmp left.
 */
static int px_swap_if(struct px_put *p, int dfd, const char *tmp, const char *base)
{
    int err = px_lock_dir(p, dfd, LOCK_EX);
    if (err)
        return err;
    if (!p->if_etag) {
        p->what = "link";
        err = linkat(dfd, tmp, dfd, base, 0) == 0 ? 0 : errno == EEXIST ? -ESTALE : -errno;
    } else {
        err = px_still_same(p, dfd, base);
        p->what = "rename";
        if (!err && renameat(dfd, tmp, dfd, base) < 0)
            err = -errno;
    }
    int unlock = px_lock_dir(p, dfd, LOCK_UN);
    if (!err && !p->if_etag && unlinkat(dfd, tmp, 0) < 0)
        log_warn("store %s: put %s: remove temporary file %s: %s", p->ps->dir, p->key, tmp,
                 px_strerror(errno));
    return err ? err : unlock;
}

static int px_put_in(struct px_put *p, int dfd, const char *base)
{
    if (p->direct)
        return px_put_direct(p, dfd, base);
    char tmp[PX_TMP_LEN + 1];
    int err, fd = px_tmp_create(p, dfd, tmp);
    if (fd < 0)
        return fd;
    err = px_tmp_fill(p, fd);
    if (err)
        goto out_unlink_tmp;
    if (p->conditional) {
        err = px_swap_if(p, dfd, tmp, base);
        if (err)
            goto out_unlink_tmp;
    } else if (renameat(dfd, tmp, dfd, base) < 0) {
        p->what = "rename";
        err = -errno;
        goto out_unlink_tmp;
    }
    if (!p->lazy && fsync(dfd) < 0) { /* the object is in place, but maybe not durable */
        p->what = "fsync directory";
        return -errno;
    }
    return 0;

out_unlink_tmp:
    if (unlinkat(dfd, tmp, 0) < 0)
        log_warn("store %s: put %s: remove temporary file %s: %s", p->ps->dir, p->key, tmp,
                 px_strerror(errno));
    return err;
}

static int px_put_once(struct px_put *p, char *dir, const char *base)
{
    int dfd = px_open_parent(p, dir);
    if (dfd < 0)
        return dfd;
    int err = px_put_in(p, dfd, base);
    close(dfd);
    return err;
}

static void px_prune(const struct posix_store *ps, const char *key, char *dir);

static int px_put_run(struct px_put p)
{
    const char *key = p.key;
    if (px_reserved(key))
        return -EINVAL;
    char *dir = strdup(key);
    if (!dir)
        return px_fail(p.ps, "put", key, "allocate", ENOMEM);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    const char *base = slash ? slash + 1 : dir;
    int err;
    /* -ENOENT: a concurrent delete removed the emptied directory under us; start over. */
    for (int tries = 0; tries < PX_RETRIES; tries++) {
        err = px_put_once(&p, slash ? dir : NULL, base);
        if (err != -ENOENT)
            break;
    }
    if (err && slash)
        px_prune(p.ps, key, dir); /* directories made for it go again (a full disk) */
    free(dir);
    if (err == -ESTALE)
        return err;        /* put_if: the answer, not a failure */
    if (err == -ENOTDIR) { /* an object where the key needs a directory */
        log_error("store %s: put %s: %s: a component of the key is an object", p.ps->dir, key,
                  p.what);
        return -EIO;
    }
    return err ? px_fail(p.ps, "put", key, p.what, -err) : 0;
}

static int px_put_with(struct store *st, const char *key, const void *data, size_t len, int lazy,
                       int direct)
{
    struct px_put p = { .ps = px(st),
                        .key = key,
                        .data = data,
                        .len = len,
                        .lazy = lazy,
                        .direct = direct,
                        .src_fd = -1,
                        .link_fd = -1,
                        .what = "" };
    return px_put_run(p);
}

static int px_put(struct store *st, const char *key, const void *data, size_t len)
{
    return px_put_with(st, key, data, len, 0, 0);
}

static int px_put_lazy(struct store *st, const char *key, const void *data, size_t len)
{
    return px_put_with(st, key, data, len, 1, 0);
}

static int px_put_if(struct store *st, const char *key, const void *data, size_t len,
                     const char *if_etag)
{
    struct px_put p = { .ps = px(st),
                        .key = key,
                        .data = data,
                        .len = len,
                        .src_fd = -1,
                        .link_fd = -1,
                        .conditional = 1,
                        .if_etag = if_etag,
                        .what = "" };
    return px_put_run(p);
}

static int px_put_new(struct store *st, const char *key, const void *data, size_t len)
{
    return px_put_with(st, key, data, len, 1, 1);
}

/* A new object from len bytes of fd at off; with linked, it may be fd's file itself (a hard
 * link, *linked set to 1). */
static int px_put_new_fd(struct store *st, const char *key, int fd, uint64_t off, size_t len,
                         int *linked)
{
    struct px_put p = { .ps = px(st),
                        .key = key,
                        .len = len,
                        .lazy = 1,
                        .direct = 1,
                        .src_fd = fd,
                        .src_off = off,
                        .link_fd = linked ? fd : -1,
                        .linked = linked,
                        .what = "" };
    return px_put_run(p);
}

static int px_put_new_from_fd(struct store *st, const char *key, int fd, uint64_t off, size_t len)
{
    return px_put_new_fd(st, key, fd, off, len, NULL);
}

/* The caller's file itself when it is on this file system (it promises to change it no
 * more), with an object's mode, since that file was private. */
static int px_put_new_file(struct store *st, const char *key, int fd, size_t len, int *kept)
{
    int err = px_put_new_fd(st, key, fd, 0, len, kept);
    if (err == 0 && *kept && fchmod(fd, PX_FILE_MODE) < 0)
        log_warn("store %s: put %s: the object keeps its file's mode: %s", px(st)->dir, key,
                 px_strerror(errno));
    return err;
}

/* A hard link: the same file under both keys. Objects are replaced by rename, never written in
 * place by us (HSDS writes in place, but only to the version it serves, which is dst's). */
static int px_copy(struct store *st, const char *src, const char *dst, uint64_t size)
{
    (void)size; /* a hard link costs the same whatever the size */
    const struct posix_store *ps = px(st);
    if (px_reserved(src))
        return -EINVAL;
    int fd = px_open(ps, src, O_RDONLY, 0);
    if (fd < 0)
        return fd == -ENOENT ? fd : px_fail(ps, "copy", src, "open", -fd);
    struct stat sb;
    int err = fstat(fd, &sb) < 0 ? px_fail(ps, "copy", src, "fstat", errno) : px_check_regular(&sb);
    if (!err) {
        struct px_put p = { .ps = ps,
                            .key = dst,
                            .len = (size_t)sb.st_size,
                            .lazy = 1,
                            .direct = 1,
                            .src_fd = fd,
                            .src_off = 0,
                            .link_fd = fd,
                            .what = "" };
        err = px_put_run(p);
    }
    close(fd);
    return err;
}

static int px_sync(struct store *st)
{
    const struct posix_store *ps = px(st);
    int fd = px_open(ps, ".", O_RDONLY | O_DIRECTORY, 0); /* syncfs wants no O_PATH fd */
    if (fd < 0)
        return px_fail(ps, "sync", ".", "open", -fd);
    int err = syncfs(fd) < 0 ? px_fail(ps, "sync", ".", "syncfs", errno) : 0;
    close(fd);
    return err;
}

/* ---- delete ---------------------------------------------------------------------------- */

static int px_unlink(const struct posix_store *ps, const char *key, const char *dir,
                     const char *base)
{
    int dfd = px_open(ps, dir, O_PATH | O_DIRECTORY, 0);
    if (dfd < 0)
        return px_fail(ps, "delete", key, "open directory", -dfd);
    int err = 0;
    if (unlinkat(dfd, base, 0) < 0)
        err = px_fail(ps, "delete", key, "unlink", errno);
    close(dfd);
    return err;
}

/* Errors of the empty-directory cleanup that just mean "nothing to clean up". */
static int px_prune_benign(int err)
{
    return err == ENOTEMPTY || err == EEXIST || err == ENOENT || err == ENOTDIR || err == EBUSY;
}

/* Remove directory dir (a key's parent, never the bucket) if the delete left it empty. 0 when
 * it was removed, so the caller may try its parent next. */
static int px_prune_one(const struct posix_store *ps, const char *key, char *dir)
{
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    const char *name = slash ? slash + 1 : dir;
    int gfd = px_open(ps, slash ? dir : ".", O_PATH | O_DIRECTORY, 0);
    if (gfd < 0)
        return -1; /* gone already, or refused: nothing of ours to remove */
    int rc = unlinkat(gfd, name, AT_REMOVEDIR);
    if (rc < 0 && !px_prune_benign(errno))
        log_warn("store %s: delete %s: remove empty directory: %s", ps->dir, key,
                 px_strerror(errno));
    close(gfd);
    return rc == 0 && slash ? 0 : -1;
}

/* Empty directories left by a delete go too, up to the bucket (S3 has no directories: a
 * domain's deleted db/A-B/ must not stay behind as one). */
static void px_prune(const struct posix_store *ps, const char *key, char *dir)
{
    while (px_prune_one(ps, key, dir) == 0)
        ;
}

static int px_del(struct store *st, const char *key)
{
    const struct posix_store *ps = px(st);
    if (px_reserved(key))
        return -EINVAL;
    char *dir = strdup(key);
    if (!dir)
        return px_fail(ps, "delete", key, "allocate", ENOMEM);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    int err = px_unlink(ps, key, slash ? dir : ".", slash ? slash + 1 : dir);
    if (!err && slash)
        px_prune(ps, key, dir);
    free(dir);
    return err;
}

/* ---- open / close ---------------------------------------------------------------------- */

static void px_destroy(struct store *st)
{
    struct posix_store *ps = (struct posix_store *)st;
    close(ps->root);
    free(ps->dir);
    free(ps);
}

static const struct store_ops px_ops = {
    .name = "posix",
    .get = px_get,
    .put = px_put,
    .put_lazy = px_put_lazy,
    .put_if = px_put_if,
    .put_new = px_put_new,
    .put_new_from_fd = px_put_new_from_fd,
    .put_new_file = px_put_new_file,
    .copy = px_copy,
    .list_keys = px_list_keys,
    .sync = px_sync,
    .del = px_del,
    .head = px_head,
    .list = px_list,
    .open_object = px_open_object,
    .destroy = px_destroy,
};

/* 1 if openat2 works here, 0 if the kernel (or valgrind, or a seccomp filter) lacks it. */
static int px_probe_openat2(const struct posix_store *ps)
{
    int fd = px_openat2(ps->root, ".", O_PATH | O_DIRECTORY, 0);
    if (fd >= 0) {
        close(fd);
        return 1;
    }
    log_info("store %s: openat2 unavailable (%s): resolving keys without following symlinks",
             ps->dir, px_strerror(-fd));
    return 0;
}

/* Map the failure to open the bucket directory itself. */
static int px_root_err(const char *dir, int err)
{
    if (err == ENOENT || err == ENOTDIR)
        return -ENOENT; /* HSDS never creates buckets, and neither do we */
    log_error("store %s: open bucket directory: %s", dir, px_strerror(err));
    return err == EACCES || err == EPERM ? -EACCES : -EIO;
}

int store_posix_open(const char *dir, struct store **out)
{
    int err = -ENOMEM;
    if (!out || !dir)
        return -EINVAL;
    *out = NULL;
    struct posix_store *ps = calloc(1, sizeof *ps);
    if (!ps)
        return err;
    ps->base.ops = &px_ops;
    ps->dir = strdup(dir);
    if (!ps->dir)
        goto out_free_ps;
    ps->root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ps->root < 0) {
        err = px_root_err(dir, errno);
        goto out_free_dir;
    }
    ps->have_openat2 = px_probe_openat2(ps);
    *out = &ps->base;
    return 0;

out_free_dir:
    free(ps->dir);
out_free_ps:
    free(ps);
    return err;
}
