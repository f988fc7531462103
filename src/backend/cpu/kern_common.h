/* kern_common.h — small pieces shared by the micro-kernel files (kern_generic.c and the SIMD
 * files): the canonical 16-lane reduction and the generic routines a SIMD table reuses. */
#ifndef SLM_BACKEND_CPU_KERN_COMMON_H
#define SLM_BACKEND_CPU_KERN_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu.h"

/* True for the 256-element super-block types, whose activations are Q8_K (Q4_K, Q5_K, Q6_K). */
static inline bool cpu_wt_is_k(uint32_t wt) {
    return wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K || wt == SLM_DTYPE_Q6_K;
}

/* Bytes of one 32-block of a 32-block weight type, and the offset of its quants (Q5_0 / Q5_1:
 * the 4 bytes of qh sit just before them). */
static inline size_t cpu_q32_block_bytes(uint32_t wt) {
    switch (wt) {
    case SLM_DTYPE_Q4_0: return 18;
    case SLM_DTYPE_Q4_1: return 20;
    case SLM_DTYPE_Q5_0: return 22;
    case SLM_DTYPE_Q5_1: return 24;
    default: return 34; /* Q8_0 */
    }
}
static inline size_t cpu_q32_quant_off(uint32_t wt) {
    switch (wt) {
    case SLM_DTYPE_Q4_1: return 4;
    case SLM_DTYPE_Q5_0: return 6;
    case SLM_DTYPE_Q5_1: return 8;
    default: return 2; /* Q4_0, Q8_0 */
    }
}

/* A Q5_0 / Q5_1 block's qh (bit e: the 5th bit of element e) in the tile order of kern_tiles.c:
 * bit j of byte i holds element 4j + i's, bit 4 + j element 16 + 4j + i's (i, j < 4). */
static inline uint32_t cpu_q5_spread(uint32_t qh) {
    uint32_t t = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            t |= ((qh >> (4 * j + i)) & 1u) << (8 * i + j);
            t |= ((qh >> (16 + 4 * j + i)) & 1u) << (8 * i + 4 + j);
        }
    return t;
}
/* The inverse of cpu_q5_spread. */
static inline uint32_t cpu_q5_gather(uint32_t t) {
    uint32_t qh = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            qh |= ((t >> (8 * i + j)) & 1u) << (4 * j + i);
            qh |= ((t >> (8 * i + 4 + j)) & 1u) << (16 + 4 * j + i);
        }
    return qh;
}

/* The int32 aux of a 32-block activation column for weights of type wt (cpu.h): the factor of Σa
 * (Q4_0: -8, Q5_0: -16, Q8_0: -128); Q4_1 and Q5_1 keep an f32 sa instead. */
static inline int32_t cpu_act_aux_mul(uint32_t wt) {
    return wt == SLM_DTYPE_Q8_0 ? -128 : wt == SLM_DTYPE_Q5_0 ? -16 : -8;
}

/* The canonical reduction of 16 lanes (cpu.h): acc[l] += acc[l + s] for s = 8, 4, 2, 1. */
static inline float cpu_reduce16(float acc[16]) {
    for (int s = 8; s >= 1; s /= 2)
        for (int l = 0; l < s; l++) acc[l] += acc[l + s];
    return acc[0];
}

/* e^x as every fast tier computes it (kern_ref.c, the oracle, keeps libm's expf): x clamped to
 * [-86, 88.3762626647949] (x > lo ? x : lo, then x < hi ? x : hi, as MAXPS/MINPS do: a NaN becomes
 * -86), n = round-half-even(x · log2 e), r = x - n ln 2 in two FMA steps, p = the degree-7 Taylor
 * polynomial of e^r by Horner with FMAs, e^x = (p · 2^(n-1)) · 2 with 2^(n-1) built from its
 * exponent bits (n in [-124, 128]). Within 1 ulp on [-86, 88] (0.93 measured); constant outside:
 * e^-86 ~ 4e-38 below, e^88.376 ~ 2.4e38 above. Each step is one IEEE operation (fmaf explicit;
 * the build has -ffp-contract=off), and exp8 (kern_avx2.c) and exp16 (kern_avx512.c) perform the
 * same operations lane by lane, so every tier gives the same bits. So do the expressions built on
 * it, written the same way everywhere: SiLU x / (1 + e^-x) (e^-x as cpu_exp(0 - x)), sigmoid
 * 1 / (1 + e^-x), SwiGLU silu(a) · b, gated RMSNorm (w · (x · inv)) · silu(z), softplus
 * log1pf(e^x) (x <= 20), the softmax factors e^(s - m) and the correction (1 when the max is
 * unchanged, else e^(m_old - m_new)), DeltaNet's decay e^g. */
static inline float cpu_exp(float x) {
    x = x > -86.0f ? x : -86.0f;
    x = x < 88.3762626647949f ? x : 88.3762626647949f;
    float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, x);
    r = fmaf(-n, -2.12194440e-4f, r);
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t bits = (uint32_t)((int32_t)n - 1 + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale * 2.0f;
}

/* K-quant tiles: per super-block of 256, KT_Q4K / KT_Q6K bytes (the GGUF's 16 x 144 / 16 x 210,
 * plus 64 for Q4_K's 6-bit scales and mins widened to bytes):
 *  Q4_K: [0, 2048) vector 8c+g holds bytes 32c+4g..+3 of each row's quants (low nibbles: elements
 *        64c+4g.., sub-block 2c; high: 64c+32+4g.., sub-block 2c+1); [2048, 2176) scales and
 *        [2176, 2304) mins as u8, 16 per sub-block; d and dmin f16 x 16 at 2304 and 2336.
 *  Q6_K: per 16-element sub-block j, 192 bytes at 192j: two vectors of nibbles (low: elements
 *        16j+8h+i, high: 16j+8h+4+i, i < 4, for h = 0, 1) and one of the top 2 bits of its four
 *        groups of 4 (group g in bits 2g, 2g+1); scales int8 at 3072 + 16j; d f16 x 16 at 3328. */
#define KT_Q4K 2368
#define KT_Q6K 3360
/* Q5_K: Q4_K's layout (nibbles, scales, mins, d, dmin as above) followed at 2368 by 8 vectors of
 * qh: vector g holds qh bytes 4g..4g+3 of each row (bit 2c of qh[l] the 5th bit of element
 * 64c + l, bit 2c + 1 that of 64c + 32 + l), so vector 8c+g's nibbles take their 5th bits from
 * vector g shifted right by 2c (low) or 2c + 1 (high). */
#define KT_Q5K (KT_Q4K + 512)

/* The tiles (kern_tiles.c): cpu_isa.tile_block_bytes, tile_group and repack_tiles for the tiers
 * that read them. */
size_t cpu_tile_block_bytes(uint32_t wt);
int32_t cpu_tile_group(uint32_t wt);
/* The GGUF bytes of row `row` of an m x k matrix, read back from its tiles at pk (written by
 * cpu_repack_tiles; every tile layout keeps all the bits, so this is the exact inverse). */
void cpu_tile_row(uint32_t wt, const uint8_t *pk, int64_t m, int64_t k, int64_t row, uint8_t *dst);

/* Bytes of one tile's quants per 32-block of a 32-block type: 8 vectors (Q8_0), 4 vectors of
 * nibbles (Q4_0, Q4_1), or those plus one vector of the 16 rows' qh (Q5_0, Q5_1). */
static inline size_t cpu_tile_quant_bytes(uint32_t wt) {
    return wt == SLM_DTYPE_Q8_0 ? 512 : wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1 ? 320 : 256;
}

/* Where one tile of a 32-block type keeps block b, relative to the start of its pair (tile t & ~1):
 * quants at b * stride + quants (Q5_0, Q5_1: then the 16 rows' qh), scales (then Q4_1's and
 * Q5_1's mins) at b * stride + scales. */
typedef struct cpu_tile_sub {
    size_t stride, quants, scales;
} cpu_tile_sub;

/* Tile t of ntiles (kern_tiles.c's layout): the member of a pair, or the last tile alone. */
static inline cpu_tile_sub cpu_tile_sub_of(uint32_t wt, int64_t t, int64_t ntiles) {
    size_t tbb = cpu_tile_block_bytes(wt), q = cpu_tile_quant_bytes(wt), s = tbb - q;
    if ((t | 1) >= ntiles) return (cpu_tile_sub){tbb, 0, q};
    return (cpu_tile_sub){2 * tbb, (size_t)(t & 1) * q, 2 * q + (size_t)(t & 1) * s};
}
void cpu_repack_tiles(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t m, int64_t k, int64_t t0, int64_t t1,
                      uint8_t *dst);

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>

/* Software prefetch state of one row range: a range is read as interleaved streams (the 16 rows
 * of a file-layout tile, the 2-4 rows of a float tile) or as short runs per task, which the
 * hardware prefetchers follow poorly or ramp up late, so the range is prefetched as one
 * sequential run about PF_LEAD bytes ahead of the bytes being read, never past its end
 * (prefetches never fault, but past the end they would waste bandwidth on rows another thread
 * reads). PREFETCHT2 with a 16 KiB lead streamed 3.5 MB matrices at 31 GB/s on the bench machine
 * (2 threads, huge pages), against 28 GB/s for PREFETCHT1 with 64 KiB and 25 GB/s without. */
#define PF_LEAD 16384
#define PF_MAX_PER_STEP 32
typedef struct pf_state {
    const char *next, *end;
} pf_state;

/* A float-matmul tile size of a SIMD file: name(wt, ...) calls the file's mmf_tile(wt, w, rb, R, k,
 * x, C, y, ldy, pf) with the weight type as a constant, so its loads fold and its accumulators
 * stay in registers. */
#define CPU_MMF_SIZE(name, R, C)                                                                               \
    static void name(uint32_t wt, const uint8_t *w, size_t rb, int64_t k, const float *x, float *y, int64_t ldy, \
                     pf_state *pf) {                                                                             \
        if (wt == SLM_DTYPE_F16) mmf_tile(SLM_DTYPE_F16, w, rb, R, k, x, C, y, ldy, pf);                        \
        else if (wt == SLM_DTYPE_BF16) mmf_tile(SLM_DTYPE_BF16, w, rb, R, k, x, C, y, ldy, pf);                 \
        else mmf_tile(SLM_DTYPE_F32, w, rb, R, k, x, C, y, ldy, pf);                                             \
    }

static inline __attribute__((always_inline)) void pf_advance(pf_state *pf, const char *upto) {
    if (upto > pf->end) upto = pf->end;
    for (int i = 0; i < PF_MAX_PER_STEP && pf->next < upto; i++, pf->next += 64) _mm_prefetch(pf->next, _MM_HINT_T2);
}

#define ATTN_PREFETCH_BLOCKS 4 /* how far ahead (blocks of 16 keys) the attention kernels prefetch */

/* The in-place attention paths' prefetch (kern_avx2.c, kern_avx512.c): the columns of one KV head, or of the
 * adjacent heads a call runs together (bytes of each row, rows stride bytes apart; one run when
 * adjacent), of the rows of block j0 + 16 * ATTN_PREFETCH_BLOCKS, a line per attn_pf_step, which
 * the products' inner loops call, so that a block's prefetches spread over its arithmetic instead
 * of leaving in one burst of up to 256 lines. A burst stalls on the few misses a core keeps in
 * flight, then the block computes with the memory idle: Gemma 3's global shape
 * (bench_attn_decode -p 8192 -G 4 -k 1 -d 256 -l 10, Zen 4) took 120 ns per key with the burst,
 * 78-84 spread, its time with the state in cache. attn_pf_rest issues what the loops left. */
typedef struct attn_pf {
    const char *line, *last; /* the next line to prefetch in the current row; the row's last byte */
    const char *row;         /* the current row's first byte */
    size_t bytes, stride;
    int64_t rows; /* rows left, the current one included; 0: nothing to prefetch */
} attn_pf;

static inline void attn_pf_row(attn_pf *p) {
    p->line = (const char *)((uintptr_t)p->row & ~(uintptr_t)63);
    p->last = p->row + p->bytes - 1;
}

/* The cursors over K (kp) and V (vp) of the block ahead of j0 (K rows kstride elements apart at
 * k, V rows vstride apart at v, el bytes an element, a ring of ring rows or 0), hd and hdv columns
 * of each row: empty when that block starts at or past nk_max (the end of the caller's keys), and
 * no rows past nk_max. Prefetches past the state's end do not fault. */
static inline void attn_pf_block(attn_pf *kp, attn_pf *vp, const void *k, const void *v, int64_t kstride,
                                 int64_t vstride, size_t el, int64_t nk_max, int64_t ring, int64_t j0, int64_t hd,
                                 int64_t hdv) {
    int64_t jp = j0 + 16 * ATTN_PREFETCH_BLOCKS, np = nk_max - jp < 16 ? nk_max - jp : 16;
    *kp = *vp = (attn_pf){0};
    if (np <= 0) return;
    kp->rows = vp->rows = np;
    int64_t rp = ring ? jp % ring : jp; /* ring % 16 == 0: the block's rows are contiguous */
    kp->row = (const char *)k + (size_t)(rp * kstride) * el, kp->bytes = (size_t)hd * el;
    kp->stride = (size_t)kstride * el;
    vp->row = (const char *)v + (size_t)(rp * vstride) * el, vp->bytes = (size_t)hdv * el;
    vp->stride = (size_t)vstride * el;
    if (kstride == hd) kp->bytes *= (size_t)kp->rows, kp->rows = 1; /* one run */
    if (vstride == hdv) vp->bytes *= (size_t)vp->rows, vp->rows = 1;
    attn_pf_row(kp);
    attn_pf_row(vp);
}

static inline __attribute__((always_inline)) void attn_pf_step(attn_pf *p) {
    if (p->rows <= 0) return;
    _mm_prefetch(p->line, _MM_HINT_T2);
    p->line += 64;
    if (p->line > p->last && --p->rows > 0) {
        p->row += p->stride;
        attn_pf_row(p);
    }
}

static inline void attn_pf_rest(attn_pf *p) {
    while (p->rows > 0) attn_pf_step(p);
}

/* Attention (cpu.h attn_chunk), the kernels that copy each block before its products (the
 * transposed paths, kern_attn_q.h): the cursors of the block ahead (attn_pf_block) issued in one
 * burst, this KV head's hd (K) and hdv (V) columns of its rows, into L2 (PREFETCHT2): decode at
 * 8000 keys streamed 2.4x faster per CPU second than with PREFETCHT0, which filled L1's miss
 * buffers (bench_attn_decode -p 8000 -l 30, huge pages, Zen 4). Covering every head's columns,
 * as the AVX2 kernel once did, made each head's task prefetch the whole state: 2.8x slower with
 * LFM2's 8 KV heads at 2000 keys (bench_attn_decode). */
static inline void attn_prefetch_ahead(const void *k, const void *v, int64_t kstride, int64_t vstride, size_t el,
                                       int64_t nk_max, int64_t ring, int64_t j0, int64_t hd, int64_t hdv) {
    attn_pf kp, vp;
    attn_pf_block(&kp, &vp, k, v, kstride, vstride, el, nk_max, ring, j0, hd, hdv);
    attn_pf_rest(&kp);
    attn_pf_rest(&vp);
}

/* The in-place paths' first read of a block: rows of row_bytes, stride bytes apart, read once in
 * address order (one run when adjacent), a load per line. The products read a block 8 or 16 rows
 * at a time, a few bytes of each in turn, an order the hardware prefetchers do not follow. Gemma 3
 * at depth 8192 (statelm plan --profile -p 8192 -t 2, Zen 4), with the spread prefetch: global
 * attention nodes 400 us with it, 450-500 without; SmolLM2 (the heads together) 83-87 tok/s with
 * it, 73-79 without (statelm bench -d 8192). */
static inline void attn_read_rows(const uint8_t *p, int nrows, size_t row_bytes, size_t stride) {
    if (row_bytes == stride) row_bytes *= (size_t)nrows, nrows = 1;
    __m128i seen = _mm_setzero_si128();
    for (int j = 0; j < nrows; j++, p += stride)
        for (size_t o = 0; o + 16 <= row_bytes; o += 64) /* within the row */
            seen = _mm_or_si128(seen, _mm_loadu_si128((const __m128i *)(p + o)));
    __asm__ volatile("" ::"x"(seen)); /* the loads stay */
}
#endif

/* attn_chunk's output (cpu.h): row r's accumulator (hdv of acc + r * ldacc), M[r] and L[r] as its
 * partial at part + r * cpu_attn_part_floats(hdv). */
static inline void cpu_attn_write_parts(int64_t R, int64_t hdv, int64_t ldacc, const float *acc, const float *M,
                                        const float *L, float *part) {
    int64_t pf = cpu_attn_part_floats(hdv);
    for (int64_t r = 0; r < R; r++) {
        memcpy(part + r * pf, acc + r * ldacc, sizeof(float) * (size_t)hdv);
        part[r * pf + hdv] = M[r];
        part[r * pf + hdv + 1] = L[r];
    }
}

/* cpu_attn_fold's rows that need no factors, shared by every tier's fold: an empty partial
 * (m = -INFINITY) leaves the total as it is; an empty total becomes the partial, bit for bit (-0s
 * included). Returns true when the row is done, false when it needs tot * a + part * b. */
static inline bool cpu_attn_fold_trivial(float *tot, const float *part, int64_t hdv) {
    if (part[hdv] == -INFINITY) return true;
    if (tot[hdv] == -INFINITY) {
        memcpy(tot, part, sizeof(float) * (size_t)(hdv + 2));
        return true;
    }
    return false;
}

/* The maxima m of rows [0, n) of tot and part (partials pf floats apart) into MT and MP, for a
 * lane tier's attn_fold_rows: plain loads, not gathers (the Downfall (GDS) microcode slows those
 * on Intel). */
static inline void cpu_attn_fold_maxima(float *MT, float *MP, const float *tot, const float *part, int n, int64_t pf,
                                        int64_t hdv) {
    for (int x = 0; x < n; x++) MT[x] = tot[x * pf + hdv], MP[x] = part[x * pf + hdv];
}

/* Activation quantisers in portable C (kern_generic.c). */
void cpu_quant_act_32_generic(uint32_t wt, const float *x, int64_t k, uint8_t *dst);
void cpu_quant_act_k_generic(const float *x, int64_t k, uint8_t *dst);
void cpu_cvt_f16_generic(uint16_t *y, const float *x, int64_t n);
void cpu_vec_unary_generic(g_op op, float *y, const float *x, int64_t n, float scale);
/* The portable C micro-kernels, for SIMD tables that leave an entry to them (signatures as in
 * struct cpu_isa). */
void cpu_mm_quant_generic(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                          size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch);
void cpu_mm_float_generic(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const float *x,
                          int64_t ncols, float *y, int64_t ldy, void *scratch);
void cpu_attn_chunk_generic(const float *q, int64_t qts, int64_t T, int64_t G, const void *k, const void *v,
                            uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t nk0,
                            int64_t window, int64_t ring, float scale, int64_t c0, int64_t pf_end, float *part,
                            void *scratch);
void cpu_deltanet_head_generic(float *S, const float *S_in, const float *q, const float *k, const float *v,
                               const float *g, const float *beta, float *o, int64_t n, int64_t dk, int64_t dv,
                               int64_t qk_stride, int64_t v_stride, int64_t gb_stride, const float *S_in_next,
                               float *scratch);
/* Columns [c0, c1) of cpu_deltanet_head_generic's state (row stride dv), through all n tokens: the
 * columns evolve independently, so a SIMD tier runs its last partial chunk through this. */
void cpu_deltanet_cols_generic(float *S, const float *S_in, const float *q, const float *k, const float *v,
                               const float *g, const float *beta, float *o, int64_t n, int64_t dk, int64_t dv,
                               int64_t qk_stride, int64_t v_stride, int64_t gb_stride, int64_t c0, int64_t c1);
void cpu_conv_row_generic(float *y, const float *x, int64_t ldx, const float *w, int64_t wsc, int64_t wsk, int64_t C,
                          int64_t K);
void cpu_row_norm_generic(g_op op, float *y, const float *x, const float *w, const float *z, int64_t n, float eps,
                          float w_offset);
void cpu_vec_swiglu_generic(float *y, const float *a, const float *b, int64_t n);
void cpu_vec_geglu_generic(float *y, const float *a, const float *b, int64_t n);
void cpu_vec_add_generic(float *y, const float *a, const float *b, int64_t n);
void cpu_vec_mul_generic(float *y, const float *a, const float *b, int64_t n);
/* Element i of a float-type weight row (F32, F16, BF16). */
float cpu_load_wf(uint32_t wt, const uint8_t *w, int64_t i);

#endif
