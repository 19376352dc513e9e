/*
 * fuzz_scratch: what the fuzz targets share around their runs: the log (formatted either way,
 * so every log line's arguments are checked; FUZZ_VERBOSE=1 shows them on stderr) and the
 * scratch directories some of them keep a bucket or cache in (in /dev/shm when there is one:
 * millions of runs write there). Header-only: each target is a program of its own.
 */
#ifndef H5OSFS_FUZZ_SCRATCH_H
#define H5OSFS_FUZZ_SCRATCH_H

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5osfs/util/log.h"

static inline void fuzz_log_setup(void)
{
    if (getenv("FUZZ_VERBOSE"))
        log_setup(LOG_LVL_DEBUG, LOG_SINK_STDERR, NULL);
    else
        log_setup(LOG_LVL_DEBUG, LOG_SINK_FILE, "/dev/null");
}

/* A target whose start is the log alone. */
#define FUZZ_INIT_LOG_ONLY                            \
    int LLVMFuzzerInitialize(int *argc, char ***argv) \
    {                                                 \
        (void)argc;                                   \
        (void)argv;                                   \
        fuzz_log_setup();                             \
        return 0;                                     \
    }

/* A check failed: one line naming the target and what, then the abort libFuzzer reports. */
static inline void fuzz_fail(const char *target, const char *what)
{
    fprintf(stderr, "%s: %s\n", target, what);
    abort();
}

/* Where scratch directories go: /dev/shm when it exists, else /tmp. */
static inline const char *fuzz_scratch_base(void)
{
    struct stat sb;
    return stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
}

static int fuzz_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Remove the tree at path (failures only leave scratch files behind). */
static inline void fuzz_rm_tree(const char *path)
{
    nftw(path, fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Remove base/<prefix>.<pid> trees of runs that died (a crash, a timeout or a merge child
 * skips the destructor that removes its own). */
static inline void fuzz_remove_stale(const char *base, const char *prefix)
{
    size_t len = strlen(prefix);
    DIR *d = opendir(base);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[600], *end;
        if (strncmp(e->d_name, prefix, len) != 0 || e->d_name[len] != '.')
            continue;
        long pid = strtol(e->d_name + len + 1, &end, 10);
        if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        fuzz_rm_tree(path);
    }
    if (d)
        closedir(d);
}

#endif
