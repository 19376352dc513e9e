/* fs_int.h: what the parts of the FUSE layer (fs.c, fs_ops.c, fs_common.c, fs_dir.c,
 * fs_file.c, fs_change.c, fs_zarr.c) share. Only src/fs includes it; include/h5osfs/fs/fs.h is
 * the contract. */
#ifndef H5OSFS_FS_INT_H
#define H5OSFS_FS_INT_H

#include "h5osfs/fs/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "h5osfs/fs/callers.h"
#include "h5osfs/util/clock.h"
#include "h5osfs/commit/commit.h"
#include "h5osfs/domops/domops.h"
#include "h5osfs/image/image_table.h"
#include "h5osfs/util/log.h"
#include "holders.h"
#include "inode.h"
#include "notify.h"
#include "recent.h"
#include "h5osfs/staging/staging.h"
#include "stats.h"

#define FS_BLOCK_SIZE 4096
#define FS_IO_SIZE \
    (1u << 20) /* st_blksize of files: cp and stdio move 1 MiB at a time,
                                       as many FUSE requests as the 1 MiB max_write allows */
#define FS_NAME_MAX 255
#define FS_UNKNOWN_INO 0xffffffffu /* readdir: "ask lookup", as libfuse's high-level API does */
#define FS_XATTR_ROOT "user.h5osfs.root"
#define FS_XATTR_OWNER "user.h5osfs.owner"
#define FS_XATTR_INGEST "user.h5osfs.ingest"       /* folders: how new files below are stored */
#define FS_XATTR_VERSIONS "user.h5osfs.versions"   /* folders: do commits below keep versions */
#define FS_XATTR_VERSION "user.h5osfs.version"     /* DIR/.versions/NAME/<x>: its number */
#define FS_XATTR_COMMITTER "user.h5osfs.committer" /* and who committed it */

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* Every handle given to the kernel, so that those whose release never came (the session ended
 * first: a SIGTERM right after a close) are still freed at unmount. */
struct fs_handle {
    struct fs_handle *prev, *next; /* NULL while not handed out */
    void (*dispose)(struct fs *fs, struct fs_handle *h);
};

struct fs {
    struct fs_config cfg;
    pthread_mutex_t handles_lock;
    struct fs_handle handles; /* the list's head */
    struct inode_table *inodes;
    struct recent_images *recent; /* versions lookups handed out: what opens get */
    struct image_table *images;   /* these four: cfg's, for short */
    const struct domops *ops;
    struct callers *callers;
    struct staging *staging;   /* NULL on a read-only mount */
    struct notifier *notifier; /* NULL until the threads start */
    double started;            /* clock_monotonic() at fs_new */
    int mnt_id;                /* this mount's id (holders.h); set before requests come */
    struct zarr_view *zarr;    /* MOUNT/.zarr (fs_zarr.c) */
    atomic_int read_ahead_set; /* the first open set the kernel's read-ahead (fs_file.c) */
};

/* An open domain file: its version and its reads' state; or, for writing (and for reading a
 * new file that is still being written), its staged entry. */
struct fs_file {
    struct fs_handle link; /* first: the handle list holds it by this */
    fuse_ino_t ino;
    pid_t opener;           /* the thread whose open made it */
    struct holders holders; /* who may still hold a descriptor of it (see op_flush) */
    _Atomic int fresh;      /* opened, nothing done with it yet (see truncate_of_open) */
    _Atomic int closed;     /* its last close came; only the release is to come (op_flush) */
    int stg_opened;         /* stg is an open of the entry (staging_open), closed with it */
    /* stg changes only at a write after the last close (fs_file_reopen, under reopen_lock);
     * what it was is kept in former and released with f: requests of f that began before may
     * still use it */
    struct staged *_Atomic stg;
    pthread_mutex_t reopen_lock;
    struct staged **former;
    size_t n_former, cap_former;
    struct image *img;
    struct image_reader reader;
    char root[SCHEMA_ID_BUF];
    char *text; /* the statistics file: the text its open took */
    size_t text_len;
};

/* The listing a directory handle serves, taken once at opendir so offsets stay stable. */
struct fs_dir_handle {
    struct fs_handle link; /* first: the handle list holds it by this */
    struct ns_dir dir;
};

/* ---- fs.c: the handle list; fs_of ---- */
struct fs *fs_of(fuse_req_t req);
void fs_handle_track(struct fs *fs, struct fs_handle *h,
                     void (*dispose)(struct fs *fs, struct fs_handle *h));
void fs_handle_untrack(struct fs *fs, struct fs_handle *h);

/* ---- fs_common.c: attributes, paths, rights ---- */
/* Inline: fs_zarr.c, which fs_common.c calls, uses it and calls nothing of fs_common.c
 * (tests/meson.build, --one-way). */
static inline int fs_is_dir_kind(enum ns_kind kind)
{
    return kind == NS_DIR || kind == NS_FOLDER;
}
double fs_attr_timeout(const struct fs *fs, uint64_t version);
void fs_caller_of(struct fs *fs, fuse_req_t req, struct caller *c);
int fs_caller_rights(struct fs *fs, const struct caller *c, const char *path, struct ns_info *info);
char *fs_child_path(const char *parent, const char *name);
unsigned fs_creator_rights(struct fs *fs, const struct caller *c, const char *path);
void fs_fill_stat(const struct fs *fs, fuse_ino_t ino, const struct ns_info *info, struct stat *st);
int fs_is_stats_path(const char *path);
mode_t fs_mode_of(const struct fs *fs, const struct ns_info *info);
int fs_remember_creator(struct fs *fs, const struct caller *c, const char *path);
int fs_resolve(struct fs *fs, const char *path, struct ns_info *info, uint64_t *version);

/* A kept version whose commit recorded its size (for this build's layout) is not built to be
 * looked up: its node's version is then this number, made of its root (never an image serial,
 * which counts from 1), and the open that follows checks the built size against it. */
#define FS_RECORDED_VERSION (1ull << 62)
int fs_is_recorded_version(uint64_t version);
/* Is info a kept version with a size recorded for this build's layout (no build needed)? */
int fs_size_is_recorded(struct fs *fs, const struct ns_info *info);
int fs_resolve_image(struct fs *fs, const char *path, struct ns_info *info, uint64_t *version,
                     struct image **img);
int fs_stat_ino(struct fs *fs, fuse_ino_t ino, char **path, struct ns_info *info);
int fs_version_attributes(struct fs *fs, fuse_ino_t ino, char **path, uint64_t *version,
                          struct ns_info *info);
/* What the kernel is told of ino (getattr, setattr): fs_version_attributes, but a writer's node
 * (inode.h) shows the size and times of the file its writer has staged, as any file system
 * shows a file being written (h5py's "w" over a domain checks that O_TRUNC emptied it), and
 * the kernel keeps none of them (*version is then INODE_STAGED: no attribute timeout). */
int fs_kernel_attributes(struct fs *fs, fuse_ino_t ino, char **path, uint64_t *version,
                         struct ns_info *info);

/* ---- fs_dir.c: lookup, attributes, directories, extended attributes ---- */
void op_access(fuse_req_t req, fuse_ino_t ino, int mask);
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* ---- fs_file.c: open files, reads, writes, commits ---- */
int fs_check_open(const struct fs *fs, const struct ns_info *info, int flags);
void fs_file_dispose(struct fs *fs, struct fs_handle *link);
struct fs_file *fs_file_new(void);
void fs_file_free(struct fs *fs, struct fs_file *f);
void fs_file_closed(struct fs *fs, struct fs_file *f);
int fs_file_reopen(struct fs *fs, struct fs_file *f);
void fs_hand_out(struct fs *fs, struct fuse_file_info *fi, struct fs_file *f);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_statfs(fuse_req_t req, fuse_ino_t ino);
void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
              struct fuse_file_info *fi);
int fs_open_file(struct fs *fs, const char *path, const struct ns_info *info, uint64_t version,
                 int flags, struct fs_file *f);

/* ---- fs_zarr.c: MOUNT/.zarr/<domain path>/, read-only (zarr.h) ---- */
struct zarr_view;
int fs_is_view_path(const char *path);
int fs_zarr_stat(struct fs *fs, const char *path, struct ns_info *info);
int fs_zarr_rights(struct fs *fs, const struct caller *c, const char *path, struct ns_info *info);
int fs_zarr_readdir(struct fs *fs, const char *path, struct ns_dir *out);
int fs_zarr_read(struct fs *fs, const char *path, char **text, size_t *len);

/* ---- fs_change.c: setattr, creating, removing, renaming ---- */
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi);
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi);
void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                 int flags);
void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);

#endif
