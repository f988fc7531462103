/* backend.h — the interface between the executor (runtime/) and a backend that runs Program nodes
 * (cpu/, later cuda/). A backend knows graph ops and dtypes, nothing of architectures or tokens.
 * The executor binds every operand to a concrete view before calling exec. runtime/ reaches a
 * backend only through this header: backend_create by kind, the vtable, and the per-model cache
 * (be_model_cache); backend.c is the one place that maps a kind to its implementation. */
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

/* Per-call bindings of the symbolic values, and the kernel the compiled plan chose for the node. */
typedef struct be_call {
    int64_t n;        /* tokens of this call */
    int64_t pos;      /* position of the first token */
    int32_t kernel;   /* select_kernel's choice for this node; 0 = let the backend choose */
} be_call;

/* The backends of this build (backend.c maps each to its vtable). */
typedef enum backend_kind {
    BACKEND_CPU = 0,
    BACKEND_KIND_COUNT
} backend_kind;

/* What a backend is created with. Zero-initialised: the CPU backend, one thread, the best kernels,
 * weights repacked. */
typedef struct backend_params {
    backend_kind kind;
    int32_t n_threads;   /* workers (< 1 is taken as 1) */
    const char *kernels; /* CPU: NULL, "" or "auto" = the best tier this CPU has; "ref" = the reference
                          * kernels (the oracle) only; "generic", "neon", "i8mm", "avx2",
                          * "avxvnni", "avx512" or "amx" = exactly that tier */
    bool no_repack;      /* CPU: keep quantised weights in their file layout only */
} backend_params;

typedef struct backend backend;
typedef struct backend_vtable backend_vtable;

/* Data a backend keeps per model and shares between the backends of every session on that model
 * (CPU: repacked weights, so that weights are repacked once per model, not per session).
 * Thread-safe. Every kind's cache begins with this header; vt is the kind that made it. */
typedef struct be_model_cache {
    const backend_vtable *vt;
} be_model_cache;

struct backend_vtable {
    const char *name;
    /* Creates a backend of this kind (p->kind names it). Returns SLM_OK, or an error with a message
     * and *out = NULL (CPU: p->kernels naming a tier the build or the CPU lacks fails with
     * SLM_ERR_UNSUPPORTED, a value naming no tier with SLM_ERR_INVALID_ARG). */
    slm_status (*create)(const slm_allocator *a, const backend_params *p, backend **out, slm_err *e);
    /* Bytes of per-thread scratch the node needs (the executor sizes scratch before a call). */
    size_t (*scratch_bytes)(backend *be, const g_node *nd, const be_view *out, const be_view *in);
    /* Runs one node. out[i] / in[i] follow nd->out / nd->in. STATE_WRITE gets the state's storage as
     * out[0] (allocated shape, state dtype). Returns SLM_OK or an error with a message. */
    slm_status (*exec)(backend *be, const g_node *nd, const be_view *out, const be_view *in, const be_call *call,
                       slm_err *e);
    /* Runs n >= 2 MATMUL nodes that read the same activations (in[2 i + 1] are one view) as one job,
     * with the bits n exec calls would give: out[i] <- in[2 i] (weights) x in[2 i + 1]. No output
     * overlaps an input or another output. Called only for groups takes_matmul_group accepted; a
     * group it would not take fails with SLM_ERR_UNSUPPORTED, having run nothing. May be NULL. */
    slm_status (*exec_matmul_group)(backend *be, int32_t n, const be_view *out, const be_view *in, slm_err *e);
    /* Runs one step of a causal convolution whose left context is a state, as one job, with the bits
     * the nodes it replaces would give (xc = CONCAT(state, x) along tokens, y = CONV1D(xc, w), then
     * SILU(y) when silu, and the new state = the last K - 1 token columns of xc), without
     * materialising xc:
     *   in[0] state (C, K - 1), in[1] x (C, n), in[2] w (K, C) (the CONV1D weight layout);
     *   out[0] y (C, n), out[1] new state (C, K - 1).
     * out[0] is in[1] or overlaps no input; out[1] overlaps no input or output. Called only for
     * steps takes_conv_step accepted; shapes it would not take fail with SLM_ERR_UNSUPPORTED,
     * having run nothing. May be NULL. */
    slm_status (*exec_conv_step)(backend *be, const be_view *out, const be_view *in, bool silu, slm_err *e);
    /* Compile-time choices (compile/lower.c), made on views whose data is NULL: shapes and dtypes
     * only. select_kernel returns the kernel (> 0) exec runs for the node when be_call.kernel
     * names it, and describes it in text ("avx2 q4_0 x q8_0, 16-row tiles"); exec runs exactly
     * that kernel or fails. takes_matmul_group / takes_conv_step say whether exec_matmul_group /
     * exec_conv_step run such a group (describing the job in text); the plan asks them at the
     * largest token count the function runs with, and a backend that takes a fused step at n
     * takes it at every smaller n. NULL: the backend makes no such fused steps. */
    int32_t (*select_kernel)(const backend *be, const g_node *nd, const be_view *out, const be_view *in, char *text,
                             size_t cap);
    bool (*takes_matmul_group)(const backend *be, int32_t n, const be_view *out, const be_view *in, char *text,
                               size_t cap);
    bool (*takes_conv_step)(const backend *be, const be_view *out, const be_view *in, bool silu, char *text,
                            size_t cap);
    /* Runs fn(ctx, task, thread) for every task in [0, n_tasks) as one job on the backend's threads
     * (thread in [0, n_threads), one task at a time per thread) and returns when all are done. A
     * task must not call into be itself; it may run a serial backend (create_serial) of its
     * thread. May be NULL. */
    void (*run_tasks)(backend *be, int64_t n_tasks, void (*fn)(void *ctx, int64_t task, int32_t thread), void *ctx);
    /* A one-thread backend with the kernels, settings and per-model cache of be (borrowed: be must
     * outlive it) that allocates through a. SLM_OK, or an error with a message and *out = NULL.
     * May be NULL. */
    slm_status (*create_serial)(backend *be, const slm_allocator *a, backend **out, slm_err *e);
    /* Makes sure per-thread scratch holds at least bytes. */
    slm_status (*reserve_scratch)(backend *be, size_t bytes, slm_err *e);
    /* The kernels the backend runs, for slm_session_kernels (CPU: "ref", "generic", "neon", "i8mm",
     * "avx2", "avxvnni", "avx512" or "amx"). Static storage. */
    const char *(*kernels)(const backend *be);
    /* The per-model cache of this kind: cache_create makes an empty one (SLM_OK or SLM_ERR_NOMEM);
     * cache_destroy releases it (accepts NULL); cache_set_file_map declares [data, data + size) a
     * read-only mapping of the model's file, which the backend may drop pages of once it holds
     * its own copy of what lies there (CPU: repacked matrices; the pages stay in the page cache);
     * use_cache makes be use c (borrowed; must outlive be) in place of a cache of its own. All four
     * NULL for a backend that keeps nothing per model. */
    slm_status (*cache_create)(const slm_allocator *a, be_model_cache **out, slm_err *e);
    void (*cache_destroy)(be_model_cache *c);
    void (*cache_set_file_map)(be_model_cache *c, const void *data, size_t size);
    void (*use_cache)(backend *be, be_model_cache *c);
    void (*destroy)(backend *be);
};

struct backend {
    const backend_vtable *vt;
};

/* The vtable of each kind, defined by its implementation (cpu/cpu.c). */
extern const backend_vtable backend_vtable_cpu;

/* The kind named name ("cpu"), or -1 when this build has no such backend. */
int32_t backend_kind_find(const char *name);
/* A backend of kind p->kind (vtable create). An unknown kind fails with SLM_ERR_INVALID_ARG;
 * *out is NULL on failure. Destroy with be->vt->destroy. */
slm_status backend_create(const slm_allocator *a, const backend_params *p, backend **out, slm_err *e);
/* Releases a per-model cache of any kind (c->vt->cache_destroy); accepts NULL. */
void backend_cache_destroy(be_model_cache *c);

#endif
