/* test_attn_q.c — attention over quantised KV states (Q8_0, Q4_0; kern_attn_q.h through kern_fast.c)
 * and the KV write into them:
 *  - attention_q: K and V of every mix of Q8_0, Q4_0, F16, F32 (one at least quantised), head
 *    sizes 32..256, GQA, windows and rings with junk rows (NaN scales, infinities) outside the
 *    keys: on every level bit for bit equal to the f32 kernel run on the states' dequantised
 *    copies (base/dtype.c dequant_row: an element is exactly d·q) with q rotated per 32-block when
 *    K is quantised and the output rotated back when V is (the caches hold rotated rows:
 *    quant_kv_row), within NMSE 1e-10 of the reference kernel (double sums over the quantised
 *    states), and n one-token calls equal to the n-token call;
 *  - kvq_write_golden: STATE_WRITE of f32 rows into Q8_0 / Q4_0 states (ring wrap included), by the
 *    reference and every fast level, gives per row exactly gguf-py's bytes for the row rotated per
 *    32-block (tests/data/kvq/, written by scripts/gen_kvq_golden.py) and leaves every other row
 *    untouched; quant_hadamard32 is checked against the Walsh-Hadamard matrix in double;
 *  - the fast kernel refuses (falls back for) a quantised state whose rows are not whole blocks. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "kern_harness.h"
#include "base/dtype.h"
#include "base/half.h"
#include "base/quant.h"


static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float frand(void) { return (float)(rnd() & 0xFFFFFF) / (float)(1 << 23) - 1.0f; } /* [-1, 1) */
static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint32_t)(hi - lo + 1)); }


static int levels(cpu_isa_level out[N_LEVELS]) {
    int n = 0;
    for (int i = 0; i < N_LEVELS; i++)
        if (cpu_isa_supported(all_levels[i])) out[n++] = all_levels[i];
    return n;
}


static size_t row_bytes(uint32_t t, int64_t n) {
    uint64_t b = 0;
    assert_true(dtype_row_bytes(t, (uint64_t)n, &b));
    return (size_t)b;
}

/* Row r of a state of type t (w elements a row) from f32 values x (quantised by quant_row). */
static void put_row(uint32_t t, uint8_t *state, int64_t w, int64_t r, const float *x) {
    assert_true(quant_row(t, x, state + (size_t)r * row_bytes(t, w), w));
}

/* Junk in row r: random bytes (NaN or infinite f16 scales, NaN floats included). */
static void junk_row(uint32_t t, uint8_t *state, int64_t w, int64_t r) {
    size_t rb = row_bytes(t, w);
    for (size_t i = 0; i < rb; i++) state[(size_t)r * rb + i] = (uint8_t)rnd();
    if (t == SLM_DTYPE_Q8_0 || t == SLM_DTYPE_Q4_0) /* make the first block's scale NaN or infinite */
        state[(size_t)r * rb + 1] = (uint8_t)(rnd() % 2 ? 0x7E : 0x7C);
}

/* The state dequantised to f32 (ctx rows of w). */
static float *deq_state(uint32_t t, const uint8_t *state, int64_t w, int64_t ctx) {
    float *f = malloc(sizeof(float) * (size_t)(w * ctx));
    assert_non_null(f);
    for (int64_t r = 0; r < ctx; r++) assert_true(dequant_row(t, state + (size_t)r * row_bytes(t, w), f + r * w, w));
    return f;
}

typedef struct attnq_case {
    uint32_t kt, vt;
    int64_t hd, hdv, H, Hkv, window, ring, n_max, pos_max;
} attnq_case;

static void attention_q(void **unused) {
    (void)unused;
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    backend *ref = kh_backend(false, CPU_ISA_GENERIC, 2), *gen = kh_backend(true, CPU_ISA_GENERIC, 2);
    enum { Q8 = SLM_DTYPE_Q8_0, Q4 = SLM_DTYPE_Q4_0, F16 = SLM_DTYPE_F16, F32 = SLM_DTYPE_F32 };
    const attnq_case cases[] = {
        {Q8, Q8, 64, 64, 9, 3, 0, 0, 20, 300},      /* SmolLM2-135M */
        {Q4, Q4, 64, 64, 9, 3, 0, 0, 20, 300},
        {Q8, F16, 64, 64, 4, 2, 0, 0, 33, 100},
        {F16, Q4, 32, 32, 2, 1, 0, 0, 17, 80},
        {Q4, F32, 96, 96, 3, 3, 0, 0, 5, 60},
        {F32, Q8, 32, 64, 4, 1, 0, 0, 12, 60},
        {Q8, Q4, 128, 128, 8, 1, 0, 0, 20, 40},     /* many rows per KV head */
        {Q8, Q8, 256, 256, 4, 1, 512, 1024, 24, 2600}, /* Gemma 3 270M's sliding layers */
        {Q4, Q8, 256, 256, 4, 1, 512, 1024, 24, 2600},
        {Q8, Q8, 64, 64, 2, 1, 17, 48, 30, 200},    /* a window over a small ring */
        {Q4, F16, 32, 32, 2, 2, 8, 0, 20, 100},     /* a window without a ring */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int trial = 0; trial < 3; trial++) {
            attnq_case cs = cases[ci];
            int64_t hd = cs.hd, hdv = cs.hdv, H = cs.H, Hkv = cs.Hkv, W = cs.window, Rg = cs.ring;
            int64_t n = trial == 0 ? 1 : irand(1, cs.n_max);
            int64_t pos = trial == 2 ? irand(0, 20) : irand(0, cs.pos_max);
            int64_t lo0 = W && pos - W + 1 > 0 ? pos - W + 1 : 0;
            int64_t ctx = Rg ? Rg : pos + n + irand(0, 20), kw = hd * Hkv, vw = hdv * Hkv;
            uint8_t *K = malloc(row_bytes(cs.kt, kw) * (size_t)ctx), *V = malloc(row_bytes(cs.vt, vw) * (size_t)ctx);
            float *xk = malloc(sizeof(float) * (size_t)kw), *xv = malloc(sizeof(float) * (size_t)vw);
            assert_true(K && V && xk && xv);
            for (int64_t r = 0; r < ctx; r++) junk_row(cs.kt, K, kw, r), junk_row(cs.vt, V, vw, r);
            for (int64_t P = lo0; P < pos + n; P++) {
                int64_t row = Rg ? P % Rg : P;
                float sk = 0.2f + 2.0f * (float)(rnd() % 8) / 8.0f; /* rows of different magnitudes */
                for (int64_t i = 0; i < kw; i++) xk[i] = sk * frand() * (i % 17 == 3 ? 6.0f : 1.0f);
                for (int64_t i = 0; i < vw; i++) xv[i] = frand();
                put_row(cs.kt, K, kw, row, xk);
                put_row(cs.vt, V, vw, row, xv);
            }
            float *Kf = deq_state(cs.kt, K, kw, ctx), *Vf = deq_state(cs.vt, V, vw, ctx);
            float *q = malloc(sizeof(float) * (size_t)(hd * H * n));
            for (int64_t i = 0; i < hd * H * n; i++) q[i] = 2.0f * frand();
            g_node nd = kh_node(G_OP_ATTENTION, 3, 1);
            nd.p.attn.n_head_kv = (int32_t)Hkv;
            nd.p.attn.scale = 1.0f / sqrtf((float)hd);
            nd.p.attn.window = (int32_t)W;
            nd.p.attn.ring = (int32_t)Rg;
            be_view in[3] = {kh_view(SLM_DTYPE_F32, 3, hd, H, n, q), kh_view(cs.kt, 2, kw, ctx, 1, K), kh_view(cs.vt, 2, vw, ctx, 1, V)};
            be_view in_f[3] = {in[0], kh_view(SLM_DTYPE_F32, 2, kw, ctx, 1, Kf), kh_view(SLM_DTYPE_F32, 2, vw, ctx, 1, Vf)};
            size_t ny = (size_t)(hdv * H * n);
            char what[200];
            snprintf(what, sizeof what, "attention K %s V %s hd=%lld hdv=%lld H=%lld Hkv=%lld W=%lld R=%lld n=%lld pos=%lld",
                     slm_dtype_name(cs.kt), slm_dtype_name(cs.vt), (long long)hd, (long long)hdv, (long long)H,
                     (long long)Hkv, (long long)W, (long long)Rg, (long long)n, (long long)pos);
            /* the oracle: the f32 kernel of the portable C on the dequantised states, q rotated
             * when K is quantised, the output rotated back when V is */
            float *y_f32 = out_alloc(ny), *y_ref = out_alloc(ny), *qrot = malloc(sizeof(float) * (size_t)(hd * H * n));
            memcpy(qrot, q, sizeof(float) * (size_t)(hd * H * n));
            if (cs.kt == Q8 || cs.kt == Q4)
                for (int64_t i = 0; i < hd * H * n; i += 32) quant_hadamard32(qrot + i);
            in_f[0].data = qrot;
            be_view out = kh_view(SLM_DTYPE_F32, 3, hdv, H, n, y_f32);
            kh_run(gen, &nd, &out, in_f, n, pos);
            if (cs.vt == Q8 || cs.vt == Q4)
                for (size_t i = 0; i < ny; i += 32) quant_hadamard32(y_f32 + i);
            out.data = y_ref;
            kh_run(ref, &nd, &out, in, n, pos);
            check_guard(y_ref, ny, what);
            for (int li = 0; li < n_lv; li++) {
                backend *be = kh_backend(true, lv[li], 2);
                float *y = out_alloc(ny);
                out.data = y;
                kh_run(be, &nd, &out, in, n, pos);
                check_guard(y, ny, what);
                for (size_t i = 0; i < ny; i++)
                    if (memcmp(y + i, y_f32 + i, 4) != 0)
                        fail_msg("%s on %s: element %zu is %.9g, the f32 kernel on the dequantised states %.9g", what,
                                 cpu_isa_name(lv[li]), i, (double)y[i], (double)y_f32[i]);
                double err = nmse(y, y_ref, ny);
                if (!(err <= 1e-10)) fail_msg("%s on %s: NMSE %.3g against the reference", what, cpu_isa_name(lv[li]), err);
                char on[256];
                snprintf(on, sizeof on, "%s on %s", what, cpu_isa_name(lv[li]));
                kh_attn_tokens_alone(be, &nd, in, q, hd, hdv, H, n, pos, y, on); /* one token a call: the same bits */
                free(y);
                be->vt->destroy(be);
            }
            free(K), free(V), free(xk), free(xv), free(Kf), free(Vf), free(q), free(qrot), free(y_f32), free(y_ref);
        }
    gen->vt->destroy(gen);
    ref->vt->destroy(ref);
}

/* ---- the KV write against gguf-py's bytes --------------------------------------------------------- */

#define KVQ_NE0 192

static void kvq_write_golden(void **unused) {
    (void)unused;
    size_t fsize = 0;
    float *rows = (float *)tu_read_file(tu_data_path("kvq/rows.f32"), &fsize);
    assert_non_null(rows);
    int64_t n_rows = (int64_t)(fsize / (KVQ_NE0 * sizeof(float)));
    assert_int_equal(fsize, (size_t)n_rows * KVQ_NE0 * sizeof(float));
    cpu_isa_level lv[N_LEVELS];
    int n_lv = levels(lv);
    const struct {
        const char *file;
        uint32_t t;
    } types[] = {{"kvq/q8_0.bin", SLM_DTYPE_Q8_0}, {"kvq/q4_0.bin", SLM_DTYPE_Q4_0}};
    for (size_t ti = 0; ti < 2; ti++) {
        uint32_t t = types[ti].t;
        size_t gsize = 0, rb = row_bytes(t, KVQ_NE0);
        uint8_t *golden = tu_read_file(tu_data_path(types[ti].file), &gsize);
        assert_non_null(golden);
        assert_int_equal(gsize, rb * (size_t)n_rows);
        /* the rows written as tokens [0, n_rows) at pos, into a ring of R rows (R < n_rows + pos: wraps) */
        for (int trial = 0; trial < 4; trial++) {
            int64_t ring = trial < 2 ? 32 : 0, n = trial % 2 ? n_rows : irand(1, 16), pos = irand(0, 40);
            int64_t srows = ring ? ring : pos + n;
            size_t sbytes = rb * (size_t)srows;
            uint8_t *init = malloc(sbytes), *s = malloc(sbytes);
            assert_true(init && s);
            for (size_t i = 0; i < sbytes; i++) init[i] = (uint8_t)rnd();
            g_node nd = kh_node(G_OP_STATE_WRITE, 1, 1);
            nd.p.write.begin[1] = ring ? g_pos_mod(0, ring) : g_pos_plus(0);
            if (ring && n > ring) n = ring;
            be_view in = kh_view(SLM_DTYPE_F32, 2, KVQ_NE0, n, 1, rows);
            for (int li = -1; li < n_lv; li++) {
                backend *be = li < 0 ? kh_backend(false, CPU_ISA_GENERIC, 2) : kh_backend(true, lv[li], 2);
                const char *lname = li < 0 ? "ref" : cpu_isa_name(lv[li]);
                memcpy(s, init, sbytes);
                be_view out = kh_view(t, 2, KVQ_NE0, srows, 1, s);
                kh_run(be, &nd, &out, &in, n, pos);
                for (int64_t r = 0; r < srows; r++) {
                    int64_t tok = ring ? ((r - pos) % ring + ring) % ring : r - pos;
                    bool written = tok >= 0 && tok < n;
                    const uint8_t *want = written ? golden + rb * (size_t)tok : init + rb * (size_t)r;
                    if (memcmp(s + rb * (size_t)r, want, rb) != 0)
                        fail_msg("%s write on %s (ring %lld, pos %lld, n %lld): row %lld %s", slm_dtype_name(t), lname,
                                 (long long)ring, (long long)pos, (long long)n, (long long)r,
                                 written ? "differs from gguf-py's bytes" : "was touched");
                }
                be->vt->destroy(be);
            }
            free(init), free(s);
        }
        free(golden);
    }
    free(rows);
}

/* quant_hadamard32 against the orthonormal Walsh-Hadamard matrix H[i][j] = (-1)^popcount(i & j) /
 * sqrt(32), in double; and H H = I within rounding. */
static void hadamard32(void **unused) {
    (void)unused;
    for (int trial = 0; trial < 20; trial++) {
        float x[32], y[32];
        for (int i = 0; i < 32; i++) x[i] = trial == 0 ? (i == 5 ? 1.0f : 0.0f) : 10.0f * frand();
        memcpy(y, x, sizeof y);
        quant_hadamard32(y);
        for (int i = 0; i < 32; i++) {
            double want = 0;
            for (int j = 0; j < 32; j++) want += (__builtin_popcount((unsigned)(i & j)) % 2 ? -1.0 : 1.0) * x[j];
            want /= sqrt(32.0);
            if (fabs((double)y[i] - want) > 1e-5 * (1.0 + fabs(want))) fail_msg("H x [%d] = %.9g, want %.9g", i, (double)y[i], want);
        }
        quant_hadamard32(y);
        for (int i = 0; i < 32; i++)
            if (fabsf(y[i] - x[i]) > 1e-5f * (1.0f + fabsf(x[i]))) fail_msg("H H x [%d] = %.9g, x %.9g", i, (double)y[i], (double)x[i]);
    }
}

/* A quantised state row that is not whole blocks (or a write of part of a row) is not the fast
 * kernel's: the reference refuses a partial-row write with a message. */
static void kvq_partial_rows_refused(void **unused) {
    (void)unused;
    backend *be = kh_backend(false, CPU_ISA_GENERIC, 1);
    float val[32] = {0};
    uint8_t state[34 * 4] = {0};
    g_node nd = kh_node(G_OP_STATE_WRITE, 1, 1);
    be_view in = kh_view(SLM_DTYPE_F32, 2, 32, 1, 1, val);
    be_view out = kh_view(SLM_DTYPE_Q8_0, 2, 64, 2, 1, state); /* a 64-wide row, written 32 wide */
    slm_err e;
    err_clear(&e);
    be_call call = {.n = 1, .pos = 0};
    assert_int_equal(be->vt->exec(be, &nd, &out, &in, &call, &e), SLM_ERR_BACKEND);
    assert_non_null(strstr(e.msg, "whole rows"));
    be->vt->destroy(be);
    be = kh_backend(true, cpu_isa_detect(), 1);
    assert_null(cpu_fast_lookup(&nd, &out, &in)); /* the fast kernel does not take it */
    be->vt->destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attention_q),
        cmocka_unit_test(kvq_write_golden),
        cmocka_unit_test(kvq_partial_rows_refused),
        cmocka_unit_test(hadamard32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
