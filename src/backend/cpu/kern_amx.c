/* kern_amx.c — the AMX tier (CPU_ISA_AMX): the AVX-512 tier's micro-kernels (kern_avx512.c), with
 * the quantised matmuls of many columns (prefill, batches of 8 or 16 and more) on repacked
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
 *  tmm0, tmm1  C: M x 16 int32, row c = column c's dots with the 16 weight rows of one block;
 *  tmm2, tmm3  A: M x 32 int8, the quantised activations of M columns for one block (read in place,
 *              row stride act_stride);
 *  tmm4, tmm5  B: 8 x 64 u8, VNNI order (row kk holds elements 4kk..4kk+3 of each of the 16 weight
 *              rows): exactly a Q8_0 tile's 8 quant vectors (w ^ 0x80), and for Q4_0 / Q4_1 the
 *              low nibbles of the 4 quant vectors then their high nibbles (kern_tiles.c's layout).
 * The products are TDPBSUD (signed activations x unsigned weights); the unsigned offsets come out
 * with the activation block's aux term (-8 Σa for Q4_0, -128 Σa for Q8_0; cpu.h). Two blocks are
 * in flight at once (tmm0/2/4 and tmm1/3/5). Q4 tiles are unpacked to nibbles AMX_CHUNK blocks at a
 * time into a stack buffer (16 KiB) and used for every column group; across chunks the running sums
 * live in y (an f32 store and reload changes no bit). */
#include "backend/cpu/cpu.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__F16C__)

#include <immintrin.h>
#include <pthread.h>
#include <string.h>

#include "backend/cpu/kern_common.h"

#define INLINE static inline __attribute__((always_inline))

/* Columns from which the tile products run (fewer: the AVX-512 kernels), where bench_mm_cols
 * measured them ahead (Intel Xeon with AMX, 4608 x 1024, one thread): Q8_0 from 8 columns (1.3x
 * at 8, 1.5x at 16 and 64), Q4_0 and Q4_1 from 16 (level at 8; 1.3x at 16, 1.5x at 64). */
#define AMX_MIN_COLS_Q8 8
#define AMX_MIN_COLS_Q4 16
/* 32-blocks of a Q4 tile unpacked at a time (AMX_CHUNK x 512 bytes of stack). */
#define AMX_CHUNK 32

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
    for (int t = 0; t < 2; t++) {
        cfg.rows[t] = (uint8_t)M, cfg.colsb[t] = 64;         /* C */
        cfg.rows[2 + t] = (uint8_t)M, cfg.colsb[2 + t] = 32; /* A */
        cfg.rows[4 + t] = 8, cfg.colsb[4 + t] = 64;          /* B */
    }
    _tile_loadconfig(&cfg);
}

static float ldf(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}
static int32_t ldi(const uint8_t *p) {
    int32_t i;
    memcpy(&i, p, 4);
    return i;
}
static __mmask16 mask16(int64_t n) { return (__mmask16)(n <= 0 ? 0u : n >= 16 ? 0xFFFFu : (1u << n) - 1u); }

/* The 16 rows of one weight tile (q41: Q4_1, else Q4_0 or Q8_0) against the M (<= 16; a constant where inlined with one) columns at
 * act, blocks [b0, b1): B tile of block b at bq + (b - b0) * bstride, its 16 f16 scales (then Q4_1's
 * mins) at sc + b * sstride. y + c * ldy holds column c's 16 rows (mrows of them written); first:
 * the sums start at 0, else they continue from y. The tile configuration for M is loaded. */
INLINE void tile_group(bool q41, const uint8_t *bq, size_t bstride, const uint8_t *sc, size_t sstride, int64_t b0,
                       int64_t b1, int64_t k, const uint8_t *act, size_t act_stride, int M, float *y, int64_t ldy,
                       __mmask16 mrows, bool first) {
    const size_t da_off = (size_t)k, aux_off = (size_t)k + 4 * (size_t)(k / CPU_QK);
    _Alignas(64) int32_t cb[2][16 * 16];
    __m512 acc[16];
    for (int c = 0; c < M; c++) acc[c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mrows, y + c * ldy);
    for (int64_t b = b0; b < b1; b += 2) {
        const bool two = b + 1 < b1;
        _tile_zero(0);
        _tile_loadd(2, act + 32 * (size_t)b, (long)act_stride);
        _tile_loadd(4, bq + (size_t)(b - b0) * bstride, 64);
        _tile_dpbsud(0, 2, 4);
        if (two) {
            _tile_zero(1);
            _tile_loadd(3, act + 32 * (size_t)(b + 1), (long)act_stride);
            _tile_loadd(5, bq + (size_t)(b + 1 - b0) * bstride, 64);
            _tile_dpbsud(1, 3, 5);
        }
        _tile_stored(0, cb[0], 64);
        if (two) _tile_stored(1, cb[1], 64);
        for (int h = 0; h < 1 + two; h++) {
            const uint8_t *s = sc + (size_t)(b + h) * sstride;
            __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)s));
            __m512 mn = q41 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + 32))) : dw;
            for (int c = 0; c < M; c++) {
                const uint8_t *ac = act + (size_t)c * act_stride + 4 * (size_t)(b + h);
                __m512i is = _mm512_load_si512(cb[h] + 16 * c);
                if (!q41) is = _mm512_add_epi32(is, _mm512_set1_epi32(ldi(ac + aux_off)));
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dw, _mm512_set1_ps(ldf(ac + da_off))),
                                         acc[c]);
                if (q41) acc[c] = _mm512_fmadd_ps(mn, _mm512_set1_ps(ldf(ac + aux_off)), acc[c]);
            }
        }
    }
    for (int c = 0; c < M; c++) _mm512_mask_storeu_ps(y + c * ldy, mrows, acc[c]);
}

static void tile_group16(bool q41, const uint8_t *bq, size_t bstride, const uint8_t *sc, size_t sstride, int64_t b0,
                         int64_t b1, int64_t k, const uint8_t *act, size_t act_stride, float *y, int64_t ldy,
                         __mmask16 mrows, bool first) {
    if (q41) tile_group(true, bq, bstride, sc, sstride, b0, b1, k, act, act_stride, 16, y, ldy, mrows, first);
    else tile_group(false, bq, bstride, sc, sstride, b0, b1, k, act, act_stride, 16, y, ldy, mrows, first);
}

/* Q4_0 / Q4_1 tile blocks [b0, b1) (quants at q + b * stride) as B tiles of nibbles at u. */
static void unpack_q4(const uint8_t *q, size_t stride, int64_t b0, int64_t b1, uint8_t *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t b = b0; b < b1; b++, u += 512) {
        const uint8_t *v = q + (size_t)b * stride;
        for (int j = 0; j < 4; j++) {
            __m512i x = _mm512_loadu_si512(v + 64 * j);
            _mm512_store_si512(u + 64 * j, _mm512_and_si512(x, m4));
            _mm512_store_si512(u + 256 + 64 * j, _mm512_and_si512(_mm512_srli_epi16(x, 4), m4));
        }
    }
}

static const cpu_isa *avx512_isa;

static void mm_quant_packed(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                            size_t act_stride, int64_t ncols, float *y, int64_t ldy) {
    const bool q8 = wt == SLM_DTYPE_Q8_0, q4 = wt == SLM_DTYPE_Q4_0 || wt == SLM_DTYPE_Q4_1;
    if (!(q8 && ncols >= AMX_MIN_COLS_Q8) && !(q4 && ncols >= AMX_MIN_COLS_Q4)) {
        avx512_isa->mm_quant_packed(wt, pk, nr, k, act, act_stride, ncols, y, ldy);
        return;
    }
    _Alignas(64) uint8_t ubuf[AMX_CHUNK * 512];
    const int64_t nb = k / CPU_QK, ntiles = (nr + 15) / 16, full = ncols / 16 * 16;
    const int rem = (int)(ncols - full);
    const size_t tile_bytes = (size_t)nb * cpu_tile_block_bytes(wt);
    int loaded = 0; /* the M of the loaded configuration (0: none) */
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *base = pk + (size_t)(t & ~(int64_t)1) * tile_bytes;
        const cpu_tile_sub sub = cpu_tile_sub_of(wt, t, ntiles);
        const __mmask16 mrows = mask16(nr - 16 * t);
        for (int64_t b0 = 0; b0 < nb; b0 += AMX_CHUNK) {
            const int64_t b1 = b0 + AMX_CHUNK < nb ? b0 + AMX_CHUNK : nb;
            const uint8_t *bq = ubuf;
            size_t bstride = 512;
            if (q8) bq = base + sub.quants + (size_t)b0 * sub.stride, bstride = sub.stride;
            else unpack_q4(base + sub.quants, sub.stride, b0, b1, ubuf);
            const uint8_t *sc = base + sub.scales;
            for (int64_t c = 0; c < full; c += 16) {
                if (loaded != 16) amx_configure(loaded = 16);
                tile_group16(wt == SLM_DTYPE_Q4_1, bq, bstride, sc, sub.stride, b0, b1, k, act + (size_t)c * act_stride, act_stride,
                             y + c * ldy + 16 * t, ldy, mrows, b0 == 0);
            }
            if (rem) {
                if (loaded != rem) amx_configure(loaded = rem);
                tile_group(wt == SLM_DTYPE_Q4_1, bq, bstride, sc, sub.stride, b0, b1, k, act + (size_t)full * act_stride,
                           act_stride, rem,
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
