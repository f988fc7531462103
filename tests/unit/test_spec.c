/* test_spec.c — speculative decoding on the tiny llama, qwen3, lfm2, qwen35 and gemma3 models:
 *   (a) verify(k) rows equal the logits of k one-by-one decodes, bit for bit;
 *   (b) accept(n) for every n in [0, k] leaves the session as if only n tokens had been decoded:
 *       same logits, then bit-identical decodes, rollback, snapshot/restore and save/load;
 *   (c) greedy speculation (slm_spec) emits exactly plain greedy decoding's tokens for K = 1..8 with
 *       prompt lookup, a drafter that is always wrong (every draft rejected), an oracle drafter
 *       (every draft accepted) and draft models (the same model, another architecture), with the
 *       target's logits equal to the one-by-one run after every step;
 *   (d) bad input (ids, k beyond the context, n_keep > k, accept without a verify) fails with the
 *       session unchanged, and a draft model with another tokenizer is refused;
 *   (e) accepting part of a one-call verify runs no plan step (states rebuilt without the weights)
 *       and replays nothing, and that verify copies no state (the accept rebuilds in place);
 *   (f) speculative sampling: the first tokens of many seeds have plain sampling's distribution
 *       (two-sample chi-squared test at the 0.1% point; drawing from p instead of the residual,
 *       ignoring q or keeping every draft fail it); also with the MTP drafter (sampling_mtp).
 * References come from plain slm_session_decode / slm_sampler_sample calls, never from verify. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/lookup.h"  /* white box: the lookup policy */
#include "runtime/session.h" /* white box: the program's largest call */
#include "statelm.h"

enum { N_PROMPT = 14, N_GEN = 28, N_CTX = 96 };

/* Sanitizer builds run ~20x slower: fewer draft lengths and seeds there (same checks). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static const bool slow_build = true;
#else
static const bool slow_build = false;
#endif

static const char *const archs[] = {"llama", "qwen3", "lfm2", "qwen35", "gemma3"};
#define N_ARCH (int)(sizeof archs / sizeof archs[0])

typedef struct ref_run {
    int32_t n_vocab;
    int32_t prompt[N_PROMPT];
    int32_t out[N_GEN + 1];   /* greedy tokens after the prompt */
    float *logits;            /* (N_GEN + 1, n_vocab): row 0 after the prompt, row i after out[i - 1] */
} ref_run;

/* arch, or arch:q8_0 for the quantised file */
static slm_model *load(const char *arch) {
    char rel[128];
    const char *colon = strchr(arch, ':');
    int len = colon ? (int)(colon - arch) : 0;
    if (colon) snprintf(rel, sizeof rel, "tiny/%.*s/%.*s-%s.gguf", len, arch, len, arch, colon + 1);
    else snprintf(rel, sizeof rel, "tiny/%s/%s-f32.gguf", arch, arch);
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path(rel), NULL, &m, err, sizeof err) != SLM_OK) fail_msg("load %s: %s", rel, err);
    return m;
}

/* The KV cache type of every session (quantised_kv sets it; SLM_KV_DEFAULT: f16). */
static slm_kv_type g_kv;

static slm_session *new_session(const slm_model *m, int32_t n_ctx) {
    slm_session_params p = slm_session_params_default();
    p.n_ctx = n_ctx;
    p.kv_type = g_kv;
    p.n_threads = 1;
    p.checkpoint_interval = 8; /* accept must keep checkpoints consistent across interval boundaries */
    slm_session *s = NULL;
    char err[512];
    if (slm_session_create(m, &p, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
    return s;
}

/* A prompt with a repeated stretch, so prompt lookup finds matches. */
static void make_prompt(int32_t *p, int32_t n_vocab) {
    uint32_t x = 777;
    for (int i = 0; i < N_PROMPT; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = i >= 8 ? p[i - 6] : (int32_t)((x >> 8) % (uint32_t)(n_vocab - 10)) + 5;
    }
}

/* Plain greedy decoding, one decode per token. */
static void reference(const slm_model *m, ref_run *r) {
    r->n_vocab = slm_model_n_vocab(m);
    make_prompt(r->prompt, r->n_vocab);
    size_t v = (size_t)r->n_vocab;
    r->logits = malloc((N_GEN + 1) * v * sizeof(float));
    slm_session *s = new_session(m, N_CTX);
    const float *l;
    assert_int_equal(slm_session_prefill(s, r->prompt, N_PROMPT, &l), SLM_OK);
    memcpy(r->logits, l, v * sizeof(float));
    for (int i = 0; i < N_GEN; i++) {
        r->out[i] = tu_argmax(l, r->n_vocab);
        assert_int_equal(slm_session_decode(s, r->out[i], &l), SLM_OK);
        memcpy(r->logits + (size_t)(i + 1) * v, l, v * sizeof(float));
    }
    r->out[N_GEN] = tu_argmax(l, r->n_vocab);
    slm_session_destroy(s);
}

static const float *ref_row(const ref_run *r, int i) { return r->logits + (size_t)i * (size_t)r->n_vocab; }

static void same_logits(const float *a, const float *b, int32_t n, const char *what, int at) {
    if (!a || memcmp(a, b, (size_t)n * sizeof(float)) != 0) fail_msg("%s: logits differ at generated position %d", what, at);
}

/* s stands at prompt + out[0, at); decodes out[at, N_GEN) comparing with the reference. */
static void continue_and_compare(slm_session *s, const ref_run *r, int at, const char *what) {
    assert_int_equal(slm_session_pos(s), N_PROMPT + at);
    const float *l;
    for (int i = at; i < N_GEN; i++) {
        if (slm_session_decode(s, r->out[i], &l) != SLM_OK) fail_msg("%s: decode: %s", what, slm_session_errmsg(s));
        same_logits(l, ref_row(r, i + 1), r->n_vocab, what, i + 1);
    }
}

/* Counts the steps of Program functions (a pass over the weights), not the accept plan's. */
static void count_steps(void *user, int32_t fn, int32_t step, const int32_t *nodes, int32_t n_nodes) {
    (void)step, (void)nodes, (void)n_nodes;
    if (fn != PLAN_FN_ACCEPT) (*(int *)user)++;
}

/* (a), (b): verify out[at, at + k) at prompt + out[0, at), check rows, accept n_keep, continue. */
static void check_verify_accept(const slm_model *m, const ref_run *r, int at, int k, int n_keep, const char *arch) {
    char what[96];
    snprintf(what, sizeof what, "%s verify(%d) at %d, keep %d", arch, k, at, n_keep);
    slm_session *s = new_session(m, N_CTX);
    const float *l;
    assert_int_equal(slm_session_prefill(s, r->prompt, N_PROMPT, &l), SLM_OK);
    if (at) assert_int_equal(slm_session_prefill(s, r->out, (size_t)at, &l), SLM_OK);
    const float *rows = NULL;
    if (slm_session_verify(s, r->out + at, (size_t)k, &rows) != SLM_OK) fail_msg("%s: %s", what, slm_session_errmsg(s));
    for (int i = 0; i < k; i++)
        same_logits(rows + (size_t)i * (size_t)r->n_vocab, ref_row(r, at + i + 1), r->n_vocab, what, at + i + 1);
    assert_int_equal(slm_session_pos(s), N_PROMPT + at + k);
    /* a verify in one call of a plan that rebuilds saves no copy of the states (white box: the
     * session allocates the copy at the first verify that needs one); a split one does */
    bool one_call = s->prog->max_call_tokens <= 0 || k <= s->prog->max_call_tokens;
    bool in_place = one_call && !s->plan->accept.replay;
    if (in_place && s->verify_state) fail_msg("%s: a one-call verify saved the states", what);
    if (!in_place && s->has_recurrent && !s->verify_state) fail_msg("%s: a split verify saved no states", what);
    /* a verify in one call is accepted without running the weights again, hybrids included */
    int steps = 0;
    s->trace = count_steps;
    s->trace_user = &steps;
    uint64_t replays = s->n_accept_replays;
    if (slm_session_accept(s, (size_t)n_keep, &l) != SLM_OK) fail_msg("%s: accept: %s", what, slm_session_errmsg(s));
    s->trace = NULL;
    bool replayed = !one_call && n_keep > 0 && n_keep < k;
    if (one_call && steps) fail_msg("%s: accept ran %d plan steps", what, steps);
    if (replayed && !steps) fail_msg("%s: a split verify accepted without a replay", what);
    if (s->n_accept_replays - replays != (replayed ? 1u : 0u))
        fail_msg("%s: %llu replays counted", what, (unsigned long long)(s->n_accept_replays - replays));
    same_logits(l, ref_row(r, at + n_keep), r->n_vocab, what, at + n_keep);
    assert_int_equal(slm_session_accept(s, 0, NULL), SLM_ERR_STATE); /* accepted once */
    size_t n_hist = 0;
    const int32_t *h = slm_session_history(s, &n_hist);
    assert_int_equal(n_hist, N_PROMPT + at + n_keep);
    assert_memory_equal(h + N_PROMPT, r->out, (size_t)(at + n_keep) * sizeof(int32_t));
    /* snapshot now, save now; continue; then rollback, restore and load must continue identically */
    slm_snapshot *snap = NULL;
    assert_int_equal(slm_session_snapshot(s, &snap), SLM_OK);
    char *dir = tu_temp_dir(), path[1024];
    snprintf(path, sizeof path, "%s/state.bin", dir);
    assert_int_equal(slm_session_save(s, path), SLM_OK);
    continue_and_compare(s, r, at + n_keep, what);
    assert_int_equal(slm_session_rollback(s, N_PROMPT + at + n_keep), SLM_OK);
    continue_and_compare(s, r, at + n_keep, what);
    if (at + n_keep > 0) {
        assert_int_equal(slm_session_rollback(s, N_PROMPT + at + n_keep - 1), SLM_OK);
        continue_and_compare(s, r, at + n_keep - 1, what);
    }
    assert_int_equal(slm_session_restore(s, snap), SLM_OK);
    continue_and_compare(s, r, at + n_keep, what);
    slm_session *t = new_session(m, N_CTX);
    assert_int_equal(slm_session_load(t, path), SLM_OK);
    continue_and_compare(t, r, at + n_keep, what);
    unlink(path);
    tu_rm_dir(dir);
    slm_snapshot_destroy(snap);
    slm_session_destroy(t);
    slm_session_destroy(s);
}

static void verify_accept_all(void **u) {
    (void)u;
    for (int a = 0; a < N_ARCH; a++) {
        slm_model *m = load(archs[a]);
        ref_run r;
        reference(m, &r);
        for (int k = 1; k <= 6; k += slow_build ? k + 1 : 1) /* sanitizers: 1, 3 */
            for (int n_keep = 0; n_keep <= k; n_keep++) check_verify_accept(m, &r, 3, k, n_keep, archs[a]);
        check_verify_accept(m, &r, 0, 8, 5, archs[a]); /* straight after the prefill, across a checkpoint */
        free(r.logits);
        slm_model_destroy(m);
    }
}

/* A verify longer than the program's largest call (gemma3's KV rings) is split, still exact. */
static void verify_split_calls(void **u) {
    (void)u;
    slm_model *m = load("gemma3");
    ref_run r;
    reference(m, &r);
    slm_session *s = new_session(m, N_CTX);
    int32_t max_call = s->prog->max_call_tokens;
    slm_session_destroy(s);
    if (max_call <= 0 || max_call >= N_GEN) {
        slm_model_destroy(m);
        free(r.logits);
        TU_SKIP("gemma3 tiny: largest call %d does not split a %d-token verify", max_call, N_GEN);
    }
    fprintf(stderr, "gemma3 tiny: largest call %d tokens, verify of %d\n", max_call, N_GEN);
    check_verify_accept(m, &r, 0, N_GEN, max_call + 1, "gemma3 split");
    check_verify_accept(m, &r, 0, N_GEN, 2, "gemma3 split");
    free(r.logits);
    slm_model_destroy(m);
}

/* ---- greedy speculation ----------------------------------------------------------------------- */

typedef enum { DRAFT_LOOKUP, DRAFT_WRONG, DRAFT_ORACLE, DRAFT_SAME_MODEL, DRAFT_OTHER_MODEL } draft_kind;

/* Oracle and wrong drafters: the reference continuation of the history (or each token + 1). */
typedef struct drafter {
    const ref_run *r;
    bool wrong;
} drafter;

static size_t draft_ref(void *user, const int32_t *history, size_t n_history, int32_t *draft, size_t n_max) {
    const drafter *d = user;
    (void)history;
    size_t g = n_history - N_PROMPT, n = 0; /* history ends with out[g - 1] */
    for (; n < n_max && g + n <= N_GEN; n++)
        draft[n] = d->wrong ? (d->r->out[g + n] + 1) % d->r->n_vocab : d->r->out[g + n];
    return n;
}

static void check_spec(const slm_model *m, const slm_model *draft_m, const ref_run *r, draft_kind kind, int K,
                       bool fixed, const char *what) {
    slm_session *s = new_session(m, N_CTX), *ds = draft_m ? new_session(draft_m, N_CTX) : NULL;
    drafter d = {r, kind == DRAFT_WRONG};
    slm_spec_params p = slm_spec_params_default();
    p.draft_max = K;
    p.fixed = fixed;
    p.draft = ds;
    if (kind == DRAFT_WRONG || kind == DRAFT_ORACLE) {
        p.draft_fn = draft_ref;
        p.draft_user_data = &d;
    }
    slm_spec *sp = NULL;
    char err[512];
    if (slm_spec_create(s, &p, &sp, err, sizeof err) != SLM_OK) fail_msg("%s: %s", what, err);
    const float *l;
    assert_int_equal(slm_session_prefill(s, r->prompt, N_PROMPT, &l), SLM_OK);
    int32_t got[N_GEN];
    size_t n_got = 0;
    while (n_got < N_GEN) {
        size_t n = 0;
        if (slm_spec_step(sp, N_GEN - n_got, got + n_got, &n) != SLM_OK) fail_msg("%s: step: %s", what, slm_spec_errmsg(sp));
        assert_true(n >= 1 && n <= N_GEN - n_got);
        for (size_t i = n_got; i < n_got + n; i++)
            if (got[i] != r->out[i]) fail_msg("%s: token %zu is %d, greedy decoding gives %d", what, i, got[i], r->out[i]);
        n_got += n;
        assert_int_equal(slm_session_pos(s), N_PROMPT + (int32_t)n_got);
        same_logits(s->logits_valid ? s->logits : NULL, ref_row(r, (int)n_got), r->n_vocab, what, (int)n_got);
    }
    slm_spec_stats st;
    slm_spec_get_stats(sp, &st);
    assert_true(st.n_accepted <= st.n_drafted);
    assert_int_equal(st.n_accepted + st.n_steps, N_GEN);
    /* every replayed accept is counted; only a verify split into several calls replays (the accept
     * plans of these models rebuild every state) */
    if (st.n_replays != s->n_accept_replays)
        fail_msg("%s: %llu replays in the stats, %llu in the session", what, (unsigned long long)st.n_replays,
                 (unsigned long long)s->n_accept_replays);
    if ((s->prog->max_call_tokens <= 0 || K + 1 <= s->prog->max_call_tokens) && st.n_replays != 0)
        fail_msg("%s: %llu accepts replayed", what, (unsigned long long)st.n_replays);
    if (kind == DRAFT_WRONG) {
        if (st.n_accepted != 0 || st.n_drafted == 0) fail_msg("%s: %llu of %llu wrong drafts accepted", what,
                                                              (unsigned long long)st.n_accepted, (unsigned long long)st.n_drafted);
    }
    if (kind == DRAFT_ORACLE || kind == DRAFT_SAME_MODEL) {
        if (st.n_accepted != st.n_drafted || st.n_drafted < (uint64_t)K)
            fail_msg("%s: %llu of %llu right drafts accepted", what, (unsigned long long)st.n_accepted,
                     (unsigned long long)st.n_drafted);
    }
    /* afterwards: decoding, rollback into the speculated stretch and a snapshot continue exactly */
    slm_spec_destroy(sp);
    assert_int_equal(slm_session_rollback(s, N_PROMPT + N_GEN / 2), SLM_OK);
    continue_and_compare(s, r, N_GEN / 2, what);
    slm_session_destroy(ds);
    slm_session_destroy(s);
}

static void spec_drafter(draft_kind kind) {
    static const char *const names[] = {"lookup", "wrong", "oracle", "same model", "other model"};
    for (int a = 0; a < N_ARCH; a++) {
        slm_model *m = load(archs[a]);
        slm_model *dm = kind == DRAFT_SAME_MODEL ? m : kind == DRAFT_OTHER_MODEL ? load(archs[(a + 3) % N_ARCH]) : NULL;
        ref_run r;
        reference(m, &r);
        for (int K = 1; K <= 8; K += slow_build && K < 8 ? 3 : 1) { /* sanitizers: 1, 4, 7 */
            char what[128];
            snprintf(what, sizeof what, "%s, %s drafter, K = %d", archs[a], names[kind], K);
            check_spec(m, dm, &r, kind, K, true, what);
        }
        check_spec(m, dm, &r, kind, 8, false, "adaptive");
        free(r.logits);
        if (dm != m) slm_model_destroy(dm);
        slm_model_destroy(m);
    }
}

/* Quantised KV caches (q8_0, q4_0) on the models of head dimension 32: verify/accept at every
 * draft length and keep count, then rollback, snapshots and state files (check_verify_accept), and
 * speculative decoding with wrong and right drafts, against plain greedy decoding with the same
 * cache type, bit for bit. */
static void quantised_kv(void **u) {
    (void)u;
    static const char *const qarchs[] = {"qwen3", "qwen35", "gemma3"};
    for (int kv = 0; kv < 2; kv++)
        for (int a = 0; a < 3; a++) {
            g_kv = kv ? SLM_KV_Q4_0 : SLM_KV_Q8_0;
            slm_model *m = load(qarchs[a]);
            ref_run r;
            reference(m, &r);
            char what[96];
            snprintf(what, sizeof what, "%s %s KV", qarchs[a], kv ? "q4_0" : "q8_0");
            for (int k = 1; k <= 4; k += slow_build ? 2 : 1)
                for (int n_keep = 0; n_keep <= k; n_keep++) check_verify_accept(m, &r, 3, k, n_keep, what);
            check_spec(m, NULL, &r, DRAFT_WRONG, 4, true, what);
            check_spec(m, NULL, &r, DRAFT_ORACLE, 4, true, what);
            check_spec(m, NULL, &r, DRAFT_LOOKUP, 8, false, what);
            free(r.logits);
            slm_model_destroy(m);
            g_kv = SLM_KV_DEFAULT;
        }
}

static void spec_lookup(void **u) { (void)u, spec_drafter(DRAFT_LOOKUP); }
static void spec_all_rejected(void **u) { (void)u, spec_drafter(DRAFT_WRONG); }
static void spec_all_accepted(void **u) { (void)u, spec_drafter(DRAFT_ORACLE); }
static void spec_draft_same_model(void **u) { (void)u, spec_drafter(DRAFT_SAME_MODEL); }
static void spec_draft_other_model(void **u) { (void)u, spec_drafter(DRAFT_OTHER_MODEL); }

static void lookup_drafter(void **u) {
    (void)u;
    int32_t d[8];
    const int32_t h1[] = {1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 1, 2, 3, 4};
    /* "1 2 3 4" at 0 matches longer than the more recent "2 3 4" at 6: its continuation 5 9 2 */
    assert_int_equal(slm_draft_lookup(h1, 14, d, 3), 3);
    assert_int_equal(d[0], 5);
    assert_int_equal(d[1], 9);
    assert_int_equal(d[2], 2);
    const int32_t h2[] = {5, 6, 8, 6};  /* only the 1-gram 6 matches; it continues with 8 6 */
    assert_int_equal(slm_draft_lookup(h2, 4, d, 8), 2);
    assert_int_equal(d[0], 8);
    assert_int_equal(d[1], 6);
    const int32_t h3[] = {1, 2, 3};
    assert_int_equal(slm_draft_lookup(h3, 3, d, 8), 0);
    assert_int_equal(slm_draft_lookup(h3, 0, d, 8), 0);
    assert_int_equal(slm_draft_lookup(h1, 14, d, 0), 0);
    /* a long span being copied is drafted whole, though its last 3-gram recurs more recently */
    const int32_t h4[] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 5, 13, 14, 15, 99, 5, 10, 11, 12, 13, 14, 15};
    assert_int_equal(slm_draft_lookup(h4, 24, d, 6), 6);
    for (int i = 0; i < 6; i++) assert_int_equal(d[i], 16 + i);
}

/* The lookup driver's match search and draft-length policy (white box: runtime/lookup.h). */
static void lookup_policy_drafts(void **u) {
    (void)u;
    const int32_t h4[] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 5, 13, 14, 15, 99, 5, 10, 11, 12, 13, 14, 15};
    lookup_match m = lookup_find(h4, 24);
    assert_int_equal(m.len, 6);
    assert_int_equal(m.start, 6);
    assert_int_equal(m.n_avail, 18);
    assert_false(m.ambiguous);
    const int32_t h5[] = {7, 1, 8, 2, 7, 3, 9, 7}; /* 7 is followed by 1 and by 3: ambiguous */
    m = lookup_find(h5, 8);
    assert_int_equal(m.len, 1);
    assert_int_equal(m.start, 5);
    assert_true(m.ambiguous);
    m = lookup_find(h5, 1);
    assert_int_equal(m.len, 0);

    lookup_policy p;
    lookup_policy_init(&p, 0.3f);
    lookup_match one = {0, 8, 1, false}, amb = {0, 8, 1, true}, three = {0, 20, 3, false},
                 copy = {0, 20, LOOKUP_MATCH_MAX, false};
    /* a fresh policy: no drafts after one-token matches, the whole k_max inside a long copy */
    assert_int_equal(lookup_plan(&p, &one, 8), 0);
    assert_int_equal(lookup_plan(&p, &copy, 8), 8);
    assert_true(lookup_plan(&p, &copy, 64) >= 10); /* longer still when allowed, while it pays */
    assert_true(lookup_plan(&p, &three, 8) >= 3);
    /* drafts after 3-token matches stop once the target keeps rejecting them ... */
    for (int i = 0; i < 6; i++) lookup_learn(&p, &three, lookup_plan(&p, &three, 8), 0);
    assert_int_equal(lookup_plan(&p, &three, 8), 0);
    assert_int_equal(lookup_plan(&p, &copy, 8), 8); /* (other match lengths keep their estimates) */

    /* ... and one-token drafts, worth it where a verify is cheap, stop after repeated rejections and
     * come back when they are kept again */
    lookup_policy_init(&p, 0.1f);
    assert_true(lookup_plan(&p, &one, 8) >= 1);
    assert_true(lookup_plan(&p, &amb, 8) < lookup_plan(&p, &one, 8)); /* ambiguous: shorter */
    int n_rejected = 0;
    while (lookup_plan(&p, &one, 8) > 0 && n_rejected < 100) {
        lookup_learn(&p, &one, lookup_plan(&p, &one, 8), 0);
        n_rejected++;
    }
    assert_true(n_rejected >= 1 && n_rejected <= 4);
    for (int i = 0; i < 8; i++) lookup_learn(&p, &one, 2, 2);
    assert_true(lookup_plan(&p, &one, 8) >= 1);

    /* measured pass costs replace the prior: a 2-token pass timed at a decode step's cost makes
     * one-token drafts pay */
    lookup_policy_init(&p, 0.3f);
    assert_int_equal(lookup_plan(&p, &one, 8), 0);
    for (int i = 0; i < 3; i++) {
        lookup_time(&p, 0, 0.010);
        lookup_time(&p, 1, 0.0105);
    }
    assert_true(fabsf(p.pass_cost[1] - 1.05f) < 1e-3f);
    assert_true(fabsf(p.pass_cost[2] - 1.6f) < 1e-6f); /* not timed: the prior */
    assert_int_equal(lookup_plan(&p, &one, 8), 1);

    /* verify_cost 0: everything available is drafted; out of range: refused */
    lookup_policy_init(&p, 0.0f);
    assert_int_equal(lookup_plan(&p, &one, 8), 8);
    slm_model *mdl = load("llama");
    slm_session *s = new_session(mdl, N_CTX);
    slm_spec_params sp = slm_spec_params_default();
    slm_spec *spec = NULL;
    char err[256];
    sp.verify_cost = -1.0f;
    assert_int_equal(slm_spec_create(s, &sp, &spec, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(spec);
    assert_non_null(strstr(err, "verify_cost"));
    slm_session_destroy(s);
    slm_model_destroy(mdl);
}

/* (d) bad input: each refusal leaves the session where it was, able to continue exactly. */
static void bad_input(void **u) {
    (void)u;
    slm_model *m = load("qwen35");
    ref_run r;
    reference(m, &r);
    slm_session *s = new_session(m, N_CTX);
    const float *l, *rows = (const float *)1;
    assert_int_equal(slm_session_prefill(s, r.prompt, N_PROMPT, &l), SLM_OK);
    assert_int_equal(slm_session_accept(s, 0, &l), SLM_ERR_STATE); /* no verify yet */
    assert_null(l);
    int32_t bad[3] = {r.out[0], r.n_vocab, r.out[2]};
    assert_int_equal(slm_session_verify(s, bad, 3, &rows), SLM_ERR_RANGE);
    assert_null(rows);
    bad[1] = -1;
    assert_int_equal(slm_session_verify(s, bad, 3, &rows), SLM_ERR_RANGE);
    int32_t many[N_CTX];
    for (int i = 0; i < N_CTX; i++) many[i] = r.out[i % N_GEN];
    assert_int_equal(slm_session_verify(s, many, N_CTX - N_PROMPT + 1, &rows), SLM_ERR_CONTEXT_FULL);
    assert_int_equal(slm_session_verify(s, r.out, 0, &rows), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_verify(s, NULL, 2, &rows), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_pos(s), N_PROMPT);
    assert_int_equal(slm_session_verify(s, r.out, 4, &rows), SLM_OK);
    assert_int_equal(slm_session_accept(s, 5, &l), SLM_ERR_RANGE);
    assert_true(strlen(slm_session_errmsg(s)) > 0);
    assert_int_equal(slm_session_pos(s), N_PROMPT + 4);
    assert_int_equal(slm_session_accept(s, 1, &l), SLM_OK); /* the refused accept left the verify standing */
    same_logits(l, ref_row(&r, 1), r.n_vocab, "accept after a refused one", 1);
    assert_int_equal(slm_session_verify(s, r.out + 1, 2, &rows), SLM_OK);
    assert_int_equal(slm_session_decode(s, r.out[3], &l), SLM_OK);
    assert_int_equal(slm_session_accept(s, 1, &l), SLM_ERR_STATE); /* a decode came between */
    assert_int_equal(slm_session_verify(s, r.out + 4, 2, &rows), SLM_OK);
    assert_int_equal(slm_session_rollback(s, N_PROMPT + 1), SLM_OK);
    assert_int_equal(slm_session_accept(s, 1, &l), SLM_ERR_STATE); /* a rollback came between */
    continue_and_compare(s, &r, 1, "after the refusals");
    slm_session_destroy(s);
    /* speculation up to a full context, then a refusal; no logits after a rollback: a refusal */
    s = new_session(m, N_PROMPT + 3);
    assert_int_equal(slm_session_prefill(s, r.prompt, N_PROMPT, &l), SLM_OK);
    slm_spec *sp = NULL;
    assert_int_equal(slm_spec_create(s, NULL, &sp, NULL, 0), SLM_OK);
    int32_t out[8];
    size_t n = 0, n_out = 0;
    while (slm_session_pos(s) < N_PROMPT + 3) {
        assert_int_equal(slm_spec_step(sp, 8, out + n_out, &n), SLM_OK);
        n_out += n;
    }
    assert_int_equal(n_out, 3);
    assert_memory_equal(out, r.out, 3 * sizeof(int32_t));
    n = 9;
    assert_int_equal(slm_spec_step(sp, 4, out, &n), SLM_ERR_CONTEXT_FULL);
    assert_int_equal(n, 0);
    assert_int_equal(slm_session_rollback(s, N_PROMPT + 1), SLM_OK);
    assert_int_equal(slm_spec_step(sp, 4, out, &n), SLM_ERR_STATE);
    assert_int_equal(slm_spec_step(sp, 0, out, &n), SLM_ERR_INVALID_ARG);
    slm_spec_destroy(sp);
    free(r.logits);
    slm_session_destroy(s);
    slm_model_destroy(m);
}

/* A draft model whose tokenizer differs in one token's text is refused with a message. */
static void draft_tokenizer_differs(void **u) {
    (void)u;
    size_t size = 0;
    uint8_t *bytes = tu_read_file(tu_data_path("tiny/lfm2/lfm2-f32.gguf"), &size);
    assert_non_null(bytes);
    /* rename token "Ġmodel" to "Ġmodez" and the merge that makes it ("Ġmode l" -> "Ġmode z") */
    static const char *const from[] = {"\xc4\xa0model", "\xc4\xa0mode l"}, *const to[] = {"\xc4\xa0modez", "\xc4\xa0mode z"};
    for (int k = 0; k < 2; k++) {
        size_t len = strlen(from[k]), hits = 0;
        for (size_t i = 0; i + len <= size; i++)
            if (memcmp(bytes + i, from[k], len) == 0) memcpy(bytes + i, to[k], len), hits++;
        assert_int_equal(hits, 1);
    }
    char *path = tu_write_temp(bytes, size, ".gguf");
    slm_model *other = NULL, *m = load("llama");
    char err[512];
    assert_int_equal(slm_model_load(path, NULL, &other, err, sizeof err), SLM_OK);
    slm_session *s = new_session(m, N_CTX), *ds = new_session(other, N_CTX);
    slm_spec_params p = slm_spec_params_default();
    p.draft = ds;
    slm_spec *sp = (slm_spec *)1;
    err[0] = '\0';
    assert_int_equal(slm_spec_create(s, &p, &sp, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(sp);
    if (!strstr(err, "tokenizer")) fail_msg("message does not name the tokenizer: %s", err);
    p.draft = s;
    assert_int_equal(slm_spec_create(s, &p, &sp, err, sizeof err), SLM_ERR_INVALID_ARG);
    p.draft = NULL;
    p.draft_max = 65;
    assert_int_equal(slm_spec_create(s, &p, &sp, err, sizeof err), SLM_ERR_INVALID_ARG);
    p.draft_max = -1;
    assert_int_equal(slm_spec_create(s, &p, &sp, err, sizeof err), SLM_ERR_INVALID_ARG);
    slm_session_destroy(ds);
    slm_session_destroy(s);
    slm_model_destroy(other);
    slm_model_destroy(m);
    unlink(path);
    free(path);
    free(bytes);
}

/* ---- speculative sampling: the distribution of plain sampling -------------------------------- */

enum { N_SEEDS_MAX = 3000, N_SAMPLED = 3 };
static const int32_t sample_prompt[6] = {11, 57, 203, 99, 140, 7};

static slm_sampler *seeded(uint64_t seed) {
    slm_sampler_params p = slm_sampler_params_default();
    p.temperature = 0.2f;
    p.top_k = 20;
    p.top_p = 1.0f;
    p.seed = seed;
    slm_sampler *smp = NULL;
    assert_int_equal(slm_sampler_create(&p, &smp), SLM_OK);
    return smp;
}

/* Brings s back to the prompt with its logits (KV-only models: the rollback is free). */
static void back_to_prompt(slm_session *s) {
    const float *l;
    assert_int_equal(slm_session_rollback(s, 5), SLM_OK);
    assert_int_equal(slm_session_decode(s, sample_prompt[5], &l), SLM_OK);
}

/* Drafter for sampling: point masses on the greedy continuation of the history by a session of
 * the target's model (often accepted, often not). */
static size_t draft_greedy(void *user, const int32_t *history, size_t n_history, int32_t *draft, size_t n_max) {
    slm_session *g = user;
    const float *l;
    if (slm_session_sync(g, history, n_history, &l, NULL) != SLM_OK) return 0;
    int32_t v = slm_model_n_vocab(slm_session_model(g));
    for (size_t i = 0; i < n_max; i++) {
        draft[i] = tu_argmax(l, v);
        if (i + 1 < n_max && slm_session_decode(g, draft[i], &l) != SLM_OK) return i + 1;
    }
    return n_max;
}

/* Chi-squared homogeneity statistic of two samples of ids over the bins where the pooled count is
 * at least 10 (the rest pooled into one bin); *df receives the degrees of freedom. */
static double chi2_two_samples(const int32_t *a, const int32_t *b, int n, int32_t n_vocab, int *df) {
    int *ca = calloc((size_t)n_vocab, sizeof(int)), *cb = calloc((size_t)n_vocab, sizeof(int));
    for (int i = 0; i < n; i++) ca[a[i]]++, cb[b[i]]++;
    double chi2 = 0;
    int bins = 0, ra = 0, rb = 0;
    for (int32_t t = 0; t <= n_vocab; t++) {
        int x, y;
        if (t < n_vocab && ca[t] + cb[t] < 10) {
            ra += ca[t], rb += cb[t];
            continue;
        }
        if (t < n_vocab) x = ca[t], y = cb[t];
        else x = ra, y = rb;
        if (x + y == 0) continue;
        double e = (x + y) / 2.0; /* equal sample sizes */
        chi2 += (x - e) * (x - e) / e + (y - e) * (y - e) / e;
        bins++;
    }
    free(ca);
    free(cb);
    *df = bins - 1;
    return chi2;
}

/* Upper 0.1% point of the chi-squared distribution (Wilson-Hilferty). */
static double chi2_crit(int df) {
    double z = 3.090, h = 2.0 / (9.0 * df), c = 1 - h + z * sqrt(h);
    return df * c * c * c;
}

/* The tiny qwen35 model with an MTP block (tests/data/tiny/qwen35/hf-mtp), a session that keeps
 * the hidden states its MTP drafter reads. */
static slm_model *load_mtp(void) {
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path("tiny/qwen35/hf-mtp"), NULL, &m, err, sizeof err) != SLM_OK) fail_msg("load: %s", err);
    return m;
}

static slm_session *new_mtp_session(const slm_model *m, int32_t n_ctx) {
    slm_session_params p = slm_session_params_default();
    p.n_ctx = n_ctx;
    p.n_threads = 1;
    p.checkpoint_interval = 8;
    p.mtp = true;
    slm_session *s = NULL;
    char err[512];
    if (slm_session_create(m, &p, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
    return s;
}

/* draft_arch: a draft model; fixed_drafter: point masses from draft_greedy; mtp: the target's own
 * MTP block (point masses too), on the tiny qwen35 model with one. */
static void check_sampling(const char *draft_arch, bool fixed_drafter, bool mtp) {
    slm_model *m = mtp ? load_mtp() : load("llama"), *dm = draft_arch ? load(draft_arch) : NULL;
    slm_session *s = mtp ? new_mtp_session(m, N_CTX) : new_session(m, N_CTX), *ds = dm ? new_session(dm, N_CTX) : NULL;
    const float *l;
    assert_int_equal(slm_session_prefill(s, sample_prompt, 6, &l), SLM_OK);
    int32_t v = slm_model_n_vocab(m);
    const int n_seeds = slow_build ? 600 : N_SEEDS_MAX;
    int32_t *plain = malloc((size_t)n_seeds * N_SAMPLED * sizeof(int32_t)),
            *spec = malloc((size_t)n_seeds * N_SAMPLED * sizeof(int32_t));
    slm_session *greedy = fixed_drafter ? new_session(m, N_CTX) : NULL;
    uint64_t drafted = 0, accepted = 0;
    for (int r = 0; r < n_seeds; r++) {
        slm_sampler *smp = seeded(1000 + (uint64_t)r);
        back_to_prompt(s);
        for (int i = 0; i < N_SAMPLED; i++) {
            size_t n_hist;
            const int32_t *h = slm_session_history(s, &n_hist);
            int32_t t;
            assert_int_equal(slm_sampler_sample(smp, l, v, h, n_hist, &t), SLM_OK);
            plain[r * N_SAMPLED + i] = t;
            assert_int_equal(slm_session_decode(s, t, &l), SLM_OK);
        }
        slm_sampler_destroy(smp);
        smp = seeded(500000 + (uint64_t)r);
        back_to_prompt(s);
        slm_spec_params p = slm_spec_params_default();
        p.draft_max = 2;
        p.fixed = true;
        p.sampler = smp;
        p.draft = ds;
        p.mtp = mtp;
        if (fixed_drafter) {
            p.draft_fn = draft_greedy;
            p.draft_user_data = greedy;
        }
        slm_spec *sp = NULL;
        assert_int_equal(slm_spec_create(s, &p, &sp, NULL, 0), SLM_OK);
        int32_t got[N_SAMPLED];
        size_t n_got = 0, n = 0;
        while (n_got < N_SAMPLED) {
            if (slm_spec_step(sp, N_SAMPLED - n_got, got + n_got, &n) != SLM_OK) fail_msg("step: %s", slm_spec_errmsg(sp));
            n_got += n;
        }
        memcpy(spec + r * N_SAMPLED, got, sizeof got);
        slm_spec_stats st;
        slm_spec_get_stats(sp, &st);
        drafted += st.n_drafted;
        accepted += st.n_accepted;
        slm_spec_destroy(sp);
        slm_sampler_destroy(smp);
    }
    bool same_model = draft_arch && !strcmp(draft_arch, "llama");
    /* random MTP weights draft what the target rarely samples: rejections (the residual draw) only */
    if (mtp ? drafted == 0 : same_model ? accepted != drafted : accepted == 0 || accepted == drafted)
        fail_msg("%llu of %llu drafts accepted: the rule is not exercised", (unsigned long long)accepted,
                 (unsigned long long)drafted);
    /* the marginal of each of the first N_SAMPLED tokens */
    for (int i = 0; i < N_SAMPLED; i++) {
        int32_t *a = malloc((size_t)n_seeds * sizeof(int32_t)), *b = malloc((size_t)n_seeds * sizeof(int32_t));
        for (int r = 0; r < n_seeds; r++) a[r] = plain[r * N_SAMPLED + i], b[r] = spec[r * N_SAMPLED + i];
        int df;
        double chi2 = chi2_two_samples(a, b, n_seeds, v, &df);
        fprintf(stderr, "sampling, draft %s: token %d: chi2 %.1f, df %d, 0.1%% point %.1f; %llu/%llu drafts kept\n",
                draft_arch ? draft_arch : fixed_drafter ? "point mass" : mtp ? "mtp" : "lookup", i, chi2, df, chi2_crit(df),
                (unsigned long long)accepted, (unsigned long long)drafted);
        if (df < 2 || chi2 > chi2_crit(df))
            fail_msg("token %d: distribution differs from plain sampling (chi2 %.1f, df %d)", i, chi2, df);
        free(a);
        free(b);
    }
    free(plain);
    free(spec);
    slm_session_destroy(greedy);
    slm_session_destroy(ds);
    slm_session_destroy(s);
    slm_model_destroy(dm);
    slm_model_destroy(m);
}

static void sampling_point_mass(void **u) { (void)u, check_sampling(NULL, true, false); }
static void sampling_draft_model(void **u) { (void)u, check_sampling("llama:q8_0", false, false); }
static void sampling_same_model(void **u) { (void)u, check_sampling("llama", false, false); }
static void sampling_mtp(void **u) { (void)u, check_sampling(NULL, false, true); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lookup_drafter),     cmocka_unit_test(lookup_policy_drafts),
        cmocka_unit_test(verify_accept_all),
        cmocka_unit_test(verify_split_calls), cmocka_unit_test(spec_lookup),
        cmocka_unit_test(spec_all_rejected),  cmocka_unit_test(spec_all_accepted),
        cmocka_unit_test(spec_draft_same_model), cmocka_unit_test(spec_draft_other_model),
        cmocka_unit_test(bad_input),          cmocka_unit_test(draft_tokenizer_differs),
        cmocka_unit_test(sampling_point_mass), cmocka_unit_test(sampling_draft_model),
        cmocka_unit_test(sampling_same_model), cmocka_unit_test(sampling_mtp), cmocka_unit_test(quantised_kv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
