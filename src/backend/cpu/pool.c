/* pool.c — persistent thread pool with low-latency dispatch that shares the CPU gracefully. A job is
 * one atomic word (sequence number, task count, next task); it is published by storing a new word,
 * and every thread, the caller included, claims tasks from it one at a time by compare-and-swap.
 * Workers spin (with a CPU pause) for a short while after each job, then sleep on a condition
 * variable, so back-to-back jobs (one per node in decode) start in well under a microsecond while
 * an idle pool costs nothing. The caller waits for the tasks, not for the workers: a worker that
 * was descheduled (another process holds its core) and claimed nothing is simply not waited for,
 * and the caller itself takes the tasks it would have run. While the last claimed tasks finish the
 * caller spins briefly, then sleeps until the worker that completes the job wakes it, so a worker
 * descheduled in the middle of a task gets the core back instead of competing with a spinner.
 * Contention: a thread about to sleep closes a CONTENTION_WINDOW_NS window once one has passed:
 * the time the workers spent runnable but waiting for a core in it (Linux: each worker's
 * /proc/thread-self/schedstat, opened by the worker itself). After HIGH_WINDOWS windows in a row
 * with that wait at CONTENDED_WAIT_PERMILLE of the window or more, the pool is "contended" for
 * CONTENDED_HOLD_NS and its idle workers spin only CONTENDED_SPIN_NS before they sleep (on a
 * 2-core Xeon, decode's windows: 0-14% alone, 39-64% beside a CPU-bound process; 8 sessions'
 * pools in one process, up to 49% but rarely twice in a row over 25%). A worker that spins between
 * jobs spends the scheduler's share of its core, so it loses the core in the middle of a later
 * task and the caller waits for it; one that sleeps keeps its share for the tasks (a woken thread
 * with unspent share runs at once). Idle, the long spin stays: it is what starts back-to-back jobs
 * without a wake-up. While contended the workers sleep and wait less, so the hold, renewed by
 * every pair of high windows, is what keeps the pool contended. Where schedstat cannot be read
 * the pool never counts as contended.
 *
 * Invariants:
 *  1. fn, ctx and base are written before the job word that publishes them (release) and read by a
 *     thread only after its claim (a CAS on the word, acquire) succeeded; they are not changed
 *     until every claimed task of the job has incremented n_done (release; the caller reads it with
 *     acquire), so a thread that holds a claimed task always reads its own job's fn and ctx.
 *  2. A claim succeeds only on the current word with next < n: a thread holding an older word's
 *     value fails its CAS (the sequence number, 32 bits, differs), so no task of a finished job is
 *     ever run again and n_done counts the current job's tasks only.
 *  3. A worker that goes to sleep increments n_sleeping and re-checks the word under mu; the caller
 *     reads n_sleeping after publishing (both sequentially consistent), so no wake-up is lost. The
 *     caller's sleep is symmetric: it sets caller_waiting and re-checks n_done under mu; the thread
 *     whose increment completes the job reads caller_waiting after it (both sequentially
 *     consistent) and then signals under mu.
 *  4. pool_run is called by one thread at a time (the session's thread) and never from a task. */
#include "backend/cpu/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* How long an idle worker spins before it sleeps (on a contended pool: until the first clock read,
 * SPIN_POLLS polls), how long the caller spins for the last tasks of a job before it sleeps, how
 * many polls between clock reads; the contention detector's constants (above). */
#define SPIN_NS 100000LL
#define CONTENDED_SPIN_NS 0LL
#define CALLER_SPIN_NS 30000LL
#define SPIN_POLLS 256
#define CONTENDED_HOLD_NS 1000000000LL
#define CONTENTION_WINDOW_NS 20000000LL
#define CONTENDED_WAIT_PERMILLE 250
#define HIGH_WINDOWS 2

/* The job word: sequence << 32 | n_tasks << 16 | next task. A pool_run of more than JOB_MAX_TASKS
 * tasks runs as several jobs. */
#define JOB_MAX_TASKS 0xFFFF
static inline uint32_t job_seq(uint64_t w) { return (uint32_t)(w >> 32); }
static inline int64_t job_n(uint64_t w) { return (int64_t)((w >> 16) & 0xFFFF); }
static inline int64_t job_next(uint64_t w) { return (int64_t)(w & 0xFFFF); }

struct cpu_pool {
    slm_allocator alloc;
    int32_t n_threads;       /* fixed before the first worker starts: workers read it */
    int32_t n_started;       /* creator only: workers started, joined by pool_destroy */
    pthread_t *threads;      /* (n_threads - 1) workers */
    struct worker_arg *args; /* (n_threads - 1), all set before the first worker starts */
    _Alignas(64) atomic_uint_fast64_t job;
    atomic_bool quit;
    pool_task_fn fn;
    void *ctx;
    int64_t base; /* task index of the job's task 0 within its pool_run */
    uint32_t seq; /* the caller's last sequence number */
    _Alignas(64) atomic_int_fast64_t n_done;
    _Alignas(64) atomic_int n_sleeping;
    atomic_bool caller_waiting;
    int64_t window_start_ns;                /* under mu: when the workers' waits were last read */
    int32_t high_windows;                   /* under mu: high windows in a row */
    atomic_int_fast64_t contended_until_ns; /* CLOCK_MONOTONIC; 0: never contended */
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* workers wait for a job */
    pthread_cond_t done_cv; /* the caller waits for the job's last tasks */
};

typedef struct worker_arg {
    cpu_pool *p;
    int32_t thread;
    atomic_int stat_fd;   /* the worker's /proc/thread-self/schedstat, or -1 */
    int64_t last_wait_ns; /* under mu: its runqueue wait at the last window's close; -1: unread */
} worker_arg;

/* Test hook (pool_set_test_timing): the contention window and the workers' spin, in ns. */
static atomic_int_fast64_t window_override_ns = -1, spin_override_ns = -1;

void pool_set_test_timing(int64_t window_ns, int64_t spin_ns) {
    atomic_store(&window_override_ns, window_ns);
    atomic_store(&spin_override_ns, spin_ns);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The runqueue wait (ns) so far of the thread whose schedstat is open at fd, or -1. */
static int64_t thread_wait_ns(int fd) {
    char buf[96];
    ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    unsigned long long run, wait;
    return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? (int64_t)wait : -1;
}

/* Called under mu by a thread about to sleep: closes the contention window once it is
 * CONTENTION_WINDOW_NS long; HIGH_WINDOWS high windows in a row make the pool contended. */
static void note_contention(cpu_pool *p) {
    int64_t t = now_ns(), span = t - p->window_start_ns, waited = 0;
    int64_t window_ns = atomic_load_explicit(&window_override_ns, memory_order_relaxed);
    if (span < (window_ns >= 0 ? window_ns : CONTENTION_WINDOW_NS) || p->n_threads < 2) return;
    for (int32_t i = 0; i < p->n_threads - 1; i++) {
        worker_arg *w = &p->args[i];
        int64_t ns = thread_wait_ns(atomic_load_explicit(&w->stat_fd, memory_order_acquire));
        if (ns >= 0 && w->last_wait_ns >= 0) waited += ns - w->last_wait_ns;
        w->last_wait_ns = ns;
    }
    bool high = waited * 1000 >= CONTENDED_WAIT_PERMILLE * span * (p->n_threads - 1);
    p->high_windows = high ? p->high_windows + 1 : 0;
    if (p->high_windows >= HIGH_WINDOWS) atomic_store(&p->contended_until_ns, t + CONTENDED_HOLD_NS);
    p->window_start_ns = t;
}

static int64_t worker_spin_ns(cpu_pool *p) {
    int64_t spin_ns = atomic_load_explicit(&spin_override_ns, memory_order_relaxed);
    if (spin_ns >= 0) return spin_ns;
    int64_t until = atomic_load_explicit(&p->contended_until_ns, memory_order_relaxed);
    return until && now_ns() < until ? CONTENDED_SPIN_NS : SPIN_NS;
}

/* One poll of a spin-wait whose *t0 starts at 0: a CPU pause, and every SPIN_POLLS polls a clock
 * read; true once limit_ns have passed since the first read. */
static bool spin_over(uint32_t i, int64_t *t0, int64_t limit_ns) {
    CPU_RELAX();
    if (i % SPIN_POLLS) return false;
    int64_t t = now_ns();
    if (!*t0) *t0 = t;
    return t - *t0 >= limit_ns;
}

/* Claims and runs tasks of the current job until none is left. */
static void run_tasks(cpu_pool *p, int32_t thread) {
    for (;;) {
        uint64_t w = atomic_load_explicit(&p->job, memory_order_acquire);
        do {
            if (job_next(w) >= job_n(w)) return;
        } while (!atomic_compare_exchange_weak_explicit(&p->job, &w, w + 1, memory_order_acq_rel,
                                                        memory_order_acquire));
        p->fn(p->ctx, p->base + job_next(w), thread);
        if (atomic_fetch_add(&p->n_done, 1) + 1 == job_n(w) && atomic_load(&p->caller_waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

/* Waits until the job word's sequence differs from seen (or quit); returns the word. */
static uint64_t wait_job(cpu_pool *p, uint32_t seen) {
    int64_t t0 = 0, spin_ns = worker_spin_ns(p);
    for (uint32_t i = 1;; i++) {
        uint64_t w = atomic_load_explicit(&p->job, memory_order_acquire);
        if (job_seq(w) != seen || atomic_load_explicit(&p->quit, memory_order_relaxed)) return w;
        if (!spin_over(i, &t0, spin_ns)) continue;
        pthread_mutex_lock(&p->mu);
        note_contention(p);
        atomic_fetch_add(&p->n_sleeping, 1);
        while (job_seq(atomic_load(&p->job)) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
        atomic_fetch_sub(&p->n_sleeping, 1);
        pthread_mutex_unlock(&p->mu);
        t0 = 0;
        spin_ns = worker_spin_ns(p);
    }
}

static void *worker_main(void *argp) {
    cpu_pool *p = ((worker_arg *)argp)->p;
    int32_t thread = ((worker_arg *)argp)->thread;
    atomic_store_explicit(&((worker_arg *)argp)->stat_fd, open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC),
                          memory_order_release);
    uint32_t seen = 0;
    for (;;) {
        seen = job_seq(wait_job(p, seen));
        if (atomic_load_explicit(&p->quit, memory_order_acquire)) break;
        run_tasks(p, thread);
    }
    return NULL;
}

/* Waits until n tasks of the current job are done: spins a while, then sleeps (invariant 3). */
static void wait_done(cpu_pool *p, int64_t n) {
    int64_t t0 = 0;
    for (uint32_t i = 1; atomic_load_explicit(&p->n_done, memory_order_acquire) < n; i++) {
        if (!spin_over(i, &t0, CALLER_SPIN_NS)) continue;
        pthread_mutex_lock(&p->mu);
        note_contention(p);
        atomic_store(&p->caller_waiting, true);
        while (atomic_load(&p->n_done) < n) pthread_cond_wait(&p->done_cv, &p->mu);
        atomic_store(&p->caller_waiting, false);
        pthread_mutex_unlock(&p->mu);
        return;
    }
}

slm_status pool_create(const slm_allocator *a, int32_t n_threads, cpu_pool **out, slm_err *e) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    cpu_pool *p = al_calloc_aligned(a, sizeof *p); /* its counters are 64-byte aligned (_Alignas) */
    if (!p) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    p->alloc = *a;
    p->n_threads = 1;
    atomic_init(&p->job, 0);
    atomic_init(&p->quit, false);
    atomic_init(&p->n_done, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->caller_waiting, false);
    p->window_start_ns = now_ns();
    atomic_init(&p->contended_until_ns, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
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
            atomic_init(&p->args[i].stat_fd, -1);
            p->args[i].last_wait_ns = -1;
        }
        /* Published before any worker starts (pthread_create orders these writes before the
         * worker's first read): a worker may read n_threads and every args[i] at once. */
        p->n_threads = n_threads;
        for (int32_t i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) {
                pool_destroy(p);
                return err_set(e, SLM_ERR_BACKEND, "cannot start thread %d", i + 1);
            }
            p->n_started = i + 1;
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
    /* Every worker joined before any schedstat file closes: a worker still running reads the
     * others' descriptors in note_contention, and a closed number may already be reused. */
    for (int32_t i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    for (int32_t i = 0; i < p->n_started; i++) {
        int fd = atomic_load(&p->args[i].stat_fd);
        if (fd >= 0) close(fd);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->done_cv);
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
    for (int64_t base = 0; base < n_tasks; base += JOB_MAX_TASKS) {
        int64_t n = n_tasks - base < JOB_MAX_TASKS ? n_tasks - base : JOB_MAX_TASKS;
        p->fn = fn;
        p->ctx = ctx;
        p->base = base;
        atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
        p->seq++;
        atomic_store(&p->job, (uint64_t)p->seq << 32 | (uint64_t)n << 16); /* seq_cst: publishes (1, 3) */
        if (atomic_load(&p->n_sleeping) > 0) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
        }
        run_tasks(p, 0);
        wait_done(p, n);
    }
}
