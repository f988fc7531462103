/* cpu.h — internals of the CPU backend shared by the kernel files: the backend object (pool,
 * per-thread scratch, shared work buffer, instruction-set level) and the kernel tables.
 *
 * Two kernel sets exist for every op:
 *  - kern_ref.c: the scalar reference kernel of every op (the oracle), always present;
 *  - kern_fast.c: fast kernels for the ops and dtypes that pay (matmul on packed weights,
 *    attention, DeltaNet, conv, norms, elementwise). A fast kernel declares which nodes it takes
 *    (`supports`); every other node, and every op that has only a reference kernel (for example
 *    one added later), runs the reference kernel. The fast kernels call ISA micro-kernels through
 *    a cpu_isa table (kern_generic.c: portable C; kern_avx2.c, and once more with AVX-VNNI as
 *    kern_avx2_vnni.c; kern_avx512.c; kern_neon.c), chosen once per backend from the CPU's
 *    features (cpu_isa_detect) and backend_params.kernels: "ref" (reference kernels only),
 *    "generic", "neon", "avx2", "avxvnni", "avx512" (exactly that level: refused with a message
 *    when the build or the CPU lacks it), or NULL/""/"auto" (the best the CPU has; its quantised
 *    matmuls on tiles may run a shape on another tier that reads the same tiles, kern_pick.c).
 *
 * Batch invariance (relied on by tests/golden and state replay): every output element is
 * computed by one task with the same arithmetic whatever the number of tokens in the call and the
 * thread count. Work is split over output rows, heads or channels, never over a reduction axis.
 *
 * Canonical matmul arithmetic (every ISA implements exactly this, so the result of a fast matmul
 * is also independent of the ISA; tests check SIMD against kern_generic.c bit for bit):
 *  - Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights: the activation column is quantised per 32-block to int8
 *    a with scale da (ggml's x86 Q8_0/Q8_1 rule: d = amax/127, q = round-half-even(x·127/amax),
 *    da = f16(d)), and per output y = 0; for each block b in order:
 *        y = fmaf((float)isum_b, dw_b * da_b, y)        isum_b = exact Σ w_j a_j (int32)
 *        Q4_1, Q5_1 only:  y = fmaf(m_b, sa_b, y)       sa_b = f16(d · Σ a_j)
 *    with w_j = q-8 (Q4_0), the 5-bit q-16 (Q5_0), the int8 (Q8_0), the nibble q (Q4_1), the
 *    5-bit q (Q5_1), dw/m the block's f16 values.
 *  - Q4_K, Q5_K, Q6_K weights: activations quantised per 256 to Q8_K (ggml's rule) and per super-block
 *        Q4_K, Q5_K: y = fmaf((float)Σ_s sc_s·Σ q·a, d·da, y);  y = fmaf(-(float)Σ_s mn_s·bsum_s, dmin·da, y)
 *                    (q the nibble, or for Q5_K the 5-bit value)
 *        Q6_K: y = fmaf((float)Σ_s sc_s·Σ (q-32)·a, d·da, y)
 *  - F32, F16, BF16 weights: f32 activations, weights widened exactly to f32, 16 lanes:
 *        acc[l] = fmaf(w_i, x_i, acc[l]) for i ≡ l (mod 16), i ascending (a short tail is
 *        zero-padded), then acc[l] += acc[l + s] for s = 8, 4, 2, 1; y = acc[0].
 * The other fast kernels are ISA-independent the same way (tests check every tier against
 * kern_generic.c bit for bit): each spells out its operation order below, and e^x is cpu_exp
 * (kern_common.h) in every tier.
 *  - GEGLU (gelu_tanh(a) · b, HF's gelu_pytorch_tanh): per element, in f32 operations in this
 *    order, u = 0.7978845608f · (x + 0.044715f · ((x·x)·x)), y = x / (1 + cpu_exp(0 - (u + u))) · b.
 *    0.5·x·(1 + tanh(u)) = x·sigmoid(2u) exactly; this form has no cancellation for x < 0.
 */
#ifndef SLM_BACKEND_CPU_CPU_H
#define SLM_BACKEND_CPU_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "backend/backend.h"
#include "backend/cpu/pool.h"

/* Instruction-set levels, in order of preference. They are not nested: a CPU may have a level
 * without one numbered below it (AMD Zen 4/5 have AVX512 but not AVX2_VNNI); cpu_isa_supported
 * says which levels this CPU has. */
typedef enum cpu_isa_level {
    CPU_ISA_GENERIC = 0, /* portable C */
    CPU_ISA_NEON = 1,    /* aarch64 with NEON and the dot-product extension */
    CPU_ISA_AVX2 = 2,    /* x86-64 with AVX2, FMA, F16C */
    CPU_ISA_AVX2_VNNI = 3, /* the same plus AVX-VNNI (VEX vpdpbusd; Alder Lake and later clients) */
    CPU_ISA_AVX512 = 4,  /* x86-64 with AVX-512 F, BW, VL, DQ and VNNI (plus AVX2, FMA, F16C) */
    CPU_ISA_AMX = 5,     /* AVX512 plus AMX-TILE and AMX-INT8, with the OS's permission for the tile data */
    CPU_ISA_I8MM = 6     /* NEON plus the int8 matrix multiply (ARMv8.6 I8MM: SMMLA) */
} cpu_isa_level;

/* "generic", "neon", "avx2", "avxvnni", "avx512", "amx", "i8mm". */
const char *cpu_isa_name(cpu_isa_level isa);
/* True when the level's kernels are built in and this CPU has every feature they need (CPUID, and
 * XGETBV for the OS saving the AVX / AVX-512 / AMX tile registers). For AMX it also asks the OS for
 * the tile data (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA), once per process, before any
 * thread uses a tile) and is false when that is refused or the OS has no such request. Reads the
 * CPU's feature bits (cpuid and the compiler's __builtin_cpu_supports, whose table the C runtime
 * fills once, read-only after). */
bool cpu_isa_supported(cpu_isa_level level);
/* Why a level is not supported: "not built in", or the first CPU feature it lacks ("AVX-VNNI");
 * NULL when cpu_isa_supported(level). Static storage. */
const char *cpu_isa_missing(cpu_isa_level level);
/* The most preferred supported level (AMX, AVX512, AVX2_VNNI, AVX2, I8MM, NEON, else GENERIC). */
cpu_isa_level cpu_isa_detect(void);
/* Whether 512-bit instructions leave every vector port of the core open: true on AMD (cpuid vendor
 * AuthenticAMD: Zen 4 and 5 run them on their own units); false on Intel, whose cores close port
 * 1's vector ALUs while 512-bit uops are in flight, and on other CPUs. Read once, then cached. */
bool cpu_avx512_keeps_ports(void);

/* ---- activation formats for the integer matmuls ---------------------------------------------
 * One column of k activations quantised for weights of type wt:
 *  32-block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): qs int8 [k] | da f32 [k/32] | aux [k/32], where
 *    aux is int32 -8·Σa (Q4_0), -16·Σa (Q5_0), -128·Σa (Q8_0: lets offset-binary kernels use u8
 *    weights), or f32 sa (Q4_1, Q5_1). Column stride cpu_act_bytes (a multiple of 64).
 *  K types (Q4_K, Q5_K, Q6_K): ggml's block_q8_K [k/256]: d f32 | qs int8 [256] | bsums int16 [16]. */
#define CPU_QK 32
#define CPU_QK_K 256
#define CPU_Q8K_BYTES 292

/* True if the fast matmul takes weights of this type. */
bool cpu_mm_supports(uint32_t wt);
/* True for the integer (quantised-activation) types. */
bool cpu_mm_is_quant(uint32_t wt);
/* Bytes of one quantised activation column of length k for weight type wt (0 for float types). */
size_t cpu_act_bytes(uint32_t wt, int64_t k);

/* ---- ISA micro-kernels ----------------------------------------------------------------------- */
typedef struct cpu_isa {
    cpu_isa_level level;
    /* Quantises one activation column x (k) into the format for weights of type wt. */
    void (*quant_act)(uint32_t wt, const float *x, int64_t k, uint8_t *dst);
    /* Quantised matmul over rows [0, nr) of w (row stride row_bytes, k columns of weights) and
     * ncols activation columns (stride act_stride): y[c * ldy + r]. Any nr (the kernel walks
     * tiles of 16 rows and may prefetch within the range); scratch >= cpu_mm_scratch_bytes. */
    void (*mm_quant)(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                     size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch);
    /* Repacked ("interleaved") weights, optional (NULL where a tier has none): tiles of 16 rows in
     * which one 64-byte vector holds 4 weight bytes of each of the 16 rows (layouts in
     * kern_tiles.c and kern_common.h: 32-block types in pairs of tiles interleaved per block, K
     * types per super-block with scales widened to bytes). tile_block_bytes(wt) is a tile's bytes
     * per 32 elements of k (0: the type is not repacked); rows past the matrix are zero. About the
     * GGUF's size; decode then streams one contiguous run per tile range. repack_tiles fills
     * tiles [t0, t1) of dst from w (m rows of k; any t0, t1); mm_quant_packed computes rows
     * [0, nr) of the tiles at pk with cpu.h's canonical arithmetic, where pk is the start of a
     * tile whose index is a multiple of tile_group(wt) and nr covers whole groups except at the
     * matrix's end (nr <= 16 * tiles). */
    size_t (*tile_block_bytes)(uint32_t wt);
    int32_t (*tile_group)(uint32_t wt);
    void (*repack_tiles)(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t m, int64_t k, int64_t t0, int64_t t1,
                         uint8_t *dst);
    void (*mm_quant_packed)(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                            size_t act_stride, int64_t ncols, float *y, int64_t ldy);
    /* Float-weight matmul (F32, F16, BF16 weights; x f32 columns of stride k): same shape rules. */
    void (*mm_float)(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const float *x,
                     int64_t ncols, float *y, int64_t ldy, void *scratch);
    /* Attention for a block of T query tokens and the G query heads that share one KV head, over
     * one chunk of keys; cpu_attn_block runs every chunk and folds the partials.
     * Row r = (t, h): q at q + t*q_tstride + h*hd (hd f32); it attends the keys at positions [lo,
     * hi], hi = n_keys0 + t - 1 (its own position), lo = window ? max(0, hi - window + 1) : 0. The
     * key/value at position P is row (ring ? P mod ring : P) at k + row*kstride / v + row*vstride
     * (elements), dtype kvt (F16 or F32); ring is 0 or a multiple of 16 no larger than the states'
     * rows, and the caller guarantees that the rows of [lo, hi] hold those positions (rows of other
     * positions may hold anything, NaN included).
     * Canonical per row (f32): the keys are cut into chunks of CPU_ATTN_CHUNK absolute positions
     * ([c0, c0 + CPU_ATTN_CHUNK), c0 a multiple of it); attn_chunk runs chunk c0 alone, from m =
     * -INFINITY, l = 0, acc = 0: keys in blocks of 16 aligned to absolute positions, j0 = the
     * larger of floor(lo / 16)*16 and c0, j0 + 16, ... <= min(hi, c0 + CPU_ATTN_CHUNK - 1) (block
     * j0 is the 16 contiguous rows from j0 mod ring); lane j of a block is position j0 + j, and
     * lanes outside [lo, hi] are masked: they never enter the max, their p is exactly 0 and they
     * are never multiplied into the accumulator (a kernel may load and compute them, then select
     * before any use; without a ring it never reads rows past the last row's hi, which may lie past
     * the end of the state). The block's scores are s_j = (c0_j + c1_j) * scale with c0/c1 the FMA
     * chains over even/odd i of q_i k_ji; online softmax (running max m, sum l, accumulator
     * rescaled by c = m_new == m_old ? 1 : cpu_exp(m_old - m_new), l = l c + the 16-lane canonical
     * sum of p_j = cpu_exp(s_j - m), masked lanes 0); accumulator += p_j v_j for the row's keys of
     * the block in order. It writes the row's partial at part + r*cpu_attn_part_floats(hdv): acc
     * (hdv), m, l (a row with no key in the chunk: acc 0, m = -INFINITY, l = 0). The partials of
     * the chunks meeting [lo, hi] are folded in ascending order by cpu_attn_fold, and out = acc /
     * l (cpu_attn_finish). pf_end: a kernel may prefetch the rows of keys below it (a hint: the
     * end of the keys this thread runs next). The arithmetic of a row does not depend on T, G, the other rows or
     * which thread ran which chunk. scratch >= cpu_attn_scratch_bytes(hd, hdv, T*G), 64-byte
     * aligned. */
    void (*attn_chunk)(const float *q, int64_t q_tstride, int64_t T, int64_t G, const void *k, const void *v,
                       uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t n_keys0,
                       int64_t window, int64_t ring, float scale, int64_t c0, int64_t pf_end, float *part,
                       void *scratch);
    /* attn_chunk for NH adjacent KV heads of one chunk at once, each head's partials attn_chunk's
     * bits: head g's rows read their queries at q + g*G*hd (then as attn_chunk's), its K at k +
     * g*hd and V at v + g*hdv elements, and write its partials at part + g*T*G*
     * cpu_attn_part_floats(hdv). A tier reads the heads' rows of a block together, in address
     * order, instead of one head's strided columns per call. NULL where a tier has no such path
     * (the caller runs attn_chunk per head). scratch >= cpu_attn_scratch_bytes(hd, hdv, NH*T*G). */
    void (*attn_chunk_heads)(const float *q, int64_t q_tstride, int64_t T, int64_t G, int64_t NH, const void *k,
                             const void *v, uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv,
                             int64_t n_keys0, int64_t window, int64_t ring, float scale, int64_t c0, int64_t pf_end,
                             float *part, void *scratch);
    /* attn_chunk with K of type kt and V of type vt, at least one of them Q8_0 or Q4_0 (the other
     * Q8_0, Q4_0, F16 or F32); hd, hdv, kstride, vstride and the head offsets of k and v are
     * multiples of 32 for a quantised type, strides in elements. The arithmetic is attn_chunk's
     * with each element read as its exact f32 value (Q8_0: d * q; Q4_0: d * (q - 8)), so a
     * quantised state gives the bits attn_chunk gives on its dequantised copy: kern_attn_q.h, the
     * same C in every tier. Same scratch and partials as attn_chunk; cpu_attn_block_q runs a whole
     * block of rows (all chunks, fold, finish). */
    void (*attn_chunk_q)(const float *q, int64_t q_tstride, int64_t T, int64_t G, const void *k, const void *v,
                         uint32_t kt, uint32_t vt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv,
                         int64_t n_keys0, int64_t window, int64_t ring, float scale, int64_t c0, float *part,
                         void *scratch);
    /* cpu_attn_fold on R rows at once: row r of one chunk's partials (part + r*pf) into row r of
     * the running totals (tot + r*pf), pf = cpu_attn_part_floats(hdv); the same bits as R calls of
     * cpu_attn_fold in any order (rows are independent). */
    void (*attn_fold_rows)(float *tot, const float *part, int64_t R, int64_t hdv);
    /* f32 -> f16 (round to nearest even), n elements. */
    void (*cvt_f16)(uint16_t *y, const float *x, int64_t n);
    /* One recurrent DeltaNet head over n >= 1 tokens: S (dk, dv) is read from S_in and the updated
     * state written to S (S_in may equal S); q/k rows at q + t*qk_stride, v/o rows at
     * v + t*v_stride, g/beta at g[t*gb_stride]. Per token: S *= e^g; u = beta (v - S^T k);
     * S += k u^T; o = S^T q (f32, FMA chains over the dk rows in order). S_in_next, when not NULL,
     * is the (dk, dv) state the caller reads next: a prefetch hint only. scratch: NULL or
     * cpu_deltanet_scratch_bytes(dk) bytes, 64-byte aligned, where a tier may keep a part of the
     * state between the passes of several tokens. */
    void (*deltanet_head)(float *S, const float *S_in, const float *q, const float *k, const float *v, const float *g,
                          const float *beta, float *o, int64_t n, int64_t dk, int64_t dv, int64_t qk_stride,
                          int64_t v_stride, int64_t gb_stride, const float *S_in_next, float *scratch);
    /* Elementwise and row kernels over n elements. */
    void (*vec_add)(float *y, const float *a, const float *b, int64_t n);
    void (*vec_mul)(float *y, const float *a, const float *b, int64_t n);
    void (*vec_swiglu)(float *y, const float *a, const float *b, int64_t n);
    void (*vec_geglu)(float *y, const float *a, const float *b, int64_t n);
    void (*vec_unary)(g_op op, float *y, const float *x, int64_t n, float scale);
    /* RMSNORM (w may be NULL; w_offset added to w), L2NORM, GATED_RMSNORM (z != NULL) of one row. */
    void (*row_norm)(g_op op, float *y, const float *x, const float *w, const float *z, int64_t n, float eps,
                     float w_offset);
    /* Depthwise causal conv of one token over C channels: y[c] = sum_k w(c, k) x[k*ldx + c] (FMA
     * chain over k in order), x rows at x + k*ldx (K rows); tap (c, k) of the weights at
     * w[c*wsc + k*wsk] (wsc = K, wsk = 1 for the file layout (K, C); wsc = 1, wsk = ldx for a
     * transposed copy). */
    void (*conv_row)(float *y, const float *x, int64_t ldx, const float *w, int64_t wsc, int64_t wsk, int64_t C,
                     int64_t K);
} cpu_isa;

const cpu_isa *cpu_isa_generic(void);
const cpu_isa *cpu_isa_avx2(void);   /* NULL when not built in */
const cpu_isa *cpu_isa_avx2_vnni(void); /* NULL when not built in */
const cpu_isa *cpu_isa_avx512(void); /* NULL when not built in */
/* cpu.c: the AVX-512 table with kern_amx.c's packed matmul; NULL when not built in. */
const cpu_isa *cpu_isa_amx(void);
typedef void (*cpu_mm_packed_fn)(uint32_t wt, const uint8_t *pk, int64_t nr, int64_t k, const uint8_t *act,
                                 size_t act_stride, int64_t ncols, float *y, int64_t ldy);
/* kern_amx.c's mm_quant_packed (AMX tile products from 16 columns, else the AVX-512 kernels'); NULL
 * when not built in. */
cpu_mm_packed_fn cpu_amx_mm_quant_packed(void);
/* True when that matmul runs AMX tile products for weight type wt and ncols columns; for the
 * other shapes it runs the AVX-512 kernels (false where kern_amx.c is not built in). */
bool cpu_amx_tile_products(uint32_t wt, int64_t ncols);
const cpu_isa *cpu_isa_neon(void);   /* NULL when not built in */
/* cpu.c: the NEON table with kern_i8mm.c's packed matmul; NULL when not built in. */
const cpu_isa *cpu_isa_i8mm(void);
/* kern_i8mm.c's mm_quant_packed (SMMLA from 2 columns, else the NEON kernels'); NULL when not built in. */
cpu_mm_packed_fn cpu_i8mm_mm_quant_packed(void);
/* The table for a level; for a level this CPU lacks (cpu_isa_supported), the table of
 * cpu_isa_detect() instead, so the result is always safe to run. */
const cpu_isa *cpu_isa_get(cpu_isa_level level);

/* Per-thread scratch bytes the micro-kernels need. */
size_t cpu_mm_scratch_bytes(uint32_t wt, int64_t k, int64_t ncols);
size_t cpu_attn_scratch_bytes(int64_t hd, int64_t hdv, int64_t rows);

/* ---- attention chunks (kern_generic.c, portable C: the same bits on every tier) --------------- */
/* Keys per chunk of cpu_isa.attn_chunk (a multiple of 16; fixed, so results do not depend on how
 * the chunks are shared among threads). */
#define CPU_ATTN_CHUNK 128
/* Floats of one row's partial: acc (hdv), m, l, padded to 16 (64 bytes). */
static inline int64_t cpu_attn_part_floats(int64_t hdv) { return (hdv + 2 + 15) & ~(int64_t)15; }
/* Folds one row's partial into its running total (same layout; an empty total has m = -INFINITY,
 * l = 0): a partial with m = -INFINITY (no key of the row in its chunk) changes nothing; into an
 * empty total it is copied; else m = max(m_t, m_p), a = m == m_t ? 1 : cpu_exp(m_t - m), b = m ==
 * m_p ? 1 : cpu_exp(m_p - m), acc_i = acc_t_i * a + acc_p_i * b, l = l_t * a + l_p * b. */
void cpu_attn_fold(float *tot, const float *part, int64_t hdv);
/* The generic tier's attn_fold_rows: cpu_attn_fold row by row. */
void cpu_attn_fold_rows(float *tot, const float *part, int64_t R, int64_t hdv);
/* out[i] = acc_i * (1 / l) of a folded total. */
void cpu_attn_finish(const float *tot, int64_t hdv, float *out);
/* R empty running totals (acc 0, m = -INFINITY, l = 0), cpu_attn_part_floats(hdv) floats apart. */
void cpu_attn_empty_totals(float *tot, int64_t R, int64_t hdv);
/* cpu.h's attention of one block of rows (arguments as attn_chunk's, out row r at out +
 * t*o_tstride + h*hdv): isa->attn_chunk over the chunks meeting the rows' keys in ascending order,
 * each folded into the rows' totals, then finished. */
void cpu_attn_block(const cpu_isa *isa, const float *q, int64_t q_tstride, int64_t T, int64_t G, const void *k,
                    const void *v, uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv,
                    int64_t n_keys0, int64_t window, int64_t ring, float scale, float *out, int64_t o_tstride,
                    void *scratch);
/* cpu_attn_block over K of type kt and V of type vt (attn_chunk_q; at least one quantised). */
void cpu_attn_block_q(const cpu_isa *isa, const float *q, int64_t q_tstride, int64_t T, int64_t G, const void *k,
                      const void *v, uint32_t kt, uint32_t vt, int64_t kstride, int64_t vstride, int64_t hd,
                      int64_t hdv, int64_t n_keys0, int64_t window, int64_t ring, float scale, float *out,
                      int64_t o_tstride, void *scratch);

size_t cpu_deltanet_scratch_bytes(int64_t dk);

/* ---- the tier of each quantised matmul shape (kern_pick.c) ------------------------------------- */
/* Weight types (the 8 quantised ones) and column counts (1..8, then 9 and more) of the choice. */
#define CPU_PICK_TYPES 8
#define CPU_PICK_COLS 9
/* The index of quantised weight type wt in the choice (0..7), -1 for other types. */
int32_t cpu_pick_type_index(uint32_t wt);
/* Weight type wt with column counts [cols_lo, cols_hi] (CPU_PICK_COLS stands for that many and more)
 * runs on tier level. */
typedef struct cpu_pick_rule {
    uint32_t wt;
    int32_t cols_lo, cols_hi;
    cpu_isa_level level;
} cpu_pick_rule;
/* Fills picks with own; with choose (a backend on "auto" kernels), applies this CPU class's rules
 * (kern_pick.c's table of measured shapes). */
void cpu_mm_picks_fill(const cpu_isa *own, bool choose, const cpu_isa *picks[CPU_PICK_TYPES][CPU_PICK_COLS]);
/* Applies rules to picks: each rule whose tier is supported and reads own's tiles of its type (same
 * layout, sizes and groups, so the same bits: cpu.h); the others are skipped. */
void cpu_mm_picks_apply(const cpu_isa *own, const cpu_pick_rule *rules, size_t n_rules,
                        const cpu_isa *picks[CPU_PICK_TYPES][CPU_PICK_COLS]);

/* ---- the backend ------------------------------------------------------------------------------ */
/* Repacked copies of quantised weights, keyed by the weights' address (quantised operands are
 * always mapped weights, immutable while the model lives) and the ISA whose tile layout they use.
 * Open addressing; an entry with pk == NULL records that repacking failed (out of memory). */
typedef struct cpu_wpack {
    const void *src;  /* the mapped weights */
    const struct cpu_isa *isa;
    uint32_t dtype;
    int64_t k, m;
    uint8_t *pk;      /* 64-byte aligned, inside a slab */
} cpu_wpack;

/* Repacked weights are carved from slabs of at least CPU_WPACK_SLAB_BYTES (al_malloc_large: on
 * huge pages), so that small matrices share huge pages too. */
#define CPU_WPACK_SLAB_BYTES ((size_t)32 << 20)
typedef struct cpu_wpack_slab {
    uint8_t *base;
    size_t used, cap;
} cpu_wpack_slab;

/* The table of repacked weights: the CPU's per-model cache (be_model_cache in backend.h), shared
 * by every session's backend on one model; a mutex guards lookups and inserts. */
typedef struct cpu_weight_cache {
    be_model_cache base; /* base.vt = &backend_vtable_cpu */
    slm_allocator alloc;
    pthread_mutex_t mu;
    cpu_wpack *packs; /* (cap_packs) */
    int32_t n_packs, cap_packs;
    cpu_wpack_slab *slabs; /* (cap_slabs); the last one takes new packs */
    int32_t n_slabs, cap_slabs;
    const uint8_t *file_lo, *file_hi; /* the model's read-only file mapping (vtable cache_set_file_map) */
} cpu_weight_cache;

typedef struct cpu_backend {
    backend base;
    slm_allocator alloc;
    cpu_pool *pool;
    int32_t n_threads;
    size_t scratch_bytes;  /* per thread */
    uint8_t **scratch;     /* (n_threads) 64-byte aligned buffers */
    uint8_t *work;         /* shared buffer of one node (quantised activations, transposes) */
    size_t work_bytes;
    bool use_fast;         /* false: reference kernels only (kernels "ref") */
    bool repack;           /* keep repacked copies of quantised matmul weights (no_repack: off) */
    cpu_weight_cache *wc;  /* repacked weights: the model's shared table, or own_wc */
    cpu_weight_cache *own_wc;
    const cpu_isa *isa;    /* micro-kernels of the fast kernels */
    /* mm_quant_packed's tier per quantised weight type and column count (cpu_mm_pick) */
    const cpu_isa *mm_pick[CPU_PICK_TYPES][CPU_PICK_COLS];
} cpu_backend;

/* The tier whose mm_quant_packed runs ncols columns of weights of type wt on cb's repacked tiles
 * (cb->isa for the types without a choice). */
const cpu_isa *cpu_mm_pick(const cpu_backend *cb, uint32_t wt, int64_t ncols);

typedef slm_status (*cpu_kernel_fn)(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                                    const be_call *call, slm_err *e);

/* Reference kernels, indexed by op. */
extern const cpu_kernel_fn cpu_ref_kernels[G_OP_COUNT];
/* Per-thread scratch each reference kernel needs for this node. */
size_t cpu_ref_scratch_bytes(const g_node *nd, const be_view *out, const be_view *in);

/* A fast kernel: takes the nodes `supports` accepts. */
typedef struct cpu_fast_kernel {
    bool (*supports)(const g_node *nd, const be_view *out, const be_view *in);
    cpu_kernel_fn run;
    size_t (*scratch)(const cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in);
} cpu_fast_kernel;

/* backend_vtable.exec_matmul_group for the fast kernels (kern_fast.c): quantised weights of one
 * dtype and depth; the activations are quantised once and all matrices' row tiles are one job. */
slm_status cpu_matmul_group(cpu_backend *cb, int32_t n, const be_view *out, const be_view *in, slm_err *e);
/* Whether cpu_matmul_group runs this group (shapes and dtypes; in[2 i + 1] must be one view). */
bool cpu_matmul_group_takes(int32_t n, const be_view *out, const be_view *in);

/* backend_vtable.exec_conv_step for the fast kernels (kern_fast.c): f32 operands, any number of
 * tokens, a kernel of at most 9 taps. */
slm_status cpu_conv_step(cpu_backend *cb, const be_view *out, const be_view *in, bool silu, slm_err *e);
/* Whether cpu_conv_step runs a step of these shapes and dtypes. */
bool cpu_conv_step_takes(const be_view *out, const be_view *in);

/* The fast kernel for this node, or NULL (then the reference kernel runs). */
const cpu_fast_kernel *cpu_fast_lookup(const g_node *nd, const be_view *out, const be_view *in);

/* The CPU backend with n_threads workers (>= 1) and the kernels named by kernels (backend_params
 * kernels: NULL, "" or "auto" = the best tier this CPU has, "ref" = the reference kernels only,
 * else exactly that tier). It may keep repacked copies of quantised (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q4_K, Q5_K, Q6_K) matmul weights for its lifetime, keyed by address: such operands must be immutable mapped
 * weights that outlive the backend (they always are: activations and states are never quantised).
 * A tier the build or the CPU lacks fails with SLM_ERR_UNSUPPORTED, a value naming no tier with
 * SLM_ERR_INVALID_ARG, each with a message naming the value; *out is NULL then. */
slm_status cpu_backend_create(const slm_allocator *a, int32_t n_threads, const char *kernels, backend **out,
                              slm_err *e);
/* The kernels a CPU backend runs: "ref", "generic", "neon", "i8mm", "avx2", "avxvnni", "avx512" or "amx" (static
 * storage; vtable kernels). */
const char *cpu_backend_kernels(const backend *be);

/* Creates a backend with an explicit kernel choice (tests): use_fast false = reference kernels;
 * else the kernels of level isa, which must be supported: SLM_ERR_UNSUPPORTED with a message
 * naming the level and what it lacks otherwise (isa is ignored when use_fast is false). */
slm_status cpu_backend_create_with(const slm_allocator *a, int32_t n_threads, bool use_fast, cpu_isa_level isa,
                                   backend **out, slm_err *e);

/* Repacking of quantised weights on (default; backend_params.no_repack false) or off. */
void cpu_backend_set_repack(backend *be, bool on);
/* The repacked copy of weights w (dtype wt, k x m), created on first use (over the pool) on huge
 * pages: quantised types as tiles (cpu_isa.repack_tiles), float types (F32, F16, BF16) as a plain
 * row-major copy, made only inside the model's file mapping so that the file pages can be
 * released. NULL when the ISA has no packed kernels for wt, repacking is off, a float matrix is
 * outside the mapping, or memory is short (callers then use w). */
const uint8_t *cpu_wpack_get(cpu_backend *cb, uint32_t wt, const void *w, size_t row_bytes, int64_t k, int64_t m);
/* The repacked copy of w for this backend's ISA if one was built (by a matmul), else NULL; never
 * builds one. */
const uint8_t *cpu_wpack_find(cpu_backend *cb, uint32_t wt, const void *w, int64_t k, int64_t m);

static inline void *cpu_scratch(cpu_backend *cb, int32_t thread) { return cb->scratch[thread]; }
/* The shared work buffer, grown to at least bytes (64-byte aligned); NULL + NOMEM on failure. */
void *cpu_work(cpu_backend *cb, size_t bytes, slm_err *e);

#endif
