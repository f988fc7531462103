/* attn_decode.c — benchmark (not a test) of one CPU tier's attn_block (cpu.h) in the decode
 * shapes: T query tokens (1 = decode, 2..8 = verify / batched decode) of the G query heads of
 * each of Hkv KV heads, after P keys, over L layers of f16 or f32 K/V states laid out as the
 * session's ((hd*Hkv, ctx) rows), so L layers larger than the last level cache measure the
 * streaming case. Per step (all layers and heads, one thread): the median of R timings in ms,
 * the K/V bytes the step must read and the rate that makes; and a check that the tier's output
 * equals the generic tier's bit for bit.
 * Usage: bench_attn_decode [-p KEYS] [-T TOKENS] [-G G] [-k HKV] [-d HD] [-l LAYERS] [-r REPS]
 *                          [-f32] [-i generic|neon|i8mm|avx2|avxvnni|avx512|amx] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"
#include "base/half.h"

#include "bench_isa.h"
#include "bench_util.h"

static uint32_t rng = 12345u;
static float frand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

int main(int argc, char **argv) {
    int64_t P = 2000, T = 1, G = 3, Hkv = 3, hd = 64, L = 30;
    int reps = 9;
    uint32_t kvt = SLM_DTYPE_F16;
    cpu_isa_level level = cpu_isa_detect();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f32")) {
            kvt = SLM_DTYPE_F32;
            continue;
        }
        if (i + 1 >= argc) break;
        const char *a = argv[++i];
        if (!strcmp(argv[i - 1], "-p")) P = atoll(a);
        else if (!strcmp(argv[i - 1], "-T")) T = atoll(a);
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
    if (!isa || P < 1 || T < 1 || G < 1 || Hkv < 1 || hd < 1 || L < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_attn_decode [-p KEYS] [-T TOKENS] [-G G] [-k HKV] [-d HD] [-l LAYERS] "
                        "[-r REPS] [-f32] [-i TIER]\n");
        return 2;
    }
    int64_t ctx = P + T, kw = hd * Hkv, H = G * Hkv;
    size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4, state = el * (size_t)(kw * ctx);
    uint8_t *kv = malloc(2 * state * (size_t)L);
    float *q = malloc(sizeof(float) * (size_t)(hd * H * T));
    float *y = malloc(sizeof(float) * (size_t)(hd * H * T)), *y_gen = malloc(sizeof(float) * (size_t)(hd * H * T));
    size_t sb = cpu_attn_scratch_bytes(hd, hd, T * G);
    void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64);
    if (!kv || !q || !y || !y_gen || !scratch) {
        fprintf(stderr, "bench_attn_decode: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < 2 * state * (size_t)L / el; i++) {
        if (kvt == SLM_DTYPE_F16) ((uint16_t *)kv)[i] = f32_to_f16(frand());
        else ((float *)kv)[i] = frand();
    }
    for (int64_t i = 0; i < hd * H * T; i++) q[i] = 2.0f * frand();
    float scale = 1.0f / sqrtf((float)hd);
    /* one step: every layer and KV head, as kern_fast.c's attn_task calls it for T <= 16 */
    const cpu_isa *isas[2] = {cpu_isa_generic(), isa};
    double *ms = malloc(sizeof(double) * (size_t)reps);
    for (int pass = 0; pass < 2; pass++) {
        float *yo = pass == 0 ? y_gen : y;
        for (int rep = -1; rep < (pass == 0 ? 0 : reps); rep++) {
            double t0 = now_s();
            for (int64_t l = 0; l < L; l++) {
                const uint8_t *K = kv + 2 * state * (size_t)l, *V = K + state;
                for (int64_t g = 0; g < Hkv; g++)
                    cpu_attn_block(isas[pass], q + g * G * hd, H * hd, T, G, K + el * (size_t)(g * hd),
                                   V + el * (size_t)(g * hd), kvt, kw, kw, hd, hd, P + 1, 0, 0, scale, yo + g * G * hd,
                                   H * hd, scratch);
            }
            if (rep >= 0) ms[rep] = 1e3 * (now_s() - t0);
        }
    }
    double med = median(ms, reps);
    double bytes = 2.0 * (double)L * (double)(P + T) * (double)kw * (double)el;
    printf("tier %s, %s K/V, P=%lld T=%lld G=%lld Hkv=%lld hd=%lld layers=%lld\n", cpu_isa_name(level),
           slm_dtype_name((slm_dtype)kvt), (long long)P, (long long)T, (long long)G, (long long)Hkv, (long long)hd, (long long)L);
    printf("step %.3f ms (median of %d; min %.3f), K/V read %.1f MB, %.2f GB/s, %.1f ns per key per KV head\n", med,
           reps, ms[0], bytes / 1e6, bytes / (med * 1e6), med * 1e6 / (double)(L * Hkv * (P + T)));
    bool same = memcmp(y, y_gen, sizeof(float) * (size_t)(hd * H * T)) == 0;
    printf("bit for bit equal to generic: %s\n", same ? "yes" : "NO");
    free(ms), free(kv), free(q), free(y), free(y_gen), free(scratch);
    return same ? 0 : 1;
}
