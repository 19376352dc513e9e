/*
 * check.h: the few macros the C unit tests share. A failed CHECK prints file:line and the
 * expression and counts a failure; the test keeps going so one run shows every failure.
 * check_done() prints "N passed, N failed" and returns the exit status for main.
 */
#ifndef H5OSFS_TEST_CHECK_H
#define H5OSFS_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(expr)                                                                  \
    do {                                                                             \
        if (expr) {                                                                  \
            check_passed++;                                                          \
        } else {                                                                     \
            check_failed++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); \
        }                                                                            \
    } while (0)

#define CHECK_INT(got, want)                                                                      \
    do {                                                                                          \
        long long got_ = (long long)(got), want_ = (long long)(want);                             \
        if (got_ == want_) {                                                                      \
            check_passed++;                                                                       \
        } else {                                                                                  \
            check_failed++;                                                                       \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #got, got_, \
                    want_);                                                                       \
        }                                                                                         \
    } while (0)

#define CHECK_STR(got, want)                                                                    \
    do {                                                                                        \
        const char *got_ = (got), *want_ = (want);                                              \
        if (got_ && want_ && strcmp(got_, want_) == 0) {                                        \
            check_passed++;                                                                     \
        } else {                                                                                \
            check_failed++;                                                                     \
            fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #got, \
                    got_ ? got_ : "(null)", want_ ? want_ : "(null)");                          \
        }                                                                                       \
    } while (0)

static inline int check_done(const char *suite)
{
    printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
