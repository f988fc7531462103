/* stream_read.c — STREAM-style memory read bandwidth: T threads each sum their contiguous share
 * of a buffer much larger than the caches, R passes. Used by bench/compare to express decode
 * speed as a fraction of the bandwidth roofline. Build: cc -O3 -march=native -pthread.
 * Usage: stream_read THREADS [MiB=1024] [PASSES=7]; prints the best pass's GB/s (1e9 bytes/s) on
 * the first line of stdout and every pass's, in order, on the second. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench_util.h"

typedef struct job {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
    pthread_barrier_t *start;
} job;

static void *run(void *arg) {
    job *j = arg;
    pthread_barrier_wait(j->start);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= j->n; i += 4) {
        s0 += j->p[i];
        s1 += j->p[i + 1];
        s2 += j->p[i + 2];
        s3 += j->p[i + 3];
    }
    j->sum = s0 + s1 + s2 + s3;
    pthread_barrier_wait(j->start);
    return NULL;
}

int main(int argc, char **argv) {
    int T = argc > 1 ? atoi(argv[1]) : 1;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
    int passes = argc > 3 ? atoi(argv[3]) : 7;
    if (T < 1 || T > 256 || mib < 1 || passes < 1) return 2;
    size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
    /* 2 MiB aligned and on transparent huge pages where the kernel offers them, as statelm keeps
     * its weights: the best read bandwidth the machine gives, not one limited by page walks */
    size_t bytes = (n * sizeof(uint64_t) + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    uint64_t *buf = aligned_alloc((size_t)2 << 20, bytes);
    if (!buf) return 1;
#ifdef MADV_HUGEPAGE
    if (!getenv("STREAM_SMALL_PAGES")) (void)madvise(buf, bytes, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 0, all[1000];
    if (passes > 1000) passes = 1000;
    uint64_t check = 0;
    for (int r = 0; r < passes; r++) {
        pthread_t th[256];
        job jobs[256];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)T + 1);
        size_t per = (n / (size_t)T) & ~(size_t)7;
        for (int t = 0; t < T; t++) {
            jobs[t] = (job){buf + (size_t)t * per, per, 0, &start};
            pthread_create(&th[t], NULL, run, &jobs[t]);
        }
        pthread_barrier_wait(&start);
        double t0 = now_s();
        pthread_barrier_wait(&start);
        double dt = now_s() - t0;
        for (int t = 0; t < T; t++) {
            pthread_join(th[t], NULL);
            check += jobs[t].sum;
        }
        pthread_barrier_destroy(&start);
        double gbs = (double)(per * (size_t)T * sizeof(uint64_t)) / dt / 1e9;
        if (gbs > best) best = gbs;
        all[r] = gbs;
    }
    printf("%.3f\n", best);
    for (int r = 0; r < passes; r++) printf("%.3f%c", all[r], r + 1 < passes ? ' ' : '\n');
    fprintf(stderr, "checksum %llu\n", (unsigned long long)check);
    free(buf);
    return 0;
}
