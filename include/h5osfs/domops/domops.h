/*
 * domops: changes to the namespace, as HSDS makes them (spec §2.3, §3.1, §9): folders are
 * created and removed, domains and folders renamed, domains deleted. Every change is a few
 * whole-object writes or deletes, ordered so that no reader ever sees a half-made domain:
 * a domain appears when its .domain.json is written and disappears when it is deleted; its
 * objects (db/A-B/...) are removed afterwards by the collector (gc.h), once open readers have
 * had time to finish.
 *
 * Every change is made for one HSDS user, the caller of the request (`user`), with the rights
 * the domain ACLs give that user: creating needs "create" on the parent folder (plain
 * directories and the bucket root: the admin only, as in HSDS), deleting and renaming away
 * need "delete" on the object, replacing needs "update" on the target. A new folder or domain
 * is the user's (owner), as HSDS lets a non-admin create only with owner == self. user NULL
 * (a caller without an HSDS name) may change nothing: -EACCES. Errors are negative errnos:
 * -EACCES, -EEXIST, -ENOENT, -ENOTEMPTY, -ENOTDIR, -EISDIR, -EINVAL (a name HSDS cannot hold),
 * -EIO.
 *
 * Names the bucket reserves are refused before anything is written, by every way a name
 * enters (create, mkdir, the target of rename), all through domops_may_create: -EINVAL and
 * -EPERM as schema_domain_path_allowed decides, -EEXIST when an object that is not a domain
 * (hidden by ns) already has the name's key.
 */
#ifndef H5OSFS_DOMOPS_H
#define H5OSFS_DOMOPS_H

#include "h5osfs/ns/ns.h"
#include "h5osfs/store/store.h"

struct gc;

struct domops {
    struct store *store;
    struct ns *ns;
    const char *user; /* the mount's HSDS user */
    const char *admin_user;
    struct gc *gc; /* where a deleted domain's objects go; NULL: left in place */
    /* Who created the new domain being committed at path (its owner): 0 with the HSDS user
     * name in buf, or -ENOENT for the mount's user. NULL: always the mount's user. */
    int (*creator_of)(void *ctx, const char *path, char *buf, size_t len);
    void *creator_ctx;
    /* Told that versions of domain lost their last name (rm of a name, expiry at a commit):
     * the sweeper collects them (sweep.h). NULL: they stay "removing" in the list until a
     * mount that has one reads it. */
    void (*versions_removed)(void *ctx, const char *domain);
    void *versions_ctx;
    /* A domain renamed onto path, whose kept versions stay there (doc/versions.md §4.7):
     * keep root, the domain's root now, as path's next version. NULL: none kept. 0 or
     * -errno (logged); the rename is not made then. */
    int (*keep_moved)(void *ctx, const char *path, const char *root);
    void *keep_ctx;
};

int domops_mkdir(const struct domops *d, const char *user, const char *path);
int domops_rmdir(const struct domops *d, const char *user, const char *path);
int domops_unlink(const struct domops *d, const char *user, const char *path);
/* A version's path DIR/.versions/NAME/<x> (issue 26): unlink drops that name (vnames.h),
 * with the domain's "delete" (its folder's once the domain is gone); link gives the version
 * from names a second name to (a tag) with the domain's "update". link of anything else:
 * -EROFS (as before versions); a tag in another version folder: -EXDEV. */
int domops_link(const struct domops *d, const char *user, const char *from, const char *to);
/*
 * A domain's kerchunk references in the bucket (issue 28 §2, -o bucket_refs=on): the object
 * DIR/NAME/.kerchunk.json, beside the domain's DIR/NAME/.domain.json. HSDS and the namespace
 * look only for .domain.json there, so it is no domain and no folder. Whoever removes or renames
 * a domain takes it along (domops_unlink, domops_rename), with the option or without.
 */
#define DOMOPS_REFS_NAME ".kerchunk.json"
#define DOMOPS_REFS_MAX (256u << 20)
/* "/home/u/x.h5" -> "home/u/x.h5/.kerchunk.json". 0 or -EINVAL. */
int domops_refs_key(const char *path, char *buf, size_t len);

/* flags: RENAME_NOREPLACE, RENAME_EXCHANGE (refused with -EINVAL). */
int domops_rename(const struct domops *d, const char *user, const char *from, const char *to,
                  unsigned flags);

/* May user create a domain or folder at path? A name the bucket allows
 * (schema_domain_path_allowed: -EINVAL, -EPERM), the parent folder's "create" for user
 * (-ENOENT, -ENOTDIR, -EACCES), and no hidden object at path's key (-EEXIST; one store
 * request). 0 or -errno. An existing domain at path needs "update" instead (a replacement). */
int domops_may_create(const struct domops *d, const char *user, const char *path);

/* Set (mode COPY or LINK) or remove (UNSET) folder path's user.h5osfs.ingest: the member
 * "h5osfs": {"ingest": ...} of its .domain.json (schema.h), read, changed and written back
 * conditionally (store_put_if), every other member kept. Needs the folder's "update" for user.
 * -ENOTSUP for a domain or a plain directory (no object holds a setting). */
int domops_set_ingest(const struct domops *d, const char *user, const char *path,
                      enum schema_ingest mode);

/* The same for user.h5osfs.versions (issue 26): "h5osfs": {"versions": "on" | "off" |
 * "keep:N"}; setting NULL removes it. -EINVAL for an UNSET setting. */
int domops_set_versions(const struct domops *d, const char *user, const char *path,
                        const struct schema_versions *setting);

/* The .domain.json HSDS would write for a new domain (root != NULL) or folder at path: owned
 * by the domain's creator (creator_of, else the mount's user), ACLs inherited from the parent
 * folder as HSDS does, timestamps. */
int domops_domain_json(const struct domops *d, const char *path, const char *root, char **out);

#endif
