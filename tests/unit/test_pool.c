/* test_pool.c — the CPU thread pool under an artificial contention window: every worker sleeps,
 * and so runs the contention detector (which reads the pool's thread count and every worker's
 * record), the moment it starts, while the creator is still starting the others. Under
 * ThreadSanitizer a field the creator writes after a worker has started is a reported race; in any
 * build the jobs must still run every task exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend/cpu/pool.h"

typedef struct counts {
    atomic_int hits[64];
    atomic_int bad_thread;
    int32_t n_threads;
} counts;

static void count_task(void *ctx, int64_t task, int32_t thread) {
    counts *c = ctx;
    atomic_fetch_add(&c->hits[task], 1);
    if (thread < 0 || thread >= c->n_threads) atomic_fetch_add(&c->bad_thread, 1);
}

static void create_destroy_under_zero_window(void **u) {
    (void)u;
    pool_set_test_timing(0, 0);
    for (int round = 0; round < 60; round++) {
        int32_t n_threads = 2 + round % 7;
        cpu_pool *p = NULL;
        slm_err e = {0};
        assert_int_equal(pool_create(&al_default, n_threads, &p, &e), SLM_OK);
        counts c = {.n_threads = n_threads};
        for (int job = 0; job < 3; job++) pool_run(p, 64, count_task, &c);
        for (int i = 0; i < 64; i++) assert_int_equal(atomic_load(&c.hits[i]), 3);
        assert_int_equal(atomic_load(&c.bad_thread), 0);
        pool_destroy(p);
    }
    pool_set_test_timing(-1, -1);
}

static void destroy_right_after_create(void **u) {
    (void)u;
    pool_set_test_timing(0, 0);
    for (int round = 0; round < 60; round++) {
        cpu_pool *p = NULL;
        slm_err e = {0};
        assert_int_equal(pool_create(&al_default, 8, &p, &e), SLM_OK);
        pool_destroy(p);
    }
    pool_set_test_timing(-1, -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_destroy_under_zero_window),
        cmocka_unit_test(destroy_right_after_create),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
