/* holders: see holders.h. */
#include "holders.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void holders_init(struct holders *h)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lock, NULL);
}

void holders_destroy(struct holders *h)
{
    pthread_mutex_destroy(&h->lock);
}

void holders_add(struct holders *h, pid_t pid)
{
    if (pid <= 0)
        return;
    pthread_mutex_lock(&h->lock);
    unsigned i = 0;
    while (i < h->n && h->pids[i] != pid)
        i++;
    if (i == h->n && h->n < HOLDERS_MAX)
        h->pids[h->n++] = pid;
    pthread_mutex_unlock(&h->lock);
}

/* An fdinfo text ("pos:", "flags:" in octal, "mnt_id:", "ino:" lines): 1 if it is a
 * descriptor open for writing on inode ino. */
static int fdinfo_writes(const char *text, uint64_t ino)
{
    const char *flags = strstr(text, "flags:");
    const char *inode = strstr(text, "\nino:");
    if (!flags || !inode)
        return 0;
    unsigned long mode = strtoul(flags + strlen("flags:"), NULL, 8);
    uint64_t found = strtoull(inode + strlen("\nino:"), NULL, 10);
    return found == ino && (mode & O_ACCMODE) != O_RDONLY;
}

static int fd_writes(int dir, const char *name, uint64_t ino)
{
    char text[512];
    int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* closed meanwhile */
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    return fdinfo_writes(text, ino);
}

int holders_pid_writes(pid_t pid, uint64_t ino)
{
    char dir_path[64];
    snprintf(dir_path, sizeof dir_path, "/proc/%ld/fdinfo", (long)pid);
    DIR *dir = opendir(dir_path);
    if (!dir)
        return 0; /* gone, exiting (its table is being closed), or not ours to inspect */
    int writes = 0;
    struct dirent *e;
    while (!writes && (e = readdir(dir)) != NULL)
        if (e->d_name[0] != '.')
            writes = fd_writes(dirfd(dir), e->d_name, ino);
    closedir(dir);
    return writes;
}

int holders_still_writing(struct holders *h, uint64_t ino)
{
    pid_t pids[HOLDERS_MAX];
    pthread_mutex_lock(&h->lock);
    unsigned n = h->n;
    memcpy(pids, h->pids, n * sizeof *pids);
    pthread_mutex_unlock(&h->lock);
    for (unsigned i = 0; i < n; i++)
        if (holders_pid_writes(pids[i], ino))
            return 1;
    return 0;
}
