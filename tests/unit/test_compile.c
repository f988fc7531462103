/* test_compile.c — compile/: target profiles, check, legalize, place and the compute plan, with
 * the field reports (docs/architecture.md, "Why it exists") as programs built by the IR builder:
 *   (a) report 2's module: a [1,16,8] buffer state scaled in place in a slice, then overwritten by
 *       a slice copy of itself plus the input; returns the sum over the middle axis plus the input.
 *       It runs correctly with the state bound (expected values by hand), and `check --target ane`
 *       flags both slice writes with their rules and fixes;
 *   (b) report 3: a decode function writing the full extent of a 256-row state: rejected by ane;
 *       legalised to 257 rows with the window kept at [0,256); outputs identical over 64 steps;
 *   (c) report 3: two writes into one state (a read in between): reported, merged, identical;
 *   (d) report 3: a write at a data-dependent begin (prefill and decode): reported, rewritten to a
 *       static masked write, identical;
 *   (e) reports 1–2 on real model graphs: LFM2's conv-state and Qwen3.5's recurrent updates on the
 *       committed tiny models (and the full-size random models when present): reported by
 *       `check --target ane`, legalised, greedy tokens identical over 64 steps.
 * "Identical" compares the legalised program with the original program it came from, never with
 * the plan's own claims; (a)'s values come from hand computation. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend/cpu/cpu.h"
#include "base/half.h"
#include "compile/plan.h"
#include "runtime/session.h"
#include "statelm.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

/* Weight storage for the synthetic programs (distinct pointers: weights dedupe by pointer). */
static float w_emb[32 * 32], w_out[32 * 32], w_big[2560 * 32], w_a[8 * 4];

static void fill(float *w, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) w[i] = scale * frand();
}

static int32_t weight(g_program *p, const char *name, float *data, int64_t ne0, int64_t ne1) {
    int64_t ne[4] = {ne0, ne1, 1, 1};
    slm_err e;
    err_clear(&e);
    int32_t t = graph_add_weight(p, name, SLM_DTYPE_F32, 2, ne, data, (uint64_t)(ne0 * ne1 * 4), &e);
    assert_true(t >= 0);
    return t;
}

static g_program *new_program(void) {
    g_program *p = NULL;
    assert_int_equal(graph_create(&al_default, &p), SLM_OK);
    return p;
}

static const g_affine origin[4] = {{0, false, false, 0}, {0, false, false, 0}, {0, false, false, 0}, {0, false, false, 0}};

static slm_plan *make_plan(g_program *p, const char *target, int32_t n_ctx) {
    slm_err e;
    err_clear(&e);
    slm_plan *pl = NULL;
    slm_status st = plan_create_program(NULL, p, tgt_find(target), n_ctx, SLM_DTYPE_F16, 0, NULL, &pl, &e);
    if (st) fprintf(stderr, "plan: %s\n", e.msg);
    assert_int_equal(st, SLM_OK);
    return pl;
}

/* Findings of pl on nodes (fn >= 0) that are not op-table fallbacks. */
static int32_t n_rule_findings(const plan_findings *fs, const char *rule) {
    int32_t n = 0;
    for (int32_t i = 0; i < fs->n; i++) n += !strcmp(fs->v[i].rule, rule);
    return n;
}

/* Every node off the target's device carries a reason (plan.h invariant 3). */
static void assert_placement_honest(const slm_plan *pl) {
    for (int32_t fn = 0; fn < slm_plan_n_functions(pl); fn++)
        for (int32_t i = 0; i < slm_plan_n_nodes(pl, fn); i++) {
            slm_plan_node nd;
            assert_int_equal(slm_plan_node_at(pl, fn, i, &nd), SLM_OK);
            assert_non_null(nd.device);
            if (strcmp(nd.device, slm_plan_device(pl)) != 0) assert_true(strlen(nd.reason) > 0);
            else assert_string_equal(nd.reason, "");
            assert_true(nd.cost_share >= 0.0 && nd.cost_share <= 1.0);
        }
}

/* Runs orig and legal of pl on the same tokens (one per decode step) and asserts that every
 * logit matches bit for bit. */
static void assert_runs_identical(slm_plan *pl, const int32_t *tokens, int32_t n_steps) {
    slm_err e;
    err_clear(&e);
    slm_session *a = NULL, *b = NULL;
    assert_int_equal(sess_create_program(NULL, graph_clone(pl->orig), 1, pl->n_ctx, SLM_DTYPE_F16, NULL, &a, &e), SLM_OK);
    assert_int_equal(sess_create_program(NULL, graph_clone(pl->legal), 2, pl->n_ctx, SLM_DTYPE_F16, NULL, &b, &e), SLM_OK);
    for (int32_t i = 0; i < n_steps; i++) {
        const float *la = NULL, *lb = NULL;
        assert_int_equal(slm_session_decode(a, tokens[i], &la), SLM_OK);
        assert_int_equal(slm_session_decode(b, tokens[i], &lb), SLM_OK);
        assert_memory_equal(la, lb, (size_t)a->n_vocab * sizeof(float));
    }
    slm_session_destroy(a);
    slm_session_destroy(b);
}

/* ---- profiles ----------------------------------------------------------------------------------- */

static void profiles_are_complete(void **unused) {
    (void)unused;
    assert_int_equal(tgt_count(), 3);
    assert_non_null(tgt_find("cpu"));
    assert_non_null(tgt_find("cuda"));
    assert_non_null(tgt_find("ane"));
    assert_null(tgt_find("tpu"));
    for (int32_t i = 0; i < tgt_count(); i++) {
        const tgt_profile *t = tgt_at(i);
        /* every op has a row for f32 operands; a rule in every row */
        for (int op = 0; op < G_OP_COUNT; op++) {
            const tgt_op_rule *r = tgt_op_lookup(t, (g_op)op, SLM_DTYPE_F16);
            assert_non_null(r);
            assert_true(strlen(r->why) > 0);
        }
        for (int32_t k = 0; k < t->n_rules; k++) assert_true(strlen(t->rules[k].text) > 0 && strlen(t->rules[k].source) > 0);
    }
    /* cpu: exactly what the reference backend implements, for weights of every type */
    const tgt_profile *cpu = tgt_find("cpu");
    for (int op = 0; op < G_OP_COUNT; op++) {
        const tgt_op_rule *r = tgt_op_lookup(cpu, (g_op)op, SLM_DTYPE_F16);
        assert_int_equal(r->effect == TGT_OK, cpu_ref_kernels[op] != NULL);
    }
    assert_int_equal(tgt_op_lookup(cpu, G_OP_MATMUL, SLM_DTYPE_Q4_K)->effect, TGT_OK);
    assert_null(tgt_op_lookup(cpu, G_OP_STATE_WRITE, SLM_DTYPE_Q4_K)); /* no quantised states */
    /* cuda: nothing yet, and the reason says so */
    const tgt_op_rule *r = tgt_op_lookup(tgt_find("cuda"), G_OP_MATMUL, SLM_DTYPE_Q8_0);
    assert_int_equal(r->effect, TGT_FALLBACK);
    assert_non_null(strstr(r->why, "CUDA"));
    /* ane: k-quants have no Core ML form; q4_0 does; the one-hot position mask runs on the CPU */
    const tgt_profile *ane = tgt_find("ane");
    assert_int_equal(tgt_op_lookup(ane, G_OP_MATMUL, SLM_DTYPE_Q4_0)->effect, TGT_OK);
    assert_int_equal(tgt_op_lookup(ane, G_OP_MATMUL, SLM_DTYPE_Q4_K)->effect, TGT_FALLBACK);
    assert_int_equal(tgt_op_lookup(ane, G_OP_ONEHOT, SLM_DTYPE_F32)->effect, TGT_FALLBACK);
    assert_int_equal(tgt_rule(ane, TGT_WRITE_FULL_EXTENT)->effect, TGT_REJECT);
    assert_int_equal(tgt_rule(ane, TGT_WRITE_ONE_PER_FN)->effect, TGT_FALLBACK);
    assert_int_equal(tgt_rule(ane, TGT_WRITE_STATIC_BEGIN)->effect, TGT_FALLBACK);
    assert_int_equal(tgt_rule(ane, TGT_STATE_ALIGN)->multiple, 32);
    assert_int_equal(tgt_rule(ane, TGT_STATE_DTYPE)->cast_to, SLM_DTYPE_F16);
    assert_non_null(tgt_rule(ane, TGT_WRITE_DECLARED));
}

/* ---- new ops: SUM, SELECT, ONEHOT, MATMUL_T, ROUND against hand-computed values ------------------- */

static void run_node(g_node *nd, be_view *out, be_view *in, int64_t n, int64_t pos) {
    backend *be = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(cpu_backend_create(&al_default, 2, NULL, &be, &e), SLM_OK);
    be_call call = {.n = n, .pos = pos};
    assert_int_equal(be->vt->exec(be, nd, out, in, &call, &e), SLM_OK);
    be->vt->destroy(be);
}

static void new_op_kernels(void **unused) {
    (void)unused;
    g_node nd;
    /* SUM over axis 1 of (3, 2, 2): out[i, 0, k] = x[i,0,k] + x[i,1,k] */
    float x[12], y[6];
    for (int i = 0; i < 12; i++) x[i] = (float)i;
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_SUM;
    nd.p.reduce.axis = 1;
    be_view in[3] = {{SLM_DTYPE_F32, 3, {3, 2, 2, 1}, x}};
    be_view out = {SLM_DTYPE_F32, 3, {3, 1, 2, 1}, y};
    run_node(&nd, &out, in, 1, 0);
    const float sum_want[6] = {0 + 3, 1 + 4, 2 + 5, 6 + 9, 7 + 10, 8 + 11};
    assert_memory_equal(y, sum_want, sizeof sum_want);
    /* ONEHOT (5, n=2) at pos 2, begin pos+1: rows 3 and 4 */
    float oh[10];
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_ONEHOT;
    nd.p.onehot.begin = g_pos_plus(1);
    be_view o2 = {SLM_DTYPE_F32, 2, {5, 2, 1, 1}, oh};
    run_node(&nd, &o2, in, 2, 2);
    const float oh_want[10] = {0, 0, 0, 1, 0, 0, 0, 0, 0, 1};
    assert_memory_equal(oh, oh_want, sizeof oh_want);
    /* MATMUL_T: (2, 5) <- x (2, 2), onehot (5, 2): column j of the result is x column t where oh[j,t] */
    float v[4] = {1.5f, -2.0f, 3.25f, 4.0f}, placed[10];
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_MATMUL_T;
    be_view in2[2] = {{SLM_DTYPE_F32, 2, {2, 2, 1, 1}, v}, {SLM_DTYPE_F32, 2, {5, 2, 1, 1}, oh}};
    be_view o3 = {SLM_DTYPE_F32, 2, {2, 5, 1, 1}, placed};
    run_node(&nd, &o3, in2, 2, 2);
    const float placed_want[10] = {0, 0, 0, 0, 0, 0, 1.5f, -2.0f, 3.25f, 4.0f};
    assert_memory_equal(placed, placed_want, sizeof placed_want);
    /* SELECT with broadcasting: c (1, 3), a (2, 1), b (2, 3) f16 */
    float c[3] = {1, 0, 2}, a[2] = {10, 20}, sel[6];
    uint16_t b16[6];
    for (int i = 0; i < 6; i++) b16[i] = f32_to_f16((float)-i);
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_SELECT;
    be_view in3[3] = {{SLM_DTYPE_F32, 2, {1, 3, 1, 1}, c}, {SLM_DTYPE_F32, 2, {2, 1, 1, 1}, a},
                      {SLM_DTYPE_F16, 2, {2, 3, 1, 1}, b16}};
    be_view o4 = {SLM_DTYPE_F32, 2, {2, 3, 1, 1}, sel};
    run_node(&nd, &o4, in3, 1, 0);
    const float sel_want[6] = {10, 20, -2, -3, 10, 20};
    assert_memory_equal(sel, sel_want, sizeof sel_want);
    /* ROUND to f16: 1 + 2^-12 rounds to 1; 1 + 2^-10 is exact */
    float r_in[2] = {1.0f + 1.0f / 4096.0f, 1.0f + 1.0f / 1024.0f}, r_out[2];
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_ROUND;
    nd.p.round.dtype = SLM_DTYPE_F16;
    be_view in4[1] = {{SLM_DTYPE_F32, 1, {2, 1, 1, 1}, r_in}};
    be_view o5 = {SLM_DTYPE_F32, 1, {2, 1, 1, 1}, r_out};
    run_node(&nd, &o5, in4, 1, 0);
    assert_true(r_out[0] == 1.0f && r_out[1] == r_in[1]);
}

/* DELTANET given its state as an f16 view computes exactly what it computes from the same values in
 * f32 (the reference kernel used to read any state as f32; legalisation's f16 cast exposed it). */
static void deltanet_reads_f16_state(void **unused) {
    (void)unused;
    enum { dk = 4, dv = 3, H = 2, T = 3 };
    float q[dk * H * T], k[dk * H * T], v[dv * H * T], g[H * T], beta[H * T], s32[dv * dk * H];
    uint16_t s16[dv * dk * H];
    float o_a[dv * H * T], o_b[dv * H * T], sn_a[dv * dk * H], sn_b[dv * dk * H];
    for (int i = 0; i < dk * H * T; i++) q[i] = frand(), k[i] = frand();
    for (int i = 0; i < dv * H * T; i++) v[i] = frand();
    for (int i = 0; i < H * T; i++) g[i] = -0.1f * (1.0f + frand()), beta[i] = 0.5f + 0.4f * frand();
    for (int i = 0; i < dv * dk * H; i++) {
        s16[i] = f32_to_f16(frand());
        s32[i] = f16_to_f32(s16[i]);
    }
    g_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = G_OP_DELTANET;
    nd.n_in = 6;
    nd.n_out = 2;
    for (int f16 = 0; f16 < 2; f16++) {
        be_view in[6] = {{SLM_DTYPE_F32, 3, {dk, H, T, 1}, q}, {SLM_DTYPE_F32, 3, {dk, H, T, 1}, k},
                         {SLM_DTYPE_F32, 3, {dv, H, T, 1}, v}, {SLM_DTYPE_F32, 2, {H, T, 1, 1}, g},
                         {SLM_DTYPE_F32, 2, {H, T, 1, 1}, beta},
                         {f16 ? SLM_DTYPE_F16 : SLM_DTYPE_F32, 3, {dv, dk, H, 1}, f16 ? (void *)s16 : (void *)s32}};
        be_view out[2] = {{SLM_DTYPE_F32, 3, {dv, H, T, 1}, f16 ? o_b : o_a}, {SLM_DTYPE_F32, 3, {dv, dk, H, 1}, f16 ? sn_b : sn_a}};
        backend *be = NULL;
        slm_err e;
        err_clear(&e);
        assert_int_equal(cpu_backend_create(&al_default, 1, NULL, &be, &e), SLM_OK);
        assert_int_equal(be->vt->reserve_scratch(be, be->vt->scratch_bytes(be, &nd, out, in), &e), SLM_OK);
        be_call call = {.n = T, .pos = 0};
        assert_int_equal(be->vt->exec(be, &nd, out, in, &call, &e), SLM_OK);
        be->vt->destroy(be);
    }
    assert_memory_equal(o_a, o_b, sizeof o_a);
    assert_memory_equal(sn_a, sn_b, sizeof sn_a);
}

/* ---- (a) field report 2 ------------------------------------------------------------------------- */

/* cache (8, 16, 1) in ggml order = torch [1, 16, 8]; x = row `token` of a (8, 4) table.
 *   cache[:1].mul_(0.9); cache[:1].copy_(cache[:1] + x.unsqueeze(1)); return cache.sum(1) + x */
static g_program *build_report2(int32_t *writes) {
    g_program *p = new_program();
    slm_err e;
    err_clear(&e);
    int32_t fn;
    assert_int_equal(graph_add_function(p, "decode", false, 1, &fn, &e), SLM_OK);
    int64_t sne[4] = {8, 16, 1, 1};
    int32_t s = graph_add_state(p, "cache", SLM_STATE_RECURRENT, 0, SLM_DTYPE_F32, 3, sne, -1, &e);
    g_builder b;
    gb_init(&b, p, fn, &e);
    b.layer = 0;
    int32_t x = gb_embed(&b, weight(p, "x_table", w_a, 8, 4), gb_tokens(&b));              /* (8, n) */
    g_affine ne8[4] = {g_const(8), g_const(1), g_const(1), g_const(1)};
    int32_t x1 = gb_reshape(&b, gb_slice(&b, x, 1, g_const(0), g_const(1)), 1, ne8);        /* (8) */
    int32_t a = gb_slice(&b, gb_state_read(&b, s), 2, g_const(0), g_const(1));              /* cache[:1] */
    gb_state_write(&b, s, gb_scale(&b, a, 0.9f), origin);                                    /* .mul_(0.9) */
    writes[0] = p->nodes[p->n_nodes - 1].op == G_OP_STATE_WRITE ? p->functions[fn].n_nodes - 1 : -1;
    int32_t c = gb_slice(&b, gb_state_read(&b, s), 2, g_const(0), g_const(1));
    gb_state_write(&b, s, gb_add(&b, c, x1), origin);                                         /* .copy_(... + x) */
    writes[1] = p->functions[fn].n_nodes - 1;
    g_affine ne81[4] = {g_const(8), g_const(1), g_const(1), g_const(1)};
    int32_t sum = gb_reshape(&b, gb_sum(&b, gb_state_read(&b, s), 1), 2, ne81);             /* cache.sum(1) */
    gb_set_logits(&b, gb_add(&b, sum, x1));
    assert_int_equal(b.status, SLM_OK);
    assert_int_equal(graph_verify(p, &e), SLM_OK);
    return p;
}

static void report2_slice_mutation(void **unused) {
    (void)unused;
    for (int i = 0; i < 32; i++) w_a[i] = 0.25f * (float)(i % 8 + 1) * (i / 8 % 2 ? -1.0f : 1.0f) + 0.125f * (float)(i / 8);
    int32_t writes[2];
    g_program *p = build_report2(writes);
    assert_true(writes[0] >= 0 && writes[1] > writes[0]);
    /* runs correctly with the state bound: values by hand */
    slm_err e;
    err_clear(&e);
    slm_session *s = NULL;
    assert_int_equal(sess_create_program(NULL, graph_clone(p), 1, 64, SLM_DTYPE_F16, NULL, &s, &e), SLM_OK);
    const int32_t toks[3] = {1, 2, 3};
    double cache[8] = {0};
    for (int step = 0; step < 3; step++) {
        const float *y = NULL;
        assert_int_equal(slm_session_decode(s, toks[step], &y), SLM_OK);
        const float *x = w_a + 8 * toks[step];
        for (int i = 0; i < 8; i++) {
            cache[i] = 0.9 * cache[i] + x[i]; /* every one of the 16 rows holds the same value */
            double want = 16.0 * cache[i] + x[i];
            assert_true(fabs(y[i] - want) <= 1e-5 * fabs(want) + 1e-6);
        }
    }
    slm_session_destroy(s);
    /* check --target ane flags both slice writes with their rules and fixes */
    slm_plan *pl = make_plan(p, "ane", 64);
    int32_t n_node_findings = 0;
    bool merged_fix = false, full = false;
    for (int32_t i = 0; i < pl->findings.n; i++) {
        const plan_finding *f = &pl->findings.v[i];
        if (f->fn < 0) continue;
        n_node_findings++;
        assert_int_equal(f->op, G_OP_STATE_WRITE);
        assert_true(f->index == writes[0] || f->index == writes[1]);
        assert_true(f->fixed);
        if (!strcmp(f->rule, "ane.write.one_per_function")) merged_fix |= strstr(f->fix, "merge the 2 writes") != NULL;
        full |= !strcmp(f->rule, "ane.write.full_extent"); /* [:1] of a size-1 axis is the whole buffer */
    }
    assert_int_equal(n_rule_findings(&pl->findings, "ane.write.one_per_function"), 2);
    assert_int_equal(n_rule_findings(&pl->findings, "ane.write.full_extent"), 2);
    assert_int_equal(n_node_findings, 4);
    assert_true(merged_fix && full);
    /* the state itself: f32 (cast) and 8 wide (align to 32) */
    assert_int_equal(n_rule_findings(&pl->findings, "ane.state.dtype"), 1);
    assert_int_equal(n_rule_findings(&pl->findings, "ane.state.align"), 1);
    /* legalised: one write, state f16 (32, 16, 2); no state rule broken; outputs within f16 rounding */
    int32_t n_writes = 0;
    for (int32_t i = 0; i < pl->legal->n_nodes; i++) n_writes += pl->legal->nodes[i].op == G_OP_STATE_WRITE;
    assert_int_equal(n_writes, 1);
    const g_state *ls = &pl->legal->states[0];
    assert_int_equal(ls->dtype, SLM_DTYPE_F16);
    assert_int_equal(ls->alloc_ne[0], 32);
    assert_int_equal(ls->alloc_ne[2], 2);
    assert_int_equal(pl->residual.n, 0);
    assert_placement_honest(pl);
    slm_session *lo = NULL, *ll = NULL;
    assert_int_equal(sess_create_program(NULL, graph_clone(pl->orig), 1, 64, SLM_DTYPE_F16, NULL, &lo, &e), SLM_OK);
    assert_int_equal(sess_create_program(NULL, graph_clone(pl->legal), 1, 64, SLM_DTYPE_F16, NULL, &ll, &e), SLM_OK);
    for (int step = 0; step < 8; step++) {
        const float *ya = NULL, *yb = NULL;
        assert_int_equal(slm_session_decode(lo, step % 4, &ya), SLM_OK);
        assert_int_equal(slm_session_decode(ll, step % 4, &yb), SLM_OK);
        assert_true(tu_max_rel_err(yb, ya, 8) < 4e-3);
    }
    slm_session_destroy(lo);
    slm_session_destroy(ll);
    slm_plan_destroy(pl);
    /* the cpu target has no rule this program breaks */
    int32_t w2[2];
    pl = make_plan(build_report2(w2), "cpu", 64);
    assert_int_equal(pl->findings.n, 0);
    assert_int_equal(pl->rewrites.n, 0);
    slm_plan_destroy(pl);
}

/* ---- (b) full-extent write ----------------------------------------------------------------------- */

/* A sliding window of the last 256 inputs (32, 256), written whole by decode; logits = W (sum of
 * the window + x). */
static g_program *build_full_extent(void) {
    g_program *p = new_program();
    slm_err e;
    err_clear(&e);
    int32_t fn;
    assert_int_equal(graph_add_function(p, "decode", false, 1, &fn, &e), SLM_OK);
    int64_t sne[4] = {32, 256, 1, 1};
    int32_t s = graph_add_state(p, "window", SLM_STATE_CONV, 0, SLM_DTYPE_F16, 2, sne, 1, &e);
    g_builder b;
    gb_init(&b, p, fn, &e);
    b.layer = 0;
    int32_t x1 = gb_slice(&b, gb_embed(&b, weight(p, "emb", w_emb, 32, 32), gb_tokens(&b)), 1, g_const(0), g_const(1));
    int32_t keep = gb_slice(&b, gb_state_read(&b, s), 1, g_const(1), g_const(255));
    int32_t next = gb_concat(&b, keep, x1, 1);                                                /* (32, 256) */
    gb_state_write(&b, s, next, origin);
    int32_t y = gb_add(&b, gb_sum(&b, next, 1), x1);
    gb_set_logits(&b, gb_matmul(&b, weight(p, "out", w_out, 32, 32), y));
    assert_int_equal(b.status, SLM_OK);
    return p;
}

static void report3_full_extent(void **unused) {
    (void)unused;
    fill(w_emb, 32 * 32, 1.0f);
    fill(w_out, 32 * 32, 0.3f);
    slm_plan *pl = make_plan(build_full_extent(), "ane", 128);
    /* the ane check fails: the only finding is the full-extent write, which the engine rejects */
    assert_int_equal(pl->findings.n, 1);
    const plan_finding *f = &pl->findings.v[0];
    assert_string_equal(f->rule, "ane.write.full_extent");
    assert_int_equal(f->effect, TGT_REJECT);
    assert_int_equal(f->op, G_OP_STATE_WRITE);
    assert_non_null(strstr(f->fix, "256 -> 257"));
    assert_true(f->fixed);
    /* legalised: 257 rows allocated, 256 logical, the window stays [0,256) */
    const g_state *ls = &pl->legal->states[0];
    assert_int_equal(ls->ne[1], 256);
    assert_int_equal(ls->alloc_ne[1], 257);
    slm_plan_write w;
    assert_int_equal(slm_plan_state_write_at(pl, 0, 0, &w), SLM_OK);
    assert_string_equal(w.window, "[0,32) x [0,256)");
    assert_non_null(strstr(w.rules, "ane.write.full_extent"));
    assert_null(strstr(w.rules, "BROKEN"));
    assert_int_equal(pl->residual.n, 0);
    slm_plan_state ps;
    assert_int_equal(slm_plan_state_at(pl, 0, &ps), SLM_OK);
    assert_int_equal(ps.size_bytes, 32 * 257 * 2);
    assert_placement_honest(pl);
    /* simulated outputs identical over 64 steps: greedy tokens and every logit */
    slm_err e;
    err_clear(&e);
    const int32_t prompt[1] = {5};
    assert_int_equal(plan_simulate(pl, prompt, 1, 64, 1, &e), SLM_OK);
    assert_true(pl->sim.identical);
    assert_true(pl->sim.logits_identical);
    assert_int_equal(pl->sim.n_steps, 64);
    int32_t toks[64];
    for (int i = 0; i < 64; i++) toks[i] = (i * 7 + 3) % 32;
    assert_runs_identical(pl, toks, 64);
    slm_plan_destroy(pl);
}

/* ---- (c) two writes into one state --------------------------------------------------------------- */

/* state (32, 8) f16: rows [0,4) <- 0.5 rows [0,4) + x; then (reading the state in between) rows
 * [4,8) <- 0.25 rows [2,6) + x; logits = W sum of the rows. */
static g_program *build_two_writes(void) {
    g_program *p = new_program();
    slm_err e;
    err_clear(&e);
    int32_t fn;
    assert_int_equal(graph_add_function(p, "decode", false, 1, &fn, &e), SLM_OK);
    int64_t sne[4] = {32, 8, 1, 1};
    int32_t s = graph_add_state(p, "buf", SLM_STATE_CONV, 0, SLM_DTYPE_F16, 2, sne, 1, &e);
    g_builder b;
    gb_init(&b, p, fn, &e);
    b.layer = 0;
    g_affine ne32[4] = {g_const(32), g_const(1), g_const(1), g_const(1)};
    int32_t x1 = gb_reshape(&b, gb_slice(&b, gb_embed(&b, weight(p, "emb", w_emb, 32, 32), gb_tokens(&b)), 1, g_const(0),
                                         g_const(1)), 1, ne32);
    int32_t a = gb_slice(&b, gb_state_read(&b, s), 1, g_const(0), g_const(4));
    gb_state_write(&b, s, gb_add(&b, gb_scale(&b, a, 0.5f), x1), origin);
    int32_t c = gb_slice(&b, gb_state_read(&b, s), 1, g_const(2), g_const(4));
    g_affine at4[4] = {g_const(0), g_const(4), g_const(0), g_const(0)};
    gb_state_write(&b, s, gb_add(&b, gb_scale(&b, c, 0.25f), x1), at4);
    int32_t y = gb_sum(&b, gb_state_read(&b, s), 1);
    gb_set_logits(&b, gb_matmul(&b, weight(p, "out", w_out, 32, 32), y));
    assert_int_equal(b.status, SLM_OK);
    assert_int_equal(graph_verify(p, &e), SLM_OK);
    return p;
}

static void report3_two_writes(void **unused) {
    (void)unused;
    fill(w_emb, 32 * 32, 1.0f);
    fill(w_out, 32 * 32, 0.3f);
    slm_plan *pl = make_plan(build_two_writes(), "ane", 128);
    /* reported: both writes, one rule each (neither covers the state, both begins are static) */
    assert_int_equal(pl->findings.n, 2);
    for (int32_t i = 0; i < 2; i++) {
        assert_string_equal(pl->findings.v[i].rule, "ane.write.one_per_function");
        assert_int_equal(pl->findings.v[i].effect, TGT_FALLBACK);
        assert_true(pl->findings.v[i].fixed);
    }
    assert_non_null(strstr(pl->findings.v[1].detail, "write 2 of 2"));
    /* merged into one whole-state write, then padded (8 -> 9 rows) because it covers the state */
    int32_t n_writes = 0;
    for (int32_t i = 0; i < pl->legal->n_nodes; i++) n_writes += pl->legal->nodes[i].op == G_OP_STATE_WRITE;
    assert_int_equal(n_writes, 1);
    assert_string_equal(pl->rewrites.v[0].pass, "merge");
    assert_int_equal(pl->legal->states[0].alloc_ne[1], 9);
    assert_int_equal(pl->residual.n, 0);
    assert_placement_honest(pl);
    /* outputs identical, bit for bit */
    slm_err e;
    err_clear(&e);
    const int32_t prompt[1] = {9};
    assert_int_equal(plan_simulate(pl, prompt, 1, 64, 1, &e), SLM_OK);
    assert_true(pl->sim.identical && pl->sim.logits_identical);
    int32_t toks[64];
    for (int i = 0; i < 64; i++) toks[i] = (i * 11 + 1) % 32;
    assert_runs_identical(pl, toks, 64);
    slm_plan_destroy(pl);
}

/* ---- (d) a write at a data-dependent begin -------------------------------------------------------- */

/* A KV-like state (32, 80) f16 written at pos by prefill (n tokens) and decode; logits = W_big
 * flatten(state): every row's position matters. */
static g_program *build_dynamic_begin(void) {
    g_program *p = new_program();
    slm_err e;
    err_clear(&e);
    int64_t sne[4] = {32, 80, 1, 1};
    int32_t s = graph_add_state(p, "kv", SLM_STATE_KV_KEY, 0, SLM_DTYPE_F16, 2, sne, 1, &e);
    static const struct {
        const char *name;
        bool symbolic;
    } fns[2] = {{"prefill", true}, {"decode", false}};
    for (int k = 0; k < 2; k++) {
        int32_t fn;
        assert_int_equal(graph_add_function(p, fns[k].name, fns[k].symbolic, 1, &fn, &e), SLM_OK);
        g_builder b;
        gb_init(&b, p, fn, &e);
        b.layer = 0;
        int32_t v = gb_scale(&b, gb_embed(&b, weight(p, "emb", w_emb, 32, 32), gb_tokens(&b)), 1.5f); /* (32, n) */
        g_affine at_pos[4] = {g_const(0), g_pos_plus(0), g_const(0), g_const(0)};
        gb_state_write(&b, s, v, at_pos);
        int32_t st = gb_scale(&b, gb_state_read(&b, s), 1.0f); /* f32 copy of the f16 state */
        g_affine flat[4] = {g_const(2560), g_const(1), g_const(1), g_const(1)};
        gb_set_logits(&b, gb_matmul(&b, weight(p, "big", w_big, 2560, 32), gb_reshape(&b, st, 2, flat)));
        assert_int_equal(b.status, SLM_OK);
    }
    assert_int_equal(graph_verify(p, &e), SLM_OK);
    return p;
}

static void report3_dynamic_begin(void **unused) {
    (void)unused;
    fill(w_emb, 32 * 32, 1.0f);
    fill(w_big, 2560 * 32, 0.1f);
    slm_plan *pl = make_plan(build_dynamic_begin(), "ane", 80);
    /* reported: the write in each function */
    assert_int_equal(pl->findings.n, 2);
    for (int32_t i = 0; i < 2; i++) {
        assert_string_equal(pl->findings.v[i].rule, "ane.write.static_begin");
        assert_non_null(strstr(pl->findings.v[i].detail, "begins at pos"));
        assert_true(pl->findings.v[i].fixed);
    }
    /* rewritten: a static whole-window write (begin 0 on every axis) of a SELECT, in both functions */
    for (int32_t fn = 0; fn < pl->legal->n_functions; fn++) {
        const g_function *f = &pl->legal->functions[fn];
        int32_t n_select = 0, n_onehot = 0;
        for (int32_t i = 0; i < f->n_nodes; i++) {
            const g_node *nd = &pl->legal->nodes[f->nodes[i]];
            n_select += nd->op == G_OP_SELECT;
            n_onehot += nd->op == G_OP_ONEHOT;
            if (nd->op != G_OP_STATE_WRITE) continue;
            for (int d = 0; d < 4; d++) assert_true(!nd->p.write.begin[d].has_pos && nd->p.write.begin[d].base == 0);
            bool from_select = false;
            for (int32_t j = 0; j < i; j++) {
                const g_node *pr = &pl->legal->nodes[f->nodes[j]];
                if (pr->out[0] == nd->in[0]) from_select = pr->op == G_OP_SELECT;
            }
            assert_true(from_select);
        }
        assert_int_equal(n_select, 1);
        assert_int_equal(n_onehot, 1);
    }
    /* the one-hot mask runs on the CPU, with the reason; nothing else leaves the engine */
    int32_t off = 0;
    for (int32_t fn = 0; fn < slm_plan_n_functions(pl); fn++)
        for (int32_t i = 0; i < slm_plan_n_nodes(pl, fn); i++) {
            slm_plan_node nd;
            slm_plan_node_at(pl, fn, i, &nd);
            if (strcmp(nd.device, "ane") == 0) continue;
            off++;
            assert_string_equal(nd.op, "ONEHOT");
            assert_non_null(strstr(nd.reason, "field report 3"));
        }
    assert_int_equal(off, 2);
    assert_int_equal(pl->legal->states[0].alloc_ne[1], 81);
    assert_placement_honest(pl);
    /* identical: a 5-token prefill (the one-hot matrix path), then 64 greedy steps */
    slm_err e;
    err_clear(&e);
    const int32_t prompt[5] = {3, 1, 4, 1, 5};
    assert_int_equal(plan_simulate(pl, prompt, 5, 64, 2, &e), SLM_OK);
    assert_true(pl->sim.identical && pl->sim.logits_identical);
    assert_int_equal(pl->sim.n_steps, 64);
    slm_plan_destroy(pl);
}

/* ---- (e) LFM2 and Qwen3.5 ------------------------------------------------------------------------- */

/* check --target ane lists exactly the conv-state, recurrent and KV writes, each with its rule:
 * conv and recurrent writes cover their state (full extent), KV writes begin at pos. */
static void assert_ane_findings_are_state_writes(const slm_plan *pl) {
    const g_program *p = pl->orig;
    int32_t n_writes = 0, n_flagged = 0;
    for (int32_t fn = 0; fn < p->n_functions; fn++) {
        const g_function *f = &p->functions[fn];
        for (int32_t i = 0; i < f->n_nodes; i++) {
            const g_node *nd = &p->nodes[f->nodes[i]];
            bool flagged = false;
            for (int32_t k = 0; k < pl->findings.n; k++) {
                const plan_finding *x = &pl->findings.v[k];
                if (x->node != f->nodes[i]) continue;
                assert_int_equal(nd->op, G_OP_STATE_WRITE); /* nothing else is flagged */
                slm_state_role role = p->states[nd->p.write.state].role;
                const char *want = role == SLM_STATE_KV_KEY || role == SLM_STATE_KV_VALUE ? "ane.write.static_begin"
                                                                                          : "ane.write.full_extent";
                assert_string_equal(x->rule, want);
                assert_true(x->fixed);
                flagged = true;
            }
            if (nd->op == G_OP_STATE_WRITE) {
                n_writes++;
                assert_true(flagged); /* every state write is flagged */
            }
            n_flagged += flagged;
        }
    }
    assert_int_equal(n_flagged, n_writes);
    /* state findings: f32 conv/recurrent states need f16; nothing but STATE rules */
    for (int32_t k = 0; k < pl->findings.n; k++) {
        const plan_finding *x = &pl->findings.v[k];
        if (x->fn >= 0) continue;
        assert_true(!strcmp(x->rule, "ane.state.dtype") || !strcmp(x->rule, "ane.state.align"));
        assert_true(x->fixed);
    }
    /* after legalisation only the one-hot position masks leave the engine */
    for (int32_t k = 0; k < pl->residual.n; k++) {
        assert_string_equal(pl->residual.v[k].rule, "op.fallback");
        assert_int_equal(pl->residual.v[k].op, G_OP_ONEHOT);
    }
}

static void model_ane(const char *path, int32_t n_ctx, int32_t n_steps, bool expect_recurrent) {
    slm_model *m = NULL;
    char err[512];
    assert_int_equal(slm_model_load(path, NULL, &m, err, sizeof err), SLM_OK);
    slm_plan_params pp = slm_plan_params_default();
    pp.target = "ane";
    pp.n_ctx = n_ctx;
    slm_plan *pl = NULL;
    assert_int_equal(slm_plan_create(m, &pp, &pl, err, sizeof err), SLM_OK);
    assert_ane_findings_are_state_writes(pl);
    assert_placement_honest(pl);
    bool recurrent_warned = false, conv_cast = false;
    for (int32_t i = 0; i < slm_plan_n_rewrites(pl); i++) {
        slm_plan_rewrite r;
        slm_plan_rewrite_at(pl, i, &r);
        if (!strcmp(r.pass, "cast")) {
            assert_true(strlen(r.warning) > 0);
            recurrent_warned |= strstr(r.warning, "compounds") != NULL;
            conv_cast |= strstr(r.warning, "bounded") != NULL;
        }
    }
    assert_true(conv_cast);
    assert_int_equal(recurrent_warned, expect_recurrent);
    if (n_steps > 0) {
        int32_t prompt[4] = {1, 17, 42, 99};
        bool identical = false;
        int32_t first = 0;
        assert_int_equal(slm_plan_simulate(pl, prompt, 4, n_steps, 0, &identical, &first), SLM_OK);
        if (!identical) fprintf(stderr, "%s: first difference at step %d\n", path, first);
        assert_true(identical);
        assert_int_equal(first, -1);
        assert_int_equal(pl->sim.n_steps, n_steps);
    }
    slm_plan_destroy(pl);
    slm_model_destroy(m);
}

static void tiny_lfm2_and_qwen35_ane(void **unused) {
    (void)unused;
    model_ane(tu_data_path("tiny/lfm2/lfm2-f32.gguf"), 128, 64, false);
    model_ane(tu_data_path("tiny/lfm2/lfm2-q8_0.gguf"), 128, 64, false);
    model_ane(tu_data_path("tiny/qwen35/qwen35-f32.gguf"), 128, 64, true);
    model_ane(tu_data_path("tiny/qwen35/qwen35-q8_0.gguf"), 128, 64, true);
}

static void full_model(const char *name, char *path, size_t cap) {
    const char *home = getenv("HOME");
    snprintf(path, cap, "%s/.cache/statelm/models/random-%s.gguf", home ? home : "", name);
}

/* The full-size shapes: the check always; a short simulation in optimised builds; the 64-token one
 * with SLM_LONG_TESTS=1 (minutes on two cores). */
static void full_size_ane(void **unused) {
    (void)unused;
    char lfm2[512], qwen[512];
    full_model("lfm2-350m-q4_0", lfm2, sizeof lfm2);
    full_model("qwen35-0.8b-q4_0", qwen, sizeof qwen);
    if (!tu_file_exists(lfm2) || !tu_file_exists(qwen))
        TU_SKIP("full-size random models not found (scripts/gen_tiny_models.py --full lfm2-350m|qwen35-0.8b --type q4_0)");
#ifdef SLM_DEBUG
    int32_t steps = 0; /* the reference kernels at -O0 under sanitizers take minutes per token */
#else
    int32_t steps = getenv("SLM_LONG_TESTS") ? 64 : 4;
#endif
    model_ane(lfm2, 512, steps, false);
    model_ane(qwen, 512, steps, true);
}

/* check --target ane on the LFM2-350M shape: exactly the 20 conv-state writes (10 conv layers x 2
 * functions) and 24 KV writes (6 attention layers x k, v x 2 functions); also on the tiny model. */
static void lfm2_check_counts(const char *path, int32_t n_conv, int32_t n_attn) {
    slm_model *m = NULL;
    char err[512];
    assert_int_equal(slm_model_load(path, NULL, &m, err, sizeof err), SLM_OK);
    slm_plan_params pp = slm_plan_params_default();
    pp.target = "ane";
    slm_plan *pl = NULL;
    assert_int_equal(slm_plan_create(m, &pp, &pl, err, sizeof err), SLM_OK);
    int32_t conv = 0, kv = 0, states = 0;
    for (int32_t i = 0; i < slm_plan_n_findings(pl); i++) {
        slm_plan_finding f;
        assert_int_equal(slm_plan_finding_at(pl, i, &f), SLM_OK);
        if (!f.function) {
            states++;
            assert_string_equal(f.rule, "ane.state.dtype"); /* the f32 conv states */
            assert_non_null(strstr(f.state, ".conv"));
            continue;
        }
        assert_string_equal(f.op, "STATE_WRITE");
        if (strstr(f.state, ".conv")) {
            conv++;
            assert_string_equal(f.rule, "ane.write.full_extent");
            assert_int_equal(f.effect, SLM_PLAN_REJECT);
        } else {
            kv++;
            assert_true(strstr(f.state, ".kv_k") || strstr(f.state, ".kv_v"));
            assert_string_equal(f.rule, "ane.write.static_begin");
            assert_int_equal(f.effect, SLM_PLAN_FALLBACK);
        }
        assert_true(strlen(f.fix) > 0 && f.fixed);
    }
    assert_int_equal(conv, 3 * n_conv); /* prefill, decode, verify */
    assert_int_equal(kv, 3 * 2 * n_attn);
    assert_int_equal(states, n_conv);
    slm_plan_destroy(pl);
    slm_model_destroy(m);
}

static void lfm2_350m_check_lists_state_writes(void **unused) {
    (void)unused;
    lfm2_check_counts(tu_data_path("tiny/lfm2/lfm2-f32.gguf"), 3, 1);
    char full[512];
    full_model("lfm2-350m-q4_0", full, sizeof full);
    if (!tu_file_exists(full)) TU_SKIP("%s not found (scripts/gen_tiny_models.py --full lfm2-350m --type q4_0)", full);
    lfm2_check_counts(full, 10, 6);
}

/* ---- allocation failures --------------------------------------------------------------------------- */

/* Fails allocation N = 0, 1, 2, ... of plan creation (check, legalise, place, cost) until it
 * succeeds: every failing run returns NOMEM and leaks nothing (the program is owned and freed). */
static void plan_allocation_failures(void **unused) {
    (void)unused;
    g_program *(*builders[2])(void) = {build_dynamic_begin, build_two_writes};
    for (int k = 0; k < 2; k++) {
        bool done = false;
        for (long n = 0; !done && n < 100000; n++) {
            tu_failing f = tu_failing_at(-1);
            slm_allocator a = tu_failing_allocator(&f);
            /* the program, copied under the failing allocator (not armed yet) */
            g_program *src = builders[k]();
            src->alloc = a;
            g_program *q = graph_clone(src);
            src->alloc = al_default;
            graph_destroy(src);
            assert_non_null(q);
            f.n_alloc = 0;
            f.fail_at = n;
            slm_err e;
            err_clear(&e);
            slm_plan *pl = NULL;
            slm_status st = plan_create_program(NULL, q, tgt_find("ane"), 80, SLM_DTYPE_F16, 0, NULL, &pl, &e);
            if (st == SLM_OK) {
                done = true;
                assert_true(pl->findings.n > 0 && pl->rewrites.n > 0);
                slm_plan_destroy(pl);
            } else {
                assert_int_equal(st, SLM_ERR_NOMEM);
                assert_null(pl);
            }
            assert_int_equal(f.n_live, 0);
        }
        assert_true(done);
    }
}

/* ---- plans for every target, the public API ------------------------------------------------------- */

static void targets_and_api(void **unused) {
    (void)unused;
    slm_model *m = NULL;
    char err[512];
    assert_int_equal(slm_model_load(tu_data_path("tiny/lfm2/lfm2-f32.gguf"), NULL, &m, err, sizeof err), SLM_OK);
    slm_plan_params pp = slm_plan_params_default();
    slm_plan *pl = NULL;
    pp.target = "tpu";
    assert_int_equal(slm_plan_create(m, &pp, &pl, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(pl);
    assert_non_null(strstr(err, "cpu, cuda, ane"));
    assert_int_equal(slm_n_targets(), 3);
    assert_null(slm_target_name(3));
    /* cpu: clean, nothing rewritten, everything on the cpu */
    pp.target = "cpu";
    assert_int_equal(slm_plan_create(m, &pp, &pl, err, sizeof err), SLM_OK);
    assert_int_equal(slm_plan_n_findings(pl), 0);
    assert_int_equal(slm_plan_n_rewrites(pl), 0);
    assert_placement_honest(pl);
    for (int32_t fn = 0; fn < slm_plan_n_functions(pl); fn++) {
        assert_int_equal(slm_plan_n_devices(pl, fn), 1);
        slm_plan_device_total t;
        assert_int_equal(slm_plan_device_total_at(pl, fn, 0, &t), SLM_OK);
        assert_int_equal(t.n_nodes, slm_plan_n_nodes(pl, fn));
        assert_true(fabs(t.cost_share - 1.0) < 1e-9);
    }
    slm_plan_finding f;
    assert_int_equal(slm_plan_finding_at(pl, 0, &f), SLM_ERR_RANGE);
    slm_plan_node nd;
    assert_int_equal(slm_plan_node_at(pl, 5, 0, &nd), SLM_ERR_RANGE);
    /* the decode MATMUL cost: 2 k m flops and the weight's bytes */
    bool saw_matmul = false;
    int32_t dec = slm_plan_function_name(pl, 1) && !strcmp(slm_plan_function_name(pl, 1), "decode") ? 1 : 0;
    for (int32_t i = 0; i < slm_plan_n_nodes(pl, dec) && !saw_matmul; i++) {
        slm_plan_node_at(pl, dec, i, &nd);
        if (strcmp(nd.name, "logits") != 0) continue;
        saw_matmul = true;
        assert_true(fabs(nd.flops - 2.0 * 64 * 320) < 1e-6); /* lm head: d 64, vocab 320, one column */
        assert_true(nd.bytes >= 64.0 * 320 * 4);
    }
    assert_true(saw_matmul);
    slm_plan_destroy(pl);
    /* cuda: every node falls back to the cpu, with the reason */
    pp.target = "cuda";
    assert_int_equal(slm_plan_create(m, &pp, &pl, err, sizeof err), SLM_OK);
    assert_placement_honest(pl);
    int32_t n_nodes = 0;
    for (int32_t fn = 0; fn < slm_plan_n_functions(pl); fn++) n_nodes += slm_plan_n_nodes(pl, fn);
    assert_int_equal(slm_plan_n_findings(pl), n_nodes);
    assert_int_equal(slm_plan_node_at(pl, 0, 0, &nd), SLM_OK);
    assert_string_equal(nd.device, "cpu");
    assert_non_null(strstr(nd.reason, "CUDA"));
    slm_plan_destroy(pl);
    /* ane JSON: parses, carries the findings, states and totals */
    pp.target = "ane";
    assert_int_equal(slm_plan_create(m, &pp, &pl, err, sizeof err), SLM_OK);
    char *text = NULL;
    assert_int_equal(slm_plan_json(pl, false, &text), SLM_OK);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "target")->valuestring, "ane");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "findings")), slm_plan_n_findings(pl));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "states")), slm_plan_n_states(pl));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "clean")));
    cJSON_Delete(j);
    slm_free(text);
    assert_int_equal(slm_plan_json(pl, true, &text), SLM_OK);
    j = cJSON_Parse(text);
    assert_non_null(j);
    assert_null(cJSON_GetObjectItem(j, "functions"));
    cJSON_Delete(j);
    slm_free(text);
    /* states: conv padded 2 -> 3 rows and cast to f16; KV padded n_ctx -> n_ctx + 1 */
    for (int32_t i = 0; i < slm_plan_n_states(pl); i++) {
        slm_plan_state s;
        assert_int_equal(slm_plan_state_at(pl, i, &s), SLM_OK);
        assert_int_equal(s.dtype, SLM_DTYPE_F16);
        assert_int_equal(s.alloc_ne[1], s.ne[1] + 1);
        assert_int_equal(s.n_writes, 3); /* prefill, decode, verify */
    }
    /* a simulation that does not fit the context is refused with a message */
    bool identical = true;
    int32_t first = 0;
    int32_t one = 1;
    assert_int_equal(slm_plan_simulate(pl, &one, 1, slm_plan_n_ctx(pl) + 1, 0, &identical, &first), SLM_ERR_INVALID_ARG);
    assert_false(identical);
    assert_non_null(strstr(slm_plan_errmsg(pl), "context"));
    slm_plan_destroy(pl);
    slm_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(profiles_are_complete),
        cmocka_unit_test(new_op_kernels),
        cmocka_unit_test(deltanet_reads_f16_state),
        cmocka_unit_test(report2_slice_mutation),
        cmocka_unit_test(report3_full_extent),
        cmocka_unit_test(report3_two_writes),
        cmocka_unit_test(report3_dynamic_begin),
        cmocka_unit_test(tiny_lfm2_and_qwen35_ane),
        cmocka_unit_test(lfm2_350m_check_lists_state_writes),
        cmocka_unit_test(targets_and_api),
        cmocka_unit_test(plan_allocation_failures),
        cmocka_unit_test(full_size_ane),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
