/*
 * vnames: the names of kept versions (issue 26, doc/versions.md §4.3-4.4), changed through the
 * version list DIR/.versions/NAME/.h5osfs-versions with a read-modify-put_if loop that
 * re-applies its one change on a fresh read, so that concurrent changes from other mounts all
 * land and no entry is lost.
 *
 * The list is the truth for h5osfs readers; each name also has an HSDS domain object
 * DIR/.versions/NAME/<name>/.domain.json (read-only, naming the version's root), written after
 * the list put (a tag) or deleted after it (a removal). A version left without a name is
 * marked "removing" in the list; nothing is deleted here: sweep.h collects its root and the
 * pool objects no other version names.
 *
 * Paths are mount paths "/DIR/.versions/NAME/<entry>". Errors: negative errnos, logged once
 * where understood: -ENOENT (no such list or name), -EINVAL (a tag of the form "<digits>.h5"
 * or an invalid name, or paths not in one version folder), -EEXIST, -EBUSY (the current
 * version's number, or its only name), -EIO (the store, or an unusable list).
 *
 * Test hook: with H5OSFS_TEST_CRASH_AT = "tagged" or "unnamed" the daemon is killed right
 * after the list put of a tag or a removal.
 */
#ifndef H5OSFS_VNAMES_H
#define H5OSFS_VNAMES_H

#include "h5osfs/store/store.h"

/* Give the version that existing names the extra name tag (both entries of domain's list);
 * owner owns the tag's HSDS domain object. */
int vnames_tag(struct store *store, const char *owner, const char *domain, const char *existing,
               const char *tag);

/* Drop name from domain's list. current_root is the domain's root now ("" when the domain is
 * gone): the version that made it is the current one, whose number stays. */
int vnames_remove(struct store *store, const char *domain, const char *name,
                  const char *current_root);

/* Delete the HSDS domain object of name (gone already: 0). 0 or the store's -errno. */
int vnames_delete_object(struct store *store, const char *domain, const char *name);

#endif
