/*
 * ns: the namespace a mount shows, derived from the bucket's keys (spec §2.3, §9).
 *
 *   key P/.domain.json with a root    -> /P is a domain, shown as a regular file
 *   key P/.domain.json without root   -> /P is a folder, shown as a directory
 *   prefix P/ holding domains, no own .domain.json -> /P is a plain directory
 *   a .domain.json that cannot be used (malformed, not an object, bad root, a directory where
 *   an object should be, too large)   -> /P is "broken": shown as a file, every use fails EIO
 *   DIR/.versions/NAME/<x>            -> a kept version of DIR/NAME (its version list's
 *                                        entry named x): a read-only domain, never listed in
 *                                        DIR (reachable by name only, ns_versions.c)
 *   anything else (db/, .info.json, linked HDF5 files, stray keys, names that are not valid
 *   UTF-8 or longer than 255 bytes, every path schema_domain_path_allowed refuses) -> hidden
 *
 * Answers are cached for ttl seconds (negative answers too); each problem is logged once per
 * fetch, with the key and the reason. Thread-safe. Paths are absolute ("/", "/home/u/x.h5").
 */
#ifndef H5OSFS_NS_H
#define H5OSFS_NS_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/schema/schema.h"
#include "h5osfs/store/store.h"

enum ns_kind {
    NS_DIR,
    NS_FOLDER,
    NS_DOMAIN,
    NS_BROKEN,
    NS_STATS, /* never from ns: fs's read-only statistics file */
    NS_VIEW   /* never from ns: a file of fs's read-only views (MOUNT/.zarr) */
};

struct ns_info {
    enum ns_kind kind;
    unsigned rights;                 /* schema_right bits of the user asked: ns_stat_as's user, the
                                   mount's for ns_stat and listings (before -o ro) */
    double mtime;                    /* lastModified; the mount time for plain directories */
    double ctime;                    /* created */
    uint64_t size;                   /* 0 here: a domain's size is its file's (the image's) */
    char root[SCHEMA_ID_BUF];        /* domains: root group id */
    char owner[64];                  /* folders and domains: owner (truncated for display) */
    enum schema_ingest ingest;       /* folders: user.h5osfs.ingest (UNSET: none) */
    struct schema_versions versions; /* folders: user.h5osfs.versions (UNSET: none) */
    uint64_t version;                /* DIR/.versions/NAME/<x>: its number; else 0 */
    char committer[64];              /* and who committed it (truncated for display) */
    char size_stamp[40];             /* and when size is the size its commit recorded: the
                                      * image layout stamp it holds for (image.h); else "" */
    int current_ref; /* domains: root is its head version's (versions_current=ref) */
    int unread;      /* listings only: the store failed to say what this name is (logged); a
                        lookup asks again */
};

struct ns_config {
    const char *user;       /* HSDS user name for ACL decisions */
    const char *admin_user; /* HSDS admin user name (HSDS's default: "admin") */
    double ttl;             /* seconds; 0 disables caching */
    unsigned requests;      /* store requests a listing makes at once (0: one) */
};

struct ns;

struct ns_dirent {
    char *name;
    struct ns_info info;
};

struct ns_dir {
    struct ns_dirent *entries; /* sorted by name */
    size_t n;
};

int ns_new(struct store *store, const struct ns_config *cfg, struct ns **out);
void ns_free(struct ns *ns);

/* What path is, with the rights of the mount's user. -ENOENT when hidden or absent; -EIO
 * when the store failed (logged). */
int ns_stat(struct ns *ns, const char *path, struct ns_info *out);

/* The same answer (the same cache entry) with the rights of HSDS user `user`, decided from
 * the domain's or folder's ACL as HSDS decides (§9); plain directories: read for everyone,
 * everything for the admin. user NULL is a caller without an HSDS name: it gets what HSDS
 * gives unauthenticated requests, the "default" entry's read right and nothing else. */
int ns_stat_as(struct ns *ns, const char *path, const char *user, struct ns_info *out);

/* fn(ctx, domain) is called whenever a version list read from the store has versions whose
 * collection is unfinished ("removing": sweep.h finishes them). Set before any lookup; fn must
 * be quick (it runs inside the lookup) and thread-safe. */
void ns_on_removing(struct ns *ns, void (*fn)(void *ctx, const char *domain), void *ctx);

struct vlist;
/* The version list at key (schema_vlist_key) and, when etag is not NULL, the etag it was read
 * at (a buffer of store_stat.etag's size): 0; -ENOENT, none; -EINVAL, unusable, why saying
 * how (the caller logs it, with what follows for it); another -errno of the store. */
int ns_vlist_read(struct store *store, const char *key, struct vlist *l, char *etag, char *why,
                  size_t why_len);

/* The visible children of directory path (root, folder or plain directory). */
int ns_readdir(struct ns *ns, const char *path, struct ns_dir *out);
void ns_dir_free(struct ns_dir *dir);

/* Forget cached answers for path and its parent listing (after a local change). */
void ns_invalidate(struct ns *ns, const char *path);

#endif
