/* attn_decode.c — benchmark (not a test) of one CPU tier's attention (cpu_attn_block, cpu.h: every
 * chunk of keys in order on one thread) in the decode shapes: T query tokens (1 = decode, 2..8 =
 * verify / batched decode) of the G query heads of each of Hkv KV heads, after P keys, over L
 * layers of f16 or f32 K/V states laid out as the session's ((hd*Hkv, ctx) rows), so L layers
 * larger than the last level cache measure the streaming case. P may be a list (-p 0,4096,8192:
 * one line per depth). Per step (all layers and heads, one thread): the median of R timings in
 * ms (wall, and the process's CPU time, which leaves out the time other processes held the core),
 * the K/V bytes the step must read and the rate that makes; and a check that the tier's output
 * of the first layer equals the generic tier's bit for bit. -a: the KV heads of a layer together
 * (the tier's attn_chunk_heads, as kern_fast.c's heads task calls it, each chunk folded in order)
 * instead of one cpu_attn_block per head. -m (x86, with -a): the in-place path's reads alone, no
 * products: per block of 16 keys the prefetch of the block ATTN_PREFETCH_BLOCKS ahead and the K and
 * V rows read once (kern_common.h attn_pf_block, attn_read_rows), the ceiling that read pattern
 * puts on the kernel.
 * Usage: bench_attn_decode [-p KEYS[,KEYS...]] [-T TOKENS] [-G G] [-k HKV] [-d HD] [-l LAYERS]
 *                          [-r REPS] [-f32] [-a [-m]] [-i generic|neon|i8mm|avx2|avxvnni|avx512|amx] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"
#include "base/alloc.h"
#include "base/half.h"

#include "bench_isa.h"
#include "bench_util.h"

static uint32_t rng = 12345u;
static float frand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

/* One layer's attention, all KV heads together through isa->attn_chunk_heads: every chunk of keys
 * in order, each row's partial folded as cpu_attn_block folds them; tot and part hold NH*T*G
 * partials (cpu_attn_part_floats(hd) floats each), scratch the chunk's (rows NH*T*G). */
static void attn_heads_layer(const cpu_isa *isa, const float *q, int64_t T, int64_t G, int64_t NH, const uint8_t *K,
                             const uint8_t *V, uint32_t kvt, int64_t hd, int64_t nk0, float scale, float *y,
                             float *tot, float *part, void *scratch) {
    int64_t R = NH * T * G, pf = cpu_attn_part_floats(hd), H = NH * G;
    cpu_attn_empty_totals(tot, R, hd);
    for (int64_t c0 = 0; c0 <= nk0 + T - 2; c0 += CPU_ATTN_CHUNK) {
        isa->attn_chunk_heads(q, H * hd, T, G, NH, K, V, kvt, NH * hd, NH * hd, hd, hd, nk0, 0, 0, scale, c0,
                              nk0 + T - 1, part, scratch);
        for (int64_t r = 0; r < R; r++) cpu_attn_fold(tot + r * pf, part + r * pf, hd);
    }
    for (int64_t r = 0; r < R; r++) { /* row r = (KV head g, token t, query head h of g) */
        int64_t g = r / (T * G), t = r % (T * G) / G, h = r % G;
        cpu_attn_finish(tot + r * pf, hd, y + t * H * hd + (g * G + h) * hd);
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* attn_heads_layer's reads without its products (-m): every block of the layer's keys [0, nk),
 * the NH heads' columns of K and V (rows NH*hd elements of el bytes), in attn_chunk_heads' order. */
static void attn_reads_layer(const uint8_t *K, const uint8_t *V, size_t el, int64_t NH, int64_t hd, int64_t nk) {
    int64_t kw = NH * hd;
    for (int64_t j0 = 0; j0 < nk; j0 += 16) {
        int nbk = nk - j0 < 16 ? (int)(nk - j0) : 16;
        attn_pf kpf, vpf;
        attn_pf_block(&kpf, &vpf, K, V, kw, kw, el, nk, 0, j0, kw, kw);
        attn_read_rows(K + (size_t)(j0 * kw) * el, nbk, (size_t)kw * el, (size_t)kw * el);
        attn_read_rows(V + (size_t)(j0 * kw) * el, nbk, (size_t)kw * el, (size_t)kw * el);
        attn_pf_rest(&kpf);
        attn_pf_rest(&vpf);
    }
}
#define HAVE_READS_ONLY 1
#else
#define HAVE_READS_ONLY 0
static void attn_reads_layer(const uint8_t *K, const uint8_t *V, size_t el, int64_t NH, int64_t hd, int64_t nk) {
    (void)K, (void)V, (void)el, (void)NH, (void)hd, (void)nk;
}
#endif

/* One depth; returns false when the tier's bits differ from the generic tier's. */
static bool run_depth(const cpu_isa *isa, cpu_isa_level level, uint32_t kvt, int64_t P, int64_t T, int64_t G,
                      int64_t Hkv, int64_t hd, int64_t L, int reps, bool heads, bool reads_only) {
    int64_t ctx = P + T, kw = hd * Hkv, H = G * Hkv;
    size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4, state = el * (size_t)(kw * ctx);
    uint8_t *kv = al_malloc_large(&al_default, 2 * state * (size_t)L); /* huge pages, as the session's states */
    float *q = malloc(sizeof(float) * (size_t)(hd * H * T));
    float *y = malloc(sizeof(float) * (size_t)(hd * H * T)), *y_gen = malloc(sizeof(float) * (size_t)(hd * H * T));
    size_t sb = cpu_attn_scratch_bytes(hd, hd, Hkv * T * G), pfb = sizeof(float) * (size_t)cpu_attn_part_floats(hd);
    void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64);
    float *tot = malloc(pfb * (size_t)(Hkv * T * G)), *part = malloc(pfb * (size_t)(Hkv * T * G));
    double *ms = malloc(sizeof(double) * (size_t)reps), *cms = malloc(sizeof(double) * (size_t)reps);
    if (!kv || !q || !y || !y_gen || !scratch || !tot || !part || !ms || !cms) {
        fprintf(stderr, "bench_attn_decode: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < 2 * state * (size_t)L / el; i++) {
        if (kvt == SLM_DTYPE_F16) ((uint16_t *)kv)[i] = f32_to_f16(frand());
        else ((float *)kv)[i] = frand();
    }
    for (int64_t i = 0; i < hd * H * T; i++) q[i] = 2.0f * frand();
    float scale = 1.0f / sqrtf((float)hd);
    /* one step: every layer and KV head, as kern_fast.c's attn_task calls it for T <= 16 (the
     * generic tier: the first layer only, for the check) */
    const cpu_isa *isas[2] = {cpu_isa_generic(), isa};
    for (int pass = 0; pass < 2; pass++) {
        float *yo = pass == 0 ? y_gen : y;
        for (int rep = -1; rep < (pass == 0 ? 0 : reps); rep++) {
            double t0 = now_s(), c0 = cpu_s();
            for (int64_t l = pass == 0 ? L - 1 : 0; l < L; l++) {
                const uint8_t *K = kv + 2 * state * (size_t)(L - 1 - l), *V = K + state;
                if (reads_only && pass == 1) {
                    attn_reads_layer(K, V, el, Hkv, hd, P + T);
                    continue;
                }
                if (heads && pass == 1) {
                    attn_heads_layer(isa, q, T, G, Hkv, K, V, kvt, hd, P + 1, scale, yo, tot, part, scratch);
                    continue;
                }
                for (int64_t g = 0; g < Hkv; g++)
                    cpu_attn_block(isas[pass], q + g * G * hd, H * hd, T, G, K + el * (size_t)(g * hd),
                                   V + el * (size_t)(g * hd), kvt, kw, kw, hd, hd, P + 1, 0, 0, scale, yo + g * G * hd,
                                   H * hd, scratch);
            }
            if (rep >= 0) ms[rep] = 1e3 * (now_s() - t0), cms[rep] = 1e3 * (cpu_s() - c0);
        }
    }
    double med = median(ms, reps), cmed = median(cms, reps);
    double bytes = 2.0 * (double)L * (double)(P + T) * (double)kw * (double)el;
    printf("tier %s%s, %s K/V, P=%lld T=%lld G=%lld Hkv=%lld hd=%lld layers=%lld\n", cpu_isa_name(level),
           reads_only ? " (heads together, reads only)" : heads ? " (heads together)" : "",
           slm_dtype_name((slm_dtype)kvt), (long long)P, (long long)T, (long long)G, (long long)Hkv, (long long)hd,
           (long long)L);
    printf("step %.3f ms (median of %d; min %.3f; CPU %.3f ms), K/V read %.1f MB, %.2f GB/s (%.2f per CPU second), "
           "%.1f ns per key per KV head\n",
           med, reps, ms[0], cmed, bytes / 1e6, bytes / (med * 1e6), bytes / (cmed * 1e6),
           med * 1e6 / (double)(L * Hkv * (P + T)));
    bool same = reads_only || memcmp(y, y_gen, sizeof(float) * (size_t)(hd * H * T)) == 0;
    if (reads_only) printf("reads only: no output to compare\n");
    else printf("bit for bit equal to generic: %s\n", same ? "yes" : "NO");
    al_free_aligned(&al_default, kv);
    free(ms), free(cms), free(q), free(y), free(y_gen), free(scratch), free(tot), free(part);
    return same;
}

int main(int argc, char **argv) {
    int64_t Ps[16] = {2000}, T = 1, G = 3, Hkv = 3, hd = 64, L = 30;
    int nP = 1;
    int reps = 9;
    uint32_t kvt = SLM_DTYPE_F16;
    bool heads = false, reads_only = false;
    cpu_isa_level level = cpu_isa_detect();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f32")) {
            kvt = SLM_DTYPE_F32;
            continue;
        }
        if (!strcmp(argv[i], "-a")) {
            heads = true;
            continue;
        }
        if (!strcmp(argv[i], "-m")) {
            reads_only = true;
            continue;
        }
        if (i + 1 >= argc) break;
        const char *a = argv[++i];
        if (!strcmp(argv[i - 1], "-p")) {
            nP = 0;
            for (char *end = NULL; nP < 16 && *a; a = *end == ',' ? end + 1 : end) {
                Ps[nP++] = strtoll(a, &end, 10);
                if (end == a) break;
            }
        } else if (!strcmp(argv[i - 1], "-T")) T = atoll(a);
        else if (!strcmp(argv[i - 1], "-G")) G = atoll(a);
        else if (!strcmp(argv[i - 1], "-k")) Hkv = atoll(a);
        else if (!strcmp(argv[i - 1], "-d")) hd = atoll(a);
        else if (!strcmp(argv[i - 1], "-l")) L = atoll(a);
        else if (!strcmp(argv[i - 1], "-r")) reps = atoi(a);
        else if (!strcmp(argv[i - 1], "-i")) {
            for (int l = CPU_ISA_GENERIC; l <= CPU_ISA_I8MM; l++)
                if (!strcmp(a, cpu_isa_name((cpu_isa_level)l))) level = (cpu_isa_level)l;
        }
    }
    const cpu_isa *isa = cpu_isa_supported(level) ? bench_isa_of(level) : NULL;
    bool ok_args = nP > 0;
    for (int i = 0; i < nP; i++) ok_args = ok_args && Ps[i] >= 1;
    if (heads && isa && !isa->attn_chunk_heads) {
        fprintf(stderr, "bench_attn_decode: tier %s has no attn_chunk_heads (-a)\n", cpu_isa_name(level));
        return 2;
    }
    if (reads_only && (!heads || !HAVE_READS_ONLY)) {
        fprintf(stderr, "bench_attn_decode: -m needs -a and an x86 build\n");
        return 2;
    }
    if (!isa || !ok_args || T < 1 || G < 1 || Hkv < 1 || hd < 1 || L < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_attn_decode [-p KEYS[,KEYS...]] [-T TOKENS] [-G G] [-k HKV] [-d HD] "
                        "[-l LAYERS] [-r REPS] [-f32] [-a [-m]] [-i TIER]\n");
        return 2;
    }
    bool same = true;
    for (int i = 0; i < nP; i++)
        same = run_depth(isa, level, kvt, Ps[i], T, G, Hkv, hd, L, reps, heads, reads_only) && same;
    return same ? 0 : 1;
}
