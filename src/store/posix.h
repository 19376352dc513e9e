/*
 * posix.h: what the posix backend's files share (posix.c: get, put, delete, the store;
 * posix_list.c: listings; posix_path.c: keys resolved beneath the bucket, errors). Not part of
 * the store interface.
 */
#ifndef H5OSFS_STORE_POSIX_H
#define H5OSFS_STORE_POSIX_H

#include <sys/stat.h>
#include <sys/types.h>

#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

#define PX_TMP_PREFIX SCHEMA_TMP_NAME_PREFIX /* reserved there: no domain is named so */
#define PX_TMP_PREFIX_LEN (sizeof PX_TMP_PREFIX - 1)
#define PX_TMP_LEN (PX_TMP_PREFIX_LEN + 16) /* prefix + 64 random bits in hex */
#define PX_RETRIES 16
#define PX_DIR_MODE 0755
#define PX_FILE_MODE 0644

struct posix_store {
    struct store base; /* first member: a struct store * is a struct posix_store * */
    int root;          /* O_PATH | O_DIRECTORY fd of the bucket directory */
    int have_openat2;  /* decided once by store_posix_open */
    char *dir;         /* the bucket's path, for log lines */
};

/* posix_path.c */
const struct posix_store *px(const struct store *st);
const char *px_strerror(int err);
int px_fail(const struct posix_store *ps, const char *op, const char *key, const char *what,
            int err);
/* openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) of path relative to root; an fd or -errno. */
int px_openat2(int root, const char *path, int flags, mode_t mode);
int px_open(const struct posix_store *ps, const char *path, int flags, mode_t mode);
/* openat(2) relative to dfd, retried on EINTR; an fd or -errno. */
int px_sys_openat(int dfd, const char *name, int flags, mode_t mode);
void px_fill_stat(const struct stat *sb, struct store_stat *out);
/* posix_list.c */
int px_list(struct store *st, const char *prefix, const char *delimiter, const char *token,
            size_t max_keys, struct store_list *out);
int px_list_keys(struct store *st, const char *prefix,
                 int (*fn)(void *ctx, const char *key, const struct store_stat *st), void *ctx);

#endif
