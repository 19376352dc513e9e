/*
 * vmove: a domain's kept versions follow it when it is renamed (issue 26, doc/versions.md
 * §4.7). The version folder DIR/.versions/NAME/ holds the version list (.h5osfs-versions),
 * the folder object and one HSDS domain object per name; they are copied to the new name's
 * folder (the names first, the list last: a list there means its names are there too), and
 * only once the domain itself has moved are the old ones deleted (the list first, so h5osfs
 * readers stop seeing the old history at once). Roots and the pool stay where they are: their
 * keys do not depend on the path.
 *
 * A crash in between leaves the history under the old name, the new name, or both; a list
 * at the new name with the same pool as the old one is a copy of it, so mv again overwrites
 * it and finishes the move.
 *
 * Test hook: with H5OSFS_TEST_CRASH_AT=vmoved the daemon is killed right after the versions
 * are copied, before the domain moves.
 */
#ifndef H5OSFS_VMOVE_H
#define H5OSFS_VMOVE_H

#include <stddef.h>

#include "h5osfs/store/store.h"

enum vmove_plan {
    VMOVE_NONE,         /* neither name has versions */
    VMOVE_MOVE,         /* from's versions go to to (to has none, or a copy of from's) */
    VMOVE_TARGET_KEEPS, /* to has versions of its own: they stay, from's stay at from */
};

/* What renaming domain from to to does with their versions. 0 or -errno (logged). */
int vmove_plan(struct store *store, const char *from, const char *to, enum vmove_plan *plan);

/* Copy from's version folder to to's (VMOVE_MOVE), then the test hook "vmoved". 0 or -errno
 * (logged); from's versions are untouched either way. */
int vmove_copy(struct store *store, const char *from, const char *to);

/* Delete from's version folder once the domain has moved (failures logged: what stays is
 * shown under the old name, nothing is lost). 0 when its list is gone (the move may be
 * settled: vmove_settle), else -errno. */
int vmove_drop(struct store *store, const char *from);

/* The end of a move whose old list is gone (vmove_drop of from, or a folder's old lists
 * deleted): the pool's marker names the new domain alone (vpool.h; failures logged: the
 * next mv settles it). to: the domain; to_key: its list's key. */
void vmove_settle(struct store *store, const char *to);
void vmove_settle_list(struct store *store, const char *to_key);

/* A move that failed after vmove_copy: to's copy dropped (vmove_drop), and the pool's marker
 * names from alone again. */
void vmove_undo(struct store *store, const char *from, const char *to);

/* Is key a version list (".../.versions/NAME/.h5osfs-versions")? 1 or 0. */
int vmove_is_list_key(const char *key);

/* A folder's move: the version list at from_key, copied to to_key (a list key too) and
 * naming the domain its new key gives. 0 or -errno (logged). */
int vmove_copy_list_to(struct store *store, const char *from_key, const char *to_key);

#endif
