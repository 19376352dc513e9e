/*
 * notify: tells the kernel, from a thread of its own, that a name it may have cached no longer
 * names the same inode (a domain got a new version by a commit of this mount). Sending the
 * notification from the request that caused it could deadlock: the kernel takes the parent
 * directory's lock to act on it, and a setattr or unlink of that name holds it. Thread-safe.
 */
#ifndef H5OSFS_FS_NOTIFY_H
#define H5OSFS_FS_NOTIFY_H

#include <fuse_lowlevel.h>

struct notifier;

/* Start the thread that sends notifications on session se. 0 or -errno. */
int notifier_start(struct fuse_session *se, struct notifier **out);
/* Queue "name in directory parent is stale" (best effort: dropped when out of memory). */
void notifier_entry(struct notifier *n, fuse_ino_t parent, const char *name);
/* Wait until everything queued so far is sent (NULL: nothing to wait for). Call it holding no
 * lock a request might need. */
void notifier_drain(struct notifier *n);
/* Send what is queued, stop the thread and free (NULL: nothing). */
void notifier_stop(struct notifier *n);

#endif
