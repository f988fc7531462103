/* simulate.c — runs a plan's original and legalised Programs side by side on the CPU backend and
 * compares their greedy outputs (docs/architecture.md compile/: "a plan for a non-executable target can be
 * simulated"). Lives in runtime/ because it needs sessions; compile/ knows nothing of them. Each
 * Program runs in its own session on its own copy (sessions own their Program). */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "compile/plan.h"
#include "runtime/session.h"

static int32_t argmax(const float *v, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* Both sessions run the reference kernels (the oracle): the check is about the two Programs, and
 * the fast kernels' 8-bit activation rounding would amplify a legalisation's intended f16 casts
 * chaotically on quantised models. */
static slm_status open_session(slm_plan *pl, const g_program *p, int32_t n_threads, slm_session **s, slm_err *e) {
    g_program *copy = graph_clone(p);
    if (!copy) return err_set(e, SLM_ERR_NOMEM, "out of memory copying the program");
    slm_status st = sess_create_program(pl->model, copy, n_threads, pl->n_ctx, pl->kv_dtype, NULL, s, e);
    if (st) return st;
    backend *ref = NULL;
    backend_params bp = {.kind = BACKEND_CPU, .n_threads = (*s)->n_threads, .kernels = "ref"};
    if ((st = backend_create(&(*s)->alloc, &bp, &ref, e))) {
        slm_session_destroy(*s);
        *s = NULL;
        return st;
    }
    (*s)->be->vt->destroy((*s)->be);
    (*s)->be = ref;
    return SLM_OK;
}

/* Feeds tokens[0, n) to s (prefill for n > 1, decode for one). */
static slm_status feed(slm_session *s, const int32_t *tokens, int32_t n, slm_err *e) {
    slm_status st = n == 1 ? slm_session_decode(s, tokens[0], NULL) : slm_session_prefill(s, tokens, (size_t)n, NULL);
    if (st) err_set(e, st, "%s", slm_session_errmsg(s));
    return st;
}

slm_status plan_simulate(slm_plan *pl, const int32_t *prompt, int32_t n_prompt, int32_t n_steps, int32_t n_threads,
                         slm_err *e) {
    memset(&pl->sim, 0, sizeof pl->sim);
    if (n_prompt < 1 || n_steps < 1 || (int64_t)n_prompt + n_steps - 1 > pl->n_ctx)
        return err_set(e, SLM_ERR_INVALID_ARG, "simulation: %d prompt tokens and %d steps do not fit a %d-token context",
                       n_prompt, n_steps, pl->n_ctx);
    slm_session *a = NULL, *b = NULL;
    slm_status st;
    if ((st = open_session(pl, pl->orig, n_threads, &a, e)) || (st = open_session(pl, pl->legal, n_threads, &b, e))) goto done;
    if ((st = feed(a, prompt, n_prompt, e)) || (st = feed(b, prompt, n_prompt, e))) goto done;
    pl->sim.n_prompt = n_prompt;
    pl->sim.first_diff = -1;
    pl->sim.logits_identical = true;
    int32_t nv = a->n_vocab;
    for (int32_t step = 0; step < n_steps; step++) {
        for (int32_t i = 0; i < nv; i++) {
            double d = fabs((double)a->logits[i] - (double)b->logits[i]);
            if (!(d <= pl->sim.max_abs_logit_diff)) pl->sim.max_abs_logit_diff = d; /* NaN sticks */
        }
        if (memcmp(a->logits, b->logits, (size_t)nv * sizeof(float))) pl->sim.logits_identical = false;
        int32_t ta = argmax(a->logits, nv), tb = argmax(b->logits, nv);
        pl->sim.n_steps = step + 1;
        if (ta != tb) {
            pl->sim.first_diff = step;
            pl->sim.token_orig = ta;
            pl->sim.token_legal = tb;
            break;
        }
        if (step + 1 == n_steps) break;
        if ((st = feed(a, &ta, 1, e)) || (st = feed(b, &tb, 1, e))) goto done;
    }
    pl->sim.identical = pl->sim.first_diff < 0;
    pl->sim.ran = true;
done:
    slm_session_destroy(a);
    slm_session_destroy(b);
    return st;
}

SLM_API slm_status slm_plan_simulate(slm_plan *pl, const int32_t *prompt, size_t n_prompt, int32_t n_steps,
                                     int32_t n_threads, bool *identical, int32_t *first_diff) {
    if (identical) *identical = false;
    if (first_diff) *first_diff = -1;
    if (!pl) return SLM_ERR_INVALID_ARG;
    err_clear(&pl->err);
    if (!prompt || n_prompt == 0 || n_prompt > (size_t)INT32_MAX)
        return err_set(&pl->err, SLM_ERR_INVALID_ARG, "simulation needs at least one prompt token");
    slm_status st = plan_simulate(pl, prompt, (int32_t)n_prompt, n_steps, n_threads, &pl->err);
    if (st == SLM_OK) {
        if (identical) *identical = pl->sim.identical;
        if (first_diff) *first_diff = pl->sim.first_diff;
    }
    return st;
}
