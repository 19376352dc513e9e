/* Unit tests of src/fs/holders.c: a process's descriptors open for writing on an inode, as its
 * /proc/PID/fdinfo shows them; this test process opens and closes them. */
#include "holders.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static uint64_t inode_of(int fd)
{
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    return (uint64_t)st.st_ino;
}

static void test_write_descriptors_are_seen_until_closed(const char *path)
{
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(w >= 0);
    uint64_t ino = inode_of(w);
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
    uint64_t ino = inode_of(r);
    CHECK_INT(holders_pid_writes(getpid(), ino), 0);
    int rw = open("/dev/null", O_RDWR);
    CHECK(rw >= 0);
    CHECK_INT(holders_pid_writes(getpid(), ino), 0);
    close(rw);
    close(r);
}

static void test_known_processes_are_asked(const char *path)
{
    struct holders h;
    holders_init(&h);
    int w = open(path, O_RDWR);
    CHECK(w >= 0);
    uint64_t ino = inode_of(w);
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
    test_known_processes_are_asked(path);
    unlink(path);
    return check_done("holders");
}
