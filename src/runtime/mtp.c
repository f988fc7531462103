/* mtp.c — the multi-token-prediction drafter (runtime/mtp.h). Catch-up calls run the MTP
 * program's "prefill" over at most MDL_MTP_MAX_CALL positions, draft steps its "decode"; before
 * each call the hidden states paired with the call's tokens are written into columns [0, n) of
 * the program's MDL_MTP_H_STATE state, which the program reads and never writes. */
#include "runtime/mtp.h"

#include <string.h>

#include "model/build.h"
#include "runtime/session.h"

struct mtp_drafter {
    slm_allocator alloc;
    slm_session *s;   /* over the MTP program */
    int32_t d;        /* n_embd */
    int32_t h_state;  /* index of MDL_MTP_H_STATE in s's program */
    int32_t valid;    /* see the invariant in mtp.h */
    int32_t *tokens;  /* (n_ctx) */
};

slm_status mtp_create(slm_session *target, mtp_drafter **out, slm_err *e) {
    *out = NULL;
    if (!target->mtp_hist || !target->model)
        return err_set(e, SLM_ERR_INVALID_ARG, "multi-token prediction needs a target session created with "
                       "slm_session_params.mtp");
    g_program *prog = NULL;
    slm_status st = mdl_build_mtp_program(target->model, target->n_ctx, target->kv_dtype, &prog, e);
    if (st) return st;
    mtp_drafter *d = al_calloc(&target->alloc, 1, sizeof *d);
    if (!d) {
        graph_destroy(prog);
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    d->alloc = target->alloc;
    d->d = target->mtp_embd;
    if ((st = sess_create_program(target->model, prog, target->n_threads, target->n_ctx, target->kv_dtype,
                                  target->plan->kernels, &d->s, e))) {
        al_free(&d->alloc, d);
        return st;
    }
    d->h_state = -1;
    for (int32_t i = 0; i < d->s->prog->n_states; i++)
        if (!strcmp(d->s->prog->states[i].name, MDL_MTP_H_STATE)) d->h_state = i;
    d->tokens = al_calloc(&d->alloc, (size_t)target->n_ctx, sizeof(int32_t));
    if (d->h_state < 0 || !d->tokens) {
        mtp_destroy(d);
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    *out = d;
    return SLM_OK;
}

void mtp_destroy(mtp_drafter *d) {
    if (!d) return;
    slm_allocator a = d->alloc;
    slm_session_destroy(d->s);
    al_free(&a, d->tokens);
    al_free(&a, d);
}

/* Column j of the hidden-state input: h (d floats), zeros when h is NULL. */
static void put_h(mtp_drafter *d, int32_t j, const float *h) {
    sess_state *ss = &d->s->states[d->h_state];
    float *col = (float *)ss->buf[ss->front] + (size_t)j * (size_t)d->d;
    if (h) memcpy(col, h, (size_t)d->d * sizeof(float));
    else memset(col, 0, (size_t)d->d * sizeof(float));
}

/* The target's hidden state of position p - 1 (NULL = zeros, at p = 0). */
static const float *target_h(const slm_session *t, int32_t p) {
    return p > 0 ? t->mtp_hist + (size_t)(p - 1) * (size_t)t->mtp_embd : NULL;
}

/* Runs fn over tokens at position pos (columns of the hidden-state input already filled). */
static slm_status run_at(mtp_drafter *d, int32_t fn, const int32_t *tokens, int32_t n, int32_t pos, slm_err *e) {
    d->s->pos = pos;
    slm_status st = sess_run(d->s, fn, tokens, n);
    if (st) return err_set(e, st, "MTP block: %s", d->s->err.msg);
    return SLM_OK;
}

slm_status mtp_draft(mtp_drafter *d, slm_session *t, int32_t next, int32_t *draft, size_t n_max, size_t *n_draft,
                     slm_err *e) {
    *n_draft = 0;
    const int32_t P = t->pos;
    slm_status st;
    /* the rows still made from the target's history */
    int32_t v = d->valid < P ? d->valid : P;
    for (int32_t i = 0; i < v; i++)
        if (d->tokens[i] != t->history[i]) {
            v = i;
            break;
        }
    /* catch up: positions [v, P) from the target's tokens and hidden states ("prefill", also for
     * one position: it has no head, which costs a third of a Qwen3.5-0.8B decode step) */
    while (v < P) {
        int32_t n = P - v < MDL_MTP_MAX_CALL ? P - v : MDL_MTP_MAX_CALL;
        for (int32_t j = 0; j < n; j++) put_h(d, j, target_h(t, v + j));
        if ((st = run_at(d, d->s->fn_prefill, t->history + v, n, v, e))) {
            d->valid = v;
            return st;
        }
        memcpy(d->tokens + v, t->history + v, (size_t)n * sizeof(int32_t));
        v += n;
    }
    d->valid = P;
    /* draft: (next, target h of P - 1) at P, then (draft i, the MTP's own h) at P + 1 + i */
    const g_function *dec = &d->s->prog->functions[d->s->fn_decode];
    int32_t tok = next;
    put_h(d, 0, target_h(t, P));
    for (size_t i = 0; i < n_max && P + (int32_t)i < d->s->n_ctx; i++) {
        if ((st = run_at(d, d->s->fn_decode, &tok, 1, P + (int32_t)i, e))) return st;
        draft[i] = tok = sess_argmax(d->s->logits, d->s->n_vocab);
        *n_draft = i + 1;
        put_h(d, 0, (const float *)sess_tensor_data(d->s, dec->aux));
    }
    return SLM_OK;
}
