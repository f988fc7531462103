/* pool.c — mutex/condvar thread pool with an atomic task counter. Workers sleep between jobs;
 * the caller takes tasks too and waits for the job's completion count. */
#include "backend/cpu/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct cpu_pool {
    slm_allocator alloc;
    int32_t n_threads;
    pthread_t *threads;            /* (n_threads - 1) workers */
    struct worker_arg *args;       /* (n_threads - 1) */
    pthread_mutex_t mu;
    pthread_cond_t job_cv, done_cv;
    /* job, guarded by mu except the atomics */
    uint64_t generation;           /* incremented per job; workers wait for a change */
    bool quit;
    pool_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_int_fast64_t next_task;
    int32_t n_working;             /* workers that have not finished the current job */
};

typedef struct worker_arg {
    cpu_pool *p;
    int32_t thread;
} worker_arg;


static void run_tasks(cpu_pool *p, pool_task_fn fn, void *ctx, int64_t n_tasks, int32_t thread) {
    for (;;) {
        int64_t t = atomic_fetch_add(&p->next_task, 1);
        if (t >= n_tasks) break;
        fn(ctx, t, thread);
    }
}

static void *worker_main(void *argp) {
    cpu_pool *p = ((worker_arg *)argp)->p;
    int32_t thread = ((worker_arg *)argp)->thread;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->job_cv, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pool_task_fn fn = p->fn;
        void *ctx = p->ctx;
        int64_t n_tasks = p->n_tasks;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p, fn, ctx, n_tasks, thread);
        pthread_mutex_lock(&p->mu);
        if (--p->n_working == 0) pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

slm_status pool_create(const slm_allocator *a, int32_t n_threads, cpu_pool **out, slm_err *e) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    cpu_pool *p = al_calloc(a, 1, sizeof *p);
    worker_arg *args = NULL;
    if (!p) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    p->alloc = *a;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->job_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->next_task, 0);
    if (n_threads > 1) {
        p->threads = al_calloc(a, (size_t)n_threads - 1, sizeof(pthread_t));
        args = al_calloc(a, (size_t)n_threads, sizeof(worker_arg));
        if (!p->threads || !args) goto nomem;
        p->args = args;
        for (int32_t i = 0; i < n_threads - 1; i++) {
            args[i].p = p;
            args[i].thread = i + 1;
            if (pthread_create(&p->threads[i], NULL, worker_main, &args[i]) != 0) {
                p->n_threads = i + 1;
                pool_destroy(p);
                return err_set(e, SLM_ERR_BACKEND, "cannot start thread %d", i + 1);
            }
        }
    }
    *out = p;
    return SLM_OK;
nomem:
    al_free(a, p->threads);
    al_free(a, args);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->job_cv);
    pthread_cond_destroy(&p->done_cv);
    al_free(a, p);
    return err_set(e, SLM_ERR_NOMEM, "out of memory");
}

void pool_destroy(cpu_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->job_cv);
    pthread_mutex_unlock(&p->mu);
    for (int32_t i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->job_cv);
    pthread_cond_destroy(&p->done_cv);
    slm_allocator a = p->alloc;
    al_free(&a, p->threads);
    al_free(&a, p->args);
    al_free(&a, p);
}

int32_t pool_n_threads(const cpu_pool *p) { return p->n_threads; }

void pool_run(cpu_pool *p, int64_t n_tasks, pool_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next_task, 0);
    p->n_working = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->job_cv);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, fn, ctx, n_tasks, 0);
    pthread_mutex_lock(&p->mu);
    while (p->n_working > 0) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
