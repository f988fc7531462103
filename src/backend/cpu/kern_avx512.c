/* kern_avx512.c — AVX-512 (F, BW, VL, DQ, VNNI) micro-kernels of the fast CPU kernels (cpu.h).
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c
 * (CMakeLists.txt) and only called when cpu_isa_detect finds those features.
 *
 * Quantised matmuls follow cpu.h's canonical arithmetic, which keeps one f32 accumulator per
 * output row and needs the exact integer dot of every 32-block. On the repacked tiles
 * (kern_tiles.c, every quantised type; the usual case) lane r of a register holds 4 weights of row
 * r, so each vpdpbusd takes 4 activations of a column as a broadcast: one column streams a pair of
 * tiles (32 rows); 2 to 8 columns (batched decode, verify, short prefills) load and unpack each
 * block once for every column of a pass (up to 4 columns on both tiles of a pair, up to 8 on one
 * tile; K types up to 8 per tile), passes over a chunk of blocks that stays in L1. In the file
 * layout (repacking off):
 *  - decode (few columns): 16 rows at a time straight from the mapped blocks; vpdpbusd gives
 *    4 or 8 partial sums per row and block, a permute tree sums them into one lane per row, and
 *    the per-block FMA runs with the 16 rows in the 16 lanes (weight scales fetched by a gather);
 *  - prefill (4+ columns): the 16-row tile is first repacked into scratch so that lane r of a
 *    register holds 4 consecutive weights of row r; each vpdpbusd then takes 4 activations of a
 *    column as a broadcast, and a block's 8 vpdpbusd give the 16 rows' exact sums directly.
 * Unsigned weights are fed as u8 (Q4_0, Q4_1 nibbles; Q5_0, Q5_1 5-bit values; Q8_0 as w ^ 0x80)
 * with the offset term (-8, -16 or -128 times the block's activation sum) precomputed per
 * activation block (cpu.h). In the file layout Q5_0 and Q5_1 always take the prefill form (5th bits
 * merged once).
 * Weights are never copied outside the per-thread tile. */
#include "backend/cpu/cpu.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__) && defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/kern_common.h"
#include "backend/cpu/kern_attn_q.h"
#include "base/half.h"

#define INLINE static inline __attribute__((always_inline))

static float ldf(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static int32_t ldi(const uint8_t *p) { int32_t i; memcpy(&i, p, 4); return i; }

static __mmask16 mask16(int64_t n) { return (__mmask16)(n <= 0 ? 0u : n >= 16 ? 0xFFFFu : (1u << n) - 1u); }

/* The canonical 16-lane reduction (cpu.h). */
INLINE float hsum16(__m512 v) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* cpu_exp (kern_common.h) on 16 lanes: the same operations as it and exp8 (kern_avx2.c), so the
 * same bits. */
INLINE __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-86.0f)), _mm512_set1_ps(88.3762626647949f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* 2^n for n in [-124, 128]: n = 128 only at the clamp, split as 2^(n-1) * 2 */
    __m512i ni = _mm512_cvtps_epi32(n);
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(ni, _mm512_set1_epi32(1)), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(e)), _mm512_set1_ps(2.0f));
}

/* ---- activation quantisation ----------------------------------------------------------------- */

/* Q8_K (bytes identical to cpu_quant_act_k_generic): max is the first element of largest |x|,
 * iscale = -127 / max, q = clamp(round-half-even(iscale x)), d = 1 / iscale, bsums per 16. */
static void quant_act_k(const float *x, int64_t k, uint8_t *dst) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    for (int64_t b = 0; b < k / CPU_QK_K; b++, x += CPU_QK_K, dst += CPU_Q8K_BYTES) {
        __m512 am = _mm512_setzero_ps();
        for (int j = 0; j < CPU_QK_K; j += 16) am = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + j), absmask), am);
        float amax = _mm512_reduce_max_ps(am);
        if (amax == 0.0f) {
            memset(dst, 0, CPU_Q8K_BYTES);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < CPU_QK_K; j += 16) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + j), absmask), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                max = x[j + __builtin_ctz(hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        const __m512 vs = _mm512_set1_ps(iscale), lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
        int16_t bs[16];
        for (int s = 0; s < 16; s++) {
            __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * s)),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m512i q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
            _mm_storeu_si128((__m128i *)(dst + 4 + 16 * s), _mm512_cvtsepi32_epi8(q));
            bs[s] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        float d = 1.0f / iscale;
        memcpy(dst, &d, 4);
        memcpy(dst + 260, bs, sizeof bs);
    }
}

static void quant_act(uint32_t wt, const float *x, int64_t k, uint8_t *dst) {
    if (cpu_wt_is_k(wt)) {
        quant_act_k(x, k, dst);
        return;
    }
    int64_t nb = k / CPU_QK;
    uint8_t *da = dst + k, *aux = da + 4 * nb;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int64_t b = 0; b < nb; b++) {
        __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
        __m512 am = _mm512_max_ps(_mm512_and_ps(x0, absmask), _mm512_and_ps(x1, absmask));
        float amax = _mm512_reduce_max_ps(am);
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, vid)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, vid));
        q0 = _mm512_min_epi32(_mm512_max_epi32(q0, lo), hi);
        q1 = _mm512_min_epi32(_mm512_max_epi32(q1, lo), hi);
        _mm_storeu_si128((__m128i *)(dst + 32 * b), _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(dst + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
        int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        float dr = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        memcpy(da + 4 * b, &dr, 4);
        if (wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1) {
            float sa = _cvtsh_ss(_cvtss_sh(d * (float)sum, _MM_FROUND_TO_NEAREST_INT));
            memcpy(aux + 4 * b, &sa, 4);
        } else {
            int32_t c = cpu_act_aux_mul(wt) * sum;
            memcpy(aux + 4 * b, &c, 4);
        }
    }
}

/* ---- 32-block matmul, decode form ------------------------------------------------------------- */

/* Sums 4 registers whose 128-bit lane i holds 4 partial sums of row 4g+i (g = register) into one
 * register with row r's total in lane r. */
INLINE __m512i reduce4x4(__m512i s0, __m512i s1, __m512i s2, __m512i s3) {
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i u = _mm512_add_epi32(_mm512_permutex2var_epi32(s0, ev, s1), _mm512_permutex2var_epi32(s0, od, s1));
    __m512i v = _mm512_add_epi32(_mm512_permutex2var_epi32(s2, ev, s3), _mm512_permutex2var_epi32(s2, od, s3));
    return _mm512_add_epi32(_mm512_permutex2var_epi32(u, ev, v), _mm512_permutex2var_epi32(u, od, v));
}

/* Pairs of 8-lane row sums (lanes 0-7 row 2p, 8-15 row 2p+1) to 4-lane row sums. */
INLINE __m512i reduce8to4(__m512i a, __m512i b) {
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, ev, b), _mm512_permutex2var_epi32(a, od, b));
}

INLINE __m512i load4x128(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3) {
    __m512i t = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p0));
    t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)p1), 1);
    t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)p2), 2);
    return _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)p3), 3);
}

/* Exact integer dots of block b for the 16 rows (row pointers p), column a (32 int8). */
INLINE __m512i isum_q4(const uint8_t *const p[16], size_t boff, const int8_t *a) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i alo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)a));
    __m512i ahi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(a + 16)));
    __m512i s[4];
    for (int g = 0; g < 4; g++) {
        __m512i t = load4x128(p[4 * g] + boff, p[4 * g + 1] + boff, p[4 * g + 2] + boff, p[4 * g + 3] + boff);
        __m512i l = _mm512_and_si512(t, m4), h = _mm512_and_si512(_mm512_srli_epi16(t, 4), m4);
        s[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), l, alo), h, ahi);
    }
    return reduce4x4(s[0], s[1], s[2], s[3]);
}

INLINE __m512i isum_q8(const uint8_t *const p[16], size_t boff, const int8_t *a) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i av = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)a));
    __m512i s8[8];
    for (int g = 0; g < 8; g++) {
        __m512i t = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p[2 * g] + boff)));
        t = _mm512_inserti64x4(t, _mm256_loadu_si256((const __m256i *)(p[2 * g + 1] + boff)), 1);
        s8[g] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(t, flip), av);
    }
    return reduce4x4(reduce8to4(s8[0], s8[1]), reduce8to4(s8[2], s8[3]), reduce8to4(s8[4], s8[5]),
                     reduce8to4(s8[6], s8[7]));
}

/* Up to 16 rows against one activation column; y[r] for r < nr. */
static void gemv_q32(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                     float *y, pf_state *pf) {
    const uint8_t *p[16];
    int32_t off[16];
    for (int r = 0; r < 16; r++) {
        int64_t rr = r < nr ? r : nr - 1;
        p[r] = w + (size_t)rr * row_bytes;
        off[r] = (int32_t)((size_t)rr * row_bytes);
    }
    const __m512i voff = _mm512_loadu_si512(off);
    int64_t nb = k / CPU_QK;
    const int8_t *a = (const int8_t *)act;
    const uint8_t *da = act + k, *aux = da + 4 * nb;
    size_t bsz = wt == SLM_DTYPE_Q4_0 ? 18 : wt == SLM_DTYPE_Q4_1 ? 20 : 34;
    size_t qoff = wt == SLM_DTYPE_Q4_1 ? 4 : 2;
    size_t tile_bytes = (size_t)nr * row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        size_t boff = (size_t)b * bsz;
        if (pf) pf_advance(pf, (const char *)w + tile_bytes * (size_t)(b + 1) / (size_t)nb + PF_LEAD);
        __m512i is = wt == SLM_DTYPE_Q8_0 ? isum_q8(p, boff + qoff, a + 32 * b) : isum_q4(p, boff + qoff, a + 32 * b);
        __m512i g = _mm512_i32gather_epi32(voff, (const void *)(w + boff), 1);
        __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
        if (wt != SLM_DTYPE_Q4_1) {
            is = _mm512_add_epi32(is, _mm512_set1_epi32(ldi(aux + 4 * b)));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dw, _mm512_set1_ps(ldf(da + 4 * b))), acc);
        } else {
            __m512 mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dw, _mm512_set1_ps(ldf(da + 4 * b))), acc);
            acc = _mm512_fmadd_ps(mw, _mm512_set1_ps(ldf(aux + 4 * b)), acc);
        }
    }
    _mm512_mask_storeu_ps(y, mask16(nr), acc);
}

/* ---- 32-block matmul, prefill form: repacked 16-row tile --------------------------------------- */

#define PK_BLOCK 640 /* per block: 8 x 64 bytes of weights, dw[16] f32, mw[16] f32 */

/* The 5th bits of 4 elements from bits 0..3 of each lane of t, at bit 4 of the lane's bytes 0..3. */
INLINE __m512i q5_spread4(__m512i t) {
    __m512i r = _mm512_slli_epi32(_mm512_and_si512(t, _mm512_set1_epi32(1)), 4);
    r = _mm512_or_si512(r, _mm512_slli_epi32(_mm512_and_si512(t, _mm512_set1_epi32(2)), 11));
    r = _mm512_or_si512(r, _mm512_slli_epi32(_mm512_and_si512(t, _mm512_set1_epi32(4)), 18));
    return _mm512_or_si512(r, _mm512_slli_epi32(_mm512_and_si512(t, _mm512_set1_epi32(8)), 25));
}

/* Up to 16 rows of a 32-block type into PK_BLOCK blocks: vector j < 4 holds elements 4j..4j+3 of
 * each row as u8 (Q4_0, Q4_1 nibbles; Q5_0, Q5_1 5-bit values), vector 4 + j elements 16+4j..; Q8_0
 * 8 vectors of w ^ 0x80. */
static void pack_q32(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t nb, uint8_t *pk) {
    int32_t off[16];
    for (int r = 0; r < 16; r++) off[r] = (int32_t)((size_t)(r < nr ? r : nr - 1) * row_bytes);
    const __m512i voff = _mm512_loadu_si512(off);
    const __m512i m4 = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8((char)0x80);
    size_t bsz = cpu_q32_block_bytes(wt), qoff = cpu_q32_quant_off(wt);
    const bool q5 = wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1;
    for (int64_t b = 0; b < nb; b++, pk += PK_BLOCK) {
        const uint8_t *base = w + (size_t)b * bsz;
        if (wt == SLM_DTYPE_Q8_0) {
            for (int j = 0; j < 8; j++) {
                __m512i g = _mm512_i32gather_epi32(voff, (const void *)(base + qoff + 4 * j), 1);
                _mm512_store_si512(pk + 64 * j, _mm512_xor_si512(g, flip));
            }
        } else {
            __m512i qh = q5 ? _mm512_i32gather_epi32(voff, (const void *)(base + qoff - 4), 1) : _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                __m512i g = _mm512_i32gather_epi32(voff, (const void *)(base + qoff + 4 * j), 1);
                __m512i lo = _mm512_and_si512(g, m4), hi = _mm512_and_si512(_mm512_srli_epi16(g, 4), m4);
                if (q5) {
                    lo = _mm512_or_si512(lo, q5_spread4(_mm512_srli_epi32(qh, (unsigned)(4 * j))));
                    hi = _mm512_or_si512(hi, q5_spread4(_mm512_srli_epi32(qh, (unsigned)(16 + 4 * j))));
                }
                _mm512_store_si512(pk + 64 * j, lo);
                _mm512_store_si512(pk + 64 * (j + 4), hi);
            }
        }
        __m512i g = _mm512_i32gather_epi32(voff, (const void *)base, 1);
        _mm512_store_ps(pk + 512, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
        _mm512_store_ps(pk + 576, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))));
    }
}

/* NC columns (1..4) against a packed tile; y[c * ldy + r] for r < nr. */
INLINE void gemm_q32_cols(bool q41, const uint8_t *pk, int64_t nb, int64_t k, const uint8_t *act, size_t act_stride,
                          int NC, float *y, int64_t ldy, __mmask16 mrows) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const uint8_t *ac[4];
    for (int c = 0; c < NC; c++) ac[c] = act + (size_t)c * act_stride;
    for (int64_t b = 0; b < nb; b++, pk += PK_BLOCK) {
        __m512i w0 = _mm512_load_si512(pk), w1 = _mm512_load_si512(pk + 64), w2 = _mm512_load_si512(pk + 128),
                w3 = _mm512_load_si512(pk + 192), w4 = _mm512_load_si512(pk + 256), w5 = _mm512_load_si512(pk + 320),
                w6 = _mm512_load_si512(pk + 384), w7 = _mm512_load_si512(pk + 448);
        __m512 dw = _mm512_load_ps(pk + 512);
        for (int c = 0; c < NC; c++) {
            const uint8_t *a = ac[c] + 32 * b;
            const uint8_t *da = ac[c] + k + 4 * b, *aux = ac[c] + k + 4 * nb + 4 * b;
            __m512i is = q41 ? _mm512_setzero_si512() : _mm512_set1_epi32(ldi(aux));
            is = _mm512_dpbusd_epi32(is, w0, _mm512_set1_epi32(ldi(a)));
            is = _mm512_dpbusd_epi32(is, w1, _mm512_set1_epi32(ldi(a + 4)));
            is = _mm512_dpbusd_epi32(is, w2, _mm512_set1_epi32(ldi(a + 8)));
            is = _mm512_dpbusd_epi32(is, w3, _mm512_set1_epi32(ldi(a + 12)));
            is = _mm512_dpbusd_epi32(is, w4, _mm512_set1_epi32(ldi(a + 16)));
            is = _mm512_dpbusd_epi32(is, w5, _mm512_set1_epi32(ldi(a + 20)));
            is = _mm512_dpbusd_epi32(is, w6, _mm512_set1_epi32(ldi(a + 24)));
            is = _mm512_dpbusd_epi32(is, w7, _mm512_set1_epi32(ldi(a + 28)));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dw, _mm512_set1_ps(ldf(da))), acc[c]);
            if (q41) acc[c] = _mm512_fmadd_ps(_mm512_load_ps(pk + 576), _mm512_set1_ps(ldf(aux)), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_mask_storeu_ps(y + c * ldy, mrows, acc[c]);
}

static void gemm_q32(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                     size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    int64_t nb = k / CPU_QK;
    uint8_t *pk = scratch;
    pack_q32(wt, w, row_bytes, nr, nb, pk);
    bool q41 = wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1;
    __mmask16 m = mask16(nr);
    int64_t c = 0;
    for (; c + 4 <= ncols; c += 4)
        gemm_q32_cols(q41, pk, nb, k, act + (size_t)c * act_stride, act_stride, 4, y + c * ldy, ldy, m);
    for (; c < ncols; c++) gemm_q32_cols(q41, pk, nb, k, act + (size_t)c * act_stride, act_stride, 1, y + c * ldy, ldy, m);
}

/* ---- matmul on repacked tiles (cpu.h: repack_tiles, mm_quant_packed) ---------------------------- */

INLINE bool is_q5(uint32_t wt) { return wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1; }
/* 32-block types with f16 mins (an f32 sa in the activations) instead of an int32 aux offset. */
INLINE bool has_mins(uint32_t wt) { return wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1; }

/* Q5 tiles: the 5th bits of elements s..s+3 (s = 4j for the low nibbles of quant vector j, 16 +
 * 4j for its high ones) at bit 4 of each lane's bytes 0..3, from the tile's regrouped bits (bit j of
 * byte i for element 4j + i, bit 4 + j for 16 + 4j + i; kern_tiles.c): one shift within the bytes. */
INLINE __m512i q5_bits4(__m512i qh, int s) {
    const __m512i b16 = _mm512_set1_epi8(0x10);
    int j = (s & 15) / 4;
    if (s < 16) return _mm512_and_si512(_mm512_slli_epi32(qh, (unsigned)(4 - j)), b16);
    return _mm512_and_si512(j ? _mm512_srli_epi32(qh, (unsigned)j) : qh, b16);
}

/* The u8 weights of quant vector j of a 32-block tile (quants at q): low (hi false) or high nibbles,
 * with Q5's 5th bits from qh. */
INLINE __m512i nibbles(uint32_t wt, __m512i v, __m512i qh, int j, bool hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i n = _mm512_and_si512(hi ? _mm512_srli_epi16(v, 4) : v, m4);
    return is_q5(wt) ? _mm512_or_si512(n, q5_bits4(qh, hi ? 16 + 4 * j : 4 * j)) : n;
}

/* One column against a pair of tiles of a 32-block type (32 rows, the decode case): one
 * sequential stream, each activation broadcast shared by both tiles; the arithmetic of each row
 * is tiles_cols_q32's. */
INLINE void packed_pair_col(uint32_t wt, const uint8_t *pk, int64_t nb, int64_t k, const uint8_t *ac, float *y,
                            __mmask16 mlo, __mmask16 mhi, pf_state *pf) {
    const bool q8 = wt == SLM_DTYPE_Q8_0, mins = has_mins(wt);
    const size_t stride = 2 * cpu_tile_block_bytes(wt), qb = cpu_tile_quant_bytes(wt), sb = mins ? 64 : 32;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, pk += stride) {
        pf_advance(pf, (const char *)pk + stride + PF_LEAD);
        const uint8_t *a = ac + 32 * b, *da = ac + k + 4 * b, *aux = ac + k + 4 * nb + 4 * b;
        __m512i is0 = mins ? _mm512_setzero_si512() : _mm512_set1_epi32(ldi(aux)), is1 = is0;
        if (q8) {
            for (int j = 0; j < 8; j++) {
                __m512i bc = _mm512_set1_epi32(ldi(a + 4 * j));
                is0 = _mm512_dpbusd_epi32(is0, _mm512_loadu_si512(pk + 64 * j), bc);
                is1 = _mm512_dpbusd_epi32(is1, _mm512_loadu_si512(pk + qb + 64 * j), bc);
            }
        } else {
            __m512i qh0 = is_q5(wt) ? _mm512_loadu_si512(pk + 256) : _mm512_setzero_si512();
            __m512i qh1 = is_q5(wt) ? _mm512_loadu_si512(pk + qb + 256) : _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                __m512i v0 = _mm512_loadu_si512(pk + 64 * j), v1 = _mm512_loadu_si512(pk + qb + 64 * j);
                __m512i lo = _mm512_set1_epi32(ldi(a + 4 * j)), hi = _mm512_set1_epi32(ldi(a + 16 + 4 * j));
                is0 = _mm512_dpbusd_epi32(is0, nibbles(wt, v0, qh0, j, false), lo);
                is1 = _mm512_dpbusd_epi32(is1, nibbles(wt, v1, qh1, j, false), lo);
                is0 = _mm512_dpbusd_epi32(is0, nibbles(wt, v0, qh0, j, true), hi);
                is1 = _mm512_dpbusd_epi32(is1, nibbles(wt, v1, qh1, j, true), hi);
            }
        }
        const uint8_t *sc = pk + 2 * qb;
        __m512 d = _mm512_set1_ps(ldf(da));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is0),
                               _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc)), d), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is1),
                               _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + sb))), d), acc1);
        if (mins) {
            __m512 m = _mm512_set1_ps(ldf(aux));
            acc0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32))), m, acc0);
            acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + sb + 32))), m, acc1);
        }
    }
    _mm512_mask_storeu_ps(y, mlo, acc0);
    _mm512_mask_storeu_ps(y + 16, mhi, acc1);
}

/* Where the blocks of one tile pair (or a lone last tile) lie: block b at pk + b * stride, tile h's
 * quants at + h * qb, its scales at + scales + h * sb (kern_tiles.c). */
typedef struct tiles_at {
    const uint8_t *pk;
    size_t stride, scales;
} tiles_at;

/* NC (1..8) columns against tiles [H0, H1) (16 rows each) of a pair over blocks [b0, b1), each
 * block's weights loaded and unpacked once for all NC columns (cpu.h's canonical arithmetic;
 * registers: 2 x NC accumulators and NC x (H1 - H0) integer sums, so NC <= 4 for both tiles).
 * Row r of tile h, column c at y[c * ldy + 16h + r] (valid rows: mask[h]), continued from the
 * sums there when b0 > 0. Block b's step prefetches up to pf_to + (b - b0 + 1) * pf_step. */
INLINE void tiles_cols_q32(const uint32_t wt, const int NC, const int H0, const int H1, tiles_at at, int64_t b0,
                           int64_t b1, int64_t nb, int64_t k, const uint8_t *act, size_t act_stride, float *y,
                           int64_t ldy, const __mmask16 mask[2], pf_state *pf, const char *pf_to, size_t pf_step) {
    const bool q8 = wt == SLM_DTYPE_Q8_0, mins = has_mins(wt);
    const size_t qb = cpu_tile_quant_bytes(wt), sb = mins ? 64 : 32;
    __m512 acc[2][8];
    for (int h = H0; h < H1; h++)
        for (int c = 0; c < NC; c++)
            acc[h][c] = b0 ? _mm512_maskz_loadu_ps(mask[h], y + c * ldy + 16 * h) : _mm512_setzero_ps();
    const uint8_t *blk = at.pk + (size_t)b0 * at.stride;
    for (int64_t b = b0; b < b1; b++, blk += at.stride) {
        pf_advance(pf, pf_to + (size_t)(b - b0 + 1) * pf_step);
        __m512i is[2][8];
        for (int c = 0; c < NC; c++) {
            const uint8_t *aux = act + (size_t)c * act_stride + k + 4 * nb + 4 * b;
            for (int h = H0; h < H1; h++) is[h][c] = mins ? _mm512_setzero_si512() : _mm512_set1_epi32(ldi(aux));
        }
        /* vector j of a tile holds elements 4j..4j+3 of its 16 rows (Q8_0), or as nibbles 4j.. and
         * 16+4j.. (the others) */
        if (q8) {
            for (int j = 0; j < 8; j++)
                for (int h = H0; h < H1; h++) {
                    __m512i w = _mm512_loadu_si512(blk + h * qb + 64 * j);
                    for (int c = 0; c < NC; c++)
                        is[h][c] = _mm512_dpbusd_epi32(is[h][c], w,
                                                       _mm512_set1_epi32(ldi(act + (size_t)c * act_stride + 32 * b + 4 * j)));
                }
        } else {
            __m512i qh[2];
            for (int h = H0; h < H1; h++) qh[h] = is_q5(wt) ? _mm512_loadu_si512(blk + h * qb + 256) : _mm512_setzero_si512();
            for (int j = 0; j < 4; j++)
                for (int h = H0; h < H1; h++) {
                    __m512i v = _mm512_loadu_si512(blk + h * qb + 64 * j);
                    __m512i lo = nibbles(wt, v, qh[h], j, false), hi = nibbles(wt, v, qh[h], j, true);
                    for (int c = 0; c < NC; c++) {
                        const uint8_t *a = act + (size_t)c * act_stride + 32 * b + 4 * j;
                        is[h][c] = _mm512_dpbusd_epi32(is[h][c], lo, _mm512_set1_epi32(ldi(a)));
                        is[h][c] = _mm512_dpbusd_epi32(is[h][c], hi, _mm512_set1_epi32(ldi(a + 16)));
                    }
                }
        }
        for (int h = H0; h < H1; h++) {
            const uint8_t *sc = blk + at.scales + h * sb;
            __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
            for (int c = 0; c < NC; c++) {
                const uint8_t *ac = act + (size_t)c * act_stride;
                acc[h][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[h][c]), _mm512_mul_ps(dw, _mm512_set1_ps(ldf(ac + k + 4 * b))),
                                            acc[h][c]);
                if (mins)
                    acc[h][c] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32))),
                                                _mm512_set1_ps(ldf(ac + k + 4 * nb + 4 * b)), acc[h][c]);
            }
        }
    }
    for (int h = H0; h < H1; h++)
        for (int c = 0; c < NC; c++) _mm512_mask_storeu_ps(y + c * ldy + 16 * h, mask[h], acc[h][c]);
}

/* tiles_cols_q32 with the weight type, column count and tiles as constants */
#define TCQ_TYPE(NC, H0, H1, wt, ...)                                                                   \
    do {                                                                                                \
        if ((wt) == SLM_DTYPE_Q4_0) tiles_cols_q32(SLM_DTYPE_Q4_0, NC, H0, H1, __VA_ARGS__);             \
        else if ((wt) == SLM_DTYPE_Q4_1) tiles_cols_q32(SLM_DTYPE_Q4_1, NC, H0, H1, __VA_ARGS__);        \
        else if ((wt) == SLM_DTYPE_Q5_0) tiles_cols_q32(SLM_DTYPE_Q5_0, NC, H0, H1, __VA_ARGS__);        \
        else if ((wt) == SLM_DTYPE_Q5_1) tiles_cols_q32(SLM_DTYPE_Q5_1, NC, H0, H1, __VA_ARGS__);        \
        else tiles_cols_q32(SLM_DTYPE_Q8_0, NC, H0, H1, __VA_ARGS__);                                    \
    } while (0)
#define TCQ_TILES(NC, h0, h1, ...)                                                                      \
    do {                                                                                                \
        if ((h0) == 0 && (h1) == 2) TCQ_TYPE(NC, 0, 2, __VA_ARGS__);                                    \
        else if ((h0) == 0) TCQ_TYPE(NC, 0, 1, __VA_ARGS__);                                            \
        else TCQ_TYPE(NC, 1, 2, __VA_ARGS__);                                                           \
    } while (0)

static void tiles_cols_q32_call(uint32_t wt, int nc, int h0, int h1, tiles_at at, int64_t b0, int64_t b1, int64_t nb,
                                int64_t k, const uint8_t *act, size_t act_stride, float *y, int64_t ldy,
                                const __mmask16 mask[2], pf_state *pf, const char *pf_to, size_t pf_step) {
    switch (nc) {
    case 1: TCQ_TILES(1, h0, h1, wt, at, b0, b1, nb, k, act, act_stride, y, ldy, mask, pf, pf_to, pf_step); break;
    case 2: TCQ_TILES(2, h0, h1, wt, at, b0, b1, nb, k, act, act_stride, y, ldy, mask, pf, pf_to, pf_step); break;
    case 3: TCQ_TILES(3, h0, h1, wt, at, b0, b1, nb, k, act, act_stride, y, ldy, mask, pf, pf_to, pf_step); break;
    case 4: TCQ_TILES(4, h0, h1, wt, at, b0, b1, nb, k, act, act_stride, y, ldy, mask, pf, pf_to, pf_step); break;
    case 5: TCQ_TILES(5, h0, h1, wt, at, b0, b1, nb, k, act, act_stride, y, ldy, mask, pf, pf_to, pf_step); break;
    case 6: TCQ_TILES(6, h0, h1, wt, at, b0, b1, nb, k, act, act_stride, y, ldy, mask, pf, pf_to, pf_step); break;
    case 7: TCQ_TILES(7, h0, h1, wt, at, b0, b1, nb, k, act, act_stride, y, ldy, mask, pf, pf_to, pf_step); break;
    default: TCQ_TILES(8, h0, h1, wt, at, b0, b1, nb, k, act, act_stride, y, ldy, mask, pf, pf_to, pf_step); break;
    }
}

/* Blocks of a tile pair per pass with several columns: 32 x 576 bytes (Q4_0) to 32 x 1088 (Q8_0),
 * in L1 while every pass reads them. */
#define PAIR_CHUNK_BLOCKS 32
/* Columns per pass: up to 4 take both tiles of a pair at once, up to 8 one tile at a time. */
#define COLS_BOTH_TILES 4
#define COLS_PER_PASS 8

/* ncols >= 2 columns against a tile pair (ntile 2) or a lone last tile (ntile 1) at at: per chunk
 * of blocks, passes of up to COLS_PER_PASS columns. Every pass reads the whole chunk and together
 * they take longer than streaming it, so the prefetch runs one chunk ahead, paced evenly over the
 * passes. */
static void tiles_cols(uint32_t wt, tiles_at at, int ntile, int64_t nb, int64_t k, const uint8_t *act,
                       size_t act_stride, int64_t ncols, float *y, int64_t ldy, const __mmask16 mask[2], pf_state *pf) {
    int64_t passes = 0;
    for (int64_t c = 0; c < ncols; c += COLS_PER_PASS) {
        int64_t nc = ncols - c < COLS_PER_PASS ? ncols - c : COLS_PER_PASS;
        passes += nc <= COLS_BOTH_TILES ? 1 : ntile;
    }
    for (int64_t b0 = 0; b0 < nb; b0 += PAIR_CHUNK_BLOCKS) {
        int64_t b1 = b0 + PAIR_CHUNK_BLOCKS < nb ? b0 + PAIR_CHUNK_BLOCKS : nb;
        const size_t chunk = (size_t)(b1 - b0) * at.stride, step = chunk / (size_t)passes / (size_t)(b1 - b0) + 1;
        const char *ahead = (const char *)(at.pk + (size_t)b1 * at.stride);
        int64_t pass = 0;
        for (int64_t c = 0; c < ncols; c += COLS_PER_PASS) {
            int nc = (int)(ncols - c < COLS_PER_PASS ? ncols - c : COLS_PER_PASS);
            const uint8_t *ac = act + (size_t)c * act_stride;
            if (nc <= COLS_BOTH_TILES) {
                tiles_cols_q32_call(wt, nc, 0, ntile, at, b0, b1, nb, k, ac, act_stride, y + c * ldy, ldy, mask, pf,
                                    ahead + (size_t)pass++ * chunk / (size_t)passes, step);
                continue;
            }
            for (int h = 0; h < ntile; h++)
                tiles_cols_q32_call(wt, nc, h, h + 1, at, b0, b1, nb, k, ac, act_stride, y + c * ldy, ldy, mask, pf,
                                    ahead + (size_t)pass++ * chunk / (size_t)passes, step);
        }
    }
}

/* NC (1..8) columns against one K-quant tile (nbk super-blocks), cpu.h's canonical arithmetic:
 * the integer sums of a row and super-block are exact, so summing them per sub-block across the
 * 16 row lanes gives the bits of the row-at-a-time kernel. Each super-block's weights are loaded
 * and unpacked once for all NC columns (low then high nibbles of a chunk, to keep the unpacked
 * weights, the NC integer sums and the NC accumulators in registers). */
INLINE void packed_tile_kquant(const uint32_t wt, const int NC, const uint8_t *pk, int64_t nbk, const uint8_t *act,
                               size_t act_stride, float *y, int64_t ldy, __mmask16 mrows, pf_state *pf) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), b16 = _mm512_set1_epi8(0x10);
    const bool q4 = wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K, q5 = wt == SLM_DTYPE_Q5_K;
    const size_t sbb = q5 ? KT_Q5K : q4 ? KT_Q4K : KT_Q6K;
    __m512 acc[8];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nbk; b++, pk += sbb) {
        const uint8_t *ab[8];
        for (int c = 0; c < NC; c++) ab[c] = act + (size_t)c * act_stride + (size_t)b * CPU_Q8K_BYTES;
        __m512i is[8];
        for (int c = 0; c < NC; c++) is[c] = _mm512_setzero_si512();
        if (q4) {
            for (int ch = 0; ch < 4; ch++) {
                /* a super-block is 37 lines: prefetch a quarter per chunk (pf_advance issues <= 32) */
                if (pf) pf_advance(pf, (const char *)pk + (size_t)(ch + 1) * sbb / 4 + PF_LEAD);
                for (int half = 0; half < 2; half++) { /* sub-block 2ch + half */
                    __m512i w[8];
                    for (int g = 0; g < 8; g++) {
                        __m512i v = _mm512_loadu_si512(pk + 64 * (8 * ch + g));
                        w[g] = _mm512_and_si512(half ? _mm512_srli_epi16(v, 4) : v, m4);
                        if (q5) { /* Q5_K: bit 2ch + half of the qh bytes to bit 4 (kern_common.h) */
                            __m512i qh = _mm512_loadu_si512(pk + KT_Q4K + 64 * g);
                            qh = _mm512_slli_epi16(_mm512_srli_epi16(qh, (unsigned)(2 * ch + half)), 4);
                            w[g] = _mm512_or_si512(w[g], _mm512_and_si512(qh, b16));
                        }
                    }
                    __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(pk + 2048 + 32 * ch + 16 * half)));
                    for (int c = 0; c < NC; c++) {
                        const uint8_t *a = ab[c] + 4 + 64 * ch + 32 * half;
                        __m512i s = _mm512_setzero_si512();
                        for (int g = 0; g < 8; g++) s = _mm512_dpbusd_epi32(s, w[g], _mm512_set1_epi32(ldi(a + 4 * g)));
                        is[c] = _mm512_add_epi32(is[c], _mm512_mullo_epi32(s, sc));
                    }
                }
            }
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pk + 2304)));
            for (int c = 0; c < NC; c++) {
                __m512 da = _mm512_set1_ps(ldf(ab[c]));
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[c]), _mm512_mul_ps(d, da), acc[c]);
            }
            /* mins: min s times the two bsums of its 32 elements, one vpmaddwd */
            for (int c = 0; c < NC; c++) is[c] = _mm512_setzero_si512();
            for (int s = 0; s < 8; s++) {
                __m512i mn = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(pk + 2176 + 16 * s)));
                mn = _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16));
                for (int c = 0; c < NC; c++)
                    is[c] = _mm512_add_epi32(is[c], _mm512_madd_epi16(mn, _mm512_set1_epi32(ldi(ab[c] + 260 + 4 * s))));
            }
            __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pk + 2336)));
            for (int c = 0; c < NC; c++) {
                __m512 da = _mm512_set1_ps(ldf(ab[c]));
                acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(is[c]), _mm512_mul_ps(dmin, da), acc[c]);
            }
        } else {
            for (int j = 0; j < 16; j++) {
                if (pf && j % 4 == 0) pf_advance(pf, (const char *)pk + (size_t)(j + 4) * sbb / 16 + PF_LEAD);
                const uint8_t *v = pk + 192 * j;
                __m512i L0 = _mm512_loadu_si512(v), L1 = _mm512_loadu_si512(v + 64), H = _mm512_loadu_si512(v + 128);
                __m512i q0 = _mm512_or_si512(_mm512_and_si512(L0, m4), _mm512_and_si512(_mm512_slli_epi16(H, 4), m30));
                __m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L0, 4), m4),
                                             _mm512_and_si512(_mm512_slli_epi16(H, 2), m30));
                __m512i q2 = _mm512_or_si512(_mm512_and_si512(L1, m4), _mm512_and_si512(H, m30));
                __m512i q3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L1, 4), m4),
                                             _mm512_and_si512(_mm512_srli_epi16(H, 2), m30));
                __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pk + 3072 + 16 * j)));
                for (int c = 0; c < NC; c++) {
                    const uint8_t *a = ab[c] + 4 + 16 * j;
                    __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q0, _mm512_set1_epi32(ldi(a)));
                    s = _mm512_dpbusd_epi32(s, q1, _mm512_set1_epi32(ldi(a + 4)));
                    s = _mm512_dpbusd_epi32(s, q2, _mm512_set1_epi32(ldi(a + 8)));
                    s = _mm512_dpbusd_epi32(s, q3, _mm512_set1_epi32(ldi(a + 12)));
                    is[c] = _mm512_add_epi32(is[c], _mm512_mullo_epi32(s, sc));
                }
            }
            /* Σ_j sc_j · bsum_j, scales 2m and 2m + 1 in the two halves of each lane: one vpmaddwd */
            for (int m = 0; m < 8; m++) {
                __m512i s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pk + 3072 + 32 * m)));
                __m512i s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pk + 3072 + 32 * m + 16)));
                __m512i sp = _mm512_mask_blend_epi16(0xAAAAAAAAu, s0, _mm512_slli_epi32(s1, 16));
                for (int c = 0; c < NC; c++)
                    is[c] = _mm512_sub_epi32(is[c], _mm512_slli_epi32(_mm512_madd_epi16(sp, _mm512_set1_epi32(ldi(ab[c] + 260 + 4 * m))), 5));
            }
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pk + 3328)));
            for (int c = 0; c < NC; c++)
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[c]), _mm512_mul_ps(d, _mm512_set1_ps(ldf(ab[c]))), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_mask_storeu_ps(y + c * ldy, mrows, acc[c]);
}

/* packed_tile_kquant with the weight type and column count as constants */
#define PTK_TYPE(NC, wt, ...)                                                                           \
    do {                                                                                                \
        if ((wt) == SLM_DTYPE_Q4_K) packed_tile_kquant(SLM_DTYPE_Q4_K, NC, __VA_ARGS__);                \
        else if ((wt) == SLM_DTYPE_Q5_K) packed_tile_kquant(SLM_DTYPE_Q5_K, NC, __VA_ARGS__);           \
        else packed_tile_kquant(SLM_DTYPE_Q6_K, NC, __VA_ARGS__);                                       \
    } while (0)

static void packed_tile_kquant_call(uint32_t wt, int nc, const uint8_t *pk, int64_t nbk, const uint8_t *act,
                                    size_t act_stride, float *y, int64_t ldy, __mmask16 mrows, pf_state *pf) {
    switch (nc) {
    case 1: PTK_TYPE(1, wt, pk, nbk, act, act_stride, y, ldy, mrows, pf); break;
    case 2: PTK_TYPE(2, wt, pk, nbk, act, act_stride, y, ldy, mrows, pf); break;
    case 3: PTK_TYPE(3, wt, pk, nbk, act, act_stride, y, ldy, mrows, pf); break;
    case 4: PTK_TYPE(4, wt, pk, nbk, act, act_stride, y, ldy, mrows, pf); break;
    case 5: PTK_TYPE(5, wt, pk, nbk, act, act_stride, y, ldy, mrows, pf); break;
    case 6: PTK_TYPE(6, wt, pk, nbk, act, act_stride, y, ldy, mrows, pf); break;
    case 7: PTK_TYPE(7, wt, pk, nbk, act, act_stride, y, ldy, mrows, pf); break;
    default: PTK_TYPE(8, wt, pk, nbk, act, act_stride, y, ldy, mrows, pf); break;
    }
}

static void mm_quant_packed(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                            size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    if (cpu_wt_is_k(wt)) {
        int64_t nbk = k / CPU_QK_K, ntiles = (nr + 15) / 16;
        size_t tile_bytes = (size_t)nbk * 8 * cpu_tile_block_bytes(wt);
        pf_state pf = {(const char *)pk, (const char *)pk + (size_t)ntiles * tile_bytes};
        for (int64_t t = 0; t < ntiles; t++) {
            const uint8_t *tp = pk + (size_t)t * tile_bytes;
            __mmask16 m = mask16(nr - 16 * t);
            /* the first pass over a tile streams it from memory (prefetched); later ones hit cache */
            for (int64_t c = 0; c < ncols; c += COLS_PER_PASS)
                packed_tile_kquant_call(wt, (int)(ncols - c < COLS_PER_PASS ? ncols - c : COLS_PER_PASS), tp, nbk,
                                        act + (size_t)c * act_stride, act_stride, y + c * ldy + 16 * t, ldy, m,
                                        c == 0 ? &pf : NULL);
        }
        return;
    }
    int64_t nb = k / CPU_QK, ntiles = (nr + 15) / 16;
    size_t tbb = cpu_tile_block_bytes(wt), tile_bytes = (size_t)nb * tbb, qb = cpu_tile_quant_bytes(wt);
    pf_state pf = {(const char *)pk, (const char *)pk + (size_t)ntiles * tile_bytes};
    for (int64_t t = 0; t < ntiles; t += 2) {
        const uint8_t *base = pk + (size_t)t * tile_bytes;
        int ntile = t + 1 < ntiles ? 2 : 1;
        __mmask16 mask[2] = {mask16(nr - 16 * t), mask16(nr - 16 * t - 16)};
        if (ncols == 1 && ntile == 2) { /* decode: both tiles of a pair in one stream */
            if (wt == SLM_DTYPE_Q4_0) packed_pair_col(SLM_DTYPE_Q4_0, base, nb, k, act, y + 16 * t, mask[0], mask[1], &pf);
            else if (wt == SLM_DTYPE_Q4_1) packed_pair_col(SLM_DTYPE_Q4_1, base, nb, k, act, y + 16 * t, mask[0], mask[1], &pf);
            else if (wt == SLM_DTYPE_Q5_0) packed_pair_col(SLM_DTYPE_Q5_0, base, nb, k, act, y + 16 * t, mask[0], mask[1], &pf);
            else if (wt == SLM_DTYPE_Q5_1) packed_pair_col(SLM_DTYPE_Q5_1, base, nb, k, act, y + 16 * t, mask[0], mask[1], &pf);
            else packed_pair_col(SLM_DTYPE_Q8_0, base, nb, k, act, y + 16 * t, mask[0], mask[1], &pf);
            continue;
        }
        /* a pair: blocks of 2 tbb, both tiles' quants then both tiles' scales; a lone tile: tbb */
        tiles_at at = {base, ntile * tbb, ntile * qb};
        tiles_cols(wt, at, ntile, nb, k, act, act_stride, ncols, y + 16 * t, ldy, mask, &pf);
    }
}

/* ---- K-quants: one row at a time, weights unpacked once per row for all columns --------------- */

/* Unpacked Q4_K / Q6_K row in scratch: per super-block 256 u8 weights and 4 scale registers
 * (16 int32 lanes each, the sub-block scale of the lanes of each 64-element chunk's vpdpbusd). */
#define KU_BLOCK (256 + 256)

/* Q4_K, or with q5 Q5_K (qh[32] at 16, quants at 48; bit 2c of qh[l] is the 5th bit of element
 * 64c + l, bit 2c+1 that of 64c + 32 + l). */
static void unpack_q4k(bool q5, const uint8_t *x, int64_t nbk, uint8_t *u, int32_t *mn) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(0x10);
    for (int64_t b = 0; b < nbk; b++, x += q5 ? 176 : 144, u += KU_BLOCK, mn += 8) {
        const uint8_t *sc = x + 4;
        int32_t s[8];
        for (int j = 0; j < 8; j++) {
            if (j < 4) {
                s[j] = sc[j] & 63;
                mn[j] = sc[j + 4] & 63;
            } else {
                s[j] = (sc[j + 4] & 0x0F) | ((sc[j - 4] >> 6) << 4);
                mn[j] = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
            }
        }
        __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(x + 16)) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x + (q5 ? 48 : 16) + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (q5) {
                __m256i h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), b16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), b16));
            }
            _mm256_storeu_si256((__m256i *)(u + 64 * c), lo);
            _mm256_storeu_si256((__m256i *)(u + 64 * c + 32), hi);
            __m512i sv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(s[2 * c])),
                                            _mm256_set1_epi32(s[2 * c + 1]), 1);
            _mm512_storeu_si512(u + 256 + 64 * c, sv);
        }
    }
}

static void unpack_q6k(const uint8_t *x, int64_t nbk, uint8_t *u, int32_t *sc16) {
    for (int64_t b = 0; b < nbk; b++, x += 210, u += KU_BLOCK, sc16 += 16) {
        const int8_t *sc = (const int8_t *)(x + 192);
        for (int n = 0; n < 2; n++) {
            const uint8_t *L = x + 64 * n, *H = x + 128 + 32 * n;
            uint8_t *o = u + 128 * n;
            for (int l = 0; l < 32; l++) {
                o[l] = (uint8_t)((L[l] & 0x0F) | ((H[l] & 3) << 4));
                o[l + 32] = (uint8_t)((L[l + 32] & 0x0F) | (((H[l] >> 2) & 3) << 4));
                o[l + 64] = (uint8_t)((L[l] >> 4) | (((H[l] >> 4) & 3) << 4));
                o[l + 96] = (uint8_t)((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4));
            }
        }
        for (int s = 0; s < 16; s++) sc16[s] = sc[s];
        /* chunk c (64 elements) covers sub-blocks 4c..4c+3, 4 lanes each */
        for (int c = 0; c < 4; c++) {
            __m512i sv = _mm512_set_epi32(sc[4 * c + 3], sc[4 * c + 3], sc[4 * c + 3], sc[4 * c + 3], sc[4 * c + 2],
                                          sc[4 * c + 2], sc[4 * c + 2], sc[4 * c + 2], sc[4 * c + 1], sc[4 * c + 1],
                                          sc[4 * c + 1], sc[4 * c + 1], sc[4 * c], sc[4 * c], sc[4 * c], sc[4 * c]);
            _mm512_storeu_si512(u + 256 + 64 * c, sv);
        }
    }
}

static void mm_qk(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                  size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    int64_t nbk = k / CPU_QK_K;
    uint8_t *u = scratch;
    int32_t *extra = (int32_t *)(u + (size_t)nbk * KU_BLOCK); /* mins (8) or scales (16) per block */
    bool q4 = wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K, q5 = wt == SLM_DTYPE_Q5_K;
    size_t bsz = q5 ? 176 : q4 ? 144 : 210;
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *x = w + (size_t)r * row_bytes;
        if (q4) unpack_q4k(q5, x, nbk, u, extra);
        else unpack_q6k(x, nbk, u, extra);
        for (int64_t c = 0; c < ncols; c++) {
            const uint8_t *ab = act + (size_t)c * act_stride;
            float acc = 0.0f;
            for (int64_t b = 0; b < nbk; b++, ab += CPU_Q8K_BYTES) {
                const uint8_t *ub = u + b * KU_BLOCK;
                __m512i is = _mm512_setzero_si512();
                for (int ch = 0; ch < 4; ch++) {
                    __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(ub + 64 * ch),
                                                    _mm512_loadu_si512(ab + 4 + 64 * ch));
                    is = _mm512_add_epi32(is, _mm512_mullo_epi32(d, _mm512_loadu_si512(ub + 256 + 64 * ch)));
                }
                int32_t isum = _mm512_reduce_add_epi32(is);
                int16_t bs[16];
                memcpy(bs, ab + 260, sizeof bs);
                float da = ldf(ab);
                const uint8_t *xb = w + (size_t)r * row_bytes + (size_t)b * bsz;
                if (q4) {
                    const int32_t *mn = extra + 8 * b;
                    int32_t msum = 0;
                    for (int j = 0; j < 8; j++) msum += mn[j] * (bs[2 * j] + bs[2 * j + 1]);
                    acc = fmaf((float)isum, f16_to_f32((uint16_t)(xb[0] | (xb[1] << 8))) * da, acc);
                    acc = fmaf(-(float)msum, f16_to_f32((uint16_t)(xb[2] | (xb[3] << 8))) * da, acc);
                } else {
                    const int32_t *sc = extra + 16 * b;
                    int32_t corr = 0;
                    for (int j = 0; j < 16; j++) corr += sc[j] * bs[j];
                    isum -= 32 * corr;
                    acc = fmaf((float)isum, f16_to_f32((uint16_t)(xb[208] | (xb[209] << 8))) * da, acc);
                }
            }
            y[c * ldy + r] = acc;
        }
    }
}

#define GEMM_MIN_COLS 4

static void mm_quant(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                     size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    for (int64_t r = 0; r < nr;) {
        int64_t n = nr - r < 16 ? nr - r : 16;
        const uint8_t *wr = w + (size_t)r * row_bytes;
        if (cpu_wt_is_k(wt)) {
            mm_qk(wt, wr, row_bytes, n, k, act, act_stride, ncols, y + r, ldy, scratch);
        } else if (ncols >= GEMM_MIN_COLS || wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1) {
            /* Q5_0, Q5_1 always through the packed form (the 5th bits are merged once per block) */
            gemm_q32(wt, wr, row_bytes, n, k, act, act_stride, ncols, y + r, ldy, scratch);
        } else {
            /* decode: the range is prefetched as it is read (first column only) */
            pf_state pf = {(const char *)wr, (const char *)(w + (size_t)nr * row_bytes)};
            for (int64_t c = 0; c < ncols; c++)
                gemv_q32(wt, wr, row_bytes, n, k, act + (size_t)c * act_stride, y + r + c * ldy, c == 0 ? &pf : NULL);
            r += n;
            /* keep prefetching across tiles of the range */
            while (r < nr) {
                n = nr - r < 16 ? nr - r : 16;
                wr = w + (size_t)r * row_bytes;
                for (int64_t c = 0; c < ncols; c++)
                    gemv_q32(wt, wr, row_bytes, n, k, act + (size_t)c * act_stride, y + r + c * ldy, c == 0 ? &pf : NULL);
                r += n;
            }
            break;
        }
        r += n;
    }
}

/* ---- float weights: canonical 16-lane dots, 4 x 6 register tiles ------------------------------- */

INLINE __m512 load_w16(uint32_t wt, const uint8_t *w, int64_t i, __mmask16 m) {
    switch (wt) {
    case SLM_DTYPE_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + 2 * i));
    case SLM_DTYPE_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, w + 2 * i)), 16));
    default: return _mm512_maskz_loadu_ps(m, w + 4 * i);
    }
}

/* 16 elements of k from i for an R x C tile (lanes past the mask read as zero). */
INLINE void mmf_step(const uint32_t wt, const uint8_t *w, size_t row_bytes, const int R, int64_t k, const float *x,
                     const int C, int64_t i, __mmask16 m, __m512 acc[4][6]) {
    __m512 wv[4], xv[6];
    for (int r = 0; r < R; r++) wv[r] = load_w16(wt, w + (size_t)r * row_bytes, i, m);
    for (int c = 0; c < C; c++) xv[c] = _mm512_maskz_loadu_ps(m, x + c * k + i);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(wv[r], xv[c], acc[r][c]);
}

/* R rows x C columns; pf (decode): the R consecutive rows are prefetched as one run, PF_LEAD ahead
 * of the fraction of them consumed (R * element bytes per element of k). wt, R and C are
 * constants at every call, so the loads fold and the accumulators stay in registers (a runtime
 * dtype switch in the loop made GCC spill all of them every step). */
INLINE void mmf_tile(const uint32_t wt, const uint8_t *w, size_t row_bytes, const int R, int64_t k, const float *x,
                     const int C, float *y, int64_t ldy, pf_state *pf) {
    __m512 acc[4][6];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++) acc[r][c] = _mm512_setzero_ps();
    const size_t run_step = (size_t)R * (row_bytes / (size_t)k) * 16;
    const char *run = (const char *)w + PF_LEAD;
    const int64_t k16 = k & ~(int64_t)15;
    for (int64_t i = 0; i < k16; i += 16, run += run_step) {
        if (pf) pf_advance(pf, run + run_step);
        mmf_step(wt, w, row_bytes, R, k, x, C, i, (__mmask16)0xFFFF, acc);
    }
    if (k16 < k) mmf_step(wt, w, row_bytes, R, k, x, C, k16, mask16(k - k16), acc);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) y[c * ldy + r] = hsum16(acc[r][c]);
}

/* Prefill: 4 rows x 6 columns with the 24 accumulators as named variables (GCC 12 stores an
 * array of them to the stack every step, which halved the FMA rate); the same FMA chains as
 * mmf_tile. One column live at a time: 24 accumulators + 4 weights + 1 column fit 32 registers. */
#define MMF46_ROW(r) __m512 a##r##0 = z, a##r##1 = z, a##r##2 = z, a##r##3 = z, a##r##4 = z, a##r##5 = z
#define MMF46_COL(c, m, i)                                                                                    \
    do {                                                                                                      \
        __m512 xv = _mm512_maskz_loadu_ps((m), x + (c) * k + (i));                                           \
        a0##c = _mm512_fmadd_ps(w0, xv, a0##c);                                                               \
        a1##c = _mm512_fmadd_ps(w1, xv, a1##c);                                                               \
        a2##c = _mm512_fmadd_ps(w2, xv, a2##c);                                                               \
        a3##c = _mm512_fmadd_ps(w3, xv, a3##c);                                                               \
    } while (0)
#define MMF46_STEP(i, m)                                                                                      \
    do {                                                                                                      \
        __m512 w0 = load_w16(wt, w, (i), (m)), w1 = load_w16(wt, w + rb, (i), (m));                          \
        __m512 w2 = load_w16(wt, w + 2 * rb, (i), (m)), w3 = load_w16(wt, w + 3 * rb, (i), (m));             \
        MMF46_COL(0, m, i);                                                                                   \
        MMF46_COL(1, m, i);                                                                                   \
        MMF46_COL(2, m, i);                                                                                   \
        MMF46_COL(3, m, i);                                                                                   \
        MMF46_COL(4, m, i);                                                                                   \
        MMF46_COL(5, m, i);                                                                                   \
    } while (0)
#define MMF46_OUT(r)                                                                                          \
    do {                                                                                                      \
        y[r] = hsum16(a##r##0), y[ldy + r] = hsum16(a##r##1), y[2 * ldy + r] = hsum16(a##r##2);               \
        y[3 * ldy + r] = hsum16(a##r##3), y[4 * ldy + r] = hsum16(a##r##4), y[5 * ldy + r] = hsum16(a##r##5); \
    } while (0)

INLINE void mmf_4x6_tile(const uint32_t wt, const uint8_t *w, size_t rb, int64_t k, const float *x, float *y,
                         int64_t ldy) {
    const __m512 z = _mm512_setzero_ps();
    MMF46_ROW(0);
    MMF46_ROW(1);
    MMF46_ROW(2);
    MMF46_ROW(3);
    const int64_t k16 = k & ~(int64_t)15;
    for (int64_t i = 0; i < k16; i += 16) MMF46_STEP(i, (__mmask16)0xFFFF);
    if (k16 < k) MMF46_STEP(k16, mask16(k - k16));
    MMF46_OUT(0);
    MMF46_OUT(1);
    MMF46_OUT(2);
    MMF46_OUT(3);
}

static void mmf_4x6(uint32_t wt, const uint8_t *w, size_t rb, int64_t k, const float *x, float *y, int64_t ldy) {
    if (wt == SLM_DTYPE_F16) mmf_4x6_tile(SLM_DTYPE_F16, w, rb, k, x, y, ldy);
    else if (wt == SLM_DTYPE_BF16) mmf_4x6_tile(SLM_DTYPE_BF16, w, rb, k, x, y, ldy);
    else mmf_4x6_tile(SLM_DTYPE_F32, w, rb, k, x, y, ldy);
}

/* The tile sizes, each with the weight type as a constant. */
#define MMF_COL_BLOCK_BYTES ((size_t)256 << 10)
CPU_MMF_SIZE(mmf_4x4, 4, 4)
CPU_MMF_SIZE(mmf_4x1, 4, 1)
CPU_MMF_SIZE(mmf_2x1, 2, 1)
CPU_MMF_SIZE(mmf_1x1, 1, 1)

static void mm_float(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const float *x,
                     int64_t ncols, float *y, int64_t ldy, void *scratch) {
    (void)scratch;
    int64_t r = 0;
    pf_state pf = {(const char *)w, (const char *)w + (size_t)nr * row_bytes};
    /* prefill: columns in blocks of ~MMF_COL_BLOCK_BYTES of activations, each block against all
     * rows of the range, so the activations come from L2 rather than once per 4 rows from L3 */
    int64_t c6 = ncols / 6 * 6, cb = (int64_t)(MMF_COL_BLOCK_BYTES / ((size_t)k * sizeof(float))) / 6 * 6;
    if (cb < 6) cb = 6;
    for (int64_t c0 = 0; c0 < c6; c0 += cb)
        for (int64_t r4 = 0; r4 + 4 <= nr; r4 += 4)
            for (int64_t c = c0; c < c0 + cb && c < c6; c += 6)
                mmf_4x6(wt, w + (size_t)r4 * row_bytes, row_bytes, k, x + c * k, y + c * ldy + r4, ldy);
    for (; r + 4 <= nr; r += 4) {
        const uint8_t *wr = w + (size_t)r * row_bytes;
        int64_t c = c6;
        for (; c + 4 <= ncols; c += 4) mmf_4x4(wt, wr, row_bytes, k, x + c * k, y + c * ldy + r, ldy, NULL);
        /* decode: the first column streams the rows (prefetched); later ones hit cache */
        if (ncols == 1) { /* decode: 2-row tiles stream faster than 4-row ones (+6% on F16) */
            mmf_2x1(wt, wr, row_bytes, k, x, y + r, ldy, &pf);
            mmf_2x1(wt, wr + 2 * row_bytes, row_bytes, k, x, y + r + 2, ldy, &pf);
            continue;
        }
        for (; c < ncols; c++) mmf_4x1(wt, wr, row_bytes, k, x + c * k, y + c * ldy + r, ldy, c == 0 && ncols < 4 ? &pf : NULL);
    }
    for (; r < nr; r++)
        for (int64_t c = 0; c < ncols; c++)
            mmf_1x1(wt, w + (size_t)r * row_bytes, row_bytes, k, x + c * k, y + c * ldy + r, ldy, NULL);
}

/* ---- attention: the G heads of one KV head, online softmax over blocks of 16 keys --------------- */

INLINE __m512 load_kv16(uint32_t t, const void *base, int64_t i, __mmask16 m) {
    if (t == SLM_DTYPE_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)base + i));
    return _mm512_maskz_loadu_ps(m, (const float *)base + i);
}

/* In-register transpose of a 16 x 16 f32 tile: r[i] lane j -> r[j] lane i. */
INLINE void transpose16(__m512 r[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        __m512d a0 = _mm512_castps_pd(a[4 * i]), a1 = _mm512_castps_pd(a[4 * i + 1]);
        __m512d a2 = _mm512_castps_pd(a[4 * i + 2]), a3 = _mm512_castps_pd(a[4 * i + 3]);
        b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    for (int m = 0; m < 4; m++) {
        __m512 c0 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0x44), c1 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0xEE);
        __m512 d0 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0x44), d1 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0xEE);
        r[m] = _mm512_shuffle_f32x4(c0, d0, 0x88);
        r[4 + m] = _mm512_shuffle_f32x4(c0, d0, 0xDD);
        r[8 + m] = _mm512_shuffle_f32x4(c1, d1, 0x88);
        r[12 + m] = _mm512_shuffle_f32x4(c1, d1, 0xDD);
    }
}

/* Scores of up to 4 rows against the transposed key block Kt (hd, 16): canonical even/odd chains. */
INLINE void attn_scores4(const float *const qr[4], int nr, const float *Kt, int64_t hd, __m512 s[4]) {
    if (nr == 4) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        const float *q0 = qr[0], *q1 = qr[1], *q2 = qr[2], *q3 = qr[3];
        int64_t i = 0;
        for (; i + 2 <= hd; i += 2) {
            __m512 k0 = _mm512_load_ps(Kt + 16 * i), k1 = _mm512_load_ps(Kt + 16 * i + 16);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[i]), k0, a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(q1[i]), k0, a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(q2[i]), k0, a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(q3[i]), k0, a3);
            b0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[i + 1]), k1, b0);
            b1 = _mm512_fmadd_ps(_mm512_set1_ps(q1[i + 1]), k1, b1);
            b2 = _mm512_fmadd_ps(_mm512_set1_ps(q2[i + 1]), k1, b2);
            b3 = _mm512_fmadd_ps(_mm512_set1_ps(q3[i + 1]), k1, b3);
        }
        if (i < hd) {
            __m512 k0 = _mm512_load_ps(Kt + 16 * i);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[i]), k0, a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(q1[i]), k0, a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(q2[i]), k0, a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(q3[i]), k0, a3);
        }
        s[0] = _mm512_add_ps(a0, b0);
        s[1] = _mm512_add_ps(a1, b1);
        s[2] = _mm512_add_ps(a2, b2);
        s[3] = _mm512_add_ps(a3, b3);
        return;
    }
    for (int r = 0; r < nr; r++) {
        __m512 a = _mm512_setzero_ps(), b = a;
        int64_t i = 0;
        for (; i + 2 <= hd; i += 2) {
            a = _mm512_fmadd_ps(_mm512_set1_ps(qr[r][i]), _mm512_load_ps(Kt + 16 * i), a);
            b = _mm512_fmadd_ps(_mm512_set1_ps(qr[r][i + 1]), _mm512_load_ps(Kt + 16 * i + 16), b);
        }
        if (i < hd) a = _mm512_fmadd_ps(_mm512_set1_ps(qr[r][i]), _mm512_load_ps(Kt + 16 * i), a);
        s[r] = _mm512_add_ps(a, b);
    }
}

/* The online-softmax step of one row over the lanes km of its scaled scores s: updates *m and *l,
 * writes p (16, 64-byte aligned, lanes outside km exactly 0) and returns the correction. The max
 * skips NaN scores as fmaxf does (VMAXPS returns its second operand, here never NaN, when one is
 * NaN); a max of NaN-free lanes is exact in any order. */
INLINE float softmax_row16(__m512 s, __mmask16 km, float *m, float *l, float *p) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    float mb = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_mask_blend_ps(km, ninf, s), ninf));
    float mn = mb > *m ? mb : *m;
    float corr = mn == *m ? 1.0f : _mm512_cvtss_f32(exp16(_mm512_set1_ps(*m - mn)));
    __m512 pv = _mm512_maskz_mov_ps(km, exp16(_mm512_sub_ps(s, _mm512_set1_ps(mn))));
    *l = *l * corr + hsum16(pv);
    *m = mn;
    _mm512_store_ps(p, pv);
    return corr;
}

/* cpu.h attn_fold_rows: the maxima and both factors of 16 rows at a time on 16 lanes (exp16 as
 * cpu_exp; the selects as cpu_attn_fold's conditions, NaN comparing false alike), then each row's
 * acc and l 16 floats at a time as two products and their sum: cpu_attn_fold's bits. The decode
 * split folds every chunk's partials on one thread after the others finish; cpu_attn_fold's
 * exponentials one row at a time took 24 us per SmolLM2 layer at depth 8192, 6% of decode. */
static void attn_fold_rows(float *tot, const float *part, int64_t R, int64_t hdv) {
    const int64_t pf = cpu_attn_part_floats(hdv);
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t r0 = 0; r0 < R; r0 += 16) {
        int n = R - r0 < 16 ? (int)(R - r0) : 16;
        float *t0 = tot + r0 * pf;
        const float *p0 = part + r0 * pf;
        float MT[16], MP[16];
        cpu_attn_fold_maxima(MT, MP, t0, p0, n, pf, hdv);
        __m512 mt = _mm512_mask_loadu_ps(one, mask16(n), MT), mp = _mm512_mask_loadu_ps(one, mask16(n), MP);
        __m512 mn = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mp, mt, _CMP_GT_OQ), mt, mp);
        __m512 a = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn, mt, _CMP_EQ_OQ), exp16(_mm512_sub_ps(mt, mn)), one);
        __m512 b = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn, mp, _CMP_EQ_OQ), exp16(_mm512_sub_ps(mp, mn)), one);
        float A[16], B[16], MN[16];
        _mm512_storeu_ps(A, a);
        _mm512_storeu_ps(B, b);
        _mm512_storeu_ps(MN, mn);
        for (int x = 0; x < n; x++) {
            float *t = t0 + x * pf;
            const float *p = p0 + x * pf;
            if (cpu_attn_fold_trivial(t, p, hdv)) continue;
            __m512 av = _mm512_set1_ps(A[x]), bv = _mm512_set1_ps(B[x]);
            for (int64_t i = 0; i < hdv + 2; i += 16) { /* acc, then m (replaced below) and l */
                __mmask16 m = mask16(hdv + 2 - i);
                __m512 y = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, t + i), av),
                                         _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + i), bv));
                _mm512_mask_storeu_ps(t + i, m, y);
            }
            t[hdv] = MN[x];
        }
    }
}

/* acc_r = acc_r * c_r + sum_{jlo <= j < nj} p_r[j] V[j] for two rows sharing jlo and nj (a0 may
 * equal a1), 64 floats (4 vectors) of the accumulators at a time. */
INLINE void attn_pv2(float *a0, float *a1, const float *p0, const float *p1, float c0s, float c1s, const float *Vf,
                     int64_t hdvp, int jlo, int nj) {
    __m512 c0 = _mm512_set1_ps(c0s), c1 = _mm512_set1_ps(c1s);
    int64_t i0 = 0;
    for (; i0 + 64 <= hdvp; i0 += 64) {
        __m512 u0 = _mm512_mul_ps(_mm512_load_ps(a0 + i0), c0), u1 = _mm512_mul_ps(_mm512_load_ps(a0 + i0 + 16), c0);
        __m512 u2 = _mm512_mul_ps(_mm512_load_ps(a0 + i0 + 32), c0), u3 = _mm512_mul_ps(_mm512_load_ps(a0 + i0 + 48), c0);
        __m512 w0 = _mm512_mul_ps(_mm512_load_ps(a1 + i0), c1), w1 = _mm512_mul_ps(_mm512_load_ps(a1 + i0 + 16), c1);
        __m512 w2 = _mm512_mul_ps(_mm512_load_ps(a1 + i0 + 32), c1), w3 = _mm512_mul_ps(_mm512_load_ps(a1 + i0 + 48), c1);
        const float *vj = Vf + jlo * hdvp + i0;
        for (int j = jlo; j < nj; j++, vj += hdvp) {
            __m512 q0 = _mm512_set1_ps(p0[j]), q1 = _mm512_set1_ps(p1[j]);
            __m512 v0 = _mm512_load_ps(vj), v1 = _mm512_load_ps(vj + 16), v2 = _mm512_load_ps(vj + 32),
                   v3 = _mm512_load_ps(vj + 48);
            u0 = _mm512_fmadd_ps(q0, v0, u0);
            u1 = _mm512_fmadd_ps(q0, v1, u1);
            u2 = _mm512_fmadd_ps(q0, v2, u2);
            u3 = _mm512_fmadd_ps(q0, v3, u3);
            w0 = _mm512_fmadd_ps(q1, v0, w0);
            w1 = _mm512_fmadd_ps(q1, v1, w1);
            w2 = _mm512_fmadd_ps(q1, v2, w2);
            w3 = _mm512_fmadd_ps(q1, v3, w3);
        }
        _mm512_store_ps(a1 + i0, w0);
        _mm512_store_ps(a1 + i0 + 16, w1);
        _mm512_store_ps(a1 + i0 + 32, w2);
        _mm512_store_ps(a1 + i0 + 48, w3);
        _mm512_store_ps(a0 + i0, u0);
        _mm512_store_ps(a0 + i0 + 16, u1);
        _mm512_store_ps(a0 + i0 + 32, u2);
        _mm512_store_ps(a0 + i0 + 48, u3);
    }
    for (; i0 < hdvp; i0 += 16) {
        __m512 u = _mm512_mul_ps(_mm512_load_ps(a0 + i0), c0), w = _mm512_mul_ps(_mm512_load_ps(a1 + i0), c1);
        for (int j = jlo; j < nj; j++) {
            __m512 vv = _mm512_load_ps(Vf + j * hdvp + i0);
            u = _mm512_fmadd_ps(_mm512_set1_ps(p0[j]), vv, u);
            w = _mm512_fmadd_ps(_mm512_set1_ps(p1[j]), vv, w);
        }
        _mm512_store_ps(a1 + i0, w);
        _mm512_store_ps(a0 + i0, u);
    }
}

/* ---- attention's in-place path for f16 K/V: the 16 keys of a block in the lanes of a register ----
 * The AVX2 tier's in-place path (kern_avx2.c direct_block: K and V read where they lie, no
 * transposed copy of the block) with a whole block of 16 keys in one register: K's rows are
 * transposed as 16-bit words and then converted, and the scores, the softmax and the V products
 * run on 16 lanes with the same operations per lane as the AVX2 and generic tiers (the same
 * bits). The AVX2 path issues each broadcast, shuffle and conversion once per 8 keys. One thread,
 * ns per key and KV head (bench_attn_decode, Zen 4, against the AVX2 path this tier used before):
 * Gemma 3's global layer (-p 8192 -G 4 -k 1 -d 256 -l 10) 81-85 -> 63-65; LFM2's heads together
 * (-a -p 4096 -G 4 -k 8 -d 64 -l 6) 25.7 -> 22.2; SmolLM2's (-a -p 1024 -G 3 -k 3 -d 64 -l 4) 18.2
 * -> 17.9, one of its heads alone 22.8 -> 20.4; verify rows, which took the transposed copies here:
 * Gemma 3 T = 2 215 -> 116-125, Qwen3.5's shape T = 4 (-T 4 -G 4 -k 2 -d 256) 373 -> 228-231,
 * T = 16 (64 rows) 899 -> 837. */

/* rows (all heads' T * G) up to which the in-place path runs, as the AVX2 tier's ATTN_DIRECT_ROWS;
 * the transposed copies (attn_chunk) above it */
#define ATTN_DIRECT16_ROWS 64

/* Dims [i, i + 16) of the 16 keys at kr + j * kstride (f16; keys from nk on read as 0, their rows
 * untouched) in f32: T[d] lane j = dim i + d of key j. Two unpack stages transpose the words
 * within each 128-bit lane, then a qword permute joins keys 0-7 and 8-15 of one dim. */
INLINE void k_cols16(const uint16_t *kr, int64_t kstride, int nk, int64_t i, __m512 T[16]) {
    __m512i z[8], a[8], b[8];
    for (int j = 0; j < 8; j++) { /* 128-bit lanes: key j dims 0-7, 8-15; key j + 8 dims 0-7, 8-15 */
        __m256i lo = j < nk ? _mm256_loadu_si256((const __m256i *)(kr + j * kstride + i)) : _mm256_setzero_si256();
        __m256i hi = j + 8 < nk ? _mm256_loadu_si256((const __m256i *)(kr + (j + 8) * kstride + i))
                                : _mm256_setzero_si256();
        z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    for (int p = 0; p < 4; p++) { /* keys 2p, 2p + 1 interleaved: dims 0-3 (a[2p]), 4-7 (a[2p + 1]) */
        a[2 * p] = _mm512_unpacklo_epi16(z[2 * p], z[2 * p + 1]);
        a[2 * p + 1] = _mm512_unpackhi_epi16(z[2 * p], z[2 * p + 1]);
    }
    for (int p = 0; p < 2; p++) { /* keys 4p .. 4p + 3: dims (0, 1), (2, 3), (4, 5), (6, 7) */
        b[4 * p] = _mm512_unpacklo_epi32(a[4 * p], a[4 * p + 2]);
        b[4 * p + 1] = _mm512_unpackhi_epi32(a[4 * p], a[4 * p + 2]);
        b[4 * p + 2] = _mm512_unpacklo_epi32(a[4 * p + 1], a[4 * p + 3]);
        b[4 * p + 3] = _mm512_unpackhi_epi32(a[4 * p + 1], a[4 * p + 3]);
    }
    const __m512i qeven = _mm512_setr_epi64(0, 8, 4, 12, 2, 10, 6, 14);
    const __m512i qodd = _mm512_setr_epi64(1, 9, 5, 13, 3, 11, 7, 15);
    for (int m = 0; m < 4; m++)
        for (int h = 0; h < 2; h++) {
            /* qword h of each 128-bit lane of b[m] (keys 0-7) and b[4 + m] (keys 8-15), lane by
             * lane: dim d = 2m + h's 16 keys, then dim d + 8's. One two-source permute where an
             * unpack and a lane shuffle took two (SmolLM2's heads together 18.1 -> 17.7 ns per key,
             * bench_attn_decode -a -p 1024 -G 3 -k 3 -d 64 -l 4, Zen 4) */
            __m512i c = _mm512_permutex2var_epi64(b[m], h ? qodd : qeven, b[4 + m]);
            T[2 * m + h] = _mm512_cvtph_ps(_mm512_castsi512_si256(c));
            T[2 * m + h + 8] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(c, 1));
        }
}

/* Scores (before the scale) of NR (1..4) query rows qr[] against the 16 keys at kr + j * kstride
 * (keys from nk on 0): even dims into c0, odd into c1, each in order, s = c0 + c1, as
 * attn_scores4. Each 16 dims step the K prefetch cursor 8 lines (a head's 16 rows of hd f16 are
 * hd / 2 lines). */
INLINE void qk_direct16(const int NR, const float *const *qr, const uint16_t *kr, int64_t kstride, int nk,
                        int64_t hd, __m512 s[4], attn_pf *pf) {
    __m512 c0[4], c1[4];
    for (int n = 0; n < NR; n++) c0[n] = c1[n] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= hd; i += 16) {
        __m512 T[16];
        k_cols16(kr, kstride, nk, i, T);
        for (int x = 0; x < 8; x++) attn_pf_step(pf);
        for (int d = 0; d < 16; d += 2)
            for (int n = 0; n < NR; n++) {
                c0[n] = _mm512_fmadd_ps(_mm512_set1_ps(qr[n][i + d]), T[d], c0[n]);
                c1[n] = _mm512_fmadd_ps(_mm512_set1_ps(qr[n][i + d + 1]), T[d + 1], c1[n]);
            }
    }
    for (; i < hd; i++) { /* the dims past the last 16, one at a time into the chain of their parity */
        float kj[16];
        for (int j = 0; j < 16; j++) kj[j] = j < nk ? _cvtsh_ss(kr[j * kstride + i]) : 0.0f;
        __m512 kv = _mm512_loadu_ps(kj);
        for (int n = 0; n < NR; n++) {
            if (i & 1) c1[n] = _mm512_fmadd_ps(_mm512_set1_ps(qr[n][i]), kv, c1[n]);
            else c0[n] = _mm512_fmadd_ps(_mm512_set1_ps(qr[n][i]), kv, c0[n]);
        }
    }
    for (int n = 0; n < NR; n++) s[n] = _mm512_add_ps(c0[n], c1[n]);
}

/* acc_n = acc_n * C[n] + sum_{jlo <= j < nj} P[16 n + j] V[j] for NR (1..4) rows of acc (hdvp
 * apart), V's f16 rows at vr + j * vstride: CH chunks of 16 dims from dim i per pass (NR * CH
 * chains in flight), lanes past hdv (mask mlast on the last chunk) read as 0. Each key steps the
 * V prefetch cursor 2 lines. */
INLINE void pv_pass16(const int NR, const int CH, float *acc, int64_t hdvp, const float *P, const float *C,
                      const uint16_t *vr, int64_t vstride, int64_t i, __mmask16 mlast, int jlo, int nj, attn_pf *pf) {
    __m512 a[4][8];
    for (int n = 0; n < NR; n++)
        for (int c = 0; c < CH; c++)
            a[n][c] = _mm512_mul_ps(_mm512_load_ps(acc + n * hdvp + i + 16 * c), _mm512_set1_ps(C[n]));
    for (int j = jlo; j < nj; j++) {
        attn_pf_step(pf);
        attn_pf_step(pf);
        __m512 p[4];
        for (int n = 0; n < NR; n++) p[n] = _mm512_set1_ps(P[16 * n + j]);
        for (int c = 0; c < CH; c++) {
            const uint16_t *vj = vr + j * vstride + i + 16 * c;
            __m512 vv = _mm512_cvtph_ps(c == CH - 1 ? _mm256_maskz_loadu_epi16(mlast, vj)
                                                    : _mm256_loadu_si256((const __m256i *)vj));
            for (int n = 0; n < NR; n++) a[n][c] = _mm512_fmadd_ps(p[n], vv, a[n][c]);
        }
    }
    for (int n = 0; n < NR; n++)
        for (int c = 0; c < CH; c++) _mm512_store_ps(acc + n * hdvp + i + 16 * c, a[n][c]);
}

INLINE void pv_direct16(const int NR, float *acc, int64_t hdvp, const float *P, const float *C, const uint16_t *vr,
                        int64_t vstride, int64_t hdv, int jlo, int nj, attn_pf *pf) {
    const int CH = NR == 1 ? 8 : 4;
    int64_t i = 0;
    for (; i + 16 * CH <= hdv; i += 16 * CH) pv_pass16(NR, CH, acc, hdvp, P, C, vr, vstride, i, 0xFFFF, jlo, nj, pf);
    for (; i < hdv; i += 16) pv_pass16(NR, 1, acc, hdvp, P, C, vr, vstride, i, mask16(hdv - i), jlo, nj, pf);
}

/* One block of keys (j0, nbk of them), its rows already read: the scores, softmax and V products
 * of rows [r_begin, r_end) (those that meet the block) as kern_avx2.c's direct_block, row r's
 * query at qrow[r], its token tok[r], K at kblk and V at vblk (rows kstride / vstride apart). */
static void direct_block16(const float *const *qrow, const int64_t *tok, const uint16_t *kblk, const uint16_t *vblk,
                           int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t hdvp, int64_t nk0,
                           int64_t window, int64_t j0, int nbk, int64_t r_begin, int64_t r_end, __m512 vscale,
                           float *acc, float *P, float *M, float *L, float *C, attn_pf *kpf, attn_pf *vpf) {
    int nj[ATTN_DIRECT16_ROWS], jlo[ATTN_DIRECT16_ROWS]; /* row r's keys in the block: [jlo, nj) */
    for (int64_t r = r_begin; r < r_end; r++) {
        int64_t nk = nk0 + tok[r], lo = window && nk - window > 0 ? nk - window : 0;
        nj[r] = nk - j0 < 16 ? (int)(nk - j0) : 16, jlo[r] = lo > j0 ? (int)(lo - j0) : 0;
    }
    for (int64_t r0 = r_begin; r0 < r_end; r0 += 4) { /* scores 4 rows at a time */
        int nr = r_end - r0 < 4 ? (int)(r_end - r0) : 4;
        const float *const *qr = qrow + r0;
        __m512 sv[4];
        switch (nr) {
        case 4: qk_direct16(4, qr, kblk, kstride, nbk, hd, sv, kpf); break;
        case 3: qk_direct16(3, qr, kblk, kstride, nbk, hd, sv, kpf); break;
        case 2: qk_direct16(2, qr, kblk, kstride, nbk, hd, sv, kpf); break;
        default: qk_direct16(1, qr, kblk, kstride, nbk, hd, sv, kpf); break;
        }
        for (int x = 0; x < nr; x++) {
            int64_t r = r0 + x;
            __mmask16 km = (__mmask16)(mask16(nj[r]) & ~mask16(jlo[r]));
            C[r] = softmax_row16(_mm512_mul_ps(sv[x], vscale), km, &M[r], &L[r], P + 16 * r);
        }
    }
    for (int64_t r = r_begin; r < r_end;) { /* the rows of one token (same keys) 4 at a time */
        int n = 1;
        while (n < 4 && r + n < r_end && tok[r + n] == tok[r]) n++;
        float *a = acc + r * hdvp;
        const float *p = P + 16 * r, *c = C + r;
        if (n == 4) pv_direct16(4, a, hdvp, p, c, vblk, vstride, hdv, jlo[r], nj[r], vpf);
        else if (n == 3) pv_direct16(3, a, hdvp, p, c, vblk, vstride, hdv, jlo[r], nj[r], vpf);
        else if (n == 2) pv_direct16(2, a, hdvp, p, c, vblk, vstride, hdv, jlo[r], nj[r], vpf);
        else pv_direct16(1, a, hdvp, p, c, vblk, vstride, hdv, jlo[r], nj[r], vpf);
        r += n;
    }
}

/* cpu.h attn_chunk (NH = 1) and attn_chunk_heads on the in-place path, f16 K/V, NH * T * G rows
 * up to ATTN_DIRECT16_ROWS: row r = (KV head g, token t, query head h of g), head g's columns at
 * g * hd (K) and g * hdv (V) of each row. Each block's rows are read once in address order
 * (attn_read_rows; one KV head of several alone: its columns copied to the scratch, as the AVX2
 * path does), the block 4 ahead prefetched by the products' loops, then each head's products. */
static void attn_direct16(const float *q, int64_t qts, int64_t T, int64_t G, int64_t NH, const uint16_t *k,
                          const uint16_t *v, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t nk0,
                          int64_t window, int64_t ring, float scale, int64_t c0, int64_t pf_end, float *part,
                          void *scratch) {
    int64_t TG = T * G, R = NH * TG, hdp = (hd + 15) & ~(int64_t)15, hdvp = (hdv + 15) & ~(int64_t)15;
    int64_t pfl = cpu_attn_part_floats(hdv);
    uint16_t *kcopy = scratch, *vcopy = (uint16_t *)((float *)scratch + 16 * hdp); /* attn_chunk's layout */
    float *acc = (float *)scratch + 16 * hdp + 16 * hdvp, *P = acc + R * hdvp;
    float *M = P + 16 * R, *L = M + R, *C = L + R;
    const float *qrow[ATTN_DIRECT16_ROWS];
    int64_t tok[ATTN_DIRECT16_ROWS];
    for (int64_t r = 0; r < R; r++) {
        int64_t g = r / TG, t = r % TG / G, h = r % G;
        qrow[r] = q + t * qts + (g * G + h) * hd, tok[r] = t;
        for (int64_t i = 0; i < hdvp; i += 16) _mm512_store_ps(acc + r * hdvp + i, _mm512_setzero_ps());
        M[r] = -INFINITY;
        L[r] = 0.0f;
    }
    const __m512 vscale = _mm512_set1_ps(scale);
    bool copy = NH == 1 && (kstride != hd || vstride != hdv);
    int64_t nk_max = nk0 + T - 1, lo_first = window && nk0 - window > 0 ? nk0 - window : 0;
    int64_t jb = lo_first & ~(int64_t)15, je = nk_max < c0 + CPU_ATTN_CHUNK ? nk_max : c0 + CPU_ATTN_CHUNK;
    for (int64_t j0 = jb > c0 ? jb : c0; j0 < je; j0 += 16) {
        int nbk = nk_max - j0 < 16 ? (int)(nk_max - j0) : 16;
        int64_t row0 = ring ? j0 % ring : j0; /* the block's 16 rows are contiguous */
        const uint16_t *kblk = k + row0 * kstride, *vblk = v + row0 * vstride;
        /* tokens [t_first, t_end) have keys in this block: hi_t >= j0 and lo_t <= j0 + 15 */
        int64_t t_first = j0 - nk0 + 1 > 0 ? j0 - nk0 + 1 : 0;
        int64_t t_end = window && j0 + 16 + window - nk0 < T ? j0 + 16 + window - nk0 : T;
        attn_pf kpf, vpf;
        attn_pf_block(&kpf, &vpf, k, v, kstride, vstride, 2, pf_end, ring, j0, NH * hd, NH * hdv);
        int64_t ks = kstride, vs = vstride;
        if (copy) { /* this head's columns of each row, copied together (nbk x hd, nbk x hdv) */
            for (int j = 0; j < nbk; j++) memcpy(kcopy + j * hd, kblk + j * kstride, sizeof(uint16_t) * (size_t)hd);
            for (int j = 0; j < nbk; j++) memcpy(vcopy + j * hdv, vblk + j * vstride, sizeof(uint16_t) * (size_t)hdv);
            kblk = kcopy, vblk = vcopy, ks = hd, vs = hdv;
        } else {
            attn_read_rows((const uint8_t *)kblk, nbk, 2 * (size_t)(NH * hd), 2 * (size_t)kstride);
            attn_read_rows((const uint8_t *)vblk, nbk, 2 * (size_t)(NH * hdv), 2 * (size_t)vstride);
        }
        for (int64_t g = 0; g < NH; g++)
            direct_block16(qrow, tok, kblk + g * hd, vblk + g * hdv, ks, vs, hd, hdv, hdvp, nk0, window, j0, nbk,
                           g * TG + t_first * G, g * TG + t_end * G, vscale, acc, P, M, L, C, &kpf, &vpf);
        attn_pf_rest(&kpf);
        attn_pf_rest(&vpf);
    }
    for (int64_t g = 0; g < NH; g++)
        cpu_attn_write_parts(TG, hdv, hdvp, acc + g * TG * hdvp, M + g * TG, L + g * TG, part + g * TG * pfl);
}

/* f32 K/V: rows (T * G) up to which the AVX2 tier's attention runs instead: it reads K and V
 * where they lie, where this one transposes and converts every block into the scratch, which pays
 * only over more rows (bench_attn_decode -i avx2 against -i avx512 at 2000 keys: T = 1, G = 1..4,
 * the AVX2 kernel 1.2-2x faster; 6-8 rows even; from 12 rows the AVX-512 one faster). f16 K/V take
 * attn_direct16 up to ATTN_DIRECT16_ROWS. The tiers give the same bits, and the AVX-512 tier needs
 * everything the AVX2 one does. */
#define ATTN_AVX2_ROWS 4

/* Whether K/V of type kvt take attn_direct16 (up to its rows): f16, except where the AVX2 kernel
 * serves (small: up to ATTN_AVX2_ROWS rows per head) on a core that closes a vector port while
 * 512-bit instructions run (cpu_avx512_keeps_ports false: Intel). There an AVX-512 in-place kernel
 * with K transposed as f32 lost to the AVX2 one (bench/README.md, bench_attn_decode, Intel Xeon
 * 2026-12-02); this one is unmeasured there. */
static bool attn_direct16_for(uint32_t kvt, bool small) {
    return kvt == SLM_DTYPE_F16 && (!small || cpu_avx512_keeps_ports());
}

static void attn_chunk(const float *q, int64_t qts, int64_t T, int64_t G, const void *k, const void *v, uint32_t kvt,
                       int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t nk0, int64_t window,
                       int64_t ring, float scale, int64_t c0, int64_t pf_end, float *part, void *scratch) {
    const cpu_isa *avx2 = cpu_isa_avx2();
    bool small = T * G <= ATTN_AVX2_ROWS && avx2, direct16 = attn_direct16_for(kvt, small);
    if (direct16 && T * G <= ATTN_DIRECT16_ROWS) {
        attn_direct16(q, qts, T, G, 1, k, v, kstride, vstride, hd, hdv, nk0, window, ring, scale, c0, pf_end, part,
                      scratch);
        return;
    }
    if (small) {
        avx2->attn_chunk(q, qts, T, G, k, v, kvt, kstride, vstride, hd, hdv, nk0, window, ring, scale, c0, pf_end, part,
                         scratch);
        return;
    }
    int64_t R = T * G, hdp = (hd + 15) & ~(int64_t)15, hdvp = (hdv + 15) & ~(int64_t)15;
    float *Kt = scratch, *Vf = Kt + 16 * hdp, *acc = Vf + 16 * hdvp, *P = acc + R * hdvp;
    float *M = P + 16 * R, *L = M + R, *C = L + R;
    for (int64_t r = 0; r < R; r++) {
        for (int64_t i = 0; i < hdvp; i += 16) _mm512_store_ps(acc + r * hdvp + i, _mm512_setzero_ps());
        M[r] = -INFINITY;
        L[r] = 0.0f;
    }
    const __m512 vscale = _mm512_set1_ps(scale);
    /* row of token t: keys [lo_t, hi_t], hi_t = nk0 - 1 + t, lo_t = window ? max(0, hi_t - window + 1) : 0
     * (both ascending in t); each block of 16 is loaded once for the tokens whose keys meet it */
    int64_t nk_max = nk0 + T - 1, lo_first = window && nk0 - window > 0 ? nk0 - window : 0;
    int64_t jb = lo_first & ~(int64_t)15, je = nk_max < c0 + CPU_ATTN_CHUNK ? nk_max : c0 + CPU_ATTN_CHUNK;
    for (int64_t j0 = jb > c0 ? jb : c0; j0 < je; j0 += 16) {
        int nbk = nk_max - j0 < 16 ? (int)(nk_max - j0) : 16;
        int64_t row0 = ring ? j0 % ring : j0; /* the block's 16 rows are contiguous */
        size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4;
        const void *kblk = (const uint8_t *)k + (size_t)(row0 * kstride) * el;
        const void *vblk = (const uint8_t *)v + (size_t)(row0 * vstride) * el;
        attn_prefetch_ahead(k, v, kstride, vstride, el, pf_end, ring, j0, hd, hdv);
        /* K block -> Kt (hd, 16) f32; V block -> Vf (16, hdvp) f32; keys past the block's end are 0 */
        for (int64_t i0 = 0; i0 < hd; i0 += 16) {
            __m512 t[16];
            __mmask16 mi = mask16(hd - i0);
            for (int j = 0; j < 16; j++)
                t[j] = j < nbk ? load_kv16(kvt, kblk, j * kstride + i0, mi) : _mm512_setzero_ps();
            transpose16(t);
            if (hd - i0 >= 16) /* a constant count: stores from registers, not a copy through the stack */
                for (int d = 0; d < 16; d++) _mm512_store_ps(Kt + 16 * (i0 + d), t[d]);
            else
                for (int64_t d = 0; d < hd - i0; d++) _mm512_store_ps(Kt + 16 * (i0 + d), t[d]);
        }
        for (int j = 0; j < nbk; j++)
            for (int64_t i = 0; i < hdvp; i += 16)
                _mm512_store_ps(Vf + j * hdvp + i, load_kv16(kvt, vblk, j * vstride + i, mask16(hdv - i)));
        /* scores and online-softmax update, 4 rows at a time; tokens [t_first, t_end) have keys in
         * this block (hi_t >= j0, lo_t <= j0 + 15) */
        int64_t t_first = j0 - nk0 + 1 > 0 ? j0 - nk0 + 1 : 0;
        int64_t t_end = window && j0 + 16 + window - nk0 < T ? j0 + 16 + window - nk0 : T, r_end = t_end * G;
        for (int64_t r0 = t_first * G; r0 < r_end; r0 += 4) {
            int nr = r_end - r0 < 4 ? (int)(r_end - r0) : 4;
            const float *qr[4];
            for (int x = 0; x < nr; x++) {
                int64_t r = r0 + x;
                qr[x] = q + (r / G) * qts + (r % G) * hd;
            }
            __m512 sv[4];
            attn_scores4(qr, nr, Kt, hd, sv);
            for (int x = 0; x < nr; x++) {
                int64_t r = r0 + x, nk = nk0 + r / G, lo = window && nk - window > 0 ? nk - window : 0;
                __mmask16 km = (__mmask16)(mask16(nk - j0) & ~mask16(lo - j0));
                C[r] = softmax_row16(_mm512_mul_ps(sv[x], vscale), km, &M[r], &L[r], P + 16 * r);
            }
        }
        /* accumulators: acc = acc * corr + sum_j p_j v_j over the row's keys of the block; rows of
         * one token (same keys) in pairs so that 8 FMA chains are in flight */
        for (int64_t r = t_first * G; r < r_end;) {
            int64_t nk = nk0 + r / G, lo = window && nk - window > 0 ? nk - window : 0;
            int nj = nk - j0 < 16 ? (int)(nk - j0) : 16, jlo = lo > j0 ? (int)(lo - j0) : 0;
            int64_t r1 = r + 1 < r_end && (r + 1) / G == r / G ? r + 1 : r;
            attn_pv2(acc + r * hdvp, acc + r1 * hdvp, P + 16 * r, P + 16 * r1, C[r], C[r1], Vf, hdvp, jlo, nj);
            r = r1 + 1;
        }
    }
    cpu_attn_write_parts(R, hdv, hdvp, acc, M, L, part);
}

/* cpu.h attn_chunk_heads: up to ATTN_DIRECT16_ROWS rows in all, attn_direct16 where
 * attn_direct16_for says; else up to ATTN_AVX2_ROWS rows per head, the AVX2 tier's, as attn_chunk;
 * else attn_chunk per head. */
static void attn_chunk_heads(const float *q, int64_t qts, int64_t T, int64_t G, int64_t NH, const void *k,
                             const void *v, uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv,
                             int64_t nk0, int64_t window, int64_t ring, float scale, int64_t c0, int64_t pf_end,
                             float *part, void *scratch) {
    const cpu_isa *avx2 = cpu_isa_avx2();
    bool small = T * G <= ATTN_AVX2_ROWS && avx2, direct16 = attn_direct16_for(kvt, small);
    if (direct16 && NH * T * G <= ATTN_DIRECT16_ROWS) {
        attn_direct16(q, qts, T, G, NH, k, v, kstride, vstride, hd, hdv, nk0, window, ring, scale, c0, pf_end, part,
                      scratch);
        return;
    }
    if (small && !direct16) {
        avx2->attn_chunk_heads(q, qts, T, G, NH, k, v, kvt, kstride, vstride, hd, hdv, nk0, window, ring, scale, c0,
                               pf_end, part, scratch);
        return;
    }
    size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4;
    for (int64_t g = 0; g < NH; g++)
        attn_chunk(q + g * G * hd, qts, T, G, (const uint8_t *)k + (size_t)(g * hd) * el,
                   (const uint8_t *)v + (size_t)(g * hdv) * el, kvt, kstride, vstride, hd, hdv, nk0, window, ring,
                   scale, c0, pf_end, part + g * T * G * cpu_attn_part_floats(hdv), scratch);
}

static void cvt_f16(uint16_t *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT));
    }
}

/* ---- DeltaNet head (recurrent), same arithmetic as kern_generic.c ------------------------------- */

/* Decode (one token) with whole state rows in registers (dv == 16 * NV): the first pass streams
 * S_in once and forms u = (decay S_in)^T k without storing; the second re-reads S_in (now in L2),
 * recomputes the decayed row with the same rounding, applies the delta rule and writes S with
 * non-temporal stores when S is 64-byte aligned. The new state is not read again before the next
 * token, so caching it would only displace weights and cost a read-for-ownership per line. The
 * second pass, which reads only L2, prefetches S_in_next (the next head's state) into L2. */
INLINE void deltanet_decode_rows(float *S, const float *S_in, const float *q, const float *k, const float *v,
                                 float decay_s, float beta_s, float *o, int64_t dk, const int NV,
                                 const float *S_in_next) {
    const bool nt = ((uintptr_t)S & 63) == 0;
    const int64_t dv = 16 * NV;
    const __m512 decay = _mm512_set1_ps(decay_s), bb = _mm512_set1_ps(beta_s);
    __m512 u[8], acc[8];
    for (int j = 0; j < NV; j++) u[j] = acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < dk; i++) {
        const float *in = S_in + i * dv;
        __m512 ki = _mm512_set1_ps(k[i]);
        for (int j = 0; j < NV; j++) u[j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(in + 16 * j), decay), ki, u[j]);
    }
    for (int j = 0; j < NV; j++) u[j] = _mm512_mul_ps(bb, _mm512_sub_ps(_mm512_loadu_ps(v + 16 * j), u[j]));
    for (int64_t i = 0; i < dk; i++) {
        const float *in = S_in + i * dv;
        float *row = S + i * dv;
        __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
        if (S_in_next)
            for (int j = 0; j < NV; j++) _mm_prefetch((const char *)(S_in_next + i * dv + 16 * j), _MM_HINT_T1);
        for (int j = 0; j < NV; j++) {
            __m512 sv = _mm512_fmadd_ps(ki, u[j], _mm512_mul_ps(_mm512_loadu_ps(in + 16 * j), decay));
            if (nt)
                _mm512_stream_ps(row + 16 * j, sv);
            else
                _mm512_storeu_ps(row + 16 * j, sv);
            acc[j] = _mm512_fmadd_ps(sv, qi, acc[j]);
        }
    }
    for (int j = 0; j < NV; j++) _mm512_storeu_ps(o + 16 * j, acc[j]);
    if (nt) _mm_sfence(); /* order the streamed state before the pool's completion flag */
}

/* More tokens: the columns of S evolve independently, so the state is processed in chunks of 64
 * columns through all n tokens. A chunk is worked on in W (the scratch, dk x 64 floats, L1-resident
 * for dk <= 128; S's own columns when there is none): the first pass reads S_in's chunk, decays it
 * and forms u for token 0; the pass of token t applies its update and output, fused with the decay
 * and u of token t + 1; the last token's pass writes S instead of W, with non-temporal stores when
 * W is the scratch, S 64-byte aligned and dv a multiple of 16 (no read-for-ownership of a state not
 * read again before the next call). Meanwhile the token passes prefetch the next chunk (of this
 * head, else of S_in_next) into L2, so that reading the states overlaps the arithmetic. Per element
 * the operations and their order are those of kern_generic.c. */
static void deltanet_head(float *S, const float *S_in, const float *q, const float *k, const float *v, const float *g,
                          const float *beta, float *o, int64_t n, int64_t dk, int64_t dv, int64_t qk_stride,
                          int64_t v_stride, int64_t gb_stride, const float *S_in_next, float *scratch) {
    if (n == 1 && (dv == 128 || dv == 64)) {
        if (dv == 128)
            deltanet_decode_rows(S, S_in, q, k, v, cpu_exp(g[0]), beta[0], o, dk, 8, S_in_next);
        else
            deltanet_decode_rows(S, S_in, q, k, v, cpu_exp(g[0]), beta[0], o, dk, 4, S_in_next);
        return;
    }
    const bool nt = scratch && ((uintptr_t)S & 63) == 0 && dv % 16 == 0;
    for (int64_t j0 = 0; j0 < dv; j0 += 64) {
        __mmask16 m[4];
        for (int j = 0; j < 4; j++) m[j] = mask16(dv - j0 - 16 * j);
        float *W = scratch ? scratch : S + j0;
        const int64_t ws = scratch ? 64 : dv;
        /* the chunk read next, and its 16-float vectors per row */
        const float *pf = j0 + 64 < dv ? S_in + j0 + 64 : S_in_next;
        int64_t pf_width = j0 + 64 < dv ? dv - j0 - 64 : dv;
        int64_t pf_lines = !pf ? 0 : pf_width >= 64 ? 4 : (pf_width + 15) / 16;
        /* token 0: decay the old state into W and u = W^T k */
        __m512 decay = _mm512_set1_ps(cpu_exp(g[0])), u[4], s[4];
        for (int j = 0; j < 4; j++) u[j] = _mm512_setzero_ps();
        for (int64_t i = 0; i < dk; i++) {
            __m512 ki = _mm512_set1_ps(k[i]);
            for (int j = 0; j < 4; j++) {
                s[j] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[j], S_in + j0 + i * dv + 16 * j), decay);
                _mm512_mask_storeu_ps(W + i * ws + 16 * j, m[j], s[j]);
                u[j] = _mm512_fmadd_ps(s[j], ki, u[j]);
            }
        }
        for (int64_t t = 0; t < n; t++) {
            const float *qt = q + t * qk_stride, *kt = k + t * qk_stride, *vt = v + t * v_stride + j0;
            float *ot = o + t * v_stride + j0;
            const bool last = t + 1 == n;
            /* delta_t = beta (v - u) */
            __m512 bb = _mm512_set1_ps(beta[t * gb_stride]), d[4], acc[4];
            for (int j = 0; j < 4; j++) {
                d[j] = _mm512_mul_ps(bb, _mm512_sub_ps(_mm512_maskz_loadu_ps(m[j], vt + 16 * j), u[j]));
                acc[j] = u[j] = _mm512_setzero_ps();
            }
            const float *kn = last ? kt : k + (t + 1) * qk_stride;
            decay = _mm512_set1_ps(last ? 1.0f : cpu_exp(g[(t + 1) * gb_stride]));
            float *dst = last ? S + j0 : W;
            const int64_t ds = last ? dv : ws;
            for (int64_t i = 0; i < dk; i++) {
                for (int64_t l = t; l < pf_lines; l += n)
                    _mm_prefetch((const char *)(pf + i * dv + 16 * l), _MM_HINT_T1);
                __m512 ki = _mm512_set1_ps(kt[i]), qi = _mm512_set1_ps(qt[i]), kn_i = _mm512_set1_ps(kn[i]);
                for (int j = 0; j < 4; j++) {
                    s[j] = _mm512_fmadd_ps(ki, d[j], _mm512_maskz_loadu_ps(m[j], W + i * ws + 16 * j));
                    acc[j] = _mm512_fmadd_ps(s[j], qi, acc[j]);
                    if (!last) { /* token t + 1: decay, then u = S^T k */
                        s[j] = _mm512_mul_ps(s[j], decay);
                        u[j] = _mm512_fmadd_ps(s[j], kn_i, u[j]);
                    }
                    if (last && nt && m[j] == 0xFFFF)
                        _mm512_stream_ps(dst + i * ds + 16 * j, s[j]);
                    else
                        _mm512_mask_storeu_ps(dst + i * ds + 16 * j, m[j], s[j]);
                }
            }
            for (int j = 0; j < 4; j++) _mm512_mask_storeu_ps(ot + 16 * j, m[j], acc[j]);
        }
    }
    if (nt) _mm_sfence(); /* order the streamed state before the pool's completion flag */
}

/* ---- conv, elementwise, norms --------------------------------------------------------------------- */

/* conv_row: the file layout (wsc = K <= 4, wsk = 1) holds 16 channels' taps in K contiguous
 * vectors; tap k of lane i is element K*i + k of them, picked with two-source permutes instead of a
 * gather per tap (which walked cold weights a float at a time). */
static void conv_row(float *y, const float *x, int64_t ldx, const float *w, int64_t wsc, int64_t wsk, int64_t C,
                     int64_t K) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    if (wsc == K && wsk == 1 && K <= 4) {
        __m512i idx[4];
        __mmask16 upper[4];
        for (int64_t kk = 0; kk < K; kk++) {
            __m512i flat =
                _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32((int)K)), _mm512_set1_epi32((int)kk));
            idx[kk] = _mm512_and_si512(flat, _mm512_set1_epi32(31));
            upper[kk] = _mm512_cmpge_epi32_mask(flat, _mm512_set1_epi32(32));
        }
        for (int64_t c = 0; c < C; c += 16) {
            __mmask16 m = mask16(C - c);
            const float *wc = w + c * K;
            int64_t nw = (C - c < 16 ? C - c : 16) * K; /* floats of these channels' taps */
            __m512 v[4];
            for (int j = 0; j < 4; j++) v[j] = _mm512_maskz_loadu_ps(mask16(nw - 16 * j), wc + 16 * j);
            __m512 acc = _mm512_setzero_ps();
            for (int64_t kk = 0; kk < K; kk++) {
                __m512 lo = _mm512_permutex2var_ps(v[0], idx[kk], v[1]);
                __m512 hi = _mm512_permutex2var_ps(v[2], idx[kk], v[3]);
                __m512 wv = _mm512_mask_blend_ps(upper[kk], lo, hi);
                acc = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + kk * ldx + c), acc);
            }
            _mm512_mask_storeu_ps(y + c, m, acc);
        }
        return;
    }
    const __m512i gidx = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)wsc));
    for (int64_t c = 0; c < C; c += 16) {
        __mmask16 m = mask16(C - c);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t kk = 0; kk < K; kk++) {
            const float *wk = w + c * wsc + kk * wsk;
            __m512 wv = wsc == 1 ? _mm512_maskz_loadu_ps(m, wk)
                                 : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, gidx, wk, 4);
            acc = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + kk * ldx + c), acc);
        }
        _mm512_mask_storeu_ps(y + c, m, acc);
    }
}

static void vec_add(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
}

static void vec_mul(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
}

/* x / (1 + e^-x) */
INLINE __m512 silu16(__m512 x) {
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

static void vec_swiglu(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        __m512 av = _mm512_maskz_loadu_ps(m, a + i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(silu16(av), _mm512_maskz_loadu_ps(m, b + i)));
    }
}

/* cpu.h's GEGLU: x / (1 + e^-(u + u)) · b, u = 0.7978845608 (x + 0.044715 ((x x) x)). */
static void vec_geglu(float *y, const float *a, const float *b, int64_t n) {
    const __m512 c0 = _mm512_set1_ps(0.7978845608f), c1 = _mm512_set1_ps(0.044715f), one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        __m512 x = _mm512_maskz_loadu_ps(m, a + i);
        __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        __m512 u = _mm512_mul_ps(c0, _mm512_add_ps(x, _mm512_mul_ps(c1, x3)));
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_add_ps(u, u)));
        __m512 r = _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, b + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

static void vec_unary(g_op op, float *y, const float *x, int64_t n, float scale) {
    if (op != G_OP_SCALE && op != G_OP_SILU && op != G_OP_SIGMOID) {
        cpu_vec_unary_generic(op, y, x, n, scale);
        return;
    }
    const __m512 one = _mm512_set1_ps(1.0f), vs = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i), r;
        if (op == G_OP_SCALE) r = _mm512_mul_ps(v, vs);
        else if (op == G_OP_SILU) r = silu16(v);
        else r = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), v))));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

static void row_norm(g_op op, float *y, const float *x, const float *w, const float *z, int64_t n, float eps,
                     float w_offset) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(mask16(n - i), x + i);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    float ss = hsum16(acc);
    float inv = op == G_OP_L2NORM ? 1.0f / sqrtf(ss + eps) : 1.0f / sqrtf(ss / (float)n + eps);
    __m512 vi = _mm512_set1_ps(inv), off = _mm512_set1_ps(w_offset);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        __m512 xi = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vi), r;
        if (op == G_OP_L2NORM || (op == G_OP_RMSNORM && !w)) r = xi;
        else if (op == G_OP_RMSNORM) r = _mm512_mul_ps(xi, _mm512_add_ps(_mm512_maskz_loadu_ps(m, w + i), off));
        else r = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), xi), silu16(_mm512_maskz_loadu_ps(m, z + i)));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

static const cpu_isa k_avx512 = {
    .level = CPU_ISA_AVX512,
    .quant_act = quant_act,
    .mm_quant = mm_quant,
    .tile_block_bytes = cpu_tile_block_bytes,
    .tile_group = cpu_tile_group,
    .repack_tiles = cpu_repack_tiles,
    .mm_quant_packed = mm_quant_packed,
    .mm_float = mm_float,
    .attn_chunk = attn_chunk,
    .attn_chunk_heads = attn_chunk_heads,
    .attn_chunk_q = attn_chunk_q,
    .attn_fold_rows = attn_fold_rows,
    .cvt_f16 = cvt_f16,
    .deltanet_head = deltanet_head,
    .vec_add = vec_add,
    .vec_mul = vec_mul,
    .vec_swiglu = vec_swiglu,
    .vec_geglu = vec_geglu,
    .vec_unary = vec_unary,
    .row_norm = row_norm,
    .conv_row = conv_row,
};

const cpu_isa *cpu_isa_avx512(void) { return &k_avx512; }

#else
const cpu_isa *cpu_isa_avx512(void) { return NULL; }
#endif
