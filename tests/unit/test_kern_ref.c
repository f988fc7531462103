/* test_kern_ref.c — reference-kernel properties that golden model tests cannot isolate:
 * chunked DeltaNet equals the recurrent form (outputs and final state, within 1e-4) on sequences of
 * 1, 63, 64, 65 and 300 tokens, for tiled and grouped v-head layouts; the thread count never
 * changes a result bit; STATE_WRITE converts to f16 with round-to-nearest-even; and GEGLU matches
 * independently computed values of PyTorch's gelu(approximate='tanh') (the reference kernel and the
 * fast kernel of the best tier this CPU has). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "base/half.h"

static uint64_t rng_state = 0x1234567;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

static be_view view3(float *data, int64_t a, int64_t b, int64_t c) {
    be_view v = {SLM_DTYPE_F32, 3, {a, b, c, 1}, data};
    return v;
}

static void l2_normalize(float *x, int64_t n_vec, int64_t dim, float scale) {
    for (int64_t i = 0; i < n_vec; i++) {
        double s = 0;
        for (int64_t j = 0; j < dim; j++) s += (double)x[i * dim + j] * x[i * dim + j];
        float inv = scale / sqrtf((float)s + 1e-6f);
        for (int64_t j = 0; j < dim; j++) x[i * dim + j] *= inv;
    }
}

/* Runs DELTANET over T tokens with the given form; returns outputs (dv*Hv*T) and state (dv*dk*Hv). */
static void run_deltanet(backend *be, bool chunked, bool tiled, int64_t T, int64_t Hk, int64_t Hv, int64_t dk,
                         int64_t dv, float *const bufs[6], float *o, float *s_new) {
    g_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_DELTANET;
    nd.n_in = 6;
    nd.n_out = 2;
    nd.p.dn.chunked = chunked;
    nd.p.dn.v_heads_tiled = tiled;
    be_view in[6] = {view3(bufs[0], dk, Hk, T), view3(bufs[1], dk, Hk, T), view3(bufs[2], dv, Hv, T),
                     {SLM_DTYPE_F32, 2, {Hv, T, 1, 1}, bufs[3]}, {SLM_DTYPE_F32, 2, {Hv, T, 1, 1}, bufs[4]},
                     view3(bufs[5], dv, dk, Hv)};
    be_view out[2] = {view3(o, dv, Hv, T), view3(s_new, dv, dk, Hv)};
    slm_err e;
    err_clear(&e);
    size_t scratch = be->vt->scratch_bytes(be, &nd, out, in);
    assert_int_equal(be->vt->reserve_scratch(be, scratch, &e), SLM_OK);
    be_call call = {.n = T, .pos = 0};
    assert_int_equal(be->vt->exec(be, &nd, out, in, &call, &e), SLM_OK);
}

static void deltanet_chunked_equals_recurrent(void **unused) {
    (void)unused;
    backend *be = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(cpu_backend_create_with(&al_default, 2, false, CPU_ISA_GENERIC, &be, &e), SLM_OK);
    const int64_t lengths[] = {1, 63, 64, 65, 300};
    const int64_t Hk = 2, Hv = 4, dk = 16, dv = 32;
    for (int tiled = 0; tiled < 2; tiled++) {
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            int64_t T = lengths[li];
            float *q = malloc(sizeof(float) * (size_t)(dk * Hk * T)), *k = malloc(sizeof(float) * (size_t)(dk * Hk * T));
            float *v = malloc(sizeof(float) * (size_t)(dv * Hv * T)), *g = malloc(sizeof(float) * (size_t)(Hv * T));
            float *beta = malloc(sizeof(float) * (size_t)(Hv * T)), *s0 = malloc(sizeof(float) * (size_t)(dv * dk * Hv));
            for (int64_t i = 0; i < dk * Hk * T; i++) q[i] = frand(), k[i] = frand();
            for (int64_t i = 0; i < dv * Hv * T; i++) v[i] = frand();
            for (int64_t i = 0; i < Hv * T; i++) {
                g[i] = -0.5f * log1pf(expf(frand() * 3.0f));       /* -a * softplus(x): log-decay <= 0 */
                beta[i] = 1.0f / (1.0f + expf(-2.0f * frand())); /* sigmoid */
            }
            for (int64_t i = 0; i < dv * dk * Hv; i++) s0[i] = 0.3f * frand();
            l2_normalize(q, Hk * T, dk, 1.0f / sqrtf((float)dk));
            l2_normalize(k, Hk * T, dk, 1.0f);
            float *const bufs[6] = {q, k, v, g, beta, s0};
            size_t no = (size_t)(dv * Hv * T), ns = (size_t)(dv * dk * Hv);
            float *o_rec = malloc(no * sizeof(float)), *o_chk = malloc(no * sizeof(float));
            float *s_rec = malloc(ns * sizeof(float)), *s_chk = malloc(ns * sizeof(float));
            run_deltanet(be, false, tiled, T, Hk, Hv, dk, dv, bufs, o_rec, s_rec);
            run_deltanet(be, true, tiled, T, Hk, Hv, dk, dv, bufs, o_chk, s_chk);
            double err_o = tu_max_rel_err(o_chk, o_rec, no), err_s = tu_max_rel_err(s_chk, s_rec, ns);
            printf("deltanet T=%lld %s: chunked vs recurrent relative error: output %.2e, state %.2e\n", (long long)T,
                   tiled ? "tiled" : "grouped", err_o, err_s);
            if (err_o > 1e-4 || err_s > 1e-4)
                fail_msg("T=%lld tiled=%d: output rel err %.3g, state rel err %.3g", (long long)T, tiled, err_o, err_s);
            free(q), free(k), free(v), free(g), free(beta), free(s0);
            free(o_rec), free(o_chk), free(s_rec), free(s_chk);
        }
    }
    be->vt->destroy(be);
}

/* MATMUL over 3 threads and 1 thread must agree bit for bit (each row is one task). */
static void thread_count_does_not_change_bits(void **unused) {
    (void)unused;
    const int64_t k = 96, m = 77, cols = 5;
    float *w = malloc(sizeof(float) * (size_t)(k * m)), *x = malloc(sizeof(float) * (size_t)(k * cols));
    float *y1 = malloc(sizeof(float) * (size_t)(m * cols)), *y3 = malloc(sizeof(float) * (size_t)(m * cols));
    for (int64_t i = 0; i < k * m; i++) w[i] = frand();
    for (int64_t i = 0; i < k * cols; i++) x[i] = frand();
    g_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_MATMUL;
    nd.n_in = 2;
    nd.n_out = 1;
    be_view in[2] = {{SLM_DTYPE_F32, 2, {k, m, 1, 1}, w}, {SLM_DTYPE_F32, 2, {k, cols, 1, 1}, x}};
    float *outs[2] = {y1, y3};
    int threads[2] = {1, 3};
    for (int r = 0; r < 2; r++) {
        backend *be = NULL;
        slm_err e;
        err_clear(&e);
        assert_int_equal(cpu_backend_create_with(&al_default, threads[r], false, CPU_ISA_GENERIC, &be, &e), SLM_OK);
        be_view out = {SLM_DTYPE_F32, 2, {m, cols, 1, 1}, outs[r]};
        assert_int_equal(be->vt->reserve_scratch(be, be->vt->scratch_bytes(be, &nd, &out, in), &e), SLM_OK);
        be_call call = {.n = cols, .pos = 0};
        assert_int_equal(be->vt->exec(be, &nd, &out, in, &call, &e), SLM_OK);
        be->vt->destroy(be);
    }
    assert_memory_equal(y1, y3, sizeof(float) * (size_t)(m * cols));
    /* and equal to a plain double-precision dot product, rounded once */
    for (int64_t c = 0; c < cols; c++)
        for (int64_t o = 0; o < m; o++) {
            double s = 0;
            for (int64_t i = 0; i < k; i++) s += (double)w[o * k + i] * (double)x[c * k + i];
            assert_true(y1[c * m + o] == (float)s);
        }
    free(w), free(x), free(y1), free(y3);
}

static void state_write_rounds_to_f16(void **unused) {
    (void)unused;
    uint16_t state[4 * 3];
    memset(state, 0, sizeof state);
    float value[4 * 2] = {1.0f, 1.0f + ldexpf(1, -11), 1.0f + 3 * ldexpf(1, -11), -2.5f, 65504.0f, 1e-8f, 0.1f, -0.0f};
    g_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_STATE_WRITE;
    nd.n_in = 1;
    nd.n_out = 1;
    nd.p.write.begin[1] = g_pos_plus(0);
    be_view in = {SLM_DTYPE_F32, 2, {4, 2, 1, 1}, value};
    be_view out = {SLM_DTYPE_F16, 2, {4, 3, 1, 1}, state};
    backend *be = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(cpu_backend_create_with(&al_default, 1, false, CPU_ISA_GENERIC, &be, &e), SLM_OK);
    be_call call = {.n = 2, .pos = 1}; /* rows 1..2 */
    assert_int_equal(be->vt->exec(be, &nd, &out, &in, &call, &e), SLM_OK);
    assert_int_equal(state[0], 0); /* row 0 untouched */
    assert_int_equal(state[4], 0x3C00);
    assert_int_equal(state[5], 0x3C00); /* tie rounds to even */
    assert_int_equal(state[6], 0x3C02);
    assert_int_equal(state[7], 0xC100);
    assert_int_equal(state[8], 0x7BFF);
    /* a window past the end is refused, not written */
    be_call bad = {.n = 2, .pos = 2};
    assert_int_equal(be->vt->exec(be, &nd, &out, &in, &bad, &e), SLM_ERR_BACKEND);
    be->vt->destroy(be);
}

/* gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's
 * gelu(approximate='tanh') and HF's gelu_pytorch_tanh, evaluated in float64 with numpy 1.x:
 *   x = np.array([-3, -1, -0.5, 0, 0.5, 1, 3], dtype=np.float64)
 *   0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
 * GEGLU(a, b) = gelu_tanh(a) b: row 0 with b = 1, row 1 with b = -2.5; within 1e-6 relative. */
static void geglu_matches_pytorch_tanh_gelu(void **unused) {
    (void)unused;
    static const double expect[7] = {-0.0036373920817729943, -0.15880800939172329, -0.15428599017485606, 0.0,
                                     0.34571400982514394,    0.84119199060827676,  2.9963626079182268};
    float a[14] = {-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f, -3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f};
    float b[14], y[14];
    for (int i = 0; i < 14; i++) b[i] = i < 7 ? 1.0f : -2.5f;
    g_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_GEGLU;
    nd.n_in = 2;
    nd.n_out = 1;
    be_view in[2] = {{SLM_DTYPE_F32, 2, {7, 2, 1, 1}, a}, {SLM_DTYPE_F32, 2, {7, 2, 1, 1}, b}};
    be_view out = {SLM_DTYPE_F32, 2, {7, 2, 1, 1}, y};
    for (int fast = 0; fast < 2; fast++) {
        backend *be = NULL;
        slm_err e;
        err_clear(&e);
        assert_int_equal(cpu_backend_create_with(&al_default, 1, fast, cpu_isa_detect(), &be, &e), SLM_OK);
        assert_int_equal(be->vt->reserve_scratch(be, be->vt->scratch_bytes(be, &nd, &out, in), &e), SLM_OK);
        be_call call = {.n = 2, .pos = 0};
        assert_int_equal(be->vt->exec(be, &nd, &out, in, &call, &e), SLM_OK);
        for (int i = 0; i < 14; i++) {
            double want = expect[i % 7] * (i < 7 ? 1.0 : -2.5);
            if (!(fabs((double)y[i] - want) <= 1e-6 * fabs(want)))
                fail_msg("GEGLU (%s) at x = %g, b = %g: %.9g, PyTorch's tanh gelu gives %.9g", fast ? "fast" : "reference",
                         (double)a[i], (double)b[i], (double)y[i], want);
        }
        be->vt->destroy(be);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deltanet_chunked_equals_recurrent),
        cmocka_unit_test(thread_count_does_not_change_bits),
        cmocka_unit_test(state_write_rounds_to_f16),
        cmocka_unit_test(geglu_matches_pytorch_tanh_gelu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
