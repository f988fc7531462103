/* bench_util.h — the timing helpers every bench/ program shares: a monotonic clock, the process's
 * CPU clock, the median of repetitions, the kernel tier asked for in SLM_KERNELS (as the CLI
 * reads it), and (with BENCH_NAME defined before the include) a fatal error for a failed call. */
#ifndef SLM_BENCH_UTIL_H
#define SLM_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* SLM_KERNELS (ref, generic, avx2, avxvnni, avx512, amx, ...), or NULL: the session's kernels. */
static inline const char *bench_kernels(void) { return getenv("SLM_KERNELS"); }

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the process (all its threads). */
static inline double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v[0, n) and returns its median. */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#ifdef BENCH_NAME
#include "statelm.h"
static inline void die(const char *what, slm_status st, const char *msg) {
    fprintf(stderr, BENCH_NAME ": %s: %s (%s)\n", what, msg, slm_status_name(st));
    exit(1);
}
#endif

#endif
