/*
 * vdrop: rmdir of a version folder DIR/.versions/NAME once the domain DIR/NAME is gone and
 * every name of its versions has been removed (issue 26, doc/versions.md §4.6: the second half
 * of `rm -r DIR/.versions/NAME`). What is left in the bucket then is only what the removed
 * versions still hold: their roots db/V_n/ (until the collector got to them), the lineage's
 * pool db/P/, the version list and the HSDS folder objects. Nothing else can name any of it:
 * no kept version is left, and the domain, whose next commit would continue the list, is gone.
 * So it is all deleted here, at once, the list after the data it describes: a crash part way
 * leaves the folder listed and empty, and a second rmdir finishes it. The folder DIR/.versions
 * itself goes with its last version folder.
 *
 * domain: the mount path "/DIR/NAME". 0; -ENOENT (no such version folder); -ENOTEMPTY (a
 * version still has a name); -EIO (the store, or an unusable list; logged).
 */
#ifndef H5OSFS_VDROP_H
#define H5OSFS_VDROP_H

#include "h5osfs/store/store.h"

int vdrop_folder(struct store *store, const char *domain);

/* rmdir of DIR/.versions (dir: "/DIR"): its HSDS folder object, when no version folder is
 * left below it. 0, -ENOTEMPTY, -EIO. */
int vdrop_versions_dir(struct store *store, const char *dir);

#endif
