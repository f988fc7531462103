/* test_session.c — the session contract of statelm.h on the tiny models: a failed call (token id
 * out of range, context overflow, abort callback mid-prefill) leaves the session exactly as it was,
 * so continuing gives bit-identical logits to a session that never saw the failure; reset returns
 * to a fresh state; the thread count does not change a bit; state listings agree with the model's;
 * the kernel tier and repacking come from the params, never from the environment. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h" /* white box: cpu_isa_supported, the model's table of repacked weights */
#include "model/model.h"
#include "statelm.h"

static slm_model *load(const char *rel) {
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path(rel), NULL, &m, err, sizeof err) != SLM_OK) fail_msg("load %s: %s", rel, err);
    return m;
}

static slm_session *session(const slm_model *m, int32_t n_ctx, int32_t n_threads, slm_abort_fn abort_fn, void *ud) {
    slm_session_params p = slm_session_params_default();
    p.n_ctx = n_ctx;
    p.n_threads = n_threads;
    p.kv_type = SLM_KV_F32;
    p.abort_fn = abort_fn;
    p.abort_user_data = ud;
    slm_session *s = NULL;
    char err[512];
    if (slm_session_create(m, &p, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
    return s;
}

static const int32_t seq[] = {1, 70, 81, 90, 100, 120, 7, 33, 250, 251, 12, 44};
#define N_SEQ ((int32_t)(sizeof seq / sizeof seq[0]))

/* Logits after feeding seq[0, split) as one prefill and the rest one by one. */
static float *reference_logits(const slm_model *m, int32_t split, int32_t n_vocab) {
    slm_session *s = session(m, 32, 2, NULL, NULL);
    const float *l = NULL;
    assert_int_equal(slm_session_prefill(s, seq, (size_t)split, &l), SLM_OK);
    for (int32_t i = split; i < N_SEQ; i++) assert_int_equal(slm_session_decode(s, seq[i], &l), SLM_OK);
    float *out = malloc((size_t)n_vocab * sizeof(float));
    memcpy(out, l, (size_t)n_vocab * sizeof(float));
    slm_session_destroy(s);
    return out;
}

static void check_failures_leave_session_unchanged(const char *rel) {
    slm_model *m = load(rel);
    int32_t n_vocab = slm_model_n_vocab(m);
    float *want = reference_logits(m, 5, n_vocab);
    slm_session *s = session(m, 32, 2, NULL, NULL);
    const float *l = NULL;
    assert_int_equal(slm_session_prefill(s, seq, 5, &l), SLM_OK);
    /* a bad id in the middle of a batch: nothing of the batch is applied */
    int32_t bad[3] = {seq[5], n_vocab + 3, seq[6]};
    assert_int_equal(slm_session_prefill(s, bad, 3, &l), SLM_ERR_RANGE);
    assert_null(l);
    assert_non_null(strstr(slm_session_errmsg(s), "out of range"));
    assert_int_equal(slm_session_decode(s, -1, &l), SLM_ERR_RANGE);
    assert_int_equal(slm_session_pos(s), 5);
    size_t n_hist = 0;
    const int32_t *hist = slm_session_history(s, &n_hist);
    assert_int_equal(n_hist, 5);
    assert_memory_equal(hist, seq, 5 * sizeof(int32_t));
    for (int32_t i = 5; i < N_SEQ; i++) assert_int_equal(slm_session_decode(s, seq[i], &l), SLM_OK);
    assert_memory_equal(l, want, (size_t)n_vocab * sizeof(float));
    slm_session_destroy(s);
    free(want);
    slm_model_destroy(m);
}

static void failures_llama(void **u) { (void)u, check_failures_leave_session_unchanged("tiny/llama/llama-f32.gguf"); }
static void failures_lfm2(void **u) { (void)u, check_failures_leave_session_unchanged("tiny/lfm2/lfm2-f32.gguf"); }
static void failures_qwen35(void **u) { (void)u, check_failures_leave_session_unchanged("tiny/qwen35/qwen35-f32.gguf"); }

static void context_overflow(void **unused) {
    (void)unused;
    slm_model *m = load("tiny/qwen35/qwen35-f32.gguf");
    slm_session *s = session(m, 8, 1, NULL, NULL);
    const float *l = NULL;
    assert_int_equal(slm_session_prefill(s, seq, 6, &l), SLM_OK);
    assert_int_equal(slm_session_prefill(s, seq + 6, 3, &l), SLM_ERR_CONTEXT_FULL);
    assert_non_null(strstr(slm_session_errmsg(s), "do not fit"));
    assert_int_equal(slm_session_pos(s), 6);
    assert_int_equal(slm_session_prefill(s, seq + 6, 2, &l), SLM_OK);
    assert_int_equal(slm_session_decode(s, seq[8], &l), SLM_ERR_CONTEXT_FULL);
    assert_int_equal(slm_session_pos(s), 8);
    slm_session_destroy(s);
    slm_model_destroy(m);
}

/* Aborts on the k-th poll (the executor polls once per layer). */
typedef struct abort_after {
    int polls, abort_at;
} abort_after;

static bool abort_cb(void *ud) {
    abort_after *a = ud;
    return ++a->polls == a->abort_at;
}

/* An abort in the middle of a prefill, after conv/recurrent states of early layers were written,
 * must leave every state as it was (double buffering), for every possible abort point. */
static void check_abort(const char *rel) {
    slm_model *m = load(rel);
    int32_t n_vocab = slm_model_n_vocab(m);
    float *want = reference_logits(m, 4, n_vocab);
    for (int abort_at = 1; abort_at <= slm_model_n_layer(m) + 2; abort_at++) {
        abort_after a = {0, 0};
        slm_session *s = session(m, 32, 2, abort_cb, &a);
        const float *l = NULL;
        assert_int_equal(slm_session_prefill(s, seq, 4, &l), SLM_OK);
        a.polls = 0;
        a.abort_at = abort_at;
        assert_int_equal(slm_session_prefill(s, seq + 4, 5, &l), SLM_ERR_ABORTED);
        assert_int_equal(slm_session_pos(s), 4);
        a.abort_at = 0;
        for (int32_t i = 4; i < N_SEQ; i++) assert_int_equal(slm_session_decode(s, seq[i], &l), SLM_OK);
        if (memcmp(l, want, (size_t)n_vocab * sizeof(float)) != 0)
            fail_msg("%s: abort at poll %d changed the session", rel, abort_at);
        slm_session_destroy(s);
    }
    free(want);
    slm_model_destroy(m);
}

static void abort_lfm2(void **u) { (void)u, check_abort("tiny/lfm2/lfm2-f32.gguf"); }
static void abort_qwen35(void **u) { (void)u, check_abort("tiny/qwen35/qwen35-f32.gguf"); }

static void reset_and_threads(void **unused) {
    (void)unused;
    slm_model *m = load("tiny/qwen35/qwen35-f32.gguf");
    int32_t n_vocab = slm_model_n_vocab(m);
    float *want = reference_logits(m, 7, n_vocab);
    slm_session *s = session(m, 32, 1, NULL, NULL);
    const float *l = NULL;
    assert_int_equal(slm_session_prefill(s, seq + 3, 6, &l), SLM_OK);
    slm_session_reset(s);
    assert_int_equal(slm_session_pos(s), 0);
    assert_int_equal(slm_session_prefill(s, seq, 7, &l), SLM_OK);
    for (int32_t i = 7; i < N_SEQ; i++) assert_int_equal(slm_session_decode(s, seq[i], &l), SLM_OK);
    assert_memory_equal(l, want, (size_t)n_vocab * sizeof(float)); /* 1 thread here, 2 in the reference */
    slm_session_destroy(s);
    free(want);
    slm_model_destroy(m);
}

static void states_and_getters(void **unused) {
    (void)unused;
    slm_model *m = load("tiny/lfm2/lfm2-f32.gguf");
    slm_session *s = session(m, 16, 1, NULL, NULL);
    assert_int_equal(slm_session_n_states(s), slm_model_n_states(m));
    for (int32_t i = 0; i < slm_session_n_states(s); i++) {
        slm_state_info a, b;
        assert_int_equal(slm_session_state(s, i, &a), SLM_OK);
        assert_int_equal(slm_model_state(m, 16, SLM_DTYPE_F32, i, &b), SLM_OK);
        assert_string_equal(a.name, b.name);
        assert_int_equal(a.size_bytes, b.size_bytes);
        assert_memory_equal(a.ne, b.ne, sizeof a.ne);
    }
    assert_int_equal(slm_session_state(s, -1, &(slm_state_info){0}), SLM_ERR_RANGE);
    assert_int_equal(slm_session_n_ctx(s), 16);
    assert_ptr_equal(slm_session_model(s), m);
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    assert_non_null(tok);
    assert_true(slm_tokenizer_eos(tok) >= 0);
    assert_true(slm_tokenizer_is_eog(tok, slm_tokenizer_eos(tok)));
    assert_int_equal(slm_tokenizer_n_vocab(tok), slm_model_n_vocab(m));
    /* invalid parameters are refused up front */
    slm_session_params p = slm_session_params_default();
    p.kv_type = (slm_kv_type)7;
    slm_session *bad = NULL;
    char err[256];
    assert_int_equal(slm_session_create(m, &p, &bad, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(bad);
    assert_non_null(strstr(err, "kv_type 7"));
    slm_session_destroy(s);
    slm_model_destroy(m);
}

static slm_status create_with(const slm_model *m, const char *kernels, bool no_repack, slm_session **s, char *err,
                              size_t cap) {
    slm_session_params p = slm_session_params_default();
    p.n_ctx = 16;
    p.n_threads = 1;
    p.kernels = kernels;
    p.no_repack = no_repack;
    return slm_session_create(m, &p, s, err, cap);
}

/* SLM_KERNELS and SLM_REPACK in the environment change nothing the library does (the CLI reads
 * them); params.kernels naming no tier fails with SLM_ERR_INVALID_ARG, a tier this CPU or build
 * lacks with SLM_ERR_UNSUPPORTED, each with a message naming the value; no_repack keeps the
 * quantised weights unrepacked. */
static void kernels_from_params_not_env(void **unused) {
    (void)unused;
    slm_model *m = load("tiny/llama/llama-q8_0.gguf");
    const char *best = cpu_isa_name(cpu_isa_detect());
    char err[256];
    slm_session *s = NULL;
    assert_int_equal(setenv("SLM_KERNELS", "nonsense", 1), 0);
    assert_int_equal(setenv("SLM_REPACK", "0", 1), 0);
    slm_status st = create_with(m, NULL, false, &s, err, sizeof err);
    if (st != SLM_OK) fail_msg("with SLM_KERNELS=nonsense in the environment: %s", err);
    assert_string_equal(slm_session_kernels(s), best);
    const float *l = NULL;
    assert_int_equal(slm_session_prefill(s, seq, 4, &l), SLM_OK);
    slm_session_destroy(s);
    cpu_weight_cache *wc = m->rt_cache;
    assert_non_null(wc);
    if (cpu_isa_get(cpu_isa_detect())->repack_tiles) assert_true(wc->n_packs > 0); /* SLM_REPACK=0 ignored */
    assert_int_equal(create_with(m, "generic", false, &s, err, sizeof err), SLM_OK);
    assert_string_equal(slm_session_kernels(s), "generic");
    slm_session_destroy(s);
    assert_int_equal(setenv("SLM_KERNELS", "ref", 1), 0);
    assert_int_equal(create_with(m, "", false, &s, err, sizeof err), SLM_OK);
    assert_string_equal(slm_session_kernels(s), best);
    slm_session_destroy(s);
    unsetenv("SLM_KERNELS");
    unsetenv("SLM_REPACK");
    assert_int_equal(create_with(m, "ref", false, &s, err, sizeof err), SLM_OK);
    assert_string_equal(slm_session_kernels(s), "ref");
    slm_session_destroy(s);
    s = (slm_session *)&s;
    assert_int_equal(create_with(m, "nonsense", false, &s, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(s);
    if (!strstr(err, "nonsense") || !strstr(err, "not a kernel tier")) fail_msg("message: %s", err);
    /* every tier this machine lacks is refused, never replaced by another */
    static const cpu_isa_level levels[] = {CPU_ISA_GENERIC, CPU_ISA_NEON, CPU_ISA_AVX2, CPU_ISA_AVX2_VNNI,
                                           CPU_ISA_AVX512,  CPU_ISA_AMX, CPU_ISA_I8MM};
    int n_missing = 0;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        const char *name = cpu_isa_name(levels[i]);
        if (cpu_isa_supported(levels[i])) {
            assert_int_equal(create_with(m, name, false, &s, err, sizeof err), SLM_OK);
            assert_string_equal(slm_session_kernels(s), name);
            slm_session_destroy(s);
            continue;
        }
        n_missing++;
        s = (slm_session *)&s;
        assert_int_equal(create_with(m, name, false, &s, err, sizeof err), SLM_ERR_UNSUPPORTED);
        assert_null(s);
        if (!strstr(err, name) || !strstr(err, "cannot run here")) fail_msg("message: %s", err);
    }
    /* a machine with every tier (none exist today: NEON and x86 exclude each other) has none to refuse */
    if (!n_missing) fprintf(stderr, "kernels_from_params_not_env: every tier runs here; nothing refused to check\n");
    slm_model_destroy(m);
    /* no_repack: a fresh model whose only session keeps weights in file layout repacks nothing */
    m = load("tiny/llama/llama-q8_0.gguf");
    assert_int_equal(create_with(m, NULL, true, &s, err, sizeof err), SLM_OK);
    assert_int_equal(slm_session_prefill(s, seq, 4, &l), SLM_OK);
    slm_session_destroy(s);
    wc = m->rt_cache;
    assert_true(!wc || wc->n_packs == 0);
    slm_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(failures_llama), cmocka_unit_test(failures_lfm2),    cmocka_unit_test(failures_qwen35),
        cmocka_unit_test(context_overflow), cmocka_unit_test(abort_lfm2),     cmocka_unit_test(abort_qwen35),
        cmocka_unit_test(reset_and_threads), cmocka_unit_test(states_and_getters),
        cmocka_unit_test(kernels_from_params_not_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
