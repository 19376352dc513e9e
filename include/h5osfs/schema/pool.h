/*
 * pool: which version pool a pooled chunk table may name (doc/versions.md §3). A layout's
 * "h5osfs": {"pool": P} claims that the table's entries are objects of pool P. The claim holds
 * only for a domain's own pool, the one its version list names, and only where that domain's
 * chunks may live in it:
 *   - a kept version, DIR/.versions/NAME/<x>: the pool of DIR/NAME's list;
 *   - the current domain DIR/NAME reading a version's root (versions_current=ref): its list
 *     has the root being read as a version or, failing that, its object's h5osfs member says
 *     ref and names that root; again its list's pool. The list comes first: a build that
 *     chose the head version before another mount's commit still reads it.
 * Anything else naming a pool is refused, so that no bucket writer can point one domain's
 * datasets at another's objects. Rules only: the caller's get() fetches the objects.
 */
#ifndef H5OSFS_SCHEMA_POOL_H
#define H5OSFS_SCHEMA_POOL_H

#include <stddef.h>

#include <jansson.h>

#include "h5osfs/schema/schema.h"

struct schema_fetch {
    void *ctx;
    /* The object at key, at most max bytes, into *data (malloc'd: the caller frees it) and
     * *len. 0 or -errno. */
    int (*get)(void *ctx, const char *key, size_t max, unsigned char **data, size_t *len);
};

/*
 * Whether claimed is the pool the datasets of domain_path (a path: "/DIR/NAME" or
 * "/DIR/.versions/NAME/<x>"), whose root being read is root_id, may name. 0 (yes), -EINVAL
 * (no, or an object needed to tell cannot be read or used: why says which), -ENOMEM.
 */
int schema_pool_check(const char *domain_path, const char *root_id, const char *claimed,
                      const struct schema_fetch *fetch, char *why, size_t why_len);

/*
 * Whether key, a pool file (schema_pool_file_key) that a linked layout of domain_path names,
 * is a file of its domain's own pool (its list names it, its marker names the domain), as
 * schema_pool_check says of a pooled table: for a kept version ("/DIR/.versions/NAME/<x>"),
 * DIR/NAME's pool; for the current domain, only where root_id is a version's root (as for
 * schema_pool_check): a current root of its own owns its file. pool: that pool's id if
 * already found ("" not yet: set when found now). 0 (yes), -EINVAL (no, or an object needed
 * to tell cannot be read: why says which), -ENOMEM.
 */
int schema_pool_file_check(const char *domain_path, const char *root_id, const char *key,
                           const struct schema_fetch *fetch, char pool[SCHEMA_ID_BUF], char *why,
                           size_t why_len);

/*
 * Does group, a root group's JSON, say it is a version over pool ("h5osfs": {"pool": P},
 * written with each version: domops/vpool.h)? 1 yes, 0 no (why says what it names instead).
 * The proof the collector asks before deleting a version root, and a read before serving one.
 */
int schema_pool_root_names(const json_t *group, const char *pool, char *why, size_t why_len);

/*
 * Whether group, the JSON of root_id's root group, may be served as domain_path's root: a kept
 * version's must be a version over its domain's own pool (the one schema_pool_check allows:
 * its list's, whose marker names the domain), or a list writer could show another domain's
 * groups and attributes through this one; so must a current domain's root that names a pool
 * and is a version of it (its list has it, or its object names it in ref mode: the head
 * version's root). Any other root is the domain object's to name, as HSDS reads it (a pool its
 * tables name is refused by schema_pool_check). 0 with pool that pool ("" none checked),
 * -EINVAL (no, or an object needed to tell cannot be read: why says which), -ENOMEM.
 */
int schema_pool_root_check(const char *domain_path, const char *root_id, const json_t *group,
                           const struct schema_fetch *fetch, char pool[SCHEMA_ID_BUF], char *why,
                           size_t why_len);

/*
 * A version root's group names the pool file its linked datasets read, and the store's etag of
 * that file when the version was kept: "h5osfs": {"pool": P, "file": NAME, "file_etag": E}.
 * Pool files are not named by their content (a multi-GiB MD5 per commit), so the etag is what
 * tells a reader that the file is still the one the version kept: every ranged read of it
 * must come back with E (a local bucket's etag is a change token: inode, size, mtime).
 */
#define SCHEMA_POOL_FILE "file"
#define SCHEMA_POOL_FILE_ETAG "file_etag"
#define SCHEMA_POOL_ETAG_BUF 65 /* store_stat.etag */

/* The pool file group (a version root group's JSON) names, into name (an MD5 in hex; "" none
 * named: a version kept before pool files, or of no linked file), and the etag kept for it,
 * into etag ("" none: a version kept before etags; an etag beside no name is none). 0, or
 * -EINVAL (why; name and etag "") for a member no commit writes: a name that is no MD5, or an
 * etag no store gives. The one reader of that member: commits, restores and readers ask it. */
int schema_pool_file_named(const json_t *group, char name[33], char etag[SCHEMA_POOL_ETAG_BUF],
                           char *why, size_t why_len);

/* The etag group recorded for pool file key, into etag ("" when it records none: a version
 * kept before etags, or a group that names no file). 0, or -EINVAL (why) when it names another
 * file, or its member is one no commit writes (schema_pool_file_named). */
int schema_pool_file_recorded(const json_t *group, const char *key, char etag[SCHEMA_POOL_ETAG_BUF],
                              char *why, size_t why_len);

/* A pool's marker (db/<P>/.h5osfs-pool, schema_pool_marker_key; domops/vpool.h), naming the
 * domain path whose pool it is: {"domain": "/DIR/NAME"}; while an mv hands the pool on,
 * {"domain": "/NEW", "moving_from": "/OLD"} (domops/vmove.h). The bytes of one naming domain
 * and, unless NULL, the domain it is moving from, into *out (malloc'd, NUL-terminated). 0 or
 * -ENOMEM. */
#define SCHEMA_POOL_MOVING_FROM "moving_from"
int schema_pool_marker_dump(const char *domain, const char *moving_from, char **out);
#define SCHEMA_POOL_MARKER_MAX 16384 /* its bytes at most: two paths of 1024 bytes, escaped */

/* A marker's len bytes: the domain that owns the pool into owner and the one an mv is
 * handing it on from into moving_from ("" none). 0, or -EINVAL for bytes that are no marker
 * (owner ""). */
int schema_pool_marker_read(const void *data, size_t len, char *owner, size_t owner_len,
                            char *moving_from, size_t from_len);

/* What a marker's len bytes say of domain: SCHEMA_POOL_OWNER (its pool), SCHEMA_POOL_MOVING
 * (its pool until the mv that hands it on ends: read it and add to it, delete nothing), or 0
 * (another domain's, or no marker), with the domain they name in named ("" for bytes that are
 * no marker). */
enum { SCHEMA_POOL_OWNER = 1, SCHEMA_POOL_MOVING = 2 };
int schema_pool_marker_names(const void *data, size_t len, const char *domain, char *named,
                             size_t named_len);

/* The MD5 a pool object's key names ("db/<A-B>/c/<md5>"): its last 32 characters. NULL: key
 * is no pool object's key. */
const char *schema_pool_key_md5(const char *key);

/* The MD5 of len bytes at data, as 32 lowercase hex digits. 0 or -EIO. */
int schema_md5_hex(const void *data, size_t len, char out[33]);

/*
 * A pool object is content addressed: its key (schema_pool_key) names the MD5 of its bytes,
 * and anyone who may write the bucket may write other bytes there. Whether data (len bytes
 * of the object at key, fetched with the store's etag: "" when it gave none) are bytes of
 * the object the key names: 0, -EIO (why says what differs), -EINVAL (key is no pool key).
 * An etag that is an MD5 is the server's own hash of the whole object (a single-part S3
 * object): equal to the key's, any range of that object is right, and nothing is hashed.
 * Otherwise (a local bucket, a multipart or encrypted object) data are hashed, so they must
 * be the whole object.
 */
int schema_pool_bytes_check(const char *key, const void *data, size_t len, const char *etag,
                            char *why, size_t why_len);

#endif
