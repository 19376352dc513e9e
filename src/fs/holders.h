/*
 * holders: the processes known to hold a descriptor of one open file description (its opener,
 * its writers, its closers), so that a close can tell whether it is the last one that writes.
 *
 * FUSE sends a flush at every close() of a descriptor (dup'ed and inherited ones included) and
 * the release, which cannot answer anyone, after the last one; it never says how many
 * descriptors are left. The kernel shows them in /proc/PID/fdinfo (access mode and inode), for
 * the processes the daemon may inspect: those are asked. A process not known here (it only
 * inherited the descriptor and never wrote through it) is not asked; a process the daemon may
 * not inspect counts as holding nothing. Thread-safe.
 */
#ifndef H5OSFS_FS_HOLDERS_H
#define H5OSFS_FS_HOLDERS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define HOLDERS_MAX 8 /* beyond this many distinct processes, later ones are not asked */

struct holders {
    pthread_mutex_t lock; /* guards pids and n */
    pid_t pids[HOLDERS_MAX];
    unsigned n;
};

void holders_init(struct holders *h);
void holders_destroy(struct holders *h);

/* pid (a thread id, as FUSE requests carry it; 0: unknown) used the file description. */
void holders_add(struct holders *h, pid_t pid);

/* The file a descriptor must be open on to count: inode ino of the mount whose id (the first
 * field of /proc/self/mountinfo, fdinfo's mnt_id) is mnt_id. An inode number alone is not
 * enough: two mounts of the same bucket by the same build number their inodes alike (ASan's
 * allocator is deterministic), and a process writing to both is common. mnt_id < 0: unknown,
 * the inode alone decides. */
struct holders_file {
    int mnt_id;
    uint64_t ino;
};

/* 1 if one of the known processes still has a descriptor open for writing on file (the
 * descriptor being closed has left its table already when the flush comes), else 0. */
int holders_still_writing(struct holders *h, struct holders_file file);

/* 1 if process pid has a descriptor open for writing on file (its /proc/PID/fdinfo); 0 when it
 * has none or cannot be inspected. */
int holders_pid_writes(pid_t pid, struct holders_file file);

/* The id of the topmost mount at mountpoint (an absolute path) whose file system type starts
 * with "fuse", from /proc/self/mountinfo; -1 when there is none or it cannot be read. */
int holders_mount_id(const char *mountpoint);

#endif
