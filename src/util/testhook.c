/* testhook: crash and pause points for the integration tests (testhook.h). */
#include "h5osfs/util/testhook.h"

#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "h5osfs/util/log.h"

/* Only the first thread to reach the stage is held: the test waits for one, not for all. */
static atomic_flag paused = ATOMIC_FLAG_INIT;

void testhook_crash_at(const char *stage)
{
    const char *want = getenv("H5OSFS_TEST_CRASH_AT");
    if (want && strcmp(want, stage) == 0) {
        log_warn("test hook H5OSFS_TEST_CRASH_AT=%s: killing the daemon", stage);
        raise(SIGKILL);
    }
}

void testhook_pause_at(const char *stage, const atomic_int *cancel)
{
    const char *want = getenv("H5OSFS_TEST_PAUSE_AT");
    size_t n = strlen(stage);
    if (!want || strncmp(want, stage, n) != 0 || want[n] != ':' ||
        atomic_flag_test_and_set(&paused))
        return;
    log_warn("test hook H5OSFS_TEST_PAUSE_AT=%s: waiting while %s exists", stage, want + n + 1);
    const struct timespec tick = { 0, 10 * 1000 * 1000 };
    while (access(want + n + 1, F_OK) == 0 && !(cancel && atomic_load(cancel)))
        nanosleep(&tick, NULL);
}
