/* profile.c — measuring a plan (slm_plan_profile): runs it in a session of its own and times every
 * step of the plan per call (sess_profile, filled by the executor in session.c), then gives each
 * node of the plan the median of its times. What MLComputePlan estimates, measured. Lives in
 * runtime/ because it needs sessions; compile/ knows nothing of them. */
#include <stdlib.h>
#include <string.h>

#include "base/params.h"
#include "runtime/session.h"

void sess_profile_free(slm_session *s) {
    sess_profile *pf = s->profile;
    if (!pf) return;
    for (int32_t fn = 0; fn < G_MAX_FUNCTIONS; fn++) {
        al_free(&s->alloc, pf->step_s[fn]);
        al_free(&s->alloc, pf->call_s[fn]);
    }
    al_free(&s->alloc, pf);
    s->profile = NULL;
}

static slm_status profile_alloc(slm_session *s, int32_t cap_calls, slm_err *e) {
    sess_profile *pf = al_calloc(&s->alloc, 1, sizeof *pf);
    if (!pf) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    s->profile = pf;
    pf->cap_calls = cap_calls;
    for (int32_t fn = 0; fn < s->prog->n_functions; fn++) {
        size_t steps = (size_t)s->plan->exec[fn].n_steps + 1;
        pf->step_s[fn] = al_calloc(&s->alloc, (size_t)cap_calls * steps, sizeof(double));
        pf->call_s[fn] = al_calloc(&s->alloc, (size_t)cap_calls, sizeof(double));
        if (!pf->step_s[fn] || !pf->call_s[fn]) return err_set(e, SLM_ERR_NOMEM, "out of memory for the profile");
    }
    return SLM_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0], v[stride], ... (n values), sorting tmp. */
static double median(const double *v, int32_t n, size_t stride, double *tmp) {
    for (int32_t i = 0; i < n; i++) tmp[i] = v[(size_t)i * stride];
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

/* Moves the medians of s's profile into pl->measure (replacing what it held). */
static slm_status take_medians(slm_plan *pl, const slm_session *s, int32_t n_prompt, int32_t n_decode, int32_t reps,
                               slm_err *e) {
    const sess_profile *pf = s->profile;
    plan_measure m = {.ran = true, .n_prompt = n_prompt, .n_decode = n_decode, .n_reps = reps};
    double *tmp = al_array(&pl->alloc, (size_t)pf->cap_calls + 1, sizeof(double));
    slm_status st = tmp ? SLM_OK : err_set(e, SLM_ERR_NOMEM, "out of memory");
    for (int32_t fn = 0; fn < pl->legal->n_functions && !st; fn++) {
        int32_t n_steps = pl->exec[fn].n_steps, calls = pf->n_calls[fn];
        m.calls[fn] = calls;
        m.call_us[fn] = calls ? 1e6 * median(pf->call_s[fn], calls, 1, tmp) : -1.0;
        if (!calls) continue;
        if (!(m.step_us[fn] = al_array(&pl->alloc, (size_t)n_steps + 1, sizeof(double)))) {
            st = err_set(e, SLM_ERR_NOMEM, "out of memory");
            break;
        }
        for (int32_t i = 0; i < n_steps; i++)
            m.step_us[fn][i] = 1e6 * median(pf->step_s[fn] + i, calls, (size_t)n_steps, tmp);
    }
    al_free(&pl->alloc, tmp);
    if (st) {
        for (int32_t fn = 0; fn < G_MAX_FUNCTIONS; fn++) al_free(&pl->alloc, m.step_us[fn]);
        return st;
    }
    for (int32_t fn = 0; fn < G_MAX_FUNCTIONS; fn++) al_free(&pl->alloc, pl->measure.step_us[fn]);
    pl->measure = m;
    return SLM_OK;
}

static slm_status session_failed(slm_session *s, slm_status st, slm_err *e) {
    return err_set(e, st, "%s", slm_session_errmsg(s));
}

static slm_status profile_run(slm_plan *pl, const int32_t *prompt, int32_t n_prompt, int32_t n_decode, int32_t reps,
                              int32_t n_threads, slm_err *e) {
    slm_session_params sp = slm_session_params_default();
    sp.n_threads = n_threads;
    sp.kv_type_k = params_kv_type(pl->kv_dtype);
    sp.kv_type_v = params_kv_type(pl->kv_dtype_v);
    sp.kernels = pl->kernels;
    sp.checkpoint_interval = -1; /* one prefill call, not calls split at checkpoints */
    slm_session *s = NULL;
    char msg[sizeof e->msg];
    slm_status st = slm_session_create_from_plan(pl->model, pl, &sp, &s, msg, sizeof msg);
    if (st) return err_set(e, st, "%s", msg);
    int32_t cap = reps > n_decode ? reps : n_decode;
    const float *logits = NULL;
    int32_t token = 0;
    /* warm-up: each function once (the first call prepares the weights it reads) */
    if ((st = profile_alloc(s, cap, e))) goto done;
    if ((st = slm_session_prefill(s, prompt, (size_t)n_prompt, &logits)) ||
        (st = slm_session_decode(s, sess_argmax(logits, s->n_vocab), &logits))) {
        st = session_failed(s, st, e);
        goto done;
    }
    s->profile->recording = true;
    for (int32_t r = 0; r < reps && !st; r++) {
        slm_session_reset(s);
        if ((st = slm_session_prefill(s, prompt, (size_t)n_prompt, &logits))) st = session_failed(s, st, e);
    }
    for (int32_t i = 0; i < n_decode && !st; i++) {
        token = sess_argmax(logits, s->n_vocab);
        if ((st = slm_session_decode(s, token, &logits))) st = session_failed(s, st, e);
    }
    /* verify: the last k prompt tokens in one pass after the rest (the helper calls unrecorded) */
    int32_t k = n_prompt - 1 < 4 ? n_prompt - 1 : 4;
    for (int32_t r = 0; r < reps && !st && s->fn_verify >= 0; r++) {
        s->profile->recording = false;
        slm_session_reset(s);
        if ((st = slm_session_prefill(s, prompt, (size_t)(n_prompt - k), &logits))) st = session_failed(s, st, e);
        s->profile->recording = true;
        if (!st && (st = slm_session_verify(s, prompt + n_prompt - k, (size_t)k, &logits))) st = session_failed(s, st, e);
    }
    if (!st) st = take_medians(pl, s, n_prompt, n_decode, reps, e);
done:
    slm_session_destroy(s);
    return st;
}

SLM_API slm_status slm_plan_profile(slm_plan *pl, const int32_t *prompt, size_t n_prompt, int32_t n_decode, int32_t reps,
                                    int32_t n_threads) {
    if (!pl) return SLM_ERR_INVALID_ARG;
    err_clear(&pl->err);
    if (!pl->model) return err_set(&pl->err, SLM_ERR_INVALID_ARG, "the plan has no model to run");
    if (!pl->target->executable)
        return err_set(&pl->err, SLM_ERR_UNSUPPORTED, "a plan for target %s cannot run here: %s", pl->target->name,
                       pl->target->executable_why);
    if (!prompt || n_prompt < 2 || n_decode < 1 || reps < 1 || n_prompt > (size_t)pl->n_ctx ||
        (int64_t)n_prompt + n_decode + 1 > pl->n_ctx)
        return err_set(&pl->err, SLM_ERR_INVALID_ARG,
                       "profile: a prompt of %zu tokens (at least 2), %d decode steps (at least 1) and %d repetitions "
                       "(at least 1) must fit a %d-token context with one token to spare",
                       n_prompt, n_decode, reps, pl->n_ctx);
    return profile_run(pl, prompt, (int32_t)n_prompt, n_decode, reps, n_threads, &pl->err);
}
