/* pool.h — a persistent thread pool for the CPU backend: n_threads - 1 workers plus the calling
 * thread run task indices [0, n_tasks) of one job at a time. Owned by a backend instance (no
 * global pool). Tasks must not call pool_run themselves. */
#ifndef SLM_BACKEND_CPU_POOL_H
#define SLM_BACKEND_CPU_POOL_H

#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"

typedef struct cpu_pool cpu_pool;
/* fn(ctx, task, thread): thread in [0, n_threads) identifies per-thread scratch. */
typedef void (*pool_task_fn)(void *ctx, int64_t task, int32_t thread);

slm_status pool_create(const slm_allocator *a, int32_t n_threads, cpu_pool **out, slm_err *e);
void pool_destroy(cpu_pool *p);
/* Runs fn for every task index; returns when all are done. n_tasks <= 0 does nothing. */
void pool_run(cpu_pool *p, int64_t n_tasks, pool_task_fn fn, void *ctx);
/* Tests only: the contention window and the workers' spin before sleeping, in ns, for every pool
 * of the process from now on (0: a worker sleeps, and so reads the pool's thread count, at once);
 * -1 restores the defaults. */
void pool_set_test_timing(int64_t window_ns, int64_t spin_ns);

#endif
