/* pool.c — persistent thread pool with low-latency dispatch. A job is published by bumping an
 * atomic generation counter; workers spin on it (with a CPU pause) for a short while after each
 * job, then sleep on a condition variable, so back-to-back jobs (one per node in decode) start in
 * well under a microsecond while an idle pool costs nothing. Tasks are taken from an atomic
 * counter; the caller takes tasks too and then spins until every worker has checked out.
 *
 * Invariants:
 *  1. fn, ctx and n_tasks are written before the release-increment of gen and read after a worker
 *     observes the new gen (acquire); they are not changed until every worker has incremented
 *     n_done for that job.
 *  2. A worker that goes to sleep increments n_sleeping and re-checks gen under mu; the caller
 *     reads n_sleeping after incrementing gen (both sequentially consistent), so no wake-up is
 *     lost.
 *  3. pool_run is called by one thread at a time (the session's thread) and never from a task. */
#include "backend/cpu/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* How long an idle worker spins before it sleeps, and how many polls between clock reads. */
#define SPIN_NS 100000LL
#define SPIN_POLLS 256

struct cpu_pool {
    slm_allocator alloc;
    int32_t n_threads;
    pthread_t *threads;            /* (n_threads - 1) workers */
    struct worker_arg *args;       /* (n_threads - 1) */
    _Alignas(64) atomic_uint_fast64_t gen;
    atomic_bool quit;
    pool_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    _Alignas(64) atomic_int_fast64_t next_task;
    _Alignas(64) atomic_int n_done;
    _Alignas(64) atomic_int n_sleeping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

typedef struct worker_arg {
    cpu_pool *p;
    int32_t thread;
} worker_arg;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void run_tasks(cpu_pool *p, pool_task_fn fn, void *ctx, int64_t n_tasks, int32_t thread) {
    for (;;) {
        int64_t t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= n_tasks) break;
        fn(ctx, t, thread);
    }
}

/* Waits until gen differs from seen (or quit); returns the new generation. */
static uint64_t wait_job(cpu_pool *p, uint64_t seen) {
    int64_t t0 = 0;
    for (uint32_t i = 1;; i++) {
        uint64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->quit, memory_order_relaxed)) return g;
        CPU_RELAX();
        if (i % SPIN_POLLS) continue;
        int64_t t = now_ns();
        if (!t0) t0 = t;
        if (t - t0 < SPIN_NS) continue;
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->n_sleeping, 1);
        while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
        atomic_fetch_sub(&p->n_sleeping, 1);
        pthread_mutex_unlock(&p->mu);
        t0 = 0;
    }
}

static void *worker_main(void *argp) {
    cpu_pool *p = ((worker_arg *)argp)->p;
    int32_t thread = ((worker_arg *)argp)->thread;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_job(p, seen);
        if (atomic_load_explicit(&p->quit, memory_order_acquire)) break;
        run_tasks(p, p->fn, p->ctx, p->n_tasks, thread);
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_acq_rel);
    }
    return NULL;
}

slm_status pool_create(const slm_allocator *a, int32_t n_threads, cpu_pool **out, slm_err *e) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    cpu_pool *p = al_calloc_aligned(a, sizeof *p); /* its counters are 64-byte aligned (_Alignas) */
    if (!p) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    p->alloc = *a;
    p->n_threads = 1;
    atomic_init(&p->gen, 0);
    atomic_init(&p->quit, false);
    atomic_init(&p->next_task, 0);
    atomic_init(&p->n_done, 0);
    atomic_init(&p->n_sleeping, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (n_threads > 1) {
        p->threads = al_calloc(a, (size_t)n_threads - 1, sizeof(pthread_t));
        p->args = al_calloc(a, (size_t)n_threads - 1, sizeof(worker_arg));
        if (!p->threads || !p->args) {
            pool_destroy(p);
            return err_set(e, SLM_ERR_NOMEM, "out of memory");
        }
        for (int32_t i = 0; i < n_threads - 1; i++) {
            p->args[i].p = p;
            p->args[i].thread = i + 1;
            if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) {
                pool_destroy(p);
                return err_set(e, SLM_ERR_BACKEND, "cannot start thread %d", i + 1);
            }
            p->n_threads = i + 2;
        }
    }
    *out = p;
    return SLM_OK;
}

void pool_destroy(cpu_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int32_t i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    slm_allocator a = p->alloc;
    al_free(&a, p->threads);
    al_free(&a, p->args);
    al_free_aligned(&a, p);
}

void pool_run(cpu_pool *p, int64_t n_tasks, pool_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    int n_workers = p->n_threads - 1;
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes the job (invariant 1, 2) */
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_tasks(p, fn, ctx, n_tasks, 0);
    for (uint32_t i = 1; atomic_load_explicit(&p->n_done, memory_order_acquire) < n_workers; i++) {
        CPU_RELAX();
        if (i % 4096 == 0) sched_yield(); /* a worker may have been descheduled */
    }
}
