/*
 * inode: the table between the kernel's inode numbers and our paths (FUSE low-level API).
 *
 * A node lives from the first lookup that returns it until the kernel forgets every lookup
 * (nlookup back to 0). Its inode number is its address, as in libfuse's passthrough_ll; the
 * root is FUSE_ROOT_ID and never forgotten. Generation numbers grow, so an address reused by a
 * later node is a different (ino, generation) pair for NFS-style handles. Thread-safe.
 *
 * A node stands for one *version* of what its path names: directories have no version, a file
 * being written for the first time is INODE_STAGED, and a domain's node is one build of its
 * file (the image's serial). A lookup that finds a different version than the path's node has
 * makes a new node for the path; the old one lives on for the kernel's references (open files,
 * cached pages, cached attributes) and keeps the attributes of its version. So the kernel never
 * mixes the sizes or pages of two versions in one inode (doc/design.md, "Versions").
 */
#ifndef H5OSFS_FS_INODE_H
#define H5OSFS_FS_INODE_H

#include <stdint.h>

#include <fuse_lowlevel.h>

#include "h5osfs/ns/ns.h"

#define INODE_NO_VERSION 0      /* directories, broken domains */
#define INODE_STAGED UINT64_MAX /* a file not committed yet: its size changes */

struct inode_table;

int inode_table_new(struct inode_table **out);
void inode_table_free(struct inode_table *table);

/* The path of ino, as a new string the caller frees; NULL if ino is unknown or on ENOMEM. */
char *inode_path(struct inode_table *table, fuse_ino_t ino);

/* Path (a new string), version and attributes of ino as its last lookup gave them (the root:
 * "/", no version, info zeroed). 0 or -ENOMEM. */
int inode_get(struct inode_table *table, fuse_ino_t ino, char **path, uint64_t *version,
              struct ns_info *info);

/* Count one lookup of path at version (attributes info) and give its inode number and
 * generation: the path's node when it has that version (its attributes refreshed), else a new
 * node that becomes the path's. 0 or -ENOMEM. */
int inode_lookup(struct inode_table *table, const char *path, uint64_t version,
                 const struct ns_info *info, fuse_ino_t *ino, uint64_t *gen);

/* A node that stood for a staged file now stands for the version its commit made (a node
 * of a staged file never had cached pages, so it may change version once). No-op unless
 * ino is still INODE_STAGED. */
void inode_settle(struct inode_table *table, fuse_ino_t ino, uint64_t version,
                  const struct ns_info *info);

/* The inode number of path's node, 0 if the kernel holds none. */
fuse_ino_t inode_of(struct inode_table *table, const char *path);

/* A rename: path from (and every path below it) is now to. 0 or -ENOMEM. */
int inode_rename(struct inode_table *table, const char *from, const char *to);

/* The kernel dropped n lookups of ino. */
void inode_forget(struct inode_table *table, fuse_ino_t ino, uint64_t n);

#endif
