/* spec.c — speculative decoding: verify (k proposed tokens in one pass, logits of every one),
 * accept (keep the first n of them, exactly as if only those had been decoded one by one), the
 * prompt-lookup drafter and the greedy speculation driver (slm_spec) over a drafter or a draft
 * model session.
 *
 * Exactness rests on batch invariance (runtime/state.c): the verify function computes each column
 * as a decode of that token would, so row i of a verify equals the logits of decoding tokens[i].
 * KV rows beyond the kept position are scratch (session.h inv. 1). On hybrids, a verify of one
 * Program call is accepted in part without the weights by the plan's accept steps (compile/plan.h,
 * "the accept plan"; sess_run_accept): conv states from the last columns of (state before, the
 * call's conv inputs), DeltaNet states by re-running only the recurrence over the kept columns of
 * its inputs; KV rings lost no row of the window (a call writes at most R - W rows). Such a verify
 * copies no state: the call leaves the states before it in the back buffers of the
 * double-buffered states (session.h inv. 2), where accept rebuilds them in place (sess_run_accept)
 * or, keeping nothing, makes them current again. A verify split into several calls, or a plan
 * whose accept replays (statelm plan says why), saves the checkpointed states before it
 * (verify_state, ckpt_bytes) and replays the kept tokens from them; sessions count those replays. */
#include <string.h>
#include <time.h>

#include "base/params.h"
#include "runtime/lookup.h"
#include "runtime/mtp.h"
#include "runtime/session.h"

/* Grows the verify buffers for the logits before the verify and, unless they stay in the arena,
 * the k rows of the verified tokens; the record of the states before it: their fronts (in place)
 * or a copy (saved). */
static slm_status verify_reserve(slm_session *s, int32_t k, bool saved) {
    if (s->has_recurrent && !s->verify_front &&
        !(s->verify_front = al_calloc(&s->alloc, (size_t)s->prog->n_states + 1, 1)))
        return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for the verify record");
    if (saved && !s->verify_state && !(s->verify_state = al_malloc(&s->alloc, s->ckpt_bytes)))
        return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for the verify record");
    if (k + 1 <= s->verify_cap) return SLM_OK; /* k = 0: the row before only */
    float *rows = al_malloc(&s->alloc, (size_t)(k + 1) * (size_t)s->n_vocab * sizeof(float));
    if (!rows) return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for %d rows of logits", k);
    al_free(&s->alloc, s->verify_logits);
    s->verify_logits = rows;
    s->verify_cap = k + 1;
    return SLM_OK;
}

/* Makes the states before the verify current again: the fronts they had (in place: the verify's
 * one call left them in the back buffers), else the saved copy. */
static void verify_states_restore(slm_session *s) {
    if (!s->verify_in_place) {
        sess_states_load(s, s->verify_state);
        return;
    }
    for (int32_t i = 0; i < s->prog->n_states; i++) s->states[i].front = s->verify_front[i];
}

/* Puts s back where it stood before the verify at p0. */
static void verify_undo(slm_session *s, int32_t p0, bool had_logits) {
    if (s->has_recurrent) verify_states_restore(s);
    s->pos = p0;
    memcpy(s->logits, s->verify_logits, (size_t)s->n_vocab * sizeof(float));
    s->logits_valid = had_logits;
}

/* Row i of the logits of a verify of k tokens (i < k), or the logits before it (i = k). */
static const float *verify_row(const slm_session *s, int32_t i, int32_t k) {
    return i < k ? s->verify_rows + (size_t)i * (size_t)s->n_vocab : s->verify_logits;
}

SLM_API slm_status slm_session_verify(slm_session *s, const int32_t *tokens, size_t k, const float **logits) {
    if (logits) *logits = NULL;
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    if (!tokens && k) return err_set(&s->err, SLM_ERR_INVALID_ARG, "tokens is NULL");
    slm_status st = sess_check_tokens(s, tokens, k);
    if (st) return st;
    if (s->fn_verify < 0) return err_set(&s->err, SLM_ERR_UNSUPPORTED, "the program has no verify function");
    int32_t n = (int32_t)k, p0 = s->pos, max_call = s->prog->max_call_tokens;
    bool had_logits = s->logits_valid;
    /* one call of a plan that rebuilds: nothing to copy (the back buffers keep the states before) */
    bool one_call = max_call <= 0 || n <= max_call, in_place = one_call && !s->plan->accept.replay;
    /* the rows stay in the arena unless an accept could replay (which runs calls before reading them) */
    bool rows_in_arena = one_call && (in_place || !s->has_recurrent);
    if ((st = verify_reserve(s, rows_in_arena ? 0 : n, s->has_recurrent && !in_place))) return st;
    size_t v = (size_t)s->n_vocab;
    memcpy(s->verify_logits, s->logits, v * sizeof(float));
    s->verify_in_place = in_place;
    for (int32_t i = 0; s->has_recurrent && i < s->prog->n_states; i++)
        s->verify_front[i] = (uint8_t)s->states[i].front;
    if (s->has_recurrent && !in_place) sess_states_save(s, s->verify_state);
    for (int32_t done = 0; done < n;) {
        int32_t len = n - done;
        if (max_call > 0 && len > max_call) len = max_call;
        int32_t fn = len == 1 ? s->fn_decode : s->fn_verify;
        if ((st = sess_run(s, fn, tokens + done, len))) {
            if (done) verify_undo(s, p0, had_logits);
            return st;
        }
        if (!rows_in_arena)
            memcpy(s->verify_logits + (size_t)(1 + done) * v, sess_call_logits(s, fn), (size_t)len * v * sizeof(float));
        done += len;
    }
    s->verify_rows = rows_in_arena ? sess_call_logits(s, n == 1 ? s->fn_decode : s->fn_verify) : s->verify_logits + v;
    s->verify_k = n;
    s->verify_pos = p0;
    s->verify_fn = max_call > 0 && n > max_call ? -1 : n == 1 ? s->fn_decode : s->fn_verify;
    s->verify_had_logits = had_logits;
    if (logits) *logits = s->verify_rows;
    return SLM_OK;
}

SLM_API slm_status slm_session_accept(slm_session *s, size_t n_keep, const float **logits) {
    if (logits) *logits = NULL;
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    int32_t k = s->verify_k, p0 = s->verify_pos;
    if (k == 0)
        return err_set(&s->err, SLM_ERR_STATE, "nothing to accept: the last call on the session was not a verify");
    if (n_keep > (size_t)k)
        return err_set(&s->err, SLM_ERR_RANGE, "cannot keep %zu tokens of a verify of %d", n_keep, k);
    int32_t keep = (int32_t)n_keep;
    size_t v = (size_t)s->n_vocab;
    slm_status st = SLM_OK;
    /* hybrids: run the plan's accept steps when the verify was one call of the function they follow
     * (then KV rings lost no row of the window: a call writes at most R - W rows) and the plan
     * rebuilds every state; else replay the kept tokens (counted) */
    bool partial = keep > 0 && keep < k && s->has_recurrent;
    bool rebuilt = partial && s->verify_fn == s->plan->accept.fn && !s->plan->accept.replay;
    if (rebuilt && (st = sess_run_accept(s, s->verify_in_place ? NULL : s->verify_state, p0, keep))) return st;
    if (rebuilt) {
        s->pos = p0 + keep;
        memcpy(s->logits, verify_row(s, keep - 1, k), v * sizeof(float));
    } else if (keep == 0 && s->has_recurrent) {
        verify_states_restore(s);
        s->pos = p0;
    } else if (keep < k && s->has_recurrent) {
        if ((st = sess_undo_begin(s, p0))) return st;
        sess_states_load(s, s->verify_state);
        s->pos = p0;
        if (keep > 0 && (st = sess_feed(s, s->history + p0, keep, false))) {
            sess_undo_restore(s);
            sess_ckpt_drop_after(s, p0);
            memcpy(s->logits, verify_row(s, k - 1, k), v * sizeof(float));
            s->logits_valid = true;
            s->verify_k = k; /* the replay cleared it: the verify still stands */
            return st;
        }
    } else if (keep < k) {
        s->pos = p0 + keep;
        if (keep > 0) memcpy(s->logits, verify_row(s, keep - 1, k), v * sizeof(float));
    }
    if (keep == 0) {
        memcpy(s->logits, verify_row(s, k, k), v * sizeof(float));
        s->logits_valid = s->verify_had_logits;
    } else {
        s->logits_valid = true;
    }
    s->verify_k = 0;
    s->n_accept_replays += partial && !rebuilt;
    int32_t every = s->ckpt_interval;
    if (s->has_recurrent && every > 0 && p0 / every != s->pos / every) sess_ckpt_take(s);
    if (logits && s->logits_valid) *logits = s->logits;
    return SLM_OK;
}

/* ---- drafters and the greedy driver --------------------------------------------------------- */

SLM_API size_t slm_draft_lookup(const int32_t *history, size_t n_history, int32_t *draft, size_t n_max) {
    if (!history || !draft || n_max == 0) return 0;
    lookup_match m = lookup_find(history, n_history);
    size_t n = m.n_avail < n_max ? m.n_avail : n_max;
    memcpy(draft, history + m.start, n * sizeof *draft);
    return n;
}

struct slm_spec {
    slm_allocator alloc;
    slm_session *target;
    slm_session *draft;       /* NULL = mtp or draft_fn */
    mtp_drafter *mtp;         /* the target's own MTP block, or NULL */
    slm_draft_fn draft_fn;
    void *draft_user_data;
    bool fixed;
    bool lookup;              /* the built-in prompt lookup, with its own draft-length policy */
    lookup_policy policy;
    lookup_match match;       /* of the last step's draft */
    int32_t draft_max;
    int32_t draft_len;        /* current K in [1, draft_max]; prompt lookup: the last draft's length */
    int32_t skip;             /* steps left without drafting (after fully rejected single drafts) */
    int32_t backoff;          /* next skip */
    int32_t *hist;            /* (target n_ctx + 66): the target's history, the next token, the draft */
    slm_sampler *sampler;     /* speculative sampling, NULL = greedy */
    int32_t pending;          /* sampling: the replacement of the last rejected draft, or -1 */
    int32_t pending_pos;      /* the target position pending belongs at */
    float *probs;             /* (n_vocab) p of one position */
    float *q;                 /* (draft_max, n_vocab) the draft model's q of each draft token */
    int32_t *feed;            /* (draft_max + 1): the greedy token, then the draft */
    size_t last_draft, last_ok; /* the last step's draft (feed[1, 1 + last_draft)) and how much was kept */
    slm_spec_stats stats;
    slm_err err;
};

SLM_API slm_spec_params slm_spec_params_default(void) {
    slm_spec_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.draft_max = 8;
    p.verify_cost = 0.3f;
    return p;
}

static slm_status same_tokenizer(const slm_session *t, const slm_session *d, slm_err *e) {
    if (t->n_vocab != d->n_vocab || t->n_token_ids != d->n_token_ids)
        return err_set(e, SLM_ERR_INVALID_ARG,
                       "the draft model has %d tokens (%d logits), the target %d (%d logits): a draft model needs the "
                       "target's tokenizer",
                       d->n_token_ids, d->n_vocab, t->n_token_ids, t->n_vocab);
    const slm_tokenizer *a = t->model ? slm_model_tokenizer(t->model) : NULL;
    const slm_tokenizer *b = d->model ? slm_model_tokenizer(d->model) : NULL;
    if (!a != !b) return err_set(e, SLM_ERR_INVALID_ARG, "only one of the target and the draft model has a tokenizer");
    if (!a) return SLM_OK;
    int32_t n = slm_tokenizer_n_vocab(a);
    if (n != slm_tokenizer_n_vocab(b))
        return err_set(e, SLM_ERR_INVALID_ARG, "the draft model's tokenizer has %d tokens, the target's %d",
                       slm_tokenizer_n_vocab(b), n);
    for (int32_t i = 0; i < n; i++) {
        const char *x = slm_tokenizer_token_text(a, i), *y = slm_tokenizer_token_text(b, i);
        if (strcmp(x ? x : "", y ? y : "") != 0)
            return err_set(e, SLM_ERR_INVALID_ARG, "the draft model's tokenizer differs from the target's at token %d", i);
    }
    return SLM_OK;
}

SLM_API slm_status slm_spec_create(slm_session *target, const slm_spec_params *params, slm_spec **out, char *err,
                                   size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (out) *out = NULL;
    slm_spec_params d = slm_spec_params_default(), p = d;
    params_read(&p, sizeof p, params);
    if (p.draft_max == 0) p.draft_max = d.draft_max;
    if (p.verify_cost == 0.0f) p.verify_cost = d.verify_cost;
    slm_status st = SLM_OK;
    slm_spec *sp = NULL;
    if (!target || !out) st = err_set(&e, SLM_ERR_INVALID_ARG, "slm_spec_create: target and out are required");
    else if (p.draft_max < 1 || p.draft_max > 64)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "draft_max %d is out of range [1, 64]", p.draft_max);
    else if (!(p.verify_cost > 0.0f && p.verify_cost <= 100.0f))
        st = err_set(&e, SLM_ERR_INVALID_ARG, "verify_cost %g is out of range (0, 100]", (double)p.verify_cost);
    else if (p.draft == target) st = err_set(&e, SLM_ERR_INVALID_ARG, "the draft session is the target session");
    else if (target->fn_verify < 0) st = err_set(&e, SLM_ERR_UNSUPPORTED, "the target's program has no verify function");
    else if (p.mtp && (p.draft || p.draft_fn))
        st = err_set(&e, SLM_ERR_INVALID_ARG, "mtp drafts with the target's own MTP block: no draft model or drafter");
    else if (p.draft) st = same_tokenizer(target, p.draft, &e);
    if (st == SLM_OK) {
        sp = al_calloc(&target->alloc, 1, sizeof *sp);
        if (sp) {
            sp->alloc = target->alloc;
            sp->hist = al_calloc(&sp->alloc, (size_t)target->n_ctx + 66, sizeof(int32_t));
            sp->feed = al_calloc(&sp->alloc, (size_t)p.draft_max + 1, sizeof(int32_t));
            sp->probs = al_calloc(&sp->alloc, (size_t)target->n_vocab, sizeof(float));
            sp->q = al_calloc(&sp->alloc, (size_t)p.draft_max * (size_t)target->n_vocab, sizeof(float));
        }
        if (!sp || !sp->hist || !sp->feed || !sp->probs || !sp->q) {
            slm_spec_destroy(sp);
            sp = NULL;
            st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
        } else if (p.mtp && (st = mtp_create(target, &sp->mtp, &e))) {
            slm_spec_destroy(sp);
            sp = NULL;
        }
    }
    if (st == SLM_OK) {
        sp->target = target;
        sp->draft = p.draft;
        sp->draft_fn = p.draft_fn;
        sp->draft_user_data = p.draft_user_data;
        sp->fixed = p.fixed;
        sp->lookup = !p.draft && !p.draft_fn && !p.mtp;
        lookup_policy_init(&sp->policy, p.verify_cost);
        sp->draft_max = sp->draft_len = p.draft_max;
        sp->backoff = 1;
        sp->sampler = p.sampler;
        sp->pending = -1;
        if (sp->draft) slm_session_reset(sp->draft);
        *out = sp;
    }
    err_copy_out(&e, err, err_cap);
    return st;
}

SLM_API void slm_spec_destroy(slm_spec *sp) {
    if (!sp) return;
    slm_allocator a = sp->alloc;
    mtp_destroy(sp->mtp);
    al_free(&a, sp->hist);
    al_free(&a, sp->feed);
    al_free(&a, sp->probs);
    al_free(&a, sp->q);
    al_free(&a, sp);
}

SLM_API void slm_spec_get_stats(const slm_spec *sp, slm_spec_stats *stats) {
    if (!stats) return;
    memset(stats, 0, sizeof *stats);
    if (!sp) return;
    *stats = sp->stats;
    stats->draft_len = sp->draft_len;
}

SLM_API size_t slm_spec_last_draft(const slm_spec *sp, int32_t *out, size_t cap, size_t *n_accepted) {
    if (n_accepted) *n_accepted = sp ? sp->last_ok : 0;
    if (!sp) return 0;
    if (out) memcpy(out, sp->feed + 1, (sp->last_draft < cap ? sp->last_draft : cap) * sizeof(int32_t));
    return sp->last_draft;
}

SLM_API const char *slm_spec_errmsg(const slm_spec *sp) { return sp ? sp->err.msg : SLM_NULL_HANDLE_MSG; }

/* Greedy drafts of the draft model after hist[0, n_hist) into draft[0, n_max): the draft session
 * first follows hist (prefix reuse: rolls back past rejected drafts, feeds what it lacks), with a
 * checkpoint there so the next rollback replays only accepted drafts. */
static slm_status draft_model(slm_spec *sp, size_t n_hist, int32_t *draft, size_t n_max, size_t *n_draft) {
    slm_session *d = sp->draft;
    *n_draft = 0;
    if (n_hist >= (size_t)d->n_ctx) return SLM_OK; /* the draft model's context is full: no drafts */
    if (n_max > (size_t)d->n_ctx - n_hist) n_max = (size_t)d->n_ctx - n_hist;
    const float *l = NULL;
    slm_status st = slm_session_sync(d, sp->hist, n_hist, &l, NULL);
    if (st) return err_set(&sp->err, st, "draft model: %s", slm_session_errmsg(d));
    sess_ckpt_take(d);
    for (size_t i = 0; i < n_max; i++) {
        if (sp->sampler) { /* x ~ q, q kept for the acceptance rule */
            float *q = sp->q + i * (size_t)d->n_vocab;
            sp->hist[n_hist + i] = 0;
            if ((st = slm_sampler_probs(sp->sampler, l, d->n_vocab, sp->hist, n_hist + i, q)) ||
                (st = slm_sampler_draw(sp->sampler, q, d->n_vocab, &draft[i])))
                return err_set(&sp->err, st, "draft model: sampling failed");
            sp->hist[n_hist + i] = draft[i];
        } else {
            draft[i] = sess_argmax(l, d->n_vocab);
        }
        *n_draft = i + 1;
        if (i + 1 < n_max && (st = slm_session_decode(d, draft[i], &l)))
            return err_set(&sp->err, st, "draft model: %s", slm_session_errmsg(d));
    }
    return SLM_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Draft length after a step that drafted n_draft tokens and had n_ok accepted: longer while all
 * are accepted, halved when fewer than half are; a rejected single draft pauses drafting for a
 * number of steps that doubles with each such pause (up to 32), so a drafter that is always wrong
 * costs next to nothing. */
static void adapt(slm_spec *sp, size_t n_draft, size_t n_ok) {
    if (sp->fixed || n_draft == 0) return;
    if (n_ok == n_draft) {
        if (sp->draft_len < sp->draft_max) sp->draft_len++;
    } else if (2 * n_ok < n_draft) {
        if (sp->draft_len == 1 && n_ok == 0) {
            sp->skip = sp->backoff;
            if (sp->backoff < 32) sp->backoff *= 2;
        }
        sp->draft_len = sp->draft_len > 1 ? sp->draft_len / 2 : 1;
    }
    if (n_ok > 0) sp->backoff = 1;
}

/* The speculative sampling rule over the verify's rows: draft token x = feed[1 + i] is kept with
 * probability min(1, p(x)/q(x)) (q: the draft model's distribution, or a point mass on x); the
 * first rejected one is replaced by a draw from norm(max(0, p - q)) (p itself if that is 0). */
static slm_status accept_sampled(slm_spec *sp, const float *rows, size_t n_hist, size_t n_draft, size_t *n_ok,
                                 int32_t *replacement) {
    int32_t v = sp->target->n_vocab;
    slm_status st;
    for (size_t i = 0; i < n_draft; i++) sp->hist[n_hist + i] = sp->feed[1 + i];
    for (size_t i = 0; i < n_draft; i++) {
        int32_t x = sp->feed[1 + i];
        const float *q = sp->draft ? sp->q + i * (size_t)v : NULL;
        if ((st = slm_sampler_probs(sp->sampler, rows + i * (size_t)v, v, sp->hist, n_hist + i, sp->probs)))
            return err_set(&sp->err, st, "sampling failed");
        double qx = q ? (double)q[x] : 1.0;
        if (slm_sampler_uniform(sp->sampler) * qx < (double)sp->probs[x]) {
            (*n_ok)++;
            continue;
        }
        double left = 0.0;
        for (int32_t j = 0; j < v; j++) {
            float qj = q ? q[j] : j == x ? 1.0f : 0.0f;
            float r = sp->probs[j] - qj;
            left += r > 0 ? r : 0;
        }
        if (left > 0.0)
            for (int32_t j = 0; j < v; j++) {
                float qj = q ? q[j] : j == x ? 1.0f : 0.0f, r = sp->probs[j] - qj;
                sp->probs[j] = r > 0 ? r : 0.0f;
            }
        if ((st = slm_sampler_draw(sp->sampler, sp->probs, v, replacement)))
            return err_set(&sp->err, st, "sampling failed");
        break;
    }
    return SLM_OK;
}

SLM_API slm_status slm_spec_step(slm_spec *sp, size_t n_max, int32_t *tokens, size_t *n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (!sp) return SLM_ERR_INVALID_ARG;
    err_clear(&sp->err);
    slm_session *t = sp->target;
    if (!tokens || !n_tokens || n_max == 0)
        return err_set(&sp->err, SLM_ERR_INVALID_ARG, "slm_spec_step: tokens, n_tokens and n_max > 0 are required");
    if (!t->logits_valid)
        return err_set(&sp->err, SLM_ERR_STATE, "the target session has no logits (prefill or decode first)");
    if (t->pos >= t->n_ctx)
        return err_set(&sp->err, SLM_ERR_CONTEXT_FULL, "the target's %d-token context is full", t->n_ctx);
    int32_t v = t->n_vocab;
    size_t room = (size_t)(t->n_ctx - t->pos), k_max = (size_t)(sp->lookup ? sp->draft_max : sp->draft_len);
    if (sp->skip > 0) {
        sp->skip--;
        k_max = 0;
    }
    if (k_max > n_max - 1) k_max = n_max - 1;
    if (k_max > room - 1) k_max = room - 1;
    slm_status st = SLM_OK;
    memcpy(sp->hist, t->history, (size_t)t->pos * sizeof(int32_t));
    if (!sp->sampler) {
        sp->feed[0] = sess_argmax(t->logits, v);
    } else if (sp->pending >= 0 && sp->pending_pos == t->pos) {
        sp->feed[0] = sp->pending;
    } else if ((st = slm_sampler_probs(sp->sampler, t->logits, v, sp->hist, (size_t)t->pos, sp->probs)) ||
               (st = slm_sampler_draw(sp->sampler, sp->probs, v, &sp->feed[0]))) {
        return err_set(&sp->err, st, "sampling failed");
    }
    sp->pending = -1;
    size_t n_hist = (size_t)t->pos + 1, n_draft = 0;
    sp->hist[t->pos] = sp->feed[0];
    if (k_max > 0 && sp->draft) {
        if ((st = draft_model(sp, n_hist, sp->feed + 1, k_max, &n_draft))) return st;
    } else if (k_max > 0 && sp->mtp) {
        if ((st = mtp_draft(sp->mtp, t, sp->feed[0], sp->feed + 1, k_max, &n_draft, &sp->err))) return st;
    } else if (k_max > 0 && sp->lookup) {
        sp->match = lookup_find(sp->hist, n_hist);
        n_draft = sp->fixed ? (sp->match.n_avail < k_max ? sp->match.n_avail : k_max)
                            : lookup_plan(&sp->policy, &sp->match, k_max);
        memcpy(sp->feed + 1, sp->hist + sp->match.start, n_draft * sizeof(int32_t));
    } else if (k_max > 0) {
        n_draft = sp->draft_fn(sp->draft_user_data, sp->hist, n_hist, sp->feed + 1, k_max);
        if (n_draft > k_max) n_draft = k_max;
    }
    for (size_t i = 0; i < n_draft; i++) /* a drafter's ids are data: the draft ends at a bad one */
        if (sp->feed[1 + i] < 0 || sp->feed[1 + i] >= t->n_token_ids) n_draft = i;
    const float *rows = NULL;
    /* greedy only: with a sampler the drafts decide which random numbers are drawn, so they must
     * not depend on timing, or a seeded run would not repeat */
    bool timed = sp->lookup && !sp->fixed && !sp->sampler;
    double t0 = timed ? now_s() : 0.0;
    if ((st = slm_session_verify(t, sp->feed, 1 + n_draft, &rows)))
        return err_set(&sp->err, st, "verify: %s", slm_session_errmsg(t));
    size_t n_ok = 0;
    int32_t replacement = -1;
    uint64_t replays = t->n_accept_replays;
    if (!sp->sampler) {
        while (n_ok < n_draft && sp->feed[1 + n_ok] == sess_argmax(rows + n_ok * (size_t)v, v)) n_ok++;
    } else if ((st = accept_sampled(sp, rows, n_hist, n_draft, &n_ok, &replacement))) {
        (void)slm_session_accept(t, 0, NULL);
        return st;
    }
    if ((st = slm_session_accept(t, 1 + n_ok, NULL))) {
        err_set(&sp->err, st, "accept: %s", slm_session_errmsg(t));
        (void)slm_session_accept(t, 0, NULL);
        return st;
    }
    memcpy(tokens, sp->feed, (1 + n_ok) * sizeof(int32_t));
    sp->last_draft = n_draft;
    sp->last_ok = n_ok;
    sp->pending = replacement;
    sp->pending_pos = t->pos;
    *n_tokens = 1 + n_ok;
    sp->stats.n_steps++;
    sp->stats.n_drafted += n_draft;
    sp->stats.n_accepted += n_ok;
    sp->stats.n_replays += t->n_accept_replays - replays;
    if (!sp->lookup) {
        adapt(sp, n_draft, n_ok);
    } else if (!sp->fixed && k_max > 0) {
        lookup_learn(&sp->policy, &sp->match, n_draft, n_ok);
        if (timed) lookup_time(&sp->policy, n_draft, now_s() - t0);
        sp->draft_len = (int32_t)n_draft;
    }
    return SLM_OK;
}
