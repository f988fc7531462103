/* neon_kernels.c — the NEON tier (kern_neon.c) against the portable C (kern_generic.c), bit for
 * bit (built with -DSLM_CROSS_I8MM: the I8MM tier, whose packed matmuls are kern_i8mm.c's), on random shapes with odd sizes and tails: activation quantisation for every quantised type,
 * the quantised matmuls (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 in the file layout; the eight types with tiles
 * on the repacked tiles, whole matrices and ranges from tile 2, and 1-9, 12 and 17 columns; Q4_K,
 * Q5_K, Q6_K in the file layout)
 * and the float matmuls (F32, F16, BF16), and attention over Q8_0 / Q4_0 K and V states (attn_chunk_q,
 * windows and rings included). cpu.h's canonical arithmetic makes every tier give the
 * same bits, so the portable C is the reference. Cross-compiled for aarch64 with the
 * dot-product extension and run under qemu-user by tests/cross/run_neon.sh (the CI machine is x86);
 * only the kernel files are linked. Exit status 0 when every case matches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"
#include "base/half.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1)); }
static float frand(void) { return (float)((double)(next_u64() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

static int failures;
static void check(bool ok, const char *what, uint32_t wt, int64_t k, int64_t m, int64_t cols) {
    if (ok) return;
    fprintf(stderr, "FAIL %s dtype %u k=%lld m=%lld cols=%lld\n", what, (unsigned)wt, (long long)k, (long long)m,
            (long long)cols);
    failures++;
}

/* m rows of k random weights of type wt in the GGUF layout: quants random, scales finite f16. */
static uint8_t *rand_weights(uint32_t wt, int64_t k, int64_t m, size_t *row_bytes) {
    size_t bsz, belems;
    switch (wt) {
    case SLM_DTYPE_Q4_0: bsz = 18, belems = 32; break;
    case SLM_DTYPE_Q4_1: bsz = 20, belems = 32; break;
    case SLM_DTYPE_Q5_0: bsz = 22, belems = 32; break;
    case SLM_DTYPE_Q5_1: bsz = 24, belems = 32; break;
    case SLM_DTYPE_Q5_K: bsz = 176, belems = 256; break;
    case SLM_DTYPE_Q8_0: bsz = 34, belems = 32; break;
    case SLM_DTYPE_Q4_K: bsz = 144, belems = 256; break;
    case SLM_DTYPE_Q6_K: bsz = 210, belems = 256; break;
    case SLM_DTYPE_F32: bsz = 4, belems = 1; break;
    default: bsz = 2, belems = 1; break; /* F16, BF16 */
    }
    *row_bytes = (size_t)k / belems * bsz;
    size_t n = *row_bytes * (size_t)m;
    uint8_t *w = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) w[i] = (uint8_t)next_u64();
    for (size_t b = 0; b < n / bsz; b++) {
        uint8_t *blk = w + b * bsz;
        uint16_t h;
        if (wt == SLM_DTYPE_F32) {
            float f = frand();
            memcpy(blk, &f, 4);
        } else if (wt == SLM_DTYPE_F16 || wt == SLM_DTYPE_BF16) {
            h = wt == SLM_DTYPE_F16 ? f32_to_f16(frand()) : f32_to_bf16(frand());
            memcpy(blk, &h, 2);
        } else if (wt == SLM_DTYPE_Q6_K) {
            h = f32_to_f16(0.01f * frand());
            memcpy(blk + 208, &h, 2);
        } else {
            h = f32_to_f16(0.05f * frand()); /* d (Q4_1, Q5_1: then m; Q4_K, Q5_K: then dmin) */
            memcpy(blk, &h, 2);
            if (wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1 || wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K) {
                h = f32_to_f16(0.05f * frand());
                memcpy(blk + 2, &h, 2);
            }
        }
    }
    return w;
}

/* The few-column shapes on the repacked tiles of every type: column counts 1 to 9 and some above
 * (passes of 8 plus a rest), a tile pair and a lone half-full tile (m = 40) and 13 tiles (m = 200),
 * more 32-blocks than one chunk of tile_cols (37). Returns the number of cases. */
static int few_cols(const cpu_isa *neon, const cpu_isa *ref, const uint32_t *types, size_t n_types) {
    const int64_t col_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17}, rows[] = {40, 200};
    int cases = 0;
    for (size_t ti = 0; ti < n_types; ti++)
        for (size_t mi = 0; mi < sizeof rows / sizeof rows[0]; mi++) {
            uint32_t wt = types[ti];
            if (!neon->tile_block_bytes(wt)) continue;
            int64_t k = cpu_wt_is_k(wt) ? 5 * 256 : 37 * 32, m = rows[mi], max_cols = 17;
            size_t rb, as = cpu_act_bytes(wt, k);
            uint8_t *w = rand_weights(wt, k, m, &rb), *act = calloc((size_t)max_cols, as);
            float *x = malloc(sizeof(float) * (size_t)k);
            for (int64_t c = 0; c < max_cols; c++) {
                for (int64_t i = 0; i < k; i++) x[i] = frand();
                ref->quant_act(wt, x, k, act + (size_t)c * as);
            }
            int64_t ntiles = (m + 15) / 16;
            uint8_t *pk = malloc((size_t)ntiles * (size_t)(k / CPU_QK) * neon->tile_block_bytes(wt));
            neon->repack_tiles(wt, w, rb, m, k, 0, ntiles, pk);
            float *y_ref = calloc((size_t)(m * max_cols), sizeof(float)), *y = calloc((size_t)(m * max_cols), sizeof(float));
            void *scratch = malloc(cpu_mm_scratch_bytes(wt, k, max_cols));
            for (size_t ci = 0; ci < sizeof col_counts / sizeof col_counts[0]; ci++) {
                int64_t cols = col_counts[ci];
                size_t ny = (size_t)(m * cols);
                ref->mm_quant(wt, w, rb, m, k, act, as, cols, y_ref, m, scratch);
                memset(y, 0, ny * sizeof(float));
                neon->mm_quant_packed(wt, pk, m, k, act, as, cols, y, m);
                check(memcmp(y, y_ref, ny * sizeof(float)) == 0, "mm_quant_packed, few columns", wt, k, m, cols);
                cases++;
            }
            free(w), free(act), free(x), free(pk), free(y_ref), free(y), free(scratch);
        }
    return cases;
}

/* A KV state of rows x w elements of type t (Q8_0, Q4_0 with finite f16 scales; F16): random. */
static uint8_t *rand_kv(uint32_t t, int64_t w, int64_t rows) {
    size_t bb = t == SLM_DTYPE_Q8_0 ? 34 : t == SLM_DTYPE_Q4_0 ? 18 : 64, n = (size_t)(w / 32 * rows);
    uint8_t *p = malloc(bb * n);
    for (size_t b = 0; b < n; b++) {
        uint8_t *blk = p + b * bb;
        for (size_t i = 0; i < bb; i++) blk[i] = (uint8_t)next_u64();
        if (t == SLM_DTYPE_F16)
            for (int i = 0; i < 32; i++) {
                uint16_t h = f32_to_f16(frand());
                memcpy(blk + 2 * i, &h, 2);
            }
        else {
            uint16_t d = f32_to_f16(0.02f * (1.0f + frand()));
            memcpy(blk, &d, 2);
        }
    }
    return p;
}

/* attn_chunk_q on the NEON table against the portable C, bit for bit (cpu_attn_block_q: every chunk
 * of keys, folded; several chunks from 128 keys on). */
static int attention_q(const cpu_isa *neon, const cpu_isa *ref) {
    const uint32_t kts[] = {SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_0, SLM_DTYPE_Q8_0, SLM_DTYPE_F16};
    const uint32_t vts[] = {SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_0, SLM_DTYPE_F16, SLM_DTYPE_Q4_0};
    int cases = 0;
    for (int trial = 0; trial < 16; trial++) {
        uint32_t kt = kts[trial % 4], vt = vts[trial % 4];
        int64_t hd = 32 * irand(1, 8), G = irand(1, 4), T = trial < 4 ? 1 : irand(1, 9);
        int64_t window = trial % 3 == 2 ? irand(1, 60) : 0, ring = window ? 16 * irand(5, 8) : 0;
        int64_t nk0 = irand(1, trial % 2 ? 600 : 100), rows = ring ? ring : nk0 + T;
        uint8_t *k = rand_kv(kt, hd, rows), *v = rand_kv(vt, hd, rows);
        float *q = malloc(sizeof(float) * (size_t)(hd * G * T));
        for (int64_t i = 0; i < hd * G * T; i++) q[i] = frand();
        size_t ny = (size_t)(hd * G * T), sb = cpu_attn_scratch_bytes(hd, hd, T * G);
        float *y_ref = calloc(ny, sizeof(float)), *y = calloc(ny, sizeof(float));
        void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64);
        cpu_attn_block_q(ref, q, hd * G, T, G, k, v, kt, vt, hd, hd, hd, hd, nk0, window, ring, 0.125f, y_ref, hd * G,
                         scratch);
        cpu_attn_block_q(neon, q, hd * G, T, G, k, v, kt, vt, hd, hd, hd, hd, nk0, window, ring, 0.125f, y, hd * G,
                         scratch);
        check(memcmp(y, y_ref, ny * sizeof(float)) == 0, "attn_chunk_q", kt, hd, T * G, vt);
        free(k), free(v), free(q), free(y_ref), free(y), free(scratch);
        cases++;
    }
    return cases;
}

int main(void) {
    const cpu_isa *neon = cpu_isa_neon(), *ref = cpu_isa_generic();
    if (!neon) {
        fprintf(stderr, "neon_kernels: this build has no NEON tier (needs __ARM_FEATURE_DOTPROD)\n");
        return 1;
    }
    const char *name = "neon_kernels";
#ifdef SLM_CROSS_I8MM /* the I8MM tier: the NEON table with kern_i8mm.c's packed matmul, as cpu.c builds it */
    static cpu_isa i8mm;
    if (!cpu_i8mm_mm_quant_packed()) {
        fprintf(stderr, "i8mm_kernels: this build has no I8MM tier (needs __ARM_FEATURE_MATMUL_INT8)\n");
        return 1;
    }
    i8mm = *neon;
    i8mm.level = CPU_ISA_I8MM;
    i8mm.mm_quant_packed = cpu_i8mm_mm_quant_packed();
    neon = &i8mm;
    name = "i8mm_kernels";
#endif
    const uint32_t quant[] = {SLM_DTYPE_Q4_0, SLM_DTYPE_Q4_1, SLM_DTYPE_Q5_0, SLM_DTYPE_Q5_1,
                              SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_K, SLM_DTYPE_Q5_K, SLM_DTYPE_Q6_K};
    const uint32_t flt[] = {SLM_DTYPE_F32, SLM_DTYPE_F16, SLM_DTYPE_BF16};
    int cases = 0;
    for (int trial = 0; trial < 12; trial++) {
        for (size_t ti = 0; ti < sizeof quant / sizeof quant[0]; ti++) {
            uint32_t wt = quant[ti];
            int64_t be = cpu_wt_is_k(wt) ? 256 : 32;
            int64_t k = be * irand(1, be == 256 ? 5 : 37), m = trial == 0 ? 1 : irand(1, 70);
            int64_t cols = trial < 3 ? 1 : irand(2, 9);
            size_t rb, as = cpu_act_bytes(wt, k);
            uint8_t *w = rand_weights(wt, k, m, &rb);
            float *x = malloc(sizeof(float) * (size_t)(k * cols));
            for (int64_t i = 0; i < k * cols; i++) x[i] = trial % 4 == 1 && i % 7 == 0 ? 0.0f : frand();
            uint8_t *act_ref = calloc((size_t)cols, as), *act = calloc((size_t)cols, as);
            for (int64_t c = 0; c < cols; c++) {
                ref->quant_act(wt, x + c * k, k, act_ref + (size_t)c * as);
                neon->quant_act(wt, x + c * k, k, act + (size_t)c * as);
            }
            check(memcmp(act, act_ref, as * (size_t)cols) == 0, "quant_act", wt, k, m, cols);
            size_t ny = (size_t)(m * cols), scratch_bytes = cpu_mm_scratch_bytes(wt, k, cols);
            float *y_ref = calloc(ny, sizeof(float)), *y = calloc(ny, sizeof(float));
            void *scratch = malloc(scratch_bytes ? scratch_bytes : 1);
            ref->mm_quant(wt, w, rb, m, k, act_ref, as, cols, y_ref, m, scratch);
            neon->mm_quant(wt, w, rb, m, k, act_ref, as, cols, y, m, scratch);
            check(memcmp(y, y_ref, ny * sizeof(float)) == 0, "mm_quant", wt, k, m, cols);
            cases += 2;
            if (neon->tile_block_bytes(wt)) { /* the repacked tiles: whole matrix, then from tile 2 on */
                int64_t ntiles = (m + 15) / 16;
                size_t tile_bytes = (size_t)(k / CPU_QK) * neon->tile_block_bytes(wt);
                uint8_t *pk = malloc((size_t)ntiles * tile_bytes);
                neon->repack_tiles(wt, w, rb, m, k, 0, ntiles, pk);
                memset(y, 0, ny * sizeof(float));
                neon->mm_quant_packed(wt, pk, m, k, act_ref, as, cols, y, m);
                check(memcmp(y, y_ref, ny * sizeof(float)) == 0, "mm_quant_packed", wt, k, m, cols);
                if (m > 32) {
                    memset(y, 0, ny * sizeof(float));
                    neon->mm_quant_packed(wt, pk + 2 * tile_bytes, m - 32, k, act_ref, as, cols, y + 32, m);
                    bool same = true;
                    for (int64_t c = 0; c < cols; c++)
                        same = same && memcmp(y + c * m + 32, y_ref + c * m + 32, sizeof(float) * (size_t)(m - 32)) == 0;
                    check(same, "mm_quant_packed from tile 2", wt, k, m, cols);
                }
                free(pk);
                cases += 2;
            }
            free(w), free(x), free(act_ref), free(act), free(y_ref), free(y), free(scratch);
        }
        for (size_t ti = 0; ti < sizeof flt / sizeof flt[0]; ti++) {
            uint32_t wt = flt[ti];
            int64_t k = irand(1, 300), m = trial == 0 ? 1 : irand(1, 70), cols = trial < 3 ? 1 : irand(2, 9);
            size_t rb;
            uint8_t *w = rand_weights(wt, k, m, &rb);
            float *x = malloc(sizeof(float) * (size_t)(k * cols));
            for (int64_t i = 0; i < k * cols; i++) x[i] = frand();
            size_t ny = (size_t)(m * cols), scratch_bytes = cpu_mm_scratch_bytes(wt, k, cols);
            float *y_ref = calloc(ny, sizeof(float)), *y = calloc(ny, sizeof(float));
            void *scratch = malloc(scratch_bytes ? scratch_bytes : 1);
            ref->mm_float(wt, w, rb, m, k, x, cols, y_ref, m, scratch);
            neon->mm_float(wt, w, rb, m, k, x, cols, y, m, scratch);
            check(memcmp(y, y_ref, ny * sizeof(float)) == 0, "mm_float", wt, k, m, cols);
            free(w), free(x), free(y_ref), free(y), free(scratch);
            cases++;
        }
    }
    cases += few_cols(neon, ref, quant, sizeof quant / sizeof quant[0]);
    cases += attention_q(neon, ref);
    printf("%s: %d cases, %d failures\n", name, cases, failures);
    return failures ? 1 : 0;
}
