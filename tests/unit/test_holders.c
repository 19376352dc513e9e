/* Unit tests of src/fs/holders.c: a process's descriptors open for writing on an inode, as its
 * /proc/PID/fdinfo shows them; this test process opens and closes them. */
#include "holders.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

/* The file fd is open on, the mount unknown (the inode alone decides). */
static struct holders_file inode_of(int fd)
{
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    return (struct holders_file){ -1, (uint64_t)st.st_ino };
}

/* fd's mount id, as its fdinfo says. */
static int mount_of(int fd)
{
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *mnt = strstr(text, "mnt_id:");
    CHECK(mnt != NULL);
    return atoi(mnt + strlen("mnt_id:"));
}

static void test_write_descriptors_are_seen_until_closed(const char *path)
{
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(w >= 0);
    struct holders_file ino = inode_of(w);
    CHECK_INT(holders_pid_writes(getpid(), ino), 1);
    int dup_w = dup(w);
    CHECK(dup_w >= 0);
    close(w);
    CHECK_INT(holders_pid_writes(getpid(), ino), 1); /* the dup still writes */
    close(dup_w);
    CHECK_INT(holders_pid_writes(getpid(), ino), 0);
}

static void test_readers_and_other_inodes_do_not_count(const char *path)
{
    int r = open(path, O_RDONLY);
    CHECK(r >= 0);
    struct holders_file ino = inode_of(r);
    CHECK_INT(holders_pid_writes(getpid(), ino), 0);
    int rw = open("/dev/null", O_RDWR);
    CHECK(rw >= 0);
    CHECK_INT(holders_pid_writes(getpid(), ino), 0);
    close(rw);
    close(r);
}

static void test_another_mounts_inode_of_the_same_number_does_not_count(const char *path)
{
    int w = open(path, O_WRONLY);
    CHECK(w >= 0);
    struct holders_file file = inode_of(w);
    file.mnt_id = mount_of(w);
    CHECK_INT(holders_pid_writes(getpid(), file), 1);
    file.mnt_id += 100000; /* the same inode number on another mount */
    CHECK_INT(holders_pid_writes(getpid(), file), 0);
    close(w);
    CHECK_INT(holders_mount_id("/no/such/mount"), -1);
    CHECK_INT(holders_mount_id("/"), -1); /* not a FUSE mount */
}

static void test_known_processes_are_asked(const char *path)
{
    struct holders h;
    holders_init(&h);
    int w = open(path, O_RDWR);
    CHECK(w >= 0);
    struct holders_file ino = inode_of(w);
    CHECK_INT(holders_still_writing(&h, ino), 0); /* nobody known yet */
    holders_add(&h, 0);                           /* unknown: ignored */
    holders_add(&h, getpid());
    holders_add(&h, getpid()); /* once */
    CHECK_INT(h.n, 1);
    CHECK_INT(holders_still_writing(&h, ino), 1);
    close(w);
    CHECK_INT(holders_still_writing(&h, ino), 0);
    for (pid_t p = 1; p <= 2 * HOLDERS_MAX; p++)
        holders_add(&h, 1000000 + p); /* beyond the limit: kept out, no overflow */
    CHECK_INT(h.n, HOLDERS_MAX);
    holders_destroy(&h);
}

int main(void)
{
    char path[] = "/tmp/test_holders_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    test_write_descriptors_are_seen_until_closed(path);
    test_readers_and_other_inodes_do_not_count(path);
    test_another_mounts_inode_of_the_same_number_does_not_count(path);
    test_known_processes_are_asked(path);
    unlink(path);
    return check_done("holders");
}
