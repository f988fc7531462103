/* test_params.c — the params structs of include/statelm.h as callers pass them: a struct of an
 * older, smaller layout (a prefix type declared here, allocated on the heap at exactly its size so
 * that ASan reports any read past it) gets the defaults for the fields it lacks; a struct zeroed
 * whole (size 0) gives exactly what slm_*_params_default() gives; with size set, fields at 0 mean
 * what the header says (the default, or greedy/off for the sampler's temperature, top_k, min_p). */
#include "testutil.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "statelm.h"

#define N_CTX 48

/* Older layouts: the first fields of today's structs, in their order, each ending where the next
 * field begins (no trailing padding: see src/base/params.h). */
typedef struct sampler_params_v0 {
    size_t size;
    float temperature;
    int32_t top_k;
} sampler_params_v0;
typedef struct session_params_v0 {
    size_t size;
    int32_t n_ctx;
    slm_kv_type kv_type;
} session_params_v0;
typedef struct plan_params_v0 {
    size_t size;
    const char *target;
} plan_params_v0;
typedef struct model_params_v0 {
    size_t size;
    slm_log_fn log_fn;
} model_params_v0;
/* The smallest struct there is: size alone (0 in a zeroed one). */
typedef struct params_v_size {
    size_t size;
} params_v_size;

/* A heap block of exactly n bytes copied from p (ASan catches a read past it). */
static void *exact(const void *p, size_t n) {
    void *q = malloc(n);
    assert_non_null(q);
    memcpy(q, p, n);
    return q;
}

static slm_model *load(const char *rel, const slm_model_params *p) {
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path(rel), p, &m, err, sizeof err) != SLM_OK) fail_msg("load %s: %s", rel, err);
    return m;
}

/* ---- sampler ------------------------------------------------------------------------------- */

/* Logits where the defaults matter: at temperature 0.7, top_k 5 and top_p 0.95, id 1 is inside the
 * top 5 and the top-p mass but below min_p 0.05 of the best; a repeat penalty of 1.3 over the
 * history turns the greedy choice from id 0 to id 2. */
static const float k_logits[8] = {5.0f, 2.7f, 4.5f, 1.0f, 0.5f, -1.0f, 2.7f, 2.7f};
static const int32_t k_history[3] = {0, 1, 6};

static void probs_of(slm_sampler *s, float *probs) {
    assert_int_equal(slm_sampler_probs(s, k_logits, 8, k_history, 3, probs), SLM_OK);
}

static void expect_same_sampler(slm_sampler *a, slm_sampler *b) {
    float pa[8], pb[8];
    probs_of(a, pa);
    probs_of(b, pb);
    assert_memory_equal(pa, pb, sizeof pa);
    for (int i = 0; i < 32; i++) { /* same seed: the same draws */
        int32_t ta = -1, tb = -2;
        assert_int_equal(slm_sampler_sample(a, k_logits, 8, k_history, 3, &ta), SLM_OK);
        assert_int_equal(slm_sampler_sample(b, k_logits, 8, k_history, 3, &tb), SLM_OK);
        assert_int_equal(ta, tb);
    }
}

static slm_sampler *sampler(const void *params) {
    slm_sampler *s = NULL;
    assert_int_equal(slm_sampler_create(params, &s), SLM_OK);
    return s;
}

static void sampler_old_layout(void **unused) {
    (void)unused;
    static_assert(sizeof(sampler_params_v0) == offsetof(slm_sampler_params, top_p), "a prefix");
    sampler_params_v0 v0 = {sizeof v0, 0.7f, 5};
    sampler_params_v0 *old = exact(&v0, sizeof v0);
    slm_sampler_params want = slm_sampler_params_default();
    want.temperature = 0.7f;
    want.top_k = 5;
    slm_sampler *a = sampler(old), *b = sampler(&want);
    expect_same_sampler(a, b);
    /* the comparison can fail: without the default min_p the distribution differs */
    want.min_p = 0.0f;
    slm_sampler *c = sampler(&want);
    float pa[8], pc[8];
    probs_of(a, pa);
    probs_of(c, pc);
    assert_true(pa[1] == 0.0f && pc[1] > 0.0f);
    slm_sampler_destroy(a);
    slm_sampler_destroy(b);
    slm_sampler_destroy(c);
    free(old);
}

static void sampler_zeroed(void **unused) {
    (void)unused;
    slm_sampler_params zero;
    memset(&zero, 0, sizeof zero);
    slm_sampler *d = sampler(&zero);
    slm_sampler_params def = slm_sampler_params_default();
    slm_sampler *e = sampler(&def);
    expect_same_sampler(d, e); /* zeroed whole: every default */
    slm_sampler_destroy(d);
    slm_sampler_destroy(e);
    params_v_size z = {0};
    params_v_size *small = exact(&z, sizeof z); /* size 0 in the smallest block: nothing read past size */
    d = sampler(small);
    e = sampler(&def);
    expect_same_sampler(d, e);
    slm_sampler_destroy(d);
    slm_sampler_destroy(e);
    free(small);
    /* size set, the rest 0: greedy; top_p, repeat_penalty and repeat_last_n at 0 take their defaults */
    slm_sampler_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    slm_sampler_params want = def;
    want.temperature = 0.0f;
    want.top_k = 0;
    want.min_p = 0.0f;
    want.repeat_penalty = 1.3f; /* so that the default window (64) is what the penalty sees */
    p.repeat_penalty = 1.3f;
    d = sampler(&p);
    e = sampler(&want);
    expect_same_sampler(d, e);
    float probs[8];
    probs_of(d, probs);
    assert_true(probs[2] == 1.0f); /* greedy: one-hot on the best id after the penalty over 64 tokens */
    slm_sampler_destroy(d);
    slm_sampler_destroy(e);
}

/* ---- sessions ------------------------------------------------------------------------------ */

static slm_session *session(const slm_model *m, const void *params) {
    slm_session *s = NULL;
    char err[512];
    if (slm_session_create(m, params, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
    return s;
}

/* The dtype of the first KV state of s. */
static slm_dtype kv_dtype(const slm_session *s) {
    for (int32_t i = 0; i < slm_session_n_states(s); i++) {
        slm_state_info info;
        assert_int_equal(slm_session_state(s, i, &info), SLM_OK);
        if (info.role == SLM_STATE_KV_KEY) return info.dtype;
    }
    fail_msg("no KV state");
    return SLM_DTYPE_COUNT;
}

static void expect_session(const slm_session *s, int32_t n_ctx, slm_dtype kv, const slm_session *like) {
    assert_int_equal(slm_session_n_ctx(s), n_ctx);
    assert_int_equal(kv_dtype(s), kv);
    assert_string_equal(slm_session_kernels(s), slm_session_kernels(like));
}

static void session_params(void **unused) {
    (void)unused;
    slm_model *m = load("tiny/llama/llama-f32.gguf", NULL);
    slm_session_params def = slm_session_params_default();
    slm_session *ref = session(m, &def);
    int32_t n_ctx = slm_model_n_ctx_default(m);
    expect_session(ref, n_ctx, SLM_DTYPE_F16, ref);
    /* zeroed whole, and size set with the rest 0: the defaults (f16 KV, not f32) */
    slm_session_params z;
    memset(&z, 0, sizeof z);
    slm_session *s = session(m, &z);
    expect_session(s, n_ctx, SLM_DTYPE_F16, ref);
    slm_session_destroy(s);
    z.size = sizeof z;
    s = session(m, &z);
    expect_session(s, n_ctx, SLM_DTYPE_F16, ref);
    slm_session_destroy(s);
    params_v_size zs = {0};
    params_v_size *small = exact(&zs, sizeof zs);
    s = session(m, small);
    expect_session(s, n_ctx, SLM_DTYPE_F16, ref);
    slm_session_destroy(s);
    free(small);
    /* an older struct: its n_ctx, defaults for the rest */
    static_assert(sizeof(session_params_v0) == offsetof(slm_session_params, n_threads), "a prefix");
    session_params_v0 v0 = {sizeof v0, N_CTX, SLM_KV_DEFAULT};
    session_params_v0 *old = exact(&v0, sizeof v0);
    s = session(m, old);
    expect_session(s, N_CTX, SLM_DTYPE_F16, ref);
    slm_session_destroy(s);
    free(old);
    /* the KV types, and one that names none */
    def.n_ctx = N_CTX;
    def.kv_type = SLM_KV_F32;
    s = session(m, &def);
    expect_session(s, N_CTX, SLM_DTYPE_F32, ref);
    slm_session_destroy(s);
    def.kv_type = SLM_KV_F16;
    s = session(m, &def);
    expect_session(s, N_CTX, SLM_DTYPE_F16, ref);
    slm_session_destroy(s);
    def.kv_type = (slm_kv_type)9;
    char err[256];
    assert_int_equal(slm_session_create(m, &def, &s, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(s);
    assert_non_null(strstr(err, "kv_type 9"));
    def.kv_type = SLM_KV_DEFAULT;
    def.kv_type_v = (slm_kv_type)-1;
    assert_int_equal(slm_session_create(m, &def, &s, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "kv_type_v -1"));
    /* quantised caches need a head dimension that is a multiple of 32 (this model's is 16) */
    def.kv_type_v = SLM_KV_DEFAULT;
    def.kv_type_k = SLM_KV_Q8_0;
    assert_int_equal(slm_session_create(m, &def, &s, err, sizeof err), SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "a quantised K cache needs a head dimension that is a multiple of 32"));
    def.kv_type_k = SLM_KV_DEFAULT;
    /* the struct before kv_type_k/_v, its trailing padding holding junk: those fields are not read */
    size_t old_size = offsetof(slm_session_params, kv_type_k);
    uint8_t *old_full = malloc(old_size);
    memcpy(old_full, &def, old_size);
    memset(old_full + offsetof(slm_session_params, mtp) + 1, 0xA5, old_size - offsetof(slm_session_params, mtp) - 1);
    memcpy(old_full, &old_size, sizeof old_size);
    s = session(m, old_full);
    expect_session(s, N_CTX, SLM_DTYPE_F16, ref);
    slm_session_destroy(s);
    free(old_full);
    slm_session_destroy(ref);
    slm_model_destroy(m);
}

/* ---- plans --------------------------------------------------------------------------------- */

static char *plan_json(const slm_model *m, const void *params) {
    slm_plan *pl = NULL;
    char err[512], *json = NULL;
    if (slm_plan_create(m, params, &pl, err, sizeof err) != SLM_OK) fail_msg("plan: %s", err);
    assert_int_equal(slm_plan_json(pl, false, &json), SLM_OK);
    slm_plan_destroy(pl);
    return json;
}

static void plan_params(void **unused) {
    (void)unused;
    slm_model *m = load("tiny/llama/llama-f32.gguf", NULL);
    slm_plan_params def = slm_plan_params_default();
    char *want = plan_json(m, &def);
    assert_non_null(strstr(want, "\"f16\""));
    slm_plan_params z;
    memset(&z, 0, sizeof z);
    char *got = plan_json(m, &z);
    assert_string_equal(got, want);
    slm_free(got);
    z.size = sizeof z;
    got = plan_json(m, &z);
    assert_string_equal(got, want);
    slm_free(got);
    /* an older struct naming the target: the rest as the defaults */
    static_assert(sizeof(plan_params_v0) == offsetof(slm_plan_params, n_ctx), "a prefix");
    plan_params_v0 v0 = {sizeof v0, "ane"};
    plan_params_v0 *old = exact(&v0, sizeof v0);
    def.target = "ane";
    char *want_ane = plan_json(m, &def);
    got = plan_json(m, old);
    assert_string_equal(got, want_ane);
    assert_string_not_equal(got, want); /* the target field was read */
    slm_free(got);
    free(old);
    /* a session from a plan: KV type 0 takes the plan's, another is refused */
    def.target = NULL;
    def.n_ctx = N_CTX;
    def.kv_type = SLM_KV_F32;
    slm_plan *pl = NULL;
    assert_int_equal(slm_plan_create(m, &def, &pl, NULL, 0), SLM_OK);
    slm_session_params sp = slm_session_params_default();
    slm_session *s = NULL;
    assert_int_equal(slm_session_create_from_plan(m, pl, &sp, &s, NULL, 0), SLM_OK);
    assert_int_equal(kv_dtype(s), SLM_DTYPE_F32);
    slm_session_destroy(s);
    sp.kv_type = SLM_KV_F16;
    assert_int_equal(slm_session_create_from_plan(m, pl, &sp, &s, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_null(s);
    slm_plan_destroy(pl);
    slm_free(want_ane);
    slm_free(want);
    slm_model_destroy(m);
}

/* ---- speculation, models, export ----------------------------------------------------------- */

typedef struct drafter {
    size_t n_max_seen;
} drafter;

static size_t draft_zeros(void *ud, const int32_t *history, size_t n_history, int32_t *draft, size_t n_max) {
    (void)history;
    (void)n_history;
    ((drafter *)ud)->n_max_seen = n_max;
    for (size_t i = 0; i < n_max; i++) draft[i] = 0;
    return n_max;
}

static void spec_params(void **unused) {
    (void)unused;
    slm_model *m = load("tiny/llama/llama-f32.gguf", NULL);
    slm_session_params spp = slm_session_params_default();
    spp.n_ctx = 64;
    slm_session *s = session(m, &spp);
    const int32_t prompt[4] = {1, 5, 9, 5};
    assert_int_equal(slm_session_prefill(s, prompt, 4, NULL), SLM_OK);
    /* size set, the rest 0 but a fixed drafter: draft_max 0 and verify_cost 0 are the defaults */
    drafter d = {0};
    slm_spec_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.fixed = true;
    p.draft_fn = draft_zeros;
    p.draft_user_data = &d;
    slm_spec *sp = NULL;
    char err[256];
    if (slm_spec_create(s, &p, &sp, err, sizeof err) != SLM_OK) fail_msg("spec: %s", err);
    int32_t out[16];
    size_t n = 0;
    assert_int_equal(slm_spec_step(sp, 16, out, &n), SLM_OK);
    assert_int_equal(d.n_max_seen, (size_t)slm_spec_params_default().draft_max);
    slm_spec_destroy(sp);
    /* zeroed whole, in the smallest block */
    params_v_size zs = {0};
    params_v_size *small = exact(&zs, sizeof zs);
    assert_int_equal(slm_spec_create(s, (const slm_spec_params *)small, &sp, err, sizeof err), SLM_OK);
    assert_int_equal(slm_spec_step(sp, 4, out, &n), SLM_OK);
    slm_spec_destroy(sp);
    free(small);
    slm_session_destroy(s);
    slm_model_destroy(m);
}

static void model_and_export_params(void **unused) {
    (void)unused;
    static_assert(sizeof(model_params_v0) == offsetof(slm_model_params, log_user_data), "a prefix");
    model_params_v0 v0 = {sizeof v0, NULL};
    model_params_v0 *old = exact(&v0, sizeof v0);
    slm_model *m = load("tiny/llama/llama-f32.gguf", (const slm_model_params *)old);
    free(old);
    params_v_size zs = {0};
    params_v_size *small = exact(&zs, sizeof zs);
    slm_model *m0 = load("tiny/llama/llama-f32.gguf", (const slm_model_params *)small);
    slm_model_destroy(m0);
    /* export: weights 0 (f32's id, not an export format) means the default, f16 */
    slm_plan_params pp = slm_plan_params_default();
    pp.target = "ane";
    slm_plan *pl = NULL;
    assert_int_equal(slm_plan_create(m, &pp, &pl, NULL, 0), SLM_OK);
    if (slm_export_available(NULL, NULL)) {
        slm_export_params ep;
        memset(&ep, 0, sizeof ep);
        ep.size = sizeof ep;
        ep.dry_run = true;
        if (slm_plan_export(pl, "never-written.mlpackage", &ep) != SLM_OK) fail_msg("export: %s", slm_plan_errmsg(pl));
        assert_false(tu_file_exists("never-written.mlpackage"));
        ep.weights = SLM_DTYPE_Q5_0;
        assert_int_equal(slm_plan_export(pl, "never-written.mlpackage", &ep), SLM_ERR_UNSUPPORTED);
        assert_non_null(strstr(slm_plan_errmsg(pl), "q5_0"));
    }
    /* size 0 in the smallest block: read nothing past it, and export's defaults (not a dry run:
     * refused here for the path, before anything is written) */
    assert_int_not_equal(slm_plan_export(pl, "", (const slm_export_params *)small), SLM_OK);
    free(small);
    slm_plan_destroy(pl);
    slm_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sampler_old_layout), cmocka_unit_test(sampler_zeroed),  cmocka_unit_test(session_params),
        cmocka_unit_test(plan_params),        cmocka_unit_test(spec_params),
        cmocka_unit_test(model_and_export_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
