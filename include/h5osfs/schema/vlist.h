/*
 * vlist: a domain's version list, the object DIR/.versions/NAME/.h5osfs-versions (issue 26;
 * the design's §3.3), as pure functions on memory: parse, validate, change, dump.
 *
 *   {"format": 1, "domain": "/DIR/NAME", "pool": "g-…", "next": 4, ["dropping": true,]
 *    "versions": [{"n": 1, "root": "g-…", "time": 1764390000.123, "by": "alice@host",
 *                  "parent": 0, "size": 4096, "stamp": "…", "names": ["1.h5"],
 *                  "state": "kept"}, …]}
 *
 * A list whose frame is broken (not JSON, unknown format, no pool) is refused whole. A
 * malformed entry is an error for that entry only: it keeps its number when it has one (its
 * "<n>.h5" then names a broken version), its text is written back unchanged by vlist_dump,
 * and the other entries stay usable. No I/O, no global state: the store side (a put_if loop
 * that re-applies an operation on a fresh read) lives in src/commit (versions.c) and
 * src/domops (vnames.c).
 */
#ifndef H5OSFS_VLIST_H
#define H5OSFS_VLIST_H

#include <stddef.h>
#include <stdint.h>

#include "h5osfs/schema/schema.h"

#define VLIST_FORMAT 1
/* A list being dropped (rm -r) says format 2: a daemon from before the mark finds it
 * unusable, so it neither adds a version to the lineage being deleted nor writes the list
 * back without the mark. */
#define VLIST_FORMAT_DROPPING 2
#define VLIST_OBJECT_NAME ".h5osfs-versions" /* in DIR/.versions/NAME/ */
#define VLIST_NAME_MAX 255
#define VLIST_MAX_BYTES (64u << 20) /* ~230 bytes a version: far more than any list */

enum vlist_state {
    VLIST_KEPT,     /* named, readable */
    VLIST_REMOVING, /* no name left: its objects are being deleted */
};

struct vlist_entry {
    uint64_t n; /* 0 when a malformed entry has no usable number */
    char root[SCHEMA_ID_BUF];
    double time; /* commit time, seconds since the epoch */
    char *by;    /* who committed it ("" when unknown) */
    uint64_t parent;
    char base[SCHEMA_ID_BUF];    /* the domain's root this commit replaced ("" new or unknown):
                                  * a second commit on the same base lost the race (ESTALE) */
    char current[SCHEMA_ID_BUF]; /* the domain's root this commit made ("" unknown): a commit
                                  * listed but not swapped when its daemon died is finished */
    uint64_t size;               /* synthesised image size under stamp; 0 unknown */
    char *stamp;                 /* image format stamp of size ("" unknown) */
    char **names;                /* "<n>.h5" while the number is kept, then tags */
    size_t n_names, cap_names;
    enum vlist_state state;
    const char *error; /* NULL: valid; else why the entry cannot be used (static text) */
    char *raw;         /* a malformed entry's JSON text, dumped back as it was */
};

struct vlist {
    char *domain; /* "/DIR/NAME" when the list was written */
    char pool[SCHEMA_ID_BUF];
    uint64_t next; /* the number the next version gets; never decreases */
    int dropping;  /* "dropping": true, put by rm -r of the version folder before it deletes
                    * anything: no commit adds a version to a lineage being deleted */
    struct vlist_entry *entries;
    size_t n_entries, cap_entries;
};

/* A new, empty list for domain with pool (a root group id). 0, -EINVAL, -ENOMEM. */
int vlist_init(struct vlist *l, const char *domain, const char *pool);

/* Parse json into *out. -EINVAL (with a reason in why) when the frame is broken; malformed
 * entries are kept with their error set. -ENOMEM. */
int vlist_parse(const char *json, size_t len, struct vlist *out, char *why, size_t why_len);

/* The list as JSON (hjson_dumps's form), *out malloc'd. 0, -EINVAL, -ENOMEM. */
int vlist_dump(const struct vlist *l, char **out);

void vlist_free(struct vlist *l);

/* n from "<n>.h5" (decimal, no sign, no leading zero, n > 0): 1; any other name: 0. */
int vlist_number_name(const char *name, uint64_t *n);

/* The entry name refers to: a name of a valid entry, or "<n>.h5" of a malformed one (its
 * error says why it cannot be read). NULL: none. */
const struct vlist_entry *vlist_lookup(const struct vlist *l, const char *name);

/* The entry with number n, or NULL. */
const struct vlist_entry *vlist_entry_of(const struct vlist *l, uint64_t n);

/* The highest-numbered valid entry that is kept, or NULL. */
const struct vlist_entry *vlist_latest(const struct vlist *l);

/* Append a version with root: it gets number next (then next++), parent = the latest valid
 * entry's number, names ["<n>.h5"]. *n_out (may be NULL) gets its number. 0, -EINVAL (root
 * not a root group id), -ENOMEM. vlist_append_on also records base, the domain root the
 * commit replaced. */
int vlist_append(struct vlist *l, const char *root, double time, const char *by, uint64_t size,
                 const char *stamp, uint64_t *n_out);
int vlist_append_on(struct vlist *l, const char *base, const char *current, const char *root,
                    double time, const char *by, uint64_t *n_out);

/* The valid entry whose commit made the domain root current, or NULL. */
const struct vlist_entry *vlist_listed_as(const struct vlist *l, const char *current);

/* The valid entry of a commit that replaced base (non-empty), or NULL: a commit on base that
 * finds one lost to that other writer. */
const struct vlist_entry *vlist_committed_on(const struct vlist *l, const char *base);

/* Give the version called existing the extra name tag. -EINVAL: tag is "<digits>.h5",
 * VLIST_OBJECT_NAME, or a name no domain may have (schema_name_allowed); -EEXIST: tag names a
 * version already; -ENOENT: no valid version is called existing. */
int vlist_name(struct vlist *l, const char *existing, const char *tag);

/* Drop name; a version left without a name becomes VLIST_REMOVING. -EBUSY: name is head's
 * number, or head's only name (head 0: no head, as after the domain's removal); -ENOENT. */
int vlist_unname(struct vlist *l, const char *name, uint64_t head);

/* Keep the newest keep untagged versions (names == ["<n>.h5"] only): older ones become
 * VLIST_REMOVING, never head. keep 0 keeps all. Returns how many it unnamed. */
size_t vlist_expire(struct vlist *l, unsigned keep, uint64_t head);

/* Remove entry n from the list (its objects are gone). 0 or -ENOENT. */
int vlist_drop(struct vlist *l, uint64_t n);

#endif
