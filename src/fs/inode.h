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
#include <sys/types.h>

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

/*
 * Writers and readers of a domain never share a node. The kernel keeps one size and one page
 * cache per inode: a writer's O_TRUNC and writes past the end change that size and drop those
 * pages under every reader of it (whose version then read cut, or padded with zeros), and the
 * writer's fstat must show its own file (h5py's "w" checks that O_TRUNC emptied it) where a
 * reader's must show its version's. So a writer's node (written) is never the path's: lookups
 * of the path by others get the readers' node.
 *
 * inode_writer_node: an open for writing of ino by thread tid. 0: go on (ino is a writer's, a
 * staged file's, a directory's; or only tid's own lookups handed it out and no reader was
 * opened it: it has just become the writer's, no longer the path's); 1: ino is the readers'
 * (or may be): answer ESTALE, and the kernel's second lookup of the name by tid (inode_lookup_by) makes the writer's node;
 * -ENOMEM.
 * inode_writer_wanted: the next lookup of path by tid is a writer's (an open for writing that
 * found the path's version changed answers ESTALE too). 0 or -ENOMEM.
 * inode_lookup_by: inode_lookup, by thread tid: a writer's node if tid is the writer waiting
 * for one.
 * inode_lookup_writer: a create of an existing domain: a writer's node at once.
 * inode_reader_open: a reader's open of ino: 0, and no writer takes ino from then on; or
 * -ESTALE for a writer's node (the name's entry the kernel kept from a writer's lookup): the
 * kernel's second lookup gets the readers' node.
 * inode_is_writers: 1 for a writer's node.
 */
int inode_writer_node(struct inode_table *table, fuse_ino_t ino, pid_t tid);
int inode_writer_wanted(struct inode_table *table, const char *path, pid_t tid);
int inode_lookup_by(struct inode_table *table, const char *path, uint64_t version,
                    const struct ns_info *info, pid_t tid, fuse_ino_t *ino, uint64_t *gen);
int inode_lookup_writer(struct inode_table *table, const char *path, uint64_t version,
                        const struct ns_info *info, fuse_ino_t *ino, uint64_t *gen);
int inode_reader_open(struct inode_table *table, fuse_ino_t ino);
int inode_is_writers(struct inode_table *table, fuse_ino_t ino);

/* The inode number of path's node, 0 if the kernel holds none. */
fuse_ino_t inode_of(struct inode_table *table, const char *path);

/* A rename: path from (and every path below it) is now to. 0 or -ENOMEM. */
int inode_rename(struct inode_table *table, const char *from, const char *to);

/* The kernel dropped n lookups of ino. */
void inode_forget(struct inode_table *table, fuse_ino_t ino, uint64_t n);

#endif
