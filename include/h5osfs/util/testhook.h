/*
 * testhook: the points where the integration tests stop the daemon, set in its environment.
 *
 *   H5OSFS_TEST_CRASH_AT=stage       at stage the daemon dies, as kill -9 would make it
 *   H5OSFS_TEST_PAUSE_AT=stage:path  the first thread to reach stage waits there while path
 *                                    exists, so that a test knows for sure that the work is
 *                                    under way (no guess of how long it takes)
 *
 * Two more, read by src/main/stack.c as it builds the mount (doc/design.md lists them):
 * H5OSFS_TEST_GC_GRACE and H5OSFS_TEST_CHUNK_RETRY_AFTER, seconds in place of a built-in time.
 *
 * Without these variables each is a getenv and nothing else. Thread-safe.
 */
#ifndef H5OSFS_TESTHOOK_H
#define H5OSFS_TESTHOOK_H

#include <stdatomic.h>

void testhook_crash_at(const char *stage);

/* cancel (NULL: none): the wait also ends once it is set, as the work it holds would stop. */
void testhook_pause_at(const char *stage, const atomic_int *cancel);

#endif
