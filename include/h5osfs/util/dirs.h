/*
 * dirs: directories of the daemon's own (cache_dir and what is below it).
 */
#ifndef H5OSFS_DIRS_H
#define H5OSFS_DIRS_H

/* mkdir -p, each directory made with mode 0700 (only the mounting user reads what the daemon
 * keeps); existing directories are kept as they are. 0 or -errno. */
int make_dirs(const char *path);

#endif
