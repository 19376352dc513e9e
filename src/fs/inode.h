/*
 * inode: the table between the kernel's inode numbers and our paths (FUSE low-level API).
 *
 * A node lives from the first lookup that returns it until the kernel forgets every lookup
 * (nlookup back to 0). Its inode number is its address, as in libfuse's passthrough_ll; the
 * root is FUSE_ROOT_ID and never forgotten. Generation numbers grow, so an address reused by a
 * later node is a different (ino, generation) pair for NFS-style handles. Thread-safe.
 */
#ifndef H5OSFS_FS_INODE_H
#define H5OSFS_FS_INODE_H

#include <stdint.h>

#include <fuse_lowlevel.h>

struct inode_table;

int inode_table_new(struct inode_table **out);
void inode_table_free(struct inode_table *table);

/* The path of ino, as a new string the caller frees; NULL if ino is unknown or on ENOMEM. */
char *inode_path(struct inode_table *table, fuse_ino_t ino);

/* Count one lookup of path and give its inode number and generation. 0 or -ENOMEM. */
int inode_lookup(struct inode_table *table, const char *path, fuse_ino_t *ino, uint64_t *gen);

/* A rename: path from (and every path below it) is now to. 0 or -ENOMEM. */
int inode_rename(struct inode_table *table, const char *from, const char *to);

/* The kernel dropped n lookups of ino. */
void inode_forget(struct inode_table *table, fuse_ino_t ino, uint64_t n);

#endif
