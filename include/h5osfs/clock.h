/*
 * clock: the time in seconds, as a double. Monotonic time for intervals, ages and deadlines
 * (never jumps with the wall clock); wall time for timestamps that are stored or shown (HSDS
 * writes Python's time.time(), §3.0).
 */
#ifndef H5OSFS_CLOCK_H
#define H5OSFS_CLOCK_H

#include <time.h>

static inline double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline double clock_monotonic(void)
{
    return clock_seconds(CLOCK_MONOTONIC);
}

static inline double clock_wall(void)
{
    return clock_seconds(CLOCK_REALTIME);
}

#endif
