/* kern_i8mm.c — the I8MM tier's matmul (CPU_ISA_I8MM): the quantised matmuls of two and more
 * columns on the repacked tiles (kern_tiles.c) with SMMLA (ARMv8.6 int8 matrix multiply: Apple M2
 * and later, Cortex-A510/A710/X2 and later). Everything else, one column included, is the NEON
 * tier's (cpu.c builds the table). The whole file is guarded: x86 builds, and aarch64 builds
 * without __ARM_FEATURE_MATMUL_INT8, compile it to a stub returning NULL. Built with
 * -march=armv8.2-a+dotprod+i8mm on aarch64 (CMakeLists.txt); it runs only where
 * cpu_isa_supported(CPU_ISA_I8MM) (HWCAP2_I8MM).
 *
 * SMMLA multiplies a 2 x 8 int8 matrix by an 8 x 2 one into 2 x 2 int32 lanes [r0c0, r0c1, r1c0,
 * r1c1]. A tile vector holds 4 consecutive weight bytes of each of 16 rows; zipping the 32-bit
 * lanes of two vectors that cover elements e..e+3 and e+4..e+7 gives rows (2i, 2i+1) with 8
 * consecutive elements each, and the activations of two columns give the 8 x 2 operand. The
 * integer block sums are exact, so every lane holds the same int32 as the NEON tier's sdot sums;
 * the float steps are cpu.h's canonical ones per (row, column) lane: the products dw·da and
 * d·da are formed lane by lane from [w_r0, w_r0, w_r1, w_r1] and [a_c0, a_c1, a_c0, a_c1], the
 * FMAs per block in order. An odd column count runs its last column paired with itself. Checked
 * bit for bit against the portable C under qemu-user (tests/cross/run_neon.sh) and natively by the
 * tier tests on aarch64 hosts that have I8MM. */
#include "backend/cpu/cpu.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_DOTPROD) && \
    defined(__ARM_FEATURE_MATMUL_INT8)

#include <arm_neon.h>
#include <string.h>

#include "backend/cpu/kern_common.h"
#include "backend/cpu/kern_neon_tiles.h"

static float ldf(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static int32_t ldi(const uint8_t *p) { int32_t i; memcpy(&i, p, 4); return i; }

/* [v0, v0, v1, v1] from lanes 2h, 2h + 1 of v (rows of a row pair, once per column). */
static inline float32x4_t rows2f(float32x4_t v, int h) { return h ? vzip2q_f32(v, v) : vzip1q_f32(v, v); }
static inline int32x4_t rows2i(int32x4_t v, int h) { return h ? vzip2q_s32(v, v) : vzip1q_s32(v, v); }
/* Activation bytes a0[0..8) and a1[0..8) as SMMLA's second operand (columns c0, c1). */
static inline int8x16_t cols2(const int8_t *a0, const int8_t *a1) { return vcombine_s8(vld1_s8(a0), vld1_s8(a1)); }
/* [x0, x1, x0, x1] (a value per column, for both rows of a pair). */
static inline float32x4_t cols2f(float x0, float x1) {
    float v[4] = {x0, x1, x0, x1};
    return vld1q_f32(v);
}
static inline int32x4_t cols2i(int32_t x0, int32_t x1) {
    int32_t v[4] = {x0, x1, x0, x1};
    return vld1q_s32(v);
}
/* Zips vectors p (elements e..e+3 of rows 4g..4g+3) and q (e+4..e+7) into row pairs: out[0] rows
 * 4g, 4g+1 and out[1] rows 4g+2, 4g+3, each with elements e..e+7. */
static inline void zip_rows(int8x16_t p, int8x16_t q, int8x16_t out[2]) {
    out[0] = vreinterpretq_s8_s32(vzip1q_s32(vreinterpretq_s32_s8(p), vreinterpretq_s32_s8(q)));
    out[1] = vreinterpretq_s8_s32(vzip2q_s32(vreinterpretq_s32_s8(p), vreinterpretq_s32_s8(q)));
}
/* Stores a row pair's accumulator (lanes [r0c0, r0c1, r1c0, r1c1]) to y (column c at y + c ldy),
 * rows r0 = 2i, r1 = 2i + 1 of the tile when below nr; column c1 only when it is a second column. */
static inline void store_pair(float32x4_t acc, float *y, int64_t ldy, int64_t c, bool two, int64_t r0, int64_t nr) {
    float v[4];
    vst1q_f32(v, acc);
    if (r0 < nr) {
        y[c * ldy + r0] = v[0];
        if (two) y[(c + 1) * ldy + r0] = v[1];
    }
    if (r0 + 1 < nr) {
        y[c * ldy + r0 + 1] = v[2];
        if (two) y[(c + 1) * ldy + r0 + 1] = v[3];
    }
}

#define MAX_PAIRS 4 /* column pairs per pass: 8 columns */
#define TILE_CHUNK_BLOCKS 32

/* Columns [0, nc) (nc <= 8) against one tile of a 32-block type (addressed by sub from its pair's
 * start pk), rows [0, nr) of the 16 written. Per chunk of blocks and group g of 4 rows, each
 * block's weights are unpacked and zipped once for every column pair. */
static void tile_pairs_q32(uint32_t wt, const uint8_t *pk, cpu_tile_sub sub, int64_t nb, int64_t k,
                           const uint8_t *act, size_t act_stride, int64_t nc, float *y, int64_t ldy, int64_t nr) {
    const bool mins = wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1;
    const bool aux = wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q5_0;
    const int np = (int)((nc + 1) / 2);
    const uint8_t *ac[2 * MAX_PAIRS];
    for (int c = 0; c < 2 * np; c++) ac[c] = act + (size_t)(c < nc ? c : nc - 1) * act_stride;
    float32x4_t acc[4][2][MAX_PAIRS]; /* [row group][row pair][column pair] */
    for (int g = 0; g < 4; g++)
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < np; p++) acc[g][h][p] = vdupq_n_f32(0.0f);
    for (int64_t b0 = 0; b0 < nb; b0 += TILE_CHUNK_BLOCKS) {
        int64_t b1 = b0 + TILE_CHUNK_BLOCKS < nb ? b0 + TILE_CHUNK_BLOCKS : nb;
        for (int g = 0; g < 4; g++) {
            const uint8_t *blk = pk + (size_t)b0 * sub.stride;
            for (int64_t b = b0; b < b1; b++, blk += sub.stride) {
                const uint8_t *q = blk + sub.quants + 16 * g, *sc = blk + sub.scales;
                /* rows 4g..4g+3 as neon_tile_q32_rows4 lays them out: w[2e], w[2e + 1] hold 8 consecutive elements */
                int8x16_t w[8];
                neon_tile_q32_rows4(wt, q, w);
                int8x16_t z[4][2]; /* z[e][h]: elements 8e..8e+7 of row pair h */
                for (int e = 0; e < 4; e++) zip_rows(w[2 * e], w[2 * e + 1], z[e]);
                float32x4_t dw = neon_f16x4(sc + 8 * g), mw = mins ? neon_f16x4(sc + 32 + 8 * g) : vdupq_n_f32(0.0f);
                for (int p = 0; p < np; p++) {
                    const uint8_t *a0 = ac[2 * p], *a1 = ac[2 * p + 1];
                    int8x16_t A[4];
                    for (int e = 0; e < 4; e++)
                        A[e] = cols2((const int8_t *)a0 + 32 * b + 8 * e, (const int8_t *)a1 + 32 * b + 8 * e);
                    int32x4_t init = aux ? cols2i(ldi(a0 + k + 4 * nb + 4 * b), ldi(a1 + k + 4 * nb + 4 * b))
                                         : vdupq_n_s32(0);
                    float32x4_t da = cols2f(ldf(a0 + k + 4 * b), ldf(a1 + k + 4 * b));
                    float32x4_t sa = mins ? cols2f(ldf(a0 + k + 4 * nb + 4 * b), ldf(a1 + k + 4 * nb + 4 * b))
                                          : vdupq_n_f32(0.0f);
                    for (int h = 0; h < 2; h++) {
                        int32x4_t is = init;
                        for (int e = 0; e < 4; e++) is = vmmlaq_s32(is, z[e][h], A[e]);
                        acc[g][h][p] = vfmaq_f32(acc[g][h][p], vcvtq_f32_s32(is), vmulq_f32(rows2f(dw, h), da));
                        if (mins) acc[g][h][p] = vfmaq_f32(acc[g][h][p], rows2f(mw, h), sa);
                    }
                }
            }
        }
    }
    for (int g = 0; g < 4; g++)
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < np; p++) store_pair(acc[g][h][p], y, ldy, 2 * p, 2 * p + 1 < nc, 4 * g + 2 * h, nr);
}

/* Columns [0, nc) (nc <= 8) against one K-quant tile (nbk super-blocks, kern_common.h's layout),
 * rows [0, nr) of the 16 written: kern_neon.c's tile_cols_kquant with SMMLA, each super-block's
 * weights unpacked and zipped once for every column pair. */
static void tile_pairs_kquant(uint32_t wt, const uint8_t *pk, int64_t nbk, const uint8_t *act, size_t act_stride,
                              int64_t nc, float *y, int64_t ldy, int64_t nr) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30), b16 = vdupq_n_u8(0x10);
    const bool q4 = wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K, q5 = wt == SLM_DTYPE_Q5_K;
    const size_t sbb = q5 ? KT_Q5K : q4 ? KT_Q4K : KT_Q6K;
    const int np = (int)((nc + 1) / 2);
    const uint8_t *ac[2 * MAX_PAIRS];
    for (int c = 0; c < 2 * np; c++) ac[c] = act + (size_t)(c < nc ? c : nc - 1) * act_stride;
    float32x4_t acc[4][2][MAX_PAIRS];
    for (int g = 0; g < 4; g++)
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < np; p++) acc[g][h][p] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nbk; b++, pk += sbb) {
        float da_c[2 * MAX_PAIRS];
        int16_t bs[2 * MAX_PAIRS][16];
        for (int c = 0; c < 2 * np; c++) {
            const uint8_t *ab = ac[c] + (size_t)b * CPU_Q8K_BYTES;
            da_c[c] = ldf(ab);
            memcpy(bs[c], ab + 260, sizeof bs[c]);
        }
        for (int g = 0; g < 4; g++) { /* rows 4g..4g+3 */
            int32x4_t is[2][MAX_PAIRS], corr[2][MAX_PAIRS];
            for (int h = 0; h < 2; h++)
                for (int p = 0; p < np; p++) is[h][p] = corr[h][p] = vdupq_n_s32(0);
            if (q4) {
                for (int c = 0; c < 4; c++) { /* 64 elements: sub-blocks 2c (low nibbles), 2c + 1 (high) */
                    const uint8_t *v = pk + 64 * 8 * c + 16 * g;
                    int8x16_t wl[8], wh[8];
                    for (int j = 0; j < 8; j++) {
                        uint8x16_t wv = vld1q_u8(v + 64 * j), l = vandq_u8(wv, m4), hh = vshrq_n_u8(wv, 4);
                        if (q5) { /* bits 2c, 2c + 1 of the qh bytes to bit 4 (kern_common.h) */
                            uint8x16_t qh = vld1q_u8(pk + KT_Q4K + 64 * j + 16 * g);
                            l = vorrq_u8(l, vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - 2 * c))), b16));
                            hh = vorrq_u8(hh, vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(3 - 2 * c))), b16));
                        }
                        wl[j] = vreinterpretq_s8_u8(l);
                        wh[j] = vreinterpretq_s8_u8(hh);
                    }
                    int8x16_t zl[4][2], zh[4][2];
                    for (int e = 0; e < 4; e++) {
                        zip_rows(wl[2 * e], wl[2 * e + 1], zl[e]);
                        zip_rows(wh[2 * e], wh[2 * e + 1], zh[e]);
                    }
                    int32x4_t sl = neon_widen4(pk + 2048 + 32 * c + 4 * g, true), shi = neon_widen4(pk + 2048 + 32 * c + 16 + 4 * g, true);
                    for (int p = 0; p < np; p++) {
                        const int8_t *a0 = (const int8_t *)ac[2 * p] + (size_t)b * CPU_Q8K_BYTES + 4 + 64 * c;
                        const int8_t *a1 = (const int8_t *)ac[2 * p + 1] + (size_t)b * CPU_Q8K_BYTES + 4 + 64 * c;
                        int8x16_t L[4], H[4];
                        for (int e = 0; e < 4; e++) L[e] = cols2(a0 + 8 * e, a1 + 8 * e), H[e] = cols2(a0 + 32 + 8 * e, a1 + 32 + 8 * e);
                        for (int h = 0; h < 2; h++) {
                            int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
                            for (int e = 0; e < 4; e++) {
                                lo = vmmlaq_s32(lo, zl[e][h], L[e]);
                                hi = vmmlaq_s32(hi, zh[e][h], H[e]);
                            }
                            is[h][p] = vaddq_s32(is[h][p], vaddq_s32(vmulq_s32(lo, rows2i(sl, h)), vmulq_s32(hi, rows2i(shi, h))));
                        }
                    }
                }
                for (int sb = 0; sb < 8; sb++) {
                    int32x4_t mn = neon_widen4(pk + 2176 + 16 * sb + 4 * g, true);
                    for (int p = 0; p < np; p++) {
                        int32x4_t bsum = cols2i(bs[2 * p][2 * sb] + bs[2 * p][2 * sb + 1],
                                                bs[2 * p + 1][2 * sb] + bs[2 * p + 1][2 * sb + 1]);
                        for (int h = 0; h < 2; h++) corr[h][p] = vaddq_s32(corr[h][p], vmulq_s32(rows2i(mn, h), bsum));
                    }
                }
                float32x4_t d = neon_f16x4(pk + 2304 + 8 * g), dmin = neon_f16x4(pk + 2336 + 8 * g);
                for (int p = 0; p < np; p++) {
                    float32x4_t da = cols2f(da_c[2 * p], da_c[2 * p + 1]);
                    for (int h = 0; h < 2; h++) {
                        acc[g][h][p] = vfmaq_f32(acc[g][h][p], vcvtq_f32_s32(is[h][p]), vmulq_f32(rows2f(d, h), da));
                        acc[g][h][p] = vfmsq_f32(acc[g][h][p], vcvtq_f32_s32(corr[h][p]), vmulq_f32(rows2f(dmin, h), da));
                    }
                }
            } else { /* Q6_K: 16 sub-blocks of 16 */
                for (int j = 0; j < 16; j++) {
                    const uint8_t *v = pk + 192 * j + 16 * g;
                    uint8x16_t L0 = vld1q_u8(v), L1 = vld1q_u8(v + 64), H = vld1q_u8(v + 128);
                    uint8x16_t q0 = vorrq_u8(vandq_u8(L0, m4), vandq_u8(vshlq_n_u8(H, 4), m30));
                    uint8x16_t q1 = vorrq_u8(vshrq_n_u8(L0, 4), vandq_u8(vshlq_n_u8(H, 2), m30));
                    uint8x16_t q2 = vorrq_u8(vandq_u8(L1, m4), vandq_u8(H, m30));
                    uint8x16_t q3 = vorrq_u8(vshrq_n_u8(L1, 4), vandq_u8(vshrq_n_u8(H, 2), m30));
                    int8x16_t z0[2], z1[2]; /* elements 16j..16j+7, 16j+8..16j+15 */
                    zip_rows(vreinterpretq_s8_u8(q0), vreinterpretq_s8_u8(q1), z0);
                    zip_rows(vreinterpretq_s8_u8(q2), vreinterpretq_s8_u8(q3), z1);
                    int32x4_t sc = neon_widen4(pk + 3072 + 16 * j + 4 * g, false);
                    for (int p = 0; p < np; p++) {
                        const int8_t *a0 = (const int8_t *)ac[2 * p] + (size_t)b * CPU_Q8K_BYTES + 4 + 16 * j;
                        const int8_t *a1 = (const int8_t *)ac[2 * p + 1] + (size_t)b * CPU_Q8K_BYTES + 4 + 16 * j;
                        int8x16_t A0 = cols2(a0, a1), A1 = cols2(a0 + 8, a1 + 8);
                        int32x4_t bsj = cols2i(bs[2 * p][j], bs[2 * p + 1][j]);
                        for (int h = 0; h < 2; h++) {
                            int32x4_t sum = vmmlaq_s32(vmmlaq_s32(vdupq_n_s32(0), z0[h], A0), z1[h], A1);
                            int32x4_t s2 = rows2i(sc, h);
                            is[h][p] = vaddq_s32(is[h][p], vmulq_s32(sum, s2));
                            corr[h][p] = vaddq_s32(corr[h][p], vmulq_s32(s2, bsj));
                        }
                    }
                }
                float32x4_t d = neon_f16x4(pk + 3328 + 8 * g);
                for (int p = 0; p < np; p++) {
                    float32x4_t da = cols2f(da_c[2 * p], da_c[2 * p + 1]);
                    for (int h = 0; h < 2; h++) {
                        int32x4_t isum = vsubq_s32(is[h][p], vshlq_n_s32(corr[h][p], 5));
                        acc[g][h][p] = vfmaq_f32(acc[g][h][p], vcvtq_f32_s32(isum), vmulq_f32(rows2f(d, h), da));
                    }
                }
            }
        }
    }
    for (int g = 0; g < 4; g++)
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < np; p++) store_pair(acc[g][h][p], y, ldy, 2 * p, 2 * p + 1 < nc, 4 * g + 2 * h, nr);
}

/* cpu_isa.mm_quant_packed of the I8MM tier: one column on the NEON kernels, more in passes of up
 * to 8 columns with SMMLA. */
static void mm_quant_packed(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                            size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    if (ncols == 1) {
        cpu_isa_neon()->mm_quant_packed(wt, pk, nr, k, act, act_stride, ncols, y, ldy);
        return;
    }
    int64_t ntiles = (nr + 15) / 16;
    if (cpu_wt_is_k(wt)) {
        int64_t nbk = k / CPU_QK_K;
        size_t tile_bytes = (size_t)nbk * 8 * cpu_tile_block_bytes(wt);
        for (int64_t t = 0; t < ntiles; t++)
            for (int64_t c = 0; c < ncols; c += 2 * MAX_PAIRS)
                tile_pairs_kquant(wt, pk + (size_t)t * tile_bytes, nbk, act + (size_t)c * act_stride, act_stride,
                                  ncols - c < 2 * MAX_PAIRS ? ncols - c : 2 * MAX_PAIRS, y + c * ldy + 16 * t, ldy,
                                  nr - 16 * t);
        return;
    }
    int64_t nb = k / CPU_QK;
    size_t tile_bytes = (size_t)nb * cpu_tile_block_bytes(wt);
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *base = pk + (size_t)(t & ~(int64_t)1) * tile_bytes;
        cpu_tile_sub sub = cpu_tile_sub_of(wt, t, ntiles);
        for (int64_t c = 0; c < ncols; c += 2 * MAX_PAIRS)
            tile_pairs_q32(wt, base, sub, nb, k, act + (size_t)c * act_stride, act_stride,
                           ncols - c < 2 * MAX_PAIRS ? ncols - c : 2 * MAX_PAIRS, y + c * ldy + 16 * t, ldy,
                           nr - 16 * t);
    }
}

cpu_mm_packed_fn cpu_i8mm_mm_quant_packed(void) { return cpu_isa_neon() ? mm_quant_packed : NULL; }

#else

cpu_mm_packed_fn cpu_i8mm_mm_quant_packed(void) { return NULL; }

#endif
