/*
 * callers: the HSDS user a FUSE request acts as (doc/design.md, "Rights").
 *
 * The kernel lets other local users reach the daemon only with -o allow_other (or
 * allow_root); each request carries its caller's uid. The mounting uid is the mount's HSDS
 * user (-o user=); any other uid is the name -o user_map gives it, else its local user name
 * (getpwuid_r, asked at every request: the system's name service caches), else it has no HSDS
 * name (a caller HSDS would see as unauthenticated). uid 0 is no exception: root is the admin
 * only when its name (or mapping) is the admin's.
 *
 * Files created through the mount and not committed yet have no ACL: callers also remember
 * who created each (the owner of the domain its commit makes; the only caller who may use it
 * before). Thread-safe.
 */
#ifndef H5OSFS_CALLERS_H
#define H5OSFS_CALLERS_H

#include <stddef.h>
#include <sys/types.h>

#define CALLERS_NAME_MAX 256 /* an HSDS user name and its NUL */

struct caller {
    const char *mount_user; /* the mounting uid: -o user= (callers' copy); else NULL */
    int has_name;
    char name[CALLERS_NAME_MAX]; /* another caller's HSDS user name, when has_name */
};

/* The caller's HSDS user name, or NULL when it has none. */
static inline const char *caller_user(const struct caller *c)
{
    return c->mount_user ? c->mount_user : c->has_name ? c->name : NULL;
}

/* The mounting user: ns answers with its rights already. */
static inline int caller_is_mounter(const struct caller *c)
{
    return c->mount_user != NULL;
}

struct callers_config {
    uid_t mount_uid;
    const char *mount_user; /* -o user= */
    const char *user_map;   /* -o user_map= text, or NULL */
};

/*
 * Check -o user_map text: "UID:NAME[:UID:NAME...]", UID a decimal uid other than the mounting
 * one (which is -o user=) and given once, NAME a non-empty HSDS user name of at most 255 bytes
 * without control characters, ':' or a "g:" group prefix. 0, or -EINVAL with a short reason in
 * why.
 */
int callers_check_map(const char *text, uid_t mount_uid, char *why, size_t why_len);

struct callers;

/* 0, -EINVAL (a map callers_check_map refuses; logged) or -ENOMEM. */
int callers_new(const struct callers_config *cfg, struct callers **out);
void callers_free(struct callers *c);

/* Who uid is (see above). */
void callers_identify(const struct callers *c, uid_t uid, struct caller *out);

/* Remember that user created the new file at path (replaces an earlier creator). 0, 1 when
 * enough creators are remembered that callers_prune_creators should run, or -ENOMEM. */
int callers_set_creator(struct callers *c, const char *path, const char *user);
/* Forget the creators of files that are no longer staged (created and closed without a byte
 * written leave no commit behind to forget them). staged(ctx, path) is asked with no lock
 * held; a creator set again meanwhile is kept. */
void callers_prune_creators(struct callers *c, int (*staged)(void *ctx, const char *path),
                            void *ctx);
/* The creator of the new file at path into buf: 0, -ENOENT when none is known. */
int callers_creator(struct callers *c, const char *path, char *buf, size_t len);
/* The file at path is committed (or gone): its ACL decides from now on. */
void callers_forget_creator(struct callers *c, const char *path);
/* The new file at from is now at to. */
void callers_rename_creator(struct callers *c, const char *from, const char *to);

#endif
