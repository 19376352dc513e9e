/*
 * fpenv: the default floating-point environment for the span of a value conversion, for the
 * number conversions of src/schema (hjson) and src/h5json (values).
 *
 * A library loaded into the process can change the calling thread's floating-point control for
 * good: Debian's HDF5 filter plugins libh5LZF.so and libh5bshuf.so (package bitshuffle) are
 * built with -ffast-math, so when HDF5 loads one (once per process, in whichever thread first
 * needs the filter) its constructor sets flush-to-zero and denormals-are-zero in that thread,
 * and threads it starts later inherit them. Subnormal numbers then compare equal to 0 and
 * casts flush them: the double 1.59e-314 would be written as 0.0. Numbers are turned into text
 * and back, and narrowed, in the default environment (IEEE round to nearest, subnormals kept),
 * whatever the thread's is; the thread's own is restored afterwards.
 */
#ifndef H5OSFS_SCHEMA_FPENV_H
#define H5OSFS_SCHEMA_FPENV_H

#include <stdbool.h>

#if defined(__SSE2__)
#include <xmmintrin.h>

/* MXCSR bits that make arithmetic differ from IEEE: flush-to-zero, denormals-are-zero, and the
 * rounding control (the default, round to nearest, is 0). Set through the register itself:
 * fesetenv would need libm, which nothing else here links. */
#define FPENV_MXCSR_NONSTANDARD 0xe040u

struct fpenv {
    unsigned saved;
};

static inline void fpenv_enter(struct fpenv *e)
{
    e->saved = _mm_getcsr();
    if (e->saved & FPENV_MXCSR_NONSTANDARD)
        _mm_setcsr(e->saved & ~FPENV_MXCSR_NONSTANDARD);
}

static inline void fpenv_leave(struct fpenv *e)
{
    if (e->saved & FPENV_MXCSR_NONSTANDARD)
        _mm_setcsr(e->saved | (_mm_getcsr() & 0x3fu)); /* the thread's mode, exception flags kept */
}

#else /* no SSE: nothing known sets such modes behind the caller's back */

struct fpenv {
    bool unused;
};

static inline void fpenv_enter(struct fpenv *e)
{
    e->unused = true;
}

static inline void fpenv_leave(struct fpenv *e)
{
    (void)e;
}

#endif

#endif
