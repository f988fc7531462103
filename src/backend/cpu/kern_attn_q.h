/* kern_attn_q.h — cpu_isa.attn_chunk_q: attention over K and V states of which at least one is
 * quantised (Q8_0, Q4_0; the other may be F16 or F32). Portable C included once by every tier's file
 * (kern_generic.c, kern_avx2.c, kern_avx512.c, kern_neon.c), each compiled with its tier's flags:
 * the compiler vectorises the 16-lane loops with that tier's instructions, and every tier performs
 * the same IEEE operations in the same order (fmaf explicit, -ffp-contract=off), so all give the
 * bits of kern_generic.c's copy.
 *
 * Arithmetic (cpu.h attn_chunk's canonical attention of one chunk of keys, unchanged): an element
 * of a Q8_0 block is the f32 product d · q, of a Q4_0 block d · (q - 8), with d the block's f16
 * scale widened to f32; both
 * products are exact in f32 (11 + 8 significant bits), so a quantised state gives the bits the f32
 * kernel gives on its dequantised copy. Per block of 16 keys the K rows are dequantised into Kt
 * (hd, 16) transposed and the V rows into Vf (16, hdvp); then for each row (t, h) meeting the block:
 * s_j = (c0_j + c1_j) * scale (c0/c1 the FMA chains over even/odd i of q_i k_ji), the running max m
 * over the row's lanes, corr = m_new == m_old ? 1 : cpu_exp(m_old - m_new), p_j = cpu_exp(s_j - m)
 * (0 outside the row's keys), l = l corr + the 16-lane canonical sum of p, acc_i = acc_i corr, then
 * acc_i = fmaf(p_j, v_ji, acc_i) for the row's keys in order; the row's partial is (acc, m, l),
 * folded and finished by the caller (cpu_attn_block_q, kern_fast.c). Lanes outside a row's
 * keys are computed and discarded by a select before any use. Rows past the last row's position
 * are never read. The states' rows hold whole blocks: hd, hdv, the strides and the head offsets
 * are multiples of 32 elements for a quantised type (kern_fast.c's attn_supports). The caches hold
 * rotated blocks (base/quant.h quant_kv_row); the caller passes q rotated when K is quantised and
 * rotates the output back when V is (kern_fast.c k_attention). */
#ifndef SLM_BACKEND_CPU_KERN_ATTN_Q_H
#define SLM_BACKEND_CPU_KERN_ATTN_Q_H

#include <math.h>
#include <stdint.h>

#include "backend/cpu/kern_common.h"
#include "base/half.h"

/* Bytes of n elements of a KV state of type t (n a multiple of 32 for the quantised types). */
static inline size_t attnq_bytes(uint32_t t, int64_t n) {
    switch (t) {
    case SLM_DTYPE_Q8_0: return (size_t)(n / 32) * 34;
    case SLM_DTYPE_Q4_0: return (size_t)(n / 32) * 18;
    case SLM_DTYPE_F16: return (size_t)n * 2;
    default: return (size_t)n * 4;
    }
}

/* Row of n elements of type t at src as f32 into dst[i * ds] (ds = 16: a column of Kt; ds = 1: a
 * row of Vf). */
static inline void attnq_row(uint32_t t, const uint8_t *src, int64_t n, float *dst, int64_t ds) {
    if (t == SLM_DTYPE_Q8_0) {
        for (int64_t b = 0; b < n / 32; b++, src += 34) {
            float d = f16_to_f32((uint16_t)(src[0] | src[1] << 8));
            const int8_t *qs = (const int8_t *)(src + 2);
            float *o = dst + b * 32 * ds;
            for (int j = 0; j < 32; j++) o[j * ds] = d * (float)qs[j];
        }
    } else if (t == SLM_DTYPE_Q4_0) {
        for (int64_t b = 0; b < n / 32; b++, src += 18) {
            float d = f16_to_f32((uint16_t)(src[0] | src[1] << 8));
            const uint8_t *qs = src + 2;
            float *o = dst + b * 32 * ds;
            for (int j = 0; j < 16; j++) {
                o[j * ds] = d * (float)((int)(qs[j] & 15) - 8);
                o[(j + 16) * ds] = d * (float)((int)(qs[j] >> 4) - 8);
            }
        }
    } else if (t == SLM_DTYPE_F16) {
        const uint16_t *h = (const uint16_t *)(const void *)src;
        for (int64_t i = 0; i < n; i++) dst[i * ds] = f16_to_f32(h[i]);
    } else {
        const float *f = (const float *)(const void *)src;
        for (int64_t i = 0; i < n; i++) dst[i * ds] = f[i];
    }
}

/* cpu.h attn_chunk with K of type kt and V of type vt (strides in elements): the keys of
 * [c0, c0 + CPU_ATTN_CHUNK), each row's partial (acc, m, l) at part + r * cpu_attn_part_floats(hdv).
 * Scratch: Kt (16 hdp), Vf (16 hdvp) floats. */
static void attn_chunk_q(const float *q, int64_t qts, int64_t T, int64_t G, const void *k, const void *v, uint32_t kt,
                         uint32_t vt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t nk0,
                         int64_t window, int64_t ring, float scale, int64_t c0, float *part, void *scratch) {
    int64_t R = T * G, hdp = (hd + 15) & ~(int64_t)15, hdvp = (hdv + 15) & ~(int64_t)15, pf = cpu_attn_part_floats(hdv);
    float *Kt = scratch, *Vf = Kt + 16 * hdp;
    size_t krow = attnq_bytes(kt, kstride), vrow = attnq_bytes(vt, vstride);
    for (int64_t r = 0; r < R; r++) {
        float *a = part + r * pf;
        for (int64_t i = 0; i < hdv; i++) a[i] = 0.0f;
        a[hdv] = -INFINITY; /* m */
        a[hdv + 1] = 0.0f;  /* l */
    }
    /* token t's keys: [lo_t, hi_t], hi_t = nk0 - 1 + t, lo_t = window ? max(0, hi_t - window + 1) : 0;
     * this chunk's blocks: from the larger of floor(lo_first / 16) * 16 and c0, to its end */
    int64_t nk_max = nk0 + T - 1, lo_first = window && nk0 - window > 0 ? nk0 - window : 0;
    int64_t jb = lo_first & ~(int64_t)15, je = nk_max < c0 + CPU_ATTN_CHUNK ? nk_max : c0 + CPU_ATTN_CHUNK;
    for (int64_t j0 = jb > c0 ? jb : c0; j0 < je; j0 += 16) {
        int nbk = nk_max - j0 < 16 ? (int)(nk_max - j0) : 16;
        int64_t row0 = ring ? j0 % ring : j0; /* the block's 16 rows are contiguous */
        for (int j = 0; j < 16; j++) {
            if (j < nbk) {
                attnq_row(kt, (const uint8_t *)k + (size_t)(row0 + j) * krow, hd, Kt + j, 16);
                attnq_row(vt, (const uint8_t *)v + (size_t)(row0 + j) * vrow, hdv, Vf + j * hdvp, 1);
            } else {
                for (int64_t i = 0; i < hd; i++) Kt[i * 16 + j] = 0.0f;
            }
        }
        /* rows of tokens [t_first, t_end) have keys in this block */
        int64_t t_first = j0 - nk0 + 1 > 0 ? j0 - nk0 + 1 : 0;
        int64_t t_end = window && j0 + 16 + window - nk0 < T ? j0 + 16 + window - nk0 : T;
        for (int64_t r = t_first * G; r < t_end * G; r++) {
            const float *qr = q + (r / G) * qts + (r % G) * hd;
            float *a = part + r * pf;
            int64_t nk = nk0 + r / G, lo = window && nk - window > 0 ? nk - window : 0;
            int nj = nk - j0 < 16 ? (int)(nk - j0) : 16, jlo = lo > j0 ? (int)(lo - j0) : 0;
            float c0s[16], c1s[16], s[16], p[16], ps[16];
            for (int j = 0; j < 16; j++) c0s[j] = c1s[j] = 0.0f;
            int64_t i = 0;
            for (; i + 2 <= hd; i += 2) {
                float qa = qr[i], qb = qr[i + 1];
                const float *ka = Kt + i * 16, *kb = ka + 16;
                for (int j = 0; j < 16; j++) {
                    c0s[j] = fmaf(qa, ka[j], c0s[j]);
                    c1s[j] = fmaf(qb, kb[j], c1s[j]);
                }
            }
            if (i < hd)
                for (int j = 0; j < 16; j++) c0s[j] = fmaf(qr[i], Kt[i * 16 + j], c0s[j]);
            float mb = -INFINITY, m = a[hdv];
            for (int j = 0; j < 16; j++) {
                s[j] = (c0s[j] + c1s[j]) * scale;
                bool in = j >= jlo && j < nj;
                mb = in && s[j] > mb ? s[j] : mb; /* fmaxf over the row's lanes, skipping NaN */
            }
            float mn = mb > m ? mb : m;
            float corr = mn == m ? 1.0f : cpu_exp(m - mn);
            for (int j = 0; j < 16; j++) {
                float e = cpu_exp(s[j] - mn);
                ps[j] = p[j] = j >= jlo && j < nj ? e : 0.0f;
            }
            a[hdv + 1] = a[hdv + 1] * corr + cpu_reduce16(ps);
            a[hdv] = mn;
            for (int64_t x = 0; x < hdv; x++) a[x] *= corr;
            for (int j = jlo; j < nj; j++) {
                const float *vj = Vf + j * hdvp;
                float pj = p[j];
                for (int64_t x = 0; x < hdv; x++) a[x] = fmaf(pj, vj[x], a[x]);
            }
        }
    }
}

#endif
