/* test_embed_golden.c — slm_session_embed on the tiny models against Hugging Face transformers'
 * final-norm hidden states (scripts/gen_embed_golden.py: golden/hidden.f32 for the 43 golden ids,
 * golden/embed.json for the pooled vectors), every architecture:
 *   - SLM_POOLING_NONE returns every row; MEAN, CLS and LAST the pooled vectors, raw and
 *     L2-normalised; each within 1e-4 relative (max|a-b| / max|b|), the tolerance of the logits
 *     goldens (test_golden_tiny.c: f32 KV states, float32 rounding differences are ~1e-6);
 *   - embedding in several Program calls (checkpoint interval 8; gemma3's ring also caps a call)
 *     gives the same vectors;
 *   - an embed advances the session as a prefill does: the next decode's logits are bit-identical;
 *   - a plan made with slm_plan_params.embeddings has the "embed" function and its sessions embed;
 *   - allocation failures during an embed of several calls are SLM_ERR_NOMEM, change nothing, leak nothing;
 *   - bad input (no embed function, n = 0, ids out of range, a full context, pooling rank or an
 *     unknown value, out too small, an abort in the middle of a multi-call embed) fails with a
 *     message and leaves the session as it was. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "statelm.h"

#define TOL 1e-4
#define N_IDS 43

typedef struct egolden {
    int32_t d;
    int32_t ids[N_IDS];
    float *hidden;           /* (N_IDS, d) */
    float pooled[2][3][256]; /* [raw, l2][mean, cls, last][d] */
} egolden;

static const char *const POOL_NAMES[3] = {"mean", "cls", "last"};
static const slm_pooling POOLS[3] = {SLM_POOLING_MEAN, SLM_POOLING_CLS, SLM_POOLING_LAST};

static void egolden_load(const char *arch, egolden *g) {
    char rel[256];
    snprintf(rel, sizeof rel, "tiny/%s/golden/embed.json", arch);
    char *text = (char *)tu_read_file(tu_data_path(rel), NULL);
    assert_non_null(text);
    cJSON *m = cJSON_Parse(text);
    assert_non_null(m);
    g->d = cJSON_GetObjectItem(m, "d_model")->valueint;
    assert_true(g->d > 0 && g->d <= 256);
    cJSON *pooled = cJSON_GetObjectItem(m, "pooled");
    for (int k = 0; k < 2; k++) {
        cJSON *kind = cJSON_GetObjectItem(pooled, k ? "l2" : "raw");
        for (int p = 0; p < 3; p++) {
            cJSON *v = cJSON_GetObjectItem(kind, POOL_NAMES[p]);
            assert_int_equal(cJSON_GetArraySize(v), g->d);
            for (int i = 0; i < g->d; i++) g->pooled[k][p][i] = (float)cJSON_GetArrayItem(v, i)->valuedouble;
        }
    }
    cJSON_Delete(m);
    free(text);
    size_t size = 0;
    snprintf(rel, sizeof rel, "tiny/%s/golden/ids.i32", arch);
    int32_t *ids = (int32_t *)tu_read_file(tu_data_path(rel), &size);
    assert_non_null(ids);
    assert_int_equal(size, sizeof g->ids);
    memcpy(g->ids, ids, sizeof g->ids);
    free(ids);
    snprintf(rel, sizeof rel, "tiny/%s/golden/hidden.f32", arch);
    g->hidden = (float *)tu_read_file(tu_data_path(rel), &size);
    assert_non_null(g->hidden);
    assert_int_equal(size, (size_t)N_IDS * (size_t)g->d * sizeof(float));
}

static slm_model *load(const char *rel) {
    slm_model *m = NULL;
    char err[512];
    slm_model_params mp = slm_model_params_default();
    if (slm_model_load(tu_data_path(rel), &mp, &m, err, sizeof err) != SLM_OK) fail_msg("load %s: %s", rel, err);
    return m;
}

static int n_abort_checks, abort_after;
static bool abort_late(void *user) {
    (void)user;
    return abort_after >= 0 && ++n_abort_checks > abort_after;
}

static slm_session *session(const slm_model *m, bool embeddings, int32_t ckpt_interval, int32_t n_ctx) {
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = n_ctx;
    sp.kv_type = SLM_KV_F32;
    sp.n_threads = 2;
    sp.embeddings = embeddings;
    sp.checkpoint_interval = ckpt_interval;
    sp.abort_fn = abort_late;
    slm_session *s = NULL;
    char err[512];
    if (slm_session_create(m, &sp, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
    return s;
}

static void expect_close(const char *what, const float *got, const float *want, size_t n) {
    double err = tu_max_rel_err(got, want, n);
    if (!(err <= TOL)) fail_msg("%s: relative error %.3g > %.0e", what, err, TOL);
}

/* Every pooling, raw and normalised, from position 0 of s; checks against g. */
static void check_poolings(const char *what, slm_session *s, const egolden *g) {
    size_t d = (size_t)g->d, n_out = 0;
    float *rows = calloc(N_IDS * d, sizeof(float));
    char msg[160];
    slm_session_reset(s);
    assert_int_equal(slm_session_embed(s, g->ids, N_IDS, SLM_POOLING_NONE, false, rows, N_IDS * d, &n_out), SLM_OK);
    assert_int_equal(n_out, N_IDS * d);
    assert_int_equal(slm_session_pos(s), N_IDS);
    for (int i = 0; i < N_IDS; i++) {
        snprintf(msg, sizeof msg, "%s none row %d", what, i);
        expect_close(msg, rows + (size_t)i * d, g->hidden + (size_t)i * d, d);
    }
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < 3; p++) {
            float v[256];
            slm_session_reset(s);
            if (slm_session_embed(s, g->ids, N_IDS, POOLS[p], k == 1, v, d, &n_out) != SLM_OK)
                fail_msg("%s %s: %s", what, POOL_NAMES[p], slm_session_errmsg(s));
            assert_int_equal(n_out, d);
            snprintf(msg, sizeof msg, "%s %s%s", what, POOL_NAMES[p], k ? " l2" : "");
            expect_close(msg, v, g->pooled[k][p], d);
            if (k) {
                double ss = 0;
                for (size_t i = 0; i < d; i++) ss += (double)v[i] * v[i];
                assert_true(fabs(sqrt(ss) - 1.0) < 1e-6);
            }
        }
    /* the model's default (the tiny GGUFs have no pooling_type): last, normalised */
    float v[256];
    slm_session_reset(s);
    assert_int_equal(slm_model_pooling(slm_session_model(s)), SLM_POOLING_MODEL);
    assert_int_equal(slm_session_embed(s, g->ids, N_IDS, SLM_POOLING_MODEL, true, v, d, NULL), SLM_OK);
    snprintf(msg, sizeof msg, "%s default", what);
    expect_close(msg, v, g->pooled[1][2], d);
    free(rows);
}

static void check_arch(const char *arch, const char *form) {
    egolden g;
    egolden_load(arch, &g);
    char rel[256];
    if (strcmp(form, "hf") == 0) snprintf(rel, sizeof rel, "tiny/%s/hf", arch);
    else snprintf(rel, sizeof rel, "tiny/%s/%s-%s.gguf", arch, arch, form);
    slm_model *m = load(rel);
    assert_int_equal(slm_model_n_embd(m), g.d);
    char what[128];
    snprintf(what, sizeof what, "%s %s", arch, form);
    slm_session *s = session(m, true, 0, 64);
    check_poolings(what, s, &g);
    /* several calls: a checkpoint every 8 tokens splits the embed (hybrids; KV-only models: one call) */
    slm_session *split = session(m, true, 8, 64);
    snprintf(what, sizeof what, "%s %s interval 8", arch, form);
    check_poolings(what, split, &g);
    slm_session_destroy(split);

    /* an embed advances the session as a prefill does */
    slm_session *ref = session(m, false, 0, 64);
    const float *lg_ref = NULL, *lg = NULL;
    float v[256];
    slm_session_reset(s);
    assert_int_equal(slm_session_prefill(ref, g.ids, 11, NULL), SLM_OK);
    assert_int_equal(slm_session_decode(ref, g.ids[11], &lg_ref), SLM_OK);
    assert_int_equal(slm_session_embed(s, g.ids, 11, SLM_POOLING_LAST, false, v, (size_t)g.d, NULL), SLM_OK);
    expect_close("embed of a prefix, last row", v, g.hidden + 10 * (size_t)g.d, (size_t)g.d);
    assert_int_equal(slm_session_decode(s, g.ids[11], &lg), SLM_OK);
    assert_memory_equal(lg, lg_ref, (size_t)slm_model_n_vocab(m) * sizeof(float));
    /* embedding the continuation at position 12 sees the history: rows 12.. of the golden */
    assert_int_equal(slm_session_embed(s, g.ids + 12, N_IDS - 12, SLM_POOLING_CLS, false, v, (size_t)g.d, NULL), SLM_OK);
    expect_close("embed at position 12, cls", v, g.hidden + 12 * (size_t)g.d, (size_t)g.d);
    slm_session_destroy(ref);
    slm_session_destroy(s);
    slm_model_destroy(m);
    free(g.hidden);
}

static void llama_gguf(void **u) { (void)u, check_arch("llama", "f32"); }
static void qwen3_gguf(void **u) { (void)u, check_arch("qwen3", "f32"); }
static void lfm2_gguf(void **u) { (void)u, check_arch("lfm2", "f32"); }
static void qwen35_gguf(void **u) { (void)u, check_arch("qwen35", "f32"); }
static void gemma3_gguf(void **u) { (void)u, check_arch("gemma3", "f32"); }
static void qwen35_hf(void **u) { (void)u, check_arch("qwen35", "hf"); }

/* The session's position, history and the logits of the next decode are those of a reference
 * session that saw the same prefix. */
static void expect_unchanged(slm_session *s, const egolden *g, int32_t pos, const float *next_logits, size_t n_vocab) {
    assert_int_equal(slm_session_pos(s), pos);
    size_t n_hist = 0;
    const int32_t *h = slm_session_history(s, &n_hist);
    assert_int_equal(n_hist, (size_t)pos);
    assert_memory_equal(h, g->ids, (size_t)pos * sizeof(int32_t));
    const float *lg = NULL;
    assert_int_equal(slm_session_decode(s, g->ids[pos], &lg), SLM_OK);
    assert_memory_equal(lg, next_logits, n_vocab * sizeof(float));
    if (slm_session_rollback(s, pos) != SLM_OK) fail_msg("rollback: %s", slm_session_errmsg(s));
}

static void bad_input(void **u) {
    (void)u;
    egolden g;
    egolden_load("qwen35", &g);
    slm_model *m = load("tiny/qwen35/qwen35-f32.gguf");
    size_t d = (size_t)g.d, n_vocab = (size_t)slm_model_n_vocab(m);
    float v[256], *rows = calloc(N_IDS * d, sizeof(float));
    /* no embed function */
    slm_session *plain = session(m, false, 0, 64);
    assert_int_equal(slm_session_embed(plain, g.ids, 4, SLM_POOLING_LAST, true, v, d, NULL), SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(slm_session_errmsg(plain), "embeddings"));
    slm_session_destroy(plain);
    assert_int_equal(slm_session_embed(NULL, g.ids, 4, SLM_POOLING_LAST, true, v, d, NULL), SLM_ERR_INVALID_ARG);

    slm_session *s = session(m, true, 8, 16), *ref = session(m, false, 8, 16);
    const float *next = NULL;
    assert_int_equal(slm_session_prefill(ref, g.ids, 5, NULL), SLM_OK);
    assert_int_equal(slm_session_decode(ref, g.ids[5], &next), SLM_OK);
    assert_int_equal(slm_session_prefill(s, g.ids, 5, NULL), SLM_OK);
    int32_t bad_ids[3] = {g.ids[5], 320, g.ids[6]};
    size_t n_out = 99;
    struct {
        const int32_t *ids;
        size_t n;
        slm_pooling pooling;
        float *out;
        size_t cap;
        slm_status want;
        const char *msg;
    } cases[] = {
        {g.ids + 5, 0, SLM_POOLING_LAST, v, d, SLM_ERR_INVALID_ARG, "no tokens"},
        {bad_ids, 3, SLM_POOLING_LAST, v, d, SLM_ERR_RANGE, "index 1"},
        {g.ids + 5, 12, SLM_POOLING_LAST, v, d, SLM_ERR_CONTEXT_FULL, "do not fit"},
        {g.ids + 5, 4, SLM_POOLING_RANK, v, d, SLM_ERR_UNSUPPORTED, "rank"},
        {g.ids + 5, 4, (slm_pooling)7, v, d, SLM_ERR_INVALID_ARG, "pooling 7"},
        {g.ids + 5, 4, SLM_POOLING_LAST, v, d - 1, SLM_ERR_INVALID_ARG, "needs 64"},
        {g.ids + 5, 4, SLM_POOLING_NONE, rows, 4 * d - 1, SLM_ERR_INVALID_ARG, "needs 256"},
        {g.ids + 5, 4, SLM_POOLING_MEAN, NULL, d, SLM_ERR_INVALID_ARG, "out holds 0"},
        {NULL, 4, SLM_POOLING_MEAN, v, d, SLM_ERR_INVALID_ARG, "tokens is NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        slm_status st = slm_session_embed(s, cases[i].ids, cases[i].n, cases[i].pooling, true, cases[i].out,
                                          cases[i].cap, &n_out);
        if (st != cases[i].want || !strstr(slm_session_errmsg(s), cases[i].msg))
            fail_msg("case %zu: status %s, message \"%s\"; want %s with \"%s\"", i, slm_status_name(st),
                     slm_session_errmsg(s), slm_status_name(cases[i].want), cases[i].msg);
        assert_int_equal(n_out, 0);
        expect_unchanged(s, &g, 5, next, n_vocab);
    }
    /* an abort in the second of two calls (positions 5..7, then 8..10): undone */
    int n_aborted = 0;
    for (int after = 1; after < 8; after++) { /* the hook runs once per layer change (4 layers, 2 calls) */
        abort_after = after;
        n_abort_checks = 0;
        slm_status st = slm_session_embed(s, g.ids + 5, 6, SLM_POOLING_MEAN, true, v, d, &n_out);
        abort_after = -1;
        assert_int_equal(st, SLM_ERR_ABORTED);
        n_aborted += n_abort_checks > 5; /* in the second call */
        expect_unchanged(s, &g, 5, next, n_vocab);
    }
    assert_true(n_aborted > 0);
    slm_session_destroy(ref);
    slm_session_destroy(s);
    slm_model_destroy(m);
    free(rows);
    free(g.hidden);
}

/* The compiled plan is what runs: a plan made with embeddings has the "embed" function, and a
 * session made from it embeds as one created directly; a plan without it has three functions. */
static void from_plan(void **u) {
    (void)u;
    egolden g;
    egolden_load("lfm2", &g);
    slm_model *m = load("tiny/lfm2/lfm2-f32.gguf");
    char err[512];
    for (int with = 0; with < 2; with++) {
        slm_plan_params pp = slm_plan_params_default();
        pp.n_ctx = 64;
        pp.kv_type = SLM_KV_F32;
        pp.embeddings = with;
        slm_plan *pl = NULL;
        if (slm_plan_create(m, &pp, &pl, err, sizeof err) != SLM_OK) fail_msg("plan: %s", err);
        assert_int_equal(slm_plan_n_functions(pl), with ? 4 : 3);
        if (with) assert_string_equal(slm_plan_function_name(pl, 3), "embed");
        slm_session_params sp = slm_session_params_default();
        sp.n_threads = 2;
        slm_session *s = NULL;
        if (slm_session_create_from_plan(m, pl, &sp, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
        float v[256];
        slm_status st = slm_session_embed(s, g.ids, N_IDS, SLM_POOLING_MEAN, true, v, (size_t)g.d, NULL);
        if (with) {
            assert_int_equal(st, SLM_OK);
            expect_close("lfm2 from a plan, mean l2", v, g.pooled[1][0], (size_t)g.d);
        } else {
            assert_int_equal(st, SLM_ERR_UNSUPPORTED);
            assert_int_equal(slm_session_pos(s), 0);
        }
        slm_session_destroy(s);
        slm_plan_destroy(pl);
    }
    slm_model_destroy(m);
    free(g.hidden);
}

/* Allocation failures (STYLE: refuse allocation k = 0, 1, 2, ... until the call succeeds) in an
 * embed of several calls at position 3 on a hybrid: each refusal is SLM_ERR_NOMEM with a message
 * and the position unchanged (a refused checkpoint is best effort: the call may succeed without
 * it, then it is rolled back and the sweep goes on); the final vector equals a session's that
 * never failed, bit for bit; nothing leaks. */
static void alloc_sweep(void **u) {
    (void)u;
    egolden g;
    egolden_load("qwen35", &g);
    tu_failing f = tu_failing_at(-1);
    slm_model_params mp = slm_model_params_default();
    mp.alloc_fn = tu_fail_alloc;
    mp.free_fn = tu_fail_free;
    mp.alloc_user_data = &f;
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path("tiny/qwen35/qwen35-f32.gguf"), &mp, &m, err, sizeof err) != SLM_OK)
        fail_msg("load: %s", err);
    size_t d = (size_t)g.d;
    float want[256], v[256];
    slm_session *ref = session(m, true, 4, 32), *s = session(m, true, 4, 32);
    assert_int_equal(slm_session_prefill(ref, g.ids, 3, NULL), SLM_OK);
    assert_int_equal(slm_session_embed(ref, g.ids + 3, 10, SLM_POOLING_MEAN, true, want, d, NULL), SLM_OK);
    assert_int_equal(slm_session_prefill(s, g.ids, 3, NULL), SLM_OK);
    long k = 0, n_failed = 0;
    for (; k < 100000; k++) {
        f.fail_at = f.n_alloc + k;
        f.n_refused = 0;
        slm_status st = slm_session_embed(s, g.ids + 3, 10, SLM_POOLING_MEAN, true, v, d, NULL);
        f.fail_at = -1;
        if (st == SLM_OK && f.n_refused) {
            assert_int_equal(slm_session_rollback(s, 3), SLM_OK);
            continue;
        }
        if (st == SLM_OK) break;
        if (st != SLM_ERR_NOMEM) fail_msg("refusing allocation %ld gave %s: %s", k, slm_status_name(st), slm_session_errmsg(s));
        assert_true(slm_session_errmsg(s)[0] != '\0');
        assert_int_equal(slm_session_pos(s), 3);
        n_failed++;
    }
    assert_true(n_failed > 0);
    assert_memory_equal(v, want, d * sizeof(float));
    slm_session_destroy(ref);
    slm_session_destroy(s);
    slm_model_destroy(m);
    assert_int_equal(f.n_live, 0);
    free(g.hidden);
}

static void pooling_names(void **u) {
    (void)u;
    assert_string_equal(slm_pooling_name(SLM_POOLING_NONE), "none");
    assert_string_equal(slm_pooling_name(SLM_POOLING_MEAN), "mean");
    assert_string_equal(slm_pooling_name(SLM_POOLING_CLS), "cls");
    assert_string_equal(slm_pooling_name(SLM_POOLING_LAST), "last");
    assert_string_equal(slm_pooling_name(SLM_POOLING_RANK), "rank");
    assert_null(slm_pooling_name(SLM_POOLING_MODEL));
    assert_null(slm_pooling_name((slm_pooling)5));
    assert_int_equal(slm_model_pooling(NULL), SLM_POOLING_MODEL);
}

int main(void) {
    abort_after = -1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama_gguf), cmocka_unit_test(qwen3_gguf),  cmocka_unit_test(lfm2_gguf),
        cmocka_unit_test(qwen35_gguf), cmocka_unit_test(gemma3_gguf), cmocka_unit_test(qwen35_hf),
        cmocka_unit_test(bad_input),  cmocka_unit_test(from_plan),   cmocka_unit_test(alloc_sweep),
        cmocka_unit_test(pooling_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
