/* kern_amx.c — the AMX tier (CPU_ISA_AMX): the AVX-512 tier's micro-kernels (kern_avx512.c), with
 * the quantised matmuls of many columns (prefill, batches of AMX_MIN_COLS and more) on repacked
 * Q4_0, Q4_1 and Q8_0 weights done by AMX-INT8 tile products. Compiled with -mamx-tile -mamx-int8
 * plus the AVX-512 flags (CMakeLists.txt); a stub (cpu_isa_amx() NULL) where the compiler lacks
 * them. cpu.c runs it only where cpu_isa_supported(CPU_ISA_AMX): the CPU has AMX-TILE and
 * AMX-INT8, XCR0 enables the tile state, and the process got the OS's permission for the tile
 * data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once per process before any tile is used).
 *
 * The product keeps cpu.h's canonical arithmetic, so it equals the portable C bit for bit: one
 * tile product covers one 32-block only (K = 32), so the int32 it leaves per (column, row) is the
 * block's exact integer dot; the per-block FMA then runs in f32 exactly as in the other tiers, with
 * the 16 rows of a weight tile in the 16 lanes and one accumulator register per column.
 *
 * Tiles (one configuration per call and column-group height M <= 16, loaded by the calling thread
 * with LDTILECFG and released at the end of the call, so every pool thread configures its own):
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
    defined(__AVX512BW__) && defined(__F16C__)

#include <immintrin.h>
#include <pthread.h>
#include <string.h>

#include "backend/cpu/kern_common.h"

#define INLINE static inline __attribute__((always_inline))

/* Columns from which the tile products run (fewer: the AVX-512 kernels), where bench_mm_cols
 * measured them ahead (Intel Xeon with AMX, 4608 x 1024, one thread; AVX-512 = 1): at 8 columns
 * 0.9-1.1x, at 16 1.2-1.4x, at 64 1.6-1.9x (Q4_0 1.85x, Q4_1 1.75x, Q8_0 1.6x). */
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

static void amx_configure(int M) {
    _Alignas(64) amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 4; t++) cfg.rows[t] = (uint8_t)M, cfg.colsb[t] = 64; /* C */
    for (int t = 4; t < 6; t++) cfg.rows[t] = (uint8_t)M, cfg.colsb[t] = 32; /* A */
    for (int t = 6; t < 8; t++) cfg.rows[t] = 8, cfg.colsb[t] = AMX_ROW_BYTES; /* B */
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

static const cpu_isa *avx512_isa;

static void mm_quant_packed(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                            size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    if (ncols < AMX_MIN_COLS || (wt != SLM_DTYPE_Q4_0 && wt != SLM_DTYPE_Q4_1 && wt != SLM_DTYPE_Q8_0)) {
        avx512_isa->mm_quant_packed(wt, pk, nr, k, act, act_stride, ncols, y, ldy);
        return;
    }
    _Alignas(64) uint8_t ubuf[AMX_CHUNK * AMX_BLOCK_BYTES];
    const bool q41 = wt == SLM_DTYPE_Q4_1;
    const int64_t nb = k / CPU_QK, ntiles = (nr + 15) / 16, full = ncols / 16 * 16;
    const int rem = (int)(ncols - full);
    const size_t tile_bytes = (size_t)nb * cpu_tile_block_bytes(wt);
    int loaded = 0; /* the M of the loaded configuration (0: none) */
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *base = pk + (size_t)(t & ~(int64_t)1) * tile_bytes;
        const cpu_tile_sub sub = cpu_tile_sub_of(wt, t, ntiles);
        const __mmask16 mrows = mask16(nr - 16 * t);
        const uint8_t *sc = base + sub.scales;
        for (int64_t b0 = 0; b0 < nb; b0 += AMX_CHUNK) {
            const int64_t b1 = b0 + AMX_CHUNK < nb ? b0 + AMX_CHUNK : nb;
            unpack_blocks(wt, base + sub.quants, sub.stride, b0, b1, ubuf);
            for (int64_t c = 0; c < full; c += 16) {
                if (loaded != 16) amx_configure(loaded = 16);
                tile_group16(q41, ubuf, sc, sub.stride, b0, b1, k, act + (size_t)c * act_stride, act_stride,
                             y + c * ldy + 16 * t, ldy, mrows, b0 == 0);
            }
            if (rem) {
                if (loaded != rem) amx_configure(loaded = rem);
                tile_group(q41, ubuf, sc, sub.stride, b0, b1, k, act + (size_t)full * act_stride, act_stride, rem,
                           y + full * ldy + 16 * t, ldy, mrows, b0 == 0);
            }
        }
    }
    _tile_release();
}

static cpu_isa k_amx;
static pthread_once_t k_amx_once = PTHREAD_ONCE_INIT;

/* The AVX-512 table with this file's packed matmul; the tiles are kern_tiles.c's, which both read. */
static void amx_table_init(void) {
    avx512_isa = cpu_isa_avx512();
    k_amx = *avx512_isa;
    k_amx.level = CPU_ISA_AMX;
    k_amx.mm_quant_packed = mm_quant_packed;
}

const cpu_isa *cpu_isa_amx(void) {
    if (!cpu_isa_avx512()) return NULL;
    pthread_once(&k_amx_once, amx_table_init);
    return &k_amx;
}

#else
const cpu_isa *cpu_isa_amx(void) { return NULL; }
#endif
