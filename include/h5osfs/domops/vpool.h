/*
 * vpool: which domain a version pool and a version root belong to, told by objects under db/,
 * never by the version list alone (doc/versions.md §3.1).
 *
 * The list DIR/.versions/NAME/.h5osfs-versions is a key among the domain's own, which a
 * writer may be allowed to write (a key policy of the store that grants DIR/ and not db/,
 * or a forged list) without being allowed anything under db/. Everything h5osfs deletes for a
 * list (a removed version's root, the pool's unnamed objects, a whole pool at rm -r) must
 * first be shown to be that list's:
 *   - the pool db/P/ holds the marker db/P/.h5osfs-pool, {"domain": "/DIR/NAME"}, written
 *     when the pool is made and moved with the domain (mv);
 *   - a version root's root group carries "h5osfs": {"pool": P}, written with the version.
 * A pool without its marker, or one naming another domain, and a root that does not name the
 * list's pool are never deleted through that list (one log line each). Pools and roots
 * written before the markers existed are kept for ever that way: space, never data.
 */
#ifndef H5OSFS_VPOOL_H
#define H5OSFS_VPOOL_H

#include "h5osfs/store/store.h"

/* The marker of pool naming domain ("/DIR/NAME"), and moving_from (NULL: none) while an mv
 * hands the pool from that domain to this one, put. 0 or -errno. */
int vpool_claim(struct store *store, const char *pool, const char *domain, const char *moving_from);

/* Does pool's marker name domain? 1 yes, 0 no (or no marker, or an unusable one: logged with
 * what; a pool with nothing left under it is not logged; one an mv is handing on from domain
 * is logged as such), -errno when the store cannot tell. What deletes through a list asks
 * this. A pool's marker is the last of its objects deleted (vpool_delete_pool). */
int vpool_owned_by(struct store *store, const char *pool, const char *domain);

/* An mv's hand-over of pool from domain from to domain to: only a pool whose marker names
 * from as its owner is handed on, and then the marker names both until the move ends
 * ({"domain": to, "moving_from": from}: vpool_move_done). 1 handed on, 0 not (from's list
 * named a pool that is not from's, or this move already handed it on), -errno. */
int vpool_hand_on(struct store *store, const char *pool, const char *from, const char *to);

/* May a commit of domain keep its next version in pool, the one its list names? 1 yes, the
 * marker names domain (also as the domain an mv is handing it on from); 0 yes, the pool has
 * no marker (made before markers); -EPERM no, the marker names another domain (logged: the
 * commit goes on without a version, rather than put the domain's chunks where they would be
 * unreadable and another domain's sweep would delete them); other -errno when the store
 * cannot tell. */
int vpool_may_keep(struct store *store, const char *pool, const char *domain);

/* The end of an mv that handed pool from one domain to to: done (the old list is gone), the
 * marker names to alone; undone (to's copy dropped), it names from again. Either only when
 * the marker still says this move is under way. 0 or -errno (logged). */
int vpool_move_done(struct store *store, const char *pool, const char *to);
int vpool_move_undone(struct store *store, const char *pool, const char *to, const char *from);

/* The domain pool's marker names as its owner, into owner. 0, -ENOENT (no marker), -EINVAL
 * (no usable marker), -errno. */
int vpool_owner(struct store *store, const char *pool, char *owner, size_t owner_len);

/* 1 when nothing is left under root's prefix db/<A-B>/ (collected, or never written), 0 when
 * something is, -errno. */
int vpool_root_is_gone(struct store *store, const char *root);

/* Does root's root group say it is a version over pool? 1 yes, 0 no (logged with what),
 * -ENOENT when it has no root group (not logged: a root already collected, or no root at all,
 * such as a pool: the caller tells whether anything is left under it), other -errno when the
 * store cannot tell. */
int vpool_root_of(struct store *store, const char *root, const char *pool, const char *domain);

/* Every key below prefix except keep (NULL: none), listed once before the first delete; a key
 * already gone counts as deleted. stage (NULL: none) is a crash point after the first delete
 * (util/testhook.h). 0 or -errno. */
int vpool_delete_below(struct store *store, const char *prefix, const char *keep,
                       const char *stage);

/* Every object of a root, or of a pool, deleted with the object that shows whose the rest are
 * last: the root group (what vpool_root_of reads), the pool's marker (vpool_owned_by). So a
 * collector, a sweep or a later rm -r that meets it half deleted (running at the same time,
 * or after a kill) still sees it as the domain's and finishes it, never objects that show no
 * owner (which they keep for ever). 0, -EINVAL (not a root id), -errno. */
int vpool_delete_root(struct store *store, const char *root, const char *stage);
int vpool_delete_pool(struct store *store, const char *pool, const char *stage);

#endif
