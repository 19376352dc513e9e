/*
 * vdrop: rmdir of a version folder DIR/.versions/NAME once the domain DIR/NAME is gone and
 * every name of its versions has been removed (issue 26, doc/versions.md §4.6: the second half
 * of `rm -r DIR/.versions/NAME`). What is left in the bucket then is only what the removed
 * versions still hold: their roots db/V_n/ (until the collector got to them), the lineage's
 * pool db/P/, the version list and the HSDS folder objects. Nothing else can name any of it:
 * no kept version is left, and the domain, whose next commit would continue the list, is gone.
 * Before anything is deleted the list is marked "dropping" (a conditional put; format 2, which
 * daemons from before the mark refuse): a commit of the domain that lists a version first
 * makes the mark fail (-ENOTEMPTY); one that comes after keeps no version in this lineage. So
 * it is all deleted here, at once, the list after the data it describes: a crash part way
 * leaves the folder listed, empty and marked, and a second rmdir finishes it, also once the
 * domain exists again (its commits kept no version here). The folder DIR/.versions itself goes
 * with its last version folder.
 *
 * domain: the mount path "/DIR/NAME". 0; -ENOENT (no such version folder); -ENOTEMPTY (a
 * version still has a name); -EIO (the store, or an unusable list; logged).
 */
#ifndef H5OSFS_VDROP_H
#define H5OSFS_VDROP_H

#include "h5osfs/store/store.h"

int vdrop_folder(struct store *store, const char *domain);

/* Is the version list of domain marked "dropping" by an rmdir that has not finished? 1 yes,
 * 0 no (or no usable list), -errno when the store cannot tell. */
int vdrop_is_dropping(struct store *store, const char *domain);

/* rmdir of DIR/.versions (dir: "/DIR"): its HSDS folder object, when no version folder is
 * left below it; put back when a first version below it was committed while it was removed.
 * 0, -ENOTEMPTY, -EIO (logged), -ENOMEM. */
int vdrop_versions_dir(struct store *store, const char *dir);

#endif
