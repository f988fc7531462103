/* test_kern_ref.c — reference-kernel properties that golden model tests cannot isolate:
 * chunked DeltaNet equals the recurrent form (outputs and final state, within 1e-4) on sequences of
 * 1, 63, 64, 65 and 300 tokens, for tiled and grouped v-head layouts; the thread count never
 * changes a result bit; STATE_WRITE converts to f16 with round-to-nearest-even; GEGLU matches
 * independently computed values of PyTorch's gelu(approximate='tanh') (the reference kernel and the
 * fast kernel of the best tier this CPU has); and the ring forms (Gemma 3's sliding window):
 * ATTENTION with a window over a ring state against a softmax written from the definition,
 * STATE_WRITE and ONEHOT with a wrapping begin. */
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

/* ---- rings and sliding windows (Gemma 3's local layers) ---------------------------------------- */

static backend *ref_backend(void) {
    backend *be = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(cpu_backend_create_with(&al_default, 2, false, CPU_ISA_GENERIC, &be, &e), SLM_OK);
    return be;
}

static slm_status exec_node(backend *be, const g_node *nd, be_view *out, be_view *in, int64_t n, int64_t pos) {
    slm_err e;
    err_clear(&e);
    size_t scratch = be->vt->scratch_bytes(be, nd, out, in);
    if (scratch) assert_int_equal(be->vt->reserve_scratch(be, scratch, &e), SLM_OK);
    be_call call = {.n = n, .pos = pos};
    return be->vt->exec(be, nd, out, in, &call, &e);
}

static float kv_get(uint32_t dt, const void *base, int64_t i) {
    return dt == SLM_DTYPE_F16 ? f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

/* ATTENTION with window W and ring R against a softmax over the window in double precision written
 * here from the definition: query at position q = pos + t, keys P = max(0, q - W + 1) .. q (W = 0:
 * 0 .. q), each read from row P mod R (R = 0: row P). Rows that hold none of the call's keys are
 * NaN. Positions run past R several times; f16 and f32 states; GQA. */
static void attention_window_ring_matches_softmax(void **unused) {
    (void)unused;
    backend *be = ref_backend();
    const struct { int64_t hd, H, Hkv, window, ring, n, pos; } cases[] = {
        {16, 2, 1, 5, 16, 12, 141}, {32, 4, 2, 8, 32, 25, 150},  {64, 3, 1, 17, 32, 16, 97},
        {24, 2, 2, 40, 64, 25, 149}, {256, 4, 1, 512, 1024, 9, 2100}, {16, 2, 1, 17, 0, 20, 60},
        {16, 1, 1, 5, 16, 3, 2},     {32, 2, 1, 0, 64, 20, 40},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int f16 = 0; f16 < 2; f16++) {
            uint32_t dt = f16 ? SLM_DTYPE_F16 : SLM_DTYPE_F32;
            int64_t hd = cases[ci].hd, H = cases[ci].H, Hkv = cases[ci].Hkv, W = cases[ci].window, R = cases[ci].ring;
            int64_t n = cases[ci].n, pos = cases[ci].pos, ctx = R ? R : pos + n, kw = hd * Hkv;
            int64_t lo0 = W && pos - W + 1 > 0 ? pos - W + 1 : 0;
            size_t el = f16 ? 2 : 4;
            uint8_t *K = malloc(el * (size_t)(kw * ctx)), *V = malloc(el * (size_t)(kw * ctx));
            float *q = malloc(sizeof(float) * (size_t)(hd * H * n)), *y = malloc(sizeof(float) * (size_t)(hd * H * n));
            for (int64_t i = 0; i < kw * ctx; i++) {
                float nan = nanf("");
                if (f16) ((uint16_t *)K)[i] = ((uint16_t *)V)[i] = f32_to_f16(nan);
                else ((float *)K)[i] = ((float *)V)[i] = nan;
            }
            for (int64_t P = lo0; P < pos + n; P++)
                for (int64_t i = 0; i < kw; i++) {
                    int64_t at = (R ? P % R : P) * kw + i;
                    float kf = frand(), vf = frand();
                    if (f16) ((uint16_t *)K)[at] = f32_to_f16(kf), ((uint16_t *)V)[at] = f32_to_f16(vf);
                    else ((float *)K)[at] = kf, ((float *)V)[at] = vf;
                }
            for (int64_t i = 0; i < hd * H * n; i++) q[i] = 2.0f * frand();
            g_node nd;
            memset(&nd, 0, sizeof nd);
            nd.op = G_OP_ATTENTION;
            nd.n_in = 3;
            nd.n_out = 1;
            nd.p.attn.n_head_kv = (int32_t)Hkv;
            nd.p.attn.scale = 1.0f / sqrtf((float)hd);
            nd.p.attn.window = (int32_t)W;
            nd.p.attn.ring = (int32_t)R;
            be_view in[3] = {view3(q, hd, H, n), {dt, 2, {kw, ctx, 1, 1}, K}, {dt, 2, {kw, ctx, 1, 1}, V}};
            be_view out = view3(y, hd, H, n);
            assert_int_equal(exec_node(be, &nd, &out, in, n, pos), SLM_OK);
            double worst = 0.0;
            for (int64_t t = 0; t < n; t++)
                for (int64_t h = 0; h < H; h++) {
                    int64_t g = h / (H / Hkv), qp = pos + t, lo = W && qp - W + 1 > 0 ? qp - W + 1 : 0;
                    const float *qr = q + (t * H + h) * hd;
                    double mx = -INFINITY, den = 0.0, num[256] = {0};
                    double sc[1024];
                    for (int64_t P = lo; P <= qp; P++) {
                        int64_t row = R ? P % R : P;
                        double d = 0.0;
                        for (int64_t i = 0; i < hd; i++) d += (double)qr[i] * kv_get(dt, K, row * kw + g * hd + i);
                        sc[P - lo] = d / sqrt((double)hd);
                        if (sc[P - lo] > mx) mx = sc[P - lo];
                    }
                    for (int64_t P = lo; P <= qp; P++) {
                        int64_t row = R ? P % R : P;
                        double w = exp(sc[P - lo] - mx);
                        den += w;
                        for (int64_t i = 0; i < hd; i++) num[i] += w * kv_get(dt, V, row * kw + g * hd + i);
                    }
                    for (int64_t i = 0; i < hd; i++) {
                        double err = fabs((double)y[(t * H + h) * hd + i] - num[i] / den);
                        if (!(err <= worst)) worst = err; /* NaN sticks */
                    }
                }
            if (!(worst <= 1e-5))
                fail_msg("window %lld ring %lld %s n=%lld pos=%lld: max abs error %.3g", (long long)W, (long long)R,
                         f16 ? "f16" : "f32", (long long)n, (long long)pos, worst);
            free(K), free(V), free(q), free(y);
        }
    be->vt->destroy(be);
}

/* STATE_WRITE with a wrapping begin (pos mod R on the row axis): token t lands in row (pos + t)
 * mod R, the other rows keep their bytes; a ring wider than the state, or a value with more rows
 * than the ring, is refused and nothing is written. */
static void state_write_wraps(void **unused) {
    (void)unused;
    backend *be = ref_backend();
    const int64_t ne0 = 3, R = 16, srows = 20; /* rows 16..19 lie past the ring */
    for (int f16 = 0; f16 < 2; f16++) {
        uint32_t dt = f16 ? SLM_DTYPE_F16 : SLM_DTYPE_F32;
        size_t el = f16 ? 2 : 4;
        const int64_t calls[][2] = {{5, 30}, {16, 37}, {1, 47}, {3, 0}}; /* (n, pos) */
        for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
            int64_t n = calls[c][0], pos = calls[c][1];
            uint8_t state[4 * 3 * 20], before[4 * 3 * 20];
            for (size_t i = 0; i < sizeof state; i++) state[i] = before[i] = (uint8_t)(i * 7 + 1);
            float value[3 * 16];
            for (int64_t i = 0; i < ne0 * n; i++) value[i] = (float)(i + 1) * 0.5f;
            g_node nd;
            memset(&nd, 0, sizeof nd);
            nd.op = G_OP_STATE_WRITE;
            nd.n_in = 1;
            nd.n_out = 1;
            nd.p.write.begin[1] = g_pos_mod(0, R);
            be_view in = {SLM_DTYPE_F32, 2, {ne0, n, 1, 1}, value};
            be_view out = {dt, 2, {ne0, srows, 1, 1}, state};
            assert_int_equal(exec_node(be, &nd, &out, &in, n, pos), SLM_OK);
            for (int64_t r = 0; r < srows; r++) {
                int64_t t = -1;
                for (int64_t u = 0; u < n; u++)
                    if ((pos + u) % R == r) t = u;
                for (int64_t i = 0; i < ne0; i++) {
                    size_t off = el * (size_t)(r * ne0 + i);
                    if (t < 0) {
                        assert_memory_equal(state + off, before + off, el);
                        continue;
                    }
                    float got = f16 ? f16_to_f32(*(uint16_t *)(state + off)) : *(float *)(state + off);
                    assert_true(got == value[t * ne0 + i]); /* halves of small integers: exact in f16 */
                }
            }
        }
        /* refused: more rows than the ring, and a ring past the state's rows */
        uint8_t state[4 * 3 * 20] = {0}, zero[4 * 3 * 20] = {0};
        float value[3 * 17] = {1};
        g_node nd;
        memset(&nd, 0, sizeof nd);
        nd.op = G_OP_STATE_WRITE;
        nd.n_in = 1;
        nd.n_out = 1;
        nd.p.write.begin[1] = g_pos_mod(0, R);
        be_view in = {SLM_DTYPE_F32, 2, {ne0, 17, 1, 1}, value};
        be_view out = {dt, 2, {ne0, srows, 1, 1}, state};
        assert_int_equal(exec_node(be, &nd, &out, &in, 17, 3), SLM_ERR_BACKEND);
        nd.p.write.begin[1] = g_pos_mod(0, 32);
        in.ne[1] = 2;
        assert_int_equal(exec_node(be, &nd, &out, &in, 2, 3), SLM_ERR_BACKEND);
        assert_memory_equal(state, zero, sizeof state);
    }
    be->vt->destroy(be);
}

/* ONEHOT with a wrapping begin: out[j, t] = 1 exactly when j == (pos + 2 + t) mod 8. */
static void onehot_wraps(void **unused) {
    (void)unused;
    backend *be = ref_backend();
    const int64_t L = 8, n = 5, pos = 19; /* hot rows 5, 6, 7, 0, 1 */
    float y[8 * 5];
    g_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_ONEHOT;
    nd.n_in = 0;
    nd.n_out = 1;
    nd.p.onehot.begin = g_pos_mod(2, L);
    be_view out = {SLM_DTYPE_F32, 2, {L, n, 1, 1}, y};
    assert_int_equal(exec_node(be, &nd, &out, NULL, n, pos), SLM_OK);
    const int64_t hot[5] = {5, 6, 7, 0, 1};
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < L; j++) assert_true(y[t * L + j] == (j == hot[t] ? 1.0f : 0.0f));
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
        cmocka_unit_test(attention_window_ring_matches_softmax),
        cmocka_unit_test(state_write_wraps),
        cmocka_unit_test(onehot_wraps),
        cmocka_unit_test(geglu_matches_pytorch_tanh_gelu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
