/* cpu.h — internals of the CPU backend shared by the kernel files: the backend object (pool,
 * per-thread scratch) and the kernel table. kern_ref.c holds the scalar reference kernel of every
 * op (the oracle); SIMD variants register per op, dtype and ISA (CPU-speed work) and are tested
 * against the reference. */
#ifndef SLM_BACKEND_CPU_CPU_H
#define SLM_BACKEND_CPU_CPU_H

#include "backend/backend.h"
#include "backend/cpu/pool.h"

typedef struct cpu_backend {
    backend base;
    slm_allocator alloc;
    cpu_pool *pool;
    int32_t n_threads;
    size_t scratch_bytes;  /* per thread */
    uint8_t **scratch;     /* (n_threads) 64-byte aligned buffers */
} cpu_backend;

typedef slm_status (*cpu_kernel_fn)(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                                    const be_call *call, slm_err *e);

/* Reference kernels, indexed by op. */
extern const cpu_kernel_fn cpu_ref_kernels[G_OP_COUNT];
/* Per-thread scratch each reference kernel needs for this node. */
size_t cpu_ref_scratch_bytes(const g_node *nd, const be_view *out, const be_view *in);

static inline void *cpu_scratch(cpu_backend *cb, int32_t thread) { return cb->scratch[thread]; }

#endif
