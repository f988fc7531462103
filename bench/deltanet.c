/* deltanet.c — benchmark (not a test) of one CPU tier's recurrent DeltaNet head (cpu.h
 * deltanet_head) in the decode and verify shapes: T tokens (1 = decode, 2..8 = verify) through H
 * heads of (dk, dv) f32 states in each of L layers, double-buffered as a session holds them (the
 * call reads the front buffer and writes the back one, which then becomes the front), so L layers
 * larger than the last level cache measure the streaming case. Per step (all layers and heads, one
 * thread): the median of R timings in ms, the state bytes it must read and write and the rate
 * that makes; and a check that the tier's output and states equal the generic tier's bit for bit.
 * -e MB: between the timed steps, MB of other data pass through the caches (as a model's weights
 * do between its DeltaNet layers), so a state comes from memory even where the last level cache
 * would hold all the states.
 * Usage: bench_deltanet [-T TOKENS] [-H HEADS] [-d DK] [-v DV] [-l LAYERS] [-r REPS] [-e MB]
 *                       [-i generic|neon|i8mm|avx2|avxvnni|avx512|amx]
 * Defaults: Qwen3.5-0.8B's linear-attention layers (18 layers of 16 heads, 128 x 128). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"

#include "bench_isa.h"
#include "bench_util.h"

static uint32_t rng = 12345u;
static float frand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

static float *alloc_floats(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_deltanet: out of memory\n");
        exit(1);
    }
    return p;
}

typedef struct dn_shape {
    int64_t T, H, dk, dv, L;
} dn_shape;

/* One step: every layer and head, reading front[l] and writing back[l]. */
static void step(const cpu_isa *isa, const dn_shape *sh, float *const *front, float *const *back, const float *q,
                 const float *k, const float *v, const float *g, const float *beta, float *o, float *scratch) {
    int64_t hs = sh->dk * sh->dv;
    for (int64_t l = 0; l < sh->L; l++)
        for (int64_t h = 0; h < sh->H; h++) {
            const float *next = h + 1 < sh->H ? front[l] + (h + 1) * hs : NULL;
            isa->deltanet_head(back[l] + h * hs, front[l] + h * hs, q + h * sh->dk, k + h * sh->dk, v + h * sh->dv,
                               g + h, beta + h, o + (l * sh->T * sh->H + h) * sh->dv, sh->T, sh->dk, sh->dv,
                               sh->H * sh->dk, sh->H * sh->dv, sh->H, next, scratch);
        }
}

int main(int argc, char **argv) {
    dn_shape sh = {.T = 4, .H = 16, .dk = 128, .dv = 128, .L = 18};
    int reps = 9;
    int64_t evict_mb = 0;
    cpu_isa_level level = cpu_isa_detect();
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i + 1];
        if (!strcmp(argv[i], "-T")) sh.T = atoll(a);
        else if (!strcmp(argv[i], "-H")) sh.H = atoll(a);
        else if (!strcmp(argv[i], "-d")) sh.dk = atoll(a);
        else if (!strcmp(argv[i], "-v")) sh.dv = atoll(a);
        else if (!strcmp(argv[i], "-l")) sh.L = atoll(a);
        else if (!strcmp(argv[i], "-r")) reps = atoi(a);
        else if (!strcmp(argv[i], "-e")) evict_mb = atoll(a);
        else if (!strcmp(argv[i], "-i")) {
            for (int l = CPU_ISA_GENERIC; l <= CPU_ISA_I8MM; l++)
                if (!strcmp(a, cpu_isa_name((cpu_isa_level)l))) level = (cpu_isa_level)l;
        }
    }
    if (sh.T < 1 || sh.H < 1 || sh.dk < 1 || sh.dv < 1 || sh.dv > 512 || sh.L < 1 || reps < 1 || reps > 1000) {
        fprintf(stderr, "bench_deltanet: bad shape\n");
        return 2;
    }
    if (!cpu_isa_supported(level)) {
        fprintf(stderr, "bench_deltanet: this CPU lacks tier %s\n", cpu_isa_name(level));
        return 2;
    }
    const cpu_isa *isa = bench_isa_of(level), *ref = cpu_isa_generic();
    size_t hs = (size_t)(sh.dk * sh.dv), layer = (size_t)sh.H * hs, cols = (size_t)(sh.T * sh.H);
    float *buf[2][64];
    if (sh.L > 64) sh.L = 64;
    for (int b = 0; b < 2; b++)
        for (int64_t l = 0; l < sh.L; l++) buf[b][l] = alloc_floats(layer);
    float *q = alloc_floats(cols * (size_t)sh.dk), *k = alloc_floats(cols * (size_t)sh.dk);
    float *v = alloc_floats(cols * (size_t)sh.dv), *g = alloc_floats(cols), *beta = alloc_floats(cols);
    size_t n_out = (size_t)sh.L * cols * (size_t)sh.dv;
    float *o = alloc_floats(n_out), *o_ref = alloc_floats(n_out), *s_ref = alloc_floats(layer);
    float *scratch = alloc_floats(cpu_deltanet_scratch_bytes(sh.dk) / sizeof(float));
    float kn = 1.0f / sqrtf((float)sh.dk);
    for (size_t i = 0; i < cols * (size_t)sh.dk; i++) q[i] = frand() * kn, k[i] = frand() * kn;
    for (size_t i = 0; i < cols * (size_t)sh.dv; i++) v[i] = frand();
    for (size_t i = 0; i < cols; i++) g[i] = -0.1f + 0.05f * frand(), beta[i] = 0.5f + 0.4f * frand();
    for (int64_t l = 0; l < sh.L; l++)
        for (size_t i = 0; i < layer; i++) buf[0][l][i] = 0.1f * frand();

    /* check: one step of the tier against the generic tier from the same front states */
    step(ref, &sh, buf[0], buf[1], q, k, v, g, beta, o_ref, scratch);
    memcpy(s_ref, buf[1][sh.L - 1], layer * sizeof(float));
    step(isa, &sh, buf[0], buf[1], q, k, v, g, beta, o, scratch);
    bool same = !memcmp(o, o_ref, n_out * sizeof(float)) && !memcmp(s_ref, buf[1][sh.L - 1], layer * sizeof(float));

    /* -e: between the timed steps, write and read EVICT MB, as a model's weights between its
     * DeltaNet layers displace the states from the caches */
    size_t n_evict = (size_t)evict_mb << 18;
    float *evict = n_evict ? alloc_floats(n_evict) : NULL;
    float sink = 0.0f;
    double *t = malloc((size_t)reps * sizeof *t);
    int front = 0;
    for (int r = 0; r <= reps; r++) { /* r = 0: warm-up */
        for (size_t i = 0; i < n_evict; i += 16) evict[i] = (float)i, sink += evict[i / 2];
        double t0 = now_s();
        step(isa, &sh, buf[front], buf[1 - front], q, k, v, g, beta, o, scratch);
        double dt = now_s() - t0;
        front = 1 - front;
        if (r) t[r - 1] = dt;
    }
    double med = median(t, reps);
    double bytes = 2.0 * (double)sh.L * (double)layer * sizeof(float);
    printf("tier %s: T=%lld, %lld layers x %lld heads of %lld x %lld: %.3f ms per step (%.1f us per layer), "
           "%.1f MB of states read and written, %.1f GB/s; bits %s the generic tier's\n",
           cpu_isa_name(level), (long long)sh.T, (long long)sh.L, (long long)sh.H, (long long)sh.dk,
           (long long)sh.dv, 1e3 * med, 1e6 * med / (double)sh.L, bytes / 1e6, bytes / med / 1e9,
           same ? "equal" : "DIFFER from");
    if (sink == 1.0f) printf(" \n");
    return same ? 0 : 1;
}
