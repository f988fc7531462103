/* backend.h — the interface between the executor (runtime/) and a backend that runs Program nodes
 * (cpu/, later cuda/). A backend knows graph ops and dtypes, nothing of architectures or tokens.
 * The executor binds every operand to a concrete view before calling exec. */
#ifndef SLM_BACKEND_BACKEND_H
#define SLM_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "graph/graph.h"

/* A concrete, contiguous operand. */
typedef struct be_view {
    uint32_t dtype;   /* slm_dtype */
    int32_t n_dims;
    int64_t ne[4];    /* concrete sizes, ggml order */
    void *data;
} be_view;

/* Per-call bindings of the symbolic values. */
typedef struct be_call {
    int64_t n;        /* tokens of this call */
    int64_t pos;      /* position of the first token */
} be_call;

typedef struct backend backend;
typedef struct backend_vtable {
    const char *name;
    /* Bytes of per-thread scratch the node needs (the executor sizes scratch before a call). */
    size_t (*scratch_bytes)(backend *be, const g_node *nd, const be_view *out, const be_view *in);
    /* Runs one node. out[i] / in[i] follow nd->out / nd->in. STATE_WRITE gets the state's storage as
     * out[0] (allocated shape, state dtype). Returns SLM_OK or an error with a message. */
    slm_status (*exec)(backend *be, const g_node *nd, const be_view *out, const be_view *in, const be_call *call,
                       slm_err *e);
    /* Runs n >= 2 MATMUL nodes that read the same activations (in[2 i + 1] are one view) as one job,
     * with the bits n exec calls would give: out[i] <- in[2 i] (weights) x in[2 i + 1]. No output
     * overlaps an input or another output. Returns SLM_ERR_UNSUPPORTED, having run nothing, for a
     * group the backend does not take (the executor then runs the nodes one by one). May be NULL. */
    slm_status (*exec_matmul_group)(backend *be, int32_t n, const be_view *out, const be_view *in, slm_err *e);
    /* Runs one step of a causal convolution whose left context is a state, as one job, with the bits
     * the nodes it replaces would give (xc = CONCAT(state, x) along tokens, y = CONV1D(xc, w), then
     * SILU(y) when silu, and the new state = the last K - 1 token columns of xc), without
     * materialising xc:
     *   in[0] state (C, K - 1), in[1] x (C, n), in[2] w (K, C) (the CONV1D weight layout);
     *   out[0] y (C, n), out[1] new state (C, K - 1).
     * out[0] is in[1] or overlaps no input; out[1] overlaps no input or output. Returns
     * SLM_ERR_UNSUPPORTED, having run nothing, for shapes the backend does not take (the executor
     * then runs the nodes one by one). May be NULL. */
    slm_status (*exec_conv_step)(backend *be, const be_view *out, const be_view *in, bool silu, slm_err *e);
    /* Makes sure per-thread scratch holds at least bytes. */
    slm_status (*reserve_scratch)(backend *be, size_t bytes, slm_err *e);
    void (*destroy)(backend *be);
} backend_vtable;

struct backend {
    const backend_vtable *vt;
};

/* A table of repacked weights shared by the backends of every session on one model, so weights
 * are repacked once per model, not per session. Thread-safe. */
typedef struct be_weight_cache be_weight_cache;
slm_status cpu_weight_cache_create(const slm_allocator *a, be_weight_cache **out, slm_err *e);
void cpu_weight_cache_destroy(be_weight_cache *c);
/* Declares [data, data + size) a read-only mapping of a file (the model's GGUF): after repacking a
 * matrix inside it the backend drops its pages from the process (MADV_DONTNEED; they stay in the
 * page cache and a later read faults them back). The token embeddings, when they are also the
 * output head, are then read by EMBED from the repacked copy. Weights elsewhere are left alone. */
void cpu_weight_cache_set_file_map(be_weight_cache *c, const void *data, size_t size);
/* Makes be use c (borrowed; must outlive be) instead of a table of its own. */
void cpu_backend_use_weight_cache(backend *be, be_weight_cache *c);

/* The CPU backend with n_threads workers (>= 1). It may keep repacked copies of quantised (Q4_0,
 * Q4_1, Q8_0, Q4_K, Q6_K) matmul weights for its lifetime, keyed by address: such operands must be immutable
 * mapped weights that outlive the backend (they always are: activations and states are never
 * quantised). SLM_KERNELS and SLM_REPACK (cpu/cpu.c) are read here; SLM_KERNELS naming a kernel
 * tier the build or the CPU lacks fails with SLM_ERR_UNSUPPORTED and a message naming it. */
slm_status cpu_backend_create(const slm_allocator *a, int32_t n_threads, backend **out, slm_err *e);
/* The kernels a CPU backend runs: "ref", "generic", "neon", "avx2", "avxvnni" or "avx512" (static
 * storage). */
const char *cpu_backend_kernels(const backend *be);

#endif
