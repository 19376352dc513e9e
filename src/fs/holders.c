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
 * descriptor open for writing on file. */
static int fdinfo_writes(const char *text, struct holders_file file)
{
    const char *flags = strstr(text, "flags:");
    const char *inode = strstr(text, "\nino:");
    const char *mnt = strstr(text, "\nmnt_id:");
    if (!flags || !inode || (file.mnt_id >= 0 && !mnt))
        return 0;
    unsigned long mode = strtoul(flags + strlen("flags:"), NULL, 8);
    uint64_t found = strtoull(inode + strlen("\nino:"), NULL, 10);
    if (file.mnt_id >= 0 && strtol(mnt + strlen("\nmnt_id:"), NULL, 10) != file.mnt_id)
        return 0;
    return found == file.ino && (mode & O_ACCMODE) != O_RDONLY;
}

static int fd_writes(int dir, const char *name, struct holders_file file)
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
    return fdinfo_writes(text, file);
}

int holders_pid_writes(pid_t pid, struct holders_file file)
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
            writes = fd_writes(dirfd(dir), e->d_name, file);
    closedir(dir);
    return writes;
}

int holders_still_writing(struct holders *h, struct holders_file file)
{
    pid_t pids[HOLDERS_MAX];
    pthread_mutex_lock(&h->lock);
    unsigned n = h->n;
    memcpy(pids, h->pids, n * sizeof *pids);
    pthread_mutex_unlock(&h->lock);
    for (unsigned i = 0; i < n; i++)
        if (holders_pid_writes(pids[i], file))
            return 1;
    return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo (octal). */
static void unescape_octal(char *s)
{
    char *out = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
}

/* One mountinfo line: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [FIELDS...] - FSTYPE ...". */
static int mountinfo_line_id(char *line, const char *mountpoint)
{
    int id = -1;
    char point[4096];
    const char *dash = strstr(line, " - ");
    if (!dash || sscanf(line, "%d %*d %*s %*s %4095s", &id, point) != 2)
        return -1;
    unescape_octal(point);
    return strcmp(point, mountpoint) == 0 && strncmp(dash + 3, "fuse", 4) == 0 ? id : -1;
}

int holders_mount_id(const char *mountpoint)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int id = -1;
    while (getline(&line, &cap, f) > 0) {
        int this = mountinfo_line_id(line, mountpoint);
        if (this >= 0)
            id = this; /* later lines are mounted on top of earlier ones */
    }
    free(line);
    fclose(f);
    return id;
}
