/* kern_neon.c — aarch64 NEON micro-kernels of the fast CPU kernels (cpu.h), for CPUs with the
 * dot-product extension (ARMv8.2 sdot). The whole file is guarded: x86 builds compile it to a stub
 * that returns NULL, and aarch64 builds without __ARM_FEATURE_DOTPROD do the same (the portable C
 * tier runs there). Built with the target's default flags plus, where the toolchain defaults to
 * plain ARMv8.0, -march=armv8.2-a+dotprod (see CMakeLists.txt).
 *
 * Provided here: activation quantisation (bytes identical to kern_generic.c), the 32-block
 * quantised matmuls (exact block sums with sdot on signed weights, then cpu.h's canonical FMA with
 * 4 rows in the 4 lanes) and the float matmuls (the canonical 16 lanes as four 4-lane
 * accumulators). Every other entry is the portable C. Checked bit for bit against the portable C
 * by tests/unit/test_kern_fast.c on aarch64 hosts and, cross-compiled, under qemu-user on x86
 * (tests/cross/neon_kernels.c). */
#include "backend/cpu/cpu.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_DOTPROD)

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/kern_common.h"
#include "base/half.h"

static float ldf(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static int32_t ldi(const uint8_t *p) { int32_t i; memcpy(&i, p, 4); return i; }
static uint16_t ldh(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return h; }

/* ---- activation quantisation (bytes identical to kern_generic.c) ------------------------------ */

static void quant_act(uint32_t wt, const float *x, int64_t k, uint8_t *dst) {
    if (wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q6_K) {
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
        if (wt == SLM_DTYPE_Q4_1) {
            float sa = f16_to_f32(f32_to_f16(d * (float)sum));
            memcpy(aux + 4 * b, &sa, 4);
        } else {
            int32_t c = (wt == SLM_DTYPE_Q8_0 ? -128 : -8) * sum;
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
    uint8x16_t q = vld1q_u8(blk + (wt == SLM_DTYPE_Q4_1 ? 4 : 2));
    int8x16_t l = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), h = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
    if (wt == SLM_DTYPE_Q4_0) {
        l = vsubq_s8(l, vdupq_n_s8(8));
        h = vsubq_s8(h, vdupq_n_s8(8));
    }
    *lo = l;
    *hi = h;
}

static void mm_q32(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                   size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    int64_t nb = k / CPU_QK;
    size_t bsz = wt == SLM_DTYPE_Q4_0 ? 18 : wt == SLM_DTYPE_Q4_1 ? 20 : 34;
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
                    mw[r] = wt == SLM_DTYPE_Q4_1 ? f16_to_f32(ldh(blk + 2)) : 0.0f;
                }
                float32x4_t sc = vmulq_n_f32(vld1q_f32(dw), ldf(ac + k + 4 * b));
                acc = vfmaq_f32(acc, vcvtq_f32_s32(vld1q_s32(is)), sc);
                if (wt == SLM_DTYPE_Q4_1) acc = vfmaq_f32(acc, vld1q_f32(mw), vdupq_n_f32(ldf(ac + k + 4 * nb + 4 * b)));
            }
            float out[4];
            vst1q_f32(out, acc);
            for (int64_t r = 0; r < n; r++) y[c * ldy + r0 + r] = out[r];
        }
    }
    (void)ldi;
}

static void mm_quant(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                     size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    if (wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q8_0)
        mm_q32(wt, w, row_bytes, nr, k, act, act_stride, ncols, y, ldy);
    else
        cpu_mm_quant_generic(wt, w, row_bytes, nr, k, act, act_stride, ncols, y, ldy, scratch);
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
    .mm_float = mm_float,
    .attn_block = cpu_attn_block_generic,
    .cvt_f16 = cpu_cvt_f16_generic,
    .deltanet_head = cpu_deltanet_head_generic,
    .vec_add = cpu_vec_add_generic,
    .vec_mul = cpu_vec_mul_generic,
    .vec_swiglu = cpu_vec_swiglu_generic,
    .vec_unary = cpu_vec_unary_generic,
    .row_norm = cpu_row_norm_generic,
    .conv_row = cpu_conv_row_generic,
};

const cpu_isa *cpu_isa_neon(void) { return &k_neon; }

#else
const cpu_isa *cpu_isa_neon(void) { return NULL; }
#endif
