/* test_kern_fast.c — the fast CPU kernels (kern_fast.c + kern_generic.c / kern_avx2.c /
 * kern_avx512.c) against the reference kernels (kern_ref.c), for every op with a fast kernel,
 * every weight dtype and every instruction-set level this machine has, on random shapes with odd
 * sizes and tails:
 *  - matmul (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K): NMSE against the reference within a
 *    per-dtype tolerance (8-bit activations for the quantised types), bit-identical to the
 *    portable C implementation of the canonical arithmetic (cpu.h) on every ISA, bit-identical
 *    whether the columns go together (GEMM) or one by one (GEMV), for 2 or 3 threads, and with
 *    or without the repacked weight copies;
 *  - attention (f16 and f32 KV, GQA, head dims 16..256 incl. odd): NMSE; a prefill of n tokens
 *    equals n one-token calls bit for bit; at ~5000 keys (decode's keys split across threads in
 *    chunks) the same bits for 1, 2, 3 and 5 threads; the same with sliding windows over ring states (rows
 *    outside every query's window hold NaN, infinities or large values), and a ring too short for
 *    the call is refused;
 *  - DeltaNet (recurrent), conv, elementwise ops, norms, rope, state writes (ring writes that wrap
 *    too): NMSE (rope and state writes bit-identical to the reference); DeltaNet over n tokens
 *    equals n one-token calls;
 *  - the fused causal-conv step: bit-identical to the CONV1D (+ SILU) nodes it replaces;
 *  - activation quantisation: every ISA writes the same bytes as the portable C;
 *  - every tier gives the same bits: for attention, DeltaNet, conv, the conv step, elementwise ops
 *    and activations, norms (gated RMSNorm too), rope and state writes, every level's output equals
 *    the portable C level's bit for bit (same_as_generic), as for the matmuls.
 * Every output buffer has guard floats after it that must stay untouched. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "kern_harness.h"
#include "backend/cpu/kern_common.h"
#include "base/dtype.h"
#include "base/half.h"


static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float frand(void) { return (float)(rnd() & 0xFFFFFF) / (float)(1 << 23) - 1.0f; } /* [-1, 1) */
static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint32_t)(hi - lo + 1)); }

/* The same, 64-byte aligned (the AVX tiers stream a state to such a buffer with non-temporal stores). */
static float *out_alloc_aligned(size_t n) {
    float *p = aligned_alloc(64, ((n + GUARD) * sizeof(float) + 63) / 64 * 64);
    assert_non_null(p);
    for (size_t i = 0; i < n + GUARD; i++) memcpy(p + i, &(uint32_t){GUARD_BITS}, 4);
    return p;
}


static int levels(cpu_isa_level out[N_LEVELS]) {
    int n = 0;
    for (int i = 0; i < N_LEVELS; i++)
        if (cpu_isa_supported(all_levels[i])) out[n++] = all_levels[i];
    static bool said;
    if (!cpu_isa_supported(CPU_ISA_AMX) && !said) /* visible: the AMX tier is tested only where it runs */
        fprintf(stderr, "test_kern_fast: amx tier skipped: no AMX (%s)\n", cpu_isa_missing(CPU_ISA_AMX)), said = true;
    return n;
}

/* Bit identity across the tiers: levels() lists GENERIC first; its output (n floats) is kept in
 * *gen, and every other level's must equal it. */
static void same_as_generic(cpu_isa_level lv, const float *y, size_t n, float **gen, const char *what) {
    if (lv == CPU_ISA_GENERIC) {
        free(*gen);
        *gen = malloc(n * sizeof(float) + 1);
        assert_non_null(*gen);
        memcpy(*gen, y, n * sizeof(float));
        return;
    }
    assert_non_null(*gen);
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, y + i, 4);
        memcpy(&b, *gen + i, 4);
        if (a != b)
            fail_msg("%s: element %zu is %.9g (0x%08x), the portable C gives %.9g (0x%08x)", what, i, (double)y[i], a,
                     (double)(*gen)[i], b);
    }
}


/* ---- random weights of every type ------------------------------------------------------------- */

static void put_f16(uint8_t *p, float f) {
    uint16_t h = f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* Random rows of dtype wt (k elements per row, m rows): valid blocks with moderate scales. */
static uint8_t *rand_weights(uint32_t wt, int64_t k, int64_t m, size_t *row_bytes) {
    uint64_t rb = 0;
    assert_true(dtype_row_bytes(wt, (uint64_t)k, &rb));
    *row_bytes = (size_t)rb;
    uint8_t *w = malloc(rb * (size_t)m);
    assert_non_null(w);
    for (size_t i = 0; i < rb * (size_t)m; i++) w[i] = (uint8_t)rnd();
    const dtype_traits *t = dtype_traits_of(wt);
    size_t nb = (size_t)m * (size_t)(k / t->block_elems);
    for (size_t b = 0; b < nb; b++) {
        uint8_t *x = w + b * t->block_bytes;
        switch (wt) {
        case SLM_DTYPE_F32: { float f = frand(); memcpy(x, &f, 4); break; }
        case SLM_DTYPE_F16: put_f16(x, frand()); break;
        case SLM_DTYPE_BF16: { uint16_t h = f32_to_bf16(frand()); memcpy(x, &h, 2); break; }
        case SLM_DTYPE_Q4_0: case SLM_DTYPE_Q5_0: case SLM_DTYPE_Q8_0: put_f16(x, 0.02f * frand()); break;
        case SLM_DTYPE_Q4_1: case SLM_DTYPE_Q5_1: put_f16(x, 0.02f * frand()), put_f16(x + 2, 0.1f * frand()); break;
        case SLM_DTYPE_Q4_K: case SLM_DTYPE_Q5_K: put_f16(x, 0.002f * frand()), put_f16(x + 2, 0.002f * frand()); break;
        case SLM_DTYPE_Q6_K: put_f16(x + 208, 0.002f * frand()); break;
        default: break;
        }
    }
    return w;
}

/* ---- MATMUL ---------------------------------------------------------------------------------------- */

/* Matmul error: sum (y - y_ref)^2 / sum (sum_i |w_i x_i|)^2 — normalised by the size of the terms,
 * not of the (possibly cancelling) result. */
static double mm_tol(uint32_t wt) {
    switch (wt) {
    case SLM_DTYPE_F32: case SLM_DTYPE_F16: case SLM_DTYPE_BF16: return 1e-13;
    case SLM_DTYPE_Q4_1: return 1e-5; /* 8-bit activations and the f16 sa; observed <= 1.5e-6 */
    default: return 2e-6;             /* 8-bit activations; observed <= 4.2e-7 (Q5_0) */
    }
}

static double mm_err(const float *y, const float *y_ref, uint32_t wt, const uint8_t *w, size_t rb, int64_t k, int64_t m,
                     const float *x, int64_t cols) {
    float *row = malloc(sizeof(float) * (size_t)k);
    double num = 0, den = 0;
    for (int64_t o = 0; o < m; o++) {
        assert_true(dequant_row(wt, w + (size_t)o * rb, row, k));
        for (int64_t c = 0; c < cols; c++) {
            double sc = 0, d = (double)y[c * m + o] - (double)y_ref[c * m + o];
            for (int64_t i = 0; i < k; i++) sc += fabs((double)row[i] * (double)x[c * k + i]);
            num += d * d;
            den += sc * sc;
        }
    }
    free(row);
    if (isnan(num)) return INFINITY;
    return den > 0 ? num / den : num;
}

static void run_mm(backend *be, uint32_t wt, const uint8_t *w, int64_t k, int64_t m, const float *x, int64_t cols,
                   float *y) {
    g_node nd = kh_node(G_OP_MATMUL, 2, 1);
    be_view in[2] = {kh_view(wt, 2, k, m, 1, (void *)w), kh_view(SLM_DTYPE_F32, 2, k, cols, 1, (void *)x)};
    be_view out = kh_view(SLM_DTYPE_F32, 2, m, cols, 1, y);
    kh_run(be, &nd, &out, in, cols, 0);
}

static void matmul_all(void **unused) {
    (void)unused;
    const uint32_t types[] = {SLM_DTYPE_F32,  SLM_DTYPE_F16,  SLM_DTYPE_BF16, SLM_DTYPE_Q4_0,
                              SLM_DTYPE_Q4_1, SLM_DTYPE_Q5_0, SLM_DTYPE_Q5_1, SLM_DTYPE_Q8_0,
                              SLM_DTYPE_Q4_K, SLM_DTYPE_Q5_K, SLM_DTYPE_Q6_K};
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t wt = types[ti];
        int64_t be_ = dtype_traits_of(wt)->block_elems;
        for (int trial = 0; trial < 10; trial++) {
            /* k: whole blocks (odd counts too) or, for plain types, any length with a tail */
            int64_t k = be_ > 1 ? be_ * irand(1, be_ == 256 ? 5 : 37) : irand(1, 300);
            int64_t m = trial == 0 ? 1 : irand(1, 70), cols = trial < 2 ? 1 : irand(1, 21);
            if (trial == 2) { /* a tile pair then a lone half-full tile; more blocks than a prefill chunk */
                k = be_ > 1 ? be_ * (be_ == 256 ? 5 : 37) : 299;
                m = 40;
                cols = 5;
            }
            if (trial >= 3 && trial <= 5) { /* many columns (AMX: groups of 16 columns, then a partial one) */
                k = be_ > 1 ? be_ * (be_ == 256 ? 5 : 37) : 299;
                m = trial == 3 ? 40 : 71;
                cols = trial == 3 ? 16 : trial == 4 ? 37 : 53;
            }
            size_t rb;
            uint8_t *w = rand_weights(wt, k, m, &rb);
            float *x = malloc(sizeof(float) * (size_t)(k * cols));
            for (int64_t i = 0; i < k * cols; i++) x[i] = frand();
            size_t ny = (size_t)(m * cols);
            float *y_ref = out_alloc(ny), *y_gen = NULL;
            g_node mm = kh_node(G_OP_MATMUL, 2, 1);
            be_view mm_in[2] = {kh_view(wt, 2, k, m, 1, w), kh_view(SLM_DTYPE_F32, 2, k, cols, 1, x)};
            be_view mm_out = kh_view(SLM_DTYPE_F32, 2, m, cols, 1, y_ref);
            if (!cpu_fast_lookup(&mm, &mm_out, mm_in)) fail_msg("matmul %s: no fast kernel takes it", slm_dtype_name(wt));
            run_mm(ref, wt, w, k, m, x, cols, y_ref);
            for (int li = 0; li < n_lv; li++) {
                char what[128];
                snprintf(what, sizeof what, "matmul %s %s k=%lld m=%lld cols=%lld", slm_dtype_name(wt),
                         cpu_isa_name(lv[li]), (long long)k, (long long)m, (long long)cols);
                backend *be = kh_backend(true, lv[li], 2);
                float *y = out_alloc(ny);
                run_mm(be, wt, w, k, m, x, cols, y);
                check_guard(y, ny, what);
                double err = mm_err(y, y_ref, wt, w, rb, k, m, x, cols);
                if (!(err <= mm_tol(wt))) fail_msg("%s: error %.3g > %.1g", what, err, mm_tol(wt));
                if (getenv("SLM_TEST_VERBOSE")) fprintf(stderr, "%s: error %.3g\n", what, err);
                /* canonical arithmetic: every ISA equals the portable C bit for bit */
                if (lv[li] == CPU_ISA_GENERIC) y_gen = y;
                else if (memcmp(y, y_gen, ny * sizeof(float)) != 0) fail_msg("%s: differs from the portable C", what);
                /* columns one at a time (GEMV) and with 3 threads: the same bits */
                backend *be3 = kh_backend(true, lv[li], 3);
                float *y1 = out_alloc(ny), *y3 = out_alloc(ny);
                for (int64_t c = 0; c < cols; c++) {
                    float *col = out_alloc((size_t)m);
                    run_mm(be, wt, w, k, m, x + c * k, 1, col);
                    check_guard(col, (size_t)m, what);
                    memcpy(y1 + c * m, col, (size_t)m * sizeof(float));
                    free(col);
                }
                run_mm(be3, wt, w, k, m, x, cols, y3);
                check_guard(y3, ny, what);
                if (memcmp(y1, y, ny * sizeof(float)) != 0) fail_msg("%s: one column at a time differs", what);
                /* weights in the file layout (no repacked copy): the same bits */
                backend *bn = kh_backend(true, lv[li], 2);
                cpu_backend_set_repack(bn, false);
                float *yn = out_alloc(ny);
                run_mm(bn, wt, w, k, m, x, cols, yn);
                check_guard(yn, ny, what);
                if (memcmp(yn, y, ny * sizeof(float)) != 0) fail_msg("%s: repacked and file layouts differ", what);
                free(yn);
                bn->vt->destroy(bn);
                if (memcmp(y3, y, ny * sizeof(float)) != 0) fail_msg("%s: 3 threads differ from 2", what);
                free(y1), free(y3);
                if (y != y_gen) free(y);
                be3->vt->destroy(be3);
                be->vt->destroy(be);
            }
            free(y_gen);
            free(w), free(x), free(y_ref);
        }
    }
    ref->vt->destroy(ref);
}

/* The few-column shapes (batched decode, verify, small prefill) on every tier, bit for bit against
 * the portable C: each column count from 1 to 9 and some above (a pass of 8 columns plus a rest),
 * on a tile pair and a lone half-full tile (m = 40), on a last group of 1-7 rows (m = 37: the partial
 * store after whole groups of 8) and on ranges split over 2 threads (m = 200),
 * with more 32-blocks than one prefill chunk (k = 37 blocks; K types 5 super-blocks); and with
 * "auto" kernels, where each shape runs on the tier kern_pick.c picks for it. */
static void matmul_cols(void **unused) {
    (void)unused;
    const uint32_t types[] = {SLM_DTYPE_Q4_0, SLM_DTYPE_Q4_1, SLM_DTYPE_Q5_0, SLM_DTYPE_Q5_1,
                              SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_K, SLM_DTYPE_Q5_K, SLM_DTYPE_Q6_K};
    const int64_t col_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17};
    const int64_t rows[] = {37, 40, 72, 200};
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t mi = 0; mi < sizeof rows / sizeof rows[0]; mi++) {
            uint32_t wt = types[ti];
            int64_t k = cpu_wt_is_k(wt) ? 5 * CPU_QK_K : 37 * CPU_QK, m = rows[mi], max_cols = 17;
            size_t rb;
            uint8_t *w = rand_weights(wt, k, m, &rb);
            float *x = malloc(sizeof(float) * (size_t)(k * max_cols));
            assert_non_null(x);
            for (int64_t i = 0; i < k * max_cols; i++) x[i] = frand();
            for (size_t ci = 0; ci < sizeof col_counts / sizeof col_counts[0]; ci++) {
                int64_t cols = col_counts[ci];
                size_t ny = (size_t)(m * cols);
                float *y_gen = NULL;
                for (int li = 0; li < n_lv; li++) {
                    char what[128];
                    snprintf(what, sizeof what, "matmul %s %s m=%lld cols=%lld", slm_dtype_name(wt),
                             cpu_isa_name(lv[li]), (long long)m, (long long)cols);
                    backend *be = kh_backend(true, lv[li], 2);
                    float *y = out_alloc(ny);
                    run_mm(be, wt, w, k, m, x, cols, y);
                    check_guard(y, ny, what);
                    same_as_generic(lv[li], y, ny, &y_gen, what);
                    free(y);
                    be->vt->destroy(be);
                }
                /* "auto" kernels: each shape on the tier picked for it (kern_pick.c), the same bits */
                backend *be = NULL;
                slm_err e;
                err_clear(&e);
                assert_int_equal(cpu_backend_create(&al_default, 2, "auto", &be, &e), SLM_OK);
                float *y = out_alloc(ny);
                run_mm(be, wt, w, k, m, x, cols, y);
                check_guard(y, ny, "auto");
                char what[96];
                snprintf(what, sizeof what, "matmul %s auto m=%lld cols=%lld", slm_dtype_name(wt), (long long)m,
                         (long long)cols);
                same_as_generic(CPU_ISA_AVX512, y, ny, &y_gen, what);
                free(y);
                be->vt->destroy(be);
                free(y_gen);
            }
            free(w), free(x);
        }
}

/* The per-shape tier choice (kern_pick.c): rules naming another supported tier that reads the
 * backend's tiles take effect for exactly their shapes, a rule naming a tier without those tiles
 * (generic) is skipped, and the matmuls of the picked shapes give the portable C's bits. */
static void matmul_picks(void **unused) {
    (void)unused;
    backend *be = NULL, *gen = kh_backend(true, CPU_ISA_GENERIC, 2);
    slm_err e;
    err_clear(&e);
    assert_int_equal(cpu_backend_create(&al_default, 2, "auto", &be, &e), SLM_OK);
    cpu_backend *cb = (cpu_backend *)be;
    cpu_isa_level lv[N_LEVELS], alt = cb->isa->level;
    int n_lv = levels(lv);
    for (int i = 0; i < n_lv; i++)
        if (lv[i] != cb->isa->level && lv[i] != CPU_ISA_GENERIC) alt = lv[i];
    const cpu_isa *alt_isa = cpu_isa_get(alt);
    const cpu_pick_rule rules[] = {{SLM_DTYPE_Q4_0, 2, 3, alt}, {SLM_DTYPE_Q4_K, 8, CPU_PICK_COLS, alt},
                                   {SLM_DTYPE_Q8_0, 1, 1, CPU_ISA_GENERIC}, {SLM_DTYPE_F32, 1, 1, alt}};
    cpu_mm_picks_apply(cb->isa, rules, sizeof rules / sizeof rules[0], cb->mm_pick);
    bool same_tiles = cb->isa->repack_tiles && alt_isa->repack_tiles == cb->isa->repack_tiles &&
                      alt_isa->tile_block_bytes(SLM_DTYPE_Q4_0) == cb->isa->tile_block_bytes(SLM_DTYPE_Q4_0) &&
                      cb->isa->tile_block_bytes(SLM_DTYPE_Q4_0);
    const cpu_isa *want = same_tiles ? alt_isa : cb->isa;
    assert_ptr_equal(cpu_mm_pick(cb, SLM_DTYPE_Q4_0, 1), cb->isa);
    assert_ptr_equal(cpu_mm_pick(cb, SLM_DTYPE_Q4_0, 2), want);
    assert_ptr_equal(cpu_mm_pick(cb, SLM_DTYPE_Q4_0, 3), want);
    assert_ptr_equal(cpu_mm_pick(cb, SLM_DTYPE_Q4_0, 4), cb->isa);
    assert_ptr_equal(cpu_mm_pick(cb, SLM_DTYPE_Q4_K, 7), cb->isa);
    assert_ptr_equal(cpu_mm_pick(cb, SLM_DTYPE_Q4_K, 40), same_tiles ? alt_isa : cb->isa);
    assert_ptr_equal(cpu_mm_pick(cb, SLM_DTYPE_Q8_0, 1), cb->isa); /* generic reads no tiles */
    assert_ptr_equal(cpu_mm_pick(cb, SLM_DTYPE_F32, 1), cb->isa);
    const struct {
        uint32_t wt;
        int64_t cols;
    } shapes[] = {{SLM_DTYPE_Q4_0, 2}, {SLM_DTYPE_Q4_0, 3}, {SLM_DTYPE_Q4_K, 8}, {SLM_DTYPE_Q4_K, 12}};
    uint8_t *ws[sizeof shapes / sizeof shapes[0]]; /* alive with the backend: its repacked copies are keyed by address */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        uint32_t wt = shapes[i].wt;
        int64_t k = cpu_wt_is_k(wt) ? 3 * CPU_QK_K : 37 * CPU_QK, m = 72, cols = shapes[i].cols;
        size_t rb, ny = (size_t)(m * cols);
        uint8_t *w = ws[i] = rand_weights(wt, k, m, &rb);
        float *x = malloc(sizeof(float) * (size_t)(k * cols)), *y = out_alloc(ny), *y_gen = out_alloc(ny);
        assert_non_null(x);
        for (int64_t j = 0; j < k * cols; j++) x[j] = frand();
        run_mm(gen, wt, w, k, m, x, cols, y_gen);
        run_mm(be, wt, w, k, m, x, cols, y);
        check_guard(y, ny, "picked tier");
        if (memcmp(y, y_gen, ny * sizeof(float)) != 0)
            fail_msg("matmul %s cols=%lld on the picked tier %s differs from the portable C", slm_dtype_name(wt),
                     (long long)cols, cpu_isa_name(cpu_mm_pick(cb, wt, cols)->level));
        free(x), free(y), free(y_gen);
    }
    be->vt->destroy(be);
    gen->vt->destroy(gen);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) free(ws[i]);
}

/* The tiles keep every bit: each row's GGUF bytes come back from them exactly (EMBED reads a tied
 * table this way once its file pages are released). Odd tile counts (a lone last tile), partial
 * tiles, every repacked type. */
static void tiles_read_back(void **unused) {
    (void)unused;
    const uint32_t types[] = {SLM_DTYPE_Q4_0, SLM_DTYPE_Q4_1, SLM_DTYPE_Q5_0, SLM_DTYPE_Q5_1,
                              SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_K, SLM_DTYPE_Q5_K, SLM_DTYPE_Q6_K};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t wt = types[ti];
        int64_t be_ = dtype_traits_of(wt)->block_elems;
        for (int trial = 0; trial < 6; trial++) {
            int64_t k = be_ * irand(1, be_ == 256 ? 4 : 20), m = trial == 0 ? 1 : trial == 1 ? 40 : irand(1, 90);
            int64_t ntiles = (m + 15) / 16;
            size_t rb, bytes = (size_t)ntiles * (size_t)(k / CPU_QK) * cpu_tile_block_bytes(wt);
            uint8_t *w = rand_weights(wt, k, m, &rb), *pk = malloc(bytes), *row = malloc(rb);
            /* in two calls, split at an odd tile: any tile range is a valid repack call */
            int64_t split = (ntiles / 2) | 1;
            if (split > ntiles) split = ntiles;
            cpu_repack_tiles(wt, w, rb, m, k, 0, split, pk);
            cpu_repack_tiles(wt, w, rb, m, k, split, ntiles, pk);
            for (int64_t r = 0; r < m; r++) {
                cpu_tile_row(wt, pk, m, k, r, row);
                if (memcmp(row, w + (size_t)r * rb, rb) != 0)
                    fail_msg("%s k=%lld m=%lld: row %lld differs after the tiles", slm_dtype_name(wt), (long long)k,
                             (long long)m, (long long)r);
            }
            free(w), free(pk), free(row);
        }
    }
}

/* EMBED: the fast kernel equals the reference bit for bit, reading the file rows and, once a
 * matmul has repacked the table (an output head tied to the embeddings), the repacked copy. */
static void embed_all(void **unused) {
    (void)unused;
    const uint32_t types[] = {SLM_DTYPE_F16,  SLM_DTYPE_BF16, SLM_DTYPE_Q4_0, SLM_DTYPE_Q4_1, SLM_DTYPE_Q5_0,
                              SLM_DTYPE_Q5_1, SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_K, SLM_DTYPE_Q5_K, SLM_DTYPE_Q6_K};
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t wt = types[ti];
        int64_t be_ = dtype_traits_of(wt)->block_elems;
        int64_t d = be_ > 1 ? be_ * irand(1, be_ == 256 ? 3 : 9) : irand(1, 200), V = irand(18, 90); /* ids 16, 17 */
        size_t rb;
        uint8_t *table = rand_weights(wt, d, V, &rb);
        int32_t ids[7] = {0, (int32_t)V - 1, (int32_t)irand(0, V - 1), (int32_t)irand(0, V - 1), 16, 17,
                          (int32_t)irand(0, V - 1)};
        int64_t n = 7;
        g_node nd = kh_node(G_OP_EMBED, 2, 1);
        be_view in[2] = {kh_view(wt, 2, d, V, 1, table), kh_view(SLM_DTYPE_I32, 1, n, 1, 1, ids)};
        float *y_ref = out_alloc((size_t)(d * n)), *x = malloc(sizeof(float) * (size_t)d);
        be_view out = kh_view(SLM_DTYPE_F32, 2, d, n, 1, y_ref);
        kh_run(ref, &nd, &out, in, n, 0);
        for (int64_t i = 0; i < d; i++) x[i] = frand();
        for (int li = 0; li < n_lv; li++) {
            char what[96];
            snprintf(what, sizeof what, "EMBED %s %s d=%lld V=%lld", slm_dtype_name(wt), cpu_isa_name(lv[li]),
                     (long long)d, (long long)V);
            backend *be = kh_backend(true, lv[li], 2);
            assert_non_null(cpu_fast_lookup(&nd, &out, in));
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 1) { /* the table as a matmul's weights: repacked where the ISA has tiles */
                    float *y = out_alloc((size_t)V);
                    run_mm(be, wt, table, d, V, x, 1, y);
                    free(y);
                    const cpu_isa *isa = cpu_isa_get(lv[li]);
                    bool tiles = cpu_mm_is_quant(wt) && isa->repack_tiles && isa->tile_block_bytes(wt);
                    if (tiles && !cpu_wpack_find((cpu_backend *)be, wt, table, d, V))
                        fail_msg("%s: the matmul left no repacked copy to read", what);
                }
                float *y = out_alloc((size_t)(d * n));
                be_view o = kh_view(SLM_DTYPE_F32, 2, d, n, 1, y);
                kh_run(be, &nd, &o, in, n, 0);
                check_guard(y, (size_t)(d * n), what);
                if (memcmp(y, y_ref, sizeof(float) * (size_t)(d * n)) != 0)
                    fail_msg("%s: differs from the reference (%s)", what, pass ? "repacked copy" : "file rows");
                free(y);
            }
            be->vt->destroy(be);
        }
        free(table), free(x), free(y_ref);
    }
    ref->vt->destroy(ref);
}

/* Activation quantisers: every ISA writes exactly the bytes of the portable C. */
static void quant_act_bytes(void **unused) {
    (void)unused;
    const uint32_t types[] = {SLM_DTYPE_Q4_0, SLM_DTYPE_Q4_1, SLM_DTYPE_Q5_0, SLM_DTYPE_Q5_1,
                              SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_K, SLM_DTYPE_Q5_K, SLM_DTYPE_Q6_K};
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t wt = types[ti];
        bool kq = cpu_wt_is_k(wt);
        int64_t k = kq ? 1024 : 96;
        float x[1024];
        for (int64_t i = 0; i < k; i++) x[i] = frand() * (i % 7 == 0 ? 10.0f : 1.0f);
        for (int64_t i = kq ? 256 : 32; i < (kq ? 512 : 64); i++) x[i] = 0.0f; /* an all-zero block */
        if (kq) { /* ties of the largest |x|: the first one (negative) sets the scale's sign */
            x[600] = -20.0f;
            x[700] = 20.0f;
            /* iscale -1: halves round to even (2.5 -> -2, -3.5 -> 4), a NaN never sets the scale */
            x[768] = 127.0f;
            for (int i = 1; i < 256; i++) x[768 + i] = (float)(i % 64) * (i % 2 ? -0.5f : 0.5f);
            x[800] = NAN;
        }
        size_t n = cpu_act_bytes(wt, k);
        uint8_t *a0 = calloc(1, n), *a1 = calloc(1, n);
        cpu_isa_get(CPU_ISA_GENERIC)->quant_act(wt, x, k, a0);
        for (int li = 0; li < n_lv; li++) {
            memset(a1, 0, n);
            cpu_isa_get(lv[li])->quant_act(wt, x, k, a1);
            if (memcmp(a0, a1, n) != 0)
                fail_msg("quant_act %s %s differs from the portable C", slm_dtype_name(wt), cpu_isa_name(lv[li]));
        }
        free(a0), free(a1);
    }
}

/* A group of matmuls on one activation (backend_vtable.exec_matmul_group) gives the bits of the
 * separate calls; groups it cannot take (mixed dtypes, float weights) are refused with nothing run. */
static void matmul_group_all(void **unused) {
    (void)unused;
    const uint32_t types[] = {SLM_DTYPE_Q4_0, SLM_DTYPE_Q4_1, SLM_DTYPE_Q5_0, SLM_DTYPE_Q5_1,
                              SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_K, SLM_DTYPE_Q5_K, SLM_DTYPE_Q6_K};
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t wt = types[ti];
        int64_t be_ = dtype_traits_of(wt)->block_elems;
        for (int trial = 0; trial < 4; trial++) {
            int64_t k = be_ * irand(1, be_ == 256 ? 4 : 40), cols = trial < 2 ? 1 : irand(2, 9);
            int32_t n = (int32_t)irand(2, 5);
            int64_t m[5];
            uint8_t *w[5];
            size_t rb;
            float *x = malloc(sizeof(float) * (size_t)(k * cols)), *y[5], *y1[5];
            for (int64_t i = 0; i < k * cols; i++) x[i] = frand();
            be_view out[5], in[10];
            for (int32_t i = 0; i < n; i++) {
                m[i] = trial == 1 && i == 0 ? 16 : irand(1, 300); /* a tiny one and odd row counts */
                w[i] = rand_weights(wt, k, m[i], &rb);
                y[i] = out_alloc((size_t)(m[i] * cols));
                y1[i] = out_alloc((size_t)(m[i] * cols));
                in[2 * i] = kh_view(wt, 2, k, m[i], 1, w[i]);
                in[2 * i + 1] = kh_view(SLM_DTYPE_F32, 2, k, cols, 1, x);
                out[i] = kh_view(SLM_DTYPE_F32, 2, m[i], cols, 1, y[i]);
            }
            for (int li = 0; li < n_lv; li++) {
                char what[128];
                snprintf(what, sizeof what, "matmul group of %d %s %s k=%lld cols=%lld", n, slm_dtype_name(wt),
                         cpu_isa_name(lv[li]), (long long)k, (long long)cols);
                backend *be = kh_backend(true, lv[li], 2);
                slm_err e;
                err_clear(&e);
                assert_int_equal(be->vt->reserve_scratch(be, cpu_mm_scratch_bytes(wt, k, cols), &e), SLM_OK);
                if (be->vt->exec_matmul_group(be, n, out, in, &e) != SLM_OK) fail_msg("%s: refused: %s", what, e.msg);
                for (int32_t i = 0; i < n; i++) {
                    run_mm(be, wt, w[i], k, m[i], x, cols, y1[i]);
                    check_guard(y[i], (size_t)(m[i] * cols), what);
                    if (memcmp(y[i], y1[i], sizeof(float) * (size_t)(m[i] * cols)) != 0)
                        fail_msg("%s: matrix %d differs from its own call", what, i);
                }
                be->vt->destroy(be);
            }
            /* refused: a float member, or another quantised dtype */
            backend *be = kh_backend(true, lv[n_lv - 1], 2);
            slm_err e;
            err_clear(&e);
            be_view in2[4] = {in[0], in[1], kh_view(SLM_DTYPE_F32, 2, k, 4, 1, x), in[1]};
            float *yf = out_alloc((size_t)(4 * cols));
            be_view out2[2] = {out[0], kh_view(SLM_DTYPE_F32, 2, 4, cols, 1, yf)};
            memcpy(y[0], &(uint32_t){GUARD_BITS}, 4);
            assert_int_equal(be->vt->exec_matmul_group(be, 2, out2, in2, &e), SLM_ERR_UNSUPPORTED);
            uint32_t first;
            memcpy(&first, y[0], 4);
            assert_int_equal(first, GUARD_BITS); /* nothing ran */
            be->vt->destroy(be);
            free(yf);
            for (int32_t i = 0; i < n; i++) free(w[i]), free(y[i]), free(y1[i]);
            free(x);
        }
    }
}

/* ---- SLICE / CONCAT ------------------------------------------------------------------------------ */

static void copy_all(void **unused) {
    (void)unused;
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2), *be = kh_backend(true, CPU_ISA_GENERIC, 2);
    for (int trial = 0; trial < 40; trial++) {
        int32_t axis = trial % 4;
        int64_t ne[4] = {irand(1, 40), irand(1, 9), irand(1, 5), irand(1, 3)};
        if (trial % 8 == 0) ne[0] = 6144, ne[1] = irand(3, 6), ne[2] = ne[3] = 1; /* a conv state: threaded */
        int64_t ne_b[4] = {ne[0], ne[1], ne[2], ne[3]};
        ne_b[axis] = irand(1, 4);
        int64_t na = ne[0] * ne[1] * ne[2] * ne[3], nb = ne_b[0] * ne_b[1] * ne_b[2] * ne_b[3];
        float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb);
        for (int64_t i = 0; i < na; i++) a[i] = frand();
        for (int64_t i = 0; i < nb; i++) b[i] = frand();
        be_view va = {SLM_DTYPE_F32, 4, {ne[0], ne[1], ne[2], ne[3]}, a};
        be_view vb = {SLM_DTYPE_F32, 4, {ne_b[0], ne_b[1], ne_b[2], ne_b[3]}, b};
        /* CONCAT a ++ b along axis */
        g_node nc = kh_node(G_OP_CONCAT, 2, 1);
        nc.p.concat.axis = axis;
        be_view out = va;
        out.ne[axis] += ne_b[axis];
        size_t no = (size_t)(na + nb);
        float *y_ref = out_alloc(no), *y = out_alloc(no);
        be_view in[2] = {va, vb};
        out.data = y_ref;
        kh_run(ref, &nc, &out, in, 1, 0);
        out.data = y;
        kh_run(be, &nc, &out, in, 1, 0);
        check_guard(y, no, "concat");
        if (memcmp(y, y_ref, sizeof(float) * no) != 0) fail_msg("concat axis %d differs from the reference", axis);
        free(y_ref), free(y);
        /* SLICE [begin, begin + len) of a along axis */
        int64_t len = irand(1, ne[axis]), begin = irand(0, ne[axis] - len);
        g_node ns = kh_node(G_OP_SLICE, 1, 1);
        ns.p.slice.axis = axis;
        ns.p.slice.begin = (g_affine){begin, 0, 0, 0};
        be_view os = va;
        os.ne[axis] = len;
        size_t nsz = (size_t)(na / ne[axis] * len);
        y_ref = out_alloc(nsz), y = out_alloc(nsz);
        os.data = y_ref;
        kh_run(ref, &ns, &os, &va, 1, 0);
        os.data = y;
        kh_run(be, &ns, &os, &va, 1, 0);
        check_guard(y, nsz, "slice");
        if (memcmp(y, y_ref, sizeof(float) * nsz) != 0)
            fail_msg("slice axis %d [%lld, +%lld) differs from the reference", axis, (long long)begin, (long long)len);
        free(y_ref), free(y), free(a), free(b);
    }
    ref->vt->destroy(ref);
    be->vt->destroy(be);
}

/* ---- ATTENTION --------------------------------------------------------------------------------- */

static void attention_all(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    const int64_t hds[] = {16, 64, 80, 256, 40, 7};
    for (int trial = 0; trial < 14; trial++) {
        uint32_t kvt = trial % 2 ? SLM_DTYPE_F32 : SLM_DTYPE_F16;
        int64_t hd = hds[trial % 6], hdv = trial % 5 == 4 ? hd + 16 : hd;
        int64_t Hkv = irand(1, 3), H = Hkv * irand(1, 4), n = irand(1, 40), pos = trial < 3 ? 0 : irand(0, 50);
        int64_t ctx = pos + n + irand(0, 20);
        size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4;
        uint8_t *K = malloc(el * (size_t)(hd * Hkv * ctx)), *V = malloc(el * (size_t)(hdv * Hkv * ctx));
        for (int64_t i = 0; i < hd * Hkv * ctx; i++) {
            if (kvt == SLM_DTYPE_F16) ((uint16_t *)K)[i] = f32_to_f16(frand());
            else ((float *)K)[i] = frand();
        }
        for (int64_t i = 0; i < hdv * Hkv * ctx; i++) {
            if (kvt == SLM_DTYPE_F16) ((uint16_t *)V)[i] = f32_to_f16(frand());
            else ((float *)V)[i] = frand();
        }
        float *q = malloc(sizeof(float) * (size_t)(hd * H * n));
        for (int64_t i = 0; i < hd * H * n; i++) q[i] = 2.0f * frand();
        g_node nd = kh_node(G_OP_ATTENTION, 3, 1);
        nd.p.attn.n_head_kv = (int32_t)Hkv;
        nd.p.attn.scale = 1.0f / sqrtf((float)hd);
        be_view in[3] = {kh_view(SLM_DTYPE_F32, 3, hd, H, n, q), kh_view(kvt, 2, hd * Hkv, ctx, 1, K), kh_view(kvt, 2, hdv * Hkv, ctx, 1, V)};
        size_t ny = (size_t)(hdv * H * n);
        float *y_ref = out_alloc(ny);
        be_view out = kh_view(SLM_DTYPE_F32, 3, hdv, H, n, y_ref);
        kh_run(ref, &nd, &out, in, n, pos);
        float *y_gen = NULL;
        for (int li = 0; li < n_lv; li++) {
            char what[160];
            snprintf(what, sizeof what, "attention %s %s hd=%lld hdv=%lld H=%lld Hkv=%lld n=%lld pos=%lld",
                     slm_dtype_name(kvt), cpu_isa_name(lv[li]), (long long)hd, (long long)hdv, (long long)H,
                     (long long)Hkv, (long long)n, (long long)pos);
            backend *be = kh_backend(true, lv[li], 2);
            float *y = out_alloc(ny);
            out.data = y;
            kh_run(be, &nd, &out, in, n, pos);
            check_guard(y, ny, what);
            double err = nmse(y, y_ref, ny);
            if (!(err <= 1e-10)) fail_msg("%s: NMSE %.3g", what, err);
            same_as_generic(lv[li], y, ny, &y_gen, what);
            kh_attn_tokens_alone(be, &nd, in, q, hd, hdv, H, n, pos, y, what); /* n one-token calls: the same bits */
            free(y);
            be->vt->destroy(be);
        }
        free(K), free(V), free(q), free(y_ref), free(y_gen);
    }
    ref->vt->destroy(ref);
}

/* Sliding-window attention over ring states (Gemma 3's local layers): keys at positions
 * (q - W, q], the key of position P in row P mod R. The states hold the keys of the positions the
 * call can see, [lo of the first query, pos + n - 1], each in its row; every other row (stale ring
 * rows, rows below the window) holds NaN, infinities or large values that must never reach an
 * output or the running max. Positions run past R
 * several times. Checked against the reference (NMSE), bit for bit against the portable C on every
 * level, and the n-token call against n one-token calls. */
typedef struct attn_win_case {
    int64_t hd, hdv, H, Hkv, window, ring, n_max, pos_max;
} attn_win_case;

static void kv_put(uint32_t kvt, void *base, int64_t i, float f) {
    if (kvt == SLM_DTYPE_F16) ((uint16_t *)base)[i] = f32_to_f16(f);
    else ((float *)base)[i] = f;
}

static void attention_window_ring(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    const attn_win_case cases[] = {
        {16, 16, 2, 1, 5, 16, 12, 150},   {32, 32, 4, 2, 8, 32, 25, 150},   {64, 64, 3, 1, 17, 32, 16, 150},
        {128, 128, 2, 2, 40, 64, 25, 150}, {256, 256, 4, 1, 512, 1024, 24, 2600}, /* Gemma 3 270M */
        {64, 80, 2, 1, 17, 0, 30, 150},   {40, 40, 2, 2, 8, 0, 20, 150},    {32, 32, 2, 1, 0, 64, 20, 44},
        {7, 7, 1, 1, 5, 16, 12, 150},     {16, 32, 6, 3, 40, 48, 9, 150},
        /* several KV heads, windows of 5+ chunks: the split runs the heads of a chunk together */
        {64, 64, 6, 3, 600, 1024, 7, 2600}, {32, 48, 4, 2, 700, 768, 8, 3000},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int trial = 0; trial < 4; trial++) {
            attn_win_case cs = cases[ci];
            uint32_t kvt = trial % 2 ? SLM_DTYPE_F32 : SLM_DTYPE_F16;
            int64_t hd = cs.hd, hdv = cs.hdv, H = cs.H, Hkv = cs.Hkv, W = cs.window, Rg = cs.ring;
            int64_t n = trial == 0 ? cs.n_max : irand(1, cs.n_max);
            int64_t pos = trial == 1 ? irand(0, W > 1 ? W - 1 : 0) : irand(0, cs.pos_max);
            if (Rg && !W && pos + n > Rg) pos = Rg - n; /* a ring without a window: no wrap yet */
            int64_t lo0 = W && pos - W + 1 > 0 ? pos - W + 1 : 0;
            int64_t ctx = Rg ? Rg + 16 * (trial % 2) : pos + n + irand(0, 20);
            size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4;
            int64_t kw = hd * Hkv, vw = hdv * Hkv;
            uint8_t *K = malloc(el * (size_t)(kw * ctx)), *V = malloc(el * (size_t)(vw * ctx));
            assert_true(K && V);
            /* rows outside the call's keys: NaN, infinities or large finite values, by row */
            const float junk[4] = {nanf(""), INFINITY, 30000.0f, -30000.0f};
            for (int64_t i = 0; i < kw * ctx; i++) kv_put(kvt, K, i, junk[(i / kw) % 4]);
            for (int64_t i = 0; i < vw * ctx; i++) kv_put(kvt, V, i, junk[(i / vw) % 4]);
            for (int64_t P = lo0; P < pos + n; P++) {
                int64_t row = Rg ? P % Rg : P;
                for (int64_t i = 0; i < kw; i++) kv_put(kvt, K, row * kw + i, frand());
                for (int64_t i = 0; i < vw; i++) kv_put(kvt, V, row * vw + i, frand());
            }
            float *q = malloc(sizeof(float) * (size_t)(hd * H * n));
            for (int64_t i = 0; i < hd * H * n; i++) q[i] = 2.0f * frand();
            g_node nd = kh_node(G_OP_ATTENTION, 3, 1);
            nd.p.attn.n_head_kv = (int32_t)Hkv;
            nd.p.attn.scale = 1.0f / sqrtf((float)hd);
            nd.p.attn.window = (int32_t)W;
            nd.p.attn.ring = (int32_t)Rg;
            be_view in[3] = {kh_view(SLM_DTYPE_F32, 3, hd, H, n, q), kh_view(kvt, 2, kw, ctx, 1, K), kh_view(kvt, 2, vw, ctx, 1, V)};
            size_t ny = (size_t)(hdv * H * n);
            float *y_ref = out_alloc(ny);
            be_view out = kh_view(SLM_DTYPE_F32, 3, hdv, H, n, y_ref);
            kh_run(ref, &nd, &out, in, n, pos);
            float *y_gen = NULL;
            for (int li = 0; li < n_lv; li++) {
                char what[200];
                snprintf(what, sizeof what,
                         "window attention %s %s hd=%lld hdv=%lld H=%lld Hkv=%lld W=%lld R=%lld n=%lld pos=%lld",
                         slm_dtype_name(kvt), cpu_isa_name(lv[li]), (long long)hd, (long long)hdv, (long long)H,
                         (long long)Hkv, (long long)W, (long long)Rg, (long long)n, (long long)pos);
                backend *be = kh_backend(true, lv[li], 2);
                float *y = out_alloc(ny);
                out.data = y;
                kh_run(be, &nd, &out, in, n, pos);
                check_guard(y, ny, what);
                double err = nmse(y, y_ref, ny);
                if (!(err <= 1e-10)) fail_msg("%s: NMSE %.3g", what, err);
                same_as_generic(lv[li], y, ny, &y_gen, what);
                kh_attn_tokens_alone(be, &nd, in, q, hd, hdv, H, n, pos, y, what);
                free(y);
                be->vt->destroy(be);
            }
            free(K), free(V), free(q), free(y_ref), free(y_gen);
        }
    ref->vt->destroy(ref);
}

/* The decode and verify shapes at a long context (1..8 tokens after ~1000 keys, 3 KV heads of 3
 * query heads, hd 64, the session's interleaved state layout; and 20 tokens of 8 query heads per
 * KV head, many rows per call): against the reference (NMSE) and bit for bit against the
 * portable C on every level. Odd trials put NaNs and infinities into keys every query sees, so
 * some scores are NaN or infinite: the running max skips NaN scores as fmaxf does on every
 * level (no reference there: libm's expf differs from cpu_exp on them). */
static void attention_decode_long(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    const int64_t hd = 64, Hkv = 3, ns[] = {1, 2, 3, 5, 8};
    for (int trial = 0; trial < 12; trial++) {
        uint32_t kvt = trial % 4 < 2 ? SLM_DTYPE_F16 : SLM_DTYPE_F32;
        bool nonfinite = trial % 2;
        /* the last two: 8 query heads per KV head and 20 tokens, many rows per call (the
         * transposed-copy path of kern_avx2.c) */
        int64_t H = Hkv * (trial < 10 ? 3 : 8), n = trial < 10 ? ns[trial % 5] : 20, pos = irand(900, 1100), ctx = pos + n + irand(0, 40), kw = hd * Hkv;
        size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4;
        uint8_t *K = malloc(el * (size_t)(kw * ctx)), *V = malloc(el * (size_t)(kw * ctx));
        assert_true(K && V);
        for (int64_t i = 0; i < kw * ctx; i++) kv_put(kvt, K, i, frand()), kv_put(kvt, V, i, frand());
        if (nonfinite)
            for (int64_t g = 0; g < Hkv; g++)
                for (int x = 0; x < 16; x++) /* at random lanes of random blocks */
                    kv_put(kvt, K, irand(0, pos - 1) * kw + g * hd + irand(0, hd - 1), x % 4 ? nanf("") : INFINITY);
        float *q = malloc(sizeof(float) * (size_t)(hd * H * n));
        for (int64_t i = 0; i < hd * H * n; i++) q[i] = 2.0f * frand();
        g_node nd = kh_node(G_OP_ATTENTION, 3, 1);
        nd.p.attn.n_head_kv = (int32_t)Hkv;
        nd.p.attn.scale = 1.0f / sqrtf((float)hd);
        be_view in[3] = {kh_view(SLM_DTYPE_F32, 3, hd, H, n, q), kh_view(kvt, 2, kw, ctx, 1, K), kh_view(kvt, 2, kw, ctx, 1, V)};
        size_t ny = (size_t)(hd * H * n);
        float *y_ref = out_alloc(ny);
        be_view out = kh_view(SLM_DTYPE_F32, 3, hd, H, n, y_ref);
        if (!nonfinite) kh_run(ref, &nd, &out, in, n, pos);
        float *y_gen = NULL;
        for (int li = 0; li < n_lv; li++) {
            char what[160];
            snprintf(what, sizeof what, "decode attention %s %s n=%lld pos=%lld%s", slm_dtype_name(kvt),
                     cpu_isa_name(lv[li]), (long long)n, (long long)pos, nonfinite ? " non-finite keys" : "");
            backend *be = kh_backend(true, lv[li], 2);
            float *y = out_alloc(ny);
            out.data = y;
            kh_run(be, &nd, &out, in, n, pos);
            check_guard(y, ny, what);
            if (!nonfinite) {
                double err = nmse(y, y_ref, ny);
                if (!(err <= 1e-10)) fail_msg("%s: NMSE %.3g", what, err);
            }
            same_as_generic(lv[li], y, ny, &y_gen, what);
            free(y);
            be->vt->destroy(be);
        }
        free(K), free(V), free(q), free(y_ref), free(y_gen);
    }
    ref->vt->destroy(ref);
}

/* attn_fold_rows, the fold of one chunk's partials into the running totals (decode's split and
 * every block of queries fold through it): every level gives the portable C's bits (cpu_attn_fold
 * row by row) after each of 7 chunks of 1..40 rows, the partials drawn so that each branch occurs: empty
 * partials (m = -INFINITY), empty totals (the first chunk), a partial's max equal to the total's,
 * larger and smaller, and negative zeros in acc. */
static void attention_fold_rows(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    const int64_t hdvs[] = {7, 16, 40, 64, 80, 256}, Rs[] = {1, 3, 9, 17, 40};
    const float ms[] = {-INFINITY, 0.5f, 0.5f, 2.0f, -3.0f};
    int seen_equal = 0, seen_empty = 0;
    for (size_t hi = 0; hi < sizeof hdvs / sizeof hdvs[0]; hi++)
        for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++) {
            int64_t hdv = hdvs[hi], R = Rs[ri], pf = cpu_attn_part_floats(hdv), nch = 7;
            size_t nt = (size_t)(R * pf);
            float *parts = malloc(sizeof(float) * nt * (size_t)nch), *tot = malloc(sizeof(float) * nt);
            float *after = malloc(sizeof(float) * nt * (size_t)nch), *gen = NULL; /* the totals after each chunk */
            assert_true(parts && tot && after);
            for (int64_t ch = 0; ch < nch; ch++)
                for (int64_t r = 0; r < R; r++) {
                    float *p = parts + (ch * R + r) * pf;
                    float m = rnd() % 2 ? ms[rnd() % 5] : 4.0f * frand();
                    for (int64_t i = 0; i < pf; i++) p[i] = m == -INFINITY ? 0.0f : rnd() % 16 ? frand() : -0.0f;
                    p[hdv] = m;
                    p[hdv + 1] = m == -INFINITY ? 0.0f : 1.0f + 8.0f * (frand() + 1.0f);
                    seen_empty += m == -INFINITY;
                }
            for (int li = 0; li < n_lv; li++) {
                const cpu_isa *isa = cpu_isa_get(lv[li]);
                assert_non_null(isa->attn_fold_rows);
                for (int64_t r = 0; r < R; r++) {
                    for (int64_t i = 0; i < pf; i++) tot[r * pf + i] = 0.0f;
                    tot[r * pf + hdv] = -INFINITY;
                }
                for (int64_t ch = 0; ch < nch; ch++) {
                    for (int64_t r = 0; li == 0 && r < R; r++)
                        seen_equal += tot[r * pf + hdv] == parts[(ch * R + r) * pf + hdv];
                    isa->attn_fold_rows(tot, parts + ch * R * pf, R, hdv);
                    memcpy(after + (size_t)ch * nt, tot, sizeof(float) * nt);
                }
                char what[96];
                snprintf(what, sizeof what, "attn_fold_rows %s hdv=%lld R=%lld", cpu_isa_name(lv[li]), (long long)hdv,
                         (long long)R);
                same_as_generic(lv[li], after, nt * (size_t)nch, &gen, what);
            }
            free(gen), free(parts), free(tot), free(after);
        }
    assert_true(seen_equal > 20 && seen_empty > 20);
}

/* Decode and verify at depth (~5000 keys: 40 chunks of CPU_ATTN_CHUNK, the last one partial at a
 * random offset), where kern_fast.c splits one head's keys across threads: every level with 1, 2,
 * 3 and 5 threads gives the bits of the portable C with one thread (which runs the chunks in
 * order in one task), the reference agrees (NMSE), and a call of 17 tokens (one task per KV head,
 * no split) equals 17 one-token calls (split) bit for bit. */
static void attention_split_depth(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    typedef struct {
        int64_t hd, G, Hkv, n;
    } split_case;
    const split_case cases[] = {{64, 3, 3, 1}, {64, 3, 3, 4}, {256, 4, 1, 1}, {40, 1, 2, 16}, {64, 2, 1, 17}};
    const int threads[] = {1, 2, 3, 5};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        split_case cs = cases[ci];
        uint32_t kvt = ci % 2 ? SLM_DTYPE_F32 : SLM_DTYPE_F16;
        int64_t hd = cs.hd, Hkv = cs.Hkv, H = cs.G * Hkv, n = cs.n, pos = irand(4900, 5100), kw = hd * Hkv;
        int64_t ctx = pos + n + irand(0, 20);
        size_t el = kvt == SLM_DTYPE_F16 ? 2 : 4;
        uint8_t *K = malloc(el * (size_t)(kw * ctx)), *V = malloc(el * (size_t)(kw * ctx));
        float *q = malloc(sizeof(float) * (size_t)(hd * H * n));
        assert_true(K && V && q);
        for (int64_t i = 0; i < kw * ctx; i++) kv_put(kvt, K, i, frand()), kv_put(kvt, V, i, frand());
        for (int64_t i = 0; i < hd * H * n; i++) q[i] = 2.0f * frand();
        g_node nd = kh_node(G_OP_ATTENTION, 3, 1);
        nd.p.attn.n_head_kv = (int32_t)Hkv;
        nd.p.attn.scale = 1.0f / sqrtf((float)hd);
        be_view in[3] = {kh_view(SLM_DTYPE_F32, 3, hd, H, n, q), kh_view(kvt, 2, kw, ctx, 1, K), kh_view(kvt, 2, kw, ctx, 1, V)};
        size_t ny = (size_t)(hd * H * n);
        float *y_ref = out_alloc(ny), *y_one = out_alloc(ny);
        be_view out = kh_view(SLM_DTYPE_F32, 3, hd, H, n, y_ref);
        kh_run(ref, &nd, &out, in, n, pos);
        backend *gen1 = kh_backend(true, CPU_ISA_GENERIC, 1);
        out.data = y_one;
        kh_run(gen1, &nd, &out, in, n, pos);
        gen1->vt->destroy(gen1);
        double err = nmse(y_one, y_ref, ny);
        if (!(err <= 1e-10)) fail_msg("split attention case %zu: NMSE %.3g", ci, err);
        for (int li = 0; li < n_lv; li++)
            for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
                char what[200];
                snprintf(what, sizeof what, "split attention %s %s hd=%lld G=%lld Hkv=%lld n=%lld pos=%lld threads=%d",
                         slm_dtype_name(kvt), cpu_isa_name(lv[li]), (long long)hd, (long long)cs.G, (long long)Hkv,
                         (long long)n, (long long)pos, threads[ti]);
                backend *be = kh_backend(true, lv[li], threads[ti]);
                float *y = out_alloc(ny);
                out.data = y;
                kh_run(be, &nd, &out, in, n, pos);
                check_guard(y, ny, what);
                if (memcmp(y, y_one, sizeof(float) * ny) != 0) fail_msg("%s: differs from generic, 1 thread", what);
                if (n > 16) kh_attn_tokens_alone(be, &nd, in, q, hd, hd, H, n, pos, y, what);
                free(y);
                be->vt->destroy(be);
            }
        free(K), free(V), free(q), free(y_ref), free(y_one);
    }
    ref->vt->destroy(ref);
}

/* A ring too short for the call (the first query's oldest key shares a row with the newest
 * position) is refused by the reference and the fast kernels, and the output is not written. */
static void attention_ring_too_short(void **unused) {
    (void)unused;
    const int64_t hd = 16, ring = 32, window = 20, n = 14; /* needs ring >= window + n - 1 = 33 */
    float *K = calloc((size_t)(hd * ring), sizeof(float)), *V = calloc((size_t)(hd * ring), sizeof(float));
    float q[16 * 14] = {0}, *y = out_alloc((size_t)(hd * n));
    assert_true(K && V);
    g_node nd = kh_node(G_OP_ATTENTION, 3, 1);
    nd.p.attn.n_head_kv = 1;
    nd.p.attn.scale = 0.25f;
    nd.p.attn.window = (int32_t)window;
    nd.p.attn.ring = (int32_t)ring;
    be_view in[3] = {kh_view(SLM_DTYPE_F32, 3, hd, 1, n, q), kh_view(SLM_DTYPE_F32, 2, hd, ring, 1, K),
                     kh_view(SLM_DTYPE_F32, 2, hd, ring, 1, V)};
    be_view out = kh_view(SLM_DTYPE_F32, 3, hd, 1, n, y);
    for (int fast = 0; fast < 2; fast++) {
        backend *be = kh_backend(fast, cpu_isa_detect(), 1);
        slm_err e;
        err_clear(&e);
        assert_int_equal(be->vt->reserve_scratch(be, be->vt->scratch_bytes(be, &nd, &out, in), &e), SLM_OK);
        be_call call = {.n = n, .pos = 100};
        assert_int_equal(be->vt->exec(be, &nd, &out, in, &call, &e), SLM_ERR_BACKEND);
        check_guard(y, 0, "refused attention"); /* nothing written, guard included */
        be_call fits = {.n = n - 1, .pos = 100};
        out.ne[2] = in[0].ne[2] = n - 1;
        assert_int_equal(be->vt->exec(be, &nd, &out, in, &fits, &e), SLM_OK);
        out.ne[2] = in[0].ne[2] = n;
        for (int64_t i = 0; i < hd * n + GUARD; i++) memcpy(y + i, &(uint32_t){GUARD_BITS}, 4);
        be->vt->destroy(be);
    }
    free(K), free(V), free(y);
}

/* The fast STATE_WRITE with a wrapping begin (a ring of R rows on axis 1): token t's row lands in
 * row (pos + t) mod R, every other row is untouched; bit-identical to the reference, f16 and f32. */
static void state_write_ring(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    for (int trial = 0; trial < 12; trial++) {
        uint32_t dt = trial % 2 ? SLM_DTYPE_F16 : SLM_DTYPE_F32;
        int64_t ring = 16 * irand(1, 4), ne0 = irand(1, 70), n = irand(1, ring), pos = irand(0, 300);
        int64_t srows = ring + 16 * (trial % 3); /* rows past the ring are never written */
        size_t el = dt == SLM_DTYPE_F16 ? 2 : 4, sbytes = el * (size_t)(ne0 * srows);
        float *val = malloc(sizeof(float) * (size_t)(ne0 * n));
        for (int64_t i = 0; i < ne0 * n; i++) val[i] = 100.0f * frand();
        uint8_t *s_init = malloc(sbytes), *s_ref = malloc(sbytes);
        for (size_t i = 0; i < sbytes; i++) s_init[i] = (uint8_t)rnd();
        memcpy(s_ref, s_init, sbytes);
        g_node nd = kh_node(G_OP_STATE_WRITE, 1, 1);
        nd.p.write.begin[1] = g_pos_mod(0, ring);
        be_view in = kh_view(SLM_DTYPE_F32, 2, ne0, n, 1, val);
        be_view out = kh_view(dt, 2, ne0, srows, 1, s_ref);
        kh_run(ref, &nd, &out, &in, n, pos);
        for (int64_t r = 0; r < srows; r++) { /* placement, from the definition */
            int64_t t = ((r - pos) % ring + ring) % ring;
            bool written = r < ring && t < n;
            for (int64_t i = 0; i < ne0; i++) {
                size_t off = el * (size_t)(r * ne0 + i);
                if (!written) {
                    if (memcmp(s_ref + off, s_init + off, el) != 0) fail_msg("ring write: row %lld touched", (long long)r);
                    continue;
                }
                float want = val[t * ne0 + i];
                if (dt == SLM_DTYPE_F16) {
                    uint16_t h = f32_to_f16(want);
                    if (memcmp(s_ref + off, &h, 2) != 0) fail_msg("ring write: row %lld is not token %lld", (long long)r, (long long)t);
                } else if (memcmp(s_ref + off, &want, 4) != 0) {
                    fail_msg("ring write: row %lld is not token %lld", (long long)r, (long long)t);
                }
            }
        }
        for (int li = 0; li < n_lv; li++) {
            backend *be = kh_backend(true, lv[li], 2);
            uint8_t *s = malloc(sbytes);
            memcpy(s, s_init, sbytes);
            out.data = s;
            kh_run(be, &nd, &out, &in, n, pos);
            if (memcmp(s, s_ref, sbytes) != 0)
                fail_msg("ring write %s %s ring=%lld ne0=%lld n=%lld pos=%lld differs from the reference",
                         slm_dtype_name(dt), cpu_isa_name(lv[li]), (long long)ring, (long long)ne0, (long long)n,
                         (long long)pos);
            free(s);
            be->vt->destroy(be);
        }
        free(val), free(s_init), free(s_ref);
    }
    ref->vt->destroy(ref);
}

/* ---- DELTANET ---------------------------------------------------------------------------------- */

static void deltanet_all(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    /* dv 128 and 64 (trials 1, 3) take the one-token fast paths of kern_avx512.c and kern_avx2.c (any
     * multiple of 64 there, as 16 * irand(1, 9) can also be); trials 8 and 9 have Qwen3.5's dk and
     * several tokens (the scratch chunks of the AVX tiers, a partial last chunk in trial 9); even
     * trials write the state to a 64-byte aligned buffer (non-temporal stores there) */
    for (int trial = 0; trial < 10; trial++) {
        int64_t Hk = irand(1, 3), Hv = Hk * irand(1, 3), dk = trial >= 8 ? 128 : irand(1, 40);
        int64_t dv = trial == 1 || trial == 8 ? 128 : trial == 3 ? 64 : trial == 9 ? 80
                     : trial % 2                     ? 16 * irand(1, 9)
                                                     : irand(1, 150);
        int64_t n = trial >= 8 ? irand(2, 8) : irand(1, 20);
        bool aligned = trial % 2 == 0;
        bool tiled = trial % 3 == 0;
        size_t nq = (size_t)(dk * Hk * n), nv = (size_t)(dv * Hv * n), ng = (size_t)(Hv * n), ns = (size_t)(dv * dk * Hv);
        float *q = malloc(nq * 4), *k = malloc(nq * 4), *v = malloc(nv * 4), *g = malloc(ng * 4), *beta = malloc(ng * 4),
              *s0 = malloc(ns * 4);
        for (size_t i = 0; i < nq; i++) q[i] = 0.3f * frand(), k[i] = 0.3f * frand();
        for (size_t i = 0; i < nv; i++) v[i] = frand();
        for (size_t i = 0; i < ng; i++) g[i] = -0.5f * (frand() + 1.0f), beta[i] = 0.5f * (frand() + 1.0f);
        for (size_t i = 0; i < ns; i++) s0[i] = 0.3f * frand();
        g_node nd = kh_node(G_OP_DELTANET, 6, 2);
        nd.p.dn.v_heads_tiled = tiled;
        be_view in[6] = {kh_view(SLM_DTYPE_F32, 3, dk, Hk, n, q),  kh_view(SLM_DTYPE_F32, 3, dk, Hk, n, k),
                         kh_view(SLM_DTYPE_F32, 3, dv, Hv, n, v),  kh_view(SLM_DTYPE_F32, 2, Hv, n, 1, g),
                         kh_view(SLM_DTYPE_F32, 2, Hv, n, 1, beta), kh_view(SLM_DTYPE_F32, 3, dv, dk, Hv, s0)};
        float *o_ref = out_alloc(nv), *s_ref = out_alloc(ns);
        be_view out[2] = {kh_view(SLM_DTYPE_F32, 3, dv, Hv, n, o_ref), kh_view(SLM_DTYPE_F32, 3, dv, dk, Hv, s_ref)};
        kh_run(ref, &nd, out, in, n, 0);
        float *o_gen = NULL, *s_gen = NULL;
        for (int li = 0; li < n_lv; li++) {
            char what[128];
            snprintf(what, sizeof what, "deltanet %s Hk=%lld Hv=%lld dk=%lld dv=%lld n=%lld", cpu_isa_name(lv[li]),
                     (long long)Hk, (long long)Hv, (long long)dk, (long long)dv, (long long)n);
            backend *be = kh_backend(true, lv[li], 2);
            float *o = out_alloc(nv), *s = aligned ? out_alloc_aligned(ns) : out_alloc(ns);
            be_view outf[2] = {kh_view(SLM_DTYPE_F32, 3, dv, Hv, n, o), kh_view(SLM_DTYPE_F32, 3, dv, dk, Hv, s)};
            kh_run(be, &nd, outf, in, n, 0);
            check_guard(o, nv, what);
            check_guard(s, ns, what);
            if (!(nmse(o, o_ref, nv) <= 1e-10) || !(nmse(s, s_ref, ns) <= 1e-10))
                fail_msg("%s: NMSE output %.3g state %.3g", what, nmse(o, o_ref, nv), nmse(s, s_ref, ns));
            same_as_generic(lv[li], o, nv, &o_gen, what);
            same_as_generic(lv[li], s, ns, &s_gen, what);
            /* token by token, threading the state: the same bits */
            float *st = malloc(ns * 4), *st2 = aligned ? out_alloc_aligned(ns) : out_alloc(ns),
                  *o1 = out_alloc((size_t)(dv * Hv));
            memcpy(st, s0, ns * 4);
            for (int64_t t = 0; t < n; t++) {
                be_view in1[6] = {kh_view(SLM_DTYPE_F32, 3, dk, Hk, 1, q + t * dk * Hk),
                                  kh_view(SLM_DTYPE_F32, 3, dk, Hk, 1, k + t * dk * Hk),
                                  kh_view(SLM_DTYPE_F32, 3, dv, Hv, 1, v + t * dv * Hv),
                                  kh_view(SLM_DTYPE_F32, 2, Hv, 1, 1, g + t * Hv),
                                  kh_view(SLM_DTYPE_F32, 2, Hv, 1, 1, beta + t * Hv),
                                  kh_view(SLM_DTYPE_F32, 3, dv, dk, Hv, st)};
                be_view out1[2] = {kh_view(SLM_DTYPE_F32, 3, dv, Hv, 1, o1), kh_view(SLM_DTYPE_F32, 3, dv, dk, Hv, st2)};
                kh_run(be, &nd, out1, in1, 1, t);
                if (memcmp(o1, o + t * dv * Hv, sizeof(float) * (size_t)(dv * Hv)) != 0)
                    fail_msg("%s: token %lld alone differs", what, (long long)t);
                memcpy(st, st2, ns * 4);
            }
            if (memcmp(st, s, ns * 4) != 0) fail_msg("%s: state after token-by-token differs", what);
            free(st), free(st2), free(o1), free(o), free(s);
            be->vt->destroy(be);
        }
        free(q), free(k), free(v), free(g), free(beta), free(s0), free(o_ref), free(s_ref), free(o_gen), free(s_gen);
    }
    ref->vt->destroy(ref);
}

/* ---- CONV1D, elementwise, norms, rope, state writes ------------------------------------------------ */

typedef struct case_spec {
    g_op op;
    int n_in;
} case_spec;

static void rowwise_all(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    const g_op ops[] = {G_OP_ADD,     G_OP_MUL,     G_OP_SWIGLU,  G_OP_GEGLU,  G_OP_SCALE,         G_OP_SILU,
                        G_OP_SIGMOID, G_OP_SOFTPLUS, G_OP_EXP,    G_OP_RMSNORM, G_OP_L2NORM,       G_OP_GATED_RMSNORM,
                        G_OP_CONV1D,  G_OP_ROPE,    G_OP_STATE_WRITE};
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
        g_op op = ops[oi];
        for (int trial = 0; trial < 8; trial++) {
            int64_t ne0 = trial == 0 ? 1 : irand(1, 300), rows = trial == 1 ? 1 : irand(1, 300);
            bool bcast = trial % 2 == 1;
            g_node nd = kh_node(op, 1, 1);
            be_view in[3], out;
            float *a = NULL, *b = NULL, *c = NULL;
            size_t ny;
            uint32_t out_dt = SLM_DTYPE_F32;
            int64_t n_call = rows, pos = 0;
            int64_t K = 0, C = 0, H = 0, hd = 0, sw_rows = 0;
            if (op == G_OP_CONV1D) {
                C = irand(1, 300), K = irand(1, 5);
                int64_t n = trial < 4 ? irand(1, 7) : irand(8, 40); /* both weight layouts */
                if (trial == 3) C = 6144 + irand(1, 15), K = 4; /* decode of a wide conv: channels split over threads */
                a = malloc(sizeof(float) * (size_t)(C * (n + K - 1)));
                b = malloc(sizeof(float) * (size_t)(K * C));
                for (int64_t i = 0; i < C * (n + K - 1); i++) a[i] = frand();
                for (int64_t i = 0; i < K * C; i++) b[i] = frand();
                nd.n_in = 2;
                in[0] = kh_view(SLM_DTYPE_F32, 2, C, n + K - 1, 1, a);
                in[1] = kh_view(SLM_DTYPE_F32, 2, K, C, 1, b);
                ny = (size_t)(C * n);
                out = kh_view(SLM_DTYPE_F32, 2, C, n, 1, NULL);
                n_call = n;
            } else if (op == G_OP_ROPE) {
                hd = 2 * irand(1, 80), H = irand(1, 5);
                int64_t n = irand(1, 30);
                nd.p.rope.n_rot = (int32_t)(trial % 3 == 0 ? hd / 2 - (hd / 2) % 2 : hd);
                nd.p.rope.style = trial % 2 ? G_ROPE_NEOX : G_ROPE_NORM;
                nd.p.rope.base = 10000.0f;
                nd.p.rope.freq_scale = 1.0f;
                a = malloc(sizeof(float) * (size_t)(hd * H * n));
                for (int64_t i = 0; i < hd * H * n; i++) a[i] = frand();
                in[0] = kh_view(SLM_DTYPE_F32, 3, hd, H, n, a);
                ny = (size_t)(hd * H * n);
                out = kh_view(SLM_DTYPE_F32, 3, hd, H, n, NULL);
                n_call = n;
                pos = irand(0, 5000);
            } else if (op == G_OP_STATE_WRITE) {
                /* value (ne0, rows) into a state (ne0, rows + pos + 3) at row pos, f16 or f32 */
                sw_rows = rows;
                pos = irand(0, 7);
                a = malloc(sizeof(float) * (size_t)(ne0 * rows));
                for (int64_t i = 0; i < ne0 * rows; i++) a[i] = 100.0f * frand();
                in[0] = kh_view(SLM_DTYPE_F32, 2, ne0, rows, 1, a);
                out_dt = trial % 2 ? SLM_DTYPE_F16 : SLM_DTYPE_F32;
                nd.p.write.begin[1] = g_pos_plus(0);
                int64_t srows = rows + pos + 3;
                ny = ((size_t)(ne0 * srows) * (out_dt == SLM_DTYPE_F16 ? 2 : 4) + 3) / 4; /* floats covering the state */
                out = kh_view(out_dt, 2, ne0, srows, 1, NULL);
            } else {
                a = malloc(sizeof(float) * (size_t)(ne0 * rows));
                /* GEGLU: trial 7 reaches the clamps of e^-2u (|x| up to 30) */
                float amp = op == G_OP_EXP || op == G_OP_SOFTPLUS || (op == G_OP_GEGLU && trial == 7) ? 30.0f : 4.0f;
                for (int64_t i = 0; i < ne0 * rows; i++) a[i] = amp * frand();
                in[0] = kh_view(SLM_DTYPE_F32, 2, ne0, rows, 1, a);
                ny = (size_t)(ne0 * rows);
                out = kh_view(SLM_DTYPE_F32, 2, ne0, rows, 1, NULL);
                nd.p.f[0] = 0.75f;
                if (op == G_OP_ADD || op == G_OP_MUL || op == G_OP_SWIGLU || op == G_OP_GEGLU ||
                    (op == G_OP_RMSNORM && trial % 3 != 2)) {
                    int64_t nb = op == G_OP_RMSNORM || bcast ? ne0 : ne0 * rows;
                    b = malloc(sizeof(float) * (size_t)nb);
                    for (int64_t i = 0; i < nb; i++) b[i] = frand();
                    nd.n_in = 2;
                    in[1] = nb == ne0 ? kh_view(SLM_DTYPE_F32, 1, ne0, 1, 1, b) : kh_view(SLM_DTYPE_F32, 2, ne0, rows, 1, b);
                }
                if (op == G_OP_RMSNORM || op == G_OP_L2NORM || op == G_OP_GATED_RMSNORM) {
                    nd.p.norm.eps = 1e-6f;
                    nd.p.norm.w_offset = trial % 2 ? 1.0f : 0.0f;
                }
                if (op == G_OP_GATED_RMSNORM) {
                    b = malloc(sizeof(float) * (size_t)(ne0 * rows));
                    c = malloc(sizeof(float) * (size_t)ne0);
                    for (int64_t i = 0; i < ne0 * rows; i++) b[i] = 4.0f * frand();
                    for (int64_t i = 0; i < ne0; i++) c[i] = frand();
                    nd.n_in = 3;
                    in[1] = kh_view(SLM_DTYPE_F32, 2, ne0, rows, 1, b);
                    in[2] = kh_view(SLM_DTYPE_F32, 1, ne0, 1, 1, c);
                }
            }
            if (!cpu_fast_lookup(&nd, &out, in)) fail_msg("%s: no fast kernel takes it", g_op_name(op));
            float *y_ref = out_alloc(ny);
            memset(y_ref, 0, ny * sizeof(float));
            out.data = y_ref;
            kh_run(ref, &nd, &out, in, n_call, pos);
            float *y_gen = NULL;
            for (int li = 0; li < n_lv; li++) {
                char what[128];
                snprintf(what, sizeof what, "%s %s ne0=%lld rows=%lld", g_op_name(op), cpu_isa_name(lv[li]),
                         (long long)ne0, (long long)rows);
                backend *be = kh_backend(true, lv[li], 2);
                float *y = out_alloc(ny);
                memset(y, 0, ny * sizeof(float));
                out.data = y;
                kh_run(be, &nd, &out, in, n_call, pos);
                check_guard(y, ny, what);
                same_as_generic(lv[li], y, ny, &y_gen, what);
                if (op == G_OP_CONV1D) { /* one token at a time (weights read in the file layout) */
                    float *y1 = out_alloc((size_t)C);
                    for (int64_t t = 0; t < n_call; t++) {
                        be_view in1[2] = {kh_view(SLM_DTYPE_F32, 2, C, K, 1, a + t * C), in[1]};
                        be_view out1 = kh_view(SLM_DTYPE_F32, 2, C, 1, 1, y1);
                        kh_run(be, &nd, &out1, in1, 1, t);
                        check_guard(y1, (size_t)C, what);
                        if (memcmp(y1, y + t * C, sizeof(float) * (size_t)C) != 0)
                            fail_msg("%s: token %lld alone differs from the batch", what, (long long)t);
                    }
                    free(y1);
                }
                if (op == G_OP_ROPE || op == G_OP_STATE_WRITE || op == G_OP_ADD || op == G_OP_MUL || op == G_OP_SCALE) {
                    if (memcmp(y, y_ref, ny * sizeof(float)) != 0) fail_msg("%s: not bit-identical to the reference", what);
                } else {
                    double tol = op == G_OP_CONV1D || op == G_OP_SOFTPLUS || op == G_OP_EXP ? 1e-12 : 1e-11;
                    double err = nmse(y, y_ref, ny);
                    if (!(err <= tol)) fail_msg("%s: NMSE %.3g > %.1g", what, err, tol);
                }
                free(y);
                be->vt->destroy(be);
            }
            (void)sw_rows;
            free(a), free(b), free(c), free(y_ref), free(y_gen);
        }
    }
    ref->vt->destroy(ref);
}

/* ---- causal-conv step (backend_vtable.exec_conv_step) ---------------------------------------------- */

/* The fused step against the nodes it replaces, run by the same backend: y = CONV1D(CONCAT(state, x))
 * [then SILU] and new state = the last K - 1 columns of the concatenation, bit for bit; within the
 * CONV1D tolerance of the reference kernels; with y written over x; at 1 to 150 tokens (64 or more
 * split by tokens among the threads, except over x); and shapes it does not take (a kernel of more
 * than 9 taps, the reference backend) run nothing. */
static void conv_step_all(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2);
    slm_err e;
    err_clear(&e);
    for (int trial = 0; trial < 12; trial++) {
        int64_t C = trial < 3 ? 6144 + irand(0, 15) : irand(1, 700), K = irand(2, 5);
        int64_t S = K - 1, n = trial == 0 ? 1 : trial < 6 ? irand(1, 8) : trial < 9 ? irand(9, 40) : irand(64, 150);
        bool silu = trial % 2 == 0;
        float *st = malloc(sizeof(float) * (size_t)(C * S)), *x = malloc(sizeof(float) * (size_t)(C * n));
        float *w = malloc(sizeof(float) * (size_t)(K * C)), *xc = malloc(sizeof(float) * (size_t)(C * (S + n)));
        for (int64_t i = 0; i < C * S; i++) st[i] = frand();
        for (int64_t i = 0; i < C * n; i++) x[i] = frand();
        for (int64_t i = 0; i < K * C; i++) w[i] = frand();
        memcpy(xc, st, sizeof(float) * (size_t)(C * S)); /* CONCAT along tokens is this copy */
        memcpy(xc + C * S, x, sizeof(float) * (size_t)(C * n));
        g_node conv = kh_node(G_OP_CONV1D, 2, 1), act = kh_node(G_OP_SILU, 1, 1);
        be_view conv_in[2] = {kh_view(SLM_DTYPE_F32, 2, C, S + n, 1, xc), kh_view(SLM_DTYPE_F32, 2, K, C, 1, w)};
        be_view in[3] = {kh_view(SLM_DTYPE_F32, 2, C, S, 1, st), kh_view(SLM_DTYPE_F32, 2, C, n, 1, x),
                         kh_view(SLM_DTYPE_F32, 2, K, C, 1, w)};
        size_t ny = (size_t)(C * n), ns = (size_t)(C * S);
        float *y_ref = out_alloc(ny), *y_tmp = out_alloc(ny);
        be_view o = kh_view(SLM_DTYPE_F32, 2, C, n, 1, silu ? y_tmp : y_ref);
        kh_run(ref, &conv, &o, conv_in, n, 0);
        if (silu) {
            be_view a_in = o;
            o.data = y_ref;
            kh_run(ref, &act, &o, &a_in, n, 0);
        }
        be_view out_ref[2] = {kh_view(SLM_DTYPE_F32, 2, C, n, 1, y_tmp), kh_view(SLM_DTYPE_F32, 2, C, S, 1, NULL)};
        assert_int_equal(ref->vt->exec_conv_step(ref, out_ref, in, silu, &e), SLM_ERR_UNSUPPORTED);
        float *y_gen = NULL;
        for (int li = 0; li < n_lv; li++) {
            char what[128];
            snprintf(what, sizeof what, "conv step %s C=%lld K=%lld n=%lld%s", cpu_isa_name(lv[li]), (long long)C,
                     (long long)K, (long long)n, silu ? " silu" : "");
            backend *be = kh_backend(true, lv[li], 2);
            /* the nodes one by one */
            float *y_nodes = out_alloc(ny);
            o = kh_view(SLM_DTYPE_F32, 2, C, n, 1, silu ? y_tmp : y_nodes);
            kh_run(be, &conv, &o, conv_in, n, 0);
            if (silu) {
                be_view a_in = o;
                o.data = y_nodes;
                kh_run(be, &act, &o, &a_in, n, 0);
            }
            /* fused, into fresh outputs and then over x */
            float *y = out_alloc(ny), *st_new = out_alloc(ns), *x_over = out_alloc(ny);
            be_view out[2] = {kh_view(SLM_DTYPE_F32, 2, C, n, 1, y), kh_view(SLM_DTYPE_F32, 2, C, S, 1, st_new)};
            if (be->vt->exec_conv_step(be, out, in, silu, &e) != SLM_OK) fail_msg("%s: %s", what, e.msg);
            check_guard(y, ny, what);
            check_guard(st_new, ns, what);
            if (memcmp(y, y_nodes, ny * sizeof(float)) != 0) fail_msg("%s: output differs from the nodes", what);
            same_as_generic(lv[li], y, ny, &y_gen, what);
            if (memcmp(st_new, xc + C * n, ns * sizeof(float)) != 0) fail_msg("%s: new state is not the last columns", what);
            double err = nmse(y, y_ref, ny);
            if (!(err <= 1e-11)) fail_msg("%s: NMSE %.3g against the reference", what, err);
            memcpy(x_over, x, ny * sizeof(float));
            be_view in_over[3] = {in[0], kh_view(SLM_DTYPE_F32, 2, C, n, 1, x_over), in[2]};
            be_view out_over[2] = {kh_view(SLM_DTYPE_F32, 2, C, n, 1, x_over), out[1]};
            if (be->vt->exec_conv_step(be, out_over, in_over, silu, &e) != SLM_OK) fail_msg("%s: %s", what, e.msg);
            if (memcmp(x_over, y_nodes, ny * sizeof(float)) != 0) fail_msg("%s: output over x differs", what);
            free(y_nodes), free(y), free(st_new), free(x_over);
            be->vt->destroy(be);
        }
        free(st), free(x), free(w), free(xc), free(y_ref), free(y_tmp), free(y_gen);
    }
    /* a kernel of too many taps for one step: nothing runs */
    backend *be = kh_backend(true, cpu_isa_detect(), 2);
    int64_t C = 40, S = 9, n = 4;
    float *st = calloc((size_t)(C * S), sizeof(float)), *x = calloc((size_t)(C * n), sizeof(float));
    float *w = calloc((size_t)(C * (S + 1)), sizeof(float)), *y = out_alloc((size_t)(C * n)), *st_new = out_alloc((size_t)(C * S));
    be_view in[3] = {kh_view(SLM_DTYPE_F32, 2, C, S, 1, st), kh_view(SLM_DTYPE_F32, 2, C, n, 1, x), kh_view(SLM_DTYPE_F32, 2, S + 1, C, 1, w)};
    be_view out[2] = {kh_view(SLM_DTYPE_F32, 2, C, n, 1, y), kh_view(SLM_DTYPE_F32, 2, C, S, 1, st_new)};
    assert_int_equal(be->vt->exec_conv_step(be, out, in, true, &e), SLM_ERR_UNSUPPORTED);
    check_guard(y, 0, "conv step not taken");
    check_guard(st_new, 0, "conv step not taken");
    free(st), free(x), free(w), free(y), free(st_new);
    be->vt->destroy(be);
    ref->vt->destroy(ref);
}

/* Every op takes the reference kernel when the backend is created with use_fast false, and an op
 * without a fast kernel (EMBED here) runs its reference kernel in a fast backend too. */
static void dispatch_falls_back(void **unused) {
    (void)unused;
    float table[4 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    int32_t ids[2] = {2, 0};
    float *y = out_alloc(8);
    g_node nd = kh_node(G_OP_EMBED, 2, 1);
    be_view in[2] = {kh_view(SLM_DTYPE_F32, 2, 4, 3, 1, table), kh_view(SLM_DTYPE_I32, 1, 2, 1, 1, ids)};
    be_view out = kh_view(SLM_DTYPE_F32, 2, 4, 2, 1, y);
    assert_null(cpu_fast_lookup(&nd, &out, in));
    backend *be = kh_backend(true, cpu_isa_detect(), 2);
    kh_run(be, &nd, &out, in, 2, 0);
    check_guard(y, 8, "embed");
    assert_true(y[0] == 9.0f && y[4] == 1.0f);
    be->vt->destroy(be);
    /* a matmul on a type without a fast kernel (Q3_K) is not taken */
    g_node mm = kh_node(G_OP_MATMUL, 2, 1);
    be_view min[2] = {kh_view(SLM_DTYPE_Q3_K, 2, 256, 1, 1, NULL), kh_view(SLM_DTYPE_F32, 2, 256, 1, 1, NULL)};
    be_view mout = kh_view(SLM_DTYPE_F32, 2, 1, 1, 1, NULL);
    assert_null(cpu_fast_lookup(&mm, &mout, min));
    free(y);
}

/* cpu_exp, the e^x of every fast tier, within 1 ulp of the double-precision exp on [-86, 88] (about
 * 0.93 measured), 1 at 0, and clamped outside: below -86 (and for NaN) e^-86, above 88.376 the
 * finite e^88.376 ~ 2.4e38. */
static void exp_accuracy(void **unused) {
    (void)unused;
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -86.0f + 174.0f * (float)i / 200000.0f;
        double ref = exp((double)x), ulp = ldexp(1.0, ilogb(ref) - 23);
        double err = fabs((double)cpu_exp(x) - ref) / ulp;
        if (err > worst) worst = err;
        if (!(err <= 1.0))
            fail_msg("cpu_exp(%.9g) = %.9g, exp gives %.9g: %.2f ulp", (double)x, (double)cpu_exp(x), ref, err);
    }
    if (getenv("SLM_TEST_VERBOSE")) fprintf(stderr, "cpu_exp: max error %.3f ulp\n", worst);
    assert_true(cpu_exp(0.0f) == 1.0f);
    assert_true(cpu_exp(-1000.0f) == cpu_exp(-86.0f) && cpu_exp(-86.0f) > 0.0f);
    assert_true(cpu_exp(NAN) == cpu_exp(-86.0f));
    assert_true(isfinite(cpu_exp(1000.0f)) && cpu_exp(1000.0f) >= cpu_exp(88.0f) && cpu_exp(1000.0f) > 2.4e38f);
}

/* A level this CPU or build lacks is never run: creating a backend for it fails with a message
 * naming the level (directly and through the kernels parameter), and cpu_isa_get gives a level the
 * CPU has. */
static void missing_level_refused(void **unused) {
    (void)unused;
    assert_true(cpu_isa_supported(CPU_ISA_GENERIC));
    assert_true(cpu_isa_supported(cpu_isa_detect()));
    int n_missing = 0;
    for (int i = 0; i < N_LEVELS; i++) {
        cpu_isa_level lv = all_levels[i];
        const char *name = cpu_isa_name(lv);
        if (cpu_isa_supported(lv)) {
            assert_null(cpu_isa_missing(lv));
            assert_int_equal(cpu_isa_get(lv)->level, lv);
            continue;
        }
        n_missing++;
        assert_non_null(cpu_isa_missing(lv));
        assert_true(cpu_isa_supported(cpu_isa_get(lv)->level));
        backend *be = NULL;
        slm_err e;
        err_clear(&e);
        assert_int_equal(cpu_backend_create_with(&al_default, 2, true, lv, &be, &e), SLM_ERR_UNSUPPORTED);
        assert_null(be);
        if (!strstr(e.msg, name) || !strstr(e.msg, cpu_isa_missing(lv))) fail_msg("message: %s", e.msg);
        /* the reference kernels ignore the level */
        err_clear(&e);
        assert_int_equal(cpu_backend_create_with(&al_default, 2, false, lv, &be, &e), SLM_OK);
        be->vt->destroy(be);
        be = NULL;
        err_clear(&e);
        assert_int_equal(cpu_backend_create(&al_default, 2, name, &be, &e), SLM_ERR_UNSUPPORTED);
        assert_null(be);
        if (!strstr(e.msg, "kernels=") || !strstr(e.msg, name)) fail_msg("message: %s", e.msg);
    }
    if (!n_missing) fprintf(stderr, "missing_level_refused: this CPU has every level; nothing refused to check\n");
    /* a supported level named by the kernels parameter runs exactly that level */
    backend *be = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(cpu_backend_create(&al_default, 1, "generic", &be, &e), SLM_OK);
    assert_string_equal(cpu_backend_kernels(be), "generic");
    be->vt->destroy(be);
    assert_int_equal(cpu_backend_create(&al_default, 1, "ref", &be, &e), SLM_OK);
    assert_string_equal(cpu_backend_kernels(be), "ref");
    be->vt->destroy(be);
    /* NULL, "" and "auto" are the best level this CPU has */
    const char *autos[] = {NULL, "", "auto"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cpu_backend_create(&al_default, 1, autos[i], &be, &e), SLM_OK);
        assert_string_equal(cpu_backend_kernels(be), cpu_isa_name(cpu_isa_detect()));
        be->vt->destroy(be);
    }
    /* a value that names no tier is refused, not taken as "auto" */
    be = NULL;
    err_clear(&e);
    assert_int_equal(cpu_backend_create(&al_default, 1, "avx51", &be, &e), SLM_ERR_INVALID_ARG);
    assert_null(be);
    if (!strstr(e.msg, "avx51") || !strstr(e.msg, "not a kernel tier")) fail_msg("message: %s", e.msg);
}

int main(void) {
    if (getenv("SLM_TEST_SEED")) rng = strtoull(getenv("SLM_TEST_SEED"), NULL, 10) * 2654435761ull + 1; /* other shapes */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matmul_all),   cmocka_unit_test(matmul_cols), cmocka_unit_test(matmul_picks), cmocka_unit_test(matmul_group_all), cmocka_unit_test(tiles_read_back), cmocka_unit_test(embed_all), cmocka_unit_test(copy_all),   cmocka_unit_test(quant_act_bytes), cmocka_unit_test(attention_all), cmocka_unit_test(attention_window_ring),
        cmocka_unit_test(attention_decode_long), cmocka_unit_test(attention_split_depth),
        cmocka_unit_test(attention_fold_rows),
        cmocka_unit_test(attention_ring_too_short), cmocka_unit_test(state_write_ring),
        cmocka_unit_test(deltanet_all), cmocka_unit_test(rowwise_all),     cmocka_unit_test(conv_step_all),
        cmocka_unit_test(dispatch_falls_back), cmocka_unit_test(missing_level_refused),
        cmocka_unit_test(exp_accuracy),
    };
    if (getenv("SLM_TEST_FILTER")) cmocka_set_test_filter(getenv("SLM_TEST_FILTER")); /* one test (tests/CMakeLists.txt) */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
