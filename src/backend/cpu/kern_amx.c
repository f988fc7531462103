/* kern_amx.c — the AMX tier's matmul (CPU_ISA_AMX): the quantised matmuls of many columns
 * (prefill, batches of AMX_MIN_COLS and more; Q6_K from AMX_Q6K_MIN_COLS) on repacked Q4_0, Q4_1,
 * Q8_0, Q4_K and Q6_K weights as AMX-INT8 tile products (Q4_K, Q6_K: see their sections); fewer
 * columns and other types go to the AVX-512 kernels. cpu.c builds the tier's table (cpu_isa_amx) from the AVX-512 one with this file's
 * cpu_amx_mm_quant_packed, in code without AVX-512 instructions, as every CPU builds it when it asks
 * for the tier. Compiled with -mamx-tile -mamx-int8 plus the AVX-512 flags (CMakeLists.txt); a stub
 * (NULL) where the compiler lacks them. It runs only where cpu_isa_supported(CPU_ISA_AMX): the CPU
 * has AMX-TILE and AMX-INT8, XCR0 enables the tile state, and the process got the OS's permission
 * for the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once per process before any tile use).
 *
 * The products keep cpu.h's canonical arithmetic, so they equal the portable C bit for bit: one
 * tile product of a 32-block type covers one block only (K = 32), so the int32 it leaves per
 * (column, row) is the block's exact integer dot; the per-block FMA then runs in f32 exactly as in
 * the other tiers, with the 16 rows of a weight tile in the 16 lanes and one accumulator register
 * per column.
 *
 * Tiles of the 32-block types (one configuration per call and column-group height M <= 16, loaded
 * by the calling thread with LDTILECFG and released at the end of the call, so every pool thread
 * configures its own):
 *  tmm0-3  C: M x 16 int32, row c = column c's dots with the 16 weight rows of one block;
 *  tmm4-5  A: M x 32 int8, the quantised activations of M columns for one block (read in place,
 *          row stride act_stride);
 *  tmm6-7  B: 8 x 64 int8, VNNI order (row kk holds elements 4kk..4kk+3 of each of the 16 weight
 *          rows): a tile block of kern_tiles.c's layout unpacked to signed bytes (Q4_0 q - 8, Q4_1
 *          the nibble q, Q8_0 the weight), AMX_CHUNK blocks at a time into a stack buffer (16 KiB)
 *          that serves every column group; across chunks the running sums live in y (an f32 store
 *          and reload changes no bit).
 * The products are TDPBSSD, four blocks in flight (C tiles 0-3 over A/B pairs 4/6 and 5/7). */
#include "backend/cpu/cpu.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__F16C__)

#include <immintrin.h>
#include <string.h>

#include "backend/cpu/kern_common.h"

#define INLINE static inline __attribute__((always_inline))

/* Columns from which the tile products run (fewer: the AVX-512 kernels), where bench_mm_cols
 * measured them ahead (Intel Xeon with AMX, 4608 x 1024, one thread; AVX-512 = 1): at 8 columns
 * 0.9-1.1x, at 16 1.2-1.5x, at 64 1.6-2.1x (Q4_0 1.85x, Q4_1 1.75x, Q8_0 1.6x, Q4_K 2.1x). Also
 * tried for 2-8 columns: two blocks per K = 64 product (activation rows zero-padded to keep the
 * blocks apart), Q4_0 at 8 columns 1.2x faster than AVX-512 in cache (1024 x 1024) but 1.6-1.9x
 * slower streaming 65536 x 1024, and 2-4 columns slower in both: each product's latency
 * (zero, load, multiply, store, reload) is paid per block pair. */
#define AMX_MIN_COLS 16
/* 32-blocks of a tile unpacked at a time (AMX_CHUNK x AMX_BLOCK_BYTES of stack); a B tile's rows. */
#define AMX_CHUNK 32
#define AMX_BLOCK_BYTES 512
#define AMX_ROW_BYTES 64

/* LDTILECFG's 64-byte operand, palette 1. */
typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* Loads the configuration for M columns and K bytes per product (32: one block of a 32-block type,
 * 64: a quarter super-block of Q4_K); *loaded keeps the last one's M * 128 + K (0: none). */
static void amx_configure(int M, int K, int *loaded) {
    if (*loaded == M * 128 + K) return;
    *loaded = M * 128 + K;
    _Alignas(64) amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 4; t++) cfg.rows[t] = (uint8_t)M, cfg.colsb[t] = 64;                 /* C */
    for (int t = 4; t < 6; t++) cfg.rows[t] = (uint8_t)M, cfg.colsb[t] = (uint16_t)K;        /* A */
    for (int t = 6; t < 8; t++) cfg.rows[t] = (uint8_t)(K / 4), cfg.colsb[t] = AMX_ROW_BYTES; /* B */
    _tile_loadconfig(&cfg);
}

static float ldf(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}
static __mmask16 mask16(int64_t n) { return (__mmask16)(n <= 0 ? 0u : n >= 16 ? 0xFFFFu : (1u << n) - 1u); }

/* One block's product: C += A (the M columns' activations of block blk) x B (the weight tile's
 * block blk, unpacked at bq). */
#define AMX_PRODUCT(C, A, B, blk)                                                   \
    do {                                                                            \
        _tile_zero(C);                                                              \
        _tile_loadd(A, act + 32 * (size_t)(blk), (long)act_stride);                 \
        _tile_loadd(B, bq + (size_t)((blk) - b0) * AMX_BLOCK_BYTES, AMX_ROW_BYTES); \
        _tile_dpbssd(C, A, B);                                                      \
    } while (0)

/* The 16 rows of one weight tile (q41: Q4_1, else Q4_0 or Q8_0) against the M (<= 16; a constant
 * where inlined with one) columns at act, blocks [b0, b1): block b's B tile at bq + (b - b0) *
 * AMX_BLOCK_BYTES (unpack_blocks), its 16 f16 scales (then Q4_1's mins) at sc + b * sstride.
 * y + c * ldy holds column c's 16 rows (mrows of them written); first: the sums start at 0, else
 * they continue from y. The tile configuration for M is loaded. Four blocks are in flight. */
INLINE void tile_group(bool q41, const uint8_t *bq, const uint8_t *sc, size_t sstride, int64_t b0, int64_t b1,
                       int64_t k, const uint8_t *act, size_t act_stride, int M, float *y, int64_t ldy,
                       __mmask16 mrows, bool first) {
    const size_t da_off = (size_t)k, aux_off = (size_t)k + 4 * (size_t)(k / CPU_QK);
    _Alignas(64) int32_t cb[4][16 * 16];
    __m512 acc[16];
    for (int c = 0; c < M; c++) acc[c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mrows, y + c * ldy);
    for (int64_t b = b0; b < b1; b += 4) {
        const int nblk = b1 - b < 4 ? (int)(b1 - b) : 4;
        AMX_PRODUCT(0, 4, 6, b);
        if (nblk > 1) AMX_PRODUCT(1, 5, 7, b + 1);
        if (nblk > 2) AMX_PRODUCT(2, 4, 6, b + 2);
        if (nblk > 3) AMX_PRODUCT(3, 5, 7, b + 3);
        _tile_stored(0, cb[0], 64);
        if (nblk > 1) _tile_stored(1, cb[1], 64);
        if (nblk > 2) _tile_stored(2, cb[2], 64);
        if (nblk > 3) _tile_stored(3, cb[3], 64);
        for (int h = 0; h < nblk; h++) {
            const uint8_t *s = sc + (size_t)(b + h) * sstride;
            __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)s));
            __m512 mn = q41 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + 32))) : dw;
            for (int c = 0; c < M; c++) {
                const uint8_t *ac = act + (size_t)c * act_stride + 4 * (size_t)(b + h);
                __m512 is = _mm512_cvtepi32_ps(_mm512_load_si512(cb[h] + 16 * c));
                acc[c] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(ldf(ac + da_off))), acc[c]);
                if (q41) acc[c] = _mm512_fmadd_ps(mn, _mm512_set1_ps(ldf(ac + aux_off)), acc[c]);
            }
        }
    }
    for (int c = 0; c < M; c++) _mm512_mask_storeu_ps(y + c * ldy, mrows, acc[c]);
}

static void tile_group16(bool q41, const uint8_t *bq, const uint8_t *sc, size_t sstride, int64_t b0, int64_t b1,
                         int64_t k, const uint8_t *act, size_t act_stride, float *y, int64_t ldy, __mmask16 mrows,
                         bool first) {
    if (q41) tile_group(true, bq, sc, sstride, b0, b1, k, act, act_stride, 16, y, ldy, mrows, first);
    else tile_group(false, bq, sc, sstride, b0, b1, k, act, act_stride, 16, y, ldy, mrows, first);
}

/* Blocks [b0, b1) of a tile (quants at q + b * stride) as signed B tiles at u: Q4_0 q - 8, Q4_1
 * the nibble q, Q8_0 the weight (w ^ 0x80 ^ 0x80). */
static void unpack_blocks(uint32_t wt, const uint8_t *q, size_t stride, int64_t b0, int64_t b1, uint8_t *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), off = _mm512_set1_epi8(wt == SLM_DTYPE_Q4_0 ? 8 : 0);
    const __m512i sign = _mm512_set1_epi8((char)0x80);
    for (int64_t b = b0; b < b1; b++, u += AMX_BLOCK_BYTES) {
        const uint8_t *v = q + (size_t)b * stride;
        if (wt == SLM_DTYPE_Q8_0) {
            for (int j = 0; j < 8; j++)
                _mm512_store_si512(u + 64 * j, _mm512_xor_si512(_mm512_loadu_si512(v + 64 * j), sign));
            continue;
        }
        for (int j = 0; j < 4; j++) {
            __m512i x = _mm512_loadu_si512(v + 64 * j);
            _mm512_store_si512(u + 64 * j, _mm512_sub_epi8(_mm512_and_si512(x, m4), off));
            _mm512_store_si512(u + 256 + 64 * j, _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 4), m4), off));
        }
    }
}

/* ---- Q4_K --------------------------------------------------------------------------------------
 * Σ_s sc_s Σ q a over a super-block is one product over all 256 elements once each sub-block's
 * scale is folded into the weights: with sc = 8 hi + lo (hi, lo <= 7), q lo and q hi fit int8
 * (<= 105), and isum = 8 Σ (q hi) a + Σ (q lo) a exactly. So a super-block is two chains of four
 * K = 64 products (C tiles 0 and 1), and the f32 epilogue runs once per super-block; Σ_s mn_s bsum_s
 * comes from vpdpwssd over (mn_s, mn_s+1) x (bsum_s, bsum_s+1) pairs. */

#define AMX_KSB_BYTES 8192 /* one super-block's B tiles: 4 quarters x (hi, lo) x 16 x 64 */
#define AMX_KCHUNK 2       /* super-blocks unpacked at a time (Q4_K 16 KiB, Q6_K 24 KiB of stack) */

/* q s for bytes q <= 15 and s <= 7. */
INLINE __m512i mul_small(__m512i q, __m512i s) {
    const __m512i q2 = _mm512_add_epi8(q, q), q4 = _mm512_add_epi8(q2, q2);
    __m512i r = _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(s, _mm512_set1_epi8(1)), q);
    r = _mm512_mask_add_epi8(r, _mm512_test_epi8_mask(s, _mm512_set1_epi8(2)), r, q2);
    return _mm512_mask_add_epi8(r, _mm512_test_epi8_mask(s, _mm512_set1_epi8(4)), r, q4);
}

/* Super-blocks [B0, B1) of the Q4_K tile at tp as B tiles at u: per super-block and quarter j
 * (elements 64j..64j+63: sub-blocks 2j, 2j+1 in rows 0-7, 8-15), q (sc >> 3) then q (sc & 7). */
static void unpack_q4k(const uint8_t *tp, int64_t B0, int64_t B1, uint8_t *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m7 = _mm512_set1_epi8(7), rep = _mm512_set1_epi32(0x01010101);
    for (int64_t B = B0; B < B1; B++, u += AMX_KSB_BYTES) {
        const uint8_t *sp = tp + (size_t)B * KT_Q4K;
        for (int j = 0; j < 4; j++)
            for (int half = 0; half < 2; half++) {
                const int s = 2 * j + half;
                __m128i sc8 = _mm_loadu_si128((const __m128i *)(sp + 2048 + 16 * s));
                __m512i sc = _mm512_mullo_epi32(_mm512_cvtepu8_epi32(sc8), rep); /* row r's scale in its 4 bytes */
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(sc, 3), m7), lo = _mm512_and_si512(sc, m7);
                for (int g = 0; g < 8; g++) {
                    __m512i v = _mm512_loadu_si512(sp + 64 * (8 * j + g));
                    __m512i q = half ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);
                    uint8_t *row = u + (size_t)(2 * j) * 1024 + (size_t)(8 * half + g) * 64;
                    _mm512_store_si512(row, mul_small(q, hi));
                    _mm512_store_si512(row + 1024, mul_small(q, lo));
                }
            }
    }
}

/* One quarter's two products: C0 += A x hi, C1 += A x lo (A in tile A_, its B tiles 6 and 7). */
#define AMX_Q4K_QUARTER(A_, j)                                                                   \
    do {                                                                                         \
        _tile_loadd(A_, ab + 64 * (j), (long)act_stride);                                       \
        _tile_loadd(6, ub + (size_t)(2 * (j)) * 1024, AMX_ROW_BYTES);                          \
        _tile_dpbssd(0, A_, 6);                                                                  \
        _tile_loadd(7, ub + (size_t)(2 * (j) + 1) * 1024, AMX_ROW_BYTES);                      \
        _tile_dpbssd(1, A_, 7);                                                                  \
    } while (0)

/* The 16 rows of the Q4_K tile at tp against M columns, super-blocks [B0, B1) (B tiles at ubuf from
 * B0); y, mrows, first as tile_group's. Configuration (M, 64) loaded. */
INLINE void tile_group_q4k(const uint8_t *tp, const uint8_t *ubuf, int64_t B0, int64_t B1, const uint8_t *act,
                           size_t act_stride, int M, float *y, int64_t ldy, __mmask16 mrows, bool first) {
    _Alignas(64) int32_t cb[2][16 * 16];
    __m512 acc[16];
    for (int c = 0; c < M; c++) acc[c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mrows, y + c * ldy);
    for (int64_t B = B0; B < B1; B++) {
        const uint8_t *sp = tp + (size_t)B * KT_Q4K, *ub = ubuf + (size_t)(B - B0) * AMX_KSB_BYTES;
        const uint8_t *ab = act + (size_t)B * CPU_Q8K_BYTES + 4;
        _tile_zero(0);
        _tile_zero(1);
        AMX_Q4K_QUARTER(4, 0);
        AMX_Q4K_QUARTER(5, 1);
        AMX_Q4K_QUARTER(4, 2);
        AMX_Q4K_QUARTER(5, 3);
        _tile_stored(0, cb[0], 64);
        _tile_stored(1, cb[1], 64);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sp + 2304)));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sp + 2336)));
        __m512i mnp[4]; /* lane r: (mn_2j, mn_2j+1) of row r as int16 pairs */
        for (int j = 0; j < 4; j++) {
            __m512i even = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sp + 2176 + 32 * j)));
            __m512i odd = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sp + 2176 + 32 * j + 16)));
            mnp[j] = _mm512_or_si512(even, _mm512_slli_epi32(odd, 16));
        }
        for (int c = 0; c < M; c++) {
            const uint8_t *as = act + (size_t)c * act_stride + (size_t)B * CPU_Q8K_BYTES;
            const __m512 da = _mm512_set1_ps(ldf(as));
            __m512i isum = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(cb[0] + 16 * c), 3),
                                            _mm512_load_si512(cb[1] + 16 * c));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, da), acc[c]);
            /* bsum_s = bsums[2s] + bsums[2s + 1] (int16: |bsum_s| <= 32 x 128), packed in pairs */
            __m256i s32 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(as + 260)), _mm256_set1_epi16(1));
            __m256i pairs = _mm256_packs_epi32(s32, s32); /* dwords 0, 1, 4, 5: (b0 b1) (b2 b3) (b4 b5) (b6 b7) */
            __m512i corr = _mm512_setzero_si512();
            corr = _mm512_dpwssd_epi32(corr, mnp[0], _mm512_set1_epi32(_mm256_extract_epi32(pairs, 0)));
            corr = _mm512_dpwssd_epi32(corr, mnp[1], _mm512_set1_epi32(_mm256_extract_epi32(pairs, 1)));
            corr = _mm512_dpwssd_epi32(corr, mnp[2], _mm512_set1_epi32(_mm256_extract_epi32(pairs, 4)));
            corr = _mm512_dpwssd_epi32(corr, mnp[3], _mm512_set1_epi32(_mm256_extract_epi32(pairs, 5)));
            acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr), _mm512_mul_ps(dmin, da), acc[c]);
        }
    }
    for (int c = 0; c < M; c++) _mm512_mask_storeu_ps(y + c * ldy, mrows, acc[c]);
}

static void tile_group_q4k16(const uint8_t *tp, const uint8_t *ubuf, int64_t B0, int64_t B1, const uint8_t *act,
                             size_t act_stride, float *y, int64_t ldy, __mmask16 mrows, bool first) {
    tile_group_q4k(tp, ubuf, B0, B1, act, act_stride, 16, y, ldy, mrows, first);
}

/* ---- Q6_K --------------------------------------------------------------------------------------
 * Σ_s sc_s Σ (q-32) a with int8 scales: sc = 49 h + 7 m + l, balanced base-7 digits in [-3, 3]
 * (|sc| <= 128 needs three), so (q - 32) x digit fits int8 (<= 96) and isum = 49 S_h + 7 S_m + S_l
 * exactly, S_p being one product over the super-block of the weights scaled by digit p of their
 * sub-block's scale: three chains of four K = 64 products (C tiles 0-2), and the f32 epilogue
 * once per super-block. */

#define AMX_Q6K_BYTES 12288 /* one super-block's B tiles: 3 digit planes x 4 quarters x 16 x 64 */
/* Columns from which Q6_K runs tile products: its unpack (three planes) costs more than the other
 * types', so they win later (bench_mm_cols -m 4608 -k 1024, µs per column, AVX-512 / AMX: 16
 * columns 31.4 / 37.8, 64 columns 31.9 / 18.4). */
#define AMX_Q6K_MIN_COLS 32

/* The balanced base-7 digits of 16 int32 scales (|sc| <= 128): sc = 49 h + 7 m + l. x / 7 is never
 * halfway between integers, so rounding it to nearest is exact. */
INLINE void q6k_digits(__m512i sc, __m512i dg[3]) {
    const __m512 seventh = _mm512_set1_ps(1.0f / 7.0f);
    const __m512i seven = _mm512_set1_epi32(7);
    /* rounded to nearest whatever MXCSR says */
    __m512i r = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(sc), seventh),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i h = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(r), seventh),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    dg[2] = _mm512_sub_epi32(sc, _mm512_mullo_epi32(r, seven));
    dg[1] = _mm512_sub_epi32(r, _mm512_mullo_epi32(h, seven));
    dg[0] = h;
}

/* x d for signed bytes x (|x| <= 32) and digits d in [-3, 3]. */
INLINE __m512i mul_digit(__m512i x, __m512i d) {
    const __m512i ad = _mm512_abs_epi8(d);
    __m512i r = _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(ad, _mm512_set1_epi8(1)), x);
    r = _mm512_mask_add_epi8(r, _mm512_test_epi8_mask(ad, _mm512_set1_epi8(2)), r, _mm512_add_epi8(x, x));
    return _mm512_mask_sub_epi8(r, _mm512_movepi8_mask(d), _mm512_setzero_si512(), r);
}

/* Super-blocks [B0, B1) of the Q6_K tile at tp as B tiles at u: per super-block, plane p and quarter
 * j (sub-blocks 4j..4j+3, 4 rows of the B tile each), (q - 32) times digit p of its scale. */
static void unpack_q6k(const uint8_t *tp, int64_t B0, int64_t B1, uint8_t *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
    const __m512i rep = _mm512_set1_epi32(0x01010101);
    for (int64_t B = B0; B < B1; B++, u += AMX_Q6K_BYTES) {
        const uint8_t *sp = tp + (size_t)B * KT_Q6K;
        for (int j = 0; j < 16; j++) {
            const uint8_t *v = sp + 192 * j;
            __m512i L0 = _mm512_loadu_si512(v), L1 = _mm512_loadu_si512(v + 64), H = _mm512_loadu_si512(v + 128);
            __m512i q[4];
            q[0] = _mm512_or_si512(_mm512_and_si512(L0, m4), _mm512_and_si512(_mm512_slli_epi16(H, 4), m30));
            q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L0, 4), m4), _mm512_and_si512(_mm512_slli_epi16(H, 2), m30));
            q[2] = _mm512_or_si512(_mm512_and_si512(L1, m4), _mm512_and_si512(H, m30));
            q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L1, 4), m4), _mm512_and_si512(_mm512_srli_epi16(H, 2), m30));
            for (int g = 0; g < 4; g++) q[g] = _mm512_sub_epi8(q[g], k32);
            __m512i dg[3];
            q6k_digits(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sp + 3072 + 16 * j))), dg);
            for (int pl = 0; pl < 3; pl++) {
                /* row r's digit in the 4 bytes of lane r */
                __m512i d = _mm512_mullo_epi32(_mm512_and_si512(dg[pl], _mm512_set1_epi32(0xFF)), rep);
                uint8_t *rows = u + (size_t)(4 * pl + j / 4) * 1024 + (size_t)(4 * (j % 4)) * 64;
                for (int g = 0; g < 4; g++) _mm512_store_si512(rows + 64 * g, mul_digit(q[g], d));
            }
        }
    }
}

/* One quarter's three products: C0 += A x plane h, C1 += A x plane m, C2 += A x plane l (A in tile
 * A_, the planes' B tiles through 6 and 7). */
#define AMX_Q6K_QUARTER(A_, j)                                                                   \
    do {                                                                                         \
        _tile_loadd(A_, ab + 64 * (j), (long)act_stride);                                       \
        _tile_loadd(6, ub + (size_t)(j) * 1024, AMX_ROW_BYTES);                                 \
        _tile_dpbssd(0, A_, 6);                                                                  \
        _tile_loadd(7, ub + (size_t)(4 + (j)) * 1024, AMX_ROW_BYTES);                           \
        _tile_dpbssd(1, A_, 7);                                                                  \
        _tile_loadd(6, ub + (size_t)(8 + (j)) * 1024, AMX_ROW_BYTES);                           \
        _tile_dpbssd(2, A_, 6);                                                                  \
    } while (0)

/* The 16 rows of the Q6_K tile at tp against M columns, super-blocks [B0, B1) (B tiles at ubuf from
 * B0); y, mrows, first as tile_group's. Configuration (M, 64) loaded. */
INLINE void tile_group_q6k(const uint8_t *tp, const uint8_t *ubuf, int64_t B0, int64_t B1, const uint8_t *act,
                           size_t act_stride, int M, float *y, int64_t ldy, __mmask16 mrows, bool first) {
    _Alignas(64) int32_t cb[3][16 * 16];
    __m512 acc[16];
    for (int c = 0; c < M; c++) acc[c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mrows, y + c * ldy);
    for (int64_t B = B0; B < B1; B++) {
        const uint8_t *sp = tp + (size_t)B * KT_Q6K, *ub = ubuf + (size_t)(B - B0) * AMX_Q6K_BYTES;
        const uint8_t *ab = act + (size_t)B * CPU_Q8K_BYTES + 4;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        AMX_Q6K_QUARTER(4, 0);
        AMX_Q6K_QUARTER(5, 1);
        AMX_Q6K_QUARTER(4, 2);
        AMX_Q6K_QUARTER(5, 3);
        _tile_stored(0, cb[0], 64);
        _tile_stored(1, cb[1], 64);
        _tile_stored(2, cb[2], 64);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sp + 3328)));
        for (int c = 0; c < M; c++) {
            const __m512 da = _mm512_set1_ps(ldf(act + (size_t)c * act_stride + (size_t)B * CPU_Q8K_BYTES));
            __m512i h = _mm512_load_si512(cb[0] + 16 * c), m = _mm512_load_si512(cb[1] + 16 * c);
            __m512i isum = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(h, 5), _mm512_slli_epi32(h, 4)), h);
            isum = _mm512_add_epi32(isum, _mm512_sub_epi32(_mm512_slli_epi32(m, 3), m));
            isum = _mm512_add_epi32(isum, _mm512_load_si512(cb[2] + 16 * c));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, da), acc[c]);
        }
    }
    for (int c = 0; c < M; c++) _mm512_mask_storeu_ps(y + c * ldy, mrows, acc[c]);
}

static void tile_group_q6k16(const uint8_t *tp, const uint8_t *ubuf, int64_t B0, int64_t B1, const uint8_t *act,
                             size_t act_stride, float *y, int64_t ldy, __mmask16 mrows, bool first) {
    tile_group_q6k(tp, ubuf, B0, B1, act, act_stride, 16, y, ldy, mrows, first);
}

/* Q4_K (q6 false) or Q6_K tiles against ncols columns: per tile and chunk of AMX_KCHUNK super-blocks,
 * the B tiles unpacked once, then groups of 16 columns and the rest. */
static void mm_kquant(bool q6, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act, size_t act_stride,
                      int64_t ncols, float *y, int64_t ldy) {
    _Alignas(64) uint8_t ubuf[AMX_KCHUNK * AMX_Q6K_BYTES]; /* the larger of the two */
    const size_t sbb = q6 ? KT_Q6K : KT_Q4K;
    const int64_t nbk = k / CPU_QK_K, ntiles = (nr + 15) / 16, full = ncols / 16 * 16;
    const int rem = (int)(ncols - full);
    int loaded = 0;
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *tp = pk + (size_t)t * (size_t)nbk * sbb;
        const __mmask16 mrows = mask16(nr - 16 * t);
        for (int64_t B0 = 0; B0 < nbk; B0 += AMX_KCHUNK) {
            const int64_t B1 = B0 + AMX_KCHUNK < nbk ? B0 + AMX_KCHUNK : nbk;
            if (q6) unpack_q6k(tp, B0, B1, ubuf);
            else unpack_q4k(tp, B0, B1, ubuf);
            for (int64_t c = 0; c < full; c += 16) {
                amx_configure(16, 64, &loaded);
                const uint8_t *ac = act + (size_t)c * act_stride;
                float *yc = y + c * ldy + 16 * t;
                if (q6) tile_group_q6k16(tp, ubuf, B0, B1, ac, act_stride, yc, ldy, mrows, B0 == 0);
                else tile_group_q4k16(tp, ubuf, B0, B1, ac, act_stride, yc, ldy, mrows, B0 == 0);
            }
            if (rem) {
                amx_configure(rem, 64, &loaded);
                const uint8_t *ac = act + (size_t)full * act_stride;
                float *yc = y + full * ldy + 16 * t;
                if (q6) tile_group_q6k(tp, ubuf, B0, B1, ac, act_stride, rem, yc, ldy, mrows, B0 == 0);
                else tile_group_q4k(tp, ubuf, B0, B1, ac, act_stride, rem, yc, ldy, mrows, B0 == 0);
            }
        }
    }
    _tile_release();
}

bool cpu_amx_tile_products(uint32_t wt, int64_t ncols) {
    if (wt == SLM_DTYPE_Q6_K) return ncols >= AMX_Q6K_MIN_COLS;
    return ncols >= AMX_MIN_COLS && (wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q8_0 ||
                                     wt == SLM_DTYPE_Q4_K);
}

static void mm_quant_packed(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                            size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    if (!cpu_amx_tile_products(wt, ncols)) {
        cpu_isa_avx512()->mm_quant_packed(wt, pk, nr, k, act, act_stride, ncols, y, ldy);
        return;
    }
    if (wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q6_K) {
        mm_kquant(wt == SLM_DTYPE_Q6_K, pk, nr, k, act, act_stride, ncols, y, ldy);
        return;
    }
    _Alignas(64) uint8_t ubuf[AMX_CHUNK * AMX_BLOCK_BYTES];
    const bool q41 = wt == SLM_DTYPE_Q4_1;
    const int64_t nb = k / CPU_QK, ntiles = (nr + 15) / 16, full = ncols / 16 * 16;
    const int rem = (int)(ncols - full);
    const size_t tile_bytes = (size_t)nb * cpu_tile_block_bytes(wt);
    int loaded = 0;
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *base = pk + (size_t)(t & ~(int64_t)1) * tile_bytes;
        const cpu_tile_sub sub = cpu_tile_sub_of(wt, t, ntiles);
        const __mmask16 mrows = mask16(nr - 16 * t);
        const uint8_t *sc = base + sub.scales;
        for (int64_t b0 = 0; b0 < nb; b0 += AMX_CHUNK) {
            const int64_t b1 = b0 + AMX_CHUNK < nb ? b0 + AMX_CHUNK : nb;
            unpack_blocks(wt, base + sub.quants, sub.stride, b0, b1, ubuf);
            for (int64_t c = 0; c < full; c += 16) {
                amx_configure(16, 32, &loaded);
                tile_group16(q41, ubuf, sc, sub.stride, b0, b1, k, act + (size_t)c * act_stride, act_stride,
                             y + c * ldy + 16 * t, ldy, mrows, b0 == 0);
            }
            if (rem) {
                amx_configure(rem, 32, &loaded);
                tile_group(q41, ubuf, sc, sub.stride, b0, b1, k, act + (size_t)full * act_stride, act_stride, rem,
                           y + full * ldy + 16 * t, ldy, mrows, b0 == 0);
            }
        }
    }
    _tile_release();
}

cpu_mm_packed_fn cpu_amx_mm_quant_packed(void) { return mm_quant_packed; }

#else
cpu_mm_packed_fn cpu_amx_mm_quant_packed(void) { return NULL; }
bool cpu_amx_tile_products(uint32_t wt, int64_t ncols) {
    (void)wt, (void)ncols;
    return false;
}
#endif
