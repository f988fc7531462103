/* test_plan_exec.c — the plan is the program that runs: a session of a model executes exactly the
 * node list `statelm plan --target cpu` prints (slm_plan_create + slm_plan_node_at), same IR nodes,
 * same order, fused nodes as such, for every architecture and both functions; every IR node runs in
 * exactly one plan node; a session made from a plan (slm_session_create_from_plan) runs that plan
 * and gives the same logits bit for bit; plans for another model, context, kernel tier or a target
 * not run here are refused; slm_plan_profile measures every node and refuses bad input with the
 * plan's measurements unchanged; accept after a verify runs exactly the plan's accept steps, and a
 * state the accept plan cannot rebuild makes accept replay, visibly and counted. The executor's
 * visits are recorded through its trace hook (runtime/session.h), independently of the plan
 * accessors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/session.h"
#include "testutil.h"

enum { N_CTX = 64, N_PROMPT = 6, MAX_VISITS = 8192 }; /* one prefill call even for gemma3 rings (8 tokens) */

static const char *const models[] = {
    "tiny/llama/llama-q8_0.gguf", "tiny/qwen3/qwen3-q8_0.gguf", "tiny/lfm2/lfm2-q8_0.gguf",
    "tiny/qwen35/qwen35-q8_0.gguf", "tiny/llama/llama-f32.gguf", "tiny/lfm2/lfm2-f32.gguf",
    "tiny/qwen35/qwen35-f32.gguf", "tiny/gemma3/gemma3-q8_0.gguf", "tiny/gemma3/gemma3-f32.gguf",
};

typedef struct visit {
    int32_t fn, step, n_nodes;
    int32_t nodes[PLAN_STEP_MAX_NODES];
} visit;

typedef struct trace {
    int32_t n;
    visit v[MAX_VISITS];
} trace;

static void record(void *user, int32_t fn, int32_t step, const int32_t *nodes, int32_t n_nodes) {
    trace *t = user;
    if (t->n >= MAX_VISITS) fail_msg("more than %d steps in one call", MAX_VISITS);
    visit *v = &t->v[t->n++];
    v->fn = fn;
    v->step = step;
    v->n_nodes = n_nodes;
    memcpy(v->nodes, nodes, (size_t)n_nodes * sizeof *nodes);
}

static slm_model *load(const char *rel) {
    slm_model *m = NULL;
    char err[256];
    if (slm_model_load(tu_data_path(rel), NULL, &m, err, sizeof err) != SLM_OK) fail_msg("%s: %s", rel, err);
    return m;
}

static slm_plan *cpu_plan(const slm_model *m, int32_t n_ctx, const char *kernels) {
    slm_plan_params pp = slm_plan_params_default();
    pp.n_ctx = n_ctx;
    pp.kernels = kernels;
    slm_plan *pl = NULL;
    char err[256];
    if (slm_plan_create(m, &pp, &pl, err, sizeof err) != SLM_OK) fail_msg("plan: %s", err);
    return pl;
}

static int32_t plan_fn(const slm_plan *pl, const char *name) {
    for (int32_t fn = 0; fn < slm_plan_n_functions(pl); fn++)
        if (strcmp(slm_plan_function_name(pl, fn), name) == 0) return fn;
    fail_msg("no function %s", name);
    return -1;
}

/* The visits of one call equal the plan's node list of function fn, node for node. */
static void check_call(const char *rel, const slm_plan *pl, int32_t fn, const trace *t) {
    int32_t n = slm_plan_n_nodes(pl, fn);
    if (t->n != n) fail_msg("%s %s: the session ran %d nodes, the plan lists %d", rel, slm_plan_function_name(pl, fn), t->n, n);
    for (int32_t i = 0; i < n; i++) {
        slm_plan_node nd;
        assert_int_equal(slm_plan_node_at(pl, fn, i, &nd), SLM_OK);
        const visit *v = &t->v[i];
        if (v->fn != fn || v->step != i || v->n_nodes != nd.n_ir_nodes ||
            memcmp(v->nodes, nd.ir_nodes, (size_t)nd.n_ir_nodes * sizeof(int32_t)) != 0)
            fail_msg("%s %s: node %d (%s) differs from what the session ran", rel, slm_plan_function_name(pl, fn), i, nd.op);
        if (nd.n_ir_nodes > 1 && !nd.pass) fail_msg("%s: fused node %d names no pass", rel, i);
    }
}

/* Every IR position of fn is in exactly one plan node, and fused nodes list ascending positions. */
static void check_cover(const char *rel, const slm_plan *pl, int32_t fn, int32_t n_ir) {
    int32_t *seen = calloc((size_t)n_ir, sizeof *seen);
    for (int32_t i = 0; i < slm_plan_n_nodes(pl, fn); i++) {
        slm_plan_node nd;
        slm_plan_node_at(pl, fn, i, &nd);
        for (int32_t k = 0; k < nd.n_ir_nodes; k++) {
            int32_t at = nd.ir_nodes[k];
            if (at < 0 || at >= n_ir) fail_msg("%s: node %d names IR position %d of %d", rel, i, at, n_ir);
            if (k && at <= nd.ir_nodes[k - 1]) fail_msg("%s: node %d lists its IR nodes out of order", rel, i);
            seen[at]++;
        }
    }
    for (int32_t at = 0; at < n_ir; at++)
        if (seen[at] != 1) fail_msg("%s %s: IR node %d runs %d times", rel, slm_plan_function_name(pl, fn), at, seen[at]);
    free(seen);
}

static void executed_nodes_are_the_plan(void **u) {
    (void)u;
    int32_t prompt[N_PROMPT];
    for (int32_t i = 0; i < N_PROMPT; i++) prompt[i] = 1 + 3 * i;
    trace *t = calloc(1, sizeof *t);
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        slm_model *m = load(models[k]);
        slm_plan *pl = cpu_plan(m, N_CTX, NULL);
        slm_session_params sp = slm_session_params_default();
        sp.n_ctx = N_CTX;
        slm_session *s = NULL;
        char err[256];
        assert_int_equal(slm_session_create(m, &sp, &s, err, sizeof err), SLM_OK);
        s->trace = record;
        s->trace_user = t;
        int32_t prefill = plan_fn(pl, "prefill"), decode = plan_fn(pl, "decode");
        check_cover(models[k], pl, prefill, s->prog->functions[s->fn_prefill].n_nodes);
        check_cover(models[k], pl, decode, s->prog->functions[s->fn_decode].n_nodes);
        t->n = 0;
        assert_int_equal(slm_session_prefill(s, prompt, N_PROMPT, NULL), SLM_OK);
        check_call(models[k], pl, prefill, t);
        t->n = 0;
        assert_int_equal(slm_session_decode(s, 5, NULL), SLM_OK);
        check_call(models[k], pl, decode, t);
        slm_session_destroy(s);
        slm_plan_destroy(pl);
        slm_model_destroy(m);
    }
    free(t);
}

/* The fusions the CPU plan makes where they apply (what the executor used to find on its own). */
static int32_t count_pass(const slm_plan *pl, int32_t fn, const char *pass) {
    int32_t n = 0;
    for (int32_t i = 0; i < slm_plan_n_nodes(pl, fn); i++) {
        slm_plan_node nd;
        slm_plan_node_at(pl, fn, i, &nd);
        n += nd.pass && strcmp(nd.pass, pass) == 0;
    }
    return n;
}

static void fusions_are_plan_nodes(void **u) {
    (void)u;
    slm_model *m = load("tiny/qwen35/qwen35-q8_0.gguf");
    slm_plan *pl = cpu_plan(m, N_CTX, NULL);
    int32_t decode = plan_fn(pl, "decode");
    assert_true(count_pass(pl, decode, "matmul_group") > 0);
    assert_true(count_pass(pl, decode, "conv_step") > 0);
    assert_true(count_pass(pl, decode, "direct_write") > 0); /* the DeltaNet state's write */
    slm_plan_destroy(pl);
    /* the reference kernels take no fused jobs: only direct_write, which needs no backend */
    pl = cpu_plan(m, N_CTX, "ref");
    assert_string_equal(slm_plan_kernels(pl), "ref");
    assert_int_equal(count_pass(pl, decode, "matmul_group"), 0);
    assert_int_equal(count_pass(pl, decode, "conv_step"), 0);
    assert_true(count_pass(pl, decode, "direct_write") > 0);
    slm_plan_destroy(pl);
    /* not run here: no kernels, no fusions; the node list is the IR */
    slm_plan_params pp = slm_plan_params_default();
    pp.target = "ane";
    pp.n_ctx = N_CTX;
    char err[256];
    assert_int_equal(slm_plan_create(m, &pp, &pl, err, sizeof err), SLM_OK);
    assert_string_equal(slm_plan_kernels(pl), "");
    for (int32_t i = 0; i < slm_plan_n_nodes(pl, decode); i++) {
        slm_plan_node nd;
        slm_plan_node_at(pl, decode, i, &nd);
        assert_null(nd.pass);
        assert_int_equal(nd.n_ir_nodes, 1);
        assert_int_equal(nd.ir_nodes[0], i);
    }
    slm_plan_destroy(pl);
    slm_model_destroy(m);
}

static void run_steps(slm_session *s, const int32_t *prompt, int32_t n, float *out, int32_t n_vocab, int32_t steps) {
    const float *logits = NULL;
    assert_int_equal(slm_session_prefill(s, prompt, (size_t)n, &logits), SLM_OK);
    for (int32_t i = 0; i < steps; i++) {
        memcpy(out + (size_t)i * (size_t)n_vocab, logits, (size_t)n_vocab * sizeof(float));
        int32_t best = 0;
        for (int32_t j = 1; j < n_vocab; j++)
            if (logits[j] > logits[best]) best = j;
        assert_int_equal(slm_session_decode(s, best, &logits), SLM_OK);
    }
}

static void session_from_plan(void **u) {
    (void)u;
    int32_t prompt[N_PROMPT];
    for (int32_t i = 0; i < N_PROMPT; i++) prompt[i] = 2 + 5 * i;
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        slm_model *m = load(models[k]);
        slm_plan *pl = cpu_plan(m, N_CTX, NULL);
        slm_session_params sp = slm_session_params_default();
        sp.n_ctx = N_CTX;
        slm_session *a = NULL, *b = NULL;
        char err[256];
        assert_int_equal(slm_session_create(m, &sp, &a, err, sizeof err), SLM_OK);
        if (slm_session_create_from_plan(m, pl, NULL, &b, err, sizeof err) != SLM_OK) fail_msg("%s: %s", models[k], err);
        slm_plan_destroy(pl); /* the session keeps its own copy */
        int32_t nv = slm_model_n_vocab(m), steps = 6;
        float *la = malloc((size_t)steps * (size_t)nv * sizeof(float)), *lb = malloc((size_t)steps * (size_t)nv * sizeof(float));
        run_steps(a, prompt, N_PROMPT, la, nv, steps);
        run_steps(b, prompt, N_PROMPT, lb, nv, steps);
        if (memcmp(la, lb, (size_t)steps * (size_t)nv * sizeof(float)) != 0) fail_msg("%s: logits differ", models[k]);
        free(la);
        free(lb);
        slm_session_destroy(a);
        slm_session_destroy(b);
        slm_model_destroy(m);
    }
}

static void expect_refused(const slm_model *m, const slm_plan *pl, const slm_session_params *sp, slm_status want,
                           const char *words) {
    slm_session *s = (slm_session *)1;
    char err[256] = "";
    assert_int_equal(slm_session_create_from_plan(m, pl, sp, &s, err, sizeof err), want);
    assert_null(s);
    if (!strstr(err, words)) fail_msg("message '%s' does not say '%s'", err, words);
}

static void plan_refused_elsewhere(void **u) {
    (void)u;
    slm_model *lfm2 = load("tiny/lfm2/lfm2-q8_0.gguf"), *llama = load("tiny/llama/llama-q8_0.gguf");
    slm_plan *pl = cpu_plan(lfm2, N_CTX, NULL);
    expect_refused(llama, pl, NULL, SLM_ERR_INVALID_ARG, "another model");
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = N_CTX + 1;
    expect_refused(lfm2, pl, &sp, SLM_ERR_INVALID_ARG, "context");
    sp.n_ctx = 0;
    sp.kv_type = SLM_KV_F32;
    expect_refused(lfm2, pl, &sp, SLM_ERR_INVALID_ARG, "KV");
    sp.kv_type = SLM_KV_F16;
    sp.kernels = "ref";
    expect_refused(lfm2, pl, &sp, SLM_ERR_INVALID_ARG, "kernels");
    sp.kernels = NULL;
    slm_session *s = NULL;
    char err[256];
    assert_int_equal(slm_session_create_from_plan(lfm2, pl, &sp, &s, err, sizeof err), SLM_OK); /* the same params fit */
    slm_session_destroy(s);
    slm_plan_destroy(pl);
    slm_plan_params pp = slm_plan_params_default();
    pp.target = "ane";
    pp.n_ctx = N_CTX;
    assert_int_equal(slm_plan_create(lfm2, &pp, &pl, err, sizeof err), SLM_OK);
    expect_refused(lfm2, pl, NULL, SLM_ERR_UNSUPPORTED, "ane");
    int32_t prompt[4] = {1, 2, 3, 4};
    assert_int_equal(slm_plan_profile(pl, prompt, 4, 2, 1, 1), SLM_ERR_UNSUPPORTED);
    assert_true(strstr(slm_plan_errmsg(pl), "ane") != NULL);
    slm_plan_destroy(pl);
    slm_model_destroy(llama);
    slm_model_destroy(lfm2);
}

static void profile_measures_every_node(void **u) {
    (void)u;
    slm_model *m = load("tiny/qwen35/qwen35-q8_0.gguf");
    slm_plan *pl = cpu_plan(m, N_CTX, NULL);
    int32_t prompt[N_PROMPT];
    for (int32_t i = 0; i < N_PROMPT; i++) prompt[i] = 1 + i;
    slm_plan_node nd;
    assert_int_equal(slm_plan_node_at(pl, 0, 0, &nd), SLM_OK);
    assert_true(nd.measured_us < 0); /* not measured yet */
    assert_int_equal(slm_plan_profile(pl, prompt, N_PROMPT, 4, 2, 1), SLM_OK);
    for (int32_t fn = 0; fn < slm_plan_n_functions(pl); fn++) {
        double share = 0;
        assert_true(slm_plan_function_measured_us(pl, fn) > 0);
        for (int32_t i = 0; i < slm_plan_n_nodes(pl, fn); i++) {
            assert_int_equal(slm_plan_node_at(pl, fn, i, &nd), SLM_OK);
            if (!(nd.measured_us >= 0) || !(nd.measured_share >= 0)) fail_msg("node %d not measured", i);
            share += nd.measured_share;
        }
        assert_true(share > 0.999 && share < 1.001);
    }
    char *json = NULL;
    assert_int_equal(slm_plan_json(pl, false, &json), SLM_OK);
    assert_non_null(strstr(json, "\"median_us\""));
    assert_non_null(strstr(json, "\"profile\""));
    slm_free(json);
    /* bad input leaves the measurements as they were */
    assert_int_equal(slm_plan_node_at(pl, 1, 3, &nd), SLM_OK);
    double before = nd.measured_us;
    assert_int_equal(slm_plan_profile(pl, prompt, 1, 4, 1, 1), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_profile(pl, prompt, N_PROMPT, N_CTX, 1, 1), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_profile(pl, prompt, N_PROMPT, 4, 0, 1), SLM_ERR_INVALID_ARG);
    assert_true(strlen(slm_plan_errmsg(pl)) > 0);
    assert_int_equal(slm_plan_node_at(pl, 1, 3, &nd), SLM_OK);
    assert_true(nd.measured_us == before);
    slm_plan_destroy(pl);
    slm_model_destroy(m);
}

/* ---- the accept plan ----------------------------------------------------------------------------- */

static int32_t greedy(const float *l, int32_t n) {
    int32_t best = 0;
    for (int32_t j = 1; j < n; j++)
        if (l[j] > l[best]) best = j;
    return best;
}

/* After a verify of K_VERIFY tokens, accept(N_KEEP) runs exactly the plan's accept steps (every
 * one a rebuild: these plans replay nothing), no Program step, in order, each naming the verify
 * node whose operands it reads; the session then continues bit for bit like one that decoded the
 * kept tokens one by one. Models without conv/recurrent states have no steps. */
enum { K_VERIFY = 5, N_KEEP = 2 };

static void accept_runs_the_accept_plan(void **u) {
    (void)u;
    int32_t prompt[N_PROMPT];
    for (int32_t i = 0; i < N_PROMPT; i++) prompt[i] = 3 + 2 * i;
    trace *t = calloc(1, sizeof *t);
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        slm_model *m = load(models[k]);
        slm_plan *pl = cpu_plan(m, N_CTX, NULL);
        int32_t n_steps = slm_plan_n_accept_steps(pl), want_steps = 0;
        slm_session_params sp = slm_session_params_default();
        sp.n_ctx = N_CTX;
        slm_session *s = NULL, *ref = NULL;
        char err[256];
        if (slm_session_create_from_plan(m, pl, &sp, &s, err, sizeof err) != SLM_OK) fail_msg("%s: %s", models[k], err);
        assert_int_equal(slm_session_create(m, &sp, &ref, err, sizeof err), SLM_OK);
        for (int32_t i = 0; i < slm_session_n_states(s); i++) {
            slm_state_info info;
            slm_session_state(s, i, &info);
            want_steps += info.role == SLM_STATE_CONV || info.role == SLM_STATE_RECURRENT;
        }
        if (n_steps != want_steps) fail_msg("%s: %d accept steps for %d conv/recurrent states", models[k], n_steps, want_steps);
        const float *l = NULL, *rows = NULL;
        assert_int_equal(slm_session_prefill(s, prompt, N_PROMPT, &l), SLM_OK);
        assert_int_equal(slm_session_prefill(ref, prompt, N_PROMPT, &l), SLM_OK);
        int32_t nv = slm_model_n_vocab(m), draft[K_VERIFY];
        for (int32_t i = 0; i < K_VERIFY; i++) draft[i] = 1 + 7 * i;
        assert_int_equal(slm_session_verify(s, draft, K_VERIFY, &rows), SLM_OK);
        t->n = 0;
        s->trace = record;
        s->trace_user = t;
        if (slm_session_accept(s, N_KEEP, &l) != SLM_OK) fail_msg("%s: accept: %s", models[k], slm_session_errmsg(s));
        s->trace = NULL;
        if (t->n != n_steps) fail_msg("%s: accept ran %d steps, the plan lists %d", models[k], t->n, n_steps);
        for (int32_t i = 0; i < n_steps; i++) {
            slm_plan_accept_step a;
            assert_int_equal(slm_plan_accept_step_at(pl, i, &a), SLM_OK);
            const visit *v = &t->v[i];
            if (strcmp(a.how, "replay") == 0) fail_msg("%s: state %s replays: %s", models[k], a.state, a.detail);
            if (v->fn != PLAN_FN_ACCEPT || v->step != i || v->n_nodes != 1 || v->nodes[0] != a.node)
                fail_msg("%s: accept step %d (%s %s) differs from what the session ran", models[k], i, a.how, a.state);
        }
        assert_int_equal(s->n_accept_replays, 0);
        const float *lr = NULL;
        for (int32_t i = 0; i < N_KEEP; i++) assert_int_equal(slm_session_decode(ref, draft[i], &lr), SLM_OK);
        for (int32_t step = 0; step < 4; step++) { /* the states carry on exactly */
            if (memcmp(l, lr, (size_t)nv * sizeof(float)) != 0) fail_msg("%s: logits differ %d steps after accept", models[k], step);
            int32_t tok = greedy(l, nv);
            assert_int_equal(slm_session_decode(s, tok, &l), SLM_OK);
            assert_int_equal(slm_session_decode(ref, tok, &lr), SLM_OK);
        }
        slm_session_destroy(s);
        slm_session_destroy(ref);
        slm_plan_destroy(pl);
        slm_model_destroy(m);
    }
    free(t);
}

/* A state the accept plan cannot rebuild (its value comes from an ADD, neither a conv window nor a
 * recurrence) makes the plan replay, says why, and accept replays the kept tokens — counted, and
 * traced as Program steps — giving a decode's logits. Program: x = EMBED(tokens) (4, n); decode and
 * verify write s' = s + SUM(x over the columns) (4, 1) and give logits x + s per column. */
static float w_emb[4 * 6];

static g_program *build_sum_state(void) {
    g_program *p = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(graph_create(&al_default, &p), SLM_OK);
    int64_t sne[4] = {4, 1, 1, 1}, wne[4] = {4, 6, 1, 1};
    int32_t st = graph_add_state(p, "sum", SLM_STATE_RECURRENT, 0, SLM_DTYPE_F32, 2, sne, -1, &e);
    int32_t w = graph_add_weight(p, "emb", SLM_DTYPE_F32, 2, wne, w_emb, sizeof w_emb, &e);
    static const g_affine origin[4] = {{0, false, false, 0}, {0, false, false, 0}, {0, false, false, 0}, {0, false, false, 0}};
    for (int k = 0; k < 2; k++) {
        int32_t fn;
        assert_int_equal(graph_add_function(p, k ? "verify" : "decode", k == 1, 1, &fn, &e), SLM_OK);
        g_builder b;
        gb_init(&b, p, fn, &e);
        b.layer = 0;
        int32_t x = gb_embed(&b, w, gb_tokens(&b));
        int32_t s = gb_state_read(&b, st);
        g_affine ne4[4] = {g_const(4), g_const(1), g_const(1), g_const(1)};
        gb_set_logits(&b, gb_add(&b, x, gb_reshape(&b, gb_scale(&b, s, 1.0f), 1, ne4)));
        gb_state_write(&b, st, gb_add(&b, s, gb_sum(&b, x, 1)), origin);
        if (b.status != SLM_OK) fail_msg("%s", e.msg);
    }
    assert_int_equal(graph_verify(p, &e), SLM_OK);
    return p;
}

static void accept_replay_is_counted(void **u) {
    (void)u;
    for (int i = 0; i < 24; i++) w_emb[i] = 0.25f * (float)(i % 5) - 0.5f + 0.125f * (float)(i / 4);
    slm_err e;
    err_clear(&e);
    slm_session *s = NULL, *ref = NULL;
    if (sess_create_program(NULL, build_sum_state(), 1, 32, SLM_DTYPE_F32, NULL, &s, &e) != SLM_OK) fail_msg("%s", e.msg);
    assert_int_equal(sess_create_program(NULL, build_sum_state(), 1, 32, SLM_DTYPE_F32, NULL, &ref, &e), SLM_OK);
    const slm_plan *pl = s->plan;
    assert_int_equal(slm_plan_n_accept_steps(pl), 1);
    slm_plan_accept_step a;
    assert_int_equal(slm_plan_accept_step_at(pl, 0, &a), SLM_OK);
    assert_string_equal(a.how, "replay");
    assert_int_equal(a.node, -1);
    if (!strstr(a.detail, "ADD")) fail_msg("the replay's reason does not name the op: %s", a.detail);
    char *json = NULL;
    assert_int_equal(slm_plan_json(pl, false, &json), SLM_OK);
    assert_non_null(strstr(json, "\"accept\":{\"function\":\"verify\",\"replays\":true"));
    slm_free(json);
    const float *l = NULL, *lr = NULL;
    assert_int_equal(slm_session_decode(s, 1, &l), SLM_OK);
    assert_int_equal(slm_session_decode(ref, 1, &lr), SLM_OK);
    const int32_t draft[3] = {4, 2, 5};
    assert_int_equal(slm_session_verify(s, draft, 3, NULL), SLM_OK);
    trace *t = calloc(1, sizeof *t);
    s->trace = record;
    s->trace_user = t;
    assert_int_equal(slm_session_accept(s, 1, &l), SLM_OK);
    s->trace = NULL;
    assert_int_equal(s->n_accept_replays, 1);
    assert_true(t->n > 0);
    for (int32_t i = 0; i < t->n; i++) assert_int_equal(t->v[i].fn, s->fn_decode); /* the kept token, decoded */
    assert_int_equal(slm_session_decode(ref, draft[0], &lr), SLM_OK);
    assert_memory_equal(l, lr, 4 * sizeof(float));
    assert_int_equal(slm_session_decode(s, 3, &l), SLM_OK);
    assert_int_equal(slm_session_decode(ref, 3, &lr), SLM_OK);
    assert_memory_equal(l, lr, 4 * sizeof(float));
    free(t);
    slm_session_destroy(s);
    slm_session_destroy(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(executed_nodes_are_the_plan), cmocka_unit_test(fusions_are_plan_nodes),
        cmocka_unit_test(session_from_plan),           cmocka_unit_test(plan_refused_elsewhere),
        cmocka_unit_test(profile_measures_every_node), cmocka_unit_test(accept_runs_the_accept_plan),
        cmocka_unit_test(accept_replay_is_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
