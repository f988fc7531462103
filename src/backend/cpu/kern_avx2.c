/* kern_avx2.c — AVX2 + FMA + F16C micro-kernels of the fast CPU kernels (cpu.h), for x86-64 CPUs
 * without AVX-512 VNNI. Compiled with -mavx2 -mfma -mf16c (CMakeLists.txt), called only when
 * cpu_isa_detect finds those features.
 *
 * Quantised matmuls follow cpu.h's canonical arithmetic with 8 rows in the 8 lanes: the exact
 * integer dot of each 32-block comes from vpmaddubsw/vpmaddwd (unsigned nibbles times signed
 * activations; for Q8_0 |w| times sign(a, w), which cannot saturate 16 bits) and a vphaddd tree
 * that sums each row's 8 partials, then the per-block FMA runs with the 8 rows in the lanes.
 * Several columns share the unpacked weights of a block (accumulators in scratch).
 *
 * kern_avx2_vnni.c compiles this file once more with AVX-VNNI (SLM_AVX2_VNNI; Intel client CPUs
 * from Alder Lake on have it without AVX-512): the matmuls on repacked tiles then take each exact
 * 4-byte dot with one vpdpbusd (Q8_0 as offset-binary u8 weights plus the activations' -128·Σa
 * term, as kern_avx512.c), the same integer sums and so the same bits. */
#include "backend/cpu/cpu.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && \
    (!defined(SLM_AVX2_VNNI) || defined(__AVXVNNI__))

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/kern_common.h"
#include "backend/cpu/kern_attn_q.h"
#include "base/half.h"

#define INLINE static inline __attribute__((always_inline))

static float ldf(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static int32_t ldi(const uint8_t *p) { int32_t i; memcpy(&i, p, 4); return i; }
static uint16_t ldh(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return h; }

/* Lane mask of the first n (0..8) lanes for maskload/maskstore. */
INLINE __m256i lanes(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n > 8 ? 8 : n)), idx);
}

/* The first n lanes of v (none when n <= 0, all 8 when n >= 8) stored at y: a plain store when
 * all 8 are, since vmaskmovps stores are microcoded on AMD (Zen 3: ~4 ns each against 0.4 for a
 * plain one; the matmuls 2-8% faster, bench/README.md "Masked stores on AMD"). */
INLINE void store_lanes(float *y, int64_t n, __m256 v) {
    if (n >= 8) _mm256_storeu_ps(y, v);
    else _mm256_maskstore_ps(y, lanes(n), v);
}

/* Sum of 8 lanes, pairwise as the canonical tail: (l + l+4), then (+2), then (+1). */
INLINE float hsum8_tail(__m256 s8) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* The canonical 16-lane reduction of (lanes 0-7, lanes 8-15). */
INLINE float hsum16(__m256 lo, __m256 hi) { return hsum8_tail(_mm256_add_ps(lo, hi)); }

/* cpu_exp (kern_common.h) on 8 lanes: the same operations, so the same bits. */
INLINE __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-86.0f)), _mm256_set1_ps(88.3762626647949f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n for n in [-124, 128]: n = 128 only at the clamp, split as 2^(n-1) * 2 */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, _mm256_set1_epi32(1)), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(2.0f));
}

/* ---- activation quantisation (bytes identical to kern_generic.c) ------------------------------ */

/* Q8_K (bytes identical to cpu_quant_act_k_generic): max is the first element of largest |x|,
 * iscale = -127 / max, q = clamp(round-half-even(iscale x)), d = 1 / iscale, bsums per 16. NaN
 * elements never set the scale and quantise to -128 there as here (vmaxps returns its second
 * operand when one is NaN, as fmaxf returns the number). */
static void quant_act_k(const float *x, int64_t k, uint8_t *dst) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int64_t b = 0; b < k / CPU_QK_K; b++, x += CPU_QK_K, dst += CPU_Q8K_BYTES) {
        __m256 am = _mm256_setzero_ps();
        for (int j = 0; j < CPU_QK_K; j += 8) am = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), absmask), am);
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        float amax = _mm_cvtss_f32(m4);
        if (amax == 0.0f) {
            memset(dst, 0, CPU_Q8K_BYTES);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < CPU_QK_K; j += 8) {
            int hit = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), absmask), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (hit) {
                max = x[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
        int16_t bs[16];
        for (int s = 0; s < 16; s++) {
            __m256i q[2];
            for (int i = 0; i < 2; i++) {
                __m256 v = _mm256_round_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 16 * s + 8 * i)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
            }
            __m128i w0 = _mm_packs_epi32(_mm256_castsi256_si128(q[0]), _mm256_extracti128_si256(q[0], 1));
            __m128i w1 = _mm_packs_epi32(_mm256_castsi256_si128(q[1]), _mm256_extracti128_si256(q[1], 1));
            _mm_storeu_si128((__m128i *)(dst + 4 + 16 * s), _mm_packs_epi16(w0, w1));
            __m128i s8 = _mm_add_epi16(w0, w1);
            s8 = _mm_madd_epi16(s8, _mm_set1_epi16(1));
            s8 = _mm_add_epi32(s8, _mm_shuffle_epi32(s8, 0x4E));
            s8 = _mm_add_epi32(s8, _mm_shuffle_epi32(s8, 0xB1));
            bs[s] = (int16_t)_mm_cvtsi128_si32(s8);
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
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (int64_t b = 0; b < nb; b++) {
        __m256 v[4];
        for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(x + 32 * b + 8 * i);
        __m256 am = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                                  _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        float amax = _mm_cvtss_f32(m4);
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i q[4], s = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            q[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid)), lo), hi);
            s = _mm256_add_epi32(s, q[i]);
        }
        /* int32 -> int8 keeping element order */
        __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(dst + 32 * b), p);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        int32_t sum = _mm_cvtsi128_si32(s4);
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

/* ---- 32-block matmul: 8 rows in lanes ---------------------------------------------------------- */

/* Sums the 8 lanes of each of a[0..7] into lane r of the result (exact integer arithmetic). */
INLINE __m256i rowsum8(const __m256i a[8]) {
    __m256i h01 = _mm256_hadd_epi32(a[0], a[1]), h23 = _mm256_hadd_epi32(a[2], a[3]);
    __m256i h45 = _mm256_hadd_epi32(a[4], a[5]), h67 = _mm256_hadd_epi32(a[6], a[7]);
    __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* Byte j (of 32) = 0x10 where bit j of the 4 bytes at p is set, else 0: the 5th bits of a Q5_0 /
 * Q5_1 block's qh in element order (byte j of the broadcast selects qh byte j/8, then bit j%8). */
INLINE __m256i q5_high_bits(const uint8_t *p) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(ldi(p)), shuf);
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE));
    return _mm256_and_si256(_mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

/* Block b of row p unpacked to 32 weights in element order: u8 nibbles (Q4_0, Q4_1), u8 5-bit
 * values (Q5_0, Q5_1) or int8 (Q8_0). */
INLINE __m256i unpack_block(uint32_t wt, const uint8_t *blk) {
    if (wt == SLM_DTYPE_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    size_t qoff = cpu_q32_quant_off(wt);
    __m128i q = _mm_loadu_si128((const __m128i *)(blk + qoff));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    if (wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1) v = _mm256_or_si256(v, q5_high_bits(blk + qoff - 4));
    return v;
}

/* 8 int32 partial sums of one row-block: weights w (as unpack_block), activations a (32 int8). */
INLINE __m256i dot_block(uint32_t wt, __m256i w, __m256i wabs, __m256i a) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p = wt == SLM_DTYPE_Q8_0 ? _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, w)) : _mm256_maddubs_epi16(w, a);
    return _mm256_madd_epi16(p, ones);
}

static void mm_q32(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                   size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    int64_t nb = k / CPU_QK;
    size_t bsz = cpu_q32_block_bytes(wt);
    const bool has_min = wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1;
    const bool has_aux = wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q5_0;
    float *accs = scratch; /* (ncols, 8) */
    for (int64_t r0 = 0; r0 < nr; r0 += 8) {
        int64_t n = nr - r0 < 8 ? nr - r0 : 8;
        const uint8_t *p[8];
        for (int r = 0; r < 8; r++) p[r] = w + (size_t)(r0 + (r < n ? r : n - 1)) * row_bytes;
        for (int64_t c = 0; c < ncols; c++) _mm256_storeu_ps(accs + 8 * c, _mm256_setzero_ps());
        for (int64_t b = 0; b < nb; b++) {
            __m256i wv[8], wa[8];
            uint16_t dh[8], mh[8];
            for (int r = 0; r < 8; r++) {
                const uint8_t *blk = p[r] + (size_t)b * bsz;
                wv[r] = unpack_block(wt, blk);
                wa[r] = wt == SLM_DTYPE_Q8_0 ? _mm256_abs_epi8(wv[r]) : wv[r];
                dh[r] = ldh(blk);
                mh[r] = has_min ? ldh(blk + 2) : 0;
            }
            __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
            __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)mh));
            for (int64_t c = 0; c < ncols; c++) {
                const uint8_t *ac = act + (size_t)c * act_stride;
                __m256i av = _mm256_loadu_si256((const __m256i *)(ac + 32 * b));
                __m256i part[8];
                for (int r = 0; r < 8; r++) part[r] = dot_block(wt, wv[r], wa[r], av);
                __m256i is = rowsum8(part);
                if (has_aux) is = _mm256_add_epi32(is, _mm256_set1_epi32(ldi(ac + k + 4 * nb + 4 * b)));
                __m256 acc = _mm256_loadu_ps(accs + 8 * c);
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, _mm256_set1_ps(ldf(ac + k + 4 * b))), acc);
                if (has_min) acc = _mm256_fmadd_ps(mw, _mm256_set1_ps(ldf(ac + k + 4 * nb + 4 * b)), acc);
                _mm256_storeu_ps(accs + 8 * c, acc);
            }
        }
        for (int64_t c = 0; c < ncols; c++) store_lanes(y + c * ldy + r0, n, _mm256_loadu_ps(accs + 8 * c));
    }
}

/* ---- K-quants: one row at a time, exact integer dots per super-block -------------------------- */

INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static void mm_qk(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                  size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    int64_t nbk = k / CPU_QK_K;
    uint8_t *u = scratch;                           /* (nbk, 256) unpacked weights */
    int32_t *sc = (int32_t *)(u + (size_t)nbk * 256); /* (nbk, 16) scales (Q6_K) or 8 scales + 8 mins (Q4_K) */
    const __m256i ones = _mm256_set1_epi16(1);
    bool q4 = wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K, q5 = wt == SLM_DTYPE_Q5_K;
    size_t bsz = q5 ? 176 : q4 ? 144 : 210;
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *x = w + (size_t)r * row_bytes;
        for (int64_t b = 0; b < nbk; b++) {
            uint8_t *ub = u + b * 256;
            int32_t *sb = sc + 16 * b;
            if (q4) { /* Q5_K: qh[32] at 16, the quants at 48 */
                const uint8_t *xb = x + bsz * (size_t)b, *s = xb + 4, *qs = xb + (q5 ? 48 : 16);
                for (int j = 0; j < 8; j++) {
                    if (j < 4) {
                        sb[j] = s[j] & 63;
                        sb[8 + j] = s[j + 4] & 63;
                    } else {
                        sb[j] = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
                        sb[8 + j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
                    }
                }
                const __m256i m4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(0x10);
                __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(xb + 16)) : _mm256_setzero_si256();
                for (int c = 0; c < 4; c++) {
                    __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                    __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                    if (q5) { /* bit 2c of qh[l] to bit 4 of element l, bit 2c+1 to bit 4 of element 32+l */
                        __m256i h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c));
                        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), b16));
                        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), b16));
                    }
                    _mm256_storeu_si256((__m256i *)(ub + 64 * c), lo);
                    _mm256_storeu_si256((__m256i *)(ub + 64 * c + 32), hi);
                }
            } else {
                const uint8_t *xb = x + 210 * b;
                for (int n = 0; n < 2; n++) {
                    const uint8_t *L = xb + 64 * n, *H = xb + 128 + 32 * n;
                    uint8_t *o = ub + 128 * n;
                    for (int l = 0; l < 32; l++) {
                        o[l] = (uint8_t)((L[l] & 0x0F) | ((H[l] & 3) << 4));
                        o[l + 32] = (uint8_t)((L[l + 32] & 0x0F) | (((H[l] >> 2) & 3) << 4));
                        o[l + 64] = (uint8_t)((L[l] >> 4) | (((H[l] >> 4) & 3) << 4));
                        o[l + 96] = (uint8_t)((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4));
                    }
                }
                for (int j = 0; j < 16; j++) sb[j] = (int8_t)xb[192 + j];
            }
        }
        for (int64_t c = 0; c < ncols; c++) {
            const uint8_t *ab = act + (size_t)c * act_stride;
            float acc = 0.0f;
            for (int64_t b = 0; b < nbk; b++, ab += CPU_Q8K_BYTES) {
                const uint8_t *ub = u + b * 256;
                const int32_t *sb = sc + 16 * b;
                int16_t bs[16];
                memcpy(bs, ab + 260, sizeof bs);
                float da = ldf(ab);
                int32_t isum = 0;
                if (q4) {
                    /* sub-block j = 32 elements: 8 int32 lanes of one vpmaddwd */
                    __m256i tot = _mm256_setzero_si256();
                    for (int j = 0; j < 8; j++) {
                        __m256i d = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(ub + 32 * j)),
                                                 _mm256_loadu_si256((const __m256i *)(ab + 4 + 32 * j))),
                            ones);
                        tot = _mm256_add_epi32(tot, _mm256_mullo_epi32(d, _mm256_set1_epi32(sb[j])));
                    }
                    isum = hsum_i32(tot);
                    int32_t msum = 0;
                    for (int j = 0; j < 8; j++) msum += sb[8 + j] * (bs[2 * j] + bs[2 * j + 1]);
                    const uint8_t *xb = w + (size_t)r * row_bytes + (size_t)b * bsz;
                    acc = fmaf((float)isum, f16_to_f32(ldh(xb)) * da, acc);
                    acc = fmaf(-(float)msum, f16_to_f32(ldh(xb + 2)) * da, acc);
                } else {
                    /* 32 elements = two sub-blocks of 16: lanes 0-3 and 4-7 of one vpmaddwd */
                    __m256i tot = _mm256_setzero_si256();
                    for (int j = 0; j < 8; j++) {
                        __m256i d = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(ub + 32 * j)),
                                                 _mm256_loadu_si256((const __m256i *)(ab + 4 + 32 * j))),
                            ones);
                        __m256i s2 = _mm256_set_m128i(_mm_set1_epi32(sb[2 * j + 1]), _mm_set1_epi32(sb[2 * j]));
                        tot = _mm256_add_epi32(tot, _mm256_mullo_epi32(d, s2));
                    }
                    isum = hsum_i32(tot);
                    int32_t corr = 0;
                    for (int j = 0; j < 16; j++) corr += sb[j] * bs[j];
                    isum -= 32 * corr;
                    const uint8_t *xb = w + (size_t)r * row_bytes + (size_t)b * 210;
                    acc = fmaf((float)isum, f16_to_f32(ldh(xb + 208)) * da, acc);
                }
            }
            y[c * ldy + r] = acc;
        }
    }
}

static void mm_quant(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                     size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    if (cpu_wt_is_k(wt)) mm_qk(wt, w, row_bytes, nr, k, act, act_stride, ncols, y, ldy, scratch);
    else mm_q32(wt, w, row_bytes, nr, k, act, act_stride, ncols, y, ldy, scratch);
}

/* ---- float weights: canonical 16 lanes as two 8-lane halves ----------------------------------- */

/* 16 weights of a row from element i (n valid, rest 0), widened to f32. */
INLINE void load_w16(uint32_t wt, const uint8_t *w, int64_t i, int64_t n, __m256 *lo, __m256 *hi) {
    if (n >= 16) {
        if (wt == SLM_DTYPE_F32) {
            *lo = _mm256_loadu_ps((const float *)w + i);
            *hi = _mm256_loadu_ps((const float *)w + i + 8);
        } else {
            __m256i h = _mm256_loadu_si256((const __m256i *)(w + 2 * i));
            if (wt == SLM_DTYPE_F16) {
                *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
                *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
            } else {
                *lo = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16));
                *hi = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16));
            }
        }
        return;
    }
    float t[16] = {0};
    for (int64_t l = 0; l < n; l++) t[l] = cpu_load_wf(wt, w, i + l);
    *lo = _mm256_loadu_ps(t);
    *hi = _mm256_loadu_ps(t + 8);
}

INLINE void load_x16(const float *x, int64_t n, __m256 *lo, __m256 *hi) {
    if (n >= 16) {
        *lo = _mm256_loadu_ps(x);
        *hi = _mm256_loadu_ps(x + 8);
        return;
    }
    *lo = _mm256_maskload_ps(x, lanes(n));
    *hi = n > 8 ? _mm256_maskload_ps(x + 8, lanes(n - 8)) : _mm256_setzero_ps();
}

/* 16 elements of k from i (n = k - i of them exist) for an R x C tile. */
INLINE void mmf_step(const uint32_t wt, const uint8_t *w, size_t rb, const int R, int64_t k, const float *x,
                     const int C, int64_t i, int64_t n, __m256 lo[2][2], __m256 hi[2][2]) {
    __m256 wl[2], wh[2], xl[2], xh[2];
    for (int r = 0; r < R; r++) load_w16(wt, w + (size_t)r * rb, i, n, &wl[r], &wh[r]);
    for (int c = 0; c < C; c++) load_x16(x + c * k + i, n, &xl[c], &xh[c]);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            lo[r][c] = _mm256_fmadd_ps(wl[r], xl[c], lo[r][c]);
            hi[r][c] = _mm256_fmadd_ps(wh[r], xh[c], hi[r][c]);
        }
}

/* R rows (<= 2) x C columns (<= 2) of canonical dots; wt, R, C constant at every call (the
 * accumulators then stay in registers); pf (decode) prefetches the R rows as one run. */
INLINE void mmf_tile(const uint32_t wt, const uint8_t *w, size_t rb, const int R, int64_t k, const float *x,
                     const int C, float *y, int64_t ldy, pf_state *pf) {
    __m256 lo[2][2], hi[2][2];
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 2; c++) lo[r][c] = hi[r][c] = _mm256_setzero_ps();
    const size_t run_step = (size_t)R * (rb / (size_t)k) * 16;
    const char *run = (const char *)w + PF_LEAD;
    const int64_t k16 = k & ~(int64_t)15;
    for (int64_t i = 0; i < k16; i += 16, run += run_step) {
        if (pf) pf_advance(pf, run + run_step);
        mmf_step(wt, w, rb, R, k, x, C, i, 16, lo, hi);
    }
    if (k16 < k) mmf_step(wt, w, rb, R, k, x, C, k16, k - k16, lo, hi);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) y[c * ldy + r] = hsum16(lo[r][c], hi[r][c]);
}

CPU_MMF_SIZE(mmf_2x2, 2, 2)
CPU_MMF_SIZE(mmf_2x1, 2, 1)
CPU_MMF_SIZE(mmf_1x1, 1, 1)

/* Activation bytes per column block in prefill (mm_float). */
#define MMF_COL_BLOCK_BYTES ((size_t)256 << 10)

static void mm_float(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const float *x,
                     int64_t ncols, float *y, int64_t ldy, void *scratch) {
    (void)scratch;
    int64_t r = 0;
    pf_state pf = {(const char *)w, (const char *)w + (size_t)nr * row_bytes};
    /* prefill: columns in blocks of ~MMF_COL_BLOCK_BYTES of activations, each block against all
     * rows of the range, so the activations come from L2 rather than once per 2 rows from L3 */
    int64_t c2 = ncols / 2 * 2, cb = (int64_t)(MMF_COL_BLOCK_BYTES / ((size_t)k * sizeof(float))) / 2 * 2;
    if (cb < 2) cb = 2;
    if (ncols >= 4)
        for (int64_t c0 = 0; c0 < c2; c0 += cb)
            for (int64_t r2 = 0; r2 + 2 <= nr; r2 += 2)
                for (int64_t c = c0; c < c0 + cb && c < c2; c += 2)
                    mmf_2x2(wt, w + (size_t)r2 * row_bytes, row_bytes, k, x + c * k, y + c * ldy + r2, ldy, NULL);
    for (; r + 2 <= nr; r += 2) {
        const uint8_t *wr = w + (size_t)r * row_bytes;
        int64_t c = ncols >= 4 ? c2 : 0;
        for (; c + 2 <= ncols; c += 2) mmf_2x2(wt, wr, row_bytes, k, x + c * k, y + c * ldy + r, ldy, NULL);
        /* decode: the first column streams the rows (prefetched); later ones hit cache */
        for (; c < ncols; c++) mmf_2x1(wt, wr, row_bytes, k, x + c * k, y + c * ldy + r, ldy, c == 0 && ncols < 2 ? &pf : NULL);
    }
    for (; r < nr; r++)
        for (int64_t c = 0; c < ncols; c++)
            mmf_1x1(wt, w + (size_t)r * row_bytes, row_bytes, k, x + c * k, y + c * ldy + r, ldy, NULL);
}

/* ---- attention: the tiled kernel of kern_avx512.c with 16 keys as two 8-lane halves ----------- */

static float kv_at(uint32_t t, const void *base, int64_t i) {
    return t == SLM_DTYPE_F16 ? _cvtsh_ss(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

/* Transposes the 8 x 8 floats in t (row r = t[r]) in place. */
INLINE void transpose8(__m256 t[8]) {
    __m256 a0 = _mm256_unpacklo_ps(t[0], t[1]), a1 = _mm256_unpackhi_ps(t[0], t[1]);
    __m256 a2 = _mm256_unpacklo_ps(t[2], t[3]), a3 = _mm256_unpackhi_ps(t[2], t[3]);
    __m256 a4 = _mm256_unpacklo_ps(t[4], t[5]), a5 = _mm256_unpackhi_ps(t[4], t[5]);
    __m256 a6 = _mm256_unpacklo_ps(t[6], t[7]), a7 = _mm256_unpackhi_ps(t[6], t[7]);
    __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
    __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
    __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
    __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
    t[0] = _mm256_permute2f128_ps(b0, b4, 0x20), t[4] = _mm256_permute2f128_ps(b0, b4, 0x31);
    t[1] = _mm256_permute2f128_ps(b1, b5, 0x20), t[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
    t[2] = _mm256_permute2f128_ps(b2, b6, 0x20), t[6] = _mm256_permute2f128_ps(b2, b6, 0x31);
    t[3] = _mm256_permute2f128_ps(b3, b7, 0x20), t[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
}

/* 8 consecutive K/V elements from i as f32 (f16 converted exactly by F16C). */
INLINE __m256 kv_at8(uint32_t t, const void *base, int64_t i) {
    return t == SLM_DTYPE_F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)))
                              : _mm256_loadu_ps((const float *)base + i);
}

/* The 16 scaled scores of two query rows q0, q1 against the transposed key block Kt (Kt[16 i + j]:
 * dim i of key j): per row four accumulators, even dims into a0, odd into a1, lanes 0..7 and 8..15,
 * s = (a0 + a1) * scale; both rows share each load of Kt. S: (2, 16). */
INLINE void qk_rows(const float *q0, const float *q1, const float *Kt, int64_t hd, float scale, float S[32]) {
    __m256 a0l = _mm256_setzero_ps(), a0h = a0l, a1l = a0l, a1h = a0l;
    __m256 b0l = a0l, b0h = a0l, b1l = a0l, b1h = a0l;
    int64_t i = 0;
    for (; i + 2 <= hd; i += 2) {
        __m256 k0l = _mm256_loadu_ps(Kt + 16 * i), k0h = _mm256_loadu_ps(Kt + 16 * i + 8);
        __m256 k1l = _mm256_loadu_ps(Kt + 16 * i + 16), k1h = _mm256_loadu_ps(Kt + 16 * i + 24);
        __m256 x0 = _mm256_set1_ps(q0[i]), x1 = _mm256_set1_ps(q0[i + 1]);
        a0l = _mm256_fmadd_ps(x0, k0l, a0l);
        a0h = _mm256_fmadd_ps(x0, k0h, a0h);
        a1l = _mm256_fmadd_ps(x1, k1l, a1l);
        a1h = _mm256_fmadd_ps(x1, k1h, a1h);
        __m256 y0 = _mm256_set1_ps(q1[i]), y1 = _mm256_set1_ps(q1[i + 1]);
        b0l = _mm256_fmadd_ps(y0, k0l, b0l);
        b0h = _mm256_fmadd_ps(y0, k0h, b0h);
        b1l = _mm256_fmadd_ps(y1, k1l, b1l);
        b1h = _mm256_fmadd_ps(y1, k1h, b1h);
    }
    if (i < hd) {
        __m256 k0l = _mm256_loadu_ps(Kt + 16 * i), k0h = _mm256_loadu_ps(Kt + 16 * i + 8);
        a0l = _mm256_fmadd_ps(_mm256_set1_ps(q0[i]), k0l, a0l);
        a0h = _mm256_fmadd_ps(_mm256_set1_ps(q0[i]), k0h, a0h);
        b0l = _mm256_fmadd_ps(_mm256_set1_ps(q1[i]), k0l, b0l);
        b0h = _mm256_fmadd_ps(_mm256_set1_ps(q1[i]), k0h, b0h);
    }
    __m256 vs = _mm256_set1_ps(scale);
    _mm256_storeu_ps(S, _mm256_mul_ps(_mm256_add_ps(a0l, a1l), vs));
    _mm256_storeu_ps(S + 8, _mm256_mul_ps(_mm256_add_ps(a0h, a1h), vs));
    _mm256_storeu_ps(S + 16, _mm256_mul_ps(_mm256_add_ps(b0l, b1l), vs));
    _mm256_storeu_ps(S + 24, _mm256_mul_ps(_mm256_add_ps(b0h, b1h), vs));
}

/* NR (1..4) consecutive accumulator rows (stride hdvp) of queries with the same keys [jlo, nj) of the
 * block: acc = acc * C, then + P[j] * V[j] for j ascending, 8 dims at a time; the rows share each
 * load of V. P: (NR, 16), Vf: (16, hdvp). */
INLINE void pv_rows(const int NR, float *acc, const float *P, const float *C, const float *Vf, int64_t hdvp, int jlo,
                    int nj) {
    for (int64_t i = 0; i < hdvp; i += 8) {
        __m256 a[4];
        for (int n = 0; n < NR; n++) a[n] = _mm256_mul_ps(_mm256_loadu_ps(acc + n * hdvp + i), _mm256_set1_ps(C[n]));
        for (int j = jlo; j < nj; j++) {
            __m256 v = _mm256_loadu_ps(Vf + j * hdvp + i);
            for (int n = 0; n < NR; n++) a[n] = _mm256_fmadd_ps(_mm256_set1_ps(P[16 * n + j]), v, a[n]);
        }
        for (int n = 0; n < NR; n++) _mm256_storeu_ps(acc + n * hdvp + i, a[n]);
    }
}

/* The canonical running max of cpu.h's softmax over the lanes of (lo, hi) selected by (vlo, vhi):
 * masked lanes never enter, a NaN score is skipped as fmaxf skips it (MAXPS returns its second
 * operand when one is NaN, and the second operand here is never NaN), -INFINITY when no lane
 * qualifies. A max of NaN-free values is exact, so the lane order does not matter. */
INLINE float masked_max16(__m256 lo, __m256 hi, __m256 vlo, __m256 vhi) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m = _mm256_max_ps(_mm256_blendv_ps(ninf, lo, vlo), ninf);
    m = _mm256_max_ps(_mm256_blendv_ps(ninf, hi, vhi), m);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    return _mm_cvtss_f32(m4);
}

/* Lanes [jlo, nj) of a 16-key block as all-ones float masks (lanes 0..7, 8..15). */
INLINE void key_lanes(int jlo, int nj, __m256 *vlo, __m256 *vhi) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), e8 = _mm256_set1_epi32(8);
    __m256i lo = _mm256_set1_epi32(jlo - 1), hi = _mm256_set1_epi32(nj);
    *vlo = _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(idx, lo), _mm256_cmpgt_epi32(hi, idx)));
    __m256i idx8 = _mm256_add_epi32(idx, e8);
    *vhi = _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(idx8, lo), _mm256_cmpgt_epi32(hi, idx8)));
}

/* The online-softmax step of one row for its keys [jlo, nj) of a block with scores (lo, hi):
 * updates *m and *l, returns the correction and writes p (16, masked lanes exactly 0). */
INLINE float softmax_step(__m256 slo, __m256 shi, int jlo, int nj, float *m, float *l, float *p) {
    __m256 vlo, vhi;
    key_lanes(jlo, nj, &vlo, &vhi);
    float mb = masked_max16(slo, shi, vlo, vhi);
    float mn = mb > *m ? mb : *m; /* fmaxf(m, mb): neither is NaN */
    float corr = mn == *m ? 1.0f : cpu_exp(*m - mn);
    __m256 vm = _mm256_set1_ps(mn);
    __m256 plo = _mm256_and_ps(exp8(_mm256_sub_ps(slo, vm)), vlo);
    __m256 phi = _mm256_and_ps(exp8(_mm256_sub_ps(shi, vm)), vhi);
    *l = *l * corr + hsum16(plo, phi);
    *m = mn;
    _mm256_storeu_ps(p, plo);
    _mm256_storeu_ps(p + 8, phi);
    return corr;
}

/* Scores of NR (1..4) query rows qr[] against keys [0, nk) (nk <= 8) at rows kr + j*kstride of
 * the state, keys past nk 0 and never read: 8 dims of the 8 keys at a time transposed in
 * registers, then qk_rows's chains (even dims into c0, odd into c1, in order), s = (c0 + c1) *
 * scale. Decode's path: no transposed copy of the block, which only pays for many rows. */
INLINE void qk_direct8(const int NR, const float *const *qr, uint32_t kvt, const void *kr, int64_t kstride, int nk,
                       int64_t hd, __m256 vscale, __m256 *s, attn_pf *pf) {
    __m256 c0[4], c1[4];
    for (int n = 0; n < NR; n++) c0[n] = c1[n] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= hd; i += 8) {
        __m256 t[8];
        if (nk == 8)
            for (int j = 0; j < 8; j++) t[j] = kv_at8(kvt, kr, j * kstride + i);
        else
            for (int j = 0; j < 8; j++) t[j] = j < nk ? kv_at8(kvt, kr, j * kstride + i) : _mm256_setzero_ps();
        attn_pf_step(pf);
        attn_pf_step(pf);
        transpose8(t);
        for (int d = 0; d < 8; d += 2)
            for (int n = 0; n < NR; n++) {
                c0[n] = _mm256_fmadd_ps(_mm256_set1_ps(qr[n][i + d]), t[d], c0[n]);
                c1[n] = _mm256_fmadd_ps(_mm256_set1_ps(qr[n][i + d + 1]), t[d + 1], c1[n]);
            }
    }
    for (; i < hd; i++) {
        float kj[8];
        for (int j = 0; j < 8; j++) kj[j] = j < nk ? kv_at(kvt, kr, j * kstride + i) : 0.0f;
        __m256 kv = _mm256_loadu_ps(kj);
        for (int n = 0; n < NR; n++) {
            if (i & 1) c1[n] = _mm256_fmadd_ps(_mm256_set1_ps(qr[n][i]), kv, c1[n]);
            else c0[n] = _mm256_fmadd_ps(_mm256_set1_ps(qr[n][i]), kv, c0[n]);
        }
    }
    for (int n = 0; n < NR; n++) s[n] = _mm256_mul_ps(_mm256_add_ps(c0[n], c1[n]), vscale);
}

/* pv_rows reading V straight from the state (rows vr + j*vstride, j in [jlo, nj)) instead of a
 * converted copy: acc = acc * C, then + P[j] * V[j] for j ascending. CH chunks of 8 dims per pass
 * (NR * CH chains in flight: the FMA latency, not the loads, bounds one chain); dims past the
 * last whole pass 8 at a time, then scalar, with the same operations. */
INLINE void pv_pass(const int NR, const int CH, float *acc, const float *P, const float *C, uint32_t kvt,
                    const void *vr, int64_t vstride, int64_t hdvp, int64_t i, int jlo, int nj, attn_pf *pf) {
    __m256 a[4][8];
    for (int n = 0; n < NR; n++)
        for (int c = 0; c < CH; c++)
            a[n][c] = _mm256_mul_ps(_mm256_loadu_ps(acc + n * hdvp + i + 8 * c), _mm256_set1_ps(C[n]));
    for (int j = jlo; j < nj; j++) {
        __m256 p[4];
        attn_pf_step(pf);
        attn_pf_step(pf);
        for (int n = 0; n < NR; n++) p[n] = _mm256_set1_ps(P[16 * n + j]);
        for (int c = 0; c < CH; c++) {
            __m256 vv = kv_at8(kvt, vr, j * vstride + i + 8 * c);
            for (int n = 0; n < NR; n++) a[n][c] = _mm256_fmadd_ps(p[n], vv, a[n][c]);
        }
    }
    for (int n = 0; n < NR; n++)
        for (int c = 0; c < CH; c++) _mm256_storeu_ps(acc + n * hdvp + i + 8 * c, a[n][c]);
}

INLINE void pv_direct(const int NR, float *acc, const float *P, const float *C, uint32_t kvt, const void *vr,
                      int64_t vstride, int64_t hdv, int64_t hdvp, int jlo, int nj, attn_pf *pf) {
    const int CH = NR == 1 ? 8 : NR == 2 ? 4 : NR == 3 ? 4 : 2;
    int64_t i = 0;
    for (; i + 8 * CH <= hdv; i += 8 * CH) pv_pass(NR, CH, acc, P, C, kvt, vr, vstride, hdvp, i, jlo, nj, pf);
    for (; i + 8 <= hdv; i += 8) pv_pass(NR, 1, acc, P, C, kvt, vr, vstride, hdvp, i, jlo, nj, pf);
    for (; i < hdv; i++)
        for (int n = 0; n < NR; n++) {
            float a = acc[n * hdvp + i] * C[n];
            for (int j = jlo; j < nj; j++) a = fmaf(P[16 * n + j], kv_at(kvt, vr, j * vstride + i), a);
            acc[n * hdvp + i] = a;
        }
}

/* rows (T*G) up to which attn_chunk reads K and V in place: measured faster than the transposed
 * copies up to 48-64 rows (bench_attn_decode -T 16 -G 1..8), the copies faster at 128 */
#define ATTN_DIRECT_ROWS 64

/* One block of keys of the in-place path (few rows), its rows already read (attn_read_rows, or one
 * head's columns copied to the scratch): the scores and sums of rows [r_begin, r_end) (those that
 * meet the block), K at kblk and V at vblk (nbk rows, kstride / vstride elements apart), row r's
 * query at qrow[r], its token tok[r]; KVT a constant (the loads specialise). The products' loops
 * step the prefetch cursors kpf (K) and vpf (V) of a block ahead (kern_common.h attn_pf). */
INLINE void direct_block(const uint32_t KVT, const float *const *qrow, const int64_t *tok, const void *kblk,
                         const void *vblk, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t hdvp,
                         int64_t nk0, int64_t window, int64_t j0, int nbk, int64_t r_begin, int64_t r_end,
                         __m256 vscale, float *acc, float *P, float *M, float *L, float *C, attn_pf *kpf,
                         attn_pf *vpf) {
    size_t el = KVT == SLM_DTYPE_F16 ? 2 : 4;
    /* row r's keys in the block: lanes [jlo[r], nj[r]) */
    int nj[ATTN_DIRECT_ROWS], jlo[ATTN_DIRECT_ROWS];
    for (int64_t r = r_begin; r < r_end; r++) {
        int64_t nk = nk0 + tok[r], lo = window && nk - window > 0 ? nk - window : 0;
        nj[r] = nk - j0 < 16 ? (int)(nk - j0) : 16, jlo[r] = lo > j0 ? (int)(lo - j0) : 0;
    }
    const void *kblk8 = (const uint8_t *)kblk + (size_t)(8 * kstride) * el;
    for (int64_t r0 = r_begin; r0 < r_end; r0 += 4) { /* scores 4 rows at a time */
        int nr = r_end - r0 < 4 ? (int)(r_end - r0) : 4;
        const float *const *qr = qrow + r0;
        __m256 slo[4], shi[4] = {vscale, vscale, vscale, vscale}; /* lanes past nbk: masked */
        int nlo = nbk < 8 ? nbk : 8;
        switch (nr) {
        case 4: qk_direct8(4, qr, KVT, kblk, kstride, nlo, hd, vscale, slo, kpf); break;
        case 3: qk_direct8(3, qr, KVT, kblk, kstride, nlo, hd, vscale, slo, kpf); break;
        case 2: qk_direct8(2, qr, KVT, kblk, kstride, nlo, hd, vscale, slo, kpf); break;
        default: qk_direct8(1, qr, KVT, kblk, kstride, nlo, hd, vscale, slo, kpf); break;
        }
        if (nbk > 8) switch (nr) {
            case 4: qk_direct8(4, qr, KVT, kblk8, kstride, nbk - 8, hd, vscale, shi, kpf); break;
            case 3: qk_direct8(3, qr, KVT, kblk8, kstride, nbk - 8, hd, vscale, shi, kpf); break;
            case 2: qk_direct8(2, qr, KVT, kblk8, kstride, nbk - 8, hd, vscale, shi, kpf); break;
            default: qk_direct8(1, qr, KVT, kblk8, kstride, nbk - 8, hd, vscale, shi, kpf); break;
            }
        for (int x = 0; x < nr; x++) {
            int64_t r = r0 + x;
            C[r] = softmax_step(slo[x], shi[x], jlo[r], nj[r], &M[r], &L[r], P + 16 * r);
        }
    }
    for (int64_t r = r_begin; r < r_end;) { /* the rows of one token (same keys) 4 at a time */
        int n = 1;
        while (n < 4 && r + n < r_end && tok[r + n] == tok[r]) n++;
        float *a = acc + r * hdvp;
        const float *p = P + 16 * r, *c = C + r;
        if (n == 4) pv_direct(4, a, p, c, KVT, vblk, vstride, hdv, hdvp, jlo[r], nj[r], vpf);
        else if (n == 3) pv_direct(3, a, p, c, KVT, vblk, vstride, hdv, hdvp, jlo[r], nj[r], vpf);
        else if (n == 2) pv_direct(2, a, p, c, KVT, vblk, vstride, hdv, hdvp, jlo[r], nj[r], vpf);
        else pv_direct(1, a, p, c, KVT, vblk, vstride, hdv, hdvp, jlo[r], nj[r], vpf);
        r += n;
    }
}

/* cpu.h attn_fold_rows: the maxima and both factors of 8 rows at a time on 8 lanes (exp8 as
 * cpu_exp; the selects as cpu_attn_fold's conditions, NaN comparing false alike), then each row's
 * acc and l 8 floats at a time as two products and their sum, the last hdv + 2 mod 8 one at a time
 * (cpu_attn_fold's bits). With masked loads and stores for every 8 floats the fold of SmolLM2's
 * decode partials at depth 8192 (64 chunks of 9 rows, in cache) took 26 us on Zen 3, 8 without. */
static void attn_fold_rows(float *tot, const float *part, int64_t R, int64_t hdv) {
    const int64_t pf = cpu_attn_part_floats(hdv);
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int64_t r0 = 0; r0 < R; r0 += 8) {
        int n = R - r0 < 8 ? (int)(R - r0) : 8;
        float *t0 = tot + r0 * pf;
        const float *p0 = part + r0 * pf;
        float MT[8] = {1, 1, 1, 1, 1, 1, 1, 1}, MP[8] = {1, 1, 1, 1, 1, 1, 1, 1}; /* lanes past n: 1 */
        cpu_attn_fold_maxima(MT, MP, t0, p0, n, pf, hdv);
        __m256 mt = _mm256_loadu_ps(MT), mp = _mm256_loadu_ps(MP);
        __m256 mn = _mm256_blendv_ps(mt, mp, _mm256_cmp_ps(mp, mt, _CMP_GT_OQ));
        __m256 a = _mm256_blendv_ps(exp8(_mm256_sub_ps(mt, mn)), one, _mm256_cmp_ps(mn, mt, _CMP_EQ_OQ));
        __m256 b = _mm256_blendv_ps(exp8(_mm256_sub_ps(mp, mn)), one, _mm256_cmp_ps(mn, mp, _CMP_EQ_OQ));
        float A[8], B[8], MN[8];
        _mm256_storeu_ps(A, a);
        _mm256_storeu_ps(B, b);
        _mm256_storeu_ps(MN, mn);
        for (int x = 0; x < n; x++) {
            float *t = t0 + x * pf;
            const float *p = p0 + x * pf;
            if (cpu_attn_fold_trivial(t, p, hdv)) continue;
            __m256 av = _mm256_set1_ps(A[x]), bv = _mm256_set1_ps(B[x]);
            int64_t i = 0;
            for (; i + 8 <= hdv + 2; i += 8) /* acc, then m (replaced below) and l */
                _mm256_storeu_ps(t + i, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(t + i), av),
                                                      _mm256_mul_ps(_mm256_loadu_ps(p + i), bv)));
            for (; i < hdv + 2; i++) t[i] = t[i] * A[x] + p[i] * B[x]; /* no masked stores: slow on AMD */
            t[hdv] = MN[x];
        }
    }
}

static void attn_chunk(const float *q, int64_t qts, int64_t T, int64_t G, const void *k, const void *v, uint32_t kvt,
                       int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t nk0, int64_t window,
                       int64_t ring, float scale, int64_t c0, int64_t pf_end, float *part, void *scratch) {
    int64_t R = T * G, hdp = (hd + 15) & ~(int64_t)15, hdvp = (hdv + 15) & ~(int64_t)15;
    float *Kt = scratch, *Vf = Kt + 16 * hdp, *acc = Vf + 16 * hdvp, *P = acc + R * hdvp;
    float *M = P + 16 * R, *L = M + R, *C = L + R;
    float S2[32];
    for (int64_t r = 0; r < R; r++) {
        for (int64_t i = 0; i < hdvp; i++) acc[r * hdvp + i] = 0.0f;
        M[r] = -INFINITY;
        L[r] = 0.0f;
    }
    /* row of token t: keys [lo_t, hi_t], hi_t = nk0 - 1 + t, lo_t = window ? max(0, hi_t - window + 1) : 0
     * (both ascending in t); each block of 16 is loaded once for the tokens whose keys meet it */
    int64_t nk_max = nk0 + T - 1, lo_first = window && nk0 - window > 0 ? nk0 - window : 0;
    /* up to ATTN_DIRECT_ROWS rows (decode, verify, prefill of few query heads): scores straight
     * from the state, no transposed copy of K or f32 copy of V, which only pay over many rows */
    bool direct = R <= ATTN_DIRECT_ROWS;
    uint8_t *kcopy = (uint8_t *)Kt, *vcopy = (uint8_t *)Vf; /* the direct path's block copies (16 rows fit) */
    const float *qrow[ATTN_DIRECT_ROWS];
    int64_t tok[ATTN_DIRECT_ROWS];
    for (int64_t t = 0; direct && t < T; t++)
        for (int64_t h = 0; h < G; h++) qrow[t * G + h] = q + t * qts + h * hd, tok[t * G + h] = t;
    const __m256 vscale = _mm256_set1_ps(scale);
    int64_t jb = lo_first & ~(int64_t)15, je = nk_max < c0 + CPU_ATTN_CHUNK ? nk_max : c0 + CPU_ATTN_CHUNK;
    for (int64_t j0 = jb > c0 ? jb : c0; j0 < je; j0 += 16) {
        int nbk = nk_max - j0 < 16 ? (int)(nk_max - j0) : 16;
        int64_t hd8 = hd & ~(int64_t)7;
        int64_t row0 = ring ? j0 % ring : j0; /* the block's 16 rows are contiguous */
        size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4;
        const void *kblk = (const uint8_t *)k + (size_t)(row0 * kstride) * el;
        const void *vblk = (const uint8_t *)v + (size_t)(row0 * vstride) * el;
        /* tokens [t_first, t_end) have keys in this block: hi_t >= j0 and lo_t <= j0 + 15 */
        int64_t t_first = j0 - nk0 + 1 > 0 ? j0 - nk0 + 1 : 0;
        int64_t t_end = window && j0 + 16 + window - nk0 < T ? j0 + 16 + window - nk0 : T;
        if (direct) {
            attn_pf kpf, vpf;
            attn_pf_block(&kpf, &vpf, k, v, kstride, vstride, el, pf_end, ring, j0, hd, hdv);
            int64_t ks = kstride, vs = vstride;
            if (kstride == hd && vstride == hdv) { /* one KV head: the block's rows are one run */
                attn_read_rows(kblk, nbk, (size_t)hd * el, (size_t)hd * el);
                attn_read_rows(vblk, nbk, (size_t)hdv * el, (size_t)hdv * el);
            } else { /* this head's columns of each row, copied together (nbk x hd, nbk x hdv) */
                for (int j = 0; j < nbk; j++)
                    memcpy(kcopy + (size_t)(j * hd) * el, (const uint8_t *)kblk + (size_t)(j * kstride) * el,
                           (size_t)hd * el);
                for (int j = 0; j < nbk; j++)
                    memcpy(vcopy + (size_t)(j * hdv) * el, (const uint8_t *)vblk + (size_t)(j * vstride) * el,
                           (size_t)hdv * el);
                kblk = kcopy, vblk = vcopy, ks = hd, vs = hdv;
            }
            if (kvt == SLM_DTYPE_F16)
                direct_block(SLM_DTYPE_F16, qrow, tok, kblk, vblk, ks, vs, hd, hdv, hdvp, nk0, window, j0, nbk,
                             t_first * G, t_end * G, vscale, acc, P, M, L, C, &kpf, &vpf);
            else
                direct_block(SLM_DTYPE_F32, qrow, tok, kblk, vblk, ks, vs, hd, hdv, hdvp, nk0, window, j0, nbk,
                             t_first * G, t_end * G, vscale, acc, P, M, L, C, &kpf, &vpf);
            attn_pf_rest(&kpf);
            attn_pf_rest(&vpf);
            continue;
        }
        attn_prefetch_ahead(k, v, kstride, vstride, el, pf_end, ring, j0, hd, hdv);
        for (int jg = 0; jg < 16; jg += 8) /* 8 keys x 8 dims at a time, transposed in registers */
            for (int64_t i = 0; i < hd8; i += 8) {
                __m256 t[8];
                for (int j = 0; j < 8; j++)
                    t[j] = jg + j < nbk ? kv_at8(kvt, kblk, (jg + j) * kstride + i) : _mm256_setzero_ps();
                transpose8(t);
                for (int d = 0; d < 8; d++) _mm256_storeu_ps(Kt + 16 * (i + d) + jg, t[d]);
            }
        for (int j = 0; j < 16; j++)
            for (int64_t i = hd8; i < hd; i++) Kt[16 * i + j] = j < nbk ? kv_at(kvt, kblk, j * kstride + i) : 0.0f;
        for (int j = 0; j < nbk; j++) {
            int64_t i = 0;
            for (; i + 8 <= hdv; i += 8) _mm256_storeu_ps(Vf + j * hdvp + i, kv_at8(kvt, vblk, j * vstride + i));
            for (; i < hdv; i++) Vf[j * hdvp + i] = kv_at(kvt, vblk, j * vstride + i);
        }
        for (int64_t r = t_first * G; r < t_end * G; r++) {
            int64_t nk = nk0 + r / G, lo = window && nk - window > 0 ? nk - window : 0;
            int nj = nk - j0 < 16 ? (int)(nk - j0) : 16, jlo = lo > j0 ? (int)(lo - j0) : 0;
            if ((r - t_first * G) % 2 == 0) { /* the scores of rows r and r + 1 (when in range) */
                bool two = r + 1 < t_end * G;
                qk_rows(q + (r / G) * qts + (r % G) * hd, q + ((r + two) / G) * qts + ((r + two) % G) * hd, Kt, hd,
                        scale, S2);
            }
            const float *s = S2 + 16 * ((r - t_first * G) % 2);
            C[r] = softmax_step(_mm256_loadu_ps(s), _mm256_loadu_ps(s + 8), jlo, nj, &M[r], &L[r], P + 16 * r);
        }
        for (int64_t r = t_first * G; r < t_end * G;) { /* the rows of one token (same keys) 4 at a time */
            int64_t nk = nk0 + r / G, lo = window && nk - window > 0 ? nk - window : 0;
            int nj = nk - j0 < 16 ? (int)(nk - j0) : 16, jlo = lo > j0 ? (int)(lo - j0) : 0;
            int64_t n = (r / G + 1) * G - r < 4 ? (r / G + 1) * G - r : 4;
            if (n == 4) pv_rows(4, acc + r * hdvp, P + 16 * r, C + r, Vf, hdvp, jlo, nj);
            else if (n == 3) pv_rows(3, acc + r * hdvp, P + 16 * r, C + r, Vf, hdvp, jlo, nj);
            else if (n == 2) pv_rows(2, acc + r * hdvp, P + 16 * r, C + r, Vf, hdvp, jlo, nj);
            else pv_rows(1, acc + r * hdvp, P + 16 * r, C + r, Vf, hdvp, jlo, nj);
            r += n;
        }
    }
    cpu_attn_write_parts(R, hdv, hdvp, acc, M, L, part);
}

/* cpu.h attn_chunk_heads: NH*T*G rows up to ATTN_DIRECT_ROWS through the in-place path, every
 * block's rows of the NH heads read once in address order (attn_read_rows) and prefetched as one run a
 * block ahead, then each head's products (direct_block, the bits of attn_chunk's path); more rows:
 * attn_chunk per head. A task per head read only its columns of each row, a run of strided
 * pieces the hardware prefetchers do not stream: SmolLM2 at depth 8192 (3 KV heads, rows of 384
 * bytes, 128 per head) decoded 70-73 tok/s per head, 80-86 with the heads together (statelm bench
 * -d 8192 -t 2, Zen 4). */
static void attn_chunk_heads(const float *q, int64_t qts, int64_t T, int64_t G, int64_t NH, const void *k,
                             const void *v, uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv,
                             int64_t nk0, int64_t window, int64_t ring, float scale, int64_t c0, int64_t pf_end,
                             float *part, void *scratch) {
    size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4;
    int64_t TG = T * G, R = NH * TG, pfl = cpu_attn_part_floats(hdv);
    if (R > ATTN_DIRECT_ROWS) {
        for (int64_t g = 0; g < NH; g++)
            attn_chunk(q + g * G * hd, qts, T, G, (const uint8_t *)k + (size_t)(g * hd) * el,
                       (const uint8_t *)v + (size_t)(g * hdv) * el, kvt, kstride, vstride, hd, hdv, nk0, window, ring,
                       scale, c0, pf_end, part + g * TG * pfl, scratch);
        return;
    }
    int64_t hdp = (hd + 15) & ~(int64_t)15, hdvp = (hdv + 15) & ~(int64_t)15;
    float *acc = (float *)scratch + 16 * hdp + 16 * hdvp, *P = acc + R * hdvp; /* attn_chunk's layout */
    float *M = P + 16 * R, *L = M + R, *C = L + R;
    const float *qrow[ATTN_DIRECT_ROWS];
    int64_t tok[ATTN_DIRECT_ROWS];
    for (int64_t r = 0; r < R; r++) { /* row r = (head g, token t, query head h of g) */
        int64_t g = r / TG, t = r % TG / G, h = r % G;
        qrow[r] = q + t * qts + (g * G + h) * hd, tok[r] = t;
        for (int64_t i = 0; i < hdvp; i++) acc[r * hdvp + i] = 0.0f;
        M[r] = -INFINITY;
        L[r] = 0.0f;
    }
    int64_t nk_max = nk0 + T - 1, lo_first = window && nk0 - window > 0 ? nk0 - window : 0;
    const __m256 vscale = _mm256_set1_ps(scale);
    int64_t jb = lo_first & ~(int64_t)15, je = nk_max < c0 + CPU_ATTN_CHUNK ? nk_max : c0 + CPU_ATTN_CHUNK;
    for (int64_t j0 = jb > c0 ? jb : c0; j0 < je; j0 += 16) {
        int nbk = nk_max - j0 < 16 ? (int)(nk_max - j0) : 16;
        int64_t row0 = ring ? j0 % ring : j0; /* the block's 16 rows are contiguous */
        const uint8_t *kblk = (const uint8_t *)k + (size_t)(row0 * kstride) * el;
        const uint8_t *vblk = (const uint8_t *)v + (size_t)(row0 * vstride) * el;
        int64_t t_first = j0 - nk0 + 1 > 0 ? j0 - nk0 + 1 : 0; /* as attn_chunk */
        int64_t t_end = window && j0 + 16 + window - nk0 < T ? j0 + 16 + window - nk0 : T;
        attn_pf kpf, vpf;
        attn_pf_block(&kpf, &vpf, k, v, kstride, vstride, el, pf_end, ring, j0, NH * hd, NH * hdv);
        attn_read_rows(kblk, nbk, (size_t)(NH * hd) * el, (size_t)kstride * el);
        attn_read_rows(vblk, nbk, (size_t)(NH * hdv) * el, (size_t)vstride * el);
        for (int64_t g = 0; g < NH; g++) {
            const uint8_t *kg = kblk + (size_t)(g * hd) * el, *vg = vblk + (size_t)(g * hdv) * el;
            if (kvt == SLM_DTYPE_F16)
                direct_block(SLM_DTYPE_F16, qrow, tok, kg, vg, kstride, vstride, hd, hdv, hdvp, nk0, window, j0, nbk,
                             g * TG + t_first * G, g * TG + t_end * G, vscale, acc, P, M, L, C, &kpf, &vpf);
            else
                direct_block(SLM_DTYPE_F32, qrow, tok, kg, vg, kstride, vstride, hd, hdv, hdvp, nk0, window, j0, nbk,
                             g * TG + t_first * G, g * TG + t_end * G, vscale, acc, P, M, L, C, &kpf, &vpf);
        }
        attn_pf_rest(&kpf);
        attn_pf_rest(&vpf);
    }
    for (int64_t g = 0; g < NH; g++)
        cpu_attn_write_parts(TG, hdv, hdvp, acc + g * TG * hdvp, M + g * TG, L + g * TG, part + g * TG * pfl);
}

static void cvt_f16(uint16_t *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = f32_to_f16(x[i]);
}

/* ---- DeltaNet, conv (same per-element arithmetic as kern_generic.c) --------------------------- */

/* Decode (one token), 64 state columns at a time (dv a multiple of 64): the first pass streams
 * S_in's columns once and forms u = (decay S_in)^T k without storing (8 accumulators); the second
 * re-reads them (now in L1/L2), recomputes the decayed values with the same rounding, applies the
 * delta rule (u from a stack copy, the 8 output accumulators in registers) and writes S with
 * non-temporal stores when S is 32-byte aligned (the new state is not read again before the next
 * token: caching it would displace weights and cost a read-for-ownership per line), prefetching
 * the same columns of the next head's state. */
static void deltanet_decode_cols(float *S, const float *S_in, const float *q, const float *k, const float *v,
                                 float decay_s, float beta_s, float *o, int64_t dk, int64_t dv,
                                 const float *S_in_next) {
    const bool nt = ((uintptr_t)S & 31) == 0;
    const __m256 decay = _mm256_set1_ps(decay_s), bb = _mm256_set1_ps(beta_s);
    _Alignas(32) float ud[64];
    for (int64_t j0 = 0; j0 < dv; j0 += 64) {
        __m256 u[8];
        for (int x = 0; x < 8; x++) u[x] = _mm256_setzero_ps();
        for (int64_t i = 0; i < dk; i++) {
            const float *in = S_in + i * dv + j0;
            __m256 ki = _mm256_set1_ps(k[i]);
            for (int x = 0; x < 8; x++) u[x] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(in + 8 * x), decay), ki, u[x]);
        }
        for (int x = 0; x < 8; x++)
            _mm256_store_ps(ud + 8 * x, _mm256_mul_ps(bb, _mm256_sub_ps(_mm256_loadu_ps(v + j0 + 8 * x), u[x])));
        __m256 acc[8];
        for (int x = 0; x < 8; x++) acc[x] = _mm256_setzero_ps();
        for (int64_t i = 0; i < dk; i++) {
            const float *in = S_in + i * dv + j0;
            float *row = S + i * dv + j0;
            __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
            if (S_in_next)
                for (int l = 0; l < 4; l++) _mm_prefetch((const char *)(S_in_next + i * dv + j0 + 16 * l), _MM_HINT_T1);
            for (int x = 0; x < 8; x++) {
                __m256 sv = _mm256_fmadd_ps(ki, _mm256_load_ps(ud + 8 * x), _mm256_mul_ps(_mm256_loadu_ps(in + 8 * x), decay));
                if (nt)
                    _mm256_stream_ps(row + 8 * x, sv);
                else
                    _mm256_storeu_ps(row + 8 * x, sv);
                acc[x] = _mm256_fmadd_ps(sv, qi, acc[x]);
            }
        }
        for (int x = 0; x < 8; x++) _mm256_storeu_ps(o + j0 + 8 * x, acc[x]);
    }
    if (nt) _mm_sfence(); /* order the streamed state before the pool's completion flag */
}

/* More tokens: as kern_avx512.c's, in chunks of 32 columns (4 vectors). A chunk is worked on in W
 * (the scratch, dk x 32 floats, L1-resident for dk <= 128; S's own columns when there is none):
 * the first pass reads S_in's chunk, decays it and forms u for token 0; the pass of token t applies
 * its update and output, fused with the decay and u of token t + 1; the last token's pass writes S
 * instead of W (non-temporal stores when W is the scratch, S 32-byte aligned and dv a multiple of
 * 8), while the token passes prefetch the next chunk (of this head, else of S_in_next) into L2.
 * Columns beyond the last whole chunk: cpu_deltanet_cols_generic. */
static void deltanet_head(float *S, const float *S_in, const float *q, const float *k, const float *v, const float *g,
                          const float *beta, float *o, int64_t n, int64_t dk, int64_t dv, int64_t qk_stride,
                          int64_t v_stride, int64_t gb_stride, const float *S_in_next, float *scratch) {
    if (n == 1 && dv % 64 == 0) {
        deltanet_decode_cols(S, S_in, q, k, v, cpu_exp(g[0]), beta[0], o, dk, dv, S_in_next);
        return;
    }
    const bool nt = scratch && ((uintptr_t)S & 31) == 0 && dv % 8 == 0;
    int64_t j0 = 0;
    for (; j0 + 32 <= dv; j0 += 32) {
        float *W = scratch ? scratch : S + j0;
        const int64_t ws = scratch ? 32 : dv;
        const float *pf = j0 + 32 < dv ? S_in + j0 + 32 : S_in_next; /* the chunk read next */
        int64_t pf_lines = !pf ? 0 : (j0 + 32 < dv ? dv - j0 - 32 : dv) > 16 ? 2 : 1;
        /* token 0: decay the old state into W and u = W^T k */
        __m256 decay = _mm256_set1_ps(cpu_exp(g[0])), u[4], s[4];
        for (int j = 0; j < 4; j++) u[j] = _mm256_setzero_ps();
        for (int64_t i = 0; i < dk; i++) {
            __m256 ki = _mm256_set1_ps(k[i]);
            for (int j = 0; j < 4; j++) {
                s[j] = _mm256_mul_ps(_mm256_loadu_ps(S_in + j0 + i * dv + 8 * j), decay);
                _mm256_storeu_ps(W + i * ws + 8 * j, s[j]);
                u[j] = _mm256_fmadd_ps(s[j], ki, u[j]);
            }
        }
        for (int64_t t = 0; t < n; t++) {
            const float *qt = q + t * qk_stride, *kt = k + t * qk_stride, *vt = v + t * v_stride + j0;
            float *ot = o + t * v_stride + j0;
            const bool last = t + 1 == n;
            /* delta_t = beta (v - u) */
            __m256 bb = _mm256_set1_ps(beta[t * gb_stride]), d[4], acc[4];
            for (int j = 0; j < 4; j++) {
                d[j] = _mm256_mul_ps(bb, _mm256_sub_ps(_mm256_loadu_ps(vt + 8 * j), u[j]));
                acc[j] = u[j] = _mm256_setzero_ps();
            }
            const float *kn = last ? kt : k + (t + 1) * qk_stride;
            decay = _mm256_set1_ps(last ? 1.0f : cpu_exp(g[(t + 1) * gb_stride]));
            float *dst = last ? S + j0 : W;
            const int64_t ds = last ? dv : ws;
            for (int64_t i = 0; i < dk; i++) {
                for (int64_t l = t; l < pf_lines; l += n)
                    _mm_prefetch((const char *)(pf + i * dv + 16 * l), _MM_HINT_T1);
                __m256 ki = _mm256_set1_ps(kt[i]), qi = _mm256_set1_ps(qt[i]), kn_i = _mm256_set1_ps(kn[i]);
                for (int j = 0; j < 4; j++) {
                    s[j] = _mm256_fmadd_ps(ki, d[j], _mm256_loadu_ps(W + i * ws + 8 * j));
                    acc[j] = _mm256_fmadd_ps(s[j], qi, acc[j]);
                    if (!last) { /* token t + 1: decay, then u = S^T k */
                        s[j] = _mm256_mul_ps(s[j], decay);
                        u[j] = _mm256_fmadd_ps(s[j], kn_i, u[j]);
                    }
                    if (last && nt)
                        _mm256_stream_ps(dst + i * ds + 8 * j, s[j]);
                    else
                        _mm256_storeu_ps(dst + i * ds + 8 * j, s[j]);
                }
            }
            for (int j = 0; j < 4; j++) _mm256_storeu_ps(ot + 8 * j, acc[j]);
        }
    }
    if (j0 < dv)
        cpu_deltanet_cols_generic(S, S_in, q, k, v, g, beta, o, n, dk, dv, qk_stride, v_stride, gb_stride, j0, dv);
    if (nt) _mm_sfence(); /* order the streamed state before the pool's completion flag */
}

static void conv_row(float *y, const float *x, int64_t ldx, const float *w, int64_t wsc, int64_t wsk, int64_t C,
                     int64_t K) {
    const __m256i gidx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)wsc));
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t kk = 0; kk < K; kk++) {
            const float *wk = w + c * wsc + kk * wsk;
            __m256 wv = wsc == 1 ? _mm256_loadu_ps(wk) : _mm256_i32gather_ps(wk, gidx, 4);
            acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + kk * ldx + c), acc);
        }
        _mm256_storeu_ps(y + c, acc);
    }
    for (; c < C; c++) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < K; kk++) acc = fmaf(w[c * wsc + kk * wsk], x[kk * ldx + c], acc);
        y[c] = acc;
    }
}

/* ---- elementwise and norms: tails through a zero-padded 8-lane buffer (same lane function) ---- */

INLINE __m256 silu8(__m256 x) {
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

static void vec_add(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i]; /* vectorised by the compiler */
}

static void vec_mul(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

static void vec_swiglu(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = lanes(n - i);
        __m256 r = _mm256_mul_ps(silu8(_mm256_maskload_ps(a + i, m)), _mm256_maskload_ps(b + i, m));
        store_lanes(y + i, n - i, r);
    }
}

/* cpu.h's GEGLU: x / (1 + e^-(u + u)) · b, u = 0.7978845608 (x + 0.044715 ((x x) x)). */
static void vec_geglu(float *y, const float *a, const float *b, int64_t n) {
    const __m256 c0 = _mm256_set1_ps(0.7978845608f), c1 = _mm256_set1_ps(0.044715f), one = _mm256_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = lanes(n - i);
        __m256 x = _mm256_maskload_ps(a + i, m);
        __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        __m256 u = _mm256_mul_ps(c0, _mm256_add_ps(x, _mm256_mul_ps(c1, x3)));
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_add_ps(u, u)));
        __m256 r = _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_maskload_ps(b + i, m));
        store_lanes(y + i, n - i, r);
    }
}

static void vec_unary(g_op op, float *y, const float *x, int64_t n, float scale) {
    if (op != G_OP_SCALE && op != G_OP_SILU && op != G_OP_SIGMOID) {
        cpu_vec_unary_generic(op, y, x, n, scale);
        return;
    }
    const __m256 one = _mm256_set1_ps(1.0f), vs = _mm256_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = lanes(n - i);
        __m256 v = _mm256_maskload_ps(x + i, m), r;
        if (op == G_OP_SCALE) r = _mm256_mul_ps(v, vs);
        else if (op == G_OP_SILU) r = silu8(v);
        else r = _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
        store_lanes(y + i, n - i, r);
    }
}

static void row_norm(g_op op, float *y, const float *x, const float *w, const float *z, int64_t n, float eps,
                     float w_offset) {
    __m256 lo = _mm256_setzero_ps(), hi = lo;
    for (int64_t i = 0; i < n; i += 16) {
        __m256 a, b;
        load_x16(x + i, n - i, &a, &b);
        lo = _mm256_fmadd_ps(a, a, lo);
        hi = _mm256_fmadd_ps(b, b, hi);
    }
    float ss = hsum16(lo, hi);
    float inv = op == G_OP_L2NORM ? 1.0f / sqrtf(ss + eps) : 1.0f / sqrtf(ss / (float)n + eps);
    __m256 vi = _mm256_set1_ps(inv), off = _mm256_set1_ps(w_offset);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = lanes(n - i);
        __m256 xi = _mm256_mul_ps(_mm256_maskload_ps(x + i, m), vi), r;
        if (op == G_OP_L2NORM || (op == G_OP_RMSNORM && !w)) r = xi;
        else if (op == G_OP_RMSNORM) r = _mm256_mul_ps(xi, _mm256_add_ps(_mm256_maskload_ps(w + i, m), off));
        else r = _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(w + i, m), xi), silu8(_mm256_maskload_ps(z + i, m)));
        store_lanes(y + i, n - i, r);
    }
}

/* ---- matmul on repacked tiles (kern_tiles.c): a tile's 16 rows as two halves of 8 lanes -------- */

/* acc plus the exact per-lane sums of 4 u8 weights (bytes of w) times 4 int8 activations (bytes of
 * a): one vpdpbusd with AVX-VNNI, else vpmaddubsw + vpmaddwd, whose 16-bit pair sums cannot saturate
 * for the weights this file feeds them (nibbles, Q6_K's 6-bit values: at most 2·63·127). */
INLINE __m256i dpbusd(__m256i acc, __m256i w, __m256i a) {
#ifdef SLM_AVX2_VNNI
    return _mm256_dpbusd_avx_epi32(acc, w, a);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)));
#endif
}

/* Without vpdpbusd, vpmaddubsw's 16-bit pair sums of u8 weights times int8 activations (|a| <= 128)
 * are added in 16 bits before vpmaddwd widens them, as long as the sum stays below 2^15: up to 16
 * products of 4-bit weights (Q4_0, Q4_1, Q4_K: 16 * 15 * 128), 8 of 5-bit ones (Q5_0, Q5_1), 4 of
 * Q6_K's 6-bit ones; the integer sums, and so the results, are those of dpbusd. */
#ifdef SLM_AVX2_VNNI
#define SUM16 0
#else
#define SUM16 1
#endif

/* An empty asm that takes v in a register and may change it: the compiler cannot move v's
 * computation past this point nor merge it with later sums. The multi-column kernels use it so
 * that each column's 16-bit sums are formed as the weights are unpacked; left alone, GCC
 * reassociates all the columns' products into trees at the last use and spills them (nc = 4
 * ran at 5.4x one column's time instead of ~2x). */
INLINE void keep_in_reg(__m256i *v) { __asm__("" : "+x"(*v)); }

/* dpbusd with the 4 activations at a broadcast to every lane. */
INLINE __m256i dot4(__m256i acc, __m256i w, const uint8_t *a) { return dpbusd(acc, w, _mm256_set1_epi32(ldi(a))); }

/* Exact per-lane sums over one 32-block of Q8_0 tile bytes (w ^ 0x80, 8 vectors 64 bytes apart at
 * q) against the activations at a, aux the block's -128·Σa: as offset-binary u8 with AVX-VNNI,
 * else as int8 |w| times sign(a, w), which cannot saturate 16 bits. */
INLINE __m256i q8_block(const uint8_t *q, const uint8_t *a, int32_t aux) {
#ifdef SLM_AVX2_VNNI
    __m256i is = _mm256_set1_epi32(aux);
    for (int j = 0; j < 8; j++) is = dot4(is, _mm256_loadu_si256((const __m256i *)(q + 64 * j)), a + 4 * j);
    return is;
#else
    (void)aux;
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    __m256i is = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        __m256i ws = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + 64 * j)), flip);
        __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(ws), _mm256_sign_epi8(_mm256_set1_epi32(ldi(a + 4 * j)), ws));
        is = _mm256_add_epi32(is, _mm256_madd_epi16(p, ones));
    }
    return is;
#endif
}

/* Q5 tiles: the 5th bits of elements s..s+3 (s = 4j for the low nibbles of quant vector j, 16 +
 * 4j for its high ones) at bit 4 of each lane's bytes 0..3, from the tile's regrouped bits (bit j of
 * byte i for element 4j + i, bit 4 + j for 16 + 4j + i; kern_tiles.c): one shift within the bytes. */
INLINE __m256i q5_bits4(__m256i qh, int s) {
    const __m256i b16 = _mm256_set1_epi8(0x10);
    int j = (s & 15) / 4;
    if (s < 16) return _mm256_and_si256(_mm256_slli_epi32(qh, 4 - j), b16);
    return _mm256_and_si256(j ? _mm256_srli_epi32(qh, j) : qh, b16);
}

INLINE bool is_q5(uint32_t wt) { return wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1; }
/* 32-block types with Q4_1's f16 mins; with an int32 aux offset in the activations (Q4_0, Q5_0). */
INLINE bool has_mins(uint32_t wt) { return wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1; }
INLINE bool has_aux(uint32_t wt) { return wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q5_0; }

/* Rows 8h..8h+7 of one 32-block tile against one column (cpu.h's canonical arithmetic). */
INLINE __m256 tile_half_q32(uint32_t wt, const uint8_t *pk, cpu_tile_sub sub, int64_t nb, int64_t k,
                            const uint8_t *ac, int h, pf_state *pf) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, pk += sub.stride) {
        if (pf) pf_advance(pf, (const char *)pk + sub.stride + PF_LEAD);
        const uint8_t *q = pk + sub.quants, *sc = pk + sub.scales;
        const uint8_t *a = ac + 32 * b;
        __m256i is = _mm256_setzero_si256();
        if (wt == SLM_DTYPE_Q8_0) {
            is = q8_block(q + 32 * h, a, ldi(ac + k + 4 * nb + 4 * b));
        } else {
            __m256i qh = is_q5(wt) ? _mm256_loadu_si256((const __m256i *)(q + 256 + 32 * h)) : _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * j + 32 * h));
                __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (is_q5(wt)) {
                    lo = _mm256_or_si256(lo, q5_bits4(qh, 4 * j));
                    hi = _mm256_or_si256(hi, q5_bits4(qh, 16 + 4 * j));
                }
                is = dot4(is, lo, a + 4 * j);
                is = dot4(is, hi, a + 16 + 4 * j);
            }
            if (has_aux(wt)) is = _mm256_add_epi32(is, _mm256_set1_epi32(ldi(ac + k + 4 * nb + 4 * b)));
        }
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 16 * h)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, _mm256_set1_ps(ldf(ac + k + 4 * b))), acc);
        if (has_mins(wt))
            acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 32 + 16 * h))),
                                  _mm256_set1_ps(ldf(ac + k + 4 * nb + 4 * b)), acc);
    }
    return acc;
}

/* One column against blocks [b0, b1) of a pair of tiles at pk, quarters [Q0, Q1) of its 32 rows (8
 * lanes each): one sequential pass, each activation broadcast shared by the quarters; the
 * arithmetic of each row is tile_half_q32's, continued from the sums in y when b0 > 0. y: row 0 of
 * the pair, nr rows from there are valid. Decode takes all four quarters at once (+10% tg against
 * one at a time); prefill goes through pair_quarter_cols. */
INLINE void pair_col_q32(const uint32_t wt, const int Q0, const int Q1, const uint8_t *pk, int64_t b0, int64_t b1,
                         int64_t nb, int64_t k, const uint8_t *ac, float *y, int64_t nr, pf_state *pf) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const size_t stride = 2 * cpu_tile_block_bytes(wt), qb = cpu_tile_quant_bytes(wt);
    const size_t sb = has_mins(wt) ? 64 : 32;
    __m256 acc[4];
    for (int q = Q0; q < Q1; q++) acc[q] = b0 ? _mm256_maskload_ps(y + 8 * q, lanes(nr - 8 * q)) : _mm256_setzero_ps();
    pk += (size_t)b0 * stride;
    for (int64_t b = b0; b < b1; b++, pk += stride) {
        if (pf) pf_advance(pf, (const char *)pk + stride + PF_LEAD);
        const uint8_t *a = ac + 32 * b;
        __m256i is[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        if (wt == SLM_DTYPE_Q8_0) {
            int32_t aux = ldi(ac + k + 4 * nb + 4 * b);
            for (int q = Q0; q < Q1; q++) is[q] = q8_block(pk + (size_t)(q >> 1) * qb + 32 * (q & 1), a, aux);
        } else {
            __m256i qh[4];
            if (is_q5(wt))
                for (int q = Q0; q < Q1; q++)
                    qh[q] = _mm256_loadu_si256((const __m256i *)(pk + (size_t)(q >> 1) * qb + 256 + 32 * (q & 1)));
            for (int j = 0; j < 4; j++) {
                __m256i lo = _mm256_set1_epi32(ldi(a + 4 * j)), hi = _mm256_set1_epi32(ldi(a + 16 + 4 * j));
                for (int q = Q0; q < Q1; q++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(pk + (size_t)(q >> 1) * qb + 64 * j + 32 * (q & 1)));
                    __m256i vl = _mm256_and_si256(v, m4), vh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if (is_q5(wt)) {
                        vl = _mm256_or_si256(vl, q5_bits4(qh[q], 4 * j));
                        vh = _mm256_or_si256(vh, q5_bits4(qh[q], 16 + 4 * j));
                    }
                    is[q] = dpbusd(is[q], vl, lo);
                    is[q] = dpbusd(is[q], vh, hi);
                }
            }
            if (has_aux(wt)) {
                __m256i aux = _mm256_set1_epi32(ldi(ac + k + 4 * nb + 4 * b));
                for (int q = Q0; q < Q1; q++) is[q] = _mm256_add_epi32(is[q], aux);
            }
        }
        __m256 da = _mm256_set1_ps(ldf(ac + k + 4 * b));
        for (int q = Q0; q < Q1; q++) {
            const uint8_t *sc = pk + 2 * qb + (size_t)(q >> 1) * sb + 16 * (q & 1);
            __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sc));
            acc[q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[q]), _mm256_mul_ps(dw, da), acc[q]);
            if (has_mins(wt))
                acc[q] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 32))),
                                         _mm256_set1_ps(ldf(ac + k + 4 * nb + 4 * b)), acc[q]);
        }
    }
    for (int q = Q0; q < Q1; q++) store_lanes(y + 8 * q, nr - 8 * q, acc[q]);
}

/* NC (1..4) columns against quarter Q (8 rows) of a tile pair over blocks [b0, b1), the prefill
 * case: each block's weights are loaded and unpacked once for all NC columns. Per row and column
 * the arithmetic of pair_col_q32, continued from the sums in y (column c at y + c * ldy, row 0 of
 * the pair) when b0 > 0; nr rows from row 0 are valid. Block b's step prefetches up to pf_to +
 * (b - b0 + 1) * pf_step (mm_quant_packed paces the stream over all passes of a chunk). */
INLINE void pair_quarter_cols(const uint32_t wt, const int NC, const int Q, const uint8_t *pk, int64_t b0, int64_t b1,
                              int64_t nb, int64_t k, const uint8_t *act, size_t act_stride, float *y, int64_t ldy,
                              int64_t nr, pf_state *pf, const char *pf_to, size_t pf_step) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), rows = lanes(nr - 8 * Q);
    const size_t stride = 2 * cpu_tile_block_bytes(wt), qb = cpu_tile_quant_bytes(wt);
    const size_t sb = has_mins(wt) ? 64 : 32;
    const uint8_t *ac[4];
    __m256 acc[4];
    for (int c = 0; c < NC; c++) {
        ac[c] = act + (size_t)c * act_stride;
        acc[c] = b0 ? _mm256_maskload_ps(y + c * ldy + 8 * Q, rows) : _mm256_setzero_ps();
    }
    const uint8_t *blk = pk + (size_t)b0 * stride;
    for (int64_t b = b0; b < b1; b++, blk += stride) {
        pf_advance(pf, pf_to + (size_t)(b - b0 + 1) * pf_step);
        const uint8_t *qp = blk + (size_t)(Q >> 1) * qb + 32 * (Q & 1);
        __m256i is[4];
        if (wt == SLM_DTYPE_Q8_0) {
#ifdef SLM_AVX2_VNNI
            for (int c = 0; c < NC; c++) is[c] = _mm256_set1_epi32(ldi(ac[c] + k + 4 * nb + 4 * b));
            for (int j = 0; j < 8; j++) {
                __m256i w = _mm256_loadu_si256((const __m256i *)(qp + 64 * j));
                for (int c = 0; c < NC; c++) is[c] = dot4(is[c], w, ac[c] + 32 * b + 4 * j);
            }
#else
            const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
            for (int c = 0; c < NC; c++) is[c] = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                __m256i ws = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(qp + 64 * j)), flip);
                __m256i wa = _mm256_abs_epi8(ws);
                for (int c = 0; c < NC; c++) {
                    __m256i bc = _mm256_set1_epi32(ldi(ac[c] + 32 * b + 4 * j));
                    is[c] = _mm256_add_epi32(is[c], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(bc, ws)), ones));
                    keep_in_reg(&is[c]);
                }
            }
#endif
        } else {
            __m256i qh = is_q5(wt) ? _mm256_loadu_si256((const __m256i *)(qp + 256)) : _mm256_setzero_si256();
            __m256i s16[4];
            for (int c = 0; c < NC; c++) is[c] = s16[c] = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(qp + 64 * j));
                __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (is_q5(wt)) {
                    lo = _mm256_or_si256(lo, q5_bits4(qh, 4 * j));
                    hi = _mm256_or_si256(hi, q5_bits4(qh, 16 + 4 * j));
                }
                for (int c = 0; c < NC; c++) {
                    const uint8_t *aj = ac[c] + 32 * b + 4 * j;
                    if (SUM16) {
                        __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(ldi(aj))),
                                                     _mm256_maddubs_epi16(hi, _mm256_set1_epi32(ldi(aj + 16))));
                        s16[c] = _mm256_add_epi16(s16[c], p);
                        keep_in_reg(&s16[c]);
                    } else {
                        is[c] = dot4(is[c], lo, aj);
                        is[c] = dot4(is[c], hi, aj + 16);
                    }
                }
                if (SUM16 && (j == 3 || (is_q5(wt) && j == 1)))
                    for (int c = 0; c < NC; c++) {
                        is[c] = _mm256_add_epi32(is[c], _mm256_madd_epi16(s16[c], _mm256_set1_epi16(1)));
                        s16[c] = _mm256_setzero_si256();
                    }
            }
            if (has_aux(wt))
                for (int c = 0; c < NC; c++) is[c] = _mm256_add_epi32(is[c], _mm256_set1_epi32(ldi(ac[c] + k + 4 * nb + 4 * b)));
        }
        const uint8_t *sc = blk + 2 * qb + (size_t)(Q >> 1) * sb + 16 * (Q & 1);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sc));
        for (int c = 0; c < NC; c++) {
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[c]), _mm256_mul_ps(dw, _mm256_set1_ps(ldf(ac[c] + k + 4 * b))),
                                     acc[c]);
            if (has_mins(wt))
                acc[c] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 32))),
                                         _mm256_set1_ps(ldf(ac[c] + k + 4 * nb + 4 * b)), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) store_lanes(y + c * ldy + 8 * Q, nr - 8 * Q, acc[c]);
}

/* fn(type, ...) with a 32-block weight type as a constant, so fn's loads and branches fold */
#define Q32_CALL(fn, wt, ...)                                                                          \
    do {                                                                                               \
        if ((wt) == SLM_DTYPE_Q4_0) fn(SLM_DTYPE_Q4_0, __VA_ARGS__);                                   \
        else if ((wt) == SLM_DTYPE_Q4_1) fn(SLM_DTYPE_Q4_1, __VA_ARGS__);                              \
        else if ((wt) == SLM_DTYPE_Q5_0) fn(SLM_DTYPE_Q5_0, __VA_ARGS__);                              \
        else if ((wt) == SLM_DTYPE_Q5_1) fn(SLM_DTYPE_Q5_1, __VA_ARGS__);                              \
        else fn(SLM_DTYPE_Q8_0, __VA_ARGS__);                                                          \
    } while (0)
/* pair_quarter_cols with the weight type, column count (1..4) and quarter as constants */
#define PQC(wt, nc, Q, ...)                                                                            \
    do {                                                                                               \
        if ((nc) == 4) Q32_CALL(pair_quarter_cols, wt, 4, Q, __VA_ARGS__);                             \
        else if ((nc) == 3) Q32_CALL(pair_quarter_cols, wt, 3, Q, __VA_ARGS__);                        \
        else if ((nc) == 2) Q32_CALL(pair_quarter_cols, wt, 2, Q, __VA_ARGS__);                        \
        else Q32_CALL(pair_quarter_cols, wt, 1, Q, __VA_ARGS__);                                       \
    } while (0)

/* 8 bytes at p widened to int32 lanes (u8 or int8). */
INLINE __m256i u8x8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
INLINE __m256i i8x8(const uint8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

/* Rows 8h..8h+7 of one K-quant tile against NC (1..4) columns (cpu.h's canonical arithmetic; the
 * weights of each super-block are loaded and unpacked once for all columns): acc[c] for column c at
 * act + c * act_stride. */
INLINE void tile_half_kquant(uint32_t wt, const int NC, const uint8_t *pk, int64_t nbk, const uint8_t *act,
                             size_t act_stride, int h, __m256 acc[4], pf_state *pf) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const bool q4 = wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K, q5 = wt == SLM_DTYPE_Q5_K;
    const size_t sbb = q5 ? KT_Q5K : q4 ? KT_Q4K : KT_Q6K;
    const __m256i b16 = _mm256_set1_epi8(0x10);
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nbk; b++, pk += sbb) {
        const uint8_t *ab[4], *a[4];
        __m256i is[4], corr[4];
        __m256 da[4];
        for (int c = 0; c < NC; c++) {
            ab[c] = act + (size_t)c * act_stride + (size_t)b * CPU_Q8K_BYTES;
            a[c] = ab[c] + 4;
            is[c] = corr[c] = _mm256_setzero_si256();
            da[c] = _mm256_set1_ps(ldf(ab[c]));
        }
        if (q4) {
            for (int ch = 0; ch < 4; ch++) {
                if (pf) pf_advance(pf, (const char *)pk + (size_t)(ch + 1) * sbb / 4 + PF_LEAD);
                __m256i lo[4], hi[4];
                for (int c = 0; c < NC; c++) lo[c] = hi[c] = _mm256_setzero_si256();
                for (int g = 0; g < 8; g++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(pk + 64 * (8 * ch + g) + 32 * h));
                    __m256i vl = _mm256_and_si256(v, m4), vh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if (q5) { /* bits 2ch, 2ch + 1 of the qh bytes to bit 4 (kern_common.h) */
                        __m256i qh = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)(pk + KT_Q4K + 64 * g + 32 * h)),
                                                      _mm_cvtsi32_si128(2 * ch));
                        vl = _mm256_or_si256(vl, _mm256_and_si256(_mm256_slli_epi16(qh, 4), b16));
                        vh = _mm256_or_si256(vh, _mm256_and_si256(_mm256_slli_epi16(qh, 3), b16));
                    }
                    for (int c = 0; c < NC; c++) {
                        if (SUM16 && !q5) {
                            lo[c] = _mm256_add_epi16(lo[c], _mm256_maddubs_epi16(vl, _mm256_set1_epi32(ldi(a[c] + 64 * ch + 4 * g))));
                            hi[c] = _mm256_add_epi16(hi[c], _mm256_maddubs_epi16(vh, _mm256_set1_epi32(ldi(a[c] + 64 * ch + 32 + 4 * g))));
                            keep_in_reg(&lo[c]);
                            keep_in_reg(&hi[c]);
                        } else {
                            lo[c] = dot4(lo[c], vl, a[c] + 64 * ch + 4 * g);
                            hi[c] = dot4(hi[c], vh, a[c] + 64 * ch + 32 + 4 * g);
                        }
                    }
                }
                __m256i slo = u8x8(pk + 2048 + 32 * ch + 8 * h), shi = u8x8(pk + 2048 + 32 * ch + 16 + 8 * h);
                if (SUM16 && !q5) { /* 16-bit sums of 8 pairs times the scale in both halves of each lane */
                    __m256i slo16 = _mm256_or_si256(slo, _mm256_slli_epi32(slo, 16));
                    __m256i shi16 = _mm256_or_si256(shi, _mm256_slli_epi32(shi, 16));
                    for (int c = 0; c < NC; c++)
                        is[c] = _mm256_add_epi32(is[c], _mm256_add_epi32(_mm256_madd_epi16(lo[c], slo16), _mm256_madd_epi16(hi[c], shi16)));
                } else
                    for (int c = 0; c < NC; c++)
                        is[c] = _mm256_add_epi32(is[c], _mm256_add_epi32(_mm256_mullo_epi32(lo[c], slo), _mm256_mullo_epi32(hi[c], shi)));
            }
            for (int sg = 0; sg < 8; sg++) { /* min times the two bsums of its 32 elements, one vpmaddwd */
                __m256i mn = u8x8(pk + 2176 + 16 * sg + 8 * h);
                mn = _mm256_or_si256(mn, _mm256_slli_epi32(mn, 16));
                for (int c = 0; c < NC; c++)
                    corr[c] = _mm256_add_epi32(corr[c], _mm256_madd_epi16(mn, _mm256_set1_epi32(ldi(ab[c] + 260 + 4 * sg))));
            }
            __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pk + 2304 + 16 * h)));
            __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pk + 2336 + 16 * h)));
            for (int c = 0; c < NC; c++) {
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[c]), _mm256_mul_ps(d, da[c]), acc[c]);
                acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr[c]), _mm256_mul_ps(dmin, da[c]), acc[c]);
            }
        } else {
            for (int j = 0; j < 16; j++) {
                if (pf && j % 4 == 0) pf_advance(pf, (const char *)pk + (size_t)(j + 4) * sbb / 16 + PF_LEAD);
                const uint8_t *v = pk + 192 * j + 32 * h;
                __m256i L0 = _mm256_loadu_si256((const __m256i *)v), L1 = _mm256_loadu_si256((const __m256i *)(v + 64));
                __m256i H = _mm256_loadu_si256((const __m256i *)(v + 128));
                __m256i q0 = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
                __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4),
                                             _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
                __m256i q2 = _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(H, m30));
                __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4),
                                             _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
                __m256i sc = i8x8(pk + 3072 + 16 * j + 8 * h);
                __m256i sc16 = _mm256_blend_epi16(sc, _mm256_slli_epi32(sc, 16), 0xAA); /* in both halves */
                for (int c = 0; c < NC; c++) {
                    const uint8_t *aj = a[c] + 16 * j;
                    if (SUM16) { /* 16-bit sums of 2 pairs times the scale */
                        __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(q0, _mm256_set1_epi32(ldi(aj))),
                                                       _mm256_maddubs_epi16(q1, _mm256_set1_epi32(ldi(aj + 4))));
                        __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(q2, _mm256_set1_epi32(ldi(aj + 8))),
                                                       _mm256_maddubs_epi16(q3, _mm256_set1_epi32(ldi(aj + 12))));
                        is[c] = _mm256_add_epi32(is[c], _mm256_add_epi32(_mm256_madd_epi16(p01, sc16), _mm256_madd_epi16(p23, sc16)));
                        keep_in_reg(&is[c]);
                    } else {
                        __m256i sm = dot4(dot4(dot4(dot4(_mm256_setzero_si256(), q0, aj), q1, aj + 4), q2, aj + 8), q3, aj + 12);
                        is[c] = _mm256_add_epi32(is[c], _mm256_mullo_epi32(sm, sc));
                    }
                }
            }
            for (int m = 0; m < 8; m++) { /* scales 2m, 2m + 1 times their bsums, one vpmaddwd */
                __m256i sp = _mm256_blend_epi16(i8x8(pk + 3072 + 32 * m + 8 * h),
                                                _mm256_slli_epi32(i8x8(pk + 3072 + 32 * m + 16 + 8 * h), 16), 0xAA);
                for (int c = 0; c < NC; c++)
                    corr[c] = _mm256_add_epi32(corr[c], _mm256_madd_epi16(sp, _mm256_set1_epi32(ldi(ab[c] + 260 + 4 * m))));
            }
            __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pk + 3328 + 16 * h)));
            for (int c = 0; c < NC; c++)
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(is[c], _mm256_slli_epi32(corr[c], 5))),
                                         _mm256_mul_ps(d, da[c]), acc[c]);
        }
    }
}

/* Blocks of a tile pair per column pass in prefill: 32 x 576 bytes (Q4_0) to 32 x 1088 (Q8_0). */
#define PAIR_CHUNK_BLOCKS 32

static void mm_quant_packed(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                            size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    bool kq = cpu_wt_is_k(wt);
    int64_t nb = k / CPU_QK, ntiles = (nr + 15) / 16;
    size_t tile_bytes = (size_t)nb * cpu_tile_block_bytes(wt);
    pf_state pf = {(const char *)pk, (const char *)pk + (size_t)ntiles * tile_bytes};
    for (int64_t t = 0; t < ntiles; t++) {
        if (!kq && (t | 1) < ntiles) { /* both tiles of a pair at once, column by column */
            const uint8_t *tp = pk + (size_t)t * tile_bytes;
            /* blocks in chunks that stay in L1 while every column passes over them */
            for (int64_t b0 = 0; b0 < nb; b0 += PAIR_CHUNK_BLOCKS) {
                int64_t b1 = b0 + PAIR_CHUNK_BLOCKS < nb ? b0 + PAIR_CHUNK_BLOCKS : nb;
                if (ncols == 1) {
                    Q32_CALL(pair_col_q32, wt, 0, 4, tp, b0, b1, nb, k, act, y + 16 * t, nr - 16 * t, &pf);
                    continue;
                }
                /* a quarter of the pair against 4 columns at a time, weights unpacked once per block.
                 * Every pass reads the whole chunk, and the passes together take longer than
                 * streaming it, so the prefetch runs one chunk ahead, paced evenly over all of
                 * them (a lead only during the first pass left the stream idle for the rest). */
                const size_t chunk = (size_t)(b1 - b0) * 2 * cpu_tile_block_bytes(wt);
                const size_t passes = 4 * (size_t)((ncols + 3) / 4), step = chunk / passes / (size_t)(b1 - b0) + 1;
                const char *ahead = (const char *)(tp + (size_t)b0 * 2 * cpu_tile_block_bytes(wt) + chunk);
                for (int64_t c = 0; c < ncols; c += 4) {
                    int64_t nc = ncols - c < 4 ? ncols - c : 4;
                    const uint8_t *ac = act + (size_t)c * act_stride;
                    float *yc = y + c * ldy + 16 * t;
                    size_t pass = (size_t)c;
                    PQC(wt, nc, 0, tp, b0, b1, nb, k, ac, act_stride, yc, ldy, nr - 16 * t, &pf, ahead + (pass + 0) * chunk / passes, step);
                    PQC(wt, nc, 1, tp, b0, b1, nb, k, ac, act_stride, yc, ldy, nr - 16 * t, &pf, ahead + (pass + 1) * chunk / passes, step);
                    PQC(wt, nc, 2, tp, b0, b1, nb, k, ac, act_stride, yc, ldy, nr - 16 * t, &pf, ahead + (pass + 2) * chunk / passes, step);
                    PQC(wt, nc, 3, tp, b0, b1, nb, k, ac, act_stride, yc, ldy, nr - 16 * t, &pf, ahead + (pass + 3) * chunk / passes, step);
                }
            }
            t++;
            continue;
        }
        /* 32-block types: tile t within its pair (kern_tiles.c); K types: tiles one after another */
        const uint8_t *tp = kq ? pk + (size_t)t * tile_bytes : pk + (size_t)(t & ~(int64_t)1) * tile_bytes;
        cpu_tile_sub sub = kq ? (cpu_tile_sub){0, 0, 0} : cpu_tile_sub_of(wt, t, ntiles);
        /* the first pass over a tile (a pair's first tile) streams it from memory (prefetched);
         * later ones hit cache */
        if (kq) { /* four columns at a time */
            for (int64_t c = 0; c < ncols; c += 4)
                for (int h = 0; h < 2 && 16 * t + 8 * h < nr; h++) {
                    pf_state *p = c == 0 && h == 0 ? &pf : NULL;
                    __m256 acc[4];
                    const uint8_t *ac = act + (size_t)c * act_stride;
                    int64_t nc = ncols - c < 4 ? ncols - c : 4;
                    if (nc == 4) tile_half_kquant(wt, 4, tp, k / CPU_QK_K, ac, act_stride, h, acc, p);
                    else if (nc == 3) tile_half_kquant(wt, 3, tp, k / CPU_QK_K, ac, act_stride, h, acc, p);
                    else if (nc == 2) tile_half_kquant(wt, 2, tp, k / CPU_QK_K, ac, act_stride, h, acc, p);
                    else tile_half_kquant(wt, 1, tp, k / CPU_QK_K, ac, act_stride, h, acc, p);
                    for (int64_t cc = c; cc < c + nc; cc++)
                        store_lanes(y + cc * ldy + 16 * t + 8 * h, nr - 16 * t - 8 * h, acc[cc - c]);
                }
            continue;
        }
        for (int64_t c = 0; c < ncols; c++)
            for (int h = 0; h < 2 && 16 * t + 8 * h < nr; h++) {
                const uint8_t *ac = act + (size_t)c * act_stride;
                pf_state *p = c == 0 && h == 0 && (t & 1) == 0 ? &pf : NULL;
                __m256 acc = tile_half_q32(wt, tp, sub, nb, k, ac, h, p);
                store_lanes(y + c * ldy + 16 * t + 8 * h, nr - 16 * t - 8 * h, acc);
            }
    }
}

#ifdef SLM_AVX2_VNNI
#define KERN_LEVEL CPU_ISA_AVX2_VNNI
#define KERN_ISA_GETTER cpu_isa_avx2_vnni
#else
#define KERN_LEVEL CPU_ISA_AVX2
#define KERN_ISA_GETTER cpu_isa_avx2
#endif

static const cpu_isa k_avx2 = {
    .level = KERN_LEVEL,
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

const cpu_isa *KERN_ISA_GETTER(void) { return &k_avx2; }

#elif defined(SLM_AVX2_VNNI)
const cpu_isa *cpu_isa_avx2_vnni(void) { return NULL; }
#else
const cpu_isa *cpu_isa_avx2(void) { return NULL; }
#endif
