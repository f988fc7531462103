/* cpu.c — the CPU backend object: thread pool, per-thread scratch, and dispatch of each node to
 * its kernel (the reference kernels for now; the table is where SIMD variants slot in). */
#include "backend/cpu/cpu.h"

#include <string.h>

static size_t cpu_scratch_need(backend *be, const g_node *nd, const be_view *out, const be_view *in) {
    (void)be;
    return cpu_ref_scratch_bytes(nd, out, in);
}

static slm_status cpu_reserve(backend *be, size_t bytes, slm_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    if (bytes <= cb->scratch_bytes) return SLM_OK;
    bytes = (bytes + 63) & ~(size_t)63;
    for (int32_t t = 0; t < cb->n_threads; t++) {
        void *q = al_malloc(&cb->alloc, bytes);
        if (!q) return err_set(e, SLM_ERR_NOMEM, "out of memory for %zu bytes of kernel scratch", bytes);
        al_free(&cb->alloc, cb->scratch[t]);
        cb->scratch[t] = q;
    }
    cb->scratch_bytes = bytes;
    return SLM_OK;
}

static slm_status cpu_exec(backend *be, const g_node *nd, const be_view *out, const be_view *in, const be_call *call,
                           slm_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    cpu_kernel_fn fn = cpu_ref_kernels[nd->op];
    if (!fn) return err_set(e, SLM_ERR_UNSUPPORTED, "cpu: no kernel for %s", g_op_name(nd->op));
    return fn(cb, nd, out, in, call, e);
}

static void cpu_destroy(backend *be) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!cb) return;
    slm_allocator a = cb->alloc;
    pool_destroy(cb->pool);
    for (int32_t t = 0; cb->scratch && t < cb->n_threads; t++) al_free(&a, cb->scratch[t]);
    al_free(&a, cb->scratch);
    al_free(&a, cb);
}

static const backend_vtable cpu_vtable = {"cpu", cpu_scratch_need, cpu_exec, cpu_reserve, cpu_destroy};

slm_status cpu_backend_create(const slm_allocator *a, int32_t n_threads, backend **out, slm_err *e) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    cpu_backend *cb = al_calloc(a, 1, sizeof *cb);
    if (!cb) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    cb->base.vt = &cpu_vtable;
    cb->alloc = *a;
    cb->n_threads = n_threads;
    cb->scratch = al_calloc(a, (size_t)n_threads, sizeof(uint8_t *));
    if (!cb->scratch) {
        al_free(a, cb);
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    slm_status st = pool_create(a, n_threads, &cb->pool, e);
    if (st) {
        cpu_destroy(&cb->base);
        return st;
    }
    *out = &cb->base;
    return SLM_OK;
}
