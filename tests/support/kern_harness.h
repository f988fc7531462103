/* What the kernel tests share (test_kern_fast, test_attn_q): a CPU backend of one tier, one node
 * executed on it with its scratch reserved, and views and nodes made in one line. Failures end
 * the cmocka test that calls them. Include after <cmocka.h>, backend/backend.h and
 * backend/cpu/cpu.h. */
#ifndef SLM_TEST_KERN_HARNESS_H
#define SLM_TEST_KERN_HARNESS_H

#include <string.h>

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

#endif
