/*
 * stack: every part of a mount, built in one place from the bottom up (doc/design.md,
 * "Layers") and torn down in the reverse order: the store, the namespace, the chunk cache, the
 * image table, the callers, on a read-write mount the journal and staging, the collector, and
 * fs on top. Threads (read-ahead, the kernel notifier, the collector) and the journal's
 * recovery start only with stack_start, after daemonising: a fork keeps no thread.
 */
#ifndef H5OSFS_MAIN_STACK_H
#define H5OSFS_MAIN_STACK_H

#include <signal.h>
#include <fuse_lowlevel.h>

#include "h5osfs/cache/cache.h"
#include "h5osfs/fs/fs.h"
#include "options.h"

struct stack;

/* 0, or -1 with the reason printed on stderr in one line (the mount is refused) and every part
 * already made undone. */
int stack_open(const struct options *opts, struct stack **out);
/* Take the stack down (NULL: nothing), the last part built first. After stack_stop. The
 * deletion of replaced and deleted domains' objects that an unmount finishes is given up as
 * soon as *give_up is set (NULL: never): a stop signal during it still ends in a clean exit. */
void stack_close(struct stack *s, const volatile sig_atomic_t *give_up);

/* After daemonising, before the session's loop: read-ahead, fs's threads on se, the journal's
 * recovery, the collector. Each one that cannot start is logged and done without. */
void stack_start(struct stack *s, struct fuse_session *se);
/* After the loop, before the session is destroyed: the threads that use it. */
void stack_stop(struct stack *s);

/* The top of the stack: the session's userdata. */
struct fs *stack_fs(struct stack *s);
/* The decoded chunks every open file shares (their statistics at unmount). */
struct chunk_cache *stack_cache(struct stack *s);

#endif
