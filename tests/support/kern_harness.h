/* What the kernel tests share (test_kern_fast, test_attn_q): guarded output buffers, the error
 * measure, the list of ISA levels, a CPU backend of one tier, one node executed on it with its
 * scratch reserved, and views and nodes made in one line. Failures end
 * the cmocka test that calls them. Include after <cmocka.h>, backend/backend.h and
 * backend/cpu/cpu.h. */
#ifndef SLM_TEST_KERN_HARNESS_H
#define SLM_TEST_KERN_HARNESS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Output buffers: n floats followed by GUARD guard floats (a NaN pattern no kernel writes). */
#define GUARD 16
#define GUARD_BITS 0x7FC0DEADu

static inline float *out_alloc(size_t n) {
    float *p = malloc((n + GUARD) * sizeof(float));
    assert_non_null(p);
    for (size_t i = 0; i < n + GUARD; i++) memcpy(p + i, &(uint32_t){GUARD_BITS}, 4);
    return p;
}

static inline void check_guard(const float *p, size_t n, const char *what) {
    for (size_t i = n; i < n + GUARD; i++) {
        uint32_t u;
        memcpy(&u, p + i, 4);
        if (u != GUARD_BITS) fail_msg("%s: guard float %zu after the output was overwritten", what, i - n);
    }
}

/* Normalised mean squared error of a against b (INFINITY when a holds a NaN). */
static inline double nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (isnan(num)) return INFINITY;
    return den > 0 ? num / den : num;
}

/* Every ISA level (cpu.h); each is asked on its own, as the levels are not nested (AVX512 CPUs
 * without AVX-VNNI exist). */
static const cpu_isa_level all_levels[] = {CPU_ISA_GENERIC, CPU_ISA_NEON, CPU_ISA_AVX2, CPU_ISA_AVX2_VNNI,
                                           CPU_ISA_AVX512,  CPU_ISA_AMX, CPU_ISA_I8MM};
#define N_LEVELS ((int)(sizeof all_levels / sizeof all_levels[0]))

/* A CPU backend: fast kernels of tier isa, or (fast false) the reference kernels; threads workers. */
static inline backend *kh_backend(bool fast, cpu_isa_level isa, int threads) {
    backend *be = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(cpu_backend_create_with(&al_default, threads, fast, isa, &be, &e), SLM_OK);
    return be;
}

/* nd over in -> out for n columns at position pos. */
static inline void kh_run(backend *be, const g_node *nd, be_view *out, be_view *in, int64_t n, int64_t pos) {
    slm_err e;
    err_clear(&e);
    size_t s = be->vt->scratch_bytes(be, nd, out, in);
    if (s) assert_int_equal(be->vt->reserve_scratch(be, s, &e), SLM_OK);
    be_call call = {.n = n, .pos = pos};
    slm_status st = be->vt->exec(be, nd, out, in, &call, &e);
    if (st) fail_msg("exec %s: %s", g_op_name(nd->op), e.msg);
}

static inline g_node kh_node(g_op op, int n_in, int n_out) {
    g_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = op;
    nd.n_in = n_in;
    nd.n_out = n_out;
    return nd;
}

/* A view of dtype dt, nd dimensions (a, b, c, 1) over data. */
static inline be_view kh_view(uint32_t dt, int nd, int64_t a, int64_t b, int64_t c, void *data) {
    be_view v = {dt, nd, {a, b, c, 1}, data};
    return v;
}

/* An attention node nd over in (q (hd, H, n) at position pos, its K and V states in[1], in[2]):
 * each token run alone at its position gives the batch's row of y (hdv, H per token) bit for bit,
 * its output guard intact. */
static inline void kh_attn_tokens_alone(backend *be, const g_node *nd, const be_view *in, const float *q, int64_t hd,
                                        int64_t hdv, int64_t H, int64_t n, int64_t pos, const float *y,
                                        const char *what) {
    size_t row = (size_t)(hdv * H);
    float *y1 = out_alloc(row);
    for (int64_t t = 0; t < n; t++) {
        be_view in1[3] = {kh_view(SLM_DTYPE_F32, 3, hd, H, 1, (void *)(q + t * hd * H)), in[1], in[2]};
        be_view out1 = kh_view(SLM_DTYPE_F32, 3, hdv, H, 1, y1);
        kh_run(be, nd, &out1, in1, 1, pos + t);
        check_guard(y1, row, what);
        if (memcmp(y1, y + (size_t)t * row, sizeof(float) * row) != 0)
            fail_msg("%s: token %lld alone differs from the batch", what, (long long)t);
    }
    free(y1);
}

#endif
