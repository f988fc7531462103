/* bench_attn_fold — times a tier's attn_fold_rows (cpu.h), the fold of one chunk's attention
 * partials into the running totals, over the chunks of one decode step: C chunks of R rows of
 * hdv + 2 floats (acc, max, sum; cpu_attn_part_floats(hdv) apart), folded in chunk order into
 * totals that start empty, all in cache. Prints the best of REPS timings and ns per row, and
 * whether the totals equal the generic tier's (cpu_attn_fold row by row) bit for bit. SmolLM2's
 * decode at depth 8192: -c 64 -R 9 -d 64 (the defaults).
 * Usage: bench_attn_fold [-c CHUNKS] [-R ROWS] [-d HDV] [-r REPS] [-i generic|avx2|avxvnni|avx512|...] */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "bench_isa.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The totals after folding every chunk of part (C chunks of R rows, pf floats each) into empty
 * totals with isa; returns the seconds it took. */
static double fold_all(const cpu_isa *isa, float *tot, const float *part, int64_t C, int64_t R, int64_t hdv) {
    int64_t pf = cpu_attn_part_floats(hdv);
    cpu_attn_empty_totals(tot, R, hdv);
    double t0 = now_s();
    for (int64_t c = 0; c < C; c++) isa->attn_fold_rows(tot, part + c * R * pf, R, hdv);
    return now_s() - t0;
}

int main(int argc, char **argv) {
    int64_t C = 64, R = 9, hdv = 64;
    int reps = 200;
    cpu_isa_level level = cpu_isa_detect();
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i + 1];
        if (!strcmp(argv[i], "-c")) C = atoll(a);
        else if (!strcmp(argv[i], "-R")) R = atoll(a);
        else if (!strcmp(argv[i], "-d")) hdv = atoll(a);
        else if (!strcmp(argv[i], "-r")) reps = atoi(a);
        else if (!strcmp(argv[i], "-i")) {
            for (int l = CPU_ISA_GENERIC; l <= CPU_ISA_I8MM; l++)
                if (!strcmp(a, cpu_isa_name((cpu_isa_level)l))) level = (cpu_isa_level)l;
        }
    }
    const cpu_isa *isa = cpu_isa_supported(level) ? bench_isa_of(level) : NULL;
    if (!isa || C < 1 || R < 1 || hdv < 1 || reps < 1 || argc % 2 == 0) {
        fprintf(stderr, "usage: bench_attn_fold [-c CHUNKS] [-R ROWS] [-d HDV] [-r REPS] [-i TIER]\n");
        return 2;
    }
    int64_t pf = cpu_attn_part_floats(hdv);
    float *part = malloc(sizeof(float) * (size_t)(C * R * pf));
    float *tot = malloc(sizeof(float) * (size_t)(R * pf)), *ref = malloc(sizeof(float) * (size_t)(R * pf));
    if (!part || !tot || !ref) {
        fprintf(stderr, "bench_attn_fold: out of memory\n");
        return 1;
    }
    uint64_t rng = 88172645463325252ull; /* xorshift64: fixed partials, maxima in [0, 10) */
    for (int64_t i = 0; i < C * R * pf; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        float u = (float)(rng >> 40) / (float)(1 << 24);
        int64_t lane = i % pf;
        part[i] = lane == hdv ? 10.0f * u : lane == hdv + 1 ? 1.0f + u : u - 0.5f;
    }
    fold_all(cpu_isa_generic(), ref, part, C, R, hdv);
    double best = INFINITY;
    for (int rep = 0; rep < reps; rep++) {
        double t = fold_all(isa, tot, part, C, R, hdv);
        if (t < best) best = t;
    }
    bool same = true;
    for (int64_t r = 0; r < R; r++) same = same && !memcmp(tot + r * pf, ref + r * pf, sizeof(float) * (size_t)(hdv + 2));
    printf("tier %s, %lld chunks x %lld rows, hdv %lld: best of %d %.2f us, %.1f ns per row\n", cpu_isa_name(level),
           (long long)C, (long long)R, (long long)hdv, reps, best * 1e6, best * 1e9 / (double)(C * R));
    printf("bit for bit equal to generic: %s\n", same ? "yes" : "NO");
    free(part);
    free(tot);
    free(ref);
    return same ? 0 : 1;
}
