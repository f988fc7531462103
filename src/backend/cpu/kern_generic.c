/* kern_generic.c — portable C micro-kernels of the fast CPU kernels (cpu.h, struct cpu_isa) and
 * the activation quantisers. The matmuls here implement the canonical arithmetic of cpu.h in its
 * plainest form; the SIMD variants must match them bit for bit (tests/unit/test_kern_fast.c).
 * Used on CPUs without a SIMD variant and for ops a SIMD table leaves to it. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"
#include "backend/cpu/kern_attn_q.h"
#include "base/half.h"
#include "base/reader.h"

/* ---- activation formats ---------------------------------------------------------------------- */

bool cpu_mm_supports(uint32_t wt) {
    switch (wt) {
    case SLM_DTYPE_F32: case SLM_DTYPE_F16: case SLM_DTYPE_BF16:
    case SLM_DTYPE_Q4_0: case SLM_DTYPE_Q4_1: case SLM_DTYPE_Q5_0: case SLM_DTYPE_Q5_1: case SLM_DTYPE_Q8_0:
    case SLM_DTYPE_Q4_K: case SLM_DTYPE_Q5_K: case SLM_DTYPE_Q6_K: return true;
    default: return false;
    }
}

bool cpu_mm_is_quant(uint32_t wt) { return cpu_mm_supports(wt) && wt != SLM_DTYPE_F32 && wt != SLM_DTYPE_F16 && wt != SLM_DTYPE_BF16; }

size_t cpu_act_bytes(uint32_t wt, int64_t k) {
    size_t n;
    switch (wt) {
    case SLM_DTYPE_Q4_0: case SLM_DTYPE_Q4_1: case SLM_DTYPE_Q5_0: case SLM_DTYPE_Q5_1: case SLM_DTYPE_Q8_0:
        n = (size_t)k + 8 * (size_t)(k / CPU_QK);
        break;
    case SLM_DTYPE_Q4_K: case SLM_DTYPE_Q5_K: case SLM_DTYPE_Q6_K: n = (size_t)(k / CPU_QK_K) * CPU_Q8K_BYTES; break;
    default: return 0;
    }
    return (n + 63) & ~(size_t)63;
}

/* Q8_0 / Q8_1-style quantisation of one 32-block (shared by every ISA for the scalar parts). */
void cpu_quant_act_32_generic(uint32_t wt, const float *x, int64_t k, uint8_t *dst) {
    int64_t nb = k / CPU_QK;
    int8_t *qs = (int8_t *)dst;
    uint8_t *da = dst + k, *aux = da + 4 * nb;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * CPU_QK;
        float amax = 0.0f;
        for (int j = 0; j < CPU_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < CPU_QK; j++) {
            float v = fminf(fmaxf(nearbyintf(xb[j] * id), -127.0f), 127.0f);
            int32_t q = (int32_t)v;
            qs[b * CPU_QK + j] = (int8_t)q;
            sum += q;
        }
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

/* ggml's quantize_row_q8_K: the signed value of largest magnitude (first one) sets the scale. */
void cpu_quant_act_k_generic(const float *x, int64_t k, uint8_t *dst) {
    for (int64_t b = 0; b < k / CPU_QK_K; b++, x += CPU_QK_K, dst += CPU_Q8K_BYTES) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < CPU_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        int8_t *qs = (int8_t *)(dst + 4);
        int16_t bs[16];
        if (amax == 0.0f) {
            memset(dst, 0, CPU_Q8K_BYTES);
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < CPU_QK_K; j++) {
            float v = fminf(fmaxf(nearbyintf(iscale * x[j]), -128.0f), 127.0f);
            qs[j] = (int8_t)(int32_t)v;
        }
        for (int s = 0; s < 16; s++) {
            int32_t sum = 0;
            for (int j = 0; j < 16; j++) sum += qs[16 * s + j];
            bs[s] = (int16_t)sum;
        }
        float d = 1.0f / iscale;
        memcpy(dst, &d, 4);
        memcpy(dst + 260, bs, sizeof bs);
    }
}

static void quant_act_generic(uint32_t wt, const float *x, int64_t k, uint8_t *dst) {
    if (cpu_wt_is_k(wt)) cpu_quant_act_k_generic(x, k, dst);
    else cpu_quant_act_32_generic(wt, x, k, dst);
}

/* ---- canonical dot products ------------------------------------------------------------------ */

static float ldf(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }

/* One row of a 32-block type against one activation column. */
static float dot_q32(uint32_t wt, const uint8_t *w, int64_t k, const uint8_t *act) {
    int64_t nb = k / CPU_QK;
    const int8_t *a = (const int8_t *)act;
    const uint8_t *da = act + k, *aux = da + 4 * nb;
    float y = 0.0f;
    for (int64_t b = 0; b < nb; b++, a += CPU_QK) {
        int32_t isum = 0;
        float dw;
        switch (wt) {
        case SLM_DTYPE_Q4_0: {
            const uint8_t *x = w + 18 * b;
            dw = f16_to_f32(ld_u16(x));
            for (int j = 0; j < 16; j++) isum += ((x[2 + j] & 0x0F) - 8) * a[j] + ((x[2 + j] >> 4) - 8) * a[j + 16];
            break;
        }
        case SLM_DTYPE_Q4_1: {
            const uint8_t *x = w + 20 * b;
            dw = f16_to_f32(ld_u16(x));
            for (int j = 0; j < 16; j++) isum += (x[4 + j] & 0x0F) * a[j] + (x[4 + j] >> 4) * a[j + 16];
            break;
        }
        case SLM_DTYPE_Q5_0: case SLM_DTYPE_Q5_1: { /* 5-bit q: bit j of qh is element j's 5th bit */
            bool q51 = wt == SLM_DTYPE_Q5_1;
            const uint8_t *x = w + (q51 ? 24 : 22) * b, *qs = x + (q51 ? 8 : 6);
            uint32_t qh = ld_u32(x + (q51 ? 4 : 2));
            int32_t off = q51 ? 0 : 16;
            dw = f16_to_f32(ld_u16(x));
            for (int j = 0; j < 16; j++) {
                int32_t lo = (qs[j] & 0x0F) | (int32_t)(((qh >> j) & 1) << 4);
                int32_t hi = (qs[j] >> 4) | (int32_t)(((qh >> (j + 16)) & 1) << 4);
                isum += (lo - off) * a[j] + (hi - off) * a[j + 16];
            }
            break;
        }
        default: { /* Q8_0 */
            const uint8_t *x = w + 34 * b;
            dw = f16_to_f32(ld_u16(x));
            for (int j = 0; j < 32; j++) isum += (int8_t)x[2 + j] * a[j];
            break;
        }
        }
        y = fmaf((float)isum, dw * ldf(da + 4 * b), y);
        if (wt == SLM_DTYPE_Q4_1) y = fmaf(f16_to_f32(ld_u16(w + 20 * b + 2)), ldf(aux + 4 * b), y);
        if (wt == SLM_DTYPE_Q5_1) y = fmaf(f16_to_f32(ld_u16(w + 24 * b + 2)), ldf(aux + 4 * b), y);
    }
    return y;
}

/* 6-bit scale and min of sub-block s of a Q4_K block. */
static void k_scale_min(const uint8_t *scales, int s, int32_t *sc, int32_t *mn) {
    if (s < 4) {
        *sc = scales[s] & 63;
        *mn = scales[s + 4] & 63;
    } else {
        *sc = (scales[s + 4] & 0x0F) | ((scales[s - 4] >> 6) << 4);
        *mn = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
    }
}

static float dot_qk(uint32_t wt, const uint8_t *w, int64_t k, const uint8_t *act) {
    float y = 0.0f;
    for (int64_t b = 0; b < k / CPU_QK_K; b++, act += CPU_Q8K_BYTES) {
        const int8_t *a = (const int8_t *)(act + 4);
        float da = ldf(act);
        int16_t bs[16];
        memcpy(bs, act + 260, sizeof bs);
        if (wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K) {
            /* Q5_K: the Q4_K layout with qh[32] before the quants; bits 2c, 2c+1 of qh[l] */
            bool q5 = wt == SLM_DTYPE_Q5_K;
            const uint8_t *x = w + (q5 ? 176 : 144) * b;
            const uint8_t *q = x + (q5 ? 48 : 16), *qh = x + 16;
            int32_t isum = 0, msum = 0;
            for (int c = 0; c < 4; c++, q += 32) {
                int32_t sc0, mn0, sc1, mn1, s0 = 0, s1 = 0;
                k_scale_min(x + 4, 2 * c, &sc0, &mn0);
                k_scale_min(x + 4, 2 * c + 1, &sc1, &mn1);
                for (int l = 0; l < 32; l++) {
                    int32_t h0 = q5 ? ((qh[l] >> (2 * c)) & 1) << 4 : 0;
                    int32_t h1 = q5 ? ((qh[l] >> (2 * c + 1)) & 1) << 4 : 0;
                    s0 += ((q[l] & 0x0F) | h0) * a[64 * c + l];
                    s1 += ((q[l] >> 4) | h1) * a[64 * c + 32 + l];
                }
                isum += sc0 * s0 + sc1 * s1;
                msum += mn0 * (bs[4 * c] + bs[4 * c + 1]) + mn1 * (bs[4 * c + 2] + bs[4 * c + 3]);
            }
            y = fmaf((float)isum, f16_to_f32(ld_u16(x)) * da, y);
            y = fmaf(-(float)msum, f16_to_f32(ld_u16(x + 2)) * da, y);
        } else { /* Q6_K */
            const uint8_t *x = w + 210 * b;
            const int8_t *sc = (const int8_t *)(x + 192);
            int32_t isum = 0;
            for (int n = 0; n < 2; n++) {
                const uint8_t *L = x + 64 * n, *H = x + 128 + 32 * n;
                int32_t s[8] = {0};
                for (int l = 0; l < 32; l++) {
                    int32_t q0 = (L[l] & 0x0F) | ((H[l] & 3) << 4), q1 = (L[l + 32] & 0x0F) | (((H[l] >> 2) & 3) << 4);
                    int32_t q2 = (L[l] >> 4) | (((H[l] >> 4) & 3) << 4), q3 = (L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4);
                    const int8_t *ab = a + 128 * n + l;
                    /* element 128n + l + 32kk, sub-block (l + 32kk) / 16 within the half */
                    s[0 + l / 16] += (q0 - 32) * ab[0];
                    s[2 + l / 16] += (q1 - 32) * ab[32];
                    s[4 + l / 16] += (q2 - 32) * ab[64];
                    s[6 + l / 16] += (q3 - 32) * ab[96];
                }
                for (int j = 0; j < 8; j++) isum += sc[8 * n + j] * s[j];
            }
            y = fmaf((float)isum, f16_to_f32(ld_u16(x + 208)) * da, y);
        }
    }
    return y;
}

void cpu_mm_quant_generic(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                             size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch) {
    (void)scratch;
    bool kq = cpu_wt_is_k(wt);
    for (int64_t c = 0; c < ncols; c++)
        for (int64_t r = 0; r < nr; r++) {
            const uint8_t *wr = w + (size_t)r * row_bytes, *ac = act + (size_t)c * act_stride;
            y[c * ldy + r] = kq ? dot_qk(wt, wr, k, ac) : dot_q32(wt, wr, k, ac);
        }
}

float cpu_load_wf(uint32_t wt, const uint8_t *w, int64_t i) {
    switch (wt) {
    case SLM_DTYPE_F16: return f16_to_f32(ld_u16(w + 2 * i));
    case SLM_DTYPE_BF16: return bf16_to_f32(ld_u16(w + 2 * i));
    default: return ldf(w + 4 * i);
    }
}

/* The canonical 16-lane float dot (cpu.h). */
static float dot_f(uint32_t wt, const uint8_t *w, const float *x, int64_t k) {
    float acc[16] = {0};
    for (int64_t i0 = 0; i0 < k; i0 += 16)
        for (int l = 0; l < 16; l++) {
            int64_t i = i0 + l;
            float wv = i < k ? cpu_load_wf(wt, w, i) : 0.0f, xv = i < k ? x[i] : 0.0f;
            acc[l] = fmaf(wv, xv, acc[l]);
        }
    return cpu_reduce16(acc);
}

void cpu_mm_float_generic(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const float *x,
                             int64_t ncols, float *y, int64_t ldy, void *scratch) {
    (void)scratch;
    for (int64_t c = 0; c < ncols; c++)
        for (int64_t r = 0; r < nr; r++) y[c * ldy + r] = dot_f(wt, w + (size_t)r * row_bytes, x + c * k, k);
}

/* ---- attention, DeltaNet, conv ----------------------------------------------------------------- */

static float kv_load(uint32_t t, const void *base, int64_t i) {
    return t == SLM_DTYPE_F16 ? f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

/* The canonical chunk of cpu.h's attention, row by row: the row's keys in [c0, c0 + CPU_ATTN_CHUNK),
 * written as the row's partial (acc, m, l). */
void cpu_attn_chunk_generic(const float *q, int64_t qts, int64_t T, int64_t G, const void *k, const void *v,
                            uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t nk0,
                            int64_t window, int64_t ring, float scale, int64_t c0, int64_t pf_end, float *part,
                            void *scratch) {
    (void)pf_end, (void)scratch;
    int64_t pf = cpu_attn_part_floats(hdv);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < G; h++) {
            const float *qr = q + t * qts + h * hd;
            float *acc = part + (t * G + h) * pf;
            int64_t hi = nk0 + t - 1, lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0;
            int64_t jb = lo & ~(int64_t)15, je = hi < c0 + CPU_ATTN_CHUNK - 1 ? hi : c0 + CPU_ATTN_CHUNK - 1;
            float m = -INFINITY, l = 0.0f, s[16];
            for (int64_t i = 0; i < hdv; i++) acc[i] = 0.0f;
            for (int64_t j0 = jb > c0 ? jb : c0; j0 <= je; j0 += 16) {
                /* lanes [jlo, nbk) of the block are the row's keys; row0 is the block's first row */
                int jlo = lo > j0 ? (int)(lo - j0) : 0, nbk = hi - j0 < 15 ? (int)(hi - j0 + 1) : 16;
                int64_t row0 = ring ? j0 % ring : j0;
                float mb = -INFINITY;
                for (int j = jlo; j < nbk; j++) {
                    float c0s = 0.0f, c1s = 0.0f;
                    int64_t base = (row0 + j) * kstride;
                    for (int64_t i = 0; i < hd; i++) {
                        if (i & 1) c1s = fmaf(qr[i], kv_load(kvt, k, base + i), c1s);
                        else c0s = fmaf(qr[i], kv_load(kvt, k, base + i), c0s);
                    }
                    s[j] = (c0s + c1s) * scale;
                    mb = s[j] > mb ? s[j] : mb; /* fmaxf(mb, s[j]) inline: skips a NaN; mb is never NaN */
                }
                float mn = mb > m ? mb : m;
                float corr = mn == m ? 1.0f : cpu_exp(m - mn);
                float ps[16], psum[16] = {0};
                for (int j = jlo; j < nbk; j++) psum[j] = ps[j] = cpu_exp(s[j] - mn);
                l = l * corr + cpu_reduce16(psum);
                for (int64_t i = 0; i < hdv; i++) {
                    float a = acc[i] * corr;
                    for (int j = jlo; j < nbk; j++) a = fmaf(ps[j], kv_load(kvt, v, (row0 + j) * vstride + i), a);
                    acc[i] = a;
                }
                m = mn;
            }
            acc[hdv] = m;
            acc[hdv + 1] = l;
        }
}

void cpu_attn_fold(float *tot, const float *part, int64_t hdv) {
    if (cpu_attn_fold_trivial(tot, part, hdv)) return;
    float mp = part[hdv], mt = tot[hdv];
    float mn = mp > mt ? mp : mt;
    float a = mn == mt ? 1.0f : cpu_exp(mt - mn), b = mn == mp ? 1.0f : cpu_exp(mp - mn);
    for (int64_t i = 0; i < hdv; i++) tot[i] = tot[i] * a + part[i] * b;
    tot[hdv] = mn;
    tot[hdv + 1] = tot[hdv + 1] * a + part[hdv + 1] * b;
}

void cpu_attn_fold_rows(float *tot, const float *part, int64_t R, int64_t hdv) {
    int64_t pf = cpu_attn_part_floats(hdv);
    for (int64_t r = 0; r < R; r++) cpu_attn_fold(tot + r * pf, part + r * pf, hdv);
}

void cpu_attn_empty_totals(float *tot, int64_t R, int64_t hdv) {
    int64_t pf = cpu_attn_part_floats(hdv);
    for (int64_t r = 0; r < R; r++) {
        for (int64_t i = 0; i < hdv; i++) tot[r * pf + i] = 0.0f;
        tot[r * pf + hdv] = -INFINITY;
        tot[r * pf + hdv + 1] = 0.0f;
    }
}

void cpu_attn_finish(const float *tot, int64_t hdv, float *out) {
    float inv = 1.0f / tot[hdv + 1];
    for (int64_t i = 0; i < hdv; i++) out[i] = tot[i] * inv;
}

/* cpu_attn_block and cpu_attn_block_q: the chunks of the block's keys through the tier's
 * attn_chunk (quant false: K and V of type kt) or attn_chunk_q, folded in chunk order. */
static void attn_block(const cpu_isa *isa, bool quant, const float *q, int64_t qts, int64_t T, int64_t G, const void *k,
                       const void *v, uint32_t kt, uint32_t vt, int64_t kstride, int64_t vstride, int64_t hd,
                       int64_t hdv, int64_t nk0, int64_t window, int64_t ring, float scale, float *out, int64_t ots,
                       void *scratch) {
    int64_t R = T * G, pf = cpu_attn_part_floats(hdv);
    float *tot = scratch, *part = tot + R * pf;
    void *ks = part + R * pf;
    cpu_attn_empty_totals(tot, R, hdv);
    int64_t lo_first = window && nk0 - window > 0 ? nk0 - window : 0, hi_last = nk0 + T - 2;
    for (int64_t c0 = lo_first / CPU_ATTN_CHUNK * CPU_ATTN_CHUNK; c0 <= hi_last; c0 += CPU_ATTN_CHUNK) {
        if (quant)
            isa->attn_chunk_q(q, qts, T, G, k, v, kt, vt, kstride, vstride, hd, hdv, nk0, window, ring, scale, c0, part,
                              ks);
        else
            isa->attn_chunk(q, qts, T, G, k, v, kt, kstride, vstride, hd, hdv, nk0, window, ring, scale, c0,
                            hi_last + 1, part, ks);
        isa->attn_fold_rows(tot, part, R, hdv);
    }
    for (int64_t r = 0; r < R; r++) cpu_attn_finish(tot + r * pf, hdv, out + (r / G) * ots + (r % G) * hdv);
}

void cpu_attn_block(const cpu_isa *isa, const float *q, int64_t qts, int64_t T, int64_t G, const void *k,
                    const void *v, uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv,
                    int64_t nk0, int64_t window, int64_t ring, float scale, float *out, int64_t ots, void *scratch) {
    attn_block(isa, false, q, qts, T, G, k, v, kvt, kvt, kstride, vstride, hd, hdv, nk0, window, ring, scale, out, ots,
               scratch);
}

void cpu_attn_block_q(const cpu_isa *isa, const float *q, int64_t qts, int64_t T, int64_t G, const void *k,
                      const void *v, uint32_t kt, uint32_t vt, int64_t kstride, int64_t vstride, int64_t hd,
                      int64_t hdv, int64_t nk0, int64_t window, int64_t ring, float scale, float *out, int64_t ots,
                      void *scratch) {
    attn_block(isa, true, q, qts, T, G, k, v, kt, vt, kstride, vstride, hd, hdv, nk0, window, ring, scale, out, ots,
               scratch);
}

void cpu_cvt_f16_generic(uint16_t *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = f32_to_f16(x[i]);
}

void cpu_deltanet_cols_generic(float *S, const float *S_in, const float *q, const float *k, const float *v,
                               const float *g, const float *beta, float *o, int64_t n, int64_t dk, int64_t dv,
                               int64_t qk_stride, int64_t v_stride, int64_t gb_stride, int64_t c0, int64_t c1) {
    float u[512];
    for (int64_t t = 0; t < n; t++) {
        const float *qt = q + t * qk_stride, *kt = k + t * qk_stride, *vt = v + t * v_stride;
        const float *src = t == 0 ? S_in : S;
        float decay = cpu_exp(g[t * gb_stride]), b = beta[t * gb_stride];
        float *ot = o + t * v_stride;
        for (int64_t j0 = c0; j0 < c1; j0 += 512) {
            int64_t nj = c1 - j0 < 512 ? c1 - j0 : 512;
            for (int64_t j = 0; j < nj; j++) u[j] = 0.0f;
            for (int64_t i = 0; i < dk; i++) {
                const float *in = src + i * dv + j0;
                float *row = S + i * dv + j0;
                for (int64_t j = 0; j < nj; j++) {
                    row[j] = in[j] * decay;
                    u[j] = fmaf(row[j], kt[i], u[j]);
                }
            }
            for (int64_t j = 0; j < nj; j++) u[j] = b * (vt[j0 + j] - u[j]);
            for (int64_t j = 0; j < nj; j++) ot[j0 + j] = 0.0f;
            for (int64_t i = 0; i < dk; i++) {
                float *row = S + i * dv + j0;
                for (int64_t j = 0; j < nj; j++) {
                    row[j] = fmaf(kt[i], u[j], row[j]);
                    ot[j0 + j] = fmaf(row[j], qt[i], ot[j0 + j]);
                }
            }
        }
    }
}

void cpu_deltanet_head_generic(float *S, const float *S_in, const float *q, const float *k, const float *v,
                               const float *g, const float *beta, float *o, int64_t n, int64_t dk, int64_t dv,
                               int64_t qk_stride, int64_t v_stride, int64_t gb_stride, const float *S_in_next,
                               float *scratch) {
    (void)S_in_next, (void)scratch;
    cpu_deltanet_cols_generic(S, S_in, q, k, v, g, beta, o, n, dk, dv, qk_stride, v_stride, gb_stride, 0, dv);
}

void cpu_conv_row_generic(float *y, const float *x, int64_t ldx, const float *w, int64_t wsc, int64_t wsk, int64_t C,
                          int64_t K) {
    for (int64_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < K; kk++) acc = fmaf(w[c * wsc + kk * wsk], x[kk * ldx + c], acc);
        y[c] = acc;
    }
}

/* ---- elementwise and norms --------------------------------------------------------------------- */

void cpu_vec_add_generic(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}
void cpu_vec_mul_generic(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}
void cpu_vec_swiglu_generic(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + cpu_exp(0.0f - a[i])) * b[i];
}
void cpu_vec_geglu_generic(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = a[i], u = 0.7978845608f * (x + 0.044715f * (x * x * x));
        y[i] = x / (1.0f + cpu_exp(0.0f - (u + u))) * b[i];
    }
}

void cpu_vec_unary_generic(g_op op, float *y, const float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        switch (op) {
        case G_OP_SCALE: y[i] = v * scale; break;
        case G_OP_SILU: y[i] = v / (1.0f + cpu_exp(0.0f - v)); break;
        case G_OP_SIGMOID: y[i] = 1.0f / (1.0f + cpu_exp(0.0f - v)); break;
        case G_OP_SOFTPLUS: y[i] = v > 20.0f ? v : log1pf(cpu_exp(v)); break;
        default: y[i] = cpu_exp(v); break;
        }
    }
}

void cpu_row_norm_generic(g_op op, float *y, const float *x, const float *w, const float *z, int64_t n, float eps,
                             float w_offset) {
    float acc[16] = {0};
    for (int64_t i0 = 0; i0 < n; i0 += 16)
        for (int l = 0; l < 16; l++) {
            float v = i0 + l < n ? x[i0 + l] : 0.0f;
            acc[l] = fmaf(v, v, acc[l]);
        }
    float ss = cpu_reduce16(acc);
    if (op == G_OP_L2NORM) {
        float inv = 1.0f / sqrtf(ss + eps);
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv;
        return;
    }
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    if (op == G_OP_RMSNORM) {
        for (int64_t i = 0; i < n; i++) y[i] = w ? (x[i] * inv) * (w[i] + w_offset) : x[i] * inv;
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = (w[i] * (x[i] * inv)) * (z[i] / (1.0f + cpu_exp(0.0f - z[i])));
    }
}

static const cpu_isa k_generic = {
    .level = CPU_ISA_GENERIC,
    .quant_act = quant_act_generic,
    .mm_quant = cpu_mm_quant_generic,
    .mm_float = cpu_mm_float_generic,
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

const cpu_isa *cpu_isa_generic(void) { return &k_generic; }

size_t cpu_mm_scratch_bytes(uint32_t wt, int64_t k, int64_t ncols) {
    /* per-column accumulators of 8 rows (kern_avx2.c) + the larger of: a packed 16-row tile
     * (kern_avx512.c: per 32-block 512 bytes of weights and 2 x 64 of scales) or an unpacked
     * K-quant row (256 bytes + 16 scales per super-block) */
    size_t cols = (size_t)ncols * 8 * sizeof(float);
    if (cpu_mm_is_quant(wt) && !cpu_wt_is_k(wt)) return cols + (size_t)(k / CPU_QK) * 640 + 4096;
    if (cpu_wt_is_k(wt)) return cols + (size_t)(k / CPU_QK_K) * (512 + 64 * 4) + 4096;
    return 4096;
}

/* 64 columns of a (dk, dv) state: the chunk the AVX tiers keep between the token passes. */
size_t cpu_deltanet_scratch_bytes(int64_t dk) { return (size_t)dk * 64 * sizeof(float); }

size_t cpu_attn_scratch_bytes(int64_t hd, int64_t hdv, int64_t rows) {
    int64_t hdp = (hd + 15) & ~(int64_t)15, hdvp = (hdv + 15) & ~(int64_t)15;
    /* cpu_attn_block's running totals and one chunk's partials (2 per row), then attn_chunk's: K
     * block transposed (hd, 16) and V block (16, hdv) in f32; per row: accumulator, 16
     * probabilities, m, l, correction */
    return (size_t)(2 * rows * cpu_attn_part_floats(hdv) + 16 * hdp + 16 * hdvp + rows * (hdvp + 16 + 3) + 64) *
               sizeof(float) +
           256;
}
