/* test_threads.c — many sequences on one loaded model: N sessions used from N threads at once
 * (weights shared — repacked quantised weights too —, states separate), plus concurrent forks of
 * one snapshot. Every thread's logits
 * must equal a serial run's bit for bit. Built and run under ThreadSanitizer by scripts/test.sh
 * (build-tsan), where a data race fails the test. */
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h" /* white box: the model's table of repacked weights */
#include "model/model.h"
#include "statelm.h"

enum { N_THREADS = 4, N_TOK = 24 };

typedef struct job {
    const slm_model *m;
    const slm_snapshot *snap; /* fork from it when set */
    int32_t seed;
    float *logits;            /* (N_TOK, n_vocab) */
    slm_status status;
} job;

static void tokens_for(int32_t seed, int32_t n_vocab, int32_t *out) {
    uint32_t x = (uint32_t)seed * 2654435761u + 1;
    for (int i = 0; i < N_TOK; i++) {
        x = x * 1103515245u + 12345u;
        out[i] = (int32_t)((x >> 8) % (uint32_t)(n_vocab - 8)) + 4;
    }
}

static void *run_job(void *arg) {
    job *j = arg;
    int32_t v = slm_model_n_vocab(j->m), t[N_TOK];
    tokens_for(j->seed, v, t);
    slm_session *s = NULL;
    slm_session_params p = slm_session_params_default();
    p.n_ctx = 64;
    p.n_threads = 1;
    j->status = j->snap ? slm_session_fork(j->snap, &p, &s, NULL, 0) : slm_session_create(j->m, &p, &s, NULL, 0);
    if (j->status) return NULL;
    const float *l;
    int first = j->snap ? slm_session_pos(s) : 0;
    for (int i = first; i < N_TOK && !j->status; i++) {
        j->status = slm_session_decode(s, t[i], &l);
        if (!j->status) memcpy(j->logits + (size_t)i * (size_t)v, l, (size_t)v * sizeof(float));
    }
    slm_session_destroy(s);
    return NULL;
}

static void check_model(const char *rel, bool quantised) {
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path(rel), NULL, &m, err, sizeof err) != SLM_OK) fail_msg("%s", err);
    size_t rows = (size_t)N_TOK * (size_t)slm_model_n_vocab(m);
    job serial[N_THREADS], par[N_THREADS];
    for (int k = 0; k < N_THREADS; k++) {
        serial[k] = (job){m, NULL, k, calloc(rows, sizeof(float)), SLM_OK};
        par[k] = (job){m, NULL, k, calloc(rows, sizeof(float)), SLM_OK};
        run_job(&serial[k]);
        assert_int_equal(serial[k].status, SLM_OK);
    }
    /* quantised weights are repacked once per model, not per session */
    cpu_weight_cache *wc = m->rt_cache;
    assert_non_null(wc);
    int32_t n_packs = wc->n_packs;
    if (quantised && cpu_isa_get(cpu_isa_detect())->repack_tiles) /* default params: best tier, repacking on */
        assert_true(n_packs > 0);
    pthread_t th[N_THREADS];
    for (int k = 0; k < N_THREADS; k++) assert_int_equal(pthread_create(&th[k], NULL, run_job, &par[k]), 0);
    for (int k = 0; k < N_THREADS; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < N_THREADS; k++) {
        assert_int_equal(par[k].status, SLM_OK);
        assert_memory_equal(par[k].logits, serial[k].logits, rows * sizeof(float));
    }
    assert_int_equal(wc->n_packs, n_packs);
    /* concurrent forks of one snapshot taken at position 10 of sequence 0 */
    slm_session *s = NULL;
    slm_session_params p = slm_session_params_default();
    p.n_ctx = 64;
    assert_int_equal(slm_session_create(m, &p, &s, NULL, 0), SLM_OK);
    int32_t t[N_TOK];
    tokens_for(0, slm_model_n_vocab(m), t);
    const float *l;
    assert_int_equal(slm_session_prefill(s, t, 10, &l), SLM_OK);
    slm_snapshot *snap = NULL;
    assert_int_equal(slm_session_snapshot(s, &snap), SLM_OK);
    slm_session_destroy(s);
    for (int k = 0; k < N_THREADS; k++) {
        memset(par[k].logits, 0, rows * sizeof(float));
        par[k].seed = 0;
        par[k].snap = snap;
        assert_int_equal(pthread_create(&th[k], NULL, run_job, &par[k]), 0);
    }
    for (int k = 0; k < N_THREADS; k++) pthread_join(th[k], NULL);
    size_t v = (size_t)slm_model_n_vocab(m);
    for (int k = 0; k < N_THREADS; k++) {
        assert_int_equal(par[k].status, SLM_OK);
        assert_memory_equal(par[k].logits + 10 * v, serial[0].logits + 10 * v, (rows - 10 * v) * sizeof(float));
    }
    slm_snapshot_destroy(snap);
    for (int k = 0; k < N_THREADS; k++) free(serial[k].logits), free(par[k].logits);
    slm_model_destroy(m);
}

static void sessions_in_threads_lfm2(void **u) { (void)u, check_model("tiny/lfm2/lfm2-f32.gguf", false); }
static void sessions_in_threads_qwen35(void **u) { (void)u, check_model("tiny/qwen35/qwen35-f32.gguf", false); }
static void sessions_in_threads_llama(void **u) { (void)u, check_model("tiny/llama/llama-q8_0.gguf", true); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sessions_in_threads_lfm2),
        cmocka_unit_test(sessions_in_threads_qwen35),
        cmocka_unit_test(sessions_in_threads_llama),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
