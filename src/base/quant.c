/* quant.c — scalar quantisers of f32 rows (see quant.h). Each one follows llama.cpp's reference
 * (ggml-quants.c quantize_row_*_ref; for the K-quants with make_qkx2_quants / make_qx_quants, the
 * search llama-quantize runs without an importance matrix) operation by operation: the same
 * float expressions in the same order, no contraction into FMAs (the build sets
 * -ffp-contract=off; the pragma keeps it so for clang), the same tie rules (nearest_int rounds
 * half to even, roundf half away from zero, (int8_t) casts truncate). That is what makes the
 * bytes equal llama.cpp's; tests/py/test_quantize.py and tests/unit/test_quant.c check them.
 * Block layouts: docs/spec/gguf.md §3. Does not validate values (callers reject non-finite rows). */
#include "base/quant.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/dtype.h"
#include "base/half.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define QK 32    /* elements per block of the 32-block types */
#define QK_K 256 /* elements per super-block of the K-quants */
#define GROUP_MAX_EPS 1e-15f

static inline void st_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void st_f16(uint8_t *p, float f) { st_u16(p, f32_to_f16(f)); }
static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* ggml's nearest_int: round half to even through the 1.5·2^23 trick (|fval| <= 4194303). */
static inline int nearest_int(float fval) {
    float val = fval + 12582912.f;
    int32_t i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* ---- plain types ---------------------------------------------------------------------------- */

static void q_f16(const float *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) st_f16(y + 2 * i, x[i]);
}

static void q_bf16(const float *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) st_u16(y + 2 * i, f32_to_bf16(x[i]));
}

/* ---- 32-element blocks ---------------------------------------------------------------------- */

/* The signed element of largest magnitude (the first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* Packs 32 4-bit levels: qs[j] = l[j] | l[16 + j] << 4. */
static void pack_q4(const uint8_t *l, uint8_t *qs) {
    for (int j = 0; j < QK / 2; j++) qs[j] = (uint8_t)(l[j] | (l[QK / 2 + j] << 4));
}

/* Packs 32 5-bit levels: the low nibbles as pack_q4, bit 4 of level j as bit j of qh (u32 LE). */
static void pack_q5(const uint8_t *l, uint8_t *qh, uint8_t *qs) {
    uint32_t h = 0;
    for (int j = 0; j < QK / 2; j++) {
        qs[j] = (uint8_t)((l[j] & 0x0F) | ((l[QK / 2 + j] & 0x0F) << 4));
        h |= ((l[j] & 0x10u) >> 4) << j;
        h |= ((l[QK / 2 + j] & 0x10u) >> 4) << (j + QK / 2);
    }
    for (int b = 0; b < 4; b++) qh[b] = (uint8_t)(h >> (8 * b));
}

/* Q4_0 (half 8) and Q5_0 (half 16): d = max / -half with max the signed absolute maximum,
 * q = min(2·half - 1, trunc(x/d + half + 0.5)); written as d f16 | [qh u32 |] qs[16]. */
static void q_absmax(const float *x, uint8_t *y, int64_t nb, int half) {
    const size_t block_bytes = half == 8 ? 18 : 22;
    const float offset = (float)half + 0.5f;
    uint8_t l[QK];
    for (int64_t i = 0; i < nb; i++, x += QK, y += block_bytes) {
        const float d = signed_absmax(x, QK) / (float)-half;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        st_f16(y, d);
        for (int j = 0; j < QK; j++) l[j] = (uint8_t)imin(2 * half - 1, (int8_t)(x[j] * id + offset));
        if (half == 8) pack_q4(l, y + 2);
        else pack_q5(l, y + 2, y + 6);
    }
}

/* Q4_1 (nmax 15) and Q5_1 (nmax 31): d = (max - min) / nmax, m = min,
 * q = min(nmax, trunc((x - min)/d + 0.5)); written as d f16 | m f16 | [qh u32 |] qs[16]. (ggml's
 * Q5_1 has no min(): its q never exceeds 31 there either.) */
static void q_min_range(const float *x, uint8_t *y, int64_t nb, int nmax) {
    const size_t block_bytes = nmax == 15 ? 20 : 24;
    uint8_t l[QK];
    for (int64_t i = 0; i < nb; i++, x += QK, y += block_bytes) {
        float mn, mx;
        min_max(x, QK, &mn, &mx);
        const float d = (mx - mn) / (float)nmax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        st_f16(y, d);
        st_f16(y + 2, mn);
        for (int j = 0; j < QK; j++) l[j] = (uint8_t)imin(nmax, (int8_t)((x[j] - mn) * id + 0.5f));
        if (nmax == 15) pack_q4(l, y + 4);
        else pack_q5(l, y + 4, y + 8);
    }
}

/* Q8_0: d f16 | qs[32] int8; d = amax / 127, q = roundf(x/d). */
static void q_q8_0(const float *x, uint8_t *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK, y += 34) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        st_f16(y, d);
        for (int j = 0; j < QK; j++) y[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

/* ---- K-quants ------------------------------------------------------------------------------- */

/* The candidate searches below evaluate all candidate scales of a sub-block in one pass over its
 * elements, the candidates side by side (the inner loops run over candidates, so they vectorise):
 * each candidate's sums still add the elements in order 0..n-1 with ggml's expressions, and the
 * candidates are then compared in ggml's order, so the choice and the bytes are ggml's. */
#define QX_N 16       /* make_qx_quants: elements per sub-block (Q6_K) */
#define QX_CAND 18    /* its candidates is = -9..9 without 0 */
#define QKX2_N 32     /* make_qkx2_quants: elements per sub-block (Q4_K, Q5_K) */
#define QKX2_CAND 21  /* its candidates is = 0..nstep, nstep <= 20 */

/* Scale for n (<= QX_N) signed levels in [-nmax, nmax): the weighted least-squares scale over 19
 * candidate inverse scales around nmax/max (ggml make_qx_quants with rmse_type 1, weights x², no
 * qw). L gets the levels + nmax. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float w[QX_N], wx[QX_N]; /* ggml's w and w*x[i], the first factors of its products */
    for (int i = 0; i < n; ++i) {
        w[i] = x[i] * x[i];
        wx[i] = w[i] * x[i];
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        sumlx += wx[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    float isc[QX_CAND], slx[QX_CAND], sl2[QX_CAND];
    for (int c = 0; c < QX_CAND; ++c) {
        int is = c < 9 ? c - 9 : c - 8;
        isc[c] = -((float)nmax + 0.1f * (float)is) / max;
        slx[c] = sl2[c] = 0;
    }
    for (int i = 0; i < n; ++i) {
        for (int c = 0; c < QX_CAND; ++c) {
            int l = nearest_int(isc[c] * x[i]);
            float fl = (float)imax(-nmax, imin(nmax - 1, l));
            slx[c] += wx[i] * fl;
            sl2[c] += w[i] * fl * fl;
        }
    }
    int chosen = -1;
    for (int c = 0; c < QX_CAND; ++c) {
        if (sl2[c] > 0 && slx[c] * slx[c] > best * sl2[c]) {
            chosen = c;
            scale = slx[c] / sl2[c];
            best = scale * slx[c];
        }
    }
    if (chosen >= 0) {
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(isc[chosen] * x[i]);
            L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
        }
    }
    return scale;
}

/* make_qkx2_quants' candidates: the side-by-side evaluation of candidates [from, to). */
typedef struct qkx2_cands {
    float lv[QKX2_N][QKX2_CAND]; /* the level of element i under candidate c, as a float */
    float scale[QKX2_CAND], min[QKX2_CAND], err[QKX2_CAND];
    bool ok[QKX2_CAND]; /* D > 0: the fit exists */
} qkx2_cands;

/* Candidates [from, to) of make_qkx2_quants for the current min (ggml's loop body: the levels at
 * inverse scale (rmin + rdelta·c + nmax) / (max - min), their least-squares scale and min, and the
 * weighted squared error). */
static void qkx2_eval(qkx2_cands *k, int from, int to, int n, int nmax, const float *x, const float *weights,
                      float sum_w, float sum_x, float min, float max, float rmin, float rdelta) {
    float isc[QKX2_CAND], s_l[QKX2_CAND], s_l2[QKX2_CAND], s_xl[QKX2_CAND];
    for (int c = from; c < to; ++c) {
        isc[c] = (rmin + rdelta * (float)c + (float)nmax) / (max - min);
        s_l[c] = s_l2[c] = s_xl[c] = k->err[c] = 0;
    }
    for (int i = 0; i < n; ++i) {
        const float w = weights[i], xm = x[i] - min;
        for (int c = from; c < to; ++c) {
            float fl = (float)imax(0, imin(nmax, nearest_int(isc[c] * xm)));
            k->lv[i][c] = fl;
            s_l[c] += w * fl;
            s_l2[c] += w * fl * fl;
            s_xl[c] += w * fl * x[i];
        }
    }
    for (int c = from; c < to; ++c) {
        float D = sum_w * s_l2[c] - s_l[c] * s_l[c];
        k->ok[c] = D > 0;
        k->scale[c] = k->min[c] = 0;
        if (!k->ok[c]) continue;
        k->scale[c] = (sum_w * s_xl[c] - sum_x * s_l[c]) / D;
        k->min[c] = (s_l2[c] * sum_x - s_l[c] * s_xl[c]) / D;
        if (k->min[c] > 0) {
            k->min[c] = 0;
            k->scale[c] = s_xl[c] / s_l2[c];
        }
    }
    for (int i = 0; i < n; ++i) {
        for (int c = from; c < to; ++c) {
            float diff = k->scale[c] * k->lv[i][c] + k->min[c] - x[i];
            diff = diff * diff;
            k->err[c] += weights[i] * diff;
        }
    }
}

/* Scale and (negated) min for n (<= QKX2_N) unsigned levels [0, nmax] with weights: the weighted
 * least-squares fit over nstep+1 (<= QKX2_CAND) candidate inverse scales (ggml make_qkx2_quants,
 * use_mad off). In ggml a candidate that improves the error also replaces min, which the later
 * candidates' levels depend on; so the candidates after an improvement are evaluated again with
 * the new min (improvements are few: most candidates are evaluated once). */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                              float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * (float)L[i] + min - x[i];
        diff = diff * diff;
        best_error += weights[i] * diff;
    }
    qkx2_cands k;
    const int n_cand = nstep + 1;
    int from = 0;
    while (from < n_cand) {
        qkx2_eval(&k, from, n_cand, n, nmax, x, weights, sum_w, sum_x, min, max, rmin, rdelta);
        int c = from;
        from = n_cand;
        for (; c < n_cand; ++c) {
            if (!k.ok[c] || !(k.err[c] < best_error)) continue;
            for (int i = 0; i < n; ++i) L[i] = (uint8_t)k.lv[i][c];
            best_error = k.err[c];
            scale = k.scale[c];
            if (k.min[c] != min) { /* the later candidates change: evaluate them again */
                min = k.min[c];
                from = c + 1;
                break;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* The 6-bit scale and min of sub-block j from the 12 packed bytes of a Q4_K/Q5_K super-block. */
static void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per 32-element sub-block a scale and min from
 * make_qkx2_quants, both quantised to 6 bits against the super-block's d and dmin (f16), then
 * the levels L[256] recomputed from the rounded scales. scales12 gets the packed scales. */
static void kquant_scale_min(const float *x, int nmax, float rmin, int nstep, uint8_t *scales12, uint16_t *d16,
                             uint16_t *dmin16, uint8_t *L) {
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales12, 0, 12);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = (uint8_t)imin(63, ls);
        lm = (uint8_t)imin(63, lm);
        if (j < 4) {
            scales12[j] = ls;
            scales12[j + 4] = lm;
        } else {
            scales12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales12[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales12[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d16 = f32_to_f16(max_scale / 63.f);
    *dmin16 = f32_to_f16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales12, &sc, &m);
        const float d = f16_to_f32(*d16) * sc;
        if (d == 0.0f) continue;
        const float dm = f16_to_f32(*dmin16) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

/* Q4_K: d f16 | dmin f16 | scales[12] | qs[128]; qs[32c + l] = L[64c + l] | L[64c + 32 + l] << 4. */
static void q_q4_k(const float *x, uint8_t *y, int64_t nb) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K, y += 144) {
        uint16_t d16, dmin16;
        kquant_scale_min(x, 15, -1.f, 20, y + 4, &d16, &dmin16, L);
        st_u16(y, d16);
        st_u16(y + 2, dmin16);
        uint8_t *q = y + 16;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

/* Q5_K: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]; bit 4 of L[64c + l] is qh[l] bit 2c,
 * of L[64c + 32 + l] bit 2c + 1. */
static void q_q5_k(const float *x, uint8_t *y, int64_t nb) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K, y += 176) {
        uint16_t d16, dmin16;
        kquant_scale_min(x, 31, -0.5f, 15, y + 4, &d16, &dmin16, L);
        st_u16(y, d16);
        st_u16(y + 2, dmin16);
        uint8_t *qh = y + 16, *ql = y + 48;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < QK_K; n += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[n + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

/* Q6_K: ql[128] | qh[64] | scales[16] int8 | d f16; 16 sub-blocks of 16 with make_qx_quants
 * scales, quantised to int8 against d = max_scale / -128. */
static void q_q6_k(const float *x, uint8_t *y, int64_t nb) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += QK_K, y += 210) {
        uint8_t *ql = y, *qh = y + 128;
        int8_t *sc = (int8_t *)(y + 192);
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(y, 0, 210);
            continue;
        }
        float iscale = -128.f / max_scale;
        const uint16_t d16 = f32_to_f16(1 / iscale);
        st_u16(y + 208, d16);
        for (int ib = 0; ib < QK_K / 16; ++ib) sc[ib] = (int8_t)imin(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < QK_K / 16; ++j) {
            float d = f16_to_f32(d16) * sc[j];
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
            }
        }
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

bool quant_has_row(uint32_t type) {
    switch (type) {
    case SLM_DTYPE_F32: case SLM_DTYPE_F16: case SLM_DTYPE_BF16: case SLM_DTYPE_Q4_0: case SLM_DTYPE_Q4_1:
    case SLM_DTYPE_Q5_0: case SLM_DTYPE_Q5_1: case SLM_DTYPE_Q8_0: case SLM_DTYPE_Q4_K: case SLM_DTYPE_Q5_K:
    case SLM_DTYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

bool quant_row(uint32_t type, const float *x, void *dst, int64_t n) {
    const dtype_traits *t = dtype_traits_of(type);
    if (!t || !quant_has_row(type) || n < 0 || n % t->block_elems != 0) return false;
    uint8_t *y = dst;
    const int64_t nb = n / t->block_elems;
    switch (type) {
    case SLM_DTYPE_F32: memcpy(y, x, (size_t)n * sizeof(float)); break;
    case SLM_DTYPE_F16: q_f16(x, y, n); break;
    case SLM_DTYPE_BF16: q_bf16(x, y, n); break;
    case SLM_DTYPE_Q4_0: q_absmax(x, y, nb, 8); break;
    case SLM_DTYPE_Q4_1: q_min_range(x, y, nb, 15); break;
    case SLM_DTYPE_Q5_0: q_absmax(x, y, nb, 16); break;
    case SLM_DTYPE_Q5_1: q_min_range(x, y, nb, 31); break;
    case SLM_DTYPE_Q8_0: q_q8_0(x, y, nb); break;
    case SLM_DTYPE_Q4_K: q_q4_k(x, y, nb); break;
    case SLM_DTYPE_Q5_K: q_q5_k(x, y, nb); break;
    case SLM_DTYPE_Q6_K: q_q6_k(x, y, nb); break;
    default: return false;
    }
    return true;
}

bool quant_kv_row(uint32_t type, const float *x, void *dst, int64_t n) {
    if ((type != SLM_DTYPE_Q8_0 && type != SLM_DTYPE_Q4_0) || n % QK != 0) return false;
    size_t bb = type == SLM_DTYPE_Q8_0 ? 34 : 18;
    for (int64_t b = 0; b < n / QK; b++) {
        float t[QK];
        memcpy(t, x + b * QK, sizeof t);
        quant_hadamard32(t);
        quant_row(type, t, (uint8_t *)dst + (size_t)b * bb, QK);
    }
    return true;
}
