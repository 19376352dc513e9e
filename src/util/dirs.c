/*
 * dirs: directories of the daemon's own (dirs.h).
 */
#include "h5osfs/util/dirs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int make_dirs(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    for (char *p = copy + 1; rc == 0; p++) {
        char c = *p;
        if (c != '/' && c != '\0')
            continue;
        *p = '\0';
        if (mkdir(copy, 0700) != 0 && errno != EEXIST)
            rc = -errno;
        *p = c;
        if (c == '\0')
            break;
    }
    free(copy);
    return rc;
}
