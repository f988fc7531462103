/* test_batch.c — slm_session_decode_batch on the tiny llama, qwen3, lfm2, qwen35 and gemma3 models:
 *   (a) 1..8 sessions at different positions decoding together for 20 steps give every session the
 *       logits (bit for bit), states, history and checkpoints of the same session decoding alone,
 *       and rollback and snapshot/restore afterwards continue bit-identically; with 1-thread and
 *       with 2-thread sessions (then 2..8 sessions run their per-session steps concurrently);
 *   (b) refused batches (another model, another context, a session twice, a bad token id, a full
 *       context, the abort callback mid-step) fail with every session unchanged: the next batch
 *       gives the reference bits;
 *   (c) the plan marks the steps on states and positions per session, the matmuls batched, and a
 *       batch of 4 runs each batched step once (on the first session) and every other step once
 *       per session (executor trace);
 *   (d) an allocation-failure sweep: every refused allocation gives SLM_ERR_NOMEM with every
 *       session unchanged, and the batch that finally succeeds gives the reference bits.
 * References come from plain slm_session_prefill / slm_session_decode calls, never from a batch. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/session.h" /* white box: state buffers, the plan's steps */
#include "statelm.h"

enum { N_CTX = 64, N_STEPS = 20, MAX_B = 8 };

static const char *const archs[] = {"llama", "qwen3", "lfm2", "qwen35", "gemma3", "llama:q8_0", "qwen35:q8_0"};
#define N_ARCH (int)(sizeof archs / sizeof archs[0])

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

static int abort_countdown; /* the abort callback fires when it reaches 0 */
static bool abort_after(void *user) {
    (void)user;
    return --abort_countdown == 0;
}

static slm_session *new_session_threads(const slm_model *m, int32_t n_ctx, bool with_abort, int32_t n_threads) {
    slm_session_params p = slm_session_params_default();
    p.n_ctx = n_ctx;
    p.n_threads = n_threads;
    p.checkpoint_interval = 8;
    if (with_abort) p.abort_fn = abort_after;
    slm_session *s = NULL;
    char err[512];
    if (slm_session_create(m, &p, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
    return s;
}

static slm_session *new_session(const slm_model *m, int32_t n_ctx, bool with_abort) {
    return new_session_threads(m, n_ctx, with_abort, 1);
}

static void prompt_of(int32_t i, int32_t len, int32_t n_vocab, int32_t *out) {
    for (int32_t t = 0; t < len; t++)
        out[t] = (int32_t)((7919u * (uint32_t)(i + 1) + 104729u * (uint32_t)t) % (uint32_t)n_vocab);
}

/* Everything a decode leaves behind, compared bit for bit: position, history, logits, the current
 * buffer of every state, checkpoint positions. */
static void assert_same_session(slm_session *a, slm_session *b) {
    assert_int_equal(a->pos, b->pos);
    assert_memory_equal(a->history, b->history, (size_t)a->pos * sizeof(int32_t));
    assert_int_equal(a->logits_valid, b->logits_valid);
    assert_memory_equal(a->logits, b->logits, (size_t)a->n_vocab * sizeof(float));
    for (int32_t k = 0; k < a->prog->n_states; k++)
        assert_memory_equal(a->states[k].buf[a->states[k].front], b->states[k].buf[b->states[k].front],
                            a->states[k].bytes);
    size_t na = 0, nb = 0;
    const int32_t *ca = slm_session_checkpoints(a, &na), *cb = slm_session_checkpoints(b, &nb);
    assert_int_equal(na, nb);
    if (na) assert_memory_equal(ca, cb, na * sizeof(int32_t));
}

/* (a) for the models arch_list and each batch size, sessions of n_threads threads */
static void equals_alone(const char *const *arch_list, int n_arch, const int32_t *batch_sizes, int n_sizes,
                         int32_t n_threads) {
    for (int a = 0; a < n_arch; a++) {
        slm_model *m = load(arch_list[a]);
        for (int bi = 0; bi < n_sizes; bi++) {
            int32_t nb = batch_sizes[bi];
            slm_session *bat[MAX_B], *ref[MAX_B];
            int32_t tok[MAX_B], prompt[32];
            const float *lg[MAX_B];
            for (int32_t i = 0; i < nb; i++) {
                bat[i] = new_session_threads(m, N_CTX, false, n_threads);
                ref[i] = new_session_threads(m, N_CTX, false, n_threads);
                int32_t len = 1 + 3 * i; /* different positions */
                prompt_of(i, len, bat[i]->n_vocab, prompt);
                assert_int_equal(slm_session_prefill(bat[i], prompt, (size_t)len, NULL), SLM_OK);
                assert_int_equal(slm_session_prefill(ref[i], prompt, (size_t)len, NULL), SLM_OK);
            }
            char err[256];
            for (int step = 0; step < N_STEPS; step++) {
                for (int32_t i = 0; i < nb; i++) {
                    tok[i] = tu_argmax(ref[i]->logits, ref[i]->n_vocab);
                    assert_int_equal(slm_session_decode(ref[i], tok[i], NULL), SLM_OK);
                }
                slm_status st = slm_session_decode_batch(bat, tok, (size_t)nb, lg, err, sizeof err);
                if (st) fail_msg("%s, %d sessions of %d threads, step %d: %s", arch_list[a], nb, n_threads, step, err);
                for (int32_t i = 0; i < nb; i++) {
                    assert_ptr_equal(lg[i], bat[i]->logits);
                    assert_same_session(bat[i], ref[i]);
                }
            }
            /* afterwards: rollback, snapshot/restore continue like the reference */
            for (int32_t i = 0; i < nb; i++) {
                slm_snapshot *snap = NULL;
                assert_int_equal(slm_session_snapshot(bat[i], &snap), SLM_OK);
                int32_t back = bat[i]->pos - 5;
                assert_int_equal(slm_session_rollback(bat[i], back), SLM_OK);
                assert_int_equal(slm_session_rollback(ref[i], back), SLM_OK);
                assert_int_equal(slm_session_decode(bat[i], 3, NULL), SLM_OK);
                assert_int_equal(slm_session_decode(ref[i], 3, NULL), SLM_OK);
                assert_same_session(bat[i], ref[i]);
                assert_int_equal(slm_session_restore(bat[i], snap), SLM_OK);
                assert_int_equal(slm_session_restore(ref[i], snap), SLM_OK);
                assert_int_equal(slm_session_decode(bat[i], 5, NULL), SLM_OK);
                assert_int_equal(slm_session_decode(ref[i], 5, NULL), SLM_OK);
                assert_same_session(bat[i], ref[i]);
                slm_snapshot_destroy(snap);
            }
            for (int32_t i = 0; i < nb; i++) {
                slm_session_destroy(bat[i]);
                slm_session_destroy(ref[i]);
            }
        }
        slm_model_destroy(m);
    }
}

static void batch_equals_alone(void **state) {
    (void)state;
    static const int32_t batch_sizes[] = {1, 2, 3, 8};
    equals_alone(archs, N_ARCH, batch_sizes, 4, 1);
}

/* (a) with 2-thread sessions: fewer sessions than threads step one after another over the lead's
 * threads; from 2 on, each per-session step is one job whose tasks are the sessions (threads run
 * different sessions' steps at once) */
static void batch_equals_alone_threaded(void **state) {
    (void)state;
    static const char *const threaded_archs[] = {"llama", "lfm2", "qwen35", "qwen35:q8_0"};
    static const int32_t batch_sizes[] = {1, 2, 4, 8};
    equals_alone(threaded_archs, 4, batch_sizes, 4, 2);
}

/* One good batch after a refusal: every session must give the reference bits. */
static void good_step(slm_session **bat, slm_session **ref, int32_t nb) {
    int32_t tok[MAX_B];
    char err[256];
    for (int32_t i = 0; i < nb; i++) {
        tok[i] = tu_argmax(ref[i]->logits, ref[i]->n_vocab);
        assert_int_equal(slm_session_decode(ref[i], tok[i], NULL), SLM_OK);
    }
    if (slm_session_decode_batch(bat, tok, (size_t)nb, NULL, err, sizeof err)) fail_msg("%s", err);
    for (int32_t i = 0; i < nb; i++) assert_same_session(bat[i], ref[i]);
}

/* (b) */
static void refusals_change_nothing(void **state) {
    (void)state;
    static const char *const refusal_archs[] = {"llama", "lfm2", "qwen35", "gemma3"};
    slm_model *other = load("qwen3");
    for (size_t a = 0; a < sizeof refusal_archs / sizeof refusal_archs[0]; a++) {
        slm_model *m = load(refusal_archs[a]);
        enum { NB = 3 };
        slm_session *bat[NB + 1], *ref[NB];
        int32_t prompt[16], tok[NB + 1];
        const float *lg[NB + 1];
        char err[256];
        for (int32_t i = 0; i < NB; i++) {
            bat[i] = new_session(m, N_CTX, true);
            ref[i] = new_session(m, N_CTX, false);
            prompt_of(i, 2 + 4 * i, bat[i]->n_vocab, prompt);
            assert_int_equal(slm_session_prefill(bat[i], prompt, (size_t)(2 + 4 * i), NULL), SLM_OK);
            assert_int_equal(slm_session_prefill(ref[i], prompt, (size_t)(2 + 4 * i), NULL), SLM_OK);
            tok[i] = 1 + i;
        }
        good_step(bat, ref, NB);
        abort_countdown = -1;
        /* another model */
        slm_session *o = new_session(other, N_CTX, false);
        slm_session *mixed[2] = {bat[0], o};
        assert_int_equal(slm_session_decode_batch(mixed, tok, 2, lg, err, sizeof err), SLM_ERR_INVALID_ARG);
        assert_non_null(strstr(err, "model"));
        assert_null(lg[0]);
        slm_session_destroy(o);
        /* another context size */
        o = new_session(m, N_CTX + 8, false);
        mixed[1] = o;
        assert_int_equal(slm_session_decode_batch(mixed, tok, 2, lg, err, sizeof err), SLM_ERR_INVALID_ARG);
        /* a full context in one session */
        int32_t fill[N_CTX + 8];
        prompt_of(9, N_CTX + 8, bat[0]->n_vocab, fill);
        assert_int_equal(slm_session_prefill(o, fill, N_CTX + 8, NULL), SLM_OK);
        slm_session_destroy(o);
        o = new_session(m, N_CTX, false);
        assert_int_equal(slm_session_prefill(o, fill, N_CTX, NULL), SLM_OK);
        bat[NB] = o;
        tok[NB] = 1;
        assert_int_equal(slm_session_decode_batch(bat, tok, NB + 1, lg, err, sizeof err), SLM_ERR_CONTEXT_FULL);
        assert_int_equal(o->pos, N_CTX);
        slm_session_destroy(o);
        /* a session twice */
        slm_session *dup[3] = {bat[0], bat[1], bat[0]};
        assert_int_equal(slm_session_decode_batch(dup, tok, 3, lg, err, sizeof err), SLM_ERR_INVALID_ARG);
        /* a bad token id */
        tok[1] = bat[1]->n_token_ids;
        assert_int_equal(slm_session_decode_batch(bat, tok, NB, lg, err, sizeof err), SLM_ERR_RANGE);
        tok[1] = -1;
        assert_int_equal(slm_session_decode_batch(bat, tok, NB, lg, err, sizeof err), SLM_ERR_RANGE);
        tok[1] = 2;
        /* nothing */
        assert_int_equal(slm_session_decode_batch(bat, tok, 0, lg, err, sizeof err), SLM_ERR_INVALID_ARG);
        assert_int_equal(slm_session_decode_batch(NULL, tok, NB, lg, err, sizeof err), SLM_ERR_INVALID_ARG);
        good_step(bat, ref, NB);
        /* the abort callback deep inside the step, after states have been written */
        for (int countdown = 2; countdown < 40; countdown += 7) {
            abort_countdown = countdown;
            slm_status st = slm_session_decode_batch(bat, tok, NB, lg, err, sizeof err);
            abort_countdown = -1;
            if (st == SLM_OK) { /* the step ended before the callback fired: keep the references level */
                for (int32_t i = 0; i < NB; i++) assert_int_equal(slm_session_decode(ref[i], tok[i], NULL), SLM_OK);
                for (int32_t i = 0; i < NB; i++) assert_same_session(bat[i], ref[i]);
                continue;
            }
            assert_int_equal(st, SLM_ERR_ABORTED);
            assert_null(lg[0]);
            good_step(bat, ref, NB);
        }
        for (int32_t i = 0; i < NB; i++) {
            slm_session_destroy(bat[i]);
            slm_session_destroy(ref[i]);
        }
        slm_model_destroy(m);
    }
    slm_model_destroy(other);
}

typedef struct step_count {
    int32_t fn;
    int32_t *runs; /* (n_steps) */
} step_count;

static void count_step(void *user, int32_t fn, int32_t step, const int32_t *nodes, int32_t n_nodes) {
    (void)nodes;
    (void)n_nodes;
    step_count *c = user;
    if (fn == c->fn) c->runs[step]++;
}

/* (c) */
static void plan_marks_batched_steps(void **state) {
    (void)state;
    for (int a = 0; a < 5; a++) {
        slm_model *m = load(archs[a]);
        slm_session *s = new_session(m, N_CTX, false);
        int32_t fn = s->fn_verify, n_batched_matmul = 0;
        assert_true(fn >= 0);
        const g_program *p = s->prog;
        const plan_fn_exec *x = &s->plan->exec[fn];
        for (int32_t i = 0; i < x->n_steps; i++) {
            const plan_step *ps = &x->steps[i];
            for (int32_t k = 0; k < ps->n_nodes; k++) {
                g_op op = p->nodes[p->functions[fn].nodes[ps->nodes[k]]].op;
                if (op == G_OP_STATE_READ || op == G_OP_STATE_WRITE || op == G_OP_ROPE || op == G_OP_ATTENTION ||
                    op == G_OP_CONV1D || op == G_OP_DELTANET || op == G_OP_ONEHOT || op == G_OP_CONCAT)
                    assert_false(ps->batched);
                if (op == G_OP_MATMUL && ps->batched) n_batched_matmul++;
            }
        }
        assert_true(n_batched_matmul > 0);
        /* what runs: batched steps once on the first session, the others once on every session */
        enum { NB = 4 };
        slm_session *bat[NB] = {s};
        step_count counts[NB];
        int32_t tok[NB];
        for (int32_t b = 0; b < NB; b++) {
            if (b) bat[b] = new_session(m, N_CTX, false);
            int32_t one = 1 + b;
            assert_int_equal(slm_session_prefill(bat[b], &one, 1, NULL), SLM_OK);
            counts[b].fn = fn;
            counts[b].runs = calloc((size_t)x->n_steps, sizeof(int32_t));
            bat[b]->trace = count_step;
            bat[b]->trace_user = &counts[b];
            tok[b] = 2 + b;
        }
        char err[256];
        if (slm_session_decode_batch(bat, tok, NB, NULL, err, sizeof err)) fail_msg("%s", err);
        for (int32_t i = 0; i < x->n_steps; i++)
            for (int32_t b = 0; b < NB; b++)
                assert_int_equal(counts[b].runs[i], x->steps[i].batched ? (b == 0) : 1);
        for (int32_t b = 0; b < NB; b++) {
            bat[b]->trace = NULL;
            free(counts[b].runs);
            if (b) slm_session_destroy(bat[b]);
        }
        for (int32_t g = 0; g < p->n_functions; g++) /* the batch runs only verify */
            for (int32_t i = 0; g != fn && i < s->plan->exec[g].n_steps; i++)
                assert_false(s->plan->exec[g].steps[i].batched);
        slm_session_destroy(s);
        slm_model_destroy(m);
    }
}

/* (d) */
static void alloc_failure_sweep(void **state) {
    (void)state;
    static const char *const files[] = {"tiny/llama/llama-q8_0.gguf", "tiny/qwen35/qwen35-f32.gguf",
                                        "tiny/lfm2/lfm2-f32.gguf"};
    for (size_t a = 0; a < sizeof files / sizeof files[0]; a++) {
        tu_failing f = tu_failing_at(-1);
        slm_model_params mp = slm_model_params_default();
        mp.alloc_fn = tu_fail_alloc;
        mp.free_fn = tu_fail_free;
        mp.alloc_user_data = &f;
        slm_model *m = NULL;
        char err[256];
        if (slm_model_load(tu_data_path(files[a]), &mp, &m, err, sizeof err)) fail_msg("%s", err);
        enum { NB = 3 };
        slm_session *bat[NB], *ref[NB];
        int32_t prompt[16], tok[NB];
        for (int32_t i = 0; i < NB; i++) {
            bat[i] = new_session(m, N_CTX, false);
            ref[i] = new_session(m, N_CTX, false);
            prompt_of(i, 3 + 2 * i, bat[i]->n_vocab, prompt);
            assert_int_equal(slm_session_prefill(bat[i], prompt, (size_t)(3 + 2 * i), NULL), SLM_OK);
            assert_int_equal(slm_session_prefill(ref[i], prompt, (size_t)(3 + 2 * i), NULL), SLM_OK);
        }
        for (int32_t nb = 2; nb <= NB; nb++) { /* the second batch is larger: its memory grows again */
            for (int32_t i = 0; i < nb; i++) tok[i] = tu_argmax(ref[i]->logits, ref[i]->n_vocab);
            int32_t pos[NB];
            for (int32_t i = 0; i < nb; i++) pos[i] = bat[i]->pos;
            long k = 0, failures = 0;
            for (;; k++) {
                assert_true(k < 10000);
                f.fail_at = f.n_alloc + k;
                f.n_refused = 0;
                slm_status st = slm_session_decode_batch(bat, tok, (size_t)nb, NULL, err, sizeof err);
                f.fail_at = -1;
                if (st == SLM_OK && f.n_refused) { /* a best-effort checkpoint was refused: undo, go on */
                    for (int32_t i = 0; i < nb; i++) assert_int_equal(slm_session_rollback(bat[i], pos[i]), SLM_OK);
                    continue;
                }
                if (st == SLM_OK) break;
                assert_int_equal(st, SLM_ERR_NOMEM);
                assert_true(err[0] != '\0');
                failures++;
                for (int32_t i = 0; i < nb; i++) {
                    assert_int_equal(bat[i]->pos, pos[i]);
                    assert_true(slm_session_errmsg(bat[i])[0] != '\0');
                }
            }
            assert_true(failures > 0);
            for (int32_t i = 0; i < nb; i++) {
                assert_int_equal(slm_session_decode(ref[i], tok[i], NULL), SLM_OK);
                assert_same_session(bat[i], ref[i]);
            }
        }
        for (int32_t i = 0; i < NB; i++) {
            slm_session_destroy(bat[i]);
            slm_session_destroy(ref[i]);
        }
        slm_model_destroy(m);
        assert_int_equal(f.n_live, 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batch_equals_alone),
        cmocka_unit_test(batch_equals_alone_threaded),
        cmocka_unit_test(refusals_change_nothing),
        cmocka_unit_test(plan_marks_batched_steps),
        cmocka_unit_test(alloc_failure_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
