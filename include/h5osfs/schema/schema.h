/*
 * schema: the HSDS storage schema as pure functions (spec/hsds-format.md §1-§3, §9, §11).
 *
 * No I/O, no global state, no FUSE: everything here is unit-tested on strings. Functions that
 * write into a caller's buffer return 0 on success, -ENAMETOOLONG when the buffer is too small,
 * -EINVAL when the input is not valid (-ENOMEM and, for v1 keys without MD5, -EIO are possible
 * too); functions that answer a question return 1/0 or -EINVAL.
 */
#ifndef H5OSFS_SCHEMA_H
#define H5OSFS_SCHEMA_H

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>

#define SCHEMA_ID_LEN 38 /* an id without chunk partition digits or index suffix */
#define SCHEMA_ID_BUF 39
#define SCHEMA_DOMAIN_KEY_SUFFIX "/.domain.json"
#define SCHEMA_OBJECT_TREE "db" /* the top-level prefix of every v2 object (§2.1) */
/* The posix store's temporary files (a put writes one, then renames it over the key); the
 * store never lists them, so no domain or folder may be called so, on any backend. */
#define SCHEMA_TMP_NAME_PREFIX ".h5osfs-tmp."

/* ---- ids (§1) ---- */

/* 1 for v1 (UUID 8-4-4-4-12), 2 for v2 (8-8-4-6-6), -EINVAL for anything else. Accepts the
 * classes g, d, t and chunk ids ("c-…_i_j" or "c<N>-…_i_j"); hex must be lowercase. */
int schema_id_version(const char *id);

/* Class letter of a valid id: 'g', 'd', 't' or 'c'; -EINVAL if the id is not valid. */
int schema_id_class(const char *id);

/* 1 if id is a v2 root group id (rotation rule §1.3), 0 if a valid non-root v2 id,
 * -EINVAL for v1 ids (the rule does not apply) and invalid ids. */
int schema_id_is_root(const char *id);

/* The root group id of any v2 id (§1.4) into out[SCHEMA_ID_BUF]. */
int schema_root_of(const char *id, char out[SCHEMA_ID_BUF]);

/* (d + 8) mod 16 on a lowercase hex digit; -EINVAL if c is not one. */
int schema_hex_rot(int c);

/* ---- keys (§2, §11) ---- */

/* Storage key of a group, dataset, datatype or chunk id, v1 or v2 (§2.1, §11). */
int schema_obj_key(const char *id, char *buf, size_t len);

/* Key of a dataset's chunk: index[0..rank-1] slowest first, partition < 0 for none (§2.4). */
int schema_chunk_key(const char *dset_id, const uint64_t *index, int rank, int partition, char *buf,
                     size_t len);
/* The partition (§5.6) of the chunk at index of a dataset with layout.partition_count count
 * (> 0); -1 when count is 0 (no partitions). */
int schema_chunk_partition(const uint64_t *index, int rank, int count);

/* Key of the domain summary db/A-B/.info.json of a v2 root id (§3.7). */
int schema_info_key(const char *root_id, char *buf, size_t len);

/* "/home/u/x.h5" -> "home/u/x.h5/.domain.json". The path must start with '/', not end with
 * '/', and have no empty, "." or ".." component. */
int schema_domain_key(const char *path, char *buf, size_t len);

/* The domain path of a key ending in "/.domain.json" (inverse of schema_domain_key). */
int schema_domain_path(const char *key, char *buf, size_t len);

/* 1 if name may be a domain or folder name: non-empty, at most 255 bytes, valid UTF-8, no
 * '/', no control characters, not "." or "..". */
int schema_name_valid(const char *name, size_t len);

/*
 * May path ("/home/u/x.h5") name a domain or folder? The one rule for what the namespace shows
 * and what may be created, renamed or made a folder. 0 if it may; -EINVAL if it never can: a
 * name that is not valid (schema_name_valid), or a part called ".domain.json" (the key of the
 * parent's own object) or starting with SCHEMA_TMP_NAME_PREFIX; -EPERM for /db and below
 * (HSDS's object tree) and for a SCHEMA_VERSIONS_DIR component at any depth (versions are
 * made by h5osfs's version operations only). *why (if why is not NULL) gets a short reason, NULL on 0.
 */
int schema_domain_path_allowed(const char *path, const char **why);

/* The same rule for one name (no '/'), wherever it is to be: 0, or -EINVAL for a name that is
 * not valid or that the bucket reserves, with *why as schema_domain_path_allowed gives it. */
int schema_name_allowed(const char *name, const char **why);

/* ---- versions (issue 26; doc/versions.md §3) ---- */

/* The hidden folder beside a domain that holds its versions: DIR/.versions/NAME/. */
#define SCHEMA_VERSIONS_DIR ".versions"

/* 1 if a component of path is SCHEMA_VERSIONS_DIR, 0 if none. */
int schema_is_versions_path(const char *path);

/* "/DIR/NAME" -> "/DIR/.versions/NAME" (a path, not a key). */
int schema_versions_dir(const char *domain_path, char *buf, size_t len);

/* "/DIR/NAME", "3.h5" -> "/DIR/.versions/NAME/3.h5": the version's own domain path. */
int schema_version_domain_path(const char *domain_path, const char *name, char *buf, size_t len);

/* The inverse: "/DIR/.versions/NAME/x" -> "/DIR/NAME". -EINVAL unless path is exactly a
 * version's path (one .versions component, followed by two names). */
int schema_version_domain_of(const char *path, char *buf, size_t len);

/* "/DIR/NAME" -> "DIR/.versions/NAME/.h5osfs-versions": the key of its version list. */
int schema_vlist_key(const char *domain_path, char *buf, size_t len);

/* Is s 32 lowercase hex digits: an MD5 as a pool key names it, and as a single-part S3
 * object's ETag is (a local bucket's etags are longer, multipart ones end in "-N")? */
int schema_is_md5_hex(const char *s);

/* The pool object of a chunk: "db/<pool's A-B>/c/<md5>" for a root group id pool and 32
 * lowercase hex digits md5. */
int schema_pool_key(const char *pool, const char *md5, char *buf, size_t len);

/* A version's copy of a linked file (ingest=link) kept in pool, shared by every version whose
 * file has those bytes: "db/<pool's A-B>/f/<name>", name 32 lowercase hex digits (those of the
 * version root that first kept it). 0, -EINVAL, -ENAMETOOLONG. */
int schema_pool_file_key(const char *pool, const char *name, char *buf, size_t len);

/* The name of the pool file at key ("db/<A-B>/f/<32 hex>"), pointing into key; NULL: key is
 * no pool file's. Which pool, the caller checks (pool.h). */
const char *schema_pool_file_name(const char *key);

/* The key of the pool file a linked layout's file_uri names (in any form schema_linked_uri_key
 * takes), pointing into uri; NULL: it names none. Which pool, the caller checks (pool.h). */
const char *schema_pool_file_uri_key(const char *uri, const char *bucket);

/* The marker of pool, "db/<pool's A-B>/.h5osfs-pool": whose pool it is (domops/vpool.h). */
int schema_pool_marker_key(const char *pool, char *buf, size_t len);

/* Is uri "<bucket>/<schema_pool_key(pool, md5)>" for some md5? 0 (and *key, if key is not
 * NULL, points at the key inside uri) or -EINVAL: a table entry that names anything else
 * must not be read. */
int schema_pool_uri_check(const char *uri, const char *bucket, const char *pool, const char **key);

/* The store key a linked layout's file_uri names (spec §8: "s3://BUCKET/KEY", "file://BUCKET/KEY"
 * or "BUCKET/KEY"), for a dataset of the domain whose root is root_id, in bucket. 0 (*key
 * points at the key inside uri); -EINVAL: not a key of this bucket; -EPERM: an object of a
 * domain (its .domain.json, a v1 object, a v2 object not below root_id's own db/A-B/), whose
 * bytes a link must not reach past that domain's ACL. any_object: skip that rule (a version's
 * table, whose entries were checked against its pool). Pure: no store is asked. */
int schema_linked_uri_key(const char *uri, const char *bucket, const char *root_id, int any_object,
                          const char **key);

/* db/A-B/.h5osfs-file of v2 root id root: where a linked ingest keeps the file its datasets
 * point into (HSDS's scanner skips a key of that shape), and where a kept version keeps its
 * own copy of it. 0, or -ENAMETOOLONG. */
int schema_linked_file_key(const char *root, char *key, size_t len);

/* Does a linked layout's file_uri name root's own file (schema_linked_file_key), in any of
 * the forms schema_linked_uri_key takes? What a kept version may read its linked bytes from:
 * a file elsewhere in the bucket may have been replaced since the commit. 1 or 0. */
int schema_linked_own_file(const char *uri, const char *bucket, const char *root);

/* May a kept version whose root is root read a dataset through the linked layout lay (no
 * pool claim)? A chunk table, if any, is a dataset of root (kept with it, not another root's,
 * which may change), and its file_uri names root's own file (1) or a file of a version pool
 * (SCHEMA_LINKED_POOL_FILE, *pool_key, if not NULL, pointing at its key inside the URI): the
 * caller must then check that pool is the domain's (pool.h), or refuse it. 0: neither. */
#define SCHEMA_LINKED_POOL_FILE 2
int schema_version_linked_ok(const json_t *lay, const char *bucket, const char *root,
                             const char **pool_key);

/* Whether commits below a folder keep versions (its xattr user.h5osfs.versions): the member
 * "h5osfs": {"versions": "on" | "off" | "keep:N" | "ref"} of its .domain.json. keep:N is on,
 * keeping the newest N untagged versions (N >= 1); on keeps all (keep 0); ref is on with the
 * current domain naming its newest version itself (-o versions_current=ref, doc/versions.md
 * §2 B): no plain root beside the versions, and HSDS may not write the domain. */
enum schema_versions_mode { SCHEMA_VERSIONS_UNSET, SCHEMA_VERSIONS_ON, SCHEMA_VERSIONS_OFF };
struct schema_versions {
    enum schema_versions_mode mode;
    unsigned keep;
    int ref; /* "ref": the current domain is its head version (else the mount's default) */
};
#define SCHEMA_VERSIONS_TEXT_MAX 16 /* "keep:" and up to 9 digits, NUL */
#define SCHEMA_VERSIONS_KEEP_MAX 999999999u

/* Parse "on", "off", "keep:N" (len bytes, no NUL needed). 0 or -EINVAL (*out UNSET). */
int schema_versions_parse(const char *text, size_t len, struct schema_versions *out);

/* And back, into buf[SCHEMA_VERSIONS_TEXT_MAX]; -EINVAL for UNSET. */
int schema_versions_text(const struct schema_versions *v, char *buf, size_t len);

/* ---- domain JSON (§3.1) and ACLs (§9) ---- */

enum schema_right {
    SCHEMA_ACL_CREATE = 1u << 0,
    SCHEMA_ACL_READ = 1u << 1,
    SCHEMA_ACL_UPDATE = 1u << 2,
    SCHEMA_ACL_DELETE = 1u << 3,
    SCHEMA_ACL_READ_ACL = 1u << 4,
    SCHEMA_ACL_UPDATE_ACL = 1u << 5,
};
#define SCHEMA_ACL_ALL 0x3fu

struct schema_acl {
    char *user;      /* user name, "default", or "g:<group>" */
    unsigned rights; /* enum schema_right bits */
};

/* How new files below a folder are stored (the folder's xattr user.h5osfs.ingest): the member
 * "h5osfs": {"ingest": "link" | "copy"} of its .domain.json, which HSDS keeps and ignores. */
enum schema_ingest { SCHEMA_INGEST_UNSET, SCHEMA_INGEST_COPY, SCHEMA_INGEST_LINK };
#define SCHEMA_H5OSFS_MEMBER "h5osfs"

struct schema_domain {
    char *root; /* root group id; NULL for a folder */
    char *owner;
    struct schema_acl *acls;
    size_t n_acls;
    double created;
    double last_modified;
    enum schema_ingest ingest;       /* UNSET when absent or not one of the two words */
    struct schema_versions versions; /* folders: UNSET when absent or not valid */
    /* A domain whose .domain.json names its head version (versions_current=ref): its "acls"
     * deny HSDS every write, and acls above are the real ones, from "h5osfs": {"current":
     * "ref", "acls": {...}}, which h5osfs enforces through the mount. */
    int current_ref;
};

/* The member of a ref-mode domain's .domain.json that holds its real ACLs (see above). */
#define SCHEMA_CURRENT_REF "current"

/* "copy", "link" -> COPY, LINK; anything else UNSET. And back (UNSET: NULL). */
enum schema_ingest schema_ingest_parse(const char *text, size_t len);
const char *schema_ingest_name(enum schema_ingest mode);

/*
 * Parse and validate a .domain.json. On failure returns -EINVAL and writes a short reason
 * ("not a JSON object", "root is not a root group id", ...) into why. Unknown members, and
 * unknown keys inside ACL entries (HSDS's stray "domain"), are ignored.
 */
int schema_domain_parse(const char *json, size_t len, struct schema_domain *out, char *why,
                        size_t why_len);
void schema_domain_free(struct schema_domain *dom);

/* Rights of user on the domain, decided as HSDS decides (§9): admin_user gets everything;
 * the user's own entry is authoritative; then "default"; then "g:<group>" entries for each
 * of the n_groups groups; otherwise nothing. */
unsigned schema_acl_rights(const struct schema_domain *dom, const char *user,
                           const char *admin_user, const char *const *groups, size_t n_groups);

/* The "acls" member of a kept version's domain object (issue 26: readable by whoever may read
 * the domain, writable by nobody): every entry of the domain's acls, its "default" and
 * "g:<group>" ones too, with its read right as it is and every other right false; an entry
 * without read stays, all false, so that it still overrides "default" (§9). acls not an
 * object (NULL): owner alone may read. A new reference, or NULL (no memory). */
json_t *schema_acls_read_only(const json_t *acls, const char *owner);

#endif
