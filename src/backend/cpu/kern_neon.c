/* kern_neon.c — aarch64 NEON micro-kernels of the fast CPU kernels (cpu.h), for CPUs with the
 * dot-product extension (ARMv8.2 sdot). The whole file is guarded: x86 builds compile it to a stub
 * that returns NULL, and aarch64 builds without __ARM_FEATURE_DOTPROD do the same (the portable C
 * tier runs there). Built with the target's default flags plus, where the toolchain defaults to
 * plain ARMv8.0, -march=armv8.2-a+dotprod (see CMakeLists.txt).
 *
 * Provided here: activation quantisation (bytes identical to kern_generic.c), the 32-block
 * quantised matmuls in the file layout (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: exact block sums with sdot
 * on signed weights, then cpu.h's canonical FMA with 4 rows in the 4 lanes), Q4_K and Q5_K in the
 * file layout (exact sub-block sums with sdot), the matmuls on the repacked tiles of Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K (kern_tiles.c; sdot by lane, 16 rows as four registers of 4, no horizontal sums;
 * up to 8 columns per pass, each weight block unpacked once for all of them),
 * and the float matmuls (the canonical 16 lanes as four 4-lane accumulators). Every other entry is
 * the portable C. Checked bit for bit against the portable C by tests/unit/test_kern_fast.c on
 * aarch64 hosts and, cross-compiled, under qemu-user on x86 (tests/cross/neon_kernels.c). */
#include "backend/cpu/cpu.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_DOTPROD)

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/kern_common.h"
#include "backend/cpu/kern_attn_q.h"
#include "backend/cpu/kern_neon_tiles.h"
#include "base/half.h"

static float ldf(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static int32_t ldi(const uint8_t *p) { int32_t i; memcpy(&i, p, 4); return i; }
static uint16_t ldh(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return h; }

/* ---- activation quantisation (bytes identical to kern_generic.c) ------------------------------ */

static void quant_act(uint32_t wt, const float *x, int64_t k, uint8_t *dst) {
    if (cpu_wt_is_k(wt)) {
        cpu_quant_act_k_generic(x, k, dst);
        return;
    }
    int64_t nb = k / CPU_QK;
    uint8_t *da = dst + k, *aux = da + 4 * nb;
    for (int64_t b = 0; b < nb; b++) {
        float32x4_t v[8];
        float32x4_t am = vdupq_n_f32(0.0f);
        for (int i = 0; i < 8; i++) {
            v[i] = vld1q_f32(x + 32 * b + 4 * i);
            am = vmaxq_f32(am, vabsq_f32(v[i]));
        }
        float amax = vmaxvq_f32(am);
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32x4_t s = vdupq_n_s32(0);
        int8_t *q = (int8_t *)dst + 32 * b;
        for (int i = 0; i < 8; i++) {
            /* round to nearest even, as nearbyintf; |x * id| <= 127 (clamped like the portable C) */
            int32x4_t qi = vcvtnq_s32_f32(vmulq_n_f32(v[i], id));
            qi = vminq_s32(vmaxq_s32(qi, vdupq_n_s32(-127)), vdupq_n_s32(127));
            s = vaddq_s32(s, qi);
            int16x4_t h = vmovn_s32(qi);
            int8x8_t c = vmovn_s16(vcombine_s16(h, h));
            vst1_lane_s32((int32_t *)(void *)(q + 4 * i), vreinterpret_s32_s8(c), 0);
        }
        int32_t sum = vaddvq_s32(s);
        float dr = f16_to_f32(f32_to_f16(d));
        memcpy(da + 4 * b, &dr, 4);
        if (wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1) {
            float sa = f16_to_f32(f32_to_f16(d * (float)sum));
            memcpy(aux + 4 * b, &sa, 4);
        } else {
            int32_t c = cpu_act_aux_mul(wt) * sum;
            memcpy(aux + 4 * b, &c, 4);
        }
    }
}

/* ---- 32-block matmul: exact block sums with sdot, 4 rows in lanes ----------------------------- */

/* Weights of one block as signed int8 in element order: (lo, hi) 16 + 16. */
static inline void unpack_block(uint32_t wt, const uint8_t *blk, int8x16_t *lo, int8x16_t *hi) {
    if (wt == SLM_DTYPE_Q8_0) {
        *lo = vld1q_s8((const int8_t *)(blk + 2));
        *hi = vld1q_s8((const int8_t *)(blk + 18));
        return;
    }
    size_t qoff = cpu_q32_quant_off(wt);
    uint8x16_t q = vld1q_u8(blk + qoff);
    uint8x16_t ql = vandq_u8(q, vdupq_n_u8(0x0F)), qh = vshrq_n_u8(q, 4);
    if (wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1) { /* bit j of the 4 qh bytes: element j's 5th bit */
        static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
        const uint8_t *h = blk + qoff - 4;
        uint8x16_t sel = vld1q_u8(bit), b16 = vdupq_n_u8(0x10);
        ql = vorrq_u8(ql, vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(h[0]), vdup_n_u8(h[1])), sel), b16));
        qh = vorrq_u8(qh, vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(h[2]), vdup_n_u8(h[3])), sel), b16));
    }
    int8x16_t l = vreinterpretq_s8_u8(ql), h = vreinterpretq_s8_u8(qh);
    if (wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q5_0) { /* q - 8, q - 16 */
        int8x16_t off = vdupq_n_s8(wt == SLM_DTYPE_Q4_0 ? 8 : 16);
        l = vsubq_s8(l, off);
        h = vsubq_s8(h, off);
    }
    *lo = l;
    *hi = h;
}

static void mm_q32(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                   size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    int64_t nb = k / CPU_QK;
    size_t bsz = cpu_q32_block_bytes(wt);
    const bool has_min = wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1;
    for (int64_t r0 = 0; r0 < nr; r0 += 4) {
        int64_t n = nr - r0 < 4 ? nr - r0 : 4;
        const uint8_t *p[4];
        for (int r = 0; r < 4; r++) p[r] = w + (size_t)(r0 + (r < n ? r : n - 1)) * row_bytes;
        for (int64_t c = 0; c < ncols; c++) {
            const uint8_t *ac = act + (size_t)c * act_stride;
            float32x4_t acc = vdupq_n_f32(0.0f);
            for (int64_t b = 0; b < nb; b++) {
                int8x16_t alo = vld1q_s8((const int8_t *)ac + 32 * b), ahi = vld1q_s8((const int8_t *)ac + 32 * b + 16);
                int32_t is[4];
                float dw[4], mw[4];
                for (int r = 0; r < 4; r++) {
                    const uint8_t *blk = p[r] + (size_t)b * bsz;
                    int8x16_t lo, hi;
                    unpack_block(wt, blk, &lo, &hi);
                    is[r] = vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, alo), hi, ahi));
                    dw[r] = f16_to_f32(ldh(blk));
                    mw[r] = has_min ? f16_to_f32(ldh(blk + 2)) : 0.0f;
                }
                float32x4_t sc = vmulq_n_f32(vld1q_f32(dw), ldf(ac + k + 4 * b));
                acc = vfmaq_f32(acc, vcvtq_f32_s32(vld1q_s32(is)), sc);
                if (has_min) acc = vfmaq_f32(acc, vld1q_f32(mw), vdupq_n_f32(ldf(ac + k + 4 * nb + 4 * b)));
            }
            float out[4];
            vst1q_f32(out, acc);
            for (int64_t r = 0; r < n; r++) y[c * ldy + r0 + r] = out[r];
        }
    }
    (void)ldi;
}

/* ---- Q4_K, Q5_K in the file layout: a super-block unpacked once for all columns -------------- */

/* Rows [0, nr) against ncols columns: each super-block unpacked to 256 u8 values (nibbles, plus
 * Q5_K's 5th bits: bit 2c of qh[l] for element 64c + l, bit 2c+1 for 64c + 32 + l), then per
 * 32-element sub-block an exact sdot sum times its scale, and cpu.h's two FMAs per super-block. */
static void mm_q45k(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                    size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    const bool q5 = wt == SLM_DTYPE_Q5_K;
    const size_t bsz = q5 ? 176 : 144;
    const int64_t nbk = k / CPU_QK_K;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), b16 = vdupq_n_u8(0x10);
    uint8_t u[256];
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t c = 0; c < ncols; c++) y[c * ldy + r] = 0.0f;
        for (int64_t b = 0; b < nbk; b++) {
            const uint8_t *x = w + (size_t)r * row_bytes + (size_t)b * bsz, *s = x + 4, *qs = x + (q5 ? 48 : 16);
            int32_t sc[8], mn[8];
            for (int j = 0; j < 8; j++) {
                sc[j] = j < 4 ? s[j] & 63 : (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
                mn[j] = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
            }
            for (int ch = 0; ch < 4; ch++)
                for (int half = 0; half < 2; half++) {
                    uint8x16_t q = vld1q_u8(qs + 32 * ch + 16 * half);
                    uint8x16_t lo = vandq_u8(q, m4), hi = vshrq_n_u8(q, 4);
                    if (q5) {
                        uint8x16_t h = vld1q_u8(x + 16 + 16 * half);
                        lo = vorrq_u8(lo, vandq_u8(vshlq_u8(h, vdupq_n_s8((int8_t)(4 - 2 * ch))), b16));
                        hi = vorrq_u8(hi, vandq_u8(vshlq_u8(h, vdupq_n_s8((int8_t)(3 - 2 * ch))), b16));
                    }
                    vst1q_u8(u + 64 * ch + 16 * half, lo);
                    vst1q_u8(u + 64 * ch + 32 + 16 * half, hi);
                }
            float d = f16_to_f32(ldh(x)), dmin = f16_to_f32(ldh(x + 2));
            for (int64_t c = 0; c < ncols; c++) {
                const uint8_t *ab = act + (size_t)c * act_stride + (size_t)b * CPU_Q8K_BYTES;
                const int8_t *a = (const int8_t *)ab + 4;
                int16_t bs[16];
                memcpy(bs, ab + 260, sizeof bs);
                int32_t isum = 0, msum = 0;
                for (int j = 0; j < 8; j++) {
                    int8x16_t u0 = vreinterpretq_s8_u8(vld1q_u8(u + 32 * j)), u1 = vreinterpretq_s8_u8(vld1q_u8(u + 32 * j + 16));
                    int32x4_t dj = vdotq_s32(vdotq_s32(vdupq_n_s32(0), u0, vld1q_s8(a + 32 * j)), u1, vld1q_s8(a + 32 * j + 16));
                    isum += sc[j] * vaddvq_s32(dj);
                    msum += mn[j] * (bs[2 * j] + bs[2 * j + 1]);
                }
                float da = ldf(ab), *yc = y + c * ldy + r;
                *yc = fmaf((float)isum, d * da, *yc);
                *yc = fmaf(-(float)msum, dmin * da, *yc);
            }
        }
    }
}

static void mm_quant(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                     size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    if (!cpu_wt_is_k(wt))
        mm_q32(wt, w, row_bytes, nr, k, act, act_stride, ncols, y, ldy);
    else if (wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K)
        mm_q45k(wt, w, row_bytes, nr, k, act, act_stride, ncols, y, ldy);
    else
        cpu_mm_quant_generic(wt, w, row_bytes, nr, k, act, act_stride, ncols, y, ldy, scratch);
}

/* ---- matmuls on repacked tiles (kern_tiles.c): 16 rows as four registers of 4 ----------------- */

/* One column against one tile (addressed by sub from its pair's start pk): a tile vector of 64
 * bytes is four registers of 4 rows x 4 bytes, and sdot by lane takes the 4 activations of the
 * same elements, so each register's int32 lanes are 4 rows' exact block sums (nibbles, or Q5's
 * 5-bit values, as non-negative int8 with Q4_0's -8 / Q5_0's -16 in the activations' aux sum;
 * Q8_0 back to int8 from w ^ 0x80).
 * Then cpu.h's canonical FMA per row. Rows [0, nr) of the 16 are written. */
static void tile_col(uint32_t wt, const uint8_t *pk, cpu_tile_sub sub, int64_t nb, int64_t k, const uint8_t *ac,
                     float *y, int64_t nr) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), flip = vdupq_n_u8(0x80);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b = 0; b < nb; b++, pk += sub.stride) {
        const uint8_t *q = pk + sub.quants, *sc = pk + sub.scales, *a = ac + 32 * b;
        int32_t aux = wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q5_0 ? ldi(ac + k + 4 * nb + 4 * b) : 0;
        int32x4_t is[4];
        for (int g = 0; g < 4; g++) is[g] = vdupq_n_s32(aux);
        int8x16_t a0 = vld1q_s8((const int8_t *)a), a1 = vld1q_s8((const int8_t *)a + 16);
        if (wt == SLM_DTYPE_Q8_0) {
            for (int g = 0; g < 4; g++) {
                const uint8_t *qg = q + 16 * g;
#define Q8_STEP(j, av, lane) \
    is[g] = vdotq_laneq_s32(is[g], vreinterpretq_s8_u8(veorq_u8(vld1q_u8(qg + 64 * (j)), flip)), av, lane)
                Q8_STEP(0, a0, 0); Q8_STEP(1, a0, 1); Q8_STEP(2, a0, 2); Q8_STEP(3, a0, 3);
                Q8_STEP(4, a1, 0); Q8_STEP(5, a1, 1); Q8_STEP(6, a1, 2); Q8_STEP(7, a1, 3);
#undef Q8_STEP
            }
        } else {
            const bool q5 = wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1;
            for (int g = 0; g < 4; g++) {
                const uint8_t *qg = q + 16 * g;
                uint32x4_t qh = q5 ? vld1q_u32((const uint32_t *)(const void *)(qg + 256)) : vdupq_n_u32(0);
#define Q4_STEP(j)                                                                                   \
    do {                                                                                             \
        uint8x16_t v = vld1q_u8(qg + 64 * (j)), lo = vandq_u8(v, m4), hi = vshrq_n_u8(v, 4);          \
        if (q5) {                                                                                    \
            lo = vorrq_u8(lo, neon_q5_bits4(qh, 4 * (j)));                                                \
            hi = vorrq_u8(hi, neon_q5_bits4(qh, 16 + 4 * (j)));                                           \
        }                                                                                            \
        is[g] = vdotq_laneq_s32(is[g], vreinterpretq_s8_u8(lo), a0, j);                              \
        is[g] = vdotq_laneq_s32(is[g], vreinterpretq_s8_u8(hi), a1, j);                              \
    } while (0)
                Q4_STEP(0); Q4_STEP(1); Q4_STEP(2); Q4_STEP(3);
#undef Q4_STEP
            }
        }
        float da = ldf(ac + k + 4 * b);
        for (int g = 0; g < 4; g++) {
            float32x4_t dw = neon_f16x4(sc + 8 * g);
            acc[g] = vfmaq_f32(acc[g], vcvtq_f32_s32(is[g]), vmulq_n_f32(dw, da));
            if (wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1) {
                float32x4_t mw = neon_f16x4(sc + 32 + 8 * g);
                acc[g] = vfmaq_f32(acc[g], mw, vdupq_n_f32(ldf(ac + k + 4 * nb + 4 * b)));
            }
        }
    }
    float out[16];
    for (int g = 0; g < 4; g++) vst1q_f32(out + 4 * g, acc[g]);
    memcpy(y, out, sizeof(float) * (size_t)(nr < 16 ? nr : 16));
}

/* Blocks per pass of tile_cols: each group of 4 rows walks a chunk once, so the chunk (32 blocks of
 * a 16-row tile: 9-17 KiB) stays in L1 over the four passes. */
#define TILE_CHUNK_BLOCKS 32

/* NC (1..8) columns against one tile of a 32-block type, the few-column shapes (batched decode,
 * verify): per chunk of blocks and group of 4 rows, each block's weights are loaded and unpacked
 * once for all NC columns. The arithmetic of each row and column is tile_col's (the integer sums
 * are exact, the FMAs per block in order). Rows [0, nr) of the 16 are written, column c at y + c * ldy. */
static inline __attribute__((always_inline)) void tile_cols(const uint32_t wt, const int NC, const uint8_t *pk,
                                                            cpu_tile_sub sub, int64_t nb, int64_t k,
                                                            const uint8_t *act, size_t act_stride, float *y,
                                                            int64_t ldy, int64_t nr) {
    const bool mins = wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1;
    const bool aux = wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q5_0;
    float out[8][16];
    for (int64_t b0 = 0; b0 < nb; b0 += TILE_CHUNK_BLOCKS) {
        int64_t b1 = b0 + TILE_CHUNK_BLOCKS < nb ? b0 + TILE_CHUNK_BLOCKS : nb;
        for (int g = 0; g < 4; g++) { /* rows 4g..4g+3 */
            float32x4_t acc[8];
            for (int c = 0; c < NC; c++) acc[c] = b0 ? vld1q_f32(out[c] + 4 * g) : vdupq_n_f32(0.0f);
            const uint8_t *blk = pk + (size_t)b0 * sub.stride;
            for (int64_t b = b0; b < b1; b++, blk += sub.stride) {
                const uint8_t *q = blk + sub.quants + 16 * g, *sc = blk + sub.scales;
                /* w[j] (j < 4) pairs with activations 4j..4j+3 (lane j of the first 16), w[4 + j] with
                 * 16 + 4j.. (lane j of the second 16): Q8_0's vectors j and 4 + j, the nibble types'
                 * low and high nibbles of vector j */
                int8x16_t w[8];
                neon_tile_q32_rows4(wt, q, w);
                float32x4_t dw = neon_f16x4(sc + 8 * g), mw = mins ? neon_f16x4(sc + 32 + 8 * g) : vdupq_n_f32(0.0f);
                for (int c = 0; c < NC; c++) {
                    const uint8_t *ac = act + (size_t)c * act_stride;
                    int8x16_t a0 = vld1q_s8((const int8_t *)ac + 32 * b), a1 = vld1q_s8((const int8_t *)ac + 32 * b + 16);
                    int32x4_t is = vdupq_n_s32(aux ? ldi(ac + k + 4 * nb + 4 * b) : 0);
                    is = vdotq_laneq_s32(is, w[0], a0, 0);
                    is = vdotq_laneq_s32(is, w[1], a0, 1);
                    is = vdotq_laneq_s32(is, w[2], a0, 2);
                    is = vdotq_laneq_s32(is, w[3], a0, 3);
                    is = vdotq_laneq_s32(is, w[4], a1, 0);
                    is = vdotq_laneq_s32(is, w[5], a1, 1);
                    is = vdotq_laneq_s32(is, w[6], a1, 2);
                    is = vdotq_laneq_s32(is, w[7], a1, 3);
                    acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(is), vmulq_n_f32(dw, ldf(ac + k + 4 * b)));
                    if (mins) acc[c] = vfmaq_f32(acc[c], mw, vdupq_n_f32(ldf(ac + k + 4 * nb + 4 * b)));
                }
            }
            for (int c = 0; c < NC; c++) vst1q_f32(out[c] + 4 * g, acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) memcpy(y + c * ldy, out[c], sizeof(float) * (size_t)(nr < 16 ? nr : 16));
}

/* tile_cols with the weight type and column count (1..8) as constants */
#define TILE_COLS_TYPE(NC, wt, ...)                                                                    \
    do {                                                                                               \
        if ((wt) == SLM_DTYPE_Q4_0) tile_cols(SLM_DTYPE_Q4_0, NC, __VA_ARGS__);                         \
        else if ((wt) == SLM_DTYPE_Q4_1) tile_cols(SLM_DTYPE_Q4_1, NC, __VA_ARGS__);                    \
        else if ((wt) == SLM_DTYPE_Q5_0) tile_cols(SLM_DTYPE_Q5_0, NC, __VA_ARGS__);                    \
        else if ((wt) == SLM_DTYPE_Q5_1) tile_cols(SLM_DTYPE_Q5_1, NC, __VA_ARGS__);                    \
        else tile_cols(SLM_DTYPE_Q8_0, NC, __VA_ARGS__);                                                \
    } while (0)

static void tile_cols_call(uint32_t wt, int nc, const uint8_t *pk, cpu_tile_sub sub, int64_t nb, int64_t k,
                           const uint8_t *act, size_t act_stride, float *y, int64_t ldy, int64_t nr) {
    switch (nc) {
    case 1: TILE_COLS_TYPE(1, wt, pk, sub, nb, k, act, act_stride, y, ldy, nr); break;
    case 2: TILE_COLS_TYPE(2, wt, pk, sub, nb, k, act, act_stride, y, ldy, nr); break;
    case 3: TILE_COLS_TYPE(3, wt, pk, sub, nb, k, act, act_stride, y, ldy, nr); break;
    case 4: TILE_COLS_TYPE(4, wt, pk, sub, nb, k, act, act_stride, y, ldy, nr); break;
    case 5: TILE_COLS_TYPE(5, wt, pk, sub, nb, k, act, act_stride, y, ldy, nr); break;
    case 6: TILE_COLS_TYPE(6, wt, pk, sub, nb, k, act, act_stride, y, ldy, nr); break;
    case 7: TILE_COLS_TYPE(7, wt, pk, sub, nb, k, act, act_stride, y, ldy, nr); break;
    default: TILE_COLS_TYPE(8, wt, pk, sub, nb, k, act, act_stride, y, ldy, nr); break;
    }
}


/* NC (1..8) columns against one K-quant tile (nbk super-blocks of the layout in kern_common.h), the
 * arithmetic of kern_avx512.c's packed_tile_kquant: exact integer sums per sub-block, then cpu.h's
 * canonical FMAs per row. Per super-block and group of 4 rows the weights are loaded and unpacked
 * once for all NC columns. Rows [0, nr) of the 16 are written, column c at y + c * ldy. */
static inline __attribute__((always_inline)) void tile_cols_kquant(const uint32_t wt, const int NC, const uint8_t *pk,
                                                                   int64_t nbk, const uint8_t *act, size_t act_stride,
                                                                   float *y, int64_t ldy, int64_t nr) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    const bool q4 = wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K, q5 = wt == SLM_DTYPE_Q5_K;
    const size_t sbb = q5 ? KT_Q5K : q4 ? KT_Q4K : KT_Q6K;
    const uint8x16_t b16 = vdupq_n_u8(0x10);
    float32x4_t acc[8][4];
    for (int c = 0; c < NC; c++)
        for (int g = 0; g < 4; g++) acc[c][g] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nbk; b++, pk += sbb) {
        const int8_t *a[8];
        int16_t bs[8][16];
        float da[8];
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = act + (size_t)c * act_stride + (size_t)b * CPU_Q8K_BYTES;
            a[c] = (const int8_t *)ab + 4;
            memcpy(bs[c], ab + 260, sizeof bs[c]);
            da[c] = ldf(ab);
        }
        for (int g = 0; g < 4; g++) { /* rows 4g..4g+3 */
            int32x4_t is[8], corr[8];
            for (int c = 0; c < NC; c++) is[c] = corr[c] = vdupq_n_s32(0);
            if (q4) {
                for (int ch = 0; ch < 4; ch++) { /* sub-blocks 2ch (low nibbles) and 2ch + 1 (high) */
                    const uint8_t *v = pk + 64 * 8 * ch + 16 * g;
                    int8x16_t wl[8], wh[8];
                    for (int j = 0; j < 8; j++) {
                        uint8x16_t w = vld1q_u8(v + 64 * j), l = vandq_u8(w, m4), h = vshrq_n_u8(w, 4);
                        if (q5) { /* bits 2ch, 2ch + 1 of the qh bytes to bit 4 (kern_common.h) */
                            uint8x16_t qh = vld1q_u8(pk + KT_Q4K + 64 * j + 16 * g);
                            l = vorrq_u8(l, vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - 2 * ch))), b16));
                            h = vorrq_u8(h, vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(3 - 2 * ch))), b16));
                        }
                        wl[j] = vreinterpretq_s8_u8(l);
                        wh[j] = vreinterpretq_s8_u8(h);
                    }
                    int32x4_t sl = neon_widen4(pk + 2048 + 32 * ch + 4 * g, true);
                    int32x4_t sh = neon_widen4(pk + 2048 + 32 * ch + 16 + 4 * g, true);
                    for (int c = 0; c < NC; c++) {
                        const int8_t *ac = a[c] + 64 * ch;
                        int8x16_t l0 = vld1q_s8(ac), l1 = vld1q_s8(ac + 16), h0 = vld1q_s8(ac + 32), h1 = vld1q_s8(ac + 48);
                        int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
                        lo = vdotq_laneq_s32(lo, wl[0], l0, 0); hi = vdotq_laneq_s32(hi, wh[0], h0, 0);
                        lo = vdotq_laneq_s32(lo, wl[1], l0, 1); hi = vdotq_laneq_s32(hi, wh[1], h0, 1);
                        lo = vdotq_laneq_s32(lo, wl[2], l0, 2); hi = vdotq_laneq_s32(hi, wh[2], h0, 2);
                        lo = vdotq_laneq_s32(lo, wl[3], l0, 3); hi = vdotq_laneq_s32(hi, wh[3], h0, 3);
                        lo = vdotq_laneq_s32(lo, wl[4], l1, 0); hi = vdotq_laneq_s32(hi, wh[4], h1, 0);
                        lo = vdotq_laneq_s32(lo, wl[5], l1, 1); hi = vdotq_laneq_s32(hi, wh[5], h1, 1);
                        lo = vdotq_laneq_s32(lo, wl[6], l1, 2); hi = vdotq_laneq_s32(hi, wh[6], h1, 2);
                        lo = vdotq_laneq_s32(lo, wl[7], l1, 3); hi = vdotq_laneq_s32(hi, wh[7], h1, 3);
                        is[c] = vaddq_s32(is[c], vaddq_s32(vmulq_s32(lo, sl), vmulq_s32(hi, sh)));
                    }
                }
                for (int sb = 0; sb < 8; sb++) {
                    int32x4_t mn = neon_widen4(pk + 2176 + 16 * sb + 4 * g, true);
                    for (int c = 0; c < NC; c++)
                        corr[c] = vaddq_s32(corr[c], vmulq_s32(mn, vdupq_n_s32(bs[c][2 * sb] + bs[c][2 * sb + 1])));
                }
                float32x4_t d = neon_f16x4(pk + 2304 + 8 * g), dmin = neon_f16x4(pk + 2336 + 8 * g);
                for (int c = 0; c < NC; c++) {
                    acc[c][g] = vfmaq_f32(acc[c][g], vcvtq_f32_s32(is[c]), vmulq_n_f32(d, da[c]));
                    acc[c][g] = vfmsq_f32(acc[c][g], vcvtq_f32_s32(corr[c]), vmulq_n_f32(dmin, da[c]));
                }
            } else {
                for (int j = 0; j < 16; j++) {
                    const uint8_t *v = pk + 192 * j + 16 * g;
                    uint8x16_t L0 = vld1q_u8(v), L1 = vld1q_u8(v + 64), H = vld1q_u8(v + 128);
                    int8x16_t q0 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(L0, m4), vandq_u8(vshlq_n_u8(H, 4), m30)));
                    int8x16_t q1 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(L0, 4), vandq_u8(vshlq_n_u8(H, 2), m30)));
                    int8x16_t q2 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(L1, m4), vandq_u8(H, m30)));
                    int8x16_t q3 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(L1, 4), vandq_u8(vshrq_n_u8(H, 2), m30)));
                    int32x4_t sc = neon_widen4(pk + 3072 + 16 * j + 4 * g, false);
                    for (int c = 0; c < NC; c++) {
                        int8x16_t aj = vld1q_s8(a[c] + 16 * j);
                        int32x4_t sum = vdotq_laneq_s32(vdupq_n_s32(0), q0, aj, 0);
                        sum = vdotq_laneq_s32(sum, q1, aj, 1);
                        sum = vdotq_laneq_s32(sum, q2, aj, 2);
                        sum = vdotq_laneq_s32(sum, q3, aj, 3);
                        is[c] = vaddq_s32(is[c], vmulq_s32(sum, sc));
                        corr[c] = vaddq_s32(corr[c], vmulq_s32(sc, vdupq_n_s32(bs[c][j])));
                    }
                }
                float32x4_t d = neon_f16x4(pk + 3328 + 8 * g);
                for (int c = 0; c < NC; c++) {
                    int32x4_t isum = vsubq_s32(is[c], vshlq_n_s32(corr[c], 5));
                    acc[c][g] = vfmaq_f32(acc[c][g], vcvtq_f32_s32(isum), vmulq_n_f32(d, da[c]));
                }
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        float out[16];
        for (int g = 0; g < 4; g++) vst1q_f32(out + 4 * g, acc[c][g]);
        memcpy(y + c * ldy, out, sizeof(float) * (size_t)(nr < 16 ? nr : 16));
    }
}

/* tile_cols_kquant with the weight type and column count (1..8) as constants */
#define TILE_COLS_KTYPE(NC, wt, ...)                                                                   \
    do {                                                                                               \
        if ((wt) == SLM_DTYPE_Q4_K) tile_cols_kquant(SLM_DTYPE_Q4_K, NC, __VA_ARGS__);                  \
        else if ((wt) == SLM_DTYPE_Q5_K) tile_cols_kquant(SLM_DTYPE_Q5_K, NC, __VA_ARGS__);             \
        else tile_cols_kquant(SLM_DTYPE_Q6_K, NC, __VA_ARGS__);                                        \
    } while (0)

static void tile_cols_kquant_call(uint32_t wt, int nc, const uint8_t *pk, int64_t nbk, const uint8_t *act,
                                  size_t act_stride, float *y, int64_t ldy, int64_t nr) {
    switch (nc) {
    case 1: TILE_COLS_KTYPE(1, wt, pk, nbk, act, act_stride, y, ldy, nr); break;
    case 2: TILE_COLS_KTYPE(2, wt, pk, nbk, act, act_stride, y, ldy, nr); break;
    case 3: TILE_COLS_KTYPE(3, wt, pk, nbk, act, act_stride, y, ldy, nr); break;
    case 4: TILE_COLS_KTYPE(4, wt, pk, nbk, act, act_stride, y, ldy, nr); break;
    case 5: TILE_COLS_KTYPE(5, wt, pk, nbk, act, act_stride, y, ldy, nr); break;
    case 6: TILE_COLS_KTYPE(6, wt, pk, nbk, act, act_stride, y, ldy, nr); break;
    case 7: TILE_COLS_KTYPE(7, wt, pk, nbk, act, act_stride, y, ldy, nr); break;
    default: TILE_COLS_KTYPE(8, wt, pk, nbk, act, act_stride, y, ldy, nr); break;
    }
}

static void mm_quant_packed(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                            size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    if (cpu_wt_is_k(wt)) {
        int64_t nbk = k / CPU_QK_K, ntiles = (nr + 15) / 16;
        size_t tile_bytes = (size_t)nbk * 8 * cpu_tile_block_bytes(wt);
        for (int64_t t = 0; t < ntiles; t++)
            for (int64_t c = 0; c < ncols; c += 8) /* up to 8 columns per pass */
                tile_cols_kquant_call(wt, (int)(ncols - c < 8 ? ncols - c : 8), pk + (size_t)t * tile_bytes, nbk,
                                      act + (size_t)c * act_stride, act_stride, y + c * ldy + 16 * t, ldy, nr - 16 * t);
        return;
    }
    int64_t nb = k / CPU_QK, ntiles = (nr + 15) / 16;
    size_t tile_bytes = (size_t)nb * cpu_tile_block_bytes(wt);
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *base = pk + (size_t)(t & ~(int64_t)1) * tile_bytes;
        cpu_tile_sub sub = cpu_tile_sub_of(wt, t, ntiles);
        if (ncols == 1) { /* decode */
            tile_col(wt, base, sub, nb, k, act, y + 16 * t, nr - 16 * t);
            continue;
        }
        for (int64_t c = 0; c < ncols; c += 8) /* up to 8 columns per pass */
            tile_cols_call(wt, (int)(ncols - c < 8 ? ncols - c : 8), base, sub, nb, k, act + (size_t)c * act_stride,
                           act_stride, y + c * ldy + 16 * t, ldy, nr - 16 * t);
    }
}

/* ---- float weights: canonical 16 lanes as four 4-lane accumulators ---------------------------- */

static inline float32x4_t load_w4(uint32_t wt, const uint8_t *w, int64_t i) {
    switch (wt) {
    case SLM_DTYPE_F16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)(w + 2 * i))));
    case SLM_DTYPE_BF16:
        return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vld1_u16((const uint16_t *)(const void *)(w + 2 * i))), 16));
    default: return vld1q_f32((const float *)(const void *)w + i);
    }
}

static float dot_f(uint32_t wt, const uint8_t *w, const float *x, int64_t k) {
    float32x4_t a[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int64_t i = 0;
    for (; i + 16 <= k; i += 16)
        for (int l = 0; l < 4; l++) a[l] = vfmaq_f32(a[l], load_w4(wt, w, i + 4 * l), vld1q_f32(x + i + 4 * l));
    float acc[16];
    for (int l = 0; l < 4; l++) vst1q_f32(acc + 4 * l, a[l]);
    for (int l = 0; i + l < k; l++) acc[l] = fmaf(cpu_load_wf(wt, w, i + l), x[i + l], acc[l]);
    if (i < k)
        for (int l = (int)(k - i); l < 16; l++) acc[l] = fmaf(0.0f, 0.0f, acc[l]); /* the zero-padded tail */
    return cpu_reduce16(acc);
}

static void mm_float(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const float *x,
                     int64_t ncols, float *y, int64_t ldy, void *scratch) {
    (void)scratch;
    for (int64_t c = 0; c < ncols; c++)
        for (int64_t r = 0; r < nr; r++) y[c * ldy + r] = dot_f(wt, w + (size_t)r * row_bytes, x + c * k, k);
}

static const cpu_isa k_neon = {
    .level = CPU_ISA_NEON,
    .quant_act = quant_act,
    .mm_quant = mm_quant,
    .tile_block_bytes = cpu_tile_block_bytes,
    .tile_group = cpu_tile_group,
    .repack_tiles = cpu_repack_tiles,
    .mm_quant_packed = mm_quant_packed,
    .mm_float = mm_float,
    .attn_chunk = cpu_attn_chunk_generic,
    .attn_chunk_q = attn_chunk_q,
    .attn_fold_rows = cpu_attn_fold_rows,
    .cvt_f16 = cpu_cvt_f16_generic,
    .deltanet_head = cpu_deltanet_head_generic,
    .vec_add = cpu_vec_add_generic,
    .vec_mul = cpu_vec_mul_generic,
    .vec_swiglu = cpu_vec_swiglu_generic,
    .vec_geglu = cpu_vec_geglu_generic,
    .vec_unary = cpu_vec_unary_generic,
    .row_norm = cpu_row_norm_generic,
    .conv_row = cpu_conv_row_generic,
};

const cpu_isa *cpu_isa_neon(void) { return &k_neon; }

#else
const cpu_isa *cpu_isa_neon(void) { return NULL; }
#endif
