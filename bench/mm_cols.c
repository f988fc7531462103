/* mm_cols.c — benchmark (not a test) of one CPU tier's quantised matmul on repacked tiles against
 * 1, 2, 3, 4, 8, 16 and 64 activation columns (decode, verify, batched decode and prefill): the best of
 * R timings of each, its ratio to one column, and a check that every column equals the column
 * computed alone, bit for bit. Random weights of an m x k matrix; a matrix larger than the last
 * level cache measures the streaming case, a small one the compute.
 * Usage: bench_mm_cols [-m ROWS] [-k COLS] [-r REPS] [-i generic|neon|i8mm|avx2|avxvnni|avx512|amx] [-t TYPE] [-c]
 * (-t: one weight type, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k or q6_k; default every type the
 * tier has tiles for. -c: the thread's CPU time instead of wall time, for a machine shared with
 * other work: time spent descheduled is left out, contention for caches and memory is not). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"

#include "bench_isa.h"
#include "bench_util.h"

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t rng = 12345u;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}

int main(int argc, char **argv) {
    int64_t m = 4608, k = 1024;
    int reps = 20;
    const char *only = NULL;
    bool cpu_time = false;
    cpu_isa_level level = cpu_isa_detect();
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "-c")) {
            cpu_time = true;
            i--;
            continue;
        }
        if (i + 1 >= argc) break;
        if (!strcmp(argv[i], "-m")) m = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-k")) k = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) only = argv[i + 1];
        else if (!strcmp(argv[i], "-i")) {
            for (int l = CPU_ISA_GENERIC; l <= CPU_ISA_I8MM; l++)
                if (!strcmp(argv[i + 1], cpu_isa_name((cpu_isa_level)l))) level = (cpu_isa_level)l;
        }
    }
    const cpu_isa *isa = cpu_isa_supported(level) ? bench_isa_of(level) : NULL;
    if (!isa || !isa->mm_quant_packed || m < 1 || k < 256 || k % 256 || reps < 1) {
        fprintf(stderr, "usage: bench_mm_cols [-m ROWS] [-k COLS, a multiple of 256] [-r REPS] [-i TIER with tiles] [-t TYPE] [-c]\n");
        return 2;
    }
    printf("tier %s, %lld x %lld, best of %d%s\n", cpu_isa_name(level), (long long)m, (long long)k, reps,
           cpu_time ? ", thread CPU time" : "");
    const uint32_t types[] = {SLM_DTYPE_Q4_0, SLM_DTYPE_Q4_1, SLM_DTYPE_Q5_0, SLM_DTYPE_Q5_1,
                              SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_K, SLM_DTYPE_Q5_K, SLM_DTYPE_Q6_K};
    enum { MAXC = 64 };
    const int ncs[] = {1, 2, 3, 4, 8, 16, MAXC};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t wt = types[ti];
        if (only && strcmp(only, slm_dtype_name(wt))) continue;
        if (!isa->tile_block_bytes(wt)) continue; /* the tier has no tiles for it */
        bool kq = cpu_wt_is_k(wt);
        size_t bsz = kq ? (wt == SLM_DTYPE_Q4_K ? 144 : wt == SLM_DTYPE_Q5_K ? 176 : 210) : cpu_q32_block_bytes(wt);
        size_t rb = bsz * (size_t)(k / (kq ? CPU_QK_K : CPU_QK));
        uint8_t *w = malloc(rb * (size_t)m);
        for (size_t i = 0; i < rb * (size_t)m; i++) w[i] = (uint8_t)next_u32();
        for (int64_t r = 0; r < m; r++) /* scales of a sane size: f16 in [2^-7, 2^-6) */
            for (size_t b = 0; b < rb / bsz; b++) {
                uint8_t *p = w + (size_t)r * rb + b * bsz;
                uint16_t h = (uint16_t)(0x2000 | (next_u32() & 0x3FF));
                memcpy(p + (wt == SLM_DTYPE_Q6_K ? 208 : 0), &h, 2);
                if (wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1 || wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K)
                    memcpy(p + 2, &h, 2);
            }
        int64_t nt = (m + 15) / 16;
        size_t pk_bytes = (size_t)(k / CPU_QK) * isa->tile_block_bytes(wt) * (size_t)nt;
        uint8_t *pk = aligned_alloc(64, (pk_bytes + 63) / 64 * 64);
        size_t as = cpu_act_bytes(wt, k);
        uint8_t *act = aligned_alloc(64, as * MAXC);
        float *x = malloc(sizeof(float) * (size_t)k), *y = malloc(sizeof(float) * (size_t)m * MAXC);
        float *y1 = malloc(sizeof(float) * (size_t)m * MAXC);
        if (!w || !pk || !act || !x || !y || !y1) {
            fprintf(stderr, "bench_mm_cols: out of memory\n");
            return 1;
        }
        isa->repack_tiles(wt, w, rb, m, k, 0, nt, pk);
        for (int c = 0; c < MAXC; c++) {
            for (int64_t i = 0; i < k; i++) x[i] = (float)(next_u32() >> 8) / 16777216.0f - 0.5f;
            isa->quant_act(wt, x, k, act + as * (size_t)c);
            isa->mm_quant_packed(wt, pk, m, k, act + as * (size_t)c, as, 1, y1 + c * m, m);
        }
        double t1 = 0;
        for (size_t ni = 0; ni < sizeof ncs / sizeof ncs[0]; ni++) {
            int nc = ncs[ni];
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                double t = cpu_time ? thread_cpu_s() : now_s();
                isa->mm_quant_packed(wt, pk, m, k, act, as, nc, y, m);
                t = (cpu_time ? thread_cpu_s() : now_s()) - t;
                best = t < best ? t : best;
            }
            if (nc == 1) t1 = best;
            bool same = memcmp(y, y1, sizeof(float) * (size_t)(m * nc)) == 0;
            printf("%-5s cols %2d: %9.1f us  x%5.2f  %6.2f us/col%s\n", slm_dtype_name(wt), nc, best * 1e6, best / t1,
                   best * 1e6 / nc,
                   same ? "" : "  DIFFERS from the columns alone");
        }
        free(w), free(pk), free(act), free(x), free(y), free(y1);
    }
    return 0;
}
