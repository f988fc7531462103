/* dtype.c — block geometry of every ggml type statelm knows (docs/spec/gguf.md §2–§3) and the scalar
 * dequantisers (docs/spec/gguf.md §4; ggml-quants.c dequantize_row_*).
 * These loops are the oracle for SIMD/CUDA kernels, so they are written plainly and keep ggml's
 * operation order: the scale product (d·sc, dmin·mn) first, then ·q, then the subtraction or
 * addition, each in its own statement so no compiler contracts them into an FMA. With that order
 * the results are bit-identical to ggml and to gguf-py's numpy dequantisers.
 * Reads go through byte loads (ld_u16/ld_u32/memcpy): tensor data may be unaligned.
 * Does not quantise and does not validate shapes beyond n being a whole number of blocks. */
#include "base/dtype.h"

#include <string.h>

#include "base/alloc.h"
#include "base/half.h"
#include "base/reader.h"

#define QK 32   /* elements per block of the 32-block types */
#define QK_K 256 /* elements per super-block of the K-quants */

/* Indexed by ggml type id; entries with name == NULL are ids statelm does not know. */
static const dtype_traits k_traits[SLM_DTYPE_COUNT] = {
    [SLM_DTYPE_F32] = {"f32", 1, 4, false, true},
    [SLM_DTYPE_F16] = {"f16", 1, 2, false, true},
    [SLM_DTYPE_Q4_0] = {"q4_0", QK, 18, true, true},
    [SLM_DTYPE_Q4_1] = {"q4_1", QK, 20, true, true},
    [SLM_DTYPE_Q5_0] = {"q5_0", QK, 22, true, true},
    [SLM_DTYPE_Q5_1] = {"q5_1", QK, 24, true, true},
    [SLM_DTYPE_Q8_0] = {"q8_0", QK, 34, true, true},
    [SLM_DTYPE_Q8_1] = {"q8_1", QK, 36, true, true},
    [SLM_DTYPE_Q2_K] = {"q2_k", QK_K, 84, true, true},
    [SLM_DTYPE_Q3_K] = {"q3_k", QK_K, 110, true, true},
    [SLM_DTYPE_Q4_K] = {"q4_k", QK_K, 144, true, true},
    [SLM_DTYPE_Q5_K] = {"q5_k", QK_K, 176, true, true},
    [SLM_DTYPE_Q6_K] = {"q6_k", QK_K, 210, true, true},
    [SLM_DTYPE_Q8_K] = {"q8_k", QK_K, 292, true, true},
    [SLM_DTYPE_I8] = {"i8", 1, 1, false, false},
    [SLM_DTYPE_I16] = {"i16", 1, 2, false, false},
    [SLM_DTYPE_I32] = {"i32", 1, 4, false, false},
    [SLM_DTYPE_I64] = {"i64", 1, 8, false, false},
    [SLM_DTYPE_F64] = {"f64", 1, 8, false, false},
    [SLM_DTYPE_BF16] = {"bf16", 1, 2, false, true},
};

const dtype_traits *dtype_traits_of(uint32_t type) {
    if (type >= SLM_DTYPE_COUNT || k_traits[type].name == NULL) return NULL;
    return &k_traits[type];
}

SLM_API const char *slm_dtype_name(slm_dtype dtype) {
    const dtype_traits *t = dtype_traits_of((uint32_t)dtype);
    return t ? t->name : "unknown";
}

bool dtype_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes) {
    const dtype_traits *t = dtype_traits_of(type);
    if (!t || n % t->block_elems != 0) return false;
    return u64_mul_ok(n / t->block_elems, t->block_bytes, bytes);
}

static float ld_f16(const uint8_t *p) { return f16_to_f32(ld_u16(p)); }

/* ---- plain types ---------------------------------------------------------------------------- */

static void deq_f32(const uint8_t *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

static void deq_f16(const uint8_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ld_f16(x + 2 * i);
}

static void deq_bf16(const uint8_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_f32(ld_u16(x + 2 * i));
}

/* ---- 32-element blocks ---------------------------------------------------------------------- */

/* Q4_0: d f16 | qs[16]; low nibbles are elements 0..15, high nibbles 16..31. */
static void deq_q4_0(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 18, y += QK) {
        const float d = ld_f16(x);
        const uint8_t *qs = x + 2;
        for (int j = 0; j < QK / 2; j++) {
            const int x0 = (qs[j] & 0x0F) - 8;
            const int x1 = (qs[j] >> 4) - 8;
            y[j] = (float)x0 * d;
            y[j + QK / 2] = (float)x1 * d;
        }
    }
}

/* Q4_1: d f16 | m f16 | qs[16]; y = q·d + m. */
static void deq_q4_1(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 20, y += QK) {
        const float d = ld_f16(x);
        const float m = ld_f16(x + 2);
        const uint8_t *qs = x + 4;
        for (int j = 0; j < QK / 2; j++) {
            const float p0 = (float)(qs[j] & 0x0F) * d;
            const float p1 = (float)(qs[j] >> 4) * d;
            y[j] = p0 + m;
            y[j + QK / 2] = p1 + m;
        }
    }
}

/* Q5_0: d f16 | qh u32 | qs[16]; bit j of qh is the 5th bit of element j, bit j+16 of j+16. */
static void deq_q5_0(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 22, y += QK) {
        const float d = ld_f16(x);
        const uint32_t qh = ld_u32(x + 2);
        const uint8_t *qs = x + 6;
        for (int j = 0; j < QK / 2; j++) {
            const int hb0 = (int)((qh >> j) & 1u) << 4;
            const int hb1 = (int)((qh >> (j + 16)) & 1u) << 4;
            const int x0 = ((qs[j] & 0x0F) | hb0) - 16;
            const int x1 = ((qs[j] >> 4) | hb1) - 16;
            y[j] = (float)x0 * d;
            y[j + QK / 2] = (float)x1 * d;
        }
    }
}

/* Q5_1: d f16 | m f16 | qh u32 | qs[16]; y = q·d + m with unsigned 5-bit q. */
static void deq_q5_1(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 24, y += QK) {
        const float d = ld_f16(x);
        const float m = ld_f16(x + 2);
        const uint32_t qh = ld_u32(x + 4);
        const uint8_t *qs = x + 8;
        for (int j = 0; j < QK / 2; j++) {
            const int hb0 = (int)((qh >> j) & 1u) << 4;
            const int hb1 = (int)((qh >> (j + 16)) & 1u) << 4;
            const int x0 = (qs[j] & 0x0F) | hb0;
            const int x1 = (qs[j] >> 4) | hb1;
            const float p0 = (float)x0 * d;
            const float p1 = (float)x1 * d;
            y[j] = p0 + m;
            y[j + QK / 2] = p1 + m;
        }
    }
}

/* Q8_0: d f16 | qs int8[32]. */
static void deq_q8_0(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 34, y += QK) {
        const float d = ld_f16(x);
        for (int j = 0; j < QK; j++) y[j] = (float)(int8_t)x[2 + j] * d;
    }
}

/* Q8_1: d f16 | s f16 (d·Σq, used only by dot products) | qs int8[32]. */
static void deq_q8_1(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 36, y += QK) {
        const float d = ld_f16(x);
        for (int j = 0; j < QK; j++) y[j] = (float)(int8_t)x[4 + j] * d;
    }
}

/* ---- K-quants (256-element super-blocks) ---------------------------------------------------- */

/* Q2_K: scales[16] (low nibble scale, high nibble min) | qs[64] | d f16 | dmin f16.
 * For half h (128 elements, qs bytes [32h, 32h+32)) and shift step j (bits 2j..2j+1):
 * elements 128h+32j+[0,16) use scales[8h+2j] and qs[l], elements 128h+32j+16+[0,16) use
 * scales[8h+2j+1] and qs[l+16]. */
static void deq_q2_k(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 84) {
        const uint8_t *scales = x;
        const float d = ld_f16(x + 80);
        const float dmin = ld_f16(x + 82);
        const uint8_t *q = x + 16;
        int is = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int j = 0; j < 4; j++) {
                const int shift = 2 * j;
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = scales[is++];
                    const float dl = d * (float)(sc & 0x0F);
                    const float ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++) {
                        const float p = dl * (float)((q[l + 16 * half] >> shift) & 3);
                        *y++ = p - ml;
                    }
                }
            }
        }
    }
}

/* Q3_K: hmask[32] | qs[64] | scales[12] | d f16. Sixteen 6-bit signed scales (offset 32): the low
 * 4 bits of scale s are scales[s] & 0xF (s < 8) or scales[s-8] >> 4, the high 2 bits are
 * (scales[8 + s%4] >> 2·(s/4)) & 3. The element's 3rd bit comes from hmask; a clear bit
 * subtracts 4. Element order as in Q2_K; hmask bit (4h + j) selects the bit for step j of half h. */
static void deq_q3_k(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 110) {
        const uint8_t *hm = x;
        const uint8_t *q = x + 32;
        const uint8_t *sb = x + 96;
        const float d_all = ld_f16(x + 108);
        int8_t sc[16];
        for (int s = 0; s < 16; s++) {
            const int lo = s < 8 ? (sb[s] & 0x0F) : (sb[s - 8] >> 4);
            const int hi = (sb[8 + s % 4] >> (2 * (s / 4))) & 3;
            sc[s] = (int8_t)((lo | (hi << 4)) - 32);
        }
        int is = 0;
        uint8_t m = 1;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int j = 0; j < 4; j++, m = (uint8_t)(m << 1)) {
                const int shift = 2 * j;
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (float)sc[is++];
                    for (int l = 0; l < 16; l++) {
                        const int k = l + 16 * half;
                        const int v = ((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4);
                        *y++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

/* 6-bit scale and min of sub-block s ∈ [0,8) of a Q4_K/Q5_K block (docs/spec/gguf.md §4). */
static void k_scale_min(const uint8_t *scales, int s, uint8_t *sc, uint8_t *mn) {
    if (s < 4) {
        *sc = scales[s] & 63;
        *mn = scales[s + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[s + 4] & 0x0F) | ((scales[s - 4] >> 6) << 4));
        *mn = (uint8_t)((scales[s + 4] >> 4) | ((scales[s] >> 6) << 4));
    }
}

/* Q4_K: d f16 | dmin f16 | scales[12] | qs[128]. Chunk c of 64 elements reads qs[32c, 32c+32):
 * low nibbles with sub-block 2c, high nibbles with sub-block 2c+1. */
static void deq_q4_k(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 144) {
        const float d = ld_f16(x);
        const float dmin = ld_f16(x + 2);
        const uint8_t *scales = x + 4;
        const uint8_t *q = x + 16;
        for (int c = 0; c < 4; c++, q += 32) {
            uint8_t sc, mn;
            k_scale_min(scales, 2 * c, &sc, &mn);
            const float d1 = d * (float)sc;
            const float m1 = dmin * (float)mn;
            k_scale_min(scales, 2 * c + 1, &sc, &mn);
            const float d2 = d * (float)sc;
            const float m2 = dmin * (float)mn;
            for (int l = 0; l < 32; l++) {
                const float p = d1 * (float)(q[l] & 0x0F);
                *y++ = p - m1;
            }
            for (int l = 0; l < 32; l++) {
                const float p = d2 * (float)(q[l] >> 4);
                *y++ = p - m2;
            }
        }
    }
}

/* Q5_K: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]. As Q4_K, plus a 5th bit: bit 2c of
 * qh[l] for the low half of chunk c, bit 2c+1 for the high half. */
static void deq_q5_k(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 176) {
        const float d = ld_f16(x);
        const float dmin = ld_f16(x + 2);
        const uint8_t *scales = x + 4;
        const uint8_t *qh = x + 16;
        const uint8_t *ql = x + 48;
        for (int c = 0; c < 4; c++, ql += 32) {
            uint8_t sc, mn;
            k_scale_min(scales, 2 * c, &sc, &mn);
            const float d1 = d * (float)sc;
            const float m1 = dmin * (float)mn;
            k_scale_min(scales, 2 * c + 1, &sc, &mn);
            const float d2 = d * (float)sc;
            const float m2 = dmin * (float)mn;
            const uint8_t u1 = (uint8_t)(1u << (2 * c));
            const uint8_t u2 = (uint8_t)(1u << (2 * c + 1));
            for (int l = 0; l < 32; l++) {
                const int v = (ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0);
                const float p = d1 * (float)v;
                *y++ = p - m1;
            }
            for (int l = 0; l < 32; l++) {
                const int v = (ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0);
                const float p = d2 * (float)v;
                *y++ = p - m2;
            }
        }
    }
}

/* Q6_K: ql[128] | qh[64] | scales int8[16] | d f16. Half n (128 elements) reads ql[64n, 64n+64)
 * and qh[32n, 32n+32); element 128n + l + 32k uses q_k (docs/spec/gguf.md §4) and scale (e / 16). */
static void deq_q6_k(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 210, y += QK_K) {
        const uint8_t *ql = x;
        const uint8_t *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        const float d = ld_f16(x + 208);
        for (int n = 0; n < 2; n++) {
            const uint8_t *L = ql + 64 * n;
            const uint8_t *H = qh + 32 * n;
            for (int l = 0; l < 32; l++) {
                const int q[4] = {
                    ((L[l] & 0x0F) | (((H[l] >> 0) & 3) << 4)) - 32,
                    ((L[l + 32] & 0x0F) | (((H[l] >> 2) & 3) << 4)) - 32,
                    ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32,
                    ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32,
                };
                for (int k = 0; k < 4; k++) {
                    const int e = 128 * n + l + 32 * k;
                    const float ds = d * (float)sc[e / 16];
                    y[e] = ds * (float)q[k];
                }
            }
        }
    }
}

/* Q8_K: d f32 | qs int8[256] | bsums int16[16] (sums for dot products, not read here). */
static void deq_q8_k(const uint8_t *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 292, y += QK_K) {
        const float d = f32_from_bits(ld_u32(x));
        for (int j = 0; j < QK_K; j++) y[j] = d * (float)(int8_t)x[4 + j];
    }
}

bool dequant_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const dtype_traits *t = dtype_traits_of(type);
    if (!t || !t->can_dequant || n < 0 || n % t->block_elems != 0) return false;
    if (n == 0) return true;
    const uint8_t *x = src;
    const int64_t nb = n / t->block_elems;
    switch ((slm_dtype)type) {
    case SLM_DTYPE_F32: deq_f32(x, dst, n); return true;
    case SLM_DTYPE_F16: deq_f16(x, dst, n); return true;
    case SLM_DTYPE_BF16: deq_bf16(x, dst, n); return true;
    case SLM_DTYPE_Q4_0: deq_q4_0(x, dst, nb); return true;
    case SLM_DTYPE_Q4_1: deq_q4_1(x, dst, nb); return true;
    case SLM_DTYPE_Q5_0: deq_q5_0(x, dst, nb); return true;
    case SLM_DTYPE_Q5_1: deq_q5_1(x, dst, nb); return true;
    case SLM_DTYPE_Q8_0: deq_q8_0(x, dst, nb); return true;
    case SLM_DTYPE_Q8_1: deq_q8_1(x, dst, nb); return true;
    case SLM_DTYPE_Q2_K: deq_q2_k(x, dst, nb); return true;
    case SLM_DTYPE_Q3_K: deq_q3_k(x, dst, nb); return true;
    case SLM_DTYPE_Q4_K: deq_q4_k(x, dst, nb); return true;
    case SLM_DTYPE_Q5_K: deq_q5_k(x, dst, nb); return true;
    case SLM_DTYPE_Q6_K: deq_q6_k(x, dst, nb); return true;
    case SLM_DTYPE_Q8_K: deq_q8_k(x, dst, nb); return true;
    default: return false;
    }
}
