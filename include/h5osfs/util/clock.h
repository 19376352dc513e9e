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

/* The wall-clock time ms milliseconds from now: a deadline for pthread_cond_timedwait, whose
 * clock that is by default. */
static inline struct timespec clock_wall_in_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

#endif
